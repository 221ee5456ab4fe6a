"""Reductions (reduce_sum, reduce_max, reduce_min, reduce_prod, argmax, argmin): numpy reference and
shape/dtype rule (empty reductions included), rule errors, VJPs against finite differences (ties and
zeros of reduce_prod), batching rules against a Python loop.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
from ember.errors import DTypeError, ShapeError
from ember.tracer import prims as P
from tests.helpers import check_grads, compiled_cover, loop_vmap, prim_names, raises_naming, run, vmap_checker

F32, F64, I32, I8, BOOL = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int8, bool))
THIS_FILE = "test_prims_reduce.py"


def sample(rng, shape, dtype):
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-3, 4, shape).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


# --- independent references: a Python fold over the reduced positions ---------------------------

def _fold(x, axes, op, init):
    kept = [i for i in range(x.ndim) if i not in axes]
    out_shape = tuple(x.shape[i] for i in kept)
    out = np.empty(out_shape, dtype=object)
    for o in np.ndindex(*out_shape):
        acc = init
        for r in np.ndindex(*(x.shape[i] for i in axes)):
            idx = [0] * x.ndim
            for i, k in zip(kept, o):
                idx[i] = k
            for i, k in zip(axes, r):
                idx[i] = k
            acc = op(acc, x[tuple(idx)].item())
        out[o] = acc
    return out


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else False if dtype == BOOL else int(np.iinfo(dtype).min)


def _highest(dtype):
    return np.inf if dtype.kind == "f" else True if dtype == BOOL else int(np.iinfo(dtype).max)


REDUCERS = {
    "reduce_sum": (P.reduce_sum, lambda x, axes: _fold(x, axes, lambda a, b: a + b, 0), (F32, F64, I32, I8)),
    "reduce_prod": (P.reduce_prod, lambda x, axes: _fold(x, axes, lambda a, b: a * b, 1), (F32, F64, I32)),
    "reduce_max": (P.reduce_max, lambda x, axes: _fold(x, axes, max, _lowest(x.dtype)), (F32, F64, I32, BOOL)),
    "reduce_min": (P.reduce_min, lambda x, axes: _fold(x, axes, min, _highest(x.dtype)), (F32, F64, I32, BOOL)),
}
# (shape, axes)
REDUCE_SHAPES = [((5,), (0,)), ((2, 3, 4), (0,)), ((2, 3, 4), (1, 2)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (0, 1, 2)),
                 ((0, 3), (0,)), ((0, 3), (1,)), ((0, 3), (0, 1)), ((3, 0, 2), (1,))]


def _wrap(x, dtype):
    """Object-dtype reference -> dtype, with integer wrap-around as the primitive's dtype has."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        span = int(info.max) - int(info.min) + 1
        return np.array([(int(v) - int(info.min)) % span + int(info.min) for v in x.ravel()],
                        dtype).reshape(x.shape)
    return x.astype(dtype)


@pytest.mark.parametrize("name,dtype", [(n, d) for n, s in REDUCERS.items() for d in s[2]], ids=str)
def test_reduction_reference(name, dtype, rng):
    fn, ref, _ = REDUCERS[name]
    for shape, axes in REDUCE_SHAPES:
        x = sample(rng, shape, dtype)
        want = _wrap(ref(x, axes), dtype)
        for got in (run(lambda a, axes=axes: fn(a, axes), x), fn(x, axes)):
            got = np.asarray(got)
            assert got.dtype == dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=2e-6 if dtype == F32 else 1e-12)
    assert name in prim_names(lambda a: fn(a, axes), x)


@st.composite
def _shape_and_axes(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=3))
    axes = draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))
    return shape, tuple(sorted(axes))


@settings(max_examples=30, deadline=None)
@given(shape_axes=_shape_and_axes(), name=st.sampled_from(sorted(REDUCERS)), seed=st.integers(0, 2 ** 16))
def test_reduction_shape_rule_property(shape_axes, name, seed):
    shape, axes = shape_axes
    fn, ref, _ = REDUCERS[name]
    x = sample(np.random.default_rng(seed), shape, F64)
    got = run(lambda a: fn(a, axes), x)
    want = ref(x, axes).astype(F64)
    assert got.dtype == F64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_empty_reductions_give_the_identity():
    x = np.zeros((0, 2), F32)
    np.testing.assert_array_equal(run(lambda a: P.reduce_max(a, (0,)), x), [-np.inf, -np.inf])
    np.testing.assert_array_equal(run(lambda a: P.reduce_min(a, (0,)), x), [np.inf, np.inf])
    np.testing.assert_array_equal(run(lambda a: P.reduce_prod(a, (0,)), x), [1, 1])
    np.testing.assert_array_equal(run(lambda a: P.reduce_sum(a, (0,)), x), [0, 0])
    xi = np.zeros((0,), I8)
    assert run(lambda a: P.reduce_max(a, (0,)), xi) == -128 and run(lambda a: P.reduce_min(a, (0,)), xi) == 127


def test_reduction_over_no_axes_is_bound_as_identity(rng):
    x = sample(rng, (2, 3), F32)
    for prim in (P.reduce_sum_p, P.reduce_max_p, P.reduce_min_p, P.reduce_prod_p):
        got = run(lambda a, prim=prim: prim.bind(a, axes=()), x)
        np.testing.assert_array_equal(got, x)
        assert got.dtype == F32


def _arg_ref(x, axis, pick):
    """Index of the first element equal to the max/min along `axis` (NumPy's tie rule)."""
    moved = np.moveaxis(x, axis, -1)
    out = np.empty(moved.shape[:-1], np.int64)
    for idx in np.ndindex(*moved.shape[:-1]):
        row = list(moved[idx])
        out[idx] = row.index(pick(row))
    return out


ARG = {"argmax": (P.argmax, max), "argmin": (P.argmin, min)}
ARG_SHAPES = [((5,), 0), ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 2), ((0, 3), 1), ((3, 1), 1)]


@pytest.mark.parametrize("name", sorted(ARG))
@pytest.mark.parametrize("dtype,index_dtype", [(F32, I32), (F64, np.dtype(np.int64)), (I32, I32), (BOOL, I8)],
                         ids=str)
def test_arg_reduction_reference(name, dtype, index_dtype, rng):
    fn, pick = ARG[name]
    for shape, axis in ARG_SHAPES:
        x = sample(rng, shape, dtype)
        if dtype.kind == "f":
            x = np.round(x)  # ties: the first index wins
        want = _arg_ref(x, axis, pick)
        for got in (run(lambda a, axis=axis: fn(a, axis, index_dtype), x), fn(x, axis, index_dtype)):
            assert got.dtype == index_dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    assert name in prim_names(lambda a: fn(a, axis), x)


def test_argmax_default_index_dtype_is_int32():
    assert run(lambda a: P.argmax(a, 0), np.array([1.0, 3.0, 2.0])).dtype == I32


# --- rule errors ----------------------------------------------------------------------------------

def _raises(exc, fn, x, words=()):
    return raises_naming(exc, ember.jit(fn), x, words=words, location=THIS_FILE)


@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_reduction_rule_errors(name):
    prim = REDUCERS[name][0]
    x = np.zeros((2, 3), F32)
    _raises(ShapeError, lambda a: prim(a, (2,)), x, words=(name, "(2,)", "rank-2"))
    _raises(ShapeError, lambda a: prim(a, (-1,)), x, words=(name, "(-1,)"))
    _raises(ShapeError, lambda a: prim(a, (1, 1)), x, words=(name, "(1, 1)"))
    if name in ("reduce_sum", "reduce_prod"):
        _raises(DTypeError, lambda a: prim(a, (0,)), x.astype(bool), words=(name, "bool"))


@pytest.mark.parametrize("name", sorted(ARG))
def test_arg_reduction_rule_errors(name):
    fn = ARG[name][0]
    _raises(ShapeError, lambda a: fn(a, 2), np.zeros((2, 3), F32), words=(name, "axis 2", "rank-2"))
    _raises(ShapeError, lambda a: fn(a, -1), np.zeros((2, 3), F32), words=(name, "axis -1"))
    _raises(ShapeError, lambda a: fn(a, 0), np.zeros((0, 3), F32), words=(name, "empty"))
    _raises(DTypeError, lambda a: fn(a, 0, F32), np.zeros((2, 3), F32), words=(name, "index_dtype"))


# --- VJP rules ------------------------------------------------------------------------------------

VJP_SHAPES = [((5,), (0,)), ((2, 3, 4), (1,)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (0, 1, 2)), ((0, 3), (0,)),
              ((3, 0), (0,))]


def _distinct(rng, shape):
    """Values with no ties anywhere (a permutation of spaced numbers)."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.37 - n * 0.15).reshape(shape)


def _loss(fn, axes, w):
    return lambda a: P.reduce_sum(P.mul(fn(a, axes), w), tuple(range(w.ndim)))


# Reducing an empty axis divides the cotangent by a zero tie count, for an empty mask.
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_reduction_vjp(name, rng):
    fn = REDUCERS[name][0]
    for shape, axes in VJP_SHAPES:
        x = _distinct(rng, shape)
        if name == "reduce_prod":  # factors of size about 1, of both signs
            x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
        w = rng.normal(size=tuple(d for i, d in enumerate(shape) if i not in axes))
        (g,) = check_grads(_loss(fn, axes, w), (x,))
        assert g.shape == shape
    assert name in prim_names(_loss(fn, axes, w), x)


@pytest.mark.parametrize("zeros", [1, 2, 3])
def test_reduce_prod_vjp_with_zeros(zeros, rng):
    x = rng.uniform(0.5, 1.5, (3, 4)) * rng.choice([-1, 1], (3, 4))
    x[0, :zeros] = 0.0  # row 0 holds `zeros` zeros, row 1 exactly one, row 2 none
    x[1, 2] = 0.0
    w = rng.normal(size=(3,))
    (g,) = check_grads(_loss(P.reduce_prod, (1,), w), (x,))
    others = np.array([[np.prod(np.delete(x[r], c)) for c in range(4)] for r in range(3)])
    np.testing.assert_allclose(g, others * w[:, None], rtol=1e-12, atol=0)
    if zeros >= 2:
        np.testing.assert_array_equal(g[0], 0.0)
    (g_all,) = check_grads(lambda a: P.reduce_prod(a, (0, 1)), (x,))
    assert np.all(np.isfinite(g_all))


def test_reduce_max_min_vjp_split_ties_evenly():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    np.testing.assert_array_equal(ember.grad(lambda a: P.reduce_sum(P.reduce_max(a, (1,)), (0,)))(x),
                                  [[0, 0.5, 0.5], [1, 0, 0]])
    np.testing.assert_array_equal(ember.grad(lambda a: P.reduce_min(a, (0, 1)))(np.full((2, 2), 4.0)),
                                  np.full((2, 2), 0.25))


@pytest.mark.parametrize("name", sorted(ARG))
def test_arg_reduction_gives_zero_gradient(name, rng):
    x = _distinct(rng, (3, 4))

    def f(a):
        i = P.convert_element_type(ARG[name][0](a, 1), F64)
        return P.add(P.reduce_sum(i, (0,)), P.reduce_sum(P.mul(a, 0.0), (0, 1)))

    np.testing.assert_array_equal(ember.grad(f)(x), np.zeros_like(x))
    assert name in prim_names(f, x)


# --- batching rules -------------------------------------------------------------------------------

check_vmap = vmap_checker(tol=1e-6)


BATCH_CASES = [((2, 3, 4), (0,)), ((2, 3, 4), (1,)), ((2, 3, 4), (2,)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (0, 1, 2)),
               ((4,), (0,)), ((0, 3), (1,))]


@pytest.mark.parametrize("name", sorted(REDUCERS) + sorted(ARG))
def test_reduction_batching(name, rng):
    for shape, axes in BATCH_CASES:
        if name in ARG:
            if shape[axes[0]] == 0:
                continue
            f = lambda a, ax=axes[0]: ARG[name][0](a, ax)  # noqa: E731
        else:
            f = lambda a, ax=axes: REDUCERS[name][0](a, ax)  # noqa: E731
        out_rank = len(shape) - (1 if name in ARG else len(axes))
        last = len(shape)  # -1 and len(shape): both the last place
        places = list(range(-1, last + 1))
        for in_ax in compiled_cover(places, lambda a, last=last: [0 if a == 0 else 2 if a in (-1, last) else 1]):
            full = list(shape)
            full.insert(in_ax % (len(shape) + 1), 3)
            x = _distinct(rng, tuple(full))
            for out_ax in {0, out_rank}:
                check_vmap(f, in_ax, (x,), out_ax)
    assert name in prim_names(ember.vmap(f, 0), x)


def test_nested_vmap_of_reductions(rng):
    x = _distinct(rng, (2, 3, 4, 5))

    def f(a):  # per-example (3, 5)
        return P.sub(P.reduce_max(a, (1,)), P.convert_element_type(P.argmin(a, 1), F64))

    got = ember.vmap(ember.vmap(f, 1), 0, 1)(x)
    want = loop_vmap(lambda y: loop_vmap(f, 1, (y,)), 0, (x,), 1)
    assert got.shape == want.shape == (4, 2, 3)
    np.testing.assert_array_equal(got, want)


def test_vmap_of_grad_of_reductions(rng):
    x = rng.uniform(0.5, 1.5, (3, 2, 4))
    g = ember.grad(lambda a: P.reduce_sum(P.mul(P.reduce_prod(a, (1,)), P.reduce_max(a, (1,))), (0,)))
    check_vmap(g, 0, (x,))
    check_vmap(g, 2, (np.moveaxis(x, 0, 2),), 1)


COVERED = {
    "reference": set(REDUCERS) | set(ARG),
    "errors": set(REDUCERS) | set(ARG),
    "vjp": set(REDUCERS) | set(ARG),
    "batch": set(REDUCERS) | set(ARG),
}
