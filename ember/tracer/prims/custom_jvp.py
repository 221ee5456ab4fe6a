"""`custom_jvp_call`: a function with a hand-written forward-mode rule (ember.custom_jvp).

Its params hold two closed subgraphs: `primal` (consts_p + args -> outs) and `jvp`, the user's rule
(consts_j + args + one tangent per float arg -> outs + one tangent per float out). Its operands are
consts_p + consts_j + args, `num_consts` their two counts. A call of the function inside its own rule
(on arguments of the same types) has `jvp` None: its rule is the rule that holds it, which
`with_recursion` gives it whenever that rule is run, so every order of differentiation meets the rule
(as in JAX, whose rules are traced lazily). Forward mode runs the rule (here); reverse
mode linearizes the rule in its tangents and transposes it, as JAX does (the VJP rule needs the
autodiff transform, so ember/passes/forward.py registers it); vmap batches both subgraphs
(ember/passes/vmap.py); the inline pass replaces the call by its primal body before any backend.
"""

from __future__ import annotations

import numpy as np

from ember.errors import TransformError
from ember.tracer import dtypes
from ember.tracer.ir import Graph, Node
from ember.tracer.primitive import Primitive, def_impl, def_jvp, def_shape
from ember.tracer.prims.custom import checked_primal
from ember.tracer.trace import eval_graph

custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True, kind="opaque", expensive=False)


def split_operands(ins, num_consts: tuple[int, int]):
    """(consts_p, consts_j, args) of a custom_jvp_call's operands."""
    n_p, n_j = num_consts
    return ins[:n_p], ins[n_p:n_p + n_j], ins[n_p + n_j:]


@def_shape(custom_jvp_call_p)
def _custom_jvp_shape(*avals, primal, jvp, num_consts, name):
    consts_p, _, args = split_operands(avals, num_consts)
    return checked_primal(f"custom_jvp function {name}", primal, list(consts_p) + list(args))


@def_impl(custom_jvp_call_p)
def _custom_jvp_impl(*vals, primal, jvp, num_consts, name):
    consts_p, _, args = split_operands(vals, num_consts)
    return tuple(np.array(o) for o in eval_graph(primal, list(consts_p) + list(args)))


def with_recursion(jvp: Graph) -> Graph:
    """The rule `jvp` with each call of its own function inside it (`jvp` None) given `jvp` as its rule:
    run, the rule emits calls that differentiate again by the same rule."""
    if not any(n.prim is custom_jvp_call_p and n.params["jvp"] is None for n in jvp.nodes):
        return jvp
    nodes = [Node(n.prim, n.inputs, n.params.replace(jvp=jvp), n.outputs, n.loc, n.role)
             if n.prim is custom_jvp_call_p and n.params["jvp"] is None else n for n in jvp.nodes]
    return jvp.replace(nodes=nodes)


def check_consts_inactive(active, num_consts: tuple[int, int], name: str) -> None:
    """A value the function closes over has no tangent input in the rule: differentiating it is an error."""
    if any(active[:sum(num_consts)]):
        raise TransformError(f"custom_jvp function {name} closes over a value that is being differentiated; pass "
                             "that value as an argument of the function so its jvp rule gets its tangent")


def _dtype(x) -> np.dtype:
    return x.aval.dtype if hasattr(x, "aval") else np.result_type(x)


@def_jvp(custom_jvp_call_p)
def _custom_jvp_jvp(primals, tangents, *, primal, jvp, num_consts, name):
    """The user's rule, on the tangents of the float arguments (zeros where a tangent is zero)."""
    from ember.tracer import prims as P

    check_consts_inactive([t is not None for t in tangents], num_consts, name)
    _, consts_j, args = split_operands(primals, num_consts)
    _, _, arg_tangents = split_operands(tangents, num_consts)
    ts = [t if t is not None else P.full(np.shape(a), 0, _dtype(a))
          for a, t in zip(args, arg_tangents) if dtypes.is_float(_dtype(a))]
    if jvp is None:
        raise TransformError(f"custom_jvp function {name}: a call inside its own rule was differentiated "
                             "outside that rule (please report it)")
    res = eval_graph(with_recursion(jvp), list(consts_j) + list(args) + ts)
    n_out = len(primal.outputs)
    touts = iter(res[n_out:])
    return res[:n_out], [next(touts) if dtypes.is_float(v.aval.dtype) else None for v in primal.outputs]
