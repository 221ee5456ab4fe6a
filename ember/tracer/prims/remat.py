"""remat_call: a function whose intermediates differentiation recomputes instead of keeping; and
checkpoint_name, the identity that names a value for the policies that save by name.

The node holds `body` (a closed subgraph: operands -> outputs), `policy` (JAX's policy protocol:
`policy(prim, *avals, **params) -> bool`, True where a node's outputs may be saved for the backward
pass) and `prevent_cse`. Undifferentiated it is its body. Differentiated, its forward pass keeps only
the operands and what the policy saves; its VJP rule (passes/remat.py, since it re-linearizes the body)
recomputes the rest. Its batching rule needs vmap, so ember/passes/vmap.py registers it. The inline
pass removes both primitives, so no backend sees them.
"""

from __future__ import annotations

import numpy as np

from ember.errors import ArgumentError, ShapeError
from ember.tracer.ir import Graph, Var
from ember.tracer.primitive import Primitive, def_batch, def_impl, def_shape, def_vjp, vjp_fwd_rules

remat_call_p = Primitive("remat_call", multiple_results=True, kind="opaque", expensive=False)
checkpoint_name_p = Primitive("checkpoint_name", kind="opaque", expensive=False)


def checkpoint_name(x, name: str):
    """`x`, named `name` for the policies save_only_these_names and the like (JAX's checkpoint_name)."""
    return checkpoint_name_p.bind(x, name=name)


@def_shape(checkpoint_name_p)
def _name_shape(x, *, name):
    if not isinstance(name, str):
        raise ArgumentError(f"checkpoint_name: the name must be a str, got {type(name).__name__} {name!r}")
    return x


@def_impl(checkpoint_name_p)
def _name_impl(x, *, name):
    return x


@def_vjp(checkpoint_name_p)
def _name_vjp(ct, x, *, out, active, name):
    return (ct,)


@def_batch(checkpoint_name_p)
def _name_batch(args, dims, *, name):
    return checkpoint_name(args[0], name), dims[0]


@def_shape(remat_call_p)
def _remat_shape(*avals, body, policy, prevent_cse, name):
    for i, (a, v) in enumerate(zip(avals, body.inputs)):
        if not a.same_type(v.aval):
            raise ShapeError(f"checkpointed function {name}: operand {i} is {a.str_short()}, traced as "
                             f"{v.aval.str_short()}")
    if len(avals) != len(body.inputs):
        raise ShapeError(f"checkpointed function {name} takes {len(body.inputs)} operands, got {len(avals)}")
    return tuple(v.aval for v in body.outputs)


@def_impl(remat_call_p)
def _remat_impl(*vals, body, policy, prevent_cse, name):
    from ember.tracer.trace import eval_graph

    return tuple(np.array(o) for o in eval_graph(body, list(vals)))


def saveable(body: Graph, policy) -> list[Var]:
    """The body's values the policy lets the forward pass keep: outputs of the nodes it approves. A node
    with its own differentiation rule (a nested custom_vjp_call or remat_call) is always recomputed,
    since its rule needs its own forward. A name speaks for the value it names: refused, that value is
    recomputed whatever its producer's answer. A policy answering other than a bool is an error, as in JAX."""
    kept: dict[Var, None] = {}
    refused: set[Var] = set()
    for node in body.nodes:
        if node.prim in vjp_fwd_rules:
            continue
        answer = policy(node.prim, *[a.aval for a in node.inputs], **node.params)
        if not isinstance(answer, (bool, np.bool_)):
            raise TypeError(f"Value returned by a remat policy should be a bool; got {answer!r} of type "
                            f"{type(answer)} for {node.prim.name}")
        if answer:
            kept.update(dict.fromkeys(node.outputs))
        elif node.prim is checkpoint_name_p and isinstance(node.inputs[0], Var):
            refused.add(node.inputs[0])
    return [v for v in kept if v not in refused]


def _remat_fwd(*ins, active, body, policy, prevent_cse, name):
    """Under differentiation emit the body's forward: the outputs, and as `saved` the values the policy
    keeps (the operands themselves reach the VJP rule as its inputs)."""
    from ember.tracer.trace import bind, current_builder

    env: dict = dict(zip(body.inputs, ins))
    env.update(zip(body.consts, body.const_values))
    b = current_builder()
    for node in body.nodes:
        args = [env[a] if isinstance(a, Var) else (a if a.aval.weak_type else a.val) for a in node.inputs]
        with b.at(node.loc, node.role):
            out = bind(node.prim, args, node.params)
        env.update(zip(node.outputs, out if node.prim.multiple_results else [out]))
    outs = [env[v] if isinstance(v, Var) else v.val for v in body.outputs]
    return outs, [env[v] for v in saveable(body, policy)]


vjp_fwd_rules[remat_call_p] = _remat_fwd
