"""The fusion pass's rules: which primitives fuse, which are expensive (`Primitive.expensive`), and
whether a set of nodes can be one kernel (`check_body`). Learned from XLA (instruction_fusion.cc,
cpu_instruction_fusion.cc).

A kernel (a fusion body) has one iteration space:
- loop / multi_output: every value it writes has the same shape (the space); values computed on the
  way (through broadcasts, reshapes, slices, ...) are index maps and may have any shape.
- reduction: one or more reduces over the same operand shape and axes (the space); the nodes that
  read a reduce's result run after it, once per reduced element: elementwise or reshape, of the
  reduced size, never another reduce (that needs a second loop).
- epilogue: one dot_general (or conv_general_dilated: a contraction) and the elementwise consumers
  that read its result element for element.
A value read more than once per kernel element (through an expanding broadcast) is recomputed at
each read, so only free nodes (layout ops, converts) may be; everything else is read from memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from ember.tracer import prims as P
from ember.tracer.ir import Literal, Node, Var

# Reductions whose result depends on the exact bits of their operand (softmax's max): the operand is
# computed once, never recomputed in another kernel.
MAX_LIKE = frozenset({P.reduce_max_p, P.reduce_min_p, P.argmax_p, P.argmin_p})
FUSIBLE_KINDS = frozenset({"elementwise", "layout", "reduction", "contraction"})
FUSIBLE_INDEXING = frozenset({P.gather_p})  # an indexed load; scatters write and stay their own nodes
MAX_INPUTS = 32  # arrays one kernel reads
MAX_REDUCTIONS = 4  # reduces one kernel accumulates
MAX_NODES = 256  # nodes in one kernel (and what one legality check costs): a Threefry-2x32 hash is ~120

Reason = tuple[str, str]  # (rule, message)


def where(node: Node) -> str:
    """`exp at model.py:12`: how messages name a node."""
    return f"{node.prim.name} at {node.loc}" if node.loc else node.prim.name


def fusible(node: Node) -> bool:
    return node.prim.kind in FUSIBLE_KINDS or node.prim in FUSIBLE_INDEXING


def expensive(node: Node) -> bool:
    """Never duplicated or recomputed (XLA's IsExpensive): the primitive's cost class, except that a
    division by a Literal is cheap."""
    if node.prim is P.div_p:
        return not isinstance(node.inputs[1], Literal)
    return bool(node.prim.expensive)


def free(node: Node) -> bool:
    """Recomputing it costs only index arithmetic (layout ops, converts)."""
    return node.prim.kind == "layout" or node.prim is P.convert_element_type_p


def reuse(reader: Node, operand: int) -> int:
    """How many times `reader` reads each element of its operand `operand` (expanding reads)."""
    a, out = reader.inputs[operand].aval, reader.outputs[0].aval
    expands = (reader.prim is P.broadcast_in_dim_p or (reader.prim is P.gather_p and operand == 1)
               or (reader.prim.kind == "elementwise" and a.ndim == 0))
    return max(1, out.size // max(a.size, 1)) if expands else 1


def edge_reason(producer: Node, consumer: Node, operand: int) -> Reason | None:
    """Why this edge can never be inside one kernel, whatever the groups (None when it can)."""
    for n in (producer, consumer):
        if not fusible(n):
            return "not-fusible", f"{where(n)} is not fusible: it runs as its own node"
    if consumer.prim.kind == "contraction":  # dot_general, conv_general_dilated
        return ("contraction-operand", f"{where(consumer)} reads its operands whole, so {where(producer)} is "
                "written first")
    if consumer.prim is P.gather_p and operand == 0:
        return ("indexed-operand", f"{where(consumer)} reads its operand at computed positions, so {where(producer)} "
                "is written first")
    return None


def reduce_key(node: Node) -> tuple:
    axes = node.params["axes"] if "axes" in node.params else (node.params["axis"],)
    return node.inputs[0].aval.shape, tuple(axes)


def check_body(body: Sequence[Node], outputs: Sequence[Var], n_inputs: int) -> Reason | None:
    """Why `body` (nodes in topological order) writing `outputs` and reading `n_inputs` arrays cannot be
    one kernel, or None when it can."""
    if len(body) > MAX_NODES:
        return "too-many-nodes", f"the kernel would hold {len(body)} nodes (at most {MAX_NODES})"
    inside = {n.outputs[0]: n for n in body}
    dots = [n for n in body if n.prim.kind == "contraction"]
    reduces = [n for n in body if n.prim.kind == "reduction"]
    why = _check_dot(body, dots, reduces, inside) if dots else None
    if why is None and reduces:
        why = _check_reduces(body, reduces, outputs, inside)
    if why is None and not reduces:
        space = dots[0].outputs[0].aval.shape if dots else outputs[0].aval.shape if outputs else None
        why = _check_outputs(outputs, space, inside, set())
    if why is None:
        why = _check_reuse(body, outputs, inside)
    if why is None and n_inputs > MAX_INPUTS:
        why = "too-many-inputs", f"the kernel would read {n_inputs} arrays (at most {MAX_INPUTS})"
    return why


def _check_dot(body, dots, reduces, inside) -> Reason | None:
    if len(dots) > 1:
        return "dot-epilogue", f"{where(dots[0])} and {where(dots[1])} would share a kernel (one dot_general each)"
    dot = dots[0]
    if reduces:
        return ("dot-epilogue", f"{where(dot)} and {where(reduces[0])} would share a kernel: a dot_general kernel "
                "takes only elementwise epilogues")
    shape = dot.outputs[0].aval.shape
    for a in dot.inputs:
        if a in inside:
            return ("contraction-operand", f"{where(dot)} reads its operands whole, so {where(inside[a])} is written "
                    "first")
    for n in body:
        if dot.outputs[0] in n.inputs and not (n.prim.kind == "elementwise" and n.outputs[0].aval.shape == shape):
            return "dot-epilogue", f"{where(n)} reads the result of {where(dot)} other than element for element"
    return None


def _check_reduces(body, reduces, outputs, inside) -> Reason | None:
    first = reduces[0]
    for r in reduces[1:]:
        if reduce_key(r) != reduce_key(first):
            return "space-mismatch", f"{where(first)} and {where(r)} reduce different axes or shapes"
    if len(reduces) > MAX_REDUCTIONS:
        return "too-many-reductions", f"the kernel would hold {len(reduces)} reductions (at most {MAX_REDUCTIONS})"
    size = first.outputs[0].aval.size
    after: dict[Var, Node] = {}  # values computed from a reduce's result -> that reduce
    for n in body:
        src = next((after[a] for a in n.inputs if a in after), None)
        if src is None:
            if n.prim.kind == "reduction":
                after[n.outputs[0]] = n
            continue
        if n.prim.kind == "reduction" or n.outputs[0].aval.size != size or not (
                n.prim.kind == "elementwise" or n.prim is P.reshape_p):
            return "two-pass", f"{where(n)} needs the finished result of {where(src)}: a second loop"
        after[n.outputs[0]] = src
    return _check_outputs(outputs, first.inputs[0].aval.shape, inside, set(after))


def _check_outputs(outputs, space, inside, reduced) -> Reason | None:
    """Every value the kernel writes (but those of the reduced size) has the shape it iterates over."""
    for v in outputs:
        if v not in reduced and v.aval.shape != space:
            return "space-mismatch", (f"{where(inside[v])} writes {_shape(v.aval.shape)} but the kernel iterates over "
                                      f"{_shape(space)}: different iteration spaces")
    return None


def _check_reuse(body, outputs, inside) -> Reason | None:
    """No node but a free one is recomputed for repeated reads."""
    reads = {v: 1 for v in outputs}
    culprit: dict[Var, Node] = {}
    for n in reversed(body):
        k = reads.get(n.outputs[0], 1)
        if k > 1 and not free(n):
            return "reread", (f"{where(culprit[n.outputs[0]])} reads each element of {where(n)} {k} times; it is "
                              "computed once, not recomputed at every read")
        for i, a in enumerate(n.inputs):
            if a in inside:
                r = k * reuse(n, i)
                if r > reads.get(a, 0):
                    reads[a], culprit[a] = r, n
    return None


def _shape(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"
