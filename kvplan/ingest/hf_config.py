"""config.json -> ModelArch: layer kinds, KV geometry per layer, model dtype.

Mirrors how vLLM 0.33 builds attention layers from a Hugging Face config: which layers slide
(layer_types, Gemma 2/3 defaults, `sliding_window` without `layer_types` = every layer, Qwen's
`use_sliding_window`), chunked local attention (Llama 4 NoPE layers are global), MLA latent
caches, hybrid Mamba/linear-attention stacks, cross-attention layers, and per-kind geometry
(Gemma 4 global layers use their own KV heads and head size).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

from kvplan.errors import KvplanInputError
from kvplan.ingest.families import (
    FAMILY_DEFAULTS, SINK_TYPES, STANDARD_DECODER_TYPES, WRAPPER_TYPES,
)
from kvplan.ingest.limits import check_config_values, check_count, input_boundary, limits, load_json_file
from kvplan.model.arch import LayerArch, MlaDims, ModelArch


def load_json(path: Path, what: str = "config") -> dict[str, Any]:
    """Read a JSON object file under the size and depth limits; every failure is one clear KvplanInputError."""
    data = load_json_file(path, what)
    if not isinstance(data, dict):
        raise KvplanInputError(f"{path} holds a JSON {type(data).__name__}, not an object.",
                               "A model config.json is a JSON object.")
    return data


class _Cfg:
    """Key lookup over a config dict with family defaults and transformers fallback."""

    def __init__(self, raw: dict[str, Any], model_type: str, notes: list[str]):
        self.raw = raw
        self.model_type = model_type
        self.notes = notes
        self._defaults = dict(FAMILY_DEFAULTS.get(model_type, {}))
        self._hf_defaults: Optional[dict[str, Any]] = None

    def has(self, key: str) -> bool:
        return key in self.raw

    def get(self, *keys: str, default: Any = None, hf: bool = False) -> Any:
        """First present key; else the family default; else (hf=True only) transformers' default."""
        for k in keys:
            if k in self.raw:
                return self.raw[k]
        for k in keys:
            if k in self._defaults:
                self.notes.append(f"{k} absent from the config: using the {self.model_type} "
                                  f"default {self._defaults[k]!r} (transformers config class)")
                return self._defaults[k]
        if not hf:
            return default
        hfd = self._transformers_defaults()
        for k in keys:
            if k in hfd and hfd[k] is not None:
                self.notes.append(f"{k} absent from the config: using {hfd[k]!r} from "
                                  f"transformers' {self.model_type} config class")
                return hfd[k]
        return default

    def _transformers_defaults(self) -> dict[str, Any]:
        """Ask transformers (lazily, only for families kvplan has no table for)."""
        if self._hf_defaults is not None:
            return self._hf_defaults
        self._hf_defaults = {}
        if self.model_type in FAMILY_DEFAULTS:
            return self._hf_defaults
        try:  # pragma: no cover - depends on the optional transformers install
            from transformers import AutoConfig  # noqa: PLC0415 (lazy by design)
            cfg = AutoConfig.for_model(self.model_type)
            self._hf_defaults = cfg.to_dict()
        except Exception:  # transformers absent or the type unknown to it
            self._hf_defaults = {}
        return self._hf_defaults


def _pick_text_config(cfg: dict[str, Any]) -> tuple[dict[str, Any], str]:
    for key in ("text_config", "llm_config", "language_config"):
        sub = cfg.get(key)
        if isinstance(sub, dict) and sub:
            return sub, key
    return cfg, ""


def _model_dtype(text: dict[str, Any], top: dict[str, Any]) -> Optional[str]:
    for d in (text, top):
        for k in ("dtype", "torch_dtype"):
            v = d.get(k)
            if isinstance(v, str) and v:
                return v.replace("torch.", "")
    return None


def _int(v: Any, what: str, path: Path) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise KvplanInputError(f"{path}: {what} must be a non-negative integer, got {v!r}.",
                               "Fix the value in config.json.")
    return v


@input_boundary(source_arg="path", fix="Fix the value in config.json.")
def parse_hf_config(cfg: dict[str, Any], path: Path) -> ModelArch:
    """Turn a loaded config.json into ModelArch; unknown model types are input errors."""
    check_config_values(cfg, str(path))  # types, signs and plausibility limits (docs/limits.md)
    notes: list[str] = []
    model_type = cfg.get("model_type")
    text_raw, text_key = _pick_text_config(cfg)
    text_type = text_raw.get("model_type") if text_key else model_type
    if not isinstance(model_type, str) or not model_type:
        raise KvplanInputError(f"{path} has no model_type.",
                               "Pass the model's own config.json (it names its model_type).")
    if text_key and not text_type:
        # Minimal nested configs (gemma-3-4b-it) omit text_config.model_type.
        text_type = {"gemma3": "gemma3_text", "gemma4": "gemma4_text", "llama4": "llama4_text",
                     "mllama": "mllama_text_model", "qwen3_5": "qwen3_5_text"}.get(model_type, model_type)
        notes.append(f"{text_key}.model_type absent: assuming {text_type}")
    known = (model_type in STANDARD_DECODER_TYPES or model_type in WRAPPER_TYPES
             or model_type in FAMILY_DEFAULTS or text_type in STANDARD_DECODER_TYPES)
    if not known and not _transformers_knows(model_type):
        raise KvplanInputError(
            f"unknown model_type {model_type!r} in {path}.",
            "kvplan plans the model types vLLM builds (llama, qwen3, gemma3, deepseek_v3, ...); "
            "check the spelling or install transformers so kvplan can read its config class.")
    c = _Cfg(text_raw, text_type, notes)
    if text_key:
        notes.append(f"language model read from {text_key} ({text_type})")
    arch_list = cfg.get("architectures") or text_raw.get("architectures") or []
    architecture = arch_list[0] if isinstance(arch_list, list) and arch_list else None

    is_enc_dec = bool(cfg.get("is_encoder_decoder")) or text_type in ("t5", "mt5", "bart", "whisper")
    if is_enc_dec:
        num_layers = c.get("num_decoder_layers", "decoder_layers", "num_layers", "num_hidden_layers")
        num_heads = c.get("decoder_attention_heads", "num_heads", "num_attention_heads")
    else:
        num_layers = c.get("num_hidden_layers", "n_layer", "num_layers", "n_layers")
        num_heads = c.get("num_attention_heads", "n_head", "num_heads", "n_heads")
    if num_layers is None:
        num_layers = c.get("num_hidden_layers", "num_layers", hf=True)
    if num_heads is None:
        num_heads = c.get("num_attention_heads", "num_heads", hf=True)
    if num_layers is None:
        raise KvplanInputError(f"{path}: cannot find the number of layers (num_hidden_layers).",
                               "Pass the model's full config.json.")
    num_layers = check_count(str(path), "num_hidden_layers", _int(num_layers, "num_hidden_layers", path),
                             limits().max_layers)
    hidden = c.get("hidden_size", "n_embd", "d_model", "dim")
    num_kv_heads = c.get("num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num")
    if num_kv_heads is None and c.raw.get("multi_query") is True:
        num_kv_heads = 1
        notes.append("multi_query: true: one KV head (MQA)")
    if num_kv_heads is None and num_heads is not None:
        num_kv_heads = num_heads
        notes.append("num_key_value_heads absent: multi-head attention, KV heads = query heads")
    head_dim = c.get("head_dim", "d_kv", "kv_channels", "attention_head_dim")
    if head_dim is None and not hidden:
        hidden = c.get("hidden_size", "d_model", hf=True)
    if head_dim is None and hidden and num_heads:
        head_dim = hidden // num_heads
        notes.append(f"head_dim absent: hidden_size {hidden} / heads {num_heads} = {head_dim}")
    max_pos = c.get("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
    if max_pos is None and text_key:
        max_pos = cfg.get("max_position_embeddings")

    mla = _mla_dims(text_raw)
    layers = _layers(c, text_type, model_type, num_layers, num_heads, num_kv_heads, head_dim,
                     mla, path, notes)
    return ModelArch(
        model_type=model_type, text_model_type=text_type or model_type, architecture=architecture,
        num_layers=num_layers, config_dtype=_model_dtype(text_raw, cfg),
        max_position_embeddings=max_pos if isinstance(max_pos, int) else None,
        is_encoder_decoder=is_enc_dec, layers=tuple(layers), uses_mla=mla is not None,
        mamba_ssm_cache_dtype=text_raw.get("mamba_ssm_cache_dtype") or text_raw.get("mamba_ssm_dtype"),
        notes=tuple(dict.fromkeys(notes)),
    )


def _transformers_knows(model_type: str) -> bool:
    try:  # pragma: no cover - optional dependency
        from transformers import CONFIG_MAPPING  # noqa: PLC0415
        return model_type in CONFIG_MAPPING
    except Exception:
        return False


def _mla_dims(t: dict[str, Any]) -> Optional[MlaDims]:
    if t.get("kv_lora_rank") in (None, 0) or t.get("qk_rope_head_dim") is None:
        return None
    return MlaDims(kv_lora_rank=t["kv_lora_rank"], qk_rope_head_dim=t["qk_rope_head_dim"],
                   qk_nope_head_dim=t.get("qk_nope_head_dim") or 0,
                   v_head_dim=t.get("v_head_dim") or 0, index_topk=t.get("index_topk"))


_LAYER_TYPE_KINDS = {
    "full_attention": "full_attention", "attention": "full_attention", "global": "full_attention",
    "sliding_attention": "sliding_attention", "local": "sliding_attention",
    "chunked_attention": "chunked_attention", "linear_attention": "linear_attention",
    "mamba": "mamba", "mamba2": "mamba", "conv": "mamba", "short_conv": "mamba",
}


def _layers(c: _Cfg, text_type: str, model_type: str, n: int, num_heads: Any, num_kv_heads: Any,
            head_dim: Any, mla: Optional[MlaDims], path: Path, notes: list[str]) -> list[LayerArch]:
    raw = c.raw
    window = c.get("sliding_window")
    window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    sinks = text_type in SINK_TYPES or model_type in SINK_TYPES
    kinds: list[str]
    srcs: list[str]

    layer_types = raw.get("layer_types")
    pattern = raw.get("hybrid_override_pattern")
    if mla is not None:
        kinds, srcs = ["mla"] * n, ["kv_lora_rank present: MLA latent cache"] * n
    elif isinstance(pattern, str) and pattern:
        if len(pattern) != n:
            raise KvplanInputError(
                f"{path}: hybrid_override_pattern has {len(pattern)} entries for {n} layers.",
                "Fix hybrid_override_pattern or num_hidden_layers.")
        m = {"M": "mamba", "*": "full_attention", "E": "none", "-": "none"}
        kinds = [m.get(ch, "none") for ch in pattern]
        srcs = [f"hybrid_override_pattern[{i}] = {ch!r}" for i, ch in enumerate(pattern)]
    elif isinstance(layer_types, list) and layer_types:
        if len(layer_types) < n:
            raise KvplanInputError(f"{path}: layer_types has {len(layer_types)} entries for {n} layers.",
                                   "Fix layer_types or num_hidden_layers.")
        kinds, srcs = [], []
        for i, lt in enumerate(layer_types[:n]):
            k = _LAYER_TYPE_KINDS.get(str(lt))
            if k is None:
                raise KvplanInputError(f"{path}: unknown layer_types[{i}] value {lt!r}.",
                                       "Use full_attention, sliding_attention, chunked_attention, "
                                       "linear_attention or mamba.")
            kinds.append(k)
            srcs.append(f"layer_types[{i}] = {lt!r}")
    elif text_type == "gemma2":
        # transformers Gemma2Config: even layers slide (sliding if (i + 1) % 2).
        kinds = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
        srcs = ["Gemma 2 default pattern: even layers slide, odd layers are global"] * n
    elif text_type in ("gemma3_text", "cohere2") or raw.get("sliding_window_pattern"):
        p = c.get("sliding_window_pattern", "_sliding_window_pattern") or 6
        kinds = ["sliding_attention" if (i + 1) % p else "full_attention" for i in range(n)]
        srcs = [f"sliding_window_pattern {p}: every {p}th layer is global"] * n
    elif text_type == "llama4_text":
        nope = raw.get("no_rope_layers")
        chunk = c.get("attention_chunk_size")
        if isinstance(nope, list) and len(nope) >= n:
            uses_rope = [bool(x) for x in nope[:n]]
            src = "no_rope_layers[{i}] = {v}"
        else:
            interval = c.get("no_rope_layer_interval") or 4
            uses_rope = [bool((i + 1) % interval) for i in range(n)]
            src = f"no_rope_layers absent: every {interval}th layer is a global NoPE layer" + " (layer {i})"
        kinds = ["chunked_attention" if (r and chunk) else "full_attention" for r in uses_rope]
        srcs = [src.format(i=i, v=int(r)) for i, r in enumerate(uses_rope)]
    elif raw.get("use_sliding_window") is False or window is None:
        why = ("use_sliding_window: false" if raw.get("use_sliding_window") is False
               else "no sliding_window")
        kinds, srcs = ["full_attention"] * n, [f"{why}: full attention"] * n
    elif raw.get("use_sliding_window") is True and isinstance(raw.get("max_window_layers"), int):
        mwl = raw["max_window_layers"]
        kinds = ["sliding_attention" if i >= mwl else "full_attention" for i in range(n)]
        srcs = [f"use_sliding_window with max_window_layers {mwl}"] * n
    else:
        kinds = ["sliding_attention"] * n
        srcs = [f"sliding_window {window} without layer_types: every layer slides"] * n

    cross = raw.get("cross_attention_layers")
    if isinstance(cross, list):
        for i in cross:
            if isinstance(i, int) and 0 <= i < n:
                kinds[i] = "cross_attention"
                srcs[i] = f"cross_attention_layers contains {i}"

    global_kv = raw.get("num_global_key_value_heads")
    global_hd = raw.get("global_head_dim")
    chunk = raw.get("attention_chunk_size") or FAMILY_DEFAULTS.get(text_type, {}).get("attention_chunk_size")
    out = []
    for i, (kind, src) in enumerate(zip(kinds, srcs)):
        if kind in ("mamba", "linear_attention", "none"):
            out.append(LayerArch(index=i, kind=kind, source=src))
            continue
        if kind == "mla":
            assert mla is not None
            out.append(LayerArch(index=i, kind="mla", num_heads=num_heads, num_kv_heads=1,
                                 head_size=mla.kv_lora_rank + mla.qk_rope_head_dim, head_size_v=0,
                                 mla=mla, source=src))
            continue
        kvh, hd = num_kv_heads, head_dim
        if kind == "full_attention" and (global_kv or global_hd):
            kvh = global_kv or kvh
            hd = global_hd or hd
            src += " (global layer geometry: num_global_key_value_heads / global_head_dim)"
        if kvh is None or hd is None:
            raise KvplanInputError(f"{path}: cannot determine KV heads / head size of layer {i}.",
                                   "Pass the model's full config.json.")
        out.append(LayerArch(
            index=i, kind=kind,
            sliding_window=window if kind == "sliding_attention" else None,
            attention_chunk_size=chunk if kind == "chunked_attention" else None,
            num_heads=num_heads, num_kv_heads=int(kvh), head_size=int(hd), head_size_v=int(hd),
            has_sinks=sinks, source=src))
    if kinds.count("sliding_attention") and window is None:
        raise KvplanInputError(f"{path}: layers are sliding_attention but sliding_window is not set.",
                               "Set sliding_window in config.json.")
    return out


def head_size_math_ok(num_heads: int, hidden: int) -> bool:
    """True when hidden_size divides evenly by heads (explicit head_dim otherwise required)."""
    return num_heads > 0 and math.gcd(hidden, num_heads) == num_heads
