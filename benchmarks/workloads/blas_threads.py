"""Seed 002's MLP training step beside a busy process: the threads Ember's BLAS calls run on.

Issue 21: with OpenBLAS's default thread count, a 10-32-32-10 training step beside one busy process took
2x its single-threaded time, and seconds-long stalls on a loaded machine. Ember sets the count of its own
BLAS calls (ember/backends/llvm/blas.py); this times the step with Ember's defaults beside the same step
with `ember_num_threads=1`, and a wider MLP whose products are large enough for several threads.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import Framework, RunConfig
from benchmarks.harness import Case, Impl, Prepared, Row
from benchmarks.workloads.per_sample import init_params, mlp, numpy_grads

NAME = "blas_threads"
TITLE = "MLP training step beside a busy process: BLAS threads (seed 002)"
MEASURE_MEMORY = False
BATCH = 256
SIZES = ((10, 32, 32, 10), (10, 512, 512, 10))
ACTIVATION = "tanh"
SINGLE = " (ember_num_threads=1)"
DESCRIPTION = f"""\
The mean-batch gradient of `sum(model(x)) / {BATCH}` for an MLP (x @ w + b, {ACTIVATION} between layers),
float32, batch {BATCH}: seed 002's 10 -> 32 -> 32 -> 10 (every product below 2**20 multiply-adds: one
BLAS thread), and 10 -> 512 -> 512 -> 10 (the 512 x 512 products, 67M multiply-adds, may use
`ember_num_threads` threads). While these cases run, a second process spins a Python loop pinned to
the last CPU this process may use (`os.sched_setaffinity`; with one CPU, on the same CPU). Libraries
keep their default thread settings (run without `--threads`). *{SINGLE.strip()}*: the same Ember
function with `ember.config.num_threads` set to 1 around each call (two `config.update` calls, about
1 µs). The goal: Ember's default within 1.5x of its single-threaded time."""


@contextmanager
def busy_neighbour() -> Iterator[int]:
    """A process spinning on the last CPU this process may use, for the duration; yields that CPU."""
    cpu = sorted(os.sched_getaffinity(0))[-1] if hasattr(os, "sched_getaffinity") else 0
    code = (f"import os\nif hasattr(os, 'sched_setaffinity'): os.sched_setaffinity(0, {{{cpu}}})\n"
            "while True: pass\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield cpu
    finally:
        proc.kill()
        proc.wait()


def single_threaded(fw: Framework, make: Callable, args: tuple) -> Impl:
    """An Ember row whose calls run with `ember_num_threads` = 1 (restored after each call)."""
    config = fw.ember.config

    def prepare() -> Prepared:
        prepared = fw.prepare(make, args)
        run = prepared.run

        def run_single():
            old = config.num_threads
            config.update("ember_num_threads", 1)
            try:
                return run()
            finally:
                config.update("ember_num_threads", old)

        prepared.run, prepared.after_first = run_single, None
        return prepared

    return Impl(fw.name + SINGLE, fw.kind, prepare)


def case_name(sizes: tuple[int, ...]) -> str:
    return f"mean-batch grad, MLP {'-'.join(map(str, sizes))}"


def cases(cfg: RunConfig) -> Iterator[Case]:
    """For each MLP: NumPy, Ember (default and single-threaded) and the peers, beside a busy process."""
    base = cfg.baseline
    with busy_neighbour() as cpu:
        for sizes in SIZES:
            params = init_params(sizes=sizes)
            xs = np.random.default_rng(1).standard_normal((BATCH, sizes[0])).astype(np.float32)

            def mean_loss(fw):
                return lambda p, x: fw.ops.sum(mlp(fw.ops, p, x, ACTIVATION)) / float(BATCH)

            def make(fw, ml=mean_loss):
                return fw.grad(ml(fw))

            impls = [base.impl(lambda fw: lambda p, x: numpy_grads(p, x, ACTIVATION, False), (params, xs))]
            for fw in cfg.peers_and_ember():
                impls.append(fw.impl(make, (params, xs)))
                if fw.kind == "ember" and hasattr(fw, "ember"):
                    impls.append(single_threaded(fw, make, (params, xs)))
            yield Case(NAME, case_name(sizes), impls, {"batch": BATCH, "busy CPU": cpu})


def derived(rows: list[Row]) -> list[Derived]:
    """Each Ember row over its single-threaded row, per MLP (the goal: at most 1.5)."""
    out = []
    for sizes in SIZES:
        name = case_name(sizes)
        for single in (r for r in rows if r.case == name and r.impl.endswith(SINGLE) and r.median_s):
            default = next((r for r in rows if r.case == name and r.impl == single.impl[:-len(SINGLE)]
                            and r.median_s), None)
            if default is not None:
                out.append(Derived(NAME, f"default / single-threaded, {name}", default.impl,
                                   default.median_s / single.median_s))
    return out
