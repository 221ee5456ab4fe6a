"""Algebraic simplification and constant folding.

- identities: x*1, x+0, x-0, x/1 (also with the unit broadcast), x**1, neg(neg(x)),
  converts/reshapes/transposes/broadcasts that change nothing, reshape of reshape, transpose of
  transpose, stop_gradient (after differentiation it is the identity), select on a literal predicate;
- x**2 -> x*x;
- layouts a contraction absorbs: a transpose feeding a dot_general becomes the dot's dimension numbers
  (when it keeps the order of the operand's free axes), and a transpose of a dot_general's only use
  becomes the dot with its batch pairs reordered or its operands swapped: a transposed weight
  (`x @ w.T`) and the transposes its VJP and vmap make cost no copy;
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
from ember.tracer.aval import ShapedArray
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
        self.uses: dict[Var, int] = {}
        for n in graph.nodes:
            for a in n.inputs:
                if isinstance(a, Var):
                    self.uses[a] = self.uses.get(a, 0) + 1
        for a in graph.outputs:
            if isinstance(a, Var):
                self.uses[a] = self.uses.get(a, 0) + 2  # an output is kept: never its only use
        # equal transposes (which cse merges later) count as one value read by all their readers
        self.same: dict[Var, tuple] = {n.outputs[0]: (n.inputs[0], n.params["permutation"])
                                       for n in graph.nodes if n.prim is P.transpose_p}
        self.group_uses: dict[tuple, int] = {}
        for v, key in self.same.items():
            self.group_uses[key] = self.group_uses.get(key, 0) + self.uses.get(v, 0)

    def shared_uses(self, v: Var) -> int:
        """Readers of `v`, and of every transpose equal to it when it is one."""
        key = self.same.get(v)
        return self.uses.get(v, 0) if key is None else self.group_uses[key]

    def emit(self, prim, ins, params, like: Node, aval=None) -> Var:
        """A new node computing `prim` (with `like`'s location and role; its aval unless given)."""
        out = Var(like.outputs[0].aval if aval is None else aval)
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


_add_identity = _binary_identity(_ZEROS, _ZEROS)


def _add_rule(node, ins, ctx):
    """x + 0 is x; x + scatter_add(0, i, u), the scatter read only here, is scatter_add(x, i, u): a
    cotangent accumulated into (a gather's, summed over a loop's steps) touches only the scattered
    region instead of adding a whole array of zeros."""
    same = _add_identity(node, ins, ctx)
    if same is not None:
        return same
    for x, y in (ins, ins[::-1]):
        s = ctx.producer(y)
        if (s is not None and s.prim is P.scatter_add_p and ctx.uses.get(y, 0) == 1 and isinstance(x, Var)
                and _same_type(x, node) and _same_type(y, node) and _is_splat(s.inputs[0], _ZEROS, ctx)):
            return ctx.emit(P.scatter_add_p, (x, *s.inputs[1:]), s.params, node)
    return None


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
    if src is not None and src.prim is P.dot_general_p and ctx.uses.get(ins[0], 0) == 1:
        return _transposed_dot(node, src, perm, ctx)
    return None


def _free_axes(ndim: int, contract, batch) -> list[int]:
    return [a for a in range(ndim) if a not in contract and a not in batch]


def _transposed_dot(node, dot, perm, ctx):
    """transpose(dot_general(a, b)) as one dot_general, when the permutation keeps the batch axes first
    and the free axes of each operand together and in order: the batch pairs reordered, the operands
    swapped if b's free axes come first. Swapping only reorders each product (exact), not the sums."""
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    lhs, rhs = dot.inputs
    nb, nl = len(lb), len(_free_axes(lhs.aval.ndim, lc, lb))
    nr = len(perm) - nb - nl
    order = perm[:nb]
    if sorted(order) != list(range(nb)):
        return None
    lb, rb = tuple(lb[i] for i in order), tuple(rb[i] for i in order)
    rest = perm[nb:]
    if rest == tuple(range(nb, nb + nl + nr)):
        return ctx.emit(P.dot_general_p, (lhs, rhs), Params(dimension_numbers=((lc, rc), (lb, rb))), node)
    if rest == tuple(range(nb + nl, nb + nl + nr)) + tuple(range(nb, nb + nl)):
        return ctx.emit(P.dot_general_p, (rhs, lhs), Params(dimension_numbers=((rc, lc), (rb, lb))), node)
    return None


def _outer_product(node, ins, ctx):
    """A dot_general without contracting axes as a multiply of its operands broadcast to the output:
    a fusible loop (which absorbs a transpose of the result), and the reference's product exactly."""
    (_, _), (lb, rb) = node.params["dimension_numbers"]
    out = node.outputs[0].aval
    first_free = (len(lb), len(lb) + ins[0].aval.ndim - len(lb))
    sides = []
    for a, batch, f0 in zip(ins, (lb, rb), first_free):
        free = [d for d in range(a.aval.ndim) if d not in batch]
        pos = {d: i for i, d in enumerate(batch)} | {d: f0 + j for j, d in enumerate(free)}
        order = tuple(sorted(range(a.aval.ndim), key=pos.__getitem__))
        if order != tuple(range(a.aval.ndim)):
            aval = ShapedArray(tuple(a.aval.shape[d] for d in order), a.aval.dtype, a.aval.weak_type)
            a = ctx.emit(P.transpose_p, (a,), Params(permutation=order), node, aval)
        dims = tuple(pos[d] for d in order)
        if dims != tuple(range(out.ndim)):
            aval = ShapedArray(out.shape, a.aval.dtype, a.aval.weak_type)
            a = ctx.emit(P.broadcast_in_dim_p, (a,), Params(shape=out.shape, broadcast_dimensions=dims), node, aval)
        sides.append(a)
    return ctx.emit(P.mul_p, tuple(sides), Params(), node)


# A transpose read by more nodes than this stays one copy that they share: absorbed, each small product
# that reads it would pay for its layout (a loop that copies, or the slower dots form; measured: 40
# products of a (2, 64) row block with one shared (64, 64) w.T took 19 us absorbed, 9 us sharing the
# copy). Two covers a weight's forward product and its VJP's.
_SHARED_TRANSPOSE = 2


def _strided_matrix(shape, contract, batch) -> bool:
    """Whether a row-major operand reads, per batch entry, as one matrix (free axes x contracting
    axes, each group one strided axis) with a unit-stride group: what a contraction reads in place
    (a BLAS call with transpose flags, or a loop). Size-1 axes have no stride and are skipped."""
    real = [a for a in range(len(shape)) if shape[a] != 1]
    if real and real[-1] in batch:
        return False
    for group in (_free_axes(len(shape), contract, batch), contract):
        at = sorted(real.index(a) for a in group if shape[a] != 1)
        if at and at[-1] - at[0] != len(at) - 1:
            return False
    return True


def _dot_rule(node, ins, ctx):
    """A transposed operand read in place: the transpose's permutation moved into the dimension
    numbers, when the operand's free axes keep their order (the output's layout is unchanged) and
    the untransposed operand still reads as a strided matrix (else the transpose stays, for fusion
    to absorb into its producer). A dot without contracting axes becomes a multiply."""
    (lc, rc), (lb, rb) = node.params["dimension_numbers"]
    if not lc:
        return _outer_product(node, ins, ctx)
    dims, new_ins, changed = [[lc, lb], [rc, rb]], list(ins), False
    for i, a in enumerate(ins):
        src = ctx.producer(a)
        if src is None or src.prim is not P.transpose_p or ctx.shared_uses(a) > _SHARED_TRANSPOSE:
            continue
        perm = src.params["permutation"]
        c, b = dims[i]
        free = [perm[f] for f in _free_axes(len(perm), c, b)]
        c, b = tuple(perm[d] for d in c), tuple(perm[d] for d in b)
        if free != sorted(free) or not _strided_matrix(src.inputs[0].aval.shape, c, b):
            continue
        dims[i] = [c, b]
        new_ins[i], changed = src.inputs[0], True
    kept, out_shape = [], list(node.outputs[0].aval.shape)
    first_free = (len(lb), len(lb) + len(_free_axes(ins[0].aval.ndim, lc, lb)))
    for i, a in enumerate(new_ins):
        narrowed = _unbroadcast(a, dims[i], first_free[i], ctx, node)
        if narrowed is not None:
            new_ins[i], dims[i], dropped = narrowed
            kept += dropped
            changed = True
    if not changed:
        return None
    (lc, lb), (rc, rb) = dims
    dn = Params(dimension_numbers=((lc, rc), (lb, rb)))
    if not kept:
        return ctx.emit(P.dot_general_p, tuple(new_ins), dn, node)
    rest = [d for d in range(len(out_shape)) if d not in kept]
    aval = node.outputs[0].aval
    small = ctx.emit(P.dot_general_p, tuple(new_ins), dn, node,
                     ShapedArray(tuple(out_shape[d] for d in rest), aval.dtype, aval.weak_type))
    return ctx.emit(P.broadcast_in_dim_p, (small,), Params(shape=aval.shape, broadcast_dimensions=tuple(rest)), node)


def _unbroadcast(a, dims, first_free: int, ctx, node):
    """An operand broadcast along free axes of the dot, read without them: (the narrower operand, its
    contracting and batch axes, the output axes the dot then broadcasts along), or None. Each output
    element is the same sum of the same products; the product no longer repeats along those axes."""
    src = ctx.producer(a)
    if src is None or src.prim is not P.broadcast_in_dim_p:
        return None
    c, b = dims
    shape, bd = src.params["shape"], src.params["broadcast_dimensions"]
    free = _free_axes(len(shape), c, b)
    drop = [f for f in free if f not in bd and shape[f] != 1]
    if not drop:
        return None
    keep = [d for d in range(len(shape)) if d not in drop]
    new_axis = {d: i for i, d in enumerate(keep)}
    x, new_shape = src.inputs[0], tuple(shape[d] for d in keep)
    new_bd = tuple(new_axis[d] for d in bd)
    if x.aval.shape != new_shape or new_bd != tuple(range(len(new_shape))):
        x = ctx.emit(P.broadcast_in_dim_p, (x,), Params(shape=new_shape, broadcast_dimensions=new_bd), node,
                     ShapedArray(new_shape, x.aval.dtype, x.aval.weak_type))
    dropped = [first_free + free.index(f) for f in drop]
    return x, [tuple(new_axis[d] for d in c), tuple(new_axis[d] for d in b)], dropped


def _select_rule(node, ins, ctx):
    pred, t, f = ins
    if isinstance(pred, Literal):
        chosen = t if pred.value else f
        return chosen if _same_type(chosen, node) else None
    return None


RULES: dict = {
    P.mul_p: _binary_identity((1,), (1,)),
    P.add_p: _add_rule,
    P.sub_p: _binary_identity(None, _ZEROS),
    P.div_p: _binary_identity(None, (1,)),
    P.pow_p: _pow_rule,
    P.neg_p: _neg_rule,
    P.convert_element_type_p: _identity_if(lambda n: True),
    P.broadcast_in_dim_p: _identity_if(
        lambda n: n.params["broadcast_dimensions"] == tuple(range(len(n.params["shape"])))),
    P.reshape_p: _reshape_rule,
    P.transpose_p: _transpose_rule,
    P.dot_general_p: _dot_rule,
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
            if isinstance(repl, Var):  # the replacement takes over the uses (an overcount is safe)
                ctx.uses[repl] = ctx.uses.get(repl, 0) + ctx.uses.get(node.outputs[0], 0)
            continue
        new = node if ins == node.inputs else Node(node.prim, ins, node.params, node.outputs, node.loc, node.role)
        ctx.nodes.append(new)
        for v in new.outputs:
            ctx.producers[v] = new
    outs = [env.get(v, v) if isinstance(v, Var) else v for v in graph.outputs]
    return graph.replace(nodes=ctx.nodes, outputs=outs, consts=ctx.consts, const_values=ctx.const_values)
