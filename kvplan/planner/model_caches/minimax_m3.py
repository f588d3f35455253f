"""MiniMax-M3's caches (vllm/models/minimax_m3/nvidia/model.py): per decoder layer its attention's K/V cache
and, on sparse layers, the indexer's key cache before it.

- Dense layers (sparse_attention_freq[i] == 0, MiniMaxM3Attention): vLLM's Attention at
  `model.layers.N.self_attn.attn`, a FullAttentionSpec of the layer's KV heads per rank in --kv-cache-dtype.
- Sparse layers (MiniMaxM3SparseAttention): its MiniMaxM3Indexer registers `...self_attn.attn.index_cache`
  first (common/indexer.py::MiniMaxM3IndexerCache.get_kv_cache_spec: a key-only MLAAttentionSpec, one head of
  sparse_index_dim, bfloat16 unless --attention-config indexer_kv_dtype is fp8), then the attention registers
  `...self_attn.attn` (MiniMaxM3SparseAttention.get_kv_cache_spec: a FullAttentionSpec like the dense one).

The block size: the sparse and indexer backends take 128-token kernel blocks only
(get_supported_kernel_block_sizes), FLASH_ATTN multiples of 16; without --block-size vLLM picks the smallest
size every backend accepts (vllm/platforms/interface.py::_preferred_block_size_for_backends): the default
where it is a multiple of 128, else 128. On Hopper the sparse layers run the Triton backend, which declares
no layout: LBNHC, pages unified layer by layer. Blackwell's MSA backend asks for LBHNC and FlashInfer's
dense layers bring their own constraints; kvplan does not lay that out (vLLM's oracle cannot build it on a
CPU: FlashInfer's TRTLLM-gen workspace)."""
from __future__ import annotations

from kvplan.model.arch import LayerArch, ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan
from kvplan.planner.cache_specs import CacheSpec, ModelCaches, SpecContext
from kvplan.rules.memory import DTYPE_BYTES

ARCHITECTURES = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")

SPARSE_KERNEL_BLOCK = 128
"""The one kernel block size of MiniMaxM3SparseBackend and MiniMaxM3IndexerBackend (common/)."""

_INDEXER_BYTES = {"auto": 2, "bf16": 2, "fp8": 1, "fp8_e4m3": 1}
"""MiniMaxM3IndexerCache's storage: bfloat16, or e4m3 for the fp8 score path (attention_config
indexer_kv_dtype; "auto" resolves to bf16 there: MiniMaxM3SparseAttention passes resolve_indexer_kv_dtype("bf16"))."""


def block_size(flags: ServingFlags, default: int, sparse: bool) -> int | None:
    """The cache config's block size after vLLM aligns it to the backends (update_block_size_for_backend):
    --block-size as given (None where the sparse backends cannot take it: vLLM refuses), else the default
    where every backend accepts it, else the least common size, 128."""
    if not sparse:
        return flags.block_size or default
    if flags.block_size:
        return flags.block_size if flags.block_size % SPARSE_KERNEL_BLOCK == 0 else None
    return default if default % SPARSE_KERNEL_BLOCK == 0 else SPARSE_KERNEL_BLOCK


def _index_keys(la: LayerArch) -> int | None:
    """sparse_index_dim of a sparse layer's indexer (the ingest reader's index-key cache), else None."""
    return next((x.elements for x in la.extra_caches if x.name == "index keys"), None)


def _layer_specs(lp: LayerPlan, la: LayerArch, bs: int, index_bytes: int, prefix: str) -> list[CacheSpec]:
    name = f"{prefix}.{lp.index}.self_attn.attn"
    out = []
    if (dim := _index_keys(la)) is not None:
        out.append(CacheSpec(name=f"{name}.index_cache", layer=lp.index, spec="MLAAttentionSpec", block_size=bs,
                             page_size_bytes=bs * dim * index_bytes))
    page = bs * lp.num_kv_heads * (lp.head_size + lp.head_size_v) * DTYPE_BYTES[lp.dtype or "bfloat16"]
    out.append(CacheSpec(name=name, layer=lp.index, spec="FullAttentionSpec", block_size=bs, page_size_bytes=page))
    return out


def build(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, ctx: SpecContext) -> ModelCaches | None:
    """MiniMax-M3's caches in vLLM's order. None (not laid out) on Blackwell (see the module docstring), with a
    speculative draft (its MTP layers register caches of their own), --kv-cache-dtype-skip-layers (vLLM
    re-aligns the block size to the mixed pages), a cache dtype stored in packed blocks (nvfp4), an unknown
    indexer_kv_dtype or a --block-size the sparse backends refuse."""
    cc = ctx.compute_capability
    index_bytes = _INDEXER_BYTES.get(str(flags.attention_config.get("indexer_kv_dtype", "auto")))
    if (cc is not None and cc[0] >= 10) or flags.num_speculative_tokens or flags.speculative_method \
            or flags.kv_cache_dtype_skip_layers or index_bytes is None:
        return None
    by_index = {la.index: la for la in arch.layers}
    kv = [(lp, by_index[lp.index]) for lp in layers if lp.bytes_per_token and lp.index in by_index]
    if not kv or any(lp.dtype not in DTYPE_BYTES or lp.sliding_window for lp, _ in kv):
        return None
    bs = block_size(flags, ctx.block_size, any(_index_keys(la) is not None for _, la in kv))
    if bs is None:
        return None
    # the multimodal class builds the text model under `language_model` (MiniMaxM3SparseForConditionalGeneration)
    prefix = ("language_model.model.layers" if arch.architecture == "MiniMaxM3SparseForConditionalGeneration"
              else "model.layers")
    specs = [s for lp, la in kv for s in _layer_specs(lp, la, bs, index_bytes, prefix)]
    return ModelCaches(specs=tuple(specs), block_size=bs, block_outermost=False, layout_name="LBNHC")
