"""Plan -> TensorRT-LLM (PyTorch backend) `trtllm-serve` flags and `extra_llm_api_options` YAML.

The KV dtype is `KvCacheConfig.dtype` (`tensorrt_llm/llmapi/llm_args.py`: a string, default "auto";
"auto" follows the checkpoint's `kv_cache_quant_algo`), exposed by `trtllm-serve --kv_cache_dtype`
with the choices auto, fp8, nvfp4 (NVIDIA/TensorRT-LLM PR #11487, "'auto' uses checkpoint/model
metadata; explicit values force override"). The legacy TensorRT engine flow sets the same thing
through `QuantConfig.kv_cache_quant_algo` (`tensorrt_llm/models/modeling_utils.py`), whose allowed
values are `KV_CACHE_QUANT_ALGO_LIST = [FP8, INT8, NVFP4]` (`tensorrt_llm/quantization/mode.py`);
`LayerQuantConfig.quantized_layers` is per-layer for weights only, its kv_cache_quant_algo is
model-wide. Per-layer KV dtypes exist only in the open PR #13695: `KvCacheConfig.dtype` as
"0-3:fp8,4-35:nvfp4" (fp8, nvfp4, fp16, bf16); `per_layer=True` emits that syntax (KV983).
"""
from __future__ import annotations

import shlex
from typing import Any

from kvplan import __version__
from kvplan.emit._common import Mapped, by_planned, choose_global, map_layers, ranges
from kvplan.emit.codes import finding, sort_findings
from kvplan.emit.model import EmitResult, LayerDifference
from kvplan.emit.vllm import auto_values, is_quantized, plan_error_findings
from kvplan.model.plan import EngineRef, Finding, Plan

TRTLLM_VERSION = "1.x (PyTorch backend, trtllm-serve)"
TRTLLM_KV_CACHE_DTYPES = ("auto", "fp8", "nvfp4")

_NEAR = {
    "fp8_e5m2": ("fp8", "TensorRT-LLM FP8 KV is E4M3; there is no E5M2 KV cache"),
    "fp8_ds_mla": ("fp8", "TensorRT-LLM picks its own sparse-MLA FP8 layout"),
    "fp8_per_token_head": ("fp8", "TensorRT-LLM FP8 KV uses per-tensor scales, not per-token-head"),
    "int8_per_token_head": ("fp8", "KvCacheConfig.dtype has no INT8 (INT8 KV is the legacy engine's "
                                   "calibrated kv_cache_quant_algo INT8); FP8 keeps 8 bits"),
    "nvfp4_4over6": ("nvfp4", "TensorRT-LLM NVFP4 KV has no 4-over-6 scale choice"),
    "nvfp4_ds_mla": ("nvfp4", "TensorRT-LLM NVFP4 KV is not the nvfp4_ds_mla record"),
    "turboquant_k8v4": ("fp8", "TensorRT-LLM has no TurboQuant KV; FP8 keeps at least as many bits"),
}


def to_trtllm(kv: str, model_dtype: str) -> tuple[str, bool, str]:
    """vLLM kv_cache_dtype of one layer -> (KvCacheConfig.dtype value, exact, note)."""
    if kv in ("auto", "bfloat16", "float16"):
        stored = model_dtype if kv == "auto" else kv
        if stored == model_dtype:
            return "auto", True, ""
        return "auto", False, f"KvCacheConfig.dtype has no {stored} for a {model_dtype} model"
    if kv in ("fp8", "fp8_e4m3", "fp8_inc"):
        return "fp8", True, ""
    if kv == "nvfp4":
        return "nvfp4", True, ""
    if kv in _NEAR:
        v, note = _NEAR[kv]
        return v, False, note
    return "nvfp4", False, f"TensorRT-LLM has no {kv} KV dtype; NVFP4 is the nearest bit width"


def checkpoint_kv(plan: Plan) -> bool:
    """The checkpoint carries a KV scheme the engine applies under 'auto' (ModelOpt or compressed-tensors)."""
    for lp in plan.layers:
        if any(d.rule in ("KV102", "KV103") and d.field == "kv_cache_dtype" for d in lp.decisions):
            return True
    return any(f.code == "KV105" for f in plan.findings)


def _per_layer_value(m: Mapped, model_dtype: str) -> str:
    if m.value == "auto":
        return "fp16" if model_dtype == "float16" else "bf16"
    return m.value


_NOT_CARRIED = {
    "gpu_memory_utilization": "TensorRT-LLM's kv_cache_free_gpu_memory_fraction is a share of the memory left "
                              "after weights, not vLLM's whole-engine share",
    "max_num_batched_tokens": "TensorRT-LLM's max_num_tokens also bounds decode batches",
    "attention_backend": "TensorRT-LLM attention backends (TRTLLM, FLASHINFER, VANILLA) are not vLLM's",
    "attention_config": "TensorRT-LLM has no --attention-config",
    "quantization": "TensorRT-LLM takes weight quantization from the checkpoint (hf_quant_config.json)",
}


def emit_trtllm(plan: Plan, *, per_layer: bool = False) -> EmitResult:
    """Realise a plan as trtllm-serve flags and an extra_llm_api_options YAML."""
    model_dtype = plan.model.dtype
    mapped = map_layers(plan, to_trtllm)
    ckpt = checkpoint_kv(plan)
    findings: list[Finding] = []
    g, value = _global_dtype(plan, mapped, ckpt)
    approx = [m for m in mapped if not m.exact]
    if approx:
        notes = "; ".join(sorted({f"{m.planned} -> {m.value}: {m.note}" for m in approx}))
        findings.append(finding("KV984", f"{len(approx)} layer(s) get the nearest TensorRT-LLM KV dtype: {notes}.",
                                [m.index for m in approx]))
    others = [m for m in mapped if m.value != g]
    kv_cfg: dict[str, Any] = {"dtype": value}
    argv: list[str] = []
    if others and per_layer:
        spec = ranges([(m.index, m.value if m.value != "auto" else _per_layer_value(m, model_dtype))
                       for m in mapped])
        kv_cfg["dtype"] = spec
        argv += ["--extra_llm_api_options", "kvplan-trtllm.yaml"]
        findings.append(finding("KV983", "per-layer KvCacheConfig.dtype comes from NVIDIA/TensorRT-LLM PR #13695 "
                                         "(open, not in a release); layer numbers are decoder-layer indices.",
                                [m.index for m in others]))
    else:
        argv += ["--kv_cache_dtype", value]
        if others:
            findings.append(finding("KV982", f"released TensorRT-LLM has one KV dtype for all layers; {len(others)} "
                                             f"layer(s) get {g} instead of their planned dtype: "
                                    + by_planned(others) + ".",
                                    [m.index for m in others]))
    checkpoint_auto = ckpt and kv_cfg["dtype"] == "auto"
    sixteen = [m for m in mapped if m.value == "auto" and (per_layer or g == "auto")]
    if checkpoint_auto and sixteen:
        findings.append(finding("KV987", f"{len(sixteen)} layer(s) are planned in {model_dtype} but the checkpoint "
                                         "declares KV quantization, which TensorRT-LLM's 'auto' applies.",
                                [m.index for m in sixteen]))
    diffs = _differences(mapped, g, per_layer, checkpoint_auto)
    cfg: dict[str, Any] = {"kv_cache_config": kv_cfg}
    argv += _carry_flags(plan, cfg, kv_cfg)
    for name, why in sorted(_NOT_CARRIED.items()):
        if name in plan.flags:
            findings.append(finding("KV985", f"--{name.replace('_', '-')} is not carried over: {why}."))
    findings += plan_error_findings(plan)
    return EmitResult(
        kvplan_version=__version__, target=EngineRef(name="trtllm", version=TRTLLM_VERSION),
        plan_engine=plan.engine, model_source=plan.model.source, args=argv, command=shlex.join(argv),
        config=cfg, config_usage="trtllm-serve MODEL --extra_llm_api_options kvplan-trtllm.yaml",
        per_layer_syntax=bool(per_layer and others), exact=not diffs, differences=diffs,
        findings=sort_findings(findings))


def _global_dtype(plan: Plan, mapped: list[Mapped], ckpt: bool) -> tuple[str, str]:
    """(the one dtype most layers get, the KvCacheConfig.dtype to write for it).

    A checkpoint-resolved dtype is written as 'auto': TensorRT-LLM resolves it the same way."""
    model_dtype = plan.model.dtype
    quantized = [m for m in mapped if m.value != "auto"]
    if is_quantized(plan.kv_cache_dtype):
        preferred = to_trtllm(plan.kv_cache_dtype, model_dtype)[0]
    else:
        preferred = choose_global(quantized, None) if quantized else "auto"
    g = choose_global(mapped, preferred)
    av = auto_values(plan)
    if ckpt and av is not None and g != "auto" and all(
            to_trtllm(av[m.index], model_dtype)[0] == g for m in mapped if m.value == g):
        return g, "auto"
    return g, g


def _differences(mapped: list[Mapped], g: str, per_layer: bool, checkpoint_auto: bool) -> list[LayerDifference]:
    """Layers whose emitted dtype is not the planned one, and why."""
    diffs: list[LayerDifference] = []
    for m in mapped:
        got = m.value if (per_layer or m.value == g) else g
        if got == "auto" and checkpoint_auto:
            diffs.append(LayerDifference(index=m.index, planned=m.planned, emitted="auto (checkpoint KV algo)",
                                         reason="KvCacheConfig.dtype cannot force 16-bit over the checkpoint"))
        elif got != m.value:
            diffs.append(LayerDifference(index=m.index, planned=m.planned, emitted=got,
                                         reason="released TensorRT-LLM has one KvCacheConfig.dtype for all layers"))
        elif not m.exact:
            diffs.append(LayerDifference(index=m.index, planned=m.planned, emitted=got, reason=m.note))
    return diffs


def _carry_flags(plan: Plan, cfg: dict[str, Any], kv_cfg: dict[str, Any]) -> list[str]:
    """The serving flags TensorRT-LLM shares: added to the YAML config (in place); their trtllm-serve flags."""
    argv: list[str] = []
    if "tensor_parallel_size" in plan.flags:
        argv += ["--tp_size", str(plan.flags["tensor_parallel_size"])]
        cfg["tensor_parallel_size"] = plan.flags["tensor_parallel_size"]
    if "max_model_len" in plan.flags:
        argv += ["--max_seq_len", str(plan.flags["max_model_len"])]
        cfg["max_seq_len"] = plan.flags["max_model_len"]
    if "dtype" in plan.flags:
        cfg["dtype"] = plan.flags["dtype"]
    if "block_size" in plan.flags:
        kv_cfg["tokens_per_block"] = plan.flags["block_size"]
    return argv
