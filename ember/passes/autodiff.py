"""Reverse-mode autodiff as a graph transform.

`linearize(graph, args, active)` re-emits the forward nodes into the current trace and returns a
`pullback(cts)` that emits the backward nodes, walking the graph in reverse with each primitive's
VJP rule. Activity analysis comes first: a value is active when it depends on a differentiated
input (and is a float that no stop_gradient cut). Only active values ever get cotangents, so
constants, closed-over arrays and non-differentiated arguments produce no backward work; DCE then
drops forward values that only they needed (dead-gradient elimination).

`vjp_graph` and `grad_graph` wrap this into Graph -> Graph functions; `split_forward_backward` cuts a
vjp graph into the forward part (outputs + residuals) and the backward part (residuals + cotangents).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.passes.dce import dce
from ember.passes.stages import record
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.ir import Graph, Var, verified
from ember.tracer.primitive import LazyCotangent, transform_rule, vjp_fwd_rules, vjp_rules
from ember.tracer.prims.custom import check_no_gradient
from ember.tracer.trace import bind, current_builder, new_builder

ROLE_ACTIVE, ROLE_INACTIVE, ROLE_BACKWARD = "active", "inactive", "backward"
# Forward work that a rematerialized function's backward pass does again (passes/remat.py): CSE never
# merges it into the forward's copy, which would undo the saving.
ROLE_RECOMPUTE = "recompute"
KEPT_ROLES = (ROLE_BACKWARD, ROLE_RECOMPUTE)


def activity(graph: Graph, active_inputs: Sequence[bool]) -> set[Var]:
    """The Vars that depend on an active input through differentiable float values."""
    active = {v for v, a in zip(graph.inputs, active_inputs) if a and dtypes.is_float(v.aval.dtype)}
    for node in graph.nodes:
        if node.prim is P.stop_gradient_p:
            check_no_gradient(node.params.get("error"), node.inputs[0] in active)
            continue
        if any(isinstance(a, Var) and a in active for a in node.inputs):
            active.update(v for v in node.outputs if dtypes.is_float(v.aval.dtype))
    return active


class _Record:
    __slots__ = ("node", "ins", "outs", "act", "saved")

    def __init__(self, node, ins, outs, act, saved):
        self.node, self.ins, self.outs, self.act, self.saved = node, ins, outs, act, saved


def linearize(graph: Graph, args: Sequence, active_inputs: Sequence[bool], known: dict | None = None,
              forward_role: str | None = None):
    """Emit `graph`'s forward pass on `args`; return (outputs, pullback). `pullback(cts)` takes one
    cotangent (or None) per output and returns one per input (None for inactive inputs). `known` maps
    Vars of `graph` to values already computed (a rematerialized function's saved values), which are
    used instead of emitting their nodes again; `forward_role` overrides the forward nodes' role."""
    active = activity(graph, active_inputs)
    env: dict[Var, object] = dict(zip(graph.inputs, args))
    env.update(zip(graph.consts, graph.const_values))
    b = current_builder()
    records: list[_Record] = []
    for node in graph.nodes:
        ins = [env[a] if isinstance(a, Var) else (a if a.aval.weak_type else a.val) for a in node.inputs]
        act = tuple(isinstance(a, Var) and a in active for a in node.inputs)
        differentiated = any(act) and any(v in active for v in node.outputs)
        # A node that was already backward (an inner gradient, grad of grad) or recompute stays so.
        role = node.role if node.role in KEPT_ROLES else ROLE_ACTIVE if differentiated else ROLE_INACTIVE
        with b.at(node.loc, forward_role or role):
            saved = None
            if known and node.outputs[0] in known:
                outs = [known[v] for v in node.outputs] if node.prim.multiple_results else known[node.outputs[0]]
            elif differentiated and node.prim in vjp_fwd_rules:
                outs, saved = vjp_fwd_rules[node.prim](*ins, active=act, **node.params)
            else:
                outs = bind(node.prim, ins, node.params)
        outs = list(outs) if node.prim.multiple_results else [outs]
        env.update(zip(node.outputs, outs))
        if differentiated:
            records.append(_Record(node, ins, outs, act, saved))
    outputs = [env[v] if isinstance(v, Var) else v.val for v in graph.outputs]

    def pullback(cts: Sequence) -> list:
        acc = _Accumulator()
        for v, ct in zip(graph.outputs, cts):
            if ct is not None and isinstance(v, Var) and v in active:
                acc.add(v, ct)
        for rec in reversed(records):
            node = rec.node
            with b.at(node.loc, ROLE_BACKWARD):
                out_cts = [acc.pop(v) for v in node.outputs]
                if all(c is None for c in out_cts):
                    continue
                if node.prim.multiple_results:
                    ct = tuple(out_cts)
                    out = tuple(rec.outs)
                else:
                    ct, out = out_cts[0], rec.outs[0]
                extra = {"saved": rec.saved} if node.prim in vjp_fwd_rules else {}
                rule = transform_rule(vjp_rules, node.prim, "grad", node.loc)
                in_cts = rule(ct, *rec.ins, out=out, active=rec.act, **node.params, **extra)
            for a, c, is_act in zip(node.inputs, in_cts, rec.act):
                if c is not None and is_act:
                    acc.add(a, c)
        results = []
        with b.at(role=ROLE_BACKWARD):
            for v, a in zip(graph.inputs, active_inputs):
                if not a:
                    results.append(None)
                    continue
                ct = acc.pop(v) if v in active else None
                results.append(ct if ct is not None else P.full(v.aval.shape, 0, v.aval.dtype))
        return results

    return outputs, pullback


class _Accumulator:
    """Cotangent contributions per Var: dense ones are added, lazy ones (scatters) applied last."""

    def __init__(self):
        self._dense: dict[Var, object] = {}
        self._lazy: dict[Var, list] = {}

    def add(self, v: Var, ct) -> None:
        if isinstance(ct, LazyCotangent):
            self._lazy.setdefault(v, []).append(ct)
        elif v in self._dense:
            self._dense[v] = P.add(self._dense[v], ct)
        else:
            self._dense[v] = ct

    def pop(self, v: Var):
        dense = self._dense.pop(v, None)
        for lazy in self._lazy.pop(v, ()):
            dense = lazy.add_to(dense, v.aval)
        return dense


def _seed(aval):
    return np.ones((), aval.dtype)[()]


def differentiable_outputs(graph: Graph) -> list[int]:
    return [i for i, v in enumerate(graph.outputs) if dtypes.is_float(v.aval.dtype)]


def vjp_graph(graph: Graph, active_inputs: Sequence[bool]) -> Graph:
    """inputs + one cotangent per float output -> outputs + cotangents of the active inputs."""
    diff = differentiable_outputs(graph)
    n = len(graph.inputs)
    in_avals = list(graph.in_avals) + [graph.outputs[i].aval for i in diff]

    def fn(*args):
        outs, pullback = linearize(graph, args[:n], active_inputs)
        cts = [None] * len(graph.outputs)
        for i, ct in zip(diff, args[n:]):
            cts[i] = ct
        grads = pullback(cts)
        return outs + [g for g, a in zip(grads, active_inputs) if a]

    return _traced_stage(fn, in_avals, graph)


def grad_graph(graph: Graph, active_inputs: Sequence[bool]) -> Graph:
    """inputs -> outputs + gradients of output 0 (a float scalar) w.r.t. the active inputs."""
    out0 = graph.outputs[0]

    def fn(*args):
        outs, pullback = linearize(graph, args, active_inputs)
        cts = [_seed(out0.aval)] + [None] * (len(graph.outputs) - 1)
        grads = pullback(cts)
        return outs + [g for g, a in zip(grads, active_inputs) if a]

    return _traced_stage(fn, graph.in_avals, graph)


def _traced_stage(fn, in_avals, source: Graph) -> Graph:
    record("before autodiff", source)
    with new_builder() as b:
        args = [b.new_input(a) for a in in_avals]
        outs = fn(*args)
        out = b.build(outs)
    out = verified(dce(out))
    record("after autodiff", out, {n: n.role for n in out.nodes if n.role})
    return out


def split_forward_backward(vjp: Graph, n_primals: int, n_outputs: int) -> tuple[Graph, Graph, int]:
    """Cut a vjp graph (primals + cts -> outs + grads) into forward (primals -> outs + residuals) and
    backward (residuals + cts -> grads). Returns (forward, backward, number of residuals). Recomputed
    work (a checkpoint's, role "recompute") stays in the backward part, so the residuals are what the
    checkpoint saved, not what it recomputes."""
    backward_vars: set[Var] = set(vjp.inputs[n_primals:])
    fwd_nodes, bwd_nodes = [], []
    for node in vjp.nodes:
        if node.role == ROLE_RECOMPUTE or any(isinstance(a, Var) and a in backward_vars for a in node.inputs):
            bwd_nodes.append(node)
            backward_vars.update(node.outputs)
        else:
            fwd_nodes.append(node)
    consts = set(vjp.consts)
    residuals: list[Var] = []
    seen: set[Var] = set()

    def need(a):
        if isinstance(a, Var) and a not in backward_vars and a not in consts and a not in seen:
            seen.add(a)
            residuals.append(a)

    for node in bwd_nodes:
        for a in node.inputs:
            need(a)
    grads = vjp.outputs[n_outputs:]
    for a in grads:
        need(a)
    forward = dce(Graph(vjp.inputs[:n_primals], fwd_nodes, list(vjp.outputs[:n_outputs]) + residuals,
                        vjp.consts, vjp.const_values))
    backward = dce(Graph(residuals + list(vjp.inputs[n_primals:]), bwd_nodes, grads, vjp.consts,
                         vjp.const_values))
    return verified(forward), verified(backward), len(residuals)

