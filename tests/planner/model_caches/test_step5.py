"""Step 5's caches (kvplan/planner/model_caches/step5.py) equal the ones vLLM's GPU model runner collects.

Every Step 5 case of tests/data/vllm_oracle_capacity/cases_gpu_backends.json has an answer per release
(answers/ = vLLM 0.33.0, releases/0.34.0/) recording `layer_specs`: each KV cache vLLM registers, in order,
as scripts/oracle/capacity_oracle.py read it from the model built on that GPU's CUDA platform. The builder gets
the layer plans, model and flags `kvplan.api.compile` hands to plan_capacity for the same case, and must give
the same caches field by field, or refuse where vLLM refused to build the model.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.planner.cache_specs import CacheSpec, blocks_per_request
from kvplan.planner.layout import LayoutRefused
from kvplan.planner.model_caches import BUILDERS, step5
from tests.conftest import ROOT
from tests.planner.model_caches.helpers import Inputs, plan_and_inputs
from tests.planner.test_vllm_capacity_gpu_backends import _argv

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
RELEASES = ("0.33.0", "0.34.0")
CASES = [c for c in json.loads((DATA / "cases_gpu_backends.json").read_text())["cases"]
         if c["name"].split("__")[0] in step5.ARCHITECTURES]
RUNS = [(r, c) for r in RELEASES for c in CASES]
MAX_NUM_BATCHED_TOKENS = 8192
"""The oracle's max_num_batched_tokens (its blocks_per_request)."""

_NOT_MODELLED = ("tokens_per_state", "num_kv_heads", "head_size", "dtype")
"""Recorded spec fields CacheSpec does not carry as such (the geometry goes into its identity)."""


def _answer(case: dict[str, Any], release: str) -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return json.loads((folder / f"{case['name']}.json").read_text())


def _inputs(case: dict[str, Any], release: str, monkeypatch: pytest.MonkeyPatch) -> Inputs:
    """What compile hands plan_capacity for the case (its first call: the plan itself)."""
    return plan_and_inputs((DATA / case["config"]).resolve(), _argv(case["flags"]), case["available_bytes"],
                           case["gpu"], release)[1]


def _record(spec: CacheSpec, mml: int) -> dict[str, Any]:
    """A builder's cache as the oracle records it (capacity_oracle.py::_spec_record)."""
    rec = {"name": spec.name, "spec": spec.spec, "block_size": spec.block_size,
           "page_size_bytes": spec.page_size_bytes, "stride_alignment": spec.stride_alignment,
           "blocks_per_request": blocks_per_request(spec, mml, MAX_NUM_BATCHED_TOKENS)}
    if spec.sliding_window is not None:
        rec["sliding_window"] = spec.sliding_window
    return rec


def test_every_architecture_is_registered_and_has_cases() -> None:
    assert all(BUILDERS[a] is step5.build for a in step5.ARCHITECTURES)
    assert {c["name"].split("__")[0] for c in CASES} == set(step5.ARCHITECTURES)
    for release in RELEASES:
        for case in CASES:
            assert _answer(case, release)["vllm_version"] == release, case["name"]


@pytest.mark.parametrize(("release", "case"), RUNS, ids=[f"{r}-{c['name']}" for r, c in RUNS])
def test_caches_equal_vllms(release: str, case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    answer = _answer(case, release)
    if case["name"].endswith("__dense"):
        pytest.skip("kvplan refuses the config itself (test_a_checkpoint_without_sparse_config_is_refused)")
    layers, arch, flags, ctx = _inputs(case, release, monkeypatch)
    if answer["error"] is not None and answer["error"]["stage"] == "build_model":
        # vLLM refused to build the model: the builder refuses with its reason
        with pytest.raises(LayoutRefused) as refused:
            step5.build(layers, arch, flags, ctx)
        assert refused.value.message == answer["error"]["message"]
        return
    if answer["error"] is not None:  # vLLM built the caches and failed grouping them (packing's to refuse)
        assert answer["error"]["stage"] == "capacity"
        got = step5.build(layers, arch, flags, ctx)
        assert got is not None and len(got.specs) == 12
        return
    got = step5.build(layers, arch, flags, ctx)
    want = answer["answer"]
    if want.get("draft_layer_names"):  # Step5MTP's layers: not modelled (their kinds are not in kvplan's model)
        assert got is None and arch.mtp_layers == 1 and flags.num_speculative_tokens == 2
        return
    assert got is not None
    assert [_record(s, ctx.max_model_len) for s in got.specs] == [
        {k: v for k, v in s.items() if k not in _NOT_MODELLED} for s in want["layer_specs"]]
    # the CircularBufferSpec holds one ring per request whatever its length
    assert [s.fixed_blocks for s in got.specs] == [1 if s["spec"] == "CircularBufferSpec" else None
                                                   for s in want["layer_specs"]]
    assert [s.layer for s in got.specs] == [int(s["name"].split(".layers.")[1].split(".")[0])
                                            for s in want["layer_specs"]]
    assert got.block_size == answer["engine"]["block_size"]
    assert got.layout_name == want["kv_cache_layout"]
    assert got.block_outermost == (want["kv_cache_layout"] in ("BLNHC", "BLHNC"))


def _default(release: str, monkeypatch: pytest.MonkeyPatch, name: str = "Step5ForCausalLM__h100__fp8__4096__tp4",
             ) -> Inputs:
    return _inputs(next(c for c in CASES if c["name"] == name), release, monkeypatch)


@pytest.mark.parametrize("release", RELEASES)
def test_dsa_stride_is_whole_eight_token_kernel_blocks(release: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """MultipleOf(8): a block of 8 tokens is one kernel block (alignment 1); 24 tokens are three of 8. The
    sliding layers keep FlashAttention's multiples of 16 (at least 16, at most the block)."""
    layers, arch, flags, ctx = _default(release, monkeypatch, "Step5ForCausalLM__h100__auto__4096")
    for bs, align, window_block in ((8, 1, 16), (24, 8 * 8 * 384 * 2, 16), (40, 8 * 8 * 384 * 2, 32),
                                    (64, 8 * 8 * 384 * 2, 64)):
        got = step5.build(layers, arch, flags, replace(ctx, block_size=bs))
        assert got is not None and got.block_size == bs
        dsa = next(s for s in got.specs if s.name == "model.layers.3.self_attn.attn")
        summary = next(s for s in got.specs if s.name.endswith("sparse_summary_cache"))
        window = next(s for s in got.specs if s.spec == "SlidingWindowSpec")
        assert (dsa.stride_alignment, dsa.page_size_bytes, summary.page_size_bytes) == (align, bs * 6144, bs * 32)
        assert (window.block_size, window.page_size_bytes) == (window_block, window_block * 4096)


def test_blocks_not_of_eight_token_regions_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    layers, arch, flags, ctx = _default("0.33.0", monkeypatch)
    with pytest.raises(LayoutRefused, match="align to eight-token regions"):
        step5.build(layers, arch, flags, replace(ctx, block_size=12))


def test_tail_ring_must_hold_its_rows_in_one_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """fp8 at TP 4: 2 KV heads x 384 B a token, 768 B; 8 tokens hold 6 rows of 1 KiB, fewer than the 7 the
    ring needs: vLLM 0.33 refuses, 0.34 asks for a larger kernel block (not modelled: no layout)."""
    layers, arch, flags, ctx = _default("0.33.0", monkeypatch)
    with pytest.raises(LayoutRefused, match="needs 7 rows of 1024 bytes in one 6144-byte KV page"):
        step5.build(layers, arch, flags, replace(ctx, block_size=8))
    layers, arch, flags, ctx = _default("0.34.0", monkeypatch)
    assert step5.build(layers, arch, flags, replace(ctx, block_size=8)) is None


def test_a_checkpoint_without_sparse_config_is_refused() -> None:
    """vLLM refuses to build a dense-only Step 5 checkpoint: kvplan says so as an input error."""
    case = next(c for c in CASES if c["name"].endswith("__dense"))
    assert _answer(case, "0.33.0")["error"]["message"].startswith("Step5 requires a checkpoint with a sparse_config")
    with pytest.raises(KvplanInputError, match="without a sparse_config section"):
        kvplan.api.compile((DATA / case["config"]).resolve(), _argv(case["flags"]), gpu="h100")


@pytest.mark.parametrize(("change", "message"), [
    ({"proxy_dim": 128}, "requires sparse_config.proxy_dim=256, got 128"),
    ({"region_block_size": 16}, "requires sparse_config.region_block_size=8, got 16"),
    ({"enabled": "yes"}, "enabled is a bool"),
])
def test_sparse_config_vllm_refuses_is_an_input_error(change: dict[str, Any], message: str, tmp_path: Path) -> None:
    """get_step5_sparse_config: the summary and tail-ring caches are built for 256 elements per 8 tokens."""
    cfg = json.loads((DATA / "../vllm_oracle_arch/configs/Step5ForCausalLM__default.json").read_text())
    cfg["sparse_config"].update(change)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(KvplanInputError, match=message):
        kvplan.api.compile(tmp_path / "config.json", ["--max-model-len", "4096"])
    cfg["sparse_config"]["enabled"] = False  # no DSA layers: vLLM reads nothing else of the section
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    if "enabled" not in change:
        assert kvplan.api.compile(tmp_path / "config.json", ["--max-model-len", "4096"]).layers
