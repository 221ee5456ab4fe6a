"""Elementwise unary primitives: neg, exp, log, ..., each with its shape rule, numpy reference,
VJP rule and batching rule. VJPs of exp, expm1, tanh, logistic, sqrt and rsqrt use the output.
"""

from __future__ import annotations

import math

import numpy as np

from ember.tracer import prims as P
from ember.tracer.primitive import Primitive, batch_rules, impl_rules, shape_rules, vjp_rules
from ember.tracer.prims.util import elementwise_aval, elementwise_batch, zero_scalar


def _logistic(x):
    import scipy.special  # here, not at import: importing it costs more than 0.1 s

    return scipy.special.expit(x).astype(x.dtype, copy=False)


def _rsqrt(x):
    one = np.ones((), x.dtype)
    return one / np.sqrt(x)


def _erf(x):
    import scipy.special

    return scipy.special.erf(x).astype(x.dtype, copy=False)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _define(name: str, np_fn, accepts: str, vjp, out_dtype=None):
    """Register a unary primitive. `vjp(ct, x, out)` gives the operand's cotangent; None means the
    derivative is zero (or undefined) everywhere."""
    prim = Primitive(name, kind="elementwise")

    def shape_rule(x, **_):
        return elementwise_aval(name, (x,), accepts, out_dtype)

    def vjp_rule(ct, x, *, out, active, **_):
        if vjp is None or not active[0]:
            return (None,)
        return (vjp(ct, x, out),)

    shape_rules[prim] = shape_rule
    impl_rules[prim] = lambda x, **_: np_fn(x)
    vjp_rules[prim] = vjp_rule
    batch_rules[prim] = elementwise_batch(prim)

    def fn(x):
        return prim.bind(x)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}` primitive."
    return prim, fn


neg_p, neg = _define("neg", np.negative, "numeric", lambda ct, x, out: P.neg(ct))
exp_p, exp = _define("exp", np.exp, "float", lambda ct, x, out: P.mul(ct, out))
log_p, log = _define("log", np.log, "float", lambda ct, x, out: P.div(ct, x))
log1p_p, log1p = _define("log1p", np.log1p, "float", lambda ct, x, out: P.div(ct, P.add(x, 1.0)))
expm1_p, expm1 = _define("expm1", np.expm1, "float", lambda ct, x, out: P.mul(ct, P.add(out, 1.0)))
tanh_p, tanh = _define("tanh", np.tanh, "float",
                       lambda ct, x, out: P.mul(ct, P.sub(1.0, P.mul(out, out))))
logistic_p, logistic = _define("logistic", _logistic, "float",
                               lambda ct, x, out: P.mul(ct, P.mul(out, P.sub(1.0, out))))
sin_p, sin = _define("sin", np.sin, "float", lambda ct, x, out: P.mul(ct, P.cos(x)))
cos_p, cos = _define("cos", np.cos, "float", lambda ct, x, out: P.neg(P.mul(ct, P.sin(x))))
sqrt_p, sqrt = _define("sqrt", np.sqrt, "float", lambda ct, x, out: P.div(P.mul(ct, 0.5), out))
rsqrt_p, rsqrt = _define("rsqrt", _rsqrt, "float",
                         lambda ct, x, out: P.mul(P.mul(ct, -0.5), P.mul(out, P.mul(out, out))))
# abs'(0) = 1, as in JAX: the derivative of the x >= 0 branch (sign(x) would give 0).
abs_p, abs = _define("abs", np.abs, "numeric",
                     lambda ct, x, out: P.select(P.ge(x, zero_scalar(x)), ct, P.neg(ct)))
sign_p, sign = _define("sign", np.sign, "numeric", None)
floor_p, floor = _define("floor", np.floor, "float", None)
ceil_p, ceil = _define("ceil", np.ceil, "float", None)
round_p, round = _define("round", np.round, "float", None)
erf_p, erf = _define("erf", _erf, "float",
                     lambda ct, x, out: P.mul(P.mul(ct, _TWO_OVER_SQRT_PI), P.exp(P.neg(P.mul(x, x)))))
is_finite_p, is_finite = _define("is_finite", np.isfinite, "float", None, out_dtype=np.dtype(bool))
not_p, not_ = _define("not", np.invert, "intbool", None)
