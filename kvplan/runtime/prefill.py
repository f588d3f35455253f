"""Paged prefill attention (whole prompt and chunked) on the tensor cores.

The decode kernel (`kvplan.runtime.attention`) also runs prefill, but it is built for reading
bytes: every key tile is masked, and its launch defaults are decode's. This kernel is the
flash-attention loop for query blocks of many tokens, over the same paged caches (bf16/fp16,
FP8 per-tensor, INT8/FP8 per-token-head):

* a program owns ``BLOCK_M`` query rows of one kv head: ``BLOCK_M // GROUP_PAD`` tokens times
  the GQA group's query heads (token-major), so each K/V tile feeds the whole group;
* key tiles are walked in up to three loops: tiles every row of the block sees entirely
  (no mask, no bounds, no ``-inf`` guard), then the causal diagonal (and a sliding window's
  lower edge) with the mask;
* a tile of ``BLOCK_N`` keys spans ``BLOCK_N / block_size`` pages: one block-table entry per
  key row, each row's ``D`` elements contiguous (16-byte loads);
* quantized tiles are converted to fp16 right after the load (exact: int8, fp8), so the dots
  take raw codes; per-token-head scales multiply the columns of ``Q K^T`` (k scale) and the
  columns of ``P`` (v scale); FP8 per-tensor folds its static k scale into the score scale and
  its v scale into the output. The query is pre-multiplied by ``softmax_scale * log2(e)`` in
  fp32 and rounded to fp16 once (as the decode kernel does); bf16/fp16 caches keep the query
  as it is and scale the fp32 scores;
* the softmax runs in base 2 (``exp2``);
* programs are ordered longest first: the query blocks at the end of each sequence (the most
  keys, under causality) are launched before the ones at its start, so the last wave is short.

Quantized caches run, by default, in two passes (`dequantize_pages`): the pages the sequences use
are dequantized into a bf16/fp16 workspace shaped like a bf16 cache, then the bf16/fp16 form of
the kernel runs over it. The fused form (conversion inside the loop, ``dequant=False``) stays
available; on an H100 it ran at 0.6x the two-pass speed (bench/NOTES-runtime.md, round 14): the
8-bit tiles' round trip through registers and back to shared memory for the wgmma operands is not
hidden behind the MMAs. The workspace costs 4 * D * Hkv bytes per token of the longest sequence
(bf16 K and V), per sequence, for the duration of the call. INT4 per-token-head caches (nibbles,
Hadamard-rotated heads) take the two-pass form only; its first pass rotates their rows back
(`_common.hadamard_rows`, a fast Walsh-Hadamard transform in registers), so the query and the
output stay in the model's basis, with no D x D products around the kernel.

On an sm_90 GPU the bf16/fp16 pass (over a bf16/fp16 cache or the workspace) runs the
warp-specialized TMA/wgmma kernel of `kvplan.runtime.prefill_gluon` instead, wherever it reads
the layout and the call is large enough for its launch (`launch_prefill`'s ``hopper``).
"""
from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from kvplan.runtime import bound
from kvplan.runtime._common import (
    KV_MODE_FP8_PER_TENSOR,
    KV_MODE_FP8_PTH,
    KV_MODE_INT4_PTH,
    KV_MODE_INT8_PTH,
    KV_MODE_NONE,
    fp8_decode,
    hadamard_rows,
    interpreting,
    launch_cached,
    seq_count_arg,
)
from kvplan.runtime.attention import _convert_tile, _dot, seq_bucket
from kvplan.runtime.bound import PerSeq

_LOG2E = 1.4426950408889634

#: Cache modes this kernel reads.
PREFILL_MODES = (KV_MODE_NONE, KV_MODE_FP8_PER_TENSOR, KV_MODE_INT8_PTH, KV_MODE_FP8_PTH)


@triton.jit
def _prefill_tile(acc, m_i, l_i, q, start, hi, pos, win, bt_row, kv_head, sc_head,
                  ck_ptr, cv_ptr, cs_ptr, stride_cb, stride_sb, d, s_scale,
                  BLOCK_N: tl.constexpr, BLOCK_SIZE: tl.constexpr, STRIDE_S: tl.constexpr,
                  SCALE_STRIDE_S: tl.constexpr, K_OFF: tl.constexpr, V_OFF: tl.constexpr,
                  KS_OFF: tl.constexpr, VS_OFF: tl.constexpr, KV_MODE: tl.constexpr,
                  FP8_E5M2: tl.constexpr, DTYPE: tl.constexpr, MASK: tl.constexpr,
                  INTERP: tl.constexpr, FAST: tl.constexpr, V_REG: tl.constexpr):
    n = start + tl.arange(0, BLOCK_N)
    if MASK:
        n_ok = n < hi
        page = tl.load(bt_row + n // BLOCK_SIZE, mask=n_ok, other=0).to(tl.int64)
    else:
        page = tl.load(bt_row + n // BLOCK_SIZE).to(tl.int64)
    slot = n % BLOCK_SIZE
    row = page * stride_cb + kv_head + slot * STRIDE_S
    if MASK:
        kx = tl.load(ck_ptr + K_OFF + row[:, None] + d[None, :], mask=n_ok[:, None], other=0)
    else:
        kx = tl.load(ck_ptr + K_OFF + row[:, None] + d[None, :])
    k = _convert_tile(kx, KV_MODE, FP8_E5M2, DTYPE, INTERP, FAST)
    s = _dot(q, tl.trans(k), True, False, INTERP)
    if KV_MODE >= 2:
        srow = page * stride_sb + sc_head + slot * SCALE_STRIDE_S
        if MASK:
            k_sc = tl.load(cs_ptr + KS_OFF + srow, mask=n_ok, other=0.0)
            v_sc = tl.load(cs_ptr + VS_OFF + srow, mask=n_ok, other=0.0)
        else:
            k_sc = tl.load(cs_ptr + KS_OFF + srow)
            v_sc = tl.load(cs_ptr + VS_OFF + srow)
        s = s * (k_sc * s_scale)[None, :]
        col = 1.0
    else:
        col = s_scale  # one scale for every score: folded into the exp2 argument (an FMA)
    if MASK:
        visible = (n[None, :] <= pos[:, None]) & (n[None, :] > pos[:, None] - win)
        s = tl.where(visible & n_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * col)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * col)
        m_use = m_new
    alpha = tl.exp2(m_i - m_use)
    p = tl.exp2(s * col - m_use[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if MASK:
        vx = tl.load(cv_ptr + V_OFF + row[:, None] + d[None, :], mask=n_ok[:, None], other=0)
    else:
        vx = tl.load(cv_ptr + V_OFF + row[:, None] + d[None, :])
    v = _convert_tile(vx, KV_MODE, FP8_E5M2, DTYPE, INTERP, FAST, V_REG)
    if KV_MODE >= 2:
        p = p * v_sc[None, :]
    acc = acc * alpha[:, None] + _dot(p.to(DTYPE), v, True, False, INTERP)
    return acc, m_new, l_i


@triton.jit(do_not_specialize=["num_seqs"])  # a bound call sets it per call (`bound.PerSeq`)
def _prefill_kernel(
    q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh,
    ck_ptr, cv_ptr, cs_ptr, stride_cb, stride_ch, stride_sb, stride_sh,
    bt_ptr, stride_bt, seq_lens_ptr, qsl_ptr,
    q_scale, s_scale, out_scale, sliding_window, num_q_blocks, num_seqs, num_kv_heads,
    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, HEAD_SIZE: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    STRIDE_S: tl.constexpr, SCALE_STRIDE_S: tl.constexpr,
    K_OFF: tl.constexpr, V_OFF: tl.constexpr, KS_OFF: tl.constexpr, VS_OFF: tl.constexpr,
    KV_MODE: tl.constexpr, FP8_E5M2: tl.constexpr, F16: tl.constexpr, INTERP: tl.constexpr,
    V_REG: tl.constexpr,
):
    # longest first: program 0 takes the last query block of sequence 0, kv head 0
    pid = tl.program_id(0)
    kvh = pid % num_kv_heads
    rest = pid // num_kv_heads
    seq = rest % num_seqs
    qb = num_q_blocks - 1 - rest // num_seqs
    ctx = tl.load(seq_lens_ptr + seq)
    q_start = tl.load(qsl_ptr + seq)
    q_len = tl.load(qsl_ptr + seq + 1) - q_start
    BLOCK_Q: tl.constexpr = BLOCK_M // GROUP_PAD
    q0 = qb * BLOCK_Q
    if q0 < q_len:
        rows = tl.arange(0, BLOCK_M)
        qi = q0 + rows // GROUP_PAD
        g = rows % GROUP_PAD
        row_valid = (qi < q_len) & (g < GROUP)
        head = kvh * GROUP + g
        pos = ctx - q_len + qi
        first = ctx - q_len + q0
        last = ctx - q_len + tl.minimum(q0 + BLOCK_Q, q_len) - 1
        hi = last + 1
        win = tl.where(sliding_window > 0, sliding_window, 1 << 30)
        lo = tl.maximum(first - win + 1, 0)
        lo_tile = (lo // BLOCK_N) * BLOCK_N
        # tiles that every row sees whole: at or after the window's edge for the last row,
        # before the diagonal of the first row
        full_lo = tl.maximum(tl.cdiv(tl.maximum(last - win + 1, 0), BLOCK_N) * BLOCK_N, lo_tile)
        full_hi = tl.maximum(((first + 1) // BLOCK_N) * BLOCK_N, full_lo)

        DTYPE = tl.float16 if F16 else q_ptr.dtype.element_ty
        FAST: tl.constexpr = F16 and not INTERP
        d = tl.arange(0, HEAD_SIZE)
        q_row = (q_start + qi).to(tl.int64) * stride_qt + head * stride_qh
        q = tl.load(q_ptr + q_row[:, None] + d[None, :], mask=row_valid[:, None], other=0.0)
        if F16:
            q = tl.minimum(tl.maximum(q.to(tl.float32) * q_scale, -65504.0),
                           65504.0).to(tl.float16)
        bt_row = bt_ptr + seq.to(tl.int64) * stride_bt
        kv_head = kvh.to(tl.int64) * stride_ch
        sc_head = kvh.to(tl.int64) * stride_sh
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_SIZE], tl.float32)
        for start in range(lo_tile, full_lo, BLOCK_N):  # a window's lower edge
            acc, m_i, l_i = _prefill_tile(
                acc, m_i, l_i, q, start, hi, pos, win, bt_row, kv_head, sc_head,
                ck_ptr, cv_ptr, cs_ptr, stride_cb, stride_sb, d, s_scale,
                BLOCK_N, BLOCK_SIZE, STRIDE_S, SCALE_STRIDE_S, K_OFF, V_OFF, KS_OFF, VS_OFF,
                KV_MODE, FP8_E5M2, DTYPE, True, INTERP, FAST, V_REG)
        for start in range(full_lo, full_hi, BLOCK_N):  # every row sees every key
            acc, m_i, l_i = _prefill_tile(
                acc, m_i, l_i, q, start, hi, pos, win, bt_row, kv_head, sc_head,
                ck_ptr, cv_ptr, cs_ptr, stride_cb, stride_sb, d, s_scale,
                BLOCK_N, BLOCK_SIZE, STRIDE_S, SCALE_STRIDE_S, K_OFF, V_OFF, KS_OFF, VS_OFF,
                KV_MODE, FP8_E5M2, DTYPE, False, INTERP, FAST, V_REG)
        for start in range(full_hi, hi, BLOCK_N):  # the causal diagonal
            acc, m_i, l_i = _prefill_tile(
                acc, m_i, l_i, q, start, hi, pos, win, bt_row, kv_head, sc_head,
                ck_ptr, cv_ptr, cs_ptr, stride_cb, stride_sb, d, s_scale,
                BLOCK_N, BLOCK_SIZE, STRIDE_S, SCALE_STRIDE_S, K_OFF, V_OFF, KS_OFF, VS_OFF,
                KV_MODE, FP8_E5M2, DTYPE, True, INTERP, FAST, V_REG)
        inv_l = 1.0 / tl.where(l_i > 0, l_i, 1.0)
        o_row = (q_start + qi).to(tl.int64) * stride_ot + head * stride_oh
        tl.store(o_ptr + o_row[:, None] + d[None, :],
                 (acc * (inv_l * out_scale)[:, None]).to(o_ptr.dtype.element_ty),
                 mask=row_valid[:, None])


@triton.jit
def _dequant_pages_kernel(ck_ptr, cv_ptr, cs_ptr, stride_cb, stride_ch, stride_sb, stride_sh,
                          bt_ptr, stride_bt, seq_lens_ptr, qsl_ptr, ws_ptr, stride_wkv,
                          stride_wb, k_scale, v_scale, pages, window,
                          HEAD_SIZE: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                          NUM_KV_HEADS: tl.constexpr, STRIDE_S: tl.constexpr,
                          SCALE_STRIDE_S: tl.constexpr, K_OFF: tl.constexpr, V_OFF: tl.constexpr,
                          KS_OFF: tl.constexpr, VS_OFF: tl.constexpr, KV_MODE: tl.constexpr,
                          FP8_E5M2: tl.constexpr):
    """One (sequence, page, kv head): K and V codes times their scales, rounded once to the
    workspace dtype, into page ``seq * pages + i`` of a bf16/fp16 cache laid out like vLLM's
    ``[2, blocks, block_size, Hkv, D]``; zeros for pages past the sequence's length and pages
    wholly before the sliding window of its first query (no query reads them; whole key tiles
    are read and masked, so they must hold finite values). INT4 rows are rotated back out of
    the cache's Hadamard basis (`hadamard_rows`) before the rounding, so the workspace holds K
    and V as the model produced them and the query and output need no rotation."""
    pid = tl.program_id(0)
    kvh = tl.program_id(1)
    seq = pid // pages
    i = pid % pages
    t = tl.arange(0, BLOCK_SIZE)
    d = tl.arange(0, HEAD_SIZE)
    dst = ((seq * pages + i).to(tl.int64) * stride_wb + (t * NUM_KV_HEADS + kvh) * HEAD_SIZE)
    off = dst[:, None] + d[None, :]
    ctx = tl.load(seq_lens_ptr + seq)
    q_len = tl.load(qsl_ptr + seq + 1) - tl.load(qsl_ptr + seq)
    if (i * BLOCK_SIZE >= ctx) | ((i + 1) * BLOCK_SIZE <= ctx - q_len - window + 1):
        zero = tl.zeros([BLOCK_SIZE, HEAD_SIZE], ws_ptr.dtype.element_ty)
        tl.store(ws_ptr + off, zero)
        tl.store(ws_ptr + stride_wkv + off, zero)
    else:
        page = tl.load(bt_ptr + seq.to(tl.int64) * stride_bt + i).to(tl.int64)
        row = page * stride_cb + kvh * stride_ch + t * STRIDE_S
        if KV_MODE == 4:
            # two nibbles per byte (dims 2j, 2j + 1), the zero point in the scale's low bits
            srow = page * stride_sb + kvh * stride_sh + t * SCALE_STRIDE_S
            kb = tl.load(ck_ptr + K_OFF + row[:, None] + tl.arange(0, HEAD_SIZE // 2)[None, :])
            vb = tl.load(cv_ptr + V_OFF + row[:, None] + tl.arange(0, HEAD_SIZE // 2)[None, :])
            ks_bits = tl.load(cs_ptr + KS_OFF + srow).to(tl.int32, bitcast=True)
            vs_bits = tl.load(cs_ptr + VS_OFF + srow).to(tl.int32, bitcast=True)
            ks = (ks_bits & -16).to(tl.float32, bitcast=True)
            vs = (vs_bits & -16).to(tl.float32, bitcast=True)
            kzp = (ks_bits & 15).to(tl.float32)
            vzp = (vs_bits & 15).to(tl.float32)
            kw_ = kb.to(tl.int32)
            vw_ = vb.to(tl.int32)
            kf = tl.reshape(tl.join((kw_ & 15).to(tl.float32), (kw_ >> 4).to(tl.float32)),
                            [BLOCK_SIZE, HEAD_SIZE])
            vf = tl.reshape(tl.join((vw_ & 15).to(tl.float32), (vw_ >> 4).to(tl.float32)),
                            [BLOCK_SIZE, HEAD_SIZE])
            # H (orthonormal, symmetric) undoes the write's rotation: x = (x H) H
            inv_sqrt_d = 1.0 / tl.sqrt(float(HEAD_SIZE))
            kf = hadamard_rows(kf - kzp[:, None], BLOCK_SIZE, HEAD_SIZE)
            vf = hadamard_rows(vf - vzp[:, None], BLOCK_SIZE, HEAD_SIZE)
            kf = kf * (ks * inv_sqrt_d)[:, None]
            vf = vf * (vs * inv_sqrt_d)[:, None]
        elif KV_MODE == 2:
            kx = tl.load(ck_ptr + K_OFF + row[:, None] + d[None, :])
            vx = tl.load(cv_ptr + V_OFF + row[:, None] + d[None, :])
            kf = kx.to(tl.float32)
            vf = vx.to(tl.float32)
        else:
            kx = tl.load(ck_ptr + K_OFF + row[:, None] + d[None, :])
            vx = tl.load(cv_ptr + V_OFF + row[:, None] + d[None, :])
            kf = fp8_decode(kx, FP8_E5M2).to(tl.float32)
            vf = fp8_decode(vx, FP8_E5M2).to(tl.float32)
        if KV_MODE == 2 or KV_MODE == 3:
            srow = page * stride_sb + kvh * stride_sh + t * SCALE_STRIDE_S
            kf = kf * tl.load(cs_ptr + KS_OFF + srow)[:, None]
            vf = vf * tl.load(cs_ptr + VS_OFF + srow)[:, None]
        elif KV_MODE == 1:
            kf = kf * k_scale
            vf = vf * v_scale
        tl.store(ws_ptr + off, kf.to(ws_ptr.dtype.element_ty))
        tl.store(ws_ptr + stride_wkv + off, vf.to(ws_ptr.dtype.element_ty))


def dequantize_pages(args, block_tables, seq_lens, query_start_loc, *, max_seq_len: int,
                     block_size: int, num_kv_heads: int, head: int, k_scale: float,
                     v_scale: float, dtype: torch.dtype, sliding_window: int = 0,
                     max_seqs: int = 0):
    """Dequantize the pages each sequence uses (up to its length) into a fresh bf16/fp16 cache
    of ``[2, sequences * pages, block_size, Hkv, D]`` whose block table is the identity; returns
    (its `CacheArgs`, that block table). K and V are the codes times their scales, rounded once
    to ``dtype`` (INT4: rotated back from the cache's Hadamard basis, so the query is not
    rotated); pages past a sequence's length, and pages wholly before the ``sliding_window``
    of its first query (``query_start_loc``), are zeros. ``max_seqs``: size the workspace and
    its table for that many sequences at least (a bound call serves batches of up to that
    many with one workspace; the rows past this call's sequences are left unwritten)."""
    from kvplan.runtime._common import CacheArgs

    pages = max(1, math.ceil(max_seq_len / block_size))
    num_seqs = seq_lens.shape[0]
    rows = max(num_seqs, max_seqs)
    ws = torch.empty(2, rows * pages, block_size, num_kv_heads, head, dtype=dtype,
                     device=block_tables.device)
    pos = (args.k, args.v, args.s, args.stride_cb, args.stride_ch, args.stride_sb, args.stride_sh,
           block_tables, block_tables.stride(0), seq_lens, query_start_loc, ws, ws.stride(0),
           ws.stride(1), float(k_scale), float(v_scale), pages,
           int(sliding_window) if sliding_window and sliding_window > 0 else 1 << 30)
    kw = dict(HEAD_SIZE=head, BLOCK_SIZE=block_size, NUM_KV_HEADS=num_kv_heads,
              STRIDE_S=args.STRIDE_S, SCALE_STRIDE_S=args.SCALE_STRIDE_S, K_OFF=args.K_OFF,
              V_OFF=args.V_OFF, KS_OFF=args.KS_OFF, VS_OFF=args.VS_OFF, KV_MODE=args.KV_MODE,
              FP8_E5M2=args.FP8_E5M2, num_warps=4)
    bound.note_scratch(ws)  # a bound call's scratch (per stream up to KEEP_SCRATCH_BYTES)
    launch_cached(_dequant_pages_kernel, (num_seqs * pages, num_kv_heads), pos, kw,
                  per_seq=PerSeq(lambda n: (n * pages, num_kv_heads)))
    k, v = ws[0], ws[1]
    sb, ss, sh, _ = k.stride()
    ws_args = CacheArgs(k=k, v=v, s=k, stride_cb=sb, stride_ch=sh, stride_sb=0, stride_sh=0,
                        STRIDE_S=ss, SCALE_STRIDE_S=0, K_OFF=0, V_OFF=0, KS_OFF=0, VS_OFF=0,
                        KV_MODE=KV_MODE_NONE, FP8_E5M2=False, DATA_HEAD=head)
    with bound.making_constant():  # made once per size (a torch.arange), never written
        table = _identity_table(rows, pages, block_tables.device)
    bound.note_fixed(table)  # a bound call bakes it in and keeps it
    return ws_args, table


@functools.lru_cache(maxsize=64)
def _identity_table(num_seqs: int, pages: int, device: torch.device) -> torch.Tensor:
    """The workspace's block table, ``[num_seqs, pages]`` int32 counting up: built once per
    size and device (kernels only read it), since each `torch.arange` on a GPU is a kernel
    launch (about 10-35 us of an eager prefill call's host time on the H200 host)."""
    return torch.arange(num_seqs * pages, dtype=torch.int32, device=device).view(num_seqs, pages)


def prefill_supported(kv_mode: int, query_dtype: torch.dtype, cache_dtype: torch.dtype,
                      head: int, dequant: bool = False) -> bool:
    """Layouts and dtypes the prefill kernel reads: bf16/fp16 queries over bf16/fp16 caches of
    the query's dtype, FP8 per-tensor and INT8/FP8 per-token-head caches, and INT4
    per-token-head caches through the dequantized workspace (``dequant``); power-of-two heads
    16-256 (``tl.arange`` over the head)."""
    modes = PREFILL_MODES + ((KV_MODE_INT4_PTH,) if dequant else ())
    if query_dtype not in (torch.bfloat16, torch.float16) or kv_mode not in modes:
        return False
    if kv_mode == KV_MODE_NONE and cache_dtype != query_dtype:
        return False
    return 16 <= head <= 256 and head & (head - 1) == 0


def default_prefill_config(head: int, group_pad: int, quantized: bool) -> dict:
    """Launch parameters measured best on an H100 (`bench/tune_prefill.py`, bench/NOTES-runtime.md
    round 14). Quantized caches take the two-pass form (``dequant``): at B4 x 4096 tokens,
    Hq32/Hkv8, head 128, INT8 per-token-head ran at 346 TFLOP/s against 215 for the best fused
    configuration (conversion in the loop), the bf16 cache at 358."""
    if head <= 64:
        cfg = dict(block_m=128, block_n=64, num_warps=8, num_stages=3)
    elif head <= 128:
        cfg = dict(block_m=128, block_n=32, num_warps=4, num_stages=2)
    else:
        cfg = dict(block_m=64, block_n=32, num_warps=4, num_stages=2)
    if quantized:
        cfg["dequant"] = True
    return cfg


def hopper_prefill_module(query, k, v, *, block_size: int, group: int, num_kv_heads: int,
                          contig: bool, hopper: bool | None, max_query_len: int,
                          max_seq_len: int | None, seq_lens=None, binding: bool = False):
    """`kvplan.runtime.prefill_gluon` when the bf16/fp16 pass of this call runs the Hopper
    kernel, else None. ``k``/``v``: the flash-layout cache sides it would read (ignored for the
    dequantized workspace, ``contig``, which is built as a plain matrix of the query's dtype).
    ``hopper`` None: wherever it reads the layout and the call has enough work
    (`prefill_gluon.worthwhile`; without ``max_seq_len`` a short chunk takes the longest of
    ``seq_lens``, one device sync; ``binding``: a call planned for bound launches, where it
    is the faster kernel at any size); True where it cannot run is an error; False: never."""
    if hopper is False:
        return None
    try:
        from kvplan.runtime import prefill_gluon as pg
    except ImportError:  # a Triton without Gluon's Hopper module
        pg = None
    usable = pg is not None and pg.ws_prefill_usable(
        query, None if contig else k, None if contig else v, block_size, group, num_kv_heads,
        contig)
    if usable and pg is not None and hopper is None:
        tokens, hq, d = query.shape
        usable = pg.worthwhile(tokens, hq, d, max_query_len, max_seq_len, contig, binding)
        if not usable and max_seq_len is None and seq_lens is not None:
            # short chunks may sit on long contexts
            usable = pg.worthwhile(tokens, hq, d, max_query_len, int(seq_lens.max().item()),
                                   contig)
    if hopper and not usable:
        raise ValueError("the Hopper prefill kernel needs an sm_90 GPU, bf16/fp16 queries "
                         "over a cache of their dtype, heads 64/128/256, GQA groups <= 16 "
                         "and block sizes of 8-128 dividing its key tile")
    return pg if usable else None


def launch_prefill(query, out, args, block_tables, seq_lens, query_start_loc, *, group: int,
                   block_size: int, num_kv_heads: int, scale: float, k_scale: float,
                   v_scale: float, sliding_window: int, max_query_len: int, block_m: int,
                   block_n: int, num_warps: int, num_stages: int, v_reg: bool,
                   dequant: bool = False, max_seq_len: int | None = None,
                   hopper: bool | None = None, binding: bool = False) -> None:
    """Launch `_prefill_kernel` (see `kvplan.runtime.attention.paged_attention`). ``dequant``
    (quantized caches): first dequantize the pages the sequences use into a bf16/fp16 workspace
    (`dequantize_pages`), then run the bf16/fp16 form of the kernel over it. ``hopper``: the
    bf16/fp16 pass runs the warp-specialized TMA/wgmma kernel (`kvplan.runtime.prefill_gluon`)
    instead of the Triton one (`hopper_prefill_module` decides). ``block_m``/``block_n``/
    ``num_warps``/``num_stages``/``v_reg`` are the Triton kernel's. ``binding``: the call is
    recorded for bound launches (`kvplan.runtime.bound`), which changes the default kernel and
    sizes the workspace for the sequence-count bucket (`attention.seq_bucket`)."""
    _, _hq, d = query.shape
    if args.KV_MODE == KV_MODE_INT4_PTH and not dequant:
        raise ValueError("the prefill kernel reads INT4 caches only through the dequantized "
                         "workspace (dequant=True)")
    if dequant and args.KV_MODE != KV_MODE_NONE:
        if max_seq_len is None:
            max_seq_len = int(seq_lens.max().item())
        args, block_tables = dequantize_pages(
            args, block_tables, seq_lens, query_start_loc, max_seq_len=max_seq_len,
            block_size=block_size, num_kv_heads=num_kv_heads, head=d, k_scale=k_scale,
            v_scale=v_scale, dtype=query.dtype, sliding_window=sliding_window,
            # bound, one workspace serves every batch of the key's sequence-count bucket
            max_seqs=seq_bucket(seq_lens.shape[0]) if binding else 0)
        k_scale = v_scale = 1.0
        contig = True  # the workspace: each sequence's pages in order
    else:
        contig = False
    if args.KV_MODE == KV_MODE_NONE:
        pg = hopper_prefill_module(query, args.k, args.v, block_size=block_size, group=group,
                                   num_kv_heads=num_kv_heads, contig=contig, hopper=hopper,
                                   max_query_len=max_query_len, max_seq_len=max_seq_len,
                                   seq_lens=seq_lens, binding=binding)
        if pg is not None:
            pg.launch_ws_prefill(
                query, out, args.k, args.v, block_tables, seq_lens, query_start_loc,
                group=group, block_size=block_size, num_kv_heads=num_kv_heads, scale=scale,
                out_scale=v_scale, sliding_window=sliding_window, max_query_len=max_query_len,
                contig=contig, seq_pages=block_tables.shape[1] if contig else 0)
            return
    group_pad = triton.next_power_of_2(group)
    if block_m % group_pad or block_m < group_pad:
        raise ValueError(f"block_m {block_m} must be a multiple of the padded group {group_pad}")
    if block_n % 16 or block_n & (block_n - 1):
        raise ValueError(f"block_n {block_n} must be a power of two >= 16")
    block_q = block_m // group_pad
    num_q_blocks = max(1, math.ceil(max_query_len / block_q))
    num_seqs = seq_lens.shape[0]
    f16 = args.KV_MODE != KV_MODE_NONE
    if f16:
        q_scale, s_scale = scale * _LOG2E, k_scale
    else:
        q_scale, s_scale = 1.0, scale * _LOG2E * k_scale
    pos = (query, query.stride(0), query.stride(1), out, out.stride(0), out.stride(1),
           args.k, args.v, args.s, args.stride_cb, args.stride_ch, args.stride_sb, args.stride_sh,
           block_tables, block_tables.stride(0), seq_lens, query_start_loc,
           float(q_scale), float(s_scale), float(v_scale), int(sliding_window), num_q_blocks,
           num_seqs, num_kv_heads)
    kw = dict(GROUP=group, GROUP_PAD=group_pad, BLOCK_M=block_m, BLOCK_N=block_n, HEAD_SIZE=d,
              BLOCK_SIZE=block_size, STRIDE_S=args.STRIDE_S, SCALE_STRIDE_S=args.SCALE_STRIDE_S,
              K_OFF=args.K_OFF, V_OFF=args.V_OFF, KS_OFF=args.KS_OFF, VS_OFF=args.VS_OFF,
              KV_MODE=args.KV_MODE, FP8_E5M2=args.FP8_E5M2, F16=f16, INTERP=interpreting(),
              V_REG=bool(v_reg and f16 and not interpreting()),
              num_warps=num_warps, num_stages=num_stages)
    grid = (num_q_blocks * num_seqs * num_kv_heads,)
    launch_cached(_prefill_kernel, grid, pos, kw,
                  per_seq=PerSeq(lambda n: (num_q_blocks * n * num_kv_heads,),
                                 seq_count_arg(_prefill_kernel)))
