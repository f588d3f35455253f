"""Paged prefill attention for Hopper (sm_90): TMA copies, wgmma, warp specialization.

The flash-attention forward loop written the way Hopper runs it fastest, over the same paged
bf16/fp16 caches the Triton prefill kernel (`kvplan.runtime.prefill`) reads:

* **Warp-specialized.** One producer warp issues the TMA copies of K and V tiles into a ring of
  shared-memory stages (``STAGES``); two consumer warpgroups (64 query rows each, 240 registers
  per thread; the producer keeps 24) run the MMAs and the softmax. By default each consumer
  warpgroup is a partition of its own (``split``): a stage release in Gluon synchronizes the
  releasing partition's warps, and two 4-warp partitions let the warpgroups drift apart
  instead of meeting twice per tile (one 8-warp partition measured 10-15% slower). Stages are
  handed over with mbarriers: ``ready`` (the copy's bytes landed) and ``empty`` (the MMAs
  reading the stage are done, both consumers arrive). K and V have their own stages and
  barriers, so K of the next tile lands while V of this one is still being read.
* **Paged TMA.** A key tile of ``BLOCK_N`` rows is ``BLOCK_N / block_size`` page copies: each
  copy moves one page's ``[block_size, D]`` rows of one kv head (the cache viewed as a
  ``[blocks * block_size, Hkv * D]`` matrix) into its slice of the tile. Pages outside the keys
  a query block sees (past its last key, before its window) are replaced by the nearest page
  it does see (their scores are masked), so every copy reads written, finite memory and every
  stage receives the same byte count. The producer loads each tile's block-table entries
  (every lane holds them all, so picking one is a register) before it waits for a stage.
  The dequantized workspace of 8-bit caches (`prefill.dequantize_pages`) is contiguous per
  sequence, so there a tile is one copy (``CONTIG``).
* **Overlapped MMAs.** In the loop, ``S_j = Q K_j^T`` is issued, then ``O += P_{j-1} V_{j-1}``
  (P from registers), then the softmax of ``S_j``. The source waits for the P.V MMA after the
  softmax; ptxas places that wait before it (round 22), so the overlap is between the two
  warpgroups: one's MMAs run while the other computes its softmax. Holding the wait below the
  softmax measured slower. ``pingpong`` makes the two warpgroups take turns at issuing their
  MMAs (FlashAttention-3's scheduling); measured no better here, it is off by default.
* **Query rows by TMA.** The producer also copies each item's query rows (``qtma``, the
  default): the query ``[tokens, Hq, D]`` (any view with 16-byte strides, such as the Q part of
  a fused QKV output) is read as ``[tokens, GROUP_PAD, D]`` boxes, one per consumer, into a
  ring of two buffers per consumer (one at head 256), so the next item's rows land while this
  one runs. The output goes to its store layout through the item's query buffer (free once the
  last S MMA is done), which then returns to the producer. Queries TMA cannot read are loaded
  by the consumers.
* **Persistent.** By default one program per multiprocessor walks the work items (a query block
  of one kv head), longest first in snake order (`_item`); the K/V ring runs on from one item
  to the next.
* **Masks only where needed.** Key tiles are walked in three ranges as in the Triton kernel:
  a sliding window's lower edge (masked), tiles every query row sees whole (no mask), the causal
  diagonal (masked). The first tile is peeled off to start the overlap.

The query block is ``BLOCK_M = 128`` rows: ``128 / GROUP_PAD`` tokens times the GQA group's
query heads, token-major (each K/V tile feeds the whole group). Softmax in base 2; the softmax
scale is applied to the fp32 scores. Measurements: BENCHMARKS.md and bench/NOTES-runtime.md,
round 17.

Slots past a sequence's length inside its last page are read (and masked): they must hold finite
values, as they do in caches allocated zeroed (vLLM's and `kvplan.runtime.cache`'s) and written
only by the write kernels.
"""
from __future__ import annotations

import functools
import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kvplan.runtime._common import KV_MODE_NONE, key_id, launch_cached, num_sms, seq_count_arg
from kvplan.runtime.bound import PerSeq

# The CTA (in a warp-specialized region: partition) barrier: `thread_barrier` in triton 3.6,
# `barrier` in later releases.
_partition_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
# TMA global -> shared copy: `async_copy_global_to_shared` in triton 3.6, `async_load` later.
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

_LOG2E = 1.4426950408889634
BLOCK_M = 128
NUM_WARPS = 8


@gluon.jit
def _span(item, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs, num_kv_heads,
          BLOCK_Q: gl.constexpr, BLOCK_N: gl.constexpr):
    """Work item ``item``'s query block and key-tile ranges (items are numbered longest
    first: item 0 is the last query block of sequence 0, kv head 0)."""
    kvh = item % num_kv_heads
    rest = item // num_kv_heads
    seq = rest % num_seqs
    qb = num_q_blocks - 1 - rest // num_seqs
    ctx = gl.load(seq_lens_ptr + seq)
    q_start = gl.load(qsl_ptr + seq)
    q_len = gl.load(qsl_ptr + seq + 1) - q_start
    q0 = qb * BLOCK_Q
    first = ctx - q_len + q0
    last = ctx - q_len + gl.minimum(q0 + BLOCK_Q, q_len) - 1
    hi = last + 1
    lo = gl.maximum(first - window + 1, 0)
    lo_tile = (lo // BLOCK_N) * BLOCK_N
    # tiles every row sees whole: at or after the window's edge for the last row, before the
    # diagonal of the first row
    full_lo = gl.maximum(gl.cdiv(gl.maximum(last - window + 1, 0), BLOCK_N) * BLOCK_N, lo_tile)
    full_hi = gl.maximum(((first + 1) // BLOCK_N) * BLOCK_N, full_lo)
    n_tiles = (full_hi - lo_tile) // BLOCK_N + gl.cdiv(gl.maximum(hi - full_hi, 0), BLOCK_N)
    n_tiles = n_tiles * (q0 < q_len).to(gl.int32)
    return kvh, seq, q0, q_start, q_len, ctx, lo, hi, lo_tile, full_lo, full_hi, n_tiles


@gluon.jit
def _item(k, num_items):
    """The program's ``k``-th work item: rounds of one item per program, walked forwards in
    even rounds and backwards in odd ones, so programs that took longer items in one round take
    shorter ones in the next (items are numbered longest first). Past the last item: -1."""
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    odd = k & 1
    item = k * nprog + pid + odd * (nprog - 1 - 2 * pid)
    return item


@gluon.jit
def _page_rows(bt_row, seq, seq_pages, start, first_key, last_key, BLOCK_N: gl.constexpr,
               BLOCK_SIZE: gl.constexpr, CONTIG: gl.constexpr, PL: gl.constexpr):
    """First cache row of each copy of the tile at key ``start``: one per page (pages outside
    ``first_key .. last_key``, which no query of the block sees, are replaced by the nearest page
    inside: a block table may point them anywhere), or the sequence's contiguous workspace
    rows."""
    NP: gl.constexpr = 1 if CONTIG else BLOCK_N // BLOCK_SIZE
    i = gl.arange(0, NP, layout=PL)
    if CONTIG:
        rows = seq * seq_pages * BLOCK_SIZE + start + i
    else:
        key = gl.minimum(gl.maximum(start + i * BLOCK_SIZE, first_key), last_key)
        rows = gl.load(bt_row + key // BLOCK_SIZE) * BLOCK_SIZE
    return rows, i


@gluon.jit
def _producer(k_desc, v_desc, q_desc, k_bufs, v_bufs, q_bufs, k_ready, v_ready, k_empty,
              v_empty, q_ready, q_empty, bt_ptr, stride_bt, seq_lens_ptr, qsl_ptr, window,
              num_q_blocks, num_seqs, num_kv_heads, seq_pages,
              GROUP: gl.constexpr, GROUP_PAD: gl.constexpr, HEAD: gl.constexpr,
              BLOCK_Q: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_SIZE: gl.constexpr,
              STAGES: gl.constexpr, CONTIG: gl.constexpr, CONSUMERS: gl.constexpr,
              QTMA: gl.constexpr, QBUFS: gl.constexpr):
    """The TMA copies: each item's query rows (``QTMA``; one ``[tokens, GROUP_PAD, D]`` box per
    consumer into its ring of ``QBUFS`` query buffers), then its K/V tiles."""
    BOX: gl.constexpr = BLOCK_N if CONTIG else BLOCK_SIZE
    NP: gl.constexpr = BLOCK_N // BOX
    # every lane holds all the tile's page rows: picking one is a register, not a reduction
    PL: gl.constexpr = gl.BlockedLayout([NP], [32], [1], [0])
    TILE_BYTES: gl.constexpr = BLOCK_N * HEAD * k_desc.dtype.primitive_bitwidth // 8
    QTOK: gl.constexpr = BLOCK_Q // CONSUMERS  # query tokens of one consumer's rows
    Q_BYTES: gl.constexpr = QTOK * GROUP_PAD * HEAD * k_desc.dtype.primitive_bitwidth // 8
    num_items = num_q_blocks * num_seqs * num_kv_heads
    tb = 0  # tiles of earlier items: the ring continues across items
    qi = 0  # items with query rows so far (the query buffers' ring)
    for k in range(gl.cdiv(num_items, gl.num_programs(0))):
        item = _item(k, num_items)
        if item < num_items:
            kvh, seq, q0, q_start, _ql, _ctx, lo, hi, lo_tile, _flo, _fhi, n_tiles = _span(
                item, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs, num_kv_heads,
                BLOCK_Q, BLOCK_N)
            if QTMA and n_tiles > 0:
                qb = qi % QBUFS
                for c in gl.static_range(CONSUMERS):
                    mbarrier.wait(q_empty.index(c * QBUFS + qb), ((qi // QBUFS) & 1) ^ 1)
                    mbarrier.expect(q_ready.index(c * QBUFS + qb), Q_BYTES)
                    _tma_load(q_desc, [q_start + q0 + c * QTOK, kvh * GROUP, 0],
                              q_ready.index(c * QBUFS + qb),
                              q_bufs.index(c * QBUFS + qb).reshape([QTOK, GROUP_PAD, HEAD]))
                qi += 1
            col = kvh * HEAD
            bt_row = bt_ptr + seq.to(gl.int64) * stride_bt
            for t in range(n_tiles):
                # the tile's block-table entries, loading while this warp waits for a stage
                rows, i = _page_rows(bt_row, seq, seq_pages, lo_tile + t * BLOCK_N, lo, hi - 1,
                                     BLOCK_N, BLOCK_SIZE, CONTIG, PL)
                s = (tb + t) % STAGES
                ph = ((tb + t) // STAGES) & 1
                mbarrier.wait(k_empty.index(s), ph ^ 1)
                mbarrier.expect(k_ready.index(s), TILE_BYTES)
                for c in gl.static_range(NP):
                    row = gl.sum(gl.where(i == c, rows, 0), axis=0)
                    _tma_load(k_desc, [row, col], k_ready.index(s),
                              k_bufs.index(s).slice(c * BOX, BOX))
                mbarrier.wait(v_empty.index(s), ph ^ 1)
                mbarrier.expect(v_ready.index(s), TILE_BYTES)
                for c in gl.static_range(NP):
                    row = gl.sum(gl.where(i == c, rows, 0), axis=0)
                    _tma_load(v_desc, [row, col], v_ready.index(s),
                              v_bufs.index(s).slice(c * BOX, BOX))
            tb += n_tiles


@gluon.jit
def _turn_wait(turns, g, ME: gl.constexpr, PINGPONG: gl.constexpr):
    """Ping-pong: consumer ``ME`` issues its ``g``-th group of MMAs only after the other one has
    issued its own ``g``-th (consumer 0 goes first), so one warpgroup's softmax runs while the
    other's MMAs occupy the tensor cores."""
    if PINGPONG:
        mbarrier.wait(turns.index(ME), (g & 1) ^ (1 - ME))


@gluon.jit
def _turn_pass(turns, ME: gl.constexpr, PINGPONG: gl.constexpr):
    if PINGPONG:
        mbarrier.arrive(turns.index(1 - ME), count=1)


@gluon.jit
def _softmax(s, start, pos, cols, m_i, l_i, window, s_scale, MASK: gl.constexpr):
    """Online softmax of one score tile: returns (p, alpha, m, l). ``MASK``: 0 every key
    visible, 1 causal and the sliding window, 2 causal only (a layer without a window, where
    ``n > pos - window`` holds for every key: one compare per score instead of two)."""
    if MASK:
        if MASK == 2:
            visible = cols[None, :] <= (pos - start)[:, None]  # a threshold per row
        else:
            n = start + cols
            visible = (n[None, :] <= pos[:, None]) & (n[None, :] > pos[:, None] - window)
        s = gl.where(visible, s, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, axis=1) * s_scale)
        m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new = gl.maximum(m_i, gl.max(s, axis=1) * s_scale)
        m_use = m_new
    alpha = gl.exp2(m_i - m_use)
    p = gl.exp2(s * s_scale - m_use[:, None])
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, alpha, m_new, l_i


@gluon.jit
def _to_operand(p32, P_L: gl.constexpr, dtype: gl.constexpr, PACK_P: gl.constexpr):
    """The softmax's fp32 tile as the P.V MMA's register operand (``P_L``, bf16/fp16).
    ``PACK_P``: converted two values per instruction by inline PTX (element 0 in the low
    half), which the P.V operand takes as it is; through ``.to()`` the halves were swapped
    after the conversion and swapped back before the MMA (64 `PRMT` per tile and thread at
    head 128 in the SASS, 10% of the unmasked loop's instructions). Both give the same
    registers (same `cvt.rn` rounding, same pairs: checked in the SASS; the GPU tests pass with
    both); ``PACK_P`` is the default since round 23 (3-5% faster on an H200)."""
    if PACK_P:
        if dtype == gl.bfloat16:
            p16 = gl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,r,r", [p32],
                                            dtype=gl.bfloat16, is_pure=True, pack=2)
        else:
            p16 = gl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,r,r", [p32],
                                            dtype=gl.float16, is_pure=True, pack=2)
    else:
        p16 = p32.to(dtype)
    return gl.convert_layout(p16, P_L)


@gluon.jit
def _step(q_smem, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, turns, t, g, start, pos,
          cols, acc, m_i, l_i, p, alpha, window, s_scale,
          STAGES: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
          S_L: gl.constexpr, O_L: gl.constexpr, P_L: gl.constexpr, MASK: gl.constexpr,
          ME: gl.constexpr, PINGPONG: gl.constexpr, PACK_P: gl.constexpr):
    """Ring tile ``t`` (key ``start``; turn ``g``): S_t issued, then O += P_{t-1} V_{t-1},
    then S_t's softmax. In the source the softmax runs while that MMA is in flight; in the
    SASS ptxas places the MMA's wait (and the V stage's release after it) above the softmax,
    and the two warpgroups overlap each other's MMAs instead. Keeping the wait below the
    softmax (a wgmma fence or a warp sync that depends on the row sums between them) was
    measured 2-6% slower: bench/NOTES-runtime.md, round 22."""
    cur = t % STAGES
    prev = (t - 1) % STAGES
    mbarrier.wait(k_ready.index(cur), (t // STAGES) & 1)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, O_L))[:, None]
    mbarrier.wait(v_ready.index(prev), ((t - 1) // STAGES) & 1)
    _turn_wait(turns, g, ME, PINGPONG)
    zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, S_L)
    s_tok = warpgroup_mma(q_smem, k_bufs.index(cur).permute((1, 0)), zero, use_acc=False,
                          is_async=True)
    o_tok = warpgroup_mma(p, v_bufs.index(prev), acc, is_async=True)
    _turn_pass(turns, ME, PINGPONG)
    sc = warpgroup_mma_wait(1, deps=(s_tok,))
    mbarrier.arrive(k_empty.index(cur), count=1)
    p32, alpha, m_i, l_i = _softmax(sc, start, pos, cols, m_i, l_i, window, s_scale, MASK)
    p_next = _to_operand(p32, P_L, v_bufs.dtype, PACK_P)
    # the previous P is an operand of the MMA in flight: it stays live until the wait
    acc, p = warpgroup_mma_wait(0, deps=(o_tok, p))
    mbarrier.arrive(v_empty.index(prev), count=1)
    return acc, m_i, l_i, p_next, alpha


@gluon.jit
def _rows(item, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs, num_kv_heads,
          GROUP: gl.constexpr, GROUP_PAD: gl.constexpr, HEAD: gl.constexpr,
          BLOCK_Q: gl.constexpr, ROW0: gl.constexpr, ROWS: gl.constexpr,
          BLOCK_N: gl.constexpr, IO_L: gl.constexpr):
    """Item ``item``'s query rows of this consumer: (token index in the packed batch, query
    head, row valid)."""
    kvh, _seq, q0, q_start, q_len, _ctx, _lo, _hi, _lt, _flo, _fhi, _n = _span(
        item, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs, num_kv_heads, BLOCK_Q,
        BLOCK_N)
    rows = ROW0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, IO_L))
    qi = q0 + rows // GROUP_PAD
    g = rows % GROUP_PAD
    row_ok = (qi < q_len) & (g < GROUP)
    return (q_start + qi).to(gl.int64), kvh * GROUP + g, row_ok


@gluon.jit
def _load_q(item, q_ptr, stride_qt, stride_qh, seq_lens_ptr, qsl_ptr, window, num_q_blocks,
            num_seqs, num_kv_heads, GROUP: gl.constexpr, GROUP_PAD: gl.constexpr,
            HEAD: gl.constexpr, BLOCK_Q: gl.constexpr, ROW0: gl.constexpr, ROWS: gl.constexpr,
            BLOCK_N: gl.constexpr, IO_L: gl.constexpr):
    """Issue the loads of item ``item``'s query rows (16-byte vectors)."""
    tok, head, row_ok = _rows(item, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs,
                              num_kv_heads, GROUP, GROUP_PAD, HEAD, BLOCK_Q, ROW0, ROWS, BLOCK_N,
                              IO_L)
    d = gl.arange(0, HEAD, layout=gl.SliceLayout(0, IO_L))
    off = tok * stride_qt + head * stride_qh
    return gl.load(q_ptr + off[:, None] + d[None, :], mask=row_ok[:, None], other=0.0)


@gluon.jit
def _consumer(q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh, q_bufs, k_bufs, v_bufs,
              k_ready, v_ready, k_empty, v_empty, q_ready, q_empty, turns, seq_lens_ptr, qsl_ptr,
              window, num_q_blocks, num_seqs, num_kv_heads, s_scale, out_scale,
              GROUP: gl.constexpr, GROUP_PAD: gl.constexpr, HEAD: gl.constexpr,
              BLOCK_M: gl.constexpr, ROW0: gl.constexpr, ROWS: gl.constexpr,
              BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
              S_L: gl.constexpr, O_L: gl.constexpr, P_L: gl.constexpr, IO_L: gl.constexpr,
              ME: gl.constexpr, PINGPONG: gl.constexpr, QTMA: gl.constexpr,
              QBUFS: gl.constexpr, PACK_P: gl.constexpr, DIAG_MASK: gl.constexpr):
    """Rows ``ROW0 .. ROW0 + ROWS`` of each query block (all of it, or one warpgroup's half:
    consumer ``ME``), item after item. ``QTMA``: the producer copies the query rows into this
    consumer's ring of ``QBUFS`` buffers; otherwise they are loaded here."""
    BLOCK_Q: gl.constexpr = BLOCK_M // GROUP_PAD
    num_items = num_q_blocks * num_seqs * num_kv_heads
    tb = 0  # ring tiles of earlier items
    gb = 0  # ping-pong turns of earlier items
    qi = 0  # items with query rows so far (the query buffers' ring)
    for k in range(gl.cdiv(num_items, gl.num_programs(0))):
        item = _item(k, num_items)
        if item < num_items:
            tb, gb, qi = _consume_item(
                item, tb, gb, qi, q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh,
                q_bufs, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, q_ready, q_empty,
                turns, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs, num_kv_heads,
                s_scale, out_scale, GROUP, GROUP_PAD, HEAD, BLOCK_Q, ROW0, ROWS, BLOCK_N, STAGES,
                S_L, O_L, P_L, IO_L, ME, PINGPONG, QTMA, QBUFS, PACK_P, DIAG_MASK)


@gluon.jit
def _store_o(o, o_off, o_ok, o_ptr, HEAD: gl.constexpr, IO_L: gl.constexpr):
    d = gl.arange(0, HEAD, layout=gl.SliceLayout(0, IO_L))
    gl.store(o_ptr + o_off[:, None] + d[None, :], o, mask=o_ok[:, None])


@gluon.jit
def _consume_item(item, tb, gb, qi, q_ptr, stride_qt, stride_qh, o_ptr, stride_ot,
                  stride_oh, q_bufs, k_bufs, v_bufs, k_ready,
                  v_ready, k_empty, v_empty, q_ready, q_empty, turns, seq_lens_ptr, qsl_ptr,
                  window, num_q_blocks, num_seqs, num_kv_heads, s_scale, out_scale,
                  GROUP: gl.constexpr, GROUP_PAD: gl.constexpr, HEAD: gl.constexpr,
                  BLOCK_Q: gl.constexpr, ROW0: gl.constexpr, ROWS: gl.constexpr,
                  BLOCK_N: gl.constexpr, STAGES: gl.constexpr, S_L: gl.constexpr,
                  O_L: gl.constexpr, P_L: gl.constexpr, IO_L: gl.constexpr, ME: gl.constexpr,
                  PINGPONG: gl.constexpr, QTMA: gl.constexpr, QBUFS: gl.constexpr,
                  PACK_P: gl.constexpr, DIAG_MASK: gl.constexpr):
    """One work item, its query rows copied by the producer (``QTMA``: query buffer
    ``qi % QBUFS``) or loaded here. Returns the ring-tile, turn and query-buffer counters
    after it. ``DIAG_MASK``: the `_softmax` mask of the first tile and of the causal
    diagonal's tiles (2: causal only, for layers without a sliding window)."""
    _kvh, _seq, q0, _qs, q_len, ctx, _lo, hi, lo_tile, full_lo, full_hi, n_tiles = _span(
        item, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs, num_kv_heads, BLOCK_Q,
        BLOCK_N)
    if n_tiles > 0:
        qbuf = ME * QBUFS + qi % QBUFS
        q_smem = q_bufs.index(qbuf)
        if QTMA:
            mbarrier.wait(q_ready.index(qbuf), (qi // QBUFS) & 1)
        else:
            q_smem.store(_load_q(item, q_ptr, stride_qt, stride_qh, seq_lens_ptr, qsl_ptr,
                                 window, num_q_blocks, num_seqs, num_kv_heads, GROUP, GROUP_PAD,
                                 HEAD, BLOCK_Q, ROW0, ROWS, BLOCK_N, IO_L))
            fence_async_shared()
            _partition_barrier()

        srows = ROW0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, S_L))
        pos = ctx - q_len + q0 + srows // GROUP_PAD
        cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, S_L))
        m_i = gl.full([ROWS], float("-inf"), gl.float32, gl.SliceLayout(1, S_L))
        l_i = gl.zeros([ROWS], gl.float32, gl.SliceLayout(1, S_L))
        acc = gl.zeros([ROWS, HEAD], gl.float32, O_L)
        # the first tile, peeled: its scores and softmax start the overlap
        first = tb % STAGES
        mbarrier.wait(k_ready.index(first), (tb // STAGES) & 1)
        zero = gl.zeros([ROWS, BLOCK_N], gl.float32, S_L)
        _turn_wait(turns, gb, ME, PINGPONG)
        s_tok = warpgroup_mma(q_smem, k_bufs.index(first).permute((1, 0)), zero, use_acc=False,
                              is_async=True)
        _turn_pass(turns, ME, PINGPONG)
        sc = warpgroup_mma_wait(0, deps=(s_tok,))
        mbarrier.arrive(k_empty.index(first), count=1)
        p32, alpha, m_i, l_i = _softmax(sc, lo_tile, pos, cols, m_i, l_i, window, s_scale,
                                        DIAG_MASK)
        p = _to_operand(p32, P_L, v_bufs.dtype, PACK_P)
        t = 1
        second = lo_tile + BLOCK_N
        for start in range(second, full_lo, BLOCK_N):  # a window's lower edge
            acc, m_i, l_i, p, alpha = _step(
                q_smem, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, turns, tb + t,
                gb + t, start, pos, cols, acc, m_i, l_i, p, alpha, window, s_scale, STAGES,
                ROWS, BLOCK_N, S_L, O_L, P_L, True, ME, PINGPONG, PACK_P)
            t += 1
        for start in range(gl.maximum(full_lo, second), full_hi, BLOCK_N):  # every key visible
            acc, m_i, l_i, p, alpha = _step(
                q_smem, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, turns, tb + t,
                gb + t, start, pos, cols, acc, m_i, l_i, p, alpha, window, s_scale, STAGES,
                ROWS, BLOCK_N, S_L, O_L, P_L, False, ME, PINGPONG, PACK_P)
            t += 1
        for start in range(gl.maximum(full_hi, second), hi, BLOCK_N):  # the causal diagonal
            acc, m_i, l_i, p, alpha = _step(
                q_smem, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, turns, tb + t,
                gb + t, start, pos, cols, acc, m_i, l_i, p, alpha, window, s_scale, STAGES,
                ROWS, BLOCK_N, S_L, O_L, P_L, DIAG_MASK, ME, PINGPONG, PACK_P)
            t += 1
        # the last tile's P.V
        prev = (tb + t - 1) % STAGES
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, O_L))[:, None]
        mbarrier.wait(v_ready.index(prev), ((tb + t - 1) // STAGES) & 1)
        _turn_wait(turns, gb + t, ME, PINGPONG)
        o_tok = warpgroup_mma(p, v_bufs.index(prev), acc, is_async=True)
        _turn_pass(turns, ME, PINGPONG)
        acc, p = warpgroup_mma_wait(0, deps=(o_tok, p))
        mbarrier.arrive(v_empty.index(prev), count=1)

        inv_l = out_scale / gl.where(l_i > 0, l_i, 1.0)
        o32 = acc * gl.convert_layout(inv_l, gl.SliceLayout(1, O_L))[:, None]
        if QTMA:
            # to the store layout through this item's query buffer (its last reader, the last
            # S MMA, is done), then the buffer goes back to the producer
            q_smem.store(o32.to(o_ptr.dtype.element_ty))
            _partition_barrier()
            o_new = q_smem.load(IO_L)
            fence_async_shared()  # these accesses before the next TMA write of the buffer
            mbarrier.arrive(q_empty.index(qbuf), count=1)
            qi += 1
        else:
            o_new = gl.convert_layout(o32.to(o_ptr.dtype.element_ty), IO_L)
        tok, head, ok_new = _rows(item, seq_lens_ptr, qsl_ptr, window, num_q_blocks,
                                  num_seqs, num_kv_heads, GROUP, GROUP_PAD, HEAD, BLOCK_Q, ROW0,
                                  ROWS, BLOCK_N, IO_L)
        _store_o(o_new, tok * stride_ot + head * stride_oh, ok_new, o_ptr, HEAD, IO_L)
        tb += n_tiles
        gb += n_tiles + 1
    return tb, gb, qi


@gluon.jit(do_not_specialize=["num_seqs"])  # a bound call sets it per call (`bound.PerSeq`)
def _ws_prefill_kernel(
    q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh, k_desc, v_desc, q_desc,
    bt_ptr, stride_bt, seq_lens_ptr, qsl_ptr, s_scale, out_scale, window, num_q_blocks,
    num_seqs, num_kv_heads, seq_pages,
    GROUP: gl.constexpr, GROUP_PAD: gl.constexpr, HEAD: gl.constexpr, BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr, BLOCK_SIZE: gl.constexpr, STAGES: gl.constexpr, CONTIG: gl.constexpr,
    SPLIT: gl.constexpr, PINGPONG: gl.constexpr, QTMA: gl.constexpr,
    QBUFS: gl.constexpr, PACK_P: gl.constexpr, DIAG_MASK: gl.constexpr, S_L: gl.constexpr,
    O_L: gl.constexpr, P_L: gl.constexpr,
    IO_L: gl.constexpr, Q_SL: gl.constexpr, KV_SL: gl.constexpr, PRODUCER_REGS: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
):
    """``SPLIT``: the two consumer warpgroups are two partitions (64 query rows each) that
    release stages independently (each mbarrier counts both); otherwise one 8-warp partition,
    whose every stage release synchronizes its 8 warps. ``QTMA``: the producer also copies the
    query rows (``q_desc``: the query as a ``[tokens, Hq, D]`` tensor), into ``QBUFS`` buffers
    per consumer."""
    dtype: gl.constexpr = k_desc.dtype
    CONSUMERS: gl.constexpr = 2 if SPLIT else 1
    ROWS: gl.constexpr = BLOCK_M // CONSUMERS
    q_bufs = gl.allocate_shared_memory(dtype, [CONSUMERS * QBUFS, ROWS, HEAD], Q_SL)
    k_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD], KV_SL)
    v_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD], KV_SL)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [CONSUMERS * QBUFS, 1],
                                        mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [CONSUMERS * QBUFS, 1],
                                        mbarrier.MBarrierLayout())
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(turns.index(0), count=1)
    mbarrier.init(turns.index(1), count=1)
    for i in gl.static_range(CONSUMERS * QBUFS):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=CONSUMERS)
        mbarrier.init(v_empty.index(i), count=CONSUMERS)
    fence_async_shared()
    BLOCK_Q: gl.constexpr = BLOCK_M // GROUP_PAD
    if SPLIT:
        gl.warp_specialize([
            (_consumer, (q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh,
                         q_bufs, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, q_ready,
                         q_empty, turns, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs,
                         num_kv_heads, s_scale, out_scale, GROUP, GROUP_PAD, HEAD, BLOCK_M, 0,
                         ROWS, BLOCK_N, STAGES, S_L, O_L, P_L, IO_L, 0, PINGPONG, QTMA,
                         QBUFS, PACK_P, DIAG_MASK)),
            (_consumer, (q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh,
                         q_bufs, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, q_ready,
                         q_empty, turns, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs,
                         num_kv_heads, s_scale, out_scale, GROUP, GROUP_PAD, HEAD, BLOCK_M, ROWS,
                         ROWS, BLOCK_N, STAGES, S_L, O_L, P_L, IO_L, 1, PINGPONG, QTMA,
                         QBUFS, PACK_P, DIAG_MASK)),
            (_producer, (k_desc, v_desc, q_desc, k_bufs, v_bufs, q_bufs, k_ready, v_ready,
                         k_empty, v_empty, q_ready, q_empty, bt_ptr, stride_bt, seq_lens_ptr,
                         qsl_ptr, window, num_q_blocks, num_seqs, num_kv_heads, seq_pages,
                         GROUP, GROUP_PAD, HEAD, BLOCK_Q, BLOCK_N, BLOCK_SIZE, STAGES, CONTIG,
                         CONSUMERS, QTMA, QBUFS)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_consumer, (q_ptr, stride_qt, stride_qh, o_ptr, stride_ot, stride_oh,
                         q_bufs, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, q_ready,
                         q_empty, turns, seq_lens_ptr, qsl_ptr, window, num_q_blocks, num_seqs,
                         num_kv_heads, s_scale, out_scale, GROUP, GROUP_PAD, HEAD, BLOCK_M, 0,
                         ROWS, BLOCK_N, STAGES, S_L, O_L, P_L, IO_L, 0, False, QTMA, QBUFS,
                         PACK_P, DIAG_MASK)),
            (_producer, (k_desc, v_desc, q_desc, k_bufs, v_bufs, q_bufs, k_ready, v_ready,
                         k_empty, v_empty, q_ready, q_empty, bt_ptr, stride_bt, seq_lens_ptr,
                         qsl_ptr, window, num_q_blocks, num_seqs, num_kv_heads, seq_pages,
                         GROUP, GROUP_PAD, HEAD, BLOCK_Q, BLOCK_N, BLOCK_SIZE, STAGES, CONTIG,
                         CONSUMERS, QTMA, QBUFS)),
        ], [1], [PRODUCER_REGS])


# --------------------------------------------------------------------------------------- host


def ws_block_n(head: int) -> int:
    """Key-tile rows: 128 up to head 128 (S and O fit the consumer warps' registers), 64 at
    head 256."""
    return 128 if head <= 128 else 64


def ws_prefill_supported(kv_mode: int, query_dtype: torch.dtype, cache_dtype: torch.dtype,
                         head: int, block_size: int, group: int, stride_ok: bool,
                         contig: bool = False) -> bool:
    """What this kernel reads: a bf16/fp16 cache of the query's dtype (or the dequantized
    workspace, ``contig``), heads 64/128/256, GQA groups up to 16 (padded to a power of two
    that divides the 128-row query block), pages of 8+ rows that tile a 128-key (64 at head
    256) block, a cache that is a plain ``[blocks * block_size, Hkv * D]`` matrix with 16-byte
    aligned rows (``stride_ok``)."""
    if kv_mode != KV_MODE_NONE or query_dtype not in (torch.bfloat16, torch.float16):
        return False
    if cache_dtype != query_dtype or head not in (64, 128, 256) or not stride_ok:
        return False
    if not 1 <= group <= 16:
        return False
    if contig:
        return True
    block_n = ws_block_n(head)
    return 8 <= block_size <= block_n and block_n % block_size == 0


@functools.cache
def _layouts(head: int, block_n: int, gl_dtype, split: bool) -> dict:
    """Register and shared-memory layouts of one consumer partition (8 warps, or 4 when the
    warpgroups are split) and of the tiles."""
    warps = NUM_WARPS // 2 if split else NUM_WARPS
    rows = BLOCK_M // 2 if split else BLOCK_M
    s_l = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1],
                                    instr_shape=[16, block_n, 16])
    o_l = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1],
                                    instr_shape=[16, head, 16])
    vec = 8  # 16-byte accesses of bf16/fp16
    tpw_d = min(32, head // vec)
    io_l = gl.BlockedLayout([1, vec], [32 // tpw_d, tpw_d], [warps, 1], [1, 0])
    return dict(
        S_L=s_l, O_L=o_l, P_L=gl.DotOperandLayout(operand_index=0, parent=o_l, k_width=2),
        IO_L=io_l,
        Q_SL=gl.NVMMASharedLayout.get_default_for([rows, head], gl_dtype),
        KV_SL=gl.NVMMASharedLayout.get_default_for([block_n, head], gl_dtype),
    )


def _matrix(cache_side: torch.Tensor, block_size: int, num_kv_heads: int, head: int):
    """A flash-layout cache side ``[blocks, block_size, Hkv, D]`` as the 2-D matrix TMA reads:
    (rows, row stride) or None when its strides are not those of such a matrix."""
    if cache_side.dim() != 4 or cache_side.stride(3) != 1 or cache_side.stride(2) != head:
        return None
    row = cache_side.stride(1)
    if row != num_kv_heads * head or cache_side.stride(0) != block_size * row:
        return None
    if (row * cache_side.element_size()) % 16 or cache_side.data_ptr() % 16:
        return None
    return cache_side.shape[0] * block_size, row


def stride_ok(k: torch.Tensor, v: torch.Tensor, block_size: int, num_kv_heads: int,
              head: int) -> bool:
    """Whether both sides of a flash-layout cache can be read as TMA matrices."""
    return (_matrix(k, block_size, num_kv_heads, head) is not None
            and _matrix(v, block_size, num_kv_heads, head) is not None)


def hopper_device(device: torch.device) -> bool:
    """An sm_90 CUDA device (wgmma is Hopper's; the interpreter runs no Gluon)."""
    from kvplan.runtime._common import interpreting

    if device.type != "cuda" or interpreting():
        return False
    return torch.cuda.get_device_capability(device)[0] == 9


#: Below this many FLOPs (`worthwhile`'s upper bound) a call over a bf16/fp16 paged cache runs
#: the Triton prefill kernel by default. Small eager calls are bound by host time, and this
#: kernel's launch costs more of it (two TMA descriptors encoded per call): about 100 us against
#: 50-70 us for the Triton kernel on the H200 host, both through `launch_cached`. Eager calls on
#: an H200 (`python bench/launch_cost.py --prefill ...`, round 18, ms, Hopper against Triton):
#: 1 x 1024 tokens (1.7e10) 0.085 / 0.058; 2 x 512 over 2K (4.3e10) 0.091 / 0.129; 1 x 2048
#: (6.9e10) 0.090 / 0.118; 1 x 4096 (2.7e11) 0.261 / 0.410. Calls made through bound launches
#: (`kvplan.runtime.bound`: eager calls with ``max_query_len`` and ``max_seq_len`` given, from
#: their third call of a signature on) cost 15-50 us of host time on either kernel, and there
#: the Hopper kernel is the faster one at every size measured (`worthwhile`'s ``bound``; round
#: 24, bench/results/h200-round24c-launch-prefill-2026-11-29.log: bf16 1 x 256 tokens 0.016 /
#: 0.020 ms, 1 x 1024 0.032 / 0.057, 1 x 2048 0.074 / 0.116; INT8 0.021 / 0.021, 0.039 / 0.055,
#: 0.080 / 0.110).
MIN_DEFAULT_FLOPS = 3e10

#: The same for the dequantized workspace of an 8-bit or INT4 cache, where the call also
#: launches the dequantization and the Hopper kernel's host cost weighs more: INT8, same shapes,
#: 0.166 / 0.066; 0.128 / 0.134; 0.164 / 0.111; 0.308 / 0.392.
MIN_WORKSPACE_FLOPS = 1e11


def worthwhile(num_tokens: int, num_q_heads: int, head: int, max_query_len: int,
               max_seq_len: int | None, contig: bool = False, bound: bool = False) -> bool:
    """Whether a prefill call is large enough to take this kernel by default: an upper bound
    of its FLOPs (every query token against the longest context, 4 * D per pair) reaches
    `MIN_DEFAULT_FLOPS`, or `MIN_WORKSPACE_FLOPS` over the dequantized workspace (``contig``).
    ``bound``: the call is planned for bound launches, whose host cost does not depend on the
    kernel, so any size is."""
    if bound:
        return True
    keys = max(max_query_len, max_seq_len or 0)
    floor = MIN_WORKSPACE_FLOPS if contig else MIN_DEFAULT_FLOPS
    return 4 * head * num_q_heads * num_tokens * keys >= floor


def ws_prefill_usable(query: torch.Tensor, k: torch.Tensor | None, v: torch.Tensor | None,
                      block_size: int, group: int, num_kv_heads: int, contig: bool) -> bool:
    """Whether `launch_ws_prefill` runs this call (device, dtypes, geometry, strides); ``k``/``v``
    None with ``contig``: the dequantized workspace, a plain matrix of the query's dtype."""
    head = query.shape[-1]
    if k is None or v is None:
        cache_dtype, strides = query.dtype, contig
    else:
        cache_dtype, strides = k.dtype, stride_ok(k, v, block_size, num_kv_heads, head)
    return (hopper_device(query.device)
            and ws_prefill_supported(KV_MODE_NONE, query.dtype, cache_dtype, head, block_size,
                                     group, strides, contig))


def query_tma_ok(query: torch.Tensor) -> bool:
    """Whether the query ``[tokens, Hq, D]`` can be read by TMA: unit stride along D, 16-byte
    aligned base and strides (true of any view of a packed QKV projection)."""
    size = query.element_size()
    return (query.dim() == 3 and query.stride(2) == 1 and query.data_ptr() % 16 == 0
            and (query.stride(0) * size) % 16 == 0 and (query.stride(1) * size) % 16 == 0)


def ws_query_buffers(head: int) -> int:
    """Query buffers per consumer when the producer copies the query rows: two (the next
    item's rows land during this one) while they fit shared memory next to the K/V ring, one
    at head 256."""
    return 2 if head <= 128 else 1


def ws_max_stages(head: int) -> int:
    """The deepest K/V ring that fits an H100's 227 KB of shared memory next to the query tile
    (and the epilogue's layout-conversion scratch)."""
    return 4 if head <= 64 else 2


#: Launch settings (`bench/tune_hopper_prefill.py` sweeps them): K/V ring stages, the two
#: consumer warpgroups as two partitions (``split``) taking turns at the tensor cores
#: (``pingpong``), one program per multiprocessor walking the work items (``persistent``), the
#: query rows copied by the producer (``qtma``), the register split between partitions.
#: Round 17's query prefetch (the consumers loading the next item's rows under the last P.V
#: MMA) was measured slower in round 21 (bench/results/h200-round21g-prefill-prefetch-
#: 2026-11-29.log: B4 x 4096 bf16 1.162-1.166 ms with it, 1.116-1.145 without) and was removed
#: in round 22, when the producer's query copies made it moot.
#: ``qtma`` (round 22): the producer copies the query rows by TMA; alternating with the
#: consumers' loads on an H200 the B4 x 4096 prompt took 1.072-1.095 ms against 1.084-1.117
#: (bf16) and 0.996-1.076 against 1.060-1.095 (INT8), the head-256 prompt 0.126 against
#: 0.136-0.142 (bench/results/h200-round22b-prefill-qtma-2026-11-29.log, round22c). With it the
#: producer needs 40 registers (at 24 or 32 it spills), so the consumers keep 232. ``pack_p``
#: (round 23): P converted to the MMA operand without the half swaps (`_to_operand`);
#: alternating with ``.to()`` on an H200 the B4 x 4096 prompt took 1.028-1.049 ms against
#: 1.076-1.084 (bf16) and 0.932-1.032 against 1.049-1.061 (INT8), the head-64 chunk 2.74 against
#: 2.87-2.90 (bench/results/h200-round23-prefill-pack-p-2026-11-29.log). ``causal_mask``
#: (round 23, SASS-checked; round 24 on an H200, default at head 128): layers without a sliding
#: window mask their first and diagonal tiles by causality alone (`_softmax` MASK 2: each
#: row's threshold against the tile's column indices): the diagonal loop at head 128 drops
#: from 766 to 608 SASS instructions per tile (no `ISETP` pairs, 66 `FSEL`) on paged caches
#: (Triton 3.6; with 3.9's ptxas it spills 16 bytes). Alternating with both compares on an
#: H200, the B4 x 4096 prompt took 1.013-1.026 ms against 1.034-1.041 (+1.4-2.7%), the
#: B16 x 2048 one 1.302-1.319 against 1.301-1.334 (noise) (bench/results/h200-round24-prefill-
#: causal-mask-2026-11-29.log). Heads 64 and 256 spill with it (4 and 28 bytes) and read
#: equal or 0.2-0.6% slower there, so the launch takes it at head 128 only; the workspace
#: kernel keeps both compares (with the causal-only mask it spills).
WS_DEFAULTS: dict = dict(stages=2, split=True, pingpong=False, persistent=True, qtma=True,
                         pack_p=True, causal_mask=True, producer_regs=40, consumer_regs=232, maxnreg=168)


def launch_ws_prefill(query, out, k, v, block_tables, seq_lens, query_start_loc, *, group: int,
                      block_size: int, num_kv_heads: int, scale: float, out_scale: float,
                      sliding_window: int, max_query_len: int, contig: bool = False,
                      seq_pages: int = 0, **settings) -> None:
    """Launch `_ws_prefill_kernel` over the flash-layout cache sides ``k``/``v``
    (``[blocks, block_size, Hkv, D]``). ``contig``: the sides are the dequantized workspace,
    sequence b's tokens at rows ``b * seq_pages * block_size`` on (the block table is ignored).
    ``settings`` override `WS_DEFAULTS`."""
    unknown = sorted(set(settings) - set(WS_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown Hopper prefill settings {unknown}; known: {sorted(WS_DEFAULTS)}")
    opt = {**WS_DEFAULTS, **settings}
    stages, split = int(opt["stages"]), bool(opt["split"])
    if not 2 <= stages <= ws_max_stages(query.shape[-1]):
        raise ValueError(f"stages must be 2..{ws_max_stages(query.shape[-1])} at head "
                         f"{query.shape[-1]}")
    _, _hq, d = query.shape
    block_n = ws_block_n(d)
    gl_dtype = gl.bfloat16 if k.dtype == torch.bfloat16 else gl.float16
    lay = _layouts(d, block_n, gl_dtype, bool(split))
    box = block_n if contig else block_size
    descs = []
    for side in (k, v):
        m = _matrix(side, block_size, num_kv_heads, d)
        if m is None:
            raise ValueError("the cache is not a [blocks * block_size, Hkv * D] matrix for TMA")
        rows, stride = m
        descs.append(TensorDescriptor(side, [rows, stride], [stride, 1], [box, d], lay["KV_SL"]))
    group_pad = triton.next_power_of_2(group)
    block_q = BLOCK_M // group_pad
    qtma = bool(opt["qtma"]) and query_tma_ok(query)
    if qtma:  # each consumer's query rows: one [tokens, GROUP_PAD, D] box
        box = [block_q // (2 if split else 1), group_pad, d]
        q_sl = gl.NVMMASharedLayout.get_default_for(box, gl_dtype)
        q_desc = TensorDescriptor(query, list(query.shape), list(query.stride()), box, q_sl)
    else:
        q_desc = descs[0]  # a placeholder the kernel never reads
    num_q_blocks = max(1, math.ceil(max_query_len / block_q))
    num_seqs = seq_lens.shape[0]
    window = int(sliding_window) if sliding_window and sliding_window > 0 else 1 << 30
    pos = (query, query.stride(0), query.stride(1), out, out.stride(0), out.stride(1),
           descs[0], descs[1], q_desc, block_tables, block_tables.stride(0), seq_lens, query_start_loc,
           float(scale * _LOG2E), float(out_scale), window, num_q_blocks, num_seqs, num_kv_heads,
           int(seq_pages))
    kw = dict(GROUP=group, GROUP_PAD=group_pad, HEAD=d, BLOCK_M=BLOCK_M, BLOCK_N=block_n,
              BLOCK_SIZE=block_size, STAGES=stages, CONTIG=bool(contig), SPLIT=bool(split),
              PINGPONG=bool(opt["pingpong"]) and split,
              QTMA=qtma,
              QBUFS=ws_query_buffers(d) if qtma else 1, PACK_P=bool(opt["pack_p"]),
              # the causal-only mask at head 128 over paged caches: the workspace kernel
              # (``contig``) spills 48 bytes with it, heads 64/256 4 and 28 (Triton 3.6)
              DIAG_MASK=2 if (opt["causal_mask"] and window == 1 << 30 and not contig
                              and d == 128) else 1,
              PRODUCER_REGS=int(opt["producer_regs"]), CONSUMER_REGS=int(opt["consumer_regs"]),
              **lay, num_warps=NUM_WARPS // 2 if split else NUM_WARPS, maxnreg=int(opt["maxnreg"]))
    sms = num_sms(query.device) if opt["persistent"] else 0

    def grid_for(n: int) -> tuple:
        # persistent: one program per multiprocessor walks the items (`_item`)
        items = num_q_blocks * n * num_kv_heads
        return (min(items, sms) if sms else items,)

    grid = grid_for(num_seqs)
    # cached launch (`launch_cached`): the key fixes every constexpr (the layouts follow from
    # head, tile, dtype and split) and the descriptors' block shape and layout, so a repeated
    # call skips Triton's binding of ~20 layout constexprs
    key = key_id(("ws_prefill", d, block_n, str(k.dtype), tuple(sorted(
        (name, val) for name, val in kw.items() if not hasattr(val, "__dict__")))))
    launch_cached(_ws_prefill_kernel, grid, pos, kw, key,
                  per_seq=PerSeq(grid_for, seq_count_arg(_ws_prefill_kernel)))
