"""The one tolerance table of the runtime, per quant mode.

Pure Python (no torch) so `kvplan validate` and the tests read the same numbers. Errors are
relative L2 norms over a whole output tensor, ``||out - ref|| / ||ref||``, except the
write round-trip bounds which are per element.

Three different questions, three columns:

* ``kernel_rel_err``: Triton attention vs the torch reference *on the same cache*. Only
  rounding differs (P and P*v_scale are rounded to the query dtype before the P.V dot, the
  output is rounded to the query dtype), so this is small for every mode. Prefill over a
  quantized cache runs in two passes by default (pages dequantized into a workspace of the
  query dtype, then the bf16 kernel), which rounds K and V once more (2^-9 relative in bf16):
  the 8-bit modes allow 1.5e-2 for that (measured: 1.04e-2 for INT8 per-token-head on
  `kvplan validate`'s synthetic SmolLM2 layers under the CPU interpreter).
* ``roundtrip_*``: per-element bound on ``|dequant(quant(x)) - x|`` after a write:
  ``<= roundtrip_abs_scale * scale + roundtrip_rel * |x|`` where ``scale`` is the stored
  per-token-head (or static per-tensor) scale.
* ``quant_rel_err``: attention on the quantized cache vs attention on the unquantized K/V
  (what quantization costs). Set from the torch reference on random data whose K has x20
  outlier channels (1 in 32), softmax scale 1/sqrt(head_size), 12 seeds: mean / max rel err
  INT8 per-token-head 0.057 / 0.089, FP8 per-token-head 0.054 / 0.097, FP8 per-tensor with
  a calibrated static scale (amax/448) 0.13 / 0.20, INT4 (Hadamard-rotated) 0.23 / 0.28; the
  bounds leave ~1.5x headroom over the max. Outlier channels are the hard case: per-token
  scales stretch to the outlier, so the other channels keep few levels. `kvplan validate`
  should flag a layer whose error on real activations exceeds the bound.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    """Accuracy bounds for one quant mode (see the module docstring for each field)."""

    kernel_rel_err: float
    roundtrip_abs_scale: float
    roundtrip_rel: float
    quant_rel_err: float


#: quant_mode -> bounds. Keys are the runtime's executed quant modes.
TOLERANCES: dict[str, Tolerance] = {
    # bf16/fp16 passthrough: writes are exact; attention differs by bf16 rounding of P and O.
    "none": Tolerance(kernel_rel_err=1e-2, roundtrip_abs_scale=0.0, roundtrip_rel=0.0,
                      quant_rel_err=1e-2),
    # e4m3: 3 mantissa bits -> half-ulp relative 2^-4; subnormal step 2^-9 * scale.
    # (e5m2 uses roundtrip_rel 2^-3, see ROUNDTRIP_REL_E5M2.)
    "fp8_per_tensor": Tolerance(kernel_rel_err=1.5e-2, roundtrip_abs_scale=2.0 ** -10,
                                roundtrip_rel=2.0 ** -4, quant_rel_err=3e-1),
    # INT8 round-half-away: |err| <= scale / 2 exactly (plus fp32 rounding of x/scale).
    "int8_per_token_head": Tolerance(kernel_rel_err=1.5e-2, roundtrip_abs_scale=0.5 + 1e-3,
                                     roundtrip_rel=1e-6, quant_rel_err=1.5e-1),
    "fp8_per_token_head": Tolerance(kernel_rel_err=1.5e-2, roundtrip_abs_scale=2.0 ** -10,
                                    roundtrip_rel=2.0 ** -4, quant_rel_err=1.5e-1),
    # INT4 asymmetric after a Hadamard rotation: |err| <= scale/2 in the rotated basis; the
    # round trip is checked in that basis. Attention error is large by nature of 4 bits.
    "int4_per_token_head": Tolerance(kernel_rel_err=2e-2, roundtrip_abs_scale=0.5 + 1e-3,
                                     roundtrip_rel=1e-6, quant_rel_err=4.5e-1),
}

#: e5m2 has 2 mantissa bits: half-ulp relative error 2^-3 (subnormal step 2^-16 * scale).
ROUNDTRIP_REL_E5M2: float = 2.0 ** -3


def tolerance_for(quant_mode: str) -> Tolerance:
    """Bounds for a quant mode; KeyError names the executed modes."""
    try:
        return TOLERANCES[quant_mode]
    except KeyError:
        raise KeyError(f"no tolerance for quant_mode '{quant_mode}'; known: "
                       f"{', '.join(TOLERANCES)}") from None
