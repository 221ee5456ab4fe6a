"""ember.scipy.linalg (solve_triangular, cholesky, cho_factor/cho_solve, lu_factor/lu_solve, block_diag)
and ember.lax.linalg against live jax.scipy.linalg and jax.lax.linalg: values on both backends, eager,
gradients against JAX's and finite differences, and errors. One jitted function computes the table."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import ember
import ember.lax as elax
import ember.scipy.linalg as esl
from ember.errors import IncompatibleShapesError
from tests.helpers import check_grads

jax = pytest.importorskip("jax")
jsl = pytest.importorskip("jax.scipy.linalg")


def _table(sl, lax_linalg):
    """name -> f(a, s, b, v) for a general stack a, an SPD stack s, right-hand sides b and a vector v."""
    table = {f"solve_triangular-{trans}-{lower}-{unit}-{k}": (
        lambda a, s, b, v, trans=trans, lower=lower, unit=unit, k=k:
        sl.solve_triangular(s, b if k == "stack" else v, trans=trans, lower=lower, unit_diagonal=unit))
        for trans in (0, "T") for lower in (False, True) for unit in (False, True) for k in ("stack", "vector")}
    table.update({
        "cholesky": lambda a, s, b, v: sl.cholesky(s),
        "cholesky-lower": lambda a, s, b, v: sl.cholesky(s, lower=True),
        "cho_solve": lambda a, s, b, v: sl.cho_solve(sl.cho_factor(s), b),
        "cho_solve-lower-vector": lambda a, s, b, v: sl.cho_solve(sl.cho_factor(s, lower=True), v),
        "lu_factor": lambda a, s, b, v: tuple(sl.lu_factor(a)),
        "lu_solve": lambda a, s, b, v: sl.lu_solve(sl.lu_factor(a), b),
        "lu_solve-trans": lambda a, s, b, v: sl.lu_solve(sl.lu_factor(a), b, trans=1),
        "lu_solve-vector": lambda a, s, b, v: sl.lu_solve(sl.lu_factor(a[0]), v),
        "block_diag": lambda a, s, b, v: sl.block_diag(a[0], v, b[1]),
        "lax-cholesky": lambda a, s, b, v: lax_linalg.cholesky(s),
        "lax-pivots": lambda a, s, b, v: lax_linalg.lu_pivots_to_permutation(lax_linalg.lu(a)[1], 6),
        "lax-qr": lambda a, s, b, v: tuple(lax_linalg.qr(a[..., :3], full_matrices=False)),
        "lax-eigh": lambda a, s, b, v: lax_linalg.eigh(s)[1],
        "lax-svd": lambda a, s, b, v: lax_linalg.svd(a, compute_uv=False),
    })
    return table


OURS, THEIRS = _table(esl, elax.linalg), _table(jsl, jax.lax.linalg)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(2, 4, 4))
    s = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    return a, s, rng.normal(size=(2, 4, 3)), rng.normal(size=4)


@functools.cache
def _jax_table():
    return jax.jit(lambda *args: {k: f(*args) for k, f in THEIRS.items()})


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_values_match_jax(backend):
    args = _inputs()
    got = ember.jit(lambda *a: {k: f(*a) for k, f in OURS.items()}, backend=backend)(*args)
    with jax.enable_x64(True):
        want = _jax_table()(*args)
    for name in OURS:
        g, w = got[name], want[name]
        for gg, ww in zip(g if isinstance(g, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
            assert np.asarray(gg).dtype == np.asarray(ww).dtype and np.shape(gg) == np.shape(ww), name
            np.testing.assert_allclose(gg, ww, rtol=1e-10, atol=1e-10, err_msg=name)


def test_eagerly_and_with_promotion():
    a, s, b, v = _inputs(1)
    np.testing.assert_allclose(esl.cho_solve(esl.cho_factor(s), b), np.linalg.solve(s, b), rtol=1e-10)
    np.testing.assert_allclose(esl.lu_solve(esl.lu_factor(a), b), np.linalg.solve(a, b), rtol=1e-9, atol=1e-10)
    tri = esl.solve_triangular(np.array([[2, 0], [1, 1]], np.int32), np.array([2, 3], np.int32), lower=True)
    assert tri.dtype == np.float32
    np.testing.assert_array_equal(tri, [1.0, 2.0])
    bd = esl.block_diag(np.ones((1, 1), np.int32), np.ones(2, np.float32))
    assert bd.dtype == np.float32 and bd.shape == (2, 3)
    np.testing.assert_array_equal(bd, [[1, 0, 0], [0, 1, 1]])
    assert esl.block_diag().shape == (1, 0)


@functools.cache
def _jax_gradient():
    return jax.jit(jax.grad(lambda a, s, b: _loss(THEIRS)(a, s, b), argnums=(0, 1, 2)))


def _loss(table):
    def f(a, s, b):
        v = b[0, :, 0]
        return sum((table[k](a, s, b, v) ** 2).sum() for k in (
            "solve_triangular-T-True-False-stack", "cho_solve", "lu_solve", "lu_solve-trans", "cholesky"))
    return f


def test_gradients_match_jax_and_finite_differences():
    a, s, b, _ = _inputs(2)
    got = ember.grad(_loss(OURS), argnums=(0, 1, 2))(a, s, b)
    with jax.enable_x64(True):
        want = _jax_gradient()(a, s, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-8)
    # cho_factor reads one triangle (its gradient is JAX's, not symmetric): differences of a symmetrized input
    check_grads(lambda s, b: (esl.cho_solve(esl.cho_factor((s + s.T) / 2, lower=True), b) * b).sum(), (s[0], b[0]),
                argnums=(0, 1))


def test_errors():
    with pytest.raises(IncompatibleShapesError, match="test_linalg.py"):
        esl.solve_triangular(np.ones((3, 3)), np.ones(2))
    with pytest.raises(IncompatibleShapesError):
        esl.cho_factor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="trans"):
        esl.solve_triangular(np.eye(2), np.ones(2), trans=3)
    with pytest.raises(ValueError, match="at most 2 dimensions"):
        esl.block_diag(np.ones((1, 1, 1)))
