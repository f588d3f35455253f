"""Tiny random-weight checkpoints built from the bundled corpus configs (several families), saved
as real checkpoint folders (config.json + model.safetensors) so `kvplan validate FOLDER --e2e`
loads them the way it loads a downloaded model."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "corpus"

# family -> (corpus folder, overrides that shrink it: few layers, small hidden size, small vocab)
_SHRINK: dict[str, Any] = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 320}
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("Meta-Llama-3.1-8B", {"num_hidden_layers": 4}),
    "qwen3": ("Qwen3-8B", {"num_hidden_layers": 4}),
    "mistral": ("Mistral-7B-Instruct-v0.2-resave", {"num_hidden_layers": 3}),
    # Gemma 3: 5 sliding layers then a full one; a 16-token window so it matters on short texts
    "gemma3": ("gemma-3-4b-it", {"num_hidden_layers": 6, "sliding_window": 16, "query_pre_attn_scalar": 16,
                                 "layer_types": None}),
    # gpt-oss: sinks, alternating sliding/full layers, MoE
    "gpt-oss": ("gpt-oss-20b", {"num_hidden_layers": 4, "sliding_window": 16, "num_local_experts": 4,
                                "num_experts_per_tok": 2, "layer_types": None}),
    # Qwen3.5: gated-delta-net linear attention (no KV cache) with a full-attention layer every 4th
    "qwen3.5": ("Qwen3.5-27B", {"num_hidden_layers": 4, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                                "linear_key_head_dim": 16, "linear_value_head_dim": 16, "layer_types": None,
                                "mtp_num_hidden_layers": 0}),
}


def tiny_config(family: str) -> dict[str, Any]:
    folder, extra = FAMILIES[family]
    doc = json.loads((CORPUS / folder / "config.json").read_text())
    doc = doc.get("text_config", doc) | {"architectures": doc.get("architectures")} if "text_config" in doc else doc
    doc.pop("quantization_config", None)
    doc.update(_SHRINK)
    for k, v in extra.items():
        if v is None:
            doc.pop(k, None)
        else:
            doc[k] = v
    if family == "gemma3":
        doc["model_type"] = "gemma3_text"
        doc["architectures"] = ["Gemma3ForCausalLM"]
        doc["layer_types"] = ["sliding_attention"] * 5 + ["full_attention"]
        doc.pop("rope_scaling", None)
    if family == "qwen3.5":
        doc["model_type"] = "qwen3_5_text"
        doc["architectures"] = ["Qwen3_5ForCausalLM"]
        doc["layer_types"] = ["linear_attention"] * 3 + ["full_attention"]
    if family == "gpt-oss":
        doc["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(4)]
    for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
        doc[k] = None
    doc["torch_dtype"] = "bfloat16"
    doc["dtype"] = "bfloat16"
    return doc


def build(family: str, folder: Path, *, seed: int = 0, outlier_channels: bool = False) -> Path:
    """Write a tiny random checkpoint of ``family`` into ``folder``; ``outlier_channels`` plants
    large fixed key channels (k_proj bias-free: scaled rows of k_proj) as real models have."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    doc = tiny_config(family)
    cfg = AutoConfig.for_model(doc.pop("model_type"), **{k: v for k, v in doc.items() if k != "architectures"})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():  # larger weights than the init: attention that is not uniform
            if p.dim() >= 2:
                p.normal_(0.0, 0.08)
        if outlier_channels:
            for layer in model.model.layers:
                k = layer.self_attn.k_proj.weight  # [Hkv*D, hidden]
                d = cfg.head_dim
                for h in range(k.shape[0] // d):
                    k[h * d + d // 2 - 1] *= 40.0  # a low-frequency rotary channel, as in real keys
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    return folder
