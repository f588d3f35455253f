#!/usr/bin/env python3
"""Write tests/data/vllm_oracle_capacity/cases_arch.json: one capacity case per architecture-oracle config.

Run with kvplan's own interpreter (no vLLM needed; kvplan sizes each case):

    python scripts/oracle/capacity_arch_cases.py [--fp8-kinds state sliding_attention mla] [--check]

For every config of tests/data/vllm_oracle_arch (its `auto` case in cases.json: the case keys the capacity
oracle shares with the architecture oracle are carried over) a case is written with
  * `--kv-cache-dtype auto`, `--max-model-len` min(4096, the model's own maximum as kvplan derives it),
  * a KV memory that holds a few requests: the larger of 1 GiB and REQUESTS x kvplan's bytes per request,
    rounded up to a MiB (so a large model is not a startup error by construction),
  * and the same under `--kv-cache-dtype fp8` where kvplan plans a layer of a kind in --fp8-kinds
    (default: state caches, sliding-window attention and MLA: the families whose page unification or
    alignment depends on the cache dtype).
Configs of the architectures other parts of the sweep own (SKIP_PREFIXES: GPU-platform cases in
cases_gpu_backends.json) are left out. A config kvplan refuses is kept out where vLLM 0.33.0 refuses it too
(its architecture-oracle answer says so; listed under `refused_by_both` and checked by
tests/planner/test_vllm_capacity_arch.py); where vLLM builds it, the case stays (kvplan's refusal is then
a mismatch the parity test reports). A config (or its fp8 variant) whose vLLM model class fails to build
it in the architecture oracle (its answer's error, not a refusal of the architecture) is listed under
`not_built_by_vllm` with that error. Then run the capacity oracle on the file (docs/capacity-layouts.md).
`--check` exits 1 when the file on disk differs from what would be written.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kvplan.errors import KvplanInputError  # noqa: E402
from tests.planner.arch_parity import case_input, load_answer, load_cases, refused_by_vllm  # noqa: E402

CAPACITY = ROOT / "tests" / "data" / "vllm_oracle_capacity"
OUT = CAPACITY / "cases_arch.json"
ENGINE = "vllm==0.33.0"
SKIP_PREFIXES = ("DeepseekV4", "Glm5Next", "Step5", "Inkling", "MiniMaxM3")
"""Architectures (name prefixes; DeepseekV4 covers DeepseekV41) whose capacity cases run on a GPU platform."""
MAX_LEN = 4096
GIB = 1 << 30
MIB = 1 << 20
REQUESTS = 4
FP8_KINDS = ("state", "sliding_attention", "mla")
CARRIED = ("sub_configs", "vllm_config_class", "v2_model_runner", "drop_keys", "files", "remote_config",
           "remote_config_base", "as_published", "flashinfer_impl_check", "device_capability")
"""Architecture-oracle case keys that shape how vLLM builds the config (capacity_oracle.py patch 20)."""


def _compile(case: dict, argv: list[str], tmp: Path, budget: int | None = None):
    import kvplan.api

    cfg = case_input(case, CAPACITY, tmp)
    stand_in = str((json.loads(cfg.read_text()).get("auto_map") or {}).get("AutoConfig", "")).startswith(
        "arch_oracle.") if cfg.suffix == ".json" and cfg.name != "params.json" else False
    return kvplan.api.compile(cfg, [*argv, *(["--trust-remote-code"] if stand_in else [])],
                              kv_budget_bytes=budget, engine=ENGINE)


def _sized(case: dict, tmp: Path) -> tuple[dict, set[str]]:
    """The case's flags and KV memory, and the kinds of kvplan's layers (mamba and linear attention: state)."""
    whole = _compile(case, [], tmp / "whole")
    max_len = min(MAX_LEN, whole.totals.max_model_len or MAX_LEN)
    flags = {"kv_cache_dtype": "auto", "max_model_len": max_len}
    plan = _compile(case, ["--max-model-len", str(max_len)], tmp / "sized", GIB)
    per_request = plan.totals.bytes_per_request or 0
    available = max(GIB, -(-REQUESTS * per_request // MIB) * MIB)
    kinds = {"state" if lp.kind in ("mamba", "linear_attention") else lp.kind for lp in plan.layers}
    return {**flags, "available_bytes": available}, kinds


def _error_line(answer: dict) -> str:
    err = answer["error"]
    return f"{err['stage']}: {err['type']}: {err['message'] or err['traceback_tail'][-1]}"[:240]


def build(fp8_kinds: tuple[str, ...]) -> dict:
    cases: list[dict] = []
    refused: dict[str, str] = {}
    not_built: dict[str, str] = {}
    for arch_case in load_cases():
        if arch_case.get("kv_cache_dtype", "auto") != "auto" or arch_case["name"].startswith(SKIP_PREFIXES):
            continue
        stem = arch_case["name"].removesuffix("__auto")
        case = {"config": f"../vllm_oracle_arch/{arch_case['config']}",
                **{k: arch_case[k] for k in CARRIED if k in arch_case}}
        answer = load_answer(arch_case["name"]) or {}
        with tempfile.TemporaryDirectory(prefix="kvplan-capacity-arch-") as d:
            try:
                sized, kinds = _sized(case, Path(d))
            except KvplanInputError as e:
                if answer.get("error") and refused_by_vllm(answer):
                    refused[stem] = str(e).replace(f"{CAPACITY}/", "").splitlines()[0][:200]
                    continue
                sized, kinds = {"kv_cache_dtype": "auto", "max_model_len": MAX_LEN, "available_bytes": GIB}, set()
        if answer.get("error") and not refused_by_vllm(answer):  # vLLM's model class fails to build it
            not_built[stem] = _error_line(answer)
            continue
        available = sized.pop("available_bytes")
        cases.append({"name": f"arch__{stem}__auto", **case, "flags": sized, "available_bytes": available})
        fp8 = load_answer(arch_case["name"].removesuffix("__auto") + "__fp8") or {}
        if kinds & set(fp8_kinds) and fp8.get("error"):
            not_built[f"{stem}__fp8"] = _error_line(fp8)
        elif kinds & set(fp8_kinds):
            cases.append({"name": f"arch__{stem}__fp8", **case, "flags": {**sized, "kv_cache_dtype": "fp8"},
                          "available_bytes": available})
    return {"about": "Capacity cases for scripts/oracle/capacity_oracle.py, one per architecture-oracle config "
                     "(tests/data/vllm_oracle_arch/configs), written by scripts/oracle/capacity_arch_cases.py: "
                     f"--kv-cache-dtype auto (and fp8 where kvplan plans a {'/'.join(fp8_kinds)} layer), "
                     f"--max-model-len min({MAX_LEN}, the model's), a KV memory of max(1 GiB, {REQUESTS} requests). "
                     "answers/ holds vLLM 0.33.0's layout and capacity for each, releases/<version>/ another "
                     "release's; tests/planner/test_vllm_capacity_arch.py compares kvplan with them.",
            "generated_by": "scripts/oracle/capacity_arch_cases.py",
            "skipped_prefixes": list(SKIP_PREFIXES),
            "refused_by_both": dict(sorted(refused.items())),
            "not_built_by_vllm": dict(sorted(not_built.items())),
            "cases": cases}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fp8-kinds", nargs="*", default=list(FP8_KINDS), metavar="KIND",
                    help="layer kinds (state: mamba and linear attention) that get an fp8 variant "
                         f"(default: {' '.join(FP8_KINDS)})")
    ap.add_argument("--check", action="store_true", help="exit 1 when the file on disk is not current")
    args = ap.parse_args(argv)
    text = json.dumps(build(tuple(args.fp8_kinds)), indent=1, sort_keys=True) + "\n"
    if args.check:
        current = OUT.is_file() and OUT.read_text() == text
        print(f"{OUT.relative_to(ROOT)}: {'current' if current else 'stale: rerun the script'}", file=sys.stderr)
        return 0 if current else 1
    OUT.write_text(text)
    doc = json.loads(text)
    print(f"{OUT.relative_to(ROOT)}: {len(doc['cases'])} cases, {len(doc['refused_by_both'])} configs both refuse",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
