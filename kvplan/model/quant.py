"""Checkpoint quantization metadata relevant to the KV cache (no I/O here)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from kvplan.model.base import Frozen
from kvplan.model.limits import MAX_LAYERS

ScaleKind = Literal["k_scale", "v_scale", "q_scale", "kv_scale", "prob_scale"]


class ScaleTensor(Frozen):
    """One k/v/q scale tensor found in a safetensors header (never loaded)."""

    name: str
    """Full tensor name in the checkpoint."""
    kind: ScaleKind
    """Which scale it is; kv_scale is the deprecated single-scale spelling."""
    layer: Annotated[int, Field(ge=0, le=MAX_LAYERS)]
    """Layer index parsed from the tensor name."""
    shape: tuple[Annotated[int, Field(ge=0)], ...]
    """Tensor shape: () or (1,) is per-tensor; (num_kv_heads,) or (num_heads,1,1) is per-head."""
    dtype: str
    """safetensors dtype string (F32, BF16, F16, ...)."""
    file: str
    """The .safetensors file that holds it."""
    vmin: float | None = None
    """Smallest value, read from the tensor data (None when not read: over 4096 elements, or a
    dtype kvplan does not decode). NaN when any element is NaN."""
    vmax: float | None = None
    """Largest value, read from the tensor data (None when not read)."""

    @property
    def values_read(self) -> bool:
        return self.vmin is not None and self.vmax is not None

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


class QuantMetadata(Frozen):
    """KV-relevant facts of a checkpoint's quantization config."""

    source: str | None = None
    """Where the quantization config came from: 'config.json:quantization_config' or 'hf_quant_config.json'."""
    quant_method: str | None = None
    """quant_method as vLLM sees it (hf_quant_config.json gets modelopt / modelopt_fp4 injected)."""
    producer: str | None = None
    """producer.name (e.g. 'modelopt')."""
    declares_kv_quant: bool = False
    """The metadata mentions KV-cache quantization in any form (even one vLLM ignores)."""
    modelopt_kv_value: Any = None
    """First truthy of quantization.kv_cache_scheme, kv_cache_scheme, quantization.kv_cache_quant_algo, kv_cache_quant_algo."""  # noqa: E501 - a schema description: pydantic keeps a docstring's line breaks
    modelopt_kv_field: str | None = None
    """Dotted path of modelopt_kv_value inside the quantization config."""
    ct_kv_cache_scheme: dict[str, Any] | None = None
    """compressed-tensors kv_cache_scheme dict (type, num_bits, strategy, symmetric, dynamic)."""
    weight_quant_supplies_kv_method: bool = False
    """The quant config attaches a KV-cache method to attention layers (fp8, modelopt, compressed-tensors with a kv scheme, quark)."""  # noqa: E501 - a schema description: pydantic keeps a docstring's line breaks
    modelopt_mla_kv_method: bool = False
    """ModelOpt FP8/NVFP4 configs attach the KV method to MLA layers too."""
    scales: tuple[ScaleTensor, ...] = ()
    """k/v/q scale tensors found in safetensors headers."""
    safetensors_files: tuple[str, ...] = ()
    """safetensors files whose headers were read."""
    kv_scales_file: str | None = None
    """A `kvplan calibrate` k/v scales file given with --kv-scales (calibrated per-tensor FP8 scales)."""
    calibrated_layers: tuple[int, ...] = ()
    """Layers that file holds k/v scales for."""


def layer_kv_scales(quant: QuantMetadata, layer: int) -> dict[str, ScaleTensor]:
    """A layer's k/v scale tensors by role, ``k_scale`` / ``v_scale`` (a deprecated ``kv_scale``
    is the k scale, as vLLM remaps it)."""
    found: dict[str, ScaleTensor] = {}
    for s in quant.scales:
        if s.layer == layer and s.kind in ("k_scale", "v_scale", "kv_scale"):
            found["k_scale" if s.kind == "kv_scale" else s.kind] = s
    return found


def loaded_kv_scale_values(quant: QuantMetadata, layer: int) -> tuple[float, float] | None:
    """The (k_scale, v_scale) floats vLLM 0.33 ends with for a per-tensor FP8 layer that loads this
    checkpoint's scales, from the values kvplan read; None when no k/v scale tensor of the layer
    was read, or when vLLM would refuse them (its ``assert k_scale > 0``).

    compressed-tensors copies the tensors as they are (host float: max over heads); any other
    checkpoint KV method goes through BaseKVCacheMethod: -1 marks an absent scale, both absent
    -> 1.0, both > 0 -> used, else k must be > 0 and both become max(k, v). A deprecated
    ``kv_scale`` is the k scale.
    """
    found = layer_kv_scales(quant, layer)
    if not found or not all(s.values_read for s in found.values()):
        return None
    k, v = found.get("k_scale"), found.get("v_scale")
    if quant.ct_kv_cache_scheme is not None:
        return (k.vmax if k else 1.0), (v.vmax if v else 1.0)  # type: ignore[return-value]
    kv = k.vmax if k else -1.0
    vv = v.vmax if v else -1.0
    assert kv is not None and vv is not None
    if kv > 0 and vv > 0:
        return kv, vv
    if kv < 0 and vv < 0:
        return 1.0, 1.0
    if not kv > 0:
        return None
    m = max(kv, vv)
    return m, m
