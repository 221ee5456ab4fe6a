"""lax's slicing ops: static (`slice`, `slice_in_dim`, `index_in_dim`, `split`) on the slice primitive, and
dynamic ones (`dynamic_slice`, `dynamic_update_slice` and their `_in_dim` / `_index_in_dim` forms).

A dynamic start index is clamped so the slice fits in the operand (negative ones first count from the
end), as XLA does. Known starts slice statically; traced starts gather (or scatter, for an update) the
slice's elements through a grid of indices, so jit, grad and vmap see ordinary primitives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import ArgumentValueError, DTypeError, IndexingError, ShapeError, user_location
from ember.lax.layout import as_operand, canonical_axes, dtype_of, is_concrete, same_dtypes
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.prims.util import shape_of


def slice(operand, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None):
    """operand[start:limit:stride] on every axis (a TypeError for bounds outside the operand)."""
    return P.slice(as_operand(operand), start_indices, limit_indices, strides)


def slice_in_dim(operand, start_index: int | None, limit_index: int | None, stride: int = 1, axis: int = 0):
    """operand[start:limit:stride] along `axis` (None: the axis' end; negative: counted from its end)."""
    shape = shape_of(operand)
    size = shape[axis]
    start = 0 if start_index is None else int(start_index) + (size if int(start_index) < 0 else 0)
    limit = size if limit_index is None else int(limit_index) + (size if int(limit_index) < 0 else 0)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, int(stride)
    return P.slice(as_operand(operand), starts, limits, strides)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """Entry `index` of `axis` (negative from its end), keeping that axis (size 1) if `keepdims`."""
    size = shape_of(operand)[axis]
    i = int(index) + (size if int(index) < 0 else 0)
    if not 0 <= i < size:
        raise IndexingError(f"index {index} is out of bounds for axis {axis} with size {size}", user_location())
    out = slice_in_dim(operand, i, i + 1, 1, axis)
    return out if keepdims else _drop_axis(out, axis)


def split(operand, sizes: Sequence[int], axis: int = 0) -> list:
    """`operand` cut along `axis` into pieces of `sizes` (which sum to the axis' length)."""
    shape = shape_of(operand)
    (axis,) = canonical_axes("split", (axis,), len(shape))
    sizes = [int(s) for s in sizes]
    if sum(sizes) != shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the operand shape "
                         f"{list(shape)}")
    bounds = np.cumsum([0] + sizes)
    return [slice_in_dim(operand, int(lo), int(hi), 1, axis) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _drop_axis(x, axis: int):
    shape = shape_of(x)
    return P.reshape(x, shape[:axis] + shape[axis + 1:])


# --- dynamic slicing ---------------------------------------------------------------------------------

def dynamic_slice(operand, start_indices, slice_sizes: Sequence[int], *, allow_negative_indices: bool = True):
    """The block of `slice_sizes` at `start_indices` (traced or not), each start clamped so the block
    fits in the operand."""
    operand = as_operand(operand)
    shape = shape_of(operand)
    starts = _starts("dynamic_slice", start_indices, len(shape))
    sizes = tuple(int(s) for s in slice_sizes)
    if len(sizes) != len(shape) or any(not 0 <= n <= d for n, d in zip(sizes, shape)):
        raise ShapeError(f"lax.dynamic_slice: slice_sizes must be less than or equal to operand shape, got "
                         f"slice_sizes {sizes} for operand shape {shape}", user_location())
    if all(is_concrete(s) for s in starts):
        begin = [_clamped(int(s), d, n, allow_negative_indices) for s, d, n in zip(starts, shape, sizes)]
        return P.slice(operand, begin, [b + n for b, n in zip(begin, sizes)])
    return P.gather(operand, _index_grid(starts, shape, sizes, allow_negative_indices))


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices: bool = True):
    """`operand` with `update` (same dtype and rank, no larger) written at `start_indices`, each start
    clamped so the update fits."""
    operand, update = as_operand(operand), as_operand(update)
    same_dtypes("dynamic_update_slice", operand, update)
    shape, sizes = shape_of(operand), shape_of(update)
    if len(sizes) != len(shape):
        raise ShapeError(f"lax.dynamic_update_slice: update must have the same rank as operand, got update shape "
                         f"{sizes} for operand shape {shape}", user_location())
    if any(n > d for n, d in zip(sizes, shape)):
        raise ShapeError(f"lax.dynamic_update_slice: update shape must be smaller than operand shape, got update "
                         f"shape {sizes} for operand shape {shape}", user_location())
    starts = _starts("dynamic_update_slice", start_indices, len(shape))
    if not shape:
        return update
    return P.scatter(operand, _index_grid(starts, shape, sizes, allow_negative_indices), update)


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True):
    """dynamic_slice along one axis: `slice_size` entries of `axis` from `start_index`."""
    shape = shape_of(operand)
    starts, sizes = [0] * len(shape), list(shape)
    starts[axis], sizes[axis] = start_index, int(slice_size)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int, *, allow_negative_indices: bool = True):
    """dynamic_update_slice along one axis: `update` written from `start_index` of `axis`."""
    starts = [0] * len(shape_of(operand))
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True, *, allow_negative_indices: bool = True):
    """Entry `index` (traced or not) of `axis`, keeping that axis (size 1) if `keepdims`."""
    out = dynamic_slice_in_dim(operand, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return out if keepdims else _drop_axis(out, axis % len(shape_of(operand)))


def dynamic_update_index_in_dim(operand, update, index, axis: int, *, allow_negative_indices: bool = True):
    """`operand` with entry `index` of `axis` replaced by `update` (with or without that axis)."""
    shape = shape_of(operand)
    axis = axis % len(shape)
    if len(shape_of(update)) == len(shape) - 1:
        update = P.reshape(as_operand(update), shape_of(update)[:axis] + (1,) + shape_of(update)[axis:])
    return dynamic_update_slice_in_dim(operand, update, index, axis, allow_negative_indices=allow_negative_indices)


def _starts(name: str, start_indices, ndim: int) -> list:
    """The start indices as a list of integer scalars (a traced index vector is split into its entries)."""
    if hasattr(start_indices, "shape") and len(shape_of(start_indices)) == 1:
        n = shape_of(start_indices)[0]
        starts = (list(start_indices) if is_concrete(start_indices)
                  else [P.reshape(P.slice(start_indices, (k,), (k + 1,)), ()) for k in range(n)])
    else:
        starts = list(start_indices)
    if len(starts) != ndim:
        raise ArgumentValueError(f"lax.{name}: {len(starts)} start indices for a rank-{ndim} operand (one per axis)",
                                 user_location())
    for s in starts:
        if np.ndim(s) != 0 or not (dtypes.is_int(dtype_of(s)) or isinstance(s, (int, np.integer))):
            raise DTypeError(f"lax.{name}: start indices must be integer scalars, got {dtype_of(s).name} of shape "
                             f"{np.shape(s)}", user_location())
    return starts


def _clamped(start: int, size: int, n: int, allow_negative: bool) -> int:
    if allow_negative and start < 0:
        start += size
    return min(max(start, 0), size - n)


def _index_grid(starts: list, shape: tuple, sizes: tuple, allow_negative: bool):
    """int32 indices of shape sizes + (rank,): the operand position of each element of the block."""
    int32 = np.dtype(np.int32)
    columns = []
    for k, (s, d, n) in enumerate(zip(starts, shape, sizes)):
        if is_concrete(s):
            start = np.int32(_clamped(int(s), d, n, allow_negative))
        else:
            start = s if dtype_of(s) == int32 else P.convert_element_type(s, int32)
            if allow_negative:
                start = P.select(P.lt(start, 0), P.add(start, d), start)
            start = P.maximum(P.minimum(start, d - n), 0)
        columns.append(P.reshape(P.add(P.iota(int32, sizes, k), start), sizes + (1,)))
    return P.concatenate(columns, len(sizes))
