"""Layer kinds and geometry for the tricky corpus configs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import KvplanInputError
from kvplan.ingest.checkpoint import load_model_inputs
from kvplan.ingest.families import FAMILY_DEFAULTS
from kvplan.ingest.hf_config import parse_hf_config
from tests.conftest import ARCH_CONFIGS, CORPUS


def arch(model: str):
    return load_model_inputs(CORPUS / model / "config.json").arch


def kinds(model: str) -> list[str]:
    return [la.kind for la in arch(model).layers]


def test_gpt_oss_alternates_sliding_and_full_with_sinks() -> None:
    a = arch("gpt-oss-20b")
    assert kinds("gpt-oss-20b")[:4] == ["sliding_attention", "full_attention"] * 2
    assert a.layers[0].sliding_window == 128 and a.layers[0].head_size == 64 and a.layers[0].has_sinks


def test_gemma3_minimal_config_uses_family_defaults() -> None:
    a = arch("gemma-3-4b-it")
    full = [la.index for la in a.layers if la.kind == "full_attention"]
    assert full == [5, 11, 17, 23, 29]
    assert (a.layers[0].num_kv_heads, a.layers[0].head_size, a.layers[0].sliding_window) == (4, 256, 1024)


def test_gemma2_even_layers_slide() -> None:
    assert kinds("gemma-2-2b-it-finetune-gemma2-poem")[:3] == ["sliding_attention", "full_attention",
                                                               "sliding_attention"]


def test_gemma4_global_layers_have_their_own_geometry() -> None:
    a = arch("nvidia-Gemma-4-31B-IT-NVFP4")
    s = next(la for la in a.layers if la.kind == "sliding_attention")
    f = next(la for la in a.layers if la.kind == "full_attention")
    assert (s.num_kv_heads, s.head_size) == (16, 256) and (f.num_kv_heads, f.head_size) == (4, 512)


def test_llama4_nope_layers_are_global_others_chunked() -> None:
    a = arch("Llama-4-Scout-17B-16E-Instruct-ABRIDGED")
    assert [la.index for la in a.layers if la.kind == "full_attention"] == list(range(3, 48, 4))
    assert a.layers[0].attention_chunk_size == 8192


def test_qwen_use_sliding_window_false_means_no_window() -> None:
    assert set(kinds("Qwen2.5-7B")) == {"full_attention"}


def test_mla_latent_geometry() -> None:
    la = arch("DeepSeek-V3").layers[0]
    assert (la.kind, la.num_kv_heads, la.head_size, la.head_size_v) == ("mla", 1, 576, 0)


def test_hybrid_patterns() -> None:
    full = [i for i, k in enumerate(kinds("nvidia-Nemotron-3-Nano-30B-A3B-NVFP4")) if k == "full_attention"]
    assert full == [5, 12, 19, 26, 33, 42]
    q = kinds("Qwen3.5-27B")
    assert q.count("linear_attention") == 48 and q.count("full_attention") == 16


def test_cross_attention_layers_through_the_transformers_backend() -> None:
    """vLLM 0.33 builds Mllama only through its Transformers backend (the oracle's answer), which
    registers the cross_attention_layers as self-attention KV caches: kvplan plans them so and says why."""
    a = arch("Llama-3.2-90B-Vision-Instruct")
    assert [la.kind for la in a.layers] == ["full_attention"] * 100
    assert any("Transformers backend" in n and "cross_attention_layers" in n for n in a.notes)


def test_gpt2_t5_naming_and_mha() -> None:
    g = arch("gpt2-saved-copy").layers[0]
    assert (g.num_kv_heads, g.head_size) == (12, 64)
    t = arch("t5-small-summarization-finetune")
    assert t.is_encoder_decoder and t.num_layers == 6 and (t.layers[0].num_kv_heads, t.layers[0].head_size) == (8, 64)


def test_explicit_head_dim_not_derived() -> None:
    assert arch("Qwen3-30B-A3B").layers[0].head_size == 128  # hidden/heads would be 64


def test_malformed_layer_types_is_input_error(tmp_path: Path) -> None:
    cfg = json.loads((CORPUS / "gpt-oss-20b" / "config.json").read_text())
    cfg["layer_types"] = cfg["layer_types"][:3]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(KvplanInputError, match="layer_types has 3 entries"):
        load_model_inputs(tmp_path)


def test_family_defaults_match_transformers() -> None:
    """Drift test: kvplan's built-in defaults equal transformers' config-class defaults."""
    transformers = pytest.importorskip("transformers")
    for model_type, defaults in FAMILY_DEFAULTS.items():
        cfg = transformers.AutoConfig.for_model(model_type).to_dict()
        for key, value in defaults.items():
            if key in cfg and key not in ("max_position_embeddings",):
                assert cfg[key] == value, f"{model_type}.{key}: kvplan {value!r}, transformers {cfg[key]!r}"


@pytest.mark.parametrize("key", ["torch_dtype", "dtype"])
def test_a_config_dtype_that_is_no_torch_dtype_is_one_input_error(tmp_path: Path, key: str) -> None:
    cfg = json.loads((CORPUS / "Meta-Llama-3.1-8B" / "config.json").read_text())
    cfg.pop("torch_dtype", None)
    cfg[key] = "bfloat17"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(KvplanInputError, match=f"{key} 'bfloat17' is not a torch dtype") as e:
        load_model_inputs(tmp_path / "config.json")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("config_dtype", "model_dtype", "bytes_per_token"),
                         [("float8_e4m3fn", "bfloat16", 4096), ("float64", "bfloat16", 4096),
                          ("torch.float16", "float16", 4096), ("half", "float16", 4096)])
def test_config_dtypes_vllm_does_not_run_fall_back_to_its_preferred_dtype(
        tmp_path: Path, config_dtype: str, model_dtype: str, bytes_per_token: int) -> None:
    """vLLM's _resolve_auto_dtype: a config dtype the platform does not run a model in (8-bit, float64)
    falls back to the preferred one (bfloat16 on CUDA), as float32 does; 'auto' KV is stored in it."""
    from kvplan.pipeline import compile as compile_plan

    cfg = json.loads((CORPUS / "Meta-Llama-3.1-8B" / "config.json").read_text())
    cfg["torch_dtype"] = config_dtype
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    plan = compile_plan(tmp_path / "config.json")
    assert {lp.dtype for lp in plan.layers} == {model_dtype}
    assert plan.layers[0].bytes_per_token == bytes_per_token


# ----------------------------------------------------------------------------- DeepSeek-V4 spellings
def _dsv4() -> dict:
    return json.loads((ARCH_CONFIGS / "DeepseekV4ForCausalLM__default.json").read_text())


_RATIO = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def test_deepseek_v4_legacy_compress_ratios_plan_as_layer_types_do() -> None:
    """DeepSeek-V4-Flash publishes `compress_ratios` (one per layer and MTP layer, no compress_rates /
    layer_types): transformers' DeepseekV4Config turns it into layer_types, vLLM reads those."""
    cfg = _dsv4()
    legacy = {k: v for k, v in cfg.items() if k not in ("layer_types", "compress_rates", "partial_rotary_factor")}
    legacy["compress_ratios"] = [_RATIO[t] for t in cfg["layer_types"]] + [0]  # + the MTP layer
    want = parse_hf_config(cfg, Path("dsv4"))
    got = parse_hf_config(legacy, Path("dsv4"))
    assert [(la.dsv4_compress_ratio, la.mla) for la in got.layers] == [(la.dsv4_compress_ratio, la.mla)
                                                                       for la in want.layers]
    assert len(got.layers) == cfg["num_hidden_layers"]
    # Sliding-only layers (ratio 0) keep their window cache only: vLLM's compress ratio 1.
    legacy["compress_ratios"] = [0, 0, *legacy["compress_ratios"][2:]]
    assert [la.dsv4_compress_ratio for la in parse_hf_config(legacy, Path("dsv4")).layers][:3] == [1, 1, 128]


def test_deepseek_v4_legacy_scalar_rates_and_bad_ratios() -> None:
    cfg = {k: v for k, v in _dsv4().items() if k != "compress_rates"}
    cfg["compress_rate_hca"] = 64  # transformers folds the legacy scalar into compress_rates
    assert {la.dsv4_compress_ratio for la in parse_hf_config(cfg, Path("dsv4")).layers} == {4, 64}
    bad = {k: v for k, v in _dsv4().items() if k not in ("layer_types", "compress_rates")}
    bad["compress_ratios"] = [2] * 44
    with pytest.raises(KvplanInputError, match="compress_ratios must list 0, 4 or 128 per layer"):
        parse_hf_config(bad, Path("dsv4"))
