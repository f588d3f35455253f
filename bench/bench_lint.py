"""Time `kvplan lint` over N generated deployment files (whole process: start-up, walk, parse, plan, report).

    python bench/bench_lint.py [--files 1000] [--runs 5] [--format json]

Generates a realistic mix into a temporary folder: Kubernetes Deployments (one to three documents,
args lists, `sh -c` scripts, env extra args, GPU node selectors), KServe InferenceServices,
docker-compose files, vLLM --config YAML files, launch scripts, and ~10% files that are not
deployment configs (README, JSON). By default the files look like one organisation's repository:
20 teams, each serving one of six bundled models on one GPU type with two flag variants, so the
per-run plan cache sees a few dozen distinct launch configurations. `--distinct` draws model, flags,
GPU, TP and context length independently for every file (hundreds of distinct plans: the worst
case, dominated by plan compilation). Prints a markdown table of wall times (median, min, max) for
the whole process, and files per second.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["meta-llama/Meta-Llama-3.1-8B", "Qwen/Qwen3-8B", "openai/gpt-oss-20b", "google/gemma-3-27b-it",
          "nvidia/Llama-3.1-70B-Instruct-FP8", "deepseek-ai/DeepSeek-V3"]
FLAGS = [["--kv-cache-dtype", "fp8"], ["--kv-cache-dtype", "auto"], ["--kv-cache-dtype", "fp8",
         "--kv-cache-dtype-skip-layers", "sliding_window"], ["--kv-cache-dtype", "int8_per_token_head"],
         ["--kv-cache-type", "fp8"], ["--kv-cache-dtype", "fp9"]]
GPUS = ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L4", "NVIDIA-B200"]


class _Team:
    """What one team deploys: a model, a GPU, TP and context length, and two flag variants."""

    def __init__(self, rng: random.Random):
        self.model, self.gpu = rng.choice(MODELS), rng.choice(GPUS)
        self.tp, self.mml = rng.choice([1, 2, 4, 8]), rng.choice([8192, 32768, 131072])
        self.flags = rng.sample(FLAGS, 2)


class _Picker:
    def __init__(self, rng: random.Random, distinct: bool):
        self.rng, self.distinct = rng, distinct
        self.teams = [_Team(rng) for _ in range(20)]

    def team(self, i: int) -> _Team:
        return _Team(self.rng) if self.distinct else self.teams[i % 20]


def _deployment(i: int, rng: random.Random, t: _Team) -> str:
    model, flags, gpu, tp = t.model, rng.choice(t.flags), t.gpu, t.tp
    args = "\n".join(f"            - \"{a}\"" for a in [model, *flags, "--tensor-parallel-size", str(tp),
                                                        "--max-model-len", str(t.mml)])
    doc = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-{i}
  annotations:
    team: inference
spec:
  replicas: 1
  template:
    spec:
      nodeSelector:
        nvidia.com/gpu.product: {gpu}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args:
{args}
          env:
            - name: VLLM_EXTRA_ARGS
              value: "--gpu-memory-utilization 0.9"
          resources:
            limits:
              nvidia.com/gpu: {tp}
"""
    if rng.random() < 0.5:  # Helm-style: a Service in front
        doc = f"""---
# Source: chart/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: llm-{i}
spec:
  ports: [{{port: 80, targetPort: 8000}}]
---
# Source: chart/templates/deployment.yaml
{doc}"""
    return doc


def _kserve(i: int, rng: random.Random, t: _Team) -> str:
    flags = ",".join(f'"{a}"' for a in rng.choice(t.flags))
    return f"""apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: isvc-{i}
spec:
  predictor:
    nodeSelector: {{cloud.google.com/gke-accelerator: nvidia-l4}}
    model:
      modelFormat: {{name: huggingface}}
      storageUri: hf://{t.model}
      args: ["--model_name=m{i}", {flags}]
      resources: {{limits: {{nvidia.com/gpu: "1"}}}}
"""


def _compose(i: int, rng: random.Random, t: _Team) -> str:
    return f"""services:
  llm{i}:
    image: vllm/vllm-openai:v0.33.0
    command: >
      --model {t.model}
      {" ".join(rng.choice(t.flags))}
    deploy:
      resources:
        reservations:
          devices: [{{driver: nvidia, count: 1, capabilities: [gpu]}}]
"""


def _vllm_config(i: int, rng: random.Random, t: _Team) -> str:
    f = rng.choice(t.flags)
    return f"model: {t.model}\n{f[0][2:]}: {f[1]}\nmax-model-len: {t.mml}\n"


def _script(i: int, rng: random.Random, t: _Team) -> str:
    return (f"#!/usr/bin/env bash\nset -euo pipefail\nMODEL={t.model}\n"
            f"exec vllm serve \"$MODEL\" \\\n  {' '.join(rng.choice(t.flags))} \\\n  --max-model-len {t.mml}\n")


def generate(folder: Path, n: int, seed: int = 0, distinct: bool = False) -> dict[str, int]:
    rng = random.Random(seed)
    pick = _Picker(rng, distinct)
    kinds = [("yaml", _deployment, 50), ("yaml", _kserve, 10), ("compose", _compose, 10), ("vllm", _vllm_config, 10),
             ("sh", _script, 10), ("other", None, 10)]
    counts: dict[str, int] = {}
    for i in range(n):
        kind, fn, _ = rng.choices(kinds, weights=[k[2] for k in kinds])[0]
        sub = folder / f"team{i % 20}"
        sub.mkdir(parents=True, exist_ok=True)
        if fn is None:
            p = sub / (f"README{i}.md" if i % 2 else f"config{i}.json")
            p.write_text("# notes\n" if i % 2 else '{"model_type": "llama"}\n')
        else:
            ext = {"yaml": "yaml", "compose": "yml", "vllm": "yaml", "sh": "sh"}[kind]
            name = {"compose": f"docker-compose-{i}", "vllm": f"vllm-config-{i}"}.get(kind, f"{fn.__name__[1:]}-{i}")
            (sub / f"{name}.{ext}").write_text(fn(i, rng, pick.team(i)))
        kind = fn.__name__[1:] if fn else "not-deployment"
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--format", default="json", choices=["text", "json", "sarif", "github", "junit"])
    ap.add_argument("--distinct", action="store_true", help="every file a different launch configuration (worst case)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvplan-bench-lint-") as tmp:
        folder = Path(tmp) / "deploy"
        counts = generate(folder, args.files, distinct=args.distinct)
        cmd = [sys.executable, "-c", "from kvplan.cli.main import main; main()", "lint", str(folder),
               "--format", args.format, "--isolated", "--gpu", "h100"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
        times, last = [], None
        for _ in range(args.runs):
            t0 = time.perf_counter()
            last = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp)
            times.append(time.perf_counter() - t0)
            if last.returncode not in (0, 1):
                sys.exit(f"kvplan lint failed ({last.returncode}): {last.stderr}")
        summary = json.loads(last.stdout)["summary"] if args.format == "json" else {}
    med = statistics.median(times)
    print(f"files generated: {args.files} ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    if summary:
        print(f"linted {summary['linted']}, skipped {summary['skipped']}, launches {summary['launches']}, "
              f"findings {summary['findings']}")
    print()
    mix = "distinct" if args.distinct else "repository"
    print("| files | mix | format | runs | median s | min s | max s | files/s (median) |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    print(f"| {args.files} | {mix} | {args.format} | {args.runs} | {med:.2f} | {min(times):.2f} | {max(times):.2f} | "
          f"{args.files / med:,.0f} |")


if __name__ == "__main__":
    main()
