"""The optimization pipeline: the ordered list of graph -> graph passes jit runs after tracing.

Each pass is recorded as the stage "after <name>". Later passes (fusion, in-place, memory plan) are
one entry each in PASSES.
"""

from __future__ import annotations

from collections.abc import Callable

from ember.passes.cse import cse
from ember.passes.dce import dce
from ember.passes.simplify import simplify
from ember.passes.stages import record
from ember.tracer.ir import Graph

# Tests set this to verify the graph after every pass.
VERIFY = False

PASSES: list[tuple[str, Callable[[Graph], Graph]]] = [
    ("simplify", simplify),
    ("cse", cse),
    ("dce", dce),
]


def optimize(graph: Graph) -> Graph:
    """Run every pass in order, recording each result as a stage."""
    for name, fn in PASSES:
        graph = fn(graph)
        if VERIFY:
            graph.verify()
        record(f"after {name}", graph)
    return graph
