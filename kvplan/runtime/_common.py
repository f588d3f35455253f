"""Helpers shared by the write and attention kernels (Triton device functions + host glue).

Interpreter note: under ``TRITON_INTERPRET=1`` (CPU CI) Triton 3.x's fp32->fp8 conversion
drops the carry when rounding overflows the mantissa (127.0 -> e4m3 64.0 instead of 128.0)
and fp32->bf16 truncates instead of rounding to nearest even. FP8 encoding therefore goes
through :func:`fp8_encode_soft` (integer round-to-nearest-even on the fp32 bits) when
interpreting; on a GPU the hardware ``cvt.rn`` path is used. Decoding fp8 bytes is exact in
both. All fp8 data is stored as uint8 and bit-cast, so no fp8 torch tensors cross the
interpreter boundary.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache, lru_cache

import torch
import triton
import triton.language as tl

from kvplan.runtime.bound import PerSeq, note_launch, note_unrecorded
from kvplan.runtime.cache import PagedKVCache

# KV_MODE constexpr values (same numbering as vLLM's KVQuantMode).
KV_MODE_NONE = 0
KV_MODE_FP8_PER_TENSOR = 1
KV_MODE_INT8_PTH = 2
KV_MODE_FP8_PTH = 3
KV_MODE_INT4_PTH = 4
KV_MODES = {
    "none": KV_MODE_NONE, "fp8_per_tensor": KV_MODE_FP8_PER_TENSOR,
    "int8_per_token_head": KV_MODE_INT8_PTH, "fp8_per_token_head": KV_MODE_FP8_PTH,
    "int4_per_token_head": KV_MODE_INT4_PTH,
}
FP8_MAX = {"e4m3fn": 448.0, "e5m2": 57344.0}


# Triton releases the Gluon kernels (attention_gluon, write_gluon) were compiled and tested with
# on a GPU. Gluon is experimental and its API moves between releases (triton 3.9 dropped the
# shared-memory `_reinterpret` the decode kernel's padded views use), so on other releases the
# defaults keep to the Triton kernels; `kernel="gluon"` still asks for them explicitly.
GLUON_VALIDATED = ((3, 6),)


def gluon_validated(version: str | None = None) -> bool:
    """Whether the Gluon kernels are a default on this Triton (see ``GLUON_VALIDATED``)."""
    try:
        major, minor = (int(x) for x in (version or triton.__version__).split(".")[:2])
    except ValueError:
        return False
    return (major, minor) in GLUON_VALIDATED


def interpreting() -> bool:
    """True when kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@lru_cache(maxsize=8)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def num_sms(device: torch.device) -> int:
    """Multiprocessors of the device (4 on CPU, so heuristics still split under the interpreter)."""
    if device.type == "cuda":
        return _sm_count(device.index if device.index is not None else torch.cuda.current_device())
    return 4


@triton.jit
def fp8_encode_soft(x, E5M2: tl.constexpr):
    """fp32 -> fp8 bits (uint8), round to nearest even; ``x`` must already be clamped finite."""
    bits = x.to(tl.uint32, bitcast=True)
    sign = (bits >> 31) & 1
    a = tl.abs(x)
    abits = a.to(tl.uint32, bitcast=True)
    if E5M2:
        rounded = (abits + 0xFFFFF + ((abits >> 21) & 1)) >> 21
        normal = rounded - 448  # (127 - 15) << 2
        t = a * 65536.0  # subnormal step 2^-16
        sub = ((t + 8388608.0) - 8388608.0).to(tl.uint32)
        code = tl.where(a < 6.103515625e-05, sub, normal)
    else:
        rounded = (abits + 0x7FFFF + ((abits >> 20) & 1)) >> 20
        normal = rounded - 960  # (127 - 7) << 3
        t = a * 512.0  # subnormal step 2^-9
        sub = ((t + 8388608.0) - 8388608.0).to(tl.uint32)
        code = tl.where(a < 0.015625, sub, normal)
    return (code | (sign << 7)).to(tl.uint8)


@triton.jit
def fp8_encode(x, E5M2: tl.constexpr, SOFT: tl.constexpr):
    """fp32 (clamped) -> fp8 bits as uint8: hardware cvt.rn on GPU, integer RNE when interpreting."""
    if SOFT:
        return fp8_encode_soft(x, E5M2)
    else:
        if E5M2:
            return x.to(tl.float8e5).to(tl.uint8, bitcast=True)
        else:
            return x.to(tl.float8e4nv).to(tl.uint8, bitcast=True)


@triton.jit
def fp8_decode(b, E5M2: tl.constexpr):
    """fp8 bits (uint8) -> fp8 tensor (convert with ``.to`` afterwards; exact into bf16/fp16)."""
    if E5M2:
        return b.to(tl.float8e5, bitcast=True)
    else:
        return b.to(tl.float8e4nv, bitcast=True)


@triton.jit
def hadamard_rows(x, ROWS: tl.constexpr, D: tl.constexpr):
    """``x`` [ROWS, D] (D a power of two up to 1024) times the D x D Sylvester-Hadamard matrix
    with +-1 entries (times ``D ** -0.5``: `cache.hadamard`'s orthonormal one): the fast
    Walsh-Hadamard transform, log2(D) butterflies of D adds each in registers instead of a
    D x D product. Each butterfly pairs the top index bit (``a``: bit 0, ``b``: bit 1 ->
    ``a + b``, ``a - b``) and moves it to the bottom, so after log2(D) of them every bit was
    paired once and the order is back."""
    for i in tl.static_range(10):
        if (1 << i) < D:
            a, b = tl.split(tl.permute(tl.reshape(x, [ROWS, 2, D // 2]), [0, 2, 1]))
            x = tl.reshape(tl.join(a + b, a - b), [ROWS, D])
    return x


# Inline PTX shared by the Triton and Gluon decode kernels: 4 packed 8-bit codes ($2) -> two
# fp16x2 registers ($0 = codes 0-1, $1 = codes 2-3), exact. INT8: flip the sign bits (x + 128 as
# unsigned), splice each byte under 0x64 so the fp16 reads 1024 + (x + 128), subtract 1152 with
# one packed sub.f16x2 per 2 values (integer ALU instead of the quarter-rate I2F). FP8: the
# hardware cvt.rn.f16x2.{e4m3,e5m2}x2 (sm_89+).
I8X4_TO_F16 = tl.constexpr("""{
    .reg .b32 t, m;
    xor.b32 t, $2, 0x80808080;
    mov.b32 m, 0x64806480;
    prmt.b32 $0, t, 0x64646464, 0x4140;
    prmt.b32 $1, t, 0x64646464, 0x4342;
    sub.f16x2 $0, $0, m;
    sub.f16x2 $1, $1, m;
    }""")


# 4 packed INT4 bytes ($4) -> their low nibbles as fp16 ($0 = bytes 0-1, $1 = bytes 2-3) and
# their high nibbles ($2, $3), exact: each pair of bytes is spread to the two 16-bit halves
# (prmt), each nibble is masked and spliced under 0x6400 (lop3 (a & b) | c) so the fp16 reads
# 1024 + n, and one packed sub.f16x2 per 2 values takes the 1024 off.
U4X4_TO_F16 = tl.constexpr("""{
    .reg .b32 t0, t1, m;
    mov.b32 m, 0x64006400;
    prmt.b32 t0, $4, 0, 0x4140;
    prmt.b32 t1, $4, 0, 0x4342;
    lop3.b32 $0, t0, 0x000F000F, m, 0xEA;
    lop3.b32 $1, t1, 0x000F000F, m, 0xEA;
    shr.b32 t0, t0, 4;
    shr.b32 t1, t1, 4;
    lop3.b32 $2, t0, 0x000F000F, m, 0xEA;
    lop3.b32 $3, t1, 0x000F000F, m, 0xEA;
    sub.f16x2 $0, $0, m;
    sub.f16x2 $1, $1, m;
    sub.f16x2 $2, $2, m;
    sub.f16x2 $3, $3, m;
    }""")


# The Gluon INT4 decode kernel's conversions, without any subtraction: each nibble is masked in
# place and spliced under 0x6400, so a low nibble n reads 1024 + n and a high one 1024 + 16 n
# (exact fp16). The kernel folds the 1/16 of the high nibbles into the query (scores) or the
# output rows (P.V) and removes the 1024 once per column, as the INT8 path removes its 1152.
# K: 4 packed bytes ($4) -> (low, high) nibble pairs of bytes 0-3 ($0-$3): one prmt (the byte
# into both halves) and one lop3 per byte.
U4X4_TO_F16_BIASED = tl.constexpr("""{
    .reg .b32 t, m;
    mov.b32 m, 0x64006400;
    prmt.b32 t, $4, 0, 0x0000;
    lop3.b32 $0, t, 0x00F0000F, m, 0xEA;
    prmt.b32 t, $4, 0, 0x1111;
    lop3.b32 $1, t, 0x00F0000F, m, 0xEA;
    prmt.b32 t, $4, 0, 0x2222;
    lop3.b32 $2, t, 0x00F0000F, m, 0xEA;
    prmt.b32 t, $4, 0, 0x3333;
    lop3.b32 $3, t, 0x00F0000F, m, 0xEA;
    }""")

# V: 4 packed bytes of an even key ($8) and of the next key ($9) -> per byte i, its low nibbles
# ($2i: even key, odd key) and its high nibbles ($2i+1) as fp16 pairs, the P.V operand's register
# order (consecutive keys in one register).
U4X4X2_TO_F16_PAIRS = tl.constexpr("""{
    .reg .b32 t, m;
    mov.b32 m, 0x64006400;
    prmt.b32 t, $8, $9, 0x4400;
    lop3.b32 $0, t, 0x000F000F, m, 0xEA;
    lop3.b32 $1, t, 0x00F000F0, m, 0xEA;
    prmt.b32 t, $8, $9, 0x5511;
    lop3.b32 $2, t, 0x000F000F, m, 0xEA;
    lop3.b32 $3, t, 0x00F000F0, m, 0xEA;
    prmt.b32 t, $8, $9, 0x6622;
    lop3.b32 $4, t, 0x000F000F, m, 0xEA;
    lop3.b32 $5, t, 0x00F000F0, m, 0xEA;
    prmt.b32 t, $8, $9, 0x7733;
    lop3.b32 $6, t, 0x000F000F, m, 0xEA;
    lop3.b32 $7, t, 0x00F000F0, m, 0xEA;
    }""")
INT4_F16_BIAS = tl.constexpr(1024.0)


# The same without the subtraction: the fp16 values are x + 1152 (exact). The Gluon kernel
# subtracts the bias once per score column (1152 * sum of q) and once per output column
# (1152 * sum of P) instead of once per cached value.
I8X4_TO_F16_BIASED = tl.constexpr("""{
    .reg .b32 t;
    xor.b32 t, $2, 0x80808080;
    prmt.b32 $0, t, 0x64646464, 0x4140;
    prmt.b32 $1, t, 0x64646464, 0x4342;
    }""")
INT8_F16_BIAS = tl.constexpr(1152.0)

# Two rows' 4 codes ($4 = row a, $5 = row b) -> four fp16x2 registers pairing the rows
# ($0 = (a0, b0), $1 = (a1, b1), $2 = (a2, b2), $3 = (a3, b3)): the operand register order of
# an MMA whose reduction index is the row. One byte interleave per two outputs replaces the
# re-pairing of converted values. INT8 comes out as x + 1152 like I8X4_TO_F16_BIASED.
I8X4X2_TO_F16_PAIRS = tl.constexpr("""{
    .reg .b32 t0, t1;
    prmt.b32 t0, $4, $5, 0x5140;
    prmt.b32 t1, $4, $5, 0x7362;
    xor.b32 t0, t0, 0x80808080;
    xor.b32 t1, t1, 0x80808080;
    prmt.b32 $0, t0, 0x64646464, 0x4140;
    prmt.b32 $1, t0, 0x64646464, 0x4342;
    prmt.b32 $2, t1, 0x64646464, 0x4140;
    prmt.b32 $3, t1, 0x64646464, 0x4342;
    }""")


def _fp8x4x2_to_f16_pairs(fmt: str) -> tl.constexpr:
    return tl.constexpr("""{
    .reg .b32 t0, t1;
    .reg .b16 l0, h0, l1, h1;
    prmt.b32 t0, $4, $5, 0x5140;
    prmt.b32 t1, $4, $5, 0x7362;
    mov.b32 {l0, h0}, t0;
    mov.b32 {l1, h1}, t1;
    cvt.rn.f16x2.%sx2 $0, l0;
    cvt.rn.f16x2.%sx2 $1, h0;
    cvt.rn.f16x2.%sx2 $2, l1;
    cvt.rn.f16x2.%sx2 $3, h1;
    }""" % ((fmt,) * 4))


E4M3X4X2_TO_F16_PAIRS = _fp8x4x2_to_f16_pairs("e4m3")
E5M2X4X2_TO_F16_PAIRS = _fp8x4x2_to_f16_pairs("e5m2")


def _fp8x4_to_f16(fmt: str) -> tl.constexpr:
    return tl.constexpr(f"""{{
    .reg .b16 lo, hi;
    mov.b32 {{lo, hi}}, $2;
    cvt.rn.f16x2.{fmt}x2 $0, lo;
    cvt.rn.f16x2.{fmt}x2 $1, hi;
    }}""")


E4M3X4_TO_F16 = _fp8x4_to_f16("e4m3")
E5M2X4_TO_F16 = _fp8x4_to_f16("e5m2")


@dataclass(frozen=True)
class CacheArgs:
    """Pointers, strides and constexprs that address a cache from a kernel.

    Data element offsets of (block, slot, head): ``block*stride_cb + head*stride_ch +
    slot*STRIDE_S`` plus ``K_OFF``/``V_OFF``; scale (fp32) offsets likewise with
    ``stride_sb``/``stride_sh``/``SCALE_STRIDE_S`` and ``KS_OFF``/``VS_OFF``. The slot stride and
    the offsets are constexprs so Triton can prove the 8-/4-byte alignment of the inline
    per-token-head rows and vectorize loads.
    """

    k: torch.Tensor
    v: torch.Tensor
    s: torch.Tensor
    stride_cb: int
    stride_ch: int
    stride_sb: int
    stride_sh: int
    STRIDE_S: int
    SCALE_STRIDE_S: int
    K_OFF: int
    V_OFF: int
    KS_OFF: int
    VS_OFF: int
    KV_MODE: int
    FP8_E5M2: bool
    DATA_HEAD: int  # data elements per (token, head): head_size, or head_size // 2 for INT4


def cache_args(cache: PagedKVCache) -> CacheArgs:
    """The kernels' view of ``cache`` (computed once per cache and storage tensor: views and
    strides cost host time on every eager call otherwise)."""
    memo = cache.__dict__.get("_kernel_args")
    if memo is not None and memo[0] is cache.data and memo[1] is cache.layout:
        return memo[2]
    args = _cache_args(cache)
    cache.__dict__["_kernel_args"] = (cache.data, cache.layout, args)
    return args


def _cache_args(cache: PagedKVCache) -> CacheArgs:
    lay = cache.layout
    mode = KV_MODES[lay.quant_mode]
    e5m2 = lay.fp8_format == "e5m2"
    data = cache.data
    if not lay.is_per_token_head:
        k, v = data[0], data[1]
        sb, ss, sh, _ = k.stride()
        return CacheArgs(k=k, v=v, s=k, stride_cb=sb, stride_ch=sh, stride_sb=0, stride_sh=0,
                         STRIDE_S=ss, SCALE_STRIDE_S=0, K_OFF=0, V_OFF=0, KS_OFF=0, VS_OFF=0,
                         KV_MODE=mode, FP8_E5M2=e5m2, DATA_HEAD=lay.head_size)
    db = lay.data_bytes_per_head
    row = lay.slot_bytes
    buf = data.view(torch.int8) if mode == KV_MODE_INT8_PTH else data.view(torch.uint8)
    f32 = data.view(torch.uint8).view(torch.float32)
    nb_s, h_s, _, _ = buf.stride()
    return CacheArgs(k=buf, v=buf, s=f32, stride_cb=nb_s, stride_ch=h_s, stride_sb=nb_s // 4,
                     stride_sh=h_s // 4, STRIDE_S=row, SCALE_STRIDE_S=row // 4, K_OFF=0,
                     V_OFF=db + 4, KS_OFF=db // 4, VS_OFF=(2 * db + 4) // 4, KV_MODE=mode,
                     FP8_E5M2=e5m2, DATA_HEAD=db)


def cache_constexprs(a: CacheArgs) -> dict:
    return dict(STRIDE_S=a.STRIDE_S, SCALE_STRIDE_S=a.SCALE_STRIDE_S, K_OFF=a.K_OFF,
                V_OFF=a.V_OFF, KS_OFF=a.KS_OFF, VS_OFF=a.VS_OFF, KV_MODE=a.KV_MODE,
                FP8_E5M2=a.FP8_E5M2)


# ---------------------------------------------------------------------------------------------
# Cached launches: an eager call is a dict lookup and the compiled kernel's C launcher.
#
# ``JITFunction.__getitem__(grid)(...)`` binds every argument on each call and builds a cache key
# from all of them, constexprs included; the Gluon kernels pass about 20 layout objects as
# constexprs, whose hashing and printing cost 0.1-0.3 ms of host time per call on the benchmark
# host. `launch_cached` compiles (or fetches) the kernel once per ``key`` (the caller's tuple that
# fixes every constexpr and launch option) and per specialization of the runtime arguments, the
# same one Triton's own launch computes (`arg_spec`), then launches it through the compiled
# kernel's launcher. Under the interpreter, or with Triton launch hooks set, it takes the
# ordinary path.
_LAUNCHERS: dict[tuple, tuple] = {}

# Integer specialization codes (`arg_spec`): Triton compiles an int argument as the constant 1, or
# as i32 / i64 / u64 by its range, marked divisible by 16 or not.
_I32_MIN, _I32_MAX, _I64_MIN, _I64_MAX = -(1 << 31), (1 << 31) - 1, -(1 << 63), (1 << 63) - 1
_SPEC_ONE, _SPEC_NONE, _SPEC_BOOL = 1, "none", "bool"


def arg_spec(a):
    """What Triton's specialization of a runtime argument depends on (triton 3.6's
    ``native_specialize_impl`` with value and alignment specialization on), as a small hashable:
    tensors by dtype and whether their address is 16-byte aligned; integers by ``== 1`` (compiled
    as a constant), range (i32 / i64 / u64) and divisibility by 16; booleans and None by kind;
    floats not at all (fp32). Two arguments with equal specs compile to the same kernel, so the
    launch cache stays bounded however many distinct sizes, strides and lengths a caller passes
    (each new value used to add an entry and take Triton's slow path once)."""
    if isinstance(a, torch.Tensor):
        return (a.dtype, not a.data_ptr() & 15)
    t = type(a)
    if t is int:
        return _int_spec(a)
    if t is bool:
        return _SPEC_BOOL
    if a is None:
        return _SPEC_NONE
    index = getattr(a, "__index__", None)  # other integers (IntEnum, numpy): by their value
    if index is not None:
        return _int_spec(index())
    return None


def _int_spec(a: int) -> int:
    """`arg_spec` of an int: 1, or 2 + 2 * range class (i32, i64, u64) + (divisible by 16)."""
    if a == 1:
        return _SPEC_ONE
    if _I32_MIN <= a <= _I32_MAX:
        rng = 0
    elif _I64_MIN <= a <= _I64_MAX:
        rng = 1
    else:
        rng = 2
    return 2 + 2 * rng + (not a & 15)


def compiled_kernels(fn) -> list:
    """The compiled kernels `launch_cached` has launched for ``fn`` (their ``asm`` holds the
    PTX/SASS: `bench/tune_prefill.py` checks for wgmma)."""
    return [entry[4] for entry in _LAUNCHERS.values() if entry[5] is fn]


def launch_cached(fn, grid: tuple, pos: tuple, kw: dict, key: tuple | int | None = None,
                  per_seq: PerSeq | None = None) -> None:
    """Launch ``fn[grid](*pos, **kw)``; ``key`` must determine ``kw`` (constexprs and options)
    completely (a tuple, or `key_id`'s integer for one; None: ``kw``'s items, when they are all
    plain scalars): the first call with a
    key and argument specialization (`arg_spec`) compiles through Triton's own path and records
    the compiled kernel, later ones launch it directly. ``per_seq``: how the launch follows
    the batch's sequence count, for a recording (`kvplan.runtime.bound.PerSeq`)."""
    if key is None:
        key = tuple(kw.items())
    if interpreting():
        note_unrecorded()
        fn[grid](*pos, **kw)
        return
    if _launch_hooked():
        note_unrecorded()
        fn[grid](*pos, **kw)
        return
    dev = _current_device()
    # Tensors reach the launcher as their addresses: Triton's launcher then skips the driver's
    # pointer query it makes per tensor argument (`paged_attention` checks devices itself).
    # The kernel is keyed by ``id(fn)`` (a JITFunction hashes its source-derived cache key).
    tensor = torch.Tensor
    int_spec = _int_spec
    args: list = []
    spec: list = []
    add_arg = args.append
    add_spec = spec.append
    for a in pos:
        if type(a) is int:
            add_arg(a)
            add_spec(int_spec(a))
        elif isinstance(a, tensor):
            ptr = a.data_ptr()
            add_arg(ptr)
            add_spec((a.dtype, not ptr & 15))
        else:
            add_arg(a)
            add_spec(arg_spec(a))
    full = (id(fn), key, dev, tuple(spec))
    entry = _LAUNCHERS.get(full)
    if entry is None:
        fn[grid](*pos, **kw)  # the first launch of a specialization: Triton's own, checked path
        kernel = fn.warmup(*pos, grid=grid, **kw)
        if hasattr(kernel, "result"):
            kernel = kernel.result()
        kernel._init_handles()
        params = fn.params[len(pos):]
        tail = tuple(kw.get(p.name, p.default) for p in params)
        _LAUNCHERS[full] = (kernel.run, kernel.function, kernel.packed_metadata, tail, kernel, fn)
        note_launch(kernel, grid, pos, tail, per_seq)
        return
    run, function, packed, tail = entry[:4]
    note_launch(entry[4], grid, pos, tail, per_seq)
    g1 = grid[1] if len(grid) > 1 else 1
    g2 = grid[2] if len(grid) > 2 else 1
    run(grid[0], g1, g2, _raw_stream(dev), function, packed, None, None, None, *args, *tail)


@cache
def seq_count_arg(fn) -> int:
    """The position of a kernel's ``num_seqs`` parameter among its arguments (the runtime
    arguments a launch passes first, in parameter order): the argument a `PerSeq` rule sets."""
    return list(fn.arg_names).index("num_seqs")


def row_writer(fn, rows_per_program: int, num_kv_heads: int, fixed: tuple, kw: dict,
               key: int):
    """``fire(key, value, slot_mapping)`` for a write kernel whose programs take
    ``rows_per_program`` (token, kv head) rows and whose arguments are the new K/V and their
    strides, the slots, the row count, then ``fixed`` (the cache's): one `launch_cached` call."""
    def fire(k: torch.Tensor, v: torch.Tensor, slot_mapping: torch.Tensor) -> None:
        num_rows = k.shape[0] * num_kv_heads
        launch_cached(fn, (-(-num_rows // rows_per_program),), (
            k, v, k.stride(0), k.stride(1), v.stride(0), v.stride(1), slot_mapping, num_rows,
            *fixed), kw, key)
    return fire


_KEY_IDS: dict[tuple, int] = {}


def key_id(key: tuple) -> int:
    """A small integer standing for ``key`` in `launch_cached` (hashing an int per call instead
    of a tuple of constexprs)."""
    return _KEY_IDS.setdefault(key, len(_KEY_IDS))


def _launch_hooked() -> bool:
    """Whether Triton launch hooks are set (profilers such as proton): launches then take
    Triton's own path, which calls them."""
    runtime = _triton_runtime()
    return _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook)


def _hooked(hook) -> bool:
    """Whether a Triton launch hook is set (Triton 3.6 keeps an always-present ``HookChain``
    whose ``calls`` list is empty when nothing is registered)."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else True


@lru_cache(maxsize=1)
def _triton_runtime():
    from triton import knobs
    return knobs.runtime


def _current_stream(dev: int) -> int:
    """The raw handle of the current CUDA stream (what Triton's own launch passes)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(dev) if raw is not None else torch.cuda.current_stream(dev).cuda_stream


# The fast path's device and stream queries: torch's private bindings where they exist (what
# `torch.cuda.current_device` and Triton's own launch call underneath), else the public API.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or _current_stream
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
