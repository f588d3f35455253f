#!/usr/bin/env python
"""Host cost of an eager decode call (CUDA GPU): host microseconds per call, and the eager time
beside the CUDA-graph replay time (L2 flushed before each, as in the suite).

Two host measures: ``idle`` is one call issued to an idle GPU (synchronized before each call,
median of 200), the suite's column; ``queued N`` is N calls back to back, which waits on the
GPU once its launch queue is full (so it tends to the GPU time for long calls). ``idle`` is
given for the bound launches (`kvplan.runtime.bound`, the default for eager decode) and for the
ordinary path (``AttentionConfig(bound=False)``: `launch_cached` per kernel).

    python bench/launch_cost.py --shape 8,8192,32,8,128 --modes int8_per_token_head,bf16
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import triton
import triton.language as tl

from kvplan.runtime import bound
from kvplan.runtime._common import launch_cached
from kvplan.runtime.attention import AttentionConfig, paged_attention
from kvplan.runtime.bench import DECODE_MODES, _bench, _bench_replay, _filled_cache, _host_us, _host_us_idle, _make_kv
from kvplan.runtime.layout import LayerLayout


def _ints(count: int):
    """An argparse type: ``count`` comma-separated integers (0 or more: a prefill's cached
    tokens may be 0), as a string (the tables print it back), or argparse's one-line usage
    error."""
    def parse(text: str) -> str:
        parts = text.split(",")
        if len(parts) != count or not all(p.strip().isdigit() for p in parts):
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {count} comma-separated integers")
        return text
    return parse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", default=[], type=_ints(5),
                    help="decode: B,CTX,HQ,HKV,D")
    ap.add_argument("--prefill", action="append", default=[], type=_ints(6),
                    help="prefill: B,NEW,CACHED,HQ,HKV,D; eager time and host time of the Hopper "
                         "prefill kernel and of the Triton prefill kernel (the size threshold "
                         "`prefill_gluon.MIN_DEFAULT_FLOPS` / `MIN_WORKSPACE_FLOPS` choose between "
                         "them)")
    ap.add_argument("--prefill-loop", action="append", default=[], type=_ints(6),
                    metavar="B,NEW,CACHED,HQ,HKV,D",
                    help="host time of eager prefill calls whose token and sequence counts "
                         "change every call (the first sequence's chunk shrinks by 7 tokens a "
                         "call over 8 calls, the others keep NEW, and every other call leaves "
                         "the last of the B sequences out: a continuous-batching loop's "
                         "batches), bound beside ordinary, and bound with all B sequences "
                         "every call")
    ap.add_argument("--modes", default=",".join(m for m, _ in DECODE_MODES))
    ap.add_argument("--floor", action="store_true",
                    help="first print the host time of one minimal launch on this host: torch's "
                         "own add_, and a 3-argument Triton kernel through launch_cached")
    ap.add_argument("--parts", action="store_true",
                    help="also print where a bound call's host time goes: the call key and "
                         "each kernel's driver launch inside the bound call, and one allocation "
                         "of its scratch for scale (medians of 200 calls on an idle GPU), with "
                         "the split-K merge launched with and without its "
                         "programmatic-dependent-launch attribute")
    ap.add_argument("--merge", default=None, choices=("fused", "kernel"),
                    help="decode split-K merge (AttentionConfig.merge; default: the runtime's)")
    ap.add_argument("--write", action="append", default=[], type=_ints(1),
                    help="TOKENS: host microseconds of one eager write_kv_cache call of TOKENS "
                         "tokens x (8 kv heads, head 128) per mode (idle GPU, median of 200; "
                         "and 100 calls back to back)")
    ap.add_argument("--drift", type=int, default=0, metavar="N",
                    help="per shape and mode, N rounds alternating this host's floor (torch's "
                         "add_ on an idle GPU) with the bound call's idle host time (each a "
                         "median of 200): whether the call's spread across runs is the host's")
    ap.add_argument("--profile", action="store_true",
                    help="also print where the host time of each call goes (cProfile)")
    args = ap.parse_args()
    modes = dict(DECODE_MODES)
    if args.floor:
        _floor()
    if args.prefill:
        _prefill_table(args.prefill, args.modes.split(","), modes, args.profile)
    if args.write:
        _write_table([int(t) for t in args.write], args.modes.split(","), modes)
    if args.prefill_loop:
        _prefill_loop(args.prefill_loop, args.modes.split(","), modes)
    if not args.shape:
        return
    print("| shape | mode | graph (ms) | eager (ms) | eager/graph | host idle (us) | "
          "host idle, ordinary path (us) | host queued 10 / 100 / 400 (us/call) |")
    print("|---|---|---|---|---|---|---|---|")
    base_cfg = AttentionConfig(merge=args.merge)
    ordinary_cfg = AttentionConfig(bound=False, merge=args.merge)
    for shape in args.shape:
        b, ctx, hq, hkv, d = (int(x) for x in shape.split(","))
        gen = torch.Generator(device="cuda").manual_seed(0)
        k, v = _make_kv(b, ctx, hkv, d, "cuda", gen)
        q = torch.randn(b, hq, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        lens = torch.full((b,), ctx, dtype=torch.int32, device="cuda")
        for name in args.modes.split(","):
            layout = LayerLayout.simple(modes.get(name, name), hkv, d)  # or any cache dtype
            cache, bt = _filled_cache(layout, k, v, 16, gen)
            out = torch.empty_like(q)

            def run(cache=cache, bt=bt, out=out, q=q, lens=lens, ctx=ctx, config=base_cfg):
                return paged_attention(q, cache, bt, lens, max_seq_len=ctx, out=out,
                                       config=config)

            graph = _bench_replay(run)
            eager = _bench(run)
            idle = _host_us_idle(run)
            ordinary = _host_us_idle(lambda: run(config=ordinary_cfg))
            queued = [_host_us(run, n) for n in (10, 100, 400)]
            print(f"| {shape} | {name} | {graph:.4f} | {eager:.4f} | {eager / graph:.2f}x | "
                  f"{idle:.1f} | {ordinary:.1f} | {' / '.join(f'{x:.1f}' for x in queued)} |",
                  flush=True)
            if args.drift:
                _drift(run, args.drift, f"{shape} {name}")
            if args.parts:
                _parts(run, cache, q, out, bt, lens, ctx)
            if args.profile:
                _profile(run, 18)
            del cache, bt
            torch.cuda.empty_cache()


def _write_table(tokens: list[int], names: list[str], modes: dict) -> None:
    """Host time of eager writes (``--write``)."""
    from kvplan.runtime.cache import allocate_kv_cache
    from kvplan.runtime.write import write_kv_cache

    print("| write tokens | mode | host idle (us) | host queued 100 (us/call) | "
          "ordinary host idle (us) | ordinary queued 100 (us/call) | bound |")
    print("|---|---|---|---|---|---|---|")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for n in tokens:
        key = torch.randn(n, 8, 128, device="cuda", generator=gen).to(torch.bfloat16)
        value = torch.randn(n, 8, 128, device="cuda", generator=gen).to(torch.bfloat16)
        slots = torch.randperm(4 * n, device="cuda", generator=gen)[:n]
        for name in names:
            layout = LayerLayout.simple(modes.get(name, name), 8, 128)
            cache = allocate_kv_cache(layout, -(-4 * n // 16), 16, "cuda")

            def run(cache=cache, bound_=None):  # bound launches from the third call on
                write_kv_cache(cache, key, value, slots, bound=bound_)

            def ordinary(cache=cache):
                run(cache, False)

            run()
            idle, queued = _host_us_idle(run), _host_us(run, 100)
            bound_calls = sum(isinstance(c, bound.BoundCall)
                              for c in cache.__dict__["_write_plans"][4].values())
            print(f"| {n} | {name} | {idle:.1f} | {queued:.1f} | "
                  f"{_host_us_idle(ordinary):.1f} | {_host_us(ordinary, 100):.1f} | "
                  f"{bound_calls} |", flush=True)


def _prefill_table(shapes: list[str], names: list[str], modes: dict, profile: bool) -> None:
    """Eager prefill calls on the two prefill kernels (see ``--prefill``); with ``profile``,
    where the host time of each call goes."""
    from kvplan.runtime.bench import PrefillProblem

    print("| prefill shape | mode | kernel | GFLOP | eager (ms) | TFLOP/s | host idle (us) | "
          "ordinary eager (ms) | ordinary host idle (us) | bound |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape in shapes:
        b, new, cached, hq, hkv, d = (int(x) for x in shape.split(","))
        gen = torch.Generator(device="cuda").manual_seed(0)
        pp = PrefillProblem.make(b, new, cached, hq, hkv, d, "cuda", gen)
        for name in names:
            if name not in ("bf16", "int8_per_token_head"):
                continue
            layout = LayerLayout.simple(modes[name], hkv, d)
            cache, bt = _filled_cache(layout, pp.k, pp.v, 16, gen)
            out = torch.empty_like(pp.q)
            for kernel, hopper in (("hopper", True), ("triton", False)):
                # the bound launches (the default for eager calls with both lengths given),
                # then the ordinary path (`launch_cached` per kernel) beside them
                runs = []
                for bound_ in (None, False):
                    cfg = AttentionConfig(kernel="prefill", hopper=hopper, bound=bound_)

                    def run(cache=cache, bt=bt, out=out, cfg=cfg, new=new, ctx=new + cached):
                        return paged_attention(pp.q, cache, bt, pp.seq_lens, pp.qsl, out=out,
                                               config=cfg, max_query_len=new, max_seq_len=ctx)
                    runs.append(run)
                try:
                    ms, ms_ordinary = _bench(runs[0]), _bench(runs[1])
                except ValueError as exc:
                    print(f"| {shape} | {name} | {kernel} | - | {exc} | | | | | |")
                    continue
                print(f"| {shape} | {name} | {kernel} | {pp.flops / 1e9:.1f} | {ms:.4f} | "
                      f"{pp.flops / (ms * 1e-3) / 1e12:.0f} | {_host_us_idle(runs[0]):.1f} | "
                      f"{ms_ordinary:.4f} | {_host_us_idle(runs[1]):.1f} | "
                      f"{_bound_count(cache)} |", flush=True)
                run = runs[0]
                if profile:
                    _profile(run, 12)
            del cache, bt
        torch.cuda.empty_cache()


def _prefill_loop(shapes: list[str], names: list[str], modes: dict) -> None:
    """Eager prefill calls cycling through 8 token counts (``--prefill-loop``), default kernel
    choice: host time per call on an idle GPU, bound launches (the key leaves the token count
    free, and the sequence count within its bucket) with B sequences every call and with the
    last one left out every other call, beside the ordinary path over the latter."""
    print("| prefill loop | mode | host idle, bound, B sequences (us) | host idle, bound, "
          "B and B-1 (us) | host idle, ordinary, B and B-1 (us) | bound calls |")
    print("|---|---|---|---|---|---|")
    for shape in shapes:
        b, new, cached, hq, hkv, d = (int(x) for x in shape.split(","))
        gen = torch.Generator(device="cuda").manual_seed(0)
        k, v = _make_kv(b, cached + new, hkv, d, "cuda", gen)
        loops: dict[bool, list] = {}
        for change in (False, True):
            loops[change] = []
            for i in range(8):
                lens = [new - 7 * i] + [new] * (b - 1 - (i % 2 if change and b > 1 else 0))
                qsl = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()],
                                   dtype=torch.int32, device="cuda")
                q = torch.randn(sum(lens), hq, d, device="cuda", generator=gen).to(torch.bfloat16)
                seq_lens = torch.tensor([cached + n for n in lens], dtype=torch.int32,
                                        device="cuda")
                loops[change].append((q, torch.empty_like(q), qsl, seq_lens))
        for name in names:
            layout = LayerLayout.simple(modes.get(name, name), hkv, d)
            cache, bt = _filled_cache(layout, k, v, 16, gen)
            turn = [0]

            def run(cache=cache, bt=bt, cfg=None, change=True):
                q, out, qsl, seq_lens = loops[change][turn[0] % 8]
                turn[0] += 1
                return paged_attention(q, cache, bt[:seq_lens.shape[0]], seq_lens, qsl, out=out,
                                       config=cfg, max_query_len=new, max_seq_len=cached + new)

            for _ in range(3):
                run(change=False)
                run()
            ordinary = AttentionConfig(bound=False)
            fixed = _host_us_idle(lambda run=run: run(change=False))
            print(f"| {shape} | {name} | {fixed:.1f} | {_host_us_idle(run):.1f} | "
                  f"{_host_us_idle(lambda run=run: run(cfg=ordinary)):.1f} | "
                  f"{_bound_count(cache)} |", flush=True)
            del cache, bt
        torch.cuda.empty_cache()


def _bound_count(cache) -> int:
    """How many call signatures over ``cache`` run bound launches (0: the ordinary path ran)."""
    from kvplan.runtime.attention import _current_bound_calls
    return sum(isinstance(c, bound.BoundCall) for c in (_current_bound_calls(cache) or {}).values())


def _profile(run, lines: int) -> None:
    """cProfile of 300 calls, each issued to an idle GPU: the ``lines`` largest own times."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    for _ in range(300):
        torch.cuda.synchronize()
        prof.enable()
        run()
        prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(lines)


def _parts(run, cache, q, out, bt, lens, ctx) -> None:
    """Time the pieces of one bound decode call (see ``--parts``): its key, each driver launch
    inside the bound call itself (its launch function wrapped by a timer), and for scale one
    allocation of its scratch, which the bound call keeps per stream instead."""
    import time

    from kvplan.runtime import attention

    run()
    calls = [c for c in (attention._current_bound_calls(cache) or {}).values() if c]
    if not calls:
        print("parts: no bound call", flush=True)
        return
    call = calls[0]
    dev = torch.cuda.current_device()
    stream = torch.cuda.current_stream().cuda_stream
    driver = call._launch
    samples: dict[str, list[float]] = {}
    tags: list[str] = []

    def timed(name, fn):
        t0 = time.perf_counter()
        r = fn()
        samples.setdefault(name, []).append(time.perf_counter() - t0)
        return r

    def launch(*a):  # the bound call's launches, one tag each in order
        return timed(tags.pop(0), lambda: driver(*a))

    call._launch = launch
    try:
        for pdl in (True, False):
            for k in call.kernels:
                if k.config.numAttrs:
                    k.attrs[0].value[0] = int(pdl)
            for _ in range(200):
                torch.cuda.synchronize()
                timed("key", lambda: attention._call_key(q, out, bt, lens, ctx, None, None, dev))
                timed("scratch allocation", lambda: torch.empty(max(call.scratch_bytes, 1),
                                                                dtype=torch.uint8, device="cuda"))
                tags[:] = [f"kernel {i}" + ("" if i == 0 else (" (PDL)" if pdl else " (no PDL)"))
                           for i in range(len(call.kernels))]
                assert call((q, out, bt, lens), stream)
            torch.cuda.synchronize()
    finally:
        call._launch = driver
        for k in call.kernels:
            if k.config.numAttrs:
                k.attrs[0].value[0] = 1
    med = {name: sorted(v)[len(v) // 2] * 1e6 for name, v in samples.items()}
    print("parts (us): " + ", ".join(f"{n} {t:.1f}" for n, t in med.items())
          + f"; {len(call.kernels)} kernels, device {dev}", flush=True)


@triton.jit
def _add_one(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)


def _drift(run, rounds: int, label: str) -> None:
    """``--drift``: the host floor and the call, alternating, so a slow stretch of the host
    shows in both columns of the same round."""
    x = torch.zeros(4096, device="cuda")
    for i in range(rounds):
        floor = _host_us_idle(lambda: x.add_(1))
        call = _host_us_idle(run)
        print(f"drift {label} round {i}: add_ {floor:.1f} us, call {call:.1f} us, "
              f"call - add_ {call - floor:.1f} us", flush=True)


def _floor() -> None:
    """Host microseconds of a minimal launch (idle GPU before each call, median of 200)."""
    x = torch.zeros(4096, device="cuda")
    kw = {"BLOCK": 1024}
    launch_cached(_add_one, (4,), (x, 4096), kw)
    with bound.recording() as rec:
        launch_cached(_add_one, (4,), (x, 4096), kw)
    call = bound.bind(rec, (x,), ())
    stream = torch.cuda.current_stream().cuda_stream
    for name, fn in (("torch add_", lambda: x.add_(1)),
                     ("torch.empty (1 MB)", lambda: torch.empty(1 << 20, device="cuda")),
                     ("triton kernel via launch_cached", lambda: launch_cached(_add_one, (4,), (x, 4096), kw)),
                     ("triton kernel via fn[grid]", lambda: _add_one[(4,)](x, 4096, **kw)),
                     ("triton kernel bound (kvplan.runtime.bound)", lambda: call((x,), stream))):
        print(f"floor: {name}: idle {_host_us_idle(fn):.1f} us, queued 100 {_host_us(fn, 100):.1f} "
              "us/call", flush=True)
    torch.cuda.synchronize()
    assert int(x[0]) > 0


if __name__ == "__main__":
    main()
