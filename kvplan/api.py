"""Library entry points: compile a plan from a path and flags (what the CLI calls)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kvplan.backends.engines import resolve_engine
from kvplan.ingest.checkpoint import load_model_inputs
from kvplan.ingest.flags import parse_flags, split_launch_line
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import Plan
from kvplan.model.quant import QuantMetadata
from kvplan.planner.compile import compile_plan
from kvplan.rules.context import GpuFacts


def flags_from(flags: ServingFlags | Sequence[str] | str | dict[str, Any] | None) -> ServingFlags:
    """Accept ServingFlags, an argv list, a pasted launch line, or a dict of vLLM field names."""
    if flags is None:
        return ServingFlags()
    if isinstance(flags, ServingFlags):
        return flags
    if isinstance(flags, str):
        return parse_flags(split_launch_line(flags))
    if isinstance(flags, dict):
        argv: list[str] = []
        for k, v in flags.items():
            flag = "--" + k.replace("_", "-")
            if isinstance(v, (list, tuple)):
                argv += [flag, *map(str, v)]
            elif isinstance(v, dict):
                import json
                argv += [flag, json.dumps(v)]
            elif v is True:
                argv.append(flag)
            elif v is False:  # a boolean option turned off: its --no- form, as vLLM's config files do
                from kvplan.ingest.flags import KNOWN_FLAGS
                if "--no-" + flag[2:] in KNOWN_FLAGS:
                    argv.append("--no-" + flag[2:])
            elif v is None:
                continue
            else:
                argv += [flag, str(v)]
        return parse_flags(argv)
    return parse_flags(list(flags))


def gpu_facts(gpu: Any) -> GpuFacts | None:
    """Resolve --gpu (a name, a compute capability, 'auto', or a GpuProfile) to planner facts."""
    if gpu is None:
        return None
    if isinstance(gpu, GpuFacts):
        return gpu
    profile = gpu
    if isinstance(gpu, str):
        from kvplan.backends.gpus import resolve_gpu
        profile = resolve_gpu(gpu)
    cc = getattr(profile, "compute_capability", None)
    fp8 = getattr(profile, "fp8", "e4m3fn")
    fp8 = getattr(fp8, "value", fp8)
    return GpuFacts(name=profile.name, memory_gib=getattr(profile, "memory_gib", None),
                    compute_capability=tuple(cc) if cc else None, fp8=str(fp8),
                    supports_bf16=not (cc and tuple(cc) < (8, 0)) if getattr(profile, "vendor", "nvidia") == "nvidia" else True,
                    profile=profile)


def compile(path: str | Path, flags: ServingFlags | Sequence[str] | str | dict[str, Any] | None = None,
            gpu: Any = None, *, kv_budget_bytes: int | None = None,
            read_safetensors: bool = True, extra_checks: Iterable[Any] = (),
            engine: str | None = None, kv_scales: str | Path | None = None,
            offline: bool | None = None, strict: bool = False) -> Plan:
    """Compile the KV plan for a config.json, a checkpoint folder or a Hugging Face model id
    (``org/name``: resolved at the flags' ``--revision`` through the Hugging Face cache and Hub,
    see docs/hub.md; ``offline=True`` reads the cache only, like HF_HUB_OFFLINE=1) under vLLM
    serving flags. ``--hf-overrides`` in the flags is applied to config.json first, as vLLM does.

    `strict=True` (CLI `--strict`) makes finding KV604 an error: an architecture not verified
    against vLLM 0.33.0, or config keys that look like layer geometry but were not used.

    `kv_scales` is a `kvplan calibrate` scales file: per-tensor FP8 layers it covers get
    ``scale_source: calibrated`` (unless the checkpoint's own scales are loaded).
    `engine` is the release to model (`vllm==0.33.0` when None; `kvplan.backends.engines` lists
    the modelled range); another engine or a release outside it raises KvplanInputError.

    >>> plan = compile("examples/gpt-oss-20b/config.json", "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window")
    >>> plan.layers[0].kv_cache_dtype, plan.layers[1].kv_cache_dtype
    ('auto', 'fp8')
    """
    plan = compile_with_quant(path, flags, gpu, kv_budget_bytes=kv_budget_bytes,
                              read_safetensors=read_safetensors, extra_checks=extra_checks,
                              engine=engine, kv_scales=kv_scales, offline=offline)[0]
    if strict:
        from kvplan.planner.compile import apply_strict
        plan = apply_strict(plan)
    return plan


def compile_with_quant(path: str | Path, flags: ServingFlags | Sequence[str] | str | dict[str, Any] | None = None,
                       gpu: Any = None, *, kv_budget_bytes: int | None = None,
                       read_safetensors: bool = True, extra_checks: Iterable[Any] = (),
                       engine: str | None = None,
                       kv_scales: str | Path | None = None,
                       offline: bool | None = None) -> tuple[Plan, QuantMetadata]:
    """`compile`, also returning the checkpoint's quantization metadata (scale tensors with the
    values read from its safetensors), for callers that need more than the plan records."""
    ev = resolve_engine(engine)
    sf = flags_from(flags)
    inputs = load_model_inputs(path, quantization_flag=sf.quantization, read_safetensors=read_safetensors,
                               revision=sf.revision, hf_overrides=sf.hf_overrides, offline=offline)
    quant = inputs.quant
    if kv_scales is not None:  # `kvplan calibrate` output: per-tensor FP8 layers become scale_source calibrated
        from kvplan.ingest.kv_scales import with_kv_scales
        quant = with_kv_scales(quant, kv_scales)
    plan = compile_plan(inputs.arch, quant, sf, gpu_facts(gpu), source=inputs.source or str(path),
                        weight_bytes=inputs.weight_bytes, kv_budget_bytes=kv_budget_bytes,
                        extra_checks=extra_checks, engine=ev, hub=inputs.hub)
    return plan, quant
