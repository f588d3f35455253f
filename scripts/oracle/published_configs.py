"""Remote-code architectures: config.json files written out from their published keys.

Each entry is (model_type, provenance, config): the keys and values of the named published
checkpoint's config.json that vLLM's model class reads (geometry as published; where a stack is
long, the layer count is cut to 8 with the published per-layer keys kept in their pattern, and
the provenance says so). make_arch_cases.py writes them out as `<arch>__default` configs;
the oracle registers a config class for a model_type transformers does not know (arch_oracle.py).

How exact they are: no machine here reaches the Hub, so most entries were written out from the
published checkpoints' keys as documented (model cards, vLLM's model classes) rather than copied
byte for byte; an entry whose values are illustrative says so in its provenance. That is enough
for what they are used for: each is a config vLLM's own model class builds, and the parity test
checks kvplan against vLLM's answer for that same config, whatever its values.
"""
from __future__ import annotations

from typing import Any


def _qwen2(layers: int = 8, **kw: Any) -> dict[str, Any]:
    d = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
         "intermediate_size": 18944, "num_hidden_layers": layers, "num_attention_heads": 28,
         "num_key_value_heads": 4, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
         "rope_theta": 1000000.0, "vocab_size": 152064, "hidden_act": "silu", "tie_word_embeddings": False,
         "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": 28,
         "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645}
    d.update(kw)
    return d


def _qwen3(layers: int = 8, **kw: Any) -> dict[str, Any]:
    d = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
         "intermediate_size": 12288, "num_hidden_layers": layers, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
         "rope_theta": 1000000.0, "vocab_size": 151936, "hidden_act": "silu", "tie_word_embeddings": False,
         "attention_bias": False, "use_sliding_window": False, "sliding_window": None,
         "max_window_layers": 36, "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645}
    d.update(kw)
    return d


_SIGLIP = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
           "num_attention_heads": 16, "num_hidden_layers": 4, "image_size": 448, "patch_size": 14,
           "num_channels": 3, "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6}

# Llama-3.3-Nemotron-Super-49B style NAS blocks: GQA groups vary per layer, some attention
# blocks are removed (no_op) or replaced by a linear layer.
_NAS_BLOCKS = [
    {"attention": {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False, "sparsify": None},
     "ffn": {"ffn_mult": 5.25, "no_op": False, "replace_with_linear": False, "sparsify": None}},
    {"attention": {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False, "sparsify": None},
     "ffn": {"ffn_mult": 5.25, "no_op": False, "replace_with_linear": False, "sparsify": None}},
    {"attention": {"n_heads_in_group": None, "no_op": True, "replace_with_linear": False, "sparsify": None},
     "ffn": {"ffn_mult": 2.625, "no_op": False, "replace_with_linear": False, "sparsify": None}},
    {"attention": {"n_heads_in_group": 16, "no_op": False, "replace_with_linear": False, "sparsify": None},
     "ffn": {"ffn_mult": 5.25, "no_op": False, "replace_with_linear": False, "sparsify": None}},
    {"attention": {"n_heads_in_group": None, "no_op": True, "replace_with_linear": False, "sparsify": None},
     "ffn": {"ffn_mult": 1.3125, "no_op": False, "replace_with_linear": False, "sparsify": None}},
    {"attention": {"n_heads_in_group": 32, "no_op": False, "replace_with_linear": False, "sparsify": None},
     "ffn": {"ffn_mult": 5.25, "no_op": False, "replace_with_linear": False, "sparsify": None}},
    {"attention": {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False, "sparsify": None},
     "ffn": {"ffn_mult": None, "no_op": True, "replace_with_linear": False, "sparsify": None}},
    {"attention": {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False, "sparsify": None},
     "ffn": {"ffn_mult": 5.25, "no_op": False, "replace_with_linear": False, "sparsify": None}},
]

PUBLISHED: dict[str, tuple[str, str, dict[str, Any]]] = {
    "Step1ForCausalLM": ("step1", "stepfun-ai Step-Audio-EditX config.json keys (Step1 LM: 48 heads, "
                         "num_attention_groups 4, hidden 3072, 32 layers)", {
        "hidden_size": 3072, "intermediate_size": 8192, "num_attention_heads": 48, "num_attention_groups": 4,
        "num_hidden_layers": 32, "vocab_size": 74752, "rms_norm_eps": 1e-5, "bos_token_id": 1,
        "pad_token_id": 0, "eos_token_id": 3, "tie_word_embeddings": False, "use_cache": True,
        "max_seq_len": 32768, "torch_dtype": "bfloat16"}),
    "DeciLMForCausalLM": ("nemotron-nas", "nvidia/Llama-3_3-Nemotron-Super-49B-v1 config.json keys "
                          "(block_configs: 8 of its per-layer NAS blocks, kinds as published: GQA groups "
                          "8/16/32, no_op attention, no_op FFN)", {
        "hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 8, "vocab_size": 128256,
        "rms_norm_eps": 1e-5, "hidden_act": "silu", "max_position_embeddings": 131072,
        "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0,
                                                 "low_freq_factor": 1.0,
                                                 "original_max_position_embeddings": 8192,
                                                 "rope_type": "llama3"},
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
        "position_embedding_type": "rope", "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
        "torch_dtype": "bfloat16", "block_configs": _NAS_BLOCKS}),
    "Eagle2_5_VLForConditionalGeneration": ("eagle_2_5_vl", "nvidia/Eagle2.5-8B config.json keys "
                                            "(text_config Qwen2.5-7B cut to 8 layers, SigLIP vision)", {
        "text_config": _qwen2(8), "vision_config": dict(_SIGLIP), "downsample_ratio": 0.5,
        "dynamic_image_size": True, "force_image_size": 448, "max_dynamic_patch": 12, "min_dynamic_patch": 1,
        "use_thumbnail": True, "select_layer": -1, "template": "qwen2-chat", "mlp_connector_layers": 2,
        "use_pixel_shuffle": True, "image_token_index": 151667, "torch_dtype": "bfloat16"}),
    "LightOnOCRForConditionalGeneration": ("lighton_ocr", "lightonai/LightOnOCR-2-1B config.json keys "
                                           "(text_config Qwen3 1024/28 layers cut to 8, Pixtral vision)", {
        "text_config": _qwen3(8, hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
                              num_key_value_heads=8, tie_word_embeddings=True),
        "vision_config": {"model_type": "pixtral", "hidden_size": 1024, "intermediate_size": 4096,
                          "num_attention_heads": 16, "num_hidden_layers": 4, "patch_size": 14,
                          "image_size": 1540, "num_channels": 3, "head_dim": 64, "hidden_act": "silu",
                          "rope_theta": 10000.0},
        "spatial_merge_size": 2, "image_token_index": 151655, "projector_hidden_act": "gelu",
        "multimodal_projector_bias": False, "vision_feature_layer": -1, "torch_dtype": "bfloat16"}),
    "OpenCUAForConditionalGeneration": ("opencua", "xlangai/OpenCUA-7B config.json keys (text_config "
                                        "Qwen2.5-7B cut to 8 layers, Qwen2.5-VL vision)", {
        "text_config": _qwen2(8), "vision_config": {"model_type": "qwen2_5_vl_vision", "depth": 4, "hidden_size": 1280,
                                                    "out_hidden_size": 3584, "intermediate_size": 3420,
                                                    "num_heads": 16, "patch_size": 14, "spatial_merge_size": 2,
                                                    "temporal_patch_size": 2, "window_size": 112,
                                                    "fullatt_block_indexes": [1, 3], "hidden_act": "silu",
                                                    "in_chans": 3, "tokens_per_second": 2},
        "media_placeholder_token_id": 151664, "torch_dtype": "bfloat16"}),
    "InternS1ForConditionalGeneration": ("interns1", "internlm/Intern-S1-mini config.json keys (text_config "
                                         "Qwen3-8B cut to 8 layers, InternViT vision)", {
        "text_config": _qwen3(8), "vision_config": {
            "model_type": "internvl_vision", "hidden_size": 1024, "intermediate_size": 4096,
            "num_attention_heads": 16, "num_hidden_layers": 4, "image_size": [448, 448], "patch_size": [14, 14],
            "num_channels": 3, "hidden_act": "gelu", "layer_norm_eps": 1e-6, "norm_type": "layer_norm",
            "attention_bias": True, "use_qk_norm": False, "use_mean_pooling": True, "layer_scale_init_value": 0.1,
            "projection_dropout": 0.0, "attention_dropout": 0.0, "drop_path_rate": 0.0,
            "use_absolute_position_embeddings": True},
        "downsample_ratio": 0.5, "projector_hidden_act": "gelu", "vision_feature_layer": -1,
        "vision_feature_select_strategy": "default", "image_token_id": 152957, "image_seq_length": 256,
        "torch_dtype": "bfloat16"}),
}


def _llama(layers: int = 8, **kw: Any) -> dict[str, Any]:
    d = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 14336, "num_hidden_layers": layers, "num_attention_heads": 32,
         "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
         "rope_theta": 500000.0, "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": False,
         "attention_bias": False, "mlp_bias": False, "torch_dtype": "bfloat16", "bos_token_id": 128000,
         "eos_token_id": 128009}
    d.update(kw)
    return d


PUBLISHED.update({
    "Phi3VForCausalLM": ("phi3_v", "microsoft/Phi-3-vision-128k-instruct config.json keys (its long-context "
                         "rope_scaling factor lists left out)", {
        "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "embd_pdrop": 0.0,
        "embd_layer": {"embedding_cls": "image", "hd_transform_order": "sub_glb", "projection_cls": "mlp",
                       "use_hd_transform": True, "with_learnable_separator": True},
        "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
        "img_processor": {"image_dim_out": 1024, "model_name": "openai/clip-vit-large-patch14-336",
                          "name": "clip_vision_model", "num_img_tokens": 144},
        "intermediate_size": 8192, "max_position_embeddings": 131072, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "sliding_window": 131072, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32064}),
    "GLM4VForCausalLM": ("chatglm", "THUDM/glm-4v-9b config.json keys (vision tower cut to 4 layers)", {
        "add_bias_linear": False, "add_qkv_bias": True, "apply_query_key_layer_scaling": True,
        "apply_residual_connection_post_layernorm": False, "attention_dropout": 0.0, "attention_softmax_in_fp32": True,
        "bias_dropout_fusion": True, "boi_token_id": 151339, "eoi_token_id": 151340,
        "eos_token_id": [151329, 151336, 151338], "ffn_hidden_size": 13696, "fp32_residual_connection": False,
        "hidden_dropout": 0.0, "hidden_size": 4096, "kv_channels": 128, "layernorm_epsilon": 1.5625e-07,
        "multi_query_attention": True, "multi_query_group_num": 2, "num_attention_heads": 32, "num_layers": 40,
        "original_rope": True, "pad_token_id": 151329, "padded_vocab_size": 151552, "post_layer_norm": True,
        "rmsnorm": True, "rope_ratio": 1, "seq_length": 8192, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vision_config": {
            "dropout_prob": 0.0, "hidden_act": "gelu", "in_channels": 3, "num_hidden_layers": 4,
            "hidden_size": 1792, "patch_size": 14, "num_heads": 16, "intermediate_size": 15360,
            "layer_norm_eps": 1e-06, "num_positions": 6401, "image_size": 1120, "scaling_factor": 8}}),
    "MolmoForCausalLM": ("molmo", "allenai/Molmo-7B-D-0924 config.json keys", {
        "attention_layer_norm": False, "clip_qkv": None, "embedding_size": 152064, "hidden_size": 3584,
        "initializer_range": 0.02, "intermediate_size": 37888, "layer_norm_eps": 1e-06,
        "layer_norm_type": "rms", "max_position_embeddings": 4096, "norm_after": False,
        "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4, "qkv_bias": True,
        "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "float32",
        "use_cache": True, "use_position_ids": True, "vocab_size": 152064, "weight_tying": False}),
    "Llama_Nemotron_Nano_VL": ("Llama_Nemotron_Nano_VL", "nvidia/Llama-3.1-Nemotron-Nano-VL-8B-V1 config.json "
                               "keys (llm_config Llama-3.1-8B cut to 8 layers, RADIO vision defaults)", {
        "llm_config": _llama(8), "vision_config": {"model_type": "radio"}, "downsample_ratio": 0.5,
        "force_image_size": 512, "patch_size": 16, "projector_hidden_size": 4096, "vit_hidden_size": 1280,
        "ps_version": "v2", "template": "llama3", "select_layer": -1, "image_tag_type": "internvl",
        "img_context_token_id": 128258, "torch_dtype": "bfloat16"}),
    "K2HorizonForCausalLM": ("k2_horizon", "keys vLLM's K2-Horizon model class reads (values illustrative, 8 "
                             "layers; dense attention, mova_num_experts 0)", {
        "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 8, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "rope_head_dim": 64, "rope_theta": 10000.0,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "vocab_size": 32000, "hidden_act": "silu",
        "attention_bias": False, "attention_gate_func": None, "query_key_norm": True, "layernorm_num_groups": 1,
        "decoder_sparse_step": 1, "mlp_only_layers": [0], "num_experts": 8, "num_experts_per_tok": 2,
        "moe_intermediate_size": 1408, "num_shared_experts": 1, "norm_topk_prob": True, "moe_gate_bias": False,
        "router_score_func": "softmax", "router_scaling_factor": 1.0, "mova_num_experts": 0,
        "mova_num_experts_per_tok": 0, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}),
})


# Ovis2.5 / 2.6: a SigLIP2-NaViT visual tokenizer (vit_config) and a Qwen3 language model (llm_config,
# which vLLM reads as text_config). Keys: those vLLM's ovis2_5.py / siglip2navit.py read.
_OVIS25_VIT = {"model_type": "siglip2_navit", "hidden_size": 1152, "intermediate_size": 4304,
               "num_attention_heads": 16, "num_hidden_layers": 4, "num_channels": 3, "patch_size": 16,
               "image_size": 512, "num_patches": -1, "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
               "attention_dropout": 0.0, "hidden_stride": 2, "temporal_patch_size": 1, "window_size": 112,
               "fullatt_block_indexes": None, "use_rope": False, "preserve_original_pe": True}


def _qwen3_moe(layers: int = 8, **kw: Any) -> dict[str, Any]:
    d = _qwen3(layers, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", hidden_size=2048,
               intermediate_size=6144, num_attention_heads=32, num_key_value_heads=4, num_experts=128,
               num_experts_per_tok=8, moe_intermediate_size=768, decoder_sparse_step=1, mlp_only_layers=[],
               norm_topk_prob=True)
    d.update(kw)
    return d


PUBLISHED.update({
    "Ovis2_5": ("ovis2_5", "AIDC-AI/Ovis2.5-9B config.json keys (llm_config Qwen3-8B cut to 8 layers, "
                "vit_config SigLIP2-NaViT cut to 4 layers; vision values illustrative where the card is silent)", {
        "llm_config": _qwen3(8), "vit_config": dict(_OVIS25_VIT), "visual_vocab_size": 65536,
        "hidden_size": 4096, "conversation_formatter_class": "Qwen3ConversationFormatter",
        "torch_dtype": "bfloat16"}),
    "Ovis2_6ForCausalLM": ("ovis2_6", "AIDC-AI/Ovis2.6 config.json keys as vLLM's ovis2_5.py reads them "
                           "(llm_config Qwen3 dense cut to 8 layers, SigLIP2-NaViT vit_config cut to 4 "
                           "layers; values illustrative)", {
        "llm_config": _qwen3(8), "vit_config": dict(_OVIS25_VIT), "visual_vocab_size": 65536,
        "hidden_size": 4096, "torch_dtype": "bfloat16"}),
    "Ovis2_6_MoeForCausalLM": ("ovis2_6_moe", "AIDC-AI/Ovis2.6 MoE config.json keys as vLLM's ovis2_5.py "
                               "reads them (llm_config Qwen3-30B-A3B-style MoE cut to 8 layers, "
                               "SigLIP2-NaViT vit_config cut to 4 layers; values illustrative)", {
        "llm_config": _qwen3_moe(8), "vit_config": dict(_OVIS25_VIT), "visual_vocab_size": 65536,
        "hidden_size": 2048, "torch_dtype": "bfloat16"}),
})


PUBLISHED.update({
    "Molmo2ForConditionalGeneration": ("molmo2", "allenai/Molmo2-8B config.json keys of its own (remote) "
                                       "config class: text_config Qwen3-8B-style cut to 8 layers, "
                                       "vit_config SigLIP2 so400m, adapter_config; token ids as published "
                                       "where known, else illustrative", {
        "text_config": {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                        "vocab_size": 151936, "additional_vocab_size": 128, "qkv_bias": False,
                        "num_hidden_layers": 8, "intermediate_size": 12288, "hidden_act": "silu",
                        "max_position_embeddings": 36864, "rope_theta": 1000000.0, "use_qk_norm": True,
                        "qk_norm_type": "qwen3", "layer_norm_eps": 1e-6, "norm_after": False,
                        "rope_scaling_layers": None, "rope_scaling": None, "tie_word_embeddings": False},
        "vit_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                       "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72,
                       "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
                       "image_default_input_size": [378, 378], "image_patch_size": 14, "image_num_pos": 729},
        "adapter_config": {"vit_layers": [-3, -9], "pooling_attention_mask": True, "hidden_size": 1152,
                           "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72,
                           "hidden_act": "silu", "intermediate_size": 12288, "text_hidden_size": 4096},
        "image_start_token_id": 151936, "image_end_token_id": 151937, "image_patch_id": 151938,
        "image_col_id": 151939, "low_res_image_start_token_id": 151940, "image_low_res_id": 151942,
        "frame_start_token_id": 151943, "frame_end_token_id": 151944, "use_frame_special_tokens": True,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"}),
})


# MiniCPM-V 2.6: the language model's keys (Qwen2-7B) flat at the top level, a SigLIP vision tower
# (published as model_type "siglip"; its remote config class builds a SiglipVisionConfig from it).
_MINICPMV_VISION = {"model_type": "siglip_vision_model", "hidden_size": 1152, "image_size": 980,
                    "intermediate_size": 4304, "num_attention_heads": 16, "num_hidden_layers": 4, "patch_size": 14}
PUBLISHED.update({
    "MiniCPMV": ("minicpmv", "openbmb/MiniCPM-V-2_6 config.json keys (Qwen2-7B language model cut to 8 "
                 "layers, SigLIP vision tower cut to 4 layers)", {
        **{k: v for k, v in _qwen2(8).items() if k not in ("architectures", "model_type")},
        "version": 2.6, "query_num": 64, "batch_vision_input": True, "drop_vision_last_layer": False,
        "image_size": 448, "patch_size": 14, "slice_mode": True, "use_image_id": True,
        "slice_config": {"max_slice_nums": 9, "patch_size": 14, "model_type": "minicpmv"},
        "vision_config": dict(_MINICPMV_VISION)}),
})


PUBLISHED.update({
    "Ernie4_5_VLMoeForConditionalGeneration": (
        "ernie4_5_moe_vl", "baidu/ERNIE-4.5-VL-28B-A3B-PT config.json keys of its own (remote) config class "
        "(text keys flat at the top level, 28 layers cut to 8 with the MoE layer range cut to match; "
        "vision tower cut to 4 layers)", {
            "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 8, "num_attention_heads": 20,
            "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 103424, "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "hidden_act": "silu", "use_bias": False,
            "tie_word_embeddings": True, "moe_num_experts": [64, 64], "moe_k": 6,
            "moe_intermediate_size": [1536, 512], "moe_num_shared_experts": 2, "moe_layer_start_index": [1, 1],
            "moe_layer_end_index": [7, 7], "moe_layer_interval": 1, "moe_gate": "topk",
            "pixel_hidden_size": 1280, "spatial_conv_size": 2, "temporal_conv_size": 2, "use_temporal_conv": True,
            "im_patch_id": 100295, "rope_3d": True, "freq_allocation": 20, "torch_dtype": "bfloat16",
            "vision_config": {"depth": 4, "embed_dim": 1280, "hidden_size": 1280, "hidden_act": "quick_gelu",
                              "mlp_ratio": 4, "num_heads": 16, "in_channels": 3, "patch_size": 14,
                              "spatial_merge_size": 2}}),
})


PUBLISHED.update({
    "LlavaOnevision2ForConditionalGeneration": (
        "llava_onevision2", "LLaVA-OneVision-2 config.json keys as vLLM's llava_onevision2.py reads them "
        "(text_config Qwen3-8B cut to 8 layers; vision tower keys with illustrative values, 4 layers)", {
            "text_config": _qwen3(8),
            "vision_config": {"model_type": "llava_onevision2_vision", "hidden_size": 1024,
                              "intermediate_size": 4096, "num_attention_heads": 16, "num_hidden_layers": 4,
                              "patch_size": 14, "spatial_merge_size": 2},
            "image_token_id": 151655, "video_token_id": 151656, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16"}),
})


# Kwai Keye-VL: the Qwen3-8B language model's keys flat at the top level (vLLM builds it as
# Qwen3ForCausalLM from the same config), a SigLIP vision tower with a spatial merge.
_KEYE_VISION = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                "num_attention_heads": 16, "num_hidden_layers": 4, "patch_size": 14, "image_size": 384,
                "num_channels": 3, "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
                "spatial_merge_size": 2}
_KEYE_LM = {k: v for k, v in _qwen3(8).items() if k not in ("architectures", "model_type")}
_KEYE_LM["rope_scaling"] = {"type": "default", "rope_type": "default", "mrope_section": [16, 24, 24]}
PUBLISHED.update({
    "KeyeForConditionalGeneration": ("Keye", "Kwai-Keye/Keye-VL-8B-Preview config.json keys (Qwen3-8B "
                                     "language model flat, cut to 8 layers; SigLIP vision cut to 4 layers; "
                                     "token ids as published where known)", {
        **_KEYE_LM, "vision_config": dict(_KEYE_VISION), "image_token_id": 151655, "video_token_id": 151656,
        "vision_start_token_id": 151652}),
    "KeyeVL1_5ForConditionalGeneration": ("KeyeVL1_5", "Kwai-Keye/Keye-VL-1_5-8B config.json keys (Qwen3-8B "
                                          "language model flat, cut to 8 layers; SigLIP vision cut to 4 "
                                          "layers; values illustrative where the card is silent)", {
        **_KEYE_LM, "vision_config": dict(_KEYE_VISION), "image_token_id": 151655, "video_token_id": 151656,
        "vision_start_token_id": 151652}),
})


PUBLISHED.update({
    "MiniCPMO": ("minicpmo", "openbmb/MiniCPM-o-2_6 config.json keys (Qwen2.5-7B language model flat, cut to 8 "
                 "layers; SigLIP vision cut to 4 layers; Whisper-medium audio encoder cut to 4 layers; TTS "
                 "keys left out)", {
        **{k: v for k, v in _qwen2(8).items() if k not in ("architectures", "model_type")},
        "version": 2.6, "query_num": 64, "batch_vision_input": True, "drop_vision_last_layer": False,
        "image_size": 448, "patch_size": 14, "slice_mode": True, "use_image_id": True,
        "slice_config": {"max_slice_nums": 9, "patch_size": 14, "model_type": "minicpmv"},
        "vision_config": dict(_MINICPMV_VISION), "init_vision": True, "init_audio": True, "init_tts": False,
        "audio_pool_step": 2, "audio_chunk_length": 1.0,
        "audio_config": {"model_type": "whisper", "d_model": 1024, "encoder_layers": 4,
                         "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "decoder_layers": 4,
                         "decoder_attention_heads": 16, "decoder_ffn_dim": 4096, "num_mel_bins": 80,
                         "max_source_positions": 1500, "activation_function": "gelu", "dropout": 0.0,
                         "attention_dropout": 0.0, "activation_dropout": 0.0}}),
})


# ---- issue-21n block: multimodal remote-code architectures written out from their published keys ----
_SIGLIP_384 = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
               "num_attention_heads": 16, "num_hidden_layers": 4, "image_size": 384, "patch_size": 14,
               "num_channels": 3, "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6}
_ANYRES_PINPOINTS = [[384, 384], [384, 768], [768, 384], [768, 768], [384, 1152], [1152, 384]]


def _llava_onevision_like(text: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """A LLaVA-OneVision style config (Bee, R-VL): text_config + SigLIP vision_config."""
    d = {"text_config": text, "vision_config": dict(_SIGLIP_384), "image_grid_pinpoints": _ANYRES_PINPOINTS,
         "vision_aspect_ratio": "anyres_max_9", "vision_feature_layer": -1,
         "vision_feature_select_strategy": "full", "image_token_index": 151669, "video_token_index": 151670,
         "projector_hidden_act": "gelu", "multimodal_projector_bias": True, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16"}
    d.update(kw)
    return d


# Pixtral (Mistral format): vLLM converts the checkpoint's params.json into this layout
# (vllm/transformers_utils/configs/mistral.py: text_config with the HF names of the Mistral keys,
# vision_config = the params.json `vision_encoder` block, model_type pixtral).
_PIXTRAL_TEXT = {"architectures": ["MistralForCausalLM"], "model_type": "transformer", "hidden_size": 5120,
                 "num_hidden_layers": 8, "head_dim": 128, "intermediate_size": 14336, "num_attention_heads": 32,
                 "num_key_value_heads": 8, "rope_theta": 1000000000.0, "rms_norm_eps": 1e-5, "vocab_size": 131072,
                 "hidden_act": "silu", "tie_word_embeddings": False, "max_seq_len": 128000,
                 "max_position_embeddings": 128000, "torch_dtype": "bfloat16"}
_PIXTRAL_VISION = {"hidden_size": 1024, "num_channels": 3, "image_size": 1024, "patch_size": 16,
                   "rope_theta": 10000.0, "intermediate_size": 4096, "num_hidden_layers": 4,
                   "num_attention_heads": 16, "image_token_id": 10, "image_break_token_id": 12,
                   "image_end_token_id": 13, "adapter_bias": True}

_RADIO_ENCODER = {"model_type": "radio", "patch_size": 16, "max_resolution": 2048,
                  "args": {"model": "vit_huge_patch16_224", "cpe_max_size": 2048, "register_multiple": 8,
                           "cls_token_per_teacher": True, "teachers": [{"name": "a"}, {"name": "b"},
                                                                        {"name": "c"}]}}
_MBART_DECODER = {"model_type": "mbart", "d_model": 1024, "decoder_layers": 10, "decoder_attention_heads": 16,
                  "decoder_ffn_dim": 4096, "encoder_ffn_dim": 4096, "encoder_layers": 0, "encoder_attention_heads": 16,
                  "vocab_size": 52352, "activation_function": "gelu", "scale_embedding": False,
                  "max_position_embeddings": 9000, "is_decoder": True, "add_cross_attention": True,
                  "tie_word_embeddings": False}

PUBLISHED.update({
    "PixtralForConditionalGeneration": (
        "pixtral", "mistralai/Pixtral-12B-2409 params.json keys as vLLM's Mistral-format loader converts them "
        "(text_config Mistral-NeMo-12B geometry cut to 8 layers; vision_encoder cut to 4 layers)", {
            "text_config": dict(_PIXTRAL_TEXT), "vision_config": dict(_PIXTRAL_VISION), "torch_dtype": "bfloat16"}),
    "Phi4ForCausalLMV": (
        "phi4_siglip", "microsoft/Phi-4-reasoning-vision-15B keys as vLLM's phi4siglip.py reads them: Phi-4 "
        "language model keys flat (40 layers cut to 8), SigLIP2-NaFlex vision_config cut to 4 layers, "
        "mm_hidden_size; model_type name illustrative", {
            "hidden_size": 5120, "intermediate_size": 17920, "num_hidden_layers": 8, "num_attention_heads": 40,
            "num_key_value_heads": 10, "max_position_embeddings": 32768, "original_max_position_embeddings": 32768,
            "rms_norm_eps": 1e-5, "rope_theta": 250000.0, "vocab_size": 100352, "hidden_act": "silu",
            "sliding_window": None, "tie_word_embeddings": False, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attention_dropout": 0.0, "bos_token_id": 100257, "eos_token_id": 100265, "pad_token_id": 100349,
            "torch_dtype": "bfloat16", "mm_hidden_size": 1152, "max_num_patches": 3600, "min_num_patches": 256,
            "vision_config": {"model_type": "siglip2_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                              "num_attention_heads": 16, "num_hidden_layers": 4, "num_patches": 3600,
                              "patch_size": 16, "num_channels": 3, "hidden_act": "gelu_pytorch_tanh",
                              "layer_norm_eps": 1e-6}}),
    "BeeForConditionalGeneration": (
        "bee", "Open-Bee/Bee-8B keys as vLLM's bee.py reads them (LLaVA-OneVision layout: text_config Qwen3-8B cut "
        "to 8 layers, SigLIP vision cut to 4 layers; model_type name, token ids and grid pinpoints illustrative)",
        _llava_onevision_like(_qwen3(8))),
    "RForConditionalGeneration": (
        "rvl", "YannQi/R-4B keys as vLLM's rvl.py reads them (LLaVA-OneVision layout: text_config Qwen3-4B cut to "
        "8 layers, SigLIP vision cut to 4 layers; model_type name, token ids and grid pinpoints illustrative)",
        _llava_onevision_like(_qwen3(8, hidden_size=2560, intermediate_size=9728, num_attention_heads=32,
                                     num_key_value_heads=8, tie_word_embeddings=True))),
    "StepVLForConditionalGeneration": (
        "step_vl", "stepfun-ai/Step3-VL-10B config.json keys as vLLM's step_vl.py reads them (text_config "
        "Qwen3-8B cut to 8 layers; Perception Encoder vision keys as published for Step3.x, 4 layers; image "
        "token id illustrative)", {
            "text_config": _qwen3(8), "projector_bias": False, "image_token_id": 151679,
            "vision_config": {"width": 1536, "layers": 4, "heads": 16, "hidden_act": "quick_gelu", "image_size": 728,
                              "patch_size": 14, "mlp_ratio": 8960 / 1536, "ls_init_value": 0.1, "output_dim": 4096,
                              "use_abs_posemb": True, "use_cls_token": False, "use_ln_post": False,
                              "use_ln_pre": True, "use_rope2d": True, "layer_norm_eps": 1e-5, "num_channels": 3},
            "torch_dtype": "bfloat16"}),
    "MoonshotKimiaForCausalLM": (
        "kimi_audio", "moonshotai/Kimi-Audio-7B-Instruct config.json keys (Qwen2.5-7B language model flat, cut to "
        "8 layers; kimia_* values illustrative, vLLM reads only kimia_adaptor_input_dim; the Whisper encoder's "
        "whisper-large-v3/config.json and feature extractor beside it, cut to 4 layers)", {
            **{k: v for k, v in _qwen2(8).items() if k not in ("architectures", "model_type")},
            "kimia_adaptor_input_dim": 5120, "kimia_media_begin": 151661, "kimia_media_end": 151663,
            "kimia_text_output_vocab": 152064, "kimia_mimo_layers": 6, "kimia_mimo_audiodelaytokens": 5,
            "kimia_mimo_transformer_from_layer_index": 21, "kimia_audio_output_vocab": 16896,
            "kimia_token_offset": 152064, "use_whisper_feature": True}),
    "MossAudioModel": (
        "moss_audio", "OpenMOSS MOSS-Audio config.json keys as vLLM's MossAudioConfig reads them (language_config "
        "Qwen3-8B cut to 8 layers; audio encoder cut to 4 layers; values illustrative)", {
            "language_config": {k: v for k, v in _qwen3(8).items() if k != "architectures"},
            "audio_config": {"d_model": 1280, "output_dim": 1280, "num_mel_bins": 128, "encoder_layers": 4,
                             "encoder_attention_heads": 20, "encoder_ffn_dim": 5120, "downsample_rate": 8,
                             "downsample_hidden_size": 480, "deepstack_encoder_layer_indexes": [1, 2, 3]},
            "adapter_hidden_size": 8192, "deepstack_num_inject_layers": 3, "torch_dtype": "bfloat16"}),
    "FireRedASR2ForConditionalGeneration": (
        "fireredasr2", "FireRedTeam FireRedASR2-LLM config.json keys as vLLM's fireredasr2.py reads them (Qwen2-7B "
        "language model flat, cut to 8 layers; Conformer audio_encoder_conf cut to 4 layers; values illustrative)", {
            **{k: v for k, v in _qwen2(8).items() if k not in ("architectures", "model_type")},
            "audio_encoder_conf": {"idim": 80, "n_layers_enc": 4, "n_head": 20, "d_model": 1280, "kernel_size": 33,
                                   "pe_maxlen": 5000},
            "encoder_downsample_rate": 2}),
    "FunASRForConditionalGeneration": (
        "funasr", "FunAudioLLM/Fun-ASR-Nano config.json keys as vLLM's funasr.py reads them (Qwen3-0.6B language "
        "model flat, cut to 8 layers; SenseVoice audio_encoder_conf cut to 4 blocks; values illustrative)", {
            **{k: v for k, v in _qwen3(8, hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
                                       num_key_value_heads=8, tie_word_embeddings=True).items()
               if k not in ("architectures", "model_type")},
            "audio_encoder_conf": {"output_size": 512, "attention_heads": 4, "linear_units": 2048, "num_blocks": 4,
                                   "tp_blocks": 2, "kernel_size": 11, "sanm_shift": 0, "normalize_before": True}}),
    "KananaVForConditionalGeneration": (
        "kanana-1.5-v", "kakaocorp/kanana-1.5-v-3b-instruct config.json keys as vLLM's kanana_v.py reads them "
        "(text_config Llama-style cut to 8 layers, Qwen2-VL vision encoder cut to 4 layers, C-Abstractor "
        "projector_config; values illustrative)", {
            "text_config": _llama(8, hidden_size=2304, intermediate_size=9216, num_attention_heads=24,
                                  num_key_value_heads=8, head_dim=96, vocab_size=128259),
            "vision_config": {"depth": 4, "embed_dim": 1280, "hidden_size": 1280, "hidden_act": "quick_gelu",
                              "mlp_ratio": 4, "num_heads": 16, "in_channels": 3, "patch_size": 14,
                              "spatial_merge_size": 2, "temporal_patch_size": 2},
            "projector_config": {"merge_size": 2, "pos_emb_size": 576, "pos_emb": True, "encoder_hidden_size": 1280,
                                 "hidden_size": 1024, "output_hidden_size": 2304, "depth": 2, "mlp_depth": 2,
                                 "feature_layer_index": -1},
            "torch_dtype": "bfloat16"}),
    "NemotronParseForConditionalGeneration": (
        "nemotron_parse", "nvidia/NVIDIA-Nemotron-Parse-v1.1 config.json keys as vLLM's nemotron_parse.py reads "
        "them (RADIO encoder args, MBart decoder with cross-attention, 10 layers; values illustrative where the "
        "card is silent)", {
            "encoder": dict(_RADIO_ENCODER), "decoder": dict(_MBART_DECODER), "image_size": [2048, 1648],
            "is_encoder_decoder": True, "decoder_start_token_id": 2, "pad_token_id": 1, "eos_token_id": 2,
            "vocab_size": 52352, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}),
    "RadioMBartPrefixForCausalLM": (
        "nemotron_parse", "NVIDIA Nemotron Parse 3.5 config.json keys as vLLM's nemotron_parse3_5.py reads them "
        "(RADIO encoder, causal-prefix MBart decoder without cross-attention, 10 layers; values illustrative)", {
            "encoder": dict(_RADIO_ENCODER),
            "decoder": {**_MBART_DECODER, "add_cross_attention": False, "causal_vision_prefix": True},
            "image_size": [2048, 1648], "navit_packing": True, "vision_spatial_dim": 1280,
            "vision_summary_dim": 3840, "vocab_size": 52352, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16"}),
})


PUBLISHED.update({
    "OpenPanguVLForConditionalGeneration": (
        "openpangu_vl", "FreedomIntelligence/openPangu-VL-7B keys as vLLM's openpangu_vl.py reads them "
        "(openPangu-Embedded-7B language model keys flat, cut to 8 layers; Qwen2.5-VL style vision_config cut "
        "to 4 blocks; values illustrative where the card is silent)", {
            "hidden_size": 4096, "intermediate_size": 12800, "num_hidden_layers": 8, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
            "rope_theta": 16000000.0, "vocab_size": 153376, "hidden_act": "silu", "tie_word_embeddings": False,
            "attention_bias": True, "bias": True, "torch_dtype": "bfloat16", "image_token_id": 151655,
            "video_token_id": 151656, "vision_start_token_id": 151652,
            "vision_config": {"depth": 4, "hidden_size": 1280, "num_heads": 16, "intermediate_size": 3456,
                              "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                              "window_size": 112, "fullatt_block_indexes": [3], "out_hidden_size": 4096,
                              "in_channels": 3, "hidden_act": "silu", "tokens_per_second": 2}}),
})


# Muse Spark: vLLM ships its config classes (vllm/transformers_utils/configs/muse_spark.py, which
# require every sub-config); text / vision / audio keys as vLLM's muse_spark model reads them.
_MUSE_LAYERS = 8
PUBLISHED.update({
    "MuseSparkForConditionalGeneration": (
        "muse_spark", "keys vLLM's MuseSparkConfig and muse_spark model read (values illustrative, 8 text layers: "
        "sliding_attention except every 4th layer, dense first layer then MoE; vision and audio towers cut to "
        "4 layers)", {
            "text_config": {
                "model_type": "muse_spark_text", "hidden_size": 2048, "num_hidden_layers": _MUSE_LAYERS,
                "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 202048,
                "intermediate_size": 8192, "intermediate_size_mlp": 8192, "moe_intermediate_size": 1024,
                "num_local_experts": 8, "num_experts_per_tok": 2, "num_shared_experts": 0,
                "routed_scaling_factor": 1.0, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
                "rms_post_norm_eps": None, "post_norm_eps": 1e-5, "hidden_act": "silu", "attention_bias": False,
                "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}, "rope_theta": 500000.0,
                "layer_rope_theta": [500000.0 if (i + 1) % 4 == 0 else 10000.0 for i in range(_MUSE_LAYERS)],
                "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention"
                                for i in range(_MUSE_LAYERS)],
                "mlp_layer_types": ["dense"] + ["sparse"] * (_MUSE_LAYERS - 1), "sliding_window": 1024,
                "use_rope": True, "every_n_layers_nope": None, "global_attn_cfg": None, "use_qk_norm": True,
                "use_sqrt_attn_scaling": False, "qk_scale_factor": 3.87, "rope_use_fp32_in_outer_product": True,
                "attn_temperature_tuning_floor_scale": None, "attn_temperature_tuning_q_scale_constant": None,
                "attn_temperature_tuning_layers": None, "residual_gate_temperature": 0.3, "output_multiplier": 1.0,
                "moe_hidden_size": 2048, "final_logit_softcapping": None, "tie_word_embeddings": False,
                "bos_token_id": 200000, "eos_token_id": 200001, "pad_token_id": None},
            "vision_config": {
                "model_type": "muse_spark_vision", "hidden_size": 1024, "intermediate_size": 4096,
                "num_attention_heads": 16, "num_hidden_layers": 4, "hidden_act": "gelu", "layer_norm_eps": 1e-6,
                "patch_size": 14, "patch_temporal": 2, "merge_size": 2, "pos_emb_height": 32, "pos_emb_width": 32,
                "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0},
                "layer_types": ["window_attention", "window_attention", "window_attention", "full_attention"]},
            "audio_config": {
                "model_type": "muse_spark_audio", "hidden_act": "gelu", "num_hidden_layers": 2, "patch_sizes": [4, 4],
                "depths": [1, 1], "hidden_sizes": [256, 512], "out_hidden_size": 2048, "conv_kernel_size": 7,
                "mlp_ratio": 4.0, "rms_norm_eps": 1e-5},
            "projector_hidden_size": 4096, "out_hidden_size": 4096, "projector_hidden_act": "gelu",
            "torch_dtype": "bfloat16"}),
})


# --- issue 21, architecture list "m" ---
# Phi-4-multimodal: its checkpoint ships its own config class (model_type phi4mm, auto_map), whose keys
# vLLM's phi4mm.py reads (img_processor, embd_layer, audio_processor); transformers' phi4_multimodal
# class has other keys.
_PHI4MM_AUDIO = {"name": "cascades", "config": {
    "activation": "swish", "activation_checkpointing": {"interval": 1, "module": "transformer", "offload": False},
    "attention_dim": 1024, "attention_heads": 16, "batch_norm": False, "bias_in_glu": True, "causal": True,
    "chunk_size": -1, "cnn_layer_norm": True, "conv_activation": "swish", "conv_glu_type": "swish",
    "depthwise_multiplier": 1, "depthwise_seperable_out_channel": 1024, "dropout_rate": 0.0,
    "encoder_embedding_config": {"input_size": 80}, "ext_pw_kernel_size": 1, "ext_pw_out_channel": 1024,
    "input_layer": "nemo_conv", "input_size": 80, "kernel_size": 3, "left_chunk": 18, "linear_units": 1536,
    "nemo_conv_settings": {"conv_channels": 1024}, "num_blocks": 24,
    "relative_attention_bias_args": {"t5_bias_max_distance": 500, "type": "t5"}, "time_reduction": 8}}
PUBLISHED.update({
    "Phi4MMForCausalLM": ("phi4mm", "microsoft/Phi-4-multimodal-instruct config.json keys of its own (remote) "
                          "config class (Phi-4-mini language model, 32 layers; its longrope factor lists and "
                          "LoRA adapter keys left out)", {
        "attention_bias": False, "attention_dropout": 0.0, "audio_processor": _PHI4MM_AUDIO, "bos_token_id": 199999,
        "embd_layer": {
            "audio_embd_layer": {"compression_rate": 8, "downsample_rate": 1, "embedding_cls": "audio",
                                 "enable_gradient_checkpointing": True, "projection_cls": "mlp",
                                 "use_conv_downsample": False, "use_qformer": False},
            "embedding_cls": "image",
            "image_embd_layer": {"crop_size": 448, "embedding_cls": "tune_image", "enable_gradient_checkpointing": True,
                                 "hd_transform_order": "sub_glb", "image_token_compression_cls": "avg_pool_2d",
                                 "projection_cls": "mlp", "use_hd_transform": True,
                                 "with_learnable_separator": True}},
        "embd_pdrop": 0.0, "eos_token_id": 199999, "full_attn_mod": 1, "hidden_act": "silu", "hidden_size": 3072,
        "img_processor": None, "initializer_range": 0.02, "intermediate_size": 8192, "interpolate_factor": 1,
        "lm_head_bias": False, "max_position_embeddings": 131072, "mlp_bias": False, "num_attention_heads": 24,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "original_max_position_embeddings": 4096,
        "pad_token_id": 199999, "partial_rotary_factor": 0.75, "resid_pdrop": 0.0, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "use_cache": True, "vocab_size": 200064}),
})


# Plamo 3: its remote config class publishes per-layer `layer_types` and `interleaved_sliding_window`
# (derived from sliding_window / sliding_window_pattern), which vLLM's plamo3.py reads per layer.
def _plamo3(layers: int = 8, pattern: int = 4, window: int = 2048) -> dict[str, Any]:
    types = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    return {"hidden_size": 2048, "num_hidden_layers": layers, "num_attention_heads": 16, "num_key_value_heads": 4,
            "head_dim": 128, "intermediate_size": 8192, "rms_norm_eps": 1e-6, "vocab_size": 100032,
            "max_position_embeddings": 32768, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
            "rope_local_theta": 10000.0, "sliding_window": window, "sliding_window_pattern": pattern,
            "layer_types": types,
            "interleaved_sliding_window": [window if t == "sliding_attention" else None for t in types],
            "hidden_act": "silu", "tie_word_embeddings": True, "torch_dtype": "bfloat16",
            "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3}


# Domyn Edge: per-layer head sizes (per_layer_config, transformers' heterogeneous-config form: layer index ->
# overrides of the global keys, read as per_layer_config[i].head_dim), windows (window_sizes[i][0]; 0 = full
# attention) and position encodings (position_layers[i]: rope / nope), as vLLM's domyn_edge.py reads them.
def _domyn_edge(window_sizes: list[list[int]], head_dims: dict[int, int]) -> dict[str, Any]:
    return {"hidden_size": 2048, "num_hidden_layers": len(window_sizes), "num_attention_heads": 16,
            "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 8192, "hidden_act": "silu",
            "rms_norm_eps": 1e-6, "vocab_size": 65536, "max_position_embeddings": 32768,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": False,
            "position_layers": ["nope" if w[0] == 0 else "rope" for w in window_sizes],
            "per_layer_config": {str(i): {"head_dim": h} for i, h in head_dims.items()}, "window_sizes": window_sizes,
            "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2}


PUBLISHED.update({
    "Plamo3ForCausalLM": ("plamo3", "keys vLLM's plamo3.py reads, as PLaMo 3's remote config class publishes them "
                          "(layer_types and interleaved_sliding_window derived from sliding_window_pattern 4); "
                          "values illustrative, 8 layers", _plamo3()),
    "DomynEdgeForCausalLM": ("domyn_edge", "keys vLLM's domyn_edge.py reads (window_sizes, per_layer_config head "
                             "sizes, position_layers); values illustrative, 8 layers: three sliding (window "
                             "1024) then one full NoPE layer with a wider head, twice",
                             _domyn_edge(([[1024, 0]] * 3 + [[0, 0]]) * 2, {3: 256, 7: 256})),
})


# Cohere Transcribe (cohere_asr): its checkpoint ships its own NeMo-style config class; vLLM's
# cohere_asr.py reads the Conformer encoder under `encoder`, the Transformer decoder under
# `transf_decoder.config_dict`, the output head under `head` and the feature front end under
# `preprocessor` (transformers' cohere_asr class has other keys).
PUBLISHED.update({
    "CohereAsrForConditionalGeneration": (
        "cohere_asr", "keys of Cohere Transcribe's own (remote) config class as vLLM's cohere_asr.py reads them "
        "(Conformer encoder cut to 4 layers, Transformer decoder 8 layers; values illustrative)", {
            "encoder": {"feat_in": 128, "n_layers": 4, "d_model": 1024, "feat_out": -1, "causal_downsampling": False,
                        "subsampling": "dw_striding", "subsampling_factor": 8, "subsampling_conv_chunking_factor": 1,
                        "subsampling_conv_channels": 256, "ff_expansion_factor": 4, "self_attention_model": "rel_pos",
                        "n_heads": 8, "att_context_size": [-1, -1], "att_context_style": "regular", "xscaling": True,
                        "untie_biases": True, "pos_emb_max_len": 5000, "conv_kernel_size": 9,
                        "conv_norm_type": "batch_norm", "conv_context_size": None, "use_bias": True},
            "transf_decoder": {"config_dict": {"hidden_size": 1024, "inner_size": 4096, "hidden_act": "relu",
                                               "num_attention_heads": 8, "max_sequence_length": 1024,
                                               "num_layers": 8, "num_token_types": 0, "embedding_dropout": 0.0,
                                               "learn_positional_encodings": False, "ffn_dropout": 0.0,
                                               "attn_score_dropout": 0.0, "attn_layer_dropout": 0.0,
                                               "pre_ln": True, "vocab_size": 16384}},
            "head": {"num_classes": 16384, "hidden_size": 1024, "num_layers": 1, "log_softmax": True},
            "preprocessor": {"sample_rate": 16000, "window_size": 0.025, "window_stride": 0.01, "features": 128,
                             "n_fft": 512, "window": "hann", "normalize": "per_feature", "dither": 1e-05,
                             "pad_to": 0, "log": True, "frame_splicing": 1},
            "sample_rate": 16000, "max_audio_clip_s": 35, "overlap_chunk_second": 5, "vocab_size": 16384,
            "torch_dtype": "bfloat16"}),
})
