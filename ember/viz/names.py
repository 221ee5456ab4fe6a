"""The names renderings give a graph's values: `GraphNames` (jaxpr order, each fusion body named as the
code it replaces), shared by `lowered.text()`, DOT dumps, `Lowered.explain()` and `Lowered.memory()`,
so a report can say `exp c -> mul e` and mean the lines of the text."""

from __future__ import annotations

from ember.tracer import prims as P
from ember.tracer.ir import Graph, Namer, Node, Var
from ember.tracer.prims.fusion import fusion_p


def fusion_body(node: Node) -> Graph | None:
    """The subgraph a fusion node computes in one kernel, or None for any other node."""
    return node.params["body"] if node.prim is fusion_p else None


def control_bodies(node: Node) -> list[tuple[str, Graph]]:
    """The titled bodies of a cond, while or scan node (empty for any other node)."""
    p = node.params
    if node.prim is P.scan_p:
        return [("body", p["body"])]
    if node.prim is P.while_p:
        return [("cond_fun", p["cond_graph"]), ("body_fun", p["body_graph"])]
    if node.prim is P.cond_p:
        return [(f"branch {k}", g) for k, g in enumerate(p["branches"])]
    return []


class GraphNames(Namer):
    """The names `lowered.text()`, DOT dumps and explain() give a graph's values: jaxpr order (consts,
    inputs, each node's results), each fusion's body right after the fusion, its inputs and results
    named as the fusion's operands and results so the body reads like the code it replaces."""

    def __init__(self, graph: Graph | None = None):
        super().__init__()
        self.aliases: dict[Var, str] = {}
        self.nodes: dict[Node, str] = {}  # node -> the name of its first result
        if graph is not None:
            for v in (*graph.consts, *graph.inputs):
                self(v)
            self._name_nodes(graph.nodes)

    def __call__(self, atom) -> str:
        alias = self.aliases.get(atom) if isinstance(atom, Var) else None
        return alias if alias is not None else super().__call__(atom)

    def knows(self, v: Var) -> bool:
        """Whether `v` was named by the walk over the graph (else naming it would invent a name)."""
        return v in self.aliases or v in self._names

    def _name_nodes(self, nodes) -> None:
        for node in nodes:
            names = [self(v) for v in node.outputs]
            self.nodes[node] = names[0] if names else ""
            body = fusion_body(node)
            if body is not None:
                for v, a in zip(body.inputs, node.inputs):
                    if isinstance(a, Var):
                        self.aliases[v] = self(a)
                for v, r in zip(body.outputs, node.outputs):
                    if isinstance(v, Var) and v not in self.aliases:
                        self.aliases[v] = self(r)
                self._name_nodes(body.nodes)
            for _, sub in control_bodies(node):  # a body's values get names of their own, after the node's
                for v in sub.inputs:
                    self(v)
                self._name_nodes(sub.nodes)

    def label(self, node: Node) -> str | None:
        """`prim name` for a node of this graph (`exp c`), None if the node is not in it."""
        name = self.nodes.get(node)
        if name is None and node.outputs and self.knows(node.outputs[0]):
            name = self(node.outputs[0])  # the pass rebuilt the node but kept its result
        if name is None:
            return None
        return f"{node.prim.name} {name}".rstrip()
