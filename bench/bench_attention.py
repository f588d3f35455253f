#!/usr/bin/env python
"""Benchmark kvplan's Triton paged attention and quantize-on-write kernels on a CUDA GPU.

    python bench/bench_attention.py --out bench/results/h100.json [--quick] [--plot out.png]

Prints a markdown table (the one recorded in BENCHMARKS.md) and writes the raw results as JSON
(schemas/bench-result.schema.json).
Runs from a source checkout without installing kvplan.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvplan.runtime.bench import format_table, run_suite
from kvplan.runtime.bench_cli import write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench/results/latest.json"))
    ap.add_argument("--plot", type=Path, default=None, help="also write a PNG chart (matplotlib)")
    ap.add_argument("--quick", action="store_true", help="two decode shapes, two write sizes")
    args = ap.parse_args()
    t0 = time.time()

    def progress(label: str, done: int, total: int) -> None:
        print(f"[{done}/{total}] {label} ({time.time() - t0:.0f}s)", file=sys.stderr, flush=True)

    results = run_suite("cuda", quick=args.quick, progress=progress)
    write_results(results, args.out, args.plot)
    print(format_table(results))


if __name__ == "__main__":
    main()
