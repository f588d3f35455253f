"""ROCm-only backends: ROCM_OCTAVE (fixed octave layouts)."""
from __future__ import annotations

from collections.abc import Mapping

from kvplan.backends.impl.base import BackendHooks
from kvplan.backends.request import BackendRequest
from kvplan.model.gpu import GpuProfile

__all__ = ["HOOKS"]


class RocmOctave(BackendHooks):
    """ROCM_OCTAVE: the octave layouts exist for head sizes 64, 128 and 256."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        if req.head_size not in (64, 128, 256):
            return ["head_size not supported by the fixed octave layouts"]
        return []


HOOKS: Mapping[str, type[BackendHooks]] = {"ROCM_OCTAVE": RocmOctave}
"""Backends of this family with behaviour beyond their capability rows."""
