"""Inkling's caches (vllm/models/inkling/nvidia/): per decoder layer, its short-convolution state kept as a
sliding-window cache, then its attention cache.

- `model.layers.N.conv_state` (sconv_swa_attn.py::InklingConvState.get_kv_cache_spec): a SlidingWindowSpec
  whose block and window are sconv_kernel_size tokens; per rank num_kv_heads // TP heads of one packed width
  (K + V + two hidden_size / num_kv_heads output streams, padded to a power of two), head_size_v 0, always
  bfloat16 (the class asserts the model dtype). The layer's local geometry (swa_*) applies on local layers.
- `model.layers.N.attn` (attention.py::InklingAttention.get_kv_cache_spec): a SlidingWindowSpec of
  sliding_window_size tokens on local_layer_ids layers, else a FullAttentionSpec; the cache config's block
  size, the --kv-cache-dtype.

The conv layer registers first (InklingDecoderLayer builds it before the attention layer, and the model
runner collects the static forward context in registration order). No backend aligns the block size, and
neither the sconv backend nor FLASH_ATTN declares a layout: vLLM's default preference, LBNHC
(vllm/v1/attention/backends/utils.py::get_supported_kv_cache_layouts), where pages of different sizes are
unified layer by layer (kv_cache_utils.unify_kv_cache_spec_page_size), not packed in one block.
"""
from __future__ import annotations

from kvplan.model.arch import LayerArch, ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan
from kvplan.planner.cache_specs import CacheSpec, ModelCaches, SpecContext
from kvplan.rules.memory import DTYPE_BYTES

ARCHITECTURES = ("InklingForCausalLM", "InklingForConditionalGeneration")

_CONV_BYTES = DTYPE_BYTES["bfloat16"]
"""InklingConvState asserts the model dtype is bfloat16: the conv state is always 2 B an element."""


def _conv_spec(lp: LayerPlan, la: LayerArch, tp: int) -> CacheSpec | None:
    """The layer's conv-state cache (InklingConvState): num_kv_heads // TP heads x the packed width x kernel
    tokens a block; None where vLLM refuses the layer (TP above the layer's KV heads) or it has no conv state."""
    conv = next((x for x in la.extra_caches if x.window is not None), None)
    if conv is None or not la.num_kv_heads or tp > la.num_kv_heads:  # "sconv SWA cache supports tp_size <= ..."
        return None
    width = conv.elements // la.num_kv_heads  # the padded per-head width the ingest reader computed
    kernel = conv.window
    assert kernel is not None
    return CacheSpec(name=f"model.layers.{lp.index}.conv_state", layer=lp.index, spec="SlidingWindowSpec",
                     block_size=kernel, page_size_bytes=kernel * (la.num_kv_heads // tp) * width * _CONV_BYTES,
                     sliding_window=kernel, identity=(la.num_kv_heads // tp, width))


def _attn_spec(lp: LayerPlan, block_size: int) -> CacheSpec:
    """The layer's attention cache (InklingAttention): K and V of its per-rank KV heads, the cache dtype."""
    page = block_size * lp.num_kv_heads * (lp.head_size + lp.head_size_v) * DTYPE_BYTES[lp.dtype or "bfloat16"]
    identity = (lp.num_kv_heads, lp.head_size, lp.dtype)
    if lp.sliding_window:
        return CacheSpec(name=f"model.layers.{lp.index}.attn", layer=lp.index, spec="SlidingWindowSpec",
                         block_size=block_size, page_size_bytes=page, sliding_window=lp.sliding_window,
                         identity=identity)
    return CacheSpec(name=f"model.layers.{lp.index}.attn", layer=lp.index, spec="FullAttentionSpec",
                     block_size=block_size, page_size_bytes=page, identity=identity)


def build(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, ctx: SpecContext) -> ModelCaches | None:
    """Inkling's caches in vLLM's order. None (not laid out) with a speculative draft (InklingMTP registers
    caches of its own), --kv-cache-dtype-skip-layers, a model dtype other than bfloat16 or TP above a layer's KV
    heads (vLLM refuses both)."""
    # --kv-cache-dtype-skip-layers: vLLM re-aligns the block size to the mixed pages
    # (Platform._align_heterogeneous_kv_block_size), which this builder does not model
    if flags.num_speculative_tokens or flags.speculative_method or flags.kv_cache_dtype_skip_layers \
            or flags.dtype not in ("auto", "bfloat16") or arch.config_dtype not in (None, "bfloat16"):
        return None
    by_index = {la.index: la for la in arch.layers}
    specs: list[CacheSpec] = []
    for lp in layers:
        la = by_index.get(lp.index)
        if la is None or not lp.bytes_per_token:
            continue
        if lp.dtype not in DTYPE_BYTES:
            return None
        conv = _conv_spec(lp, la, flags.tensor_parallel_size)
        if conv is None:
            return None
        specs += [conv, _attn_spec(lp, ctx.block_size)]
    if not specs:
        return None
    return ModelCaches(specs=tuple(specs), block_size=ctx.block_size, block_outermost=False, layout_name="LBNHC")
