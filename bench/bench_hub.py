"""Time Hugging Face id resolution against a loopback Hub (tests/hubserver.py; no network).

    python bench/bench_hub.py [--runs 10] [--lint-runs 3] [--files 1000]

Starts the loopback Hub itself and serves 20 repositories built from the configs in tests/data/corpus
(config.json, and hf_quant_config.json where the model has one); two of them are FP8 checkpoints with
4 safetensors shards of 8 GiB each (sparse files) holding calibrated k/v scales for 80 layers.
Every kvplan run is a fresh process with HF_ENDPOINT pointed at the server and HF_HOME at a
temporary cache:

1. cold start of `kvplan plan ORG/NAME` with a warm cache (online: model info + one HEAD; and with
   HF_HUB_OFFLINE=1: no request), against `kvplan plan config.json` on disk;
2. `kvplan lint` of N generated Kubernetes manifests naming 20 ids, with a cold cache (emptied
   before every run), a warm cache, and a warm cache with HF_HUB_OFFLINE=1.

Prints markdown tables: wall times (median, min, max) and the requests / bytes the server answered.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hubserver import FakeHub, fp8_checkpoint  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "corpus"
FP8 = ROOT / "examples" / "nvidia-Llama-3.1-70B-Instruct-FP8"


repo_dirs: dict[str, Path] = {}


def build_repos(hub: FakeHub, tmp: Path) -> list[str]:
    ids = []
    for d in sorted(p for p in CORPUS.iterdir() if (p / "config.json").is_file())[:18]:
        repo = tmp / "repos" / d.name
        repo.mkdir(parents=True)
        for f in ("config.json", "hf_quant_config.json"):
            if (d / f).is_file():
                shutil.copy(d / f, repo / f)
        rid = f"bench-org/{d.name}"
        hub.add(rid, repo)
        repo_dirs[rid] = repo
        ids.append(rid)
    for i in range(2):
        ck = fp8_checkpoint(tmp / "repos" / f"fp8-{i}", FP8, layers=80, weight_bytes=8 << 30, shards=4)
        rid = f"bench-org/Llama-70B-FP8-{i}"
        hub.add(rid, ck)
        repo_dirs[rid] = ck
        ids.append(rid)
    return ids


def manifests(folder: Path, ids: list[str], n: int, names: list[str] | None = None) -> None:
    """N Deployments serving ids[i % 20] (or names[i % 20]: the same models as local paths)."""
    folder.mkdir(parents=True)
    flags = [["--kv-cache-dtype", "fp8"], ["--kv-cache-dtype", "auto"]]
    for i in range(n):
        args = [(names or ids)[i % len(ids)], *flags[(i // len(ids)) % 2], "--max-model-len", "8192"]
        lines = "\n".join(f'            - "{a}"' for a in args)
        (folder / f"svc-{i:04d}.yaml").write_text(f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: svc-{i}
spec:
  template:
    spec:
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          command: ["vllm", "serve"]
          args:
{lines}
          resources:
            limits:
              nvidia.com/gpu: 1
""")


def per_id(hub: FakeHub, rid: str) -> int:
    """Requests the server answered about one repository (exact id: no prefix matches)."""
    return sum(1 for _, p, _ in hub.requests if p.split("?")[0] == f"/api/models/{rid}"
               or p.startswith((f"/api/models/{rid}/", f"/{rid}/")))


def run(args: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    dt = time.perf_counter() - t
    if r.returncode not in ok:
        raise SystemExit(f"kvplan {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[:500]}")
    return dt


def stats(xs: list[float], scale: float = 1000.0) -> tuple[float, float, float]:
    return statistics.median(xs) * scale, min(xs) * scale, max(xs) * scale


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--lint-runs", type=int, default=3)
    ap.add_argument("--files", type=int, default=1000)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kvplan-bench-hub-"))
    hub = FakeHub()
    try:
        url = hub.start()
        ids = build_repos(hub, tmp)
        home = tmp / "hf-home"
        base = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env = {**base, "PYTHONPATH": str(ROOT), "HF_ENDPOINT": url, "HF_HOME": str(home),
               "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_TELEMETRY": "1"}
        offline = {**env, "HF_HUB_OFFLINE": "1"}

        # ---- 1. cold start of one plan, warm cache
        cfg_id, ck_id = ids[0], ids[-1]
        local = str(CORPUS / cfg_id.split("/")[1] / "config.json")
        hub.reset_counts()
        first_cfg = run(["plan", cfg_id], env)
        cold_cfg = (len(hub.requests), hub.bytes_served)
        hub.reset_counts()
        first_ck = run(["plan", ck_id, "--kv-cache-dtype", "fp8"], env)
        cold_ck = (len(hub.requests), hub.bytes_served)
        cases = (("`kvplan plan CORPUS/config.json` (local file, baseline)", ["plan", local], env),
                 (f"`kvplan plan {cfg_id}`, warm cache, online", ["plan", cfg_id], env),
                 (f"`kvplan plan {cfg_id}`, warm cache, HF_HUB_OFFLINE=1", ["plan", cfg_id], offline),
                 (f"`kvplan plan {ck_id} --kv-cache-dtype fp8` (4 x 8 GiB shards), warm cache, online",
                  ["plan", ck_id, "--kv-cache-dtype", "fp8"], env),
                 ("the same, HF_HUB_OFFLINE=1", ["plan", ck_id, "--kv-cache-dtype", "fp8"], offline))
        times: dict[int, list[float]] = {i: [] for i in range(len(cases))}
        reqs: dict[int, int] = {i: 0 for i in range(len(cases))}
        for _ in range(a.runs):  # round robin: load from other jobs hits every case alike
            for i, (_, argv, e) in enumerate(cases):
                n = len(hub.requests)
                times[i].append(run(argv, e))
                reqs[i] += len(hub.requests) - n
        rows = [(label, *stats(times[i]), reqs[i] / a.runs) for i, (label, _, _) in enumerate(cases)]
        print(f"### `kvplan plan ORG/NAME` cold start ({a.runs} runs each)\n")
        print("| case | median ms | min ms | max ms | requests per run |\n|---|---:|---:|---:|---:|")
        for label, med, lo, hi, req in rows:
            print(f"| {label} | {med:.0f} | {lo:.0f} | {hi:.0f} | {req:g} |")
        print(f"\nFirst run, cold cache: {cfg_id}: {first_cfg * 1000:.0f} ms, {cold_cfg[0]} requests, "
              f"{cold_cfg[1]:,} bytes served; {ck_id}: {first_ck * 1000:.0f} ms, {cold_ck[0]} requests, "
              f"{cold_ck[1]:,} bytes served (the checkpoint's weights: {4 * 8} GiB).\n")

        # ---- 2. lint of N files naming 20 ids
        deploy = tmp / "deploy"
        manifests(deploy, ids, a.files)
        lint = ["lint", str(deploy), "--format", "json", "-o", str(tmp / "report.json"), "--exit-zero"]
        local_deploy = tmp / "deploy-local"
        manifests(local_deploy, ids, a.files, names=[str(repo_dirs[rid]) for rid in ids])
        lint_local = ["lint", str(local_deploy), "--format", "json", "-o", str(tmp / "report-local.json"),
                      "--exit-zero"]
        lrows = []
        labels = ("the same models as local folders (baseline, no Hub)", "cold cache (emptied before each run), online",
                  "warm cache, online", "warm cache, HF_HUB_OFFLINE=1")
        lt: dict[int, list[float]] = {i: [] for i in range(4)}
        lreq: dict[int, list[int]] = {i: [] for i in range(4)}
        lbytes: dict[int, list[int]] = {i: [] for i in range(4)}
        lworst: dict[int, list[int]] = {i: [] for i in range(4)}
        for _ in range(a.lint_runs):  # round robin; the cold run fills the cache the two warm runs use
            for i, e in enumerate((env, env, env, offline)):
                if i == 1:
                    shutil.rmtree(home, ignore_errors=True)
                hub.reset_counts()
                lt[i].append(run(lint_local if i == 0 else lint, e))
                lreq[i].append(len(hub.requests))
                lbytes[i].append(hub.bytes_served)
                lworst[i].append(max(per_id(hub, rid) for rid in ids))
        report = json.loads((tmp / "report.json").read_text())
        kv804 = report["summary"]["by_code"].get("KV804", 0)
        for i, label in enumerate(labels):
            lrows.append((label, *stats(lt[i], 1), statistics.median(lreq[i]), statistics.median(lbytes[i]),
                          max(lworst[i])))
        print(f"### `kvplan lint` of {a.files} manifests naming {len(ids)} ids ({a.lint_runs} runs each; "
              f"{report['summary']['launches']} launches, KV804: {kv804})\n")
        print("| cache | median s | min s | max s | requests per run | bytes served per run | most requests for one id "
              "|")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, med, lo, hi, req, by, worst in lrows:
            print(f"| {label} | {med:.2f} | {lo:.2f} | {hi:.2f} | {req:g} | {by:,.0f} | {worst:g} |")
    finally:
        hub.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
