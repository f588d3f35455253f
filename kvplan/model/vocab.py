"""The field's closed vocabularies: KV cache dtype strings, quant modes, layer kinds, severities.

Values mirror vLLM 0.33.0 (`vllm/config/cache.py::CacheDType`, `vllm/v1/kv_cache_interface.py::
KVQuantMode`); kvplan spells quant modes in lower case.
"""
from __future__ import annotations

from enum import Enum
from typing import Literal, get_args

# vllm/config/cache.py CacheDType, in vLLM's own order (22 values in 0.33.0).
VLLM_033_KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
    "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
    "turboquant_3bit_nc", "octave_k3v4", "octave_k3v3", "octave_k3v3_compact", "ultraquant_4bit",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
)


class QuantMode(str, Enum):
    """How a layer's KV cache is quantized (vLLM `KVQuantMode`, lower-cased)."""

    none = "none"
    fp8_per_tensor = "fp8_per_tensor"
    int8_per_token_head = "int8_per_token_head"
    fp8_per_token_head = "fp8_per_token_head"
    int4_per_token_head = "int4_per_token_head"
    nvfp4 = "nvfp4"
    turboquant_k8v4 = "turboquant_k8v4"
    turboquant_4bit_nc = "turboquant_4bit_nc"
    turboquant_k3v4_nc = "turboquant_k3v4_nc"
    turboquant_3bit_nc = "turboquant_3bit_nc"
    nvfp4_ds_mla = "nvfp4_ds_mla"
    ultraquant_4bit = "ultraquant_4bit"
    octave_k3v4 = "octave_k3v4"
    octave_k3v3 = "octave_k3v3"
    octave_k3v3_compact = "octave_k3v3_compact"

    @property
    def is_per_token_head(self) -> bool:
        return self in (QuantMode.int8_per_token_head, QuantMode.fp8_per_token_head,
                        QuantMode.int4_per_token_head)

    @property
    def is_quantized(self) -> bool:
        return self is not QuantMode.none


def quant_mode_of(kv_cache_dtype: str) -> QuantMode:
    """vLLM 0.33 `get_kv_quant_mode`: the resolution order is part of the contract."""
    d = kv_cache_dtype
    if d in ("int4_per_token_head", "int8_per_token_head", "fp8_per_token_head"):
        return QuantMode(d)
    if d == "nvfp4_ds_mla":
        return QuantMode.nvfp4_ds_mla
    if d.startswith("nvfp4"):
        return QuantMode.nvfp4
    if d.startswith("turboquant_"):
        return QuantMode(d)
    if d.startswith("octave_"):
        return QuantMode(d)
    if d == "ultraquant_4bit":
        return QuantMode.ultraquant_4bit
    if d.startswith("fp8"):
        return QuantMode.fp8_per_tensor
    return QuantMode.none


# Model dtype spellings vLLM accepts for --dtype (ModelConfig `_STR_DTYPE_TO_TORCH_DTYPE`) -> dtype name.
MODEL_DTYPE_ALIASES: dict[str, str] = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16",
                                       "float": "float32", "float32": "float32"}
# Short names of the same dtypes (torch-style, as hand-written plans spell them).
SHORT_DTYPE_NAMES: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


LayerKind = Literal[
    "full_attention", "sliding_attention", "chunked_attention", "mla", "linear_attention",
    "mamba", "cross_attention", "encoder_only", "none",
]
LAYER_KINDS: tuple[str, ...] = get_args(LayerKind)
# Layer kinds that hold no per-token KV cache governed by --kv-cache-dtype.
NO_KV_KINDS = frozenset({"linear_attention", "mamba", "encoder_only", "none"})
# Layer kinds whose per-token KV is per-head K and V, laid out like full attention (MLA holds a latent).
PER_HEAD_KV_KINDS: tuple[str, ...] = tuple(k for k in LAYER_KINDS if k not in NO_KV_KINDS and k != "mla")


class Severity(str, Enum):
    """Finding severity; ordering matters for --fail-level."""

    info = "info"
    warning = "warning"
    error = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


class ScaleSource(str, Enum):
    """Where a quantized layer's k/v scales come from."""

    none = "none"                      # unquantized layer: no scales used
    checkpoint_per_tensor = "checkpoint_per_tensor"
    checkpoint_per_head = "checkpoint_per_head"
    dynamic_per_token_head = "dynamic_per_token_head"  # computed at write time, stored inline
    default_1_0 = "default_1.0"        # uncalibrated: vLLM falls back to k_scale = v_scale = 1.0
    calibrated = "calibrated"          # kvplan calibrate produced them from captured activations
    block_scales = "block_scales"      # NVFP4-style per-16-element scales stored with the data
