"""GLM-5 Next's caches (kvplan/planner/model_caches/glm5next.py) equal the ones vLLM registers, cache by cache.

Every Glm5Next case of tests/data/vllm_oracle_capacity/cases_gpu_backends.json (H100, B200, RTX PRO 6000;
bf16 / fp8 caches, a float16 model; ForCausalLM and ForConditionalGeneration; 8192 / 32768 / 131072 tokens;
prefix caching on and off; TP=2 and TP=8; n-gram speculative decoding) against its answer's `layer_specs`
(answers/ = vLLM 0.33.0, releases/0.34.0/), field by field and in vLLM's order, and the engine block size.
"""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import kvplan.api
from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.gpus import resolve_gpu
from kvplan.errors import KvplanInputError
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.pipeline import flags_from, model_inputs
from kvplan.planner.cache_specs import CacheSpec, ModelCaches, SpecContext, blocks_per_request
from kvplan.planner.model_caches import BUILDERS, glm5next
from kvplan.rules.memory import extra_cache_bytes
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
CASES = [c for c in json.loads((DATA / "cases_gpu_backends.json").read_text())["cases"]
         if c["name"].split("__")[0] in glm5next.ARCHITECTURES]
RELEASES = ("0.33.0", "0.34.0")
MAX_NUM_BATCHED_TOKENS = 8192  # the oracle's, and the answers' blocks_per_request


def _folder(release: str) -> Path:
    return DATA / "answers" if release == "0.33.0" else DATA / "releases" / release


def _args(flags: dict[str, Any]) -> list[str]:
    args = ["--max-model-len", str(flags["max_model_len"]), "--kv-cache-dtype", flags["kv_cache_dtype"]]
    if "speculative_config" in flags:
        args += ["--speculative-config", json.dumps(flags["speculative_config"])]
    if "dtype" in flags:
        args += ["--dtype", flags["dtype"]]
    if "tensor_parallel_size" in flags:
        args += ["--tensor-parallel-size", str(flags["tensor_parallel_size"])]
    if flags.get("enable_prefix_caching") is False:
        args.append("--no-enable-prefix-caching")
    return args


def _build(case: dict[str, Any], release: str, **flag_changes: Any) -> tuple[ModelCaches | None, ServingFlags]:
    """The builder run on kvplan's own plan of the case, as compile hands it the layers."""
    args = _args(case["flags"])
    config = (DATA / case["config"]).resolve()
    plan = kvplan.api.compile(config, args, kv_budget_bytes=case["available_bytes"], gpu=case["gpu"],
                              engine=f"vllm=={release}")
    flags = flags_from(args, release).model_copy(update=flag_changes)
    arch: ModelArch = model_inputs(config, flags, release=release).arch
    gpu = resolve_gpu(case["gpu"])
    ctx = SpecContext(max_model_len=case["flags"]["max_model_len"], block_size=16,
                      max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS, engine=EngineVersion.parse(f"vllm=={release}"),
                      compute_capability=gpu.compute_capability)
    return BUILDERS[arch.architecture or ""](list(plan.layers), arch, flags, ctx), flags


def _record(spec: CacheSpec, max_model_len: int) -> dict[str, Any]:
    return {"name": spec.name, "spec": spec.spec, "block_size": spec.block_size,
            "page_size_bytes": spec.page_size_bytes, "stride_alignment": spec.stride_alignment,
            "blocks_per_request": blocks_per_request(spec, max_model_len, MAX_NUM_BATCHED_TOKENS)}


def test_every_family_case_has_both_answers() -> None:
    assert len(CASES) >= 10
    for release in RELEASES:
        for case in CASES:
            answer = json.loads((_folder(release) / f"{case['name']}.json").read_text())
            assert answer["error"] is None and answer["answer"]["layer_specs"], (release, case["name"])


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_caches_equal_vllms(case: dict[str, Any], release: str) -> None:
    answer = json.loads((_folder(release) / f"{case['name']}.json").read_text())
    caches, _ = _build(case, release)
    assert caches is not None
    mml = case["flags"]["max_model_len"]
    want = [{k: s[k] for k in ("name", "spec", "block_size", "page_size_bytes", "stride_alignment",
                               "blocks_per_request")} for s in answer["answer"]["layer_specs"]]
    assert [_record(s, mml) for s in caches.specs] == want
    assert caches.block_size == answer["engine"]["block_size"]
    assert caches.layout_name == answer["answer"]["kv_cache_layout"] == "BLHNC" and caches.block_outermost
    assert [s.fixed_blocks is not None for s in caches.specs] == \
        [s["spec"] in ("MambaSpec", "CircularBufferSpec") for s in answer["answer"]["layer_specs"]]


def test_flashkda_checkpoint_block_follows_the_gpu_and_dtype() -> None:
    """FlashKDA (a prefill checkpoint: 3 state blocks in align mode) on SM90 / SM10x with a bf16 model; the
    Triton kernel (2 blocks) elsewhere; 1 block without prefix caching."""
    case = next(c for c in CASES if c["name"] == "Glm5NextForCausalLM__h100__auto__8192")
    caches, _ = _build(case, "0.33.0")
    assert caches is not None and caches.specs[0].fixed_blocks == 3
    layers = kvplan.api.compile((DATA / case["config"]).resolve(), _args(case["flags"]), gpu="h100").layers
    arch = model_inputs((DATA / case["config"]).resolve(), flags_from(_args(case["flags"]), "0.33.0")).arch
    kda = next(la for la in arch.layers if la.kind == "linear_attention")
    assert glm5next.flashkda(kda, "bfloat16", (9, 0)) and glm5next.flashkda(kda, "bfloat16", (10, 0))
    assert not glm5next.flashkda(kda, "float16", (9, 0)) and not glm5next.flashkda(kda, "bfloat16", (8, 0))
    assert not glm5next.flashkda(kda.model_copy(update={"kda_gate_lower_bound": None}), "bfloat16", (9, 0))
    assert layers[0].kind == "linear_attention"


def test_not_laid_out_with_mtp_or_a_draft_model() -> None:
    case = next(c for c in CASES if c["name"] == "Glm5NextForCausalLM__h100__fp8__8192")
    caches, _ = _build(case, "0.34.0", num_speculative_tokens=1, speculative_method="mtp")
    assert caches is None
    caches, _ = _build(case, "0.34.0", num_speculative_tokens=3, speculative_method="eagle3",
                       speculative_model="some/eagle3-head")
    assert caches is None


def test_user_block_size_skips_the_backend_preference() -> None:
    """--block-size 16: vLLM aligns from 16, not from the indexer's 512-token kernel block; the alignment
    (max(first backend's kernel block, 16, 128), the backends' lcm) lands on the same 512 multiple."""
    case = next(c for c in CASES if c["name"] == "Glm5NextForCausalLM__h100__auto__8192")
    caches, _ = _build(case, "0.33.0", block_size=16)
    assert caches is not None and caches.block_size == 4608


def test_malformed_linear_lower_bound_is_one_input_error() -> None:
    raw = json.loads((ROOT / "tests" / "data" / "vllm_oracle_arch" / "configs" /
                      "Glm5NextForCausalLM__default.json").read_text())
    raw["text_config"]["linear_lower_bound"] = "low"
    with pytest.raises(KvplanInputError, match="linear_lower_bound must be a number"):
        kvplan.api.compile(raw, ["--max-model-len", "8192"], gpu="h100")


def test_linear_lower_bound_defaults_as_the_config_class_does() -> None:
    """Absent, transformers' Glm5NextTextConfig gives -5.0 (FlashKDA runs); null is an unbounded gate (Triton)."""
    raw = json.loads((ROOT / "tests" / "data" / "vllm_oracle_arch" / "configs" /
                      "Glm5NextForCausalLM__default.json").read_text())
    flags = flags_from(["--max-model-len", "8192"], "0.33.0")
    del raw["text_config"]["linear_lower_bound"]
    assert model_inputs(raw, flags).arch.layers[0].kda_gate_lower_bound == -5.0
    raw["text_config"]["linear_lower_bound"] = None
    assert model_inputs(raw, flags).arch.layers[0].kda_gate_lower_bound is None


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_latent_bytes_per_token_are_vllms_row(case: dict[str, Any], release: str) -> None:
    """The MLA layers' per-token bytes (KV130) count the latent row vLLM's spec stores: the `.self_attn.attn`
    page over its block (0.34's FLASHINFER_MLA_SPARSE_SM120: 528 B without RoPE; 656 B before, and the plain
    latent elsewhere); the layer's other caches are its extras."""
    answer = json.loads((_folder(release) / f"{case['name']}.json").read_text())["answer"]
    attn = next(s for s in answer["layer_specs"] if s["name"].endswith(".self_attn.attn"))
    config = (DATA / case["config"]).resolve()
    plan = kvplan.api.compile(config, _args(case["flags"]), kv_budget_bytes=case["available_bytes"],
                              gpu=case["gpu"], engine=f"vllm=={release}")
    arch = model_inputs(config, flags_from(_args(case["flags"]), release), release=release).arch
    lp = next(lp for lp in plan.layers if lp.kind == "mla")
    la = next(la for la in arch.layers if la.index == lp.index)
    extra, _ = extra_cache_bytes(la, 0, plan.model.dtype or "bfloat16")
    assert Fraction(lp.bytes_per_token_exact or lp.bytes_per_token) - extra == Fraction(
        attn["page_size_bytes"], attn["block_size"])


def test_index_topk_follows_the_config_class() -> None:
    """transformers' Glm5NextTextConfig (vLLM 0.33 / 0.34 load it) defaults index_topk to 2048: without the key
    every MLA layer is still sparse, with its indexer caches; null, or a top-k that is not a multiple of
    index_kpool, fails the strict config class, so vLLM loads nothing: one input error."""
    case = next(c for c in CASES if c["name"] == "Glm5NextForCausalLM__h100__auto__8192")
    raw = json.loads((DATA / case["config"]).resolve().read_text())
    flags = flags_from(_args(case["flags"]), "0.33.0")
    with_key = kvplan.api.compile(raw, _args(case["flags"]), gpu="h100")
    del raw["text_config"]["index_topk"]
    without = kvplan.api.compile(raw, _args(case["flags"]), gpu="h100")
    mla = next(la for la in model_inputs(raw, flags).arch.layers if la.kind == "mla")
    assert mla.mla is not None and mla.mla.index_topk == 2048 and len(mla.extra_caches) == 2
    assert [lp.bytes_per_token for lp in without.layers] == [lp.bytes_per_token for lp in with_key.layers]
    assert without.totals.kv_cache_layout == with_key.totals.kv_cache_layout is not None
    for bad, message in ((None, "index_topk must be a positive integer, got None"),
                         (2050, r"index_topk \(2050\) must be divisible by index_kpool \(16\)")):
        raw["text_config"]["index_topk"] = bad
        with pytest.raises(KvplanInputError, match=message):
            kvplan.api.compile(raw, _args(case["flags"]), gpu="h100")


def test_without_an_engine_the_newest_release_is_built() -> None:
    case = next(c for c in CASES if c["name"] == "Glm5NextForCausalLM__rtx-pro-6000__auto__8192")
    newest, flags = _build(case, "0.34.0")
    plan = kvplan.api.compile((DATA / case["config"]).resolve(), _args(case["flags"]), gpu=case["gpu"],
                              engine="vllm==0.34.0")
    arch = model_inputs((DATA / case["config"]).resolve(), flags, release="0.34.0").arch
    ctx = SpecContext(max_model_len=8192, block_size=64, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
                      compute_capability=resolve_gpu("rtx-pro-6000").compute_capability)
    assert newest is not None and glm5next.build(list(plan.layers), arch, flags, ctx) == newest
