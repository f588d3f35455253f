"""Deployment files -> vLLM launches with positions: which reader a file goes to.

One reader per source kind, each in its own module: Kubernetes objects (`kubernetes`), Kustomize
patches (`kustomize`), KubeRay and Ray Serve (`ray`), docker compose (`compose`), Helm values
(`helm`), vLLM `--config` files (`vllm_config`), Dockerfiles (`dockerfile`), and shell scripts /
launch lines (`argv` over `shell`'s lexer), with the YAML helpers they share in `yamlnodes`. Each
turns its file into `Site`s whose tokens keep their file line and column (and YAML path), so
findings point at the exact token; the checks downstream never know which kind a launch came from.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from kvplan.ingest.limits import compose_all as bounded_compose_all
from kvplan.lint.argv import launches_in_script
from kvplan.lint.compose import compose_services
from kvplan.lint.dockerfile import extract_dockerfile, is_dockerfile
from kvplan.lint.extracted import Annotation, Extracted, LineIndex, RawFinding, Site
from kvplan.lint.helm import helm_values
from kvplan.lint.kubernetes import PodCtx, walk_k8s
from kvplan.lint.kustomize import is_json6902, json6902
from kvplan.lint.operators import operator_resource
from kvplan.lint.ray import is_ray_serve_config, ray_serve_apps
from kvplan.lint.shell import Tok
from kvplan.lint.vllm_config import is_vllm_config, vllm_config_launch
from kvplan.lint.yamlnodes import YamlDoc, collect_annotations, collect_objects, mget, scalar

__all__ = ["Annotation", "Extracted", "LineIndex", "RawFinding", "Site", "extract_dockerfile", "extract_text",
           "extract_yaml", "is_dockerfile"]


def extract_yaml(text: str, path: Path | None = None) -> Extracted:
    """A YAML file: every document; a syntax error is finding KV801 and earlier documents still count.
    `path`: where the file is (a compose service's `build:` context is read relative to it)."""
    out = Extracted()
    li = LineIndex(text)
    doc = YamlDoc(li)
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
    collect_objects(doc, nodes)
    for node in nodes:
        first, last = node.start_mark.line + 1, node.end_mark.line + 1
        if mget(node, "apiVersion") is not None and mget(node, "kind") is not None:
            kind = scalar(mget(node, "kind")) or ""
            kinds.append("kubernetes")
            if not operator_resource(doc, node, kind, out):
                walk_k8s(doc, node, "", PodCtx(), out, kind)
            collect_annotations(doc, node, "", first, last, out)
        elif isinstance(mget(node, "services"), MappingNode):
            kinds.append("compose")
            compose_services(doc, mget(node, "services"), out, path)
            collect_annotations(doc, node, "", first, last, out)
        elif is_vllm_config(node):
            kinds.append("vllm-config")
            vllm_config_launch(doc, node, out)
        elif is_ray_serve_config(node):
            kinds.append("vllm-config")  # a Ray Serve config: `serve run config.yaml` starts the engines
            ray_serve_apps(doc, node, out)
        elif is_json6902(node):
            kinds.append("kubernetes")  # a Kustomize JSON 6902 patch file
            json6902(doc, node, out)
        elif mget(node, "suite") is not None and isinstance(mget(node, "tests"), SequenceNode):
            out.note = "a helm-unittest suite: the values in its tests are chart test inputs, not deployments"
        elif isinstance(node, MappingNode) and helm_values(doc, node, out, path):
            kinds.append("helm-values")
    if out.findings and any(f.code == "KV801" for f in out.findings):
        kinds.append(kinds[-1] if kinds else "unknown")
    out.kind = kinds[0] if kinds else "unknown"
    return out




_LAUNCH_HINT = re.compile(r"vllm\w*\}?[\"']?\s+serve|vllm\.entrypoints|vllm-openai|huggingfaceserver", re.I)


def extract_text(text: str) -> Extracted:
    """A shell script or a file of launch lines."""
    out = Extracted(kind="shell" if text.startswith("#!") else "text")
    if not _LAUNCH_HINT.search(text):
        return out
    li = LineIndex(text)
    for launch in launches_in_script(text, li.pos, None, {}, out):
        out.sites.append(Site(launch, launch.launcher, image=launch.image))
    return out
