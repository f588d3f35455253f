"""KV advice around backend selection: FlashInfer's per-group query dtypes, the pre-#39002 FlashInfer
skip-layer crash, AMD FP8 format notes, and MLA prefill (backend choice and FP8 prefill queries).

Pure functions of the GPU profile, the dtype strings and `--attention-config`; no torch import.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.request import MlaDims
from kvplan.backends.vllm_rows import ENGINE_VERSIONS, MLA_PREFILL_FP8_QUERY_BACKENDS, engine_feature
from kvplan.errors import KvplanInputError
from kvplan.model.gpu import GpuProfile
from kvplan.model.vocab import QuantMode, quant_mode_of

__all__ = [
    "LONG_ISL",
    "FlashInferQueryDtypes",
    "Fp8FormatNotes",
    "PrefillQueryAdvice",
    "flashinfer_group_query_dtype_crash",
    "flashinfer_query_dtypes",
    "mla_prefill_backend",
    "prefill_query_advice",
    "rocm_fp8_notes",
]

_PR = "https://github.com/vllm-project/vllm/pull/"
_ISSUE = "https://github.com/vllm-project/vllm/issues/"


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




# ============================================================================ FlashInfer (§5.5)
@dataclass(frozen=True)
class _FiArch:
    """What FlashInfer's kernel choice reads of the GPU and `--attention-config`."""

    cc: tuple[int, int] | None
    major: int | None
    trt: bool | None  # use_trtllm_attention: None (auto) / True / False

    @property
    def xqa(self) -> bool:
        """SM90 exactly or family 120: XQA decode."""
        return self.cc == (9, 0) or self.major == 12

    @property
    def fp8_query_arch(self) -> bool:
        """SM90 prefill / family 100: FP8 queries for an FP8 cache."""
        return self.major == 10 or self.cc == (9, 0)

    @property
    def trtllm_gen(self) -> bool:
        """Family 100 with trtllm not forced off."""
        return self.major == 10 and self.trt is not False

    @property
    def native(self) -> str:
        return "native (fa3)" if self.cc == (9, 0) else "native (fa2)"


def _fi_query_dtypes(a: _FiArch, mode: QuantMode, model_dtype: str, fp8q: str) -> tuple[str, str]:
    """`FlashInferMetadataBuilder.get_q_data_type` for prefill and decode."""
    if mode is QuantMode.fp8_per_tensor:
        pq = fp8q if a.fp8_query_arch else model_dtype
        if a.xqa and a.trt is not False:
            return pq, model_dtype  # XQA decode reads fp8 KV with model-dtype queries
        return pq, pq
    if mode is QuantMode.nvfp4 and a.trtllm_gen:
        return "float8_e4m3fn", "float8_e4m3fn"
    return model_dtype, model_dtype


def _fi_prefill_kernel(a: _FiArch, mode: QuantMode, pq: str, has_sinks: bool) -> str:
    """`use_trtllm_attention(..., is_prefill=True)`."""
    if mode is QuantMode.nvfp4:
        return "trtllm-gen" if a.trtllm_gen else "native (fa2)" if a.major != 10 else a.native
    if a.trtllm_gen and (pq.startswith("float8") or has_sinks or a.trt or not mode.is_quantized):
        return "trtllm-gen"
    return a.native


def _fi_decode_kernel(a: _FiArch, mode: QuantMode, dq: str, has_sinks: bool, head_size: int) -> str:
    """`use_trtllm_attention(..., is_prefill=False)` with XQA's head-size limits."""
    dname = "trtllm-gen" if a.major == 10 else "xqa"
    xqa_head_ok = 16 <= head_size <= 256 and head_size % 16 == 0
    if mode is QuantMode.nvfp4 and a.trtllm_gen:
        return "trtllm-gen"
    if a.trt is False or not (a.major == 10 or a.xqa) or (dname == "xqa" and not xqa_head_ok):
        return a.native
    if dq.startswith("float8") or has_sinks or a.trt or (a.xqa and mode is QuantMode.fp8_per_tensor):
        return dname
    if mode is QuantMode.nvfp4:
        return "xqa" if a.major == 12 else "native (fa2)"
    if not mode.is_quantized:
        return f"{dname} (batches <= 256 tokens), else {a.native}"
    return a.native


def flashinfer_query_dtypes(gpu: GpuProfile, kv_cache_dtype: str, model_dtype: str = "bfloat16",
                            head_size: int = 128,
                            attention_config: Mapping[str, Any] | None = None, *,
                            has_sinks: bool = False) -> FlashInferQueryDtypes:
    """FlashInfer's per-group query dtypes and kernels for a layer's dtype (§5.5).

    `kv_cache_dtype` is the group's own dtype: since PR #39002 an unquantized (skipped) group is
    treated as `auto` even when the global dtype is fp8.
    """
    ac = attention_config or {}
    a = _FiArch(gpu.compute_capability, gpu.cc_major, ac.get("use_trtllm_attention"))
    mode = quant_mode_of(kv_cache_dtype)
    if ac.get("disable_flashinfer_q_quantization", False):
        pq = dq = model_dtype
    else:
        fp8q = "float8_e5m2" if kv_cache_dtype == "fp8_e5m2" else gpu.fp8_torch_dtype or "float8_e4m3fn"
        pq, dq = _fi_query_dtypes(a, mode, model_dtype, fp8q)
    pk = _fi_prefill_kernel(a, mode, pq, has_sinks)
    dk = _fi_decode_kernel(a, mode, dq, has_sinks, head_size)
    arch = f"sm{a.cc[0]}{a.cc[1]}" if a.cc else gpu.arch
    log = (f"FlashInfer resolved query dtypes: prefill={pq}, decode={dq}, decode_backend={dk}, "
           f"kv_cache_dtype={kv_cache_dtype if mode.is_quantized else 'auto'}, arch={arch}")
    return FlashInferQueryDtypes(prefill_query_dtype=pq, decode_query_dtype=dq, prefill_kernel=pk,
                                 decode_kernel=dk, log_line=log)


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
@dataclass(frozen=True)
class _PrefillBackend:
    """An MLA prefill backend as `get_mla_prefill_backend_cls` validates it."""

    sm100_family_only: bool
    dims: tuple[int, int, int] | None = None
    """(qk_nope, rope, v) the kernels require, None = any."""


_PREFILL_BACKENDS: Mapping[str, _PrefillBackend] = {
    "FLASH_ATTN": _PrefillBackend(sm100_family_only=False),
    "TRTLLM_RAGGED": _PrefillBackend(sm100_family_only=True),
    "FLASHINFER": _PrefillBackend(sm100_family_only=True),
    "TOKENSPEED_MLA": _PrefillBackend(sm100_family_only=True, dims=(128, 64, 128)),
}
# vllm/platforms/interface.py::get_mla_prefill_backend_cls candidate orders.
_SM100_ORDER_DSV3_WIDE = ("TRTLLM_RAGGED", "FLASH_ATTN", "FLASHINFER", "TOKENSPEED_MLA")  # dims 192/64/256
_SM100_ORDER = ("FLASH_ATTN", "TRTLLM_RAGGED", "FLASHINFER", "TOKENSPEED_MLA")
_OTHER_ORDER = ("FLASH_ATTN",)
_FP8_PIN_ORDER = ("TRTLLM_RAGGED", "FLASHINFER", "TOKENSPEED_MLA")
"""FP8-capable prefill backends in vLLM's candidate order: the first valid one is the pin kvplan advises."""


def _prefill_reasons(name: str, gpu: GpuProfile, dims: MlaDims) -> list[str]:
    if gpu.platform != "cuda":
        return [f"MLA prefill backends on {gpu.platform} are not modelled"]
    row = _PREFILL_BACKENDS[name]
    if not row.sm100_family_only:
        return [] if gpu.cc_at_least(8, 0) else ["compute capability not supported"]
    if not gpu.is_family(100):
        return ["compute capability not supported (SM100 family only)"]
    if row.dims is not None and dims.triple != row.dims:
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
        if name not in _PREFILL_BACKENDS:
            raise KvplanInputError(f"unknown mla_prefill_backend {pinned!r}.",
                                   "use FLASH_ATTN, TRTLLM_RAGGED, FLASHINFER or TOKENSPEED_MLA")
        reasons = tuple(_prefill_reasons(name, gpu, mla_dims))
        return (None if reasons else name), ((name, reasons),)
    order: tuple[str, ...]
    if gpu.platform == "cuda" and gpu.is_family(100):
        order = _SM100_ORDER_DSV3_WIDE if mla_dims.triple == (192, 64, 256) else _SM100_ORDER
    else:
        order = _OTHER_ORDER
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
_REFS = (_PR + "31195", _PR + "39752", _ISSUE + "39751", _ISSUE + "50056", _PR + "50181")
Branch = Literal[1, 2, 3, 4]
Recommendation = Literal["enable", "keep_disabled", "not_applicable", "depends_on_input_len"]


def _flag(cfg: Mapping[str, Any]) -> str | None:
    if not cfg:
        return None
    return f"--attention-config '{json.dumps(dict(cfg), sort_keys=True)}'"


@dataclass(frozen=True)
class _PrefillFacts:
    """What `determine_prefill_query_data_type` and kvplan's advice read."""

    gpu: GpuProfile
    engine: EngineVersion
    global_kv_cache_dtype: str
    model_dtype: str
    attention_config: dict[str, Any]
    input_len: int | None
    kv_quantized: bool
    flag: bool
    pinned: bool
    backend: str | None
    family100: bool

    @property
    def supports(self) -> bool:
        """`backend_supports_prefill_query_quantization()`."""
        return self.family100 and self.backend in MLA_PREFILL_FP8_QUERY_BACKENDS

    @property
    def silently_ignored(self) -> bool:
        """The flag is set but the default prefill backend (FLASH_ATTN) takes no FP8 queries (#50056)."""
        return self.flag and self.kv_quantized and self.family100 and not self.pinned and not self.supports


def _vllm_branch(f: _PrefillFacts) -> tuple[Branch, Literal["INFO", "WARNING"] | None, str | None, str]:
    """Branch of `determine_prefill_query_data_type`: (branch, log level, log line, query dtype)."""
    if f.kv_quantized and f.flag and f.supports:
        return 1, "INFO", _LOG_FP8, f.gpu.fp8_torch_dtype or "float8_e4m3fn"
    if f.flag:
        return 2, "INFO", _LOG_FLAG, f.model_dtype
    if f.kv_quantized and f.supports:
        if engine_feature("fp8_prefill_query_warning").holds_for(f.engine):
            return 3, "WARNING", _LOG_WARN, f.model_dtype
        return 3, None, None, f.model_dtype
    return 4, None, None, f.model_dtype


def _configs(f: _PrefillFacts, dims: MlaDims) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """(--attention-config that enables FP8 prefill queries, one that disables them, pinned backend)."""
    pin: str | None = None
    if f.family100 and f.backend not in MLA_PREFILL_FP8_QUERY_BACKENDS:
        pin = next((n for n in _FP8_PIN_ORDER if not _prefill_reasons(n, f.gpu, dims)), None)
    enable = {**f.attention_config, "use_prefill_query_quantization": True}
    if pin:
        enable["mla_prefill_backend"] = pin
    disable = {k: v for k, v in f.attention_config.items() if k != "use_prefill_query_quantization"}
    return enable, disable, pin


def _recommend(f: _PrefillFacts, dims: MlaDims) -> tuple[Recommendation, str, dict[str, Any] | None]:
    """kvplan's advice for the workload: (recommendation, explanation, --attention-config to use)."""
    enable, disable, pin = _configs(f, dims)
    off = disable if f.flag else None
    ignored = (" Today the flag is silently ignored: the default MLA prefill backend on this GPU for these "
               "dims is FLASH_ATTN (vLLM issue #50056), so vLLM only logs an INFO line."
               if f.silently_ignored else "")
    pinned = (f" Pinning mla_prefill_backend={pin} is required because the default prefill backend "
              f"({f.backend}) takes no FP8 queries." if pin else "")
    if not engine_feature("use_prefill_query_quantization").holds_for(f.engine):
        return ("not_applicable", f"vLLM {f.engine.version_str} predates use_prefill_query_quantization "
                "(PR #31195).", None)
    if not f.kv_quantized:
        return ("not_applicable", "FP8 prefill queries need a quantized KV cache; the global kv_cache_dtype "
                f"{f.global_kv_cache_dtype!r} is not quantized.", off)
    if not f.family100:
        return ("not_applicable", "Only SM100-family prefill backends (FLASHINFER, TRTLLM_RAGGED, "
                f"TOKENSPEED_MLA) take FP8 prefill queries in vLLM 0.33; {f.gpu.display_name} keeps "
                f"{f.model_dtype} prefill queries.", off)
    if f.input_len is None:
        return ("depends_on_input_len", "Enable FP8 prefill queries only for long prompts: at ISL >= 4K the "
                "FP8 FMHA prefill is faster (1.28x kernel time at 128K on GB300, issue #39751; up to 1.4x "
                "per PR #39752), at ISL ~1K it regresses ~20% (PR #31195)." + pinned + ignored, enable)
    if f.input_len >= LONG_ISL:
        return ("enable", f"ISL {f.input_len} >= 4K: FP8 prefill queries speed up MLA prefill (1.28x kernel "
                "time at 128K on GB300, issue #39751; up to 1.4x per PR #39752)." + pinned + ignored, enable)
    return ("keep_disabled", f"ISL {f.input_len} < 4K: FP8 prefill queries regress short prompts (~20% at "
            "ISL 1024, PR #31195 / #39752); keep bf16 prefill queries." + ignored, off)


def _not_modelled(common: dict[str, Any], engine: EngineVersion, model_dtype: str) -> PrefillQueryAdvice:
    return PrefillQueryAdvice(
        **common, status="not_modelled", prefill_backend=None, prefill_backend_pinned=False,
        prefill_candidates=(), backend_supports_fp8_prefill_query=False, branch=4,
        log_level=None, log_line=None, prefill_query_dtype=model_dtype,
        flag_silently_ignored=False, error=None, recommendation="not_applicable",
        explanation=f"MLA prefill query dtype for {engine.engine} is not modelled yet.",
        recommended_attention_config=None, attention_config_flag=None)


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
    kv_q = quant_mode_of(global_kv_cache_dtype).is_quantized
    flag = bool(ac.get("use_prefill_query_quantization", False))
    common: dict[str, Any] = {"engine": str(engine), "gpu": gpu.name,
                              "global_kv_cache_dtype": global_kv_cache_dtype,
                              "kv_cache_quantized": kv_q, "flag_enabled": flag,
                              "input_len": input_len, "references": _REFS}
    if engine.engine != "vllm":
        return _not_modelled(common, engine, model_dtype)

    pinned = bool(ac.get("mla_prefill_backend"))
    backend, tried = mla_prefill_backend(gpu, mla_dims, ac)
    error = None
    if pinned and backend is None:
        error = (f"mla_prefill_backend {str(ac['mla_prefill_backend']).upper()} is not valid for this "
                 f"configuration: {'; '.join(tried[0][1])}. (kvplan wording)")
    f = _PrefillFacts(gpu=gpu, engine=engine, global_kv_cache_dtype=global_kv_cache_dtype,
                      model_dtype=model_dtype, attention_config=ac, input_len=input_len, kv_quantized=kv_q,
                      flag=flag and engine_feature("use_prefill_query_quantization").holds_for(engine),
                      pinned=pinned, backend=backend, family100=gpu.platform == "cuda" and gpu.is_family(100))
    branch, level, line, qdtype = _vllm_branch(f)
    rec, expl, rec_cfg = _recommend(f, mla_dims)
    if not engine.satisfies(ENGINE_VERSIONS):
        expl += f" (MLA prefill backend selection is modelled from vLLM {ENGINE_VERSIONS}.)"
    if branch == 3 and rec == "keep_disabled":
        expl += " vLLM's startup warning suggesting the flag can be ignored for this workload."
    if rec_cfg is not None and dict(rec_cfg) == ac:
        rec_cfg = None  # nothing to change
        if rec == "enable":
            expl += " Already enabled by the current --attention-config."
    if rec_cfg is not None and not rec_cfg:
        expl += " Drop --attention-config."
    return PrefillQueryAdvice(
        **common, status="modelled", prefill_backend=backend, prefill_backend_pinned=pinned,
        prefill_candidates=tried, backend_supports_fp8_prefill_query=f.supports, branch=branch,
        log_level=level, log_line=line, prefill_query_dtype=qdtype,
        flag_silently_ignored=f.silently_ignored, error=error, recommendation=rec, explanation=expl,
        recommended_attention_config=rec_cfg, attention_config_flag=_flag(rec_cfg) if rec_cfg else None)
