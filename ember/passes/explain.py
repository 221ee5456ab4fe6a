"""Why an optimization was not made: passes record each refusal here, `Lowered.explain()` reads them.

A pass calls `refuse(pass_name, rule, message, nodes)` where it declines to fuse an edge or to write
in place; the pipeline collects the refusals of each pass into its stage (`Stage.refusals`). `rule`
is a short stable name tests assert on ("expensive-duplicate", "cycle", "user-input", ...); `message`
is the sentence a user reads ("exp would be duplicated into 2 consumers"); `nodes` are the nodes
involved (producer first), whose `loc` is the user's line. Recording costs nothing outside a
`collecting()` block. Rendering the refusals into a report is `ember.viz.explain`'s work.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ember.tracer.ir import Node

_state = threading.local()


@dataclass(frozen=True, eq=False)
class Refusal:
    """One declined optimization: which pass, which rule, why (a sentence), and the nodes involved."""

    pass_name: str
    rule: str
    message: str
    nodes: tuple[Node, ...]

    @property
    def loc(self) -> str | None:
        """The user's line of the first node that has one."""
        return next((n.loc for n in self.nodes if n.loc), None)


def refuse(pass_name: str, rule: str, message: str, nodes: Sequence[Node] = ()) -> None:
    """Record that `pass_name` declined an optimization under `rule` (no-op unless collecting)."""
    sink = getattr(_state, "sink", None)
    if sink is not None:
        sink.append(Refusal(pass_name, rule, message, tuple(nodes)))


@contextlib.contextmanager
def collecting() -> Iterator[list[Refusal]]:
    """Collect the refusals recorded inside the block (nested blocks collect their own)."""
    outer = getattr(_state, "sink", None)
    sink: list[Refusal] = []
    _state.sink = sink
    try:
        yield sink
    finally:
        _state.sink = outer
