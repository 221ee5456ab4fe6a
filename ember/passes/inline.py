"""Inline custom_vjp_call, custom_jvp_call and remat_call nodes: after differentiation their rules have
done their work, so each call is replaced by its primal subgraph's (or body's) nodes (fresh Vars, the
user's lines kept) and no backend ever sees one. Nested calls inside a body are inlined too; a
checkpoint_name is replaced by the value it names."""

from __future__ import annotations

from ember.tracer import prims as P
from ember.tracer.ir import Graph, Node, Var

# Both hold `primal` (their first num_consts[0] operands and their arguments, the last ones, -> outs).
CUSTOM_CALLS = (P.custom_vjp_call_p, P.custom_jvp_call_p)
INLINED = (*CUSTOM_CALLS, P.remat_call_p, P.checkpoint_name_p)


class _Inliner:
    """The flattened graph under construction: its nodes and the consts lifted out of subgraphs."""

    def __init__(self, graph: Graph):
        self.nodes: list[Node] = []
        self.consts = list(graph.consts)
        self.const_values = list(graph.const_values)

    def emit(self, graph: Graph, env: dict, role: str | None, fresh: bool) -> None:
        """Append `graph`'s nodes with operands renamed through `env`; with `fresh` (a subgraph body,
        which may be inlined more than once) their outputs get new Vars too."""
        for node in graph.nodes:
            ins = [env.get(a, a) if isinstance(a, Var) else a for a in node.inputs]
            node_role = node.role or role
            if node.prim in CUSTOM_CALLS:
                self.call(node, ins, env, node_role)
            elif node.prim is P.remat_call_p:  # undifferentiated, a checkpointed function is its body
                self.body(node.params["body"], ins, node.outputs, env, node_role)
            elif node.prim is P.checkpoint_name_p:  # a name is the value it names
                env[node.outputs[0]] = ins[0]
            elif fresh:
                outs = [env.setdefault(v, Var(v.aval)) for v in node.outputs]
                self.nodes.append(Node(node.prim, ins, node.params, outs, node.loc, node_role))
            elif tuple(ins) != node.inputs:
                self.nodes.append(Node(node.prim, ins, node.params, node.outputs, node.loc, node.role))
            else:
                self.nodes.append(node)

    def call(self, node: Node, ins: list, env: dict, role: str | None) -> None:
        """Inline one custom call: bind its primal body's inputs to the call's operands."""
        primal, num_consts = node.params["primal"], node.params["num_consts"]
        self.body(primal, ins[:num_consts[0]] + ins[sum(num_consts):], node.outputs, env, role)

    def body(self, body: Graph, operands: list, outputs, env: dict, role: str | None) -> None:
        """Emit `body` on `operands` with fresh Vars; the call's `outputs` become the body's results."""
        inner: dict = dict(zip(body.inputs, operands))
        for v, val in zip(body.consts, body.const_values):
            inner[v] = Var(v.aval)
            self.consts.append(inner[v])
            self.const_values.append(val)
        self.emit(body, inner, role, fresh=True)
        for out, res in zip(outputs, body.outputs):
            env[out] = inner.get(res, res) if isinstance(res, Var) else res


def inline(graph: Graph) -> Graph:
    """`graph` with every custom call (remat_call) replaced by its primal subgraph (body) and every
    checkpoint_name by its operand; unchanged if it has none."""
    if not any(n.prim in INLINED for n in graph.nodes):
        return graph
    state = _Inliner(graph)
    env: dict = {}
    state.emit(graph, env, None, fresh=False)
    outs = [env.get(v, v) if isinstance(v, Var) else v for v in graph.outputs]
    return graph.replace(nodes=state.nodes, outputs=outs, consts=state.consts, const_values=state.const_values)
