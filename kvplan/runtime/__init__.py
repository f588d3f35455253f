"""kvplan.runtime: Triton kernels that execute a plan's per-layer KV-cache layouts.

Importing this package is free: torch and triton load only when a kernel-side name is first
used (``kvplan.runtime.paged_attention``...), so the planner and CLI can import it safely.
``LayerLayout`` and ``TOLERANCES`` never need torch.

What `kvplan validate` uses::

    layout = LayerLayout.from_plan_layer(layer)            # ValueError if not executable
    cache = allocate_kv_cache(layout, num_blocks, block_size, "cuda")
    write_kv_cache(cache, key, value, slot_mapping)         # quantize on write
    out = paged_attention(query, cache, block_tables, seq_lens)                 # decode
    out = paged_attention(query, cache, block_tables, seq_lens, query_start_loc)  # prefill
    ref = reference_paged_attention(query, cache, block_tables, seq_lens, query_start_loc)
    TOLERANCES[layout.quant_mode]
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from kvplan.runtime.layout import EXECUTED_QUANT_MODES, LayerLayout
from kvplan.runtime.tolerances import TOLERANCES, Tolerance, tolerance_for

_LAZY = {
    "PagedKVCache": "kvplan.runtime.cache",
    "allocate_kv_cache": "kvplan.runtime.cache",
    "allocate_for_plan_layer": "kvplan.runtime.cache",
    "write_kv_cache": "kvplan.runtime.write",
    "paged_attention": "kvplan.runtime.attention",
    "paged_attention_decode": "kvplan.runtime.attention",
    "paged_attention_prefill": "kvplan.runtime.attention",
    "AttentionConfig": "kvplan.runtime.attention",
    "reference_write_kv_cache": "kvplan.runtime.reference",
    "reference_paged_attention": "kvplan.runtime.reference",
    "dequantize_kv_cache": "kvplan.runtime.reference",
    "run_suite": "kvplan.runtime.bench",
    "plot": "kvplan.runtime.bench",
}

__all__ = ["EXECUTED_QUANT_MODES", "LayerLayout", "TOLERANCES", "Tolerance", "tolerance_for",
           *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvplan.runtime' has no attribute '{name}'")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
