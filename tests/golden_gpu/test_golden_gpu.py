"""Golden per-GPU plans: every GPU profile x every corpus model x five flag sets.

For each combination the plan must name an attention backend for every KV layer, or carry an error
finding on that layer that says why vLLM would fail. One compact golden file per model
(tests/golden_gpu/<model>.json) maps gpu -> flag set -> layer groups {layers, kind, kv_cache_dtype,
dtype, backend, query_dtype} plus the error and warning findings (code: message). Reviewed by hand
once (docs/rules.md, "Golden per-GPU plans"), diffed forever. Regenerate after an intended change:
    KVPLAN_UPDATE_GOLDEN=1 pytest tests/golden_gpu
and review the diff. The ~3,500 plans are compiled in worker processes to keep this fast.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CORPUS, MODELS

HERE = Path(__file__).parent
FLAG_SETS: dict[str, list[str]] = {
    "auto": ["--kv-cache-dtype", "auto"],
    "fp8": ["--kv-cache-dtype", "fp8"],
    "fp8-skip-sw": ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"],
    "int8pth": ["--kv-cache-dtype", "int8_per_token_head"],
    "bf16": ["--kv-cache-dtype", "bfloat16"],
}
WARNING_CHARS = 200  # warnings keep their key facts (the start of the message); errors are kept whole


def layer_ranges(indices: list[int]) -> str:
    """[0, 2, 4, 6] -> '0..6/2', [0, 1, 2, 5] -> '0-2,5'."""
    if not indices:
        return ""
    if len(indices) >= 3:
        step = indices[1] - indices[0]
        if step > 1 and all(b - a == step for a, b in zip(indices, indices[1:])):
            return f"{indices[0]}..{indices[-1]}/{step}"
    runs: list[str] = []
    start = prev = indices[0]
    for i in indices[1:] + [None]:  # type: ignore[list-item]
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(runs)


def golden_entry(plan: Any) -> tuple[dict[str, Any], list[str]]:
    """(compact golden for one plan, layers that have KV but neither a backend nor an error finding)."""
    groups: dict[tuple, list[int]] = {}
    for lp in plan.layers:
        if lp.kv_cache_dtype is None:
            continue
        key = (lp.kind, lp.kv_cache_dtype, lp.dtype, lp.backend, lp.flash_attn_version, lp.query_dtype)
        groups.setdefault(key, []).append(lp.index)
    errors = [f for f in plan.findings if f.severity.value == "error"]
    explained = {i for f in errors for i in f.layers}
    engine_refuses = any(not f.layers for f in errors)  # a config error names no layer: vLLM does not start
    missing = [str(lp.index) for lp in plan.layers if lp.kv_cache_dtype is not None and lp.bytes_per_token
               and not lp.backend and lp.index not in explained and not engine_refuses]
    entry = {
        "groups": [{"layers": layer_ranges(ix), "kind": k[0], "kv_cache_dtype": k[1], "dtype": k[2],
                    "backend": k[3], "flash_attn_version": k[4], "query_dtype": k[5]} for k, ix in sorted(groups.items(), key=lambda kv: kv[1][0])],
        "errors": [f"{f.code}: {f.message}" for f in errors],
        "warnings": [f"{f.code}: {f.message[:WARNING_CHARS]}" for f in plan.findings if f.severity.value == "warning"],
    }
    return entry, missing


def model_goldens(model: str) -> tuple[str, dict[str, Any], list[str]]:
    """Compile every GPU x flag set for one model: (model, golden, invariant violations)."""
    from kvplan.ingest.flags import flags_from  # noqa: PLC0415
    from kvplan.pipeline import gpu_facts  # noqa: PLC0415
    from kvplan.backends.gpus import GPU_PROFILES  # noqa: PLC0415
    from kvplan.ingest.checkpoint import load_model_inputs  # noqa: PLC0415
    from kvplan.planner.compile import compile_plan  # noqa: PLC0415

    mi = load_model_inputs(CORPUS / model)
    flags = {name: flags_from(argv) for name, argv in FLAG_SETS.items()}
    out: dict[str, Any] = {}
    bad: list[str] = []
    for gpu in GPU_PROFILES:
        gf = gpu_facts(gpu)
        per_gpu = out[gpu] = {}
        for name, sf in flags.items():
            plan = compile_plan(mi.arch, mi.quant, sf, gf, source=model, weight_bytes=mi.weight_bytes)
            per_gpu[name], missing = golden_entry(plan)
            if missing:
                bad.append(f"{model} / {gpu} / {name}: layers {','.join(missing)} have no backend and no error")
    return model, {"model": model, "engine": "vllm==0.33.0", "flag_sets": {k: " ".join(v) for k, v in FLAG_SETS.items()},
                   "gpus": out}, bad


@pytest.fixture(scope="module")
def computed() -> dict[str, tuple[dict[str, Any], list[str]]]:
    workers = min(os.cpu_count() or 1, 8)
    if workers > 1:
        import multiprocessing  # noqa: PLC0415
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            results = list(pool.map(model_goldens, MODELS))
    else:
        results = [model_goldens(m) for m in MODELS]
    return {m: (g, bad) for m, g, bad in results}


def test_every_kv_layer_has_a_backend_or_an_error_on_every_gpu(computed) -> None:
    bad = [line for _, (_, b) in sorted(computed.items()) for line in b]
    assert not bad, "\n".join(bad[:20])


def test_golden_gpu_plans_match(computed) -> None:
    changed = []
    for model, (got, _) in sorted(computed.items()):
        path = HERE / f"{model}.json"
        if os.environ.get("KVPLAN_UPDATE_GOLDEN"):
            path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        want = json.loads(path.read_text())
        if got != want:
            for gpu in sorted(set(got["gpus"]) | set(want["gpus"])):
                for fs in FLAG_SETS:
                    if got["gpus"].get(gpu, {}).get(fs) != want["gpus"].get(gpu, {}).get(fs):
                        changed.append(f"{model} / {gpu} / {fs}")
            if got.keys() != want.keys() or got["flag_sets"] != want["flag_sets"]:
                changed.append(f"{model}: header")
    assert not changed, ("per-GPU plans changed (review, then KVPLAN_UPDATE_GOLDEN=1 pytest tests/golden_gpu):\n"
                         + "\n".join(changed[:40]))


def test_golden_files_cover_every_model() -> None:
    have = {p.stem for p in HERE.glob("*.json")}
    assert have == set(MODELS), f"missing: {sorted(set(MODELS) - have)}; stale: {sorted(have - set(MODELS))}"


@pytest.mark.parametrize("indices,text", [([0, 2, 4, 6], "0..6/2"), ([0, 1, 2, 5], "0-2,5"), ([3], "3"),
                                          ([0, 5], "0,5"), ([1, 2], "1-2")])
def test_layer_ranges(indices: list[int], text: str) -> None:
    assert layer_ranges(indices) == text
