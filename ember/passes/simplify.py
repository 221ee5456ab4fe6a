"""Algebraic simplification and constant folding.

- identities: x*1, x+0, x-0, x/1 (also with the unit broadcast), x**1, neg(neg(x)),
  converts/reshapes/transposes/broadcasts that change nothing, reshape of reshape, transpose of
  transpose, stop_gradient (after differentiation it is the identity), select on a literal predicate;
- x**2 -> x*x;
- constant folding of nodes whose operands are all literals or consts, when the result is small
  (a large constant result would only trade a computation for memory traffic) and the operands fit
  a compile-time work budget: `dot(c, onehot)` over a closed-over c of 10**7 elements folds to a
  scalar once, instead of being recomputed on every call.

Rules live in `RULES`, keyed by primitive: ``rule(node, ins) -> replacement atom | None``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ember.tracer import prims as P
from ember.tracer.ir import Graph, Literal, Node, Params, Var
from ember.tracer.primitive import impl_rules

FOLD_LIMIT = 4096  # elements: a folded result becomes a constant of at most this size
FOLD_INPUT_LIMIT = 2 * 10**7  # elements: what one folded node may read (bounds compile-time work)


class _Context:
    """The simplified graph under construction; rules read producers and may emit new nodes."""

    def __init__(self, graph: Graph):
        self.nodes: list[Node] = []
        self.consts: list[Var] = list(graph.consts)
        self.const_values: list = list(graph.const_values)
        self.const_of = {v: val for v, val in zip(graph.consts, graph.const_values) if isinstance(val, np.ndarray)}
        self.producers: dict[Var, Node] = {}

    def emit(self, prim, ins, params, like: Node) -> Var:
        out = Var(like.outputs[0].aval)
        node = Node(prim, ins, params, (out,), like.loc, like.role)
        self.nodes.append(node)
        self.producers[out] = node
        return out

    def producer(self, a):
        return self.producers.get(a) if isinstance(a, Var) else None


_ZEROS = (0.0, -0.0)  # both are additive identities, as in XLA: x + 0.0 is x, even for x = -0.0


def _is_lit(a, *values) -> bool:
    """`a` is a Literal with one of `values` in its own dtype (compared by `Literal.key`)."""
    return isinstance(a, Literal) and any(a.key == Literal(v, a.aval.dtype).key for v in values)


def _is_splat(a, values, ctx) -> bool:
    """`a` is a literal of `values`, or a broadcast of one."""
    if _is_lit(a, *values):
        return True
    src = ctx.producer(a)
    return src is not None and src.prim is P.broadcast_in_dim_p and _is_lit(src.inputs[0], *values)


def _same_type(a, node) -> bool:
    return a.aval.same_type(node.outputs[0].aval)


def _identity_if(cond: Callable):
    def rule(node, ins, ctx):
        return ins[0] if cond(node) and _same_type(ins[0], node) else None

    return rule


def _binary_identity(left_units, right_units):
    def rule(node, ins, ctx):
        x, y = ins
        if right_units is not None and _is_splat(y, right_units, ctx) and _same_type(x, node):
            return x
        if left_units is not None and _is_splat(x, left_units, ctx) and _same_type(y, node):
            return y
        return None

    return rule


def _pow_rule(node, ins, ctx):
    x, y = ins
    if _is_lit(y, 1) and _same_type(x, node):
        return x
    if _is_lit(y, 2) and x.aval.dtype.kind == "f":
        return ctx.emit(P.mul_p, (x, x), Params(), node)
    return None


def _neg_rule(node, ins, ctx):
    src = ctx.producer(ins[0])
    return src.inputs[0] if src is not None and src.prim is P.neg_p else None


def _reshape_rule(node, ins, ctx):
    x = ins[0]
    if x.aval.shape == node.params["new_sizes"]:
        return x
    src = ctx.producer(x)
    if src is not None and src.prim is P.reshape_p:
        return ctx.emit(P.reshape_p, (src.inputs[0],), node.params, node)
    return None


def _transpose_rule(node, ins, ctx):
    perm = node.params["permutation"]
    if perm == tuple(range(len(perm))):
        return ins[0]
    src = ctx.producer(ins[0])
    if src is not None and src.prim is P.transpose_p:
        inner = src.params["permutation"]
        composed = tuple(inner[p] for p in perm)
        if composed == tuple(range(len(composed))):
            return src.inputs[0]
        return ctx.emit(P.transpose_p, (src.inputs[0],), Params(permutation=composed), node)
    return None


def _select_rule(node, ins, ctx):
    pred, t, f = ins
    if isinstance(pred, Literal):
        chosen = t if pred.value else f
        return chosen if _same_type(chosen, node) else None
    return None


RULES: dict = {
    P.mul_p: _binary_identity((1,), (1,)),
    P.add_p: _binary_identity(_ZEROS, _ZEROS),
    P.sub_p: _binary_identity(None, _ZEROS),
    P.div_p: _binary_identity(None, (1,)),
    P.pow_p: _pow_rule,
    P.neg_p: _neg_rule,
    P.convert_element_type_p: _identity_if(lambda n: True),
    P.broadcast_in_dim_p: _identity_if(
        lambda n: n.params["broadcast_dimensions"] == tuple(range(len(n.params["shape"])))),
    P.reshape_p: _reshape_rule,
    P.transpose_p: _transpose_rule,
    P.stop_gradient_p: lambda node, ins, ctx: ins[0],
    P.select_p: _select_rule,
}


_SPLATS = {P.broadcast_in_dim_p, P.iota_p}


def _fold(node, ins, ctx: _Context):
    """Evaluate a node whose operands are all literals or small consts."""
    out_aval = node.outputs[0].aval
    if node.prim in _SPLATS and out_aval.ndim:
        return None  # broadcasts of a scalar and iotas stay: fusion makes them free, consts are not
    if not all(isinstance(a, Literal) or a in ctx.const_of for a in ins):
        return None
    if out_aval.size > FOLD_LIMIT or sum(a.aval.size for a in ins) > FOLD_INPUT_LIMIT:
        return None
    vals = [a.val if isinstance(a, Literal) else ctx.const_of[a] for a in ins]
    res = np.asarray(impl_rules[node.prim](*vals, **node.params), dtype=out_aval.dtype)
    if res.ndim == 0:
        return Literal(res[()], out_aval.dtype, out_aval.weak_type)
    v = Var(out_aval)
    res = np.array(res)
    res.flags.writeable = False
    ctx.consts.append(v)
    ctx.const_values.append(res)
    ctx.const_of[v] = res
    return v


def simplify(graph: Graph) -> Graph:
    ctx = _Context(graph)
    env: dict[Var, object] = {}
    for node in graph.nodes:
        ins = tuple(env.get(a, a) if isinstance(a, Var) else a for a in node.inputs)
        repl = None
        if not node.prim.multiple_results:
            repl = _fold(node, ins, ctx)
            rule = RULES.get(node.prim)
            if repl is None and rule is not None:
                repl = rule(node, ins, ctx)
        if repl is not None:
            env[node.outputs[0]] = repl
            continue
        new = node if ins == node.inputs else Node(node.prim, ins, node.params, node.outputs, node.loc, node.role)
        ctx.nodes.append(new)
        for v in new.outputs:
            ctx.producers[v] = new
    outs = [env.get(v, v) if isinstance(v, Var) else v for v in graph.outputs]
    return graph.replace(nodes=ctx.nodes, outputs=outs, consts=ctx.consts, const_values=ctx.const_values)
