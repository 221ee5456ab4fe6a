"""Indexing primitives (gather, scatter_add, scatter): numpy reference (explicit loops over the index
vectors) and shape/dtype rule, rule errors, VJPs against finite differences (repeated indices for
gather and scatter_add, batch_dims 0 and 1), batching rules for every batched/unbatched combination.
"""

import itertools

import numpy as np
import pytest

import ember
from ember.errors import DTypeError, ShapeError
from ember.tracer import prims as P
from tests.helpers import (
    axes_features,
    check_grads,
    compiled_cover,
    loop_vmap,
    prim_names,
    raises_naming,
    run,
    vmap_checker,
)

F32, F64, I32, I64, U8, BOOL = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint8, bool))
THIS_FILE = "test_prims_indexing.py"


def _positions(op_shape, indices, nb):
    """(b + n, operand position) for every index vector, out-of-range entries clamped."""
    k = indices.shape[-1]
    for bn in np.ndindex(*indices.shape[:-1]):
        vec = tuple(min(max(int(indices[bn + (j,)]), 0), op_shape[nb + j] - 1) for j in range(k))
        yield bn, bn[:nb] + vec


def ref_gather(op, indices, nb):
    k = indices.shape[-1]
    out = np.empty(indices.shape[:-1] + op.shape[nb + k:], op.dtype)
    for bn, pos in _positions(op.shape, indices, nb):
        out[bn] = op[pos]
    return out


def ref_scatter_add(op, indices, updates, nb):
    out = op.copy()
    for bn, pos in _positions(op.shape, indices, nb):
        out[pos] = out[pos] + updates[bn] if op.dtype != BOOL else out[pos] | updates[bn]
    return out


def ref_scatter(op, indices, updates, nb):
    out = op.copy()
    for bn, pos in _positions(op.shape, indices, nb):
        out[pos] = updates[bn]
    return out


def _unique_indices(rng, op_shape, lead, nb, k):
    """Index vectors of shape lead + (k,), distinct within each batch entry (scatter's writes)."""
    idx = np.empty(lead + (k,), np.int64)
    space = list(itertools.product(*(range(op_shape[nb + j]) for j in range(k))))
    for b in np.ndindex(*lead[:nb]):
        n_shape = lead[nb:]
        picks = rng.permutation(len(space))[:int(np.prod(n_shape))]
        idx[b] = np.array([space[p] for p in picks], np.int64).reshape(n_shape + (k,))
    return idx


def _indices(rng, op_shape, lead, nb, k, repeated):
    if not repeated:
        return _unique_indices(rng, op_shape, lead, nb, k)
    hi = [op_shape[nb + j] for j in range(k)]
    return np.stack([rng.integers(0, h, lead) for h in hi], -1) if k else np.zeros(lead + (0,), np.int64)


# (operand shape, indices lead shape B + N, k, batch_dims, repeated indices allowed)
CASES = [
    ((5,), (3,), 1, 0, True),
    ((5, 4), (2, 3), 1, 0, True),
    ((5, 4), (3,), 2, 0, True),
    ((4, 5, 2), (6,), 1, 0, True),
    ((3, 5, 2), (3, 4), 1, 1, True),
    ((3, 5), (3,), 1, 1, True),
    ((2, 3, 4, 5), (2, 6), 2, 1, True),
    ((2, 3), (4,), 0, 0, True),
    ((5,), (0,), 1, 0, True),
    ((0, 3), (0,), 1, 0, True),
    ((5, 3), (), 1, 0, False),
    ((4, 3), (2,), 1, 0, False),
    ((3, 4, 2), (3, 2), 1, 1, False),
]
IDS = [f"op{c[0]}-lead{c[1]}-k{c[2]}-b{c[3]}" for c in CASES]


def _fits_unique(case):
    op_shape, lead, k, nb, _ = case
    return int(np.prod(lead[nb:])) <= int(np.prod(op_shape[nb:nb + k]))


# scatter (set) is tested with distinct index vectors only: repeated writes have no defined order
UNIQUE = [(c, i) for c, i in zip(CASES, IDS) if _fits_unique(c)]


def _case_args(rng, op_shape, lead, k, nb, repeated, dtype=F64, index_dtype=I32):
    op = rng.normal(size=op_shape).astype(dtype) if dtype != BOOL else rng.random(op_shape) < 0.5
    indices = _indices(rng, op_shape, lead, nb, k, repeated).astype(index_dtype)
    upd_shape = lead + op_shape[nb + k:]
    upd = rng.normal(size=upd_shape).astype(dtype) if dtype != BOOL else rng.random(upd_shape) < 0.5
    return op, indices, upd


@pytest.mark.parametrize("op_shape,lead,k,nb,repeated", CASES, ids=IDS)
@pytest.mark.parametrize("dtype,index_dtype", [(F32, I32), (F64, I64), (I32, U8), (BOOL, I32)], ids=str)
def test_indexing_reference(op_shape, lead, k, nb, repeated, dtype, index_dtype, rng):
    op, idx, upd = _case_args(rng, op_shape, lead, k, nb, repeated, dtype, index_dtype)
    checks = [("gather", lambda a, i: P.gather(a, i, nb), (op, idx), ref_gather(op, idx, nb)),
              ("scatter_add", lambda a, i, u: P.scatter_add(a, i, u, nb), (op, idx, upd),
               ref_scatter_add(op, idx, upd, nb))]
    if not repeated:
        checks.append(("scatter", lambda a, i, u: P.scatter(a, i, u, nb), (op, idx, upd),
                       ref_scatter(op, idx, upd, nb)))
    for name, fn, args, want in checks:
        for got in (run(fn, *args), fn(*args)):
            assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)
        assert name in prim_names(fn, *args)
    assert not np.shares_memory(P.scatter_add(op, idx, upd, nb), op)


def test_out_of_range_indices_clamp_in_gather_and_drop_in_scatters():
    """XLA's (and so JAX's) rule: a read clamps into range, an out-of-range write is dropped."""
    op = np.arange(5.0)
    idx = np.array([[-2], [7], [4], [0]])
    np.testing.assert_array_equal(run(lambda a, i: P.gather(a, i), op, idx), [0.0, 4.0, 4.0, 0.0])
    np.testing.assert_array_equal(run(lambda a, i, u: P.scatter_add(a, i, u), op, idx, np.ones(4)),
                                  [1.0, 1.0, 2.0, 3.0, 5.0])
    np.testing.assert_array_equal(run(lambda a, i, u: P.scatter(a, i, u), op, idx, -np.ones(4)),
                                  [-1.0, 1.0, 2.0, 3.0, -1.0])
    idx2 = np.array([[[0, 5], [1, 1]]])  # a 2-D index vector out of range on its second axis
    got = run(lambda a, i, u: P.scatter(a, i, u), np.zeros((2, 3)), idx2, np.ones((1, 2)))
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 1, 0]])


def test_dropped_and_overwritten_updates_get_no_gradient():
    op, w = np.arange(4.0), np.array([1.0, 2.0, 3.0, 4.0])
    idx = np.array([[1], [1], [9], [-1], [2]])
    for prim, want in ((P.scatter, [0, 2, 0, 0, 3]), (P.scatter_add, [2, 2, 0, 0, 3])):
        g = ember.grad(lambda u, a, i, prim=prim: P.reduce_sum(P.mul(prim(a, i, u), w), (0,)))
        np.testing.assert_array_equal(g(np.ones(5), op, idx), want)
    g = ember.grad(lambda a, i: P.reduce_sum(P.gather(a, i), (0,)))  # clamped reads: no gradient
    np.testing.assert_array_equal(g(op, idx), [0, 2, 1, 0])


def test_scatter_last_write_wins_for_repeated_indices():
    got = run(lambda a, i, u: P.scatter(a, i, u), np.zeros(3), np.array([[1], [1]]), np.array([5.0, 6.0]))
    np.testing.assert_array_equal(got, [0.0, 6.0, 0.0])


# --- rule errors ----------------------------------------------------------------------------------

def _raises(exc, fn, args, words):
    return raises_naming(exc, ember.jit(fn), *args, words=words, location=THIS_FILE)


Z = np.zeros
ERRORS = [
    ("gather", DTypeError, lambda a, i: P.gather(a, i), (Z(5), Z((2, 1), F32)), ("integers", "float32")),
    ("gather", ShapeError, lambda a, i: P.gather(a, i, 1), (Z((3, 5)), Z((3,), I32)), ("(3,)", "batch_dims=1")),
    ("gather", ShapeError, lambda a, i: P.gather(a, i), (Z(5), Z((3, 2), I32)), ("length 2", "(5,)")),
    ("gather", ShapeError, lambda a, i: P.gather(a, i, 1), (Z((3, 5)), Z((2, 1, 1), I32)), ("(3,)", "(2,)")),
    ("gather", ShapeError, lambda a, i: P.gather(a, i), (Z((0, 3)), Z((2, 1), I32)), ("size 0", "(0, 3)")),
    ("scatter_add", ShapeError, lambda a, i, u: P.scatter_add(a, i, u), (Z((5, 3)), Z((2, 1), I32), Z((2, 4))),
     ("(2, 4)", "(2, 3)", "(5, 3)")),
    ("scatter_add", DTypeError, lambda a, i, u: P.scatter_add(a, i, u), (Z(5), Z((2, 1), I32), Z(2, F32)),
     ("float32", "float64")),
    ("scatter_add", DTypeError, lambda a, i, u: P.scatter_add(a, i, u), (Z(5), Z((2, 1), F64), Z(2)), ("integers",)),
    ("scatter", ShapeError, lambda a, i, u: P.scatter(a, i, u, 1), (Z((3, 5)), Z((3, 2, 1), I32), Z((2, 3))),
     ("(2, 3)", "(3, 2)")),
    ("scatter", DTypeError, lambda a, i, u: P.scatter(a, i, u), (Z(5, I32), Z((2, 1), I32), Z(2)),
     ("float64", "int32")),
    ("scatter", ShapeError, lambda a, i, u: P.scatter(a, i, u), (Z(5), Z((2, 2), I32), Z(2)), ("length 2",)),
]


@pytest.mark.parametrize("name,exc,fn,args,words", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_indexing_rule_errors(name, exc, fn, args, words):
    _raises(exc, fn, args, (name,) + words)


# --- VJP rules ------------------------------------------------------------------------------------

def _total(x, w):
    return P.reduce_sum(P.mul(x, w), tuple(range(w.ndim)))


@pytest.mark.parametrize("op_shape,lead,k,nb,repeated", CASES, ids=IDS)
def test_gather_vjp(op_shape, lead, k, nb, repeated, rng):
    op, idx, _ = _case_args(rng, op_shape, lead, k, nb, repeated)
    w = rng.normal(size=ref_gather(op, idx, nb).shape)
    (g,) = check_grads(lambda a: _total(P.gather(a, idx, nb), w), (op,))
    want = np.zeros_like(op)
    for bn, pos in _positions(op.shape, idx, nb):
        want[pos] += w[bn]
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op_shape,lead,k,nb,repeated", CASES, ids=IDS)
def test_scatter_add_vjp(op_shape, lead, k, nb, repeated, rng):
    op, idx, upd = _case_args(rng, op_shape, lead, k, nb, repeated)
    w = rng.normal(size=op_shape)
    go, gu = check_grads(lambda a, u: _total(P.scatter_add(a, idx, u, nb), w), (op, upd), argnums=(0, 1))
    np.testing.assert_array_equal(go, w)
    np.testing.assert_array_equal(gu, ref_gather(w, idx, nb))
    (gu_only,) = check_grads(lambda u: _total(P.scatter_add(op, idx, u, nb), w), (upd,))
    np.testing.assert_array_equal(gu_only, gu)


@pytest.mark.parametrize("op_shape,lead,k,nb,repeated", [c for c, _ in UNIQUE], ids=[i for _, i in UNIQUE])
def test_scatter_vjp(op_shape, lead, k, nb, repeated, rng):
    op, idx, upd = _case_args(rng, op_shape, lead, k, nb, repeated=False)
    w = rng.normal(size=op_shape)
    go, gu = check_grads(lambda a, u: _total(P.scatter(a, idx, u, nb), w), (op, upd), argnums=(0, 1))
    written = ref_scatter(np.zeros(op_shape, bool), idx, np.ones(upd.shape, bool), nb)
    np.testing.assert_array_equal(go, np.where(written, 0.0, w))
    np.testing.assert_array_equal(gu, ref_gather(w, idx, nb))


def test_gather_vjp_is_a_scatter_into_the_operand(rng):
    op, idx = rng.normal(size=(1000, 3)), np.array([[3], [3], [998]])
    stage = ember.jit(ember.grad(lambda a: _total(P.gather(a, idx), np.ones((3, 3))))).lower(op).stage(
        "after autodiff")
    names = [n.prim.name for n in stage.graph.nodes]
    assert "scatter_add" in names and "dot_general" not in names


# --- batching rules -------------------------------------------------------------------------------

check_vmap = vmap_checker(tol=1e-12)


def _stack(rng, make, axis, size=3):
    """`size` independent draws of make(), stacked along `axis` (or a single draw for None)."""
    if axis is None:
        return make()
    return np.stack([make() for _ in range(size)], axis)


GATHER_AXES = [(0, 0), (1, 0), (-1, -1), (0, None), (1, None), (-1, None), (None, 0), (None, 1), (None, -1)]


@pytest.mark.parametrize("op_shape,lead,k,nb,repeated", CASES, ids=IDS)
def test_gather_batching(op_shape, lead, k, nb, repeated, rng):
    f = lambda a, i: P.gather(a, i, nb)  # noqa: E731
    out_rank = len(lead) + len(op_shape) - nb - k
    for ax_o, ax_i in compiled_cover(GATHER_AXES, axes_features):
        op = _stack(rng, lambda: rng.normal(size=op_shape), ax_o)
        idx = _stack(rng, lambda: _indices(rng, op_shape, lead, nb, k, repeated).astype(I32), ax_i)
        for out_axes in sorted({0, out_rank}):
            check_vmap(f, (ax_o, ax_i), (op, idx), out_axes)
    assert "gather" in prim_names(ember.vmap(f, (ax_o, ax_i)), op, idx)


SCATTER_AXES = [axes for axes in itertools.product((0, 1, None), repeat=3) if axes != (None, None, None)]


SCATTER_BATCH = [("scatter_add", c, i) for c, i in zip(CASES, IDS)] + [("scatter", c, i) for c, i in UNIQUE]


@pytest.mark.parametrize("name,case", [(n, c) for n, c, _ in SCATTER_BATCH],
                         ids=[f"{n}-{i}" for n, _, i in SCATTER_BATCH])
def test_scatter_batching(name, case, rng):
    op_shape, lead, k, nb, repeated = case
    wrapper = P.scatter_add if name == "scatter_add" else P.scatter
    f = lambda a, i, u: wrapper(a, i, u, nb)  # noqa: E731
    repeated = repeated and name == "scatter_add"
    upd_shape = lead + op_shape[nb + k:]
    configs = compiled_cover(SCATTER_AXES, axes_features)
    for n, axes in enumerate(configs):
        op = _stack(rng, lambda: rng.normal(size=op_shape), axes[0])
        idx = _stack(rng, lambda: _indices(rng, op_shape, lead, nb, k, repeated).astype(I32), axes[1])
        upd = _stack(rng, lambda: rng.normal(size=upd_shape), axes[2])
        check_vmap(f, axes, (op, idx, upd), 0)
        # the last output axis for a third of the combinations (all of a compiling backend's cover)
        if n % 3 == 0 or len(configs) < len(SCATTER_AXES):
            check_vmap(f, axes, (op, idx, upd), len(op_shape))
    assert name in prim_names(ember.vmap(f, axes), op, idx, upd)


def test_nested_vmap_of_gather_and_scatter_add(rng):
    op = rng.normal(size=(2, 5, 3))
    idx = rng.integers(0, 5, (4, 6, 1))

    def f(a, i):  # a: (5, 3), i: (6, 1)
        return P.scatter_add(a, i, P.mul(P.gather(a, i), 2.0))

    got = ember.vmap(ember.vmap(f, (None, 0)), (0, None), 1)(op, idx)
    want = loop_vmap(lambda a, i: loop_vmap(f, (None, 0), (a, i)), (0, None), (op, idx), 1)
    assert got.shape == (4, 2, 5, 3)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_vmap_of_grad_of_gather(rng):
    op, idx = rng.normal(size=(3, 6, 2)), rng.integers(0, 6, (3, 4, 1))
    g = ember.grad(lambda a, i: P.reduce_sum(P.tanh(P.gather(a, i)), (0, 1)))
    check_vmap(g, (0, 0), (op, idx))
    check_vmap(g, (0, None), (op, idx[0]))
    check_vmap(g, (None, 0), (op[0], idx))


COVERED = {name: {"gather", "scatter_add", "scatter"} for name in ("reference", "errors", "vjp", "batch")}
