"""Deployment files -> vLLM launches with positions.

Recognises Kubernetes objects (any PodSpec: Deployment, StatefulSet, Pod, Job, LeaderWorkerSet,
KServe InferenceService predictors and `model` specs, ServingRuntime), docker-compose services,
vLLM `--config` YAML files, and shell scripts / plain launch lines. Every argument keeps its file
line and column (and YAML path), so findings point at the exact token.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Optional

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvplan.ingest.flags import KNOWN_FLAGS, MODELLED, REMOVED_FLAGS
from kvplan.ingest.limits import compose_all as bounded_compose_all
from kvplan.lint.shell import (
    VLLM_IMAGE, Launch, Pos, ShellSyntaxError, Tok, VarValue, commands, expand, find_launch, lex,
    split_value, var_name,
)

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Environment variables that images and charts commonly read extra engine arguments from.
EXTRA_ARGS_ENV = re.compile(r"^(?:VLLM_)?(?:EXTRA_|ADDITIONAL_|SERVE_|ENGINE_|SERVER_)?ARGS$|^VLLM_\w*ARGS$|\w*EXTRA_ARGS$")
GPU_LABEL_KEYS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator",
                  "karpenter.k8s.aws/instance-gpu-name", "nvidia.com/gpu.family", "gpu.product")
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
IGNORE_ANNOTATIONS = ("kvplan.dev/ignore", "kvplan.io/ignore")


@dataclass(frozen=True)
class RawFinding:
    """A lint finding before filtering: code, message and the token it points at."""

    code: str
    message: str
    tok: Tok
    fix: Optional[str] = None
    model: Optional[str] = None
    layers: tuple[int, ...] = ()
    severity: Optional[str] = None  # a planner finding's own severity when it differs from its rule's


@dataclass
class Site:
    """One vLLM launch and the facts around it (GPU hints, model hints)."""

    launch: Launch
    anchor: Tok
    model_hint: Optional[Tok] = None
    gpu_label: Optional[Tok] = None
    gpu_count: Optional[int] = None
    group_size: int = 1
    unresolved: tuple[Tok, ...] = ()


@dataclass(frozen=True)
class Annotation:
    """A `kvplan.dev/ignore` annotation (or compose label) and the lines it covers."""

    value: str
    tok: Tok
    first_line: int
    last_line: int


@dataclass
class Extracted:
    """What one file yields."""

    kind: str = "unknown"
    sites: list[Site] = field(default_factory=list)
    findings: list[RawFinding] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)
    note: Optional[str] = None


class LineIndex:
    """Character offset -> 1-based (line, column)."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def pos(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1


# ----------------------------------------------------------------------------- YAML node helpers
def _mget(node: Optional[Node], key: str) -> Optional[Node]:
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.value == key:
                return v
    return None


def _items(node: Optional[Node]) -> list[tuple[ScalarNode, Node]]:
    if isinstance(node, MappingNode):
        return [(k, v) for k, v in node.value if isinstance(k, ScalarNode)]
    return []


def _seq(node: Optional[Node]) -> list[Node]:
    return list(node.value) if isinstance(node, SequenceNode) else []


def _scalar(node: Optional[Node]) -> Optional[str]:
    return node.value if isinstance(node, ScalarNode) else None


class _Doc:
    """Positions inside one YAML file."""

    def __init__(self, li: LineIndex):
        self.li = li

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

    def tok(self, node: Node, path: str, value: Optional[str] = None) -> Tok:
        if isinstance(node, ScalarNode):
            line, col = self.pos_in(node)(0) if node.value else self.li.pos(node.start_mark.index)
            return Tok(node.value if value is None else value, line, col, path, quoted=node.style in ('"', "'"))
        return Tok(value or "", node.start_mark.line + 1, node.start_mark.column + 1, path)

    def key_tok(self, key: ScalarNode, path: str) -> Tok:
        return Tok(key.value, key.start_mark.line + 1, key.start_mark.column + 1, path)


# ----------------------------------------------------------------------------- argv -> launches
@dataclass
class _Item:
    tok: Tok
    node: Optional[ScalarNode] = None  # YAML scalar the item came from (for `sh -c` scripts)


_SHELLS = {"sh", "bash", "ash", "dash", "zsh"}
_FLAG_WITH_SPACE = re.compile(r"^--?[A-Za-z][\w-]*\s+\S")


def _word_pos(t: Tok) -> Pos:
    return lambda k: (t.line, t.col + k)


def _launches_from_argv(doc: Optional[_Doc], items: list[_Item], env: dict[str, VarValue], implicit: Optional[Tok],
                        out: Extracted, yaml_list: bool) -> list[tuple[Launch, tuple[Tok, ...]]]:
    """Launches in one container/service argv (command + args), including `sh -c 'script'`."""
    found: list[tuple[Launch, tuple[Tok, ...]]] = []
    if yaml_list:  # Kubernetes substitutes $(VAR) in list items without word splitting
        items = [_Item(t, it.node if t is it.tok else None) for it in items for t in expand([it.tok], env, split=False)]
        for it in items:
            if _FLAG_WITH_SPACE.match(it.tok.value) and "\n" not in it.tok.value:
                flag, _, value = it.tok.value.partition(" ")
                out.findings.append(RawFinding(
                    "KV809", f"argument {it.tok.value!r} reaches vLLM as one argv entry; argparse reads it as a "
                             "positional and vLLM exits with 'unrecognized arguments'.", it.tok,
                    fix=f"Write {flag}={value.strip()} or split it into two list items."))
    words = [it.tok for it in items]
    if words and words[0].value.rsplit("/", 1)[-1] in _SHELLS:
        for j in range(1, len(words) - 1):
            if words[j].value.startswith("-") and "c" in words[j].value.lstrip("-") and len(words[j].value) <= 4:
                script_item = items[j + 1]
                pos = doc.pos_in(script_item.node) if (doc and script_item.node) else _word_pos(script_item.tok)
                found += _launches_in_script(script_item.tok.value, pos, script_item.tok.yaml_path, env, out)
                return found
        return found
    expanded = expand(words, env)
    launch = find_launch(expanded, implicit_vllm=False)
    if launch is None and implicit is not None:
        launch = Launch(implicit, tuple(expanded))
    if launch is not None:
        found.append((launch, _unresolved(launch.args)))
    return found


def _unresolved(args: tuple[Tok, ...]) -> tuple[Tok, ...]:
    return tuple(t for t in args if "$" in t.value and (var_name(t.value)[0] or "${" in t.value or "$(" in t.value))


def _launches_in_script(script: str, pos: Pos, yaml_path: Optional[str], env: dict[str, VarValue],
                        out: Extracted) -> list[tuple[Launch, tuple[Tok, ...]]]:
    env = dict(env)
    found: list[tuple[Launch, tuple[Tok, ...]]] = []
    for words in commands(lex_resilient(script, pos, yaml_path, out)):
        values = [w.value for w in words]
        if all(re.match(r"^[A-Za-z_]\w*=", v) for v in values) or (values[0] == "export" and len(values) > 1):
            for w in words:
                name, eq, val = w.value.partition("=")
                if eq and re.match(r"^[A-Za-z_]\w*$", name):
                    vtok = Tok(val, w.line, w.col + len(name) + 1 + (1 if w.quoted else 0), w.yaml_path)
                    env[name] = VarValue(val, vtok)
            continue
        launch = find_launch(expand(words, env))
        if launch is not None:
            found.append((launch, _unresolved(launch.args)))
    return found


def lex_resilient(s: str, pos: Pos, yaml_path: Optional[str], out: Extracted, base: int = 0) -> list[Tok]:
    """lex(), but an unterminated quote becomes finding KV802 and lexing resumes on the next line."""
    toks: list[Tok] = []
    for _ in range(1000):
        try:
            toks += lex(s[base:], lambda k, b=base: pos(b + k), yaml_path)
            return toks
        except ShellSyntaxError as e:
            at = base + e.offset
            line, col = pos(at)
            out.findings.append(RawFinding(
                "KV802", f"{e} in the launch line: the shell stops here and the command does not run as written.",
                Tok("", line, col, yaml_path)))
            line_start = s.rfind("\n", 0, at) + 1
            if line_start > base:
                try:
                    toks += lex(s[base:line_start], lambda k, b=base: pos(b + k), yaml_path)
                except ShellSyntaxError:
                    pass
            nl = s.find("\n", at)
            if nl < 0:
                return toks
            toks.append(Tok("\n", *pos(nl), yaml_path, op=True))
            base = nl + 1
    return toks


# ----------------------------------------------------------------------------- Kubernetes
@dataclass(frozen=True)
class _PodCtx:
    gpu_label: Optional[Tok] = None
    group_size: int = 1


def _gpu_label(doc: _Doc, spec: Node, path: str) -> Optional[Tok]:
    for k, v in _items(_mget(spec, "nodeSelector")):
        if k.value in GPU_LABEL_KEYS and isinstance(v, ScalarNode):
            return doc.tok(v, f"{path}.nodeSelector.{k.value}")
    terms = _mget(_mget(_mget(_mget(spec, "affinity"), "nodeAffinity"),
                        "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms")
    for ti, term in enumerate(_seq(terms)):
        for ei, expr in enumerate(_seq(_mget(term, "matchExpressions"))):
            if _scalar(_mget(expr, "key")) in GPU_LABEL_KEYS and _scalar(_mget(expr, "operator")) == "In":
                vals = _seq(_mget(expr, "values"))
                if vals and isinstance(vals[0], ScalarNode):
                    return doc.tok(vals[0], f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                                            f"Execution.nodeSelectorTerms[{ti}].matchExpressions[{ei}].values[0]")
    return None


def _gpu_count(resources: Optional[Node]) -> Optional[int]:
    for section in ("limits", "requests"):
        for key in GPU_RESOURCES:
            v = _scalar(_mget(_mget(resources, section), key))
            if v is not None and v.strip().isdigit():
                return int(v)
    return None


def _env(doc: _Doc, node: Optional[Node], path: str) -> tuple[dict[str, VarValue], list[tuple[str, VarValue]]]:
    env: dict[str, VarValue] = {}
    ordered: list[tuple[str, VarValue]] = []
    for i, e in enumerate(_seq(node)):
        name, vnode = _scalar(_mget(e, "name")), _mget(e, "value")
        if name and isinstance(vnode, ScalarNode):
            vv = VarValue(vnode.value, doc.tok(vnode, f"{path}[{i}].value"))
            env[name] = vv
            ordered.append((name, vv))
    return env, ordered


def _referenced(name: str, texts: list[str]) -> bool:
    pat = re.compile(r"\$(?:\(" + name + r"\)|\{" + name + r"[}:]|" + name + r"\b)")
    return any(pat.search(t) for t in texts)


def _container(doc: _Doc, c: Node, path: str, pod: _PodCtx, out: Extracted, dialect: str = "vllm",
               model_hint: Optional[Tok] = None) -> None:
    image = _scalar(_mget(c, "image")) or ""
    env, ordered = _env(doc, _mget(c, "env"), f"{path}.env")
    items: list[_Item] = []
    for key in ("command", "args"):
        node = _mget(c, key)
        if isinstance(node, ScalarNode):  # a string where a list belongs: kubectl rejects it, lint it anyway
            node = SequenceNode("tag:yaml.org,2002:seq", [node])
        for i, it in enumerate(_seq(node)):
            if isinstance(it, ScalarNode):
                items.append(_Item(doc.tok(it, f"{path}.{key}[{i}]"), it))
    has_command = _mget(c, "command") is not None
    implicit = None
    if dialect == "kserve-hf":
        implicit = doc.tok(_mget(c, "modelFormat") or c, f"{path}")
    elif not has_command and VLLM_IMAGE.search(image):
        inode = _mget(c, "image")
        implicit = doc.tok(inode, f"{path}.image") if inode is not None else None
    launches = _launches_from_argv(doc, items, env, implicit, out, yaml_list=True)
    texts = [it.tok.value for it in items]
    for launch, unresolved in launches:
        extra: list[Tok] = []
        for name, vv in ordered:
            if EXTRA_ARGS_ENV.match(name) and not _referenced(name, texts):
                extra += split_value(vv.value, vv.tok)
        args = launch.args + tuple(extra)
        launch = Launch(launch.launcher, args, "kserve-hf" if dialect == "kserve-hf" else launch.dialect)
        count = _gpu_count(_mget(c, "resources"))
        out.sites.append(Site(launch, launch.launcher, model_hint=model_hint, gpu_label=pod.gpu_label,
                              gpu_count=count, group_size=pod.group_size,
                              unresolved=unresolved + _unresolved(tuple(extra))))


def _walk_k8s(doc: _Doc, node: Node, path: str, pod: _PodCtx, out: Extracted) -> None:
    if isinstance(node, SequenceNode):
        for i, n in enumerate(node.value):
            _walk_k8s(doc, n, f"{path}[{i}]", pod, out)
        return
    if not isinstance(node, MappingNode):
        return
    label = _gpu_label(doc, node, path) if (_mget(node, "containers") or _mget(node, "model")) else None
    here = _PodCtx(label or pod.gpu_label, pod.group_size)
    lwt = _mget(node, "leaderWorkerTemplate")
    for k, v in _items(node):
        p = f"{path}.{k.value}" if path else k.value
        if k.value == "containers" and isinstance(v, SequenceNode):
            for i, c in enumerate(v.value):
                _container(doc, c, f"{p}[{i}]", here, out)
        elif k.value == "model" and isinstance(v, MappingNode) and (
                _mget(v, "modelFormat") or _mget(v, "storageUri") or _mget(v, "runtime")):
            fmt = (_scalar(_mget(_mget(v, "modelFormat"), "name")) or "") + (_scalar(_mget(v, "runtime")) or "")
            dialect = "kserve-hf" if re.search(r"huggingface|vllm", fmt, re.I) or not fmt else "other"
            if dialect == "other":
                continue
            uri = _mget(v, "storageUri")
            hint = None
            if isinstance(uri, ScalarNode) and uri.value.startswith("hf://"):
                hint = doc.tok(uri, f"{p}.storageUri", uri.value[5:].split(":")[0])
            _container(doc, v, p, here, out, dialect="kserve-hf", model_hint=hint)
        elif k.value == "leaderWorkerTemplate" and isinstance(v, MappingNode):
            size = _scalar(_mget(v, "size"))
            _walk_k8s(doc, v, p, _PodCtx(here.gpu_label, int(size) if size and size.isdigit() else 1), out)
        elif k.value not in ("metadata", "status") and (lwt is None or k.value != "leaderWorkerTemplate"):
            _walk_k8s(doc, v, p, here, out)


def _annotations(doc: _Doc, node: Node, path: str, first: int, last: int, out: Extracted) -> None:
    """Every metadata.annotations / compose labels entry named kvplan.dev/ignore in the document."""
    if isinstance(node, SequenceNode):
        for i, n in enumerate(node.value):
            _annotations(doc, n, f"{path}[{i}]", first, last, out)
        return
    if not isinstance(node, MappingNode):
        return
    for k, v in _items(node):
        p = f"{path}.{k.value}" if path else k.value
        if k.value in ("annotations", "labels") and isinstance(v, MappingNode):
            for ak, av in _items(v):
                if ak.value in IGNORE_ANNOTATIONS and isinstance(av, ScalarNode):
                    out.annotations.append(Annotation(av.value, doc.tok(av, f"{p}.{ak.value}"), first, last))
        elif k.value == "labels" and isinstance(v, SequenceNode):  # compose list form "key=value"
            for i, item in enumerate(v.value):
                s = _scalar(item) or ""
                key, eq, val = s.partition("=")
                if eq and key.strip() in IGNORE_ANNOTATIONS:
                    t = doc.tok(item, f"{p}[{i}]")
                    out.annotations.append(Annotation(val, t.at(len(key) + 1), first, last))
        else:
            _annotations(doc, v, p, first, last, out)


# ----------------------------------------------------------------------------- compose
def _compose(doc: _Doc, services: MappingNode, out: Extracted) -> None:
    for sk, svc in _items(services):
        path = f"services.{sk.value}"
        image = _scalar(_mget(svc, "image")) or ""
        env: dict[str, VarValue] = {}
        ordered: list[tuple[str, VarValue]] = []
        enode = _mget(svc, "environment")
        for i, e in enumerate(_seq(enode)):
            s = _scalar(e) or ""
            name, eq, val = s.partition("=")
            if eq:
                t = doc.tok(e, f"{path}.environment[{i}]")
                vv = VarValue(val, t.at(len(name) + 1))
                env[name] = vv
                ordered.append((name, vv))
        for k, v in _items(enode):
            if isinstance(v, ScalarNode):
                vv = VarValue(v.value, doc.tok(v, f"{path}.environment.{k.value}"))
                env[k.value] = vv
                ordered.append((k.value, vv))
        items: list[_Item] = []
        yaml_list = True
        for key in ("entrypoint", "command"):
            node = _mget(svc, key)
            if isinstance(node, ScalarNode):  # compose splits a string command shell-like (no shell)
                yaml_list = False
                for t in lex_resilient(node.value, doc.pos_in(node), f"{path}.{key}", out):
                    if not t.op:
                        items.append(_Item(t))
            for i, it in enumerate(_seq(node)):
                if isinstance(it, ScalarNode):
                    items.append(_Item(doc.tok(it, f"{path}.{key}[{i}]"), it))
        implicit = None
        if _mget(svc, "entrypoint") is None and VLLM_IMAGE.search(image):
            implicit = doc.tok(_mget(svc, "image"), f"{path}.image")
        launches = _launches_from_argv(doc, items, env, implicit, out, yaml_list=yaml_list)
        texts = [it.tok.value for it in items]
        count = None
        for dev in _seq(_mget(_mget(_mget(_mget(svc, "deploy"), "resources"), "reservations"), "devices")):
            c = _scalar(_mget(dev, "count"))
            if c and c.isdigit():
                count = int(c)
            ids = _seq(_mget(dev, "device_ids"))
            if ids:
                count = len(ids)
        for launch, unresolved in launches:
            extra: list[Tok] = []
            for name, vv in ordered:
                if EXTRA_ARGS_ENV.match(name) and not _referenced(name, texts):
                    extra += split_value(vv.value, vv.tok)
            launch = Launch(launch.launcher, launch.args + tuple(extra), launch.dialect)
            out.sites.append(Site(launch, launch.launcher, gpu_count=count, unresolved=unresolved))


# ----------------------------------------------------------------------------- vLLM --config YAML
_FLAG_NAMES = {f.lstrip("-") for f in (*KNOWN_FLAGS, *REMOVED_FLAGS, *MODELLED) if f.startswith("--")}


def _is_vllm_config(node: Node) -> bool:
    if not isinstance(node, MappingNode) or _mget(node, "apiVersion") or _mget(node, "services"):
        return False
    keys = [k.value.replace("_", "-") for k, _ in _items(node)]
    return bool(keys) and sum(k in _FLAG_NAMES for k in keys) >= max(1, len(keys) // 3)


def _vllm_config(doc: _Doc, node: MappingNode, out: Extracted) -> None:
    args: list[Tok] = []
    first: Optional[Tok] = None
    for k, v in _items(node):
        kt = doc.key_tok(k, k.value)
        first = first or kt
        flag = Tok("--" + k.value, kt.line, kt.col, kt.yaml_path)
        if isinstance(v, ScalarNode):
            if v.tag.endswith(":bool") or v.value.lower() in ("true", "false") and v.style is None:
                if v.value.lower() == "true":
                    args.append(flag)
                continue
            args += [flag, doc.tok(v, k.value)]
        elif isinstance(v, SequenceNode):
            args.append(flag)
            args += [doc.tok(x, f"{k.value}[{i}]") for i, x in enumerate(v.value) if isinstance(x, ScalarNode)]
        elif isinstance(v, MappingNode):
            import json  # noqa: PLC0415
            args += [flag, doc.tok(v, k.value, json.dumps(yaml.load(yaml.serialize(v), Loader=_Loader)))]
    if first is not None:
        launcher = Tok("vllm-config", first.line, first.col, first.yaml_path)
        out.sites.append(Site(Launch(launcher, tuple(args)), first, unresolved=_unresolved(tuple(args))))


# ----------------------------------------------------------------------------- files
def extract_yaml(text: str) -> Extracted:
    """A YAML file: every document; a syntax error is finding KV801 and earlier documents still count."""
    out = Extracted()
    li = LineIndex(text)
    doc = _Doc(li)
    kinds: list[str] = []
    try:
        for node in bounded_compose_all(text, "YAML"):  # size/depth/alias limits: InputLimitError (KV820/KV821)
            if node is None:
                continue
            first, last = node.start_mark.line + 1, node.end_mark.line + 1
            if _mget(node, "apiVersion") is not None and _mget(node, "kind") is not None:
                kinds.append("kubernetes")
                _walk_k8s(doc, node, "", _PodCtx(), out)
                _annotations(doc, node, "", first, last, out)
            elif isinstance(_mget(node, "services"), MappingNode):
                kinds.append("compose")
                _compose(doc, _mget(node, "services"), out)  # type: ignore[arg-type]
                _annotations(doc, node, "", first, last, out)
            elif _is_vllm_config(node):
                kinds.append("vllm-config")
                _vllm_config(doc, node, out)  # type: ignore[arg-type]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        ctx = getattr(e, "context", None)
        out.findings.append(RawFinding("KV801", f"YAML does not parse: {problem}" + (f" ({ctx})" if ctx else "") + ".",
                                       Tok("", line, col)))
        kinds.append(kinds[-1] if kinds else "unknown")
    out.kind = kinds[0] if kinds else "unknown"
    return out


_LAUNCH_HINT = re.compile(r"vllm\s+serve|vllm\.entrypoints|vllm-openai|huggingfaceserver")


def extract_text(text: str) -> Extracted:
    """A shell script or a file of launch lines."""
    out = Extracted(kind="shell" if text.startswith("#!") else "text")
    if not _LAUNCH_HINT.search(text):
        return out
    li = LineIndex(text)
    for launch, unresolved in _launches_in_script(text, li.pos, None, {}, out):
        out.sites.append(Site(launch, launch.launcher, unresolved=unresolved))
    return out
