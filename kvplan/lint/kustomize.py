"""Kustomize: inline `patches:`, strategic-merge patch objects and JSON 6902 patch files -> partial launches."""
from __future__ import annotations

import re
from dataclasses import replace

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvplan.lint.argv import ENGINE_ONLY, ArgItem, launches_from_argv
from kvplan.lint.extracted import Extracted, Site
from kvplan.lint.kubernetes import PodCtx, walk_k8s
from kvplan.lint.yamlnodes import YamlDoc, embedded_yaml, mget, scalar, seq, shifted_into


def kustomize_patches(doc: YamlDoc, v: Node, p: str, here: PodCtx, out: Extracted, kind: str) -> None:
    """A Kustomization's `patch` / `patchesStrategicMerge`: inline patches (block scalars) and patch objects."""
    for sub in ([v] if isinstance(v, ScalarNode) else seq(v)):
        if isinstance(sub, ScalarNode) and "\n" in sub.value:
            inline_patch(doc, sub, p, out)
    if isinstance(v, MappingNode):
        walk_k8s(doc, v, p, here, out, kind)




_PATCHED_ARGV = re.compile(r"^(.*/containers/\d+)/(args|command)(?:/(-|\d+))?$")


def is_json6902(node: Node) -> bool:
    """A JSON 6902 patch (a Kustomize `patchesJson6902` / `patches: [{path: FILE}]` file): a list of operations."""
    return (isinstance(node, SequenceNode) and bool(node.value)
            and all(isinstance(mget(op, "op"), ScalarNode) and isinstance(mget(op, "path"), ScalarNode)
                    for op in node.value))


def json6902(doc: YamlDoc, ops: SequenceNode, out: Extracted) -> None:
    """JSON 6902 operations on a container's argv: `add`/`replace` of the whole `args` / `command` list, or
    `add` of single arguments (`.../args/-`, in operation order). A launch of the patched container (its image
    and model live in the base) when the arguments are vLLM engine flags: other servers' patches are not."""
    appended: dict[str, list[ArgItem]] = {}
    for i, op in enumerate(ops.value):
        verb = scalar(mget(op, "op"))
        m = _PATCHED_ARGV.match(scalar(mget(op, "path")) or "")
        value = mget(op, "value")
        if m is None or verb not in ("add", "replace"):
            continue
        if m.group(3) is None and isinstance(value, SequenceNode):
            items = [ArgItem(doc.tok(x, f"[{i}].value[{j}]"), x) for j, x in enumerate(value.value)
                     if isinstance(x, ScalarNode)]
            implicit = doc.tok(value, f"[{i}].value") if m.group(2) == "args" else None
            for launch in launches_from_argv(doc, items, {}, implicit if any(
                    ENGINE_ONLY.match(it.tok.value) for it in items) else None, out, yaml_list=True):
                out.sites.append(Site(launch, launch.launcher, partial=True))
        elif m.group(3) is not None and m.group(2) == "args" and isinstance(value, ScalarNode):
            appended.setdefault(m.group(1), []).append(ArgItem(doc.tok(value, f"[{i}].value"), value))
    for items in appended.values():
        if not any(ENGINE_ONLY.match(it.tok.value) for it in items):
            continue  # e.g. a controller's --concurrent=10: not a vLLM launch
        implicit = replace(items[0].tok, value="")
        for launch in launches_from_argv(doc, items, {}, implicit, out, yaml_list=True):
            out.sites.append(Site(launch, launch.launcher, partial=True))


def inline_patch(doc: YamlDoc, node: ScalarNode, path: str, out: Extracted) -> None:
    """A Kustomize inline patch (`patches: [{patch: |- ...}]`): a strategic-merge object, or JSON 6902
    operations that replace a container's command/args. Positions map into the block scalar."""
    got = embedded_yaml(doc, node, path, "Kustomize patch")
    if got is None:
        return
    subs, inner, shift = got
    sub_out = Extracted()
    for sub in subs:
        if isinstance(sub, MappingNode):
            walk_k8s(inner, sub, "", PodCtx(), sub_out, scalar(mget(sub, "kind")) or "")
        elif isinstance(sub, SequenceNode):
            json6902(inner, sub, sub_out)
    shifted_into(out, sub_out, shift, partial=True)

