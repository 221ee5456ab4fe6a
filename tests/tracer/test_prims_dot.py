"""dot_general: numpy reference (einsum built from the dimension numbers) and shape/dtype rule, rule
errors, VJPs against finite differences for many dimension_numbers, batching rules against a loop.
"""

import numpy as np
import pytest

import ember
from ember.errors import DTypeError, ShapeError
from ember.tracer import prims as P
from tests.helpers import axes_features, check_grads, compiled_cover, loop_vmap, run, vmap_checker

F32, F64, I32, BOOL = (np.dtype(t) for t in (np.float32, np.float64, np.int32, bool))
THIS_FILE = "test_prims_dot.py"


def ref_dot(lhs, rhs, dn):
    """dot_general by einsum: batch axes, then lhs free axes, then rhs free axes."""
    (lc, rc), (lb, rb) = dn
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ls, rs = [None] * lhs.ndim, [None] * rhs.ndim
    for a, b in list(zip(lb, rb)) + list(zip(lc, rc)):
        ls[a] = rs[b] = next(letters)
    ls = [s or next(letters) for s in ls]
    rs = [s or next(letters) for s in rs]
    out = ([ls[a] for a in lb] + [ls[i] for i in range(lhs.ndim) if i not in lc + lb]
           + [rs[i] for i in range(rhs.ndim) if i not in rc + rb])
    wide = np.float64 if lhs.dtype.kind == "f" else np.int64
    res = np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", lhs.astype(wide), rhs.astype(wide))
    return np.asarray(res).astype(lhs.dtype)


# (lhs shape, rhs shape, dimension_numbers)
CASES = [
    ((2, 3), (3, 4), (((1,), (0,)), ((), ()))),
    ((3,), (3,), (((0,), (0,)), ((), ()))),
    ((2,), (3,), (((), ()), ((), ()))),
    ((2, 3), (3,), (((1,), (0,)), ((), ()))),
    ((4, 3), (2, 4), (((0,), (1,)), ((), ()))),
    ((5, 2, 3), (5, 3, 4), (((2,), (1,)), ((0,), (0,)))),
    ((3, 5, 4), (4, 5, 2), (((2,), (0,)), ((1,), (1,)))),
    ((2, 3, 4), (4, 3, 5), (((1, 2), (1, 0)), ((), ()))),
    ((3, 2, 4), (4, 3, 5), (((2, 0), (0, 1)), ((), ()))),
    ((2, 3, 4, 5), (2, 3, 5, 6), (((3,), (2,)), ((0, 1), (0, 1)))),
    ((2, 3, 4), (3, 2, 4), (((2,), (2,)), ((0, 1), (1, 0)))),
    ((2, 3, 4), (3, 4, 2), (((), ()), ((0,), (2,)))),
    ((2, 0), (0, 3), (((1,), (0,)), ((), ()))),
    ((0, 3), (3, 4), (((1,), (0,)), ((), ()))),
    ((), (3,), (((), ()), ((), ()))),
    ((2, 3), (), (((), ()), ((), ()))),
]
IDS = [f"{l}x{r}-{dn}" for l, r, dn in CASES]


@pytest.mark.parametrize("ls,rs,dn", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [F32, F64, I32], ids=str)
def test_dot_general_reference(ls, rs, dn, dtype, rng):
    lhs = rng.integers(-3, 4, ls).astype(dtype)
    rhs = rng.integers(-3, 4, rs).astype(dtype)
    if dtype.kind == "f":
        lhs, rhs = lhs + rng.uniform(-1, 1, ls).astype(dtype), rhs + rng.uniform(-1, 1, rs).astype(dtype)
    want = ref_dot(lhs, rhs, dn)
    for got in (run(lambda a, b: P.dot_general(a, b, dn), lhs, rhs), P.dot_general(lhs, rhs, dn)):
        assert got.dtype == dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == F32 else 1e-12, atol=1e-5)
    g = ember.make_graph(lambda a, b: P.dot_general(a, b, dn))(lhs, rhs)
    assert [n.prim.name for n in g.nodes] == ["dot_general"]


# --- rule errors ----------------------------------------------------------------------------------

MM = (((1,), (0,)), ((), ()))
ERRORS = [
    (ShapeError, (2, 3), (4, 5), MM, ("contracting", "(2, 3)", "(4, 5)")),
    (ShapeError, (5, 2, 3), (4, 3, 2), (((2,), (1,)), ((0,), (0,))), ("batch", "(5, 2, 3)", "(4, 3, 2)")),
    (ShapeError, (2, 3), (3, 4), (((2,), (0,)), ((), ())), ("lhs", "(2,)", "rank-2")),
    (ShapeError, (2, 3), (3, 4), (((1,), (-1,)), ((), ())), ("rhs", "(-1,)")),
    (ShapeError, (3, 3), (3, 3), (((0, 0), (0, 1)), ((), ())), ("lhs", "(0, 0)")),
    (ShapeError, (2, 3), (3, 4), (((1,), (0,)), ((0,), (0,))), ("rhs", "(0, 0)")),
    (ShapeError, (2, 3), (3, 2), (((1, 0), (0,)), ((), ())), ("(1, 0)", "(0,)", "pair")),
]


@pytest.mark.parametrize("exc,ls,rs,dn,words", ERRORS, ids=[str(e[3]) for e in ERRORS])
def test_dot_general_shape_errors(exc, ls, rs, dn, words):
    with pytest.raises(exc) as info:
        ember.jit(lambda a, b: P.dot_general(a, b, dn))(np.zeros(ls, F32), np.zeros(rs, F32))
    msg = str(info.value)
    for w in ("dot_general",) + words:
        assert w in msg, f"{w!r} not in {msg!r}"
    assert THIS_FILE in msg


@pytest.mark.parametrize("lt,rt", [(F32, F64), (I32, F32), (BOOL, BOOL)], ids=str)
def test_dot_general_dtype_errors(lt, rt):
    with pytest.raises(DTypeError) as info:
        ember.jit(lambda a, b: P.dot_general(a, b, MM))(np.zeros((2, 3), lt), np.zeros((3, 4), rt))
    msg = str(info.value)
    assert "dot_general" in msg and lt.name in msg and rt.name in msg and THIS_FILE in msg


# --- VJP rule -------------------------------------------------------------------------------------

@pytest.mark.parametrize("ls,rs,dn", CASES, ids=IDS)
def test_dot_general_vjp(ls, rs, dn, rng):
    lhs, rhs = rng.normal(size=ls), rng.normal(size=rs)
    w = rng.normal(size=ref_dot(lhs, rhs, dn).shape)

    def loss(a, b):
        return P.reduce_sum(P.mul(P.dot_general(a, b, dn), w), tuple(range(w.ndim)))

    gl, gr = check_grads(loss, (lhs, rhs), argnums=(0, 1))
    assert gl.shape == ls and gr.shape == rs
    (gl_only,) = check_grads(lambda a: loss(a, rhs), (lhs,))
    np.testing.assert_allclose(gl_only, gl, rtol=1e-12, atol=1e-12)
    (gr_only,) = check_grads(lambda b: loss(lhs, b), (rhs,))
    np.testing.assert_allclose(gr_only, gr, rtol=1e-12, atol=1e-12)


def test_dot_general_second_order(rng):
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4))

    def f(x):
        return P.reduce_sum(P.tanh(P.dot_general(x, b, MM)), (0, 1))

    g = ember.grad(lambda x: P.reduce_sum(P.mul(ember.grad(f)(x), ember.grad(f)(x)), (0, 1)))
    check_grads(lambda x: P.reduce_sum(P.mul(ember.grad(f)(x), ember.grad(f)(x)), (0, 1)), (a,), rtol=1e-4)
    assert g(a).shape == a.shape


# --- batching rule --------------------------------------------------------------------------------

check_vmap = vmap_checker(tol=1e-10)


AXES = [(0, 0), (1, -1), (-1, 0), (0, None), (1, None), (-1, None), (None, 0), (None, 1), (None, -1)]


def _insert(x_shape, axis, size=3):
    if axis is None:
        return x_shape
    s = list(x_shape)
    s.insert(axis % (len(x_shape) + 1), size)
    return tuple(s)


@pytest.mark.parametrize("ls,rs,dn", CASES, ids=IDS)
def test_dot_general_batching(ls, rs, dn, rng):
    f = lambda a, b: P.dot_general(a, b, dn)  # noqa: E731
    out_rank = ref_dot(np.zeros(ls), np.zeros(rs), dn).ndim
    valid = [axes for axes in AXES if not any(a not in (None, 0, -1) and len(s) == 0 for a, s in zip(axes, (ls, rs)))]
    for axes in compiled_cover(valid, axes_features):
        lhs, rhs = rng.normal(size=_insert(ls, axes[0])), rng.normal(size=_insert(rs, axes[1]))
        for out_axes in sorted({0, out_rank, -1}):
            check_vmap(f, axes, (lhs, rhs), out_axes)
    assert "dot_general" in {n.prim.name for n in ember.make_graph(ember.vmap(f, axes))(lhs, rhs).nodes}


def test_dot_general_batching_adds_no_loop(rng):
    """A batched dot is one dot_general (plus transposes), whatever the batch size."""
    for size in (2, 7):
        g = ember.make_graph(ember.vmap(lambda a, b: P.dot_general(a, b, MM), (1, None)))(
            rng.normal(size=(2, size, 3)), rng.normal(size=(3, 4)))
        assert sum(n.prim.name == "dot_general" for n in g.nodes) == 1


def test_nested_vmap_of_dot_general(rng):
    x, y = rng.normal(size=(4, 2, 3)), rng.normal(size=(5, 3, 6))
    f = lambda a, b: P.dot_general(a, b, MM)  # noqa: E731
    got = ember.vmap(ember.vmap(f, (None, 0)), (0, None), 2)(x, y)
    want = loop_vmap(lambda a, b: loop_vmap(f, (None, 0), (a, b)), (0, None), (x, y), 2)
    assert got.shape == (5, 2, 4, 6)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_vmap_of_grad_of_dot_general(rng):
    x, w = rng.normal(size=(3, 2, 4)), rng.normal(size=(4, 5))
    g = ember.grad(lambda a, b: P.reduce_sum(P.tanh(P.dot_general(a, b, MM)), (0, 1)), argnums=(0, 1))
    check_vmap(g, (0, None), (x, w))
    check_vmap(g, (1, None), (np.moveaxis(x, 0, 1), w))


COVERED = {name: {"dot_general"} for name in ("reference", "errors", "vjp", "batch")}
