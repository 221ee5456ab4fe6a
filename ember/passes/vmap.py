"""vmap: the batching transform, as a graph transform.

`batch_eval` walks a per-example graph carrying, for every value, the axis along which it is batched
(or None). Nodes whose operands are all unbatched are re-emitted unchanged, so weights and constants
stay unbatched; the others go through their primitive's batching rule, which moves the batch axis
through the operation (dot_general gains a batch dimension, reductions shift their axes, ...). No
per-example loop is ever emitted: the batched graph has as many nodes for any batch size.
"""

from __future__ import annotations

from collections.abc import Sequence

from ember.errors import BatchingError, user_location
from ember.passes.dce import dce
from ember.passes.stages import record
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph, Var, verified
from ember.tracer.primitive import batch_rules, def_batch, transform_rule
from ember.tracer.prims.util import batch_size, bdim_at_front, move_bdim
from ember.tracer.trace import bind, current_builder, new_builder


def batch_eval(graph: Graph, args: Sequence, dims: Sequence[int | None]) -> tuple[list, list]:
    """Emit the batched version of `graph` on `args` (batched along `dims`); returns (outs, out dims)."""
    env: dict[Var, tuple] = {v: (a, d) for v, a, d in zip(graph.inputs, args, dims)}
    env.update((v, (val, None)) for v, val in zip(graph.consts, graph.const_values))
    b = current_builder()
    for node in graph.nodes:
        vals, ds = [], []
        for a in node.inputs:
            if isinstance(a, Var):
                val, d = env[a]
            else:  # a weak Literal stays one, so `r * 0.5` keeps its weak type when batched
                val, d = (a if a.aval.weak_type else a.val), None
            vals.append(val)
            ds.append(d)
        with b.at(node.loc, node.role):
            if all(d is None for d in ds):
                out, od = bind(node.prim, vals, node.params), None
                od = [None] * len(out) if node.prim.multiple_results else None
            else:
                out, od = transform_rule(batch_rules, node.prim, "vmap", node.loc)(vals, ds, **node.params)
        if node.prim.multiple_results:
            env.update((v, (o, d)) for v, o, d in zip(node.outputs, out, od))
        else:
            env[node.outputs[0]] = (out, od)
    outs, out_dims = [], []
    for v in graph.outputs:
        val, d = env[v] if isinstance(v, Var) else (v.val, None)
        outs.append(val)
        out_dims.append(d)
    return outs, out_dims


def batched_aval(aval: ShapedArray, dim: int | None, size: int) -> ShapedArray:
    if dim is None:
        return aval
    shape = list(aval.shape)
    shape.insert(dim, size)
    return aval.update(shape=tuple(shape))


def move_batch_axis(x, src: int | None, dst: int | None, size: int, what: str = "output"):
    """Put the batch axis of `x` at `dst`: move it, or broadcast an unbatched `x` along a new axis."""
    if dst is None:
        if src is not None:
            raise BatchingError(f"vmap: out_axes is None for an {what} that varies along the mapped axis; "
                                 "give it an axis (e.g. out_axes=0) or return a value that does not depend "
                                 "on the batched arguments", user_location())
        return x
    return move_bdim(x, src, dst, size)


def vmap_graph(graph: Graph, in_dims: Sequence[int | None], size: int,
               out_dims: int | None | Sequence[int | None] = 0) -> Graph:
    """The batched graph: input i is batched along in_dims[i]; outputs are batched along out_dims
    (one int/None for all outputs, or one per output)."""
    if not isinstance(out_dims, (list, tuple)):
        out_dims = [out_dims] * len(graph.outputs)
    in_avals = [batched_aval(v.aval, d, size) for v, d in zip(graph.inputs, in_dims)]
    record("before vmap", graph)
    with new_builder() as b:
        args = [b.new_input(a) for a in in_avals]
        outs, ods = batch_eval(graph, args, in_dims)
        outs = [move_batch_axis(o, d, want, size) for o, d, want in zip(outs, ods, out_dims)]
        out = verified(dce(b.build(outs)))
    record("after vmap", out)
    return out


@def_batch(P.custom_vjp_call_p)
def _custom_vjp_call_batch(args, dims, *, primal, fwd, bwd, num_consts, name, caller_fwd=False):
    """Batch every operand at axis 0 (unbatched ones are broadcast, so their cotangents are summed
    by broadcast's VJP) and vmap the three subgraphs. Registered here: it needs this transform."""
    size = batch_size(args, dims)
    args = [bdim_at_front(a, d, size) for a, d in zip(args, dims)]
    zeros = lambda g: (0,) * len(g.inputs)  # noqa: E731
    new = dict(
        primal=vmap_graph(primal, zeros(primal), size, out_dims=0),
        fwd=vmap_graph(fwd, zeros(fwd), size, out_dims=0),
        bwd=vmap_graph(bwd, zeros(bwd), size, out_dims=0),
    )
    outs = P.custom_vjp_call_p.bind(*args, num_consts=num_consts, name=name, caller_fwd=caller_fwd, **new)
    return outs, [0] * len(outs)


@def_batch(P.remat_call_p)
def _remat_call_batch(args, dims, *, body, policy, prevent_cse, name):
    """vmap the body (unbatched operands stay unbatched, every output batched at axis 0) into a new
    remat_call, so the batched function is still rematerialized. Registered here: it needs this transform."""
    size = batch_size(args, dims)
    batched = vmap_graph(body, dims, size, out_dims=0)
    outs = P.remat_call_p.bind(*args, body=batched, policy=policy, prevent_cse=prevent_cse, name=name)
    return outs, [0] * len(outs)


@def_batch(P.custom_jvp_call_p)
def _custom_jvp_call_batch(args, dims, *, primal, jvp, num_consts, name):
    """Batch every operand at axis 0 (unbatched ones broadcast) and vmap both subgraphs: the rule's
    tangent inputs are batched like their arguments. Registered here: it needs this transform."""
    size = batch_size(args, dims)
    args = [bdim_at_front(a, d, size) for a, d in zip(args, dims)]
    zeros = lambda g: (0,) * len(g.inputs)  # noqa: E731
    rule = None if jvp is None else vmap_graph(jvp, zeros(jvp), size, out_dims=0)  # None: a recursive call
    outs = P.custom_jvp_call_p.bind(*args, primal=vmap_graph(primal, zeros(primal), size, out_dims=0), jvp=rule,
                                    num_consts=num_consts, name=name)
    return outs, [0] * len(outs)
