"""Pure functions mirroring vLLM 0.33's attention-backend selection and KV-related advice.

`select_backend` follows `vllm/v1/attention/selector.py::get_attn_backend` ->
`Platform.get_attn_backend_cls`: walk the platform priority list, validate each candidate
(`AttentionBackend.validate_configuration`), take the first valid one; a forced backend bypasses the
priority list but not validation. It then applies the errors the chosen backend's impl/builder
raises at construction (and the first-forward errors that follow deterministically from config),
and reports the query dtype the layer would get.

Reason strings for the generic checks are vLLM's own (`"head_size not supported"`, ...); reasons and
messages for backend-specific rules that the reference abridges are kvplan's wording, marked so.
No torch import.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from kvplan.backends.capabilities import (
    AttnType,
    BackendCapability,
    EngineVersion,
)
from kvplan.backends.engines import MODELLED_VLLM_VERSIONS, kv_cache_dtypes_for
from kvplan.backends.vllm_033 import (
    BACKENDS,
    ENGINE_VERSIONS,
    MLA_PREFILL_FP8_QUERY_BACKENDS,
    cpu_priority,
    cuda_priority,
    engine_feature,
    rocm_priority,
)
from kvplan.errors import KvplanInputError
from kvplan.model.arch import MlaDims
from kvplan.model.gpu import GpuProfile
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES, QuantMode, quant_mode_of

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

_PR = "https://github.com/vllm-project/vllm/pull/"
_ISSUE = "https://github.com/vllm-project/vllm/issues/"
ModelDtype = Literal["bfloat16", "float16", "float32"]


# ============================================================================ request / result types
class BackendRequest(BaseModel):
    """What one attention layer asks of backend selection (vLLM `AttentionSelectorConfig`).

    `kv_cache_dtype` is the LAYER's own string after checkpoint override and skip layers
    (reference §2.2), exactly what `get_attn_backend` receives.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    head_size: int
    """Attention head size; for MLA the cache head size kv_lora_rank + qk_rope_head_dim (576)."""
    kv_cache_dtype: str = "auto"
    """The layer's `--kv-cache-dtype` string (e.g. `auto` for a skipped layer, `fp8`)."""
    head_size_v: int | None = None
    """Value head size when it differs from `head_size` (None = same)."""
    model_dtype: ModelDtype = "bfloat16"
    """Model activation dtype (`--dtype` resolved)."""
    use_mla: bool = False
    """Layer is MLA (latent cache)."""
    use_sparse: bool = False
    """Layer uses sparse MLA (an indexer, `index_topk`)."""
    has_sinks: bool = False
    """Layer has attention sinks (gpt-oss)."""
    has_sliding_window: bool = False
    """Layer is sliding-window attention."""
    attn_type: AttnType = "decoder"
    """vLLM `AttentionType`: decoder, encoder, encoder_only, encoder_decoder (cross)."""
    use_per_head_quant_scales: bool = False
    """The checkpoint has compressed-tensors `strategy: attn_head` scales (applies to every
    layer of the model, even skipped ones, §1.4)."""
    num_heads: int | None = None
    """Query heads per TP rank (sparse-MLA ordering on SM100 looks at <= 16)."""
    num_kv_heads: int | None = None
    """KV heads per TP rank (FlashInfer trtllm needs num_heads % num_kv_heads == 0)."""
    block_size: int | None = None
    """`--block-size` if the user set it, else None (vLLM validates block size only then)."""
    kv_lora_rank: int | None = None
    """MLA latent rank."""
    qk_rope_head_dim: int | None = None
    """MLA RoPE head dim."""
    qk_nope_head_dim: int | None = None
    """MLA non-RoPE head dim."""
    v_head_dim: int | None = None
    """MLA value head dim."""
    index_topk: int | None = None
    """Sparse-MLA indexer top-k (DeepSeek-V3.2: 2048)."""

    @property
    def mla_dims(self) -> MlaDims | None:
        """MLA dims if the three head dims are known."""
        if (self.qk_nope_head_dim is None or self.qk_rope_head_dim is None or self.v_head_dim is None
                or self.kv_lora_rank is None):
            return None
        return MlaDims(qk_nope_head_dim=self.qk_nope_head_dim, qk_rope_head_dim=self.qk_rope_head_dim,
                       v_head_dim=self.v_head_dim, kv_lora_rank=self.kv_lora_rank)

    @property
    def quant_mode(self) -> QuantMode:
        """`get_kv_quant_mode` of the layer dtype."""
        return quant_mode_of(self.kv_cache_dtype)

    @property
    def cache_dtype(self) -> str:
        """Storage precision name: the model dtype for `auto`, else the kv dtype string."""
        return self.model_dtype if self.kv_cache_dtype == "auto" else self.kv_cache_dtype


ErrorStage = Literal["config", "selection", "impl", "builder", "forward"]


class BackendChoice(BaseModel):
    """The backend vLLM 0.33 would give one layer, or the error it would raise."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    status: Literal["selected", "error", "not_modelled"]
    """`selected` (backend set, error None), `error` (vLLM would fail: see `error`), or
    `not_modelled` (engine/version kvplan has no table for: nothing is guessed)."""
    backend: str | None
    """Registry name of the backend vLLM picks (also set when a later impl/forward check fails)."""
    forced: bool = False
    """True if the backend came from `--attention-backend` / `attention_config` rather than the
    priority list."""
    flash_attn_version: int | None = None
    """FlashAttention version the FLASH_ATTN impl runs (2/3/4), None for other backends."""
    candidates: tuple[str, ...] = ()
    """Backends considered, in priority order (just the forced one when forced)."""
    rejected: dict[str, tuple[str, ...]] = {}
    """Invalid candidates -> vLLM's reasons, in priority order (vLLM validates every candidate, so
    this includes lower-priority backends after the chosen one)."""
    error: str | None = None
    """One-line message of the exception vLLM would raise, None when the layer works."""
    error_stage: ErrorStage | None = None
    """When the error fires: config validation, backend selection, impl construction, metadata
    builder construction, or the first forward."""
    error_type: str | None = None
    """Python exception class vLLM raises (ValueError, NotImplementedError, AssertionError)."""
    notes: tuple[str, ...] = ()
    """Warnings/info vLLM would log for this layer and code-reading risks, one line each."""
    query_quant: bool = False
    """The layer quantizes its query to FP8 (`Attention.query_quant`, §4.5)."""
    prefill_query_dtype: str | None = None
    """Query dtype in prefill (torch dtype name); None for MLA (see `prefill_query_advice`)."""
    decode_query_dtype: str | None = None
    """Query dtype in decode (torch dtype name); None for MLA."""
    prefill_kernel: str | None = None
    """FlashInfer prefill kernel family (`trtllm-gen`, `native (fa2)`, ...); None elsewhere."""
    decode_kernel: str | None = None
    """FlashInfer decode kernel family (`trtllm-gen`, `xqa`, `native (fa2)`, ...); None elsewhere."""
    kv_cache_dtype: str
    """The layer dtype string that was requested."""
    effective_kv_cache_dtype: str
    """The dtype string after backend canonicalization (e.g. sparse MLA -> `fp8_ds_mla`)."""
    block_size: int | None = None
    """Block size this backend runs with: the user's, else vLLM's default 16 when accepted, else the
    backend's preferred size (FlashMLA 64, CUTLASS MLA 128). Hybrid/skip-layer alignment (§7.4) may
    raise it further."""
    engine: str
    """Engine and version modelled, e.g. `vllm==0.33.0`."""


class FlashInferQueryDtypes(BaseModel):
    """FlashInfer's per-KV-group query dtypes and kernels (§5.5, per group since PR #39002)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    prefill_query_dtype: str
    """Query dtype in prefill (torch dtype name)."""
    decode_query_dtype: str
    """Query dtype in decode (torch dtype name)."""
    prefill_kernel: str
    """Prefill kernel family."""
    decode_kernel: str
    """Decode kernel family."""
    log_line: str
    """The INFO line vLLM logs ('FlashInfer resolved query dtypes: ...')."""


class Fp8FormatNotes(BaseModel):
    """How FP8 KV numbers differ on an AMD device (fnuz vs OCP) in vLLM 0.33."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    gpu: str
    """GPU profile name."""
    fp8_dtype: str | None
    """torch dtype of FP8 KV bytes (`float8_e4m3fnuz` on gfx94x), None if no FP8."""
    fp8_max: float | None
    """Largest finite value of that format (240 for e4m3fnuz, 448 for e4m3fn)."""
    per_token_head_max: float | None
    """Range of vLLM's per-token-head FP8 quantizer (224 on fnuz, `get_fp8_min_max`)."""
    checkpoint_scale_multiplier: float
    """Factor applied to loaded k/v/q/prob scales (2.0 on fnuz: `is_fp8_fnuz()`), 1.0 otherwise."""
    notes: tuple[str, ...]
    """Plain-language consequences, one per line."""


class PrefillQueryAdvice(BaseModel):
    """MLA prefill query dtype as vLLM decides it (§6.2) plus kvplan's workload recommendation."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    status: Literal["modelled", "not_modelled"]
    """`not_modelled` for engines kvplan has no rules for (fields then hold defaults)."""
    engine: str
    """Engine and version modelled."""
    gpu: str
    """GPU profile name."""
    global_kv_cache_dtype: str
    """`cache_config.cache_dtype` (the global string; vLLM does not look at per-layer dtypes here)."""
    kv_cache_quantized: bool
    """`is_quantized_kv_cache(global dtype)`."""
    flag_enabled: bool
    """`attention_config.use_prefill_query_quantization`."""
    prefill_backend: str | None
    """MLA prefill backend vLLM picks (or the pinned one), None if none is valid/modelled."""
    prefill_backend_pinned: bool
    """True if `attention_config.mla_prefill_backend` chose it."""
    prefill_candidates: tuple[tuple[str, tuple[str, ...]], ...]
    """Prefill backends tried in order, each with its rejection reasons (empty = chosen)."""
    backend_supports_fp8_prefill_query: bool
    """`backend_supports_prefill_query_quantization()`: CUDA family 100 and prefill backend in
    FLASHINFER / TRTLLM_RAGGED / TOKENSPEED_MLA."""
    branch: Literal[1, 2, 3, 4]
    """Which branch of `determine_prefill_query_data_type` runs (1 FP8, 2 flag ineffective,
    3 warning, 4 silent model dtype)."""
    log_level: Literal["INFO", "WARNING"] | None
    """Level of the line vLLM logs, None if it logs nothing."""
    log_line: str | None
    """Exact text vLLM logs for the branch."""
    prefill_query_dtype: str
    """Resulting prefill query dtype (torch dtype name)."""
    flag_silently_ignored: bool
    """The flag is set on an SM100-family GPU but has no effect because the default prefill backend
    is FLASH_ATTN (vLLM issue #50056): only an INFO line says so."""
    error: str | None
    """vLLM error if a pinned `mla_prefill_backend` is invalid (kvplan wording), else None."""
    recommendation: Literal["enable", "keep_disabled", "not_applicable", "depends_on_input_len"]
    """kvplan's advice on FP8 prefill queries for this workload."""
    explanation: str
    """Why, in one or two sentences, with the measured numbers."""
    recommended_attention_config: dict[str, Any] | None
    """`--attention-config` content to use (the user's keys kept), None if nothing to change."""
    attention_config_flag: str | None
    """The exact `--attention-config '{...}'` argument to paste, None if nothing to add."""
    input_len: int | None
    """Typical prompt length (ISL) the advice is for, None if unknown."""
    references: tuple[str, ...]
    """Upstream PRs/issues behind the advice."""


# ============================================================================ helpers
def _rocm_arch(gpu: GpuProfile) -> str:
    return gpu.arch.lower()


def attention_kind(req: BackendRequest) -> str:
    """`attention_config.backend_per_kind` key for the layer (§5.1)."""
    if req.use_mla:
        return "sliding_window_mla" if req.has_sliding_window else "mla_attention"
    if req.attn_type == "encoder_decoder":
        return "cross_attention"
    if req.attn_type in ("encoder", "encoder_only"):
        return "encoder_only_attention"
    return "sliding_window" if req.has_sliding_window else "full_attention"


def _fp8_torch_dtype_for(kv_cache_dtype: str, gpu: GpuProfile) -> str:
    if kv_cache_dtype == "fp8_e5m2":
        return "float8_e5m2"
    return gpu.fp8_torch_dtype or "float8_e4m3fn"


def _fa4_available(gpu: GpuProfile) -> bool:
    # is_fa_version_supported(4): the cute-DSL FA4 kernels run on Hopper and datacenter Blackwell.
    return gpu.platform == "cuda" and gpu.cc_major in (9, 10)


def _fa_base_version(gpu: GpuProfile, attention_config: Mapping[str, Any]) -> int | None:
    """`get_flash_attn_version()` without layer specifics (what validation sees)."""
    if gpu.platform != "cuda":
        return None
    major = gpu.cc_major or 0
    default = 3 if major == 9 else 4 if major == 10 else 2
    override = attention_config.get("flash_attn_version")
    if override is None:
        return default
    override = int(override)
    if override == 3 and major != 9:
        return 4 if major == 10 else 2  # FA3 is Hopper-only: CC>=10 -> FA4, older -> FA2
    if override == 4 and not _fa4_available(gpu):
        return 2
    return override


def flash_attn_version(gpu: GpuProfile, req: BackendRequest,
                       attention_config: Mapping[str, Any] | None = None) -> tuple[int | None, list[str]]:
    """FlashAttention version the FLASH_ATTN impl would run for this layer, plus warnings (§5.4).

    Modelled fallbacks: SM90 FA3 -> FA4 for head_size > 256; FA4 on Blackwell for head_size > 128
    except (256, 256) and (192, 128) -> FA2; the FA4 head-256 kernel -> FA2 with a quantized KV
    cache, sinks, or a block size that is not a multiple of 128.
    """
    ac = attention_config or {}
    version = _fa_base_version(gpu, ac)
    notes: list[str] = []
    if version is None:
        return None, notes
    major = gpu.cc_major
    hv = req.head_size_v or req.head_size
    if version == 3 and major == 9 and req.head_size > 256 and _fa4_available(gpu):
        version = 4
    if version == 4 and major == 10 and req.head_size > 128:
        if (req.head_size, hv) == (256, 256):
            if req.quant_mode.is_quantized:
                notes.append(
                    "FA4's Blackwell head_size=256 kernel does not support quantized KV cache dtype "
                    f"{req.kv_cache_dtype}, defaulting to FA version 2.")
                version = 2
            elif req.has_sinks:
                notes.append("FA4's Blackwell head_size=256 kernel does not support sinks, "
                             "defaulting to FA version 2. (kvplan wording)")
                version = 2
            elif req.block_size is not None and req.block_size % 128 != 0:
                notes.append("FA4's Blackwell head_size=256 kernel needs a block size that is a "
                             "multiple of 128, defaulting to FA version 2. (kvplan wording)")
                version = 2
        elif (req.head_size, hv) != (192, 128):
            version = 2
    return version, notes


def _fa_supports_kv_dtype(version: int | None, gpu: GpuProfile, kv: str, head_size: int | None) -> bool:
    """`flash_attn_supports_kv_cache_dtype` (head_size None = unknown, as in validation)."""
    if not quant_mode_of(kv).is_quantized:
        return True
    if kv not in ("fp8", "fp8_e4m3"):
        return False  # never fp8_e5m2 (or any non-fp8 quantized dtype)
    if version == 3 and gpu.cc_major == 9:
        return True
    if version == 4 and gpu.cc_major == 9:
        return head_size is None or head_size == 512
    return version == 4 and gpu.cc_major == 10


def _cc_ok(row: BackendCapability, gpu: GpuProfile) -> bool:
    if gpu.platform == "rocm":
        if row.rocm_archs is None:
            return True
        arch = _rocm_arch(gpu)
        return any(arch.startswith(p) for p in row.rocm_archs)
    if gpu.platform != "cuda" or gpu.compute_capability is None:
        return True
    cc = gpu.compute_capability
    if row.min_compute_capability is not None and cc < row.min_compute_capability:
        return False
    if row.max_compute_capability is not None and cc > row.max_compute_capability:
        return False
    if row.cc_majors is not None and cc[0] not in row.cc_majors:
        return False
    return True


def hardware_reasons(name: str, gpu: GpuProfile) -> list[str]:
    """Why a backend can never run on this device (platform / compute capability), [] if it can."""
    row = BACKENDS[name]
    if gpu.platform not in row.platforms:
        return [f"not available on the {gpu.platform} platform"]
    return [] if _cc_ok(row, gpu) else ["compute capability not supported"]


def _head_ok(row: BackendCapability, req: BackendRequest, gpu: GpuProfile) -> bool:
    h = req.head_size
    if row.name == "FLASH_ATTN":
        if h % 8 != 0:
            return False
        return h <= 256 or (_fa4_available(gpu) and h <= 512)
    if row.head_sizes is not None and h not in row.head_sizes:
        return False
    if row.min_head_size is not None and h < row.min_head_size:
        return False
    if row.max_head_size is not None and h > row.max_head_size:
        return False
    if row.head_size_multiple_of is not None and h % row.head_size_multiple_of != 0:
        return False
    return True


def _block_ok(row: BackendCapability, block_size: int, gpu: GpuProfile) -> bool:
    sizes = row.block_sizes
    if row.name == "FLASHINFER" and gpu.cc_major == 10:
        sizes = (16, 32, 64, 128, 256, 512, 1024)  # trtllm-gen GQA pages up to 1024 on SM100
    if sizes is None and row.block_size_multiple_of is None:
        return True
    if sizes is not None and block_size in sizes:
        return True
    m = row.block_size_multiple_of
    return m is not None and block_size % m == 0


def _sinks_ok(row: BackendCapability, gpu: GpuProfile, ac: Mapping[str, Any]) -> bool:
    if row.name == "FLASHINFER":
        if ac.get("use_trtllm_attention") is False:
            return False
        return gpu.compute_capability == (9, 0) or gpu.cc_major in (10, 12)
    return row.supports_sinks


def _combination_reasons(row: BackendCapability, req: BackendRequest, gpu: GpuProfile) -> list[str]:
    """`supports_combination` and backend-specific checks (kvplan wording unless noted)."""
    r: list[str] = []
    name, kv, major = row.name, req.kv_cache_dtype, gpu.cc_major
    dims = req.mla_dims
    if name == "FLASH_ATTN" and req.has_sinks and not gpu.cc_at_least(9, 0):
        r.append("sink not supported on compute capability < 9.0")  # vLLM's text
    if name == "FLASHINFER" and kv.startswith("nvfp4") and major != 10:
        if kv != "nvfp4":
            r.append(f"{kv} KV cache requires the SM100 trtllm-gen path")
        if req.head_size == 64:
            r.append("nvfp4 KV cache does not support head_size 64 on the fa2 path")
        if req.has_sinks:
            r.append("nvfp4 KV cache does not support sinks on the fa2 path")
    if name == "FLASHINFER_MLA" and dims and dims.qk_nope_head_dim not in (64, 128, 192):
        r.append(f"qk_nope_head_dim {dims.qk_nope_head_dim} not supported")
    if name == "TOKENSPEED_MLA" and dims and dims.triple != (128, 64, 128):
        r.append("only DeepSeek-R1 MLA dims (qk_nope 128, rope 64, v 128) are supported")
    if name == "FLASHMLA_SPARSE":
        if req.head_size == 512 and major != 9:
            r.append("head_size 512 (NoPE) is only supported on SM90")
        if kv == "nvfp4_ds_mla" and major != 10:
            r.append("nvfp4_ds_mla requires the SM100 family")
    if name == "FLASHINFER_MLA_SPARSE":
        if req.index_topk is None:
            r.append("index_topk is required")
        if dims:
            allowed = (256, 512) if dims.qk_rope_head_dim == 0 else (128, 192)
            if dims.qk_nope_head_dim not in allowed:
                r.append(f"qk_nope_head_dim {dims.qk_nope_head_dim} not supported")
    if name == "FLASHINFER_MLA_SPARSE_SM120" and req.index_topk is not None and req.index_topk != 2048:
        r.append(f"index_topk {req.index_topk} not supported (needs 2048)")
    if name == "FLASHINFER_MLA_SPARSE_SM90" and (
            (req.kv_lora_rank is not None and req.kv_lora_rank != 512)
            or (req.qk_rope_head_dim is not None and req.qk_rope_head_dim not in (0, 64))):
        r.append("needs kv_lora_rank 512 and qk_rope_head_dim 0 or 64")
    if name == "FLASH_ATTN_MLA_SPARSE_FA4":
        if req.index_topk is None or req.index_topk % 128 != 0:
            r.append("index_topk must be a multiple of 128")
        if (req.kv_lora_rank, req.qk_rope_head_dim) not in ((512, 64), (None, None)):
            r.append("needs (kv_lora_rank, qk_rope_head_dim) == (512, 64)")
    if name == "ROCM_OCTAVE" and req.head_size not in (64, 128, 256):
        r.append("head_size not supported by the fixed octave layouts")
    return r


def validate_backend(name: str, req: BackendRequest, gpu: GpuProfile,
                     attention_config: Mapping[str, Any] | None = None) -> list[str]:
    """vLLM's `validate_configuration` for one backend: the reasons it is invalid ([] = valid).

    Generic reasons use vLLM's exact strings; `supports_combination`-style ones are listed last.
    """
    ac = attention_config or {}
    row = BACKENDS[name]
    reasons: list[str] = []
    if gpu.platform not in row.platforms:
        return [f"not available on the {gpu.platform} platform"]
    kv = req.kv_cache_dtype
    fa_base = _fa_base_version(gpu, ac)
    if not _head_ok(row, req, gpu):
        reasons.append("head_size not supported")
    if req.model_dtype not in row.model_dtypes:
        reasons.append("dtype not supported")
    if kv not in row.kv_cache_dtypes:
        reasons.append("kv_cache_dtype not supported")
    elif name == "FLASH_ATTN" and not _fa_supports_kv_dtype(fa_base, gpu, kv, None):
        # flash_attn_supports_fp8() false (reference §5.2 gives this reason text)
        reasons.append("FP8 KV cache requires FA3 on SM90, FA4 with head_size=512 on SM90, "
                       "or FA4 on SM100")
    if req.block_size is not None and not _block_ok(row, req.block_size, gpu):
        reasons.append("block_size not supported")
    if req.use_mla != row.use_mla:
        reasons.append("MLA not supported" if req.use_mla else "non-MLA not supported")
    if req.has_sinks and not _sinks_ok(row, gpu, ac):
        reasons.append("sink setting not supported")
    if req.use_sparse != row.sparse:
        reasons.append("sparse not supported" if req.use_sparse else "non-sparse not supported")
    if req.use_per_head_quant_scales and not (
            row.supports_per_head_quant_scales and (name != "FLASH_ATTN" or (fa_base or 0) >= 3)):
        reasons.append("per-head quant scales not supported")
    if not _cc_ok(row, gpu):
        reasons.append("compute capability not supported")
    if req.attn_type not in row.attn_types:
        reasons.append(f"attention type {req.attn_type} not supported")
    if req.has_sliding_window and not row.supports_sliding_window:
        reasons.append("sliding window not supported")
    reasons.extend(_combination_reasons(row, req, gpu))
    return reasons


def _selector_config_repr(req: BackendRequest) -> str:
    # Field list approximates vLLM's AttentionSelectorConfig dataclass repr.
    torch_dtype = f"torch.{req.model_dtype}"
    return (f"AttentionSelectorConfig(head_size={req.head_size}, dtype={torch_dtype}, "
            f"kv_cache_dtype={req.kv_cache_dtype}, block_size={req.block_size}, "
            f"use_mla={req.use_mla}, has_sink={req.has_sinks}, use_sparse={req.use_sparse}, "
            f"use_mm_prefix=False, use_per_head_quant_scales={req.use_per_head_quant_scales}, "
            f"attn_type={req.attn_type}, has_sliding_window={req.has_sliding_window})")


def _default_block_size(row: BackendCapability, gpu: GpuProfile) -> int:
    """Phase 1 of `update_block_size_for_backend` for a single backend (kvplan's reading): vLLM's
    default 16 if accepted; else 64 from an explicit list (FlashInfer-MLA is forced to 64), else the
    list's smallest; else the `MultipleOf` step."""
    if _block_ok(row, 16, gpu):
        return 16
    if row.block_sizes:
        return 64 if 64 in row.block_sizes else min(row.block_sizes)
    return row.block_size_multiple_of or 16


def flashinfer_query_dtypes(gpu: GpuProfile, kv_cache_dtype: str, model_dtype: str = "bfloat16",
                            head_size: int = 128,
                            attention_config: Mapping[str, Any] | None = None, *,
                            has_sinks: bool = False) -> FlashInferQueryDtypes:
    """FlashInfer's per-group query dtypes and kernels for a layer's dtype (§5.5).

    `kv_cache_dtype` is the group's own dtype: since PR #39002 an unquantized (skipped) group is
    treated as `auto` even when the global dtype is fp8.
    """
    ac = attention_config or {}
    cc, major = gpu.compute_capability, gpu.cc_major
    trt = ac.get("use_trtllm_attention")  # None (auto) / True / False
    disable_q = bool(ac.get("disable_flashinfer_q_quantization", False))
    mode = quant_mode_of(kv_cache_dtype)
    fp8q = _fp8_torch_dtype_for(kv_cache_dtype, gpu)
    xqa_arch = cc == (9, 0) or major == 12
    xqa_head_ok = 16 <= head_size <= 256 and head_size % 16 == 0
    native = "native (fa3)" if cc == (9, 0) else "native (fa2)"

    if not mode.is_quantized or disable_q:
        pq = dq = model_dtype
    elif mode is QuantMode.fp8_per_tensor:
        pq = fp8q if (major == 10 or cc == (9, 0)) else model_dtype
        if xqa_arch and trt is not False:
            dq = model_dtype  # XQA decode reads fp8 KV with model-dtype queries
        else:
            dq = fp8q if (major == 10 or cc == (9, 0)) else model_dtype
    elif mode is QuantMode.nvfp4:
        pq = dq = "float8_e4m3fn" if (major == 10 and trt is not False) else model_dtype
    else:
        pq = dq = model_dtype

    # use_trtllm_attention(..., is_prefill) in vllm/utils/flashinfer.py, per phase.
    if major == 10 and trt is not False and (pq.startswith("float8") or has_sinks or trt
                                              or not mode.is_quantized):
        pk = "trtllm-gen"
    else:
        pk = native
    if mode is QuantMode.nvfp4 and major != 10:
        pk = "native (fa2)"
    trt_decode_arch = major == 10 or xqa_arch
    dname = "trtllm-gen" if major == 10 else "xqa"
    if trt is False or not trt_decode_arch or (dname == "xqa" and not xqa_head_ok):
        dk = native
    elif dq.startswith("float8") or has_sinks or trt or (xqa_arch and mode is QuantMode.fp8_per_tensor):
        dk = dname
    elif mode is QuantMode.nvfp4:
        dk = "xqa" if major == 12 else "native (fa2)"
    elif not mode.is_quantized:
        dk = f"{dname} (batches <= 256 tokens), else {native}"
    else:
        dk = native
    if mode is QuantMode.nvfp4 and major == 10 and trt is not False:
        pk = dk = "trtllm-gen"
    arch = f"sm{cc[0]}{cc[1]}" if cc else gpu.arch
    log = (f"FlashInfer resolved query dtypes: prefill={pq}, decode={dq}, decode_backend={dk}, "
           f"kv_cache_dtype={kv_cache_dtype if mode.is_quantized else 'auto'}, arch={arch}")
    return FlashInferQueryDtypes(prefill_query_dtype=pq, decode_query_dtype=dq, prefill_kernel=pk,
                                 decode_kernel=dk, log_line=log)


def _query_quant(name: str, req: BackendRequest, gpu: GpuProfile, ac: Mapping[str, Any],
                 fa_version: int | None) -> bool:
    """`Attention.__init__`: query_quant iff impl.supports_quant_query_input and the dtype is
    fp8*/nvfp4* and not *per_token_head (§4.5)."""
    kv = req.kv_cache_dtype
    if req.use_mla or not (kv.startswith("fp8") or kv.startswith("nvfp4")) or kv.endswith("per_token_head"):
        return False
    if name == "TRITON_ATTN":
        if gpu.platform == "cuda":
            return True
        return gpu.platform == "rocm" and not (_rocm_arch(gpu).startswith("gfx90a")
                                               or _rocm_arch(gpu).startswith("gfx11"))
    if name == "FLASH_ATTN":
        sm90_fa4_dequant = gpu.cc_major == 9 and fa_version == 4
        return gpu.platform == "cuda" and not sm90_fa4_dequant
    if name == "FLASHINFER":
        return (gpu.cc_major == 10 and ac.get("use_trtllm_attention") is not False
                and not ac.get("disable_flashinfer_q_quantization", False)
                and req.quant_mode.is_quantized)
    return BACKENDS[name].supports_quant_query_input


def _canonical_kv(name: str, kv: str) -> tuple[str, list[str]]:
    """`_canonicalize_sparse_mla_kv_cache_dtype` (§6.1)."""
    if (name == "FLASHMLA_SPARSE" and quant_mode_of(kv).is_quantized and kv != "nvfp4_ds_mla") or (name == "FLASHINFER_MLA_SPARSE_SM120" and kv in ("auto", "fp8", "fp8_e4m3")):
        new = "fp8_ds_mla"
    else:
        if name == "FLASHINFER_MLA_SPARSE" and kv in ("fp8", "fp8_e4m3"):
            return kv, ["Using standard fp8 KV cache format. To use DeepSeek's fp8_ds_mla KV cache "
                        "format, please set `--attention-backend FLASHMLA_SPARSE`"]
        return kv, []
    if new == kv:
        return kv, []
    return new, [f"Using {new} KV cache format for {name} backend."]


def _fail(base: dict[str, Any], msg: str, stage: ErrorStage, etype: str) -> BackendChoice:
    return BackendChoice(**{**base, "status": "error", "error": msg, "error_stage": stage,
                            "error_type": etype})


def _forced_name(req: BackendRequest, forced: str | None, ac: Mapping[str, Any]) -> str | None:
    per_kind = ac.get("backend_per_kind") or {}
    name = per_kind.get(attention_kind(req)) or forced or ac.get("backend")
    if name is None:
        return None
    name = str(name).strip().upper()
    if name.startswith("ATTENTIONBACKENDENUM."):
        name = name.split(".", 1)[1]
    if name not in BACKENDS:
        import difflib

        close = difflib.get_close_matches(name, list(BACKENDS), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise KvplanInputError(
            f"unknown or unmodelled attention backend {name!r}.{hint}",
            f"pass one of: {', '.join(sorted(BACKENDS))} (see `kvplan backends`)")
    return name


def _priority(req: BackendRequest, gpu: GpuProfile, ac: Mapping[str, Any]) -> tuple[str, ...]:
    if gpu.platform == "cuda":
        return cuda_priority(gpu.cc_major or 0, use_mla=req.use_mla, use_sparse=req.use_sparse,
                             causal=req.attn_type == "decoder",
                             kv_quantized=req.quant_mode.is_quantized, num_heads=req.num_heads,
                             head_size=req.head_size)
    if gpu.platform == "rocm":
        arch = _rocm_arch(gpu)
        return rocm_priority(use_mla=req.use_mla, use_sparse=req.use_sparse,
                             aiter=bool(ac.get("rocm_use_aiter", False)),
                             aiter_supported=arch.startswith(("gfx94", "gfx95")))
    return cpu_priority(use_mla=req.use_mla, amx="amx" in gpu.arch)


# ============================================================================ select_backend
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

    # ---- config-time checks that depend only on the dtype strings (§1.1, §8)
    valid = kv_cache_dtypes_for(engine) or VLLM_033_KV_CACHE_DTYPES
    if kv not in valid:
        return _fail(base, f"Invalid kv_cache_dtype: {kv!r}. Valid values are: "
                           f"{list(valid)}", "config", "ValueError")
    if kv in ("float16", "bfloat16") and kv != req.model_dtype:
        allowed = "`auto`" if req.model_dtype == "float32" else f"`auto` or `{req.model_dtype}`"
        return _fail(base, f'kv_cache_dtype="{kv}" is incompatible with dtype="{req.model_dtype}". '
                           f"Please set `--kv-cache-dtype` to {allowed}.", "config", "ValueError")
    if req.use_mla and kv.startswith("nvfp4") and kv != "nvfp4_ds_mla":
        return _fail(base, "nvfp4 KV cache is not supported with MLA models. Please use a different "
                           "--kv-cache-dtype (e.g., 'fp8', 'auto', or 'nvfp4_ds_mla' with a sparse "
                           "MLA backend).", "config", "ValueError")

    if gpu.platform == "cuda" and req.model_dtype == "bfloat16" and not gpu.cc_at_least(8, 0):
        # vllm/platforms/cuda.py check_if_supports_dtype (the Triton impl's bf16 branch is behind it)
        return _fail(base, "Bfloat16 is only supported on GPUs with compute capability of at least "
                           f"8.0. Your {gpu.display_name} GPU has compute capability {gpu.cc_str}. "
                           "You can use float16 instead by explicitly setting the `dtype` flag in "
                           "CLI, for example: --dtype=half.", "config", "ValueError")

    forced_name = _forced_name(req, forced, ac)
    notes: list[str] = []
    rejected: dict[str, tuple[str, ...]] = {}
    chosen: str | None = None

    # ---- CPU platform: no priority walk for dense layers (vllm/platforms/cpu.py)
    if gpu.platform == "cpu" and forced_name is None:
        cand = _priority(req, gpu, ac)
        row = BACKENDS[cand[0]]
        if kv not in row.kv_cache_dtypes:
            msg = (f"--kv-cache-dtype {kv} is not supported by MLA attention on CPU." if req.use_mla
                   else f"--kv-cache-dtype {kv} is not supported by the CPU attention backend on "
                        "this host.")
            return _fail({**base, "candidates": cand}, msg, "selection", "ValueError")
        if not req.use_mla:  # dense layers always get CPU_ATTN: no validate_configuration walk (§5.1)
            return _finish(req, gpu, ac, cand[0], False, cand, {}, [], base)

    if forced_name is not None:
        candidates: tuple[str, ...] = (forced_name,)
        reasons = validate_backend(forced_name, req, gpu, ac)
        tolerant = (gpu.platform == "rocm" and forced_name in ("TURBOQUANT", "ULTRAQUANT"))
        if reasons and tolerant:
            # ROCm tolerates a forced TurboQuant/UltraQuant backend on boundary (skipped) layers.
            notes.append(f"forced backend {forced_name} is not valid for this layer "
                         f"({'; '.join(reasons)}); ROCm falls back to automatic selection.")
            forced_name = None
        elif reasons:
            return _fail({**base, "forced": True, "candidates": candidates,
                          "rejected": {forced_name: tuple(reasons)}},
                         f"Selected backend AttentionBackendEnum.{forced_name} is not valid for this "
                         f"configuration. Reason: {reasons!r}", "selection", "ValueError")
        else:
            chosen = forced_name
    if chosen is None:
        candidates = _priority(req, gpu, ac)
        for name in candidates:
            reasons = validate_backend(name, req, gpu, ac)
            if reasons:
                rejected[name] = tuple(reasons)
            elif chosen is None:
                chosen = name
        if chosen is None:
            reasons_str = "{" + ", ".join(f"{n}: [{', '.join(r)}]" for n, r in rejected.items()) + "}"
            msg = (f"No valid attention backend found for {gpu.platform} with "
                   f"{_selector_config_repr(req)}. Reasons: {reasons_str}.")
            if gpu.platform == "rocm":
                supported = sorted({d for n in candidates for d in BACKENDS[n].kv_cache_dtypes})
                msg += f" Supported kv_cache_dtype values: {supported}"
            return _fail({**base, "candidates": candidates, "rejected": rejected, "notes": tuple(notes)},
                         msg, "selection", "ValueError")

    return _finish(req, gpu, ac, chosen, forced_name is not None, candidates, rejected, notes, base)


def _finish(req: BackendRequest, gpu: GpuProfile, ac: Mapping[str, Any], name: str, forced: bool,
            candidates: tuple[str, ...], rejected: dict[str, tuple[str, ...]], notes: list[str],
            base: dict[str, Any]) -> BackendChoice:
    """Impl/builder construction checks, logs, query dtypes and block size for the chosen backend."""
    row = BACKENDS[name]
    kv = req.kv_cache_dtype
    mode = req.quant_mode
    fa_version: int | None = None
    if name == "FLASH_ATTN":
        fa_version, fa_notes = flash_attn_version(gpu, req, ac)
        notes.extend(fa_notes)
    effective, canon_notes = _canonical_kv(name, kv)
    notes.extend(canon_notes)
    qq = _query_quant(name, req, gpu, ac, fa_version)

    if req.block_size is not None:
        block = req.block_size
    elif name == "FLASH_ATTN" and fa_version == 4 and gpu.cc_major == 9 and mode.is_quantized:
        block = 64  # _get_sm90_fa4_fp8_kv_block_size: 64-token pages for the SM90 FA4 dequant path
    else:
        block = _default_block_size(row, gpu)

    pq = dq = pk = dk = None
    if name == "FLASHINFER":
        fi = flashinfer_query_dtypes(gpu, kv, req.model_dtype, req.head_size, ac,
                                     has_sinks=req.has_sinks)
        pq, dq, pk, dk = fi.prefill_query_dtype, fi.decode_query_dtype, fi.prefill_kernel, fi.decode_kernel
        notes.append(fi.log_line)
    elif not req.use_mla:
        pq = dq = _fp8_torch_dtype_for(kv, gpu) if qq else req.model_dtype

    # ---- informational notes (warnings vLLM logs, code-reading risks)
    if mode.is_quantized and gpu.fp8 == "e4m3fnuz" and mode in (QuantMode.fp8_per_tensor,
                                                                QuantMode.fp8_per_token_head):
        notes.append("FP8 KV is stored as float8_e4m3fnuz (max 240); checkpoint k/v/q scales are "
                     "doubled at load (is_fp8_fnuz); per-token-head FP8 clamps to +-224.")
    if name == "TRITON_ATTN" and kv == "fp8_e5m2":
        notes.append(f"fp8_e5m2 on TRITON_ATTN is stored as e4m3 ({gpu.fp8_torch_dtype or 'float8_e4m3fn'}): "
                     "the Triton write/read path views the cache as current_platform.fp8_dtype().")
    if qq and kv not in ("fp8", "fp8_e4m3") and not kv.startswith("nvfp4"):
        notes.append(f"risk: Attention.forward asserts kv_cache_dtype in {{'fp8', 'fp8_e4m3'}} (or "
                     f"nvfp4*) when query quantization is active; {kv} on {name} would raise "
                     "AssertionError at the first forward (code reading, not executed; reference §4.5).")
    if name == "FLASH_ATTN" and qq and fa_version == 3 and req.model_dtype == "float16":
        notes.append("FA3 requires BF16 output when the query input is FP8: a float16 model with an "
                     "FP8 KV cache on FA3 may fail (upstream test_fp8 forces dtype=bfloat16 on SM90).")
    if name == "FLASHINFER" and mode is QuantMode.fp8_per_tensor and gpu.cc_major == 8:
        notes.append("FlashInfer fa2 dequantizes the FP8 cache and keeps model-dtype queries; if "
                     "FlashInfer is not installed vLLM falls through to TRITON_ATTN"
                     + (", which raises on this GPU (FP8 needs SM89+)." if not gpu.cc_at_least(8, 9)
                        else "."))
    if req.use_per_head_quant_scales and not mode.is_quantized:
        notes.append("per-head (attn_head) checkpoint scales restrict even this unquantized layer "
                     "to FLASH_ATTN with FA >= 3 (use_per_head_quant_scales comes from the checkpoint).")
    if name == "TURBOQUANT":
        notes.append("TurboQuant boundary layers (first/last 2) stay in the model dtype and run "
                     "FlashAttention forced to version 2.")
    if gpu.platform == "rocm" and gpu.fp8 == "none" and kv.startswith("fp8"):
        notes.append(f"{gpu.display_name} has no FP8 hardware; vLLM's ROCm FP8 KV support on "
                     f"{gpu.arch} is not modelled by kvplan.")

    out = {**base, "backend": name, "forced": forced, "flash_attn_version": fa_version,
           "candidates": candidates, "rejected": rejected, "query_quant": qq,
           "prefill_query_dtype": pq, "decode_query_dtype": dq, "prefill_kernel": pk,
           "decode_kernel": dk, "effective_kv_cache_dtype": effective, "block_size": block}

    def fail(msg: str, stage: ErrorStage, etype: str) -> BackendChoice:
        return _fail({**out, "notes": tuple(notes)}, msg, stage, etype)

    # ---- impl / builder construction errors (§8)
    if name in ("TRITON_ATTN", "TRITON_MLA") and gpu.platform == "cuda":
        cc = gpu.compute_capability or (0, 0)
        if kv.startswith("fp8") and cc < (8, 9):
            rerun = "bfloat16" if cc >= (8, 0) else "float16"
            return fail(f"FP8 KV cache is not supported by the Triton attention backend on "
                        f"{gpu.display_name} (compute capability {gpu.cc_str}); native FP8 (fp8e4nv) "
                        f"requires SM89+. Re-run with --kv-cache-dtype {rerun}.", "impl", "ValueError")
    if name == "FLASH_ATTN" and mode.is_quantized and not _fa_supports_kv_dtype(
            fa_version, gpu, kv, req.head_size):
        return fail(f"FlashAttention does not support {kv} kv-cache on this device.", "impl",
                    "NotImplementedError")
    if name == "FLASH_ATTN_MLA" and mode.is_quantized:
        return fail("FlashAttnMLA V1 with FP8 KV cache not yet supported", "impl",
                    "NotImplementedError")
    if name == "FLASHINFER" and mode is QuantMode.nvfp4 and gpu.cc_major == 10 and \
            ac.get("use_trtllm_attention") is False:
        return fail(f"--kv-cache-dtype {kv} requires the SM100 trtllm-gen FlashInfer path.",
                    "builder", "ValueError")
    if name == "CPU_ATTN" and mode.is_quantized:
        if gpu.fp8 == "none":
            return fail("FP8 KV cache on CPU requires x86 with AVX-512 or AMX.", "impl",
                        "NotImplementedError")
        if req.head_size % 32 != 0:
            return fail(f"FP8 KV cache on CPU requires head_size to be a multiple of 32 (got "
                        f"{req.head_size}). (kvplan wording)", "impl", "NotImplementedError")
    if req.attn_type in ("encoder", "encoder_only") and mode.is_quantized:
        text = ("quantization is not supported for encoder attention" if name == "FLASH_ATTN"
                else "quantized KV cache is not supported for encoder attention")
        return fail(text, "forward", "NotImplementedError")
    return BackendChoice(**{**out, "notes": tuple(notes)})


# ============================================================================ FlashInfer #39002
def flashinfer_group_query_dtype_crash(engine: EngineVersion, layer_quant_modes: Iterable[QuantMode],
                                       global_kv_cache_dtype: str, gpu: GpuProfile, *,
                                       model_dtype: str = "bfloat16", flashinfer_in_use: bool = True,
                                       attention_config: Mapping[str, Any] | None = None) -> str | None:
    """The crash FP8 KV + skip layers caused on FlashInfer before PR #39002, else None.

    Before the fix (vLLM >=0.19,<0.20 by kvplan's version mapping) the FlashInfer metadata builder
    read the GLOBAL cache dtype, so a group of skipped (model-dtype) layers got FP8 queries on a GPU
    where FlashInfer quantizes the query (family 100) and the first forward failed. Returns vLLM's
    message, e.g. "Query dtype mismatch: expected torch.float8_e4m3fn, got torch.bfloat16".
    Engines other than vLLM are not modelled (None).
    """
    ac = attention_config or {}
    if not engine_feature("flashinfer_skip_layer_query_dtype_crash").holds_for(engine):
        return None
    modes = set(layer_quant_modes)
    if not flashinfer_in_use or not gpu.is_family(100) or gpu.platform != "cuda":
        return None
    if quant_mode_of(global_kv_cache_dtype) is not QuantMode.fp8_per_tensor:
        return None
    if QuantMode.none not in modes or not any(m.is_quantized for m in modes):
        return None
    if ac.get("disable_flashinfer_q_quantization") or ac.get("use_trtllm_attention") is False:
        return None
    expected = "float8_e5m2" if global_kv_cache_dtype == "fp8_e5m2" else "float8_e4m3fn"
    return f"Query dtype mismatch: expected torch.{expected}, got torch.{model_dtype}"


# ============================================================================ ROCm FP8
def rocm_fp8_notes(gpu: GpuProfile) -> Fp8FormatNotes | None:
    """FP8 KV format facts for an AMD GPU (None for NVIDIA/CPU): fnuz range, scale doubling."""
    if gpu.vendor != "amd":
        return None
    if gpu.fp8 == "e4m3fnuz":
        notes = (
            f"{gpu.arch} stores FP8 KV as float8_e4m3fnuz (max +-240), not OCP float8_e4m3fn "
            "(+-448): the same bytes mean half the value.",
            "Checkpoint k/v/q/prob scales (calibrated for e4m3fn) are doubled at load "
            "(BaseKVCacheMethod.process_weights_after_loading, is_fp8_fnuz); default 1.0 scales "
            "are not doubled.",
            "compressed-tensors scales are copied as-is (no x2).",
            "fp8_per_token_head quantizes to +-224 (get_fp8_min_max), not 240.",
        )
        return Fp8FormatNotes(gpu=gpu.name, fp8_dtype="float8_e4m3fnuz", fp8_max=240.0,
                              per_token_head_max=224.0, checkpoint_scale_multiplier=2.0, notes=notes)
    if gpu.fp8 == "e4m3fn":
        return Fp8FormatNotes(
            gpu=gpu.name, fp8_dtype="float8_e4m3fn", fp8_max=448.0, per_token_head_max=448.0,
            checkpoint_scale_multiplier=1.0,
            notes=(f"{gpu.arch} uses OCP float8_e4m3fn (not fnuz): scales load unchanged.",))
    return Fp8FormatNotes(
        gpu=gpu.name, fp8_dtype=None, fp8_max=None, per_token_head_max=None,
        checkpoint_scale_multiplier=1.0,
        notes=(f"{gpu.arch} has no FP8 hardware; kvplan does not model vLLM FP8 KV on it.",))


# ============================================================================ MLA prefill (§6.2)
def _prefill_reasons(name: str, gpu: GpuProfile, dims: MlaDims) -> list[str]:
    if gpu.platform != "cuda":
        return [f"MLA prefill backends on {gpu.platform} are not modelled"]
    if name == "FLASH_ATTN":
        return [] if gpu.cc_at_least(8, 0) else ["compute capability not supported"]
    if not gpu.is_family(100):
        return ["compute capability not supported (SM100 family only)"]
    if name == "TOKENSPEED_MLA" and dims.triple != (128, 64, 128):
        return ["only DeepSeek-R1 MLA dims (qk_nope 128, rope 64, v 128) are supported"]
    return []


def mla_prefill_backend(gpu: GpuProfile, mla_dims: MlaDims,
                        attention_config: Mapping[str, Any] | None = None
                        ) -> tuple[str | None, tuple[tuple[str, tuple[str, ...]], ...]]:
    """`get_mla_prefill_backend_cls`: the MLA prefill backend and the candidates tried.

    Returns (name or None, ((candidate, reasons), ...)); reasons empty for the chosen one. A pinned
    `attention_config["mla_prefill_backend"]` is validated alone (invalid -> (None, ...)).
    """
    ac = attention_config or {}
    pinned = ac.get("mla_prefill_backend")
    if pinned:
        name = str(pinned).upper()
        if name not in ("FLASH_ATTN", "TRTLLM_RAGGED", "FLASHINFER", "TOKENSPEED_MLA"):
            raise KvplanInputError(f"unknown mla_prefill_backend {pinned!r}.",
                                   "use FLASH_ATTN, TRTLLM_RAGGED, FLASHINFER or TOKENSPEED_MLA")
        reasons = tuple(_prefill_reasons(name, gpu, mla_dims))
        return (None if reasons else name), ((name, reasons),)
    if gpu.platform == "cuda" and gpu.is_family(100):
        if mla_dims.triple == (192, 64, 256):
            order: tuple[str, ...] = ("TRTLLM_RAGGED", "FLASH_ATTN", "FLASHINFER", "TOKENSPEED_MLA")
        else:
            order = ("FLASH_ATTN", "TRTLLM_RAGGED", "FLASHINFER", "TOKENSPEED_MLA")
    else:
        order = ("FLASH_ATTN",)
    tried: list[tuple[str, tuple[str, ...]]] = []
    for name in order:
        reasons = tuple(_prefill_reasons(name, gpu, mla_dims))
        tried.append((name, reasons))
        if not reasons:
            return name, tuple(tried)
    return None, tuple(tried)


_LOG_FP8 = "FP8 prefill attention enabled: query data type is FP8"
_LOG_FLAG = ("Unable to perform FP8 prefill attention when use_prefill_query_quantization is enabled. "
             "Please ensure that --kv-cache-dtype is set to fp8 and your prefill backend is "
             "compatible with FP8 attention.")
_LOG_WARN = ("FP8 KV cache is enabled but prefill queries are not quantized to FP8. For long-context "
             "workloads (ISL >= 4K), enabling FP8 prefill attention can significantly optimize "
             "prefill latency. To enable, add: --attention-config "
             "'{\"use_prefill_query_quantization\": true}'")
LONG_ISL = 4096


def _flag(cfg: Mapping[str, Any]) -> str | None:
    if not cfg:
        return None
    return f"--attention-config '{json.dumps(dict(cfg), sort_keys=True)}'"


def prefill_query_advice(gpu: GpuProfile, global_kv_cache_dtype: str, mla_dims: MlaDims,
                         attention_config: Mapping[str, Any] | None = None,
                         engine: EngineVersion | None = None, input_len: int | None = None, *,
                         model_dtype: str = "bfloat16") -> PrefillQueryAdvice:
    """Reproduce `determine_prefill_query_data_type` for an MLA model and advise on FP8 prefill Q.

    Branches (vLLM 0.33): 1 quantized KV + flag + FP8-capable prefill backend -> FP8 (INFO);
    2 flag set otherwise -> model dtype (INFO); 3 quantized KV + capable backend, no flag ->
    model dtype + WARNING; 4 -> model dtype silently. kvplan then recommends FP8 prefill queries
    only for quantized KV on the SM100 family with a long prompt (ISL >= 4K: FP8 FMHA up to
    1.28-1.4x faster; ISL ~1K: ~20% slower, vLLM PR #31195 / #39752).
    """
    engine = engine or EngineVersion()
    ac = dict(attention_config or {})
    refs = (_PR + "31195", _PR + "39752", _ISSUE + "39751", _ISSUE + "50056", _PR + "50181")
    kv_q = quant_mode_of(global_kv_cache_dtype).is_quantized
    flag = bool(ac.get("use_prefill_query_quantization", False))
    common: dict[str, Any] = {"engine": str(engine), "gpu": gpu.name,
                              "global_kv_cache_dtype": global_kv_cache_dtype,
                              "kv_cache_quantized": kv_q, "flag_enabled": flag,
                              "input_len": input_len, "references": refs}
    if engine.engine != "vllm":
        return PrefillQueryAdvice(
            **common, status="not_modelled", prefill_backend=None, prefill_backend_pinned=False,
            prefill_candidates=(), backend_supports_fp8_prefill_query=False, branch=4,
            log_level=None, log_line=None, prefill_query_dtype=model_dtype,
            flag_silently_ignored=False, error=None, recommendation="not_applicable",
            explanation=f"MLA prefill query dtype for {engine.engine} is not modelled yet.",
            recommended_attention_config=None, attention_config_flag=None)

    pinned = bool(ac.get("mla_prefill_backend"))
    backend, tried = mla_prefill_backend(gpu, mla_dims, ac)
    error = None
    if pinned and backend is None:
        error = (f"mla_prefill_backend {str(ac['mla_prefill_backend']).upper()} is not valid for this "
                 f"configuration: {'; '.join(tried[0][1])}. (kvplan wording)")
    family100 = gpu.platform == "cuda" and gpu.is_family(100)
    supports = family100 and backend in MLA_PREFILL_FP8_QUERY_BACKENDS
    fp8 = gpu.fp8_torch_dtype or "float8_e4m3fn"
    has_flag_feature = engine_feature("use_prefill_query_quantization").holds_for(engine)
    has_warning = engine_feature("fp8_prefill_query_warning").holds_for(engine)
    if not has_flag_feature:
        flag = False

    branch: Literal[1, 2, 3, 4]
    if kv_q and flag and supports:
        branch, level, line, qdtype = 1, "INFO", _LOG_FP8, fp8
    elif flag:
        branch, level, line, qdtype = 2, "INFO", _LOG_FLAG, model_dtype
    elif kv_q and supports:
        branch, qdtype = 3, model_dtype
        level, line = ("WARNING", _LOG_WARN) if has_warning else (None, None)
    else:
        branch, level, line, qdtype = 4, None, None, model_dtype
    silently_ignored = flag and kv_q and family100 and not pinned and backend == "FLASH_ATTN"

    # ---- recommendation
    pin: str | None = None
    if family100 and backend not in MLA_PREFILL_FP8_QUERY_BACKENDS:
        # vLLM's own candidate order for these dims, first FP8-capable one that validates.
        pin = next((n for n in ("TRTLLM_RAGGED", "FLASHINFER", "TOKENSPEED_MLA")
                    if not _prefill_reasons(n, gpu, mla_dims)), None)
    enable_cfg = {k: v for k, v in ac.items()}
    enable_cfg["use_prefill_query_quantization"] = True
    if pin:
        enable_cfg["mla_prefill_backend"] = pin
    disable_cfg = {k: v for k, v in ac.items() if k != "use_prefill_query_quantization"}
    ignored_txt = (" Today the flag is silently ignored: the default MLA prefill backend on this GPU "
                   "for these dims is FLASH_ATTN (vLLM issue #50056), so vLLM only logs an INFO line."
                   if silently_ignored else "")
    pin_txt = (f" Pinning mla_prefill_backend={pin} is required because the default prefill backend "
               f"({backend}) takes no FP8 queries." if pin else "")
    rec_cfg: dict[str, Any] | None
    if not has_flag_feature:
        rec, expl, rec_cfg = ("not_applicable", f"vLLM {engine.version_str} predates "
                              "use_prefill_query_quantization (PR #31195).", None)
    elif not kv_q:
        rec = "not_applicable"
        expl = ("FP8 prefill queries need a quantized KV cache; the global kv_cache_dtype "
                f"{global_kv_cache_dtype!r} is not quantized.")
        rec_cfg = disable_cfg if flag else None
    elif not family100:
        rec = "not_applicable"
        expl = (f"Only SM100-family prefill backends (FLASHINFER, TRTLLM_RAGGED, TOKENSPEED_MLA) take "
                f"FP8 prefill queries in vLLM 0.33; {gpu.display_name} keeps {model_dtype} prefill "
                "queries.")
        rec_cfg = disable_cfg if flag else None
    elif input_len is None:
        rec = "depends_on_input_len"
        expl = ("Enable FP8 prefill queries only for long prompts: at ISL >= 4K the FP8 FMHA prefill "
                "is faster (1.28x kernel time at 128K on GB300, issue #39751; up to 1.4x per PR "
                "#39752), at ISL ~1K it regresses ~20% (PR #31195)." + pin_txt + ignored_txt)
        rec_cfg = enable_cfg
    elif input_len >= LONG_ISL:
        rec = "enable"
        expl = (f"ISL {input_len} >= 4K: FP8 prefill queries speed up MLA prefill (1.28x kernel time "
                "at 128K on GB300, issue #39751; up to 1.4x per PR #39752)." + pin_txt + ignored_txt)
        rec_cfg = enable_cfg
    else:
        rec = "keep_disabled"
        expl = (f"ISL {input_len} < 4K: FP8 prefill queries regress short prompts (~20% at ISL 1024, "
                "PR #31195 / #39752); keep bf16 prefill queries." + ignored_txt)
        rec_cfg = disable_cfg if flag else None
    if not engine.satisfies(ENGINE_VERSIONS):
        expl += f" (MLA prefill backend selection is modelled from vLLM {ENGINE_VERSIONS}.)"
    if branch == 3 and rec == "keep_disabled":
        expl += " vLLM's startup warning suggesting the flag can be ignored for this workload."
    if rec_cfg is not None and dict(rec_cfg) == ac:
        rec_cfg = None  # nothing to change
        if rec == "enable":
            expl += " Already enabled by the current --attention-config."
    flag_str = _flag(rec_cfg) if rec_cfg else None
    if rec_cfg is not None and not rec_cfg:
        expl += " Drop --attention-config."
    return PrefillQueryAdvice(
        **common, status="modelled", prefill_backend=backend, prefill_backend_pinned=pinned,
        prefill_candidates=tried, backend_supports_fp8_prefill_query=supports, branch=branch,
        log_level=level, log_line=line, prefill_query_dtype=qdtype,
        flag_silently_ignored=silently_ignored, error=error, recommendation=rec, explanation=expl,
        recommended_attention_config=rec_cfg, attention_config_flag=flag_str)
