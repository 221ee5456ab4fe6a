"""ember.numpy's cbrt, exp2, log2, log10, hypot, logaddexp, logaddexp2, copysign and nextafter against JAX
0.10 (the reference for values, dtypes, gradients and errors): eagerly and under jit on both backends,
gradients and gradients of gradients (at JAX's special points too: logaddexp at -inf and at equal operands,
copysign at signed zeros, cbrt and log2 at 0), vmap, and one fused kernel for a chain of them. nextafter has
no derivative in JAX, and raises JAX's error class and message here. (The ulp budgets against mpmath are in
tests/backends/test_math_explog.py.)
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.helpers import assert_vmap_matches_loop

# the inputs hold infinities, NaNs, zeros and the largest floats on purpose: NumPy's warnings about them are expected
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
UNARY = ("cbrt", "exp2", "log2", "log10")
BINARY = ("hypot", "logaddexp", "logaddexp2", "copysign", "nextafter")
COVERED = set(UNARY + BINARY)
DTYPES = (np.float32, np.float64)
DIFFERENTIABLE = ("cbrt", "exp2", "log2", "log10", "hypot", "logaddexp", "logaddexp2", "copysign")


def _points(dtype) -> tuple[np.ndarray, np.ndarray]:
    """x and y: specials (signed zeros, infinities, NaN, the extremes), equal and opposite operands, random
    values of every magnitude. No subnormals: XLA's CPU code reads them as zeros (jnp.cbrt of the smallest
    float32 subnormal is -5.6e-16); tests/backends/test_math_explog.py checks them against mpmath."""
    fi = np.finfo(dtype)
    sp = np.array([0.0, -0.0, 1.0, -1.0, 8.0, 1000.0, -27.0, 0.5, np.inf, -np.inf, np.nan, fi.max, fi.tiny,
                   -3.5], dtype)
    sx, sy = (g.ravel() for g in np.meshgrid(sp, sp))
    rng = np.random.default_rng(5)
    r = (rng.standard_normal(64) * 10.0 ** rng.uniform(-30, 30, 64)).astype(dtype)
    return np.concatenate([sx, r, r]), np.concatenate([sy, r[::-1], r])


def _ember(name: str):
    return getattr(jnp, name)


def _jax(name: str):
    return getattr(jjnp, name)


def _call(fns, names, x, y):
    return tuple(fns(n)(x) if n in UNARY else fns(n)(x, y) for n in names)


def _assert_close(got, want, what: str, rtol: float, atol=0.0) -> None:
    """Within rtol (and atol, an array) of JAX, NaN where JAX has NaN, the same dtype, infinities and zeros
    alike."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: {got.dtype} != {want.dtype}"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    np.testing.assert_array_equal(np.where(np.isinf(want), want, 0), np.where(np.isinf(got), got, 0), err_msg=what)
    finite = np.isfinite(want)
    g, w = got[finite].astype(np.float64), want[finite].astype(np.float64)
    tol = rtol * np.abs(w) + np.broadcast_to(atol, got.shape)[finite]
    bad = np.abs(g - w) > tol
    assert not bad.any(), f"{what}: {g[bad][:5]} instead of {w[bad][:5]}"
    same_sign = np.signbit(got) == np.signbit(want)
    assert same_sign[(want == 0) | np.isinf(want)].all(), f"{what}: signs of zeros or infinities differ"


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    itype = f"u{a.dtype.itemsize}"
    return bool(((a.view(itype) == b.view(itype)) | (np.isnan(a) & np.isnan(b))).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_values_match_jax(dtype):
    """Within JAX's own error: XLA's exp2(1000.0) is 300 float64 ulp from 2**1000 (exp(x ln 2)), its float32
    logaddexp2(-1, -1) is -1.1e-8 instead of 0, and logaddexp's formula cancels where the result is near 0
    (an error relative to max(x, y)). copysign and nextafter are exact in both."""
    x, y = _points(dtype)
    names = UNARY + BINARY
    with np.errstate(all="ignore"):
        eager = _call(_ember, names, x, y)
        traced = ember.jit(lambda a, b: _call(_ember, names, a, b))(x, y)
    with jax.enable_x64(True):
        want = [np.asarray(w) for w in jax.jit(lambda a, b: _call(_jax, names, a, b))(x, y)]
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    scale = np.where(np.isfinite(x) & np.isfinite(y), np.maximum(np.abs(x), np.abs(y)), 0.0)
    for mode, got in (("eager", eager), ("jit", traced)):
        for name, g, w in zip(names, got, want):
            if name in ("copysign", "nextafter"):
                assert np.asarray(g).dtype == w.dtype and _same_bits(g, w), (name, mode)
                continue
            atol = rtol * 4 * scale if name.startswith("logaddexp") else 0.0
            _assert_close(g, w, f"{name} {mode}", rtol, atol)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_exact_results(dtype):
    """log2(8) and log10(1000) are 3 exactly (JAX's log(x) / log(2) is not), 2**n and cbrt(n**3) exact."""
    n = np.arange(-20, 21).astype(dtype)
    k = np.arange(0, 11).astype(dtype)

    def f(n, k):
        return jnp.exp2(n), jnp.log2(2.0 ** n), jnp.log10(10.0 ** k), jnp.cbrt(n ** 3)

    for got in (f(n, k), ember.jit(f)(n, k)):
        for g, want in zip(got, (2.0 ** n, n, k, n)):
            np.testing.assert_array_equal(g, want)
    assert float(jnp.log2(8.0)) == 3.0 and float(jnp.log10(1000.0)) == 3.0
    assert float(ember.jit(jnp.log2)(dtype(8.0))) == 3.0 and float(ember.jit(jnp.log10)(dtype(1000.0))) == 3.0


def test_python_scalars_and_integers_promote_as_in_jax():
    args = {"cbrt": (27,), "exp2": (3,), "log2": (8,), "log10": (100,), "hypot": (3, 4), "logaddexp": (1, 2),
            "logaddexp2": (1, 2), "copysign": (2, -1), "nextafter": (1, 2)}
    for kind in (int, np.int32, np.float16):
        operands = {name: tuple(kind(v) for v in a) for name, a in args.items()}
        traced = ember.jit(lambda ops: {name: _ember(name)(*o) for name, o in ops.items()})(operands)
        with jax.enable_x64(False):  # JAX's default (a benchmark test in the same worker may have turned it on)
            want = jax.eval_shape(lambda ops: {name: _jax(name)(*o) for name, o in ops.items()}, operands)
        for name, o in operands.items():
            got = _ember(name)(*o)
            assert np.asarray(got).dtype == want[name].dtype == np.asarray(traced[name]).dtype, (name, o)
            np.testing.assert_allclose(np.asarray(traced[name], np.float64), np.asarray(got, np.float64))


# ---- gradients ----------------------------------------------------------------------------------------

# points where JAX's derivative is special: logaddexp's (0, 1) at -inf and halves at ties, NaN at (-inf, -inf),
# exp(y) at (+inf, y); copysign's signs at zeros; inf of cbrt and log2 at 0; hypot at (0, 0) and infinities
_GRAD_POINTS = (
    np.array([0.0, -np.inf, -np.inf, np.inf, np.inf, 2.0, -0.0, 0.0, 3.0, -1e300, 1e-300, 1.5, np.nan, 0.0]),
    np.array([0.0, 1.0, -np.inf, 1.0, np.inf, 2.0, 0.0, -0.0, -4.0, 1e300, 1e-300, -1.5, 1.0, 5.0]),
)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients_match_jax_at_special_points(name):
    x, y = _GRAD_POINTS
    if name == "hypot":  # JAX's derivative of x2 / x1 overflows at (1e300, 1e300): see the test below
        keep = (np.abs(x) < 1e200) & (np.abs(x) > 1e-200) | (x == 0) | np.isinf(x) | np.isnan(x)
        x, y = x[keep], y[keep]
    if name in UNARY:
        with np.errstate(divide="ignore"):
            ours = ember.grad(lambda a: jnp.sum(_ember(name)(a)))(x)
        with jax.enable_x64(True):
            theirs = (np.asarray(jax.grad(lambda a: jjnp.sum(_jax(name)(a)))(x)),)
        ours = (ours,)
    else:
        with np.errstate(all="ignore"):
            ours = ember.grad(lambda a, b: jnp.sum(_ember(name)(a, b)), argnums=(0, 1))(x, y)
        with jax.enable_x64(True):
            theirs = [np.asarray(t) for t in jax.grad(lambda a, b: jjnp.sum(_jax(name)(a, b)), argnums=(0, 1))(x, y)]
    for k, (o, t) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(o, t, rtol=1e-13, equal_nan=True, err_msg=f"{name} argument {k}")


def test_hypot_gradient_at_extreme_magnitudes():
    """x / hypot and y / hypot at 1e+-300 (JAX's derivative of its division y / x forms y / x**2, which
    overflows there: -1.06 and -inf for 0.707)."""
    x, y = np.array([-1e300, 1e-300, 3e-310, 1e308]), np.array([1e300, 1e-300, 4e-310, -1e308])
    gx, gy = ember.grad(lambda a, b: jnp.sum(jnp.hypot(a, b)), argnums=(0, 1))(x, y)
    h = np.hypot(x, y)
    np.testing.assert_allclose(gx, x / h, rtol=1e-13)
    np.testing.assert_allclose(gy, y / h, rtol=1e-13)


def _smooth_args(name: str, rng, shape=(5,)):
    """float64 points away from kinks (hypot and copysign are not smooth at 0)."""
    x = rng.uniform(0.3, 3.0, shape) * rng.choice([-1, 1], shape)
    y = rng.uniform(0.3, 3.0, shape) * rng.choice([-1, 1], shape)
    if name in ("log2", "log10"):
        x = np.abs(x)
    return (x,) if name in UNARY else (x, y)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients_and_second_derivatives_match_jax(name):
    """At random float64 points: the gradient of sum(f**2) and the gradient of the squared norm of that
    gradient (so second derivatives), compiled as one function. (Finite differences of every primitive's
    second derivatives: tests/tracer/test_second_derivatives.py.)"""
    args = _smooth_args(name, np.random.default_rng(11))
    argnums = tuple(range(len(args)))

    def derivatives(mod, grad, fn):
        loss = lambda *a: mod.sum(fn(*a) ** 2)                                      # noqa: E731
        return lambda *a: (*grad(loss, argnums=argnums)(*a),
                           *grad(lambda *b: mod.sum(grad(loss, argnums=0)(*b) ** 2), argnums=argnums)(*a))

    ours = ember.jit(derivatives(jnp, ember.grad, _ember(name)))(*args)
    with jax.enable_x64(True):
        theirs = [np.asarray(t) for t in jax.jit(derivatives(jjnp, jax.grad, _jax(name)))(*args)]
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=1e-12, atol=1e-12 * np.abs(t).max(initial=1.0))


@pytest.mark.parametrize("call", ["grad", "jit(grad)", "vjp"])
def test_nextafter_has_no_derivative_as_in_jax(call):
    x = np.array([1.0, 2.0])

    def f(a):
        return jnp.sum(jnp.nextafter(a, 3.0))

    run = {"grad": lambda: ember.grad(f)(x), "jit(grad)": lambda: ember.jit(ember.grad(f))(x),
           "vjp": lambda: ember.vjp(lambda a: jnp.nextafter(a, 0.0), x)}[call]
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'nextafter' not implemented"):
        run()
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'nextafter' not implemented"):
        jax.grad(lambda a: jjnp.sum(jjnp.nextafter(a, 3.0)))(x)
    # the other operand's derivative is not asked for: nextafter of a constant is fine under grad
    assert ember.grad(lambda a: jnp.sum(a * jnp.nextafter(x, 3.0)))(x).shape == (2,)


# ---- vmap, fusion ---------------------------------------------------------------------------------------

def test_vmap_matches_a_loop():
    rng = np.random.default_rng(3)
    x, y = np.abs(rng.standard_normal((4, 3))).astype(np.float32) + 0.1, rng.standard_normal((4, 3)).astype(np.float32)

    def f(a, b):
        return _call(_ember, UNARY + BINARY, a, b)

    assert_vmap_matches_loop(f, (0, 0), (x, y))
    assert_vmap_matches_loop(f, (1, None), (x, y[:, 0]))


def test_a_chain_fuses_into_one_kernel():
    """Every one of them is an elementwise op a loop fusion takes (the expensive ones computed once)."""
    def f(a, b):
        u = jnp.logaddexp(jnp.log2(jnp.hypot(a, b)), jnp.cbrt(a)) + jnp.copysign(jnp.exp2(b), a)
        return jnp.logaddexp2(u, jnp.log10(jnp.abs(b) + 1.0)) + jnp.nextafter(a, b)

    x = np.linspace(0.5, 2.0, 12, dtype=np.float32).reshape(3, 4)
    y = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    lowered = ember.jit(f).lower(x, y)
    assert [n.prim.name for n in lowered.optimized.nodes] == ["fusion"]
    np.testing.assert_allclose(ember.jit(f)(x, y), ember.jit(f, disable_passes=("fusion",))(x, y), rtol=1e-6)
