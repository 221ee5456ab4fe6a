"""cholesky, triangular_solve, lu, qr, eigh and svd (prims/linalg.py): values against NumPy/SciPy (the
same LAPACK routines JAX calls), the failures JAX gives (recorded: an indefinite matrix's NaN factor, a
singular LU's zero pivot, a zero diagonal's inf), shape/dtype errors naming the user's line, VJPs against
finite differences and live JAX's rules, JVPs (transposed from the VJPs) against JAX's, and batching
against a loop. Each test walks a table of cases in one jitted function, so the file compiles a few
graphs, not one per case.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import ember
from ember.errors import DTypeError, IncompatibleShapesError, ShapeError
from ember.tracer import prims as P
from ember.tracer.prims.linalg import permutation_of
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
    np.testing.assert_allclose(failed[1], np.linalg.cholesky(indefinite[1].astype(np.float64)), rtol=_tol(dtype))


def _solve_reference(a, b, left_side, lower, transpose_a, unit_diagonal):
    """lax.linalg.triangular_solve's meaning in NumPy (float64): op(a) x = b or x op(a) = b, op(a) the
    chosen triangle (ones on the diagonal with unit_diagonal), transposed with transpose_a."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    tri = np.tril(a, -1 if unit_diagonal else 0) if lower else np.triu(a, 1 if unit_diagonal else 0)
    if unit_diagonal:
        tri = tri + np.eye(a.shape[-1])
    op = np.swapaxes(tri, -1, -2) if transpose_a else tri
    return np.linalg.solve(op, b) if left_side else np.swapaxes(
        np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_triangular_solve_values(dtype, rng):
    """Every flag combination (lax.linalg's meaning), and JAX's infinities for a zero diagonal."""
    a = spd(rng, (2, 4, 4), dtype)
    bs = [rng.normal(size=rhs_shape(a.shape, 3, kw["left_side"])).astype(dtype) for kw in FLAGS]
    zero_diagonal, ones = np.array([[0.0, 0.0], [1.0, 1.0]], dtype), np.ones((2, 2), dtype)

    def solves(a, bs, z, o):
        return [P.triangular_solve(a, b, **kw) for b, kw in zip(bs, FLAGS)] + [
            P.triangular_solve(z, o, left_side=True, lower=True)]

    *got, singular = ember.jit(solves)(a, bs, zero_diagonal, ones)
    for g, b, kw in zip(got, bs, FLAGS):
        assert g.dtype == dtype and g.shape == b.shape
        np.testing.assert_allclose(g, _solve_reference(a, b, **kw), rtol=_tol(dtype) * 5, atol=_tol(dtype) * 5,
                                   err_msg=str(kw))
    np.testing.assert_array_equal(singular, [[np.inf, np.inf], [-np.inf, -np.inf]])  # recorded from JAX 0.10.2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lu_values(dtype, rng):
    """SciPy's getrf (JAX's on the CPU): packed factors, 0-based pivots and the permutation they make."""
    import scipy.linalg

    cases = [rng.normal(size=s).astype(dtype) for s in [(4, 4), (2, 3, 3), (3, 5), (5, 2), (2, 0, 3)]]
    cases.append(np.array([[1.0, 2.0], [2.0, 4.0]], dtype))  # singular: a zero pivot
    cases.append(np.zeros((2, 2), dtype))
    results = ember.jit(lambda *xs: [P.lu(x) for x in xs])(*cases)
    for x, (lu, pivots, perm) in zip(cases, results):
        m, n = x.shape[-2:]
        k = min(m, n)
        assert lu.dtype == dtype and pivots.dtype == perm.dtype == np.int32
        assert pivots.shape == x.shape[:-2] + (k,) and perm.shape == x.shape[:-2] + (m,)
        count = int(np.prod(x.shape[:-2]))
        for mat, g, piv, p in zip(x.reshape(count, m, n), lu.reshape(count, m, n), pivots.reshape(count, k),
                                  perm.reshape(count, m)):
            with warnings.catch_warnings():  # SciPy warns of the singular cases' zero pivots
                warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
                want, want_piv = scipy.linalg.lu_factor(mat) if mat.size else (mat, np.zeros(0, np.int32))
            np.testing.assert_allclose(g, want, rtol=_tol(dtype), atol=_tol(dtype), err_msg=f"{x.shape}")
            np.testing.assert_array_equal(piv, want_piv)
            np.testing.assert_array_equal(p, permutation_of(want_piv, m))
            lower = np.tril(g[:, :k], -1) + np.eye(m, k)
            np.testing.assert_allclose(lower @ np.triu(g[:k, :]), mat[p], rtol=1e-4, atol=1e-5)
    # recorded from JAX 0.10.2: lu([[1, 2], [2, 4]]) = [[2, 4], [0.5, 0]], pivots [1, 1], permutation [1, 0]
    for g, w in zip(results[-2], ([[2.0, 4.0], [0.5, 0.0]], [1, 1], [1, 0])):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(results[-1][2], [0, 1])  # an all-zero matrix: no swaps (JAX: [0, 1])


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
    """One loss of every primitive (triangular_solve under four flag combinations, lu and svd of tall and
    wide matrices; cholesky and eigh of a symmetrized input): one gradient graph, checked by differences."""
    s, b = spd(rng, (3, 3)), rng.normal(size=(3, 2))
    tall, wide = rng.normal(size=(4, 3)), rng.normal(size=(3, 4))
    weights = {}

    def weighted(name, x):
        w = weights.setdefault(name, np.random.default_rng(len(weights)).normal(size=np.shape(x)))
        return P.reduce_sum(P.mul(x, w), tuple(range(len(np.shape(w)))))

    def loss(s, b, tall, wide):
        terms = [weighted("cholesky", P.cholesky(_sym(s))), weighted("lu-square", P.lu(s)[0]),
                 weighted("lu-wide", P.lu(wide)[0]), weighted("lu-tall", P.lu(tall)[0])]
        for k, kw in enumerate(FLAGS[::5]):
            rhs = b if kw["left_side"] else P.transpose(b, (1, 0))
            terms.append(weighted(f"solve{k}", P.triangular_solve(s, rhs, **kw)))
        terms += [weighted(f"qr{k}", o) for k, o in enumerate(P.qr(tall, full_matrices=False))]
        terms += [weighted(f"eigh{k}", o) for k, o in enumerate(P.eigh(_sym(s)))]
        for name, x in (("tall", tall), ("wide", wide)):
            terms += [weighted(f"svd-{name}{k}", o) for k, o in enumerate(P.svd(x, full_matrices=False))]
        return sum(terms[1:], terms[0])

    check_grads(loss, (s, b, tall, wide), argnums=(0, 1, 2, 3))


def _theirs(s, x, a, b):
    return (jax.lax.linalg.cholesky(s, symmetrize_input=False), jax.lax.linalg.lu(x)[0],
            jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=True, transpose_a=True),
            *jax.lax.linalg.eigh(a, symmetrize_input=False))


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
    """The VJPs are JAX's rules where differences cannot tell (cholesky's and eigh's on one triangle, not
    symmetrized, as lax.linalg's primitives'), and forward mode, transposed from them, gives JAX's JVPs
    (qr's and svd's gradients are checked against JAX in numpy/test_linalg_solve.py's table)."""
    rng = np.random.default_rng(7)
    points = (spd(rng, (2, 3, 3)), rng.normal(size=(2, 4, 3)), spd(rng, (2, 3, 3)))
    tangents = tuple(rng.normal(size=p.shape) for p in points)
    b = rng.normal(size=(2, 3, 2))

    def ours(s, x, a):
        return (P.cholesky(s), P.lu(x)[0], P.triangular_solve(a, b, left_side=True, lower=True, transpose_a=True),
                *P.eigh(a))

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
