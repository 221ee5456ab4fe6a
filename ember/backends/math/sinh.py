"""sinh, cosh, asinh, acosh and atanh, branch-free, one algorithm for float32 and float64 (per-format
constants below).

Near 0 each is x + x**3 P(x**2) (Taylor series for sinh and cosh, our own Chebyshev fits for asinh and
atanh: mpmath.chebyfit at 40 digits), so results keep their relative accuracy down to the subnormals.
Further out sinh and cosh are 2**k (H -+ 2**(-2k-2) / H) with exp(a) / 2 = H 2**k as a (hi, lo) pair
from exp's own reduction, rounded once at the end, with no overflow before the result's own (cosh(710)
is finite, as in NumPy); the inverse functions take the log of an argument carried as (hi, lo)
(log(u + u_lo) = log(u) + u_lo / u folded into log's last step), with fdlibm's forms: the argument never
forms x**2 where it would overflow.
"""

from __future__ import annotations

import math

from ember.backends.math.emitter import Emitter, Value
from ember.backends.math.exp_log import exp_unscaled, log1p_of_reduced, split_mantissa, two_prod, two_sum

# (asinh(s) - s) / s**3 and (atanh(s) - s) / s**3 on s**2 <= 1/4, lowest power first (absolute errors:
# asinh 9.3e-10 and 1.2e-17, atanh 1.3e-9 and 7.2e-18)
_ASINH = {
    "f32": (-0.16666666572814728, 0.07499972893955258, -0.04463002194351939, 0.030156178619349886,
            -0.020526793468189104, 0.009936504309239973),
    "f64": (-0.16666666666666666, 0.0749999999999864, -0.044642857140252436, 0.030381944248546365,
            -0.022372151449922602, 0.01735258771519257, -0.013962235682232349, 0.011526210169675569,
            -0.009591452221673173, 0.007622309427481728, -0.004992717198142511, 0.0018854117655039003),
}
_ATANH = {
    "f32": (0.33333333437307106, 0.19999959336215828, 0.14288286042811285, 0.11050830395223991,
            0.09751940865741168, 0.040916230718241735, 0.1562916538185637),
    "f64": (0.3333333333333333, 0.20000000000000864, 0.14285714285490106, 0.11111111133938968,
            0.09090907881509189, 0.07692345940270638, 0.06665886352701884, 0.05893099692590042,
            0.05160769881147162, 0.05441915418234587, 0.012292448728540531, 0.13557903913692299,
            -0.14450491183414468, 0.21098097885975797),
}
# sinh(s) = s + s**3 S(s**2) and cosh(s) = 1 + s**2 C(s**2) on |s| <= 1: Taylor, to below 2**-32 and 2**-56
_TERMS = {"f32": 5, "f64": 9}
# below _TINY, s + s**3 P(s**2) rounds to s (no subnormal intermediates); from _HUGE on, asinh(a) =
# acosh(a) = log(2a) to the format's precision; from _EXP_FAR on, exp(-a) is below half an ulp of exp(a)
_TINY = {"f32": 2.0 ** -13, "f64": 2.0 ** -30}
_HUGE = {"f32": 2.0 ** 13, "f64": 2.0 ** 28}
_EXP_FAR = {"f32": 10.0, "f64": 22.0}


def _sinh_series(e):
    return tuple(1 / math.factorial(2 * k + 1) for k in range(1, 1 + _TERMS[e.f.name]))


def _cosh_series(e):
    return tuple(1 / math.factorial(2 * k) for k in range(1, 1 + _TERMS[e.f.name]))


def _odd_series(e, a, coeffs):
    """a + a**3 P(a**2) for 0 <= a (a itself below _TINY)."""
    tiny = e.cmp("<", a, e.c(_TINY[e.f.name]))
    w = e.select(tiny, e.c(_TINY[e.f.name]), a)
    z = e.mul(w, w)
    return e.select(tiny, a, e.fma(e.mul(w, z), e.poly(z, coeffs), w))


def _half_exp_pair(e, a, sign: float):
    """exp(a) / 2 + sign exp(-a) / 2 for 1 <= a (sign +-1): exp(a - ln2) = (hi + lo) 2**k, with
    a - ln2's high part exact and its low part passed to exp's reduction, then
    2**k (hi + lo + sign 2**(-2k-2) / (hi + lo)), the second term dropped from _EXP_FAR on."""
    hi, lo = e.f.ln2_short
    h, h_lo, k = exp_unscaled(e, e.sub(a, e.c(hi)), e.c(-lo))
    q = e.div(e.c(1.0), h)
    q_lo = e.div(e.sub(e.fma(e.neg(q), h, e.c(1.0)), e.mul(q, h_lo)), h)     # 1 / (h + h_lo) = q + q_lo
    near = e.cmp("<", a, e.c(_EXP_FAR[e.f.name]))
    factor = e.mul(e.pow2(e.select(near, e.isub(e.i(-2), e.iadd(k, k)), e.i(0))), e.c(sign))
    factor = e.select(near, factor, e.c(0.0))
    s, s_lo = two_sum(e, h, e.mul(factor, q))                                 # factor q is exact
    return e.scale(e.add(s, e.add(e.fma(factor, q_lo, h_lo), s_lo)), k)


def _log_pair(e, u, u_lo, k_extra):
    """log(2**k_extra (u + u_lo)) for a positive normal u (k_extra a float, 0 or 1): log1p of u's mantissa
    with u_lo / u folded into its last rounding."""
    k, f = split_mantissa(e, u)
    return log1p_of_reduced(e, e.add(k, k_extra), f, e.div(u_lo, u))


def _sqrt_pair(e, d, d_lo):
    """sqrt(d + d_lo) = s + s_lo for d >= 0 (0 at 0)."""
    s = e.sqrt(d)
    return s, e.div(e.add(e.fma(e.neg(s), s, d), d_lo), e.above(e.add(s, s), 2.0 ** (1 - e.f.bias)))


def sinh(e: Emitter, x: Value) -> Value:
    """sinh(x): the series below |x| = 1, exp(a)/2 - exp(-a)/2 above; -0, infinities and NaN kept."""
    a = e.abs(x)
    far = _half_exp_pair(e, e.above(a, 1.0), -1.0)
    out = e.select(e.cmp("<", a, e.c(1.0)), _odd_series(e, a, _sinh_series(e)), far)
    return e.select(e.isnan(x), x, e.copysign(out, x))


def cosh(e: Emitter, x: Value) -> Value:
    """cosh(x): 1 + x**2 C(x**2) below |x| = 1, exp(a)/2 + exp(-a)/2 above; NaN kept."""
    a = e.abs(x)
    w = e.above(e.below(a, 1.0), _TINY[e.f.name])          # cosh(_TINY) rounds to 1: no subnormal a**2
    z = e.mul(w, w)
    far = _half_exp_pair(e, e.above(a, 1.0), 1.0)
    out = e.select(e.cmp("<", a, e.c(1.0)), e.fma(z, e.poly(z, _cosh_series(e)), e.c(1.0)), far)
    return e.select(e.isnan(x), x, out)


def _hypot_plus(e, a, sign: float):
    """a + sqrt(a**2 + sign) as (hi, lo) for 1/2 <= a <= _HUGE (sign +-1; a >= 1 for -1)."""
    p, p_lo = two_prod(e, a, a)
    d, d_lo = two_sum(e, p, e.c(sign))
    s, s_lo = _sqrt_pair(e, d, e.add(d_lo, p_lo))
    u, u_lo = two_sum(e, a, s)
    return u, e.add(u_lo, s_lo)


def _log_hypot_plus(e, a, sign: float):
    """log(a + sqrt(a**2 + sign)) for a >= 1/2: from _HUGE on, log(2a) as k + 1 in log's reduction (no a**2)."""
    huge = e.cmp(">=", a, e.c(_HUGE[e.f.name]))
    u, u_lo = _hypot_plus(e, e.below(a, _HUGE[e.f.name]), sign)
    zero = e.c(0.0)
    return _log_pair(e, e.select(huge, a, u), e.select(huge, zero, u_lo), e.select(huge, e.c(1.0), zero))


def asinh(e: Emitter, x: Value) -> Value:
    """asinh(x): the series below 1/2, log(a + sqrt(a**2 + 1)) above; -0, infinities and NaN kept."""
    a = e.abs(x)
    far = _log_hypot_plus(e, e.above(a, 0.5), 1.0)
    out = e.select(e.cmp("<", a, e.c(0.5)), _odd_series(e, e.below(a, 0.5), _ASINH[e.f.name]), far)
    out = e.select(e.cmp("==", a, e.c(math.inf)), a, out)
    return e.select(e.isnan(x), x, e.copysign(out, x))


def acosh(e: Emitter, x: Value) -> Value:
    """acosh(x) = log(x + sqrt(x**2 - 1)) (x**2 - 1 exact as a pair, so accurate near 1); NaN below 1."""
    out = _log_hypot_plus(e, e.above(x, 1.0), -1.0)
    out = e.select(e.cmp("==", x, e.c(math.inf)), x, out)
    return e.select(e.cmp(">=", x, e.c(1.0)), out, e.add(x, e.c(math.nan)))


def atanh(e: Emitter, x: Value) -> Value:
    """atanh(x): the series below 1/2, log(1 + 2a / (1 - a)) / 2 above (1 - a exact, the quotient and the
    sum carried as pairs); +-inf at +-1, NaN beyond."""
    a = e.abs(x)
    one = e.c(1.0)
    w = e.clamp(a, 0.5, 1.0 - 2.0 ** -(e.f.mant + 1))
    den = e.sub(one, w)
    q = e.div(e.add(w, w), den)
    q_lo = e.div(e.fma(e.neg(q), den, e.add(w, w)), den)
    v, v_lo = two_sum(e, one, q)
    far = e.mul(_log_pair(e, v, e.add(v_lo, q_lo), e.c(0.0)), e.c(0.5))
    out = e.select(e.cmp("<", a, e.c(0.5)), _odd_series(e, e.below(a, 0.5), _ATANH[e.f.name]), far)
    out = e.select(e.cmp("==", a, one), e.c(math.inf), out)
    out = e.select(e.cmp(">", a, one), e.c(math.nan), out)
    return e.select(e.isnan(x), x, e.copysign(out, x))
