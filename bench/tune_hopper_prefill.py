#!/usr/bin/env python
"""Time the Hopper prefill kernel (`kvplan.runtime.prefill_gluon`) beside the Triton prefill kernel
and torch SDPA bf16 causal on the same shapes, in one process (an sm_90 GPU).

    python bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --modes bf16,int8_per_token_head \\
        --settings split=1:stages=2,split=0:stages=2

A shape is B,NEW,CACHED,HQ,HKV,D (NEW tokens per sequence after CACHED ones, causal); a setting
is colon-separated `prefill_gluon.WS_DEFAULTS` overrides (``triton``: the Triton prefill kernel at
its defaults). Prints ms, TFLOP/s (4 * D flops per visible query-head/key pair), the ratio to
SDPA, and the error against an fp32 reference for each mode and setting.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from kvplan.runtime import prefill_gluon as pg
from kvplan.runtime.attention import AttentionConfig, paged_attention
from kvplan.runtime.bench import (
    PREFILL_MODES,
    PrefillProblem,
    _bench,
    _filled_cache,
    _rel_err,
)
from kvplan.runtime.layout import LayerLayout


def _setting(text: str) -> tuple[str, AttentionConfig, dict]:
    if text == "triton":
        return text, AttentionConfig(kernel="prefill", hopper=False), {}
    opts = {}
    for part in text.split(":"):
        key, _, val = part.partition("=")
        if key not in pg.WS_DEFAULTS:
            print(f"unknown setting {key!r} in {text!r}; known: {sorted(pg.WS_DEFAULTS)}",
                  file=sys.stderr)
            raise SystemExit(2)
        if not val.lstrip("-").isdigit():
            print(f"setting {key!r} in {text!r} needs an integer value: {key}=N", file=sys.stderr)
            raise SystemExit(2)
        opts[key] = int(val)
    return text, AttentionConfig(kernel="prefill", hopper=True), opts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--modes", default="bf16,int8_per_token_head")
    ap.add_argument("--settings", default="triton,split=1,split=0")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--rep-ms", type=int, default=100)
    args = ap.parse_args()
    modes = dict(PREFILL_MODES)
    modes["fp8"] = modes["fp8_per_tensor"]
    settings = [_setting(s) for s in args.settings.split(",") if s]
    base = dict(pg.WS_DEFAULTS)
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
            for label, cfg, opts in settings:
                pg.WS_DEFAULTS.clear()
                pg.WS_DEFAULTS.update(base, **opts)
                out = torch.full_like(q, float("nan"))

                def run(cache=cache, bt=bt, out=out, cfg=cfg):
                    return paged_attention(q, cache, bt, lens, qsl, out=out, max_query_len=new,
                                           max_seq_len=ctx, config=cfg)

                try:
                    run()
                    torch.cuda.synchronize()
                except Exception as exc:
                    print(f"  {name:22s} {label:24s} failed: {str(exc).splitlines()[0][:160]}",
                          flush=True)
                    continue
                err = _rel_err(out, ref)
                ms = _bench(run, rep_ms=args.rep_ms)
                tf = flops / (ms * 1e-3) / 1e12
                print(f"  {name:22s} {label:24s} {ms:8.3f} ms {tf:6.0f} TFLOP/s "
                      f"{tf / sdpa_tf:.3f}x SDPA  err {err:.4f}", flush=True)
            del cache, bt
            torch.cuda.empty_cache()
    pg.WS_DEFAULTS.clear()
    pg.WS_DEFAULTS.update(base)


if __name__ == "__main__":
    main()
