"""KV bytes per token (vLLM 0.33 KV cache spec formulas) and capacity checks."""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from kvplan.model.arch import LayerArch
from kvplan.model.plan import Totals
from kvplan.model.vocab import NO_KV_KINDS, QuantMode
from kvplan.rules.base import Emit, declare
from kvplan.rules.context import RuleContext
from kvplan.rules.state import LayerState, Set, decides_layer

SPEC = "vllm/v1/kv_cache_interface.py (AttentionSpec, MLAAttentionSpec)"
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "float8_e4m3fnuz": 1,
               "float8_e5m2": 1, "int8": 1}
# Fixed per-token layouts of the DeepSeek sparse-MLA formats (vllm-0.33-kv-rules.md §6.3).
MLA_FIXED = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}
# Nominal bits per element of K and V for packed formats whose slot layout kvplan does not model exactly.
PACKED_BITS = {"turboquant_k8v4": (8, 4), "turboquant_4bit_nc": (4, 4), "turboquant_k3v4_nc": (3, 4),
               "turboquant_3bit_nc": (3, 3), "octave_k3v4": (3, 4), "octave_k3v3": (3, 3),
               "octave_k3v3_compact": (3, 3), "ultraquant_4bit": (4, 4)}


def dsv4_bytes_per_token(la: LayerArch, kv_cache_dtype: str, dtype: str) -> tuple[Fraction, str]:
    """(bytes per token, formula) of a DeepSeek-V4 layer: the sum of `dsv4_caches`."""
    parts = dsv4_caches(la, kv_cache_dtype, dtype)
    return sum((p for p, _, _ in parts), Fraction(0)), " + ".join(f for _, _, f in parts)


def dsv4_caches(la: LayerArch, kv_cache_dtype: str, dtype: str) -> list[tuple[Fraction, int | None, str]]:
    """DeepSeek-V4 layer (vLLM 0.33 DeepseekV4Attention, its caches' real page sizes per token): the
    compressed latent (one state per `ratio` tokens), the sliding-window cache, the compressor state
    (fp32, 2 x coff x head_dim; coff 2 with overlap at ratio 4) and, at ratio 4, the indexer's key
    cache (index_head_dim fp8 + fp32 scale per 128, per state) and its compressor state."""
    assert la.mla is not None and la.dsv4_compress_ratio is not None and la.head_size is not None
    r, head, rope = la.dsv4_compress_ratio, la.head_size, la.mla.qk_rope_head_dim
    if kv_cache_dtype == "fp8_ds_mla":
        state, layout = head - rope + 2 * rope + 8, f"fp8_ds_mla {head - rope} fp8 + {rope} bf16 + 8 B scales"
    else:
        state, layout = head * DTYPE_BYTES.get(dtype, 2), f"{head} x {DTYPE_BYTES.get(dtype, 2)} B"
    # (bytes per token, tokens kept per request: None = the whole context, else a sliding window, formula)
    parts: list[tuple[Fraction, int | None, str]] = [
        (Fraction(state), la.dsv4_window, f"sliding-window cache {state} B ({layout})")]
    if r > 1:
        coff = 2 if r == 4 else 1
        parts.append((Fraction(state, r), None, f"latent {state}/{r} B"))
        parts.append((Fraction(2 * coff * head * 4), coff * r, f"compressor state {2 * coff * head * 4} B (fp32)"))
    if r == 4 and la.mla.index_head_dim:
        ihd = la.mla.index_head_dim
        k = ihd + ihd // 128 * 4
        parts.append((Fraction(k, r), None, f"indexer keys {k}/{r} B"))
        parts.append((Fraction(2 * 2 * ihd * 4), 2 * r, f"indexer compressor state {2 * 2 * ihd * 4} B (fp32)"))
    return parts


def extra_cache_bytes(la: LayerArch, main: int, model_dtype: str, kv_bytes: int = 2,
                      tp: int = 1) -> tuple[Fraction, str]:
    """(bytes per token, formula) of the caches vLLM registers at a layer next to its main one
    (`LayerArch.extra_caches`): elements x element bytes / tokens per state, each. An attention cache of
    another module (`kv_heads`) is in the layer's KV element bytes (`kv_bytes`), its heads split over TP."""
    total, parts = Fraction(0), []
    for x in la.extra_caches:
        if x.same_as_layer:
            b, f = Fraction(main), f"{x.name} {main} B (a page of the layer's cache)"
        elif x.kv_heads is not None:
            h = kv_heads_per_rank(x.kv_heads, tp)
            b, f = Fraction(h * x.elements * kv_bytes), f"{x.name} {h} heads x {x.elements} x {kv_bytes} B"
        else:
            eb = x.element_bytes or DTYPE_BYTES.get(model_dtype, 2)
            b = Fraction(x.elements * eb, x.tokens_per_state)
            per = f" / {x.tokens_per_state} tokens" if x.tokens_per_state > 1 else ""
            f = f"{x.name} {x.elements} x {eb} B{per}"
        total += b
        parts.append(f)
    return total, " + ".join(parts)


def _fractional(exact: Fraction, formula: str, heads: int, heads_why: str) -> Iterator[Set]:
    """A layer whose caches store less than one element per token (pooled / compressed states)."""
    yield Set("num_kv_heads", heads, heads_why)
    yield Set("bytes_per_token_exact", float(exact), f"{formula} = {float(exact)} B per token")
    yield Set("bytes_per_token", math.ceil(exact), formula + " (rounded up)")


def kv_heads_per_rank(total: int, tp: int) -> int:
    """vLLM ModelConfig.get_num_kv_heads: KV heads split over TP, replicated when fewer than TP."""
    return max(1, total // tp)


def layer_bytes_per_token(kind: str, kv_cache_dtype: str, dtype: str, quant_mode: QuantMode,
                          heads: int, hk: int, hv: int) -> tuple[int, str]:
    """(bytes, formula) for one layer on one rank."""
    if kind == "mla":
        if kv_cache_dtype in MLA_FIXED:
            return MLA_FIXED[kv_cache_dtype], f"{kv_cache_dtype} fixed record"
        if quant_mode.is_per_token_head:
            return hk + 8, f"{hk} x 1 B + 2 fp32 scales"
        b = DTYPE_BYTES.get(dtype, 1)
        return hk * b, f"latent {hk} x {b} B"
    if quant_mode.is_per_token_head:
        if quant_mode is QuantMode.int4_per_token_head:
            return heads * ((hk + hv) // 2 + 8), f"{heads} heads x ({hk}+{hv})/2 B + 8 B scales"
        return heads * ((hk + hv) + 8), f"{heads} heads x ({hk}+{hv}) x 1 B + 8 B inline fp32 scales"
    if quant_mode is QuantMode.nvfp4 or (quant_mode is QuantMode.nvfp4_ds_mla and kind != "mla"):
        # nvfp4_ds_mla on a dense layer has no backend (KV207/KV701); size it as dense NVFP4 packing.
        return 2 * heads * (hk // 2 + hk // 16), f"2 x {heads} heads x ({hk}/2 + {hk}/16) B (fp4 + fp8 block scales)"
    if kv_cache_dtype in PACKED_BITS:
        kb, vb = PACKED_BITS[kv_cache_dtype]
        n = heads * ((hk * kb + hv * vb + 7) // 8)
        return n, f"nominal {kb}/{vb}-bit K/V (slot padding not modelled)"
    b = DTYPE_BYTES[dtype]
    return heads * (hk + hv) * b, f"{heads} heads x ({hk}+{hv}) x {b} B"


@declare(code="KV130", name="kv-bytes-per-token", kind="decision", scope="layer", family="memory",
         severity="info", summary="Bytes per token per layer and rank, with the formulas of vLLM's KV cache specs.",
         why="Memory planning needs exact sizes: dense 2*H*D*b, per-token-head H*(2D+8), NVFP4 "
             "2*H*(D/2+D/16), MLA latent (kv_lora_rank+rope)*b or fp8_ds_mla's row (656 B; 528 B on vLLM 0.34's "
             "FLASHINFER_MLA_SPARSE_SM120 for a 512 latent without RoPE); KV heads are "
             "split over tensor-parallel ranks and replicated when fewer than TP.",
         fix="Quantize the KV cache or skip fewer layers to reduce bytes per token.",
         references=(SPEC, "vllm/v1/attention/backends/triton_attn.py::TritonAttentionBackend.customize_spec"))
@decides_layer("bytes_per_token", "bytes_per_token_exact", "num_kv_heads", "cross_attention_bytes_per_token")
def kv_bytes(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    if la.kind in NO_KV_KINDS or st.kv_cache_dtype is None:
        yield Set("bytes_per_token", 0, f"{la.kind} layer: no per-token KV cache")
        return
    # KV110 decided both for every layer with a kv_cache_dtype (precedence: storage before sizing)
    assert st.dtype is not None and st.quant_mode is not None, "KV130 runs after KV110"
    tp = ctx.flags.tensor_parallel_size
    heads = 1 if la.kind == "mla" else kv_heads_per_rank(la.num_kv_heads or 0, tp)
    n, formula = layer_bytes_per_token(la.kind, st.kv_cache_dtype, st.dtype, st.quant_mode,
                                       heads, la.head_size or 0, la.head_size_v or 0)
    if la.kind == "mla" and st.kv_cache_dtype == "fp8_ds_mla":
        row, backend = _fp8_ds_mla_row(ctx, la, st.kv_cache_dtype)
        if row != n:
            n, formula = row, f"fp8_ds_mla {row}-byte row on {backend} (a latent without RoPE)"
    if la.dsv4_compress_ratio is not None:
        exact, formula = dsv4_bytes_per_token(la, st.kv_cache_dtype, st.dtype)
        if la.extra_caches:  # DeepSeek-V4.1: the caches its source layers own
            more, more_formula = extra_cache_bytes(la, 0, ctx.model_dtype)
            exact, formula = exact + more, f"{formula} + {more_formula}"
        yield Set("num_kv_heads", 1, "DeepSeek-V4 latent: one per rank")
        if exact.denominator != 1:
            yield Set("bytes_per_token_exact", float(exact), f"{formula} = {float(exact)} B per token")
        yield Set("bytes_per_token", math.ceil(exact), formula + (" (rounded up)" if exact.denominator != 1 else ""))
        return
    if la.kind == "mla" and la.indexer_bytes_per_token:
        # DeepSeek-V3.2 / GLM-5 sparse MLA: vLLM registers a second, uint8 indexer key cache at the
        # layer (DeepseekV32IndexerCache: index_head_dim + index_head_dim/128 fp32 scales).
        n += la.indexer_bytes_per_token
        formula += f" + indexer key cache {la.indexer_bytes_per_token} B (uint8 keys + fp32 scales)"
    if la.states_per_token > 1:
        # A block-pooled cache (vLLM's tokens_per_state 1/N): N stored states per token.
        n *= la.states_per_token
        formula += f" x {la.states_per_token} states per token (block-pooled)"
    if la.extra_caches and la.kv_shared_with is None:
        extra, extra_formula = extra_cache_bytes(la, n, ctx.model_dtype, DTYPE_BYTES.get(st.dtype, 1), tp)
        formula += " + " + extra_formula
        if extra.denominator != 1:
            yield from _fractional(n + extra, formula, heads, f"{la.num_kv_heads} KV heads, TP {tp}")
            return
        n += int(extra)
    if la.kind == "mla" and tp > 1:
        formula += f" (MLA latent replicated on each of {tp} ranks)"
    elif tp > 1:
        formula += f" ({la.num_kv_heads} KV heads / TP {tp})"
    yield Set("num_kv_heads", heads, f"{la.num_kv_heads} KV heads, TP {tp}")
    if la.kv_shared_with is not None:
        # vLLM registers no KV cache spec for a layer with a kv_sharing_target_layer_name: it reads
        # the target layer's cache (which holds the bytes).
        yield Set("bytes_per_token", 0, f"reads layer {la.kv_shared_with}'s KV cache (KV sharing): no cache "
                                        f"of its own ({n} B/token counted at layer {la.kv_shared_with})")
        return
    if la.cross_attention_tokens:
        # Whisper: each decoder layer also registers a CrossAttentionSpec cache (same dtype, heads and
        # head size), filled once per request with the encoder's tokens.
        yield Set("cross_attention_bytes_per_token", n,
                  f"cross-attention cache: {formula} per encoder token, {la.cross_attention_tokens} encoder "
                  "tokens per request")
    if la.kind == "cross_attention":
        # CrossAttentionSpec: sized by encoder tokens (image/audio), not by decoded tokens.
        yield Set("bytes_per_token", 0, f"cross-attention KV is {n} B per encoder token ({formula}), "
                                        "not per decoded token")
        return
    yield Set("bytes_per_token", n, formula)


def _fp8_ds_mla_row(ctx: RuleContext, la: LayerArch, kv_cache_dtype: str) -> tuple[int, str | None]:
    """(the bytes of the layer's fp8_ds_mla row, its backend): the backend KV140 picks on ctx's GPU decides
    (impl get_fp8_ds_mla_row_bytes); 656 without a GPU."""
    if ctx.gpu is None or ctx.gpu.profile is None or la.mla is None:
        return MLA_FIXED["fp8_ds_mla"], None
    from kvplan.backends.impl import hooks_for
    from kvplan.backends.vllm_rows import BACKENDS
    from kvplan.rules.backend import backend_choice  # the backend rules import this module

    backend = backend_choice(ctx, la, kv_cache_dtype).backend
    if backend is None or backend not in BACKENDS:  # none, or a model's own (DeepSeek-V4's: its own row size)
        return MLA_FIXED["fp8_ds_mla"], None
    return hooks_for(backend).fp8_ds_mla_row_bytes(la.mla.kv_lora_rank, la.mla.qk_rope_head_dim, ctx.engine), backend


@declare(code="KV501", name="max-model-len-exceeds-model", severity="warning", family="memory",
         summary="--max-model-len is larger than the model's max_position_embeddings.",
         why="vLLM refuses a --max-model-len above the derived maximum unless "
             "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set; beyond it outputs degrade.",
         fix="Lower --max-model-len to the model's maximum (or set rope scaling deliberately).",
         references=("vllm/config/model.py::_get_and_verify_max_len",))
def mml_exceeds(ctx: RuleContext) -> Iterator[Emit]:
    mml, mp = ctx.flags.max_model_len, ctx.arch.max_position_embeddings
    if mml and mp and mml > mp:
        yield Emit(f"--max-model-len {mml} exceeds the model's max_position_embeddings {mp}.")


def _no_memory(t: Totals) -> str:
    """vLLM's error when profiling leaves nothing for the KV cache, with the figure it would log first."""
    logged = ""
    if t.kv_budget_terms:
        raw = sum(x.bytes for x in t.kv_budget_terms) / 2**30
        err = (t.kv_budget_error_bytes or 0) / 2**30
        logged = f"vLLM would log 'Available KV cache memory: {raw:.2f} GiB' (estimated, +/- {err:.2f} GiB), then: "
    return (logged + "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine (_check_enough_kv_cache_memory): the weights and vLLM's startup profiling "
            "take all of --gpu-memory-utilization. vLLM refuses to start.")


def _within_error(t: Totals, shortfall: int) -> str:
    """When the budget is kvplan's estimate and the shortfall is inside its error band: say that vLLM's own
    figure decides."""
    err = t.kv_budget_error_bytes or 0
    if not t.kv_budget_terms or shortfall > err:
        return ""
    return (f" The shortfall ({shortfall / 2**30:.2f} GiB) is within the GPU budget estimate's error "
            f"(+/- {err / 2**30:.2f} GiB): pass the 'Available KV cache memory' vLLM logs as --kv-budget-gib to "
            "decide.")


@declare(code="KV502", name="kv-cache-too-small", severity="error", family="memory",
         summary="One request of --max-model-len does not fit in the KV cache budget.",
         why="vLLM checks at startup that one max-length request fits and refuses to start otherwise "
             "('... is larger than the maximum number of tokens that can be stored in KV cache').",
         fix="Lower --max-model-len, quantize the KV cache, raise --gpu-memory-utilization or add GPUs (TP).",
         references=("vllm/v1/core/kv_cache_planning.py::_check_enough_kv_cache_memory",
                     "vllm/v1/core/kv_cache_planning.py::_estimate_max_model_len_from_groups"))
def too_small(ctx: RuleContext) -> Iterator[Emit]:
    t = ctx.totals
    if t is None or t.kv_budget_bytes is None or t.bytes_per_request is None:
        return
    lay = t.kv_cache_layout
    if t.kv_budget_bytes <= 0:
        yield Emit(_no_memory(t))
        return
    if lay is not None:
        # vLLM plans against the pool minus the null block from 0.29 (ENGINE_FEATURES null_block_reserved),
        # needs whole blocks per group.
        available = t.kv_budget_bytes - (lay.bytes_per_block if ctx.engine_has("null_block_reserved") else 0)
        if t.bytes_per_request > available:
            est = (f" Based on the available memory, the estimated maximum model length is "
                   f"{t.max_model_len_fits}." if t.max_model_len_fits else "")
            yield Emit(f"To serve at least one request with the model's max seq len ({t.max_model_len}), "
                       f"{t.bytes_per_request / 2**30:.2f} GiB KV cache is needed, which is larger than the "
                       f"available KV cache memory ({max(available, 0) / 2**30:.2f} GiB).{est} vLLM refuses to "
                       "start." + _within_error(t, t.bytes_per_request - available))
        return
    if t.bytes_per_request > t.kv_budget_bytes:
        yield Emit(f"one request at --max-model-len {t.max_model_len} needs {t.bytes_per_request / 2**30:.2f} GiB "
                   f"of KV per GPU but the budget is {t.kv_budget_bytes / 2**30:.2f} GiB.")


@declare(code="KV505", name="lora-budget-not-estimated", severity="warning", family="memory",
         summary="--enable-lora with a KV budget estimated from the GPU: the LoRA part of vLLM's profiling is not "
                 "in the estimate.",
         why="With --enable-lora vLLM's startup profiling runs --max-loras dummy adapters (their weights and "
             "activation buffers), so the memory left for the KV cache is lower than kvplan's GPU budget, which has "
             "no LoRA term (docs/budget.md: a logged Llama-2-7b launch with --max-loras 4 on an H100 kept 2.38 GiB "
             "of activation peak against kvplan's 0.38 GiB, 1.9 GiB less KV memory).",
         fix="Pass --kv-budget-gib with the 'Available KV cache memory' vLLM logs for this launch, or keep a margin "
             "of a few GiB in --max-model-len / --max-num-seqs.",
         references=("vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.profile_run (maybe_dummy_run_with_lora)",
                     "https://github.com/kubernetes-sigs/gateway-api-inference-extension/pull/550"))
def lora_budget(ctx: RuleContext) -> Iterator[Emit]:
    t = ctx.totals
    if not ctx.flags.enable_lora or t is None or t.kv_budget_bytes is None or not t.kv_budget_error_bytes:
        return
    yield Emit(f"--enable-lora: the estimated KV budget ({t.kv_budget_bytes / 2**30:.2f} GiB, +/- "
               f"{t.kv_budget_error_bytes / 2**30:.2f} GiB) has no LoRA term; vLLM profiles with dummy adapters and "
               "will report less KV memory.")


LAYOUT_REFERENCE = "layout_reference"
"""The `globals` key of the `LayoutReference` the planner computes for KV503."""
MATERIAL_LAYOUT_LOSS = 0.05  # KV503 fires when the page padding costs at least this share of the tokens


@dataclass(frozen=True)
class LayoutReference:
    """The same plan laid out with one page size: without --kv-cache-dtype-skip-layers, MTP layers at the model's
    KV cache dtype (the planner computes it for KV503)."""

    tokens_capacity: int
    """The tokens vLLM's layout holds for the same budget."""
    ideal_bytes_per_request: int
    """One request's bytes at --max-model-len without page padding (the layers' own bytes)."""
    block_size: int
    groups: int
    reference: str
    """What the reference changes, as the finding words it ("without the skip list", ...)."""


@declare(code="KV503", name="mixed-pages-inflate-layout", severity="warning", family="memory",
         summary="Skip layers or MTP layers with a larger page make vLLM pad every page: materially fewer tokens.",
         why="vLLM lays every KV cache out in pages of one size (unify_kv_cache_spec_page_size): a skipped layer "
             "keeps the model dtype (as do MTP layers given another kv_cache_dtype in --speculative-config), so "
             "its page is larger than the quantized layers' (2x for fp8 next to bfloat16); the smaller attention "
             "pages take proportionally larger blocks, every state page of a hybrid model is padded to the larger "
             "page, and the layers split into more KV cache groups. The pool then holds fewer tokens than those "
             "layers' own bytes explain (Qwen3.5-27B, fp8, skip layer 3: 241,745 tokens at 10 GiB instead of "
             "283,989 without the skip list, checked against vLLM 0.33).",
         fix="Skip none of these layers (keep the MTP layers at --kv-cache-dtype), or use a --kv-cache-dtype whose "
             "page matches theirs. Skipping every full-attention layer restores one page size but stores all of "
             "them in the model dtype (Qwen3.5-27B: 151,460 tokens): compare the plans.",
         references=("vllm/v1/core/kv_cache_planning.py::unify_kv_cache_spec_page_size",
                     "vllm/v1/core/kv_cache_planning.py::_get_kv_cache_groups_uniform_page_size",
                     "vllm/platforms/interface.py::Platform._align_heterogeneous_kv_block_size"))
def mixed_pages_inflate_layout(ctx: RuleContext) -> Iterator[Emit]:
    t, ref = ctx.totals, ctx.globals.get(LAYOUT_REFERENCE)
    if t is None or not isinstance(ref, LayoutReference) or not t.tokens_capacity or t.kv_cache_layout is None:
        return
    drafts = t.draft.layers if t.draft is not None else []
    ideal = sum(lp.max_bytes_per_request or 0 for lp in [*ctx.layers, *drafts])
    if not ideal:
        return
    expected = ref.tokens_capacity * ref.ideal_bytes_per_request / ideal  # those layers' own bytes, no padding
    lost = expected - t.tokens_capacity
    if lost < MATERIAL_LAYOUT_LOSS * expected:
        return
    g, mtp = ctx.kv_cache_dtype, t.draft is not None and t.draft.method == "mtp"
    odd = tuple(lp.index for lp in [*ctx.layers, *drafts]
                if lp.bytes_per_token and (lp.skipped or (mtp and lp in drafts and lp.kv_cache_dtype != g)))
    lay = t.kv_cache_layout
    drop = 1 - t.tokens_capacity / ref.tokens_capacity
    block = f"block size {ref.block_size} -> {lay.block_size}, " if lay.block_size != ref.block_size else ""
    yield Emit(f"{len(odd)} layer(s) keep a larger page than the {g} layers: vLLM pads every page to the largest "
               f"({block}{ref.groups} -> {len(lay.groups)} KV cache groups) and holds {t.tokens_capacity:,} tokens "
               f"instead of {ref.tokens_capacity:,} {ref.reference} ({drop:.1%} fewer); those layers' own bytes "
               f"explain about {round(expected):,}, the padding costs {round(lost):,} tokens ({lost / expected:.1%}).",
               odd)


# SpeculativeConfig.use_eagle: the methods whose drafter reads the target's hidden states.
_EAGLE_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")


def _method(ctx: RuleContext) -> str:
    t = ctx.totals
    if t is not None and t.draft is not None:
        return t.draft.method
    m = (ctx.flags.speculative_method or "").lower()
    return "mtp" if m.endswith("_mtp") else m


LAYOUT_REFUSAL = "layout_refusal"
"""The `globals` key of (layers, vLLM's message) where vLLM raises while laying the KV cache out (KV504)."""


@declare(code="KV504", name="kv-cache-layout-refused", severity="error", family="memory",
         summary="vLLM refuses to start: it cannot lay out this KV cache (pages, or the hybrid manager forced on).",
         why="vLLM lays every KV cache out in pages of one size (unify_kv_cache_spec_page_size): a smaller page "
             "takes a larger block when it divides the largest, else it is padded, which MLA pages cannot be "
             "(sparse MLA indexes whole token rows); unless MLA sits next to regular sliding-window layers only "
             "(then they are allocated as full attention), vLLM raises 'Layer <name>: page size is not divisible "
             "by the maximum page size and cannot be padded'. Separately, VllmConfig.__post_init__ turns the hybrid "
             "KV cache manager off for chunked local attention (Llama 4) with an EAGLE-family draft (eagle, "
             "eagle3, mtp, dflash, dspark) and raises when --enable-hybrid-kv-cache-manager asked for it. And with "
             "--disable-hybrid-kv-cache-manager a model with state layers (Mamba, gated delta nets, linear "
             "attention) cannot have its caches promoted to one type: 'Failed to promote local KV cache specs to one "
             "unified type.'",
         fix="For pages: make the MLA pages divide the largest (the same --kv-cache-dtype for every layer, no skip "
             "list, a draft at the target's dtype). For the manager: omit --enable-hybrid-kv-cache-manager (vLLM "
             "then allocates the chunked layers as full attention), or drop the EAGLE-family draft; a hybrid "
             "state model needs the hybrid manager: drop --disable-hybrid-kv-cache-manager (or a KV connector "
             "that turns it off).",
         references=("vllm/v1/core/kv_cache_planning.py::unify_kv_cache_spec_page_size",
                     "vllm/v1/core/kv_cache_planning.py::get_kv_cache_groups",
                     "vllm/config/vllm.py::VllmConfig.__post_init__",
                     "vllm/v1/core/kv_cache_planning.py::_promote_local_kv_cache_specs"))
def layout_refused(ctx: RuleContext) -> Iterator[Emit]:
    refusal = ctx.globals.get(LAYOUT_REFUSAL)
    if refusal is not None:
        layers, message = refusal
        yield Emit(f"vLLM raises while laying out the KV cache: \"{message}\" and refuses to start.", tuple(layers))
    f = ctx.flags
    if f.disable_hybrid_kv_cache_manager is not False or f.num_speculative_tokens <= 0:
        return
    chunked = tuple(lp.index for lp in ctx.layers if lp.kind == "chunked_attention")
    method = _method(ctx)
    if chunked and method in _EAGLE_METHODS:
        yield Emit(f"{len(chunked)} chunked local attention layer(s) and a {method} draft: vLLM raises \"Hybrid KV "
                   "cache manager was explicitly enabled but is not supported in this configuration. Consider "
                   "omitting the --enable-hybrid-kv-cache-manager flag to let vLLM decide automatically.\" and "
                   "refuses to start.", chunked)
