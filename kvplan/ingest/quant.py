"""Checkpoint quantization metadata -> QuantMetadata.

Reads `quantization_config` from config.json, or a ModelOpt `hf_quant_config.json` beside it
(vLLM reads the latter only when config.json has no quantization_config, and injects a
`quant_method` from the producer and algorithm:
`vllm/transformers_utils/model_arch_config_convertor.py::_normalize_quantization_config`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.ingest.limits import input_boundary
from kvplan.model.quant import QuantMetadata, ScaleTensor

# Quant configs whose get_quant_method attaches a KV-cache method to every Attention layer
# (vllm-0.33-kv-rules.md §4.1): their checkpoints are "fp8 checkpoints" for the e5m2 check.
_ALWAYS_KV_METHOD = ("fp8", "modelopt", "modelopt_fp4", "modelopt_mxfp8", "quark")


def _modelopt_kv(q: dict[str, Any]) -> tuple[Any, str | None]:
    """First truthy of the four places vLLM looks (nested wins over top level)."""
    nested = q.get("quantization")
    inner: dict[str, Any] = nested if isinstance(nested, dict) else q
    for obj, key, path in ((inner, "kv_cache_scheme", "quantization.kv_cache_scheme"),
                           (q, "kv_cache_scheme", "kv_cache_scheme"),
                           (inner, "kv_cache_quant_algo", "quantization.kv_cache_quant_algo"),
                           (q, "kv_cache_quant_algo", "kv_cache_quant_algo")):
        v = obj.get(key)
        if v:
            if obj is q and inner is q:
                path = key
            return v, path
    return None, None


def normalize_hf_quant_config(hq: dict[str, Any]) -> dict[str, Any]:
    """Give a legacy hf_quant_config.json the quant_method vLLM injects."""
    q = dict(hq)
    producer = (q.get("producer") or {}).get("name", "") if isinstance(q.get("producer"), dict) else ""
    producer = producer if isinstance(producer, str) else ""
    algo = str((q.get("quantization") or {}).get("quant_algo", "") if isinstance(q.get("quantization"), dict)
               else q.get("quant_algo", "")).upper()
    if "quant_method" not in q and producer.lower() == "modelopt":
        if "FP4" in algo:
            q["quant_method"] = "modelopt_fp4"
        elif algo == "MIXED_PRECISION":
            q["quant_method"] = "modelopt_mixed"
        else:
            q["quant_method"] = "modelopt"
    return q


@input_boundary(
    fix="Fix the checkpoint's quantization config (config.json quantization_config / hf_quant_config.json).")
def parse_quant_metadata(config: dict[str, Any], hf_quant_config: dict[str, Any] | None,
                         scales: tuple[ScaleTensor, ...] = (), files: tuple[str, ...] = (),
                         quantization_flag: str | None = None) -> QuantMetadata:
    """Collect the KV-relevant facts; never decides anything."""
    text_config = config.get("text_config")
    text: dict[str, Any] = text_config if isinstance(text_config, dict) else {}
    q = config.get("quantization_config")
    source = "config.json:quantization_config"
    if not isinstance(q, dict) and isinstance(text.get("quantization_config"), dict):
        q = text["quantization_config"]
        source = "config.json:text_config.quantization_config"
    if not isinstance(q, dict) and hf_quant_config is not None:
        q = normalize_hf_quant_config(hf_quant_config)
        source = "hf_quant_config.json"
    if not isinstance(q, dict):
        method = quantization_flag
        return QuantMetadata(quant_method=method, scales=scales, safetensors_files=files,
                             weight_quant_supplies_kv_method=method in _ALWAYS_KV_METHOD if method else False)
    method = q.get("quant_method")
    method = method.lower() if isinstance(method, str) else None
    if quantization_flag:
        method = quantization_flag
    producer = q.get("producer", {}).get("name") if isinstance(q.get("producer"), dict) else None
    mo_value, mo_field = _modelopt_kv(q)
    ct = q.get("kv_cache_scheme") if method == "compressed-tensors" else None
    ct = ct if isinstance(ct, dict) else None
    declares = bool(mo_value) or bool(q.get("kv_cache_scheme"))
    supplies = (method in _ALWAYS_KV_METHOD if method else False) or (ct is not None) or (
        method == "modelopt_mixed" and bool(mo_value))
    return QuantMetadata(
        source=source, quant_method=method, producer=producer, declares_kv_quant=declares,
        modelopt_kv_value=mo_value, modelopt_kv_field=mo_field, ct_kv_cache_scheme=ct,
        weight_quant_supplies_kv_method=supplies,
        modelopt_mla_kv_method=bool(method and method.startswith("modelopt") and method != "modelopt_mixed"),
        scales=scales, safetensors_files=files)


def load_hf_quant_config(folder: Path) -> dict[str, Any] | None:
    from kvplan.ingest.hf_config import load_json
    p = folder / "hf_quant_config.json"
    return load_json(p, "hf_quant_config") if p.is_file() else None
