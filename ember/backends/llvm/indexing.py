"""The ArgReduce and Scatter steps of a kernel description as IR loops (loops.py dispatches them here).

argmax/argmin walk each row along the axis keeping the best value and its index: a candidate wins
when strictly better, or when it is a NaN and the best is not (so the first NaN wins, as NumPy).
With a contiguous row the pair lives in registers (a long row is searched as 16 interleaved rows
in vector registers, then merged); otherwise rows advance together through a scratch pair of
arrays, so the inner loop runs over contiguous memory and vectorizes. A scatter copies its operand
(unless writing in place), then applies the updates one index vector at a time in row-major order,
dropping a vector out of range: duplicates combine in order by the mode's elementwise rule (add, mul,
min, max), or the last wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import prod

import numpy as np
from llvmlite import ir

from ember.backends.kernel import ArgReduce, Buffer, Op, Scatter
from ember.backends.llvm import scalar
from ember.backends.llvm.types import I1, I32, I64, PTR, element_ptr, index, load, memory_type, store, value_type

ALIGN = 64  # the scratch pointer's alignment, and the granule of what a step asks for


def step_scratch_bytes(step: ArgReduce | Scatter, buffers: Mapping[str, Buffer]) -> int:
    """Bytes of scratch `emit_step` needs for `step`: an argmax/argmin over a non-last axis keeps a
    best index (i64) and value per element of a row slice; everything else needs none."""
    if not isinstance(step, ArgReduce):
        return 0
    x = buffers[step.operand]
    inner = prod(x.shape[step.axis + 1:])
    if inner == 1:
        return 0
    return -(-inner * (8 + x.dtype.itemsize) // ALIGN) * ALIGN


def emit_step(builder: ir.IRBuilder, step: ArgReduce | Scatter, buffers: Mapping[str, Buffer],
              ptrs: Mapping[str, ir.Value], scratch: ir.Value) -> None:
    """Append the loops computing `step` at the builder's position, which ends after them."""
    if isinstance(step, ArgReduce):
        _arg_reduce(builder, step, buffers, ptrs, scratch)
    elif isinstance(step, Scatter):
        _scatter(builder, step, buffers, ptrs)
    else:
        raise TypeError(f"indexing.emit_step renders ArgReduce and Scatter steps, not {type(step).__name__}")


# --- loops -------------------------------------------------------------------------------------------

def _loop(builder: ir.IRBuilder, start: int | ir.Value, stop: int | ir.Value, body: Callable,
          carried: Sequence[ir.Value] = ()) -> list[ir.Value]:
    """for i in [start, stop): carried = body(i, *carried); returns the carried values after the loop
    (the builder continues there). `body` may emit blocks of its own."""
    carried = list(carried)
    if isinstance(start, int) and isinstance(stop, int) and stop <= start:
        return carried
    start = index(start) if isinstance(start, int) else start
    stop = index(stop) if isinstance(stop, int) else stop
    entry = builder.block
    head = builder.append_basic_block("loop")
    work = builder.append_basic_block("loop.body")
    done = builder.append_basic_block("loop.end")
    builder.branch(head)
    builder.position_at_end(head)
    i = builder.phi(I64, "i")
    i.add_incoming(start, entry)
    phis = []
    for value in carried:
        phi = builder.phi(value.type)
        phi.add_incoming(value, entry)
        phis.append(phi)
    builder.cbranch(builder.icmp_signed("<", i, stop), work, done)
    builder.position_at_end(work)
    new = body(i, *phis) if carried else body(i)
    latch = builder.block
    i.add_incoming(builder.add(i, index(1), flags=["nsw", "nuw"]), latch)
    for phi, value in zip(phis, new or ()):
        phi.add_incoming(value, latch)
    builder.branch(head)
    builder.position_at_end(done)
    return phis


def _mul(builder, a: ir.Value, c: int) -> ir.Value:
    return a if c == 1 else builder.mul(a, index(c), flags=["nsw", "nuw"])


def _add(builder, a: ir.Value, b: ir.Value) -> ir.Value:
    return builder.add(a, b, flags=["nsw", "nuw"])


# --- argmax / argmin ---------------------------------------------------------------------------------

_CMP = {"argmax": ">", "argmin": "<"}


def _better(builder: ir.IRBuilder, combine: str, v: ir.Value, best: ir.Value, dtype: np.dtype) -> ir.Value:
    """Whether candidate `v` replaces `best`: strictly better, or a NaN while `best` is not one."""
    op = _CMP[combine]
    if dtype.kind == "f":  # unordered: true for a NaN candidate; the ordered self-compare keeps a NaN best
        return builder.and_(builder.fcmp_unordered(op, v, best), builder.fcmp_ordered("ord", best, best))
    if dtype.kind == "i":
        return builder.icmp_signed(op, v, best)
    return builder.icmp_unsigned(op, v, best)  # unsigned ints, and bools as i1 (True > False)


def _as_index(builder: ir.IRBuilder, k: ir.Value, dtype: np.dtype) -> ir.Value:
    """An i64 index in the output's dtype, wrapping as NumPy's astype does."""
    width = value_type(dtype).width
    return k if width == 64 else builder.trunc(k, value_type(dtype))


LANES = 16  # a long contiguous row is searched as LANES interleaved rows in vector registers


def _lanes(builder, combine: str, src, base, n: int, dt: np.dtype) -> tuple[ir.Value, ir.Value, int]:
    """The best value and index of the first n - n % LANES elements of the row at `base`: lane j keeps
    the best of elements j, j + LANES, ... (with its block number), then lanes are merged, ties and
    NaNs going to the smallest index. Returns them and where the scalar tail starts."""
    blocks = n // LANES
    blk = ir.VectorType(I64, LANES)

    def block(r):
        at = element_ptr(builder, src, _add(builder, base, _mul(builder, r, LANES)), dt)
        raw = builder.load(at, typ=ir.VectorType(memory_type(dt), LANES), align=dt.itemsize)
        return builder.icmp_unsigned("!=", raw, ir.Constant(raw.type, None)) if dt.kind == "b" else raw

    def advance(r, best, at):
        v = block(r)
        take = _better(builder, combine, v, best, dt)
        splat = builder.insert_element(ir.Constant(blk, None), r, ir.Constant(I64, 0))
        splat = builder.shuffle_vector(splat, ir.Constant(blk, None), ir.Constant(ir.VectorType(I32, LANES), None))
        return builder.select(take, v, best), builder.select(take, splat, at)

    best, at = _loop(builder, 1, blocks, advance, [block(index(0)), ir.Constant(blk, None)])
    value, k = None, None
    for lane in range(LANES):
        v = builder.extract_element(best, index(lane))
        i = builder.add(_mul(builder, builder.extract_element(at, index(lane)), LANES), index(lane))
        if value is None:
            value, k = v, i
            continue
        take = builder.or_(_better(builder, combine, v, value, dt),
                           builder.and_(_same(builder, v, value, dt), builder.icmp_signed("<", i, k)))
        value, k = builder.select(take, v, value), builder.select(take, i, k)
    return value, k, blocks * LANES


def _same(builder, a: ir.Value, b: ir.Value, dtype: np.dtype) -> ir.Value:
    """a equals b, two NaNs counting as equal (for a tie between lanes)."""
    if dtype.kind != "f":
        return builder.icmp_unsigned("==", a, b)
    return builder.or_(builder.fcmp_ordered("==", a, b),
                       builder.and_(builder.fcmp_unordered("uno", a, a), builder.fcmp_unordered("uno", b, b)))


def _arg_reduce(builder, step: ArgReduce, buffers, ptrs, scratch) -> None:
    x = buffers[step.operand]
    outer, n, inner = prod(x.shape[:step.axis]), x.shape[step.axis], prod(x.shape[step.axis + 1:])
    src, dst, dt = ptrs[step.operand], ptrs[step.out], x.dtype

    def pick(v, best, k, r):
        take = _better(builder, step.combine, v, best, dt)
        return builder.select(take, v, best), builder.select(take, r, k)

    if inner == 1:  # a contiguous row: the best value and index in registers
        def row(o):
            base = _mul(builder, o, n)
            if n >= 2 * LANES:
                best, k, start = _lanes(builder, step.combine, src, base, n, dt)
            else:
                best, k, start = load(builder, src, base, dt), index(0), 1
            _, k = _loop(builder, start, n, lambda r, best, k: pick(load(builder, src, _add(builder, base, r), dt),
                                                                    best, k, r), [best, k])
            store(builder, _as_index(builder, k, step.index_dtype), dst, o, step.index_dtype)
        _loop(builder, 0, outer, row)
        return

    best_k = scratch  # i64[inner], then the best values
    best_v = element_ptr(builder, scratch, index(inner), np.int64)

    def row(o):
        base = _mul(builder, o, n * inner)

        def init(i):
            store(builder, load(builder, src, _add(builder, base, i), dt), best_v, i, dt)
            store(builder, index(0), best_k, i, np.int64)

        def advance(r):
            at = _add(builder, base, _mul(builder, r, inner))

            def element(i):
                v, k = pick(load(builder, src, _add(builder, at, i), dt), load(builder, best_v, i, dt),
                            load(builder, best_k, i, np.int64), r)
                store(builder, v, best_v, i, dt)
                store(builder, k, best_k, i, np.int64)
            _loop(builder, 0, inner, element)

        def finish(i):
            k = _as_index(builder, load(builder, best_k, i, np.int64), step.index_dtype)
            store(builder, k, dst, _add(builder, _mul(builder, o, inner), i), step.index_dtype)

        _loop(builder, 0, inner, init)
        _loop(builder, 1, n, advance)
        _loop(builder, 0, inner, finish)

    _loop(builder, 0, outer, row)


# --- scatter -----------------------------------------------------------------------------------------

def _combine(builder: ir.IRBuilder, mode: str, old: ir.Value, new: ir.Value, dtype: np.dtype) -> ir.Value:
    """What an update leaves in its target: the update, or the mode's elementwise primitive (add, mul,
    min, max) of the target and the update, by the scalar rule a fused loop uses (so NaN and bools
    combine as NumPy's ufuncs do)."""
    if mode == "replace":
        return new
    return scalar.emit_op(builder, Op(mode, (0, 1), dtype), [old, new], [dtype, dtype])


def _memmove(builder: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: int) -> None:
    """Copy `nbytes` from src to dst (memmove: a graph may hand both names one buffer)."""
    module = builder.module
    name = "llvm.memmove.p0.p0.i64"
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I1]), name)
    builder.call(fn, [dst, src, index(nbytes), ir.Constant(I1, 0)])


def _scatter(builder, step: Scatter, buffers, ptrs) -> None:
    """Operand B + I + S, indices B + N + (k,), updates B + N + S: for each (b, n) in row-major
    order, when its index vector i is in range, combine updates[b, n, :] into out[b, i, :]."""
    op, idx = buffers[step.operand], buffers[step.indices]
    nb, k = step.batch_dims, idx.shape[-1]
    sizes = op.shape[nb:nb + k]
    batch, n, targets, width = prod(op.shape[:nb]), prod(idx.shape[nb:-1]), prod(sizes), prod(op.shape[nb + k:])
    out, upd, dt = ptrs[step.out], ptrs[step.updates], op.dtype
    if step.out != step.operand and prod(op.shape):
        _memmove(builder, out, ptrs[step.operand], prod(op.shape) * dt.itemsize)
    if step.mode == "add" and nb == 0 and k == 0:
        _add_all(builder, out, upd, n, width, dt)
        return

    def write(dst_base, src_base):
        def element(s):
            at = _add(builder, dst_base, s)
            new = load(builder, upd, _add(builder, src_base, s), dt)
            store(builder, _combine(builder, step.mode, load(builder, out, at, dt), new, dt), out, at, dt)
        _loop(builder, 0, width, element)

    def update(b, j):
        bn = _add(builder, _mul(builder, b, n), j)
        ok, pos = ir.Constant(I1, 1), index(0)
        for c, size in enumerate(sizes):
            i = _widen(builder, load(builder, ptrs[step.indices], _add(builder, _mul(builder, bn, k), index(c)),
                                     idx.dtype), idx.dtype)
            # unsigned compare: a negative signed index is a huge unsigned one, so one compare drops both
            ok = builder.and_(ok, builder.icmp_unsigned("<", i, index(size)))
            pos = builder.add(builder.mul(pos, index(size)), i)
        dst_base = builder.mul(builder.add(_mul(builder, b, targets), pos), index(width))
        src_base = _mul(builder, bn, width)
        if not sizes:
            write(dst_base, src_base)
            return
        with builder.if_then(ok):
            write(dst_base, src_base)

    _loop(builder, 0, batch, lambda b: _loop(builder, 0, n, lambda j: update(b, j)))


def _widen(builder: ir.IRBuilder, i: ir.Value, dtype: np.dtype) -> ir.Value:
    """An index of any integer dtype as i64, by its value (sign- or zero-extended)."""
    if i.type.width == 64:
        return i
    return builder.sext(i, I64) if dtype.kind == "i" else builder.zext(i, I64)


def _add_all(builder, out, upd, n: int, width: int, dt: np.dtype) -> None:
    """Index vectors of length 0 and no batch axes: every update lands on the whole operand, and the
    reference adds their sum (from 0, in update order) to it, as `operand + updates.sum(0)`."""
    zero = ir.Constant(value_type(dt), 0)

    def element(s):
        total, = _loop(builder, 0, n, lambda j, acc: [_combine(builder, "add", acc, load(
            builder, upd, _add(builder, _mul(builder, j, width), s), dt), dt)], [zero])
        store(builder, _combine(builder, "add", load(builder, out, s, dt), total, dt), out, s, dt)

    _loop(builder, 0, width, element)

