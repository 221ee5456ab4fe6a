"""How the graph optimizer scales: trace, optimize and compile the largest seed graph, the naive-loop cosine
gradient (seed 000: about 1000 scatter updates, ~55k traced nodes), at 1/4, 1/2 and all of its updates.

The phases are timed separately, each on the previous one's result, as `jit(f).lower(...).compile()`
runs them: tracing (with autodiff), the pass pipeline (`ember.api.compile.lower_graph`: inline, the
optimizations, the memory plan, stages recorded) and the backend's compile. The garbage collector runs
during the samples: collecting the graphs these phases build is part of what they cost.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.derived import Derived
from benchmarks.frameworks import Ember, RunConfig
from benchmarks.harness import Case, Impl, Prepared, Row, check_close
from benchmarks.workloads import cosine
from ember.api.compile import compile_graph, lower_graph

NAME = "optimizer"
TITLE = "trace, optimize and compile the naive-loop cosine gradient (seed 000), by number of updates"
MEASURE_MEMORY = False
HIDE_COLUMNS = ("compile/trace", "× numpy", "× JAX")
X_LABEL = "scatter updates"
SETTINGS = dict(min_reps=3)  # phases take seconds each: the median of 3 (the quick run keeps its own)
FULL_SHAPE = dict(R=4, N=16, W=64)
QUICK_SHAPE = dict(R=2, N=4, W=8)
FULL_BATCHES = (4, 8, 16)    # B·R·N = 256, 512, 1024 updates (the cosine workload's naive loops: B=16)
QUICK_BATCHES = (1, 2, 4)    # 8, 16, 32 updates
CASE = "naive-loop cosine gradient"
PHASES = ("trace", "optimize", "compile")
DESCRIPTION = """\
The gradient of `sum(softmax(...) * weights)` of the cosine workload's *naive loops* (the seed's scalar
loops with one `r.at[k, i, j].set(...)` per (k, j, i)), with a, b: (B, 4, 64), (B, 16, 64), float32, for
B = 4, 8, 16: 256, 512 and 1024 scatter updates, the largest graph of the seeds (`--quick`: R=2, N=4, W=8,
B = 1, 2, 4: 8, 16, 32 updates). Each phase of `jit(f).lower(a, b).compile()` is timed on its own, on the
previous phase's result: *trace* is tracing with autodiff (`lower` with `optimize=False`, which adds only
inlining and the naive memory plan), *optimize* the pass pipeline as `lower` runs it
(`ember.api.compile.lower_graph`: inline, the optimizations, the memory plan), *compile* the backend's
compile of the optimized graph and its plan, without the disk cache (its result is checked against the
hand-written NumPy gradient first). The GC runs during these samples (collecting the graphs is part of the
cost). Notes give the node counts; the derived ratios t(n) / t(n/2) say how each phase scales: 2 is linear."""


class Graphs:
    """One size's traced, optimized and compiled graphs, built once and shared by the phases' rows."""

    def __init__(self, fw: Ember, fn: Callable, args: tuple):
        self.fw, self.fn, self.args = fw, fn, args

    @functools.cached_property
    def traced(self) -> Any:
        """The Lowered of `optimize=False` (its `.graph` is the traced graph)."""
        return self.fw.lower(self.fn, self.args, optimize=False)

    @functools.cached_property
    def optimized(self) -> tuple[Any, Any, list]:
        """(optimized graph, plan, stages) of the pipeline on the traced graph."""
        return lower_graph(self.traced.graph)

    def compile(self) -> Any:
        """The backend's executable for the optimized graph and plan, compiled anew: without the disk
        cache, which would serve every repetition after the first."""
        graph, plan, stages = self.optimized
        inlined = next(s.graph for s in stages if s.name == "after inline")
        saved = os.environ.get("EMBER_CACHE_DIR")
        os.environ["EMBER_CACHE_DIR"] = "0"
        try:
            return compile_graph(graph, backend=self.fw.backend, plan=plan, source=inlined)[0]
        finally:
            if saved is None:
                del os.environ["EMBER_CACHE_DIR"]
            else:
                os.environ["EMBER_CACHE_DIR"] = saved


def prepare(phase: str, graphs: Graphs, reference: Callable[[], Any]) -> Prepared:
    """The timed callable of one phase, with the node counts as its note. Building the graphs for the notes
    and the check already ran each phase once, so the first timed call is warm (no calibration call)."""
    fw, fn, args = graphs.fw, graphs.fn, graphs.args
    timed = functools.partial(Prepared, keep_gc=True, calibrate=False)
    if phase == "trace":
        note = f"{len(graphs.traced.graph.nodes):,} nodes traced"
        return timed(lambda: fw.lower(fn, args, optimize=False), note=note)
    if phase == "optimize":
        traced = graphs.traced.graph
        optimized, _, stages = graphs.optimized
        counts = " → ".join(f"{len(s.graph.nodes):,}" for s in stages)
        return timed(lambda: lower_graph(traced),
                     note=f"{len(traced.nodes):,} → {len(optimized.nodes):,} nodes ({counts} after "
                          f"{', '.join(s.name.removeprefix('after ') for s in stages)})")
    exe = graphs.compile()
    check_close(exe(*args), reference())
    return timed(graphs.compile, note=f"{len(graphs.optimized[0].nodes):,} nodes compiled")


def cases(cfg: RunConfig) -> Iterator[Case]:
    """One case per number of updates; one row per Ember backend and phase."""
    shape = QUICK_SHAPE if cfg.quick else FULL_SHAPE
    for batch in QUICK_BATCHES if cfg.quick else FULL_BATCHES:
        dims = dict(shape, B=batch)
        a, b, weights = cosine.inputs(dims)
        updates = batch * dims["R"] * dims["N"]
        impls = []
        for fw in (f for f in cfg.frameworks if isinstance(f, Ember)):
            graphs = Graphs(fw, fw.grad(cosine.loss_fn(cosine.cosine_naive, fw.ops, weights), argnums=(0, 1)), (a, b))
            reference = functools.partial(cosine.numpy_grad, a, b, weights)
            impls += [Impl(f"{fw.name} {phase}", fw.kind, functools.partial(prepare, phase, graphs, reference))
                      for phase in PHASES]
        yield Case(NAME, CASE, impls, dict(dims, updates=updates), series=CASE, x=updates)


def derived(rows: list[Row]) -> list[Derived]:
    """t(n updates) / t(n/2 updates) per phase and backend: 2 is linear, 4 quadratic."""
    out = []
    for row in (r for r in rows if r.median_s is not None):
        n = row.params["updates"]
        half = next((r for r in rows if r.impl == row.impl and r.params["updates"] * 2 == n and r.median_s), None)
        if half is not None:
            fw, phase = row.impl.rsplit(" ", 1)
            out.append(Derived(NAME, f"{phase}: t({n:,} updates) / t({n // 2:,})", fw, row.median_s / half.median_s))
    return out
