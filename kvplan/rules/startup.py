"""vLLM startup log lines about the KV cache that no other rule reports (reference §8 coverage).

These are WARNING lines vLLM prints while building the engine: the TurboQuant FlashAttention
override of `create_engine_config` and the q/prob scale warnings of `BaseKVCacheMethod`. kvplan
says them before launch, with what they mean for the plan. docs/rules.md maps every §8 line to its
rule (the dtype INFO banner of `CacheConfig._validate_cache_dtype` is covered by KV401 / KV405).
"""
from __future__ import annotations

from collections.abc import Iterator

from kvplan.model.plan import LayerPlan
from kvplan.model.vocab import QuantMode
from kvplan.rules.base import Emit, declare
from kvplan.rules.context import RuleContext

KVM = "vllm/model_executor/layers/quantization/kv_cache.py::BaseKVCacheMethod.process_weights_after_loading"


@declare(code="KV113", name="turboquant-forces-fa2", severity="warning", family="startup",
         summary="TurboQuant/UltraQuant KV dtypes force FlashAttention version 2.",
         why="create_engine_config overrides attention_config.flash_attn_version to 2 when the KV dtype is "
             "turboquant_* or ultraquant_4bit and the version is unset or >= 3: the layers TurboQuant "
             "leaves in the model dtype (first and last two) run FA2, not FA3/FA4.",
         fix="Expect FA2 speed on the boundary layers, or use an fp8 KV dtype to keep FA3/FA4.",
         references=("vllm/engine/arg_utils.py::EngineArgs.create_engine_config",))
def turboquant_fa2(ctx: RuleContext) -> Iterator[Emit]:
    d = ctx.kv_cache_dtype
    if not (d.startswith("turboquant_") or d == "ultraquant_4bit"):
        return
    v = ctx.flags.attention_config.get("flash_attn_version")
    if v is None or int(v) >= 3:
        yield Emit(f"--kv-cache-dtype {d}: vLLM logs 'TurboQuant is not yet compatible with FlashAttention "
                   ">= 3. Overriding flash_attn_version to 2' and runs the boundary layers on FA2.")


def _scale_kinds(ctx: RuleContext) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for s in ctx.quant.scales:
        out.setdefault(s.layer, set()).add(s.kind)
    return out


def _base_method_layers(ctx: RuleContext) -> list[LayerPlan]:
    """Per-tensor FP8 layers finalised by BaseKVCacheMethod (a checkpoint KV method that is not
    compressed-tensors', which has its own), when the safetensors headers were read."""
    q = ctx.quant
    if q.ct_kv_cache_scheme is not None or not q.safetensors_files or not q.weight_quant_supplies_kv_method:
        return []
    return [lp for lp in ctx.layers if lp.quant_mode is QuantMode.fp8_per_tensor
            and (lp.kind != "mla" or q.modelopt_mla_kv_method)]


@declare(code="KV406", name="q-scale-from-k-scale", severity="warning", family="scales",
         summary="A checkpoint KV method without q_scale: vLLM reuses k_scale as the query scale.",
         why="BaseKVCacheMethod sets q_scale = k_scale when the checkpoint has none and warns once "
             "('Checkpoint does not provide a q scaling factor. Setting it to k_scale.'); backends that "
             "quantize the query to FP8 (FlashAttention FA3/FA4, FlashInfer on SM100, Triton on CUDA) then "
             "scale queries with the key's range.",
         fix="Export q_scale with the checkpoint (ModelOpt / llm-compressor calibrate it), or accept k_scale.",
         references=(KVM,))
def q_scale_from_k(ctx: RuleContext) -> Iterator[Emit]:
    kinds = _scale_kinds(ctx)
    layers = tuple(lp.index for lp in _base_method_layers(ctx) if "q_scale" not in kinds.get(lp.index, set()))
    if layers:
        yield Emit(f"{len(layers)} FP8 layer(s) get no q_scale from the checkpoint; vLLM logs 'Checkpoint "
                   "does not provide a q scaling factor. Setting it to k_scale.'", layers)


@declare(code="KV407", name="uncalibrated-q-prob-scale", severity="warning", family="scales",
         summary="--kv-cache-dtype fp8 without a checkpoint prob_scale: vLLM warns about uncalibrated FP8 attention.",
         why="For the exact string 'fp8' BaseKVCacheMethod warns 'Using uncalibrated q_scale ... and/or "
             "prob_scale 1.0 with fp8 attention. This may cause accuracy issues.' when either scale is 1.0; "
             "a missing prob_scale is always 1.0. (fp8_e4m3 loads the same scales without the warning.)",
         fix="Export prob_scale (and q_scale) with the checkpoint, or ignore if your backend keeps "
             "attention probabilities in 16-bit.",
         references=(KVM,))
def uncalibrated_q_prob(ctx: RuleContext) -> Iterator[Emit]:
    kinds = _scale_kinds(ctx)
    layers = tuple(lp.index for lp in _base_method_layers(ctx)
                   if lp.kv_cache_dtype == "fp8" and "prob_scale" not in kinds.get(lp.index, set()))
    if layers:
        yield Emit(f"{len(layers)} fp8 layer(s) have no checkpoint prob_scale; vLLM logs 'Using uncalibrated "
                   "q_scale and/or prob_scale 1.0 with fp8 attention. This may cause accuracy issues.'", layers)
