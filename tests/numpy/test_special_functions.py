"""The special functions of ember.lax and ember.scipy.special (erf, erfc, erf_inv/erfinv, lgamma/gammaln,
digamma, polygamma, zeta) against JAX: values of both widths (poles, infinities and signed zeros
included), under jit, grad and grad of grad (JAX's derivatives, and finite differences), vmap, fused into
one kernel, on both backends (tests/conftest.py runs this file on each); JAX's errors where it has no
derivative. Also ember.lax's other names (round's ties, integer_pow) and its missing control flow.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.lax as lax
import ember.scipy.special as sp
from ember.errors import DTypeError
from tests.helpers import assert_vmap_matches_loop, check_grads

jax = pytest.importorskip("jax")
jlax = pytest.importorskip("jax.lax")
jsp = pytest.importorskip("jax.scipy.special")

# name -> (ember function, JAX function, inputs): unary first, then (n or s, x or q). Away from the spots
# where XLA loses accuracy (erf_inv near +-1, digamma near its zero, lgamma near 1 and 2; see
# tests/backends/test_math_special.py, which checks those against mpmath).
UNARY = {
    "erf": (lax.erf, jlax.erf, [-np.inf, -3.0, -0.5, -0.0, 0.0, 1e-30, 0.7, 2.5, 6.0, np.inf, np.nan]),
    "erfc": (lax.erfc, jlax.erfc, [-np.inf, -6.0, -0.3, -0.0, 0.0, 0.4, 1.7, 5.0, 9.0, 26.0, np.inf, np.nan]),
    "erf_inv": (lax.erf_inv, jlax.erf_inv, [-2.0, -1.0, -0.99, -0.5, -0.0, 0.0, 0.3, 0.9, 1.0, 1.5, np.nan]),
    "lgamma": (lax.lgamma, jlax.lgamma, [-np.inf, -1e20, -3.0, -2.5, -0.7, -0.0, 0.0, 1e-20, 0.3, 1.0, 2.0,
                                         2.5, 7.9, 40.0, 1e20, np.inf, np.nan]),
    "digamma": (lax.digamma, jlax.digamma, [-np.inf, -1e20, -3.0, -2.5, -0.7, -0.0, 0.0, 1e-20, 0.3, 1.0,
                                            1.3, 2.5, 7.9, 40.0, 1e20, np.inf, np.nan]),
}
SCIPY = {"erf": (sp.erf, jsp.erf), "erfc": (sp.erfc, jsp.erfc), "erf_inv": (sp.erfinv, jsp.erfinv),
         "lgamma": (sp.gammaln, jsp.gammaln), "digamma": (sp.digamma, jsp.digamma)}
BINARY = {
    "zeta": (lax.zeta, jlax.zeta, [2.0, 3.0, 2.0, 4.0, 2.5, 1.0, 0.5, 6.0, 2.0, 3.0, 2.0],
             [1.0, 0.5, 0.0, -0.0, -2.0, 2.0, 2.0, 3.7, -1.5, -7.25, np.nan]),
    "polygamma": (lax.polygamma, jlax.polygamma, [0.0, 1.0, 1.0, 2.0, 3.0, 1.0, 2.0, 1.5, -1.0, 4.0, 1.0],
                  [1.5, 0.0, 2.5, -2.0, -0.0, -1.5, 0.2, 1.0, 1.0, 12.0, np.nan]),
}
TOL = {np.float32: 3e-6, np.float64: 1e-14}


def _jax(fn, *args):
    """JAX's result, at float64 where the arguments are."""
    with jax.enable_x64(any(np.asarray(a).dtype == np.float64 for a in args)):
        return np.asarray(fn(*args))


def _assert_like_jax(got, want, dtype, what):
    assert got.dtype == want.dtype == dtype, f"{what}: dtype {got.dtype} (JAX {want.dtype})"
    close = np.isclose(got, want, rtol=TOL[dtype], atol=TOL[dtype], equal_nan=True)   # XLA's own errors
    assert close.all(), f"{what}: {got[~close]} where JAX gives {want[~close]}"
    zeros = want == 0
    assert (np.signbit(got[zeros]) == np.signbit(want[zeros])).all(), f"{what}: signs of zeros differ"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_match_jax(name, dtype):
    fn, jfn, xs = UNARY[name]
    x = np.array(xs, dtype)
    want = _jax(jfn, x)
    _assert_like_jax(ember.jit(fn)(x), want, dtype, f"jit(lax.{name})")
    _assert_like_jax(np.asarray(fn(x)), want, dtype, f"lax.{name} eagerly")
    mine, theirs = SCIPY[name]
    _assert_like_jax(ember.jit(mine)(x), _jax(theirs, x), dtype, f"scipy.special {mine.__name__}")


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values_match_jax(name):
    """At float64 (float32 is the float64 algorithm rounded, as the unary functions test); q below -9
    against mpmath, where XLA is wrong (it sums from q itself: zeta(2, -20.5) = -0.0476)."""
    fn, jfn, a, b = BINARY[name]
    a, b = np.array(a + [2.0, 3.0]), np.array(b + [-20.5, -25.25])
    got = ember.jit(fn)(a, b)
    keep = ~((a < 0) | (b < -1))
    _assert_like_jax(got[keep], _jax(jfn, a[keep], b[keep]), np.float64, f"lax.{name}")
    want = [9.82199434464988, -62.01179956793848] if name == "zeta" else [-0.002266289919637797, 1558.5453394941214]
    np.testing.assert_allclose(got[-2:], want, rtol=1e-12)   # mpmath


def test_scipy_special_promotes_as_jax():
    assert sp.gammaln(3).dtype == np.float32 and sp.erfc(np.int64(1)).dtype == np.float64
    assert sp.polygamma(1, np.float32(2.0)).dtype == np.float32 and sp.zeta(2, 3).dtype == np.float32
    np.testing.assert_allclose(sp.polygamma(np.array([1, 2]), 2.0), _jax(jsp.polygamma, np.array([1, 2]), 2.0),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="Argument `n` to polygamma must be of integer type. Got dtype float32"):
        sp.polygamma(1.0, 2.0)
    with pytest.raises(NotImplementedError, match="Riemann zeta function not implemented"):
        sp.zeta(2.0)


def test_lax_takes_floats_only():
    for fn in (lax.erfc, lax.erf_inv, lax.lgamma, lax.digamma):
        with pytest.raises(DTypeError, match="requires a floating-point operand, got int32"):
            fn(np.arange(3, dtype=np.int32))


# --- derivatives ----------------------------------------------------------------------------------------

GRAD_POINTS = {"erf": [-1.3, 0.2, 2.0], "erfc": [-1.3, 0.2, 2.0], "erf_inv": [-0.9, 0.1, 0.6],
               "lgamma": [-2.5, 0.3, 1.0, 4.5, 30.0], "digamma": [-2.5, 0.3, 1.0, 4.5, 30.0]}


@pytest.mark.parametrize("name", sorted(GRAD_POINTS))
def test_grad_and_grad_of_grad_match_jax(name):
    fn, jfn, _ = UNARY[name]
    x = np.array(GRAD_POINTS[name])
    first = ember.jit(ember.grad(lambda v: ember.numpy.sum(fn(v))))
    second = ember.jit(ember.grad(lambda v: ember.numpy.sum(first(v))))
    jfirst = jax.grad(lambda v: jfn(v).sum())
    jsecond = jax.grad(lambda v: jfirst(v).sum())
    np.testing.assert_allclose(first(x), _jax(jfirst, x), rtol=1e-12, err_msg=f"{name}'")
    np.testing.assert_allclose(second(x), _jax(jsecond, x), rtol=1e-12, err_msg=f"{name}''")
    check_grads(lambda v: ember.numpy.sum(fn(v)), (x,), rtol=1e-6)


def test_grad_of_zeta_in_q():
    """-s zeta(s + 1, q) (polygamma's derivative in x is polygamma(m + 1, x): digamma's grad of grad)."""
    q = np.array([0.3, 2.0, 11.0])
    got = ember.jit(ember.grad(lambda v: ember.numpy.sum(lax.zeta(3.0, v))))(q)
    np.testing.assert_allclose(got, _jax(jax.grad(lambda v: jsp.zeta(3.0, v).sum()), q), rtol=1e-12)


def test_no_gradient_in_the_order_or_in_s():
    with pytest.raises(ValueError, match="polygamma gradient with respect to m is not supported"):
        ember.grad(lambda m: lax.polygamma(m, 1.5))(1.0)
    with pytest.raises(NotImplementedError, match="zeta"):
        ember.grad(lambda s: lax.zeta(s, 1.5))(2.0)


# --- vmap and fusion ------------------------------------------------------------------------------------

def test_vmap_matches_a_loop():
    x = np.linspace(0.1, 0.9, 12).reshape(3, 4)
    assert_vmap_matches_loop(lambda v: lax.lgamma(v) + lax.digamma(v) * lax.erfc(v) - lax.erf_inv(v), 0, (x,),
                             tol=1e-12)
    assert_vmap_matches_loop(lax.zeta, (None, 0), (np.float64(2.0), x), tol=1e-12)


def test_fused_into_one_kernel():
    def f(x):
        return lax.lgamma(x) * lax.erfc(x) + lax.digamma(x) - lax.erf_inv(x * 0.5)

    x = np.linspace(0.1, 1.9, 64)
    fused = ember.jit(f).lower(x).stage("after fusion").graph
    kernels = [n for n in fused.nodes if n.prim.name == "fusion"]
    assert len(kernels) == 1
    assert {"lgamma", "erfc", "digamma", "erf_inv"} <= {n.prim.name for n in kernels[0].params["body"].nodes}
    np.testing.assert_allclose(ember.jit(f)(x), ember.jit(f, disable_passes=("fusion",))(x), rtol=1e-14)


# --- ember.lax's names ----------------------------------------------------------------------------------

def test_lax_round_breaks_ties_away_from_zero_unless_told():
    x = np.array([0.5, 1.5, -0.5, 2.5, -2.5, 0.4999999999999999, 3.2])
    np.testing.assert_array_equal(ember.jit(lax.round)(x), _jax(jlax.round, x))
    even = ember.jit(lambda v: lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN))(x)
    np.testing.assert_array_equal(even, _jax(lambda v: jlax.round(v, jlax.RoundingMethod.TO_NEAREST_EVEN), x))
    assert ember.grad(lambda v: lax.round(v))(0.5) == 0.0


def test_lax_integer_pow_square_reciprocal():
    x = np.array([1.5, -2.0, 0.25], np.float32)
    for y in (0, 1, 2, 3, 5, -1, -2):
        np.testing.assert_allclose(ember.jit(lambda v, y=y: lax.integer_pow(v, y))(x), _jax(jlax.integer_pow, x, y),
                                   rtol=1e-6)
    np.testing.assert_allclose(ember.grad(lambda v: lax.integer_pow(v, 3))(2.0), 12.0)
    np.testing.assert_array_equal(lax.square(x), x * x)
    np.testing.assert_allclose(lax.reciprocal(x), 1 / x)


def test_lax_has_jax_names_and_says_what_is_missing():
    for name in ("exp", "log", "tanh", "logistic", "rsqrt", "erf", "max", "min", "rem", "pow", "div", "sign",
                 "lgamma", "digamma", "erf_inv", "erfc", "polygamma", "zeta", "select", "convert_element_type",
                 "tan", "atan2", "acosh", "cbrt", "exp2", "nextafter"):
        assert callable(getattr(lax, name)) and hasattr(jlax, name), name
    for name in lax.__all__:
        assert hasattr(jlax, name), f"ember.lax.{name} is not a jax.lax name"
    np.testing.assert_array_equal(lax.max(np.array([1.0, np.nan]), np.array([2.0, 0.0])), [2.0, np.nan])
    assert lax.rem(np.int32(-7), np.int32(3)) == -1 and lax.div(np.int32(-7), np.int32(2)) == -3
    with pytest.raises(AttributeError, match=r"ember.lax.associative_scan is not implemented in Ember yet"):
        lax.associative_scan  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'lgama' .*closest names it has: ember.lax.lgamma"):
        lax.lgama  # noqa: B018
    assert ember.lax is lax
