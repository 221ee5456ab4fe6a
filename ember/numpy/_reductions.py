"""Reductions with NumPy's axis/keepdims semantics: sum, mean, max, min, prod, argmax, argmin, var,
std, all, any, with `where=` masks and `initial=` values where NumPy takes them. As in JAX, sums and
products of bools and small ints accumulate in the default (signed or unsigned) int, and float16 sums,
means and variances accumulate in float32."""

from __future__ import annotations

import builtins
import math

import numpy as np

from ember.errors import ArgumentValueError, IncompatibleShapesError, user_location
from ember.numpy._core import asarray, broadcast_shapes, normalize_axes, normalize_axis, shape_of, to_dtype
from ember.numpy._math import sqrt, subtract
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.prims.reduce import identity


def _axes(axis, ndim: int, name: str) -> tuple[int, ...]:
    """The reduced axes, sorted; like NumPy's ufunc reductions (sum, max, ...; not mean/var), an int
    axis 0 or -1 of a 0-d array means no axis (a tuple of them is an error)."""
    if ndim == 0 and isinstance(axis, (int, np.integer)) and axis in (0, -1):
        return ()
    return normalize_axes(axis, ndim, name)


def _keep(out, shape, axes, keepdims):
    if not keepdims:
        return out
    return P.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def _mask(where, shape: tuple[int, ...], name: str):
    """`where` as a boolean mask of `shape` (NumPy's broadcasting, nonzero counts as True)."""
    w = asarray(where)
    if not dtypes.is_bool(w.dtype):
        w = P.ne(w, 0)
    if broadcast_shapes(shape_of(w), shape, name=f"{name}(where=...)") != shape:
        raise IncompatibleShapesError(f"{name}: the where mask of shape {shape_of(w)} does not broadcast to the "
                                      f"array's shape {shape}", user_location())
    return P.broadcast_to(w, shape)


def _masked(a, where, fill, name: str):
    """`a` with `fill` wherever `where` is False (`a` itself when there is no mask)."""
    if where is None:
        return a
    shape = tuple(a.shape)
    return P.select(_mask(where, shape, name), a, P.full(shape, fill, a.dtype))


def _initial(initial, dtype: np.dtype, name: str):
    """The scalar `initial` as `dtype` (JAX converts it to the result's dtype)."""
    if shape_of(initial) != ():
        raise ArgumentValueError(f"{name}: initial value must be a scalar, got shape {shape_of(initial)}",
                                 user_location())
    return to_dtype(initial if isinstance(initial, (bool, int, float)) else asarray(initial), dtype)


def _count(shape, axes, where, dtype: np.dtype, name: str):
    """The number of elements reduced: a Python int, or an array of `dtype` counting a where mask."""
    if where is None:
        return math.prod(shape[i] for i in axes)
    return P.reduce_sum(P.convert_element_type(_mask(where, tuple(shape), name), dtype), axes)


def _accumulate(prim_fn, a, axes, dtype: np.dtype):
    """`prim_fn(a, axes)` computed in `dtype`'s accumulation dtype and given back as `dtype`."""
    return to_dtype(prim_fn(to_dtype(a, dtypes.accumulation_dtype(dtype)), axes), dtype)


def _summation(prim_fn, combine, unit: int, name):
    def fn(a, axis=None, dtype=None, keepdims: bool = False, initial=None, where=None):
        a = asarray(a)
        dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.sum_dtype(a.dtype)
        axes = _axes(axis, len(a.shape), name)
        out = _accumulate(prim_fn, _masked(a, where, unit, name), axes, dt)
        if initial is not None:
            out = combine(out, _initial(initial, dt, name))
        return _keep(out, a.shape, axes, keepdims)

    fn.__name__ = name
    fn.__doc__ = (f"{name} over `axis` (all axes when None) of the elements `where` selects, with `initial`, as "
                  f"numpy.{name} with JAX's dtypes.")
    fn.whole = True  # of one operand alone, it reduces every axis (the eager path's reduction lanes)
    return fn


sum = _summation(P.reduce_sum, P.add, 0, "sum")
prod = _summation(P.reduce_prod, P.mul, 1, "prod")


def mean(a, axis=None, dtype=None, keepdims: bool = False, *, where=None):
    """Arithmetic mean over `axis` of the elements `where` selects (NaN where it selects none)."""
    a = asarray(a)
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float_for(a.dtype)
    a = to_dtype(a, dtypes.accumulation_dtype(dt))
    axes = normalize_axes(axis, len(a.shape), "mean")  # strict, as NumPy's mean
    total = P.reduce_sum(_masked(a, where, 0, "mean"), axes)
    n = _count(a.shape, axes, where, a.dtype, "mean")
    if where is not None:
        out = P.div(total, n)
    else:
        out = P.div(total, float(n)) if n else P.mul(total, float("nan"))
    return _keep(to_dtype(out, dt), a.shape, axes, keepdims)


def _extremum(prim_fn, prim, combine, name):
    def fn(a, axis=None, keepdims: bool = False, initial=None, where=None):
        a = asarray(a)
        axes = _axes(axis, len(a.shape), name)
        if initial is None and where is not None:
            raise ArgumentValueError(f"{name}: reduction operation {name} does not have an identity, so to use a "
                                     "where mask one has to specify 'initial'", user_location())
        if initial is None and builtins.any(a.shape[i] == 0 for i in axes):
            raise IncompatibleShapesError(f"{name}: zero-size array to reduction operation {name} which has no "
                                          "identity; pass initial=...", user_location())
        a = _masked(a, where, identity(prim, a.dtype), name)
        out = to_dtype(prim_fn(a, axes), a.dtype)  # strong, as jnp's reductions of weak values
        if initial is not None:
            out = combine(out, _initial(initial, a.dtype, name))
        return _keep(out, a.shape, axes, keepdims)

    fn.__name__ = name
    fn.__doc__ = f"{name} over `axis` (all axes when None) of the elements `where` selects and `initial`."
    fn.whole = True
    return fn


max = _extremum(P.reduce_max, P.reduce_max_p, P.maximum, "max")
min = _extremum(P.reduce_min, P.reduce_min_p, P.minimum, "min")
amax, amin = max, min


def _arg(prim_fn, name):
    def fn(a, axis=None, keepdims: bool = False):
        a = asarray(a)
        if axis is None:
            flat = P.reshape(a, (math.prod(a.shape),))
            out = prim_fn(flat, 0)
            return P.reshape(out, (1,) * len(a.shape)) if keepdims else out
        if not a.shape and axis in (0, -1):  # as NumPy: the only element of a 0-d array
            return P.full((), 0, dtypes.int_)
        ax = normalize_axis(axis, len(a.shape), name)
        if a.shape[ax] == 0:
            raise IncompatibleShapesError(f"{name}: attempt to get {name} of an empty sequence", user_location())
        return _keep(prim_fn(a, ax), a.shape, (ax,), keepdims)

    fn.__name__ = name
    fn.__doc__ = f"Indices of the {name[3:]}imum along `axis` (of the flattened array when None)."
    return fn


argmax = _arg(P.argmax, "argmax")
argmin = _arg(P.argmin, "argmin")


def var(a, axis=None, dtype=None, ddof: int = 0, keepdims: bool = False, *, where=None, correction=None):
    """Variance: mean of squared deviations (of the elements `where` selects), divided by N - ddof
    (`correction` is the array API's name for ddof)."""
    if correction is not None:
        ddof = correction
    a = asarray(a)
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float_for(a.dtype)
    a = to_dtype(a, dtypes.accumulation_dtype(dt))
    axes = normalize_axes(axis, len(a.shape), "var")  # strict, as NumPy's var
    centered = subtract(a, mean(a, axes, keepdims=True, where=where))
    sq = P.reduce_sum(_masked(P.mul(centered, centered), where, 0, "var"), axes)
    n = _count(a.shape, axes, where, a.dtype, "var")
    # With no degrees of freedom left the variance is nan, as JAX's (NumPy divides by zero: inf)
    if where is not None:
        left = P.sub(n, a.dtype.type(ddof))
        some = P.gt(left, a.dtype.type(0))
        divisor = P.select(some, left, P.full(sq.shape, 1, a.dtype))  # no division by zero to warn of
        out = P.select(some, P.div(sq, divisor), P.full(sq.shape, np.nan, a.dtype))
    else:
        n -= ddof
        out = P.div(sq, float(n)) if n > 0 else P.full(sq.shape, np.nan, a.dtype)
    return _keep(to_dtype(out, dt), a.shape, axes, keepdims)


def std(a, axis=None, dtype=None, ddof: int = 0, keepdims: bool = False, *, where=None, correction=None):
    """Standard deviation: the square root of var."""
    return sqrt(var(a, axis, dtype, ddof, keepdims, where=where, correction=correction))


def _logical(prim_fn, unit: bool, name: str):
    def fn(a, axis=None, keepdims: bool = False, *, where=None):
        a = asarray(a)
        b = a if dtypes.is_bool(a.dtype) else P.ne(a, 0)
        axes = _axes(axis, len(a.shape), name)
        return _keep(prim_fn(_masked(b, where, unit, name), axes), a.shape, axes, keepdims)

    fn.__name__ = name
    fn.__doc__ = f"Whether {name} elements along `axis` (of those `where` selects) are true (nonzero)."
    return fn


all = _logical(P.reduce_min, True, "all")
any = _logical(P.reduce_max, False, "any")
