"""Backends a model class chooses before any layer asks the selector: kvplan equals vLLM run on the GPU.

Gemma4Config.verify_and_update_config (vllm/model_executor/models/config.py) sees Gemma 4's mixed head sizes
(256 on sliding layers, 512 on full ones) and sets FlashAttention 4 for every layer where FA4 runs (SM90 with
an fp8 cache excepted from 0.31), else forces TRITON_ATTN (ENGINE_FEATURES gemma4_*). The answers in
tests/data/vllm_oracle_capacity/cases_model_backends.json (answers/ for 0.33.0, releases/0.34.0/) are vLLM's own
on each GPU's CUDA platform (scripts/oracle/capacity_oracle.py patch 18): the layers' backends and the layout
they give. The multimodal class runs vLLM's multimodal-prefix composite on SM90 (TRITON_FLASH_ATTN: Triton for
image masks, this FlashAttention selection for causal requests), which kvplan names by its causal backend.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

import kvplan.api
from kvplan.model.plan import Plan
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
CASES = json.loads((DATA / "cases_model_backends.json").read_text())["cases"]
RELEASES = ("0.33.0", "0.34.0")
COMPOSITE_CAUSAL = {"TRITON_FLASH_ATTN": "FLASH_ATTN", "TRITON_FLASHINFER": "FLASHINFER"}
"""vLLM's multimodal-prefix composites and the causal backend inside each (what kvplan selects)."""


def _answer(case: dict[str, Any], release: str) -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return json.loads((folder / f"{case['name']}.json").read_text())


def _plan(case: dict[str, Any], release: str) -> Plan:
    f = case["flags"]
    return kvplan.api.compile((DATA / case["config"]).resolve(),
                              ["--max-model-len", str(f["max_model_len"]), "--kv-cache-dtype", f["kv_cache_dtype"]],
                              kv_budget_bytes=case["available_bytes"], gpu=case["gpu"], engine=f"vllm=={release}")


@pytest.mark.parametrize(("release", "case"), [(r, c) for r in RELEASES for c in CASES],
                         ids=[f"{r}-{c['name']}" for r in RELEASES for c in CASES])
def test_gemma4_backends_and_layout_equal_vllms(release: str, case: dict[str, Any]) -> None:
    answer = _answer(case, release)
    assert answer["error"] is None and answer["vllm_version"] == release
    want = answer["answer"]
    plan = _plan(case, release)
    assert {lp.backend for lp in plan.layers if lp.bytes_per_token} == {
        COMPOSITE_CAUSAL.get(b, b) for b in want["backends"]}
    lay = plan.totals.kv_cache_layout
    assert lay is not None
    assert (lay.block_size, lay.num_blocks) == (answer["engine"]["block_size"], want["num_blocks"])
    assert plan.totals.tokens_capacity == want["gpu_kv_cache_tokens"]


def test_triton_is_forced_where_fa4_does_not_run() -> None:
    """An A100 has no FA4: every layer runs TRITON_ATTN, and the decision says why."""
    case = next(c for c in CASES if c["name"] == "Gemma4ForCausalLM__a100__auto__8192")
    plan = _plan(case, "0.33.0")
    fact = next(d.fact for d in plan.layers[0].decisions if d.field == "backend")
    assert "Gemma4Config" in fact and "TRITON_ATTN" in fact and "FA4 does not run" in fact


def test_fa4_for_every_layer_on_hopper_with_a_bf16_cache() -> None:
    """An H100 with a bf16 cache: FA4 for the 256-wide sliding layers too, not FA3 (one kernel path)."""
    case = next(c for c in CASES if c["name"] == "Gemma4ForCausalLM__h100__auto__8192")
    for release in RELEASES:
        plan = _plan(case, release)
        assert {(lp.head_size, lp.flash_attn_version) for lp in plan.layers if lp.bytes_per_token} == {
            (256, 4), (512, 4)}


def test_hopper_fp8_keeps_per_layer_versions_from_0_31() -> None:
    """SM90 with an fp8 cache: FA3 for the 256-wide layers from 0.31 (gemma4_sm90_fp8_per_layer_fa); before, FA4
    for all (whose fp8 path on SM90 then rejected FlashAttention altogether)."""
    case = next(c for c in CASES if c["name"] == "Gemma4ForCausalLM__h100__fp8__8192")
    plan = _plan(case, "0.33.0")
    assert {(lp.head_size, lp.flash_attn_version) for lp in plan.layers if lp.bytes_per_token} == {
        (256, 3), (512, 4)}
    old = _plan(case, "0.30.0")  # FA4 for every layer, whose fp8 cache on SM90 came in 0.31: FlashInfer
    assert {lp.backend for lp in old.layers if lp.bytes_per_token} == {"FLASHINFER"}


def test_before_0_24_triton_for_heads_above_256_on_every_gpu() -> None:
    case = next(c for c in CASES if c["name"] == "Gemma4ForCausalLM__h100__auto__8192")
    plan = _plan(case, "0.22.0")
    assert {lp.backend for lp in plan.layers if lp.bytes_per_token} == {"TRITON_ATTN"}
