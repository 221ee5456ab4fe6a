"""Seed 004: gradient of sum(tanh(w @ x + b)^2) w.r.t. w, x and b: time and peak memory.

The seed's point is memory: a fused dense + bias + activation can overwrite w @ x in place, because tanh's
derivative can be written in terms of its output.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import EMBER_MEMORY_NOTE, Ops, RunConfig
from benchmarks.harness import Case, Row

NAME = "dense_bias_act"
TITLE = "dense + bias + tanh gradient, time and memory (seed 004)"
MEASURE_MEMORY = True
FULL_SIZES = (100, 1024)
QUICK_SIZES = (100, 256)
DESCRIPTION = f"""\
`sum(tanh(w @ x + b[:, None])**2)`, gradient w.r.t. (w, x, b), w and x n x n, b of length n, float32,
n = 100 and 1024 (`--quick`: 100 and 256). Peak memory is the memory one call allocates beyond its
inputs, where a tool reports it: for JAX the compiled executable's `memory_analysis()` (output + temp
bytes), for NumPy `tracemalloc`'s peak during one call. PyTorch reports no CPU allocator statistics.
Ember: {EMBER_MEMORY_NOTE}; the column fills in from `Lowered.memory().peak_bytes` when the graph
optimizer's memory plan lands."""


def loss(ops: Ops, w: Any, x: Any, b: Any) -> Any:
    """The seed's scalar: sum of the squared activations."""
    return ops.sum(ops.tanh(w @ x + b[:, None]) ** 2)


def numpy_grad(w: np.ndarray, x: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """By hand: y = tanh(z), dL/dz = 2 y (1 - y^2); dw = dz x^T, dx = w^T dz, db = row sums of dz."""
    y = np.tanh(w @ x + b[:, None])
    gz = 2.0 * y * (1.0 - y * y)
    return gz @ x.T, w.T @ gz, gz.sum(axis=1)


def inputs(n: int, dtype: type = np.float32, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w scaled by 1/sqrt(n) so tanh is not saturated; x and b standard normal."""
    rng = np.random.default_rng(seed)
    return ((rng.standard_normal((n, n)) / np.sqrt(n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype),
            rng.standard_normal(n).astype(dtype))


def cases(cfg: RunConfig) -> Iterator[Case]:
    """One case per size; memory measured for every implementation that has a tool for it."""
    for n in QUICK_SIZES if cfg.quick else FULL_SIZES:
        args = inputs(n)
        yield Case(NAME, "grad w, x, b", [cfg.baseline.impl(lambda fw: numpy_grad, args, memory=True)]
                   + [fw.impl(lambda fw: fw.grad(lambda w, x, b: loss(fw.ops, w, x, b), argnums=(0, 1, 2)), args,
                              memory=True) for fw in cfg.peers_and_ember()],
                   {"n": n})


def derived(rows: list[Row]) -> list[Derived]:
    """Nothing beyond the table."""
    return []
