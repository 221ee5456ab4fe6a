"""Ember's native thread pool: the large seed-001 workloads on 1 thread and on every CPU the process may
use, beside `jax.jit` with its default threads (XLA's CPU runtime splits large kernels across cores)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import Ember, RunConfig
from benchmarks.harness import Case, Row
from benchmarks.workloads.eam import eam, numpy_grad

NAME = "threads"
TITLE = "EAM gradient on 1 and on all threads (seed 001, float64)"
MEASURE_MEMORY = False
DESCRIPTION = """\
The eam gradient at n = 10**6 and `vmap(grad)` over 10_000 x 100 (`--quick`: 10**5 and 1_000 x 100), with
Ember's thread count set to 1 and to every CPU this process may use (`ember.config.num_threads`), beside
`jax.jit` with its own defaults. Ember's rows are bitwise identical whatever the thread count (tested).
Run it without `--threads 1`, which pins the process to one CPU: then the rows say only that."""


class _EmberThreads(Ember):
    """`ember.jit` with `ember_num_threads` set to `n` for each call (a row per thread count)."""

    def __init__(self, backend: str, n: int):
        super().__init__(backend)
        self.threads, self.name = n, f"ember[{backend}] {n} thread{'s' if n > 1 else ''}"

    def jit(self, fn: Callable) -> Callable:
        jitted, config, n = super().jit(fn), self.ember.config, self.threads

        def call(*args):
            if config.num_threads != n:
                config.update("ember_num_threads", n)
            return jitted(*args)

        return call


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cases(cfg: RunConfig) -> Iterator[Case]:
    """grad at one large n, then vmap(grad) over a large batch."""
    cpus = _cpus()
    counts = sorted({1, cpus})
    ember_rows = [row for f in cfg.peers_and_ember() if isinstance(f, Ember)  # the numpy backend: one row
                  for row in ([_EmberThreads(f.backend, n) for n in counts] if f.backend == "llvm" else [f])]
    peers = [f for f in cfg.peers_and_ember() if f.kind == "jax"]
    rng = np.random.default_rng(1)
    n = 10**5 if cfg.quick else 10**6
    x = rng.random(n)
    yield Case(NAME, "grad", [cfg.baseline.impl(lambda fw: numpy_grad, (x,))]
               + [fw.impl(lambda fw: fw.grad(lambda v: eam(fw.ops, v)), (x,)) for fw in ember_rows + peers],
               {"n": n, "cpus": cpus})
    rows = 1000 if cfg.quick else 10_000
    xs = rng.random((rows, 100))
    yield Case(NAME, "vmap(grad)", [cfg.baseline.impl(lambda fw: numpy_grad, (xs,))]
               + [fw.impl(lambda fw: fw.vmap(fw.grad(lambda v: eam(fw.ops, v))), (xs,)) for fw in ember_rows + peers],
               {"vectors": rows, "length": 100, "cpus": cpus})


def derived(rows: list[Row]) -> list[Derived]:
    """Each row over Ember on 1 thread (the goal for all threads on 2 idle cores: at most 1/1.7 = 0.59) and
    over jax.jit (the goal: below 1)."""
    out = []
    for case in dict.fromkeys(r.case for r in rows):
        mine = [r for r in rows if r.case == case and r.median_s is not None]
        one = next((r for r in mine if r.impl.startswith("ember[llvm] 1 thread")), None)
        jax = next((r for r in mine if r.framework == "jax"), None)
        for r in mine:
            if r.framework != "ember" or r is one:
                continue
            if one is not None:
                out.append(Derived(NAME, f"{case}: / ember[llvm] 1 thread", r.impl, r.median_s / one.median_s))
            if jax is not None:
                out.append(Derived(NAME, f"{case}: / jax.jit", r.impl, r.median_s / jax.median_s))
    return out
