"""Functions Dask workers run in tests/test_dask.py (importable, so they pickle by name)."""

import numpy as np

import ember
import ember.numpy as jnp
from ember.backends.llvm import pool


@ember.jit
def energy_grad(x):
    """The seed-001 model's gradient, jitted once per worker process."""
    return ember.grad(lambda v: jnp.sum(jnp.exp(-3.0 * (v + 1.0))) ** 2)(x)


def run(seed: int, n: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(n)
    return energy_grad(x)


def worker_state() -> dict:
    """What the worker process's Ember did: compiles, its thread budget and the native threads it runs."""
    import os

    return {"misses": energy_grad.cache_info().misses, "num_threads": ember.config.num_threads,
            "pool_threads": len(pool.pool().threads), "omp": os.environ.get("OMP_NUM_THREADS")}


def mlp_loss(params, x, y):
    """The seed-002 MLP's squared error on one sample (x: (10,), y: (10,))."""
    (w1, b1), (w2, b2), (w3, b3) = params
    h = jnp.tanh(x @ w1 + b1)
    h = jnp.tanh(h @ w2 + b2)
    return jnp.sum((h @ w3 + b3 - y) ** 2)


per_sample_grads = ember.jit(ember.vmap(ember.grad(mlp_loss), in_axes=(None, 0, 0)))


def mlp_params(seed: int = 0, dtype=np.float64) -> list:
    rng = np.random.default_rng(seed)
    sizes = [(10, 32), (32, 32), (32, 10)]
    return [(rng.standard_normal(s).astype(dtype) / np.sqrt(s[0]), np.zeros(s[1], dtype)) for s in sizes]


TRACES = [0]  # how many times this worker traced a function calling count_trace


def count_trace(x):
    """Called by a traced function: runs once per trace, never in compiled code."""
    TRACES[0] += 1
    return x


def traces() -> int:
    return TRACES[0]
