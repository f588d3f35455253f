#!/usr/bin/env python
"""How the L2 flush between repetitions changes decode timings.

`triton.testing.do_bench` (the suite's timer until round 13) empties L2 before each repetition by
zeroing a 256 MB buffer. That leaves L2 full of dirty lines, which are written back to DRAM while
the timed kernel streams through L2: the kernel is charged for the flush's own write-back. This
script times the same CUDA-graph replays after three flushes:

* ``zero``: do_bench's (dirty lines left in L2);
* ``read``: reading a 256 MB buffer (clean lines left in L2; the suite's flush since round 13,
  `kvplan.runtime.bench._flush_l2`);
* ``zero+read``: zeroing then reading (the dirty lines are written back before the timing starts).

    python bench/flush_effect.py --shape 64,4096,32,8,128 --shape 128,2048,64,8,64

Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FLUSHES = ("zero", "read", "zero+read")


def main() -> None:
    import torch
    import torch.nn.functional as F

    from kvplan.runtime.attention import paged_attention
    from kvplan.runtime.bench import _bench, _capture, _flush_l2, _make_kv, _paged_fill
    from kvplan.runtime.layout import LayerLayout

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", required=True, help="B,CTX,HQ,HKV,D (repeatable)")
    ap.add_argument("--modes", default="int8_per_token_head,fp8_per_token_head,bfloat16")
    a = ap.parse_args()
    buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

    def zero():  # triton.testing.do_bench's flush
        buf.zero_()

    def zero_read():
        zero()
        _flush_l2()

    flushes = {"zero": zero, "read": _flush_l2, "zero+read": zero_read}
    for sh in a.shape:
        batch, ctx, hq, hkv, head = (int(x) for x in sh.split(","))
        gen = torch.Generator(device="cuda").manual_seed(0)
        k, v = _make_kv(batch, ctx, hkv, head, "cuda", gen)
        q = torch.randn(batch, hq, head, device="cuda", dtype=torch.bfloat16, generator=gen)
        graphs = {"sdpa_bf16": _capture(lambda: F.scaled_dot_product_attention(
            q[:, :, None], k, v, enable_gqa=True))}
        keep = []
        seq_lens = torch.full((batch,), ctx, dtype=torch.int32, device="cuda")
        for mode in a.modes.split(","):
            cache, bt = _paged_fill(LayerLayout.simple(mode, hkv, head), k, v, 16, gen)
            out = torch.empty_like(q)
            keep.append((cache, bt, out))
            graphs[f"paged_{mode}"] = _capture(
                lambda cache=cache, bt=bt, out=out: paged_attention(q, cache, bt, seq_lens,
                                                                    out=out, max_seq_len=ctx))
        for rep in range(2):
            for name in FLUSHES:
                ms = {g: _bench(graph.replay, rep_ms=100, flush=flushes[name])
                      for g, graph in graphs.items()}
                base = ms["sdpa_bf16"]
                print(f"{sh} flush={name} (pass {rep}): " + ", ".join(
                    f"{g} {t * 1e3:.1f} us" + ("" if g == "sdpa_bf16" else f" ({t / base:.3f}x)")
                    for g, t in ms.items()), flush=True)
        del keep, graphs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
