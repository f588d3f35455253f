"""vLLM's KV cache layout and capacity: block size, groups, pages, blocks per request, tokens and concurrency.

Mirrors vLLM 0.33.0 and 0.34.0 (the same code in both; checked case by case by
tests/planner/test_vllm_capacity_parity.py and test_vllm_capacity_layouts.py against each release's answers):
* `Platform._align_hybrid_block_size` (vllm/platforms/interface.py): a hybrid model's attention block size is
  raised to the smallest multiple of the kernel alignment whose page holds the largest state page, and the
  state pages are padded to the attention page ("Setting attention block size to N tokens").
* `Platform._align_heterogeneous_kv_block_size`: with --kv-cache-dtype-skip-layers the block size grows until
  the quantized page of the whole-model geometry covers the skip (model dtype) page and the padded state page.
* `MambaModelConfig.verify_and_update_config` (vllm/model_executor/models/config.py): with prefix caching
  (on by default) the state layers run in mamba_cache_mode "align".
* The caches laid out: every attention layer's (the speculative-decoding draft's too: the drafter's load_model
  adds its layers to the forward context), a sparse-MLA layer's indexer keys (DeepseekV32IndexerCache),
  a decoder layer's cross-attention (CrossAttentionSpec), the state layers' (MambaSpec).
* `VllmConfig.__post_init__` / `unify_hybrid_kv_cache_specs`: without the hybrid KV cache manager sliding and
  chunked caches are allocated as full attention.
* `get_kv_cache_groups` / `_get_kv_cache_groups_uniform_page_size` (vllm/v1/core/kv_cache_planning.py):
  one group when every cache has the same spec or type, else pages unified (`unify_kv_cache_spec_page_size`:
  a smaller page that divides the largest takes a larger block, others and state pages are padded) and caches
  bucketed by spec and split into groups of equal size (the smallest bucket's, or the largest when it is
  < 1.5x the smallest).
* `get_kv_cache_configs`: num_blocks = KV memory // bytes per block (the largest group's pages);
  `get_max_concurrency_for_kv_cache_config`: num_blocks / the blocks one request at max_model_len holds,
  summed over groups; `get_kv_cache_capacity`: tokens = int(concurrency x max_model_len), the
  "GPU KV cache size" vLLM logs next to "Maximum concurrency".
Pure functions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.arch import LayerArch, ModelArch, StateCache
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import KvCacheGroup, KvCacheLayout, LayerPlan
from kvplan.model.vocab import QuantMode
from kvplan.planner.packing import longest_fitting
from kvplan.planner.state_cache import checkpoint_alignment, checkpoint_blocks
from kvplan.rules.memory import layer_bytes_per_token

ATTENTION_KINDS = ("full_attention", "sliding_attention", "chunked_attention", "mla")
MIN_KERNEL_BLOCK = 16   # smallest kernel block of vLLM's CUDA attention backends (MultipleOf(16))
MLA_HYBRID_ALIGNMENT = 128  # hybrid MLA + Mamba: block size a multiple of 128 (TRTLLM / FlashInfer MLA decode)
_Group = tuple[str, list["_Cache"]]  # (spec kind, caches) of one KV cache group

# How the "GPU KV cache size: N tokens" line is computed, per release range (the other figure, Maximum
# concurrency, is num_blocks / blocks per request in every release modelled).
KV_CACHE_SIZE_FORMULAS: tuple[tuple[str, str, str], ...] = (
    ("<0.20.1", "num_blocks // groups x smallest block size",
     "vllm/v1/core/kv_cache_utils.py::_report_kv_cache_config up to 0.20.0 (read in the 0.20.0 wheel), before vLLM "
     "PR #40694 (issue #40691: 290,864 tokens logged for Qwen3.5-27B at 33.04x of 32,768)"),
    (">=0.20.1", "int(max_concurrency x max_model_len)",
     "vllm/v1/core/kv_cache_utils.py::_report_kv_cache_config from 0.20.1 (read in the 0.20.1 and 0.21.0 wheels), "
     "get_kv_cache_capacity (0.33.0); vLLM PR #40694"),
)


def logged_tokens(layout: KvCacheLayout, conc: float, mml: int, engine: EngineVersion | None) -> int:
    """The "GPU KV cache size" vLLM prints, by the formula of the release modelled."""
    if engine is not None and engine.satisfies(KV_CACHE_SIZE_FORMULAS[0][0]) and layout.num_blocks is not None:
        return layout.num_blocks // len(layout.groups) * layout.block_size
    return int(conc * mml)


@dataclass(frozen=True)
class Capacity:
    """A layout and what a KV budget holds with it."""

    layout: KvCacheLayout
    bytes_per_request: int
    """Bytes one request at max_model_len holds: bytes per block x blocks per request (vLLM's check)."""
    max_concurrency: float | None
    tokens_capacity: int | None
    max_model_len_fits: int | None = None
    """When one request at max_model_len does not fit: the longest length that does (vLLM's estimate in its
    startup error), 0 when not even one token does."""


def _plain(lp: LayerPlan, la: LayerArch | None) -> bool:
    """A layer whose caches kvplan lays out (its attention, sparse indexer keys, cross-attention and the
    block-pooled caches of Voxtral Realtime's causal audio encoder; not a layer with several caches of its own
    blocks and pages, which only a family's cache builder lays out: planner/model_caches/, cache_layout.py)."""
    if la is None:
        return False
    if lp.kind in ATTENTION_KINDS and lp.bytes_per_token:
        return (all(x.kv_heads is not None for x in la.extra_caches) and la.dsv4_compress_ratio is None
                and lp.bytes_per_token_exact is None)
    return True


def mamba_cache_mode(flags: ServingFlags, attention_free: bool = False, engine: EngineVersion | None = None) -> str:
    """align with prefix caching, else none. Prefix caching is on by default for generative models with
    attention layers, off for attention-free ones (ModelConfig.is_prefix_caching_supported); for hybrid ones
    only from 0.27 (ENGINE_FEATURES hybrid_prefix_caching_default)."""
    hybrid_on = engine is None or engine_feature("hybrid_prefix_caching_default").holds_for(engine)
    on = flags.enable_prefix_caching if flags.enable_prefix_caching is not None else (
        not attention_free and hybrid_on)
    return "align" if on else "none"


def _hybrid_block_size(bs: int, attn_page_1tok: int, state_page: int, mla: bool, ckpt_align: int = 1) -> int:
    """_align_hybrid_block_size: the smallest block (a multiple of the kernel alignment, and in align mode of
    the state layers' prefill-checkpoint alignment) whose attention page holds the state page; never below
    the block size already chosen."""
    align = max(MIN_KERNEL_BLOCK, bs)
    if mla:
        align = max(align, MLA_HYBRID_ALIGNMENT)
    align = math.lcm(align, ckpt_align)
    need = align * -(-state_page // (align * attn_page_1tok))
    need = MIN_KERNEL_BLOCK * -(-need // MIN_KERNEL_BLOCK)
    return max(bs, need)


def _attn_blocks(c: _Cache, mml: int, bs: int, mbt: int, retained: int = 0) -> int:
    """Blocks of one attention cache for one request (max_memory_usage_bytes / page, vllm-0.33 §7.2); a sliding
    window keeps `retained` more tokens below it (SlidingWindowSpec.extra_retained_tokens)."""
    if c.kind == "sliding_attention" and c.window:
        return -(-min(c.window - 1 + retained + mbt, mml) // bs) + 1
    if c.kind == "chunked_attention" and c.window:
        return -(-min(c.window + mbt, mml) // bs)
    return -(-mml // bs)


def _groups(buckets: dict[tuple[str, int | None, int, int, int], list[_Cache]]) -> list[_Group]:
    """_get_kv_cache_groups_uniform_page_size: equal-size groups, bucket i's layers[j::n] in group j."""
    sizes = [len(v) for v in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < group_size * 1.5:
        group_size = max(sizes)
    out: list[_Group] = []
    for (kind, *_), layers in buckets.items():
        n = -(-len(layers) // group_size)
        out.extend((kind, layers[j::n]) for j in range(n))
    return out


def speculative_method(flags: ServingFlags) -> str:
    """The method vLLM runs for --speculative-config (SpeculativeConfig.__post_init__): without a method a
    model is a draft_model (ngram for "ngram"); a method other than eagle, eagle3, dflash and dspark becomes
    eagle / eagle3 / dflash / dspark when the draft model's name says so ("eagle-", "eagle3", "dflash",
    "dspark" in it); the deprecated per-family MTP names (deepseek_mtp, ...) are mtp."""
    m = (flags.speculative_method or "").lower()
    model = (flags.speculative_model or "").lower()
    if not m and model:
        m = "ngram" if model in ("ngram", "[ngram]") else "draft_model"
    if m.endswith("_mtp"):
        m = "mtp"
    if model and m not in ("eagle", "eagle3", "dflash", "dspark", "ngram", "suffix"):
        for key, method in (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark")):
            if key in model:
                return method
    return m


def is_mtp(flags: ServingFlags) -> bool:
    """--speculative-config with an MTP method: the checkpoint's own MTP layers are the draft model."""
    return flags.num_speculative_tokens > 0 and speculative_method(flags) == "mtp"


# Methods whose draft is a model of its own (--speculative-config model), built by the drafter's load_model with
# its attention layers in the KV cache pool (SpeculativeConfig.use_eagle / uses_draft_model; a DFlash draft's
# non-causal attention keeps an ordinary full-attention cache; DSpark drafts are not modelled).
DRAFT_MODEL_METHODS = ("eagle", "eagle3", "dflash", "draft_model")


def uses_draft_model(flags: ServingFlags) -> bool:
    """--speculative-config names a draft model whose KV layers kvplan lays out (EAGLE, EAGLE3, draft_model)."""
    return (flags.num_speculative_tokens > 0 and flags.speculative_model is not None
            and speculative_method(flags) in DRAFT_MODEL_METHODS)


def multi_module_mtp(arch: ModelArch, flags: ServingFlags) -> bool:
    """SpeculativeConfig.use_multi_module_mtp: method mtp with more than one MTP module in use."""
    return is_mtp(flags) and min(arch.mtp_layers, flags.num_speculative_tokens) > 1


def draft_layers(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags,
                 external: list[LayerPlan] | None = None) -> list[LayerPlan]:
    """The draft model's KV layers, numbered after the model's layers: a draft model's own layers (planned from
    its config, `external`), or the checkpoint's MTP layers, which vLLM builds as decoder layers with the KV
    cache of the model's full attention (at the speculative config's kv_cache_dtype: `external` is then the
    model planned at that dtype)."""
    first = max((lp.index for lp in layers), default=-1) + 1
    if external is not None and uses_draft_model(flags):
        kv = [lp for lp in external if lp.bytes_per_token and lp.kind in ATTENTION_KINDS]
        return [lp.model_copy(update={"index": first + i}) for i, lp in enumerate(kv)]
    if not (is_mtp(flags) and arch.mtp_layers):
        return []
    # MTP: `external` is the model planned at the speculative config's kv_cache_dtype, when it names one
    main = next((lp for lp in (external or layers) if lp.kind in ("full_attention", "mla") and lp.bytes_per_token),
                None)
    if main is None:
        return []
    return [main.model_copy(update={"index": first + i}) for i in range(arch.mtp_layers)]


# SpeculativeConfig.use_eagle: the methods whose drafter reads the target's hidden states.
EAGLE_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")


def hybrid_manager_disabled(layers: list[LayerPlan], flags: ServingFlags) -> bool:
    """VllmConfig.__post_init__: the hybrid KV cache manager is off when --disable-hybrid-kv-cache-manager
    says so, or (by default) for a model with chunked local attention and an EAGLE-family draft ("Hybrid KV
    cache manager is not yet supported with chunked local attention + eagle")."""
    if flags.disable_hybrid_kv_cache_manager is not None:
        return flags.disable_hybrid_kv_cache_manager
    eagle = flags.num_speculative_tokens > 0 and speculative_method(flags) in EAGLE_METHODS
    return eagle and any(lp.kind == "chunked_attention" for lp in layers)


def _model_geometry(attn: list[_Cache]) -> tuple[int, int]:
    """(KV heads per rank, head size) of `ModelConfig.get_num_kv_heads` / `get_head_size`: where layers
    differ, the whole-model value of a numeric field is its largest (ModelArchitectureConfig.from_layers
    collapses with max: Gemma 4's head size is its full layers' 512, its KV heads its sliding layers' 16);
    an MLA model has one KV head of the latent's size (kv_lora_rank + qk_rope_head_dim)."""
    main = [c for c in attn if c.role == "main"]
    if any(c.kind == "mla" for c in main):
        return 1, max(c.head for c in main if c.kind == "mla")
    return (max(c.heads for c in main), max(c.head for c in main)) if main else (0, 0)


def _model_page(attn: list[_Cache], skipped: bool) -> int:
    """The attention page per token vLLM's block-size alignment reads: FullAttentionSpec(block_size=1) of the
    whole-model geometry at the global --kv-cache-dtype (`skipped`: a skip layer's model dtype). 0 without
    such a layer."""
    like = next((c.lp for c in attn if c.role == "main" and c.skipped == skipped and c.lp is not None), None)
    if like is None:
        return 0
    heads, head = _model_geometry(attn)
    return layer_bytes_per_token("full_attention", like.kv_cache_dtype or "auto", like.dtype or "bfloat16",
                                 like.quant_mode, heads, head, head)[0]


def _attn_page_1tok(attn: list[_Cache]) -> int:
    """The attention page of one token the hybrid alignment reads: MLAAttentionSpec(block_size=1) of the
    latent for an MLA model, else FullAttentionSpec(block_size=1) of the whole-model geometry in the cache
    dtype (--kv-cache-dtype, not a skip layer's)."""
    mla = [c.bpt for c in attn if c.role == "main" and c.kind == "mla" and not c.skipped]
    if mla:
        return max(mla)
    return _model_page(attn, False) or _model_page(attn, True) or max(c.bpt for c in attn)


def _skip_alignment(attn: list[_Cache], bs: int, state_padded: int = 0,
                    listed_dtype: str | None = None) -> tuple[int, int | None]:
    """Platform._align_heterogeneous_kv_block_size: with skip layers whose (model-dtype) page per token exceeds
    the quantized one, the block size becomes the smallest multiple of align = max(16, block size) whose
    primary page covers a skip page of 16 tokens (and an already padded state page); every sliding-window
    layer then takes that shared page (block size x primary page per token). (block size, shared page or
    None). vLLM reads the flag, not the layers: with a skip list (`listed_dtype`, the model dtype) and no layer
    skipped (0.25's MLA layers ignore the list) the skip page is the whole-model geometry's in the model dtype."""
    primary, padded = _model_page(attn, False), _model_page(attn, True)
    if not padded and listed_dtype is not None and primary:
        heads, head = _model_geometry(attn)
        padded = layer_bytes_per_token("full_attention", "auto", listed_dtype, QuantMode.none, heads, head, head)[0]
    if not primary or not padded or padded <= primary:
        return bs, None
    align = max(MIN_KERNEL_BLOCK, bs)
    bs = max(bs, align * -(-max(padded * MIN_KERNEL_BLOCK, state_padded) // (align * primary)))
    return bs, bs * primary


def _layer_block(c: _Cache, bs: int, shared_page: int | None, engine: EngineVersion | None = None) -> int:
    """A cache's tokens per block: with a shared skip page a sliding-window layer takes the largest kernel block
    (a multiple of 16) whose own page fits it (attention.py::get_kv_cache_spec, _largest_kernel_block_within;
    before 0.30 a MultipleOf(16) backend offers 16 only: ENGINE_FEATURES sliding_window_largest_multiple_block);
    every other cache the block size."""
    if shared_page is None or c.kind != "sliding_attention":
        return bs
    if engine is not None and not engine_feature("sliding_window_largest_multiple_block").holds_for(engine):
        return MIN_KERNEL_BLOCK
    return max(MIN_KERNEL_BLOCK, shared_page // c.bpt // MIN_KERNEL_BLOCK * MIN_KERNEL_BLOCK)


@dataclass(eq=False)
class _Cache:
    """One KV cache vLLM registers (one KVCacheSpec): a layer's attention, its sparse indexer's keys, its
    cross-attention, or a state layer's state; its block and page once laid out."""

    layer: int
    kind: str
    """An attention kind, cross_attention, or state."""
    bpt: int = 0
    """Bytes per token (attention caches)."""
    window: int | None = None
    """Sliding window or attention chunk."""
    skipped: bool = False
    role: str = "main"
    """main (a model layer's own attention), draft, indexer, cross, encoder (an audio encoder's) or state."""
    heads: int = 0
    head: int = 0
    """KV heads and head size (the model-wide geometry is the largest of each)."""
    lp: LayerPlan | None = None
    """The layer plan of a main or draft cache (its dtype and quantization mode)."""
    state_page: int = 0
    block: int = 0
    page: int = 0


def _pooled(window: int | None, states: int) -> int | None:
    """whisper_causal.py::WhisperCausalAttentionWithBlockPooling.get_kv_cache_spec: a block-pooled sliding cache
    keeps its window in pooled tokens, ceil(window / N) + 1."""
    return -(-window // states) + 1 if window and states > 1 else window


def _audio_caches(lp: LayerPlan, la: LayerArch | None) -> list[_Cache]:
    """Voxtral Realtime's causal audio encoder layer of the same index (ExtraCache with kv_heads): a
    SlidingWindowSpec of its own (tokens_per_state 1/N, window in pooled tokens), N states per token; its bytes
    are the layer's beyond its own attention cache."""
    audio = [x for x in la.extra_caches if x.kv_heads is not None] if la is not None else []
    if not audio:
        return []
    own = layer_bytes_per_token(lp.kind, lp.kv_cache_dtype or "auto", lp.dtype or "bfloat16", lp.quant_mode,
                                lp.num_kv_heads, lp.head_size, lp.head_size_v)[0]
    (x,) = audio
    return [_Cache(lp.index, "sliding_attention", lp.bytes_per_token - own, x.window, lp.skipped, role="encoder")]


def _attention_caches(lp: LayerPlan, la: LayerArch | None, draft: bool) -> list[_Cache]:
    """A layer's attention caches: its own, its sparse indexer's keys (MLAAttentionSpec, indexer role,
    deepseek_v2.py::DeepseekV32IndexerCache), its cross-attention (CrossAttentionSpec) and an audio encoder's
    cache numbered with it (Voxtral Realtime). A causal audio encoder layer past the decoder's is a block-pooled
    cache of its own (encoder role: not part of the language model's geometry)."""
    indexer = la.indexer_bytes_per_token if la is not None and lp.kind == "mla" else 0
    audio = _audio_caches(lp, la)
    states = la.states_per_token if la is not None else 1
    window = _pooled(lp.sliding_window, states) if lp.kind == "sliding_attention" else (
        lp.attention_chunk_size if lp.kind == "chunked_attention" else None)
    role = "draft" if draft else ("encoder" if states > 1 else "main")
    out = [_Cache(lp.index, lp.kind, lp.bytes_per_token - indexer - sum(c.bpt for c in audio), window, lp.skipped,
                  role=role, heads=lp.num_kv_heads, head=lp.head_size, lp=lp), *audio]
    if indexer:
        out.append(_Cache(lp.index, "mla", indexer, role="indexer"))
    if la is not None and la.cross_attention_tokens and lp.cross_attention_bytes_per_token:
        out.append(_Cache(lp.index, "cross_attention", lp.cross_attention_bytes_per_token, role="cross"))
    return out


def _unpool_encoder_windows(attn: list[_Cache], by_index: dict[int, LayerArch]) -> None:
    """Before 0.25 (ENGINE_FEATURES pooled_encoder_window) a block-pooled audio encoder cache keeps its window in
    frames: the encoder layer's own sliding window, or the unpooled window of the cache numbered with a decoder
    layer."""
    for c in attn:
        la = by_index.get(c.layer)
        if c.role != "encoder" or la is None:
            continue
        audio = [x.unpooled_window for x in la.extra_caches if x.kv_heads is not None]
        c.window = audio[0] if audio else la.sliding_window


def _caches(layers: list[LayerPlan], drafts: list[LayerPlan],
            by_index: dict[int, LayerArch]) -> tuple[list[_Cache], list[_Cache]] | None:
    """(attention caches, the draft's included; state caches), or None where kvplan does not lay the model
    out."""
    if not all(_plain(lp, by_index.get(lp.index)) for lp in layers):
        return None
    def built(lp: LayerPlan) -> int:  # vLLM's registration order (the order its grouping splits buckets in)
        la = by_index.get(lp.index)
        return la.build_order if la is not None and la.build_order is not None else lp.index

    if any(la.build_order is not None for la in by_index.values()):
        layers = sorted(layers, key=built)
    attn = [c for lp in layers if lp.kind in ATTENTION_KINDS and lp.bytes_per_token
            for c in _attention_caches(lp, by_index.get(lp.index), False)]
    attn += [c for lp in drafts for c in _attention_caches(lp, None, True)]
    if any(c.role == "encoder" for c in attn) and any(c.skipped for c in attn):
        return None  # an audio encoder's caches next to skip layers' shared page: not modelled
    states = [lp for lp in layers if lp.kind in ("mamba", "linear_attention")]
    if any(lp.state_bytes is None for lp in states) or not (attn or states):
        return None
    return attn, [_Cache(lp.index, "state", role="state", state_page=lp.state_bytes or 0) for lp in states]


def _state_blocks(sc: StateCache | None, flags: ServingFlags, mode: str | None,
                  cc: tuple[int, int] | None, engine: EngineVersion | None) -> int:
    """MambaSpec.max_memory_usage_bytes / page: align mode 2 + drafts + checkpoint, none mode 1 + drafts."""
    if mode == "align":
        return 2 + (checkpoint_blocks(sc, cc, engine) if sc is not None else 0) + flags.num_speculative_tokens
    return 1 + flags.num_speculative_tokens


def _promote_local(attn: list[_Cache]) -> None:
    """unify_hybrid_kv_cache_specs / _promote_local_kv_cache_specs: without the hybrid manager, sliding-window
    and chunked caches next to full attention (or MLA) are allocated as full attention (their compute keeps
    its window)."""
    if any(c.kind in ("full_attention", "mla") for c in attn):
        for c in attn:
            if c.kind in ("sliding_attention", "chunked_attention"):
                c.kind, c.window = "full_attention", None


def _block_size(attn: list[_Cache], states: list[_Cache], bs: int, sc: StateCache | None, mode: str | None,
                cc: tuple[int, int] | None, engine: EngineVersion | None, skip_dtype: str | None = None) -> int:
    """Platform.update_block_size_for_backend: the hybrid alignment (the model-wide attention page per token of
    the global --kv-cache-dtype), then the skip layers' re-alignment; every attention cache's block and page."""
    state_padded = 0
    if attn and states:
        ckpt = checkpoint_alignment(sc, cc, engine) if sc is not None and mode == "align" else 1
        page1 = _attn_page_1tok(attn)
        # MLA hybrids align to 128 tokens from 0.28 (ENGINE_FEATURES mla_hybrid_block_alignment_128)
        mla = any(c.kind == "mla" for c in attn) and (
            engine is None or engine_feature("mla_hybrid_block_alignment_128").holds_for(engine))
        bs = _hybrid_block_size(bs, page1, max(c.state_page for c in states), mla, ckpt)
        state_padded = bs * page1
    # skip layers re-align the block size from 0.25 (ENGINE_FEATURES skip_layer_block_alignment); before, their
    # pages are unified by a larger block only (unify_kv_cache_spec_page_size)
    shared_page = None
    if engine is None or engine_feature("skip_layer_block_alignment").holds_for(engine):
        bs, shared_page = _skip_alignment(attn, bs, state_padded, skip_dtype)
    for c in attn:
        c.block = _layer_block(c, bs, shared_page, engine)
        c.page = c.block * c.bpt
        if shared_page is not None and c.kind == "sliding_attention":
            c.page = max(c.page, shared_page)  # page_size_padded: the shared page
    return bs


def _skip_list_dtype(layers: list[LayerPlan], flags: ServingFlags, model_dtype: str | None) -> str | None:
    """The model dtype where the skip list names a KV layer: vLLM aligns the block size for the list whatever the
    layers did with it (0.25's MLA layers ignore it). A list whose tokens match nothing raises vLLM's block size
    too; kvplan does not model that (its emitters drop such tokens)."""
    toks = set(flags.kv_cache_dtype_skip_layers)
    names = any(str(lp.index) in toks for lp in layers if lp.bytes_per_token) or (
        "sliding_window" in toks and any(lp.kind == "sliding_attention" for lp in layers))
    return model_dtype if names else None


def _hook_sizes_another_state(states: list[_Cache], by_index: dict[int, LayerArch], flags: ServingFlags) -> bool:
    """Kimi-Linear with --mamba-ssm-cache-dtype bfloat16: the model class hook that sizes the hybrid block
    (get_mamba_state_dtype_from_config) passes the flag, its KDA layers do not (a float32 recurrent state), so
    vLLM aligns the block to a state page the layers do not register: not modelled."""
    return flags.mamba_ssm_cache_dtype not in ("auto", "float32") and any(
        (sc := by_index[c.layer].state) is not None and sc.ssm_dtype_flag == "hook" for c in states)


def plan_layout(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, mml: int | None,
                bs: int, mbt: int, budget: int | None, engine: EngineVersion | None = None,
                compute_capability: tuple[int, int] | None = None,
                drafts: list[LayerPlan] | None = None, model_dtype: str | None = None) -> Capacity | None:
    """vLLM's layout and capacity for these layers and the draft's (`drafts`, from `draft_layers`), or None
    where kvplan does not model it (layers with several caches of their own blocks, which the families' cache
    builders lay out instead: cache_layout.plan_capacity; vLLM's full-allocation fallback for pages it cannot
    unify; state layers it cannot size). Raises LayoutRefused where vLLM raises instead. The
    GPU's compute capability decides kernel choices that change the layout
    (FlashInfer's GDN prefill kernel and its checkpoints)."""
    by_index = {la.index: la for la in arch.layers}
    drafts = draft_layers(layers, arch, flags) if drafts is None else drafts
    picked = _caches(layers, drafts, by_index) if mml else None
    if picked is None or not mml or _hook_sizes_another_state(picked[1], by_index, flags):
        return None
    attn, states = picked
    if engine is not None and not engine_feature("pooled_encoder_window").holds_for(engine):
        _unpool_encoder_windows(attn, by_index)
    if hybrid_manager_disabled(layers, flags):
        if states and attn:  # state pages cannot be promoted to attention: vLLM refuses to start
            raise LayoutRefused(tuple(c.layer for c in states), _promotion_refusal(engine))
        _promote_local(attn)
    mode = mamba_cache_mode(flags, attention_free=not attn, engine=engine) if states else None
    sc = by_index[states[0].layer].state if states else None
    bs = _block_size(attn, states, bs, sc, mode, compute_capability, engine,
                     _skip_list_dtype(layers, flags, model_dtype))
    if engine is not None and not engine_feature("sliding_mla_full_allocation_fallback").holds_for(engine):
        _refuse_sliding_mla(attn)
    # get_global_kv_cache_groups: with several MTP modules in use, sliding windows retain the tokens the chain
    # may re-prefill (extra_retained_tokens = num_prefill_lookahead_tokens - 1 = num_speculative_tokens - 1).
    retained = flags.num_speculative_tokens - 1 if multi_module_mtp(arch, flags) else 0
    # the pool's null block is held back from the memory check from 0.29 (ENGINE_FEATURES null_block_reserved)
    reserve = engine is None or engine_feature("null_block_reserved").holds_for(engine)
    # before 0.29 a dense MLA page that does not divide the largest is padded (ENGINE_FEATURES mla_page_padding)
    pad_mla = engine is not None and engine_feature("mla_page_padding").holds_for(engine)
    # before 0.28 a state page that divides the largest is not padded: vLLM's assert fails (mamba_unify_padding)
    pad_state = engine is None or engine_feature("mamba_unify_padding").holds_for(engine)
    # before 0.24 no attention page is padded either (ENGINE_FEATURES attention_page_padding)
    pad_attn = engine is None or engine_feature("attention_page_padding").holds_for(engine)
    cap = _capacity(attn, states, bs, mml, (mbt, retained),
                    _state_blocks(sc, flags, mode, compute_capability, engine) if states else 0, mode,
                    budget, reserve, (pad_mla, pad_state, pad_attn))
    if cap is None or cap.max_concurrency is None:
        return cap
    return replace(cap, tokens_capacity=logged_tokens(cap.layout, cap.max_concurrency, mml, engine))


def _uniform_type(c: _Cache) -> tuple[str, int | None]:
    """KVCacheSpecRegistry.get_uniform_type_base_spec and is_uniform_with_collection: MLAAttentionSpec's base is
    FullAttentionSpec, so MLA caches (an indexer's keys too) and full attention (an EAGLE head next to an MLA
    model) are one type; sliding windows and chunks only with their own size."""
    return ("full_attention" if c.kind == "mla" else c.kind), c.window


UNIFY_REFUSAL = ("page size is not divisible by the maximum page size and cannot be padded. Padding is only "
                 "supported for non-MLA attention layers.")
"""vLLM 0.33's NotImplementedError in unify_kv_cache_spec_page_size (after "Layer <name>: ")."""


def _promotion_refusal(engine: EngineVersion | None) -> str:
    """unify_hybrid_kv_cache_specs's ValueError with the hybrid manager off and state layers next to attention
    (its words per release: ENGINE_FEATURES promote_local_specs_message)."""
    if engine is None or engine_feature("promote_local_specs_message").holds_for(engine):
        return "Failed to promote local KV cache specs to one unified type."
    return "Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified type."


class LayoutRefused(Exception):
    """vLLM raises while laying the KV cache out and refuses to start: the layers it names and its message."""

    def __init__(self, layers: tuple[int, ...], message: str) -> None:
        super().__init__(message)
        self.layers, self.message = layers, message


UNIFY_REFUSAL_BEFORE_029 = ("page size is not divisible by the maximum page size and cannot be padded. Padding is "
                            "only supported for attention layers whose backend indexes KV pages by the block stride "
                            "(indexes_kv_by_block_stride is True).")
"""The same NotImplementedError before 0.29 (0.25.1, 0.28.0)."""
STATE_UNIFY_ASSERT = ("AssertionError in unify_kv_cache_spec_page_size: a state page that divides the largest "
                      "page is given a larger block instead of padding, which leaves its page size unchanged")
"""vLLM before 0.28 (PR #45207): the bare assert that fails (its message, after "Layer <name>: ")."""
UNIFY_REFUSAL_BEFORE_024 = ("The page size of the layer is not divisible by the maximum page size. Cannot unify by "
                            "adjusting block_size.")
"""vLLM before 0.24 (ENGINE_FEATURES attention_page_padding): no page is padded; a page that does not divide the
largest makes unify_kv_cache_spec_page_size raise this NotImplementedError, naming no layer."""


def _unify_pages(attn: list[_Cache], states: list[_Cache], pad_mla: bool = False,
                 pad_state: bool = True, pad_attn: bool = True) -> _Cache | None:
    """unify_kv_cache_spec_page_size: every page becomes the largest; a smaller attention page by a larger
    block (the ratio, when it divides) or padding (not for MLA), a state page by padding. Returns the first
    cache vLLM cannot unify (an MLA page that does not divide the largest: vLLM raises), None when unified.
    `pad_mla` (before 0.29): an MLA page is padded where its backend reads pages by the block stride
    (AttentionSpec.indexes_kv_by_block_stride: every dense MLA backend; not the sparse-MLA backends nor the
    indexer's key cache, whose stride order keeps the layer dimension first). Without `pad_state` (before 0.28)
    a state page below the largest fails vLLM's assert (it dividing the largest) or its padding check. Without
    `pad_attn` (before 0.24) no attention page is padded either: one that does not divide the largest is refused."""
    top = max([c.page for c in attn] + [c.state_page for c in states])
    platform = _platform_state_page(attn, states)
    sparse = {c.layer for c in attn if c.role == "indexer"}
    for c in attn:
        if c.page != top and top % c.page == 0:
            c.block, c.page = c.block * (top // c.page), top
        elif c.page != top:
            if not pad_attn or (c.kind == "mla" and not (pad_mla and c.role in ("main", "draft")
                                                          and c.layer not in sparse)):
                return c
            c.page = top
    for c in states:
        if not pad_state and platform != top:
            return c
        c.page = top
    return None


def _refuse_sliding_mla(attn: list[_Cache]) -> None:
    """Before 0.34 a sliding-window MLA layer (SlidingWindowMLASpec, a type of its own) keeps vLLM from the
    full-allocation fallback: where an MLA page does not divide the largest page (a sparse indexer's keys
    next to the latent), unify_kv_cache_spec_page_size raises. From 0.34 the fallback allocates every layer
    as full MLA, one uniform group, which is how kvplan lays sliding MLA out."""
    if not any(c.kind == "mla" and c.lp is not None and c.lp.sliding_window for c in attn):
        return
    top = max(c.page for c in attn)
    bad = next((c for c in attn if c.kind == "mla" and top % c.page), None)
    if bad is not None:
        raise LayoutRefused((bad.layer,), f"Layer {bad.layer}: {UNIFY_REFUSAL}")


def _platform_state_page(attn: list[_Cache], states: list[_Cache]) -> int:
    """The state page as the hybrid alignment left it (mamba_page_size_padded: the model's attention page at the
    aligned block size, the page of a layer's own unskipped attention cache), before pages are unified."""
    own = [c.page for c in attn if c.role == "main" and not c.skipped]
    return max([*own, *(c.state_page for c in states)])


def _full_allocation_fallback(attn: list[_Cache], states: list[_Cache]) -> bool:
    """_try_get_full_allocation_fallback_groups: where pages cannot be unified, MLA next to regular
    sliding-window layers (no chunked ones, no state layers: promotion must reach one type) is allocated as
    full attention instead of refusing (kvplan does not lay that fallback out)."""
    kinds = {c.kind for c in attn}
    return not states and "mla" in kinds and "sliding_attention" in kinds and "chunked_attention" not in kinds


def _grouping(attn: list[_Cache], states: list[_Cache],
              pads: tuple[bool, bool, bool] = (False, True, True)) -> list[_Group] | None:
    """get_kv_cache_groups: one group when every cache has one uniform type and block size (pages summed:
    UniformTypeKVCacheSpecs), else pages unified, caches bucketed by spec and split into equal-size groups;
    None where vLLM falls back to full allocation; LayoutRefused where it raises."""
    if not states and len({_uniform_type(c) for c in attn}) == 1 and len({c.block for c in attn}) == 1:
        return [(attn[0].kind, attn)]
    for c in states:
        c.page = c.state_page
    platform = _platform_state_page(attn, states) if states else 0
    bad = _unify_pages(attn, states, *pads)
    if bad is not None:
        top = max([c.page for c in attn] + [c.state_page for c in states])
        if bad.kind == "state" and top % platform == 0:
            raise LayoutRefused((bad.layer,), f"Layer {bad.layer}: {STATE_UNIFY_ASSERT}")
        if not pads[2]:  # before 0.24: one message, no layer named, no full-allocation fallback
            raise LayoutRefused((bad.layer,), UNIFY_REFUSAL_BEFORE_024)
        if bad.kind != "state" and _full_allocation_fallback(attn, states):
            return None
        before_029 = pads[0] or bad.kind == "state"
        text = UNIFY_REFUSAL_BEFORE_029 if before_029 else UNIFY_REFUSAL
        raise LayoutRefused((bad.layer,), f"Layer {bad.layer}: {text}")
    buckets: dict[tuple[str, int | None, int, int, int], list[_Cache]] = {}
    for c in attn:
        buckets.setdefault((c.kind, c.window, c.block, c.bpt, c.page), []).append(c)
    if states:
        buckets[("state", None, 0, 0, 0)] = states
    return _groups(buckets)


def _blocks(c: _Cache, length: int, inflight: tuple[int, int], state_blocks: int) -> int:
    """Blocks one request of `length` tokens holds in a group of this cache's spec (max_memory_usage_bytes /
    page): CrossAttentionSpec the encoder's input tokens (max_num_encoder_input_tokens = the batch budget)."""
    if c.kind == "state":
        return state_blocks
    if c.kind == "cross_attention":
        return -(-inflight[0] // c.block)
    return _attn_blocks(c, length, c.block, *inflight)


def _capacity(attn: list[_Cache], states: list[_Cache], bs: int, mml: int, inflight: tuple[int, int],
              state_blocks: int, mode: str | None, budget: int | None, reserve_null: bool = True,
              pads: tuple[bool, bool, bool] = (False, True, True)) -> Capacity | None:
    groups = _grouping(attn, states, pads)
    if groups is None:
        return None

    def blocks_at(length: int) -> list[int]:
        return [max(_blocks(c, length, inflight, state_blocks) for c in members) for _, members in groups]

    out = [KvCacheGroup(kind=kind, layers=[c.layer for c in members],  # type: ignore[arg-type]
                        # Mamba layers: mamba_block_size (the block size in align mode, else max_model_len)
                        block_size=(bs if mode == "align" else mml) if kind == "state" else members[0].block,
                        blocks_per_request=n) for (kind, members), n in zip(groups, blocks_at(mml), strict=True)]
    bytes_per_block = max(sum(c.page for c in members) for _, members in groups)
    per_request = sum(g.blocks_per_request for g in out)
    num_blocks = budget // bytes_per_block if budget is not None else None
    conc = num_blocks / per_request if num_blocks is not None and per_request else None
    fits = None
    usable = budget - bytes_per_block if budget is not None and reserve_null else budget
    if usable is not None and bytes_per_block * per_request > usable:
        # check_enough_kv_cache_memory: the pool keeps one null block; binary search as vLLM's estimate does.
        fits = longest_fitting(lambda n: bytes_per_block * sum(blocks_at(n)), usable, mml)
    state_page = max((c.state_page for c in states), default=0) or None
    layout = KvCacheLayout(block_size=bs, page_size_bytes=max(c.page for _, m in groups for c in m),
                           state_page_size_bytes=state_page, bytes_per_block=bytes_per_block, groups=out,
                           blocks_per_request=per_request, mamba_cache_mode=mode,  # type: ignore[arg-type]
                           num_blocks=num_blocks)
    return Capacity(layout=layout, bytes_per_request=bytes_per_block * per_request,
                    max_concurrency=conc, tokens_capacity=int(conc * mml) if conc is not None else None,
                    max_model_len_fits=fits)
