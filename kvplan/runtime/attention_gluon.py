"""Paged decode attention over INT8/FP8/INT4 per-token-head caches (and bf16/fp16 and FP8
per-tensor ones), written in Gluon (explicit layouts).

Why a second kernel: the Triton kernel (`kvplan.runtime.attention`) stages every K/V tile through
shared memory, and the transposed 8-bit V operand is read back one byte at a time; at 8 warps per
SM it is bound by that traffic, not by DRAM (bench/NOTES-runtime.md, round 4). Here each program
is one warp with its own softmax state, and K and V go from global memory straight into the
tensor-core fragment registers:

* q·K: the reduction index d is permuted (q and K alike) so that each thread's fragment values are
  8 contiguous bytes of a K row: one 8-byte load per thread, row and 32 d;
* P·V: the output index d is permuted so that each thread reads 4 contiguous bytes of a V row
  (V rows are only 4-byte aligned in vLLM's 264-byte slot); the output is un-permuted on store;
* the permutations are bit permutations of d, applied to the loaded tensor with reshape/permute,
  which maps its layout exactly onto the MMA operand layout (``convert_layout(...,
  assert_trivial=True)`` proves it at compile time: no shared memory, no barrier);
* per-token-head scales multiply the score columns and the probabilities, as in the Triton kernel.

For GQA groups of up to 8 heads the default is the swapped-operand kernel (`_gluon_swap_kernel`,
rounds 9-10 in bench/NOTES-runtime.md): the keys are the 16 MMA rows and the group the 8 columns,
so a group of 4-8 does not pad 16-row tiles. Its tiles are copied flat (each tile's bytes as they
lie in the page, 16-byte copies of whole 128-byte lines, `_flat_issue`) and read in place through
padded shared views (`_flat_read`).

INT4 per-token-head caches (slots of D + 8 bytes: two nibbles per byte, Hadamard-rotated rows,
asymmetric with the zero point in the scale's low mantissa bits) run the swapped-operand kernel
too (KV_MODE 4, `_int4_layouts`): nibbles become biased fp16 with one prmt and one lop3 per
byte (`_k_int4`, `_v_pairs_int4`), the bias, the high nibbles' factor 16 and the zero points are
taken out per score or output column, and the query and output are rotated in the kernel
(`_wht`).

FP8 per-tensor caches (the FlashAttention layout: K and V planes of 1-byte codes) run the same
swapped-operand math in `_gluon_fp8t_kernel`, fed by row copies (8 lanes per 128 contiguous bytes
of a row) into XOR-swizzled row buffers (`_fp8t_layouts`), optionally two adjacent kv heads per
program (rows of 2 x HEAD contiguous bytes).

Splits of the context are merged by the Triton kernel's merge step or (``merge="fused"``), in
the swapped-operand, bf16/fp16 and FP8 per-tensor kernels, by the last program of each
(sequence, kv head) to finish (`_merge_last`: a counter per pair, no second launch). Gluon
kernels do not run in the CPU interpreter: this path is taken only on a CUDA GPU, and the GPU
tests compare it with the torch reference like every other configuration.
"""
from __future__ import annotations

import functools
import itertools

import torch
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from kvplan.runtime._common import (
    E4M3X4_TO_F16,
    E4M3X4X2_TO_F16_PAIRS,
    E5M2X4_TO_F16,
    E5M2X4X2_TO_F16_PAIRS,
    I8X4_TO_F16,
    I8X4_TO_F16_BIASED,
    I8X4X2_TO_F16_PAIRS,
    INT4_F16_BIAS,
    INT8_F16_BIAS,
    KV_MODE_INT4_PTH,
    U4X4_TO_F16_BIASED,
    U4X4X2_TO_F16_PAIRS,
    launch_cached,
)


@gluon.jit
def _to_f16(x, KV_MODE: gl.constexpr, E5M2: gl.constexpr):
    """8-bit codes -> exact fp16, 4 contiguous bytes per asm call (they must be 4 consecutive
    registers of x's layout)."""
    if KV_MODE == 2:
        return gl.inline_asm_elementwise(I8X4_TO_F16, "=r,=r,r", [x], dtype=gl.float16, is_pure=True,
                                         pack=4)
    elif E5M2:
        return gl.inline_asm_elementwise(E5M2X4_TO_F16, "=r,=r,r", [x], dtype=gl.float16, is_pure=True,
                                         pack=4)
    else:
        return gl.inline_asm_elementwise(E4M3X4_TO_F16, "=r,=r,r", [x], dtype=gl.float16, is_pure=True,
                                         pack=4)


@gluon.jit
def _to_f16_biased(x, KV_MODE: gl.constexpr, E5M2: gl.constexpr):
    """As `_to_f16`, but INT8 codes come out as x + 1152 (two instructions fewer per 4 codes;
    the caller removes the bias from the sums)."""
    if KV_MODE == 2:
        return gl.inline_asm_elementwise(I8X4_TO_F16_BIASED, "=r,=r,r", [x], dtype=gl.float16,
                                         is_pure=True, pack=4)
    else:
        return _to_f16(x, KV_MODE, E5M2)


@gluon.jit
def _permute(y, O: gl.constexpr, R: gl.constexpr):  # noqa: E741
    """gl.permute with the order packed as base-16 digits (axis i of the result = digit i of O):
    one integer constexpr passes through every Triton release, where a tuple argument does not."""
    if R == 6:
        return gl.permute(y, (O % 16, O // 16 % 16, O // 256 % 16, O // 4096 % 16, O // 65536 % 16,
                              O // 1048576 % 16))
    elif R == 7:
        return gl.permute(y, (O % 16, O // 16 % 16, O // 256 % 16, O // 4096 % 16, O // 65536 % 16,
                              O // 1048576 % 16, O // 16777216 % 16))
    elif R == 8:
        return gl.permute(y, (O % 16, O // 16 % 16, O // 256 % 16, O // 4096 % 16, O // 65536 % 16,
                              O // 1048576 % 16, O // 16777216 % 16, O // 268435456 % 16))
    else:
        return gl.permute(y, (O % 16, O // 16 % 16, O // 256 % 16, O // 4096 % 16, O // 65536 % 16,
                              O // 1048576 % 16, O // 16777216 % 16, O // 268435456 % 16,
                              O // 4294967296 % 16))


@gluon.jit
def _relabel(x, SHAPE: gl.constexpr, ORDER: gl.constexpr, RANK: gl.constexpr, OUT: gl.constexpr):
    """Reorder x's elements by a bit permutation of one index: reshape to bits, permute, reshape."""
    return gl.reshape(_permute(gl.reshape(x, SHAPE), ORDER, RANK), OUT)


@gluon.jit
def _load_tile(start, lo, s_hi, bt_row, kv_base, sc_base, stride_cb, stride_sb, kd, kn, vn, vd, sn,
               BLOCK_SIZE: gl.constexpr, STRIDE_S: gl.constexpr, SCALE_STRIDE_S: gl.constexpr,
               V_OFF: gl.constexpr, KS_OFF: gl.constexpr, VS_OFF: gl.constexpr):
    """Raw codes and scales of keys [start, start + BLOCK_N), zeros outside [lo, s_hi):
    K^T [HEAD, BLOCK_N] with 8 contiguous bytes per thread and key, V [BLOCK_N, HEAD] with 4,
    and the k/v scales in the score columns' layout."""
    n_k = start + kn
    ok_k = (n_k >= lo) & (n_k < s_hi)
    pg_k = gl.load(bt_row + n_k // BLOCK_SIZE, mask=ok_k, other=0).to(gl.int64)
    row_k = pg_k * stride_cb + (n_k % BLOCK_SIZE) * STRIDE_S
    kx = gl.load(kv_base + row_k[None, :] + kd[:, None], mask=ok_k[None, :], other=0)
    n_v = start + vn
    ok_v = (n_v >= lo) & (n_v < s_hi)
    pg_v = gl.load(bt_row + n_v // BLOCK_SIZE, mask=ok_v, other=0).to(gl.int64)
    row_v = pg_v * stride_cb + (n_v % BLOCK_SIZE) * STRIDE_S + V_OFF
    vx = gl.load(kv_base + row_v[:, None] + vd[None, :], mask=ok_v[:, None], other=0)
    n_s = start + sn
    ok_s = (n_s >= lo) & (n_s < s_hi)
    pg_s = gl.load(bt_row + n_s // BLOCK_SIZE, mask=ok_s, other=0).to(gl.int64)
    row_s = pg_s * stride_sb + (n_s % BLOCK_SIZE) * SCALE_STRIDE_S
    k_sc = gl.load(sc_base + row_s + KS_OFF, mask=ok_s, other=0.0)
    v_sc = gl.load(sc_base + row_s + VS_OFF, mask=ok_s, other=0.0)
    return kx, vx, k_sc, v_sc


@gluon.jit
def _tile_update(q, kx, vx, k_sc, v_sc, start, lo, s_hi, sn, m_i, l_i, acc,
                 KV_MODE: gl.constexpr, E5M2: gl.constexpr, MMA: gl.constexpr, AOP: gl.constexpr,
                 BOP: gl.constexpr, LV: gl.constexpr,
                 K_SHAPE: gl.constexpr, K_ORDER: gl.constexpr, V_SHAPE: gl.constexpr,
                 V_ORDER: gl.constexpr, RANK: gl.constexpr, HEAD: gl.constexpr,
                 BLOCK_N: gl.constexpr):
    """One tile of online softmax: q.K on the tensor cores, per-token k scales on the score
    columns, v scales folded into P."""
    k, v = _operands(kx, vx, KV_MODE, E5M2, BOP, LV, K_SHAPE, K_ORDER, V_SHAPE, V_ORDER, RANK,
                     HEAD, BLOCK_N)
    return _softmax_update(q, k, v, k_sc, v_sc, start, lo, s_hi, sn, m_i, l_i, acc, MMA, AOP,
                           BLOCK_N)


@gluon.jit
def _operands(kx, vx, KV_MODE: gl.constexpr, E5M2: gl.constexpr, BOP: gl.constexpr,
              LV: gl.constexpr, K_SHAPE: gl.constexpr, K_ORDER: gl.constexpr,
              V_SHAPE: gl.constexpr, V_ORDER: gl.constexpr, RANK: gl.constexpr,
              HEAD: gl.constexpr, BLOCK_N: gl.constexpr):
    """8-bit codes -> fp16 tensor-core fragments (register relabels only)."""
    k = gl.convert_layout(_relabel(_to_f16(kx, KV_MODE, E5M2), K_SHAPE, K_ORDER, RANK, [HEAD, BLOCK_N]),
                          BOP, assert_trivial=True)
    v = gl.convert_layout(_to_f16(vx, KV_MODE, E5M2), LV)  # register reorder only
    v = gl.convert_layout(_relabel(v, V_SHAPE, V_ORDER, RANK, [BLOCK_N, HEAD]), BOP,
                          assert_trivial=True)
    return k, v


@gluon.jit
def _softmax_update(q, k, v, k_sc, v_sc, start, lo, s_hi, sn, m_i, l_i, acc, MMA: gl.constexpr,
                    AOP: gl.constexpr, BLOCK_N: gl.constexpr):
    n_s = start + sn
    ok_s = (n_s >= lo) & (n_s < s_hi)
    s = mma_v2(q, k, gl.zeros([16, BLOCK_N], gl.float32, layout=MMA))
    s = gl.where(ok_s[None, :], s * k_sc[None, :], float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1))
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m_i - m_use)
    p = gl.exp2(s - m_use[:, None])
    l_i = l_i * alpha + gl.sum(p, axis=1)
    pa = gl.convert_layout((p * v_sc[None, :]).to(gl.float16), AOP, assert_trivial=True)
    acc = mma_v2(pa, v, acc * alpha[:, None])
    return m_new, l_i, acc



@gluon.jit
def _pages(start, lo, s_hi, bt_row, kn, vn, sc_n, BLOCK_SIZE: gl.constexpr):
    """Block-table entries of keys [start, start + BLOCK_N) in the K, V and scale layouts."""
    n_k = start + kn
    pg_k = gl.load(bt_row + n_k // BLOCK_SIZE, mask=(n_k >= lo) & (n_k < s_hi), other=0)
    n_v = start + vn
    pg_v = gl.load(bt_row + n_v // BLOCK_SIZE, mask=(n_v >= lo) & (n_v < s_hi), other=0)
    n_s = start + sc_n
    pg_s = gl.load(bt_row + n_s // BLOCK_SIZE, mask=(n_s >= lo) & (n_s < s_hi), other=0)
    return pg_k.to(gl.int64), pg_v.to(gl.int64), pg_s.to(gl.int64)


@gluon.jit
def _stage(dtype: gl.constexpr, HEAD: gl.constexpr, BLOCK_N: gl.constexpr, SK: gl.constexpr,
           SV: gl.constexpr, SS: gl.constexpr):
    """One stage of the copy ring: K^T codes, V codes, k scales, v scales."""
    return (gl.allocate_shared_memory(dtype, [HEAD, BLOCK_N], SK),
            gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD], SV),
            gl.allocate_shared_memory(gl.float32, [BLOCK_N], SS),
            gl.allocate_shared_memory(gl.float32, [BLOCK_N], SS))


@gluon.jit
def _program_range(seq_lens_ptr, sliding_window, num_splits, bt_ptr, stride_bt, c_ptr, stride_ch,
                   s_ptr, stride_sh, BLOCK_N: gl.constexpr):
    """This program's sequence, kv head and split, and its key range: [s_lo, s_hi) of whole
    tiles from the window start ``lo`` rounded down, keys before ``lo`` masked."""
    seq = gl.program_id(0)
    kvh = gl.program_id(1)
    split = gl.program_id(2)
    ctx = gl.load(seq_lens_ptr + seq)
    win = gl.where(sliding_window > 0, sliding_window, 1 << 30)
    lo = gl.maximum(ctx - win, 0)
    lo_tile = (lo // BLOCK_N) * BLOCK_N
    tiles = gl.cdiv(ctx - lo_tile, BLOCK_N)
    per_split = gl.cdiv(tiles, num_splits)
    s_lo = lo_tile + split * per_split * BLOCK_N
    s_hi = gl.minimum(ctx, s_lo + per_split * BLOCK_N)
    bt_row = bt_ptr + seq.to(gl.int64) * stride_bt
    return (seq, kvh, split, lo, s_lo, s_hi, bt_row, c_ptr + kvh * stride_ch,
            s_ptr + kvh * stride_sh)


@gluon.jit
def _ring(dtype: gl.constexpr, HEAD: gl.constexpr, BLOCK_N: gl.constexpr, SK: gl.constexpr,
          SV: gl.constexpr, SS: gl.constexpr, PIPE: gl.constexpr):
    """The PIPE (2 or 4) stages of the copy ring."""
    bufs = (_stage(dtype, HEAD, BLOCK_N, SK, SV, SS),
            _stage(dtype, HEAD, BLOCK_N, SK, SV, SS))
    if PIPE == 4:
        # tuple concatenation, not unpacking: Gluon's frontend rejects starred expressions
        bufs = bufs + (_stage(dtype, HEAD, BLOCK_N, SK, SV, SS),  # noqa: RUF005
                       _stage(dtype, HEAD, BLOCK_N, SK, SV, SS))
    return bufs


@gluon.jit
def _issue_tile(start, lo, s_hi, pg_k, pg_v, pg_s, kv_base, sc_base, stride_cb, stride_sb,
                kd, kn, vn, vd, sc_n, kb, vb, ksb, vsb,
                BLOCK_SIZE: gl.constexpr, STRIDE_S: gl.constexpr, SCALE_STRIDE_S: gl.constexpr,
                V_OFF: gl.constexpr, KS_OFF: gl.constexpr, VS_OFF: gl.constexpr):
    """Asynchronous copies of one tile's K and V codes and scales into shared memory. Each
    thread copies exactly the bytes it later reads back in the fragment layouts (8 contiguous K
    bytes, 4 contiguous V bytes), so the shared layouts keep every thread's vectors together and
    the lanes side by side: no bank conflicts and no other thread's data. Keys outside
    [lo, s_hi) are zero-filled."""
    n_k = start + kn
    ok_k = (n_k >= lo) & (n_k < s_hi)
    row_k = pg_k * stride_cb + (n_k % BLOCK_SIZE) * STRIDE_S
    cp.async_copy_global_to_shared(kb, kv_base + row_k[None, :] + kd[:, None], mask=ok_k[None, :])
    n_v = start + vn
    ok_v = (n_v >= lo) & (n_v < s_hi)
    row_v = pg_v * stride_cb + (n_v % BLOCK_SIZE) * STRIDE_S + V_OFF
    cp.async_copy_global_to_shared(vb, kv_base + row_v[:, None] + vd[None, :], mask=ok_v[:, None])
    n_s = start + sc_n
    ok_s = (n_s >= lo) & (n_s < s_hi)
    row_s = pg_s * stride_sb + (n_s % BLOCK_SIZE) * SCALE_STRIDE_S
    cp.async_copy_global_to_shared(ksb, sc_base + row_s + KS_OFF, mask=ok_s)
    cp.async_copy_global_to_shared(vsb, sc_base + row_s + VS_OFF, mask=ok_s)


@gluon.jit(do_not_specialize=["num_splits"])
def _gluon_decode_kernel(
    q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh, po_ptr, pml_ptr, cnt_ptr,
    c_ptr, s_ptr, stride_cb, stride_ch, stride_sb, stride_sh,
    bt_ptr, stride_bt, seq_lens_ptr, q_scale, sliding_window, num_q_heads, num_splits,
    GROUP: gl.constexpr, HEAD: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_SIZE: gl.constexpr,
    STRIDE_S: gl.constexpr, SCALE_STRIDE_S: gl.constexpr, V_OFF: gl.constexpr,
    KS_OFF: gl.constexpr, VS_OFF: gl.constexpr, KV_MODE: gl.constexpr, E5M2: gl.constexpr,
    SPLIT: gl.constexpr, PREFETCH: gl.constexpr, PIPE: gl.constexpr,
    # layouts and index permutations (built on the host by `_layouts`)
    MMA: gl.constexpr, AOP: gl.constexpr, BOP: gl.constexpr, LQ: gl.constexpr,
    LK: gl.constexpr, LV_LOAD: gl.constexpr, LV: gl.constexpr,
    Q_SHAPE: gl.constexpr, Q_ORDER: gl.constexpr, K_SHAPE: gl.constexpr, K_ORDER: gl.constexpr,
    V_SHAPE: gl.constexpr, V_ORDER: gl.constexpr, RANK: gl.constexpr,
    SK: gl.constexpr, SV: gl.constexpr, SS: gl.constexpr, LS: gl.constexpr,
):
    seq, kvh, split, lo, s_lo, s_hi, bt_row, kv_base, sc_base = _program_range(
        seq_lens_ptr, sliding_window, num_splits, bt_ptr, stride_bt, c_ptr, stride_ch, s_ptr,
        stride_sh, BLOCK_N)

    # q [16 rows = heads of the group, HEAD] in physical d order, relabelled to the A operand.
    qh = gl.arange(0, 16, layout=gl.SliceLayout(1, LQ))
    qd = gl.arange(0, HEAD, layout=gl.SliceLayout(0, LQ))
    q_row = seq.to(gl.int64) * stride_qt + (kvh * GROUP + qh) * stride_qh
    qmask = (qh < GROUP)[:, None] & (qd < HEAD)[None, :]
    q = gl.load(q_ptr + q_row[:, None] + qd[None, :], mask=qmask, other=0.0).to(gl.float32)
    q = gl.minimum(gl.maximum(q * q_scale, -65504.0), 65504.0).to(gl.float16)
    q = gl.convert_layout(_relabel(q, Q_SHAPE, Q_ORDER, RANK, [16, HEAD]), AOP, assert_trivial=True)

    m_i = gl.full([16], float("-inf"), gl.float32, layout=gl.SliceLayout(1, MMA))
    l_i = gl.zeros([16], gl.float32, layout=gl.SliceLayout(1, MMA))
    acc = gl.zeros([16, HEAD], gl.float32, layout=MMA)

    kd = gl.arange(0, HEAD, layout=gl.SliceLayout(1, LK))
    kn = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, LK))
    vn = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, LV_LOAD))
    vd = gl.arange(0, HEAD, layout=gl.SliceLayout(0, LV_LOAD))
    sn = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, MMA))
    if PIPE > 0:  # a ring of PIPE shared-memory stages filled by asynchronous copies
        sc_n = gl.arange(0, BLOCK_N, layout=LS)
        bufs = _ring(c_ptr.dtype.element_ty, HEAD, BLOCK_N, SK, SV, SS, PIPE)
        for i in gl.static_range(PIPE - 1):
            pg_k, pg_v, pg_s = _pages(s_lo + i * BLOCK_N, lo, s_hi, bt_row, kn, vn, sc_n, BLOCK_SIZE)
            _issue_tile(s_lo + i * BLOCK_N, lo, s_hi, pg_k, pg_v, pg_s, kv_base, sc_base, stride_cb,
                        stride_sb, kd, kn, vn, vd, sc_n, bufs[i][0], bufs[i][1], bufs[i][2],
                        bufs[i][3], BLOCK_SIZE, STRIDE_S, SCALE_STRIDE_S, V_OFF, KS_OFF, VS_OFF)
            cp.commit_group()
        pg_k, pg_v, pg_s = _pages(s_lo + (PIPE - 1) * BLOCK_N, lo, s_hi, bt_row, kn, vn, sc_n,
                                  BLOCK_SIZE)
        # the loop runs whole rounds of PIPE tiles (so every stage index is static); tiles past
        # s_hi are fully masked and leave the softmax state unchanged
        for t0 in range(s_lo, s_hi, PIPE * BLOCK_N):
            for j in gl.static_range(PIPE):
                start = t0 + j * BLOCK_N
                ahead = start + (PIPE - 1) * BLOCK_N
                wb = bufs[(j + PIPE - 1) % PIPE]
                _issue_tile(ahead, lo, s_hi, pg_k, pg_v, pg_s, kv_base, sc_base, stride_cb,
                            stride_sb, kd, kn, vn, vd, sc_n, wb[0], wb[1], wb[2], wb[3],
                            BLOCK_SIZE, STRIDE_S, SCALE_STRIDE_S, V_OFF, KS_OFF, VS_OFF)
                cp.commit_group()
                pg_k, pg_v, pg_s = _pages(ahead + BLOCK_N, lo, s_hi, bt_row, kn, vn, sc_n,
                                          BLOCK_SIZE)
                cp.wait_group(PIPE - 1)
                rb = bufs[j]
                kx = rb[0].load(LK)
                vx = rb[1].load(LV_LOAD)
                k_sc = rb[2].load(gl.SliceLayout(0, MMA))
                v_sc = rb[3].load(gl.SliceLayout(0, MMA))
                m_i, l_i, acc = _tile_update(q, kx, vx, k_sc, v_sc, start, lo, s_hi, sn, m_i, l_i,
                                             acc, KV_MODE, E5M2, MMA, AOP, BOP, LV, K_SHAPE,
                                             K_ORDER, V_SHAPE, V_ORDER, RANK, HEAD, BLOCK_N)
        cp.wait_group(0)
    elif PREFETCH:  # the next tile's loads fly while this tile computes; carried as fp16 fragments
        kx, vx, k_sc, v_sc = _load_tile(s_lo, lo, s_hi, bt_row, kv_base, sc_base, stride_cb,
                                        stride_sb, kd, kn, vn, vd, sn, BLOCK_SIZE, STRIDE_S,
                                        SCALE_STRIDE_S, V_OFF, KS_OFF, VS_OFF)
        k, v = _operands(kx, vx, KV_MODE, E5M2, BOP, LV, K_SHAPE, K_ORDER, V_SHAPE, V_ORDER, RANK,
                         HEAD, BLOCK_N)
        for start in range(s_lo, s_hi, BLOCK_N):
            kx, vx, ks_n, vs_n = _load_tile(start + BLOCK_N, lo, s_hi, bt_row, kv_base, sc_base,
                                            stride_cb, stride_sb, kd, kn, vn, vd, sn,
                                            BLOCK_SIZE, STRIDE_S, SCALE_STRIDE_S, V_OFF, KS_OFF,
                                            VS_OFF)
            m_i, l_i, acc = _softmax_update(q, k, v, k_sc, v_sc, start, lo, s_hi, sn, m_i, l_i,
                                            acc, MMA, AOP, BLOCK_N)
            k, v = _operands(kx, vx, KV_MODE, E5M2, BOP, LV, K_SHAPE, K_ORDER, V_SHAPE, V_ORDER,
                             RANK, HEAD, BLOCK_N)
            k_sc, v_sc = ks_n, vs_n
    else:
        for start in range(s_lo, s_hi, BLOCK_N):
            kx, vx, k_sc, v_sc = _load_tile(start, lo, s_hi, bt_row, kv_base, sc_base, stride_cb,
                                            stride_sb, kd, kn, vn, vd, sn, BLOCK_SIZE, STRIDE_S,
                                            SCALE_STRIDE_S, V_OFF, KS_OFF, VS_OFF)
            m_i, l_i, acc = _tile_update(q, kx, vx, k_sc, v_sc, start, lo, s_hi, sn, m_i, l_i, acc,
                                         KV_MODE, E5M2, MMA, AOP, BOP, LV, K_SHAPE, K_ORDER, V_SHAPE, V_ORDER,
                                         RANK, HEAD, BLOCK_N)

    # logical output column n holds physical d = n3 + 2 n4 + 4 (n0..n2) + (n5.. unchanged)
    rows = gl.arange(0, 16, layout=gl.SliceLayout(1, MMA))
    cols = gl.arange(0, HEAD, layout=gl.SliceLayout(0, MMA))
    d_out = ((cols >> 3) & 1) + ((cols >> 4) & 1) * 2 + (cols & 7) * 4 + (cols & ~31)
    head = kvh * GROUP + rows
    rmask = rows < GROUP
    if not SPLIT:
        inv_l = 1.0 / gl.where(l_i > 0, l_i, 1.0)
        o_row = seq.to(gl.int64) * stride_ot + head * stride_oh
        gl.store(o_ptr + o_row[:, None] + d_out[None, :], (acc * inv_l[:, None]).to(o_ptr.dtype.element_ty),
                 mask=rmask[:, None] & (cols < HEAD)[None, :])
    else:
        p_row = (seq.to(gl.int64) * num_q_heads + head) * num_splits + split
        gl.store(pml_ptr + p_row * 2, m_i, mask=rmask)
        gl.store(pml_ptr + p_row * 2 + 1, l_i, mask=rmask)
        gl.store(po_ptr + p_row[:, None] * HEAD + d_out[None, :], acc,
                 mask=rmask[:, None] & (cols < HEAD)[None, :])


# --- swapped operands: keys are the 16 MMA rows, the GQA group the 8 columns --------------------

MOVMATRIX_T = gl.constexpr("movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;")


@gluon.jit
def _transpose_p(p, BLOCK_N: gl.constexpr, BOP: gl.constexpr):
    """P^T [BLOCK_N keys, 8 heads] from the score (C) layout to the B operand of the P.V product.

    In the C layout a thread holds keys g (+8..) and heads 2t, 2t+1; the B operand wants keys
    2t, 2t+1 (+8..) and head g: each 8x8 block is transposed across the warp by one movmatrix per
    register. The asm is declared elementwise, so its result is labelled with the input's indices;
    the reshape/permute puts the true labels back, which maps exactly onto the B operand layout."""
    t = gl.inline_asm_elementwise(MOVMATRIX_T, "=r,r", [p], dtype=p.dtype, is_pure=True, pack=2)
    t = gl.reshape(gl.permute(gl.reshape(t, [BLOCK_N // 8, 8, 8]), (0, 2, 1)), [BLOCK_N, 8])
    return gl.convert_layout(t, BOP, assert_trivial=True)


@gluon.jit
def _v_pairs(vx, KV_MODE: gl.constexpr, E5M2: gl.constexpr, BLOCK_N: gl.constexpr,
             HEAD: gl.constexpr):
    """V codes [BLOCK_N, HEAD] -> fp16 with consecutive keys paired in each register (the A
    operand's register order), converted and paired in one asm per two keys and 4 d.

    The asm is elementwise to the compiler: its outputs carry the labels of the even-key input
    (element e of output o = bits x0, x1 of e). What they hold: key bit 0 = x0, d bit 0 = x1,
    d bit 1 = o. The reshape/permute after the join relabels them with the truth."""
    va, vb = gl.split(gl.permute(gl.reshape(vx, [BLOCK_N // 2, 2, HEAD]), (0, 2, 1)))
    if KV_MODE == 2:
        o0, o1 = gl.inline_asm_elementwise(I8X4X2_TO_F16_PAIRS, "=r,=r,=r,=r,r,r", [va, vb],
                                           dtype=(gl.float16, gl.float16), is_pure=True, pack=4)
    elif E5M2:
        o0, o1 = gl.inline_asm_elementwise(E5M2X4X2_TO_F16_PAIRS, "=r,=r,=r,=r,r,r", [va, vb],
                                           dtype=(gl.float16, gl.float16), is_pure=True, pack=4)
    else:
        o0, o1 = gl.inline_asm_elementwise(E4M3X4X2_TO_F16_PAIRS, "=r,=r,=r,=r,r,r", [va, vb],
                                           dtype=(gl.float16, gl.float16), is_pure=True, pack=4)
    j = gl.reshape(gl.join(o0, o1), [BLOCK_N // 2, HEAD // 4, 2, 2, 2])  # (key/2, d/4, x1, x0, o)
    return gl.reshape(gl.permute(j, (0, 3, 1, 4, 2)), [BLOCK_N, HEAD])


@gluon.jit
def _k_int4(kx, BLOCK_N: gl.constexpr, HEAD: gl.constexpr):
    """INT4 K bytes [BLOCK_N, HEAD // 2] (4 contiguous bytes per thread) -> fp16 [BLOCK_N, HEAD]
    indexed by the physical value index (2 * byte + nibble), as 1024 + n (low nibbles) and
    1024 + 16 n (high): one prmt and one lop3 per byte (`U4X4_TO_F16_BIASED`).

    The asm is elementwise to the compiler: element e (bits x0, x1) of output j carries the
    input byte's label; it holds nibble x0 of byte x1 + 2 j. The join/reshape/permute relabel the
    values with the truth: physical bit 0 = x0, bit 1 = x1, bit 2 = j."""
    o0, o1 = gl.inline_asm_elementwise(U4X4_TO_F16_BIASED, "=r,=r,=r,=r,r", [kx],
                                       dtype=(gl.float16, gl.float16), is_pure=True, pack=4)
    j = gl.reshape(gl.join(o0, o1), [BLOCK_N, HEAD // 8, 2, 2, 2])  # (row, byte/4, x1, x0, j)
    return gl.reshape(gl.permute(j, (0, 1, 4, 2, 3)), [BLOCK_N, HEAD])


@gluon.jit
def _v_pairs_int4(vx, BLOCK_N: gl.constexpr, HEAD: gl.constexpr):
    """INT4 V bytes [BLOCK_N, HEAD // 2] -> fp16 [BLOCK_N, HEAD] (physical value index, biased as
    in `_k_int4`) with consecutive keys paired in each register, one asm per two keys and 4
    bytes (`U4X4X2_TO_F16_PAIRS`). Element e (x0, x1) of output j holds key bit 0 = x0, nibble
    x1 of byte j (bits j0, j1)."""
    va, vb = gl.split(gl.permute(gl.reshape(vx, [BLOCK_N // 2, 2, HEAD // 2]), (0, 2, 1)))
    o0, o1, o2, o3 = gl.inline_asm_elementwise(
        U4X4X2_TO_F16_PAIRS, "=r,=r,=r,=r,=r,=r,=r,=r,r,r", [va, vb],
        dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
    j = gl.reshape(gl.join(gl.join(o0, o1), gl.join(o2, o3)),
                   [BLOCK_N // 2, HEAD // 8, 2, 2, 2, 2])  # (key/2, byte/4, x1, x0, j0, j1)
    return gl.reshape(gl.permute(j, (0, 3, 1, 5, 4, 2)), [BLOCK_N, HEAD])


@gluon.jit
def _wht_bit(x, B: gl.constexpr, D: gl.constexpr, C: gl.constexpr):
    """One butterfly of the Walsh-Hadamard transform of x [D, C] along D: the pairs that differ in
    bit B of the row index become (a + b, a - b). Bit B must be a register bit of x's layout."""
    y = gl.permute(gl.reshape(x, [D >> (B + 1), 2, 1 << B, C]), (0, 2, 3, 1))
    a, b = gl.split(y)
    y = gl.permute(gl.join(a + b, a - b), (0, 3, 1, 2))
    return gl.reshape(y, [D, C])


@gluon.jit
def _wht(x, BITS: gl.constexpr, D: gl.constexpr, C: gl.constexpr):
    """The butterflies of `_wht_bit` over the row-index bits set in ``BITS`` (the Sylvester-Hadamard
    matrix is the product of one butterfly per bit, in any order, and is unchanged by a bit
    permutation of both its indices: the kernels transform rows in any bit-permuted order)."""
    for b in gl.static_range(10):
        if (BITS >> b) & 1:
            x = _wht_bit(x, b, D, C)
    return x


@gluon.jit
def _swap_update(q, kx, vx, k_sc, v_sc, k_zp, v_zp, q_bias, q_sum, rel, span, sn, m_i, l_acc,
                 w_acc, z_acc, acc, KV_MODE: gl.constexpr, E5M2: gl.constexpr,
                 AOP: gl.constexpr, BOP: gl.constexpr, MMA: gl.constexpr, LVT: gl.constexpr,
                 K_SHAPE: gl.constexpr, K_ORDER: gl.constexpr, V_SHAPE: gl.constexpr,
                 V_ORDER: gl.constexpr, RANK: gl.constexpr, HEAD: gl.constexpr,
                 BLOCK_N: gl.constexpr):
    """One tile of online softmax with the operands swapped: S^T = K q^T, O^T += V^T P^T.
    Key ``n`` of the tile is read when ``n + rel`` (unsigned) is below ``span``. ``l_acc`` (and
    ``w_acc``, the sum of the fp16 P*v_scale for the INT8/INT4 bias, and ``z_acc``, INT4's sum of
    P*v_scale*zero point) stay per thread and are reduced once at the end. INT4 scores subtract
    the bias column ``q_bias`` and each key's zero point times ``q_sum`` (the sum of q)."""
    if KV_MODE == 4:
        k = gl.convert_layout(_relabel(_k_int4(kx, BLOCK_N, HEAD), K_SHAPE, K_ORDER, RANK,
                                       [BLOCK_N, HEAD]), AOP)  # register renaming only
        v = gl.convert_layout(gl.permute(_v_pairs_int4(vx, BLOCK_N, HEAD), (1, 0)), LVT)
    else:
        k = gl.convert_layout(_relabel(_to_f16_biased(kx, KV_MODE, E5M2), K_SHAPE, K_ORDER, RANK,
                                       [BLOCK_N, HEAD]), AOP)  # register renaming only
        v = gl.convert_layout(gl.permute(_v_pairs(vx, KV_MODE, E5M2, BLOCK_N, HEAD), (1, 0)), LVT)
    v = gl.convert_layout(_relabel(v, V_SHAPE, V_ORDER, RANK, [HEAD, BLOCK_N]), AOP,
                          assert_trivial=True)
    ok_s = (sn + rel).to(gl.uint32) < span
    s = mma_v2(k, q, gl.zeros([BLOCK_N, 8], gl.float32, layout=MMA))
    if KV_MODE == 4:  # noqa: SIM108 (a constexpr branch)
        s = s - q_bias[None, :] - k_zp[:, None] * q_sum[None, :]
    else:
        s = s - q_bias[None, :]
    s = gl.where(ok_s[:, None], s * k_sc[:, None], float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=0))
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m_i - m_use)
    p = gl.exp2(s - m_use[None, :])
    l_acc = l_acc * alpha[None, :] + p
    pv = (p * v_sc[:, None]).to(gl.float16)
    if KV_MODE == 2 or KV_MODE == 4:
        w_acc = w_acc * alpha[None, :] + pv.to(gl.float32)
    if KV_MODE == 4:
        z_acc = z_acc * alpha[None, :] + pv.to(gl.float32) * v_zp[:, None]
    acc = mma_v2(v, _transpose_p(pv, BLOCK_N, BOP), acc * alpha[None, :])
    return m_new, l_acc, w_acc, z_acc, acc


@gluon.jit
def _flat_issue(start, lo, s_hi, pg0, pg1, kv_base, stride_cb, ch, ch_t, byte, ring,
                AT: gl.constexpr, RAW: gl.constexpr, BLOCK_SIZE: gl.constexpr,
                BLOCK_N: gl.constexpr, STRIDE_S: gl.constexpr, MAIN: gl.constexpr,
                TAIL: gl.constexpr, TWO_PAGES: gl.constexpr):
    """Asynchronous 16-byte copies of one tile's bytes to byte ``AT`` of the ring, slot after slot
    exactly as they lie in the page (a 16-slot page-head is 33 whole 128-byte lines): ``MAIN``
    chunks, then the last ``TAIL``. Chunks wholly outside keys [lo, s_hi) are
    zero-filled; the chunk holding the byte where key ``lo`` begins may carry the last 8 bytes of
    key lo - 1 (see `_flat_read`)."""
    first = gl.maximum(lo - start, 0) * STRIDE_S
    last = gl.minimum(s_hi - start, BLOCK_N) * STRIDE_S
    # the tile's first slot: a multiple of BLOCK_N (16-byte alignment is visible to the compiler)
    base0 = kv_base + pg0 * stride_cb + ((start % BLOCK_SIZE) // BLOCK_N) * (BLOCK_N * STRIDE_S)
    off = ch * 16
    off_t = (MAIN + ch_t) * 16
    if TWO_PAGES:
        PAGE: gl.constexpr = BLOCK_SIZE * STRIDE_S
        base1 = kv_base + pg1 * stride_cb - PAGE
        src = gl.where(off < PAGE, base0, base1) + off
        src_t = base1 + off_t
    else:
        src = base0 + off
        src_t = base0 + off_t
    ok = (off + 16 > first) & (off < last)
    ok_t = (off_t + 16 > first) & (off_t < last)
    dst = ring.slice(AT, 16)._reinterpret(ring.dtype, [MAIN, 16], RAW)
    cp.async_copy_global_to_shared(dst, src[:, None] + byte[None, :], mask=ok[:, None])
    # exactly TAIL chunks (lanes past TAIL repeat the same copy): a masked copy zero-fills its
    # destination, so copying past the tile would clear the next stage
    dst_t = ring.slice(AT + MAIN * 16, 16)._reinterpret(ring.dtype, [TAIL, 16], RAW)
    cp.async_copy_global_to_shared(dst_t, src_t[:, None] + byte[None, :], mask=ok_t[:, None])


@gluon.jit
def _flat_read(ring, rel, span, vn, sn, AT: gl.constexpr, V_OFF: gl.constexpr,
               KS_OFF: gl.constexpr, KV_MODE: gl.constexpr, HEAD: gl.constexpr,
               BLOCK_N: gl.constexpr, PKV: gl.constexpr, PSC: gl.constexpr, LK: gl.constexpr,
               LV_LOAD: gl.constexpr, LSC: gl.constexpr, LROW: gl.constexpr):
    """K codes, V codes and the k/v scales of a tile copied by `_flat_issue` to byte ``AT`` of
    the ring, read through padded views of the raw slots (vLLM's layout, checked at launch): K
    of key n at n * STRIDE_S, V at n * STRIDE_S + V_OFF (view pitch 2 * HEAD + 8 bytes), the k
    and v scales at fp32 word n * STRIDE_S / 4 + KS_OFF and 33 words further. Keys before the
    window (``rel + n`` wraps) get a zero v scale, and FP8 V codes are zeroed in the window's
    first tile, where the bytes of key lo - 1 copied with key lo's first chunk may be
    unwritten."""
    kv = ring.slice(AT, 4)._reinterpret(ring.dtype, [BLOCK_N, 2 * HEAD], PKV)
    kx = kv.slice(0, HEAD, dim=1).load(LK)
    vv = ring.slice(AT + V_OFF, 4)._reinterpret(ring.dtype, [BLOCK_N, 2 * HEAD], PKV)
    vx = vv.slice(0, HEAD, dim=1).load(LV_LOAD)
    if KV_MODE == 3:  # noqa: SIM102 (a constexpr branch around a runtime one)
        if rel < 0:
            vx = gl.where(((vn + rel).to(gl.uint32) < span)[:, None], vx, 0)
    sc = ring.slice(AT + 4 * KS_OFF, 4)._reinterpret(gl.float32, [BLOCK_N, 2], PSC).load(LSC)
    k_sc, v_sc = gl.split(sc)
    k_sc = gl.convert_layout(k_sc, LROW, assert_trivial=True)
    v_sc = gl.where((sn + rel).to(gl.uint32) < span,
                    gl.convert_layout(v_sc, LROW, assert_trivial=True), 0.0)
    return kx, vx, k_sc, v_sc


@gluon.jit
def _tile_pages(bt_row, start, s_hi, BLOCK_SIZE: gl.constexpr, TWO_PAGES: gl.constexpr):
    """Block-table entries of the page holding key ``start`` and, with ``TWO_PAGES``, of the
    next page (0 past the range)."""
    pg0 = gl.load(bt_row + start // BLOCK_SIZE, mask=start < s_hi, other=0).to(gl.int64)
    if TWO_PAGES:
        pg1 = gl.load(bt_row + start // BLOCK_SIZE + 1, mask=start + BLOCK_SIZE < s_hi,
                      other=0).to(gl.int64)
    else:
        pg1 = pg0
    return pg0, pg1


@gluon.jit
def _store_swapped(acc, m_i, l_i, seq, kvh, split, rows, cols, d_out, o_ptr, stride_ot, stride_oh,
                   po_ptr, pml_ptr, cnt_ptr, num_q_heads, num_splits, GROUP: gl.constexpr,
                   HEAD: gl.constexpr, SPLIT: gl.constexpr, MERGE: gl.constexpr,
                   MG: gl.constexpr, MDC: gl.constexpr, LM: gl.constexpr):
    """Store O^T [HEAD, 8] of the swapped-operand kernels: row r holds output element
    ``d_out[r]`` of query head ``kvh * GROUP + column``. Unsplit, the normalized output; split,
    the partial accumulator and its (max, sum) pair, merged by the merge kernel or, with
    ``MERGE``, by the last of the program's splits to finish (`_merge_last`)."""
    head = kvh * GROUP + cols
    cmask = cols < GROUP
    omask = (rows < HEAD)[:, None] & cmask[None, :]
    if not SPLIT:
        inv_l = 1.0 / gl.where(l_i > 0, l_i, 1.0)
        o_col = seq.to(gl.int64) * stride_ot + head * stride_oh
        gl.store(o_ptr + o_col[None, :] + d_out[:, None],
                 (acc * inv_l[None, :]).to(o_ptr.dtype.element_ty), mask=omask)
    else:
        p_row = (seq.to(gl.int64) * num_q_heads + head) * num_splits + split
        gl.store(pml_ptr + p_row * 2, m_i, mask=cmask)
        gl.store(pml_ptr + p_row * 2 + 1, l_i, mask=cmask)
        gl.store(po_ptr + p_row[None, :] * HEAD + d_out[:, None], acc, mask=omask)
        if MERGE > 0:
            _merge_last(po_ptr, pml_ptr, cnt_ptr, o_ptr, stride_ot, stride_oh, seq, kvh,
                        num_q_heads, num_splits, GROUP, HEAD, MERGE, MG, MDC, LM)


@gluon.jit
def _merge_last(po_ptr, pml_ptr, cnt_ptr, o_ptr, stride_ot, stride_oh, seq, kvh, num_q_heads,
                num_splits, GROUP: gl.constexpr, HEAD: gl.constexpr, MERGE: gl.constexpr,
                MG: gl.constexpr, MDC: gl.constexpr, LM: gl.constexpr):
    """The split-K merge inside the attention kernel: each program, its partials stored, counts
    itself in at ``cnt_ptr[seq, program column]``; the last of the ``num_splits`` programs of a
    (sequence, kv head) merges their partials (GROUP query heads, up to MERGE splits, MDC
    columns of [MG, MERGE, MDC] per pass in layout LM) into the output and sets the count back to
    0 for the next call. The barrier orders every lane's partial stores before the one lane's
    release (acq_rel) increment; the merging program's acquire then sees every split's stores,
    read from L2 (.cg)."""
    gl.thread_barrier()
    c_ptr = cnt_ptr + seq * gl.num_programs(1) + kvh
    arrived = gl.atomic_add(c_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == num_splits - 1:
        gl.store(c_ptr, 0)
        LGS: gl.constexpr = gl.SliceLayout(2, LM)
        LGD: gl.constexpr = gl.SliceLayout(1, LM)
        g = gl.arange(0, MG, layout=gl.SliceLayout(1, LGS))
        s = gl.arange(0, MERGE, layout=gl.SliceLayout(0, LGS))
        p_rows = ((seq.to(gl.int64) * num_q_heads + kvh * GROUP + g) * num_splits)[:, None] \
            + s[None, :]
        ok = (g < GROUP)[:, None] & (s < num_splits)[None, :]
        m = gl.load(pml_ptr + p_rows * 2, mask=ok, other=float("-inf"), cache_modifier=".cg")
        lsum = gl.load(pml_ptr + p_rows * 2 + 1, mask=ok, other=0.0, cache_modifier=".cg")
        m_max = gl.max(m, axis=1)
        m_max = gl.where(m_max == float("-inf"), 0.0, m_max)
        w = gl.where(m > float("-inf"), gl.exp2(m - m_max[:, None]), 0.0)
        denom = gl.sum(w * lsum, axis=1)
        w = w / gl.where(denom > 0, denom, 1.0)[:, None]
        dc = gl.arange(0, MDC, layout=gl.SliceLayout(0, LGD))
        g_o = gl.arange(0, MG, layout=gl.SliceLayout(1, LGD))
        o_row = seq.to(gl.int64) * stride_ot + (kvh * GROUP + g_o) * stride_oh
        for c in gl.static_range(HEAD // MDC):
            d = c * MDC + dc
            part = gl.load(po_ptr + p_rows[:, :, None] * HEAD + d[None, None, :],
                           mask=ok[:, :, None], other=0.0, cache_modifier=".cg")
            out = gl.sum(part * w[:, :, None], axis=1)
            gl.store(o_ptr + o_row[:, None] + d[None, :], out.to(o_ptr.dtype.element_ty),
                     mask=(g_o < GROUP)[:, None])


@gluon.jit
def _trace_now(TRACE: gl.constexpr):
    """%globaltimer (ns) when tracing, else 0."""
    if TRACE:
        return tl.extra.cuda.globaltimer()
    else:
        return gl.to_tensor(0).to(gl.int64)


@gluon.jit
def _trace_store(trace_ptr, t_start, t_first, TRACE: gl.constexpr):
    """With ``TRACE``, store this program's start, first-tile and end times (%globaltimer, ns)
    and its multiprocessor at ``trace_ptr[4 * program]`` (programs numbered x fastest): the
    per-program timeline that `bench/trace_decode.py` turns into ramp-up and drain figures."""
    if TRACE:
        pid = ((gl.program_id(2) * gl.num_programs(1) + gl.program_id(1)) * gl.num_programs(0)
               + gl.program_id(0)).to(gl.int64)
        t_end = tl.extra.cuda.globaltimer()
        gl.store(trace_ptr + 4 * pid, t_start)
        gl.store(trace_ptr + 4 * pid + 1, t_first)
        gl.store(trace_ptr + 4 * pid + 2, t_end)
        gl.store(trace_ptr + 4 * pid + 3, tl.extra.cuda.smid().to(gl.int64))


@gluon.jit(do_not_specialize=["num_splits"])
def _gluon_swap_kernel(
    q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh, po_ptr, pml_ptr, cnt_ptr,
    c_ptr, s_ptr, stride_cb, stride_ch, stride_sb, stride_sh,
    bt_ptr, stride_bt, seq_lens_ptr, q_scale, sliding_window, num_q_heads, num_splits, trace_ptr,
    GROUP: gl.constexpr, HEAD: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_SIZE: gl.constexpr,
    STRIDE_S: gl.constexpr, SCALE_STRIDE_S: gl.constexpr, V_OFF: gl.constexpr,
    KS_OFF: gl.constexpr, VS_OFF: gl.constexpr, KV_MODE: gl.constexpr, E5M2: gl.constexpr,
    SPLIT: gl.constexpr, PIPE: gl.constexpr, TRACE: gl.constexpr,
    MERGE: gl.constexpr, MG: gl.constexpr, MDC: gl.constexpr, LM: gl.constexpr,
    MMA: gl.constexpr, AOP: gl.constexpr, BOP: gl.constexpr, LQ: gl.constexpr,
    LK: gl.constexpr, LV_LOAD: gl.constexpr, LVT: gl.constexpr, Q_SHAPE: gl.constexpr,
    Q_ORDER: gl.constexpr, K_SHAPE: gl.constexpr, K_ORDER: gl.constexpr, V_SHAPE: gl.constexpr,
    V_ORDER: gl.constexpr, RANK: gl.constexpr, LC: gl.constexpr, RAW: gl.constexpr,
    FLAT1: gl.constexpr, PKV: gl.constexpr, PSC: gl.constexpr, LSC: gl.constexpr,
    PV_BITS: gl.constexpr, RING_BYTES: gl.constexpr, TRIGGER: gl.constexpr,
    HB: gl.constexpr, LQ2: gl.constexpr, LO2: gl.constexpr, QBITS: gl.constexpr,
    ROT: gl.constexpr,
):
    """Decode over INT8/FP8/INT4 per-token-head slots (see the module docstring). ``HB``: code
    bytes per K or V row (HEAD, or HEAD // 2 for INT4). INT4 (KV_MODE 4) rows hold Hadamard-
    rotated values with a zero point: the query is rotated in (`_wht` over the bits in ``QBITS``
    in layout ``LQ2``, then the rest in ``LQ``) and the output rotated back out (in the MMA layout,
    then ``LO2``), both scaled by ``ROT`` (D ** -0.5)."""
    t_start = _trace_now(TRACE)
    seq, kvh, split, lo, s_lo, s_hi, bt_row, kv_base, _sc_base = _program_range(
        seq_lens_ptr, sliding_window, num_splits, bt_ptr, stride_bt, c_ptr, stride_ch, s_ptr,
        stride_sh, BLOCK_N)

    TWO_PAGES: gl.constexpr = BLOCK_N > BLOCK_SIZE  # a tile spans one page, or two of 16 slots
    sn = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, MMA))
    span = (s_hi - lo).to(gl.uint32)
    # copies: MAIN chunks of 16 bytes spread over the lanes, then the TAIL last ones
    MAIN: gl.constexpr = BLOCK_N * HB // 8
    TAIL: gl.constexpr = BLOCK_N * STRIDE_S // 16 - MAIN
    ch = gl.arange(0, MAIN, layout=gl.SliceLayout(1, LC))
    ch_t = gl.arange(0, TAIL, layout=gl.SliceLayout(1, LC))
    byte = gl.arange(0, 16, layout=gl.SliceLayout(0, LC))
    vn_r = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, LV_LOAD))
    TILE: gl.constexpr = BLOCK_N * STRIDE_S  # bytes of a tile; the stages lie back to back
    ring = gl.allocate_shared_memory(c_ptr.dtype.element_ty, [RING_BYTES], FLAT1)
    for i in gl.static_range(PIPE - 1):
        start = s_lo + i * BLOCK_N
        pg0, pg1 = _tile_pages(bt_row, start, s_hi, BLOCK_SIZE, TWO_PAGES)
        _flat_issue(start, lo, s_hi, pg0, pg1, kv_base, stride_cb, ch, ch_t, byte, ring,
                    i * TILE, RAW, BLOCK_SIZE, BLOCK_N, STRIDE_S, MAIN, TAIL, TWO_PAGES)
        cp.commit_group()
    pg0, pg1 = _tile_pages(bt_row, s_lo + (PIPE - 1) * BLOCK_N, s_hi, BLOCK_SIZE, TWO_PAGES)
    if TRIGGER:  # the merge kernel (a programmatic dependent launch) may start now and wait
        tl.extra.cuda.gdc_launch_dependents()

    # q^T [HEAD physical, 8 = heads of the group], relabelled to the B operand
    qd = gl.arange(0, HEAD, layout=gl.SliceLayout(1, LQ))
    qh = gl.arange(0, 8, layout=gl.SliceLayout(0, LQ))
    q_sum = gl.zeros([8], gl.float32, layout=gl.SliceLayout(0, MMA))
    if KV_MODE == 4:
        # INT4: q into the cache's Hadamard basis; high-nibble elements (physical bit 0) take
        # 1/16, the keys' high nibbles come out of the conversion as 1024 + 16 n
        qd2 = gl.arange(0, HEAD, layout=gl.SliceLayout(1, LQ2))
        qh2 = gl.arange(0, 8, layout=gl.SliceLayout(0, LQ2))
        q_row2 = seq.to(gl.int64) * stride_qt + (kvh * GROUP + qh2) * stride_qh
        qmask2 = (qd2 < HEAD)[:, None] & (qh2 < GROUP)[None, :]
        q = gl.load(q_ptr + q_row2[None, :] + qd2[:, None], mask=qmask2, other=0.0)
        q = gl.convert_layout(_wht(q.to(gl.float32), QBITS, HEAD, 8), LQ)
        q = gl.convert_layout(_wht(q, (HEAD - 1) ^ QBITS, HEAD, 8), LQ)
        hi = (qd & 1)[:, None] == 1
        q = q * (q_scale * ROT)
        q = gl.minimum(gl.maximum(gl.where(hi, q * 0.0625, q), -65504.0), 65504.0).to(gl.float16)
        qf = q.to(gl.float32)
        q_bias = gl.convert_layout(gl.sum(qf, axis=0) * INT4_F16_BIAS, gl.SliceLayout(0, MMA))
        q_sum = gl.convert_layout(gl.sum(gl.where(hi, qf * 16.0, qf), axis=0),
                                  gl.SliceLayout(0, MMA))
    else:
        q_row = seq.to(gl.int64) * stride_qt + (kvh * GROUP + qh) * stride_qh
        qmask = (qd < HEAD)[:, None] & (qh < GROUP)[None, :]
        q = gl.load(q_ptr + q_row[None, :] + qd[:, None], mask=qmask, other=0.0).to(gl.float32)
        q = gl.minimum(gl.maximum(q * q_scale, -65504.0), 65504.0).to(gl.float16)
        if KV_MODE == 2:  # INT8 keys come out of the conversion as x + 1152
            q_bias = gl.convert_layout(gl.sum(q.to(gl.float32), axis=0) * INT8_F16_BIAS,
                                       gl.SliceLayout(0, MMA))
        else:
            q_bias = gl.zeros([8], gl.float32, layout=gl.SliceLayout(0, MMA))
    q = gl.convert_layout(_relabel(q, Q_SHAPE, Q_ORDER, RANK, [HEAD, 8]), BOP, assert_trivial=True)

    m_i = gl.full([8], float("-inf"), gl.float32, layout=gl.SliceLayout(0, MMA))
    l_acc = gl.zeros([BLOCK_N, 8], gl.float32, layout=MMA)
    w_acc = gl.zeros([BLOCK_N, 8], gl.float32, layout=MMA)
    z_acc = gl.zeros([BLOCK_N, 8], gl.float32, layout=MMA)
    acc = gl.zeros([HEAD, 8], gl.float32, layout=MMA)
    t_first = t_start
    for t0 in range(s_lo, s_hi, PIPE * BLOCK_N):  # whole rounds of PIPE tiles (static stages)
        for j in gl.static_range(PIPE):
            start = t0 + j * BLOCK_N
            ahead = start + (PIPE - 1) * BLOCK_N
            _flat_issue(ahead, lo, s_hi, pg0, pg1, kv_base, stride_cb, ch, ch_t, byte, ring,
                        (j + PIPE - 1) % PIPE * TILE, RAW, BLOCK_SIZE, BLOCK_N, STRIDE_S, MAIN,
                        TAIL, TWO_PAGES)
            cp.commit_group()
            pg0, pg1 = _tile_pages(bt_row, ahead + BLOCK_N, s_hi, BLOCK_SIZE, TWO_PAGES)
            cp.wait_group(PIPE - 1)
            if TRACE:  # noqa: SIM102 (a constexpr branch around a runtime one)
                if start == s_lo:
                    t_first = _trace_now(TRACE)
            kx, vx, k_sc, v_sc = _flat_read(ring, start - lo, span, vn_r, sn, j * TILE, V_OFF,
                                            KS_OFF, KV_MODE, HB, BLOCK_N, PKV, PSC, LK,
                                            LV_LOAD, LSC, gl.SliceLayout(1, MMA))
            if KV_MODE == 4:  # the zero point rides in the scale's low mantissa nibble
                k_bits = k_sc.to(gl.int32, bitcast=True)
                v_bits = v_sc.to(gl.int32, bitcast=True)
                k_zp = (k_bits & 15).to(gl.float32)
                v_zp = (v_bits & 15).to(gl.float32)
                k_sc = (k_bits & -16).to(gl.float32, bitcast=True)
                v_sc = (v_bits & -16).to(gl.float32, bitcast=True)
            else:
                k_zp = k_sc
                v_zp = v_sc
            m_i, l_acc, w_acc, z_acc, acc = _swap_update(
                q, kx, vx, k_sc, v_sc, k_zp, v_zp, q_bias, q_sum, start - lo, span, sn, m_i,
                l_acc, w_acc, z_acc, acc, KV_MODE, E5M2, AOP, BOP, MMA, LVT, K_SHAPE, K_ORDER,
                V_SHAPE, V_ORDER, RANK, HEAD, BLOCK_N)
    cp.wait_group(0)

    l_i = gl.sum(l_acc, axis=0)
    if KV_MODE == 2:  # INT8 values came out as x + 1152: remove 1152 * sum(P * v_scale)
        acc = acc - (INT8_F16_BIAS * gl.sum(w_acc, axis=0))[None, :]
    rows = gl.arange(0, HEAD, layout=gl.SliceLayout(1, MMA))
    if KV_MODE == 4:
        # INT4 values came out as 1024 + n (rows whose logical bit 3, physical bit 0, is 0) or
        # 1024 + 16 n: remove 1024 * sum(P * v_scale), the 16, and sum(P * v_scale * zp); then
        # rotate the rows back out of the Hadamard basis (register row bits 3.. in the MMA
        # layout, bits 0-2 in LO2)
        hi_row = ((rows >> 3) & 1)[:, None] == 1
        acc = acc - (INT4_F16_BIAS * gl.sum(w_acc, axis=0))[None, :]
        acc = gl.where(hi_row, acc * 0.0625, acc) - gl.sum(z_acc, axis=0)[None, :]
        acc = gl.convert_layout(_wht(acc * ROT, (HEAD - 1) ^ 7, HEAD, 8), LO2)
        acc = gl.convert_layout(_wht(acc, 7, HEAD, 8), MMA)
    cols = gl.arange(0, 8, layout=gl.SliceLayout(0, MMA))
    d_out = rows * 0  # output row r (logical d) holds physical d: bit i of r -> digit i of PV_BITS
    for i in gl.static_range(RANK - 1):
        d_out += ((rows >> i) & 1) << (PV_BITS // (1 << (4 * i)) % 16)
    _store_swapped(acc, m_i, l_i, seq, kvh, split, rows, cols, d_out, o_ptr, stride_ot,
                   stride_oh, po_ptr, pml_ptr, cnt_ptr, num_q_heads, num_splits, GROUP, HEAD,
                   SPLIT, MERGE, MG, MDC, LM)
    _trace_store(trace_ptr, t_start, t_first, TRACE)


# --- bf16/fp16 caches (FlashAttention layout): the swapped-operand form with swizzled tiles ------

@gluon.jit
def _row_pages(bt_row, start, s_hi, rn, BLOCK_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """Page of the tile at ``start`` (a multiple of BLOCK_N), or with 2-page tiles the page of
    each of its key rows ``rn`` (0 past the range)."""
    pg0, pg1 = _tile_pages(bt_row, start, s_hi, BLOCK_SIZE, BLOCK_N > BLOCK_SIZE)
    if BLOCK_N > BLOCK_SIZE:
        return gl.where(rn < BLOCK_SIZE, pg0, pg1)
    else:
        return pg0


@gluon.jit
def _rows_issue(start, lo, s_hi, pages, k_base, v_base, stride_kb, stride_kt, rn, cd, kbuf, vbuf,
                BLOCK_SIZE: gl.constexpr):
    """Asynchronous 16-byte copies of the K and V rows of keys [start, start + BLOCK_N) into one
    ring stage; rows outside [lo, s_hi) are zero-filled."""
    key = start + rn
    ok = ((key >= lo) & (key < s_hi))[:, None]
    row = (pages * stride_kb + (key % BLOCK_SIZE) * stride_kt)[:, None] + cd[None, :]
    cp.async_copy_global_to_shared(kbuf, k_base + row, mask=ok)
    cp.async_copy_global_to_shared(vbuf, v_base + row, mask=ok)


@gluon.jit(do_not_specialize=["num_splits"])
def _gluon_bf16_kernel(
    q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh, po_ptr, pml_ptr, cnt_ptr,
    k_ptr, v_ptr, stride_kb, stride_kh, stride_kt,
    bt_ptr, stride_bt, seq_lens_ptr, q_scale, sliding_window, num_q_heads, num_splits,
    GROUP: gl.constexpr, HEAD: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_SIZE: gl.constexpr,
    SPLIT: gl.constexpr, PIPE: gl.constexpr, TRIGGER: gl.constexpr,
    MERGE: gl.constexpr, MG: gl.constexpr, MDC: gl.constexpr, LM: gl.constexpr,
    MMA: gl.constexpr, AOP: gl.constexpr, BOP: gl.constexpr, LC: gl.constexpr,
    LQ: gl.constexpr, SKV: gl.constexpr,
):
    """Decode over a bf16/fp16 cache: S^T = K q^T and O^T += V^T P^T with the keys as the MMA
    rows and the GQA group (up to 8 heads) as the 8 columns. Tiles are copied row by row into a
    swizzled ring and read by ldmatrix (V transposed on the read); the softmax scale is applied
    to the fp32 scores, so q enters the MMA unrounded."""
    seq, kvh, split, lo, s_lo, s_hi, bt_row, k_base, v_base = _program_range(
        seq_lens_ptr, sliding_window, num_splits, bt_ptr, stride_bt, k_ptr, stride_kh, v_ptr,
        stride_kh, BLOCK_N)
    dtype: gl.constexpr = k_ptr.dtype.element_ty
    rn = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, LC))
    cd = gl.arange(0, HEAD, layout=gl.SliceLayout(0, LC))
    kring = gl.allocate_shared_memory(dtype, [PIPE, BLOCK_N, HEAD], SKV)
    vring = gl.allocate_shared_memory(dtype, [PIPE, BLOCK_N, HEAD], SKV)
    for i in gl.static_range(PIPE - 1):
        start = s_lo + i * BLOCK_N
        pages = _row_pages(bt_row, start, s_hi, rn, BLOCK_SIZE, BLOCK_N)
        _rows_issue(start, lo, s_hi, pages, k_base, v_base, stride_kb, stride_kt, rn, cd,
                    kring.index(i), vring.index(i), BLOCK_SIZE)
        cp.commit_group()
    pages = _row_pages(bt_row, s_lo + (PIPE - 1) * BLOCK_N, s_hi, rn, BLOCK_SIZE, BLOCK_N)
    if TRIGGER:  # the merge kernel (a programmatic dependent launch) may start now and wait
        tl.extra.cuda.gdc_launch_dependents()

    qd = gl.arange(0, HEAD, layout=gl.SliceLayout(1, LQ))
    qh = gl.arange(0, 8, layout=gl.SliceLayout(0, LQ))
    q_row = seq.to(gl.int64) * stride_qt + (kvh * GROUP + qh) * stride_qh
    q = gl.load(q_ptr + q_row[None, :] + qd[:, None], mask=(qh < GROUP)[None, :], other=0.0)
    q = gl.convert_layout(q.to(dtype), BOP)  # q^T [HEAD, 8]

    sn = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, MMA))
    m_i = gl.full([8], float("-inf"), gl.float32, layout=gl.SliceLayout(0, MMA))
    l_acc = gl.zeros([BLOCK_N, 8], gl.float32, layout=MMA)
    acc = gl.zeros([HEAD, 8], gl.float32, layout=MMA)
    for t0 in range(s_lo, s_hi, PIPE * BLOCK_N):  # whole rounds of PIPE tiles (static stages)
        for j in gl.static_range(PIPE):
            start = t0 + j * BLOCK_N
            ahead = start + (PIPE - 1) * BLOCK_N
            _rows_issue(ahead, lo, s_hi, pages, k_base, v_base, stride_kb, stride_kt, rn, cd,
                        kring.index((j + PIPE - 1) % PIPE), vring.index((j + PIPE - 1) % PIPE),
                        BLOCK_SIZE)
            cp.commit_group()
            pages = _row_pages(bt_row, ahead + BLOCK_N, s_hi, rn, BLOCK_SIZE, BLOCK_N)
            cp.wait_group(PIPE - 1)
            k = kring.index(j).load(AOP)  # [BLOCK_N, HEAD]
            vt = vring.index(j).permute((1, 0)).load(AOP)  # V^T [HEAD, BLOCK_N]
            s = mma_v2(k, q, gl.zeros([BLOCK_N, 8], gl.float32, layout=MMA))
            key = start + sn
            s = gl.where(((key >= lo) & (key < s_hi))[:, None], s * q_scale, float("-inf"))
            m_new = gl.maximum(m_i, gl.max(s, axis=0))
            m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = gl.exp2(m_i - m_use)
            p = gl.exp2(s - m_use[None, :])
            l_acc = l_acc * alpha[None, :] + p
            acc = mma_v2(vt, _transpose_p(p.to(dtype), BLOCK_N, BOP), acc * alpha[None, :])
            m_i = m_new
    cp.wait_group(0)

    l_i = gl.sum(l_acc, axis=0)
    rows = gl.arange(0, HEAD, layout=gl.SliceLayout(1, MMA))
    cols = gl.arange(0, 8, layout=gl.SliceLayout(0, MMA))
    _store_swapped(acc, m_i, l_i, seq, kvh, split, rows, cols, rows, o_ptr, stride_ot, stride_oh,
                   po_ptr, pml_ptr, cnt_ptr, num_q_heads, num_splits, GROUP, HEAD, SPLIT, MERGE,
                   MG, MDC, LM)


# --- FP8 per-tensor caches (FlashAttention layout, 1-byte rows, one scale per tensor) -----------

@gluon.jit
def _fp8t_stage(HEAD: gl.constexpr, BLOCK_N: gl.constexpr, SKR: gl.constexpr,
                SVR: gl.constexpr):
    """One stage of the FP8 per-tensor ring: the K and V rows of a tile."""
    return (gl.allocate_shared_memory(gl.uint8, [BLOCK_N, HEAD], SKR),
            gl.allocate_shared_memory(gl.uint8, [BLOCK_N, HEAD], SVR))


@gluon.jit
def _fp8t_ring(HEAD: gl.constexpr, BLOCK_N: gl.constexpr, SKR: gl.constexpr, SVR: gl.constexpr,
               PIPE: gl.constexpr):
    """The PIPE (2-4) stages of the FP8 per-tensor ring."""
    bufs = (_fp8t_stage(HEAD, BLOCK_N, SKR, SVR), _fp8t_stage(HEAD, BLOCK_N, SKR, SVR))
    if PIPE >= 3:
        # tuple concatenation, not unpacking: Gluon's frontend rejects starred expressions
        bufs = bufs + (_fp8t_stage(HEAD, BLOCK_N, SKR, SVR),)  # noqa: RUF005
    if PIPE == 4:
        bufs = bufs + (_fp8t_stage(HEAD, BLOCK_N, SKR, SVR),)  # noqa: RUF005
    return bufs


@gluon.jit
def _fp8t_issue(start, lo, s_hi, pg0, pg1, base, stride_kb, stride_kt, stride_kh, rn, cd, buf,
                BLOCK_SIZE: gl.constexpr, TOK: gl.constexpr, HP: gl.constexpr):
    """Asynchronous 16-byte copies of one plane's (K or V) rows of tokens [start, start + TOK)
    into ``buf``: row n is token n // HP of kv head n % HP of the program's HP heads (side by
    side in the cache, so HP = 2 reads 2 * HEAD contiguous bytes per token); rows outside
    [lo, s_hi) are zero-filled."""
    tok = rn // HP
    key = start + tok
    ok = (key >= lo) & (key < s_hi)
    if TOK > BLOCK_SIZE:  # noqa: SIM108 (a constexpr branch)
        pages = gl.where(tok < BLOCK_SIZE, pg0, pg1)
    else:
        pages = pg0
    row = pages * stride_kb + (key % BLOCK_SIZE) * stride_kt + (rn % HP) * stride_kh
    cp.async_copy_global_to_shared(buf, base + row[:, None] + cd[None, :], mask=ok[:, None])


@gluon.jit
def _fp8t_update(q, kx, vx, k_scale, rel, span, sn, same_head, m_i, l_acc, acc,
                 E5M2: gl.constexpr, AOP: gl.constexpr, BOP: gl.constexpr, MMA: gl.constexpr,
                 LVT: gl.constexpr, K_SHAPE: gl.constexpr, K_ORDER: gl.constexpr,
                 V_SHAPE: gl.constexpr, V_ORDER: gl.constexpr, RANK: gl.constexpr,
                 HEAD: gl.constexpr, BLOCK_N: gl.constexpr, HP: gl.constexpr):
    """One tile of online softmax with swapped operands over FP8 per-tensor codes: the codes
    convert exactly to fp16 (paired converts), the static k scale multiplies the fp32 scores
    and the v scale is applied to the output once, at the end. With HP = 2 the rows alternate
    between two kv heads and ``same_head`` keeps each column's scores to its own head's rows."""
    k = gl.convert_layout(_relabel(_to_f16(kx, 1, E5M2), K_SHAPE, K_ORDER, RANK,
                                   [BLOCK_N, HEAD]), AOP)  # register renaming only
    v = gl.convert_layout(gl.permute(_v_pairs(vx, 1, E5M2, BLOCK_N, HEAD), (1, 0)), LVT)
    v = gl.convert_layout(_relabel(v, V_SHAPE, V_ORDER, RANK, [HEAD, BLOCK_N]), AOP,
                          assert_trivial=True)
    ok_s = (sn // HP + rel).to(gl.uint32) < span
    s = mma_v2(k, q, gl.zeros([BLOCK_N, 8], gl.float32, layout=MMA))
    if HP == 1:
        s = gl.where(ok_s[:, None], s * k_scale, float("-inf"))
    else:
        s = gl.where(ok_s[:, None] & same_head, s * k_scale, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=0))
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m_i - m_use)
    p = gl.exp2(s - m_use[None, :])
    l_acc = l_acc * alpha[None, :] + p
    acc = mma_v2(v, _transpose_p(p.to(gl.float16), BLOCK_N, BOP), acc * alpha[None, :])
    return m_new, l_acc, acc


@gluon.jit(do_not_specialize=["num_splits"])
def _gluon_fp8t_kernel(
    q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh, po_ptr, pml_ptr, cnt_ptr,
    k_ptr, v_ptr, stride_kb, stride_kh, stride_kt,
    bt_ptr, stride_bt, seq_lens_ptr, q_scale, k_scale, v_scale, sliding_window, num_q_heads,
    num_splits,
    GROUP: gl.constexpr, HEAD: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_SIZE: gl.constexpr,
    HP: gl.constexpr, E5M2: gl.constexpr, SPLIT: gl.constexpr, PIPE: gl.constexpr,
    TRIGGER: gl.constexpr, MERGE: gl.constexpr, MG: gl.constexpr, MDC: gl.constexpr,
    LM: gl.constexpr,
    MMA: gl.constexpr, AOP: gl.constexpr, BOP: gl.constexpr, LQ: gl.constexpr,
    LK: gl.constexpr, LV_LOAD: gl.constexpr, LVT: gl.constexpr, Q_SHAPE: gl.constexpr,
    Q_ORDER: gl.constexpr, K_SHAPE: gl.constexpr, K_ORDER: gl.constexpr, V_SHAPE: gl.constexpr,
    V_ORDER: gl.constexpr, RANK: gl.constexpr, LCK: gl.constexpr, LCV: gl.constexpr,
    SKR: gl.constexpr, SVR: gl.constexpr, PV_BITS: gl.constexpr,
):
    """Decode over an FP8 per-tensor cache (K and V planes [blocks, slots, kv heads, HEAD] of
    1-byte codes): the swapped-operand math of `_gluon_swap_kernel` (BLOCK_N rows as the MMA
    rows, up to 8 query heads as the columns, d bit-permuted so that each thread's K and V bytes
    are contiguous) fed by row copies as in `_gluon_bf16_kernel`. A program takes HP adjacent
    kv heads (HP * GROUP <= 8 columns): with HP = 2 its rows alternate between the two heads and
    a tile is BLOCK_N // 2 tokens of 2 * HEAD contiguous bytes each. The row buffers keep each
    thread's 8 K bytes / 4 V bytes together and the lanes side by side (`_fp8t_layouts`)."""
    TOK: gl.constexpr = BLOCK_N // HP  # tokens per tile
    seq, kvh, split, lo, s_lo, s_hi, bt_row, k_base, v_base = _program_range(
        seq_lens_ptr, sliding_window, num_splits, bt_ptr, stride_bt, k_ptr, stride_kh * HP, v_ptr,
        stride_kh * HP, TOK)
    TWO_PAGES: gl.constexpr = TOK > BLOCK_SIZE
    kn = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, LCK))
    kd = gl.arange(0, HEAD, layout=gl.SliceLayout(0, LCK))
    vn = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, LCV))
    vd = gl.arange(0, HEAD, layout=gl.SliceLayout(0, LCV))
    bufs = _fp8t_ring(HEAD, BLOCK_N, SKR, SVR, PIPE)
    for i in gl.static_range(PIPE - 1):
        start = s_lo + i * TOK
        pg0, pg1 = _tile_pages(bt_row, start, s_hi, BLOCK_SIZE, TWO_PAGES)
        _fp8t_issue(start, lo, s_hi, pg0, pg1, k_base, stride_kb, stride_kt, stride_kh, kn, kd,
                    bufs[i][0], BLOCK_SIZE, TOK, HP)
        _fp8t_issue(start, lo, s_hi, pg0, pg1, v_base, stride_kb, stride_kt, stride_kh, vn, vd,
                    bufs[i][1], BLOCK_SIZE, TOK, HP)
        cp.commit_group()
    pg0, pg1 = _tile_pages(bt_row, s_lo + (PIPE - 1) * TOK, s_hi, BLOCK_SIZE, TWO_PAGES)
    if TRIGGER:  # the merge kernel (a programmatic dependent launch) may start now and wait
        tl.extra.cuda.gdc_launch_dependents()

    # q^T [HEAD physical, 8 = the query heads of the program's kv heads], relabelled to the B
    # operand
    COLS: gl.constexpr = GROUP * HP
    qd = gl.arange(0, HEAD, layout=gl.SliceLayout(1, LQ))
    qh = gl.arange(0, 8, layout=gl.SliceLayout(0, LQ))
    q_row = seq.to(gl.int64) * stride_qt + (kvh * COLS + qh) * stride_qh
    qmask = (qd < HEAD)[:, None] & (qh < COLS)[None, :]
    q = gl.load(q_ptr + q_row[None, :] + qd[:, None], mask=qmask, other=0.0).to(gl.float32)
    q = gl.minimum(gl.maximum(q * q_scale, -65504.0), 65504.0).to(gl.float16)
    q = gl.convert_layout(_relabel(q, Q_SHAPE, Q_ORDER, RANK, [HEAD, 8]), BOP, assert_trivial=True)

    sn = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, MMA))
    cols = gl.arange(0, 8, layout=gl.SliceLayout(0, MMA))
    same_head = (sn % HP)[:, None] == (cols // GROUP)[None, :]
    span = (s_hi - lo).to(gl.uint32)
    m_i = gl.full([8], float("-inf"), gl.float32, layout=gl.SliceLayout(0, MMA))
    l_acc = gl.zeros([BLOCK_N, 8], gl.float32, layout=MMA)
    acc = gl.zeros([HEAD, 8], gl.float32, layout=MMA)
    for t0 in range(s_lo, s_hi, PIPE * TOK):  # whole rounds of PIPE tiles (static stages)
        for j in gl.static_range(PIPE):
            start = t0 + j * TOK
            ahead = start + (PIPE - 1) * TOK
            wb = bufs[(j + PIPE - 1) % PIPE]
            _fp8t_issue(ahead, lo, s_hi, pg0, pg1, k_base, stride_kb, stride_kt, stride_kh, kn,
                        kd, wb[0], BLOCK_SIZE, TOK, HP)
            _fp8t_issue(ahead, lo, s_hi, pg0, pg1, v_base, stride_kb, stride_kt, stride_kh, vn,
                        vd, wb[1], BLOCK_SIZE, TOK, HP)
            cp.commit_group()
            pg0, pg1 = _tile_pages(bt_row, ahead + TOK, s_hi, BLOCK_SIZE, TWO_PAGES)
            cp.wait_group(PIPE - 1)
            kx = bufs[j][0].load(LK)
            vx = bufs[j][1].load(LV_LOAD)
            m_i, l_acc, acc = _fp8t_update(q, kx, vx, k_scale, start - lo, span, sn, same_head,
                                           m_i, l_acc, acc, E5M2, AOP, BOP, MMA, LVT, K_SHAPE,
                                           K_ORDER, V_SHAPE, V_ORDER, RANK, HEAD, BLOCK_N, HP)
    cp.wait_group(0)

    l_i = gl.sum(l_acc, axis=0)
    acc = acc * v_scale
    rows = gl.arange(0, HEAD, layout=gl.SliceLayout(1, MMA))
    d_out = rows * 0  # output row r (logical d) holds physical d: bit i of r -> digit i of PV_BITS
    for i in gl.static_range(RANK - 1):
        d_out += ((rows >> i) & 1) << (PV_BITS // (1 << (4 * i)) % 16)
    _store_swapped(acc, m_i, l_i, seq, kvh, split, rows, cols, d_out, o_ptr, stride_ot,
                   stride_oh, po_ptr, pml_ptr, cnt_ptr, num_q_heads, num_splits, COLS, HEAD,
                   SPLIT, MERGE, MG, MDC, LM)

# fp32 partial elements a one-warp program merges per pass of the fused merge (64 registers a
# lane for the partials of a pass)
MERGE_ELEMS = 2048


@functools.cache
def merge_kw(cols: int, head: int, splits_pad: int) -> dict:
    """Constexprs of the fused split-K merge (`_merge_last`) of a one-warp program whose
    ``cols`` query heads are split ``splits_pad`` ways (a power of two; 0: the merge kernel runs
    instead): passes of [MG, MERGE, MDC] partial elements, MDC columns at a time."""
    mg = 1 << max(cols - 1, 0).bit_length()
    s = max(splits_pad, 1)
    mdc = min(head, max(16, MERGE_ELEMS // (mg * s)))
    td = min(32, mdc // 4)
    return dict(MERGE=splits_pad, MG=mg, MDC=mdc,
                LM=gl.BlockedLayout([1, 1, 4], [1, 32 // td, td], [1, 1, 1], [2, 1, 0]))


@functools.cache
def _bf16_layouts(head: int) -> dict:
    """Layouts of the bf16/fp16 kernel (one warp): the mma.sync m16n8k16 operand layouts; 16-byte
    rows chunks for the copies; a 128-byte swizzle (16-byte vectors, 8 phases), which keeps the
    copies and the ldmatrix reads (plain and transposed) free of bank conflicts."""
    mma = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, 1], instr_shape=[16, 8])
    per_row = head // 8  # 16-byte chunks per row
    return dict(MMA=mma, AOP=gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2),
                BOP=gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2),
                LC=gl.BlockedLayout([1, 8], [32 // per_row, per_row], [1, 1], [1, 0]),
                LQ=gl.BlockedLayout([8, 1], [4, 8], [1, 1], [0, 1]),
                SKV=gl.SwizzledSharedLayout(8, 1, 8, [1, 0]))


def bf16_supported(group: int, head: int, block_size: int, block_n: int = 32) -> bool:
    """The bf16/fp16 kernel: GQA groups of up to 8 heads, heads of 64-256, tiles of 16-64 keys
    spanning at most two pages (power-of-two block sizes)."""
    return (1 <= group <= 8 and head in (64, 128, 256) and block_n in (16, 32, 64)
            and block_size & (block_size - 1) == 0 and block_n <= 2 * block_size)


@functools.cache
def _bf16_kernel_kw(group: int, head: int, block_size: int, block_n: int, pipe: int, split: bool,
                    trigger: bool, merge: int) -> dict:
    """The constexprs of one bf16/fp16 kernel configuration (built once: `launch_cached` keys on
    the arguments)."""
    return dict(GROUP=group, HEAD=head, BLOCK_N=block_n, BLOCK_SIZE=block_size, SPLIT=split,
                PIPE=pipe, TRIGGER=trigger, num_warps=1, **_bf16_layouts(head),
                **merge_kw(group, head, merge))


def _bf16_launch_args(query, out, po, pml, args, block_tables, seq_lens, group: int, head: int,
                      block_size: int, q_scale: float, sliding_window: int, num_splits: int,
                      block_n: int, pipe: int, pdl: bool = False, cnt: torch.Tensor | None = None,
                      merge: int = 0) -> tuple[tuple, dict, tuple]:
    if not bf16_supported(group, head, block_size, block_n) or pipe not in (2, 3, 4):
        raise ValueError(f"the bf16/fp16 Gluon kernel takes GQA groups of up to 8 heads, heads of "
                         f"64-256, 16/32/64-key tiles of at most two pages of a power-of-two "
                         f"block size and 2-4 stages, got group {group}, head {head}, block size "
                         f"{block_size}, block_n {block_n}, pipe {pipe}")
    k, v = args.k, args.v
    ks = k.stride()
    if ks != v.stride() or ks[-1] != 1:
        raise ValueError("the bf16/fp16 Gluon kernel reads K and V planes of one layout")
    pos = (query, query.stride(0), query.stride(1), out, out.stride(0), out.stride(1), po, pml,
           po if cnt is None else cnt, k, v, ks[0], ks[2], ks[1],
           block_tables, block_tables.stride(0), seq_lens, q_scale, sliding_window, query.shape[1],
           num_splits)
    merge = merge if num_splits > 1 else 0
    key = ("bf16", group, head, block_size, block_n, pipe, num_splits > 1,
           pdl and num_splits > 1 and not merge, merge)
    return pos, _bf16_kernel_kw(*key[1:]), key


def launch_bf16(query, out, po, pml, args, block_tables, seq_lens, *, group: int, head: int,
                block_size: int, q_scale: float, sliding_window: int, num_splits: int,
                block_n: int = 32, pipe: int = 2, pdl: bool = False,
                cnt: torch.Tensor | None = None, merge: int = 0) -> None:
    """Launch the bf16/fp16 decode kernel: grid (sequences, kv heads, splits), one warp each
    (a cached launch: `kvplan.runtime._common.launch_cached`). ``merge`` (with ``cnt``, zeroed
    int32 counters, one per sequence and kv head): the splits merge inside the kernel."""
    pos, kw, key = _bf16_launch_args(query, out, po, pml, args, block_tables, seq_lens, group,
                                     head, block_size, q_scale, sliding_window, num_splits,
                                     block_n, pipe, pdl, cnt, merge)
    launch_cached(_gluon_bf16_kernel, (seq_lens.shape[0], args.k.shape[2], num_splits), pos, kw,
                  key)


@functools.cache
def _fp8t_layouts(head: int, block_n: int) -> dict:
    """Layouts of the FP8 per-tensor kernel (one warp): the swapped-operand operand layouts with
    the lanes' d bits fixed, and one row buffer layout [BLOCK_N, HEAD] for K and V: rows of
    HEAD bytes one after another, each row's 16-byte chunks XOR-swizzled by key bits (heads
    128/256: chunk bits d4-d6 by keys 0-2; head 64: d4, d5 by keys 1, 2).

    Copies put a row's consecutive chunks on consecutive lanes: every 8 lanes copy 128
    contiguous bytes (whole 128-byte lines at heads 128/256, one L2 request of 4 sectors each;
    Nsight Compute, round 16: lanes that jumped between rows after 32 bytes made one request per
    sector, 4x the L2 requests, and ran at 80% of the per-token-head kernel's bandwidth), and
    the swizzle keeps those 8 lanes' chunks on distinct banks. Reads: K (8 bytes a lane) on the
    lanes d3 and d6 (head 64: d5) besides keys 0-2, V (4 bytes) on d2-d4 besides keys 1, 2:
    the fewest wavefronts per instruction (V at head 64: two, a 64-byte row leaves bit 6 to key
    0)."""
    L, NB = _bits(head), _bits(block_n)
    assert L >= 5 and NB >= 4
    k_lanes = (3, 6) if head >= 128 else (3, 5)
    sw = _swap_layouts(head, block_n, (k_lanes, (2, 3, 4)))
    flips = {0: 4, 1: 5, 2: 6} if head >= 128 else {1: 4, 2: 5}  # key bit -> d bit it flips

    def d(j: int) -> list[int]:
        return [0, 1 << j]

    def k(j: int) -> list[int]:
        return [1 << j, (1 << flips[j]) if j in flips else 0]

    shared = gl.SharedLinearLayout([d(j) for j in range(L)] + [k(j) for j in range(NB)])
    order = [d(j) for j in range(4, L)] + [[1 << j, 0] for j in range(NB)]  # chunks, then rows
    copy = gl.DistributedLinearLayout(
        reg_bases=[d(j) for j in range(4)] + order[5:], lane_bases=order[:5], warp_bases=[],
        block_bases=[], shape=[block_n, head])
    return dict(MMA=sw["MMA"], AOP=sw["AOP"], BOP=sw["BOP"], LQ=sw["LQ"], LK=sw["LK"],
                LV_LOAD=sw["LV_LOAD"], LVT=sw["LVT"], Q_SHAPE=sw["Q_SHAPE"],
                Q_ORDER=sw["Q_ORDER"], K_SHAPE=sw["K_SHAPE"], K_ORDER=sw["K_ORDER"],
                V_SHAPE=sw["V_SHAPE"], V_ORDER=sw["V_ORDER"], RANK=sw["RANK"], LCK=copy, LCV=copy,
                SKR=shared, SVR=shared, PV_BITS=sw["PV_BITS"])


def fp8t_supported(group: int, head: int, block_size: int, block_n: int = 16,
                   heads_per_program: int = 1, num_kv_heads: int = 1) -> bool:
    """The FP8 per-tensor kernel: GQA groups of up to 8 query heads per program (``group``
    times ``heads_per_program`` kv heads, 1 or 2, dividing ``num_kv_heads``), heads of 64-256,
    tiles of 16 or 32 rows spanning at most two pages of a power-of-two block size of at least
    16 slots."""
    hp = heads_per_program
    return (hp in (1, 2) and 1 <= group * hp <= 8 and num_kv_heads % hp == 0
            and head in (64, 128, 256) and block_n in (16, 32)
            and block_size >= 16 and block_size & (block_size - 1) == 0
            and block_n // hp <= 2 * block_size)


@functools.cache
def _fp8t_kernel_kw(group: int, head: int, block_size: int, block_n: int, pipe: int, hp: int,
                    e5m2: bool, split: bool, trigger: bool, merge: int) -> dict:
    """The constexprs of one FP8 per-tensor kernel configuration (built once)."""
    return dict(GROUP=group, HEAD=head, BLOCK_N=block_n, BLOCK_SIZE=block_size, HP=hp,
                E5M2=e5m2, SPLIT=split, PIPE=pipe, TRIGGER=trigger, num_warps=1,
                **_fp8t_layouts(head, block_n), **merge_kw(group * hp, head, merge))


def _fp8t_launch_args(query, out, po, pml, args, block_tables, seq_lens, group: int, head: int,
                      block_size: int, q_scale: float, k_scale: float, v_scale: float,
                      sliding_window: int, num_splits: int, block_n: int, pipe: int,
                      pdl: bool = False, hp: int = 1, cnt: torch.Tensor | None = None,
                      merge: int = 0) -> tuple[tuple, dict, tuple]:
    if (not fp8t_supported(group, head, block_size, block_n, hp, args.k.shape[2])
            or pipe not in (2, 3, 4)):
        raise ValueError(f"the FP8 per-tensor Gluon kernel takes up to 8 query heads per "
                         f"program (GQA group x 1 or 2 kv heads), heads of 64-256, 16/32-row "
                         f"tiles of at most two pages of a power-of-two block size of 16 or "
                         f"more and 2-4 stages, got group {group}, {hp} kv heads per program, "
                         f"head {head}, block size {block_size}, block_n {block_n}, pipe {pipe}")
    k, v = args.k, args.v
    ks = k.stride()
    if ks != v.stride() or ks[-1] != 1 or k.element_size() != 1:
        raise ValueError("the FP8 per-tensor Gluon kernel reads K and V planes of 1-byte codes "
                         "of one layout")
    pos = (query, query.stride(0), query.stride(1), out, out.stride(0), out.stride(1), po, pml,
           po if cnt is None else cnt, k, v, ks[0], ks[2], ks[1],
           block_tables, block_tables.stride(0), seq_lens, q_scale, k_scale, v_scale,
           sliding_window, query.shape[1], num_splits)
    merge = merge if num_splits > 1 else 0
    key = ("fp8t", group, head, block_size, block_n, pipe, hp, bool(args.FP8_E5M2),
           num_splits > 1, pdl and num_splits > 1 and not merge, merge)
    return pos, _fp8t_kernel_kw(*key[1:]), key


def launch_fp8t(query, out, po, pml, args, block_tables, seq_lens, *, group: int, head: int,
                block_size: int, q_scale: float, k_scale: float, v_scale: float,
                sliding_window: int, num_splits: int, block_n: int = 16, pipe: int = 2,
                pdl: bool = False, hp: int = 1, cnt: torch.Tensor | None = None,
                merge: int = 0) -> None:
    """Launch the FP8 per-tensor decode kernel: grid (sequences, kv heads / ``hp``, splits),
    one warp each (a cached launch: `kvplan.runtime._common.launch_cached`); ``merge`` and
    ``cnt`` as in `launch_bf16`."""
    pos, kw, key = _fp8t_launch_args(query, out, po, pml, args, block_tables, seq_lens, group,
                                     head, block_size, q_scale, k_scale, v_scale,
                                     sliding_window, num_splits, block_n, pipe, pdl, hp, cnt,
                                     merge)
    launch_cached(_gluon_fp8t_kernel, (seq_lens.shape[0], args.k.shape[2] // hp, num_splits),
                  pos, kw, key)


def _bits(n: int) -> int:
    b = n.bit_length() - 1
    assert 1 << b == n, n
    return b


def _pack(order: list[int]) -> int:
    return sum(a << (4 * i) for i, a in enumerate(order))


@functools.cache
def _layouts(head: int, block_n: int, pipe: int = 0) -> dict:
    """Layouts (one warp) and the d bit permutations of the three operands.

    mma.sync m16n8k16 operand layouts (Gluon's linear forms, lane = 4g + t): A [16, K]: registers
    k0, m3, k3, k4..; lanes k1, k2, m0..m2. B [K, N]: registers k0, k3, k4.. (K repeats), n3..
    (N repeats); lanes k1, k2, n0..n2. C [16, N]: registers n0, m3, n3..; lanes n1, n2, m0..m2.
    q·K permutes d (the K index of both operands) with physical bits
    p0 = d0, p1 = d3, p2 = d4, p3 = d1, p4 = d2, p5.. = d5..; P·V permutes the output d (N of B)
    with p0 = n3, p1 = n4, p2..p4 = n0..n2, p5.. = n5...
    """
    L, NB = _bits(head), _bits(block_n)
    assert L >= 5 and NB >= 4
    mma = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, 1], instr_shape=[16, 8])
    aop = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    bop = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2)
    hi = [1 << j for j in range(5, L)]  # physical bits 5.. (= logical bits 5..)
    # q [16, HEAD physical]: the A operand with its k bits mapped to physical d
    lq = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [8, 0], [0, 2], [0, 4]] + [[0, h] for h in hi],
        lane_bases=[[0, 8], [0, 16], [1, 0], [2, 0], [4, 0]], warp_bases=[], block_bases=[],
        shape=[16, head])
    # K^T [HEAD physical, BLOCK_N]: the B operand (k = d)
    lk = gl.DistributedLinearLayout(
        reg_bases=[[1, 0], [2, 0], [4, 0]] + [[h, 0] for h in hi] + [[0, 1 << j] for j in range(3, NB)],
        lane_bases=[[8, 0], [16, 0], [0, 1], [0, 2], [0, 4]], warp_bases=[], block_bases=[],
        shape=[head, block_n])
    # V [BLOCK_N, HEAD physical]: the B operand (k = key, n = d); loaded with the 4 contiguous
    # bytes first, then reordered in registers to the operand's register order
    key_regs = [[1, 0]] + [[1 << j, 0] for j in range(3, NB)]
    lv = gl.DistributedLinearLayout(
        reg_bases=key_regs + [[0, 1], [0, 2]] + [[0, h] for h in hi],
        lane_bases=[[2, 0], [4, 0], [0, 4], [0, 8], [0, 16]], warp_bases=[], block_bases=[],
        shape=[block_n, head])
    lv_load = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2]] + key_regs + [[0, h] for h in hi],
        lane_bases=[[2, 0], [4, 0], [0, 4], [0, 8], [0, 16]], warp_bases=[], block_bases=[],
        shape=[block_n, head])

    # logical bit i of d -> physical bit
    qk_map = {0: 0, 1: 3, 2: 4, 3: 1, 4: 2, **{j: j for j in range(5, L)}}
    pv_map = {0: 2, 1: 3, 2: 4, 3: 0, 4: 1, **{j: j for j in range(5, L)}}
    qs, qo = _bit_order([qk_map[i] for i in range(L)], L, 1, 0)
    ks, ko = _bit_order([qk_map[i] for i in range(L)], L, 0, 1)
    vs, vo = _bit_order([pv_map[i] for i in range(L)], L, 1, 0)
    # shared layouts of the copy ring [stage, tile]: each thread's contiguous vector first, then
    # the 32 lanes, then the thread's other registers, then the stage (bank-conflict free, and
    # every thread reads back only what it copied)
    def ring(vec: list, lanes: list, regs: list) -> gl.SharedLinearLayout:
        return gl.SharedLinearLayout([list(b) for b in vec + lanes + regs])

    sk = ring(lk.reg_bases[:3], lk.lane_bases, lk.reg_bases[3:])
    sv = ring(lv_load.reg_bases[:2], lv_load.lane_bases, lv_load.reg_bases[2:])
    ss = ring([[1 << j] for j in range(NB)], [], [])
    return dict(MMA=mma, AOP=aop, BOP=bop, LQ=lq, LK=lk, LV_LOAD=lv_load, LV=lv,
                SK=sk, SV=sv, SS=ss, LS=gl.BlockedLayout([1], [32], [1], [0]),
                Q_SHAPE=tuple([16, *qs]), Q_ORDER=_pack(qo), K_SHAPE=tuple([*ks, block_n]),
                K_ORDER=_pack(ko), V_SHAPE=tuple([block_n, *vs]), V_ORDER=_pack(vo), RANK=L + 1)


@functools.cache
def _swap_layouts(head: int, block_n: int, lanes: tuple | None = None) -> dict:
    """Layouts of the swapped-operand kernel (one warp; lane = 4g + t; coordinates physical d).

    S^T = K q^T: K [BLOCK_N, HEAD] is the A operand (registers k0, m3, k3.., then the keys past
    16; lanes k1, k2, m0..m2), q^T [HEAD, 8] the B operand. The MMA's reduction index (logical
    d) is a bit permutation ``qk`` of physical d with k0, k3, k4 -> physical bits 0-2, so a
    thread's K values are 8 contiguous bytes. O^T += V^T P^T: V^T [HEAD, BLOCK_N] is the A
    operand (registers key0, d3, key8, (key16..), d4, d5..; lanes key1, key2, d0..d2); its
    output index is a permutation ``pv`` with d3, d4 -> physical bits 0, 1 (4 contiguous bytes
    per key), undone when the output is stored.

    The bits the lanes take (qk 1, 2 and pv 0-2) are free: tiles are copied as raw bytes and
    read through padded views of pitch 2 * HEAD + 8, so they are the bits with the fewest
    shared-memory wavefronts in that pitch (`_flat_lane_bits`), unless ``lanes`` gives them
    (the FP8 per-tensor kernel's row buffers: `_fp8t_layouts`)."""
    L, NB = _bits(head), _bits(block_n)
    assert L >= 5 and NB >= 4
    base = _layouts(head, 16, 0)
    keys_hi = [1 << j for j in range(4, NB)]
    k_lanes, v_lanes = lanes if lanes is not None else _flat_lane_bits(head)
    qk = _bit_map({0: 0, 3: 1, 4: 2, 1: k_lanes[0], 2: k_lanes[1]}, L)
    pv = _bit_map({3: 0, 4: 1, 0: v_lanes[0], 1: v_lanes[1], 2: v_lanes[2]}, L)
    rest = range(5, L)
    lq = gl.DistributedLinearLayout(
        reg_bases=[[1 << qk[i], 0] for i in (0, 3, 4, *rest)],
        lane_bases=[[1 << qk[1], 0], [1 << qk[2], 0], [0, 1], [0, 2], [0, 4]], warp_bases=[],
        block_bases=[], shape=[head, 8])
    lk = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [0, 4], [8, 0]] + [[0, 1 << qk[i]] for i in rest]
        + [[k, 0] for k in keys_hi],
        lane_bases=[[0, 1 << qk[1]], [0, 1 << qk[2]], [1, 0], [2, 0], [4, 0]], warp_bases=[],
        block_bases=[], shape=[block_n, head])
    lv_load = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [1, 0], [8, 0]] + [[k, 0] for k in keys_hi]
        + [[0, 1 << pv[i]] for i in rest],
        lane_bases=[[2, 0], [4, 0]] + [[0, 1 << pv[i]] for i in range(3)], warp_bases=[],
        block_bases=[], shape=[block_n, head])
    lvt = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [1, 0], [0, 8]] + [[0, k] for k in keys_hi] + [[2, 0]]
        + [[1 << pv[i], 0] for i in rest],
        lane_bases=[[0, 2], [0, 4]] + [[1 << pv[i], 0] for i in range(3)], warp_bases=[],
        block_bases=[], shape=[head, block_n])

    # Copies: [chunks, 16 bytes] with one 16-byte chunk per lane and instruction (4 whole 128-byte
    # lines: the L2 request rate, not DRAM, bounded copies that put 8 keys on the lanes of an
    # instruction), stored unswizzled; K and V are read through [BLOCK_N, 2 * HEAD] views with 8
    # bytes of padding per row (pitch 2 * HEAD + 8), the scales through an fp32 [BLOCK_N, 2] view
    # with 32 words of padding per element (pitch (2 * HEAD + 8) / 8 words)
    pitch_words = (2 * head + 8) // 4
    lsc = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [8, 0]] + [[k, 0] for k in keys_hi],
        lane_bases=[[0, 0], [0, 0], [1, 0], [2, 0], [4, 0]], warp_bases=[], block_bases=[],
        shape=[block_n, 2])
    return dict(MMA=base["MMA"], AOP=base["AOP"], BOP=base["BOP"], LQ=lq, LK=lk,
                LV_LOAD=lv_load, LVT=lvt, **_swap_orders(qk, pv, L, block_n),
                LC=gl.BlockedLayout([1, 16], [32, 1], [1, 1], [1, 0]),
                RAW=gl.SwizzledSharedLayout(1, 1, 1, [1, 0]),
                FLAT1=gl.SwizzledSharedLayout(1, 1, 1, [0]),
                PKV=gl.PaddedSharedLayout.with_identity_for([[2 * head, 8]], [block_n, 2 * head],
                                                            [1, 0]),
                PSC=gl.PaddedSharedLayout.with_identity_for([[1, pitch_words // 2 - 1]],
                                                            [block_n, 2], [1, 0]),
                LSC=lsc)


def _swap_orders(qk: dict[int, int], pv: dict[int, int], L: int, block_n: int) -> dict:
    """The relabelling constexprs of the swapped-operand kernels: the reshape shapes and permute
    orders that turn q^T [HEAD, 8], K [BLOCK_N, HEAD] and V^T [HEAD, BLOCK_N] from physical d
    (bit permutations ``qk`` for q.K, ``pv`` for P.V: logical bit -> physical bit) into the
    MMA's logical order, and PV_BITS, the output's logical -> physical d digits."""
    qs, qo = _bit_order([qk[i] for i in range(L)], L, 0, 1)
    ks, ko = _bit_order([qk[i] for i in range(L)], L, 1, 0)
    vs, vo = _bit_order([pv[i] for i in range(L)], L, 0, 1)
    return dict(Q_SHAPE=tuple([*qs, 8]), Q_ORDER=_pack(qo), K_SHAPE=tuple([block_n, *ks]),
                K_ORDER=_pack(ko), V_SHAPE=tuple([*vs, block_n]), V_ORDER=_pack(vo), RANK=L + 1,
                PV_BITS=_pack([pv[i] for i in range(L)]))


@functools.cache
def _int4_layouts(head: int, block_n: int) -> dict:
    """Layouts of the swapped-operand kernel over INT4 slots (``head`` values, ``head // 2``
    bytes per K or V row; one warp). The MMA operands are `_swap_layouts`' with the physical
    index now the value index 2 * byte + nibble: q.K keeps k0, k3, k4 on physical bits 0-2 (a
    thread's 8 values = 4 contiguous bytes, the nibble in the fp16 pair of one register), P.V
    takes d3, d4, d5 onto physical bits 0-2 (4 contiguous bytes per key, nibble pairs of
    consecutive keys in one register). K and V are read as bytes (``LK``, ``LV_LOAD``:
    [BLOCK_N, head // 2]) through the raw-slot views of a ``head // 2`` 8-bit slot (pitch
    head + 8 bytes) on the lane bits `_int4_lane_bits` chooses. ``LQ2`` holds q with the two
    lane bits of ``LQ`` in registers (``QBITS``: the bits transformed there), ``LO2`` the output
    with row bits 0-2 in registers, for the Hadamard rotations."""
    L, NB = _bits(head), _bits(block_n)
    assert L >= 6 and NB >= 4
    hb = head // 2
    k_lanes, v_lanes = _int4_lane_bits(head)
    qk = _bit_map({0: 0, 3: 1, 4: 2, 1: k_lanes[0], 2: k_lanes[1]}, L)
    pv = _bit_map({3: 0, 4: 1, 5: 2, 0: v_lanes[0], 1: v_lanes[1], 2: v_lanes[2]}, L)
    keys_hi = [1 << j for j in range(4, NB)]
    rest_k, rest_v = range(5, L), range(6, L)
    lq = gl.DistributedLinearLayout(
        reg_bases=[[1 << qk[i], 0] for i in (0, 3, 4, *rest_k)],
        lane_bases=[[1 << qk[1], 0], [1 << qk[2], 0], [0, 1], [0, 2], [0, 4]], warp_bases=[],
        block_bases=[], shape=[head, 8])
    lq2 = gl.DistributedLinearLayout(
        reg_bases=[[1 << qk[i], 0] for i in (1, 2, 4, *rest_k)],
        lane_bases=[[1 << qk[0], 0], [1 << qk[3], 0], [0, 1], [0, 2], [0, 4]], warp_bases=[],
        block_bases=[], shape=[head, 8])
    lo2 = gl.DistributedLinearLayout(
        reg_bases=[[1, 0], [2, 0], [4, 0]] + [[1 << j, 0] for j in range(5, L)],
        lane_bases=[[0, 1], [0, 2], [0, 4], [8, 0], [16, 0]], warp_bases=[], block_bases=[],
        shape=[head, 8])
    lk = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [8, 0]] + [[0, 1 << (qk[i] - 1)] for i in rest_k]
        + [[k, 0] for k in keys_hi],
        lane_bases=[[0, 1 << (qk[1] - 1)], [0, 1 << (qk[2] - 1)], [1, 0], [2, 0], [4, 0]],
        warp_bases=[], block_bases=[], shape=[block_n, hb])
    lv_load = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [1, 0], [8, 0]] + [[k, 0] for k in keys_hi]
        + [[0, 1 << (pv[i] - 1)] for i in rest_v],
        lane_bases=[[2, 0], [4, 0]] + [[0, 1 << (pv[i] - 1)] for i in range(3)], warp_bases=[],
        block_bases=[], shape=[block_n, hb])
    lvt = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [1, 0], [0, 8]] + [[0, k] for k in keys_hi] + [[2, 0], [4, 0]]
        + [[1 << pv[i], 0] for i in rest_v],
        lane_bases=[[0, 2], [0, 4]] + [[1 << pv[i], 0] for i in range(3)], warp_bases=[],
        block_bases=[], shape=[head, block_n])
    raw = _swap_layouts(hb, block_n)  # the copies and raw-slot views of a head // 2 byte slot
    return dict(MMA=raw["MMA"], AOP=raw["AOP"], BOP=raw["BOP"], LQ=lq, LK=lk, LV_LOAD=lv_load,
                LVT=lvt, **_swap_orders(qk, pv, L, block_n), LC=raw["LC"], RAW=raw["RAW"],
                FLAT1=raw["FLAT1"], PKV=raw["PKV"], PSC=raw["PSC"], LSC=raw["LSC"], HB=hb,
                LQ2=lq2, LO2=lo2, QBITS=(head - 1) & ~((1 << qk[0]) | (1 << qk[3])),
                ROT=float(head) ** -0.5)


@functools.cache
def _int4_lane_bits(head: int) -> tuple[tuple[int, int], tuple[int, int, int]]:
    """Physical value bits on the lanes of the INT4 reads (K: lanes t0, t1; V: lanes g0..g2),
    each lane reading 4 contiguous bytes of a raw slot of pitch head + 8 bytes, chosen for the
    fewest shared-memory wavefronts over every register of a 16-key tile (value bit b is byte
    bit b - 1; value bits 0-2 are a lane's own 4 bytes)."""
    L, pitch = _bits(head), head + 8
    byte_bits = range(2, L - 1)

    def k_cost(c: tuple) -> int:  # lanes t0, t1: bytes; g0..g2: keys 0-7; registers: key 8
        return _read_cost([1 << c[0], 1 << c[1], pitch, 2 * pitch, 4 * pitch],
                          [8 * pitch] + [1 << b for b in byte_bits if b not in c])

    def v_cost(c: tuple) -> int:  # lanes t0, t1: keys 2, 4; g0..g2: bytes; registers: keys 1, 8
        return _read_cost([2 * pitch, 4 * pitch] + [1 << b for b in c],
                          [pitch, 8 * pitch] + [1 << b for b in byte_bits if b not in c],
                          head // 2 + 4)

    k = min(itertools.combinations(byte_bits, 2), key=k_cost)
    v = min(itertools.combinations(byte_bits, 3), key=v_cost)
    return (k[0] + 1, k[1] + 1), (v[0] + 1, v[1] + 1, v[2] + 1)


def _read_cost(lane_offsets: list[int], reg_offsets: list[int], base: int = 0) -> int:
    """Shared-memory wavefronts of 4-byte reads summed over every register combination: lane
    bit i adds ``lane_offsets[i]`` bytes, register bit j ``reg_offsets[j]``."""
    total = 0
    for r in range(1 << len(reg_offsets)):
        at = base + sum(o for j, o in enumerate(reg_offsets) if r >> j & 1)
        total += _wavefronts([at + sum(o for i, o in enumerate(lane_offsets) if ln >> i & 1)
                              for ln in range(32)], 4)
    return total


def _bit_map(fixed: dict[int, int], bits: int) -> dict[int, int]:
    """Logical bit -> physical bit: ``fixed``, then the other logical bits in order onto the
    other physical bits in order."""
    free = [b for b in range(bits) if b not in fixed.values()]
    rest = [i for i in range(bits) if i not in fixed]
    return {**fixed, **dict(zip(rest, free, strict=False))}


def _wavefronts(addresses: list[int], width: int) -> int:
    """Shared-memory wavefronts of one warp access (32 banks of 4 bytes): the most distinct
    words any bank serves; ``width`` bytes per lane."""
    banks: dict[int, set[int]] = {}
    for a in addresses:
        for w in range(a // 4, (a + width) // 4):
            banks.setdefault(w % 32, set()).add(w)
    return max(len(words) for words in banks.values())


@functools.cache
def _flat_lane_bits(head: int) -> tuple[tuple[int, int], tuple[int, int, int]]:
    """Physical d bits on the lanes (K: lanes t0, t1; V: lanes g0..g2) that read raw slots of
    pitch 2 * head + 8 bytes in the fewest wavefronts, over every register of a 16-key tile.
    Heads 128/256: conflict-free; head 64 (a 136-byte pitch) cannot be: 2 wavefronts a read."""
    L, pitch = _bits(head), 2 * head + 8

    def k_cost(lanes):
        other = [b for b in range(3, L) if b not in lanes]
        total = 0
        for r in range(1 << (len(other) + 1)):
            d0 = sum((r >> i & 1) << b for i, b in enumerate(other))
            n0 = 8 * (r >> len(other))
            total += _wavefronts([(n0 + (ln >> 2)) * pitch + d0 + ((ln & 1) << lanes[0])
                                  + ((ln >> 1 & 1) << lanes[1]) for ln in range(32)], 8)
        return total

    def v_cost(lanes):
        other = [b for b in range(2, L) if b not in lanes]
        total = 0
        for r in range(1 << (len(other) + 2)):
            d0 = sum((r >> i & 1) << b for i, b in enumerate(other))
            n0 = 8 * (r >> len(other) + 1) + (r >> len(other) & 1)
            total += _wavefronts([(n0 + 2 * (ln & 3)) * pitch + head + 4 + d0
                                  + sum((ln >> 2 + i & 1) << lanes[i] for i in range(3))
                                  for ln in range(32)], 4)
        return total

    k = min(itertools.combinations(range(3, L), 2), key=k_cost)
    v = min(itertools.combinations(range(2, L), 3), key=v_cost)
    return k, v


def _bit_order(phys_of_logical: list[int], bits: int, lead: int,
               trail: int) -> tuple[list[int], list[int]]:
    """reshape shape and permute order that turn physical-bit axes into logical-bit axes
    (big-endian bit axes, ``lead`` axes before them, ``trail`` after)."""
    shape = [2] * bits
    pos = {j: lead + (bits - 1 - j) for j in range(bits)}  # physical bit j -> reshaped axis
    perm = list(range(lead)) + [pos[phys_of_logical[i]] for i in range(bits - 1, -1, -1)] + \
        [lead + bits + t for t in range(trail)]
    return shape, perm


@functools.cache
def _kernel_kw(group: int, head: int, block_size: int, block_n: int, prefetch: bool, pipe: int,
               swap: bool, split: bool, trigger: bool, traced: bool, slot: tuple,
               merge: int = 0) -> dict:
    """The constexprs of one INT8/FP8 kernel configuration (built once: `launch_cached` keys on
    the arguments). ``slot``: the cache's (STRIDE_S, SCALE_STRIDE_S, V_OFF, KS_OFF, VS_OFF,
    KV_MODE, FP8_E5M2)."""
    stride_s, scale_stride_s, v_off, ks_off, vs_off, kv_mode, e5m2 = slot
    kw = dict(GROUP=group, HEAD=head, BLOCK_N=block_n, BLOCK_SIZE=block_size,
              STRIDE_S=stride_s, SCALE_STRIDE_S=scale_stride_s, V_OFF=v_off,
              KS_OFF=ks_off, VS_OFF=vs_off, KV_MODE=kv_mode, E5M2=e5m2,
              SPLIT=split, PIPE=pipe, num_warps=1)
    if swap:
        # the ring: PIPE tiles back to back, rounded up to a power of two (shared allocations
        # must have power-of-two shapes)
        ring = 1 << (pipe * block_n * stride_s - 1).bit_length()
        layouts = (_int4_layouts(head, block_n) if kv_mode == KV_MODE_INT4_PTH else
                   dict(_swap_layouts(head, block_n), HB=head, LQ2=None, LO2=None, QBITS=0,
                        ROT=1.0))
        kw.update(layouts, RING_BYTES=ring, TRIGGER=trigger, TRACE=traced,
                  **merge_kw(group, head, merge))
    else:
        kw.update(PREFETCH=prefetch, **_layouts(head, block_n, pipe))
    return kw


def _launch_args(query, out, po, pml, args, block_tables, seq_lens, group: int, head: int,
                 block_size: int, q_scale: float, sliding_window: int, num_splits: int,
                 block_n: int, prefetch: bool, pipe: int, swap: bool,
                 pdl: bool = False, trace: torch.Tensor | None = None,
                 cnt: torch.Tensor | None = None, merge: int = 0) -> tuple[tuple, dict, tuple]:
    if args.KV_MODE == KV_MODE_INT4_PTH and not swap:
        raise ValueError("INT4 caches run the swapped-operand kernel only (swap=True)")
    if pipe not in ((2, 3, 4) if swap else (0, 2, 4)):
        raise ValueError(f"pipe must be 2, 3 or 4 with swapped operands, 0, 2 or 4 without, "
                         f"got {pipe}")
    if swap and not swap_supported(group, block_size, block_n, head):
        raise ValueError(f"swapped operands take GQA groups of up to 8 heads, heads of 64-256 and "
                         f"tiles of at most two pages, got group {group}, head {head}, block size "
                         f"{block_size}, block_n {block_n}")
    slot = (args.STRIDE_S, args.V_OFF, 4 * args.KS_OFF, 4 * args.VS_OFF)
    hb = head // 2 if args.KV_MODE == KV_MODE_INT4_PTH else head  # code bytes per K or V row
    if swap and slot != (2 * hb + 8, hb + 4, hb, 2 * hb + 4):
        # `_flat_read`'s padded views (pitch, V and scale spacing) are built for this slot
        raise ValueError(f"swapped operands read vLLM's per-token-head slot (K, k scale, V, "
                         f"v scale: {2 * hb + 8} bytes at head {head}), got slot bytes, V, k "
                         f"scale and v scale offsets {slot}")
    pos = (query, query.stride(0), query.stride(1), out, out.stride(0), out.stride(1), po, pml,
           po if cnt is None else cnt, args.k, args.s, args.stride_cb, args.stride_ch,
           args.stride_sb, args.stride_sh,
           block_tables, block_tables.stride(0), seq_lens, q_scale, sliding_window, query.shape[1],
           num_splits)
    if swap:
        pos += (query if trace is None else trace,)
    elif trace is not None:
        raise ValueError("only the swapped-operand kernel records a trace")
    merge = merge if (num_splits > 1 and swap) else 0  # the round-8 form keeps the merge kernel
    key = (group, head, block_size, block_n, bool(prefetch), pipe, bool(swap), num_splits > 1,
           bool(pdl and num_splits > 1 and not merge), trace is not None,
           (args.STRIDE_S, args.SCALE_STRIDE_S, args.V_OFF, args.KS_OFF, args.VS_OFF,
            args.KV_MODE, bool(args.FP8_E5M2)), merge)
    return pos, _kernel_kw(*key), key


def launch(query, out, po, pml, args, block_tables, seq_lens, *, group: int, head: int,
           block_size: int, q_scale: float, sliding_window: int, num_splits: int,
           block_n: int = 16, prefetch: bool = True, pipe: int = 2, swap: bool = True,
           pdl: bool = False, trace: torch.Tensor | None = None,
           cnt: torch.Tensor | None = None, merge: int = 0) -> None:
    """Launch the decode kernel: grid (sequences, kv heads, splits), one warp per program.
    ``pipe`` 2, 3 (swapped operands) or 4 streams tiles through a ring of that many shared-memory
    stages filled by asynchronous copies; 0 loads tiles into registers (``prefetch``: one tile
    ahead; round-8 form only). ``swap`` runs the swapped-operand kernel (keys as MMA rows; groups
    of up to 8 heads), which copies its tiles as raw bytes and reads them through padded shared
    views. ``pdl``: the split-K merge that follows is a programmatic dependent launch, which the
    swapped-operand kernel lets start once every program has issued its first copies. ``trace``
    (swapped operands only): an int64 tensor of 4 x programs that receives each program's start,
    first-tile and end times and multiprocessor (`_trace_store`; `bench/trace_decode.py`).
    The launch is cached per configuration (`kvplan.runtime._common.launch_cached`): after the
    first call an eager call is a dictionary lookup and the compiled kernel's launcher.
    ``merge`` (swapped operands; with ``cnt``, zeroed int32 counters, one per sequence and kv
    head): the splits merge inside the kernel (`_merge_last`), no merge kernel follows."""
    pos, kw, key = _launch_args(query, out, po, pml, args, block_tables, seq_lens, group, head,
                                block_size, q_scale, sliding_window, num_splits, block_n, prefetch,
                                pipe, swap, pdl, trace, cnt, merge)
    grid = (seq_lens.shape[0], args.k.shape[1], num_splits)
    launch_cached(_gluon_swap_kernel if swap else _gluon_decode_kernel, grid, pos, kw,
                  ("swap" if swap else "r8", *key))


_RESIDENT: dict[tuple, int] = {}


def programs_per_sm(query, out, args, block_tables, seq_lens, *, group: int, head: int,
                    block_size: int, block_n: int = 16, prefetch: bool = True,
                    pipe: int = 2, swap: bool = True) -> int:
    """How many one-warp programs of this configuration fit on one multiprocessor at once,
    from the compiled kernel's registers and shared memory (compiles it once; cached)."""
    key = (group, head, block_size, block_n, prefetch, pipe, swap, args.KV_MODE, args.FP8_E5M2,
           query.dtype, query.device.index)
    if key not in _RESIDENT:
        pos, kw, _ = _launch_args(query, out, out, out, args, block_tables, seq_lens, group,
                                  head, block_size, 1.0, 0, 1, block_n, prefetch, pipe, swap)
        fn = _gluon_swap_kernel if swap else _gluon_decode_kernel
        _RESIDENT[key] = _resident(fn.warmup(*pos, grid=(1,), **kw), query.device)
    return _RESIDENT[key]


def bf16_programs_per_sm(query, out, args, block_tables, seq_lens, *, group: int, head: int,
                         block_size: int, block_n: int = 32, pipe: int = 2) -> int:
    """`programs_per_sm` for the bf16/fp16 kernel."""
    key = ("bf16", group, head, block_size, block_n, pipe, args.k.dtype, query.dtype,
           query.device.index)
    if key not in _RESIDENT:
        pos, kw, _ = _bf16_launch_args(query, out, out, out, args, block_tables, seq_lens,
                                       group, head, block_size, 1.0, 0, 1, block_n, pipe)
        _RESIDENT[key] = _resident(_gluon_bf16_kernel.warmup(*pos, grid=(1,), **kw),
                                   query.device)
    return _RESIDENT[key]


def fp8t_programs_per_sm(query, out, args, block_tables, seq_lens, *, group: int, head: int,
                         block_size: int, block_n: int = 16, pipe: int = 2, hp: int = 1) -> int:
    """`programs_per_sm` for the FP8 per-tensor kernel."""
    key = ("fp8t", group, head, block_size, block_n, pipe, hp, args.FP8_E5M2, query.dtype,
           query.device.index)
    if key not in _RESIDENT:
        pos, kw, _ = _fp8t_launch_args(query, out, out, out, args, block_tables, seq_lens,
                                       group, head, block_size, 1.0, 1.0, 1.0, 0, 1, block_n,
                                       pipe, hp=hp)
        _RESIDENT[key] = _resident(_gluon_fp8t_kernel.warmup(*pos, grid=(1,), **kw),
                                   query.device)
    return _RESIDENT[key]

def _resident(kernel, device) -> int:
    """One-warp programs of a compiled kernel that fit on one multiprocessor at once (registers,
    shared memory, threads, the 32-block limit)."""
    kernel._init_handles()
    props = torch.cuda.get_device_properties(device)
    regs_per_warp = -(-max(kernel.n_regs, 1) * 32 // 256) * 256  # allocated in 256s
    regs = getattr(props, "regs_per_multiprocessor", 65536)
    smem = getattr(props, "shared_memory_per_multiprocessor", 228 << 10)
    threads = getattr(props, "max_threads_per_multi_processor", 2048)
    # each resident block also reserves 1 KB of shared memory
    by_smem = smem // (kernel.metadata.shared + 1024)
    return max(1, min(32, regs // regs_per_warp, by_smem, threads // 32))


def supported(group: int, head: int, block_size: int) -> bool:
    """Shapes the kernel handles: GQA groups up to 16 heads, power-of-two heads 32-256."""
    return 1 <= group <= 16 and head in (32, 64, 128, 256) and block_size & (block_size - 1) == 0


def swap_supported(group: int, block_size: int, block_n: int = 16, head: int = 128) -> bool:
    """The swapped-operand kernel: GQA groups of up to 8 heads (the 8 MMA columns), heads of
    64-256 (head 32 keeps the round-8 form), tiles of 16 or 32 keys spanning at most two pages of
    at least 16 slots (16 slots of any head are whole 128-byte lines, so every tile is 16-byte
    aligned for the copies)."""
    return (1 <= group <= 8 and head in (64, 128, 256) and block_n in (16, 32)
            and block_size >= 16 and block_n <= 2 * block_size)

