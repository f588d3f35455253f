"""Engine versions, version ranges, the vLLM 0.33 backend rows and the feature history."""
from __future__ import annotations

import pytest

from kvplan.backends.capabilities import EngineVersion, parse_version, version_in_range
from kvplan.backends.vllm_rows import (
    BACKENDS,
    ENGINE_FEATURES,
    PRIORITY_ORDERS,
    cuda_priority,
    engine_feature,
    rocm_priority,
)
from kvplan.errors import KvplanInputError
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES
from kvplan.releases import DEFAULT_ENGINE
from kvplan.releases.release import newest_release

_DEFAULT = EngineVersion.parse(DEFAULT_ENGINE).version


@pytest.mark.parametrize("spec,engine,version", [
    ("vllm==0.33.0", "vllm", (0, 33, 0)), ("vllm@0.33", "vllm", (0, 33, 0)),
    ("0.33.0", "vllm", (0, 33, 0)), ("vllm", "vllm", _DEFAULT), ("vllm 0.19.1", "vllm", (0, 19, 1)),
    ("v0.20.0", "vllm", (0, 20, 0)), ("vllm==0.26.1.dev0+g568afb3a1", "vllm", (0, 26, 1)),
    ("sglang", "sglang", None), ("SGLang==0.5.4", "sglang", (0, 5, 4)), ("trtllm", "trtllm", None),
    ("tensorrt-llm==1.1", "trtllm", (1, 1, 0)), ("", "vllm", _DEFAULT),
])
def test_engine_version_parse_accepts_user_spellings(spec: str, engine: str, version) -> None:
    ev = EngineVersion.parse(spec)
    assert (ev.engine, ev.version) == (engine, version)


def test_engine_version_default_is_the_newest_release() -> None:
    assert str(EngineVersion()) == f"vllm=={newest_release().version}" and EngineVersion.parse(None) == EngineVersion()


@pytest.mark.parametrize("spec,match", [("vlm==0.33", "Did you mean: vllm"), ("vllm==abc", "cannot read")])
def test_engine_version_parse_rejects_bad_input(spec: str, match: str) -> None:
    with pytest.raises(KvplanInputError, match=match):
        EngineVersion.parse(spec)


@pytest.mark.parametrize("version,spec,ok", [
    ((0, 33, 0), ">=0.33,<0.34", True), ((0, 33, 2), ">=0.33,<0.34", True),
    ((0, 34, 0), ">=0.33,<0.34", False), ((0, 19, 1), ">=0.19,<0.20", True),
    ((0, 20, 0), ">=0.19,<0.20", False), ((0, 33, 5), "==0.33", True), ((1, 0, 0), "*", True),
    ((0, 26, 0), "<0.27", True),
])
def test_version_in_range_compares_tuples(version, spec: str, ok: bool) -> None:
    assert version_in_range(version, spec) is ok


def test_parse_version_ignores_suffixes() -> None:
    assert parse_version("0.33.0rc1") == (0, 33, 0) and parse_version("banana") is None


BRIEF_BACKENDS = [
    "FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TRITON_ATTN_DIFFKV", "B12X",
    "HPC_ATTN", "TURBOQUANT", "ULTRAQUANT", "CPU_ATTN", "ROCM_ATTN", "ROCM_AITER_FA",
    "ROCM_AITER_UNIFIED_ATTN", "ROCM_SEGMENTED_ATTN", "ROCM_OCTAVE", "FLASHINFER_MLA",
    "TOKENSPEED_MLA", "CUTLASS_MLA", "FLASH_ATTN_MLA", "FLASHMLA", "TRITON_MLA", "FLASHMLA_SPARSE",
    "FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120", "FLASHINFER_MLA_SPARSE_SM90",
    "FLASH_ATTN_MLA_SPARSE", "ROCM_AITER_MLA",
]


@pytest.mark.parametrize("name", BRIEF_BACKENDS)
def test_backends_table_has_every_backend_of_the_reference(name: str) -> None:
    row = BACKENDS[name]
    assert row.engine == "vllm" and row.engine_versions == ">=0.33,<0.34"
    assert row.source and row.file.startswith("vllm/")


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_backends_table_rows_use_only_valid_kv_dtypes(name: str) -> None:
    assert set(BACKENDS[name].kv_cache_dtypes) <= set(VLLM_033_KV_CACHE_DTYPES)


def test_backends_table_facts_users_ask_about() -> None:
    assert "fp8_e5m2" not in BACKENDS["FLASH_ATTN"].kv_cache_dtypes  # FA never takes e5m2
    assert {"int8_per_token_head", "fp8_per_token_head"} <= set(BACKENDS["TRITON_ATTN"].kv_cache_dtypes)
    per_head = [n for n, r in BACKENDS.items() if r.supports_per_head_quant_scales]
    assert per_head == ["FLASH_ATTN"]
    pth = [n for n, r in BACKENDS.items() if "int8_per_token_head" in r.kv_cache_dtypes]
    assert pth == ["TRITON_ATTN"]
    mla_e5m2 = [n for n, r in BACKENDS.items() if r.use_mla and "fp8_e5m2" in r.kv_cache_dtypes]
    assert mla_e5m2 == ["ROCM_AITER_MLA"]
    assert not any(r.supports_sliding_window for r in BACKENDS.values() if r.use_mla)
    assert BACKENDS["CUTLASS_MLA"].block_sizes == (128,) and BACKENDS["FLASHMLA"].block_sizes == (64,)


def test_priority_orders_name_only_known_backends() -> None:
    for name, order in PRIORITY_ORDERS.items():
        assert set(order) <= set(BACKENDS), name


def test_cuda_priority_puts_flashinfer_first_only_on_sm10x_causal() -> None:
    kw = dict(use_mla=False, use_sparse=False, kv_quantized=False, num_heads=32, head_size=128)
    assert cuda_priority(10, causal=True, **kw)[0] == "FLASHINFER"
    assert cuda_priority(10, causal=False, **kw)[0] == "FLASH_ATTN"
    assert cuda_priority(9, causal=True, **kw)[:2] == ("FLASH_ATTN", "FLASHINFER")
    assert cuda_priority(12, causal=True, **kw)[0] == "FLASH_ATTN"


def test_cuda_priority_mla_orders_per_family() -> None:
    kw = dict(use_mla=True, use_sparse=False, causal=True, kv_quantized=False, num_heads=128,
              head_size=576)
    assert cuda_priority(10, **kw)[0] == "FLASHINFER_MLA"
    assert cuda_priority(9, **kw)[0] == "FLASH_ATTN_MLA"
    assert cuda_priority(12, **kw) == ("TRITON_MLA", "FLASHINFER_MLA_SPARSE_SM120")
    sm90_512 = cuda_priority(9, **{**kw, "head_size": 512})
    assert sm90_512.index("FLASHINFER_MLA_SPARSE_SM90") < sm90_512.index("FLASHMLA_SPARSE")


def test_rocm_priority_aiter_switches() -> None:
    assert rocm_priority(use_mla=False, use_sparse=False, aiter=False, aiter_supported=True)[:2] == (
        "ROCM_ATTN", "ROCM_AITER_UNIFIED_ATTN")
    assert "ROCM_AITER_FA" in rocm_priority(use_mla=False, use_sparse=False, aiter=True,
                                            aiter_supported=True)
    assert rocm_priority(use_mla=True, use_sparse=False, aiter=True, aiter_supported=True)[0] == "ROCM_AITER_MLA"


def test_engine_features_history_with_version_ranges() -> None:
    ev = EngineVersion.parse
    skip = engine_feature("kv_cache_dtype_skip_layers")
    assert skip.introduced_by.endswith("/33695") and skip.introduced_merged == "2026-03-27"
    assert not skip.holds_for(ev("vllm==0.18.0")) and skip.holds_for(ev("vllm==0.33.0"))
    pth = engine_feature("per_token_head_kv_dtypes")
    assert pth.introduced_by.endswith("/38378") and pth.holds_for(ev("vllm==0.33.0"))
    bug = engine_feature("flashinfer_skip_layer_query_dtype_crash")
    assert bug.kind == "bug" and bug.fixed_or_removed_by.endswith("/39002")
    assert bug.holds_for(ev("vllm==0.19.0")) and not bug.holds_for(ev("vllm==0.20.0"))
    calc = engine_feature("calculate_kv_scales")
    assert calc.fixed_or_removed_by.endswith("/49389") and not calc.holds_for(ev("vllm==0.33.0"))
    assert calc.holds_for(ev("vllm==0.19.0"))
    assert not bug.holds_for(ev("sglang"))
    for f in ENGINE_FEATURES:
        # assumption stated, or read from the release wheels themselves (kvplan/data/vllm)
        assert f.source.startswith(("Mapped from the merge date", "Read in the vllm==", "the release wheels")), f.name


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=24))
def test_engine_version_parse_any_text_parses_or_raises_input_error(spec: str) -> None:
    try:
        ev = EngineVersion.parse(spec)
    except KvplanInputError:
        return
    assert ev.engine in ("vllm", "sglang", "trtllm", "lmdeploy")
    assert ev.version is None or all(isinstance(p, int) for p in ev.version)
