"""Text rendering of a recorded stage: a header line, then the graph with user lines and roles."""

from __future__ import annotations

from ember.passes.stages import Stage


def stage_text(stage: Stage) -> str:
    g = stage.graph
    header = (f"# stage: {stage.name} ({len(g.inputs)} inputs, {len(g.consts)} consts, {len(g.nodes)} nodes, "
              f"{len(g.outputs)} outputs)")
    return header + "\n" + g.text(locs=True, annotations=stage.annotations or None) + "\n"
