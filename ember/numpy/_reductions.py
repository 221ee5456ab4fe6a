"""Reductions with NumPy's axis/keepdims semantics: sum, mean, max, min, prod, argmax, argmin, var,
std, all, any. As in JAX, sums and products of bools and small ints accumulate in the default (signed
or unsigned) int, and float16 sums, means and variances accumulate in float32."""

from __future__ import annotations

import builtins
import math

import numpy as np

from ember.errors import IncompatibleShapesError, user_location
from ember.numpy._core import asarray, normalize_axes, normalize_axis, to_dtype
from ember.numpy._math import maximum, minimum, sqrt, subtract
from ember.tracer import dtypes
from ember.tracer import prims as P


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


def _accumulate(prim_fn, a, axes, dtype: np.dtype):
    """`prim_fn(a, axes)` computed in `dtype`'s accumulation dtype and given back as `dtype`."""
    return to_dtype(prim_fn(to_dtype(a, dtypes.accumulation_dtype(dtype)), axes), dtype)


def _summation(prim_fn, name):
    def fn(a, axis=None, dtype=None, keepdims: bool = False):
        a = asarray(a)
        dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.sum_dtype(a.dtype)
        axes = _axes(axis, len(a.shape), name)
        return _keep(_accumulate(prim_fn, a, axes, dt), a.shape, axes, keepdims)

    fn.__name__ = name
    fn.__doc__ = f"{name} over `axis` (all axes when None), as numpy.{name} with JAX's dtypes."
    return fn


sum = _summation(P.reduce_sum, "sum")
prod = _summation(P.reduce_prod, "prod")


def _count(shape, axes) -> int:
    return math.prod(shape[i] for i in axes)


def mean(a, axis=None, dtype=None, keepdims: bool = False):
    a = asarray(a)
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float_for(a.dtype)
    a = to_dtype(a, dtypes.accumulation_dtype(dt))
    axes = normalize_axes(axis, len(a.shape), "mean")  # strict, as NumPy's mean
    total = P.reduce_sum(a, axes)
    n = _count(a.shape, axes)
    out = P.div(total, float(n)) if n else P.mul(total, float("nan"))
    return _keep(to_dtype(out, dt), a.shape, axes, keepdims)


def _extremum(prim_fn, combine, name):
    def fn(a, axis=None, keepdims: bool = False, initial=None):
        a = asarray(a)
        axes = _axes(axis, len(a.shape), name)
        if initial is None and builtins.any(a.shape[i] == 0 for i in axes):
            raise IncompatibleShapesError(f"{name}: zero-size array to reduction operation {name} which has no "
                                          "identity; pass initial=...", user_location())
        out = to_dtype(prim_fn(a, axes), a.dtype)  # strong, as jnp's reductions of weak values
        if initial is not None:
            out = combine(out, initial)
        return _keep(out, a.shape, axes, keepdims)

    fn.__name__ = name
    fn.__doc__ = f"{name} over `axis` (all axes when None), as numpy.{name}."
    return fn


max = _extremum(P.reduce_max, maximum, "max")
min = _extremum(P.reduce_min, minimum, "min")
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


def var(a, axis=None, dtype=None, ddof: int = 0, keepdims: bool = False):
    """Variance: mean of squared deviations, divided by N - ddof."""
    a = asarray(a)
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float_for(a.dtype)
    a = to_dtype(a, dtypes.accumulation_dtype(dt))
    axes = normalize_axes(axis, len(a.shape), "var")  # strict, as NumPy's var
    centered = subtract(a, mean(a, axes, keepdims=True))
    sq = P.reduce_sum(P.mul(centered, centered), axes)
    n = _count(a.shape, axes) - ddof
    # With no degrees of freedom left NumPy divides by zero: inf, or nan where sq is 0 (or nan).
    out = P.div(sq, float(n)) if n > 0 else P.mul(sq, float("inf"))
    return _keep(to_dtype(out, dt), a.shape, axes, keepdims)


def std(a, axis=None, dtype=None, ddof: int = 0, keepdims: bool = False):
    return sqrt(var(a, axis, dtype, ddof, keepdims))


def all(a, axis=None, keepdims: bool = False):
    a = asarray(a)
    b = a if dtypes.is_bool(a.dtype) else P.ne(a, 0)
    axes = _axes(axis, len(a.shape), "all")
    return _keep(P.reduce_min(b, axes), a.shape, axes, keepdims)


def any(a, axis=None, keepdims: bool = False):
    a = asarray(a)
    b = a if dtypes.is_bool(a.dtype) else P.ne(a, 0)
    axes = _axes(axis, len(a.shape), "any")
    return _keep(P.reduce_max(b, axes), a.shape, axes, keepdims)
