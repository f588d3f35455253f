"""FlashAttention backends: FLASH_ATTN (FA2/FA3/FA4), FLASH_ATTN_MLA and FLASH_ATTN_MLA_SPARSE_FA4.

FA version and FP8 rules follow `vllm/v1/attention/backends/fa_utils.py` (reference §5.2, §5.4).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.impl.base import BackendHooks, ConstructionError, Site, is_quantized
from kvplan.backends.request import BackendRequest
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.gpu import GpuProfile

__all__ = ["HOOKS", "fa4_available", "fa_base_version", "fa_supports_kv_cache_dtype", "flash_attn_version",
           "leaves_fa_version_open"]


def fa4_available(gpu: GpuProfile) -> bool:
    """`is_fa_version_supported(4)`: the cute-DSL FA4 kernels run on Hopper and datacenter Blackwell."""
    return gpu.platform == "cuda" and gpu.cc_major in (9, 10)


def leaves_fa_version_open(backend: str | None) -> bool:
    """A chosen backend (--attention-backend / attention_config.backend) that lets a model class pick the
    FlashAttention version: none chosen, or FLASH_ATTN itself (Gemma4Config)."""
    return backend in (None, "FLASH_ATTN")


def fa_base_version(gpu: GpuProfile, attention_config: Mapping[str, Any]) -> int | None:
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
    if override == 4 and not fa4_available(gpu):
        return 2
    return override


def _fa4_head256_fallback(req: BackendRequest) -> str | None:
    """Why FA4's Blackwell head_size=256 kernel hands the layer to FA2, None if it keeps it
    (fa_utils.py::_fa4_hd256_fallback_reason, in its order; logits soft capping is not modelled)."""
    why = None
    if req.has_sinks:
        why = "attention sinks"
    elif req.quant_mode.is_quantized:
        why = f"quantized KV cache dtype {req.kv_cache_dtype}"
    elif req.block_size is not None and req.block_size % 128 != 0:
        why = f"a KV cache block size of {req.block_size}"
    return None if why is None else f"FA4's Blackwell head_size=256 kernel does not support {why}, defaulting to FA " \
                                    "version 2."


def flash_attn_version(gpu: GpuProfile, req: BackendRequest,
                       attention_config: Mapping[str, Any] | None = None) -> tuple[int | None, list[str]]:
    """FlashAttention version the FLASH_ATTN impl would run for this layer, plus warnings (§5.4).

    Modelled fallbacks: SM90 FA3 -> FA4 for head_size > 256; FA4 on Blackwell for head_size > 128
    except (256, 256) and (192, 128) -> FA2; the FA4 head-256 kernel -> FA2 with a quantized KV
    cache, sinks, or a block size that is not a multiple of 128.
    """
    version = fa_base_version(gpu, attention_config or {})
    if version is None:
        return None, []
    major = gpu.cc_major
    heads = (req.head_size, req.head_size_v or req.head_size)
    if version == 3 and major == 9 and req.head_size > 256 and fa4_available(gpu):
        version = 4
    if version != 4 or major != 10 or req.head_size <= 128:
        return version, []
    if heads == (256, 256):
        why = _fa4_head256_fallback(req)
        return (2, [why]) if why else (4, [])
    return (4 if heads == (192, 128) else 2), []


def fa_supports_kv_cache_dtype(version: int | None, gpu: GpuProfile, kv: str, head_size: int | None,
                               engine: EngineVersion | None = None) -> bool:
    """`flash_attn_supports_kv_cache_dtype` in the release `engine` (None: the newest; head_size None = unknown,
    as in validation)."""
    if not is_quantized(kv):
        return True
    if kv == "fp8_e5m2":
        return False  # never fp8_e5m2; any other quantized dtype is asked of the FA version, as fp8 is (a
        # dtype FLASH_ATTN does not list never gets here through the selector, only where a model class pins it)
    if version == 3 and gpu.cc_major == 9:
        return True
    if engine is not None and not engine_feature("flash_attn_fa4_fp8").holds_for(engine):
        return False  # before 0.27 FA3 on SM90 only
    if version == 4 and gpu.cc_major == 9:  # FA4's in-kernel dequant at head 512 from 0.31 (ENGINE_FEATURES)
        if engine is not None and not engine_feature("flash_attn_fa4_sm90_d512_fp8").holds_for(engine):
            return False
        return head_size is None or head_size == 512
    return version == 4 and gpu.cc_major == 10


_FP8_REASON = "FP8 KV cache requires FA3 on SM90, FA4 with head_size=512 on SM90, or FA4 on SM100"
"""flash_attn.py::FlashAttentionBackend.supports_combination's FP8 reason up to 0.33."""
_FP8_REASON_030 = "FP8 KV cache requires FA3 on SM90 or FA4 on SM100"
"""The same reason before 0.31 (no FA4 on SM90: ENGINE_FEATURES flash_attn_fa4_sm90_d512_fp8)."""
_FP8_REASON_034 = "FP8 KV requires FA3 (SM90), equal-d512 FA4 (SM90), or FA4 (SM100)."
"""The same reason from 0.34 (ENGINE_FEATURES flash_attn_fp8_reason_034)."""


class FlashAttn(BackendHooks):
    """FLASH_ATTN: head sizes, FP8 and per-head scales depend on the FA version the GPU runs."""

    encoder_quant_error: ClassVar[str] = "quantization is not supported for encoder attention"

    def head_size_ok(self, req: BackendRequest, gpu: GpuProfile, engine: EngineVersion) -> bool:
        h = req.head_size
        return h % 8 == 0 and (h <= 256 or (fa4_available(gpu) and h <= 512))

    def kv_cache_dtype_reasons(self, req: BackendRequest, gpu: GpuProfile, attention_config: Mapping[str, Any],
                               engine: EngineVersion) -> list[str]:
        # supports_kv_cache_dtype: flash_attn_supports_kv_cache_dtype without the layer's head size
        if fa_supports_kv_cache_dtype(fa_base_version(gpu, attention_config), gpu, req.kv_cache_dtype, None, engine):
            return []
        return ["kv_cache_dtype not supported"]

    def supports_sinks(self, gpu: GpuProfile, attention_config: Mapping[str, Any],
                       engine: EngineVersion | None = None) -> bool:
        # supports_sink -> fa_utils.py::flash_attn_supports_sinks: the GPU's FA version is 3 or 4
        return fa_base_version(gpu, attention_config) in (3, 4)

    def supports_per_head_quant_scales(self, gpu: GpuProfile, attention_config: Mapping[str, Any]) -> bool:
        return self.row.supports_per_head_quant_scales and (fa_base_version(gpu, attention_config) or 0) >= 3

    def release_reasons(self, req: BackendRequest, gpu: GpuProfile, engine: EngineVersion) -> list[str]:
        """flash_attn.py::FlashAttentionBackend.supports_combination of the release, in its order (vLLM returns
        the first reason only)."""
        quantized = req.quant_mode.is_quantized
        r: list[str] = []
        # 0.34: SM90 (exactly 9.0) at head 512 with a quantized cache runs FA4's fp8-dequant kernel, which pages
        # in 64-token blocks (ENGINE_FEATURES fa_sm90_d512_quantized_block_64).
        if (engine_feature("fa_sm90_d512_quantized_block_64").holds_for(engine) and quantized
                and gpu.compute_capability == (9, 0) and req.head_size == 512):
            if req.block_size is not None and req.block_size % 64 != 0:
                r.append("SM90 d512 FP8 KV requires a block size divisible by 64")  # vLLM's text
            elif req.use_sparse:
                r.append("SM90 d512 FP8 KV does not support block sparsity")
        if req.has_sinks and not gpu.cc_at_least(9, 0):
            r.append("sink not supported on compute capability < 9.0")  # vLLM's text
        version, _ = flash_attn_version(gpu, req)
        if quantized and engine_feature("flash_attn_fa4_fp8").holds_for(engine) \
                and not fa_supports_kv_cache_dtype(version, gpu, req.kv_cache_dtype, req.head_size, engine):
            # the FA version this layer's head size, sinks and block size run
            r.append(_FP8_REASON_034 if engine_feature("flash_attn_fp8_reason_034").holds_for(engine)
                     else _FP8_REASON if engine_feature("flash_attn_fa4_sm90_d512_fp8").holds_for(engine)
                     else _FP8_REASON_030)
        return r

    def flash_attn_version(self, req: BackendRequest, gpu: GpuProfile,
                           attention_config: Mapping[str, Any]) -> tuple[int | None, list[str]]:
        return flash_attn_version(gpu, req, attention_config)

    def _sm90_fa4_dequant(self, site: Site) -> bool:
        return site.gpu.cc_major == 9 and site.flash_attn_version == 4

    def query_quant(self, site: Site) -> bool:
        # SM90 FA4 dequantizes the cache in-kernel and keeps bf16 queries.
        return site.gpu.platform == "cuda" and not self._sm90_fa4_dequant(site)

    def default_block_size(self, site: Site) -> int:
        if self._sm90_fa4_dequant(site) and site.req.quant_mode.is_quantized:
            return 64  # _get_sm90_fa4_fp8_kv_block_size: 64-token pages for the SM90 FA4 dequant path
        req = site.req
        if (site.flash_attn_version == 4 and site.gpu.cc_major in (10, 11) and req.head_size == 256
                and req.head_size_v in (None, 256)):
            # get_preferred_block_size -> _get_fa4_hd256_block_size (0.33.0, 0.34.0): FA4's head-256 kernel on
            # Blackwell pages in FA4_HD256_PAGE_SIZE = 128 tokens (fa_utils.py::uses_fa4_hd256_kernel)
            return max(site.engine_block_size, 128)
        return super().default_block_size(site)

    def notes(self, site: Site, query_quant: bool) -> list[str]:
        if query_quant and site.flash_attn_version == 3 and site.req.model_dtype == "float16":
            return ["FA3 requires BF16 output when the query input is FP8: a float16 model with an FP8 KV "
                    "cache on FA3 may fail (upstream test_fp8 forces dtype=bfloat16 on SM90)."]
        return []

    def construction_error(self, site: Site) -> ConstructionError | None:
        req = site.req
        if req.quant_mode.is_quantized and not fa_supports_kv_cache_dtype(
                site.flash_attn_version, site.gpu, req.kv_cache_dtype, req.head_size, site.engine):
            return ConstructionError(f"FlashAttention does not support {req.kv_cache_dtype} kv-cache on this "
                                     "device.", "impl", "NotImplementedError")
        return None


class FlashAttnMla(BackendHooks):
    """FLASH_ATTN_MLA: lists fp8 nowhere, and its impl refuses a quantized cache."""

    def construction_error(self, site: Site) -> ConstructionError | None:
        if site.req.quant_mode.is_quantized:
            return ConstructionError("FlashAttnMLA V1 with FP8 KV cache not yet supported", "impl",
                                     "NotImplementedError")
        return None


class FlashAttnMlaSparseFa4(BackendHooks):
    """FLASH_ATTN_MLA_SPARSE_FA4: top-k in steps of 128 and DeepSeek-V3.2 latent dims only."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        r: list[str] = []
        if req.index_topk is None or req.index_topk % 128 != 0:
            r.append("index_topk must be a multiple of 128")
        if (req.kv_lora_rank, req.qk_rope_head_dim) not in ((512, 64), (None, None)):
            r.append("needs (kv_lora_rank, qk_rope_head_dim) == (512, 64)")
        return r


HOOKS: Mapping[str, type[BackendHooks]] = {
    "FLASH_ATTN": FlashAttn,
    "FLASH_ATTN_MLA": FlashAttnMla,
    "FLASH_ATTN_MLA_SPARSE_FA4": FlashAttnMlaSparseFa4,
}
"""Backends of this family with behaviour beyond their capability rows."""
