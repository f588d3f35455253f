"""Inkling's caches (kvplan/planner/model_caches/inkling.py) equal the specs vLLM's GPU model runner collects.

Every Inkling case of tests/data/vllm_oracle_capacity/cases_gpu_backends.json (the default, all-global and
swa-geometry configs, the multimodal class, auto / fp8, TP 2, several max_model_len) at every release with
answers: kvplan plans the case as `kvplan plan` does, and the builder's specs, taken from the layer plans and
the model kvplan read, equal the answer's `layer_specs` field by field, in vLLM's order.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from kvplan.planner.cache_specs import ModelCaches
from kvplan.planner.model_caches import BUILDERS, inkling
from tests.conftest import ROOT
from tests.planner.model_caches.helpers import assert_caches_equal_vllms, plan_and_inputs

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
CASES = [c for c in json.loads((DATA / "cases_gpu_backends.json").read_text())["cases"]
         if c["name"].split("__")[0] in inkling.ARCHITECTURES]
RELEASES = ["0.33.0", *sorted(p.name for p in (DATA / "releases").iterdir()
                              if (p / f"{CASES[0]['name']}.json").is_file())]
RUNS = [(r, c) for r in RELEASES for c in CASES]


def _answer(case: dict[str, Any], release: str) -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return dict(json.loads((folder / f"{case['name']}.json").read_text()))


def _argv(case: dict[str, Any], extra: tuple[str, ...] = ()) -> list[str]:
    f = case["flags"]
    return ["--max-model-len", str(f["max_model_len"]), "--kv-cache-dtype", f["kv_cache_dtype"],
            "--tensor-parallel-size", str(f.get("tensor_parallel_size", 1)), *extra]


def _caches(case: dict[str, Any], release: str, extra: tuple[str, ...] = ()) -> ModelCaches | None:
    """The builder's caches for the layers and model compile hands to plan_capacity (kvplan plan's inputs)."""
    _, inputs = plan_and_inputs((DATA / case["config"]).resolve(), _argv(case, extra), case["available_bytes"],
                                case["gpu"], release)
    return inkling.build(*inputs)


def test_inkling_builder_is_registered_for_both_classes() -> None:
    assert {a: BUILDERS[a] for a in inkling.ARCHITECTURES} == {a: inkling.build for a in inkling.ARCHITECTURES}


@pytest.mark.parametrize(("release", "case"), RUNS, ids=[f"{r}-{c['name']}" for r, c in RUNS])
def test_inkling_caches_equal_vllms_specs(release: str, case: dict[str, Any]) -> None:
    answer = _answer(case, release)
    assert answer["error"] is None, answer["error"]
    want = answer["answer"]
    got = _caches(case, release)
    assert got is not None
    assert not got.block_outermost
    assert_caches_equal_vllms(got, answer, case)
    for s, w in zip(got.specs, want["layer_specs"], strict=True):
        assert w["tokens_per_state"] == 1  # no pooled cache: CacheSpec has no such field to compare
        assert s.layer == int(s.name.split(".")[2]) and not s.draft and s.fixed_blocks is None


def test_inkling_conv_state_is_padded_to_a_power_of_two_per_head() -> None:
    """swa-geometry's local layers: 2 KV heads of 64: K + V + 2 x 1536/2 = 1664 elements a head, padded to
    2048, so the conv page equals the full layers' (4 heads of 1024) and only the attention pages differ."""
    case = next(c for c in CASES if c["name"] == "InklingForCausalLM__swa-geometry__h100__auto__8192")
    got = _caches(case, "0.33.0")
    assert got is not None
    conv = {s.layer: s.page_size_bytes for s in got.specs if s.name.endswith("conv_state")}
    attn = {s.layer: s.page_size_bytes for s in got.specs if s.name.endswith(".attn")}
    assert conv[0] == conv[1] == 4 * 2 * 2048 * 2
    assert (attn[0], attn[1]) == (16 * 2 * 64 * 2 * 2, 16 * 4 * 128 * 2 * 2)


def test_inkling_block_size_flag_sizes_only_the_attention_blocks() -> None:
    """--block-size 32 doubles the attention blocks; the conv state keeps its kernel-sized block."""
    case = next(c for c in CASES if c["name"] == "InklingForCausalLM__h100__auto__8192")
    got = _caches(case, "0.33.0", ("--block-size", "32"))
    assert got is not None and got.block_size == 32
    assert {(s.name.rsplit(".", 1)[1], s.block_size) for s in got.specs} == {("conv_state", 4), ("attn", 32)}


def test_inkling_with_a_speculative_draft_is_not_laid_out() -> None:
    """InklingMTP registers caches of its own, which the builder does not model: no layout rather than a
    wrong one."""
    case = next(c for c in CASES if c["name"] == "InklingForCausalLM__h100__auto__8192")
    assert _caches(case, "0.33.0", ("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}')) \
        is None


def test_inkling_with_skip_layers_is_not_laid_out() -> None:
    """--kv-cache-dtype-skip-layers: vLLM re-aligns the block size to the mixed pages, not modelled here."""
    case = next(c for c in CASES if c["name"] == "InklingForCausalLM__h100__fp8__8192")
    assert _caches(case, "0.33.0", ("--kv-cache-dtype-skip-layers", "3")) is None
