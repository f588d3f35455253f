"""The hook interface every attention backend answers, with defaults that read its capability row.

vLLM keeps the checks shared by every backend in one `validate_configuration`
(`vllm/v1/attention/backend.py`) and each backend's quirks on that backend's class
(`supports_combination`, `supports_sink`, `get_supported_kernel_block_sizes`, the impl's
`__init__` errors, `supports_quant_query_input`, ...). kvplan mirrors that split: the shared walk
and validation live in :mod:`kvplan.backends.select`; a backend whose behaviour is more than its
`BackendCapability` row subclasses `BackendHooks` in its family module
(:mod:`kvplan.backends.impl.flash_attn`, ...). A backend with no quirks uses `BackendHooks` as is.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kvplan.backends.capabilities import BackendCapability, EngineVersion
from kvplan.backends.request import BackendRequest, ErrorStage
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.gpu import GpuProfile
from kvplan.model.vocab import quant_mode_of

__all__ = ["BackendHooks", "ConstructionError", "QueryDtypes", "Site", "canonicalized",
           "fp8_torch_dtype_for", "is_quantized", "rocm_arch"]


@dataclass(frozen=True)
class Site:
    """One layer on one GPU under one `--attention-config`: what a construction hook reads."""

    req: BackendRequest
    gpu: GpuProfile
    attention_config: Mapping[str, Any]
    flash_attn_version: int | None = None
    """FlashAttention version the chosen backend runs (set by `BackendHooks.flash_attn_version`)."""
    engine_block_size: int = 16
    """The release's `CacheConfig.DEFAULT_BLOCK_SIZE` (`kvplan.backends.defaults.default_block_size`)."""
    engine: EngineVersion = field(default_factory=EngineVersion)
    """The release modelled (construction checks that hold only in some releases read ENGINE_FEATURES)."""


@dataclass(frozen=True)
class QueryDtypes:
    """Query dtypes and kernel families a backend runs a layer with (None = not reported)."""

    prefill: str | None = None
    decode: str | None = None
    prefill_kernel: str | None = None
    decode_kernel: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConstructionError:
    """An error the chosen backend raises after selection (impl, metadata builder or first forward)."""

    message: str
    stage: ErrorStage
    error_type: str


def rocm_arch(gpu: GpuProfile) -> str:
    """The gfx target, lower case (`gfx942`)."""
    return gpu.arch.lower()


def fp8_torch_dtype_for(kv_cache_dtype: str, gpu: GpuProfile) -> str:
    """torch dtype an FP8 query/cache of this dtype string gets on the device."""
    if kv_cache_dtype == "fp8_e5m2":
        return "float8_e5m2"
    return gpu.fp8_torch_dtype or "float8_e4m3fn"


def canonicalized(backend: str, kv: str, new: str) -> tuple[str, list[str]]:
    """`_canonicalize_sparse_mla_kv_cache_dtype`'s result and its info line (none if unchanged)."""
    if new == kv:
        return kv, []
    return new, [f"Using {new} KV cache format for {backend} backend."]


class BackendHooks:
    """A backend's behaviour; every default reads only the capability row."""

    rocm_forced_fallback: ClassVar[bool] = False
    """ROCm tolerates this backend forced on layers it cannot serve and selects automatically."""
    global_dtype_queries_before_39002: ClassVar[bool] = False
    """Before vLLM PR #39002 the metadata builder took every KV group's query dtype from the GLOBAL
    cache dtype, so a skipped (model-dtype) layer got the FP8 layers' queries (FlashInfer)."""
    encoder_quant_error: ClassVar[str] = "quantized KV cache is not supported for encoder attention"
    """The NotImplementedError text for a quantized KV cache on encoder attention."""
    exact_block_sizes: ClassVar[bool] = False
    """`supports_block_size` accepts only the listed kernel block sizes (B12X, CPU_MLA override it); vLLM's
    default accepts any multiple of one (a larger block is split into kernel blocks)."""

    def __init__(self, row: BackendCapability) -> None:
        self.row = row

    @property
    def name(self) -> str:
        return self.row.name

    # ------------------------------------------------------------ validate_configuration parts
    def head_size_ok(self, req: BackendRequest, gpu: GpuProfile, engine: EngineVersion) -> bool:
        """`supports_head_size` in the release `engine`."""
        row, h = self.row, req.head_size
        if row.head_sizes is not None and h not in row.head_sizes:
            return False
        if row.use_mla and row.head_sizes and h == 512 and not engine_feature("mla_nope_head_512").holds_for(engine):
            return False  # the NoPE latent's head size is an MLA head size from 0.30 (ENGINE_FEATURES)
        if row.min_head_size is not None and h < row.min_head_size:
            return False
        if row.max_head_size is not None and h > row.max_head_size:
            return False
        return row.head_size_multiple_of is None or h % row.head_size_multiple_of == 0

    def kv_cache_dtype_reasons(self, req: BackendRequest, gpu: GpuProfile, attention_config: Mapping[str, Any],
                               engine: EngineVersion) -> list[str]:
        """Reasons a listed `supported_kv_cache_dtypes` entry is still refused in the release `engine`
        (`supports_kv_cache_dtype`, or a dtype the release does not list yet)."""
        return []

    def model_dtypes(self, engine: EngineVersion) -> tuple[str, ...]:
        """`supported_dtypes` in the release `engine`."""
        return self.row.model_dtypes

    def max_compute_capability(self, engine: EngineVersion) -> tuple[int, int] | None:
        """The upper bound of `supports_compute_capability` in the release `engine`."""
        return self.row.max_compute_capability

    def block_sizes(self, gpu: GpuProfile) -> tuple[int, ...] | None:
        """`get_supported_kernel_block_sizes` as explicit sizes (None = see `block_size_multiple_of`)."""
        return self.row.block_sizes

    def block_size_ok(self, block_size: int, gpu: GpuProfile) -> bool:
        """`supports_block_size`: the block size is a multiple of one kernel block size (a larger block is split
        into kernel pages, vllm/v1/attention/backend.py::AttentionBackend.supports_block_size)."""
        sizes, m = self.block_sizes(gpu), self.row.block_size_multiple_of
        if sizes is None and m is None:
            return True
        if sizes is not None and (block_size in sizes or (
                not self.exact_block_sizes and any(block_size % s == 0 for s in sizes))):
            return True
        return m is not None and block_size % m == 0

    def sliding_window_ok(self, engine: EngineVersion) -> bool:
        """`supports_sliding_window` in the release `engine`."""
        return self.row.supports_sliding_window

    def supports_sinks(self, gpu: GpuProfile, attention_config: Mapping[str, Any],
                       engine: EngineVersion | None = None) -> bool:
        """`supports_sink` in the release `engine` (None: the newest)."""
        return self.row.supports_sinks

    def supports_per_head_quant_scales(self, gpu: GpuProfile, attention_config: Mapping[str, Any]) -> bool:
        """`supports_per_head_quant_scales`."""
        return self.row.supports_per_head_quant_scales

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        """`supports_combination`: backend-specific reasons, checked last (kvplan wording unless noted)."""
        return []

    def release_reasons(self, req: BackendRequest, gpu: GpuProfile, engine: EngineVersion) -> list[str]:
        """`supports_combination` reasons that hold only in some releases (ENGINE_FEATURES ranges)."""
        return []

    # ------------------------------------------------------------ after selection
    def flash_attn_version(self, req: BackendRequest, gpu: GpuProfile,
                           attention_config: Mapping[str, Any]) -> tuple[int | None, list[str]]:
        """FlashAttention version the impl runs, and the warnings its fallbacks log."""
        return None, []

    def canonical_kv_cache_dtype(self, kv: str) -> tuple[str, list[str]]:
        """The dtype string after `_canonicalize_sparse_mla_kv_cache_dtype`, and its info lines."""
        return kv, []

    def fp8_ds_mla_row_bytes(self, kv_lora_rank: int, qk_rope_head_dim: int, engine: EngineVersion | None) -> int:
        """impl `get_fp8_ds_mla_row_bytes`: the bytes of one fp8_ds_mla token row the layer's MLAAttentionSpec
        stores (512 fp8 NoPE + 16 B of scales + 64 bf16 RoPE; vllm/v1/attention/backend.py, 0.34; 0.33:
        mla_attention.py::MLAAttention.get_kv_cache_spec, fixed). `engine` None: the newest release."""
        return 656

    def query_quant(self, site: Site) -> bool:
        """impl `supports_quant_query_input` (asked only for fp8*/nvfp4* dense layers, §4.5)."""
        return self.row.supports_quant_query_input

    def default_block_size(self, site: Site) -> int:
        """`AttentionBackend.get_preferred_block_size` (phase 1 of `update_block_size_for_backend` for a
        single backend): the release's default (16, 64 from 0.34) if the backend accepts it, else its
        smallest kernel block (FlashInfer-MLA [32, 64]: 32 at 0.33's default, 64 from 0.34)."""
        if self.block_size_ok(site.engine_block_size, site.gpu):
            return site.engine_block_size
        sizes = [*(self.block_sizes(site.gpu) or ()),
                 *((self.row.block_size_multiple_of,) if self.row.block_size_multiple_of else ())]
        return min(sizes) if sizes else site.engine_block_size

    def query_dtypes(self, site: Site, query_quant: bool) -> QueryDtypes:
        """Query dtypes per phase; MLA layers report none here (see `prefill_query_advice`)."""
        req = site.req
        if req.use_mla:
            return QueryDtypes()
        q = fp8_torch_dtype_for(req.kv_cache_dtype, site.gpu) if query_quant else req.model_dtype
        return QueryDtypes(prefill=q, decode=q)

    def notes(self, site: Site, query_quant: bool) -> list[str]:
        """Warnings/info the backend logs for the layer, and code-reading risks."""
        return []

    def construction_error(self, site: Site) -> ConstructionError | None:
        """The error the impl or metadata builder raises for this layer, None if it builds."""
        return None


def is_quantized(kv: str) -> bool:
    """`is_quantized_kv_cache`."""
    return quant_mode_of(kv).is_quantized
