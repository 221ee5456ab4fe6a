"""A kernel description's steps as LLVM IR: `kernel_function` defines one internal function per kernel.

Each `Loop` step becomes a loop nest over its space, row-major with the last axis innermost, so
loads and stores at the identity index are contiguous and vectorize. Adjacent axes whose index maps
are linear in them alike collapse into one loop; an op is computed once, at the outermost loop level
all its inputs are known (hoisted). Reductions keep their accumulators in registers when the
innermost axis is reduced (combines carry `reassoc`, so they vectorize; float sums run in blocks
folded into a compensated float64 total, at least as accurate as NumPy's pairwise sum; float max/min
vectorize as plain compares beside a NaN flag), else in a buffer over the kept index (the output, or
scratch when the accumulator dtype differs) while the inner loop runs over the contiguous kept axis.
Contractions go to `dot`, the argreduce and scatter steps to `indexing`; the scalar ops of every
primitive come from `scalar`.

A large loop runs in chunks of its outermost level on the native thread pool (`pool.py`): the chunk
body is a function of its own, called through `ember_parallel_for`. How a loop is chunked depends on
its shape and ops alone, never on the thread count, and a reduction over the chunked level keeps one
partial result per chunk, combined in chunk order after the pool is done: results are bitwise
identical whatever the number of threads (`_split`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ember.backends import kernel_index as ix
from ember.backends.kernel import Contraction, Kernel, Loop
from ember.backends.kernel_index import Ix
from ember.backends.llvm import pool
from ember.backends.llvm.pool import PARALLEL_FOR
from ember.backends.llvm.types import I1, I8, I64, PTR, index, load, memory_type, store, value_type

BLOCK = 256  # float sums: elements per block summed in registers before the float64 total
PARTIAL_SLOT = 24  # bytes of scratch per reduction and chunk: total (8), compensation (8), NaN flag
ALIGN = 64
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_BOOL = np.dtype(bool)


def kernel_function(module: ir.Module, kernel: Kernel, name: str, scalar=None,
                    aliased: frozenset[tuple[str, str]] = frozenset()) -> ir.Function:
    """Define `internal void @name(ptr in0.., ptr out0.., ptr t0.., ptr scratch)` computing `kernel`;
    `scratch` must hold `scratch_bytes(kernel)` bytes, 64-byte aligned. `scalar` is the scalar op
    table (a module with emit_op(builder, op, args, arg_dtypes), constant, convert; by default
    ember.backends.llvm.scalar). The module must carry the target's data layout: without it LLVM's
    vectorizer has no cost model and every loop stays scalar. `aliased` names the (output, input)
    pairs the caller passes one buffer for (an in-place write): neither is marked noalias."""
    if scalar is None:
        from ember.backends.llvm import scalar
    buffers = {b.name: b for b in kernel.inputs + kernel.outputs + kernel.temps}
    names = list(buffers) + ["scratch"]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * len(names)), name)
    fn.linkage = "internal"
    free = no_alias(kernel, aliased)
    for arg, n in zip(fn.args, names):
        arg.name = n
        if n in free:
            arg.add_attribute("noalias")
    entry = fn.append_basic_block("entry")
    builder = ir.IRBuilder(fn.append_basic_block("start"))
    shared = {i: o for o, i in aliased}
    ctx = _Context(builder, ir.IRBuilder(entry), buffers, _pointers(names, fn.args, shared), scalar, shared)
    for step in kernel.steps:
        _emit_step(ctx, step)
    builder.ret_void()
    ctx.allocas.branch(fn.basic_blocks[1])
    return fn


def scratch_bytes(kernel: Kernel) -> int:
    """Bytes of scratch the kernel's steps need (they run one after another, so they share it)."""
    buffers = {b.name: b for b in kernel.inputs + kernel.outputs + kernel.temps}
    return max((_step_scratch(step, buffers) for step in kernel.steps), default=0)


@dataclass
class _Context:
    builder: ir.IRBuilder
    allocas: ir.IRBuilder  # appends to the entry block, so mem2reg promotes accumulators
    buffers: dict
    ptrs: dict
    scalar: object
    shared: dict  # input -> the output the caller passes the same buffer for (an in-place write)


def _pointers(names: list[str], args, shared: dict) -> dict:
    """Parameter name -> its pointer; an input sharing an output's buffer reads through the output's
    pointer, so LLVM sees one pointer (with two, its vectorizer checks them for overlap at run time,
    finds it, and runs the scalar loop)."""
    ptrs = dict(zip(names, args))
    for i, o in shared.items():
        ptrs[i] = ptrs[o]
    return ptrs


def _emit_step(ctx: _Context, step) -> None:
    if isinstance(step, Loop):
        renderer = _LoopRenderer(ctx, step)
        if renderer.split is None:
            renderer.render()
        else:
            renderer.render_parallel()
    elif isinstance(step, Contraction):
        from ember.backends.llvm import dot
        dot.emit_contraction(ctx.builder, step, ctx.buffers, ctx.ptrs, ctx.ptrs["scratch"])
    else:
        from ember.backends.llvm import indexing
        indexing.emit_step(ctx.builder, step, ctx.buffers, ctx.ptrs, ctx.ptrs["scratch"])


def _step_scratch(step, buffers: dict) -> int:
    if isinstance(step, Loop):
        split = loop_split(step, buffers)
        partials = _round_up(split.chunks * len(step.reductions) * PARTIAL_SLOT) if split and split.partial else 0
        return sum(_round_up(n) for _, n in _memory_accumulators(step, buffers)) + partials
    if isinstance(step, Contraction):
        from ember.backends.llvm import dot
        return _round_up(dot.contraction_scratch_bytes(step, buffers))
    from ember.backends.llvm import indexing
    return _round_up(indexing.step_scratch_bytes(step, buffers))


def _round_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


# --- which pointers may be marked noalias -----------------------------------------------------------

def no_alias(kernel: Kernel, aliased: frozenset[tuple[str, str]] = frozenset()) -> set[str]:
    """Parameters LLVM may assume alias nothing else: temps and scratch always; inputs and outputs
    unless the call passes one buffer for an (output, input) pair in `aliased` (noalias there let
    LLVM move a store of the output before a load of the input: a miscompile the random programs
    found), or an output and an input of its shape and dtype are not `in_place_safe`."""
    free = {t.name for t in kernel.temps} | {"scratch"}
    risky = {name for pair in aliased for name in pair}
    for o in kernel.outputs:
        for i in kernel.inputs:
            if (i.shape, i.dtype) == (o.shape, o.dtype) and not in_place_safe(kernel, o.name, i.name):
                risky |= {o.name, i.name}
    return free | {b.name for b in kernel.inputs + kernel.outputs if b.name not in risky}


def in_place_safe(kernel: Kernel, out: str, inp: str) -> bool:
    """Whether output `out` may share input `inp`'s buffer: every write of `out` is a store at the
    identity index in a loop that reads `inp` only there, and no later step reads `inp`."""
    written = False
    for step in kernel.steps:
        if not isinstance(step, Loop):
            if not isinstance(step, Contraction) or step.out == out or (written and inp in (step.lhs, step.rhs)):
                return False
            continue
        identity = tuple(ix.var(a, n) for a, n in enumerate(step.space))
        writes = any(s.buffer == out for s in step.stores)
        if any(r.out == out for r in step.reductions) or any(
                s.buffer == out and s.index != identity for s in step.stores):
            return False
        for o in step.ops:
            if o.prim == "load" and o.param("buffer") == inp:
                if (writes or written) and o.param("index") != identity:
                    return False
                if written and not writes:
                    return False
        written |= writes
    return True


# --- index expressions as linear forms --------------------------------------------------------------

def _affine(x: Ix) -> tuple[dict, dict, int]:
    """x = sum(coef * loop var) + sum(coef * atom) + const: ({axis: coef}, {atom: coef}, const)."""
    if x.op == "var":
        return {x.args[0]: 1}, {}, 0
    if x.op == "const" and not isinstance(x.args[0], bool):
        return {}, {}, x.args[0]
    if x.op == "add":
        coefs, atoms, k = {}, {}, 0
        for t in x.args:
            c, a, tk = _affine(t)
            for key, v in c.items():
                coefs[key] = coefs.get(key, 0) + v
            for key, v in a.items():
                atoms[key] = atoms.get(key, 0) + v
            k += tk
        return coefs, atoms, k
    if x.op == "mul":
        c, a, k = _affine(x.args[0])
        m = x.args[1]
        return {key: v * m for key, v in c.items()}, {key: v * m for key, v in a.items()}, k * m
    return {}, {x: 1}, 0


def _vars_in(x: Ix) -> set[int]:
    if x.op == "var":
        return {x.args[0]}
    return set().union(*(_vars_in(a) for a in x.args if isinstance(a, Ix)))


def _offset(index: tuple, shape: tuple) -> Ix:
    """The flat C-order element offset of `index` into an array of `shape`."""
    stride, terms = 1, []
    for i, n in reversed(list(zip(index, shape))):
        terms.append(ix.mul(i, stride))
        stride *= n
    return ix.add(*terms) if terms else ix.const(0)


def _kept_offset(loop: Loop) -> Ix:
    kept = [(ix.var(a, n), n) for a, n in enumerate(loop.space) if a not in loop.reduce_axes]
    return _offset(tuple(v for v, _ in kept), tuple(n for _, n in kept))


def _memory_accumulators(loop: Loop, buffers: dict) -> list:
    """(reduction, scratch bytes) for reductions accumulated in scratch: those kept in memory (the
    innermost loop runs over a kept axis) whose accumulator dtype differs from their buffer's."""
    if _register_mode(loop):
        return []
    kept = int(np.prod([n for a, n in enumerate(loop.space) if a not in loop.reduce_axes], dtype=np.int64))
    return [(r, kept * r.acc_dtype.itemsize) for r in loop.reductions
            if memory_type(r.acc_dtype) != memory_type(buffers[r.out].dtype)]


def _register_mode(loop: Loop) -> bool:
    """Reductions accumulate in registers when no kept axis is inside a reduced one (after dropping
    axes of extent 1): then the innermost loop is a reduction over a contiguous axis."""
    axes = [a for a, n in enumerate(loop.space) if n > 1]
    return not loop.reductions or not axes or axes[-1] in loop.reduce_axes


# --- the loop nest ----------------------------------------------------------------------------------

@dataclass
class _Acc:
    """A register reduction's accumulator slots (allocas) and where its result goes."""

    total: ir.Value
    offset: ir.Value
    comp: ir.Value | None = None  # float sums: the compensation of the float64 total
    partial: ir.Value | None = None  # float sums: the current block's sum
    nan: ir.Value | None = None  # float max/min: whether a NaN was seen


def _nan_flagged(r) -> bool:
    return r.combine in ("max", "min") and r.acc_dtype.kind == "f"


@dataclass
class _Level:
    axes: tuple[int, ...]  # the loop axes this level runs over, collapsed, outer to inner
    extent: int
    block: int = 0  # > 0: run in blocks of this many iterations (float sums)


@dataclass(frozen=True)
class Split:
    """How a loop runs on the thread pool: nest level `level` in `chunks` chunks of `chunk` iterations
    (each chunk runs the levels outside it whole); `partial`: that level is reduced (a whole-array
    reduction), so each chunk keeps partial results in scratch."""

    chunk: int
    chunks: int
    partial: bool
    level: int = 0


@dataclass(frozen=True)
class _Nest:
    """The loop nest a Loop step runs as: its levels, accumulator mode, element offsets and split."""

    memory: bool  # reductions accumulate in memory (a kept axis is inside a reduced one)
    loads: dict  # op id -> flat element offset of the load
    stores: list  # (store, flat element offset)
    kept: Ix  # the flat offset of the kept index
    levels: list
    split: Split | None


def _nest(loop: Loop, buffers: dict) -> _Nest:
    memory = not _register_mode(loop)
    loads = {k: _offset(o.param("index"), buffers[o.param("buffer")].shape)
             for k, o in enumerate(loop.ops) if o.prim == "load"}
    stores = [(s, _offset(s.index, buffers[s.buffer].shape)) for s in loop.stores]
    kept = _kept_offset(loop)
    exprs = list(loads.values()) + [off for _, off in stores] + [kept]
    exprs += [o.param("index") for o in loop.ops if o.prim == "index"]
    levels = _levels(loop, memory, exprs)
    return _Nest(memory, loads, stores, kept, levels, _split(loop, memory, levels, stores))


def loop_split(loop: Loop, buffers: dict) -> Split | None:
    """How `loop` runs on the thread pool, or None when it runs on the calling thread alone."""
    return _nest(loop, buffers).split


def _levels(loop: Loop, memory: bool, exprs) -> list[_Level]:
    """Loop levels, outer to inner: adjacent axes that every index form reads alike collapse into one;
    in register mode the reduced axes go innermost, and a float sum's inner level runs in blocks."""
    nonlinear = set().union(*(_vars_in(a) for e in exprs for a in _affine(e)[1]))
    forms = [_affine(e)[0] for e in exprs]
    axes = [a for a, n in enumerate(loop.space) if n > 1]
    if not memory:
        axes = [a for a in axes if a not in loop.reduce_axes] + [a for a in axes if a in loop.reduce_axes]
    levels: list[_Level] = []
    for a in axes:
        n = loop.space[a]
        last = levels[-1] if levels else None
        if last is not None and a not in nonlinear and not nonlinear & set(last.axes) \
                and (a in loop.reduce_axes) == (last.axes[0] in loop.reduce_axes) \
                and all(f.get(last.axes[-1], 0) == f.get(a, 0) * n for f in forms):
            levels[-1] = _Level(last.axes + (a,), last.extent * n)
        else:
            levels.append(_Level((a,), n))
    partials = not memory and bool(levels) and levels[-1].axes[0] in loop.reduce_axes
    if partials and levels[-1].extent > BLOCK and any(
            r.combine == "add" and r.acc_dtype.kind == "f" for r in loop.reductions):
        levels[-1] = _Level(levels[-1].axes, levels[-1].extent, BLOCK)
    return levels


_FREE_OPS = ("load", "const", "index", "convert_element_type", "broadcast_in_dim", "reshape")


def _split(loop: Loop, memory: bool, levels: list[_Level], stores: list) -> Split | None:
    """Chunks of one level when the loop's work is large, by its shape and ops alone (never the thread
    count, so results do not depend on it): the outermost level, or in memory mode (accumulators over
    the kept index) the outermost kept level, so chunks never share an accumulator. Declined: no kept
    level in memory mode, and stores not at distinct elements per chunk (an index not linear in the
    loop variables, or not reading the chunked level's axes)."""
    if not levels:
        return None
    total = int(np.prod(loop.space, dtype=np.int64))
    work = total * max(1, sum(o.prim not in _FREE_OPS for o in loop.ops))
    if work < pool.PARALLEL_MIN_WORK:
        return None
    kept = [d for d, lv in enumerate(levels) if lv.axes[0] not in loop.reduce_axes]
    level = (kept or [None])[0] if memory else 0
    if level is None:
        return None
    outer = levels[level]
    for _, off in stores:
        coefs, atoms, _ = _affine(off)
        if atoms or not any(coefs.get(a, 0) for a in outer.axes):
            return None
    per_iteration = work // outer.extent
    chunk = max(-(-outer.extent // pool.MAX_CHUNKS), -(-pool.MIN_CHUNK_WORK // per_iteration), 1)
    if outer.block:
        chunk = -(-chunk // outer.block) * outer.block
    chunks = -(-outer.extent // chunk)
    reduced = outer.axes[0] in loop.reduce_axes
    return Split(chunk, chunks, reduced, level) if chunks > 1 else None


class _LoopRenderer:
    """One Loop step: the nest of levels, ops placed at the outermost level that knows their inputs.
    With `chunk` (an i64 value), only that chunk of the split level (see `Split`), of `chunk_extent`
    iterations."""

    def __init__(self, ctx: _Context, loop: Loop, chunk: ir.Value | None = None, chunk_extent: int = 0):
        self.ctx, self.loop, self.b = ctx, loop, ctx.builder
        self.fn = self.b.function
        self.scalar = ctx.scalar
        self.chunk, self.chunk_extent = chunk, chunk_extent  # the chunk rendered, and its iterations
        nest = _nest(loop, ctx.buffers)
        self.memory, self.loads, self.stores, self.kept = nest.memory, nest.loads, nest.stores, nest.kept
        self.levels, self.split = nest.levels, nest.split
        self.partials = not self.memory and bool(self.levels) and self.levels[-1].axes[0] in loop.reduce_axes
        self.depth_of_axis = {a: d + 1 for d, lv in enumerate(self.levels) for a in lv.axes}
        self.reduce_level = next((d for d, lv in enumerate(self.levels) if lv.axes[0] in loop.reduce_axes),
                                 len(self.levels))
        self.level_values: list = [None] * len(self.levels)
        self.values: list = [None] * len(loop.ops)
        self.ix_cache: dict = {}
        self.depth: list[int] = []
        for k, o in enumerate(loop.ops):
            self.depth.append(self._op_depth(k, o))

    def _two_level(self, r) -> bool:
        """Float sums over an innermost reduce loop fold register partial sums (blocks of it) into a
        float64 total: as accurate as pairwise summation, and the partial sums still vectorize."""
        return self.partials and r.combine == "add" and r.acc_dtype.kind == "f"

    def _op_depth(self, k: int, o) -> int:
        if o.prim == "load":
            return self._ix_depth(self.loads[k])
        if o.prim == "index":
            return self._ix_depth(o.param("index"))
        return max((self.depth[a] for a in o.args), default=0)

    def _ix_depth(self, x: Ix) -> int:
        if x.op == "var":
            return self.depth_of_axis.get(x.args[0], 0)
        if x.op == "value":
            return self.depth[x.args[0]]
        return max((self._ix_depth(a) for a in x.args if isinstance(a, Ix)), default=0)

    # rendering

    def render(self) -> None:
        loop = self.loop
        if 0 in loop.space:
            self._empty()
            return
        self.accs = {}
        if self.memory:
            self._memory_init()
        self._nest(0)
        if self.memory:
            self._memory_finish()

    def _nest(self, k: int) -> None:
        for op_id, d in enumerate(self.depth):
            if d == k:
                self.values[op_id] = self._op(op_id, self.loop.ops[op_id])
        if k == self.reduce_level and not self.memory:
            self._register_init()
        if k == len(self.levels):
            self._point()
        else:
            self._level(k)
        if k == self.reduce_level and not self.memory:
            self._register_finish()

    def render_parallel(self) -> None:
        """The loop as chunks run by `ember_parallel_for`: memory accumulators set up before and
        finished after, and a reduced outer level's partial results combined in chunk order."""
        loop, b = self.loop, self.b
        self.accs = {}
        if self.memory:
            self._memory_init()
        body = self._chunk_function()
        slots = self.ctx.allocas.alloca(PTR, size=len(self.fn.args))
        for j, arg in enumerate(self.fn.args):
            b.store(arg, b.gep(slots, [index(j)], inbounds=True, source_etype=PTR))
        b.call(_parallel_for(b.module), [body, slots, index(self.split.chunks)])
        if self.memory:
            self._memory_finish()
        if self.split.partial:
            for k, r in enumerate(loop.reductions):
                self._combine_partials(k, r)

    def _chunk_function(self) -> ir.Function:
        """`void (ptr slots, i64 chunk)`: reads the kernel's pointers from `slots` and runs one chunk
        in a function with the kernel's own parameters and noalias marks (LLVM inlines it)."""
        module, parent = self.b.module, self.fn
        name = module.get_unique_name(f"{parent.name}.chunk")
        body = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * len(parent.args) + [I64]), name)
        body.linkage = "internal"
        for arg, outer in zip(body.args, parent.args):
            arg.name = outer.name
            if "noalias" in outer.attributes:
                arg.add_attribute("noalias")
        body.args[-1].name = "chunk"
        entry = body.append_basic_block("entry")
        builder = ir.IRBuilder(body.append_basic_block("start"))
        ptrs = _pointers([a.name for a in body.args[:-1]], body.args[:-1], self.ctx.shared)
        ctx = _Context(builder, ir.IRBuilder(entry), self.ctx.buffers, ptrs, self.scalar, self.ctx.shared)
        # Every chunk but the last has `split.chunk` iterations: rendered apart, with that constant trip
        # count (as an unsplit loop has), the nest vectorizes without a remainder loop per chunk.
        chunk, split = body.args[-1], self.split
        last = split.chunks - 1
        tail = self.levels[split.level].extent - last * split.chunk
        whole, rest = body.append_basic_block("whole"), body.append_basic_block("last")
        builder.cbranch(builder.icmp_unsigned("<", chunk, index(last)), whole, rest)
        for block, extent in ((whole, split.chunk), (rest, tail)):
            builder.position_at_end(block)
            inner = _LoopRenderer(ctx, self.loop, chunk=chunk, chunk_extent=extent)
            inner.accs = {}
            if inner.memory:
                inner.accs = {r: inner._memory_pointer(r, k) for k, r in enumerate(self.loop.reductions)}
            inner._nest(0)
            builder.ret_void()
        ctx.allocas.branch(body.basic_blocks[1])

        tramp = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64]), f"{name}.run")
        tramp.linkage = "internal"
        tb = ir.IRBuilder(tramp.append_basic_block("entry"))
        slots, chunk = tramp.args
        args = [tb.load(tb.gep(slots, [index(j)], inbounds=True, source_etype=PTR), typ=PTR)
                for j in range(len(parent.args))]
        tb.call(body, args + [chunk])
        tb.ret_void()
        return tramp

    def _partial_slot(self, k: int, field: int, chunk: ir.Value) -> ir.Value:
        """The address of `field` (0 total, 1 compensation, 2 NaN flag) of reduction k's partial
        result of `chunk`, after the scratch of the memory accumulators."""
        before = sum(_round_up(n) for _, n in _memory_accumulators(self.loop, self.ctx.buffers))
        n = len(self.loop.reductions)
        at = self.b.add(index(before + k * PARTIAL_SLOT + 8 * field),
                        self.b.mul(chunk, index(n * PARTIAL_SLOT), flags=("nuw", "nsw")), flags=("nuw", "nsw"))
        return self.b.gep(self.ctx.ptrs["scratch"], [at], inbounds=True, source_etype=I8)

    def _store_partial(self, k: int, r, acc: _Acc) -> None:
        b = self.b
        b.store(b.load(acc.total), self._partial_slot(k, 0, self.chunk))
        if acc.comp is not None:
            b.store(b.load(acc.comp), self._partial_slot(k, 1, self.chunk))
        if acc.nan is not None:
            b.store(b.zext(b.load(acc.nan), I8), self._partial_slot(k, 2, self.chunk))

    def _combine_partials(self, k: int, r) -> None:
        """Reduction k's result from its chunks' partial results, combined in chunk order (float sums:
        the chunks' float64 totals summed with Neumaier's compensation, their compensations added)."""
        b, two = self.b, self._two_level(r)
        acc_type = value_type(_F64 if two else r.acc_dtype)
        acc = _Acc(self.ctx.allocas.alloca(acc_type), index(0))
        b.store(self.scalar.constant(r.init, _F64 if two else r.acc_dtype), acc.total)
        if two:
            acc.comp = self.ctx.allocas.alloca(value_type(_F64))
            b.store(self.scalar.constant(0, _F64), acc.comp)
        if _nan_flagged(r):
            acc.nan = self.ctx.allocas.alloca(I1)
            b.store(ir.Constant(I1, 0), acc.nan)
        saved = self.accs.get(r)
        self.accs[r] = acc

        def combine(c):
            total = b.load(self._partial_slot(k, 0, c), typ=acc_type)
            if two:
                self._fold(acc, total)
                b.store(b.fadd(b.load(acc.comp), b.load(self._partial_slot(k, 1, c), typ=value_type(_F64))),
                        acc.comp)
            elif acc.nan is not None:
                self._register_combine(r, total)
                seen = b.load(self._partial_slot(k, 2, c), typ=I8)
                b.store(b.or_(b.load(acc.nan), b.icmp_unsigned("!=", seen, ir.Constant(I8, 0))), acc.nan)
            else:
                b.store(self._combine(r, b.load(acc.total), total), acc.total)

        self._flat_loop(self.split.chunks, combine)
        self._finish(r, acc)
        self.accs[r] = saved

    def _level(self, k: int) -> None:
        lv = self.levels[k]
        inner = k == len(self.levels) - 1
        if self.chunk is not None and k == self.split.level:  # this chunk of the split level
            origin = self.b.mul(self.chunk, index(self.split.chunk), flags=("nuw", "nsw"))
            extent = index(self.chunk_extent)
        else:
            origin, extent = None, index(lv.extent)
        if lv.block:
            if isinstance(extent, ir.Constant):
                blocks = index(-(-int(extent.constant) // lv.block))
            else:
                blocks = self.b.udiv(self.b.add(extent, index(lv.block - 1)), index(lv.block))
            jb, state = self._open(blocks)
            start = self.b.mul(jb, index(lv.block), flags=("nuw", "nsw"))
            count = self._min(self.b.sub(extent, start), index(lv.block))
            base = start if origin is None else self.b.add(origin, start, flags=("nuw", "nsw"))
        else:
            base, count = origin, extent
        if inner:
            self._partials_init()
        j, inner_state = self._open(count)
        self.level_values[k] = j if base is None else self.b.add(base, j, flags=("nuw", "nsw"))
        self._nest(k + 1)
        self._close(inner_state, count)
        if inner:
            self._partials_fold()
        if lv.block:
            self._close(state, blocks)

    def _open(self, count) -> tuple:
        pre = self.b.block
        header = self.fn.append_basic_block("loop")
        self.b.branch(header)
        self.b.position_at_end(header)
        i = self.b.phi(I64)
        i.add_incoming(index(0), pre)
        return i, (i, header)

    def _close(self, state, count) -> None:
        i, header = state
        nxt = self.b.add(i, index(1), flags=("nuw", "nsw"))
        i.add_incoming(nxt, self.b.block)
        done = self.fn.append_basic_block("after")
        self.b.cbranch(self.b.icmp_unsigned("<", nxt, count), header, done)
        self.b.position_at_end(done)

    def _min(self, a, b):
        return self.b.select(self.b.icmp_signed("<", a, b), a, b)

    def _point(self) -> None:
        for r in self.loop.reductions:
            value = self._convert(self.values[r.value], self.loop.ops[r.value].dtype, r.acc_dtype)
            if self.memory:
                ptr, off = self.accs[r], self._ix(self.kept)
                acc = load(self.b, ptr, off, r.acc_dtype)
                store(self.b, self._combine(r, acc, value), ptr, off, r.acc_dtype)
            else:
                self._register_combine(r, value)
        for s, off in self.stores:
            dt = self.ctx.buffers[s.buffer].dtype
            value = self._convert(self.values[s.value], self.loop.ops[s.value].dtype, dt)
            store(self.b, value, self.ctx.ptrs[s.buffer], self._ix(off), dt)

    # register accumulators: float sums fold each block's partial sum into a float64 total with
    # Neumaier's compensation; float max/min compare ignoring NaN (so they vectorize as a plain
    # max) beside a flag saying whether any NaN was seen, which then makes the result NaN

    def _register_init(self) -> None:
        for r in self.loop.reductions:
            two = self._two_level(r)
            acc = _Acc(self.ctx.allocas.alloca(value_type(_F64 if two else r.acc_dtype)), self._ix(self.kept))
            self.b.store(self.scalar.constant(r.init, _F64 if two else r.acc_dtype), acc.total)
            if two:
                acc.comp = self.ctx.allocas.alloca(value_type(_F64))
                self.b.store(self.scalar.constant(0, _F64), acc.comp)
                acc.partial = self.ctx.allocas.alloca(value_type(r.acc_dtype))
            if _nan_flagged(r):
                acc.nan = self.ctx.allocas.alloca(I1)
                self.b.store(ir.Constant(I1, 0), acc.nan)
            self.accs[r] = acc

    def _register_combine(self, r, value) -> None:
        acc, b = self.accs[r], self.b
        slot = acc.partial or acc.total
        old = b.load(slot)
        if acc.nan is None:
            b.store(self._combine(r, old, value), slot)
            return
        better = b.fcmp_ordered(">" if r.combine == "max" else "<", value, old, flags=("nnan", "nsz"))
        b.store(b.select(better, value, old, flags=("nnan", "nsz")), slot)
        b.store(b.or_(b.load(acc.nan), b.fcmp_unordered("uno", value, value)), acc.nan)

    def _partials_init(self) -> None:
        for r in self.loop.reductions:
            if self._two_level(r):
                self.b.store(self.scalar.constant(0, r.acc_dtype), self.accs[r].partial)

    def _partials_fold(self) -> None:
        for r in self.loop.reductions:
            if self._two_level(r):
                acc = self.accs[r]
                self._fold(acc, self._convert(self.b.load(acc.partial), r.acc_dtype, _F64))

    def _fold(self, acc: _Acc, x) -> None:
        """Add float64 `x` to the float64 total, keeping what rounding lost in the compensation."""
        b = self.b
        s = b.load(acc.total)
        t = b.fadd(s, x)
        fabs = _intrinsic(b.module, "fabs", s.type, 1)
        big = b.fcmp_ordered(">=", b.call(fabs, [s]), b.call(fabs, [x]))
        lost = b.select(big, b.fadd(b.fsub(s, t), x), b.fadd(b.fsub(x, t), s))
        b.store(b.fadd(b.load(acc.comp), lost), acc.comp)
        b.store(t, acc.total)

    def _register_finish(self) -> None:
        for k, r in enumerate(self.loop.reductions):
            if self.chunk is not None and self.split.partial:
                self._store_partial(k, r, self.accs[r])
            else:
                self._finish(r, self.accs[r])

    def _finish(self, r, acc: _Acc) -> None:
        """Store reduction r's result from its accumulator."""
        dt = self.ctx.buffers[r.out].dtype
        value = self.b.load(acc.total)
        if acc.comp is not None:  # the float64 total rounds to the accumulator dtype first, as reduced
            # an infinite or NaN total is the plain sum's (the compensation of inf is inf - inf)
            fabs = _intrinsic(self.b.module, "fabs", value.type, 1)
            finite = self.b.fcmp_ordered("<", self.b.call(fabs, [value]), self.scalar.constant(np.inf, _F64))
            compensated = self.b.fadd(value, self.b.load(acc.comp))
            value = self._convert(self.b.select(finite, compensated, value), _F64, r.acc_dtype)
        if acc.nan is not None:
            value = self.b.select(self.b.load(acc.nan), self.scalar.constant(np.nan, r.acc_dtype), value)
        store(self.b, self._convert(value, r.acc_dtype, dt), self.ctx.ptrs[r.out], acc.offset, dt)

    # memory accumulators: the output buffer, or scratch when the accumulator dtype differs

    def _memory_pointer(self, r, k: int) -> ir.Value:
        """Where reduction k (`r`) accumulates: its output, or its region of scratch."""
        scratch = dict(_memory_accumulators(self.loop, self.ctx.buffers))
        if r not in scratch:
            return self.ctx.ptrs[r.out]
        offset = sum(_round_up(scratch[q]) for q in self.loop.reductions[:k] if q in scratch)
        return self.b.gep(self.ctx.ptrs["scratch"], [index(offset)], inbounds=True, source_etype=ir.IntType(8))

    def _memory_init(self) -> None:
        kept = int(np.prod([n for a, n in enumerate(self.loop.space) if a not in self.loop.reduce_axes],
                           dtype=np.int64))
        for k, r in enumerate(self.loop.reductions):
            ptr = self._memory_pointer(r, k)
            init = self.scalar.constant(r.init, r.acc_dtype)
            self._flat_loop(kept, lambda j, p=ptr, v=init, dt=r.acc_dtype: store(self.b, v, p, j, dt))
            self.accs[r] = ptr

    def _memory_finish(self) -> None:
        scratch = dict(_memory_accumulators(self.loop, self.ctx.buffers))
        kept = int(np.prod([n for a, n in enumerate(self.loop.space) if a not in self.loop.reduce_axes],
                           dtype=np.int64))
        for r in self.loop.reductions:
            if r in scratch:
                dt, ptr = self.ctx.buffers[r.out].dtype, self.accs[r]

                def convert(j, r=r, dt=dt, ptr=ptr):
                    v = self._convert(load(self.b, ptr, j, r.acc_dtype), r.acc_dtype, dt)
                    store(self.b, v, self.ctx.ptrs[r.out], j, dt)

                self._flat_loop(kept, convert)

    def _flat_loop(self, n: int, body) -> None:
        j, state = self._open(index(n))
        body(j)
        self._close(state, index(n))

    def _empty(self) -> None:
        """A space with a zero extent: reductions give their init over the kept space; nothing stored."""
        kept = int(np.prod([n for a, n in enumerate(self.loop.space) if a not in self.loop.reduce_axes],
                           dtype=np.int64))
        if kept == 0:
            return
        for r in self.loop.reductions:
            dt = self.ctx.buffers[r.out].dtype
            v = self._convert(self.scalar.constant(r.init, r.acc_dtype), r.acc_dtype, dt)
            self._flat_loop(kept, lambda j, v=v, r=r, dt=dt: store(self.b, v, self.ctx.ptrs[r.out], j, dt))

    # ops and index expressions

    def _op(self, k: int, o):
        if o.prim == "load":
            return load(self.b, self.ctx.ptrs[o.param("buffer")], self._ix(self.loads[k]), o.dtype)
        if o.prim == "const":
            return self.scalar.constant(o.param("value"), o.dtype)
        if o.prim == "index":
            expr = o.param("index")
            v = self._ix(expr)
            return self._convert(v, _BOOL if v.type == I1 else _I64, o.dtype)
        ops = self.loop.ops
        return self.scalar.emit_op(self.b, o, [self.values[a] for a in o.args], [ops[a].dtype for a in o.args])

    def _convert(self, v, src: np.dtype, dst: np.dtype):
        return v if np.dtype(src) == np.dtype(dst) else self.scalar.convert(self.b, v, np.dtype(src), np.dtype(dst))

    def _ix(self, x: Ix):
        """`x` as an i64 (predicates: i1), rendered once per loop."""
        if x not in self.ix_cache:
            self.ix_cache[x] = self._render_ix(x)
        return self.ix_cache[x]

    def _render_ix(self, x: Ix):
        op, a = x.op, x.args
        if op == "const" and isinstance(a[0], bool):
            return ir.Constant(I1, int(a[0]))
        if op in _PREDICATES:
            return _PREDICATES[op](self, *a)
        if op == "floordiv":
            return self.b.udiv(self._ix(a[0]), index(a[1]))
        if op == "mod":
            return self.b.urem(self._ix(a[0]), index(a[1]))
        if op == "clamp":
            v = self._ix(a[0])
            v = self.b.select(self.b.icmp_signed("<", v, index(a[1])), index(a[1]), v)
            return self.b.select(self.b.icmp_signed(">", v, index(a[2])), index(a[2]), v)
        if op == "value":
            return self._convert(self.values[a[0]], self.loop.ops[a[0]].dtype, _I64)
        return self._linear(x)

    def _linear(self, x: Ix):
        coefs, atoms, k = _affine(x)
        terms = []
        for d, lv in enumerate(self.levels):
            cs = [coefs.get(a, 0) for a in lv.axes]
            inner = [int(np.prod([self.loop.space[b] for b in lv.axes[i + 1:]], dtype=np.int64))
                     for i in range(len(lv.axes))]
            if all(c == cs[-1] * p for c, p in zip(cs, inner)):
                terms.append((self.level_values[d], cs[-1]))
            else:
                terms += [(self._axis(d, i), c) for i, c in enumerate(cs) if c]
        terms += [(self._ix(atom), c) for atom, c in atoms.items()]
        total = None
        for v, c in terms:
            if c == 0:
                continue
            if c != 1:
                v = self.b.mul(v, index(c), flags=("nsw",))
            total = v if total is None else self.b.add(total, v, flags=("nsw",))
        if total is None:
            return index(k)
        return self.b.add(total, index(k), flags=("nsw",)) if k else total

    def _axis(self, d: int, i: int):
        """Loop var of axis `i` of level `d`'s collapsed axes."""
        lv = self.levels[d]
        inner = int(np.prod([self.loop.space[b] for b in lv.axes[i + 1:]], dtype=np.int64))
        v = self.level_values[d]
        if inner > 1:
            v = self.b.udiv(v, index(inner))
        return self.b.urem(v, index(self.loop.space[lv.axes[i]])) if i > 0 else v

    # reductions' combine ops

    def _combine(self, r, acc, value):
        kind = r.acc_dtype.kind
        if r.combine in ("add", "mul") and kind == "f":
            fn = self.b.fadd if r.combine == "add" else self.b.fmul
            return fn(acc, value, flags=("reassoc",))
        if r.combine == "add":
            return self.b.add(acc, value)
        if r.combine == "mul":
            return self.b.mul(acc, value)
        if kind == "b":
            return (self.b.or_ if r.combine == "max" else self.b.and_)(acc, value)
        name = {"f": {"max": "maximum", "min": "minimum"}, "i": {"max": "smax", "min": "smin"},
                "u": {"max": "umax", "min": "umin"}}[kind][r.combine]
        return self.b.call(_intrinsic(self.b.module, name, acc.type), [acc, value])


def _lt(r: _LoopRenderer, x, c):
    return r.b.icmp_signed("<", r._ix(x), index(c))


def _ge(r: _LoopRenderer, x, c):
    return r.b.icmp_signed(">=", r._ix(x), index(c))


def _eq(r: _LoopRenderer, x, c):
    return r.b.icmp_signed("==", r._ix(x), index(c))


def _and(r: _LoopRenderer, *xs):
    out = r._ix(xs[0])
    for x in xs[1:]:
        out = r.b.and_(out, r._ix(x))
    return out


_PREDICATES = {"lt": _lt, "ge": _ge, "eq": _eq, "and": _and}


def _intrinsic(module: ir.Module, name: str, typ: ir.Type, arity: int = 2) -> ir.Function:
    """`llvm.<name>.<type>` taking `arity` values of `typ` and returning one (declared once per module)."""
    suffix = {"half": "f16", "float": "f32", "double": "f64"}.get(str(typ), str(typ))
    full = f"llvm.{name}.{suffix}"
    if full in module.globals:
        return module.globals[full]
    return ir.Function(module, ir.FunctionType(typ, [typ] * arity), full)



def _parallel_for(module: ir.Module) -> ir.Function:
    """`void @ember_parallel_for(ptr fn, ptr ctx, i64 chunks)` of the thread pool, declared once."""
    if PARALLEL_FOR in module.globals:
        return module.globals[PARALLEL_FOR]
    return ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), PARALLEL_FOR)
