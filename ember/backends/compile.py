"""`compile_graph`: the one road from a traced graph to an Executable, shared by jit and vjp.

It runs the pipeline (inline, the optimizations not disabled, the memory plan with the donated inputs)
and hands the graph and its plan to the backend's `compile(graph, plan)`. The result is wrapped so
that `ember.config.debug_nans` / `debug_infs` can check every call (see ember/backends/debug.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from ember.backends import Executable, get_backend
from ember.backends.debug import Checked
from ember.passes.memory import Plan
from ember.passes.pipeline import OPTIONAL, check_pass_names
from ember.passes.pipeline import optimize as run_pipeline
from ember.passes.stages import Stage, StageRecorder, recording
from ember.tracer.ir import Graph


def pipeline_options(optimize: bool = True, disable_passes: Iterable[str] = ()) -> tuple[str, ...]:
    """The passes to disable: all optional ones when `optimize` is False (names are validated)."""
    names = check_pass_names(disable_passes)
    return OPTIONAL if not optimize else names


def lower_graph(graph: Graph, donate: Iterable[int] = (), optimize: bool = True,
                disable_passes: Iterable[str] = ()) -> tuple[Graph, Plan, list[Stage]]:
    """Run the pipeline on `graph`: (optimized graph, plan, the stages it recorded)."""
    with recording(StageRecorder()) as rec:
        opt, plan = run_pipeline(graph, donate, pipeline_options(optimize, disable_passes))
    return opt, plan, rec.stages


def compile_graph(graph: Graph, donate: Iterable[int] = (), backend: str | None = None, optimize: bool = True,
                  disable_passes: Iterable[str] = (), plan: Plan | None = None) -> tuple[Executable, list[Stage]]:
    """Lower and compile `graph`; `donate` are flat input indices. Given a `plan`, `graph` is taken as
    already lowered (jit's `Lowered` keeps the stages it showed) and no pass runs again."""
    stages: list[Stage] = []
    if plan is None:
        graph, plan, stages = lower_graph(graph, donate, optimize, disable_passes)
    exe = get_backend(backend).compile(graph, plan)
    return Checked(exe, graph), stages
