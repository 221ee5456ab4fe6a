"""Special functions over the emitter protocol: erfc, erf_inv, lgamma, digamma, zeta (Hurwitz), polygamma.

Each is computed in float64 (float32 evaluates there and rounds once: their pieces are many and long,
and one set of fits serves both widths; float32 erfc has its own shorter fit, below). Branch-free: every
piece is evaluated, the coefficients of the piece a lane needs are picked by selects (a small table
lookup that vectorizes), and the special values are selected last.
- erfc: 1 - erf below 0.5; above, exp(-x*x) erfcx(|x|) with x*x = hi + lo exact (exp(-hi) (1 - lo)), so
  the tail keeps its relative accuracy down to the underflow (erfc(26.5) ~ 2.2e-307); erfcx(a) is
  P(t) / (1 + 2a) with t = (a - 5) / (a + 5), one polynomial of degree 24 fitted on [0, 27.5], no
  pieces and no selects; 2 - erfc(|x|) for negative x. float32 (still at float64, where a*a is
  exact) needs only 1e-10: the same form with its own degree-13 fit, for all a, and no 1 - erf.
- erf_inv: with w = -log((1 - x)(1 + x)) (exact enough near 1, where 1 - x is exact), x P(w) for w < 6.25
  and a polynomial in sqrt(w) above (Giles' variables, our fits).
- lgamma: t P(t) around the zeros 1 and 2 (t = x - 1, x - 2, exact), pieces on [2.5, 8.5), Stirling's
  series above (finite up to 2.5e305), x P(x) - log|x| for |x| < 0.5 and the reflection
  log(pi / |sin(pi x)|) - lgamma(1 - x) below -0.5; +inf at the poles and at both infinities.
- digamma: (x - x0) P(x) around its zero x0 = 1.4616..., also for x in (0, 1) by psi(x + 1) - 1/x;
  pieces on [2, 10), the asymptotic series above, psi(1 - x) - pi cot(pi x) for x < 0; nan at poles.
- zeta(s, q): Euler-Maclaurin with a fixed 6 terms summed and 12 Bernoulli terms for q > 0; for
  negative non-integer q and integer s, zeta(s, f) + (-1)**s (zeta(s, 1 - f) - zeta(s, 1 - q)),
  f = q - floor(q) (XLA sums 9 terms from q itself and is wrong below about q = -9); XLA's values
  at the poles and off the domain (inf for an even s at q in {0, -1, ...}, nan for odd s, s < 1, ...).
- polygamma(m, x): digamma for m = 0, (-1)**(m+1) m! zeta(m + 1, x) for integer m >= 1 (m! from a
  table), else nan.
Near the negative zeros of lgamma and digamma the reflections lose relative (not absolute) accuracy,
as XLA's do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ember.backends.math import special_coeffs as C
from ember.backends.math.formats import F32, F64

_PI_HI, _PI_LO = math.pi, 1.2246467991473532e-16
_LOG_PI = 1.1447298858494002
_HALF_LOG_2PI = 0.9189385332046728
# Stirling's series of lgamma(x) - ((x - 1/2) log x - x + log(2 pi)/2), times x, in u = 1/x**2:
# B_2k / (2k (2k - 1)) for k = 1..10 (from x = 8.5 on its error is below 1e-19 of the result).
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400,
             43867 / 244188, -174611 / 125400)
# digamma(x) - log x + 1/(2x) = -u Q(u), u = 1/x**2: B_2k / (2k) for k = 1..10 (x >= 10).
_DIGAMMA_ASYMPTOTIC = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12, -3617 / 8160,
                       43867 / 14364, -174611 / 6600)
# zeta(s, q) by Euler-Maclaurin: terms summed, and B_2j / (2j)! for j = 1..12.
_ZETA_TERMS = 6
_ZETA_BERNOULLI = (1 / 6 / 2, -1 / 30 / 24, 1 / 42 / 720, -1 / 30 / 40320, 5 / 66 / 3628800,
                   -691 / 2730 / 479001600, 7 / 6 / 87178291200, -3617 / 510 / 20922789888000,
                   43867 / 798 / 6402373705728000, -174611 / 330 / 2432902008176640000,
                   854513 / 138 / 1124000727777607680000, -236364091 / 2730 / 620448401733239439360000)
# n! for n = 0..170 and inf for 171 (n! overflows float64 from 171 on), as float64 bits
_FACTORIAL_BITS = tuple(int(np.float64(math.factorial(n)).view(np.int64)) for n in range(171)) + (
    int(np.float64(np.inf).view(np.int64)),)


# ---- helpers -----------------------------------------------------------------------------------------

def _pick(e, conds: Sequence, values: Sequence[float]):
    """values[0], replaced by values[k + 1] where conds[k] holds (later conditions win)."""
    out = e.c(values[0])
    for cond, v in zip(conds, values[1:]):
        out = e.select(cond, e.c(v), out)
    return out


def _pieces(e, v, bounds: Sequence[float], pieces: Sequence) -> tuple:
    """(polynomial, t) of the piece holding v: piece k covers [bounds[k - 1], bounds[k]), its
    polynomial evaluated at t = v - mid with its constant term's low part added last."""
    conds = [e.cmp(">=", v, e.c(b)) for b in bounds]
    degree = max(len(c) for _, _, c in pieces)
    coeffs = [tuple(c) + (0.0,) * (degree - len(c)) for _, _, c in pieces]
    t = e.sub(v, _pick(e, conds, [mid for mid, _, _ in pieces]))
    tail = _pick(e, conds, [c[-1] for c in coeffs])
    for j in reversed(range(1, degree - 1)):
        tail = e.fma(tail, t, _pick(e, conds, [c[j] for c in coeffs]))
    lo = _pick(e, conds, [lo for _, lo, _ in pieces])
    return e.add(_pick(e, conds, [c[0] for c in coeffs]), e.fma(t, tail, lo)), t


def _frac_to_nearest(e, x):
    """x - rint(x), exact (0 for |x| >= 2**52, where every float is an integer)."""
    return e.sub(x, e.rint(x))


def _pi_times(e, r):
    """pi r with pi as hi + lo, one rounding."""
    return e.fma(e.c(_PI_HI), r, e.mul(e.c(_PI_LO), r))


def _in_f64(e, name: str, *args):
    """A float32 function evaluated at float64 and rounded once."""
    wide = e.at(F64)
    return wide.convert(e.call(name, *[e.convert(a, F64) for a in args], fmt=F64), F32)


# ---- erfc ----------------------------------------------------------------------------------------------

def _erfc32(e, x):
    """float32 erfc at float64: exp(-a*a) P(t) / (1 + 2a), t = (a - 4) / (a + 4), one polynomial
    for every a = |x| (a*a is exact at float64); 2 - erfc(a) for negative x. No pieces, no selects."""
    w = e.at(F64)
    wide = e.convert(x, F64)
    a = w.below(w.abs(wide), C.ERFC32_MAX)      # erfc(10.1) rounds to 0; NaN becomes 10.1
    k = w.c(C.ERFC32_K)
    t = w.div(w.sub(a, k), w.add(a, k))
    g = w.div(w.poly(t, C.ERFC32_T), w.fma(w.c(2.0), a, w.c(1.0)))
    pos = w.mul(w.call("exp", w.neg(w.mul(a, a))), g)
    neg = w.cmp("<", wide, w.c(0.0))
    out = w.convert(w.select(neg, w.sub(w.c(2.0), pos), pos), F32)
    return e.select(e.isnan(x), x, out)


def _erfc64(e, x):
    """exp(-a*a) P(t) / (1 + 2a), t = (a - 5) / (a + 5), one polynomial for a = |x| >= 0.5, with
    a*a = hi + lo and P / (1 + 2a) each carried as hi + lo (exp(-hi) (1 - lo)); 2 - erfc(a) for
    negative x, 1 - erf(x) below 0.5 (there the polynomial's roundings add up to 5 ulp)."""
    a = e.below(e.abs(x), C.ERFC64_MAX)                      # erfc(27.5) underflows; NaN becomes 27.5
    k = e.c(C.ERFC64_K)
    t = e.div(e.sub(a, k), e.add(a, k))
    c = C.ERFC64_T
    s = e.fma(t, e.poly(t, c[1:]), e.c(C.ERFC64_LO))
    p = e.add(e.c(c[0]), s)
    p_lo = e.add(e.sub(e.c(c[0]), p), s)                      # P = p + p_lo (|s| < c[0])
    d = e.fma(e.c(2.0), a, e.c(1.0))
    d_lo = e.fma(e.c(2.0), a, e.sub(e.c(1.0), d))               # 1 + 2a = d + d_lo exactly
    q = e.div(p, d)
    r = e.fma(e.neg(q), d, p)                                   # p - q d exactly
    g = e.add(q, e.div(e.fma(e.neg(q), d_lo, e.add(r, p_lo)), d))   # (p + p_lo) / (d + d_lo)
    hi = e.mul(a, a)
    lo = e.fma(a, a, e.neg(hi))
    pos = e.mul(e.call("exp", e.neg(hi)), e.fma(e.neg(g), lo, g))
    big = e.select(e.cmp("<", x, e.c(0.0)), e.sub(e.c(2.0), pos), pos)
    small = e.sub(e.c(1.0), e.call("erf", x))
    out = e.select(e.cmp("<", e.abs(x), e.c(0.5)), small, big)
    return e.select(e.isnan(x), x, out)


def erfc(e, x):
    """1 - erf(x): float32 and float64 each with a fit of their own accuracy."""
    return _erfc32(e, x) if e.f is F32 else _erfc64(e, x)


# ---- erf_inv -------------------------------------------------------------------------------------------

def erf_inv(e, x):
    if e.f is F32:
        return _in_f64(e, "erf_inv", x)
    a = e.abs(x)
    one = e.c(1.0)
    w = e.neg(e.call("log", e.mul(e.sub(one, a), e.add(one, a))))
    inside = e.cmp("<", a, one)
    w = e.select(inside, w, e.c(0.0))                         # no NaN or inf through the pieces
    central, _ = _pieces(e, w, (1.5625, 3.125), C.ERFINV_W)
    tail, _ = _pieces(e, e.sqrt(w), (3.5, 4.75), C.ERFINV_S)
    y = e.select(e.cmp("<", w, e.c(6.25)), e.mul(a, central), tail)
    y = e.select(e.cmp("==", a, one), e.c(math.inf), y)
    y = e.copysign(y, x)
    return e.select(e.or_(e.cmp(">", a, one), e.isnan(x)), e.c(math.nan), y)


# ---- lgamma --------------------------------------------------------------------------------------------

def _lgamma_near_one(e, t):
    """lgamma(1 + t) for |t| <= 0.5."""
    (_, lo, c), _ = C.LGAMMA_NEAR_ZEROS
    return e.add(e.mul(t, e.add(e.c(c[0]), e.fma(t, e.poly(t, c[1:]), e.c(lo)))), e.c(0.0))   # +0 at t = 0


def _lgamma_pos(e, z):
    """lgamma(z) for z >= 0.5 (finite)."""
    near1 = _lgamma_near_one(e, e.sub(z, e.c(1.0)))
    _, (_, lo2, c2) = C.LGAMMA_NEAR_ZEROS
    t2 = e.sub(z, e.c(2.0))
    near2 = e.mul(t2, e.add(e.c(c2[0]), e.fma(t2, e.poly(t2, c2[1:]), e.c(lo2))))
    mid, _ = _pieces(e, z, (3.5, 4.5, 5.5, 6.5, 7.5), C.LGAMMA_PIECES)
    zs = e.clamp(z, 8.5, 2.0 ** 60)                           # beyond 2**60 the series is below 1e-19 of it
    series = e.div(e.poly(e.div(e.c(1.0), e.mul(zs, zs)), _STIRLING), zs)
    log_z = e.call("log", e.above(z, 8.5))
    moderate = e.fma(e.sub(z, e.c(0.5)), log_z, e.neg(z))     # (z - 1/2) log z - z
    huge = e.fma(z, e.sub(log_z, e.c(1.0)), e.mul(e.c(-0.5), log_z))   # the same without overflowing first
    stirling = e.add(e.select(e.cmp("<", z, e.c(2.0 ** 32)), moderate, huge), e.add(e.c(_HALF_LOG_2PI), series))
    out = e.select(e.cmp("<", z, e.c(8.5)), mid, stirling)
    out = e.select(e.cmp("<", z, e.c(2.5)), near2, out)
    return e.select(e.cmp("<", z, e.c(1.5)), near1, out)


def lgamma(e, x):
    if e.f is F32:
        return _in_f64(e, "lgamma", x)
    ax = e.abs(x)
    small = e.sub(_lgamma_near_one(e, x), e.call("log", ax))           # lgamma(1 + x) - log|x|
    negative = e.cmp("<", x, e.c(0.0))
    z = e.select(negative, e.sub(e.c(1.0), x), x)
    pos = _lgamma_pos(e, e.clamp(z, 0.5, 1e307))
    r = e.abs(_frac_to_nearest(e, x))
    sin_pi = e.call("sin", _pi_times(e, e.select(e.isnan(r), e.c(0.5), r)))
    reflected = e.sub(e.sub(e.c(_LOG_PI), e.call("log", sin_pi)), pos)
    reflected = e.select(e.cmp("==", sin_pi, e.c(0.0)), e.c(math.inf), reflected)   # a pole (pos may be inf)
    out = e.select(negative, reflected, pos)
    out = e.select(e.cmp("<", ax, e.c(0.5)), small, out)
    out = e.select(e.cmp("==", ax, e.c(math.inf)), e.c(math.inf), out)
    out = e.select(e.cmp(">", x, e.c(1e307)), e.c(math.inf), out)      # overflows from 2.6e305 on
    return e.select(e.isnan(x), x, out)


# ---- digamma -------------------------------------------------------------------------------------------

def _digamma_pos(e, z):
    """digamma(z) for z > 0 (finite): psi(z) = psi(z + 1) - 1/z below 1."""
    below_one = e.cmp("<", z, e.c(1.0))
    (mid, lo, c), = C.DIGAMMA_NEAR_ZERO
    t = e.sub(z, e.select(below_one, e.c(mid - 1.0), e.c(mid)))
    zero_hi, zero_lo = C.DIGAMMA_ZERO
    base = e.sub(e.sub(z, e.select(below_one, e.c(zero_hi - 1.0), e.c(zero_hi))), e.c(zero_lo))
    near = e.mul(base, e.add(e.c(c[0]), e.fma(t, e.poly(t, c[1:]), e.c(lo))))
    near = e.select(below_one, e.sub(near, e.div(e.c(1.0), z)), near)
    pieces, _ = _pieces(e, z, (3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0), C.DIGAMMA_PIECES)
    zs = e.clamp(z, 10.0, 2.0 ** 100)                         # beyond, 1/(2z) is below 1e-28 of log z
    u = e.div(e.c(1.0), e.mul(zs, zs))
    series = e.fma(u, e.poly(u, _DIGAMMA_ASYMPTOTIC), e.div(e.c(0.5), zs))
    asymptotic = e.sub(e.call("log", e.above(z, 10.0)), series)
    out = e.select(e.cmp("<", z, e.c(10.0)), pieces, asymptotic)
    return e.select(e.cmp("<", z, e.c(2.0)), near, out)


def digamma(e, x):
    if e.f is F32:
        return _in_f64(e, "digamma", x)
    negative = e.cmp("<=", x, e.c(0.0))
    z = e.select(negative, e.sub(e.c(1.0), x), x)
    pos = _digamma_pos(e, e.clamp(z, 0.0, 1.7976931348623157e308))
    r = _frac_to_nearest(e, x)
    ar = e.abs(e.select(e.isnan(r), e.c(0.25), r))
    # cot(pi r) = sin(pi (1/2 - |r|)) / sin(pi |r|) with the sign of r: 1/2 - |r| is exact, so it is 0 at
    # the half-integers (cos(pi r) of a rounded pi r is not)
    cot = e.copysign(e.div(e.call("sin", _pi_times(e, e.sub(e.c(0.5), ar))), e.call("sin", _pi_times(e, ar))), r)
    reflected = e.sub(pos, e.mul(e.c(math.pi), cot))
    out = e.select(negative, reflected, pos)
    pole = e.and_(negative, e.cmp("==", r, e.c(0.0)))         # 0, -1, -2, ... and every float below -2**52
    out = e.select(e.cmp("==", x, e.c(math.inf)), x, out)
    return e.select(e.or_(pole, e.or_(e.isnan(x), e.cmp("==", x, e.c(-math.inf)))), e.c(math.nan), out)


# ---- zeta, polygamma -----------------------------------------------------------------------------------

def _two_sum(e, a, b):
    """(a + b rounded, its rounding error)."""
    total = e.add(a, b)
    bb = e.sub(total, a)
    return total, e.add(e.sub(a, e.sub(total, bb)), e.sub(b, bb))


def _zeta_pos(e, s, q, q_lo):
    """Euler-Maclaurin for s > 1 and 0 < q + q_lo < inf. Each base q + k is rounded, and a power's
    error grows as s times the base's: every power is corrected by the base's rounding error."""
    neg_s = e.neg(s)

    def power(k: float):
        """((q + k)**-s with q + k = base + err exactly, to first order; base and err)."""
        base, err = _two_sum(e, q, e.c(k))
        err = e.add(err, q_lo)
        p = e.call("pow", base, neg_s)
        return e.fma(p, e.div(e.mul(neg_s, err), base), p), base, err

    total = power(0.0)[0]
    for k in range(1, _ZETA_TERMS):
        total = e.add(total, power(float(k))[0])
    t0, a, a_lo = power(float(_ZETA_TERMS))
    integral = e.div(e.fma(t0, a_lo, e.mul(t0, a)), e.sub(s, e.c(1.0)))   # a**(1 - s) / (s - 1)
    inv_a = e.div(e.c(1.0), a)
    factor = e.mul(s, inv_a)                                  # s (s + 1) ... (s + 2j - 2) / a**(2j - 1)
    correction = e.mul(factor, e.c(_ZETA_BERNOULLI[0]))
    for j, b in enumerate(_ZETA_BERNOULLI[1:], start=1):
        factor = e.mul(factor, e.mul(e.mul(e.add(s, e.c(2.0 * j - 1)), inv_a), e.mul(e.add(s, e.c(2.0 * j)), inv_a)))
        correction = e.fma(factor, e.c(b), correction)
    return e.add(total, e.add(integral, e.mul(t0, e.add(e.c(0.5), correction))))


def zeta(e, s, q):
    if e.f is F32:
        return _in_f64(e, "zeta", s, q)
    zero, one = e.c(0.0), e.c(1.0)
    positive = e.cmp(">", q, zero)
    qs = e.clamp(q, -1e15, 1e300)
    f = e.sub(qs, e.floor(qs))                                # q's fraction (exact), for q < 0
    ss = e.clamp(s, 1.0, 1e300)
    f_ok = e.select(e.cmp(">", f, zero), f, e.c(0.5))
    first = _zeta_pos(e, ss, e.select(positive, qs, f_ok), zero)
    reflect = e.sub(_zeta_pos(e, ss, *_two_sum(e, one, e.neg(f_ok))), _zeta_pos(e, ss, *_two_sum(e, one, e.neg(qs))))
    s_int = e.cmp("==", e.floor(s), s)
    half = e.mul(s, e.c(0.5))
    s_even = e.and_(s_int, e.cmp("==", e.floor(half), half))
    out = e.select(positive, first, e.add(first, e.select(s_even, reflect, e.neg(reflect))))
    pole = e.and_(e.cmp("<=", q, zero), e.cmp("==", e.floor(q), q))
    out = e.select(e.and_(e.cmp("<", q, zero), e.not_(s_int)), e.c(math.nan), out)
    out = e.select(pole, e.select(s_even, e.c(math.inf), e.c(math.nan)), out)
    out = e.select(e.cmp("==", s, one), e.c(math.inf), out)
    bad = e.or_(e.not_(e.cmp(">=", s, one)), e.or_(e.cmp("==", s, e.c(math.inf)), e.cmp("==", q, e.c(math.inf))))
    return e.select(e.or_(bad, e.isnan(q)), e.c(math.nan), out)


def polygamma(e, m, x):
    if e.f is F32:
        return _in_f64(e, "polygamma", m, x)
    m_int = e.and_(e.cmp("==", e.floor(m), m), e.cmp(">=", m, e.c(0.0)))
    order = e.select(m_int, m, e.c(1.0))
    index = e.itrunc(e.to_int(e.clamp(order, 0.0, float(len(_FACTORIAL_BITS) - 1))), 32)
    factorial = e.from_bits(e.load(e.table("factorials_f64", 64, _FACTORIAL_BITS), index))
    half = e.mul(order, e.c(0.5))
    sign = e.select(e.cmp("==", e.floor(half), half), e.c(-1.0), e.c(1.0))
    series = e.mul(e.mul(sign, factorial), e.call("zeta", e.add(order, e.c(1.0)), x))
    out = e.select(e.cmp("==", m, e.c(0.0)), e.call("digamma", x), series)
    return e.select(e.and_(m_int, e.not_(e.isnan(x))), out, e.c(math.nan))
