"""A kernel description's steps as LLVM IR: `kernel_function` defines one internal function per kernel.

Each `Loop` step is rendered from its schedule (backends/schedule.py: levels, accumulator mode,
hoisting depths, blocked float sums, thread split, scratch layout), decided there for every renderer:
this module only writes it out. A level is a counted loop (a blocked level, two); an op is emitted at
its depth; register accumulators are allocas in the entry block (mem2reg promotes them), with
`reassoc` combines so they vectorize, a float sum folding each block into a float64 total with
Neumaier's compensation, a float max/min as a plain compare beside a NaN flag; memory accumulators
are the output or a scratch region, set before the nest and converted after it. Contractions go to
`dot`, convolutions to `conv`, window reductions to `windows`, the argreduce and scatter steps to
`indexing`, the cumulative and sort steps to `sort`, factorizations to `lapack`; the scalar ops of
every primitive come from `scalar`.

A split loop runs its chunks on the native thread pool (`pool.py`, whose thresholds the schedule's
`SplitPolicy` carries): the chunk body is a function of its own, called through
`ember_parallel_for`, and a reduction over the chunked level stores one partial result per chunk in
scratch, combined in chunk order after the pool is done: results are bitwise identical whatever the
number of threads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ember.backends.kernel import Contraction, Convolution, Cumulative, Factorization, Kernel, Loop, Sort, WindowReduce
from ember.backends.kernel_index import Ix
from ember.backends.llvm import pool
from ember.backends.llvm.columns import TiledRows, column_tile
from ember.backends.llvm.pool import PARALLEL_FOR
from ember.backends.llvm.types import I1, I8, I64, PTR, index, load, store, value_type
from ember.backends.schedule import (
    PARTIAL_SLOT,
    LoopSchedule,
    SplitPolicy,
    axis_stride,
    no_alias,
    round_up,
    schedule_loop,
)

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
    elif isinstance(step, (Cumulative, Sort)):
        from ember.backends.llvm import sort
        sort.emit_step(ctx.builder, step, ctx.buffers, ctx.ptrs, ctx.ptrs["scratch"])
    elif isinstance(step, Factorization):
        from ember.backends.llvm import lapack
        lapack.emit_step(ctx.builder, step, ctx.buffers, ctx.ptrs, ctx.ptrs["scratch"])
    elif isinstance(step, Convolution):
        from ember.backends.llvm import conv
        conv.emit_convolution(ctx.builder, step, ctx.buffers, ctx.ptrs, ctx.ptrs["scratch"])
    elif isinstance(step, WindowReduce):
        from ember.backends.llvm import windows
        windows.emit_window_reduce(ctx.builder, step, ctx.buffers, ctx.ptrs)
    else:
        from ember.backends.llvm import indexing
        indexing.emit_step(ctx.builder, step, ctx.buffers, ctx.ptrs, ctx.ptrs["scratch"])


def loop_schedule(loop: Loop, buffers: dict) -> LoopSchedule:
    """`loop`'s schedule as this backend runs it: split for the native thread pool by its thresholds
    (read at each call, so a test may lower them)."""
    policy = SplitPolicy(pool.PARALLEL_MIN_WORK, pool.MIN_CHUNK_WORK, pool.MAX_CHUNKS)
    return schedule_loop(loop, buffers, policy)


def _step_scratch(step, buffers: dict) -> int:
    if isinstance(step, Loop):
        return loop_schedule(step, buffers).scratch_bytes
    if isinstance(step, Contraction):
        from ember.backends.llvm import dot
        return round_up(dot.contraction_scratch_bytes(step, buffers))
    if isinstance(step, (Cumulative, Sort)):
        from ember.backends.llvm import sort
        return round_up(sort.step_scratch_bytes(step, buffers))
    if isinstance(step, Factorization):
        from ember.backends.llvm import lapack
        return round_up(lapack.step_scratch_bytes(step, buffers))
    if isinstance(step, Convolution):
        from ember.backends.llvm import conv
        return round_up(conv.scratch_bytes(step, buffers))
    if isinstance(step, WindowReduce):
        return 0
    from ember.backends.llvm import indexing
    return round_up(indexing.step_scratch_bytes(step, buffers))


@dataclass
class _Acc:
    """A register reduction's accumulator slots (allocas) and where its result goes."""

    total: ir.Value
    offset: ir.Value
    comp: ir.Value | None = None  # float sums: the compensation of the float64 total
    partial: ir.Value | None = None  # float sums: the current block's sum
    nan: ir.Value | None = None  # float max/min: whether a NaN was seen


class _LoopRenderer(TiledRows):
    """One Loop step: the nest of levels, ops placed at the outermost level that knows their inputs.
    With `chunk` (an i64 value), only that chunk of the split level (see `Split`), of `chunk_extent`
    iterations."""

    def __init__(self, ctx: _Context, loop: Loop, chunk: ir.Value | None = None, chunk_extent: int = 0):
        self.ctx, self.loop, self.b = ctx, loop, ctx.builder
        self.fn = self.b.function
        self.scalar = ctx.scalar
        self.chunk, self.chunk_extent = chunk, chunk_extent  # the chunk rendered, and its iterations
        self.sched = sched = loop_schedule(loop, ctx.buffers)
        self.memory, self.loads, self.stores, self.kept = sched.memory, sched.loads, sched.stores, sched.kept
        self.levels, self.split, self.depth = sched.levels, sched.split, sched.depth
        self.tile = column_tile(loop, sched)
        self.level_values: list = [None] * len(self.levels)
        self.values: list = [None] * len(loop.ops)
        self.ix_cache: dict = {}

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
        if k == self.sched.reduce_level and not self.memory:
            self._register_init()
        if k == len(self.levels):
            self._point()
        elif self.tile is not None and k == self.tile.level:
            self._tiled_rows()
        else:
            self._level(k)
        if k == self.sched.reduce_level and not self.memory:
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
        last, tail = split.chunks - 1, self.sched.last_chunk()
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
        before = self.sched.partials_offset
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
        b, two = self.b, self.sched.two_level[k]
        acc_type = value_type(_F64 if two else r.acc_dtype)
        acc = _Acc(self.ctx.allocas.alloca(acc_type), index(0))
        b.store(self.scalar.constant(r.init, _F64 if two else r.acc_dtype), acc.total)
        if two:
            acc.comp = self.ctx.allocas.alloca(value_type(_F64))
            b.store(self.scalar.constant(0, _F64), acc.comp)
        if self.sched.nan_flagged[k]:
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
        self._emit_stores()

    def _emit_stores(self) -> None:
        for s, off in self.stores:
            dt = self.ctx.buffers[s.buffer].dtype
            value = self._convert(self.values[s.value], self.loop.ops[s.value].dtype, dt)
            store(self.b, value, self.ctx.ptrs[s.buffer], self._ix(off), dt)

    # register accumulators: float sums fold each block's partial sum into a float64 total with
    # Neumaier's compensation; float max/min compare ignoring NaN (so they vectorize as a plain
    # max) beside a flag saying whether any NaN was seen, which then makes the result NaN

    def _register_init(self) -> None:
        for k, r in enumerate(self.loop.reductions):
            two = self.sched.two_level[k]
            acc = _Acc(self.ctx.allocas.alloca(value_type(_F64 if two else r.acc_dtype)), self._ix(self.kept))
            self.b.store(self.scalar.constant(r.init, _F64 if two else r.acc_dtype), acc.total)
            if two:
                acc.comp = self.ctx.allocas.alloca(value_type(_F64))
                self.b.store(self.scalar.constant(0, _F64), acc.comp)
                acc.partial = self.ctx.allocas.alloca(value_type(r.acc_dtype))
            if self.sched.nan_flagged[k]:
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
        for k, r in enumerate(self.loop.reductions):
            if self.sched.two_level[k]:
                self.b.store(self.scalar.constant(0, r.acc_dtype), self.accs[r].partial)

    def _partials_fold(self) -> None:
        for k, r in enumerate(self.loop.reductions):
            if self.sched.two_level[k]:
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

    def _compensated(self, total, comp):
        """A float64 total corrected by its compensation; an infinite or NaN total is the plain sum's
        (the compensation of inf is inf - inf)."""
        fabs = _intrinsic(self.b.module, "fabs", total.type, 1)
        finite = self.b.fcmp_ordered("<", self.b.call(fabs, [total]), self.scalar.constant(np.inf, _F64))
        return self.b.select(finite, self.b.fadd(total, comp), total)

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
            value = self._convert(self._compensated(value, self.b.load(acc.comp)), _F64, r.acc_dtype)
        if acc.nan is not None:
            value = self.b.select(self.b.load(acc.nan), self.scalar.constant(np.nan, r.acc_dtype), value)
        store(self.b, self._convert(value, r.acc_dtype, dt), self.ctx.ptrs[r.out], acc.offset, dt)

    # memory accumulators: the output buffer, or scratch when the accumulator dtype differs

    def _memory_pointer(self, r, k: int) -> ir.Value:
        """Where reduction k (`r`) accumulates: its output, or its region of scratch."""
        placed = self.sched.acc_scratch[k]
        if placed is None:
            return self.ctx.ptrs[r.out]
        offset = placed[0]
        return self.b.gep(self.ctx.ptrs["scratch"], [index(offset)], inbounds=True, source_etype=ir.IntType(8))

    def _memory_init(self) -> None:
        kept = self.sched.kept_size
        for k, r in enumerate(self.loop.reductions):
            ptr = self._memory_pointer(r, k)
            init = self.scalar.constant(r.init, r.acc_dtype)
            self._flat_loop(kept, lambda j, p=ptr, v=init, dt=r.acc_dtype: store(self.b, v, p, j, dt))
            self.accs[r] = ptr

    def _memory_finish(self) -> None:
        kept = self.sched.kept_size
        for k, r in enumerate(self.loop.reductions):
            if self.sched.acc_scratch[k] is not None:
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
        kept = self.sched.kept_size
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
        terms, k = self.sched.linear_terms(self.loop.space, x)
        total = None
        for v, c in [(self._term(t), c) for t, c in terms]:
            if c == 0:
                continue
            if c != 1:
                v = self.b.mul(v, index(c), flags=("nsw",))
            total = v if total is None else self.b.add(total, v, flags=("nsw",))
        if total is None:
            return index(k)
        return self.b.add(total, index(k), flags=("nsw",)) if k else total

    def _term(self, term: tuple):
        """A term of `LoopSchedule.linear_terms` as an i64: a level's value, one of its axes, an atom."""
        if term[0] == "level":
            return self.level_values[term[1]]
        if term[0] == "axis":
            return self._axis(term[1], term[2])
        return self._ix(term[1])

    def _axis(self, d: int, i: int):
        """Loop var of axis `i` of level `d`'s collapsed axes."""
        lv = self.levels[d]
        inner = axis_stride(self.loop.space, lv, i)
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
