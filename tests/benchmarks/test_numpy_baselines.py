"""The hand-written NumPy backward passes every ratio is relative to: checked in float64 against central
finite differences and against ember.grad / ember.vmap on the same model code the benchmarks run."""

import numpy as np
import pytest

import ember
from benchmarks.frameworks import Ember
from benchmarks.workloads import cosine, dead_gradient, dense_bias_act, eam, linalg, per_sample

OPS = Ember("numpy").ops


def finite_difference(f, args, i, rng, n_probe=8, h=1e-6):
    """(indices, central-difference derivatives of scalar f w.r.t. args[i] at n_probe random entries)."""
    x = args[i]
    idx = [tuple(int(rng.integers(s)) for s in x.shape) for _ in range(n_probe)]
    out = []
    for k in idx:
        plus, minus = [a.copy() for a in args], [a.copy() for a in args]
        plus[i][k] += h
        minus[i][k] -= h
        out.append((f(*plus) - f(*minus)) / (2 * h))
    return idx, np.array(out)


def assert_matches_fd(f, grads, args, rng, rtol=1e-6, atol=1e-7):
    for i, g in enumerate(grads):
        idx, fd = finite_difference(f, list(args), i, rng)
        np.testing.assert_allclose([g[k] for k in idx], fd, rtol=rtol, atol=atol)


@pytest.mark.parametrize("weighted", [False, True])
def test_cosine_backward(weighted, rng):
    a, b, w = cosine.inputs(dict(B=2, R=3, N=5, W=7), dtype=np.float64)
    weights = w if weighted else None

    def f(x, y):
        p = cosine.numpy_forward(x, y)
        return float(np.sum(p * (1.0 if weights is None else weights)))

    g = cosine.numpy_grad(a, b, weights)
    assert_matches_fd(f, g, (a, b), rng)
    want = ember.grad(cosine.loss_fn(cosine.cosine_vectorized, OPS, weights), argnums=(0, 1))(a, b)
    for got, exp in zip(g, want):
        np.testing.assert_allclose(got, exp, rtol=1e-9, atol=1e-12)
    if not weighted:  # the seed's sum of a softmax is constant: its gradient vanishes
        assert max(np.abs(x).max() for x in g) < 1e-12


def test_cosine_forward_and_naive_agree():
    a, b, _ = cosine.inputs(dict(B=2, R=2, N=3, W=5), dtype=np.float64)
    ref = cosine.numpy_forward(a, b)
    np.testing.assert_allclose(ember.jit(lambda x, y: cosine.cosine_vectorized(OPS, x, y))(a, b), ref, rtol=1e-12)
    np.testing.assert_allclose(ember.jit(lambda x, y: cosine.cosine_naive(OPS, x, y))(a, b), ref, rtol=1e-12)


def test_eam_backward(rng):
    x = rng.random(50)
    g = eam.numpy_grad(x)
    assert_matches_fd(lambda v: float(eam.eam(np, v)), (g,), (x,), rng, rtol=1e-7)
    np.testing.assert_allclose(g, ember.grad(lambda v: eam.eam(OPS, v))(x), rtol=1e-12)
    xs = rng.random((4, 50))
    np.testing.assert_allclose(eam.numpy_grad(xs), np.stack([eam.numpy_grad(r) for r in xs]), rtol=1e-14)


@pytest.mark.parametrize("activation", per_sample.ACTIVATIONS)
def test_per_sample_backward(activation, rng):
    params = tuple(p.astype(np.float64) for p in per_sample.init_params())
    xs = rng.standard_normal((6, per_sample.SIZES[0]))

    def loss(p, x):
        return OPS.sum(per_sample.mlp(OPS, p, x, activation))

    per = per_sample.numpy_grads(params, xs, activation, per_sample=True)
    want = ember.vmap(ember.grad(loss), in_axes=(None, 0))(params, xs)
    for got, exp in zip(per, want):
        np.testing.assert_allclose(got, exp, rtol=1e-10, atol=1e-12)
    mean = per_sample.numpy_grads(params, xs, activation, per_sample=False)
    for m, p in zip(mean, per):
        np.testing.assert_allclose(m, p.mean(axis=0), rtol=1e-10, atol=1e-12)
    single = per_sample.numpy_single(activation)(params, xs[0])
    for s, p in zip(single, per):
        np.testing.assert_allclose(s, p[0], rtol=1e-10, atol=1e-12)

    def scalar(*ps):
        return float(np.sum(per_sample.mlp(np, ps, xs[0], activation)))

    assert_matches_fd(scalar, single, params, rng, rtol=1e-6)


def test_dense_bias_act_backward(rng):
    w, x, b = dense_bias_act.inputs(6, dtype=np.float64)
    g = dense_bias_act.numpy_grad(w, x, b)
    assert_matches_fd(lambda *a: float(dense_bias_act.loss(np, *a)), g, (w, x, b), rng)
    want = ember.grad(lambda *a: dense_bias_act.loss(OPS, *a), argnums=(0, 1, 2))(w, x, b)
    for got, exp in zip(g, want):
        np.testing.assert_allclose(got, exp, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("variant", dead_gradient.VARIANTS)
def test_dead_gradient_backward(variant, rng):
    c = rng.random(20)
    onehot = np.zeros(20)
    onehot[0] = 1.0
    p = np.asarray(1.5)
    f = dead_gradient.model(variant)
    want = ember.grad(lambda q, cc: f(OPS, q, cc, onehot))(p, c)
    np.testing.assert_allclose(dead_gradient.numpy_grad(variant)(p, c, onehot), want, rtol=1e-14)


def test_linalg_gaussian_process_backward():
    """The SciPy likelihood and gradient against central differences and ember's value_and_grad of the
    model code (float64 without 64-bit mode: the model names its dtypes)."""
    log_params, x, y = linalg.inputs(24)
    value, grad = linalg.numpy_value_and_grad(log_params, x, y)
    h = 1e-6
    fd = [(linalg.numpy_value_and_grad(log_params + h * e, x, y)[0]
           - linalg.numpy_value_and_grad(log_params - h * e, x, y)[0]) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    got_value, got_grad = linalg.make_value_and_grad(Ember("numpy"))(log_params, x, y)
    assert np.asarray(got_value).dtype == np.float64
    np.testing.assert_allclose(got_value, value, rtol=1e-12)
    np.testing.assert_allclose(got_grad, grad, rtol=1e-10)
