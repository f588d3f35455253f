"""Helm chart values files: full command/args lists, engine-argument lists and model entries."""
from __future__ import annotations

import re
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvplan.ingest.flags import MODELLED
from kvplan.ingest.limits import InputLimitError, limits, read_bounded
from kvplan.ingest.limits import compose_all as bounded_compose_all
from kvplan.lint.argv import ENGINE_ONLY, ArgItem, launches_from_argv
from kvplan.lint.extracted import Extracted, LineIndex, Site
from kvplan.lint.operators import is_kubeai_entry, is_llmd_modelservice, kubeai_model, llmd_modelservice
from kvplan.lint.shell import Launch, Tok
from kvplan.lint.yamlnodes import YamlDoc, mget, mitems, scalar, seq


def kebab(key: str) -> str:
    return "--" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", key).lower().replace("_", "-")


def image_of(doc: YamlDoc, node: Node, path: str) -> Tok | None:
    """`repository` + `tag` (or `image` + `tag`, or an `image:` mapping of them) keys of a values mapping
    -> one image token."""
    if isinstance(mget(node, "image"), MappingNode) and mget(node, "repository") is None:
        return image_of(doc, mget(node, "image"), f"{path}.image" if path else "image")
    repo = mget(node, "repository")
    if not isinstance(repo, ScalarNode):
        repo = mget(node, "image") if isinstance(mget(node, "image"), ScalarNode) else None
    if not isinstance(repo, ScalarNode) or not repo.value:
        return None
    tag = scalar(mget(node, "tag"))
    return doc.tok(repo, f"{path}.{'repository' if mget(node, 'repository') is repo else 'image'}",
                   f"{repo.value}:{tag}" if tag and ":" not in repo.value.rsplit("/", 1)[-1] else repo.value)


def helm_values(doc: YamlDoc, root: MappingNode, out: Extracted, path: Path | None = None) -> bool:
    """Launches in a Helm chart's values: a full command/args list (`image.command: [vllm, serve, ...]`),
    and model entries that a chart turns into `vllm serve` (`modelURL` + `vllmConfig` with camelCase
    engine options and `extraArgs`, as in vLLM production-stack). Only keys that are vLLM flags
    become flags; other chart settings are left alone."""
    before = len(out.sites)
    skip: set[str] = set()
    if is_llmd_modelservice(root):
        skip = llmd_modelservice(doc, root, out)

    def walk(node: Node, path: str, parent: Node | None) -> None:
        if isinstance(node, SequenceNode):
            for i, n in enumerate(node.value):
                walk(n, f"{path}[{i}]", node)
            return
        if not isinstance(node, MappingNode):
            return
        if isinstance(mget(node, "modelURL"), ScalarNode) or (
                isinstance(mget(node, "model"), ScalarNode) and any(isinstance(mget(node, k), MappingNode)
                                                                     for k in ENGINE_KEYS)):
            values_model(doc, node, path, out)
            return
        # one container, one launch: `command` and `args` of one mapping are one argv
        argv_keys = [(k, v) for k, v in mitems(node) if k.value in _ARGV_KEYS and isinstance(v, SequenceNode)]
        if isinstance(mget(node, "command"), SequenceNode) and isinstance(mget(node, "args"), SequenceNode):
            argv_keys = [(k, v) for k, v in argv_keys if k.value in ("command", "args")]
            argv_keys.sort(key=lambda kv: kv[0].value != "command")
            _argv_launch(doc, node, path, argv_keys, out)
            argv_keys = []
        for k, v in argv_keys:
            _argv_launch(doc, node, path, [(k, v)], out)
        for k, v in mitems(node):
            p = f"{path}.{k.value}" if path else k.value
            if (k.value in _ARGV_KEYS and isinstance(v, SequenceNode)) or (not path and k.value in skip):
                continue
            if isinstance(v, MappingNode) and is_kubeai_entry(v):  # a KubeAI models-chart catalog entry
                kubeai_model(doc, v, p, out, anchor=doc.key_tok(k, p))
            else:
                walk(v, p, node)
    walk(root, "", None)
    _join_partials(out.sites, before)
    chart_image = image_of(doc, root, "")
    for site in out.sites[before:]:  # the chart's own image runs the entries that name none
        site.image = site.image or chart_image or _chart_default_image(path, site.anchor)
    return len(out.sites) > before


def _chart_default_image(path: Path | None, anchor: Tok) -> Tok | None:
    """The image a chart's own values.yaml names (`image.repository` + `tag`, or a top-level `image`), for an
    override values file next to it (values-prod.yaml, a tutorial's values) that names none: placed at the
    launch, since the override file does not hold it."""
    if path is None or path.name == "values.yaml":
        return None
    for folder in (path.parent, path.parent.parent):
        if (folder / "Chart.yaml").is_file() and (folder / "values.yaml").is_file():
            break
    else:
        return None
    try:
        text = read_bounded(folder / "values.yaml", "values.yaml", limits().max_lint_file_bytes,
                            str(folder / "values.yaml")).decode("utf-8-sig")
        node = next((n for n in bounded_compose_all(text, "YAML") if n is not None), None)
    except (OSError, UnicodeDecodeError, InputLimitError, yaml.YAMLError):
        return None
    if not isinstance(node, MappingNode):
        return None
    img = image_of(YamlDoc(LineIndex(text)), node, "")
    return Tok(img.value, anchor.line, anchor.col, anchor.yaml_path) if img is not None else None


def _join_partials(sites: list[Site], before: int) -> None:
    """One launch per container: lists of engine arguments a chart appends to its command (`model.args` next
    to `servingRuntime.command` + `servingRuntime.args`) join the file's one full launch, when it has exactly
    one; with several, which list goes where is the chart's business, and each stays a partial launch."""
    mine = sites[before:]
    full = [s for s in mine if not s.partial]
    partials = [s for s in mine if s.partial]
    if len(full) != 1 or not partials:
        return
    launch = full[0].launch
    full[0].launch = Launch(launch.launcher, launch.args + tuple(t for p in partials for t in p.launch.args),
                            launch.dialect, launch.image)
    sites[before:] = full


_ARGV_KEYS = ("command", "args", "extraArgs", "extra_args", "vllmArgs", "engineArgs")


def _argv_launch(doc: YamlDoc, node: MappingNode, path: str, lists: list[tuple[ScalarNode, SequenceNode]],
                 out: Extracted) -> None:
    """A full launch, else a list of engine arguments the chart appends to its own command (a partial launch)."""
    items: list[ArgItem] = []
    for k, v in lists:
        p = f"{path}.{k.value}" if path else k.value
        items += [ArgItem(doc.tok(x, f"{p}[{i}]"), x) for i, x in enumerate(v.value) if isinstance(x, ScalarNode)]
    k0 = lists[0][0]
    implicit = doc.key_tok(k0, f"{path}.{k0.value}" if path else k0.value) if any(
        ENGINE_ONLY.match(it.tok.value) for it in items) else None
    for launch in launches_from_argv(doc, items, {}, implicit, out, yaml_list=True):
        out.sites.append(Site(launch, launch.launcher, image=image_of(doc, node, path),
                              partial=launch.launcher is implicit))


# Values keys whose camelCase entries a chart turns into vLLM flags (production-stack, ai-on-eks).
ENGINE_KEYS = ("vllmConfig", "modelParameters", "engineArgs", "vllmArgs")


def values_model(doc: YamlDoc, spec: MappingNode, path: str, out: Extracted) -> None:
    from kvplan.ingest.flags import KNOWN_FLAGS as known
    mkey = "modelURL" if isinstance(mget(spec, "modelURL"), ScalarNode) else "model"
    model = mget(spec, mkey)
    args: list[Tok] = [doc.tok(model, f"{path}.{mkey}" if path else mkey)]
    ckey = next((k for k in ENGINE_KEYS if isinstance(mget(spec, k), MappingNode)), "vllmConfig")
    cfg = mget(spec, ckey)
    for k, v in mitems(cfg):
        p = f"{path}.{ckey}.{k.value}" if path else f"{ckey}.{k.value}"
        if k.value == "extraArgs":
            args += [doc.tok(x, f"{p}[{i}]") for i, x in enumerate(seq(v)) if isinstance(x, ScalarNode)]
            continue
        flag = kebab(k.value)
        if (flag not in known and flag not in MODELLED) or not isinstance(v, ScalarNode):
            continue
        kt = doc.key_tok(k, p)
        if v.tag.endswith(":bool") or (v.style is None and v.value.lower() in ("true", "false")):
            if v.value.lower() == "true":
                args.append(Tok(flag, kt.line, kt.col, p))
            continue
        args += [Tok(flag, kt.line, kt.col, p), doc.tok(v, p)]
    gpus = scalar(mget(spec, "requestGPU"))
    count = int(gpus) if gpus and gpus.isdigit() else None
    # `requestGPU: 0` is a CPU deployment (vLLM's CPU backend); with `raySpec.enabled` the engine spans a Ray
    # cluster of pods (production-stack): in both, one pod's GPU request does not bound the parallelism
    if count == 0 or scalar(mget(mget(spec, "raySpec"), "enabled")) == "true":
        count = None
    launcher = doc.tok(model, f"{path}.{mkey}" if path else mkey, "vllm")
    out.sites.append(Site(Launch(launcher, tuple(args)), launcher, gpu_count=count, image=image_of(doc, spec, path)))


