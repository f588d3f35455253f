#!/usr/bin/env python3
"""Write the configs and the case list the architecture oracle answers (tests/data/vllm_oracle_arch).

Run by hand with the oracle interpreter (transformers + vLLM 0.33.0; never in CI):

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/oracle/make_arch_cases.py

For every architecture of kvplan/data/vllm_architectures.json whose config can be built without
the network, a default config.json is written:
  * from the transformers config class of its model_type (class defaults, `to_dict()`), or
  * from the config class vLLM ships (vllm/transformers_utils/configs/, vLLM's config registry), or
  * for remote-code architectures: the published keys, written out in REMOTE below (a Llama-style
    base plus the keys the architecture's own config adds).
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
}

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
}

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
]


def _jsonable(d):
    return json.loads(json.dumps(d, default=lambda o: None))


def _default_config(arch: str, entry: dict) -> tuple[dict | None, str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from vllm.transformers_utils import config as vcfg

    types = list(entry.get("transformers_model_types") or [])
    if arch in VLLM_CONFIG_TYPES:
        types = [VLLM_CONFIG_TYPES[arch]] + types
    for mt in types:
        cls = vcfg._CONFIG_REGISTRY.get(mt)
        source = f"vLLM config class {getattr(cls, '__name__', cls)} ({mt})"
        if cls is None or isinstance(cls, str):
            cls = CONFIG_MAPPING[mt] if mt in CONFIG_MAPPING else None
            source = f"transformers config class {getattr(cls, '__name__', '?')} ({mt})"
        if cls is None:
            continue
        try:
            d = _jsonable(cls().to_dict())
        except Exception as e:  # noqa: BLE001
            print(f"  {arch}: {mt} default config failed: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        d["model_type"] = d.get("model_type") or mt
        d["architectures"] = [arch]
        d.pop("transformers_version", None)
        return d, source
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
    for arch, variant, over in VARIANTS:
        base = configs.get(f"{arch}__default")
        if base is None:
            continue
        d = copy.deepcopy(base)
        for k, v in over.items():
            if v is None:
                d.pop(k, None)
            else:
                d[k] = v
        configs[f"{arch}__{variant}"] = d
        sources[f"{arch}__{variant}"] = sources[f"{arch}__default"] + f"; variant {over}"
    for name, d in sorted(configs.items()):
        (DATA / "configs" / f"{name}.json").write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")
        for flag in (("auto",) if name in refused_cases else ("auto", "fp8")):
            cases.append({"name": f"{name}__{flag}", "config": f"configs/{name}.json",
                          "kv_cache_dtype": flag})
    doc = {"kind": "kvplan.vllm_oracle_cases", "vllm_version": reg["vllm_version"],
           "generated_by": "scripts/oracle/make_arch_cases.py", "config_sources": sources,
           "no_config": skipped, "cases": cases}
    (DATA / "cases.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{len(configs)} configs, {len(cases)} cases, {len(skipped)} architectures without a config",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
