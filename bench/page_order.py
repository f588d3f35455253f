#!/usr/bin/env python
"""Decode time against the order of the cache's pages: randomly permuted block tables (what the
suite measures, and what a long-running server's block pool looks like) against pages in order
(a fresh pool), beside bf16 SDPA on contiguous K/V. Answers how much of the gap to SDPA is the
paged layout's memory locality rather than the kernel.

    python bench/page_order.py --shape 128,2048,64,8,64 --shape 64,4096,32,8,128 \\
        --modes bfloat16,int8_per_token_head

Needs a CUDA GPU; graph-replay timing with L2 flushed, as the suite.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import torch
    import torch.nn.functional as F

    from kvplan.runtime.attention import paged_attention
    from kvplan.runtime.bench import _bench_replay, _make_kv, _paged_fill, copy_bandwidth
    from kvplan.runtime.layout import LayerLayout

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", required=True, help="B,CTX,HQ,HKV,D (repeatable)")
    ap.add_argument("--modes", default="bfloat16,int8_per_token_head")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    copy = copy_bandwidth()["bytes_per_s"]
    print(f"copy bandwidth {copy / 1e12:.3f} TB/s")
    for sh in a.shape:
        batch, ctx, hq, hkv, head = (int(x) for x in sh.split(","))
        gen = torch.Generator(device="cuda").manual_seed(0)
        k, v = _make_kv(batch, ctx, hkv, head, "cuda", gen)
        q = torch.randn(batch, hq, head, device="cuda", dtype=torch.bfloat16, generator=gen)
        sdpa_ms = _bench_replay(lambda: F.scaled_dot_product_attention(
            q[:, :, None], k, v, enable_gqa=True))
        print(f"{sh} sdpa_bf16: {sdpa_ms * 1e3:.1f} us "
              f"({2 * k.numel() * 2 / (sdpa_ms * 1e-3) / copy:.1%} of copy)")
        seq_lens = torch.full((batch,), ctx, dtype=torch.int32, device="cuda")
        for mode in a.modes.split(","):
            layout = LayerLayout.simple(mode, hkv, head)
            nbytes = batch * ctx * layout.bytes_per_token
            for rep in range(a.repeats):
                for permute in (True, False):
                    cache, bt = _paged_fill(layout, k, v, a.block_size, gen, permute=permute)
                    out = torch.empty_like(q)
                    ms = _bench_replay(lambda: paged_attention(q, cache, bt, seq_lens, out=out,
                                                               max_seq_len=ctx))
                    print(f"{sh} {mode} pages {'permuted' if permute else 'in order'} "
                          f"(block {a.block_size}, repeat {rep}): {ms * 1e3:.1f} us "
                          f"({nbytes / (ms * 1e-3) / copy:.1%} of copy, {ms / sdpa_ms:.3f}x SDPA)")
                    del cache, bt
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
