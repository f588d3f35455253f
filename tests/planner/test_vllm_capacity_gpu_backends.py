"""Layouts set by the GPU's own attention backends: kvplan at --gpu equals vLLM run on that GPU's CUDA platform.

tests/data/vllm_oracle_capacity/cases_gpu_backends.json: a model, flags, a KV memory and a `gpu`; the answers
(answers/ for vLLM 0.33.0, releases/VERSION/ for the others) are what scripts/oracle/capacity_oracle.py computed
with vLLM's CUDA platform answering that GPU (its patch 13): each layer built with the backend the GPU's selector
picks (the sparse FlashMLA / FlashInfer backends of DeepSeek-V3.2 and GLM-5, with the fp8_ds_mla cache the sparse
FlashMLA backend makes of fp8, and the indexer backend's 64-token kernel block), then vLLM's own layout and
capacity. A case whose answer kvplan does not lay out yet is listed in NOT_LAID_OUT with the reason, and the test
checks kvplan still says so (no layout) rather than printing a wrong one.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.model.plan import Plan
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
CASES = json.loads((DATA / "cases_gpu_backends.json").read_text())["cases"]
RELEASES = ["0.33.0", *sorted(p.name for p in (DATA / "releases").iterdir()
                              if (p / f"{CASES[0]['name']}.json").is_file())]
RUNS = [(r, c) for r in RELEASES for c in CASES]

NOT_LAID_OUT = {
    "DeepseekV4ForCausalLM": "compressed latent, sliding-window, compressor and indexer caches in groups of "
                             "different block sizes (vLLM's layout for DeepSeek-V4 is not modelled)",
    "DeepseekV4ForConditionalGeneration": "DeepSeek-V4's language model (its caches, as DeepseekV4ForCausalLM)",
    "DeepseekV41ForCausalLM": "compressed latent, sliding-window, compressor-ring and indexer caches in groups of "
                              "different block sizes (vLLM's layout for DeepSeek-V4.1 is not modelled)",
    "Glm5NextForCausalLM": "its pooled (compressed) MLA latent and KPOOL_TAIL circular-buffer cache "
                           "(CircularBufferSpec) next to the KDA states are not modelled",
    "InklingForCausalLM": "its short-conv state kept as a 4-token sliding-window cache is not modelled",
    "Step5ForCausalLM": "its DSA indexer, CSA summary and tail-ring caches are not modelled",
}
"""Architectures whose layout vLLM answers (or refuses, for the KV memory given) but kvplan does not lay out."""


def _oracle_cannot(case: dict[str, Any], release: str) -> str | None:
    """Why the oracle cannot answer a case (the error is recorded in the answer), or None."""
    if _arch(case) != "MiniMaxM3SparseForCausalLM":
        return None
    if release != "0.33.0":
        return "the release ships no MiniMaxM3TextConfig (vLLM 0.33.0's config class for minimax_m3_text)"
    if case["gpu"] == "b200":
        return ("on SM100 the layer sizes a FlashInfer TRTLLM-gen workspace from FlashInfer itself, a stub on "
                "the CPU (get_trtllm_gen_multi_ctas_kv_counter_bytes)")
    return None


KVPLAN_CANNOT_READ = {
    "MiniMaxM3SparseForCausalLM": "model_type 'minimax_m3_text' is unknown to transformers; vLLM 0.33.0 loads "
                                  "it with a config class of its own, which kvplan does not have",
}
"""Architectures kvplan refuses as an input error (one line naming the model_type)."""

_KIND = {"MLAAttentionSpec": "mla", "FullAttentionSpec": "full_attention"}


def _arch(case: dict[str, Any]) -> str:
    return str(case["name"].split("__")[0])


def _answer(case: dict[str, Any], release: str) -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return json.loads((folder / f"{case['name']}.json").read_text())


def _plan(case: dict[str, Any], release: str) -> Plan:
    f = case["flags"]
    return kvplan.api.compile((DATA / case["config"]).resolve(),
                              ["--max-model-len", str(f["max_model_len"]), "--kv-cache-dtype", f["kv_cache_dtype"]],
                              kv_budget_bytes=case["available_bytes"], gpu=case["gpu"], engine=f"vllm=={release}")


@pytest.mark.parametrize("release", RELEASES)
def test_every_case_is_answered_for_its_config(release: str) -> None:
    for case in CASES:
        answer = _answer(case, release)
        assert answer["vllm_version"] == release and answer["gpu"] == case["gpu"]
        digest = hashlib.sha256((DATA / case["config"]).resolve().read_bytes()).hexdigest()
        assert answer["config_sha256"] == digest, f"{case['name']}: re-run scripts/oracle/capacity_oracle.py"
        assert (answer["error"] is not None) == (_oracle_cannot(case, release) is not None), case["name"]


@pytest.mark.parametrize(("release", "case"), RUNS, ids=[f"{r}-{c['name']}" for r, c in RUNS])
def test_layout_and_capacity_equal_vllms_on_the_gpu(release: str, case: dict[str, Any]) -> None:
    answer = _answer(case, release)
    if (why := _oracle_cannot(case, release)) is not None:
        pytest.skip(why)
    want = answer["answer"]
    if _arch(case) in KVPLAN_CANNOT_READ:
        with pytest.raises(KvplanInputError, match="minimax_m3_text"):
            _plan(case, release)
        return
    plan = _plan(case, release)
    t = plan.totals
    lay = t.kv_cache_layout
    if _arch(case) in NOT_LAID_OUT:
        assert lay is None, f"kvplan now lays {_arch(case)} out: compare it and drop it from NOT_LAID_OUT"
        return
    assert lay is not None, "kvplan computes no layout"
    # the backend kvplan selects is the one vLLM's selector gave the layers (next to the indexer's)
    assert {lp.backend for lp in plan.layers if lp.bytes_per_token} == set(want["backends"]) - {"DEEPSEEK_V32_INDEXER"}
    assert lay.block_size == answer["engine"]["block_size"]
    got = sorted((g.kind, len(g.layers), g.block_size, g.blocks_per_request) for g in lay.groups)
    wanted = sorted((_KIND[g["spec"]], len(g["layer_names"]), g["block_size"], g["blocks_per_request"])
                    for g in want["groups"])
    assert got == wanted
    assert lay.num_blocks == want["num_blocks"]
    assert t.tokens_capacity == want["gpu_kv_cache_tokens"]
    assert t.max_concurrency == round(want["max_concurrency"], 2)


def test_sparse_flashmla_stores_fp8_as_fp8_ds_mla() -> None:
    """DeepSeek-V3.2 at fp8 on an H100: the sparse FlashMLA backend's 656-byte rows (rule KV121), not the
    576-byte fp8 latent FlashInfer's SM100 sparse backend keeps on a B200."""
    case = next(c for c in CASES if c["name"] == "DeepseekV32ForCausalLM__h100__fp8__8192")
    h100 = _plan(case, "0.33.0")
    b200 = _plan({**case, "gpu": "b200"}, "0.33.0")
    mla = next(lp for lp in h100.layers if lp.kind == "mla")
    assert (mla.backend, mla.kv_cache_dtype) == ("FLASHMLA_SPARSE", "fp8_ds_mla")
    assert "KV121" in [d.rule for d in mla.decisions]
    assert mla.bytes_per_token == 656 + 132  # the latent row and the indexer's 128 fp8 keys + fp32 scale
    b_mla = next(lp for lp in b200.layers if lp.kind == "mla")
    assert (b_mla.backend, b_mla.kv_cache_dtype, b_mla.bytes_per_token) == ("FLASHINFER_MLA_SPARSE", "fp8", 576 + 132)
