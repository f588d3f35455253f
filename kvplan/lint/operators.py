"""Inference-operator resources that are not PodSpecs -> the vLLM launch their controller builds.

Each reader follows the controller's own code for where the model and engine arguments come from:

- KubeAI `Model` (`kubeai.org`, `engine: VLLM`) and the entries of the KubeAI models chart's
  `catalog:`: the controller runs `python3 -m vllm.entrypoints.openai.api_server --model=REF
  --served-model-name=NAME ARGS...` (kubeai internal/modelcontroller/engine_vllm.go), REF from `url`
  (`hf://org/name` -> `org/name`, `s3://...` as written, `pvc://...` -> `/model`), `--enable-lora` with
  `adapters`; `image` overrides the chart's image; `resourceProfile: nvidia-gpu-h100:2` is the GPU and its
  count.
- vLLM production-stack `VLLMRuntime`: `/opt/venv/bin/vllm serve MODEL_URL` plus the flags its
  controller derives from `model` and `vllmConfig` (production-stack operator/internal/controller/
  vllmruntime_controller.go), `vllmConfig.extraArgs`, image `deploymentConfig.image.registry/name`,
  GPUs `deploymentConfig.resources.gpu`.
- KServe `LLMInferenceService`: `vllm serve /mnt/models` for the model `spec.model.uri` names, per pool.
- llm-d ModelService chart values (`modelArtifacts.uri` + `decode`/`prefill` containers with
  `modelCommand: vllmServe | imageDefault`): `vllm serve MODEL` (or the image's own entrypoint with
  `--model MODEL`), `--tensor-parallel-size` from `parallelism.tensor`, then the container's `args`
  (llm-d-modelservice charts/llm-d-modelservice/templates/_helpers.tpl).

A catalog entry is a launch even when its `args` hold no engine flag. The release the engine runs is
the image's tag when the resource names an image; otherwise it is unknown here (the operator's
default image depends on the operator's version, which the file does not say).
"""
from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvplan.lint.argv import ArgItem, launches_from_argv
from kvplan.lint.extracted import Extracted, Site
from kvplan.lint.kubernetes import gpu_count_of
from kvplan.lint.shell import Launch, Tok, split_value
from kvplan.lint.yamlnodes import YamlDoc, mget, mitems, scalar, seq

_PROFILE = re.compile(r"^(?:nvidia-gpu-|amd-gpu-)?([^:]+?)(?::(\d+))?$")


def _model_from_url(doc: YamlDoc, url: ScalarNode, path: str) -> Tok:
    """KubeAI's `url` -> the --model value the controller passes, at the url's position."""
    t = doc.tok(url, path)
    scheme, sep, _ = url.value.partition("://")
    if not sep:
        return t
    if scheme in ("hf", "gs", "oss"):
        return t.at(len(scheme) + 3)
    if scheme == "pvc":
        return Tok("/model", t.line, t.col, t.yaml_path)
    return t  # s3://...: passed as written (with the Run:ai streamer)


def _kubeai_gpu(doc: YamlDoc, profile: Node | None, path: str) -> tuple[Tok | None, int | None]:
    """`resourceProfile: nvidia-gpu-h100:2` -> (a GPU label token "h100", 2)."""
    if not isinstance(profile, ScalarNode):
        return None, None
    m = _PROFILE.match(profile.value.strip())
    if m is None or profile.value.startswith("cpu"):
        return None, None
    t = doc.tok(profile, path)
    label = Tok(m.group(1), t.line, t.col, t.yaml_path) if profile.value.startswith(("nvidia-gpu-", "amd-gpu-")) \
        else None
    return label, int(m.group(2)) if m.group(2) else 1


def is_kubeai_entry(node: Node) -> bool:
    """A KubeAI Model spec or models-chart catalog entry served by vLLM."""
    return (isinstance(mget(node, "url"), ScalarNode) and "://" in (scalar(mget(node, "url")) or "")
            and (scalar(mget(node, "engine")) or "").upper() == "VLLM")


def kubeai_model(doc: YamlDoc, spec: MappingNode, path: str, out: Extracted, anchor: Tok | None = None) -> None:
    """One KubeAI model (a `Model`'s spec, or a catalog entry)."""
    p = f"{path}." if path else ""
    url = mget(spec, "url")
    assert isinstance(url, ScalarNode)
    model = _model_from_url(doc, url, f"{p}url")
    launcher = anchor or doc.tok(url, f"{p}url", "python3")
    args = [Tok("--model", model.line, model.col, model.yaml_path), model]
    args += [doc.tok(x, f"{p}args[{i}]") for i, x in enumerate(seq(mget(spec, "args"))) if isinstance(x, ScalarNode)]
    adapters = next((k for k, v in mitems(spec) if k.value == "adapters" and seq(v)), None)
    if adapters is not None:  # the controller serves LoRA adapters with --enable-lora
        args.append(_as(doc.key_tok(adapters, f"{p}adapters"), "--enable-lora"))
    label, count = _kubeai_gpu(doc, mget(spec, "resourceProfile"), f"{p}resourceProfile")
    image = mget(spec, "image")
    out.sites.append(Site(Launch(launcher, tuple(args)), launcher, gpu_label=label, gpu_count=count,
                          image=doc.tok(image, f"{p}image") if isinstance(image, ScalarNode) else None))


# VLLMRuntime fields -> the flags its controller appends (vllmruntime_controller.go, deploymentForVLLMRuntime):
# (section, field, flag, kind): "value" passes the value, "bool" the flag when true, "both" the flag or its
# --no- form (the controller passes one of the two).
_VLLM_RUNTIME_FIELDS = (
    ("model", "enableLoRA", "--enable-lora", "bool"),
    ("model", "enableTool", "--enable-auto-tool-choice", "bool"),
    ("model", "toolCallParser", "--tool-call-parser", "value"),
    ("vllmConfig", "enableChunkedPrefill", "--enable-chunked-prefill", "both"),
    ("vllmConfig", "enablePrefixCaching", "--enable-prefix-caching", "both"),
    ("model", "maxModelLen", "--max-model-len", "value"),
    ("model", "dtype", "--dtype", "value"),
    ("vllmConfig", "tensorParallelSize", "--tensor-parallel-size", "value"),
    ("model", "maxNumSeqs", "--max-num-seqs", "value"),
    ("vllmConfig", "gpuMemoryUtilization", "--gpu-memory-utilization", "value"),
    ("vllmConfig", "maxLoras", "--max-loras", "value"),
)


def vllm_runtime(doc: YamlDoc, spec: MappingNode, out: Extracted) -> None:
    """A production-stack `VLLMRuntime`: the `vllm serve` its controller builds."""
    model = mget(mget(spec, "model"), "modelURL")
    if not isinstance(model, ScalarNode):
        return
    mtok = doc.tok(model, "spec.model.modelURL")
    args: list[Tok] = [mtok]
    for section, name, flag, kind in _VLLM_RUNTIME_FIELDS:
        node = mget(mget(spec, section), name)
        if not isinstance(node, ScalarNode) or (node.value in ("", "0") and kind == "value"):
            continue
        key = next(k for k, v in mitems(mget(spec, section)) if v is node)
        kt = doc.key_tok(key, f"spec.{section}.{name}")
        truth = node.value.lower() == "true"
        if kind == "value":
            args += [Tok(flag, kt.line, kt.col, kt.yaml_path), doc.tok(node, kt.yaml_path or "")]
        elif truth or kind == "both":
            args.append(Tok(flag if truth else "--no-" + flag[2:], kt.line, kt.col, kt.yaml_path))
    extra = mget(mget(spec, "vllmConfig"), "extraArgs")
    args += [doc.tok(x, f"spec.vllmConfig.extraArgs[{i}]") for i, x in enumerate(seq(extra))
             if isinstance(x, ScalarNode)]
    deploy = mget(spec, "deploymentConfig")
    img = mget(deploy, "image")
    iname, registry = mget(img, "name"), scalar(mget(img, "registry"))
    image = None
    if isinstance(iname, ScalarNode):
        image = doc.tok(iname, "spec.deploymentConfig.image.name",
                        f"{registry}/{iname.value}" if registry and "/" in iname.value else iname.value)
    gpus = scalar(mget(mget(deploy, "resources"), "gpu"))
    launcher = doc.tok(model, "spec.model.modelURL", "vllm")
    out.sites.append(Site(Launch(launcher, tuple(args)), launcher, image=image,
                          gpu_count=int(gpus) if gpus and gpus.isdigit() else None))


_SIMULATOR = re.compile(r"inference-sim", re.I)
_TEMPLATE_NAME = re.compile(r"\{\{-?\s*\.Values\.modelArtifacts\.name\s*-?\}\}")


def is_llmd_modelservice(node: Node) -> bool:
    """llm-d ModelService chart values: `modelArtifacts.uri` and decode/prefill containers."""
    return isinstance(mget(mget(node, "modelArtifacts"), "uri"), ScalarNode) and any(
        isinstance(mget(mget(node, role), "containers"), SequenceNode) for role in ("decode", "prefill"))


def _llmd_model(doc: YamlDoc, root: MappingNode) -> Tok | None:
    arts = mget(root, "modelArtifacts")
    uri = mget(arts, "uri")
    assert isinstance(uri, ScalarNode)
    scheme, sep, rest = uri.value.partition("://")
    t = doc.tok(uri, "modelArtifacts.uri")
    if not sep:
        return None
    rest = rest.strip("\"'")
    if _TEMPLATE_NAME.search(rest):  # uri: hf://"{{ .Values.modelArtifacts.name }}"
        name = mget(arts, "name")
        return doc.tok(name, "modelArtifacts.name") if isinstance(name, ScalarNode) else None
    if scheme == "hf":
        return t.at(uri.value.index(rest))
    if scheme == "pvc":
        mount = scalar(mget(arts, "mountPath")) or "/model-cache"
        return Tok(f"{mount}/{rest.split('/', 1)[-1]}", t.line, t.col, t.yaml_path)
    if scheme == "pvc+hf":
        parts = rest.split("/")
        return Tok("/".join(parts[-2:]), t.line, t.col, t.yaml_path)
    return None


def llmd_modelservice(doc: YamlDoc, root: MappingNode, out: Extracted) -> set[str]:
    """The vLLM containers of an llm-d ModelService values file; returns the roles read (a container with
    `modelCommand: custom` keeps its own command and args and is read as any other container list)."""
    model = _llmd_model(doc, root)
    done: set[str] = set()
    for role in ("decode", "prefill"):
        rnode = mget(root, role)
        if scalar(mget(rnode, "create")) == "false":
            done.add(role)
            continue
        tp = scalar(mget(mget(rnode, "parallelism"), "tensor"))
        for i, c in enumerate(seq(mget(rnode, "containers"))):
            cmd = scalar(mget(c, "modelCommand")) or "custom"
            if cmd not in ("vllmServe", "imageDefault") or (
                    cmd == "imageDefault" and _SIMULATOR.search(scalar(mget(c, "image")) or "")):
                continue  # llm-d's inference simulator takes vLLM's arguments but is no vLLM
            done.add(role)
            p = f"{role}.containers[{i}]"
            anchor = doc.tok(mget(c, "modelCommand") or c, f"{p}.modelCommand")
            args: list[Tok] = []
            if model is not None:
                args += ([Tok("--model", model.line, model.col, model.yaml_path)] if cmd == "imageDefault" else [])
                args.append(model)
            if tp and tp.isdigit() and int(tp) > 1:
                tnode = mget(mget(rnode, "parallelism"), "tensor")
                tt = doc.tok(tnode, f"{role}.parallelism.tensor") if tnode is not None else anchor
                args += [Tok("--tensor-parallel-size", tt.line, tt.col, tt.yaml_path), tt]
            items = [ArgItem(doc.tok(x, f"{p}.args[{j}]"), x) for j, x in enumerate(seq(mget(c, "args")))
                     if isinstance(x, ScalarNode)]
            for launch in launches_from_argv(doc, items, {}, _as(anchor, "vllm"), out, yaml_list=True):
                launch = Launch(launch.launcher, tuple(args) + launch.args, launch.dialect)
                img = mget(c, "image")
                gpus = scalar(mget(mget(mget(c, "resources"), "limits"), "nvidia.com/gpu"))
                out.sites.append(Site(launch, anchor, image=doc.tok(img, f"{p}.image")
                                      if isinstance(img, ScalarNode) else None,
                                      gpu_count=int(gpus) if gpus and gpus.isdigit() else None,
                                      partial=model is None))
    return done


def _as(t: Tok, value: str) -> Tok:
    """A token with `value` at `t`'s place (a flag the controller adds, anchored where its setting is)."""
    return Tok(value, t.line, t.col, t.yaml_path)


def _main_container(template: Node | None) -> Node | None:
    cs = seq(mget(template, "containers"))
    return next((c for c in cs if scalar(mget(c, "name")) == "main"), cs[0] if cs else None)


def llm_inference_service(doc: YamlDoc, spec: MappingNode, out: Extracted) -> None:
    """A KServe `LLMInferenceService`: the decode pool (`spec`) and, when present, the prefill pool
    (`spec.prefill`) each run `vllm serve /mnt/models` with the model `spec.model.uri` names (KServe's storage
    initializer downloads it there), `--tensor-parallel-size` from `parallelism.tensor`, the main container's
    `VLLM_ADDITIONAL_ARGS` and its `args` (kserve config/llmisvcconfig/config-llm-template.yaml)."""
    model = mget(spec, "model")
    uri, name = mget(model, "uri"), mget(model, "name")
    mtok: Tok | None = None
    if isinstance(uri, ScalarNode) and uri.value.startswith("hf://"):
        mtok = doc.tok(uri, "spec.model.uri").at(5)
    elif isinstance(name, ScalarNode):
        mtok = doc.tok(name, "spec.model.name")
    elif isinstance(uri, ScalarNode):
        mtok = doc.tok(uri, "spec.model.uri")
    for role, rnode in (("spec", spec), ("spec.prefill", mget(spec, "prefill"))):
        if not isinstance(rnode, MappingNode):
            continue
        main = _main_container(mget(rnode, "template"))
        cpath = f"{role}.template.containers[{seq(mget(mget(rnode, 'template'), 'containers')).index(main)}]" \
            if main is not None else f"{role}.template"
        if main is not None and mget(main, "command") is not None:
            continue  # a container with its own command: read as any other container (kubernetes)
        key = next((k for k, v in mitems(spec) if v is rnode), None)
        anchor = (doc.key_tok(key, role) if key is not None else None) or mtok or doc.tok(rnode, role)
        args: list[Tok] = [mtok] if mtok is not None else []
        tp = mget(mget(rnode, "parallelism"), "tensor")
        if isinstance(tp, ScalarNode) and tp.value.isdigit():
            tt = doc.tok(tp, f"{role}.parallelism.tensor")
            args += [_as(tt, "--tensor-parallel-size"), tt]
        for i, e in enumerate(seq(mget(main, "env"))):
            v = mget(e, "value")
            if scalar(mget(e, "name")) == "VLLM_ADDITIONAL_ARGS" and isinstance(v, ScalarNode):
                args += split_value(v.value, doc.tok(v, f"{cpath}.env[{i}].value"))
        args += [doc.tok(x, f"{cpath}.args[{i}]") for i, x in enumerate(seq(mget(main, "args")))
                 if isinstance(x, ScalarNode)]
        img = mget(main, "image")
        gpus = gpu_count_of(mget(main, "resources"))
        launcher = _as(anchor, "vllm")
        out.sites.append(Site(Launch(launcher, tuple(args)), launcher, gpu_count=gpus,
                              image=doc.tok(img, f"{cpath}.image") if isinstance(img, ScalarNode) else None))


def operator_resource(doc: YamlDoc, node: MappingNode, kind: str, out: Extracted) -> bool:
    """A custom resource read by its operator's rules; False for anything else (walked as Kubernetes)."""
    api = scalar(mget(node, "apiVersion")) or ""
    spec = mget(node, "spec")
    if kind == "Model" and api.startswith("kubeai.org/") and isinstance(spec, MappingNode):
        if is_kubeai_entry(spec):
            kubeai_model(doc, spec, "spec", out)
        return True
    if kind == "VLLMRuntime" and api.startswith("production-stack.vllm.ai/") and isinstance(spec, MappingNode):
        vllm_runtime(doc, spec, out)
        return True
    if kind == "LLMInferenceService" and api.startswith("serving.kserve.io/") and isinstance(spec, MappingNode):
        before = len(out.sites)
        llm_inference_service(doc, spec, out)
        return len(out.sites) > before  # custom commands: walked as containers
    return False
