"""The memory plan: schedule, liveness, buffer classes, byte sizes and a peak-bytes estimate.

Backends read the plan instead of recomputing liveness: `frees[j]` are the values whose buffers can be
released after node j. The plan is naive for now (every value its own buffer, freed after its last use;
in-place reuse will be the `inplace` decision), so `saved_bytes` is 0.

Buffer classes (DESIGN "The Executable and Plan contract"): a user input is read-only; a donated input
may be overwritten and is released after its last use; a const is a closed-over array, read-only; a
workspace value lives from its node to its last use; a per-call output is fresh on every call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ember.tracer.ir import Graph, Namer, Node, Var

INPUT, DONATED, CONST, WORKSPACE, OUTPUT = "input", "donated", "const", "workspace", "output"
BUFFER_CLASSES = (INPUT, DONATED, CONST, WORKSPACE, OUTPUT)


@dataclass(frozen=True, eq=False)
class Plan:
    """How a scheduled graph uses memory. `frees[j]` is released after `schedule[j]` runs."""

    schedule: tuple[Node, ...]
    donated: tuple[int, ...]
    buffer_class: Mapping[Var, str]
    nbytes: Mapping[Var, int]
    last_use: Mapping[Var, int]
    frees: tuple[tuple[Var, ...], ...]
    peak_bytes: int
    saved_bytes: int = 0

    @property
    def buffers(self) -> int:
        """How many distinct buffers the plan uses (every value its own while nothing is in place)."""
        return len(self.buffer_class)

    def bytes_of(self, cls: str) -> int:
        return sum(self.nbytes[v] for v, c in self.buffer_class.items() if c == cls)

    def text(self, names: Namer | None = None) -> str:
        """The plan as text: totals, then per node the values it allocates and frees."""
        names = names or Namer()
        totals = ", ".join(f"{c} {self.bytes_of(c)}" for c in BUFFER_CLASSES if any(
            k == c for k in self.buffer_class.values()))
        lines = [f"# memory plan: peak {self.peak_bytes} bytes, {self.buffers} buffers, in-place saved "
                 f"{self.saved_bytes} bytes, donated inputs {list(self.donated)}",
                 f"#   bytes by class: {totals or 'none'}"]
        for j, node in enumerate(self.schedule):
            made = " ".join(f"{names(v)}:{self.buffer_class[v]}:{self.nbytes[v]}B" for v in node.outputs)
            freed = " ".join(names(v) for v in self.frees[j])
            lines.append(f"#   {j:3d} {node.prim.name:<20s} alloc {made or '-'}" + (f"  free {freed}" if freed else ""))
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


def _last_uses(graph: Graph) -> dict[Var, int]:
    """The index of the last node reading each Var (graph outputs count as read after the last node)."""
    last: dict[Var, int] = {}
    for j, node in enumerate(graph.nodes):
        for a in node.inputs:
            if isinstance(a, Var):
                last[a] = j
    end = len(graph.nodes)
    for v in graph.outputs:
        if isinstance(v, Var):
            last[v] = end
    return last


def plan_memory(graph: Graph, donate: Iterable[int] = (), inplace: bool = True) -> Plan:
    """The naive plan of `graph` run in node order; `donate` are flat input indices. (`inplace`, the
    buffer-reuse decision, is not implemented yet: every plan is naive.)"""
    donated = tuple(sorted({int(i) for i in donate}))
    bad = [i for i in donated if not 0 <= i < len(graph.inputs)]
    if bad:
        raise ValueError(f"donated input indices {bad} are out of range for a graph of {len(graph.inputs)} inputs")
    cls = _classes(graph, donated)
    nbytes = {v: v.aval.size * v.aval.dtype.itemsize for v in cls}
    last = _last_uses(graph)
    releasable = {DONATED, WORKSPACE}
    frees: list[list[Var]] = [[] for _ in graph.nodes]
    for j, node in enumerate(graph.nodes):  # values nobody reads die where they are made
        for v in node.outputs:
            if v not in last:
                last[v] = j
    for v, j in last.items():
        if cls[v] in releasable and j < len(graph.nodes):
            frees[j].append(v)
    order = {v: k for k, v in enumerate(cls)}
    frees = [sorted(f, key=order.__getitem__) for f in frees]
    return Plan(tuple(graph.nodes), donated, cls, nbytes, last, tuple(tuple(f) for f in frees),
                _peak(graph, cls, nbytes, frees))


def _peak(graph: Graph, cls: Mapping[Var, str], nbytes: Mapping[Var, int], frees) -> int:
    """Peak bytes live at once: inputs and consts for the whole call, each node's outputs from the
    node on; a node's operands and results coexist while it runs, then its `frees` are released."""
    live = sum(nbytes[v] for v, c in cls.items() if c in (INPUT, DONATED, CONST))
    peak = live
    for node, freed in zip(graph.nodes, frees):
        live += sum(nbytes[v] for v in node.outputs)
        peak = max(peak, live)
        live -= sum(nbytes[v] for v in freed)
    return peak


@dataclass(frozen=True)
class MemoryReport:
    """What `Lowered.memory()` returns: the plan's totals."""

    peak_bytes: int
    buffers: int
    saved_bytes: int
    input_bytes: int
    const_bytes: int
    output_bytes: int
    workspace_bytes: int

    @classmethod
    def of(cls, plan: Plan) -> MemoryReport:
        return cls(plan.peak_bytes, plan.buffers, plan.saved_bytes, plan.bytes_of(INPUT) + plan.bytes_of(DONATED),
                   plan.bytes_of(CONST), plan.bytes_of(OUTPUT), plan.bytes_of(WORKSPACE))
