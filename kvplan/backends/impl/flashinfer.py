"""FlashInfer backends: FLASHINFER (dense) and the FlashInfer MLA / sparse-MLA family.

Kernel choice (trtllm-gen, XQA, native fa2/fa3) follows `vllm/utils/flashinfer.py` (reference §5.5);
the per-group query dtypes are :func:`kvplan.backends.advice.flashinfer_query_dtypes`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.backends.advice import flashinfer_query_dtypes
from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.impl.base import BackendHooks, ConstructionError, QueryDtypes, Site, canonicalized
from kvplan.backends.request import BackendRequest
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.gpu import GpuProfile
from kvplan.model.vocab import QuantMode

__all__ = ["HOOKS"]

_SM100_TRTLLM_PAGES = (16, 32, 64, 128, 256, 512, 1024)


class FlashInfer(BackendHooks):
    """FLASHINFER: sinks and NVFP4 depend on the trtllm paths of the GPU; queries per KV group."""

    global_dtype_queries_before_39002 = True

    def block_sizes(self, gpu: GpuProfile) -> tuple[int, ...] | None:
        # trtllm-gen GQA pages up to 1024 on SM100
        return _SM100_TRTLLM_PAGES if gpu.cc_major == 10 else self.row.block_sizes

    def supports_sinks(self, gpu: GpuProfile, attention_config: Mapping[str, Any],
                       engine: EngineVersion | None = None) -> bool:
        if attention_config.get("use_trtllm_attention") is False:
            return False
        # SM90 (XQA) from 0.30 (ENGINE_FEATURES flashinfer_sm90_sinks)
        sm90 = engine is None or engine_feature("flashinfer_sm90_sinks").holds_for(engine)
        sm120 = engine is None or engine_feature("flashinfer_sm120_sinks").holds_for(engine)  # from 0.28
        return (sm90 and gpu.compute_capability == (9, 0)) or gpu.cc_major == 10 or (sm120 and gpu.cc_major == 12)

    def kv_cache_dtype_reasons(self, req: BackendRequest, gpu: GpuProfile, attention_config: Mapping[str, Any],
                               engine: EngineVersion) -> list[str]:
        # flashinfer.py::FlashInferBackend.supports_kv_cache_dtype: before 0.32 nvfp4 needs the SM100 trtllm-gen
        # path (ENGINE_FEATURES flashinfer_nvfp4_fa2)
        if (req.kv_cache_dtype.startswith("nvfp4") and gpu.cc_major != 10
                and not engine_feature("flashinfer_nvfp4_fa2").holds_for(engine)):
            return ["kv_cache_dtype not supported"]
        return []

    def release_reasons(self, req: BackendRequest, gpu: GpuProfile, engine: EngineVersion) -> list[str]:
        # flashinfer.py::FlashInferBackend.supports_combination: the fa2 nvfp4 path (0.32 on)
        kv = req.kv_cache_dtype
        if (not kv.startswith("nvfp4") or gpu.cc_major == 10
                or not engine_feature("flashinfer_nvfp4_fa2").holds_for(engine)):
            return []
        r: list[str] = []
        if kv != "nvfp4":
            r.append(f"{kv} KV cache requires the SM100 trtllm-gen path")
        if req.head_size == 64:
            r.append("nvfp4 KV cache does not support head_size 64 on the fa2 path")
        if req.has_sinks:
            r.append("nvfp4 KV cache does not support sinks on the fa2 path")
        return r

    def query_quant(self, site: Site) -> bool:
        ac = site.attention_config
        return (site.gpu.cc_major == 10 and ac.get("use_trtllm_attention") is not False
                and not ac.get("disable_flashinfer_q_quantization", False)
                and site.req.quant_mode.is_quantized)

    def query_dtypes(self, site: Site, query_quant: bool) -> QueryDtypes:
        req = site.req
        fi = flashinfer_query_dtypes(site.gpu, req.kv_cache_dtype, req.model_dtype, req.head_size,
                                     site.attention_config, has_sinks=req.has_sinks)
        return QueryDtypes(prefill=fi.prefill_query_dtype, decode=fi.decode_query_dtype,
                           prefill_kernel=fi.prefill_kernel, decode_kernel=fi.decode_kernel,
                           notes=(fi.log_line,))

    def notes(self, site: Site, query_quant: bool) -> list[str]:
        gpu = site.gpu
        if site.req.quant_mode is not QuantMode.fp8_per_tensor or gpu.cc_major != 8:
            return []
        tail = ", which raises on this GPU (FP8 needs SM89+)." if not gpu.cc_at_least(8, 9) else "."
        return ["FlashInfer fa2 dequantizes the FP8 cache and keeps model-dtype queries; if FlashInfer is "
                "not installed vLLM falls through to TRITON_ATTN" + tail]

    def construction_error(self, site: Site) -> ConstructionError | None:
        if (site.req.quant_mode is QuantMode.nvfp4 and site.gpu.cc_major == 10
                and site.attention_config.get("use_trtllm_attention") is False):
            return ConstructionError(f"--kv-cache-dtype {site.req.kv_cache_dtype} requires the SM100 "
                                     "trtllm-gen FlashInfer path.", "builder", "ValueError")
        return None


class FlashInferMla(BackendHooks):
    """FLASHINFER_MLA: the TRT-LLM MLA kernels take qk_nope 64, 128 or 192."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        dims = req.mla_dims
        if dims and dims.qk_nope_head_dim not in (64, 128, 192):
            return [f"qk_nope_head_dim {dims.qk_nope_head_dim} not supported"]
        return []


class FlashInferMlaSparse(BackendHooks):
    """FLASHINFER_MLA_SPARSE (TRT-LLM): needs the indexer top-k; keeps the standard fp8 format."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        r: list[str] = []
        if req.index_topk is None:
            r.append("index_topk is required")
        dims = req.mla_dims
        if dims:
            allowed = (256, 512) if dims.qk_rope_head_dim == 0 else (128, 192)
            if dims.qk_nope_head_dim not in allowed:
                r.append(f"qk_nope_head_dim {dims.qk_nope_head_dim} not supported")
        return r

    def canonical_kv_cache_dtype(self, kv: str) -> tuple[str, list[str]]:
        if kv in ("fp8", "fp8_e4m3"):
            return kv, ["Using standard fp8 KV cache format. To use DeepSeek's fp8_ds_mla KV cache format, "
                        "please set `--attention-backend FLASHMLA_SPARSE`"]
        return kv, []


class FlashInferMlaSparseSm120(BackendHooks):
    """FLASHINFER_MLA_SPARSE_SM120: top-k 2048 only; stores fp8_ds_mla even for `auto`."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        if req.index_topk is not None and req.index_topk != 2048:
            return [f"index_topk {req.index_topk} not supported (needs 2048)"]
        return []

    def canonical_kv_cache_dtype(self, kv: str) -> tuple[str, list[str]]:
        return canonicalized(self.name, kv, "fp8_ds_mla" if kv in ("auto", "fp8", "fp8_e4m3") else kv)

    def fp8_ds_mla_row_bytes(self, kv_lora_rank: int, qk_rope_head_dim: int, engine: EngineVersion | None) -> int:
        """From 0.34 a latent of 512 without RoPE is a 528-byte row (512 fp8 + 16 B of scales): ENGINE_FEATURES
        sm120_sparse_mla_nope_rows (flashinfer_mla_sparse_sm120.py::FlashInferMLASparseSM120Impl)."""
        if kv_lora_rank == 512 and qk_rope_head_dim == 0 and (
                engine is None or engine_feature("sm120_sparse_mla_nope_rows").holds_for(engine)):
            return 528
        return super().fp8_ds_mla_row_bytes(kv_lora_rank, qk_rope_head_dim, engine)


class FlashInferMlaSparseSm90(BackendHooks):
    """FLASHINFER_MLA_SPARSE_SM90: kv_lora_rank 512 with rope 0 or 64."""

    def combination_reasons(self, req: BackendRequest, gpu: GpuProfile) -> list[str]:
        if ((req.kv_lora_rank is not None and req.kv_lora_rank != 512)
                or (req.qk_rope_head_dim is not None and req.qk_rope_head_dim not in (0, 64))):
            return ["needs kv_lora_rank 512 and qk_rope_head_dim 0 or 64"]
        return []


HOOKS: Mapping[str, type[BackendHooks]] = {
    "FLASHINFER": FlashInfer,
    "FLASHINFER_MLA": FlashInferMla,
    "FLASHINFER_MLA_SPARSE": FlashInferMlaSparse,
    "FLASHINFER_MLA_SPARSE_SM120": FlashInferMlaSparseSm120,
    "FLASHINFER_MLA_SPARSE_SM90": FlashInferMlaSparseSm90,
}
"""Backends of this family with behaviour beyond their capability rows."""
