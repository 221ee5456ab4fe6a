"""`ember.lax`: the elementwise primitives under `jax.lax`'s names, applied as lax applies them.

Unlike `ember.numpy`, nothing is promoted: operands share a dtype (a Python scalar takes the other
operand's), transcendental functions take floats only, and shapes are equal or 0-d. Each function binds
one primitive (`round`, `square`, `reciprocal` and `integer_pow` compose two or three), so it traces,
differentiates, batches and compiles as the primitive does. Control flow (`cond`, `switch`, `while_loop`,
`fori_loop`, `scan`, `map`, `select_n`) is in `ember/lax/control.py`; layout, slicing, reductions and
contractions in `layout.py`, `slicing.py` and `reductions.py`; scans and sorts in `sorting.py`. A lax
name that is not here raises an AttributeError saying whether jax.lax has it and what to use instead.
"""

from __future__ import annotations

import enum

import numpy as _np

from ember.errors import ShapeError as _ShapeError
from ember.errors import missing_attribute as _missing_attribute
from ember.errors import user_location as _user_location
from ember.lax import linalg  # noqa: F401  (ember.lax.linalg, as jax.lax.linalg)
from ember.lax.control import cond, fori_loop, map, scan, select_n, switch, while_loop
from ember.lax.convolution import (
    ConvDimensionNumbers,
    conv,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_general_permutations,
    conv_transpose,
    conv_with_general_padding,
    padtype_to_pads,
)
from ember.lax.layout import as_operand as _as_operand
from ember.lax.layout import (
    broadcast,
    broadcast_in_dim,
    broadcast_shapes,
    broadcast_to_rank,
    broadcasted_iota,
    collapse,
    concatenate,
    expand_dims,
    full,
    full_like,
    iota,
    pad,
    reshape,
    rev,
    squeeze,
    transpose,
)
from ember.lax.layout import same_dtypes as _same_dtypes
from ember.lax.reductions import (
    argmax,
    argmin,
    batch_matmul,
    dot,
    dot_general,
    reduce_and,
    reduce_max,
    reduce_min,
    reduce_or,
    reduce_prod,
    reduce_sum,
)
from ember.lax.slicing import (
    dynamic_index_in_dim,
    dynamic_slice,
    dynamic_slice_in_dim,
    dynamic_update_index_in_dim,
    dynamic_update_slice,
    dynamic_update_slice_in_dim,
    index_in_dim,
    slice,
    slice_in_dim,
    split,
)
from ember.lax.sorting import cumlogsumexp, cummax, cummin, cumprod, cumsum, sort, sort_key_val, top_k
from ember.lax.windows import reduce_window, reduce_window_shape_tuple
from ember.naming import publish as _publish
from ember.tracer import prims as _P

# one primitive each, under lax's name
exp, log, log1p, expm1, tanh, logistic = _P.exp, _P.log, _P.log1p, _P.expm1, _P.tanh, _P.logistic
sin, cos, sqrt, rsqrt, abs, sign = _P.sin, _P.cos, _P.sqrt, _P.rsqrt, _P.abs, _P.sign
floor, ceil, neg, is_finite = _P.floor, _P.ceil, _P.neg, _P.is_finite
tan, atan, asin, acos, atan2 = _P.tan, _P.atan, _P.asin, _P.acos, _P.atan2
sinh, cosh, asinh, acosh, atanh = _P.sinh, _P.cosh, _P.asinh, _P.acosh, _P.atanh
cbrt, exp2, nextafter = _P.cbrt, _P.exp2, _P.nextafter
erf, erfc, erf_inv, lgamma, digamma = _P.erf, _P.erfc, _P.erf_inv, _P.lgamma, _P.digamma
polygamma, zeta = _P.polygamma, _P.zeta
add, sub, mul, div, rem, pow = _P.add, _P.sub, _P.mul, _P.div, _P.rem, _P.pow
max, min = _P.maximum, _P.minimum
eq, ne, lt, le, gt, ge = _P.eq, _P.ne, _P.lt, _P.le, _P.gt, _P.ge
bitwise_and, bitwise_or, bitwise_not = _P.and_, _P.or_, _P.not_
bitwise_xor, population_count, clz = _P.xor, _P.population_count, _P.clz
shift_left, shift_right_logical = _P.shift_left, _P.shift_right_logical
shift_right_arithmetic, bitcast_convert_type = _P.shift_right_arithmetic, _P.bitcast_convert_type
select, stop_gradient = _P.select, _P.stop_gradient


class RoundingMethod(enum.IntEnum):
    """How `round` breaks ties, as lax.RoundingMethod."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method: RoundingMethod = RoundingMethod.AWAY_FROM_ZERO):
    """x rounded to an integer; ties away from zero by default, as lax.round (np.round goes to even).
    Its derivative is zero, as in JAX."""
    even = _P.round(x)
    if RoundingMethod(rounding_method) == RoundingMethod.TO_NEAREST_EVEN:
        return even
    tie = _P.eq(_P.abs(_P.sub(x, even)), 0.5)
    return _P.stop_gradient(_P.select(tie, _P.add(x, _P.mul(_P.sign(x), 0.5)), even))


def convert_element_type(operand, new_dtype):
    """`operand` as `new_dtype` (a strong type), as lax.convert_element_type."""
    return _P.convert_element_type(operand, _np.dtype(new_dtype))


def square(x):
    """x * x."""
    return _P.mul(x, x)


def reciprocal(x):
    """1 / x."""
    return _P.div(_np.ones((), _dtype_of(x))[()], x)


def integer_pow(x, y: int):
    """x ** y for a Python int y, by multiplications (1 / x**-y for negative y), as lax.integer_pow."""
    if not isinstance(y, int):
        raise TypeError(f"integer_pow requires a Python int exponent, got {type(y).__name__}")
    out, base, n = None, x, -y if y < 0 else y
    while n:
        if n & 1:
            out = base if out is None else _P.mul(out, base)
        n >>= 1
        if n:
            base = _P.mul(base, base)
    if out is None:
        return _P.full(_np.shape(x), 1, _dtype_of(x), weak_type=bool(getattr(x, "weak_type", False)))
    return reciprocal(out) if y < 0 else out


def _dtype_of(x) -> _np.dtype:
    dt = getattr(x, "dtype", None)
    return _np.dtype(dt) if dt is not None else _np.asarray(x).dtype


def clamp(min, x, max):
    """`x` limited to [min, max] elementwise; the bounds are scalars or of x's shape, all of one dtype. As
    lax.clamp's, the gradient reaches x strictly inside the bounds and a bound where x is strictly beyond
    it: a tie gives none (ember.numpy.clip splits it instead, as jnp.clip)."""
    lo, x, hi = _as_operand(min), _as_operand(x), _as_operand(max)
    _same_dtypes("clamp", lo, x, hi)
    shape = _np.shape(x)
    for name, bound in (("min", lo), ("max", hi)):
        if _np.shape(bound) not in ((), shape):
            raise _ShapeError(f"lax.clamp requires {name}.shape == operand.shape or {name}.shape == (), got "
                              f"{name}.shape={_np.shape(bound)}, operand.shape={shape}", _user_location())
    inside = _P.and_(_P.gt(x, lo), _P.lt(x, hi))
    held = _P.select(inside, x, _P.stop_gradient(x))
    return _P.select(_P.gt(x, hi), hi, _P.select(_P.lt(x, lo), lo, held))


__all__ = [
    "exp", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "abs", "sign", "floor",
    "ceil", "round", "neg", "is_finite", "tan", "atan", "asin", "acos", "atan2", "sinh", "cosh", "asinh", "acosh",
    "atanh", "cbrt", "exp2", "nextafter", "erf", "erfc", "erf_inv", "lgamma", "digamma", "polygamma", "zeta",
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and",
    "bitwise_or", "bitwise_not", "select", "stop_gradient", "convert_element_type", "square", "reciprocal",
    "bitwise_xor", "shift_left", "shift_right_logical", "shift_right_arithmetic", "population_count", "clz",
    "bitcast_convert_type",
    "integer_pow", "RoundingMethod", "cond", "switch", "while_loop", "fori_loop", "scan", "map", "select_n",
]

# lax's layout, slicing, reduction and contraction ops (ember/lax/layout.py, slicing.py, reductions.py)
__all__ += [
    "broadcast", "broadcast_in_dim", "broadcast_shapes", "broadcast_to_rank", "broadcasted_iota", "collapse",
    "concatenate", "expand_dims", "full", "full_like", "iota", "pad", "reshape", "rev", "squeeze", "transpose",
    "argmax", "argmin", "batch_matmul", "dot", "dot_general", "reduce_and", "reduce_max", "reduce_min",
    "reduce_or", "reduce_prod", "reduce_sum", "dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim",
    "dynamic_update_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim", "index_in_dim",
    "slice", "slice_in_dim", "split", "clamp",
]
# scans and sorts (ember/lax/sorting.py)
__all__ += ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort", "sort_key_val", "top_k"]

# lax's convolutions (ember/lax/convolution.py)
__all__ += [
    "ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated", "conv_general_permutations",
    "conv_transpose", "conv_with_general_padding", "padtype_to_pads",
]
# lax's window reductions (ember/lax/windows.py)
__all__ += ["reduce_window", "reduce_window_shape_tuple"]


_publish(globals(), __name__, __all__)


def __getattr__(name: str):
    """Say whether jax.lax has a name Ember lacks, what to use instead (ember/jax_names.py) and which
    names are closest."""
    raise _missing_attribute("ember.lax", name, globals())
