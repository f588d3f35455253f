#!/usr/bin/env python
"""Sweep launch configs of the paged decode kernel on one shape (used to pick the heuristics).

    python bench/tune_attention.py --shape 64,4096,32,8,128 --modes int8_per_token_head
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.nn.functional as F

from kvplan.runtime.attention import AttentionConfig, paged_attention
from kvplan.runtime.bench import _bench_replay, _make_kv, _paged_fill, _rel_err
from kvplan.runtime.layout import LayerLayout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="64,4096,32,8,128", help="B,ctx,Hq,Hkv,D")
    ap.add_argument("--modes", default="bfloat16,int8_per_token_head,fp8_per_token_head")
    ap.add_argument("--block-n", default="32,64,128")
    ap.add_argument("--warps", default="4,8")
    ap.add_argument("--stages", default="2,3,4")
    ap.add_argument("--splits", default="0", help="0 = heuristic")
    ap.add_argument("--use-dot", default="1", help="1, 0 or 1,0")
    ap.add_argument("--paged3d", default="0", help="0, 1 or 0,1")
    ap.add_argument("--imma", default="0", help="INT8 only: 0, 1, 2 (comma list)")
    ap.add_argument("--vreg", default="0", help="8-bit V converted in registers: 0, 1 or 0,1")
    ap.add_argument("--kernel", default="triton", help="triton, gluon or triton,gluon")
    ap.add_argument("--pipe", default="0", help="gluon only: cp.async stages (0 = register prefetch)")
    ap.add_argument("--swap", default="", help="gluon only: swapped operands 0, 1 or 0,1 (empty = default)")
    ap.add_argument("--pdl", default="", help="merge as a programmatic dependent launch: 0, 1 or "
                    "0,1 (empty = default)")
    ap.add_argument("--merge", default="", help="split-K merge: fused, kernel or fused,kernel "
                    "(empty = default)")
    ap.add_argument("--hp", default="", help="gluon FP8 per-tensor only: kv heads per program "
                    "1, 2 or 1,2 (empty = default)")
    ap.add_argument("--maxnreg", default="0", help="register caps to sweep (0 = none)")
    ap.add_argument("--configs", default="", help="explicit BLOCK_N:WARPS:STAGES[:SPLITS] list, "
                    "e.g. 64:2:3,16:2:4:3 (replaces the --block-n/--warps/--stages product; a "
                    "SPLITS given here overrides --splits, 0 = heuristic)")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    b, ctx, hq, hkv, d = (int(x) for x in a.shape.split(","))
    gen = torch.Generator(device="cuda").manual_seed(0)
    k, v = _make_kv(b, ctx, hkv, d, "cuda", gen)
    q = torch.randn(b, hq, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    q4 = q[:, :, None]
    ref = F.scaled_dot_product_attention(q4.float(), k.float(), v.float(), enable_gqa=True)[:, :, 0]
    sdpa = _bench_replay(lambda: F.scaled_dot_product_attention(q4, k, v, enable_gqa=True))
    print(f"shape {a.shape}: sdpa bf16 {sdpa:.4f} ms", flush=True)
    seq_lens = torch.full((b,), ctx, dtype=torch.int32, device="cuda")
    results = []
    for mode in a.modes.split(","):
        lay = LayerLayout.simple(mode, hkv, d)
        cache, bt = _paged_fill(lay, k, v, a.block_size, gen)
        best = None
        virs = [bool(int(x)) for x in a.paged3d.split(",")]
        immas = [int(x) for x in a.imma.split(",")] if mode == "int8_per_token_head" else [0]
        if a.configs:
            triples = [tuple(int(x) for x in c.split(":")) for c in a.configs.split(",")]
            triples = [t + (None,) * (4 - len(t)) for t in triples]
        else:
            triples = list(itertools.product([int(x) for x in a.block_n.split(",")],
                                             [int(x) for x in a.warps.split(",")],
                                             [int(x) for x in a.stages.split(",")],
                                             [None]))
        swaps = [bool(int(x)) for x in a.swap.split(",")] if a.swap else [None]
        pdls = [bool(int(x)) for x in a.pdl.split(",")] if a.pdl else [None]
        hps = [int(x) for x in a.hp.split(",")] if a.hp else [None]
        merges = a.merge.split(",") if a.merge else [None]
        for (bn, w, st, sp_t), sp, ud, vir, im, mr, vr, kn, pp, sw, pdl, hp, mg in itertools.product(
                triples, [int(x) for x in a.splits.split(",")],
                [bool(int(x)) for x in a.use_dot.split(",")], virs, immas,
                [int(x) for x in a.maxnreg.split(",")], [bool(int(x)) for x in a.vreg.split(",")],
                a.kernel.split(","), [int(x) for x in a.pipe.split(",")], swaps, pdls, hps,
                merges):
            if kn != "gluon" and (pp or sw is not None or hp is not None):
                continue
            sp = sp if sp_t is None else sp_t
            gl_only = dict(pipe=pp or None, swap=sw, kv_heads_per_program=hp) if kn == "gluon" else {}
            cfg = AttentionConfig(block_n=bn, num_warps=w, num_stages=st, num_splits=sp or None,
                                  use_dot=ud, paged3d=vir, imma=im, max_registers=mr or None,
                                  v_reg=vr, kernel=kn, pdl=pdl, merge=mg, **gl_only)
            out = torch.full_like(q, float("nan"))
            try:
                paged_attention(q, cache, bt, seq_lens, max_seq_len=ctx, out=out, config=cfg)
                torch.cuda.synchronize()
                err = _rel_err(out, ref)
                ms = _bench_replay(lambda: paged_attention(q, cache, bt, seq_lens, max_seq_len=ctx,
                                                    out=out, config=cfg), rep_ms=100)
            except Exception as exc:
                print(f"  {mode} {cfg}: FAILED {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                continue
            row = dict(mode=mode, block_n=bn, warps=w, stages=st, splits=sp, use_dot=ud,
                       paged3d=vir, imma=im, maxnreg=mr, v_reg=vr, kernel=kn, pipe=pp, swap=sw,
                       pdl=pdl, hp=hp, merge=mg, ms=ms,
                       ratio=ms / sdpa, rel_err=err,
                       tbps=b * ctx * lay.bytes_per_token / (ms * 1e-3) / 1e12)
            results.append(row)
            print(f"  {mode:20s} bn={bn:3d} w={w} st={st} sp={sp} dot={int(ud)}: {ms:.4f} ms "
                  f"p3={int(vir)} imma={im} r={mr} vreg={int(vr)} {kn} pipe={pp} swap={sw} pdl={pdl} "
                  f"hp={hp} merge={mg} "
                  f"{row['ratio']:.3f}x {row['tbps']:.2f} TB/s err={err:.4f}", flush=True)
            if best is None or ms < best["ms"]:
                best = row
        print(f"BEST {mode}: {best}", flush=True)
        cache = bt = None  # free the cache before the next mode's
        torch.cuda.empty_cache()
    if a.out:
        a.out.write_text(json.dumps({"shape": a.shape, "sdpa_ms": sdpa, "rows": results}, indent=1))


if __name__ == "__main__":
    main()
