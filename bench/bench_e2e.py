#!/usr/bin/env python
"""Time `kvplan validate --e2e` on a GPU: a model of a given config with seeded random weights (no
download), N tokens, the ten comparison configurations of the --e2e table.

    python bench/bench_e2e.py --config examples/Meta-Llama-3.1-8B/config.json --tokens 2048 --out e2e.json

Per configuration: wall time of the forward pass (after a warm-up pass that compiles the kernels),
peak GPU memory, and the share of a synchronised run spent inside kvplan's kernels (write +
paged attention, CUDA-synchronised around each call) against the rest of the model. The weights
are loaded once; every configuration runs on the same weights. Prints a markdown table.
Runs from a source checkout without installing kvplan; needs torch, triton, transformers (no
pydantic).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=Path("examples/Meta-Llama-3.1-8B/config.json"))
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = ap.parse_args()
    if args.tokens < 2:
        ap.error("--tokens must be at least 2")
    if not args.config.is_file():
        ap.error(f"--config {args.config}: no such file")

    import torch

    from kvplan.runtime.causal_lm import CausalLM, WeightsRef, weight_bytes
    from kvplan.runtime.model_eval import Evaluator, comparison_configs, layers_from_config
    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU")
    config = json.loads(args.config.read_text())
    config.pop("quantization_config", None)
    t0 = time.perf_counter()
    ref = WeightsRef("random", f"{args.config.parent.name} (random weights)", config=config)
    model = CausalLM.load(ref, model_dtype=args.dtype, device="cuda", seed=args.seed)
    torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    weights = weight_bytes(config, args.dtype)
    layers = layers_from_config(config)
    gen = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, model.vocab_size, (1, args.tokens), generator=gen).cuda()
    calib = torch.randint(0, model.vocab_size, (1, min(512, args.tokens)), generator=gen).cuda()
    amax, _ = model.kv_amax(calib)
    calibrated = {i: (max(k / 448.0, 1e-6), max(v / 448.0, 1e-6)) for i, (k, v) in amax.items()}
    torch.cuda.reset_peak_memory_stats()
    t1 = time.perf_counter()
    ev = Evaluator(model, ids, layers)
    torch.cuda.synchronize()
    ref_s = time.perf_counter() - t1
    ref_peak = torch.cuda.max_memory_allocated()
    configs = comparison_configs(layers, calibrated, (layers[0].index, layers[-1].index))
    rows = []
    for cfg in configs:
        ev.measure(cfg)  # warm-up: compiles the kernels of this storage mode
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        m = ev.measure(cfg)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        timed = ev.measure(cfg, timed=True)
        rows.append({"name": cfg.name, "seconds": m.seconds, "peak_gib": peak / 2**30,
                     "kernel_seconds_synced": timed.kernel_seconds, "seconds_synced": timed.seconds,
                     "kernel_share": timed.kernel_seconds / timed.seconds if timed.seconds else 0.0,
                     "kl_mean": m.kl_mean, "top1_agreement": m.top1_agreement,
                     "bytes_per_token": m.bytes_per_token, "torch_layers": timed.torch_layers})
        print(f"{cfg.name}: {m.seconds:.3f} s, peak {peak / 2**30:.1f} GiB, kvplan kernels "
              f"{rows[-1]['kernel_share']:.1%}", file=sys.stderr, flush=True)
    total_s = time.perf_counter() - t0
    doc = {"kind": "kvplan.bench-e2e", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "config": str(args.config), "tokens": args.tokens, "dtype": args.dtype, "weights_gib": weights / 2**30,
           "load_seconds": load_s, "reference_seconds": ref_s, "reference_peak_gib": ref_peak / 2**30,
           "total_seconds": total_s, "rows": rows}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"{doc['device']}, {args.config.parent.name} random weights ({weights / 2**30:.1f} GiB {args.dtype}), "
          f"{args.tokens} tokens; load {load_s:.1f} s, reference run {ref_s:.2f} s, whole run {total_s:.1f} s")
    print("| config | forward s | peak GPU GiB | kvplan kernels (synced) | KV B/token |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['seconds']:.3f} | {r['peak_gib']:.1f} | {r['kernel_share']:.1%} | "
              f"{r['bytes_per_token']:,} |")


if __name__ == "__main__":
    main()
