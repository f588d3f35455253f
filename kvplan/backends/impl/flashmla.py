"""FlashMLA backends: FLASHMLA_SPARSE (DeepSeek's fp8_ds_mla / nvfp4_ds_mla formats)."""
from __future__ import annotations

from collections.abc import Mapping

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.impl.base import BackendHooks, canonicalized, is_quantized
from kvplan.backends.request import BackendRequest
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.gpu import GpuProfile

__all__ = ["HOOKS", "is_flashmla_sparse"]


class FlashMlaSparse(BackendHooks):
    """FLASHMLA_SPARSE: NoPE head 512 on SM90 only (bf16 or fp8_ds_mla cache, rope-free models), nvfp4_ds_mla on
    SM100 only; any other quantized dtype is stored as fp8_ds_mla."""

    def head_size_ok(self, req: BackendRequest, gpu: GpuProfile, engine: EngineVersion) -> bool:
        # flashmla_sparse.py::FlashMLASparseBackend.get_supported_head_sizes: 512 from 0.31
        if req.head_size == 512 and not engine_feature("flashmla_sparse_nope_head_512").holds_for(engine):
            return False
        return super().head_size_ok(req, gpu, engine)

    def release_reasons(self, req: BackendRequest, gpu: GpuProfile, engine: EngineVersion) -> list[str]:
        # flashmla_sparse.py::FlashMLASparseBackend.supports_combination (0.32 on: fp8_ds_mla at head 512 too,
        # ENGINE_FEATURES flashmla_sparse_nope512_fp8_ds_mla)
        kv = req.kv_cache_dtype
        ds_mla = engine_feature("flashmla_sparse_nope512_fp8_ds_mla").holds_for(engine)
        if req.head_size == 512:
            if kv not in ("auto", "bfloat16", "float16", *(("fp8_ds_mla",) if ds_mla else ())) or gpu.cc_major != 9:
                what = "bf16 or fp8_ds_mla" if ds_mla else "bf16"
                return [f"FLASHMLA_SPARSE supports head_size 512 only with {what} kv-cache on SM90 "
                        f"(NoPE), got kv_cache_dtype={kv}"]
            if req.qk_rope_head_dim not in (0, None):
                return ["FLASHMLA_SPARSE supports head_size 512 only for rope-free (NoPE) models"]
        if kv == "nvfp4_ds_mla" and gpu.cc_major != 10:
            return [f"FLASHMLA_SPARSE only supports the {kv} kv-cache dtype on SM100 (Blackwell)"]
        return []

    def canonical_kv_cache_dtype(self, kv: str) -> tuple[str, list[str]]:
        return canonicalized(self.name, kv, "fp8_ds_mla" if is_quantized(kv) and kv != "nvfp4_ds_mla" else kv)


class FlashMla(BackendHooks):
    """FLASHMLA (dense): validation takes majors 9 and 10, the dense kernel runs on Hopper only."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        # flashmla.py::FlashMLABackend.supports_combination -> ops/flashmla.py::is_flashmla_dense_supported
        if not req.use_sparse and gpu.cc_major != 9:
            return ["FlashMLA Dense is only supported on Hopper devices."]  # vLLM's text
        return []


HOOKS: Mapping[str, type[BackendHooks]] = {"FLASHMLA": FlashMla, "FLASHMLA_SPARSE": FlashMlaSparse}
"""Backends of this family with behaviour beyond their capability rows."""


def is_flashmla_sparse(backend: str | None) -> bool:
    """The sparse FlashMLA backend (DeepSeek-V4's model class picks its fp8_ds_mla attention class for it)."""
    return backend == "FLASHMLA_SPARSE"
