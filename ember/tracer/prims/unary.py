"""Elementwise unary primitives: neg, exp, log, ..., population_count and clz, each with its shape
rule, numpy reference, VJP rule and batching rule. VJPs of exp, expm1, tanh, logistic, sqrt and rsqrt
use the output.
"""

from __future__ import annotations

import math

import numpy as np

from ember.tracer import prims as P
from ember.tracer.primitive import (
    Primitive,
    batch_rules,
    impl_rules,
    operand_impls,
    reference,
    shape_rules,
    vjp_rules,
)
from ember.tracer.prims.util import computed_wider, elementwise_aval, elementwise_batch, zero_scalar


def _rsqrt(x):
    one = np.ones((), x.dtype)
    return one / np.sqrt(x)


_BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.uint8)


def _population_count(x):
    """The set bits of each integer, in its own dtype (np.bitwise_count needs NumPy 2 and gives uint8):
    summed over its bytes from a table."""
    x = np.ascontiguousarray(x)
    per_byte = x.reshape(-1).view(np.uint8).reshape(x.shape + (x.dtype.itemsize,))
    return _BYTE_POPCOUNT[per_byte].sum(axis=-1, dtype=np.int64).astype(x.dtype)


def _clz(x):
    """The leading zero bits of each integer at its width (the width for 0), in its own dtype: the
    width less the bit length, found by halving steps on the bits read as unsigned."""
    x = np.asarray(x)
    width = 8 * x.dtype.itemsize
    v = x.view(f"u{x.dtype.itemsize}").astype(np.uint64)
    length = np.zeros(x.shape, np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        if step < width:
            high = v >= np.uint64(1 << step)
            length += np.where(high, step, 0)
            v = np.where(high, v >> np.uint64(step), v)
    return (width - length - v.astype(np.int64)).astype(x.dtype)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LN2, _INV_LN10 = math.log(2.0), 1.0 / math.log(10.0)


def _define(name: str, accepts: str, vjp, *, expensive: bool, ufunc: np.ufunc | str | None = None,
            ufunc_dtypes: tuple[str, ...] | None = None, no_ufunc: str | None = None, impl=None, out_dtype=None):
    """Register a unary primitive with its facts (see `Primitive`). `vjp(ct, x, out)` gives the
    operand's cotangent; None means the derivative is zero (or undefined) everywhere. The numpy
    reference is `impl`, or else the ufunc (a scipy.special one rounded to the operand's dtype)."""
    prim = Primitive(name, kind="elementwise", expensive=expensive, ufunc=ufunc, ufunc_dtypes=ufunc_dtypes,
                     no_ufunc=no_ufunc)
    np_fn = reference(prim, impl)

    def shape_rule(x, **_):
        return elementwise_aval(name, (x,), accepts, out_dtype)

    def vjp_rule(ct, x, *, out, active, **_):
        if vjp is None or not active[0]:
            return (None,)
        return (vjp(ct, x, out),)

    shape_rules[prim] = shape_rule
    impl_rules[prim] = lambda x, **_: np_fn(x)
    operand_impls[prim] = np_fn
    vjp_rules[prim] = vjp_rule
    batch_rules[prim] = elementwise_batch(prim)

    def fn(x):
        return prim.bind(x)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}` primitive."
    return prim, fn


_SCIPY = ("float32", "float64")  # scipy.special's float16 loops compute in a wider type and round twice


neg_p, neg = _define("neg", "numeric", lambda ct, x, out: P.neg(ct), expensive=False, ufunc=np.negative)
exp_p, exp = _define("exp", "float", lambda ct, x, out: P.mul(ct, out), expensive=True, ufunc=np.exp)
log_p, log = _define("log", "float", lambda ct, x, out: P.div(ct, x), expensive=True, ufunc=np.log)
log1p_p, log1p = _define("log1p", "float", lambda ct, x, out: P.div(ct, P.add(x, 1.0)), expensive=True,
                         ufunc=np.log1p)
expm1_p, expm1 = _define("expm1", "float", lambda ct, x, out: P.mul(ct, P.add(out, 1.0)), expensive=True,
                         ufunc=np.expm1)
tanh_p, tanh = _define("tanh", "float", lambda ct, x, out: P.mul(ct, P.sub(1.0, P.mul(out, out))),
                       expensive=True, ufunc=np.tanh)
logistic_p, logistic = _define("logistic", "float", lambda ct, x, out: P.mul(ct, P.mul(out, P.sub(1.0, out))),
                               expensive=True, ufunc="expit", ufunc_dtypes=_SCIPY)
sin_p, sin = _define("sin", "float", lambda ct, x, out: P.mul(ct, P.cos(x)), expensive=True, ufunc=np.sin)
cos_p, cos = _define("cos", "float", lambda ct, x, out: P.neg(P.mul(ct, P.sin(x))), expensive=True, ufunc=np.cos)
sqrt_p, sqrt = _define("sqrt", "float", lambda ct, x, out: P.div(P.mul(ct, 0.5), out), expensive=True,
                       ufunc=np.sqrt)
rsqrt_p, rsqrt = _define("rsqrt", "float", lambda ct, x, out: P.mul(P.mul(ct, -0.5), P.mul(out, P.mul(out, out))),
                         expensive=True, impl=_rsqrt, no_ufunc="1 / sqrt(x): two correctly rounded ops")
# abs'(0) = 1, as in JAX: the derivative of the x >= 0 branch (sign(x) would give 0).
abs_p, abs = _define("abs", "numeric", lambda ct, x, out: P.select(P.ge(x, zero_scalar(x)), ct, P.neg(ct)),
                     expensive=False, ufunc=np.abs)
sign_p, sign = _define("sign", "numeric", None, expensive=False, ufunc=np.sign)
floor_p, floor = _define("floor", "float", None, expensive=False, ufunc=np.floor)
ceil_p, ceil = _define("ceil", "float", None, expensive=False, ufunc=np.ceil)
round_p, round = _define("round", "float", None, expensive=False, impl=np.round,
                         no_ufunc="np.round is a function, not a ufunc")
erf_p, erf = _define("erf", "float", lambda ct, x, out: P.mul(P.mul(ct, _TWO_OVER_SQRT_PI), P.exp(P.neg(P.mul(x, x)))),
                     expensive=True, ufunc="erf", ufunc_dtypes=_SCIPY)
is_finite_p, is_finite = _define("is_finite", "float", None, expensive=False, impl=np.isfinite,
                                 no_ufunc="its bool result never takes its float operand's buffer",
                                 out_dtype=np.dtype(bool))
not_p, not_ = _define("not", "intbool", None, expensive=False, ufunc=np.invert)
population_count_p, population_count = _define("population_count", "int", None, expensive=False,
                                               impl=_population_count,
                                               no_ufunc="np.bitwise_count gives uint8 (and needs NumPy 2)")
clz_p, clz = _define("clz", "int", None, expensive=False, impl=_clz, no_ufunc="NumPy has no leading-zero count")

# Trigonometric and hyperbolic functions, with JAX's derivatives (lax.tan_p ... lax.atanh_p): tan's uses
# its output, asin/acos/asinh/acosh theirs through rsqrt (infinite at the domain's ends, as in JAX).
tan_p, tan = _define("tan", "float", lambda ct, x, out: P.mul(ct, P.add(P.mul(out, out), 1.0)), expensive=True,
                     ufunc=np.tan)
atan_p, atan = _define("atan", "float", lambda ct, x, out: P.div(ct, P.add(P.mul(x, x), 1.0)), expensive=True,
                       ufunc=np.arctan)
asin_p, asin = _define("asin", "float", lambda ct, x, out: P.mul(ct, P.rsqrt(P.sub(1.0, P.mul(x, x)))),
                       expensive=True, ufunc=np.arcsin)
acos_p, acos = _define("acos", "float", lambda ct, x, out: P.mul(ct, P.neg(P.rsqrt(P.sub(1.0, P.mul(x, x))))),
                       expensive=True, ufunc=np.arccos)
sinh_p, sinh = _define("sinh", "float", lambda ct, x, out: P.mul(ct, P.cosh(x)), expensive=True, ufunc=np.sinh)
cosh_p, cosh = _define("cosh", "float", lambda ct, x, out: P.mul(ct, P.sinh(x)), expensive=True, ufunc=np.cosh)
asinh_p, asinh = _define("asinh", "float", lambda ct, x, out: P.mul(ct, P.rsqrt(P.add(P.mul(x, x), 1.0))),
                         expensive=True, ufunc=np.arcsinh)
acosh_p, acosh = _define("acosh", "float", lambda ct, x, out: P.mul(ct, P.rsqrt(P.sub(P.mul(x, x), 1.0))),
                         expensive=True, ufunc=np.arccosh)
atanh_p, atanh = _define("atanh", "float",
                         lambda ct, x, out: P.mul(P.div(1.0, P.add(x, 1.0)), P.div(ct, P.sub(1.0, x))),
                         expensive=True, ufunc=np.arctanh)
# The derivatives JAX gives: cbrt's from its output, exp2's as ln 2 (g 2**x), and log2 and log10 as those
# of jnp's log(x) / log(2) and log(x) * (1 / log(10)) (the primitives are correctly rounded; jnp's are not).
# float16 and float32 references compute in float64 (NumPy's float32 cbrt(27) is 2.9999998); float64's is the ufunc.
cbrt_p, cbrt = _define("cbrt", "float", lambda ct, x, out: P.div(P.mul(ct, 1.0 / 3.0), P.mul(out, out)),
                       expensive=True, impl=computed_wider(np.cbrt), ufunc=np.cbrt, ufunc_dtypes=("float64",))
exp2_p, exp2 = _define("exp2", "float", lambda ct, x, out: P.mul(P.mul(ct, out), _LN2), expensive=True,
                       impl=computed_wider(np.exp2), ufunc=np.exp2, ufunc_dtypes=("float64",))
log2_p, log2 = _define("log2", "float", lambda ct, x, out: P.div(P.div(ct, x), _LN2), expensive=True,
                       impl=computed_wider(np.log2), ufunc=np.log2, ufunc_dtypes=("float64",))
log10_p, log10 = _define("log10", "float", lambda ct, x, out: P.mul(P.div(ct, x), _INV_LN10), expensive=True,
                         impl=computed_wider(np.log10), ufunc=np.log10, ufunc_dtypes=("float64",))
