#!/usr/bin/env python3
"""KV dtype decisions vLLM 0.33.0 makes for the quantized configs of the published-configs suite.

The architecture oracle (arch_oracle.py) builds each model class on the CPU, which has no FP8 /
NVFP4 / MXFP4 weight kernels, so it answers a quantized re-upload's layer geometry without its
weight quantization. This script asks the attention-level differential oracle (the
`vllm_oracle.py` of the oracle material, the one tests/data/vllm_oracle was made with) what every
attention layer's kv_cache_dtype and quant mode are with the checkpoint's own quantization_config
and hf_quant_config.json: it builds the real model class where it can, else vLLM's Attention
layers directly with the checkpoint's quant config. Run by hand in the oracle venv (never in CI):

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/oracle/published_dtype_oracle.py \\
        --oracle <oracle material>/vllm_oracle.py [--only NAME ...] [--force]

Answers go to tests/data/published_configs/dtype_answers/<name>__<auto|fp8>.json with the sha256
of the config they answer; a case whose config changed is re-run.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "data" / "published_configs"
OUT = SUITE / "dtype_answers"


def _fresh_parallel_state() -> None:
    """vllm_oracle.run() destroys its torch process group after each run, but vLLM's group
    coordinators (world, tensor / pipeline / expert parallel ...) outlive it and would point the next
    run at the destroyed group: they are dropped so the next run initialises them again."""
    import contextlib

    from vllm.distributed import parallel_state

    for name in dir(parallel_state):
        group = getattr(parallel_state, name)
        if name.startswith("_") and isinstance(group, parallel_state.GroupCoordinator):
            with contextlib.suppress(Exception):
                group.destroy()
            setattr(parallel_state, name, None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--oracle", required=True, type=Path, help="path of vllm_oracle.py")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    spec = importlib.util.spec_from_file_location("vllm_oracle", args.oracle)
    assert spec and spec.loader
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)
    OUT.mkdir(exist_ok=True)
    configs = [c for c in json.loads((SUITE / "PROVENANCE.json").read_text())["configs"] if c["quantized"]]
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # vLLM logs to stdout
    for c in configs:
        cfg = SUITE / c["name"] / "config.json"
        digest = hashlib.sha256(cfg.read_bytes()).hexdigest()
        for dtype in ("auto", "fp8"):
            name = f"{c['name']}__{dtype}"
            out = OUT / f"{name}.json"
            if args.only and name not in args.only and c["name"] not in args.only:
                continue
            if out.exists() and not args.force and json.loads(out.read_text()).get("config_sha256") == digest:
                continue
            _fresh_parallel_state()
            res = oracle.run(oracle._parse_args(["--config", str(cfg), "--kv-cache-dtype", dtype, "--mode", "auto"]))
            res["inputs"]["config"] = f"{c['name']}/config.json"
            res["config_sha256"] = digest
            out.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
            err = res["error"]
            print(f"{name}: {res['mode']} " + (f"{err['type']}: {err['message'][:120]}" if err else "ok"),
                  file=real_stdout, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
