"""Run one runtime kernel a few times on fresh inputs, for a profiler to attach to (Nsight
Compute: ``ncu -k regex:_write_kv_kernel --launch-skip 2 --launch-count 1 python
bench/profile_once.py write``). Nothing is timed here.

    python bench/profile_once.py write  [--mode int8_per_token_head] [--tokens 8192]
    python bench/profile_once.py decode [--mode int8_per_token_head] [--shape 64,4096,32,8,128]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import torch

    from kvplan.runtime.attention import AttentionConfig, paged_attention
    from kvplan.runtime.bench import _make_kv, _paged_fill
    from kvplan.runtime.cache import allocate_kv_cache
    from kvplan.runtime.layout import LayerLayout
    from kvplan.runtime.write import write_kv_cache

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel", choices=("write", "decode"))
    ap.add_argument("--mode", default="int8_per_token_head")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-size", type=int, default=128)
    ap.add_argument("--shape", default="64,4096,32,8,128", help="decode: B,CTX,HQ,HKV,D")
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--kernel", default=None, help="decode: AttentionConfig.kernel (default: the "
                    "default choice)")
    ap.add_argument("--hp", type=int, default=None, help="decode, gluon FP8 per-tensor: kv heads "
                    "per program")
    a = ap.parse_args()
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    if a.kernel == "write":
        layout = LayerLayout.simple(a.mode, a.heads, a.head_size)
        n = a.tokens
        blocks = 4 * -(-n // 16)
        for _ in range(a.calls):  # fresh inputs and cache each call: nothing stays in L2
            key = torch.randn(n, a.heads, a.head_size, device=dev, dtype=torch.bfloat16,
                              generator=gen)
            value = torch.randn_like(key)
            cache = allocate_kv_cache(layout, blocks, 16, dev)
            perm = torch.randperm(blocks, device=dev, generator=gen)
            j = torch.arange(n, device=dev)
            write_kv_cache(cache, key, value, perm[j // 16] * 16 + j % 16)
    else:
        b, ctx, hq, hkv, d = (int(x) for x in a.shape.split(","))
        k, v = _make_kv(b, ctx, hkv, d, dev, gen)
        cache, tables = _paged_fill(LayerLayout.simple(a.mode, hkv, d), k, v, 16, gen)
        del k, v
        q = torch.randn(b, hq, d, device=dev, dtype=torch.bfloat16, generator=gen)
        lens = torch.full((b,), ctx, dtype=torch.int32, device=dev)
        cfg = AttentionConfig(kernel=a.kernel, kv_heads_per_program=a.hp)
        for _ in range(a.calls):
            paged_attention(q, cache, tables, lens, max_seq_len=ctx, config=cfg)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
