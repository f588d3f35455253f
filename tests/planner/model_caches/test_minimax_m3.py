"""MiniMax-M3's caches (kvplan/planner/model_caches/minimax_m3.py) equal the specs vLLM's GPU model runner collects.

The MiniMax-M3 cases of tests/data/vllm_oracle_capacity/cases_gpu_backends.json that vLLM answers (Hopper;
on Blackwell the oracle cannot build the layers: their answers record the error). A text-only config
(model_type minimax_m3_text) loads in vLLM only through a config class the checkpoint names in its auto_map:
neither vLLM's config registry nor transformers maps that model_type (vLLM 0.33.0 ships MiniMaxM3TextConfig
as minimax_m3_vl's text_config class only), which the oracle's patch 19 stands in for. So kvplan plans
those cases as such a checkpoint (the case's config plus an auto_map, --trust-remote-code), and refuses the
bare config as vLLM does.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import Plan
from kvplan.planner.cache_specs import ModelCaches
from kvplan.planner.model_caches import BUILDERS, minimax_m3
from tests.conftest import ROOT
from tests.planner.model_caches.helpers import assert_caches_equal_vllms, plan_and_inputs

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
CASES = [c for c in json.loads((DATA / "cases_gpu_backends.json").read_text())["cases"]
         if c["name"].split("__")[0] in minimax_m3.ARCHITECTURES]
RELEASES = ["0.33.0", *sorted(p.name for p in (DATA / "releases").iterdir()
                              if (p / f"{CASES[0]['name']}.json").is_file())]
RUNS = [(r, c) for r in RELEASES for c in CASES]
_OWN_CLASS = {"AutoConfig": "configuration_minimax_m3.MiniMaxM3TextConfig"}
"""The auto_map of a text-only checkpoint that ships its config class (what vLLM then loads it with)."""


def _answer(case: dict[str, Any], release: str) -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return dict(json.loads((folder / f"{case['name']}.json").read_text()))


def _config(case: dict[str, Any], tmp: Path) -> Path:
    """The case's config as a checkpoint vLLM loads: minimax_m3_text with its own config class named."""
    cfg = json.loads((DATA / case["config"]).resolve().read_text())
    if cfg["model_type"] != "minimax_m3_text":
        return (DATA / case["config"]).resolve()
    out = tmp / "config.json"
    out.write_text(json.dumps({**cfg, "auto_map": _OWN_CLASS}))
    return out


def _run(case: dict[str, Any], release: str, tmp: Path, extra: tuple[str, ...] = ()) -> tuple[Plan, ModelCaches | None]:
    """kvplan's plan of the case and the builder's caches for the layers and model compile hands to plan_capacity."""
    f = case["flags"]
    argv = ["--max-model-len", str(f["max_model_len"]), "--kv-cache-dtype", f["kv_cache_dtype"],
            "--tensor-parallel-size", str(f.get("tensor_parallel_size", 1)), "--trust-remote-code", *extra]
    plan, inputs = plan_and_inputs(_config(case, tmp), argv, case["available_bytes"], case["gpu"], release)
    return plan, minimax_m3.build(*inputs)


def test_minimax_m3_builder_is_registered_for_both_classes() -> None:
    assert {a: BUILDERS[a] for a in minimax_m3.ARCHITECTURES} == {a: minimax_m3.build for a in minimax_m3.ARCHITECTURES}


@pytest.mark.parametrize(("release", "case"), RUNS, ids=[f"{r}-{c['name']}" for r, c in RUNS])
def test_minimax_m3_caches_equal_vllms_specs(release: str, case: dict[str, Any], tmp_path: Path) -> None:
    answer = _answer(case, release)
    plan, got = _run(case, release, tmp_path)
    if answer["error"] is not None:  # the oracle could not build it (Blackwell's FlashInfer workspace; a
        # release without MiniMaxM3TextConfig): kvplan lays nothing out rather than guess
        assert case["gpu"] == "b200" or release != "0.33.0", answer["error"]
        if case["gpu"] == "b200":
            assert got is None
        return
    want = answer["answer"]
    assert got is not None
    assert not got.block_outermost
    assert_caches_equal_vllms(got, answer, case)
    for s, w in zip(got.specs, want["layer_specs"], strict=True):
        assert w["tokens_per_state"] == 1
        assert s.layer == int(re.findall(r"layers\.(\d+)\.", s.name)[0]) and s.fixed_blocks is None
    # vLLM's startup error where one request at max_model_len does not fit: kvplan says so too (KV502)
    refused = want["startup_error"] is not None
    assert ("KV502" in [f.code for f in plan.findings]) == refused
    if refused and plan.totals.kv_cache_layout is not None:  # laid out (the packing step): vLLM's estimate too
        fits = re.search(r"estimated maximum model length is (\d+)", want["startup_error"])
        assert fits is not None and plan.totals.max_model_len_fits == int(fits.group(1))


@pytest.mark.parametrize("release", RELEASES)
def test_a_bare_minimax_m3_text_config_is_refused_as_vllm_refuses_it(release: str) -> None:
    """Without an auto_map vLLM's config loader finds no class for minimax_m3_text (transformers does not
    know it; vLLM's registry maps only minimax_m3_vl and minimax_m3_mtp): "Transformers does not recognize
    this architecture", at 0.33.0 as at 0.34.0."""
    case = next(c for c in CASES if c["name"] == "MiniMaxM3SparseForCausalLM__h100__fp8__8192")
    with pytest.raises(KvplanInputError, match=f"vLLM {release} cannot load this config: model_type 'minimax_m3_text'"):
        kvplan.api.compile((DATA / case["config"]).resolve(), ["--max-model-len", "8192"], gpu="h100",
                           engine=f"vllm=={release}")


def test_minimax_m3_block_size_is_aligned_to_the_sparse_kernel_block() -> None:
    """The sparse and indexer backends take 128-token blocks only: vLLM raises the default (16 at 0.33, 64
    at 0.34) to 128, keeps a --block-size that is a multiple of it, and cannot run another."""
    assert minimax_m3.block_size(ServingFlags(), 16, sparse=True) == 128
    assert minimax_m3.block_size(ServingFlags(), 64, sparse=True) == 128
    assert minimax_m3.block_size(ServingFlags(block_size=256), 256, sparse=True) == 256
    assert minimax_m3.block_size(ServingFlags(block_size=32), 32, sparse=True) is None
    assert minimax_m3.block_size(ServingFlags(), 16, sparse=False) == 16


def test_minimax_m3_fp8_indexer_halves_the_index_cache(tmp_path: Path) -> None:
    """--attention-config indexer_kv_dtype fp8: the indexer's keys are e4m3 (1 B), the K/V cache unchanged."""
    case = next(c for c in CASES if c["name"] == "MiniMaxM3SparseForCausalLM__h100__fp8__8192")
    _, base = _run(case, "0.33.0", tmp_path)
    _, fp8 = _run(case, "0.33.0", tmp_path, ("--attention-config", '{"indexer_kv_dtype": "fp8"}'))
    assert base is not None and fp8 is not None
    for a, b in zip(base.specs, fp8.specs, strict=True):
        assert b.page_size_bytes == (a.page_size_bytes // 2 if a.name.endswith("index_cache") else a.page_size_bytes)


@pytest.mark.parametrize("release", RELEASES)
def test_minimax_m3_transformers_schema_marks_the_same_sparse_layers(release: str, tmp_path: Path) -> None:
    """A text_config in transformers' schema (layer_types 'minimax_m3_sparse', index_head_dim; no
    sparse_attention_config) gives the sparse layers and index caches of the checkpoint's schema: the same
    specs vLLM answers for both configs."""
    old = next(c for c in CASES if c["name"] == "MiniMaxM3SparseForConditionalGeneration__h100__fp8__8192")
    new = next(c for c in CASES if "transformers-schema" in c["name"])
    _, a = _run({**old, "flags": new["flags"]}, release, tmp_path)
    _, b = _run(new, release, tmp_path)
    assert a is not None and b is not None
    assert sum(s.spec == "MLAAttentionSpec" for s in b.specs) == 57
    assert a == b


def test_minimax_m3_text_config_without_sparse_layers_follows_the_release_config_class() -> None:
    """Neither sparse_attention_config nor layer_types: vLLM 0.33 loads minimax_m3_vl with its own MiniMaxM3Config,
    whose MiniMaxM3TextConfig applies its default section (layers 3-59 sparse, 128-element index keys; the
    architecture oracle's MiniMaxM3SparseForConditionalGeneration__no-section answers); 0.34 loads it with
    transformers' MiniMaxM3VLConfig (kvplan/data/vllm config_types `classes`), whose text config has every
    layer full attention. A layer_types marking one layer is read by 0.34 only."""
    from kvplan.ingest.architectures import modelled_release
    from kvplan.pipeline import flags_from, model_inputs

    assert modelled_release("0.33.0").vllm_config_class("minimax_m3_vl") == "MiniMaxM3Config"
    assert modelled_release("0.34.0").vllm_config_class("minimax_m3_vl") == "MiniMaxM3VLConfig"
    raw = json.loads((ROOT / "tests" / "data" / "vllm_oracle_arch" / "configs" /
                      "MiniMaxM3SparseForConditionalGeneration__no-section.json").read_text())

    def sparse(cfg: dict[str, Any], release: str) -> list[int]:
        arch = model_inputs(cfg, flags_from([], release), release=release).arch
        return [la.index for la in arch.layers if la.extra_caches and la.extra_caches[0].elements == 128]

    assert sparse(raw, "0.33.0") == list(range(3, 60)) and sparse(raw, "0.34.0") == []
    n = raw["text_config"]["num_hidden_layers"]
    raw["text_config"]["layer_types"] = ["minimax_m3_sparse" if i == 5 else "full_attention" for i in range(n)]
    assert sparse(raw, "0.33.0") == list(range(3, 60)) and sparse(raw, "0.34.0") == [5]
