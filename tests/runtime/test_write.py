"""Quantize-on-write kernel vs the torch reference (exact bytes), plus the vLLM-derived cases."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from rt_helpers import ALL_KV_CACHE_DTYPES, random_kv  # noqa: E402

from kvplan.runtime.cache import allocate_kv_cache, hadamard  # noqa: E402
from kvplan.runtime.layout import LayerLayout  # noqa: E402
from kvplan.runtime.reference import dequantize_kv_cache, reference_write_kv_cache, split_int4_scale  # noqa: E402
from kvplan.runtime.tolerances import ROUNDTRIP_REL_E5M2, TOLERANCES  # noqa: E402
from kvplan.runtime.write import write_kv_cache  # noqa: E402


def _poisoned_pair(layout, num_blocks, block_size, device, gen, **scales):
    """Two caches with identical random garbage, so untouched bytes can be compared too."""
    a = allocate_kv_cache(layout, num_blocks, block_size, device, **scales)
    noise = torch.randint(0, 256, a.data.view(torch.uint8).shape, generator=gen, device=device,
                          dtype=torch.uint8)
    a.data.view(torch.uint8).copy_(noise)
    b = allocate_kv_cache(layout, num_blocks, block_size, device, **scales)
    b.data.view(torch.uint8).copy_(noise)
    return a, b


@pytest.mark.parametrize("kv_cache_dtype", (*ALL_KV_CACHE_DTYPES, "float16"))
@pytest.mark.parametrize("hkv,head_size,block_size,num_tokens", [
    (2, 64, 16, 37),
    (1, 128, 32, 9),
    (3, 256, 64, 5),
])
def test_write_matches_reference_bytes_exactly(device, kv_cache_dtype, hkv, head_size,
                                               block_size, num_tokens):
    gen = torch.Generator(device=device).manual_seed(hkv * 1000 + head_size + num_tokens)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head_size)
    model_dtype = torch.float16 if kv_cache_dtype == "float16" else torch.bfloat16
    num_blocks = num_tokens // block_size + 3
    scales = {"k_scale": 0.07, "v_scale": 0.011}
    got, want = _poisoned_pair(layout, num_blocks, block_size, device, gen, **scales)
    key, value = random_kv(num_tokens, hkv, head_size, gen, device, model_dtype)
    slots = torch.randperm(num_blocks * block_size, generator=gen, device=device)[:num_tokens]
    slots[::4] = -1  # padding tokens
    write_kv_cache(got, key, value, slots)
    reference_write_kv_cache(want, key, value, slots)
    diff = (got.data.view(torch.uint8) != want.data.view(torch.uint8))
    assert int(diff.sum()) == 0, f"{int(diff.sum())} bytes differ"


@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "fp8", "int8_per_token_head",
                                            "fp8_per_token_head", "int4_per_token_head"])
@pytest.mark.parametrize("launch", [{"rows_per_program": 2}, {"rows_per_program": 2, "num_warps": 2},
                                    {"rows_per_program": 64, "num_warps": 8}])
def test_write_launch_variants_write_the_same_bytes(device, kv_cache_dtype, launch):
    """Rows per program and warps change only the schedule: with 3 kv heads, 2 rows per program
    cross head and token boundaries, 64 rows cover every row in one masked program; padding
    slots stay untouched."""
    gen = torch.Generator(device=device).manual_seed(5)
    layout = LayerLayout.simple(kv_cache_dtype, 3, 64)
    num_tokens, block_size = 29, 16
    num_blocks = num_tokens // block_size + 3
    got, want = _poisoned_pair(layout, num_blocks, block_size, device, gen, k_scale=0.07,
                               v_scale=0.011)
    key, value = random_kv(num_tokens, 3, 64, gen, device, torch.bfloat16)
    slots = torch.randperm(num_blocks * block_size, generator=gen, device=device)[:num_tokens]
    slots[1::5] = -1
    write_kv_cache(got, key, value, slots, **launch)
    reference_write_kv_cache(want, key, value, slots)
    diff = got.data.view(torch.uint8) != want.data.view(torch.uint8)
    assert int(diff.sum()) == 0, f"{launch}: {int(diff.sum())} bytes differ"


def _gluon_write_matches(layout, num_tokens: int, launch: dict, seed: int,
                         device: str = "cuda", default_too: bool = False) -> None:
    """A Gluon write (``kernel="gluon"`` with ``launch``) of ``num_tokens`` random tokens (every
    seventh slot padding) stores the reference's bytes, and the Triton kernel (and, with
    ``default_too``, the default choice) the same bytes."""
    pytest.importorskip("triton.experimental.gluon")
    gen = torch.Generator(device=device).manual_seed(seed)
    num_blocks = num_tokens // 16 + 3
    got, want = _poisoned_pair(layout, num_blocks, 16, device, gen)
    key, value = random_kv(num_tokens, layout.num_kv_heads, layout.head_size, gen, device,
                           torch.bfloat16)
    slots = torch.randperm(num_blocks * 16, generator=gen, device=device)[:num_tokens]
    slots[2::7] = -1
    write_kv_cache(got, key, value, slots, kernel="gluon", **launch)
    reference_write_kv_cache(want, key, value, slots)
    diff = got.data.view(torch.uint8) != want.data.view(torch.uint8)
    assert int(diff.sum()) == 0, f"{launch}: {int(diff.sum())} bytes differ"
    for kernel in ("triton", None) if default_too else ("triton",):
        other, _ = _poisoned_pair(layout, num_blocks, 16, device, gen)
        other.data.copy_(want.data)  # untouched bytes as the reference left them
        write_kv_cache(other, key, value, slots, kernel=kernel)
        assert torch.equal(other.data, got.data), kernel


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["int8_per_token_head", "fp8_per_token_head"])
@pytest.mark.parametrize("hkv,head_size,num_tokens", [(3, 64, 29), (8, 128, 1000), (2, 256, 77)])
@pytest.mark.parametrize("launch", [{}, {"rows_per_program": 32, "num_warps": 4},
                                    {"rows_per_program": 8, "num_warps": 2},
                                    {"rows_per_program": 4, "num_warps": 1}])
def test_write_gluon_kernel_matches_reference_bytes(cuda_device, kv_cache_dtype, hkv, head_size,
                                                    num_tokens, launch):
    """The Gluon per-token-head write kernel (the GPU default) writes the reference's bytes and
    the Triton kernel's: programs that cross token and head boundaries, a masked last program,
    padding slots, outlier channels, heads 64-256."""
    _gluon_write_matches(LayerLayout.simple(kv_cache_dtype, hkv, head_size), num_tokens, launch,
                         num_tokens + head_size)


@pytest.mark.gpu
@pytest.mark.parametrize("hkv,head_size,num_tokens", [(3, 64, 29), (8, 128, 1000), (1, 128, 300),
                                                      (2, 256, 77), (8, 256, 600)])
@pytest.mark.parametrize("launch", [{}, {"rows_per_program": 64, "num_warps": 2},
                                    {"rows_per_program": 32, "num_warps": 1},
                                    {"rows_per_program": 256, "num_warps": 4}])
def test_write_gluon_int4_kernel_matches_reference_bytes(cuda_device, hkv, head_size, num_tokens,
                                                         launch):
    """The Gluon INT4 write kernel (the GPU default: each row over `write_gluon.INT4_LANES`
    lanes, its Hadamard butterflies in registers and, over the lanes, by exchanges) writes the
    reference's bytes and the Triton kernel's: codes, scales and zero points, programs that
    cross token and head boundaries, a masked last program, padding slots, outlier
    channels, heads 64-256."""
    _gluon_write_matches(LayerLayout.simple("int4_per_token_head", hkv, head_size), num_tokens,
                         launch, num_tokens + head_size + 4, default_too=not launch)


@pytest.mark.gpu
@pytest.mark.parametrize("head_size,lanes", [(64, 1), (64, 2), (64, 4), (64, 8), (128, 1), (128, 2),
                                             (128, 4), (128, 8), (256, 2), (256, 4), (256, 8)])
def test_write_gluon_int4_kernel_any_lanes_per_row(cuda_device, monkeypatch, head_size, lanes):
    """However many lanes share a row (1, 2, 4 or 8: the top zero to three butterflies
    exchanged between lanes, the rest in registers), the Gluon INT4 write kernel stores the
    reference's bytes."""
    from kvplan.runtime import write_gluon
    monkeypatch.setitem(write_gluon.INT4_LANES, head_size, lanes)
    _gluon_write_matches(LayerLayout.simple("int4_per_token_head", 3, head_size), 203, {},
                         head_size + lanes)


def test_int4_lanes_per_row_are_checked():
    """A launch of the Gluon INT4 write kernel with a lane count it cannot run, or rows per
    program that do not fill its warps, is a clear error (no GPU needed to plan one)."""
    pytest.importorskip("triton.experimental.gluon")
    from kvplan.runtime import write_gluon
    from kvplan.runtime._common import cache_args
    cache = allocate_kv_cache(LayerLayout.simple("int4_per_token_head", 2, 64), 2, 16, "cpu")
    args = cache_args(cache)
    for lanes in (3, 16):
        with pytest.raises(ValueError, match="lanes per row"):
            write_gluon.plan_int4(args, 2, 64, 16, 0.125, lanes=lanes)
    with pytest.raises(ValueError, match="multiple of 32"):  # 2 warps of 16 rows
        write_gluon.plan_int4(args, 2, 64, 16, 0.125, lanes=2, num_warps=2, rows_per_program=48)
    write_gluon.plan_int4(args, 2, 64, 16, 0.125, lanes=2, num_warps=2, rows_per_program=64)


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "fp8", "int8_per_token_head",
                                            "fp8_per_token_head", "int4_per_token_head"])
def test_bound_writes_match_the_ordinary_path(cuda_device, monkeypatch, kv_cache_dtype):
    """From the third eager write of a call signature over a cache (the second is recorded),
    writes launch through the bound driver path (no `launch_cached`) and store the ordinary
    path's bytes exactly, over new tokens and new slots (padding slots included), on the Gluon
    and the Triton kernels; another token count is a new signature (the ordinary path, then
    bound in turn); a strided key that must be copied stays on the ordinary path."""
    from kvplan.runtime import _common, bound
    launches = []
    ordinary = _common.launch_cached
    monkeypatch.setattr(_common, "launch_cached",
                        lambda *a, **k: (launches.append(a[0]), ordinary(*a, **k)))
    gen = torch.Generator(device="cuda").manual_seed(31)
    hkv, head, num_blocks = 8, 128, 64
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head)
    for kernel in (None, "triton"):
        got, want = _poisoned_pair(layout, num_blocks, 16, "cuda", gen, k_scale=0.05,
                                   v_scale=0.02)

        def write(n, key=None, value=None, got=got, want=want, kernel=kernel):
            if key is None:
                key, value = random_kv(n, hkv, head, gen, "cuda", torch.bfloat16)
            slots = torch.randperm(num_blocks * 16, generator=gen, device="cuda")[:n]
            slots[1] = -1
            launches.clear()
            write_kv_cache(got, key, value, slots, kernel=kernel)
            seen = len(launches)
            write_kv_cache(want, key, value, slots, kernel=kernel, bound=False)
            # bytes, not values: the poisoned bf16 storage holds NaN patterns
            assert torch.equal(got.data.view(torch.uint8), want.data.view(torch.uint8)), \
                (kernel, n)
            return seen

        # first sight, recorded, then bound; a new token count starts over
        assert [write(n) for n in (8, 8, 8, 8, 5, 5, 5)] == [1, 1, 0, 0, 1, 1, 0], kernel
        memo = got.__dict__["_write_plans"][4]
        assert sum(isinstance(c, bound.BoundCall) for c in memo.values()) == 2, kernel
        # a key that is a strided slice (copied first): the ordinary path every time
        wide = torch.randn(5, hkv, 2 * head, generator=gen, device="cuda").to(torch.bfloat16)
        value = torch.randn(5, hkv, head, generator=gen, device="cuda").to(torch.bfloat16)
        assert [write(5, wide[..., ::2], value) for _ in range(3)] == [1, 1, 1]


def test_write_kernel_choice_is_checked(device):
    """An unknown write kernel, or the Gluon kernel where it cannot run (the CPU interpreter,
    FP8 per-tensor and bf16 caches), is a clear error rather than a silent fallback."""
    gen = torch.Generator(device=device).manual_seed(2)
    key, value = random_kv(4, 2, 64, gen, device)
    slots = torch.arange(4, device=device)
    cache = allocate_kv_cache(LayerLayout.simple("int8_per_token_head", 2, 64), 2, 16, device)
    with pytest.raises(ValueError, match="unknown write kernel"):
        write_kv_cache(cache, key, value, slots, kernel="cuda")
    for dtype, head in (("fp8", 256), ("bfloat16", 64)):
        other = allocate_kv_cache(LayerLayout.simple(dtype, 2, head), 2, 16, device)
        k, v = random_kv(4, 2, head, gen, device)
        with pytest.raises(ValueError, match="gluon write kernel"):
            write_kv_cache(other, k, v, slots, kernel="gluon")
    if device != "cuda":
        with pytest.raises(ValueError, match="gluon write kernel"):
            write_kv_cache(cache, key, value, slots, kernel="gluon")
    write_kv_cache(cache, key, value, slots, kernel="triton")
    want = allocate_kv_cache(LayerLayout.simple("int8_per_token_head", 2, 64), 2, 16, device)
    reference_write_kv_cache(want, key, value, slots)
    assert torch.equal(cache.data, want.data)


def test_gluon_defaults_only_on_validated_triton_releases():
    """Gluon's API moves between Triton releases, so the Gluon kernels are a default only on the
    releases they were tested with; a dev or local version string parses, junk does not."""
    from kvplan.runtime._common import GLUON_VALIDATED, gluon_validated
    major, minor = GLUON_VALIDATED[0]
    assert gluon_validated(f"{major}.{minor}.0") and gluon_validated(f"{major}.{minor}.1+git1a2b")
    assert not gluon_validated("3.9.0") and not gluon_validated("2.3.1")
    assert not gluon_validated("nightly")


def test_write_int8_exact_codes_round_half_away(device):
    """vLLM test_per_token_kv_cache INT8 exact case: head 8, block 4, slot 2."""
    layout = LayerLayout.simple("int8_per_token_head", 1, 8)
    cache = allocate_kv_cache(layout, 2, 4, device)
    k = torch.tensor([-127, -2.6, -2.4, -1.6, -1.4, -0.6, -0.4, 127], dtype=torch.bfloat16,
                     device=device).view(1, 1, 8)
    write_kv_cache(cache, k, -k, torch.tensor([2], device=device))
    assert cache.key_scales()[0, 2, 0].item() == 1.0
    assert cache.value_scales()[0, 2, 0].item() == 1.0
    want = [-127, -3, -2, -2, -1, -1, 0, 127]
    assert cache.key_data()[0, 2, 0].tolist() == want
    assert cache.value_data()[0, 2, 0].tolist() == [-x for x in want]


def test_write_negative_slots_leave_cache_untouched(device):
    """slot_mapping [0, -1, 1, -1]: only slots 0 and 1 of block 0 change."""
    gen = torch.Generator(device=device).manual_seed(7)
    layout = LayerLayout.simple("int8_per_token_head", 2, 64)
    cache = allocate_kv_cache(layout, 3, 16, device)
    noise = torch.randint(0, 256, cache.data.view(torch.uint8).shape, generator=gen,
                          device=device, dtype=torch.uint8)
    cache.data.view(torch.uint8).copy_(noise)
    before = cache.data.clone()
    key, value = random_kv(4, 2, 64, gen, device)
    write_kv_cache(cache, key, value, torch.tensor([0, -1, 1, -1], device=device))
    changed = (cache.data != before).any(dim=-1)  # [blocks, heads, slots]
    assert changed[0, :, :2].all()
    changed[0, :, :2] = False
    assert not changed.any()
    q, s = cache.key_data()[0, 1], cache.key_scales()[0, 1]
    torch.testing.assert_close(q.float() * s[:, None], key[2].float(), atol=0.5 * s.max().item() + 1e-6,
                               rtol=0)


@pytest.mark.parametrize("kv_cache_dtype", ALL_KV_CACHE_DTYPES)
def test_write_roundtrip_error_within_tolerance(device, kv_cache_dtype):
    gen = torch.Generator(device=device).manual_seed(11)
    layout = LayerLayout.simple(kv_cache_dtype, 2, 64)
    tol = TOLERANCES[layout.quant_mode]
    key, value = random_kv(32, 2, 64, gen, device)
    scales = {}
    if layout.quant_mode == "fp8_per_tensor":  # calibrated: amax maps to the top of the range
        fmax = 57344.0 if layout.fp8_format == "e5m2" else 448.0
        scales = {"k_scale": key.float().abs().max().item() / fmax,
                  "v_scale": value.float().abs().max().item() / fmax}
    cache = allocate_kv_cache(layout, 2, 16, device, **scales)
    write_kv_cache(cache, key, value, torch.arange(32, device=device))
    k_hat, v_hat = dequantize_kv_cache(cache)
    rel = ROUNDTRIP_REL_E5M2 if layout.fp8_format == "e5m2" else tol.roundtrip_rel
    for x, x_hat, side in ((key, k_hat, 0), (value, v_hat, 1)):
        x = x.float().view(2, 16, 2, 64)
        if layout.quant_mode == "none":
            assert torch.equal(x_hat, x)
            continue
        if layout.quant_mode == "fp8_per_tensor":
            scale = torch.full(x.shape[:-1], cache.k_scale if side == 0 else cache.v_scale,
                               device=device)
        else:
            scale = cache.key_scales() if side == 0 else cache.value_scales()
        if layout.quant_mode == "int4_per_token_head":  # bound holds in the rotated basis
            rot = hadamard(64, device)
            x, x_hat = x @ rot, x_hat @ rot
            scale = split_int4_scale(scale)[0]
        bound = tol.roundtrip_abs_scale * scale[..., None] + rel * x.abs()
        assert ((x_hat - x).abs() <= bound * (1 + 1e-5) + 1e-7).all()


@pytest.mark.parametrize("kv_cache_dtype", ["int8_per_token_head", "fp8_per_token_head"])
def test_write_zero_rows_use_floor_scale(device, kv_cache_dtype):
    layout = LayerLayout.simple(kv_cache_dtype, 1, 16)
    cache = allocate_kv_cache(layout, 1, 16, device)
    zeros = torch.zeros(2, 1, 16, dtype=torch.bfloat16, device=device)
    write_kv_cache(cache, zeros, zeros, torch.tensor([3, 4], device=device))
    torch.testing.assert_close(cache.key_scales()[0, 3:5, 0],
                               torch.full((2,), 1e-6, device=device), rtol=0, atol=0)
    assert not cache.key_data()[0, 3:5].view(torch.uint8).any()


@pytest.mark.parametrize("kv_cache_dtype", ["int8_per_token_head", "fp8_per_token_head"])
def test_write_per_token_head_extreme_rows_match_reference(device, kv_cache_dtype):
    """Per-token-head codes need no clamp: rows spanning bf16's range (3e38 next to 1e-30),
    rows under the 1e-6 scale floor, rows of one sign, rows whose amax is negative and rows of
    exact INT8 ties (k + 0.5 at scale 1.0, and -0.0) give the reference's bytes exactly on
    every kernel (the GPU default is the Gluon kernel)."""
    gen = torch.Generator(device=device).manual_seed(3)
    layout = LayerLayout.simple(kv_cache_dtype, 2, 64)
    rows = torch.randn(8, 2, 64, generator=gen, device=device)
    rows[0, 0] *= 1e37
    rows[0, 0, 5] = 3.3e38
    rows[0, 1] *= 1e-30
    rows[1, 0] = rows[1, 0].abs() * 1e-5  # amax under 127e-6 / 448e-6: the floor scale
    rows[1, 1] = -rows[1, 1].abs()
    rows[2, 0, :] = torch.linspace(-127, 127, 64, device=device)
    rows[2, 1, :] = -torch.linspace(0, 1, 64, device=device) * 1e4
    # exact ties: amax 127 makes the INT8 scale 1.0, so k + 0.5 must round away from zero
    ties = torch.arange(32, device=device) * 4 + 0.5
    rows[3, 0, :] = torch.cat([ties, -ties]).clamp(max=126.5)
    rows[3, 0, 0], rows[3, 0, 33] = 127.0, -0.0
    rows[3, 1, :] = -rows[3, 0, :]
    key = rows.to(torch.bfloat16)
    value = key.flip(0).contiguous()
    slots = torch.arange(8, device=device) * 3 + 1
    got, want = _poisoned_pair(layout, 2, 16, device, gen)
    write_kv_cache(got, key, value, slots)
    reference_write_kv_cache(want, key, value, slots)
    assert torch.equal(got.data.view(torch.uint8), want.data.view(torch.uint8))


def test_write_fp8_saturates_out_of_range_values(device):
    layout = LayerLayout.simple("fp8", 1, 16)
    cache = allocate_kv_cache(layout, 1, 16, device, k_scale=1.0, v_scale=1.0)
    k = torch.full((1, 1, 16), 1000.0, dtype=torch.bfloat16, device=device)
    k[..., 1] = -1e6
    write_kv_cache(cache, k, k, torch.tensor([0], device=device))
    k_hat, _ = dequantize_kv_cache(cache)
    assert k_hat[0, 0, 0, 0].item() == 448.0 and k_hat[0, 0, 0, 1].item() == -448.0


def test_write_rejects_rows_per_program_not_a_power_of_two(device):
    layout = LayerLayout.simple("int8_per_token_head", 2, 64)
    gen = torch.Generator(device=device).manual_seed(0)
    cache = allocate_kv_cache(layout, 2, 16, device)
    key, value = random_kv(4, 2, 64, gen, device, torch.bfloat16)
    with pytest.raises(ValueError, match="power of two"):
        write_kv_cache(cache, key, value, torch.arange(4, device=device), rows_per_program=3)


def test_write_rejects_mismatched_shapes(device):
    layout = LayerLayout.simple("int8_per_token_head", 2, 64)
    cache = allocate_kv_cache(layout, 1, 16, device)
    k = torch.randn(3, 2, 32, device=device)
    with pytest.raises(ValueError, match="heads"):
        write_kv_cache(cache, k, k, torch.arange(3, device=device))
    k = torch.randn(3, 2, 64, device=device)
    with pytest.raises(ValueError, match="slot_mapping"):
        write_kv_cache(cache, k, k, torch.arange(4, device=device))


def test_hadamard_rotate_is_the_orthonormal_rotation(device):
    """The reference's INT4 rotation (`cache.hadamard_rotate`, butterflies like the write
    kernel's) is the product with the orthonormal Hadamard matrix, and its own inverse."""
    from kvplan.runtime.cache import hadamard_rotate

    gen = torch.Generator(device=device).manual_seed(8)
    for d in (32, 64, 128, 256):
        x = torch.randn(5, 3, d, generator=gen, device=device)
        y = hadamard_rotate(x)
        assert y.shape == x.shape and y.dtype == torch.float32
        torch.testing.assert_close(y, x @ hadamard(d, device), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(hadamard_rotate(y), x, rtol=1e-5, atol=1e-5)


def test_hadamard_over_lanes_is_the_reference_bit_for_bit():
    """The Gluon INT4 write kernel's rotation order (`write_gluon._hadamard_lanes`: a row over T
    lanes, the index's top log2(T) butterflies as lane exchanges computed as ``x * (+-1) +
    partner``, the rest inside each lane's D / T values), replayed here with torch's IEEE fp32
    operations, gives the reference's (`cache.hadamard_rotate`) bits exactly, signed zeros and
    rows of mixed magnitudes included: the GPU tests check the kernel's bytes, this checks the
    order it relies on where no GPU is."""
    from kvplan.runtime.cache import hadamard_rotate, hadamard_scale

    def over_lanes(x: torch.Tensor, lanes: int, lanes_first: bool = True) -> torch.Tensor:
        rows, d = x.shape
        lane = torch.arange(lanes)

        def exchanges(y):  # lane bits from the top; the product is exact: one rounding
            for bit in reversed(range(lanes.bit_length() - 1)):
                sign = torch.where((lane >> bit) & 1 == 1, -1.0, 1.0).view(1, lanes, 1)
                y = y[:, lane ^ (1 << bit)] + y * sign
            return y

        def in_lane(y):  # `_common.hadamard_rows` over each lane's d / lanes values
            z = y.reshape(rows * lanes, d // lanes)
            for _ in range((d // lanes).bit_length() - 1):
                a, b = z.view(-1, 2, d // lanes // 2).unbind(1)
                z = torch.stack((a + b, a - b), dim=-1).reshape(-1, d // lanes)
            return z.view(rows, lanes, d // lanes)

        y = x.view(rows, lanes, d // lanes)
        y = in_lane(exchanges(y)) if lanes_first else exchanges(in_lane(y))
        return y.reshape(rows, d) * hadamard_scale(d)

    gen = torch.Generator().manual_seed(26)
    for d in (64, 128, 256):
        x = torch.randn(64, d, generator=gen) * torch.logspace(-30, 30, 64).view(64, 1)
        x = x.to(torch.bfloat16).float()
        x[0] = 0.0
        x[1, ::3] = -0.0
        x[2] = torch.where(torch.arange(d) % 2 == 0, 1e-38, -1e36)  # sums stay finite
        want = hadamard_rotate(x).view(torch.int32)
        for lanes in (1, 2, 4, 8):
            if d // lanes >= 8:
                assert torch.equal(over_lanes(x, lanes).view(torch.int32), want), (d, lanes)
    # the order matters: with the lane butterflies last, some bits differ
    x = torch.randn(256, 128, generator=gen).to(torch.bfloat16).float()
    late = over_lanes(x, 4, lanes_first=False).view(torch.int32)
    assert not torch.equal(late, hadamard_rotate(x).view(torch.int32))


def test_write_refuses_tensors_on_another_device(device):
    """The write launches with raw addresses, so a key, value or slot mapping on another device
    than the cache is a clear error, not a kernel reading host memory."""
    cache = allocate_kv_cache(LayerLayout.simple("int4_per_token_head", 2, 64), 2, 16, "meta")
    gen = torch.Generator(device=device).manual_seed(4)
    key, value = random_kv(4, 2, 64, gen, device)
    with pytest.raises(ValueError, match="one device"):
        write_kv_cache(cache, key, value, torch.arange(4, device=device))


@pytest.mark.parametrize("kv_cache_dtype", ["fp8", "int8_per_token_head", "int4_per_token_head"])
def test_write_plans_are_reused_and_follow_the_cache(device, kv_cache_dtype):
    """A cache plans its write launch once per call signature (later writes of any token count
    reuse it and write the reference's bytes); a new scale or new storage on the cache plans
    afresh, so the launch never writes through stale addresses or scales."""
    gen = torch.Generator(device=device).manual_seed(12)
    layout = LayerLayout.simple(kv_cache_dtype, 2, 64)
    got, want = _poisoned_pair(layout, 6, 16, device, gen, k_scale=0.05, v_scale=0.02)
    for n, first in ((29, 0), (7, 40), (1, 60)):
        key, value = random_kv(n, 2, 64, gen, device, torch.bfloat16)
        slots = torch.arange(first, first + n, device=device)
        write_kv_cache(got, key, value, slots)
        reference_write_kv_cache(want, key, value, slots)
    assert torch.equal(got.data.view(torch.uint8), want.data.view(torch.uint8))
    assert len(got.__dict__["_write_plans"][3]) == 1
    key, value = random_kv(5, 2, 64, gen, device, torch.bfloat16)
    slots = torch.arange(70, 75, device=device)
    for cache in (got, want):
        cache.k_scale, cache.v_scale = 0.1, 0.04
    write_kv_cache(got, key, value, slots)
    reference_write_kv_cache(want, key, value, slots)
    assert torch.equal(got.data.view(torch.uint8), want.data.view(torch.uint8))
    for cache in (got, want):
        cache.data = cache.data.clone()
    write_kv_cache(got, key, value, slots - 50)
    reference_write_kv_cache(want, key, value, slots - 50)
    assert torch.equal(got.data.view(torch.uint8), want.data.view(torch.uint8))


def test_int4_writes_take_the_gluon_kernel_at_every_size(monkeypatch):
    """Where the Gluon INT4 write kernel can run (a GPU, stood in for here), a default INT4
    write takes it at every head (64-256) and token count, one warp of `INT4_LANES` lanes per
    row; ``kernel="triton"`` and a Triton launch (``rows_per_program``) keep the Triton kernel,
    which writes the reference's bytes."""
    from kvplan.runtime import write, write_gluon
    planned = []

    def plan_int4(args, num_kv_heads, head, *a, **kw):
        planned.append((head, kw["num_warps"]))
        return lambda k, v, slots: planned.append(k.shape[0])

    monkeypatch.setattr(write, "_use_gluon",
                        lambda kernel, args, key, d, given: kernel != "triton" and not given)
    monkeypatch.setattr(write_gluon, "plan_int4", plan_int4)
    gen = torch.Generator().manual_seed(3)
    for head in (64, 128, 256):
        layout = LayerLayout.simple("int4_per_token_head", 2, head)
        got, want = _poisoned_pair(layout, 8, 16, "cpu", gen)
        planned.clear()
        for n in (1, 4, 100):
            key, value = random_kv(n, 2, head, gen, "cpu")
            write_kv_cache(got, key, value, torch.arange(n))
        assert planned == [(head, 1), 1, 4, 100], head
        key, value = random_kv(4, 2, head, gen, "cpu")
        for launch in ({"kernel": "triton"}, {"rows_per_program": 4}):
            write_kv_cache(got, key, value, torch.arange(4), **launch)
            reference_write_kv_cache(want, key, value, torch.arange(4))
            assert torch.equal(got.data, want.data), (head, launch)
        assert planned == [(head, 1), 1, 4, 100], head
