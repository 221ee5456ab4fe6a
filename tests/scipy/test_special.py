"""ember.scipy.special's compositions (logsumexp, softmax, xlogy, entr, ndtr, ndtri, log_ndtr, gamma, betaln,
the Bessel functions, gammainc, betainc, ...) against live jax.scipy.special and SciPy: values of both
widths on grids with their edges (0, -0, infinities, nan, negative and out-of-domain arguments), the
dtypes integer arguments take, gradients (JAX's custom rules at x = 0, in the tails, in both arguments of
gammainc; finite differences), a few under jit (the suite's checker compares each with the oracle
backend) and vmap. Eager calls compile nothing: the jit and vmap cases are few and bundled."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as enn
import ember.scipy.special as sp
from ember.errors import DTypeError
from tests.scipy import cases as C

ss = pytest.importorskip("scipy.special")

RTOL = {"float32": 3e-6, "float64": 1e-13}
# float32 results that exponentiate a float32 lgamma carry its relative error times |lgamma|; XLA's
# float32 lgamma itself is off by 1e-5 near 1 and 2 (loggamma(0.9); tests/backends/test_math_special.py)
LOOSE = {"gamma": 3e-5, "factorial": 3e-5, "beta": 3e-5, "comb": 3e-5, "i0": 1e-5, "i1": 1e-5, "loggamma": 2e-5}
JAX = C.recorded()


@pytest.fixture(autouse=True)
def numpy_backend(request, monkeypatch):
    """Gradients and eager calls run on the numpy backend, the reference (nothing to compile); the
    tests named for jit run compiled code against it."""
    if "jit" not in request.node.name:
        monkeypatch.setenv("EMBER_BACKEND", "numpy")


def _close(got, want, rtol):
    return np.isclose(got, want, rtol=rtol, atol=rtol, equal_nan=True)


def assert_like(got, want: np.ndarray, rtol: float, what: str) -> None:
    """JAX's dtype and shape, values within `rtol` (nan where JAX has nan)."""
    got = np.asarray(got)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), f"{what}: {got.dtype}{got.shape}, JAX " \
                                                               f"{want.dtype}{want.shape}"
    ok = _close(got, want, rtol)
    assert ok.all(), f"{what}: {got[~ok]} where JAX gives {want[~ok]} (at {np.nonzero(~ok)})"


@pytest.mark.parametrize("dtype", C.FLOATS)
def test_values_match_jax_and_scipy(dtype):
    """Every function, eagerly, at both widths: JAX's values and dtype everywhere; SciPy's wherever
    JAX agrees with SciPy (JAX's own edge values, betaln(0, b) = nan for -inf, are the reference)."""
    for name, grids in C.SPECIAL.items():
        args = C.arguments(grids, dtype)
        got = np.asarray(getattr(sp, name)(*args))
        want = C.decode(JAX["special"][f"{name}/{dtype}"])
        rtol = max(RTOL[dtype], LOOSE.get(name, 0) if dtype == "float32" else 0)
        assert_like(got, want, rtol, f"{name} {dtype}")
        with np.errstate(all="ignore"):
            sci = getattr(ss, name)(*args)
        shared = _close(want, sci, 10 * rtol)
        assert shared.sum() >= len(got) // 2, f"{name}: JAX and SciPy disagree at most points"
        assert _close(got[shared], sci[shared], 10 * rtol).all(), name


def test_zeros_keep_their_signs_and_edges_are_exact():
    i1e = C.decode(JAX["special"]["i1e/float32"])
    assert np.signbit(np.asarray(sp.i1e(np.float32(-0.0)))) == np.signbit(i1e[C.X.index(-0.0)]) == True  # noqa: E712
    assert np.asarray(sp.gammasgn(np.array([-0.0, 0.0], np.float32))).tolist() == [-1.0, 1.0]
    assert np.asarray(sp.ndtri(np.array([0.0, 1.0]))).tolist() == [-np.inf, np.inf]
    assert float(sp.xlogy(0.0, 0.0)) == 0.0 and np.isnan(float(sp.xlogy(0.0, np.nan)))
    assert float(sp.xlog1py(0.0, -1.0)) == 0.0 and float(sp.entr(0.0)) == 0.0 and float(sp.entr(-1.0)) == -np.inf


@pytest.mark.parametrize("dtype", C.FLOATS)
def test_logsumexp_and_softmax_match_jax_and_scipy(dtype):
    a = np.array(C.A, dtype)
    for cid, kw in C.LOGSUMEXP.items():
        got = sp.logsumexp(a, **C.logsumexp_kwargs(kw, dtype))
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, JAX["special"][f"logsumexp {cid}/{dtype}"], strict=True):
            assert_like(g, C.decode(w), RTOL[dtype], f"logsumexp {cid}")
    finite = np.nan_to_num(a[:2], neginf=-3.0)
    rtol = 10 * RTOL[dtype]
    np.testing.assert_allclose(np.asarray(sp.logsumexp(finite, axis=1)), ss.logsumexp(finite, axis=1), rtol=rtol)
    for fn, sfn in ((sp.softmax, ss.softmax), (sp.log_softmax, ss.log_softmax)):
        for axis in (None, 0, 1):
            got = np.asarray(fn(finite, axis=axis))
            assert got.dtype == dtype
            np.testing.assert_allclose(got, sfn(finite, axis=axis), rtol=rtol, atol=rtol)
    # ember.nn's are these: the nn defaults (last axis) and the where= mask
    where = np.array(C.WHERE)[:2]
    assert np.array_equal(np.asarray(enn.softmax(finite)), np.asarray(sp.softmax(finite, axis=-1)))
    assert np.array_equal(np.asarray(enn.log_softmax(finite, where=where)),
                          np.asarray(sp.log_softmax(finite, axis=-1, where=where)))
    b = np.array(C.B, dtype)
    assert np.array_equal(np.asarray(enn.logsumexp(a, axis=1, b=b)), np.asarray(sp.logsumexp(a, axis=1, b=b)),
                          equal_nan=True)


@pytest.mark.parametrize("x64", [False, True])
def test_integer_arguments_take_jaxs_float_dtypes(x64):
    """Integers and bools become the default float (int64 float64), as promote_args_inexact; the ndtr
    family takes floats only (a TypeError, as in JAX)."""
    with ember.enable_x64(x64):
        for aid, x in C.int_arguments(x64).items():
            for name in C.INT_UNARY:
                assert str(np.asarray(getattr(sp, name)(x)).dtype) == JAX["int dtypes"][f"{name}/{aid}/{x64}"], name
            for name in C.INT_BINARY:
                got = str(np.asarray(getattr(sp, name)(x, 2.5)).dtype)
                assert got == JAX["int dtypes"][f"{name}/{aid}/{x64}"], name
        for name in ("ndtr", "ndtri", "log_ndtr"):
            with pytest.raises(DTypeError, match=f"{name}: x.dtype=int32 is not supported"):
                getattr(sp, name)(np.array([1, 2], np.int32))


def test_log_ndtr_checks_its_series_order():
    with pytest.raises(TypeError, match="series_order must be a Python integer"):
        sp.log_ndtr(np.float32(-12.0), 2.0)
    with pytest.raises(ValueError, match=r"series_order must be in \[0, 30\]"):
        sp.log_ndtr(np.float32(-12.0), 31)
    x = np.array([-30.0, -11.0], np.float32)
    for order in (0, 1, 5):
        assert_like(sp.log_ndtr(x, order), C.decode(JAX["special"][f"log_ndtr order {order}"]), 3e-6, str(order))


def _fd(fn, point, i):
    """A central difference in argument i, its step relative to the point."""
    eps = 1e-5 * abs(point[i])
    up, down = list(point), list(point)
    up[i] += eps
    down[i] -= eps
    return (float(fn(*up)) - float(fn(*down))) / (2 * eps)


def test_gradients_match_jax_and_finite_differences():
    """JAX's rules where they are not the plain derivative (xlogy at x = 0: log y, and 0/0 in y; i1e's
    1/2 at 0; log_ndtr's exp(logpdf - log_ndtr) deep in both tails), and finite differences where
    the function is smooth away from 0 (gammainc in a and x, betainc in x)."""
    with ember.enable_x64(), np.errstate(all="ignore"):  # JAX's rule is log(0) = -inf in xlogy(0, 0)
        for name, points, argnums in C.GRADS:
            fn = C.function(sp, name)
            grads = C.batched_grads(fn, points, argnums)
            for k, (point, wants) in enumerate(zip(points, JAX["grads"][name], strict=True)):
                for i, g, want in zip(argnums, grads, wants, strict=True):
                    got = float(g[k])
                    assert np.isclose(got, want, rtol=1e-9, equal_nan=True), (name, point, i, got, want)
                    if np.isfinite(got) and min(abs(p) for p in point) > 1e-3:
                        assert np.isclose(got, _fd(fn, point, i), rtol=2e-6, atol=1e-9), (name, point, i)
        second = ember.jit(ember.vmap(ember.grad(ember.grad(sp.log_ndtr))), backend="numpy", optimize=False)
        got = second(np.array(C.SECOND_LOG_NDTR))
        np.testing.assert_allclose(np.asarray(got), JAX["grads"]["log_ndtr second"], rtol=1e-9)


def test_logsumexp_gradients_match_jax():
    a = np.nan_to_num(np.array(C.A), neginf=-3.0, posinf=3.0)
    with ember.enable_x64():
        for cid, kw in C.LOGSUMEXP.items():
            if not kw.get("return_sign"):
                kwargs = C.logsumexp_kwargs(kw, np.float64)
                got = ember.grad(lambda v, k=kwargs: sp.logsumexp(v, **k).sum())(a)
                np.testing.assert_allclose(np.asarray(got), C.decode(JAX["grads"][f"logsumexp {cid}"]), rtol=1e-12,
                                           err_msg=cid)


def _bundle(x):
    """Many of the elementwise compositions in one function: one compile per dtype. The Bessel functions
    only in float32: their 30-term float64 series take the fusion pass a second each to group."""
    p = sp.expit(x) * 0.9 + 0.05  # (logit and ndtri near 1 would magnify expit's last bit)
    bessel = (sp.i0e(x), sp.i1e(x)) if x.dtype == np.float32 else ()
    return (sp.ndtr(x), sp.log_ndtr(x), sp.ndtri(p), sp.logit(p), sp.xlogy(x, p), sp.entr(p), *bessel,
            sp.gamma(x), sp.betaln(p, 2.0), sp.logsumexp(x), sp.softmax(x), sp.poch(p, x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_under_jit_as_eagerly(dtype):
    """One compiled function of a dozen of the compositions per width (the checker compares it with the
    oracle backend too), equal to the eager calls."""
    x = np.array([-25.0, -9.0, -1.5, -0.0, 0.25, 2.0, 7.5, 12.0], dtype)
    got, want = ember.jit(_bundle)(x), _bundle(x)
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=4e-6 if dtype == np.float32 else 1e-13)


def test_incomplete_gamma_and_beta_under_jit_and_vmap():
    """The while loops of gammainc, gammaincc and betainc compiled (one jit) and batched (vmap: each
    element iterates until it converges, as the unbatched call does)."""
    a = np.array([0.5, 2.0, 10.0, 100.0, 3.0])
    x = np.array([0.3, 3.0, 9.0, 120.0, 0.0])
    u = np.array([0.1, 0.5, 0.7, 0.99, 1.0])

    def f(a, x, u):
        return sp.gammainc(a, x), sp.gammaincc(a, x), sp.betainc(a, x + 1.0, u)

    with ember.enable_x64():
        want = (ss.gammainc(a, x), ss.gammaincc(a, x), ss.betainc(a, x + 1.0, u))
        for got in (ember.jit(f)(a, x, u), ember.vmap(f)(a, x, u)):
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-300)
