"""Capability tables as data (GPUs, attention backends per engine version) and pure lookups.

Public entry points: `resolve_gpu` / `gpu_facts`, `select_backend`, `prefill_query_advice`,
`flashinfer_group_query_dtype_crash`, `rocm_fp8_notes` (see the submodules for the rest, and
docs/backends.md for how selection is built).
"""
from __future__ import annotations

from kvplan.backends.capabilities import BackendCapability, EngineFeature, EngineVersion
from kvplan.backends.gpus import GPU_PROFILES, GpuFacts, gpu_facts, resolve_gpu
from kvplan.backends.select import (
    BackendChoice,
    BackendRequest,
    MlaDims,
    PrefillQueryAdvice,
    flashinfer_group_query_dtype_crash,
    mla_prefill_backend,
    prefill_query_advice,
    rocm_fp8_notes,
    select_backend,
)
from kvplan.backends.vllm_rows import BACKENDS, ENGINE_FEATURES

__all__ = [
    "BACKENDS",
    "ENGINE_FEATURES",
    "GPU_PROFILES",
    "BackendCapability",
    "BackendChoice",
    "BackendRequest",
    "EngineFeature",
    "EngineVersion",
    "GpuFacts",
    "MlaDims",
    "PrefillQueryAdvice",
    "flashinfer_group_query_dtype_crash",
    "gpu_facts",
    "mla_prefill_backend",
    "prefill_query_advice",
    "resolve_gpu",
    "rocm_fp8_notes",
    "select_backend",
]
