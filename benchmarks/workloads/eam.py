"""Seed 001: the EAM-like energy f(x) = rho^2 + rho^3 + rho^4 / 4, rho = sum(exp(-3 (x + 1))), float64.

The seed compares AD gradients against a hand-written one (`deam!`); here its vectorized NumPy form is the
baseline, at n = 100, 1000 and 10**6, and `vmap(grad(f))` over 10_000 vectors of length 100.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from benchmarks.derived import Derived, over_floor
from benchmarks.frameworks import Ops, RunConfig
from benchmarks.harness import Case, Row, floor

NAME = "eam"
TITLE = "EAM energy gradient, float64 (seed 001)"
MEASURE_MEMORY = False
FULL_SIZES = (100, 1000, 10**6)
QUICK_SIZES = (100, 1000, 10**4)
FULL_BATCH = (10_000, 100)
QUICK_BATCH = (100, 100)
DESCRIPTION = """\
f(x) = rho^2 + rho^3 + rho^4/4 with rho = sum(exp(-3(x+1))), float64, x uniform in [0, 1). `grad` at
n = 100, 1000, 10**6 (`--quick`: up to 10**4), and `vmap(grad(f))` over 10_000 vectors of length 100
(`--quick`: 100 vectors). Baseline: the seed's hand-written gradient `g = -3 exp(-3(x+1)) (2 rho + 3 rho^2 +
rho^3)`, vectorized with NumPy (per row for the batched case)."""


EXP_PASS = "np.exp over x (one pass)"


def eam(ops: Ops, x: Any) -> Any:
    """The seed's energy."""
    rho = ops.sum(ops.exp(-3.0 * (x + 1.0)))
    return rho**2 + rho**3 + 0.25 * rho**4


def numpy_grad(x: np.ndarray) -> np.ndarray:
    """The seed's `deam!`: dF/drho times drho/dx, for one vector or (batched) for each row."""
    e = np.exp(-3.0 * (x + 1.0))
    rho = np.sum(e, axis=-1, keepdims=True)
    return (-3.0 * e) * (2.0 * rho + 3.0 * rho**2 + rho**3)


def cases(cfg: RunConfig) -> Iterator[Case]:
    """grad at each size (a plotted series), then vmap(grad) over a batch of vectors."""
    rng = np.random.default_rng(1)
    for n in QUICK_SIZES if cfg.quick else FULL_SIZES:
        x = rng.random(n)
        yield Case(NAME, "grad", [cfg.baseline.impl(lambda fw: numpy_grad, (x,))]
                   + [fw.impl(lambda fw: fw.grad(lambda v: eam(fw.ops, v)), (x,)) for fw in cfg.peers_and_ember()]
                   + [floor(EXP_PASS, np.exp, (x,))],
                   {"n": n}, series="grad f", x=n)
    rows, n = QUICK_BATCH if cfg.quick else FULL_BATCH
    xs = rng.random((rows, n))
    yield Case(NAME, "vmap(grad)", [cfg.baseline.impl(lambda fw: numpy_grad, (xs,))]
               + [fw.impl(lambda fw: fw.vmap(fw.grad(lambda v: eam(fw.ops, v))), (xs,))
                  for fw in cfg.peers_and_ember(vmap=True)]
               + [floor(EXP_PASS, np.exp, (xs,))],
               {"vectors": rows, "length": n})


def derived(rows: list[Row]) -> list[Derived]:
    """Each implementation over one pass of np.exp over its input (the issue's goal at n = 10**6: 1.5x)."""
    return over_floor(NAME, rows)
