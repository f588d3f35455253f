#!/usr/bin/env python
"""Time the quantize-on-write kernel alone: python bench/bench_write.py [--tokens 64,8192,32768]"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvplan.runtime.bench import DECODE_MODES, bench_write, copy_bandwidth


def _lanes(text: str) -> str:
    """``--int4-lanes``: empty, or comma-separated lane counts out of 1, 2, 4 and 8."""
    if text and not all(x in ("1", "2", "4", "8") for x in text.split(",")):
        raise argparse.ArgumentTypeError(f"expected lane counts out of 1,2,4,8, got {text!r}")
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="64,8192,32768")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-size", type=int, default=128)
    ap.add_argument("--rows", default="0", help="rows per program to sweep (0 = default)")
    ap.add_argument("--warps", default="0", help="warps to sweep (0 = default)")
    ap.add_argument("--kernel", default="", help="triton, gluon or triton,gluon (empty = default)")
    ap.add_argument("--modes", default="", help="kv cache dtypes, comma-separated (empty = all)")
    ap.add_argument("--int4-lanes", default="", type=_lanes, help="1,2,4,8: lanes over which the Gluon INT4 "
                    "kernel spreads a row (write_gluon.INT4_LANES; empty = the default)")
    a = ap.parse_args()
    copy = copy_bandwidth()
    print(f"copy bandwidth {copy['bytes_per_s'] / 1e12:.2f} TB/s")
    modes = tuple((m, m) for m in a.modes.split(",")) if a.modes else DECODE_MODES
    for n, rows, w, kn, lanes in itertools.product(
            [int(x) for x in a.tokens.split(",")], [int(x) for x in a.rows.split(",")],
            [int(x) for x in a.warps.split(",")], a.kernel.split(","), a.int4_lanes.split(",")):
        if lanes:
            from kvplan.runtime import write_gluon
            write_gluon.INT4_LANES[a.head_size] = int(lanes)
            kn = kn or "gluon"
        try:
            results = bench_write(n, a.heads, a.head_size, copy["bytes_per_s"], modes=modes,
                                  rows_per_program=rows or None, num_warps=w or None,
                                  kernel=kn or None)
        except ValueError as exc:  # a launch the kernel does not take (rows per warps)
            print(f"tokens={n:6d} rows={rows} w={w} {kn or 'default':7s} skipped: {exc}")
            continue
        for r in results:
            print(f"{r['variant']:28s} tokens={n:6d} rows={rows} w={w} {kn or 'default':7s} "
                  f"{'lanes=' + lanes + ' ' if lanes else ''}"
                  f"{r['ms'] * 1e3:8.1f} us eager {r['launch_ms'] * 1e3:6.1f} us "
                  f"{r['bytes_per_s'] / 1e12:.2f} TB/s {100 * r['frac_copy']:.0f}% of copy", flush=True)


if __name__ == "__main__":
    main()
