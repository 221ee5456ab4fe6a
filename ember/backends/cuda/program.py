"""A scheduled graph and its memory plan as a CUDA program: the kernel source and the launches a call runs.

`build_program(graph, plan)` renders every scheduled node's kernel description (render.py; equal
descriptions once) and places every value as the plan says: an input's, const's or output's array, or
a fixed offset of the workspace (one region per plan buffer id, so in-place writes and pooled reuse are
the plan's); kernel temps and scratch share one region after the buffers, as on the CPU. Literal
operands become small arrays made once per executable. A control-flow node (cond, while, scan) is a
`ControlRun`: its bodies are programs of their own, built by recursion under `plan_memory(body)`,
their kernels part of this program's, and its loop buffers and its bodies' workspaces (one region for
all of them: bodies never run at once) take the node's place in the shared region (cuda/control.py).
`link(programs)` joins programs into one translation unit (equal kernels once: they are named by their
text's hash), so a test can compile many graphs with one compiler call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ember.backends.cuda import control, mathlib
from ember.backends.cuda.render import COMMON, CudaKernel, Gemm, Launch, Scratch, render_kernel
from ember.backends.kernel import check_inplace, node_kernel
from ember.passes.memory import OUTPUT, Plan, plan_memory
from ember.tracer.ir import Graph, Literal, Node, Var

ALIGN = 256  # workspace regions start at this alignment (cudaMalloc's)


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True)
class Where:
    """Where a value lives: ("in", k), ("out", i), ("const", k), ("literal", k) or ("ws", byte offset)."""

    kind: str
    at: int


@dataclass
class NodeRun:
    """One scheduled node: its launches, and where each of its kernel's buffers lives (temps at
    workspace offsets in the kernel region; scratch regions relative to `scratch`)."""

    launches: list
    where: dict  # kernel buffer name -> (Where, shape, dtype)
    scratch: int  # byte offset of the node's scratch in the workspace


@dataclass
class ControlRun:
    """A scheduled control-flow node, run by the host (cuda/control.py): where its operands and results
    live, its bodies' programs, its loop buffers (`control.loop_buffers`: each a workspace Where, shape
    and dtype) and the byte offset at which its bodies' workspace starts."""

    node: Node
    operands: list  # per node operand: its Where
    results: list  # per node output: its Where
    bodies: list  # Program per body, in `control.body_graphs` order
    buffers: list  # (Where, shape, dtype) per loop buffer
    bodies_at: int


@dataclass
class Program:
    graph: Graph
    kernels: dict[str, CudaKernel] = field(default_factory=dict)
    need: set = field(default_factory=set)
    runs: list = field(default_factory=list)  # NodeRun or ControlRun per scheduled node
    literals: list[np.ndarray] = field(default_factory=list)
    outputs: list = field(default_factory=list)  # per graph output: None (a node wrote it) or its source Where
    workspace_bytes: int = 0

    @property
    def copies(self) -> bool:
        """Whether some output is copied after the launches (an input, const, literal or repeat)."""
        return any(o is not None for o in self.outputs)


def link(programs) -> str:
    """The CUDA C of `programs` as one translation unit (each kernel and math function once), without
    the device prelude or the host header (the loader adds its own)."""
    kernels: dict[str, CudaKernel] = {}
    need: set = set()
    for p in programs:
        kernels.update(p.kernels)
        need |= p.need
    return COMMON + mathlib.math_source(sorted(need)) + "\n" + "\n".join(k.text for k in kernels.values())


def build_program(graph: Graph, plan: Plan) -> Program:
    """The program running `graph` under `plan` (its schedule is the launch order)."""
    prog = Program(graph)
    where = _place(graph, plan, prog)
    rendered_by: dict = {}
    top = prog.workspace_bytes
    region = 0
    for node in plan.schedule:
        if node.prim in control.CONTROL_PRIMS:
            run, end = _control_run(prog, node, where, top, plan.reuse)
            prog.runs.append(run)
            region = max(region, end - top)
            continue
        kernel, bound = node_kernel(node)
        check_inplace(node, kernel, bound, plan)
        aliased = frozenset((f"out{k}", f"in{j}") for k, v in enumerate(node.outputs) for j, a in enumerate(bound)
                            if isinstance(a, Var) and where.get(a) == where[v])
        key = (kernel, aliased)
        if key not in rendered_by:
            rendered_by[key] = render_kernel(kernel, aliased)
        r = rendered_by[key]
        for k in r.kernels:
            prog.kernels.setdefault(k.name, k)
        prog.need |= r.need
        names: dict = {}
        for b, a in zip(kernel.inputs, bound):
            names[b.name] = (_literal(prog, a) if isinstance(a, Literal) else where[a], b.shape, b.dtype)
        for b, v in zip(kernel.outputs, node.outputs):
            names[b.name] = (where[v], b.shape, b.dtype)
        offset = top
        for t in kernel.temps:
            names[t.name] = (Where("ws", offset), t.shape, t.dtype)
            offset += _align(max(int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize, 1))
        prog.runs.append(NodeRun(list(r.launches), names, offset))
        region = max(region, offset - top + _align(r.scratch_bytes))
    prog.workspace_bytes = top + region
    return prog


def _control_run(prog: Program, node: Node, where: dict, top: int, reuse: bool) -> tuple[ControlRun, int]:
    """Control node `node` placed at workspace offset `top` (its loop buffers, then its bodies' region),
    its bodies built as programs (planned with in-place reuse as the graph's plan was) whose kernels
    join `prog`'s; returns the run and the end of its region."""
    operands = [_literal(prog, a) if isinstance(a, Literal) else where[a] for a in node.inputs]
    offset, buffers = top, []
    for shape, dtype in control.loop_buffers(node):
        buffers.append((Where("ws", offset), shape, dtype))
        offset += _align(max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1))
    bodies = [build_program(g, plan_memory(g, inplace=reuse)) for g in control.body_graphs(node)]
    for body in bodies:
        prog.kernels.update(body.kernels)
        prog.need |= body.need
    end = offset + max((b.workspace_bytes for b in bodies), default=0)
    return ControlRun(node, operands, [where[v] for v in node.outputs], bodies, buffers, offset), end


def _literal(prog: Program, lit: Literal) -> Where:
    prog.literals.append(np.asarray(lit.val, dtype=lit.dtype).reshape(1))
    return Where("literal", len(prog.literals) - 1)


def _place(graph: Graph, plan: Plan, prog: Program) -> dict:
    """Each value's Where, and the outputs no node writes into their own array (copied after the run)."""
    where: dict = {}
    by_buffer: dict = {}
    for k, v in enumerate(graph.inputs):
        where[v] = Where("in", k)
        by_buffer.setdefault(plan.buffer[v], where[v])
    for i, v in enumerate(graph.outputs):
        if isinstance(v, Var) and plan.buffer_class.get(v) == OUTPUT:
            where.setdefault(v, Where("out", i))
    for k, v in enumerate(graph.consts):
        where[v] = Where("const", k)
        by_buffer.setdefault(plan.buffer[v], where[v])
    size: dict = {}
    for node in plan.schedule:
        for v in node.outputs:
            if v not in where and plan.buffer[v] not in by_buffer:
                size[plan.buffer[v]] = max(size.get(plan.buffer[v], 0), plan.nbytes[v])
    offsets, top = {}, 0
    for bid, n in size.items():
        offsets[bid], top = top, top + _align(max(n, 1))
    for node in plan.schedule:
        for v in node.outputs:
            if v not in where:
                where[v] = by_buffer.get(plan.buffer[v]) or Where("ws", offsets[plan.buffer[v]])
    prog.workspace_bytes = top
    written: set = set()
    for i, v in enumerate(graph.outputs):
        if isinstance(v, Literal):
            prog.outputs.append(_literal(prog, v))
        elif where.get(v) == Where("out", i) and v not in written:
            written.add(v)
            prog.outputs.append(None)
        else:
            prog.outputs.append(where[v])
    return where


__all__ = ["ControlRun", "Gemm", "Launch", "NodeRun", "Program", "Scratch", "Where", "build_program", "link"]
