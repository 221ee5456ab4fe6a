"""lax's scans and sorts: `cumsum`, `cumprod`, `cummax`, `cummin`, `cumlogsumexp` (the primitives of
tracer/prims/sort.py; no negative axes, as lax), `sort` of one operand or several,
`sort_key_val` and `top_k` (a sort by a key that orders floats as XLA's TopK does).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import ArgumentValueError, AxisError, DTypeError, ShapeError, user_location
from ember.lax.layout import as_operand
from ember.tracer import prims as P
from ember.tracer.prims.util import shape_of


def _axis(name: str, axis: int, ndim: int, negative: bool = True) -> int:
    """`axis` in [0, ndim), counted from the end when negative where lax allows it (its sorts; its
    cumulative reductions take none: "XLA operations do not allow negative axes")."""
    if not (-ndim if negative else 0) <= axis < ndim:
        raise AxisError(f"lax.{name}: axis {axis} is out of bounds for an operand of rank {ndim}"
                        f"{'' if negative else ' (lax takes no negative axes here)'}", user_location())
    return int(axis) % ndim


def _cumulative(prim_fn, name: str):
    def fn(operand, axis: int = 0, reverse: bool = False):
        operand = as_operand(operand)
        return prim_fn(operand, _axis(name, axis, len(shape_of(operand)), negative=False), reverse)

    fn.__name__ = name
    fn.__doc__ = f"The running {name[3:]} of `operand` along `axis` (from the end when `reverse`), as lax.{name}."
    return fn


cumsum = _cumulative(P.cumsum, "cumsum")
cumprod = _cumulative(P.cumprod, "cumprod")
cummax = _cumulative(P.cummax, "cummax")
cummin = _cumulative(P.cummin, "cummin")
cumlogsumexp = _cumulative(P.cumlogsumexp, "cumlogsumexp")


def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """`operand` sorted along `dimension` (-0.0 equal to 0.0, NaNs last); a sequence of operands is sorted
    together, lexicographically by its first `num_keys`, and comes back as a tuple."""
    if isinstance(operand, Sequence):
        if not operand:
            raise ShapeError("Sort requires at least one operand", user_location())
        if not 1 <= num_keys <= len(operand):
            raise ArgumentValueError(f"num_keys={num_keys} must be between 1 and len(operand)={len(operand)}",
                                     user_location())
        ops = [as_operand(x) for x in operand]
        return P.sort(ops, _axis("sort", dimension, len(shape_of(ops[0]))), num_keys, is_stable)
    if num_keys != 1:
        raise ArgumentValueError(f"num_keys={num_keys} must equal 1 for a single operand.", user_location())
    operand = as_operand(operand)
    return P.sort((operand,), _axis("sort", dimension, len(shape_of(operand))), 1, is_stable)[0]


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """`keys` sorted along `dimension` and `values` moved with them."""
    keys = as_operand(keys)
    return P.sort((keys, as_operand(values)), _axis("sort_key_val", dimension, len(shape_of(keys))), 1, is_stable)


def _signed_bits(x):
    """x's bits as a signed integer ordered as x is, NaNs of either sign beyond the infinities and -0.0
    below 0.0 (XLA TopK's order of floats)."""
    bits = P.bitcast_convert_type(x, np.dtype(f"i{x.dtype.itemsize}"))
    magnitude = np.array(np.iinfo(bits.dtype).max, bits.dtype)[()]
    sign = P.shift_right_arithmetic(bits, np.array(8 * x.dtype.itemsize - 1, bits.dtype)[()])
    return P.xor(bits, P.and_(sign, magnitude))


def top_k(operand, k: int, *, axis: int = -1):
    """The `k` largest entries along `axis` in descending order and their indices (int32), the lower
    index first among equals; a NaN is above +inf (a negative NaN below -inf), as lax.top_k."""
    operand = as_operand(operand)
    shape = shape_of(operand)
    if not shape:
        raise ShapeError(f"top_k operand must have >= 1 dimension, got {shape}", user_location())
    axis = _axis("top_k", axis, len(shape))
    if not 0 <= k <= shape[axis]:
        raise ArgumentValueError(f"k argument to top_k must be nonnegative and no larger than the size along axis; "
                                 f"got k={k} with shape={shape} and axis={axis}", user_location())
    if operand.dtype.kind not in "fiub":
        raise DTypeError(f"top_k does not accept dtype {operand.dtype.name}", user_location())
    key = _signed_bits(operand) if operand.dtype.kind == "f" else operand
    descending = P.not_(key)  # reverses the order of every integer dtype, without overflow
    index = P.iota(np.int32, shape, axis)
    _, values, indices = P.sort((descending, operand, index), axis, 1)
    limit = shape[:axis] + (k,) + shape[axis + 1:]
    start = (0,) * len(shape)
    return P.slice(values, start, limit), P.slice(indices, start, limit)
