"""config.json -> ModelArch: layer kinds, KV geometry per layer, model dtype.

Mirrors how vLLM 0.33 builds attention layers from a Hugging Face config: which layers slide
(layer_types, Gemma 2/3 defaults, `sliding_window` without `layer_types` = every layer, Qwen's
`use_sliding_window`), chunked local attention (Llama 4 NoPE layers are global), MLA latent
caches, hybrid Mamba/linear-attention stacks, cross-attention layers, and per-kind geometry
(Gemma 4 global layers use their own KV heads and head size).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kvplan.errors import KvplanInputError
from kvplan.ingest import architectures as vreg
from kvplan.ingest.audio_tower import causal_audio_encoder_caches
from kvplan.ingest.families import (
    ATTENTION_FREE_ARCHS,
    FAMILY_DEFAULTS,
    INDEXER_ALWAYS_MODULES,
    INDEXER_IF_TOPK_MODULES,
    SINK_TYPES,
    STANDARD_DECODER_TYPES,
    WRAPPER_TYPES,
)
from kvplan.ingest.flagship import flagship_layers
from kvplan.ingest.limits import (
    check_config_value,
    check_config_values,
    check_count,
    input_boundary,
    limits,
    load_json_file,
)
from kvplan.ingest.mistral_params import PARAMS
from kvplan.ingest.profile_dims import profile_dims
from kvplan.ingest.state_layers import mtp_layer_count, with_state_caches
from kvplan.model.arch import LayerArch, MlaDims, ModelArch
from kvplan.model.limits import MAX_TOKENS
from kvplan.model.vocab import NO_KV_KINDS, LayerKind

# vLLM 0.34's Mistral Large 4 (the model_type its Mistral params.json parser gives it).
MISTRAL_LARGE_4 = "mistral_large_4"


class _Reads(dict[Any, Any]):
    """A config dict that records which keys were looked up (for KV604's 'keys read') and checks
    a value's type and range when the planner reads it (`check_config_value`: validated where
    read, so a key this architecture's readers never look at is never an input error).

    `source` names the input and `prefix` where the dict sits (`text_config.`) in the messages.
    Membership tests (`key in cfg`) record the key but check nothing: only a value read is checked.
    """

    def __init__(self, *a: Any, source: str = "config.json", prefix: str = "", **k: Any) -> None:
        super().__init__(*a, **k)
        self.read: set[str] = set()
        self.source, self.prefix = source, prefix
        self._checked: set[str] = set()

    def _check(self, key: Any) -> None:
        if isinstance(key, str) and key not in self._checked and super().__contains__(key):
            self._checked.add(key)
            check_config_value(self.source, self.prefix + key, super().__getitem__(key), self)

    def get(self, key: Any, default: Any = None) -> Any:
        self.read.add(key)
        self._check(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.read.add(key)
        self._check(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return super().__contains__(key)

    def unchecked(self, key: str) -> Any:
        """The raw value, recorded as read, for a reader that checks its type itself (a key whose
        accepted types depend on the architecture or on other keys)."""
        self.read.add(key)
        return super().get(key)


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
        self._hf_defaults: dict[str, Any] | None = None

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
                self.notes.append(f"{k} absent from the config: using {hfd[k]!r}, the default of "
                                  f"the {self.model_type} config class")
                return hfd[k]
        return default

    def _transformers_defaults(self) -> dict[str, Any]:
        """The config class's declared defaults, as generated into data (no transformers import).

        kvplan/data/vllm_architectures.json `config_defaults` holds, per model_type, the defaults
        the transformers (or vLLM-shipped) config class declares for the geometry keys kvplan
        reads (scripts/oracle/vllm_registry.py writes it from the installed packages).
        """
        if self._hf_defaults is None:
            self._hf_defaults = vreg.config_defaults(self.model_type)
        return self._hf_defaults


def _pick_text_config(cfg: dict[str, Any]) -> tuple[dict[str, Any], str]:
    for key in ("text_config", "llm_config", "language_config"):
        sub = cfg.get(key)
        if isinstance(sub, dict) and sub:
            return sub, key
    dec = cfg.get("decoder")  # Nemotron Parse: an MBart decoder under `decoder` (RADIO under `encoder`)
    if isinstance(dec, dict) and dec and isinstance(dec.get("model_type"), str) and "d_model" in dec:
        return dec, "decoder"
    thinker = cfg.get("thinker_config")  # Qwen omni / ASR models: the thinker holds the LM
    if isinstance(thinker, dict) and isinstance(thinker.get("text_config"), dict) and thinker["text_config"]:
        return thinker["text_config"], "thinker_config.text_config"
    dec = cfg.get("transf_decoder")
    if isinstance(dec, dict) and isinstance(dec.get("config_dict"), dict) and dec["config_dict"]:
        return _nemo_decoder(dec["config_dict"], cfg.get("model_type")), "transf_decoder.config_dict"
    return cfg, ""


def _nemo_decoder(d: dict[str, Any], model_type: Any) -> dict[str, Any]:
    """Cohere Transcribe's NeMo-style Transformer decoder keys as vLLM's cohere_asr.py reads them (every
    head a KV head, head size hidden_size / num_attention_heads), under the names kvplan reads."""
    names = {"num_layers": "num_hidden_layers", "hidden_size": "hidden_size",
             "num_attention_heads": "num_attention_heads", "max_sequence_length": "max_position_embeddings"}
    out = {new: d[old] for old, new in names.items() if old in d}
    if "num_attention_heads" in d:
        out["num_key_value_heads"] = d["num_attention_heads"]
    return {**out, "model_type": model_type}


# torch dtype names a config.json may carry (transformers turns the string into `getattr(torch, name)`,
# so any other name fails to load). vLLM runs float16 / bfloat16 as they are and any other one (float32,
# float64, 8-bit types) in the platform's preferred dtype (KV100).
_TORCH_DTYPE_NAMES = {"float32", "float", "float64", "double", "bfloat16", "float16", "half", "float8_e4m3fn",
                      "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "int8", "uint8",
                      "int16", "int32", "int64", "bool"}
_DTYPE_CANON = {"float": "float32", "double": "float64", "half": "float16"}


def _model_dtype(text: dict[str, Any], top: dict[str, Any], path: Path) -> str | None:
    for d in (text, top):
        for k in ("dtype", "torch_dtype"):
            v = d.get(k)
            if isinstance(v, str) and v:
                name = v.replace("torch.", "")
                if name not in _TORCH_DTYPE_NAMES:
                    raise KvplanInputError(f"{path}: {k} {v!r} is not a torch dtype (e.g. bfloat16, float16, "
                                           "float32): transformers cannot load this config.",
                                           f"Fix {k} in config.json.")
                return _DTYPE_CANON.get(name, name)
    return None


def _int(v: Any, what: str, path: Path) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise KvplanInputError(f"{path}: {what} must be a non-negative integer, got {v!r}.",
                               "Fix the value in config.json.")
    return v


def _resolve_types(cfg: dict[str, Any], path: Path,
                   notes: list[str]) -> tuple[str, dict[str, Any], str, _Reads, str, str | None]:
    """model_type, the language model's config (and where it sits), its model_type, the architecture."""
    model_type = cfg.get("model_type")
    text_plain, text_key = _pick_text_config(cfg)
    text_raw = _Reads(text_plain, source=str(path), prefix=f"{text_key}." if text_key else "")
    text_type = text_raw.get("model_type") if text_key else model_type
    if not isinstance(model_type, str) or not model_type:
        raise KvplanInputError(f"{path} has no model_type.",
                               "Pass the model's own config.json (it names its model_type).")
    if text_key and not text_type:
        # Minimal nested configs (gemma-3-4b-it) omit text_config.model_type.
        text_type = {"gemma3": "gemma3_text", "gemma4": "gemma4_text", "llama4": "llama4_text",
                     "mllama": "mllama_text_model", "qwen3_5": "qwen3_5_text"}.get(model_type, model_type)
        notes.append(f"{text_key}.model_type absent: assuming {text_type}")
    arch_list = cfg.get("architectures") or text_plain.get("architectures") or []
    architecture = arch_list[0] if isinstance(arch_list, list) and arch_list and isinstance(arch_list[0], str) else None
    if architecture is None:
        architecture = vreg.arch_for_model_type(model_type)
        if architecture is not None:
            notes.append(f"architectures absent: model_type {model_type!r} is vLLM's {architecture}")
    architecture = _routed_architecture(cfg, model_type, architecture, notes)
    return model_type, text_plain, text_key, text_raw, str(text_type), architecture


def _routed_architecture(cfg: dict[str, Any], model_type: str, architecture: str | None,
                         notes: list[str]) -> str | None:
    """The architecture vLLM builds when its config convertor reroutes a text architecture.

    vLLM 0.33's model-arch config convertors send a DeepSeek-V4 config that carries a vision tower
    (vision_n_layers > 0, published under the text architecture) to DeepseekV4ForConditionalGeneration,
    and a MiMo-V2 config with a vision_config to MiMoV2OmniForCausalLM.
    """
    routed = None
    vision_layers = cfg.get("vision_n_layers")
    if (model_type == "deepseek_v4" and architecture == "DeepseekV4ForCausalLM"
            and isinstance(vision_layers, int) and vision_layers > 0):
        routed = "DeepseekV4ForConditionalGeneration"
    elif model_type in ("mimo_v2", "mimo_v2_flash") and cfg.get("vision_config"):
        routed = "MiMoV2OmniForCausalLM"
    if routed is None or routed == architecture:
        return architecture
    notes.append(f"architectures names {architecture}; vLLM builds {routed} for this config (it has a vision tower)")
    return routed


# Multimodal architectures whose language model is another architecture's module (geometry keys
# are read as that module reads them).
_LANGUAGE_MODEL_MODULE = {"MiMoV2OmniForCausalLM": "vllm.model_executor.models.mimo_v2"}


def _check_known(cfg: dict[str, Any], model_type: str, text_type: str, architecture: str | None,
                 path: Path, release: str | None = None) -> str | None:
    """Refuse what vLLM cannot load or build whatever the flags; returns why vLLM would run the
    checkpoint's own code (auto_map), for the --trust-remote-code check of the planner."""
    remote = None
    if architecture is not None:
        listed = cfg.get("architectures")
        archs = tuple(a for a in listed if isinstance(a, str)) if isinstance(listed, list) else ()
        archs = archs if archs and archs[0] == architecture else (architecture,)
        auto_map = cfg.get("auto_map") if isinstance(cfg.get("auto_map"), dict) else None
        # A Mistral-format params.json is converted by vLLM's own parser, not looked up by model_type.
        reason = vreg.load_refusal(model_type, archs, auto_map, vllm_parser=path.name == PARAMS, release=release)
        if reason:
            raise KvplanInputError(
                f"{path}: {reason}.",
                "Check model_type and architectures for typos, or pass the checkpoint's own config.json "
                "(its auto_map names the configuration and model code --trust-remote-code loads), or serve it "
                "with a vLLM release that supports it.")
        remote = vreg.remote_code_reason(model_type, archs, auto_map, release)
    known = (model_type in STANDARD_DECODER_TYPES or model_type in WRAPPER_TYPES
             or model_type in FAMILY_DEFAULTS or text_type in STANDARD_DECODER_TYPES
             or (architecture is not None and (vreg.is_registered(architecture)
                                               or vreg.modelled_release(release).registers(architecture)
                                               or architecture in vreg.registry()["refused"]))
             or vreg.known_model_type(model_type))
    if not known:
        raise KvplanInputError(
            f"unknown model_type {model_type!r} in {path}.",
            f"kvplan plans the architectures vLLM {vreg.vllm_version()} builds (llama, qwen3, gemma3, "
            "deepseek_v3, ...); check the spelling, or pass the config.json whose `architectures` "
            "names the vLLM architecture.")
    return remote


def _layer_and_head_counts(c: _Cfg, is_enc_dec: bool, path: Path, notes: list[str]) -> tuple[int, Any]:
    if is_enc_dec:
        num_layers = c.get("num_decoder_layers", "decoder_layers", "num_layers", "num_hidden_layers")
        num_heads = c.get("decoder_attention_heads", "num_heads", "num_attention_heads")
    else:
        num_layers = c.get("num_hidden_layers", "n_layer", "num_layers", "n_layers")
        num_heads = c.get("num_attention_heads", "n_head", "num_heads", "n_heads")
    if num_layers is None:
        num_layers = c.get("num_hidden_layers", "num_layers", hf=True)
    if num_layers is None:
        # Hybrid configs whose config class derives the layer count from the layer map.
        for k in ("layers_block_type", "hybrid_override_pattern", "layer_types"):
            v = c.raw.get(k)
            if isinstance(v, (list, str)) and v:
                num_layers = len(v)
                notes.append(f"num_hidden_layers absent: {len(v)} layers, the length of {k}")
                break
    if num_heads is None:
        num_heads = c.get("num_attention_heads", "num_heads", hf=True)
    if num_layers is None:
        raise KvplanInputError(f"{path}: cannot find the number of layers (num_hidden_layers).",
                               "Pass the model's full config.json.")
    return check_count(str(path), "num_hidden_layers", _int(num_layers, "num_hidden_layers", path),
                       limits().max_layers), num_heads


def _kv_heads(c: _Cfg, architecture: str | None, module: str, num_heads: Any, notes: list[str]) -> Any:
    """KV heads as vLLM's model class reads them (per-architecture spellings and MQA flags)."""
    if module.endswith(".step1"):
        # vLLM's Step1: num_attention_groups, else num_key_value_heads, else one KV head.
        num_kv_heads = c.raw.get("num_attention_groups", c.raw.get("num_key_value_heads", 1))
        notes.append(f"{architecture}: num_attention_groups -> {num_kv_heads} KV heads")
        return num_kv_heads
    if module.endswith(".step3_text") or c.model_type == "step3_text":
        # vLLM's Step3 text attention is built with one KV head (num_attention_groups is not read).
        notes.append(f"{architecture}: vLLM builds its attention with 1 KV head (multi-query)")
        return 1
    num_kv_heads = c.get("num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num")
    if module.endswith(".nemotron_parse3_5"):
        # vLLM's Nemotron Parse 3.5 self-attention: decoder.self_attention_kv_heads (None: = heads).
        num_kv_heads = c.raw.get("self_attention_kv_heads")
        if num_kv_heads is not None:
            notes.append(f"{architecture}: decoder.self_attention_kv_heads -> {num_kv_heads} KV heads")
    if num_kv_heads is None and not c.raw.get("multi_query"):
        # The config class's own default when it declares one (None means "= heads", below).
        num_kv_heads = c.get("num_key_value_heads", hf=True)
    if architecture == "FalconForCausalLM" and not c.raw.get("new_decoder_architecture"):
        # vLLM's Falcon: num_kv_heads only with new_decoder_architecture; else multi_query
        # (the config class default: true) means one KV head, and without it KV heads = heads.
        mq = c.raw.get("multi_query", True)
        num_kv_heads = 1 if mq else num_heads
        notes.append(f"Falcon without new_decoder_architecture: multi_query {mq} -> {num_kv_heads} KV head(s)")
    if module.endswith(".chatglm"):
        # vLLM's ChatGLM: multi_query_group_num KV heads only with multi_query_attention.
        mqa = bool(c.raw.get("multi_query_attention"))
        num_kv_heads = c.raw.get("multi_query_group_num") if mqa else num_heads
        notes.append(f"ChatGLM: multi_query_attention {mqa} -> {num_kv_heads} KV heads")
    if num_kv_heads is None and c.raw.get("multi_query") is True:
        num_kv_heads = 1
        notes.append("multi_query: true: one KV head (MQA)")
    if num_kv_heads is None and num_heads is not None:
        num_kv_heads = num_heads
        notes.append("num_key_value_heads absent: multi-head attention, KV heads = query heads")
    return num_kv_heads


def _head_dim(c: _Cfg, hidden: Any, num_heads: Any, notes: list[str]) -> Any:
    head_dim = c.get("head_dim", "d_kv", "kv_channels", "attention_head_dim")
    if head_dim is None:  # the config class's own default when it declares one
        head_dim = c.get("head_dim", hf=True)
    if head_dim is None and not hidden:
        hidden = c.get("hidden_size", "d_model", hf=True)
    if head_dim is None and hidden and num_heads:
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (hidden, num_heads)):
            raise KvplanInputError(f"hidden_size {hidden!r} and num_attention_heads {num_heads!r} must be positive "
                                   "integers (head_dim is hidden_size / heads).", "Fix the values in config.json.")
        head_dim = hidden // num_heads
        notes.append(f"head_dim absent: hidden_size {hidden} / heads {num_heads} = {head_dim}")
    return head_dim


def _attention_geometry(text_raw: _Reads, module: str, architecture: str | None, num_heads: Any,
                        num_kv_heads: Any, head_dim: Any, path: Path,
                        notes: list[str]) -> tuple[MlaDims | None, Any, Any]:
    """MLA dims (or none), KV heads and head size after the per-module MLA readings."""
    mla = _mla_dims(text_raw)
    if module.endswith(".zamba2") and isinstance(text_raw.get("attention_head_dim"), int):
        # vLLM's Zamba2 attention: attention_head_dim (its shared block attends over the
        # concatenated [hidden, embedding] input), not kv_channels.
        head_dim = text_raw["attention_head_dim"]
        notes.append(f"{architecture}: head size attention_head_dim {head_dim}")
    if module.endswith(".bailing_moe_linear"):
        # Ling/Ring 2.5 (BailingMoeV2.5): full-attention layers are MLA, with vLLM's defaults for the
        # MLA keys the config omits (kv_lora_rank 512, qk_rope_head_dim 64, qk_nope / v 128).
        mla = MlaDims(kv_lora_rank=_int(text_raw.get("kv_lora_rank", 512), "kv_lora_rank", path),
                      qk_rope_head_dim=_int(text_raw.get("qk_rope_head_dim", 64), "qk_rope_head_dim", path),
                      qk_nope_head_dim=_int(text_raw.get("qk_nope_head_dim", 128), "qk_nope_head_dim", path),
                      v_head_dim=_int(text_raw.get("v_head_dim", 128), "v_head_dim", path))
        notes.append(f"{architecture}: full-attention layers are MLA (kv_lora_rank {mla.kv_lora_rank}, "
                     f"qk_rope_head_dim {mla.qk_rope_head_dim})")
    if mla is not None and module.endswith(".minicpm3"):
        # MiniCPM3's vLLM class builds dense attention from the MLA-style keys: KV heads = query
        # heads, head size qk_nope_head_dim + qk_rope_head_dim for K and V.
        num_kv_heads = num_heads
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        notes.append(f"{architecture}: dense attention, head size qk_nope_head_dim + qk_rope_head_dim "
                     f"= {head_dim}, KV heads = query heads")
        mla = None
    return mla, num_kv_heads, head_dim


def _bailing_linear_layers(raw: dict[str, Any], layers: list[LayerArch], n: int, path: Path,
                           notes: list[str]) -> tuple[list[LayerArch], int]:
    # vLLM's is_linear_layer: layer i is linear attention when layer_group_size > 0 and
    # (i + 1) % layer_group_size != 0; the others are MLA.
    lgs = _int(raw.get("layer_group_size", 1), "layer_group_size", path)
    return [LayerArch(index=la.index, kind="linear_attention",
                      source=f"layer_group_size {lgs}: ({la.index} + 1) % {lgs} != 0, linear attention")
            if lgs > 0 and (la.index + 1) % lgs else
            la.model_copy(update={"source": f"layer_group_size {lgs}: full attention (MLA)"})
            for la in layers], n


def _longcat_layers(raw: dict[str, Any], layers: list[LayerArch], n: int, path: Path,
                    notes: list[str]) -> tuple[list[LayerArch], int]:
    # LongCat-Flash: two MLA attention modules per decoder layer (self_attn.0 / .1); vLLM's model
    # runner numbers their caches 2 * layer + module.
    check_count(str(path), "2 * num_layers", 2 * n, limits().max_layers)
    out = [la.model_copy(update={"index": 2 * la.index + j,
                                 "source": la.source + f" (LongCat-Flash attention module {j} of layer {la.index})"})
           for la in layers for j in (0, 1)]
    notes.append("LongCat-Flash: two attention modules per decoder layer, numbered 2 * layer + module as vLLM does")
    return out, 2 * n


def _cosmos3_edge_layers(raw: dict[str, Any], layers: list[LayerArch], n: int, path: Path,
                         notes: list[str]) -> tuple[list[LayerArch], int]:
    # vLLM's Cosmos3 Edge runs its dense text model as Nemotron-H blocks: layers_block_type
    # ["full_attention", "mlp"] * num_hidden_layers, so decoder layer i's attention is layer 2i.
    check_count(str(path), "2 * num_hidden_layers", 2 * n, limits().max_layers)
    out = [x for la in layers for x in (
        la.model_copy(update={"index": 2 * la.index,
                              "source": la.source + f" (Cosmos3 Edge: Nemotron-H block {2 * la.index})"}),
        LayerArch(index=2 * la.index + 1, kind="none",
                  source=f"Cosmos3 Edge: Nemotron-H MLP block {2 * la.index + 1} (no KV cache)"))]
    notes.append("Cosmos3 Edge: vLLM builds the text model as Nemotron-H attention/MLP block pairs "
                 "(attention at even layer indices)")
    return out, 2 * n


def _zamba2_layers(raw: dict[str, Any], layers: list[LayerArch], n: int, path: Path,
                  notes: list[str]) -> tuple[list[LayerArch], int]:
    """vLLM's Zamba2: every decoder layer is a Mamba2 layer; a 'hybrid' layer also applies the shared
    attention block, whose caches vLLM numbers first (model.attn.<j>, j-th hybrid layer), the Mamba
    layers after them (num_hybrid + i)."""
    attn = [la for la in layers if la.kind not in ("mamba", "linear_attention", "none")]
    out = [la.model_copy(update={"index": j, "source": la.source + f" (Zamba2 shared attention block {j}, "
                                 f"applied at layer {la.index}; vLLM numbers it {j})"})
           for j, la in enumerate(attn)]
    out += [LayerArch(index=len(attn) + la.index, kind="mamba",
                      source=f"Zamba2 Mamba2 layer {la.index} (vLLM numbers it {len(attn) + la.index})")
            for la in layers]
    check_count(str(path), "num_hidden_layers + hybrid layers", len(out), limits().max_layers)
    notes.append(f"Zamba2: {len(attn)} shared-attention applications numbered 0..{len(attn) - 1}, then the "
                 f"{n} Mamba2 layers, as vLLM numbers their caches")
    return out, len(out)


def _restack(module: str, raw: dict[str, Any], layers: list[LayerArch], n: int, path: Path,
             notes: list[str]) -> tuple[list[LayerArch], int]:
    """vLLM modules whose model class renumbers or re-kinds the decoder stack's layers."""
    for suffix, fn in ((".iquest_loopcoder", _loop_layers), (".bailing_moe_linear", _bailing_linear_layers),
                       (".longcat_flash", _longcat_layers), (".longcat_flash_ngram", _longcat_layers),
                       (".cosmos3_edge", _cosmos3_edge_layers),
                       (".zamba2", _zamba2_layers)):
        if module.endswith(suffix):
            return fn(raw, layers, n, path, notes)
    return layers, n


def _unused_geometry_keys(text_plain: dict[str, Any], text_key: str, cfg: dict[str, Any], text_raw: _Reads,
                          arch_status: str, architecture: str | None) -> tuple[set[str], set[str], list[str]]:
    raw_keys = set(text_plain) | (set() if text_key else set(cfg))
    read = set(text_raw.read) | {"model_type", "architectures"}
    unused = sorted(k for k in raw_keys if k not in read and vreg.geometry_like(k))
    if arch_status == vreg.VERIFIED:
        # Keys the verified configs of this architecture had too were part of what was checked.
        seen = vreg.verified_keys(architecture)
        unused = [k for k in unused if k not in seen]
    return raw_keys, read, unused


@input_boundary(source_arg="path", fix="Fix the value in config.json.")
def parse_hf_config(cfg: dict[str, Any], path: Path, release: str | None = None) -> ModelArch:
    """Turn a loaded config.json into ModelArch; unknown model types are input errors."""
    check_config_values(cfg, str(path))  # depth and layer counts; values are checked where read (docs/limits.md)
    notes: list[str] = []
    model_type, text_plain, text_key, text_raw, text_type, architecture = _resolve_types(cfg, path, notes)
    remote_code = _check_known(cfg, model_type, text_type, architecture, path, release)
    c = _Cfg(text_raw, text_type, notes)
    if text_key:
        notes.append(f"language model read from {text_key} ({text_type})")
    module = (vreg.registry()["architectures"].get(architecture or "") or {}).get("vllm_module", "")
    module = _LANGUAGE_MODEL_MODULE.get(architecture or "", module)

    is_enc_dec = bool(cfg.get("is_encoder_decoder")) or text_type in ("t5", "mt5", "bart", "whisper")
    num_layers, num_heads = _layer_and_head_counts(c, is_enc_dec or text_key == "decoder", path, notes)
    hidden = c.get("hidden_size", "n_embd", "d_model", "dim")
    num_kv_heads = _kv_heads(c, architecture, module, num_heads, notes)
    head_dim = _head_dim(c, hidden, num_heads, notes)
    max_pos = c.get("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_target_positions")
    if max_pos is None and text_key:
        max_pos = _Reads(cfg, source=str(path)).get("max_position_embeddings")

    mla, num_kv_heads, head_dim = _attention_geometry(text_raw, module, architecture, num_heads,
                                                      num_kv_heads, head_dim, path, notes)
    unknown_types: list[str] = []
    layers = _layers(c, text_type, model_type, num_layers, num_heads, num_kv_heads, head_dim,
                     mla, path, notes, architecture, module, unknown_types)
    layers, num_layers = _restack(module, text_raw, layers, num_layers, path, notes)
    layers = _cross_attention(c, module, layers, path, notes, cfg)
    layers = _nemotron_parse_cross_attention(cfg, module, layers, path, notes)
    layers = _deepseek_v4_layers(c, module, layers, num_heads, path, notes)
    # sections vLLM's own config class fills in when absent (0.33's MiniMaxM3TextConfig: its sparse layers)
    sections = vreg.class_section_defaults(model_type, text_type, release)
    layers = flagship_layers(module, {**sections, **text_raw}, layers, path, notes)
    layers = causal_audio_encoder_caches(cfg, architecture, layers, path, notes)
    layers = with_state_caches(layers, text_raw, module, architecture)
    pooling = vreg.pooling_without_kv(architecture)
    if pooling:
        layers = [LayerArch(index=la.index, kind="encoder_only",
                            source=f"{architecture}: vLLM runs it as a pooling model (encoder-only attention, "
                                   "no KV cache)") for la in layers]
        notes.append(f"{architecture}: a pooling model in vLLM {vreg.vllm_version()}: no KV cache")
    arch_status = vreg.status(architecture)
    planned = vreg.modelled_release(release)
    if arch_status == vreg.UNREGISTERED and architecture and planned.registers(architecture):
        # Registered by the planned release only (e.g. 0.34's MistralLarge4ForCausalLM): the 0.33.0
        # architecture oracle never built it.
        arch_status = f"registered from vLLM {planned.vllm_version}, not measured by the 0.33.0 architecture oracle"
    raw_keys, read, unused = _unused_geometry_keys(text_plain, text_key, cfg, text_raw, arch_status, architecture)
    return ModelArch(
        model_type=model_type, text_model_type=text_type or model_type, architecture=architecture,
        num_layers=num_layers, config_dtype=_model_dtype(text_raw, cfg, path),
        max_position_embeddings=max_pos if isinstance(max_pos, int) else None,
        is_encoder_decoder=is_enc_dec, layers=tuple(layers), uses_mla=mla is not None,
        mamba_ssm_cache_dtype=text_raw.get("mamba_ssm_cache_dtype") or text_raw.get("mamba_ssm_dtype"),
        notes=tuple(dict.fromkeys(notes)),
        architecture_status=arch_status,
        refused_reason=vreg.refusal(architecture, release) if architecture else None,
        remote_code=remote_code,
        keys_read=tuple(sorted(k for k in read if k in raw_keys)),
        unused_geometry_keys=tuple(unused),
        unknown_layer_types=tuple(dict.fromkeys(unknown_types)),
        pooling=pooling, mtp_layers=mtp_layer_count(text_raw), profile_dims=profile_dims(text_plain or cfg, cfg),
        fp8_kv_cache=text_type == MISTRAL_LARGE_4 and text_raw.get("fp8_kv_cache") is True,
    )


def _cross_attention(c: _Cfg, module: str, layers: list[LayerArch], path: Path,
                     notes: list[str], top: dict[str, Any]) -> list[LayerArch]:
    """Whisper / Cohere Transcribe: vLLM's decoder layer builds a cross-attention (CrossAttentionSpec) cache
    next to its self-attention one, filled once per request with the audio encoder's output tokens."""
    if module.endswith(".cohere_asr"):
        enc, why = _cohere_asr_encoder_tokens(top, path)
    elif module.endswith(".whisper"):
        enc, why = c.get("max_source_positions", hf=True), "max_source_positions"
        if not isinstance(enc, int) or isinstance(enc, bool) or not 1 <= enc <= MAX_TOKENS:
            raise KvplanInputError(f"{path}: max_source_positions must be a positive integer, got {enc!r}.",
                                   "Fix max_source_positions in config.json (the audio encoder's length).")
    else:
        return layers
    notes.append(f"each decoder layer also caches cross-attention K/V for {enc} encoder tokens per request ({why})")
    return [la.model_copy(update={"cross_attention_tokens": enc}) if la.kind not in NO_KV_KINDS else la
            for la in layers]


def _nemotron_parse_cross_attention(cfg: dict[str, Any], module: str, layers: list[LayerArch], path: Path,
                                    notes: list[str]) -> list[LayerArch]:
    """Nemotron Parse: each MBart decoder layer also registers a cross-attention (CrossAttentionSpec)
    cache over the image's encoder tokens; vLLM's processor counts them as
    (image_size[0] // patch) * ((image_size[1] // patch) // 4) + 1 (encoder.patch_size)."""
    if not module.endswith(".nemotron_parse"):
        return layers
    size = cfg.get("image_size")
    patch = (cfg.get("encoder") or {}).get("patch_size") if isinstance(cfg.get("encoder"), dict) else None
    ok = (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)
          and isinstance(patch, int) and not isinstance(patch, bool) and patch > 0)
    if not ok:
        raise KvplanInputError(f"{path}: Nemotron Parse needs image_size [height, width] and encoder.patch_size "
                               f"(positive integers), got {size!r} and {patch!r}.",
                               "Pass the model's full config.json.")
    assert isinstance(size, list) and isinstance(patch, int)
    enc = (size[0] // patch) * ((size[1] // patch) // 4) + 1
    if not 1 <= enc <= MAX_TOKENS:
        raise KvplanInputError(f"{path}: image_size {size} gives {enc} encoder tokens.", "Fix image_size.")
    notes.append(f"each decoder layer also caches cross-attention K/V for {enc} image tokens per request "
                 f"(image_size {size}, encoder.patch_size {patch})")
    return [la.model_copy(update={"cross_attention_tokens": enc}) if la.kind not in NO_KV_KINDS else la
            for la in layers]


def _cohere_asr_encoder_tokens(top: dict[str, Any], path: Path) -> tuple[int, str]:
    """Encoder tokens of the longest clip, as vLLM's cohere_asr.py counts them: mel frames of
    max_audio_clip_s at the preprocessor's hop (window_stride), over the encoder's subsampling_factor."""
    pre: Any = top.get("preprocessor")
    enc: Any = top.get("encoder")
    try:
        rate = pre["sample_rate"]
        hop = int(pre["window_stride"] * rate)
        frames = int(top["max_audio_clip_s"] * rate) // hop
        tokens = math.ceil(frames / enc["subsampling_factor"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
        raise KvplanInputError(f"{path}: Cohere Transcribe needs preprocessor.sample_rate / window_stride, "
                               "max_audio_clip_s and encoder.subsampling_factor (positive numbers).",
                               "Pass the model's full config.json.") from None
    if not 1 <= tokens <= MAX_TOKENS:
        raise KvplanInputError(f"{path}: max_audio_clip_s gives {tokens} encoder tokens per request.",
                               "Fix max_audio_clip_s / preprocessor in config.json.")
    return tokens, "max_audio_clip_s over the preprocessor hop and encoder.subsampling_factor"


def _deepseek_v4_layers(c: _Cfg, module: str, layers: list[LayerArch], num_heads: Any, path: Path,
                        notes: list[str]) -> list[LayerArch]:
    """DeepSeek-V4: every layer is compressed MLA (one latent of head_dim, stored per
    compress_rates[layer_types[i]] tokens) with a sliding-window cache, as vLLM's DeepseekV4Attention
    builds it."""
    if not module.endswith(".deepseek_v4"):
        return layers
    raw = c.raw
    head = _int(c.get("head_dim", hf=True), "head_dim", path)
    rope = _deepseek_v4_rope_dim(c, head, path)
    types, rates = _deepseek_v4_types(raw, len(layers), path, notes)
    if rope >= head:
        raise KvplanInputError(f"{path}: DeepSeek-V4 needs qk_rope_head_dim < head_dim, got {rope} and {head}.",
                               "Pass the model's full config.json.")
    ihd = c.get("index_head_dim", hf=True) or 128
    topk = raw.get("index_topk")
    window = _int(c.get("sliding_window", hf=True) or 128, "sliding_window", path)
    out = []
    for la in layers:
        r = rates.get(types[la.index], 0)
        r = max(1, r if isinstance(r, int) and not isinstance(r, bool) else 0)
        mla = MlaDims(kv_lora_rank=head - rope, qk_rope_head_dim=rope, qk_nope_head_dim=head - rope,
                      v_head_dim=head, index_topk=topk if isinstance(topk, int) else None,
                      index_head_dim=_int(ihd, "index_head_dim", path) if r == 4 else None)
        out.append(LayerArch(index=la.index, kind="mla", num_heads=num_heads, num_kv_heads=1, head_size=head,
                             head_size_v=0, mla=mla, dsv4_compress_ratio=r, dsv4_window=window,
                             source=f"DeepSeek-V4 layer_types[{la.index}] {types[la.index]!r}: compress ratio {r} "
                                    "(compress_rates), sliding-window cache of sliding_window tokens"))
    notes.append("DeepSeek-V4: compressed MLA latent per compress_rates of each layer type, plus sliding-window, "
                 "compressor-state and indexer caches")
    return out


# transformers 5.20 DeepseekV4Config: the legacy per-layer `compress_ratios` (0 / 4 / 128, one per layer
# and MTP layer) become layer_types, `compress_rates` defaults to these rates, and the legacy scalar
# `compress_rate_csa` / `compress_rate_hca` override them (configuration_deepseek_v4.py::__post_init__).
_DSV4_RATIO_TYPES = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
_DSV4_DEFAULT_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
_DSV4_LEGACY_RATES = {"compress_rate_csa": "compressed_sparse_attention",
                      "compress_rate_hca": "heavily_compressed_attention"}


def _deepseek_v4_types(raw: dict[str, Any], n: int, path: Path, notes: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Layer types and compression rates as transformers' DeepseekV4Config builds them from any of
    its spellings (vLLM's DeepseekV4Attention then reads compress_rates[layer_types[i]])."""
    fix = "Pass the model's full config.json."
    rates = raw.get("compress_rates")
    if rates is None:
        rates = dict(_DSV4_DEFAULT_RATES)
    elif not isinstance(rates, dict):
        raise KvplanInputError(f"{path}: DeepSeek-V4 compress_rates must be a map of layer type to rate, got "
                               f"{rates!r:.80}.", fix)
    for key, layer_type in _DSV4_LEGACY_RATES.items():
        if raw.get(key) is not None:
            rates = {**rates, layer_type: raw[key]}
            notes.append(f"DeepSeek-V4: {key} {raw[key]!r} sets compress_rates[{layer_type!r}] (transformers)")
    types = raw.get("layer_types")
    ratios = raw.get("compress_ratios")
    if types is None and ratios is not None:
        if not isinstance(ratios, list) or not all(isinstance(r, int) and not isinstance(r, bool)
                                                   and r in _DSV4_RATIO_TYPES for r in ratios):
            raise KvplanInputError(f"{path}: DeepSeek-V4 compress_ratios must list 0, 4 or 128 per layer, got "
                                   f"{ratios!r:.80}.", fix)
        types = [_DSV4_RATIO_TYPES[r] for r in ratios]
        notes.append(f"DeepSeek-V4: layer_types from the legacy compress_ratios ({len(ratios)} entries, the MTP "
                     f"layers after the first {n} are not part of the model), as transformers converts them")
    if types is None:
        types = ["heavily_compressed_attention"] * min(n, 2) + [
            "compressed_sparse_attention" if i % 2 else "heavily_compressed_attention" for i in range(max(n - 2, 0))]
        notes.append("DeepSeek-V4: layer_types absent: the DeepseekV4Config default (two heavily compressed "
                     "layers, then compressed sparse / heavily compressed alternating)")
    if not isinstance(types, list) or len(types) < n or not all(t in _DSV4_RATIO_TYPES.values() for t in types[:n]):
        raise KvplanInputError(f"{path}: DeepSeek-V4 layer_types must name one of {sorted(_DSV4_RATIO_TYPES.values())} "
                               f"per layer ({n}), got {types!r:.80}.", fix)
    return types[:n], rates


def _deepseek_v4_rope_dim(c: _Cfg, head: int, path: Path) -> int:
    """DeepseekV4Config: qk_rope_head_dim = int(head_dim * partial_rotary_factor), the factor being
    the config's, else the legacy qk_rope_head_dim / head_dim, else 64 / 512."""
    prf = c.raw.get("partial_rotary_factor")
    if isinstance(prf, (int, float)) and not isinstance(prf, bool) and prf > 0:
        return int(head * prf)
    legacy = c.raw.get("qk_rope_head_dim")
    if legacy is not None:
        return _int(legacy, "qk_rope_head_dim", path)
    return int(head * 64 / 512)


def _loop_layers(raw: dict[str, Any], layers: list[LayerArch], n: int, path: Path,
                 notes: list[str]) -> tuple[list[LayerArch], int]:
    """IQuest-LoopCoder: vLLM's model class runs the decoder stack `loop_num` times (default 2) and
    builds one attention per layer and loop: loop 0 is the layer itself, loop k > 0 is layer
    k * num_hidden_layers + i, a sliding layer with window `loop_window_size` (default 64)."""
    loops = raw.get("loop_num", 2)
    window = raw.get("loop_window_size", 64)
    for key, v in (("loop_num", loops), ("loop_window_size", window)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise KvplanInputError(f"{path}: {key} must be a positive integer, got {v!r}.",
                                   f"Fix {key} in config.json (IQuest-LoopCoder).")
    check_count(str(path), "num_hidden_layers * loop_num", n * loops, limits().max_layers)
    # LoopCoderAttention builds layer i's attention for every loop together (i, n + i, 2n + i, ...)
    out = [la.model_copy(update={"build_order": la.index * loops}) for la in layers]
    for k in range(1, loops):
        for la in layers:
            if la.kind in ("mamba", "linear_attention", "none"):
                continue
            out.append(la.model_copy(update={
                "index": k * n + la.index, "build_order": la.index * loops + k,
                "kind": "sliding_attention", "sliding_window": window,
                "source": f"IQuest-LoopCoder loop {k} of layer {la.index}: loop_window_size {window} "
                          f"(loop_num {loops})"}))
    notes.append(f"IQuest-LoopCoder: {loops} loops over {n} layers, loop 1+ sliding with window {window}")
    return out, n * loops


def _mla_dims(t: dict[str, Any]) -> MlaDims | None:
    if t.get("kv_lora_rank") in (None, 0) or t.get("qk_rope_head_dim") is None:
        return None
    ihd = t.get("index_head_dim") if "index_topk" in t else None
    return MlaDims(kv_lora_rank=t["kv_lora_rank"], qk_rope_head_dim=t["qk_rope_head_dim"],
                   qk_nope_head_dim=t.get("qk_nope_head_dim") or 0,
                   v_head_dim=t.get("v_head_dim") or 0, index_topk=t.get("index_topk"),
                   index_head_dim=ihd if isinstance(ihd, int) and not isinstance(ihd, bool) and ihd > 0
                   else (128 if "index_topk" in t else None))


_LAYER_TYPE_KINDS = {
    "full_attention": "full_attention", "attention": "full_attention", "global": "full_attention",
    "sliding_attention": "sliding_attention", "local": "sliding_attention",
    "chunked_attention": "chunked_attention", "linear_attention": "linear_attention",
    "mamba": "mamba", "mamba2": "mamba", "conv": "mamba", "short_conv": "mamba",
    # Layers without attention in interleaved maps (Dory: attention, mlp, attention, ...).
    "mlp": "none", "moe": "none", "ffn": "none",
}


_BLOCK_TYPE_KINDS = {
    "attention": "full_attention", "full_attention": "full_attention", "sliding_attention": "sliding_attention",
    "mamba": "mamba", "mamba2": "mamba", "linear_attention": "linear_attention",
    "moe": "none", "mlp": "none", "ffn": "none",
}


@dataclass
class _Stack:
    """What the layer-kind readers of `_layers` share."""

    c: _Cfg
    raw: dict[str, Any]
    text_type: str
    n: int
    path: Path
    notes: list[str]
    architecture: str | None
    module: str
    mla: MlaDims | None
    window: int | None
    layer_types: Any
    unknown_types: list[str]

    @property
    def has_layer_types(self) -> bool:
        return isinstance(self.layer_types, list) and bool(self.layer_types)


_Kinds = tuple[list[str], list[str]]


def _kinds_attention_free(s: _Stack) -> _Kinds | None:
    if s.architecture not in ATTENTION_FREE_ARCHS:
        return None
    return ["mamba"] * s.n, [f"{s.architecture}: attention-free (state-space) model"] * s.n


def _kinds_gpt_oss(s: _Stack) -> _Kinds | None:
    if not (s.module.endswith(".gpt_oss") and s.window is not None):
        return None
    # vLLM's GptOss attention slides on even layers (layer_idx % 2 == 0), whatever layer_types says.
    return (["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(s.n)],
            [f"vLLM's GptOss: layer {i} {'even: sliding' if i % 2 == 0 else 'odd: full'} "
             "(layer_types is not read)" for i in range(s.n)])


def _kinds_kda(s: _Stack) -> _Kinds | None:
    """Kimi-Linear / Kimi-K3 (vLLM's kimi_k3 module): layer i is KDA linear attention when i + 1 is in
    linear_attn_config.kda_layers (1-based), else MLA."""
    lac = s.raw.get("linear_attn_config") if s.module.endswith(".kimi_k3") else None
    kda = lac.get("kda_layers") if isinstance(lac, dict) else None
    if not isinstance(kda, list) or s.mla is None:
        return None
    return (["linear_attention" if i + 1 in kda else "mla" for i in range(s.n)],
            [f"linear_attn_config.kda_layers {'contains' if i + 1 in kda else 'lacks'} {i + 1}: "
             f"{'KDA linear attention' if i + 1 in kda else 'MLA latent cache'}" for i in range(s.n)])


def _kinds_mla(s: _Stack) -> _Kinds | None:
    if s.mla is None:
        return None
    return ["mla"] * s.n, ["kv_lora_rank present: MLA latent cache"] * s.n


def _kinds_mimo_v2(s: _Stack) -> _Kinds | None:
    if not (s.module.endswith(".mimo_v2") and isinstance(s.raw.get("hybrid_layer_pattern"), list)):
        return None
    # MiMo-V2-Flash: hybrid_layer_pattern[i] == 1 is a sliding layer (vLLM's is_sliding).
    hlp = s.raw["hybrid_layer_pattern"]
    if len(hlp) < s.n:
        raise KvplanInputError(f"{s.path}: hybrid_layer_pattern has {len(hlp)} entries for {s.n} layers.",
                               "Fix hybrid_layer_pattern or num_hidden_layers.")
    if isinstance(s.raw.get("sliding_window_size"), int):
        s.window = s.raw.get("sliding_window_size")
    return (["sliding_attention" if v == 1 else "full_attention" for v in hlp[:s.n]],
            [f"hybrid_layer_pattern[{i}] = {v!r} (1 = sliding, MiMo-V2)" for i, v in enumerate(hlp[:s.n])])


def _kinds_nas_blocks(s: _Stack) -> _Kinds | None:
    blocks = s.raw.get("block_configs") if s.module.endswith(".nemotron_nas") else None
    if not isinstance(blocks, list) or not blocks:
        return None
    # vLLM's DeciLM (Nemotron-NAS): block_configs[i].attention.no_op removes layer i's attention.
    if len(blocks) < s.n:
        raise KvplanInputError(f"{s.path}: block_configs has {len(blocks)} entries for {s.n} layers.",
                               "Fix block_configs or num_hidden_layers.")
    no_op = [bool(((b or {}).get("attention") or {}).get("no_op")) if isinstance(b, dict) else False
             for b in blocks[:s.n]]
    return (["none" if x else "full_attention" for x in no_op],
            [f"block_configs[{i}].attention.no_op = {str(x).lower()}" for i, x in enumerate(no_op)])


def _kinds_override_pattern(s: _Stack) -> _Kinds | None:
    pattern = s.raw.get("hybrid_override_pattern")
    if not (isinstance(pattern, str) and pattern):
        return None
    if len(pattern) != s.n:
        raise KvplanInputError(
            f"{s.path}: hybrid_override_pattern has {len(pattern)} entries for {s.n} layers.",
            "Fix hybrid_override_pattern or num_hidden_layers.")
    m = {"M": "mamba", "*": "full_attention", "E": "none", "-": "none"}
    return ([m.get(ch, "none") for ch in pattern],
            [f"hybrid_override_pattern[{i}] = {ch!r}" for i, ch in enumerate(pattern)])


def _kinds_from_names(s: _Stack, key: str, values: list[Any], table: dict[str, str]) -> _Kinds:
    kinds, srcs = [], []
    for i, v in enumerate(values[:s.n]):
        k = table.get(str(v))
        if k is None:
            # Said out loud (KV604), never silently mapped: planned as full attention, the
            # largest per-token KV a layer of this geometry can hold.
            s.unknown_types.append(f"{key}[{i}] = {v!r}")
            s.notes.append(f"{key} value {v!r} unknown to kvplan: planned as full attention (an upper bound)")
            k = "full_attention"
        kinds.append(k)
        srcs.append(f"{key}[{i}] = {v!r}")
    return kinds, srcs


def _kinds_block_types(s: _Stack) -> _Kinds | None:
    block_types = s.raw.get("layers_block_type")
    if not (isinstance(block_types, list) and block_types and not s.has_layer_types):
        return None
    # The newer spelling of a hybrid layer map (transformers writes it from
    # hybrid_override_pattern / attn_layer_period; vLLM's model classes read it).
    if len(block_types) < s.n:
        raise KvplanInputError(f"{s.path}: layers_block_type has {len(block_types)} entries for {s.n} layers.",
                               "Fix layers_block_type or num_hidden_layers.")
    table = _BLOCK_TYPE_KINDS
    if s.module.endswith(".zamba2"):  # a Mamba2 layer that also applies the shared attention block
        table = {**table, "hybrid": "full_attention"}
    return _kinds_from_names(s, "layers_block_type", block_types, table)


def _kinds_attn_period(s: _Stack) -> _Kinds | None:
    per = s.raw.get("attn_layer_period")
    off = s.raw.get("attn_layer_offset") if isinstance(per, int) else None
    if not (isinstance(per, int) and isinstance(off, int) and not s.has_layer_types and per > 0):
        return None
    return (["full_attention" if i % per == off else "mamba" for i in range(s.n)],
            [f"attn_layer_period {per}, attn_layer_offset {off}: attention where i % {per} == {off}"] * s.n)


def _kinds_interval(s: _Stack) -> _Kinds | None:
    if s.has_layer_types:
        return None
    iv = s.raw.get("full_attention_interval")
    if not (isinstance(iv, int) and iv > 0):
        return None
    # Qwen3-Next / Qwen3.5 config classes: layer_types from full_attention_interval.
    return (["linear_attention" if (i + 1) % iv else "full_attention" for i in range(s.n)],
            [f"full_attention_interval {iv}: every {iv}th layer is full attention, the rest linear"] * s.n)


def _kinds_layer_types(s: _Stack) -> _Kinds | None:
    if not s.has_layer_types:
        return None
    table = _LAYER_TYPE_KINDS
    if s.module.endswith(".rnj1"):
        # vLLM's Rnj1 passes a window only to chunked_attention layers: any other entry is full attention.
        table = {**table, "sliding_attention": "full_attention"}
    if s.module.endswith(".deepseek_v4"):
        # DeepSeek-V4's layer types name its compression (compress_rates); _deepseek_v4_layers plans them.
        table = {**table, "compressed_sparse_attention": "full_attention",
                 "heavily_compressed_attention": "full_attention"}
    return _kinds_from_names(s, "layer_types", s.layer_types, table)


def _kinds_gemma_patterns(s: _Stack) -> _Kinds | None:
    if s.text_type == "gemma2":
        # transformers Gemma2Config: even layers slide (sliding if (i + 1) % 2).
        return (["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(s.n)],
                ["Gemma 2 default pattern: even layers slide, odd layers are global"] * s.n)
    p = _sliding_window_pattern(s)
    if p is None:
        return None
    return (["sliding_attention" if (i + 1) % p else "full_attention" for i in range(s.n)],
            [f"sliding_window_pattern {p}: every {p}th layer is global"] * s.n)


# Config classes that derive layer_types from sliding_window_pattern when layer_types is absent, and
# the pattern they use when the key is absent too (transformers 5.20: Gemma3TextConfig and
# Cohere2Config read it from kwargs with these defaults; Exaone4Config / ExaoneMoeConfig declare
# the field, its default is in the generated config_defaults).
_PATTERN_DEFAULTS = {"gemma3_text": 6, "cohere2": 4}


def _sliding_window_pattern(s: _Stack) -> int | None:
    """The period of global layers a config class derives layer_types from (None: not this way).

    Read only here, where layer_types is absent: every config class that reads the key computes
    `(i + 1) % sliding_window_pattern`, so it must be an integer then. Beside a layer_types list
    (EXAONE 4.0 / 4.5 publish "LLLG" there, a spelling Exaone4Config's type allows) nobody reads it.
    """
    raw = s.raw
    key = "sliding_window_pattern" if "sliding_window_pattern" in raw else "_sliding_window_pattern"
    v = raw.unchecked(key) if isinstance(raw, _Reads) else raw.get(key)
    declared = s.text_type in _PATTERN_DEFAULTS or "sliding_window_pattern" in vreg.config_defaults(s.text_type)
    if not declared:
        # Not this config class's key: only a remote-code class may read it, as an integer period.
        if not (isinstance(v, int) and not isinstance(v, bool) and v > 0):
            return None
        check_config_value(str(s.path), key, v, raw)
        return v
    if v is None or v is False or v == 0:
        p = s.c.get("sliding_window_pattern", "_sliding_window_pattern", hf=True)
        if not p:
            p = _PATTERN_DEFAULTS.get(s.text_type)
            if p is None:  # Exaone4Config: (i + 1) % None or % 0 fails, so transformers cannot load it
                raise KvplanInputError(
                    f"{s.path}: sliding_window_pattern is {v!r} and layer_types is absent: the {s.text_type} config "
                    "class cannot derive layer_types from it (transformers cannot load this config, so vLLM cannot "
                    "build it).",
                    "Add layer_types (one entry per layer, as the published config does) or set "
                    "sliding_window_pattern to the period of global layers (an integer).")
            s.notes.append(f"sliding_window_pattern absent from the config: using {p}, the default of the "
                           f"{s.text_type} config class")
        return int(p)
    if isinstance(v, bool) or not isinstance(v, int):
        raise KvplanInputError(
            f"{s.path}: sliding_window_pattern is {v!r} and layer_types is absent: the config class derives "
            "layer_types as (i + 1) % sliding_window_pattern, which needs an integer (transformers cannot load "
            "this config, so vLLM cannot build it).",
            "Add layer_types (one entry per layer, as the published config does) or write the pattern's "
            "period as an integer (\"LLLG\" is 4).")
    check_config_value(str(s.path), "sliding_window_pattern", v, raw)
    return v


def _kinds_llama4(s: _Stack) -> _Kinds | None:
    if s.text_type != "llama4_text":
        return None
    nope = s.raw.get("no_rope_layers")
    chunk = s.c.get("attention_chunk_size")
    if isinstance(nope, list) and len(nope) >= s.n:
        uses_rope = [bool(x) for x in nope[:s.n]]
        src = "no_rope_layers[{i}] = {v}"
    else:
        interval = s.c.get("no_rope_layer_interval") or 4
        uses_rope = [bool((i + 1) % interval) for i in range(s.n)]
        src = f"no_rope_layers absent: every {interval}th layer is a global NoPE layer" + " (layer {i})"
    return (["chunked_attention" if (r and chunk) else "full_attention" for r in uses_rope],
            [src.format(i=i, v=int(r)) for i, r in enumerate(uses_rope)])


def _kinds_window(s: _Stack) -> _Kinds:
    raw, n = s.raw, s.n
    if raw.get("use_sliding_window") is False or s.window is None:
        why = ("use_sliding_window: false" if raw.get("use_sliding_window") is False
               else "no sliding_window")
        return ["full_attention"] * n, [f"{why}: full attention"] * n
    if raw.get("use_sliding_window") is True and isinstance(raw.get("max_window_layers"), int):
        mwl = raw["max_window_layers"]
        return (["sliding_attention" if i >= mwl else "full_attention" for i in range(n)],
                [f"use_sliding_window with max_window_layers {mwl}"] * n)
    return ["sliding_attention"] * n, [f"sliding_window {s.window} without layer_types: every layer slides"] * n


# First reader that recognises the config decides every layer's kind (vLLM's precedence).
_KIND_READERS = (_kinds_attention_free, _kinds_gpt_oss, _kinds_kda, _kinds_mla, _kinds_mimo_v2, _kinds_nas_blocks,
                 _kinds_override_pattern, _kinds_block_types, _kinds_attn_period, _kinds_interval,
                 _kinds_layer_types, _kinds_gemma_patterns, _kinds_llama4)


def _layer_kinds(s: _Stack) -> _Kinds:
    for reader in _KIND_READERS:
        got = reader(s)
        if got is not None:
            kinds, srcs = got
            break
    else:
        kinds, srcs = _kinds_window(s)
    cross = s.raw.get("cross_attention_layers")
    if isinstance(cross, list) and vreg.transformers_backend(s.architecture):
        # vLLM's Transformers backend registers the cross-attention modules as self-attention KV caches.
        s.notes.append(f"{s.architecture}: vLLM 0.33 runs it through its Transformers backend, which gives the "
                       "cross_attention_layers a self-attention KV cache per decoded token")
    elif isinstance(cross, list):
        for i in cross:
            if isinstance(i, int) and 0 <= i < s.n:
                kinds[i] = "cross_attention"
                srcs[i] = f"cross_attention_layers contains {i}"
    return kinds, srcs


def _per_layer_geometry(s: _Stack, num_heads: Any) -> tuple[dict[int, dict[str, int]], Any, Any]:
    """Per-layer KV heads / head size overrides, and the global layers' geometry keys."""
    c, raw, notes = s.c, s.raw, s.notes
    global_kv = c.get("num_global_key_value_heads", hf=True)
    global_hd = c.get("global_head_dim", hf=True)
    per_layer: dict[int, dict[str, int]] = {}
    plc = raw.get("per_layer_config")
    if isinstance(plc, dict):
        # transformers' Gemma 4 writes the global layers' geometry per layer (it pops
        # global_head_dim / num_global_key_value_heads into this map); vLLM reads it per layer.
        for k, v in plc.items():
            if str(k).isdigit() and isinstance(v, dict):
                per_layer[int(k)] = {kk: vv for kk, vv in v.items()
                                     if kk in ("head_dim", "num_key_value_heads") and isinstance(vv, int)}
    elif s.text_type.startswith("gemma4"):
        # transformers' Gemma4TextConfig builds that map from global_head_dim (default 512) and,
        # only when attention_k_eq_v is true, num_global_key_value_heads.
        if global_hd is None and "global_head_dim" not in raw:
            global_hd = 512
            notes.append("global_head_dim absent from the config: using 512, the Gemma 4 config class default")
        if global_kv and not raw.get("attention_k_eq_v"):
            notes.append("num_global_key_value_heads ignored: attention_k_eq_v is not true (Gemma 4 config class)")
            global_kv = None
    per_layer.update(_nas_kv_heads(s, num_heads))
    return per_layer, global_kv, global_hd


def _nas_kv_heads(s: _Stack, num_heads: Any) -> dict[int, dict[str, int]]:
    """vLLM's DeciLM: layer i has num_attention_heads // block_configs[i].attention.n_heads_in_group KV heads."""
    blocks = s.raw.get("block_configs") if s.module.endswith(".nemotron_nas") else None
    out: dict[int, dict[str, int]] = {}
    if not isinstance(blocks, list) or not isinstance(num_heads, int):
        return out
    for i, b in enumerate(blocks[:s.n]):
        att = b.get("attention") if isinstance(b, dict) else None
        g = att.get("n_heads_in_group") if isinstance(att, dict) and not att.get("no_op") else None
        if isinstance(g, int) and not isinstance(g, bool) and g > 0:
            out[i] = {"num_key_value_heads": num_heads // g}
    return out


def _geom_int(v: Any, what: str, i: int, path: Path) -> int:
    """A layer's head count or size: a non-negative integer (an integral float such as 8.0 reads as 8)."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return _int(v, f"layer {i}'s {what}", path)


def _layer_arch(s: _Stack, i: int, kind: str, src: str, geo: dict[str, Any]) -> LayerArch:
    """One attention layer's LayerArch from its kind and the stack's geometry."""
    raw, module = s.raw, s.module
    kvh, hd = geo["num_kv_heads"], geo["head_dim"]
    hv = hd
    if module.endswith(".mimo_v2"):
        # Per-layer-type geometry under its own keys: swa_* for sliding layers.
        pre = "swa_" if kind == "sliding_attention" else ""
        kvh = raw.get(f"{pre}num_key_value_heads", kvh)
        hd = raw.get(f"{pre}head_dim", hd)
        hv = raw.get(f"{pre}v_head_dim") or hd
        src += f" ({pre or 'full-layer '}num_key_value_heads / {pre}head_dim / {pre}v_head_dim)"
    over = geo["per_layer"].get(i)
    if over is not None:
        kvh = over.get("num_key_value_heads", kvh)
        hd = over.get("head_dim", hd)
        src += f" (per_layer_config[{i}]: {over})" if not module.endswith(".nemotron_nas") else \
            f" (block_configs[{i}].attention.n_heads_in_group: {kvh} KV heads)"
    elif kind == "full_attention" and (geo["global_kv"] or geo["global_hd"]):
        kvh = geo["global_kv"] or kvh
        hd = geo["global_hd"] or hd
        src += " (global layer geometry: num_global_key_value_heads / global_head_dim)"
    if kvh is None or hd is None:
        raise KvplanInputError(f"{s.path}: cannot determine KV heads / head size of layer {i}.",
                               "Pass the model's full config.json.")
    return LayerArch(
        index=i, kind=cast(LayerKind, kind), kv_cache_dtype_ignored=geo["no_cache_cfg"],
        sliding_window=s.window if kind == "sliding_attention" else None,
        attention_chunk_size=geo["chunk"] if kind == "chunked_attention" else None,
        num_heads=geo["num_heads"], num_kv_heads=_geom_int(kvh, "num_key_value_heads", i, s.path),
        head_size=_geom_int(hd, "head_dim", i, s.path),
        head_size_v=_geom_int(hv if module.endswith(".mimo_v2") else hd, "v_head_dim", i, s.path),
        has_sinks=geo["sinks"] or (module.endswith(".mimo_v2") and kind == "sliding_attention"
                                   and bool(raw.get("add_swa_attention_sink_bias"))), source=src)


def _mla_layer(s: _Stack, i: int, src: str, num_heads: Any, indexer: int | None,
               indexer_layers: set[int]) -> LayerArch:
    mla = s.mla
    assert mla is not None
    indexer_bytes = (indexer + indexer // 128 * 4) if indexer and i in indexer_layers else 0
    if s.module.endswith(".dots3_note"):
        return _dots3_note_layer(s, i, src, num_heads, indexer_bytes)
    return LayerArch(index=i, kind="mla", num_heads=num_heads, num_kv_heads=1,
                     head_size=mla.kv_lora_rank + mla.qk_rope_head_dim, head_size_v=0,
                     mla=mla, source=src, indexer_bytes_per_token=indexer_bytes)


def _dots3_note_sliding(raw: dict[str, Any], i: int) -> bool:
    lt = raw.get("layer_types")
    return isinstance(lt, list) and i < len(lt) and lt[i] == "sliding_attention"


def _dots3_note_layer(s: _Stack, i: int, src: str, num_heads: Any, indexer_bytes: int) -> LayerArch:
    """vLLM's dots3-note: `layer_types` picks per layer a sliding-window MLA of its own geometry (swa_* keys,
    window sliding_window_size) or the DeepSeek-V3.2 sparse MLA with its indexer, whose cache rows vLLM
    pads to the sliding layers' row (swa_kv_lora_rank + swa_qk_rope_head_dim)."""
    raw, mla = s.raw, s.mla
    assert mla is not None

    def key(name: str, fallback: int) -> int:
        v = raw.get(name)
        if v is None:
            return fallback
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise KvplanInputError(f"{s.path}: {name} must be a non-negative integer, got {v!r}.",
                                   f"Fix {name} in config.json.")
        return v

    swa = MlaDims(kv_lora_rank=key("swa_kv_lora_rank", mla.kv_lora_rank),
                  qk_rope_head_dim=key("swa_qk_rope_head_dim", mla.qk_rope_head_dim),
                  qk_nope_head_dim=key("swa_qk_nope_head_dim", mla.qk_nope_head_dim),
                  v_head_dim=key("swa_v_head_dim", mla.v_head_dim))
    row = swa.kv_lora_rank + swa.qk_rope_head_dim
    if _dots3_note_sliding(raw, i):
        window = raw.get("sliding_window_size")
        if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
            raise KvplanInputError(f"{s.path}: layer {i} is sliding_attention but sliding_window_size is not a "
                                   "positive integer.", "Set sliding_window_size in config.json.")
        return LayerArch(index=i, kind="mla", num_heads=key("swa_num_attention_heads", num_heads), num_kv_heads=1,
                         head_size=row, head_size_v=0, mla=swa, sliding_window=window,
                         source=f"{src}; layer_types[{i}] sliding_attention: swa_* MLA, window sliding_window_size")
    if row < mla.kv_lora_rank + mla.qk_rope_head_dim:
        raise KvplanInputError(f"{s.path}: swa_kv_lora_rank + swa_qk_rope_head_dim ({row}) is smaller than the full "
                               "layers' kv_lora_rank + qk_rope_head_dim; vLLM's dots3-note cannot pad its rows.",
                               "Fix the swa_* or MLA keys in config.json.")
    return LayerArch(index=i, kind="mla", num_heads=num_heads, num_kv_heads=1, head_size=row, head_size_v=0,
                     mla=mla, indexer_bytes_per_token=indexer_bytes,
                     source=f"{src}; layer_types[{i}] full: sparse MLA + indexer, rows padded to "
                            "swa_kv_lora_rank + swa_qk_rope_head_dim")


def _layers(c: _Cfg, text_type: str, model_type: str, n: int, num_heads: Any, num_kv_heads: Any,
            head_dim: Any, mla: MlaDims | None, path: Path, notes: list[str],
            architecture: str | None = None, module: str = "",
            unknown_types: list[str] | None = None) -> list[LayerArch]:
    raw = c.raw
    window = c.get("sliding_window")
    window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    s = _Stack(c=c, raw=raw, text_type=text_type, n=n, path=path, notes=notes, architecture=architecture,
               module=module, mla=mla, window=window, layer_types=raw.get("layer_types"),
               unknown_types=unknown_types if unknown_types is not None else [])
    sinks = text_type in SINK_TYPES or model_type in SINK_TYPES
    raw.get("hybrid_override_pattern")  # read by every config (KV604's keys read)
    raw.get("layers_block_type")
    if s.has_layer_types and len(s.layer_types) < n:
        # transformers' config classes reject it when vLLM loads the config (whether or not the
        # model class reads layer_types afterwards).
        raise KvplanInputError(f"{path}: layer_types has {len(s.layer_types)} entries for {n} layers.",
                               "Fix layer_types or num_hidden_layers.")
    kinds, srcs = _layer_kinds(s)
    per_layer, global_kv, global_hd = _per_layer_geometry(s, num_heads)
    if ((module.endswith(".commandr") or text_type.startswith("cohere2")) and s.window is not None
            and not vreg.transformers_backend(architecture)):
        # vLLM's Cohere 2 attention (commandr; the MoE and vision models' language models too)
        # sees [pos - sliding_window, pos]: its sliding layers get window + 1.
        notes.append(f"{architecture}: vLLM gives sliding layers sliding_window + 1 = {s.window + 1} "
                     "(the window includes the current token)")
        s.window += 1
    # vLLM's Falcon attention passes no cache config to Attention in its rotary and ALiBi
    # branches (rotary = not alibi, so always): the layer's KV stays in the model dtype.
    no_cache_cfg = architecture == "FalconForCausalLM"
    if no_cache_cfg:
        notes.append("FalconForCausalLM: vLLM builds Falcon's attention without the cache config; "
                     "--kv-cache-dtype does not reach its layers")
    indexer_layers = _indexer_layers(raw, n, module) if mla is not None else set()
    ihd = raw.get("index_head_dim")
    indexer = ((ihd if isinstance(ihd, int) and not isinstance(ihd, bool) and ihd > 0 else 128)
               if indexer_layers else None)
    geo = {"num_kv_heads": num_kv_heads, "head_dim": head_dim, "num_heads": num_heads, "per_layer": per_layer,
           "global_kv": global_kv, "global_hd": global_hd, "no_cache_cfg": no_cache_cfg, "sinks": sinks,
           # Read (and so checked) only where a layer is chunked: nobody reads it otherwise.
           "chunk": (raw.get("attention_chunk_size") or FAMILY_DEFAULTS.get(text_type, {}).get("attention_chunk_size"))
           if "chunked_attention" in kinds else None}
    out = []
    for i, (kind, src) in enumerate(zip(kinds, srcs, strict=True)):
        if kind in ("mamba", "linear_attention", "none"):
            out.append(LayerArch(index=i, kind=cast(LayerKind, kind), source=src))
        elif kind == "mla":
            out.append(_mla_layer(s, i, src, num_heads, indexer, indexer_layers))
        else:
            out.append(_layer_arch(s, i, kind, src, geo))
    if kinds.count("sliding_attention") and s.window is None:
        raise KvplanInputError(f"{path}: layers are sliding_attention but sliding_window is not set.",
                               "Set sliding_window in config.json.")
    return _kv_sharing(s, _per_layer_windows(s, out))


def _window_list(s: _Stack, key: str) -> list[Any] | None:
    """A per-layer window list the model class indexes by layer (one entry per layer, else an input error)."""
    v = s.raw.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or len(v) < s.n:
        raise KvplanInputError(f"{s.path}: {key} must be a list with one entry per layer ({s.n}), got {v!r:.80}.",
                               f"Fix {key} in config.json.")
    return v


def _per_layer_windows(s: _Stack, layers: list[LayerArch]) -> list[LayerArch]:
    """Model classes whose window is a per-layer key of their own (vLLM passes it as the layer's
    per_layer_sliding_window): PLaMo 3's `interleaved_sliding_window[i]` (None = full attention), Domyn
    Edge's `window_sizes[i][0]` (0 = full attention; vLLM's layer sees window + 1 tokens)."""
    if s.module.endswith(".plamo3"):
        key, windows = "interleaved_sliding_window", _window_list(s, "interleaved_sliding_window")
        per_layer = windows and [w if w is None else _positive_window(s, key, w) for w in windows]
    elif s.module.endswith(".domyn_edge"):
        key, windows = "window_sizes", _window_list(s, "window_sizes")
        per_layer = windows and [_domyn_window(s, w) for w in windows]
    else:
        return layers
    if not per_layer:
        return layers
    out = []
    for la in layers:
        if la.kind not in ("full_attention", "sliding_attention"):
            out.append(la)
            continue
        w = per_layer[la.index]
        out.append(la.model_copy(update={
            "kind": "sliding_attention" if w else "full_attention", "sliding_window": w,
            "source": f"{key}[{la.index}]: " + (f"sliding window {w}" if w else "full attention")}))
    return out


def _positive_window(s: _Stack, key: str, w: Any) -> int:
    if not isinstance(w, int) or isinstance(w, bool) or w <= 0:
        raise KvplanInputError(f"{s.path}: {key} entries must be positive integers or null, got {w!r}.",
                               f"Fix {key} in config.json.")
    return w


def _domyn_window(s: _Stack, entry: Any) -> int | None:
    w = entry[0] if isinstance(entry, list) and entry else None
    if not isinstance(w, int) or isinstance(w, bool) or w < 0:
        raise KvplanInputError(f"{s.path}: window_sizes entries must be [left, right] lists of non-negative "
                               f"integers, got {entry!r}.", "Fix window_sizes in config.json.")
    return w + 1 if w > 0 else None


def _kv_sharing(s: _Stack, layers: list[LayerArch]) -> list[LayerArch]:
    """Gemma 3n / Gemma 4: the last `num_kv_shared_layers` layers read the KV cache of an earlier
    layer (vLLM's kv_sharing_target_layer_name) and register none of their own.

    vLLM's Gemma 3n attention picks the layer 2 (sliding) or 1 (full) before the first shared
    one; its Gemma 4 attention picks the last non-shared layer of the same layer type."""
    gemma3n, gemma4 = s.text_type.startswith("gemma3n"), s.text_type.startswith("gemma4")
    if s.text_type == MISTRAL_LARGE_4:
        return _mistral_large_4_sharing(s, layers)
    if not (gemma3n or gemma4):
        return layers
    shared = s.c.get("num_kv_shared_layers", hf=True)
    if not shared:
        return layers
    if not isinstance(shared, int) or isinstance(shared, bool) or not 0 <= shared <= s.n:
        raise KvplanInputError(f"{s.path}: num_kv_shared_layers must be an integer from 0 to num_hidden_layers "
                               f"({s.n}), got {shared!r}.", "Fix num_kv_shared_layers in config.json.")
    first = s.n - shared
    types: list[str] = [str(t) for t in s.layer_types] if s.has_layer_types else [la.kind for la in layers]
    out = list(layers)
    for i in range(first, s.n):
        la = out[i]
        if la.kind in NO_KV_KINDS:
            continue
        if gemma3n:
            target = first - (2 if la.kind == "sliding_attention" else 1)
        else:
            prev = types[:first]
            if types[i] not in prev:
                raise KvplanInputError(
                    f"{s.path}: layer {i} shares its KV cache (num_kv_shared_layers {shared}) but no earlier "
                    f"layer has its type {types[i]!r}; vLLM's Gemma 4 attention cannot build it.",
                    "Fix num_kv_shared_layers or layer_types in config.json.")
            target = len(prev) - 1 - prev[::-1].index(types[i])
        if target < 0:
            continue
        out[i] = la.model_copy(update={
            "kv_shared_with": target,
            "source": la.source + f" (num_kv_shared_layers {shared}: reads layer {target}'s KV cache)"})
    s.notes.append(f"num_kv_shared_layers {shared}: layers {first}..{s.n - 1} read an earlier layer's KV cache "
                   "and allocate none")
    return out


def _mistral_large_4_sharing(s: _Stack, layers: list[LayerArch]) -> list[LayerArch]:
    """Mistral Large 4 (vLLM 0.34, vllm/models/mistral/common/layer_spec.py::get_layer_specs): a layer
    whose kv_source_layers entry names an earlier layer attends to that layer's latent cache
    (kv_sharing_target_layer_name) and registers none of its own."""
    sources = s.raw.get("kv_source_layers")
    if sources is None:
        return layers
    if not isinstance(sources, list) or len(sources) != s.n \
            or any(not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= i for i, v in enumerate(sources)):
        raise KvplanInputError(f"{s.path}: kv_source_layers must list, per layer, itself or an earlier layer.",
                               "Fix kv_sharing in params.json.")
    out = list(layers)
    for i, src in enumerate(sources):
        if src != i:
            out[i] = out[i].model_copy(update={
                "kv_shared_with": src, "source": out[i].source + f" (kv_sharing: reads layer {src}'s latent KV cache)"})
    shared = [i for i, v in enumerate(sources) if v != i]
    if shared:
        s.notes.append(f"kv_sharing: {len(shared)} of {s.n} layers read an earlier layer's latent KV cache and "
                       "allocate none")
    return out


def _indexer_layers(raw: dict[str, Any], n: int, module: str) -> set[int]:
    """Layers whose MLA attention builds a sparse-attention indexer key cache (vLLM's rule)."""
    if raw.get("model_type") == MISTRAL_LARGE_4:
        # vLLM 0.34's Mistral Large 4: an indexer where index_sharing says 'full'; 'shared' layers reuse the
        # top-k of the closest preceding one (layer_spec.py::get_layer_specs).
        sharing = raw.get("index_sharing")
        if raw.get("index_topk") is None:
            return set()
        return {i for i in range(n) if not isinstance(sharing, list) or (i < len(sharing) and sharing[i] == "full")}
    if any(module.endswith(m) for m in INDEXER_ALWAYS_MODULES):
        pass
    elif not (any(module.endswith(m) for m in INDEXER_IF_TOPK_MODULES) and "index_topk" in raw):
        return set()
    sparse = _sparse_layers(raw, n, module)
    types = raw.get("indexer_types")
    if module.endswith(".hy_v4") and isinstance(types, list) and len(types) == n:
        # Only HY-V4 reads indexer_types; the DSA module reads the pattern / frequency keys.
        return {i for i, t in enumerate(types) if t != "shared"} & sparse
    freq = raw.get("index_topk_freq", 1)
    freq = freq if isinstance(freq, int) and not isinstance(freq, bool) and freq > 0 else 1
    pattern = raw.get("index_topk_pattern")
    if pattern is not None and not isinstance(pattern, (str, list)):
        raise KvplanInputError(f"index_topk_pattern must be a string or list of 'S' / 'D' per layer, got {pattern!r}.",
                               "Fix index_topk_pattern in config.json.")
    offset = raw.get("index_skip_topk_offset", 2)
    offset = offset if isinstance(offset, int) and not isinstance(offset, bool) else 2
    out = set()
    for i in range(n):
        skip = (max(i - offset + 1, 0) % freq != 0 if pattern is None
                else 0 <= i < len(pattern) and pattern[i] == "S")
        if not skip:
            out.add(i)
    return out & sparse


def _sparse_layers(raw: dict[str, Any], n: int, module: str) -> set[int]:
    """Layers whose attention is sparse MLA at all (before the top-k reuse keys)."""
    if module.endswith(".dots3_note"):
        # dots3-note's sliding-window layers are dense MLA (no indexer).
        return {i for i in range(n) if not _dots3_note_sliding(raw, i)}
    if module.endswith(".hy_v4"):
        # HY-V4 builds an indexer only on layers whose layer_types entry is a sparse type.
        lt = raw.get("layer_types")
        return {i for i in range(n) if isinstance(lt, list) and i < len(lt) and lt[i] in _HYV4_SPARSE_TYPES}
    return set(range(n))


# vLLM's HY-V4 attention: layer_types values that make a layer sparse (it then builds an indexer).
_HYV4_SPARSE_TYPES = ("sparse_attention", "sparse", "indexed_attention", "deepseek_sparse_attention")


def head_size_math_ok(num_heads: int, hidden: int) -> bool:
    """True when hidden_size divides evenly by heads (explicit head_dim otherwise required)."""
    return num_heads > 0 and math.gcd(hidden, num_heads) == num_heads
