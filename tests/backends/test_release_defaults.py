"""Release-dependent backend behaviour and serving defaults (vLLM 0.33 -> 0.34, read in both wheels)."""
from __future__ import annotations

import pytest

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.defaults import (
    default_block_size,
    extensible_kv_cache,
    preferred_block_size,
    resolved_gpu_memory_utilization,
)
from kvplan.backends.gpus import resolve_gpu
from kvplan.backends.request import BackendRequest
from kvplan.backends.select import select_backend, validate_backend

V033, V034, V028 = (EngineVersion.parse(f"vllm=={v}") for v in ("0.33.0", "0.34.0", "0.28.0"))
MLA = dict(head_size=576, use_mla=True, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
           v_head_dim=128, num_heads=128, num_kv_heads=1)


def dense(kv: str = "auto", **kw) -> BackendRequest:
    return BackendRequest(head_size=kw.pop("head_size", 128), kv_cache_dtype=kv, num_heads=32, num_kv_heads=8, **kw)


@pytest.mark.parametrize("engine,want", [(V028, 16), (V033, 16), (V034, 64)])
def test_default_block_size_follows_the_release(engine, want) -> None:
    assert default_block_size(engine) == want
    assert select_backend(dense(), resolve_gpu("h100"), engine).block_size == want


def test_backend_preference_overrides_the_default() -> None:
    # CUTLASS_MLA pages in 128 only; ROCM_ATTN keeps its native 16-token kernel in 0.34 too.
    for engine in (V033, V034):
        mla = select_backend(BackendRequest(kv_cache_dtype="auto", **MLA), resolve_gpu("b200"), engine,
                             forced="CUTLASS_MLA")
        assert (mla.backend, mla.block_size) == ("CUTLASS_MLA", 128)
        rocm = select_backend(dense(), resolve_gpu("mi300x"), engine)
        assert (rocm.backend, rocm.block_size) == ("ROCM_ATTN", 16)


def test_fa_sm90_head_512_quantized_needs_block_multiple_of_64_from_034() -> None:
    req = dense("fp8", head_size=512, block_size=32)
    h100 = resolve_gpu("h100")
    assert validate_backend("FLASH_ATTN", req, h100, engine=V033) == []
    assert validate_backend("FLASH_ATTN", req, h100, engine=V034) == [
        "SM90 d512 FP8 KV requires a block size divisible by 64"]
    chosen = select_backend(req, h100, V034)
    assert chosen.backend == "FLASHINFER" and "FLASH_ATTN" in chosen.rejected
    assert validate_backend("FLASH_ATTN", dense("fp8", head_size=512, block_size=128), h100, engine=V034) == []
    # Unquantized, another head size or another GPU: no such reason.
    assert validate_backend("FLASH_ATTN", dense("auto", head_size=512, block_size=32), h100, engine=V034) == []
    assert validate_backend("FLASH_ATTN", dense("fp8", head_size=256, block_size=32), h100, engine=V034) == []


@pytest.mark.parametrize("engine,platform,kw,want", [
    (V033, "cuda", {}, 0.92),
    (V028, "rocm", {}, 0.92),
    (V034, "cuda", {}, 1.0),
    (V034, "rocm", {}, 1.0),
    (V034, "cpu", {}, 0.92),
    (V034, "cuda", {"extensible": False}, 0.92),
    (V034, "cuda", {"given": 0.8}, 0.8),
])
def test_gpu_memory_utilization_default_per_release(engine, platform, kw, want) -> None:
    assert resolved_gpu_memory_utilization(engine, platform, **kw) == want


def test_extensible_kv_cache_default() -> None:
    assert not extensible_kv_cache(V033, "cuda")
    assert not extensible_kv_cache(V033, "cuda", requested=True)  # no such option before 0.34
    assert extensible_kv_cache(V034, "cuda")
    assert not extensible_kv_cache(V034, "cuda", kv_cache_memory_bytes=8 << 30)
    assert not extensible_kv_cache(V034, "cuda", num_gpu_blocks_override=1000)
    assert not extensible_kv_cache(V034, "cuda", requested=False)
    assert not extensible_kv_cache(V034, "cpu")


def test_b12x_pages_and_head_sizes_per_release() -> None:
    gpu = resolve_gpu("rtx-pro-6000")
    # get_preferred_block_size: the default if it is a B12X page size (64, 128), else 128.
    assert select_backend(dense(), gpu, V033, forced="B12X").block_size == 128
    assert select_backend(dense(), gpu, V034, forced="B12X").block_size == 64
    assert validate_backend("B12X", dense(block_size=16), gpu, engine=V034) == ["block_size not supported"]
    # 0.34 drops head size 64 (flashinfer-ai/flashinfer#6977).
    assert validate_backend("B12X", dense(head_size=64), gpu, engine=V033) == []
    assert validate_backend("B12X", dense(head_size=64), gpu, engine=V034) == ["head_size not supported"]


def test_fa4_head_256_on_blackwell_pages_in_128_tokens() -> None:
    # FlashAttentionBackend.get_preferred_block_size -> _get_fa4_hd256_block_size (FA4_HD256_PAGE_SIZE, 0.33 and
    # 0.34): FA4's head-256 kernel on SM100 takes 128-token pages; head 128 keeps the release default.
    for engine in (V033, V034):
        fa4 = select_backend(dense(head_size=256), resolve_gpu("b200"), engine, forced="FLASH_ATTN")
        assert (fa4.flash_attn_version, fa4.block_size) == (4, 128)
        head128 = select_backend(dense(head_size=128), resolve_gpu("b200"), engine, forced="FLASH_ATTN")
        assert head128.block_size == default_block_size(engine)
    fa3 = select_backend(dense(head_size=256), resolve_gpu("h100"), V033, forced="FLASH_ATTN")
    assert (fa3.flash_attn_version, fa3.block_size) == (3, 16)


def test_preferred_block_size_for_several_backends() -> None:
    # Platform._preferred_block_size_for_backends: the default when every backend accepts it, else the smallest
    # LCM of one kernel block size per backend that all accept; one backend: its own preference.
    b200 = resolve_gpu("b200")
    assert preferred_block_size([], b200, 16) is None
    assert preferred_block_size([("FLASHMLA", 64), ("FLASHMLA", 64)], b200, 16) == 64
    assert preferred_block_size([("FLASH_ATTN", 16), ("TRITON_ATTN", 16)], b200, 16) == 16
    assert preferred_block_size([("FLASHINFER_MLA", 32), ("CUTLASS_MLA", 128)], b200, 16) == 128
    assert preferred_block_size([("FLASHINFER_MLA", 64), ("FLASHMLA", 64)], b200, 64) == 64
