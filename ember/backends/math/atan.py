"""atan, atan2, asin and acos, branch-free for float32 and float64.

atan and atan2 share one reduction (Cephes' three intervals): atan(a/b) = k pi/4 + atan(u) with
u = a/b, (a - b)/(a + b) or -b/a, so |u| <= tan(pi/8); u is one division whose rounding error (and
that of a - b, a + b) is carried in u_lo, and k pi/4 + u is summed exactly, so the result rounds about
once. asin and acos reduce |x| > 1/2 to 2 asin(sqrt((1 - |x|) / 2)) (exact argument; the square root's
rounding error carried), so both are accurate up to +-1. Polynomials are our own Chebyshev fits
(mpmath.chebyfit, 40 digits) of (f(s) - s) / s**3 in s**2, lowest power first.
"""

from __future__ import annotations

import math

from ember.backends.math.emitter import Emitter, Value
from ember.backends.math.exp_log import two_sum

# (atan(s) - s) / s**3 on s**2 <= tan(pi/8)**2 (+): absolute error 1.6e-8 (float32), 3.2e-17 (float64)
_ATAN = {
    "f32": (-0.3333333175810319, 0.19999539779241027, -0.1426393119734655, 0.10743467811156401,
            -0.06451054484834362),
    "f64": (-0.3333333333333333, 0.19999999999995505, -0.1428571428466294, 0.1111111101496664,
            -0.09090904566354399, 0.07692182917461161, -0.06664507597561675, 0.05858115476299884,
            -0.050852748016420944, 0.03922660551087136, -0.01917070039374299),
}
# (asin(s) - s) / s**3 on s**2 <= 1/4: absolute error 4.2e-9 (float32), 1.5e-17 (float64)
_ASIN = {
    "f32": (0.16666666337430908, 0.07500094543497424, 0.04459940152851218, 0.03110066273549457,
            0.017149238357677253, 0.03369084720283012),
    "f64": (0.16666666666666669, 0.07499999999998433, 0.04464285714635543, 0.030381944138531247,
            0.02237217294214989, 0.017352392720869973, 0.013971212973552933, 0.011479177415184906,
            0.01032281435018578, 0.005457506718640358, 0.01740087944269402, -0.014851887071247204,
            0.028757851367421566),
}
_TAN_PI_8, _TAN_3PI_8 = 0.41421356237309503, 2.414213562373095
# k pi/4 = hi + lo for k = 0..4, hi rounded to the format (3 pi/4 is not 3 times pi/4's hi)
_PI_4S = {
    "f32": ((0.0, 0.0), (0.7853981852531433, -2.1855694143368964e-08), (1.5707963705062866, -4.371138828673793e-08),
            (2.356194496154785, -5.962440319251527e-09), (3.1415927410125732, -8.742277657347586e-08)),
    "f64": ((0.0, 0.0), (0.7853981633974483, 3.061616997868383e-17), (1.5707963267948966, 6.123233995736766e-17),
            (2.356194490192345, 9.184850993605148e-17), (3.141592653589793, 1.2246467991473532e-16)),
}


def _pi_4s(e, k: int) -> tuple:
    """k pi/4 as constants (hi, lo) of e's format."""
    hi, lo = _PI_4S[e.f.name][k]
    return e.c(hi), e.c(lo)


def _pick_pi_4s(e, ks):
    """(hi, lo) of k pi/4 for ks = [(cond, k), ..., k_default]: the first k whose condition holds."""
    *pairs, last = ks
    hi, lo = _pi_4s(e, last)
    for cond, k in reversed(pairs):
        h, l_ = _pi_4s(e, k)
        hi, lo = e.select(cond, h, hi), e.select(cond, l_, lo)
    return hi, lo


def _small(e) -> float:
    """Below this, f(s) = s + O(s**3) rounds to s: the correction is skipped (no subnormal intermediates)."""
    return 2.0 ** (-(e.f.mant // 2) - 3)


def _reduce(e, a, b):
    """atan(a / b) = k pi/4 + atan(u + u_lo) for finite a, b >= 0 (b > 0 or a > 0, a + b finite): k in
    {0, 1, 2} as two conditions (mid, big), |u| <= tan(pi/8) (a little more at the boundaries)."""
    mid = e.cmp(">", a, e.mul(b, e.c(_TAN_PI_8)))
    big = e.cmp(">", a, e.mul(b, e.c(_TAN_3PI_8)))
    diff, diff_lo = two_sum(e, a, e.neg(b))
    total, total_lo = two_sum(e, a, b)
    num = e.select(big, e.neg(b), e.select(mid, diff, a))
    den = e.select(big, a, e.select(mid, total, b))
    zero = e.c(0.0)
    mid_only = e.and_(mid, e.not_(big))
    num_lo, den_lo = e.select(mid_only, diff_lo, zero), e.select(mid_only, total_lo, zero)
    u = e.div(num, den)
    u_lo = e.div(e.sub(e.add(e.fma(e.neg(u), den, num), num_lo), e.mul(u, den_lo)), den)
    return mid, big, u, u_lo


def _series(e, u, u_lo, coeffs):
    """f(u + u_lo) - u for f(s) = s + s**3 P(s**2), with f'(u) = 1 + O(u**2) applied to u_lo."""
    tiny = e.cmp("<", e.abs(u), e.c(_small(e)))
    w = e.select(tiny, e.c(_small(e)), u)
    z = e.mul(w, w)
    corr = e.mul(e.mul(w, z), e.poly(z, coeffs))
    return e.add(e.select(tiny, e.c(0.0), corr), u_lo)


def _assemble(e, base_hi, base_lo, sign, u, rest):
    """base + sign (u + rest) with base + sign u summed exactly, rounded once at the end."""
    su = e.mul(sign, u)
    hi, lo = two_sum(e, base_hi, su)
    return e.add(hi, e.add(e.add(lo, base_lo), e.mul(sign, rest)))


def _atan_of_ratio(e, a, b, flip=None):
    """atan(a / b) for the reduced (a, b), or pi - atan(a / b) where `flip` (atan2 with x < 0)."""
    mid, big, u, u_lo = _reduce(e, a, b)
    rest = _series(e, u, e.fma(e.neg(u_lo), e.mul(u, u), u_lo), _ATAN[e.f.name])
    if flip is None:
        hi, lo = _pick_pi_4s(e, [(big, 2), (mid, 1), 0])
        return _assemble(e, hi, lo, e.c(1.0), u, rest)
    # pi - k pi/4 = (4 - k) pi/4, with u's sign flipped
    hi, lo = _pick_pi_4s(e, [(e.and_(flip, big), 2), (e.and_(flip, mid), 3), (flip, 4), (big, 2), (mid, 1), 0])
    return _assemble(e, hi, lo, e.select(flip, e.c(-1.0), e.c(1.0)), u, rest)


def atan(e: Emitter, x: Value) -> Value:
    """atan(x): |x| is clamped where atan rounds to pi/2 (so 1/|x| stays normal), NaN kept."""
    a = e.below(e.abs(x), 2.0 ** (e.f.mant + 8))
    out = _atan_of_ratio(e, a, e.c(1.0))
    return e.select(e.isnan(x), x, e.copysign(out, x))


def atan2(e: Emitter, y: Value, x: Value) -> Value:
    """atan2(y, x) with C99's (NumPy's) special cases: the sign of zero y kept, x = -0 counts as negative
    (atan2(0, -0) = pi), infinities give multiples of pi/4, NaN gives NaN. Both operands are scaled by a
    power of 2 when large (so a + b stays finite); two infinities become 1 and 1."""
    ay, ax = e.abs(y), e.abs(x)
    inf_y, inf_x = e.cmp("==", ay, e.c(math.inf)), e.cmp("==", ax, e.c(math.inf))
    one, zero = e.c(1.0), e.c(0.0)
    any_inf = e.or_(inf_y, inf_x)                          # infinities: the ratio as (1 or 0) / (1 or 0)
    ay = e.select(any_inf, e.select(inf_y, one, zero), ay)
    ax = e.select(any_inf, e.select(inf_x, one, zero), ax)
    top = e.max(ay, ax)
    large = e.cmp(">", top, e.c(2.0 ** (e.f.bias - 2)))
    tiny = e.cmp("<", top, e.c(2.0 ** (e.f.mant + 3 - e.f.bias)))   # keeps u's remainder exact
    factor = e.select(large, e.c(0.25), e.select(tiny, e.c(2.0 ** (e.f.mant + 2)), one))
    ay, ax = e.mul(ay, factor), e.mul(ax, factor)
    zeros = e.and_(e.cmp("==", ay, e.c(0.0)), e.cmp("==", ax, e.c(0.0)))
    ax = e.select(zeros, one, ax)                          # atan2(+-0, +-0): 0 or pi, no 0 / 0
    flip = e.cmp("<", e.copysign(one, x), zero)
    out = _atan_of_ratio(e, ay, ax, flip)
    return e.select(e.or_(e.isnan(x), e.isnan(y)), e.add(x, y), e.copysign(out, y))


def _asin_parts(e, a):
    """For 0 <= a <= 1: (big, s, rest) with asin(a) = s + rest where a <= 1/2 (big false), and
    asin(a) = pi/2 - 2 (s + rest) above, s = sqrt((1 - a) / 2) rounded and its error in rest."""
    big = e.cmp(">", a, e.c(0.5))
    z_big = e.mul(e.sub(e.c(1.0), e.below(a, 1.0)), e.c(0.5))     # exact
    s_big = e.sqrt(z_big)
    s_lo = e.div(e.fma(e.neg(s_big), s_big, z_big), e.above(e.add(s_big, s_big), 2.0 ** (1 - e.f.bias)))   # 0 at a = 1
    s = e.select(big, s_big, a)
    rest = _series(e, s, e.select(big, s_lo, e.c(0.0)), _ASIN[e.f.name])
    return big, s, rest


def asin(e: Emitter, x: Value) -> Value:
    """asin(x): NaN outside [-1, 1], -0 kept."""
    a = e.abs(x)
    big, s, rest = _asin_parts(e, a)
    hi, lo = _pick_pi_4s(e, [(big, 2), 0])
    out = _assemble(e, hi, lo, e.select(big, e.c(-2.0), e.c(1.0)), s, rest)
    out = e.select(e.cmp(">", a, e.c(1.0)), e.c(math.nan), e.copysign(out, x))
    return e.select(e.isnan(x), x, out)


def acos(e: Emitter, x: Value) -> Value:
    """acos(x) = pi/2 - asin(x) for |x| <= 1/2, 2 asin(sqrt((1 - x) / 2)) above, pi - that below -1/2
    (the small results near x = 1 keep their relative accuracy); NaN outside [-1, 1]."""
    a = e.abs(x)
    big, s, rest = _asin_parts(e, a)
    negative = e.cmp("<", x, e.c(0.0))
    # |x| <= 1/2: pi/2 - (x + ...); x > 1/2: 0 + 2 (s + ...); x < -1/2: pi - 2 (s + ...)
    hi, lo = _pick_pi_4s(e, [(e.and_(big, negative), 4), (big, 0), 2])
    sign = e.select(big, e.select(negative, e.c(-2.0), e.c(2.0)), e.select(negative, e.c(1.0), e.c(-1.0)))
    out = _assemble(e, hi, lo, sign, s, rest)
    out = e.select(e.cmp(">", a, e.c(1.0)), e.c(math.nan), out)
    return e.select(e.isnan(x), x, out)
