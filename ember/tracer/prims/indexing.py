"""Indexing primitives: gather, and the scatters scatter (set), scatter_add, scatter_mul, scatter_min and
scatter_max, sharing one index layout.

With `batch_dims = b`, the operand is B + I + S (b batch axes, k indexed axes, slice axes) and the
indices are B + N + (k,): `gather` returns B + N + S, with
``out[b, n, s] = operand[b, indices[b, n, :], s]``; the scatters write `updates` of shape B + N + S
into a copy of the operand, repeated index vectors combining in update order (set: the last wins; add, mul,
min, max: NumPy's ufunc.at, so min and max propagate NaN, as XLA's do). As in XLA (and so JAX), an
out-of-range index vector is clamped into range by gather, and its update is dropped by the scatters
(ember.numpy checks concrete indices and wraps negative ones before they get here). So the gradient of a
clamped read is dropped too, as in JAX.

gather pulls back as a `ScatterCotangent`: autodiff scatter-adds it into the operand's accumulated
cotangent, so indexing a large array costs only the touched region (plus the gradient itself).
"""

from __future__ import annotations

import contextlib

import numpy as np

from ember.errors import DTypeError, ShapeError, user_location
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.primitive import LazyCotangent, Primitive, def_batch, def_impl, def_shape, def_vjp
from ember.tracer.prims.util import batch_size, bdim_at_front, moveaxis, shape_of

gather_p = Primitive("gather", kind="indexing", expensive=True)
scatter_add_p = Primitive("scatter_add", kind="indexing", expensive=False)
scatter_p = Primitive("scatter", kind="indexing", expensive=False)
scatter_mul_p = Primitive("scatter_mul", kind="indexing", expensive=False)
scatter_min_p = Primitive("scatter_min", kind="indexing", expensive=False)
scatter_max_p = Primitive("scatter_max", kind="indexing", expensive=False)


def gather(operand, indices, batch_dims: int = 0):
    return gather_p.bind(operand, indices, batch_dims=int(batch_dims))


def scatter_add(operand, indices, updates, batch_dims: int = 0):
    return scatter_add_p.bind(operand, indices, updates, batch_dims=int(batch_dims))


def scatter(operand, indices, updates, batch_dims: int = 0):
    return scatter_p.bind(operand, indices, updates, batch_dims=int(batch_dims))


def scatter_mul(operand, indices, updates, batch_dims: int = 0):
    """operand with each in-range index vector's target multiplied by its updates (repeats multiply)."""
    return scatter_mul_p.bind(operand, indices, updates, batch_dims=int(batch_dims))


def scatter_min(operand, indices, updates, batch_dims: int = 0):
    """operand with each in-range index vector's target lowered to its updates where they are smaller."""
    return scatter_min_p.bind(operand, indices, updates, batch_dims=int(batch_dims))


def scatter_max(operand, indices, updates, batch_dims: int = 0):
    """operand with each in-range index vector's target raised to its updates where they are larger."""
    return scatter_max_p.bind(operand, indices, updates, batch_dims=int(batch_dims))


class ScatterCotangent(LazyCotangent):
    """A cotangent that is zero except where `indices` point: added to a dense total by scatter_add."""

    __slots__ = ("indices", "updates", "batch_dims")

    def __init__(self, indices, updates, batch_dims: int):
        self.indices, self.updates, self.batch_dims = indices, updates, batch_dims

    def add_to(self, dense, aval: ShapedArray):
        base = dense if dense is not None else P.full(aval.shape, 0, aval.dtype)
        return scatter_add(base, self.indices, self.updates, self.batch_dims)


# --- shape rules ----------------------------------------------------------------------------------

def _gather_shape_of(name: str, operand: ShapedArray, indices: ShapedArray, nb: int):
    if indices.dtype.kind not in "iu":
        raise DTypeError(f"{name}: indices must be integers, got {indices.dtype.name}")
    if indices.ndim < nb + 1:
        raise ShapeError(f"{name}: indices of shape {indices.shape} need at least {nb + 1} axes "
                         f"(batch_dims={nb}, then the index vectors)")
    k = indices.shape[-1]
    if operand.ndim < nb + k:
        raise ShapeError(f"{name}: index vectors of length {k} index more axes than the operand "
                         f"{operand.shape} has after its {nb} batch axes")
    if operand.shape[:nb] != indices.shape[:nb]:
        raise ShapeError(f"{name}: batch axes differ: operand {operand.shape[:nb]} vs indices "
                         f"{indices.shape[:nb]}")
    n_shape = indices.shape[nb:-1]
    if any(operand.shape[nb + j] == 0 for j in range(k)) and 0 not in n_shape:
        raise ShapeError(f"{name}: cannot index into an axis of size 0 (operand {operand.shape})")
    return operand.shape[:nb] + n_shape + operand.shape[nb + k:]


@def_shape(gather_p)
def _gather_shape(operand, indices, *, batch_dims):
    return ShapedArray(_gather_shape_of("gather", operand, indices, batch_dims), operand.dtype,
                       operand.weak_type)


def _scatter_shape(name):
    def rule(operand, indices, updates, *, batch_dims):
        expected = _gather_shape_of(name, operand, indices, batch_dims)
        if updates.shape != expected:
            raise ShapeError(f"{name}: updates of shape {updates.shape} do not fit; indices "
                             f"{indices.shape} into operand {operand.shape} take updates of shape "
                             f"{expected}")
        if updates.dtype != operand.dtype:
            raise DTypeError(f"{name}: updates dtype {updates.dtype.name} differs from the operand's "
                             f"{operand.dtype.name}")
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type)

    return rule


for _p in (scatter_add_p, scatter_p, scatter_mul_p, scatter_min_p, scatter_max_p):
    def_shape(_p)(_scatter_shape(_p.name))


# --- numpy references -----------------------------------------------------------------------------

def _index_tuple(op_shape, indices, nb, clip: bool = True):
    """NumPy advanced-index tuple selecting B + N positions (indices clamped into range, if `clip`)."""
    lead = indices.shape[:-1]
    parts = []
    for j in range(nb):
        shape = [1] * len(lead)
        shape[j] = op_shape[j]
        parts.append(np.broadcast_to(np.arange(op_shape[j]).reshape(shape), lead))
    for j in range(indices.shape[-1]):
        parts.append(np.clip(indices[..., j], 0, max(op_shape[nb + j] - 1, 0)) if clip else indices[..., j])
    return tuple(parts)


def _scatter_targets(op_shape, indices, updates, nb):
    """The index tuple and updates of a scatter, less the updates whose index vector is out of range."""
    idx = _index_tuple(op_shape, indices, nb, clip=False)
    ok = np.ones(indices.shape[:-1], bool)
    for j in range(indices.shape[-1]):
        ok &= (indices[..., j] >= 0) & (indices[..., j] < op_shape[nb + j])
    if ok.all():
        return idx, updates
    return tuple(p[ok] for p in idx), updates[ok]


@def_impl(gather_p)
def _gather_impl(operand, indices, *, batch_dims):
    idx = _index_tuple(operand.shape, indices, batch_dims)
    if not idx:
        lead = indices.shape[:-1]
        return np.broadcast_to(operand, lead + operand.shape).copy()
    out = operand[idx]
    # Scalar indices are NumPy basic indexing, whose result is a view: a gather's result is its own.
    return out.copy() if np.may_share_memory(out, operand) else out


def _stacked(indices, operand) -> tuple:
    """The updates of index vectors of length 0 as one stack of operand-shaped slices (explicit
    count: -1 cannot be inferred when the operand is empty)."""
    return (int(np.prod(indices.shape[:-1], dtype=np.int64)),) + operand.shape


@def_impl(scatter_add_p)
def _scatter_add_impl(operand, indices, updates, *, batch_dims):
    out = np.array(operand, copy=True)
    idx, updates = _scatter_targets(operand.shape, indices, updates, batch_dims)
    if not idx:
        out += updates.reshape(_stacked(indices, operand)).sum(0, dtype=operand.dtype)
    else:
        np.add.at(out, idx, updates)
    return out


def _ufunc_at_impl(ufunc: np.ufunc):
    """The reference of a scatter combining each update into its target in update order by `ufunc`
    (NumPy's ufunc.at); index vectors of length 0 (no batch axes) each update the whole operand.
    ufunc.at flags a NaN compared by minimum/maximum as invalid where the ufunc itself does not: the
    NaN is a value here, so that flag is not raised."""
    extremum = ufunc in (np.minimum, np.maximum)

    def impl(operand, indices, updates, *, batch_dims):
        out = np.array(operand, copy=True)
        idx, updates = _scatter_targets(operand.shape, indices, updates, batch_dims)
        with np.errstate(invalid="ignore") if extremum else contextlib.nullcontext():
            if not idx:
                flat = updates.reshape(_stacked(indices, operand))
                ufunc.at(out.reshape((1,) + out.shape), np.zeros(len(flat), np.intp), flat)
            else:
                ufunc.at(out, idx, updates)
        return out

    return impl


def_impl(scatter_mul_p)(_ufunc_at_impl(np.multiply))
def_impl(scatter_min_p)(_ufunc_at_impl(np.minimum))
def_impl(scatter_max_p)(_ufunc_at_impl(np.maximum))


@def_impl(scatter_p)
def _scatter_impl(operand, indices, updates, *, batch_dims):
    out = np.array(operand, copy=True)
    idx, updates = _scatter_targets(operand.shape, indices, updates, batch_dims)
    if not idx:
        flat = updates.reshape(_stacked(indices, operand))
        if len(flat):
            out[...] = flat[-1]
    else:
        out[idx] = updates
    return out


# --- VJPs -----------------------------------------------------------------------------------------

@def_vjp(gather_p)
def _gather_vjp(ct, operand, indices, *, out, active, batch_dims):
    return (ScatterCotangent(indices, ct, batch_dims) if active[0] else None, None)


@def_vjp(scatter_add_p)
def _scatter_add_vjp(ct, operand, indices, updates, *, out, active, batch_dims):
    if not active[2]:
        return (ct if active[0] else None, None, None)
    ct_upd = gather(ct, indices, batch_dims)
    landed = _in_range(indices, shape_of(operand), batch_dims, shape_of(ct_upd))
    return (ct if active[0] else None, None, P.select(landed, ct_upd, P.full(shape_of(ct_upd), 0, ct.dtype)))


def _in_range(indices, op_shape, nb: int, shape):
    """True (broadcast to `shape`, the updates' shape) where an index vector is in range: its update
    landed, rather than being dropped, so it gets a gradient."""
    lead = shape_of(indices)[:-1]
    ok = None
    for j in range(shape_of(indices)[-1]):
        col = P.reshape(P.slice(indices, (0,) * len(lead) + (j,), lead + (j + 1,)), lead)
        inside = P.and_(P.ge(col, 0), P.lt(col, op_shape[nb + j]))
        ok = inside if ok is None else P.and_(ok, inside)
    if ok is None:
        return P.full(shape, True, np.bool_)
    return P.broadcast_in_dim(ok, tuple(shape), tuple(range(len(lead))))


@def_vjp(scatter_p)
def _scatter_vjp(ct, operand, indices, updates, *, out, active, batch_dims):
    ct_op = scatter(ct, indices, P.full(shape_of(updates), 0, ct.dtype), batch_dims) if active[0] else None
    if not active[2]:
        return (ct_op, None, None)
    ct_upd = gather(ct, indices, batch_dims)
    won = _winners(operand, indices, updates, batch_dims)
    return (ct_op, None, P.select(won, ct_upd, P.full(shape_of(ct_upd), 0, ct.dtype)))


@def_vjp(scatter_mul_p)
def _scatter_mul_vjp(ct, operand, indices, updates, *, out, active, batch_dims):
    """The operand's cotangent is ct times the product of the updates that landed on it: ct scattered by
    the same products. The updates' cotangent needs the product of the other updates at a repeated
    index; JAX gives it only for unique indices and raises otherwise, and so does Ember."""
    if active[2]:
        raise NotImplementedError(
            "scatter_mul gradients with respect to the updates are only implemented for indices that cannot "
            "repeat, as in JAX (`unique_indices=True`): use x.at[idx].multiply(v, unique_indices=True) "
            f"(at {user_location()})")
    return (scatter_mul(ct, indices, updates, batch_dims), None, None)


def _extremal_vjp(ct, operand, indices, updates, *, out, active, batch_dims):
    """scatter_min/max, as JAX's `_scatter_extremal_jvp` transposed: at a target some update touched,
    ct is split evenly among the contributors equal to the result (the operand's element and each
    update that equals it); elsewhere ct passes to the operand. The shares are exact (ct / n, not ct
    less n pieces)."""
    dt, o_shape, u_shape = ct.dtype, shape_of(operand), shape_of(updates)
    u_one, u_zero, o_one = P.full(u_shape, 1, dt), P.full(u_shape, 0, dt), P.full(o_shape, 1, dt)
    won = P.eq(updates, gather(out, indices, batch_dims))
    winners = scatter_add(P.full(o_shape, 0, dt), indices, P.select(won, u_one, u_zero), batch_dims)
    kept = P.eq(operand, out)
    # 1 / the number of contributors (where there is none, a NaN result, the share is never used)
    share = P.div(o_one, P.maximum(P.select(kept, P.add(winners, o_one), winners), o_one))
    ct_op = None
    if active[0]:
        touched = scatter(P.full(o_shape, False, np.bool_), indices, P.full(u_shape, True, np.bool_), batch_dims)
        ct_op = P.select(touched, P.mul(ct, P.select(kept, share, P.full(o_shape, 0, dt))), ct)
    if not active[2]:
        return (ct_op, None, None)
    landed = P.and_(won, _in_range(indices, o_shape, batch_dims, u_shape))
    ct_upd = P.mul(gather(ct, indices, batch_dims), P.select(landed, gather(share, indices, batch_dims), u_zero))
    return (ct_op, None, ct_upd)


def_vjp(scatter_min_p)(_extremal_vjp)
def_vjp(scatter_max_p)(_extremal_vjp)


def _winners(operand, indices, updates, batch_dims):
    """True where an update is the one that lands (of duplicates, only the winner reaches the output, so
    only it gets a gradient, as in JAX): scatter every update's id, read back which id each target kept."""
    shape = shape_of(updates)
    n = int(np.prod(shape))
    itype = np.int32 if n < 2**31 - 1 else np.int64
    ids = P.reshape(P.iota(itype, (n,), 0), shape)
    kept = scatter(P.full(shape_of(operand), -1, itype), indices, ids, batch_dims)
    return P.eq(gather(kept, indices, batch_dims), ids)


# --- batching -------------------------------------------------------------------------------------

@def_batch(gather_p)
def _gather_batch(args, dims, *, batch_dims):
    (operand, indices), (do, di) = args, dims
    if do is not None and di is not None:
        return gather(moveaxis(operand, do, 0), moveaxis(indices, di, 0), batch_dims + 1), 0
    if do is not None:  # the batch axis becomes a trailing slice axis of the operand
        operand = moveaxis(operand, do, len(shape_of(operand)) - 1)
        out = gather(operand, indices, batch_dims)
        return out, len(shape_of(out)) - 1
    indices = moveaxis(indices, di, batch_dims)  # ... or a leading axis of the index batch N
    return gather(operand, indices, batch_dims), batch_dims


def _scatter_batch(wrapper):
    def rule(args, dims, *, batch_dims):
        size = batch_size(args, dims)
        operand, indices, updates = (bdim_at_front(a, d, size) for a, d in zip(args, dims))
        return wrapper(operand, indices, updates, batch_dims + 1), 0

    return rule


def_batch(scatter_add_p)(_scatter_batch(scatter_add))
def_batch(scatter_p)(_scatter_batch(scatter))
def_batch(scatter_mul_p)(_scatter_batch(scatter_mul))
def_batch(scatter_min_p)(_scatter_batch(scatter_min))
def_batch(scatter_max_p)(_scatter_batch(scatter_max))
