"""`fusion`: what the optimizer decided to compute in one kernel.

A fusion node's `body` param is a closed subgraph (no consts; Literals allowed) whose inputs are the
node's operands and whose outputs are the node's results; `kind` says which fusion rule made it
(FUSION_KINDS). The body is the kernel description every backend lowers (backends/kernel.py turns it
into loops). It is internal to the optimizer: grad and vmap never meet it, so it has no VJP or
batching rule. Its numpy reference interprets the body node by node.
"""

from __future__ import annotations

from ember.errors import ShapeError
from ember.tracer.ir import Graph, Var
from ember.tracer.primitive import Primitive, def_impl, def_shape, impl_rules

fusion_p = Primitive("fusion", multiple_results=True, kind="opaque", transformable=False, expensive=False)

# loop: elementwise work and the layout ops/gathers feeding it, one iteration space; reduction: a
# reduce with its elementwise producers (and consumers of the reduced shape); multi_output: sibling
# loops over one iteration space sharing inputs; epilogue: a dot_general with bias/activation applied
# to its output buffer.
FUSION_KINDS = ("loop", "reduction", "multi_output", "epilogue")


@def_shape(fusion_p)
def _fusion_shape(*avals, body: Graph, kind: str):
    if kind not in FUSION_KINDS:
        raise ShapeError(f"fusion kind {kind!r} is not one of {FUSION_KINDS}")
    if body.consts:
        raise ShapeError("a fusion body takes its arrays as operands, it has no consts")
    if len(avals) != len(body.inputs):
        raise ShapeError(f"fusion body takes {len(body.inputs)} operands, got {len(avals)}")
    for i, (a, v) in enumerate(zip(avals, body.inputs)):
        if not a.same_type(v.aval):
            raise ShapeError(f"fusion operand {i} is {a.str_short()}, its body expects {v.aval.str_short()}")
    return tuple(v.aval for v in body.outputs)


def run_body(body: Graph, args) -> tuple:
    """Evaluate a fusion body with the numpy references, node by node."""
    env = dict(zip(body.inputs, args))
    for node in body.nodes:
        ins = [env[a] if isinstance(a, Var) else a.val for a in node.inputs]
        out = impl_rules[node.prim](*ins, **node.params)
        env.update(zip(node.outputs, out if node.prim.multiple_results else (out,)))
    return tuple(env[v] if isinstance(v, Var) else v.val for v in body.outputs)


@def_impl(fusion_p)
def _fusion_impl(*args, body: Graph, kind: str):
    return run_body(body, args)
