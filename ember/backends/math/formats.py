"""The float formats the math algorithms compute in: bit layout and the per-format constants (clamps,
range-reduction splits, series lengths), with no renderer's types: a renderer maps `Format.name` to its own."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class Format:
    """The constants one float format needs: bit layout, clamps, range-reduction splits, series."""
    name: str                          # "f32" or "f64": renderers key their types and symbols on it
    dtype: np.dtype
    width: int                         # bits of the format, and of its integers (bits(), to_int())
    mant: int                          # explicit mantissa bits
    bias: int
    exp_range: tuple[float, float]     # exp underflows to 0 below, overflows above
    expm1_range: tuple[float, float]   # expm1 is -1 below
    expm1_big_n: int                   # from 2**n on, expm1 = exp: the -1 is below half an ulp
    exp_overflow: float                # log of the largest finite number: exp overflows above
    ln2: tuple[float, float]           # ln 2 = hi + lo, hi rounded (for fma reductions)
    ln2_short: tuple[float, float]     # hi with trailing zero bits, so k * hi is exact (log)
    pio2: tuple[float, float, float]   # pi/2 in three parts
    sqrt_half_bits: int                # bits of sqrt(1/2): log's mantissa split point
    subnormal_scale: int               # log scales subnormals by 2**this
    exp_terms: int                     # Taylor terms of exp(r) - 1 - r (from r**2 / 2!)
    log_terms: int                     # terms of atanh's series after 2s (2/3 s**2, 2/5 s**4, ...)
    sin_terms: int                     # sin(r) = r + r**3 * P(r**2): terms of P
    cos_terms: int                     # cos(r) = 1 + r**2 * Q(r**2): terms of Q


F32 = Format("f32", np.dtype(np.float32), 32, 23, 127, (-104.0, 89.0), (-18.0, 89.0), 40, 88.72283935546875,
             (float.fromhex("0x1.62e430p-1"), float.fromhex("-0x1.05c610p-29")),
             (0.693138122558593750, 9.058001523953862e-06),
             (float.fromhex("0x1.921fb6p+0"), float.fromhex("-0x1.777a5cp-25"), float.fromhex("-0x1.ee59dap-50")),
             0x3F3504F3, 25, 6, 4, 5, 6)
F64 = Format("f64", np.dtype(np.float64), 64, 52, 1023, (-746.0, 710.0), (-40.0, 710.0), 60, 709.782712893384,
             (float.fromhex("0x1.62e42fefa39efp-1"), float.fromhex("0x1.abc9e3b39803fp-56")),
             (0.6931471803691238, 1.9082149292705877e-10),
             (float.fromhex("0x1.921fb54442d18p+0"), float.fromhex("0x1.1a62633145c07p-54"),
              float.fromhex("-0x1.f1976b7ed8fbcp-110")),
             0x3FE6A09E667F3BCD, 54, 12, 10, 8, 9)
FORMATS: dict[np.dtype, Format] = {F32.dtype: F32, F64.dtype: F64}
