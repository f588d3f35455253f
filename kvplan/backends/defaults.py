"""Serving defaults that depend on the vLLM release: KV block size, extensible KV cache, memory share.

What `vllm serve` uses when the launch line does not say, per release (the versions come from
`ENGINE_FEATURES` in :mod:`kvplan.backends.vllm_rows`, each row citing the vLLM source):

* block size: `CacheConfig.DEFAULT_BLOCK_SIZE`, 16 up to 0.33 (read in 0.25.1 and 0.33.0) and 64 from
  0.34; the attention backends may still pick another size (`BackendHooks.default_block_size` for one,
  `preferred_block_size` for the model's backends together: FlashMLA 64, CUTLASS MLA 128, FlashInfer-MLA
  32 at 0.33's default).
* extensible KV cache (0.34+): on for CUDA and ROCm unless `--kv-cache-memory-bytes` or
  `--num-gpu-blocks-override` is given (`VllmConfig._resolve_extensible_kv_cache`).
* `--gpu-memory-utilization`: the release's parser default (generated data: 0.9 up to 0.19, 0.92 from
  0.20 to 0.33); from 0.34 `None`, resolved to 1.0 with the extensible KV cache and 0.92 without
  (`CacheConfig.resolved_gpu_memory_utilization`).

The memory budget (planner) calls `resolved_gpu_memory_utilization`.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.vllm_rows import BACKENDS, engine_feature
from kvplan.model.gpu import GpuProfile
from kvplan.releases.release import find_release

__all__ = [
    "GPU_MEMORY_UTILIZATION_BEFORE_034",
    "default_block_size",
    "extensible_kv_cache",
    "preferred_block_size",
    "resolved_gpu_memory_utilization",
]

GPU_MEMORY_UTILIZATION_BEFORE_034 = 0.92
"""`CacheConfig.DEFAULT_GPU_MEMORY_UTILIZATION` (also the 0.34 default without the extensible cache)."""


def default_block_size(engine: EngineVersion) -> int:
    """`CacheConfig.DEFAULT_BLOCK_SIZE` of the release: 64 from 0.34, 16 before."""
    return 64 if engine_feature("default_block_size_64").holds_for(engine) else 16


SPARSE_INDEXER_KERNEL_BLOCK = 64
"""The sparse-MLA indexer's kernel block on CUDA (DeepSeek-V3.2 / GLM-5's `DEEPSEEK_V32_INDEXER` backend:
`DeepseekV32IndexerBackend.get_supported_kernel_block_sizes` answers [64]; on ROCm any multiple of 1),
vllm/v1/attention/backends/mla/indexer.py, vLLM 0.33.0 and 0.34.0."""


def _indexer_ok(block_size: int, kernel: int | None) -> bool:
    return kernel is None or block_size % kernel == 0


def preferred_block_size(chosen: Sequence[tuple[str, int]], gpu: GpuProfile, default: int, *,
                         sparse_indexer: bool = False) -> int | None:
    """Phase 1 of `Platform.update_block_size_for_backend` (`_preferred_block_size_for_backends`, vLLM
    0.33.0 and 0.34.0 alike): the block size of a launch without --block-size, from the model's attention
    backends. `chosen`: (backend, the block size that backend prefers for its layers) in layer order. One
    backend: its preference (`get_preferred_block_size`); several: the release default when every backend
    accepts it, else the smallest LCM of one kernel block size per backend that all accept. None without
    backends, or where they share no size (vLLM raises at startup; KV701 reports the backends).
    `sparse_indexer`: the model's sparse-MLA layers also register their indexer's key cache, whose backend
    (`DEEPSEEK_V32_INDEXER`) is one more of the model's backends (`_find_non_ssm_backends` walks every
    attention layer): block size a multiple of SPARSE_INDEXER_KERNEL_BLOCK on CUDA."""
    from kvplan.backends.impl import hooks_for

    names = list(dict.fromkeys(name for name, _ in chosen))
    if not names:
        return None
    kernel = (SPARSE_INDEXER_KERNEL_BLOCK if gpu.vendor == "nvidia" else 1) if sparse_indexer else None
    if len(names) == 1 and kernel is None:
        return max(bs for _, bs in chosen)
    hooks = [hooks_for(n) for n in names]
    if all(h.block_size_ok(default, gpu) for h in hooks) and _indexer_ok(default, kernel):
        return default
    sizes = [[*(h.block_sizes(gpu) or ()), *((m,) if (m := BACKENDS[n].block_size_multiple_of) else ())] or [1]
             for n, h in zip(names, hooks, strict=True)]
    if kernel is not None:
        sizes.append([kernel])
    for candidate in sorted({math.lcm(*combo) for combo in itertools.product(*sizes)}):
        if all(h.block_size_ok(candidate, gpu) for h in hooks) and _indexer_ok(candidate, kernel):
            return candidate
    return None


def extensible_kv_cache(engine: EngineVersion, platform: str, *, requested: bool | None = None,
                        kv_cache_memory_bytes: int | None = None,
                        num_gpu_blocks_override: int | None = None) -> bool:
    """Whether the release sizes the KV cache from measured memory (`--enable-extensible-kv-cache`).

    Not before 0.34. An explicit `requested` wins (vLLM raises if it is unsupported there); unset,
    it is on for CUDA and ROCm unless a fixed KV size is given. KV-connector cases (legacy IPC,
    custom memory pools, NIXL without an IMEX channel) also turn it off in vLLM; kvplan does not
    model KV connectors.
    """
    if not engine_feature("extensible_kv_cache").holds_for(engine):
        return False
    if requested is not None:
        return requested
    return (platform in ("cuda", "rocm") and kv_cache_memory_bytes is None
            and num_gpu_blocks_override is None)


def resolved_gpu_memory_utilization(engine: EngineVersion, platform: str, given: float | None = None, *,
                                    extensible: bool | None = None) -> float:
    """The share of GPU memory vLLM budgets: `given` if passed, else the release's default
    (1.0 with the 0.34 extensible KV cache, else the release's parser default: 0.9 up to 0.19, 0.92 from 0.20;
    0.92 where kvplan has no data for the release). `extensible`: the resolved
    `extensible_kv_cache` (computed with its defaults when None)."""
    if given is not None:
        return given
    if extensible is None:
        extensible = extensible_kv_cache(engine, platform)
    if extensible:
        return 1.0
    found = find_release(engine.version) if engine.engine == "vllm" and engine.version else None
    share = found.parser_default("gpu_memory_utilization") if found is not None else None
    return float(share) if isinstance(share, (int, float)) else GPU_MEMORY_UTILIZATION_BEFORE_034
