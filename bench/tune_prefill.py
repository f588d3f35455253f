#!/usr/bin/env python
"""Sweep the prefill kernel's launch parameters on one shape (CUDA GPU).

    python bench/tune_prefill.py --shape 4,4096,0,32,8,128 --modes bf16,int8_per_token_head \\
        --configs 128:64:8:3,128:128:8:3,64:64:4:3

A shape is B,NEW,CACHED,HQ,HKV,D (NEW tokens per sequence after CACHED ones, causal); a config
is BLOCK_M:BLOCK_N:WARPS:STAGES[:VREG[:DEQUANT]] (DEQUANT 1: dequantize the pages
into a bf16 workspace first, then the bf16 kernel). Prints TFLOP/s (4 * D flops per visible query-head/key
pair) per mode and config, SDPA bf16 causal over the whole prompt for reference, the error
against an fp32 reference, and whether the compiled kernel issues wgmma (Hopper tensor-core
instructions) or only mma.sync.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from kvplan.runtime import prefill as pf
from kvplan.runtime._common import compiled_kernels
from kvplan.runtime.attention import AttentionConfig, paged_attention
from kvplan.runtime.bench import (
    PREFILL_MODES,
    PrefillProblem,
    _bench,
    _filled_cache,
    _rel_err,
)
from kvplan.runtime.layout import LayerLayout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--modes", default="bf16,int8_per_token_head")
    ap.add_argument("--configs", default="")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--rep-ms", type=int, default=100)
    args = ap.parse_args()
    modes = dict(PREFILL_MODES)
    modes["fp8"] = modes["fp8_per_tensor"]
    for shape in args.shape:
        b, new, cached, hq, hkv, d = (int(x) for x in shape.split(","))
        ctx = new + cached
        gen = torch.Generator(device="cuda").manual_seed(0)
        prob = PrefillProblem.make(b, new, cached, hq, hkv, d, "cuda", gen)
        sdpa_ms, sdpa_tf = prob.time_sdpa(args.rep_ms)
        print(f"shape {shape}: SDPA bf16 causal whole prompt {sdpa_ms:.3f} ms {sdpa_tf:.0f} TFLOP/s",
              flush=True)
        q, ref, qsl, lens, flops = prob.q, prob.ref, prob.qsl, prob.seq_lens, prob.flops
        for name in args.modes.split(","):
            layout = LayerLayout.simple(modes[name], hkv, d)
            cache, bt = _filled_cache(layout, prob.k, prob.v, args.block_size, gen)
            cfgs = [None] + [c for c in args.configs.split(",") if c]
            for c in cfgs:
                if c is None:
                    cfg, label = None, "default"
                else:
                    f = [int(x) for x in c.split(":")]
                    cfg = AttentionConfig(block_m=f[0], block_n=f[1], num_warps=f[2],
                                          num_stages=f[3],
                                          v_reg=bool(f[4]) if len(f) > 4 else None,
                                          dequant=bool(f[5]) if len(f) > 5 else None)
                    label = c
                out = torch.full_like(q, float("nan"))
                try:
                    paged_attention(q, cache, bt, lens, qsl, out=out, max_query_len=new,
                                    max_seq_len=ctx, config=cfg)
                    torch.cuda.synchronize()
                except Exception as exc:
                    print(f"  {name:22s} {label:14s} failed: {str(exc).splitlines()[0][:120]}",
                          flush=True)
                    continue
                err = _rel_err(out, ref)
                ms = _bench(lambda: paged_attention(q, cache, bt, lens, qsl, out=out,
                                                    max_query_len=new, max_seq_len=ctx,
                                                    config=cfg), rep_ms=args.rep_ms)
                tf = flops / (ms * 1e-3) / 1e12
                print(f"  {name:22s} {label:14s} {ms:8.3f} ms {tf:6.0f} TFLOP/s "
                      f"{tf / sdpa_tf:.3f}x SDPA  err {err:.4f}", flush=True)
            del cache, bt
            torch.cuda.empty_cache()
    for kern in compiled_kernels(pf._prefill_kernel):
        ptx = kern.asm.get("ptx", "")
        c = kern.metadata
        print(f"compiled prefill kernel: warps {c.num_warps} stages {c.num_stages} shared "
              f"{c.shared} wgmma {'wgmma' in ptx} mma.sync {'mma.sync' in ptx} "
              f"regs {getattr(kern, 'n_regs', '?')} spills {getattr(kern, 'n_spills', '?')}")


if __name__ == "__main__":
    main()
