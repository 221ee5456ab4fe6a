"""Array structure functions with jax.numpy's semantics, each a composition of existing primitives:
triangles and diagonals (tri, tril, triu, diag, diagonal, diagflat, trace), products (kron, cross),
grids (meshgrid, indices), repetition (tile, repeat, roll, rot90), indexing along an axis
(take_along_axis, put_along_axis), differences (diff, ediff1d, gradient) and pad in JAX's modes."""

from __future__ import annotations

import builtins
import math

import numpy as np

from ember.errors import ArgumentError, ArgumentValueError, DTypeError, ShapeError, user_location
from ember.numpy._core import asarray, broadcast_shapes, dtype_weak, normalize_axis, promote, shape_of, to_dtype
from ember.numpy._indexing import getitem, take
from ember.numpy._math import add, divide, multiply, negative, not_equal, round, subtract
from ember.numpy._reductions import max as _max
from ember.numpy._reductions import mean as _mean
from ember.numpy._reductions import min as _min
from ember.numpy._reductions import sum as _sum
from ember.numpy._shape import concatenate, flip, moveaxis, ravel, reshape, stack, swapaxes
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.trace import Tracer


def _zeros_like(x):
    """Zeros of x's shape, dtype and weak type (so a select with them keeps x's type)."""
    dt, weak = dtype_weak(x)
    return P.full(shape_of(x), 0, dt, weak_type=weak)


def _slice_axis(x, start: int | None, stop: int | None, axis: int):
    """x[..., start:stop, ...] on `axis` (Python slice bounds: negative ones count from the end)."""
    shape = shape_of(x)
    lo, hi, _ = builtins.slice(start, stop).indices(shape[axis])
    starts, limits = [0] * len(shape), list(shape)
    starts[axis], limits[axis] = lo, builtins.max(lo, hi)
    return P.slice(x, starts, limits)


def _static_int(x, name: str, arg: str) -> int:
    """A Python int from a static argument, with an error naming the user's line when it is traced."""
    if isinstance(x, Tracer) or not isinstance(x, (int, np.integer)) or isinstance(x, (bool, np.bool_)):
        raise ArgumentError(f"{name}: `{arg}` must be a static Python int, got {type(x).__name__}", user_location())
    return int(x)


# --- triangles and diagonals ----------------------------------------------------------------------

def _tri_mask(n: int, m: int, k: int):
    """Boolean (n, m) mask of the positions j <= i + k."""
    rows = P.iota(np.dtype(np.int32), (n, m), 0)
    cols = P.iota(np.dtype(np.int32), (n, m), 1)
    return P.ge(P.add(rows, np.int32(k)), cols)


def tri(N: int, M: int | None = None, k: int = 0, dtype=None):
    """Ones at and below the k-th diagonal of an N x M array (float32 by default, as jnp.tri)."""
    n = _static_int(N, "tri", "N")
    m = n if M is None else _static_int(M, "tri", "M")
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.float_
    return P.convert_element_type(_tri_mask(n, m, _static_int(k, "tri", "k")), dt)


def _triangle(m, k: int, name: str, lower: bool):
    m = asarray(m)
    if len(m.shape) < 2:
        raise ArgumentValueError(f"{name}: the argument must be at least 2-dimensional, got shape {m.shape}",
                                 user_location())
    n_rows, n_cols = m.shape[-2:]
    k = _static_int(k, name, "k")
    keep = _tri_mask(n_rows, n_cols, k) if lower else P.not_(_tri_mask(n_rows, n_cols, k - 1))
    return P.select(P.broadcast_to(keep, m.shape), m, _zeros_like(m))


def tril(m, k: int = 0):
    """`m` with the elements above the k-th diagonal of its last two axes zeroed."""
    return _triangle(m, k, "tril", lower=True)


def triu(m, k: int = 0):
    """`m` with the elements below the k-th diagonal of its last two axes zeroed."""
    return _triangle(m, k, "triu", lower=False)


def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """The `offset` diagonal of the (axis1, axis2) planes, as a new last axis (numpy.diagonal); read as
    a strided slice of the flattened plane, so its gradient is a pad."""
    a = asarray(a)
    nd = len(a.shape)
    if nd < 2:
        raise ArgumentValueError(f"diagonal requires an array of at least two dimensions, got shape {a.shape}",
                                 user_location())
    i, j = normalize_axis(axis1, nd, "diagonal"), normalize_axis(axis2, nd, "diagonal")
    if i == j:
        raise ArgumentValueError("diagonal: axis1 and axis2 cannot be the same", user_location())
    offset = _static_int(offset, "diagonal", "offset")
    a = P.transpose(a, tuple(d for d in range(nd) if d not in (i, j)) + (i, j))
    a = _slice_axis(a, offset, None, nd - 1) if offset >= 0 else _slice_axis(a, -offset, None, nd - 2)
    n = builtins.min(a.shape[-2:])
    lead = a.shape[:-2]
    plane = P.reshape(_slice_axis(_slice_axis(a, 0, n, nd - 2), 0, n, nd - 1), lead + (n * n,))
    return P.slice(plane, (0,) * len(plane.shape), plane.shape, (1,) * len(lead) + (n + 1,))


def diag(v, k: int = 0):
    """The k-th diagonal of a 2-D array, or a 2-D array with a 1-D `v` on its k-th diagonal."""
    v = asarray(v)
    k = _static_int(k, "diag", "k")
    if len(v.shape) == 2:
        return diagonal(v, k)
    if len(v.shape) != 1:
        raise ArgumentValueError(f"diag: the input must be 1-D or 2-D, got shape {v.shape}", user_location())
    n = v.shape[0] + builtins.abs(k)
    # v[i] sits at (i, i + k): padded to n it is a column (k >= 0) or a row (k < 0) of the result.
    padded = P.pad(v, to_dtype(0, v.dtype), ((0, builtins.abs(k), 0),))
    line = P.reshape(padded, (n, 1) if k >= 0 else (1, n))
    on_diag = P.eq(P.add(P.iota(np.dtype(np.int32), (n, n), 0), np.int32(k)), P.iota(np.dtype(np.int32), (n, n), 1))
    full = P.broadcast_to(line, (n, n))
    return P.select(on_diag, full, _zeros_like(full))


def diagflat(v, k: int = 0):
    """A 2-D array with the flattened `v` on its k-th diagonal."""
    return diag(ravel(asarray(v)), k)


def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None):
    """Sum of the `offset` diagonal of the (axis1, axis2) planes (sum's dtypes)."""
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# --- products -------------------------------------------------------------------------------------

def kron(a, b):
    """Kronecker product: blocks a[i...] * b, for arrays of any (leading-1-padded) ranks."""
    a, b = promote(asarray(a), asarray(b), name="kron")
    nd = builtins.max(len(a.shape), len(b.shape))
    sa = (1,) * (nd - len(a.shape)) + tuple(a.shape)
    sb = (1,) * (nd - len(b.shape)) + tuple(b.shape)
    a2 = P.reshape(a, tuple(d for s in sa for d in (s, 1)))
    b2 = P.reshape(b, tuple(d for s in sb for d in (1, s)))
    return reshape(multiply(a2, b2), tuple(x * y for x, y in zip(sa, sb)))


def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None):
    """Cross product of 2- or 3-vectors along `axisa`/`axisb` (or `axis`), the result's vectors along
    `axisc`; a 2-vector has a zero third component, and two 2-vectors give the scalar z component, as
    numpy.cross."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = promote(asarray(a), asarray(b), name="cross")
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ArgumentValueError(f"cross: incompatible dimensions for cross product (dimension must be 2 or 3); "
                                 f"got vectors of length {a.shape[-1]} and {b.shape[-1]}", user_location())
    a0, a1, b0, b1 = (getitem(v, (Ellipsis, i)) for v in (a, b) for i in (0, 1))
    z = subtract(multiply(a0, b1), multiply(a1, b0))
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return z
    a2 = getitem(a, (Ellipsis, 2)) if a.shape[-1] == 3 else _zeros_like(a0)
    b2 = getitem(b, (Ellipsis, 2)) if b.shape[-1] == 3 else _zeros_like(b0)
    x = subtract(multiply(a1, b2), multiply(a2, b1))
    y = subtract(multiply(a2, b0), multiply(a0, b2))
    return moveaxis(stack([x, y, z], axis=0), 0, axisc)


# --- grids ----------------------------------------------------------------------------------------

def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Coordinate arrays from 1-D coordinate vectors; 'xy' indexing swaps the first two axes."""
    if indexing not in ("xy", "ij"):
        raise ArgumentValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}", user_location())
    xi = [asarray(x) for x in xi]
    for x in xi:
        if len(x.shape) != 1:
            raise ArgumentValueError(f"meshgrid: arguments must be 1-D, got shape {x.shape}", user_location())
    shape = [x.shape[0] for x in xi]
    position = list(range(len(xi)))
    if indexing == "xy" and len(xi) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
        position[0], position[1] = 1, 0
    out = []
    for x, p in zip(xi, position):
        s = [1] * len(xi)
        s[p] = x.shape[0]
        y = P.reshape(x, tuple(s))
        out.append(y if sparse else P.broadcast_to(y, tuple(shape)))
    return out


def indices(dimensions, dtype=None, sparse: bool = False):
    """An index grid: arrays whose entries vary along one axis each (stacked unless `sparse`)."""
    dims = tuple(_static_int(d, "indices", "dimensions") for d in dimensions)
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.int_
    out = []
    for i, d in enumerate(dims):
        shape = tuple(d if j == i else 1 for j in range(len(dims)))
        grid = P.iota(dt, shape, i)
        out.append(grid if sparse else P.broadcast_to(grid, dims))
    if sparse:
        return tuple(out)
    if not out:
        return P.full((0,), 0, dt)
    return P.concatenate([P.reshape(g, (1,) + dims) for g in out], 0)


# --- repetition -----------------------------------------------------------------------------------

def tile(A, reps):
    """`A` repeated `reps` times along each axis (both padded with leading 1s to the same rank)."""
    a = asarray(A)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    reps = tuple(_static_int(r, "tile", "reps") for r in reps)
    nd = builtins.max(len(reps), len(a.shape))
    shape = (1,) * (nd - len(a.shape)) + tuple(a.shape)
    reps = (1,) * (nd - len(reps)) + reps
    a = P.reshape(a, tuple(d for s in shape for d in (1, s)))
    a = P.broadcast_to(a, tuple(d for r, s in zip(reps, shape) for d in (r, s)))
    return P.reshape(a, tuple(r * s for r, s in zip(reps, shape)))


def _repeat_positions(repeats, total: int):
    """For each of `total` output positions, the index of the input element it repeats: the number of
    running totals of `repeats` at or below it (a comparison matrix, no cumsum needed). Positions past
    sum(repeats) give the last index, as JAX."""
    n = shape_of(repeats)[0]
    reps = to_dtype(repeats, dtypes.int_)
    upto = P.ge(P.iota(np.dtype(np.int32), (n, n), 0), P.iota(np.dtype(np.int32), (n, n), 1))
    ends = P.reduce_sum(P.select(upto, P.broadcast_to(P.reshape(reps, (1, n)), (n, n)),
                                 P.full((n, n), 0, dtypes.int_)), (1,))  # inclusive running totals
    pos = P.iota(dtypes.int_, (total, n), 0)
    passed = P.convert_element_type(P.ge(pos, P.broadcast_to(P.reshape(ends, (1, n)), (total, n))), dtypes.int_)
    return P.minimum(P.reduce_sum(passed, (1,)), dtypes.int_.type(n - 1)) if n else passed


def repeat(a, repeats, axis: int | None = None, *, total_repeat_length: int | None = None):
    """Each element repeated `repeats` times along `axis` (flattened when None). `repeats` is an int or
    an array of per-element counts; traced counts need a static `total_repeat_length`."""
    a = asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    if len(a.shape) == 0:
        raise ArgumentValueError("repeat: a 0-d array needs axis=None", user_location())
    axis = normalize_axis(axis, len(a.shape), "repeat")
    n = a.shape[axis]
    if isinstance(repeats, Tracer):
        if total_repeat_length is None:
            raise ArgumentError("repeat: traced `repeats` need a static total_repeat_length "
                                "(the result's length along the axis)", user_location())
        reps = P.reshape(repeats, (math.prod(repeats.shape),))
        reps = P.broadcast_to(reps, (n,)) if shape_of(reps) == (1,) else reps
        if shape_of(reps) != (n,):
            raise ArgumentValueError(f"repeat: {shape_of(repeats)} repeats for an axis of length {n}",
                                     user_location())
        return take(a, _repeat_positions(reps, total_repeat_length), axis=axis)
    reps = np.asarray(repeats)
    if reps.dtype.kind not in "iu":
        raise DTypeError(f"repeat: repeats must be integers, got {reps.dtype}", user_location())
    if reps.ndim == 0 and total_repeat_length is None:
        r = int(reps)
        shape = list(a.shape)
        b = P.broadcast_to(P.reshape(a, tuple(shape[:axis + 1]) + (1,) + tuple(shape[axis + 1:])),
                           tuple(shape[:axis + 1]) + (r,) + tuple(shape[axis + 1:]))
        shape[axis] *= r
        return P.reshape(b, tuple(shape))
    try:
        reps = np.broadcast_to(reps.ravel(), (n,))
    except ValueError:
        raise ArgumentValueError(f"repeat: {reps.size} repeats for an axis of length {n}", user_location()) from None
    if (reps < 0).any():
        raise ArgumentValueError("repeat: repeats may not be negative", user_location())
    idx = np.repeat(np.arange(n, dtype=np.int32), reps)
    if total_repeat_length is not None:  # cut, or padded with the last index, as JAX
        total = _static_int(total_repeat_length, "repeat", "total_repeat_length")
        last = idx[-1] if len(idx) else n - 1
        idx = np.concatenate([idx[:total], np.full(builtins.max(total - len(idx), 0), last, np.int32)])
    if n == 0:
        return a
    return take(a, idx, axis=axis)


def roll(a, shift, axis=None):
    """Elements shifted by `shift` along `axis` (of the flattened array when None), wrapping around."""
    a = asarray(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    shifts = _shift_list(shift)
    if len(shifts) != len(axes):
        if len(shifts) == 1:
            shifts = shifts * len(axes)
        elif len(axes) == 1:
            axes = axes * len(shifts)
        else:
            raise ArgumentValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes", user_location())
    for s, ax in zip(shifts, axes):
        a = _roll_axis(a, s, normalize_axis(ax, len(a.shape), "roll"))
    return a


def _shift_list(shift) -> list:
    """roll's shifts as a list of ints or traced scalars (one per axis, or one for all)."""
    if isinstance(shift, Tracer):
        return [shift] if shift.shape == () else [getitem(shift, i) for i in range(shift.shape[0])]
    return [int(s) for s in np.ravel(shift)]


def _roll_axis(a, shift, axis: int):
    n = a.shape[axis]
    if n == 0:
        return a
    if isinstance(shift, Tracer):  # a traced shift: gather at (i - shift) mod n
        it = dtypes.int_.type
        s = P.rem(to_dtype(shift, dtypes.int_), it(n))
        src = P.rem(P.add(P.sub(P.iota(dtypes.int_, (n,), 0), s), it(n)), it(n))
        return take(a, src, axis=axis)
    s = int(shift) % n
    if s == 0:
        return a
    return concatenate([_slice_axis(a, n - s, None, axis), _slice_axis(a, 0, n - s, axis)], axis)


def rot90(m, k: int = 1, axes: tuple[int, int] = (0, 1)):
    """`m` rotated by 90 degrees k times in the plane of `axes`, from the first toward the second."""
    m = asarray(m)
    if len(axes) != 2:
        raise ArgumentValueError("rot90: len(axes) must be 2", user_location())
    nd = len(m.shape)
    ax0, ax1 = normalize_axis(axes[0], nd, "rot90"), normalize_axis(axes[1], nd, "rot90")
    if ax0 == ax1:
        raise ArgumentValueError("rot90: axes must be different", user_location())
    k = _static_int(k, "rot90", "k") % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, ax0), ax1)
    if k == 1:
        return swapaxes(flip(m, ax1), ax0, ax1)
    return flip(swapaxes(m, ax0, ax1), ax1)


# --- indexing along an axis -----------------------------------------------------------------------

def _along_axis(arr, indices, axis, name: str, wrap: bool = True):
    """The operand, indices (broadcast to the result's shape, negative ones wrapped once if `wrap`) and
    axis of take/put_along_axis, with JAX's broadcasting: indices' other axes against arr's."""
    arr, indices = asarray(arr), asarray(indices)
    if not dtypes.is_int(indices.dtype):
        raise DTypeError(f"{name}: indices must be of integer type, got {indices.dtype}", user_location())
    if axis is None:
        if len(indices.shape) != 1:
            raise ArgumentValueError(f"{name}: indices must be 1-D when axis=None, got shape {indices.shape}",
                                     user_location())
        arr, axis = ravel(arr), 0
    nd = len(arr.shape)
    if len(indices.shape) != nd:
        raise ArgumentValueError(f"{name}: indices and arr must have the same number of dimensions; "
                                 f"{len(indices.shape)} vs. {nd}", user_location())
    axis = normalize_axis(axis, nd, name)
    out_shape = broadcast_shapes(indices.shape, tuple(1 if i == axis else d for i, d in enumerate(arr.shape)),
                                 name=name)
    itype = np.dtype(np.int64) if indices.dtype == np.int64 else np.dtype(np.int32)
    idx = P.broadcast_to(to_dtype(indices, itype), out_shape)
    if wrap:
        idx = P.select(P.lt(idx, itype.type(0)), P.add(idx, itype.type(arr.shape[axis])), idx)
    return arr, idx, axis


def _index_vectors(idx, axis: int):
    """Gather/scatter index vectors (shape idx.shape + (ndim,)): idx on `axis`, iotas on the others."""
    shape = shape_of(idx)
    cols = [idx if i == axis else P.iota(idx.dtype, shape, i) for i in range(len(shape))]
    return P.concatenate([P.reshape(c, shape + (1,)) for c in cols], len(shape))


def _fill_value(dtype: np.dtype, fill_value):
    """JAX's default fill for out-of-bounds gathers: NaN, the most negative int, the largest unsigned, True."""
    if fill_value is not None:
        return fill_value
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "i":
        return int(np.iinfo(dtype).min)
    if dtype.kind == "u":
        return int(np.iinfo(dtype).max)
    return True


def take_along_axis(arr, indices, axis: int | None = -1, mode=None, fill_value=None):
    """arr's elements at `indices` along `axis`, the other axes matched (broadcast) with indices'.
    Out-of-bounds indices give `fill_value` (mode None or 'fill', JAX's default) or the nearest element
    ('clip', 'promise_in_bounds')."""
    if mode not in (None, "fill", "clip", "promise_in_bounds"):
        raise ArgumentValueError(f"take_along_axis: unsupported mode {mode!r} (JAX's: 'fill', 'clip', "
                                 "'promise_in_bounds')", user_location())
    arr, idx, axis = _along_axis(arr, indices, axis, "take_along_axis", wrap=mode != "promise_in_bounds")
    dt, weak = dtype_weak(arr)
    n = arr.shape[axis]
    if n == 0:  # nothing to read: zeros, as JAX
        return P.full(shape_of(idx), 0, dt, weak_type=weak)
    out = P.gather(arr, _index_vectors(idx, axis))
    if mode not in (None, "fill"):
        return out
    ok = P.and_(P.ge(idx, idx.dtype.type(0)), P.lt(idx, idx.dtype.type(n)))
    return P.select(ok, out, P.full(shape_of(out), _fill_value(dt, fill_value), dt, weak_type=weak))


def put_along_axis(arr, indices, values, axis: int | None, inplace: bool = True, mode=None):
    """A copy of `arr` with `values` written at `indices` along `axis` (functional: JAX requires
    inplace=False); out-of-bounds writes are dropped."""
    if inplace:
        raise ArgumentValueError("put_along_axis: arrays are immutable, so the update cannot be in place; pass "
                                 "inplace=False to get the updated copy", user_location())
    if mode not in (None, "drop", "promise_in_bounds", "clip"):
        raise ArgumentValueError(f"put_along_axis: unsupported mode {mode!r}", user_location())
    a = asarray(arr)
    target, idx, ax = _along_axis(a, indices, axis, "put_along_axis", wrap=mode != "promise_in_bounds")
    if mode == "clip":
        it = idx.dtype.type
        idx = P.maximum(P.minimum(idx, it(target.shape[ax] - 1)), it(0))
    vals = P.broadcast_to(to_dtype(asarray(values), dtype_weak(target)[0]), shape_of(idx))
    out = P.scatter(target, _index_vectors(idx, ax), vals)
    return reshape(out, a.shape) if axis is None else out


# --- differences ----------------------------------------------------------------------------------

def _as_edge(x, like, axis: int):
    """`x` (prepend/append) as an array to concatenate with `like` on `axis`: a scalar broadcast to one
    slice, an array taken as given."""
    x = asarray(x)
    if len(x.shape) == 0:
        shape = tuple(1 if i == axis else d for i, d in enumerate(like.shape))
        return P.broadcast_to(x, shape)
    return x


def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None):
    """The n-th discrete difference along `axis` (not_equal for booleans, as NumPy)."""
    a = asarray(a)
    n = _static_int(n, "diff", "n")
    if n < 0:
        raise ArgumentValueError(f"diff: order must be non-negative but got {n}", user_location())
    if len(a.shape) == 0:
        raise ArgumentValueError("diff requires input that is at least one dimensional", user_location())
    axis = normalize_axis(axis, len(a.shape), "diff")
    if prepend is not None or append is not None:
        parts = ([_as_edge(prepend, a, axis)] if prepend is not None else []) + [a] + (
            [_as_edge(append, a, axis)] if append is not None else [])
        a = concatenate(parts, axis)
    op = not_equal if dtypes.is_bool(a.dtype) else subtract
    for _ in range(n):
        if a.shape[axis] == 0:
            break
        a = op(_slice_axis(a, 1, None, axis), _slice_axis(a, None, -1, axis))
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened array's consecutive elements, with to_begin/to_end (cast to its
    dtype) around them."""
    a = ravel(asarray(ary))
    out = subtract(_slice_axis(a, 1, None, 0), _slice_axis(a, None, -1, 0)) if a.shape[0] else a
    dt = dtype_weak(out)[0]
    begin = [ravel(to_dtype(asarray(to_begin), dt))] if to_begin is not None else []
    end = [ravel(to_dtype(asarray(to_end), dt))] if to_end is not None else []
    return concatenate(begin + [out] + end, 0) if begin or end else out


def gradient(f, *varargs, axis=None, edge_order: int | None = None):
    """Second-order central differences inside, first-order at the edges, with uniform (scalar) or
    coordinate-array spacing per axis; one array per axis (just one for a single axis)."""
    if edge_order is not None and edge_order != 1:
        raise NotImplementedError("gradient: only edge_order=1 is supported (as JAX, which accepts only None)")
    a, *spacing = promote(asarray(f), *(asarray(h) for h in varargs), name="gradient")
    if not dtypes.is_float(a.dtype):
        ft = dtypes.default_float_for(a.dtype)
        a, spacing = to_dtype(a, ft), [to_dtype(h, ft) for h in spacing]
    axes = tuple(range(len(a.shape))) if axis is None else tuple(
        normalize_axis(ax, len(a.shape), "gradient") for ax in ((axis,) if isinstance(axis, int) else axis))
    if not axes:
        return []
    if builtins.min(a.shape[i] for i in axes) < 2:
        raise ArgumentValueError("gradient: shape of array too small to calculate a numerical gradient, at "
                                 "least 2 elements are required", user_location())
    if len(spacing) == 0:
        spacing = [1.0] * len(axes)
    elif len(spacing) == 1:
        spacing = spacing * len(axes)
    elif len(spacing) != len(axes):
        raise ArgumentError(f"gradient: invalid number of spacing arguments {len(spacing)} for axis={axis}",
                            user_location())
    out = [_gradient_along(a, h, ax) for ax, h in zip(axes, spacing)]
    return out[0] if len(axes) == 1 else out


def _gradient_along(a, h, axis: int):
    sl = lambda x, lo, hi: _slice_axis(x, lo, hi, axis)  # noqa: E731
    first = subtract(sl(a, 1, 2), sl(a, 0, 1))
    last = subtract(sl(a, -1, None), sl(a, -2, -1))
    if len(shape_of(h)) == 0:
        inner = divide(multiply(subtract(sl(a, 2, None), sl(a, None, -2)), 0.5), h)
        first, last = divide(first, h), divide(last, h)
    elif len(shape_of(h)) == 1:
        if shape_of(h)[0] != a.shape[axis]:
            raise ArgumentValueError("gradient: spacing arrays must have the same length as the dimension "
                                     "along which the gradient is calculated", user_location())
        x = reshape(h, tuple(d if i == axis else 1 for i, d in enumerate(a.shape)))
        first = divide(first, subtract(sl(x, 1, 2), sl(x, 0, 1)))
        last = divide(last, subtract(sl(x, -1, None), sl(x, -2, -1)))
        dx1 = subtract(sl(x, 1, -1), sl(x, 0, -2))
        dx2 = subtract(sl(x, 2, None), sl(x, 1, -1))
        total = add(dx1, dx2)
        c0 = negative(divide(dx2, multiply(dx1, total)))
        c1 = divide(subtract(dx2, dx1), multiply(dx1, dx2))
        c2 = divide(dx1, multiply(dx2, total))
        inner = add(add(multiply(c0, sl(a, 0, -2)), multiply(c1, sl(a, 1, -1))), multiply(c2, sl(a, 2, None)))
    else:
        raise ArgumentValueError("gradient: spacing arrays must be 1-D arrays or scalars", user_location())
    return concatenate([first, inner, last], axis)


# --- pad ------------------------------------------------------------------------------------------

_PAD_OPTIONS = {"constant": ("constant_values",), "empty": (), "edge": (), "wrap": (),
                "linear_ramp": ("end_values",), "maximum": ("stat_length",), "mean": ("stat_length",),
                "median": ("stat_length",), "minimum": ("stat_length",), "reflect": ("reflect_type",),
                "symmetric": ("reflect_type",)}


def _pairs(value, nd: int, name: str) -> tuple:
    """A static pad_width-like argument as one (before, after) pair per axis, from numpy.pad's forms:
    an int, (int,), (before, after), ((before, after),) or one pair per axis."""
    if isinstance(value, Tracer) or (isinstance(value, (list, tuple)) and builtins.any(
            isinstance(v, Tracer) for v in np.ravel(np.asarray(value, dtype=object)))):
        raise ArgumentError(f"pad: `{name}` must be static (Python ints or NumPy arrays), not traced values",
                            user_location())
    arr = np.asarray(value, dtype=object)
    shapes = {(nd, 2): lambda: [tuple(r) for r in arr], (1, 2): lambda: [tuple(arr[0])] * nd,
              (2,): lambda: [tuple(arr)] * nd, (1,): lambda: [(arr[0], arr[0])] * nd,
              (): lambda: [(arr[()], arr[()])] * nd}
    if arr.shape not in shapes:
        raise ArgumentValueError(f"pad: `{name}` with {nd} axes has unsupported shape {arr.shape}; valid shapes "
                                 f"are {(nd, 2)}, (1, 2), (2,), (1,) and ()", user_location())
    return tuple(shapes[arr.shape]())


def _widths(pad_width, nd: int) -> tuple:
    pairs = _pairs(pad_width, nd, "pad_width")
    for pair in pairs:
        for w in pair:
            if not isinstance(w, (int, np.integer)) or isinstance(w, (bool, np.bool_)):
                raise ArgumentError(f"pad: `pad_width` must be of integral type, got {pad_width!r}", user_location())
            if w < 0:
                raise ArgumentValueError(f"pad: pad widths cannot be negative, got {pad_width!r}", user_location())
    return tuple((int(lo), int(hi)) for lo, hi in pairs)


def _lax_pad(x, value, axis: int, lo: int, hi: int):
    """P.pad of one side pair on one axis."""
    config = tuple((lo, hi, 0) if i == axis else (0, 0, 0) for i in range(len(shape_of(x))))
    return P.pad(x, value, config)


def _pad_constant(a, widths, constant_values):
    dt, weak = dtype_weak(a)
    values = to_dtype(asarray(constant_values), dt, weak) if not isinstance(constant_values, (int, float, bool)) \
        else to_dtype(constant_values, dt)
    vshape = shape_of(values)
    if len(vshape) == 0 or vshape == (1,):
        return P.pad(a, P.reshape(values, ()), tuple((lo, hi, 0) for lo, hi in widths))
    if len(vshape) > 2 or vshape[-1] not in (1, 2):
        raise ArgumentValueError(f"pad: constant_values has unsupported shape {vshape}; the last axis of a 1-D "
                                 "or 2-D constant_values must be of size 1 or 2", user_location())
    values = P.broadcast_to(values, (len(widths), 2))
    for i, (lo, hi) in enumerate(widths):
        if lo:
            a = _lax_pad(a, getitem(values, (i, 0)), i, lo, 0)
        if hi:
            a = _lax_pad(a, getitem(values, (i, 1)), i, 0, hi)
    return a


def _no_padding_of_empty(n: int, lo: int, hi: int, mode: str) -> None:
    if n == 0 and (lo or hi):
        raise ArgumentValueError(f"pad: cannot apply {mode!r} padding to an empty axis", user_location())


def _copies(x, count: int, axis: int):
    """`count` copies of the size-1 axis `axis` of x (a broadcast)."""
    shape = list(shape_of(x))
    shape[axis] = count
    return P.broadcast_to(x, tuple(shape))


def _pad_edge(a, widths):
    for i, (lo, hi) in enumerate(widths):
        _no_padding_of_empty(a.shape[i], lo, hi, "edge")
        if a.shape[i]:
            a = concatenate([_copies(_slice_axis(a, 0, 1, i), lo, i), a, _copies(_slice_axis(a, -1, None, i), hi, i)],
                            i)
    return a


def _pad_wrap(a, widths):
    for i, (lo, hi) in enumerate(widths):
        n = a.shape[i]
        _no_padding_of_empty(n, lo, hi, "wrap")
        if n == 0 or not (lo or hi):
            continue
        (lo_reps, lo_rem), (hi_reps, hi_rem) = divmod(lo, n), divmod(hi, n)
        parts = ([_slice_axis(a, n - lo_rem, None, i)] if lo_rem else []) + [a] * (lo_reps + hi_reps + 1)
        a = concatenate(parts + ([_slice_axis(a, 0, hi_rem, i)] if hi_rem else []), i)
    return a


def _reflected_side(a, width: int, axis: int, before: bool, symmetric: bool, odd: bool):
    """`a` extended by `width` mirrored elements on one side of `axis`, one period at a time (each
    period mirrors what is there so far, so an odd reflection keeps extrapolating)."""
    n = a.shape[axis]
    offset = 0 if symmetric or n == 1 else 1
    edge = _slice_axis(a, 0, 1, axis) if before else _slice_axis(a, -1, None, axis)
    while width > 0:
        step = builtins.min(width, n - offset)
        width -= step
        if before:
            part = _slice_axis(a, offset, offset + step, axis)
        else:
            part = _slice_axis(a, -(step + offset), None if symmetric or n == 1 else -1, axis)
        part = flip(part, axis)
        if odd:
            part = subtract(multiply(edge, 2), part)
            if n > 1:
                edge = _slice_axis(part, 0, 1, axis) if before else _slice_axis(part, -1, None, axis)
        a = concatenate([part, a] if before else [a, part], axis)
    return a


def _pad_reflect(a, widths, mode: str, reflect_type: str):
    if reflect_type not in ("even", "odd"):
        raise ArgumentValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}", user_location())
    for i, (lo, hi) in enumerate(widths):
        _no_padding_of_empty(a.shape[i], lo, hi, mode)
        if a.shape[i] == 0:
            continue
        for width, before in ((lo, True), (hi, False)):
            a = _reflected_side(a, width, i, before, mode == "symmetric", reflect_type == "odd")
    return a


def _ramp(end, edge, num: int, axis: int, dtype: np.dtype):
    """JAX's linspace(end, edge, num, endpoint=False) along `axis` (edge keeps a size-1 axis there):
    end * (1 - t) + edge * t at t = k / num, floored for integer arrays."""
    ft = dtypes.default_float_for(dtype) if not dtypes.is_float(dtype) else dtype
    shape = [1] * len(shape_of(edge))
    shape[axis] = num
    t = P.div(P.iota(ft, tuple(shape), axis), ft.type(builtins.max(num, 1)))
    edge_f = to_dtype(edge, ft)
    out = add(multiply(to_dtype(asarray(end), ft), subtract(ft.type(1), t)), multiply(edge_f, t))
    if not dtypes.is_float(dtype):
        out = P.floor(out)
    return to_dtype(out, dtype)


def _pad_linear_ramp(a, widths, end_values):
    ends = _pairs(end_values, len(widths), "end_values")
    for i, (lo, hi) in enumerate(widths):
        if not (lo or hi):
            continue
        before = _ramp(ends[i][0], _slice_axis(a, 0, 1, i), lo, i, a.dtype)
        after = flip(_ramp(ends[i][1], _slice_axis(a, -1, None, i), hi, i, a.dtype), i)
        a = concatenate([before, a, after], i)
    return a


def _median(a, axis: int, keepdims: bool):
    """ember.numpy.median, imported at the call: _sorting imports _stats, which imports this module."""
    from ember.numpy._sorting import median

    return median(a, axis=axis, keepdims=keepdims)


_STAT_FUNCS = {"maximum": _max, "minimum": _min, "mean": _mean, "median": _median}


def _pad_stat(a, widths, stat_length, mode: str):
    stat = _STAT_FUNCS[mode]
    lengths = _pairs(stat_length, len(widths), "stat_length") if stat_length is not None else None
    for i, (lo, hi) in enumerate(widths):
        if lengths is None:
            before = after = stat(a, axis=i, keepdims=True)
        else:
            n_lo, n_hi = (int(x) for x in lengths[i])
            if n_lo == 0 or n_hi == 0:
                raise ArgumentValueError("pad: stat_length of 0 yields no value for padding", user_location())
            before = stat(_slice_axis(a, 0, builtins.min(n_lo, a.shape[i]), i), axis=i, keepdims=True)
            after = stat(_slice_axis(a, -builtins.min(n_hi, a.shape[i]), None, i), axis=i, keepdims=True)
        dt, weak = dtype_weak(a)
        if not dtypes.is_float(dt):
            before, after = round(before), round(after)
        before, after = to_dtype(before, dt, weak), to_dtype(after, dt, weak)
        a = concatenate([_copies(before, lo, i), a, _copies(after, hi, i)], i)
    return a


def _pad_func(a, widths, func, kwargs):
    """JAX's callable mode: pad with zeros, then, axis by axis, replace each 1-D vector along the axis by
    func(vector, (before, after), axis, kwargs) (a loop over the vectors: the shapes are static)."""
    a = _pad_constant(a, widths, 0)
    for axis in range(len(a.shape)):
        moved = moveaxis(a, axis, -1)
        rest = moved.shape[:-1]
        rows = reshape(moved, (-1, moved.shape[-1]))
        out = [asarray(func(rows[k], tuple(widths[axis]), axis, kwargs)) for k in range(rows.shape[0])]
        if any(tuple(o.shape) != (moved.shape[-1],) for o in out):
            raise ShapeError(f"pad: the padding function must return a vector of length {moved.shape[-1]} "
                             f"(axis {axis}), got shapes {sorted({tuple(o.shape) for o in out})}")
        a = moveaxis(reshape(stack([to_dtype(o, a.dtype) for o in out]) if out else rows, rest + (moved.shape[-1],)),
                     -1, axis)
    return a


def pad(array, pad_width, mode: str = "constant", **kwargs):
    """`array` padded by `pad_width` (an int, a (before, after) pair or one pair per axis) in one of
    JAX's modes: constant (constant_values per axis and side), empty (zeros), edge, wrap, reflect and
    symmetric (reflect_type 'even' or 'odd'), linear_ramp (end_values), maximum, minimum, mean and median
    (stat_length), or a callable `mode(vector, iaxis_pad_width, iaxis, kwargs)` giving each padded 1-D
    vector, axis by axis, as NumPy's and JAX's."""
    a = asarray(array)
    if callable(mode):
        return _pad_func(a, _widths(pad_width, len(a.shape)), mode, kwargs)
    if mode not in _PAD_OPTIONS:
        raise NotImplementedError(f"pad: unimplemented padding mode {mode!r}")
    unknown = set(kwargs) - set(_PAD_OPTIONS[mode])
    if unknown:
        raise ArgumentValueError(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(unknown)}",
                                 user_location())
    nd = len(a.shape)
    widths = _widths(pad_width, nd)
    if nd == 0:
        return a
    if mode == "constant":
        return _pad_constant(a, widths, kwargs.get("constant_values", 0))
    if mode == "empty":
        return _pad_constant(a, widths, 0)
    if mode == "edge":
        return _pad_edge(a, widths)
    if mode == "wrap":
        return _pad_wrap(a, widths)
    if mode in ("reflect", "symmetric"):
        return _pad_reflect(a, widths, mode, kwargs.get("reflect_type", "even"))
    if mode == "linear_ramp":
        return _pad_linear_ramp(a, widths, kwargs.get("end_values", 0))
    return _pad_stat(a, widths, kwargs.get("stat_length"), mode)
