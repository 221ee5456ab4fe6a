"""pow (C99's special cases around |x|**y from a double-double log and exp; float32 in float64, rounded
once), sqrt and rsqrt."""

from __future__ import annotations

import math
from collections.abc import Callable

from ember.backends.math.emitter import Emitter, Value
from ember.backends.math.exp_log import exp_unscaled, split_mantissa, two_prod, two_sum
from ember.backends.math.formats import F32, F64


def in_f64(e: Emitter, name: str, *args: Value) -> Value:
    """A float32 function evaluated by its float64 version and rounded once (error <= 0.5 ulp + 2**-29)."""
    wide = [e.convert(a, F64) for a in args]
    return e.convert(e.call(name, *wide, fmt=F64), F32)


def log_dd(e: Emitter, x: Value):
    """log(x) as a double-double (hi, lo) for a positive finite normal-or-subnormal float64 x."""
    tiny = e.cmp("<", x, e.c(2.0 ** -1022))
    xs = e.select(tiny, e.mul(x, e.c(2.0 ** 54)), x)
    k, f = split_mantissa(e, xs)
    k = e.select(tiny, e.sub(k, e.c(54.0)), k)
    d = e.add(e.c(2.0), f)
    d_lo = e.sub(f, e.sub(d, e.c(2.0)))                    # 2 + f = d + d_lo exactly
    s = e.div(f, d)
    s_lo = e.div(e.sub(e.fma(e.neg(s), d, f), e.mul(s, d_lo)), d)   # s + s_lo = f / (2 + f)
    z, z_lo = two_prod(e, s, s)
    z_lo = e.fma(e.add(s, s), s_lo, z_lo)
    c3, c3_lo = two_prod(e, z, s)
    c3_lo = e.add(c3_lo, e.fma(z, s_lo, e.mul(z_lo, s)))
    two_thirds, two_thirds_lo = 2.0 / 3.0, 3.700743415417188e-17
    w, w_lo = two_prod(e, c3, e.c(two_thirds))
    w_lo = e.add(w_lo, e.fma(c3, e.c(two_thirds_lo), e.mul(c3_lo, e.c(two_thirds))))
    tail = e.mul(e.mul(c3, z), e.poly(z, [2.0 / (2 * j + 1) for j in range(2, 2 + e.f.log_terms)]))
    hi, lo = e.f.ln2_short
    a, a_lo = two_sum(e, e.mul(k, e.c(hi)), e.add(s, s))
    b, b_lo = two_sum(e, a, w)
    low = e.add(e.add(e.add(a_lo, b_lo), e.add(e.add(s_lo, s_lo), w_lo)), e.fma(k, e.c(lo), tail))
    out = e.add(b, low)
    return out, e.sub(low, e.sub(out, b))


def pow_core_f64(e: Emitter, ax: Value, y: Value) -> Value:
    """|x|**y for finite positive |x| and finite y: a double-double log, then exp, ~1 ulp."""
    lg, lg_lo = log_dd(e, ax)
    z, z_lo = two_prod(e, y, lg)
    hi, lo, k = exp_unscaled(e, z, e.fma(y, lg_lo, z_lo))
    return e.scale(e.add(hi, lo), k)


def pow(e: Emitter, x: Value, y: Value) -> Value:
    """np.power for floats: C99 pow's special cases around |x|**y."""
    if e.f is F32:
        return in_f64(e, "pow_f32_in_f64", x, y)
    return pow_specials(e, x, y, pow_core_f64)


def pow_f32_in_f64(e: Emitter, x: Value, y: Value) -> Value:
    """float32 pow in float64: exp(y log|x|) with plain float64 log and exp is far below half an f32 ulp."""
    return pow_specials(e, x, y, lambda e, ax, y: e.call("exp", e.mul(y, e.call("log", ax))))


def pow_specials(e: Emitter, x: Value, y: Value, core: Callable) -> Value:
    one, zero, inf = e.c(1.0), e.c(0.0), e.c(math.inf)
    ax, ay = e.abs(x), e.abs(y)
    x_ok = e.and_(e.cmp("<", ax, inf), e.cmp(">", ax, zero))
    y_ok = e.cmp("<", ay, inf)
    out = core(e, e.select(x_ok, ax, one), e.select(y_ok, y, zero))
    y_int = e.cmp("==", e.floor(y), y)
    half = e.mul(y, e.c(0.5))
    y_odd = e.and_(y_int, e.cmp("!=", e.floor(half), half))
    x_neg = e.cmp("<", x, zero)
    out = e.select(e.and_(x_neg, y_odd), e.neg(out), out)
    out = e.select(e.and_(x_neg, e.and_(y_ok, e.not_(y_int))), e.c(math.nan), out)
    # x = +-0 or +-inf: 0 or inf by the sign of y (and of the product), odd integer y keeps x's sign
    y_neg = e.cmp("<", y, zero)
    at_zero = e.select(y_neg, inf, zero)
    edge = e.select(e.cmp("==", ax, zero), at_zero, e.select(y_neg, zero, inf))
    edge = e.select(e.and_(x_neg, y_odd), e.neg(edge), e.select(y_odd, e.copysign(edge, x), edge))
    out = e.select(e.not_(x_ok), edge, out)
    # y = +-inf: inf when |x| < 1 and y < 0, or |x| > 1 and y > 0; 0 otherwise; 1 at |x| = 1
    grows = e.icmp("==", e.cmp("<", ax, one), y_neg, signed=False)
    at_inf = e.select(e.cmp("==", ax, one), one, e.select(grows, inf, zero))
    out = e.select(e.cmp("==", ay, inf), at_inf, out)
    out = e.select(e.or_(e.isnan(x), e.isnan(y)), e.c(math.nan), out)
    return e.select(e.or_(e.cmp("==", y, zero), e.cmp("==", x, one)), one, out)


def sqrt(e: Emitter, x: Value) -> Value:
    return e.sqrt(x)


def rsqrt(e: Emitter, x: Value) -> Value:
    return e.div(e.c(1.0), e.sqrt(x))
