"""YAML node helpers shared by the YAML source readers: lookups, positions, embedded YAML, annotations."""
from __future__ import annotations

from dataclasses import replace

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvplan.ingest.limits import compose_all as bounded_compose_all
from kvplan.lint.extracted import (
    GO_TEMPLATE,
    IGNORE_ANNOTATIONS,
    Annotation,
    Extracted,
    LineIndex,
    RawFinding,
)
from kvplan.lint.shell import Launch, Pos, Tok


def mget(node: Node | None, key: str) -> Node | None:
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.value == key:
                return v
    return None


def mitems(node: Node | None) -> list[tuple[ScalarNode, Node]]:
    if isinstance(node, MappingNode):
        return [(k, v) for k, v in node.value if isinstance(k, ScalarNode)]
    return []


def seq(node: Node | None) -> list[Node]:
    return list(node.value) if isinstance(node, SequenceNode) else []


def scalar(node: Node | None) -> str | None:
    return node.value if isinstance(node, ScalarNode) else None


class YamlDoc:
    """Positions inside one YAML file."""

    def __init__(self, li: LineIndex):
        self.li = li
        self.objects: dict[str, dict[str, ScalarNode]] = {}  # ConfigMap data / Secret stringData by name

    def pos_in(self, node: ScalarNode) -> Pos:
        """Offset inside the scalar's value -> file (line, column), through quotes, escapes and block scalars."""
        text, val = self.li.text, node.value
        start, end = node.start_mark.index, node.end_mark.index
        raw = text[start:end]
        off = 1 if node.style in ('"', "'") else 0
        if "\n" not in raw and raw[off:off + len(val)] == val:
            return lambda k: self.li.pos(start + off + k)
        mapping: list[int] = []
        p = 0
        for ch in val:
            q = raw.find(ch, p, p + 400)
            if q < 0:
                mapping.append(p)
            else:
                mapping.append(q)
                p = q + 1
        last = (mapping[-1] + 1) if mapping else off

        def pos(k: int) -> tuple[int, int]:
            return self.li.pos(start + (mapping[k] if k < len(mapping) else last))
        return pos

    def tok(self, node: Node, path: str, value: str | None = None) -> Tok:
        if isinstance(node, ScalarNode):
            line, col = self.pos_in(node)(0) if node.value else self.li.pos(node.start_mark.index)
            v = node.value if value is None else value
            return Tok(v, line, col, path, quoted=node.style in ('"', "'"), unknown=bool(GO_TEMPLATE.search(v)))
        return Tok(value or "", node.start_mark.line + 1, node.start_mark.column + 1, path)

    def key_tok(self, key: ScalarNode, path: str) -> Tok:
        return Tok(key.value, key.start_mark.line + 1, key.start_mark.column + 1, path)



def embedded_yaml(doc: YamlDoc, node: ScalarNode, path: str, what: str, errors: Extracted | None = None):
    """YAML inside a block scalar (a Kustomize inline patch, a RayService's serveConfigV2): its documents, a
    YamlDoc for positions inside it, and the function mapping those positions back into the file. A syntax error
    is KV801 in `errors` (when given) at its place in the file."""
    raw = doc.li.text[node.start_mark.index:node.end_mark.index]
    first_nl = raw.find("\n")
    body = raw[first_nl + 1:] if first_nl >= 0 else raw
    indent = len(body) - len(body.lstrip(" "))
    line0 = node.start_mark.line + 1 + (1 if first_nl >= 0 else 0)
    try:
        subs = [n for n in bounded_compose_all(node.value, what) if n is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        if errors is not None and mark is not None and node.style in ("|", ">"):
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            errors.findings.append(RawFinding("KV801", f"{what} YAML does not parse: {problem}.",
                                              Tok("", line0 + mark.line, mark.column + 1 + indent, path)))
        return None
    inner = YamlDoc(LineIndex(node.value))
    inner.objects = doc.objects

    def shift(t: Tok) -> Tok:
        return replace(t, line=line0 + t.line - 1, col=t.col + indent,
                       yaml_path=f"{path}>{t.yaml_path}" if t.yaml_path else path)
    return subs, inner, shift


def shifted_into(out: Extracted, sub_out: Extracted, shift, partial: bool) -> None:
    for f in sub_out.findings:
        out.findings.append(replace(f, tok=shift(f.tok)))
    for site in sub_out.sites:
        launch = Launch(shift(site.launch.launcher), tuple(shift(t) for t in site.launch.args), site.launch.dialect)
        out.sites.append(replace(site, launch=launch, anchor=shift(site.anchor), partial=partial or site.partial,
                                 image=shift(site.image) if site.image else site.image,
                                 gpu_label=shift(site.gpu_label) if site.gpu_label else None,
                                 model_hint=shift(site.model_hint) if site.model_hint else None))



def collect_annotations(doc: YamlDoc, node: Node, path: str, first: int, last: int, out: Extracted) -> None:
    """Every metadata.annotations / compose labels entry named kvplan.dev/ignore in the document."""
    if isinstance(node, SequenceNode):
        for i, n in enumerate(node.value):
            collect_annotations(doc, n, f"{path}[{i}]", first, last, out)
        return
    if not isinstance(node, MappingNode):
        return
    for k, v in mitems(node):
        p = f"{path}.{k.value}" if path else k.value
        if k.value in ("annotations", "labels") and isinstance(v, MappingNode):
            for ak, av in mitems(v):
                if ak.value in IGNORE_ANNOTATIONS and isinstance(av, ScalarNode):
                    out.annotations.append(Annotation(av.value, doc.tok(av, f"{p}.{ak.value}"), first, last))
        elif k.value == "labels" and isinstance(v, SequenceNode):  # compose list form "key=value"
            for i, item in enumerate(v.value):
                s = scalar(item) or ""
                key, eq, val = s.partition("=")
                if eq and key.strip() in IGNORE_ANNOTATIONS:
                    t = doc.tok(item, f"{p}[{i}]")
                    out.annotations.append(Annotation(val, t.at(len(key) + 1), first, last))
        else:
            collect_annotations(doc, v, p, first, last, out)



def collect_objects(doc: YamlDoc, nodes: list[Node]) -> None:
    """ConfigMap `data` and Secret `stringData` of the file, for env valueFrom / envFrom lookups."""
    for node in nodes:
        kind = scalar(mget(node, "kind"))
        name = scalar(mget(mget(node, "metadata"), "name"))
        if kind in ("ConfigMap", "Secret") and name:
            data = mget(node, "data" if kind == "ConfigMap" else "stringData")
            doc.objects[name] = {k.value: v for k, v in mitems(data) if isinstance(v, ScalarNode)}

