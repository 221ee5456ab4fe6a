"""Hand-made fusions for the dump and explain tests: `fuse(graph, [(first, last, kind), ...])` puts
each run of nodes first..last into one `fusion` node, the way the fusion pass lays them out (body with
fresh Vars, nodes keeping loc and role; results are the values read after the run)."""

from __future__ import annotations

from ember.tracer import prims as P
from ember.tracer.ir import Graph, Node, Params, Var


def _body(nodes: list[Node], used_after: set) -> tuple[Graph, list, list]:
    """(body, operands, results) of a run of nodes: operands are the outer values it reads."""
    inner: dict[Var, Var] = {}
    operands: list[Var] = []
    body_inputs: list[Var] = []
    made: list[Node] = []
    for node in nodes:
        ins = []
        for a in node.inputs:
            if isinstance(a, Var) and a not in inner:
                inner[a] = Var(a.aval)
                operands.append(a)
                body_inputs.append(inner[a])
            ins.append(inner[a] if isinstance(a, Var) else a)
        outs = [Var(v.aval) for v in node.outputs]
        inner.update(zip(node.outputs, outs))
        made.append(Node(node.prim, ins, node.params, outs, node.loc, node.role))
    results = [v for node in nodes for v in node.outputs if v in used_after]
    return Graph(body_inputs, made, [inner[v] for v in results]), operands, results


def fuse(graph: Graph, runs: list[tuple[int, int, str]]) -> Graph:
    """`graph` with each run of node indices first..last (inclusive, disjoint) made one fusion of `kind`."""
    starts = {first: (last, kind) for first, last, kind in runs}
    nodes, j = [], 0
    while j < len(graph.nodes):
        if j not in starts:
            nodes.append(graph.nodes[j])
            j += 1
            continue
        last, kind = starts[j]
        run = list(graph.nodes[j:last + 1])
        later = [a for n in graph.nodes[last + 1:] for a in n.inputs] + list(graph.outputs)
        body, operands, results = _body(run, {a for a in later if isinstance(a, Var)})
        nodes.append(Node(P.fusion_p, operands, Params(body=body, kind=kind), results, run[-1].loc, run[-1].role))
        j = last + 1
    return graph.replace(nodes=nodes).verify()
