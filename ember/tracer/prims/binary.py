"""Elementwise binary primitives: arithmetic, rem (C fmod), max/min, comparisons and logical and/or.

Operands share a dtype and a shape, or one is 0-d. The wrappers (`add(x, y)`, ...) accept a Python
scalar for either operand and give it the other operand's dtype.
"""

from __future__ import annotations

import numpy as np

from ember.tracer import prims as P
from ember.tracer.primitive import Primitive, batch_rules, impl_rules, shape_rules, vjp_rules
from ember.tracer.prims.util import (
    elementwise_aval,
    elementwise_batch,
    scalar_like,
    unbroadcast_scalar,
    zero_scalar,
)

_BOOL = np.dtype(bool)


def _int_div(x, y):
    """C-style division (truncation toward zero), as integer division in XLA/lax."""
    q = np.floor_divide(x, y)
    fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
    return (q + fix).astype(q.dtype, copy=False)


def _div(x, y):
    if x.dtype.kind in "iu":
        return _int_div(x, y)
    return np.true_divide(x, y)


def _define(name: str, np_fn, accepts: str, vjp, out_dtype=None):
    """Register a binary primitive. `vjp(ct, x, y, out, active)` returns (ct_x, ct_y) before
    scalar operands are summed back to 0-d; None means zero."""
    prim = Primitive(name, kind="elementwise")

    def shape_rule(x, y, **_):
        return elementwise_aval(name, (x, y), accepts, out_dtype)

    def vjp_rule(ct, x, y, *, out, active, **_):
        if vjp is None or not any(active):
            return (None, None)
        cx, cy = vjp(ct, x, y, out, active)
        return (None if cx is None or not active[0] else unbroadcast_scalar(cx, x),
                None if cy is None or not active[1] else unbroadcast_scalar(cy, y))

    shape_rules[prim] = shape_rule
    impl_rules[prim] = lambda x, y, **_: np_fn(x, y)
    vjp_rules[prim] = vjp_rule
    batch_rules[prim] = elementwise_batch(prim)

    def fn(x, y):
        return prim.bind(scalar_like(x, y), scalar_like(y, x))

    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}` primitive."
    return prim, fn


def _div_vjp(ct, x, y, out, active):
    cx = P.div(ct, y) if active[0] else None
    cy = P.neg(P.div(P.mul(ct, out), y)) if active[1] else None
    return cx, cy


def _rem_vjp(ct, x, y, out, active):
    """As JAX: d/dx = 1, d/dy = -trunc(x / y)."""
    cy = None
    if active[1]:
        q = P.div(x, y)
        cy = P.neg(P.mul(ct, P.mul(P.sign(q), P.floor(P.abs(q)))))
    return (ct if active[0] else None), cy


def _pow_vjp(ct, x, y, out, active):
    cx = cy = None
    if active[0]:  # y * x**(y-1), defined as 0 where y == 0 (also at x == 0)
        # x is replaced by 1 where y == 0 too, so no derivative of this rule forms 0 * x**-1 (NaN at 0).
        y_is_0 = P.eq(y, 0.0)
        d = P.mul(y, P.pow(P.select(y_is_0, scalar_like(1.0, x), x), P.sub(y, 1.0)))
        cx = P.mul(ct, P.select(y_is_0, zero_scalar(d), d))
    if active[1]:  # x**y * log(x), defined as 0 where x == 0
        x_is_0 = P.eq(x, 0.0)
        d = P.mul(out, P.log(P.select(x_is_0, scalar_like(1.0, x), x)))
        cy = P.mul(ct, P.select(x_is_0, zero_scalar(d), d))
    return cx, cy


def _balanced_share(ct, a, b, out):
    """Operand `a`'s cotangent of max/min(a, b) = out, as JAX: the cotangent times a mask that is 1
    where `a` alone gives the result, 0.5 where `a` and `b` tie, 0 where `a` loses (or is NaN), so a
    NaN cotangent reaches both operands as in JAX (0 * NaN)."""
    one, half, zero = (np.asarray(v, ct.dtype)[()] for v in (1.0, 0.5, 0.0))
    return P.mul(ct, P.select(P.eq(a, out), P.select(P.eq(b, out), half, one), zero))


def _minmax_vjp(ct, x, y, out, active):
    return (_balanced_share(ct, x, y, out) if active[0] else None,
            _balanced_share(ct, y, x, out) if active[1] else None)


add_p, add = _define("add", np.add, "arith", lambda ct, x, y, out, a: (ct, ct))
sub_p, sub = _define("sub", np.subtract, "numeric", lambda ct, x, y, out, a: (ct, P.neg(ct)))
mul_p, mul = _define("mul", np.multiply, "arith",
                     lambda ct, x, y, out, a: (P.mul(ct, y) if a[0] else None,
                                               P.mul(ct, x) if a[1] else None))
div_p, div = _define("div", _div, "numeric", _div_vjp)
pow_p, pow = _define("pow", np.power, "numeric", _pow_vjp)
rem_p, rem = _define("rem", np.fmod, "numeric", _rem_vjp)  # C fmod, as lax.rem: the dividend's sign
max_p, maximum = _define("max", np.maximum, "any", _minmax_vjp)
min_p, minimum = _define("min", np.minimum, "any", _minmax_vjp)
eq_p, eq = _define("eq", np.equal, "any", None, out_dtype=_BOOL)
ne_p, ne = _define("ne", np.not_equal, "any", None, out_dtype=_BOOL)
lt_p, lt = _define("lt", np.less, "any", None, out_dtype=_BOOL)
le_p, le = _define("le", np.less_equal, "any", None, out_dtype=_BOOL)
gt_p, gt = _define("gt", np.greater, "any", None, out_dtype=_BOOL)
ge_p, ge = _define("ge", np.greater_equal, "any", None, out_dtype=_BOOL)
and_p, and_ = _define("and", np.bitwise_and, "intbool", None)
or_p, or_ = _define("or", np.bitwise_or, "intbool", None)
