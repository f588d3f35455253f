"""ROCm-only backends: ROCM_OCTAVE (fixed octave layouts), ROCM_ATTN (16-token pages by default)."""
from __future__ import annotations

from collections.abc import Mapping

from kvplan.backends.impl.base import BackendHooks, Site
from kvplan.backends.request import BackendRequest
from kvplan.model.gpu import GpuProfile

__all__ = ["HOOKS"]


class RocmOctave(BackendHooks):
    """ROCM_OCTAVE: the octave layouts exist for head sizes 64, 128 and 256."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        if req.head_size not in (64, 128, 256):
            return ["head_size not supported by the fixed octave layouts"]
        return []


class RocmAttn(BackendHooks):
    """ROCM_ATTN: its native C++ paged-attention kernel runs 16-token (and 32-token) pages."""

    def default_block_size(self, site: Site) -> int:
        # 16 is the default up to 0.33; 0.34 (default 64) keeps 16 through rocm_attn.py::
        # RocmAttentionBackend.get_preferred_block_size (ENGINE_FEATURES rocm_attn_prefers_block_16).
        return 16


HOOKS: Mapping[str, type[BackendHooks]] = {"ROCM_OCTAVE": RocmOctave, "ROCM_ATTN": RocmAttn}
"""Backends of this family with behaviour beyond their capability rows."""
