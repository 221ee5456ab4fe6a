"""Primitives that steer differentiation: `stop_gradient` and `custom_vjp_call`.

custom_vjp_call holds three closed subgraphs in its params: `primal` (consts_p + args -> outs),
`fwd` (consts_f + args -> outs + residuals) and `bwd` (consts_b + residuals + cts -> arg cts). Its
operands are consts_p + consts_f + consts_b + args, with `num_consts` = their three counts. Its
batching rule needs vmap, so ember/passes/vmap.py registers it.
"""

from __future__ import annotations

import numpy as np

from ember.errors import DifferentiationError, ShapeError, TransformError
from ember.tracer.ir import Var
from ember.tracer.primitive import Primitive, def_batch, def_impl, def_shape, def_vjp, vjp_fwd_rules

stop_gradient_p = Primitive("stop_gradient", kind="elementwise", expensive=False, may_view=True,
                           no_ufunc="the identity: returns its operand")
custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True, kind="opaque", expensive=False)


def stop_gradient(x, error: str | None = None):
    """`x`, treated as a constant by differentiation; with `error`, differentiating through it raises
    DifferentiationError(error) instead (a function without a derivative in some argument, as JAX's
    betainc in a and b: never a silent zero)."""
    return stop_gradient_p.bind(x) if error is None else stop_gradient_p.bind(x, error=error)


@def_shape(stop_gradient_p)
def _stop_gradient_shape(x, **_):
    return x


@def_impl(stop_gradient_p)
def _stop_gradient_impl(x, **_):
    return x


@def_vjp(stop_gradient_p)
def _stop_gradient_vjp(ct, x, *, out, active, error=None):
    check_no_gradient(error, active[0])
    return (None,)


@def_batch(stop_gradient_p)
def _stop_gradient_batch(args, dims, **params):
    return stop_gradient_p.bind(args[0], **params), dims[0]


def check_no_gradient(error: str | None, differentiated: bool) -> None:
    """Raise a stop_gradient's `error` where its operand is differentiated (the error names the user's line)."""
    if error is not None and differentiated:
        raise DifferentiationError(error)


# --- custom_vjp_call ------------------------------------------------------------------------------

def _split(ins, num_consts):
    n_p, n_f, n_b = num_consts
    return ins[:n_p], ins[n_p:n_p + n_f], ins[n_p + n_f:n_p + n_f + n_b], ins[n_p + n_f + n_b:]


def checked_primal(what: str, primal, operands) -> tuple:
    """The avals of `primal`'s outputs, once the operands it is called on are checked against the
    avals it was traced for (the shape rule of a call holding a traced function)."""
    for i, (a, v) in enumerate(zip(operands, primal.inputs)):
        if not a.same_type(v.aval):
            raise ShapeError(f"{what}: operand {i} is {a.str_short()}, traced as {v.aval.str_short()}")
    return tuple(v.aval for v in primal.outputs)


@def_shape(custom_vjp_call_p)
def _custom_shape(*avals, primal, fwd, bwd, num_consts, name, caller_fwd=False):
    consts_p, _, _, args = _split(avals, num_consts)
    return checked_primal(f"custom_vjp function {name}", primal, list(consts_p) + list(args))


@def_impl(custom_vjp_call_p)
def _custom_impl(*vals, primal, fwd, bwd, num_consts, name, caller_fwd=False):
    from ember.tracer.trace import eval_graph

    consts_p, _, _, args = _split(vals, num_consts)
    return tuple(np.array(o) for o in eval_graph(primal, list(consts_p) + list(args)))


def _eval_fwd(fwd, args: list) -> list:
    """eval_graph of the fwd rule `fwd`, where a call of the same function on operands of fwd's own types
    (marked `caller_fwd` when traced) gets `fwd` as its rule: differentiated again, it runs this fwd
    again, and so on at every order (without hoisted consts, whose counts would differ)."""
    from ember.tracer.trace import bind, current_builder

    env = dict(zip(fwd.inputs, args))
    env.update(zip(fwd.consts, fwd.const_values))
    b = current_builder()
    in_avals = [v.aval for v in fwd.inputs]
    for node in fwd.nodes:
        ins = [env[a] if isinstance(a, Var) else a for a in node.inputs]
        params = node.params
        if node.prim is custom_vjp_call_p and params.get("caller_fwd") and params["num_consts"][1] == 0:
            n = sum(params["num_consts"])
            if len(node.inputs) - n == len(in_avals) and all(
                    a.aval.same_type(w) for a, w in zip(node.inputs[n:], in_avals)):
                params = dict(params, fwd=fwd)
        if b is None:
            out = bind(node.prim, ins, params)
        else:
            with b.at(node.loc, node.role):
                out = bind(node.prim, ins, params)
        env.update(zip(node.outputs, out if node.prim.multiple_results else [out]))
    return [env[v] if isinstance(v, Var) else v.val for v in fwd.outputs]


def _custom_fwd(*ins, active, primal, fwd, bwd, num_consts, name, caller_fwd=False):
    """Under differentiation run the user's forward: its outputs are the call's (as in JAX, not the
    undecorated function's) and its residuals are what `bwd` needs. A call to the function inside fwd
    was traced as a custom_vjp_call of its own, so a transform that differentiates the outputs again
    (the value of an inner value_and_grad or vjp, an aux) still meets the rule."""
    from ember.tracer.trace import eval_graph

    n_consts = sum(num_consts)
    if any(active[:n_consts]):
        raise TransformError(
            f"custom_vjp function {name} closes over a value that is being differentiated; pass that "
            "value as an argument of the function so its backward rule can return its cotangent")
    _, consts_f, _, args = _split(ins, num_consts)
    n_out = len(primal.outputs)
    outs = _eval_fwd(fwd, list(consts_f) + list(args)) if not consts_f else eval_graph(fwd, list(consts_f) + list(args))
    return list(outs[:n_out]), list(outs[n_out:])


vjp_fwd_rules[custom_vjp_call_p] = _custom_fwd


@def_vjp(custom_vjp_call_p)
def _custom_vjp(cts, *ins, out, active, saved, primal, fwd, bwd, num_consts, name, caller_fwd=False):
    from ember.tracer import prims as P
    from ember.tracer.trace import eval_graph

    _, _, consts_b, args = _split(ins, num_consts)
    cts = [P.full(v.aval.shape, 0, v.aval.dtype) if c is None else c for c, v in zip(cts, primal.outputs)]
    arg_cts = eval_graph(bwd, list(consts_b) + list(saved) + cts)
    n_consts = sum(num_consts)
    return (None,) * n_consts + tuple(c if a else None for c, a in zip(arg_cts, active[n_consts:]))
