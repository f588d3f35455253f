"""ROCm-only backends: ROCM_SEGMENTED_ATTN (RDNA only), ROCM_ATTN (16-token pages by default)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.impl.base import BackendHooks, Site, rocm_arch
from kvplan.backends.request import BackendRequest
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.gpu import GpuProfile

__all__ = ["HOOKS"]


class RocmSegmentedAttn(BackendHooks):
    """ROCM_SEGMENTED_ATTN: RDNA GPUs only; an FP8 cache needs gfx12."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        # rocm_segmented_attn.py::RocmSegmentedAttentionBackend.supports_combination (vLLM's texts)
        arch = rocm_arch(gpu)
        if not arch.startswith(("gfx11", "gfx12")) or arch.startswith("gfx1250"):
            return ["ROCM_SEGMENTED_ATTN requires AMD RDNA GPUs on ROCm"]
        if req.kv_cache_dtype in ("fp8", "fp8_e4m3") and not arch.startswith("gfx12"):
            return ["FP8 segmented attention requires gfx12"]
        return []


class RocmAiterUnifiedAttn(BackendHooks):
    """ROCM_AITER_UNIFIED_ATTN: quantizes its queries except on gfx11 (RocmAiterUnifiedAttentionImpl.__init__);
    float16 models and fp8_e5m2 from 0.26 (ENGINE_FEATURES rocm_aiter_unified_fp16_e5m2)."""

    def model_dtypes(self, engine: EngineVersion) -> tuple[str, ...]:
        if engine_feature("rocm_aiter_unified_fp16_e5m2").holds_for(engine):
            return self.row.model_dtypes
        return tuple(d for d in self.row.model_dtypes if d == "bfloat16")

    def kv_cache_dtype_reasons(self, req: BackendRequest, gpu: GpuProfile, attention_config: Mapping[str, Any],
                               engine: EngineVersion) -> list[str]:
        if req.kv_cache_dtype in ("float16", "fp8_e5m2") \
                and not engine_feature("rocm_aiter_unified_fp16_e5m2").holds_for(engine):
            return ["kv_cache_dtype not supported"]
        return []

    def query_quant(self, site: Site) -> bool:
        return not rocm_arch(site.gpu).startswith("gfx11")


class RocmAttn(BackendHooks):
    """ROCM_ATTN: its native C++ paged-attention kernel runs 16-token (and 32-token) pages."""

    def default_block_size(self, site: Site) -> int:
        # 16 is the default up to 0.33; 0.34 (default 64) keeps 16 through rocm_attn.py::
        # RocmAttentionBackend.get_preferred_block_size (ENGINE_FEATURES rocm_attn_prefers_block_16).
        return 16


class HpcAttn(BackendHooks):
    """HPC_ATTN (CUDA, here for want of a family): exactly SM90 from 0.28, SM90 and newer before."""

    def max_compute_capability(self, engine: EngineVersion) -> tuple[int, int] | None:
        # hpc_attn.py::HpcAttentionBackend.supports_compute_capability (ENGINE_FEATURES hpc_attn_sm90_only)
        return self.row.max_compute_capability if engine_feature("hpc_attn_sm90_only").holds_for(engine) else None


HOOKS: Mapping[str, type[BackendHooks]] = {"ROCM_AITER_UNIFIED_ATTN": RocmAiterUnifiedAttn,
                                           "ROCM_SEGMENTED_ATTN": RocmSegmentedAttn, "ROCM_ATTN": RocmAttn,
                                           "HPC_ATTN": HpcAttn}
"""Backends of this family with behaviour beyond their capability rows."""
