"""Paged attention kernel (decode + chunked prefill) vs the torch reference, every layout."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from rt_helpers import ALL_KV_CACHE_DTYPES, build_paged_batch, rel_err  # noqa: E402

from kvplan.runtime.attention import AttentionConfig, paged_attention  # noqa: E402
from kvplan.runtime.cache import allocate_kv_cache  # noqa: E402
from kvplan.runtime.layout import LayerLayout  # noqa: E402
from kvplan.runtime.reference import reference_paged_attention  # noqa: E402
from kvplan.runtime.tolerances import TOLERANCES  # noqa: E402

# (Hq, Hkv, head_size, block_size, seq_lens): GQA, MHA, MQA; odd lengths; block sizes 16/32/64
DECODE_SHAPES = [
    (8, 2, 64, 16, [37, 100, 5]),
    (4, 4, 128, 32, [70, 33]),
    (8, 1, 64, 64, [129, 64, 1]),
]


def _check(out, ref, mode, what=""):
    assert not torch.isnan(out).any(), f"unwritten or NaN outputs {what}"
    err = rel_err(out, ref)
    assert err <= TOLERANCES[mode].kernel_rel_err, f"rel err {err:.3e} {what}"


def _decode(batch, hq, gen, device, dtype=torch.bfloat16, config=None, poison=float("nan")):
    q = torch.randn(batch.seq_lens.shape[0], hq, batch.cache.layout.head_size, generator=gen,
                    device=device, dtype=torch.float32).to(dtype)
    out = torch.full_like(q, poison)
    paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, out=out, config=config)
    ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens)
    return out, ref


@pytest.mark.parametrize("kv_cache_dtype", ALL_KV_CACHE_DTYPES)
@pytest.mark.parametrize("hq,hkv,head_size,block_size,seq_lens", DECODE_SHAPES)
def test_attention_decode_matches_reference(device, kv_cache_dtype, hq, hkv, head_size,
                                            block_size, seq_lens):
    gen = torch.Generator(device=device).manual_seed(hq + head_size + block_size)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head_size)
    batch = build_paged_batch(layout, seq_lens, block_size, device, gen, shared_prefix_blocks=1,
                              k_scale=0.08, v_scale=0.01)
    out, ref = _decode(batch, hq, gen, device)
    _check(out, ref, layout.quant_mode, kv_cache_dtype)


@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "int8_per_token_head", "fp8",
                                            "int4_per_token_head"])
@pytest.mark.parametrize("num_splits", [1, 3, 8])
def test_attention_decode_split_k_matches_reference(device, kv_cache_dtype, num_splits):
    """Flash-decoding splits (incl. more splits than tiles: empty splits must merge cleanly)."""
    gen = torch.Generator(device=device).manual_seed(num_splits)
    layout = LayerLayout.simple(kv_cache_dtype, 2, 64)
    batch = build_paged_batch(layout, [300, 17, 160], 16, device, gen, k_scale=0.08, v_scale=0.01)
    out, ref = _decode(batch, 8, gen, device,
                       config=AttentionConfig(num_splits=num_splits, block_n=32), poison=1e30)
    _check(out, ref, layout.quant_mode)


@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "int8_per_token_head", "fp8",
                                            "int4_per_token_head"])
@pytest.mark.parametrize("merge", ["fused", "kernel"])
def test_split_merge_in_the_kernel_or_after_it_matches_reference(device, kv_cache_dtype, merge):
    """The split-K merge run by the last split of each (sequence, kv head) inside the decode
    kernel, or by the merge kernel after it: both match the reference, with empty splits (a
    17-token sequence over 5 splits), and repeated calls on one output keep matching (the fused
    merge's counters are left at zero for the next call)."""
    gen = torch.Generator(device=device).manual_seed(23)
    layout = LayerLayout.simple(kv_cache_dtype, 2, 64)
    batch = build_paged_batch(layout, [300, 17, 160], 16, device, gen, k_scale=0.08, v_scale=0.01)
    q = torch.randn(3, 8, 64, generator=gen, device=device).to(torch.bfloat16)
    ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens)
    cfg = AttentionConfig(num_splits=5, block_n=32, merge=merge, kernel="triton")
    out = torch.empty_like(q)
    for call in range(3):
        out.fill_(float("nan"))
        paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, out=out, config=cfg)
        _check(out, ref, layout.quant_mode, f"merge={merge}, call {call}")


def test_split_merge_runs_as_a_kernel_unless_fused_is_asked_for():
    """The merge kernel is the default (the fused merge costs GPU time: round 19); with
    ``merge="fused"`` every split decode call merges in its kernel, over the splits rounded up
    to a power of two; prefill and unsplit calls have no merge; an unknown value is refused."""
    from kvplan.runtime import attention
    auto, fused, kernel = (AttentionConfig(), AttentionConfig(merge="fused"),
                           AttentionConfig(merge="kernel"))
    assert attention._fused_merge(auto, 2) == 0
    assert attention._fused_merge(kernel, 2) == 0
    assert attention._fused_merge(fused, 2) == 2
    assert attention._fused_merge(fused, 7) == 8
    assert attention._fused_merge(fused, 128) == 128
    assert attention._fused_merge(fused, 1) == 0
    assert attention._fused_merge(fused, 4, is_decode=False) == 0
    with pytest.raises(ValueError, match="unknown merge"):
        attention._fused_merge(AttentionConfig(merge="atomic"), 1)


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype,head,hq,hkv", [
    ("int8_per_token_head", 128, 32, 8), ("fp8_per_token_head", 64, 64, 8),
    ("int4_per_token_head", 128, 32, 8), ("fp8", 128, 32, 8), ("fp8", 64, 16, 8),
    ("bfloat16", 64, 64, 8)])
def test_gluon_fused_merge_matches_the_merge_kernel(cuda_device, kv_cache_dtype, head, hq, hkv):
    """The Gluon kernels (swapped operands, FP8 per-tensor with one and two kv heads per
    program, bf16 at head 64) merging their splits themselves: eager, bound (``max_seq_len``)
    and replayed from a CUDA graph, every call matches the reference and the merge kernel's
    result (to fp32 rounding: the two merges sum in different orders), and the per-stream
    counters are back at zero after each call."""
    pytest.importorskip("triton.experimental.gluon")
    from kvplan.runtime import attention
    gen = torch.Generator(device="cuda").manual_seed(31)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head)
    lens = [4096, 333, 1, 2000]
    batch = build_paged_batch(layout, lens, 16, "cuda", gen)
    q = torch.randn(4, hq, head, generator=gen, device="cuda").to(torch.bfloat16)
    ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens)
    outs = {}
    for merge in ("kernel", "fused"):
        cfg = AttentionConfig(kernel="gluon", num_splits=6, merge=merge)
        out = torch.full_like(q, float("nan"))

        def run(cfg=cfg, out=out, max_seq_len=None):
            paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, out=out,
                            config=cfg, max_seq_len=max_seq_len)
        for max_seq_len in (None, 4096, 4096, 4096):  # eager, then the bound path
            out.fill_(float("nan"))
            run(max_seq_len=max_seq_len)
            torch.cuda.synchronize()
            _check(out, ref, layout.quant_mode, f"merge={merge} max_seq_len={max_seq_len}")
            assert all(not int(t.abs().sum()) for t in attention._COUNTERS.values())
        eager = out.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run(max_seq_len=4096)
        for _ in range(2):
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(out, eager), f"graph replay differs from the eager call ({merge})"
        outs[merge] = eager
    torch.testing.assert_close(outs["fused"], outs["kernel"], rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("kv_cache_dtype", ["int8_per_token_head", "fp8_per_token_head", "fp8_e5m2",
                                            "bfloat16"])
@pytest.mark.parametrize("cfg", [AttentionConfig(imma=1, paged3d=True, block_n=32, num_splits=2),
                                 AttentionConfig(imma=0, paged3d=False, block_n=16, num_splits=3),
                                 AttentionConfig(imma=1, paged3d=False, block_n=64, num_splits=1),
                                 AttentionConfig(v_reg=True, block_n=64, num_warps=2, num_stages=5,
                                                 num_splits=2)])
def test_attention_decode_launch_variants_match_reference(device, kv_cache_dtype, cfg):
    """Int8 tensor-core q.K, page-structured gathers, and splits whose ranges start and end
    inside a tile (edge tiles masked, whole tiles unmasked) all compute the same function."""
    gen = torch.Generator(device=device).manual_seed(7)
    layout = LayerLayout.simple(kv_cache_dtype, 2, 64)
    batch = build_paged_batch(layout, [211, 32, 9, 96], 16, device, gen, k_scale=0.08,
                              v_scale=0.01)
    out, ref = _decode(batch, 8, gen, device, config=cfg, poison=1e30)
    _check(out, ref, layout.quant_mode, str(cfg))


@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "int8_per_token_head", "fp8_per_token_head"])
@pytest.mark.parametrize("hq,hkv", [(8, 2), (2, 2), (1, 1)])
def test_attention_decode_broadcast_path_matches_reference(device, kv_cache_dtype, hq, hkv):
    """Small GQA groups can skip tl.dot (broadcast multiply + sum)."""
    gen = torch.Generator(device=device).manual_seed(hq * 10 + hkv)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, 64)
    batch = build_paged_batch(layout, [77, 20], 16, device, gen)
    out, ref = _decode(batch, hq, gen, device, config=AttentionConfig(use_dot=False, num_splits=2))
    _check(out, ref, layout.quant_mode)


@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "int8_per_token_head", "fp8", "int4_per_token_head"])
@pytest.mark.parametrize("window", [1, 20, 64])
def test_attention_decode_sliding_window_reads_only_window(device, kv_cache_dtype, window):
    """Pages before the window point at a NaN-poisoned block: reading one would show."""
    gen = torch.Generator(device=device).manual_seed(window)
    layout = LayerLayout.simple(kv_cache_dtype, 2, 64, sliding_window=window)
    batch = build_paged_batch(layout, [130, 45, 64], 16, device, gen, poison_outside_window=True,
                              k_scale=0.08, v_scale=0.01)
    out, ref = _decode(batch, 4, gen, device)
    _check(out, ref, layout.quant_mode)


@pytest.mark.parametrize("kv_cache_dtype", ALL_KV_CACHE_DTYPES)
@pytest.mark.parametrize("hq,hkv,head_size,block_size,seq_lens,q_lens,window", [
    (8, 2, 64, 16, [37, 100, 5], [5, 17, 5], None),     # chunked prefill; last one full prefill
    (4, 1, 128, 32, [70, 129], [1, 40], 20),              # mixed decode + prefill, sliding window
])
def test_attention_prefill_matches_reference(device, kv_cache_dtype, hq, hkv, head_size,
                                             block_size, seq_lens, q_lens, window):
    gen = torch.Generator(device=device).manual_seed(sum(seq_lens))
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head_size, sliding_window=window)
    batch = build_paged_batch(layout, seq_lens, block_size, device, gen, shared_prefix_blocks=1,
                              k_scale=0.08, v_scale=0.01)
    qsl = torch.tensor([0, *list(torch.tensor(q_lens).cumsum(0).tolist())], dtype=torch.int32,
                       device=device)
    q = torch.randn(int(qsl[-1]), hq, head_size, generator=gen, device=device).to(torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, qsl, out=out)
    ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, qsl)
    _check(out, ref, layout.quant_mode, kv_cache_dtype)


def test_attention_prefill_block_m_and_empty_chunks(device):
    """Query blocks past a short chunk do nothing; a sequence with no new tokens is skipped."""
    gen = torch.Generator(device=device).manual_seed(3)
    layout = LayerLayout.simple("int8_per_token_head", 2, 64)
    batch = build_paged_batch(layout, [50, 33, 90], 16, device, gen)
    q_lens = [50, 0, 3]
    qsl = torch.tensor([0, 50, 50, 53], dtype=torch.int32, device=device)
    q = torch.randn(53, 4, 64, generator=gen, device=device).to(torch.bfloat16)
    ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, qsl)
    for block_m in (16, 32):
        out = torch.full_like(q, float("nan"))
        paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, qsl, out=out,
                        config=AttentionConfig(block_m=block_m, block_n=16))
        _check(out, ref, "int8_per_token_head", f"block_m={block_m} q_lens={q_lens}")


@pytest.mark.parametrize("kv_cache_dtype,model_dtype", [
    ("auto", torch.float16), ("int8_per_token_head", torch.float16),
    ("auto", torch.float32), ("fp8_per_token_head", torch.float32),
])
def test_attention_other_query_dtypes(device, kv_cache_dtype, model_dtype):
    gen = torch.Generator(device=device).manual_seed(5)
    name = {torch.float16: "float16", torch.float32: "float32"}[model_dtype]
    layout = LayerLayout.simple(kv_cache_dtype, 2, 64, model_dtype=name)
    batch = build_paged_batch(layout, [40, 23], 16, device, gen, model_dtype=model_dtype)
    out, ref = _decode(batch, 4, gen, device, dtype=model_dtype)
    assert out.dtype == model_dtype
    _check(out, ref, layout.quant_mode)


@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "int8_per_token_head", "fp8_per_token_head"])
def test_attention_head_size_256(device, kv_cache_dtype):
    gen = torch.Generator(device=device).manual_seed(256)
    layout = LayerLayout.simple(kv_cache_dtype, 1, 256)
    batch = build_paged_batch(layout, [33, 18], 16, device, gen)
    out, ref = _decode(batch, 2, gen, device)
    _check(out, ref, layout.quant_mode)


@pytest.mark.parametrize("kv_cache_dtype", ["fp8", "int8_per_token_head", "fp8_per_token_head",
                                            "int4_per_token_head"])
def test_attention_quantization_error_within_tolerance(device, kv_cache_dtype):
    """What quantization costs: quantized-cache attention vs fp32 attention on the exact K/V."""
    gen = torch.Generator(device=device).manual_seed(17)
    seq_lens, hq, hkv, d = [200, 150], 8, 2, 64
    exact = LayerLayout.simple("float32", hkv, d)
    base = build_paged_batch(exact, seq_lens, 16, device, gen)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, d)
    k_amax, v_amax = base.key.abs().max().item(), base.value.abs().max().item()
    cache = allocate_kv_cache(layout, base.cache.num_blocks, 16, device, k_scale=k_amax / 448,
                              v_scale=v_amax / 448)
    from kvplan.runtime.write import write_kv_cache
    write_kv_cache(cache, base.key.to(torch.bfloat16), base.value.to(torch.bfloat16),
                   base.slot_mapping)
    q = torch.randn(2, hq, d, generator=gen, device=device).to(torch.bfloat16)
    ref = reference_paged_attention(q, base.cache, base.block_tables, base.seq_lens)
    out = paged_attention(q, cache, base.block_tables, base.seq_lens)
    err = rel_err(out, ref)
    assert err <= TOLERANCES[layout.quant_mode].quant_rel_err, f"{kv_cache_dtype}: {err:.3e}"


def test_attention_rejects_bad_inputs(device):
    layout = LayerLayout.simple("bfloat16", 2, 64)
    cache = allocate_kv_cache(layout, 2, 16, device)
    bt = torch.zeros(1, 2, dtype=torch.int32, device=device)
    sl = torch.tensor([5], dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="multiple"):
        paged_attention(torch.randn(1, 3, 64, device=device), cache, bt, sl)
    with pytest.raises(ValueError, match="head_size"):
        paged_attention(torch.randn(1, 4, 32, device=device), cache, bt, sl)
    chunked = LayerLayout.from_plan_layer({"kind": "chunked_attention", "kv_cache_dtype": "auto",
                                           "dtype": "bfloat16", "num_kv_heads": 2, "head_size": 64})
    with pytest.raises(ValueError, match="chunked_attention"):
        paged_attention(torch.randn(1, 4, 64, device=device, dtype=torch.bfloat16),
                        allocate_kv_cache(chunked, 2, 16, device), bt, sl)


# ----------------------------------------------------------------------------------- GPU only
@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ALL_KV_CACHE_DTYPES)
@pytest.mark.parametrize("hq,hkv,head_size,block_size", [
    (32, 8, 128, 16), (64, 8, 64, 32), (16, 4, 256, 64), (32, 1, 128, 16), (8, 8, 64, 16)])
def test_attention_gpu_decode_and_prefill_large(cuda_device, kv_cache_dtype, hq, hkv, head_size,
                                                block_size):
    gen = torch.Generator(device="cuda").manual_seed(hq * head_size)
    for window in (None, 200):
        layout = LayerLayout.simple(kv_cache_dtype, hkv, head_size, sliding_window=window)
        seq_lens = [1, 257, 1000, 2049, 31, 700]
        batch = build_paged_batch(layout, seq_lens, block_size, "cuda", gen, shared_prefix_blocks=3,
                                  poison_outside_window=True, k_scale=0.08, v_scale=0.01)
        out, ref = _decode(batch, hq, gen, "cuda")
        _check(out, ref, layout.quant_mode, f"decode window={window}")
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head_size)
    batch = build_paged_batch(layout, seq_lens, block_size, "cuda", gen, shared_prefix_blocks=3,
                              k_scale=0.08, v_scale=0.01)
    q_lens = [1, 100, 1000, 7, 31, 64]
    qsl = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32,
                       device="cuda")
    q = torch.randn(int(qsl[-1]), hq, head_size, generator=gen, device="cuda").to(torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, qsl, out=out)
    ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, qsl)
    _check(out, ref, layout.quant_mode, "prefill")


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "fp8", "fp8_e5m2", "int8_per_token_head",
                                            "fp8_per_token_head"])
def test_attention_gpu_configs_agree(cuda_device, kv_cache_dtype):
    """Every launch config the benchmarks may pick gives the same answer."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    layout = LayerLayout.simple(kv_cache_dtype, 8, 128)
    batch = build_paged_batch(layout, [4096, 1000, 3, 2500], 16, "cuda", gen)
    for cfg in (AttentionConfig(), AttentionConfig(block_n=128, num_warps=8, num_stages=3),
                AttentionConfig(block_n=32, num_splits=16), AttentionConfig(use_dot=False),
                AttentionConfig(block_n=64, num_warps=4, num_stages=4, num_splits=1),
                AttentionConfig(imma=1, paged3d=True, num_splits=4, max_registers=168),
                AttentionConfig(imma=0, paged3d=False, block_n=128, num_warps=4),
                AttentionConfig(v_reg=True, num_stages=5), AttentionConfig(v_reg=False),
                AttentionConfig(v_reg=True, block_n=128, num_warps=2, num_stages=2)):
        out, ref = _decode(batch, 32, gen, "cuda", config=cfg)
        _check(out, ref, layout.quant_mode, str(cfg))


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["int8_per_token_head", "fp8_per_token_head"])
@pytest.mark.parametrize("head,hq,hkv", [(128, 32, 8), (64, 64, 8), (256, 16, 4), (128, 8, 8), (64, 28, 4)])
@pytest.mark.parametrize("block_n,num_splits,pipe", [(None, None, None), (16, 1, 0), (32, 3, 0),
                                                     (16, 3, 2), (32, 2, 4)])
def test_gluon_decode_matches_reference(cuda_device, kv_cache_dtype, head, hq, hkv, block_n,
                                        num_splits, pipe):
    """The Gluon kernel (one-warp programs, tiles streamed through shared memory by asynchronous
    copies, or loaded into registers with pipe=0) computes the same function as the torch
    reference: odd lengths, a 1-token sequence, GQA groups of 1-8 (7 padded to 16 rows), splits
    that start and end inside tiles."""
    pytest.importorskip("triton.experimental.gluon")
    if head == 256 and (block_n == 64 or (pipe and block_n != 16)):
        pytest.skip("head 256 runs 16-key tiles (registers)")
    gen = torch.Generator(device="cuda").manual_seed(11)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head)
    batch = build_paged_batch(layout, [1000, 1, 333, 4096, 47], 16, "cuda", gen)
    cfg = AttentionConfig(kernel="gluon", block_n=block_n, num_splits=num_splits, pipe=pipe,
                          swap=False)
    out, ref = _decode(batch, hq, gen, "cuda", config=cfg, poison=1e30)
    _check(out, ref, layout.quant_mode, f"gluon {cfg}")


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["int8_per_token_head", "fp8_per_token_head",
                                            "int4_per_token_head"])
@pytest.mark.parametrize("head,hq,hkv", [(128, 32, 8), (64, 64, 8), (256, 16, 4), (128, 8, 8),
                                         (64, 28, 4), (128, 12, 2)])
@pytest.mark.parametrize("block_n,block_size,num_splits", [
    (None, 16, None), (16, 32, 3), (32, 32, 2), (32, 64, 1), (16, 16, 5), (32, 16, 3)])
def test_gluon_swap_matches_reference(cuda_device, kv_cache_dtype, head, hq, hkv, block_n,
                                      block_size, num_splits):
    """The swapped-operand Gluon kernel (keys as the MMA rows, the GQA group of 1-8 heads as the
    columns, P^T transposed across the warp) computes the reference function: odd lengths, a
    1-token sequence, splits, 16- and 32-key tiles in 16/32/64-slot pages (a 32-key tile spans
    two 16-slot pages). Queries are also scaled by 25: a sharp softmax whose running max keeps
    moving across tiles. INT4 runs the same kernel over packed nibbles with zero points, the
    query rotated into the cache's Hadamard basis and the output rotated back in the kernel."""
    pytest.importorskip("triton.experimental.gluon")
    if head == 256 and block_n == 32 and kv_cache_dtype != "int4_per_token_head":
        pytest.skip("head 256 runs 16-key tiles (registers)")
    gen = torch.Generator(device="cuda").manual_seed(13)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head)
    batch = build_paged_batch(layout, [1000, 1, 333, 4096, 47], block_size, "cuda", gen)
    cfg = AttentionConfig(kernel="gluon", block_n=block_n, num_splits=num_splits, swap=True)
    for q_mul in (1.0, 25.0):
        q = (torch.randn(5, hq, head, generator=gen, device="cuda") * q_mul).to(torch.bfloat16)
        out = torch.full_like(q, 1e30)
        paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, out=out, config=cfg)
        ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens)
        _check(out, ref, layout.quant_mode, f"gluon swap {cfg} q*{q_mul}")


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype,kernel", [("int8_per_token_head", "gluon"),
                                                   ("fp8_per_token_head", "gluon"),
                                                   ("int4_per_token_head", "gluon"),
                                                   ("bfloat16", "triton")])
def test_split_merge_as_dependent_launch_in_a_cuda_graph(cuda_device, kv_cache_dtype, kernel):
    """The split-K merge launched as a programmatic dependent of the attention kernel (the
    default on Hopper GPUs) writes the same bits as a plain launch, eagerly and replayed from a
    CUDA graph (how serving stacks run decode), and matches the reference."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("programmatic dependent launch needs compute capability 9.0")
    gen = torch.Generator(device="cuda").manual_seed(5)
    layout = LayerLayout.simple(kv_cache_dtype, 8, 128)
    batch = build_paged_batch(layout, [4096, 333, 1, 2000], 16, "cuda", gen)
    q = torch.randn(4, 32, 128, generator=gen, device="cuda").to(torch.bfloat16)
    ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens)
    outs = {}
    for pdl in (False, True):
        cfg = AttentionConfig(kernel=kernel, num_splits=5, pdl=pdl)
        out = torch.full_like(q, float("nan"))

        def run(cfg=cfg, out=out):
            paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, out=out,
                            config=cfg, max_seq_len=4096)
        run()
        torch.cuda.synchronize()
        eager = out.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager), f"graph replay differs from the eager call (pdl={pdl})"
        _check(out, ref, layout.quant_mode, f"{kernel} pdl={pdl}")
        outs[pdl] = out
    assert torch.equal(outs[False], outs[True])


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["int8_per_token_head", "fp8_per_token_head",
                                            "int4_per_token_head"])
@pytest.mark.parametrize("block_n,block_size", [(16, 16), (32, 16), (16, 64)])
def test_gluon_flat_window_ignores_the_key_before_it(cuda_device, kv_cache_dtype, block_n,
                                                     block_size):
    """Tiles are copied in 16-byte chunks, and a slot is 264 bytes: when the window starts at an
    odd key, the chunk holding its first bytes also holds the last 8 bytes of the key before
    (V codes and the v scale). That key may hold anything: here NaN codes and NaN scales on both
    sides, and the pages wholly before the window are poisoned too."""
    pytest.importorskip("triton.experimental.gluon")
    gen = torch.Generator(device="cuda").manual_seed(17)
    window = 1100
    seq_lens = [2049, 2050, 1500]  # windows start at keys 949 (odd), 950 and 400
    layout = LayerLayout.simple(kv_cache_dtype, 4, 128, sliding_window=window)
    batch = build_paged_batch(layout, seq_lens, block_size, "cuda", gen,
                              poison_outside_window=True)
    cache = batch.cache
    for s, n in enumerate(seq_lens):
        before = n - window - 1
        blk, off = int(batch.block_tables[s, before // block_size]), before % block_size
        cache.key_data()[blk, off].view(torch.uint8).fill_(0x7F)  # e4m3fn NaN
        cache.value_data()[blk, off].view(torch.uint8).fill_(0x7F)
        cache.key_scales()[blk, off] = float("nan")
        cache.value_scales()[blk, off] = float("nan")
    cfg = AttentionConfig(kernel="gluon", block_n=block_n, swap=True)
    out, ref = _decode(batch, 16, gen, "cuda", config=cfg, poison=1e30)
    assert torch.isfinite(out).all()
    _check(out, ref, layout.quant_mode, f"flat window {cfg}")


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("head,hq,hkv", [(64, 64, 8), (128, 32, 8), (256, 16, 4), (128, 8, 8),
                                         (64, 28, 4), (128, 12, 2)])
@pytest.mark.parametrize("block_n,block_size,num_splits,pipe", [
    (None, 16, None, None), (16, 32, 3, 2), (32, 16, 2, 3), (64, 32, 1, 2), (16, 16, 5, 4),
    (64, 64, 2, 2)])
def test_gluon_bf16_matches_reference(cuda_device, kv_cache_dtype, head, hq, hkv, block_n,
                                      block_size, num_splits, pipe):
    """The bf16/fp16 Gluon kernel (keys as the MMA rows, swizzled tiles read by ldmatrix, V
    transposed on the read) computes the reference function: GQA groups of 1-8 heads, odd lengths,
    a 1-token sequence, splits, 16-64-key tiles in pages of 16-64 slots (a tile may span two),
    2-4 stages, and queries scaled by 25 (a sharp softmax)."""
    pytest.importorskip("triton.experimental.gluon")
    gen = torch.Generator(device="cuda").manual_seed(head + hq)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head)
    dtype = torch.bfloat16 if kv_cache_dtype == "bfloat16" else torch.float16
    batch = build_paged_batch(layout, [1000, 1, 333, 4096, 47], block_size, "cuda", gen)
    cfg = AttentionConfig(kernel="gluon", block_n=block_n, num_splits=num_splits, pipe=pipe)
    for q_mul in (1.0, 25.0):
        q = (torch.randn(5, hq, head, generator=gen, device="cuda") * q_mul).to(dtype)
        out = torch.full_like(q, float("nan"))
        paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, out=out, config=cfg)
        ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens)
        _check(out, ref, layout.quant_mode, f"gluon bf16 {cfg} q*{q_mul}")


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["fp8", "fp8_e5m2"])
@pytest.mark.parametrize("head,hq,hkv", [(64, 64, 8), (128, 32, 8), (256, 16, 4), (128, 8, 8),
                                         (64, 28, 4), (128, 12, 2)])
@pytest.mark.parametrize("block_n,block_size,num_splits,pipe,hp", [
    (None, 16, None, None, None), (16, 32, 3, 2, 2), (32, 16, 2, 3, 1), (32, 32, 1, 2, 2),
    (16, 16, 5, 4, 2), (16, 64, 2, 2, None)])
def test_gluon_fp8t_matches_reference(cuda_device, kv_cache_dtype, head, hq, hkv, block_n,
                                      block_size, num_splits, pipe, hp):
    """The FP8 per-tensor Gluon kernel (1-byte K/V rows copied into bit-ordered buffers, keys as
    the MMA rows, static k/v scales) computes the reference function: e4m3 and e5m2, GQA groups
    of 1-8 heads, one or (where the group is 4 or less) two kv heads per program,
    odd lengths, a 1-token sequence, splits, tiles of 8-32 tokens in pages of 16-64 slots (a
    tile may span two), 2-4 stages, scales other than 1 and queries scaled by 25."""
    pytest.importorskip("triton.experimental.gluon")
    gen = torch.Generator(device="cuda").manual_seed(head + hq + 7)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head)
    batch = build_paged_batch(layout, [1000, 1, 333, 4096, 47], block_size, "cuda", gen,
                              k_scale=0.037, v_scale=0.021)
    if hp == 2 and (hq // hkv) * 2 > 8:
        hp = 1  # two kv heads need a group of 4 or less (8 query heads per program)
    cfg = AttentionConfig(kernel="gluon", block_n=block_n, num_splits=num_splits, pipe=pipe,
                          kv_heads_per_program=hp)
    for q_mul, dtype in ((1.0, torch.bfloat16), (25.0, torch.float16)):
        q = (torch.randn(5, hq, head, generator=gen, device="cuda") * q_mul).to(dtype)
        out = torch.full_like(q, float("nan"))
        paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, out=out, config=cfg)
        ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens)
        _check(out, ref, layout.quant_mode, f"gluon fp8 per-tensor {cfg} q*{q_mul}")


@pytest.mark.gpu
@pytest.mark.parametrize("block_n,block_size,hp", [(16, 16, 1), (32, 16, 2), (16, 64, 2),
                                                   (32, 16, 1)])
def test_gluon_fp8t_window_reads_only_the_window(cuda_device, block_n, block_size, hp):
    """A sliding-window layer over an FP8 per-tensor cache: pages wholly before the window are
    poisoned, and the key right before each window (an odd start inside a tile) holds NaN codes:
    the kernel must neither read nor weigh them."""
    pytest.importorskip("triton.experimental.gluon")
    gen = torch.Generator(device="cuda").manual_seed(29)
    window = 1100
    seq_lens = [2049, 2050, 1500]
    layout = LayerLayout.simple("fp8", 4, 128, sliding_window=window)
    batch = build_paged_batch(layout, seq_lens, block_size, "cuda", gen,
                              poison_outside_window=True, k_scale=0.05, v_scale=0.04)
    for s, n in enumerate(seq_lens):
        before = n - window - 1
        blk, off = int(batch.block_tables[s, before // block_size]), before % block_size
        batch.cache.key_data()[blk, off].view(torch.uint8).fill_(0x7F)  # e4m3fn NaN
        batch.cache.value_data()[blk, off].view(torch.uint8).fill_(0x7F)
    cfg = AttentionConfig(kernel="gluon", block_n=block_n, kv_heads_per_program=hp)
    out, ref = _decode(batch, 16, gen, "cuda", config=cfg, poison=1e30)
    assert torch.isfinite(out).all()
    _check(out, ref, layout.quant_mode, f"fp8 per-tensor window {cfg}")


@pytest.mark.gpu
@pytest.mark.parametrize("block_n,block_size", [(16, 16), (32, 16), (64, 64)])
def test_gluon_bf16_window_reads_only_the_window(cuda_device, block_n, block_size):
    """A sliding-window layer over a bf16 cache: pages wholly before the window are NaN, and so
    is the key right before each window (an odd start inside a tile): the kernel must neither
    read nor weigh them."""
    pytest.importorskip("triton.experimental.gluon")
    gen = torch.Generator(device="cuda").manual_seed(23)
    window = 1100
    seq_lens = [2049, 2050, 1500]
    layout = LayerLayout.simple("bfloat16", 4, 64, sliding_window=window)
    batch = build_paged_batch(layout, seq_lens, block_size, "cuda", gen,
                              poison_outside_window=True)
    for s, n in enumerate(seq_lens):
        before = n - window - 1
        blk, off = int(batch.block_tables[s, before // block_size]), before % block_size
        batch.cache.key_data()[blk, off] = float("nan")
        batch.cache.value_data()[blk, off] = float("nan")
    cfg = AttentionConfig(kernel="gluon", block_n=block_n)
    out, ref = _decode(batch, 16, gen, "cuda", config=cfg, poison=1e30)
    assert torch.isfinite(out).all()
    _check(out, ref, layout.quant_mode, f"bf16 window {cfg}")


def test_gluon_fp8t_buffers_are_conflict_free():
    """The FP8 per-tensor kernel's row buffers: every K read (8 bytes a lane) and V read (4
    bytes) of a tile takes the fewest shared-memory wavefronts per warp instruction (2 and 1; V
    at head 64: 2), every 16-byte copy writes a contiguous, aligned chunk in the fewest
    wavefronts (4), and every 8 consecutive lanes of a copy read 128 contiguous bytes of one
    cache row (whole lines from head 128 on: one L2 request each)."""
    pytest.importorskip("triton.experimental.gluon")
    from kvplan.runtime.attention_gluon import _fp8t_layouts, _wavefronts

    def xor(bases, idx):
        c = [0, 0]
        for i, b in enumerate(bases):
            if idx >> i & 1:
                c = [c[0] ^ b[0], c[1] ^ b[1]]
        return tuple(c)

    for head in (64, 128, 256):
        for block_n in (16, 32):
            lay = _fp8t_layouts(head, block_n)
            shared = lay["SKR"]
            n_off = len(shared.offset_bases)
            offset = {xor(shared.offset_bases, o): o for o in range(1 << n_off)}
            assert len(offset) == block_n * head  # a bijection onto the tile

            def accesses(dist, width, offset=offset):
                vec = width.bit_length() - 1  # registers of one contiguous access
                regs = dist.reg_bases
                for r in range(1 << (len(regs) - vec)):
                    base = xor(regs[vec:], r)
                    coords = [tuple(a ^ b for a, b in zip(base, xor(dist.lane_bases, ln),
                                                          strict=True)) for ln in range(32)]
                    yield coords, [offset[c] for c in coords]

            for dist, width, best in ((lay["LK"], 8, 2), (lay["LV_LOAD"], 4, 2 if head == 64 else 1),
                                      (lay["LCK"], 16, 4)):
                for coords, addrs in accesses(dist, width):
                    assert all(a % width == 0 for a in addrs)
                    for a, c in zip(addrs, coords, strict=True):  # the access is contiguous
                        for byte in range(width):
                            assert offset[(c[0], c[1] + byte)] == a + byte
                    assert _wavefronts(addrs, width) == best, (head, block_n, width)
            for coords, _ in accesses(lay["LCK"], 16):
                for q in range(4):  # 8 lanes: 128 contiguous bytes of the cache (row, d)
                    group = sorted(coords[8 * q:8 * q + 8])
                    span = min(128, head)
                    rows = {c[0] for c in group}
                    assert len(rows) == 128 // span
                    assert sorted(c[1] for c in group) == sorted(
                        list(range(group[0][1], group[0][1] + span, 16)) * len(rows))


def test_gluon_flat_lane_bits_are_conflict_free():
    """The swapped-operand kernel reads K (8 bytes a lane) and V (4 bytes) straight from the raw
    slots copied to shared memory: the lane bits chosen for heads 128 and 256 read every register
    of a tile in the minimum number of shared-memory wavefronts; head 64 (136-byte pitch) needs
    two per read at best."""
    pytest.importorskip("triton.experimental.gluon")
    from kvplan.runtime.attention_gluon import _flat_lane_bits, _swap_layouts, _wavefronts
    assert _wavefronts([4 * i for i in range(32)], 4) == 1  # 32 banks, one word each
    assert _wavefronts([128 * i for i in range(32)], 4) == 32  # one bank, 32 words
    assert _wavefronts([8 * i for i in range(32)], 8) == 2  # 256 bytes: two wavefronts
    for head in (128, 256):
        (k0, k1), v = _flat_lane_bits(head)
        pitch = 2 * head + 8
        for n0 in (0, 8):
            k_addr = [(n0 + (ln >> 2)) * pitch + ((ln & 1) << k0) + ((ln >> 1 & 1) << k1)
                      for ln in range(32)]
            assert _wavefronts(k_addr, 8) == 2
            v_addr = [(n0 + 2 * (ln & 3)) * pitch + head + 4
                      + sum((ln >> 2 + i & 1) << v[i] for i in range(3)) for ln in range(32)]
            assert _wavefronts(v_addr, 4) == 1
    for head in (64, 128, 256):
        for block_n in (16, 32):
            lay = _swap_layouts(head, block_n)
            assert lay["RANK"] == head.bit_length()


def test_gluon_swap_refuses_what_it_does_not_run():
    """Swapped operands take groups of up to 8 heads, heads of 64-256 and tiles of at most two
    pages (of at least 16 slots: whole 128-byte lines per 16 keys)."""
    pytest.importorskip("triton.experimental.gluon")
    from kvplan.runtime.attention_gluon import swap_supported
    assert swap_supported(8, 16) and swap_supported(1, 64, 32)
    assert not swap_supported(16, 16)  # 16 heads do not fit the 8 columns
    assert swap_supported(4, 16, 32)  # a 32-key tile spans two 16-slot pages
    assert not swap_supported(4, 8) and not swap_supported(4, 8, 32)  # pages under 16 slots
    assert not swap_supported(4, 16, 16, 32)  # a 32-byte row
    from kvplan.runtime.attention_gluon import _swap_layouts
    for head in (64, 128, 256):
        for block_n in (16, 32):
            assert swap_supported(4, 16, block_n, head)
            _swap_layouts(head, block_n)  # builds (the layouts assert their own consistency)


def test_gluon_swap_launch_checks_the_slot_layout():
    """The swapped-operand kernel reads K, V and both scales at fixed offsets of vLLM's raw
    per-token-head slot; its launch arguments for a real cache pass, and a slot laid out any
    other way is refused rather than read wrongly (checked without a GPU: no launch)."""
    pytest.importorskip("triton.experimental.gluon")
    import dataclasses

    from kvplan.runtime import attention_gluon
    from kvplan.runtime._common import cache_args
    for dtype, head in (("int8_per_token_head", 128), ("fp8_per_token_head", 64)):
        args = cache_args(allocate_kv_cache(LayerLayout.simple(dtype, 2, head), 4, 16, "cpu"))
        q = torch.zeros(3, 8, head, dtype=torch.bfloat16)
        bt, lens = torch.zeros(3, 4, dtype=torch.int32), torch.ones(3, dtype=torch.int32)
        common = dict(group=4, head=head, block_size=16, q_scale=1.0, sliding_window=0,
                      num_splits=2, block_n=16, prefetch=True, pipe=2, swap=True)
        _pos, kw, _ = attention_gluon._launch_args(q, q, q, q, args, bt, lens, **common)
        assert kw["RING_BYTES"] >= 2 * 16 * (2 * head + 8) and kw["HEAD"] == head
        moved = dataclasses.replace(args, V_OFF=args.V_OFF + 4)
        with pytest.raises(ValueError, match="per-token-head slot"):
            attention_gluon._launch_args(q, q, q, q, moved, bt, lens, **common)


def test_gluon_int4_reads_are_conflict_free_where_the_pitch_allows():
    """INT4 slots are head + 8 bytes (136 at head 128): each lane reads 4 bytes of K or V, and
    the lane bits chosen read a 16-key tile's registers in the fewest wavefronts there are
    (head 256: one per read; heads 64/128, whose pitch is an even number of words, two). The
    layouts build at every head and tile size, and the launch arguments of a real INT4 cache
    carry its half-width rows, the rotation scale and the bits of the query's two-step
    rotation (checked without a GPU: no launch)."""
    pytest.importorskip("triton.experimental.gluon")
    import itertools

    from kvplan.runtime import attention_gluon as ag
    from kvplan.runtime._common import cache_args
    def reads(lanes, pitch, byte_bits, v_off=None):  # wavefronts per read, K (or V at v_off)
        other = [1 << b for b in byte_bits if b not in lanes]
        if v_off is None:
            lane_off, regs = [1 << lanes[0], 1 << lanes[1], pitch, 2 * pitch, 4 * pitch], [8 * pitch]
        else:
            lane_off = [2 * pitch, 4 * pitch] + [1 << b for b in lanes]
            regs = [pitch, 8 * pitch]
        regs += other
        return ag._read_cost(lane_off, regs, v_off or 0) / (1 << len(regs))

    for head in (64, 128, 256):
        L, pitch = head.bit_length() - 1, head + 8
        (k0, k1), v = ag._int4_lane_bits(head)
        bits = range(2, L - 1)
        best_k = min(reads(c, pitch, bits) for c in itertools.combinations(bits, 2))
        assert reads((k0 - 1, k1 - 1), pitch, bits) == best_k == (1 if head == 256 else 2)
        best_v = min(reads(c, pitch, bits, head // 2 + 4)
                     for c in itertools.combinations(bits, 3))
        assert reads(tuple(b - 1 for b in v), pitch, bits, head // 2 + 4) == best_v
        for block_n in (16, 32):
            lay = ag._int4_layouts(head, block_n)
            assert lay["HB"] == head // 2 and lay["ROT"] == pytest.approx(head ** -0.5)
            assert lay["QBITS"] == (head - 1) & ~3  # physical bits 0, 1 sit on LQ's registers
    args = cache_args(allocate_kv_cache(LayerLayout.simple("int4_per_token_head", 2, 128), 4,
                                        16, "cpu"))
    q = torch.zeros(3, 8, 128, dtype=torch.bfloat16)
    bt, lens = torch.zeros(3, 4, dtype=torch.int32), torch.ones(3, dtype=torch.int32)
    common = dict(group=4, head=128, block_size=16, q_scale=1.0, sliding_window=0,
                  num_splits=2, block_n=16, prefetch=True, pipe=3)
    _pos, kw, _ = ag._launch_args(q, q, q, q, args, bt, lens, swap=True, **common)
    assert kw["KV_MODE"] == 4 and kw["HB"] == 64 and kw["STRIDE_S"] == 136
    assert kw["RING_BYTES"] >= 3 * 16 * 136
    with pytest.raises(ValueError, match="swapped-operand kernel only"):
        ag._launch_args(q, q, q, q, args, bt, lens, swap=False, **common)


def test_gluon_swap_trace_is_an_extra_argument_only_when_asked():
    """The per-program trace (bench/trace_decode.py) is compiled in only with a trace buffer:
    without one the swapped-operand launch passes a placeholder and TRACE=False; the round-8
    kernel refuses a trace instead of ignoring it (checked without a GPU: no launch)."""
    pytest.importorskip("triton.experimental.gluon")
    from kvplan.runtime import attention_gluon
    from kvplan.runtime._common import cache_args
    args = cache_args(allocate_kv_cache(LayerLayout.simple("int8_per_token_head", 2, 128), 4, 16,
                                        "cpu"))
    q = torch.zeros(3, 8, 128, dtype=torch.bfloat16)
    bt, lens = torch.zeros(3, 4, dtype=torch.int32), torch.ones(3, dtype=torch.int32)
    common = dict(group=4, head=128, block_size=16, q_scale=1.0, sliding_window=0, num_splits=2,
                  block_n=16, prefetch=True)
    trace = torch.zeros(3 * 2 * 2, 4, dtype=torch.int64)
    plain, kw, _ = attention_gluon._launch_args(q, q, q, q, args, bt, lens, pipe=2, swap=True,
                                             **common)
    traced, kw_t, _ = attention_gluon._launch_args(q, q, q, q, args, bt, lens, pipe=2, swap=True,
                                                trace=trace, **common)
    assert kw["TRACE"] is False and kw_t["TRACE"] is True
    assert traced[-1] is trace and plain[-1] is q and len(plain) == len(traced)
    with pytest.raises(ValueError, match="only the swapped-operand kernel"):
        attention_gluon._launch_args(q, q, q, q, args, bt, lens, pipe=2, swap=False, trace=trace,
                                     **common)


@pytest.mark.gpu
def test_gluon_swap_trace_records_every_program(cuda_device):
    """A traced launch writes the same output bits as an untraced one and one ordered
    (start <= first tile <= end) record per program on a real multiprocessor."""
    pytest.importorskip("triton.experimental.gluon")
    from kvplan.runtime import attention_gluon
    from kvplan.runtime._common import cache_args, num_sms
    from kvplan.runtime.attention import _merge_splits, _partials
    gen = torch.Generator(device="cuda").manual_seed(23)
    layout = LayerLayout.simple("int8_per_token_head", 8, 128)
    batch = build_paged_batch(layout, [1000, 4096, 333], 16, "cuda", gen)
    q = torch.randn(3, 32, 128, generator=gen, device="cuda").to(torch.bfloat16)
    args = cache_args(batch.cache)
    outs = []
    trace = torch.full((3 * 8 * 2, 4), -1, dtype=torch.int64, device="cuda")
    for tr in (None, trace):
        out = torch.full_like(q, float("nan"))
        po, pml = _partials(out, 2)
        attention_gluon.launch(q, out, po, pml, args, batch.block_tables, batch.seq_lens, group=4,
                               head=128, block_size=16, q_scale=0.1, sliding_window=0,
                               num_splits=2, trace=tr)
        _merge_splits(po, pml, out, 2, 128, False)
        outs.append(out)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1])
    t = trace.cpu()
    assert (t[:, 0] > 0).all() and (t[:, 0] <= t[:, 1]).all() and (t[:, 1] <= t[:, 2]).all()
    assert ((t[:, 3] >= 0) & (t[:, 3] < num_sms(q.device))).all()


def test_gluon_kernel_refuses_what_it_does_not_run(device):
    """Asking for the Gluon kernel where it cannot run is a clear error, not a silent fallback."""
    gen = torch.Generator(device=device).manual_seed(1)
    layout = LayerLayout.simple("int4_per_token_head", 2, 64)
    batch = build_paged_batch(layout, [20, 9], 16, device, gen)
    with pytest.raises(ValueError, match="gluon kernel"):  # INT4: swapped operands only
        _decode(batch, 4, gen, device, config=AttentionConfig(kernel="gluon", swap=False))
    with pytest.raises(ValueError, match="gluon kernel"):  # 16 query heads per kv head
        _decode(batch, 32, gen, device, config=AttentionConfig(kernel="gluon"))
    with pytest.raises(ValueError, match="unknown kernel"):
        _decode(batch, 4, gen, device, config=AttentionConfig(kernel="cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["int8_per_token_head", "fp8_per_token_head",
                                            "int4_per_token_head", "bfloat16", "fp8"])
@pytest.mark.parametrize("block_size,window", [(32, None), (64, None), (16, 1500), (64, 1100)])
@pytest.mark.parametrize("head", [128, 64])
def test_decode_default_on_gpu(cuda_device, kv_cache_dtype, block_size, window, head):
    """With no config, decode on a GPU runs the Gluon kernel where it was measured faster
    (per-token-head caches: flat copies, 32-key tiles at head 64; FP8 per-tensor caches; bf16
    caches at head 64) and the
    Triton kernel otherwise, and matches the reference at block sizes 16/32/64 and on
    sliding-window layers, where only the last W keys may be read: the keys before the window
    are poisoned with huge values."""
    pytest.importorskip("triton.experimental.gluon")
    from kvplan.runtime._common import cache_args
    from kvplan.runtime.attention import _use_gluon
    gen = torch.Generator(device="cuda").manual_seed(3)
    layout = LayerLayout.simple(kv_cache_dtype, 4, head, sliding_window=window)
    batch = build_paged_batch(layout, [700, 1, 129, 2048], block_size, "cuda", gen,
                              poison_outside_window=window is not None)
    q = torch.randn(4, 16, head, device="cuda", dtype=torch.bfloat16, generator=gen)
    gluon = kv_cache_dtype != "bfloat16" or head == 64
    assert _use_gluon(AttentionConfig(), q, cache_args(batch.cache), 4, head, block_size, True,
                      lambda: min(2048, window or 2048)) == gluon
    out, ref = _decode(batch, 16, gen, "cuda", poison=1e30)
    _check(out, ref, layout.quant_mode, f"default block {block_size} window {window}")


def test_fp8t_heads_per_program_default():
    """The FP8 per-tensor Gluon kernel takes two kv heads per program where that was measured
    faster (groups of 4 or less, heads up to 128, 4096 keys or more, enough head pairs to fill
    the GPU within 128 splits) and one elsewhere."""
    from kvplan.runtime.attention import _fp8t_heads
    assert _fp8t_heads(4, 8, 128, 4096, 64, 132) == 2  # B64 ctx4K
    assert _fp8t_heads(4, 8, 128, 16384, 16, 132) == 2  # B16 ctx16K
    assert _fp8t_heads(4, 8, 128, 2048, 64, 132) == 1  # short contexts
    assert _fp8t_heads(4, 8, 128, 32768, 1, 132) == 1  # one sequence: 4 pairs x 128 splits
    assert _fp8t_heads(8, 8, 64, 4096, 128, 132) == 1  # a group of 8 fills the 8 columns
    assert _fp8t_heads(4, 4, 256, 4096, 32, 132) == 1  # head 256
    assert _fp8t_heads(2, 3, 128, 4096, 64, 132) == 1  # an odd number of kv heads


def test_default_decode_kernel_choice(device):
    """The Triton kernel runs wherever the Gluon kernel does not apply: on the CPU interpreter,
    for bf16/fp16 caches at heads other than 64 or with a query of another dtype, for prefill,
    for short contexts and windows (under 1024 keys), and when a Triton-only launch setting is
    given. INT4 caches run the swapped-operand Gluon kernel on a GPU like INT8/FP8."""
    from kvplan.runtime._common import cache_args
    from kvplan.runtime.attention import _use_gluon
    gen = torch.Generator(device=device).manual_seed(2)
    q = torch.randn(2, 8, 64, device=device, dtype=torch.bfloat16, generator=gen)
    for dtype in ("bfloat16", "int4_per_token_head", "int8_per_token_head", "fp8"):
        args = cache_args(allocate_kv_cache(LayerLayout.simple(dtype, 2, 64), 4, 16, device))
        on_gpu = device == "cuda"
        assert _use_gluon(AttentionConfig(), q, args, 4, 64, 16, True) == on_gpu
        assert not _use_gluon(AttentionConfig(), q, args, 4, 64, 16, False)
        assert not _use_gluon(AttentionConfig(), q, args, 4, 64, 16, True, lambda: 128)
        assert not _use_gluon(AttentionConfig(num_warps=2), q, args, 4, 64, 16, True)
        assert not _use_gluon(AttentionConfig(kernel="triton"), q, args, 4, 64, 16, True)
        assert _use_gluon(AttentionConfig(kernel="gluon"), q, args, 4, 64, 16, True)
    # bf16 caches run the Gluon kernel at head 64 only (the Triton kernel is as fast at 128/256)
    q128 = torch.randn(2, 8, 128, device=device, dtype=torch.bfloat16, generator=gen)
    args = cache_args(allocate_kv_cache(LayerLayout.simple("bfloat16", 2, 128), 4, 16, device))
    assert not _use_gluon(AttentionConfig(), q128, args, 4, 128, 16, True)
    # and only when the query has the cache's dtype
    args = cache_args(allocate_kv_cache(LayerLayout.simple("float16", 2, 64), 4, 16, device))
    assert not _use_gluon(AttentionConfig(), q, args, 4, 64, 16, True)


def test_decode_plans_stay_bounded_as_contexts_grow(device):
    """An eager decode loop whose context grows every step (``max_seq_len`` given each step)
    plans once per context bucket (`context_bucket`: the context rounded up to 1/16 of its
    power of two), not once per step, and every step still matches the reference: the kernels
    read each sequence's own length, the bucket only steers the heuristics."""
    from kvplan.runtime import attention as A
    for n in [*range(1, 5000, 37), 1 << 20, (1 << 20) + 1]:
        b = A.context_bucket(n)
        assert 0 <= b - n < max(16, n / 8) and A.context_bucket(b) == b, n
    assert [A.context_bucket(1 << k) for k in range(4, 16)] == [1 << k for k in range(4, 16)]
    gen = torch.Generator(device=device).manual_seed(31)
    layout = LayerLayout.simple("int8_per_token_head", 2, 32)
    batch = build_paged_batch(layout, [200], 16, device, gen)
    q = torch.randn(1, 4, 32, generator=gen, device=device).to(torch.bfloat16)
    steps = range(150, 200, 6)
    before = len(A._DECODE_PLANS)
    for n in steps:
        lens = torch.tensor([n], dtype=torch.int32, device=device)
        out = paged_attention(q, batch.cache, batch.block_tables, lens, max_seq_len=n)
        ref = reference_paged_attention(q, batch.cache, batch.block_tables, lens)
        _check(out, ref, layout.quant_mode, f"context {n}")
    assert len(A._DECODE_PLANS) - before <= len({A.context_bucket(n) for n in steps}) < len(steps)


# ------------------------------------------------------------------------- prefill kernel
PREFILL_KERNEL_DTYPES = ["bfloat16", "fp8", "fp8_e5m2", "int8_per_token_head",
                         "fp8_per_token_head"]


def _prefill(layout, seq_lens, q_lens, block_size, hq, device, gen, config=None,
             dtype=torch.bfloat16, packed=False):
    """Prefill ``q_lens`` new tokens over ``seq_lens`` tokens in all; ``packed``: the query is
    the Q part of a fused QKV projection's output (a strided view, as serving stacks pass it)."""
    batch = build_paged_batch(layout, seq_lens, block_size, device, gen, shared_prefix_blocks=1,
                              k_scale=0.08, v_scale=0.01, model_dtype=dtype)
    qsl = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32,
                       device=device)
    heads = hq + 2 * layout.num_kv_heads if packed else hq
    q = torch.randn(int(qsl[-1]), heads, layout.head_size, generator=gen,
                    device=device).to(dtype)[:, :hq]
    out = torch.full_like(q, float("nan"))
    paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, qsl, out=out,
                    config=config)
    ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, qsl)
    return out, ref


@pytest.mark.parametrize("kv_cache_dtype", [*PREFILL_KERNEL_DTYPES, "int4_per_token_head"])
@pytest.mark.parametrize("hq,hkv,block_m,block_n,window,dequant", [
    (6, 2, 16, 32, None, False),   # group 3 (padded to 4), 32-key tiles over two 16-slot pages
    (2, 2, 16, 16, 9, False),      # MHA, a window shorter than a tile: masked lower-edge tiles
    (8, 1, 32, 16, 24, False),     # group 8, window edge + full tiles + diagonal
    (6, 2, 16, 32, 24, True),      # pages dequantized into a bf16 workspace first
])
def test_prefill_kernel_small(device, kv_cache_dtype, hq, hkv, block_m, block_n, window,
                              dequant):
    if kv_cache_dtype == "int4_per_token_head" and not dequant:
        pytest.skip("INT4 runs the prefill kernel through the dequantized workspace only")
    """The prefill kernel's three loops (window edge, unmasked full tiles, diagonal) against the
    torch reference, with sequences whose chunks start mid-tile and one with no new token."""
    gen = torch.Generator(device=device).manual_seed(hq * 7 + block_n)
    layout = LayerLayout.simple(kv_cache_dtype, hkv, 32, sliding_window=window)
    cfg = AttentionConfig(kernel="prefill", block_m=block_m, block_n=block_n, num_warps=4,
                          num_stages=2, dequant=dequant)
    out, ref = _prefill(layout, [70, 41, 5, 20], [30, 41, 5, 0], 16, hq, device, gen, cfg)
    _check(out, ref, layout.quant_mode, kv_cache_dtype)


def test_prefill_kernel_selection(device):
    """Prefill runs the prefill kernel by default; kernel='triton' or a decode-kernel knob runs
    the decode-form kernel; INT4 and fp32 queries stay there; kernel='prefill' refuses what it
    cannot read and refuses decode."""
    from kvplan.runtime import prefill as pf
    from kvplan.runtime._common import KV_MODES
    assert pf.prefill_supported(KV_MODES["int8_per_token_head"], torch.bfloat16, torch.int8, 128)
    assert not pf.prefill_supported(KV_MODES["int4_per_token_head"], torch.bfloat16, torch.uint8,
                                    128)
    assert not pf.prefill_supported(KV_MODES["none"], torch.float32, torch.float32, 128)
    assert not pf.prefill_supported(KV_MODES["none"], torch.bfloat16, torch.float16, 128)
    assert not pf.prefill_supported(KV_MODES["none"], torch.bfloat16, torch.bfloat16, 96)
    gen = torch.Generator(device=device).manual_seed(5)
    assert pf.prefill_supported(KV_MODES["int4_per_token_head"], torch.bfloat16, torch.uint8,
                                128, dequant=True)
    layout = LayerLayout.simple("int4_per_token_head", 1, 32)
    with pytest.raises(ValueError, match="prefill kernel reads"):
        _prefill(layout, [20], [4], 16, 2, device, gen,
                 AttentionConfig(kernel="prefill", dequant=False))
    layout = LayerLayout.simple("bfloat16", 1, 32)
    batch = build_paged_batch(layout, [20], 16, device, gen)
    with pytest.raises(ValueError, match="runs prefill"):
        paged_attention(torch.randn(1, 2, 32, device=device, dtype=torch.bfloat16), batch.cache,
                        batch.block_tables, batch.seq_lens, config=AttentionConfig(kernel="prefill"))
    for cfg in (AttentionConfig(kernel="triton", block_m=16), AttentionConfig(imma=0, block_m=16)):
        out, ref = _prefill(layout, [40], [25], 16, 2, device, gen, cfg)
        _check(out, ref, layout.quant_mode, str(cfg))


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", [*PREFILL_KERNEL_DTYPES, "int4_per_token_head"])
@pytest.mark.parametrize("hq,hkv,head_size,block_size", [
    (32, 8, 128, 16), (64, 8, 64, 32), (16, 4, 256, 16), (8, 8, 128, 32), (24, 8, 64, 16),
    (16, 8, 256, 32)])
def test_prefill_kernel_gpu(cuda_device, kv_cache_dtype, hq, hkv, head_size, block_size):
    """Prefill at the default launch (the prefill kernel; quantized caches through the
    dequantized workspace): whole prompts, chunks over cached context, a 1-token chunk, sliding
    windows; GQA groups 1-8, heads 64/128/256, block sizes 16/32."""
    gen = torch.Generator(device="cuda").manual_seed(hq + head_size + block_size)
    for window in (None, 300):
        layout = LayerLayout.simple(kv_cache_dtype, hkv, head_size, sliding_window=window)
        out, ref = _prefill(layout, [1500, 700, 2049, 64, 1], [1500, 513, 100, 1, 1],
                            block_size, hq, "cuda", gen)
        _check(out, ref, layout.quant_mode, f"{kv_cache_dtype} window={window}")


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "int8_per_token_head", "fp8",
                                            "fp8_per_token_head"])
@pytest.mark.parametrize("head_size", [64, 128, 256])
def test_prefill_kernel_gpu_configs(cuda_device, kv_cache_dtype, head_size):
    """Every launch configuration the prefill sweep tries gives the reference's answer."""
    gen = torch.Generator(device="cuda").manual_seed(head_size)
    layout = LayerLayout.simple(kv_cache_dtype, 4, head_size)
    configs = [(128, 64, 8, 3, False, False), (128, 128, 8, 3, False, False),
               (128, 64, 8, 4, True, False), (64, 64, 4, 3, False, True),
               (128, 32, 4, 3, False, False), (64, 32, 4, 2, True, False),
               (64, 128, 4, 3, False, False), (128, 32, 4, 2, False, True)]
    for bm, bn, warps, stages, vreg, dequant in configs:
        if head_size == 256 and (bm > 64 or stages > 2):
            continue  # K/V stages of 256-wide rows: more shared memory than an H100 has
        cfg = AttentionConfig(kernel="prefill", block_m=bm, block_n=bn, num_warps=warps,
                              num_stages=stages, v_reg=vreg, dequant=dequant)
        out, ref = _prefill(layout, [900, 333], [900, 200], 16, 16, "cuda", gen, cfg)
        _check(out, ref, layout.quant_mode, f"{kv_cache_dtype} {cfg}")


@pytest.mark.parametrize("kv_cache_dtype", ["int8_per_token_head", "int4_per_token_head"])
def test_prefill_workspace_holds_the_used_pages(device, kv_cache_dtype):
    """The two-pass prefill's first pass (`prefill.dequantize_pages`): each sequence's pages, in
    order, dequantized into a bf16 workspace (zeros past its length), read through an identity
    block table that is built once per size and device and shared by later calls. INT4 rows
    come back out of the cache's Hadamard basis: the workspace holds K and V as written."""
    from kvplan.runtime._common import cache_args
    from kvplan.runtime.prefill import dequantize_pages
    from kvplan.runtime.reference import dequantize_kv_cache

    gen = torch.Generator(device=device).manual_seed(30)
    layout = LayerLayout.simple(kv_cache_dtype, 2, 64)
    lens = [40, 17]
    batch = build_paged_batch(layout, lens, 16, device, gen)
    qsl = torch.tensor([0, 8, 16], dtype=torch.int32, device=device)
    kw = dict(max_seq_len=40, block_size=16, num_kv_heads=2, head=64, k_scale=1.0, v_scale=1.0,
              dtype=torch.bfloat16)
    ws, table = dequantize_pages(cache_args(batch.cache), batch.block_tables, batch.seq_lens,
                                 qsl, **kw)
    assert table.tolist() == [[0, 1, 2], [3, 4, 5]]
    k_ref, v_ref = dequantize_kv_cache(batch.cache)
    for b, n in enumerate(lens):
        pages = batch.block_tables[b, :3].long()
        want_k = k_ref[pages].reshape(48, 2, 64)[:n]
        got_k = ws.k[3 * b:3 * b + 3].reshape(48, 2, 64)
        assert torch.allclose(got_k[:n].float(), want_k, rtol=1e-2, atol=1e-2)
        assert not got_k[n:].any()
        want_v = v_ref[pages].reshape(48, 2, 64)[:n]
        assert torch.allclose(ws.v[3 * b:3 * b + 3].reshape(48, 2, 64)[:n].float(), want_v,
                              rtol=1e-2, atol=1e-2)
    _, again = dequantize_pages(cache_args(batch.cache), batch.block_tables, batch.seq_lens,
                                qsl, **kw)
    assert again is table


def test_prefill_hopper_kernel_scope(device):
    """The Hopper prefill kernel reads bf16/fp16 caches of the query's dtype (and the dequantized
    workspace) at heads 64/128/256, GQA groups up to 16, pages of 8+ rows tiling its key tile,
    caches that are plain [blocks * block_size, Hkv * D] matrices, and by default takes only
    calls with enough work; asking for it where it cannot run (no sm_90 GPU, or a layout it does
    not read) is an error, not a silent fallback."""
    from kvplan.runtime import prefill_gluon as pg
    from kvplan.runtime._common import KV_MODES
    none = KV_MODES["none"]
    bf16 = torch.bfloat16
    assert pg.ws_prefill_supported(none, bf16, bf16, 128, 16, 4, True)
    assert pg.ws_prefill_supported(none, torch.float16, torch.float16, 64, 32, 16, True)
    assert pg.ws_prefill_supported(none, bf16, bf16, 256, 64, 1, True)
    assert not pg.ws_prefill_supported(none, bf16, bf16, 96, 16, 4, True)      # head
    assert not pg.ws_prefill_supported(none, bf16, torch.float16, 128, 16, 4, True)  # dtypes
    assert not pg.ws_prefill_supported(KV_MODES["int8_per_token_head"], bf16, torch.int8, 128,
                                       16, 4, True)  # 8-bit caches: through the workspace only
    assert not pg.ws_prefill_supported(none, bf16, bf16, 128, 4, 4, True)      # 4-row pages
    assert not pg.ws_prefill_supported(none, bf16, bf16, 256, 128, 4, True)   # page > key tile
    assert not pg.ws_prefill_supported(none, bf16, bf16, 128, 16, 32, True)   # group
    assert not pg.ws_prefill_supported(none, bf16, bf16, 128, 16, 4, False)   # strides
    assert pg.ws_prefill_supported(none, bf16, bf16, 128, 4, 4, True, contig=True)
    # by default only calls with enough work take it (its launch costs more host time)
    assert pg.worthwhile(4 * 4096, 32, 128, 4096, 4096)          # the suite's whole prompts
    assert pg.worthwhile(4 * 512, 32, 128, 512, 8704)            # 512 tokens over 8K
    assert not pg.worthwhile(16, 32, 128, 16, 2048)              # a short chunk
    assert not pg.worthwhile(64, 8, 64, 64, None)                # a small prompt, no context given
    # measured crossovers (round 18): 2 x 512 over 2K takes it over a bf16 cache, not over the
    # dequantized workspace of an 8-bit one; 1 x 4096 takes it over both; 1 x 1024 over neither
    assert pg.worthwhile(2 * 512, 32, 128, 512, 2560)
    assert not pg.worthwhile(2 * 512, 32, 128, 512, 2560, contig=True)
    assert pg.worthwhile(4096, 32, 128, 4096, 4096, contig=True)
    assert not pg.worthwhile(1024, 32, 128, 1024, 1024)
    # the query rows go by TMA from any [tokens, Hq, D] view with unit stride along D and
    # 16-byte strides (a fused QKV output's Q part), else the consumers load them
    qkv = torch.zeros(10, 12, 128, dtype=bf16)
    assert pg.query_tma_ok(qkv[:, :8]) and pg.query_tma_ok(qkv)
    assert not pg.query_tma_ok(qkv.transpose(1, 2))                          # D not unit-stride
    assert not pg.query_tma_ok(torch.zeros(10 * 1025, dtype=bf16).as_strided(
        (10, 8, 128), (1025, 128, 1)))                                         # 2050-byte rows
    assert not pg.query_tma_ok(torch.zeros(10 * 1024 + 1, dtype=bf16)[1:].view(10, 8, 128))
    assert pg.ws_query_buffers(128) == 2 and pg.ws_query_buffers(256) == 1
    # a setting the kernel does not have (round 17's `prefetch`, removed) is refused, not ignored
    with pytest.raises(ValueError, match=r"unknown Hopper prefill settings \['prefetch'\]"):
        pg.launch_ws_prefill(qkv, qkv, qkv, qkv, None, None, None, group=1, block_size=16,
                             num_kv_heads=12, scale=1.0, out_scale=1.0, sliding_window=0,
                             max_query_len=10, prefetch=True)
    cache = torch.zeros(2, 5, 16, 4, 128, dtype=bf16)
    assert pg.stride_ok(cache[0], cache[1], 16, 4, 128)
    assert not pg.stride_ok(cache[0][:, :, :2], cache[1][:, :, :2], 16, 2, 128)  # head slice
    gen = torch.Generator(device=device).manual_seed(3)
    layout = LayerLayout.simple("bfloat16", 2, 64)
    if not pg.hopper_device(torch.device(device)):
        with pytest.raises(ValueError, match="Hopper prefill kernel needs an sm_90 GPU"):
            _prefill(layout, [40], [25], 16, 4, device, gen,
                     AttentionConfig(kernel="prefill", hopper=True))
    # hopper=False (and, off Hopper, the default) runs the Triton kernel
    out, ref = _prefill(layout, [40], [25], 16, 4, device, gen,
                        AttentionConfig(kernel="prefill", hopper=False, block_m=16, block_n=16))
    _check(out, ref, layout.quant_mode, "hopper=False")


def test_hopper_prefill_masks_by_causality_alone_only_without_a_window(monkeypatch):
    """``causal_mask`` (the default): the first and diagonal tiles of a layer without a sliding
    window are masked by causality alone (`_softmax` MASK 2) at head 128 over a paged cache; a
    windowed layer, the dequantized workspace and heads 64/256 (which spill with it) and the
    setting turned off keep both compares (MASK 1). The launch is recorded, not run: this
    checks what the kernel is asked for, on any machine."""
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    from kvplan.runtime import prefill_gluon as pg
    seen = []
    monkeypatch.setattr(pg, "launch_cached", lambda fn, grid, pos, kw, key=None, per_seq=None: seen.append(kw))
    bt = torch.zeros(2, 8, dtype=torch.int32)
    sl = torch.full((2,), 128, dtype=torch.int32)

    def diag_mask(window: int, contig: bool = False, head: int = 128, **settings) -> int:
        k = torch.zeros(64, 16, 8, head, dtype=torch.bfloat16)
        q = torch.zeros(256, 32, head, dtype=torch.bfloat16)
        pg.launch_ws_prefill(q, q, k, k, bt, sl, sl, group=4, block_size=16, num_kv_heads=8,
                             scale=0.1, out_scale=1.0, sliding_window=window,
                             max_query_len=128, contig=contig, seq_pages=8, **settings)
        return seen[-1]["DIAG_MASK"]

    assert diag_mask(0) == 2                                  # on by default
    assert diag_mask(0, causal_mask=False) == 1
    assert diag_mask(300) == 1                                # the window cuts diagonal tiles
    assert diag_mask(0, contig=True) == 1                     # the workspace kernel
    assert diag_mask(0, head=64) == 1                         # spills at heads 64 and 256
    assert diag_mask(0, head=256) == 1


def test_prefill_dispatch_to_the_hopper_kernel(device, monkeypatch):
    """Which prefill kernel a call takes, as on an sm_90 GPU (the device check and the Hopper
    launch replaced by a recorder): small calls keep the Triton kernel (unless planned for
    bound launches, whose host cost is the same on both kernels), calls with enough work
    take the Hopper kernel over the paged cache, quantized caches reach it through the
    contiguous dequantized workspace, hopper=False keeps the Triton kernel, a head it does not
    read falls back by default and is an error when asked for."""
    from kvplan.runtime import prefill_gluon as pg
    calls: list[dict] = []
    monkeypatch.setattr(pg, "hopper_device", lambda dev: True)
    monkeypatch.setattr(pg, "launch_ws_prefill", lambda *a, **kw: calls.append(kw))
    gen = torch.Generator(device=device).manual_seed(8)

    def run(kv_dtype, head=64, config=None):
        layout = LayerLayout.simple(kv_dtype, 2, head)
        return _prefill(layout, [40, 70], [25, 70], 16, 4, device, gen,
                        config or AttentionConfig(kernel="prefill", block_m=16, block_n=16))

    out, ref = run("bfloat16")  # 4 * 64 * 4 * 95 * 70 FLOPs: the Triton kernel ran
    assert calls == []
    _check(out, ref, "none", "small call")
    # planned for bound launches (host cost alike on both kernels), any size takes it
    assert not pg.worthwhile(95, 4, 64, 70, 70) and pg.worthwhile(95, 4, 64, 70, 70, bound=True)
    assert not pg.worthwhile(95, 4, 64, 70, 70, contig=True)
    assert pg.worthwhile(95, 4, 64, 70, 70, contig=True, bound=True)
    monkeypatch.setattr(pg, "MIN_DEFAULT_FLOPS", 1.0)
    monkeypatch.setattr(pg, "MIN_WORKSPACE_FLOPS", 1.0)
    run("bfloat16")
    assert len(calls) == 1 and calls[0]["contig"] is False
    assert (calls[0]["block_size"], calls[0]["group"], calls[0]["num_kv_heads"]) == (16, 2, 2)
    assert calls[0]["max_query_len"] == 70
    run("int8_per_token_head")
    assert calls[-1]["contig"] is True and calls[-1]["seq_pages"] == 5  # ceil(70 / 16) pages
    run("bfloat16", config=AttentionConfig(kernel="prefill", hopper=False, block_m=16,
                                           block_n=16))
    assert len(calls) == 2
    run("bfloat16", head=32)  # a head the Hopper kernel does not read: the Triton kernel
    assert len(calls) == 2
    # the benchmark's kernel column takes the same decisions
    from kvplan.runtime.bench import prefill_kernel_name
    from kvplan.runtime.cache import allocate_kv_cache
    q = torch.zeros(95, 4, 64, dtype=torch.bfloat16, device=device)
    for dtype, head, want in (("bfloat16", 64, "hopper"), ("int8_per_token_head", 64, "hopper"),
                              ("bfloat16", 32, "prefill")):
        cache = allocate_kv_cache(LayerLayout.simple(dtype, 2, head), 4, 16, device)
        assert prefill_kernel_name(cache, q[..., :head], None, 70, 70) == want, (dtype, head)
    monkeypatch.setattr(pg, "MIN_DEFAULT_FLOPS", 5e10)
    monkeypatch.setattr(pg, "MIN_WORKSPACE_FLOPS", 5e10)
    cache = allocate_kv_cache(LayerLayout.simple("bfloat16", 2, 64), 4, 16, device)
    assert prefill_kernel_name(cache, q, None, 70, 70) == "prefill"  # too little work
    with pytest.raises(ValueError, match="Hopper prefill kernel needs"):
        run("bfloat16", head=32, config=AttentionConfig(kernel="prefill", hopper=True))


@pytest.mark.gpu
@pytest.mark.parametrize("split,stages,pingpong,persistent,qtma,pack_p,causal_mask", [
    (True, 2, False, True, True, True, False), (True, 2, False, False, True, True, False),
    (False, 2, False, True, True, True, False), (True, 3, False, True, True, True, False),
    (True, 2, True, True, True, True, False), (True, 2, False, True, False, True, False),
    (False, 2, False, False, False, True, False), (True, 2, False, True, True, False, False),
    (True, 2, False, True, True, True, True)])
@pytest.mark.parametrize("kv_cache_dtype,hq,hkv,head_size,block_size", [
    ("bfloat16", 32, 8, 128, 16), ("bfloat16", 64, 8, 64, 32), ("bfloat16", 16, 4, 256, 16),
    ("bfloat16", 8, 8, 128, 32), ("bfloat16", 24, 8, 64, 16), ("float16", 48, 4, 128, 32),
    ("bfloat16", 16, 2, 128, 8), ("int8_per_token_head", 32, 8, 128, 16),
    ("fp8", 16, 8, 256, 32), ("fp8_per_token_head", 56, 8, 64, 16)])
def test_prefill_hopper_gpu(cuda_device, monkeypatch, split, stages, pingpong, persistent,
                            qtma, pack_p, causal_mask, kv_cache_dtype, hq, hkv, head_size,
                            block_size):
    """The Hopper prefill kernel (paged TMA copies; the workspace of 8-bit caches) against the
    reference: whole prompts, chunks over cached context, 1-token chunks, an empty chunk,
    sliding windows; GQA groups 1-12 (3, 7 and 12 padded), heads 64/128/256, pages of 8-32
    rows; both consumer arrangements, ring depths, ping-pong turns, persistent programs (which
    walk many items each here), the query rows copied by TMA (from a contiguous query and from
    the strided Q view of a fused QKV output) or loaded by the consumers; P converted by the
    kernel's own packing PTX (``pack_p``); the causal-only mask of layers without a window
    (``causal_mask``: the window=None pass below takes it, the window=300 pass keeps both
    compares)."""
    from kvplan.runtime import prefill_gluon as pg
    if not pg.hopper_device(torch.device("cuda")):
        pytest.skip("the Hopper prefill kernel needs an sm_90 GPU")
    if stages > pg.ws_max_stages(head_size):
        pytest.skip(f"{stages} K/V stages of {head_size}-wide rows do not fit shared memory")
    monkeypatch.setitem(pg.WS_DEFAULTS, "split", split)
    monkeypatch.setitem(pg.WS_DEFAULTS, "stages", stages)
    monkeypatch.setitem(pg.WS_DEFAULTS, "pingpong", pingpong)
    monkeypatch.setitem(pg.WS_DEFAULTS, "persistent", persistent)
    monkeypatch.setitem(pg.WS_DEFAULTS, "qtma", qtma)
    monkeypatch.setitem(pg.WS_DEFAULTS, "pack_p", pack_p)
    monkeypatch.setitem(pg.WS_DEFAULTS, "causal_mask", causal_mask)
    dtype = torch.float16 if kv_cache_dtype == "float16" else torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(hq + head_size + block_size)
    for window, packed in ((None, False), (300, True)):
        layout = LayerLayout.simple(kv_cache_dtype, hkv, head_size, sliding_window=window)
        out, ref = _prefill(layout, [1500, 700, 2049, 64, 1, 90], [1500, 513, 100, 1, 1, 0],
                            block_size, hq, "cuda", gen, AttentionConfig(kernel="prefill",
                                                                         hopper=True),
                            dtype=dtype, packed=packed)
        _check(out, ref, layout.quant_mode, f"{kv_cache_dtype} window={window}")


@pytest.mark.gpu
def test_cached_launch_is_reused_and_follows_arguments(cuda_device):
    """An eager decode call's second launch reuses the compiled kernel (`launch_cached`), and
    new tensors, strides and lengths still reach the kernel: results match the reference after
    the cache is warm."""
    from kvplan.runtime import _common
    gen = torch.Generator(device="cuda").manual_seed(11)
    for dtype in ("int8_per_token_head", "bfloat16", "fp8"):
        layout = LayerLayout.simple(dtype, 8, 128)
        for lens in ([1500, 3000], [2100, 1200, 40]):
            batch = build_paged_batch(layout, lens, 16, "cuda", gen, k_scale=0.08, v_scale=0.01)
            out, ref = _decode(batch, 32, gen, "cuda")
            _check(out, ref, layout.quant_mode, f"{dtype} {lens}")
            n = len(_common._LAUNCHERS)
            out, ref = _decode(batch, 32, gen, "cuda")
            _check(out, ref, layout.quant_mode, f"{dtype} {lens} again")
            assert len(_common._LAUNCHERS) == n
    # the same layouts and shapes with fp16 queries (and an fp16 cache) after bf16 ones: the
    # cached launch keys on the tensors' dtypes, not only their alignment
    for model_dtype in (torch.bfloat16, torch.float16):
        for head in (64, 128):
            layout = LayerLayout.simple("float16" if model_dtype == torch.float16 else "bfloat16",
                                        8, head)
            batch = build_paged_batch(layout, [1500, 3000], 16, "cuda", gen,
                                      model_dtype=model_dtype)
            out, ref = _decode(batch, 32, gen, "cuda", dtype=model_dtype)
            _check(out, ref, layout.quant_mode, f"{model_dtype} head {head}")


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "fp8", "int8_per_token_head",
                                            "fp8_per_token_head", "int4_per_token_head"])
def test_bound_decode_matches_the_ordinary_path(cuda_device, monkeypatch, kv_cache_dtype):
    """After the first eager decode call of a signature over a cache, later calls launch
    through the bound driver path (`kvplan.runtime.bound`, no `launch_cached`) and give the
    ordinary path's results bit for bit over new queries, block tables and lengths, split-K or
    not, at heads 64 and 128. A misaligned query, a strided query and launch hooks take the
    ordinary path and stay correct (and leave the bound call in place for the next aligned
    call), and a bound call captured in a CUDA graph replays correctly."""
    from kvplan.runtime import attention as A
    launches = []
    ordinary = A.launch_cached
    monkeypatch.setattr(A, "launch_cached",
                        lambda *a, **k: (launches.append(a[0]), ordinary(*a, **k)))
    gen = torch.Generator(device="cuda").manual_seed(21)

    def call(batch, q, ctx, out=None):
        return paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens,
                               max_seq_len=ctx, out=out)

    for head, lens in ((128, [5000]), (128, [1500, 3000, 2100, 1200]), (64, [2500] * 3)):
        layout = LayerLayout.simple(kv_cache_dtype, 8, head)
        batch = build_paged_batch(layout, lens, 16, "cuda", gen, k_scale=0.08, v_scale=0.01)
        ctx = max(lens)
        q = torch.randn(len(lens), 32, head, generator=gen, device="cuda").to(torch.bfloat16)
        call(batch, q, ctx)  # the first call: ordinary path, then bound
        assert launches
        for step in range(3):  # new queries, lengths and tables: bound path, same results
            launches.clear()
            q = torch.randn_like(q, dtype=torch.float32).to(torch.bfloat16)
            lens2 = [max(1, n - 97 * step) for n in lens]
            seq_lens = torch.tensor(lens2, dtype=torch.int32, device="cuda")
            tables = batch.block_tables.clone()
            b2 = type(batch)(**{**batch.__dict__, "seq_lens": seq_lens, "block_tables": tables})
            out = call(b2, q, ctx)
            assert not launches, f"{kv_cache_dtype} {head} {lens}: ordinary path ran"
            batch.cache.__dict__.pop("_bound_calls")
            again = call(b2, q, ctx)
            assert launches
            assert torch.equal(out, again), f"{kv_cache_dtype} {head} {lens} step {step}"
            _check(out, reference_paged_attention(q, batch.cache, tables, seq_lens),
                   layout.quant_mode, f"{kv_cache_dtype} {head} {lens}")
        # a misaligned query (8 bytes into its storage) and a strided one (a slice of a wider
        # projection): the ordinary path, correct
        for q_odd in (torch.randn(len(lens) * 32 * head + 4, generator=gen, device="cuda")
                      .to(torch.bfloat16)[4:].view(len(lens), 32, head),
                      torch.randn(len(lens), 40, head, generator=gen, device="cuda")
                      .to(torch.bfloat16)[:, :32]):
            for _ in range(2):
                launches.clear()
                out = call(batch, q_odd, ctx)
                _check(out, reference_paged_attention(q_odd, batch.cache, batch.block_tables,
                                                      batch.seq_lens),
                       layout.quant_mode, f"{kv_cache_dtype} {head} odd query")
            assert launches or q_odd.stride(0) != 32 * head
        # the misaligned calls took the ordinary path without replacing the bound call
        launches.clear()
        call(batch, q, ctx)
        assert not launches, f"{kv_cache_dtype} {head}: the bound call was lost"
        # launch hooks: Triton's own path, which calls them
        from triton import knobs
        seen = []
        monkeypatch.setattr(knobs.runtime, "launch_enter_hook", seen.append)
        call(batch, q, ctx)
        monkeypatch.undo()
        monkeypatch.setattr(A, "launch_cached",
                            lambda *a, **k: (launches.append(a[0]), ordinary(*a, **k)))
        assert seen
        # captured in a CUDA graph after binding: replays read the captured tensors
        out = torch.empty_like(q)
        call(batch, q, ctx, out)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            call(batch, q, ctx, out)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call(batch, q, ctx, out)
        q.copy_(torch.randn_like(q, dtype=torch.float32))
        graph.replay()
        torch.cuda.synchronize()
        _check(out, reference_paged_attention(q, batch.cache, batch.block_tables,
                                              batch.seq_lens),
               layout.quant_mode, f"{kv_cache_dtype} {head} graph")


def _bound_like_unbound(out, launches: list, cache, q, tables, sl, qsl, hopper: bool | None,
                        mql: int, ctx: int, what: str) -> None:
    """``out`` came from a bound prefill call (no ordinary launch in ``launches``) and equals,
    bit for bit, the ordinary path's result planned as the bound call was (the buckets'
    lengths, the same kernel: a call recorded for binding takes the Hopper kernel at any size
    where it runs, an unbound one only above a size floor), which is within tolerance of the
    reference."""
    from kvplan.runtime import attention as A
    from kvplan.runtime import prefill_gluon as pg
    assert not launches, f"{what}: ordinary path ran"
    same = pg.hopper_device(torch.device("cuda")) if hopper is None else hopper
    memo = cache.__dict__.pop("_bound_calls")  # set aside meanwhile
    try:
        again = paged_attention(q, cache, tables, sl, qsl, config=AttentionConfig(
            kernel="prefill", hopper=same, bound=False), max_query_len=A.context_bucket(mql),
            max_seq_len=A.context_bucket(ctx))
    finally:
        cache.__dict__["_bound_calls"] = memo
    assert launches
    assert torch.equal(out, again), what
    _check(out, reference_paged_attention(q, cache, tables, sl, qsl), cache.layout.quant_mode,
           f"{what} prefill")


def _prefill_launches(monkeypatch, hopper: bool | None) -> list:
    """The kernels the prefill paths launch through `launch_cached` (the ordinary path), noted
    as they run; skips the test where it asks for the Hopper kernel without an sm_90 GPU."""
    from kvplan.runtime import attention as A
    from kvplan.runtime import prefill as P
    from kvplan.runtime import prefill_gluon as pg
    if hopper and not pg.hopper_device(torch.device("cuda")):
        pytest.skip("the Hopper prefill kernel needs an sm_90 GPU")
    launches: list = []
    for mod in (A, P, pg):
        ordinary = mod.launch_cached
        monkeypatch.setattr(mod, "launch_cached",
                            lambda *a, _o=ordinary, **k: (launches.append(a[0]), _o(*a, **k)))
    return launches


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype,hopper", [
    ("bfloat16", True), ("bfloat16", False), ("int8_per_token_head", True),
    ("fp8", True), ("int4_per_token_head", None)])
def test_bound_prefill_matches_the_ordinary_path(cuda_device, monkeypatch, kv_cache_dtype,
                                                 hopper):
    """From the third eager prefill call of a signature over a cache (max_query_len and
    max_seq_len given; the second is recorded), calls launch through the bound driver path
    (no `launch_cached`):
    the Hopper kernel's TMA descriptors over the cache baked in, the query's encoded per call
    (a packed QKV view included), the dequantized workspace of 8-bit and INT4 caches kept per
    stream. Over new queries, token counts and chunk offsets (chunks of new lengths, moved
    between sequences), lengths and block tables, and a longest context anywhere in the same
    bucket, the results equal the ordinary path's bit for bit and the reference within
    tolerance; a CUDA graph captured over a bound call replays correctly."""
    launches = _prefill_launches(monkeypatch, hopper)
    gen = torch.Generator(device="cuda").manual_seed(23)
    cfg = AttentionConfig(kernel="prefill", hopper=hopper)
    head, hq, hkv = 128, 32, 8
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head)
    lens, q_lens = [3000, 1200, 2049], [1000, 1200, 257]
    batch = build_paged_batch(layout, lens, 16, "cuda", gen, k_scale=0.08, v_scale=0.01)

    def inputs(step):  # the chunks change length (a new token count each step; the longest
        # stays 1200) and move between sequences
        ql = [q_lens[0] - 37 * step, q_lens[1], q_lens[2] + 11 * step]
        ql = ql[step % 3:] + ql[:step % 3]
        sl = [max(q, n - 61 * step) for n, q in zip(lens, ql, strict=True)]
        qsl = torch.tensor([0, *torch.tensor(ql).cumsum(0).tolist()], dtype=torch.int32,
                           device="cuda")
        qkv = torch.randn(int(qsl[-1]), hq + 2 * hkv, head, generator=gen, device="cuda")
        q = qkv.to(torch.bfloat16)[:, :hq]  # the Q part of a fused projection: a strided view
        return q, torch.tensor(sl, dtype=torch.int32, device="cuda"), qsl, max(q_lens)

    def call(q, sl, qsl, mql, ctx=None, tables=None, out=None):
        return paged_attention(q, batch.cache, batch.block_tables if tables is None else tables,
                               sl, qsl, out=out, config=cfg, max_query_len=mql,
                               max_seq_len=max(lens) if ctx is None else ctx)

    q, sl, qsl, mql = inputs(0)
    call(q, sl, qsl, mql)  # first sight of the signature: the ordinary path
    assert launches
    call(q, sl, qsl, mql)  # it came back: recorded on the ordinary path, then bound
    for step in range(1, 4):  # new queries, offsets, lengths, tables; contexts in one bucket
        launches.clear()
        q, sl, qsl, _ = inputs(step)
        tables = batch.block_tables.clone()
        ctx = max(lens) - 40 * step
        out = call(q, sl, qsl, mql, ctx, tables)
        _bound_like_unbound(out, launches, batch.cache, q, tables, sl, qsl, hopper, mql,
                            max(lens), f"{kv_cache_dtype} step {step}")
    # captured in a CUDA graph after binding: replays read the captured tensors
    out = torch.empty_like(q)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call(q, sl, qsl, mql, out=out)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call(q, sl, qsl, mql, out=out)
    q.copy_(torch.randn(q.shape, generator=gen, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    _check(out, reference_paged_attention(q, batch.cache, batch.block_tables, sl, qsl),
           layout.quant_mode, f"{kv_cache_dtype} prefill graph")


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache_dtype,hopper", [
    ("bfloat16", True), ("bfloat16", False), ("int8_per_token_head", True),
    ("fp8", False), ("int4_per_token_head", None)])
def test_bound_prefill_follows_the_batchs_sequence_count(cuda_device, monkeypatch,
                                                         kv_cache_dtype, hopper):
    """A continuous-batching loop: each step's prefill batch holds another set of sequences
    (3 or 4 of them, in any order, chunks of new lengths). Bound once, the calls of one
    sequence-count bucket (`seq_bucket`: 3 and 4 share one) launch through the bound path with
    each call's own grid and count, equal to the ordinary path bit for bit and to the
    reference within tolerance; 2 sequences (another bucket) start with the ordinary path."""
    launches = _prefill_launches(monkeypatch, hopper)
    gen = torch.Generator(device="cuda").manual_seed(29)
    head, hq, hkv, mql = 128, 32, 8, 700
    layout = LayerLayout.simple(kv_cache_dtype, hkv, head)
    lens = [2000, 900, 1500, 2600]
    batch = build_paged_batch(layout, lens, 16, "cuda", gen, k_scale=0.08, v_scale=0.01)

    def call(seqs, step, bound=None):
        ql = [mql - (97 * (step + i) % 500) for i in range(len(seqs))]
        ql[step % len(seqs)] = mql  # the longest chunk stays in one bucket
        qsl = torch.tensor([0, *torch.tensor(ql).cumsum(0).tolist()], dtype=torch.int32,
                           device="cuda")
        q = torch.randn(int(qsl[-1]), hq, head, generator=gen, device="cuda").to(torch.bfloat16)
        sl = torch.tensor([lens[s] for s in seqs], dtype=torch.int32, device="cuda")
        tables = batch.block_tables[seqs]
        cfg = AttentionConfig(kernel="prefill", hopper=hopper, bound=bound)
        out = paged_attention(q, batch.cache, tables, sl, qsl, config=cfg, max_query_len=mql,
                              max_seq_len=max(lens))
        return out, (q, tables, sl, qsl)

    call([0, 1, 2], 0)  # first sight of the signature
    call([2, 0, 1], 1)  # it came back: recorded, then bound
    for step, seqs in enumerate(([0, 1, 2, 3], [3, 1], [1, 3, 2], [2, 3, 0, 1], [3, 0, 2]),
                                start=2):
        launches.clear()
        out, (q, tables, sl, qsl) = call(seqs, step)
        if len(seqs) == 2:
            assert launches, "a new sequence-count bucket took a bound call"
            continue
        _bound_like_unbound(out, launches, batch.cache, q, tables, sl, qsl, hopper, mql,
                            max(lens), f"{kv_cache_dtype} {seqs}")


def test_prefill_call_key_follows_the_sequence_count_bucket():
    """The bound-prefill key (`attention._call_key`) leaves the token count out and takes the
    sequence count by its power-of-two bucket: 3 and 4 sequences share a key, 5 does not, a
    longer block table does not; tensors the ordinary path rejects (a 1-D block table, 0-d
    lengths) give a key (one no bound call has) instead of an IndexError, so that call reaches
    the ordinary path's one-line error."""
    from kvplan.runtime.attention import _call_key, seq_bucket

    def key(tokens, seqs, pages=8, bt=None, sl=None):
        q = torch.zeros(tokens, 8, 64)
        bt = torch.zeros(seqs, pages, dtype=torch.int32) if bt is None else bt
        sl = torch.zeros(seqs, dtype=torch.int32) if sl is None else sl
        qsl = torch.zeros(seqs + 1, dtype=torch.int32)
        return _call_key(q, q, bt, sl, 4096, None, None, 0, qsl, 512)

    assert [seq_bucket(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [1, 2, 4, 4, 8, 8, 16]
    assert key(100, 3) == key(700, 4) != key(100, 5)
    assert key(100, 4) != key(100, 4, pages=16)
    odd = {key(10, 4, bt=torch.zeros(8, dtype=torch.int32)),
           key(10, 4, sl=torch.tensor(5, dtype=torch.int32))}
    assert key(10, 4) not in odd and len(odd) == 2


def test_bound_entries_per_cache_stay_bounded(monkeypatch):
    """A prefill (or write) signature is recorded for bound launches only when it comes back
    (first sight is noted, nothing recorded), and a cache keeps at most `bound.MAX_ENTRIES`
    entries, the oldest dropped first, so a serving loop whose shapes change every step neither
    records every call nor grows the cache's memo without bound."""
    from kvplan.runtime import attention as A
    from kvplan.runtime import bound
    cache = allocate_kv_cache(LayerLayout.simple("bfloat16", 2, 64), 4, 16, "cpu")
    monkeypatch.setattr(bound, "MAX_ENTRIES", 4)
    calls = A._bound_calls(cache)
    assert bound.first_sight(calls, ("k", 1)) and not bound.first_sight(calls, ("k", 1))
    bound.remember(calls, ("k", 1), False)
    assert not bound.first_sight(calls, ("k", 1))  # bound (or refused): not new either
    for i in range(2, 8):
        assert bound.first_sight(calls, ("k", i))
    assert len(calls) == 4 and ("k", 1) not in calls and (("k", 7), "seen") in calls
    assert bound.first_sight(calls, ("k", 1))  # dropped with the oldest: new again
    # a recording with torch work of its own is tried again once, then refused for good
    rec = bound.Recording()
    rec.torch_ops.append("aten::arange")
    bound.keep(calls, ("r",), rec, (), ())
    assert ("r",) not in calls
    bound.keep(calls, ("r",), rec, (), ())
    assert calls[("r",)] is False
    # a recording over a misaligned input stores nothing: a later, aligned call is recorded
    odd = torch.zeros(9)[1:]
    bound.keep(calls, ("m",), bound.Recording(), (odd,), ())
    assert ("m",) not in calls and (("m",), "tries") not in calls


def test_launch_cache_specializes_arguments_like_triton():
    """`launch_cached` keys runtime arguments by what Triton's own specialization depends on:
    two integers (or booleans, None, floats) share a key only where Triton compiles them the
    same way (the constant 1; i32, i64 or u64; divisible by 16 or not), so a cached launch never
    runs a kernel compiled for a different specialization, and new sizes do not add entries."""
    native = pytest.importorskip("triton._C.libtriton").native_specialize_impl
    from triton.backends.compiler import BaseBackend

    from kvplan.runtime._common import arg_spec

    gen = torch.Generator().manual_seed(5)
    values = [0, 1, 2, 15, 16, 17, 31, 32, -1, -16, -17, 2**31 - 16, 2**31 - 1, 2**31, 2**31 + 16,
              2**32 + 3, 2**63 - 16, 2**63 - 1, 2**63, 2**63 + 16, 2**64 - 1, -(2**31),
              -(2**31) - 1, -(2**31) - 16, -(2**63), True, False, None, 0.0, 1.0, 2.5]
    values += torch.randint(-(2**40), 2**40, (300,), generator=gen).tolist()
    values += (torch.randint(0, 2**20, (100,), generator=gen) * 16).tolist()
    by_spec: dict = {}
    for v in values:
        by_spec.setdefault(arg_spec(v), set()).add(native(BaseBackend, v, False, True, True))
    assert all(len(triton_specs) == 1 for triton_specs in by_spec.values()), by_spec
    # and no coarser than needed: one key per distinct Triton specialization of these values
    assert len(by_spec) == len({native(BaseBackend, v, False, True, True) for v in values})
    # the 16 values of a random range of sizes share at most two keys (divisible by 16 or not)
    assert len({arg_spec(v) for v in range(1000, 1016)}) == 2
    # integers of other types are keyed by value like ints, not lumped together with floats
    import enum

    class Size(enum.IntEnum):
        ONE, SIXTEEN, SEVENTEEN = 1, 16, 17

    assert [arg_spec(s) for s in Size] == [arg_spec(1), arg_spec(16), arg_spec(17)]
    assert arg_spec(Size.SEVENTEEN) != arg_spec(2.5)


@pytest.mark.gpu
def test_cached_launch_entries_stay_bounded_over_new_sizes(cuda_device):
    """Prefill calls over new prompt lengths and batch sizes pass new integer arguments (query
    blocks, sequences) every time: the launch cache gains an entry per specialization, not per
    value, and every call still matches the reference."""
    from kvplan.runtime import _common, prefill
    gen = torch.Generator(device="cuda").manual_seed(12)
    for dtype in ("bfloat16", "int8_per_token_head"):
        layout = LayerLayout.simple(dtype, 8, 128)
        counts = []
        for q_lens in ([300], [300, 77], [451, 200, 99], [700, 5], [900, 333, 17], [1200, 40]):
            out, ref = _prefill(layout, [q + 300 for q in q_lens], q_lens, 16, 32, "cuda", gen)
            _check(out, ref, layout.quant_mode, f"{dtype} {q_lens}")
            counts.append(sum(1 for k in _common._LAUNCHERS
                              if k[0] in (prefill._prefill_kernel, prefill._dequant_pages_kernel)))
        # six calls, eleven distinct integer values of the query-block and sequence counts;
        # the specializations they fall into: not one entry per call
        assert counts[-1] - counts[0] <= 3, counts
