"""Step 5's KV caches (vllm/models/step5/nvidia, vLLM 0.33; vllm/models/step5/{nvidia,common}, 0.34).

Every sliding-window layer keeps one FlashAttention cache (Step5SplitKVFlashAttentionBackend, registered as
FLASH_ATTN). Every full-attention layer of a checkpoint with an enabled `sparse_config` is a DSA layer
(Step5Attention.use_dsa_backend) and registers, in this order:

1. `<prefix>.attn`: its GQA KV (STEP5_DSA, FullAttentionSpec) with a block stride of whole 8-token kernel
   blocks (sparse_attention.py::Step5DSAAttentionBackend.customize_spec: MultipleOf(8));
2. `<prefix>.attn.sparse_summary_cache`: one 256-byte uint8 summary per closed 8-token region
   (STEP5_CSA_SUMMARY; sparse_summary_cache.py::Step5SparseSummaryCacheLayer.get_kv_cache_spec:
   FullAttentionSpec, one head of 256, head_size_v 0, tokens_per_state 8, the main block size);
3. `<prefix>.attn.csa_tail_ring`: the open region's raw 1 KiB indexer rows (STEP5_CSA_TAIL_RING;
   csa_tail_ring.py::Step5CSATailRing.get_kv_cache_spec: a CircularBufferSpec whose page is the layer's own
   KV page, block stride aligned to one 1 KiB row).

The DSA backend supports only the BLNHC layout (Step5DSAAttentionBackend.supported_kv_cache_layouts): the
region summaries are packed beside the KV inside each block, so vLLM lays every group out block-outermost.
"""
from __future__ import annotations

from math import gcd
from typing import NoReturn

from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.arch import ExtraCache, LayerArch, ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan
from kvplan.planner.cache_specs import CacheSpec, ModelCaches, SpecContext
from kvplan.rules.memory import DTYPE_BYTES

ARCHITECTURES = ("Step5ForCausalLM", "Step5ForConditionalGeneration")

_LAYOUT = "BLNHC"
"""Step5DSAAttentionBackend.supported_kv_cache_layouts: BLNHC only."""
_FA_LAYOUT = "LBNHC"
"""The layout vLLM resolves where every layer runs FlashAttention (sparse_config enabled: false): FlashAttention's
first supported layout (v1/attention/backends/utils.py::resolve_kv_cache_layout)."""
_DSA_KERNEL_TOKENS = 8
"""Step5DSAAttentionBackend.customize_spec: block_stride_alignment=MultipleOf(8) (sparse prefill reads
eight-token pages, which must tile every block stride)."""
_FA_KERNEL_TOKENS = 16
"""FlashAttentionBackend.get_supported_kernel_block_sizes: MultipleOf(16) (Step 5's head sizes 128 and 192;
STEP5_DSA inherits it)."""
_RING_ROW_BYTES = 1024
"""csa_tail_ring.py::_ROW_BYTES: one bf16 [index_k | index_z] row, 2 * 256 * 2 bytes."""
_RING_OPEN_ROWS = 7
"""Step5CSATailRing.required_rows = 7 + num_speculative_tokens (MTP drafting, not laid out): the region's seven
earlier rows."""
_DSA_KV_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3")
"""Step5DSAAttentionBackend.supported_kv_cache_dtypes (Step5DSAAttentionImpl refuses other quantized caches)."""
_DSA_CAPABILITIES = ((9, 0), (10, 0), (10, 3))
"""Step5DSAAttentionBackend.supports_compute_capability: SM90, SM100, SM103."""


def _refuse(layer: int, message: str) -> NoReturn:
    # imported here: kvplan.planner.layout imports the builders (model_caches.BUILDERS)
    from kvplan.planner.layout import LayoutRefused
    raise LayoutRefused((layer,), message)


def _prefix(arch: ModelArch) -> str:
    """The text model's module path: Step5ForConditionalGeneration (Step3p7ForConditionalGeneration's
    frontend) keeps it under `language_model`."""
    return "language_model.model" if arch.architecture == "Step5ForConditionalGeneration" else "model"


def _kv_page(lp: LayerPlan, block_size: int) -> int:
    """AttentionSpec.page_size_bytes: block_size x KV heads on this rank x (K + V head size) x element bytes."""
    return block_size * lp.num_kv_heads * (lp.head_size + lp.head_size_v) * DTYPE_BYTES[lp.dtype or "bfloat16"]


def _check_build(lp: LayerPlan, dsa: bool, capability: tuple[int, int] | None) -> None:
    """The model build's refusals for one layer, as vLLM meets them: FlashAttentionImpl never reads fp8_e5m2
    (fa_utils.py::flash_attn_supports_kv_cache_dtype); a DSA layer needs SM90, SM100 or SM103
    (Step5Attention.__init__, Step5DSAAttentionBackend.supports_compute_capability), then an E4M3 FP8 or
    16-bit cache other than float16 (Step5DSAAttentionImpl.__init__)."""
    dtype = lp.kv_cache_dtype or "auto"
    if not dsa:
        if dtype == "fp8_e5m2":
            _refuse(lp.index, "FlashAttention does not support fp8_e5m2 kv-cache on this device.")
        return
    if capability is not None and capability not in _DSA_CAPABILITIES:
        _refuse(lp.index, "Step5 DSA requires SM90, SM100 or SM103; got "
                          f"DeviceCapability(major={capability[0]}, minor={capability[1]}).")
    if dtype == "float16":
        _refuse(lp.index, "Step5 DSA does not support a float16 KV cache")
    if dtype not in _DSA_KV_DTYPES:
        _refuse(lp.index, "Step5 DSA supports E4M3 FP8 KV cache only")


def _summary(name: str, lp: LayerPlan, x: ExtraCache, block_size: int) -> CacheSpec:
    """Step5SparseSummaryCacheLayer.get_kv_cache_spec: FullAttentionSpec(block_size, 1 head of 256 uint8,
    tokens_per_state 8): block_size / 8 summaries per block, not split over tensor-parallel ranks."""
    if block_size % x.tokens_per_state:
        _refuse(lp.index, "Step5 KV blocks must align to eight-token regions")
    page = block_size // x.tokens_per_state * x.elements * (x.element_bytes or 1)
    return CacheSpec(name=f"{name}.sparse_summary_cache", layer=lp.index, spec="FullAttentionSpec",
                     block_size=block_size, page_size_bytes=page)


def _tail_ring(name: str, lp: LayerPlan, page: int, block_size: int, ctx: SpecContext) -> CacheSpec | None:
    """Step5CSATailRing.get_kv_cache_spec: a CircularBufferSpec of the main block size whose page is the DSA
    layer's own KV page (it must hold 7 rows of 1 KiB without MTP drafting, else vLLM 0.33 refuses; 0.34
    advertises a larger kernel block for the ring, which steers the block size vLLM resolves: not modelled,
    None)."""
    rows = _RING_OPEN_ROWS
    if page % _RING_ROW_BYTES or page // _RING_ROW_BYTES < rows:
        if ctx.engine is not None and engine_feature("step5_tail_ring_kernel_block").holds_for(ctx.engine):
            return None
        _refuse(lp.index, f"Step5 CSA tail ring needs {rows} rows of {_RING_ROW_BYTES} bytes in one "
                          f"{page}-byte KV page; increase --block-size.")
    return CacheSpec(name=f"{name}.csa_tail_ring", layer=lp.index, spec="CircularBufferSpec",
                     block_size=block_size, page_size_bytes=page, stride_alignment=_RING_ROW_BYTES,
                     fixed_blocks=1)


def _dsa_alignment(lp: LayerPlan, block_size: int) -> int:
    """KVCacheSpec.get_block_stride_alignment of MultipleOf(8): the page of a gcd(8, block)-token kernel
    block, 1 where the kernel block is the whole block."""
    kernel = gcd(_DSA_KERNEL_TOKENS, block_size)
    return 1 if kernel == block_size else _kv_page(lp, kernel)


def _dsa_layer(name: str, lp: LayerPlan, la: LayerArch, bs: int, ctx: SpecContext) -> list[CacheSpec] | None:
    """A DSA layer's three caches, in registration order (Step5Attention.__init__: the Attention layer, then
    the summary layer, then the tail ring)."""
    page = _kv_page(lp, bs)
    main = CacheSpec(name=name, layer=lp.index, spec="FullAttentionSpec", block_size=bs, page_size_bytes=page,
                     stride_alignment=_dsa_alignment(lp, bs))
    summary = next(x for x in la.extra_caches if not x.ring and not x.same_as_layer)
    ring = _tail_ring(name, lp, page, bs, ctx)
    return None if ring is None else [main, _summary(name, lp, summary, bs), ring]


def _flash_attn(name: str, lp: LayerPlan, block_size: int, shared_page: int | None) -> CacheSpec:
    """A layer on Step5SplitKVFlashAttentionBackend: FLASH_ATTN's own spec (Attention.get_kv_cache_spec). A
    sliding-window layer picks its own block (_largest_kernel_block_within: FlashAttention's kernel blocks
    are multiples of 16): the largest multiple of 16 whose page fits the budget (the shared skip page, else
    the page of the block size), at least 16; with a shared page it is padded to it (page_size_padded)."""
    per_token = _kv_page(lp, 1)
    if lp.kind == "sliding_attention":
        budget = shared_page or per_token * block_size
        block = max(_FA_KERNEL_TOKENS, budget // per_token // _FA_KERNEL_TOKENS * _FA_KERNEL_TOKENS)
        return CacheSpec(name=name, layer=lp.index, spec="SlidingWindowSpec", block_size=block,
                         page_size_bytes=max(block * per_token, shared_page or 0), sliding_window=lp.sliding_window)
    return CacheSpec(name=name, layer=lp.index, spec="FullAttentionSpec", block_size=block_size,
                     page_size_bytes=block_size * per_token)


def _skip_alignment(attn: list[LayerPlan], flags: ServingFlags, block_size: int) -> tuple[int, int | None]:
    """Platform._align_heterogeneous_kv_block_size, with --kv-cache-dtype-skip-layers: where a model-dtype
    token page (the whole model's KV heads and head size: ModelConfig.get_num_kv_heads / get_head_size, the
    largest of the layers') exceeds the cache dtype's, the block grows to the smallest multiple of
    max(16, block) whose cache-dtype page covers 16 model-dtype tokens; that page is shared (the sliding
    layers pad to it). (block size, shared page or None)."""
    primary = next((lp for lp in attn if not lp.skipped), None)
    skipped = next((lp for lp in attn if lp.skipped), None)
    if not flags.kv_cache_dtype_skip_layers or primary is None or skipped is None:
        return block_size, None
    width = max(lp.num_kv_heads for lp in attn) * 2 * max(lp.head_size for lp in attn)
    primary_page = width * DTYPE_BYTES[primary.dtype or "bfloat16"]
    padded_page = width * DTYPE_BYTES[skipped.dtype or "bfloat16"]
    if padded_page <= primary_page:
        return block_size, None
    align = max(_FA_KERNEL_TOKENS, block_size)
    block_size = max(block_size, align * -(-padded_page * _FA_KERNEL_TOKENS // (align * primary_page)))
    return block_size, block_size * primary_page


def _is_dsa(la: LayerArch | None) -> bool:
    """A DSA layer: kvplan.ingest.flagship._step5 gives it the tail ring and the summary cache."""
    return la is not None and any(x.ring and x.same_as_layer for x in la.extra_caches)


def build(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, ctx: SpecContext) -> ModelCaches | None:
    """Step 5's caches in vLLM's order (model.layers.N.self_attn.attn and the DSA layers' two more; with a
    sparse_config whose enabled is false, every layer on FlashAttention, layer-outermost), or None
    where kvplan does not lay it out: the checkpoint's MTP layers drafting
    (Step5MTP's `model.layers.N.mtp_block` layers, of layer_types_with_mtp's kinds, which kvplan's model does
    not carry), or a 0.34 tail ring that raises the kernel block. Raises LayoutRefused where vLLM refuses to
    build the model (a KV cache dtype its kernels do not read, blocks not of whole 8-token regions, a tail
    ring that does not fit one page)."""
    by_index = {la.index: la for la in arch.layers}
    attn = [lp for lp in sorted(layers, key=lambda lp: lp.index)
            if lp.kind in ("full_attention", "sliding_attention") and lp.bytes_per_token]
    from kvplan.planner.layout import is_mtp  # here: kvplan.planner.layout imports the builders
    if is_mtp(flags):  # Step5MTP drafting (vLLM refuses it without MTP layers)
        return None
    sparse = any(_is_dsa(by_index.get(lp.index)) for lp in attn)
    bs, shared_page = _skip_alignment(attn, flags, ctx.block_size)
    prefix = _prefix(arch)
    specs: list[CacheSpec] = []
    for lp in attn:  # the model's build refuses before any spec is asked for
        _check_build(lp, _is_dsa(by_index.get(lp.index)), ctx.compute_capability)
    for lp in attn:
        la = by_index.get(lp.index)
        name = f"{prefix}.layers.{lp.index}.self_attn.attn"
        if la is not None and _is_dsa(la):
            dsa = _dsa_layer(name, lp, la, bs, ctx)
            if dsa is None:
                return None
            specs += dsa
        else:
            specs.append(_flash_attn(name, lp, bs, shared_page))
    # without DSA layers FlashAttention's default layout (layer-outermost) stands
    return ModelCaches(specs=tuple(specs), block_size=bs, block_outermost=sparse,
                       layout_name=_LAYOUT if sparse else _FA_LAYOUT)
