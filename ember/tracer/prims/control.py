"""Structured control flow: `cond`, `while` and `scan`, each holding its bodies as closed subgraphs.

A body is a Graph with no consts of its own: everything it reads from outside (closed-over tracers and
arrays) is an operand of the node, so transforms and backends see every value a body uses.
- cond:  operands (index, *ops); `branches`: one graph per branch, ops -> outs; all branches take the
  same operands and give outputs of the same types. `index` is an int32 scalar, clamped to the range.
- while: operands (*cond_consts, *body_consts, *carry); `cond_graph`: cond_consts + carry -> bool[];
  `body_graph`: body_consts + carry -> carry.
- scan:  operands (*consts, *carry, *xs); `body`: consts + carry + x slices -> carry + y slices; the
  results are the last carry and the ys stacked along a new leading axis of `length`. With `reverse`,
  step i reads and writes slice length-1-i. `unroll` is how many steps a backend may run per loop trip.
The VJP and batching rules need the transforms, so ember/passes/control_flow.py registers them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph, Literal, Var
from ember.tracer.primitive import Primitive, def_impl, def_shape, impl_rules

cond_p = Primitive("cond", multiple_results=True, kind="opaque", expensive=True)
while_p = Primitive("while", multiple_results=True, kind="opaque", expensive=True)
scan_p = Primitive("scan", multiple_results=True, kind="opaque", expensive=True)
CONTROL_PRIMS = (cond_p, while_p, scan_p)


def run_numpy(graph: Graph, args: Sequence) -> list[np.ndarray]:
    """Evaluate `graph` on NumPy values with each primitive's numpy reference (never binding, so it
    works inside a trace that evaluates known values too)."""
    env: dict = dict(zip(graph.inputs, args))
    env.update(zip(graph.consts, graph.const_values))
    for node in graph.nodes:
        vals = [a.val if isinstance(a, Literal) else env[a] for a in node.inputs]
        out = impl_rules[node.prim](*vals, **node.params)
        outs = out if node.prim.multiple_results else (out,)
        for v, o in zip(node.outputs, outs):
            env[v] = np.asarray(o, dtype=v.aval.dtype)
    return [np.asarray(env[v]) if isinstance(v, Var) else np.asarray(v.val, v.dtype) for v in graph.outputs]


def close_graph(graph: Graph) -> tuple[Graph, list]:
    """`graph` with its consts moved to leading inputs (a body is closed); returns it and their values."""
    if not graph.consts:
        return graph, []
    return (graph.replace(inputs=list(graph.consts) + list(graph.inputs), consts=(), const_values=()),
            list(graph.const_values))


def share_leading(graphs: Sequence[Graph], counts: Sequence[int]) -> list[Graph]:
    """cond branches that each take `counts[k]` leading inputs of their own (what they close over),
    made to all take every branch's, in branch order: a branch ignores the others'."""
    own = [list(g.inputs[:n]) for g, n in zip(graphs, counts)]
    shared = []
    for k, (g, n) in enumerate(zip(graphs, counts)):
        lead = [v for j, vs in enumerate(own) for v in (vs if j == k else [Var(v.aval) for v in vs])]
        shared.append(g.replace(inputs=lead + list(g.inputs[n:])))
    return shared


def _check_inputs(what: str, graph: Graph, avals: Sequence[ShapedArray]) -> None:
    if len(graph.inputs) != len(avals):
        raise ShapeError(f"{what} takes {len(graph.inputs)} operands, got {len(avals)}")
    for i, (v, a) in enumerate(zip(graph.inputs, avals)):
        if not v.aval.same_type(a):
            raise ShapeError(f"{what}: operand {i} is {a.str_short()}, the body was traced for {v.aval.str_short()}")


def _check_closed(what: str, graph: Graph) -> None:
    if graph.consts:
        raise ShapeError(f"{what} must be closed (its consts are operands), but it has {len(graph.consts)} consts")


# --- cond -----------------------------------------------------------------------------------------

@def_shape(cond_p)
def _cond_shape(index, *ops, branches):
    if index.shape != () or index.dtype != np.dtype(np.int32):
        raise DTypeError(f"cond: the branch index must be an int32 scalar, got {index.str_short()}")
    if not branches:
        raise ShapeError("cond needs at least one branch")
    for k, g in enumerate(branches):
        _check_closed(f"cond branch {k}", g)
        _check_inputs(f"cond branch {k}", g, ops)
    first = branches[0].out_avals
    for k, g in enumerate(branches[1:], 1):
        if len(g.outputs) != len(first) or not all(a.same_type(b) for a, b in zip(g.out_avals, first)):
            raise ShapeError(f"cond: branch {k} returns {[a.str_short() for a in g.out_avals]}, branch 0 "
                             f"{[a.str_short() for a in first]}")
    return tuple(ShapedArray(a.shape, a.dtype, all(g.out_avals[i].weak_type for g in branches))
                 for i, a in enumerate(first))


@def_impl(cond_p)
def _cond_impl(index, *ops, branches):
    k = int(np.clip(index, 0, len(branches) - 1))
    return tuple(np.array(o) for o in run_numpy(branches[k], ops))  # never an operand itself


# --- while ----------------------------------------------------------------------------------------

@def_shape(while_p)
def _while_shape(*avals, cond_graph, body_graph, cond_nconsts, body_nconsts):
    cc, bc, carry = (avals[:cond_nconsts], avals[cond_nconsts:cond_nconsts + body_nconsts],
                     avals[cond_nconsts + body_nconsts:])
    _check_closed("while_loop cond_fun", cond_graph)
    _check_closed("while_loop body_fun", body_graph)
    _check_inputs("while_loop cond_fun", cond_graph, list(cc) + list(carry))
    _check_inputs("while_loop body_fun", body_graph, list(bc) + list(carry))
    (pred,) = cond_graph.out_avals
    if pred.shape != () or pred.dtype != np.dtype(bool):
        raise DTypeError(f"while_loop: cond_fun must return a bool scalar, got {pred.str_short()}")
    outs = body_graph.out_avals
    if len(outs) != len(carry) or not all(a.same_type(b) for a, b in zip(outs, carry)):
        raise ShapeError(f"while_loop: body_fun returns {[a.str_short() for a in outs]} for a carry of "
                         f"{[a.str_short() for a in carry]}")
    return tuple(carry)


@def_impl(while_p)
def _while_impl(*vals, cond_graph, body_graph, cond_nconsts, body_nconsts):
    cc = list(vals[:cond_nconsts])
    bc = list(vals[cond_nconsts:cond_nconsts + body_nconsts])
    carry = list(vals[cond_nconsts + body_nconsts:])
    while bool(run_numpy(cond_graph, cc + carry)[0]):
        carry = run_numpy(body_graph, bc + carry)
    return tuple(np.array(c) for c in carry)


# --- scan -----------------------------------------------------------------------------------------

def split_scan(operands: Sequence, num_consts: int, num_carry: int) -> tuple[list, list, list]:
    """A scan's operands (or their avals) as (consts, carry, xs)."""
    return (list(operands[:num_consts]), list(operands[num_consts:num_consts + num_carry]),
            list(operands[num_consts + num_carry:]))


@def_shape(scan_p)
def _scan_shape(*avals, body, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = split_scan(avals, num_consts, num_carry)
    if not isinstance(length, int) or length < 0:
        raise ShapeError(f"scan: length must be a non-negative int, got {length!r}")
    for i, x in enumerate(xs):
        if not x.shape or x.shape[0] != length:
            raise ShapeError(f"scan: xs operand {i} is {x.str_short()}, which does not have the scan length "
                             f"{length} as its leading axis")
    _check_closed("scan body", body)
    _check_inputs("scan body", body, consts + carry + [x.update(shape=x.shape[1:]) for x in xs])
    outs = body.out_avals
    if len(outs) < num_carry or not all(a.same_type(b) for a, b in zip(outs[:num_carry], carry)):
        raise ShapeError(f"scan: the body returns the carry {[a.str_short() for a in outs[:num_carry]]} for "
                         f"{[a.str_short() for a in carry]}")
    return tuple(carry) + tuple(y.update(shape=(length,) + y.shape) for y in outs[num_carry:])


@def_impl(scan_p)
def _scan_impl(*vals, body, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = split_scan(vals, num_consts, num_carry)
    ys = [np.empty((length,) + a.shape, a.dtype) for a in body.out_avals[num_carry:]]
    for step in range(length):
        i = length - 1 - step if reverse else step
        outs = run_numpy(body, consts + carry + [x[i] for x in xs])
        carry = outs[:num_carry]
        for y, o in zip(ys, outs[num_carry:]):
            y[i] = o
    return tuple(np.array(c) for c in carry) + tuple(ys)
