"""Triton backends: TRITON_ATTN (dense, per-token-head dtypes) and TRITON_MLA (reference §5.2, §5.3)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.impl.base import BackendHooks, ConstructionError, Site, is_quantized, rocm_arch
from kvplan.backends.request import BackendRequest
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.gpu import GpuProfile

__all__ = ["HOOKS"]


class _TritonFp8(BackendHooks):
    """Both Triton impls raise on CUDA below SM89: their FP8 path needs native fp8e4nv."""

    def construction_error(self, site: Site) -> ConstructionError | None:
        gpu, kv = site.gpu, site.req.kv_cache_dtype
        cc = gpu.compute_capability or (0, 0)
        if gpu.platform != "cuda" or not kv.startswith("fp8") or cc >= (8, 9):
            return None
        rerun = "bfloat16" if cc >= (8, 0) else "float16"
        return ConstructionError(
            f"FP8 KV cache is not supported by the Triton attention backend on {gpu.display_name} (compute "
            f"capability {gpu.cc_str}); native FP8 (fp8e4nv) requires SM89+. Re-run with --kv-cache-dtype "
            f"{rerun}.", "impl", "ValueError")


class TritonAttn(_TritonFp8):
    """TRITON_ATTN: quantizes queries on CUDA and on ROCm outside gfx90a/gfx11; stores e5m2 as e4m3."""

    def query_quant(self, site: Site) -> bool:
        gpu = site.gpu
        if gpu.platform == "cuda":
            return True
        return gpu.platform == "rocm" and not rocm_arch(gpu).startswith(("gfx90a", "gfx11"))

    def notes(self, site: Site, query_quant: bool) -> list[str]:
        if site.req.kv_cache_dtype != "fp8_e5m2":
            return []
        return [f"fp8_e5m2 on TRITON_ATTN is stored as e4m3 ({site.gpu.fp8_torch_dtype or 'float8_e4m3fn'}): "
                "the Triton write/read path views the cache as current_platform.fp8_dtype()."]


class TritonMla(_TritonFp8):
    """TRITON_MLA: dequantizes an fp8 cache to bf16 (no FP8 queries); sliding-window decode from 0.34."""

    def sliding_window_ok(self, engine: EngineVersion) -> bool:
        return engine_feature("triton_mla_sliding_window").holds_for(engine)


class TritonAttnDiffKv(BackendHooks):
    """TRITON_ATTN_DIFFKV: an FP8 cache from 0.32 (ENGINE_FEATURES triton_attn_diffkv_fp8)."""

    def kv_cache_dtype_reasons(self, req: BackendRequest, gpu: GpuProfile, attention_config: Mapping[str, Any],
                               engine: EngineVersion) -> list[str]:
        # triton_attn_diffkv.py::TritonAttentionDiffKVBackend.supported_kv_cache_dtypes: auto, bfloat16 before 0.32
        if is_quantized(req.kv_cache_dtype) and not engine_feature("triton_attn_diffkv_fp8").holds_for(engine):
            return ["kv_cache_dtype not supported"]
        return []


HOOKS: Mapping[str, type[BackendHooks]] = {"TRITON_ATTN": TritonAttn, "TRITON_MLA": TritonMla,
                                           "TRITON_ATTN_DIFFKV": TritonAttnDiffKv}
"""Backends of this family with behaviour beyond their capability rows."""
