"""Differential test per architecture: kvplan's plan equals what vLLM 0.33.0's own model class builds.

tests/data/vllm_oracle_arch holds configs (each architecture's default config, variants that
exercise its layer-type keys, the corpus configs) and vLLM's answers for them
(scripts/oracle/arch_oracle.py: the real model class on the meta device, every KV cache spec each
layer registers, indexer caches included). Every architecture the coverage data calls verified must
be exact on every one of its cases: per layer kv_cache_dtype, quant mode, sliding window, KV heads,
head sizes and bytes per token.
"""
from __future__ import annotations

import importlib.util
import json
import math

import pytest

import kvplan.api
from tests.conftest import ROOT
from tests.planner.arch_parity import ARCH_DATA, check_case, load_answer, load_cases, oracle_config, oracle_layers

COVERAGE = json.loads((ROOT / "kvplan" / "data" / "vllm_arch_coverage.json").read_text())
VERIFIED = {a for a, v in COVERAGE["architectures"].items() if v["status"] == "verified"}
_ANSWERED = {n for v in COVERAGE["architectures"].values() if v["status"] in ("verified", "refused, as vLLM refuses it")
             for n in v["cases"]}
# Every case vLLM answered for a verified (or refused-as-vLLM-refuses) architecture.
VERIFIED_CASES = [c for c in load_cases() if c["name"] in _ANSWERED]


@pytest.mark.parametrize("case", VERIFIED_CASES, ids=[c["name"] for c in VERIFIED_CASES])
def test_verified_architecture_is_exact(case: dict) -> None:
    status, diffs = check_case(case)
    assert status in ("exact", "refused-ok"), "; ".join(diffs)


def test_every_answer_is_for_the_checked_in_config() -> None:
    """An answer vLLM gave for an older version of a config proves nothing about this one: each
    answer carries the sha256 of the config it answered (scripts/oracle/arch_oracle.py re-runs
    a case whose config changed)."""
    import hashlib

    stale = []
    for case in load_cases():
        answer = load_answer(case["name"])
        if answer is None:
            continue
        digest = hashlib.sha256((ARCH_DATA / case["config"]).read_bytes()).hexdigest()
        if answer.get("config_sha256") != digest:
            stale.append(case["name"])
    assert not stale, f"answers for configs that changed since (re-run scripts/oracle/arch_oracle.py): {stale[:10]}"


def test_every_verified_architecture_has_answered_cases() -> None:
    assert len(VERIFIED) >= 90
    for arch in VERIFIED:
        names = COVERAGE["architectures"][arch]["cases"]
        assert any((load_answer(n) or {}).get("error") is None for n in names), arch


def _coverage_script():
    spec = importlib.util.spec_from_file_location("kvplan_coverage_script", ROOT / "scripts" / "oracle" / "coverage.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_coverage_data_docs_and_readme_are_current() -> None:
    mod = _coverage_script()
    data, doc, readme = mod.render(mod.measure(), mod.measure_refused())
    assert data == (ROOT / "kvplan" / "data" / "vllm_arch_coverage.json").read_text(), \
        "coverage changed: run `python scripts/oracle/coverage.py` and review"
    assert doc == (ROOT / "docs" / "architectures.md").read_text()
    assert readme == (ROOT / "README.md").read_text()
    n_text = sum(1 for v in COVERAGE["architectures"].values() if v["category"] == "text" and v["status"] == "verified")
    assert f"{n_text} of 124 text-generation" in readme


def _vllm_total(name: str) -> int:
    return sum(slot["bytes"] for slot in oracle_layers(load_answer(name)).values())


@pytest.mark.parametrize("arch", ["DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"])
def test_sparse_mla_indexer_cache_is_in_the_bytes(arch: str) -> None:
    cfg = ARCH_DATA / "configs" / f"{arch}__default.json"
    plan = kvplan.api.compile(cfg, ["--kv-cache-dtype", "fp8"])
    assert plan.totals.bytes_per_token == _vllm_total(f"{arch}__default__fp8")
    lp = plan.layers[0]
    assert lp.bytes_per_token == 576 + 132  # fp8 latent + uint8 indexer keys (128) + fp32 scale (4)
    assert "indexer key cache 132 B" in next(d.fact for d in lp.decisions if d.field == "bytes_per_token")


def test_deepseek_v32_fp8_is_43188_bytes_per_token_as_vllm_computes() -> None:
    assert _vllm_total("DeepseekV32ForCausalLM__default__fp8") == 43188
    plan = kvplan.api.compile(ARCH_DATA / "configs" / "DeepseekV32ForCausalLM__default.json", "--kv-cache-dtype fp8")
    assert plan.totals.bytes_per_token == 43188


def test_nemotron_h_layers_block_type_reads_like_hybrid_override_pattern() -> None:
    base = "NemotronHForCausalLM__corpus-nvidia-Nemotron-3-Nano-30B-A3B-NVFP4"
    plans = [kvplan.api.compile(ARCH_DATA / "configs" / f"{n}.json", "--kv-cache-dtype fp8")
             for n in (base, base + "-layers_block_type")]
    kv = [[lp.index for lp in p.layers if lp.bytes_per_token] for p in plans]
    assert kv[0] == kv[1] and len(kv[0]) == 6
    assert plans[0].totals.bytes_per_token == plans[1].totals.bytes_per_token == _vllm_total(base + "__fp8")


def test_pooling_model_vllm_builds_without_kv_cache_plans_none_in_float16() -> None:
    """ErnieModel: vLLM 0.33 runs it through its Transformers embedding class (encoder-only attention,
    no KV cache) and a float32 pooling model in float16."""
    plan = kvplan.api.compile(ARCH_DATA / "configs" / "ErnieModel__default.json", "--kv-cache-dtype auto")
    assert load_answer("ErnieModel__default__auto")["engine"]["model_dtype"] == "float16"
    assert plan.model.dtype == "float16"
    assert plan.totals.bytes_per_token == 0
    assert {lp.kind for lp in plan.layers} == {"encoder_only"}


def test_zamba2_shared_attention_caches_are_numbered_as_vllm_binds_them() -> None:
    """vLLM numbers Zamba2's shared-attention caches 0..h-1 and the Mamba2 layers after them."""
    plan = kvplan.api.compile(ARCH_DATA / "configs" / "Zamba2ForCausalLM__default.json", "--kv-cache-dtype auto")
    want = oracle_layers(load_answer("Zamba2ForCausalLM__default__auto"))
    assert sorted(want) == list(range(9))
    assert [lp.index for lp in plan.layers if lp.bytes_per_token] == sorted(want)
    assert plan.totals.bytes_per_token == _vllm_total("Zamba2ForCausalLM__default__auto") == 9 * 20480


def test_decilm_block_configs_drive_kv_heads_and_no_op_attention(tmp_path) -> None:
    """Nemotron-NAS (DeciLM): per-layer GQA groups and attention blocks removed by no_op."""
    plan = kvplan.api.compile(oracle_config("DeciLMForCausalLM__default", tmp_path),
                              "--trust-remote-code --kv-cache-dtype auto")
    kv = {lp.index: lp for lp in plan.layers if lp.bytes_per_token}
    assert sorted(kv) == [0, 1, 3, 5, 6, 7]  # layers 2 and 4: attention no_op
    assert [kv[i].num_kv_heads for i in (0, 3, 5)] == [8, 4, 2]  # 64 heads // n_heads_in_group 8/16/32
    assert plan.totals.bytes_per_token == _vllm_total("DeciLMForCausalLM__default__auto")


@pytest.mark.parametrize("name", ["Gemma3nForCausalLM__default", "Gemma3nForConditionalGeneration__default",
                                  "Gemma4ForCausalLM__kv-shared"])
def test_kv_shared_layers_read_an_earlier_layers_cache_and_cost_nothing(name: str) -> None:
    """Gemma 3n / Gemma 4: the last num_kv_shared_layers layers reuse the cache of an earlier layer of
    the same type (vLLM's kv_sharing_target_layer_name) and register none of their own."""
    plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", "--kv-cache-dtype fp8")
    answer = load_answer(f"{name}__fp8")
    want = {rec["index"]: int(rec["kv_sharing_target_layer_name"].split(".layers.")[1].split(".")[0])
            for rec in answer["layers"] if rec["kv_sharing_target_layer_name"]}
    assert want  # the config does share
    have = {lp.index: lp.kv_shared_with for lp in plan.layers if lp.kv_shared_with is not None}
    assert have == want
    assert all(lp.bytes_per_token == 0 for lp in plan.layers if lp.index in want)
    assert plan.totals.bytes_per_token == _vllm_total(f"{name}__fp8")
    assert plan.totals.kv_layers == plan.model.num_layers - len(want)
    shared = next(lp for lp in plan.layers if lp.index in want)
    assert "reads layer" in next(d.fact for d in shared.decisions if d.field == "bytes_per_token")
    assert "kv_shared_with" not in plan.layers[0].model_dump()  # absent for a layer with its own cache


@pytest.mark.parametrize("flag", ["auto", "fp8"])
def test_whisper_decoder_layers_hold_self_and_cross_attention_caches(flag: str) -> None:
    """vLLM's Whisper decoder layer registers a FullAttentionSpec (per decoded token) and a
    CrossAttentionSpec (per encoder token, max_source_positions of them per request)."""
    name = "WhisperForConditionalGeneration__default"
    answer = load_answer(f"{name}__{flag}")
    plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", ["--kv-cache-dtype", flag],
                              engine="vllm==0.33.0")  # the oracle answer and the 16-token blocks are 0.33.0's
    self_b = {r["index"]: r["specs"][0]["bytes_per_token"] for r in answer["layers"]
              if r["specs"] and r["specs"][0]["type"] == "FullAttentionSpec"}
    cross_b = {r["index"]: r["specs"][0]["bytes_per_token"] for r in answer["layers"]
               if r["specs"] and r["specs"][0]["type"] == "CrossAttentionSpec"}
    assert {lp.index: lp.bytes_per_token for lp in plan.layers} == self_b
    assert {lp.index: lp.cross_attention_bytes_per_token for lp in plan.layers} == cross_b
    assert plan.totals.bytes_per_token == sum(self_b.values())  # per decoded token
    assert plan.totals.max_model_len == answer["engine"]["max_model_len"] == 448  # max_target_positions
    # One request as vLLM's startup check counts it (kvplan's layout; tests/data/vllm_oracle_capacity's Whisper
    # answers): 448 decoded tokens and, for the cross-attention, CrossAttentionSpec's
    # max_num_encoder_input_tokens (the batch budget, 8192; the audio itself is 1500 encoder tokens, KV601).
    per_layer = -(-448 // 16) * 16 * self_b[0] + -(-8192 // 16) * 16 * cross_b[0]
    assert plan.totals.bytes_per_request == len(self_b) * per_layer
    kv601 = next(f for f in plan.findings if f.code == "KV601")
    assert "cross-attention KV for 1500 encoder tokens" in kv601.message
    # vLLM quantizes the cross-attention caches too (the oracle's CrossAttentionSpec is uint8 under fp8)
    assert [f.layers for f in plan.findings if f.code == "KV205"] == ([sorted(cross_b)] if flag == "fp8" else [])


@pytest.mark.parametrize("flag", ["auto", "fp8"])
def test_deepseek_v4_compressed_caches_total_exactly_as_vllm(flag: str) -> None:
    """DeepSeek-V4: the compressed latent stores one 584 B state per 4 or 128 tokens, so a layer's
    bytes per token are fractional (4684.5625 on a heavily compressed layer); the plan carries them
    exactly (bytes_per_token_exact) and rounds bytes_per_token up."""
    name = "DeepseekV4ForCausalLM__default"
    plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", ["--kv-cache-dtype", flag])
    want = {i: slot["bytes"] for i, slot in oracle_layers(load_answer(f"{name}__{flag}")).items()}
    have = {lp.index: (lp.bytes_per_token_exact if lp.bytes_per_token_exact is not None else lp.bytes_per_token)
            for lp in plan.layers}
    assert have == want
    assert want[0] == 4684.5625 and plan.layers[0].bytes_per_token == 4685
    assert plan.totals.bytes_per_token_exact == sum(want.values())
    assert plan.totals.bytes_per_token == math.ceil(sum(want.values()))
    assert {lp.kv_cache_dtype for lp in plan.layers} == {"fp8_ds_mla"}  # vLLM resolves auto and fp8 alike
    assert "kv_cache_dtype" in [d.field for d in plan.layers[0].decisions if d.rule == "KV114"]
    assert "bytes_per_token_exact" not in kvplan.api.compile(
        ARCH_DATA / "configs" / "DeepseekV3ForCausalLM__default.json", "--kv-cache-dtype fp8").model_dump()["totals"]
