"""vLLM's attention-backend capability rows, priority orders and KV feature history, for every release (data).

The rows and priority orders are read from the base release's wheel, `vllm==0.33.0` (its attention selector and
backend classes; sections of the team's vLLM 0.33 KV-rules notes: §5.1 selection and priorities, §5.2 dense
backends, §6.1 MLA backends, §4.5 query quantization). `ENGINE_FEATURES` carries every difference of another
release as a row with its release range and the vLLM source it comes from; the per-release backend hooks
(`kvplan.backends.impl`) read them. `BACKEND_ORACLE_RELEASES` lists the releases whose own selector answered
scripts/oracle/backend_oracle.py's grid and agrees with these rows on every case.
Paths are package-relative (`vllm/...`); `backends/x.py` means `vllm/v1/attention/backends/x.py`.
"""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kvplan.backends.capabilities import BackendCapability, EngineFeature, EngineVersion

__all__ = [
    "BACKENDS",
    "BACKEND_ORACLE_RELEASES",
    "ENGINE_FEATURES",
    "ENGINE_VERSIONS",
    "MLA_PREFILL_BACKENDS",
    "MLA_PREFILL_FP8_QUERY_BACKENDS",
    "ORACLE_VERIFIED_RELEASES",
    "PRIORITY_ORDERS",
    "RELEASE_DATES",
    "TABLE_ENGINE",
    "cpu_priority",
    "cuda_priority",
    "engine_feature",
    "oracle_verified",
    "rocm_priority",
    "rows_for",
]

ENGINE_VERSIONS = ">=0.33,<0.34"
"""The vLLM versions these rows describe."""
TABLE_ENGINE = "vllm==0.33.0"
"""The release these rows were read from: what `kvplan backends` shows unless --engine names another.
Plans for newer releases use the rows plus the dated differences (ENGINE_FEATURES)."""

_PR = "https://github.com/vllm-project/vllm/pull/"
_BASE_KV = ("auto", "float16", "bfloat16")
_FP8 = ("fp8", "fp8_e4m3")
_ALL_ATTN = ("decoder", "encoder", "encoder_only", "encoder_decoder")
_PTH = ("int4_per_token_head", "int8_per_token_head", "fp8_per_token_head")
_TQ = ("turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc")
_OCTAVE = ("octave_k3v4", "octave_k3v3", "octave_k3v3_compact")
_MLA_HEADS = (320, 512, 576)


def _row(**kw: Any) -> BackendCapability:
    kw.setdefault("engine_versions", ENGINE_VERSIONS)
    return BackendCapability(**kw)


_ROWS: tuple[BackendCapability, ...] = (
    # ------------------------------------------------------------------ dense, CUDA
    _row(name="FLASH_ATTN", platforms=("cuda",), file="vllm/v1/attention/backends/flash_attn.py",
         kv_cache_dtypes=_BASE_KV + _FP8, min_compute_capability=(8, 0), head_size_multiple_of=8,
         max_head_size=256, block_size_multiple_of=16, supports_sliding_window=True,
         supports_sinks=True, supports_per_head_quant_scales=True, supports_quant_query_input=True,
         attn_types=_ALL_ATTN,
         notes=(
             "head_size <= 512 when FA4 is available (SM90/SM100 family), else <= 256.",
             "Quantized KV only if flash_attn_supports_kv_cache_dtype: never fp8_e5m2; SM90 with "
             "FA3 (or FA4 at head_size 512); SM100 family with FA4. SM80/86/89/120 run FA2: no FP8.",
             "Sinks need compute capability >= 9.0 (supports_combination).",
             "Per-head (attn_head) quant scales need FA version >= 3.",
             "FA version: SM90 -> 3 (4 for head > 256), SM100 family -> 4, else 2; FA4 head-256 "
             "kernel falls back to FA2 with a quantized KV cache (impl then raises "
             "'FlashAttention does not support <dtype> kv-cache on this device.').",
             "Query FP8 except on the SM90 FA4 fp8-dequant path (head 512); FA3 with FP8 query "
             "needs a bfloat16 model (upstream test note).",
             "Encoder (self) attention with a quantized cache raises NotImplementedError "
             "'quantization is not supported for encoder attention' at the first forward.",
         ),
         source="backends/flash_attn.py FlashAttentionBackend.supports_kv_cache_dtype/"
                "supports_head_size/supports_combination; backends/fa_utils.py "
                "get_flash_attn_version, flash_attn_supports_fp8 (reference §5.2, §5.4)"),
    _row(name="FLASHINFER", platforms=("cuda",), file="vllm/v1/attention/backends/flashinfer.py",
         kv_cache_dtypes=_BASE_KV + _FP8 + ("fp8_e5m2", "nvfp4", "nvfp4_4over6"),
         min_compute_capability=(8, 0), max_compute_capability=(12, 1),
         head_sizes=(64, 128, 256, 512), block_sizes=(16, 32, 64), supports_sliding_window=True,
         supports_sinks=True, supports_quant_query_input=True, attn_types=("decoder",),
         notes=(
             "SM75 temporarily excluded (8.0 <= CC <= 12.1).",
             "nvfp4 on families 80/90/120 via the fa2 path: only 'nvfp4' (not nvfp4_4over6), and "
             "not with head_size 64 or sinks; family 100 needs the trtllm-gen path for prefill and "
             "decode ('--kv-cache-dtype X requires the SM100 trtllm-gen FlashInfer path.').",
             "Sinks: SM90 and family 120 via XQA decode, family 100 via trtllm-gen; not on SM80/89; "
             "not when use_trtllm_attention is forced off.",
             "Query FP8 only on family 100 with trtllm usable, a quantized KV cache and "
             "disable_flashinfer_q_quantization unset.",
             "Per-group query dtype (decode/prefill) since PR #39002, see select.flashinfer_query_dtypes.",
             "Page sizes 16/32/64 (up to 1024 on SM100 trtllm-gen GQA).",
         ),
         source="backends/flashinfer.py FlashInferBackend, FlashInferMetadataBuilder.__init__/"
                "get_q_data_type; vllm/utils/flashinfer.py use_trtllm_attention (reference §5.2, §5.5)",
         references=(_PR + "39002", _PR + "33695")),
    _row(name="TRITON_ATTN", platforms=("cuda", "rocm"),
         file="vllm/v1/attention/backends/triton_attn.py",
         model_dtypes=("float16", "bfloat16", "float32"),
         kv_cache_dtypes=_BASE_KV + _FP8 + ("fp8_e5m2",) + _PTH, min_head_size=32,
         block_size_multiple_of=16, supports_sliding_window=True, supports_sinks=True,
         supports_quant_query_input=True, attn_types=_ALL_ATTN,
         notes=(
             "TritonAttentionImpl.__init__ on CUDA: kv dtype starting with 'fp8' and CC < 8.9 -> "
             "ValueError ('native FP8 (fp8e4nv) requires SM89+'); bfloat16 cache and CC < 8.0 -> "
             "ValueError.",
             "fp8_e5m2 is stored as e4m3 (the cache is viewed as current_platform.fp8_dtype()).",
             "Only backend for int4/int8/fp8_per_token_head (dynamic per-(token, head) scales).",
             "Query FP8 on CUDA (ROCm: not gfx90a/gfx11) for fp8/fp8_e4m3 (and fp8_e5m2, which then "
             "trips the Attention.forward dtype assertion, §4.5).",
         ),
         source="backends/triton_attn.py TritonAttentionBackend, TritonAttentionImpl.__init__, "
                "customize_spec; ops/triton_reshape_and_cache_flash.py (reference §3, §5.2, §5.3)",
         references=(_PR + "38378",)),
    _row(name="FLEX_ATTENTION", platforms=("cuda",),
         file="vllm/v1/attention/backends/flex_attention.py",
         model_dtypes=("float16", "bfloat16", "float32"), kv_cache_dtypes=_BASE_KV,
         supports_sliding_window=True, attn_types=("decoder", "encoder_only"),
         notes=("fp32 models reach it on CUDA only where TRITON_ATTN (which takes fp32 too) refuses the layer.",
                "Quantized KV -> NotImplementedError in the impl (validation already rejects it)."),
         source="backends/flex_attention.py FlexAttentionBackend (reference §5.2, §9.7)"),
    _row(name="TRITON_ATTN_DIFFKV", platforms=("cuda", "rocm"), explicit_only=True,
         file="vllm/v1/attention/backends/triton_attn_diffkv.py",
         model_dtypes=("float16", "bfloat16", "float32"),
         kv_cache_dtypes=("auto", "bfloat16", *_FP8), min_head_size=32,
         block_size_multiple_of=16, supports_sliding_window=True, supports_sinks=True, attn_types=("decoder",),
         notes=("For models whose K and V head sizes differ; not in the automatic priority lists.",
                "A TritonAttentionBackend subclass: its dtypes, sinks and sliding window are TRITON_ATTN's."),
         source="backends/triton_attn_diffkv.py (reference §5.2; priority lists §5.1 do not name it)"),
    _row(name="B12X", platforms=("cuda",), explicit_only=True,
         file="vllm/v1/attention/backends/b12x.py", model_dtypes=("bfloat16",),
         kv_cache_dtypes=("auto", "bfloat16", *_FP8), cc_majors=(12,),
         head_sizes=(64, 128, 192, 256), block_sizes=(64, 128), supports_sliding_window=True, supports_sinks=True,
         attn_types=("decoder",),
         notes=("SM120/SM121 only; bf16 queries only; no float16 KV.",
                "Pages of 64 or 128 tokens (_B12X_SUPPORTED_PAGE_SIZES); 128 unless the release's "
                "default block size is one of them (get_preferred_block_size)."),
         source="backends/b12x.py B12xPagedAttentionBackend.get_supported_kernel_block_sizes/"
                "get_preferred_block_size (reference §5.2, §4.5)"),
    _row(name="HPC_ATTN", platforms=("cuda",), explicit_only=True,
         file="vllm/v1/attention/backends/hpc_attn.py",
         kv_cache_dtypes=("auto", "bfloat16", "fp8_e4m3"), min_compute_capability=(9, 0),
         max_compute_capability=(9, 0), head_sizes=(128,), block_sizes=(64,),
         attn_types=("decoder",),
         notes=("Exactly SM90, head_size 128, block 64 (or a multiple of it).",),
         source="backends/hpc_attn.py (reference §5.2)"),
    _row(name="TURBOQUANT", platforms=("cuda", "rocm"),
         file="vllm/v1/attention/backends/turboquant_attn.py", kv_cache_dtypes=_TQ,
         min_head_size=1, attn_types=("decoder",),
         notes=("TurboQuant dtypes only; no sliding window.",
                "create_engine_config forces flash_attn_version 2 for boundary (skip) layers: "
                "'TurboQuant is not yet compatible with FlashAttention >= 3. Overriding "
                "flash_attn_version to 2...'.",
                "Boundary layers (first/last 2) are skipped automatically (§2.5)."),
         source="backends/turboquant_attn.py; vllm/engine/arg_utils.py create_engine_config "
                "(reference §2.5, §5.2, §8)"),
    _row(name="ULTRAQUANT", platforms=("rocm", "cuda"),
         file="vllm/v1/attention/backends/ultraquant_attn.py", model_dtypes=("bfloat16",),
         kv_cache_dtypes=("ultraquant_4bit",),
         attn_types=("decoder",),
         notes=("In the ROCm priority list (last); on CUDA only when forced. No sinks.",),
         source="backends/ultraquant_attn.py (reference §5.1, §5.2)"),
    # ------------------------------------------------------------------ dense, CPU
    _row(name="CPU_ATTN", platforms=("cpu",), file="vllm/v1/attention/backends/cpu_attn.py",
         kv_cache_dtypes=_BASE_KV + _FP8 + ("fp8_e5m2",),
         head_sizes=(32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512),
         supports_sliding_window=True, attn_types=_ALL_ATTN,
         notes=("FP8 needs x86 AVX-512 or AMX ('FP8 KV cache on CPU requires x86 with AVX-512 or "
                "AMX.') and head_size % 32 == 0.",
                "Dense layers always get CPU_ATTN; an unsupported dtype is a ValueError "
                "'--kv-cache-dtype X is not supported by the CPU attention backend on this host.'"),
         source="backends/cpu_attn.py; vllm/platforms/cpu.py (reference §5.1, §5.2, §8)"),
    # ------------------------------------------------------------------ dense, ROCm
    _row(name="ROCM_ATTN", platforms=("rocm",), file="vllm/v1/attention/backends/rocm_attn.py",
         model_dtypes=("float16", "bfloat16", "float32"), kv_cache_dtypes=_BASE_KV + _FP8 + ("fp8_e5m2",),
         head_sizes=(32, 64, 80, 96, 128, 160, 192, 224, 256), block_size_multiple_of=16,
         supports_sliding_window=True, attn_types=("decoder", "encoder", "encoder_only"),
         notes=("No sinks; not with a KV connector.",
                "Native kernel only for head 64/128 and block 16/32, else Triton.",
                "FP8 bytes are float8_e4m3fnuz on gfx94x (scales doubled at load)."),
         source="backends/rocm_attn.py; vllm/platforms/rocm.py _get_backend_priorities "
                "(reference §5.1, §5.2)"),
    _row(name="ROCM_AITER_FA", platforms=("rocm",),
         file="vllm/v1/attention/backends/rocm_aiter_fa.py",
         kv_cache_dtypes=_BASE_KV + _FP8 + ("fp8_e5m2",), rocm_archs=("gfx94", "gfx95"),
         head_sizes=(64, 128, 256), block_sizes=(16, 32), supports_sliding_window=True, supports_sinks=True,
         attn_types=("decoder",),
         notes=("get_name() returns 'FLASH_ATTN'; the registry/--attention-backend name is "
                "ROCM_AITER_FA.",
                "Only in the priority list when AITER MHA is enabled (VLLM_ROCM_USE_AITER=1; "
                "kvplan: attention_config['rocm_use_aiter']=True). CDNA3+ only."),
         source="backends/rocm_aiter_fa.py (reference §5.1, §5.2)"),
    _row(name="ROCM_AITER_UNIFIED_ATTN", platforms=("rocm",),
         file="vllm/v1/attention/backends/rocm_aiter_unified_attn.py",
         kv_cache_dtypes=_BASE_KV + _FP8 + ("fp8_e5m2",),
         min_head_size=32, block_size_multiple_of=16, supports_quant_query_input=True,
         supports_sliding_window=True, supports_sinks=True, attn_types=_ALL_ATTN,
         notes=("In the priority list when aiter is found and supported on the device (CDNA3+: gfx94x/gfx95x); "
                "its validation accepts any ROCm GPU.",
                "Query FP8 except on gfx11 (RocmAiterUnifiedAttentionImpl.__init__).",),
         source="backends/rocm_aiter_unified_attn.py (reference §5.1, §5.2)"),
    _row(name="ROCM_SEGMENTED_ATTN", platforms=("rocm",), explicit_only=True,
         file="vllm/v1/attention/backends/rocm_segmented_attn.py",
         kv_cache_dtypes=_BASE_KV + _FP8, head_sizes=(64, 128, 256), block_size_multiple_of=16,
         supports_sliding_window=True, supports_sinks=True, attn_types=("decoder",),
         notes=("RDNA only ('ROCM_SEGMENTED_ATTN requires AMD RDNA GPUs on ROCm'); FP8 needs gfx12 (its "
                "supports_combination). Not in the ROCm priority lists: explicit-only.",),
         source="backends/rocm_segmented_attn.py (reference §5.2)"),
    _row(name="ROCM_OCTAVE", platforms=("rocm",),
         file="vllm/v1/attention/backends/rocm_octave_attn.py", kv_cache_dtypes=_OCTAVE,
         rocm_archs=("gfx11", "gfx942"), head_sizes=(256,), block_size_multiple_of=16, attn_types=("decoder",),
         notes=("Octave dtypes only; RDNA3/CDNA3; head size 256 (get_supported_head_sizes).",),
         source="backends/rocm_octave_attn.py (reference §1.2, §5.2)"),
    # ------------------------------------------------------------------ MLA, CUDA
    _row(name="FLASHINFER_MLA", platforms=("cuda",), use_mla=True,
         file="vllm/v1/attention/backends/mla/flashinfer_mla.py", kv_cache_dtypes=_BASE_KV + _FP8,
         cc_majors=(10,), head_sizes=_MLA_HEADS, block_sizes=(32, 64),
         notes=("qk_nope_head_dim in {64, 128, 192}.",),
         source="backends/mla/flashinfer_mla.py (reference §6.1, §9.7)"),
    _row(name="TOKENSPEED_MLA", platforms=("cuda",), use_mla=True,
         file="vllm/v1/attention/backends/mla/tokenspeed_mla.py", kv_cache_dtypes=_FP8,
         cc_majors=(10,), head_sizes=_MLA_HEADS, block_sizes=(32, 64),
         notes=("Needs the tokenspeed_mla package (kvplan assumes it is installed) and "
                "DeepSeek-R1 dims (qk_nope 128, rope 64, v 128).",),
         source="backends/mla/tokenspeed_mla.py (reference §6.1)"),
    _row(name="CUTLASS_MLA", platforms=("cuda",), use_mla=True,
         file="vllm/v1/attention/backends/mla/cutlass_mla.py", kv_cache_dtypes=_BASE_KV + _FP8,
         cc_majors=(10,), head_sizes=_MLA_HEADS, block_sizes=(128,),
         source="backends/mla/cutlass_mla.py (reference §6.1, §9.7)"),
    _row(name="FLASH_ATTN_MLA", platforms=("cuda",), use_mla=True,
         file="vllm/v1/attention/backends/mla/flashattn_mla.py", kv_cache_dtypes=_BASE_KV,
         cc_majors=(9,), head_sizes=_MLA_HEADS, block_size_multiple_of=16,
         notes=("FA3 on SM90 only. A quantized cache raises NotImplementedError 'FlashAttnMLA V1 "
                "with FP8 KV cache not yet supported' in the impl (validation rejects it first).",),
         source="backends/mla/flashattn_mla.py FlashAttnMLAImpl (reference §6.1, §8)"),
    _row(name="FLASHMLA", platforms=("cuda",), use_mla=True,
         file="vllm/v1/attention/backends/mla/flashmla.py", kv_cache_dtypes=_BASE_KV + _FP8,
         cc_majors=(9, 10), head_sizes=_MLA_HEADS, block_sizes=(64,),
         notes=("supports_compute_capability takes majors 9 and 10; the dense kernel is SM90-only "
                "(supports_combination: 'FlashMLA Dense is only supported on Hopper devices.'); FP8 via "
                "flash_mla_with_kvcache_fp8.",),
         source="backends/mla/flashmla.py (reference §6.1, §9.7)"),
    _row(name="TRITON_MLA", platforms=("cuda", "rocm"), use_mla=True,
         file="vllm/v1/attention/backends/mla/triton_mla.py", kv_cache_dtypes=_BASE_KV + _FP8,
         block_size_multiple_of=16,
         notes=("TritonMLAImpl: fp8 on CUDA needs SM89+ (ValueError); FP8 KV dequantized to bf16 "
                "(no FP8 query). No sliding window, ALiBi or softcap.",),
         source="backends/mla/triton_mla.py TritonMLAImpl.__init__ (reference §6.1, §8)"),
    _row(name="FLASHMLA_SPARSE", platforms=("cuda",), use_mla=True, sparse=True,
         file="vllm/v1/attention/backends/mla/flashmla_sparse.py",
         kv_cache_dtypes=("auto", "bfloat16", "fp8_ds_mla", "fp8", "nvfp4_ds_mla"),
         cc_majors=(9, 10), head_sizes=(512, 576), block_sizes=(64,),
         notes=("head 512 (NoPE) only on SM90; nvfp4_ds_mla only on SM100 family.",
                "Any quantized dtype except nvfp4_ds_mla is canonicalized to fp8_ds_mla "
                "(656 B/token): 'Using fp8_ds_mla KV cache format for FLASHMLA_SPARSE backend.'"),
         source="backends/mla/flashmla_sparse.py; mla_attention.py "
                "_canonicalize_sparse_mla_kv_cache_dtype (reference §6.1, §6.3)"),
    _row(name="FLASHINFER_MLA_SPARSE", platforms=("cuda",), use_mla=True, sparse=True,
         file="vllm/v1/attention/backends/mla/flashinfer_mla_sparse.py",
         kv_cache_dtypes=_BASE_KV + _FP8, cc_majors=(10,), head_sizes=(512, 576),
         block_size_multiple_of=32,
         notes=("TRTLLM-gen sparse MLA; no fp8_ds_mla; qk_nope in {128, 192} (NoPE: 256/512); needs "
                "index_topk. Non-ds fp8 logs 'Using standard fp8 KV cache format...'.",),
         source="backends/mla/flashinfer_mla_sparse.py (reference §6.1)"),
    _row(name="FLASHINFER_MLA_SPARSE_SM120", platforms=("cuda",), use_mla=True, sparse=True,
         file="vllm/v1/attention/backends/mla/flashinfer_mla_sparse_sm120.py",
         model_dtypes=("bfloat16",), kv_cache_dtypes=("auto", *_FP8, "fp8_ds_mla"),
         cc_majors=(12,), head_sizes=(512, 576), block_size_multiple_of=64,
         notes=("bf16 models only; index_topk 2048.",
                "auto/fp8/fp8_e4m3 are canonicalized to fp8_ds_mla (even auto)."),
         source="backends/mla/flashinfer_mla_sparse_sm120.py; mla_attention.py "
                "_canonicalize_sparse_mla_kv_cache_dtype (reference §6.1)"),
    _row(name="FLASHINFER_MLA_SPARSE_SM90", platforms=("cuda",), use_mla=True, sparse=True,
         file="vllm/v1/attention/backends/mla/flashinfer_mla_sparse_sm90.py",
         model_dtypes=("bfloat16",), kv_cache_dtypes=("auto", "bfloat16", *_FP8), cc_majors=(9,),
         head_sizes=(512, 576),
         block_size_multiple_of=64,
         notes=("kv_lora_rank 512, qk_rope_head_dim 0 or 64. First among SM90 sparse backends when "
                "head_size is 512.", "bf16 models only (supported_dtypes; a float16 model gets "
                "FLASH_ATTN_MLA_SPARSE)."),
         source="backends/mla/flashinfer_mla_sparse_sm90.py (reference §5.1, §6.1)"),
    _row(name="FLASH_ATTN_MLA_SPARSE", platforms=("cuda",), use_mla=True, sparse=True,
         file="vllm/v1/attention/backends/mla/flashattn_mla_sparse.py", kv_cache_dtypes=_BASE_KV,
         cc_majors=(9,), block_sizes=(64,),
         notes=("No DCP.",),
         source="backends/mla/flashattn_mla_sparse.py (reference §6.1)"),
    _row(name="FLASH_ATTN_MLA_SPARSE_FA4", platforms=("cuda",), use_mla=True, sparse=True,
         file="vllm/v1/attention/backends/mla/flashattn_mla_sparse_fa4.py",
         model_dtypes=("bfloat16",), kv_cache_dtypes=("auto", "bfloat16"), cc_majors=(10,),
         head_sizes=(576,), block_sizes=(64,),
         notes=("index_topk % 128 == 0; (kv_lora_rank, qk_rope_head_dim) == (512, 64); first on "
                "SM100 for bf16 KV with <= 16 query heads per rank.",),
         source="backends/mla/flashattn_mla_sparse_fa4.py (reference §5.1, §6.1)"),
    # ------------------------------------------------------------------ MLA, ROCm / CPU
    _row(name="ROCM_AITER_MLA", platforms=("rocm",), use_mla=True,
         file="vllm/v1/attention/backends/mla/rocm_aiter_mla.py",
         kv_cache_dtypes=_BASE_KV + _FP8 + ("fp8_e5m2",),
         notes=("Only MLA backend that accepts fp8_e5m2. Used when AITER MLA is enabled "
                "(kvplan: attention_config['rocm_use_aiter']=True).",),
         source="backends/mla/rocm_aiter_mla.py (reference §5.1, §6.1)"),
    _row(name="ROCM_AITER_TRITON_MLA", platforms=("rocm",), use_mla=True,
         file="vllm/v1/attention/backends/mla/aiter_triton_mla.py", kv_cache_dtypes=_BASE_KV + _FP8,
         block_size_multiple_of=16,
         notes=("After TRITON_MLA when AITER MLA is enabled; dtype list assumed equal to TRITON_MLA.",),
         source="vllm/platforms/rocm.py _get_backend_priorities (reference §5.1)"),
    _row(name="ROCM_AITER_MLA_SPARSE", platforms=("rocm",), use_mla=True, sparse=True,
         file="vllm/v1/attention/backends/mla/rocm_aiter_mla_sparse.py",
         kv_cache_dtypes=_BASE_KV + _FP8, block_sizes=(1,), block_size_multiple_of=16,
         source="backends/mla/rocm_aiter_mla_sparse.py (reference §5.1, §6.1)"),
    _row(name="CPU_MLA", platforms=("cpu",), use_mla=True,
         file="vllm/v1/attention/backends/mla/cpu_mla.py", kv_cache_dtypes=_BASE_KV,
         head_sizes=(576,), block_sizes=(16,),
         notes=("Other dtypes: ValueError '--kv-cache-dtype X is not supported by MLA attention on "
                "CPU.'",),
         source="vllm/platforms/cpu.py; backends/mla/cpu_mla.py (reference §5.1, §6.1)"),
    _row(name="AMX_MLA", platforms=("cpu",), use_mla=True,
         file="vllm/v1/attention/backends/mla/amx_mla.py", kv_cache_dtypes=_BASE_KV,
         head_sizes=(576,), block_size_multiple_of=32,
         notes=("x86 with AMX only.",),
         source="vllm/platforms/cpu.py; backends/mla/amx_mla.py (reference §5.1, §6.1)"),
)

BACKENDS: Mapping[str, BackendCapability] = MappingProxyType({r.name: r for r in _ROWS})
"""vLLM 0.33 backend rows by registry name."""

# ---------------------------------------------------------------------------- priority orders
# vllm/platforms/cuda.py::_get_backend_priorities, rocm.py::_get_backend_priorities, cpu.py
# (reference §5.1). Composite mm-prefix backends (TRITON_FLASHINFER / TRITON_FLASH_ATTN) are not
# modelled: kvplan requests never set use_mm_prefix.
PRIORITY_ORDERS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "cuda_dense_sm10x_causal": ("FLASHINFER", "FLASH_ATTN", "TRITON_ATTN", "FLEX_ATTENTION",
                                "TURBOQUANT"),
    "cuda_dense_default": ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION",
                           "TURBOQUANT"),
    "cuda_mla_sm10x": ("FLASHINFER_MLA", "TOKENSPEED_MLA", "CUTLASS_MLA", "FLASH_ATTN_MLA",
                       "FLASHMLA", "TRITON_MLA"),
    "cuda_mla_sm10x_sparse_quantized": ("FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE"),
    "cuda_mla_sm10x_sparse_bf16_few_heads": ("FLASH_ATTN_MLA_SPARSE_FA4", "FLASHINFER_MLA_SPARSE",
                                             "FLASHMLA_SPARSE"),
    "cuda_mla_sm10x_sparse_other": ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE"),
    "cuda_mla_sm12x": ("TRITON_MLA", "FLASHINFER_MLA_SPARSE_SM120"),
    "cuda_mla_other": ("FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA"),
    "cuda_mla_other_sparse": ("FLASH_ATTN_MLA_SPARSE", "FLASHMLA_SPARSE",
                              "FLASHINFER_MLA_SPARSE_SM90"),
    "cuda_mla_other_sparse_head512": ("FLASHINFER_MLA_SPARSE_SM90", "FLASH_ATTN_MLA_SPARSE",
                                      "FLASHMLA_SPARSE"),
    "rocm_sparse": ("ROCM_AITER_MLA_SPARSE",),
    "rocm_mla_aiter": ("ROCM_AITER_MLA", "TRITON_MLA", "ROCM_AITER_TRITON_MLA"),
    "rocm_mla": ("TRITON_MLA",),
    "rocm_dense": ("ROCM_ATTN", "ROCM_AITER_FA", "ROCM_AITER_UNIFIED_ATTN", "TRITON_ATTN",
                   "TURBOQUANT", "ROCM_OCTAVE", "ULTRAQUANT"),
    "cpu_dense": ("CPU_ATTN",),
    "cpu_mla_amx": ("AMX_MLA",),
    "cpu_mla": ("CPU_MLA",),
})
"""Named platform priority lists; the functions below pick one (and filter it) per request."""


def cuda_priority(cc_major: int, *, use_mla: bool, use_sparse: bool, causal: bool,
                  kv_quantized: bool, num_heads: int | None, head_size: int) -> tuple[str, ...]:
    """CUDA `_get_backend_priorities` for one request (MLA lists include the sparse tail)."""
    p = PRIORITY_ORDERS
    if not use_mla:
        return p["cuda_dense_sm10x_causal"] if cc_major == 10 and causal else p["cuda_dense_default"]
    if cc_major == 10:
        if kv_quantized:
            sparse = p["cuda_mla_sm10x_sparse_quantized"]
        elif num_heads is not None and num_heads <= 16:
            sparse = p["cuda_mla_sm10x_sparse_bf16_few_heads"]
        else:
            sparse = p["cuda_mla_sm10x_sparse_other"]
        return p["cuda_mla_sm10x"] + sparse
    if cc_major == 12:
        return p["cuda_mla_sm12x"]
    sparse = (p["cuda_mla_other_sparse_head512"] if head_size == 512
              else p["cuda_mla_other_sparse"])
    return p["cuda_mla_other"] + sparse


def rocm_priority(*, use_mla: bool, use_sparse: bool, aiter: bool,
                  aiter_supported: bool) -> tuple[str, ...]:
    """ROCm `_get_backend_priorities`: sparse / MLA (AITER on or off) / dense."""
    p = PRIORITY_ORDERS
    if use_sparse:
        return p["rocm_sparse"]
    if use_mla:
        return p["rocm_mla_aiter"] if aiter else p["rocm_mla"]
    order = list(p["rocm_dense"])
    if not aiter:
        order.remove("ROCM_AITER_FA")
    if not aiter_supported:
        order.remove("ROCM_AITER_UNIFIED_ATTN")
    return tuple(order)


def cpu_priority(*, use_mla: bool, amx: bool) -> tuple[str, ...]:
    """CPU platform: dense -> CPU_ATTN; MLA -> AMX_MLA (x86 AMX) or CPU_MLA."""
    if use_mla:
        return PRIORITY_ORDERS["cpu_mla_amx"] if amx else PRIORITY_ORDERS["cpu_mla"]
    return PRIORITY_ORDERS["cpu_dense"]


# ---------------------------------------------------------------------------- MLA prefill
MLA_PREFILL_BACKENDS: Mapping[str, str] = MappingProxyType({
    "FLASH_ATTN": "FlashAttention varlen prefill; supports (qk_nope 128, rope 64, v 128) when "
                  "flash-attn varlen exists; BF16 queries only.",
    "TRTLLM_RAGGED": "TRT-LLM ragged FMHA (FlashInfer), SM100 family; FP8 queries supported.",
    "FLASHINFER": "FlashInfer CUTLASS ragged prefill, SM100 family; FP8 queries supported.",
    "TOKENSPEED_MLA": "tokenspeed_mla prefill, SM100 family, DeepSeek-R1 dims; FP8 queries supported.",
})
"""MLA prefill backends (`vllm/platforms/interface.py::get_mla_prefill_backend_cls`, §6.2)."""

MLA_PREFILL_FP8_QUERY_BACKENDS = ("FLASHINFER", "TRTLLM_RAGGED", "TOKENSPEED_MLA")
"""`backend_supports_prefill_query_quantization`: prefill backends that take FP8 queries."""


# ---------------------------------------------------------------------------- history
RELEASE_DATES: Mapping[str, str] = MappingProxyType({
    "0.14.0": "2026-01 (after v0.13.0 of 2025-12-18)",
    "0.17.0": "2026-03-07",
    "0.18.0": "2026-03-20 (approx.; integrations adapted it on 2026-03-23)",
    "0.19.0": "2026-04-03",
    "0.20.0": "2026-04 (late; 0.20.2 followed on 2026-05-10)",
    "0.22.0": "2026-05-30",
    "0.24.0": "2026-07-01",
    "0.25.0": "2026-07-11 (0.25.1 on 2026-07-15)",
    "0.26.0": "2026-07-25/27",
    "0.28.0": "2026-08-26",
    "0.29.0": "2026-09-10",
    "0.33.0": "2026-11 (newest on the index when the reference was written)",
})
"""vLLM release dates used to map PR merge dates to versions (from release announcements and
downstream bump PRs; approximate where marked). Rule: a PR is in the first release whose date is
at least ~one week after the merge (vLLM cuts release branches a few days before tagging)."""

_V032 = "https://github.com/vllm-project/vllm/releases/tag/v0.32.0"
_032 = ("Read in the vllm==0.31.0 and vllm==0.32.0 wheels (a change between the two releases; the 0.31.0 "
        "backend oracle answers, tests/data/vllm_oracle_backends/0.31.0, show the older behaviour): ")
_V034 = "https://github.com/vllm-project/vllm/releases/tag/v0.34.0"
_034 = "Read in the vllm==0.33.0 and vllm==0.34.0 wheels (a change between the two releases): "
_MAP = ("Mapped from the merge date with RELEASE_DATES (first release tagged >= ~1 week after the "
        "merge); ")

ENGINE_FEATURES: tuple[EngineFeature, ...] = (
    EngineFeature(
        name="use_prefill_query_quantization", kind="feature", versions=">=0.14",
        summary="attention_config.use_prefill_query_quantization: FP8 queries for MLA prefill "
                "(SM100 family; off by default because short prompts regress).",
        introduced_by=_PR + "31195", introduced_merged="2025-12-23",
        source=_MAP + "merged 2025-12-23, after v0.13.0 (2025-12-18) -> assumed first in 0.14.0."),
    EngineFeature(
        name="calculate_kv_scales_deprecated", kind="feature", versions=">=0.18,<0.28",
        summary="--calculate-kv-scales emits a DeprecationWarning when enabled.",
        introduced_by=_PR + "37201", introduced_merged="2026-03-16",
        fixed_or_removed_by=_PR + "49389", fixed_or_removed_merged="2026-07-22",
        source=_MAP + "deprecation merged 2026-03-16 -> assumed in 0.18.0 (released ~2026-03-20; "
               "could be 0.19.0)."),
    EngineFeature(
        name="calculate_kv_scales", kind="removed_feature", versions="<0.28",
        summary="--calculate-kv-scales: k/v/q scales from the first forward (amax/200, v amax/100), "
                "then frozen. Not in 0.33.0: passing it is an unknown-argument error.",
        fixed_or_removed_by=_PR + "49389", fixed_or_removed_merged="2026-07-22",
        source="the release wheels (kvplan/data/vllm, scripts/gen_vllm_release.py): vLLM 0.27.0 still has "
               "--calculate-kv-scales (vllm/engine/arg_utils.py, CacheConfig.calculate_kv_scales with its "
               "deprecation warning, gpu_model_runner), 0.28.0 is the first release without it."),
    EngineFeature(
        name="kv_cache_dtype_skip_layers", kind="feature", versions=">=0.19",
        summary="--kv-cache-dtype-skip-layers (layer indices and 'sliding_window') keep listed "
                "layers in the model dtype.",
        introduced_by=_PR + "33695", introduced_merged="2026-03-27",
        source=_MAP + "merged 2026-03-27, v0.19.0 tagged 2026-04-03 -> assumed in 0.19.0 (if the "
               "0.19 branch was cut earlier it is 0.20.0)."),
    EngineFeature(
        name="per_token_head_kv_dtypes", kind="feature", versions=">=0.20",
        summary="int8_per_token_head / fp8_per_token_head KV cache dtypes (Triton backend; "
                "int4_per_token_head came later, present in 0.33.0).",
        introduced_by=_PR + "38378", introduced_merged="2026-04-02",
        source=_MAP + "merged 2026-04-02, one day before v0.19.0 -> assumed first in 0.20.0."),
    EngineFeature(
        name="flashinfer_skip_layer_query_dtype_crash", kind="bug", versions=">=0.19,<0.20",
        summary="FlashInfer metadata builder read the global cache dtype, so skipped (bf16) layers "
                "got FP8 queries on family 100: 'Query dtype mismatch: expected "
                "torch.float8_e4m3fn, got torch.bfloat16'.",
        introduced_by=_PR + "33695", introduced_merged="2026-03-27",
        fixed_or_removed_by=_PR + "39002", fixed_or_removed_merged="2026-04-11",
        source=_MAP + "bug arrives with skip layers (assumed 0.19.0); fix merged 2026-04-11 -> "
               "assumed first in 0.20.0 (0.19.x patch releases assumed not to carry it)."),
    EngineFeature(
        name="flashinfer_per_group_query_dtype", kind="feature", versions=">=0.20",
        summary="FlashInfer picks the query dtype per KV-cache group from kv_cache_spec.kv_quant_mode "
                "(skipped groups keep the model dtype).",
        introduced_by=_PR + "39002", introduced_merged="2026-04-11",
        source=_MAP + "merged 2026-04-11 -> assumed first in 0.20.0."),
    EngineFeature(
        name="fp8_prefill_query_warning", kind="feature", versions=">=0.20",
        summary="MLA startup warning 'FP8 KV cache is enabled but prefill queries are not quantized "
                "to FP8...' (determine_prefill_query_data_type branch 3).",
        introduced_by=_PR + "39752", introduced_merged="2026-04-15",
        source=_MAP + "merged 2026-04-15 -> assumed first in 0.20.0 (issue #39751)."),
    EngineFeature(
        name="explicit_kv_cache_dtype_wins", kind="feature", versions=">=0.22",
        summary="An explicit --kv-cache-dtype is kept when the checkpoint has a compressed-tensors "
                "kv_cache_scheme (Attention.__init__ overrides only 'auto'); before it every Attention "
                "layer was forced to 'fp8' and cache_config.cache_dtype rewritten.",
        introduced_by=_PR + "42782", introduced_merged="2026-05-16",
        source=_MAP + "merged 2026-05-16; v0.22.0 tagged 2026-05-30; 0.21.0's date is not in "
               "RELEASE_DATES and, at the ~2-week cadence between 0.20.2 (2026-05-10) and 0.22.0, "
               "assumed cut before the merge -> assumed first in 0.22.0."),
    # ------------------------------------------------------------------ 0.25 -> 0.28 (read in the wheels)
    EngineFeature(
        name="selector_sliding_window", kind="feature", versions=">=0.26",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.26.0",
        summary="The attention selector asks whether a backend supports sliding windows (has_sliding_window, "
                "'sliding window not supported'); before, a sliding-window layer was selected as a full one.",
        source="Read in the vllm==0.25.1 and vllm==0.26.0 wheels: vllm/v1/attention/selector.py::"
               "AttentionSelectorConfig.has_sliding_window and vllm/v1/attention/backend.py::"
               "AttentionBackend.validate_configuration (new in 0.26); verified by scripts/oracle/"
               "backend_oracle.py (0.25.1)."),
    EngineFeature(
        name="rocm_aiter_unified_fp16_e5m2", kind="feature", versions=">=0.26",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.26.0",
        summary="ROCM_AITER_UNIFIED_ATTN takes float16 models and a float16 or fp8_e5m2 cache (bfloat16 models "
                "and auto / bfloat16 / fp8 / fp8_e4m3 caches before).",
        source="Read in the vllm==0.25.1 and vllm==0.26.0 wheels: vllm/v1/attention/backends/"
               "rocm_aiter_unified_attn.py::RocmAiterUnifiedAttentionBackend.supported_dtypes, "
               "supported_kv_cache_dtypes; verified by scripts/oracle/backend_oracle.py (0.25.1)."),
    EngineFeature(
        name="flash_attn_fa4_fp8", kind="feature", versions=">=0.27",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.27.0",
        summary="FLASH_ATTN reads an FP8 cache with FA4 on the SM100 family, checked per layer in "
                "supports_combination; before, only with FA3 on SM90 (supports_kv_cache_dtype), whatever the "
                "layer's head size.",
        source="Read in the vllm==0.26.0 and vllm==0.27.0 wheels: vllm/v1/attention/backends/flash_attn.py::"
               "FlashAttentionBackend.supports_kv_cache_dtype, supports_combination ('FP8 KV cache requires "
               "FA3 on SM90 or FA4 on SM100', new in 0.27); verified by scripts/oracle/backend_oracle.py (0.25.1)."),
    EngineFeature(
        name="flashinfer_sm120_sinks", kind="feature", versions=">=0.28",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.28.0",
        summary="FLASHINFER takes attention sinks on SM12x (XQA decode); before, on the SM100 trtllm-gen path "
                "only.",
        source="Read in the vllm==0.27.0 and vllm==0.28.0 wheels: vllm/v1/attention/backends/flashinfer.py::"
               "FlashInferBackend.supports_sink; verified by scripts/oracle/backend_oracle.py (0.25.1)."),
    EngineFeature(
        name="hpc_attn_sm90_only", kind="feature", versions=">=0.28",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.28.0",
        summary="HPC_ATTN validates on compute capability 9.0 only (>= 9.0 before, so Blackwell passed "
                "validation).",
        source="Read in the vllm==0.27.0 and vllm==0.28.0 wheels: vllm/v1/attention/backends/hpc_attn.py::"
               "HpcAttentionBackend.supports_compute_capability; verified by scripts/oracle/backend_oracle.py "
               "(0.25.1)."),
    # ------------------------------------------------------------------ 0.29 -> 0.31 (read in the wheels)
    EngineFeature(
        name="mla_nope_head_512", kind="feature", versions=">=0.30",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.30.0",
        summary="MLA backends take head size 512 (a NoPE latent without rope dims, GLM5Next): the shared MLA "
                "head sizes become 320, 512 and 576 and FlashInfer's sparse MLA takes 512 too; before, a "
                "512-wide MLA layer found only TRITON_MLA (which takes any head size).",
        source="Read in the vllm==0.29.0 and vllm==0.30.0 wheels: vllm/model_executor/layers/attention/"
               "mla_attention.py::MLACommonBackend.get_supported_head_sizes ([320, 576] -> [320, 512, 576]), "
               "vllm/v1/attention/backends/mla/flashinfer_mla_sparse.py::FlashInferMLASparseBackend."
               "get_supported_head_sizes ([576] -> [512, 576]); verified by scripts/oracle/backend_oracle.py "
               "(0.28.0)."),
    EngineFeature(
        name="flashmla_sparse_nope_head_512", kind="feature", versions=">=0.31",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.31.0",
        summary="FLASHMLA_SPARSE takes head size 512 (rope-free NoPE on SM90); before, 576 only.",
        source="Read in the vllm==0.30.0 and vllm==0.31.0 wheels: vllm/v1/attention/backends/mla/"
               "flashmla_sparse.py::FlashMLASparseBackend.get_supported_head_sizes ([576] -> [576, 512])."),
    EngineFeature(
        name="flashinfer_sm90_sinks", kind="feature", versions=">=0.30",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.30.0",
        summary="FLASHINFER takes attention sinks on SM90 (XQA decode); before, sinks needed SM100 trtllm-gen "
                "or SM12x XQA, so a gpt-oss layer on Hopper fell to TRITON_ATTN where FLASH_ATTN refused it.",
        source="Read in the vllm==0.29.0 and vllm==0.30.0 wheels: vllm/v1/attention/backends/flashinfer.py::"
               "FlashInferBackend.supports_sink (family 90 joins family 120); verified by "
               "scripts/oracle/backend_oracle.py (0.28.0)."),
    EngineFeature(
        name="flash_attn_fa4_sm90_d512_fp8", kind="feature", versions=">=0.31",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.31.0",
        summary="FLASH_ATTN on SM90 reads an FP8 cache with FA4 at head size 512 (in-kernel dequant); before, "
                "FP8 needed FA3 on SM90 or FA4 on SM100 ('FP8 KV cache requires FA3 on SM90 or FA4 on SM100'), "
                "so a 512-wide layer with an FP8 cache went to FlashInfer or Triton on Hopper.",
        source="Read in the vllm==0.30.0 and vllm==0.31.0 wheels: vllm/v1/attention/backends/fa_utils.py::"
               "flash_attn_supports_kv_cache_dtype (sm90_fp8_kv_supported), vllm/v1/attention/backends/"
               "flash_attn.py::FlashAttentionBackend.supports_combination; verified by "
               "scripts/oracle/backend_oracle.py (0.28.0)."),
    EngineFeature(
        name="gemma4_triton_for_mixed_heads", kind="feature", versions=">=0.19,<0.24",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.19.0",
        summary="Gemma 4 with heterogeneous head sizes (head_dim != global_head_dim) and one above 256: "
                "Gemma4Config forces TRITON_ATTN for every layer unless a backend is chosen.",
        source="Read in the vllm==0.19.0 to 0.23.0 wheels: vllm/model_executor/models/config.py::"
               "Gemma4Config.verify_and_update_config (0.24.0 switches to FA4 where available)."),
    EngineFeature(
        name="gemma4_fa4_for_mixed_heads", kind="feature", versions=">=0.24",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.24.0",
        summary="Gemma 4 with heterogeneous head sizes: where FA4 runs (SM90 / SM100 / SM110) and the largest "
                "head is at most 512, Gemma4Config sets flash_attn_version 4 for every layer (no FA version "
                "or a backend other than FLASH_ATTN chosen); elsewhere it forces TRITON_ATTN unless a backend "
                "is chosen.",
        source="Read in the vllm==0.23.0 and 0.24.0 wheels (0.25.1, 0.28.0 to 0.34.0 too): "
               "vllm/model_executor/models/config.py::Gemma4Config.verify_and_update_config; "
               "vllm/vllm_flash_attn/flash_attn_interface.py::_is_fa4_supported."),
    EngineFeature(
        name="gemma4_sm90_fp8_per_layer_fa", kind="feature", versions=">=0.31",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.31.0",
        summary="Gemma 4 on the SM90 family with an fp8 KV cache keeps per-layer FA3/FA4 selection (FA3 for "
                "the layers it supports) instead of FA4 for every layer.",
        source="Read in the vllm==0.30.0 and 0.31.0 wheels: vllm/model_executor/models/config.py::"
               "Gemma4Config.verify_and_update_config (use_per_layer_fa)."),
    EngineFeature(
        name="promote_local_specs_message", kind="feature", versions=">=0.27",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.27.0",
        summary="With the hybrid KV cache manager off, caches that cannot become one type (state layers next to "
                "attention) make vLLM raise 'Failed to promote local KV cache specs to one unified type.'; "
                "before, 'Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one "
                "unified type.' (the same refusal, reworded).",
        source="Read in the vllm==0.26.0 and vllm==0.27.0 wheels: vllm/v1/core/kv_cache_utils.py::"
               "unify_hybrid_kv_cache_specs (0.27: _promote_local_kv_cache_specs); 0.33.0: "
               "vllm/v1/core/kv_cache_planning.py::_promote_local_kv_cache_specs."),
    EngineFeature(
        name="null_block_reserved", kind="feature", versions=">=0.29",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.29.0",
        summary="The startup memory check (and the estimated maximum model length in its error) holds back the "
                "pool's null block: one request at --max-model-len needs one block more than its own; before, "
                "the whole KV memory was checked.",
        source="Read in the vllm==0.28.0 and vllm==0.29.0 wheels: vllm/v1/core/kv_cache_utils.py::"
               "get_kv_cache_configs (check_memory = available - _pool_bytes_per_block, new in 0.29); verified "
               "by scripts/oracle/capacity_oracle.py (0.28.0)."),
    EngineFeature(
        name="hybrid_prefix_caching_default", kind="feature", versions=">=0.27",
        introduced_by=_PR + "50991", introduced_merged="2026-08-04",
        summary="Prefix caching is on by default for hybrid (attention + Mamba / linear-attention) models, so "
                "their state layers run in mamba_cache_mode 'align' (state blocks of the attention block size, "
                "two or more per request); before, hybrids defaulted to no prefix caching ('none': one state "
                "block per request of max_model_len tokens) unless --enable-prefix-caching was passed.",
        source="Read in the vllm==0.25.1 and vllm==0.28.0 wheels: vllm/config/model.py::ModelConfig."
               "is_prefix_caching_supported ('Hybrid models do not support prefix caching' in 0.25.1); PR #50991 "
               "merged 2026-08-04, after 0.26.0 (2026-07-25), so first in 0.27 (mapped from the merge date); "
               "verified by scripts/oracle/capacity_oracle.py (0.25.1: enable_prefix_caching False, 0.28.0: True)."),
    EngineFeature(
        name="attention_page_padding", kind="feature", versions=">=0.24",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.24.0",
        summary="Unifying page sizes pads an attention page that does not divide the largest (where its backend "
                "reads pages by the block stride); before, no page is padded and vLLM raises 'The page size of "
                "the layer is not divisible by the maximum page size. Cannot unify by adjusting block_size.' and "
                "refuses to start (kvplan KV504), with no full-allocation fallback.",
        source="Read in the vllm==0.22.0, vllm==0.23.0 and vllm==0.24.0 wheels: vllm/v1/core/kv_cache_utils.py::"
               "unify_kv_cache_spec_page_size (page_size_padded and AttentionSpec.indexes_kv_by_block_stride new "
               "in 0.24.0); verified by scripts/oracle/capacity_oracle.py (0.22.0: Gemma-4-31B-IT-NVFP4 with "
               "int8_per_token_head, its NotImplementedError)."),
    EngineFeature(
        name="pooled_encoder_window", kind="feature", versions=">=0.25",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.25.0",
        summary="A block-pooled causal audio encoder cache (Voxtral Realtime) keeps its sliding window in pooled "
                "tokens, ceil(window / block_pool_size) + 1; before, in encoder frames, so each request holds "
                "block_pool_size x the encoder blocks (Voxtral Realtime at 16,384: 560 blocks, not 525).",
        source="Read in the vllm==0.22.0, vllm==0.23.0, vllm==0.24.0 and vllm==0.25.1 wheels: vllm/model_executor/"
               "models/whisper_causal.py::WhisperCausalAttentionWithBlockPooling.get_kv_cache_spec (the pooled "
               "window, absent before 0.25.1); verified by scripts/oracle/capacity_oracle.py (0.22.0, "
               "cases_audio.json)."),
    EngineFeature(
        name="skip_layer_block_alignment", kind="feature", versions=">=0.25",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.25.0",
        summary="With --kv-cache-dtype-skip-layers the platform raises the block size until the quantized page "
                "covers a skip layer's 16-token page, and sliding-window layers take that shared page; before, "
                "the block size stays the default and unify_kv_cache_spec_page_size gives every smaller page "
                "(the quantized layers', sliding-window ones included) a larger block, the page ratio.",
        source="Read in the vllm==0.22.0, vllm==0.24.0 and vllm==0.25.1 wheels: vllm/platforms/interface.py::"
               "Platform._align_heterogeneous_kv_block_size (Phase 3 of update_block_size_for_backend, absent in "
               "0.22.0 and 0.24.0); verified by scripts/oracle/capacity_oracle.py (0.22.0: block size 16, fp8 "
               "layers at 32-token blocks; 0.25.1: block size 32)."),
    EngineFeature(
        name="speculative_config_kv_cache_dtype", kind="feature", versions=">=0.28", introduced_by=_PR + "48787",
        summary="--speculative-config takes kv_cache_dtype (the draft's KV cache dtype, apart from the target's); "
                "before, SpeculativeConfig rejects the key ('Unexpected keyword argument') and vLLM exits (KV004).",
        source="Read in the vllm==0.25.1 and vllm==0.28.0 wheels: vllm/config/speculative.py::SpeculativeConfig "
               "(no kv_cache_dtype field in 0.25.1; PR #48787, opened 2026-07-15, merge date not read, and 0.26 "
               "and 0.27 not read, so the range starts at 0.28); verified by scripts/oracle/capacity_oracle.py "
               "(0.25.1: the *-draft-auto cases end in create_engine_config with that ValidationError)."),
    EngineFeature(
        name="mla_kv_cache_dtype_skip_layers", kind="feature", versions=">=0.28",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.28.0",
        summary="--kv-cache-dtype-skip-layers keeps a listed MLA layer in the model dtype; before, MLAAttention "
                "did not read the list and every MLA layer took --kv-cache-dtype (DeepSeek-V3 fp8 with layer 0 "
                "listed: 61 fp8 layers).",
        source="Read in the vllm==0.25.1 and vllm==0.28.0 wheels: vllm/model_executor/layers/attention/"
               "mla_attention.py::MLAAttention.__init__ (the kv_cache_dtype_skip_layers check, absent in 0.25.1); "
               "0.26 and 0.27 not read, so the range starts at 0.28; verified by scripts/oracle/capacity_oracle.py "
               "(0.25.1: DeepSeek-V3__fp8__32768__skip-0, one fp8 page for all 61 layers)."),
    EngineFeature(
        name="mla_hybrid_block_alignment_128", kind="feature", versions=">=0.28",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.28.0",
        summary="A hybrid MLA + state model (Kimi-Linear) raises its attention block size in multiples of 128 "
                "tokens (TRTLLM / FlashInfer MLA decode kernels need the kernel blocks aligned to 128); before, "
                "in multiples of the kernel block (16): Kimi-Linear at 4096, 1,888 tokens instead of 1,920.",
        source="Read in the vllm==0.25.1 and vllm==0.28.0 wheels: vllm/platforms/interface.py::Platform."
               "_align_hybrid_block_size (kernel_block_alignment_size = max(.., 128) if use_mla, absent in "
               "0.25.1; 0.26 and 0.27 not read, so the range starts at 0.28, the first release known to have "
               "it); verified by scripts/oracle/capacity_oracle.py (0.25.1, 0.28.0)."),
    EngineFeature(
        name="mamba_unify_padding", kind="feature", versions=">=0.28", introduced_by=_PR + "45207",
        summary="Unifying page sizes pads a state (Mamba) page smaller than the largest; before, it was given a "
                "larger block like an attention page, which leaves a state page unchanged, so vLLM failed a bare "
                "assert (or raised 'cannot be padded' where it did not divide) and refused to start: a hybrid "
                "with a --kv-cache-dtype-skip-layers layer or a draft whose page exceeds the state page (KV504).",
        source="Read in the vllm==0.25.1 and vllm==0.28.0 wheels: vllm/v1/core/kv_cache_utils.py::"
               "unify_kv_cache_spec_page_size (the MambaSpec branch, page_size_padded, absent in 0.25.1; vLLM "
               "issue #43626); 0.26 and 0.27 not read, so the range starts at 0.28; verified by "
               "scripts/oracle/capacity_oracle.py (0.25.1: Qwen3.5-27B with skip layers, AssertionError)."),
    EngineFeature(
        name="mla_page_padding", kind="removed_feature", versions=">=0.25,<0.29",
        introduced_by=_PR + "45181",
        fixed_or_removed_by="https://github.com/vllm-project/vllm/releases/tag/v0.29.0",
        summary="Unifying page sizes pads an MLA page that does not divide the largest (a Kimi-Linear model "
                "with a Kimi-K2 EAGLE3 head: MLA and state pages padded to the head's) where its backend reads "
                "pages by the block stride (every dense MLA backend; not sparse MLA or the indexer's keys); "
                "from 0.29 MLA pages are never padded and vLLM refuses to start (kvplan KV504).",
        source="Read in the vllm==0.28.0 and vllm==0.29.0 wheels: vllm/v1/core/kv_cache_utils.py::"
               "unify_kv_cache_spec_page_size (0.28: pad when AttentionSpec.indexes_kv_by_block_stride, set "
               "from AttentionBackend.indexes_kv_by_block_stride, a layer-dimension stride order not first; "
               "0.29: pad non-MLA attention only), also in the vllm==0.25.1 wheel; verified by "
               "scripts/oracle/capacity_oracle.py (0.28.0, KimiLinear__auto__4096__kimi-k2-eagle3)."),
    EngineFeature(
        name="sliding_window_largest_multiple_block", kind="feature", versions=">=0.30",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.30.0",
        summary="With skip layers sharing a padded page, a sliding-window layer on a backend whose kernel blocks "
                "are 'a multiple of 16' (FlashAttention, Triton) takes the largest such block whose page fits the "
                "shared page; before, 16 (the MultipleOf base only), so it held twice as many blocks.",
        source="Read in the vllm==0.29.0 and vllm==0.30.0 wheels: vllm/model_executor/layers/attention/"
               "attention.py::_largest_kernel_block_within (MultipleOf expanded, new in 0.30); verified by "
               "scripts/oracle/capacity_oracle.py (0.28.0)."),
    # ------------------------------------------------------------------ 0.31 -> 0.32 (read in both wheels)
    EngineFeature(
        name="triton_attn_diffkv_fp8", kind="feature", versions=">=0.32", introduced_by=_V032,
        summary="TRITON_ATTN_DIFFKV accepts an fp8 / fp8_e4m3 KV cache (before: auto and bfloat16 only, "
                "'kv_cache_dtype not supported').",
        source=_032 + "vllm/v1/attention/backends/triton_attn_diffkv.py::TritonAttentionDiffKVBackend."
               "supported_kv_cache_dtypes."),
    EngineFeature(
        name="flashinfer_nvfp4_fa2", kind="feature", versions=">=0.32", introduced_by=_V032,
        summary="FLASHINFER takes an nvfp4 KV cache outside the SM100 family through its fa2 path (only 'nvfp4', "
                "no head size 64, no sinks); before, nvfp4 needed the SM100 trtllm-gen path ('kv_cache_dtype not "
                "supported' elsewhere), so an nvfp4 cache on Ampere/Hopper/SM120 found no backend.",
        source=_032 + "vllm/v1/attention/backends/flashinfer.py::FlashInferBackend.supports_kv_cache_dtype "
               "(_nvfp4_kv_on_fa2 branch new in 0.32), FlashInferBackend.supports_combination."),
    EngineFeature(
        name="flashmla_sparse_nope512_fp8_ds_mla", kind="feature", versions=">=0.32", introduced_by=_V032,
        summary="FLASHMLA_SPARSE serves head size 512 (NoPE) on SM90 with an fp8_ds_mla cache too (before: "
                "a bf16 cache only, 'FLASHMLA_SPARSE supports head_size 512 only with bf16 kv-cache on SM90').",
        source=_032 + "vllm/v1/attention/backends/mla/flashmla_sparse.py::FlashMLASparseBackend."
               "supports_combination."),
    EngineFeature(
        name="mamba2_prefill_checkpoint", kind="feature", versions=">=0.32", introduced_by=_V032,
        summary="Mamba2 layers (MambaMixer2: Nemotron-H, Falcon-H1, Granite 4.0-H, Zamba2, Bamba, ...) export a "
                "prefill checkpoint in align mode: one more state block per request (3 instead of 2 with prefix "
                "caching).",
        source=_032 + "vllm/model_executor/layers/mamba/mamba_mixer2.py::MambaMixer2.get_kv_cache_spec "
               "(num_prefill_checkpoint_blocks=1, new in 0.32); vllm/v1/kv_cache_interface.py::MambaSpec."
               "max_memory_usage_bytes; verified by scripts/oracle/capacity_oracle.py."),
    EngineFeature(
        name="gdn_flashinfer_prefill_checkpoint", kind="feature", versions=">=0.33",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.33.0",
        summary="Qwen's gated delta nets running FlashInfer's GDN prefill kernel (SM90; Blackwell with 128-wide "
                "key heads) export a prefill checkpoint in align mode: one more state block per request and a "
                "block size aligned to 64 tokens.",
        source="Read in the vllm==0.32.0 and vllm==0.33.0 wheels: vllm/model_executor/layers/mamba/gdn/"
               "qwen_gdn_linear_attn.py::QwenGatedDeltaNetAttention.get_kv_cache_spec (checkpoint export new in "
               "0.33; absent from 0.31 and 0.32); verified by scripts/oracle/capacity_oracle.py (0.31.0)."),
    # ------------------------------------------------------------------ 0.33 -> 0.34 (read in both wheels)
    EngineFeature(
        name="default_block_size_64", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="KV cache block size default 64 tokens (16 before): phase 1 of "
                "update_block_size_for_backend keeps it where every backend accepts it, else the "
                "backend's preferred size (FlashInfer-MLA 64, CUTLASS-MLA 128, CPU-MLA 16).",
        source=_034 + "vllm/config/cache.py::CacheConfig.DEFAULT_BLOCK_SIZE (16 -> 64); "
               "vllm/platforms/interface.py::Platform._preferred_block_size_for_backends; "
               "vllm/v1/attention/backend.py::AttentionBackend.get_preferred_block_size."),
    EngineFeature(
        name="rocm_attn_prefers_block_16", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="ROCM_ATTN keeps 16-token blocks (its native C++ paged-attention kernel) when the "
                "block size is not given, although the default became 64.",
        source=_034 + "vllm/v1/attention/backends/rocm_attn.py::RocmAttentionBackend."
               "get_preferred_block_size (new in 0.34)."),
    EngineFeature(
        name="cudagraph_memory_estimate", kind="feature", versions=">=0.20",
        introduced_by="https://github.com/vllm-project/vllm/releases/tag/v0.20.0",
        summary="VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default: determine_available_memory "
                "subtracts the CUDA graph memory it estimates before capture from the KV cache.",
        source="Read in the vllm==0.19.0 and vllm==0.20.0 wheels: vllm/envs.py defaults "
               "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS to 0 in 0.19.0 and to 1 in 0.20.0 (the startup line "
               "both 0.20 and 0.21 print says 'default since v0.21.0'); "
               "vllm/v1/worker/gpu_worker.py::determine_available_memory subtracts the estimate when it is on."),
    EngineFeature(
        name="triton_topk_topp_sampler", kind="feature", versions=">=0.17",
        summary="Top-k / top-p masking by a Triton kernel instead of a full-vocabulary sort: the profiling "
                "sampler run (top-k and top-p on) needs about a third of the memory per logit.",
        introduced_by=_PR + "33538", introduced_merged="2026-02-02",
        source="Read in the vllm==0.15.1, 0.16.0 and 0.17.0 wheels: vllm/v1/sample/ops/topk_topp_triton.py is "
               "absent from 0.15.1 and 0.16.0 (whose TopKTopPSampler runs forward_native, a full sort, unless "
               "VLLM_USE_FLASHINFER_SAMPLER=1) and present in 0.17.0. Startup logs agree: 0.10.1 kept about "
               "36 B per logit, 0.19.0 about 14 (tests/data/capacity/startup_logs.json, budget_logs)."),
    EngineFeature(
        name="extensible_kv_cache", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="--enable-extensible-kv-cache (default on CUDA and ROCm unless --kv-cache-memory-bytes "
                "is set): the KV cache is sized from memory measured after CUDA graph capture, and "
                "--gpu-memory-utilization defaults to None, resolved to 1.0 with it and 0.92 without.",
        source=_034 + "vllm/config/cache.py::CacheConfig.resolved_gpu_memory_utilization, "
               "CacheConfig.enable_extensible_kv_cache; "
               "vllm/config/vllm.py::VllmConfig._resolve_extensible_kv_cache."),
    EngineFeature(
        name="fa_sm90_d512_quantized_block_64", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="FLASH_ATTN on SM90 at head size 512 with a quantized KV cache (the FA4 fp8-dequant "
                "path) needs a block size divisible by 64 ('SM90 d512 FP8 KV requires a block size "
                "divisible by 64') and no block sparsity.",
        source=_034 + "vllm/v1/attention/backends/flash_attn.py::FlashAttentionBackend."
               "supports_combination."),
    EngineFeature(
        name="triton_mla_sliding_window", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="TRITON_MLA accepts sliding-window MLA layers (decode clamps the KV length to the window; for "
                "windowed DSpark drafts, prefill of such a layer raises), so a sliding-window MLA layer that no "
                "other MLA backend takes gets TRITON_MLA instead of 'No valid attention backend found'.",
        source=_034 + "vllm/v1/attention/backends/mla/triton_mla.py::TritonMLABackend.supports_sliding_window "
               "(new in 0.34); verified by scripts/oracle/backend_oracle.py."),
    EngineFeature(
        name="flash_attn_fp8_reason_034", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="FLASH_ATTN's refusal of a quantized cache its FA version cannot read is worded 'FP8 KV requires "
                "FA3 (SM90), equal-d512 FA4 (SM90), or FA4 (SM100).' (0.33: 'FP8 KV cache requires FA3 on SM90, "
                "FA4 with head_size=512 on SM90, or FA4 on SM100'); the SM90 head-512 block check comes first.",
        source=_034 + "vllm/v1/attention/backends/flash_attn.py::FlashAttentionBackend.supports_combination; "
               "verified by scripts/oracle/backend_oracle.py."),
    EngineFeature(
        name="b12x_head_size_64", kind="removed_feature", versions="<0.34", fixed_or_removed_by=_V034,
        summary="B12X accepts head size 64 (0.34 drops it until flashinfer-ai/flashinfer#6977 is fixed: "
                "128, 192 and 256 remain).",
        source=_034 + "vllm/v1/attention/backends/b12x.py::B12xPagedAttentionBackend.get_supported_head_sizes."),
    EngineFeature(
        name="quantization_fp_quant", kind="removed_feature", versions="<0.34", fixed_or_removed_by=_V034,
        summary="--quantization fp_quant (removed in 0.34: not a choice any more, vLLM exits with "
                "'invalid choice'); 0.34 adds lut_b_moe, mxfp4_hadamard32 and w4afp8.",
        source=_034 + "vllm/model_executor/layers/quantization/__init__.py::QuantizationMethods."),
    EngineFeature(
        name="mistral_large4_fp8_ds_mla", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="Mistral Large 4: --kv-cache-dtype auto with the checkpoint's fp8_kv_cache becomes "
                "fp8_ds_mla (fp8 on ROCm); an explicit bfloat16 becomes auto.",
        source=_034 + "vllm/model_executor/models/config.py::MistralLarge4ForCausalLM."
               "verify_and_update_config (architecture new in 0.34); applied by rule KV150 "
               "(kvplan/rules/model.py), the architecture read by kvplan/ingest/mistral_params.py."),
    EngineFeature(
        name="minimax_m3_nvfp4_heads_per_rank", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="MiniMax-M3 with an NVFP4 KV cache needs exactly 16 query heads per KV head on each "
                "tensor-parallel rank ('MiniMax-M3 does not support an NVFP4 KV cache with "
                "tensor_parallel_size=N yet').",
        source=_034 + "vllm/model_executor/models/config.py::MiniMaxM3SparseConfig."
               "verify_and_update_config."),
    EngineFeature(
        name="step5_tail_ring_kernel_block", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="Step 5's CSA tail-ring backend advertises a kernel block of 32, 64 or 128 tokens where one KV "
                "page of the block size cannot hold the ring's 7 + k rows of 1 KiB, so the block size vLLM "
                "resolves can hold it (0.33 only refuses: 'Step5 CSA tail ring needs N rows ... increase "
                "--block-size', which 0.34 still raises for a page that stays too small).",
        source=_034 + "vllm/models/step5/common/csa_tail_ring.py::Step5CSATailRingBackend."
               "get_supported_kernel_block_sizes, _minimum_tail_ring_block_size (0.33: "
               "vllm/models/step5/nvidia/csa_tail_ring.py::Step5CSATailRing.get_kv_cache_spec raises)."),
    EngineFeature(
        name="sliding_mla_full_allocation_fallback", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="Sliding-window MLA layers (SlidingWindowMLASpec) may take the full-allocation fallback: where "
                "pages cannot be unified (a sparse indexer's key page next to the MLA latent's) every layer is "
                "allocated as full MLA in one group; before, a SlidingWindowMLASpec ruled the fallback out and "
                "vLLM raised 'page size is not divisible by the maximum page size' (Dots3-Note).",
        source=_034 + "vllm/v1/core/kv_cache_planning.py::_try_get_full_allocation_fallback_groups "
               "(SlidingWindowMLASpec no longer excluded); verified by scripts/oracle/capacity_oracle.py "
               "(cases_arch.json: Dots3NoteForCausalLM, 0.33.0 raises, 0.34.0 one group)."),
    EngineFeature(
        name="nemotron_h_omni_ssm_dtype_hook", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="The Nemotron-H Omni V3 architectures (NemotronH_Nano_Omni_Reasoning_V3, "
                "NemotronH_Omni_Reasoning_V3, NemotronH_Super_Omni_Reasoning_V3) take their text config's "
                "mamba_ssm_cache_dtype (float32 when absent) for --mamba-ssm-cache-dtype auto, as Nemotron-H "
                "does; before, their SSM state kept the model dtype.",
        source=_034 + "vllm/model_executor/models/config.py::MODELS_CONFIG_MAP (the three architectures mapped "
               "to NemotronHNanoVLV2Config, new in 0.34); verified by scripts/oracle/capacity_oracle.py "
               "(tests/data/vllm_oracle_capacity/cases_arch.json, 0.33.0 and 0.34.0)."),
    EngineFeature(
        name="glm5_draft_forced_auto", kind="removed_feature", versions="<0.34", fixed_or_removed_by=_V034,
        summary="GLM-5 (GlmMoeDsaForCausalLM) forced a separate (non-MTP) draft model's KV cache to "
                "'auto' when the target defaulted to fp8_e4m3 on SM100; 0.34 drops this (the draft "
                "inherits the target's dtype). Glm5Next keeps it (except mtp and dspark drafts).",
        source=_034 + "vllm/model_executor/models/config.py::GlmMoeDsaForCausalLM."
               "verify_and_update_config (draft branch removed), Glm5NextModelConfig."),
    EngineFeature(
        name="sm120_sparse_mla_nope_rows", kind="feature", versions=">=0.34", introduced_by=_V034,
        summary="FLASHINFER_MLA_SPARSE_SM120 stores an fp8_ds_mla row of 528 B (512 fp8 + 16 B of scales) for a "
                "latent of kv_lora_rank 512 without RoPE (GLM-5 Next); before, every fp8_ds_mla row was 656 B.",
        source=_034 + "vllm/v1/attention/backends/mla/flashinfer_mla_sparse_sm120.py::FlashInferMLASparseSM120Impl."
               "get_fp8_ds_mla_row_bytes (0.33: mla_attention.py::MLAAttention.get_kv_cache_spec, fixed 656); "
               "verified by scripts/oracle/capacity_oracle.py (GLM-5 Next on an RTX PRO 6000)."),
)
"""KV-relevant vLLM history with version ranges (see each entry's `source` for the mapping)."""


ORACLE_VERIFIED_RELEASES: tuple[str, ...] = ("0.18.1", "0.22.0", "0.25.1", "0.28.0", "0.31.0", "0.34.0")
"""Releases besides the one the rows were read from (0.33, answers in tests/data/vllm_oracle) whose own
code answered kvplan's corpus (real model classes on the meta device, per layer: KV dtype, quant mode,
sliding window, KV heads, head size) and whose answers the planner matches at `--engine` of that
release: tests/data/vllm_oracle_releases/<version>, made with scripts/oracle/release_oracle.sh and
checked by tests/planner/test_vllm_parity.py. A patch release stands for its minor release.
Attention-backend capability rows are read from 0.33 (plus the 0.34 rows above); the oracle runs on
the CPU and does not check them."""


BACKEND_ORACLE_RELEASES: tuple[str, ...] = ("0.25.1", "0.28.0", "0.31.0", "0.33.0", "0.34.0")
"""Releases whose own attention selector answered kvplan's backend grid (scripts/oracle/backend_oracle.py, answers
in tests/data/vllm_oracle_backends/<version>, checked by tests/backends/test_backend_oracle.py): for these the
backend rows and their versioned differences are verified, not assumed."""


def oracle_verified(engine: EngineVersion) -> str | None:
    """The oracle-verified release of the engine's minor release (e.g. `0.28.0` for vllm==0.28.1), or None."""
    if engine.engine != "vllm" or engine.version is None:
        return None
    minor = engine.version[:2]
    return next((v for v in ORACLE_VERIFIED_RELEASES if tuple(int(x) for x in v.split(".")[:2]) == minor), None)


def engine_feature(name: str) -> EngineFeature:
    """Look up an ENGINE_FEATURES entry by name (KeyError if absent)."""
    for f in ENGINE_FEATURES:
        if f.name == name:
            return f
    raise KeyError(name)


def rows_for(engine: EngineVersion) -> Mapping[str, BackendCapability]:
    """The capability rows as release `engine` reads them: BACKENDS with the versioned ENGINE_FEATURES applied to
    the row fields they change (what `kvplan backends --engine` shows; selection asks the same features through
    the backends' hooks)."""
    rows = dict(BACKENDS)
    if not engine_feature("b12x_head_size_64").holds_for(engine):
        b12x = rows["B12X"]
        rows["B12X"] = b12x.model_copy(update={"head_sizes": tuple(h for h in b12x.head_sizes or () if h != 64)})
    if engine_feature("triton_mla_sliding_window").holds_for(engine):
        rows["TRITON_MLA"] = rows["TRITON_MLA"].model_copy(update={"supports_sliding_window": True})
    return MappingProxyType(rows)
