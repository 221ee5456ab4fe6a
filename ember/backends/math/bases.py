"""Exponential and logarithm in bases 2 and 10, and log(exp(x) + exp(y)) in bases e and 2.

exp2 splits x = n + r with n = rint(x) (|r| <= 1/2, exact) and evaluates 2**r = 1 + r Q(r), Q a Chebyshev fit
of (2**r - 1) / r, rounded once by an fma and scaled by 2**n last: an integer x gives 2**x exactly. log2 and
log10 take x = 2**k m (m in [sqrt(1/2), sqrt(2))), log(m) = log1p(f) as an unrounded pair (fdlibm's
f - f**2/2 + s (f**2/2 + R(s**2)), s = f / (2 + f), with the roundings of f**2/2 and of the subtraction kept),
then k log_b(2) + log1p(f) / ln(b) summed with its error terms and rounded once: exact results (log2(8),
log10(1000)) come out exact. logaddexp and logaddexp2 are JAX's and NumPy's formula, max + log1p(exp(-|x - y|)),
x + y where x - y is NaN (a NaN, or infinities of one sign), carried in pairs so the result rounds about once.
"""

from __future__ import annotations

import math

from ember.backends.math.exp_log import exp_unscaled, split_mantissa, two_prod, two_sum
from ember.backends.math.formats import F32

# (2**r - 1) / r on [-1/2, 1/2], lowest power first: mpmath.chebyfit at 40 digits, max error 7.8e-9 (float32,
# degree 5) and 1.7e-19 (float64, degree 11); the result 1 + r Q(r) is within 0.85 ulp (bound), 0.8 measured
_EXP2_Q = {
    "f32": (0.6931471880262288, 0.24022650760568126, 0.05550357114219078, 0.009618082557277852,
            0.0013390863364671234, 0.0001545316294512069),
    "f64": (0.6931471805599453, 0.24022650695910072, 0.055504108664821625, 0.00961812910762848,
            0.001333355814640647, 0.00015403530393370734, 1.5252733841556773e-05, 1.3215486808705563e-06,
            1.0178057087733941e-07, 7.0548973041554995e-09, 4.4558179083360645e-10, 2.5729324177362305e-11),
}
# 1 / ln 2 and 1 / ln 10 = hi + lo, hi rounded to each format (lo from 40 digits)
_INV_LN2 = {"f64": (1.4426950408889634, 2.0355273740931033e-17), "f32": (1.4426950216293335, 1.925962991127e-08)}
_INV_LN10 = {"f64": (0.4342944819032518, 1.098319650216765e-17), "f32": (0.4342944920063019, -1.010305005223e-08)}
# log10(2) = hi + lo, hi with 12 significant bits so k hi is exact for every exponent k of both formats
_LOG10_2 = (0.301025390625, 4.605038981195214e-06)


def exp2(e, x):
    """2**x: 2**r for r = x - rint(x), scaled by 2**rint(x) in two steps (subnormal results round once)."""
    f = e.f
    xc = e.clamp(x, -(f.bias + f.mant + 2.0), f.bias + 2.0)     # NaN -> the low end; restored below
    n = e.rint(xc)
    r = e.sub(xc, n)                                            # exact
    r = e.select(e.cmp("<", e.abs(r), e.c(2.0 ** -(f.mant + 3))), e.c(0.0), r)   # 2**r rounds to 1 there
    y = e.fma(r, e.poly(r, _EXP2_Q[f.name]), e.c(1.0))
    return e.select(e.isnan(x), x, e.scale(y, e.to_int(n)))


def _split(e, x):
    """x = 2**k m with m in [sqrt(1/2), sqrt(2)) for a positive x (subnormals scaled first): k as a float
    and f = m - 1 (exact)."""
    f = e.f
    tiny = e.cmp("<", x, e.c(2.0 ** (1 - f.bias)))
    k, m_minus_1 = split_mantissa(e, e.select(tiny, e.mul(x, e.c(2.0 ** f.subnormal_scale)), x))
    return e.select(tiny, e.sub(k, e.c(f.subnormal_scale)), k), m_minus_1


def _log1p_pair(e, f):
    """log(1 + f) = hi + lo for |f| <= sqrt(2) - 1, lo holding the roundings of f**2/2 and of f - f**2/2."""
    s = e.div(f, e.add(e.c(2.0), f))
    z = e.mul(s, s)
    r = e.mul(z, e.poly(z, [2.0 / (2 * j + 1) for j in range(1, 1 + e.f.log_terms)]))
    half_f = e.mul(e.c(0.5), f)                                 # exact
    h = e.mul(half_f, f)
    h_lo = e.fma(half_f, f, e.neg(h))                           # f**2/2 = h + h_lo exactly
    hi = e.sub(f, h)
    err = e.sub(e.sub(f, hi), h)                                # f - h = hi + err exactly (|h| < |f|)
    return hi, e.add(e.sub(err, h_lo), e.mul(s, e.add(h, r)))


def _log_pair(e, x, inv_ln: tuple[float, float], log_2: tuple[float, float]):
    """log_b(x) = w + tail, unrounded, for a positive finite x: k log_b(2)'s hi part and log1p's hi times
    1/ln(b)'s hi summed exactly, every smaller term in the tail."""
    k, f = _split(e, x)
    hi, lo = _log1p_pair(e, f)
    p = e.mul(hi, e.c(inv_ln[0]))
    p_lo = e.fma(hi, e.c(inv_ln[0]), e.neg(p))                 # hi / ln(b) = p + p_lo exactly
    w, w_lo = two_sum(e, e.mul(k, e.c(log_2[0])), p)           # k log_b(2)'s hi part is exact
    return w, e.fma(k, e.c(log_2[1]), e.fma(hi, e.c(inv_ln[1]), e.fma(lo, e.c(inv_ln[0]), e.add(w_lo, p_lo))))


def _log_base(e, x, inv_ln: tuple[float, float], log_2: tuple[float, float]):
    """k log_b(2) + log1p(f) / ln(b), rounded once, with log's special values."""
    out = e.add(*_log_pair(e, x, inv_ln, log_2))
    out = e.select(e.cmp("==", x, e.c(math.inf)), x, out)
    out = e.select(e.cmp("==", x, e.c(0.0)), e.c(-math.inf), out)
    return e.select(e.ucmp("<", x, e.c(0.0)), e.c(math.nan), out)    # NaN below 0 and at NaN


def log2(e, x):
    """log2(x): k + log1p(f) / ln 2."""
    return _log_base(e, x, _INV_LN2[e.f.name], (1.0, 0.0))


def log10(e, x):
    """log10(x): k log10(2) + log1p(f) / ln 10."""
    return _log_base(e, x, _INV_LN10[e.f.name], _LOG10_2)


def _log_add(e, x, y, base2: bool):
    """max(x, y) + log_b(1 + b**-|x - y|), x + log_b(2) where x == y (so logaddexp2(-1, -1) is 0 exactly, as
    NumPy's), x + y where x - y is NaN, with pairs throughout so the result rounds about once: -|x - y| with
    x - y's rounding error, u = b**-|x - y| = (hi + lo) 2**k (exp_log.exp_unscaled, of (x - y) ln 2 as a pair
    for base 2), 1 + u as s + s_lo exactly, log_b(s) as a pair plus s_lo / (s ln b) (log1p's series for
    u < 2**-8), and max(x, y) plus it by two_sum. Where the result cancels (x, y < 0, b**x + b**y near 1)
    its error is below an ulp of max(x, y)."""
    d, d_err = two_sum(e, x, e.neg(y))
    below = e.cmp("<", d, e.c(0.0))
    a = e.select(below, d, e.neg(d))                                    # -|x - y| = a + r
    r = e.select(e.cmp("<", e.abs(d), e.c(math.inf)), e.select(below, d_err, e.neg(d_err)), e.c(0.0))
    if base2:                                                           # (a + r) ln 2 = z + z_lo
        z, z_lo = two_prod(e, a, e.c(e.f.ln2[0]))
        z_lo = e.fma(a, e.c(e.f.ln2[1]), e.fma(r, e.c(e.f.ln2[0]), z_lo))
    else:
        z, z_lo = a, r
    hi, lo, k = exp_unscaled(e, z, z_lo)
    u, u_lo = e.scale(hi, k), e.scale(lo, k)                            # b**-|x - y| <= 1
    s, s_lo = two_sum(e, e.c(1.0), u)
    s_lo = e.add(s_lo, u_lo)
    inv_ln, log_2 = (_INV_LN2[e.f.name], (1.0, 0.0)) if base2 else ((1.0, 0.0), e.f.ln2_short)
    l, l_lo = _log_pair(e, s, inv_ln, log_2)
    l_lo = e.fma(e.div(s_lo, s), e.c(inv_ln[0]), l_lo)
    # for u < 2**-8 (where s_lo would be too large a part of the result), the series: log(1 + u) =
    # u + u**2 P(u), u / ln(b) as a pair and the rest, below 2**-9 of it, rounded beside it
    terms = 4 if e.f is F32 else 7                                      # (2**-8)**terms below an ulp
    u_sq = e.select(e.cmp("<", u, e.c(2.0 ** -(e.f.mant + 17))), e.c(0.0), u)   # no subnormal u**2
    q = e.mul(e.mul(u_sq, u_sq), e.poly(u, [(-1) ** (j + 1) / j for j in range(2, 2 + terms)]))
    p, p_lo = two_prod(e, u, e.c(inv_ln[0]))
    p_lo = e.fma(e.add(u_lo, q), e.c(inv_ln[0]), e.fma(u, e.c(inv_ln[1]), p_lo))
    small = e.cmp("<", u, e.c(2.0 ** -8))
    l, l_lo = e.select(small, p, l), e.select(small, p_lo, l_lo)
    top = e.select(e.cmp(">", x, y), x, y)
    t, t_err = two_sum(e, top, l)
    out = e.select(e.cmp("<", e.abs(top), e.c(math.inf)), e.add(t, e.add(t_err, l_lo)), top)   # +inf: no error
    out = e.select(e.cmp("==", x, y), e.add(x, e.c(1.0 if base2 else math.log(2.0))), out)   # NumPy's
    return e.select(e.isnan(d), e.add(x, y), out)


def logaddexp(e, x, y):
    """log(exp(x) + exp(y)) without overflow."""
    return _log_add(e, x, y, base2=False)


def logaddexp2(e, x, y):
    """log2(2**x + 2**y) without overflow."""
    return _log_add(e, x, y, base2=True)
