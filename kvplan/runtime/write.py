"""Quantize-on-write: scatter new K/V tokens into a paged cache through a slot mapping.

One Triton kernel serves every layout (and is the CPU interpreter's); each program handles
``ROWS`` (token, kv-head) rows so loads and stores are wide and a chunk of 8K tokens is a few
thousand programs (bandwidth bound), while a decode step of a few tokens is a handful of
programs (launch bound). On a GPU, INT8/FP8 per-token-head writes default to the Gluon kernel
of `kvplan.runtime.write_gluon` (same bytes, faster: explicit row layout, no float->int
convert), and INT4 per-token-head writes to its INT4 kernel (each row over 2-8 lanes, the
Hadamard butterflies in registers and lane exchanges).

Arithmetic (what the torch reference reproduces bit for bit): per-token-head
``scale = max(amax / qmax, 1e-6)`` (IEEE division), ``q = x * (1 / scale)`` (one IEEE
reciprocal per row, as vLLM does, instead of a per-element division), INT8 rounds half away
from zero (codes stay in [-127, 127]), FP8 clamps to the finite range and rounds to nearest
even. Multiply and add are never fused (``enable_fp_fusion=False``).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl

from kvplan.runtime import bound as bl
from kvplan.runtime._common import (
    FP8_MAX,
    KV_MODE_INT4_PTH,
    _current_device,
    _launch_hooked,
    _raw_stream,
    cache_args,
    cache_constexprs,
    fp8_encode,
    gluon_validated,
    hadamard_rows,
    interpreting,
    key_id,
    row_writer,
)
from kvplan.runtime.cache import PagedKVCache, hadamard_scale


@triton.jit
def _round_half_away(x):
    """Round half away from zero: add +-0.5, truncate (one add + the float->int convert)."""
    return tl.where(x >= 0, x + 0.5, x - 0.5).to(tl.int32).to(tl.float32)


@triton.jit
def _quantize_store(x, dst_ptr, dst_off, mask2, scale_ptr, scale_off, valid, static_scale,
                    KV_MODE: tl.constexpr, FP8_E5M2: tl.constexpr, FP8_MAX: tl.constexpr,
                    SOFT_FP8: tl.constexpr, HEAD_SIZE: tl.constexpr):
    """Quantize one [ROWS, HEAD_PAD] fp32 tile and store it (and its per-row scale)."""
    if KV_MODE == 0:
        tl.store(dst_ptr + dst_off, x.to(dst_ptr.dtype.element_ty), mask=mask2)
    elif KV_MODE == 1:
        inv = tl.math.div_rn(1.0, static_scale)
        y = tl.minimum(tl.maximum(x * inv, -FP8_MAX), FP8_MAX)
        tl.store(dst_ptr + dst_off, fp8_encode(y, FP8_E5M2, SOFT_FP8), mask=mask2)
    elif KV_MODE == 2:
        amax = tl.max(tl.abs(x), axis=1)
        scale = tl.maximum(tl.math.div_rn(amax, 127.0), 1e-6)
        y = x * tl.math.div_rn(1.0, scale)[:, None]
        # round half away from zero: add copysign(0.5, y) (one bit-select, not a compare and a
        # select), then the truncating convert. No clamp: with scale >= amax / 127 (rounded),
        # |y| <= 127 * (1 + 2^-22) for every finite row, so y + 0.5 truncates into [-127, 127].
        # (13% fewer instructions, 1% faster on an H100; on a GPU the Gluon kernel, which also
        # avoids the quarter-rate float->int convert, is the default: bench/NOTES-runtime.md)
        half = ((y.to(tl.int32, bitcast=True) & -2147483648) | 0x3F000000).to(tl.float32,
                                                                                 bitcast=True)
        tl.store(dst_ptr + dst_off, (y + half).to(tl.int8), mask=mask2)
        tl.store(scale_ptr + scale_off, scale, mask=valid)
    elif KV_MODE == 3:
        amax = tl.max(tl.abs(x), axis=1)
        scale = tl.maximum(tl.math.div_rn(amax, FP8_MAX), 1e-6)
        y = x * tl.math.div_rn(1.0, scale)[:, None]
        if SOFT_FP8:  # the integer encoder needs finite, in-range input; cvt.rn.satfinite clamps
            y = tl.minimum(tl.maximum(y, -FP8_MAX), FP8_MAX)
        tl.store(dst_ptr + dst_off, fp8_encode(y, FP8_E5M2, SOFT_FP8), mask=mask2)
        tl.store(scale_ptr + scale_off, scale, mask=valid)


@triton.jit
def _int4_store(x_even, x_odd, dst_ptr, dst_off, mask2, scale_ptr, scale_off, valid):
    """Asymmetric 4-bit (rotated) rows: even elements in the low nibble, zp in the scale's low bits."""
    big: tl.constexpr = 3.0e38
    mn = tl.minimum(tl.min(tl.where(mask2, x_even, big), axis=1),
                    tl.min(tl.where(mask2, x_odd, big), axis=1))
    mx = tl.maximum(tl.max(tl.where(mask2, x_even, -big), axis=1),
                    tl.max(tl.where(mask2, x_odd, -big), axis=1))
    mn = tl.where(valid, mn, 0.0)  # padding rows: keep the arithmetic finite
    mx = tl.where(valid, mx, 0.0)
    scale = tl.maximum(tl.math.div_rn(mx - mn, 15.0), 1e-6)
    inv = tl.math.div_rn(1.0, scale)
    zp = tl.minimum(tl.maximum(_round_half_away(-mn * inv), 0.0), 15.0)
    q_e = tl.minimum(tl.maximum(_round_half_away(x_even * inv[:, None] + zp[:, None]), 0.0), 15.0)
    q_o = tl.minimum(tl.maximum(_round_half_away(x_odd * inv[:, None] + zp[:, None]), 0.0), 15.0)
    packed = q_e.to(tl.int32) | (q_o.to(tl.int32) << 4)
    tl.store(dst_ptr + dst_off, packed.to(tl.uint8), mask=mask2)
    bits = (scale.to(tl.int32, bitcast=True) & -16) | zp.to(tl.int32)
    tl.store(scale_ptr + scale_off, bits.to(tl.float32, bitcast=True), mask=valid)


@triton.jit
def _write_kv_kernel(
    key_ptr, value_ptr, stride_kt, stride_kh, stride_vt, stride_vh,
    slot_ptr, num_rows,
    ck_ptr, cv_ptr, cs_ptr, stride_cb, stride_ch, stride_sb, stride_sh,
    k_scale, v_scale, rot_scale,
    NUM_KV_HEADS: tl.constexpr, HEAD_SIZE: tl.constexpr, DATA_PAD: tl.constexpr,
    DATA_HEAD: tl.constexpr, BLOCK_SIZE: tl.constexpr, ROWS: tl.constexpr,
    STRIDE_S: tl.constexpr, SCALE_STRIDE_S: tl.constexpr, K_OFF: tl.constexpr,
    V_OFF: tl.constexpr, KS_OFF: tl.constexpr, VS_OFF: tl.constexpr, KV_MODE: tl.constexpr,
    FP8_E5M2: tl.constexpr, FP8_MAX: tl.constexpr, SOFT_FP8: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    in_range = rows < num_rows
    tok = (rows // NUM_KV_HEADS).to(tl.int64)
    head = rows % NUM_KV_HEADS
    slot = tl.load(slot_ptr + tok, mask=in_range, other=-1).to(tl.int64)
    valid = in_range & (slot >= 0)
    blk = slot // BLOCK_SIZE
    off = slot % BLOCK_SIZE
    dst = blk * stride_cb + head * stride_ch + off * STRIDE_S
    sdst = blk * stride_sb + head * stride_sh + off * SCALE_STRIDE_S
    d = tl.arange(0, DATA_PAD)
    mask2 = valid[:, None] & (d < DATA_HEAD)[None, :]
    k_src = tok * stride_kt + head * stride_kh
    v_src = tok * stride_vt + head * stride_vh
    if KV_MODE == 4:
        # whole rows (a power-of-two head), rotated in registers (`hadamard_rows`, the
        # reference's `hadamard_rotate` step for step), then split into even and odd elements
        dr = tl.arange(0, HEAD_SIZE)
        k = tl.load(key_ptr + k_src[:, None] + dr[None, :], mask=valid[:, None], other=0.0)
        k = hadamard_rows(k.to(tl.float32), ROWS, HEAD_SIZE) * rot_scale
        k_e, k_o = tl.split(tl.reshape(k, [ROWS, HEAD_SIZE // 2, 2]))
        _int4_store(k_e, k_o, ck_ptr, K_OFF + dst[:, None] + d[None, :], mask2,
                    cs_ptr, KS_OFF + sdst, valid)
        v = tl.load(value_ptr + v_src[:, None] + dr[None, :], mask=valid[:, None], other=0.0)
        v = hadamard_rows(v.to(tl.float32), ROWS, HEAD_SIZE) * rot_scale
        v_e, v_o = tl.split(tl.reshape(v, [ROWS, HEAD_SIZE // 2, 2]))
        _int4_store(v_e, v_o, cv_ptr, V_OFF + dst[:, None] + d[None, :], mask2,
                    cs_ptr, VS_OFF + sdst, valid)
    else:
        k = tl.load(key_ptr + k_src[:, None] + d[None, :], mask=mask2, other=0.0).to(tl.float32)
        v = tl.load(value_ptr + v_src[:, None] + d[None, :], mask=mask2, other=0.0).to(tl.float32)
        _quantize_store(k, ck_ptr, K_OFF + dst[:, None] + d[None, :], mask2, cs_ptr, KS_OFF + sdst,
                        valid, k_scale, KV_MODE, FP8_E5M2, FP8_MAX, SOFT_FP8, HEAD_SIZE)
        _quantize_store(v, cv_ptr, V_OFF + dst[:, None] + d[None, :], mask2, cs_ptr, VS_OFF + sdst,
                        valid, v_scale, KV_MODE, FP8_E5M2, FP8_MAX, SOFT_FP8, HEAD_SIZE)


def _default_launch(data_pad: int, per_token_head: bool) -> tuple[int, int]:
    """Rows per program and warps, measured on an H100 (bench/bench_write.py sweeps): one-warp
    programs of ~512 elements for per-token-head modes (each row's max and scale stay inside one
    warp, and many small programs hide the reduction's latency), ~2K elements and 4 warps
    otherwise."""
    if per_token_head:
        return max(1, min(64, 512 // data_pad)), 1
    return max(1, min(64, 2048 // data_pad)), 4


def _use_gluon(kernel: str | None, args, key: torch.Tensor, head: int,
               launch_given: bool) -> bool:
    """Which write kernel runs: ``kernel`` decides when given ("triton" or "gluon"); by default
    INT8/FP8/INT4 per-token-head writes (heads 64, 128 and 256) on a CUDA GPU run the Gluon
    kernels (`write_gluon`), the rest (everything under the interpreter, and calls that set
    the Triton kernel's launch) the Triton kernel."""
    if kernel not in (None, "triton", "gluon"):
        raise ValueError(f"unknown write kernel {kernel!r}: use 'triton' or 'gluon'")
    if kernel == "triton" or (kernel is None and (launch_given or not gluon_validated())):
        return False
    usable = key.device.type == "cuda" and not interpreting()
    if usable:
        try:
            from kvplan.runtime import write_gluon
        except ImportError:  # a Triton without Gluon
            usable = False
        else:
            usable = write_gluon.supported(args.KV_MODE, head)
    if kernel == "gluon" and not usable:
        raise ValueError("the gluon write kernel takes INT8/FP8/INT4 per-token-head caches with "
                         "heads of 64, 128 or 256, on a CUDA GPU (not the interpreter); use "
                         "kernel='triton' or leave kernel unset")
    return usable


def write_kv_cache(cache: PagedKVCache, key: torch.Tensor, value: torch.Tensor,
                   slot_mapping: torch.Tensor, *, rows_per_program: int | None = None,
                   num_warps: int | None = None, kernel: str | None = None,
                   bound: bool | None = None) -> None:
    """Write ``key``/``value`` [num_tokens, num_kv_heads, head_size] into ``cache``.

    ``slot_mapping[t]`` is the flat slot ``block * block_size + offset`` of token t; a
    negative slot marks a padding token that is skipped. Per-token-head modes compute and store
    one fp32 scale per (token, kv head) and side; FP8 per-tensor uses ``cache.k_scale`` /
    ``cache.v_scale``. INT4 rotates each head by a Hadamard matrix first (see `cache.hadamard`;
    in the kernel, as a fast Walsh-Hadamard transform).
    ``kernel``: "triton" or "gluon" (per-token-head caches on a GPU: the default there unless
    ``rows_per_program``/``num_warps`` are given without it, which set the Triton launch).
    ``bound`` (CUDA): a call signature (shapes, strides, dtypes and devices of the three
    tensors, the options) that comes back is recorded and later calls with it launch through
    the driver (`kvplan.runtime.bound`); False: always the ordinary path.
    """
    memo = _write_memo(cache)
    if memo[4]:  # bound calls over this cache: a key, three addresses, one driver launch
        dev_index = _current_device()
        call = memo[4].get(_write_key(key, value, slot_mapping, rows_per_program, num_warps,
                                      kernel, bound, dev_index))
        if call and not _launch_hooked() and \
                call((key, value, slot_mapping), _raw_stream(dev_index)):
            return
    lay = cache.layout
    if key.dim() != 3 or key.shape != value.shape:
        raise ValueError(f"key/value must both be [num_tokens, num_kv_heads, head_size], got "
                         f"{tuple(key.shape)} and {tuple(value.shape)}")
    num_tokens, h, d = key.shape
    if h != lay.num_kv_heads or d != lay.head_size:
        raise ValueError(f"key has {h} heads x {d}, cache layout has {lay.num_kv_heads} x "
                         f"{lay.head_size}")
    if slot_mapping.shape != (num_tokens,):
        raise ValueError(f"slot_mapping must be [{num_tokens}], got {tuple(slot_mapping.shape)}")
    dev = cache.data.device  # the launch passes raw addresses: one device, checked here
    if key.device != dev or value.device != dev or slot_mapping.device != dev:
        raise ValueError(f"key, value, slot_mapping and the cache must be on one device, got "
                         f"{key.device}, {value.device}, {slot_mapping.device}, {dev}")
    if rows_per_program is not None and (rows_per_program < 1 or rows_per_program & (rows_per_program - 1)):
        raise ValueError(f"rows_per_program must be a power of two, got {rows_per_program}")
    if num_tokens == 0:
        return
    if key.stride(-1) != 1:
        key = key.contiguous()
    if value.stride(-1) != 1:
        value = value.contiguous()
    plans = memo[3]
    pkey = (key.dtype, value.dtype, dev, rows_per_program, num_warps, kernel, interpreting())
    fire = plans.get(pkey)
    if fire is None:
        fire = plans[pkey] = _plan_write(cache, key, rows_per_program, num_warps, kernel)
    inputs = (key, value, slot_mapping)
    if dev.type != "cuda" or bound is False or interpreting() or bl.aliased(inputs):
        fire(key, value, slot_mapping)
        return
    bind_key = _write_key(key, value, slot_mapping, rows_per_program, num_warps, kernel, bound,
                          _current_device())
    if bind_key in memo[4] or bl.first_sight(memo[4], bind_key):
        # bound already (this call could not take it) or refused; or seen for the first time
        fire(key, value, slot_mapping)
        return
    with bl.recording() as rec:  # it came back: record, then bind
        fire(key, value, slot_mapping)
    args = cache_args(cache)
    bl.keep(memo[4], bind_key, rec, inputs, (args.k, args.v, args.s))


def _write_key(key, value, slot_mapping, rows_per_program, num_warps, kernel, bound,
               device: int) -> tuple:
    """What a write call's launch depends on besides the cache and the tensors' addresses:
    the shapes, strides, dtypes and devices `write_kv_cache` validates (the token count sets
    the grid), the options and the current device."""
    return (key.shape, key.stride(), key.dtype, key.device, value.shape, value.stride(),
            value.dtype, value.device, slot_mapping.shape, slot_mapping.stride(),
            slot_mapping.dtype, slot_mapping.device, rows_per_program, num_warps, kernel, bound,
            device)


def _write_memo(cache: PagedKVCache) -> tuple:
    """(storage, layout, scales, plans, bound calls) of the cache: its write launches
    (`_plan_write`, keyed by the call's dtypes, device and options) and bound calls
    (`_write_key`); started afresh when the cache's storage, layout or scales change (a launch
    holds the storage's addresses and was planned for the rest)."""
    memo = cache.__dict__.get("_write_plans")
    state = (cache.block_size, cache.k_scale, cache.v_scale)
    if memo is None or memo[0] is not cache.data or memo[1] is not cache.layout or memo[2] != state:
        memo = cache.__dict__["_write_plans"] = (cache.data, cache.layout, state, {}, {})
    return memo


def _plan_write(cache: PagedKVCache, key: torch.Tensor, rows_per_program: int | None,
                num_warps: int | None, kernel: str | None) -> Callable:
    """Choose the write kernel and its launch once per cache and call signature; returns
    ``fire(key, value, slot_mapping)``: the positional arguments and one launch through the
    compiled-kernel cache, not Triton's argument binding (H200 host, round 20)."""
    lay = cache.layout
    args = cache_args(cache)
    h, d = lay.num_kv_heads, lay.head_size
    launch_given = rows_per_program is not None or num_warps is not None
    if _use_gluon(kernel, args, key, d, launch_given):
        from kvplan.runtime import write_gluon
        if args.KV_MODE != KV_MODE_INT4_PTH:
            return write_gluon.plan(args, h, d, cache.block_size, lay.fp8_format,
                                    rows_per_program=rows_per_program or 16,
                                    num_warps=num_warps or 4)
        return write_gluon.plan_int4(args, h, d, cache.block_size, hadamard_scale(d),
                                     rows_per_program=rows_per_program,
                                     num_warps=num_warps or 1)
    return _plan_triton_write(cache, rows_per_program, num_warps)


def _plan_triton_write(cache: PagedKVCache, rows_per_program: int | None,
                       num_warps: int | None) -> Callable:
    """`_plan_write`'s launch of the Triton write kernel (`_write_kv_kernel`)."""
    lay = cache.layout
    args = cache_args(cache)
    h, d = lay.num_kv_heads, lay.head_size
    data_head = args.DATA_HEAD
    data_pad = 1 << (data_head - 1).bit_length()  # next power of two, without a Triton call
    default_rows, default_warps = _default_launch(data_pad, lay.is_per_token_head)
    rows = rows_per_program or default_rows
    # x * (1/scale) then +-0.5 must round twice like the torch reference: no FMA contraction.
    launch = {} if interpreting() else {"enable_fp_fusion": False}
    kw = dict(NUM_KV_HEADS=h, HEAD_SIZE=d, DATA_PAD=data_pad, DATA_HEAD=data_head,
              BLOCK_SIZE=cache.block_size, ROWS=rows,
              FP8_MAX=FP8_MAX.get(lay.fp8_format or "", 0.0), SOFT_FP8=interpreting(),
              num_warps=num_warps or default_warps, **launch, **cache_constexprs(args))
    launch_key = key_id(("write", *kw.items()))
    fixed = (args.k, args.v, args.s, args.stride_cb, args.stride_ch, args.stride_sb,
             args.stride_sh, float(cache.k_scale), float(cache.v_scale), hadamard_scale(d))
    return row_writer(_write_kv_kernel, rows, h, fixed, kw, launch_key)
