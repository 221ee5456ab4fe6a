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
from ember.tracer.ir import Graph, Var
from ember.tracer.primitive import batch_rules
from ember.tracer.prims._util import moveaxis, shape_of
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
            else:
                val, d = a.val, None
            vals.append(val)
            ds.append(d)
        with b.at(node.loc):
            if all(d is None for d in ds):
                out, od = bind(node.prim, vals, node.params), None
                od = [None] * len(out) if node.prim.multiple_results else None
            else:
                out, od = batch_rules[node.prim](vals, ds, **node.params)
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
    if src is None:
        shape = shape_of(x)
        new_shape = shape[:dst] + (size,) + shape[dst:]
        return P.broadcast_in_dim(x, new_shape, tuple(i for i in range(len(new_shape)) if i != dst))
    return moveaxis(x, src, dst)


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
        out = dce(b.build(outs))
    record("after vmap", out)
    return out
