"""ember.scipy.stats's distributions against jax.scipy.stats 0.10.2 (answers recorded in
tests/scipy/jax_values.json by tests/scipy/record_jax.py) and live scipy.stats: every method at both
widths on grids through the support's edges (infinities, nan, out-of-support points, loc/scale as Python
scalars), dirichlet's simplex check and argument errors, multivariate_normal (Cholesky, stacks, scalar
covariances, indefinite input), gradients (norm.logcdf deep in both tails,
the cdfs in their parameters; finite differences), and a bundle under jit and vmap."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy.stats as st
from ember.errors import ArgumentValueError
from tests.scipy import cases as C

sst = pytest.importorskip("scipy.stats")

RTOL = {"float32": 3e-6, "float64": 1e-13}
JAX = C.recorded()["stats"]


@pytest.fixture(autouse=True)
def numpy_backend(request, monkeypatch):
    """Eager calls and gradients run on the numpy backend, the reference (nothing to compile); the test
    named for jit runs compiled code against it."""
    if "jit" not in request.node.name:
        monkeypatch.setenv("EMBER_BACKEND", "numpy")


def _close(got, want, rtol):
    return np.isclose(got, want, rtol=rtol, atol=rtol, equal_nan=True)


@pytest.mark.parametrize("dtype", C.FLOATS)
def test_methods_match_jax_and_scipy(dtype):
    """Each method, eagerly: JAX's dtype and values everywhere; SciPy's wherever JAX agrees with it."""
    for dist, method, args in C.STATS:  # (64-bit mode on for float64, as recorded: norm.ppf gives the default float)
        what = f"{dist}.{method}{args[1:]} {dtype}"
        arguments = C.arguments(args, dtype)
        with np.errstate(all="ignore"), ember.enable_x64(dtype == "float64"):
            got = np.asarray(getattr(getattr(st, dist), method)(*arguments))
            sci = getattr(getattr(sst, dist), method)(*arguments)
        want = C.decode(JAX[f"{dist}.{method}{args[1:]}/{dtype}"])
        assert (got.dtype, got.shape) == (want.dtype, want.shape), f"{what}: {got.dtype}, JAX {want.dtype}"
        # (tan and logit near 0 and 1; entropy sums 250 float32 terms in another order than XLA)
        rtol = 10 * RTOL[dtype] if method in ("ppf", "isf", "entropy") else RTOL[dtype]
        ok = _close(got, want, rtol)
        assert ok.all(), f"{what}: {got[~ok]} where JAX gives {want[~ok]} (at {np.nonzero(~ok)})"
        shared = _close(want, sci, 10 * rtol)
        assert shared.sum() >= len(got) // 2, f"{what}: JAX and SciPy disagree at most points"
        assert _close(got[shared], sci[shared], 10 * rtol).all(), what


@pytest.mark.parametrize("dtype", C.FLOATS)
def test_dirichlet_matches_jax_and_scipy(dtype):
    x, alpha = np.array(C.DIRICHLET_X, dtype), np.array(C.DIRICHLET_ALPHA, dtype)
    logpdf, pdf = JAX[f"dirichlet/{dtype}"]
    got = np.asarray(st.dirichlet.logpdf(x, alpha))
    np.testing.assert_allclose(got, C.decode(logpdf), rtol=RTOL[dtype])
    assert got.dtype == dtype and np.isneginf(got[[2, 4]]).all()  # off the simplex
    np.testing.assert_allclose(np.asarray(st.dirichlet.pdf(x[:2], alpha)), C.decode(pdf), rtol=10 * RTOL[dtype])
    np.testing.assert_allclose(got[[0, 1, 3]], [sst.dirichlet.logpdf(x[:, i], alpha) for i in (0, 1, 3)],
                               rtol=10 * RTOL[dtype])


def test_dirichlet_rejects_shapes_as_jax_does():
    with pytest.raises(ArgumentValueError, match=r"`alpha` must be one-dimensional; got alpha.shape=\(1, 3\)"):
        st.dirichlet.logpdf(np.ones(3) / 3, np.ones((1, 3)))
    with pytest.raises(ArgumentValueError, match=r"got x.shape=\(5,\), alpha.shape=\(3,\)") as info:
        st.dirichlet.pdf(np.ones(5) / 5, np.ones(3))
    assert "test_stats.py" in str(info.value)  # the user's line


@pytest.mark.parametrize("dtype", C.FLOATS)
def test_multivariate_normal_matches_jax_and_scipy(dtype):
    """A matrix, a stack of them broadcast against x, a scalar covariance, a scalar mean; a covariance that
    is not symmetric is read symmetrized and an indefinite one gives nan, as JAX's."""
    for cid in C.MVN:
        args = C.mvn_arguments(cid, dtype)
        for method, want in zip(("logpdf", "pdf"), JAX[f"multivariate_normal {cid}/{dtype}"], strict=True):
            got = np.asarray(getattr(st.multivariate_normal, method)(*args))
            want = C.decode(want)
            assert (got.dtype, got.shape) == (want.dtype, want.shape), (cid, method, got.dtype, got.shape)
            np.testing.assert_allclose(got, want, rtol=10 * RTOL[dtype], err_msg=f"{cid} {method}")
    x, mean, cov = C.mvn_arguments("matrix", dtype)
    np.testing.assert_allclose(np.asarray(st.multivariate_normal.logpdf(x, mean, cov)),
                               sst.multivariate_normal.logpdf(x, mean, cov), rtol=10 * RTOL[dtype])
    with pytest.raises(ArgumentValueError, match=r"incompatible shapes: mean \(3,\), cov \(2, 2\)"):
        st.multivariate_normal.logpdf(x, mean, np.eye(2))
    with pytest.raises(NotImplementedError, match="allow_singular"):
        st.multivariate_normal.logpdf(x, mean, cov, allow_singular=True)


def _fd(fn, point, i):
    eps = 1e-6 * max(abs(point[i]), 1.0)
    up, down = list(point), list(point)
    up[i] += eps
    down[i] -= eps
    return (float(fn(*up)) - float(fn(*down))) / (2 * eps)


def test_gradients_match_jax_and_finite_differences():
    """norm.logcdf keeps log_ndtr's gradient deep in both tails (-40: 40.02; 12: 2e-32), the cdfs are
    differentiable in their shape parameters where JAX's are (gamma in a, chi2 in df), and dirichlet in
    alpha."""
    with ember.enable_x64(), np.errstate(all="ignore"):  # (bernoulli at k = 0: JAX's rule reads log 0)
        for dist, method, points, argnums in C.STATS_GRADS:
            fn = getattr(getattr(st, dist), method)
            grads = C.batched_grads(fn, points, argnums)
            for k, (point, wants) in enumerate(zip(points, JAX[f"grad {dist}.{method}"], strict=True)):
                for i, g, want in zip(argnums, grads, wants, strict=True):
                    got = float(g[k])
                    assert np.isclose(got, want, rtol=1e-9, atol=1e-300), (dist, method, point, i, got, want)
                    assert np.isclose(got, _fd(fn, point, i), rtol=1e-5, atol=1e-9), (dist, method, point, i)
        x, alpha = np.array(C.DIRICHLET_X)[:, 1:4], np.array(C.DIRICHLET_ALPHA)
        got = ember.grad(lambda a: st.dirichlet.logpdf(x, a).sum())(alpha)
        np.testing.assert_allclose(np.asarray(got), C.decode(JAX["grad dirichlet"]), rtol=1e-10)
        # multivariate_normal in its mean and (through cholesky and the triangular solve) its covariance
        args = C.mvn_arguments("matrix", "float64")
        for i, arg in ((1, "mean"), (2, "cov")):
            got = ember.grad(lambda *a: st.multivariate_normal.logpdf(*a).sum(), argnums=i)(*args)
            np.testing.assert_allclose(np.asarray(got), C.decode(JAX[f"grad multivariate_normal {arg}"]), rtol=1e-10,
                                       atol=1e-14)


def _bundle(x, loc):
    """Several distributions in one function (one compile; the incomplete gamma and beta loops compile in
    test_special.py)."""
    u = st.logistic.cdf(x) * 0.9 + 0.05  # (in (0, 1) away from its ends, where expit's last bit would count)
    return (st.norm.logcdf(x, loc), st.norm.ppf(u, loc), st.t.logpdf(x, 3.0, loc), st.gamma.logpdf(x, 2.5),
            st.beta.logpdf(u, 2.0, 3.0), st.poisson.logpmf(x, 2.5), st.cauchy.sf(x, loc), st.expon.logcdf(x),
            st.laplace.cdf(x, loc), st.uniform.logpdf(x, loc),
            st.multivariate_normal.logpdf(jnp.stack([x, loc], axis=-1), jnp.zeros(2), jnp.array(COV_2X2)))


COV_2X2 = [[2.0, 0.5], [0.5, 1.0]]


def test_under_jit_and_vmap_as_eagerly():
    x = np.array([-30.0, -2.0, 0.0, 1.0, 3.0, 12.0], np.float32)
    loc = np.array([0.0, 0.5, -1.0, 2.0, 0.0, 1.0], np.float32)
    with np.errstate(all="ignore"):  # (expon.logcdf below 0 is log 0, eagerly)
        want, batched = _bundle(x, loc), ember.vmap(_bundle)(x, loc)
    for got in (ember.jit(_bundle)(x, loc), batched):
        for g, w in zip(got, want, strict=True):
            assert np.asarray(g).dtype == np.float32
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
