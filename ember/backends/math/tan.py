"""tan, branch-free, on sin and cos's range reduction: x = n pi/2 + r (trig.cody_waite below
trig.SINCOS_BIG, Payne-Hanek as a rare piece above), then tan(r) for even n and -1 / tan(r) for odd n.
tan(r) = r + r**3 T(r**2) on |r| <= 0.8 (our own Chebyshev fit, mpmath.chebyfit at 40 digits) with the
last addition's rounding error kept, so the reciprocal is corrected by its remainder and rounds about
once. float32 evaluates the float64 algorithm and rounds once (float32 inputs below 2**30 reduce by
Cody-Waite in float64).
"""

from __future__ import annotations

from ember.backends.math import trig
from ember.backends.math.formats import F32
from ember.backends.math.power import in_f64

# (tan(s) - s) / s**3 on s**2 <= 0.8**2: absolute error 8.8e-19, lowest power first
_TAN = (0.3333333333333333, 0.13333333333333386, 0.0539682539681853, 0.02186948853974379,
        0.008863235431662838, 0.003592129658320219, 0.0014558168709794333, 0.0005901576405454361,
        0.00023844175690762847, 9.95392560796946e-05, 3.198764409477902e-05, 3.059450311373487e-05,
        -1.4549155110714343e-05, 2.3125062039069275e-05, -1.1501444999640258e-05, 4.335915618762074e-06)


def _tan_of_reduced(e, r, odd):
    """tan(r) where `odd` is false, -1 / tan(r) where it is true, for |r| <= 0.8."""
    z = e.mul(r, r)
    corr = e.mul(e.mul(r, z), e.poly(z, _TAN))
    t = e.add(r, corr)
    t_lo = e.add(e.sub(r, t), corr)                      # |corr| < |r|: Fast2Sum
    one = e.c(1.0)
    den = e.select(odd, t, one)                         # one division: -1 / t, or t / 1
    q = e.div(e.select(odd, e.neg(one), t), den)
    q_lo = e.div(e.sub(e.fma(e.neg(q), den, e.select(odd, e.neg(one), t)), e.mul(q, e.select(odd, t_lo, e.c(0.0)))),
                 den)
    return e.add(q, e.select(odd, q_lo, t_lo))


def _tan_big(e, x, ax):
    """The rare piece: tan(x) for |x| >= SINCOS_BIG, reduced by Payne-Hanek."""
    r, n = trig.payne_hanek_f64(e, ax)
    negative = e.cmp("<", x, e.c(0.0))
    r = e.select(negative, e.neg(r), r)
    odd = e.icmp("!=", e.and_(n, e.i(1, 64)), e.i(0, 64))
    return _tan_of_reduced(e, r, odd)


def _tan(e, x):
    limit = trig.SINCOS_BIG[e.f.name]
    small = e.cmp("<", e.abs(x), e.c(limit))            # false for NaN
    n, r = trig.cody_waite(e, e.select(small, x, e.c(0.0)))
    odd = e.cmp("!=", e.sub(n, e.mul(e.c(2.0), e.floor(e.mul(n, e.c(0.5))))), e.c(0.0))
    out = e.select(small, _tan_of_reduced(e, r, odd), e.rare("tan_big", _tan_big, x, limit))
    return e.select(e.cmp("==", x, e.c(0.0)), x, out)   # keeps -0


def tan(e, x):
    """tan(x) for every finite x; NaN at infinities and NaN, -0 kept."""
    return in_f64(e, "tan", x) if e.f is F32 else _tan(e, x)
