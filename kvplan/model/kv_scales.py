"""A k/v scales file as `kvplan calibrate` writes it (schema: schemas/kv-scales.schema.json).

Scales follow vLLM's convention: the cache stores ``x / k_scale`` (so ``k_scale = amax / fp8_max``
maps the largest calibrated |K| to the top of the FP8 range) and dequantizes by multiplying back.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from kvplan.model.base import Frozen
from kvplan.model.limits import MAX_HEADS, MAX_LAYERS

KV_SCALES_SCHEMA_VERSION = "1.0"


class LayerScales(Frozen):
    """Calibrated scales of one attention layer."""

    index: int = Field(ge=0, le=MAX_LAYERS)
    """Decoder layer index (the engine's module prefix number)."""
    k_scale: float
    """Per-tensor K scale: amax(|K|) / fp8_max over the calibration tokens (vLLM's k_scale)."""
    v_scale: float
    """Per-tensor V scale: amax(|V|) / fp8_max."""
    k_amax: float
    """Largest |K| seen during calibration (post-RoPE, as the cache stores it)."""
    v_amax: float
    """Largest |V| seen during calibration."""
    k_scale_per_head: list[float] | None = None
    """Per-KV-head K scales (amax per head / fp8_max), with --per-head; null otherwise."""
    v_scale_per_head: list[float] | None = None
    """Per-KV-head V scales, with --per-head; null otherwise."""


class KvScales(Frozen):
    """Per-layer k/v scales derived from captured activations."""

    schema_version: str = KV_SCALES_SCHEMA_VERSION
    """Version of this JSON contract."""
    kind: Literal["kvplan.kv-scales"] = "kvplan.kv-scales"
    """Document kind."""
    kvplan_version: str
    """kvplan version that calibrated."""
    model: str
    """Model the activations came from."""
    source: str
    """The activations: synthetic (seed), or the capture file and its text."""
    num_tokens: int
    """Calibration tokens per layer."""
    fp8_format: Literal["e4m3fn", "e5m2"] = "e4m3fn"
    """FP8 format the scales target."""
    fp8_max: float
    """Largest finite value of that format (448 for e4m3fn)."""
    num_kv_heads: int = Field(ge=1, le=MAX_HEADS)
    """KV heads per layer (length of the per-head lists)."""
    layers: list[LayerScales]
    """One entry per attention layer, by index."""
    tensors: dict[str, float] = Field(default_factory=dict)
    """The per-tensor scales under the checkpoint tensor names vLLM loads
    (model.layers.N.self_attn.k_scale / v_scale; vLLM remaps them to the attention layer)."""
    quantization_config: dict = Field(default_factory=dict)
    """A compressed-tensors quantization_config with a static per-tensor FP8 kv_cache_scheme and no
    weight quantization: merged into config.json (with the tensors in the checkpoint) it makes vLLM
    load these scales."""


def kv_scales_schema() -> dict:
    """The published JSON Schema (schemas/kv-scales.schema.json, drift-tested)."""
    s = KvScales.model_json_schema(mode="serialization")
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/kv-scales-{KV_SCALES_SCHEMA_VERSION}.json"
    return s
