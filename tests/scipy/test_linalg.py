"""ember.scipy.linalg (solve_triangular, cholesky, cho_factor/cho_solve, lu_factor/lu_solve, block_diag)
and ember.lax.linalg against SciPy and NumPy (the LAPACK routines jax.scipy.linalg and jax.lax.linalg
call, with their signatures: each name's table entry is written once for Ember and once for SciPy),
values on both backends, eager, gradients against finite differences, and errors. One jitted function
computes the table."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as ssl

import ember
import ember.lax as elax
import ember.numpy as enp
import ember.scipy.linalg as esl
from ember.errors import IncompatibleShapesError
from ember.tracer.prims.linalg import permutation_of
from tests.helpers import check_grads


class _NumpyLax:
    """jax.lax.linalg's functions (the ones the table calls) in NumPy."""

    cholesky = staticmethod(np.linalg.cholesky)
    lu = staticmethod(lambda a: (None, np.stack([ssl.lu_factor(m)[1] for m in a]), None))
    lu_pivots_to_permutation = staticmethod(lambda p, size: np.stack([permutation_of(q, size) for q in p]))
    qr = staticmethod(lambda a, full_matrices: tuple(np.linalg.qr(a, mode="complete" if full_matrices else "reduced")))
    eigh = staticmethod(lambda a: np.linalg.eigh(a)[::-1])
    svd = staticmethod(lambda a, compute_uv: np.linalg.svd(a, compute_uv=compute_uv))


class _Scipy:
    """scipy.linalg with JAX's zeros in cho_factor's other triangle and batched solves (SciPy's take one
    matrix)."""

    solve_triangular = staticmethod(lambda a, b, **kw: _batched(lambda m, r: ssl.solve_triangular(m, r, **kw), a, b))
    cholesky = staticmethod(lambda a, lower=False: np.stack([ssl.cholesky(m, lower=lower) for m in a]))
    cho_factor = staticmethod(lambda a, lower=False: (_Scipy.cholesky(a, lower=lower), lower))
    cho_solve = staticmethod(lambda c, b: _batched(lambda m, r: ssl.cho_solve((m, c[1]), r), c[0], b))
    lu_factor = staticmethod(lambda a: tuple(np.stack(p) for p in zip(*(ssl.lu_factor(m) for m in a)))
                             if a.ndim == 3 else ssl.lu_factor(a))
    lu_solve = staticmethod(lambda f, b, trans=0: _batched(lambda m, p, r: ssl.lu_solve((m, p), r, trans=trans), *f, b)
                            if f[0].ndim == 3 else ssl.lu_solve(f, b, trans=trans))
    block_diag = staticmethod(ssl.block_diag)
    expm = staticmethod(lambda a: np.stack([ssl.expm(m) for m in a]))
    solve = staticmethod(lambda a, b, assume_a="gen": np.linalg.solve(a, b))
    inv = staticmethod(np.linalg.inv)
    det = staticmethod(np.linalg.det)
    lu = staticmethod(ssl.lu)
    qr = staticmethod(ssl.qr)
    eigh = staticmethod(ssl.eigh)
    svd = staticmethod(ssl.svd)


def _batched(solve, *args):
    """solve on each matrix of the leading (stack) axis; a vector right-hand side is shared."""
    *mats, rhs = args
    return np.stack([solve(*(m[i] for m in mats), rhs if rhs.ndim == 1 else rhs[i]) for i in range(len(mats[0]))])


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
        "solve-pos": lambda a, s, b, v: sl.solve(s, b, assume_a="pos"),
        "inv": lambda a, s, b, v: sl.inv(a),
        "det": lambda a, s, b, v: sl.det(a),
        "lu": lambda a, s, b, v: tuple(sl.lu(a[0, :, :3])),
        "lu-permute_l": lambda a, s, b, v: tuple(sl.lu(a[1], permute_l=True)),
        "qr": lambda a, s, b, v: tuple(sl.qr(a[0, :, :3])),
        "qr-economic-r": lambda a, s, b, v: tuple(sl.qr(a[0, :, :3], mode="economic")) + tuple(sl.qr(a[1], mode="r")),
        "eigh": lambda a, s, b, v: (sl.eigh(s[0])[0], abs(sl.eigh(s[0], lower=False)[1])),
        "eigh-values": lambda a, s, b, v: sl.eigh(s[1], eigvals_only=True),
        "svd": lambda a, s, b, v: tuple(abs(x) for x in sl.svd(a[0, :3])),
        "svd-s": lambda a, s, b, v: sl.svd(a[1], compute_uv=False),
        # expm at norms choosing each Pade order, with and without squarings
        **{f"expm-{scale}": (lambda a, s, b, v, scale=scale: sl.expm(a * scale))
           for scale in (0.002, 0.1, 0.5, 1.5, 30.0)},
        "lax-cholesky": lambda a, s, b, v: lax_linalg.cholesky(s),
        "lax-pivots": lambda a, s, b, v: lax_linalg.lu_pivots_to_permutation(lax_linalg.lu(a)[1], 6),
        "lax-qr": lambda a, s, b, v: tuple(lax_linalg.qr(a[..., :3], full_matrices=False)),
        "lax-eigh": lambda a, s, b, v: lax_linalg.eigh(s)[1],
        "lax-svd": lambda a, s, b, v: lax_linalg.svd(a, compute_uv=False),
    })
    return table


OURS, THEIRS = _table(esl, elax.linalg), _table(_Scipy, _NumpyLax)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(2, 4, 4))
    s = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    return a, s, rng.normal(size=(2, 4, 3)), rng.normal(size=4)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_values_match_scipy(backend):
    args = _inputs()
    got = ember.jit(lambda *a: {k: f(*a) for k, f in OURS.items()}, backend=backend)(*args)
    want = {k: f(*args) for k, f in THEIRS.items()}
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
    e32 = esl.expm(a[0].astype(np.float32))
    assert e32.dtype == np.float32
    np.testing.assert_allclose(e32, ssl.expm(a[0]), rtol=1e-5, atol=1e-5)
    with np.errstate(all="ignore"):
        assert np.isnan(esl.expm(np.full((2, 2), 1e30))).all()  # past max_squarings: NaN, as JAX


def test_gradients_match_finite_differences():
    a, s, b, _ = _inputs(2)
    v = b[0, :, 0]
    keys = ("solve_triangular-T-True-False-stack", "cho_solve", "lu_solve-trans")

    def loss(a, s, b):
        # cho_factor reads one triangle (its gradient is JAX's, not symmetric): a symmetrized input
        sym = (s + enp.swapaxes(s, -1, -2)) / 2
        return sum((OURS[k](a, sym, b, v) ** 2).sum() for k in keys)

    check_grads(loss, (a, s, b), argnums=(0, 1, 2))
    w = np.random.default_rng(3).normal(size=a.shape)  # expm with squarings (norms near 15)
    check_grads(lambda a: (esl.expm(a * 3.0) * w).sum(), (a,), rtol=1e-6)


def test_errors():
    with pytest.raises(IncompatibleShapesError, match="test_linalg.py"):
        esl.solve_triangular(np.ones((3, 3)), np.ones(2))
    with pytest.raises(IncompatibleShapesError):
        esl.cho_factor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="trans"):
        esl.solve_triangular(np.eye(2), np.ones(2), trans=3)
    with pytest.raises(ValueError, match="at most 2 dimensions"):
        esl.block_diag(np.ones((1, 1, 1)))
