"""The integer inline-PTX conversions of the decode kernels, run by a small PTX interpreter (the
handful of b32 instructions they use), so that what each output register holds is checked on
the CPU, for every byte value, without a GPU. The kernels' relabelling of elements relies on
exactly these register contents (`attention_gluon._k_int4`, `_v_pairs_int4`, `_v_pairs`)."""
from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("triton")

from kvplan.runtime import _common

M32 = 0xFFFFFFFF


def _halves(x: int) -> tuple[float, float]:
    """A b32 register as its two fp16 halves (low, high)."""
    h = np.array([x & 0xFFFF, x >> 16], dtype=np.uint16).view(np.float16)
    return float(h[0]), float(h[1])


def _from_halves(lo: np.float16, hi: np.float16) -> int:
    b = np.array([lo, hi], dtype=np.float16).view(np.uint16)
    return int(b[0]) | int(b[1]) << 16


def run_ptx(asm: str, inputs: dict[str, int]) -> dict[str, int]:
    """Interpret ``asm`` (mov/xor/shr/prmt/lop3 .b32, sub.f16x2) with ``inputs`` ({"$4": x});
    returns every register written."""
    regs = dict(inputs)

    def val(a: str) -> int:
        return regs[a] if (a.startswith("$") or a in regs) else int(a, 0) & M32

    for raw in asm.splitlines():
        line = raw.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, rest = line.split(None, 1)
        args = [a.strip() for a in rest.split(",")]
        d = args[0]
        if op == "mov.b32":
            regs[d] = val(args[1])
        elif op == "xor.b32":
            regs[d] = val(args[1]) ^ val(args[2])
        elif op == "shr.b32":
            regs[d] = val(args[1]) >> val(args[2])
        elif op == "prmt.b32":  # default mode: bytes of a are 0-3, of b 4-7; nibble k picks byte k
            src = val(args[1]) | val(args[2]) << 32
            sel = val(args[3])
            out = 0
            for k in range(4):
                s = sel >> (4 * k) & 0xF
                assert s < 8, "sign-replicating selectors are not interpreted"
                out |= (src >> (8 * s) & 0xFF) << (8 * k)
            regs[d] = out
        elif op == "lop3.b32":  # bit = LUT[(a << 2) | (b << 1) | c]
            a, b, c, lut = (val(x) for x in args[1:5])
            out = 0
            for bit in range(32):
                idx = (a >> bit & 1) << 2 | (b >> bit & 1) << 1 | (c >> bit & 1)
                out |= (lut >> idx & 1) << bit
            regs[d] = out
        elif op == "sub.f16x2":
            x = np.array(_halves(val(args[1])), dtype=np.float16)
            y = np.array(_halves(val(args[2])), dtype=np.float16)
            z = (x - y).astype(np.float16)
            regs[d] = _from_halves(z[0], z[1])
        else:
            raise AssertionError(f"instruction {op} is not interpreted")
    return regs


def _words() -> list[int]:
    """32-bit inputs that put every byte value in every byte position."""
    rng = random.Random(7)
    out = [(v | (v + 1 & 255) << 8 | (v + 2 & 255) << 16 | (v + 3 & 255) << 24) for v in range(256)]
    return out + [rng.getrandbits(32) for _ in range(256)]


def _bytes(x: int) -> list[int]:
    return [x >> (8 * i) & 0xFF for i in range(4)]


def test_interpreter_knows_the_lut_and_selectors():
    """lop3 with LUT 0xEA is (a & b) | c; prmt picks bytes of (a, b) by selector nibbles."""
    r = run_ptx("lop3.b32 $0, $1, $2, $3, 0xEA;", {"$1": 0xF0F0F0F0, "$2": 0xFF00FF00,
                                                   "$3": 0x0000000F})
    assert r["$0"] == (0xF0F0F0F0 & 0xFF00FF00) | 0xF
    r = run_ptx("prmt.b32 $0, $1, $2, 0x7531;", {"$1": 0x33221100, "$2": 0x77665544})
    assert r["$0"] == 0x77553311


def test_u4x4_to_f16_gives_each_pair_of_bytes_nibbles():
    for x in _words():
        r = run_ptx(_common.U4X4_TO_F16.value, {"$4": x})
        b = _bytes(x)
        assert _halves(r["$0"]) == (b[0] & 15, b[1] & 15)
        assert _halves(r["$1"]) == (b[2] & 15, b[3] & 15)
        assert _halves(r["$2"]) == (b[0] >> 4, b[1] >> 4)
        assert _halves(r["$3"]) == (b[2] >> 4, b[3] >> 4)


def test_u4x4_biased_pairs_the_two_nibbles_of_each_byte():
    """The Gluon INT4 kernel's K conversion: register i holds byte i's (1024 + low nibble,
    1024 + 16 x high nibble), the layout `_k_int4` relabels (nibble = fp16 half)."""
    for x in _words():
        r = run_ptx(_common.U4X4_TO_F16_BIASED.value, {"$4": x})
        for i, b in enumerate(_bytes(x)):
            assert _halves(r[f"${i}"]) == (1024 + (b & 15), 1024 + 16 * (b >> 4))


def test_u4x4x2_pairs_consecutive_keys_per_nibble():
    """The Gluon INT4 kernel's V conversion: register 2i holds byte i's low nibbles of the even
    and the odd key, register 2i + 1 their high nibbles (x 16), all + 1024."""
    words = _words()
    for x, y in zip(words, reversed(words), strict=True):
        r = run_ptx(_common.U4X4X2_TO_F16_PAIRS.value, {"$8": x, "$9": y})
        for i, (a, b) in enumerate(zip(_bytes(x), _bytes(y), strict=True)):
            assert _halves(r[f"${2 * i}"]) == (1024 + (a & 15), 1024 + (b & 15))
            assert _halves(r[f"${2 * i + 1}"]) == (1024 + 16 * (a >> 4), 1024 + 16 * (b >> 4))


def _s8(b: int) -> int:
    return b - 256 if b >= 128 else b


def test_int8_conversions_are_exact_with_and_without_the_bias():
    words = _words()
    for x, y in zip(words, reversed(words), strict=True):
        b = [_s8(v) for v in _bytes(x)]
        r = run_ptx(_common.I8X4_TO_F16.value, {"$2": x})
        assert _halves(r["$0"]) == (b[0], b[1]) and _halves(r["$1"]) == (b[2], b[3])
        r = run_ptx(_common.I8X4_TO_F16_BIASED.value, {"$2": x})
        bias = _common.INT8_F16_BIAS.value
        assert _halves(r["$0"]) == (b[0] + bias, b[1] + bias)
        assert _halves(r["$1"]) == (b[2] + bias, b[3] + bias)
        c = [_s8(v) for v in _bytes(y)]
        r = run_ptx(_common.I8X4X2_TO_F16_PAIRS.value, {"$4": x, "$5": y})
        for i in range(4):
            assert _halves(r[f"${i}"]) == (b[i] + bias, c[i] + bias)
