"""Per-family defaults and spellings, as data.

When a config.json omits a value, the model's transformers config class supplies a default and
the engine reads that default. kvplan carries those defaults for the families whose configs are
commonly minimal, so planning never needs transformers; `tests/ingest/test_families.py` checks
this table against transformers' own config classes whenever transformers is installed
(drift test). For model types not listed here, `hf_config` reads the defaults generated from the
config classes into kvplan/data/vllm_architectures.json (`config_defaults`), so the base install
(no transformers) plans every architecture vLLM builds.
"""
from __future__ import annotations

from typing import Any

from kvplan.model.vocab import MODEL_DTYPE_ALIASES

# model_type -> defaults of the transformers config class for the keys kvplan reads.
# Source: transformers `models/<family>/configuration_<family>.py` (class __init__ defaults).
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma": {"num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
              "num_hidden_layers": 28, "hidden_size": 3072, "max_position_embeddings": 8192},
    "gemma2": {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
               "num_hidden_layers": 26, "hidden_size": 2304, "sliding_window": 4096,
               "max_position_embeddings": 8192},
    "gemma3_text": {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "num_hidden_layers": 26, "hidden_size": 2304, "sliding_window": 4096,
                    "sliding_window_pattern": 6, "max_position_embeddings": 131072},
    "llama4_text": {"num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                    "num_hidden_layers": 48, "hidden_size": 5120, "attention_chunk_size": 8192,
                    "no_rope_layer_interval": 4, "max_position_embeddings": 4096 * 32},
    "gpt2": {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024},
    "t5": {"num_layers": 6, "num_heads": 8, "d_kv": 64, "d_model": 512, "n_positions": 512},
    "mistral": {"sliding_window": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                "num_hidden_layers": 32, "hidden_size": 4096, "max_position_embeddings": 4096 * 32},
    "llama": {"num_attention_heads": 32, "num_hidden_layers": 32, "hidden_size": 4096,
              "max_position_embeddings": 2048},
}

# Generic decoder-only families whose configs use the standard key names; listed so that an
# unknown model_type (a typo, a remote-code model kvplan has never seen) is an input error.
STANDARD_DECODER_TYPES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
    "qwen3_5_text", "qwen3_5_moe_text", "phi", "phi3", "phimoe", "gemma", "gemma2", "gemma3_text",
    "gemma4_text", "olmo", "olmo2", "olmo3", "olmoe", "granite", "granitemoe", "granitemoehybrid",
    "internlm2", "internlm3", "exaone", "exaone4", "starcoder2", "cohere", "cohere2", "glm",
    "glm4", "glm4_moe", "glm4_moe_lite", "deepseek", "deepseek_v2", "deepseek_v3", "deepseek_v32",
    "kimi_k2", "minimax", "minimax_m2", "smollm3", "gpt_oss", "gpt2", "gpt_neox", "gptj",
    "gpt_bigcode", "falcon", "falcon_h1", "jamba", "mamba", "mamba2", "nemotron", "nemotron_h",
    "llama4_text", "mllama_text_model", "stablelm", "baichuan", "chatglm", "dbrx", "arcee",
    "ernie4_5", "ernie4_5_moe", "hunyuan_v1_dense", "hunyuan_v1_moe", "seed_oss", "apertus",
    "bamba", "lfm2", "zamba2", "plamo2", "mpt", "bloom", "opt", "persimmon", "t5", "mt5",
    "bart", "whisper", "mimo", "mimo_v2_flash", "step3_text", "longcat_flash", "dots1",
    "bailing_moe", "ling", "hy_v3",
})

# Multimodal / wrapper model types whose language model sits under text_config.
WRAPPER_TYPES = frozenset({
    "gemma3", "gemma4", "llama4", "mllama", "qwen3_5", "qwen3_5_moe", "qwen2_vl", "qwen2_5_vl",
    "qwen3_vl", "qwen3_vl_moe", "llava", "llava_next", "mistral3", "pixtral", "idefics3",
    "internvl", "kimi_vl", "glm4v", "glm4v_moe", "paligemma", "aya_vision", "smolvlm",
})

# Architectures vLLM builds without attention (state-space models): every layer keeps a state.
ATTENTION_FREE_ARCHS = frozenset({"MambaForCausalLM", "Mamba2ForCausalLM", "FalconMambaForCausalLM"})

# vLLM model modules whose MLA layers also register a sparse-attention indexer key cache
# (DeepSeek-V3.2 style: uint8, index_head_dim + index_head_dim/128 * 4 scale bytes per token and
# layer): always (the DSA module: DeepSeek-V3.2, GLM-5; dots3-note on its full-attention layers), or
# when the config has `index_topk`.
# Layers that reuse another layer's top-k (index_topk_freq / index_topk_pattern 'S' /
# indexer_types 'shared') build no indexer.
INDEXER_ALWAYS_MODULES = (".deepseek_v32", ".dots3_note")
INDEXER_IF_TOPK_MODULES = (".deepseek_v2", ".hy_v4")

# Families that always use attention sinks (vLLM passes sinks to the backend).
SINK_TYPES = frozenset({"gpt_oss"})

# Model dtype spellings accepted by --dtype (vLLM `_STR_DTYPE_TO_TORCH_DTYPE` of ModelConfig).
DTYPE_ALIASES = MODEL_DTYPE_ALIASES  # `--dtype` spellings -> dtype (kvplan.model.vocab)
