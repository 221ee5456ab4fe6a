"""Linear algebra (issue 28): the value and gradient of a Gaussian process's negative log marginal
likelihood (examples/gaussian_process.py's function) at n = 512 in float64, through a Cholesky
factorization and two triangular solves and their VJPs, against a hand-written SciPy baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import scipy.linalg

from benchmarks.derived import Derived
from benchmarks.frameworks import Framework, RunConfig
from benchmarks.harness import Case, Row

NAME = "linalg"
TITLE = "Gaussian-process marginal likelihood and its gradient (cholesky, solve_triangular)"
MEASURE_MEMORY = False
FULL_SIZE = 512
QUICK_SIZE = 64
DESCRIPTION = """\
`value_and_grad` of a zero-mean GP's negative log marginal likelihood in its three log-hyperparameters
(lengthscale, signal, noise of a squared-exponential kernel) at n = 512 points in 1-d, float64
(`--quick`: n = 64): the kernel matrix, its Cholesky factor, two triangular solves, and back through
them (examples/gaussian_process.py's function, JAX code). The baseline is SciPy by hand: `cho_factor`,
`cho_solve` for alpha = K^-1 y and K^-1, and the standard gradient 0.5 tr((K^-1 - alpha alpha^T) dK/dtheta).
PyTorch is not run here."""

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


# -- the model, JAX code over a numpy module and its solve_triangular -----------------------------------

def neg_log_marginal_likelihood(jnp: ModuleType, solve_triangular: Callable) -> Callable:
    """The GP example's -log p(y | x, exp(log_params)), written against `jnp` (ember.numpy or jax.numpy)."""
    def nlml(log_params: Any, x: Any, y: Any) -> Any:
        n = x.shape[0]
        lengthscale, signal, noise = jnp.exp(log_params[0]), jnp.exp(log_params[1]), jnp.exp(log_params[2])
        sq = jnp.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
        k = signal ** 2 * jnp.exp(-0.5 * sq / lengthscale ** 2) + (noise ** 2 + 1e-8) * jnp.eye(n, dtype=x.dtype)
        chol = jnp.linalg.cholesky(k)
        alpha = solve_triangular(chol.T, solve_triangular(chol, y, lower=True), lower=False)
        return 0.5 * jnp.dot(y, alpha) + jnp.sum(jnp.log(jnp.diagonal(chol))) + n * _HALF_LOG_2PI

    return nlml


def _modules(fw: Framework) -> tuple[ModuleType, Callable, Callable]:
    """(numpy module, solve_triangular, value_and_grad) of an Ember or JAX framework."""
    if fw.kind == "ember":
        import ember.numpy
        import ember.scipy.linalg

        return ember.numpy, ember.scipy.linalg.solve_triangular, fw.ember.value_and_grad
    import jax.scipy.linalg

    return fw.jnp, jax.scipy.linalg.solve_triangular, fw.jax.value_and_grad


def make_value_and_grad(fw: Framework) -> Callable:
    """value_and_grad of the likelihood in the log-hyperparameters, on `fw`'s arrays and transforms."""
    jnp, solve_triangular, value_and_grad = _modules(fw)
    return value_and_grad(neg_log_marginal_likelihood(jnp, solve_triangular))


# -- hand-written SciPy ---------------------------------------------------------------------------------

def numpy_value_and_grad(log_params: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.float64, np.ndarray]:
    """The likelihood and d/d(log lengthscale, log signal, log noise) = 0.5 tr(W dK) with
    W = K^-1 - alpha alpha^T: dK/dlog l = K_se * sq / l^2, dK/dlog s = 2 K_se, dK/dlog sigma = 2 sigma^2 I."""
    n = x.shape[0]
    lengthscale, signal, noise = np.exp(log_params)
    sq = np.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
    k_se = signal ** 2 * np.exp(-0.5 * sq / lengthscale ** 2)
    k = k_se + (noise ** 2 + 1e-8) * np.eye(n)
    factor = scipy.linalg.cho_factor(k, lower=True)
    alpha = scipy.linalg.cho_solve(factor, y)
    value = 0.5 * y @ alpha + np.sum(np.log(np.diagonal(factor[0]))) + n * _HALF_LOG_2PI
    w = scipy.linalg.cho_solve(factor, np.eye(n)) - np.outer(alpha, alpha)
    grad = 0.5 * np.array([np.sum(w * k_se * sq) / lengthscale ** 2, 2.0 * np.sum(w * k_se),
                           2.0 * noise ** 2 * np.trace(w)])
    return np.float64(value), grad


# -- cases --------------------------------------------------------------------------------------------

def inputs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log_params, x, y): the GP example's data (noisy sin(3x) at n sorted points in [-2, 2]), float64."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-2.0, 2.0, (n, 1)), axis=0)
    y = np.sin(3.0 * x[:, 0]) + 0.1 * rng.standard_normal(n)
    return np.log(np.array([0.5, 1.0, 0.3])), x, y


def cases(cfg: RunConfig) -> Iterator[Case]:
    """One case: value_and_grad at the size; SciPy by hand, Ember's jit on each backend, jax.jit."""
    n = QUICK_SIZE if cfg.quick else FULL_SIZE
    args = inputs(n)
    impls = [cfg.baseline.impl(lambda fw: numpy_value_and_grad, args)]
    impls += [fw.impl(make_value_and_grad, args) for fw in cfg.peers_and_ember() if fw.kind in ("ember", "jax")]
    yield Case(NAME, "value_and_grad", impls, {"n": n})


def derived(rows: list[Row]) -> list[Derived]:
    """Nothing beyond the table (its ratio columns are Ember over SciPy and over JAX)."""
    return []
