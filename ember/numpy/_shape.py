"""Shape manipulation with NumPy semantics: reshape, transpose, expand_dims, squeeze, broadcast_to,
concatenate, stack, split, flip, moveaxis, swapaxes, ravel."""

from __future__ import annotations

import math

import numpy as np

from ember.errors import IncompatibleShapesError, ShapeError, user_location
from ember.numpy._core import (
    asarray,
    broadcast_shapes,
    dtype_weak,
    normalize_axes,
    normalize_axis,
    shape_of,
    to_result_type,
)
from ember.tracer import dtypes
from ember.tracer import prims as P


def shape(a) -> tuple[int, ...]:
    return shape_of(asarray(a) if isinstance(a, list) else a)


def ndim(a) -> int:
    return len(shape(a))


def size(a, axis: int | None = None) -> int:
    s = shape(a)
    return math.prod(s) if axis is None else s[axis]


def reshape(a, newshape, order: str = "C"):
    """Reshape with one -1 inferred, as numpy.reshape (C order only)."""
    if order != "C":
        raise NotImplementedError("reshape: only order='C' is supported")
    a = asarray(a)
    newshape = (newshape,) if isinstance(newshape, (int, np.integer)) else tuple(newshape)
    newshape = tuple(int(d) for d in newshape)
    total = math.prod(a.shape)
    if newshape.count(-1) > 1:
        raise ShapeError(f"reshape: can only specify one unknown dimension in {newshape}", user_location())
    if -1 in newshape:
        known = math.prod(d for d in newshape if d != -1)
        if known == 0 or total % known:
            raise ShapeError(f"reshape: cannot reshape array of size {total} (shape {a.shape}) into shape "
                             f"{newshape}", user_location())
        newshape = tuple(total // known if d == -1 else d for d in newshape)
    if math.prod(newshape) != total or any(d < 0 for d in newshape):
        raise ShapeError(f"reshape: cannot reshape array of size {total} (shape {a.shape}) into shape "
                         f"{newshape}", user_location())
    return P.reshape(a, newshape)


def ravel(a):
    return reshape(a, (-1,))


def transpose(a, axes=None):
    a = asarray(a)
    nd = len(a.shape)
    if axes is None:
        perm = tuple(reversed(range(nd)))
    else:
        axes = tuple(axes)
        if len(axes) != nd:
            raise ShapeError(f"transpose: axes {axes} don't match an array of dimension {nd}", user_location())
        perm = tuple(normalize_axis(ax, nd, "transpose") for ax in axes)
        if sorted(perm) != list(range(nd)):
            raise ShapeError(f"transpose: repeated axis in {axes}", user_location())
    return P.transpose(a, perm)


def moveaxis(a, source, destination):
    a = asarray(a)
    nd = len(a.shape)
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise IncompatibleShapesError("moveaxis: source and destination must have the same number of elements",
                         user_location())
    src = [normalize_axis(s, nd, "moveaxis") for s in src]
    dst = [normalize_axis(d, nd, "moveaxis") for d in dst]
    for which, axes in (("source", src), ("destination", dst)):
        if len(set(axes)) != len(axes):
            raise ShapeError(f"moveaxis: repeated axis in `{which}` {axes} (array of shape {a.shape})",
                             user_location())
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return P.transpose(a, tuple(order))


def swapaxes(a, axis1: int, axis2: int):
    a = asarray(a)
    nd = len(a.shape)
    i, j = normalize_axis(axis1, nd, "swapaxes"), normalize_axis(axis2, nd, "swapaxes")
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return P.transpose(a, tuple(perm))


def expand_dims(a, axis):
    a = asarray(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out_nd = len(a.shape) + len(axes)
    axes = normalize_axes(axes, out_nd, "expand_dims")
    it = iter(a.shape)
    return P.reshape(a, tuple(1 if i in axes else next(it) for i in range(out_nd)))


def squeeze(a, axis=None):
    a = asarray(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = normalize_axes(axis, len(a.shape), "squeeze")
        for ax in axes:
            if a.shape[ax] != 1:
                raise IncompatibleShapesError(f"squeeze: cannot select an axis to squeeze out which has size not equal "
                                 f"to one (axis {ax} of shape {a.shape})", user_location())
    return P.reshape(a, tuple(d for i, d in enumerate(a.shape) if i not in axes))


def broadcast_to(array, shape):
    """Broadcast to `shape` with NumPy's rules (the array's axes align with the trailing ones)."""
    a = asarray(array)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if len(shape) < len(a.shape) or broadcast_shapes(a.shape, shape, name="broadcast_to") != shape:
        raise IncompatibleShapesError(f"broadcast_to: cannot broadcast an array of shape {a.shape} to shape {shape}",
                         user_location())
    return P.broadcast_to(a, shape)


def broadcast_arrays(*args):
    arrs = [asarray(a) for a in args]
    s = broadcast_shapes(*(a.shape for a in arrs), name="broadcast_arrays")
    return [P.broadcast_to(a, s) for a in arrs]


def _common_dtype(arrays):
    target, weak = dtypes.result_type(*(dtype_weak(a) for a in arrays))
    return [to_result_type(a, target, weak) for a in arrays]


def concatenate(arrays, axis: int | None = 0):
    arrays = [asarray(a) for a in arrays]
    if not arrays:
        raise ValueError("concatenate: need at least one array to concatenate")
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    nd = len(arrays[0].shape)
    if nd == 0:
        raise IncompatibleShapesError("concatenate: zero-dimensional arrays cannot be concatenated", user_location())
    for a in arrays[1:]:
        if len(a.shape) != nd:
            raise ShapeError(f"concatenate: all the input arrays must have the same number of dimensions; "
                             f"got shapes {[x.shape for x in arrays]}", user_location())
    axis = normalize_axis(axis, nd, "concatenate")
    for a in arrays[1:]:
        if any(x != y for i, (x, y) in enumerate(zip(a.shape, arrays[0].shape)) if i != axis):
            raise ShapeError(f"concatenate: shapes {[x.shape for x in arrays]} must match except along "
                             f"axis {axis}", user_location())
    return P.concatenate(_common_dtype(arrays), axis)


def stack(arrays, axis: int = 0):
    arrays = [asarray(a) for a in arrays]
    if not arrays:
        raise ValueError("stack: need at least one array to stack")
    s = arrays[0].shape
    for a in arrays[1:]:
        if a.shape != s:
            raise IncompatibleShapesError(f"stack: all input arrays must have the same shape; got "
                             f"{[x.shape for x in arrays]}", user_location())
    axis = normalize_axis(axis, len(s) + 1, "stack")
    return concatenate([expand_dims(a, axis) for a in arrays], axis)


def hstack(arrays):
    """Concatenate along the second axis (the first for 1-D arrays; 0-d arrays count as 1-D)."""
    arrays = [atleast_1d(a) for a in arrays]
    if not arrays:
        raise ValueError("hstack: need at least one array to concatenate")
    return concatenate(arrays, 0 if len(arrays[0].shape) == 1 else 1)


def vstack(arrays):
    """Concatenate along the first axis after making every array at least 2-D."""
    return concatenate([atleast_2d(a) for a in arrays], 0)


def atleast_1d(a):
    """`a` with 0-d arrays made 1-D."""
    a = asarray(a)
    return reshape(a, (1,)) if len(a.shape) == 0 else a


def atleast_2d(a):
    """`a` with 0-d and 1-D arrays made 2-D (a 1-D array becomes a row)."""
    a = asarray(a)
    return reshape(a, (1,) * (2 - len(a.shape)) + a.shape) if len(a.shape) < 2 else a


def flip(m, axis=None):
    m = asarray(m)
    return P.rev(m, normalize_axes(axis, len(m.shape), "flip"))


def split(ary, indices_or_sections, axis: int = 0):
    """Split into equal sections or at the given indices, as numpy.split."""
    a = asarray(ary)
    axis = normalize_axis(axis, len(a.shape), "split")
    n = a.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise IncompatibleShapesError(f"split: array split does not result in an equal division ({n} into {k})",
                             user_location())
        bounds = [i * (n // k) for i in range(k + 1)]
    else:  # split points are slice bounds: negative ones count from the end
        bounds = [0] + [min(max(int(i) + n if int(i) < 0 else int(i), 0), n) for i in indices_or_sections] + [n]
    out = []
    for lo, hi in zip(bounds, bounds[1:]):
        start = [0] * len(a.shape)
        limit = list(a.shape)
        start[axis], limit[axis] = lo, max(lo, hi)
        out.append(P.slice(a, start, limit))
    return out
