"""Cold start of `kvplan plan` on a local config: whole-process wall time, median of N runs.

    python bench/bench_cold_start.py [--runs 20]

Also checks that neither torch nor triton is imported on this path.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "gpt-oss-20b fp8 + skip sliding_window": ["examples/gpt-oss-20b/config.json", "--kv-cache-dtype", "fp8",
                                              "--kv-cache-dtype-skip-layers", "sliding_window"],
    "DeepSeek-V3 (61 MLA layers) auto": ["examples/DeepSeek-V3/config.json"],
    "nvidia Llama-3.1-70B FP8 checkpoint folder": ["examples/nvidia-Llama-3.1-70B-Instruct-FP8"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    exe = [sys.executable, "-c", "from kvplan.cli.main import main; main()", "plan"]
    base = [sys.executable, "-c", "pass"]
    print(f"{'case':45s} {'median ms':>10s} {'min ms':>8s} {'max ms':>8s}")
    for name, args in {"python -c pass (interpreter floor)": None, **CASES}.items():
        cmd = base if args is None else exe + args
        times = []
        for _ in range(a.runs):
            t = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
            times.append((time.perf_counter() - t) * 1000)
        print(f"{name:45s} {statistics.median(times):10.0f} {min(times):8.0f} {max(times):8.0f}")
    probe = subprocess.run([*exe[:2],
                            "import sys; from kvplan.api import compile; compile('examples/gpt-oss-20b/config.json', "
                            "'--kv-cache-dtype fp8'); " "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                                                        "('torch','triton','transformers','huggingface_hub')))"],
                           cwd=ROOT, capture_output=True, text=True)
    print("heavy modules imported on the plan path:", probe.stdout.strip() or probe.stderr.strip())


if __name__ == "__main__":
    main()
