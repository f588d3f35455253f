"""Quantize-on-write for the INT8/FP8 per-token-head layouts as a Gluon kernel (GPU only).

The Triton kernel (`kvplan.runtime.write`) lets the compiler lay rows over the lanes: 16 lanes
of 8 elements per 128-element row, two rows per lane in a one-warp program of 4 rows. Every
lane then runs two max-reductions of 4 shuffle rounds and eight IEEE divisions per program, and
Nsight Compute counted 12.5 M warp instructions for an 8K-token chunk (FP8 per-tensor, no
reduction: 4.4 M) with the issue slots 72% busy (bench/NOTES-runtime.md, round 12). Here the
layout is explicit: 8 lanes of ``head / 8`` contiguous elements per row (two 16-byte loads per
lane at head 128), 4 rows per warp, so a row's max takes 3 shuffle rounds, each lane computes one
row's two scales, and a 4-warp program holds 16 rows (a quarter of the programs, full
occupancy). That alone sped FP8 up but not INT8: the bound was INT8's float->int convert, a
quarter-rate instruction on Hopper, which `_I8_ROUND_HALF_AWAY_X4` replaces.

Arithmetic is the Triton kernel's, bit for bit (the tests compare both with the torch
reference): ``scale = max(amax / qmax, 1e-6)``, ``q = x * (1 / scale)`` with IEEE division and no
FMA contraction, INT8 rounding half away from zero by adding copysign(0.5, q) and truncating
(here with directed-rounding adds instead of the float->int convert; no clamp is needed:
|q| <= 127 (1 + 2^-22) for finite rows), FP8 by the hardware's saturating round-to-nearest-even
convert.
"""
from __future__ import annotations

import functools

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from kvplan.runtime._common import FP8_MAX, KV_MODE_FP8_PTH, KV_MODE_INT8_PTH, key_id, row_writer


# 4 fp32 values q -> 4 INT8 codes trunc(q + copysign(0.5, q)) packed in one register, without
# the float->int convert (a quarter-rate instruction on Hopper): b = q + copysign(0.5, q) as in
# the reference, then b + 1.5 * 2^23 rounded toward -inf (b >= 0) or +inf (b < 0) holds
# 1.5 * 2^23 + trunc(b) exactly (the spacing there is 1), whose low byte is trunc(b) in two's
# complement for |b| < 128 (always: |q| <= 127 (1 + 2^-22)).
def _i8_round_half_away_x4() -> str:
    lanes = "\n".join(f"""    copysign.f32 h, ${i + 1}, 0f3F000000;
    add.rn.f32 b, ${i + 1}, h;
    setp.lt.f32 n, b, 0f00000000;
    add.rm.f32 lo, b, 0f4B400000;
    add.rp.f32 hi, b, 0f4B400000;
    selp.b32 c{i}, hi, lo, n;""" for i in range(4))
    return f"""{{
    .reg .f32 h, b, lo, hi;
    .reg .pred n;
    .reg .b32 c0, c1, c2, c3, p, q;
{lanes}
    prmt.b32 p, c0, c1, 0x0040;
    prmt.b32 q, c2, c3, 0x0040;
    prmt.b32 $0, p, q, 0x5410;
    }}"""


_I8_ROUND_HALF_AWAY_X4 = gl.constexpr(_i8_round_half_away_x4())


@gluon.jit
def _row_codes(x, KV_MODE: gl.constexpr, E5M2: gl.constexpr, QMAX: gl.constexpr):
    """One [ROWS, HEAD] fp32 tile -> (8-bit codes, fp32 scale per row)."""
    amax = gl.max(gl.abs(x), axis=1)
    scale = gl.maximum(gl.div_rn(amax, gl.full_like(amax, QMAX)), 1e-6)
    y = x * gl.div_rn(gl.full_like(scale, 1.0), scale)[:, None]
    if KV_MODE == 2:
        codes = gl.inline_asm_elementwise(_I8_ROUND_HALF_AWAY_X4, "=r,r,r,r,r", [y],
                                          dtype=gl.int8, is_pure=True, pack=4)
    elif E5M2:
        codes = y.to(gl.float8e5).to(gl.uint8, bitcast=True)
    else:
        codes = y.to(gl.float8e4nv).to(gl.uint8, bitcast=True)
    return codes, scale


@gluon.jit
def _gluon_write_pth_kernel(
    key_ptr, value_ptr, stride_kt, stride_kh, stride_vt, stride_vh, slot_ptr, num_rows,
    c_ptr, s_ptr, stride_cb, stride_ch, stride_sb, stride_sh,
    NUM_KV_HEADS: gl.constexpr, HEAD: gl.constexpr, BLOCK_SIZE: gl.constexpr,
    ROWS: gl.constexpr, STRIDE_S: gl.constexpr, SCALE_STRIDE_S: gl.constexpr,
    V_OFF: gl.constexpr, KS_OFF: gl.constexpr, VS_OFF: gl.constexpr, KV_MODE: gl.constexpr,
    E5M2: gl.constexpr, QMAX: gl.constexpr, L: gl.constexpr,
):
    rows = gl.program_id(0) * ROWS + gl.arange(0, ROWS, layout=gl.SliceLayout(1, L))
    in_range = rows < num_rows
    tok = (rows // NUM_KV_HEADS).to(gl.int64)
    head = rows % NUM_KV_HEADS
    slot = gl.load(slot_ptr + tok, mask=in_range, other=-1).to(gl.int64)
    valid = in_range & (slot >= 0)
    blk = slot // BLOCK_SIZE
    off = slot % BLOCK_SIZE
    dst = blk * stride_cb + head * stride_ch + off * STRIDE_S
    sdst = blk * stride_sb + head * stride_sh + off * SCALE_STRIDE_S
    d = gl.arange(0, HEAD, layout=gl.SliceLayout(0, L))
    mask2 = valid[:, None] & (d < HEAD)[None, :]
    k = gl.load(key_ptr + (tok * stride_kt + head * stride_kh)[:, None] + d[None, :], mask=mask2,
                other=0.0).to(gl.float32)
    v = gl.load(value_ptr + (tok * stride_vt + head * stride_vh)[:, None] + d[None, :],
                mask=mask2, other=0.0).to(gl.float32)
    k_codes, k_scale = _row_codes(k, KV_MODE, E5M2, QMAX)
    v_codes, v_scale = _row_codes(v, KV_MODE, E5M2, QMAX)
    gl.store(c_ptr + dst[:, None] + d[None, :], k_codes, mask=mask2)
    gl.store(c_ptr + V_OFF + dst[:, None] + d[None, :], v_codes, mask=mask2)
    gl.store(s_ptr + KS_OFF + sdst, k_scale, mask=valid)
    gl.store(s_ptr + VS_OFF + sdst, v_scale, mask=valid)


@functools.cache
def _layout(head: int, num_warps: int) -> gl.BlockedLayout:
    """8 lanes per row, ``head / 8`` contiguous elements per lane, 4 rows per warp."""
    return gl.BlockedLayout([1, head // 8], [4, 8], [num_warps, 1], [1, 0])


def supported(kv_mode: int, head: int) -> bool:
    """INT8/FP8 per-token-head caches with heads of 64-256 (8 lanes x 8-32 elements)."""
    return kv_mode in (KV_MODE_INT8_PTH, KV_MODE_FP8_PTH) and head in (64, 128, 256)


def plan(args, num_kv_heads: int, head: int, block_size: int, fp8_format: str | None, *,
         rows_per_program: int = 16, num_warps: int = 4):
    """A launch of the Gluon write kernel for the cache addressed by ``args``
    (`_common.cache_args`): ``fire(key, value, slot_mapping)`` writes ``key``/``value`` [tokens,
    kv heads, head] through ``slot_mapping``. ``rows_per_program`` (a multiple of 4 x
    ``num_warps``) (token, kv head) rows per program."""
    if rows_per_program % (4 * num_warps):
        raise ValueError(f"rows_per_program must be a multiple of {4 * num_warps} "
                         f"({num_warps} warps of 4 rows), got {rows_per_program}")
    qmax = 127.0 if args.KV_MODE == KV_MODE_INT8_PTH else FP8_MAX[fp8_format or "e4m3fn"]
    kw = dict(NUM_KV_HEADS=num_kv_heads, HEAD=head, BLOCK_SIZE=block_size, ROWS=rows_per_program,
              STRIDE_S=args.STRIDE_S, SCALE_STRIDE_S=args.SCALE_STRIDE_S, V_OFF=args.V_OFF,
              KS_OFF=args.KS_OFF, VS_OFF=args.VS_OFF, KV_MODE=args.KV_MODE, E5M2=args.FP8_E5M2,
              QMAX=qmax, num_warps=num_warps, enable_fp_fusion=False)
    launch_key = key_id(("gluon-write", *kw.items()))  # the layout L follows from HEAD, warps
    kw["L"] = _layout(head, num_warps)
    fixed = (args.k, args.s, args.stride_cb, args.stride_ch, args.stride_sb, args.stride_sh)
    return row_writer(_gluon_write_pth_kernel, rows_per_program, num_kv_heads, fixed, kw,
                      launch_key)
