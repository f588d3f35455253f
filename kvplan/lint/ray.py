"""Ray: a RayJob's entrypoint, a RayService's `serveConfigV2` and Ray Serve config files (`ray.serve.llm`)."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvplan.ingest.flags import REMOVED_FLAGS
from kvplan.lint.argv import launches_in_script
from kvplan.lint.extracted import Extracted, Site
from kvplan.lint.kubernetes import PodCtx, node_gpu_label
from kvplan.lint.shell import Launch, Tok
from kvplan.lint.yamlnodes import YamlDoc, embedded_yaml, mget, mitems, scalar, seq, shifted_into


def ray_job_entrypoint(doc: YamlDoc, node: MappingNode, v: ScalarNode, p: str, here: PodCtx, out: Extracted) -> None:
    """A RayJob's `entrypoint`: the command runs on the head node; a `vllm serve` there is the launch."""
    head = seq(mget(mget(mget(mget(mget(node, "rayClusterSpec"), "headGroupSpec"), "template"), "spec"),
                      "containers"))
    himage = mget(head[0], "image") if head else None
    image_tok = doc.tok(himage, "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].image") \
        if isinstance(himage, ScalarNode) else None
    for launch in launches_in_script(v.value, doc.pos_in(v), p, {}, out):
        out.sites.append(Site(launch, launch.launcher, gpu_label=here.gpu_label, image=image_tok))




# Ray Serve LLM builders whose `args.llm_configs` entries are vLLM engines (ray.serve.llm).
_RAY_LLM_BUILDER = re.compile(r"^ray\.serve\.llm:build_(?:openai_app|llm_deployment|vllm_deployment)$")


# vLLM 0.33 AsyncEngineArgs fields with no `vllm serve` option: valid engine_kwargs keys, no flag to check.
_KWARGS_WITHOUT_FLAG = frozenset({"model_weights", "enable_mm_processor_stats", "mamba_config",
                                  "_api_process_count", "_api_process_rank"})


def _py_value(node: Node) -> Any:
    return yaml.constructor.SafeConstructor().construct_document(node)


def _engine_kwargs(doc: YamlDoc, kwargs: Node | None, path: str) -> tuple[list[Tok], list[Tok]]:
    """Ray Serve LLM `engine_kwargs` (vLLM AsyncEngineArgs keyword arguments) as the `vllm serve` flags they
    are: a key that is no engine argument fails the replica, like an unknown flag; True is the flag, False
    its --no- form (or nothing), mappings and lists are the JSON the flag takes."""
    from kvplan.ingest.flags import serve_options
    table = serve_options()
    args: list[Tok] = []
    unknown: list[Tok] = []
    for k, v in mitems(kwargs):
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


def ray_serve_apps(doc: YamlDoc, sub: Node, out: Extracted) -> None:
    """Ray Serve config `applications`: each `args.llm_configs` entry of a `ray.serve.llm` builder is a vLLM
    engine (model from `model_loading_config`, flags from `engine_kwargs`)."""
    for i, app in enumerate(seq(mget(sub, "applications"))):
        if not _RAY_LLM_BUILDER.match((scalar(mget(app, "import_path")) or "").strip()):
            continue  # your own Python deployment: its engine arguments are in code kvplan does not read
        for j, cfg in enumerate(seq(mget(mget(app, "args"), "llm_configs"))):
            if not isinstance(cfg, MappingNode):
                continue  # a path to a separate LLMConfig file
            p = f"applications[{i}].args.llm_configs[{j}]"
            mlc = mget(cfg, "model_loading_config")
            source = mget(mlc, "model_source")
            if isinstance(mget(source, "bucket_uri"), ScalarNode):
                source = mget(source, "bucket_uri")
                mp = f"{p}.model_loading_config.model_source.bucket_uri"
            elif isinstance(source, ScalarNode):
                mp = f"{p}.model_loading_config.model_source"
            else:
                source, mp = mget(mlc, "model_id"), f"{p}.model_loading_config.model_id"
            args: list[Tok] = []
            if isinstance(source, ScalarNode):
                args.append(doc.tok(source, mp))
            flags, unknown = _engine_kwargs(doc, mget(cfg, "engine_kwargs"), f"{p}.engine_kwargs")
            launcher = doc.tok(source, mp, "vllm") if isinstance(source, ScalarNode) else doc.tok(cfg, p, "vllm")
            out.sites.append(Site(Launch(launcher, tuple(args + flags)), launcher, unknown_kwargs=tuple(unknown)))


def is_ray_serve_config(node: Node) -> bool:
    """A Ray Serve config file (`serve run` / `serve deploy`) with a Ray Serve LLM application."""
    return any(_RAY_LLM_BUILDER.match((scalar(mget(a, "import_path")) or "").strip())
               for a in seq(mget(node, "applications")))


def ray_serve(doc: YamlDoc, node: ScalarNode, path: str, spec: MappingNode, here: PodCtx, out: Extracted) -> None:
    """A RayService's `serveConfigV2`: each Ray Serve LLM `llm_configs` entry of a `ray.serve.llm` builder is a
    vLLM engine (model from `model_loading_config`, flags from `engine_kwargs`), in the cluster's image."""
    got = embedded_yaml(doc, node, path, "RayService serveConfigV2", errors=out)
    if got is None:
        return
    subs, inner, shift = got
    cluster = mget(spec, "rayClusterConfig")
    image_tok: Tok | None = None
    gpu_label = here.gpu_label
    workers = seq(mget(cluster, "workerGroupSpecs"))
    groups = [(f"spec.rayClusterConfig.workerGroupSpecs[{i}]", g) for i, g in enumerate(workers)]
    groups.append(("spec.rayClusterConfig.headGroupSpec", mget(cluster, "headGroupSpec")))
    for gpath, g in groups:  # the engines run on the GPU workers; their image says which vLLM
        pod = mget(mget(g, "template"), "spec")
        cs = seq(mget(pod, "containers"))
        img = mget(cs[0], "image") if cs else None
        if isinstance(img, ScalarNode) and image_tok is None:
            image_tok = doc.tok(img, f"{gpath}.template.spec.containers[0].image")
            if pod is not None:
                gpu_label = node_gpu_label(doc, pod, f"{gpath}.template.spec") or gpu_label
    sub_out = Extracted()
    for sub in subs:
        ray_serve_apps(inner, sub, sub_out)
    shifted_into(out, sub_out, shift, partial=False)
    for site in out.sites[len(out.sites) - len(sub_out.sites):]:
        site.image, site.gpu_label = image_tok, gpu_label
        site.unknown_kwargs = tuple(shift(t) for t in site.unknown_kwargs)


