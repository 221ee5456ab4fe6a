"""Elementwise functions with NumPy's names, broadcasting and promotion (weak Python scalars)."""

from __future__ import annotations

import builtins

import numpy as np

from ember.errors import ShapeError, user_location
from ember.numpy._core import asarray, broadcast_shapes, broadcast_to_shape, dtype_weak, elementwise, shape_of, to_dtype
from ember.numpy._core import promote as _promoted  # operands in their common dtype and weak type
from ember.tracer import dtypes
from ember.tracer import prims as P


def _unary(prim_fn, name: str, to_float: bool = False):
    def fn(x):
        return elementwise(prim_fn, name, x, to_float=to_float)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name}."
    fn.elementwise = True  # one primitive after promotion and broadcasting: the eager path's lanes
    return fn


def _binary(prim_fn, name: str, to_float: bool = False):
    def fn(x1, x2):
        return elementwise(prim_fn, name, x1, x2, to_float=to_float)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} with broadcasting, as numpy.{name}."
    fn.elementwise = True  # one primitive after promotion and broadcasting: the eager path's lanes
    return fn


exp = _unary(P.exp, "exp", True)
log = _unary(P.log, "log", True)
log1p = _unary(P.log1p, "log1p", True)
expm1 = _unary(P.expm1, "expm1", True)
tanh = _unary(P.tanh, "tanh", True)
sin = _unary(P.sin, "sin", True)
cos = _unary(P.cos, "cos", True)
tan = _unary(P.tan, "tan", True)
arctan = atan = _unary(P.atan, "arctan", True)
arcsin = asin = _unary(P.asin, "arcsin", True)
arccos = acos = _unary(P.acos, "arccos", True)
sinh = _unary(P.sinh, "sinh", True)
cosh = _unary(P.cosh, "cosh", True)
arcsinh = asinh = _unary(P.asinh, "arcsinh", True)
arccosh = acosh = _unary(P.acosh, "arccosh", True)
arctanh = atanh = _unary(P.atanh, "arctanh", True)
sqrt = _unary(P.sqrt, "sqrt", True)
isfinite = _unary(P.is_finite, "isfinite", True)
cbrt = _unary(P.cbrt, "cbrt", True)
exp2 = _unary(P.exp2, "exp2", True)
log2 = _unary(P.log2, "log2", True)      # primitives of their own: correctly rounded where the result is
log10 = _unary(P.log10, "log10", True)   # exact (log2(8) == 3, log10(1000) == 3), unlike log(x) * constant
negative = _unary(P.neg, "negative")
sign = _unary(P.sign, "sign")

add = _binary(P.add, "add")
subtract = _binary(P.sub, "subtract")
multiply = _binary(P.mul, "multiply")
divide = _binary(P.div, "divide", True)
true_divide = divide
power = _binary(P.pow, "power")
maximum = _binary(P.maximum, "maximum")
minimum = _binary(P.minimum, "minimum")
equal = _binary(P.eq, "equal")
not_equal = _binary(P.ne, "not_equal")
less = _binary(P.lt, "less")
less_equal = _binary(P.le, "less_equal")
greater = _binary(P.gt, "greater")
greater_equal = _binary(P.ge, "greater_equal")
bitwise_and = _binary(P.and_, "bitwise_and")
bitwise_or = _binary(P.or_, "bitwise_or")
bitwise_xor = _binary(P.xor, "bitwise_xor")
left_shift = bitwise_left_shift = _binary(P.shift_left, "left_shift")
invert = bitwise_not = bitwise_invert = _unary(P.not_, "invert")
nextafter = _binary(P.nextafter, "nextafter", True)
copysign = _binary(P.copysign, "copysign", True)
logaddexp = _binary(P.logaddexp, "logaddexp", True)
logaddexp2 = _binary(P.logaddexp2, "logaddexp2", True)
arctan2 = atan2 = _binary(P.atan2, "arctan2", True)


def hypot(x1, x2):
    """sqrt(x1**2 + x2**2) without overflow or underflow, as jax.numpy.hypot computes it (the larger
    magnitude times sqrt(1 + (smaller / larger)**2); inf where either is infinite, even beside a NaN), so
    its gradient is JAX's too."""
    x1, x2 = elementwise(lambda *xs: xs, "hypot", x1, x2, to_float=True)
    x1, x2 = abs(x1), abs(x2)
    at_inf = logical_or(equal(x1, np.inf), equal(x2, np.inf))
    x1, x2 = maximum(x1, x2), minimum(x1, x2)
    x1_is_0 = equal(x1, 0)
    x = where(x1_is_0, x1, multiply(x1, sqrt(add(1, square(divide(x2, where(x1_is_0, 1, x1)))))))
    return where(at_inf, np.inf, x)


def _rounding(prim_fn, name: str):
    """floor/ceil: integers and bools are returned unchanged (NumPy 2 keeps their dtype)."""

    def fn(x):
        x = asarray(x) if isinstance(x, (list, tuple)) else x
        if not dtypes.is_float(dtype_weak(x)[0]):
            return asarray(x)
        return elementwise(prim_fn, name, x)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name} (integer input is returned unchanged)."
    return fn


floor = _rounding(P.floor, "floor")
ceil = _rounding(P.ceil, "ceil")


def abs(x):
    """Absolute value (bool arrays are returned unchanged)."""
    x = asarray(x) if isinstance(x, (list, tuple)) else x
    if dtype_weak(x)[0] == dtypes.bool_:
        return asarray(x)
    return elementwise(P.abs, "abs", x)


absolute = abs


def positive(x):
    return asarray(x)


def square(x):
    return elementwise(lambda a: P.mul(a, a), "square", x)


def reciprocal(x):
    """1 / x, as jax.numpy.reciprocal: integers and bools become the default float first (NumPy would
    truncate, 1 // 2 == 0), float32 for an int32 in either mode."""
    dt, weak = dtype_weak(x)
    return divide(1.0, x if weak else to_dtype(x, dtypes.default_float_for(dt)))


def round(a, decimals: int = 0):
    """Round half to even to `decimals` places (negative: to tens, hundreds, ...), as numpy.round,
    which scales by 10**decimals (or divides by 10**-decimals) around rint."""
    a = asarray(a) if isinstance(a, (list, tuple)) else a
    dt = dtype_weak(a)[0]
    if not dtypes.is_float(dt):
        if decimals >= 0:
            return asarray(a)
        as_float = to_dtype(asarray(a), np.dtype(np.float64))
        return to_dtype(round(as_float, decimals), dt)
    if decimals == 0:
        return elementwise(P.round, "round", a)
    scale = 10.0 ** builtins.abs(decimals)
    if decimals > 0:
        return divide(elementwise(P.round, "round", multiply(a, scale)), scale)
    return multiply(elementwise(P.round, "round", divide(a, scale)), scale)


around = round


def isnan(x):
    return not_equal(x, x)


def isinf(x):
    x = asarray(x) if isinstance(x, (list, tuple)) else x
    if not dtypes.is_float(dtype_weak(x)[0]):
        return not_equal(x, x)
    return equal(abs(x), np.inf)


def logical_not(x):
    return elementwise(P.not_, "logical_not", _to_bool(x))


def logical_and(x1, x2):
    return elementwise(P.and_, "logical_and", _to_bool(x1), _to_bool(x2))


def logical_or(x1, x2):
    return elementwise(P.or_, "logical_or", _to_bool(x1), _to_bool(x2))


def logical_xor(x1, x2):
    return elementwise(P.ne, "logical_xor", _to_bool(x1), _to_bool(x2))


def _shift_right(x1, x2):
    """Arithmetic for signed operands, logical for unsigned ones (both operands share a dtype here)."""
    signed = dtype_weak(x1)[0].kind == "i"
    return (P.shift_right_arithmetic if signed else P.shift_right_logical)(x1, x2)


def right_shift(x1, x2):
    """x1's bits shifted right by x2 (sign bits shifted in for signed x1), as numpy.right_shift; an
    amount outside [0, bits) gives 0 or -1 (the sign fill), as jax.numpy."""
    return elementwise(_shift_right, "right_shift", x1, x2)


bitwise_right_shift = right_shift


def bitwise_count(x):
    """The 1 bits of |x|, as uint8, as numpy.bitwise_count (jax.numpy's too)."""
    def count(v):
        if dtype_weak(v)[0].kind == "i":
            v = P.abs(v)
        return P.convert_element_type(P.population_count(v), np.uint8)

    return elementwise(count, "bitwise_count", x)


def _to_bool(x):
    x = asarray(x) if isinstance(x, (list, tuple)) else x
    if isinstance(x, (bool, np.bool_)):
        return x
    if dtype_weak(x)[0] == dtypes.bool_:
        return x
    return not_equal(x, 0)


def fmod(x1, x2):
    """Remainder with the sign of the dividend (C's fmod, exact for floats), as numpy.fmod."""
    return elementwise(P.rem, "fmod", x1, x2)


def floor_divide(x1, x2):
    """Division rounded toward -inf, as numpy.floor_divide (and the // operator)."""
    return _divmod(x1, x2, "floor_divide")[0]


def remainder(x1, x2):
    """Remainder with the sign of the divisor, as numpy.remainder (and the % operator)."""
    return _divmod(x1, x2, "remainder")[1]


mod = remainder


def divmod(x1, x2):
    """(x1 // x2, x1 % x2), as numpy.divmod (and Python's divmod on traced arrays)."""
    return _divmod(x1, x2, "divmod")


def _divmod(x1, x2, name: str):
    """Floor quotient and remainder, both derived from fmod as NumPy does, so they agree with it bit
    for bit (0.1 is not exact: 1 // 0.1 is 9). float16 is computed in float32, as NumPy does."""
    x1, x2 = _promoted(x1, x2)
    dt = dtype_weak(x1)[0]
    if not dtypes.is_float(dt):
        return _int_divmod(x1, x2, name)
    if dt == np.float16:
        q, r = _float_divmod(to_dtype(x1, np.dtype(np.float32)), to_dtype(x2, np.dtype(np.float32)), name)
        return to_dtype(q, dt), to_dtype(r, dt)
    return _float_divmod(x1, x2, name)


def _int_divmod(x1, x2, name: str):
    """Truncating quotient and remainder, moved down by one where the signs differ; a zero divisor
    gives 0 and 0, as in NumPy."""
    q, r = elementwise(P.div, name, x1, x2), elementwise(P.rem, name, x1, x2)
    fix = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(x2, 0)))
    return where(fix, subtract(q, 1), q), where(fix, add(r, x2), r)


def _float_divmod(a, b, name: str):
    """NumPy's npy_divmod: fmod, (a - fmod) / b, the sign fix-up, then floor with the `> 0.5`
    correction for a quotient just below an integer; zeros take the sign NumPy gives them, and a
    zero divisor gives a / b and fmod. The quotient has zero gradient (as jnp.floor_divide)."""
    fm = fmod(a, b)
    div = divide(subtract(a, fm), b)
    fix = logical_and(not_equal(fm, 0), not_equal(less(b, 0), less(fm, 0)))
    mod = where(fix, add(fm, b), fm)
    div = where(fix, subtract(div, 1.0), div)
    mod = where(equal(fm, 0), _zero_with_sign_of(b, fm), mod)
    floordiv = floor(div)
    floordiv = where(greater(subtract(div, floordiv), 0.5), add(floordiv, 1.0), floordiv)
    a_over_b = divide(a, b)
    floordiv = where(equal(div, 0), multiply(a_over_b, 0.0), floordiv)  # copysign(0, a / b)
    b_is_0 = equal(b, 0)
    return P.stop_gradient(where(b_is_0, a_over_b, floordiv)), where(b_is_0, fm, mod)


def _zero_with_sign_of(b, zero):
    """copysign(0, b) for a nonzero `b`, with the derivative of `zero` (a zero, as JAX's remainder has
    there). `r = stop_gradient(zero) - zero` is an exact +0 with derivative -d(zero); subtracting it
    keeps the sign of a zero. No -0.0 literal is formed, even when `b` is a constant."""
    r = subtract(P.stop_gradient(zero), zero)
    return subtract(multiply(sign(b), P.stop_gradient(r)), r)


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """Elementwise choice: x where condition holds, else y (all three broadcast together). Without x
    and y, the indices where condition holds (jnp.nonzero: `size=` makes it traceable)."""
    if x is None and y is None:
        from ember.numpy._sorting import nonzero

        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ShapeError("where takes a condition alone or with both x and y", user_location())
    if size is not None or fill_value is not None:
        raise ShapeError("where: size and fill_value go with a condition alone (the nonzero form)", user_location())
    cond = _to_bool(condition)
    x, y = _promoted(x, y)
    shape = broadcast_shapes(shape_of(cond), shape_of(x), shape_of(y), name="where")
    return P.select(broadcast_to_shape(cond, shape), broadcast_to_shape(x, shape),
                    broadcast_to_shape(y, shape))


def clip(a, a_min=None, a_max=None, *, min=None, max=None):
    """Limit values to [a_min, a_max] (either bound may be None; `min`/`max` are NumPy 2's
    keyword spellings); where a_min > a_max the result is a_max, as in NumPy."""
    a_min = min if a_min is None else a_min
    a_max = max if a_max is None else a_max
    if a_min is None and a_max is None:
        raise ValueError(f"clip: at least one of a_min and a_max must be given (at {user_location()})")
    out = a
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out
