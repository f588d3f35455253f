"""`kvplan calibrate`: per-tensor (and per-head) k/v scales from captured activations.

vLLM's convention (``BaseKVCacheMethod``, ``calc_kv_scales``): the cache stores ``x / k_scale``
and ``k_scale = amax(|K|) / fp8_max``, so the largest calibrated value lands on the top of the
FP8 range. Scales are taken over the post-RoPE K/V a cache actually stores.
"""
from __future__ import annotations

import numpy as np

from kvplan import __version__
from kvplan.files import atomic_output
from kvplan.model.kv_scales import KvScales, LayerScales
from kvplan.runtime.kvsource import KVSource

FP8_MAX = {"e4m3fn": 448.0, "e5m2": 57344.0}
_FLOOR = 1e-6  # vLLM clamps scales away from zero the same way the per-token-head writes do


def compute_scales(source: KVSource, num_layers: int, num_kv_heads: int, head_size: int, *,
                   model: str, per_head: bool = False, fp8_format: str = "e4m3fn",
                   layers: list[int] | None = None) -> KvScales:
    """Scales of every layer in ``layers`` (default 0..num_layers-1) from ``source``'s K/V."""
    fmax = FP8_MAX[fp8_format]
    out: list[LayerScales] = []
    tensors: dict[str, float] = {}
    for i in (layers if layers is not None else range(num_layers)):
        kv = source.layer(i, num_kv_heads, head_size)
        k = np.abs(kv.key.astype(np.float32))
        v = np.abs(kv.value.astype(np.float32))
        k_amax, v_amax = float(k.max()), float(v.max())
        ls = LayerScales(
            index=i, k_scale=max(k_amax / fmax, _FLOOR), v_scale=max(v_amax / fmax, _FLOOR),
            k_amax=k_amax, v_amax=v_amax,
            k_scale_per_head=[max(float(a) / fmax, _FLOOR) for a in k.max(axis=(0, 2))] if per_head else None,
            v_scale_per_head=[max(float(a) / fmax, _FLOOR) for a in v.max(axis=(0, 2))] if per_head else None)
        out.append(ls)
        tensors[f"model.layers.{i}.self_attn.k_scale"] = ls.k_scale
        tensors[f"model.layers.{i}.self_attn.v_scale"] = ls.v_scale
    strategy = "attn_head" if per_head else "tensor"
    qc = {"quant_method": "compressed-tensors", "format": "dense", "config_groups": {},
          "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": strategy, "dynamic": False,
                              "symmetric": True}}
    src = (f"synthetic (seed {source.meta.get('seed', 0)})" if source.kind == "synthetic"
           else f"{source.path} ({source.meta.get('text_name', '?')}, {source.num_tokens} tokens)")
    return KvScales(kvplan_version=__version__, model=model, source=src, num_tokens=source.num_tokens,
                    fp8_format=fp8_format, fp8_max=fmax, num_kv_heads=num_kv_heads, layers=out,  # type: ignore[arg-type]
                    tensors=tensors, quantization_config=qc)


def write_safetensors(path, scales: KvScales, per_head: bool = False) -> None:
    """The scale tensors as a .safetensors file (fp32; scalars, or [num_kv_heads] with per_head),
    written by hand (the format is a JSON header + raw little-endian data) to need no extra package."""
    import json
    header: dict = {"__metadata__": {"producer": f"kvplan {__version__} calibrate"}}
    blobs: list[bytes] = []
    offset = 0
    for ls in sorted(scales.layers, key=lambda x: x.index):
        for side in ("k", "v"):
            vals = getattr(ls, f"{side}_scale_per_head") if per_head else None
            arr = np.asarray(vals if vals is not None else [getattr(ls, f"{side}_scale")], dtype="<f4")
            data = arr.tobytes()
            shape = [int(arr.size)] if vals is not None else []
            header[f"model.layers.{ls.index}.self_attn.{side}_scale"] = {
                "dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
            blobs.append(data)
            offset += len(data)
    raw = json.dumps(header, sort_keys=True).encode()
    raw += b" " * (-len(raw) % 8)
    with atomic_output(path) as tmp:
        tmp.write_bytes(len(raw).to_bytes(8, "little") + raw + b"".join(blobs))
