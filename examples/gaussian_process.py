"""Gaussian-process regression: fit a squared-exponential kernel's hyperparameters by gradient descent on
the negative log marginal likelihood, as JAX code writes it. It runs unchanged under JAX but for the
three import lines.

The likelihood needs the Cholesky factor of the kernel matrix K = s^2 exp(-|x - x'|^2 / (2 l^2)) +
sigma^2 I: with K = L L^T, alpha = K^-1 y comes from two triangular solves, and
-log p(y) = y^T alpha / 2 + sum(log diag L) + n log(2 pi) / 2. Its gradient with respect to the three
log-hyperparameters flows back through the solves and the factorization (their VJP rules), all in one
compiled function. In 64-bit mode, as GP code runs.

    python examples/gaussian_process.py
"""

from __future__ import annotations

import time

import numpy as np

import ember as jax  # was: import jax
import ember.numpy as jnp  # was: import jax.numpy as jnp
from ember.scipy.linalg import solve_triangular  # was: from jax.scipy.linalg import solve_triangular


def kernel(log_params, x1, x2):
    """The squared-exponential kernel matrix of two sets of points (n, d) and (m, d)."""
    lengthscale, signal = jnp.exp(log_params[0]), jnp.exp(log_params[1])
    sq = jnp.sum((x1[:, None, :] - x2[None, :, :]) ** 2, axis=-1)
    return signal ** 2 * jnp.exp(-0.5 * sq / lengthscale ** 2)


def neg_log_marginal_likelihood(log_params, x, y):
    """-log p(y | x, hyperparameters) of a zero-mean GP with Gaussian noise exp(log_params[2])."""
    n = x.shape[0]
    noise = jnp.exp(log_params[2])
    k = kernel(log_params, x, x) + (noise ** 2 + 1e-8) * jnp.eye(n)
    chol = jnp.linalg.cholesky(k)
    alpha = solve_triangular(chol.T, solve_triangular(chol, y, lower=True), lower=False)
    return 0.5 * jnp.dot(y, alpha) + jnp.sum(jnp.log(jnp.diagonal(chol))) + 0.5 * n * jnp.log(2 * jnp.pi)


def data(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Noisy samples of sin(3 x) at n points in [-2, 2] (float64)."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-2.0, 2.0, (n, 1)), axis=0)
    return x, np.sin(3.0 * x[:, 0]) + 0.1 * rng.standard_normal(n)


step = jax.jit(jax.value_and_grad(neg_log_marginal_likelihood))


def main(steps: int = 100, n: int = 40, lr: float = 0.01, verbose: bool = True) -> dict:
    with jax.enable_x64(True):
        x, y = data(n)
        log_params = np.log(np.array([1.0, 1.0, 0.5]))
        t0 = time.perf_counter()
        value, grad = step(log_params, x, y)
        compile_s = time.perf_counter() - t0
        values = [float(value)]
        for _ in range(steps - 1):
            log_params = log_params - lr * np.asarray(grad)
            value, grad = step(log_params, x, y)
            values.append(float(value))
    if verbose:
        print(f"n = {n}: first call (trace, differentiate, compile, run) {compile_s * 1e3:.0f} ms")
        for k in (0, steps // 2, steps - 1):
            print(f"step {k:4d}: -log p(y) = {values[k]:.4f}")
        print("lengthscale, signal, noise:", np.round(np.exp(log_params), 4))
    return {"values": values, "log_params": log_params, "x": x, "y": y}


if __name__ == "__main__":
    main()
