"""Common-subexpression elimination: nodes with the same primitive, params and operands compute the
same values (every primitive is pure), so later copies reuse the first one's outputs. Literal
operands compare by `Literal.key` (dtype and bits: 0.0 and -0.0 differ). A rematerialized value
(role "recompute") is never merged with a copy outside the recomputation, nor the other way round:
that would keep the forward's value alive until the backward pass, undoing the checkpoint."""

from __future__ import annotations

from ember.passes.autodiff import ROLE_RECOMPUTE
from ember.tracer.ir import Graph, Literal, Node, Var


def _key(a):
    return a.key if isinstance(a, Literal) else a


def cse(graph: Graph) -> Graph:
    rename: dict[Var, Var] = {}
    seen: dict[tuple, Node] = {}
    nodes = []
    for node in graph.nodes:
        ins = tuple(rename.get(a, a) if isinstance(a, Var) else a for a in node.inputs)
        key = (node.prim, node.params, tuple(_key(a) for a in ins), node.role == ROLE_RECOMPUTE)
        prev = seen.get(key)
        if prev is not None:
            rename.update(zip(node.outputs, prev.outputs))
            continue
        new = node if ins == node.inputs else Node(node.prim, ins, node.params, node.outputs, node.loc, node.role)
        seen[key] = new
        nodes.append(new)
    outs = [rename.get(v, v) if isinstance(v, Var) else v for v in graph.outputs]
    return graph.replace(nodes=nodes, outputs=outs)
