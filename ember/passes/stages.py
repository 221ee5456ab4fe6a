"""Stage recording: transforms and the pipeline report the graph after each step, so that
`jit(f).lower(...)`, `dump` and EMBER_DUMP_DIR can show every stage. Adding a stage is one call to
`record(name, graph)`; it costs nothing when no recorder is active."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from ember.tracer.ir import Graph

_state = threading.local()


@dataclass
class Stage:
    """One recorded stage: its name, graph and optional per-node annotations (e.g. autodiff roles)."""

    name: str
    graph: Graph
    annotations: Mapping = field(default_factory=dict)


class StageRecorder:
    def __init__(self):
        self.stages: list[Stage] = []

    def add(self, name: str, graph: Graph, annotations: Mapping | None = None) -> None:
        taken = {s.name for s in self.stages}
        unique, k = name, 2
        while unique in taken:
            unique, k = f"{name} #{k}", k + 1
        self.stages.append(Stage(unique, graph, dict(annotations or {})))


def active_recorder() -> StageRecorder | None:
    return getattr(_state, "recorder", None)


def record(name: str, graph: Graph, annotations: Mapping | None = None) -> None:
    rec = active_recorder()
    if rec is not None:
        rec.add(name, graph, annotations)


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
