"""Per-layer backends on a GPU: the plan names a backend per layer or an error finding that says why."""
from __future__ import annotations

import pytest

import kvplan.api
from tests.conftest import CORPUS, EXAMPLES

GPT_OSS = EXAMPLES / "gpt-oss-20b" / "config.json"
LLAMA = EXAMPLES / "Meta-Llama-3.1-8B" / "config.json"


def test_h100_fp8_uses_fa3_and_skipped_layers_their_own_backend() -> None:
    plan = kvplan.api.compile(LLAMA, "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0", "h100")
    # `backend` is vLLM's enum name exactly; the FlashAttention version has its own field.
    assert plan.layers[1].backend == "FLASH_ATTN" and plan.layers[1].flash_attn_version == 3
    assert all(lp.flash_attn_version is None for lp in plan.layers if lp.backend != "FLASH_ATTN")
    assert plan.layers[1].query_dtype == "float8_e4m3fn"
    assert plan.layers[0].query_dtype != "float8_e4m3fn"  # skipped layer: model-dtype query (#39002)
    assert "KV140" in plan.layers[1].decided_by
    assert not [f for f in plan.findings if f.severity.value == "error"]


def test_fp8_below_sm89_on_triton_is_an_error_finding() -> None:
    plan = kvplan.api.compile(GPT_OSS, "--kv-cache-dtype fp8", "a100")
    errs = [f for f in plan.findings if f.code == "KV701"]
    assert errs and "SM89" in errs[0].message and errs[0].layers


def test_int8_per_token_head_lands_on_triton() -> None:
    plan = kvplan.api.compile(LLAMA, "--kv-cache-dtype int8_per_token_head", "h100")
    assert {lp.backend for lp in plan.layers} == {"TRITON_ATTN"}


@pytest.mark.parametrize("gpu", ["h100", "b200", "a100", "l40s", "mi300x", "rtx-pro-6000"])
@pytest.mark.parametrize("case", ["auto", "fp8", "int8_per_token_head", "bfloat16"])
@pytest.mark.parametrize("model", ["gpt-oss-20b", "DeepSeek-V3", "gemma-3-27b-it", "Qwen3-8B"])
def test_every_kv_layer_has_backend_or_error(gpu: str, case: str, model: str) -> None:
    plan = kvplan.api.compile(CORPUS / model / "config.json", ["--kv-cache-dtype", case], gpu)
    flagged = {i for f in plan.findings if f.severity.value == "error" for i in f.layers}
    for lp in plan.layers:
        if lp.bytes_per_token:
            assert lp.backend or lp.index in flagged or any(
                f.severity.value == "error" and not f.layers for f in plan.findings), (model, case, gpu, lp.index)


def test_config_errors_are_reported_once_not_again_per_backend() -> None:
    # V100 runs the model in float16, so an explicit bfloat16 KV cache is a config error (KV201);
    # backend selection fails for the same reason, and KV701 leaves it to KV201.
    plan = kvplan.api.compile(LLAMA, "--kv-cache-dtype bfloat16", "v100")
    codes = [f.code for f in plan.findings if f.severity.value == "error"]
    assert codes == ["KV201"]


def test_older_release_backends_and_query_dtypes_follow_the_release() -> None:
    flags = "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window"
    old = kvplan.api.compile(GPT_OSS, flags, "b200", engine="vllm==0.19.0")
    new = kvplan.api.compile(GPT_OSS, flags, "b200")
    assert old.layers[0].backend == new.layers[0].backend == "FLASHINFER"
    assert old.layers[0].query_dtype == "float8_e4m3fn"  # before PR #39002: the global dtype's query
    assert new.layers[0].query_dtype == "bfloat16"        # since: the group's own dtype


def test_backend_is_exactly_a_vllm_enum_name_in_every_gpu_golden() -> None:
    """`backend` is vLLM 0.33's AttentionBackendEnum name (tests/data, generated from vLLM), never decorated."""
    import json

    from tests.conftest import DATA, ROOT
    names = set(json.loads((DATA / "vllm_attention_backend_enum-0.33.0.json").read_text())["names"])
    seen: set[str] = set()
    versions: set[tuple[str, int]] = set()
    for path in (ROOT / "tests" / "golden_gpu").glob("*.json"):
        for per_gpu in json.loads(path.read_text())["gpus"].values():
            for g in (g for entry in per_gpu.values() for g in entry["groups"]):
                if g["backend"] is not None:
                    seen.add(g["backend"])
                if g.get("flash_attn_version") is not None:
                    versions.add((g["backend"], g["flash_attn_version"]))
    assert seen and seen <= names, seen - names
    assert versions and {b for b, _ in versions} <= {"FLASH_ATTN", "FLASH_ATTN_MLA"}
    assert {v for _, v in versions} <= {2, 3, 4}
