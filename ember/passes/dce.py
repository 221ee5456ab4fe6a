"""Dead-code elimination: drop nodes (and consts) no output depends on. Inputs stay: they are the
signature."""

from __future__ import annotations

from ember.tracer.ir import Graph, Var


def dce(graph: Graph) -> Graph:
    live: set[Var] = {v for v in graph.outputs if isinstance(v, Var)}
    kept = []
    for node in reversed(graph.nodes):
        if any(v in live for v in node.outputs):
            kept.append(node)
            live.update(a for a in node.inputs if isinstance(a, Var))
    kept.reverse()
    consts = [(v, val) for v, val in zip(graph.consts, graph.const_values) if v in live]
    if len(kept) == len(graph.nodes) and len(consts) == len(graph.consts):
        return graph
    return graph.replace(nodes=kept, consts=[c for c, _ in consts], const_values=[val for _, val in consts])
