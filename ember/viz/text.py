"""Text rendering of a recorded stage: a header line, the graph with user lines and roles, and the
memory plan when the stage has one."""

from __future__ import annotations

from ember.passes.stages import Stage
from ember.tracer.ir import Namer, graph_text


def stage_text(stage: Stage) -> str:
    g = stage.graph
    header = (f"# stage: {stage.name} ({len(g.inputs)} inputs, {len(g.consts)} consts, {len(g.nodes)} nodes, "
              f"{len(g.outputs)} outputs)")
    names = Namer()
    text = header + "\n" + graph_text(g, locs=True, annotations=stage.notes or None, names=names) + "\n"
    if stage.plan is not None:
        text += stage.plan.text(names) + "\n"
    return text
