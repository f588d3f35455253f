"""Plan -> SGLang launch flags (`python -m sglang.launch_server ...`) and `--config` YAML.

SGLang's `--kv-cache-dtype` takes auto, fp8_e5m2, fp8_e4m3, bf16/bfloat16 and fp4_e2m1
(`python/sglang/srt/server_args.py::ServerArgs.kv_cache_dtype` choices in the 0.5 series; newer
trees add mxfp8, nvfp4 and fp4_mx_block16). "auto" means the model dtype there (its help text:
'"auto" will use model data type'), so quantized KV is always written out explicitly.
Released SGLang has one KV dtype for all layers. Per-layer dtypes exist only in the closed pull
requests sgl-project/sglang#15420 / #17530: `--kv-cache-per-layer-dtype "0-1:bf16,62-63:bf16"`
on top of `--kv-cache-dtype`; `per_layer=True` emits that syntax with a KV983 finding.
SGLang reads a `--config` YAML whose keys are the flag names without dashes
(docs/advanced_features/server_arguments.md).
"""
from __future__ import annotations

import shlex
from typing import Any

from kvplan import __version__
from kvplan.emit._common import by_planned, choose_global, map_layers, ranges
from kvplan.emit.codes import finding, sort_findings
from kvplan.emit.model import EmitResult, LayerDifference
from kvplan.emit.vllm import is_quantized, plan_error_findings
from kvplan.model.plan import EngineRef, Finding, Plan

SGLANG_VERSION = "0.5"
SGLANG_KV_CACHE_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")

_EXACT = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_inc": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
_NEAR = {
    "fp8_ds_mla": ("fp8_e4m3", "SGLang picks its own sparse-MLA FP8 layout"),
    "fp8_per_token_head": ("fp8_e4m3", "SGLang FP8 KV uses per-tensor scales (1.0 unless a checkpoint or "
                                       "--quantization-param-path supplies them), not per-token-head"),
    "int8_per_token_head": ("fp8_e4m3", "SGLang has no INT8 per-token-head KV dtype; FP8 E4M3 keeps 8 bits"),
    "nvfp4": ("fp4_e2m1", "SGLang's fp4_e2m1 is an MX-style block-16 FP4 layout, not vLLM's NVFP4"),
    "nvfp4_4over6": ("fp4_e2m1", "SGLang's fp4_e2m1 has no 4-over-6 scale choice"),
    "nvfp4_ds_mla": ("fp4_e2m1", "SGLang's fp4_e2m1 is not the nvfp4_ds_mla record"),
    "int4_per_token_head": ("fp4_e2m1", "SGLang has no INT4 KV; FP4 keeps 4 bits"),
    "turboquant_k8v4": ("fp8_e4m3", "SGLang has no TurboQuant KV; FP8 keeps at least as many bits"),
}


def to_sglang(kv: str, model_dtype: str) -> tuple[str, bool, str]:
    """vLLM kv_cache_dtype of one layer -> (SGLang value, exact, note)."""
    if kv in ("auto", "bfloat16", "float16"):
        stored = model_dtype if kv == "auto" else kv
        if stored == model_dtype:
            return "auto", True, ""
        if stored == "bfloat16":
            return "bfloat16", True, ""
        return "auto", False, f"SGLang has no {stored} KV dtype for a {model_dtype} model"
    if kv in _EXACT:
        return _EXACT[kv], True, ""
    if kv in _NEAR:
        v, note = _NEAR[kv]
        return v, False, note
    return "fp4_e2m1", False, f"SGLang has no {kv} KV dtype; FP4 is the nearest bit width"


def _per_layer_value(value: str, model_dtype: str) -> str:
    # The PR's own example spells 16-bit layers 'bf16'.
    if value == "auto":
        return "bf16" if model_dtype == "bfloat16" else "auto"
    return "bf16" if value == "bfloat16" else value


# Plan flag -> SGLang flag (same meaning); others are reported as not carried.
_CARRY = (("dtype", "--dtype"), ("tensor_parallel_size", "--tp-size"), ("max_model_len", "--context-length"),
          ("block_size", "--page-size"), ("quantization", "--quantization"))
_NOT_CARRIED = {
    "gpu_memory_utilization": "SGLang's --mem-fraction-static is a fraction of free memory for weights and KV, "
                              "not vLLM's whole-engine share",
    "max_num_batched_tokens": "SGLang splits this into --chunked-prefill-size and --max-prefill-tokens",
    "attention_backend": "SGLang's --attention-backend names differ (fa3, flashinfer, triton, ...)",
    "attention_config": "SGLang has no --attention-config",
}


def emit_sglang(plan: Plan, *, per_layer: bool = False) -> EmitResult:
    """Realise a plan as SGLang flags and `--config` YAML."""
    model_dtype = plan.model.dtype
    mapped = map_layers(plan, to_sglang)
    # Ties go to the plan's global dtype; a checkpoint-resolved 'auto' means its quantized dtype,
    # since SGLang's 'auto' is the model dtype.
    quantized = [m for m in mapped if m.value not in ("auto", "bfloat16")]
    if is_quantized(plan.kv_cache_dtype):
        preferred = to_sglang(plan.kv_cache_dtype, model_dtype)[0]
    else:
        preferred = choose_global(quantized, None) if quantized else "auto"
    g = choose_global(mapped, preferred)
    findings: list[Finding] = []
    diffs: list[LayerDifference] = []
    approx = [m for m in mapped if not m.exact]
    if approx:
        notes = "; ".join(sorted({f"{m.planned} -> {m.value}: {m.note}" for m in approx}))
        findings.append(finding("KV984", f"{len(approx)} layer(s) get the nearest SGLang KV dtype: {notes}.",
                                [m.index for m in approx]))
    others = [m for m in mapped if m.value != g]
    argv = ["--kv-cache-dtype", g]
    cfg: dict[str, Any] = {"kv-cache-dtype": g}
    if others and per_layer:
        spec = ranges([(m.index, _per_layer_value(m.value, model_dtype)) for m in others])
        argv += ["--kv-cache-per-layer-dtype", spec]
        cfg["kv-cache-per-layer-dtype"] = spec
        findings.append(finding("KV983", "--kv-cache-per-layer-dtype comes from sgl-project/sglang PR #17530 "
                                         "(closed, not in a release); layer numbers are decoder-layer indices.",
                                [m.index for m in others]))
    elif others:
        findings.append(finding("KV982", f"released SGLang has one KV dtype for all layers; {len(others)} layer(s) "
                                         f"get {g} instead of their planned dtype: "
                                + by_planned(others) + ".",
                                [m.index for m in others]))
    for m in mapped:
        got = m.value if (per_layer or m.value == g) else g
        if got != m.value:
            diffs.append(LayerDifference(index=m.index, planned=m.planned, emitted=got,
                                         reason="released SGLang has one --kv-cache-dtype for all layers"))
        elif not m.exact:
            diffs.append(LayerDifference(index=m.index, planned=m.planned, emitted=got, reason=m.note))
    for name, flag in _CARRY:
        if name in plan.flags:
            argv += [flag, str(plan.flags[name])]
            cfg[flag[2:]] = plan.flags[name]
    for name, why in sorted(_NOT_CARRIED.items()):
        if name in plan.flags:
            findings.append(finding("KV985", f"--{name.replace('_', '-')} is not carried over: {why}."))
    findings += plan_error_findings(plan)
    return EmitResult(
        kvplan_version=__version__, target=EngineRef(name="sglang", version=SGLANG_VERSION),
        plan_engine=plan.engine, model_source=plan.model.source, args=argv, command=shlex.join(argv),
        config=cfg, config_usage="python -m sglang.launch_server --model-path MODEL --config kvplan-sglang.yaml",
        per_layer_syntax=bool(per_layer and others), exact=not diffs, differences=diffs,
        findings=sort_findings(findings))
