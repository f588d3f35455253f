"""End to end on SmolLM2-135M-Instruct: the model run with a KV configuration applied inside every
attention layer, against the unquantized run.

K/V are quantized the way the cache stores them (post-RoPE, in the model's storage order) and the
attention reads the dequantized values back, which is what vLLM computes: prefill and decode both
attend over the cache. On CUDA the Triton kernels do it (write_kv_cache + paged prefill
attention); on the CPU the torch reference quantizers do (bit-identical writes, kvplan.runtime
.reference), because 30 layers x 10 configurations through the interpreter would take minutes.

Scores per configuration: mean/max KL(p_ref || p) of the next-token distribution, top-1
agreement with the unquantized run, and perplexity of the bundled eval text. Calibrated scales are
derived from the *calibration* text, never the eval text.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.runtime.layout import LayerLayout
from kvplan.runtime.validate_model import EvalRow, ModelEval

EVAL_TOKENS = 256


@dataclass(frozen=True)
class LayerKVMode:
    """How one layer's K/V are stored in a configuration."""

    quant_mode: str  # none | fp8_per_tensor | int8_per_token_head | fp8_per_token_head | int4_per_token_head
    k_scale: float = 1.0
    v_scale: float = 1.0

    @property
    def kv_cache_dtype(self) -> str:
        return {"none": "bfloat16", "fp8_per_tensor": "fp8"}.get(self.quant_mode, self.quant_mode)


@dataclass(frozen=True)
class KVConfig:
    name: str
    description: str
    layers: tuple[LayerKVMode, ...]

    def bytes_per_token(self, num_kv_heads: int, head_size: int) -> int:
        return sum(LayerLayout.simple(m.kv_cache_dtype, num_kv_heads, head_size).bytes_per_token
                   for m in self.layers)


def _uniform(name: str, description: str, mode: LayerKVMode, n: int, skip: tuple[int, ...] = ()) -> KVConfig:
    bf16 = LayerKVMode("none")
    return KVConfig(name, description, tuple(bf16 if i in skip else mode for i in range(n)))


def comparison_configs(num_layers: int, calibrated: dict[int, tuple[float, float]],
                       skip: tuple[int, ...]) -> list[KVConfig]:
    """bf16, FP8 per-tensor scale 1.0 / calibrated, INT8 and FP8 per-token-head, INT4, and the
    quantized ones again with ``skip`` layers kept in bf16."""
    n = num_layers
    skip_txt = ",".join(map(str, skip))
    out = [_uniform("bf16", "every layer bf16 (the control: rounding only)", LayerKVMode("none"), n)]
    quant: list[tuple[str, str, Callable[[int], LayerKVMode]]] = [
        ("fp8-scale-1.0", "FP8 e4m3 per-tensor, k_scale = v_scale = 1.0 (vLLM's uncalibrated default)",
         lambda i: LayerKVMode("fp8_per_tensor", 1.0, 1.0)),
        ("fp8-calibrated", "FP8 e4m3 per-tensor, scales = amax/448 from the calibration text",
         lambda i: LayerKVMode("fp8_per_tensor", *calibrated[i])),
        ("int8-pth", "INT8 per-token-head (dynamic scales stored inline)",
         lambda i: LayerKVMode("int8_per_token_head")),
        ("fp8-pth", "FP8 e4m3 per-token-head (dynamic scales stored inline)",
         lambda i: LayerKVMode("fp8_per_token_head")),
        ("int4-pth", "INT4 per-token-head, Hadamard-rotated",
         lambda i: LayerKVMode("int4_per_token_head")),
    ]
    for name, desc, make in quant:
        out.append(KVConfig(name, desc, tuple(make(i) for i in range(n))))
    for name, desc, make in quant[:4]:
        out.append(KVConfig(f"{name}+skip", f"{desc}; layers {skip_txt} kept in bf16",
                            tuple(LayerKVMode("none") if i in skip else make(i) for i in range(n))))
    return out


def plan_config(plan: Any, kv_scales: Any, calibrated: dict[int, tuple[float, float]]) -> KVConfig:
    """The plan's own per-layer storage; FP8 per-tensor layers use the --kv-scales file's scales
    (scale_source calibrated), the calibration text's scales for checkpoint scales (not readable
    here), else 1.0 (default_1.0)."""
    given = {ls.index: (ls.k_scale, ls.v_scale) for ls in (kv_scales.layers if kv_scales else [])}
    modes = []
    for lp in plan.layers:
        mode = lp.quant_mode.value
        if mode == "fp8_per_tensor":
            src = lp.scale_source.value
            if lp.index in given:
                ks, vs = given[lp.index]
            elif src.startswith("checkpoint"):
                ks, vs = calibrated[lp.index]
            else:
                ks, vs = 1.0, 1.0
            modes.append(LayerKVMode(mode, ks, vs))
        elif mode in ("none", "int8_per_token_head", "fp8_per_token_head", "int4_per_token_head"):
            modes.append(LayerKVMode(mode))
        else:
            from kvplan.errors import KvplanInputError
            raise KvplanInputError(f"layer {lp.index}: quant_mode {mode} is not executed by the kvplan runtime, "
                                   "so the end-to-end run cannot apply the plan.", "Validate without --e2e.")
    return KVConfig("plan", f"the plan given ({plan.kv_cache_dtype})", tuple(modes))


# ----------------------------------------------------------------------------------- quantizers
def fake_quant(x, mode: LayerKVMode, side: str):
    """x [T, H, D] fp32 -> the values the cache returns after storing x (torch reference, bit-exact
    to the write kernel). K/V enter in bf16 (the engine's model dtype)."""
    import torch

    from kvplan.runtime import reference as R
    from kvplan.runtime.cache import hadamard
    xb = x.to(torch.bfloat16)
    if mode.quant_mode == "none":
        return xb.float()
    if mode.quant_mode == "fp8_per_tensor":
        scale = mode.k_scale if side == "k" else mode.v_scale
        return R.quantize_fp8(xb, scale, "e4m3fn").view(torch.float8_e4m3fn).float() * scale
    if mode.quant_mode == "int8_per_token_head":
        q, s = R.quantize_int8_per_token_head(xb)
        return q.float() * s[..., None]
    if mode.quant_mode == "fp8_per_token_head":
        q, s = R.quantize_fp8_per_token_head(xb, "e4m3fn")
        return q.view(torch.float8_e4m3fn).float() * s[..., None]
    if mode.quant_mode == "int4_per_token_head":
        h = hadamard(x.shape[-1], x.device)
        packed, bits = R.quantize_int4_per_token_head(xb.float() @ h)
        s, zp = R.split_int4_scale(bits)
        b = packed.to(torch.int32)
        q = torch.stack([b & 0xF, b >> 4], dim=-1).flatten(-2).float()
        return ((q - zp[..., None]) * s[..., None]) @ h
    raise ValueError(mode.quant_mode)


def _reference_hook(cfg: KVConfig):
    def hook(layer: int, q, k, v):
        mode = cfg.layers[layer]
        kk = fake_quant(k[0].transpose(0, 1).float(), mode, "k").transpose(0, 1)[None].to(k.dtype)
        vv = fake_quant(v[0].transpose(0, 1).float(), mode, "v").transpose(0, 1)[None].to(v.dtype)
        return kk, vv
    return hook


def _kernel_attention(cfg: KVConfig, block_size: int = 16):
    """CUDA: write K/V through the Triton write kernel, attend with the paged prefill kernel."""
    import math

    import torch

    from kvplan.runtime.attention import paged_attention
    from kvplan.runtime.cache import allocate_kv_cache
    from kvplan.runtime.write import write_kv_cache

    def attend(layer: int, module, q, k, v, scaling):
        mode = cfg.layers[layer]
        _, hkv, t, d = k.shape
        lay = LayerLayout.simple(mode.kv_cache_dtype, hkv, d)
        nb = math.ceil(t / block_size)
        cache = allocate_kv_cache(lay, nb, block_size, q.device, k_scale=mode.k_scale, v_scale=mode.v_scale)
        slots = torch.arange(t, device=q.device)
        write_kv_cache(cache, k[0].transpose(0, 1).to(torch.bfloat16), v[0].transpose(0, 1).to(torch.bfloat16), slots)
        bt = torch.arange(nb, device=q.device, dtype=torch.int32)[None]
        seq = torch.tensor([t], device=q.device, dtype=torch.int32)
        qsl = torch.tensor([0, t], device=q.device, dtype=torch.int32)
        out = paged_attention(q[0].transpose(0, 1).contiguous(), cache, bt, seq, qsl, softmax_scale=scaling)
        return out[None]  # [1, T, Hq, D]
    return attend


def _scores(ref_logits, logits, ids) -> tuple[float, float, float, float]:
    import torch
    lp_ref = torch.log_softmax(ref_logits.double(), -1)
    lp = torch.log_softmax(logits.double(), -1)
    kl = (lp_ref.exp() * (lp_ref - lp)).sum(-1)
    top1 = (ref_logits.argmax(-1) == logits.argmax(-1)).double().mean()
    nll = -lp[:-1].gather(-1, ids[0, 1:, None].to(lp.device)).mean()
    return float(kl.mean()), float(kl.max()), float(top1), float(torch.exp(nll))


def evaluate_plan(plan: Any, *, device: str = "cpu", kv_scales: Any = None, cache_dir: str | Path | None = None,
                  skip_layers: list[int] | None = None, tokens: int = EVAL_TOKENS,
                  progress: Callable[[str, int, int], None] = lambda *a: None,
                  log: Callable[[str], None] = lambda s: None) -> ModelEval:
    """Run SmolLM2 with the plan's KV storage and the comparison configurations."""
    from kvplan.errors import KvplanInputError
    from kvplan.runtime.calibrate import compute_scales
    from kvplan.runtime.kvsource import EVAL_TEXT, load_smollm2, smollm2_source

    calib_src = smollm2_source(Path(cache_dir) if cache_dir else None, log=log)
    m = load_smollm2(device)
    if len(plan.layers) != m.num_layers or any(
            lp.quant_mode.value != "none" and (lp.num_kv_heads, lp.head_size) != (m.num_kv_heads, m.head_size)
            for lp in plan.layers):
        raise KvplanInputError(f"--e2e runs SmolLM2-135M-Instruct ({m.num_layers} layers, {m.num_kv_heads} kv heads x "
                               f"{m.head_size}); the plan is for a different model ({plan.model.model_type}, "
                               f"{len(plan.layers)} layers).",
                               "Plan examples/SmolLM2-135M-Instruct/config.json, or drop --e2e.")
    cal = compute_scales(calib_src, m.num_layers, m.num_kv_heads, m.head_size, model="SmolLM2-135M-Instruct")
    calibrated = {ls.index: (ls.k_scale, ls.v_scale) for ls in cal.layers}
    skip = tuple(sorted(set(skip_layers))) if skip_layers else (0, m.num_layers - 1)
    configs = [plan_config(plan, kv_scales, calibrated), *comparison_configs(m.num_layers, calibrated, skip)]
    ids = m.encode(EVAL_TEXT.read_text(encoding="utf-8"), tokens)
    use_kernels = device.startswith("cuda")
    ref = m.logits(ids)
    rows = []
    for n, cfg in enumerate(configs):
        progress(f"e2e {cfg.name}", n, len(configs))
        logits = m.logits(ids, override=_kernel_attention(cfg)) if use_kernels else m.logits(ids, _reference_hook(cfg))
        kl, kl_max, top1, ppl = _scores(ref, logits, ids)
        rows.append(EvalRow(name=cfg.name, description=cfg.description,
                            quantized_layers=sum(x.quant_mode != "none" for x in cfg.layers),
                            kl_mean=kl, kl_max=kl_max, top1_agreement=top1, perplexity=ppl,
                            bytes_per_token=cfg.bytes_per_token(m.num_kv_heads, m.head_size)))
    progress("e2e", len(configs), len(configs))
    _, _, _, ref_ppl = _scores(ref, ref, ids)
    return ModelEval(model=f"SmolLM2-135M-Instruct ({m.gguf.name})", text=EVAL_TEXT.name, tokens=int(ids.shape[1]),
                     quantizer="triton kernels (write_kv_cache + paged prefill attention)" if use_kernels
                     else "torch reference quantizers (bit-exact to the write kernel), sdpa attention",
                     reference_perplexity=ref_ppl, skipped_layers=list(skip), rows=rows)
