"""Per-program timeline of the swapped-operand Gluon decode kernel (INT8/FP8 per-token-head):
when each one-warp program starts, when its first tile lands, when it ends, and on which
multiprocessor. Answers where a wave of programs loses time against a perfect stream: the
ramp-up (launch spread, first-tile latency) and the drain (programs ending unevenly).

    python bench/trace_decode.py --shape 64,4096,32,8,128 --mode int8_per_token_head
    python bench/trace_decode.py --shape 64,4096,32,8,128 --splits 1,2 --out trace.json

Needs a CUDA GPU (Hopper for the Gluon kernel). Times are %globaltimer nanoseconds; the trace
adds two timer reads and four stores per program.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def analyse(trace, num_sms: int) -> dict:
    """Summary figures of one trace (a [programs, 4] int64 tensor: start, first, end, sm)."""
    t = trace.double().cpu()
    t0 = float(t[:, 0].min())
    start = (t[:, 0] - t0) / 1e3  # us
    first = (t[:, 1] - t[:, 0]) / 1e3
    end = (t[:, 2] - t0) / 1e3
    dur = end - start
    span = float(end.max())
    sms = t[:, 3].long()
    per_sm = [int((sms == i).sum()) for i in range(num_sms)]
    sm_end = [float(end[sms == i].max()) if per_sm[i] else 0.0 for i in range(num_sms)]
    busy = float(dur.sum())
    # concurrency-weighted efficiency: program-time delivered over what the peak number of
    # co-resident programs could have delivered in the span
    peak = max(per_sm) * num_sms
    ends = sorted(end.tolist())
    n = len(ends)
    return {
        "programs": n, "span_us": span,
        "start_us": {q: _pct(start.tolist(), q) for q in (0.5, 0.9, 1.0)},
        "first_tile_us": {q: _pct(first.tolist(), q) for q in (0.1, 0.5, 0.9, 1.0)},
        "duration_us": {q: _pct(dur.tolist(), q) for q in (0.0, 0.1, 0.5, 0.9, 1.0)},
        "end_us": {q: ends[min(n - 1, round(q * (n - 1)))] for q in (0.0, 0.1, 0.5, 0.9, 0.99, 1.0)},
        "duration_cv": float(dur.std() / dur.mean()),
        "programs_per_sm": {"min": min(per_sm), "max": max(per_sm)},
        "sm_end_us": {"min": min(sm_end), "median": _pct(sm_end, 0.5), "max": max(sm_end)},
        "mean_duration_by_programs_on_sm": {
            str(c): float(sum(dur[sms == i].sum() for i in range(num_sms) if per_sm[i] == c)
                          / max(1, sum(c for i in range(num_sms) if per_sm[i] == c)))
            for c in sorted(set(per_sm)) if c},
        "occupancy_efficiency": busy / (peak * span) if peak else 0.0,
        "drain_us": span - float(end.mean()),
    }


def run(shape: tuple[int, ...], mode: str, splits: list[int], seed: int = 0) -> list[dict]:
    import torch

    from kvplan.runtime import attention_gluon as ag
    from kvplan.runtime._common import cache_args, num_sms
    from kvplan.runtime.attention import _LOG2E, _merge_splits, _partials
    from kvplan.runtime.bench import _bench_replay, _flush_l2, _make_kv, _paged_fill
    from kvplan.runtime.layout import LayerLayout

    batch, ctx, hq, hkv, head = shape
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(seed)
    k, v = _make_kv(batch, ctx, hkv, head, dev, gen)
    layout = LayerLayout.simple(mode, hkv, head)
    cache, block_tables = _paged_fill(layout, k, v, 16, gen)
    del k, v
    args = cache_args(cache)
    q = torch.randn(batch, hq, head, device=dev, dtype=torch.bfloat16, generator=gen)
    out = torch.empty_like(q)
    seq_lens = torch.full((batch,), ctx, dtype=torch.int32, device=dev)
    group = hq // hkv
    block_n = 32 if head == 64 else 16
    sms = num_sms(q.device)
    rows = []
    for ns in splits:
        po, pml = _partials(out, ns)
        trace = torch.zeros(batch * hkv * ns, 4, dtype=torch.int64, device=dev)
        kw = dict(group=group, head=head, block_size=16, q_scale=head ** -0.5 * _LOG2E,
                  sliding_window=0, num_splits=ns, block_n=block_n, pipe=2, swap=True,
                  pdl=ns > 1)

        def call(tr=None):
            ag.launch(q, out, po, pml, args, block_tables, seq_lens, trace=tr, **kw)
            if ns > 1:
                _merge_splits(po, pml, out, ns, head, True)

        ms = _bench_replay(call)
        ms_traced = _bench_replay(lambda: call(trace))
        spans = []
        summaries = []
        for _ in range(5):  # five cold-L2 traces; report the median-span one
            _flush_l2()
            torch.cuda.synchronize()
            call(trace)
            torch.cuda.synchronize()
            s = analyse(trace.view(-1, 4), sms)
            summaries.append(s)
            spans.append(s["span_us"])
        s = sorted(summaries, key=lambda x: x["span_us"])[len(summaries) // 2]
        nbytes = batch * ctx * layout.bytes_per_token
        rows.append({"shape": list(shape), "mode": mode, "splits": ns, "ms": ms,
                     "ms_traced": ms_traced, "tbps": nbytes / (ms * 1e-3) / 1e12,
                     "spans_us": spans, **s})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", required=True,
                    help="B,CTX,HQ,HKV,D (repeatable)")
    ap.add_argument("--mode", default="int8_per_token_head")
    ap.add_argument("--splits", default="2", help="comma-separated split counts")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rows = []
    for sh in a.shape:
        shape = tuple(int(x) for x in sh.split(","))
        for r in run(shape, a.mode, [int(s) for s in a.splits.split(",")]):
            rows.append(r)
            print(f"{sh} {a.mode} splits={r['splits']}: {r['ms'] * 1e3:.1f} us "
                  f"({r['tbps']:.2f} TB/s), traced {r['ms_traced'] * 1e3:.1f} us; span "
                  f"{r['span_us']:.1f} us; start p50/p90/max {r['start_us'][0.5]:.2f}/"
                  f"{r['start_us'][0.9]:.2f}/{r['start_us'][1.0]:.2f}; first tile p10/p50/p90 "
                  f"{r['first_tile_us'][0.1]:.2f}/{r['first_tile_us'][0.5]:.2f}/"
                  f"{r['first_tile_us'][0.9]:.2f}; duration min/p10/p50/p90/max "
                  + "/".join(f"{r['duration_us'][q]:.1f}" for q in (0.0, 0.1, 0.5, 0.9, 1.0))
                  + f" (cv {r['duration_cv']:.3f}); end p0/p10/p50/p90/p99/max "
                  + "/".join(f"{r['end_us'][q]:.1f}" for q in (0.0, 0.1, 0.5, 0.9, 0.99, 1.0))
                  + f"; drain {r['drain_us']:.1f} us; programs/SM {r['programs_per_sm']}; "
                  f"mean duration by programs on SM {json.dumps(r['mean_duration_by_programs_on_sm'])}; "
                  f"occupancy efficiency {r['occupancy_efficiency']:.3f}", flush=True)
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
