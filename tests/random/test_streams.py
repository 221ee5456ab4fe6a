"""Pure functions of the key: compiled (LLVM, and the CUDA source as host C++) == eager == under jit ==
vmap over keys == a loop, an eager call runs one compiled function, and reparameterized samples
differentiate in their parameters (against finite differences in float64; gamma's implicit gradient
against the CDF's)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.special

import ember
import ember.random as random
from ember.random import _distributions, _gamma

RECORDED = json.loads((Path(__file__).resolve().parent / "jax_values.json").read_text())["cases"]


def _jax(expr: str) -> np.ndarray:
    rec = RECORDED[expr]
    return np.array(rec["value"], rec["dtype"]).reshape(rec["shape"])


def test_one_compiled_function_gives_jax_numbers():
    """The LLVM backend: bits, uniform and randint bit for bit, the rest to float rounding."""
    f = ember.jit(lambda k0, k42: (random.bits(k0, (5,)), random.uniform(k0, (7,)), random.randint(k0, (7,), 0, 10),
                                   random.normal(k0, (7,)), random.gamma(k0, np.float32([0.3, 1., 2.5, 10.])),
                                   random.poisson(k42, np.float32([0., 0.5, 4., 12., 100.]))))
    bits, u, ints, normal, gamma, poisson = f(random.PRNGKey(0), random.key(42))
    assert (bits == _jax("random.bits(K0, (5,))")).all() and (u == _jax("random.uniform(K0, (7,))")).all()
    assert (ints == _jax("random.randint(K0, (7,), 0, 10)")).all()
    np.testing.assert_allclose(normal, _jax("random.normal(K0, (7,))"), rtol=2e-6)
    np.testing.assert_allclose(gamma, _jax("random.gamma(K0, np.float32([0.3, 1., 2.5, 10.]))"), rtol=2e-6)
    assert (poisson == _jax("random.poisson(K42, np.float32([0., 0.5, 4., 12., 100.]))")).all()


@pytest.mark.skipif("cuda-host" not in ember.available_backends(), reason="no host compiler for the CUDA source")
def test_the_cuda_source_gives_the_same_streams():
    """The CUDA C that a GPU would run (executed as host C++): Threefry's loop and the bit operations give
    JAX's bits; the same source compiles to an sm_90 cubin through NVRTC."""
    f = ember.jit(lambda k: (random.bits(k, (5,)), random.uniform(k, (7,)), random.randint(k, (7,), 0, 10)),
                  backend="cuda-host")
    bits, u, ints = f(random.PRNGKey(0))
    assert (bits == _jax("random.bits(K0, (5,))")).all() and (u == _jax("random.uniform(K0, (7,))")).all()
    assert (ints == _jax("random.randint(K0, (7,), 0, 10)")).all()
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (NVRTC) is not installed")
    from ember.backends.cuda import nvrtc
    from ember.backends.cuda.prelude import DEVICE_PRELUDE

    assert nvrtc.compile_cubin(DEVICE_PRELUDE + f.lower(random.PRNGKey(0)).source(), "sm_90")[:4] == b"\x7fELF"


def test_an_eager_call_is_one_compiled_function():
    before = _distributions._uniform.cache_info()
    u = random.uniform(random.PRNGKey(0), (7,))
    after = _distributions._uniform.cache_info()
    assert (u == _jax("random.uniform(K0, (7,))")).all()
    assert after.hits + after.misses == before.hits + before.misses + 1


@pytest.fixture
def numpy_backend(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "numpy")


@pytest.mark.usefixtures("numpy_backend")
def test_vmap_over_keys_is_the_loop_and_jit_is_eager():
    keys = random.split(random.key(5), 6)
    sample = lambda k: (random.normal(k, (3,)), random.gamma(k, np.float32([0.5, 3.0])),  # noqa: E731
                        random.randint(k, (2,), -4, 9))
    batched = ember.vmap(sample)(keys)
    jitted = ember.jit(ember.vmap(sample))(keys)
    for i in range(6):
        for b, j, e in zip(batched, jitted, sample(keys[i]), strict=True):
            np.testing.assert_array_equal(b[i], e)
            np.testing.assert_array_equal(j[i], e)


@pytest.mark.usefixtures("numpy_backend")
def test_transforms_nest_through_the_samplers():
    keys = random.split(random.PRNGKey(1), 4)

    def loss(scale, key):
        return (random.normal(key, (3,), np.float64) * scale + random.uniform(key, (3,), np.float64, 0.0, scale)).sum()

    grads = ember.jit(ember.vmap(ember.grad(loss), in_axes=(None, 0)))(np.float64(2.0), keys)
    for i in range(4):
        z = random.normal(keys[i], (3,), np.float64)
        u01 = random.uniform(keys[i], (3,), np.float64)
        np.testing.assert_allclose(grads[i], z.sum() + u01.sum(), rtol=1e-12)


def _finite_difference(f, x: float, h: float = 1e-6) -> float:
    return (f(x + h) - f(x - h)) / (2 * h)


REPARAMETERIZED = {
    "normal": lambda k, p: random.normal(k, (4,), np.float64) * p + 1.0,
    "uniform_min": lambda k, p: random.uniform(k, (4,), np.float64, minval=p, maxval=3.0),
    "uniform_max": lambda k, p: random.uniform(k, (4,), np.float64, minval=-1.0, maxval=p),
    "exponential": lambda k, p: random.exponential(k, (4,), np.float64) * p,
    "laplace": lambda k, p: random.laplace(k, (4,), np.float64) * p,
    "logistic": lambda k, p: random.logistic(k, (4,), np.float64) * p,
    "gumbel": lambda k, p: random.gumbel(k, (4,), np.float64) * p,
    "truncated_lower": lambda k, p: random.truncated_normal(k, p, 1.5, (4,), np.float64),
    "truncated_upper": lambda k, p: random.truncated_normal(k, -0.5, p, (4,), np.float64),
    "lognormal": lambda k, p: random.lognormal(k, p, (4,), np.float64),
    "weibull": lambda k, p: random.weibull_min(k, 1.5, p, (4,), np.float64),
}


@pytest.mark.usefixtures("numpy_backend")
@pytest.mark.parametrize("name", sorted(REPARAMETERIZED))
def test_reparameterized_gradients_match_finite_differences(name):
    key, f, p = random.PRNGKey(11), REPARAMETERIZED[name], 0.7
    total = lambda p: float(np.sum(f(key, np.float64(p))))  # noqa: E731
    grad = ember.grad(lambda p: f(key, p).sum())(np.float64(p))
    np.testing.assert_allclose(grad, _finite_difference(total, p), rtol=1e-6)


@pytest.mark.usefixtures("numpy_backend")
def test_the_gamma_gradient_is_the_implicit_one():
    """d x / d a = -(dF/da) / (dF/dx) for the regularized incomplete gamma F: with the sample x held, the
    CDF's finite difference in a over its density (series and continued-fraction branches both)."""
    a = np.array([0.3, 1.0, 2.5, 10.0, 0.8, 4.0])
    x = np.array([0.05, 1.3, 2.0, 12.0, 3.0, 0.5])
    got = ember.jit(_gamma.random_gamma_grad)(a, x)
    h = 1e-6
    dF_da = (scipy.special.gammainc(a + h, x) - scipy.special.gammainc(a - h, x)) / (2 * h)
    density = np.exp((a - 1) * np.log(x) - x - scipy.special.gammaln(a))
    np.testing.assert_allclose(got, -dF_da / density, rtol=1e-6)
    samples = random.gamma(random.PRNGKey(3), a, dtype=np.float64)
    grads = ember.grad(lambda a: random.gamma(random.PRNGKey(3), a, dtype=np.float64).sum())(a)
    np.testing.assert_allclose(grads, ember.jit(_gamma.random_gamma_grad)(a, samples), rtol=1e-12)


def test_multivariate_normal_compiled_gives_jax_numbers():
    """The LLVM backend calls LAPACK as JAX does: each factor's draws (a batch of covariances by Cholesky,
    the SVD's and eigh's factors) match the recorded JAX values, in one compiled function."""
    mean = np.float32([1., -2., 0.5])
    cov = np.float32([[2., .5, .1], [.5, 1., .2], [.1, .2, .5]])
    covs = np.stack([cov, np.float32([[1., 0., 0.], [0., 3., -1.], [0., -1., 1.]])])
    f = ember.jit(lambda k0, k42, kf: (random.multivariate_normal(k0, mean, covs),
                                       random.multivariate_normal(k42, mean, cov, (4,), method="svd"),
                                       random.multivariate_normal(kf, mean, cov, (2, 2), method="eigh")))
    kf = random.fold_in(random.split(random.PRNGKey(7), 3)[2], 11)
    got = f(random.PRNGKey(0), random.key(42), kf)
    for g, expr in zip(got, ["random.multivariate_normal(K0, MEAN, COVS)",
                             "random.multivariate_normal(K42, MEAN, COV, (4,), method='svd')",
                             "random.multivariate_normal(KF, MEAN, COV, (2, 2), method='eigh')"], strict=True):
        np.testing.assert_allclose(g, _jax(expr), rtol=2e-6, atol=2e-6, err_msg=expr)
