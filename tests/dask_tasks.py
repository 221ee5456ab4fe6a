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
