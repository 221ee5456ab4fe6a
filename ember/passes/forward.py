"""Forward-mode autodiff as a graph transform: a JVP interpreter, as Autodidax's JVPTrace over a Graph.

`jvp_eval(graph, primals, tangents)` walks `graph` once, emitting each node into the current trace
and, beside it, the nodes of its tangent: by the primitive's rule in `jvp_rules`, or by default by
its VJP rule transposed locally (`transposed_vjp`: a VJP rule is linear in its cotangent, so reverse
mode through it maps tangents to J·t). A tangent None is a symbolic zero: values that depend on no
tangent, integer values and stop_gradient's output never get one, so zeros never materialize and
forward mode costs one pass over the active part of the graph. `jvp_graph` wraps it as Graph -> Graph.

The explicit rules here serve the common primitives whose tangent is cheap to state (a linear
primitive's tangent is the primitive applied to the tangents); the default serves every other
primitive from the VJP rule it already has, so no second table of derivatives must be kept in step.
custom_jvp_call's reverse mode (its user's rule transposed) is registered here too: it needs autodiff.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence

import numpy as np

from ember.passes import autodiff
from ember.passes.dce import dce
from ember.passes.stages import record
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph, Var, verified
from ember.tracer.primitive import (
    LazyCotangent,
    Primitive,
    def_jvp,
    def_vjp,
    jvp_rules,
    shape_rules,
    transform_rule,
    vjp_fwd_rules,
    vjp_rules,
)
from ember.tracer.prims.custom import check_no_gradient
from ember.tracer.prims.custom_jvp import check_consts_inactive, split_operands, with_recursion
from ember.tracer.trace import bind, current_builder, new_builder

ROLE_TANGENT = "tangent"  # the nodes a JVP rule emits (its primal and its tangent)


def jvp_eval(graph: Graph, primals: Sequence, tangents: Sequence) -> tuple[list, list]:
    """Emit `graph` on `primals` into the current trace with the tangents its outputs get from
    `tangents` (one per input, None where zero); returns (outputs, output tangents, None where zero)."""
    env: dict[Var, object] = dict(zip(graph.inputs, primals))
    env.update(zip(graph.consts, graph.const_values))
    tenv = {v: t for v, t in zip(graph.inputs, tangents) if t is not None and dtypes.is_float(v.aval.dtype)}
    b = current_builder()
    for node in graph.nodes:
        ins = [env[a] if isinstance(a, Var) else (a if a.aval.weak_type else a.val) for a in node.inputs]
        tans = [tenv.get(a) if isinstance(a, Var) else None for a in node.inputs]
        if all(t is None for t in tans):
            with b.at(node.loc, node.role):
                outs, out_tans = bind(node.prim, ins, node.params), None
        else:
            with b.at(node.loc, ROLE_TANGENT):
                outs, out_tans = jvp_rule(node.prim, node.loc)(ins, tans, **node.params)
        if not node.prim.multiple_results:
            outs, out_tans = [outs], [out_tans]
        env.update(zip(node.outputs, outs))
        for v, t in zip(node.outputs, out_tans or ()):
            if t is not None and dtypes.is_float(v.aval.dtype):
                tenv[v] = _as_tangent(t, v.aval)
    outs = [env[v] if isinstance(v, Var) else v.val for v in graph.outputs]
    return outs, [tenv.get(v) if isinstance(v, Var) else None for v in graph.outputs]


def jvp_rule(prim: Primitive, loc: str | None = None) -> Callable:
    """`prim`'s JVP rule: its own, else one from its VJP rule; a primitive with neither raises."""
    rule = jvp_rules.get(prim)
    if rule is not None:
        return rule
    if prim in vjp_rules:
        return _from_vjp(prim)
    return transform_rule(jvp_rules, prim, "jvp", loc)


@functools.cache
def _from_vjp(prim: Primitive) -> Callable:
    """The rule a primitive without its own gets from its VJP rule: applied to the tangent for a unary
    elementwise primitive (its Jacobian is diagonal, its own transpose), else transposed."""
    if prim.kind == "elementwise" and _arity(shape_rules[prim]) == 1:
        return functools.partial(diagonal_vjp, prim)
    return functools.partial(transposed_vjp, prim)


def _arity(shape_rule: Callable) -> int:
    """The number of operands a shape rule takes (-1: any number)."""
    params = inspect.signature(shape_rule).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return -1
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def diagonal_vjp(prim: Primitive, primals: Sequence, tangents: Sequence, **params):
    """The JVP of a unary elementwise primitive: its VJP rule with the tangent as the cotangent."""
    out = bind(prim, primals, params)
    if not dtypes.is_float(out.dtype):
        return out, None
    return out, vjp_rules[prim](tangents[0], *primals, out=out, active=(True,), **params)[0]


def _as_tangent(t, aval: ShapedArray):
    """A rule's tangent in its primal's dtype and shape (a 0-d one, from a scalar operand, broadcast)."""
    if tuple(np.shape(t)) != aval.shape:
        t = P.broadcast_in_dim(t, aval.shape, ())
    return t if t.dtype == aval.dtype else P.convert_element_type(t, aval.dtype, aval.weak_type)


def _aval(x) -> ShapedArray:
    """The aval of a primal operand: a tracer, a weak Literal or a NumPy scalar."""
    aval = getattr(x, "aval", None)
    return aval if aval is not None else ShapedArray(np.shape(x), np.result_type(x))


def _zeros_like(x):
    a = _aval(x)
    return P.full(a.shape, 0, a.dtype)


def transposed_vjp(prim: Primitive, primals: Sequence, tangents: Sequence, **params):
    """The default JVP rule. The VJP rule is ct -> (J_i^T ct)_i, linear in ct; traced as a small graph
    of ct (the primals closed over), reverse mode through it (autodiff.linearize) maps the tangents
    t_i to sum_i J_i t_i. DCE then keeps only what the tangents need. A primitive whose forward runs
    differently when differentiated (`vjp_fwd_rules`) runs that way, its VJP rule given what it saved."""
    active = tuple(t is not None for t in tangents)
    extra = {}
    if prim in vjp_fwd_rules:
        out, extra["saved"] = vjp_fwd_rules[prim](*primals, active=active, **params)
    else:
        out = bind(prim, primals, params)
    outs = list(out) if prim.multiple_results else [out]
    out = tuple(outs) if prim.multiple_results else out
    diff = [i for i, o in enumerate(outs) if dtypes.is_float(o.dtype)]
    kept: list[int] = []  # the operands whose cotangent the VJP rule gives (not None)

    def cotangents(*cts):
        full = [None] * len(outs)
        for i, c in zip(diff, cts):
            full[i] = c
        ct = tuple(full) if prim.multiple_results else full[0]
        in_cts = vjp_rules[prim](ct, *primals, out=out, active=active, **params, **extra)
        dense = []
        for k, (c, p, a) in enumerate(zip(in_cts, primals, active)):
            if a and c is not None:
                kept.append(k)
                dense.append(c.add_to(None, _aval(p)) if isinstance(c, LazyCotangent) else c)
        return dense

    b = current_builder()
    with new_builder() as inner, inner.at(b.loc_override):
        graph = inner.build(cotangents(*[inner.new_input(outs[i].aval) for i in diff]))
    out_tans: list = [None] * len(outs)
    if kept:
        at = [P.full(a.shape, 0, a.dtype) for a in graph.in_avals]
        _, pullback = autodiff.linearize(graph, at, [True] * len(at))
        for i, t in zip(diff, pullback([tangents[k] for k in kept])):
            out_tans[i] = t
    return (outs, out_tans) if prim.multiple_results else (out, out_tans[0])


def jvp_graph(graph: Graph, active_inputs: Sequence[bool]) -> Graph:
    """inputs + one tangent per active float input -> outputs + one tangent per float output
    (zeros where an output depends on no tangent)."""
    active = [a and dtypes.is_float(v.aval.dtype) for v, a in zip(graph.inputs, active_inputs)]
    n = len(graph.inputs)
    in_avals = list(graph.in_avals) + [v.aval for v, a in zip(graph.inputs, active) if a]
    diff = autodiff.differentiable_outputs(graph)

    def fn(*args):
        it = iter(args[n:])
        outs, tans = jvp_eval(graph, args[:n], [next(it) if a else None for a in active])
        zero = lambda v: P.full(v.aval.shape, 0, v.aval.dtype)  # noqa: E731
        return outs + [tans[i] if tans[i] is not None else zero(graph.outputs[i]) for i in diff]

    record("before jvp", graph)
    with new_builder() as b:
        out = b.build(fn(*[b.new_input(a) for a in in_avals]))
    out = verified(dce(out))
    record("after jvp", out, {n: n.role for n in out.nodes if n.role})
    return out


# --- explicit rules ------------------------------------------------------------------------------

def _linear_in(prim: Primitive, *positions: int) -> None:
    """Register the rule of a primitive linear in the operands at `positions` jointly (the others,
    such as indices and predicates, are fixed): its tangent is the primitive applied to their tangents."""
    def rule(primals, tangents, **params):
        out = bind(prim, primals, params)
        if not dtypes.is_float(out.dtype):
            return out, None
        ops = list(primals)
        for k in positions:
            ops[k] = tangents[k] if tangents[k] is not None else _zeros_like(primals[k])
        return out, bind(prim, ops, params)

    jvp_rules[prim] = rule


for _prim in (P.neg_p, P.reshape_p, P.broadcast_in_dim_p, P.transpose_p, P.reduce_sum_p, P.slice_p, P.rev_p,
              P.convert_element_type_p):
    _linear_in(_prim, 0)
_linear_in(P.pad_p, 0, 1)
_linear_in(P.gather_p, 0)
_linear_in(P.scatter_add_p, 0, 2)
_linear_in(P.select_p, 1, 2)


@def_jvp(P.concatenate_p)
def _concatenate_jvp(primals, tangents, *, dimension):
    ts = [t if t is not None else _zeros_like(p) for p, t in zip(primals, tangents)]
    return P.concatenate_p.bind(*primals, dimension=dimension), P.concatenate_p.bind(*ts, dimension=dimension)


def _times(t, fn: Callable):
    """fn(t), or None for a zero tangent t."""
    return None if t is None else fn(t)


def _sum(terms: list):
    """The sum of the terms that are not None (None if all are): tangents add without zeros."""
    terms = [t for t in terms if t is not None]
    return functools.reduce(P.add, terms) if terms else None


@def_jvp(P.add_p)
def _add_jvp(primals, tangents):
    return P.add_p.bind(*primals), _sum(list(tangents))


@def_jvp(P.sub_p)
def _sub_jvp(primals, tangents):
    tx, ty = tangents
    return P.sub_p.bind(*primals), (P.neg(ty) if tx is None else tx if ty is None else P.sub(tx, ty))


@def_jvp(P.mul_p)
def _mul_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return P.mul_p.bind(x, y), _sum([_times(tx, lambda t: P.mul(t, y)), _times(ty, lambda t: P.mul(x, t))])


@def_jvp(P.div_p)
def _div_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    out = P.div_p.bind(x, y)
    return out, _sum([_times(tx, lambda t: P.div(t, y)),
                 _times(ty, lambda t: P.neg(P.div(P.mul(t, out), y)))])


@def_jvp(P.dot_general_p)
def _dot_jvp(primals, tangents, *, dimension_numbers):
    (x, y), (tx, ty) = primals, tangents
    dot = functools.partial(P.dot_general_p.bind, dimension_numbers=dimension_numbers)
    return dot(x, y), _sum([_times(tx, lambda t: dot(t, y)), _times(ty, lambda t: dot(x, t))])


@def_jvp(P.stop_gradient_p)
def _stop_gradient_jvp(primals, tangents, error=None):
    check_no_gradient(error, tangents[0] is not None)
    return P.stop_gradient(primals[0]), None


@def_jvp(P.custom_vjp_call_p)
def _custom_vjp_call_jvp(primals, tangents, *, name, **params):
    """JAX's error: a custom_vjp function has a backward rule only, which forward mode cannot use."""
    raise TypeError(f"can't apply forward-mode autodiff (jvp) to a custom_vjp function. (ember: {name} has a "
                    "custom_vjp rule; differentiate it in reverse mode only: jacrev instead of jacfwd, "
                    "jacrev(jacrev(f)) instead of hessian(f), which is jacfwd(jacrev(f)) as in JAX)")



# --- custom_jvp_call in reverse mode -------------------------------------------------------------

def _custom_jvp_fwd(*ins, active, primal, jvp, num_consts, name):
    """Reverse mode of a custom_jvp function, as JAX: the user's rule linearized in its tangents (at
    zero; its tangent outputs are linear in them). Its primal outputs are the call's; the pullback it
    returns, saved for the VJP rule, transposes the rule."""
    check_consts_inactive(active, num_consts, name)
    _, consts_j, args = split_operands(ins, num_consts)
    _, _, args_active = split_operands(active, num_consts)
    floats = [k for k, a in enumerate(args) if dtypes.is_float(_aval(a).dtype)]
    zeros = [_zeros_like(args[k]) for k in floats]
    mask = [False] * (len(consts_j) + len(args)) + [args_active[k] for k in floats]
    outs, pullback = autodiff.linearize(with_recursion(jvp), list(consts_j) + list(args) + zeros, mask)
    return outs[:len(primal.outputs)], (pullback, floats)


@def_vjp(P.custom_jvp_call_p)
def _custom_jvp_vjp(cts, *ins, out, active, saved, primal, jvp, num_consts, name):
    pullback, floats = saved
    n_out = len(primal.outputs)
    float_outs = [i for i, v in enumerate(primal.outputs) if dtypes.is_float(v.aval.dtype)]
    in_cts = pullback([None] * n_out + [cts[i] for i in float_outs])
    tangent_cts = in_cts[len(in_cts) - len(floats):]
    arg_cts: list = [None] * (len(ins) - sum(num_consts))
    for k, c in zip(floats, tangent_cts):
        arg_cts[k] = c
    return (None,) * sum(num_consts) + tuple(arg_cts)


vjp_fwd_rules[P.custom_jvp_call_p] = _custom_jvp_fwd
