"""Quantize-on-write for the INT8/FP8 per-token-head layouts as a Gluon kernel (GPU only), and
for INT4 per-token-head (`_gluon_write_int4_kernel`, below: a row over 2-8 lanes).

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

from kvplan.runtime._common import (
    FP8_MAX,
    KV_MODE_FP8_PTH,
    KV_MODE_INT4_PTH,
    KV_MODE_INT8_PTH,
    key_id,
    row_writer,
)


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
def _program_rows(slot_ptr, num_rows, stride_cb, stride_ch, stride_sb, stride_sh,
                  NUM_KV_HEADS: gl.constexpr, BLOCK_SIZE: gl.constexpr, ROWS: gl.constexpr,
                  STRIDE_S: gl.constexpr, SCALE_STRIDE_S: gl.constexpr, R: gl.constexpr):
    """This program's ``ROWS`` (token, kv head) rows in layout ``R``: (token, kv head, whether
    the row is written (in range, slot >= 0), its data offset and its scale offset)."""
    rows = gl.program_id(0) * ROWS + gl.arange(0, ROWS, layout=R)
    in_range = rows < num_rows
    tok = (rows // NUM_KV_HEADS).to(gl.int64)
    head = rows % NUM_KV_HEADS
    slot = gl.load(slot_ptr + tok, mask=in_range, other=-1).to(gl.int64)
    valid = in_range & (slot >= 0)
    blk = slot // BLOCK_SIZE
    off = slot % BLOCK_SIZE
    return (tok, head, valid, blk * stride_cb + head * stride_ch + off * STRIDE_S,
            blk * stride_sb + head * stride_sh + off * SCALE_STRIDE_S)


@gluon.jit
def _gluon_write_pth_kernel(
    key_ptr, value_ptr, stride_kt, stride_kh, stride_vt, stride_vh, slot_ptr, num_rows,
    c_ptr, s_ptr, stride_cb, stride_ch, stride_sb, stride_sh,
    NUM_KV_HEADS: gl.constexpr, HEAD: gl.constexpr, BLOCK_SIZE: gl.constexpr,
    ROWS: gl.constexpr, STRIDE_S: gl.constexpr, SCALE_STRIDE_S: gl.constexpr,
    V_OFF: gl.constexpr, KS_OFF: gl.constexpr, VS_OFF: gl.constexpr, KV_MODE: gl.constexpr,
    E5M2: gl.constexpr, QMAX: gl.constexpr, L: gl.constexpr,
):
    tok, head, valid, dst, sdst = _program_rows(
        slot_ptr, num_rows, stride_cb, stride_ch, stride_sb, stride_sh, NUM_KV_HEADS, BLOCK_SIZE,
        ROWS, STRIDE_S, SCALE_STRIDE_S, gl.SliceLayout(1, L))
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


# fp32 y -> 1.5 * 2^23 + floor(y) for |y| < 2^22: one add rounded toward -inf where the spacing
# of floats is 1 (a full-rate FP32 add instead of the float->int convert, a quarter-rate
# instruction on Hopper). The low mantissa bits of the result hold floor(y) mod 2^22.
_FLOOR_BIASED = gl.constexpr("add.rm.f32 $0, $1, 0f4B400000;")
_BIAS = gl.constexpr(12582912.0)  # 1.5 * 2^23


@gluon.jit
def _code4(y):
    """The INT4 code of fp32 ``y`` as the Triton kernel computes it (round half away from zero,
    then clamped to 0..15), biased by 1.5 * 2^23: for y >= 0 that rounding is floor(y + 0.5)
    (the same rounded add), and for y < 0 both are at most 0, which the clamp makes 0. Its
    int32 bits & 15 are the code; minus the bias, the code as a float."""
    f = gl.inline_asm_elementwise(_FLOOR_BIASED, "=f,f", [y + 0.5], dtype=gl.float32,
                                  is_pure=True, pack=1)
    return gl.minimum(gl.maximum(f, _BIAS), _BIAS + 15.0)


@gluon.jit
def _hadamard_rows(x, ROWS: gl.constexpr, D: gl.constexpr):
    """`_common.hadamard_rows` (the reference's butterflies, step for step) over a layout that
    holds each row in one thread's registers, where every reshape, permute, split and join is a
    renaming of registers (the Triton kernel moved each butterfly through shared memory)."""
    for i in gl.static_range(10):
        if (1 << i) < D:
            a, b = gl.split(gl.permute(gl.reshape(x, [ROWS, 2, D // 2]), [0, 2, 1]))
            x = gl.reshape(gl.join(a + b, a - b), [ROWS, D])
    return x


# a butterfly exchange between lanes: each lane gets the value of the lane whose id differs in
# bit 0 / 1 / 2 (all 32 lanes take part)
_SHFL_XOR_1 = gl.constexpr("shfl.sync.bfly.b32 $0, $1, 1, 0x1f, -1;")
_SHFL_XOR_2 = gl.constexpr("shfl.sync.bfly.b32 $0, $1, 2, 0x1f, -1;")
_SHFL_XOR_4 = gl.constexpr("shfl.sync.bfly.b32 $0, $1, 4, 0x1f, -1;")


@gluon.jit
def _lane_partner(x, LANE_BIT: gl.constexpr):
    """Each fp32 value of ``x`` from the lane whose id differs in bit ``LANE_BIT`` (0-2)."""
    bits = x.to(gl.int32, bitcast=True)
    if LANE_BIT == 0:
        p = gl.inline_asm_elementwise(_SHFL_XOR_1, "=r,r", [bits], dtype=gl.int32,
                                      is_pure=True, pack=1)
    elif LANE_BIT == 1:
        p = gl.inline_asm_elementwise(_SHFL_XOR_2, "=r,r", [bits], dtype=gl.int32,
                                      is_pure=True, pack=1)
    else:
        p = gl.inline_asm_elementwise(_SHFL_XOR_4, "=r,r", [bits], dtype=gl.int32,
                                      is_pure=True, pack=1)
    return p.to(gl.float32, bitcast=True)


@gluon.jit
def _lane_butterfly(x, col, LANE_BIT: gl.constexpr, COL_BIT: gl.constexpr):
    """The reference's butterfly of index bit ``COL_BIT`` where that bit is lane bit
    ``LANE_BIT``: the lane holding ``a`` (the bit clear) keeps ``a + b``, its partner ``a - b``,
    each as one fused multiply-add ``x * (+-1) + p``: the product is exact, so its one rounding
    is the sum's or the difference's (signed zeros included)."""
    sign = gl.where((col & COL_BIT) != 0, -1.0, 1.0)
    return gl.fma(x, sign[None, :], _lane_partner(x, LANE_BIT))


@gluon.jit
def _hadamard_lanes(x, ROWS: gl.constexpr, D: gl.constexpr, T: gl.constexpr):
    """`_hadamard_rows` over a layout that spreads each row over ``T`` (1, 2, 4 or 8) lanes of
    ``D / T`` contiguous values (lane bit j holds index bit log2(D / T) + j): the butterflies
    of the index's top log2(T) bits first, in the reference's order (top bit first), each an
    exchange with the partner lane, then the remaining ones inside each thread's ``D / T``
    values, which leave the row in the reference's (natural) order."""
    if T == 1:
        x = _hadamard_rows(x, ROWS, D)
    else:
        col = gl.arange(0, D, layout=gl.SliceLayout(0, x.type.layout))
        if T == 8:
            x = _lane_butterfly(x, col, 2, 4 * (D // T))
        if T >= 4:
            x = _lane_butterfly(x, col, 1, 2 * (D // T))
        x = _lane_butterfly(x, col, 0, D // T)
        x = gl.reshape(_hadamard_rows(gl.reshape(x, [ROWS * T, D // T]), ROWS * T, D // T),
                       [ROWS, D])
    return x


@gluon.jit
def _int4_rows(x, rot_scale, valid, ROWS: gl.constexpr, HEAD: gl.constexpr, T: gl.constexpr):
    """One [ROWS, HEAD] fp32 tile, each row over ``T`` lanes (`_hadamard_lanes`) -> (packed
    codes [ROWS, HEAD / 2] uint8, the scale word per row: scale bits with the zero point in the
    low 4), the Triton kernel's `write._int4_store` arithmetic."""
    x = _hadamard_lanes(x, ROWS, HEAD, T) * rot_scale
    x_e, x_o = gl.split(gl.reshape(x, [ROWS, HEAD // 2, 2]))
    mn = gl.minimum(gl.min(x_e, axis=1), gl.min(x_o, axis=1))
    mx = gl.maximum(gl.max(x_e, axis=1), gl.max(x_o, axis=1))
    valid = gl.convert_layout(valid, mn.type.layout)  # the same rows per lane: no data moves
    mn = gl.where(valid, mn, 0.0)  # padding rows: keep the arithmetic finite
    mx = gl.where(valid, mx, 0.0)
    scale = gl.maximum(gl.div_rn(mx - mn, gl.full_like(mx, 15.0)), 1e-6)
    inv = gl.div_rn(gl.full_like(scale, 1.0), scale)
    zp_b = _code4(-mn * inv)
    zp = zp_b - _BIAS
    q_e = _code4(x_e * inv[:, None] + zp[:, None]).to(gl.int32, bitcast=True) & 15
    q_o = _code4(x_o * inv[:, None] + zp[:, None]).to(gl.int32, bitcast=True) & 15
    packed = (q_e | (q_o << 4)).to(gl.uint8)
    bits = (scale.to(gl.int32, bitcast=True) & -16) | (zp_b.to(gl.int32, bitcast=True) & 15)
    return packed, bits.to(gl.float32, bitcast=True)


@gluon.jit
def _gluon_write_int4_kernel(
    key_ptr, value_ptr, stride_kt, stride_kh, stride_vt, stride_vh, slot_ptr, num_rows,
    ck_ptr, cv_ptr, cs_ptr, stride_cb, stride_ch, stride_sb, stride_sh, rot_scale,
    NUM_KV_HEADS: gl.constexpr, HEAD: gl.constexpr, BLOCK_SIZE: gl.constexpr,
    ROWS: gl.constexpr, STRIDE_S: gl.constexpr, SCALE_STRIDE_S: gl.constexpr,
    K_OFF: gl.constexpr, V_OFF: gl.constexpr, KS_OFF: gl.constexpr, VS_OFF: gl.constexpr,
    T: gl.constexpr, L: gl.constexpr, P: gl.constexpr,
):
    """INT4 per-token-head rows, each (token, kv head) row over ``T`` lanes of ``HEAD / T``
    contiguous values (``L``), loaded and computed in that layout: rotated, split into even and
    odd elements, quantized, packed and stored (``P``: the row's ``HEAD / 2`` bytes over the
    same lanes). Each load and store instruction covers 16 contiguous bytes of a row per lane,
    ``16 * T`` per row: whole sectors, without the layout conversions that loads 8 lanes along a
    row needed (round 26: up to 10% faster at heads 64 and 128)."""
    tok, head, valid, dst, sdst = _program_rows(
        slot_ptr, num_rows, stride_cb, stride_ch, stride_sb, stride_sh, NUM_KV_HEADS, BLOCK_SIZE,
        ROWS, STRIDE_S, SCALE_STRIDE_S, gl.SliceLayout(1, L))
    d = gl.arange(0, HEAD, layout=gl.SliceLayout(0, L))
    k = gl.load(key_ptr + (tok * stride_kt + head * stride_kh)[:, None] + d[None, :],
                mask=valid[:, None], other=0.0)
    k_codes, k_scale = _int4_rows(k.to(gl.float32), rot_scale, valid, ROWS, HEAD, T)
    v = gl.load(value_ptr + (tok * stride_vt + head * stride_vh)[:, None] + d[None, :],
                mask=valid[:, None], other=0.0)
    v_codes, v_scale = _int4_rows(v.to(gl.float32), rot_scale, valid, ROWS, HEAD, T)
    # the codes' layout follows from the split: P (a no-op conversion)
    dp = gl.arange(0, HEAD // 2, layout=gl.SliceLayout(0, P))
    vp = gl.convert_layout(valid, gl.SliceLayout(1, P))
    dst_p = gl.convert_layout(dst, gl.SliceLayout(1, P))
    mask_p = vp[:, None] & (dp < HEAD // 2)[None, :]
    gl.store(ck_ptr + K_OFF + dst_p[:, None] + dp[None, :], gl.convert_layout(k_codes, P),
             mask=mask_p)
    gl.store(cv_ptr + V_OFF + dst_p[:, None] + dp[None, :], gl.convert_layout(v_codes, P),
             mask=mask_p)
    gl.store(cs_ptr + KS_OFF + sdst, gl.convert_layout(k_scale, sdst.type.layout), mask=valid)
    gl.store(cs_ptr + VS_OFF + sdst, gl.convert_layout(v_scale, sdst.type.layout), mask=valid)


@functools.cache
def _layout(head: int, num_warps: int) -> gl.BlockedLayout:
    """8 lanes per row, ``head / 8`` contiguous elements per lane, 4 rows per warp."""
    return gl.BlockedLayout([1, head // 8], [4, 8], [num_warps, 1], [1, 0])


def supported(kv_mode: int, head: int) -> bool:
    """INT8/FP8 per-token-head caches with heads of 64-256 (8 lanes x 8-32 elements); INT4
    per-token-head caches with heads of 64-256 (32 values per lane: `INT4_LANES`)."""
    if kv_mode == KV_MODE_INT4_PTH:
        return head in (64, 128, 256)
    return kv_mode in (KV_MODE_INT8_PTH, KV_MODE_FP8_PTH) and head in (64, 128, 256)


#: Lanes over which the INT4 write kernel spreads a row, by head size (its top butterflies are
#: lane exchanges). A row per lane took 255 registers at head 128, could not run head 256, and
#: loads 16 bytes from each of 32 rows per instruction (half sectors); 2 / 4 / 8 lanes (32
#: values each) were the fastest of 1-8 lanes at 8K and 32K tokens (H200,
#: bench/NOTES-runtime.md round 26).
INT4_LANES = {64: 2, 128: 4, 256: 8}


@functools.cache
def _int4_layouts(head: int, num_warps: int, lanes: int) -> tuple:
    """Each row over ``lanes`` lanes of ``head / lanes`` contiguous values, 32 / ``lanes`` rows
    per warp: the row's values (``L``) and its ``head / 2`` packed bytes (``P``)."""
    return (gl.BlockedLayout([1, head // lanes], [32 // lanes, lanes], [num_warps, 1], [1, 0]),
            gl.BlockedLayout([1, head // 2 // lanes], [32 // lanes, lanes], [num_warps, 1],
                             [1, 0]))


def plan_int4(args, num_kv_heads: int, head: int, block_size: int, rot_scale: float, *,
              rows_per_program: int | None = None, num_warps: int = 1,
              lanes: int | None = None):
    """A launch of the Gluon INT4 write kernel (see `plan`); ``rows_per_program`` a multiple of
    32 / ``lanes`` x ``num_warps`` (default: exactly that); ``lanes`` per row (1, 2, 4 or 8;
    `INT4_LANES` when None). One warp by default: as fast as two or four, or up to 5% faster,
    at 8K and 32K tokens, heads 64-256 (H200, bench/NOTES-runtime.md round 26)."""
    lanes = lanes or INT4_LANES[head]
    if lanes not in (1, 2, 4, 8) or head // lanes < 8:
        raise ValueError(f"lanes per row must be 1, 2, 4 or 8 with at least 8 values each, got "
                         f"{lanes} at head {head}")
    per_program = 32 // lanes * num_warps
    rows = rows_per_program or per_program
    if rows % per_program:
        raise ValueError(f"rows_per_program must be a multiple of {per_program} "
                         f"({num_warps} warps of {32 // lanes} rows), got {rows}")
    kw = dict(NUM_KV_HEADS=num_kv_heads, HEAD=head, BLOCK_SIZE=block_size, ROWS=rows,
              STRIDE_S=args.STRIDE_S, SCALE_STRIDE_S=args.SCALE_STRIDE_S, K_OFF=args.K_OFF,
              V_OFF=args.V_OFF, KS_OFF=args.KS_OFF, VS_OFF=args.VS_OFF, T=lanes,
              num_warps=num_warps, enable_fp_fusion=False)
    # the layouts follow from HEAD, T and warps
    launch_key = key_id(("gluon-write-int4", *kw.items()))
    kw["L"], kw["P"] = _int4_layouts(head, num_warps, lanes)
    fixed = (args.k, args.v, args.s, args.stride_cb, args.stride_ch, args.stride_sb,
             args.stride_sh, float(rot_scale))
    return row_writer(_gluon_write_int4_kernel, rows, num_kv_heads, fixed, kw, launch_key)


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
