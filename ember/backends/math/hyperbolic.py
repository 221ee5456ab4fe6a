"""tanh and logistic: float32 tanh from a rational fit and exp with one shared division, float64 tanh
from expm1 in musl's three ranges, logistic from exp(-|x|) with one division, the rounding errors carried
so each rounds about once."""

from __future__ import annotations

import math

from ember.backends.math.emitter import Emitter, Value
from ember.backends.math.exp_log import LOG2E, expm1_parts, expm1_poly, reduce_ln2, two_sum
from ember.backends.math.formats import F32

TANH_BIG, TANH_MID = 0.5493061443340549, 0.25541281188299536   # log(3)/2, log(5/3)/2


def div_dd(e: Emitter, n: Value, n_lo: Value, d: Value, d_lo: Value):
    """(n + n_lo) / (d + d_lo) as hi + lo."""
    q = e.div(n, d)
    rem = e.sub(e.add(e.fma(e.neg(q), d, n), n_lo), e.mul(q, d_lo))
    return q, e.div(rem, d)


# float32 tanh below 0.75: x + x**3 N(x**2) / D(x**2), N/D a relative minimax fit of (tanh(x)/x - 1)/x**2
# (error 2**-28.8; Loeb's linearization with Lawson weights, then coefficients rounded to float32)
_TANH_F32_SPLIT = 0.75
_TANH_F32_N = (-0.3333333432674408, -0.001734705874696374, 5.936012894380838e-05)
_TANH_F32_D = (1.0, 0.40520399808883667)
_TANH_F32_BIG = 9.1          # tanh rounds to 1 from 9.0109 on
# (exp(r) - 1 - r) / r**2 on |r| <= ln2/2, minimax for exp's relative error (2**-28.3; Taylor needs a term more)
_TANH_F32_EXP = (0.4999999403953552, 0.1666651964187622, 0.04166839271783829, 0.008368780836462975,
                 0.0013814467238262296)


def tanh_f32(e: Emitter, x: Value) -> Value:
    """float32 tanh in one path with one division: for a = |x| < 0.75, a + a**3 N/D (the quotient is a
    correction below 0.19 a, so its rounding errors shrink); above, 1 - 2 / (exp(2a) + 1) with exp(2a) =
    2**n (1 + p) and 2**n + 1 + 2**n p rounded once (below 0.75 the 1 - would lose tanh's relative
    accuracy). Both numerators and denominators are computed and selected before the one division.
    The plain rational a P(a**2) / Q(a**2) of XLA and Eigen costs 0.6x as much but reached 4.9 ulp with
    our own (5, 4) fit (3.6 even with its polynomials rounded exactly): two rounded polynomials near 1
    put up to 1 ulp each into the quotient. Max error 1.07 ulp, measured over all float32 inputs."""
    a = e.below(e.abs(x), _TANH_F32_BIG)                     # NaN -> 9.1 here, restored at the end
    w = e.above(a, 2.0 ** -16)                               # below, tanh(a) = a; no subnormal intermediates
    u = e.mul(w, w)
    small_num, small_den = e.mul(e.mul(w, u), e.poly(u, _TANH_F32_N)), e.poly(u, _TANH_F32_D)
    z = e.add(w, w)
    n = e.rint(e.mul(z, e.c(LOG2E)))
    # one reduction step: ln2's float32 rounding (2e-9) times n <= 27 is damped by 2 exp(2a) / (exp(2a) + 1)**2
    r = e.fma(e.neg(n), e.c(math.log(2.0)), z)
    p = e.fma(e.mul(r, r), e.poly(r, _TANH_F32_EXP), r)
    two_n = e.pow2(e.to_int(n))                              # n <= 27: exact
    big_den = e.fma(two_n, p, e.add(two_n, e.c(1.0)))        # exp(2a) + 1
    small = e.cmp("<", a, e.c(_TANH_F32_SPLIT))
    q = e.div(e.select(small, small_num, e.c(-2.0)), e.select(small, small_den, big_den))
    y = e.add(e.select(small, w, e.c(1.0)), q)
    y = e.select(e.cmp("<", a, e.c(2.0 ** -16)), a, y)
    return e.select(e.isnan(x), x, e.copysign(y, x))


def tanh(e: Emitter, x: Value) -> Value:
    """musl's tanh, from t = expm1(+-2|x|) in three ranges so no range subtracts nearly equal numbers;
    t, 2 + t and the quotient carry their rounding errors, so the result rounds about once."""
    if e.f is F32:
        return tanh_f32(e, x)
    a = e.min(e.abs(x), e.c(22.0))                           # tanh(22) rounds to 1; no inf, no subnormal
    big, mid = e.cmp(">", a, e.c(TANH_BIG)), e.cmp(">", a, e.c(TANH_MID))
    t, t_lo = expm1_parts(e, e.select(mid, e.add(a, a), e.mul(a, e.c(-2.0))))
    d, d_lo = two_sum(e, e.c(2.0), t)
    n = e.select(big, e.c(2.0), e.select(mid, t, e.neg(t)))
    n_lo = e.select(big, e.c(0.0), e.select(mid, t_lo, e.neg(t_lo)))
    q, q_lo = div_dd(e, n, n_lo, d, e.add(d_lo, t_lo))
    one_minus, err = two_sum(e, e.c(1.0), e.neg(q))
    y = e.select(big, e.add(one_minus, e.sub(err, q_lo)), e.add(q, q_lo))
    y = e.select(e.cmp(">=", a, e.c(22.0)), e.c(1.0), y)
    return e.select(e.isnan(x), x, e.copysign(y, x))


def logistic(e: Emitter, x: Value) -> Value:
    """1 / (1 + t) for x >= 0, t / (1 + t) below, t = exp(-|x|) = 2**k (1 + p), with one division: the
    numerator is selected first, the denominator 1 + 2**k + 2**k p is summed exactly, and the quotient is
    corrected by its remainder (1 / (1 + t) is q for x >= 0 and 1 - 2**k q below: no second division).
    The quotient is scaled by 2**k last, in two exact steps, so no intermediate is subnormal and a
    subnormal result rounds once; 2**k in the denominator stops
    at 2**-(mant + 10), where 1 + t rounds to 1 with room to spare."""
    f = e.f
    n, r, r_lo = reduce_ln2(e, e.above(e.neg(e.abs(x)), f.exp_range[0]))    # NaN -> the clamp; restored below
    p, p_lo = expm1_poly(e, r, r_lo)                                        # exp(r) - 1 = p + p_lo
    k = e.to_int(n)
    two_k = e.pow2(e.select(e.icmp("<", k, e.i(-f.mant - 10)), e.i(-f.mant - 10), k))
    s = e.add(e.c(1.0), two_k)
    s_lo = e.sub(two_k, e.sub(s, e.c(1.0)))                                 # 1 + 2**k = s + s_lo exactly
    m = e.mul(two_k, p)
    den = e.add(s, m)                                                       # |m| < s: Fast2Sum
    den_lo = e.add(e.add(e.sub(s, den), m), e.fma(two_k, p_lo, s_lo))
    pos = e.cmp(">=", x, e.c(0.0))
    one_p = e.add(e.c(1.0), p)
    num = e.select(pos, e.c(1.0), one_p)
    num_lo = e.select(pos, e.c(0.0), e.add(e.add(e.sub(e.c(1.0), one_p), p), p_lo))
    q = e.div(num, den)
    rem = e.fma(e.neg(q), den_lo, e.add(e.fma(e.neg(q), den, num), num_lo))
    inv_den = e.select(pos, q, e.fma(e.neg(two_k), q, e.c(1.0)))
    shift = f.mant + 8                                      # k + shift >= -(bias - 5): 2**(k + shift) is normal
    scaled = e.mul(e.fma(rem, inv_den, q), e.pow2(e.iadd(e.select(pos, e.i(0), k), e.i(shift))))
    out = e.mul(scaled, e.c(2.0 ** -shift))                   # exact, or one rounding to a subnormal
    # 0 where exp(-x) overflows, as the NumPy rule (SciPy's expit) and XLA give, not the subnormal
    out = e.select(e.cmp("<", x, e.c(-f.exp_overflow)), e.c(0.0), out)
    return e.select(e.isnan(x), x, out)
