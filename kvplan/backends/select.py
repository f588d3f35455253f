"""vLLM 0.33's attention-backend selection for one layer: the priority walk and the shared validation.

`select_backend` follows `vllm/v1/attention/selector.py::get_attn_backend` ->
`Platform.get_attn_backend_cls`: walk the platform priority list, validate each candidate
(`validate_backend`, vLLM's `AttentionBackend.validate_configuration`), take the first valid one; a
forced backend bypasses the priority list but not validation. It then applies the errors the chosen
backend's impl/builder raises at construction (and the first-forward errors that follow
deterministically from config), and reports the query dtype the layer would get.

What differs between backends is asked of that backend's hooks (:mod:`kvplan.backends.impl`), never
decided here by name. Reason strings for the generic checks are vLLM's own (`"head_size not
supported"`, ...). The advice functions live in :mod:`kvplan.backends.advice` and are re-exported
here. No torch import.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from kvplan.backends.advice import (
    FlashInferQueryDtypes,
    Fp8FormatNotes,
    PrefillQueryAdvice,
    flashinfer_group_query_dtype_crash,
    flashinfer_query_dtypes,
    mla_prefill_backend,
    prefill_query_advice,
    rocm_fp8_notes,
)
from kvplan.backends.capabilities import BackendCapability, EngineVersion
from kvplan.backends.defaults import default_block_size
from kvplan.backends.engines import MODELLED_VLLM_VERSIONS, backends_of, kv_cache_dtypes_for
from kvplan.backends.impl import hooks_for
from kvplan.backends.impl.base import BackendHooks, Site, rocm_arch
from kvplan.backends.impl.flash_attn import flash_attn_version
from kvplan.backends.request import BackendChoice, BackendRequest, ErrorStage
from kvplan.backends.vllm_rows import BACKENDS, cpu_priority, cuda_priority, engine_feature, rocm_priority
from kvplan.errors import KvplanInputError
from kvplan.model.arch import MlaDims
from kvplan.model.gpu import GpuProfile
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES, QuantMode

__all__ = [
    "BackendChoice",
    "BackendRequest",
    "FlashInferQueryDtypes",
    "Fp8FormatNotes",
    "MlaDims",
    "PrefillQueryAdvice",
    "attention_kind",
    "flash_attn_version",
    "flashinfer_group_query_dtype_crash",
    "flashinfer_query_dtypes",
    "hardware_reasons",
    "mla_prefill_backend",
    "prefill_query_advice",
    "rocm_fp8_notes",
    "select_backend",
    "validate_backend",
]


def attention_kind(req: BackendRequest) -> str:
    """`attention_config.backend_per_kind` key for the layer (§5.1)."""
    if req.use_mla:
        return "sliding_window_mla" if req.has_sliding_window else "mla_attention"
    if req.attn_type == "encoder_decoder":
        return "cross_attention"
    if req.attn_type in ("encoder", "encoder_only"):
        return "encoder_only_attention"
    return "sliding_window" if req.has_sliding_window else "full_attention"


# ============================================================================ validate_configuration
def _cc_ok(row: BackendCapability, gpu: GpuProfile, top: tuple[int, int] | bool | None = True) -> bool:
    """`supports_compute_capability` (`top`: the release's upper bound; True = the row's)."""
    if gpu.platform == "rocm":
        return row.rocm_archs is None or rocm_arch(gpu).startswith(row.rocm_archs)
    if gpu.platform != "cuda" or gpu.compute_capability is None:
        return True
    cc = gpu.compute_capability
    if row.min_compute_capability is not None and cc < row.min_compute_capability:
        return False
    top = row.max_compute_capability if top is True else top
    if isinstance(top, tuple) and cc > top:
        return False
    return row.cc_majors is None or cc[0] in row.cc_majors


def hardware_reasons(name: str, gpu: GpuProfile) -> list[str]:
    """Why a backend can never run on this device (platform / compute capability), [] if it can."""
    row = BACKENDS[name]
    if gpu.platform not in row.platforms:
        return [f"not available on the {gpu.platform} platform"]
    return [] if _cc_ok(row, gpu) else ["compute capability not supported"]


def _dtype_reasons(hooks: BackendHooks, req: BackendRequest, gpu: GpuProfile, ac: Mapping[str, Any],
                   engine: EngineVersion) -> list[str]:
    """head size, model dtype, kv cache dtype and block size."""
    row = hooks.row
    reasons: list[str] = []
    if not hooks.head_size_ok(req, gpu, engine):
        reasons.append("head_size not supported")
    if req.model_dtype not in hooks.model_dtypes(engine):
        reasons.append("dtype not supported")
    if req.kv_cache_dtype not in row.kv_cache_dtypes:
        reasons.append("kv_cache_dtype not supported")
    else:
        reasons.extend(hooks.kv_cache_dtype_reasons(req, gpu, ac, engine))
    if req.block_size is not None and not hooks.block_size_ok(req.block_size, gpu):
        reasons.append("block_size not supported")
    return reasons


def _feature_reasons(hooks: BackendHooks, req: BackendRequest, gpu: GpuProfile, ac: Mapping[str, Any],
                     engine: EngineVersion) -> list[str]:
    """MLA, sinks, sparse, per-head scales, compute capability, attention type, sliding window."""
    row = hooks.row
    reasons: list[str] = []
    if req.use_mla != row.use_mla:
        reasons.append("MLA not supported" if req.use_mla else "non-MLA not supported")
    if req.has_sinks and not hooks.supports_sinks(gpu, ac, engine):
        reasons.append("attention sinks not supported")
    if req.use_sparse != row.sparse:
        reasons.append("sparse not supported" if req.use_sparse else "non-sparse not supported")
    if req.use_per_head_quant_scales and not hooks.supports_per_head_quant_scales(gpu, ac):
        reasons.append("per-head quant scales not supported")
    if not _cc_ok(row, gpu, hooks.max_compute_capability(engine)):
        reasons.append("compute capability not supported")
    if req.attn_type not in row.attn_types:
        reasons.append(f"attention type {req.attn_type} not supported")
    if req.has_sliding_window and engine_feature("selector_sliding_window").holds_for(engine) \
            and not hooks.sliding_window_ok(engine):
        reasons.append("sliding window not supported")  # the selector asks about windows from 0.26
    return reasons


def validate_backend(name: str, req: BackendRequest, gpu: GpuProfile,
                     attention_config: Mapping[str, Any] | None = None,
                     engine: EngineVersion | None = None) -> list[str]:
    """vLLM's `validate_configuration` for one backend: the reasons it is invalid ([] = valid).

    Generic reasons use vLLM's exact strings, in vLLM's order; the backend's `supports_combination`
    reasons come last (those of the release, `engine`, default vllm==0.33.0, first).
    """
    ac = attention_config or {}
    engine = engine or EngineVersion()
    hooks = hooks_for(name)
    if gpu.platform not in hooks.row.platforms:
        return [f"not available on the {gpu.platform} platform"]
    return (_dtype_reasons(hooks, req, gpu, ac, engine) + _feature_reasons(hooks, req, gpu, ac, engine)
            + hooks.release_reasons(req, gpu, engine) + hooks.combination_reasons(req, gpu))


# ============================================================================ the walk
def _selector_config_repr(req: BackendRequest) -> str:
    # Field list approximates vLLM's AttentionSelectorConfig dataclass repr.
    torch_dtype = f"torch.{req.model_dtype}"
    return (f"AttentionSelectorConfig(head_size={req.head_size}, dtype={torch_dtype}, "
            f"kv_cache_dtype={req.kv_cache_dtype}, block_size={req.block_size}, "
            f"use_mla={req.use_mla}, has_sink={req.has_sinks}, use_sparse={req.use_sparse}, "
            f"use_mm_prefix=False, use_per_head_quant_scales={req.use_per_head_quant_scales}, "
            f"attn_type={req.attn_type}, has_sliding_window={req.has_sliding_window})")


def _fail(base: dict[str, Any], msg: str, stage: ErrorStage, etype: str) -> BackendChoice:
    return BackendChoice(**{**base, "status": "error", "error": msg, "error_stage": stage,
                            "error_type": etype})


def _forced_name(req: BackendRequest, forced: str | None, ac: Mapping[str, Any],
                 engine: EngineVersion) -> str | None:
    per_kind = ac.get("backend_per_kind") or {}
    name = per_kind.get(attention_kind(req)) or forced or ac.get("backend")
    if name is None:
        return None
    name = str(name).strip().upper()
    if name.startswith("ATTENTIONBACKENDENUM."):
        name = name.split(".", 1)[1]
    if name not in BACKENDS:
        close = difflib.get_close_matches(name, list(BACKENDS), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise KvplanInputError(
            f"unknown or unmodelled attention backend {name!r}.{hint}",
            f"pass one of: {', '.join(sorted(BACKENDS))} (see `kvplan backends`)")
    present = backends_of(engine)
    if present is not None and name not in present:
        raise KvplanInputError(
            f"attention backend {name} is not a backend of vLLM {engine.version_str} (its AttentionBackendEnum "
            "does not name it).",
            f"pass one of that release's backends (`kvplan backends --engine {engine}`) or a newer --engine")
    return name


def _priority(req: BackendRequest, gpu: GpuProfile, ac: Mapping[str, Any], engine: EngineVersion) -> tuple[str, ...]:
    """The platform's priority list, without the backends the release does not have (`backends_of`)."""
    present = backends_of(engine)
    return tuple(n for n in _platform_priority(req, gpu, ac) if present is None or n in present)


def _platform_priority(req: BackendRequest, gpu: GpuProfile, ac: Mapping[str, Any]) -> tuple[str, ...]:
    if gpu.platform == "cuda":
        return cuda_priority(gpu.cc_major or 0, use_mla=req.use_mla, use_sparse=req.use_sparse,
                             causal=req.attn_type == "decoder",
                             kv_quantized=req.quant_mode.is_quantized, num_heads=req.num_heads,
                             head_size=req.head_size)
    if gpu.platform == "rocm":
        return rocm_priority(use_mla=req.use_mla, use_sparse=req.use_sparse,
                             aiter=bool(ac.get("rocm_use_aiter", False)),
                             aiter_supported=rocm_arch(gpu).startswith(("gfx94", "gfx95")))
    return cpu_priority(use_mla=req.use_mla, amx="amx" in gpu.arch)


def _config_error(req: BackendRequest, gpu: GpuProfile, engine: EngineVersion) -> str | None:
    """Config-time errors that depend only on the dtype strings and the device (§1.1, §8)."""
    kv = req.kv_cache_dtype
    valid = kv_cache_dtypes_for(engine) or VLLM_033_KV_CACHE_DTYPES
    if kv not in valid:
        return f"Invalid kv_cache_dtype: {kv!r}. Valid values are: {list(valid)}"
    if kv in ("float16", "bfloat16") and kv != req.model_dtype:
        allowed = "`auto`" if req.model_dtype == "float32" else f"`auto` or `{req.model_dtype}`"
        return (f'kv_cache_dtype="{kv}" is incompatible with dtype="{req.model_dtype}". '
                f"Please set `--kv-cache-dtype` to {allowed}.")
    if req.use_mla and kv.startswith("nvfp4") and kv != "nvfp4_ds_mla":
        return ("nvfp4 KV cache is not supported with MLA models. Please use a different --kv-cache-dtype "
                "(e.g., 'fp8', 'auto', or 'nvfp4_ds_mla' with a sparse MLA backend).")
    if gpu.platform == "cuda" and req.model_dtype == "bfloat16" and not gpu.cc_at_least(8, 0):
        # vllm/platforms/cuda.py check_if_supports_dtype (the Triton impl's bf16 branch is behind it)
        return ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
                f"{gpu.display_name} GPU has compute capability {gpu.cc_str}. You can use float16 instead "
                "by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.")
    return None


class _Walk:
    """One `get_attn_backend` call: the candidates tried, the reasons, the notes logged so far."""

    def __init__(self, req: BackendRequest, gpu: GpuProfile, ac: Mapping[str, Any], base: dict[str, Any],
                 engine: EngineVersion):
        self.req, self.gpu, self.ac, self.base, self.engine = req, gpu, ac, base, engine
        self.notes: list[str] = []
        self.rejected: dict[str, tuple[str, ...]] = {}
        self.candidates: tuple[str, ...] = ()

    def fail(self, msg: str, **extra: Any) -> BackendChoice:
        return _fail({**self.base, "candidates": self.candidates, **extra}, msg, "selection", "ValueError")

    def cpu(self) -> BackendChoice | None:
        """CPU platform: dense layers always get CPU_ATTN, no validation walk (vllm/platforms/cpu.py, §5.1)."""
        req = self.req
        self.candidates = _priority(req, self.gpu, self.ac, self.engine)
        if req.kv_cache_dtype not in BACKENDS[self.candidates[0]].kv_cache_dtypes:
            what = "MLA attention on CPU" if req.use_mla else "the CPU attention backend on this host"
            return self.fail(f"--kv-cache-dtype {req.kv_cache_dtype} is not supported by {what}.")
        if not req.use_mla:
            return _build(self, self.candidates[0], forced=False)
        return None

    def forced(self, name: str) -> BackendChoice | None:
        """A forced backend is validated alone; None = ROCm fell back to automatic selection."""
        self.candidates = (name,)
        reasons = validate_backend(name, self.req, self.gpu, self.ac, self.engine)
        if not reasons:
            return _build(self, name, forced=True)
        if self.gpu.platform == "rocm" and hooks_for(name).rocm_forced_fallback:
            # ROCm tolerates a forced TurboQuant/UltraQuant backend on boundary (skipped) layers.
            self.notes.append(f"forced backend {name} is not valid for this layer ({'; '.join(reasons)}); "
                              "ROCm falls back to automatic selection.")
            return None
        return self.fail(f"Selected backend AttentionBackendEnum.{name} is not valid for this configuration. "
                         f"Reason: {reasons!r}", forced=True, rejected={name: tuple(reasons)})

    def automatic(self) -> BackendChoice:
        """Validate every candidate of the priority list; the first valid one wins."""
        self.candidates = _priority(self.req, self.gpu, self.ac, self.engine)
        chosen: str | None = None
        for name in self.candidates:
            reasons = validate_backend(name, self.req, self.gpu, self.ac, self.engine)
            if reasons:
                self.rejected[name] = tuple(reasons)
            elif chosen is None:
                chosen = name
        if chosen is not None:
            return _build(self, chosen, forced=False)
        listed = "{" + ", ".join(f"{n}: [{', '.join(r)}]" for n, r in self.rejected.items()) + "}"
        msg = (f"No valid attention backend found for {self.gpu.platform} with "
               f"{_selector_config_repr(self.req)}. Reasons: {listed}.")
        if self.gpu.platform == "rocm":
            supported = sorted({d for n in self.candidates for d in BACKENDS[n].kv_cache_dtypes})
            msg += f" Supported kv_cache_dtype values: {supported}"
        return self.fail(msg, rejected=self.rejected, notes=tuple(self.notes))


def select_backend(req: BackendRequest, gpu: GpuProfile, engine: EngineVersion | None = None,
                   forced: str | None = None,
                   attention_config: Mapping[str, Any] | None = None) -> BackendChoice:
    """Which attention backend vLLM gives this layer on this GPU, or the error it raises.

    `forced` is `--attention-backend`; `attention_config` is the `--attention-config` JSON
    (`backend`, `backend_per_kind`, `flash_attn_version`, `use_trtllm_attention`,
    `disable_flashinfer_q_quantization`; kvplan extension `rocm_use_aiter` stands for
    VLLM_ROCM_USE_AITER=1). Raises KvplanInputError only for an unknown backend name.
    """
    engine = engine or EngineVersion()
    ac: Mapping[str, Any] = attention_config or {}
    kv = req.kv_cache_dtype
    base: dict[str, Any] = {"status": "selected", "backend": None, "kv_cache_dtype": kv,
                            "effective_kv_cache_dtype": kv, "engine": str(engine)}
    if engine.engine != "vllm" or not engine.satisfies(MODELLED_VLLM_VERSIONS):
        what = f"vLLM {engine.version_str}" if engine.engine == "vllm" else engine.engine
        return BackendChoice(**{**base, "status": "not_modelled", "notes": (
            f"attention backend selection for {what} is not modelled yet; kvplan models vllm "
            f"{MODELLED_VLLM_VERSIONS}.",)})
    # Older modelled releases are selected with the 0.33 rows (the only ones read from source);
    # what is known to differ by version is applied here and in the versioned rules (KV00x, KV704).
    error = _config_error(req, gpu, engine)
    if error is not None:
        return _fail(base, error, "config", "ValueError")
    forced_name = _forced_name(req, forced, ac, engine)
    walk = _Walk(req, gpu, ac, base, engine)
    if gpu.platform == "cpu" and forced_name is not None and forced_name not in _priority(req, gpu, ac, engine):
        # CpuPlatform.get_attn_backend_cls logs "Cannot use <backend> backend on CPU." and keeps its own
        # (an --attention-backend, or one a model class set: Gemma4Config's TRITON_ATTN)
        walk.notes.append(f"Cannot use {forced_name} backend on CPU: vLLM keeps the CPU backend "
                          "(vllm/platforms/cpu.py::get_attn_backend_cls).")
        forced_name = None
    done: BackendChoice | None = None
    if gpu.platform == "cpu" and forced_name is None:
        done = walk.cpu()
    elif forced_name is not None:
        done = walk.forced(forced_name)
    return done or walk.automatic()


# ============================================================================ after selection
def _quant_query_input(req: BackendRequest) -> bool:
    """`Attention.__init__` asks the impl about query quantization only for fp8*/nvfp4* dense layers
    that are not per-token-head (§4.5)."""
    kv = req.kv_cache_dtype
    return not req.use_mla and kv.startswith(("fp8", "nvfp4")) and not kv.endswith("per_token_head")


def _shared_notes(site: Site, name: str, query_quant: bool) -> tuple[list[str], list[str]]:
    """Notes every backend shares: (before the backend's own, after them)."""
    req, gpu = site.req, site.gpu
    kv, mode = req.kv_cache_dtype, req.quant_mode
    before: list[str] = []
    after: list[str] = []
    if gpu.fp8 == "e4m3fnuz" and mode in (QuantMode.fp8_per_tensor, QuantMode.fp8_per_token_head):
        before.append("FP8 KV is stored as float8_e4m3fnuz (max 240); checkpoint k/v/q scales are "
                      "doubled at load (is_fp8_fnuz); per-token-head FP8 clamps to +-224.")
    if query_quant and kv not in ("fp8", "fp8_e4m3") and not kv.startswith("nvfp4"):
        after.append(f"risk: Attention.forward asserts kv_cache_dtype in {{'fp8', 'fp8_e4m3'}} (or "
                     f"nvfp4*) when query quantization is active; {kv} on {name} would raise "
                     "AssertionError at the first forward (code reading, not executed; reference §4.5).")
    if req.use_per_head_quant_scales and not mode.is_quantized:
        after.append("per-head (attn_head) checkpoint scales restrict even this unquantized layer "
                     "to FLASH_ATTN with FA >= 3 (use_per_head_quant_scales comes from the checkpoint).")
    if gpu.platform == "rocm" and gpu.fp8 == "none" and kv.startswith("fp8"):
        after.append(f"{gpu.display_name} has no FP8 hardware; vLLM's ROCm FP8 KV support on "
                     f"{gpu.arch} is not modelled by kvplan.")
    return before, after


def _build(walk: _Walk, name: str, forced: bool) -> BackendChoice:
    """Impl/builder construction checks, logs, query dtypes and block size for the chosen backend."""
    req, gpu, ac = walk.req, walk.gpu, walk.ac
    hooks = hooks_for(name)
    fa_version, fa_notes = hooks.flash_attn_version(req, gpu, ac)
    site = Site(req, gpu, ac, fa_version, engine_block_size=default_block_size(walk.engine), engine=walk.engine)
    effective, canon_notes = hooks.canonical_kv_cache_dtype(req.kv_cache_dtype)
    qq = _quant_query_input(req) and hooks.query_quant(site)
    queries = hooks.query_dtypes(site, qq)
    before, after = _shared_notes(site, name, qq)
    notes = (walk.notes + fa_notes + canon_notes + list(queries.notes) + before
             + hooks.notes(site, qq) + after)
    out = {**walk.base, "backend": name, "forced": forced, "flash_attn_version": fa_version,
           "candidates": walk.candidates, "rejected": walk.rejected, "query_quant": qq,
           "prefill_query_dtype": queries.prefill, "decode_query_dtype": queries.decode,
           "prefill_kernel": queries.prefill_kernel, "decode_kernel": queries.decode_kernel,
           "effective_kv_cache_dtype": effective, "notes": tuple(notes),
           "block_size": req.block_size if req.block_size is not None else hooks.default_block_size(site)}
    error = hooks.construction_error(site)
    if error is not None:
        return _fail(out, error.message, error.stage, error.error_type)
    if req.attn_type in ("encoder", "encoder_only") and req.quant_mode.is_quantized:
        return _fail(out, hooks.encoder_quant_error, "forward", "NotImplementedError")
    return BackendChoice(**out)


def build_pinned_backend(req: BackendRequest, gpu: GpuProfile, name: str, engine: EngineVersion | None = None,
                         attention_config: Mapping[str, Any] | None = None) -> BackendChoice:
    """A backend the model class hands an `Attention` layer itself (`Attention(attn_backend=...)`): vLLM skips
    the selector and its validation (`model_executor/layers/attention/attention.py::Attention.__init__`) but
    still builds the backend's impl, so the config checks, the impl's construction errors, its logs and its
    query dtype apply as for a selected backend."""
    engine = engine or EngineVersion()
    ac: Mapping[str, Any] = attention_config or {}
    base: dict[str, Any] = {"status": "selected", "backend": None, "kv_cache_dtype": req.kv_cache_dtype,
                            "effective_kv_cache_dtype": req.kv_cache_dtype, "engine": str(engine)}
    error = _config_error(req, gpu, engine)
    if error is not None:
        return _fail(base, error, "config", "ValueError")
    walk = _Walk(req, gpu, ac, base, engine)
    walk.candidates = (name,)
    return _build(walk, name, forced=True)
