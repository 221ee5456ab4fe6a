"""tan, branch-free, on sin and cos's range reduction: x = n pi/2 + r + r_lo (trig.cody_waite_pair below
trig.SINCOS_BIG), then tan(r + r_lo) for even n and -1 / tan(r + r_lo) for odd n. tan(r) = r + r**3 T(r**2)
on |r| <= 0.8 (our own Chebyshev fits, mpmath.chebyfit at 40 digits) with the last addition's rounding
error and r_lo (1 + tan**2) kept, so the reciprocal is corrected by its remainder and the result rounds
about once. Large arguments are the rare piece: float64 reduces them by Payne-Hanek, float32 calls
float64's tan (its reduction rounded to float32 would cost float32's tan up to 1.3 ulp).
"""

from __future__ import annotations

from ember.backends.math import trig
from ember.backends.math.emitter import Emitter, Value
from ember.backends.math.formats import F32
from ember.backends.math.power import in_f64

# (tan(s) - s) / s**3 on s**2 <= 0.8**2, lowest power first: absolute error 8.8e-10 (float32), 8.8e-19
_TAN = {
    "f32": (0.3333333326806754, 0.13333346360041165, 0.05396402369569466, 0.021921312418983516,
            0.008555599547271994, 0.0045629125731024055, -0.00017359662356488892, 0.0018747161992544057),
    "f64": (0.3333333333333333, 0.13333333333333386, 0.0539682539681853, 0.02186948853974379,
            0.008863235431662838, 0.003592129658320219, 0.0014558168709794333, 0.0005901576405454361,
            0.00023844175690762847, 9.95392560796946e-05, 3.198764409477902e-05, 3.059450311373487e-05,
            -1.4549155110714343e-05, 2.3125062039069275e-05, -1.1501444999640258e-05, 4.335915618762074e-06),
}


def _tan_of_reduced(e, r, r_lo, odd):
    """tan(r + r_lo) where `odd` is false, -1 / tan(r + r_lo) where it is true, for |r| <= 0.8."""
    small = 2.0 ** (-(e.f.mant // 2) - 3)                # below, tan(r) rounds to r: no subnormal r**3
    tiny = e.cmp("<", e.abs(r), e.c(small))
    w = e.select(tiny, e.c(small), r)
    z = e.mul(w, w)
    corr = e.select(tiny, e.c(0.0), e.mul(e.mul(w, z), e.poly(z, _TAN[e.f.name])))
    t = e.add(r, corr)
    t_lo = e.fma(r_lo, e.fma(t, t, e.c(1.0)), e.add(e.sub(r, t), corr))   # |corr| < |r|: Fast2Sum
    one, zero = e.c(1.0), e.c(0.0)
    num, den = e.select(odd, e.neg(one), t), e.select(odd, t, one)      # one division: -1 / t, or t / 1
    q = e.div(num, den)
    q_lo = e.div(e.sub(e.fma(e.neg(q), den, num), e.mul(q, e.select(odd, t_lo, zero))), den)
    return e.add(q, e.select(odd, q_lo, t_lo))


def _tan_big(e, x, ax):
    """The rare piece: tan(x) for |x| >= SINCOS_BIG (Payne-Hanek in float64; float32 calls float64's tan)."""
    if e.f is F32:
        return in_f64(e, "tan", x)
    r, n = trig.payne_hanek_f64(e, ax)
    r = e.select(e.cmp("<", x, e.c(0.0)), e.neg(r), r)
    odd = e.icmp("!=", e.and_(n, e.i(1, 64)), e.i(0, 64))
    return _tan_of_reduced(e, r, e.c(0.0), odd)


def tan(e: Emitter, x: Value) -> Value:
    """tan(x) for every finite x; NaN at infinities and NaN, -0 kept."""
    limit = trig.SINCOS_BIG[e.f.name]
    small = e.cmp("<", e.abs(x), e.c(limit))            # false for NaN
    n, r, r_lo = trig.cody_waite_pair(e, e.select(small, x, e.c(0.0)))
    odd = e.cmp("!=", e.sub(n, e.mul(e.c(2.0), e.floor(e.mul(n, e.c(0.5))))), e.c(0.0))
    out = e.select(small, _tan_of_reduced(e, r, r_lo, odd), e.rare("tan_big", _tan_big, x, limit))
    return e.select(e.cmp("==", x, e.c(0.0)), x, out)   # keeps -0
