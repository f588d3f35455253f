"""kvplan's attention-backend selection against vLLM's own selector (tests/data/vllm_oracle_backends).

The answers were made by scripts/oracle/backend_oracle.py with each release's own code: for every GPU and every
attention configuration of its grid, the backend `CudaPlatform.get_attn_backend_cls` returns (or the ValueError it
raises) and every CUDA backend's `validate_configuration` reasons. kvplan must pick the same backend and call the
same backends valid, with vLLM's generic reasons in vLLM's order.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.engines import backends_of
from kvplan.backends.gpus import get_gpu
from kvplan.backends.request import BackendRequest
from kvplan.backends.select import select_backend, validate_backend
from kvplan.backends.vllm_rows import BACKEND_ORACLE_RELEASES, BACKENDS

ORACLE = Path(__file__).resolve().parents[1] / "data" / "vllm_oracle_backends"
GPUS = {"a100": "a100-80gb", "l40s": "l40s", "h100": "h100-sxm", "b200": "b200", "b300": "b300",
        "rtx-pro-6000": "rtx-pro-6000", "mi250x": "mi250x", "mi300x": "mi300x", "mi300x-aiter": "mi300x",
        "mi355x": "mi355x", "mi355x-aiter": "mi355x"}
"""The oracle's GPU names -> kvplan's `--gpu` profiles (same compute capability or gfx target)."""
AITER = {"rocm_use_aiter": True}
"""kvplan's `--attention-config` stand-in for VLLM_ROCM_USE_AITER=1 (the oracle's `-aiter` GPUs)."""

_GENERIC = re.compile(r"^(head_size|dtype|kv_cache_dtype|block_size|MLA|non-MLA|sparse|non-sparse|per-head quant "
                      r"scales|compute capability|sliding window) not supported$|^attention sinks not supported$"
                      r"|^attention type \w+ not supported$")
"""The reasons of vLLM's shared `AttentionBackend.validate_configuration` (backend-specific ones come last)."""


@cache
def _load(version: str, gpu: str) -> dict[str, Any]:
    return json.loads((ORACLE / version / f"{gpu}.json").read_text())


def _answers(version: str, gpu: str) -> Iterator[tuple[dict[str, Any], dict[str, list[str]], str | None]]:
    d = _load(version, gpu)
    for row, (_, rmap, selected, _) in zip(d["cases"], d["answers"], strict=True):
        reasons = {b: d["reason_lists"][i] for b, i in d["reason_maps"][rmap].items()}
        yield dict(zip(d["case_keys"], row, strict=True)), reasons, selected


def _request(case: dict[str, Any]) -> BackendRequest:
    return BackendRequest(
        head_size=case["head_size"], kv_cache_dtype=case["kv_cache_dtype"], model_dtype=case["dtype"],
        use_mla=case["use_mla"], use_sparse=case["use_sparse"], has_sinks=case["has_sink"],
        has_sliding_window=case["has_sliding_window"], attn_type=case["attn_type"], num_heads=case["num_heads"],
        block_size=case["block_size"],
        # the oracle has no model config, so vLLM skips its model-dimension checks; DeepSeek-V3.2's top-k passes
        # kvplan's
        index_topk=2048 if case["use_sparse"] else None)


def _judged(version: str, gpu: str = "h100") -> list[str]:
    """The backends the oracle judged on the GPU: those it asks about, less those the release does not have."""
    meta = json.loads((ORACLE / version / "meta.json").read_text())
    platform = get_gpu(GPUS[gpu]).platform
    judged = meta["rocm_judged"] if platform == "rocm" else meta["judged"]
    absent = set(_load(version, gpu).get("absent", []))
    return [b for b in judged if b in BACKENDS and platform in BACKENDS[b].platforms and b not in absent]


def _attention_config(gpu: str) -> dict[str, Any]:
    return AITER if gpu.endswith("-aiter") else {}


def _verdict(reasons: list[str]) -> tuple[list[str], bool]:
    """vLLM's shared reasons (each once, in order) and, when they alone leave the backend valid, whether a
    backend-specific reason (`supports_combination`) refuses it: what decides selection. The backend-specific
    wording is kvplan's where it names a reason vLLM words differently."""
    generic = list(dict.fromkeys(r for r in reasons if _GENERIC.match(r)))
    return generic, not generic and bool(reasons)


def test_oracle_answers_every_release_kvplan_calls_verified() -> None:
    for version in BACKEND_ORACLE_RELEASES:
        meta = json.loads((ORACLE / version / "meta.json").read_text())
        assert meta["vllm"] == version
        assert sorted(meta["gpus"]) == sorted(GPUS)
        for gpu in GPUS:
            assert _load(version, gpu)["unjudged"] == {}, (version, gpu)


def test_oracle_judges_every_cuda_backend_kvplan_models() -> None:
    for version in BACKEND_ORACLE_RELEASES:
        present = backends_of(EngineVersion.parse(f"vllm=={version}"))
        assert present is not None
        judged = set(_judged(version))
        cuda_rows = {n for n, r in BACKENDS.items() if "cuda" in r.platforms and n in present}
        assert cuda_rows <= judged, cuda_rows - judged
        rocm_rows = {n for n, r in BACKENDS.items() if "rocm" in r.platforms and n in present}
        assert rocm_rows <= set(_judged(version, "mi300x")), rocm_rows - set(_judged(version, "mi300x"))


@pytest.mark.parametrize("version", BACKEND_ORACLE_RELEASES)
def test_backends_a_release_lacks_are_the_ones_kvplan_leaves_out(version: str) -> None:
    # the oracle lists a backend it asks about as absent when the release's AttentionBackendEnum does not name
    # it; kvplan's per-release backend names (generated from the wheel) must say the same
    present = backends_of(EngineVersion.parse(f"vllm=={version}"))
    assert present is not None
    for gpu in GPUS:
        absent = set(_load(version, gpu).get("absent", []))
        asked = set(_judged(version, gpu)) | absent
        assert absent == asked - present, (gpu, absent, asked - present)


@pytest.mark.parametrize("version", BACKEND_ORACLE_RELEASES)
@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_selected_backend_matches_vllm(version: str, gpu: str) -> None:
    engine, profile = EngineVersion.parse(f"vllm=={version}"), get_gpu(GPUS[gpu])
    wrong = []
    for case, _, selected in _answers(version, gpu):
        choice = select_backend(_request(case), profile, engine, attention_config=_attention_config(gpu))
        assert choice.error_stage != "config", case  # the grid holds only configs vLLM's config checks pass
        ours = None if choice.error_stage == "selection" else choice.backend
        if ours != selected:
            wrong.append((case, selected, ours, choice.error))
    assert not wrong, f"{len(wrong)} cases differ, e.g. {wrong[:3]}"


@pytest.mark.parametrize("version", BACKEND_ORACLE_RELEASES)
@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_backend_validation_matches_vllm(version: str, gpu: str) -> None:
    engine, profile = EngineVersion.parse(f"vllm=={version}"), get_gpu(GPUS[gpu])
    judged, ac = _judged(version, gpu), _attention_config(gpu)
    wrong = []
    for case, reasons, _ in _answers(version, gpu):
        req = _request(case)
        for name in judged:
            if BACKENDS[name].use_mla != case["use_mla"]:
                continue
            ours = validate_backend(name, req, profile, ac, engine=engine)
            if _verdict(reasons.get(name, [])) != _verdict(ours):
                wrong.append((name, case, reasons.get(name, []), ours))
    assert not wrong, f"{len(wrong)} differ, e.g. {wrong[:3]}"
