"""Stage recording: transforms and the pipeline report the graph after each step, so that
`jit(f).lower(...)`, `dump` and EMBER_DUMP_DIR can show every stage. Adding a stage is one call to
`record(name, graph)`; it costs nothing when no recorder is active. Only the stage after memory planning
carries a Plan; earlier stages have `plan=None` (the graph is not final, so neither is its memory).
A stage also keeps the refusals its pass recorded (ember/passes/explain.py), for `Lowered.explain()`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ember.passes.explain import Refusal
from ember.passes.memory import Plan
from ember.tracer.ir import Graph

_state = threading.local()


@dataclass
class Stage:
    """One recorded stage: its name, graph, optional per-node annotations (e.g. autodiff roles) and
    the memory plan (only on the stage after memory planning)."""

    name: str
    graph: Graph
    annotations: Mapping = field(default_factory=dict)
    plan: Plan | None = None
    refusals: tuple[Refusal, ...] = ()

    @property
    def notes(self) -> Mapping:
        """Per-node annotations for renderings: the recorded ones, else the roles nodes carry, so
        every later stage (the optimized graph too) still shows forward and backward work."""
        return self.annotations or {n: n.role for n in self.graph.nodes if n.role}


class StageRecorder:
    def __init__(self):
        self.stages: list[Stage] = []

    def add(self, name: str, graph: Graph, annotations: Mapping | None = None, plan: Plan | None = None,
            refusals: Sequence[Refusal] = ()) -> None:
        taken = {s.name for s in self.stages}
        unique, k = name, 2
        while unique in taken:
            unique, k = f"{name} #{k}", k + 1
        self.stages.append(Stage(unique, graph, dict(annotations or {}), plan, tuple(refusals)))


def active_recorder() -> StageRecorder | None:
    return getattr(_state, "recorder", None)


def record(name: str, graph: Graph, annotations: Mapping | None = None, plan: Plan | None = None,
           refusals: Sequence[Refusal] = ()) -> None:
    rec = active_recorder()
    if rec is not None:
        rec.add(name, graph, annotations, plan, refusals)


@contextlib.contextmanager
def recording(recorder: StageRecorder | None = None):
    """Collect every stage recorded inside the block into `recorder` (by default the enclosing
    block's recorder, so transforms nested in a lowering report to it)."""
    outer = active_recorder()
    rec = recorder or outer or StageRecorder()
    _state.recorder = rec
    try:
        yield rec
    finally:
        _state.recorder = outer
