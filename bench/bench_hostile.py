"""Time the hostile inputs of issue 23: how long kvplan takes to refuse each one.

    python bench/bench_hostile.py [--runs 5]

For each input: the refusal inside the library (the reader/validator call alone, median of
`--runs` after one warm-up), and the whole `kvplan` process (interpreter start and imports included).
Also the cost of the checks on ordinary input: `check_config_values` on a real config and
`check_yaml` on the bundled example manifests. Results go to BENCHMARKS.md ("Hostile input").
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvplan.errors import KvplanInputError  # noqa: E402
from kvplan.ingest.hf_config import load_json, parse_hf_config  # noqa: E402
from kvplan.ingest.limits import check_config_values, check_yaml  # noqa: E402
from kvplan.lint.run import lint_paths  # noqa: E402


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["apiVersion: v1", "kind: Pod", "metadata: {name: bomb}",
             "x0: &a0 [" + ", ".join(['"--kv-cache-dtype"'] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    lines += ["spec:", "  containers:", "  - name: vllm", "    image: vllm/vllm-openai", f"    args: *a{levels}"]
    return "\n".join(lines) + "\n"


def timed(fn: Callable[[], object], runs: int) -> float:
    """Median milliseconds of fn (KvplanInputError counts as the expected answer)."""
    out = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        with contextlib.suppress(KvplanInputError):
            fn()
        if i:
            out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(out)


def process(args: list[str], runs: int) -> tuple[float, int]:
    out, rc = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
        out.append((time.perf_counter() - t0) * 1000)
        rc = r.returncode
    return statistics.median(out), rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    llama = json.loads((ROOT / "examples" / "Meta-Llama-3.1-8B" / "config.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
        for name, change in (("layers", {"num_hidden_layers": 1_000_000_000}), ("kv0", {"num_key_value_heads": 0}),
                             ("hd", {"head_dim": -64})):
            (t / f"{name}.json").write_text(json.dumps({**llama, **change}))
        (t / "big.json").open("wb").truncate(200 * 1024 * 1024)
        lint_dir = t / "deploy"
        lint_dir.mkdir()
        (lint_dir / "bomb.yaml").write_text(alias_bomb())
        for f in (ROOT / "examples" / "deploy").glob("*.yaml"):
            (lint_dir / f.name).write_text(f.read_text())
        rows = [
            ("(baseline) ordinary Llama-3.1-8B config.json, planned", lambda: parse_hf_config(llama, t),
             ["plan", str(ROOT / "examples" / "Meta-Llama-3.1-8B")]),
            ("config.json nesting 100,000 arrays", lambda: load_json(t / "deep.json"), ["plan", str(t / "deep.json")]),
            ("num_hidden_layers: 1000000000", lambda: parse_hf_config(json.loads((t / "layers.json").read_text()), t),
             ["plan", str(t / "layers.json")]),
            ("num_key_value_heads: 0", lambda: parse_hf_config(json.loads((t / "kv0.json").read_text()), t),
             ["plan", str(t / "kv0.json")]),
            ("head_dim: -64", lambda: parse_hf_config(json.loads((t / "hd.json").read_text()), t),
             ["plan", str(t / "hd.json")]),
            ("200 MB config.json (sparse file)", lambda: load_json(t / "big.json"), ["plan", str(t / "big.json")]),
            ("alias bomb manifest (9 levels x 9 aliases)", lambda: check_yaml(alias_bomb(), "bomb.yaml"),
             ["lint", str(lint_dir / "bomb.yaml"), "--isolated"]),
            ("alias bomb + the 7 example manifests", lambda: lint_paths([str(lint_dir)], isolated=True),
             ["lint", str(lint_dir), "--isolated"]),
        ]
        print("| input | refusal in the library, median ms | whole `kvplan` process, median ms | exit |")
        print("|---|---:|---:|---:|")
        for name, fn, argv in rows:
            lib = timed(fn, runs)
            proc, rc = process(argv, runs)
            print(f"| {name} | {lib:.2f} | {proc:.0f} | {rc} |")
        examples = [f.read_text() for f in sorted((ROOT / "examples" / "deploy").glob("*.yaml"))]
        print()
        print("| check on ordinary input | median ms |")
        print("|---|---:|")
        print("| check_config_values, Llama-3.1-8B config.json | "
              f"{timed(lambda: check_config_values(llama, 'c'), runs * 20):.3f} |")
        print(f"| check_yaml, all {len(examples)} example manifests | "
              f"{timed(lambda: [check_yaml(x, 'm') for x in examples], runs * 20):.3f} |")


if __name__ == "__main__":
    main()
