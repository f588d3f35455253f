"""Multimodal architectures whose language model kvplan finds the way vLLM 0.33 does.

Each test plans a checked-in oracle config (tests/data/vllm_oracle_arch) and compares with vLLM's own
answer for it: the architecture vLLM builds when its config convertor reroutes a text architecture
(a vision tower in the config), the language model read through another module's keys (MiMo-V2-Omni),
and encoder-decoder / prefix decoders kept under `decoder` (Nemotron Parse).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from tests.conftest import ROOT, arch_config
from tests.planner.arch_parity import ARCH_DATA, load_answer, oracle_config, oracle_layers

CONFIGS = ARCH_DATA / "configs"


def _vllm_total(name: str) -> float:
    return sum(slot["bytes"] for slot in oracle_layers(load_answer(name)).values())


@pytest.mark.parametrize(("name", "published", "built"), [
    # DeepSeek-V4 vision checkpoints publish the text architecture; vision_n_layers > 0 reroutes it.
    ("DeepseekV4ForConditionalGeneration__default", "DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration"),
    # A MiMo-V2 config with a vision_config is MiMo-V2-Omni, whatever architectures says.
    ("MiMoV2OmniForCausalLM__text-architecture", "MiMoV2FlashForCausalLM", "MiMoV2OmniForCausalLM"),
])
def test_vision_tower_reroutes_to_the_architecture_vllm_builds(name: str, published: str, built: str) -> None:
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    assert cfg["architectures"] == [published]
    answer = load_answer(f"{name}__auto")
    assert answer["engine"]["architecture"] == built
    plan = kvplan.api.compile(CONFIGS / f"{name}.json", "--kv-cache-dtype auto")
    assert plan.model.architecture == built
    assert not [f for f in plan.findings if f.code == "KV604"]  # verified: no unverified-architecture warning
    assert plan.totals.bytes_per_token == pytest.approx(_vllm_total(f"{name}__auto"), abs=1)


def test_without_a_vision_tower_the_text_architecture_stays(tmp_path: Path) -> None:
    cfg = arch_config(tmp_path, "DeepseekV4ForConditionalGeneration__default", vision_n_layers=0)
    assert kvplan.api.compile(cfg, "--kv-cache-dtype auto").model.architecture == "DeepseekV4ForCausalLM"
    plan = kvplan.api.compile(CONFIGS / "MiMoV2FlashForCausalLM__default.json", "--kv-cache-dtype auto")
    assert plan.model.architecture == "MiMoV2FlashForCausalLM"


@pytest.mark.parametrize("name", ["MiMoV2OmniForCausalLM__default", "MiMoV2OmniForCausalLM__pattern4-swa-heads"])
def test_mimo_v2_omni_sliding_layers_use_the_swa_keys(name: str) -> None:
    """MiMo-V2-Omni's language model is vLLM's MiMo-V2-Flash: hybrid_layer_pattern 1 = sliding with
    sliding_window_size, and swa_* KV heads / head sizes / value head sizes on those layers."""
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    plan = kvplan.api.compile(CONFIGS / f"{name}.json", "--kv-cache-dtype auto")
    want = oracle_layers(load_answer(f"{name}__auto"))
    for lp in plan.layers:
        sliding = cfg["hybrid_layer_pattern"][lp.index] == 1
        assert lp.sliding_window == (cfg["sliding_window_size"] if sliding else None)
        spec = want[lp.index]["main"]["specs"][0]
        assert (lp.num_kv_heads, lp.head_size, lp.head_size_v) == (
            spec["num_kv_heads"], spec["head_size"], spec["head_size_v"])
        if sliding:
            assert (lp.num_kv_heads, lp.head_size_v) == (cfg["swa_num_key_value_heads"], cfg["swa_v_head_dim"])
    assert plan.totals.bytes_per_token == _vllm_total(f"{name}__auto")


@pytest.mark.parametrize("flag", ["auto", "fp8"])
def test_nemotron_parse_decoder_caches_self_and_cross_attention(flag: str, tmp_path: Path) -> None:
    """Nemotron Parse: an MBart decoder (under `decoder`) whose layers hold a self-attention cache per
    decoded token and a cross-attention cache over the image's encoder tokens, which vLLM's processor
    counts as (2048 // 16) * ((1648 // 16) // 4) + 1 = 3201."""
    name = "NemotronParseForConditionalGeneration__default"
    plan = kvplan.api.compile(oracle_config(name, tmp_path), ["--trust-remote-code", "--kv-cache-dtype", flag],
                              engine="vllm==0.33.0")  # the oracle answer and the 16-token blocks are 0.33.0's
    answer = load_answer(f"{name}__{flag}")
    by_type: dict[str, dict[int, int]] = {}
    for rec in answer["layers"]:
        if rec["specs"]:
            by_type.setdefault(rec["specs"][0]["type"], {})[rec["index"]] = rec["specs"][0]["bytes_per_token"]
    assert {lp.index: lp.bytes_per_token for lp in plan.layers} == by_type["FullAttentionSpec"]
    assert {lp.index: lp.cross_attention_bytes_per_token for lp in plan.layers} == by_type["CrossAttentionSpec"]
    assert plan.model.num_layers == 10
    # One request as vLLM's startup check counts it (kvplan's layout, tests/planner/test_vllm_capacity_layouts.py):
    # max_model_len decoded tokens and, for the cross-attention, CrossAttentionSpec's max_num_encoder_input_tokens
    # (the batch budget, 8192), each in blocks of 16; the image itself has 3201 encoder tokens (KV601).
    per_layer = (-(-plan.totals.max_model_len // 16) * 16 * by_type["FullAttentionSpec"][0]
                 + -(-8192 // 16) * 16 * by_type["CrossAttentionSpec"][0])
    assert plan.totals.bytes_per_request == 10 * per_layer
    kv601 = next(f for f in plan.findings if f.code == "KV601")
    assert "3201 encoder tokens" in kv601.message


@pytest.mark.parametrize(("name", "kv_heads"), [("RadioMBartPrefixForCausalLM__default", 16),
                                                ("RadioMBartPrefixForCausalLM__gqa4", 4)])
def test_nemotron_parse_3_5_self_attention_kv_heads(name: str, kv_heads: int, tmp_path: Path) -> None:
    """Nemotron Parse 3.5: a causal-prefix decoder without cross-attention; decoder.self_attention_kv_heads
    sets its KV heads (absent: one per query head)."""
    plan = kvplan.api.compile(oracle_config(name, tmp_path), "--trust-remote-code --kv-cache-dtype fp8")
    assert {lp.num_kv_heads for lp in plan.layers} == {kv_heads}
    assert all(lp.cross_attention_bytes_per_token is None for lp in plan.layers)
    assert not [f for f in plan.findings if f.code == "KV601"]
    assert plan.totals.bytes_per_token == _vllm_total(f"{name}__fp8")


@pytest.mark.parametrize("image_size", [None, [2048], [2048, "wide"], [0, 1648]])
def test_nemotron_parse_without_a_usable_image_size_is_one_clear_error(tmp_path: Path, image_size: object) -> None:
    p = oracle_config("NemotronParseForConditionalGeneration__default", tmp_path)
    cfg = json.loads(p.read_text())
    if image_size is None:
        cfg.pop("image_size")
    else:
        cfg["image_size"] = image_size
    p.write_text(json.dumps(cfg))
    with pytest.raises(KvplanInputError, match="image_size"):
        kvplan.api.compile(p, "--trust-remote-code --kv-cache-dtype auto")
    run = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "plan", str(p),
                          "--trust-remote-code"],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert run.returncode == 2
    assert "Traceback" not in run.stderr and "image_size" in run.stderr


def test_deepseek_v4_layer_types_are_known_not_unverified() -> None:
    """DeepSeek-V4's layer_types name its compression (compress_rates); a verified DeepSeek-V4 config
    plans without KV604's 'layer types kvplan does not know'."""
    for name in ("DeepseekV4ForCausalLM__default", "DeepseekV4ForConditionalGeneration__vl-architecture"):
        plan = kvplan.api.compile(CONFIGS / f"{name}.json", "--kv-cache-dtype auto")
        assert not [f for f in plan.findings if f.code == "KV604"], name
        assert {lp.kind for lp in plan.layers} == {"mla"}
