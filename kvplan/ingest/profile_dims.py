"""Model dimensions vLLM's memory profiling depends on (hidden size, MLP widths, vocabulary), from config.json.

vLLM sizes the KV cache with what is left after a profiling forward pass at --max-num-batched-tokens
(vllm/v1/worker/gpu_worker.py::determine_available_memory): its activation peak grows with the hidden size
and the MLP / expert widths, the sampler's with the vocabulary. kvplan estimates those terms from these dims.
"""
from __future__ import annotations

from typing import Any

from kvplan.model.arch import ProfileDims


def _i(raw: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = raw.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def profile_dims(raw: dict[str, Any], outer: dict[str, Any]) -> ProfileDims | None:
    """The language model's hidden size, dense MLP width, expert width x experts per token and vocabulary;
    None when the hidden size or the vocabulary is missing."""
    hidden = _i(raw, "hidden_size", "n_embd", "d_model", "dim")
    vocab = _i(raw, "vocab_size") or _i(outer, "vocab_size")
    if hidden is None or vocab is None:
        return None
    dense = _i(raw, "intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size") or 4 * hidden
    experts = _i(raw, "num_local_experts", "num_experts", "n_routed_experts")
    per_token = _i(raw, "num_experts_per_tok", "moe_topk", "num_experts_per_token", "top_k") or 0
    # Mixtral and gpt-oss give the expert width as intermediate_size (no moe_intermediate_size).
    expert_width = _i(raw, "moe_intermediate_size", "expert_intermediate_size") or (
        dense if experts and per_token else 0)
    return ProfileDims(hidden_size=hidden, vocab_size=vocab, intermediate_size=dense,
                       moe_intermediate_size=expert_width, experts_per_token=per_token)
