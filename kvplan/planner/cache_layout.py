"""vLLM's KV cache layout and capacity, whichever way kvplan lays the model out.

Models with a cache builder (kvplan/planner/model_caches/: layers registering several caches of different
blocks and pages, DeepSeek-V4, GLM-5 Next, Step 5, Inkling) are laid out cache by cache: the builder's caches,
packed by kvplan/planner/packing.py. Every other model goes through kvplan/planner/layout.py. Pure functions.
"""
from __future__ import annotations

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import KvCacheGroup, KvCacheLayout, LayerPlan
from kvplan.planner.cache_specs import Builder, ModelCaches, SpecContext
from kvplan.planner.layout import (
    Capacity,
    LayoutRefused,
    hybrid_manager_disabled,
    logged_tokens,
    mamba_cache_mode,
    multi_module_mtp,
    plan_layout,
)
from kvplan.planner.model_caches import BUILDERS
from kvplan.planner.packing import PackingRefused, pack

_KIND = {"FullAttentionSpec": "full_attention", "MLAAttentionSpec": "mla", "SlidingWindowSpec": "sliding_attention",
         "SlidingWindowMLASpec": "sliding_attention", "ChunkedLocalAttentionSpec": "chunked_attention",
         "CrossAttentionSpec": "cross_attention", "MambaSpec": "state", "CircularBufferSpec": "ring"}


def plan_capacity(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, mml: int | None,
                  bs: int, mbt: int, budget: int | None, engine: EngineVersion | None = None,
                  compute_capability: tuple[int, int] | None = None,
                  drafts: list[LayerPlan] | None = None, model_dtype: str | None = None) -> Capacity | None:
    """vLLM's layout and capacity (see layout.plan_layout for the arguments), or None where kvplan does not
    model it. Raises LayoutRefused where vLLM raises instead."""
    builder = BUILDERS.get(arch.architecture or "")
    if builder is None:
        return plan_layout(layers, arch, flags, mml, bs, mbt, budget, engine, compute_capability, drafts,
                           model_dtype=model_dtype)
    if not mml or hybrid_manager_disabled(layers, flags):
        return None  # the hybrid manager off is not modelled for these models
    # a speculative draft: each builder lays out the drafts its model's vLLM code builds (DeepSeek-V4's MTP
    # layers) and returns None for the others
    return _built_capacity(builder, layers, arch, flags, SpecContext(mml, bs, mbt, engine, compute_capability),
                           budget)


def _built_capacity(builder: Builder, layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags,
                    ctx: SpecContext, budget: int | None) -> Capacity | None:
    caches = builder(layers, arch, flags, ctx)
    if caches is None or not caches.specs:
        return None
    # the pool's null block is held back from the memory check from 0.29 (ENGINE_FEATURES null_block_reserved)
    reserve = ctx.engine is None or engine_feature("null_block_reserved").holds_for(ctx.engine)
    try:
        # get_global_kv_cache_groups: several MTP modules in use retain the tokens the chain may re-prefill
        retained = flags.num_speculative_tokens - 1 if multi_module_mtp(arch, flags) else 0
        packed = pack(caches.specs, caches.block_outermost, ctx.max_model_len, ctx.max_num_batched_tokens,
                      budget, reserve, retained)
    except PackingRefused as e:
        raise LayoutRefused((e.cache.layer,), e.message) from None
    layout = _layout(caches, packed.groups, packed.blocks_per_request, packed.bytes_per_block,
                     packed.num_blocks, flags)
    conc = packed.max_concurrency
    return Capacity(layout=layout, bytes_per_request=packed.bytes_per_block * layout.blocks_per_request,
                    max_concurrency=conc,
                    tokens_capacity=logged_tokens(layout, conc, ctx.max_model_len, ctx.engine)
                    if conc is not None else None,
                    max_model_len_fits=packed.max_model_len_fits)


def _layout(caches: ModelCaches, groups: list, per_group: list[int], bytes_per_block: int,
            num_blocks: int | None, flags: ServingFlags) -> KvCacheLayout:
    states = [s.page_size_bytes for s in caches.specs if s.spec == "MambaSpec"]
    out = [KvCacheGroup(kind=_KIND[g[0].spec], layers=[s.layer for s in g],  # type: ignore[arg-type]
                        block_size=g[0].block_size, blocks_per_request=n, spec=g[0].spec,
                        page_size_bytes=g[0].page_size_bytes)
           for g, n in zip(groups, per_group, strict=True)]
    return KvCacheLayout(block_size=caches.block_size,
                         page_size_bytes=max(s.page_size_bytes for s in caches.specs),
                         state_page_size_bytes=max(states) if states else None, bytes_per_block=bytes_per_block,
                         groups=out, blocks_per_request=sum(per_group),
                         mamba_cache_mode=mamba_cache_mode(flags) if states else None,  # type: ignore[arg-type]
                         num_blocks=num_blocks, memory_layout=caches.layout_name)
