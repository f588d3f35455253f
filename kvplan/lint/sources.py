"""Deployment files -> vLLM launches with positions.

Recognises Kubernetes objects (any object with a `containers` list: Deployment, StatefulSet, Pod,
Job, LeaderWorkerSet, DisaggregatedSet, KServe InferenceService predictors, `model` specs and
runtime templates, RayJob entrypoints, Kustomize patches), docker-compose services, Helm values,
vLLM `--config` YAML files, and shell scripts / plain launch lines. Variables are expanded the way
Kubernetes, compose and the shell expand them; a value only known at run time is an `unknown`
token. Every argument keeps its file line and column (and YAML path), so findings point at the
exact token.
"""
from __future__ import annotations

import bisect
import contextlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvplan.ingest.flags import KNOWN_FLAGS, MODELLED, REMOVED_FLAGS
from kvplan.ingest.limits import compose_all as bounded_compose_all
from kvplan.lint.shell import (
    VLLM_IMAGE,
    Launch,
    Pos,
    ShellSyntaxError,
    Tok,
    VarValue,
    commands,
    expand,
    expand_k8s,
    find_launch,
    interpolate,
    lex,
    split_value,
)
from kvplan.model.plan import Subject

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Environment variables that images and charts commonly read extra engine arguments from.
EXTRA_ARGS_ENV = re.compile(
    r"^(?:VLLM_)?(?:EXTRA_|ADDITIONAL_|SERVE_|ENGINE_|SERVER_)?ARGS$|^VLLM_\w*ARGS$|\w*EXTRA_ARGS$")
GPU_LABEL_KEYS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator",
                  "karpenter.k8s.aws/instance-gpu-name", "nvidia.com/gpu.family", "gpu.product")
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
IGNORE_ANNOTATIONS = ("kvplan.dev/ignore", "kvplan.io/ignore")
# A Go template action ({{ .Spec.Model.Name }}, {{- if ... }}) that a controller or Helm fills in later.
GO_TEMPLATE = re.compile(r"\{\{-?\s*[.$A-Za-z(/\"]")
_GO_ACTION = re.compile(r"\{\{.*?\}\}", re.S)


@dataclass(frozen=True)
class RawFinding:
    """A lint finding before filtering: code, message and the token it points at."""

    code: str
    message: str
    tok: Tok
    fix: str | None = None
    model: str | None = None
    layers: tuple[int, ...] = ()
    severity: str | None = None  # a planner finding's own severity when it differs from its rule's
    skipped_rules: tuple[str, ...] = ()  # KV804: the rules that need the model (listed in JSON and -v)
    upgrade: str | None = None  # the modelled release a finding is about when the image pins an older one
    launch: int | None = None  # index of the launch (in the file) the finding belongs to
    subject: Subject | None = None  # what the finding is about (kvplan.model.plan.Subject), as data


@dataclass
class Site:
    """One vLLM launch and the facts around it (GPU hints, model hints)."""

    launch: Launch
    anchor: Tok
    model_hint: Tok | None = None
    gpu_label: Tok | None = None
    gpu_count: int | None = None
    group_size: int = 1
    image: Tok | None = None
    """The container image (its tag names the vLLM release), when the launch runs in one."""
    partial: bool = False
    """A Kustomize patch or Helm values entry: the rest of the launch (model, GPUs) lives elsewhere."""
    unknown_kwargs: tuple[Tok, ...] = ()
    """Ray Serve LLM `engine_kwargs` keys that are no vLLM engine argument (keyword arguments: no prefixes)."""


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
    note: str | None = None
    line_map: dict[int, int] | None = None
    """A rendered Helm template: line of the `helm template` output -> line of the template, where exact."""


class LineIndex:
    """Character offset -> 1-based (line, column)."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def pos(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1


# ----------------------------------------------------------------------------- YAML node helpers
def _mget(node: Node | None, key: str) -> Node | None:
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.value == key:
                return v
    return None


def _items(node: Node | None) -> list[tuple[ScalarNode, Node]]:
    if isinstance(node, MappingNode):
        return [(k, v) for k, v in node.value if isinstance(k, ScalarNode)]
    return []


def _seq(node: Node | None) -> list[Node]:
    return list(node.value) if isinstance(node, SequenceNode) else []


def _scalar(node: Node | None) -> str | None:
    return node.value if isinstance(node, ScalarNode) else None


class _Doc:
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


# ----------------------------------------------------------------------------- argv -> launches
@dataclass
class _Item:
    tok: Tok
    node: ScalarNode | None = None  # YAML scalar the item came from (for `sh -c` scripts)


_SHELLS = {"sh", "bash", "ash", "dash", "zsh"}
_FLAG_WITH_SPACE = re.compile(r"^--?[A-Za-z][\w-]*\s+\S")
_DECLARE = {"export", "local", "declare", "readonly", "typeset"}
_ASSIGN_WORD = re.compile(r"^([A-Za-z_]\w*)=")


def _word_pos(t: Tok) -> Pos:
    return lambda k: (t.line, t.col + k)


def _shell_script_arg(words: list[Tok]) -> int | None:
    """Index of the script in `sh -c SCRIPT` / `bash -lc SCRIPT` (wrappers before the shell allowed)."""
    i = 0
    while i < len(words) and (words[i].value in ("exec", "env", "nohup", "timeout")
                              or _ASSIGN_WORD.match(words[i].value)
                              or (words[i - 1].value == "timeout" if i else False)):
        i += 1
    if i >= len(words) or words[i].value.rsplit("/", 1)[-1] not in _SHELLS:
        return None
    for j in range(i + 1, len(words) - 1):
        v = words[j].value
        if v.startswith("-") and not v.startswith("--") and "c" in v[1:] and len(v) <= 5:
            return j + 1
        if not v.startswith("-"):
            return None
    return None


def _launches_from_argv(doc: _Doc | None, items: list[_Item], env: dict[str, VarValue], implicit: Tok | None,
                        out: Extracted, yaml_list: bool, k8s: bool = True, more_args: bool = False) -> list[Launch]:
    """Launches in one container/service argv (command + args), including `sh -c 'script'`.

    `k8s`: list items get Kubernetes' $(VAR) expansion (one argument each, never split);
    compose items were interpolated by the caller. `more_args`: something appends arguments at run
    time (a KServe runtime template), so a script's `$@` is unknown.
    """
    found: list[Launch] = []
    if yaml_list:
        if k8s:
            items = [_Item(t, it.node) for it in items for t in expand([it.tok], env, split=False)]
        for it in items:
            if _FLAG_WITH_SPACE.match(it.tok.value) and "\n" not in it.tok.value and not it.tok.unknown:
                flag, _, value = it.tok.value.partition(" ")
                out.findings.append(RawFinding(
                    "KV809", f"argument {it.tok.value!r} reaches vLLM as one argv entry; argparse reads it as a "
                             "positional and vLLM exits with 'unrecognized arguments'.", it.tok,
                    fix=f"Write {flag}={value.strip()} or split it into two list items."))
    words = [it.tok for it in items]
    j = _shell_script_arg(words)
    if j is not None:
        script_item = items[j]
        if doc and script_item.node is not None:
            pos = doc.pos_in(script_item.node)
            script = script_item.node.value
            if k8s and "$" in script:  # Kubernetes expands $(VAR) and $$ before the shell runs
                script, pos = _k8s_text(script, pos, env)
        else:
            pos, script = _word_pos(script_item.tok), script_item.tok.value
        # `sh -c SCRIPT NAME ARG...`: NAME is $0, the ARGs are "$@"
        positional = None if more_args else words[j + 2:]
        return _launches_in_script(script, pos, script_item.tok.yaml_path, env, out, positional=positional)
    if words and words[0].value.rsplit("/", 1)[-1] in _SHELLS:
        return found
    launch = find_launch(expand(words, env) if not yaml_list else words, implicit_vllm=False)
    if launch is None and implicit is not None:
        launch = Launch(implicit, tuple(words))
    if launch is not None:
        found.append(launch)
    return found


def _k8s_text(script: str, pos: Pos, env: dict[str, VarValue]) -> tuple[str, Pos]:
    """Kubernetes expansion of a script string, with positions mapped back to the file: original text
    to where it is written, a substituted value to the env value it came from."""
    out: list[str] = []
    src: list[int | tuple[int, int]] = []
    i = 0
    while i < len(script):
        if script.startswith("$$", i):
            out.append("$")
            src.append(i)
            i += 2
            continue
        if script.startswith("$(", i):
            close = script.find(")", i)
            value, unknown, whole = expand_k8s(script[i:close + 1], env) if close > 0 else ("", True, None)
            if close > 0 and not unknown:
                out.append(value)
                src += ([(whole.tok.line, whole.tok.col + k) for k in range(len(value))] if whole is not None
                        else [i] * len(value))
                i = close + 1
                continue
        out.append(script[i])
        src.append(i)
        i += 1
    end = len(script)

    def mapped(k: int) -> tuple[int, int]:
        at = src[k] if k < len(src) else end
        return at if isinstance(at, tuple) else pos(at)
    return "".join(out), mapped


def _assign(words: list[Tok], env: dict[str, VarValue]) -> bool:
    """`A=1 B=$A`, `export A=1`, `local a=$1`: update env; False when the command is not an assignment."""
    values = [w.value for w in words]
    if not (all(_ASSIGN_WORD.match(v) for v in values) or (values[0] in _DECLARE and len(values) > 1)):
        return False
    for w in words:
        m = _ASSIGN_WORD.match(w.value)
        if not m:
            continue
        name = m.group(1)
        vtok = w.at(len(name) + 1)
        vtok = Tok(vtok.value, w.line, w.col + len(name) + 1 + (1 if w.quoted else 0), w.yaml_path,
                   quoted=True, literal=vtok.literal)
        expanded = _expand_value(vtok, env)
        env[name] = VarValue(expanded.value, expanded, unknown=expanded.unknown)
    return True


def _expand_value(t: Tok, env: dict[str, VarValue]) -> Tok:
    """An assignment's value: expanded like a quoted word (no word splitting)."""
    out = expand([t], env)
    return out[0] if out else t


_MASKED = re.compile("([\ue000-\uf8ff])\\1*")


def _mask(script: str) -> tuple[str, list[str]]:
    """Each template action -> a run of one private-use character as long as the action (positions
    stay put, the lexer sees one word part)."""
    actions: list[str] = []

    def sub(m: re.Match) -> str:
        actions.append(m.group(0))
        return chr(0xE000 + min(len(actions) - 1, 0x18FF)) * len(m.group(0))
    return _GO_ACTION.sub(sub, script), actions


def _unmask(t: Tok, actions: list[str]) -> Tok:
    if not actions or not _MASKED.search(t.value):
        return t
    value = _MASKED.sub(lambda m: actions[ord(m.group(1)) - 0xE000] if ord(m.group(1)) - 0xE000 < len(actions)
                        else m.group(0), t.value)
    return replace(t, value=value, unknown=True)


_ALL_ARGS = ("$@", "${@}", "$*", "${*}")
_NTH_ARG = re.compile(r"^\$(?:(\d)|\{(\d+)\})$")


def _positional(words: list[Tok], positional: list[Tok] | None) -> list[Tok]:
    """`"$@"` / `$1` words -> the script's arguments when they are known (`sh -c SCRIPT NAME ARGS...`)."""
    if positional is None:
        return words
    out: list[Tok] = []
    for w in words:
        m = _NTH_ARG.match(w.value)
        if w.value in _ALL_ARGS and 0 not in w.literal:
            out += positional
        elif m and 0 not in w.literal and int(m.group(1) or m.group(2)) > 0:
            n = int(m.group(1) or m.group(2))
            out += positional[n - 1:n]
        else:
            out.append(w)
    return out


def _launches_in_script(script: str, pos: Pos, yaml_path: str | None, env: dict[str, VarValue],
                        out: Extracted, depth: int = 0, positional: list[Tok] | None = None) -> list[Launch]:
    """Launches in a shell script. `positional`: the script's arguments ($@), None when unknown."""
    env = dict(env)
    found: list[Launch] = []
    actions: list[str] = []
    if GO_TEMPLATE.search(script):  # template actions: unknown word parts, positions kept
        script, actions = _mask(script)
    for words in commands([_unmask(t, actions) for t in lex_resilient(script, pos, yaml_path, out)]):
        if _assign(words, env):
            continue
        if words[0].value == "eval" and len(words) > 1 and depth < 3:  # eval "exec vllm serve ..."
            inner = " ".join(w.value for w in words[1:])
            if positional is not None:  # "$@" inside the eval string joins the arguments; eval re-splits them
                joined = " ".join(p.value for p in positional)
                inner = inner.replace("${@}", joined).replace("$@", joined)
            found += _launches_in_script(inner, _word_pos(words[1]), yaml_path, env, out, depth + 1, positional)
            continue
        j = _shell_script_arg(words)
        if j is not None and depth < 3:  # bash -c "..." inside a script
            w = words[j]
            found += _launches_in_script(w.value, _word_pos(w), yaml_path, env, out, depth + 1,
                                         _positional(words, positional)[j + 2:] if positional is not None else None)
            continue
        launch = find_launch(expand(_positional(words, positional), env))
        if launch is not None:
            found.append(launch)
    return found


def _offset_pos(pos: Pos, base: int) -> Pos:
    """`pos` for text that starts `base` characters into the text `pos` maps."""
    return lambda k: pos(base + k)


def lex_resilient(s: str, pos: Pos, yaml_path: str | None, out: Extracted, base: int = 0) -> list[Tok]:
    """lex(), but an unterminated quote becomes finding KV802 and lexing resumes on the next line."""
    toks: list[Tok] = []
    for _ in range(1000):
        try:
            toks += lex(s[base:], _offset_pos(pos, base), yaml_path)
            return toks
        except ShellSyntaxError as e:
            at = base + e.offset
            line, col = pos(at)
            out.findings.append(RawFinding(
                "KV802", f"{e} in the launch line: the shell stops here and the command does not run as written.",
                Tok("", line, col, yaml_path)))
            line_start = s.rfind("\n", 0, at) + 1
            if line_start > base:
                with contextlib.suppress(ShellSyntaxError):
                    toks += lex(s[base:line_start], _offset_pos(pos, base), yaml_path)
            nl = s.find("\n", at)
            if nl < 0:
                return toks
            toks.append(Tok("\n", *pos(nl), yaml_path, op=True))
            base = nl + 1
    return toks


# ----------------------------------------------------------------------------- Kubernetes
@dataclass(frozen=True)
class _PodCtx:
    gpu_label: Tok | None = None
    group_size: int = 1
    ray: bool = False  # a KubeRay head/worker group: the operator runs `ray start`, not the image's entrypoint


def _gpu_label(doc: _Doc, spec: Node, path: str) -> Tok | None:
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


def _gpu_count(resources: Node | None) -> int | None:
    for section in ("limits", "requests"):
        for key in GPU_RESOURCES:
            v = _scalar(_mget(_mget(resources, section), key))
            if v is not None and v.strip().isdigit():
                return int(v)
    return None


def _env(doc: _Doc, c: Node, path: str) -> tuple[dict[str, VarValue], list[tuple[str, VarValue]]]:
    """A container's environment as Kubernetes builds it: envFrom, then env in order; `$(VAR)` in a
    value refers to entries defined before it; values from a ConfigMap or Secret defined in the same
    file are known, other valueFrom sources are set but unknown."""
    env: dict[str, VarValue] = {}
    ordered: list[tuple[str, VarValue]] = []
    for src in _seq(_mget(c, "envFrom")):
        ref = _mget(src, "configMapRef") or _mget(src, "secretRef")
        data = doc.objects.get(_scalar(_mget(ref, "name")) or "")
        if data is None:
            continue
        prefix = _scalar(_mget(src, "prefix")) or ""
        for key, vnode in data.items():
            env[prefix + key] = VarValue(vnode.value, doc.tok(vnode, key))
    for i, e in enumerate(_seq(_mget(c, "env"))):
        name, vnode = _scalar(_mget(e, "name")), _mget(e, "value")
        if not name:
            continue
        if isinstance(vnode, ScalarNode):
            tok = doc.tok(vnode, f"{path}.env[{i}].value")
            value, unknown, whole = expand_k8s(vnode.value, env)
            if whole is not None:
                vv = VarValue(value, whole.tok, whole.unknown)
            elif value == vnode.value:
                vv = VarValue(value, tok, unknown)
            else:
                vv = VarValue(value, Tok(value, tok.line, tok.col, tok.yaml_path, unknown=unknown), unknown)
        else:
            ref = _mget(_mget(e, "valueFrom"), "configMapKeyRef") or _mget(_mget(e, "valueFrom"), "secretKeyRef")
            data = doc.objects.get(_scalar(_mget(ref, "name")) or "") or {}
            known = data.get(_scalar(_mget(ref, "key")) or "")
            vv = (VarValue(known.value, doc.tok(known, _scalar(_mget(ref, "key")) or "")) if known is not None
                  else VarValue("", doc.tok(e, f"{path}.env[{i}]"), unknown=True))
        env[name] = vv
        ordered.append((name, vv))
    return env, ordered


def _referenced(name: str, texts: list[str]) -> bool:
    pat = re.compile(r"\$(?:\(" + name + r"\)|\{" + name + r"[}:]|" + name + r"\b)")
    return any(pat.search(t) for t in texts)


# Flags that only vLLM takes: a container (or patch) whose args hold one of them is a vLLM launch.
_ENGINE_ONLY = re.compile(r"^--(?:model|served-model-name|kv-cache-dtype|max-model-len|tensor-parallel-size|"
                          r"gpu-memory-utilization|max-num-seqs|max-num-batched-tokens|enable-prefix-caching|"
                          r"quantization|enforce-eager|trust-remote-code)(?:=|$)")


# Kinds whose containers are templates another object completes (KServe appends the model's args).
_RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime", "LLMInferenceServiceConfig")


def _container(doc: _Doc, c: Node, path: str, pod: _PodCtx, out: Extracted, dialect: str = "vllm",
               model_hint: Tok | None = None, kind: str = "") -> None:
    inode = _mget(c, "image")
    image = _scalar(inode) or ""
    env, ordered = _env(doc, c, path)
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
    partial = kind in _RUNTIME_KINDS
    if dialect == "kserve-hf":
        implicit = doc.tok(_mget(c, "modelFormat") or c, f"{path}")
    elif not has_command and not pod.ray and VLLM_IMAGE.search(image):
        implicit = doc.tok(inode, f"{path}.image") if inode is not None else None
    elif inode is None and not has_command and any(_ENGINE_ONLY.match(it.tok.value) for it in items):
        # A Kustomize patch (strategic merge): args for a container whose image is in the base.
        implicit = doc.tok(_mget(c, "name") or c, f"{path}.name" if _mget(c, "name") is not None else path)
        partial = True
    launches = _launches_from_argv(doc, items, env, implicit, out, yaml_list=True, more_args=partial)
    texts = [it.tok.value for it in items]
    image_tok = doc.tok(inode, f"{path}.image") if isinstance(inode, ScalarNode) else None
    for launch in launches:
        extra: list[Tok] = []
        if launch.launcher is implicit:  # only the image's own entrypoint appends these variables
            for name, vv in ordered:
                if EXTRA_ARGS_ENV.match(name) and not _referenced(name, texts):
                    extra += ([replace(vv.tok, unknown=True)] if vv.unknown else split_value(vv.value, vv.tok))
        args = launch.args + tuple(extra)
        launch = Launch(launch.launcher, args, "kserve-hf" if dialect == "kserve-hf" else launch.dialect)
        count = _gpu_count(_mget(c, "resources"))
        out.sites.append(Site(launch, launch.launcher, model_hint=model_hint, gpu_label=pod.gpu_label,
                              gpu_count=count, group_size=pod.group_size, image=image_tok, partial=partial))


_RAY_GROUPS = ("headGroupSpec", "workerGroupSpecs")


def _walk_k8s(doc: _Doc, node: Node, path: str, pod: _PodCtx, out: Extracted, kind: str = "") -> None:
    if isinstance(node, SequenceNode):
        for i, n in enumerate(node.value):
            _walk_k8s(doc, n, f"{path}[{i}]", pod, out, kind)
        return
    if not isinstance(node, MappingNode):
        return
    label = _gpu_label(doc, node, path) if (_mget(node, "containers") or _mget(node, "model")) else None
    here = _PodCtx(label or pod.gpu_label, pod.group_size, pod.ray)
    lwt = _mget(node, "leaderWorkerTemplate")
    for k, v in _items(node):
        p = f"{path}.{k.value}" if path else k.value
        if _k8s_field(doc, node, path, k.value, v, p, here, out, kind):
            continue
        if k.value not in ("metadata", "status") and (lwt is None or k.value != "leaderWorkerTemplate"):
            _walk_k8s(doc, v, p, here, out, kind)


def _k8s_field(doc: _Doc, node: MappingNode, path: str, key: str, v: Node, p: str, here: _PodCtx,
               out: Extracted, kind: str) -> bool:
    """Walk the field `key` (at `p`) of the object `node` (at `path`) if it has a meaning of its own: containers,
    a KServe model, a LeaderWorkerSet template, Ray groups and job/service commands, Kustomize patches.
    False for any other field, which is only walked into."""
    if key == "containers" and isinstance(v, SequenceNode):
        for i, c in enumerate(v.value):
            _container(doc, c, f"{p}[{i}]", here, out, kind=kind)
    elif key == "model" and isinstance(v, MappingNode) and (
            _mget(v, "modelFormat") or _mget(v, "storageUri") or _mget(v, "runtime")):
        _kserve_model(doc, v, p, here, out, kind)
    elif key == "leaderWorkerTemplate" and isinstance(v, MappingNode):
        size = _scalar(_mget(v, "size"))
        _walk_k8s(doc, v, p, _PodCtx(here.gpu_label, int(size) if size and size.isdigit() else 1, here.ray), out, kind)
    elif key in _RAY_GROUPS:
        _walk_k8s(doc, v, p, _PodCtx(here.gpu_label, here.group_size, True), out, kind)
    elif key == "entrypoint" and kind == "RayJob" and isinstance(v, ScalarNode) and path == "spec":
        _ray_job_entrypoint(doc, node, v, p, here, out)
    elif key == "serveConfigV2" and kind == "RayService" and isinstance(v, ScalarNode) and path == "spec":
        _ray_serve(doc, v, p, node, here, out)
    elif key in ("patch", "patchesStrategicMerge") and kind == "Kustomization":
        _kustomize_patches(doc, v, p, here, out, kind)
    else:
        return False
    return True


def _kustomize_patches(doc: _Doc, v: Node, p: str, here: _PodCtx, out: Extracted, kind: str) -> None:
    """A Kustomization's `patch` / `patchesStrategicMerge`: inline patches (block scalars) and patch objects."""
    for sub in ([v] if isinstance(v, ScalarNode) else _seq(v)):
        if isinstance(sub, ScalarNode) and "\n" in sub.value:
            _inline_patch(doc, sub, p, out)
    if isinstance(v, MappingNode):
        _walk_k8s(doc, v, p, here, out, kind)


def _kserve_model(doc: _Doc, v: MappingNode, p: str, here: _PodCtx, out: Extracted, kind: str) -> None:
    """A KServe InferenceService's `model`: served by the Hugging Face runtime (vLLM inside) unless it names
    another format or runtime; an `hf://` storage URI names the model."""
    fmt = (_scalar(_mget(_mget(v, "modelFormat"), "name")) or "") + (_scalar(_mget(v, "runtime")) or "")
    if fmt and not re.search(r"huggingface|vllm", fmt, re.I):
        return
    uri = _mget(v, "storageUri")
    hint = None
    if isinstance(uri, ScalarNode) and uri.value.startswith("hf://"):
        hint = doc.tok(uri, f"{p}.storageUri", uri.value[5:].split(":")[0])
    _container(doc, v, p, here, out, dialect="kserve-hf", model_hint=hint, kind=kind)


def _ray_job_entrypoint(doc: _Doc, node: MappingNode, v: ScalarNode, p: str, here: _PodCtx, out: Extracted) -> None:
    """A RayJob's `entrypoint`: the command runs on the head node; a `vllm serve` there is the launch."""
    head = _seq(_mget(_mget(_mget(_mget(_mget(node, "rayClusterSpec"), "headGroupSpec"), "template"), "spec"),
                      "containers"))
    himage = _mget(head[0], "image") if head else None
    image_tok = doc.tok(himage, "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].image") \
        if isinstance(himage, ScalarNode) else None
    for launch in _launches_in_script(v.value, doc.pos_in(v), p, {}, out):
        out.sites.append(Site(launch, launch.launcher, gpu_label=here.gpu_label, image=image_tok))


def _embedded_yaml(doc: _Doc, node: ScalarNode, path: str, what: str, errors: Extracted | None = None):
    """YAML inside a block scalar (a Kustomize inline patch, a RayService's serveConfigV2): its documents, a
    _Doc for positions inside it, and the function mapping those positions back into the file. A syntax error
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
    inner = _Doc(LineIndex(node.value))
    inner.objects = doc.objects

    def shift(t: Tok) -> Tok:
        return replace(t, line=line0 + t.line - 1, col=t.col + indent,
                       yaml_path=f"{path}>{t.yaml_path}" if t.yaml_path else path)
    return subs, inner, shift


def _shifted_into(out: Extracted, sub_out: Extracted, shift, partial: bool) -> None:
    for f in sub_out.findings:
        out.findings.append(replace(f, tok=shift(f.tok)))
    for site in sub_out.sites:
        launch = Launch(shift(site.launch.launcher), tuple(shift(t) for t in site.launch.args), site.launch.dialect)
        out.sites.append(replace(site, launch=launch, anchor=shift(site.anchor), partial=partial or site.partial,
                                 image=shift(site.image) if site.image else site.image,
                                 gpu_label=shift(site.gpu_label) if site.gpu_label else None,
                                 model_hint=shift(site.model_hint) if site.model_hint else None))


_PATCHED_ARGV = re.compile(r"^(.*/containers/\d+)/(args|command)(?:/(-|\d+))?$")


def _is_json6902(node: Node) -> bool:
    """A JSON 6902 patch (a Kustomize `patchesJson6902` / `patches: [{path: FILE}]` file): a list of operations."""
    return (isinstance(node, SequenceNode) and bool(node.value)
            and all(isinstance(_mget(op, "op"), ScalarNode) and isinstance(_mget(op, "path"), ScalarNode)
                    for op in node.value))


def _json6902(doc: _Doc, ops: SequenceNode, out: Extracted) -> None:
    """JSON 6902 operations on a container's argv: `add`/`replace` of the whole `args` / `command` list, or
    `add` of single arguments (`.../args/-`, in operation order). A launch of the patched container (its image
    and model live in the base) when the arguments are vLLM engine flags: other servers' patches are not."""
    appended: dict[str, list[_Item]] = {}
    for i, op in enumerate(ops.value):
        verb = _scalar(_mget(op, "op"))
        m = _PATCHED_ARGV.match(_scalar(_mget(op, "path")) or "")
        value = _mget(op, "value")
        if m is None or verb not in ("add", "replace"):
            continue
        if m.group(3) is None and isinstance(value, SequenceNode):
            items = [_Item(doc.tok(x, f"[{i}].value[{j}]"), x) for j, x in enumerate(value.value)
                     if isinstance(x, ScalarNode)]
            implicit = doc.tok(value, f"[{i}].value") if m.group(2) == "args" else None
            for launch in _launches_from_argv(doc, items, {}, implicit if any(
                    _ENGINE_ONLY.match(it.tok.value) for it in items) else None, out, yaml_list=True):
                out.sites.append(Site(launch, launch.launcher, partial=True))
        elif m.group(3) is not None and m.group(2) == "args" and isinstance(value, ScalarNode):
            appended.setdefault(m.group(1), []).append(_Item(doc.tok(value, f"[{i}].value"), value))
    for items in appended.values():
        if not any(_ENGINE_ONLY.match(it.tok.value) for it in items):
            continue  # e.g. a controller's --concurrent=10: not a vLLM launch
        implicit = replace(items[0].tok, value="")
        for launch in _launches_from_argv(doc, items, {}, implicit, out, yaml_list=True):
            out.sites.append(Site(launch, launch.launcher, partial=True))


def _inline_patch(doc: _Doc, node: ScalarNode, path: str, out: Extracted) -> None:
    """A Kustomize inline patch (`patches: [{patch: |- ...}]`): a strategic-merge object, or JSON 6902
    operations that replace a container's command/args. Positions map into the block scalar."""
    got = _embedded_yaml(doc, node, path, "Kustomize patch")
    if got is None:
        return
    subs, inner, shift = got
    sub_out = Extracted()
    for sub in subs:
        if isinstance(sub, MappingNode):
            _walk_k8s(inner, sub, "", _PodCtx(), sub_out, _scalar(_mget(sub, "kind")) or "")
        elif isinstance(sub, SequenceNode):
            _json6902(inner, sub, sub_out)
    _shifted_into(out, sub_out, shift, partial=True)


# Ray Serve LLM builders whose `args.llm_configs` entries are vLLM engines (ray.serve.llm).
_RAY_LLM_BUILDER = re.compile(r"^ray\.serve\.llm:build_(?:openai_app|llm_deployment|vllm_deployment)$")


# vLLM 0.33 AsyncEngineArgs fields with no `vllm serve` option: valid engine_kwargs keys, no flag to check.
_KWARGS_WITHOUT_FLAG = frozenset({"model_weights", "enable_mm_processor_stats", "mamba_config",
                                  "_api_process_count", "_api_process_rank"})


def _py_value(node: Node) -> Any:
    return yaml.constructor.SafeConstructor().construct_document(node)


def _engine_kwargs(doc: _Doc, kwargs: Node | None, path: str) -> tuple[list[Tok], list[Tok]]:
    """Ray Serve LLM `engine_kwargs` (vLLM AsyncEngineArgs keyword arguments) as the `vllm serve` flags they
    are: a key that is no engine argument fails the replica, like an unknown flag; True is the flag, False
    its --no- form (or nothing), mappings and lists are the JSON the flag takes."""
    from kvplan.ingest.flags import serve_options
    table = serve_options()
    args: list[Tok] = []
    unknown: list[Tok] = []
    for k, v in _items(kwargs):
        p = f"{path}.{k.value}"
        flag = "--" + k.value.replace("_", "-")
        kt = replace(doc.key_tok(k, p), value=flag)
        opt = table.by_spelling.get(flag)
        if k.value in _KWARGS_WITHOUT_FLAG:
            continue
        if opt is None and flag not in REMOVED_FLAGS:
            unknown.append(doc.key_tok(k, p))  # a keyword argument is matched exactly, never as a prefix
            continue
        if isinstance(v, ScalarNode):
            val = _py_value(v)
            if val is None:
                continue
            if isinstance(val, bool):
                if val:
                    args.append(kt)
                elif opt is not None and f"--no-{flag[2:]}" in opt.spellings:
                    args.append(replace(kt, value=f"--no-{flag[2:]}"))
                continue
            args += [kt, doc.tok(v, p)]
        elif isinstance(v, SequenceNode) and opt is not None and opt.nargs in ("+", "*"):
            args.append(kt)
            args += [doc.tok(x, f"{p}[{i}]") for i, x in enumerate(v.value) if isinstance(x, ScalarNode)]
        else:
            try:
                text = json.dumps(_py_value(v), default=str)
            except (yaml.YAMLError, TypeError, ValueError):
                continue
            args += [kt, Tok(text, v.start_mark.line + 1, v.start_mark.column + 1, p)]
    return args, unknown


def _ray_serve_apps(doc: _Doc, sub: Node, out: Extracted) -> None:
    """Ray Serve config `applications`: each `args.llm_configs` entry of a `ray.serve.llm` builder is a vLLM
    engine (model from `model_loading_config`, flags from `engine_kwargs`)."""
    for i, app in enumerate(_seq(_mget(sub, "applications"))):
        if not _RAY_LLM_BUILDER.match((_scalar(_mget(app, "import_path")) or "").strip()):
            continue  # your own Python deployment: its engine arguments are in code kvplan does not read
        for j, cfg in enumerate(_seq(_mget(_mget(app, "args"), "llm_configs"))):
            if not isinstance(cfg, MappingNode):
                continue  # a path to a separate LLMConfig file
            p = f"applications[{i}].args.llm_configs[{j}]"
            mlc = _mget(cfg, "model_loading_config")
            source = _mget(mlc, "model_source")
            if isinstance(_mget(source, "bucket_uri"), ScalarNode):
                source = _mget(source, "bucket_uri")
                mp = f"{p}.model_loading_config.model_source.bucket_uri"
            elif isinstance(source, ScalarNode):
                mp = f"{p}.model_loading_config.model_source"
            else:
                source, mp = _mget(mlc, "model_id"), f"{p}.model_loading_config.model_id"
            args: list[Tok] = []
            if isinstance(source, ScalarNode):
                args.append(doc.tok(source, mp))
            flags, unknown = _engine_kwargs(doc, _mget(cfg, "engine_kwargs"), f"{p}.engine_kwargs")
            launcher = doc.tok(source, mp, "vllm") if isinstance(source, ScalarNode) else doc.tok(cfg, p, "vllm")
            out.sites.append(Site(Launch(launcher, tuple(args + flags)), launcher, unknown_kwargs=tuple(unknown)))


def _is_ray_serve_config(node: Node) -> bool:
    """A Ray Serve config file (`serve run` / `serve deploy`) with a Ray Serve LLM application."""
    return any(_RAY_LLM_BUILDER.match((_scalar(_mget(a, "import_path")) or "").strip())
               for a in _seq(_mget(node, "applications")))


def _ray_serve(doc: _Doc, node: ScalarNode, path: str, spec: MappingNode, here: _PodCtx, out: Extracted) -> None:
    """A RayService's `serveConfigV2`: each Ray Serve LLM `llm_configs` entry of a `ray.serve.llm` builder is a
    vLLM engine (model from `model_loading_config`, flags from `engine_kwargs`), in the cluster's image."""
    got = _embedded_yaml(doc, node, path, "RayService serveConfigV2", errors=out)
    if got is None:
        return
    subs, inner, shift = got
    cluster = _mget(spec, "rayClusterConfig")
    image_tok: Tok | None = None
    gpu_label = here.gpu_label
    workers = _seq(_mget(cluster, "workerGroupSpecs"))
    groups = [(f"spec.rayClusterConfig.workerGroupSpecs[{i}]", g) for i, g in enumerate(workers)]
    groups.append(("spec.rayClusterConfig.headGroupSpec", _mget(cluster, "headGroupSpec")))
    for gpath, g in groups:  # the engines run on the GPU workers; their image says which vLLM
        pod = _mget(_mget(g, "template"), "spec")
        cs = _seq(_mget(pod, "containers"))
        img = _mget(cs[0], "image") if cs else None
        if isinstance(img, ScalarNode) and image_tok is None:
            image_tok = doc.tok(img, f"{gpath}.template.spec.containers[0].image")
            if pod is not None:
                gpu_label = _gpu_label(doc, pod, f"{gpath}.template.spec") or gpu_label
    sub_out = Extracted()
    for sub in subs:
        _ray_serve_apps(inner, sub, sub_out)
    _shifted_into(out, sub_out, shift, partial=False)
    for site in out.sites[len(out.sites) - len(sub_out.sites):]:
        site.image, site.gpu_label = image_tok, gpu_label
        site.unknown_kwargs = tuple(shift(t) for t in site.unknown_kwargs)


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
_COMPOSE_REF = re.compile(r"\$(?:\{([A-Za-z_]\w*)(?:(:?[-?])([^}]*))?\}|([A-Za-z_]\w*))")


def _compose_interpolate(t: Tok) -> Tok:
    """docker compose's interpolation of one value: `${VAR:-default}` / `${VAR-default}` take the
    default, `$$` is a literal `$`, and a variable with no default comes from the shell or `.env` at
    `docker compose up` time, so the value is unknown."""
    if "$" not in t.value:
        return t
    value, unknown = interpolate(t.value, _COMPOSE_REF,
                                 lambda m: m.group(3) if m.group(2) in (":-", "-") else None)
    return replace(t, value=value, unknown=unknown or t.unknown)


def _compose(doc: _Doc, services: MappingNode, out: Extracted) -> None:
    for sk, svc in _items(services):
        path = f"services.{sk.value}"
        inode = _mget(svc, "image")
        image = _scalar(inode) or ""
        env: dict[str, VarValue] = {}
        ordered: list[tuple[str, VarValue]] = []
        enode = _mget(svc, "environment")
        for i, e in enumerate(_seq(enode)):
            s = _scalar(e) or ""
            name, eq, _ = s.partition("=")
            if eq:
                t = _compose_interpolate(doc.tok(e, f"{path}.environment[{i}]").at(len(name) + 1))
                vv = VarValue(t.value, t, t.unknown)
                env[name] = vv
                ordered.append((name, vv))
        for k, v in _items(enode):
            if isinstance(v, ScalarNode):
                t = _compose_interpolate(doc.tok(v, f"{path}.environment.{k.value}"))
                vv = VarValue(t.value, t, t.unknown)
                env[k.value] = vv
                ordered.append((k.value, vv))
        items: list[_Item] = []
        for key in ("entrypoint", "command"):
            node = _mget(svc, key)
            if isinstance(node, ScalarNode):  # compose splits a string command shell-like (no shell)
                for t in lex_resilient(node.value, doc.pos_in(node), f"{path}.{key}", out):
                    if not t.op:
                        items.append(_Item(_compose_interpolate(t)))
            for i, it in enumerate(_seq(node)):
                if isinstance(it, ScalarNode):
                    t = doc.tok(it, f"{path}.{key}[{i}]")
                    ti = _compose_interpolate(t)
                    items.append(_Item(ti, it if ti is t else None))
        implicit = None
        if _mget(svc, "entrypoint") is None and VLLM_IMAGE.search(image):
            implicit = doc.tok(inode, f"{path}.image")
        launches = _launches_from_argv(doc, items, env, implicit, out, yaml_list=True, k8s=False)
        texts = [it.tok.value for it in items]
        count = None
        for dev in _seq(_mget(_mget(_mget(_mget(svc, "deploy"), "resources"), "reservations"), "devices")):
            c = _scalar(_mget(dev, "count"))
            if c and c.isdigit():
                count = int(c)
            ids = _seq(_mget(dev, "device_ids"))
            if ids:
                count = len(ids)
        image_tok = doc.tok(inode, f"{path}.image") if isinstance(inode, ScalarNode) else None
        for launch in launches:
            extra: list[Tok] = []
            if launch.launcher is implicit:
                for name, vv in ordered:
                    if EXTRA_ARGS_ENV.match(name) and not _referenced(name, texts):
                        extra += ([replace(vv.tok, unknown=True)] if vv.unknown else split_value(vv.value, vv.tok))
            launch = Launch(launch.launcher, launch.args + tuple(extra), launch.dialect)
            out.sites.append(Site(launch, launch.launcher, gpu_count=count, image=image_tok))


# ----------------------------------------------------------------------------- vLLM --config YAML
_FLAG_NAMES = {f.lstrip("-") for f in (*KNOWN_FLAGS, *REMOVED_FLAGS, *MODELLED) if f.startswith("--")}


def _is_vllm_config(node: Node) -> bool:
    """A `vllm serve --config` file: flat keys, mostly vLLM flag names. A key that is no flag and
    holds a mapping or a list of mappings (`modelParameters:`, `inference:`) makes it something
    else, such as a Helm values file (a misspelt flag with a scalar or list value stays a finding)."""
    if not isinstance(node, MappingNode) or _mget(node, "apiVersion") or _mget(node, "services"):
        return False
    items = [(k.value.replace("_", "-"), v) for k, v in _items(node)]
    if any(k not in _FLAG_NAMES and (isinstance(v, MappingNode) or any(not isinstance(x, ScalarNode) for x in _seq(v)))
           for k, v in items):
        return False
    return bool(items) and sum(k in _FLAG_NAMES for k, _ in items) >= max(1, len(items) // 3)


def _vllm_config(doc: _Doc, node: MappingNode, out: Extracted) -> None:
    args: list[Tok] = []
    first: Tok | None = None
    for k, v in _items(node):
        kt = doc.key_tok(k, k.value)
        first = first or kt
        flag = Tok("--" + k.value, kt.line, kt.col, kt.yaml_path)
        if isinstance(v, ScalarNode):
            if v.tag.endswith(":bool") or (v.value.lower() in ("true", "false") and v.style is None):
                if v.value.lower() == "true":
                    args.append(flag)
                continue
            args += [flag, doc.tok(v, k.value)]
        elif isinstance(v, SequenceNode):
            args.append(flag)
            args += [doc.tok(x, f"{k.value}[{i}]") for i, x in enumerate(v.value) if isinstance(x, ScalarNode)]
        elif isinstance(v, MappingNode):
            import json
            args += [flag, doc.tok(v, k.value, json.dumps(yaml.load(yaml.serialize(v), Loader=_Loader)))]
    if first is not None:
        launcher = Tok("vllm-config", first.line, first.col, first.yaml_path)
        out.sites.append(Site(Launch(launcher, tuple(args)), first))


# ----------------------------------------------------------------------------- files
def _collect_objects(doc: _Doc, nodes: list[Node]) -> None:
    """ConfigMap `data` and Secret `stringData` of the file, for env valueFrom / envFrom lookups."""
    for node in nodes:
        kind = _scalar(_mget(node, "kind"))
        name = _scalar(_mget(_mget(node, "metadata"), "name"))
        if kind in ("ConfigMap", "Secret") and name:
            data = _mget(node, "data" if kind == "ConfigMap" else "stringData")
            doc.objects[name] = {k.value: v for k, v in _items(data) if isinstance(v, ScalarNode)}


def extract_yaml(text: str) -> Extracted:
    """A YAML file: every document; a syntax error is finding KV801 and earlier documents still count."""
    out = Extracted()
    li = LineIndex(text)
    doc = _Doc(li)
    kinds: list[str] = []
    nodes: list[Node] = []
    try:
        for node in bounded_compose_all(text, "YAML"):  # size/depth/alias limits: InputLimitError (KV820/KV821)
            if node is not None:
                nodes.append(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        ctx = getattr(e, "context", None)
        out.findings.append(RawFinding("KV801", f"YAML does not parse: {problem}" + (f" ({ctx})" if ctx else "") + ".",
                                       Tok("", line, col)))
    _collect_objects(doc, nodes)
    for node in nodes:
        first, last = node.start_mark.line + 1, node.end_mark.line + 1
        if _mget(node, "apiVersion") is not None and _mget(node, "kind") is not None:
            kind = _scalar(_mget(node, "kind")) or ""
            kinds.append("kubernetes")
            _walk_k8s(doc, node, "", _PodCtx(), out, kind)
            _annotations(doc, node, "", first, last, out)
        elif isinstance(_mget(node, "services"), MappingNode):
            kinds.append("compose")
            _compose(doc, _mget(node, "services"), out)
            _annotations(doc, node, "", first, last, out)
        elif _is_vllm_config(node):
            kinds.append("vllm-config")
            _vllm_config(doc, node, out)
        elif _is_ray_serve_config(node):
            kinds.append("vllm-config")  # a Ray Serve config: `serve run config.yaml` starts the engines
            _ray_serve_apps(doc, node, out)
        elif _is_json6902(node):
            kinds.append("kubernetes")  # a Kustomize JSON 6902 patch file
            _json6902(doc, node, out)
        elif isinstance(node, MappingNode) and _helm_values(doc, node, out):
            kinds.append("helm-values")
    if out.findings and any(f.code == "KV801" for f in out.findings):
        kinds.append(kinds[-1] if kinds else "unknown")
    out.kind = kinds[0] if kinds else "unknown"
    return out


# ----------------------------------------------------------------------------- Helm values
def _kebab(key: str) -> str:
    return "--" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", key).lower().replace("_", "-")


def _image_of(doc: _Doc, node: Node, path: str) -> Tok | None:
    """`repository` + `tag` (or `image` + `tag`, or an `image:` mapping of them) keys of a values mapping
    -> one image token."""
    if isinstance(_mget(node, "image"), MappingNode) and _mget(node, "repository") is None:
        return _image_of(doc, _mget(node, "image"), f"{path}.image" if path else "image")
    repo = _mget(node, "repository")
    if not isinstance(repo, ScalarNode):
        repo = _mget(node, "image") if isinstance(_mget(node, "image"), ScalarNode) else None
    if not isinstance(repo, ScalarNode) or not repo.value:
        return None
    tag = _scalar(_mget(node, "tag"))
    return doc.tok(repo, f"{path}.{'repository' if _mget(node, 'repository') is repo else 'image'}",
                   f"{repo.value}:{tag}" if tag and ":" not in repo.value.rsplit("/", 1)[-1] else repo.value)


def _helm_values(doc: _Doc, root: MappingNode, out: Extracted) -> bool:
    """Launches in a Helm chart's values: a full command/args list (`image.command: [vllm, serve, ...]`),
    and model entries that a chart turns into `vllm serve` (`modelURL` + `vllmConfig` with camelCase
    engine options and `extraArgs`, as in vLLM production-stack). Only keys that are vLLM flags
    become flags; other chart settings are left alone."""
    before = len(out.sites)

    def walk(node: Node, path: str, parent: Node | None) -> None:
        if isinstance(node, SequenceNode):
            for i, n in enumerate(node.value):
                walk(n, f"{path}[{i}]", node)
            return
        if not isinstance(node, MappingNode):
            return
        if isinstance(_mget(node, "modelURL"), ScalarNode) or (
                isinstance(_mget(node, "model"), ScalarNode) and any(isinstance(_mget(node, k), MappingNode)
                                                                     for k in _ENGINE_KEYS)):
            _values_model(doc, node, path, out)
            return
        for k, v in _items(node):
            p = f"{path}.{k.value}" if path else k.value
            if k.value in ("command", "args", "extraArgs", "extra_args", "vllmArgs", "engineArgs") \
                    and isinstance(v, SequenceNode):
                items = [_Item(doc.tok(x, f"{p}[{i}]"), x) for i, x in enumerate(v.value) if isinstance(x, ScalarNode)]
                # a full launch, else a list of engine arguments the chart appends to its own command
                implicit = doc.key_tok(k, p) if any(_ENGINE_ONLY.match(it.tok.value) for it in items) else None
                for launch in _launches_from_argv(doc, items, {}, implicit, out, yaml_list=True):
                    out.sites.append(Site(launch, launch.launcher, image=_image_of(doc, node, path),
                                          partial=launch.launcher is implicit))
            else:
                walk(v, p, node)
    walk(root, "", None)
    return len(out.sites) > before


# Values keys whose camelCase entries a chart turns into vLLM flags (production-stack, ai-on-eks).
_ENGINE_KEYS = ("vllmConfig", "modelParameters", "engineArgs", "vllmArgs")


def _values_model(doc: _Doc, spec: MappingNode, path: str, out: Extracted) -> None:
    from kvplan.ingest.flags import KNOWN_FLAGS as known
    mkey = "modelURL" if isinstance(_mget(spec, "modelURL"), ScalarNode) else "model"
    model = _mget(spec, mkey)
    args: list[Tok] = [doc.tok(model, f"{path}.{mkey}" if path else mkey)]
    ckey = next((k for k in _ENGINE_KEYS if isinstance(_mget(spec, k), MappingNode)), "vllmConfig")
    cfg = _mget(spec, ckey)
    for k, v in _items(cfg):
        p = f"{path}.{ckey}.{k.value}" if path else f"{ckey}.{k.value}"
        if k.value == "extraArgs":
            args += [doc.tok(x, f"{p}[{i}]") for i, x in enumerate(_seq(v)) if isinstance(x, ScalarNode)]
            continue
        flag = _kebab(k.value)
        if (flag not in known and flag not in MODELLED) or not isinstance(v, ScalarNode):
            continue
        kt = doc.key_tok(k, p)
        if v.tag.endswith(":bool") or (v.style is None and v.value.lower() in ("true", "false")):
            if v.value.lower() == "true":
                args.append(Tok(flag, kt.line, kt.col, p))
            continue
        args += [Tok(flag, kt.line, kt.col, p), doc.tok(v, p)]
    gpus = _scalar(_mget(spec, "requestGPU"))
    launcher = doc.tok(model, f"{path}.{mkey}" if path else mkey, "vllm")
    out.sites.append(Site(Launch(launcher, tuple(args)), launcher,
                          gpu_count=int(gpus) if gpus and gpus.isdigit() else None, image=_image_of(doc, spec, path)))


_LAUNCH_HINT = re.compile(r"vllm\s+serve|vllm\.entrypoints|vllm-openai|huggingfaceserver")


def extract_text(text: str) -> Extracted:
    """A shell script or a file of launch lines."""
    out = Extracted(kind="shell" if text.startswith("#!") else "text")
    if not _LAUNCH_HINT.search(text):
        return out
    li = LineIndex(text)
    for launch in _launches_in_script(text, li.pos, None, {}, out):
        out.sites.append(Site(launch, launch.launcher, image=launch.image))
    return out
