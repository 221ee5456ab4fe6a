"""The memory plan: schedule, liveness, buffer classes, in-place reuse, buffer assignment and peak bytes.

Backends read the plan instead of recomputing liveness: `frees[j]` are the values whose last use is
node j, `inplace[out] = operand` says that node output `out` is written into the buffer of `operand`
(an input of the same node, or of the fusion), and `buffer[v]` numbers the buffers (values sharing a
buffer share an id). A buffer is released once the last value in it is freed.

Buffer classes (DESIGN "The Executable and Plan contract"): a user input is read-only; a donated input
may be overwritten and is released after its last use; a const is a closed-over array, read-only; a
workspace value lives from its node to its last use; a per-call output is fresh on every call.

In place (the `inplace` decision, on unless disabled): an elementwise node or a fusion writes a result
into an operand's buffer when the operand has the result's shape and dtype, is read only through the
identity index map, dies at this node, is workspace or donated, and the result is not a function output.
For a fusion, `body_shareable` is the one derivation of which (output, input) pairs its kernel may
share (renderers read it as `Kernel.shareable`); the plan writes only such pairs, and more cautiously.
Each declined elementwise node or fusion records one refusal (explain.py) with the most telling rule.
The layout ops in VIEWS may return a view of their operand (the numpy backend's do), so an operand is
written in place only when no view of it is read later, and a view is never written. Other workspace
values reuse a buffer released after its last use of the same byte size (a pool; a backend gives a
layout op's result its own buffer, or fuses it, so a view does not hold a pooled buffer). The
timeline and peak count each buffer from its node to its last use. With `inplace` disabled the plan
is naive: every value its own buffer, freed after its last use.
"""

from __future__ import annotations

import bisect
import itertools
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ember.passes.explain import refuse
from ember.tracer import prims as P
from ember.tracer.ir import Graph, Namer, Node, Var

INPUT, DONATED, CONST, WORKSPACE, OUTPUT = "input", "donated", "const", "workspace", "output"
BUFFER_CLASSES = (INPUT, DONATED, CONST, WORKSPACE, OUTPUT)

# Prims whose result may be a view of operand 0 (rule: how it reads that operand); iota's is a
# read-only broadcast of a range. The numpy backend's references return such views (`Primitive.may_view`).
VIEWS = {P.broadcast_in_dim_p: "broadcast", P.reshape_p: "reshaped", P.transpose_p: "transposed",
         P.slice_p: "sliced", P.rev_p: "reversed", P.stop_gradient_p: "aliased", P.iota_p: "broadcast"}
# How a fused kernel reads an input when a body node other than a same-shape elementwise op uses it.
HAZARDS = {**VIEWS, P.pad_p: "padded", P.concatenate_p: "concatenated"}
KIND_HAZARDS = {"reduction": "reduced", "contraction": "reduced", "indexing": "gathered", "layout": "reshaped",
                "opaque": "reduced", "elementwise": "broadcast"}
HAZARD_WORDS = {"broadcast": "broadcast (its elements repeated)", "reshaped": "reshaped", "transposed": "transposed",
                "sliced": "sliced", "reversed": "reversed", "aliased": "aliased", "padded": "padded",
                "concatenated": "concatenated", "reduced": "whole, in a reduction or contraction",
                "gathered": "at gathered indices",
                "contraction-first": "after the fused contraction (dot or convolution) has written the result",
                "written-before-read": "after the kernel has written the result"}


@dataclass(frozen=True, eq=False)
class Plan:
    """How a scheduled graph uses memory. `frees[j]` is released after `schedule[j]` runs; `peak_bytes`
    is the peak of the workspace (intermediates) live at once, `live_bytes[j]` that at step j."""

    schedule: tuple[Node, ...]
    donated: tuple[int, ...]
    buffer_class: Mapping[Var, str]
    nbytes: Mapping[Var, int]
    last_use: Mapping[Var, int]
    frees: tuple[tuple[Var, ...], ...]
    peak_bytes: int
    saved_bytes: int = 0
    inplace: Mapping[Var, Var] = field(default_factory=dict)
    buffer: Mapping[Var, int] | None = None
    inplace_saved_bytes: int = 0
    donation_saved_bytes: int = 0
    live_bytes: tuple[int, ...] = ()
    naive_peak_bytes: int | None = None
    reuse: bool = False  # whether the in-place decision ran (False: the naive plan)

    def __post_init__(self):
        if self.buffer is None:  # the naive numbering: every value its own buffer
            object.__setattr__(self, "buffer", {v: i for i, v in enumerate(self.buffer_class)})
        if self.naive_peak_bytes is None:
            object.__setattr__(self, "naive_peak_bytes", self.peak_bytes)

    @property
    def buffers(self) -> int:
        """How many distinct buffers the plan uses."""
        return len(set(self.buffer.values()))

    def owners(self) -> dict[int, Var]:
        """Each buffer id's first value (inputs and consts first, then in schedule order): its class
        is the buffer's class."""
        owners: dict[int, Var] = {}
        for v in self.buffer_class:
            owners.setdefault(self.buffer[v], v)
        return owners

    def bytes_of(self, cls: str) -> int:
        """Bytes of the distinct buffers of class `cls`."""
        return sum(self.nbytes[v] for v in self.owners().values() if self.buffer_class[v] == cls)

    def text(self, names: Namer | None = None) -> str:
        """The plan as text: totals, then per node the buffer each result takes (new, reused from the
        pool or in place of an operand) and the values freed after it."""
        names = names or Namer()
        totals = ", ".join(f"{c} {self.bytes_of(c)}" for c in BUFFER_CLASSES if any(
            k == c for k in self.buffer_class.values()))
        lines = [f"# memory plan: peak {self.peak_bytes} bytes of intermediates (naive {self.naive_peak_bytes}), "
                 f"{self.buffers} buffers, saved {self.saved_bytes} bytes (in place {self.inplace_saved_bytes}, "
                 f"donation {self.donation_saved_bytes}), donated inputs {list(self.donated)}"
                 + ("" if self.reuse else ", in-place off"),
                 f"#   bytes by class: {totals or 'none'}"]
        seen = {self.buffer[v] for v, c in self.buffer_class.items() if c in (INPUT, DONATED, CONST)}
        for j, node in enumerate(self.schedule):
            made = []
            for v in node.outputs:
                b = self.buffer[v]
                what = (f"in place of {names(self.inplace[v])}" if v in self.inplace
                        else "reuse" if b in seen else "alloc")
                made.append(f"{names(v)}:{self.buffer_class[v]}:{self.nbytes[v]}B #{b} {what}")
                seen.add(b)
            freed = " ".join(names(v) for v in self.frees[j])
            lines.append(f"#   {j:3d} {node.prim.name:<20s} {', '.join(made) or '-'}" +
                         (f"  free {freed}" if freed else ""))
        return "\n".join(lines)

    def __str__(self):
        return self.text()


def _classes(graph: Graph, donated: Iterable[int]) -> dict[Var, str]:
    donated = set(donated)
    out_vars = {v for v in graph.outputs if isinstance(v, Var)}
    cls: dict[Var, str] = {}
    for i, v in enumerate(graph.inputs):
        cls[v] = DONATED if i in donated else INPUT
    for v in graph.consts:
        cls[v] = CONST
    for node in graph.nodes:
        for v in node.outputs:
            cls[v] = OUTPUT if v in out_vars else WORKSPACE
    return cls


def last_uses(graph: Graph) -> dict[Var, int]:
    """The index of the last node reading each Var (graph outputs count as read after the last node);
    values nobody reads die where they are made."""
    last: dict[Var, int] = {}
    for j, node in enumerate(graph.nodes):
        for a in node.inputs:
            if isinstance(a, Var):
                last[a] = j
        for v in node.outputs:
            last.setdefault(v, j)
    end = len(graph.nodes)
    for v in graph.outputs:
        if isinstance(v, Var):
            last[v] = end
    return last


def _views(graph: Graph) -> dict[Var, tuple[Var | None, str, Node]]:
    """Values that may be views: value -> (the value it views, None for iota's; the rule; the node)."""
    views: dict[Var, tuple[Var | None, str, Node]] = {}
    for node in graph.nodes:
        if node.prim in VIEWS:
            base = node.inputs[0] if node.inputs and isinstance(node.inputs[0], Var) else None
            views[node.outputs[0]] = (base, VIEWS[node.prim], node)
        elif node.prim is P.fusion_p:
            for out, (k, rule) in _body_views(node.params["body"]).items():
                base = node.inputs[k] if k is not None and isinstance(node.inputs[k], Var) else None
                views[node.outputs[out]] = (base, rule, node)
    return views


def _body_views(body: Graph) -> dict[int, tuple[int | None, str]]:
    """Fusion body outputs that may be views: output index -> (the body input viewed or None, rule)."""
    source: dict[Var, tuple[int | None, str]] = {v: (k, "aliased") for k, v in enumerate(body.inputs)}
    for node in body.nodes:
        if node.prim is P.iota_p:
            source[node.outputs[0]] = (None, VIEWS[node.prim])
        elif node.prim in VIEWS and node.inputs[0] in source:
            k, rule = source[node.inputs[0]]
            source[node.outputs[0]] = (k, rule if rule != "aliased" else VIEWS[node.prim])
    return {i: source[v] for i, v in enumerate(body.outputs) if v in source}


def _extended_ends(graph: Graph, last: Mapping[Var, int], views: Mapping) -> dict[Var, int]:
    """Each value's last use, extended to the last use of every view of it (a view keeps its base alive)."""
    ends = dict(last)
    for node in reversed(graph.nodes):
        for v in node.outputs:
            base = views[v][0] if v in views else None
            if base is not None:
                ends[base] = max(ends[base], ends[v])
    return ends


def _body_hazards(body: Graph) -> dict[int, tuple[str, Node]]:
    """For each body input read other than through the identity index map: (rule, the body node).
    Values computed from an input by same-shape elementwise nodes read it at the identity map too; a
    reduction of them is safe only as a result of the kernel (accumulated in the loop that writes),
    not when the body reads it again (the kernel would then read the input whole before writing)."""
    read = {a for node in body.nodes for a in node.inputs if isinstance(a, Var)}
    hazards: dict[int, tuple[str, Node]] = {}
    # a kernel computes a fused contraction (dot_general, a convolution) into the result's buffer before
    # its epilogue reads the other operands, so no operand may share that buffer (the backends' kernels
    # alias it: kernel.py)
    dot = next((n for n in body.nodes if n.prim.kind == "contraction"), None)
    for k, x in enumerate(body.inputs):
        derived = {x}
        for node in body.nodes:
            if not any(a in derived for a in node.inputs):
                continue
            if node.prim.kind == "elementwise" and all(o.aval.shape == x.aval.shape for o in node.outputs):
                derived.update(node.outputs)
            elif node.prim.kind != "reduction" or any(o in read for o in node.outputs):
                hazards[k] = (HAZARDS.get(node.prim) or KIND_HAZARDS[node.prim.kind], node)
                break
        if dot is not None and k not in hazards and x in read:
            hazards[k] = ("contraction-first", dot)
    return hazards


# Body prims a kernel computes as a step reading its operands whole (backends/kernel.py `ArgReduce`,
# `Scatter`): a kernel holding one shares no buffer.
WHOLE_STEPS = (P.argmax_p, P.argmin_p, P.scatter_add_p, P.scatter_p, P.scatter_mul_p, P.scatter_min_p, P.scatter_max_p)
# Layout nodes that read their operand at the element they compute when it has their size (its flat
# offset is theirs), by primitive: a reshape, a broadcast adding unit axes, a transpose keeping the
# order of its axes longer than one, a slice of the whole, a reversal of unit axes, no padding, one
# operand concatenated; any other layout or indexing node reads elsewhere.
SAME_OFFSET = {
    P.reshape_p: lambda node: True,
    P.broadcast_in_dim_p: lambda node: True,
    P.transpose_p: lambda node: _long_axes_in_order(node),
    P.slice_p: lambda node: True,
    P.rev_p: lambda node: all(node.inputs[0].aval.shape[d] == 1 for d in node.params["dimensions"]),
    P.pad_p: lambda node: all(c == (0, 0, 0) for c in map(tuple, node.params["padding_config"])),
    P.concatenate_p: lambda node: len(node.inputs) == 1,
}


def _long_axes_in_order(node: Node) -> bool:
    shape = node.inputs[0].aval.shape
    kept = [p for p in node.params["permutation"] if shape[p] != 1]
    return kept == sorted(kept)


def body_shareable(body: Graph) -> frozenset[tuple[int, int]]:
    """The (output, input) index pairs of a fusion body, of one shape and dtype, whose kernel may
    write the output into the input's buffer: the one derivation of this fact (the memory plan writes
    only such pairs in place; `kernel.lower_kernel` hands them to renderers as `Kernel.shareable`).
    A kernel runs the body as loops in order (backends/kernel.py); the output must be a store of its
    own loop, that loop must read the input only at the output's index, and no later step read it."""
    found = _shareable.get(body)
    if found is None:
        found = _shareable[body] = _derive_shareable(body)
    return found


# body -> body_shareable(body): the plan and then each backend's lowering ask for the same bodies
_shareable: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _derive_shareable(body: Graph) -> frozenset[tuple[int, int]]:
    pairs = [(m, k) for m, o in enumerate(body.outputs) for k, x in enumerate(body.inputs)
             if isinstance(o, Var) and (x.aval.shape, x.aval.dtype) == (o.aval.shape, o.aval.dtype)]
    if not pairs or any(n.prim in WHOLE_STEPS for n in body.nodes):
        return frozenset()
    loops = _body_loops(body)
    return frozenset(p for p in pairs if not loops.conflict(*p)[0])


def _unshared_by(body: Graph, m: int, k: int) -> Node | None:
    """The body node keeping output m from input k's buffer: a whole step, or a read after the write."""
    whole = next((n for n in body.nodes if n.prim in WHOLE_STEPS), None)
    return whole if whole is not None else _body_loops(body).conflict(m, k)[1]


@dataclass
class _BodyLoops:
    """A fusion body's kernel steps in order (backends/kernel.py): per job, its step's position, what
    it reads (body input indices and held values, each with whether only at the step's own index),
    the body node it computes (None for an output's store) and the output it stores (or None); the
    loop key of each position (None for a dot); and the position of each output's plain store."""

    jobs: list[tuple[int, dict, Node | None, int | None]] = field(default_factory=list)
    keys: list[tuple | None] = field(default_factory=list)
    writes: dict[int, int] = field(default_factory=dict)

    def conflict(self, m: int, k: int) -> tuple[bool, Node | None]:
        """Whether output m may not take input k's buffer, and the body node reading k too late."""
        if m not in self.writes:
            return True, None
        at = self.writes[m]
        for pos, found, node, _ in self.jobs:
            if k in found and (pos > at or pos == at and not found[k]):
                return True, node
        return False, None


def _body_loops(body: Graph) -> _BodyLoops:
    """The steps `kernel.lower_kernel` makes of `body`, in its order: reductions and dots are held in
    buffers, so a value reading one is computed a level later; within a level reductions and dots
    come before stores; a reduction joins the loop of its level, space and axes, a store the first
    loop of its level and space; an epilogue's dot writes the output its only loop stores first."""
    inputs = set(body.inputs)
    level: dict[Var, int] = {}
    reads: dict[Var, dict] = {x: {k: True} for k, x in enumerate(body.inputs)}
    held: set[Var] = set()
    jobs: list = []  # (level, a store?, loop key or None for a dot, what it reads, node, output index)
    for node in body.nodes:
        args = [a for a in node.inputs if isinstance(a, Var)]
        if node.prim.kind == "contraction":  # an operand computed in the body is stored first
            jobs += [(level[a], True, (level[a], a.aval.shape), reads[a], node, None) for a in args
                     if a not in held and a not in inputs]
            lv = 1 + max((-1 if a in inputs else level[a] for a in args), default=-1)
            whole = {k: False for a in args if a in inputs for k in reads[a]}
            jobs.append((lv, False, None, {**whole, **{a: False for a in args if a in held}}, node, None))
        else:
            lv = max((level.get(a, 0) + (a in held) for a in args), default=0)
        if node.prim.kind == "reduction":
            x = node.inputs[0]
            jobs.append((lv, False, (lv, x.aval.shape, node.params["axes"]), _reads_of(x, reads, held), node, None))
        for o in node.outputs:
            level[o] = lv
            if node.prim.kind in ("reduction", "contraction"):
                held.add(o)
            else:
                reads[o] = _reads_through(node, o, reads, held)
    written = set()  # held outputs their reduction or dot writes itself
    for m, v in enumerate(body.outputs):
        if isinstance(v, Var) and v in held and v not in written:
            written.add(v)
            continue
        lv = level.get(v, 0) + (v in held) if isinstance(v, Var) else 0
        jobs.append((lv, True, (lv, v.aval.shape), _reads_of(v, reads, held), None, m))
    loops = _in_order(jobs)
    for node in body.nodes:
        if node.prim.kind == "contraction" and node.outputs[0] not in written:
            _alias_epilogue(body, loops, node.outputs[0])
    return loops


def _reads_of(v, reads: Mapping, held: set) -> dict:
    """What computing `v` at an index reads: a held value itself there, else `reads[v]`."""
    if not isinstance(v, Var):
        return {}
    return {v: True} if v in held else reads[v]


def _reads_through(node: Node, o: Var, reads: Mapping, held: set) -> dict:
    """What computing `node`'s output `o` at an index reads (body input indices and held values), each
    with whether only at that index: so through same-shape elementwise operands and layouts that keep
    the flat offset (`SAME_OFFSET`) only."""
    elementwise = node.prim.kind == "elementwise"
    layout = not elementwise and node.prim in SAME_OFFSET and SAME_OFFSET[node.prim](node)
    found: dict = {}
    for i, a in enumerate(node.inputs):
        if isinstance(a, Var):
            here = a.aval.shape == o.aval.shape if elementwise else layout and i == 0 and a.aval.size == o.aval.size
            for k, ok in _reads_of(a, reads, held).items():
                found[k] = found.get(k, True) and ok and here
    return found


def _in_order(jobs) -> _BodyLoops:
    """Steps from jobs as `lower_kernel` places them: sorted by level, reductions and dots first; each
    new loop key (and each dot) a step of its own, in that order."""
    loops = _BodyLoops()
    for _, store, key, found, node, out in sorted(jobs, key=lambda j: (j[0], j[1])):
        if key is None:
            loops.keys.append(None)
            pos = len(loops.keys) - 1
        else:
            if store:
                key = next((k for k in loops.keys if k is not None and k[:2] == key), key + ((),))
            if key not in loops.keys:
                loops.keys.append(key)
            pos = loops.keys.index(key)
        loops.jobs.append((pos, found, node, out))
        if out is not None:
            loops.writes[out] = pos
    return loops


def _alias_epilogue(body: Graph, loops: _BodyLoops, d: Var) -> None:
    """A dot's result `d` read only by one loop, with no reduced axis, at its index, is written into
    the output that loop stores first among those of its shape and dtype (kernel.py
    `_alias_epilogues`): that output has no plain store."""
    readers = {pos for pos, found, _, _ in loops.jobs if d in found}
    if len(readers) != 1 or loops.keys[min(readers)] is None or loops.keys[min(readers)][2]:
        return
    (pos,) = readers
    if not all(found[d] for p, found, _, _ in loops.jobs if p == pos and d in found):
        return
    target = next((m for p, _, _, m in loops.jobs if p == pos and m is not None and (
        body.outputs[m].aval.shape, body.outputs[m].aval.dtype) == (d.aval.shape, d.aval.dtype)), None)
    if target is not None:
        loops.writes.pop(target, None)


def _loc(node: Node) -> str:
    return f" at {node.loc}" if node.loc else ""


class _Inplace:
    """The in-place decision over one graph: which operand buffer each result may take, or why not."""

    # How far an operand got through the checks: the refusal of the operand that got furthest is the
    # most telling (an output is never written in place, whatever its operands).
    SHAPE, HAZARD, CLASS, READ_LATER, TAKEN, OUTPUT = range(6)

    def __init__(self, graph: Graph, cls, ends, views):
        self.graph, self.cls, self.ends, self.views = graph, cls, ends, views
        self.outputs = {v for v in graph.outputs if isinstance(v, Var)}
        self.producer = {v: node for node in graph.nodes for v in node.outputs}
        self.readers: dict[Var, list[int]] = {}
        for j, node in enumerate(graph.nodes):
            for a in node.inputs:
                if isinstance(a, Var):
                    reads = self.readers.setdefault(a, [])
                    if not reads or reads[-1] != j:
                        reads.append(j)
        self.viewers: dict[Var, list[Var]] = {}
        for v, (base, _, _) in views.items():
            if base is not None:
                self.viewers.setdefault(base, []).append(v)

    def decide(self, j: int, node: Node) -> dict[Var, Var]:
        """{result: operand} for `node` (step j); records one refusal if it writes nothing in place."""
        if node.prim.kind != "elementwise" and node.prim is not P.fusion_p:
            return {}
        taken: dict[Var, Var] = {}
        best = None
        hazards = _body_hazards(node.params["body"]) if node.prim is P.fusion_p else {}
        for o in node.outputs:
            if not o.aval.shape or not o.aval.size:
                continue  # 0-d and empty values: nothing to save (and NumPy returns scalars for 0-d)
            if o in self.outputs:
                best = (self.OUTPUT, "output", "its result is returned by the function, and outputs are fresh "
                        "arrays on every call", (node,))
                continue
            for k, a in enumerate(node.inputs):
                if not isinstance(a, Var):
                    continue
                why = self._check(j, node, k, a, o, hazards, taken)
                if why is None:
                    taken[o] = a
                    break
                if best is None or why[0] > best[0]:
                    best = why
        if not taken and best is not None and self._reported(node):
            refuse("inplace", best[1], f"{node.prim.name}{_loc(node)} is not done in place: {best[2]}", best[3])
        return taken

    def _reported(self, node: Node) -> bool:
        """Refusals are reported for elementwise nodes and fusions with a result of an operand's size."""
        sizes = {a.aval.size for a in node.inputs if isinstance(a, Var)}
        return any(o.aval.shape and o.aval.size in sizes for o in node.outputs)

    def _check(self, j, node, k, a, o, hazards, taken):
        """None if result `o` may take operand `a`'s buffer, else (stage, rule, message, nodes)."""
        nodes = (self.producer[a], node) if a in self.producer else (node,)
        if a.aval.shape != o.aval.shape or a.aval.dtype != o.aval.dtype:
            return (self.SHAPE, "shape-or-dtype", f"input {k} is {a.aval.str_short()} and the result "
                    f"{o.aval.str_short()}; a buffer is reused only at the same shape and dtype", nodes)
        hazard = self._hazard(node, k, a, hazards)
        if hazard is not None:
            return (self.HAZARD, *hazard, nodes)
        if self.cls[a] == INPUT:
            return (self.CLASS, "user-input", f"input {k} is a user argument and not donated (list it in "
                    "donate_argnums to let Ember overwrite it)", nodes)
        if self.cls[a] == CONST:
            return (self.CLASS, "const", f"input {k} is a closed-over array (a const), which is never written",
                    nodes)
        if self.ends[a] > j:
            return (self.READ_LATER, "read-later", f"input {k} is {self._later(j, a)}", nodes)
        if a in taken.values():
            return (self.TAKEN, "taken", f"input {k}'s buffer already holds another result of this node", nodes)
        return self._loop_order(node, a, o, nodes)

    def _loop_order(self, node, a, o, nodes):
        """(stage, rule, message, nodes) when the fused kernel may not write `o` over `a`
        (`body_shareable`) though it reads `a` only at the identity index: it writes `o` first."""
        if node.prim is not P.fusion_p:
            return None
        body = node.params["body"]
        shareable = body_shareable(body)
        m = node.outputs.index(o)
        for i in (i for i, b in enumerate(node.inputs) if b is a and (m, i) not in shareable):
            reader = _unshared_by(body, m, i)
            by = f" (by {reader.prim.name}{_loc(reader)})" if reader is not None else ""
            return (self.HAZARD, "written-before-read", f"the fused kernel writes the result before its last "
                    f"read of input {i}{by}", nodes)
        return None

    def _hazard(self, node, k, a, hazards):
        """(rule, message) when the node reads operand `a` other than through the identity index map."""
        if a in self.views:
            base, rule, viewer = self.views[a]
            what = "of another array, not an array of its own" if base is not None else "of a range, read-only"
            return rule, (f"input {k} is the result of {viewer.prim.name}{_loc(viewer)}, a view "
                          f"{HAZARD_WORDS[rule]} {what}")
        for i in (i for i, b in enumerate(node.inputs) if b is a and i in hazards):  # a may be passed twice
            rule, body_node = hazards[i]
            if rule == "contraction-first":
                return rule, (f"the fused kernel reads input {i} {HAZARD_WORDS[rule]} ({body_node.prim.name}"
                              f"{_loc(body_node)})")
            return rule, (f"the fused kernel reads input {i} {HAZARD_WORDS[rule]} (through {body_node.prim.name}"
                          f"{_loc(body_node)}), not only through the identity index map")
        for i, b in enumerate(node.inputs):
            if b is not a and b in self.views and self._base(b) is a:
                _, rule, viewer = self.views[b]
                return rule, (f"input {i} reads input {k} {HAZARD_WORDS[rule]} (through {viewer.prim.name}"
                              f"{_loc(viewer)})")
        return None

    def _base(self, v: Var) -> Var | None:
        while v in self.views and v is not None:
            v = self.views[v][0]
        return v

    def _later(self, j: int, a: Var) -> str:
        """Who reads `a` (or a view of it) after step j: 'read again later by mul at f.py:3'."""
        found = []
        stack = [(a, None)]
        while stack:
            v, via = stack.pop()
            if v in self.outputs:
                found.append((len(self.graph.nodes), "returned by the function" + via_text(via)))
            reads = self.readers.get(v, [])
            i = bisect.bisect_right(reads, j)
            if i < len(reads):
                later = self.graph.nodes[reads[i]]
                found.append((reads[i], f"read again later by {later.prim.name}{_loc(later)}" + via_text(via)))
            stack += [(w, via or self.views[w][2]) for w in self.viewers.get(v, [])]
        return min(found, key=lambda f: f[0])[1] if found else "read again later"


def via_text(viewer: Node | None) -> str:
    return f" (through the view made by {viewer.prim.name}{_loc(viewer)})" if viewer is not None else ""


def plan_memory(graph: Graph, donate: Iterable[int] = (), inplace: bool = True) -> Plan:
    """The memory plan of `graph` run in node order; `donate` are flat input indices. `inplace` lets
    results take their operands' buffers and workspace values reuse released buffers."""
    donated = tuple(sorted({int(i) for i in donate}))
    bad = [i for i in donated if not 0 <= i < len(graph.inputs)]
    if bad:
        raise ValueError(f"donated input indices {bad} are out of range for a graph of {len(graph.inputs)} inputs")
    cls = _classes(graph, donated)
    nbytes = {v: v.aval.size * v.aval.dtype.itemsize for v in cls}
    last = last_uses(graph)
    frees = _frees(graph, cls, last)
    defined = {v: j for j, node in enumerate(graph.nodes) for v in node.outputs}
    naive_live = _live_bytes(len(graph.nodes), {v: i for i, v in enumerate(cls)}, cls, nbytes, defined, last)
    naive_peak = max(naive_live, default=0)
    if not inplace:
        return Plan(tuple(graph.nodes), donated, cls, nbytes, last, frees, naive_peak, live_bytes=naive_live)
    views = _views(graph)
    decider = _Inplace(graph, cls, _extended_ends(graph, last, views), views)
    written, buffer = _assign(graph, cls, nbytes, frees, decider)
    live = _live_bytes(len(graph.nodes), buffer, cls, nbytes, defined, last, written)
    owner = {}
    for v in cls:
        owner.setdefault(buffer[v], v)
    by_donation = sum(nbytes[v] for v in defined if cls[owner[buffer[v]]] == DONATED)
    by_inplace = sum(nbytes[v] for v in written if cls[owner[buffer[v]]] == WORKSPACE)
    return Plan(tuple(graph.nodes), donated, cls, nbytes, last, frees, max(live, default=0),
                by_inplace + by_donation, written, buffer, by_inplace, by_donation, live, naive_peak, True)


def naive_live_bytes(plan: Plan) -> tuple[int, ...]:
    """The workspace bytes live at each step of `plan`'s schedule with every value its own buffer."""
    defined = {v: j for j, node in enumerate(plan.schedule) for v in node.outputs}
    own = {v: i for i, v in enumerate(plan.buffer_class)}
    return _live_bytes(len(plan.schedule), own, plan.buffer_class, plan.nbytes, defined, plan.last_use)


def _frees(graph: Graph, cls: Mapping[Var, str], last: Mapping[Var, int]) -> tuple[tuple[Var, ...], ...]:
    """The donated and workspace values whose last use is each node, in buffer_class order."""
    frees: list[list[Var]] = [[] for _ in graph.nodes]
    for v, c in cls.items():
        j = last.get(v)
        if c in (DONATED, WORKSPACE) and j is not None and j < len(graph.nodes):
            frees[j].append(v)
    return tuple(tuple(f) for f in frees)


def _assign(graph: Graph, cls, nbytes, frees, decider: _Inplace) -> tuple[dict[Var, Var], dict[Var, int]]:
    """The in-place decisions and a buffer id per value: in place shares the operand's buffer, other
    workspace values take a buffer released (after its value's last use, `frees`) of their byte size
    when there is one, else a new one."""
    fixed = [v for v, c in cls.items() if c in (INPUT, DONATED, CONST)]
    buffer: dict[Var, int] = {v: i for i, v in enumerate(fixed)}
    n_ids = len(buffer)
    pool: dict[int, list[int]] = {}
    written: dict[Var, Var] = {}
    for j, node in enumerate(graph.nodes):
        taken = decider.decide(j, node)
        written.update(taken)
        for v in node.outputs:
            if v in taken:
                buffer[v] = buffer[taken[v]]
            elif cls[v] == WORKSPACE and pool.get(nbytes[v]):
                buffer[v] = pool[nbytes[v]].pop()
            else:
                buffer[v], n_ids = n_ids, n_ids + 1
        handed = set(taken.values())  # a buffer taken in place lives on in its new value
        for v in frees[j]:
            if v not in handed:
                pool.setdefault(nbytes[v], []).append(buffer[v])
    return written, buffer


def _live_bytes(n: int, buffer, cls, nbytes, defined, last, inplace=()) -> tuple[int, ...]:
    """Workspace bytes live at each step: each workspace buffer counts once while a value in it is
    live (from its node to its last use). The values of a buffer follow one another: a pooled one
    starts after its predecessor's last use, an in-place one at it (so it counts from the next step);
    values in a donated buffer cost nothing new."""
    owner_cls: dict[int, str] = {}
    for v, c in cls.items():
        owner_cls.setdefault(buffer[v], c)
    delta = [0] * (n + 1)
    for v, j in defined.items():
        if owner_cls[buffer[v]] == WORKSPACE:
            start, stop = (j + 1 if v in inplace else j), min(last[v], n - 1)
            if start <= stop:
                delta[start] += nbytes[v]
                delta[stop + 1] -= nbytes[v]
    return tuple(itertools.accumulate(delta[:n]))

