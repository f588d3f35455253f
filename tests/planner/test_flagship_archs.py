"""GLM-5 Next, MiniMax-M3, Step 5, Ling 3.0, Inkling and Flint: the layer maps and the further KV caches
vLLM 0.33's model classes register per layer (kvplan/ingest/flagship.py), checked against the oracle's
answers (tests/data/vllm_oracle_arch) and against hand-written configs for the keys' edge cases."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from tests.planner.arch_parity import ARCH_DATA, case_input, load_answer, oracle_layers


def _config(name: str) -> dict[str, Any]:
    return json.loads((ARCH_DATA / "configs" / f"{name}.json").read_text())


def _plan(cfg: dict[str, Any], tmp_path: Path, flag: str = "auto"):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return kvplan.api.compile(p, ["--kv-cache-dtype", flag])


def _vllm_bytes(name: str) -> dict[int, float]:
    return {i: slot["bytes"] for i, slot in oracle_layers(load_answer(name)).items()}


def _have(plan) -> dict[int, float]:
    return {lp.index: (lp.bytes_per_token_exact if lp.bytes_per_token_exact is not None else lp.bytes_per_token)
            for lp in plan.layers if lp.bytes_per_token}


@pytest.mark.parametrize("flag", ["auto", "fp8"])
def test_glm5_next_indexer_keys_pool_over_kpool_tokens(flag: str) -> None:
    """GLM-5 Next: linear-attention layers hold no KV; each MLA layer adds uint8 indexer keys (132 B per
    16-token pool: 8.25 B/token) and a bf16 tail ring (2 x 128 x 2 B), whatever --kv-cache-dtype."""
    name = "Glm5NextForCausalLM__default"
    plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", ["--kv-cache-dtype", flag])
    want = _vllm_bytes(f"{name}__{flag}")
    assert _have(plan) == want
    latent = 1024 if flag == "auto" else 512
    assert want[3] == latent + 8.25 + 512
    assert plan.totals.bytes_per_token == math.ceil(sum(want.values()))
    kinds = {lp.index: lp.kind for lp in plan.layers}
    assert kinds[0] == "linear_attention" and kinds[3] == "mla"


def test_glm5_next_index_topk_null_is_refused_as_its_config_class_refuses_it(tmp_path: Path) -> None:
    """transformers' Glm5NextTextConfig (vLLM 0.33 / 0.34) declares index_topk an int: null fails its strict
    validation, so vLLM loads no config; absent, it is 2048 (tests/planner/model_caches/test_glm5next.py)."""
    cfg = _config("Glm5NextForCausalLM__default")
    cfg["text_config"]["index_topk"] = None
    with pytest.raises(KvplanInputError, match="index_topk must be a positive integer, got None"):
        _plan(cfg, tmp_path)


def test_mla_head_dim_zero_is_accepted_but_not_for_dense_attention(tmp_path: Path) -> None:
    """GLM-5 Next publishes head_dim 0 (its MLA sizes come from kv_lora_rank / qk_rope_head_dim)."""
    assert _plan(_config("Glm5NextForCausalLM__default"), tmp_path).totals.bytes_per_token > 0
    dense = _config("FlintForCausalLM__default")
    dense["head_dim"] = 0
    with pytest.raises(KvplanInputError, match="head_dim is 0"):
        _plan(dense, tmp_path)


@pytest.mark.parametrize("case", ["default", "sparse-every-other"])
def test_minimax_m3_sparse_layers_add_an_index_key_cache(case: str, tmp_path: Path) -> None:
    name = f"MiniMaxM3SparseForCausalLM__{case}"
    # as the oracle ran it: the checkpoint's own config class (auto_map) under --trust-remote-code
    src = case_input({"config": f"configs/{name}.json"}, ARCH_DATA, tmp_path)
    for flag in ("auto", "fp8"):
        plan = kvplan.api.compile(src, ["--kv-cache-dtype", flag, "--trust-remote-code"])
        assert _have(plan) == _vllm_bytes(f"{name}__{flag}")
    cfg = _config(name)["sparse_attention_config"]
    dim, freq = cfg["sparse_index_dim"], cfg["sparse_attention_freq"]
    plan = kvplan.api.compile(src, ["--kv-cache-dtype", "fp8", "--trust-remote-code"])
    by = {lp.index: lp.bytes_per_token for lp in plan.layers}
    dense = by[freq.index(0)]
    assert all(by[i] == dense + (2 * dim if f else 0) for i, f in enumerate(freq[:len(by)]))  # bf16 keys


def test_step5_heads_per_layer_type_and_dsa_caches() -> None:
    """Step 5: KV heads from num_attention_groups; sliding layers take attention_other_setting's geometry;
    full (DSA) layers add a CSA tail ring (a page of their own cache) and 256 B per 8-token region."""
    name = "Step5ForCausalLM__default"
    plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", "--kv-cache-dtype auto")
    assert _have(plan) == _vllm_bytes(f"{name}__auto")
    by = {lp.index: lp for lp in plan.layers}
    assert (by[0].kind, by[0].num_kv_heads, by[0].head_size, by[0].sliding_window) == ("sliding_attention", 8, 128, 512)
    main = 8 * (192 + 192) * 2
    assert (by[3].kind, by[3].num_kv_heads, by[3].head_size, by[3].bytes_per_token) == (
        "full_attention", 8, 192, main + main + 32)


def test_step5_without_sparse_config_has_no_dsa_caches(tmp_path: Path) -> None:
    cfg = _config("Step5ForCausalLM__default")
    cfg["sparse_config"]["enabled"] = False
    by = {lp.index: lp.bytes_per_token for lp in _plan(cfg, tmp_path).layers}
    assert by[3] == 8 * (192 + 192) * 2


@pytest.mark.parametrize("name", ["BailingMoeV3ForCausalLM__default", "BailingMoeV3ForCausalLM__group4",
                                  "BailingMoeV3VLForConditionalGeneration__group4"])
def test_ling3_layer_group_size_decides_mla_layers(name: str) -> None:
    plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", "--kv-cache-dtype fp8")
    want = _vllm_bytes(f"{name}__fp8")
    assert _have(plan) == want
    cfg = _config(name)
    text = cfg.get("text_config", cfg)
    lgs, n = text["layer_group_size"], text["num_hidden_layers"]
    assert sorted(want) == [i for i in range(n) if not (i + 1) % lgs or i >= n // lgs * lgs]


@pytest.mark.parametrize("case", ["default", "all-global", "swa-geometry"])
def test_inkling_local_layers_and_conv_state(case: str) -> None:
    """Inkling: local_layer_ids slide with swa_* geometry; every layer keeps a short-conv state of
    KV heads x next_pow2(2 head_dim + 2 hidden / KV heads) bf16 elements next to its attention cache."""
    name = f"InklingForCausalLM__{case}"
    plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", "--kv-cache-dtype fp8")
    assert _have(plan) == _vllm_bytes(f"{name}__fp8")
    cfg = _config(name)
    for lp in plan.layers:
        local = lp.index in cfg["local_layer_ids"]
        k, d = (cfg["swa_num_key_value_heads"], cfg["swa_head_dim"]) if local else (
            cfg["num_key_value_heads"], cfg["head_dim"])
        conv = k * (1 << (2 * d + 2 * cfg["hidden_size"] // k - 1).bit_length()) * 2
        assert lp.sliding_window == (cfg["sliding_window_size"] if local else None)
        assert lp.bytes_per_token == k * 2 * d + conv  # fp8 K and V + bf16 conv state


def test_flint_use_sliding_window_false_turns_sliding_layers_full() -> None:
    name = "FlintForCausalLM__sliding-layers-off"
    plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", "--kv-cache-dtype auto")
    assert {lp.sliding_window for lp in plan.layers} == {None}
    assert _have(plan) == _vllm_bytes(f"{name}__auto")
    on = kvplan.api.compile(ARCH_DATA / "configs" / "FlintForCausalLM__sliding-layers.json", "--kv-cache-dtype auto")
    assert {lp.sliding_window for lp in on.layers} == {513, None}


def test_extra_caches_count_in_the_bf16_baseline() -> None:
    """saving_vs_bf16 compares like with like: the fixed-size extra caches are in both totals."""
    plan = kvplan.api.compile(ARCH_DATA / "configs" / "InklingForCausalLM__default.json", "--kv-cache-dtype fp8")
    auto = kvplan.api.compile(ARCH_DATA / "configs" / "InklingForCausalLM__default.json", "--kv-cache-dtype auto")
    assert plan.totals.bytes_per_token_bf16 == auto.totals.bytes_per_token


def test_request_bytes_keep_windowed_and_ring_caches_small() -> None:
    """One request at --max-model-len: Inkling's conv state keeps its kernel window (+ one prefill chunk),
    GLM-5 Next's tail ring one block, while the attention caches grow with the context."""
    from kvplan.backends.capabilities import EngineVersion
    from kvplan.backends.defaults import default_block_size
    from kvplan.planner.compile import DEFAULT_MAX_NUM_BATCHED_TOKENS as MBT

    BS = default_block_size(EngineVersion())  # the default release's block size (64 tokens from 0.34)

    mml = 65536
    plan = kvplan.api.compile(ARCH_DATA / "configs" / "InklingForCausalLM__default.json",
                              ["--kv-cache-dtype", "fp8", "--max-model-len", str(mml)])
    glob = next(lp for lp in plan.layers if lp.kind == "full_attention")
    attn = glob.num_kv_heads * 2 * glob.head_size  # fp8 K and V
    conv = glob.bytes_per_token - attn
    assert glob.max_bytes_per_request == math.ceil(mml / BS) * BS * attn + conv * min(4 - 1 + MBT, mml)
    glm = kvplan.api.compile(ARCH_DATA / "configs" / "Glm5NextForCausalLM__default.json",
                             ["--kv-cache-dtype", "fp8", "--max-model-len", str(mml)])
    mla = next(lp for lp in glm.layers if lp.kind == "mla")
    assert mla.max_bytes_per_request == math.ceil(mml / BS) * BS * 512 + math.ceil(8.25 * mml) + 512 * BS


@pytest.mark.parametrize("case", ["default", "sources-ratio2"])
def test_deepseek_v41_source_layers_own_the_compressed_caches(case: str) -> None:
    """DeepSeek-V4.1: every layer keeps a 584 B fp8_ds_mla sliding-window state per token; only the
    kv_source_layer_ids add the compressed latent (584 / ratio, plus a 4096 B fp32 compressor ring at
    ratio 2) and the index_source_layer_ids the indexer keys (132 / ratio); readers store nothing more."""
    name = f"DeepseekV41ForCausalLM__{case}"
    text = _config(name)["text_config"]
    for flag in ("auto", "fp8"):
        plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", ["--kv-cache-dtype", flag])
        assert _have(plan) == _vllm_bytes(f"{name}__{flag}")
        assert {lp.kv_cache_dtype for lp in plan.layers} == {"fp8_ds_mla"}
    for lp in plan.layers:
        r = text["compress_ratios"][lp.index]
        want = 584.0
        if r and lp.index in text["kv_source_layer_ids"]:
            want += 584 / r + (4096 if r == 2 else 0)
        if r and lp.index in text["index_source_layer_ids"]:
            want += 132 / r
        assert _have(plan)[lp.index] == want
    assert plan.totals.bytes_per_token == math.ceil(sum(_have(plan).values()))


@pytest.mark.parametrize(("flag", "codes"), [("bfloat16", ["KV115"]), ("fp8_e4m3", ["KV119"]), ("fp8", []),
                                            ("auto", [])])
def test_deepseek_v41_takes_auto_or_fp8_only(flag: str, codes: list[str]) -> None:
    """vLLM's DeepSeek-V4.1 packed layout (measured on the oracle): auto and fp8 build, bfloat16 and
    fp8_e4m3 raise while the model is built."""
    plan = kvplan.api.compile(ARCH_DATA / "configs" / "DeepseekV41ForCausalLM__default.json",
                              ["--kv-cache-dtype", flag])
    assert sorted({f.code for f in plan.findings if f.severity.value == "error"}) == codes


@pytest.mark.parametrize("case", ["default", "sliding-layers", "sliding-layers-off"])
def test_flint_fp8_is_an_error_as_vllm_stops_building_it(case: str) -> None:
    """vLLM's Flint asserts a 16-bit KV cache: the oracle's fp8 answers are that AssertionError."""
    name = f"FlintForCausalLM__{case}"
    err = load_answer(f"{name}__fp8")["error"]
    assert err["type"] == "AssertionError" and any("kv_cache_dtype" in ln for ln in err["traceback_tail"])
    plan = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", "--kv-cache-dtype fp8")
    assert [f.severity.value for f in plan.findings if f.code == "KV119"] == ["error"]
    auto = kvplan.api.compile(ARCH_DATA / "configs" / f"{name}.json", "--kv-cache-dtype auto")
    assert not [f for f in auto.findings if f.code == "KV119"]


def test_glm5_next_mla_layers_take_a_sparse_mla_backend() -> None:
    """vLLM builds GLM-5 Next's MLA with is_sparse (index_topk set): a sparse MLA backend, as DeepSeek-V3.2."""
    plan = kvplan.api.compile(ARCH_DATA / "configs" / "Glm5NextForCausalLM__default.json", "--kv-cache-dtype auto",
                              "H100")
    assert {lp.backend for lp in plan.layers if lp.kind == "mla"} <= {b for b in {lp.backend for lp in plan.layers}
                                                                     if b and "SPARSE" in b}
    assert any(lp.kind == "mla" for lp in plan.layers)
