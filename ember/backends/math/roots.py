"""The cube root: x = 2**(3q + j) m with m in [1, 2) and j in {0, 1, 2}, an estimate P(m) cbrt(2**j) (relative
error 1.2e-5), then Newton steps t - (t**3 - y) / (3 t**2) on y = 2**j m: one for float32, two for float64,
the last with its residual t**3 - y computed exactly enough by fma that the step rounds once (0.5 ulp plus
2**-30 float32, 2**-60 float64). Exact cubes give exact roots. Subnormals are scaled by 2**(3 s) first; zeros,
infinities and NaN are returned as they are.
"""

from __future__ import annotations

import math

from ember.backends.math.formats import F32

# cbrt(m) on [1, 2], lowest power first (mpmath.chebyfit at 40 digits, max error 1.24e-5)
_CBRT_P = (0.5092481335492415, 0.7117423866025924, -0.2939541180848237, 0.08307903547963541, -0.010102212336338642)
_CBRT_2, _CBRT_4 = 1.2599210498948732, 1.5874010519681996
_SUBNORMAL_SCALE = {"f32": 24, "f64": 54}                     # multiples of 3 that make subnormals normal


def _newton(e, t, y, exact: bool):
    """One Newton step toward cbrt(y) from t; `exact` computes t**3 - y with the rounding of t**2 kept."""
    t2 = e.mul(t, t)
    if exact:
        t2_lo = e.fma(t, t, e.neg(t2))
        res = e.fma(t2_lo, t, e.fma(t2, t, e.neg(y)))
    else:
        res = e.fma(t2, t, e.neg(y))
    return e.sub(t, e.div(res, e.mul(e.c(3.0), t2)))


def cbrt(e, x):
    """cbrt(x), with x's sign; +-0, +-inf and NaN unchanged."""
    f = e.f
    s = _SUBNORMAL_SCALE[f.name]
    ax = e.abs(x)
    tiny = e.cmp("<", ax, e.c(2.0 ** (1 - f.bias)))
    xs = e.select(tiny, e.mul(ax, e.c(2.0 ** s)), ax)
    ix = e.bits(xs)
    m = e.from_bits(e.or_(e.and_(ix, e.i((1 << f.mant) - 1)), e.i(f.bias << f.mant)))     # in [1, 2)
    k = e.to_float(e.isub(e.lshr(ix, e.i(f.mant)), e.i(f.bias)))
    k = e.select(tiny, e.sub(k, e.c(s)), k)
    q = e.floor(e.div(k, e.c(3.0)))                            # exact: |k| < 2**11
    j = e.sub(k, e.mul(e.c(3.0), q))                           # 0, 1 or 2
    j1, j2 = e.cmp("==", j, e.c(1.0)), e.cmp("==", j, e.c(2.0))
    y = e.mul(m, e.select(j1, e.c(2.0), e.select(j2, e.c(4.0), e.c(1.0))))                  # exact
    t = e.mul(e.poly(m, _CBRT_P), e.select(j1, e.c(_CBRT_2), e.select(j2, e.c(_CBRT_4), e.c(1.0))))
    if f is not F32:
        t = _newton(e, t, y, exact=False)
    t = _newton(e, t, y, exact=True)
    out = e.copysign(e.mul(t, e.pow2(e.to_int(q))), x)       # 2**q is normal, the product exact
    finite = e.and_(e.cmp(">", ax, e.c(0.0)), e.cmp("<", ax, e.c(math.inf)))
    return e.select(finite, out, x)
