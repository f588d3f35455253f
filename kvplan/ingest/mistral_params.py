"""Mistral-format checkpoints: params.json -> the config vLLM 0.33 builds from it.

Mistral publishes some models only in its own format (`params.json` + `consolidated*.safetensors`,
e.g. Pixtral-12B-2409); vLLM reads them with its Mistral config parser
(vllm/transformers_utils/configs/mistral.py `adapt_config_dict`), which renames the keys to
Hugging Face names and picks the architecture: Pixtral for a `vision_encoder`, Voxtral for a Whisper
encoder, Mistral-Large-3 (a DeepSeek-V3 layout) for MoE with shared experts, Mixtral for other MoE,
Mistral otherwise; vLLM 0.34 adds Mistral-Large-4 (`mistral_large_4`, MistralLarge4ForCausalLM) for an
MLA + shared-expert model with a `dsa` block. This module makes the same dict, so the rest of kvplan
reads it as any config.json.

Which file vLLM reads (`--config-format auto`): params.json when the checkpoint also has
consolidated*.safetensors, else config.json. kvplan also reads params.json from a folder without
config.json (what `--config-format mistral` reads).
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanInputError

PARAMS = "params.json"

# params.json key -> Hugging Face key (vLLM's _remap_general_mistral_args).
_RENAMES = {"dim": "hidden_size", "norm_eps": "rms_norm_eps", "n_kv_heads": "num_key_value_heads",
            "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads", "hidden_dim": "intermediate_size"}
# MoE block keys of Mistral-Large-3 -> DeepSeek-V3 names (vLLM's _remap_moe_args).
_MOE_RENAMES = {"route_every_n": "moe_layer_freq", "first_k_dense_replace": "first_k_dense_replace",
                "num_experts_per_tok": "num_experts_per_tok", "num_experts": "n_routed_experts",
                "expert_hidden_dim": "moe_intermediate_size", "routed_scale": "routed_scaling_factor",
                "num_shared_experts": "n_shared_experts", "num_expert_groups": "n_group",
                "num_expert_groups_per_tok": "topk_group"}


def config_file(folder: Path) -> Path:
    """The config file vLLM reads in a checkpoint folder (params.json or config.json)."""
    hf, params = folder / "config.json", folder / PARAMS
    if params.is_file() and (not hf.is_file() or any(folder.glob("consolidated*.safetensors"))):
        return params
    return hf


def _general(cfg: dict[str, Any]) -> dict[str, Any]:
    for old, new in _RENAMES.items():
        if old in cfg:
            cfg[new] = cfg.pop(old)
    max_pos = cfg.get("max_position_embeddings", 128_000)
    cfg["model_type"] = cfg.pop("model_type", "transformer")
    cfg["hidden_act"] = cfg.pop("activation", "silu")
    cfg["tie_word_embeddings"] = cfg.pop("tied_embeddings", False)
    cfg["max_seq_len"] = cfg.pop("max_seq_len", max_pos)
    cfg["max_position_embeddings"] = max_pos
    return cfg


def _sliding_window(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """A per-layer list (None = full attention) repeated over the layers, or one window for all."""
    sw = cfg.get("sliding_window")
    if not sw:
        return cfg
    if isinstance(sw, list):
        n = cfg.get("num_hidden_layers")
        windows = {w for w in sw if w is not None}
        if not isinstance(n, int) or len(windows) > 1 or not all(isinstance(w, int) for w in windows):
            raise KvplanInputError(f"{path}: sliding_window {sw!r} must list one window size (None = full "
                                   "attention) and n_layers must be an integer.", "Fix params.json.")
        pattern = sw * (n // len(sw))
        cfg["layer_types"] = ["full_attention" if w is None else "sliding_attention" for w in pattern]
        cfg["sliding_window"] = next(iter(windows), None)
    elif isinstance(sw, int) and not isinstance(sw, bool):
        if cfg.get("layer_types") is None:
            cfg["layer_types"] = ["sliding_attention"] * int(cfg.get("num_hidden_layers") or 0)
    else:
        raise KvplanInputError(f"{path}: unsupported sliding_window {sw!r} (vLLM reads an integer or a "
                               "per-layer list).", "Fix params.json.")
    return cfg


def _quantization(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    q = cfg.pop("quantization", None)
    if not q:
        return cfg
    if isinstance(q, dict) and q.get("qformat_weight") == "fp8_e4m3":
        static = q.get("qscheme_act") not in ("NO_SCALES",)
        cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "static" if static else "dynamic"}
    elif isinstance(q, dict) and str(q.get("quant_method", "")).lower().replace("_", "-") == "compressed-tensors":
        cfg["quantization_config"] = {**q, "quant_method": "compressed-tensors"}
    else:
        raise KvplanInputError(f"{path}: unknown quantization {q!r} (vLLM refuses it too).",
                               "Use a checkpoint whose params.json quantization is fp8_e4m3 or compressed-tensors.")
    return cfg


# Unprefixed `dsa` keys -> the prefixed spelling (vLLM 0.34's _DSA_KEY_ALIASES).
_DSA_ALIASES = {"topk": "index_topk", "n_heads": "index_n_heads", "head_dim": "index_head_dim",
                "rope_head_dim": "index_rope_head_dim", "nope": "index_nope", "match_nope": "indexer_match_nope",
                "ssmax_scaling": "indexer_ssmax_scaling", "norm_eps": "indexer_norm_eps", "sharing": "index_sharing"}


def _pattern(value: Any, n: int, key: str, path: Path) -> list[str]:
    """A comma-separated per-layer pattern repeated over the layers (vLLM's _expand_layer_pattern)."""
    if not isinstance(value, str) or not value.strip():
        raise KvplanInputError(f"{path}: {key} must be a non-empty comma-separated string, got {value!r}.",
                               "Fix params.json.")
    parts = [v.strip() for v in value.split(",")]
    return (parts * -(-n // len(parts)))[:n]


_ML4_FIX = "Fix params.json (vLLM 0.34's Mistral Large 4 config parser refuses it too)."


def _kv_sources(cfg: dict[str, Any], n: int, nope: list[bool], path: Path) -> list[int]:
    """kv_sharing.source_layers_str: per layer, itself or the earlier non-sharing layer whose cache it reads."""
    sharing = cfg.pop("kv_sharing", None) or {}
    if not isinstance(sharing, dict) or set(sharing) - {"source_layers_str"}:
        raise KvplanInputError(f"{path}: unsupported kv_sharing {sharing!r} (vLLM reads only source_layers_str).",
                               _ML4_FIX)
    text = sharing.get("source_layers_str")
    try:
        sources = [int(v) for v in str(text).split(",")] if text else list(range(n))
    except ValueError:
        raise KvplanInputError(f"{path}: kv_sharing.source_layers_str must list layer indices, got {text!r}.",
                               _ML4_FIX) from None
    if len(sources) != n:
        raise KvplanInputError(f"{path}: kv_sharing.source_layers_str lists {len(sources)} layers, n_layers is {n}.",
                               _ML4_FIX)
    for layer, src in enumerate(sources):
        if not 0 <= src <= layer or sources[src] != src or nope[layer] != nope[src]:
            raise KvplanInputError(f"{path}: layer {layer} must share KV with an earlier, non-sharing layer of the "
                                   f"same NoPE/RoPE kind, got source {src}.", _ML4_FIX)
    return sources


def _dsa_keys(raw: Any, path: Path) -> dict[str, Any]:
    """The dsa block with vLLM's prefixed key names (both spellings accepted; a conflict is refused)."""
    if not isinstance(raw, dict):
        raise KvplanInputError(f"{path}: dsa must be an object, got {raw!r}.", _ML4_FIX)
    dsa: dict[str, Any] = {}
    for key, value in raw.items():
        name = _DSA_ALIASES.get(str(key), str(key))
        if name in dsa and dsa[name] != value:
            raise KvplanInputError(f"{path}: conflicting dsa keys for {name}: {dsa[name]!r} and {value!r}.", _ML4_FIX)
        dsa[name] = value
    return dsa


def _indexer_keys(dsa: dict[str, Any], cfg: dict[str, Any], n: int, nope: list[bool], path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("index_topk", "index_n_heads", "index_head_dim", "indexer_norm_eps", "indexer_ssmax_scaling"):
        if key not in dsa:
            raise KvplanInputError(f"{path}: dsa has no {key} (vLLM reads it).", _ML4_FIX)
        out[key] = dsa.pop(key)
    if dsa.pop("index_rope_head_dim", None) not in (None, -1, cfg.get("qk_rope_head_dim")) \
            or dsa.pop("index_nope", False) or not dsa.pop("fp8_indexer", True):
        raise KvplanInputError(f"{path}: dsa asks for an indexer vLLM does not build (index_rope_head_dim other than "
                               "qk_rope_head_dim, index_nope, or a non-FP8 indexer cache).", _ML4_FIX)
    out["indexer_nope_layer_flags"] = list(nope) if dsa.pop("indexer_match_nope", False) else [False] * n
    # The checkpoint's default latent KV cache dtype (vLLM 0.34: fp8_ds_mla for --kv-cache-dtype auto).
    out["fp8_kv_cache"] = bool(dsa.pop("fp8_kv_cache", False))
    pattern = dsa.pop("index_sharing", None)
    out["index_sharing"] = _pattern(pattern, n, "dsa.sharing", path) if pattern else ["full"] * n
    if set(out["index_sharing"]) - {"full", "shared"} or out["index_sharing"][0] != "full":
        raise KvplanInputError(f"{path}: dsa sharing must list 'full' / 'shared' per layer, starting with 'full'.",
                               _ML4_FIX)
    if dsa:
        raise KvplanInputError(f"{path}: unknown dsa keys {sorted(dsa)} (vLLM refuses them).", _ML4_FIX)
    return out


def _mistral_large_4(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """Mistral Large 4 (a `dsa` block on an MLA + shared-expert model): vLLM 0.34's
    _remap_mistral_large_4_args expands the per-layer patterns (NoPE layers, KV-sharing sources,
    indexer sharing) and lifts the DSA keys; its assertions are refusals here."""
    n = cfg.get("num_hidden_layers")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise KvplanInputError(f"{path}: n_layers must be a positive integer.", "Fix params.json.")
    pattern = cfg.pop("nope", None)
    nope = [v == "nope" for v in _pattern(pattern, n, "nope", path)] if pattern else [False] * n
    out: dict[str, Any] = {"nope_layer_flags": nope, "kv_source_layers": _kv_sources(cfg, n, nope, path)}
    out.update(_indexer_keys(_dsa_keys(cfg.pop("dsa"), path), cfg, n, nope, path))
    if (mtp := cfg.pop("mtp", None)) is not None:
        out["mtp_config"] = mtp
    return out


def _architecture(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    moe = cfg.get("moe")
    shared_experts = not moe or (isinstance(moe, dict) and (moe.get("num_shared_experts") or 0) > 0)
    if cfg.get("dsa") and not (cfg.get("qk_nope_head_dim") and shared_experts):
        raise KvplanInputError(f"{path}: a dsa block needs MLA (qk_nope_head_dim) and shared experts (vLLM 0.34: "
                               "'Mistral DSA requires MLA + MoE').", "Fix params.json.")
    if cfg.get("qk_nope_head_dim") and not moe:
        # vLLM's _remap_mistral_mla_args: a dense MLA model is a one-expert MoE of the DeepSeek layout.
        cfg["moe"] = moe = {"num_experts": 1, "first_k_dense_replace": cfg.get("num_hidden_layers"),
                            "route_every_n": 1, "num_shared_experts": 1, "num_experts_per_tok": 1,
                            "expert_hidden_dim": cfg.get("intermediate_size"), "routed_scale": 1.0}
    if cfg.get("model_type") == "mamba":
        cfg["architectures"] = ["Mamba2ForCausalLM"]
    elif isinstance(moe, dict) and (moe.get("num_shared_experts") or 0) > 0:
        for old, new in _MOE_RENAMES.items():
            if old in moe:
                cfg[new] = moe.pop(old)
        cfg.update(model_type="deepseek_v3", architectures=["MistralLarge3ForCausalLM"], topk_method=None,
                   norm_topk_prob=True, scoring_func="softmax")
        if cfg.get("dsa"):
            cfg.update(_mistral_large_4(cfg, path), model_type="mistral_large_4",
                       architectures=["MistralLarge4ForCausalLM"])
    elif moe:
        cfg["architectures"] = ["MixtralForCausalLM"]
    else:
        cfg["architectures"] = ["MistralForCausalLM"]
    return cfg


def _multimodal(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    mm = cfg.get("multimodal") or {}
    vision = (mm.get("vision_encoder_args") if isinstance(mm, dict) else None) or cfg.get("vision_encoder")
    whisper = mm.get("whisper_model_args") if isinstance(mm, dict) else None
    audio = (whisper or {}).get("encoder_args") if isinstance(whisper, dict) else None
    if vision and audio:
        raise KvplanInputError(f"{path}: params.json has both a vision and an audio encoder (vLLM: mutually "
                               "exclusive).", "Pass the model's own params.json.")
    if vision:
        vision_cfg = cfg.pop("multimodal") if cfg.get("multimodal") else cfg.pop("vision_encoder")
        quant = cfg.get("quantization_config")
        out = {"model_type": "pixtral", "architectures": ["PixtralForConditionalGeneration"], "text_config": cfg,
               "vision_config": vision_cfg}
        return {**out, "quantization_config": quant} if quant else out
    if audio:
        causal = bool(audio.get("causal"))
        factor = ((whisper or {}).get("downsample_args") or {}).get("downsample_factor")
        quant = cfg.get("quantization_config")
        out = {"model_type": "voxtral", "text_config": cfg,
               "architectures": ["VoxtralRealtimeGeneration" if causal else "VoxtralForConditionalGeneration"],
               "audio_config": {"model_type": "whisper", "d_model": audio.get("dim"),
                                "encoder_layers": audio.get("n_layers"),
                                "encoder_attention_heads": audio.get("n_heads"),
                                "encoder_head_dim": audio.get("head_dim"), "is_causal": causal,
                                "sliding_window": audio.get("sliding_window"),
                                # the causal encoder pools its KV blocks by the downsample factor
                                "downsample_factor": factor, "block_pool_size": factor if causal else 1}}
        return {**out, "quantization_config": quant} if quant else out
    return cfg


def hf_config_from_params(params: dict[str, Any], path: Path,
                          hf_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config dict vLLM 0.33's Mistral parser builds from a params.json (geometry keys).

    `hf_config` is the checkpoint's config.json when it has one too: vLLM takes the context length
    from it when params.json has none (else 128000) and fills every key the conversion left out
    from it."""
    if not isinstance(params, dict):
        raise KvplanInputError(f"{path}: params.json must be a JSON object.", "Pass the model's own params.json.")
    hf = hf_config if isinstance(hf_config, dict) else {}
    params = copy.deepcopy(params)
    if params.get("max_position_embeddings") is None:
        sub = hf.get("text_config")
        hf_len = (sub if isinstance(sub, dict) else hf).get("max_position_embeddings")
        params["max_position_embeddings"] = hf_len if isinstance(hf_len, int) and hf_len > 0 else 128_000
    cfg = _sliding_window(_general(params), path)
    cfg = _multimodal(_architecture(_quantization(cfg, path), path), path)
    for k, v in hf.items():
        cfg.setdefault(k, copy.deepcopy(v))
    return cfg
