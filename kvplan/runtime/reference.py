"""Plain torch reference implementations of the runtime kernels (the ground truth in tests).

Written for clarity, not speed: quantization follows the kernels' arithmetic operation by
operation in fp32 (scale by IEEE division, then ``x * (1/scale)``, round half away from zero
for INT8/INT4, round to nearest even for FP8) so written bytes must match *exactly*; attention
dequantizes the cache to fp32 and runs a per-sequence masked softmax.
"""
from __future__ import annotations

import math

import torch

from kvplan.runtime._common import FP8_MAX
from kvplan.runtime.cache import PagedKVCache, hadamard, hadamard_rotate
from kvplan.runtime.layout import LayerLayout

_FP8_TORCH = {"e4m3fn": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
_SCALE_FLOOR = 1e-6


def _div(a: torch.Tensor, b: torch.Tensor | float) -> torch.Tensor:
    """IEEE a / b on every device: torch's CUDA kernel turns a Python-scalar divisor into a
    multiply by its reciprocal (1 ulp off now and then), so divisors are always tensors."""
    if not isinstance(b, torch.Tensor):
        b = torch.tensor(b, dtype=a.dtype, device=a.device)
    return torch.div(a, b.expand_as(a).contiguous())


def _inv(scale: torch.Tensor) -> torch.Tensor:
    """1 / scale in IEEE fp32 (the kernels multiply by this reciprocal, like vLLM)."""
    return _div(torch.ones_like(scale, dtype=torch.float32), scale.float())


def _round_half_away(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x >= 0, torch.floor(x + 0.5), torch.ceil(x - 0.5))


def quantize_int8_per_token_head(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (int8 codes, fp32 scale [...]); scale = max(amax/127, 1e-6)."""
    x = x.float()
    scale = torch.clamp_min(_div(x.abs().amax(-1), 127.0), _SCALE_FLOOR)
    q = torch.clamp(_round_half_away(x * _inv(scale)[..., None]), -128.0, 127.0)
    return q.to(torch.int8), scale


def quantize_fp8(x: torch.Tensor, scale: torch.Tensor | float, fp8_format: str) -> torch.Tensor:
    """x / scale, clamped to the fp8 range, as fp8 bits (uint8)."""
    fmax = FP8_MAX[fp8_format]
    x = x.float()
    if isinstance(scale, torch.Tensor):
        inv = _inv(scale)[..., None]
    else:
        inv = _inv(torch.tensor(scale, dtype=torch.float32, device=x.device))
    y = torch.clamp(x * inv, -fmax, fmax)
    return y.to(_FP8_TORCH[fp8_format]).view(torch.uint8)


def quantize_fp8_per_token_head(x: torch.Tensor, fp8_format: str
                                ) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.float()
    scale = torch.clamp_min(_div(x.abs().amax(-1), FP8_MAX[fp8_format]), _SCALE_FLOOR)
    return quantize_fp8(x, scale, fp8_format), scale


def quantize_int4_per_token_head(x_rot: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Asymmetric 4-bit of already-rotated rows: (packed uint8 [..., D/2], fp32 scale with zp bits).

    scale = max((max-min)/15, 1e-6); zp = clamp(round(-min/scale), 0, 15);
    q = clamp(round(x/scale + zp), 0, 15); even element in the low nibble; the zero point is kept
    in the low 4 mantissa bits of the fp32 scale (vLLM 0.33's INT4 convention).
    """
    x = x_rot.float()
    mn, mx = x.amin(-1), x.amax(-1)
    scale = torch.clamp_min(_div(mx - mn, 15.0), _SCALE_FLOOR)
    inv = _inv(scale)
    zp = torch.clamp(_round_half_away(-mn * inv), 0.0, 15.0)
    q = torch.clamp(_round_half_away(x * inv[..., None] + zp[..., None]), 0.0, 15.0)
    q = q.to(torch.int32)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).to(torch.uint8)
    bits = (scale.view(torch.int32) & ~0xF) | zp.to(torch.int32)
    return packed, bits.view(torch.float32)


def split_int4_scale(scale_bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 scale with the zero point in its low mantissa nibble -> (clean scale, zp float)."""
    bits = scale_bits.contiguous().view(torch.int32)
    return (bits & ~0xF).view(torch.float32), (bits & 0xF).float()


def reference_write_kv_cache(cache: PagedKVCache, key: torch.Tensor, value: torch.Tensor,
                             slot_mapping: torch.Tensor) -> None:
    """Scatter key/value [num_tokens, H, D] into the cache at ``slot_mapping`` (negative = skip)."""
    lay = cache.layout
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    key, value = key[keep], value[keep]
    blk, off = slots // cache.block_size, slots % cache.block_size
    for side, x in ((0, key), (1, value)):
        data = cache.key_data() if side == 0 else cache.value_data()
        if lay.quant_mode == "none":
            data[blk, off] = x.to(data.dtype)
            continue
        if lay.quant_mode == "fp8_per_tensor":
            scale = cache.k_scale if side == 0 else cache.v_scale
            data[blk, off] = quantize_fp8(x, scale, _fp8_format(lay))
            continue
        scales = cache.key_scales() if side == 0 else cache.value_scales()
        if lay.quant_mode == "int8_per_token_head":
            q, s = quantize_int8_per_token_head(x)
        elif lay.quant_mode == "fp8_per_token_head":
            q, s = quantize_fp8_per_token_head(x, _fp8_format(lay))
        else:
            q, s = quantize_int4_per_token_head(hadamard_rotate(x))
        data[blk, off] = q.view(data.dtype)
        scales[blk, off] = s


def _fp8_format(lay: LayerLayout) -> str:
    """The FP8 format of an FP8 layout (a layout without one is a bug in the layout, not in the input)."""
    if lay.fp8_format is None:
        raise ValueError(f"{lay.quant_mode} layout without an fp8_format")
    return lay.fp8_format


def dequantize_kv_cache(cache: PagedKVCache) -> tuple[torch.Tensor, torch.Tensor]:
    """Whole cache as fp32 (k, v), each [num_blocks, block_size, H, D] (the naive path)."""
    lay = cache.layout
    out = []
    for side in (0, 1):
        data = cache.key_data() if side == 0 else cache.value_data()
        if lay.quant_mode == "none":
            out.append(data.float())
        elif lay.quant_mode == "fp8_per_tensor":
            scale = cache.k_scale if side == 0 else cache.v_scale
            out.append(data.view(_FP8_TORCH[_fp8_format(lay)]).float() * scale)
        else:
            scales = cache.key_scales() if side == 0 else cache.value_scales()
            if lay.quant_mode == "int8_per_token_head":
                out.append(data.view(torch.int8).float() * scales[..., None])
            elif lay.quant_mode == "fp8_per_token_head":
                out.append(data.view(_FP8_TORCH[_fp8_format(lay)]).float() * scales[..., None])
            else:
                s, zp = split_int4_scale(scales)
                b = data.view(torch.uint8).to(torch.int32)
                q = torch.stack([b & 0xF, b >> 4], dim=-1).flatten(-2).float()
                x_rot = (q - zp[..., None]) * s[..., None]
                out.append(x_rot @ hadamard(lay.head_size, x_rot.device))
    return out[0], out[1]


def reference_paged_attention(query: torch.Tensor, cache: PagedKVCache,
                              block_tables: torch.Tensor, seq_lens: torch.Tensor,
                              query_start_loc: torch.Tensor | None = None,
                              softmax_scale: float | None = None,
                              num_queries_per_kv: int | None = None) -> torch.Tensor:
    """Causal attention of packed queries over the paged cache, in fp32.

    ``query`` is [num_tokens, Hq, D]; sequence b owns query rows
    ``query_start_loc[b]:query_start_loc[b+1]`` (decode when None: one row each), which are the
    *last* tokens of its ``seq_lens[b]`` context. Key j is visible to the query at position i
    iff ``j <= i`` and, on sliding-window layers with window W, ``j > i - W``.
    """
    lay = cache.layout
    num_tokens, hq, d = query.shape
    hkv = lay.num_kv_heads
    group = num_queries_per_kv or hq // hkv
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    k_all, v_all = dequantize_kv_cache(cache)
    b = seq_lens.shape[0]
    if query_start_loc is None:
        query_start_loc = torch.arange(b + 1, device=query.device)
    qsl = query_start_loc.tolist()
    lens = seq_lens.tolist()
    out = torch.empty(num_tokens, hq, d, dtype=torch.float32, device=query.device)
    for s in range(b):
        q = query[qsl[s]:qsl[s + 1]].float()  # [L, Hq, D]
        n_q, ctx = q.shape[0], lens[s]
        if n_q == 0:
            continue
        pos = torch.arange(ctx - n_q, ctx, device=query.device)
        lo = 0  # only keys some query can see are gathered (windowed-out pages may be garbage)
        if lay.sliding_window is not None:
            lo = max(0, ctx - n_q - lay.sliding_window + 1)
        j = torch.arange(lo, ctx, device=query.device)
        blocks = block_tables[s, (j // cache.block_size)].long()
        k = k_all[blocks, j % cache.block_size]  # [ctx, Hkv, D]
        v = v_all[blocks, j % cache.block_size]
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * scale
        visible = j[None, :] <= pos[:, None]
        if lay.sliding_window is not None:
            visible &= j[None, :] > pos[:, None] - lay.sliding_window
        scores = scores.masked_fill(~visible[None], float("-inf"))
        p = torch.softmax(scores, dim=-1)
        out[qsl[s]:qsl[s + 1]] = torch.einsum("hqk,khd->qhd", p, v)
    return out
