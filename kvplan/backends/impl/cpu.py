"""CPU platform backends: CPU_ATTN (FP8 needs AVX-512 or AMX and head_size % 32 == 0, reference §8)."""
from __future__ import annotations

from collections.abc import Mapping

from kvplan.backends.impl.base import BackendHooks, ConstructionError, Site

__all__ = ["HOOKS"]


class CpuAttn(BackendHooks):
    """CPU_ATTN."""

    def construction_error(self, site: Site) -> ConstructionError | None:
        if not site.req.quant_mode.is_quantized:
            return None
        if site.gpu.fp8 == "none":
            return ConstructionError("FP8 KV cache on CPU requires x86 with AVX-512 or AMX.", "impl",
                                     "NotImplementedError")
        if site.req.head_size % 32 != 0:
            return ConstructionError("FP8 KV cache on CPU requires head_size to be a multiple of 32 (got "
                                     f"{site.req.head_size}). (kvplan wording)", "impl", "NotImplementedError")
        return None


class CpuMla(BackendHooks):
    """CPU_MLA: mla/cpu_mla.py::CPUMLABackend.supports_block_size takes 16 only, no multiple of it."""

    exact_block_sizes = True


HOOKS: Mapping[str, type[BackendHooks]] = {"CPU_ATTN": CpuAttn, "CPU_MLA": CpuMla}
"""Backends of this family with behaviour beyond their capability rows."""
