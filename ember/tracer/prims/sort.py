"""Sorting and scans: the cumulative reductions cumsum, cumprod, cummax, cummin, cumlogsumexp along
one `axis` (`reverse` scans from the end), and `sort`, several operands sorted together along `dimension` by
the first `num_keys` of them, lexicographically.

Sort's order is JAX's total order: -0.0 and 0.0 are equal (a stable sort keeps their order), NaNs of
either sign are equal to each other and after +inf; the outputs are the operands' own elements, moved.

Gradients are JAX's: cumsum's is a reverse cumsum; the others' are those of JAX's
associative scan (`lax.associative_scan`, which JAX differentiates in place of the primitive), so ties
of cummax/cummin split the cotangent the way that scan's pairwise max/min do; sort's moves each
cotangent back to where its element came from (a sort of an iota alongside gives the permutation).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import ArgumentValueError, AxisError, DTypeError, ShapeError
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.primitive import Primitive, def_batch, def_impl, def_jvp, def_shape, def_vjp, vjp_rules
from ember.tracer.prims.util import batch_size, bdim_at_front, moveaxis, shape_of

cumsum_p = Primitive("cumsum", kind="opaque", expensive=True)
cumprod_p = Primitive("cumprod", kind="opaque", expensive=True)
cummax_p = Primitive("cummax", kind="opaque", expensive=True)
cummin_p = Primitive("cummin", kind="opaque", expensive=True)
cumlogsumexp_p = Primitive("cumlogsumexp", kind="opaque", expensive=True)
sort_p = Primitive("sort", multiple_results=True, kind="opaque", expensive=True)

CUMULATIVE = {cumsum_p: "add", cumprod_p: "mul", cummax_p: "max", cummin_p: "min", cumlogsumexp_p: "logaddexp"}


# --- wrappers -------------------------------------------------------------------------------------

def _cumulative(prim):
    def fn(x, axis: int = 0, reverse: bool = False):
        return prim.bind(x, axis=int(axis), reverse=bool(reverse))

    fn.__name__ = prim.name
    fn.__doc__ = f"`{prim.name}` of `x` along `axis` (from the end when `reverse`), as lax.{prim.name}."
    return fn


cumsum = _cumulative(cumsum_p)
cumprod = _cumulative(cumprod_p)
cummax = _cumulative(cummax_p)
cummin = _cumulative(cummin_p)
cumlogsumexp = _cumulative(cumlogsumexp_p)


def sort(operands: Sequence, dimension: int, num_keys: int = 1, is_stable: bool = True) -> tuple:
    """The operands sorted together along `dimension` by their first `num_keys` (a tuple, one each)."""
    return tuple(sort_p.bind(*operands, dimension=int(dimension), is_stable=bool(is_stable),
                             num_keys=int(num_keys)))


# --- shape rules ----------------------------------------------------------------------------------

def _cumulative_shape(prim):
    accepts = "f" if CUMULATIVE[prim] == "logaddexp" else "fiu"

    def rule(x, *, axis, reverse):
        if x.dtype.kind not in accepts:
            raise DTypeError(f"{prim.name} does not accept dtype {x.dtype.name}. Accepted dtypes are subtypes "
                             f"of {'floating' if accepts == 'f' else 'number'}.")
        if not 0 <= axis < x.ndim:
            raise AxisError(f"{prim.name}: axis {axis} is out of bounds for array of shape {x.shape}")
        return ShapedArray(x.shape, x.dtype, x.weak_type)

    return rule


for _p in CUMULATIVE:
    def_shape(_p)(_cumulative_shape(_p))


@def_shape(sort_p)
def _sort_shape(*avals, dimension, is_stable, num_keys):
    if not avals:
        raise ShapeError("sort requires at least one operand")
    if not 1 <= num_keys <= len(avals):
        raise ArgumentValueError(f"sort: num_keys={num_keys} must be between 1 and the number of operands "
                                 f"({len(avals)})")
    if any(a.shape != avals[0].shape for a in avals[1:]):
        shapes = " ".join(str(a.shape) for a in avals)
        raise ShapeError(f"Arguments to sort must have equal shapes, got: {shapes}")
    if not 0 <= dimension < avals[0].ndim:
        raise AxisError(f"sort: dimension {dimension} is out of bounds for operands of shape {avals[0].shape}")
    return tuple(ShapedArray(a.shape, a.dtype, a.weak_type) for a in avals)


# --- numpy references -----------------------------------------------------------------------------

_ACCUMULATE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum, "logaddexp": np.logaddexp}


def cumulative_reference(combine: str, x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    """The running `combine` of `x` along `axis`; float16 sums and products run in float32 and are
    rounded at each output, as ember's reductions accumulate them. Signed zeros come out as JAX's: a
    float sum starts from +0.0 (XLA's windowed sums fold in their initial value: a sum of -0.0s is
    +0.0), and a running max/min orders -0.0 below 0.0."""
    wide = np.float32 if x.dtype == np.float16 and combine in ("add", "mul") else x.dtype
    if reverse:
        x = np.flip(x, axis)
    out = _ACCUMULATE[combine].accumulate(x, axis=axis, dtype=wide)
    if combine == "add" and x.dtype.kind == "f":
        out = out + np.zeros((), wide)
    if combine in ("max", "min") and x.dtype.kind == "f":
        out = _ordered_zeros(combine, x, out, axis)
    out = out.astype(x.dtype, copy=False)
    return np.ascontiguousarray(np.flip(out, axis) if reverse else out)


def _ordered_zeros(combine: str, x: np.ndarray, out: np.ndarray, axis: int) -> np.ndarray:
    """A running max (min) whose zeros order -0.0 below 0.0, as JAX's (NumPy's maximum keeps either):
    a zero result is 0.0 (-0.0) where the prefix holds a 0.0 (-0.0)."""
    zero = out == 0
    if not zero.any():
        return out
    wanted = (x == 0) & (np.signbit(x) == (combine == "min"))
    seen = np.logical_or.accumulate(wanted, axis=axis)
    signed = np.where(seen == (combine == "min"), -np.zeros((), out.dtype), np.zeros((), out.dtype))
    return np.where(zero, signed, out)


def _cumulative_impl(combine: str):
    def impl(x, *, axis, reverse):
        return cumulative_reference(combine, np.asarray(x), axis, reverse)

    return impl


for _p, _c in CUMULATIVE.items():
    def_impl(_p)(_cumulative_impl(_c))


def sort_keys(x: np.ndarray) -> np.ndarray:
    """`x` as a NumPy sort key in JAX's order: zeros of both signs one value, every NaN a positive
    NaN (NumPy sorts those last)."""
    if x.dtype.kind != "f":
        return x
    return np.where(np.isnan(x), np.array(np.nan, x.dtype), np.where(x == 0, np.zeros((), x.dtype), x))


def sort_permutation(keys: Sequence[np.ndarray], dimension: int) -> np.ndarray:
    """Where each sorted element comes from along `dimension`: a stable lexicographic sort by `keys`,
    the first most significant."""
    moved = [np.moveaxis(sort_keys(k), dimension, -1) for k in keys]
    return np.moveaxis(np.lexsort(moved[::-1], axis=-1), -1, dimension)


@def_impl(sort_p)
def _sort_impl(*operands, dimension, is_stable, num_keys):
    operands = [np.asarray(x) for x in operands]
    perm = sort_permutation(operands[:num_keys], dimension)
    return tuple(np.take_along_axis(x, perm, dimension) for x in operands)


# --- VJPs -----------------------------------------------------------------------------------------

@def_vjp(cumsum_p)
def _cumsum_vjp(ct, x, *, out, active, axis, reverse):
    return (cumsum(ct, axis, not reverse) if active[0] else None,)


def _mul_vjp(ct, a, b, out):
    return P.mul(ct, b), P.mul(ct, a)


def _balanced(x, z, y):
    """JAX's share of a max/min's cotangent for operand x of result z (y the other operand): 1 where x
    alone is z, 0.5 where both are, 0 where x is not."""
    one, zero, two = (np.array(v, z.dtype)[()] for v in (1, 0, 2))
    full = lambda v: P.full(shape_of(z), v, z.dtype)  # noqa: E731
    return P.div(P.select(P.eq(x, z), full(one), full(zero)), P.select(P.eq(y, z), full(two), full(one)))


def _extremum_vjp(ct, a, b, out):
    return P.mul(ct, _balanced(a, out, b)), P.mul(ct, _balanced(b, out, a))


def _logaddexp_vjp(ct, a, b, out):
    return vjp_rules[P.logaddexp_p](ct, a, b, out=out, active=(True, True))


_COMBINE = {"mul": (P.mul, _mul_vjp), "max": (P.maximum, _extremum_vjp), "min": (P.minimum, _extremum_vjp),
            "logaddexp": (P.logaddexp, _logaddexp_vjp)}


def _take(x, axis: int, start: int, stop: int, stride: int = 1):
    """x[start:stop:stride] along `axis`."""
    shape = shape_of(x)
    lo, hi, st = [0] * len(shape), list(shape), [1] * len(shape)
    lo[axis], hi[axis], st[axis] = start, stop, stride
    return P.slice(x, lo, hi, st)


def _untake(ct, axis: int, n: int, start: int, stride: int = 1):
    """The cotangent of `_take(x, axis, start, ., stride)` for an x of length n along `axis`: ct
    spread back to its positions, zeros between (a pad)."""
    shape = shape_of(ct)
    m = shape[axis]
    if m == 0:
        return P.full(shape[:axis] + (n,) + shape[axis + 1:], 0, ct.dtype)
    config = [(0, 0, 0)] * len(shape)
    config[axis] = (start, n - start - (m - 1) * stride - 1, stride - 1)
    return P.pad(ct, np.zeros((), ct.dtype)[()], config)


def _scan_levels(combine, x, axis: int) -> list:
    """JAX's associative scan of `x` along `axis`, level by level: per level (elements, the pairs
    combined, the scan of those), the last level's elements being its own scan (fewer than two)."""
    levels = []
    e = x
    while shape_of(e)[axis] >= 2:
        n = shape_of(e)[axis]
        pairs = combine(_take(e, axis, 0, n - 1, 2), _take(e, axis, 1, n, 2))
        levels.append([e, pairs, None])
        e = pairs
    scanned = e
    for level in reversed(levels):
        level[2] = scanned
        scanned = _interleaved_scan(combine, level[0], scanned, axis)
    return levels


def _evens(e, odd, axis: int):
    """The operands of the even positions' combines: the odd positions' scan before them and e[2::2]."""
    n = shape_of(e)[axis]
    left = _take(odd, axis, 0, shape_of(odd)[axis] - 1) if n % 2 == 0 else odd
    return left, _take(e, axis, 2, n, 2)


def _interleaved_scan(combine, e, odd, axis: int):
    """The scan of e from the scan `odd` of its pairs: even positions combine the scan before them with
    their element (the first is its own), interleaved with `odd`."""
    n = shape_of(e)[axis]
    even = P.concatenate([_take(e, axis, 0, 1), combine(*_evens(e, odd, axis))], axis)
    return P.add(_untake(even, axis, n, 0, 2), _untake(odd, axis, n, 1, 2))


def _scan_vjp(combine_name: str, ct, x, axis: int):
    """The cotangent of x for `ct` of JAX's associative scan of x with `combine_name`, by transposing
    each level of the scan in reverse."""
    combine, combine_vjp = _COMBINE[combine_name]
    levels = _scan_levels(combine, x, axis)
    ct_scan = ct
    ct_level = []
    for e, _, odd in levels:
        n = shape_of(e)[axis]
        ct_even, ct_odd = _take(ct_scan, axis, 0, n, 2), _take(ct_scan, axis, 1, n, 2)
        left, right = _evens(e, odd, axis)
        ct_left, ct_right = combine_vjp(_take(ct_even, axis, 1, shape_of(ct_even)[axis]), left, right,
                                        combine(left, right))
        ct_e = P.add(_untake(_take(ct_even, axis, 0, 1), axis, n, 0), _untake(ct_right, axis, n, 2, 2))
        ct_odd = P.add(ct_odd, ct_left if n % 2 else _untake(ct_left, axis, shape_of(odd)[axis], 0))
        ct_level.append(ct_e)
        ct_scan = ct_odd  # the cotangent of this level's pairs' scan: the next level's
    for (e, pairs, _), ct_e in zip(reversed(levels), reversed(ct_level)):
        n = shape_of(e)[axis]
        ct_a, ct_b = combine_vjp(ct_scan, _take(e, axis, 0, n - 1, 2), _take(e, axis, 1, n, 2), pairs)
        ct_scan = P.add(ct_e, P.add(_untake(ct_a, axis, n, 0, 2), _untake(ct_b, axis, n, 1, 2)))
    return ct_scan


def _associative_vjp(prim):
    def rule(ct, x, *, out, active, axis, reverse):
        if not active[0]:
            return (None,)
        if reverse:
            return (P.rev(_scan_vjp(CUMULATIVE[prim], P.rev(ct, (axis,)), P.rev(x, (axis,)), axis), (axis,)),)
        return (_scan_vjp(CUMULATIVE[prim], ct, x, axis),)

    return rule


for _p in (cumprod_p, cummax_p, cummin_p, cumlogsumexp_p):
    def_vjp(_p)(_associative_vjp(_p))


def _index_dtype(n: int) -> np.dtype:
    return np.dtype(np.int32 if n < 2**31 - 1 else np.int64)


def _permutation(operands, dimension: int, num_keys: int, is_stable: bool):
    """The sorted operands and where each sorted element came from along `dimension`."""
    shape = shape_of(operands[0])
    iota = P.iota(_index_dtype(shape[dimension]), shape, dimension)
    out = sort_p.bind(*operands, iota, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    return out[:-1], out[-1]


def _rows(x, dimension: int):
    """x with `dimension` last: the layout of a gather/scatter of rows."""
    return moveaxis(x, dimension, len(shape_of(x)) - 1)


def _along(perm, dimension: int):
    """The permutation as index vectors of length 1 (batch axes: all but `dimension`)."""
    rows = _rows(perm, dimension)
    return P.reshape(rows, shape_of(rows) + (1,)), len(shape_of(rows)) - 1


@def_vjp(sort_p)
def _sort_vjp(ct, *operands, out, active, dimension, is_stable, num_keys):
    if not any(a and c is not None for a, c in zip(active, ct)):
        return (None,) * len(operands)
    _, perm = _permutation(operands, dimension, num_keys, is_stable)
    idx, nb = _along(perm, dimension)
    cts = []
    for c, a in zip(ct, active):
        if not a or c is None:
            cts.append(None)
            continue
        rows = _rows(c, dimension)
        back = P.scatter_add(P.full(shape_of(rows), 0, c.dtype), idx, rows, nb)
        cts.append(moveaxis(back, len(shape_of(rows)) - 1, dimension))
    return tuple(cts)


@def_jvp(sort_p)
def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    if all(t is None for t in tangents):
        return list(sort_p.bind(*primals, dimension=dimension, is_stable=is_stable, num_keys=num_keys)), \
            [None] * len(primals)
    outs, perm = _permutation(primals, dimension, num_keys, is_stable)
    idx, nb = _along(perm, dimension)
    last = len(shape_of(perm)) - 1
    out_tans = [None if t is None else moveaxis(P.gather(_rows(t, dimension), idx, nb), last, dimension)
                for t in tangents]
    return list(outs), out_tans


# --- batching -------------------------------------------------------------------------------------

def _cumulative_batch(prim):
    def rule(args, dims, *, axis, reverse):
        (x,), (d,) = args, dims
        return prim.bind(x, axis=axis if axis < d else axis + 1, reverse=reverse), d

    return rule


for _p in CUMULATIVE:
    def_batch(_p)(_cumulative_batch(_p))


@def_batch(sort_p)
def _sort_batch(args, dims, *, dimension, is_stable, num_keys):
    size = batch_size(args, dims)
    moved = [bdim_at_front(a, d, size) for a, d in zip(args, dims)]
    out = sort_p.bind(*moved, dimension=dimension + 1, is_stable=is_stable, num_keys=num_keys)
    return list(out), [0] * len(out)
