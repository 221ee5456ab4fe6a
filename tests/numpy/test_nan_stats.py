"""NaN-ignoring reductions, `where=`/`initial=` on the reductions, weighted statistics (average, cov,
corrcoef), comparisons of whole arrays, polynomials, binning (bincount, histogram, histogram2d) and
interp: values against NumPy eagerly, JAX where it differs (all-NaN slices, integer inputs), a
representative set under jit (both backends; checked against the oracle), gradients against jax.grad
in float64, vmap against a loop, and the errors."""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jjnp
import numpy as np

import ember
import ember.numpy as jnp
from ember.errors import ArgumentValueError, ConcretizationError, IncompatibleShapesError
from tests.helpers import loop_vmap, raises_naming
from tests.numpy.cases import assert_matches

RNG = np.random.default_rng(1)
X = RNG.standard_normal((3, 4)).astype(np.float32)
XN = X.copy()
XN[0, 1] = XN[2, 3] = XN[1, 0] = np.nan  # some NaNs, no all-NaN slice
XALL = XN.copy()
XALL[1] = np.nan  # an all-NaN row
I = RNG.integers(-4, 5, (3, 4)).astype(np.int32)
MASK = RNG.random((3, 4)) < 0.6
MASK[:, 0] = True  # every row and column selects something
MASK[0] = True
# read by test_math's every-function check
COVERED = {"nansum", "nanprod", "nanmax", "nanmin", "nanargmax", "nanargmin", "nanmean", "nanvar", "nanstd",
           "average", "cov", "corrcoef", "isclose", "allclose", "array_equal", "array_equiv", "polyval", "polyadd",
           "polysub", "histogram", "histogram2d", "histogram_bin_edges", "bincount", "interp", "polyfit", "polydiv",
           "vander", "polymul"}
NAN_FUNCS = ("nansum", "nanprod", "nanmax", "nanmin", "nanargmax", "nanargmin", "nanmean", "nanvar", "nanstd")


def test_nan_reductions_match_numpy():
    for name in NAN_FUNCS:
        for axis in ((None, 0, 1, -1) if "arg" in name else (None, 0, -1, (0, 1))):
            for keepdims in (False, True):
                want = getattr(np, name)(XN, axis=axis, keepdims=keepdims)
                got = getattr(jnp, name)(XN, axis=axis, keepdims=keepdims)
                dtype = np.int32 if "arg" in name else np.float32
                assert_matches(got, want, dtype, what=f"{name} axis={axis} keepdims={keepdims}")
    for name in ("nanvar", "nanstd"):
        assert_matches(getattr(jnp, name)(XN, 1, ddof=1), getattr(np, name)(XN, 1, ddof=1), np.float32, what=name)


def test_nan_reductions_as_jax():
    """All-NaN slices (NaN, or -1 for the arg functions, without a warning or an error) and integer
    inputs (nanmean of int32 is float32), as JAX gives them."""
    calls = []
    for name in NAN_FUNCS:
        for x, kw in ((XALL, {"axis": 1}), (I, {"axis": 0}), (XALL, {"axis": 1, "where": MASK}),
                      (XN, {"axis": 0, "ddof": 3})):
            if ("where" in kw and "arg" in name) or ("ddof" in kw and name not in ("nanvar", "nanstd")):
                continue
            if name in ("nanmax", "nanmin") and "where" in kw:
                kw = {**kw, "initial": 0.25}
            calls.append((name, x, kw))
    with jax.enable_x64(False):  # one compiled JAX function for all the references
        refs = jax.jit(lambda: [getattr(jjnp, name)(x, **kw) for name, x, kw in calls])()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from an all-NaN slice
        for (name, x, kw), ref in zip(calls, refs):
            assert_matches(getattr(jnp, name)(x, **kw), np.asarray(ref), ref.dtype, what=f"{name} {kw}")


def test_where_and_initial_match_numpy():
    cases = [("sum", {"where": MASK}), ("sum", {"initial": 2.5, "axis": 1}), ("prod", {"where": MASK, "axis": 0}),
             ("prod", {"initial": -2}), ("max", {"where": MASK, "initial": 0.0, "axis": 1}),
             ("min", {"where": MASK, "initial": 5.0, "axis": 0, "keepdims": True}), ("max", {"initial": 9.0}),
             ("mean", {"where": MASK, "axis": 1}), ("mean", {"where": MASK[0]}),
             ("var", {"where": MASK, "axis": 0, "ddof": 1}), ("std", {"where": MASK}),
             ("any", {"where": MASK, "axis": 1}), ("all", {"where": MASK, "axis": 0}),
             ("nansum", {"where": MASK, "initial": 1.0}), ("nanmean", {"where": MASK, "axis": 1}),
             ("nanmax", {"where": MASK, "initial": -1.0, "axis": 0})]
    for name, kw in cases:
        x = X > 0 if name in ("any", "all") else (XN if name.startswith("nan") else X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a column var(where=) selects once: 0/0, both warn
            want = getattr(np, name)(x, **kw)
            got = getattr(jnp, name)(x, **kw)
        assert_matches(got, want, want.dtype, what=f"{name} {kw}")
    with jax.enable_x64(False):  # integer sums with a float initial: converted to the int result, as JAX
        for name in ("sum", "prod", "max"):
            ref = getattr(jjnp, name)(I, initial=2.5)
            assert_matches(getattr(jnp, name)(I, initial=2.5), np.asarray(ref), ref.dtype, what=name)


def test_weighted_statistics_match_numpy():
    y = RNG.standard_normal((2, 5)).astype(np.float32)
    fw = np.array([1, 2, 1, 3, 1])
    aw = np.array([0.5, 1.0, 2.0, 1.0, 0.25], np.float32)
    w34 = RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    cases = [
        ("average", lambda m: m.average(X)), ("average_axis", lambda m: m.average(X, axis=1, weights=w34[0])),
        ("average_full", lambda m: m.average(X, weights=w34, keepdims=True)),
        ("average_returned", lambda m: m.average(X, 0, w34, returned=True)),
        ("cov", lambda m: m.cov(y)), ("cov_cols", lambda m: m.cov(y.T, rowvar=False)),
        ("cov_bias", lambda m: m.cov(y, bias=True)), ("cov_ddof", lambda m: m.cov(y, ddof=2)),
        ("cov_y", lambda m: m.cov(y[0], y[1])), ("cov_1d", lambda m: m.cov(y[0])),
        ("cov_fw", lambda m: m.cov(y, fweights=fw)), ("cov_aw", lambda m: m.cov(y, aweights=aw)),
        ("cov_both", lambda m: m.cov(y, fweights=fw, aweights=aw, ddof=0)),
        ("cov_both_ddof", lambda m: m.cov(y, fweights=fw, aweights=aw)),
        ("corrcoef", lambda m: m.corrcoef(X)), ("corrcoef_y", lambda m: m.corrcoef(y[0], y[1], rowvar=True)),
    ]
    for label, call in cases:
        want = call(np)
        got = call(jnp)
        dt = [np.float32] * 2 if isinstance(want, tuple) else np.float32
        assert_matches(got, want, dt, rtol=1e-5, atol=1e-6, what=label)
    with jax.enable_x64(False):  # integer inputs are float32 in JAX (NumPy: float64)
        for got, ref in ((jnp.cov(I), jjnp.cov(I)), (jnp.average(I, 1), jjnp.average(I, 1)),
                         (jnp.corrcoef(I), jjnp.corrcoef(I))):
            assert_matches(got, np.asarray(ref), ref.dtype, rtol=1e-5, atol=1e-6)


def test_comparisons_and_polynomials_match_numpy():
    near = X + np.float32(2e-5) * np.sign(X)
    nans = np.array([np.nan, 1.0, np.inf, -np.inf], np.float32)
    cases = [
        ("isclose", lambda m: m.isclose(X, near)), ("isclose_tol", lambda m: m.isclose(X, near, rtol=1e-3, atol=0)),
        ("isclose_nan", lambda m: m.isclose(nans, nans)),
        ("isclose_equal_nan", lambda m: m.isclose(nans, nans, 0, 0, True)),
        ("isclose_int", lambda m: m.isclose(I, I + 1, atol=1)),
        ("allclose", lambda m: m.allclose(X, near)), ("allclose_atol", lambda m: m.allclose(X, near, atol=1e-3)),
        ("array_equal", lambda m: m.array_equal(X, X)), ("array_equal_shape", lambda m: m.array_equal(X, X[0])),
        ("array_equal_nan", lambda m: m.array_equal(nans, nans)),
        ("array_equal_equal_nan", lambda m: m.array_equal(nans, nans, equal_nan=True)),
        ("array_equiv", lambda m: m.array_equiv(X[:1], np.concatenate([X[:1]] * 2))),
        ("array_equiv_no", lambda m: m.array_equiv(X, X[:2])),
        ("polyval", lambda m: m.polyval(np.array([1.5, -2, 0.5, 3], np.float32), X)),
        ("polyadd", lambda m: m.polyadd(np.array([1.5, -2], np.float32), np.array([1, 2, 3], np.float32))),
        ("polysub", lambda m: m.polysub(np.array([1.5, -2, 4, 1], np.float32), np.array([1, 2], np.float32))),
    ]
    for label, call in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = np.asarray(call(np))
        assert_matches(call(jnp), want, np.float32 if want.dtype == np.float64 else want.dtype, what=label)


def _fits(m, x, y, w):
    """polyfit in each form, vander, polydiv's quotient and interp's period, over a module m."""
    xp = np.array([0.0, 1.5, 3.0, 4.5]) * (np.pi / 3)
    return (m.polyfit(x, y[:, 0], 3), m.polyfit(x, y, 2, w=w), *m.polyfit(x, y[:, 1], 4, full=True)[:4],
            *m.polyfit(x, y[:, 0], 2, cov=True), m.polyfit(x, y, 1, cov=True)[1], m.polyfit(x, y, 2, cov="unscaled")[1],
            m.vander(x[:4]), m.vander(x[:3], 5, increasing=True), m.polydiv(y[:6, 0], y[:3, 1])[0],
            m.interp(x * 4, xp, np.sin(xp), period=2 * np.pi), m.interp(x * 4, xp[::-1], np.cos(xp), period=-np.pi))


def test_polynomial_fits_and_periodic_interp():
    """Values against NumPy in float64, polydiv's untrimmed remainder and interp's extrapolation against JAX,
    dtypes against jax.eval_shape, and one compiled function against the eager results."""
    x = np.linspace(-1.0, 2.0, 9)
    y = np.stack([np.sin(3 * x), np.cos(x) + x ** 2], 1)
    w = np.linspace(1.0, 2.0, 9)
    got, want = _fits(jnp, x, y, w), _fits(np, x, y, w)
    assert_matches(list(got), [np.asarray(v) for v in want], [np.float64] * 4 + [np.int32] + [np.float64] * 10,
                   what="fits")
    u, v = np.float32([1, 2, 3, 4, 5]), np.float32([2, 1, 3])
    with jax.enable_x64(False):
        for call in (lambda m: m.polydiv(u, v), lambda m: m.polydiv(v, u), lambda m: m.polydiv(u, v[:1]),
                     lambda m: m.polydiv(u, v, trim_leading_zeros=True),
                     lambda m: (m.polymul(u, v), m.polymul(np.int32([0, 0, 1, 2]), np.int32([3, 0]))),
                     lambda m: m.interp(u * 0.7, v[[1, 0, 2]], u[:3], left="extrapolate", right="extrapolate")):
            ref = call(jjnp)
            assert_matches(list(call(jnp)), [np.asarray(r) for r in ref], [r.dtype for r in ref], what="vs jax")
    for a1, a2 in ((u - 1, v[1:] * 0), (np.float32([0, 0, 2]), v)):  # trimmed: NumPy's products
        assert_matches(jnp.polymul(a1, a2, trim_leading_zeros=True), np.polymul(a1, a2), np.float32, what="polymul")
    picked = (1, 6, 7, 12, 13)  # a weighted 2-D fit, one with its covariance, polydiv, periodic interp
    compiled = ember.jit(lambda x, y, w: tuple(_fits(jnp, x, y, w)[i] for i in picked))(x, y, w)
    for i, g in zip(picked, compiled, strict=True):
        np.testing.assert_allclose(g, got[i], rtol=1e-9, atol=1e-12, err_msg=f"output {i}")


def test_binning_matches_numpy():
    a = RNG.standard_normal(40).astype(np.float32)
    b = RNG.standard_normal(40).astype(np.float32)
    w = RNG.uniform(0, 2, 40).astype(np.float32)
    edges = np.array([-2.0, -0.5, 0.0, 0.3, 2.0], np.float32)
    ints = np.array([0, 3, 1, 1, 7, 0, 3])
    cases = [
        ("histogram", lambda m: m.histogram(a), None), ("histogram_range", lambda m: m.histogram(a, 5, (-1, 1)), None),
        ("histogram_edges", lambda m: m.histogram(a, edges, weights=w), None),
        ("histogram_density", lambda m: m.histogram(a, 6, density=True), None),
        ("histogram_flat", lambda m: m.histogram(np.ones(4, np.float32), 3), None),
        ("histogram_bin_edges", lambda m: m.histogram_bin_edges(a.reshape(5, 8), 7, (-1.5, 2)), None),
        ("histogram2d", lambda m: m.histogram2d(a, b, 4), None),
        ("histogram2d_edges", lambda m: m.histogram2d(a, b, [3, edges], weights=w, density=True), None),
        ("bincount", lambda m: m.bincount(ints), np.int32), ("bincount_w", lambda m: m.bincount(ints, w[:7]), None),
        ("bincount_min", lambda m: m.bincount(ints, minlength=10), np.int32),
        ("interp", lambda m: m.interp(a, edges, np.array([1, 3, 2, 0, 5], np.float32)), None),
        ("interp_lr", lambda m: m.interp(a, edges, np.array([1, 3, 2, 0, 5], np.float32), -7.0, 9.0), None),
    ]
    for label, call, dtype in cases:
        want = call(np)
        got = call(jnp)
        if isinstance(want, tuple):
            assert_matches(list(got), [np.asarray(v) for v in want], [np.float32] * len(want), what=label)
        else:
            assert_matches(got, want, dtype or np.float32, what=label)
    with jax.enable_x64(False):  # negative values count as 0, and values past `length` are dropped, as JAX
        x = np.array([0, -2, 1, 5, 9, 1], np.int32)
        for kw in ({"length": 6}, {"length": 3, "weights": w[:6]}):
            ref = jjnp.bincount(x, **kw)
            assert_matches(jnp.bincount(x, **kw), np.asarray(ref), ref.dtype, what=f"bincount {kw}")


def _stats(x, w):
    """A representative mix compiled once per backend (the suite checks it against the oracle)."""
    return (jnp.nanmean(x, 1), jnp.nanmax(x, 0), jnp.nanargmin(x, 1), jnp.nanvar(x, 0, ddof=1), jnp.nansum(x),
            jnp.sum(w, 1, where=w > 1, initial=0.5), jnp.max(w, 0, where=w < 1.5, initial=-3.0),
            jnp.mean(w, where=w > 1), jnp.var(w, 1, where=w > 0.7), jnp.average(w, 1, w[0], returned=True)[1],
            jnp.cov(w), jnp.corrcoef(w), jnp.isclose(w, w + 1e-6), jnp.polyval(w[0], w),
            jnp.histogram(w, 5, (0, 2))[0], jnp.bincount(jnp.argmax(w, 0), length=4),
            jnp.interp(w, np.array([0.5, 1, 2], np.float32), w[1, :3]))


def test_stats_under_jit():
    w = RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    w[1, :3] = [0.25, 1.5, 0.75]
    want = _stats(XALL, w)
    got = ember.jit(_stats)(XALL, w)
    for i, (g, v) in enumerate(zip(got, want)):
        assert_matches(g, np.asarray(v), v.dtype, what=f"output {i}")


def _grad_inputs():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5))
    xn = x.copy()
    xn[1, 2] = np.nan
    return x, xn, rng.uniform(0.5, 2.0, 5)


def _loss(m, x, xn, w):
    """Differentiable uses, each weighted so that no gradient can hide in another's."""
    mask = np.asarray(_grad_inputs()[0]) > -0.5
    terms = (m.sum(m.nanmean(xn, 1) * np.arange(1.0, 4.0)), m.sum(m.nanvar(xn, 0) * np.arange(5.0)),
             m.sum(m.average(x, 1, w) ** 2), m.sum(m.cov(x, aweights=w) * np.arange(9.0).reshape(3, 3)),
             m.sum(m.corrcoef(x) ** 2), m.sum(x, where=mask) * 2, m.sum(m.var(x, 1, where=mask) ** 2),
             m.max(x, 1, where=mask, initial=-1.0).sum(), m.sum(m.interp(x, np.array([-1.0, 0, 2]), w[:3])),
             m.sum(m.polyval(w[:3], x)), m.sum(m.nanmax(xn, 0)),
             m.sum(m.polyfit(w, x[0], 2) * np.arange(1.0, 4.0)), m.sum(m.polydiv(x[1], w[:3])[0]),
             m.sum(m.polymul(x[2], w[:3]) * np.arange(7.0)),
             m.sum(m.interp(x, np.array([-1.0, 0, 2]), w[:3], period=3.0) * x))
    return sum(t * (i + 1) for i, t in enumerate(terms))


@functools.cache
def _jax_grads() -> list:
    x, xn, w = _grad_inputs()
    with jax.enable_x64(True):
        return [np.asarray(g) for g in jax.jit(jax.grad(lambda x, xn: _loss(jjnp, x, xn, w), argnums=(0, 1)))(x, xn)]


def test_grads_match_jax():
    x, xn, w = _grad_inputs()
    got = ember.grad(lambda x, xn: _loss(jnp, x, xn, w), argnums=(0, 1))(x, xn)
    assert_matches(list(got), _jax_grads(), [np.float64] * 2)


def test_vmap_matches_a_loop():
    def f(x, w):
        return jnp.nanmean(x) + jnp.sum(jnp.cov(x, aweights=w)) + jnp.average(x, 1, w)[0] + jnp.sum(x, where=x > 0)

    xs = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    xs[1, 0, 2] = np.nan
    ws = RNG.uniform(0.5, 2.0, (4, 5)).astype(np.float32)
    np.testing.assert_allclose(ember.vmap(f)(xs, ws), loop_vmap(f, (0, 0), (xs, ws)), rtol=1e-5)


def test_bad_input_names_the_users_line():
    here = "test_nan_stats.py"
    for exc, call, words in (
            (ArgumentValueError, lambda: jnp.max(X, where=MASK), ("max", "initial")),
            (ArgumentValueError, lambda: jnp.sum(X, initial=np.ones(2)), ("initial", "scalar")),
            (IncompatibleShapesError, lambda: jnp.sum(X, where=MASK[:2]), ("where",)),
            (ConcretizationError, lambda: ember.jit(jnp.bincount)(np.array([1, 2])), ("bincount", "length")),
            (ArgumentValueError, lambda: jnp.average(X, weights=X[0]), ("average", "axis")),
            (ArgumentValueError, lambda: jnp.average(X, 0, X[0]), ("weights",)),
            (ArgumentValueError, lambda: jnp.cov(np.ones((2, 2, 2))), ("cov", "2 dimensions")),
            (ArgumentValueError, lambda: jnp.interp(X, X, X), ("interp", "1-D")),
            (ArgumentValueError, lambda: jnp.interp(X, X[0], X[1], period=X[0]), ("period", "scalar")),
            (ArgumentValueError, lambda: jnp.interp(X, X[0], X[1], left="linear"), ("left", "extrapolate")),
            (ArgumentValueError, lambda: jnp.polyfit(X[0], X[1], -1), ("deg >= 0",)),
            (TypeError, lambda: jnp.polyfit(X, X, 1), ("1D vector for x",)),
            (TypeError, lambda: jnp.polyfit(X[0], X[1, :3], 1), ("same length",)),
            (TypeError, lambda: jnp.polyfit(X[0], X[1], 1, w=X), ("1-d array for weights",)),
            (ArgumentValueError, lambda: jnp.polyfit(X[0], X[1], 3, cov=True), ("exceed order",)),
            (ConcretizationError, lambda: ember.jit(lambda u: jnp.polydiv(u, X[0], trim_leading_zeros=True))(X[1]),
             ("trim_leading_zeros", "concrete")),
            (ConcretizationError, lambda: ember.jit(lambda u: jnp.polymul(u, X[0], trim_leading_zeros=True))(X[1]),
             ("polymul", "concrete")),
            (ArgumentValueError, lambda: jnp.vander(X), ("one-dimensional",))):
        raises_naming(exc, call, words=words, location=here)


REPLAYED = (("nanmean", lambda m, x, i: m.nanmean(x, 1)), ("cov", lambda m, x, i: m.cov(x[1:])),
            ("average", lambda m, x, i: m.average(x[1:], 0, x[0, :2])), ("bincount", lambda m, x, i: m.bincount(i)),
            ("histogram", lambda m, x, i: m.histogram(x[1:], 4)[0]), ("isclose", lambda m, x, i: m.isclose(x, x[0])),
            ("interp", lambda m, x, i: m.interp(x[1], np.array([-1.0, 0, 1], np.float32), x[2, :3])))


def test_eager_replay_follows_new_values():
    """Repeated eager calls of one signature replay a recorded graph (ember/numpy/_eager.py): they must
    follow each call's values, including bincount's length (from x's values: never replayed)."""
    rng = np.random.default_rng(7)
    for _ in range(4):
        x = rng.standard_normal((3, 5)).astype(np.float32)
        x[0, rng.integers(5)] = np.nan
        ints = rng.integers(0, rng.integers(2, 9), 6)
        for label, call in REPLAYED:
            want = call(np, x, ints)
            # JAX's dtypes: float32 for NumPy's float64, counts as int32, histogram counts as floats
            dtype = {np.dtype(np.float64): np.float32, np.dtype(np.int64): np.int32}.get(want.dtype, want.dtype)
            dtype = np.float32 if label == "histogram" else dtype
            assert_matches(call(jnp, x, ints), want, dtype, rtol=1e-5, atol=1e-6, what=label)
