"""Backends a model class chooses before any layer asks the selector: kvplan equals vLLM run on the GPU.

Gemma4Config.verify_and_update_config (vllm/model_executor/models/config.py) sees Gemma 4's mixed head sizes
(256 on sliding layers, 512 on full ones) and sets FlashAttention 4 for every layer where FA4 runs (SM90 with
an fp8 cache excepted from 0.31), else forces TRITON_ATTN (ENGINE_FEATURES gemma4_*). The answers in
tests/data/vllm_oracle_capacity/cases_model_backends.json (answers/ for 0.33.0, releases/0.34.0/) are vLLM's own
on each GPU's CUDA platform (scripts/oracle/capacity_oracle.py patch 18): the layers' backends and the layout
they give. The multimodal class runs vLLM's multimodal-prefix composite on SM90 (TRITON_FLASH_ATTN: Triton for
image masks, this FlashAttention selection for causal requests), which kvplan names by its causal backend.

Other model classes hand layers a backend themselves, past the selector (MODEL_CLASS_BACKENDS): Step 5's DSA and
pinned FlashAttention layers, Inkling's FLASH_ATTN, MiniMax-M3's sparse layers, DeepSeek-V4's attention class; the
tests below check what the plan says for them on the GPU-platform cases (cases_gpu_backends.json).
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


# ---------------------------------------------------------------- backends a model class hands its layers itself
GPU_CASES = {c["name"]: c for c in json.loads((DATA / "cases_gpu_backends.json").read_text())["cases"]}
"""The GPU-platform capacity cases (tests/planner/test_vllm_capacity_gpu_backends.py checks every one's backends
against vLLM's answer.backends); here what a user reads in the plan for them."""


def _gpu_plan(name: str, release: str = "0.33.0") -> Plan:
    case = GPU_CASES[name]
    f = case["flags"]
    return kvplan.api.compile((DATA / case["config"]).resolve(),
                              ["--max-model-len", str(f["max_model_len"]), "--kv-cache-dtype", f["kv_cache_dtype"]],
                              kv_budget_bytes=case["available_bytes"], gpu=case["gpu"], engine=f"vllm=={release}")


def _fact(lp: Any) -> str:
    return str(next(d.fact for d in lp.decisions if d.field == "backend"))


@pytest.mark.parametrize("release", RELEASES)
def test_step5_dsa_layers_and_pinned_flash_attention_on_blackwell(release: str) -> None:
    """On a B200 with an fp8 cache the selector would give the sliding layers FLASHINFER and the full ones
    TRITON_ATTN; Step5Attention gives the DSA layers STEP5_DSA and every other layer FlashAttention (FA4 on
    SM100), and vLLM logs no FlashInfer query dtypes."""
    plan = _gpu_plan("Step5ForCausalLM__b200__fp8__4096", release)
    got = {(lp.kind, lp.backend, lp.flash_attn_version) for lp in plan.layers if lp.bytes_per_token}
    assert got == {("full_attention", "STEP5_DSA", None), ("sliding_attention", "FLASH_ATTN", 4)}
    dsa = next(lp for lp in plan.layers if lp.backend == "STEP5_DSA")
    assert "model class chooses STEP5_DSA" in _fact(dsa) and "Step5Attention.__init__" in _fact(dsa)
    assert "STEP5_CSA_TAIL_RING" in _fact(dsa) and "STEP5_CSA_SUMMARY" in _fact(dsa)
    assert not [f for f in plan.findings if f.code == "KV702" and "FlashInfer" in f.message]


def test_step5_refusal_is_the_dsa_layers_not_flash_attentions() -> None:
    """int8_per_token_head: FlashAttentionImpl accepts it on FA3 (flash_attn_supports_kv_cache_dtype refuses only
    fp8_e5m2 by dtype); vLLM stops at the DSA layer, whose refusal KV504 names (no KV701 about FlashAttention)."""
    plan = _gpu_plan("Step5ForCausalLM__h100__int8_per_token_head__4096")
    assert not [f for f in plan.findings if f.code == "KV701"]
    assert any("Step5 DSA supports E4M3 FP8 KV cache only" in f.message for f in plan.findings if f.code == "KV504")
    e5m2 = _gpu_plan("Step5ForCausalLM__h100__fp8_e5m2__4096")  # the pinned FLASH_ATTN layers refuse it
    assert any("FlashAttention does not support fp8_e5m2" in f.message for f in e5m2.findings if f.code == "KV701")


@pytest.mark.parametrize("name", ["InklingForCausalLM__b200__fp8__8192", "InklingForCausalLM__h100__auto__8192"])
def test_inkling_runs_flash_attn_on_every_gpu(name: str) -> None:
    """InklingAttention.get_attn_backend is FlashAttentionBackend (its own FA4 relative-attention kernel, no
    FlashAttentionImpl): FLASH_ATTN on the B200 too, with no FlashAttention version or FlashInfer query dtype."""
    plan = _gpu_plan(name)
    layers = [lp for lp in plan.layers if lp.bytes_per_token]
    assert {(lp.backend, lp.flash_attn_version, lp.query_dtype) for lp in layers} == {("FLASH_ATTN", None, None)}
    assert "InklingAttention.get_attn_backend" in _fact(layers[0]) and "INKLING_SCONV_SWA" in _fact(layers[0])
    assert not [f for f in plan.findings if f.code in ("KV701", "KV702")]


def test_minimax_m3_sparse_layers_only() -> None:
    """The sparse layers (those with the index-key cache) run MINIMAX_M3_SPARSE; the dense ones are selected."""
    plan = _gpu_plan("MiniMaxM3SparseForConditionalGeneration__h100__fp8__8192")
    layers = [lp for lp in plan.layers if lp.bytes_per_token]
    sparse = [lp for lp in layers if lp.backend == "MINIMAX_M3_SPARSE"]
    dense = [lp for lp in layers if lp.backend != "MINIMAX_M3_SPARSE"]
    assert sparse and dense and {lp.backend for lp in dense} == {"FLASH_ATTN"}
    assert all("MINIMAX_M3_SPARSE_INDEXER" in _fact(lp) for lp in sparse)
    assert all(_fact(lp).startswith("first valid backend") for lp in dense)


def test_flashinfer_sparse_mla_sm90_takes_bf16_models_only() -> None:
    """GLM-5 Next in float16 on an H100: FlashInferMLASparseSM90Backend.supported_dtypes is [bfloat16], so the
    selector goes on to FLASH_ATTN_MLA_SPARSE (vLLM 0.33.0 and 0.34.0 on the GPU platform)."""
    case = GPU_CASES["Glm5NextForCausalLM__h100__auto__8192__float16"]
    plan = kvplan.api.compile((DATA / case["config"]).resolve(),
                              ["--max-model-len", "8192", "--dtype", "float16"], gpu="h100", engine="vllm==0.33.0")
    assert {lp.backend for lp in plan.layers if lp.kind == "mla"} == {"FLASH_ATTN_MLA_SPARSE"}


def _dsv4(gpu: str, *extra: str) -> Plan:
    case = GPU_CASES["DeepseekV4ForCausalLM__h100__fp8__8192"]
    return kvplan.api.compile((DATA / case["config"]).resolve(), ["--max-model-len", "8192", *extra], gpu=gpu,
                              engine="vllm==0.33.0")


@pytest.mark.parametrize(("gpu", "extra", "want"), [
    ("h100", (), "FLASHMLA_SPARSE_DSV4"),
    ("b200", (), "FLASHMLA_SPARSE_DSV4"),
    ("rtx-pro-6000", (), "FLASHINFER_MLA_SPARSE_DSV4"),  # SM12x: the FlashInfer SM120 class
    ("b200", ("--attention-backend", "FLASHINFER_MLA_SPARSE_DSV4"), "FLASHINFER_MLA_SPARSE_DSV4"),
    ("rtx-pro-6000", ("--attention-backend", "FLASHMLA_SPARSE"), "FLASHMLA_SPARSE_DSV4"),
])
def test_deepseek_v4_attention_class_picks_its_backend(gpu: str, extra: tuple[str, ...], want: str) -> None:
    """_select_dsv4_attn_cls, not the selector: no 'No valid attention backend' error (KV701) for its layers."""
    plan = _dsv4(gpu, *extra)
    assert {lp.backend for lp in plan.layers if lp.bytes_per_token} == {want}
    assert not [f for f in plan.findings if f.code == "KV701"]
    assert "_select_dsv4_attn_cls" in _fact(plan.layers[0]) and "DEEPSEEK_SPARSE_SWA" in _fact(plan.layers[0])


def test_deepseek_v4_refuses_the_generic_flashinfer_sparse_backend() -> None:
    """_select_dsv4_attn_cls raises for FLASHINFER_MLA_SPARSE: KV701 says so, naming the DSV4 backend to use."""
    plan = _dsv4("b200", "--attention-backend", "FLASHINFER_MLA_SPARSE")
    msgs = [f.message for f in plan.findings if f.code == "KV701"]
    assert len(msgs) == 1 and msgs[0].startswith(
        "FLASHINFER_MLA_SPARSE is not a DeepSeek V4 attention backend. Use FLASHINFER_MLA_SPARSE_DSV4")


def test_attention_backend_flag_that_a_model_class_ignores_is_reported() -> None:
    """Inkling's layers run FLASH_ATTN whatever --attention-backend names: KV702 says the flag does not reach
    them (and the plan keeps FLASH_ATTN)."""
    case = GPU_CASES["InklingForCausalLM__b200__auto__8192"]
    plan = kvplan.api.compile((DATA / case["config"]).resolve(),
                              ["--max-model-len", "8192", "--attention-backend", "FLASHINFER"], gpu="b200",
                              engine="vllm==0.33.0")
    assert {lp.backend for lp in plan.layers if lp.bytes_per_token} == {"FLASH_ATTN"}
    notes = [f for f in plan.findings if f.code == "KV702" and "does not reach" in f.message]
    assert len(notes) == 1 and "InklingAttention.get_attn_backend" in notes[0].message
    assert set(notes[0].layers) == {lp.index for lp in plan.layers if lp.bytes_per_token}


def test_the_cpu_platform_keeps_its_own_backend_whatever_is_chosen() -> None:
    """CpuPlatform.get_attn_backend_cls logs "Cannot use TRITON_ATTN backend on CPU." and runs CPU_ATTN: for
    Gemma4Config's forced Triton as for an --attention-backend."""
    case = next(c for c in CASES if c["name"] == "Gemma4ForCausalLM__a100__auto__8192")
    plan = _plan({**case, "gpu": "cpu-x86-amx"}, "0.33.0")
    assert {lp.backend for lp in plan.layers if lp.bytes_per_token} == {"CPU_ATTN"}
    llama = kvplan.api.compile(ROOT / "tests/data/corpus/Meta-Llama-3.1-8B/config.json",
                               ["--attention-backend", "TRITON_ATTN"], gpu="cpu-x86-amx")
    assert {lp.backend for lp in llama.layers} == {"CPU_ATTN"}
    assert "KV701" not in [f.code for f in llama.findings]
