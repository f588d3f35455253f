"""Kubernetes objects -> launches: every container of every object with a `containers` list, its
environment, GPU node selector and GPU count; a KServe `model`; LeaderWorkerSet groups; KubeRay groups."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvplan.lint.argv import ENGINE_ONLY, ArgItem, launches_from_argv, referenced
from kvplan.lint.extracted import EXTRA_ARGS_ENV, Extracted, Site
from kvplan.lint.shell import (
    VLLM_IMAGE,
    Launch,
    Tok,
    VarValue,
    expand_k8s,
    split_value,
)
from kvplan.lint.yamlnodes import YamlDoc, mget, mitems, scalar, seq

GPU_LABEL_KEYS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator",
                  "karpenter.k8s.aws/instance-gpu-name", "nvidia.com/gpu.family", "gpu.product")
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")


@dataclass(frozen=True)
class PodCtx:
    gpu_label: Tok | None = None
    group_size: int = 1
    ray: bool = False  # a KubeRay head/worker group: the operator runs `ray start`, not the image's entrypoint


def node_gpu_label(doc: YamlDoc, spec: Node, path: str) -> Tok | None:
    for k, v in mitems(mget(spec, "nodeSelector")):
        if k.value in GPU_LABEL_KEYS and isinstance(v, ScalarNode):
            return doc.tok(v, f"{path}.nodeSelector.{k.value}")
    terms = mget(mget(mget(mget(spec, "affinity"), "nodeAffinity"),
                        "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms")
    for ti, term in enumerate(seq(terms)):
        for ei, expr in enumerate(seq(mget(term, "matchExpressions"))):
            if scalar(mget(expr, "key")) in GPU_LABEL_KEYS and scalar(mget(expr, "operator")) == "In":
                vals = seq(mget(expr, "values"))
                if vals and isinstance(vals[0], ScalarNode):
                    return doc.tok(vals[0], f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                                            f"Execution.nodeSelectorTerms[{ti}].matchExpressions[{ei}].values[0]")
    return None


def gpu_count_of(resources: Node | None) -> int | None:
    for section in ("limits", "requests"):
        for key in GPU_RESOURCES:
            v = scalar(mget(mget(resources, section), key))
            if v is not None and v.strip().isdigit():
                return int(v)
    return None


def container_env(doc: YamlDoc, c: Node, path: str) -> tuple[dict[str, VarValue], list[tuple[str, VarValue]]]:
    """A container's environment as Kubernetes builds it: envFrom, then env in order; `$(VAR)` in a
    value refers to entries defined before it; values from a ConfigMap or Secret defined in the same
    file are known, other valueFrom sources are set but unknown."""
    env: dict[str, VarValue] = {}
    ordered: list[tuple[str, VarValue]] = []
    for src in seq(mget(c, "envFrom")):
        ref = mget(src, "configMapRef") or mget(src, "secretRef")
        data = doc.objects.get(scalar(mget(ref, "name")) or "")
        if data is None:
            continue
        prefix = scalar(mget(src, "prefix")) or ""
        for key, vnode in data.items():
            env[prefix + key] = VarValue(vnode.value, doc.tok(vnode, key))
    for i, e in enumerate(seq(mget(c, "env"))):
        name, vnode = scalar(mget(e, "name")), mget(e, "value")
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
            ref = mget(mget(e, "valueFrom"), "configMapKeyRef") or mget(mget(e, "valueFrom"), "secretKeyRef")
            data = doc.objects.get(scalar(mget(ref, "name")) or "") or {}
            known = data.get(scalar(mget(ref, "key")) or "")
            vv = (VarValue(known.value, doc.tok(known, scalar(mget(ref, "key")) or "")) if known is not None
                  else VarValue("", doc.tok(e, f"{path}.env[{i}]"), unknown=True))
        env[name] = vv
        ordered.append((name, vv))
    return env, ordered




# Kinds whose containers are templates another object completes (KServe appends the model's args).
RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime", "LLMInferenceServiceConfig")


def read_container(doc: YamlDoc, c: Node, path: str, pod: PodCtx, out: Extracted, dialect: str = "vllm",
               model_hint: Tok | None = None, kind: str = "") -> None:
    inode = mget(c, "image")
    image = scalar(inode) or ""
    env, ordered = container_env(doc, c, path)
    items: list[ArgItem] = []
    for key in ("command", "args"):
        node = mget(c, key)
        if isinstance(node, ScalarNode):  # a string where a list belongs: kubectl rejects it, lint it anyway
            node = SequenceNode("tag:yaml.org,2002:seq", [node])
        for i, it in enumerate(seq(node)):
            if isinstance(it, ScalarNode):
                items.append(ArgItem(doc.tok(it, f"{path}.{key}[{i}]"), it))
    has_command = mget(c, "command") is not None
    implicit = None
    partial = kind in RUNTIME_KINDS
    if dialect == "kserve-hf":
        implicit = doc.tok(mget(c, "modelFormat") or c, f"{path}")
    elif not has_command and not pod.ray and VLLM_IMAGE.search(image):
        implicit = doc.tok(inode, f"{path}.image") if inode is not None else None
    elif inode is None and not has_command and any(ENGINE_ONLY.match(it.tok.value) for it in items):
        # A Kustomize patch (strategic merge): args for a container whose image is in the base.
        implicit = doc.tok(mget(c, "name") or c, f"{path}.name" if mget(c, "name") is not None else path)
        partial = True
    launches = launches_from_argv(doc, items, env, implicit, out, yaml_list=True, more_args=partial)
    texts = [it.tok.value for it in items]
    image_tok = doc.tok(inode, f"{path}.image") if isinstance(inode, ScalarNode) else None
    for launch in launches:
        extra: list[Tok] = []
        if launch.launcher is implicit:  # only the image's own entrypoint appends these variables
            for name, vv in ordered:
                if EXTRA_ARGS_ENV.match(name) and not referenced(name, texts):
                    extra += ([replace(vv.tok, unknown=True)] if vv.unknown else split_value(vv.value, vv.tok))
        args = launch.args + tuple(extra)
        launch = Launch(launch.launcher, args, "kserve-hf" if dialect == "kserve-hf" else launch.dialect)
        # a Ray head group's engine spans the Ray cluster (workers' GPUs too): one pod's GPUs do not bound it
        count = None if pod.ray else gpu_count_of(mget(c, "resources"))
        out.sites.append(Site(launch, launch.launcher, model_hint=model_hint, gpu_label=pod.gpu_label,
                              gpu_count=count, group_size=pod.group_size, image=image_tok, partial=partial))


_RAY_GROUPS = ("headGroupSpec", "workerGroupSpecs")


def walk_k8s(doc: YamlDoc, node: Node, path: str, pod: PodCtx, out: Extracted, kind: str = "") -> None:
    if isinstance(node, SequenceNode):
        for i, n in enumerate(node.value):
            walk_k8s(doc, n, f"{path}[{i}]", pod, out, kind)
        return
    if not isinstance(node, MappingNode):
        return
    label = node_gpu_label(doc, node, path) if (mget(node, "containers") or mget(node, "model")) else None
    here = PodCtx(label or pod.gpu_label, pod.group_size, pod.ray)
    lwt = mget(node, "leaderWorkerTemplate")
    for k, v in mitems(node):
        p = f"{path}.{k.value}" if path else k.value
        if _k8s_field(doc, node, path, k.value, v, p, here, out, kind):
            continue
        if k.value not in ("metadata", "status") and (lwt is None or k.value != "leaderWorkerTemplate"):
            walk_k8s(doc, v, p, here, out, kind)


def _k8s_field(doc: YamlDoc, node: MappingNode, path: str, key: str, v: Node, p: str, here: PodCtx,
               out: Extracted, kind: str) -> bool:
    """Walk the field `key` (at `p`) of the object `node` (at `path`) if it has a meaning of its own: containers,
    a KServe model, a LeaderWorkerSet template, Ray groups and job/service commands, Kustomize patches.
    False for any other field, which is only walked into."""
    from kvplan.lint import kustomize, ray  # they walk the objects they hold with walk_k8s: imported late
    if key == "containers" and isinstance(v, SequenceNode):
        for i, c in enumerate(v.value):
            read_container(doc, c, f"{p}[{i}]", here, out, kind=kind)
    elif key == "model" and isinstance(v, MappingNode) and (
            mget(v, "modelFormat") or mget(v, "storageUri") or mget(v, "runtime")):
        kserve_model(doc, v, p, here, out, kind)
    elif key == "leaderWorkerTemplate" and isinstance(v, MappingNode):
        size = scalar(mget(v, "size"))
        walk_k8s(doc, v, p, PodCtx(here.gpu_label, int(size) if size and size.isdigit() else 1, here.ray), out, kind)
    elif key in _RAY_GROUPS:
        walk_k8s(doc, v, p, PodCtx(here.gpu_label, here.group_size, True), out, kind)
    elif key == "entrypoint" and kind == "RayJob" and isinstance(v, ScalarNode) and path == "spec":
        ray.ray_job_entrypoint(doc, node, v, p, here, out)
    elif key == "serveConfigV2" and kind == "RayService" and isinstance(v, ScalarNode) and path == "spec":
        ray.ray_serve(doc, v, p, node, here, out)
    elif key in ("patch", "patchesStrategicMerge") and kind == "Kustomization":
        kustomize.kustomize_patches(doc, v, p, here, out, kind)
    else:
        return False
    return True




def kserve_model(doc: YamlDoc, v: MappingNode, p: str, here: PodCtx, out: Extracted, kind: str) -> None:
    """A KServe InferenceService's `model`: served by the Hugging Face runtime (vLLM inside) unless it names
    another format or runtime; an `hf://` storage URI names the model."""
    fmt = (scalar(mget(mget(v, "modelFormat"), "name")) or "") + (scalar(mget(v, "runtime")) or "")
    if fmt and not re.search(r"huggingface|vllm", fmt, re.I):
        return
    uri = mget(v, "storageUri")
    hint = None
    if isinstance(uri, ScalarNode) and uri.value.startswith("hf://"):
        hint = doc.tok(uri, f"{p}.storageUri", uri.value[5:].split(":")[0])
    read_container(doc, v, p, here, out, dialect="kserve-hf", model_hint=hint, kind=kind)


