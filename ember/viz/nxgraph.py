"""A stage's graph as a `networkx.DiGraph`, for users' own analyses (`Lowered.to_networkx`).

One networkx node per graph input, const and node, keyed by the name `lowered.text()` gives its
(first) value; an edge from producer to consumer for every value read. networkx is imported here,
when asked for, so `import ember` does not load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.tracer.ir import Graph, Var
from ember.viz.names import GraphNames

if TYPE_CHECKING:
    import networkx


def graph_to_networkx(graph: Graph, name: str = "", stage: str = "") -> networkx.DiGraph:
    """`graph` as a DiGraph. Node attributes: `prim` (the primitive's name, or "input"/"const"),
    `aval` (of the first value), `avals` (of every value), `loc` (the user's line, None for inputs and
    consts), `node` (the ember Node; None for inputs and consts), `output` (whether a value is a graph
    output). Edge attribute `values`: the names of the values that flow along it, in operand order.
    Graph attributes: `name`, `stage`, `inputs`, `consts` and `outputs` (value names; a literal output
    as its text)."""
    import networkx

    names = GraphNames(graph)
    outputs = {v for v in graph.outputs if isinstance(v, Var)}
    g = networkx.DiGraph(name=name, stage=stage, inputs=[names(v) for v in graph.inputs],
                         consts=[names(v) for v in graph.consts], outputs=[names(v) for v in graph.outputs])
    key: dict[Var, str] = {}
    for kind, values in (("const", graph.consts), ("input", graph.inputs)):
        for v in values:
            key[v] = names(v)
            g.add_node(key[v], prim=kind, aval=v.aval, avals=(v.aval,), loc=None, node=None, output=v in outputs)
    for node in graph.nodes:
        k = names(node.outputs[0]) if node.outputs else f"{node.prim.name}#{len(g)}"
        g.add_node(k, prim=node.prim.name, aval=node.outputs[0].aval if node.outputs else None,
                   avals=tuple(v.aval for v in node.outputs), loc=node.loc, node=node,
                   output=any(v in outputs for v in node.outputs))
        for a in node.inputs:
            if isinstance(a, Var) and a in key:
                src = key[a]
                if g.has_edge(src, k):
                    g.edges[src, k]["values"].append(names(a))
                else:
                    g.add_edge(src, k, values=[names(a)])
        for v in node.outputs:
            key[v] = k
    return g
