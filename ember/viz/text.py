"""Text rendering of a recorded stage: a header line, the graph with user lines and roles (each fusion
followed by its body, indented, named as the code it replaces), and the memory plan when the stage has one."""

from __future__ import annotations

from collections.abc import Mapping

from ember.passes.stages import Stage
from ember.tracer.ir import Graph, Namer, node_text
from ember.viz.names import GraphNames, fusion_body


def stage_text(stage: Stage) -> str:
    g = stage.graph
    header = (f"# stage: {stage.name} ({len(g.inputs)} inputs, {len(g.consts)} consts, {len(g.nodes)} nodes, "
              f"{len(g.outputs)} outputs)")
    names = GraphNames(g)
    text = header + "\n" + graph_text(g, locs=True, annotations=stage.notes or None, names=names) + "\n"
    if stage.plan is not None:
        text += stage.plan.text(names) + "\n"
    return text


def graph_text(graph: Graph, locs: bool = True, annotations: Mapping | None = None,
               names: Namer | None = None) -> str:
    """jaxpr-like text as `ember.tracer.ir.graph_text`, with each fusion's body printed under it."""
    names = names or GraphNames(graph)
    lines = []
    _node_lines(graph.nodes, names, "    ", lines)
    width = max((len(t) for t, _, _ in lines if "\n" not in t), default=0)
    consts = " ".join(names.typed(v) for v in graph.consts)
    ins = " ".join(names.typed(v) for v in graph.inputs)
    out = [f"{{ lambda {consts + ' ' if consts else ''}; {ins} ."]
    for text, node, nested in lines:
        comment = [node.loc] if node is not None and locs and node.loc else []
        role = None
        if annotations and node is not None:  # a body node keeps the role of the node it was
            role = annotations.get(node, node.role) if nested else annotations.get(node)
        if role:
            comment.append(role)
        suffix = ("  # " + "  ".join(comment)) if comment else ""
        out.append((text.ljust(width) if suffix and "\n" not in text else text) + suffix)
    out.append(f"  in ({' '.join(names(v) for v in graph.outputs)}) }}")
    return "\n".join(out)


def _node_lines(nodes, names: Namer, pad: str, lines: list, nested: bool = False) -> None:
    """(text, node, nested) per line; a fusion as `fusion[kind=loop]` with its body indented under it."""
    for node in nodes:
        body = fusion_body(node)
        if body is None:
            lines.append((pad + node_text(node, names, len(pad)), node, nested))
            continue
        outs = " ".join(names.typed(v) for v in node.outputs)
        ins = " ".join(names(a) for a in node.inputs)
        lines.append((f"{pad}{outs} = fusion[kind={node.params['kind']}] {ins}".rstrip(), node, nested))
        _node_lines(body.nodes, names, pad + "    ", lines, True)
        passed = [f"{names(r)} = {names(v)}" for v, r in zip(body.outputs, node.outputs) if names(v) != names(r)]
        if passed:  # results that are a body input or a literal rather than a body node's value
            lines.append((f"{pad}    results: {', '.join(passed)}", None, True))
