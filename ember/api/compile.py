"""`compile_graph`: the one road from a traced graph to an Executable, shared by jit and vjp.

It runs the pipeline (inline, the optimizations not disabled, the memory plan with the donated inputs)
and hands the graph and its plan to the backend's `compile(graph, plan)`. The result is wrapped so
that `ember.config.debug_nans` / `debug_infs` can check every call (see ember/backends/debug.py); a
NaN is traced back on the graph before optimization, whose nodes and consts are the user's own.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from ember.backends import Executable, get_backend
from ember.backends.debug import Checked
from ember.passes.memory import Plan, plan_memory
from ember.passes.pipeline import disabled_passes
from ember.passes.pipeline import optimize as run_pipeline
from ember.passes.stages import Stage, StageRecorder, recording
from ember.tracer.ir import Graph


def lower_graph(graph: Graph, donate: Iterable[int] = (), optimize: bool = True,
                disable_passes: Iterable[str] = ()) -> tuple[Graph, Plan, list[Stage]]:
    """Run the pipeline on `graph`: (optimized graph, plan, the stages it recorded)."""
    with recording(StageRecorder()) as rec:
        opt, plan = run_pipeline(graph, donate, disabled_passes(optimize, disable_passes))
    return opt, plan, rec.stages


def compile_graph(graph: Graph, donate: Iterable[int] = (), backend: str | None = None, optimize: bool = True,
                  disable_passes: Iterable[str] = (), plan: Plan | None = None, source: Graph | None = None,
                  name: str | None = None) -> tuple[Executable, list[Stage]]:
    """Lower and compile `graph`; `donate` are flat input indices. Given a `plan`, `graph` is taken as
    already lowered (jit's `Lowered` keeps the stages it showed), no pass runs again, and `source` is
    the graph before optimization (after inline) for debug_nans and the oracle check; `name` (the
    user's function) is what their errors call it."""
    stages: list[Stage] = []
    if plan is None:
        graph, plan, stages = lower_graph(graph, donate, optimize, disable_passes)
        source = next(s.graph for s in stages if s.name == "after inline")
    chosen = get_backend(backend)
    exe = chosen.compile(graph, plan)
    source = source or graph
    # optimize=False on the numpy backend: the same graph and the naive plan, the oracle itself
    is_oracle = chosen.name == "numpy" and graph is source and not getattr(plan, "inplace", None)
    oracle_plan = functools.partial(plan_memory, source, inplace=False)  # the naive plan: writes no input
    return Checked(exe, source, plan.donated, name or "a compiled function", is_oracle, oracle_plan), stages
