"""The optimized graph and its memory plan as one LLVM module with one exported entry function.

`i32 @ember_entry(ptr args)` takes a Python tuple (inputs, outputs, workspace, consts: all
ndarrays) and reads each array's data pointer natively from NumPy's PyArrayObject, so a call costs
one foreign call: no data pointer is fetched in Python (FACTS.md). It first checks each input (exact
ndarray type, dtype number in native byte order, rank, shape, C-contiguous and aligned) and returns k+1
when input k fails, so the caller converts it and calls again; then it runs every node of the
schedule (each a kernel function from `loops`, one per distinct kernel description), writes
outputs that are inputs, consts, literals or repeats by copying, and returns 0. A long schedule
runs as segment functions of `SEGMENT_NODES` nodes, each reading the data pointers it uses from the
argument tuple again, so LLVM never sees one huge function.

A control-flow node (cond, while, scan) runs natively in the function (control.py): each of its
bodies becomes an internal function `void @body<k>(ptr ins, ptr outs, ptr ws)` emitted by the same
builder under the body's own memory plan, its inputs read through `ins` (read-only, unchecked), its
outputs written through `outs`, its values in `ws`, a part of the caller's scratch. Bodies nest.

Memory follows the plan: a value lives in its input's, const's or output's array, or at a fixed
offset of the workspace (one region per plan buffer id, so in-place writes and pooled reuse are the
plan's); kernel temps and scratch share one region after the buffers. The one process address the
code needs (the ndarray type) is an external symbol bound at link time, so the IR text, and the
object code cached from it, hold no process-specific value.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from llvmlite import ir

from ember.backends.kernel import Kernel, check_inplace, node_kernel
from ember.backends.llvm import control, jit, loops
from ember.backends.llvm import types as T
from ember.backends.llvm.entry import (
    ALIGN,
    ARRAY_DATA,
    ARRAY_DESCR,
    ARRAY_DIMS,
    ARRAY_FLAGS,
    ARRAY_NDIM,
    DESCR_BYTEORDER,
    DESCR_TYPE_NUM,
    EMBER_ARRAY_TYPE,
    ENTRY,
    NPY_ALIGNED,
    NPY_C_CONTIGUOUS,
    PYARRAY_TYPE,
    SYMBOLS,
    TUPLE_ITEMS,
)
from ember.backends.llvm.scalar import constant
from ember.passes.memory import OUTPUT, WORKSPACE, Plan, plan_memory
from ember.tracer.array import Array
from ember.tracer.ir import Graph, Literal, Node, Var
from ember.tracer.prims import CONTROL_PRIMS

# a schedule longer than this is emitted as functions of this many nodes each, called in order: LLVM's
# time on one function grows faster than its size (the naive-loop cosine gradient, 17,923 nodes: 25 s
# in one function)
SEGMENT_NODES = 256
# past this many nodes, kernels are called rather than inlined (vectorized once, not at every call):
# the naive-loop cosine gradient (17,923 nodes) compiles in 8 s instead of 21 s and runs 1.2x slower;
# its forward pass (4,419 nodes) keeps inlining: 4.9 s instead of 2.7 s, but 2.5x faster calls
INLINE_KERNELS_UP_TO = 8192
# elements a call must touch before it releases the GIL (below, the release costs more than it gives)
GIL_RELEASE_ELEMENTS = 1 << 16


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN




@dataclass
class GraphModule:
    """The entry's module and what a call needs beyond the graph (its inputs, outputs and consts
    give the argument tuple's layout; `SYMBOLS` the addresses to bind)."""

    ir: str
    workspace_bytes: int
    release_gil: bool = False
    kernels: list[str] = field(default_factory=list)  # str() of each distinct kernel, for dumps


class _Pointers:
    """Each value's data pointer, made in the function being emitted on first use there."""

    def __init__(self, builder: _Builder, loc: dict[Var, tuple[str, int]]):
        self.builder, self.loc = builder, loc

    def __getitem__(self, v: Var) -> ir.Value:
        return self.builder.data(self.loc[v])


@dataclass
class _Shared:
    """What the functions of one module share: the module, its kernel functions (one per distinct
    kernel description) and its body functions (one per distinct body graph, by fingerprint)."""

    module: ir.Module
    kernel_fns: dict[tuple[Kernel, frozenset], ir.Function] = field(default_factory=dict)
    bodies: dict[str, tuple[ir.Function, int]] = field(default_factory=dict)
    body_texts: list[str] = field(default_factory=list)
    has_control: bool = False


class _Builder:
    """Emits one function computing `graph` under `plan`: the entry (`body` None: arrays from the
    argument tuple, inputs checked) or a body function `void @body(ptr ins, ptr outs, ptr ws)` of a
    control-flow node (`ins`/`outs`: arrays of data pointers, trusted). One emitter for both: a
    value's location names its source ("item" k, "in" k, "out" k or "ws" offset)."""

    def __init__(self, graph: Graph, plan: Plan, shared: _Shared | None = None, body: str | None = None):
        self.graph, self.plan = graph, plan
        self.shared = shared or _Shared(ir.Module("ember"))
        self.module = self.shared.module
        self.kernel_fns = self.shared.kernel_fns
        self.body = body
        if body is None:
            self.fn = ir.Function(self.module, ir.FunctionType(T.I32, [T.PTR]), ENTRY)
            names = ("args",)
        else:
            self.fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [T.PTR] * 3), body)
            self.fn.linkage = "internal"
            names = ("ins", "outs", "ws")
        for arg, name in zip(self.fn.args, names):
            arg.name = name
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.n_in, self.n_out = len(graph.inputs), len(graph.outputs)
        self.ws_index = self.n_in + self.n_out
        self.work_elements = 0
        self.params = tuple(self.fn.args)  # the arguments of the function being emitted
        self.made: dict[tuple[str, int], ir.Value] = {}  # data pointers made in that function
        self.node_kernels: dict[int, tuple[Kernel, list]] = {}

    # --- reading the argument tuple, or the pointer arrays of a body ---
    def item(self, k: int) -> ir.Value:
        at = self.b.gep(self.params[0], [T.index(TUPLE_ITEMS + 8 * k)], inbounds=True, source_etype=T.I8)
        return self.b.load(at, typ=T.PTR)

    def data(self, where: tuple[str, int]) -> ir.Value:
        """The pointer at `where`: ("item", k), argument k's data; ("in", k) or ("out", k), pointer k of
        a body's `ins` or `outs`; ("ws", offset), into the workspace. Made once per function, on first
        use: every use follows it in straight-line code (control.py makes the pointers a loop or branch
        uses before it, and its exit block dominates the rest)."""
        got = self.made.get(where)
        if got is None:
            kind, n = where
            if kind == "item":
                got = self.field(self.item(n), ARRAY_DATA, T.PTR)
            elif kind in ("in", "out"):
                array = self.params[0 if kind == "in" else 1]
                got = self.b.load(self.b.gep(array, [T.index(n)], inbounds=True, source_etype=T.PTR), typ=T.PTR)
            else:
                got = self.b.gep(self.ws, [T.index(n)], inbounds=True, source_etype=T.I8)
            self.made[where] = got
        return got

    def output_loc(self, i: int) -> tuple[str, int]:
        return ("item", self.n_in + i) if self.body is None else ("out", i)

    @property
    def ws(self) -> ir.Value:
        return self.data(("item", self.ws_index)) if self.body is None else self.params[2]

    def field(self, obj: ir.Value, offset: int, typ: ir.Type) -> ir.Value:
        return self.b.load(self.b.gep(obj, [T.index(offset)], inbounds=True, source_etype=T.I8), typ=typ)

    def symbol(self, name: str, obj: object) -> ir.Value:
        if SYMBOLS.get(name) is not obj:
            raise ValueError(f"{name!r} is not in graph.SYMBOLS, which a cached module binds without its IR")
        g = self.module.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.module, T.I8, name)
            g.linkage = "external"
        return g

    def check_input(self, k: int, v: Var, obj: ir.Value) -> None:
        """Return k+1 unless argument k is an aligned C-contiguous ndarray (or ember Array) of v's shape and dtype in
        native byte order (dtypes compare by type number: equal dtypes may be distinct objects)."""
        b = self.b
        aval = v.aval
        bad = self.fn.append_basic_block(f"bad{k}")
        is_array = self.fn.append_basic_block(f"array{k}")
        typ = self.field(obj, 8, T.PTR)
        exact = b.or_(b.icmp_unsigned("==", typ, self.symbol(PYARRAY_TYPE, np.ndarray)),
                      b.icmp_unsigned("==", typ, self.symbol(EMBER_ARRAY_TYPE, Array)))
        b.cbranch(exact, is_array, bad)
        b.position_at_end(is_array)  # only an ndarray's fields are read
        descr = self.field(obj, ARRAY_DESCR, T.PTR)
        num = self.field(descr, DESCR_TYPE_NUM, T.I32)
        ok = b.icmp_signed("==", num, ir.Constant(T.I32, np.dtype(aval.dtype).num))
        order = self.field(descr, DESCR_BYTEORDER, T.I8)
        ok = b.and_(ok, b.icmp_unsigned("!=", order, ir.Constant(T.I8, ord(">"))))
        flags = self.field(obj, ARRAY_FLAGS, T.I32)
        need = ir.Constant(T.I32, NPY_C_CONTIGUOUS | NPY_ALIGNED)
        ok = b.and_(ok, b.icmp_unsigned("==", b.and_(flags, need), need))
        ndim = self.field(obj, ARRAY_NDIM, T.I32)
        ok = b.and_(ok, b.icmp_signed("==", ndim, ir.Constant(T.I32, len(aval.shape))))
        good = self.fn.append_basic_block(f"shape{k}")
        b.cbranch(ok, good, bad)
        b.position_at_end(bad)
        b.ret(ir.Constant(T.I32, k + 1))
        b.position_at_end(good)
        if aval.shape:
            dims = self.field(obj, ARRAY_DIMS, T.PTR)
            same = ir.Constant(T.I1, 1)
            for a, n in enumerate(aval.shape):
                d = b.load(b.gep(dims, [T.index(a)], inbounds=True, source_etype=T.I64), typ=T.I64)
                same = b.and_(same, b.icmp_signed("==", d, T.index(n)))
            nxt = self.fn.append_basic_block(f"ok{k}")
            b.cbranch(same, nxt, bad)
            b.position_at_end(nxt)

    # --- the plan's buffers ---
    def pointers(self) -> _Pointers:
        """Where every graph value lives: its argument's array (the entry checks its inputs here,
        first) or its pointer in a body's `ins`/`outs`, or its workspace buffer."""
        g, plan = self.graph, self.plan
        loc: dict[Var, tuple[str, int]] = {}
        by_buffer: dict[int, tuple[str, int]] = {}
        for k, v in enumerate(g.inputs):
            if self.body is None:
                self.check_input(k, v, self.item(k))
            loc[v] = ("item", k) if self.body is None else ("in", k)
            by_buffer.setdefault(plan.buffer[v], loc[v])
        for i, v in enumerate(g.outputs):
            if isinstance(v, Var) and plan.buffer_class.get(v) == OUTPUT:
                loc.setdefault(v, self.output_loc(i))
        for k, v in enumerate(g.consts):
            loc[v] = ("item", self.ws_index + 1 + k)
            by_buffer.setdefault(plan.buffer[v], loc[v])
        offsets: dict[int, int] = {}
        size: dict[int, int] = {}
        loc.update(self.hosted_by_outputs(loc))
        for node in plan.schedule:
            for v in node.outputs:
                if v not in loc and plan.buffer[v] not in by_buffer:
                    size[plan.buffer[v]] = max(size.get(plan.buffer[v], 0), plan.nbytes[v])
        top = 0
        for bid, n in size.items():
            offsets[bid], top = top, top + _align(max(n, 1))
        self.kernel_region = top
        for node in plan.schedule:
            for v in node.outputs:
                if v not in loc:
                    loc[v] = by_buffer.get(plan.buffer[v]) or ("ws", offsets[plan.buffer[v]])
        return _Pointers(self, loc)

    def hosted_by_outputs(self, loc: dict[Var, tuple[str, int]]) -> dict[Var, tuple[str, int]]:
        """Workspace values that live in the array of an output computed from them in place: the value
        dies at the output's node, has its own buffer and the output's shape and dtype, and the
        kernel reads it only where it writes the output (what the plan's in-place rule asks, which
        outputs never get: they are fresh arrays). The output's pass then reads and writes one hot
        array (the eam gradient's exp values, then their scaling: 10% faster at 10**6)."""
        plan, position = self.plan, {id(n): j for j, n in enumerate(self.graph.nodes)}
        owners = Counter(plan.buffer.values())
        hosted: dict[Var, tuple[str, int]] = {}
        for node in plan.schedule:
            if node.prim in CONTROL_PRIMS:  # no kernel: its bodies read the operands while it writes
                continue
            kernel, bound = self.kernel_of(node)
            for k, v in enumerate(node.outputs):
                if plan.buffer_class.get(v) != OUTPUT or v in plan.inplace:  # an output: its own fresh array
                    continue
                for j, u in enumerate(bound):
                    if (isinstance(u, Var) and u not in hosted and plan.buffer_class.get(u) == WORKSPACE
                            and owners[plan.buffer[u]] == 1 and plan.last_use.get(u) == position[id(node)]
                            and (u.aval.shape, u.aval.dtype) == (v.aval.shape, v.aval.dtype)
                            and sum(a is u for a in bound) == 1
                            and (f"out{k}", f"in{j}") in kernel.shareable):
                        hosted[u] = loc[v]
                        break
        return hosted

    def kernel_of(self, node: Node) -> tuple[Kernel, list]:
        found = self.node_kernels.get(id(node))
        if found is None:
            found = self.node_kernels[id(node)] = node_kernel(node)
        return found

    # --- nodes ---
    def literal_ptr(self, lit: Literal) -> ir.Value:
        g = ir.GlobalVariable(self.module, T.memory_type(lit.dtype), self.module.get_unique_name("lit"))
        g.linkage = "internal"
        g.global_constant = True
        value = constant(lit.val, lit.dtype)
        g.initializer = ir.Constant(T.I8, int(value.constant)) if lit.dtype.kind == "b" else value
        return g

    def kernel_fn(self, kernel: Kernel, aliased: frozenset[tuple[str, str]]) -> ir.Function:
        """The function computing `kernel` for calls passing one buffer for each (output, input) pair
        in `aliased` (those pointers are not noalias)."""
        fn = self.kernel_fns.get((kernel, aliased))
        if fn is None:
            fn = self.kernel_fns[kernel, aliased] = loops.kernel_function(
                self.module, kernel, f"kernel{len(self.kernel_fns)}", aliased=aliased)
            if len(self.plan.schedule) > INLINE_KERNELS_UP_TO:
                fn.attributes.add("noinline")
        return fn

    def run_node(self, node: Node, ptr: _Pointers) -> int:
        """Call `node`'s kernel, or run its loop or branch; the bytes of workspace its temps and
        scratch need."""
        if node.prim in CONTROL_PRIMS:
            self.shared.has_control = True
            return control.run_control(self, node, ptr)
        kernel, bound = self.kernel_of(node)
        args = [ptr[a] if isinstance(a, Var) else self.literal_ptr(a) for a in bound]
        offset = self.kernel_region
        check_inplace(node, kernel, bound, self.plan)
        args += [ptr[v] for v in node.outputs]
        for t in kernel.temps:
            args.append(self.b.gep(self.ws, [T.index(offset)], inbounds=True, source_etype=T.I8))
            offset += _align(max(int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize, 1))
        args.append(self.b.gep(self.ws, [T.index(offset)], inbounds=True, source_etype=T.I8))
        offset += _align(loops.scratch_bytes(kernel))
        aliased = frozenset((f"out{k}", f"in{j}") for k, v in enumerate(node.outputs) for j, a in enumerate(bound)
                            if isinstance(a, Var) and ptr.loc.get(a) == ptr.loc[v])
        self.b.call(self.kernel_fn(kernel, aliased), args)
        self.work_elements += sum(v.aval.size for v in node.outputs) + sum(
            a.aval.size for a in node.inputs if isinstance(a, Var))
        return offset - self.kernel_region

    def segment(self, k: int, nodes, ptr: _Pointers) -> int:
        """Emit `nodes` as function `<fn>.segment<k>`, taking the arguments of the function being
        emitted and called from it here; its scratch bytes."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [T.PTR] * len(self.params)),
                         f"{self.fn.name}.segment{k}" if self.body else f"segment{k}")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        self.b.call(fn, list(self.params))
        outer = (self.b, self.params, self.made)
        self.b, self.params, self.made = ir.IRBuilder(fn.append_basic_block("entry")), tuple(fn.args), {}
        try:
            scratch = max(self.run_node(node, ptr) for node in nodes)
            self.b.ret_void()
        finally:
            self.b, self.params, self.made = outer
        return scratch

    def body_function(self, body: Graph, role: str) -> tuple[ir.Function, int]:
        """The function computing `body` (a control-flow node's subgraph) under its own memory plan,
        and the workspace bytes it needs; made once per distinct body in the module."""
        key = body.fingerprint()
        found = self.shared.bodies.get(key)
        if found is None:
            name = f"body{len(self.shared.body_texts)}"  # numbered before the bodies nested in it
            self.shared.body_texts.append(f"{name}: {role}\n{body}")
            found = self.shared.bodies[key] = _Builder(body, plan_memory(body), self.shared, name).emit()
        return found

    def memcpy(self, dst: ir.Value, src: ir.Value, nbytes: int) -> None:
        if nbytes:
            fn = self.module.declare_intrinsic("llvm.memcpy", [T.PTR, T.PTR, T.I64])
            self.b.call(fn, [dst, src, T.index(nbytes), ir.Constant(T.I1, 0)])

    def copy_outputs(self, ptr: _Pointers) -> None:
        """Outputs no node wrote into their own array: copies of inputs, consts and repeats; literals."""
        written: set[Var] = set()
        for i, v in enumerate(self.graph.outputs):
            dst = self.data(self.output_loc(i))
            if isinstance(v, Literal):
                T.store(self.b, constant(v.val, v.dtype), dst, T.index(0), v.dtype)
                continue
            if self.plan.buffer_class.get(v) == OUTPUT and v not in written:
                written.add(v)
                continue
            self.memcpy(dst, ptr[v], v.aval.size * v.aval.dtype.itemsize)

    def emit(self) -> tuple[ir.Function, int]:
        """Emit the function: every node of the schedule, then the outputs no node wrote; the
        function and the workspace bytes it needs."""
        ptr = self.pointers()
        schedule = self.plan.schedule
        if len(schedule) <= SEGMENT_NODES:
            scratch = max((self.run_node(node, ptr) for node in schedule), default=0)
        else:
            scratch = max(self.segment(k, schedule[start:start + SEGMENT_NODES], ptr)
                          for k, start in enumerate(range(0, len(schedule), SEGMENT_NODES)))
        self.copy_outputs(ptr)
        if self.body is None:
            self.b.ret(ir.Constant(T.I32, 0))
        else:
            self.b.ret_void()
        return self.fn, self.kernel_region + scratch

    def build(self) -> GraphModule:
        """The entry's module (with every kernel and body function it calls)."""
        _, workspace = self.emit()
        shared = self.shared
        # a loop's work is unknown when compiling: a graph with one releases the GIL
        release = self.work_elements >= GIL_RELEASE_ELEMENTS or shared.has_control
        return GraphModule(_prefer_wide_vectors(str(self.module)), workspace, release,
                           [str(k) for k, _ in shared.kernel_fns] + shared.body_texts)


_DEFINE = re.compile(r'^(define .*\))$', re.MULTILINE)


def _prefer_wide_vectors(text: str) -> str:
    """Every function (kernels are inlined into the entry) uses 512-bit vectors where the host has
    AVX-512 (LLVM prefers 256 bits; math loops measured 1.3-1.9x faster in cache). llvmlite cannot
    spell these string attributes, so they are added to the text."""
    if "+avx512f" not in jit.target().features:
        return text
    return _DEFINE.sub(r'\1 "prefer-vector-width"="512" "min-legal-vector-width"="512"', text)


def build_module(graph: Graph, plan: Plan) -> GraphModule:
    """The LLVM module of `graph` run under `plan` (the plan's schedule is the node order)."""
    return _Builder(graph, plan).build()
