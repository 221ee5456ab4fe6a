"""Reductions: reduce_sum, reduce_max, reduce_min, reduce_prod over `axes`, and argmax/argmin along
one `axis`. Reduced axes are removed (keepdims is a reshape in ember.numpy).
"""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.primitive import Primitive, def_batch, def_impl, def_shape, def_vjp, eager_specializers
from ember.tracer.prims.util import check_kind, shape_of, unchanged

reduce_sum_p = Primitive("reduce_sum", kind="reduction", expensive=True)
reduce_max_p = Primitive("reduce_max", kind="reduction", expensive=True)
reduce_min_p = Primitive("reduce_min", kind="reduction", expensive=True)
reduce_prod_p = Primitive("reduce_prod", kind="reduction", expensive=True)
argmax_p = Primitive("argmax", kind="reduction", expensive=True)
argmin_p = Primitive("argmin", kind="reduction", expensive=True)


def _reducer(prim):
    def fn(x, axes):
        axes = tuple(sorted(int(a) for a in axes))
        if not axes:
            return unchanged(x)
        return prim.bind(x, axes=axes)

    fn.__name__ = prim.name
    fn.__doc__ = f"`{prim.name}` over `axes` (removed from the shape)."
    return fn


reduce_sum = _reducer(reduce_sum_p)
reduce_max = _reducer(reduce_max_p)
reduce_min = _reducer(reduce_min_p)
reduce_prod = _reducer(reduce_prod_p)


def argmax(x, axis: int, index_dtype=None):
    index_dtype = dtypes.int_ if index_dtype is None else dtypes.canonicalize(index_dtype)
    return argmax_p.bind(x, axis=int(axis), index_dtype=index_dtype)


def argmin(x, axis: int, index_dtype=None):
    index_dtype = dtypes.int_ if index_dtype is None else dtypes.canonicalize(index_dtype)
    return argmin_p.bind(x, axis=int(axis), index_dtype=index_dtype)


def _reduced_shape(name: str, x: ShapedArray, axes) -> tuple[int, ...]:
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ShapeError(f"{name}: axes {axes} are not distinct axes of a rank-{x.ndim} array")
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def identity(prim, dtype: np.dtype):
    """The value a reduction of zero elements gives."""
    if prim is reduce_sum_p:
        return 0
    if prim is reduce_prod_p:
        return 1
    big = prim is reduce_min_p
    if dtypes.is_float(dtype):
        return np.inf if big else -np.inf
    if dtypes.is_bool(dtype):
        return big
    info = np.iinfo(dtype)
    return info.max if big else info.min


# The ufuncs' own reduce methods: numpy.sum & co. add a Python-level wrapper to every call.
_NP_REDUCERS = {reduce_sum_p: np.add.reduce, reduce_prod_p: np.multiply.reduce, reduce_max_p: np.maximum.reduce,
                reduce_min_p: np.minimum.reduce}
_ACCEPTS = {reduce_sum_p: "numeric", reduce_prod_p: "numeric", reduce_max_p: "any", reduce_min_p: "any"}


def _define_reduction(prim):
    def shape_rule(x, *, axes):
        check_kind(prim.name, x, _ACCEPTS[prim])
        return ShapedArray(_reduced_shape(prim.name, x, axes), x.dtype, x.weak_type)

    def impl(x, *, axes):
        fn = _NP_REDUCERS[prim]
        if prim in (reduce_sum_p, reduce_prod_p):
            return fn(x, axis=axes, dtype=x.dtype)
        return fn(x, axis=axes, initial=identity(prim, x.dtype))

    def batch(args, dims, *, axes):
        (x,), (d,) = args, dims
        new_axes = tuple(a if a < d else a + 1 for a in axes)
        return prim.bind(x, axes=new_axes), d - sum(1 for a in axes if a < d)

    def_shape(prim)(shape_rule)
    def_impl(prim)(impl)
    def_batch(prim)(batch)


for _p in (reduce_sum_p, reduce_max_p, reduce_min_p, reduce_prod_p):
    _define_reduction(_p)


def _eager_reduce(prim):
    def specialize(params, avals):
        """The ufunc's reduce with the axes as its one trailing argument, for a non-empty float operand
        (whose reduce keeps its dtype and needs no identity): the impl's keywords cost as much as the sum."""
        (x,) = avals
        return (_NP_REDUCERS[prim], params["axes"]) if x.dtype.kind == "f" and x.size else None
    return specialize


for _p in _NP_REDUCERS:
    eager_specializers[_p] = _eager_reduce(_p)


def _expand(ct, x_shape, axes):
    """Broadcast a reduced value back over the reduced axes of `x_shape`."""
    kept = tuple(i for i in range(len(x_shape)) if i not in axes)
    return P.broadcast_in_dim(ct, x_shape, kept)


@def_vjp(reduce_sum_p)
def _reduce_sum_vjp(ct, x, *, out, active, axes):
    return (_expand(ct, shape_of(x), axes) if active[0] else None,)


def _extremum_vjp(ct, x, *, out, active, axes):
    """The cotangent goes to the elements equal to the extremum, split evenly among ties."""
    if not active[0]:
        return (None,)
    x_shape = shape_of(x)
    hit = P.eq(x, _expand(out, x_shape, axes))
    mask = P.convert_element_type(hit, x.dtype)
    count = P.reduce_sum(mask, axes)
    return (P.mul(mask, _expand(P.div(ct, count), x_shape, axes)),)


def_vjp(reduce_max_p)(_extremum_vjp)
def_vjp(reduce_min_p)(_extremum_vjp)


@def_vjp(reduce_prod_p)
def _reduce_prod_vjp(ct, x, *, out, active, axes):
    """d prod / d x_i = the product of the other elements: exclusive products from the left times
    those from the right. No division, so zeros, NaNs and infs in other elements count as JAX counts
    them, and the rule is differentiable again (hessian(prod) at zeros)."""
    if not active[0]:
        return (None,)
    x_shape = shape_of(x)
    kept = tuple(i for i in range(len(x_shape)) if i not in axes)
    perm = kept + tuple(axes)
    moved_shape = tuple(x_shape[i] for i in perm)
    n = int(np.prod([x_shape[a] for a in axes], dtype=np.int64))
    rows = P.reshape(P.transpose(x, perm), tuple(x_shape[i] for i in kept) + (n,))
    last = len(kept)
    left = _exclusive_cumprod(rows, last)
    right = P.rev(_exclusive_cumprod(P.rev(rows, (last,)), last), (last,))
    others = P.reshape(P.mul(left, right), moved_shape)
    others = P.transpose(others, tuple(int(i) for i in np.argsort(perm)))
    return (P.mul(others, _expand(ct, x_shape, axes)),)


def _exclusive_cumprod(x, axis: int):
    """Products of the elements before each one along `axis` (1 for the first): the shifted operand
    scanned in log2(n) doubling steps (Hillis-Steele), each a slice, a pad with ones and a mul."""
    shape = shape_of(x)
    n = shape[axis]
    one = np.ones((), x.dtype)[()]

    def shift(y, k):
        limit = shape[:axis] + (n - k,) + shape[axis + 1:]
        config = [(0, 0, 0)] * len(shape)
        config[axis] = (k, 0, 0)
        return P.pad(P.slice(y, (0,) * len(shape), limit), one, config)

    if n <= 1:
        return P.broadcast_in_dim(one, shape, ())
    y = shift(x, 1)
    k = 1
    while k < n - 1:
        y = P.mul(y, shift(y, k))
        k *= 2
    return y


# --- argmax / argmin ------------------------------------------------------------------------------

def _define_arg(prim, np_fn):
    def shape_rule(x, *, axis, index_dtype):
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"{prim.name}: axis {axis} is out of range for a rank-{x.ndim} array")
        if x.shape[axis] == 0:
            raise ShapeError(f"{prim.name}: attempt to get {prim.name} of an empty axis")
        if not dtypes.is_int(index_dtype):
            raise DTypeError(f"{prim.name}: index_dtype must be an integer dtype")
        return ShapedArray(_reduced_shape(prim.name, x, (axis,)), index_dtype)

    def impl(x, *, axis, index_dtype):
        return np_fn(x, axis=axis).astype(index_dtype)

    def vjp(ct, x, *, out, active, axis, index_dtype):
        return (None,)

    def batch(args, dims, *, axis, index_dtype):
        (x,), (d,) = args, dims
        new_axis = axis if axis < d else axis + 1
        return prim.bind(x, axis=new_axis, index_dtype=index_dtype), d - (1 if axis < d else 0)

    def_shape(prim)(shape_rule)
    def_impl(prim)(impl)
    def_vjp(prim)(vjp)
    def_batch(prim)(batch)


_define_arg(argmax_p, np.argmax)
_define_arg(argmin_p, np.argmin)
