"""FlashMLA backends: FLASHMLA_SPARSE (DeepSeek's fp8_ds_mla / nvfp4_ds_mla formats)."""
from __future__ import annotations

from collections.abc import Mapping

from kvplan.backends.impl.base import BackendHooks, canonicalized, is_quantized
from kvplan.backends.request import BackendRequest
from kvplan.model.gpu import GpuProfile

__all__ = ["HOOKS"]


class FlashMlaSparse(BackendHooks):
    """FLASHMLA_SPARSE: NoPE head 512 on SM90 only, nvfp4_ds_mla on SM100 only; any other
    quantized dtype is stored as fp8_ds_mla."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        r: list[str] = []
        if req.head_size == 512 and gpu.cc_major != 9:
            r.append("head_size 512 (NoPE) is only supported on SM90")
        if req.kv_cache_dtype == "nvfp4_ds_mla" and gpu.cc_major != 10:
            r.append("nvfp4_ds_mla requires the SM100 family")
        return r

    def canonical_kv_cache_dtype(self, kv: str) -> tuple[str, list[str]]:
        return canonicalized(self.name, kv, "fp8_ds_mla" if is_quantized(kv) and kv != "nvfp4_ds_mla" else kv)


HOOKS: Mapping[str, type[BackendHooks]] = {"FLASHMLA_SPARSE": FlashMlaSparse}
"""Backends of this family with behaviour beyond their capability rows."""
