"""Elementwise binary primitives: arithmetic, rem (C fmod), max/min, comparisons, bitwise and/or/xor
and the shifts (with JAX's results for amounts outside [0, bits), which C and LLVM leave undefined).

Operands share a dtype and a shape, or one is 0-d. The wrappers (`add(x, y)`, ...) accept a Python
scalar for either operand and give it the other operand's dtype.
"""

from __future__ import annotations

import numpy as np

from ember.errors import DifferentiationError
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
from ember.tracer.prims.util import (
    computed_wider,
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


def _define(name: str, accepts: str, vjp, *, expensive: bool, ufunc: np.ufunc | str | None = None,
            ufunc_dtypes: tuple[str, ...] | None = None, no_ufunc: str | None = None, impl=None, out_dtype=None):
    """Register a binary primitive with its facts (see `Primitive`). `vjp(ct, x, y, out, active)`
    returns (ct_x, ct_y) before scalar operands are summed back to 0-d; None means zero. The numpy
    reference is `impl`, or else the ufunc."""
    prim = Primitive(name, kind="elementwise", expensive=expensive, ufunc=ufunc, ufunc_dtypes=ufunc_dtypes,
                     no_ufunc=no_ufunc)
    np_fn = reference(prim, impl)

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
    operand_impls[prim] = np_fn
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


add_p, add = _define("add", "arith", lambda ct, x, y, out, a: (ct, ct), expensive=False, ufunc=np.add)
sub_p, sub = _define("sub", "numeric", lambda ct, x, y, out, a: (ct, P.neg(ct)), expensive=False, ufunc=np.subtract)
mul_p, mul = _define("mul", "arith", lambda ct, x, y, out, a: (P.mul(ct, y) if a[0] else None,
                                                              P.mul(ct, x) if a[1] else None),
                     expensive=False, ufunc=np.multiply)
# fusion counts a division by a Literal as cheap (fusion_rules.expensive); integer div truncates
# toward zero, which no ufunc does
div_p, div = _define("div", "numeric", _div_vjp, expensive=True, impl=_div, ufunc=np.true_divide,
                     ufunc_dtypes=("float16", "float32", "float64"))
pow_p, pow = _define("pow", "numeric", _pow_vjp, expensive=True, ufunc=np.power)
# C fmod, as lax.rem: the dividend's sign
rem_p, rem = _define("rem", "numeric", _rem_vjp, expensive=True, ufunc=np.fmod)
max_p, maximum = _define("max", "any", _minmax_vjp, expensive=False, ufunc=np.maximum)
min_p, minimum = _define("min", "any", _minmax_vjp, expensive=False, ufunc=np.minimum)
eq_p, eq = _define("eq", "any", None, expensive=False, ufunc=np.equal, out_dtype=_BOOL)
ne_p, ne = _define("ne", "any", None, expensive=False, ufunc=np.not_equal, out_dtype=_BOOL)
lt_p, lt = _define("lt", "any", None, expensive=False, ufunc=np.less, out_dtype=_BOOL)
le_p, le = _define("le", "any", None, expensive=False, ufunc=np.less_equal, out_dtype=_BOOL)
gt_p, gt = _define("gt", "any", None, expensive=False, ufunc=np.greater, out_dtype=_BOOL)
ge_p, ge = _define("ge", "any", None, expensive=False, ufunc=np.greater_equal, out_dtype=_BOOL)
and_p, and_ = _define("and", "intbool", None, expensive=False, ufunc=np.bitwise_and)
or_p, or_ = _define("or", "intbool", None, expensive=False, ufunc=np.bitwise_or)
xor_p, xor = _define("xor", "intbool", None, expensive=False, ufunc=np.bitwise_xor)


def _same_width(x, kind: str) -> np.ndarray:
    """`x`'s bits as the signed ("i") or unsigned ("u") integer dtype of its width."""
    x = np.asarray(x)
    return x.view(f"{kind}{x.dtype.itemsize}")


def _shift_amount(x, y) -> tuple[np.ndarray, np.ndarray]:
    """(amount clamped into [0, bits), whether it was there): XLA reads the amount as unsigned, so a
    negative one is out of range too."""
    bits = 8 * np.asarray(x).dtype.itemsize
    amount = _same_width(y, "u")
    inside = amount < bits
    return np.where(inside, amount, 0).astype(amount.dtype), inside


def _shift_left(x, y):
    """As lax.shift_left: the bits moved up (wrapping), 0 for an amount outside [0, bits)."""
    amount, inside = _shift_amount(x, y)
    bits = np.left_shift(_same_width(x, "u"), amount)
    return np.where(inside, bits, 0).astype(bits.dtype).view(np.asarray(x).dtype)


def _shift_right_logical(x, y):
    """As lax.shift_right_logical: zeros shifted in (a signed operand's bits read as unsigned), 0 for
    an amount outside [0, bits)."""
    amount, inside = _shift_amount(x, y)
    bits = np.right_shift(_same_width(x, "u"), amount)
    return np.where(inside, bits, 0).astype(bits.dtype).view(np.asarray(x).dtype)


def _shift_right_arithmetic(x, y):
    """As lax.shift_right_arithmetic: copies of the top bit shifted in (an unsigned operand's too); an
    amount outside [0, bits) leaves only them (0 or all ones), as a shift by bits - 1 does."""
    amount, inside = _shift_amount(x, y)
    amount = np.where(inside, amount, 8 * np.asarray(x).dtype.itemsize - 1).astype(amount.dtype)
    signed = _same_width(x, "i")
    return np.right_shift(signed, amount.view(signed.dtype)).astype(signed.dtype).view(np.asarray(x).dtype)


_NO_SHIFT_UFUNC = "an amount outside [0, bits) gives lax's result, which NumPy's shifts leave to the platform"
shift_left_p, shift_left = _define("shift_left", "int", None, expensive=False, impl=_shift_left,
                                   no_ufunc=_NO_SHIFT_UFUNC)
shift_right_logical_p, shift_right_logical = _define("shift_right_logical", "int", None, expensive=False,
                                                     impl=_shift_right_logical, no_ufunc=_NO_SHIFT_UFUNC)
shift_right_arithmetic_p, shift_right_arithmetic = _define("shift_right_arithmetic", "int", None, expensive=False,
                                                           impl=_shift_right_arithmetic, no_ufunc=_NO_SHIFT_UFUNC)


def _atan2_vjp(ct, x, y, out, active):
    """As JAX: d/dx = y / (x**2 + y**2), d/dy = -x / (x**2 + y**2) (NaN at the origin)."""
    r2 = P.add(P.mul(x, x), P.mul(y, y))
    return (P.mul(ct, P.div(y, r2)) if active[0] else None,
            P.mul(ct, P.div(P.neg(x), r2)) if active[1] else None)


atan2_p, atan2 = _define("atan2", "float", _atan2_vjp, expensive=True, ufunc=np.arctan2)


def _nextafter_vjp(ct, x, y, out, active):
    """JAX has no derivative of nextafter: raise its error class and message."""
    raise DifferentiationError("Differentiation rule for 'nextafter' not implemented")


def _copysign_vjp(ct, x, y, out, active):
    """As JAX's where(signbit(y), -abs(x), abs(x)): abs'(x) (1 at 0) times the sign taken from y; y gets
    none."""
    if not active[0]:
        return None, None
    d = P.select(P.ge(x, zero_scalar(x)), ct, P.neg(ct))
    return P.select(P.lt(P.copysign(scalar_like(1.0, y), y), zero_scalar(y)), P.neg(d), d), None


def _finite_or_zero(v):
    """JAX's _replace_inf: +inf becomes 0 (so a +inf result still passes the cotangent on)."""
    return P.select(P.eq(v, np.inf), zero_scalar(v), v)


def _logaddexp_vjp(exp: str):
    """JAX's custom rule for logaddexp (exp) and logaddexp2 (exp2): each operand's share exp(x - out)
    with +inf read as 0: half each for equal operands, (0, 1) for (-inf, y), NaN for (-inf, -inf)."""
    def vjp(ct, x, y, out, active):
        o, exp_fn = _finite_or_zero(out), getattr(P, exp)
        return tuple(P.mul(ct, exp_fn(P.sub(_finite_or_zero(v), o))) if a else None for v, a in zip((x, y), active))
    return vjp


# nextafter, copysign, logaddexp and logaddexp2 take floats (jax.numpy promotes integers first); logaddexp's
# references compute in a wider type (float64 in long double: NumPy's is 2.4 ulp off where the result cancels)
nextafter_p, nextafter = _define("nextafter", "float", _nextafter_vjp, expensive=False, ufunc=np.nextafter)
copysign_p, copysign = _define("copysign", "float", _copysign_vjp, expensive=False, ufunc=np.copysign)
logaddexp_p, logaddexp = _define("logaddexp", "float", _logaddexp_vjp("exp"), expensive=True,
                                 impl=computed_wider(np.logaddexp, float64_too=True),
                                 no_ufunc="computed in a wider type and rounded")
logaddexp2_p, logaddexp2 = _define("logaddexp2", "float", _logaddexp_vjp("exp2"), expensive=True,
                                   impl=computed_wider(np.logaddexp2, float64_too=True),
                                   no_ufunc="computed in a wider type and rounded")
