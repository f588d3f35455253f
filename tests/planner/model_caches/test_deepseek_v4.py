"""DeepSeek-V4 (and V4.1) cache builders against vLLM's own specs.

The GPU capacity answers (tests/data/vllm_oracle_capacity/cases_gpu_backends.json: answers/ for vLLM 0.33.0,
releases/0.34.0/) list every cache vLLM's GPU model runner collects, in its order (`answer.layer_specs`); the
builder must give each one's name, class, block, page, block-stride alignment and window, and the blocks one
request holds, for every case of the family and both releases (the vision-language class included: the
capacity oracle builds vLLM's common VL class, not the CPU platform's stub). Each of the architecture oracle's
vision-language configs is also checked against that oracle's specs (tests/data/vllm_oracle_arch/answers/).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.backends.defaults import default_block_size
from kvplan.backends.engines import resolve_engine
from kvplan.backends.gpus import gpu_facts
from kvplan.ingest.checkpoint import model_inputs
from kvplan.ingest.flags import flags_from
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan
from kvplan.planner.cache_specs import CacheSpec, ModelCaches, SpecContext, blocks_per_request
from kvplan.planner.compile import compile_plan
from kvplan.planner.model_caches import BUILDERS, deepseek_v4, deepseek_v41
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
ARCH_DATA = ROOT / "tests" / "data" / "vllm_oracle_arch"
FAMILY = ("DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration", "DeepseekV41ForCausalLM")
CASES = [c for c in json.loads((DATA / "cases_gpu_backends.json").read_text())["cases"]
         if c["name"].split("__")[0] in FAMILY]
RELEASES = ("0.33.0", "0.34.0")
MBT = 8192
FIELDS = ("spec", "block_size", "page_size_bytes", "stride_alignment", "sliding_window")


def _answer(case: dict[str, Any], release: str) -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return dict(json.loads((folder / f"{case['name']}.json").read_text()))


def _inputs(config: str, argv: list[str], gpu: str | None, release: str,
            budget: int | None = None) -> tuple[list[LayerPlan], ModelArch, ServingFlags, SpecContext]:
    """The plan's layers and the ModelArch as `kvplan.api.compile` makes them, and the builder's context."""
    engine = resolve_engine(f"vllm=={release}")
    flags = flags_from(argv, engine.version_str)
    inputs = model_inputs((DATA / config).resolve(), flags, release=engine.version_str)
    gf = gpu_facts(gpu)
    plan = compile_plan(inputs.arch, inputs.quant, flags, gf, kv_budget_bytes=budget, engine=engine)
    mml = flags.max_model_len or inputs.arch.max_position_embeddings
    assert mml is not None
    ctx = SpecContext(max_model_len=mml, block_size=flags.block_size or default_block_size(engine),
                      max_num_batched_tokens=MBT, engine=engine,
                      compute_capability=gf.compute_capability if gf is not None else None)
    return list(plan.layers), inputs.arch, flags, ctx


def _build(case: dict[str, Any], release: str) -> tuple[ModelCaches, SpecContext]:
    f = case["flags"]
    argv = ["--max-model-len", str(f["max_model_len"]), "--kv-cache-dtype", f["kv_cache_dtype"],
            "--tensor-parallel-size", str(f.get("tensor_parallel_size", 1))]
    if "speculative_config" in f:
        argv += ["--speculative-config", json.dumps(f["speculative_config"])]
    layers, arch, flags, ctx = _inputs(case["config"], argv, case["gpu"], release, case["available_bytes"])
    built = BUILDERS[case["name"].split("__")[0]](layers, arch, flags, ctx)
    assert built is not None, f"{case['name']}: the builder does not lay the case out"
    return built, ctx


def _record(spec: CacheSpec, ctx: SpecContext) -> dict[str, Any]:
    rec: dict[str, Any] = {"name": spec.name, **{k: getattr(spec, k) for k in FIELDS}}
    rec["blocks_per_request"] = blocks_per_request(spec, ctx.max_model_len, ctx.max_num_batched_tokens)
    return rec


def test_family_has_cases_for_both_gpus_and_dtypes() -> None:
    seen = {(c["name"].split("__")[0], c["gpu"], c["flags"]["kv_cache_dtype"]) for c in CASES}
    for arch in FAMILY:
        assert {(g, d) for a, g, d in seen if a == arch} >= {(g, d) for g in ("h100", "b200")
                                                             for d in ("auto", "fp8")}
    assert {c["name"].split("__")[0] for c in CASES if c["flags"].get("tensor_parallel_size", 1) > 1} >= {
        "DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM"}


def test_builders_are_registered() -> None:
    assert BUILDERS["DeepseekV4ForCausalLM"] is deepseek_v4.build
    assert BUILDERS["DeepseekV4ForConditionalGeneration"] is deepseek_v4.build
    assert BUILDERS["DeepseekV41ForCausalLM"] is deepseek_v41.build


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_specs_equal_vllms_in_order(case: dict[str, Any], release: str) -> None:
    answer = _answer(case, release)["answer"]
    built, ctx = _build(case, release)
    want = [{k: s.get(k) for k in ("name", *FIELDS, "blocks_per_request")} for s in answer["layer_specs"]]
    got = [_record(s, ctx) for s in built.specs]
    assert [g["name"] for g in got] == [w["name"] for w in want]
    for g, w in zip(got, want, strict=True):
        assert g == w, g["name"]
    drafts = set(_answer(case, release)["answer"].get("draft_layer_names", []))
    assert {s.name for s in built.specs if s.draft} == drafts
    if case["name"].startswith("DeepseekV41"):  # SWA bounded replay (Model Runner V2): kept out of prefix caching
        assert {s.uniform_key for s in built.specs if s.spec == "SlidingWindowMLASpec"} == {(True,)}


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_block_size_and_layout_equal_vllms(case: dict[str, Any], release: str) -> None:
    ans = _answer(case, release)
    built, _ = _build(case, release)
    assert built.block_size == ans["engine"]["block_size"]
    assert built.layout_name == ans["answer"]["kv_cache_layout"]
    assert built.block_outermost == (ans["answer"]["kv_cache_layout"] in ("BLHNC", "BLNHC"))


VL_CASES = sorted(p.stem for p in (ARCH_DATA / "answers").glob("DeepseekV4ForConditionalGeneration__*.json"))


@pytest.mark.parametrize("name", VL_CASES)
def test_vision_language_class_registers_the_language_models_caches(name: str) -> None:
    """The VL class nests the text model under language_model: the same caches, named with that prefix
    (architecture oracle, vLLM 0.33.0; its CPU attention class registers them in another order, so they are
    compared by name)."""
    ans = json.loads((ARCH_DATA / "answers" / f"{name}.json").read_text())
    case = next(c for c in json.loads((ARCH_DATA / "cases.json").read_text())["cases"] if c["name"] == name)
    layers, arch, flags, ctx = _inputs(str(ARCH_DATA / case["config"]), ["--max-model-len", "8192",
                                                                         "--kv-cache-dtype", case["kv_cache_dtype"]],
                                       "h100", "0.33.0")
    built = deepseek_v4.build(layers, arch, flags, ctx)
    assert built is not None
    want = {layer["prefix"]: (s["type"], s["block_size"], s["page_size_bytes"], s["sliding_window"])
            for layer in ans["layers"] for s in layer["specs"]}
    got = {s.name: (s.spec, s.block_size, s.page_size_bytes, s.sliding_window) for s in built.specs}
    assert got == want


def test_dense_layouts_and_other_block_sizes_are_not_laid_out() -> None:
    """A backend DeepSeek-V4's CUDA model does not build (FLASHINFER_MLA_SPARSE: vLLM raises "not a DeepSeek V4
    attention backend") gets no layout rather than a wrong one; a --block-size the 256-token sparse backends
    reject neither."""
    case = next(c for c in CASES if c["name"] == "DeepseekV4ForCausalLM__b200__fp8__8192")
    base = ["--max-model-len", "8192", "--kv-cache-dtype", "fp8"]
    layers, arch, flags, ctx = _inputs(case["config"], [*base, "--attention-backend", "FLASHINFER_MLA_SPARSE"],
                                       "b200", "0.33.0")
    assert deepseek_v4.build(layers, arch, flags, ctx) is None
    layers, arch, flags, ctx = _inputs(case["config"], [*base, "--block-size", "64"], "b200", "0.33.0")
    assert deepseek_v4.build(layers, arch, flags, ctx) is None
    layers, arch, flags, ctx = _inputs(case["config"], [*base, "--block-size", "256"], "b200", "0.33.0")
    assert deepseek_v4.build(layers, arch, flags, ctx) is not None


def test_compress_ratio_vllm_refuses_is_not_laid_out(tmp_path: Path) -> None:
    """CompressorStateCache asserts a compress ratio of 4 or 128: a config with another rate builds nothing."""
    raw = json.loads((ARCH_DATA / "configs" / "DeepseekV4ForCausalLM__default.json").read_text())
    raw["compress_rates"]["heavily_compressed_attention"] = 64
    (tmp_path / "config.json").write_text(json.dumps(raw))
    layers, arch, flags, ctx = _inputs(str(tmp_path / "config.json"), ["--max-model-len", "8192"], "h100", "0.33.0")
    assert {la.dsv4_compress_ratio for la in arch.layers} == {4, 64}
    assert deepseek_v4.build(layers, arch, flags, ctx) is None


@pytest.mark.parametrize("config", ["DeepseekV41ForCausalLM__default", "DeepseekV41ForCausalLM__sources-ratio2"])
def test_v41_model_that_bounded_replay_refuses_is_not_laid_out(config: str) -> None:
    """With Model Runner V2 (a GPU launch's default) vLLM 0.33.0 and 0.34.0 stop building these configs: their
    last kv source layer is compressed (ratio 2) and layers follow it (nvidia/model.py asserts
    `self.layers[cut].attn.compress_ratio <= 1`; the capacity oracle records that AssertionError)."""
    for release in RELEASES:
        layers, arch, flags, ctx = _inputs(str(ARCH_DATA / "configs" / f"{config}.json"),
                                           ["--max-model-len", "8192"], "h100", release)
        assert deepseek_v41.build(layers, arch, flags, ctx) is None


def test_v41_other_gpus_and_packed_dtypes_are_not_laid_out() -> None:
    case = next(c for c in CASES if c["name"].startswith("DeepseekV41") and c["gpu"] == "h100")
    for gpu, dtype in (("a100", "auto"), ("h100", "bfloat16")):
        layers, arch, flags, ctx = _inputs(case["config"], ["--max-model-len", "8192", "--kv-cache-dtype", dtype],
                                           gpu, "0.33.0")
        assert deepseek_v41.build(layers, arch, flags, ctx) is None
