#!/usr/bin/env python3
"""Write the configs and the case list the architecture oracle answers (tests/data/vllm_oracle_arch).

Run by hand with the oracle interpreter (transformers + vLLM 0.33.0; never in CI):

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/oracle/make_arch_cases.py

For every architecture of kvplan/data/vllm_architectures.json whose config can be built without
the network, a default config.json is written:
  * from the transformers config class of its model_type (class defaults, `to_dict()`), or
  * from the config class vLLM ships (vllm/transformers_utils/configs/, vLLM's config registry), or
  * for remote-code architectures: the published keys, written out in REMOTE below (a Llama-style
    base plus the keys the architecture's own config adds) or in published_configs.py (the
    config.json keys of a named published checkpoint, with that provenance in cases.json), or
  * for an architecture published only in Mistral's format (MISTRAL_FORMAT: Voxtral Realtime): its
    params.json keys, written as configs/<name>/params.json and read by vLLM's own Mistral config
    parser (the oracle's patch 37; kvplan reads a params.json as vLLM converts it).
`architectures` is set to the architecture. VARIANTS adds configs that exercise the layer-type
keys of an architecture (layer patterns, windows, per-layer-type geometry).
Every config is answered under --kv-cache-dtype auto and fp8.
"""
from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from published_configs import PUBLISHED  # noqa: E402  (remote-code configs written out)

DATA = ROOT / "tests" / "data" / "vllm_oracle_arch"
REG = ROOT / "kvplan" / "data" / "vllm_architectures.json"

# Architectures whose model_type transformers does not name, and the vLLM config registry does.
VLLM_CONFIG_TYPES = {
    "DeepseekV41ForCausalLM": "deepseek_v41", "DeepseekVLV2ForCausalLM": "deepseek_vl_v2",
    "KimiVLForConditionalGeneration": "kimi_vl", "KimiK25ForConditionalGeneration": "kimi_k25",
    "KimiK3ForConditionalGeneration": "kimi_k3", "Step3TextForCausalLM": "step3_text",
    "Step3VLForConditionalGeneration": "step3_vl", "Step3p5ForCausalLM": "step3p5",
    "Step5ForCausalLM": "step5", "Step5ForConditionalGeneration": "step5_vl",
    "ChatGLMModel": "chatglm", "ChatGLMForConditionalGeneration": "chatglm",
    "DoryForCausalLM": "dory", "FlintForCausalLM": "flint", "Dots3NoteForCausalLM": "dots3_note",
    "UnlimitedOCRForCausalLM": "unlimited_ocr", "MiDashengLMModel": "midashenglm",
    "Moondream3ForCausalLM": "moondream3", "OpenVLAForActionPrediction": "openvla",
    "Ovis": "ovis", "UltravoxModel": "ultravox", "FunAudioChatForConditionalGeneration": "funaudiochat",
    "IsaacForConditionalGeneration": "isaac", "BagelForConditionalGeneration": "bagel",
    "BailingMoeV3VLForConditionalGeneration": "bailing_moe_v3_vl", "Alpamayo2Super": "alpamayo2_super",
    "Glm5NextForCausalLM": "glm5_next", "KimiLinearForCausalLM": "kimi_linear",
    # Remote-code architectures whose config class transformers ships under another model_type.
    "HCXVisionV2ForCausalLM": "hyperclovax_vision_v2", "MuseGlimmerForCausalLM": "muse_glimmer",
    "DeepseekOCR2ForCausalLM": "deepseek_vl_v2", "DeepseekOCRForCausalLM": "deepseek_vl_v2",
    "VoxtralRealtimeGeneration": "voxtral_realtime", "Qwen2_5OmniModel": "qwen2_5_omni",
    "Qwen3ASRRealtimeGeneration": "qwen3_asr",
    "Cosmos3ForConditionalGeneration": "cosmos3_omni", "NemotronH_Nano_VL_V2": "nemotron_h_omni",
    "NemotronH_Nano_Omni_Reasoning_V3": "nemotron_h_omni", "NemotronH_Super_Omni_Reasoning_V3": "nemotron_h_omni",
    "MiniCPMOcrForConditionalGeneration": "minicpmv4_7",
    # Intern-S1-Pro: a Qwen3-VL-MoE layout (deepstack vision, MoE text) under its own remote class.
    "InternS1ProForConditionalGeneration": "qwen3_vl_moe",
    # Intern-S2-Preview: vLLM's class is Qwen3.5-MoE's (its config is that layout; time-series tower
    # weights dropped).
    "InternS2PreviewForConditionalGeneration": "qwen3_5_moe",
    # Remote-code text models whose model class reads the config of a transformers family.
    "LongcatFlashNgramForCausalLM": "longcat_flash", "AliceAIForCausalLM": "qwen3_next",
    "Rnj1ForCausalLM": "gemma3_text",
}
# Config classes vLLM ships (vllm/transformers_utils/configs/) without naming them in its registry.
VLLM_CONFIG_CLASSES = {"DotsOCRForCausalLM": "DotsOCRConfig", "MiniMaxM3SparseForCausalLM": "MiniMaxM3TextConfig",
                       "BailingMoeV3ForCausalLM": "BailingMoeV3TextConfig"}

_LLAMA_BASE = {
    "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6, "vocab_size": 32000, "rope_theta": 10000.0, "hidden_act": "silu",
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "attention_bias": False,
    "initializer_range": 0.02, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
}
# Remote-code architectures: model_type and the keys their published config.json files carry
# (on top of the Llama-style base above).
REMOTE: dict[str, tuple[str, dict]] = {
    "InternLM2ForCausalLM": ("internlm2", {"bias": False, "rope_scaling": None}),
    "InternLM3ForCausalLM": ("internlm3", {"bias": False, "qkv_bias": False, "head_dim": 128}),
    "ExaoneForCausalLM": ("exaone", {"num_layers": 32, "layer_norm_epsilon": 1e-5,
                                     "activation_function": "silu"}),
    "MiniCPMForCausalLM": ("minicpm", {"scale_emb": 12, "dim_model_base": 256, "scale_depth": 1.4}),
    "OrionForCausalLM": ("orion", {}),
    "SolarForCausalLM": ("solar", {}),
    "TeleChat2ForCausalLM": ("telechat", {"n_layer": 32, "n_head": 32, "num_key_value_heads": 8,
                                          "layer_norm_epsilon": 1e-5, "ffn_hidden_size": 11008,
                                          "embed_layernorm": False, "apply_residual_connection_post_layernorm": False}),
    "IQuestCoderForCausalLM": ("iquestcoder", {}),
    "MiMoForCausalLM": ("mimo", {"use_sliding_window": False, "max_window_layers": 28,
                                 "sliding_window": None, "num_nextn_predict_layers": 0}),
    "LLaMAForCausalLM": ("llama", {}),
    "DeepseekForCausalLM": ("deepseek", {"moe_intermediate_size": 1408, "n_routed_experts": 64,
                                         "num_experts_per_tok": 6, "n_shared_experts": 2,
                                         "first_k_dense_replace": 1, "moe_layer_freq": 1,
                                         "norm_topk_prob": False}),
    "PhiMoEForCausalLM": ("phimoe", {"num_local_experts": 16, "num_experts_per_tok": 2,
                                     "sliding_window": None}),
    # Fitted against vLLM's model class (the keys its module reads; values illustrative, 8 layers).
    "BailingMoeForCausalLM": ("bailing_moe", {
        "embedding_dropout": 0.0, "use_bias": False, "use_qkv_bias": False, "first_k_dense_replace": 1, "num_experts":
        8, "num_experts_per_tok": 2, "norm_topk_prob": True, "num_shared_experts": 1, "moe_intermediate_size": 1408,
        "num_hidden_layers": 8, "head_dim": 128}),
    "BailingMoeV2ForCausalLM": ("bailing_moe_v2", {
        "embedding_dropout": 0.0, "use_bias": False, "use_qkv_bias": False, "first_k_dense_replace": 1, "num_experts":
        8, "num_experts_per_tok": 2, "norm_topk_prob": True, "num_shared_experts": 1, "moe_intermediate_size": 1408,
        "num_hidden_layers": 8, "head_dim": 128}),
    "SarvamMoEForCausalLM": ("sarvam_moe", {
        "embedding_dropout": 0.0, "use_bias": False, "use_qkv_bias": False, "first_k_dense_replace": 1, "num_experts":
        8, "num_experts_per_tok": 2, "norm_topk_prob": True, "num_shared_experts": 1, "moe_intermediate_size": 1408,
        "num_hidden_layers": 8, "head_dim": 128}),
    "BailingMoeV2_5ForCausalLM": ("bailing_moe_v2_5", {
        "num_experts": 8, "num_experts_per_tok": 2, "num_shared_experts": 1, "moe_intermediate_size": 1408, "use_bias":
        False, "num_hidden_layers": 8, "head_dim": 128}),
    'IQuestLoopCoderForCausalLM': ('iquestloopcoder', {"num_hidden_layers": 8, "head_dim": 128}),
    "MistralLarge3ForCausalLM": ("mistral_large3", {
        "n_routed_experts": 8, "first_k_dense_replace": 1, "n_shared_experts": 1, "moe_intermediate_size": 1408,
        "num_experts_per_tok": 2, "norm_topk_prob": True, "num_hidden_layers": 8, "head_dim": 128}),
    'PanguEmbeddedForCausalLM': ('pangu_embedded', {"num_hidden_layers": 8, "head_dim": 128}),
    "PanguProMoEV2ForCausalLM": ("pangu_pro_moe_v2", {
        "first_k_dense_replace": 1, "n_routed_experts": 8, "num_experts": 8, "moe_intermediate_size": 1408,
        "num_experts_per_tok": 2, "routed_scaling_factor": 1.0, "n_shared_experts": 1, "norm_topk_prob": True,
        "num_hidden_layers": 8, "head_dim": 128}),
    "PanguUltraMoEForCausalLM": ("pangu_ultra_moe", {
        "first_k_dense_replace": 1, "n_routed_experts": 8, "num_experts": 8, "moe_intermediate_size": 1408,
        "num_experts_per_tok": 2, "routed_scaling_factor": 1.0, "n_shared_experts": 1, "norm_topk_prob": True,
        "num_hidden_layers": 8, "head_dim": 128}),
    "Param2MoEForCausalLM": ("param2moe", {
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 1408, "num_hidden_layers": 8, "head_dim":
        128}),
    'TeleChat3ForCausalLM': ('telechat3', {"num_hidden_layers": 8, "head_dim": 128}),
    'TeleFLMForCausalLM': ('teleflm', {"use_mup": False, "num_hidden_layers": 8, "head_dim": 128}),
    "SarvamMLAForCausalLM": ("sarvam_mla", {
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "kv_lora_rank": 512, "n_routed_experts": 8,
        "num_experts": 8, "moe_intermediate_size": 1408, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
        "num_hidden_layers": 8, "head_dim": 128}),
    "MiMoV2ForCausalLM": ("mimo_v2", {
        "hybrid_layer_pattern": [0, 1, 1, 1, 0, 1, 1, 1], "layernorm_epsilon": 1e-05, "swa_num_attention_heads": 32,
        "swa_num_key_value_heads": 4, "swa_head_dim": 128, "sliding_window_size": 1024, "num_hidden_layers": 8,
        "head_dim": 128}),
    "ExaoneMoEForCausalLM": ("exaone_moe", {
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention",
        "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"], "sliding_window": 1024,
        "mlp_layer_types": ["dense", "sparse", "sparse", "sparse", "sparse", "sparse", "sparse", "sparse"],
        "routed_scaling_factor": 1.0, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 1408,
        "num_hidden_layers": 8, "head_dim": 128}),
}

# InternVL-style multimodal remote configs: llm_config (the language model) + an InternViT.
INTERNVL_FAMILY = {"H2OVLChatModel": "h2ovl_chat", "NVLM_D": "NVLM_D", "SkyworkR1VChatModel": "skywork_chat",
                   "InternVLChatModel": "internvl_chat"}
_INTERN_VIT = {"model_type": "intern_vit_6b", "hidden_size": 1024, "num_attention_heads": 16,
               "num_hidden_layers": 4, "image_size": 448, "patch_size": 14, "intermediate_size": 4096,
               "qkv_bias": True, "norm_type": "layer_norm", "layer_norm_eps": 1e-6, "drop_path_rate": 0.0,
               "use_flash_attn": False, "qk_normalization": False, "hidden_act": "gelu", "num_channels": 3,
               "initializer_factor": 1.0, "attention_dropout": 0.0, "dropout": 0.0}

# Variants exercising layer-type keys: (arch, variant name, overrides applied to the default).
VARIANTS: list[tuple[str, str, dict]] = [
    ("MistralForCausalLM", "swa", {"sliding_window": 4096}),
    ("Qwen2ForCausalLM", "swa-mwl", {"use_sliding_window": True, "sliding_window": 4096,
                                     "max_window_layers": 20}),
    ("Qwen3ForCausalLM", "swa-mwl", {"use_sliding_window": True, "sliding_window": 4096,
                                     "max_window_layers": 20}),
    ("Gemma3ForCausalLM", "pattern4", {"layer_types": None, "sliding_window_pattern": 4}),
    ("Cohere2ForCausalLM", "pattern3", {"layer_types": None, "sliding_window_pattern": 3}),
    ("Phi3ForCausalLM", "swa", {"sliding_window": 2047}),
    ("Starcoder2ForCausalLM", "swa", {"sliding_window": 4096}),
    ("MixtralForCausalLM", "swa", {"sliding_window": 4096}),
    ("JambaForCausalLM", "period4-offset1", {"attn_layer_period": 4, "attn_layer_offset": 1}),
    ("Gemma4ForCausalLM", "global-keys", {"per_layer_config": None, "global_head_dim": 384,
                                           "num_global_key_value_heads": 2, "attention_k_eq_v": True}),
    ("Gemma4ForCausalLM", "global-keys-no-keqv", {"per_layer_config": None, "global_head_dim": 384,
                                                   "num_global_key_value_heads": 2,
                                                   "attention_k_eq_v": False}),
    ("Qwen3NextForCausalLM", "interval2", {"layer_types": None, "full_attention_interval": 2}),
    ("NemotronHForCausalLM", "hybrid-override-pattern", {"layers_block_type": None, "num_hidden_layers": 6,
                                                         "hybrid_override_pattern": "M*M-E*"}),
    ("NemotronHForCausalLM", "layers-block-type", {"num_hidden_layers": 6, "layers_block_type": [
        "mamba", "attention", "mamba", "mlp", "moe", "attention"]}),
    ("DeepseekV32ForCausalLM", "index-head-256", {"index_head_dim": 256}),
    # KV sharing: the last num_kv_shared_layers layers read an earlier layer's cache.
    ("Gemma4ForCausalLM", "kv-shared", {"num_kv_shared_layers": 10}),
    ("Gemma3nForCausalLM", "kv-shared-10", {"num_kv_shared_layers": 10}),
    ("DeepseekV32ForCausalLM", "index-topk-freq2", {"index_topk_freq": 2}),
    ("GlmMoeDsaForCausalLM", "index-topk-pattern", {"index_topk_pattern": "FSSF" * 20}),
    ("Exaone4ForCausalLM", "pattern-no-layer-types", {"layer_types": None, "sliding_window_pattern": 4}),
    ("Gemma2ForCausalLM", "no-layer-types", {"layer_types": None}),
    ("Llama4ForCausalLM", "no-layer-types", {"layer_types": None}),
    ("Llama4ForCausalLM", "no-rope-interval2", {"layer_types": None, "no_rope_layers": None,
                                                 "no_rope_layer_interval": 2}),
    ("GptOssForCausalLM", "all-full", {"layer_types": ["full_attention"] * 36}),
    ("Qwen3_5ForConditionalGeneration", "interval2", {"text_config.layer_types": None,
                                                       "text_config.full_attention_interval": 2}),
    # MiMo-V2-Flash as its checkpoints publish it: a 0/1 hybrid_layer_pattern (1 = sliding) with
    # per-layer-type heads / head sizes / value head sizes under swa_* keys.
    ("MiMoV2FlashForCausalLM", "published-keys", {
        "layer_types": None, "sliding_window": None, "sliding_window_size": 128,
        "hybrid_layer_pattern": [0 if i % 6 == 0 or i == 47 else 1 for i in range(48)],
        "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "swa_head_dim": 192,
        "swa_v_head_dim": 128, "add_swa_attention_sink_bias": True, "layernorm_epsilon": 1e-5}),
    # Ling/Ring 2.5: linear attention except every layer_group_size-th layer (MLA there).
    # (use_qkv_bias / use_linear_silu / linear_silu / partial_rotary_factor: read by vLLM's linear
    # attention layer, not KV geometry.)
    ("BailingMoeV2_5ForCausalLM", "group4", {"layer_group_size": 4, "use_qkv_bias": False, "use_linear_silu": False,
                                             "linear_silu": False, "partial_rotary_factor": 0.5}),
    # IQuest-LoopCoder: loop_num passes over the stack, loops 1+ sliding with loop_window_size.
    ("IQuestLoopCoderForCausalLM", "loop3-window128", {"loop_num": 3, "loop_window_size": 128}),
    # HY-V4: an indexer only on layers whose layer_types entry is sparse (then indexer_types 'shared'
    # layers reuse another layer's top-k and build none).
    ("HYV4ForCausalLM", "sparse-layer-types", {"layer_types": ["indexed_attention"] * 34}),
    ("HYV4ForCausalLM", "sparse-some-layers", {"layer_types": ["indexed_attention", "full_attention"] * 17}),
]


# Nemotron-H VL / Omni (nvidia Nemotron Nano VL 12B V2 published keys the transformers class leaves out).
# The RADIO vision config as the published checkpoints carry it (remote RadioConfig: the timm model
# name and its options under `args`, which vLLM's nano_nemotron_vl.py reads; teacher list left out).
_NEMOTRON_VL_KEYS = {"vision_config.args": {"model": "vit_huge_patch16_224", "cpe_max_size": 2048,
                                            "register_multiple": 8, "cls_token_per_teacher": True},
                     "vision_config.preferred_resolution": [512, 512], "vit_hidden_size": 1280,
                     "norm_mean": [0.48145466, 0.4578275, 0.40821073],
                     "norm_std": [0.26862954, 0.26130258, 0.27577711],
                     "text_config.dtype": "bfloat16", "dtype": "bfloat16",
                     "ps_version": "v2", "image_tag_type": "internvl", "select_layer": -1, "use_thumbnail": True,
                     "max_dynamic_patch": 12, "min_dynamic_patch": 1, "dynamic_image_size": True}

_OVIS2_LLM = {
    "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 8, "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "vocab_size": 152064, "hidden_act": "silu",
    "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": 28,
    "torch_dtype": "bfloat16"}
_DEEPSEEK_OCR_LM = {
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "first_k_dense_replace": 1,
    "hidden_size": 1280, "intermediate_size": 6848, "kv_lora_rank": None, "max_position_embeddings": 8192,
    "moe_intermediate_size": 896, "n_group": 1, "n_routed_experts": 64, "n_shared_experts": 2,
    "num_attention_heads": 10, "num_experts_per_tok": 6, "num_hidden_layers": 12, "num_key_value_heads": 10,
    "q_lora_rank": None, "qk_nope_head_dim": 0, "qk_rope_head_dim": 0, "v_head_dim": 0, "topk_group": 1,
    "topk_method": "greedy", "use_mla": False, "vocab_size": 129280, "torch_dtype": "bfloat16"}

# Keys the default config of a config class leaves out but that vLLM's model class reads (values
# as in the architecture's published checkpoints); "text_config.<key>" sets a nested key.
OVERRIDES: dict[str, dict] = {
    # DeepSeek-V3.2(-Exp) as published: its own model_type and the sparse-attention indexer keys (the
    # deepseek_v3 config class default has neither).
    "DeepseekV32ForCausalLM": {"model_type": "deepseek_v32", "index_topk": 2048, "index_head_dim": 128,
                               "index_n_heads": 64, "max_position_embeddings": 163840},
    "Glm4MoeForCausalLM": {"head_dim": 128},
    "Glm4MoeLiteForCausalLM": {"first_k_dense_replace": 1},
    "ChatGLMModel": {"original_rope": True, "tie_word_embeddings": False},
    "ChatGLMForConditionalGeneration": {"original_rope": True, "tie_word_embeddings": False},
    "NemotronForCausalLM": {"num_key_value_heads": 8},
    "QianfanOCRForConditionalGeneration": {"force_image_size": 448, "ps_version": "v2", "downsample_ratio": 0.5,
                                           "select_layer": -1, "template": "internvl2_5",
                                           "dynamic_image_size": True, "use_thumbnail": True,
                                           "max_dynamic_patch": 12, "min_dynamic_patch": 1},
    "UltravoxModel": {"vocab_size": 128256},
    # Gemma 4 Unified checkpoints carry a vision config (the encoder-free embedder; the class default
    # has none, which vLLM's model class refuses): transformers' Gemma4UnifiedVisionConfig defaults.
    "Gemma4UnifiedForConditionalGeneration": {"vision_config": {"model_type": "gemma4_unified_vision"}},
    # Moondream 3 publishes its sub-configs under `config` ({"text": ..., "vision": ...}); the
    # class's to_dict() writes them back as text_config/vision_config dicts, which its __init__
    # would keep as plain dicts: left out, the class builds them from `config` (its defaults).
    "Moondream3ForCausalLM": {"text_config": None, "vision_config": None},
    # Intern-S1-Pro's rope carries its FoPE keys (vLLM's model class asserts them; values illustrative).
    "InternS1ProForConditionalGeneration": {"text_config.rope_parameters": {
        "rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [24, 20, 20], "mrope_interleaved": True,
        "fope_init_factor": 0.1, "fope_sep_head": True, "num_inv_freq": None}, "text_config.norm_topk_prob": True},
    # Granite 4.0 Vision's deepstack map (vision layer -> LLM layer) and downsample rate, which the
    # config class leaves unset (values illustrative, in the published form [[-19, 9], ...]).
    "Granite4VisionForConditionalGeneration": {"deepstack_layer_map": [[-19, 9], [-13, 6], [-7, 3], [-1, 0]],
                                               "downsample_rate": "1/4"},
    # Cohere Compass ties its input and output embeddings (vLLM's model class asserts it).
    "CohereCompassForConditionalGeneration": {"tie_word_embeddings": True, "text_config.tie_word_embeddings": True},
    # AIDC-AI/Ovis2-8B as published: llm_config Qwen2.5-7B (cut to 8 layers) and an AIMv2 visual
    # tokenizer (backbone cut to 4 layers); the OvisConfig default has neither.
    "Ovis": {"hidden_size": 3584, "multimodal_max_length": 32768,
             "conversation_formatter_class": "QwenConversationFormatter",
             "llm_config": _OVIS2_LLM, "visual_tokenizer_config": {
                 "model_type": "aimv2_visual_tokenizer", "vocab_size": 65536, "tokenize_function": "softmax",
                 "tau": 1.0, "depths": None, "drop_cls_token": False, "hidden_stride": 2, "backbone_config": {
                     "model_type": "aimv2", "hidden_size": 1024, "intermediate_size": 2816,
                     "num_attention_heads": 8, "num_hidden_layers": 4, "num_channels": 3, "patch_size": 14,
                     "image_size": 448, "rms_norm_eps": 1e-5, "qkv_bias": False, "mlp_bias": False}}},
    # DeepSeek-VL2 / DeepSeek-OCR(-2) / Unlimited-OCR checkpoints publish tile_tag "2D" (the config
    # class default is the placeholder string "tile_tag", which vLLM's model classes refuse).
    "DeepseekVLV2ForCausalLM": {"tile_tag": "2D"},
    "DeepseekOCR2ForCausalLM": {"tile_tag": "2D", "language_config": _DEEPSEEK_OCR_LM},
    # DeepSeek-OCR's language model as published (deepseek-ai/DeepSeek-OCR config.json language_config:
    # DeepSeek-3B-MoE, plain multi-head attention: kv_lora_rank null, qk_*_head_dim 0); Unlimited-OCR
    # and DeepSeek-OCR-2 use the same backbone (vLLM's unlimited_ocr.py / deepseek_ocr2.py).
    "DeepseekOCRForCausalLM": {"tile_tag": "2D", "language_config": _DEEPSEEK_OCR_LM},
    "UnlimitedOCRForCausalLM": {"tile_tag": "2D", "language_config": _DEEPSEEK_OCR_LM},
    "VoxtralForConditionalGeneration": {"audio_config.downsample_factor": 4},
    "Qwen4ExpForConditionalGeneration": {"vision_config.deepstack_visual_indexes": [8, 16, 24],
                                         "text_config.output_gate_type": "sigmoid"},
    # Step3.7's remote config keeps the Perception Encoder's own keys (`heads`, which transformers'
    # step3p7_vision class renames): the vision sub-config is read as published, by attribute.
    "Step3p7ForConditionalGeneration": {"vision_config.output_dim": 4096, "vision_config.heads": 16,
                                        "vision_config.width": 1536, "vision_config.layers": 47,
                                        "vision_config.ls_init_value": 0.1, "vision_config.use_abs_posemb": True,
                                        "vision_config.use_cls_token": False, "vision_config.use_ln_post": False,
                                        "vision_config.use_ln_pre": True, "vision_config.use_rope2d": True,
                                        "vision_config.model_type": None,
                                        "text_config.architectures": ["Step3p5ForCausalLM"],
                                        "text_config.use_moe_router_bias": True, "text_config.need_fp32_gate": True,
                                        "text_config.norm_expert_weight": True},
    "Lfm2VlForConditionalGeneration": {"text_config.block_dim": 2048, "text_config.block_ff_dim": 12288,
                                       "text_config.block_multiple_of": 256,
                                       "text_config.block_ffn_dim_multiplier": 1.0,
                                       "text_config.block_auto_adjust_ff_dim": True},
    "Lfm2ForCausalLM": {"block_dim": 2048, "block_ff_dim": 12288, "block_multiple_of": 256,
                        "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True},
    "MiniMaxM2ForCausalLM": {"rotary_dim": 64, "scoring_func": "sigmoid"},
    "Qwen3VLMoeForConditionalGeneration": {"text_config.norm_topk_prob": True},
    "Step3p5ForCausalLM": {"use_moe_router_bias": True, "need_fp32_gate": True, "norm_expert_weight": True},
    # Step3 as published: moe_layers_enum is a comma-separated string.
    "Step3TextForCausalLM": {"moe_layers_enum": ",".join(str(i) for i in range(4, 60))},
    # LFM2-8B-A1B's layer map (24 layers, attention at 2, 6, 10, 14, 18, 21; short convolutions elsewhere).
    "Lfm2MoeForCausalLM": {"num_hidden_layers": 24, "layer_types": [
        "full_attention" if i in (2, 6, 10, 14, 18, 21) else "conv" for i in range(24)]},
    "Qwen4ExpForCausalLM": {"output_gate_type": "sigmoid"},
    # AliceAI (Qwen3-Next layout, KDA linear attention, AttnRes blocks): the keys vLLM's config hook
    # and model class require (values illustrative; KDA needs equal key/value head counts and dims).
    "AliceAIForCausalLM": {"kda_allow_negative_eigenvalues": False, "router_score_function": "sigmoid",
                           "router_bias_correction": True, "block_attn_res_block_size": 4,
                           "linear_num_key_heads": 16, "linear_num_value_heads": 16,
                           "linear_key_head_dim": 128, "linear_value_head_dim": 128},
    "LongcatFlashNgramForCausalLM": {"mla_scale_q_lora": True, "mla_scale_kv_lora": True,
                                     "zero_expert_type": "identity", "emb_neighbor_num": 4, "emb_split_num": 4,
                                     "ngram_vocab_size_ratio": 4},
    "Step3VLForConditionalGeneration": {"text_config.architectures": ["Step3TextForCausalLM"],
                                        "text_config.moe_layers_enum": ",".join(str(i) for i in range(4, 60))},
    # Kimi-Linear-48B-A3B as published: MLA (NoPE) every 4th layer, KDA linear attention elsewhere.
    "KimiLinearForCausalLM": {"num_hidden_layers": 27, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                              "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": True, "linear_attn_config": {
                                  "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
                                  "kda_layers": [i for i in range(1, 28) if i not in (4, 8, 12, 16, 20, 24, 27)],
                                  "head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4}},
    "AfmoeForCausalLM": {"score_func": "sigmoid", "route_norm": True, "n_group": 1, "topk_group": 1},
    "LongcatFlashForCausalLM": {"mla_scale_q_lora": True, "mla_scale_kv_lora": True,
                                "zero_expert_type": "identity"},
    "Glm4vMoeForConditionalGeneration": {"text_config.head_dim": 128, "text_config.use_qk_norm": False},
    "HYV3ForCausalLM": {"first_k_dense_replace": 1, "expert_hidden_dim": 1536, "num_shared_experts": 1,
                        "route_norm": True},
    "VoxtralRealtimeGeneration": {"audio_config.downsample_factor": 4},
    "DbrxForCausalLM": {"attn_config.rope_theta": 500000.0},
    "InklingForCausalLM": {"padded_vocab_size": 131072, "use_embed_norm": False},
    "Qwen3OmniMoeForConditionalGeneration": {"thinker_config.vision_config.image_size": 768,
                                             "thinker_config.vision_config.apply_vit_abs_pos_embed": True,
                                             "thinker_config.text_config.tie_word_embeddings": False},
    "NemotronH_Nano_VL_V2": {"patch_size": 16, "force_image_size": 512, "template": "nemotron-h",
                                          **_NEMOTRON_VL_KEYS},
    "NemotronH_Nano_Omni_Reasoning_V3": {"patch_size": 16, "force_image_size": 512, "template": "nemotron-h",
                                          **_NEMOTRON_VL_KEYS},
    "NemotronH_Omni_Reasoning_V3": {"patch_size": 16, "force_image_size": 512, "template": "nemotron-h",
                                    **_NEMOTRON_VL_KEYS},
    "NemotronH_Super_Omni_Reasoning_V3": {"patch_size": 16, "force_image_size": 512, "template": "nemotron-h",
                                          **_NEMOTRON_VL_KEYS},
}
# Keys a config class's to_dict() writes under another name than its published config.json (and
# than its own __init__ reads): DeepSeek-VL2 / OCR checkpoints carry the language model under
# `language_config`.
KEY_RENAMES: dict[str, dict[str, str]] = {
    "DeepseekVLV2ForCausalLM": {"text_config": "language_config"},
    "DeepseekOCRForCausalLM": {"text_config": "language_config"},
    "DeepseekOCR2ForCausalLM": {"text_config": "language_config"},
    "UnlimitedOCRForCausalLM": {"text_config": "language_config"},
    # Ultravox's config class stores the language model as wrapped_model_config; checkpoints and its
    # __init__ carry it as text_config.
    "UltravoxModel": {"wrapped_model_config": "text_config"},
}
# Processor files of the published checkpoint a multimodal processor-info class loads while vLLM
# validates the model config (file name -> JSON), written next to config.json by the oracle.
_QWEN2VL_PREPROCESSOR = {"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 16,
                         "temporal_patch_size": 1, "merge_size": 2, "min_pixels": 200704,
                         "max_pixels": 3211264}
CASE_FILES: dict[str, dict[str, dict]] = {
    "Ovis2_5": {"preprocessor_config.json": _QWEN2VL_PREPROCESSOR},
    "Ovis2_6ForCausalLM": {"preprocessor_config.json": _QWEN2VL_PREPROCESSOR},
    "Ovis2_6_MoeForCausalLM": {"preprocessor_config.json": _QWEN2VL_PREPROCESSOR},
}
# Engine options a case needs to pass vLLM's own config validation (as a GPU deployment has them).
CASE_OPTIONS: dict[str, dict] = {
    # Published checkpoints that ship their own config class (auto_map): the oracle stands in for it
    # (arch_oracle.py patch 3) instead of transformers' class of the same model_type.
    "Molmo2ForConditionalGeneration": {"remote_config": True},
    # MiniCPM-V 2.6's MiniCPMVConfig extends Qwen2Config (MiniCPM-o 2.6's MiniCPMOConfig extends it).
    "MiniCPMV": {"remote_config_base": "qwen2"}, "MiniCPMO": {"remote_config_base": "qwen2"},
    "Ernie4_5_VLMoeForConditionalGeneration": {"remote_config": True},
    "Step3p7ForConditionalGeneration": {"remote_config": True},
    # Nemotron-H VL / Omni checkpoints: their remote config keeps `vit_hidden_size` (transformers'
    # nemotron_h_omni class renames it) and RADIO's `args`.
    **{arch: {"remote_config": True} for arch in ("NemotronH_Nano_VL_V2", "NemotronH_Omni_Reasoning_V3",
                                                  "NemotronH_Nano_Omni_Reasoning_V3",
                                                  "NemotronH_Super_Omni_Reasoning_V3")},
    "Glm5NextForCausalLM": {"enable_prefix_caching": True},
    "Glm5NextForConditionalGeneration": {"enable_prefix_caching": True},
    "KimiLinearForCausalLM": {"enable_prefix_caching": True},
    "Step5ForCausalLM": {"v2_model_runner": True}, "Step5ForConditionalGeneration": {"v2_model_runner": True},
    "LongcatFlashNgramForCausalLM": {"v2_model_runner": True},
}

# ---- issue-21n block: multimodal remote-code architectures (configs in published_configs.py) ----
VLLM_CONFIG_TYPES.update({
    # DeepSeek-V4 with a vision tower: the text model's config class plus the vision_* keys.
    "DeepseekV4ForConditionalGeneration": "deepseek_v4",
    # Moondream 3 preview checkpoints name their architecture HfMoondream (vLLM's Moondream3 class).
    "HfMoondream": "moondream3",
    # Intern-S2-Mobius: the Qwen3.5-MoE layout plus shared meta-MoE banks (text_config.num_blocks).
    "InternS2MobiusForConditionalGeneration": "qwen3_5_moe",
    # MiMo-V2-Omni: MiMo-V2-Flash's text keys plus a vision tower.
    "MiMoV2OmniForCausalLM": "mimo_v2_flash",
})
# DeepSeek-V4 vision tower keys (vLLM's deepseek_v4/common/vision.py; values illustrative, 4 layers).
_DSV4_VISION = {"vision_n_layers": 4, "vision_dim": 1024, "vision_n_heads": 16, "vision_inter_dim": 4096,
                "vision_patch_size": 14, "vision_rope_theta": 10000.0, "vision_downsample_ratio": 2,
                "vision_max_n_token": 1024, "vision_min_pixels": 3136, "vision_max_wh_ratio": 200.0}
_MIMO_V2_PUBLISHED = {
    "layer_types": None, "sliding_window": None, "sliding_window_size": 128,
    "hybrid_layer_pattern": [0 if i % 6 == 0 or i == 47 else 1 for i in range(48)],
    "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "swa_head_dim": 192,
    "swa_v_head_dim": 128, "add_swa_attention_sink_bias": True, "layernorm_epsilon": 1e-5}
OVERRIDES.update({
    # DeepSeek-V4-Flash-Vision-Exp publishes the text architecture; vLLM routes a config with a vision
    # tower (vision_n_layers > 0) to DeepseekV4ForConditionalGeneration.
    "DeepseekV4ForConditionalGeneration": {**_DSV4_VISION, "architectures": ["DeepseekV4ForCausalLM"]},
    "HfMoondream": {"text_config": None, "vision_config": None},
    "InternS2MobiusForConditionalGeneration": {"text_config.num_blocks": 4},
    # MiMo-V2-Omni: its language model reads MiMo-V2's published keys (0/1 hybrid_layer_pattern, 1 =
    # sliding; swa_* per-layer-type heads / head sizes), not transformers' layer_types.
    "MiMoV2OmniForCausalLM": {**_MIMO_V2_PUBLISHED, "vision_config": {
        "depth": 4, "hidden_size": 1280, "hidden_act": "silu", "intermediate_size": 4608, "num_heads": 32,
        "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
        "tokens_per_second": 2, "window_size": 128, "out_hidden_size": 4096, "fullatt_block_indexes": [3],
        "kv_channels": 64, "qk_channels": 64, "num_query_groups": 4, "num_key_value_heads": 8, "use_sink": False,
        "vit_window_attn_types": None, "visual_token_window_size": 64}},
})
VARIANTS.extend([
    # The architecture vLLM keys it by comes from the vision tower, not architectures[0].
    ("DeepseekV4ForConditionalGeneration", "vl-architecture",
     {"architectures": ["DeepseekV4ForConditionalGeneration"]}),
    ("MiMoV2OmniForCausalLM", "text-architecture", {"architectures": ["MiMoV2FlashForCausalLM"]}),
    # Another layer map and sliding-layer geometry: every 4th layer full, 4 KV heads of 128 when sliding.
    ("MiMoV2OmniForCausalLM", "pattern4-swa-heads", {
        "hybrid_layer_pattern": [0 if i % 4 == 0 else 1 for i in range(48)], "swa_num_key_value_heads": 4,
        "swa_head_dim": 128, "swa_v_head_dim": 128, "sliding_window_size": 512}),
    ("InternS2MobiusForConditionalGeneration", "interval2", {"text_config.layer_types": None,
                                                             "text_config.full_attention_interval": 2}),
    # Mistral-format sliding windows as vLLM converts them: an int window (every layer sliding) and a
    # per-layer list pattern (None = full attention).
    ("PixtralForConditionalGeneration", "swa", {"text_config.sliding_window": 4096,
                                                "text_config.layer_types": ["sliding_attention"] * 8}),
    ("PixtralForConditionalGeneration", "swa-pattern", {
        "text_config.sliding_window": 4096,
        "text_config.layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                                    "sliding_attention"] * 2}),
    ("Phi4ForCausalLMV", "swa", {"sliding_window": 2047}),
    ("StepVLForConditionalGeneration", "swa-mwl", {"text_config.use_sliding_window": True,
                                                   "text_config.sliding_window": 4096,
                                                   "text_config.max_window_layers": 0}),
    # Muse Spark: another sliding / full layer map and window (text_config.layer_types, sliding_window).
    ("MuseSparkForConditionalGeneration", "pattern2-window2048", {
        "text_config.layer_types": ["sliding_attention", "full_attention"] * 4, "text_config.sliding_window": 2048}),
    # Language models' window keys as their families spell them (Qwen2: use_sliding_window with
    # max_window_layers, vLLM builds all layers sliding or none; Llama-style: sliding_window alone).
    # (MOSS-Audio has none: its language_config's window reaches vLLM only through the checkpoint's
    # remote config class, which the oracle's stand-in is not.)
    ("FireRedASR2ForConditionalGeneration", "swa-all", {"use_sliding_window": True, "sliding_window": 4096,
                                                        "max_window_layers": 0}),
    ("MoonshotKimiaForCausalLM", "swa-all", {"use_sliding_window": True, "sliding_window": 4096,
                                             "max_window_layers": 0}),
    ("FunASRForConditionalGeneration", "swa-all", {"use_sliding_window": True, "sliding_window": 4096,
                                                   "max_window_layers": 0}),
    ("BeeForConditionalGeneration", "swa-all", {"text_config.use_sliding_window": True,
                                                "text_config.sliding_window": 4096,
                                                "text_config.max_window_layers": 0}),
    ("KananaVForConditionalGeneration", "swa", {"text_config.sliding_window": 4096}),
    ("OpenPanguVLForConditionalGeneration", "swa", {"sliding_window": 4096}),
    # DeepSeek-V4 VL with every layer compressed-sparse (ratio 4, indexer everywhere).
    ("DeepseekV4ForConditionalGeneration", "all-csa", {"layer_types": ["compressed_sparse_attention"] * 43}),
    # Nemotron Parse 3.5: grouped-query self-attention (decoder.self_attention_kv_heads).
    ("RadioMBartPrefixForCausalLM", "gqa4", {"decoder.self_attention_kv_heads": 4}),
])
CASE_OPTIONS.update({
    "PixtralForConditionalGeneration": {"remote_config": True},
    "BeeForConditionalGeneration": {"remote_config_base": "llava_onevision"},
    "RForConditionalGeneration": {"remote_config_base": "llava_onevision"},
    "FireRedASR2ForConditionalGeneration": {"remote_config_base": "qwen2"},
    "FunASRForConditionalGeneration": {"remote_config_base": "qwen3"},
    "MoonshotKimiaForCausalLM": {"remote_config_base": "qwen2"},
    "Phi4ForCausalLMV": {"remote_config_base": "phi3"},
    # Nemotron Parse's remote config builds its `encoder` / `decoder` sub-configs (arch_oracle patch 32).
    "NemotronParseForConditionalGeneration": {"sub_configs": ["encoder", "decoder"]},
    "RadioMBartPrefixForCausalLM": {"sub_configs": ["encoder", "decoder"]},
})
_WHISPER_LARGE_V3 = {"model_type": "whisper", "architectures": ["WhisperModel"], "d_model": 1280,
                     "encoder_layers": 4, "encoder_attention_heads": 20, "encoder_ffn_dim": 5120,
                     "decoder_layers": 4, "decoder_attention_heads": 20, "decoder_ffn_dim": 5120,
                     "num_mel_bins": 128, "max_source_positions": 1500, "max_target_positions": 448,
                     "vocab_size": 51866, "activation_function": "gelu"}
_WHISPER_FEATURES = {"feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 128,
                     "sampling_rate": 16000, "hop_length": 160, "chunk_length": 30, "n_fft": 400,
                     "n_samples": 480000, "nb_max_frames": 3000, "padding_side": "right", "padding_value": 0.0,
                     "return_attention_mask": False}
# A word-level tokenizer (tokenizers' JSON form) with the Qwen-VL media tokens, for a processor that
# loads its tokenizer from the checkpoint folder (the KV caches never read it).
_WORD_TOKENIZER_FILES = {
    "tokenizer.json": {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                       "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
                       "model": {"type": "WordLevel", "unk_token": "<unk>", "vocab": {t: i for i, t in enumerate(
                           ["<unk>", "<s>", "</s>", "<pad>", "<image>", "<video>", "<audio>", "<|image_pad|>",
                            "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"])}}},
    "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "bos_token": "<s>",
                              "eos_token": "</s>", "pad_token": "<pad>", "image_token": "<|image_pad|>",
                              "video_token": "<|video_pad|>"}}
CASE_FILES.update({
    # openPangu-VL: vLLM's model class reads the image processor's rescale / normalisation at build time
    # (its own processor is remote code: a LLaVA processor holding the Qwen2-VL image processor with those
    # values stands in, without the video processor, which needs torchvision).
    "OpenPanguVLForConditionalGeneration": {"preprocessor_config.json": {
        **_QWEN2VL_PREPROCESSOR, "patch_size": 14, "temporal_patch_size": 2, "processor_class": "LlavaProcessor",
        "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]},
        **_WORD_TOKENIZER_FILES},
    # Kimi-Audio keeps its Whisper encoder's config (and feature extractor) in a subfolder (patch 31).
    "MoonshotKimiaForCausalLM": {"whisper-large-v3/config.json": _WHISPER_LARGE_V3,
                                 "whisper-large-v3/preprocessor_config.json": _WHISPER_FEATURES},
})


# ---- Issue 21 (session 13): keys the newest flagship model classes read, that their config
# classes' defaults leave out (values as the published checkpoints carry them where known, else
# illustrative: each provenance says which). -------------------------------------------------
# Inkling's published (OG-format) checkpoint is read by vLLM's own InklingModelConfig
# (model_type inkling_model): transformers' inkling_text class keeps the HF names vLLM does not read.
VLLM_CONFIG_TYPES.update({"InklingForCausalLM": "inkling_model"})
# Inkling: local (sliding, sconv) layers three of every four, sink shared experts (vLLM's MoE
# asserts the served checkpoint's sigmoid gate + shared sink experts; values illustrative).
_INKLING_KEYS = {"local_layer_ids": [i for i in range(16) if i % 4 != 3], "sliding_window_size": 512,
                 "swa_num_attention_heads": 12, "swa_num_key_value_heads": 4, "swa_head_dim": 128,
                 "head_dim": 128, "n_routed_experts": 8, "n_shared_experts": 1, "shared_expert_sink": True,
                 "num_experts_per_tok": 2, "gate_activation": "sigmoid", "norm_after_topk": True,
                 "dense_mlp_idx": 1, "padded_vocab_size": 201088, "use_embed_norm": True}
# GLM-5 Next: mHC residual streams on (`mhc`, with the hc_* keys the class has), DeepSeek-style
# sigmoid router (noaux_tc), NoPE MLA (qk_rope_head_dim 0): keys its config.json carries that the
# transformers class drops (values as vLLM's glm5next model reads them).
_GLM5_NEXT_KEYS = {"mhc": True, "topk_method": "noaux_tc", "scoring_func": "sigmoid", "mla_use_nope": True,
                   "indexer_rope_interleave": True}
# Step 5: the checkpoint's sparse_config section (DSA indexer on full-attention layers); values
# vLLM's Step5SparseConfig accepts (proxy_dim 256, topk 512, 16 indexer heads over the 8 KV groups).
_STEP5_SPARSE = {"enabled": True, "proxy_dim": 256, "sparse_indexer_rope_dim": 32, "sparse_indexer_num_heads": 16,
                 "sparse_indexer_num_k_heads": 1, "num_provider_groups": 8, "topk": 512,
                 "region_block_size": 8, "apply_to_layer_types": ["full_attention"]}
# Step 5 geometry in Step-3.5-Flash's published form (64 query heads over 8 KV groups; head_dim 192,
# the DSA kernels' one; sliding layers with their own head count under attention_other_setting, three
# sliding to one full; cut to 8 layers; values illustrative): the DSA kernels take 4/8/16 query heads
# per KV group, the class default's 40/8 none.
_STEP5_KEYS = {"sparse_config": _STEP5_SPARSE, "hidden_size": 4096, "num_attention_heads": 64,
               "num_attention_groups": 8, "head_dim": 192, "num_hidden_layers": 8, "sliding_window": 512,
               "layer_types": ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 3
               + ["full_attention"], "use_head_wise_attn_gate": True, "use_moe_router_bias": True,
               "need_fp32_gate": True,
               "attention_other_setting": {"attention_type": "sliding_attention", "num_attention_heads": 96,
                                           "num_attention_groups": 8, "head_dim": 128}}
# Ling 3.0 (BailingMoeV3): KDA without the gate LoRA (vLLM's layer only implements that) and the
# lower bound its safe gate uses (Ling-3.0-flash config.json values).
_BAILING_V3_KEYS = {"no_kda_lora": True, "kda_safe_gate": True, "kda_lower_bound": -5.0}
OVERRIDES.update({
    "InklingForCausalLM": dict(_INKLING_KEYS),
    "InklingForConditionalGeneration": {f"text_config.{k}": v for k, v in _INKLING_KEYS.items()},
    "Glm5NextForConditionalGeneration": {f"text_config.{k}": v for k, v in _GLM5_NEXT_KEYS.items()},
    "Step5ForCausalLM": dict(_STEP5_KEYS),
    "Step5ForConditionalGeneration": {**{f"text_config.{k}": v for k, v in _STEP5_KEYS.items()},
                                      "text_config.architectures": ["Step5ForCausalLM"]},
    "BailingMoeV3ForCausalLM": dict(_BAILING_V3_KEYS),
    "BailingMoeV3VLForConditionalGeneration": {f"text_config.{k}": v for k, v in _BAILING_V3_KEYS.items()},
    # GLM-5 Next's text architecture is served from the same (VL) config.json: its text_config.
    "Glm5NextForCausalLM": {f"text_config.{k}": v for k, v in _GLM5_NEXT_KEYS.items()},
    # MiniMax-M3 VL: the vision tower's keys (a raw dict the class keeps; values illustrative, 4 layers).
    "MiniMaxM3SparseForConditionalGeneration": {"vision_config": {
        "hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 16, "num_hidden_layers": 4,
        "num_channels": 3, "patch_size": 14, "layer_norm_eps": 1e-6, "hidden_act": "gelu",
        "img_token_compression_config": {"spatial_merge_size": 2, "temporal_patch_size": 2}}},
})
# DeepSeek-V4.1: its config class flattens text_config onto the top level; the text keys are
# DeepSeek-V4's (transformers' DeepseekV4Config defaults, cut to 8 layers) plus the V4.1 sparse
# topology: compress_ratios per layer (0 sliding only, 1 full-length, 2 ratio-2 compressed) and the
# layers owning the compressed-KV cache / the indexer (values illustrative).
def _deepseek_v41_text() -> dict:
    from transformers import DeepseekV4Config

    t = _jsonable(DeepseekV4Config(num_hidden_layers=8).to_dict())
    for k in ("architectures", "model_type", "transformers_version", "layer_types", "mlp_layer_types"):
        t.pop(k, None)
    t.update({"compress_ratios": [0, 1, 2, 2, 0, 1, 2, 2], "kv_source_layer_ids": [1, 2, 5, 6],
              "index_source_layer_ids": [1, 5], "sliding_window": 128, "num_hash_layers": 0})
    return t


OVERRIDES_LAZY = {"DeepseekV41ForCausalLM": lambda: {
    "text_config": _deepseek_v41_text(), "vision_config": {"num_hidden_layers": 2, "hidden_size": 1024,
                                                           "num_attention_heads": 16, "intermediate_size": 2816,
                                                           "patch_size": 14}}}
# How exact the keys added above are (written into cases.json's config_sources).
_ILLUSTRATIVE = "keys as vLLM's model class reads them; values illustrative, not copied from a checkpoint"
OVERRIDE_PROVENANCE: dict[str, str] = {
    "AliceAIForCausalLM": _ILLUSTRATIVE,
    "InklingForCausalLM": _ILLUSTRATIVE + " (16 layers, local layers 3 of 4)",
    "InklingForConditionalGeneration": _ILLUSTRATIVE + " (16 layers, local layers 3 of 4)",
    "Glm5NextForCausalLM": "the GLM-5 Next config.json keys transformers' class drops (mhc, router, NoPE MLA); "
                           "values as vLLM's model reads them",
    "Glm5NextForConditionalGeneration": "the GLM-5 Next config.json keys transformers' class drops (mhc, router, "
                                        "NoPE MLA); values as vLLM's model reads them",
    "Step5ForCausalLM": "sparse_config and Step-3.5-Flash-style geometry cut to 8 layers; " + _ILLUSTRATIVE,
    "Step5ForConditionalGeneration": "sparse_config and Step-3.5-Flash-style geometry cut to 8 layers; "
                                     + _ILLUSTRATIVE,
    "BailingMoeV3ForCausalLM": "Ling-3.0-flash's KDA keys (no_kda_lora, kda_safe_gate, kda_lower_bound)",
    "BailingMoeV3VLForConditionalGeneration": "Ling-3.0-flash's KDA keys (no_kda_lora, kda_safe_gate, "
                                              "kda_lower_bound)",
    "MiniMaxM3SparseForConditionalGeneration": "vision tower keys: " + _ILLUSTRATIVE,
    "DeepseekV41ForCausalLM": "DeepSeek-V4 text keys (transformers' defaults, 8 layers) + the V4.1 sparse "
                              "topology; " + _ILLUSTRATIVE,
}
CASE_OPTIONS.update({
    # minimax_m3_text: no registry maps it; the checkpoint's own class is the one vLLM ships (patch 19).
    "MiniMaxM3SparseForCausalLM": {"vllm_config_class": "MiniMaxM3TextConfig"},
    # Flint's decoder asserts FlashInfer's attention impl (arch_oracle.py patch 21).
    "FlintForCausalLM": {"flashinfer_impl_check": True},
    # Step 5's DSA backend builds on SM90+ only (patch 22 reports an H100's capability).
    "Step5ForCausalLM": {"v2_model_runner": True, "device_capability": [9, 0]},
    "Step5ForConditionalGeneration": {"v2_model_runner": True, "device_capability": [9, 0]},
    # DeepSeek-V4.1's attention picks its FP8 einsum recipe by compute capability (patch 22).
    "DeepseekV41ForCausalLM": {"device_capability": [9, 0]},
})
VARIANTS.extend([
    # AliceAI / Ling 3.0: the linear/full layer map from its interval keys instead of layer_types.
    ("AliceAIForCausalLM", "interval2", {"layer_types": None, "full_attention_interval": 2}),
    ("BailingMoeV3ForCausalLM", "group4", {"layer_types": None, "layer_group_size": 4}),
    ("BailingMoeV3VLForConditionalGeneration", "group4", {"text_config.layer_types": None,
                                                          "text_config.layer_group_size": 4}),
    # Inkling: every layer global (no local_layer_ids), and a different sliding window / SWA geometry.
    ("InklingForCausalLM", "all-global", {"local_layer_ids": []}),
    # Flint: sliding layers by layer_types; use_sliding_window false turns their window off.
    # (FlintConfig's default stack: 49 layers.)
    ("FlintForCausalLM", "sliding-layers", {"layer_types": [
        "full_attention" if i % 4 == 3 else "sliding_attention" for i in range(49)]}),
    ("FlintForCausalLM", "sliding-layers-off", {"use_sliding_window": False, "layer_types": [
        "full_attention" if i % 2 else "sliding_attention" for i in range(49)]}),
    # MiniMax-M3: the sparse (indexed) layers from sparse_attention_freq (every other layer here).
    ("MiniMaxM3SparseForCausalLM", "sparse-every-other", {"num_hidden_layers": 8, "sparse_attention_config": {
        "use_sparse_attention": True, "sparse_index_dim": 64, "sparse_num_index_heads": 4, "sparse_topk_blocks": 16,
        "sparse_block_size": 128, "sparse_disable_index_value": [0, 1] * 4, "sparse_score_type": "max",
        "sparse_init_block": 0, "sparse_local_block": 1, "sparse_attention_freq": [0, 1] * 4},
        "moe_layer_freq": [0, 1, 1, 1, 1, 1, 1, 1]}),
    # DeepSeek-V4.1: other source layers (an index source at ratio 2) and another window.
    ("DeepseekV41ForCausalLM", "sources-ratio2", {"text_config.compress_ratios": [2, 2, 1, 1, 2, 0, 2, 1],
                                                   "text_config.kv_source_layer_ids": [0, 2, 4, 6],
                                                   "text_config.index_source_layer_ids": [0, 2, 6],
                                                   "text_config.sliding_window": 64}),
    # MiniMax-M3 (VL) without a sparse_attention_config: vLLM 0.33's MiniMaxM3TextConfig applies its default
    # section (layers 3-59 sparse).
    ("MiniMaxM3SparseForConditionalGeneration", "no-section", {"text_config.sparse_attention_config": None}),
    ("InklingForCausalLM", "swa-geometry", {"sliding_window_size": 1024, "swa_num_key_value_heads": 2,
                                            "swa_head_dim": 64, "local_layer_ids": [0, 2, 4, 6, 8, 10, 12, 14]}),
])


# --- Multimodal processor files, config keys and options (issue 21, architecture list "m") ---
# Kimi-K2.5 / K3 preprocessor_config.json: the `media_proc_cfg` their (remote) image processor reads,
# which vLLM's fused Kimi processor (numba) is built from (values as the published checkpoints
# carry them where known, else illustrative; no image is ever processed here).
_KIMI_MEDIA_PROC = {"media_proc_cfg": {
    "in_patch_limit": 16384, "patch_size": 14, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "merge_kernel_size": 2, "fixed_output_tokens": None, "patch_limit_on_one_side": 512,
    "in_patch_limit_each_frame": 4096, "in_patch_limit_video": None, "sample_fps": 2.0,
    "max_num_frames_each_video": None, "temporal_merge_kernel_size": 4, "timestamp_mode": "hh:mm:ss.fff",
    "config_type": "media_proc_cfg"}}
CASE_FILES.update({
    "KimiK25ForConditionalGeneration": {"preprocessor_config.json": _KIMI_MEDIA_PROC},
    "KimiK3ForConditionalGeneration": {"preprocessor_config.json": _KIMI_MEDIA_PROC},
    # dots3-note's model class reads the image placeholder's id from the checkpoint's added_tokens.json
    # (ids illustrative; the default config has no vision_config, so no vision tower is built).
    "Dots3NoteForCausalLM": {"added_tokens.json": {"<|imgpad|>": 129270, "<|audio_comp_pad|>": 129271}},
})
# Architectures vLLM 0.33 lists as no longer supported: its Transformers-backend fallback loads the
# checkpoint's processor before it builds (or refuses) the model; the processor class each published
# checkpoint names (class defaults for the rest).
# The processor loads the tokenizer too: a word-level tokenizer.json with the processor's special tokens
# (the published vocabularies are not needed to build the model).
def _tokenizer_files(*specials: str, **extra: str) -> dict[str, dict]:
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<unk>", "<s>", "</s>", "<pad>", *specials, *extra.values()]
    tok = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(dict.fromkeys(words))}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return {"tokenizer.json": json.loads(tok.to_str()),
            "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>",
                                      "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", **extra,
                                      **({"extra_special_tokens": extra} if extra else {})}}


CASE_FILES.update({
    "AyaVisionForConditionalGeneration": {"preprocessor_config.json": {
        "image_processor_type": "GotOcr2ImageProcessor"}, **_tokenizer_files(
            "<image>", "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>", "TILE",
            "TILE_GLOBAL")},
    "FuyuForCausalLM": {"preprocessor_config.json": {"image_processor_type": "FuyuImageProcessor"},
                        **_tokenizer_files("|SPEAKER|", "|NEWLINE|", "<0x04>", "<image>")},
    "MllamaForConditionalGeneration": {"preprocessor_config.json": {"image_processor_type": "MllamaImageProcessor"},
                                       **_tokenizer_files("<|image|>", "<|begin_of_text|>")},
    "Florence2ForConditionalGeneration": {"preprocessor_config.json": {"image_processor_type": "CLIPImageProcessor"},
                                          **_tokenizer_files(image_token="<image>")},
    "MusicFlamingoForConditionalGeneration": {"preprocessor_config.json": {
        "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 128},
        **_tokenizer_files("<sound>", "<|sound_bos|>", "<|sound_eos|>")},
})
OVERRIDES.update({
    # Aya Vision's SigLIP2-so400m tower as published (the class default's 14 heads do not divide 1152).
    "AyaVisionForConditionalGeneration": {"vision_config.num_attention_heads": 16},
    # Fun-Audio-Chat's discrete speech-token encoder: its codebook and padding id (the config class
    # defaults are None; values illustrative).
    "FunAudioChatForConditionalGeneration": {"audio_config.codebook_size": 6565, "audio_config.pad_token_id": 6561},
    # Voxtral's audio front end (mel filter bank) as vLLM's Mistral-format remap writes it from
    # params.json's audio_encoding_args (Voxtral-Mini-3B-2507: 16 kHz, 25 ms window, 10 ms hop).
    "VoxtralForConditionalGeneration": {"audio_config.downsample_factor": 4, "audio_config.window_size": 400,
                                        "audio_config.sampling_rate": 16000, "audio_config.hop_length": 160},
})
# dots3-note: DeepSeek-V3.2 sparse MLA (indexer) on full layers, a sliding-window MLA of its own geometry
# (swa_* keys) on sliding layers, per `layer_types`. The config class default has none of these keys: the
# keys vLLM's dots3_note model class reads, values illustrative, 61 layers cut to 8.
OVERRIDES["Dots3NoteForCausalLM"] = {
    "num_hidden_layers": 8, "first_k_dense_replace": 1, "n_routed_experts": 8, "num_experts_per_tok": 2,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"] * 2,
    "sliding_window_size": 512, "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64,
    "swa_num_attention_heads": 64, "swa_qk_nope_head_dim": 128, "swa_qk_rope_head_dim": 64, "swa_v_head_dim": 128,
    "swa_q_lora_rank": 1536, "swa_kv_lora_rank": 512, "swa_rope_theta": 10000.0,
    "attention_gate_type": "headwise", "swa_attention_gate_type": "headwise", "apply_mla_qkv_lora_rescale": False}
# Nemotron-H Puzzle (NAS-pruned Nemotron-H): the Nemotron-H layout and keys, plus the per-layer
# `block_configs` its own (remote) config class carries (block type and, for MoE blocks, the expert
# count vLLM's loader reads). The remote class's per-layer config method is remote code the oracle does
# not have: vLLM then reads every layer's attention geometry from the top-level keys, and the
# block_configs written here keep it uniform (values illustrative, 8 layers).
def _nemotron_h_puzzle() -> dict:
    from transformers import NemotronHConfig

    pattern = "M*M-ME*-"
    cfg = NemotronHConfig(num_hidden_layers=len(pattern), hybrid_override_pattern=pattern)
    d = json.loads(json.dumps(cfg.to_dict(), default=lambda o: None))
    d.pop("transformers_version", None)
    d.pop("layers_block_type", None)
    d["hybrid_override_pattern"] = pattern
    kinds = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    d["block_configs"] = [{"block_type": kinds[ch], **({"n_routed_experts": d.get("n_routed_experts") or 8}
                                                       if ch == "E" else {})} for ch in pattern]
    return d


PUBLISHED["NemotronHPuzzleForCausalLM"] = (
    "nemotron_h", "Nemotron-H keys (transformers' NemotronHConfig, 8 layers, hybrid_override_pattern "
    "'M*M-ME*-') plus the Puzzle checkpoints' per-layer block_configs (block types, MoE expert counts; "
    "values illustrative)", _nemotron_h_puzzle())
CASE_OPTIONS.update({"NemotronHPuzzleForCausalLM": {"remote_config": True, "remote_config_base": "nemotron_h"},
                     "CohereAsrForConditionalGeneration": {"remote_config": True}})
_PLAMO3_P2 = ["sliding_attention", "full_attention"] * 4
VARIANTS.extend([
    # dots3-note: sliding rows wider than the full layers' latent (vLLM pads the sparse layers' rows to
    # them), another layer_types pattern, a different window.
    ("Dots3NoteForCausalLM", "wide-swa-rows", {
        "swa_kv_lora_rank": 640, "swa_qk_rope_head_dim": 64, "swa_num_attention_heads": 32, "sliding_window_size": 128,
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                        "sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]}),
    # PLaMo 3 with every other layer full, and with a window of its own per layer.
    ("Plamo3ForCausalLM", "pattern2", {"sliding_window_pattern": 2, "layer_types": _PLAMO3_P2,
                                       "interleaved_sliding_window": [
                                           2048 if t == "sliding_attention" else None for t in _PLAMO3_P2]}),
    ("Plamo3ForCausalLM", "per-layer-windows", {"interleaved_sliding_window": [
        512, 1024, 4096, None, 512, 1024, 4096, None]}),
    # Domyn Edge: windows and head sizes that vary per layer (window 0 = full attention).
    ("DomynEdgeForCausalLM", "mixed-windows", {
        "window_sizes": [[0, 0], [256, 0], [4096, 0], [0, 0], [128, 0], [128, 0], [0, 0], [2048, 0]],
        "position_layers": ["nope", "rope", "rope", "nope", "rope", "rope", "nope", "rope"],
        "per_layer_config": {"0": {"head_dim": 64}, "3": {"head_dim": 256}, "6": {"head_dim": 192}}}),
    # Cohere Transcribe: another decoder geometry (16 heads of 64, 4 layers).
    # (vLLM asserts the encoder has as many heads as the decoder.)
    ("CohereAsrForConditionalGeneration", "decoder-16-heads", {"transf_decoder.config_dict.num_attention_heads": 16,
                                                               "encoder.n_heads": 16,
                                                               "transf_decoder.config_dict.num_layers": 4}),
    # Nemotron-H Puzzle: another block pattern (attention first, two attention blocks).
    ("NemotronHPuzzleForCausalLM", "pattern-2", {
        "hybrid_override_pattern": "*M-M*E-M", "block_configs": [
            {"block_type": t} for t in ("attention", "mamba", "mlp", "mamba", "attention", "moe", "mlp", "mamba")]}),
])
# Voxtral Realtime: the language model's class, as vLLM's Mistral-format remap names it (transformers'
# voxtral_realtime_text config carries none).
OVERRIDES["VoxtralRealtimeGeneration"] = {**OVERRIDES.get("VoxtralRealtimeGeneration", {}),
                                          "text_config.architectures": ["MistralForCausalLM"]}
# Kimi-K3's language model as the Kimi-Linear layout publishes it (MLA (NoPE) every 4th layer, KDA
# linear attention elsewhere; the text config class default has neither MLA nor KDA keys).
OVERRIDES["KimiK3ForConditionalGeneration"] = {f"text_config.{k}": v for k, v in
                                               OVERRIDES["KimiLinearForCausalLM"].items()}
CASE_OPTIONS.update({
    "KimiK3ForConditionalGeneration": {"enable_prefix_caching": True},
    # DiffusionGemma: vLLM runs diffusion models on Model Runner V2 only (V1 refuses them).
    "DiffusionGemmaForBlockDiffusion": {"v2_model_runner": True},
})


# ---- issue-21v block: Mistral-format checkpoints (params.json, read by vLLM's Mistral config parser) ----
# Voxtral Realtime (mistralai/Voxtral-Mini-4B-Realtime-2602) is published in Mistral's format only: vLLM
# builds its config from params.json (adapt_config_dict: a causal Whisper encoder whose KV blocks are
# pooled by the downsample factor) and reads the audio settings of its tekken.json tokenizer at build time.
# Written as configs/<arch>__default/params.json (the oracle's patch 37), the tokenizer as a case file.
def _tekken_json() -> dict:
    """A minimal tekken.json: a byte-level vocabulary, Mistral's special tokens, the audio section."""
    import base64

    specials = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]",
                "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]", "[ARGS]",
                "[CALL_ID]", "[AUDIO]", "[BEGIN_AUDIO]", "[TRANSCRIBE]", "[THINK]", "[/THINK]", "[STREAMING_PAD]",
                "[STREAMING_WORD]", "[NEXT_AUDIO_TEXT]", "[REPEAT_AUDIO_TEXT]"]
    pattern = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
               r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    return {"config": {"pattern": pattern, "num_vocab_tokens": 256, "default_vocab_size": 256 + len(specials),
                       "default_num_special_tokens": len(specials), "version": "v13"},
            "vocab": [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
                      for i in range(256)],
            "special_tokens": [{"rank": i, "token_str": t, "is_control": True} for i, t in enumerate(specials)],
            "audio": {"sampling_rate": 16000, "frame_rate": 12.5, "transcription_format": "streaming",
                      "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400},
                      "transcription_delay_ms": 480, "streaming_look_ahead_ms": 2.5,
                      "streaming_look_back_ms": 52.5, "streaming_n_left_pad_tokens": 32}}


_VOXTRAL_REALTIME_PARAMS = {
    "dim": 3072, "n_layers": 26, "head_dim": 128, "hidden_dim": 9216, "n_heads": 32, "n_kv_heads": 8,
    "rope_theta": 1000000.0, "norm_eps": 1e-05, "vocab_size": 131072, "tied_embeddings": True,
    "max_position_embeddings": 131072, "sliding_window": 8192, "causal": True,
    "ada_rms_norm_t_cond": True, "ada_rms_norm_t_cond_dim": 32,
    "multimodal": {"whisper_model_args": {
        "encoder_args": {
            "audio_encoding_args": {"sampling_rate": 16000, "frame_rate": 12.5, "num_mel_bins": 128,
                                    "hop_length": 160, "window_size": 400, "chunk_length_s": None,
                                    "global_log_mel_max": 1.5, "transcription_format": "streaming"},
            "dim": 1280, "n_layers": 32, "head_dim": 64, "hidden_dim": 5120, "n_heads": 32, "n_kv_heads": 32,
            "vocab_size": 131072, "max_source_positions": None, "norm_eps": 1e-05, "rope_theta": 1000000.0,
            "sliding_window": 750, "causal": True, "pos_embed": "rope", "use_biases": True,
            "ffn_type": "swiglu", "norm_type": "rms_norm"},
        "downsample_args": {"downsample_factor": 4}}},
}
# arch -> (provenance, params.json)
MISTRAL_FORMAT: dict[str, tuple[str, dict]] = {
    "VoxtralRealtimeGeneration": (
        "Mistral-format params.json keys of mistralai/Voxtral-Mini-4B-Realtime-2602 (written from its published "
        "keys, not copied byte for byte: geometry as transformers' VoxtralRealtimeConfig defaults, which mirror "
        "that checkpoint: 26 decoder layers 32/8 heads of 128, window 8192; a causal 32-layer Whisper encoder "
        "of 32 heads of 64, window 750, downsample 4; audio front-end values illustrative) + a minimal tekken.json "
        "(byte vocabulary, Mistral special tokens, streaming audio section; values illustrative)",
        _VOXTRAL_REALTIME_PARAMS),
}
CASE_FILES["VoxtralRealtimeGeneration"] = {"tekken.json": _tekken_json()}
# --kv-cache-dtype fp8 cases with --kv-cache-dtype-skip-layers (config name -> (tag, skip tokens)):
# vLLM numbers Voxtral Realtime's encoder layer j with text layer j, so a layer index skips both.
SKIP_CASES: dict[str, list[tuple[str, list[str]]]] = {
    "VoxtralRealtimeGeneration__default": [("0", ["0"]), ("30", ["30"]), ("sliding", ["sliding_window"])],
}
_VOXTRAL_ENC = "multimodal.whisper_model_args.encoder_args."
VARIANTS.append(
    # A causal encoder shallower than the decoder (every encoder cache beside a decoder layer), 16 heads,
    # blocks pooled by 2, another window.
    ("VoxtralRealtimeGeneration", "encoder-16-pool-2", {
        _VOXTRAL_ENC + "n_layers": 16, _VOXTRAL_ENC + "n_heads": 16, _VOXTRAL_ENC + "n_kv_heads": 16,
        _VOXTRAL_ENC + "sliding_window": 300, "multimodal.whisper_model_args.downsample_args.downsample_factor": 2}))


def _config_path(name: str) -> str:
    """Where a case's config is written: a Mistral-format one as <name>/params.json."""
    return f"configs/{name}/params.json" if name.split("__")[0] in MISTRAL_FORMAT else f"configs/{name}.json"


def _apply(d: dict, over: dict) -> dict:
    """Overrides; a dotted key ("audio_config.downsample_factor") sets a nested key."""
    d = copy.deepcopy(d)
    for k, v in over.items():
        tgt = d
        *path, k = k.split(".")
        for part in path:
            if not isinstance(tgt.get(part), dict):
                tgt[part] = {}
            tgt = tgt[part]
        if v is None:
            tgt.pop(k, None)
        else:
            tgt[k] = v
    return d


def _vllm_config_class(mt: str):
    """The config class vLLM ships for a model_type (its registry names them lazily)."""
    import importlib

    from vllm.transformers_utils import config as vcfg

    cls = vcfg._CONFIG_REGISTRY.get(mt)
    if isinstance(cls, str):
        try:
            cls = getattr(importlib.import_module("vllm.transformers_utils.configs"), cls)
        except Exception:
            return None
    return cls


def _jsonable(d):
    return json.loads(json.dumps(d, default=lambda o: None))


def _default_config(arch: str, entry: dict) -> tuple[dict | None, str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if arch in MISTRAL_FORMAT:  # issue-21v: read by vLLM's Mistral config parser
        return copy.deepcopy(MISTRAL_FORMAT[arch][1]), f"published keys: {MISTRAL_FORMAT[arch][0]}"
    types = list(entry.get("transformers_model_types") or [])
    if CASE_OPTIONS.get(arch, {}).get("remote_config") and arch in PUBLISHED:
        types = []  # its own config class: the published keys below, not a transformers class
    if entry.get("category") == "text":  # a text architecture's config is its text config class
        types.sort(key=lambda t: not t.endswith("_text"))
    if arch in VLLM_CONFIG_TYPES:
        types = [VLLM_CONFIG_TYPES[arch], *types]
    if arch in VLLM_CONFIG_CLASSES:
        import importlib

        shipped = getattr(importlib.import_module("vllm.transformers_utils.configs"), VLLM_CONFIG_CLASSES[arch])
        types = [f"class:{VLLM_CONFIG_CLASSES[arch]}", *types]
    for mt in types:
        cls = shipped if mt.startswith("class:") else _vllm_config_class(mt)
        mt = getattr(cls, "model_type", mt) if mt.startswith("class:") else mt
        source = f"vLLM config class {getattr(cls, '__name__', cls)} ({mt})"
        if cls is None:
            cls = CONFIG_MAPPING[mt] if mt in CONFIG_MAPPING else None  # noqa: SIM401 (lazy mapping: .get skips loading)
            source = f"transformers config class {getattr(cls, '__name__', '?')} ({mt})"
        if cls is None:
            continue
        try:
            d = _jsonable(cls().to_dict())
        except Exception as e:
            print(f"  {arch}: {mt} default config failed: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        d["model_type"] = d.get("model_type") or mt
        d["architectures"] = [arch]
        for old, new in KEY_RENAMES.get(arch, {}).items():
            if old in d:
                d[new] = d.pop(old)
                source += f" with {old} written as {new} (the published key)"
        if arch in OVERRIDES_LAZY:  # built with transformers (imported only by this script's run)
            OVERRIDES[arch] = OVERRIDES_LAZY[arch]()
        if arch in OVERRIDES:
            d = _apply(d, OVERRIDES[arch])
            source += f" + published keys {sorted(OVERRIDES[arch])}"
            if arch in OVERRIDE_PROVENANCE:
                source += f" ({OVERRIDE_PROVENANCE[arch]})"
        d.pop("transformers_version", None)
        return d, source
    if arch in INTERNVL_FAMILY:
        from transformers import Qwen2Config

        llm = _jsonable(Qwen2Config(num_hidden_layers=8).to_dict())
        llm.pop("transformers_version", None)
        llm["architectures"] = ["Qwen2ForCausalLM"]
        d = {"architectures": [arch], "model_type": INTERNVL_FAMILY[arch], "llm_config": llm,
             "vision_config": dict(_INTERN_VIT), "select_layer": -1, "downsample_ratio": 0.5,
             "template": "internvl2_5", "force_image_size": 448, "ps_version": "v2",
             "dynamic_image_size": True, "use_thumbnail": True, "max_dynamic_patch": 12,
             "min_dynamic_patch": 1, "torch_dtype": "bfloat16"}
        return d, "published keys of the InternVL-style remote config (llm_config: Qwen2, 8 layers)"
    if arch in PUBLISHED:
        mt, source, published = PUBLISHED[arch]
        d = copy.deepcopy(published)
        d["model_type"], d["architectures"] = mt, [arch]
        return d, f"published keys: {source} (scripts/oracle/published_configs.py)"
    if arch in REMOTE:
        mt, extra = REMOTE[arch]
        d = dict(_LLAMA_BASE, **extra, model_type=mt, architectures=[arch])
        return d, f"published keys of the remote-code config ({mt})"
    return None, "no config class without network (remote code not written out)"


def main() -> int:
    reg = json.loads(REG.read_text())
    (DATA / "configs").mkdir(parents=True, exist_ok=True)
    cases, sources, skipped = [], {}, {}
    configs: dict[str, dict] = {}
    for arch, entry in reg["architectures"].items():
        d, source = _default_config(arch, entry)
        if d is None:
            skipped[arch] = source
            continue
        configs[f"{arch}__default"] = d
        sources[f"{arch}__default"] = source
    # Architectures vLLM lists as no longer supported / moved to a plugin: does vLLM 0.33 refuse
    # them, or run them through its Transformers backend? The oracle answers (auto flags only).
    refused_cases = set()
    for arch, entry in reg["refused"].items():
        d, source = _default_config(arch, entry)
        if d is not None:
            configs[f"{arch}__default"] = d
            sources[f"{arch}__default"] = source
            refused_cases.add(f"{arch}__default")
    # The repository's corpus of real configs (tests/data/corpus), quantization_config removed
    # (the CPU oracle cannot build FP8/NVFP4 weight layers; the dtype decisions those configs
    # imply are checked by tests/planner/test_vllm_parity.py): real-world spellings of each key.
    for cfg_path in sorted((ROOT / "tests" / "data" / "corpus").glob("*/config.json")):
        d = json.loads(cfg_path.read_text())
        d.pop("quantization_config", None)
        d.pop("auto_map", None)  # remote code is not here; vLLM / transformers ship the config class
        if isinstance(d.get("text_config"), dict):
            d["text_config"].pop("quantization_config", None)
        archs = d.get("architectures") or []
        if not archs:
            continue
        name = f"{archs[0]}__corpus-{cfg_path.parent.name}"
        configs[name] = d
        if isinstance(d.get("hybrid_override_pattern"), str):
            # The newer spelling of the same layer map (what transformers writes out now).
            v = {k: x for k, x in d.items() if k != "hybrid_override_pattern"}
            v["layers_block_type"] = [{"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}[ch]
                                      for ch in d["hybrid_override_pattern"]]
            configs[name + "-layers_block_type"] = v
            sources[name + "-layers_block_type"] = (f"tests/data/corpus/{cfg_path.parent.name}/config.json, "
                                                    "hybrid_override_pattern written as layers_block_type")
        sources[name] = (f"tests/data/corpus/{cfg_path.parent.name}/config.json without "
                         "quantization_config and auto_map")
    for arch, variant, over in VARIANTS:
        base = configs.get(f"{arch}__default")
        if base is None:
            continue
        configs[f"{arch}__{variant}"] = _apply(base, over)
        sources[f"{arch}__{variant}"] = sources[f"{arch}__default"] + f"; variant {over}"
    for name, d in sorted(configs.items()):
        (DATA / _config_path(name)).parent.mkdir(parents=True, exist_ok=True)
        (DATA / _config_path(name)).write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")
        for flag in (("auto",) if name in refused_cases else ("auto", "fp8")):
            cases.append({"name": f"{name}__{flag}", "config": _config_path(name),
                          "kv_cache_dtype": flag, **CASE_OPTIONS.get(name.split("__")[0], {}),
                          **({"files": CASE_FILES[a]} if (a := name.split("__")[0]) in CASE_FILES else {})})
        for tag, skip in SKIP_CASES.get(name, ()):
            cases.append({"name": f"{name}__fp8-skip-{tag}", "config": _config_path(name), "kv_cache_dtype": "fp8",
                          "skip_layers": skip, **CASE_OPTIONS.get(name.split("__")[0], {}),
                          **({"files": CASE_FILES[a]} if (a := name.split("__")[0]) in CASE_FILES else {})})
    doc = {"kind": "kvplan.vllm_oracle_cases", "vllm_version": reg["vllm_version"],
           "generated_by": "scripts/oracle/make_arch_cases.py", "config_sources": sources,
           "no_config": skipped, "cases": cases}
    (DATA / "cases.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{len(configs)} configs, {len(cases)} cases, {len(skipped)} architectures without a config",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
