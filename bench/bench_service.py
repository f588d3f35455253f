"""Throughput and latency of `kvplan serve`: N concurrent clients for a fixed duration.

    python bench/bench_service.py [--clients 8] [--duration 20] [--endpoint plan|emit|mix]
                                  [--workers 1] [--threads 4] [--gpu h100]

Starts the real server (`kvplan serve`, uvicorn) in a subprocess on a free loopback port, warms it
up, then runs N client threads (one keep-alive httpx connection each) that send requests back to
back for --duration seconds. Requests cycle through real configs sent inline (gpt-oss-20b fp8 +
skip sliding_window, Llama-3.1-8B fp8, DeepSeek-V3 with 61 MLA layers, gemma-3-4b-it, the
nvidia Llama-3.1-70B FP8 checkpoint with its hf_quant_config). Reports requests/second, latency
percentiles and errors; `--json` prints one JSON object instead. Client and server share the
machine's cores, so on small machines the client's own CPU use is part of the result.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"


def _cfg(name: str) -> dict[str, Any]:
    return json.loads((EX / name / "config.json").read_text())


def requests_for(endpoint: str, gpu: str | None) -> list[tuple[str, dict[str, Any]]]:
    hq = json.loads((EX / "nvidia-Llama-3.1-70B-Instruct-FP8" / "hf_quant_config.json").read_text())
    bodies = [
        {"config": _cfg("gpt-oss-20b"), "flags": "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window"},
        {"config": _cfg("Meta-Llama-3.1-8B"), "flags": ["--kv-cache-dtype", "fp8", "--max-model-len", "32768"]},
        {"config": _cfg("DeepSeek-V3"), "flags": "--kv-cache-dtype fp8 -tp 8"},
        {"config": _cfg("gemma-3-4b-it"), "flags": "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window"},
        {"config": _cfg("nvidia-Llama-3.1-70B-Instruct-FP8"), "hf_quant_config": hq, "flags": "-tp 4"},
    ]
    if gpu:
        for b in bodies:
            b["gpu"] = gpu
    out: list[tuple[str, dict[str, Any]]] = []
    for i, b in enumerate(bodies):
        if endpoint == "plan" or (endpoint == "mix" and i % 2 == 0):
            out.append(("/v1/plan", b))
        else:
            out.append(("/v1/emit", {**b, "to": ["vllm", "sglang", "trtllm"][i % 3]}))
    return out


def start_server(workers: int, threads: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from kvplan.cli.main import main; main()", "serve", "--port",
                             str(port), "--workers", str(workers), "--threads", str(threads), "--log-level", "warning"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit("server did not start")
        time.sleep(0.1)


def run_load(url: str, reqs: list[tuple[str, dict[str, Any]]], clients: int, duration: float) -> dict[str, Any]:
    payloads = [(path, json.dumps(body).encode()) for path, body in reqs]
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    start_evt = threading.Event()
    stop_at = [0.0]

    def client(k: int) -> None:
        with httpx.Client(base_url=url, timeout=60, headers={"content-type": "application/json"}) as c:
            i = k
            start_evt.wait()
            while time.perf_counter() < stop_at[0]:
                path, body = payloads[i % len(payloads)]
                t = time.perf_counter()
                try:
                    r = c.post(path, content=body)
                    ok = r.status_code == 200
                except httpx.HTTPError:
                    ok = False
                dt = time.perf_counter() - t
                if ok:
                    latencies[k].append(dt)
                else:
                    errors[k] += 1
                i += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    stop_at[0] = t0 + duration
    start_evt.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    lat = sorted(x for per in latencies for x in per)

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, round(p / 100 * (len(lat) - 1)))] * 1000 if lat else float("nan")

    return {"requests": len(lat), "errors": sum(errors), "seconds": round(elapsed, 2),
            "rps": round(len(lat) / elapsed, 1), "p50_ms": round(pct(50), 1), "p90_ms": round(pct(90), 1),
            "p99_ms": round(pct(99), 1), "max_ms": round(lat[-1] * 1000, 1) if lat else None,
            "mean_ms": round(statistics.fmean(lat) * 1000, 1) if lat else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--endpoint", choices=("plan", "emit", "mix"), default="plan")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--gpu", default=None, help="add a GPU profile to every request (backend rules run)")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    proc, url = start_server(a.workers, a.threads)
    try:
        reqs = requests_for(a.endpoint, a.gpu)
        for path, body in reqs:  # every request shape must succeed before timing
            r = httpx.post(url + path, json=body, timeout=60)
            if r.status_code != 200:
                raise SystemExit(f"{path} failed: {r.status_code} {r.text[:300]}")
        run_load(url, reqs, a.clients, a.warmup)
        res = run_load(url, reqs, a.clients, a.duration)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    res.update(clients=a.clients, endpoint=a.endpoint, workers=a.workers, threads=a.threads, gpu=a.gpu,
               cpus=os.cpu_count(), python=platform.python_version())
    if a.json:
        print(json.dumps(res, sort_keys=True))
        return
    print(f"{a.endpoint} x{a.clients} clients, {a.workers} worker(s) x {a.threads} threads, {res['seconds']} s: "
          f"{res['rps']} req/s, p50 {res['p50_ms']} ms, p90 {res['p90_ms']} ms, p99 {res['p99_ms']} ms, "
          f"max {res['max_ms']} ms, errors {res['errors']} ({res['requests']} ok)")


if __name__ == "__main__":
    main()
