"""cholesky, triangular_solve and lu (prims/linalg.py): values against NumPy/SciPy and live JAX
(lax.linalg), the failures JAX gives (an indefinite matrix's NaN factor, a singular LU's zero pivot, a
zero diagonal's inf), shape/dtype errors naming the user's line, VJPs against finite differences and
JAX's gradients, JVPs (transposed from the VJPs) against JAX's, and batching against a loop. Each test
walks a table of cases, so a file's worth of graphs compiles a few times, not once per case.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import ember
from ember.errors import DTypeError, IncompatibleShapesError, ShapeError
from ember.tracer import prims as P
from tests.helpers import assert_vmap_matches_loop, check_grads, raises_naming

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

THIS_FILE = "test_prims_linalg.py"
COVERED = {aspect: {"cholesky", "triangular_solve", "lu", "qr", "eigh", "svd"}
           for aspect in ("reference", "errors", "vjp", "batch")}

FLAGS = [dict(left_side=left, lower=lower, transpose_a=tr, unit_diagonal=unit)
         for left in (True, False) for lower in (True, False) for tr in (True, False) for unit in (True, False)]


def spd(rng, shape, dtype=np.float64):
    """Well-conditioned symmetric positive-definite matrices A A^T + n I of `shape` (..., n, n)."""
    a = rng.normal(size=shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def rhs_shape(a_shape, k: int, left: bool):
    return a_shape[:-1] + (k,) if left else a_shape[:-2] + (k, a_shape[-1])


def _tol(dtype):
    return 2e-5 if np.dtype(dtype) == np.float32 else 1e-12


# --- values: one jitted function per dtype computes every case (one compile) ----------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_values(dtype, rng):
    shapes = [(3, 3), (2, 4, 4), (1, 1)]
    xs = [spd(rng, shape, dtype) for shape in shapes]
    upper_ignored = (np.triu(rng.normal(size=(3, 3)), 1) + spd(rng, (3, 3))).astype(dtype)
    indefinite = np.array([[[1.0, 2.0], [2.0, 1.0]], [[4.0, 2.0], [2.0, 3.0]]], dtype)
    *got, ignored, failed = ember.jit(lambda *a: [P.cholesky(x) for x in a])(*xs, upper_ignored, indefinite)
    for x, g in zip(xs, got):
        assert g.dtype == dtype and g.shape == x.shape
        np.testing.assert_allclose(g, np.linalg.cholesky(x.astype(np.float64)), rtol=_tol(dtype), atol=_tol(dtype))
        assert np.all(np.triu(g, 1) == 0)
    lower = np.tril(upper_ignored)
    np.testing.assert_allclose(ignored, np.linalg.cholesky(lower + np.tril(lower, -1).T), rtol=_tol(dtype))
    # JAX 0.10.2 (recorded): [[nan, 0], [nan, nan]]; the positive-definite matrix beside it is unharmed
    np.testing.assert_array_equal(failed[0], [[np.nan, 0.0], [np.nan, np.nan]])
    with jax.enable_x64(dtype == np.float64):
        want = np.asarray(jax.lax.linalg.cholesky(indefinite, symmetrize_input=False))
    np.testing.assert_allclose(failed, want, rtol=_tol(dtype))


def _solves(solve, a, bs, z, o):
    """Every flag combination's solve with a, and a solve with a zero diagonal."""
    return [solve(a, b, **kw) for b, kw in zip(bs, FLAGS)] + [solve(z, o, left_side=True, lower=True)]


@functools.cache
def _jax_solves():
    return jax.jit(functools.partial(_solves, jax.lax.linalg.triangular_solve))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_triangular_solve_values_match_jax(dtype, rng):
    a = spd(rng, (2, 4, 4), dtype)
    bs = [rng.normal(size=rhs_shape(a.shape, 3, kw["left_side"])).astype(dtype) for kw in FLAGS]
    zero_diagonal, ones = np.array([[0.0, 0.0], [1.0, 1.0]], dtype), np.ones((2, 2), dtype)

    def solves(a, bs, z, o):
        return _solves(P.triangular_solve, a, bs, z, o)

    got = ember.jit(solves)(a, bs, zero_diagonal, ones)
    with jax.enable_x64(dtype == np.float64):
        want = _jax_solves()(a, bs, zero_diagonal, ones)
    for g, w, kw in zip(got, want, FLAGS + [{}]):
        assert g.dtype == dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=_tol(dtype), atol=_tol(dtype), err_msg=str(kw))
    singular = got[-1]
    np.testing.assert_array_equal(singular, [[np.inf, np.inf], [-np.inf, -np.inf]])  # recorded from JAX 0.10.2


@functools.cache
def _jax_lus():
    return jax.jit(lambda *xs: [jax.lax.linalg.lu(x) for x in xs])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lu_values_match_jax(dtype, rng):
    cases = [rng.normal(size=s).astype(dtype) for s in [(4, 4), (2, 3, 3), (3, 5), (5, 2), (2, 0, 3)]]
    cases.append(np.array([[1.0, 2.0], [2.0, 4.0]], dtype))  # singular: a zero pivot
    cases.append(np.zeros((2, 2), dtype))
    results = ember.jit(lambda *xs: [P.lu(x) for x in xs])(*cases)
    with jax.enable_x64(dtype == np.float64):
        wants = _jax_lus()(*cases)
    for x, got, want in zip(cases, results, wants):
        for g, w, name in zip(got, want, ("lu", "pivots", "permutation")):
            assert g.dtype == np.asarray(w).dtype and g.shape == w.shape, (x.shape, name)
            np.testing.assert_allclose(g, w, rtol=_tol(dtype), atol=_tol(dtype), err_msg=f"{x.shape} {name}")
        lu, _, perm = got
        m, n = x.shape[-2:]
        k = min(m, n)
        lower = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
        rows = np.take_along_axis(x, perm[..., None].astype(np.intp), axis=-2)
        np.testing.assert_allclose(lower @ np.triu(lu[..., :k, :]), rows, rtol=1e-4, atol=1e-5)
    # recorded from JAX 0.10.2: lu([[1, 2], [2, 4]]) = [[2, 4], [0.5, 0]], pivots [1, 1], permutation [1, 0]
    for g, w in zip(results[-2], ([[2.0, 4.0], [0.5, 0.0]], [1, 1], [1, 0])):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_qr_eigh_svd_values_match_numpy(dtype, rng):
    """LAPACK's conventions (Householder signs, ascending eigenvalues, descending singular values), as
    NumPy's own calls of the same routines give them; one jitted function per dtype."""
    shapes = [(4, 4), (5, 3), (3, 5), (2, 4, 3)]
    xs = [rng.normal(size=sh).astype(dtype) for sh in shapes]
    sym = rng.normal(size=(2, 4, 4)).astype(dtype)

    def decompositions(xs, sym):
        return ([(P.qr(x), P.qr(x, full_matrices=False), P.svd(x), P.svd(x, full_matrices=False),
                  P.svd(x, compute_uv=False)) for x in xs], P.eigh(sym), P.eigh(sym, lower=False))

    per_x, lower, upper = ember.jit(decompositions)(xs, sym)
    tol = dict(rtol=_tol(dtype) * 10, atol=_tol(dtype) * 10)
    for x, (qr_full, qr_reduced, svd_full, svd_reduced, (s,)) in zip(xs, per_x):
        for got, mode in ((qr_full, "complete"), (qr_reduced, "reduced")):
            for g, w in zip(got, np.linalg.qr(x, mode=mode)):
                assert g.dtype == dtype
                np.testing.assert_allclose(g, w, **tol, err_msg=f"qr {x.shape} {mode}")
        for got, full in ((svd_full, True), (svd_reduced, False)):
            u, sv, vt = np.linalg.svd(x, full_matrices=full)
            for g, w in zip(got, (sv, u, vt)):
                np.testing.assert_allclose(g, w, **tol, err_msg=f"svd {x.shape} {full}")
        np.testing.assert_allclose(s, np.linalg.svd(x, compute_uv=False), **tol)
    for (v, w), uplo in ((lower, "L"), (upper, "U")):
        want_w, want_v = np.linalg.eigh(sym, UPLO=uplo)
        np.testing.assert_allclose(w, want_w, **tol)
        np.testing.assert_allclose(v, want_v, **tol)


def test_decompositions_without_a_derivative_say_so_as_jax():
    from ember.errors import DifferentiationError

    wide = np.ones((2, 3))
    for fn in (lambda x: P.qr(x, full_matrices=False)[1], lambda x: P.qr(x)[0], lambda x: P.svd(x)[1]):
        with pytest.raises(DifferentiationError):
            ember.grad(lambda x, fn=fn: P.reduce_sum(fn(x), (0, 1)))(wide)
    assert issubclass(DifferentiationError, NotImplementedError)


# --- errors ------------------------------------------------------------------------------------------------

def test_shape_and_dtype_errors_name_the_users_line():
    f32 = np.zeros((3, 3), np.float32)
    chol, lu = (lambda x: P.cholesky(x)), (lambda x: P.lu(x))  # noqa: E731
    solve = lambda a, b: P.triangular_solve(a, b, left_side=True)  # noqa: E731
    cases = [
        (ShapeError, chol, (np.zeros(3, np.float32),), ("cholesky", "rank at least 2")),
        (IncompatibleShapesError, chol, (np.zeros((2, 3), np.float32),), ("cholesky", "square", "(2, 3)")),
        (DTypeError, chol, (np.zeros((2, 2), np.int32),), ("cholesky", "int32")),
        (DTypeError, chol, (np.zeros((2, 2), np.float16),), ("cholesky", "float16")),
        (IncompatibleShapesError, solve, (f32, np.zeros((2, 2), np.float32)), ("triangular_solve", "(3, 3)", "(2, 2)")),
        (IncompatibleShapesError, solve, (np.zeros((2, 3, 3), np.float32), np.zeros((4, 3, 3), np.float32)),
         ("triangular_solve", "batch")),
        (DTypeError, solve, (f32, np.zeros((3, 3))), ("triangular_solve", "float32", "float64")),
        (IncompatibleShapesError, solve, (np.zeros((2, 3), np.float32), f32), ("square",)),
        (ShapeError, lu, (np.zeros(3),), ("lu", "rank")),
        (DTypeError, lu, (np.zeros((2, 2), np.int32),), ("lu", "int32")),
        (ShapeError, lambda x: P.qr(x), (np.zeros(3),), ("qr", "rank")),
        (DTypeError, lambda x: P.svd(x), (np.zeros((2, 2), np.float16),), ("svd", "float16")),
        (IncompatibleShapesError, lambda x: P.eigh(x), (np.zeros((2, 3)),), ("eigh", "square")),
    ]
    for exc, fn, args, words in cases:
        raises_naming(exc, ember.jit(fn), *args, words=words, location=THIS_FILE)
        raises_naming(exc, fn, *args, words=words, location=THIS_FILE)  # eagerly too
    assert issubclass(IncompatibleShapesError, ValueError) and issubclass(ShapeError, TypeError)  # JAX's classes


# --- derivatives -------------------------------------------------------------------------------------------

def _sym(x):
    return P.mul(P.add(x, P.transpose(x, (1, 0))), 0.5)


def test_vjps_match_finite_differences(rng):
    s = spd(rng, (3, 3))
    w = rng.normal(size=(3, 3))
    check_grads(lambda x: P.reduce_sum(P.mul(P.cholesky(_sym(x)), w), (0, 1)), (s,))
    b = rng.normal(size=(3, 2))
    for kw in FLAGS[::5]:
        bb = b if kw["left_side"] else b.T
        wb = rng.normal(size=bb.shape)
        check_grads(lambda a, y, kw=kw, wb=wb: P.reduce_sum(P.mul(P.triangular_solve(a, y, **kw), wb), (0, 1)), (s, bb),
                    argnums=(0, 1))
    for shape in [(3, 3), (2, 4), (4, 2)]:
        x = rng.normal(size=shape)
        wl = rng.normal(size=shape)
        check_grads(lambda x, wl=wl: P.reduce_sum(P.mul(P.lu(x)[0], wl), (0, 1)), (x,))
    x, wq, wr = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.normal(size=(3, 3))
    check_grads(lambda x: P.add(P.reduce_sum(P.mul(P.qr(x, full_matrices=False)[0], wq), (0, 1)),
                                P.reduce_sum(P.mul(P.qr(x, full_matrices=False)[1], wr), (0, 1))), (x,))
    wv, ww = rng.normal(size=(3, 3)), rng.normal(size=3)
    check_grads(lambda x: P.add(P.reduce_sum(P.mul(P.eigh(_sym(x))[0], wv), (0, 1)),
                                P.reduce_sum(P.mul(P.eigh(_sym(x))[1], ww), (0,))), (s,))
    for shape in [(4, 3), (3, 4)]:
        x = rng.normal(size=shape)
        ws, wu, wvt = (rng.normal(size=a.shape) for a in P.svd(x, full_matrices=False))

        def svd_loss(x, ws=ws, wu=wu, wvt=wvt):
            sv, u, vt = P.svd(x, full_matrices=False)
            return P.add(P.add(P.reduce_sum(P.mul(sv, ws), (0,)), P.reduce_sum(P.mul(u, wu), (0, 1))),
                         P.reduce_sum(P.mul(vt, wvt), (0, 1)))
        check_grads(svd_loss, (x,))


def _theirs(s, x, a, b):
    svd = jax.lax.linalg.svd(x, full_matrices=False)
    return (jax.lax.linalg.cholesky(s, symmetrize_input=False), jax.lax.linalg.lu(x)[0],
            jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=True, transpose_a=True),
            *jax.lax.linalg.qr(x, full_matrices=False), *jax.lax.linalg.eigh(a, symmetrize_input=False),
            svd[1], svd[0], svd[2])


@functools.cache
def _jax_derivatives():
    """JAX's gradient of sum(w * outputs) and JVP of the outputs, jitted once for both backends' runs
    (eager JAX takes seconds to differentiate lu)."""
    def both(points, tangents, b, ws):
        loss = lambda *p: sum(jnp.sum(o * w) for o, w in zip(_theirs(*p, b), ws))  # noqa: E731
        grads = jax.grad(loss, argnums=(0, 1, 2))(*points)
        return grads, jax.jvp(lambda *p: _theirs(*p, b), points, tangents)[1]
    return jax.jit(both)


def test_gradients_and_jvps_match_jax():
    """The VJPs are JAX's rules (cholesky's unsymmetrized, as lax.linalg.cholesky_p's), and forward mode,
    transposed from them, gives JAX's JVPs (one graph for all six primitives)."""
    rng = np.random.default_rng(7)
    # x tall: qr's and svd's derivatives need m >= n
    points = (spd(rng, (2, 3, 3)), rng.normal(size=(2, 4, 3)), spd(rng, (2, 3, 3)))
    tangents = tuple(rng.normal(size=p.shape) for p in points)
    b = rng.normal(size=(2, 3, 2))

    def ours(s, x, a):
        return (P.cholesky(s), P.lu(x)[0], P.triangular_solve(a, b, left_side=True, lower=True, transpose_a=True),
                *P.qr(x, full_matrices=False), *P.eigh(a), *P.svd(x, full_matrices=False))

    ws = tuple(rng.normal(size=np.shape(o)) for o in ours(*points))

    def loss(*args):
        return sum(P.reduce_sum(P.mul(o, w), tuple(range(len(w.shape)))) for o, w in zip(ours(*args), ws))

    got = ember.grad(loss, argnums=(0, 1, 2))(*points)
    _, tans = ember.jvp(ours, points, tangents)
    with jax.enable_x64(True):
        want, jax_tans = _jax_derivatives()(points, tangents, b, ws)
    for g, w in zip(list(got) + list(tans), list(want) + list(jax_tans)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


# --- batching ----------------------------------------------------------------------------------------------

def test_vmap_matches_a_loop(rng):
    s = spd(rng, (3, 2, 3, 3))
    b = rng.normal(size=(3, 2, 3, 2))
    assert_vmap_matches_loop(P.cholesky, 1, (np.swapaxes(s, 0, 1),), tol=1e-12)
    assert_vmap_matches_loop(lambda x: P.lu(x), 0, (rng.normal(size=(3, 2, 4)),), tol=1e-12)
    assert_vmap_matches_loop(lambda x: (P.qr(x), P.svd(x), P.eigh(x)), 1, (np.swapaxes(s, 0, 1),), tol=1e-12)
    solve = lambda a, y: P.triangular_solve(a, y, left_side=True, lower=True)  # noqa: E731
    assert_vmap_matches_loop(solve, (0, 2), (s, np.moveaxis(b, 0, 2)), tol=1e-12)
    assert_vmap_matches_loop(solve, (None, 0), (s[0], b), tol=1e-12)
    assert_vmap_matches_loop(solve, (0, None), (s, b[0]), tol=1e-12)
