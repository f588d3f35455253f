"""DeepSeek-V4.1's KV caches as vLLM's model class registers them (vllm/models/deepseek_v41/attention.py).

DeepseekV41ForCausalLM is the vision-language wrapper (nvidia/vl_model.py): its decoder layers are
`language_model.model.layers.<i>`. Layer i (compress_ratios[i] = r: 0 sliding only, 1 full-length, 2 ratio 2)
registers, in its static forward context order:

* the attention layer itself, which has a cache only on a kv_source_layer_ids layer with r > 0
  (`get_kv_cache_spec`: MLAAttentionSpec, tokens_per_state r, one packed record per r tokens, block = the
  cache config's block size); the other layers read the nearest source below them;
* `indexer.k_cache` on an index_source_layer_ids layer that is also a kv source (`DeepseekV4IndexerCache`:
  index_head_dim fp8 + fp32 scale per 128 per r tokens); an index source that is not a kv source shares the
  kv source's keys;
* `swa_cache` (`DeepseekV4SWACache` with block 32, the packed record, and `bounded_replay`);
* `compressor.state_cache` on a kv source with r = 2 (`CompressorStateCache`: CircularBufferSpec, one
  per-request ring of 2 x head_dim fp32 rows, block max(8, next power of 2 of num_speculative_tokens + 2)).

The record depends on the GPU (`_use_v41_mxfp8_kv_record`: the SM100 family): fp8_ds_mla's 584 B with 576 B
page alignment on SM90, the MXFP8 record of 528 B with 512 B alignment and a block stride of whole records
(lcm(528, 528)) on SM100. The cache block is the sparse MLA and indexer backends' kernel block
(FLASHMLA_SPARSE_DSV41 / DEEPSEEK_V41_INDEXER: 64 on SM90, 128 otherwise). The same in vLLM 0.33.0 and 0.34.0.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.model.arch import ExtraCache, LayerArch, ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan
from kvplan.planner.cache_specs import CacheSpec, ModelCaches, SpecContext
from kvplan.planner.model_caches.deepseek_v4 import (
    BLOCK_OUTERMOST_LAYOUT,
    FP8_DS_MLA,
    FP8_DS_MLA_ALIGNMENT,
    FP8_DS_MLA_RECORD,
    FP32,
    mla_page,
    round_up,
)

ARCHITECTURES = ("DeepseekV41ForCausalLM",)

SWA_BLOCK = 32
"""DeepseekV4Attention (V4.1) builds its DeepseekV4SWACache with block_size=32."""
MXFP8_RECORD = 528
"""V4.1's MXFP8 record on SM100 (swa_bytes_per_token 528 when _use_v41_mxfp8_kv_record)."""
MXFP8_ALIGNMENT = 512
"""kv_page_alignment on SM100: 512 (its pages are already 512 B multiples); 576 (the TMA stride) on SM90."""
MIN_RING_BLOCK = 8
"""CompressorStateCache's smallest ring: max(8, next power of two of num_speculative_tokens + 2) rows."""
PACKED_DTYPES = ("auto", "fp8", FP8_DS_MLA)
"""--kv-cache-dtype values the packed FlashMLA layout stores as fp8_ds_mla (_resolve_dsv4_kv_cache_dtype)."""

# The extra caches kvplan/ingest/flagship.py::_deepseek_v41 gives a layer (its names).
_LATENT, _RING, _KEYS = "compressed latent", "compressor state (fp32)", "indexer keys"


@dataclass(frozen=True)
class _Record:
    """The packed record of the GPU: bytes, page alignment, block kernel size, block-stride alignment."""

    bytes: int
    alignment: int
    block: int
    stride: int


def _record(ctx: SpecContext) -> _Record | None:
    """SM90: fp8_ds_mla (584 B, 576 B pages), block 64; SM100: MXFP8 (528 B, 512 B pages, a block stride of
    whole records), block 128 (sparse_mla.py / indexer.py get_supported_kernel_block_sizes); None elsewhere."""
    cc = ctx.compute_capability
    if cc is None or cc[0] not in (9, 10):
        return None
    if cc[0] == 9:
        return _Record(FP8_DS_MLA_RECORD, FP8_DS_MLA_ALIGNMENT, 64, 1)
    return _Record(MXFP8_RECORD, MXFP8_ALIGNMENT, 128, MXFP8_RECORD)  # lcm(swa record, compressed record)


def _extra(la: LayerArch, name: str) -> ExtraCache | None:
    return next((x for x in la.extra_caches if x.name == name), None)


def _layer_caches(la: LayerArch, rec: _Record, ring_block: int, bounded_replay: bool) -> list[CacheSpec]:
    """One decoder layer's caches in registration order (DeepseekV4Attention.__init__ of deepseek_v41)."""
    assert la.dsv4_window is not None
    i, base = la.index, f"language_model.model.layers.{la.index}.attn"
    latent, ring, keys = _extra(la, _LATENT), _extra(la, _RING), _extra(la, _KEYS)
    out: list[CacheSpec] = []
    if latent is not None:  # a kv source: its own compressed cache
        r = latent.tokens_per_state
        out.append(CacheSpec(name=base, layer=i, spec="MLAAttentionSpec", block_size=rec.block,
                             page_size_bytes=mla_page(rec.block, r, rec.bytes, rec.alignment)))
        if keys is not None:  # an index source that is also a kv source owns the index keys
            assert keys.element_bytes is not None  # uint8 rows (DeepseekV4IndexerCache dtype=torch.uint8)
            out.append(CacheSpec(name=f"{base}.indexer.k_cache", layer=i, spec="MLAAttentionSpec",
                                 block_size=rec.block,
                                 page_size_bytes=mla_page(rec.block, keys.tokens_per_state,
                                                          keys.elements * keys.element_bytes, rec.alignment)))
    out.append(CacheSpec(name=f"{base}.swa_cache", layer=i, spec="SlidingWindowMLASpec", block_size=SWA_BLOCK,
                         page_size_bytes=round_up(SWA_BLOCK * rec.bytes, rec.alignment),
                         stride_alignment=rec.stride, sliding_window=la.dsv4_window,
                         uniform_key=(bounded_replay,)))
    if latent is not None and ring is not None:  # ratio 2: the open group's ring (CircularBufferSpec, no padding)
        out.append(CacheSpec(name=f"{base}.compressor.state_cache", layer=i, spec="CircularBufferSpec",
                             block_size=ring_block, page_size_bytes=ring_block * ring.elements * FP32,
                             fixed_blocks=1))
    return out


def _replay_refused(planned: list[LayerArch], num_layers: int) -> bool:
    """vLLM's DeepseekV41 model asserts, with SWA bounded replay, that the last kv source layer, when layers
    follow it, is not compressed (nvidia/model.py: `assert self.layers[cut].attn.compress_ratio <= 1`)."""
    sources = [la for la in planned if _extra(la, _LATENT) is not None]
    if not sources:
        return False
    cut = max(sources, key=lambda la: la.index)
    latent = _extra(cut, _LATENT)
    return cut.index < num_layers - 1 and latent is not None and latent.tokens_per_state > 1


def build(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, ctx: SpecContext) -> ModelCaches | None:
    """DeepSeek-V4.1's caches in vLLM's order, on SM90 and SM100 with the packed FlashMLA layout (the CUDA
    default) and Model Runner V2 (a GPU launch's default: SWA bounded replay on, `uniform_key`
    (bounded_replay,)). None (not laid out) for other GPUs, --attention-backend, a --block-size other than
    the backends', speculative decoding, and a model vLLM's bounded-replay assertion refuses."""
    rec = _record(ctx)
    by_index = {la.index: la for la in arch.layers}
    planned = sorted((by_index[lp.index] for lp in layers if lp.index in by_index
                      and by_index[lp.index].dsv4_window is not None), key=lambda la: la.index)
    if (rec is None or not planned or flags.attention_backend is not None or flags.speculative_method is not None
            or flags.kv_cache_dtype not in PACKED_DTYPES or flags.block_size not in (None, rec.block)
            or _replay_refused(planned, arch.num_layers)):
        return None
    ring_block = max(MIN_RING_BLOCK, 1 << (flags.num_speculative_tokens + 2 - 1).bit_length())
    specs = tuple(s for la in planned for s in _layer_caches(la, rec, ring_block, bounded_replay=True))
    if not any(s.name.endswith(".indexer.k_cache") for s in specs):  # no indexer backend: another layout
        return None
    return ModelCaches(specs=specs, block_size=rec.block, block_outermost=True, layout_name=BLOCK_OUTERMOST_LAYOUT)
