"""TOKENSPEED_MLA: the tokenspeed_mla kernels, DeepSeek-R1 MLA dims only (reference §6.1)."""
from __future__ import annotations

from collections.abc import Mapping

from kvplan.backends.impl.base import BackendHooks
from kvplan.backends.request import BackendRequest
from kvplan.model.gpu import GpuProfile

__all__ = ["DEEPSEEK_R1_DIMS", "HOOKS"]

DEEPSEEK_R1_DIMS = (128, 64, 128)
"""(qk_nope, rope, v) the kernels are built for."""
DIMS_REASON = "only DeepSeek-R1 MLA dims (qk_nope 128, rope 64, v 128) are supported"


class TokenspeedMla(BackendHooks):
    """TOKENSPEED_MLA decode."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        dims = req.mla_dims
        return [DIMS_REASON] if dims and dims.triple != DEEPSEEK_R1_DIMS else []


HOOKS: Mapping[str, type[BackendHooks]] = {"TOKENSPEED_MLA": TokenspeedMla}
"""Backends of this family with behaviour beyond their capability rows."""
