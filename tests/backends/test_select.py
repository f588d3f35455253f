"""Backend selection and advice as vLLM 0.33 would decide them (reference §4.5, §5, §6, §10)."""
from __future__ import annotations

import json

import pytest

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.gpus import resolve_gpu
from kvplan.backends.select import (
    BackendRequest,
    MlaDims,
    flashinfer_group_query_dtype_crash,
    flashinfer_query_dtypes,
    mla_prefill_backend,
    prefill_query_advice,
    rocm_fp8_notes,
    select_backend,
    validate_backend,
)
from kvplan.errors import KvplanInputError
from kvplan.model.vocab import QuantMode

TRITON_SM89 = "native FP8 (fp8e4nv) requires SM89+. Re-run with --kv-cache-dtype bfloat16."
NO_BACKEND = "No valid attention backend found"


def dense(kv: str = "auto", **kw) -> BackendRequest:
    return BackendRequest(head_size=kw.pop("head_size", 128), kv_cache_dtype=kv, num_heads=32,
                          num_kv_heads=8, **kw)


R1 = dict(head_size=576, use_mla=True, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
          v_head_dim=128, num_heads=128, num_kv_heads=1)
R1_DIMS = MlaDims(qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, kv_lora_rank=512)

# Reference §10: CUDA, dense decoder, head 128, no sinks, automatic backend.
# expected = (backend, flash_attn_version, query_quant) or ("error", substring)
DECISION_TABLE = {
    ("a100", "auto"): ("FLASH_ATTN", 2, False),
    ("a100", "fp8"): ("FLASHINFER", None, False),
    ("a100", "fp8_e5m2"): ("FLASHINFER", None, False),
    ("a100", "int8_per_token_head"): ("TRITON_ATTN", None, False),
    ("a100", "fp8_per_token_head"): ("error", TRITON_SM89),
    ("a100", "nvfp4"): ("FLASHINFER", None, False),
    ("a10", "fp8"): ("FLASHINFER", None, False),
    ("a10", "fp8_per_token_head"): ("error", TRITON_SM89),
    ("l40s", "auto"): ("FLASH_ATTN", 2, False),
    ("l40s", "fp8"): ("FLASHINFER", None, False),
    ("l40s", "fp8_e5m2"): ("FLASHINFER", None, False),
    ("l40s", "int8_per_token_head"): ("TRITON_ATTN", None, False),
    ("l40s", "fp8_per_token_head"): ("TRITON_ATTN", None, False),
    ("l40s", "nvfp4"): ("FLASHINFER", None, False),
    ("h100", "auto"): ("FLASH_ATTN", 3, False),
    ("h100", "fp8"): ("FLASH_ATTN", 3, True),
    ("h100", "fp8_e4m3"): ("FLASH_ATTN", 3, True),
    ("h100", "fp8_e5m2"): ("FLASHINFER", None, False),
    ("h100", "int8_per_token_head"): ("TRITON_ATTN", None, False),
    ("h100", "fp8_per_token_head"): ("TRITON_ATTN", None, False),
    ("h100", "nvfp4"): ("FLASHINFER", None, False),
    ("b200", "auto"): ("FLASHINFER", None, False),
    ("b200", "fp8"): ("FLASHINFER", None, True),
    ("b200", "fp8_e5m2"): ("FLASHINFER", None, True),
    ("b200", "int8_per_token_head"): ("TRITON_ATTN", None, False),
    ("b200", "fp8_per_token_head"): ("TRITON_ATTN", None, False),
    ("b200", "nvfp4"): ("FLASHINFER", None, True),
    ("b200", "nvfp4_4over6"): ("FLASHINFER", None, True),
    ("b300", "fp8"): ("FLASHINFER", None, True),
    ("rtx-pro-6000", "auto"): ("FLASH_ATTN", 2, False),
    ("rtx-pro-6000", "fp8"): ("FLASHINFER", None, False),
    ("rtx-pro-6000", "fp8_e5m2"): ("FLASHINFER", None, False),
    ("rtx-pro-6000", "int8_per_token_head"): ("TRITON_ATTN", None, False),
    ("rtx-pro-6000", "fp8_per_token_head"): ("TRITON_ATTN", None, False),
    ("rtx-pro-6000", "nvfp4"): ("FLASHINFER", None, False),
    ("rtx-pro-6000", "nvfp4_4over6"): ("error", NO_BACKEND),
    ("h100", "nvfp4_4over6"): ("error", NO_BACKEND),
    ("a100", "nvfp4_4over6"): ("error", NO_BACKEND),
}


@pytest.mark.parametrize("gpu,kv", sorted(DECISION_TABLE))
def test_select_backend_matches_reference_decision_table(gpu: str, kv: str) -> None:
    c = select_backend(dense(kv), resolve_gpu(gpu))
    exp = DECISION_TABLE[(gpu, kv)]
    if exp[0] == "error":
        assert c.status == "error" and exp[1] in c.error
        return
    assert (c.status, c.backend, c.flash_attn_version, c.query_quant) == ("selected", *exp), c.error
    assert c.error is None


def test_select_backend_flashinfer_query_dtypes_per_arch() -> None:
    # FlashInfer on SM120 with fp8: XQA decode, model-dtype query; SM100: trtllm-gen, fp8 query.
    sm120 = select_backend(dense("fp8"), resolve_gpu("rtx-pro-6000"))
    assert (sm120.prefill_query_dtype, sm120.decode_query_dtype, sm120.decode_kernel) == (
        "bfloat16", "bfloat16", "xqa")
    b200 = select_backend(dense("fp8"), resolve_gpu("b200"))
    assert (b200.prefill_query_dtype, b200.decode_query_dtype, b200.decode_kernel) == (
        "float8_e4m3fn", "float8_e4m3fn", "trtllm-gen")
    assert any(n.startswith("FlashInfer resolved query dtypes: prefill=float8_e4m3fn") for n in b200.notes)
    sm90_nvfp4 = select_backend(dense("nvfp4"), resolve_gpu("h100"))
    assert sm90_nvfp4.decode_kernel == "native (fa2)" and sm90_nvfp4.decode_query_dtype == "bfloat16"


def test_flashinfer_query_dtypes_skipped_group_keeps_model_dtype() -> None:
    # PR #39002: an unquantized group on B200 gets bf16 queries even when the global dtype is fp8.
    fi = flashinfer_query_dtypes(resolve_gpu("b200"), "auto")
    assert (fi.prefill_query_dtype, fi.decode_query_dtype) == ("bfloat16", "bfloat16")
    off = flashinfer_query_dtypes(resolve_gpu("b200"), "fp8",
                                  attention_config={"disable_flashinfer_q_quantization": True})
    assert off.prefill_query_dtype == "bfloat16"


def test_select_backend_fp8_e5m2_warns_about_forward_assertion_on_sm100() -> None:
    c = select_backend(dense("fp8_e5m2"), resolve_gpu("b200"))
    assert c.backend == "FLASHINFER" and c.query_quant
    assert any("AssertionError" in n and "fp8_e5m2" in n for n in c.notes)


def test_select_backend_e5m2_on_triton_is_stored_as_e4m3() -> None:
    c = select_backend(dense("fp8_e5m2"), resolve_gpu("l40s"), forced="TRITON_ATTN")
    assert c.backend == "TRITON_ATTN" and c.query_quant
    assert any("stored as e4m3" in n for n in c.notes)
    assert any("AssertionError" in n for n in c.notes)


@pytest.mark.parametrize("head", [80, 96])
def test_select_backend_odd_head_fp8_on_sm89_uses_triton(head: int) -> None:
    c = select_backend(dense("fp8", head_size=head), resolve_gpu("l40s"))
    assert (c.status, c.backend, c.query_quant) == ("selected", "TRITON_ATTN", True)
    assert "head_size not supported" in c.rejected["FLASHINFER"]
    assert c.rejected["FLASH_ATTN"]  # FA2 takes no fp8


@pytest.mark.parametrize("head", [80, 96])
def test_select_backend_odd_head_fp8_on_sm80_errors_with_rerun_advice(head: int) -> None:
    c = select_backend(dense("fp8", head_size=head), resolve_gpu("a100"))
    assert c.status == "error" and c.backend == "TRITON_ATTN" and c.error_stage == "impl"
    assert c.error == ("FP8 KV cache is not supported by the Triton attention backend on NVIDIA A100 "
                       "SXM4 80GB (compute capability 8.0); native FP8 (fp8e4nv) requires SM89+. "
                       "Re-run with --kv-cache-dtype bfloat16.")


def test_select_backend_fp8_on_sm75_advises_float16() -> None:
    c = select_backend(dense("fp8", model_dtype="float16"), resolve_gpu("t4"))
    assert c.error and c.error.endswith("Re-run with --kv-cache-dtype float16.")


def test_select_backend_bf16_model_on_sm75_is_config_error() -> None:
    c = select_backend(dense("auto"), resolve_gpu("t4"))
    assert c.error_stage == "config" and "Bfloat16 is only supported" in c.error


@pytest.mark.parametrize("gpu,backend,version", [
    ("h100", "FLASHMLA", None), ("b200", "FLASHINFER_MLA", None), ("rtx-pro-6000", "TRITON_MLA", None),
])
def test_select_backend_mla_fp8(gpu: str, backend: str, version) -> None:
    c = select_backend(BackendRequest(kv_cache_dtype="fp8", **R1), resolve_gpu(gpu))
    assert (c.status, c.backend) == ("selected", backend)
    if gpu == "h100":
        assert c.rejected["FLASH_ATTN_MLA"] == ("kv_cache_dtype not supported",)
        assert c.block_size == 64  # FlashMLA pages


@pytest.mark.parametrize("gpu,backend,block,engine", [
    # FlashInfer-MLA's kernel blocks are [32, 64]: 0.33's default 16 is refused and get_preferred_block_size takes
    # the smallest (capacity oracle case Kimi-K2-Instruct__auto__65536__b200-flashinfer-mla)
    ("h100", "FLASH_ATTN_MLA", 16, "vllm==0.33.0"), ("b200", "FLASHINFER_MLA", 32, "vllm==0.33.0"),
    ("rtx-pro-6000", "TRITON_MLA", 16, "vllm==0.33.0"),
    # 0.34's default block is 64 tokens, kept where the backend accepts it
    ("h100", "FLASH_ATTN_MLA", 64, "vllm==0.34.0"), ("b200", "FLASHINFER_MLA", 64, "vllm==0.34.0"),
    ("rtx-pro-6000", "TRITON_MLA", 64, "vllm==0.34.0"),
])
def test_select_backend_mla_auto(gpu: str, backend: str, block: int, engine: str) -> None:
    c = select_backend(BackendRequest(kv_cache_dtype="auto", **R1), resolve_gpu(gpu), EngineVersion.parse(engine))
    assert (c.backend, c.block_size, c.query_quant) == (backend, block, False)


def test_select_backend_mla_fp8_on_sm80_errors() -> None:
    c = select_backend(BackendRequest(kv_cache_dtype="fp8", **R1), resolve_gpu("a100"))
    assert c.backend == "TRITON_MLA" and "requires SM89+" in c.error


def test_select_backend_mla_nvfp4_is_config_error() -> None:
    c = select_backend(BackendRequest(kv_cache_dtype="nvfp4", **R1), resolve_gpu("b200"))
    assert c.error_stage == "config" and c.error.startswith("nvfp4 KV cache is not supported with MLA")


def test_select_backend_sparse_mla_canonicalizes_to_fp8_ds_mla() -> None:
    sparse = dict(R1, use_sparse=True, index_topk=2048)
    h = select_backend(BackendRequest(kv_cache_dtype="fp8", **sparse), resolve_gpu("h100"))
    assert (h.backend, h.effective_kv_cache_dtype) == ("FLASHMLA_SPARSE", "fp8_ds_mla")
    assert "Using fp8_ds_mla KV cache format for FLASHMLA_SPARSE backend." in h.notes
    sm120 = select_backend(BackendRequest(kv_cache_dtype="auto", **sparse), resolve_gpu("rtx-pro-6000"))
    assert (sm120.backend, sm120.effective_kv_cache_dtype) == ("FLASHINFER_MLA_SPARSE_SM120", "fp8_ds_mla")
    b = select_backend(BackendRequest(kv_cache_dtype="fp8", **sparse), resolve_gpu("b200"))
    assert (b.backend, b.effective_kv_cache_dtype) == ("FLASHINFER_MLA_SPARSE", "fp8")


@pytest.mark.parametrize("gpu,kv,backend", [("h100", "fp8", "FLASH_ATTN"), ("b200", "fp8", "FLASH_ATTN"),
                                            ("h100", "auto", "FLASH_ATTN")])
def test_select_backend_per_head_scales_only_on_flash_attn_fa3_plus(gpu: str, kv: str, backend: str) -> None:
    c = select_backend(dense(kv, use_per_head_quant_scales=True), resolve_gpu(gpu))
    assert c.backend == backend and c.flash_attn_version >= 3
    if gpu == "b200":
        assert "per-head quant scales not supported" in c.rejected["FLASHINFER"]


@pytest.mark.parametrize("gpu", ["a100", "l40s", "rtx-pro-6000"])
def test_select_backend_per_head_scales_without_fa3_has_no_backend(gpu: str) -> None:
    # Even a skipped (auto) layer: use_per_head_quant_scales comes from the checkpoint.
    c = select_backend(dense("auto", use_per_head_quant_scales=True), resolve_gpu(gpu))
    assert c.status == "error" and c.error.startswith(NO_BACKEND)
    assert "FLASHINFER: [per-head quant scales not supported]" in c.error


@pytest.mark.parametrize("attn_type", ["encoder", "encoder_only"])
def test_select_backend_encoder_attention_with_fp8_errors(attn_type: str) -> None:
    c = select_backend(dense("fp8", attn_type=attn_type), resolve_gpu("h100"))
    assert c.status == "error" and c.error_type == "NotImplementedError"
    assert c.error == "quantization is not supported for encoder attention"


def test_select_backend_encoder_attention_on_sm100_skips_flashinfer() -> None:
    c = select_backend(dense("auto", attn_type="encoder_only"), resolve_gpu("b200"))
    assert c.backend == "FLASH_ATTN"  # non-causal: FA before FlashInfer; FlashInfer is decoder-only


def test_select_backend_forced_invalid_backend_lists_reasons() -> None:
    c = select_backend(dense("fp8"), resolve_gpu("a100"), forced="FLASH_ATTN")
    assert c.status == "error" and c.forced and c.error_stage == "selection"
    assert c.error == ("Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. "
                       "Reason: ['kv_cache_dtype not supported', 'FP8 KV requires FA3 (SM90), equal-d512 FA4 (SM90), "
                       "or FA4 (SM100).']")
    old = select_backend(dense("fp8"), resolve_gpu("a100"), EngineVersion.parse("vllm==0.33.0"), forced="FLASH_ATTN")
    assert old.error is not None and old.error.endswith(
        "Reason: ['kv_cache_dtype not supported', 'FP8 KV cache requires FA3 on SM90, FA4 with head_size=512 on "
        "SM90, or FA4 on SM100']")


def test_select_backend_forced_bypasses_priority_but_not_validation() -> None:
    c = select_backend(dense("fp8"), resolve_gpu("b200"), attention_config={"backend": "FLASH_ATTN"})
    assert (c.backend, c.forced, c.flash_attn_version, c.candidates) == ("FLASH_ATTN", True, 4, ("FLASH_ATTN",))
    per_kind = select_backend(dense("auto", has_sliding_window=True), resolve_gpu("h100"),
                              attention_config={"backend_per_kind": {"sliding_window": "TRITON_ATTN"}})
    assert per_kind.backend == "TRITON_ATTN"


def test_select_backend_forced_unknown_name_is_input_error() -> None:
    with pytest.raises(KvplanInputError, match="Did you mean: FLASHINFER"):
        select_backend(dense("fp8"), resolve_gpu("h100"), forced="FLASHINFR")


def test_select_backend_fa4_head256_fp8_falls_back_to_fa2_and_is_refused() -> None:
    # the FA4 head-256 kernel hands a quantized cache to FA2, which reads no FP8: supports_combination refuses
    c = select_backend(dense("fp8", head_size=256), resolve_gpu("b200"), forced="FLASH_ATTN")
    assert c.error_stage == "selection" and c.error is not None and "FP8 KV requires FA3" in c.error
    auto = select_backend(dense("fp8", head_size=256), resolve_gpu("b200"))
    assert auto.backend == "FLASHINFER" and "FLASH_ATTN" in auto.rejected


def test_select_backend_sm90_head512_fp8_uses_fa4_dequant_without_fp8_query() -> None:
    c = select_backend(dense("fp8", head_size=512), resolve_gpu("h100"))
    assert (c.backend, c.flash_attn_version, c.query_quant, c.block_size) == ("FLASH_ATTN", 4, False, 64)


def test_select_backend_nvfp4_without_trtllm_on_sm100_errors() -> None:
    c = select_backend(dense("nvfp4"), resolve_gpu("b200"), attention_config={"use_trtllm_attention": False})
    assert c.error == "--kv-cache-dtype nvfp4 requires the SM100 trtllm-gen FlashInfer path."


def test_select_backend_sinks_on_sm80_fall_to_triton() -> None:
    c = select_backend(dense("auto", head_size=64, has_sinks=True), resolve_gpu("a100"))
    assert c.backend == "TRITON_ATTN"
    assert "sink not supported on compute capability < 9.0" in c.rejected["FLASH_ATTN"]


def test_select_backend_fp32_model_uses_triton() -> None:
    # TritonAttentionBackend.supported_dtypes includes float32 (FlashAttention and FlashInfer do not)
    assert select_backend(dense("auto", model_dtype="float32"), resolve_gpu("h100")).backend == "TRITON_ATTN"


@pytest.mark.parametrize("kv,model,msg", [
    ("fp8_e4m3fn", "bfloat16", "Invalid kv_cache_dtype: 'fp8_e4m3fn'"),
    ("float16", "bfloat16", 'kv_cache_dtype="float16" is incompatible with dtype="bfloat16"'),
])
def test_select_backend_config_errors(kv: str, model: str, msg: str) -> None:
    c = select_backend(dense(kv, model_dtype=model), resolve_gpu("h100"))
    assert c.error_stage == "config" and msg in c.error


def test_select_backend_unmodelled_engine_does_not_guess() -> None:
    for spec in ("sglang", "trtllm==1.0", "vllm==0.17.0", "vllm==0.35.0"):
        c = select_backend(dense("fp8"), resolve_gpu("h100"), EngineVersion.parse(spec))
        assert c.status == "not_modelled" and c.backend is None and "not modelled yet" in c.notes[0]


def test_select_backend_older_release_uses_its_kv_dtype_list() -> None:
    old = EngineVersion.parse("vllm==0.19.0")
    assert select_backend(dense("fp8"), resolve_gpu("h100"), old).backend == "FLASH_ATTN"
    c = select_backend(dense("int8_per_token_head"), resolve_gpu("h100"), old)
    assert c.error_stage == "config" and "Invalid kv_cache_dtype: 'int8_per_token_head'" in c.error
    new = select_backend(dense("int8_per_token_head"), resolve_gpu("h100"), EngineVersion.parse("vllm==0.20.0"))
    assert new.backend == "TRITON_ATTN"


def test_select_backend_rocm_mi300x_fp8_notes_fnuz() -> None:
    c = select_backend(dense("fp8"), resolve_gpu("mi300x"))
    assert (c.status, c.backend) == ("selected", "ROCM_ATTN")
    assert any("float8_e4m3fnuz" in n and "doubled" in n for n in c.notes)
    pth = select_backend(dense("fp8_per_token_head"), resolve_gpu("mi300x"))
    assert pth.backend == "TRITON_ATTN" and any("224" in n for n in pth.notes)


def test_select_backend_rocm_no_backend_lists_supported_dtypes() -> None:
    c = select_backend(dense("nvfp4"), resolve_gpu("mi300x"))
    assert c.error.startswith("No valid attention backend found for rocm")
    assert "Supported kv_cache_dtype values" in c.error


def test_select_backend_cpu_rules() -> None:
    assert select_backend(dense("fp8"), resolve_gpu("cpu")).backend == "CPU_ATTN"
    assert select_backend(dense("fp8"), resolve_gpu("cpu-avx2")).error == (
        "FP8 KV cache on CPU requires x86 with AVX-512 or AMX.")
    c = select_backend(dense("int8_per_token_head"), resolve_gpu("cpu"))
    assert c.error == ("--kv-cache-dtype int8_per_token_head is not supported by the CPU attention "
                       "backend on this host.")


def test_select_backend_cpu_dense_is_always_cpu_attn() -> None:
    # vllm/platforms/cpu.py returns CPU_ATTN for dense layers without walking validate_configuration.
    c = select_backend(dense("auto").model_copy(update={"has_sinks": True}), resolve_gpu("cpu"))
    assert (c.status, c.backend) == ("selected", "CPU_ATTN")


def test_rocm_fp8_notes_for_mi300x() -> None:
    n = rocm_fp8_notes(resolve_gpu("mi300x"))
    assert (n.fp8_dtype, n.fp8_max, n.per_token_head_max, n.checkpoint_scale_multiplier) == (
        "float8_e4m3fnuz", 240.0, 224.0, 2.0)
    assert any("doubled at load" in line for line in n.notes)
    assert rocm_fp8_notes(resolve_gpu("mi355x")).checkpoint_scale_multiplier == 1.0
    assert rocm_fp8_notes(resolve_gpu("h100")) is None


def test_validate_backend_uses_vllm_reason_strings() -> None:
    r = validate_backend("FLASHINFER", dense("int8_per_token_head", head_size=80), resolve_gpu("b200"))
    assert r == ["head_size not supported", "kv_cache_dtype not supported"]
    assert "non-MLA not supported" in validate_backend("CUTLASS_MLA", dense("auto"), resolve_gpu("b200"))
    # supports_block_size accepts any multiple of a kernel block size (FlashInfer-MLA [32, 64]: 128 is split)
    assert validate_backend("FLASHINFER_MLA", BackendRequest(block_size=128, **R1), resolve_gpu("b200")) == []
    assert validate_backend("FLASHINFER_MLA", BackendRequest(block_size=48, **R1), resolve_gpu("b200")) == [
        "block_size not supported"]
    assert validate_backend("CUTLASS_MLA", BackendRequest(block_size=128, **R1), resolve_gpu("b200")) == []


# ---------------------------------------------------------------------------- #39002
def test_flashinfer_group_query_dtype_crash_before_fix() -> None:
    modes = {QuantMode.fp8_per_tensor, QuantMode.none}
    msg = flashinfer_group_query_dtype_crash(EngineVersion.parse("vllm==0.19.0"), modes, "fp8",
                                             resolve_gpu("b200"))
    assert msg == "Query dtype mismatch: expected torch.float8_e4m3fn, got torch.bfloat16"


@pytest.mark.parametrize("engine,gpu,modes", [
    ("vllm==0.20.0", "b200", {QuantMode.fp8_per_tensor, QuantMode.none}),  # fixed by PR #39002
    ("vllm==0.33.0", "b200", {QuantMode.fp8_per_tensor, QuantMode.none}),
    ("vllm==0.19.0", "h100", {QuantMode.fp8_per_tensor, QuantMode.none}),  # no query quant on SM90
    ("vllm==0.19.0", "b200", {QuantMode.fp8_per_tensor}),  # no skipped layers
    ("sglang", "b200", {QuantMode.fp8_per_tensor, QuantMode.none}),
])
def test_flashinfer_group_query_dtype_crash_absent(engine: str, gpu: str, modes) -> None:
    assert flashinfer_group_query_dtype_crash(EngineVersion.parse(engine), modes, "fp8", resolve_gpu(gpu)) is None


# ---------------------------------------------------------------------------- MLA prefill §6.2
def test_mla_prefill_backend_default_is_flash_attn_for_r1_dims_on_b200() -> None:
    name, tried = mla_prefill_backend(resolve_gpu("b200"), R1_DIMS, {})
    assert name == "FLASH_ATTN" and tried == (("FLASH_ATTN", ()),)
    name2, _ = mla_prefill_backend(resolve_gpu("b200"),
                                   MlaDims(qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
                                           kv_lora_rank=512), {})
    assert name2 == "TRTLLM_RAGGED"


def test_prefill_query_advice_branch1_fp8_prefill() -> None:
    a = prefill_query_advice(resolve_gpu("b200"), "fp8", R1_DIMS,
                             {"use_prefill_query_quantization": True, "mla_prefill_backend": "TRTLLM_RAGGED"},
                             input_len=16384)
    assert (a.branch, a.log_level, a.prefill_query_dtype) == (1, "INFO", "float8_e4m3fn")
    assert a.log_line == "FP8 prefill attention enabled: query data type is FP8"
    assert a.recommendation == "enable" and a.attention_config_flag is None  # already right


def test_prefill_query_advice_branch2_flag_silently_ignored_on_b200() -> None:
    a = prefill_query_advice(resolve_gpu("b200"), "fp8", R1_DIMS, {"use_prefill_query_quantization": True},
                             input_len=8192)
    assert (a.branch, a.log_level, a.prefill_query_dtype, a.prefill_backend) == (2, "INFO", "bfloat16", "FLASH_ATTN")
    assert a.log_line.startswith(
        "Unable to perform FP8 prefill attention when use_prefill_query_quantization is enabled.")
    assert a.flag_silently_ignored and "#50056" in a.explanation
    assert a.attention_config_flag == ("--attention-config '{\"mla_prefill_backend\": \"TRTLLM_RAGGED\", "
                                       "\"use_prefill_query_quantization\": true}'")
    assert json.loads(a.attention_config_flag.split(" ", 1)[1].strip("'")) == a.recommended_attention_config


def test_prefill_query_advice_branch3_warning_when_backend_pinned() -> None:
    a = prefill_query_advice(resolve_gpu("b200"), "fp8", R1_DIMS, {"mla_prefill_backend": "FLASHINFER"},
                             input_len=1024)
    assert (a.branch, a.log_level) == (3, "WARNING")
    assert a.log_line == ("FP8 KV cache is enabled but prefill queries are not quantized to FP8. For "
                          "long-context workloads (ISL >= 4K), enabling FP8 prefill attention can "
                          "significantly optimize prefill latency. To enable, add: --attention-config "
                          "'{\"use_prefill_query_quantization\": true}'")
    assert a.recommendation == "keep_disabled" and "~20%" in a.explanation


def test_prefill_query_advice_branch4_default_b200_never_warns() -> None:
    a = prefill_query_advice(resolve_gpu("b200"), "fp8", R1_DIMS, {}, input_len=32768)
    assert (a.branch, a.log_line, a.prefill_query_dtype) == (4, None, "bfloat16")
    assert a.recommendation == "enable" and a.recommended_attention_config == {
        "use_prefill_query_quantization": True, "mla_prefill_backend": "TRTLLM_RAGGED"}


def test_prefill_query_advice_not_applicable_off_sm100_or_unquantized() -> None:
    h = prefill_query_advice(resolve_gpu("h100"), "fp8", R1_DIMS, {}, input_len=32768)
    assert (h.branch, h.recommendation, h.backend_supports_fp8_prefill_query) == (4, "not_applicable", False)
    u = prefill_query_advice(resolve_gpu("b200"), "auto", R1_DIMS, {"use_prefill_query_quantization": True})
    assert (u.branch, u.recommendation, u.recommended_attention_config) == (2, "not_applicable", {})


def test_prefill_query_advice_unknown_isl_gives_both_thresholds() -> None:
    a = prefill_query_advice(resolve_gpu("gb200"), "fp8", R1_DIMS)
    assert a.recommendation == "depends_on_input_len" and "4K" in a.explanation and "1K" in a.explanation


def test_select_backend_rocm_without_fp8_notes_only_fp8_dtypes() -> None:
    mi250 = resolve_gpu("mi250x")
    assert any("no FP8 hardware" in n for n in select_backend(dense("fp8"), mi250).notes)
    assert not any("no FP8 hardware" in n for n in select_backend(dense("int8_per_token_head"), mi250).notes)


# ---------------------------------------------------------------------------- 0.33 -> 0.34 backend rows
@pytest.mark.parametrize("gpu", ["a100", "h100", "b200", "rtx-pro-6000"])
def test_sliding_window_mla_layer_gets_triton_mla_from_034_only(gpu: str) -> None:
    # triton_mla.py::TritonMLABackend.supports_sliding_window is new in 0.34 (ENGINE_FEATURES
    # triton_mla_sliding_window); before, no MLA backend takes a windowed layer
    req = BackendRequest(has_sliding_window=True, **R1)
    old = select_backend(req, resolve_gpu(gpu), EngineVersion.parse("vllm==0.33.0"))
    assert old.error_stage == "selection" and "No valid attention backend found" in (old.error or "")
    assert old.rejected["TRITON_MLA"] == ("sliding window not supported",)
    new = select_backend(req, resolve_gpu(gpu), EngineVersion.parse("vllm==0.34.0"))
    assert new.backend == "TRITON_MLA" and new.status == "selected"


def test_b12x_head_64_is_a_head_size_refusal_from_034() -> None:
    req = dense("auto", head_size=64)
    assert validate_backend("B12X", req, resolve_gpu("rtx-pro-6000"), engine=EngineVersion.parse("vllm==0.33.0")) == []
    assert validate_backend("B12X", req, resolve_gpu("rtx-pro-6000"),
                            engine=EngineVersion.parse("vllm==0.34.0")) == ["head_size not supported"]


def test_flash_attn_sinks_need_fa3_or_fa4() -> None:
    # supports_sink -> flash_attn_supports_sinks: SM120 runs FA2, so FLASH_ATTN refuses a layer with sinks there
    req = dense("auto", has_sinks=True)
    assert "attention sinks not supported" in validate_backend("FLASH_ATTN", req, resolve_gpu("rtx-pro-6000"))
    assert validate_backend("FLASH_ATTN", req, resolve_gpu("h100")) == []
    assert select_backend(req, resolve_gpu("rtx-pro-6000")).backend == "FLASHINFER"


def test_rows_for_a_release_show_its_own_row_fields() -> None:
    from kvplan.backends.vllm_rows import rows_for
    old, new = rows_for(EngineVersion.parse("vllm==0.33.0")), rows_for(EngineVersion.parse("vllm==0.34.0"))
    assert 64 in (old["B12X"].head_sizes or ()) and 64 not in (new["B12X"].head_sizes or ())
    assert not old["TRITON_MLA"].supports_sliding_window and new["TRITON_MLA"].supports_sliding_window
    # the rows say what the hooks decide
    req = BackendRequest(has_sliding_window=True, **R1)
    for engine, rows in (("vllm==0.33.0", old), ("vllm==0.34.0", new)):
        refused = "sliding window not supported" in validate_backend(
            "TRITON_MLA", req, resolve_gpu("h100"), engine=EngineVersion.parse(engine))
        assert refused is not rows["TRITON_MLA"].supports_sliding_window


def test_b12x_block_256_is_refused_at_validation_in_both_releases() -> None:
    # b12x.py::B12xPagedAttentionBackend.supports_block_size accepts only its page sizes (64, 128) in 0.33 and
    # 0.34, not any multiple of one (the generic AttentionBackend.supports_block_size would)
    req = dense("auto", head_size=128, block_size=256)
    for engine in ("vllm==0.33.0", "vllm==0.34.0"):
        r = select_backend(req, resolve_gpu("rtx-pro-6000"), EngineVersion.parse(engine), forced="B12X")
        assert r.error_stage == "selection" and "block_size not supported" in (r.error or ""), engine
