"""Low-bit KV backends: TURBOQUANT and ULTRAQUANT (ROCm tolerates them forced on boundary layers)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from kvplan.backends.impl.base import BackendHooks, Site

__all__ = ["HOOKS"]


class TurboQuant(BackendHooks):
    """TURBOQUANT: boundary layers stay in the model dtype on FlashAttention 2."""

    rocm_forced_fallback: ClassVar[bool] = True

    def notes(self, site: Site, query_quant: bool) -> list[str]:
        return ["TurboQuant boundary layers (first/last 2) stay in the model dtype and run FlashAttention "
                "forced to version 2."]


class UltraQuant(BackendHooks):
    """ULTRAQUANT."""

    rocm_forced_fallback: ClassVar[bool] = True


HOOKS: Mapping[str, type[BackendHooks]] = {"TURBOQUANT": TurboQuant, "ULTRAQUANT": UltraQuant}
"""Backends of this family with behaviour beyond their capability rows."""
