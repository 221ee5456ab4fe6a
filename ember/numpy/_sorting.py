"""Scans, sorts and what is built on them, with jax.numpy's semantics: cumsum, cumprod, their nan- and
cumulative_ forms; sort, argsort (stable, descending), lexsort, partition, argpartition;
searchsorted, digitize; quantile, percentile, median and their nan- forms (every method JAX has, weights
with "inverted_cdf"); and the jit-able forms of the functions whose result size depends on the data
(nonzero, flatnonzero, argwhere, unique and the Array API's unique_values/_counts/_inverse/_all: `size=`
fixes it, as in JAX; without it the values must be concrete). nonzero counts through _stats' bincount.

All compose the primitives of tracer/prims/sort.py with gathers and scatters, as JAX composes lax.sort
and lax.cumsum, so they trace, differentiate, batch and compile as those do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ember.errors import ArgumentError, ArgumentValueError, ConcretizationError, user_location
from ember.numpy._core import asarray, normalize_axis, promote, to_dtype
from ember.numpy._stats import bincount
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.trace import Tracer

# --- helpers ----------------------------------------------------------------------------------------


def _flat(a):
    return P.reshape(a, (math.prod(a.shape),))


def _along(a, axis, name: str):
    """`a` and the axis to work along: the flattened array and 0 for axis None."""
    a = asarray(a)
    if axis is None:
        return _flat(a), 0
    return a, normalize_axis(axis, len(a.shape), name)


def _const(value, dtype):
    return np.array(value, dtype)[()]


def _concrete(x, name: str, why: str):
    """`x`'s value as a NumPy array; a traced x cannot give one."""
    if isinstance(x, Tracer):
        raise ConcretizationError(f"{name}: {why}", user_location())
    return np.asarray(x)


# --- cumulative ---------------------------------------------------------------------------------------

def _scan_dtype(a, dtype) -> np.dtype:
    """A scan's dtype: `dtype`, else bools count in the default int and every other dtype is kept."""
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    return dtypes.int_ if a.dtype == np.bool_ else a.dtype


def _cumulative(prim_fn, name: str, nan_to=None):
    def fn(a, axis: int | None = None, dtype=None, out=None):
        if out is not None:
            raise ArgumentValueError(f"{name}: the out argument is not supported (arrays are immutable)",
                                     user_location())
        a, ax = _along(a, axis, name)
        if nan_to is not None and a.dtype.kind == "f":
            a = P.select(P.ne(a, a), P.full(a.shape, nan_to, a.dtype), a)
        return prim_fn(to_dtype(a, _scan_dtype(a, dtype)), ax)

    fn.__name__ = name
    fn.__doc__ = (f"The running {name[3 + 3 * (nan_to is not None):]} along `axis` (of the flattened array "
                  f"when None){', NaNs counting as ' + str(nan_to) if nan_to is not None else ''}, as "
                  f"jnp.{name}.")
    return fn


cumsum = _cumulative(P.cumsum, "cumsum")
cumprod = _cumulative(P.cumprod, "cumprod")
nancumsum = _cumulative(P.cumsum, "nancumsum", 0)
nancumprod = _cumulative(P.cumprod, "nancumprod", 1)


def _cumulative_array_api(scan, initial: int, name: str):
    def fn(x, /, *, axis: int | None = None, dtype=None, include_initial: bool = False):
        x = asarray(x)
        if axis is None:
            if len(x.shape) > 1:
                raise ArgumentValueError(f"{name}: the input array has {len(x.shape)} dimensions; axis must be "
                                         "given for an array of more than one", user_location())
            axis = 0
        if not x.shape:
            raise ArgumentValueError(f"{name}: the input must be at least 1-dimensional", user_location())
        ax = normalize_axis(axis, len(x.shape), name)
        out = scan(x, ax, dtype)
        if not include_initial:
            return out
        config = [(0, 0, 0)] * len(x.shape)
        config[ax] = (1, 0, 0)
        return P.pad(out, _const(initial, out.dtype), config)

    fn.__name__ = name
    fn.__doc__ = f"The Array API's {name}: jnp.{name} along `axis`, led by {initial} when `include_initial`."
    return fn


cumulative_sum = _cumulative_array_api(cumsum, 0, "cumulative_sum")
cumulative_prod = _cumulative_array_api(cumprod, 1, "cumulative_prod")


# --- sorting ------------------------------------------------------------------------------------------

def _no_kind(name: str, kind, order) -> None:
    if kind is not None:
        raise ArgumentValueError(f"'kind' argument to {name} is not supported. Use stable=True or stable=False "
                                 "to specify sort stability.", user_location())
    if order is not None:
        raise ArgumentValueError(f"'order' argument to {name} is not supported.", user_location())


def sort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True, descending: bool = False):
    """`a` sorted along `axis` (the flattened array when None): -0.0 equals 0.0, NaNs come last (first
    when `descending`), as jnp.sort."""
    _no_kind("sort", kind, order)
    a, ax = _along(a, axis, "sort")
    out = P.sort((a,), ax, 1, stable)[0]
    return P.rev(out, (ax,)) if descending else out


def _index_dtype(n: int) -> np.dtype:
    return dtypes.int_ if n <= np.iinfo(np.int32).max else np.dtype(np.int64)


def argsort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True, descending: bool = False,
            dtype=None):
    """The indices that sort `a` along `axis` (equal elements in their order, also when `descending`)."""
    _no_kind("argsort", kind, order)
    a, ax = _along(a, axis, "argsort")
    idx_dtype = dtypes.canonicalize(dtype) if dtype is not None else _index_dtype(a.shape[ax])
    iota = P.iota(idx_dtype, a.shape, ax)
    if descending and stable:  # reversed first, so equal elements keep their order once reversed back
        a, iota = P.rev(a, (ax,)), P.rev(iota, (ax,))
    indices = P.sort((a, iota), ax, 1, stable)[1]
    return P.rev(indices, (ax,)) if descending else indices


def lexsort(keys: Sequence, axis: int = -1):
    """The indices sorting by the last key, then the one before it, ..., as jnp.lexsort."""
    keys = [asarray(k) for k in keys]
    if not keys:
        raise ArgumentError("need sequence of keys with len > 0 in lexsort", user_location())
    if len({k.shape for k in keys}) > 1:
        raise ArgumentValueError("all keys need to be the same shape", user_location())
    if not keys[0].shape:
        return P.full((), 0, dtypes.int_)
    ax = normalize_axis(axis, len(keys[0].shape), "lexsort")
    iota = P.iota(_index_dtype(keys[0].shape[ax]), keys[0].shape, ax)
    return P.sort((*keys[::-1], iota), ax, len(keys))[-1]


def _top_k(a, k: int):
    from ember.lax.sorting import top_k

    return top_k(a, k)


def _kth(name: str, a, kth: int, axis: int):
    a = asarray(a)
    ax = normalize_axis(axis, len(a.shape), name)
    n = a.shape[ax]
    if not -n <= kth < n:
        raise ArgumentValueError(f"{name}: kth={kth} is out of bounds for an axis of size {n}", user_location())
    return P.moveaxis(a, ax, len(a.shape) - 1), kth % n, ax


def _negated(a):
    """-a, and for unsigned ints -(a + 1) (so 0 does not stay 0), as jnp.partition negates."""
    if a.dtype.kind == "u":
        return P.neg(P.add(a, _const(1, a.dtype)))
    return P.neg(a)


def partition(a, kth: int, axis: int = -1):
    """`a` with its kth smallest element along `axis` in place, the smaller ones (ascending) before it and
    the larger ones (descending) after it, as jnp.partition."""
    rows, kth, ax = _kth("partition", a, kth, axis)
    bottom = P.neg(_top_k(_negated(rows), kth + 1)[0])
    if rows.dtype.kind == "u":
        bottom = P.sub(bottom, _const(1, rows.dtype))
    top = _top_k(rows, rows.shape[-1] - kth - 1)[0]
    return P.moveaxis(P.concatenate([bottom, top], len(rows.shape) - 1), len(rows.shape) - 1, ax)


def argpartition(a, kth: int, axis: int = -1):
    """The indices that would partition `a` (see `partition`), as jnp.argpartition."""
    rows, kth, ax = _kth("argpartition", a, kth, axis)
    last = len(rows.shape) - 1
    bottom = _top_k(_negated(rows), kth + 1)[1]
    # the rest are the indices not in `bottom`, in ascending order: the top of a 0/1 proxy
    iota = P.iota(bottom.dtype, rows.shape, last)
    taken = P.reduce_max(P.eq(P.broadcast_in_dim(iota, rows.shape + (kth + 1,), tuple(range(last + 1))),
                              P.broadcast_in_dim(bottom, rows.shape + (kth + 1,), tuple(range(last)) + (last + 1,))),
                         (last + 1,))
    proxy = P.select(taken, P.full(rows.shape, 0.0, np.float32), P.full(rows.shape, 1.0, np.float32))
    top = _top_k(proxy, rows.shape[-1] - kth - 1)[1]
    return P.moveaxis(P.concatenate([bottom, top], last), last, ax)


# --- searching ----------------------------------------------------------------------------------------

def _total_less(x, y, or_equal: bool):
    """x < y (x <= y when `or_equal`) in the sort order: NaNs equal and above everything, -0.0 == 0.0."""
    lt = P.lt(x, y)
    if x.dtype.kind == "f":
        lt = P.or_(lt, P.and_(P.eq(x, x), P.ne(y, y)))
    if not or_equal:
        return lt
    eq = P.eq(x, y)
    if x.dtype.kind == "f":
        eq = P.or_(eq, P.and_(P.ne(x, x), P.ne(y, y)))
    return P.or_(lt, eq)


_SEARCH_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


def searchsorted(a, v, side: str = "left", sorter=None, *, method: str = "scan"):
    """Where each of `v` would go in the sorted 1-d `a` to keep it sorted (the first such place, or
    the last when side="right"), in the sort order (NaNs last), as jnp.searchsorted. Every `method`
    gives the same result; this one is a binary search of ceil(log2(len(a) + 1)) steps."""
    if side not in ("left", "right"):
        raise ArgumentValueError(f"{side!r} is an invalid value for keyword 'side'. Expected one of "
                                 "['left', 'right'].", user_location())
    if method not in _SEARCH_METHODS:
        raise ArgumentValueError(f"method={method!r} not recognized; expected one of {list(_SEARCH_METHODS)}",
                                 user_location())
    a, v = asarray(a), asarray(v)
    if len(a.shape) != 1:
        raise ArgumentValueError("a should be 1-dimensional", user_location())
    if sorter is not None:
        a = P.gather(a, P.reshape(asarray(sorter), (a.shape[0], 1)))
    a, v = promote(a, v, name="searchsorted")
    a, v = asarray(a), asarray(v)
    n = a.shape[0]
    dtype = np.dtype(np.int32) if n <= np.iinfo(np.int32).max // 2 else np.dtype(np.int64)
    low, high = P.full(v.shape, 0, dtype), P.full(v.shape, n, dtype)
    for _ in range(math.ceil(math.log2(n + 1))):
        mid = P.div(P.add(low, high), _const(2, dtype))
        go_left = _total_less(v, P.gather(a, P.reshape(mid, v.shape + (1,))), or_equal=side == "left")
        low, high = P.select(go_left, low, mid), P.select(go_left, mid, high)
    return high


def digitize(x, bins, right: bool = False, *, method: str | None = None):
    """The index of the bin each of `x` falls in, for increasing or decreasing `bins`, as jnp.digitize."""
    x, bins = asarray(x), asarray(bins)
    if len(bins.shape) != 1:
        raise ArgumentValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins.shape}",
                                 user_location())
    n = bins.shape[0]
    if n == 0:
        return P.full(x.shape, 0, np.int32)
    side = "left" if right else "right"
    kw = {} if method is None else {"method": method}
    up = searchsorted(bins, x, side=side, **kw)
    down = P.sub(_const(n, up.dtype), searchsorted(P.rev(bins, (0,)), x, side=side, **kw))
    increasing = P.ge(P.slice(bins, (n - 1,), (n,)), P.slice(bins, (0,), (1,)))
    return P.select(P.broadcast_in_dim(P.reshape(increasing, ()), x.shape, ()), up, down)


# --- quantiles ----------------------------------------------------------------------------------------

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _reduced_axes(axis, nd: int) -> tuple[int, ...] | None:
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(normalize_axis(int(ax), nd, "quantile") for ax in axes)
    if len(set(axes)) != len(axes):
        raise ArgumentValueError("quantile: repeated axis", user_location())
    return tuple(sorted(axes))


def _reduced_last(a, axes, keepdims: bool):
    """`a` with the reduced axes (all when None) moved last and merged into one, and the shape keepdims
    gives back."""
    nd = len(a.shape)
    if axes is None:
        return _flat(a), (1,) * nd if keepdims else None
    kept = tuple(i for i in range(nd) if i not in axes)
    moved = P.transpose(a, kept + axes) if kept + axes != tuple(range(nd)) else a
    rows = P.reshape(moved, tuple(a.shape[i] for i in kept) + (math.prod(a.shape[i] for i in axes),))
    return rows, tuple(1 if i in axes else a.shape[i] for i in range(nd)) if keepdims else None


def _weights_like(weights, a, axes):
    """`weights` of a's shape, or of the reduced axes' shape broadcast to it, as jnp.quantile takes them."""
    if weights.shape == a.shape:
        return weights
    if axes is None:
        raise ArgumentValueError("Weights shape must match 'a' shape when axis is None.", user_location())
    if weights.shape != tuple(a.shape[ax] for ax in axes):
        raise ArgumentValueError(f"Weights shape {weights.shape} must match reduction axes "
                                 f"{tuple(a.shape[ax] for ax in axes)}", user_location())
    return P.broadcast_in_dim(weights, a.shape, axes)


def _quantile(a, q, axis, method: str, keepdims: bool, skip_nans: bool, name: str, scale: int = 1, weights=None):
    if method not in _METHODS:
        raise ArgumentValueError(f"{name}: method can only be {', '.join(map(repr, _METHODS))}", user_location())
    if weights is not None and method != "inverted_cdf":
        raise NotImplementedError(f"{method} doesn't support weights. Only method 'inverted_cdf' supports weights. "
                                  f"(at {user_location()})")
    a = asarray(a)
    if a.dtype.kind != "f":
        a = to_dtype(a, dtypes.default_float_for(a.dtype))
    if isinstance(q, (int, float)):  # weak: a's dtype
        q = np.asarray(q, a.dtype)
    a, q = (asarray(x) for x in promote(a, asarray(q), name=name))
    if len(q.shape) > 1:
        raise ArgumentValueError(f"q must be have rank <= 1, got shape {q.shape}", user_location())
    if scale != 1:  # a percentage: q / 100 as XLA computes JAX's, times the rounded reciprocal
        q = P.mul(q, _const(1 / scale, q.dtype))
    axes = _reduced_axes(axis, len(a.shape))
    rows, kept_shape = _reduced_last(a, axes, keepdims)
    qs = q if q.shape else P.reshape(q, (1,))
    if method == "inverted_cdf":
        w = P.full(a.shape, 1, a.dtype) if weights is None else to_dtype(_weights_like(asarray(weights), a, axes),
                                                                           a.dtype)
        out = _inverted_cdf(rows, _reduced_last(w, axes, False)[0], qs, skip_nans)
    else:
        out = _interpolated(rows, qs, method, skip_nans)
    if kept_shape is not None:
        out = P.reshape(out, (qs.shape[0],) + kept_shape)
    return out if q.shape else P.reshape(out, out.shape[1:])


def _sorted_rows(rows, skip_nans: bool, *others):
    """The rows sorted (every NaN a positive NaN, so last; a row with a NaN all NaN unless `skip_nans`),
    `others` moved with them."""
    last = len(rows.shape) - 1
    nan = P.full(rows.shape, np.nan, rows.dtype)
    isnan = P.ne(rows, rows)
    if not skip_nans:
        isnan = P.broadcast_in_dim(P.reduce_max(isnan, (last,)), rows.shape, tuple(range(last)))
    return P.sort((P.select(isnan, nan, rows), *others), last)


def _valid_counts(rows, skip_nans: bool, dtype):
    """Per row, how many values count: the non-NaN ones when skipping NaNs, else all."""
    last = len(rows.shape) - 1
    if skip_nans:
        return P.reduce_sum(to_dtype(P.eq(rows, rows), dtype), (last,))
    return P.full(rows.shape[:-1], rows.shape[-1], dtype)


def _over_quantiles(x, m: int):
    """A per-row value broadcast over the m quantiles: (m,) + the rows' leading shape."""
    return P.broadcast_in_dim(x, (m,) + x.shape, tuple(range(1, len(x.shape) + 1)))


def _interpolated(rows, qs, method: str, skip_nans: bool):
    """The quantiles `qs` of each row between its two nearest order statistics, as `method` picks."""
    (rows,) = _sorted_rows(rows, skip_nans)
    lead, m, dt = rows.shape[:-1], qs.shape[0], qs.dtype
    top = _over_quantiles(P.sub(_valid_counts(rows, skip_nans, dt), _const(1, dt)), m)
    pos = P.mul(P.broadcast_in_dim(qs, (m,) + lead, (0,)), top)
    low, high = P.floor(pos), P.ceil(pos)
    high_weight = P.sub(pos, low)
    low_weight = P.sub(_const(1, dt), high_weight)
    clamp = lambda x: P.maximum(P.full(x.shape, 0, x.dtype), P.minimum(x, top))  # noqa: E731
    low_value, high_value = (_row_values(rows, to_dtype(clamp(x), dtypes.int_), m) for x in (low, high))
    if method == "linear":
        return P.add(P.mul(to_dtype(low_value, dt), low_weight), P.mul(to_dtype(high_value, dt), high_weight))
    if method == "lower":
        return low_value
    if method == "higher":
        return high_value
    if method == "nearest":
        return P.select(P.le(high_weight, _const(0.5, high_weight.dtype)), low_value, high_value)
    return P.mul(P.add(low_value, high_value), _const(0.5, low_value.dtype))


def _inverted_cdf(rows, weights, qs, skip_nans: bool):
    """The first value of each sorted row whose cumulative weight reaches q times the row's total, as
    jnp.quantile's method="inverted_cdf": NaN where a weight is negative or NaN, or where a NaN is
    (every value being NaN, when skipping NaNs)."""
    last = len(rows.shape) - 1
    lead, m = rows.shape[:-1], qs.shape[0]
    any_nan = P.reduce_max(P.ne(rows, rows), (last,))
    rows, weights = _sorted_rows(rows, skip_nans, weights)
    zeros = P.full(weights.shape, 0, weights.dtype)
    bad = P.or_(P.lt(weights, zeros), P.ne(weights, weights))
    cum = P.cumsum(P.select(P.or_(bad, P.ne(rows, rows)), zeros, weights), last)
    total = P.reshape(P.slice(cum, (0,) * last + (rows.shape[-1] - 1,), cum.shape), lead)
    target = P.mul(P.broadcast_in_dim(qs, (m,) + lead, (0,)), _over_quantiles(total, m))
    below = P.lt(_over_quantiles(cum, m), P.broadcast_in_dim(target, (m,) + cum.shape, tuple(range(last + 1))))
    idx = P.reduce_sum(to_dtype(below, dtypes.int_), (last + 1,))
    valid = _valid_counts(rows, skip_nans, qs.dtype)
    top = _over_quantiles(to_dtype(P.sub(valid, _const(1, valid.dtype)), dtypes.int_), m)
    idx = P.maximum(P.full(idx.shape, 0, idx.dtype), P.minimum(idx, top))
    out = _row_values(rows, idx, m)
    any_bad = P.reduce_max(bad, (last,))
    force_nan = P.or_(any_bad, P.eq(valid, P.full(lead, 0, valid.dtype)) if skip_nans else any_nan)
    return P.select(_over_quantiles(force_nan, m), P.full(out.shape, np.nan, out.dtype), out)


def _row_values(rows, index, m: int):
    """rows[..., index[j, ...]] for each of the m quantiles: (m,) + the rows' leading shape."""
    lead = rows.shape[:-1]
    stacked = P.broadcast_in_dim(rows, (m,) + rows.shape, tuple(range(1, len(rows.shape) + 1)))
    return P.gather(stacked, P.reshape(index, (m,) + lead + (1,)), len(lead) + 1)


def _quantile_fn(name: str, skip_nans: bool, scale: float):
    def fn(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
           keepdims: bool = False, *, weights=None):
        if out is not None:
            raise ArgumentValueError(f"{name}: the out argument is not supported (arrays are immutable)",
                                     user_location())
        return _quantile(a, q, axis, method, keepdims, skip_nans, name, scale, weights)

    fn.__name__ = name
    fn.__doc__ = (f"The q-th {'percentile' if scale != 1 else 'quantile'} along `axis` (all axes when None)"
                  f"{', NaNs ignored' if skip_nans else ''}, as jnp.{name}.")
    return fn


quantile = _quantile_fn("quantile", False, 1)
nanquantile = _quantile_fn("nanquantile", True, 1)
percentile = _quantile_fn("percentile", False, 100)
nanpercentile = _quantile_fn("nanpercentile", True, 100)


def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """The median along `axis` (all axes when None): NaN where a NaN is, as jnp.median."""
    return quantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)


def nanmedian(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """The median along `axis` of the elements that are not NaN, as jnp.nanmedian."""
    return nanquantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)


# --- data-dependent sizes -----------------------------------------------------------------------------

def _size(mask, size, name: str) -> int:
    if size is not None:
        return int(size)
    values = _concrete(mask, name, "the result's size depends on the values; pass size= (and fill_value=) to use it "
                                   "in traced code")
    return int(values.sum())


def nonzero(a, *, size: int | None = None, fill_value=None) -> tuple:
    """The indices of the non-zero elements, one array per axis; `size` fixes their length (padded with
    `fill_value`, else with zeros), as jnp.nonzero."""
    a = asarray(a)
    if not a.shape:
        raise ArgumentValueError("Calling nonzero on 0d arrays is not allowed. Use jnp.atleast_1d(scalar).nonzero() "
                                 "instead.", user_location())
    mask = a if a.dtype == np.bool_ else P.ne(a, P.full(a.shape, 0, a.dtype))
    n = _size(mask, size, "nonzero")
    total = math.prod(a.shape)
    if total == 0 or n == 0:
        return tuple(P.full((n,), 0, dtypes.int_) for _ in a.shape)
    counts = cumsum(mask)
    flat = cumsum(bincount(counts, length=n))
    out = []
    stride = total
    for d in a.shape:
        stride //= d
        out.append(P.rem(P.div(flat, _const(stride, flat.dtype)), _const(d, flat.dtype)))
    if fill_value is not None:
        fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * len(a.shape)
        if len(fills) != len(a.shape) or any(np.shape(f) != () for f in fills):
            raise ArgumentValueError(f"fill_value must be a scalar or a tuple of length {len(a.shape)}; got "
                                     f"{fill_value}", user_location())
        count = P.reduce_sum(to_dtype(mask, dtypes.int_), tuple(range(len(a.shape))))
        beyond = P.ge(P.iota(dtypes.int_, (n,), 0), count)
        out = [P.select(beyond, P.full((n,), f, o.dtype), o) for f, o in zip(fills, out)]
    return tuple(out)


def flatnonzero(a, *, size: int | None = None, fill_value=None):
    """The indices of the non-zero elements of the flattened array, as jnp.flatnonzero."""
    return nonzero(_flat(asarray(a)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size: int | None = None, fill_value=None):
    """The indices of the non-zero elements, one row each, as jnp.argwhere."""
    a = asarray(a)
    if not a.shape:
        a = P.reshape(a, (1,))
        rows = nonzero(a, size=size, fill_value=fill_value)
        return P.reshape(rows[0], (rows[0].shape[0], 0))
    cols = nonzero(a, size=size, fill_value=fill_value)
    return P.concatenate([P.reshape(c, c.shape + (1,)) for c in cols], 1)


def _unique_sorted(ar, equal_nan: bool):
    """The rows of `ar` (axis 0 first) sorted lexicographically, the mask of the first of each run of
    equal rows, and the permutation that sorts them."""
    size, rest = ar.shape[0], math.prod(ar.shape[1:])
    if rest == 0:
        perm = P.full((1,), 0, dtypes.int_)
        size = 1
    else:
        cols = P.reshape(ar, (size, rest))
        perm = lexsort([P.reshape(P.slice(cols, (0, j), (size, j + 1)), (size,)) for j in range(rest)][::-1],
                       axis=0)
    aux = P.gather(ar, P.reshape(perm, (perm.shape[0], 1))) if math.prod(ar.shape) else ar
    if not math.prod(ar.shape):
        return aux, P.full((size,), False, np.bool_), perm
    nd = len(aux.shape)
    after = P.slice(aux, (1,) + (0,) * (nd - 1), aux.shape)
    before = P.slice(aux, (0,) * nd, (aux.shape[0] - 1,) + aux.shape[1:])
    differ = P.ne(after, before)
    if aux.dtype.kind == "f" and equal_nan:
        differ = P.and_(differ, P.not_(P.and_(P.ne(after, after), P.ne(before, before))))
    if nd > 1:
        differ = P.reduce_max(differ, tuple(range(1, nd)))
    mask = P.concatenate([P.full((1,), True, np.bool_), differ], 0)
    return aux, mask, perm


def unique(ar, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None, fill_value=None,
           sorted: bool = True):
    """The sorted unique elements (rows along `axis`); `size` fixes their count (padded with
    `fill_value`, else the smallest element), as jnp.unique, with the first indices, the inverse and
    the counts when asked."""
    ar = asarray(ar)
    shape = ar.shape
    if axis is None:
        ar, ax = _flat(ar), 0
    else:
        ax = normalize_axis(axis, len(ar.shape), "unique")
    if ar.shape[ax] == 0 and size and fill_value is None:
        raise ArgumentValueError("jnp.unique: for zero-sized input with nonzero size argument, fill_value must be "
                                 "specified", user_location())
    moved = P.moveaxis(ar, ax, 0)
    aux, mask, perm = _unique_sorted(moved, equal_nan)
    n = _size(mask, size, "unique")
    ind = nonzero(mask, size=n)[0]
    has_values = math.prod(aux.shape) > 0
    result = P.gather(aux, P.reshape(ind, (n, 1))) if has_values else aux
    if size is not None and fill_value is not None:
        fill = np.asarray(fill_value).astype(result.dtype)
        if result.shape[0]:
            valid = P.lt(P.iota(dtypes.int_, (n,), 0), P.reduce_sum(to_dtype(mask, dtypes.int_), (0,)))
            result = P.select(P.broadcast_in_dim(valid, result.shape, (0,)), result,
                              P.full(result.shape, fill[()], result.dtype))
        else:
            result = P.full((n,) + result.shape[1:], fill[()], result.dtype)
    out = [P.moveaxis(result, 0, ax)]
    if return_index:
        out.append(P.gather(perm, P.reshape(ind, (n, 1))) if has_values else perm)
    if return_inverse:
        if has_values:
            imask = P.sub(cumsum(mask), _const(1, dtypes.int_))
            inverse = P.scatter(P.full(mask.shape, 0, dtypes.int_), P.reshape(perm, perm.shape + (1,)), imask)
            out.append(P.reshape(inverse, shape) if axis is None else inverse)
        else:
            out.append(P.full((ar.shape[ax],), 0, dtypes.int_))
    if return_counts:
        if has_values:
            idx = nonzero(mask, size=n + 1)[0]
            rest = P.slice(idx, (1,), (n + 1,))
            rest = P.select(P.ne(rest, P.full((n,), 0, rest.dtype)), rest, P.full((n,), mask.shape[0], rest.dtype))
            idx = P.concatenate([P.slice(idx, (0,), (1,)), rest], 0)
            out.append(P.sub(P.slice(idx, (1,), (n + 1,)), P.slice(idx, (0,), (n,))))
        elif ar.shape[ax]:
            out.append(P.full((1,), ar.shape[ax], dtypes.int_))
        else:
            out.append(P.full((0,), 0, dtypes.int_))
    return out[0] if len(out) == 1 else tuple(out)


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


def unique_values(x, /, *, size: int | None = None, fill_value=None):
    """The Array API's unique_values: `unique(x)`, NaNs each their own value."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size: int | None = None, fill_value=None) -> UniqueCountsResult:
    """The Array API's unique_counts: (values, counts), NaNs each their own value."""
    return UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_inverse(x, /, *, size: int | None = None, fill_value=None) -> UniqueInverseResult:
    """The Array API's unique_inverse: (values, inverse_indices), NaNs each their own value."""
    return UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_all(x, /, *, size: int | None = None, fill_value=None) -> UniqueAllResult:
    """The Array API's unique_all: (values, indices, inverse_indices, counts), NaNs each their own value."""
    return UniqueAllResult(*unique(x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False,
                                   size=size, fill_value=fill_value))
