"""Per-layer attention backend selection on the target GPU (vLLM 0.33 capability tables).

Each layer is selected with its OWN kv_cache_dtype, as vLLM does, so skipped and quantized
layers can land on different backends. Needs --gpu; without it these rules stay silent.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kvplan.model.arch import LayerArch
from kvplan.model.plan import LayerPlan
from kvplan.model.vocab import NO_KV_KINDS, QuantMode, Severity
from kvplan.rules.base import Emit, declare
from kvplan.rules.context import RuleContext
from kvplan.rules.state import LayerState, Set, decides_layer

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.backends.select import BackendChoice, BackendRequest

_ATTN_TYPE: dict[str, Literal["encoder_decoder", "encoder_only"]] = {
    "cross_attention": "encoder_decoder", "encoder_only": "encoder_only"}
_MODEL_DTYPES: dict[str, Literal["bfloat16", "float16", "float32"]] = {
    "bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


def _request(ctx: RuleContext, la: LayerArch, kv_cache_dtype: str) -> BackendRequest:
    from kvplan.backends.select import BackendRequest
    mla = la.mla
    per_head = (ctx.quant.ct_kv_cache_scheme or {}).get("strategy") == "attn_head"
    return BackendRequest(
        head_size=la.head_size or 0, head_size_v=None if la.kind == "mla" else la.head_size_v,
        kv_cache_dtype=kv_cache_dtype,
        model_dtype=_MODEL_DTYPES.get(ctx.model_dtype, "bfloat16"),
        use_mla=la.kind == "mla", use_sparse=bool(mla and mla.index_topk), has_sinks=la.has_sinks,
        has_sliding_window=la.sliding_window is not None, attn_type=_ATTN_TYPE.get(la.kind, "decoder"),
        use_per_head_quant_scales=per_head and la.kind != "mla", num_heads=la.num_heads,
        num_kv_heads=la.num_kv_heads, block_size=ctx.flags.block_size,
        kv_lora_rank=mla.kv_lora_rank if mla else None, qk_rope_head_dim=mla.qk_rope_head_dim if mla else None,
        qk_nope_head_dim=mla.qk_nope_head_dim if mla else None, v_head_dim=mla.v_head_dim if mla else None,
        index_topk=mla.index_topk if mla else None)


_GEMMA4_CONFIG = ("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration")
"""Architectures vLLM maps to Gemma4Config (vllm/model_executor/models/config.py::MODELS_CONFIG_MAP)."""


def model_attention_config(ctx: RuleContext) -> tuple[str | None, dict[str, Any], str | None]:
    """(forced backend, attention config, why) after the model class's verify_and_update_config, which runs before
    any layer asks for a backend: Gemma4Config, for Gemma 4's mixed head sizes (256 sliding, 512 full), sets
    flash_attn_version 4 where FA4 runs, else forces TRITON_ATTN (ENGINE_FEATURES gemma4_*). `why` is None
    where the model class changes nothing."""
    forced, ac = ctx.flags.attention_backend, dict(ctx.flags.attention_config)
    gpu = ctx.gpu.profile if ctx.gpu is not None else None
    heads = {la.head_size for la in ctx.arch.layers if la.kind not in NO_KV_KINDS and la.head_size}
    if ctx.arch.architecture not in _GEMMA4_CONFIG or gpu is None or len(heads) <= 1:
        return forced, ac, None
    from kvplan.backends.impl.flash_attn import fa4_available, leaves_fa_version_open
    chosen = forced or ac.get("backend")
    mixed = f"Gemma4Config: head sizes {sorted(heads)} differ"
    if ctx.engine_has("gemma4_triton_for_mixed_heads"):
        if max(heads) > 256 and chosen is None:
            return "TRITON_ATTN", ac, f"{mixed} and exceed 256: TRITON_ATTN for every layer"
        return forced, ac, None
    if not ctx.engine_has("gemma4_fa4_for_mixed_heads"):
        return forced, ac, None
    if fa4_available(gpu) and max(heads) <= 512:
        if ac.get("flash_attn_version") is not None or not leaves_fa_version_open(chosen):
            return forced, ac, None
        if (gpu.cc_major == 9 and ctx.kv_cache_dtype.startswith("fp8")
                and ctx.engine_has("gemma4_sm90_fp8_per_layer_fa")):
            return forced, ac, None  # SM90 with an fp8 cache: per-layer FA3/FA4
        return forced, {**ac, "flash_attn_version": 4}, f"{mixed}: FA4 for every layer"
    if chosen is None:
        return "TRITON_ATTN", ac, f"{mixed} and FA4 does not run on {gpu.display_name}: TRITON_ATTN for every layer"
    return forced, ac, None


@dataclass(frozen=True)
class ModelClassBackend:
    """One row of MODEL_CLASS_BACKENDS: the backend a model class hands some of its layers itself, past the
    selector (the priority walk never reaches them; `--attention-backend` only where a row names it)."""

    architectures: tuple[str, ...]
    """The vLLM architectures (config.json `architectures`) whose model class does it."""
    backend: str
    """The backend's get_name(), as vLLM logs the layer's backend."""
    layers: str
    """Which attention layers: 'all', 'dsv4' (DeepSeek-V4's attention layers), 'cache:NAME' (the layers that
    register the further cache NAME, as kvplan.ingest reads the checkpoint: ExtraCache.name), or 'no-cache:NAME'
    (those that do not)."""
    impl_checks: bool
    """vLLM builds the backend's own impl for the layer (Attention(attn_backend=...) of a registered backend):
    its construction errors, logs and query dtype apply (kvplan.backends.select.build_pinned_backend). False:
    the layer runs the model's own kernels; its refusals are the model's (KV504, planner/model_caches)."""
    source: str
    """vLLM file::function that makes the choice."""
    platforms: tuple[str, ...] = ("cuda", "rocm", "cpu", "xpu")
    """Platforms whose model code makes this choice (elsewhere another row, or the selector)."""
    cc_majors: tuple[int, ...] = ()
    """CUDA compute-capability majors it is limited to (empty: any)."""
    forced: tuple[str, ...] = ()
    """Backend names of `--attention-backend` (attention_config.backend) it is limited to (empty: any)."""
    error: str = ""
    """The model class refuses instead (ValueError while building the model; `{forced}` is the named backend)."""

    def takes(self, la: LayerArch) -> bool:
        if self.layers == "all":
            return True
        if self.layers == "dsv4":
            return la.dsv4_compress_ratio is not None
        want, _, name = self.layers.partition(":")
        has = any(x.name == name for x in la.extra_caches)
        return has if want == "cache" else not has

    def holds(self, platform: str, cc_major: int | None, forced: str | None) -> bool:
        return (platform in self.platforms and (not self.cc_majors or cc_major in self.cc_majors)
                and (not self.forced or forced in self.forced))


_STEP5 = ("Step5ForCausalLM", "Step5ForConditionalGeneration")
_INKLING = ("InklingForCausalLM", "InklingForConditionalGeneration")
_MINIMAX_M3 = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")
_GLM5_NEXT = ("Glm5NextForCausalLM", "Glm5NextForConditionalGeneration")
_DSV4 = ("DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration")
_DSV4_SOURCE = ("vllm/models/deepseek_v4/nvidia/model.py::_select_dsv4_attn_cls "
                "(attention.py::DeepseekV4Attention.get_attn_backend)")

MODEL_CLASS_BACKENDS: tuple[ModelClassBackend, ...] = (
    # use_dsa_backend = sparse_config is not None and sliding_window is None: the DSA layers (kvplan.ingest
    # gives exactly them the CSA tail ring) run Step5DSAAttentionBackend
    ModelClassBackend(_STEP5, "STEP5_DSA", "cache:CSA tail ring", False,
                      "vllm/models/step5/nvidia/model.py::Step5Attention.__init__ (Step5DSAAttentionBackend)"),
    # every other layer pins Step5SplitKVFlashAttentionBackend, which keeps FlashAttentionBackend.get_name()
    # and builds a FlashAttentionImpl subclass
    ModelClassBackend(_STEP5, "FLASH_ATTN", "no-cache:CSA tail ring", True,
                      "vllm/models/step5/nvidia/model.py::Step5Attention.__init__ "
                      "(sparse_attention.py::Step5SplitKVFlashAttentionBackend)"),
    # InklingAttention is an AttentionLayerBase of its own (FA4 relative-attention kernel): no impl is built
    ModelClassBackend(_INKLING, "FLASH_ATTN", "all", False,
                      "vllm/models/inkling/nvidia/attention.py::InklingAttention.get_attn_backend "
                      "(amd/attention.py the same)"),
    # the sparse layers (sparse_attention_freq != 0; those with the index-key cache) take the backend of
    # select_main_backend_and_impl_cls, whose classes all keep MiniMaxM3SparseBackend.get_name(); the dense
    # layers are plain Attention layers (the selector)
    ModelClassBackend(_MINIMAX_M3, "MINIMAX_M3_SPARSE", "cache:index keys", False,
                      "vllm/models/minimax_m3/nvidia/model.py::MiniMaxM3SparseAttention.get_attn_backend "
                      "(common/sparse_attention.py::select_main_backend_and_impl_cls)"),
    # DeepSeek-V4's attention class is picked on CUDA by _select_dsv4_attn_cls, never by the selector: the
    # FlashInfer class where --attention-backend names FLASHINFER_MLA_SPARSE_DSV4, the FlashMLA one where it names
    # FLASHMLA_SPARSE(_DSV4); otherwise FlashInfer on SM12x, FlashMLA elsewhere (the layer's get_attn_backend is
    # the class's backend_cls)
    ModelClassBackend(_DSV4, "", "dsv4", False, _DSV4_SOURCE, platforms=("cuda",),
                      forced=("FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120"),
                      error="{forced} is not a DeepSeek V4 attention backend. Use FLASHINFER_MLA_SPARSE_DSV4 for "
                            "DeepSeek V4 FlashInfer sparse MLA."),
    ModelClassBackend(_DSV4, "FLASHINFER_MLA_SPARSE_DSV4", "dsv4", False, _DSV4_SOURCE, platforms=("cuda",),
                      forced=("FLASHINFER_MLA_SPARSE_DSV4",)),
    ModelClassBackend(_DSV4, "FLASHMLA_SPARSE_DSV4", "dsv4", False, _DSV4_SOURCE, platforms=("cuda",),
                      forced=("FLASHMLA_SPARSE", "FLASHMLA_SPARSE_DSV4")),
    ModelClassBackend(_DSV4, "FLASHINFER_MLA_SPARSE_DSV4", "dsv4", False, _DSV4_SOURCE, platforms=("cuda",),
                      cc_majors=(12,)),
    ModelClassBackend(_DSV4, "FLASHMLA_SPARSE_DSV4", "dsv4", False, _DSV4_SOURCE, platforms=("cuda",)),
)
"""Backends model classes give their attention layers past vLLM's selector (vLLM 0.33.0 and 0.34.0, read in
both wheels). A layer no row takes is selected (rule KV140's walk)."""

FURTHER_CACHE_BACKENDS: dict[tuple[tuple[str, ...], str], tuple[str, str]] = {
    (_STEP5, "CSA tail ring"): ("STEP5_CSA_TAIL_RING",
                                "vllm/models/step5/nvidia/csa_tail_ring.py::Step5CSATailRing.get_attn_backend"),
    (_STEP5, "sparse region summaries"): (
        "STEP5_CSA_SUMMARY",
        "vllm/models/step5/nvidia/sparse_summary_cache.py::Step5SparseSummaryCacheLayer.get_attn_backend"),
    (_INKLING, "short-conv state"): ("INKLING_SCONV_SWA",
                                     "vllm/models/inkling/nvidia/sconv_swa_attn.py::InklingConvState.get_attn_backend"),
    (_MINIMAX_M3, "index keys"): ("MINIMAX_M3_SPARSE_INDEXER",
                                  "vllm/models/minimax_m3/common/indexer.py::MiniMaxM3IndexerCache.get_attn_backend"),
    (_GLM5_NEXT, "indexer keys"): (
        "DEEPSEEK_V32_INDEXER",
        "vllm/models/glm5next/common/attention.py::Glm5NextIndexerCache.get_attn_backend (Glm5NextIndexerBackend)"),
    (_GLM5_NEXT, "indexer tail ring"): (
        "KPOOL_TAIL", "vllm/models/glm5next/common/attention.py::Glm5NextTailCache.get_attn_backend"),
}
"""The backends of the caches a layer registers next to its attention (ExtraCache, by architecture and name):
each is an AttentionLayerBase module of its own with its own get_attn_backend and KV cache spec and no attention
impl, so vLLM lists them among the model's backends while the layer's attention keeps its own. A sparse-MLA
layer's indexer keys (DeepSeek-V3.2, GLM-5) are DEEPSEEK_V32_INDEXER
(vllm/model_executor/models/deepseek_v2.py::DeepseekV32IndexerCache.get_attn_backend)."""

SPARSE_MLA_INDEXER_BACKEND = "DEEPSEEK_V32_INDEXER"


def _dsv4_cache_backends(ratio: int) -> list[str]:
    """DeepseekV4Attention.__init__ (vllm/models/deepseek_v4/attention.py): every layer's sliding-window cache
    (DeepseekV4SWACache: DEEPSEEK_SPARSE_SWA, v1/attention/backends/mla/sparse_swa.py), a compressor's state
    where compress_ratio > 1 (compressor.py::CompressorBackend), an indexer where it is 4
    (v1/attention/backends/mla/indexer.py: DEEPSEEK_V4_INDEXER)."""
    return ["DEEPSEEK_SPARSE_SWA", *(["CompressorBackend"] if ratio > 1 else []),
            *(["DEEPSEEK_V4_INDEXER"] if ratio == 4 else [])]


def model_class_backend(ctx: RuleContext, la: LayerArch) -> ModelClassBackend | None:
    """The first MODEL_CLASS_BACKENDS row that gives this layer its backend on ctx's GPU, or None (the selector
    does)."""
    gpu = ctx.gpu.profile if ctx.gpu is not None else None
    if gpu is None:
        return None
    forced = _forced_backend(ctx)
    return next((r for r in MODEL_CLASS_BACKENDS if ctx.arch.architecture in r.architectures and r.takes(la)
                 and r.holds(gpu.platform, gpu.cc_major, forced)), None)


def _forced_backend(ctx: RuleContext) -> str | None:
    """The backend `--attention-backend` (attention_config.backend) names, as vLLM's enum spells it."""
    forced = ctx.flags.attention_backend or ctx.flags.attention_config.get("backend")
    return str(forced).strip().upper().removeprefix("ATTENTIONBACKENDENUM.") if forced else None


def further_cache_backends(arch: str | None, la: LayerArch) -> tuple[str, ...]:
    """The backends of the caches the layer registers next to its attention (FURTHER_CACHE_BACKENDS), in
    the layer's order; a sparse-MLA indexer's too."""
    out = [b for x in la.extra_caches for (archs, name), (b, _) in FURTHER_CACHE_BACKENDS.items()
           if arch in archs and x.name == name]
    if la.dsv4_compress_ratio is not None and arch in _DSV4:
        out += _dsv4_cache_backends(la.dsv4_compress_ratio)
    if la.kind == "mla" and la.indexer_bytes_per_token and not la.extra_caches:
        out.append(SPARSE_MLA_INDEXER_BACKEND)
    return tuple(dict.fromkeys(out))


def _global_dtype_queries(ctx: RuleContext, backend: str | None) -> bool:
    """The chosen backend takes a skipped layer's query dtype from the global cache dtype (pre-#39002)."""
    if backend is None or not ctx.engine_has("flashinfer_skip_layer_query_dtype_crash"):
        return False
    from kvplan.backends.impl import hooks_for
    from kvplan.backends.vllm_rows import BACKENDS
    # a model's own backend (MODEL_CLASS_BACKENDS: STEP5_DSA, ...) is no registry backend with hooks
    return backend in BACKENDS and hooks_for(backend).global_dtype_queries_before_39002


def _choice(ctx: RuleContext, la: LayerArch, kv_cache_dtype: str) -> BackendChoice:
    """select_backend for this layer, memoised on what selection reads (layers repeat a lot)."""
    global _LAST
    assert ctx.gpu is not None, "backend rules run only with --gpu"
    if _LAST[0] is not ctx:  # the context part of the key, computed once per rule context
        config = model_attention_config(ctx)
        forced, ac, _ = config
        ctx_key = (ctx.model_dtype, (ctx.quant.ct_kv_cache_scheme or {}).get("strategy"), ctx.flags.block_size,
                   forced, tuple(sorted((k, str(v)) for k, v in ac.items())), ctx.gpu.profile, ctx.engine)
        if len(_CHOICES) > 512:
            _CHOICES.clear()
        _LAST = (ctx, _CHOICES.setdefault(ctx_key, {}), config)
    memo = _LAST[1]
    mla = la.mla
    row = model_class_backend(ctx, la)
    key = (la.kind, la.head_size, la.head_size_v, la.num_heads, la.num_kv_heads,
           la.sliding_window is not None, la.has_sinks,
           (mla.kv_lora_rank, mla.qk_rope_head_dim, mla.qk_nope_head_dim, mla.v_head_dim, mla.index_topk)
           if mla else None, kv_cache_dtype, row)
    hit = memo.get(key)
    if hit is None:
        from kvplan.backends.select import build_pinned_backend, select_backend
        assert ctx.gpu is not None and ctx.gpu.profile is not None  # callers return early without a GPU profile
        forced, ac, _ = _LAST[2]
        req = _request(ctx, la, kv_cache_dtype)
        if row is None:
            hit = select_backend(req, ctx.gpu.profile, ctx.engine, forced, ac)
        elif row.impl_checks:
            hit = build_pinned_backend(req, ctx.gpu.profile, row.backend, ctx.engine, ac)
        else:
            hit = _model_kernel_choice(row, kv_cache_dtype, ctx)
        memo[key] = hit
    return hit


def _model_kernel_choice(row: ModelClassBackend, kv_cache_dtype: str, ctx: RuleContext) -> BackendChoice:
    """A backend whose layer runs the model's own kernels: named, with no impl of vLLM's registry to ask
    about block sizes, query dtypes or construction errors (the model's refusals are KV504's); or the model
    class's refusal of the backend named (row.error)."""
    from kvplan.backends.select import BackendChoice
    base: dict[str, Any] = {"kv_cache_dtype": kv_cache_dtype, "effective_kv_cache_dtype": kv_cache_dtype,
                            "engine": str(ctx.engine), "forced": True}
    if row.error:
        return BackendChoice(**base, status="error", backend=None, error_stage="impl", error_type="ValueError",
                             error=row.error.format(forced=_forced_backend(ctx)))
    return BackendChoice(**base, status="selected", backend=row.backend, candidates=(row.backend,))


def backend_choice(ctx: RuleContext, la: LayerArch, kv_cache_dtype: str) -> BackendChoice:
    """The backend choice of one layer on ctx's GPU (the planner reads its block size for the layout)."""
    return _choice(ctx, la, kv_cache_dtype)


_CHOICES: dict[tuple[Any, ...], dict[tuple[Any, ...], BackendChoice]] = {}
# Config-time errors that GPU-independent rules already report (with or without --gpu):
# a dtype the release lacks (KV005), float16/bfloat16 != model dtype (KV201), nvfp4 with MLA (KV202).
_CONFIG_ERRORS_OF_OTHER_RULES = ("Invalid kv_cache_dtype", 'kv_cache_dtype="',
                                 "nvfp4 KV cache is not supported with MLA")
_LAST: tuple[RuleContext | None, dict[tuple[Any, ...], BackendChoice],
             tuple[str | None, dict[str, Any], str | None]] = (None, {}, (None, {}, None))
"""The last rule context, its memo of choices and its model-class attention config (model_attention_config)."""


def _backend_fact(ctx: RuleContext, la: LayerArch, kv_cache_dtype: str, backend: str) -> str:
    """Why the layer runs `backend`: the model class's own choice (MODEL_CLASS_BACKENDS), or the selector's
    walk; with the backends of the caches the layer registers next to its attention."""
    assert ctx.gpu is not None
    row = model_class_backend(ctx, la)
    if row is not None:
        fact = f"the model class chooses {backend} for this layer, past the selector ({row.source})"
    else:
        why = (_LAST[2] if _LAST[0] is ctx else model_attention_config(ctx))[2]
        fact = (f"first valid backend on {ctx.gpu.name} for kv dtype {kv_cache_dtype!r}"
                + (f" ({why})" if why else ""))
    caches = further_cache_backends(ctx.arch.architecture, la)
    return fact + (f"; its further caches run {', '.join(caches)}" if caches else "")


@declare(code="KV140", name="backend-selection", kind="decision", scope="layer", family="backend",
         severity="info", summary="Each KV layer gets the attention backend vLLM would select on the GPU.",
         why="vLLM selects a backend per layer with that layer's own KV dtype (skipped layers are "
             "re-selected with 'auto'), following the platform priority order and each backend's "
             "supported dtypes, compute capability, head sizes and features; some model classes hand layers "
             "a backend of their own past the selector (MODEL_CLASS_BACKENDS: Step 5, Inkling, MiniMax-M3, "
             "DeepSeek-V4).",
         fix="Pass --attention-backend to force one (validation still applies).",
         references=("vllm/v1/attention/selector.py::get_attn_backend", "vllm/platforms/cuda.py",
                     "vllm/model_executor/layers/attention/attention.py::Attention.__init__"))
@decides_layer("backend", "flash_attn_version", "query_dtype")
def backend_selection(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    if ctx.gpu is None or ctx.gpu.profile is None or la.kind in NO_KV_KINDS or st.kv_cache_dtype is None:
        return
    ch = _choice(ctx, la, st.kv_cache_dtype)
    if ch.backend:
        # `backend` is vLLM's enum name exactly; the FlashAttention version is a field of its own.
        yield Set("backend", ch.backend, _backend_fact(ctx, la, st.kv_cache_dtype, ch.backend))
        if ch.flash_attn_version:
            yield Set("flash_attn_version", ch.flash_attn_version,
                      f"get_flash_attn_version() on {ctx.gpu.name} for head size {la.head_size} and kv dtype "
                      f"{st.kv_cache_dtype!r}")
    q = ch.decode_query_dtype or ("float8_e4m3fn" if ch.query_quant else None)
    if _global_dtype_queries(ctx, ch.backend) and not ch.query_quant and ctx.kv_cache_dtype != st.kv_cache_dtype:
        # Before PR #39002 the FlashInfer builder took the query dtype from the GLOBAL cache dtype.
        from kvplan.backends.select import flashinfer_query_dtypes
        g = flashinfer_query_dtypes(ctx.gpu.profile, ctx.kv_cache_dtype, ch.decode_query_dtype or ctx.model_dtype,
                                    la.head_size or 128, ctx.flags.attention_config, has_sinks=la.has_sinks)
        if g.decode_query_dtype != q:
            yield Set("query_dtype", g.decode_query_dtype, f"vLLM {ctx.engine.version_str} predates PR #39002: "
                      f"FlashInfer uses the global kv dtype {ctx.kv_cache_dtype!r} for this skipped layer's queries")
            return
    if q:
        yield Set("query_dtype", str(q),
                  "query quantized to FP8 for this layer" if ch.query_quant else "backend query dtype")


@declare(code="KV701", name="no-valid-backend", severity="error", family="backend",
         summary="vLLM would fail to build this layer's attention on the GPU (no valid backend or an impl error).",
         why="Backend selection and construction errors (FP8 on Triton below SM89, FlashAttention FP8 outside "
             "FA3/FA4, per-head scales without FA3, no MLA backend for a dtype, ...) stop the engine after "
             "minutes of loading.",
         fix="Change --kv-cache-dtype, the GPU, or --attention-backend as the message says.",
         references=("vllm/v1/attention/selector.py", "vllm/v1/attention/backends/"))
def no_backend(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.gpu is None or ctx.gpu.profile is None:
        return
    errors: dict[str, list[int]] = {}
    for lp in ctx.layers:
        la = ctx.arch_layer(lp.index)
        if la is None or lp.kv_cache_dtype is None or lp.kind in NO_KV_KINDS:
            continue
        ch = _choice(ctx, la, lp.kv_cache_dtype)
        if ch.status == "error" and ch.error and not (ch.error_stage == "config" and ch.error.startswith(
                _CONFIG_ERRORS_OF_OTHER_RULES)):
            errors.setdefault(ch.error, []).append(lp.index)
    for msg, layers in errors.items():
        yield Emit(f"{msg} ({len(layers)} layer(s) on {ctx.gpu.name})", tuple(layers))


def _asked_kv_cache_dtype(ctx: RuleContext, lp: LayerPlan) -> str:
    """The cache dtype the layer's backend was selected with: before rule KV121 made the sparse backend's
    fp8_ds_mla of it (vLLM logs that rewrite: "Using fp8_ds_mla KV cache format for ... backend.")."""
    assert lp.kv_cache_dtype is not None
    decided = [d for d in lp.decisions if d.field == "kv_cache_dtype"]
    if not decided or decided[-1].rule != "KV121":
        return lp.kv_cache_dtype
    return str(decided[-2].value) if len(decided) > 1 else ctx.kv_cache_dtype


@declare(code="KV702", name="backend-note", severity="warning", family="backend",
         summary="The backend will do something you did not ask for (fallback, format change, assertion risk).",
         why="vLLM logs these at startup or fails at the first forward: FA4 falling back to FA2, e5m2 stored "
             "as e4m3 on Triton, sparse-MLA dtype canonicalisation, query-quantization assertions.",
         fix="Read the note; pick another --kv-cache-dtype or --attention-backend if it matters.",
         references=("vllm/v1/attention/backends/fa_utils.py", "vllm/v1/attention/backends/triton_attn.py"))
def backend_notes(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.gpu is None or ctx.gpu.profile is None:
        return
    notes: dict[str, list[int]] = {}
    for lp in ctx.layers:
        la = ctx.arch_layer(lp.index)
        if la is None or lp.kv_cache_dtype is None or lp.kind in NO_KV_KINDS:
            continue
        ch = _choice(ctx, la, _asked_kv_cache_dtype(ctx, lp))
        pre_39002 = _global_dtype_queries(ctx, ch.backend) and lp.kv_cache_dtype != ctx.kv_cache_dtype
        if ch.status != "error" or ch.error_stage in ("impl", "builder", "forward"):
            # a chosen backend logs its notes before its impl/builder/forward error (e.g. FA4 -> FA2)
            for n in ch.notes:
                if pre_39002 and n.startswith("FlashInfer resolved"):
                    continue  # that per-group log line is PR #39002's; before it the global dtype rules
                notes.setdefault(n, []).append(lp.index)
    for msg, layers in {**notes, **_unreached_forced_backend(ctx)}.items():
        yield Emit(msg, tuple(layers), severity=Severity.info if msg.startswith("FlashInfer resolved") else None)


def _unreached_forced_backend(ctx: RuleContext) -> dict[str, list[int]]:
    """Layers `--attention-backend` does not reach: their model class gives them a backend of its own whatever
    the flag names (MODEL_CLASS_BACKENDS rows not limited to named backends)."""
    forced = _forced_backend(ctx)
    out: dict[str, list[int]] = {}
    if forced is None:
        return out
    for lp in ctx.layers:
        la = ctx.arch_layer(lp.index)
        row = model_class_backend(ctx, la) if la is not None and lp.kind not in NO_KV_KINDS else None
        if row is not None and not row.forced and row.backend != forced:
            out.setdefault(f"--attention-backend {forced} does not reach these layers: the model class gives them "
                           f"{row.backend} ({row.source}).", []).append(lp.index)
    return out


@declare(code="KV703", name="fp8-prefill-query", severity="info", family="backend",
         summary="FP8 prefill queries for MLA on Blackwell: vLLM's decision, and whether to enable it.",
         why="With a quantized KV cache on SM100, FP8 prefill attention speeds long prompts (ISL >= 4K, "
             "up to ~1.28x) but regresses ~20% near 1K tokens (vLLM PR #31195), so it is off by default; "
             "the flag is silently ignored when the default prefill backend (FLASH_ATTN) cannot use it.",
         fix="Paste the --attention-config the message gives when your prompts are long.",
         references=("https://github.com/vllm-project/vllm/pull/39752", "https://github.com/vllm-project/vllm/pull/31195"))
def prefill_advice(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.gpu is None or ctx.gpu.profile is None or not ctx.arch.uses_mla:
        return
    from kvplan.backends.select import MlaDims, prefill_query_advice
    la = next(la for la in ctx.arch.layers if la.kind == "mla")
    m = la.mla
    assert m is not None, "an MLA layer has its MLA dimensions"
    dims = MlaDims(qk_nope_head_dim=m.qk_nope_head_dim, qk_rope_head_dim=m.qk_rope_head_dim,
                   v_head_dim=m.v_head_dim, kv_lora_rank=m.kv_lora_rank)
    quantized = any(lp.quant_mode is not QuantMode.none for lp in ctx.layers if lp.kind == "mla")
    adv = prefill_query_advice(ctx.gpu.profile, ctx.kv_cache_dtype if quantized else "auto", dims,
                               ctx.flags.attention_config, ctx.engine, None, model_dtype=ctx.model_dtype)
    if adv.recommendation == "not_applicable" and not adv.flag_silently_ignored:
        return
    msg = adv.explanation
    if adv.attention_config_flag:
        msg += f" To enable: {adv.attention_config_flag}"
    sev = Severity.warning if adv.flag_silently_ignored else Severity.info
    yield Emit(msg, severity=sev, fix=adv.attention_config_flag or None)
