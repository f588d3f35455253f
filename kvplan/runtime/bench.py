"""Benchmarks of the runtime kernels beside torch SDPA (bf16) and the copy-bandwidth ceiling.

``run_suite`` returns plain JSON-serialisable data; ``format_table`` and ``plot`` render it.
Every timing is the median over repetitions timed by CUDA events, L2 emptied before each by
reading a 256 MB buffer (`_flush_l2`: no data of the timed call and no dirty lines left in L2);
caches are far larger than L2 in the full suite. Decode kernels (SDPA included) are
timed as CUDA-graph replays, the way serving stacks run decode, so the GPU time is not inflated
by Python launch cost; the eager call time (graph-free, same flush) is reported beside it. The
naive dequantize-then-SDPA path is eager only. Bytes counted:

* decode attention: K and V bytes read (data + inline scales) for the tokens attended
  (query/output/block-table bytes are < 0.1 % and ignored), same formula for SDPA;
* write: new K/V read (bf16) + cache bytes written (data + scales) + slot mapping;
* copy bandwidth: a large device-to-device ``Tensor.copy_``, bytes read + written.
"""
from __future__ import annotations

import datetime as _dt
import functools
import math
import platform
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kvplan import __version__ as kvplan_version
from kvplan.runtime.attention import AttentionConfig, paged_attention
from kvplan.runtime.cache import PagedKVCache, allocate_kv_cache
from kvplan.runtime.layout import LayerLayout
from kvplan.runtime.reference import dequantize_kv_cache
from kvplan.runtime.write import write_kv_cache

#: (name, kv_cache_dtype): `bench/launch_cost.py`'s default modes; attention and the write
#: suite measure these and INT4 (`ATTENTION_MODES`; writes since round 25).
DECODE_MODES: tuple[tuple[str, str], ...] = (
    ("bf16", "bfloat16"),
    ("fp8_per_tensor", "fp8"),
    ("int8_per_token_head", "int8_per_token_head"),
    ("fp8_per_token_head", "fp8_per_token_head"),
)
#: (name, kv_cache_dtype) measured for decode and prefill attention.
ATTENTION_MODES: tuple[tuple[str, str], ...] = (
    *DECODE_MODES, ("int4_per_token_head", "int4_per_token_head"))

#: Decode shapes: (batch, context, q heads, kv heads, head size, sliding window).
FULL_SHAPES: tuple[tuple[int, int, int, int, int, int | None], ...] = (
    (64, 4096, 32, 8, 128, None),
    (16, 16384, 32, 8, 128, None),
    (128, 2048, 64, 8, 64, None),
    (64, 1024, 32, 8, 128, None),
    (64, 2048, 32, 8, 128, None),
    (4, 32768, 32, 8, 128, None),
    (32, 4096, 16, 4, 256, None),
    (64, 4096, 64, 8, 64, 128),
    (1, 32768, 32, 8, 128, None),  # small batch, long context: one sequence's keys over all SMs
)
QUICK_SHAPES = FULL_SHAPES[:1] + FULL_SHAPES[2:3]

#: Prefill shapes: (batch, new tokens, cached tokens before them, q heads, kv heads, head size).
PREFILL_SHAPES: tuple[tuple[int, int, int, int, int, int], ...] = (
    (4, 4096, 0, 32, 8, 128),      # whole prompt
    (4, 512, 8192, 32, 8, 128),    # chunked: 512 new tokens over an 8K cached context
    (2, 2048, 16384, 64, 8, 64),   # chunked, head 64
)
QUICK_PREFILL_SHAPES = PREFILL_SHAPES[:1]
PREFILL_MODES = ATTENTION_MODES
WRITE_TOKENS_FULL = (64, 1024, 8192, 32768)
WRITE_TOKENS_QUICK = (64, 8192)


_FLUSH: dict[int, tuple] = {}
#: the result's contract (schemas/bench-result.schema.json; `kvplan.runtime.bench_model`, which
#: needs pydantic, holds the same two values)
BENCH_SCHEMA_VERSION = "1.0"
BENCH_KIND = "kvplan.bench-result"
# How every timing in a suite result was taken, recorded in its JSON (suite results written
# before this field existed were timed by triton.testing.do_bench, whose flush zeroes the buffer)
TIMING = {"l2_flush": "read 256 MB before each repetition", "statistic": "median",
          "decode": "CUDA-graph replay", "write": "CUDA-graph replay over inputs 4x L2"}


def _flush_l2() -> None:
    """Empty the current device's L2 of everything a timed call could reuse, and leave it clean:
    read a 256 MB buffer.

    ``triton.testing.do_bench`` zeroes such a buffer instead, which leaves L2 full of dirty lines;
    the timed call then pays for writing them back as it streams through L2: about 9.6 us per
    call on an H100, the same for every kernel whatever its bytes (SDPA 364.0 -> 354.4 us, the
    INT8 paged kernel 202.2 -> 192.6 us at B64 ctx4K; `bench/flush_effect.py`, BENCHMARKS.md round
    13). Reading evicts those lines before the timing starts and leaves only clean ones."""
    dev = torch.cuda.current_device()
    if dev not in _FLUSH:
        _FLUSH[dev] = (torch.zeros((256 << 20) // 8, dtype=torch.int64, device="cuda"),
                       torch.empty((), dtype=torch.int64, device="cuda"))
    buf, sink = _FLUSH[dev]
    torch.sum(buf, dim=0, out=sink)


def _bench(fn: Callable[[], Any], rep_ms: int = 200, warmup_ms: int = 25,
           flush: Callable[[], Any] = _flush_l2) -> float:
    """Median milliseconds of ``fn`` over about ``rep_ms`` of repetitions, each timed by CUDA
    events after ``flush`` (the repetition count is estimated from five calls, as
    ``triton.testing.do_bench`` does; `bench/flush_effect.py` passes other flushes)."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    reps = max(1, int(rep_ms / estimate))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends, strict=True):
        flush()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
    return float(times[len(times) // 2])


def _host_us(fn: Callable[[], Any], calls: int = 100) -> float:
    """Host microseconds per eager call: ``calls`` calls back to back after a synchronize, timed
    by the host clock without waiting for the GPU (the launches queue up asynchronously). Once
    the GPU's launch queue is full, a launch waits for the GPU, so this reads the GPU's pace for
    calls whose GPU work outlasts their host work (see `_host_us_idle`)."""
    import time

    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def _host_us_idle(fn: Callable[[], Any], calls: int = 200) -> float:
    """Host microseconds of one eager call issued to an idle GPU (synchronized before each call),
    median over ``calls``: what the call itself costs the host (Python, allocations, launches),
    without waiting behind earlier calls' queued work."""
    import time

    fn()
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    times.sort()
    return times[len(times) // 2] * 1e6


def _capture(fn: Callable[[], Any], calls: int = 1) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``calls`` calls of ``fn``, warmed up (and compiled) on a side stream first."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    return graph


def _bench_graph(fn: Callable[[], Any], replays: int = 50) -> float:
    """Milliseconds per call replaying ``fn`` from a CUDA graph: GPU time without host launch
    overhead (for launch-bound small kernels; inputs stay in L2, so not for bandwidth)."""
    graph = _capture(fn, replays)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / replays)
    return sorted(times)[len(times) // 2]


def _bench_replay(fn: Callable[[], Any], rep_ms: int = 200) -> float:
    """Median milliseconds of one call of ``fn`` replayed from a CUDA graph, L2 flushed between
    repetitions: the GPU time a serving stack sees when it runs decode under CUDA graphs (as vLLM
    does), without the Python launch cost that an eager timing adds whenever the host is slower
    than the kernel (that cost is reported separately as the eager call time)."""
    return _bench(_capture(fn).replay, rep_ms=rep_ms)


def copy_bandwidth(device: str = "cuda", nbytes: int = 2 << 30) -> dict:
    """Measured device-to-device copy bandwidth: bytes read + written per second."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    ms = _bench(functools.partial(dst.copy_, src))
    moved = 2 * src.numel()
    del src, dst
    return {"bytes": moved, "ms": ms, "bytes_per_s": moved / (ms * 1e-3)}


def _make_kv(batch: int, ctx: int, hkv: int, head: int, device: str, gen: torch.Generator
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Contiguous bf16 K/V [B, Hkv, T, D], random, K with a few x20 outlier channels."""
    k = torch.randn(batch, hkv, ctx, head, device=device, dtype=torch.bfloat16, generator=gen)
    v = torch.randn(batch, hkv, ctx, head, device=device, dtype=torch.bfloat16, generator=gen)
    k[..., : max(1, head // 32)] *= 20
    return k, v


def _paged_fill(layout: LayerLayout, k: torch.Tensor, v: torch.Tensor, block_size: int,
                gen: torch.Generator, *, permute: bool = True,
                **scales: float) -> tuple[PagedKVCache, torch.Tensor]:
    """Write contiguous K/V into a paged cache with a randomly permuted block table (``permute``;
    else each sequence's pages lie in order, one sequence after the other)."""
    batch, _hkv, ctx, _head = k.shape
    blocks_per_seq = math.ceil(ctx / block_size)
    num_blocks = batch * blocks_per_seq
    cache = allocate_kv_cache(layout, num_blocks, block_size, k.device, **scales)
    perm = (torch.randperm(num_blocks, device=k.device, generator=gen) if permute
            else torch.arange(num_blocks, device=k.device)).to(torch.int32)
    block_tables = perm.view(batch, blocks_per_seq)
    j = torch.arange(ctx, device=k.device)
    slots = (block_tables[:, j // block_size].long() * block_size + j % block_size)  # [B, T]
    for b in range(batch):  # one sequence at a time bounds the temporary memory
        write_kv_cache(cache, k[b].transpose(0, 1), v[b].transpose(0, 1), slots[b])
    return cache, block_tables


def _filled_cache(layout: LayerLayout, k: torch.Tensor, v: torch.Tensor, block_size: int,
                  gen: torch.Generator) -> tuple[PagedKVCache, torch.Tensor]:
    """`_paged_fill` with FP8 per-tensor caches calibrated as serving stacks do (amax / 448)."""
    scales: dict[str, Any] = {}
    if layout.quant_mode == "fp8_per_tensor":
        scales = {"k_scale": float(k.abs().max()) / 448.0, "v_scale": float(v.abs().max()) / 448.0}
    return _paged_fill(layout, k, v, block_size, gen, **scales)


@dataclass
class PrefillProblem:
    """A causal prefill of ``new`` tokens per sequence over ``cached`` earlier ones: contiguous
    K/V ``[B, Hkv, T, D]``, the packed query ``[B * new, Hq, D]`` with its fp32 reference, the
    paged call's ``query_start_loc`` / ``seq_lens``, and the FLOPs of the paged call and of SDPA
    bf16 causal over the whole prompt (``sdpa_args``: its operands, K/V repeated to the query
    heads; `time_sdpa` times it, then drops them)."""

    k: torch.Tensor
    v: torch.Tensor
    q: torch.Tensor
    ref: torch.Tensor
    qsl: torch.Tensor
    seq_lens: torch.Tensor
    flops: int
    sdpa_flops: int
    sdpa_args: tuple | None

    @classmethod
    def make(cls, batch: int, new: int, cached: int, hq: int, hkv: int, head: int, device: str,
             gen: torch.Generator) -> PrefillProblem:
        ctx = cached + new
        k, v = _make_kv(batch, ctx, hkv, head, device, gen)
        qf = torch.randn(batch, hq, ctx, head, device=device, dtype=torch.bfloat16, generator=gen)
        kr = k.repeat_interleave(hq // hkv, dim=1)
        vr = v.repeat_interleave(hq // hkv, dim=1)
        q = qf[:, :, cached:].transpose(1, 2).reshape(batch * new, hq, head).contiguous()
        ref = _causal_reference(qf[:, :, cached:], kr, vr).transpose(1, 2).reshape(batch * new,
                                                                                  hq, head)
        return cls(k=k, v=v, q=q, ref=ref,
                   qsl=torch.arange(0, batch * new + 1, new, dtype=torch.int32, device=device),
                   seq_lens=torch.full((batch,), ctx, dtype=torch.int32, device=device),
                   flops=4 * head * hq * _visible_pairs(batch, new, cached),
                   sdpa_flops=4 * head * hq * _visible_pairs(batch, ctx, 0),
                   sdpa_args=(qf, kr, vr))

    def time_sdpa(self, rep_ms: int = 100) -> tuple[float, float]:
        """(ms, TFLOP/s) of SDPA bf16 causal over the whole prompt (CUDA); frees its operands."""
        import torch.nn.functional as F

        assert self.sdpa_args is not None, "SDPA was timed already"
        qf, kr, vr = self.sdpa_args
        ms = _bench(functools.partial(F.scaled_dot_product_attention, qf, kr, vr, is_causal=True),
                    rep_ms=rep_ms)
        self.sdpa_args = None
        return ms, self.sdpa_flops / (ms * 1e-3) / 1e12


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def _naive_decode(cache: PagedKVCache, block_tables: torch.Tensor, q4: torch.Tensor,
                  ctx: int) -> torch.Tensor:
    """Dequantize the whole cache to bf16, gather it contiguous, then SDPA (the slow path)."""
    import torch.nn.functional as F

    k_all, v_all = dequantize_kv_cache(cache)
    bs = cache.block_size
    j = torch.arange(ctx, device=q4.device)
    blocks = block_tables[:, j // bs].long()
    k = k_all[blocks, j % bs].to(torch.bfloat16).transpose(1, 2)  # [B, Hkv, T, D]
    v = v_all[blocks, j % bs].to(torch.bfloat16).transpose(1, 2)
    return F.scaled_dot_product_attention(q4, k, v, enable_gqa=True)


def bench_decode_shape(batch: int, ctx: int, hq: int, hkv: int, head: int,
                       window: int | None, copy_bps: float, *, block_size: int = 16,
                       device: str = "cuda", naive: bool = True, seed: int = 0,
                       modes: tuple[tuple[str, str], ...] = ATTENTION_MODES,
                       configs: dict[str, AttentionConfig] | None = None) -> list[dict]:
    """Time SDPA bf16 and the paged kernels on one decode shape; one row per variant."""
    import torch.nn.functional as F

    gen = torch.Generator(device=device).manual_seed(seed)
    k, v = _make_kv(batch, ctx, hkv, head, device, gen)
    q = torch.randn(batch, hq, head, device=device, dtype=torch.bfloat16, generator=gen)
    q4 = q[:, :, None, :]
    attended = ctx if window is None else min(ctx, window)
    k_att, v_att = k[:, :, ctx - attended:], v[:, :, ctx - attended:]
    k_att, v_att = k_att.contiguous(), v_att.contiguous()
    shape = {"batch": batch, "context": ctx, "num_q_heads": hq, "num_kv_heads": hkv,
             "head_size": head, "sliding_window": window, "block_size": block_size}
    rows: list[dict] = []
    ref = F.scaled_dot_product_attention(q4.float(), k_att.float(), v_att.float(),
                                         enable_gqa=True)[:, :, 0]
    def sdpa() -> torch.Tensor:
        return F.scaled_dot_product_attention(q4, k_att, v_att, enable_gqa=True)

    sdpa_ms = _bench_replay(sdpa)
    sdpa_eager = _bench(sdpa)
    sdpa_bytes = 2 * batch * hkv * attended * head * 2
    sdpa_out = sdpa()[:, :, 0]
    rows.append(dict(shape, kind="decode", variant="sdpa_bf16", ms=sdpa_ms, eager_ms=sdpa_eager,
                     bytes=sdpa_bytes,
                     bytes_per_s=sdpa_bytes / (sdpa_ms * 1e-3),
                     frac_copy=sdpa_bytes / (sdpa_ms * 1e-3) / copy_bps, ratio_to_sdpa=1.0,
                     rel_err=_rel_err(sdpa_out, ref)))
    seq_lens = torch.full((batch,), ctx, dtype=torch.int32, device=device)
    tiny = torch.zeros(1, device=device)
    for name, kv_dtype in modes:
        layout = LayerLayout.simple(kv_dtype, hkv, head, sliding_window=window)
        cache, block_tables = _filled_cache(layout, k, v, block_size, gen)
        cfg = (configs or {}).get(name)
        out = torch.full_like(q, float("nan"))

        def run(cache=cache, block_tables=block_tables, out=out, cfg=cfg) -> torch.Tensor:
            return paged_attention(q, cache, block_tables, seq_lens, max_seq_len=ctx, out=out,
                                   config=cfg)

        run()
        err = _rel_err(out, ref)
        ms = _bench_replay(run)
        eager_ms = _bench(run)
        host_floor = _host_us_idle(lambda: tiny.add_(1))  # this host's pace right now (`host_floor_us`)
        host_us = _host_us_idle(run)
        host_queued = _host_us(run)
        nbytes = batch * attended * layout.bytes_per_token
        rows.append(dict(shape, kind="decode", variant=f"paged_{name}", ms=ms, eager_ms=eager_ms,
                         host_us=host_us, host_us_queued=host_queued, host_floor_us=host_floor,
                         eager_over_graph=eager_ms / ms, bytes=nbytes,
                         bytes_per_s=nbytes / (ms * 1e-3), frac_copy=nbytes / (ms * 1e-3) / copy_bps,
                         ratio_to_sdpa=ms / sdpa_ms, rel_err=err,
                         nan_outputs=int(torch.isnan(out).sum())))
        if naive and name not in ("bf16", "int4_per_token_head") and window is None:
            nms = _bench(functools.partial(_naive_decode, cache, block_tables, q4, ctx), rep_ms=100)
            rows.append(dict(shape, kind="decode", variant=f"naive_dequant_sdpa_{name}", ms=nms,
                             eager_ms=nms,
                             bytes=nbytes, bytes_per_s=nbytes / (nms * 1e-3),
                             frac_copy=nbytes / (nms * 1e-3) / copy_bps,
                             ratio_to_sdpa=nms / sdpa_ms, rel_err=None))
        del cache, block_tables
        torch.cuda.empty_cache()
    return rows


def _visible_pairs(batch: int, new: int, cached: int, window: int | None = None) -> int:
    """(query, key) pairs a causal prefill of ``new`` tokens after ``cached`` ones computes."""
    if window is None:
        return batch * (new * cached + new * (new + 1) // 2)
    return batch * sum(min(cached + i + 1, window) for i in range(new))


def bench_prefill_shape(batch: int, new: int, cached: int, hq: int, hkv: int, head: int, *,
                        block_size: int = 16, device: str = "cuda", seed: int = 0,
                        modes: tuple[tuple[str, str], ...] = PREFILL_MODES,
                        configs: dict[str, AttentionConfig] | None = None,
                        rep_ms: int = 100) -> list[dict]:
    """Time causal prefill of ``new`` tokens per sequence over ``cached`` earlier tokens in a
    paged cache, beside torch SDPA bf16 causal over the whole prompt (``cached + new`` tokens
    per sequence, contiguous K/V with the kv heads repeated to the query heads); TFLOP/s count
    4 * D flops per visible (query head, key) pair."""
    ctx = cached + new
    gen = torch.Generator(device=device).manual_seed(seed)
    prob = PrefillProblem.make(batch, new, cached, hq, hkv, head, device, gen)
    shape = {"batch": batch, "new_tokens": new, "cached_tokens": cached, "num_q_heads": hq,
             "num_kv_heads": hkv, "head_size": head, "block_size": block_size}
    # SDPA bf16 causal over the whole prompt: the dense ceiling for this batch and head shape
    sdpa_ms, sdpa_tflops = prob.time_sdpa(rep_ms)
    rows: list[dict] = [dict(shape, kind="prefill", variant="sdpa_bf16_causal_whole_prompt",
                             ms=sdpa_ms, flops=prob.sdpa_flops, tflops=sdpa_tflops,
                             ratio_to_sdpa=1.0, rel_err=None)]
    ref_q, ref, qsl, seq_lens, flops = prob.q, prob.ref, prob.qsl, prob.seq_lens, prob.flops
    for name, kv_dtype in modes:
        layout = LayerLayout.simple(kv_dtype, hkv, head)
        cache, block_tables = _filled_cache(layout, prob.k, prob.v, block_size, gen)
        cfg = (configs or {}).get(name)
        out = torch.full_like(ref_q, float("nan"))

        def run(cache=cache, block_tables=block_tables, out=out, cfg=cfg) -> torch.Tensor:
            return paged_attention(ref_q, cache, block_tables, seq_lens, qsl, out=out,
                                   max_query_len=new, max_seq_len=ctx, config=cfg)

        run()
        err = _rel_err(out, ref)
        ms = _bench(run, rep_ms=rep_ms)
        tflops = flops / (ms * 1e-3) / 1e12
        rows.append(dict(shape, kind="prefill", variant=f"paged_{name}", ms=ms, flops=flops,
                         tflops=tflops, ratio_to_sdpa=tflops / sdpa_tflops, rel_err=err,
                         nan_outputs=int(torch.isnan(out).sum()),
                         kernel=prefill_kernel_name(cache, ref_q, cfg, new, ctx)))
        del cache, block_tables
        torch.cuda.empty_cache()
    return rows


def prefill_kernel_name(cache: PagedKVCache, query: torch.Tensor,
                        config: AttentionConfig | None = None, max_query_len: int = 0,
                        max_seq_len: int | None = None) -> str:
    """Which kernel `paged_attention` runs for a prefill of ``query`` over ``cache``, by the
    same decisions it takes: ``hopper`` (the warp-specialized TMA/wgmma kernel,
    `kvplan.runtime.prefill_gluon`; 8-bit caches through the dequantized workspace), ``prefill``
    (the Triton prefill kernel) or ``decode-form`` (the Triton decode kernel: INT4 without the
    workspace, fp32). ``max_query_len`` / ``max_seq_len``: the call's, which decide whether it
    has enough work for the Hopper kernel (any call does where it runs bound launches: CUDA,
    both lengths given, ``config.bound`` not False)."""
    from kvplan.runtime import prefill as pf
    from kvplan.runtime._common import KV_MODE_NONE, cache_args, interpreting
    from kvplan.runtime.attention import _use_prefill_kernel

    cfg = config or AttentionConfig()
    args = cache_args(cache)
    lay = cache.layout
    if not _use_prefill_kernel(cfg, query, args, lay.head_size):
        return "decode-form"
    quantized = args.KV_MODE != KV_MODE_NONE
    if quantized and cfg.dequant is False:  # the fused form: conversion in the Triton loop
        return "prefill"
    pg = pf.hopper_prefill_module(
        query, args.k, args.v, block_size=cache.block_size,
        group=query.shape[1] // lay.num_kv_heads, num_kv_heads=lay.num_kv_heads,
        contig=quantized, hopper=cfg.hopper, max_query_len=max_query_len,
        max_seq_len=max_seq_len, binding=(query.device.type == "cuda" and not interpreting()
                                          and cfg.bound is not False and max_seq_len is not None))
    return "hopper" if pg is not None else "prefill"


def _causal_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      chunk: int = 256) -> torch.Tensor:
    """fp32 causal attention of the last ``q.shape[2]`` tokens ([B, H, Lq, D]) over ``k``/``v``
    [B, H, Lk, D] (bottom-right aligned), computed ``chunk`` queries at a time."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    out = torch.empty(b, h, lq, d, dtype=torch.float32, device=q.device)
    keys = torch.arange(lk, device=q.device)
    for s in range(b):
        kf, vf = k[s].float(), v[s].float()
        for c in range(0, lq, chunk):
            qc = q[s, :, c:c + chunk].float()
            scores = qc @ kf.transpose(1, 2) / math.sqrt(d)
            pos = torch.arange(c, c + qc.shape[1], device=q.device) + (lk - lq)
            scores.masked_fill_(keys[None, None, :] > pos[None, :, None], float("-inf"))
            out[s, :, c:c + chunk] = torch.softmax(scores, dim=-1) @ vf
    return out


def bench_write(num_tokens: int, hkv: int, head: int, copy_bps: float, *, block_size: int = 16,
                device: str = "cuda", seed: int = 0,
                modes: tuple[tuple[str, str], ...] = DECODE_MODES,
                rows_per_program: int | None = None, num_warps: int | None = None,
                kernel: str | None = None) -> list[dict]:
    """Time quantize-on-write of ``num_tokens`` new tokens into a larger cache (shuffled blocks).

    Writes are short kernels whose inputs fit in L2, so they are timed as CUDA-graph replays
    that rotate over enough (key, value, slots, cache) sets to exceed 4x the L2 size: every
    replay reads its inputs from DRAM, and host launch overhead is excluded (it is reported
    separately as ``launch_ms``, the `_bench` time of one eager call).
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
    num_blocks = max(4 * math.ceil(num_tokens / block_size), 64)
    rows = []
    kw: dict[str, Any] = {"rows_per_program": rows_per_program}
    if num_warps:
        kw["num_warps"] = num_warps
    if kernel:
        kw["kernel"] = kernel
    for name, kv_dtype in modes:
        layout = LayerLayout.simple(kv_dtype, hkv, head)
        per_set = (2 * num_tokens * hkv * head * 2 + num_tokens * layout.bytes_per_token)
        sets = max(2, min(64, math.ceil(4 * l2 / per_set)))
        work = []
        for _ in range(sets):
            key = torch.randn(num_tokens, hkv, head, device=device, dtype=torch.bfloat16,
                              generator=gen)
            value = torch.randn(num_tokens, hkv, head, device=device, dtype=torch.bfloat16,
                                generator=gen)
            cache = allocate_kv_cache(layout, num_blocks, block_size, device)
            # whole blocks in a random order, tokens contiguous inside a block (as vLLM allocates)
            blocks = torch.randperm(num_blocks, device=device, generator=gen)
            j = torch.arange(num_tokens, device=device)
            slots = blocks[j // block_size] * block_size + j % block_size
            work.append((cache, key, value, slots))

        def run_all(work=work) -> None:
            for cache, key, value, slots in work:
                write_kv_cache(cache, key, value, slots, **kw)

        ms = _bench_graph(run_all, replays=max(1, 64 // sets)) / sets
        c0, k0, v0, s0 = work[0]
        launch_ms = _bench(functools.partial(write_kv_cache, c0, k0, v0, s0, **kw))
        nbytes = (2 * k0.numel() * k0.element_size() + num_tokens * layout.bytes_per_token
                  + s0.numel() * s0.element_size())
        rows.append(dict(kind="write", variant=f"write_{name}", num_tokens=num_tokens,
                         num_kv_heads=hkv, head_size=head, block_size=block_size, ms=ms,
                         launch_ms=launch_ms, bytes=nbytes, bytes_per_s=nbytes / (ms * 1e-3),
                         frac_copy=nbytes / (ms * 1e-3) / copy_bps))
        del work
        torch.cuda.empty_cache()
    return rows


def run_suite(device: str = "cuda", quick: bool = False,
              progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Run the benchmark suite; returns JSON-serialisable results.

    ``progress(label, done, total)`` is called before each step (for a progress bar).
    """
    import triton

    if not torch.cuda.is_available() or not str(device).startswith("cuda"):
        raise RuntimeError("kvplan bench needs a CUDA GPU (torch.cuda.is_available() is False)")
    shapes = QUICK_SHAPES if quick else FULL_SHAPES
    write_tokens = WRITE_TOKENS_QUICK if quick else WRITE_TOKENS_FULL
    prefill_shapes = QUICK_PREFILL_SHAPES if quick else PREFILL_SHAPES
    total = 1 + len(shapes) + len(prefill_shapes) + len(write_tokens)
    step = 0

    def tick(label: str) -> None:
        nonlocal step
        if progress is not None:
            progress(label, step, total)
        step += 1

    with torch.cuda.device(torch.device(device)):  # the L2 flush is the current device's
        tick("copy bandwidth")
        copy = copy_bandwidth(device)
        rows: list[dict] = []
        for (b, ctx, hq, hkv, head, window) in shapes:
            tick(f"decode B={b} ctx={ctx} {hq}/{hkv}x{head}" + (f" W={window}" if window else ""))
            rows += bench_decode_shape(b, ctx, hq, hkv, head, window, copy["bytes_per_s"],
                                       device=device)
        for (b, new, cached, hq, hkv, head) in prefill_shapes:
            tick(f"prefill B={b} {new} new over {cached} {hq}/{hkv}x{head}")
            rows += bench_prefill_shape(b, new, cached, hq, hkv, head, device=device)
        for n in write_tokens:
            tick(f"write {n} tokens")
            rows += bench_write(n, 8, 128, copy["bytes_per_s"], device=device,
                                modes=ATTENTION_MODES)
    if progress is not None:
        progress("done", total, total)
    props = torch.cuda.get_device_properties(device)
    return {
        "schema_version": BENCH_SCHEMA_VERSION,
        "kind": BENCH_KIND,
        "kvplan_version": kvplan_version,
        "device": torch.cuda.get_device_name(device),
        "num_sms": props.multi_processor_count,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": _dt.date.today().isoformat(),
        "quick": quick,
        "timing": TIMING,
        "copy_bandwidth": copy,
        "rows": rows,
    }


def format_table(results: dict) -> str:
    """Markdown tables (decode attention, writes) of a ``run_suite`` result."""
    copy = results["copy_bandwidth"]["bytes_per_s"]
    lines = [f"Device: {results['device']} — torch {results['torch']}, triton {results['triton']}, "
             f"{results['date']}; measured copy bandwidth {copy / 1e12:.2f} TB/s", ""]
    lines += ["| shape (B, ctx, Hq, Hkv, D, W) | variant | GPU time (ms) | eager call (ms) | "
              "eager / graph | host (us/call) | host floor (us) | bytes (MB) | GB/s | of copy BW | "
              "vs SDPA bf16 | rel err |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        if r["kind"] != "decode":
            continue
        shape = (f"{r['batch']}, {r['context']}, {r['num_q_heads']}, {r['num_kv_heads']}, "
                 f"{r['head_size']}, {r['sliding_window'] or '-'}")
        err = "" if r.get("rel_err") is None else f"{r['rel_err']:.4f}"
        eager = r.get("eager_ms", float("nan"))
        host = "" if r.get("host_us") is None else f"{r['host_us']:.1f}"
        floor = "" if r.get("host_floor_us") is None else f"{r['host_floor_us']:.1f}"
        lines.append(f"| {shape} | {r['variant']} | {r['ms']:.4f} | "
                     f"{eager:.4f} | {eager / r['ms']:.2f}x | {host} | {floor} | "
                     f"{r['bytes'] / 1e6:.1f} | "
                     f"{r['bytes_per_s'] / 1e9:.0f} | {100 * r['frac_copy']:.0f}% | "
                     f"{r['ratio_to_sdpa']:.3f}x | {err} |")
    prefill = [r for r in results["rows"] if r["kind"] == "prefill"]
    if prefill:
        lines += ["", "| prefill (B, new, cached, Hq, Hkv, D) | variant | kernel | time (ms) | "
                  "TFLOP/s | vs SDPA bf16 causal | rel err |", "|---|---|---|---|---|---|---|"]
        for r in prefill:
            shape = (f"{r['batch']}, {r['new_tokens']}, {r['cached_tokens']}, "
                     f"{r['num_q_heads']}, {r['num_kv_heads']}, {r['head_size']}")
            err = "" if r.get("rel_err") is None else f"{r['rel_err']:.4f}"
            lines.append(f"| {shape} | {r['variant']} | {r.get('kernel', '')} | {r['ms']:.3f} | "
                         f"{r['tflops']:.0f} | {r['ratio_to_sdpa']:.3f}x | {err} |")
    lines += ["", "| write: tokens x (Hkv, D) | variant | GPU time (ms) | eager call (ms) | bytes (MB) | "
              "GB/s | of copy BW |", "|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        if r["kind"] != "write":
            continue
        lines.append(f"| {r['num_tokens']} x ({r['num_kv_heads']}, {r['head_size']}) | "
                     f"{r['variant']} | {r['ms']:.4f} | {r.get('launch_ms', float('nan')):.4f} | "
                     f"{r['bytes'] / 1e6:.2f} | "
                     f"{r['bytes_per_s'] / 1e9:.0f} | {100 * r['frac_copy']:.0f}% |")
    return "\n".join(lines)


def plot(results: dict, path_png: str) -> None:
    """Bar chart of decode time relative to SDPA bf16 per shape and variant (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("plotting needs matplotlib: pip install matplotlib") from exc
    rows = [r for r in results["rows"] if r["kind"] == "decode"
            and not r["variant"].startswith("naive")]
    shapes: list[str] = []
    variants: list[str] = []
    for r in rows:
        s = f"B{r['batch']} ctx{r['context']}\n{r['num_q_heads']}/{r['num_kv_heads']}x{r['head_size']}"
        if r["sliding_window"]:
            s += f" W{r['sliding_window']}"
        r["_label"] = s
        if s not in shapes:
            shapes.append(s)
        if r["variant"] not in variants:
            variants.append(r["variant"])
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(shapes)), 4.5))
    width = 0.8 / max(1, len(variants))
    for i, var in enumerate(variants):
        ys = [next((r["ratio_to_sdpa"] for r in rows if r["_label"] == s and r["variant"] == var),
                   float("nan")) for s in shapes]
        ax.bar([x + i * width for x in range(len(shapes))], ys, width, label=var)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(shapes))])
    ax.set_xticklabels(shapes, fontsize=8)
    ax.set_ylabel("decode time / SDPA bf16 time")
    ax.set_title(f"kvplan paged decode attention — {results['device']} ({results['date']})")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=len(variants) or 1,
              frameon=False)  # below the axis: never over a bar
    fig.tight_layout()
    fig.savefig(path_png, dpi=120)
    plt.close(fig)
