"""Passes reach into control-flow bodies, and loop-invariant code leaves them.

`recursive(pass)` runs a graph pass on every body of every cond, while and scan node (innermost first),
then on the graph itself, so bodies are inlined, simplified, fused and pruned like any graph. A pass
may give a body consts (simplify folds constants into arrays): they become operands of the node, so a
body stays closed. `hoist` moves the nodes of a scan or while body that depend only on the loop's
invariant operands out in front of the loop (XLA's while-loop-invariant code motion): computed once,
not once per trip. A node whose result is larger than what it reads (a broadcast, an iota) stays in
the loop, where fusion makes it free, rather than becoming a large buffer. `prune_loops` (part of the
dce pass) drops loop state nobody reads: carries and stacked outputs, and the operands only they read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ember.tracer import prims as P
from ember.tracer.ir import Graph, Literal, Node, Var

GraphPass = Callable[[Graph], Graph]


def has_bodies(graph: Graph) -> bool:
    return any(n.prim in P.CONTROL_PRIMS for n in graph.nodes)


def recursive(fn: GraphPass) -> GraphPass:
    """`fn` applied to every body (innermost first), then to the graph."""
    def run(graph: Graph) -> Graph:
        return fn(map_bodies(graph, run))

    run.__name__ = getattr(fn, "__name__", "pass")
    return run


def _closed(graph: Graph) -> tuple[Graph, list[Var], list]:
    """`graph` with its consts as leading inputs: (graph, new parent const Vars, their values)."""
    closed, values = P.close_graph(graph)
    return closed, [Var(v.aval) for v in graph.consts], values


def map_bodies(graph: Graph, fn: GraphPass) -> Graph:
    """`graph` with `fn` applied to each body of its control nodes (consts a body gains become the
    node's operands and the graph's consts)."""
    if not has_bodies(graph):
        return graph
    nodes, consts, values = [], list(graph.consts), list(graph.const_values)
    for node in graph.nodes:
        if node.prim in P.CONTROL_PRIMS:
            node, new, vals = _REBUILD[node.prim](node, fn)
            consts += new
            values += vals
        nodes.append(node)
    return graph.replace(nodes=nodes, consts=consts, const_values=values)


def _rebuild_scan(node: Node, fn: GraphPass) -> tuple[Node, list, list]:
    body, new, vals = _closed(fn(node.params["body"]))
    params = node.params.replace(body=body, num_consts=node.params["num_consts"] + len(new))
    return Node(node.prim, new + list(node.inputs), params, node.outputs, node.loc, node.role), new, vals


def _rebuild_while(node: Node, fn: GraphPass) -> tuple[Node, list, list]:
    p = node.params
    nc = p["cond_nconsts"]
    cg, c_new, c_vals = _closed(fn(p["cond_graph"]))
    bg, b_new, b_vals = _closed(fn(p["body_graph"]))
    ins = c_new + list(node.inputs[:nc]) + b_new + list(node.inputs[nc:])
    params = p.replace(cond_graph=cg, body_graph=bg, cond_nconsts=nc + len(c_new),
                       body_nconsts=p["body_nconsts"] + len(b_new))
    return Node(node.prim, ins, params, node.outputs, node.loc, node.role), c_new + b_new, c_vals + b_vals


def _rebuild_cond(node: Node, fn: GraphPass) -> tuple[Node, list, list]:
    closed = [_closed(fn(g)) for g in node.params["branches"]]
    every = [v for _, new, _ in closed for v in new]
    branches = P.share_leading([g for g, _, _ in closed], [len(new) for _, new, _ in closed])
    ins = [node.inputs[0]] + every + list(node.inputs[1:])
    new_node = Node(node.prim, ins, node.params.replace(branches=tuple(branches)), node.outputs, node.loc, node.role)
    return new_node, every, [x for _, _, vals in closed for x in vals]


_REBUILD = {P.scan_p: _rebuild_scan, P.while_p: _rebuild_while, P.cond_p: _rebuild_cond}


# --- loop-invariant code motion -------------------------------------------------------------------

def _inflates(node: Node) -> bool:
    """Its results are larger than what it reads: kept in the loop (fusion makes it free there)."""
    read = sum(a.aval.size for a in node.inputs if isinstance(a, Var))
    return sum(v.aval.size for v in node.outputs) > max(read, 1)


def _split_invariant(body: Graph, n_consts: int) -> tuple[list[Node], list[Node]]:
    """The body's nodes that depend only on its first `n_consts` inputs (and may leave), and the rest."""
    invariant = set(body.inputs[:n_consts])
    out, rest = [], []
    for node in body.nodes:
        if all(isinstance(a, Literal) or a in invariant for a in node.inputs) and not _inflates(node):
            out.append(node)
            invariant.update(node.outputs)
        else:
            rest.append(node)
    return out, rest


def _hoist_body(body: Graph, n_consts: int, operands: Sequence, emit: list[Node]) -> tuple[Graph, list] | None:
    """Move `body`'s invariant nodes into `emit` (on the loop's operands); returns the body taking the
    values it still needs from them as extra leading inputs, and those values."""
    moved, rest = _split_invariant(body, n_consts)
    if not moved:
        return None
    env: dict = dict(zip(body.inputs[:n_consts], operands))
    for node in moved:
        outs = [Var(v.aval) for v in node.outputs]
        emit.append(Node(node.prim, [env.get(a, a) if isinstance(a, Var) else a for a in node.inputs],
                         node.params, outs, node.loc, node.role))
        env.update(zip(node.outputs, outs))
    produced = {v for node in moved for v in node.outputs}
    needed: dict[Var, None] = {}
    for a in [a for node in rest for a in node.inputs] + list(body.outputs):
        if isinstance(a, Var) and a in produced:
            needed.setdefault(a)
    from ember.passes.dce import dce

    new_body = dce(Graph(list(needed) + list(body.inputs), rest, body.outputs))
    return new_body, [env[v] for v in needed]


def hoist(graph: Graph) -> Graph:
    """Loop-invariant nodes of this graph's scan and while bodies, moved in front of their loops."""
    if not has_bodies(graph):
        return graph
    nodes: list[Node] = []
    for node in graph.nodes:
        p = node.params
        if node.prim is P.scan_p:
            got = _hoist_body(p["body"], p["num_consts"], node.inputs[:p["num_consts"]], nodes)
            if got is not None:
                body, extra = got
                params = p.replace(body=body, num_consts=p["num_consts"] + len(extra))
                node = Node(node.prim, extra + list(node.inputs), params, node.outputs, node.loc, node.role)
        elif node.prim is P.while_p:
            nc, nb = p["cond_nconsts"], p["body_nconsts"]
            cc, bc, carry = node.inputs[:nc], node.inputs[nc:nc + nb], node.inputs[nc + nb:]
            cg, bg = p["cond_graph"], p["body_graph"]
            got = _hoist_body(cg, nc, cc, nodes)
            if got is not None:
                cg, extra = got
                cc = extra + list(cc)
            got = _hoist_body(bg, nb, bc, nodes)
            if got is not None:
                bg, extra = got
                bc = extra + list(bc)
            if cg is not p["cond_graph"] or bg is not p["body_graph"]:
                node = Node(node.prim, list(cc) + list(bc) + list(carry),
                            p.replace(cond_graph=cg, body_graph=bg, cond_nconsts=len(cc), body_nconsts=len(bc)),
                            node.outputs, node.loc, node.role)
        nodes.append(node)
    return graph.replace(nodes=nodes)


# --- dead loop state ------------------------------------------------------------------------------

def _needed_inputs(body: Graph, live_outputs: Sequence[bool]) -> list[bool]:
    """Which inputs of `body` the outputs marked live read (directly or through its nodes)."""
    need = {v for v, live in zip(body.outputs, live_outputs) if live and isinstance(v, Var)}
    for node in reversed(body.nodes):
        if any(v in need for v in node.outputs):
            need.update(a for a in node.inputs if isinstance(a, Var))
    return [v in need for v in body.inputs]


def _live_carries(body: Graph, before: int, live: list[bool], extra_live: Sequence[bool] = ()) -> list[bool]:
    """The carries a loop must keep: those marked `live` and those its body needs to compute them (a
    fixed point). The body's inputs hold `before` others ahead of the carries; its outputs are the
    carries followed by `extra_live`'s (a scan's stacked outputs)."""
    while True:
        need = _needed_inputs(body, list(live) + list(extra_live))
        new = [a or b for a, b in zip(live, need[before:before + len(live)])]
        if new == live:
            return live
        live = new


def _keep(body: Graph, keep_in: Sequence[bool], keep_out: Sequence[bool]) -> Graph:
    from ember.passes.dce import dce

    return dce(Graph([v for v, k in zip(body.inputs, keep_in) if k], body.nodes,
                     [v for v, k in zip(body.outputs, keep_out) if k]))


def _prune_scan(node: Node, used: set) -> Node:
    p = node.params
    nc, nk, body = p["num_consts"], p["num_carry"], p["body"]
    live_ys = [v in used for v in node.outputs[nk:]]
    carry = _live_carries(body, nc, [v in used for v in node.outputs[:nk]], live_ys)
    need = _needed_inputs(body, carry + live_ys)
    keep_in = need[:nc] + carry + need[nc + nk:]
    keep_out = carry + live_ys
    if all(keep_in) and all(keep_out):
        return node
    params = p.replace(body=_keep(body, keep_in, keep_out), num_consts=sum(need[:nc]), num_carry=sum(carry))
    return Node(node.prim, [a for a, k in zip(node.inputs, keep_in) if k], params,
                [v for v, k in zip(node.outputs, keep_out) if k], node.loc, node.role)


def _prune_while(node: Node, used: set) -> Node:
    p = node.params
    nc, nb, cg, bg = p["cond_nconsts"], p["body_nconsts"], p["cond_graph"], p["body_graph"]
    by_cond = _needed_inputs(cg, [True])
    carry = _live_carries(bg, nb, [v in used or c for v, c in zip(node.outputs, by_cond[nc:])])
    keep_cond = by_cond[:nc] + carry
    need_body = _needed_inputs(bg, carry)
    keep_body = need_body[:nb] + carry
    if all(keep_cond) and all(keep_body):
        return node
    params = p.replace(cond_graph=_keep(cg, keep_cond, [True]), body_graph=_keep(bg, keep_body, carry),
                       cond_nconsts=sum(by_cond[:nc]), body_nconsts=sum(need_body[:nb]))
    keep = by_cond[:nc] + need_body[:nb] + carry
    operands = [a for a, k in zip(node.inputs, keep) if k]
    return Node(node.prim, operands, params, [v for v, k in zip(node.outputs, carry) if k], node.loc, node.role)


def prune_loops(graph: Graph) -> Graph:
    """`graph` with the loop state nobody reads removed: a scan's or while's carries (and a scan's
    stacked outputs) that are neither read after the loop nor needed to compute what is, and the
    operands only they read (XLA's while-loop simplifier removes dead tuple elements the same way)."""
    if not any(n.prim in (P.scan_p, P.while_p) for n in graph.nodes):
        return graph
    used = {a for n in graph.nodes for a in n.inputs if isinstance(a, Var)}
    used |= {v for v in graph.outputs if isinstance(v, Var)}
    nodes = [(_prune_scan(n, used) if n.prim is P.scan_p else _prune_while(n, used) if n.prim is P.while_p else n)
             for n in graph.nodes]
    return graph.replace(nodes=nodes)
