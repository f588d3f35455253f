"""Voxtral Realtime: the causal audio encoder's KV caches, planned as vLLM 0.33 registers them.

The answers are vLLM's own (scripts/oracle/arch_oracle.py on the checked-in Mistral-format params.json):
every decoder layer's sliding-window cache plus one block-pooled cache per audio encoder layer,
numbered with the decoder layer of the same index.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import kvplan.api
from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.defaults import default_block_size
from kvplan.errors import KvplanInputError
from tests.planner.arch_parity import ARCH_DATA, load_answer, oracle_layers

CASES = ("default", "encoder-16-pool-2")


def _params(variant: str) -> Path:
    return ARCH_DATA / "configs" / f"VoxtralRealtimeGeneration__{variant}" / "params.json"


def _every_spec(answer: dict) -> int:
    return sum(s["bytes_per_token"] for rec in answer["layers"] for s in rec["specs"])


@pytest.mark.parametrize("flag", ["auto", "fp8"])
@pytest.mark.parametrize("variant", CASES)
def test_bytes_per_layer_and_total_are_vllms(variant: str, flag: str) -> None:
    answer = load_answer(f"VoxtralRealtimeGeneration__{variant}__{flag}")
    plan = kvplan.api.compile(_params(variant), ["--kv-cache-dtype", flag])
    assert plan.totals.bytes_per_token == _every_spec(answer)
    want = {i: slot["bytes"] for i, slot in oracle_layers(answer).items()}
    assert {lp.index: lp.bytes_per_token for lp in plan.layers} == want


def test_encoder_caches_sit_with_the_decoder_layer_of_their_index() -> None:
    plan = kvplan.api.compile(_params("default"), ["--kv-cache-dtype", "auto"])
    assert len(plan.layers) == 32  # 26 decoder layers; encoder layers 26..31 have no decoder layer
    first = plan.layers[0]
    # decoder: 8 KV heads x (128 + 128) x 2 B; encoder: 32 heads x 4 frames x (64 + 64) x 2 B
    assert first.bytes_per_token == 8 * 256 * 2 + 32 * 4 * 128 * 2
    fact = next(d.fact for d in first.decisions if d.field == "bytes_per_token")
    assert "audio encoder layer 0" in fact
    last = plan.layers[-1]
    assert (last.index, last.kind, last.sliding_window, last.num_kv_heads, last.head_size) == (
        31, "sliding_attention", 750, 32, 64)
    assert last.bytes_per_token == 4 * 32 * 128 * 2


def test_pooled_window_bounds_one_request() -> None:
    """vLLM keeps the pooled window (ceil(750 / 4) + 1 = 189 tokens), not 750 tokens of 4 frames each."""
    plan = kvplan.api.compile(_params("default"), ["--max-model-len", "131072", "--max-num-batched-tokens", "8192"])
    last = plan.layers[-1]
    bs = default_block_size(EngineVersion())  # the default release's block size (64 tokens from 0.34)
    blocks = math.ceil(min(189 - 1 + 8192, 131072) / bs) + 1
    assert last.max_bytes_per_request == blocks * bs * last.bytes_per_token


def test_tensor_parallel_splits_the_encoder_heads() -> None:
    one = kvplan.api.compile(_params("default"), [])
    two = kvplan.api.compile(_params("default"), ["--tensor-parallel-size", "2"])
    assert two.totals.bytes_per_token * 2 == one.totals.bytes_per_token
    assert two.layers[0].bytes_per_token == 4 * 256 * 2 + 16 * 4 * 128 * 2


def test_bidirectional_encoder_registers_no_cache(tmp_path: Path) -> None:
    params = json.loads(_params("default").read_text())
    params["multimodal"]["whisper_model_args"]["encoder_args"]["causal"] = False
    (tmp_path / "params.json").write_text(json.dumps(params))
    plan = kvplan.api.compile(tmp_path / "params.json", [])
    assert plan.model.architecture == "VoxtralForConditionalGeneration"
    assert len(plan.layers) == 26
    assert plan.layers[0].bytes_per_token == 8 * 256 * 2


def test_encoder_without_heads_is_one_clear_error(tmp_path: Path) -> None:
    params = json.loads(_params("default").read_text())
    del params["multimodal"]["whisper_model_args"]["encoder_args"]["n_heads"]
    (tmp_path / "params.json").write_text(json.dumps(params))
    with pytest.raises(KvplanInputError, match="encoder_attention_heads must be a positive integer"):
        kvplan.api.compile(tmp_path / "params.json", [])


def test_hugging_face_format_config_is_refused_as_vllm_fails_on_it(tmp_path: Path) -> None:
    """transformers' voxtral_realtime config.json: vLLM 0.33's class needs the Mistral parser's keys."""
    cfg = {"architectures": ["VoxtralRealtimeGeneration"], "model_type": "voxtral_realtime",
           "audio_config": {"model_type": "voxtral_realtime_encoder", "hidden_size": 1280, "num_hidden_layers": 32,
                            "num_attention_heads": 32, "head_dim": 64, "sliding_window": 750},
           "text_config": {"model_type": "voxtral_realtime_text", "hidden_size": 3072, "num_hidden_layers": 26,
                           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                           "sliding_window": 8192, "max_position_embeddings": 131072}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(KvplanInputError, match=r"only from the checkpoint's Mistral-format params\.json"):
        kvplan.api.compile(tmp_path / "config.json", [])
