"""Mistral Large 4 (vLLM 0.34's MistralLarge4ForCausalLM, read from a Mistral params.json) planned as vLLM 0.34.0
built it: tests/data/vllm_oracle_releases/0.34.0/mistral-large-4-*.json are that release's own answers
(scripts/oracle/mistral_large4_oracle.py: the remap, verify_and_update_config and the NVIDIA model class on the
meta device) for the params.json folders of tests/data/mistral_large4."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError

DATA = Path(__file__).parents[1] / "data"
ANSWERS = sorted((DATA / "vllm_oracle_releases" / "0.34.0").glob("mistral-large-4-*.json"))
FLAGS = {"auto": "--kv-cache-dtype auto", "bf16": "--kv-cache-dtype bfloat16", "fp8": "--kv-cache-dtype fp8",
         "fp8_ds_mla": "--kv-cache-dtype fp8_ds_mla"}
PARAMS = [(p, c) for p in ANSWERS for c in sorted(json.loads(p.read_text())["cases"])]
# Latent row bytes per token: bf16 576 x 2; fp8 576 x 1; DeepSeek's fp8_ds_mla row (MLAAttentionImpl's 656).
LATENT = {"auto": 1152, "fp8": 576, "fp8_ds_mla": 656}


def _folder(answer: Path) -> Path:
    return DATA / "mistral_large4" / answer.stem.removeprefix("mistral-large-4-")


def _layers(answer: dict) -> dict[int, list]:
    return {i: run[2:] for run in answer["layers"] for i in range(run[0], run[1] + 1)}


@pytest.mark.parametrize("answer_file,case", PARAMS, ids=[f"{p.stem}-{c}" for p, c in PARAMS])
def test_plan_equals_vllm_034(answer_file: Path, case: str) -> None:
    doc = json.loads(answer_file.read_text())
    assert doc["vllm_version"] == "0.34.0"
    o = doc["cases"][case]
    assert o["error"] is None and o["mode"] == "model"
    # The oracle built the sparse layers with FLASHMLA_SPARSE, the backend kvplan picks on an H100.
    plan = kvplan.api.compile(_folder(answer_file), FLAGS[case], "h100", engine="vllm==0.34.0")
    assert plan.kv_cache_dtype == o["cache_dtype"]  # after verify_and_update_config
    assert plan.model.dtype == o["model_dtype"]
    want = _layers(o)
    assert sorted(want) == [lp.index for lp in plan.layers]
    shared = {i: src for i, src in o["kv_shared"]}
    indexer = {i: head for i, head, _dtype in o["indexer"]}
    assert all(dtype == "torch.uint8" for *_, dtype in o["indexer"])
    notes = {f.message for f in plan.findings if f.code == "KV702"}
    for lp in plan.layers:
        kv, mode, window, kv_heads, head = want[lp.index]
        assert (lp.kind, lp.num_kv_heads, lp.head_size, lp.sliding_window) == ("mla", kv_heads, head, window)
        assert lp.quant_mode.value == mode.lower()
        if lp.kv_cache_dtype != kv:
            # FLASHMLA_SPARSE stores any other quantized dtype as fp8_ds_mla
            # (_canonicalize_sparse_mla_kv_cache_dtype): kvplan keeps the layer's dtype and says so.
            assert (lp.kv_cache_dtype, kv) == ("fp8", "fp8_ds_mla")
            assert "Using fp8_ds_mla KV cache format for FLASHMLA_SPARSE backend." in notes
            continue
        assert lp.kv_shared_with == shared.get(lp.index)
        own = 0 if lp.index in shared else LATENT[kv] + indexer.get(lp.index, 0)
        assert lp.bytes_per_token == own, f"L{lp.index} bytes per token"


def test_fp8_ds_mla_carries_its_own_scales() -> None:
    """DeepSeek's fp8_ds_mla row holds an fp32 scale per 128 latent values: no uncalibrated-scale warning."""
    plan = kvplan.api.compile(DATA / "mistral_large4" / "fp8-kv", "", engine="vllm==0.34.0")
    assert {lp.scale_source.value for lp in plan.layers} == {"block_scales"}
    assert not [f for f in plan.findings if f.code == "KV401"]


def test_rocm_takes_fp8() -> None:
    """The ROCm branch of verify_and_update_config (read from the source: the oracle runs on the CPU platform)."""
    plan = kvplan.api.compile(DATA / "mistral_large4" / "fp8-kv", "", "mi300x", engine="vllm==0.34.0")
    assert plan.kv_cache_dtype == "fp8"
    assert {lp.kv_cache_dtype for lp in plan.layers} == {"fp8"}


def test_kv150_says_why() -> None:
    plan = kvplan.api.compile(DATA / "mistral_large4" / "fp8-kv", "", engine="vllm==0.34.0")
    facts = [d.fact for d in plan.layers[0].decisions if d.rule == "KV150"] + \
        [d.fact for d in getattr(plan, "global_decisions", []) or [] if getattr(d, "rule", None) == "KV150"]
    assert any("fp8_ds_mla" in f for f in facts), facts


def test_pixtral_with_a_mistral_large_4_text_model(tmp_path: Path) -> None:
    """A vision encoder wraps it in Pixtral (vLLM builds text_config's MistralLarge4ForCausalLM as the language
    model, pixtral.py); PixtralForConditionalGenerationConfig applies the same dtype rewrite."""
    params = json.loads((DATA / "mistral_large4" / "fp8-kv" / "params.json").read_text())
    params["vision_encoder"] = {"hidden_size": 1024, "num_channels": 3, "image_size": 1024, "patch_size": 16,
                                "rope_theta": 10000.0, "intermediate_size": 4096, "num_hidden_layers": 4,
                                "num_attention_heads": 16, "image_token_id": 10, "image_break_token_id": 12,
                                "image_end_token_id": 13, "adapter_bias": True}
    (tmp_path / "params.json").write_text(json.dumps(params))
    plan = kvplan.api.compile(tmp_path, "", engine="vllm==0.34.0")
    text = kvplan.api.compile(DATA / "mistral_large4" / "fp8-kv", "", engine="vllm==0.34.0")
    assert plan.model.architecture == "PixtralForConditionalGeneration"
    assert plan.kv_cache_dtype == "fp8_ds_mla"
    assert [(lp.kv_cache_dtype, lp.bytes_per_token, lp.kv_shared_with) for lp in plan.layers] == \
        [(lp.kv_cache_dtype, lp.bytes_per_token, lp.kv_shared_with) for lp in text.layers]


def test_refused_before_034() -> None:
    with pytest.raises(KvplanInputError, match=r"not in vLLM 0\.33\.0's model registry \(vLLM added it in 0\.34\.0\)"):
        kvplan.api.compile(DATA / "mistral_large4" / "fp8-kv", "", engine="vllm==0.33.0")
