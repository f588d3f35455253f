"""State-cache dimensions of Mamba / gated-delta-net / linear-attention / short-conv layers, from config.json.

vLLM sizes each such layer's per-request state with one of `MambaStateShapeCalculator`'s formulas
(`vllm/model_executor/layers/mamba/mamba_utils.py`), fed by the model class's
`get_mamba_state_shape_from_config`. This module reads the keys those classes read, per family, into a
`StateCache`; the planner turns it into shapes and bytes for the flags (TP, dtypes, speculative tokens).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvplan.model.arch import LayerArch, StateCache

# Architectures whose vLLM config hook sets the SSM state dtype when --mamba-ssm-cache-dtype is auto
# (vllm/model_executor/models/config.py): Nemotron-H takes config mamba_ssm_cache_dtype, float32 when
# absent (NemotronHForCausalLMConfig); Qwen3.5 takes text config mamba_ssm_dtype (Qwen3_5...Config).
_NEMOTRON_H_SSM_HOOK = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2")
NEMOTRON_H_OMNI_SSM_HOOK = ("NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3",
                            "NemotronH_Super_Omni_Reasoning_V3")
"""Nemotron-H Omni V3: the same hook from vLLM 0.34 (engine feature nemotron_h_omni_ssm_dtype_hook; the planner
drops the config's value for an earlier release)."""
_QWEN3_5_SSM_HOOK = ("Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
                     "Qwen3_5MoeForConditionalGeneration")


def _i(raw: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = raw.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    return None


def _hidden(raw: dict[str, Any]) -> int:
    return _i(raw, "hidden_size", "d_model") or 0


def _kda(raw: dict[str, Any], module: str) -> StateCache | None:
    """Kimi delta attention: linear_attn_config {num_heads, head_dim, short_conv_kernel_size} (Kimi-Linear,
    vllm kimi_k3), GLM-5 Next's linear_* keys (vllm glm5next), Ling 3.0's attention heads (vllm
    bailing_moe_v3), or AliceAI's linear_* keys with separate key heads (vllm alice_ai)."""
    lac = raw.get("linear_attn_config")
    if isinstance(lac, dict) and _i(lac, "num_heads") and _i(lac, "head_dim"):
        # kimi_k3/nvidia/model.py::KimiDecoderLayer: KimiK3DeltaAttention (use_full_rank_gate) passes
        # --mamba-ssm-cache-dtype to kda_state_dtype, Kimi-Linear's KimiGatedDeltaNetAttention does not;
        # KimiLinearForCausalLM.get_mamba_state_dtype_from_config always does.
        return StateCache(family="kda", num_heads=_i(lac, "num_heads") or 0, head_dim=_i(lac, "head_dim") or 0,
                          conv_kernel=_i(lac, "short_conv_kernel_size") or 4,
                          ssm_dtype_flag="layer" if lac.get("use_full_rank_gate") is True else "hook")
    if module.endswith(".glm5next") and _i(raw, "linear_num_heads") and _i(raw, "linear_head_dim"):
        # Glm5NextLinearAttention (vllm/models/glm5next/common/kda.py): linear_num_heads x linear_head_dim,
        # conv kernel linear_conv_kernel_dim; get_state_dtype passes --mamba-ssm-cache-dtype
        return StateCache(family="kda", num_heads=_i(raw, "linear_num_heads") or 0,
                          head_dim=_i(raw, "linear_head_dim") or 0,
                          conv_kernel=_i(raw, "linear_conv_kernel_dim") or 4)
    heads = _i(raw, "num_attention_heads")
    if module.endswith((".bailing_moe_v3", ".bailing_moe_v3_vl")) and heads:
        # BailingMoeV3KimiDeltaAttention: num_attention_heads x config.head_dim. For the text model
        # (model_type bailing_hybrid) transformers' BailingHybridConfig sets head_dim to qk_rope_head_dim
        # (default 64); the VL model's text config is vLLM's BailingMoeV3TextConfig (head_dim, else
        # hidden_size / heads).
        hd = (_i(raw, "qk_rope_head_dim") or 64) if module.endswith(".bailing_moe_v3") else \
            (_i(raw, "head_dim") or _hidden(raw) // heads)
        # the layer and BailingMoeV3ForCausalLM.get_mamba_state_dtype_from_config leave out the SSM flag
        return StateCache(family="kda", num_heads=heads, head_dim=hd,
                          conv_kernel=_i(raw, "short_conv_kernel_size") or 4, ssm_dtype_flag="ignored")
    if module.endswith(".alice_ai") and _i(raw, "linear_num_value_heads"):
        return StateCache(family="kda", num_heads=_i(raw, "linear_num_value_heads") or 0,
                          head_dim=_i(raw, "linear_value_head_dim") or 0,
                          num_k_heads=_i(raw, "linear_num_key_heads") or 0,
                          head_k_dim=_i(raw, "linear_key_head_dim") or 0,
                          conv_kernel=_i(raw, "linear_conv_kernel_dim") or 4, ssm_dtype_flag="ignored")
    return None


def _gdn(raw: dict[str, Any], module: str) -> StateCache | None:
    """Gated delta net (Qwen3-Next, Qwen3.5/3.6, OLMo hybrid): linear_num_{key,value}_heads,
    linear_{key,value}_head_dim, linear_conv_kernel_dim."""
    nv, nk = _i(raw, "linear_num_value_heads"), _i(raw, "linear_num_key_heads")
    dv, dk = _i(raw, "linear_value_head_dim"), _i(raw, "linear_key_head_dim")
    if not (nv and nk and dv and dk):
        return None
    # Qwen's GDN layer class (Qwen3-Next, Qwen3.5 and the models built on it) takes FlashInfer's prefill
    # kernel where vLLM offers it and then exports prefill checkpoints; OLMo's GDN class does not.
    return StateCache(family="gated_delta_net", num_heads=nv, head_dim=dv, num_k_heads=nk, head_k_dim=dk,
                      conv_kernel=_i(raw, "linear_conv_kernel_dim") or 4,
                      prefill_checkpoint="none" if module.endswith(".olmo_hybrid") else "flashinfer_gdn")


# Mamba2 spellings: (heads key, head-size key, groups key, state-size key, conv-kernel key, intermediate size).
_Spelling = tuple[str, str, str, str, str, Callable[[dict[str, Any]], int]]
_MAMBA2_SPELLINGS: tuple[tuple[str, _Spelling], ...] = (
    # Nemotron-H: intermediate = heads x head size (nemotron_h.py)
    ("", ("mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel",
          lambda r: (_i(r, "mamba_num_heads") or 0) * (_i(r, "mamba_head_dim") or 0))),
    # Falcon-H1 (mamba_d_ssm, else expand x hidden), Granite 4.0-H and Bamba (expand x hidden)
    ("", ("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv",
          lambda r: _i(r, "mamba_d_ssm") or _expand(r, "mamba_expand"))),
    ("", ("n_mamba_heads", "mamba_headdim", "mamba_ngroups", "mamba_d_state", "mamba_d_conv",  # Zamba2
          lambda r: _expand(r, "mamba_expand"))),
    (".mamba2", ("num_heads", "head_dim", "n_groups", "state_size", "conv_kernel",  # Mamba2
                 lambda r: _expand(r, "expand"))),
)


def _expand(raw: dict[str, Any], key: str) -> int:
    expand = raw.get(key, 2)
    return int(expand * _hidden(raw)) if isinstance(expand, (int, float)) and not isinstance(expand, bool) else 0


def _mamba2(raw: dict[str, Any], module: str) -> StateCache | None:
    """Mamba2 mixers, in each family's spelling (nemotron_h, falcon_h1, granitemoehybrid / bamba, zamba2,
    mamba2), with the intermediate size each model class passes."""
    for suffix, (heads, hd, groups, state, conv, inter) in _MAMBA2_SPELLINGS:
        if module.endswith(suffix) and _i(raw, heads) and _i(raw, hd):
            return StateCache(family="mamba2", prefill_checkpoint="always", intermediate_size=inter(raw),
                              n_groups=_i(raw, groups) or 1,
                              num_heads=_i(raw, heads) or 0, head_dim=_i(raw, hd) or 0,
                              state_size=_i(raw, state) or 0, conv_kernel=_i(raw, conv) or 4)
    return None


def _mamba1(raw: dict[str, Any], module: str) -> StateCache | None:
    """Mamba1 mixers: Jamba (mamba_expand x hidden, mamba_d_state, mamba_d_conv), Mamba / FalconMamba
    (intermediate_size, state_size, conv_kernel)."""
    if module.endswith(".jamba") and _i(raw, "mamba_d_state"):
        return StateCache(family="mamba1", intermediate_size=(_i(raw, "mamba_expand") or 2) * _hidden(raw),
                          state_size=_i(raw, "mamba_d_state") or 0, conv_kernel=_i(raw, "mamba_d_conv") or 4)
    if module.endswith(".mamba") and _i(raw, "state_size") and _i(raw, "intermediate_size"):
        return StateCache(family="mamba1", intermediate_size=_i(raw, "intermediate_size") or 0,
                          state_size=_i(raw, "state_size") or 0, conv_kernel=_i(raw, "conv_kernel") or 4)
    return None


def _short_conv(raw: dict[str, Any], module: str) -> StateCache | None:
    """LFM2 short convolution: conv_L_cache wide, over conv_dim (the hidden size when absent) channels."""
    if _i(raw, "conv_L_cache") is None:
        return None
    return StateCache(family="short_conv", intermediate_size=_i(raw, "conv_dim") or _hidden(raw),
                      conv_kernel=_i(raw, "conv_L_cache") or 3)


def _linear_attention(raw: dict[str, Any], module: str) -> StateCache | None:
    """Lightning-style linear attention (Bailing MoE linear): one (heads, head_dim, head_dim) state."""
    if not module.endswith(".bailing_moe_linear"):
        return None
    heads = _i(raw, "num_attention_heads") or 0
    hd = _i(raw, "head_dim") or (_hidden(raw) // heads if heads else 0)
    return StateCache(family="linear_attention", num_heads=heads, head_dim=hd)


_READERS: tuple[Callable[[dict[str, Any], str], StateCache | None], ...] = (
    _kda, _gdn, _mamba2, _mamba1, _short_conv, _linear_attention)


def state_cache_of(raw: dict[str, Any], module: str, architecture: str | None) -> StateCache | None:
    """The state cache the model's mamba / linear_attention layers keep, or None for a family kvplan does not
    size."""
    for read in _READERS:
        sc = read(raw, module)
        if sc is not None:
            return sc.model_copy(update={"ssm_dtype_from_config": _ssm_dtype_hook(raw, architecture)})
    return None


def _ssm_dtype_hook(raw: dict[str, Any], architecture: str | None) -> str | None:
    if architecture in _NEMOTRON_H_SSM_HOOK or architecture in NEMOTRON_H_OMNI_SSM_HOOK:
        v = raw.get("mamba_ssm_cache_dtype", "float32")
        return v if isinstance(v, str) else "float32"
    if architecture in _QWEN3_5_SSM_HOOK:
        v = raw.get("mamba_ssm_dtype")
        return v if isinstance(v, str) else None
    return None


def mtp_layer_count(raw: dict[str, Any]) -> int:
    """Multi-token-prediction layers of the checkpoint (Qwen3.5 / Qwen3-Next mtp_num_hidden_layers, DeepSeek /
    GLM num_nextn_predict_layers): vLLM's MTP draft model builds one decoder layer, with its KV cache, per layer."""
    return _i(raw, "mtp_num_hidden_layers", "num_nextn_predict_layers") or 0


def with_state_caches(layers: list[LayerArch], raw: dict[str, Any], module: str,
                      architecture: str | None) -> list[LayerArch]:
    """The layers, each mamba / linear_attention layer carrying the model's state cache dimensions.

    Falcon-H1 runs a Mamba2 mixer next to the attention of every decoder layer; vLLM numbers the mixers'
    caches after the attention layers (model.<n + i>.mixer), and so does kvplan."""
    if module.endswith(".falcon_h1") and layers and not any(la.kind == "mamba" for la in layers):
        n = max(la.index for la in layers) + 1
        layers = [*layers, *(LayerArch(index=n + la.index, kind="mamba",
                                       source=f"Falcon-H1 Mamba2 mixer of layer {la.index} (vLLM numbers it "
                                              f"{n + la.index})") for la in layers)]
    if not any(la.kind in ("mamba", "linear_attention") for la in layers):
        return layers
    sc = state_cache_of(raw, module, architecture)
    if sc is None:
        return layers
    return [la.model_copy(update={"state": sc}) if la.kind in ("mamba", "linear_attention") else la
            for la in layers]
