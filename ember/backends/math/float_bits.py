"""nextafter(x, y): the float next to x in the direction of y, as C99 (and NumPy): y where x == y, NaN where
either is NaN, the smallest subnormal with y's sign from a zero. Elsewhere a float's bits, read as an integer,
order its magnitudes, so the neighbour is x's bits plus or minus one. float16 values are computed in float32
(`nextafter_f16`): bits plus or minus 2**13 step float16's last mantissa bit from the normal range on, and below
it the step is float16's subnormal spacing 2**-24, exact in float32; where x == y it gives x, as NumPy's float16
loop does (its float32 and float64 loops give y, as C).
"""

from __future__ import annotations

import math

_F16_MIN_NORMAL, _F16_TINY, _F16_MAX = 2.0 ** -14, 2.0 ** -24, 65504.0


def _nextafter(e, x, y, step, tiny: float, equal=None):
    """The C99 cases around `step(x, grows)`, the neighbour of a nonzero x of larger (grows) or smaller
    magnitude; `equal` where x == y (y by default)."""
    grows = e.xor(e.cmp(">", y, x), e.cmp("<", x, e.c(0.0)))
    out = step(x, grows)
    out = e.select(e.cmp("==", x, e.c(0.0)), e.copysign(e.c(tiny), y), out)
    out = e.select(e.cmp("==", x, y), y if equal is None else equal, out)
    return e.select(e.or_(e.isnan(x), e.isnan(y)), e.add(x, y), out)


def nextafter(e, x, y):
    """nextafter at the emitter's format: x's bits plus one where its magnitude grows, minus one elsewhere
    (from an infinity toward a finite y, the largest finite float)."""
    def step(x, grows):
        return e.from_bits(e.iadd(e.bits(x), e.select(grows, e.i(1), e.i(-1))))
    return _nextafter(e, x, y, step, 2.0 ** (1 - e.f.bias - e.f.mant))


def nextafter_f16(e, x, y):
    """nextafter of float16 values held exactly in float32 (the result too): the step is 2**13 in the bits of
    float32 from float16's smallest normal on (to its infinity past 65504, which float16 rounds to inf), the
    subnormal spacing 2**-24 below it (and down from the smallest normal), and 65504 from an infinity."""
    def step(x, grows):
        ax = e.abs(x)
        by_bits = e.from_bits(e.iadd(e.bits(x), e.select(grows, e.i(1 << 13), e.i(-(1 << 13)))))
        spacing = e.copysign(e.c(_F16_TINY), x)
        by_spacing = e.copysign(e.add(x, e.select(grows, spacing, e.neg(spacing))), x)   # -tiny up: -0
        small = e.or_(e.cmp("<", ax, e.c(_F16_MIN_NORMAL)),
                      e.and_(e.cmp("==", ax, e.c(_F16_MIN_NORMAL)), e.not_(grows)))
        out = e.select(small, by_spacing, by_bits)
        return e.select(e.cmp("==", ax, e.c(math.inf)), e.copysign(e.c(_F16_MAX), x), out)
    return _nextafter(e, x, y, step, _F16_TINY, equal=x)
