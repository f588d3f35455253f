"""Layouts set by the GPU's own attention backends: kvplan at --gpu equals vLLM run on that GPU's CUDA platform.

tests/data/vllm_oracle_capacity/cases_gpu_backends.json: a model, flags, a KV memory and a `gpu`; the answers
(answers/ for vLLM 0.33.0, releases/VERSION/ for the others) are what scripts/oracle/capacity_oracle.py computed
with vLLM's CUDA platform answering that GPU (its patch 13): each layer built with the backend the GPU's selector
picks (the sparse FlashMLA / FlashInfer backends of DeepSeek-V3.2 and GLM-5, with the fp8_ds_mla cache the sparse
FlashMLA backend makes of fp8, and the indexer backend's 64-token kernel block), then vLLM's own layout and
capacity. A case whose answer kvplan does not lay out yet is listed in NOT_LAID_OUT with the reason, and the test
checks kvplan still says so (no layout) rather than printing a wrong one. On every case vLLM builds, laid out or
not, the layers' backends in kvplan's plan (the selector's, or the model class's own: kvplan/rules/backend.py::
MODEL_CLASS_BACKENDS) and the backends of the caches they register next to their attention (FURTHER_CACHE_BACKENDS)
together are the backends vLLM built (`answer.backends`).
"""
from __future__ import annotations

import json
from typing import Any

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.model.plan import Plan
from kvplan.pipeline import flags_from, model_inputs
from kvplan.rules.backend import further_cache_backends
from tests.conftest import ROOT
from tests.planner.test_vllm_capacity_parity import assert_answer_current

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
CASES = json.loads((DATA / "cases_gpu_backends.json").read_text())["cases"]
RELEASES = ["0.33.0", *sorted(p.name for p in (DATA / "releases").iterdir()
                              if (p / f"{CASES[0]['name']}.json").is_file())]
RUNS = [(r, c) for r in RELEASES for c in CASES]

NOT_LAID_OUT: dict[str, str] = {}
"""Architectures whose layout vLLM answers (or refuses, for the KV memory given) but kvplan does not lay out."""

NOT_LAID_OUT_CASES = {
    "Step5ForCausalLM__h100__fp8__4096__mtp-2": "Step 5's MTP layers (Step5MTP) take their kinds from "
                                                "layer_types_with_mtp, which kvplan does not read: a draft is not "
                                                "laid out for the families built cache by cache",
}
"""Cases kvplan does not lay out, of architectures it otherwise lays out."""


VLLM_REFUSES = {
    "Step5ForCausalLM__h100__fp8_e5m2__4096": "FlashAttention does not support fp8_e5m2 kv-cache on this device.",
    "Step5ForCausalLM__h100__int8_per_token_head__4096": "Step5 DSA supports E4M3 FP8 KV cache only",
    "Step5ForCausalLM__a100__auto__4096": "Step5 DSA requires SM90, SM100 or SM103; got "
                                          "DeviceCapability(major=8, minor=0).",
    # one DSA layer skipped: its bf16 pages next to the other's fp8 make _get_packed_kv_cache_groups zip
    # page lists of different lengths into an empty group (a bare StopIteration, 0.33.0 and 0.34.0)
    "Step5ForCausalLM__h100__fp8__4096__skip-3": "",
    # kvplan refuses the config itself (KVPLAN_REFUSES_INPUT)
    "Step5ForCausalLM__h100__auto__4096__dense": "Step5 requires a checkpoint with a sparse_config section; "
                                                 "dense-only checkpoints are not supported.",
}
"""Cases vLLM refuses to start (the answer records its error: the model build's, or the KV cache grouping's):
kvplan lays out none (KV504 names vLLM's reason where kvplan refuses: kvplan/planner/model_caches)."""


KVPLAN_REFUSES_INPUT = {"Step5ForCausalLM__h100__auto__4096__dense": "without a sparse_config section"}
"""Cases vLLM refuses whatever the flags, which kvplan reads as an input error (one line naming the fix)."""

LAID_OUT_CASES = {"Step5ForCausalLM__h100__auto__4096__sparse-disabled"}
"""Cases of a NOT_LAID_OUT architecture that kvplan lays out: Step 5 with sparse_config enabled false keeps
plain FlashAttention caches."""


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
    "MiniMaxM3SparseForCausalLM": "model_type 'minimax_m3_text' is unknown to transformers and to vLLM's config "
                                  "registry (0.33.0 ships MiniMaxM3TextConfig only as minimax_m3_vl's text_config "
                                  "class): vLLM refuses the bare config as kvplan does; the oracle registers the "
                                  "class as a checkpoint's auto_map would (tests/planner/model_caches/"
                                  "test_minimax_m3.py plans it so)",
}
"""Architectures kvplan refuses as an input error (one line naming the model_type), as vLLM does."""

_KIND = {"MLAAttentionSpec": "mla", "FullAttentionSpec": "full_attention", "SlidingWindowSpec": "sliding_attention",
         "SlidingWindowMLASpec": "sliding_attention", "CircularBufferSpec": "ring", "MambaSpec": "state"}

BACKENDS_NOT_MODELLED = {
    "DeepseekV41ForCausalLM": "DeepSeek-V4.1's _select_dsv4_attn_cls (vllm/models/deepseek_v41/nvidia/model.py) "
                              "defaults to FlashMLA mega attention on SM100 where DeepseekV4MegaAttnAttention."
                              "is_available_for the topology and the _flashmla_C mega ops, else FlashMLA; the "
                              "release wheel has those ops but the CPU oracle cannot load them, so its SM100 "
                              "answers (FLASHMLA_SPARSE_DSV41) may not be a GPU's: not tabled yet",
}
"""Architectures whose model class picks backends kvplan does not table yet (MODEL_CLASS_BACKENDS)."""


def _backends(case: dict[str, Any], release: str, plan: Plan) -> tuple[set[str | None], set[str]]:
    """The backends of kvplan's KV layers' attention (the plan's backend column), and of the caches they
    register next to it (kvplan.rules.backend.further_cache_backends: indexer keys, rings, conv states)."""
    inputs = model_inputs((DATA / case["config"]).resolve(), flags_from(_argv(case["flags"]), release),
                          release=release)
    by_index = {la.index: la for la in inputs.arch.layers}
    sized = [lp for lp in plan.layers if lp.bytes_per_token]
    caches = {b for lp in sized if lp.index in by_index
              for b in further_cache_backends(inputs.arch.architecture, by_index[lp.index])}
    return {lp.backend for lp in sized}, caches


def _arch(case: dict[str, Any]) -> str:
    return str(case["name"].split("__")[0])


def _answer(case: dict[str, Any], release: str) -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return json.loads((folder / f"{case['name']}.json").read_text())


def _argv(f: dict[str, Any]) -> list[str]:
    argv = ["--max-model-len", str(f["max_model_len"]), "--kv-cache-dtype", f["kv_cache_dtype"]]
    if "tensor_parallel_size" in f:
        argv += ["--tensor-parallel-size", str(f["tensor_parallel_size"])]
    if f.get("kv_cache_dtype_skip_layers"):
        argv += ["--kv-cache-dtype-skip-layers", *f["kv_cache_dtype_skip_layers"]]
    if "speculative_config" in f:  # the checkpoint's own MTP layers (no draft model file)
        argv += ["--speculative-config", json.dumps(f["speculative_config"])]
    if f.get("enable_prefix_caching") is False:
        argv += ["--no-enable-prefix-caching"]
    if "dtype" in f:
        argv += ["--dtype", f["dtype"]]
    return argv


def _plan(case: dict[str, Any], release: str) -> Plan:
    return kvplan.api.compile((DATA / case["config"]).resolve(), _argv(case["flags"]),
                              kv_budget_bytes=case["available_bytes"], gpu=case["gpu"], engine=f"vllm=={release}")


@pytest.mark.parametrize("release", RELEASES)
def test_every_case_is_answered_for_its_config(release: str) -> None:
    for case in CASES:
        answer = _answer(case, release)
        assert_answer_current(case, answer, release)
        assert answer["gpu"] == case["gpu"]
        refused = VLLM_REFUSES.get(case["name"])
        assert (answer["error"] is not None) == (_oracle_cannot(case, release) is not None or refused is not None)
        assert refused is None or answer["error"]["message"] == refused, case["name"]


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
    if case["name"] in KVPLAN_REFUSES_INPUT:
        with pytest.raises(KvplanInputError, match=KVPLAN_REFUSES_INPUT[case["name"]]):
            _plan(case, release)
        return
    plan = _plan(case, release)
    t = plan.totals
    lay = t.kv_cache_layout
    if case["name"] in VLLM_REFUSES:
        assert lay is None, "vLLM refuses to build this model"
        assert all(VLLM_REFUSES[case["name"]] in f.message for f in plan.findings if f.code == "KV504")
        return
    # each layer's attention backend is the one vLLM gave it (its selector's, or its model class's own), and
    # the caches registered next to it run the backends vLLM lists besides
    if _arch(case) not in BACKENDS_NOT_MODELLED:
        attn, caches = _backends(case, release, plan)
        assert attn == set(want["backends"]) - caches
        assert caches <= set(want["backends"]) - attn
    if (_arch(case) in NOT_LAID_OUT and case["name"] not in LAID_OUT_CASES) or case["name"] in NOT_LAID_OUT_CASES:
        assert lay is None, f"kvplan now lays {_arch(case)} out: compare it and drop it from NOT_LAID_OUT"
        return
    assert lay is not None, "kvplan computes no layout"
    assert lay.block_size == answer["engine"]["block_size"]
    assert _groups(lay) == sorted(
        (_KIND[g["spec"]], len(g["layer_names"]), g["block_size"], g["blocks_per_request"],
         g["spec"] if lay.memory_layout else None, g["page_size_bytes"] if lay.memory_layout else None)
        for g in want["groups"])
    if lay.memory_layout is not None:
        assert lay.memory_layout == want["kv_cache_layout"]
    if want["startup_error"] is not None:  # vLLM refuses to start: one request at max_model_len does not fit
        assert f"estimated maximum model length is {t.max_model_len_fits}." in want["startup_error"]
        assert "KV502" in [f.code for f in plan.findings]
        return
    assert lay.num_blocks == want["num_blocks"]
    assert t.tokens_capacity == want["gpu_kv_cache_tokens"]
    assert t.max_concurrency == round(want["max_concurrency"], 2)


def _groups(lay: Any) -> list[tuple[Any, ...]]:
    """(kind, caches, block, blocks per request, spec class, page) of each group; the last two where kvplan lays
    the model out cache by cache."""
    return sorted((g.kind, len(g.layers), g.block_size, g.blocks_per_request, g.spec, g.page_size_bytes)
                  for g in lay.groups)


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
