"""ember.nn against straightforward NumPy formulas: relu, sigmoid, gelu (tanh approximation and exact),
logsumexp, softmax, log_softmax (values, stability on large and infinite inputs, gradients, vmap),
and the Dense/MLP helpers. Integer inputs give float32 results (relu keeps the integer dtype).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.numpy as jnp
from tests.helpers import check_grads
from tests.numpy.cases import (
    A,
    Case,
    assert_matches,
    case_tests,
    covered,
)

# --- NumPy references (float64) -------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def np_gelu(x, approximate=True):
    x = np.asarray(x, np.float64)
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _shift(x, axis):
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    return np.where(np.isfinite(m), m, 0.0)


def np_logsumexp(x, axis=None, keepdims=False):
    x = np.asarray(x, np.float64)
    m = _shift(x, axis)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def np_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    e = np.exp(x - _shift(x, axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    return x - np_logsumexp(x, axis=axis, keepdims=True)


def _float_of(x):
    """The result dtype of a float function of x: x's float dtype, or float32 for ints and bools."""
    return x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)


def _case(name, fn, ref, spec, note="", **kw):
    return Case(name, fn, ref, (spec,), dtype=_float_of if name != "relu" else None, note=note, **kw)


SHAPES = [(5,), (2, 3), (2, 3, 4)]


def _activation_cases():
    cases = []
    for name, fn, ref, note in (("relu", nn.relu, lambda x: np.maximum(x, 0), ""),
                                ("sigmoid", nn.sigmoid, np_sigmoid, ""), ("gelu", nn.gelu, np_gelu, "tanh"),
                                ("gelu", lambda x: nn.gelu(x, approximate=False), lambda x: np_gelu(x, False),
                                 "exact")):
        for spec in [A(s) for s in [(), (0,)] + SHAPES] + [A((2, 3), "f64"), A((4,), "f32", "special")]:
            cases.append(_case(name, fn, ref, spec, note=note, grad=spec.dom != "special"))
        cases.append(_case(name, fn, ref, A((2, 3), "i32"), note=note))
        cases.append(_case(name, fn, ref, A((6,), "f32", "halves"), note=note, grad=name != "relu"))
    # relu(bool) is max(bool, weak 0): int32 by the JAX rules
    cases.append(Case("relu", nn.relu, lambda x: np.maximum(x, 0), (A((3,), "bool"),), dtype=np.int32))
    cases.append(_case("sigmoid", nn.sigmoid, np_sigmoid, A((3,), "f32", "special"), note="large"))
    return cases


def _softmax_cases():
    cases = []
    for name, fn, ref in (("softmax", nn.softmax, np_softmax), ("log_softmax", nn.log_softmax, np_log_softmax)):
        for shape in SHAPES:
            cases.append(_case(name, fn, ref, A(shape)))
        for shape, axis in (((2, 3), 0), ((2, 3, 4), 1), ((2, 3, 4), (0, 2)), ((2, 3), (-1, -2)), ((1, 4), -1)):
            cases.append(_case(name, lambda x, a=axis, fn=fn: fn(x, axis=a), lambda x, a=axis, ref=ref: ref(x, axis=a),
                               A(shape), note=f"axis={axis}"))
        cases.append(_case(name, fn, ref, A((2, 3), "f64")))
        cases.append(_case(name, fn, ref, A((2, 3), "i32")))
        cases.append(_case(name, fn, ref, A((0, 3))))
    for axis, keepdims in ((None, False), (None, True), (0, False), (-1, True), ((0, 2), False), ((1, 2), True)):
        cases.append(_case("logsumexp", lambda x, a=axis, k=keepdims: nn.logsumexp(x, axis=a, keepdims=k),
                           lambda x, a=axis, k=keepdims: np_logsumexp(x, axis=a, keepdims=k), A((2, 3, 4)),
                           note=f"axis={axis} keepdims={keepdims}"))
    cases += [_case("logsumexp", nn.logsumexp, np_logsumexp, A(())),
              _case("logsumexp", nn.logsumexp, np_logsumexp, A((5,), "f64")),
              _case("logsumexp", nn.logsumexp, np_logsumexp, A((2, 3), "i32")),
              _case("logsumexp", lambda x: nn.logsumexp(x, axis=1), lambda x: np_logsumexp(x, axis=1), A((3, 0)),
                    grad=False, note="empty")]
    return cases


PARAMS = nn.init_mlp([3, 4, 2], seed=1)


def np_mlp(params, x, activation=lambda v: np.maximum(v, 0)):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if activation is not None and i < len(params) - 1:
            x = activation(x)
    return x


def _mlp_cases():
    p64 = nn.init_mlp([3, 5, 4, 2], seed=2, dtype=np.float64)
    return [
        Case("dense", lambda x: nn.dense(PARAMS[0], x), lambda x: x @ PARAMS[0][0] + PARAMS[0][1], (A((5, 3)),)),
        Case("dense", lambda x: nn.dense(PARAMS[0], x), lambda x: x @ PARAMS[0][0] + PARAMS[0][1], (A((3,)),)),
        Case("dense", lambda x: nn.dense(PARAMS[1], x), lambda x: x @ PARAMS[1][0] + PARAMS[1][1], (A((2, 3, 4)),)),
        Case("mlp", lambda x: nn.mlp(PARAMS, x), lambda x: np_mlp(PARAMS, x), (A((5, 3)),)),
        Case("mlp", lambda x: nn.mlp(p64, x), lambda x: np_mlp(p64, x), (A((2, 3), "f64"),), note="3 layers f64"),
        Case("mlp", lambda x: nn.mlp(PARAMS, x, activation=None), lambda x: np_mlp(PARAMS, x, None), (A((3,)),),
             note="no activation"),
        Case("mlp", lambda x: nn.mlp(PARAMS, x, nn.sigmoid), lambda x: np_mlp(PARAMS, x, np_sigmoid), (A((4, 3)),),
             dtype=np.float32, note="sigmoid"),
    ]


CASES = _activation_cases() + _softmax_cases() + _mlp_cases()


def public_functions() -> set[str]:
    return {n for n, f in vars(nn).items()
            if callable(f) and not n.startswith("_") and getattr(f, "__module__", None) == "ember.nn"}


def test_every_public_function_has_cases():
    tested = covered(CASES) | {"init_mlp"}  # init_mlp: test_init_mlp below
    missing = sorted(public_functions() - tested)
    assert not missing, f"ember.nn functions without test cases: {missing}"
    assert {"relu", "softmax", "logsumexp", "mlp"} <= public_functions()


test_values_match_numpy, test_grads_match_finite_differences, test_vmap_matches_loop = \
    case_tests(CASES)


# --- stability ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_large_inputs_do_not_overflow(dtype, mode):
    def run(fn, x):
        return (fn if mode == "eager" else ember.jit(fn))(np.asarray(x, dtype))

    e = math.e
    cases = [
        (nn.softmax, [1000.0, 1001.0], [1 / (1 + e), e / (1 + e)]),
        (nn.softmax, [-1000.0, -1001.0], [e / (1 + e), 1 / (1 + e)]),
        (nn.log_softmax, [1000.0, 1001.0], [-math.log1p(e), -math.log1p(1 / e)]),
        (nn.logsumexp, [1000.0, 1001.0], 1001.0 + math.log1p(1 / e)),
        (nn.logsumexp, [-1000.0, -1001.0], -1000.0 + math.log1p(1 / e)),
        (lambda x: nn.logsumexp(x, axis=1), [[1e4, 1e4], [0.0, -1e4]], [1e4 + math.log(2.0), 0.0]),
        (nn.softmax, [0.0, -np.inf], [1.0, 0.0]),
        (nn.log_softmax, [0.0, -np.inf], [0.0, -np.inf]),
        (nn.logsumexp, [0.0, -np.inf, 0.0], math.log(2.0)),
        (nn.logsumexp, [-np.inf, -np.inf], -np.inf),
        (lambda x: nn.logsumexp(x, axis=-1), [[-np.inf, -np.inf], [1.0, 1.0]], [-np.inf, 1.0 + math.log(2.0)]),
        (nn.logsumexp, [1.0, np.inf], np.inf),
        (nn.sigmoid, [-1000.0, 1000.0, 0.0], [0.0, 1.0, 0.5]),
        (nn.gelu, [-1000.0, 1000.0], [0.0, 1000.0]),
        (lambda x: nn.gelu(x, approximate=False), [-1000.0, 1000.0], [0.0, 1000.0]),
    ]
    with np.errstate(over="raise", invalid="raise"):  # no overflow, no invalid operation on the way
        for fn, x, want in cases:
            if math.isinf(np.max(np.abs(want))) or np.isinf(np.asarray(x)).any():
                with np.errstate(all="ignore"):
                    got = run(fn, x)
            else:
                got = run(fn, x)
            assert got.dtype == dtype
            np.testing.assert_allclose(got, np.asarray(want, dtype), rtol=1e-6)


def test_gradients_at_large_inputs_are_finite():
    x = np.array([1000.0, 1001.0, 999.0])
    g = ember.grad(nn.logsumexp)(x)
    np.testing.assert_allclose(g, np_softmax(x), rtol=1e-12)
    w = np.array([1.0, -2.0, 0.5])
    check_grads(lambda v: jnp.sum(nn.softmax(v) * w), (x,))
    check_grads(lambda v: jnp.sum(nn.log_softmax(v) * w), (x,))
    g = ember.grad(lambda v: jnp.sum(nn.logsumexp(v, axis=1)))(np.array([[0.0, -np.inf], [2.0, 3.0]]))
    np.testing.assert_allclose(g, [[1.0, 0.0], np_softmax([2.0, 3.0])], rtol=1e-12)


def test_relu_gradient_at_zero_is_zero():
    """relu has its own rule (as jax.nn.relu), unlike maximum(x, 0), whose tie at 0 gives 0.5."""
    x = np.array([-1.0, 0.0, -0.0, 2.0, np.nan])
    np.testing.assert_array_equal(ember.grad(lambda v: jnp.sum(nn.relu(v)))(x), [0.0, 0.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(ember.grad(lambda v: jnp.sum(jnp.maximum(v, 0.0)))(x), [0.0, 0.5, 0.5, 1.0, 0.0])
    np.testing.assert_array_equal(nn.relu(x), np.maximum(x, 0.0))
    np.testing.assert_array_equal(ember.vmap(ember.grad(nn.relu))(x), [0.0, 0.0, 0.0, 1.0, 0.0])


def test_relu_backward_reads_only_the_output():
    x = np.linspace(-1.0, 1.0, 6)
    graph = ember.jit(ember.grad(lambda v: jnp.sum(nn.relu(v) * x)), disable_passes=("fusion",)).lower(x).optimized
    x_var = graph.inputs[0]
    readers = [n for n in graph.nodes if x_var in n.inputs]
    assert [(n.prim.name, n.role) for n in readers] == [("max", "active")], graph


def test_gelu_approximation_is_close_to_exact():
    x = np.linspace(-4, 4, 33)
    np.testing.assert_allclose(nn.gelu(x), nn.gelu(x, approximate=False), atol=1e-3)
    assert np.max(np.abs(nn.gelu(x) - nn.gelu(x, approximate=False))) > 1e-6


# --- Dense / MLP -----------------------------------------------------------------------------------

def test_init_mlp():
    params = nn.init_mlp([3, 64, 2], seed=0)
    assert [(w.shape, b.shape) for w, b in params] == [((3, 64), (64,)), ((64, 2), (2,))]
    assert all(w.dtype == np.float32 and b.dtype == np.float32 for w, b in params)
    assert all(not b.any() for _, b in params)
    again = nn.init_mlp([3, 64, 2], seed=0)
    assert all(np.array_equal(w, w2) for (w, _), (w2, _) in zip(params, again))
    other = nn.init_mlp([3, 64, 2], seed=1)
    assert not np.array_equal(params[0][0], other[0][0])
    big = nn.init_mlp([400, 300], seed=0)[0][0]
    assert abs(big.std() * math.sqrt(400) - 1.0) < 0.05  # scaled by 1/sqrt(fan_in)
    assert nn.init_mlp([2, 2], dtype=np.float64)[0][0].dtype == np.float64
    assert nn.init_mlp([5]) == []


def test_mlp_gradients_with_respect_to_the_parameters():
    params = nn.init_mlp([3, 4, 2], seed=3, dtype=np.float64)
    params = [(w, b + 0.1 * np.arange(len(b))) for w, b in params]
    x = np.random.default_rng(0).standard_normal((5, 3))
    y = np.random.default_rng(1).standard_normal((5, 2))

    def loss(p, xs):
        return jnp.mean((nn.mlp(p, xs, activation=nn.gelu) - y) ** 2)

    check_grads(loss, (params, x), argnums=(0, 1))


def test_vmap_of_mlp_over_examples_and_over_parameters():
    x = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    got = ember.vmap(lambda v: nn.mlp(PARAMS, v))(x)
    assert_matches(got, np_mlp(PARAMS, x), np.float32)
    stacked = [(np.stack([w, 2 * w]), np.stack([b, b + 1])) for w, b in PARAMS]
    got = ember.vmap(nn.mlp, in_axes=(0, None))(stacked, x)
    want = np.stack([np_mlp([(w[k], b[k]) for w, b in stacked], x) for k in range(2)])
    assert_matches(got, want, np.float32)


def test_scipy_special_names_match_scipy():
    import scipy.special

    import ember.scipy.special as ess

    x = np.linspace(-3.0, 3.0, 13)
    np.testing.assert_allclose(ess.erf(x), scipy.special.erf(x), rtol=1e-12)
    np.testing.assert_allclose(ess.expit(x), scipy.special.expit(x), rtol=1e-12)
    assert ess.expit(np.arange(3, dtype=np.int32)).dtype == np.float32  # ints take the default float
    assert ess.expit(np.arange(3, dtype=np.int64)).dtype == np.float64  # 64-bit ones float64, as JAX x64
    np.testing.assert_allclose(ember.jit(ember.grad(lambda v: jnp.sum(ess.erf(v))))(x),
                               2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-12)
