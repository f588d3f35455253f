"""Paged attention that reads quantized KV caches directly (dequantize on the fly).

One kernel serves decode (one query token per sequence) and chunked prefill (the last
``q_len`` tokens of each sequence's context attend causally to the whole context):

* programs are (query block, kv head, split); each program takes *all* query heads of one
  GQA group (``GROUP`` = Hq / Hkv) for ``BLOCK_M // GROUP_PAD`` query tokens, so every K/V
  byte of a kv head is read once per query block;
* decode splits the context into ``NUM_SPLITS`` ranges (split-K / flash-decoding) when
  there are too few (sequence, kv head) pairs to fill the GPU; a second small kernel merges the
  partial (max, sum, acc) triples, or (``merge="fused"``) the last split of each (sequence, kv
  head) to finish does, inside the kernel (a counter per pair, `_merge_last`);
* per-token-head scales are applied to the scores and probabilities, never to K/V:
  ``S = (q . k_q) * softmax_scale * k_scale[token]``, ``P_v = P * v_scale[token]``;
  FP8 per-tensor folds the static k/v scales into the score scale and the output (exact
  fp8 -> bf16/fp16 conversion of the tile in registers, then one multiply per score);
* INT4 per-token-head K/V are unpacked into even/odd nibble tiles; the kernel rotates the
  query into the cache's Hadamard basis and its output back out (`_common.hadamard_rows`, in
  registers); prefill's dequantized workspace is rotated back instead (`kvplan.runtime.prefill`).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kvplan.runtime import bound
from kvplan.runtime._common import (
    E4M3X4_TO_F16,
    E5M2X4_TO_F16,
    I8X4_TO_F16,
    KV_MODE_FP8_PER_TENSOR,
    KV_MODE_FP8_PTH,
    KV_MODE_INT4_PTH,
    KV_MODE_INT8_PTH,
    KV_MODE_NONE,
    U4X4_TO_F16,
    _current_device,
    _launch_hooked,
    _raw_stream,
    cache_args,
    cache_constexprs,
    fp8_decode,
    gluon_validated,
    hadamard_rows,
    interpreting,
    key_id,
    launch_cached,
    num_sms,
)
from kvplan.runtime.cache import PagedKVCache
from kvplan.runtime.layout import ATTENTION_EXECUTED_KINDS

_LOG2E = 1.4426950408889634


@triton.jit
def _int_to(x, DTYPE: tl.constexpr, INTERP: tl.constexpr):
    """Exact small-integer -> float conversion (the interpreter's int->bf16 cast is broken)."""
    if INTERP:
        return x.to(tl.float32).to(DTYPE)
    else:
        return x.to(DTYPE)


@triton.jit
def _i8_to_f16(x, REG: tl.constexpr):
    """int8 -> fp16 with integer ALU ops instead of the 1/4-rate I2F converter.

    Per 4 bytes: flip the sign bits (x + 128 as unsigned), splice each byte under 0x64 so the
    fp16 reads 1024 + (x + 128), subtract 1152 with one packed sub.f16x2 per 2 values; exact.

    ``REG`` marks the asm impure: a pure elementwise op lets Triton move the layout conversion
    above it, so the int8 V tile is read back from shared memory one byte per ``LDS.U8`` (no
    8-bit ``ldmatrix.trans`` on sm_90: 128 per thread and 64-key tile); impure, the tile is
    converted in registers right after its (wide) shared-memory read and reaches the dot
    through fp16 shared memory and ``ldmatrix.trans``.
    """
    if REG:
        return tl.inline_asm_elementwise(asm=I8X4_TO_F16, constraints="=r,=r,r", args=[x],
                                         dtype=tl.float16, is_pure=False, pack=4)
    else:
        return tl.inline_asm_elementwise(asm=I8X4_TO_F16, constraints="=r,=r,r", args=[x],
                                         dtype=tl.float16, is_pure=True, pack=4)


@triton.jit
def _fp8_to_f16_reg(x, E5M2: tl.constexpr):
    """fp8 bytes -> fp16 with the packed hardware converter (2 values per instruction), exact;
    impure for the same reason as `_i8_to_f16` with ``REG``."""
    if E5M2:
        return tl.inline_asm_elementwise(asm=E5M2X4_TO_F16, constraints="=r,=r,r",
                                         args=[x], dtype=tl.float16, is_pure=False, pack=4)
    else:
        return tl.inline_asm_elementwise(asm=E4M3X4_TO_F16, constraints="=r,=r,r",
                                         args=[x], dtype=tl.float16, is_pure=False, pack=4)


@triton.jit
def _convert_tile(x, KV_MODE: tl.constexpr, FP8_E5M2: tl.constexpr, DTYPE: tl.constexpr,
                  INTERP: tl.constexpr, FAST_I8: tl.constexpr, REG: tl.constexpr = False):
    """Convert a loaded K or V tile (exactly) to the dot dtype (``REG``: in registers, see
    `_i8_to_f16`; needs ``FAST_I8``, i.e. fp16 dots on a GPU)."""
    if KV_MODE == 1 or KV_MODE == 3:
        if REG and FAST_I8:
            return _fp8_to_f16_reg(x, FP8_E5M2)
        else:
            return fp8_decode(x, FP8_E5M2).to(DTYPE)
    elif KV_MODE == 2:
        if FAST_I8:
            return _i8_to_f16(x, REG)
        else:
            return _int_to(x, DTYPE, INTERP)
    else:
        return x.to(DTYPE)


@triton.jit
def _gather_rows(ptr, bt_row, start, lo, s_hi, kvh, stride_b, stride_h, col, col_mask,
                 STRIDE: tl.constexpr, COLS: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_SIZE: tl.constexpr, TPP: tl.constexpr, PAGED3D: tl.constexpr):
    """Load tokens [start, start + BLOCK_N) of one kv head: a [BLOCK_N, COLS] tile of
    ``ptr[page(n) * stride_b + kvh * stride_h + slot(n) * STRIDE + col]`` (0 outside [lo, s_hi)).

    With power-of-two block sizes the tile is addressed as [pages, TPP tokens, COLS]: one
    64-bit page base per page and compile-time offsets inside it, which keeps the address
    registers of a thread few (the 2-D form needs a 64-bit pointer per vector load).
    """
    if PAGED3D:
        PAGES: tl.constexpr = BLOCK_N // TPP
        t = tl.arange(0, TPP)
        tok0 = start + tl.arange(0, PAGES) * TPP
        page = tl.load(bt_row + tok0 // BLOCK_SIZE, mask=tok0 < s_hi, other=0).to(tl.int64)
        base = page * stride_b + kvh * stride_h + (tok0 % BLOCK_SIZE) * STRIDE
        n3 = tok0[:, None] + t[None, :]
        valid = (n3 >= lo) & (n3 < s_hi)
        off = base[:, None, None] + (t * STRIDE)[None, :, None] + col[None, None, :]
        x = tl.load(ptr + off, mask=valid[:, :, None] & col_mask[None, None, :], other=0)
        return tl.reshape(x, [BLOCK_N, COLS])
    else:
        n = start + tl.arange(0, BLOCK_N)
        valid = (n >= lo) & (n < s_hi)
        page = tl.load(bt_row + n // BLOCK_SIZE, mask=valid, other=0).to(tl.int64)
        off = page * stride_b + kvh * stride_h + (n % BLOCK_SIZE) * STRIDE
        return tl.load(ptr + off[:, None] + col[None, :],
                       mask=valid[:, None] & col_mask[None, :], other=0)


@triton.jit
def _round_to_i8(x):
    """fp32 within [-127.5, 127.5] -> int8, round to nearest even (1.5 * 2^23 trick: 2 adds)."""
    return ((x + 12582912.0) - 12582912.0).to(tl.int8)


@triton.jit
def _idot(a, b, INTERP: tl.constexpr):
    """int8 x int8 -> exact fp32 (IMMA with int32 accumulation; sums stay below 2^24)."""
    if INTERP:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b, out_dtype=tl.int32).to(tl.float32)


@triton.jit
def _prep_q(q, q_scale, F16: tl.constexpr):
    """fp16 compute: fold softmax_scale*log2(e) into q (fp32 multiply, clamp, one rounding)."""
    if F16:
        return tl.minimum(tl.maximum(q.to(tl.float32) * q_scale, -65504.0), 65504.0).to(tl.float16)
    else:
        return q


@triton.jit
def _unpack_int4(b, DTYPE: tl.constexpr, INTERP: tl.constexpr, FAST: tl.constexpr = False):
    """Packed uint8 tile -> (even, odd) nibble tiles as exact small integers in DTYPE. ``FAST``
    (fp16, on a GPU): integer ALU ops per 4 bytes (`U4X4_TO_F16`) instead of two 1/4-rate
    int -> float conversions per byte."""
    if FAST:
        return tl.inline_asm_elementwise(asm=U4X4_TO_F16, constraints="=r,=r,=r,=r,r", args=[b],
                                         dtype=(tl.float16, tl.float16), is_pure=True, pack=4)
    else:
        w = b.to(tl.int32)
        return _int_to(w & 15, DTYPE, INTERP), _int_to(w >> 4, DTYPE, INTERP)


@triton.jit
def _scale_bits_split(s):
    """fp32 INT4 scale with the zero point in its low mantissa nibble -> (scale, zp)."""
    bits = s.to(tl.int32, bitcast=True)
    return (bits & -16).to(tl.float32, bitcast=True), (bits & 15).to(tl.float32)


@triton.jit
def _dot(a, b, USE_DOT: tl.constexpr, IEEE: tl.constexpr, INTERP: tl.constexpr):
    """a [M, K] @ b [K, N] in fp32: tensor cores, or broadcast-multiply-sum for tiny groups.

    The interpreter's bf16 x bf16 tl.dot returns garbage (Triton 3.9), so when interpreting the
    (already rounded) operands are widened to fp32 first: same values, exact products.
    """
    if USE_DOT:
        if INTERP:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        elif IEEE:
            return tl.dot(a, b, input_precision="ieee")
        else:
            return tl.dot(a, b)
    else:
        return tl.sum(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], axis=1)


@triton.jit
def _paged_attention_kernel(
    q_ptr, stride_qt, stride_qh,
    o_ptr, stride_ot, stride_oh,
    po_ptr, pml_ptr, cnt_ptr,
    ck_ptr, cv_ptr, cs_ptr, stride_cb, stride_ch, stride_sb, stride_sh,
    bt_ptr, stride_bt, seq_lens_ptr, qsl_ptr,
    q_scale, s_scale, out_scale, sliding_window, num_q_blocks, num_q_heads,
    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, HEAD_SIZE: tl.constexpr, HEAD_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, STRIDE_S: tl.constexpr, SCALE_STRIDE_S: tl.constexpr,
    K_OFF: tl.constexpr, V_OFF: tl.constexpr, KS_OFF: tl.constexpr, VS_OFF: tl.constexpr,
    KV_MODE: tl.constexpr, FP8_E5M2: tl.constexpr, NUM_SPLITS: tl.constexpr,
    IS_DECODE: tl.constexpr, USE_DOT: tl.constexpr, IEEE_DOT: tl.constexpr,
    F16: tl.constexpr, INTERP: tl.constexpr, TPP: tl.constexpr, PAGED3D: tl.constexpr,
    IMMA: tl.constexpr, V_REG: tl.constexpr = False, MERGE: tl.constexpr = 0,
):
    pid = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    seq = pid // num_q_blocks
    qb = pid % num_q_blocks
    ctx = tl.load(seq_lens_ptr + seq)
    if IS_DECODE:
        q_start = seq
        q_len = 1
    else:
        q_start = tl.load(qsl_ptr + seq)
        q_len = tl.load(qsl_ptr + seq + 1) - q_start
    BLOCK_Q: tl.constexpr = BLOCK_M // GROUP_PAD
    q0 = qb * BLOCK_Q

    rows = tl.arange(0, BLOCK_M)
    qi = q0 + rows // GROUP_PAD
    g = rows % GROUP_PAD
    row_valid = (qi < q_len) & (g < GROUP)
    head = kvh * GROUP + g
    pos = ctx - q_len + qi  # absolute position of each row's query token

    # Keys this query block may see: [lo, hi); then this split's share, tile aligned.
    last_q = tl.minimum(q0 + BLOCK_Q, q_len) - 1
    hi = ctx - q_len + last_q + 1
    win = tl.where(sliding_window > 0, sliding_window, 1 << 30)
    lo = tl.maximum(ctx - q_len + q0 - win + 1, 0)
    lo_tile = (lo // BLOCK_N) * BLOCK_N  # tiles start on BLOCK_N multiples (never straddle a page)
    tiles = tl.cdiv(hi - lo_tile, BLOCK_N)
    tiles_per_split = tl.cdiv(tiles, NUM_SPLITS)
    s_lo = lo_tile + split * tiles_per_split * BLOCK_N
    s_hi = tl.minimum(hi, s_lo + tiles_per_split * BLOCK_N)
    s_hi = tl.where(q0 < q_len, s_hi, s_lo)  # query blocks past this sequence's chunk: no work

    # Compute dtype of the tensor-core dots. Quantized tiles go to fp16 (int8, fp8 and int4
    # values are exact in fp16 and the conversions are cheaper than to bf16); the query is
    # pre-multiplied by softmax_scale*log2(e) in fp32 so it stays well inside fp16's range.
    DTYPE = tl.float16 if F16 else q_ptr.dtype.element_ty
    q_row = (q_start + qi).to(tl.int64) * stride_qt + head * stride_qh
    bt_row = bt_ptr + seq.to(tl.int64) * stride_bt

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    d = tl.arange(0, HEAD_PAD)
    d_mask = d < HEAD_SIZE
    if KV_MODE == 4:
        # The cache holds K and V in a Hadamard basis (a power-of-two head, HEAD_PAD ==
        # HEAD_SIZE): q is rotated into it here, the output back out at the end.
        HALF: tl.constexpr = HEAD_PAD // 2
        dh = tl.arange(0, HALF)
        dh_mask = dh < HEAD_SIZE // 2
        q = tl.load(q_ptr + q_row[:, None] + d[None, :], mask=row_valid[:, None], other=0.0)
        q = hadamard_rows(q.to(tl.float32), BLOCK_M, HEAD_PAD) * (1.0 / tl.sqrt(float(HEAD_PAD)))
        q_e, q_o = tl.split(tl.reshape(q, [BLOCK_M, HALF, 2]))
        q_e = _prep_q(q_e, q_scale, F16)
        q_o = _prep_q(q_o, q_scale, F16)
        q_sum = tl.sum(q_e.to(tl.float32), axis=1) + tl.sum(q_o.to(tl.float32), axis=1)
        acc_e = tl.zeros([BLOCK_M, HALF], tl.float32)
        acc_o = tl.zeros([BLOCK_M, HALF], tl.float32)
        corr = tl.zeros([BLOCK_M], tl.float32)
    else:
        q = _prep_q(tl.load(q_ptr + q_row[:, None] + d[None, :],
                            mask=row_valid[:, None] & d_mask[None, :], other=0.0), q_scale, F16)
        acc = tl.zeros([BLOCK_M, HEAD_PAD], tl.float32)
        if IMMA > 0:
            # INT8 cache on integer tensor cores: q -> int8 with one scale per row (8 bits, like
            # bf16's mantissa), so K/V bytes feed the MMA unconverted.
            # Two int8 digits (hi + lo/254) give ~15 bits, more than the query's own bf16.
            qf = q.to(tl.float32)
            q_amax = tl.max(tl.abs(qf), axis=1)
            q_s = tl.where(q_amax > 0, q_amax / 127.0, 1.0)
            qn = qf * (127.0 / tl.where(q_amax > 0, q_amax, 1.0))[:, None]
            q = _round_to_i8(qn)
            q_lo = _round_to_i8((qn - q.to(tl.float32)) * 254.0)

    one = tl.arange(0, 1)
    for start in range(s_lo, s_hi, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        n_valid = (n >= lo) & (n < s_hi)
        if KV_MODE >= 2:
            k_sc = tl.reshape(_gather_rows(cs_ptr + KS_OFF, bt_row, start, lo, s_hi, kvh, stride_sb,
                                           stride_sh, one, one < 1, SCALE_STRIDE_S, 1, BLOCK_N,
                                           BLOCK_SIZE, TPP, PAGED3D), [BLOCK_N])
            v_sc = tl.reshape(_gather_rows(cs_ptr + VS_OFF, bt_row, start, lo, s_hi, kvh, stride_sb,
                                           stride_sh, one, one < 1, SCALE_STRIDE_S, 1, BLOCK_N,
                                           BLOCK_SIZE, TPP, PAGED3D), [BLOCK_N])
        if KV_MODE == 4:
            kb = _gather_rows(ck_ptr + K_OFF, bt_row, start, lo, s_hi, kvh, stride_cb, stride_ch,
                              dh, dh_mask, STRIDE_S, HALF, BLOCK_N, BLOCK_SIZE, TPP, PAGED3D)
            vb = _gather_rows(cv_ptr + V_OFF, bt_row, start, lo, s_hi, kvh, stride_cb, stride_ch,
                              dh, dh_mask, STRIDE_S, HALF, BLOCK_N, BLOCK_SIZE, TPP, PAGED3D)
            k_e, k_o = _unpack_int4(kb, DTYPE, INTERP, F16 and not INTERP)
            s = (_dot(q_e, tl.trans(k_e), USE_DOT, IEEE_DOT, INTERP)
                 + _dot(q_o, tl.trans(k_o), USE_DOT, IEEE_DOT, INTERP))
            k_s, k_zp = _scale_bits_split(k_sc)
            s = (s - q_sum[:, None] * k_zp[None, :]) * (k_s * s_scale)[None, :]
        else:
            kx = _gather_rows(ck_ptr + K_OFF, bt_row, start, lo, s_hi, kvh, stride_cb, stride_ch,
                              d, d_mask, STRIDE_S, HEAD_PAD, BLOCK_N, BLOCK_SIZE, TPP, PAGED3D)
            vx = _gather_rows(cv_ptr + V_OFF, bt_row, start, lo, s_hi, kvh, stride_cb, stride_ch,
                              d, d_mask, STRIDE_S, HEAD_PAD, BLOCK_N, BLOCK_SIZE, TPP, PAGED3D)
            fast: tl.constexpr = F16 and not INTERP
            if IMMA < 2:
                v = _convert_tile(vx, KV_MODE, FP8_E5M2, DTYPE, INTERP, fast, V_REG)
            if IMMA > 0:
                kt = tl.trans(kx)
                s = _idot(q, kt, INTERP) + _idot(q_lo, kt, INTERP) * (1.0 / 254.0)
                s = s * q_s[:, None] * k_sc[None, :]
            else:
                k = _convert_tile(kx, KV_MODE, FP8_E5M2, DTYPE, INTERP, fast)
                s = _dot(q, tl.trans(k), USE_DOT, IEEE_DOT, INTERP)
                if KV_MODE >= 2:  # noqa: SIM108 (constexpr branches in a kernel)
                    s = s * (k_sc * s_scale)[None, :]
                else:
                    s = s * s_scale
        if IS_DECODE:
            s = tl.where(n_valid[None, :], s, float("-inf"))
        else:
            visible = (n[None, :] <= pos[:, None]) & (n[None, :] > pos[:, None] - win)
            s = tl.where(visible & n_valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        m_i = m_new
        if KV_MODE == 4:
            v_e, v_o = _unpack_int4(vb, DTYPE, INTERP, F16 and not INTERP)
            v_s, v_zp = _scale_bits_split(v_sc)
            pv = p * v_s[None, :]
            corr = corr * alpha + tl.sum(pv * v_zp[None, :], axis=1)
            pv = pv.to(DTYPE)
            acc_e = acc_e * alpha[:, None] + _dot(pv, v_e, USE_DOT, IEEE_DOT, INTERP)
            acc_o = acc_o * alpha[:, None] + _dot(pv, v_o, USE_DOT, IEEE_DOT, INTERP)
        elif IMMA == 2:
            # P*v_scale -> int8 with one scale per row and tile (values in [0, 127]).
            pv = p * v_sc[None, :]
            p_amax = tl.max(pv, axis=1)
            p_s = tl.where(p_amax > 0, p_amax / 127.0, 0.0)
            pn = pv * (127.0 / tl.where(p_amax > 0, p_amax, 1.0))[:, None]
            p8 = _round_to_i8(pn)
            p8_lo = _round_to_i8((pn - p8.to(tl.float32)) * 254.0)
            pvx = _idot(p8, vx, INTERP) + _idot(p8_lo, vx, INTERP) * (1.0 / 254.0)
            acc = acc * alpha[:, None] + pvx * p_s[:, None]
        else:
            if KV_MODE >= 2:
                p = p * v_sc[None, :]
            acc = acc * alpha[:, None] + _dot(p.to(DTYPE), v, USE_DOT, IEEE_DOT, INTERP)

    tok = (q_start + qi).to(tl.int64)
    if KV_MODE == 4:  # even and odd columns back together, rotated out of the Hadamard basis
        acc = tl.reshape(tl.join(acc_e - corr[:, None], acc_o - corr[:, None]),
                         [BLOCK_M, HEAD_PAD])
        acc = hadamard_rows(acc, BLOCK_M, HEAD_PAD) * (out_scale / tl.sqrt(float(HEAD_PAD)))
    else:
        acc = acc * out_scale
    omask_row = row_valid
    omask = omask_row[:, None] & d_mask[None, :]
    if NUM_SPLITS == 1:
        inv_l = 1.0 / tl.where(l_i > 0, l_i, 1.0)  # padding rows have l = 0 (never stored)
        o_row = tok * stride_ot + head * stride_oh
        tl.store(o_ptr + o_row[:, None] + d[None, :],
                 (acc * inv_l[:, None]).to(o_ptr.dtype.element_ty), mask=omask)
    else:
        # partials: po [num_tokens, Hq, NUM_SPLITS, HEAD_SIZE] fp32, pml [.., NUM_SPLITS, 2]
        p_row = (tok * num_q_heads + head) * NUM_SPLITS + split
        tl.store(pml_ptr + p_row * 2, m_i, mask=omask_row)
        tl.store(pml_ptr + p_row * 2 + 1, l_i, mask=omask_row)
        tl.store(po_ptr + p_row[:, None] * HEAD_SIZE + d[None, :], acc, mask=omask)
        if MERGE > 0:  # decode only
            _merge_last(po_ptr, pml_ptr, cnt_ptr, o_ptr, stride_ot, stride_oh, seq, kvh,
                        num_q_heads, GROUP, GROUP_PAD, HEAD_SIZE, HEAD_PAD, NUM_SPLITS, MERGE)


@triton.jit
def _merge_last(po_ptr, pml_ptr, cnt_ptr, o_ptr, stride_ot, stride_oh, seq, kvh, num_q_heads,
                GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_SIZE: tl.constexpr,
                HEAD_PAD: tl.constexpr, NUM_SPLITS: tl.constexpr, MERGE: tl.constexpr):
    """The split-K merge inside the decode kernel: each program, its partials stored, counts
    itself in at ``cnt_ptr[seq, kv head]``; the last of the NUM_SPLITS programs of a (sequence,
    kv head) merges their partials (GROUP query heads, MERGE = NUM_SPLITS rounded up to a power
    of two) into the output and sets the count back to 0 for the next call. The barrier orders
    every thread's partial stores before the one thread's release (acq_rel) increment; the
    merging program's acquire then sees every split's stores, read from L2 (.cg)."""
    tl.debug_barrier()
    c_ptr = cnt_ptr + seq * tl.num_programs(1) + kvh
    arrived = tl.atomic_add(c_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == NUM_SPLITS - 1:
        tl.store(c_ptr, 0)
        g = tl.arange(0, GROUP_PAD)
        sp = tl.arange(0, MERGE)
        p_rows = ((seq.to(tl.int64) * num_q_heads + kvh * GROUP + g) * NUM_SPLITS)[:, None] \
            + sp[None, :]
        ok = (g < GROUP)[:, None] & (sp < NUM_SPLITS)[None, :]
        m = tl.load(pml_ptr + p_rows * 2, mask=ok, other=float("-inf"), cache_modifier=".cg")
        lsum = tl.load(pml_ptr + p_rows * 2 + 1, mask=ok, other=0.0, cache_modifier=".cg")
        w, denom = _split_weights(m, lsum, 1)
        w = w / tl.where(denom > 0, denom, 1.0)[:, None]
        d = tl.arange(0, HEAD_PAD)
        dmask = d < HEAD_SIZE
        part = tl.load(po_ptr + p_rows[:, :, None] * HEAD_SIZE + d[None, None, :],
                       mask=ok[:, :, None] & dmask[None, None, :], other=0.0,
                       cache_modifier=".cg")
        out = tl.sum(part * w[:, :, None], axis=1)
        o_row = seq.to(tl.int64) * stride_ot + (kvh * GROUP + g) * stride_oh
        tl.store(o_ptr + o_row[:, None] + d[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=(g < GROUP)[:, None] & dmask[None, :])


@triton.jit
def _split_weights(m, lsum, AXIS: tl.constexpr):
    """Weights of split-K partials along ``AXIS`` (their maxima ``m`` against the largest, in
    base 2; empty splits, m = -inf, weigh 0) and the merged softmax sum."""
    m_max = tl.max(m, axis=AXIS)
    m_max = tl.where(m_max == float("-inf"), 0.0, m_max)
    w = tl.where(m > float("-inf"), tl.exp2(m - tl.expand_dims(m_max, AXIS)), 0.0)
    return w, tl.sum(w * lsum, axis=AXIS)


@triton.jit
def _merge_splits_kernel(po_ptr, pml_ptr, o_ptr, stride_ot, stride_oh, num_q_heads,
                         HEAD_SIZE: tl.constexpr, BLOCK_D: tl.constexpr,
                         NUM_SPLITS: tl.constexpr, SPLITS_PAD: tl.constexpr, PDL: tl.constexpr):
    """Merge split-K partial results of one (token, query head) and ``BLOCK_D`` of its output
    columns (program axis 1; log-sum-exp in base 2). ``PDL``: launched as a programmatic
    dependent of the attention kernel, so it waits for that kernel's results here instead of at
    launch."""
    pid = tl.program_id(0).to(tl.int64)
    tok = pid // num_q_heads
    head = pid % num_q_heads
    sp = tl.arange(0, SPLITS_PAD)
    smask = sp < NUM_SPLITS
    base = pid * NUM_SPLITS
    if PDL:
        tl.extra.cuda.gdc_wait()
    m = tl.load(pml_ptr + (base + sp) * 2, mask=smask, other=float("-inf"))
    lsum = tl.load(pml_ptr + (base + sp) * 2 + 1, mask=smask, other=0.0)
    w, denom = _split_weights(m, lsum, 0)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = d < HEAD_SIZE
    acc = tl.load(po_ptr + (base + sp)[:, None] * HEAD_SIZE + d[None, :],
                  mask=smask[:, None] & dmask[None, :], other=0.0)
    out = tl.sum(acc * w[:, None], axis=0) / tl.where(denom > 0, denom, 1.0)
    tl.store(o_ptr + tok * stride_ot + head * stride_oh + d, out.to(o_ptr.dtype.element_ty),
             mask=dmask)


def _merge_chunks(rows: int, head_pad: int, sms: int) -> int:
    """Column chunks per merged row: with few (token, head) rows (small batches, where the split
    count is largest) one program per row would merge up to 128 partial rows alone, so the
    columns are split until there are about 4 programs per multiprocessor (chunks of 32 columns
    at least)."""
    chunks = 1
    while rows * chunks < 4 * sms and head_pad // (2 * chunks) >= 32:
        chunks *= 2
    return chunks


def _merge_plan(num_splits: int, head_pad: int, pdl: bool) -> Callable | None:
    """``merge(po, pml, out)`` for ``num_splits`` partials (None without splits), its
    constexprs bound once per output shape."""
    if num_splits <= 1:
        return None
    kw = dict(NUM_SPLITS=num_splits, SPLITS_PAD=triton.next_power_of_2(num_splits), PDL=pdl,
              num_warps=4)
    if pdl:
        kw["launch_pdl"] = True

    bound: dict[tuple, tuple[tuple, dict, int]] = {}

    def merge(po: torch.Tensor, pml: torch.Tensor, out: torch.Tensor) -> None:
        num_tokens, hq, d = out.shape
        shape = (num_tokens, hq, d)
        entry = bound.get(shape)
        if entry is None:
            chunks = _merge_chunks(num_tokens * hq, head_pad, num_sms(out.device))
            full = dict(kw, HEAD_SIZE=d, BLOCK_D=head_pad // chunks)
            entry = bound[shape] = ((num_tokens * hq, chunks), full, key_id(tuple(full.items())))
        grid, full, key = entry
        launch_cached(_merge_splits_kernel, grid,
                      (po, pml, out, out.stride(0), out.stride(1), hq), full, key)
    return merge


def _merge_splits(po: torch.Tensor, pml: torch.Tensor, out: torch.Tensor, num_splits: int,
                  head_pad: int, pdl: bool) -> None:
    """Launch the merge of the split-K partials into ``out`` [tokens, Hq, D]."""
    plan = _merge_plan(num_splits, head_pad, pdl)
    if plan is not None:
        plan(po, pml, out)


def _pdl(cfg: AttentionConfig, query: torch.Tensor) -> bool:
    """Whether the merge runs as a programmatic dependent launch: CUDA GPUs of compute
    capability 9.0 and up (Hopper), not the interpreter; ``config.pdl`` decides when given."""
    if cfg.pdl is False or interpreting() or query.device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(query.device)[0] >= 9


# Fused-merge counters per (device, stream): int32, zero between calls (the merging program sets
# its count back), grown as needed.
_COUNTERS: dict[tuple, torch.Tensor] = {}


def _merge_counters(device: torch.device, n: int) -> torch.Tensor:
    """Zeroed int32 counters (at least ``n``) for the fused merge of a call on the current
    stream: one buffer per stream, kept and reused, as calls on one stream run in order and each
    leaves its counters at zero. Under CUDA-graph capture a new zeroed buffer (a memset in the
    graph), so that graphs replayed on other streams never share one. Recorded as scratch for a
    bound call, which keeps its own per stream."""
    if device.type != "cuda" or bound._capturing(device):
        t = torch.zeros(n, dtype=torch.int32, device=device)
    else:
        key = (device.index, torch.cuda.current_stream(device).cuda_stream)
        t = _COUNTERS.get(key)
        if t is None or t.numel() < n:
            with bound.making_constant():  # a bound call zeroes its own scratch once
                t = _COUNTERS[key] = torch.zeros(max(n, 1024), dtype=torch.int32, device=device)
    bound.note_scratch(t, zeroed=True)
    return t


def _fused_merge(cfg: AttentionConfig, num_splits: int, is_decode: bool = True) -> int:
    """Splits rounded up to a power of two when the split-K merge runs inside the decode kernel
    (`_merge_last`, ``config.merge="fused"``), else 0 (no splits, prefill, or the merge kernel,
    the default). Fused, an eager call makes one driver launch instead of two (4-8 us of host
    time each on the H200 hosts), but the last split's atomic count and its serial merge add
    2-4 us of GPU time at 2-8 splits and far more at 32-128, while the merge kernel, a
    programmatic dependent launch, merges over many programs (bench/NOTES-runtime.md, round
    19)."""
    if cfg.merge is not None and cfg.merge not in ("fused", "kernel"):
        raise ValueError(f"unknown merge {cfg.merge!r}: use 'fused' or 'kernel'")
    if num_splits <= 1 or not is_decode or cfg.merge != "fused":
        return 0
    return triton.next_power_of_2(num_splits)


def _partials(out: torch.Tensor, num_splits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Buffers of the split-K partial results, fp32 [tokens, Hq, splits, D] and the (max, sum)
    pairs [tokens, Hq, splits, 2]; without splits the kernels write ``out`` and get it back."""
    if num_splits <= 1:
        return out, out
    num_tokens, hq, d = out.shape
    # two allocations: one shared buffer and its two slices cost about 2.5x the host time (views
    # are dearer than a trip through the caching allocator)
    dev = out.device
    po = torch.empty((num_tokens, hq, num_splits, d), dtype=torch.float32, device=dev)
    pml = torch.empty((num_tokens, hq, num_splits, 2), dtype=torch.float32, device=dev)
    bound.note_scratch(po, pml)
    return po, pml


@dataclass(frozen=True)
class AttentionConfig:
    """Launch parameters; `None` fields are chosen by heuristics (benchmarks sweep them)."""

    block_n: int | None = None
    block_m: int | None = None
    num_splits: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    use_dot: bool | None = None
    paged3d: bool | None = None  # page-structured tile addressing (power-of-two block sizes)
    max_registers: int | None = None  # per-thread register cap: more programs fit on an SM
    imma: int | None = None  # INT8 cache on int8 tensor cores: 1 = q.K (q -> int8 per row),
    #                          2 = also P.V (P*v_scale -> int8 per row and tile); 0 = fp16 dots
    v_reg: bool | None = None  # convert 8-bit V tiles in registers (no byte-wise shared reads)
    kernel: str | None = None  # "triton" or "gluon" (bf16/fp16, FP8 per-tensor and INT8/FP8/
    #                            INT4 per-token-head decode in one-warp programs,
    #                            kvplan.runtime.attention_gluon), "prefill" (the
    #                            prefill kernel, kvplan.runtime.prefill); None = measured default
    pipe: int | None = None  # gluon only: asynchronous-copy stages 2 (default) or 4; 0 = tiles
    #                          loaded into registers (num_stages >= 2: one tile ahead)
    swap: bool | None = None  # gluon only: keys as the MMA rows, the GQA group as the columns
    #                           (default where it applies: groups <= 8, tiles inside one page)
    pdl: bool | None = None  # split-K merge as a programmatic dependent launch (CUDA, Hopper+)
    merge: str | None = None  # decode split-K merge: "fused" (the last split of each sequence
    #                           and kv head merges, inside the attention kernel: one launch, less
    #                           host time, more GPU time) or "kernel" (a second kernel, the
    #                           default)
    dequant: bool | None = None  # prefill kernel over a quantized cache: dequantize the pages
    #                              into a bf16/fp16 workspace first, then the bf16/fp16 kernel
    hopper: bool | None = None  # prefill kernel on an sm_90 GPU: the warp-specialized TMA/wgmma
    #                             kernel (kvplan.runtime.prefill_gluon) for the bf16/fp16 pass;
    #                             None = wherever it reads the layout, False = the Triton kernel
    kv_heads_per_program: int | None = None  # gluon FP8 per-tensor decode: 1 or 2 adjacent kv
    #                              heads per program (2: rows of 2 * head contiguous bytes; GQA
    #                              groups of up to 4); None = measured default (_fp8t_heads)
    bound: bool | None = None  # eager decode with max_seq_len given, prefill with max_seq_len
    #                            and max_query_len given (CUDA): bind the launches of a call
    #                            signature over a cache (decode: on its first call; prefill:
    #                            when it comes back) and launch later calls through the driver
    #                            (kvplan.runtime.bound); False = always the ordinary path
    #                            (launch_cached)


def _decode_splits(num_programs: int, kv_len: int, block_n: int, sms: int,
                   ctas_per_sm: int = 4) -> int:
    """Pick the split-K factor: fewest waves x (tiles per program + one tile's worth of start-up
    per wave), plus a small price per split for the partial results and the merge kernel.
    Without the start-up term B16 ctx16K took 37 splits (9 waves of short programs): FP8
    per-tensor 0.2148 ms against 0.2040 ms at the 4 splits it picks now (round 15)."""
    slots = max(1, sms * ctas_per_sm)
    tiles = max(1, math.ceil(kv_len / block_n))
    best_cost, best = float("inf"), 1
    for splits in range(1, min(64, tiles) + 1):
        waves = math.ceil(num_programs * splits / slots)
        cost = waves * (math.ceil(tiles / splits) + 1) + (0.5 if splits > 1 else 0.0) + 0.02 * splits
        if cost < best_cost - 1e-9:
            best_cost, best = cost, splits
    return best


def _default_config(quantized: bool, head_pad: int, is_decode: bool,
                    fp8_tensor: bool = False, int4: bool = False) -> dict:
    """Launch parameters measured best on an H100 (bench/tune_attention.py sweeps).

    Quantized tiles take more instructions per byte than bf16 (conversion, scales), so they run
    best as small 2-warp programs: more independent programs per SM hide more latency.
    FP8 per-tensor (aligned rows, no per-token scales) gains from converting V in registers and,
    at head 128, from double-buffered K/V (``num_stages`` 5; 3 and 4 single-buffer behind the
    block-table load); the per-token-head layouts measured no better with either
    (bench/NOTES-runtime.md, round 4).
    """
    if not is_decode:
        return dict(block_n=64 if head_pad <= 128 else 32, num_warps=4, num_stages=2)
    if not quantized:
        if head_pad <= 64:
            return dict(block_n=128, num_warps=4, num_stages=3)
        if head_pad <= 128:
            return dict(block_n=64, num_warps=4, num_stages=3)
        return dict(block_n=32, num_warps=2, num_stages=3)  # 90% of copy BW against 81% at 4 warps
    if int4 and head_pad != 128:  # H200, round 20: head 64 0.1080 ms against 0.1159 with
        # 128-key tiles, head 256 0.1161 against 0.1269 with 32-key tiles (head 128 below)
        return dict(block_n=64, num_warps=2, num_stages=2 if head_pad <= 64 else 3)
    if fp8_tensor and head_pad <= 64:
        return dict(block_n=128, num_warps=2, num_stages=2, v_reg=True)
    if fp8_tensor and head_pad <= 128:
        return dict(block_n=64, num_warps=2, num_stages=5, v_reg=True)
    if fp8_tensor:  # head 256: 0.1081 ms against 0.1162 ms without v_reg (round 15)
        return dict(block_n=32, num_warps=2, num_stages=3, v_reg=True)
    # imma=1: int8 q.K on integer tensor cores, 2-3% faster than fp16 dots on the H100.
    if head_pad <= 64:
        return dict(block_n=128, num_warps=2, num_stages=2, imma=1)
    if head_pad <= 128:
        return dict(block_n=64, num_warps=2, num_stages=3, imma=1)
    return dict(block_n=32, num_warps=2, num_stages=3, imma=1)


def _check(query: torch.Tensor, cache: PagedKVCache, block_tables: torch.Tensor,
           seq_lens: torch.Tensor) -> tuple[int, int, int]:
    lay = cache.layout
    if lay.kind not in ATTENTION_EXECUTED_KINDS:
        raise ValueError(f"attention for layer kind '{lay.kind}' is not implemented by the runtime")
    if query.dim() != 3:
        raise ValueError(f"query must be [num_tokens, num_heads, head_size], got {tuple(query.shape)}")
    num_tokens, hq, d = query.shape
    if d != lay.head_size:
        raise ValueError(f"query head_size {d} != cache head_size {lay.head_size}")
    if hq % lay.num_kv_heads != 0:
        raise ValueError(f"{hq} query heads are not a multiple of {lay.num_kv_heads} kv heads")
    if query.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"query dtype {query.dtype} unsupported")
    if block_tables.dim() != 2 or seq_lens.dim() != 1 or block_tables.shape[0] != seq_lens.shape[0]:
        raise ValueError("block_tables must be [num_seqs, max_blocks] and seq_lens [num_seqs]")
    dev = query.device
    if block_tables.device != dev or seq_lens.device != dev or cache.data.device != dev:
        raise ValueError(f"query, cache, block_tables and seq_lens must be on one device, got "
                         f"{dev}, {cache.data.device}, {block_tables.device}, {seq_lens.device}")
    return num_tokens, hq, d


def paged_attention(query: torch.Tensor, cache: PagedKVCache, block_tables: torch.Tensor,
                    seq_lens: torch.Tensor, query_start_loc: torch.Tensor | None = None, *,
                    softmax_scale: float | None = None, max_query_len: int | None = None,
                    max_seq_len: int | None = None, out: torch.Tensor | None = None,
                    config: AttentionConfig | None = None) -> torch.Tensor:
    """Attention of packed queries [num_tokens, Hq, D] over a paged cache; returns [num_tokens, Hq, D].

    Decode when ``query_start_loc`` is None (query row b belongs to sequence b). Otherwise
    sequence b owns rows ``query_start_loc[b]:query_start_loc[b+1]``, the last tokens of its
    ``seq_lens[b]``-token context (chunked prefill); attention is causal, and on layers with
    ``cache.layout.sliding_window = W`` key j is visible to the query at position i only if
    ``i - W < j <= i``. ``block_tables[b, i]`` is the physical block of the sequence's i-th page.
    ``max_query_len``/``max_seq_len`` avoid a device sync when given.
    """
    if max_seq_len is not None and (query_start_loc is None or max_query_len is not None):
        done = _bound_run(query, cache, block_tables, seq_lens, query_start_loc, out,
                          max_seq_len, max_query_len, softmax_scale, config)
        if done is not None:
            return done
    num_tokens, hq, _ = _check(query, cache, block_tables, seq_lens)
    lay = cache.layout
    cfg = config or _DEFAULT_CONFIG
    if out is None:
        out = torch.empty_like(query)
    elif out.shape != query.shape or out.stride(-1) != 1:
        raise ValueError("out must have the query's shape with a contiguous last dim")
    if num_tokens == 0:
        return out
    is_decode = query_start_loc is None
    inputs = (query, out, block_tables, seq_lens) if is_decode else \
        (query, out, block_tables, seq_lens, query_start_loc)
    bind_key = None
    if max_seq_len is not None and (is_decode or max_query_len is not None) \
            and query.device.type == "cuda" and cfg.bound is not False and not interpreting() \
            and not bound.aliased(inputs):
        bind_key = _call_key(query, out, block_tables, seq_lens, max_seq_len, softmax_scale,
                             config, _current_device(), query_start_loc, max_query_len)
        if bind_key in (_current_bound_calls(cache) or ()):
            # bound already (this call could not take it: a misaligned tensor, another token
            # count than a pinned call's, launch hooks) or refused: nothing new to record
            bind_key = None
    args = cache_args(cache)
    if is_decode and num_tokens != seq_lens.shape[0]:
        raise ValueError("decode needs one query token per sequence")
    if query.stride(-1) != 1:
        query = query.contiguous()

    plan_key = None
    if is_decode:
        # Decode launches are planned once per (layout, shape, longest context, config): an
        # eager call is then a lookup, two small buffers at most and the cached launches.
        if max_seq_len is None:
            max_seq_len = int(seq_lens.max().item())
        bucket = context_bucket(max_seq_len)
        plan_key = (lay, cache.block_size, cache.k_scale, cache.v_scale, args.k.dtype,
                    num_tokens, hq, query.dtype, out.dtype, query.device, bucket,
                    softmax_scale, cfg)
        fire = _DECODE_PLANS.get(plan_key)
        if fire is None:
            fire = _DECODE_PLANS[plan_key] = _plan(query, cache, block_tables, seq_lens, None,
                                                   out, args, cfg, softmax_scale, None, bucket)
        if bind_key is None:
            fire(query, out, block_tables, seq_lens, seq_lens, args)
            return out
        # the first call of this signature over this cache: recorded, then bound, so later
        # calls launch the same kernels without this path (`_bound_run`)
        with bound.recording() as rec:
            fire(query, out, block_tables, seq_lens, seq_lens, args)
        bound.keep(_bound_calls(cache), bind_key, rec, inputs, (args.k, args.v, args.s))
        return out
    if bind_key is not None and bound.first_sight(_bound_calls(cache), bind_key):
        bind_key = None  # a prefill signature is bound when it comes back, not on first sight
    if bind_key is not None:
        # planned for the longest context and chunk of the key's buckets (`context_bucket`): a
        # prefill's dequantized workspace and grid are sized by them, so the bound launches
        # serve every call whose longest context and chunk fall in the buckets (the kernels
        # read each sequence's own length and offsets)
        fire = _plan(query, cache, block_tables, seq_lens, query_start_loc, out, args, cfg,
                     softmax_scale, context_bucket(max(1, max_query_len)),
                     context_bucket(max_seq_len), binding=True)
        with bound.recording() as rec:
            fire(query, out, block_tables, seq_lens, query_start_loc, args)
        # the key leaves the token count free (the query's and output's rows) and the
        # sequence count within its bucket (the lengths' rows)
        bound.keep(_bound_calls(cache), bind_key, rec, inputs, (args.k, args.v, args.s),
                   free_rows=(0, 1), free_seqs=3)
        return out
    fire = _plan(query, cache, block_tables, seq_lens, query_start_loc, out, args, cfg,
                 softmax_scale, max_query_len, max_seq_len)
    fire(query, out, block_tables, seq_lens,
         seq_lens if query_start_loc is None else query_start_loc, args)
    return out


def context_bucket(max_seq_len: int) -> int:
    """The longest context a decode plan is made for: ``max_seq_len`` rounded up to a multiple
    of 1/16 of its power of two (at least 16; powers of two stay as they are), so a decode loop
    whose context grows by one token a step re-plans once per ~6% of growth instead of every
    step, and the plans stay bounded. The kernels read each sequence's own length; the longest
    context only steers the heuristics (split count, kernel choice)."""
    step = 1 << max(4, (max_seq_len - 1).bit_length() - 4)
    return -(-max_seq_len // step) * step


def seq_bucket(num_seqs: int) -> int:
    """The sequence counts one bound prefill call serves: ``num_seqs`` rounded up to a power
    of two. The kernels follow each call's count (`bound.PerSeq`); only the dequantized
    workspace of a quantized cache is sized by it (at most twice the rows a call uses)."""
    return 1 << max(0, num_seqs - 1).bit_length()


def _call_key(query, out, block_tables, seq_lens, max_seq_len, softmax_scale, config,
              device: int, query_start_loc=None, max_query_len=None) -> tuple:
    """What a call's launches depend on besides the cache and the tensors' addresses: every
    shape, stride, dtype and device `_check` validates, the longest context's plan bucket
    (`context_bucket`) and the options, the current device (whose context the kernels were
    loaded in). For prefill, also the query offsets' and the longest chunk's bucket (which
    sets the grid), but not the token count (the prefill kernels take it only through the
    query's TMA descriptor, which a bound call encodes per call: `bound.ROW_FREE_KERNELS`)
    and, of the sequence count, only its bucket (`seq_bucket`: a bound call sets each call's
    grids and count, `bound.PerSeq`)."""
    if query_start_loc is None:
        return (query.shape, query.stride(), query.dtype, query.device, out.shape, out.stride(),
                out.dtype, out.device, block_tables.shape, block_tables.stride(),
                block_tables.dtype, block_tables.device, seq_lens.shape, seq_lens.stride(),
                seq_lens.dtype, seq_lens.device, context_bucket(max_seq_len), softmax_scale,
                config, device)
    return (query.shape[1:], query.stride(), query.dtype, query.device, out.shape[1:],
            out.stride(), out.dtype, out.device, block_tables.shape[1:], block_tables.stride(),
            block_tables.dtype, block_tables.device, seq_lens.stride(), seq_lens.dtype,
            seq_lens.device, context_bucket(max_seq_len), softmax_scale, config, device,
            query_start_loc.stride(), query_start_loc.dtype, query_start_loc.device,
            context_bucket(max(1, max_query_len)), seq_bucket(seq_lens.numel()))


def _current_bound_calls(cache: PagedKVCache) -> dict | None:
    """The cache's bound calls (`_call_key` -> `bound.BoundCall`, or False where the call
    could not be bound); None when there are none for its current storage, layout and scales
    (the calls bake in the storage's addresses and were planned for the rest)."""
    memo = cache.__dict__.get("_bound_calls")
    if (memo is None or memo[0] is not cache.data or memo[1] is not cache.layout
            or memo[2] != (cache.block_size, cache.k_scale, cache.v_scale)):
        return None
    return memo[3]


def _bound_calls(cache: PagedKVCache) -> dict:
    """`_current_bound_calls`, started afresh where there are none."""
    calls = _current_bound_calls(cache)
    if calls is None:
        calls = {}
        cache.__dict__["_bound_calls"] = (cache.data, cache.layout,
                                          (cache.block_size, cache.k_scale, cache.v_scale), calls)
    return calls


def _bound_run(query, cache, block_tables, seq_lens, query_start_loc, out, max_seq_len,
               max_query_len, softmax_scale, config) -> torch.Tensor | None:
    """An eager call through the launches bound on an earlier call of the same signature over
    this cache (`kvplan.runtime.bound`): a key, the inputs' addresses and one driver call per
    kernel. None where there is none, or where the ordinary path must run."""
    calls = _current_bound_calls(cache)
    if calls is None:
        return None
    if out is None:
        out = torch.empty_like(query)
    dev = _current_device()
    call = calls.get(_call_key(query, out, block_tables, seq_lens, max_seq_len, softmax_scale,
                               config, dev, query_start_loc, max_query_len))
    if not call or _launch_hooked():
        return None
    if query_start_loc is None:
        inputs = (query, out, block_tables, seq_lens)
    elif (out.shape[0] != query.shape[0] or not query.shape[0]
          or block_tables.shape[0] != seq_lens.shape[0]
          or query_start_loc.shape[0] != seq_lens.shape[0] + 1):
        # the key leaves a prefill's token and sequence counts free: the ordinary path checks
        # that they agree
        return None
    else:
        inputs = (query, out, block_tables, seq_lens, query_start_loc)
    return out if call(inputs, _raw_stream(dev)) else None


# Decode plans: (layout, block size, static scales, cache dtype, tokens, query heads, dtypes,
# device, longest context's bucket (`context_bucket`), softmax scale, config) -> the launch
# closure.
_DECODE_PLANS: dict[tuple, Callable] = {}
_DEFAULT_CONFIG = AttentionConfig()


def _plan(query, cache, block_tables, seq_lens, query_start_loc, out, args, cfg, softmax_scale,
          max_query_len, max_seq_len, binding: bool = False) -> Callable:
    """Choose the kernel and its launch for this call; returns ``fire(query, out, block_tables,
    seq_lens, query_start_loc_or_seq_lens, args)``, which launches it (the closure holds only
    values that the plan key of `paged_attention` fixes). ``binding``: a prefill call recorded
    for bound launches, whose host cost does not depend on the kernel (the Hopper prefill
    kernel then runs at any size)."""
    _num_tokens, hq, d = query.shape
    lay = cache.layout
    is_decode = query_start_loc is None
    group = hq // lay.num_kv_heads
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    @functools.cache
    def keys_read() -> int:  # longest context, window-limited (one device sync without max_seq_len)
        n = max_seq_len if max_seq_len is not None else int(seq_lens.max().item())
        return min(n, lay.sliding_window) if lay.sliding_window is not None else n

    if _use_gluon(cfg, query, args, group, d, cache.block_size, is_decode, keys_read):
        if not is_decode:
            raise ValueError("the gluon kernel is decode-only")
        return _gluon_decode(query, cache, block_tables, seq_lens, out, args, cfg, scale, keys_read)
    if not is_decode and _use_prefill_kernel(cfg, query, args, d):
        from kvplan.runtime import prefill
        if max_query_len is None:
            max_query_len = int((query_start_loc[1:] - query_start_loc[:-1]).max().item())
        pdef = prefill.default_prefill_config(d, triton.next_power_of_2(group),
                                              args.KV_MODE != KV_MODE_NONE)
        fp8_tensor = lay.quant_mode == "fp8_per_tensor"
        pkw = dict(
            group=group, block_size=cache.block_size, num_kv_heads=lay.num_kv_heads, scale=scale,
            k_scale=cache.k_scale if fp8_tensor else 1.0,
            v_scale=cache.v_scale if fp8_tensor else 1.0,
            sliding_window=int(lay.sliding_window or 0), max_query_len=max_query_len,
            block_m=cfg.block_m or pdef["block_m"], block_n=cfg.block_n or pdef["block_n"],
            num_warps=cfg.num_warps or pdef["num_warps"],
            num_stages=cfg.num_stages or pdef["num_stages"],
            v_reg=bool(cfg.v_reg if cfg.v_reg is not None else pdef.get("v_reg", False)),
            dequant=bool(cfg.dequant if cfg.dequant is not None else pdef.get("dequant", False)),
            max_seq_len=max_seq_len, hopper=cfg.hopper, binding=binding)

        def fire_prefill(query, out, block_tables, seq_lens, qsl, args):
            prefill.launch_prefill(query, out, args, block_tables, seq_lens, qsl, **pkw)
        return fire_prefill
    group_pad = triton.next_power_of_2(group)
    head_pad = max(16, triton.next_power_of_2(d))  # tl.dot needs K >= 16
    # Tensor-core dots even for GQA groups of 4-8 (M padded to 16): measured 3-4x faster on an
    # H100 than the broadcast-multiply path; groups of 1-2 keep the broadcast path.
    use_dot = cfg.use_dot if cfg.use_dot is not None else (group_pad >= 4 or not is_decode)
    if not use_dot and not is_decode:
        raise ValueError("the broadcast (no tl.dot) path is decode-only")
    block_m = (cfg.block_m or (max(16, group_pad) if is_decode else max(64, group_pad))) if use_dot \
        else group_pad
    if block_m % group_pad:
        raise ValueError(f"block_m {block_m} must be a multiple of the padded group {group_pad}")
    block_q = block_m // group_pad
    default = _default_config(args.KV_MODE != KV_MODE_NONE, head_pad, is_decode,
                              fp8_tensor=lay.quant_mode == "fp8_per_tensor",
                              int4=lay.quant_mode == "int4_per_token_head")
    block_n = cfg.block_n or default["block_n"]
    if not use_dot:
        block_n = cfg.block_n or max(16, min(64, 8192 // (group_pad * head_pad)))

    imma = cfg.imma if cfg.imma is not None else default.get("imma", 0)
    imma = int(imma) if (args.KV_MODE == 2 and use_dot) else 0
    v_reg = bool(cfg.v_reg if cfg.v_reg is not None else default.get("v_reg", False))
    v_reg = v_reg and args.KV_MODE != KV_MODE_NONE and not interpreting()
    pow2_bs = cache.block_size & (cache.block_size - 1) == 0
    paged3d = bool(cfg.paged3d) and pow2_bs  # opt-in: measured slower on an H100 (NOTES-runtime)
    if is_decode:
        num_q_blocks = 1
        if cfg.num_splits is not None:
            num_splits = cfg.num_splits
        else:
            num_splits = _decode_splits(seq_lens.shape[0] * lay.num_kv_heads, keys_read(), block_n,
                                        num_sms(query.device))
            if interpreting():  # keep CPU tests fast; splitting is covered by explicit tests
                num_splits = min(num_splits, 2)
    else:
        if max_query_len is None:
            max_query_len = int((query_start_loc[1:] - query_start_loc[:-1]).max().item())
        num_q_blocks = max(1, triton.cdiv(max_query_len, block_q))
        num_splits = cfg.num_splits or 1

    f16 = args.KV_MODE != KV_MODE_NONE and query.dtype != torch.float32
    k_scale = cache.k_scale if lay.quant_mode == "fp8_per_tensor" else 1.0
    out_scale = cache.v_scale if lay.quant_mode == "fp8_per_tensor" else 1.0
    if f16:  # q is pre-scaled in the kernel; scores get the (per-token or static) k scale
        q_scale, s_scale = scale * _LOG2E, k_scale
    else:
        q_scale, s_scale = 1.0, scale * _LOG2E * k_scale

    num_warps = cfg.num_warps or default["num_warps"]
    num_stages = cfg.num_stages or default["num_stages"]
    max_registers = cfg.max_registers or default.get("max_registers")
    launch = {"maxnreg": max_registers} if (max_registers and not interpreting()) else {}
    grid = (seq_lens.shape[0] * num_q_blocks, lay.num_kv_heads, num_splits)
    scalars = (float(q_scale), float(s_scale), float(out_scale), int(lay.sliding_window or 0),
               num_q_blocks, hq)
    kw = dict(
        GROUP=group, GROUP_PAD=group_pad, BLOCK_M=block_m, BLOCK_N=block_n, HEAD_SIZE=d,
        HEAD_PAD=head_pad, BLOCK_SIZE=cache.block_size, NUM_SPLITS=num_splits,
        IS_DECODE=is_decode, USE_DOT=use_dot, IEEE_DOT=query.dtype == torch.float32,
        F16=f16, INTERP=interpreting(), TPP=min(cache.block_size, block_n),
        PAGED3D=paged3d, IMMA=imma, V_REG=v_reg,
        num_warps=num_warps, num_stages=num_stages, **launch, **cache_constexprs(args),
    )
    fused = _fused_merge(cfg, num_splits, is_decode)
    if fused:
        kw["MERGE"] = fused
    key = key_id(tuple(kw.items()))
    merge = None if fused else _merge_plan(num_splits, head_pad, _pdl(cfg, query))
    programs = grid[0] * grid[1]

    def fire_triton(query, out, block_tables, seq_lens, qsl, args):
        po, pml = _partials(out, num_splits)
        cnt = _merge_counters(out.device, programs) if fused else po
        launch_cached(_paged_attention_kernel, grid,
                      (query, query.stride(0), query.stride(1), out, out.stride(0), out.stride(1),
                       po, pml, cnt, args.k, args.v, args.s, args.stride_cb, args.stride_ch,
                       args.stride_sb, args.stride_sh, block_tables, block_tables.stride(0),
                       seq_lens, qsl, *scalars), kw, key)
        if merge is not None:
            merge(po, pml, out)
    return fire_triton


# Knobs only the decode-form Triton kernel has: asking for one runs prefill on that kernel.
_DECODE_KERNEL_KNOBS = ("use_dot", "paged3d", "max_registers", "imma", "num_splits")


def _use_prefill_kernel(cfg: AttentionConfig, query: torch.Tensor, args, d: int) -> bool:
    """Whether prefill runs the prefill kernel (`kvplan.runtime.prefill`): by default wherever it
    reads the layout (bf16/fp16 queries; bf16/fp16 caches of the query's dtype, FP8 per-tensor,
    INT8/FP8 per-token-head; power-of-two heads 16-256). ``config.kernel="triton"`` or a
    decode-kernel-only knob runs the decode-form Triton kernel instead; INT4 always does."""
    from kvplan.runtime.prefill import prefill_supported
    dequant = cfg.dequant is not False  # the default for quantized caches
    if cfg.kernel is not None:
        if cfg.kernel == "prefill":
            if not prefill_supported(args.KV_MODE, query.dtype, args.k.dtype, d, dequant):
                raise ValueError("the prefill kernel reads bf16/fp16 queries over bf16/fp16 "
                                 "(same dtype), FP8 per-tensor and INT8/FP8 per-token-head "
                                 "caches (INT4 per-token-head through the dequantized "
                                 "workspace) with power-of-two heads 16-256")
            return True
        return False
    if any(getattr(cfg, knob) is not None for knob in _DECODE_KERNEL_KNOBS):
        return False
    return prefill_supported(args.KV_MODE, query.dtype, args.k.dtype, d, dequant)


def _gluon_available() -> bool:
    """Whether the default path may pick a Gluon kernel: Gluon importable, on a Triton release
    the kernels were validated with (`_common.gluon_validated`)."""
    if not gluon_validated():
        return False
    try:
        from kvplan.runtime import attention_gluon  # noqa: F401
    except ImportError:  # a Triton without Gluon (before 3.5)
        return False
    return True


# Below this many keys read per sequence (short contexts, sliding windows) the Triton kernel is
# as fast or faster: at a 128-key window (head 64, B64) the Gluon kernel took 1.22x bf16 SDPA
# against 0.95x; at 1024 keys the two are within 2% (round 8).
_GLUON_MIN_KEYS = 1024
_GLUON_BF16_HEADS = (64,)
_TRITON_ONLY_KNOBS = ("block_m", "num_warps", "use_dot", "paged3d", "max_registers", "imma", "v_reg")


def _use_gluon(cfg: AttentionConfig, query: torch.Tensor, args, group: int, d: int,
               block_size: int, is_decode: bool, keys: Callable[[], int] = lambda: 1 << 30) -> bool:
    """Which decode kernel runs. ``config.kernel`` decides when given; by default INT8/FP8/INT4
    per-token-head and FP8 per-tensor decode (and bf16/fp16 decode at head 64) with bf16/fp16
    queries runs a Gluon kernel on a CUDA GPU (measured
    faster than the Triton kernel on an H100 at head sizes 64, 128 and 256: bench/NOTES-runtime.md,
    round 8) when each sequence reads at least ``_GLUON_MIN_KEYS`` keys (``keys()``: the longest
    context, window-limited), unless a Triton-only launch setting is given; everything else runs
    the Triton kernel."""
    if cfg.kernel is not None:
        if cfg.kernel not in ("triton", "gluon", "prefill"):
            raise ValueError(f"unknown kernel {cfg.kernel!r}: use 'triton', 'gluon' or "
                             f"'prefill'")
        if cfg.kernel == "prefill" and is_decode:
            raise ValueError("the prefill kernel runs prefill (query_start_loc given)")
        return cfg.kernel == "gluon"
    if any(getattr(cfg, knob) is not None for knob in _TRITON_ONLY_KNOBS):
        return False  # a Triton launch setting was asked for
    if not (is_decode and query.device.type == "cuda" and not interpreting()):
        return False
    if query.dtype == torch.float32 or keys() < _GLUON_MIN_KEYS or not _gluon_available():
        return False
    from kvplan.runtime import attention_gluon
    if args.KV_MODE == KV_MODE_NONE:
        # bf16/fp16 caches: head 64 only (measured: bench/NOTES-runtime.md, round 11)
        return (d in _GLUON_BF16_HEADS and args.k.dtype == query.dtype
                and attention_gluon.bf16_supported(group, d, block_size, 16))
    if args.KV_MODE == KV_MODE_FP8_PER_TENSOR:
        # FP8 per-tensor: the Gluon row-copy kernel, 2-19% faster than the Triton kernel at
        # every suite shape of 1024 keys or more (bench/NOTES-runtime.md, round 16)
        return attention_gluon.fp8t_supported(group, d, block_size, 16, 1, args.k.shape[2])
    if args.KV_MODE == KV_MODE_INT4_PTH:
        # INT4: the swapped-operand kernel, 1.6-2.1x faster than the Triton kernel at every
        # suite shape (bench/NOTES-runtime.md, round 21)
        return attention_gluon.swap_supported(group, block_size, 16, d)
    if args.KV_MODE not in (KV_MODE_INT8_PTH, KV_MODE_FP8_PTH):
        return False
    return attention_gluon.supported(group, d, block_size)


def _gluon_splits(programs: int, tiles: int, sms: int, resident_per_sm: int) -> int:
    """Splits for the Gluon kernel: about 7.75 one-warp programs per multiprocessor (1024 on an
    H100), never more than fit at once. Measured on an H100 (bench/NOTES-runtime.md, round 8):
    head 128 B64 ctx4K runs best with 2 splits (7.8 per SM) against 1 (3.9) and 4 (a second
    wave); B16 ctx16K and B4 ctx32K with 7 and 28 splits (6.8 per SM) against 11 and 45 (10.7,
    slower although they fit); head 64 with 1 split (7.8) against 2; head 256 with 8 (7.8)
    against 5 (4.8). Up to 128 splits: one sequence of 32K keys (8 kv heads) runs 0.620x SDPA
    with 128 against 0.658x with 64 (round 15)."""
    target = min(7.75 * sms, resident_per_sm * sms)
    return max(1, min(tiles, round(target / programs), 128))


# INT4 decode on the Gluon kernel: (stages, keys per tile) by head size where the config gives
# neither. H200, round 21 (bench/NOTES-runtime.md): head 128 B64 ctx4K 0.0930 ms with 32-key
# tiles and 2 stages against 0.1008-0.1040 with 16-key tiles; head 64 B128 ctx2K 0.0616 with
# 32 keys and 4 stages (0.0627 with 3); head 256 B32 ctx4K 0.0548 with 16 keys and 2 stages
# (32-key tiles: 0.0696, 255 registers).
_GLUON_INT4_TILES = {64: (4, 32), 128: (2, 32), 256: (2, 16)}


def _gluon_decode(query, cache, block_tables, seq_lens, out, args, cfg, scale,
                  keys_read: Callable[[], int]):
    """The Gluon decode kernels (bf16/fp16, FP8 per-tensor, INT8/FP8/INT4 per-token-head; GPU only),
    with the Triton merge step."""
    lay = cache.layout
    _, hq, d = query.shape
    group = hq // lay.num_kv_heads
    if interpreting() or query.device.type != "cuda":
        raise ValueError("the gluon kernel needs a CUDA GPU (it does not run in the interpreter)")
    if (args.KV_MODE not in (KV_MODE_NONE, KV_MODE_FP8_PER_TENSOR, KV_MODE_INT8_PTH,
                             KV_MODE_FP8_PTH, KV_MODE_INT4_PTH)
            or query.dtype == torch.float32 or (args.KV_MODE == KV_MODE_NONE
                                                and args.k.dtype == torch.float32)):
        raise ValueError("the gluon kernel reads bf16/fp16, FP8 per-tensor and INT8/FP8/INT4 "
                         "per-token-head caches with bf16/fp16 queries")
    from kvplan.runtime import attention_gluon
    if args.KV_MODE == KV_MODE_NONE:
        return _gluon_decode_bf16(query, cache, block_tables, seq_lens, out, args, cfg, scale,
                                  keys_read, attention_gluon)
    if args.KV_MODE == KV_MODE_FP8_PER_TENSOR:
        return _gluon_decode_fp8t(query, cache, block_tables, seq_lens, out, args, cfg, scale,
                                  keys_read, attention_gluon)
    if not attention_gluon.supported(group, d, cache.block_size):
        raise ValueError(f"the gluon kernel does not handle group {group}, head {d}, block {cache.block_size}")
    if args.KV_MODE == KV_MODE_INT4_PTH:  # the swapped-operand kernel only
        pipe, block_n = _GLUON_INT4_TILES.get(d, (2, 16))
        pipe = cfg.pipe if cfg.pipe is not None else pipe
        block_n = cfg.block_n or block_n
        if (cfg.swap is False or pipe not in (2, 3, 4)
                or not attention_gluon.swap_supported(group, cache.block_size, block_n, d)):
            raise ValueError(f"the gluon kernel reads INT4 caches with swapped operands only: "
                             f"GQA groups of up to 8 heads, heads of 64-256, 16/32-key tiles of "
                             f"at most two pages and 2-4 stages, got group {group}, head {d}, "
                             f"block size {cache.block_size}, block_n {block_n}, pipe {pipe}, "
                             f"swap={cfg.swap}")
    else:
        pipe = cfg.pipe if cfg.pipe is not None else 2
        block_n = cfg.block_n or 16
        if (not cfg.block_n and d == 64 and pipe > 0 and cfg.swap is not False
                and attention_gluon.swap_supported(group, cache.block_size, 32, d)):
            block_n = 32  # head 64, swapped operands: 0.586x against 0.614x with 16 keys (round 10)
    prefetch = (cfg.num_stages or 2) >= 2
    swap = cfg.swap if cfg.swap is not None else (
        pipe > 0 and attention_gluon.swap_supported(group, cache.block_size, block_n, d))
    kernel_kw = dict(group=group, head=d, block_size=cache.block_size, block_n=block_n,
                     prefetch=prefetch, pipe=pipe, swap=swap)
    num_splits = cfg.num_splits if cfg.num_splits is not None else _gluon_splits(
        seq_lens.shape[0] * lay.num_kv_heads, max(1, math.ceil(keys_read() / block_n)),
        num_sms(query.device),
        attention_gluon.programs_per_sm(query, out, args, block_tables, seq_lens, **kernel_kw))
    pdl = _pdl(cfg, query)
    fused = _fused_merge(cfg, num_splits) if swap else 0
    q_scale, window = scale * _LOG2E, int(lay.sliding_window or 0)
    # validated once here; the launch closure binds the constexprs
    _, kw, key = attention_gluon._launch_args(query, out, out, out, args, block_tables, seq_lens,
                                              q_scale=q_scale, sliding_window=window,
                                              num_splits=num_splits, pdl=pdl, merge=fused,
                                              **kernel_kw)
    fn = attention_gluon._gluon_swap_kernel if swap else attention_gluon._gluon_decode_kernel
    key = key_id(("swap" if swap else "r8", *key))
    grid = (seq_lens.shape[0], args.k.shape[1], num_splits)
    merge = None if fused else _merge_plan(num_splits, d, pdl)
    programs = grid[0] * grid[1]

    def fire_gluon(query, out, block_tables, seq_lens, qsl, args):
        po, pml = _partials(out, num_splits)
        cnt = _merge_counters(out.device, programs) if fused else po
        pos = (query, query.stride(0), query.stride(1), out, out.stride(0), out.stride(1), po,
               pml, cnt, args.k, args.s, args.stride_cb, args.stride_ch, args.stride_sb,
               args.stride_sh, block_tables, block_tables.stride(0), seq_lens, q_scale, window,
               hq, num_splits)
        launch_cached(fn, grid, (*pos, query) if swap else pos, kw, key)
        if merge is not None:
            merge(po, pml, out)
    return fire_gluon


def _gluon_decode_bf16(query, cache, block_tables, seq_lens, out, args, cfg, scale,
                       keys_read: Callable[[], int], attention_gluon):
    """The Gluon decode kernel over a bf16/fp16 cache (`attention_gluon._gluon_bf16_kernel`)."""
    lay = cache.layout
    _, hq, d = query.shape
    group = hq // lay.num_kv_heads
    block_n = cfg.block_n or 16  # head 64: 0.197 ms against 0.203 ms with 32 keys (round 11)
    pipe = cfg.pipe or 2  # 3 stages: 0.204 ms
    if not attention_gluon.bf16_supported(group, d, cache.block_size, block_n):
        raise ValueError(f"the gluon kernel does not handle group {group}, head {d}, block "
                         f"{cache.block_size}, block_n {block_n} over a {args.k.dtype} cache")
    num_splits = cfg.num_splits if cfg.num_splits is not None else _gluon_splits(
        seq_lens.shape[0] * lay.num_kv_heads, max(1, math.ceil(keys_read() / block_n)),
        num_sms(query.device),
        attention_gluon.bf16_programs_per_sm(query, out, args, block_tables, seq_lens, group=group,
                                             head=d, block_size=cache.block_size,
                                             block_n=block_n, pipe=pipe))
    pdl = _pdl(cfg, query)
    fused = _fused_merge(cfg, num_splits)
    q_scale, window = scale * _LOG2E, int(lay.sliding_window or 0)
    _, kw, key = attention_gluon._bf16_launch_args(query, out, out, out, args, block_tables,
                                                   seq_lens, group, d, cache.block_size, q_scale,
                                                   window, num_splits, block_n, pipe, pdl,
                                                   merge=fused)
    grid = (seq_lens.shape[0], args.k.shape[2], num_splits)
    merge = None if fused else _merge_plan(num_splits, d, pdl)
    fn = attention_gluon._gluon_bf16_kernel
    key = key_id(key)
    programs = grid[0] * grid[1]

    def fire_gluon_bf16(query, out, block_tables, seq_lens, qsl, args):
        po, pml = _partials(out, num_splits)
        cnt = _merge_counters(out.device, programs) if fused else po
        k = args.k
        ks = k.stride()
        launch_cached(fn, grid,
                      (query, query.stride(0), query.stride(1), out, out.stride(0),
                       out.stride(1), po, pml, cnt, k, args.v, ks[0], ks[2], ks[1], block_tables,
                       block_tables.stride(0), seq_lens, q_scale, window, hq, num_splits),
                      kw, key)
        if merge is not None:
            merge(po, pml, out)
    return fire_gluon_bf16


def _fp8t_heads(group: int, num_kv_heads: int, d: int, keys: int, seqs: int, sms: int) -> int:
    """KV heads per program of the FP8 per-tensor Gluon kernel by default: 2 (rows of 2 x head
    contiguous bytes) where the doubled group fits the 8 columns, the head is 128 or less, each
    sequence reads 4096 keys or more and the head pairs still fill the GPU within 128 splits;
    else 1. Measured on an H100 (round 16): B64 ctx4K 0.1915 against 0.1969 ms, B16 ctx16K
    0.1869 against 0.1923, B4 ctx32K equal; slower at 1-2K keys (B64 ctx1K 0.0588 against
    0.0559), at head 256 (0.1053 against 0.1045) and for one sequence (0.0340 against 0.0315:
    4 head pairs cannot fill 132 SMs with 128 splits)."""
    pairs = seqs * num_kv_heads // 2
    fits = group * 2 <= 8 and num_kv_heads % 2 == 0 and d <= 128
    return 2 if fits and keys >= 4096 and pairs * 128 >= 7.75 * sms else 1


def _gluon_decode_fp8t(query, cache, block_tables, seq_lens, out, args, cfg, scale,
                       keys_read: Callable[[], int], attention_gluon):
    """The Gluon decode kernel over an FP8 per-tensor cache (`attention_gluon._gluon_fp8t_kernel`):
    the static k scale multiplies the scores, the v scale the output."""
    lay = cache.layout
    _, hq, d = query.shape
    group = hq // lay.num_kv_heads
    block_n = cfg.block_n or 16
    # head 64: a ring of 3 tiles, 0.0804 against 0.0873 ms with 2 at B128 ctx2K (H200, round 19;
    # 4 stages or 32-row tiles slower); 2 at heads 128/256 (3 and 4 no faster, round 19)
    pipe = cfg.pipe or (3 if d == 64 else 2)
    hp = cfg.kv_heads_per_program or _fp8t_heads(group, lay.num_kv_heads, d, keys_read(),
                                                 seq_lens.shape[0], num_sms(query.device))
    if not attention_gluon.fp8t_supported(group, d, cache.block_size, block_n, hp,
                                          lay.num_kv_heads):
        raise ValueError(f"the gluon kernel does not handle group {group}, head {d}, block "
                         f"{cache.block_size}, block_n {block_n}, {hp} kv heads per program "
                         f"over an FP8 per-tensor cache")
    num_splits = cfg.num_splits if cfg.num_splits is not None else _gluon_splits(
        seq_lens.shape[0] * lay.num_kv_heads // hp, max(1, math.ceil(keys_read() * hp / block_n)),
        num_sms(query.device),
        attention_gluon.fp8t_programs_per_sm(query, out, args, block_tables, seq_lens, group=group,
                                             head=d, block_size=cache.block_size,
                                             block_n=block_n, pipe=pipe, hp=hp))
    pdl = _pdl(cfg, query)
    fused = _fused_merge(cfg, num_splits)
    q_scale, window = scale * _LOG2E, int(lay.sliding_window or 0)
    k_scale, v_scale = float(cache.k_scale), float(cache.v_scale)
    _, kw, key = attention_gluon._fp8t_launch_args(query, out, out, out, args, block_tables,
                                                   seq_lens, group, d, cache.block_size, q_scale,
                                                   k_scale, v_scale, window, num_splits, block_n,
                                                   pipe, pdl, hp, merge=fused)
    grid = (seq_lens.shape[0], args.k.shape[2] // hp, num_splits)
    merge = None if fused else _merge_plan(num_splits, d, pdl)
    fn = attention_gluon._gluon_fp8t_kernel
    key = key_id(key)
    programs = grid[0] * grid[1]

    def fire_gluon_fp8t(query, out, block_tables, seq_lens, qsl, args):
        po, pml = _partials(out, num_splits)
        cnt = _merge_counters(out.device, programs) if fused else po
        k = args.k
        ks = k.stride()
        launch_cached(fn, grid,
                      (query, query.stride(0), query.stride(1), out, out.stride(0),
                       out.stride(1), po, pml, cnt, k, args.v, ks[0], ks[2], ks[1], block_tables,
                       block_tables.stride(0), seq_lens, q_scale, k_scale, v_scale, window, hq,
                       num_splits), kw, key)
        if merge is not None:
            merge(po, pml, out)
    return fire_gluon_fp8t


def paged_attention_decode(query: torch.Tensor, cache: PagedKVCache, block_tables: torch.Tensor,
                           seq_lens: torch.Tensor, **kwargs) -> torch.Tensor:
    """Decode step: ``query`` [num_seqs, Hq, D], one new token per sequence (already in the cache)."""
    return paged_attention(query, cache, block_tables, seq_lens, None, **kwargs)


def paged_attention_prefill(query: torch.Tensor, cache: PagedKVCache, block_tables: torch.Tensor,
                            seq_lens: torch.Tensor, query_start_loc: torch.Tensor,
                            **kwargs) -> torch.Tensor:
    """Chunked prefill: packed query tokens, the last of each sequence's context (already cached)."""
    return paged_attention(query, cache, block_tables, seq_lens, query_start_loc, **kwargs)
