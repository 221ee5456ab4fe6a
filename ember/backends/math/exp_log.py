"""exp, expm1, log, log1p: Cody-Waite reduction by ln 2 with an fma and a Taylor polynomial (exp), fdlibm's
log decomposition with the atanh series, rounding errors carried in (hi, lo) pairs where the budget needs
them; and the exact sums and products (two_sum, two_prod) the other families share."""

from __future__ import annotations

import math

from ember.backends.math.emitter import Emitter, Value
from ember.backends.math.formats import F32

LOG2E = 1.4426950408889634


def two_sum(e: Emitter, a: Value, b: Value) -> tuple[Value, Value]:
    """a + b = s + err exactly (Knuth)."""
    s = e.add(a, b)
    bb = e.sub(s, a)
    return s, e.add(e.sub(a, e.sub(s, bb)), e.sub(b, bb))


def two_prod(e: Emitter, a: Value, b: Value) -> tuple[Value, Value]:
    """a * b = p + err exactly (with an fma)."""
    p = e.mul(a, b)
    return p, e.fma(a, b, e.neg(p))


# ---- exp, expm1 ------------------------------------------------------------------------------------

def reduce_ln2(e: Emitter, x: Value):
    """x = n ln2 + r + r_lo with |r| <= ln2/2 (Cody-Waite with fma): n as a float, r, and r's rounding error."""
    n = e.rint(e.mul(x, e.c(LOG2E)))
    hi, lo = e.f.ln2
    r1 = e.fma(e.neg(n), e.c(hi), x)                        # exact: x and n hi agree in their top bits
    r = e.fma(e.neg(n), e.c(lo), r1)
    return n, r, e.fma(e.neg(n), e.c(lo), e.sub(r1, r))


def expm1_poly(e: Emitter, r: Value, r_lo: Value):
    """exp(r + r_lo) - 1 as hi + lo on |r| <= ln2/2: r + r**2 (1/2 + r/6 + ...) (Taylor), with the
    rounding error of the last addition and r_lo kept in lo, so callers can round once."""
    coeffs = [1.0 / math.factorial(k) for k in range(2, 2 + e.f.exp_terms)]
    q = e.mul(e.mul(r, r), e.poly(r, coeffs))
    hi = e.add(r, q)
    return hi, e.fma(r_lo, e.add(e.c(1.0), hi), e.add(e.sub(r, hi), q))   # |q| < |r|: Fast2Sum


def one_plus(e: Emitter, hi: Value, lo: Value):
    """1 + hi + lo as a pair (|hi| < 1)."""
    s = e.add(e.c(1.0), hi)
    return s, e.add(e.add(e.sub(e.c(1.0), s), hi), lo)


def exp_unscaled(e: Emitter, x: Value, x_lo: Value | None = None):
    """exp(x + x_lo) = (hi + lo) 2**k with hi + lo in [0.7, 1.42], for a non-NaN x (x_lo tiny beside x).

    Scaling comes last and once: a scaled lo part would be subnormal for tiny results, and subnormal
    operands cost a microcode assist (~100 cycles) per vector operation on x86."""
    xc = e.clamp(x, *e.f.exp_range)
    n, r, r_lo = reduce_ln2(e, xc)
    if x_lo is not None:                                     # a clamped x makes x_lo meaningless (maybe NaN)
        r_lo = e.add(r_lo, e.select(e.cmp("==", xc, x), x_lo, e.c(0.0)))
    return (*one_plus(e, *expm1_poly(e, r, r_lo)), e.to_int(n))


def exp_value(e: Emitter, x: Value) -> Value:
    """exp(x) for a non-NaN x: 2**n (1 + (r + r**2 P(r))), rounded once at the 1 +; float64 adds the
    reduction's rounding error r_lo into the small part, which keeps it within 0.85 ulp (bound: 0.5
    for the last rounding, 0.25 for r + p's, 0.1 for the rest) at half the operations of carrying
    hi + lo pairs (those measured 0.74 ulp, and 1.4x slower: 0.72 against 0.51 ns per element)."""
    n, r, r_lo = reduce_ln2(e, e.clamp(x, *e.f.exp_range))
    coeffs = [1.0 / math.factorial(k) for k in range(2, 2 + e.f.exp_terms)]
    if e.f is F32:
        return e.scale(e.add(e.c(1.0), e.fma(e.mul(r, r), e.poly(r, coeffs), r)), e.to_int(n))
    p = e.fma(e.mul(r, r), e.poly(r, coeffs), r_lo)
    return e.scale(e.add(e.c(1.0), e.add(r, p)), e.to_int(n))


def exp(e: Emitter, x: Value) -> Value:
    return e.select(e.isnan(x), x, exp_value(e, x))


def expm1_parts(e: Emitter, x: Value):
    """expm1(x) as hi + lo for a non-NaN x: 2**n (p + 1) - 1 with exp(r) - 1 = p, summed exactly
    (lo is 0 once the -1 no longer matters)."""
    n, r, r_lo = reduce_ln2(e, e.clamp(x, *e.f.expm1_range))
    (p, p_lo), k = expm1_poly(e, r, r_lo), e.to_int(n)
    big = e.icmp(">=", k, e.i(e.f.expm1_big_n))              # from there on, the -1 is below half an ulp
    t = e.pow2(e.select(big, e.i(0), k))
    s, s_lo = two_sum(e, e.mul(t, p), e.sub(t, e.c(1.0)))   # 2**n p and 2**n - 1 are exact
    exp_x = e.scale(e.add(*one_plus(e, p, p_lo)), k)
    return e.select(big, exp_x, s), e.select(big, e.c(0.0), e.fma(t, p_lo, s_lo))


def expm1(e: Emitter, x: Value) -> Value:
    hi, lo = expm1_parts(e, x)
    out = e.select(e.isnan(x), x, e.add(hi, lo))
    return e.select(e.cmp("==", x, e.c(0.0)), x, out)      # keeps -0


# ---- log, log1p --------------------------------------------------------------------------------------

def split_mantissa(e: Emitter, x: Value):
    """x = 2**k m with m in [sqrt(1/2), sqrt(2)) for a positive normal x: k (as a float) and f = m - 1."""
    f = e.f
    one_bits = f.bias << f.mant
    ix = e.iadd(e.bits(x), e.i(one_bits - f.sqrt_half_bits))
    k = e.isub(e.ashr(ix, e.i(f.mant)), e.i(f.bias))
    m = e.from_bits(e.iadd(e.and_(ix, e.i((1 << f.mant) - 1)), e.i(f.sqrt_half_bits)))
    return e.to_float(k), e.sub(m, e.c(1.0))


def log1p_of_reduced(e: Emitter, k: Value, f: Value, c: Value) -> Value:
    """k ln2 + log(1 + f) + c (fdlibm's arrangement: hfsq and s carry the error below half an ulp)."""
    s = e.div(f, e.add(e.c(2.0), f))
    z = e.mul(s, s)
    r = e.mul(z, e.poly(z, [2.0 / (2 * j + 1) for j in range(1, 1 + e.f.log_terms)]))
    hfsq = e.mul(e.c(0.5), e.mul(f, f))
    hi, lo = e.f.ln2_short
    inner = e.add(e.mul(s, e.add(hfsq, r)), e.fma(k, e.c(lo), c))
    return e.fma(k, e.c(hi), e.sub(f, e.sub(hfsq, inner)))


def log_specials(e: Emitter, x: Value, out: Value) -> Value:
    """log-like special values: +inf at +inf, -inf at 0, NaN below 0 and at NaN."""
    out = e.select(e.cmp("==", x, e.c(math.inf)), x, out)
    out = e.select(e.cmp("==", x, e.c(0.0)), e.c(-math.inf), out)
    return e.select(e.ucmp("<", x, e.c(0.0)), e.c(math.nan), out)


def log(e: Emitter, x: Value) -> Value:
    tiny = e.cmp("<", x, e.c(2.0 ** (1 - e.f.bias)))        # subnormal: scale into the normal range
    xs = e.select(tiny, e.mul(x, e.c(2.0 ** e.f.subnormal_scale)), x)
    k, f = split_mantissa(e, xs)
    k = e.select(tiny, e.sub(k, e.c(e.f.subnormal_scale)), k)
    return log_specials(e, x, log1p_of_reduced(e, k, f, e.c(0.0)))


def log1p(e: Emitter, x: Value) -> Value:
    u = e.add(e.c(1.0), x)
    k, f = split_mantissa(e, u)
    # (1 + x) - u, the rounding error of u, relative to u: log(1 + x) = log(u) + c / u to first order
    c = e.select(e.cmp(">=", k, e.c(2.0)), e.sub(e.c(1.0), e.sub(u, x)), e.sub(x, e.sub(u, e.c(1.0))))
    out = log_specials(e, u, log1p_of_reduced(e, k, f, e.div(c, u)))
    out = e.select(e.cmp("==", x, e.c(math.inf)), x, out)
    return e.select(e.cmp("==", x, e.c(0.0)), x, out)      # keeps -0
