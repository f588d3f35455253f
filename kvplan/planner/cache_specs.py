"""The KV caches a model registers, one per vLLM KVCacheSpec, for the models whose layout kvplan builds cache by
cache (DeepSeek-V4, GLM-5 Next, Step 5, Inkling, MiniMax-M3: layers with several caches of different block
sizes and pages, set by their own attention backends).

A builder (kvplan/planner/model_caches/) turns a model's layer plans into the caches vLLM's GPU model runner
collects (`get_kv_cache_spec`: every layer of the static forward context, in registration order), each with the
block size, page and block-stride alignment its backend gives it; kvplan/planner/packing.py then groups and
packs them as vLLM's `get_kv_cache_groups` and `get_kv_cache_configs` do. Pure data, no I/O.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from kvplan.backends.capabilities import EngineVersion
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan

SpecClass = Literal["FullAttentionSpec", "MLAAttentionSpec", "SlidingWindowSpec", "SlidingWindowMLASpec",
                    "ChunkedLocalAttentionSpec", "CircularBufferSpec", "CrossAttentionSpec", "MambaSpec"]
"""vLLM's KVCacheSpec classes (vllm/v1/kv_cache_interface.py) the builders produce."""


@dataclass(frozen=True)
class CacheSpec:
    """One KV cache as vLLM's KVCacheSpec describes it on one tensor-parallel rank."""

    name: str
    """vLLM's layer name (model.layers.3.attn.swa_cache): the key of get_kv_cache_spec's dict."""
    layer: int
    """The decoder layer the cache belongs to (extract_layer_index of the name)."""
    spec: SpecClass
    """Its KVCacheSpec class."""
    block_size: int
    """Tokens per block."""
    page_size_bytes: int
    """Bytes of one block of this cache (padding included: page_size_padded)."""
    stride_alignment: int = 1
    """Bytes the stride between physical blocks must be a multiple of (get_block_stride_alignment: a whole
    kernel block's page where the backend splits blocks into smaller kernel blocks, else 1)."""
    sliding_window: int | None = None
    """Tokens a sliding-window spec keeps (SlidingWindowSpec / SlidingWindowMLASpec), or a chunk."""
    fixed_blocks: int | None = None
    """Blocks one request holds whatever its length (CircularBufferSpec: 1; MambaSpec: the state blocks of
    the cache mode); None: counted from the tokens."""
    uniform_key: tuple[object, ...] = field(default=())
    """Extra fields vLLM's is_uniform_with_collection compares beyond the class family and window
    (SlidingWindowMLASpec: bounded_replay)."""
    draft: bool = False
    """A speculative-decoding draft's cache (is_draft)."""
    identity: tuple[object, ...] = ()
    """The rest of vLLM's spec equality (KV heads, head size, dtype): caches equal in every field are one spec,
    and vLLM's page-unifying grouping buckets caches by spec (Inkling's conv states of local and global layers
    share a page and window but not their heads)."""


@dataclass(frozen=True)
class SpecContext:
    """What a builder needs beyond the layer plans: the engine's sizes and the GPU."""

    max_model_len: int
    block_size: int
    """The cache config's block size before any model alignment (the release default, or --block-size)."""
    max_num_batched_tokens: int
    engine: EngineVersion | None = None
    compute_capability: tuple[int, int] | None = None


@dataclass(frozen=True)
class ModelCaches:
    """A builder's answer: the caches in vLLM's order and how the pool is laid out."""

    specs: tuple[CacheSpec, ...]
    block_size: int
    """The cache config's block size after the model's alignment (what vLLM logs as the block size)."""
    block_outermost: bool
    """The KV cache layout vLLM resolves from the backends' supported layouts is block-outermost (BLHNC,
    BLNHC: pages of different sizes packed side by side in one block); False: layer-outermost (LBNHC)."""
    layout_name: str | None = None
    """That layout's name as vLLM logs it (resolve_kv_cache_layout)."""


Builder = Callable[[list[LayerPlan], ModelArch, ServingFlags, SpecContext], ModelCaches | None]
"""A model family's builder: None where it does not lay these flags out (said in its docstring)."""


def blocks_per_request(spec: CacheSpec, max_model_len: int, in_flight: int, retained: int = 0) -> int:
    """Blocks one request at max_model_len holds of this cache (vLLM: cdiv(max_memory_usage_bytes, page)).

    `in_flight`: tokens scheduled but not settled (max_num_batched_tokens); `retained`: a sliding window's
    extra_retained_tokens (multi-module MTP)."""
    if spec.fixed_blocks is not None:  # CircularBufferSpec: one ring; MambaSpec: the cache mode's state blocks
        return spec.fixed_blocks
    if spec.spec in ("SlidingWindowSpec", "SlidingWindowMLASpec") and spec.sliding_window:
        # SlidingWindowSpec.max_admission_blocks_per_request: the window below the in-flight tokens, + 1 for a
        # window that does not start on a block boundary
        return -(-min(spec.sliding_window - 1 + retained + in_flight, max_model_len) // spec.block_size) + 1
    if spec.spec == "ChunkedLocalAttentionSpec" and spec.sliding_window:
        return -(-min(spec.sliding_window + in_flight, max_model_len) // spec.block_size)
    if spec.spec == "CrossAttentionSpec":  # the encoder's input tokens: max_num_encoder_input_tokens
        return -(-in_flight // spec.block_size)
    return -(-max_model_len // spec.block_size)
