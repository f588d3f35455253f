"""DeepSeek-V4's KV caches as vLLM's model class registers them (vllm/models/deepseek_v4/attention.py).

Every decoder layer i (`DeepseekV4Attention`, compress ratio r = compress_rates[layer_types[i]], 1 when the
type has none) registers, in this order (its static forward context order, which vLLM's grouping follows):

* at r = 4 only, its indexer (`DeepseekV4Indexer`, built before the attention registers itself):
  `indexer.k_cache` (`DeepseekV4IndexerCache`: MLAAttentionSpec, one uint8 row of index_head_dim fp8 + fp32
  scale per 128 per r tokens) and `indexer.compressor.state_cache` (an fp32 compressor state of
  2 x 2 x index_head_dim, block 4);
* `swa_cache` (`DeepseekV4SWACache`: SlidingWindowMLASpec of config sliding_window, block 64, one 584 B
  fp8_ds_mla record per token);
* at r > 1, the layer itself (`get_kv_cache_spec`: MLAAttentionSpec with tokens_per_state r, one 584 B record
  per r tokens, block = the cache config's block size) and `compressor.state_cache` (`CompressorStateCache`:
  fp32 state of 2 x coff x head_dim, coff 2 at r = 4; block 4 at r = 4, 8 at r = 128; window coff x r).

Every page is rounded up to the fp8_ds_mla layout's 576 B alignment (`_apply_alignment_padding` of
vllm/v1/kv_cache_interface.py), the compressor states and indexer keys too (they read the cache config's
dtype, which the attention rewrites to fp8_ds_mla): the pages packed side by side in one block then all keep
the FlashMLA decode kernel's stride. The same in vLLM 0.33.0 and 0.34.0.
"""
from __future__ import annotations

from kvplan.backends.impl.flashmla import is_flashmla_sparse
from kvplan.model.arch import LayerArch, ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan
from kvplan.planner.cache_specs import CacheSpec, ModelCaches, SpecContext

ARCHITECTURES = ("DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration")

FP8_DS_MLA = "fp8_ds_mla"
FP8_DS_MLA_RECORD = 584
"""Bytes of one fp8_ds_mla record (448 fp8 NoPE + 64 bf16 RoPE + 8 B UE8M0 scales), as vLLM writes it:
DeepseekV4SWACache's packed_bytes_per_token and DeepseekV4Attention.get_kv_cache_spec's state_content_bytes."""
FP8_DS_MLA_ALIGNMENT = 576
"""Page alignment of the fp8_ds_mla layout (the FlashMLA decode kernel's TMA stride): every DeepSeek-V4 cache
spec passes alignment=576 when the cache config's dtype is fp8_ds_mla (512 for the plain-row layouts)."""
SPARSE_MLA_BLOCK = 256
"""The only kernel block size of DeepSeek-V4's sparse MLA and indexer backends (FLASHMLA_SPARSE_DSV4 in
vllm/models/deepseek_v4/sparse_mla.py, DEEPSEEK_V4_INDEXER in vllm/v1/attention/backends/mla/indexer.py:
get_supported_kernel_block_sizes [256]): Platform.update_block_size_for_backend sets the cache block to it."""
SWA_BLOCK = 64
"""DeepseekV4SWACache's block size (vllm/v1/attention/backends/mla/sparse_swa.py: block_size=64)."""
COMPRESSOR_BLOCKS = {4: 4, 128: 8}
"""CompressorStateCache's block size by compress ratio (vllm/models/deepseek_v4/compressor.py: the state pages
share the physical tensor of the compressed KV pages, [256 // 4, 584] at ratio 4)."""
INDEX_QUANT_BLOCK = 128
"""DeepseekV4Indexer.quant_block_size: one fp32 scale per 128 fp8 index-key elements."""
FP32 = 4
BLOCK_OUTERMOST_LAYOUT = "BLHNC"
"""The layout vLLM resolves (resolve_kv_cache_layout): DEEPSEEK_V4_INDEXER is the only backend of the model
that declares layouts, (BLHNC, BLNHC), BLHNC first: the indexer pages sit beside the latent pages in a block."""


def round_up(x: int, a: int) -> int:
    return -(-x // a) * a


def mla_page(block_size: int, tokens_per_state: int, content: int, alignment: int) -> int:
    """An MLA spec's page: states of the block x bytes per state, padded to the alignment
    (AttentionSpec.unpadded_page_size_bytes, _apply_alignment_padding)."""
    return round_up(block_size // tokens_per_state * content, alignment)


def compressor_state(name: str, layer: int, ratio: int, head_dim: int, alignment: int) -> CacheSpec:
    """CompressorStateCache.get_kv_cache_spec (vllm/models/deepseek_v4/compressor.py): an fp32 kv + score state
    of 2 x coff x head_dim per token (coff 2 with the overlapping windows of ratio 4), kept for coff x ratio
    tokens, in blocks of 4 (ratio 4) or 8 (ratio 128)."""
    coff = 2 if ratio == 4 else 1
    block = COMPRESSOR_BLOCKS[ratio]
    return CacheSpec(name=name, layer=layer, spec="SlidingWindowMLASpec", block_size=block,
                     page_size_bytes=round_up(block * 2 * coff * head_dim * FP32, alignment),
                     sliding_window=coff * ratio, uniform_key=(False,))


def index_key_bytes(index_head_dim: int) -> int:
    """Bytes of one indexer key: index_head_dim fp8 + an fp32 scale per 128 (DeepseekV4Indexer's
    k_cache_head_dim, the FP8 indexer cache; vLLM's MXFP4 one needs --attention-config indexer_kv_dtype)."""
    return index_head_dim + index_head_dim // INDEX_QUANT_BLOCK * FP32


def uses_fp8_ds_mla(flags: ServingFlags, ctx: SpecContext) -> bool:
    """The attention class vLLM's CUDA model picks stores the fp8_ds_mla layout
    (vllm/models/deepseek_v4/nvidia/model.py::_select_dsv4_attn_cls): FlashMLA (the default off SM12, or
    FLASHMLA_SPARSE[_DSV4]) and FlashInfer's SM120 class do; FlashInfer's SM100 class keeps plain rows."""
    backend = flags.attention_backend
    if backend is None or is_flashmla_sparse(backend) or backend == "FLASHMLA_SPARSE_DSV4":
        return True
    return (backend == "FLASHINFER_MLA_SPARSE_DSV4" and ctx.compute_capability is not None
            and ctx.compute_capability[0] == 12)


def _layer_caches(la: LayerArch, prefix: str, block: int) -> list[CacheSpec]:
    """One decoder layer's caches in registration order (DeepseekV4Attention.__init__)."""
    assert la.dsv4_compress_ratio is not None and la.head_size is not None and la.dsv4_window is not None
    r, i, head, al = la.dsv4_compress_ratio, la.index, la.head_size, FP8_DS_MLA_ALIGNMENT
    base = f"{prefix}.layers.{i}.attn"
    out: list[CacheSpec] = []
    if r == 4 and la.mla is not None and la.mla.index_head_dim:  # only C4A layers build an indexer
        ihd = la.mla.index_head_dim
        out.append(CacheSpec(name=f"{base}.indexer.k_cache", layer=i, spec="MLAAttentionSpec", block_size=block,
                             page_size_bytes=mla_page(block, r, index_key_bytes(ihd), al)))
        out.append(compressor_state(f"{base}.indexer.compressor.state_cache", i, r, ihd, al))
    out.append(CacheSpec(name=f"{base}.swa_cache", layer=i, spec="SlidingWindowMLASpec", block_size=SWA_BLOCK,
                         page_size_bytes=round_up(SWA_BLOCK * FP8_DS_MLA_RECORD, al), sliding_window=la.dsv4_window,
                         uniform_key=(False,)))  # bounded_replay: V4.1 only
    if r > 1:  # ratio 1 layers keep the sliding window only: their attention spec is None
        out.append(CacheSpec(name=base, layer=i, spec="MLAAttentionSpec", block_size=block,
                             page_size_bytes=mla_page(block, r, FP8_DS_MLA_RECORD, al)))
        out.append(compressor_state(f"{base}.compressor.state_cache", i, r, head, al))
    return out


def layer_prefix(arch: ModelArch) -> str:
    """The decoder stack's module prefix: DeepseekV4ForCausalLM's `model`; the vision-language class nests the
    language model (vllm/models/deepseek_v4/common/vl_model.py)."""
    return "model" if arch.architecture == "DeepseekV4ForCausalLM" else "language_model.model"


def mtp_caches(arch: ModelArch, flags: ServingFlags, window: int) -> list[CacheSpec] | None:
    """The MTP draft's caches with --speculative-config method mtp (vllm/models/deepseek_v4/nvidia/mtp.py builds
    every one of num_nextn_predict_layers modules as `model.layers.<num_hidden_layers + j>`): a layer past
    num_hidden_layers has compress ratio 1, so each keeps its sliding-window cache only. [] without speculative
    decoding; None for another method, a draft cache dtype of its own, or the vision-language class."""
    from kvplan.planner.layout import is_mtp  # layout.py imports the builders: imported when called

    if flags.speculative_method is None:
        return []
    if (not is_mtp(flags) or flags.speculative_kv_cache_dtype is not None
            or arch.architecture != "DeepseekV4ForCausalLM"):
        return None
    al = FP8_DS_MLA_ALIGNMENT
    return [CacheSpec(name=f"model.layers.{arch.num_layers + j}.attn.swa_cache", layer=arch.num_layers + j,
                      spec="SlidingWindowMLASpec", block_size=SWA_BLOCK,
                      page_size_bytes=round_up(SWA_BLOCK * FP8_DS_MLA_RECORD, al), sliding_window=window,
                      uniform_key=(False,), draft=True)
            for j in range(arch.mtp_layers)]


def build(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, ctx: SpecContext) -> ModelCaches | None:
    """DeepSeek-V4's caches in vLLM's order (the MTP draft's last). None (not laid out) for the plain-row layouts
    of FlashInfer's SM100 class, a --block-size other than the backends' 256, speculative decoding other than
    the checkpoint's MTP, a compress ratio vLLM refuses (not 4 or 128) and a model without compressed sparse
    (ratio 4) layers (no indexer: another layout)."""
    by_index = {la.index: la for la in arch.layers}
    planned = sorted((by_index[lp.index] for lp in layers
                      if lp.index in by_index and by_index[lp.index].dsv4_compress_ratio is not None),
                     key=lambda x: x.index)
    if (not planned or not uses_fp8_ds_mla(flags, ctx)
            or any(lp.kv_cache_dtype != FP8_DS_MLA for lp in layers if lp.index in by_index)
            or flags.block_size not in (None, SPARSE_MLA_BLOCK)
            or not any(la.dsv4_compress_ratio == 4 for la in planned)
            or any(la.dsv4_compress_ratio not in (1, *COMPRESSOR_BLOCKS) for la in planned)):
        return None  # CompressorStateCache asserts compress ratio 4 or 128
    assert planned[0].dsv4_window is not None
    draft = mtp_caches(arch, flags, planned[0].dsv4_window)
    if draft is None:
        return None
    prefix = layer_prefix(arch)
    specs = tuple(s for la in planned for s in _layer_caches(la, prefix, SPARSE_MLA_BLOCK)) + tuple(draft)
    return ModelCaches(specs=specs, block_size=SPARSE_MLA_BLOCK, block_outermost=True,
                       layout_name=BLOCK_OUTERMOST_LAYOUT)
