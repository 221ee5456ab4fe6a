"""ember.numpy's tan, arctan, arcsin, arccos, arctan2, sinh, cosh, arcsinh, arccosh, arctanh (and their
NumPy 2 names atan, asin, ...): values against NumPy eagerly and under jit, result dtypes, gradients and
second derivatives against JAX (special points included: the ends of the domains, atan2 at the origin),
vmap, and fusion into one kernel. Each test traces every function at once, so it compiles a few graphs
per backend (both backends: tests/numpy runs under each)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import ember
import ember.numpy as jnp

jax = pytest.importorskip("jax")

# ember.numpy name -> (NumPy 2 alias, where its inputs lie)
UNARY = {
    "tan": (None, (-1.4, 1.4)), "arctan": ("atan", (-5.0, 5.0)), "arcsin": ("asin", (-0.95, 0.95)),
    "arccos": ("acos", (-0.95, 0.95)), "sinh": (None, (-5.0, 5.0)), "cosh": (None, (-5.0, 5.0)),
    "arcsinh": ("asinh", (-5.0, 5.0)), "arccosh": ("acosh", (1.05, 5.0)), "arctanh": ("atanh", (-0.95, 0.95)),
}
ALIASES = {alias: name for name, (alias, _) in UNARY.items() if alias} | {"atan2": "arctan2"}
COVERED = set(UNARY) | set(ALIASES) | {"arctan2"}   # read by test_math's every-function check

# values where the derivatives are infinite or undefined, or the function saturates; NaN where JAX's is NaN
SPECIAL = {
    "tan": [0.0, -0.0, 1.5, 1e3], "arctan": [0.0, 1e20, -1e20, 1.0], "arcsin": [0.0, 1.0, -1.0, 0.999],
    "arccos": [0.0, 1.0, -1.0, 0.999], "sinh": [0.0, 30.0, -30.0, 1e-8], "cosh": [0.0, 30.0, -30.0, 1e-8],
    "arcsinh": [0.0, 1e10, -1e10, 1e-8], "arccosh": [1.0, 1.0 + 1e-12, 1e10, 2.0],
    "arctanh": [0.0, 1.0, -1.0, 0.999],
}
ATAN2_SPECIAL = ([0.0, 1.0, -1.0, 0.0, 1e-20, 3.0], [0.0, 0.0, -1.0, -2.0, 1e20, 1e-30])


def _points(dtype, n: int = 7, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(lo, hi, n).astype(dtype) for name, (_, (lo, hi)) in UNARY.items()}


def _all_unary(xs: dict) -> dict:
    return {name: getattr(jnp, name)(x) for name, x in xs.items()}


def _jax_fn(name: str):
    return getattr(jax.numpy, name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_match_numpy(ember_backend, dtype):
    xs = _points(dtype, 64)
    xs = {name: np.concatenate([x, np.array(SPECIAL[name] + [np.nan, np.inf, -np.inf, 2.5, -2.5], dtype)])
          for name, x in xs.items()}
    y, x = (np.array(v, dtype) for v in ATAN2_SPECIAL)
    y = np.concatenate([y, xs["sinh"], np.array([np.inf, -np.inf, 0.0], dtype)])
    x = np.concatenate([x, xs["cosh"], np.array([-np.inf, 1.0, -0.0], dtype)])
    with np.errstate(all="ignore"):
        want = {name: getattr(np, name)(v) for name, v in xs.items()} | {"arctan2": np.arctan2(y, x)}
        eager = _all_unary(xs) | {"arctan2": jnp.arctan2(y, x)}
        traced = ember.jit(lambda xs, y, x: _all_unary(xs) | {"arctan2": jnp.arctan2(y, x)})(xs, y, x)
    tol = {np.float32: 4e-7, np.float64: 5e-16}[dtype]
    for name, w in want.items():
        for got in (eager[name], traced[name]):
            assert got.dtype == dtype, name
            np.testing.assert_allclose(got, w, rtol=tol, atol=0, equal_nan=True, err_msg=name)
            np.testing.assert_array_equal(np.signbit(got[w == 0]), np.signbit(w[w == 0]), err_msg=name)


def test_aliases_compute_the_same_and_take_no_lists():
    x = np.array([0.25, -0.5], np.float32)
    for alias, name in ALIASES.items():
        args = (x, x[::-1]) if name == "arctan2" else (x,)
        np.testing.assert_array_equal(getattr(jnp, alias)(*args), getattr(jnp, name)(*args))
        assert alias in jnp.__all__ and name in jnp.__all__
        with pytest.raises(TypeError, match=f"{alias} requires arrays"):
            getattr(jnp, alias)(*([0.5, 1.0] for _ in args))


def test_dtypes_follow_jax():
    """Integers become float32, float16 stays float16 (computed in float32), weak scalars keep the array's
    dtype: as jax.numpy (shapes and dtypes only: nothing is compiled)."""
    i = np.arange(1, 4, dtype=np.int32)
    h = np.array([0.25, 0.5], np.float16)

    def traced(fn, *args):
        return np.dtype(ember.make_graph(fn)(*args).outputs[0].aval.dtype)

    with jax.enable_x64(False):
        for name in UNARY:
            for x in (i, h):
                want = jax.eval_shape(_jax_fn(name), x).dtype
                assert getattr(jnp, name)(x).dtype == traced(getattr(jnp, name), x) == want, name
        assert traced(lambda a: jnp.arctan2(a, 2.0), h) == jax.eval_shape(lambda a: _jax_fn("arctan2")(a, 2.0), h).dtype
        assert traced(jnp.arctan2, i, i) == jax.eval_shape(_jax_fn("arctan2"), i, i).dtype == np.float32
    np.testing.assert_allclose(jnp.arcsinh(h), np.arcsinh(h), rtol=1e-3)


def _grads(fn_of_name, points: dict) -> dict:
    """grad of sum(f(x)) for each function, in one jitted call."""
    def loss(xs):
        return sum(jnp.sum(fn_of_name(name)(x)) for name, x in xs.items())
    return ember.jit(ember.grad(loss))(points)


@functools.cache
def _jax_grads(order: int, seed: int) -> dict:
    """JAX's first or second derivatives at _grad_points (one XLA compile), once per module."""
    jnp_ = jax.numpy

    def total(xs):
        return sum(jnp_.sum(_jax_fn(name)(x)) for name, x in xs.items())

    fn = jax.grad(total)
    if order == 2:
        fn = jax.grad(lambda xs: sum(jnp_.sum(g) for g in jax.grad(total)(xs).values()))
    with jax.enable_x64(True):
        return {name: np.asarray(g) for name, g in jax.jit(fn)(_grad_points(order, seed)).items()}


def _grad_points(order: int, seed: int) -> dict:
    pts = _points(np.float64, seed=seed)
    return {name: np.concatenate([x, np.array(SPECIAL[name])]) for name, x in pts.items()} if order == 1 else pts


def test_gradients_match_jax(ember_backend):
    pts = _grad_points(1, 0)
    got = _grads(lambda name: getattr(jnp, name), pts)
    want = _jax_grads(1, 0)
    for name in UNARY:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, equal_nan=True, err_msg=name)


def test_second_derivatives_match_jax(ember_backend):
    """grad of grad: the functions are separate, so the gradient of the sum of all first derivatives is
    each one's second derivative, in one compiled graph."""
    pts = _grad_points(2, 1)
    first = ember.grad(lambda xs: sum(jnp.sum(getattr(jnp, n)(x)) for n, x in xs.items()))
    got = ember.jit(ember.grad(lambda xs: sum(jnp.sum(g) for g in first(xs).values())))(pts)
    want = _jax_grads(2, 1)
    for name in UNARY:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, err_msg=name)


def _atan2_points():
    y, x = (np.array(v) for v in ATAN2_SPECIAL)
    rng = np.random.default_rng(2)
    return np.concatenate([y, rng.standard_normal(5)]), np.concatenate([x, rng.standard_normal(5)])


@functools.cache
def _jax_atan2_derivatives():
    y, x = _atan2_points()
    with jax.enable_x64(True):
        grads = jax.jit(jax.grad(lambda y, x: jax.numpy.sum(jax.numpy.arctan2(y, x)), argnums=(0, 1)))(y, x)
        hess = jax.jit(jax.vmap(jax.hessian(jax.numpy.arctan2, argnums=(0, 1))))(y[6:], x[6:])
    return [np.asarray(g) for g in grads], [np.asarray(h) for row in hess for h in row]


def test_atan2_gradients_match_jax(ember_backend):
    y, x = _atan2_points()
    got = ember.jit(ember.grad(lambda y, x: jnp.sum(jnp.arctan2(y, x)), argnums=(0, 1)))(y, x)
    hess = ember.jit(ember.vmap(ember.hessian(jnp.arctan2, argnums=(0, 1))))(y[6:], x[6:])
    want, want_h = _jax_atan2_derivatives()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, equal_nan=True)
    for g, w in zip([h for row in hess for h in row], want_h):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_vmap_matches_the_unbatched_call(ember_backend):
    """vmap of all eleven (a batch of 3 rows) equals the jitted call on the flat arrays, bit for bit."""
    def f(xs):
        return _all_unary(xs) | {"arctan2": jnp.arctan2(xs["tan"], xs["cosh"])}

    xs = _points(np.float32, 12)
    got = ember.vmap(f)({name: x.reshape(3, 4) for name, x in xs.items()})
    want = ember.jit(f)(xs)
    for name, w in want.items():
        np.testing.assert_array_equal(got[name].ravel(), w, err_msg=name)


def test_fuses_into_one_kernel():
    """All eleven, with arithmetic between them, are one loop fusion: they are elementwise, and each is read
    once (expensive functions are never recomputed)."""
    def f(x):
        a = jnp.tan(x) + jnp.arctan(x) * jnp.sinh(x) - jnp.cosh(x) + jnp.arcsinh(x)
        b = jnp.arcsin(x * 0.5) + jnp.arccos(x * 0.5) + jnp.arctanh(x * 0.5) + jnp.arccosh(2.0 + x * x)
        return a * b + jnp.arctan2(a, b)

    x = np.linspace(-0.9, 0.9, 16, dtype=np.float32)
    low = ember.jit(f).lower(x)
    kernels = [n for n in low.optimized.nodes if n.prim.name == "fusion"]
    assert len(kernels) == 1 and len(low.optimized.nodes) == 1, low.text()
    body = {n.prim.name for n in kernels[0].params["body"].nodes}
    assert {"tan", "atan", "sinh", "cosh", "asinh", "asin", "acos", "atanh", "acosh", "atan2"} <= body
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(ember.jit(f)(x), f(x.astype(np.float64)).astype(np.float32), rtol=2e-6)
