"""GLM-5 Next (vllm/models/glm5next): the caches its layers register, as vLLM 0.33.0 / 0.34.0 build them.

* A KDA linear-attention layer (`layer_types` 'linear_attention': Glm5NextLinearAttention,
  vllm/models/glm5next/common/kda.py) registers one MambaSpec, `model.layers.N.self_attn`: its conv and
  recurrent state, padded to the attention page. With prefix caching (mamba_cache_mode 'align') its block is the
  attention block and a request holds 2 state blocks, + 1 prefill checkpoint where the layer runs FlashKDA
  (`_resolve_kda_prefill_backend`: SM90 / SM10x / SM12x, a bf16 model, head_dim 128, a bounded gate;
  kda_checkpoint.py::kda_prefill_checkpoint_alignment: 16 tokens), + the speculative tokens; without prefix
  caching ('none') its block is max_model_len and a request holds 1 (+ the speculative tokens).
* Every other layer (Glm5NextMLAAttention, common/attention.py) with `index_topk` set registers, in this order:
  the indexer keys `...self_attn.indexer.k_cache` (Glm5NextIndexerCache: an MLAAttentionSpec of uint8
  index_head_dim + fp32 scale per 128 per state, one state per index_kpool tokens: tokens_per_state), the
  indexer tail ring `...self_attn.indexer.tail_cache` (Glm5NextTailCache: a CircularBufferSpec of
  index_kpool x next_power_of_2(cdiv(index_kpool + speculative tokens, index_kpool)) bf16 [K, gate] slots, one
  block per request) and the sparse MLA latent `...self_attn.attn` (kv_lora_rank + qk_rope_head_dim per token).
* The block size (Platform.update_block_size_for_backend, vllm/platforms/interface.py): without --block-size the
  smallest size every backend takes (`_preferred_block_size_for_backends`: the indexer backend's kernel blocks,
  index_kpool x DeepGEMM's paged-MQA page sizes 32 / 64 states, vllm/utils/deep_gemm.py::get_paged_mqa_page_sizes,
  only 64 on SM120); then `_align_hybrid_block_size` raises it to the smallest multiple of the kernel alignment
  (at least 128 for MLA, a multiple of the KDA checkpoint alignment in align mode, of every backend's smallest
  kernel block) whose MLA page holds the KDA state page, and pads the state page to that page.
* Block-stride alignments (vllm/v1/worker/utils.py::customize_attention_spec, KVCacheSpec.get_block_stride_alignment):
  the indexer keys, whose backend takes fixed kernel blocks, a whole kernel block (gcd(largest kernel block,
  block size) tokens) unless the block is one kernel block; the sparse MLA latent its backend's rows
  (sparse_utils.py::align_blocks_to_rows: 1 row on FLASHINFER_MLA_SPARSE_SM90 and FLASH_ATTN_MLA_SPARSE, the
  kernel block on FLASHINFER_MLA_SPARSE (32) and FLASHINFER_MLA_SPARSE_SM120 (64)); the ring none.
* SM120: FLASHINFER_MLA_SPARSE_SM120 stores auto and fp8 as fp8_ds_mla rows (656 B; 528 B from 0.34 for a
  latent without RoPE), while the hybrid alignment counts the latent as uint8 (kv_lora_rank bytes per token).
* The layout: KpoolTailBackend supports only BLHNC (vllm/v1/attention/backends/mla/indexer.py), so the pool is
  block-outermost.
With speculative decoding by n-gram or suffix matching (no draft model) the draft tokens add state blocks
(num_speculative_blocks), conv-state columns and tail-ring slots. Not laid out (None): no GPU, MTP or a draft
model (their layers' caches), other sparse MLA backends, a --mamba-cache-dtype that hides the model dtype.
(Every MLA layer is sparse: the config class defaults index_topk to 2048 and refuses null; ingest/flagship.py.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.backends.defaults import default_block_size
from kvplan.backends.impl import hooks_for
from kvplan.backends.vllm_rows import BACKENDS, rows_for
from kvplan.model.arch import ExtraCache, LayerArch, ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan
from kvplan.planner.cache_specs import CacheSpec, ModelCaches, SpecContext
from kvplan.planner.layout import speculative_method

ARCHITECTURES = ("Glm5NextForCausalLM", "Glm5NextForConditionalGeneration")

MLA_HYBRID_ALIGNMENT = 128
"""_align_hybrid_block_size: a hybrid MLA model's block is a multiple of 128 (TRTLLM / FlashInfer MLA decode)."""
FLASHKDA_CHECKPOINT_ALIGNMENT = 16
"""vllm/model_executor/layers/mamba/kda_checkpoint.py::kda_prefill_checkpoint_alignment (FlashKDA)."""
FLASHKDA_CCS = (9, 10, 12)
"""Compute-capability majors FlashKDA runs on (kda.py::_resolve_kda_prefill_backend)."""
FLASHKDA_HEAD_DIM = 128
PAGED_MQA_PAGE_STATES = {12: (64,)}
"""vllm/utils/deep_gemm.py::get_paged_mqa_page_sizes: paged-MQA kernel pages in states (SM120: 64 only)."""
PAGED_MQA_PAGE_STATES_DEFAULT = (32, 64)
SPARSE_MLA_STRIDE_ROWS = {"FLASHINFER_MLA_SPARSE_SM90": 1, "FLASH_ATTN_MLA_SPARSE": 1, "FLASHINFER_MLA_SPARSE": None,
                          "FLASHINFER_MLA_SPARSE_SM120": None}
"""Rows a sparse MLA backend's customize_spec aligns blocks to (sparse_utils.py::align_blocks_to_rows):
FlashInferMLASparseSM90Backend and FlashAttnMLASparseBackend (a float16 model on SM90) one row; the
FlashInfer TRTLLM-gen backends of SM100 and SM120 (flashinfer_mla_sparse.py::_FlashInferMLASparseBackendBase)
their kernel block (None: the backend's MultipleOf base)."""
FP8_DS_MLA_ROW = 656
"""An fp8_ds_mla row (512 fp8 NoPE + 64 bf16 RoPE + 16 B of scales): MLAAttention.get_kv_cache_spec."""
DRAFTLESS_METHODS = ("ngram", "suffix")
"""Speculative methods without a draft model: only the draft tokens change the caches (more state blocks, a
wider conv state, a larger tail ring)."""
_KV_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1}


def _kernel_block(backend: str, ctx: SpecContext) -> int:
    """The backend's smallest kernel block (its MultipleOf base or smallest fixed size) in this release (the
    newest modelled without one)."""
    row = (rows_for(ctx.engine) if ctx.engine is not None else BACKENDS)[backend]
    return row.block_size_multiple_of or min(row.block_sizes or (1,))


def _indexer_kernel_blocks(kpool: int, cc: tuple[int, int] | None) -> tuple[int, ...]:
    """Glm5NextIndexerBackend.get_supported_kernel_block_sizes: index_kpool x the paged-MQA page sizes."""
    states = PAGED_MQA_PAGE_STATES.get(cc[0], PAGED_MQA_PAGE_STATES_DEFAULT) if cc else PAGED_MQA_PAGE_STATES_DEFAULT
    return tuple(kpool * n for n in states)


def flashkda(la: LayerArch, model_dtype: str | None, cc: tuple[int, int] | None) -> bool:
    """kda.py::_resolve_kda_prefill_backend ('auto'): FlashKDA on CUDA SM90 / SM10x / SM12x for a bf16 model,
    head_dim 128 and a bounded gate; else Triton (no prefill checkpoint)."""
    return (cc is not None and cc[0] in FLASHKDA_CCS and model_dtype == "bfloat16" and la.state is not None
            and la.state.head_dim == FLASHKDA_HEAD_DIM and la.kda_gate_lower_bound is not None)


def _mamba_cache_mode(flags: ServingFlags) -> str:
    """MambaModelConfig.verify_and_update_config: 'align' with prefix caching (on by default for a model with
    attention layers, ModelConfig.is_prefix_caching_supported), else 'none'."""
    return "none" if flags.enable_prefix_caching is False else "align"


def _model_dtype(kda: LayerPlan, mla: LayerPlan, flags: ServingFlags) -> str | None:
    """The model dtype: the KDA conv state's at --mamba-cache-dtype auto (kda_state_dtype), else the MLA
    cache's at --kv-cache-dtype auto; None when neither shows it."""
    if flags.mamba_cache_dtype == "auto" and kda.state_dtypes:
        return kda.state_dtypes[0]
    return mla.dtype if mla.kv_cache_dtype == "auto" else None


def _phase1_block(backend_blocks: list[tuple[int, ...]], default: int) -> int:
    """_preferred_block_size_for_backends: the default when every backend takes it, else the smallest lcm of
    one kernel block per backend."""
    if all(any(default % s == 0 for s in sizes) for sizes in backend_blocks):
        return default
    candidates = sorted({math.lcm(*pick) for pick in _products(backend_blocks)})
    return next(c for c in candidates if all(any(c % s == 0 for s in sizes) for sizes in backend_blocks))


def _products(lists: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for sizes in lists:
        out = [(*p, s) for p in out for s in sizes]
    return out


def _hybrid_block(bs: int, first_min: int, backend_mins: list[int], page1: int, state_page: int,
                  ckpt: int) -> int:
    """_align_hybrid_block_size for MLA: the smallest block, a multiple of max(first backend's smallest kernel
    block, bs, 128), of the checkpoint alignment and of every backend's smallest kernel block, whose page
    (page1 bytes per token) holds the state page; never below bs."""
    align = math.lcm(max(first_min, bs, MLA_HYBRID_ALIGNMENT), ckpt)
    need = align * -(-state_page // (align * page1))
    backends = math.lcm(*backend_mins)
    return max(bs, backends * -(-need // backends))


def _stride(kernel: int, block: int, tokens_per_state: int, state_bytes: int) -> int:
    """KVCacheSpec.get_block_stride_alignment for MultipleOf(kernel): 1 when the block is one kernel block,
    else the page of a gcd(kernel, block)-token block."""
    k = math.gcd(kernel, block)
    return 1 if k == block else k // tokens_per_state * state_bytes


@dataclass(frozen=True)
class _Geometry:
    """What every layer's caches share once the block size is aligned."""

    block: int
    """The engine block size (the MLA latent's and the indexer keys' block)."""
    state_block: int
    state_page: int
    state_blocks: int
    kpool: int
    key_bytes: int
    """Bytes of one pooled indexer-key state."""
    key_stride: int
    ring_tokens: int
    ring_slot_bytes: int
    mla_bpt: int
    mla_stride: int


def _indexer(arch: ModelArch, mla: LayerPlan) -> tuple[ExtraCache, ExtraCache] | None:
    """The MLA layer's pooled indexer keys and tail ring (kvplan/ingest/flagship.py::_glm5_next)."""
    la = next((la for la in arch.layers if la.index == mla.index), None)
    extras = la.extra_caches if la is not None else ()
    keys = next((x for x in extras if x.tokens_per_state > 1 and x.element_bytes), None)
    ring = next((x for x in extras if x.ring and x.element_bytes), None)
    return (keys, ring) if keys is not None and ring is not None else None


def _mla_row(mla: LayerPlan, model_dtype: str, mla_la: LayerArch | None, ctx: SpecContext) -> tuple[int, int]:
    """(the hybrid alignment's bytes per token, the latent's bytes per token). The alignment builds an
    MLAAttentionSpec of one token at the cache dtype (kv_lora_rank + rope elements; fp8_ds_mla as uint8);
    the layer's own spec stores an fp8_ds_mla row whole (FLASHINFER_MLA_SPARSE_SM120 turns auto and fp8 into
    it: mla_attention.py::_canonicalize_sparse_mla_kv_cache_dtype)."""
    if mla.kv_cache_dtype != "fp8_ds_mla":
        page = mla.head_size * _KV_BYTES[mla.dtype or model_dtype]
        return page, page
    if mla_la is None or mla_la.mla is None or mla.backend is None:
        return mla.head_size, FP8_DS_MLA_ROW
    return mla.head_size, hooks_for(mla.backend).fp8_ds_mla_row_bytes(mla_la.mla.kv_lora_rank,
                                                                       mla_la.mla.qk_rope_head_dim, ctx.engine)


def _geometry(kdas: list[LayerPlan], mla: LayerPlan, arch: ModelArch, flags: ServingFlags,
              ctx: SpecContext) -> _Geometry | None:
    """Platform.update_block_size_for_backend and the specs' sizes, or None where not laid out."""
    indexer = _indexer(arch, mla)
    backend = mla.backend or ""
    model_dtype = _model_dtype(kdas[0], mla, flags)
    kda_la = next((la for la in arch.layers if la.index == kdas[0].index), None)
    if indexer is None or backend not in SPARSE_MLA_STRIDE_ROWS or model_dtype is None or kda_la is None:
        return None
    keys, ring = indexer
    kpool, cc, mode = keys.tokens_per_state, ctx.compute_capability, _mamba_cache_mode(flags)
    checkpoint = flashkda(kda_la, model_dtype, cc)
    # the backends in layer order (_find_non_ssm_backends): indexer keys, tail ring (MultipleOf(1)), MLA latent
    indexer_blocks = _indexer_kernel_blocks(kpool, cc)
    mla_kernel = _kernel_block(backend, ctx)
    backend_blocks = [indexer_blocks, (1,), (mla_kernel,)]
    # phase 1 starts from CacheConfig.DEFAULT_BLOCK_SIZE (not a backend's preference kvplan chose before)
    default = default_block_size(ctx.engine) if ctx.engine is not None else ctx.block_size
    bs = flags.block_size or _phase1_block(backend_blocks, default)
    page1, mla_bpt = _mla_row(mla, model_dtype, next((la for la in arch.layers if la.index == mla.index), None),
                              ctx)
    state_page = max(lp.state_bytes or 0 for lp in kdas)
    ckpt = FLASHKDA_CHECKPOINT_ALIGNMENT if mode == "align" and checkpoint else 1
    block = _hybrid_block(bs, min(indexer_blocks), [min(b) for b in backend_blocks], page1, state_page, ckpt)
    key_bytes = keys.elements * (keys.element_bytes or 1)
    # Glm5NextTailCache: index_kpool x next_power_of_2(cdiv(index_kpool + speculative tokens, index_kpool))
    span = -(-(kpool + flags.num_speculative_tokens) // kpool)
    return _Geometry(
        block=block, state_block=block if mode == "align" else ctx.max_model_len,
        state_page=max(state_page, block * page1),
        state_blocks=(2 + int(checkpoint) if mode == "align" else 1) + flags.num_speculative_tokens,
        kpool=kpool, key_bytes=key_bytes, key_stride=_stride(max(indexer_blocks), block, kpool, key_bytes),
        ring_tokens=kpool * (1 << (span - 1).bit_length()), ring_slot_bytes=ring.elements * (ring.element_bytes or 2),
        mla_bpt=mla_bpt, mla_stride=(SPARSE_MLA_STRIDE_ROWS[backend] or mla_kernel) * mla_bpt)


def _mla_specs(name: str, layer: int, g: _Geometry) -> list[CacheSpec]:
    """An MLA layer's caches in registration order: indexer keys, tail ring, latent."""
    return [
        CacheSpec(name=f"{name}.indexer.k_cache", layer=layer, spec="MLAAttentionSpec", block_size=g.block,
                  page_size_bytes=g.block // g.kpool * g.key_bytes, stride_alignment=g.key_stride),
        CacheSpec(name=f"{name}.indexer.tail_cache", layer=layer, spec="CircularBufferSpec", block_size=g.ring_tokens,
                  page_size_bytes=g.ring_tokens * g.ring_slot_bytes, fixed_blocks=1),
        CacheSpec(name=f"{name}.attn", layer=layer, spec="MLAAttentionSpec", block_size=g.block,
                  page_size_bytes=g.block * g.mla_bpt, stride_alignment=g.mla_stride)]


def build(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, ctx: SpecContext) -> ModelCaches | None:
    """GLM-5 Next's caches in vLLM's order (get_kv_cache_spec: layer by layer; an MLA layer's indexer keys,
    tail ring, then latent), or None where not laid out (module docstring)."""
    kdas = [lp for lp in layers if lp.kind == "linear_attention" and lp.state_bytes]
    mlas = [lp for lp in layers if lp.kind == "mla" and lp.bytes_per_token]
    if not kdas or not mlas or ctx.compute_capability is None:
        return None
    if flags.num_speculative_tokens and speculative_method(flags) not in DRAFTLESS_METHODS:
        return None  # MTP layers or a draft model register caches of their own (not modelled here)
    g = _geometry(kdas, mlas[0], arch, flags, ctx)
    if g is None:
        return None
    prefix = ("language_model.model.layers" if arch.architecture == "Glm5NextForConditionalGeneration"
              else "model.layers")
    kda_at, mla_at = {lp.index for lp in kdas}, {lp.index for lp in mlas}
    specs: list[CacheSpec] = []
    for lp in layers:
        name = f"{prefix}.{lp.index}.self_attn"
        if lp.index in kda_at:
            specs.append(CacheSpec(name=name, layer=lp.index, spec="MambaSpec", block_size=g.state_block,
                                   page_size_bytes=g.state_page, fixed_blocks=g.state_blocks))
        elif lp.index in mla_at:
            specs += _mla_specs(name, lp.index, g)
    return ModelCaches(specs=tuple(specs), block_size=g.block, block_outermost=True, layout_name="BLHNC")
