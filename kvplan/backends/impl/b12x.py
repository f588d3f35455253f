"""B12X (SM12x paged causal attention): its kernels page in 64 or 128 tokens."""
from __future__ import annotations

from collections.abc import Mapping

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.impl.base import BackendHooks, Site
from kvplan.backends.request import BackendRequest
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.gpu import GpuProfile

__all__ = ["HOOKS"]

_PAGE_SIZES = (64, 128)
"""b12x.py::_B12X_SUPPORTED_PAGE_SIZES."""


class B12x(BackendHooks):
    """B12X: the release's default block size if it is a B12X page size, else 128; no head 64 from 0.34."""

    exact_block_sizes = True  # b12x.py::B12xPagedAttentionBackend.supports_block_size: only its page sizes

    def head_size_ok(self, req: BackendRequest, gpu: GpuProfile, engine: EngineVersion) -> bool:
        # b12x.py::B12xPagedAttentionBackend.get_supported_head_sizes: 0.34 drops 64 (ENGINE_FEATURES)
        if req.head_size == 64 and not engine_feature("b12x_head_size_64").holds_for(engine):
            return False
        return super().head_size_ok(req, gpu, engine)

    def default_block_size(self, site: Site) -> int:
        # backends/b12x.py::B12xAttentionBackend.get_preferred_block_size (0.33 and 0.34): the default
        # if in _B12X_SUPPORTED_PAGE_SIZES (64, 128), else _B12X_PREFERRED_PAGE_SIZE (128). So 128 up to
        # 0.33 (default 16) and 64 from 0.34 (default 64).
        if self.block_size_ok(site.engine_block_size, site.gpu):
            return site.engine_block_size
        return 128


HOOKS: Mapping[str, type[BackendHooks]] = {"B12X": B12x}
"""Backends of this family with behaviour beyond their capability rows."""
