"""Layout primitives: broadcast_in_dim, reshape, transpose, concatenate, pad, slice, rev, iota.

They move or replicate elements without arithmetic; their VJPs are layout ops too (broadcast pulls
back as a sum over the broadcast axes, slice as a pad, pad as a slice).
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.primitive import LazyCotangent, Primitive, def_batch, def_impl, def_shape, def_vjp
from ember.tracer.prims.util import batch_size, bdim_at_front, moveaxis, scalar_like, shape_of, unchanged

# may_view: the numpy reference returns a view of the operand (iota: a read-only broadcast of a range)
broadcast_in_dim_p = Primitive("broadcast_in_dim", kind="layout", expensive=False, may_view=True)
reshape_p = Primitive("reshape", kind="layout", expensive=False, may_view=True)
transpose_p = Primitive("transpose", kind="layout", expensive=False, may_view=True)
concatenate_p = Primitive("concatenate", kind="layout", expensive=False)
pad_p = Primitive("pad", kind="layout", expensive=False)
slice_p = Primitive("slice", kind="layout", expensive=False, may_view=True)
rev_p = Primitive("rev", kind="layout", expensive=False, may_view=True)
iota_p = Primitive("iota", kind="layout", expensive=False, may_view=True)


# --- wrappers -------------------------------------------------------------------------------------

def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcast `x` to `shape`; operand axis i becomes output axis broadcast_dimensions[i]."""
    shape, bd = tuple(int(d) for d in shape), tuple(int(d) for d in broadcast_dimensions)
    if shape_of(x) == shape and bd == tuple(range(len(shape))):
        return unchanged(x)
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=bd)


def broadcast_to(x, shape):
    """Broadcast with NumPy's trailing-axis alignment."""
    nd = len(shape_of(x))
    return broadcast_in_dim(x, shape, tuple(range(len(shape) - nd, len(shape))))


def full(shape, value, dtype, weak_type: bool = False):
    """An array of `shape` filled with `value`, weakly typed if `weak_type` (jnp.full of a Python scalar)."""
    from ember.tracer.ir import Literal

    return broadcast_in_dim_p.bind(Literal(value, dtype, weak_type), shape=tuple(shape), broadcast_dimensions=())


def reshape(x, new_sizes):
    new_sizes = tuple(int(d) for d in new_sizes)
    if shape_of(x) == new_sizes:
        return unchanged(x)
    return reshape_p.bind(x, new_sizes=new_sizes)


def transpose(x, permutation):
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(permutation))):
        return unchanged(x)
    return transpose_p.bind(x, permutation=permutation)


def concatenate(operands, dimension: int):
    if len(operands) == 1:
        return unchanged(operands[0])
    return concatenate_p.bind(*operands, dimension=int(dimension))


def pad(x, padding_value, padding_config):
    """Pad with (low, high, interior) per axis; all three are non-negative."""
    config = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    if all(c == (0, 0, 0) for c in config):
        return unchanged(x)
    return pad_p.bind(x, scalar_like(padding_value, x), padding_config=config)


def slice(x, start_indices, limit_indices, strides=None):
    start = tuple(int(s) for s in start_indices)
    limit = tuple(int(s) for s in limit_indices)
    strides = tuple(int(s) for s in strides) if strides is not None else (1,) * len(start)
    if start == (0,) * len(start) and limit == shape_of(x) and all(s == 1 for s in strides):
        return unchanged(x)
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides)


def rev(x, dimensions):
    dims = tuple(sorted(int(d) for d in dimensions))
    if not dims:
        return unchanged(x)
    return rev_p.bind(x, dimensions=dims)


def iota(dtype, shape, dimension: int):
    """Integers 0, 1, ... counting along `dimension` of an array of `shape`."""
    return iota_p.bind(dtype=dtypes.canonicalize(dtype), shape=tuple(int(d) for d in shape),
                       dimension=int(dimension))


# --- broadcast_in_dim -----------------------------------------------------------------------------

@def_shape(broadcast_in_dim_p)
def _broadcast_shape(x, *, shape, broadcast_dimensions):
    bd = broadcast_dimensions
    if len(bd) != x.ndim:
        raise ShapeError(f"broadcast_in_dim: operand of rank {x.ndim} needs {x.ndim} broadcast_dimensions, "
                         f"got {bd}")
    if any(not 0 <= d < len(shape) for d in bd) or any(a >= b for a, b in zip(bd, bd[1:])):
        raise ShapeError(f"broadcast_in_dim: broadcast_dimensions {bd} must be increasing axes of {shape}")
    for i, d in enumerate(bd):
        if x.shape[i] not in (1, shape[d]):
            raise ShapeError(f"broadcast_in_dim: cannot broadcast {x.shape} to {shape} "
                             f"(axis {i} has size {x.shape[i]}, target axis {d} has {shape[d]})")
    if any(d < 0 for d in shape):
        raise ShapeError(f"broadcast_in_dim: negative dimension in {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type)


@def_impl(broadcast_in_dim_p)
def _broadcast_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


@def_vjp(broadcast_in_dim_p)
def _broadcast_vjp(ct, x, *, out, active, shape, broadcast_dimensions):
    if not active[0]:
        return (None,)
    x_shape = shape_of(x)
    kept = set(broadcast_dimensions)
    summed = [d for d in range(len(shape)) if d not in kept]
    summed += [d for i, d in enumerate(broadcast_dimensions) if x_shape[i] == 1 and shape[d] != 1]
    ct = P.reduce_sum(ct, tuple(sorted(summed))) if summed else ct
    return (P.reshape(ct, x_shape),)


@def_batch(broadcast_in_dim_p)
def _broadcast_batch(args, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    size = shape_of(x)[0]
    return broadcast_in_dim(x, (size,) + shape, (0,) + tuple(b + 1 for b in broadcast_dimensions)), 0


# --- reshape --------------------------------------------------------------------------------------

@def_shape(reshape_p)
def _reshape_shape(x, *, new_sizes):
    if any(d < 0 for d in new_sizes) or math.prod(new_sizes) != x.size:
        raise ShapeError(f"reshape: cannot reshape an array of shape {x.shape} ({x.size} elements) "
                         f"into shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


@def_impl(reshape_p)
def _reshape_impl(x, *, new_sizes):
    return np.reshape(x, new_sizes)


@def_vjp(reshape_p)
def _reshape_vjp(ct, x, *, out, active, new_sizes):
    return (P.reshape(ct, shape_of(x)) if active[0] else None,)


@def_batch(reshape_p)
def _reshape_batch(args, dims, *, new_sizes):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    return reshape(x, (shape_of(x)[0],) + new_sizes), 0


# --- transpose ------------------------------------------------------------------------------------

@def_shape(transpose_p)
def _transpose_shape(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ShapeError(f"transpose: {permutation} is not a permutation of the axes of a rank-{x.ndim} "
                         "array")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


@def_impl(transpose_p)
def _transpose_impl(x, *, permutation):
    return np.transpose(x, permutation)


@def_vjp(transpose_p)
def _transpose_vjp(ct, x, *, out, active, permutation):
    return (P.transpose(ct, tuple(np.argsort(permutation))) if active[0] else None,)


@def_batch(transpose_p)
def _transpose_batch(args, dims, *, permutation):
    (x,), (d,) = args, dims
    perm = (d,) + tuple(p if p < d else p + 1 for p in permutation)
    return transpose(x, perm), 0


# --- concatenate ----------------------------------------------------------------------------------

@def_shape(concatenate_p)
def _concatenate_shape(*xs, dimension):
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        raise ShapeError(f"concatenate: axis {dimension} is out of range for rank-{first.ndim} operands")
    for x in xs[1:]:
        if x.dtype != first.dtype:
            raise DTypeError(f"concatenate: operand dtypes {first.dtype.name} and {x.dtype.name} differ")
        if x.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape))
                                       if i != dimension):
            shapes = ", ".join(str(y.shape) for y in xs)
            raise ShapeError(f"concatenate: shapes {shapes} must agree except along axis {dimension}")
    shape = list(first.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(tuple(shape), first.dtype, all(x.weak_type for x in xs))


@def_impl(concatenate_p)
def _concatenate_impl(*xs, dimension):
    return np.concatenate(xs, axis=dimension)


@def_vjp(concatenate_p)
def _concatenate_vjp(ct, *xs, out, active, dimension):
    cts, offset = [], 0
    for x, act in zip(xs, active):
        shape = shape_of(x)
        size = shape[dimension]
        if act:
            start = [0] * len(shape)
            limit = list(shape_of(ct))
            start[dimension], limit[dimension] = offset, offset + size
            cts.append(P.slice(ct, start, limit))
        else:
            cts.append(None)
        offset += size
    return tuple(cts)


@def_batch(concatenate_p)
def _concatenate_batch(args, dims, *, dimension):
    size = batch_size(args, dims)
    return concatenate([bdim_at_front(x, d, size) for x, d in zip(args, dims)], dimension + 1), 0


# --- pad ------------------------------------------------------------------------------------------

@def_shape(pad_p)
def _pad_shape(x, value, *, padding_config):
    if value.shape != ():
        raise ShapeError(f"pad: the padding value must be a scalar, got shape {value.shape}")
    if value.dtype != x.dtype:
        raise DTypeError(f"pad: padding value dtype {value.dtype.name} differs from {x.dtype.name}")
    if len(padding_config) != x.ndim:
        raise ShapeError(f"pad: {len(padding_config)} (low, high, interior) triples for a rank-{x.ndim} "
                         "operand")
    shape = []
    for d, (lo, hi, interior) in zip(x.shape, padding_config):
        if lo < 0 or hi < 0 or interior < 0:
            raise ShapeError(f"pad: padding {(lo, hi, interior)} must be non-negative")
        shape.append(lo + hi + d + max(d - 1, 0) * interior)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _pad_region(x_shape, padding_config):
    return tuple(builtins.slice(lo, lo + max(d - 1, 0) * (i + 1) + 1 if d else lo, i + 1)
                 for d, (lo, _, i) in zip(x_shape, padding_config))


@def_impl(pad_p)
def _pad_impl(x, value, *, padding_config):
    out_shape = _pad_shape(ShapedArray(x.shape, x.dtype), ShapedArray((), x.dtype),
                           padding_config=padding_config).shape
    out = np.full(out_shape, value, dtype=x.dtype)
    out[_pad_region(x.shape, padding_config)] = x
    return out


@def_vjp(pad_p)
def _pad_vjp(ct, x, value, *, out, active, padding_config):
    x_shape = shape_of(x)
    region = _pad_region(x_shape, padding_config)
    ct_x = None
    if active[0] or active[1]:
        ct_x = P.slice(ct, [r.start for r in region], [r.stop for r in region], [r.step for r in region])
    ct_v = None
    if active[1]:
        all_axes = tuple(range(len(x_shape)))
        ct_v = P.sub(P.reduce_sum(ct, all_axes), P.reduce_sum(ct_x, all_axes))
    return (ct_x if active[0] else None, ct_v)


@def_batch(pad_p)
def _pad_batch(args, dims, *, padding_config):
    (x, value), (dx, dv) = args, dims
    size = batch_size(args, dims)
    if dv is None:
        x = moveaxis(x, dx, 0)
        return pad(x, value, ((0, 0, 0),) + padding_config), 0
    # A per-example padding value: pad with zeros, then select the value on a padded mask.
    x = bdim_at_front(x, dx, size)
    x_shape = shape_of(x)
    config = ((0, 0, 0),) + padding_config
    padded = pad(x, 0, config)
    mask = pad(full(x_shape, False, np.dtype(bool)), True, config)
    value = P.broadcast_in_dim(moveaxis(value, dv, 0), shape_of(padded), (0,))
    return P.select(mask, value, padded), 0


# --- slice ----------------------------------------------------------------------------------------

@def_shape(slice_p)
def _slice_shape(x, *, start_indices, limit_indices, strides):
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
        raise ShapeError(f"slice: start/limit/strides must each have {x.ndim} entries")
    shape = []
    for d, s, l, st in zip(x.shape, start_indices, limit_indices, strides):
        if not 0 <= s <= l <= d or st < 1:
            raise ShapeError(f"slice: [{s}:{l}:{st}] is not a valid slice of an axis of size {d}")
        shape.append(-(-(l - s) // st))
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


@def_impl(slice_p)
def _slice_impl(x, *, start_indices, limit_indices, strides):
    return x[tuple(builtins.slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))]


@def_vjp(slice_p)
def _slice_vjp(ct, x, *, out, active, start_indices, limit_indices, strides):
    if not active[0]:
        return (None,)
    x_shape, out_shape = shape_of(x), shape_of(out)
    if 0 in out_shape:
        return (full(x_shape, 0, ct.dtype),)
    return (SliceCotangent(ct, x_shape, start_indices, strides),)


class SliceCotangent(LazyCotangent):
    """The cotangent of a slice: zero outside the sliced region. Alone it becomes a pad; added to
    an existing cotangent it is scatter-added into the touched region only (when that region is
    small; a large one is padded and added densely, since the result is dense anyway)."""

    __slots__ = ("ct", "x_shape", "start", "strides")

    def __init__(self, ct, x_shape, start, strides):
        self.ct, self.x_shape, self.start, self.strides = ct, x_shape, start, strides

    def _pad(self):
        config = []
        for d, s, n, st in zip(self.x_shape, self.start, shape_of(self.ct), self.strides):
            config.append((s, d - (s + (n - 1) * st) - 1, st - 1))
        return pad(self.ct, 0, config)

    def add_to(self, dense, aval: ShapedArray):
        region = shape_of(self.ct)
        if dense is None:
            return self._pad()
        if 2 * math.prod(region) > math.prod(self.x_shape):
            return P.add(dense, self._pad())
        axes = [np.arange(s, s + n * st, st, dtype=np.int32) for s, n, st in zip(self.start, region, self.strides)]
        indices = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
        return P.scatter_add(dense, indices, self.ct)


@def_batch(slice_p)
def _slice_batch(args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    size = shape_of(x)[d]
    start = start_indices[:d] + (0,) + start_indices[d:]
    limit = limit_indices[:d] + (size,) + limit_indices[d:]
    st = strides[:d] + (1,) + strides[d:]
    return slice(x, start, limit, st), d


# --- rev ------------------------------------------------------------------------------------------

@def_shape(rev_p)
def _rev_shape(x, *, dimensions):
    if any(not 0 <= d < x.ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise ShapeError(f"rev: {dimensions} are not distinct axes of a rank-{x.ndim} array")
    return x


@def_impl(rev_p)
def _rev_impl(x, *, dimensions):
    return np.flip(x, dimensions)


@def_vjp(rev_p)
def _rev_vjp(ct, x, *, out, active, dimensions):
    return (rev(ct, dimensions) if active[0] else None,)


@def_batch(rev_p)
def _rev_batch(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    return rev(x, tuple(a if a < d else a + 1 for a in dimensions)), d


# --- iota -----------------------------------------------------------------------------------------

@def_shape(iota_p)
def _iota_shape(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        raise ShapeError(f"iota: dimension {dimension} is out of range for shape {shape}")
    if not (dtypes.is_int(dtype) or dtypes.is_float(dtype)):
        raise DTypeError(f"iota: dtype must be integer or float, got {dtype.name}")
    return ShapedArray(shape, dtype)


@def_impl(iota_p)
def _iota_impl(*, dtype, shape, dimension):
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(np.arange(shape[dimension], dtype=dtype).reshape(expanded), shape)


@def_vjp(iota_p)
def _iota_vjp(ct, *, out, active, **params):
    return ()


@def_batch(iota_p)
def _iota_batch(args, dims, **params):  # no operands, so vmap never batches it
    return iota_p.bind(**params), None
