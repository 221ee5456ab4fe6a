"""ember.numpy.linalg's cholesky, solve, inv, det, slogdet, matrix_power and multi_dot against live JAX and
NumPy: values (batched, float32 and float64, eager and under jit on both backends), singular and
indefinite inputs against JAX's recorded values, gradients against finite differences and JAX's, vmap
against a loop, and JAX's error classes. One jitted function per table keeps the compiles few.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.errors import IncompatibleShapesError, ShapeError
from tests.helpers import assert_vmap_matches_loop, check_grads

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def _abs_vectors(usv):
    """(|U|, S, |Vh|): singular vectors up to LAPACK's signs."""
    return abs(usv[0]), usv[1], abs(usv[2])


def _table(np_mod):
    """name -> f(a, s, b, v): every function on a general stack a, an SPD stack s, a stack of right-hand
    sides b and a vector v, written once for ember.numpy and jax.numpy."""
    la = np_mod.linalg
    return {
        "cholesky": lambda a, s, b, v: la.cholesky(s),
        "cholesky-upper": lambda a, s, b, v: la.cholesky(s, upper=True),
        "solve": lambda a, s, b, v: la.solve(a, b),
        "solve-vector": lambda a, s, b, v: la.solve(a, v),
        "solve-broadcast": lambda a, s, b, v: la.solve(a[0], b),
        "inv": lambda a, s, b, v: la.inv(a),
        "det": lambda a, s, b, v: la.det(a),
        "det-2x2": lambda a, s, b, v: la.det(a[..., :2, :2]),
        "det-3x3": lambda a, s, b, v: la.det(a[..., :3, :3]),
        "slogdet": lambda a, s, b, v: tuple(la.slogdet(a)),
        "slogdet-2x2": lambda a, s, b, v: tuple(la.slogdet(a[..., :2, :2])),
        "slogdet-1x1": lambda a, s, b, v: tuple(la.slogdet(a[..., :1, :1])),
        "matrix_power-5": lambda a, s, b, v: la.matrix_power(a, 5),
        "matrix_power-0": lambda a, s, b, v: la.matrix_power(a, 0),
        "matrix_power--2": lambda a, s, b, v: la.matrix_power(a, -2),
        "multi_dot": lambda a, s, b, v: la.multi_dot([v, a[0], s[1], b[0]]),
        # the decompositions; eigenvectors and singular vectors by magnitude (their signs are LAPACK's own
        # choice, which float32 and float64 routines may make differently)
        "qr": lambda a, s, b, v: tuple(la.qr(a[..., :3])),
        "qr-complete": lambda a, s, b, v: tuple(la.qr(a[..., :3], mode="complete")),
        "eigh": lambda a, s, b, v: (la.eigh(s)[0], abs(la.eigh(s)[1])),
        "eigvalsh-upper": lambda a, s, b, v: la.eigvalsh(s, UPLO="U"),
        "svd": lambda a, s, b, v: (abs(la.svd(a[..., :3])[0]), la.svd(a[..., :3])[1], abs(la.svd(a[..., :3])[2])),
        "svdvals": lambda a, s, b, v: la.svdvals(a),
        "svd-hermitian": lambda a, s, b, v: _abs_vectors(la.svd(a + np_mod.swapaxes(a, -1, -2), hermitian=True)),
        "svdvals-hermitian": lambda a, s, b, v: la.svd(a + np_mod.swapaxes(a, -1, -2), hermitian=True,
                                                       compute_uv=False),
        "pinv": lambda a, s, b, v: la.pinv(a[..., :3]),
        "lstsq": lambda a, s, b, v: tuple(la.lstsq(a[0, :, :3], b[0])[i] for i in (0, 1, 3)),
        "cond": lambda a, s, b, v: la.cond(s),
        "norm-2": lambda a, s, b, v: la.norm(a, 2, axis=(-2, -1)),
        "norm-nuc": lambda a, s, b, v: la.norm(a, "nuc", axis=(-1, -2)),
        # the array API's names
        "matrix_norm": lambda a, s, b, v: la.matrix_norm(a, ord=2, keepdims=True),
        "vector_norm": lambda a, s, b, v: la.vector_norm(b, axis=(0, 2), ord=1),
        "outer": lambda a, s, b, v: la.outer(v, b[0, :, 0]),
        "tensordot": lambda a, s, b, v: la.tensordot(a, b, axes=((0, 2), (0, 1))),
        "matmul": lambda a, s, b, v: la.matmul(a, b),
        "tensorinv": lambda a, s, b, v: la.tensorinv(s[0].reshape(4, 2, 2), ind=1),
        "tensorsolve": lambda a, s, b, v: la.tensorsolve(s[1].reshape(2, 2, 4), b[0, :2, :2]),
        "diagonal": lambda a, s, b, v: la.diagonal(a, offset=1),
        "trace": lambda a, s, b, v: la.trace(a),
        "cross": lambda a, s, b, v: la.cross(a[..., :3, 1:], b[:, :3, :]),
    }


OURS, THEIRS, NUMPYS = _table(enp), _table(jnp), _table(np)
# the functions this file tests (read by test_math's every-function check)
COVERED = {f"linalg.{name.split('-')[0]}" for name in OURS} | {"linalg.matrix_rank"}  # ranks: test_ranks_match_numpy


def _inputs(dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(2, 4, 4)).astype(dtype)
    s = (a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)).astype(dtype)
    return a, s, rng.normal(size=(2, 4, 3)).astype(dtype), rng.normal(size=4).astype(dtype)


def _close(got, want, dtype, name):
    """got (of `dtype`) is the reference's answer within the dtype's tolerance."""
    tol = 1e-3 if np.dtype(dtype) == np.float32 else 1e-9
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_match_numpy(dtype):
    """The table under jit (and a few functions eagerly) against numpy.linalg's same calls, which share
    JAX's semantics here (the singular and failing cases, where they differ, are JAX's below)."""
    args = _inputs(dtype)
    got = ember.jit(lambda *a: {k: f(*a) for k, f in OURS.items()})(*args)
    want = {k: f(*args) for k, f in NUMPYS.items()}
    for name in OURS:
        _close(got[name], want[name], dtype, name)
    eager = {k: f(*args) for k, f in OURS.items() if k in ("solve", "det", "slogdet", "inv", "svdvals")}
    for name, value in eager.items():
        _close(value, want[name], dtype, f"{name} (eager)")


def test_integers_are_promoted_as_jax():
    x = np.array([[2, 1], [1, 3]], np.int32)
    assert enp.linalg.det(x).dtype == np.float32 and enp.linalg.inv(x).dtype == np.float32
    np.testing.assert_allclose(enp.linalg.solve(x, np.array([1, 2], np.int32)), np.linalg.solve(x, [1, 2]), rtol=1e-6)


def test_singular_and_indefinite_inputs_give_jaxs_values():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    ones4 = np.ones((4, 4))

    def f(s, o):
        return (enp.linalg.solve(s, np.ones(2)), enp.linalg.inv(s), enp.linalg.det(s), enp.linalg.det(o),
                tuple(enp.linalg.slogdet(s)), tuple(enp.linalg.slogdet(o)),
                enp.linalg.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]])))

    # recorded from JAX 0.10.2 (float64)
    want = ([-np.inf, np.inf], [[-np.inf, np.inf], [np.inf, -np.inf]], 0.0, 0.0, (0.0, -np.inf), (0.0, -np.inf),
            [[np.nan, 0.0], [np.nan, np.nan]])
    with np.errstate(all="ignore"):
        for got in (ember.jit(f)(singular, ones4), f(singular, ones4)):
            for g, w in zip(got, want):
                for gg, ww in zip(g if isinstance(g, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
                    np.testing.assert_array_equal(gg, ww)


def _loss(table, v, w):
    """A scalar of every differentiable function of the table (one graph for all their gradients)."""
    def f(a, s, b):
        parts = [(table["solve"](a, s, b, v) ** 2).sum(), (table["inv"](a, s, b, v) * w).sum(),
                 table["det"](a, s, b, v).sum(), table["slogdet"](a, s, b, v)[1].sum(),
                 (table["cholesky"](a, s, b, v) * w).sum(), table["matrix_power--2"](a, s, b, v).sum()]
        return sum(parts[1:], parts[0])
    return f


@functools.cache
def _jax_gradient():
    return jax.jit(lambda a, s, b, v, w: jax.grad(_loss(THEIRS, v, w), argnums=(0, 1, 2))(a, s, b))


def test_gradients_match_finite_differences_and_jax():
    a, s, b, v = _inputs(np.float64, seed=3)
    w = np.random.default_rng(4).normal(size=(2, 4, 4))
    got = ember.grad(_loss(OURS, v, w), argnums=(0, 1, 2))(a, s, b)
    with jax.enable_x64(True):
        want = _jax_gradient()(a, s, b, v, w)
    for g, x in zip(got, want):
        np.testing.assert_allclose(g, x, rtol=1e-8, atol=1e-8)
    check_grads(lambda a, b: (enp.linalg.solve(a, b) * b).sum() + enp.linalg.det(a).sum()
                + (enp.linalg.pinv(a[:, :3]) ** 2).sum() + enp.linalg.svdvals(a).sum(), (a[0], b[0]),
                argnums=(0, 1), rtol=1e-5)


def _singular_stack():
    """5 x 5 matrices of ranks 5, 4 (a row a combination of two, or a zero row and column), 3 and 1, where
    det's derivative is the adjugate (nonzero for rank n - 1, 0 below)."""
    rng = np.random.default_rng(8)
    a = rng.normal(size=(5, 5))
    combined, zero_row, rank3 = a.copy(), np.zeros((5, 5)), a.copy()
    combined[4] = combined[0] + 2 * combined[1]
    zero_row[:4, :4] = a[:4, :4]
    rank3[3], rank3[4] = rank3[0], rank3[1]
    return np.stack([a, combined, zero_row, rank3, np.ones((5, 5))])


@functools.cache
def _jax_det_gradient():
    with jax.enable_x64(True):
        return np.asarray(jax.jit(jax.grad(lambda x: jnp.linalg.det(x).sum()))(_singular_stack()))


def test_det_derivatives_at_singular_matrices_are_jaxs():
    """grad of det for n >= 4 (jit, both backends) at singular matrices: JAX's adjugate-based rule, finite
    where det a^-1 is not; jvp the same rule; the Hessian (the rule differentiated) against the closed form
    det(a) (a^-T_ij a^-T_kl - a^-T_il a^-T_kj) at a regular 4 x 4 matrix."""
    x = _singular_stack()
    b = np.random.default_rng(9).normal(size=(4, 4))
    with np.errstate(all="ignore"):  # the rank test's solve overflows for ranks below n - 1, as JAX's
        grad, tangent, hess = ember.jit(lambda x, b: (
            ember.grad(lambda x: enp.linalg.det(x).sum())(x), ember.jvp(enp.linalg.det, (x[1],), (x[0],))[1],
            ember.hessian(enp.linalg.det)(b)))(x, b)
    want = _jax_det_gradient()
    assert np.isfinite(grad).all() and np.abs(want[1:3]).min(axis=(1, 2)).max() > 0
    np.testing.assert_allclose(grad, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tangent, np.sum(want[1] * x[0]), rtol=1e-10)
    inv_t = np.linalg.inv(b).T
    closed = np.linalg.det(b) * (np.einsum("ij,kl->ijkl", inv_t, inv_t) - np.einsum("il,kj->ijkl", inv_t, inv_t))
    np.testing.assert_allclose(hess, closed, rtol=1e-10, atol=1e-12)


def test_vmap_matches_a_loop():
    a, s, b, v = _inputs(np.float64, seed=5)

    def f(a, s, b):
        return enp.linalg.solve(a, b), enp.linalg.cholesky(s), enp.linalg.det(a), enp.linalg.slogdet(a)[1]

    assert_vmap_matches_loop(f, (0, 0, 0), (a, s, b), tol=1e-10)
    assert_vmap_matches_loop(lambda a, b: enp.linalg.solve(a, b), (None, 0), (a[0], b), tol=1e-10)


def test_ranks_match_numpy():
    x = np.random.default_rng(6).normal(size=(2, 4, 3))
    low = np.ones((3, 3))
    la = enp.linalg
    got = ember.jit(lambda x, y: (la.matrix_rank(x), la.matrix_rank(y), la.matrix_rank(y, hermitian=True),
                                  la.lstsq(y, x[0, :3])[2]))(x, low)
    np.testing.assert_array_equal(got[0], np.linalg.matrix_rank(x))
    assert got[1] == got[2] == got[3] == 1 and got[0].dtype == np.int32


def test_errors_are_jaxs_classes():
    cases = [
        (IncompatibleShapesError, lambda: enp.linalg.inv(np.ones((2, 3)))),
        (IncompatibleShapesError, lambda: enp.linalg.det(np.ones(3))),
        (IncompatibleShapesError, lambda: enp.linalg.cholesky(np.ones((2, 3)))),
        (IncompatibleShapesError, lambda: enp.linalg.slogdet(np.ones((3, 2)))),
        (IncompatibleShapesError, lambda: enp.linalg.solve(np.ones(3), np.ones(3))),
        (IncompatibleShapesError, lambda: enp.linalg.solve(np.ones((3, 3)), np.ones((2, 2)))),
        (ShapeError, lambda: enp.linalg.matrix_power(np.ones((2, 3)), 2)),
        (ShapeError, lambda: enp.linalg.matrix_power(np.ones((2, 2)), 1.5)),
        (ValueError, lambda: enp.linalg.multi_dot([np.ones(2)])),
        (IncompatibleShapesError, lambda: enp.linalg.multi_dot([np.ones((2, 3)), np.ones((2, 3))])),
    ]
    for exc, fn in cases:
        with pytest.raises(exc) as info:
            fn()
        assert "test_linalg_solve.py" in str(info.value) or exc is ValueError
    assert issubclass(IncompatibleShapesError, ValueError) and issubclass(ShapeError, TypeError)
