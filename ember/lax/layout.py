"""lax's layout and creation ops (broadcast, reshape, squeeze, expand_dims, collapse, concatenate, pad,
iota, full) on Ember's layout primitives, with lax's argument checks.

As lax, nothing is promoted: operands must share a dtype exactly (a Python scalar is its default dtype,
int32 or float32), and axes are checked as lax checks them (negative axes only where lax takes them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import AxisError, DTypeError, ShapeError, user_location
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.prims.util import shape_of
from ember.tracer.trace import Tracer


def dtype_of(x) -> np.dtype:
    """x's dtype, a Python scalar's being its default one (as lax takes it: int32, float32, bool)."""
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return np.dtype(dt)
    if isinstance(x, (bool, int, float)):
        return dtypes.scalar_dtype(x)[0]
    return np.asarray(x).dtype


def is_weak(x) -> bool:
    """Whether x is weakly typed (a Python scalar, or a value traced from one)."""
    return isinstance(x, (bool, int, float)) or bool(getattr(getattr(x, "aval", None), "weak_type", False))


def same_dtypes(name: str, *xs) -> np.dtype:
    """The dtype all of `xs` share; a TypeError naming them otherwise (lax does not promote)."""
    found = [dtype_of(x) for x in xs]
    if any(dt != found[0] for dt in found):
        raise DTypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                         f"{', '.join(dt.name for dt in found)}; convert them (lax.convert_element_type), or "
                         f"use the ember.numpy function, which promotes", user_location())
    return found[0]


def as_operand(x):
    """A Python scalar as a 0-d array of its default dtype (lax's view of it); arrays as they are."""
    return np.asarray(x, dtype_of(x)) if isinstance(x, (bool, int, float)) else x


def is_concrete(x) -> bool:
    """Whether x's value is known now (not traced)."""
    return not isinstance(x, Tracer)


def canonical_axes(name: str, axes: Sequence[int], ndim: int, negative: bool = True) -> tuple[int, ...]:
    """`axes` in [0, ndim) (negatives counted from the end where `negative`), distinct; a ValueError
    (AxisError) otherwise."""
    out = []
    for a in axes:
        a = int(a)
        if not (-ndim <= a < ndim if negative else 0 <= a < ndim):
            raise AxisError(f"lax.{name}: axis {a} is out of bounds for a rank-{ndim} array", user_location())
        out.append(a % ndim if ndim else a)
    if len(set(out)) != len(out):
        raise AxisError(f"lax.{name}: repeated axis in {tuple(int(a) for a in axes)}", user_location())
    return tuple(out)


# --- broadcasting and reshaping ----------------------------------------------------------------------

def broadcast_in_dim(operand, shape: Sequence[int], broadcast_dimensions: Sequence[int]):
    """`operand` broadcast to `shape`, its axis i becoming axis broadcast_dimensions[i]."""
    return P.broadcast_in_dim(as_operand(operand), shape, broadcast_dimensions)


def broadcast(operand, sizes: Sequence[int]):
    """`operand` with new leading axes of `sizes`: shape sizes + operand.shape."""
    shape = shape_of(operand)
    sizes = tuple(int(s) for s in sizes)
    return P.broadcast_in_dim(as_operand(operand), sizes + shape, tuple(range(len(sizes), len(sizes) + len(shape))))


def broadcast_to_rank(x, rank: int):
    """`x` with leading axes of size 1 up to `rank` (unchanged when it has that many)."""
    nd = len(shape_of(x))
    return x if nd >= rank else broadcast(x, (1,) * (rank - nd))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape NumPy-style broadcasting gives `shapes` (a ValueError where they do not broadcast)."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={[tuple(s) for s in shapes]}") from None


def reshape(operand, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None):
    """`operand` reshaped to `new_sizes`, its axes first transposed by `dimensions` when given."""
    if dimensions is not None:
        nd = len(shape_of(operand))
        if sorted(int(d) for d in dimensions) != list(range(nd)):
            raise ShapeError(f"lax.reshape: dimensions must be a permutation of the operand's axes, got "
                             f"{tuple(dimensions)} for shape {shape_of(operand)}", user_location())
        operand = P.transpose(as_operand(operand), dimensions)
    return P.reshape(as_operand(operand), new_sizes)


def squeeze(array, dimensions: Sequence[int]):
    """`array` without its axes `dimensions`, each of size 1 (a ValueError otherwise)."""
    shape = shape_of(array)
    dims = canonical_axes("squeeze", dimensions, len(shape))
    if any(shape[d] != 1 for d in dims):
        raise AxisError(f"lax.squeeze: cannot squeeze axes {tuple(dimensions)} of shape {shape}: their sizes must "
                        "be 1", user_location())
    return P.reshape(as_operand(array), tuple(d for i, d in enumerate(shape) if i not in dims))


def expand_dims(array, dimensions: Sequence[int]):
    """`array` with axes of size 1 inserted at `dimensions` (positions in the result; negative from its end)."""
    shape = shape_of(array)
    dims = canonical_axes("expand_dims", dimensions, len(shape) + len(dimensions))
    it = iter(shape)
    return P.reshape(as_operand(array), tuple(1 if i in dims else next(it) for i in range(len(shape) + len(dims))))


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """`operand` with axes [start_dimension, stop_dimension) merged into one (Python slice bounds)."""
    shape = shape_of(operand)
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise ValueError(f"Invalid dimension range passed to collapse: {shape}[{start_dimension}:{stop_dimension}]")
    return P.reshape(as_operand(operand), shape[:lo] + (int(np.prod(shape[lo:hi], dtype=np.int64)),) + shape[hi:])


def transpose(operand, permutation: Sequence[int]):
    """`operand`'s axes permuted: result axis i is operand axis permutation[i]."""
    return P.transpose(as_operand(operand), tuple(int(p) for p in permutation))


def rev(operand, dimensions: Sequence[int]):
    """`operand` reversed along `dimensions`."""
    return P.rev(as_operand(operand), dimensions)


def concatenate(operands: Sequence, dimension: int):
    """`operands` (same dtype and rank) joined along `dimension`."""
    operands = [as_operand(x) for x in operands]
    if not operands:
        raise ValueError("concatenate: the list of operands is empty")
    same_dtypes("concatenate", *operands)
    ranks = {len(shape_of(x)) for x in operands}
    if len(ranks) > 1:
        raise ShapeError("lax.concatenate: cannot concatenate arrays with different numbers of dimensions: got "
                         + ", ".join(str(shape_of(x)) for x in operands), user_location())
    return P.concatenate(operands, dimension)


def pad(operand, padding_value, padding_config: Sequence[tuple[int, int, int]]):
    """`operand` padded by (low, high, interior) per axis with `padding_value` (of operand's dtype);
    negative low or high padding crops, as in lax."""
    operand, padding_value = as_operand(operand), as_operand(padding_value)
    if dtype_of(operand) != dtype_of(padding_value):
        raise DTypeError(f"lax.pad: operand and padding_value must have the same dtype, got {dtype_of(operand).name} "
                         f"and {dtype_of(padding_value).name}", user_location())
    config = [(int(lo), int(hi), int(i)) for lo, hi, i in padding_config]
    out = P.pad(operand, padding_value, [(max(lo, 0), max(hi, 0), i) for lo, hi, i in config])
    if all(lo >= 0 and hi >= 0 for lo, hi, _ in config):
        return out
    padded = shape_of(out)
    start = [max(-lo, 0) for lo, _, _ in config]
    limit = [d - max(-hi, 0) for d, (_, hi, _) in zip(padded, config)]
    if any(lim < s for s, lim in zip(start, limit)):
        raise ShapeError(f"lax.pad: padding {tuple(config)} crops more than the operand {shape_of(operand)} has",
                         user_location())
    return P.slice(out, start, limit)


# --- creation ----------------------------------------------------------------------------------------

def iota(dtype, size: int):
    """0, 1, ..., size - 1 as `dtype`."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape: Sequence[int], dimension: int):
    """An array of `shape` counting 0, 1, ... along `dimension`."""
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"lax.iota: shape must have every element be nonnegative, got {shape}", user_location())
    return P.iota(dtype, shape, dimension)


def full(shape: Sequence[int], fill_value, dtype=None):
    """An array of `shape` filled with the scalar `fill_value`, as `dtype` (fill_value's by default,
    weakly typed for a Python scalar as in lax)."""
    dt = dtype_of(fill_value) if dtype is None else dtypes.canonicalize(dtype)
    return _filled(shape, fill_value, dt, dtype is None and is_weak(fill_value))


def full_like(x, fill_value, dtype=None, shape: Sequence[int] | None = None):
    """An array like `x` (its shape and dtype unless given) filled with the scalar `fill_value`."""
    dt = dtype_of(x) if dtype is None else dtypes.canonicalize(dtype)
    return _filled(shape_of(x) if shape is None else shape, fill_value, dt, dtype is None and is_weak(x))


def _filled(shape: Sequence[int], fill_value, dt: np.dtype, weak: bool):
    if np.ndim(fill_value) != 0:
        raise ShapeError(f"lax.full must be called with scalar fill_value, got fill_value.shape "
                         f"{np.shape(fill_value)}", user_location())
    shape = tuple(int(d) for d in shape)
    if is_concrete(fill_value):
        return P.full(shape, np.asarray(fill_value).astype(dt).item(), dt, weak_type=weak)
    value = fill_value if dtype_of(fill_value) == dt else P.convert_element_type(fill_value, dt)
    return P.broadcast_in_dim(value, shape, ())
