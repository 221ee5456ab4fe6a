"""The Cumulative and Sort steps of a kernel description as IR loops (loops.py dispatches them here).

A cumulative step walks each slab of the operand (the axes before `axis`) along `axis`, keeping one
running value per element of a row slice (the axes after it) in scratch, in the accumulator dtype:
the innermost loop runs over contiguous memory and vectorizes. A sort sorts, per row along
`dimension`, a permutation of the row's positions with a stable bottom-up merge sort (ceil(log2 n)
passes, each merging pairs of sorted runs from one copy in scratch into the other), the keys copied
beside the permutation and moved with it, so every load is contiguous (comparing through the
permutation instead made a 10**6-element sort three times slower); keys compare in JAX's total order
(NaNs equal and last, -0.0 equal to 0.0). Every operand is then gathered through the permutation.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod

import numpy as np
from llvmlite import ir

from ember.backends.kernel import Buffer, Cumulative, Op, Sort, acc_dtype
from ember.backends.llvm import scalar
from ember.backends.llvm.indexing import ALIGN, _loop
from ember.backends.llvm.types import I64, index, load, store

_I64 = np.dtype(np.int64)


def step_scratch_bytes(step: Cumulative | Sort, buffers: Mapping[str, Buffer]) -> int:
    """Bytes of scratch `emit_step` needs: a cumulative step's running values (one per element of a
    row slice), a sort's permutation and the merge's second permutation (i64 each)."""
    if isinstance(step, Cumulative):
        x = buffers[step.operand]
        nbytes = prod(x.shape[step.axis + 1:]) * acc_dtype(step.combine, x.dtype).itemsize
    else:
        at, dt = _scratch_columns(step, buffers)[-1]
        nbytes = at + -(-buffers[step.operands[0]].shape[step.dimension] * dt.itemsize // 8) * 8
    return -(-nbytes // ALIGN) * ALIGN


def emit_step(builder: ir.IRBuilder, step: Cumulative | Sort, buffers: Mapping[str, Buffer],
              ptrs: Mapping[str, ir.Value], scratch: ir.Value) -> None:
    """Append the loops computing `step` at the builder's position, which ends after them."""
    if isinstance(step, Cumulative):
        _cumulative(builder, step, buffers, ptrs, scratch)
    elif isinstance(step, Sort):
        _sort(builder, step, buffers, ptrs, scratch)
    else:
        raise TypeError(f"sort.emit_step renders Cumulative and Sort steps, not {type(step).__name__}")


def _add(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    return builder.add(a, b, flags=["nsw", "nuw"])


def _mul(builder: ir.IRBuilder, a: ir.Value, c: int) -> ir.Value:
    return a if c == 1 else builder.mul(a, index(c), flags=["nsw", "nuw"])


def _min(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    return builder.select(builder.icmp_signed("<", a, b), a, b)


# --- cumulative ----------------------------------------------------------------------------------------

def _signbit(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    bits = ir.IntType({"half": 16, "float": 32, "double": 64}[str(x.type)])
    return builder.icmp_signed("<", builder.bitcast(x, bits), ir.Constant(bits, 0))


def _combine(builder: ir.IRBuilder, op: Op, a: ir.Value, b: ir.Value) -> ir.Value:
    """a combined with b: a float max/min orders -0.0 below 0.0 and propagates NaN, as JAX's scans;
    everything else is the primitive's scalar op."""
    if op.prim not in ("max", "min") or op.dtype.kind != "f":
        return scalar.emit_op(builder, op, [a, b], [op.dtype, op.dtype])
    beyond = builder.fcmp_ordered(">" if op.prim == "max" else "<", b, a)
    # equal: zeros of two signs, where the sign bit of a decides
    tie = builder.select(_signbit(builder, a), b, a) if op.prim == "max" else builder.select(_signbit(builder, a), a, b)
    best = builder.select(beyond, b, builder.select(builder.fcmp_ordered("==", a, b), tie, a))
    return builder.select(builder.fcmp_unordered("uno", a, b), builder.fadd(a, b), best)


def _cumulative(builder, step: Cumulative, buffers, ptrs, scratch) -> None:
    x = buffers[step.operand]
    outer, n, inner = prod(x.shape[:step.axis]), x.shape[step.axis], prod(x.shape[step.axis + 1:])
    dt, acc = x.dtype, acc_dtype(step.combine, x.dtype)
    src, dst = ptrs[step.operand], ptrs[step.out]
    op = Op(step.combine, (0, 1), acc)

    def slab(o):
        def element(k, first: bool):
            kk = builder.sub(index(n - 1), k) if step.reverse else k
            row = _add(builder, _mul(builder, o, n * inner), _mul(builder, kk, inner))

            def lane(i):
                at = _add(builder, row, i)
                v = scalar.convert(builder, load(builder, src, at, dt), dt, acc)
                if not first:
                    v = _combine(builder, op, load(builder, scratch, i, acc), v)
                elif step.combine == "add" and acc.kind == "f":  # a float sum starts from +0.0, as JAX's
                    v = builder.fadd(v, scalar.constant(0.0, acc))
                store(builder, v, scratch, i, acc)
                store(builder, scalar.convert(builder, v, acc, dt), dst, at, dt)
            _loop(builder, 0, inner, lane)

        element(index(0), True)
        _loop(builder, 1, n, lambda k: element(k, False))

    if n:
        _loop(builder, 0, outer, slab)


# --- sort -------------------------------------------------------------------------------------------

def _key_less(builder: ir.IRBuilder, a: ir.Value, b: ir.Value, dtype: np.dtype) -> ir.Value:
    """a < b in JAX's sort order: for floats a NaN is above everything and equal to a NaN, and the
    ordered compare already makes -0.0 equal to 0.0."""
    if dtype.kind == "f":
        return builder.or_(builder.fcmp_ordered("<", a, b),
                           builder.and_(builder.fcmp_ordered("ord", a, a), builder.fcmp_unordered("uno", b, b)))
    if dtype.kind == "i":
        return builder.icmp_signed("<", a, b)
    return builder.icmp_unsigned("<", a, b)  # unsigned ints, and bools as i1


def _less(builder: ir.IRBuilder, a: list[ir.Value], b: list[ir.Value], dtypes: list[np.dtype]) -> ir.Value:
    """Whether an element with keys `a` sorts before one with keys `b`: the keys compared
    lexicographically, the first deciding unless equal."""
    result = None
    for x, y, dtype in reversed(list(zip(a, b, dtypes))):
        lt = _key_less(builder, x, y, dtype)
        if result is not None:
            equal = builder.not_(builder.or_(lt, _key_less(builder, y, x, dtype)))
            lt = builder.or_(lt, builder.and_(equal, result))
        result = lt
    return result


def _merge_pass(builder, columns: list[tuple[ir.Value, ir.Value, np.dtype]], keys: int, n: int,
                width: ir.Value) -> None:
    """Merge each pair of sorted runs of `width` of the (source, destination, dtype) `columns` (the
    permutation, then the first `keys` columns are the sort keys): the left run wins ties, so the sort
    is stable."""
    twice = builder.shl(width, index(1))

    def block(b):
        lo = builder.mul(b, twice)
        mid = _min(builder, _add(builder, lo, width), index(n))
        hi = _min(builder, _add(builder, lo, twice), index(n))

        def take(k, i, j):
            # clamped positions keep the loads in range once a run is used up
            left_at = _min(builder, i, builder.sub(mid, index(1)))
            right_at = _min(builder, j, builder.sub(hi, index(1)))
            left = [load(builder, src, left_at, dt) for src, _, dt in columns]
            right = [load(builder, src, right_at, dt) for src, _, dt in columns]
            dts = [dt for _, _, dt in columns[1:keys + 1]]
            take_right = builder.and_(builder.icmp_signed("<", j, hi), builder.or_(
                builder.icmp_signed(">=", i, mid), _less(builder, right[1:keys + 1], left[1:keys + 1], dts)))
            for (_, dst, dt), lv, rv in zip(columns, left, right):
                store(builder, builder.select(take_right, rv, lv), dst, k, dt)
            step = builder.zext(take_right, I64)
            return [builder.sub(_add(builder, i, index(1)), step), _add(builder, j, step)]

        _loop(builder, lo, hi, take, [lo, mid])

    blocks = builder.udiv(_add(builder, index(n - 1), twice), twice)
    _loop(builder, 0, blocks, block)


def _scratch_columns(step: Sort, buffers) -> list[tuple[int, np.dtype]]:
    """(byte offset, dtype) of the two copies of each sort column in scratch: the permutation (i64),
    then each key, every copy 8-byte aligned."""
    n = buffers[step.operands[0]].shape[step.dimension]
    dtypes = [_I64] + [buffers[name].dtype for name in step.operands[:step.num_keys]]
    out, at = [], 0
    for dt in dtypes:
        for _ in range(2):
            out.append((at, dt))
            at += -(-n * dt.itemsize // 8) * 8
    return out


def _sort(builder, step: Sort, buffers, ptrs, scratch) -> None:
    x = buffers[step.operands[0]]
    d = step.dimension
    outer, n, inner = prod(x.shape[:d]), x.shape[d], prod(x.shape[d + 1:])
    regions = [(builder.gep(scratch, [index(at)], inbounds=True, source_etype=ir.IntType(8)), dt)
               for at, dt in _scratch_columns(step, buffers)]
    first, second = regions[0::2], regions[1::2]  # the permutation's and each key's two copies
    keys = step.operands[:step.num_keys]

    def row(o, i):
        base = _add(builder, _mul(builder, o, n * inner), i)

        def fill(k):
            store(builder, k, first[0][0], k, _I64)
            at = _add(builder, base, _mul(builder, k, inner))
            for (ptr, dt), name in zip(first[1:], keys):
                store(builder, load(builder, ptrs[name], at, dt), ptr, k, dt)
        _loop(builder, 0, n, fill)

        src = [ptr for ptr, _ in first]
        dst = [ptr for ptr, _ in second]
        dts = [dt for _, dt in first]

        def one_pass(p, *carried):
            cur, nxt = list(carried[:len(src)]), list(carried[len(src):])
            _merge_pass(builder, list(zip(cur, nxt, dts)), len(keys), n, builder.shl(index(1), p))
            return nxt + cur
        done = _loop(builder, 0, (n - 1).bit_length(), one_pass, src + dst)
        perm = done[0]

        def gather(k):
            at = _add(builder, base, _mul(builder, k, inner))
            from_at = _add(builder, base, _mul(builder, load(builder, perm, k, _I64), inner))
            for name, out in zip(step.operands, step.outs):
                dt = buffers[name].dtype
                store(builder, load(builder, ptrs[name], from_at, dt), ptrs[out], at, dt)
        _loop(builder, 0, n, gather)

    if n:
        _loop(builder, 0, outer, lambda o: _loop(builder, 0, inner, lambda i: row(o, i)))
