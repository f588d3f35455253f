"""vLLM's KV cache layout and capacity: block size, groups, pages, blocks per request, tokens and concurrency.

Mirrors vLLM 0.33.0:
* `Platform._align_hybrid_block_size` (vllm/platforms/interface.py): a hybrid model's attention block size is
  raised to the smallest multiple of the kernel alignment whose page holds the largest state page, and the
  state pages are padded to the attention page ("Setting attention block size to N tokens").
* `MambaModelConfig.verify_and_update_config` (vllm/model_executor/models/config.py): with prefix caching
  (on by default) the state layers run in mamba_cache_mode "align".
* `get_kv_cache_groups` / `_get_kv_cache_groups_uniform_page_size` (vllm/v1/core/kv_cache_planning.py):
  one group when every layer has the same spec or type, else layers bucketed by spec and split into groups
  of equal size (the smallest bucket's, or the largest when it is < 1.5x the smallest).
* `get_kv_cache_configs`: num_blocks = KV memory // bytes per block (the largest group's pages);
  `get_max_concurrency_for_kv_cache_config`: num_blocks / the blocks one request at max_model_len holds,
  summed over groups; `get_kv_cache_capacity`: tokens = int(concurrency x max_model_len), the
  "GPU KV cache size" vLLM logs next to "Maximum concurrency".
Pure functions.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from kvplan.backends.capabilities import EngineVersion
from kvplan.model.arch import LayerArch, ModelArch, StateCache
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import KvCacheGroup, KvCacheLayout, LayerPlan
from kvplan.planner.state_cache import checkpoint_alignment, checkpoint_blocks

ATTENTION_KINDS = ("full_attention", "sliding_attention", "chunked_attention", "mla")
MIN_KERNEL_BLOCK = 16   # smallest kernel block of vLLM's CUDA attention backends (MultipleOf(16))
MLA_HYBRID_ALIGNMENT = 128  # hybrid MLA + Mamba: block size a multiple of 128 (TRTLLM / FlashInfer MLA decode)
_Group = tuple[str, list[LayerPlan]]  # (spec kind, layers) of one KV cache group

# How the "GPU KV cache size: N tokens" line is computed, per release range (the other figure, Maximum
# concurrency, is num_blocks / blocks per request in every release modelled).
KV_CACHE_SIZE_FORMULAS: tuple[tuple[str, str, str], ...] = (
    ("<0.20", "num_blocks // groups x smallest block size",
     "vllm/v1/core/kv_cache_utils.py::_report_kv_cache_config before vLLM PR #40694 (issue #40691: 290,864 tokens "
     "logged for Qwen3.5-27B at 33.04x of 32,768)"),
    (">=0.20", "int(max_concurrency x max_model_len)",
     "vllm/v1/core/kv_cache_utils.py::get_kv_cache_capacity (0.33.0); vLLM PR #40694"),
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
    """A layer whose cache is one spec kvplan lays out (no indexer, ring, cross or shared cache)."""
    if la is None:
        return False
    if lp.kind in ATTENTION_KINDS and lp.bytes_per_token:
        return (not la.extra_caches and la.dsv4_compress_ratio is None and la.states_per_token == 1
                and not la.cross_attention_tokens and not la.indexer_bytes_per_token
                and lp.bytes_per_token_exact is None)
    return True


def mamba_cache_mode(flags: ServingFlags, attention_free: bool = False) -> str:
    """align with prefix caching, else none. Prefix caching is on by default for generative models with
    attention layers, off for attention-free ones (ModelConfig.is_prefix_caching_supported)."""
    on = flags.enable_prefix_caching if flags.enable_prefix_caching is not None else not attention_free
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


def _attn_blocks(lp: LayerPlan, mml: int, bs: int, mbt: int, retained: int = 0) -> int:
    """Blocks of one attention layer for one request (max_memory_usage_bytes / page, vllm-0.33 §7.2); a sliding
    window keeps `retained` more tokens below it (SlidingWindowSpec.extra_retained_tokens)."""
    if lp.kind == "sliding_attention" and lp.sliding_window:
        return -(-min(lp.sliding_window - 1 + retained + mbt, mml) // bs) + 1
    if lp.kind == "chunked_attention" and lp.attention_chunk_size:
        return -(-min(lp.attention_chunk_size + mbt, mml) // bs)
    return -(-mml // bs)


def _bucket_key(lp: LayerPlan, page: int) -> tuple[str, int | None, int]:
    if lp.kind == "sliding_attention":
        return lp.kind, lp.sliding_window, page
    if lp.kind == "chunked_attention":
        return lp.kind, lp.attention_chunk_size, page
    return lp.kind, None, page


def _groups(buckets: dict[tuple[str, int | None, int], list[LayerPlan]]) -> list[_Group]:
    """_get_kv_cache_groups_uniform_page_size: equal-size groups, bucket i's layers[j::n] in group j."""
    sizes = [len(v) for v in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < group_size * 1.5:
        group_size = max(sizes)
    out: list[_Group] = []
    for (kind, _, _), layers in buckets.items():
        n = -(-len(layers) // group_size)
        out.extend((kind, layers[j::n]) for j in range(n))
    return out


def is_mtp(flags: ServingFlags) -> bool:
    """--speculative-config with an MTP method: the checkpoint's own MTP layers are the draft model."""
    m = (flags.speculative_method or "").lower()
    return flags.num_speculative_tokens > 0 and (m == "mtp" or m.endswith("_mtp"))


# Methods whose draft is a model of its own (--speculative-config model), built by the drafter's load_model with
# its attention layers in the KV cache pool (SpeculativeConfig.use_eagle / uses_draft_model; DFlash and DSpark
# drafts, whose attention is not causal, are not modelled).
DRAFT_MODEL_METHODS = ("eagle", "eagle3", "draft_model")


def uses_draft_model(flags: ServingFlags) -> bool:
    """--speculative-config names a draft model whose KV layers kvplan lays out (EAGLE, EAGLE3, draft_model)."""
    return (flags.num_speculative_tokens > 0 and flags.speculative_model is not None
            and (flags.speculative_method or "").lower() in DRAFT_MODEL_METHODS)


def multi_module_mtp(arch: ModelArch, flags: ServingFlags) -> bool:
    """SpeculativeConfig.use_multi_module_mtp: method mtp with more than one MTP module in use."""
    return is_mtp(flags) and min(arch.mtp_layers, flags.num_speculative_tokens) > 1


def draft_layers(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags,
                 external: list[LayerPlan] | None = None) -> list[LayerPlan]:
    """The draft model's KV layers, numbered after the model's layers: a draft model's own layers (planned from
    its config, `external`), or the checkpoint's MTP layers, which vLLM builds as decoder layers with the KV
    cache of the model's full attention."""
    first = max((lp.index for lp in layers), default=-1) + 1
    if external is not None and uses_draft_model(flags):
        kv = [lp for lp in external if lp.bytes_per_token and lp.kind in ATTENTION_KINDS]
        return [lp.model_copy(update={"index": first + i}) for i, lp in enumerate(kv)]
    if not (is_mtp(flags) and arch.mtp_layers):
        return []
    main = next((lp for lp in layers if lp.kind in ("full_attention", "mla") and lp.bytes_per_token), None)
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
    m = (flags.speculative_method or "").lower()
    eagle = flags.num_speculative_tokens > 0 and (m in EAGLE_METHODS or is_mtp(flags))
    return eagle and any(lp.kind == "chunked_attention" for lp in layers)


def _promote_local(attn: list[LayerPlan]) -> list[LayerPlan]:
    """unify_hybrid_kv_cache_specs / _promote_local_kv_cache_specs: without the hybrid manager, sliding-window
    and chunked layers next to full attention (or MLA) are allocated as full attention (their compute keeps
    its window)."""
    if not any(lp.kind in ("full_attention", "mla") for lp in attn):
        return attn
    return [lp.model_copy(update={"kind": "full_attention", "sliding_window": None, "attention_chunk_size": None})
            if lp.kind in ("sliding_attention", "chunked_attention") else lp for lp in attn]


def _skip_page_differs(layers: list[LayerPlan]) -> bool:
    """Skip layers whose cache differs from the quantized layers' (vLLM re-aligns the block size to them)."""
    primary = {lp.bytes_per_token for lp in layers if not lp.skipped and lp.bytes_per_token}
    return any(lp.skipped and lp.bytes_per_token not in primary for lp in layers)


def _skip_alignment(attn: list[LayerPlan], bs: int) -> tuple[int, int | None]:
    """Platform._align_heterogeneous_kv_block_size: when a skip layer's (model-dtype) page per token exceeds
    the quantized layers', the block size becomes align x cdiv(skip x 16, align x primary) (align = max(16,
    block size)) and sliding-window skip layers pad their page to block size x primary. (block size, padded
    skip page or None)."""
    primary = [lp.bytes_per_token for lp in attn if not lp.skipped]
    skipped = [lp.bytes_per_token for lp in attn if lp.skipped]
    if not primary or not skipped or max(skipped) <= max(primary):
        return bs, None
    align = max(MIN_KERNEL_BLOCK, bs)
    bs = align * -(-(max(skipped) * MIN_KERNEL_BLOCK) // (align * max(primary)))
    return bs, bs * max(primary)


def _layer_block(lp: LayerPlan, bs: int, skip_page: int | None) -> int:
    """A layer's tokens per block: a sliding-window skip layer padded to the shared page takes the largest
    kernel block (a multiple of 16) whose own page fits it (attention.py::_largest_kernel_block_within)."""
    if skip_page is None or not lp.skipped or lp.kind != "sliding_attention":
        return bs
    return max(MIN_KERNEL_BLOCK, skip_page // lp.bytes_per_token // MIN_KERNEL_BLOCK * MIN_KERNEL_BLOCK)


def _laid_out(layers: list[LayerPlan], drafts: list[LayerPlan],
              by_index: dict[int, LayerArch]) -> tuple[list[LayerPlan], list[LayerPlan]] | None:
    """(attention layers with the draft's, state layers), or None where kvplan does not lay the model out."""
    if not all(_plain(lp, by_index.get(lp.index)) for lp in layers):
        return None
    if _skip_page_differs(layers) and any(lp.kind in ("mamba", "linear_attention", "mla") for lp in layers):
        return None  # skip re-alignment with state layers or MLA latents: not modelled
    attn = [lp for lp in layers if lp.kind in ATTENTION_KINDS and lp.bytes_per_token]
    attn += drafts
    states = [lp for lp in layers if lp.kind in ("mamba", "linear_attention")]
    if any(lp.state_bytes is None for lp in states) or not (attn or states):
        return None
    return attn, states


def _pages(attn: list[LayerPlan], states: list[LayerPlan], blocks: dict[int, int], state_page: int,
           skip_page: int | None = None) -> dict[int, int] | None:
    """Every layer's page: attention block x bytes per token (a sliding skip layer: the shared skip page);
    state pages padded to the attention page."""
    def page(lp: LayerPlan) -> int:
        if skip_page is not None and lp.skipped and lp.kind == "sliding_attention":
            return skip_page
        return blocks[lp.index] * lp.bytes_per_token

    pages = {lp.index: page(lp) for lp in attn}
    if attn and states and len(set(pages.values())) != 1:
        return None  # state padding to several attention pages: not modelled
    pad = next(iter(pages.values())) if attn else state_page
    pages.update({lp.index: pad for lp in states})
    return pages


def _state_blocks(sc: StateCache | None, flags: ServingFlags, mode: str | None,
                  cc: tuple[int, int] | None) -> int:
    """MambaSpec.max_memory_usage_bytes / page: align mode 2 + drafts + checkpoint, none mode 1 + drafts."""
    if mode == "align":
        return 2 + (checkpoint_blocks(sc, cc) if sc is not None else 0) + flags.num_speculative_tokens
    return 1 + flags.num_speculative_tokens


def plan_layout(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, mml: int | None,
                bs: int, mbt: int, budget: int | None, engine: EngineVersion | None = None,
                compute_capability: tuple[int, int] | None = None,
                drafts: list[LayerPlan] | None = None) -> Capacity | None:
    """vLLM's layout and capacity for these layers and the draft's (`drafts`, from `draft_layers`), or None
    where kvplan does not model it (caches of several page sizes, extra caches, state layers it cannot size).
    The GPU's compute capability decides kernel choices that change the layout (FlashInfer's GDN prefill
    kernel and its checkpoints)."""
    by_index = {la.index: la for la in arch.layers}
    drafts = draft_layers(layers, arch, flags) if drafts is None else drafts
    picked = _laid_out(layers, drafts, by_index) if mml else None
    if picked is None or not mml:
        return None
    attn, states = picked
    if hybrid_manager_disabled(layers, flags):
        if states and attn:
            return None  # vLLM cannot promote state layers to one type: it refuses to start (not modelled)
        attn = _promote_local(attn)
    state_page = max((lp.state_bytes or 0 for lp in states), default=0)
    mode = mamba_cache_mode(flags, attention_free=not attn) if states else None
    sc = by_index[states[0].index].state if states else None
    if attn and states:
        ckpt = checkpoint_alignment(sc, compute_capability) if sc is not None and mode == "align" else 1
        bs = _hybrid_block_size(bs, max(lp.bytes_per_token for lp in attn), state_page,
                                any(lp.kind == "mla" for lp in attn), ckpt)
    bs, skip_page = _skip_alignment(attn, bs)
    blocks = {lp.index: _layer_block(lp, bs, skip_page) for lp in attn}
    pages = _pages(attn, states, blocks, state_page, skip_page)
    if pages is None:
        return None
    # get_global_kv_cache_groups: with several MTP modules in use, sliding windows retain the tokens the chain
    # may re-prefill (extra_retained_tokens = num_prefill_lookahead_tokens - 1 = num_speculative_tokens - 1).
    retained = flags.num_speculative_tokens - 1 if multi_module_mtp(arch, flags) else 0
    cap = _capacity(attn, states, pages, blocks, bs, mml, (mbt, retained),
                    _state_blocks(sc, flags, mode, compute_capability) if states else 0,
                    state_page or None, mode, budget)
    if cap is None or cap.max_concurrency is None:
        return cap
    return replace(cap, tokens_capacity=logged_tokens(cap.layout, cap.max_concurrency, mml, engine))


def _uniform_type(kind: str) -> str:
    """KVCacheSpecRegistry.get_uniform_type_base_spec: MLAAttentionSpec's base is FullAttentionSpec, so MLA
    layers and full-attention layers (an EAGLE head next to an MLA model) are one uniform type."""
    return "full_attention" if kind == "mla" else kind


def _grouping(attn: list[LayerPlan], states: list[LayerPlan], pages: dict[int, int], blocks: dict[int, int],
              mml: int, inflight: tuple[int, int]) -> list[_Group] | None:
    """get_kv_cache_groups: one group when the layers share one spec type and block count (pages summed:
    UniformTypeKVCacheSpecs), else equal-page buckets split into equal-size groups; None for mixed pages."""
    first = _attn_blocks(attn[0], mml, blocks[attn[0].index], *inflight) if attn else 0
    if not (attn and states) and len({_uniform_type(lp.kind) for lp in attn}) <= 1 and all(
            _attn_blocks(lp, mml, blocks[lp.index], *inflight) == first for lp in attn):
        return [(attn[0].kind if attn else "state", attn or states)]
    if len(set(pages.values())) != 1:
        return None  # mixed page sizes: vLLM packs them (not modelled)
    buckets: dict[tuple[str, int | None, int], list[LayerPlan]] = {}
    for lp in attn:
        buckets.setdefault(_bucket_key(lp, pages[lp.index]), []).append(lp)
    if states:
        buckets[("state", None, 0)] = states
    return _groups(buckets)


def _capacity(attn: list[LayerPlan], states: list[LayerPlan], pages: dict[int, int], blocks: dict[int, int],
              bs: int, mml: int, inflight: tuple[int, int], state_blocks: int, state_page: int | None,
              mode: str | None,
              budget: int | None) -> Capacity | None:
    groups = _grouping(attn, states, pages, blocks, mml, inflight)
    if groups is None:
        return None

    def blocks_at(length: int) -> list[int]:
        return [state_blocks if kind == "state"
                else _attn_blocks(members[0], length, blocks[members[0].index], *inflight)
                for kind, members in groups]

    out = [KvCacheGroup(kind=kind, layers=[lp.index for lp in members],  # type: ignore[arg-type]
                        # Mamba layers: mamba_block_size (the block size in align mode, else max_model_len)
                        block_size=(bs if mode == "align" else mml) if kind == "state" else blocks[members[0].index],
                        blocks_per_request=n) for (kind, members), n in zip(groups, blocks_at(mml), strict=True)]
    bytes_per_block = max(sum(pages[lp.index] for lp in members) for _, members in groups)
    per_request = sum(g.blocks_per_request for g in out)
    num_blocks = budget // bytes_per_block if budget is not None else None
    conc = num_blocks / per_request if num_blocks is not None and per_request else None
    fits = None
    if budget is not None and bytes_per_block * per_request > budget - bytes_per_block:
        # check_enough_kv_cache_memory: the pool keeps one null block; binary search as vLLM's estimate does.
        fits = _longest_fitting(lambda n: bytes_per_block * sum(blocks_at(n)), budget - bytes_per_block, mml)
    layout = KvCacheLayout(block_size=bs, page_size_bytes=max(pages.values()), state_page_size_bytes=state_page,
                           bytes_per_block=bytes_per_block, groups=out, blocks_per_request=per_request,
                           mamba_cache_mode=mode, num_blocks=num_blocks)  # type: ignore[arg-type]
    return Capacity(layout=layout, bytes_per_request=bytes_per_block * per_request,
                    max_concurrency=conc, tokens_capacity=int(conc * mml) if conc is not None else None,
                    max_model_len_fits=fits)


def _longest_fitting(needed: Callable[[int], int], available: int, upper: int) -> int:
    """_estimate_max_model_len_from_groups: the longest length in [1, upper] whose request fits, else 0."""
    if available <= 0 or needed(1) > available:
        return 0
    lo, hi, best = 1, upper, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if needed(mid) <= available:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best
