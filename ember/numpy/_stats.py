"""Statistics with jax.numpy's semantics, composed of existing primitives: the NaN-ignoring reductions
(nansum, nanprod, nanmax, nanmin, nanargmax, nanargmin, nanmean, nanvar, nanstd), average, cov,
corrcoef, and counting into bins (bincount, histogram, histogram2d, histogram_bin_edges) with static bin counts."""

from __future__ import annotations

import builtins

import numpy as np

from ember.errors import ArgumentError, ArgumentValueError, ConcretizationError, DTypeError, user_location
from ember.numpy._arrays import diag, diff
from ember.numpy._core import asarray, dtype_weak, normalize_axes, shape_of, to_dtype
from ember.numpy._math import clip, divide, isnan, logical_not, multiply, sqrt, subtract
from ember.numpy._products import dot
from ember.numpy._reductions import all as _all
from ember.numpy._reductions import argmax, argmin, mean, prod
from ember.numpy._reductions import max as _max
from ember.numpy._reductions import min as _min
from ember.numpy._reductions import sum as _sum
from ember.numpy._shape import atleast_2d, concatenate, reshape, transpose
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.array import Array
from ember.tracer.trace import Tracer


def _inexact(*xs) -> list:
    """Operands promoted together, then to a float dtype (JAX's promote_dtypes_inexact)."""
    xs = [asarray(x) for x in xs]
    target = dtypes.result_type(*(dtype_weak(x) for x in xs))[0]
    target = dtypes.default_float_for(target)
    return [to_dtype(x, target) for x in xs]


def _without_nan(a, fill):
    """`a` with its NaNs replaced by `fill` (a's dtype)."""
    return P.select(P.ne(a, a), P.full(shape_of(a), fill, a.dtype), a)


# --- NaN-ignoring reductions ----------------------------------------------------------------------

def _fill_where(condition, x, y):
    """where(condition, x, y) for a Python scalar x, keeping y's dtype and weak type."""
    dt, weak = dtype_weak(y)
    return P.select(condition, P.full(shape_of(y), x, dt, weak_type=weak), y)


def nansum(a, axis=None, dtype=None, keepdims: bool = False, initial=None, where=None):
    """sum, counting NaNs as zero."""
    a = asarray(a)
    a = _without_nan(a, 0) if dtypes.is_float(a.dtype) else a
    return _sum(a, axis, dtype, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, keepdims: bool = False, initial=None, where=None):
    """prod, counting NaNs as one."""
    a = asarray(a)
    a = _without_nan(a, 1) if dtypes.is_float(a.dtype) else a
    return prod(a, axis, dtype, keepdims, initial, where)


def _nan_extremum(reduce, fill: float, name: str):
    def fn(a, axis=None, keepdims: bool = False, initial=None, where=None):
        a = asarray(a)
        if not dtypes.is_float(a.dtype):
            return reduce(a, axis, keepdims, initial, where)
        out = reduce(_without_nan(a, fill), axis, keepdims, initial, where)
        if initial is not None:  # as JAX: an all-NaN slice gives `initial` then
            return out
        return _fill_where(_all(isnan(a), axis, keepdims), np.nan, out)

    fn.__name__ = name
    fn.__doc__ = (f"{name[3:]}, ignoring NaNs: NaN where a slice is all NaN and there is no `initial` (as JAX, "
                  "without a warning).")
    return fn


nanmax = _nan_extremum(_max, -np.inf, "nanmax")
nanmin = _nan_extremum(_min, np.inf, "nanmin")


def _nan_arg(reduce, fill: float, name: str):
    def fn(a, axis=None, keepdims: bool = False):
        a = asarray(a)
        if not dtypes.is_float(a.dtype):
            return reduce(a, axis, keepdims)
        nan = isnan(a)
        out = reduce(_without_nan(a, fill), axis, keepdims)
        return _fill_where(_all(nan, axis, keepdims), -1, out)

    fn.__name__ = name
    fn.__doc__ = f"Index of the {name[6:]}imum along `axis`, ignoring NaNs: -1 where a slice is all NaN (as JAX)."
    return fn


nanargmax = _nan_arg(argmax, -np.inf, "nanargmax")
nanargmin = _nan_arg(argmin, np.inf, "nanargmin")


def nanmean(a, axis=None, dtype=None, keepdims: bool = False, where=None):
    """mean of the non-NaN elements (NaN for an all-NaN slice)."""
    a = asarray(a)
    if not dtypes.is_float(a.dtype):
        return mean(a, axis, dtype, keepdims, where=where)
    dt = dtypes.canonicalize(dtype) if dtype is not None else a.dtype
    count = _sum(logical_not(isnan(a)), axis, dt, keepdims, where=where)
    none = P.eq(count, dt.type(0))  # an all-NaN slice: NaN, without dividing 0 by 0 (and warning)
    total = nansum(a, axis, dt, keepdims, where=where)
    return _fill_where(none, np.nan, P.div(total, P.select(none, P.full(shape_of(count), 1, dt), count)))


def nanvar(a, axis=None, dtype=None, ddof: int = 0, keepdims: bool = False, where=None):
    """var of the non-NaN elements; NaN where no degree of freedom is left (as JAX)."""
    a = asarray(a)
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float_for(a.dtype)
    a = to_dtype(a, dtypes.accumulation_dtype(dt))
    nan = isnan(a)
    centered = _without_nan(subtract(a, nanmean(a, axis, keepdims=True, where=where)), 0)
    n = P.sub(_sum(logical_not(nan), axis, a.dtype, keepdims, where=where), a.dtype.type(ddof))
    empty = P.le(n, a.dtype.type(0))
    total = _sum(P.mul(centered, centered), axis, keepdims=keepdims, where=where)
    out = P.div(_fill_where(empty, np.nan, total), P.select(empty, P.full(shape_of(n), 1, n.dtype), n))
    return to_dtype(out, dt)


def nanstd(a, axis=None, dtype=None, ddof: int = 0, keepdims: bool = False, where=None):
    """std of the non-NaN elements: the square root of nanvar."""
    return sqrt(nanvar(a, axis, dtype, ddof, keepdims, where))


# --- weighted statistics --------------------------------------------------------------------------

def average(a, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """Weighted mean along `axis` (weights either a's shape or 1-D along a single axis); with
    `returned`, also the sum of the weights, broadcast to the average's shape."""
    if weights is None:
        (a,) = _inexact(a)
        avg = mean(a, axis, keepdims=keepdims)
        axes = normalize_axes(axis, len(a.shape), "average")
        total = P.full(shape_of(avg), builtins.int(np.prod([a.shape[i] for i in axes])), avg.dtype)
        return (avg, total) if returned else avg
    a, w = _inexact(a, weights)
    if shape_of(a) != shape_of(w):
        if axis is None:
            raise ArgumentValueError("average: axis must be specified when the shapes of a and weights differ",
                                     user_location())
        axes = normalize_axes(axis, len(a.shape), "average")
        if len(axes) != 1 or shape_of(w) != (a.shape[axes[0]],):
            raise ArgumentValueError(f"average: weights of shape {shape_of(w)} are not consistent with a of shape "
                                     f"{shape_of(a)} along axis {axis}", user_location())
        w = reshape(w, tuple(d if i in axes else 1 for i, d in enumerate(a.shape)))
    total = _sum(w, axis, keepdims=keepdims)
    avg = divide(_sum(multiply(a, w), axis, keepdims=keepdims), total)
    if returned:
        return avg, (total if shape_of(total) == shape_of(avg) else P.broadcast_to(total, shape_of(avg)))
    return avg


def _sample_weights(fweights, aweights, n: int):
    """The combined weights of cov's samples (absolute values, as JAX), or None."""
    w = None
    if fweights is not None:
        fw = asarray(fweights)
        if len(fw.shape) != 1 or fw.shape[0] != n:
            raise ArgumentValueError(f"cov: fweights of shape {fw.shape} for {n} samples", user_location())
        if not dtypes.is_int(fw.dtype):
            raise DTypeError(f"cov: fweights must be integers, got {fw.dtype}", user_location())
        w = P.abs(fw)
    aw = None
    if aweights is not None:
        aw = asarray(aweights)
        if len(aw.shape) != 1 or aw.shape[0] != n:
            raise ArgumentValueError(f"cov: aweights of shape {aw.shape} for {n} samples", user_location())
        aw = P.abs(aw)
        w = aw if w is None else multiply(w, aw)
    return w, aw


def cov(m, y=None, rowvar: bool = True, bias: bool = False, ddof: int | None = None, fweights=None,
        aweights=None, dtype=None):
    """Covariance matrix of the variables (rows, or columns with rowvar=False) of m (and y), with
    frequency and reliability weights; a scalar for a single variable."""
    m, *ys = _inexact(m) if y is None else _inexact(m, y)
    for name, v in (("m", m), *(("y", v) for v in ys)):
        if len(v.shape) > 2:
            raise ArgumentValueError(f"cov: {name} has more than 2 dimensions", user_location())
    if dtype is not None and not dtypes.is_float(dtypes.canonicalize(dtype)):
        raise ArgumentValueError(f"cov: dtype must be a float type, got {dtype}", user_location())
    x = atleast_2d(m)
    if not rowvar and len(m.shape) != 1:
        x = transpose(x)
    if x.shape[0] == 0:
        return P.full((0, 0), 0, x.dtype)
    if ys:
        yy = atleast_2d(ys[0])
        if not rowvar and yy.shape[0] != 1:
            yy = transpose(yy)
        x = concatenate([x, yy], 0)
    n_vars, n = x.shape
    if n == 0:
        return P.full(() if n_vars == 1 else (n_vars, n_vars), np.nan, x.dtype)
    ddof = (0 if bias else 1) if ddof is None else ddof
    w, aw = _sample_weights(fweights, aweights, n)
    if dtype is not None:
        x = to_dtype(x, dtypes.canonicalize(dtype))
    if w is not None:
        w = to_dtype(w, x.dtype)
    avg, w_sum = average(x, axis=1, weights=w, returned=True)
    w_sum = P.reshape(P.slice(w_sum, (0,), (1,)), ())
    if w is None:
        f = float(n - ddof)
    elif ddof == 0:
        f = w_sum
    elif aw is None:
        f = subtract(w_sum, ddof)
    else:
        f = subtract(w_sum, divide(multiply(ddof, _sum(multiply(w, to_dtype(aw, x.dtype)))), w_sum))
    x = subtract(x, reshape(avg, (n_vars, 1)))
    xw = x if w is None else multiply(x, reshape(w, (1, n)))
    out = divide(dot(x, transpose(xw)), f)
    return reshape(out, ()) if n_vars == 1 else out


def corrcoef(x, y=None, rowvar: bool = True, dtype=None):
    """Pearson correlation coefficients: cov normalized by the standard deviations, clipped to [-1, 1]."""
    c = cov(x, y, rowvar, dtype=dtype)
    if shape_of(c) == ():
        return divide(c, c)
    sd = sqrt(diag(c))
    c = divide(divide(c, reshape(sd, (-1, 1))), reshape(sd, (1, -1)))
    return clip(c, -1, 1)


# --- counting into bins ---------------------------------------------------------------------------

def bincount(x, weights=None, minlength: int = 0, *, length: int | None = None):
    """Counts (or summed weights) of each non-negative integer in the 1-D `x`; negative values count
    as 0 and values from `length` on are dropped, as in JAX. Under a trace `length` must be given."""
    x = asarray(x)
    if dtypes.is_bool(x.dtype):
        x = to_dtype(x, dtypes.int_)
    if not dtypes.is_int(x.dtype):
        raise DTypeError(f"bincount: x must have an integer type, got {x.dtype}", user_location())
    if len(x.shape) != 1:
        raise ArgumentValueError(f"bincount: only 1-dimensional input is supported, got shape {x.shape}",
                                 user_location())
    if length is None:
        if isinstance(x, Tracer):
            raise ConcretizationError("bincount: the result's length depends on the values of a traced x; pass a "
                                      "static length=", user_location())
        xv = np.asarray(x)
        length = builtins.max(int(minlength), int(builtins.max(0, xv.max())) + 1 if xv.size else 0)
    length = int(length)
    if weights is None:
        w = P.full(x.shape, 1, dtypes.int_)
    else:
        w = asarray(weights)
        if shape_of(w) != x.shape:
            raise ArgumentValueError(f"bincount: weights of shape {shape_of(w)} for x of shape {x.shape}",
                                     user_location())
    index = P.reshape(P.maximum(x, x.dtype.type(0)), x.shape + (1,))
    return P.scatter_add(P.full((length,), 0, w.dtype), index, w)


def _bin_edges(a, bins, range, name: str):
    """The bin edges of histogram: `bins` itself when 1-D, else bins + 1 evenly spaced edges over
    `range` (a's minimum and maximum when None; a range of width 0 widened by 0.5 each side)."""
    dt = dtypes.default_float_for(a.dtype)
    if isinstance(bins, str):
        raise NotImplementedError(f"{name}: string values for bins are not implemented")
    if len(shape_of(bins)) == 1:
        edges = to_dtype(asarray(bins), dt)
        # returned in a tuple, which the operand check does not copy: never the caller's own array
        return np.array(edges).view(Array) if isinstance(edges, np.ndarray) else edges
    if isinstance(bins, Tracer) or not isinstance(bins, (int, np.integer)):
        raise ArgumentError(f"{name}: bins must be a static int or a 1-D array of edges", user_location())
    if range is None:
        lo, hi = _min(a), _max(a)
    else:
        if len(range) != 2:
            raise ArgumentValueError(f"{name}: range must be None or a pair of scalars, got {range!r}",
                                     user_location())
        lo, hi = asarray(range[0]), asarray(range[1])
    lo, hi = to_dtype(lo, dt), to_dtype(hi, dt)
    same = P.eq(lo, hi)
    lo = P.select(same, P.sub(lo, dt.type(0.5)), lo)
    hi = P.select(same, P.add(hi, dt.type(0.5)), hi)
    t = P.div(P.iota(dt, (int(bins) + 1,), 0), dt.type(int(bins)))
    return P.add(P.mul(lo, P.sub(dt.type(1), t)), P.mul(hi, t))


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The edges histogram bins `a` with: `bins` itself when 1-D, else bins + 1 evenly spaced edges over
    `range` (a's extremes when None). `weights` is unused, as in JAX (no string bins)."""
    (a,) = _inexact(a)
    return _bin_edges(reshape(a, (-1,)), bins, range, "histogram_bin_edges")


def _bin_one_hot(values, edges, dtype: np.dtype):
    """(n, bins) one-hot of the bin each value falls in (edges[i] <= v < edges[i + 1], the last bin
    closed); values outside the edges (and NaNs) fall in none. Counted by comparisons, not a search."""
    n, k = shape_of(values)[0], shape_of(edges)[0]
    v = P.broadcast_to(P.reshape(values, (n, 1)), (n, k))
    e = P.broadcast_to(P.reshape(edges, (1, k)), (n, k))
    idx = P.reduce_sum(P.convert_element_type(P.le(e, v), dtypes.int_), (1,))  # searchsorted(side='right')
    last = P.reshape(P.slice(edges, (k - 1,), (k,)), ())
    idx = P.select(P.eq(values, last), P.full((n,), k - 1, dtypes.int_), idx)
    bins = P.iota(dtypes.int_, (n, k - 1), 1)
    return P.convert_element_type(P.eq(P.broadcast_to(P.reshape(idx, (n, 1)), (n, k - 1)),
                                       P.add(bins, dtypes.int_.type(1))), dtype)


def histogram(a, bins=10, range=None, weights=None, density: bool | None = None):
    """Counts (or summed weights) of the flattened `a` in static bins, and the bin edges; with
    `density`, normalized to integrate to 1."""
    if weights is None:
        (a,) = _inexact(a)
        w = None
    else:
        if shape_of(asarray(weights)) != shape_of(asarray(a)):
            raise ArgumentValueError("histogram: weights should have the same shape as a", user_location())
        a, w = _inexact(a, weights)
        w = reshape(w, (-1,))
    a = reshape(a, (-1,))
    edges = _bin_edges(a, bins, range, "histogram")
    hot = _bin_one_hot(a, edges, a.dtype)
    counts = P.reduce_sum(hot, (0,)) if w is None else dot(w, hot)
    if density:
        counts = divide(divide(counts, diff(edges)), _sum(counts))
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density: bool | None = None):
    """The 2-D histogram of the points (x[i], y[i]) in static bins (an int or edges, per axis or for
    both), with the two axes' edges."""
    x, y = _inexact(x, y)
    if shape_of(x) != shape_of(y) or len(shape_of(x)) != 1:
        raise ArgumentValueError(f"histogram2d: x and y must be 1-D of one length, got shapes {shape_of(x)} and "
                                 f"{shape_of(y)}", user_location())
    per_axis = isinstance(bins, (list, tuple)) and len(bins) == 2
    bx, by = bins if per_axis else (bins, bins)
    rx, ry = range if range is not None else (None, None)
    ex, ey = _bin_edges(x, bx, rx, "histogram2d"), _bin_edges(y, by, ry, "histogram2d")
    hx, hy = _bin_one_hot(x, ex, x.dtype), _bin_one_hot(y, ey, x.dtype)
    if weights is not None:
        hy = multiply(hy, reshape(to_dtype(asarray(weights), x.dtype), (-1, 1)))
    hist = dot(transpose(hx), hy)
    if density:
        hist = divide(hist, _sum(hist))
        hist = divide(divide(hist, reshape(diff(ex), (-1, 1))), reshape(diff(ey), (1, -1)))
    return hist, ex, ey

