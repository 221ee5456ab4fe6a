"""sin and cos: three-part Cody-Waite reduction by pi/2 below SINCOS_BIG, Payne-Hanek (integer products
with a table of 2/pi) from there on, as a rare piece (`e.rare`) computed only for the lanes that need it;
then the Taylor series of sin or cos of the reduced argument by quadrant."""

from __future__ import annotations

import math

from ember.backends.math.emitter import Emitter, Value
from ember.backends.math.formats import F32, F64

TWO_OVER_PI = 0.6366197723675814

# 2/pi to 1344 bits (hex digits after the point): the Payne-Hanek tables below are cut from it.
_TWO_OVER_PI_HEX = (
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e006492eea09d1921c"
    "fe1deb1cb129a73ee88235f52ebb4484e99c7026b45f7e413991d639835339f49c845f8bbdf9283b1ff897ffde05980f"
    "ef2f118b5a0a6d1f6d367ecf27cb09b74f463f669e5fea2d7527bac7ebe5f17b3d0739f78a5292ea6bfb5fb11f8d5d08"
    "56033046fc7b6babf0cfbc209af4361da9e391615ee61b08")
_TWO_OVER_PI_BITS = int(_TWO_OVER_PI_HEX, 16)       # floor(2/pi * 2**1344)
_TWO_OVER_PI_LEN = 4 * len(_TWO_OVER_PI_HEX)
# float32 (the layout of ARM's optimized-routines sinf): word i = floor(4/pi * 2**(8i + 7)) mod 2**32
PH_F32 = [(_TWO_OVER_PI_BITS >> (_TWO_OVER_PI_LEN - 8 * i - 8)) % 2 ** 32 for i in range(24)]
# float64: three zero words, then word k = floor(2/pi * 2**(64(k + 1))) mod 2**64
PH_F64 = [0, 0, 0] + [(_TWO_OVER_PI_BITS >> (_TWO_OVER_PI_LEN - 64 * (k + 1))) % 2 ** 64 for k in range(19)]
# Cody-Waite below, Payne-Hanek from here on: float32's x * 2/pi rounds to within 2**-8 of n, float64
# keeps n below 2**33 (its three-part pi/2 is good to n * 2**-163)
SINCOS_BIG = {"f32": 2.0 ** 16, "f64": 2.0 ** 30}


def sincos_of_reduced(e: Emitter, r: Value, quadrant: Value, shift: int) -> Value:
    """sin(r + (quadrant + shift) pi/2) for |r| <= pi/4 (a little more) and an integer quadrant."""
    z = e.mul(r, r)
    sin_series = [(-1) ** j / math.factorial(2 * j + 1) for j in range(1, 1 + e.f.sin_terms)]
    cos_series = [(-1) ** j / math.factorial(2 * j) for j in range(1, 1 + e.f.cos_terms)]
    sin_r = e.fma(e.mul(r, z), e.poly(z, sin_series), r)
    cos_r = e.fma(z, e.poly(z, cos_series), e.c(1.0))
    quadrant = e.iadd(quadrant, e.i(shift))
    odd = e.icmp("!=", e.and_(quadrant, e.i(1)), e.i(0))
    negative = e.icmp("!=", e.and_(quadrant, e.i(2)), e.i(0))
    out = e.select(odd, cos_r, sin_r)
    return e.select(negative, e.neg(out), out)


def payne_hanek_f32(e: Emitter, ax: Value):
    """|x| = n pi/2 + r (float32 |x| >= 2): 24 bits of x times 96 bits of 4/pi in 64-bit integers give
    x 2/pi mod 4 in 2.62 fixed point exactly (ARM optimized-routines' sinf); r in float64 (33 bits good),
    n mod 4 as i32."""
    xi = e.bits(ax)
    table = e.table("two_over_pi.f32", 32, PH_F32)
    idx = e.and_(e.lshr(xi, e.i(26)), e.i(15))
    shift = e.and_(e.lshr(xi, e.i(23)), e.i(7))
    m = e.shl(e.or_(e.and_(xi, e.i(0xFFFFFF)), e.i(0x800000)), shift)
    a0, a1, a2 = (e.load(table, e.iadd(idx, e.i(k))) for k in (0, 4, 8))
    res0 = e.zext(e.imul(m, a0), 64)
    m64 = e.zext(m, 64)
    res1 = e.imul(m64, e.zext(a1, 64))
    res2 = e.imul(m64, e.zext(a2, 64))
    res0 = e.iadd(e.or_(e.lshr(res2, e.i(32, 64)), e.shl(res0, e.i(32, 64))), res1)
    n = e.lshr(e.iadd(res0, e.i(1 << 61, 64)), e.i(62, 64))
    frac = e.isub(res0, e.shl(n, e.i(62, 64)))
    d = e.at(F64)
    r = d.mul(d.to_float(frac), d.c(math.pi / 2 * 2.0 ** -62))
    return d.convert(r, F32), e.itrunc(n, 32)


def payne_hanek_f64(e: Emitter, ax: Value):
    """|x| = n pi/2 + r (float64 |x| >= 2**-30): x's 53-bit mantissa times a 192-bit window of 2/pi (three
    64-bit words, 64 x 64 -> 128-bit products) gives x 2/pi mod 4 in 2.190 fixed point, good to 2**-137
    (the closest float64 to a multiple of pi/2 is 2**-61 from it); r = that fraction times pi/2 in
    double-double, rounded once."""
    xi = e.bits(ax)
    table = e.table("two_over_pi.f64", 64, PH_F64)
    m = e.or_(e.and_(xi, e.i((1 << 52) - 1)), e.i(1 << 52))
    o = e.iadd(e.lshr(xi, e.i(52)), e.i(190 - 1075))          # window: floor(2/pi 2**o) mod 2**192
    q = e.itrunc(e.lshr(o, e.i(6)), 32)
    s = e.and_(o, e.i(63))
    t = [e.load(table, e.iadd(q, e.i(k, 32))) for k in range(4)]
    w0, w1, w2 = (e.fshl(t[k], t[k + 1], s) for k in range(3))
    m128 = e.zext(m, 128)
    p2 = e.imul(m128, e.zext(w2, 128))
    p1 = e.imul(m128, e.zext(w1, 128))
    mid = e.iadd(p1, e.lshr(p2, e.i(64, 128)))
    top = e.iadd(e.imul(m, w0), e.itrunc(e.lshr(mid, e.i(64, 128)), 64))
    n = e.lshr(e.iadd(top, e.i(1 << 61)), e.i(62))
    hi = e.isub(top, e.shl(n, e.i(62)))                        # the fraction, signed, times 2**62
    v = e.or_(e.shl(e.sext(hi, 128), e.i(64, 128)), e.zext(e.itrunc(mid, 64), 128))   # times 2**126
    negative = e.icmp("<", v, e.i(0, 128))
    v = e.select(negative, e.ineg(v), v)
    lz = e.ctlz(v)
    lz = e.select(e.icmp(">", lz, e.i(126, 128), signed=False), e.i(126, 128), lz)
    v = e.shl(v, lz)                                            # top bit set (v is never 0)
    head = e.itrunc(e.lshr(v, e.i(75, 128)), 64)               # 53 bits: exact as a double
    tail = e.itrunc(e.lshr(e.shl(v, e.i(53, 128)), e.i(64, 128)), 64)
    scale = e.pow2(e.isub(e.i(2 - 53), e.itrunc(lz, 64)))      # v's top bit weighs 2**(1 - lz)
    head = e.mul(e.to_float(head, signed=False), scale)
    tail = e.mul(e.mul(e.to_float(tail, signed=False), scale), e.c(2.0 ** -64))
    pio2_hi, pio2_lo = e.f.pio2[0], e.f.pio2[1]
    r = e.fma(head, e.c(pio2_hi), e.fma(head, e.c(pio2_lo), e.mul(tail, e.c(pio2_hi))))
    r = e.select(negative, e.neg(r), r)
    return r, e.itrunc(n, 64)


def _sincos_big(shift: int):
    """The rare piece of sin (shift 0) or cos (1): sin(x + shift pi/2) for |x| >= SINCOS_BIG, by Payne-Hanek."""
    def big(e: Emitter, x: Value, ax: Value) -> Value:
        r, n = (payne_hanek_f32 if e.f is F32 else payne_hanek_f64)(e, ax)
        negative = e.cmp("<", x, e.c(0.0))
        r = e.select(negative, e.neg(r), r)
        n = e.select(negative, e.ineg(n), n)
        return sincos_of_reduced(e, r, n, shift)
    return big


_BIG = (_sincos_big(0), _sincos_big(1))


def cody_waite(e: Emitter, x: Value) -> tuple[Value, Value]:
    """x = n pi/2 + r for |x| below SINCOS_BIG: n (a float) and r, clamped to [-0.8, 0.8] (shared by tan)."""
    n = e.rint(e.mul(x, e.c(TWO_OVER_PI)))
    r = x
    for part in e.f.pio2:
        r = e.fma(e.neg(n), e.c(part), r)
    return n, e.clamp(r, -0.8, 0.8)


def cody_waite_pair(e: Emitter, x: Value) -> tuple[Value, Value, Value]:
    """x = n pi/2 + r + r_lo for |x| below SINCOS_BIG, r + r_lo good to far below an ulp of r (tan needs it:
    its derivative magnifies r's error up to pi/2 times): x - n p1 is exact, n p2 is an exact product and
    its subtraction an exact sum, n p3 and the low parts are added once. r is clamped as cody_waite's."""
    n = e.rint(e.mul(x, e.c(TWO_OVER_PI)))
    p1, p2, p3 = e.f.pio2
    r1 = e.fma(e.neg(n), e.c(p1), x)
    t = e.mul(n, e.c(p2))
    t_lo = e.fma(n, e.c(p2), e.neg(t))
    r2 = e.sub(r1, t)
    bb = e.sub(r2, r1)
    r2_lo = e.sub(e.sub(r1, e.sub(r2, bb)), e.add(t, bb))                 # r1 - t = r2 + r2_lo exactly
    low = e.sub(r2_lo, e.fma(n, e.c(p3), t_lo))
    r = e.add(r2, low)
    return n, e.clamp(r, -0.8, 0.8), e.add(e.sub(r2, r), low)


def sincos(e: Emitter, x: Value, shift: int) -> Value:
    """sin(x + shift pi/2): x = n pi/2 + r (three-part Cody-Waite), then sin or cos of r by quadrant, below
    SINCOS_BIG; from there on (and for infinities and NaN) the rare piece's result, selected.

    Cody-Waite is accurate while x * 2/pi rounds to within 2**-6 of n (n < 2**(mant - 6)); r is clamped so
    the lanes that take the other result stay finite."""
    limit = SINCOS_BIG[e.f.name]
    small = e.cmp("<", e.abs(x), e.c(limit))                 # false for NaN
    n, r = cody_waite(e, e.select(small, x, e.c(0.0)))
    quadrant = e.to_int(e.sub(n, e.mul(e.c(4.0), e.floor(e.mul(n, e.c(0.25))))))
    out = sincos_of_reduced(e, r, quadrant, shift)
    return e.select(small, out, e.rare(("sin_big", "cos_big")[shift], _BIG[shift], x, limit))


def sin(e: Emitter, x: Value) -> Value:
    return e.select(e.cmp("==", x, e.c(0.0)), x, sincos(e, x, 0))   # keeps -0


def cos(e: Emitter, x: Value) -> Value:
    return sincos(e, x, 1)
