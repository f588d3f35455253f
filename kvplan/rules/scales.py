"""Where k/v scales come from, and the scale problems vLLM reports only at load time."""
from __future__ import annotations

import math
from collections.abc import Iterator

from kvplan.model.arch import LayerArch
from kvplan.model.quant import ScaleTensor, layer_kv_scales, loaded_kv_scale_values
from kvplan.model.vocab import QuantMode, ScaleSource
from kvplan.rules.base import Emit, declare
from kvplan.rules.context import RuleContext
from kvplan.rules.state import LayerState, Set, decides_layer

KVM = "vllm/model_executor/layers/quantization/kv_cache.py::BaseKVCacheMethod.process_weights_after_loading"


def _layer_scales(ctx: RuleContext, index: int) -> list[ScaleTensor]:
    return [s for s in ctx.quant.scales if s.layer == index]


def _inline_scales(la: LayerArch, st: LayerState, mode: QuantMode) -> Set | None:
    """The scale source of a KV format that carries its own scales (none to load or default)."""
    if mode.is_per_token_head:
        return Set("scale_source", ScaleSource.dynamic_per_token_head,
                   "per-token-head scales are computed at write time and stored inline (fp32)")
    if mode in (QuantMode.nvfp4, QuantMode.nvfp4_ds_mla):
        return Set("scale_source", ScaleSource.block_scales, "fp8 block scales per 16 values stored with the data")
    if mode is not QuantMode.fp8_per_tensor:
        return Set("scale_source", ScaleSource.block_scales, f"{mode.value} stores its own scales")
    if la.dsv4_compress_ratio is not None and st.kv_cache_dtype == "fp8_ds_mla":
        return Set("scale_source", ScaleSource.block_scales,
                   "DeepSeek-V4 fp8_ds_mla stores UE8M0 block scales with each state (8 B)")
    if st.kv_cache_dtype == "fp8_ds_mla":  # the sparse FlashMLA row (rule KV121): no k/v scale is read
        return Set("scale_source", ScaleSource.block_scales,
                   "fp8_ds_mla stores an fp32 scale per 128 NoPE values with each token (16 B), set at write time")
    return None


@declare(code="KV120", name="scale-source", kind="decision", scope="layer", family="scales",
         severity="info", summary="Each quantized layer's k/v scales come from the checkpoint, write time, or 1.0.",
         why="Per-token-head modes compute scales at write time and ignore checkpoint scales; "
             "per-tensor FP8 uses checkpoint k/v scales when present, else 1.0 (uncalibrated).",
         fix="Use a checkpoint with calibrated k/v scales, or `kvplan calibrate`.",
         references=(KVM,))
@decides_layer("scale_source")
def scale_source(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    mode = st.quant_mode
    if mode is None:
        return
    if mode is QuantMode.none:
        yield Set("scale_source", ScaleSource.none, "KV not quantized")
        return
    inline = _inline_scales(la, st, mode)
    if inline is not None:
        yield inline
        return
    q = ctx.quant
    found = [s for s in _layer_scales(ctx, la.index) if s.kind in ("k_scale", "v_scale", "kv_scale")]
    is_mla = la.kind == "mla"
    method_loads = q.weight_quant_supplies_kv_method and (not is_mla or q.modelopt_mla_kv_method)
    if found and method_loads:
        per_head = any(s.numel > 1 for s in found)
        src = ScaleSource.checkpoint_per_head if per_head else ScaleSource.checkpoint_per_tensor
        names = ", ".join(sorted({s.kind for s in found}))
        yield Set("scale_source", src, f"{names} tensor(s) for layer {la.index} in {found[0].file}")
        return
    # A calibration file wins over 1.0, never over checkpoint scales vLLM actually loads.
    if la.index in q.calibrated_layers:
        yield Set("scale_source", ScaleSource.calibrated,
                  f"--kv-scales {q.kv_scales_file} holds calibrated k/v scales for layer {la.index} "
                  "(deploy them with the checkpoint: `kvplan calibrate` writes the tensors and the kv_cache_scheme)")
        return
    if found and not method_loads:
        yield Set("scale_source", ScaleSource.default_1_0,
                  f"scale tensors exist for layer {la.index} but {q.quant_method or 'no quant config'} "
                  "attaches no KV method here, so vLLM does not load them")
        return
    ckpt_declares = (q.ct_kv_cache_scheme is not None and not is_mla) or (
        (q.quant_method or "").startswith("modelopt") and bool(q.modelopt_kv_value)
        and (not is_mla or q.modelopt_mla_kv_method))
    if ckpt_declares and not q.safetensors_files:
        strat = (q.ct_kv_cache_scheme or {}).get("strategy")
        src = ScaleSource.checkpoint_per_head if strat == "attn_head" else ScaleSource.checkpoint_per_tensor
        yield Set("scale_source", src, f"{q.source} declares calibrated KV scales "
                                       "(safetensors not inspected: pass the checkpoint folder to verify)")
        return
    yield Set("scale_source", ScaleSource.default_1_0, "no k/v scales in the checkpoint: vLLM uses 1.0")


@declare(code="KV401", name="uncalibrated-fp8-scales", severity="warning", family="scales",
         summary="Per-tensor FP8 KV with no calibrated scales: k_scale = v_scale = 1.0.",
         why="Without checkpoint scales vLLM divides by 1.0, so values beyond +/-448 saturate and small "
             "values lose precision; users see unexplained accuracy drops (vLLM only logs "
             "'Using KV cache scaling factor 1.0').",
         fix="Use a checkpoint with k/v scales (ModelOpt / llm-compressor), run `kvplan calibrate`, or "
             "use --kv-cache-dtype int8_per_token_head / fp8_per_token_head (dynamic scales).",
         references=(KVM, "https://github.com/vllm-project/vllm/issues/17014"))
def uncalibrated(ctx: RuleContext) -> Iterator[Emit]:
    layers = tuple(lp.index for lp in ctx.layers if lp.scale_source is ScaleSource.default_1_0)
    if layers:
        yield Emit(f"{len(layers)} layer(s) store per-tensor FP8 KV with the default scale 1.0 (no calibrated "
                   "k/v scales).", layers)


@declare(code="KV402", name="deprecated-kv-scale", severity="warning", family="scales",
         summary="The checkpoint uses the deprecated single kv_scale tensor.",
         why="vLLM remaps .kv_scale to k_scale and copies it to v_scale with a DEPRECATED warning; "
             "K and V share one scale.",
         fix="Re-export the checkpoint with separate k_scale and v_scale.",
         references=("vllm/model_executor/model_loader/weight_utils.py::maybe_remap_kv_scale_name",))
def deprecated_kv_scale(ctx: RuleContext) -> Iterator[Emit]:
    layers = tuple(sorted({s.layer for s in ctx.quant.scales if s.kind == "kv_scale"}))
    if layers:
        yield Emit(f"{len(layers)} layer(s) carry a deprecated kv_scale tensor (remapped to k_scale = v_scale).",
                   layers)


@declare(code="KV403", name="v-scale-without-k-scale", severity="error", family="scales",
         summary="A layer has v_scale but no k_scale: vLLM 0.33 fails at load (assert k_scale > 0).",
         why="With one of the two scales missing vLLM 0.33 asserts the k scale is positive before "
             "duplicating it; a v-only checkpoint crashes the engine after minutes of loading.",
         fix="Add k_scale tensors to the checkpoint, or use an unquantized / per-token-head KV cache.",
         references=(KVM,))
def v_only(ctx: RuleContext) -> Iterator[Emit]:
    quantized = {lp.index for lp in ctx.layers if lp.quant_mode is QuantMode.fp8_per_tensor}
    by_layer: dict[int, set[str]] = {}
    for s in ctx.quant.scales:
        by_layer.setdefault(s.layer, set()).add(s.kind)
    bad = tuple(i for i, kinds in sorted(by_layer.items())
                if i in quantized and "v_scale" in kinds and not kinds & {"k_scale", "kv_scale"})
    if bad:
        yield Emit(f"{len(bad)} layer(s) have v_scale but no k_scale; vLLM 0.33 raises AssertionError at load.", bad)


@declare(code="KV404", name="scale-tensor-shape", severity="error", family="scales",
         summary="Per-head k/v scales on a checkpoint format that supports only per-tensor scales.",
         why="Outside compressed-tensors' attn_head strategy vLLM requires scalar k/v scales and raises "
             "'Only support per-tensor scaling factor for fp8 KV cache'.",
         fix="Reduce the scales to one per tensor (max over heads) or export with compressed-tensors attn_head.",
         references=(KVM,))
def per_head_shape(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.quant.ct_kv_cache_scheme is not None:
        return
    quantized = {lp.index for lp in ctx.layers if lp.quant_mode is QuantMode.fp8_per_tensor}
    bad = tuple(sorted({s.layer for s in ctx.quant.scales
                        if s.kind in ("k_scale", "v_scale") and s.numel > 1 and s.layer in quantized}))
    if bad:
        yield Emit(f"{len(bad)} layer(s) have non-scalar k/v scales; vLLM 0.33 accepts only per-tensor scales "
                   "here.", bad)


@declare(code="KV405", name="checkpoint-scales-unused", severity="info", family="scales",
         summary="Checkpoint k/v scales exist but the layer's mode does not use them.",
         why="Per-token-head modes recompute scales at write time and delete the checkpoint scale "
             "parameters; unquantized layers ignore them.",
         fix="Nothing to do, unless you meant to use the checkpoint's per-tensor FP8 scheme (use auto).",
         references=(KVM,))
def scales_unused(ctx: RuleContext) -> Iterator[Emit]:
    have = {s.layer for s in ctx.quant.scales if s.kind in ("k_scale", "v_scale", "kv_scale")}
    unused = tuple(lp.index for lp in ctx.layers if lp.index in have and (
        lp.quant_mode.is_per_token_head or lp.quant_mode is QuantMode.none))
    if unused:
        yield Emit(f"{len(unused)} layer(s) have checkpoint k/v scales that their KV mode does not use.", unused)


def _loaded_kv_scales(ctx: RuleContext) -> dict[int, dict[str, ScaleTensor]]:
    """{layer: {role: ScaleTensor}} of the k/v scales vLLM loads, for per-tensor FP8 layers whose
    scale source is the checkpoint and whose scale values were read."""
    out: dict[int, dict[str, ScaleTensor]] = {}
    for lp in ctx.layers:
        if lp.quant_mode is QuantMode.fp8_per_tensor and lp.scale_source in (
                ScaleSource.checkpoint_per_tensor, ScaleSource.checkpoint_per_head):
            found = layer_kv_scales(ctx.quant, lp.index)
            if found and all(s.values_read for s in found.values()):
                out[lp.index] = found
    return out


def _bad_value(s: ScaleTensor) -> str | None:
    """Why a scale tensor's values cannot be used as they are (zero, negative, NaN, inf), or None."""
    lo, hi = s.vmin, s.vmax
    if lo is None or hi is None:
        return None  # values not read: nothing to judge
    if math.isnan(lo) or math.isnan(hi):
        return f"{s.name} is NaN"
    if math.isinf(lo) or math.isinf(hi):
        return f"{s.name} is infinite"
    if lo <= 0:
        return f"{s.name} has a value <= 0 ({lo:g})"
    return None


@declare(code="KV408", name="invalid-scale-values", severity="error", family="scales",
         summary="A checkpoint k/v scale that vLLM loads is zero, negative, NaN or infinite.",
         why="Writes divide by the scale and attention multiplies by it. In BaseKVCacheMethod (fp8, "
             "ModelOpt) a k scale that is not > 0 while the scales are not both absent (< 0) fails "
             "'assert k_scale > 0' after the weights load; compressed-tensors uses the values as they "
             "are, so a zero or NaN scale turns the layer's KV into inf/NaN with no error.",
         fix="Re-export or re-calibrate the checkpoint's k/v scales (`kvplan calibrate` writes valid "
             "ones), or serve with --kv-cache-dtype fp8_per_token_head / int8_per_token_head, which "
             "ignore checkpoint scales.",
         references=(KVM, "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py"
                          "::CompressedTensorsKVCacheMethod"))
def invalid_scale_values(ctx: RuleContext) -> Iterator[Emit]:
    ct = ctx.quant.ct_kv_cache_scheme is not None
    bad: dict[int, str] = {}
    for layer, found in sorted(_loaded_kv_scales(ctx).items()):
        whys = [w for w in map(_bad_value, found.values()) if w]
        if ct:  # compressed-tensors uses the values as they are
            why = whys[0] if whys else None
        else:  # BaseKVCacheMethod: non-finite values, or a combination its assert rejects
            why = next((w for w in whys if "NaN" in w or "infinite" in w), None)
            k = found.get("k_scale")
            if why is None and k is not None and loaded_kv_scale_values(ctx.quant, layer) is None:
                why = f"{k.name} is {k.vmin:g}: vLLM 0.33 raises AssertionError (assert k_scale > 0)"
        if why:  # (k absent with v present is KV403)
            bad[layer] = why
    if bad:
        first = next(iter(bad.values()))
        yield Emit(f"{len(bad)} layer(s) have invalid checkpoint k/v scale values (e.g. {first}).",
                   tuple(bad))


@declare(code="KV409", name="placeholder-scales", severity="warning", family="scales",
         summary="The checkpoint's k/v scales are all 1.0 or all negative: FP8 KV runs uncalibrated.",
         why="Exporters write 1.0 (or the -1 'absent' sentinel) when no calibration ran. vLLM then "
             "stores K/V divided by 1.0, exactly as with no scales at all, and logs only 'Using KV cache "
             "scaling factor 1.0 for fp8_e4m3'; the plan's scale source says checkpoint, but nothing "
             "was calibrated.",
         fix="Calibrate the scales (ModelOpt / llm-compressor, or `kvplan calibrate` + --kv-scales), or "
             "use --kv-cache-dtype fp8_per_token_head / int8_per_token_head.",
         references=(KVM,))
def placeholder_scales(ctx: RuleContext) -> Iterator[Emit]:
    ct = ctx.quant.ct_kv_cache_scheme is not None
    layers = []
    for layer, found in sorted(_loaded_kv_scales(ctx).items()):
        vals = [(s.vmin, s.vmax) for s in found.values()]
        if all(lo == 1.0 and hi == 1.0 for lo, hi in vals) or (
                not ct and len(found) == 2 and all(hi is not None and hi < 0 for _, hi in vals)):
            layers.append(layer)
    if layers:
        yield Emit(f"{len(layers)} layer(s) load checkpoint k/v scales that are placeholders (1.0, or the "
                   "-1 'absent' sentinel): FP8 KV on these layers is uncalibrated.", tuple(layers))
