"""Contraction steps (dot_general) as LLVM IR: SciPy's BLAS above a size threshold, loops below it.

Every contraction is read as out[b, m, n] = sum_k lhs[b, m, k] * rhs[b, k, n]: each operand's free
and contracting axes must each form one strided axis, else the operand is first transposed into
scratch. BLAS takes either stride as the unit one (transpose flags); a loop whose operand is laid out
against it (x @ w.T: w's rows along k) takes the other loop form or, for one output row or column,
the operands swapped, unless the model says the copy is cheaper (`_cost`). Batch axes are loops
around the product. BLAS (float32/float64) is Fortran: every argument
by pointer (the scalars are private constants of the module), column-major, so row-major
C = A @ B is computed as C^T = B^T A^T with the operands swapped. The loops (float16, ints, k == 1,
small products) are explicit vector code, in one of two forms: vectors along the output row summed
over k in order (ints wrap in their dtype and float16 sums in float32 from +0, as the reference:
bit for bit), or, for rows shorter than a vector, vectors along k summed across at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ember.backends.kernel import Buffer, Contraction
from ember.backends.llvm import blas
from ember.backends.llvm.types import I8, I32, PTR, element_ptr, index, load, memory_type, store

# BLAS is called when the generated loop would take at least this many vector multiply-add steps
# (`_loop_steps`): below it the loop wins, the call's fixed cost dominating (measured on one AVX-512
# core, float32 and float64: loop and sgemm tie at 16x16x16 (1024 steps), sgemm wins from 24**3
# (2304), 1.7x at 32**3; gemv ties at 16x16 and wins 3.5x at 32x32).
BLAS_MIN_STEPS = 2048

_BLAS_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}
_INT_MAX = 2 ** 31 - 1
_F16 = np.dtype(np.float16)
_FLOAT_BITS = {"half": 16, "float": 32, "double": 64}
_FLOAT_FLAGS = ("contract",)
_VECTOR_BYTES = 64  # one AVX-512 register; narrower targets split the vectors
_UNROLL = 4  # independent vector accumulators per block: hides the add latency
_REDUCE_STEPS = 4


# --- BLAS symbols ------------------------------------------------------------------------------------

def blas_symbols(ir_text: str | None = None) -> dict[str, int]:
    """Symbol name -> address of the BLAS routines and thread setter (blas.py) when `ir_text` (if
    given) calls them, for the JIT to register; nothing is registered here, and without a routine to
    resolve no library is loaded."""
    if ir_text is not None and not blas.uses_blas(ir_text):
        return {}
    return blas.symbols()


_symbol = blas.symbol


# --- the plan: how one contraction is computed ------------------------------------------------------

@dataclass(frozen=True)
class _Operand:
    """One operand: its axes grouped (batch in output order, free, contracting in the shared k order)
    and the element strides it is read with (its buffer's, or those of its copy in scratch)."""

    buffer: str
    shape: tuple[int, ...]
    batch: tuple[int, ...]
    free: tuple[int, ...]
    contract: tuple[int, ...]
    strides: tuple[int, ...]
    copy: tuple[int, ...] | None = None  # axis order of the transposed copy in scratch
    offset: int = 0  # byte offset of the copy in scratch

    def group(self, axes) -> tuple[int, int] | None:
        """(size, stride) of `axes` read as one strided axis (in this order), or None if they are not."""
        real = [a for a in axes if self.shape[a] != 1]
        if any(self.strides[a] != self.strides[b] * self.shape[b] for a, b in zip(real, real[1:])):
            return None
        return math.prod(self.shape[a] for a in real), (self.strides[real[-1]] if real else 1)

    @property
    def matrix(self) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """((free size, stride), (contract size, stride)), or None when either is not one axis."""
        f, c = self.group(self.free), self.group(self.contract)
        return None if f is None or c is None else (f, c)

    def copied(self, order: tuple[int, ...], offset: int) -> _Operand:
        dense = _row_major([self.shape[a] for a in order])
        strides = [0] * len(self.shape)
        for a, s in zip(order, dense):
            strides[a] = s
        return _Operand(self.buffer, self.shape, self.batch, self.free, self.contract, tuple(strides), order, offset)


@dataclass(frozen=True)
class _Plan:
    method: str  # nothing, zeros, gemm, gemv, loop
    dtype: np.dtype
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    lhs: _Operand
    rhs: _Operand
    scratch: int


def _row_major(shape) -> list[int]:
    out, acc = [], 1
    for n in reversed(list(shape)):
        out.append(acc)
        acc *= n
    return out[::-1]


def _fortran(p: int, sp: int, q: int, sq: int) -> tuple[str, int, int, int] | None:
    """A p x q BLAS operand whose element (i, j) is at i*sp + j*sq: (trans, stored rows, stored
    columns, leading dimension) of its column-major storage, or None when it has none. A contiguous
    row (p == 1) is read as one stored column: gemv then runs one dot product over it, where a
    1 x q matrix would be q axpy steps of one element each (2x slower than sdot at q = 10**6)."""
    if p == 1 and q >= 1 and (sq == 1 or q == 1):
        return "T", q, p, q
    if (sp == 1 or p == 1) and (ld := sq if q > 1 else p) >= max(1, p):
        return "N", p, q, ld
    if (sq == 1 or q == 1) and (ld := sp if p > 1 else q) >= max(1, q):
        return "T", q, p, ld
    return None


def _contract_order(lhs: _Operand, rhs: _Operand) -> tuple[int, ...]:
    """The order of the contracting pairs read as one k axis: one operand's memory order, preferring
    one in which both operands' contracting axes form one strided axis (no copy)."""
    pairs = range(len(lhs.contract))
    orders = [tuple(sorted(pairs, key=lambda i: op.contract[i])) for op in (lhs, rhs)]

    def fits(op, order):
        return op.group([op.contract[i] for i in order]) is not None

    return next((o for o in orders if fits(lhs, o) and fits(rhs, o)),
                next((o for o in orders if fits(lhs, o) or fits(rhs, o)), orders[0]))


def _operands(step: Contraction, buffers: dict[str, Buffer]) -> tuple[_Operand, _Operand]:
    (lc, rc), (lb, rb) = step.dimension_numbers
    ops = []
    for name, c, b in ((step.lhs, lc, lb), (step.rhs, rc, rb)):
        shape = tuple(buffers[name].shape)
        free = tuple(a for a in range(len(shape)) if a not in c and a not in b)
        ops.append(_Operand(name, shape, tuple(b), free, tuple(c), tuple(_row_major(shape))))
    lhs, rhs = ops
    # float16 sums in float32 in the reference's k order (bit for bit): no reordering to spare a copy
    order = tuple(range(len(lc))) if np.dtype(buffers[step.lhs].dtype) == _F16 else _contract_order(lhs, rhs)
    return tuple(_Operand(o.buffer, o.shape, o.batch, o.free, tuple(o.contract[i] for i in order), o.strides)
                 for o in (lhs, rhs))


def _method(dtype: np.dtype, m: int, n: int, k: int, batch, largest: int) -> str:
    """nothing (an empty output), zeros (k == 0), gemm, gemv or loop; `largest`: the most elements
    of an operand, which bounds the leading dimensions BLAS takes as 32-bit ints."""
    if m * n * math.prod(batch) == 0:
        return "nothing"
    if k == 0:
        return "zeros"
    loop = _loop_form(dtype, n, k)
    # k == 1: the reference multiplies (keeping -0.0), as the loop does; BLAS would add to +0.
    if dtype not in _BLAS_PREFIX or k == 1 or max(m, n, k, largest) > _INT_MAX \
            or _loop_steps(loop, dtype, m, n, k) < BLAS_MIN_STEPS:
        return loop
    return "gemv" if 1 in (m, n) else "gemm"


def _loop_form(dtype: np.dtype, n: int, k: int) -> str:
    """loop (vectors along the output row), or dots (vectors along k, then summed across) when the
    row is shorter than a vector and k is not; float16 always takes loop, the reference's k order."""
    lanes = _lanes(dtype)
    return "dots" if dtype != _F16 and n < lanes <= k else "loop"


def _lanes(dtype: np.dtype) -> int:
    return _VECTOR_BYTES // _acc_dtype(dtype).itemsize


def _loop_steps(form: str, dtype: np.dtype, m: int, n: int, k: int) -> int:
    """A loop's cost in vector multiply-adds: in loop form, fewer than _UNROLL vectors per row still
    wait for the add latency of each of the k steps; in dots form each sum across a vector costs about
    _REDUCE_STEPS more."""
    lanes = _lanes(dtype)
    if form == "dots":
        return m * n * (-(-k // lanes) + _REDUCE_STEPS)
    return m * k * max(-(-n // lanes), _UNROLL)


def _acc_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == _F16 else dtype


def _usable(method: str, op: _Operand, is_rhs: bool, n: int) -> bool:
    """Whether `op` can be read in place by `method` (else it is transposed into scratch first)."""
    mat = op.matrix
    if mat is None:
        return False
    (free, sf), (k, sk) = mat
    if method == "loop":  # the inner loop runs over rhs's free axis: contiguous
        return not is_rhs or free == 1 or sf == 1
    if method == "dots":  # vectors along k in both operands
        return k == 1 or sk == 1
    if method == "gemv" and (n == 1) == is_rhs:  # this operand is the vector
        return True
    return _fortran(free, sf, k, sk) is not None


def _plan(step: Contraction, buffers: dict[str, Buffer]) -> _Plan:
    lhs, rhs = _operands(step, buffers)
    dtype = np.dtype(buffers[step.lhs].dtype)
    batch = tuple(lhs.shape[a] for a in lhs.batch)
    m, n, k = (math.prod(op.shape[a] for a in axes) for op, axes in ((lhs, lhs.free), (rhs, rhs.free),
                                                                      (lhs, lhs.contract)))
    method = _method(dtype, m, n, k, batch, max(math.prod(lhs.shape), math.prod(rhs.shape)))
    plan = _planned(method, dtype, batch, m, n, k, lhs, rhs)
    if method not in ("loop", "dots") or not plan.scratch:
        return plan
    # A loop that would copy an operand (a transposed rhs in loop form: x @ w.T): the cheapest of both
    # loop forms and, for one output row or column (the same memory either way), both operand orders,
    # a copy costing a step per element (measured: a 64x64 copy costs about what 4096 steps do).
    # float16 keeps the loop form (the reference's k order); k == 1 too (dots would lose -0.0).
    forms = ("loop",) if dtype == _F16 or k == 1 else ("loop", "dots")
    orders = [(lhs, rhs, m, n)] + ([(rhs, lhs, n, m)] if 1 in (m, n) else [])
    options = [plan] + [_planned(f, dtype, batch, mm, nn, k, a, b) for a, b, mm, nn in orders for f in forms]
    return min(options, key=_cost)


def _planned(method: str, dtype: np.dtype, batch, m: int, n: int, k: int, lhs: _Operand, rhs: _Operand) -> _Plan:
    """The plan computing with `method`: each operand read in place, or transposed into scratch first."""
    offset, planned = 0, []
    for op, is_rhs in ((lhs, False), (rhs, True)):
        if method not in ("nothing", "zeros") and not _usable(method, op, is_rhs, n):
            inner = op.contract + op.free if method == "loop" and is_rhs else op.free + op.contract
            op = op.copied(op.batch + inner, offset)
            offset = _align(offset + math.prod(op.shape) * dtype.itemsize)
        planned.append(op)
    return _Plan(method, dtype, batch, m, n, k, planned[0], planned[1], offset)


def _cost(plan: _Plan) -> int:
    """A loop plan's cost in vector steps: the products, plus one step per element copied to scratch."""
    copied = sum(math.prod(op.shape) for op in (plan.lhs, plan.rhs) if op.copy is not None)
    return math.prod(plan.batch) * _loop_steps(plan.method, plan.dtype, plan.m, plan.n, plan.k) + copied


def _align(nbytes: int) -> int:
    return -(-nbytes // 64) * 64


def contraction_copies(step: Contraction, buffers: dict[str, Buffer]) -> tuple[str, ...]:
    """The operand buffers `step`'s plan transposes into scratch before the product (none when both
    are read in place, with BLAS transpose flags, strides or the operands swapped): for tests and dumps."""
    plan = _plan(step, buffers)
    return tuple(op.buffer for op in (plan.lhs, plan.rhs) if op.copy is not None)


def contraction_scratch_bytes(step: Contraction, buffers: dict[str, Buffer]) -> int:
    """Bytes of scratch `emit_contraction` needs for `step` (its operands transposed for the product)."""
    return _plan(step, buffers).scratch


# --- emission ---------------------------------------------------------------------------------------

def emit_contraction(builder: ir.IRBuilder, step: Contraction, buffers: dict[str, Buffer],
                     ptrs: dict[str, ir.Value], scratch: ir.Value) -> None:
    """Emit IR at `builder` computing `step` into its out buffer; `scratch` holds
    `contraction_scratch_bytes(step, buffers)` bytes, 64-byte aligned."""
    plan = _plan(step, buffers)
    out = ptrs[step.out]
    if plan.method == "nothing":
        return
    if plan.method == "zeros":
        total = math.prod(buffers[step.out].shape)
        _for(builder, total, lambda i: store(builder, _zero(plan.dtype), out, i, plan.dtype))
        return
    lhs = _source(builder, plan.lhs, ptrs, scratch, plan.dtype)
    rhs = _source(builder, plan.rhs, ptrs, scratch, plan.dtype)
    body = _BODIES[plan.method]
    strides = [(lb, rb, ob) for lb, rb, ob in zip((plan.lhs.strides[a] for a in plan.lhs.batch),
                                                  (plan.rhs.strides[a] for a in plan.rhs.batch),
                                                  (s * plan.m * plan.n for s in _row_major(plan.batch)))]
    _nest(builder, plan.batch, strides, [index(0)] * 3,
          lambda offs: body(builder, plan, (lhs, offs[0]), (rhs, offs[1]), (out, offs[2]), scratch))


def _source(builder, op: _Operand, ptrs, scratch, dtype) -> ir.Value:
    """The pointer `op` is read from: its buffer, or its transposed copy made here in scratch."""
    if op.copy is None:
        return ptrs[op.buffer]
    dst = builder.gep(scratch, [index(op.offset)], inbounds=True, source_etype=I8)
    src_strides = _row_major(op.shape)
    sizes = [op.shape[a] for a in op.copy]
    strides = [(src_strides[a], s) for a, s in zip(op.copy, _row_major(sizes))]
    src = ptrs[op.buffer]
    _nest(builder, sizes, strides, [index(0)] * 2,
          lambda offs: store(builder, load(builder, src, offs[0], dtype), dst, offs[1], dtype))
    return dst


def _gemm(builder, plan: _Plan, lhs, rhs, out, scratch) -> None:
    """C^T (n x m, column-major: row-major C) = op(rhs) (n x k) @ op(lhs) (k x m)."""
    (_, lsm), (_, lsk) = plan.lhs.matrix
    (_, rsn), (_, rsk) = plan.rhs.matrix
    ta, _, _, lda = _fortran(plan.n, rsn, plan.k, rsk)
    tb, _, _, ldb = _fortran(plan.k, lsk, plan.m, lsm)
    c = _Consts(builder.module, plan.dtype)
    args = [c.char(ta), c.char(tb), c.int(plan.n), c.int(plan.m), c.int(plan.k), c.scalar(1.0),
            _at(builder, rhs, plan.dtype), c.int(lda), _at(builder, lhs, plan.dtype), c.int(ldb),
            c.scalar(0.0), _at(builder, out, plan.dtype), c.int(plan.n)]
    blas.emit_threads(builder, plan.m * plan.n * plan.k)
    builder.call(_declare(builder.module, plan.dtype, "gemm", 13), args)


def _gemv(builder, plan: _Plan, lhs, rhs, out, scratch) -> None:
    """y = A x with A the operand whose free size is not 1 and x the other (a vector over k)."""
    if plan.n == 1:
        (rows, sr), (_, sk) = plan.lhs.matrix
        (_, _), (_, incx) = plan.rhs.matrix
        a, x = lhs, rhs
    else:
        (rows, sr), (_, sk) = plan.rhs.matrix
        (_, _), (_, incx) = plan.lhs.matrix
        a, x = rhs, lhs
    trans, stored_rows, stored_cols, lda = _fortran(rows, sr, plan.k, sk)
    c = _Consts(builder.module, plan.dtype)
    args = [c.char(trans), c.int(stored_rows), c.int(stored_cols), c.scalar(1.0), _at(builder, a, plan.dtype),
            c.int(lda), _at(builder, x, plan.dtype), c.int(incx), c.scalar(0.0), _at(builder, out, plan.dtype),
            c.int(1)]
    blas.emit_threads(builder, plan.m * plan.n * plan.k)
    builder.call(_declare(builder.module, plan.dtype, "gemv", 11), args)


def _loop(builder, plan: _Plan, lhs, rhs, out, scratch) -> None:
    """out[i, j:j+w] = sum over k, in order, of lhs[i, k] * rhs[k, j:j+w]: accumulators are vectors
    along the contiguous output row (blocks of _UNROLL vectors, then the rest), held in registers
    across k. float16 accumulates in float32; k == 1 starts from -0.0 (the reference multiplies, so
    signed zeros survive), else from +0 (the reference's sum)."""
    acc_dt = _acc_dtype(plan.dtype)
    lanes = _VECTOR_BYTES // acc_dt.itemsize
    per_block = lanes * _UNROLL
    blocks, rest = divmod(plan.n, per_block)
    widths = [lanes] * (rest // lanes) + ([rest % lanes] if rest % lanes else [])

    def row(i):
        if blocks:
            _for(builder, blocks, lambda jb: _block(builder, plan, lhs, rhs, out, acc_dt, i,
                                                    builder.mul(jb, index(per_block)), [lanes] * _UNROLL))
        if widths:
            _block(builder, plan, lhs, rhs, out, acc_dt, i, index(blocks * per_block), widths)

    _for(builder, plan.m, row)


def _block(builder, plan: _Plan, lhs, rhs, out, acc_dt, i, j0, widths) -> None:
    """out[i, j0 : j0 + sum(widths)], one vector accumulator of each width, summed over k in order."""
    dt = plan.dtype
    (_, lsm), (_, lsk) = plan.lhs.matrix
    (_, rsn), (_, rsk) = plan.rhs.matrix
    starts = [sum(widths[:w]) for w in range(len(widths))]
    init = -0.0 if plan.k == 1 and acc_dt.kind == "f" else 0
    accs = [ir.Constant(ir.VectorType(memory_type(acc_dt), w), [init] * w) for w in widths]

    def term(kk, *accs):
        a = _widen(builder, load(builder, lhs[0], _offset(builder, lhs[1], (i, lsm), (kk, lsk)), dt), acc_dt)
        r_row = _offset(builder, rhs[1], (kk, rsk), (j0, rsn))
        return [_madd(builder, acc, _splat(builder, a, w),
                      _widen(builder, _load_vector(builder, rhs[0], builder.add(r_row, index(s * rsn)), dt, w), acc_dt))
                for acc, s, w in zip(accs, starts, widths)]

    accs = _for(builder, plan.k, term, accs)
    out_row = _offset(builder, out[1], (i, plan.n), (j0, 1))
    for acc, s, w in zip(accs, starts, widths):
        value = builder.fptrunc(acc, ir.VectorType(memory_type(dt), w)) if dt != acc_dt else acc
        ptr = element_ptr(builder, out[0], builder.add(out_row, index(s)), dt)
        builder.store(value, ptr, align=dt.itemsize)


def _dots(builder, plan: _Plan, lhs, rhs, out, scratch) -> None:
    """out[i, j] = sum of lhs[i, :] * rhs[j, :] (both contiguous along k): vector accumulators along
    k (blocks of _UNROLL vectors, then the rest), reassociated, then summed across."""
    lanes = _lanes(plan.dtype)
    per_block = lanes * _UNROLL
    blocks, rest = divmod(plan.k, per_block)
    widths = [lanes] * (rest // lanes) + ([rest % lanes] if rest % lanes else [])
    (_, lsm), _ = plan.lhs.matrix
    (_, rsn), _ = plan.rhs.matrix
    typ = memory_type(plan.dtype)

    def element(i, j):
        lrow, rrow = _offset(builder, lhs[1], (i, lsm)), _offset(builder, rhs[1], (j, rsn))

        def block(k0, widths, *accs):
            starts = [sum(widths[:w]) for w in range(len(widths))]
            return [_madd(builder, acc, *(_load_vector(builder, p, builder.add(builder.add(row, k0), index(s)),
                                                       plan.dtype, w) for p, row in ((lhs[0], lrow), (rhs[0], rrow))),
                          flags=("reassoc", "contract"))
                    for acc, s, w in zip(accs, starts, widths)]

        sums = []
        if blocks:
            zeros = [ir.Constant(ir.VectorType(typ, lanes), [0] * lanes)] * _UNROLL
            accs = _for(builder, blocks, lambda kb, *accs: block(builder.mul(kb, index(per_block)),
                                                                    [lanes] * _UNROLL, *accs), zeros)
            sums.append(_reduce(builder, _tree(builder, accs)))
        if widths:
            zeros = [ir.Constant(ir.VectorType(typ, w), [0] * w) for w in widths]
            sums += [_reduce(builder, a) for a in block(index(blocks * per_block), widths, *zeros)]
        store(builder, _tree(builder, sums), out[0], _offset(builder, out[1], (i, plan.n), (j, 1)), plan.dtype)

    _for(builder, plan.m, lambda i: _for(builder, plan.n, lambda j: element(i, j)))


_BODIES: dict[str, Callable] = {"gemm": _gemm, "gemv": _gemv, "loop": _loop, "dots": _dots}


# --- small IR helpers -------------------------------------------------------------------------------

def _for(builder: ir.IRBuilder, n: int, body: Callable, carry=()) -> list:
    """for i in range(n): carry = body(i, *carry), for n >= 1 (bottom-tested; n == 1 emits the body
    once); returns the final carry (values that live across iterations become phis)."""
    if n == 1:
        return list(body(index(0), *carry) or ())
    pre = builder.block
    loop = builder.append_basic_block("dot.loop")
    builder.branch(loop)
    builder.position_at_end(loop)
    i = builder.phi(index(0).type)
    phis = [builder.phi(v.type) for v in carry]
    for phi, v in zip([i, *phis], [index(0), *carry]):
        phi.add_incoming(v, pre)
    new = list(body(i, *phis) or ())
    nxt = builder.add(i, index(1), flags=("nuw", "nsw"))
    for phi, v in zip([i, *phis], [nxt, *new]):
        phi.add_incoming(v, builder.block)
    done = builder.append_basic_block("dot.done")
    builder.cbranch(builder.icmp_unsigned("<", nxt, index(n)), loop, done)
    builder.position_at_end(done)
    return new


def _nest(builder, sizes, strides, offsets: list, body: Callable[[list], None]) -> None:
    """Nested loops over `sizes` (outer first); `body` gets, per pointer, offsets[p] + sum(i * stride)."""
    if not sizes:
        body(offsets)
        return

    def inner(i):
        moved = [builder.add(o, builder.mul(i, index(s))) for o, s in zip(offsets, strides[0])]
        _nest(builder, sizes[1:], strides[1:], moved, body)

    _for(builder, sizes[0], inner)


def _offset(builder, base: ir.Value, *terms: tuple[ir.Value, int]) -> ir.Value:
    for i, stride in terms:
        base = builder.add(base, builder.mul(i, index(stride)))
    return base


def _at(builder, ptr_offset: tuple[ir.Value, ir.Value], dtype) -> ir.Value:
    return element_ptr(builder, ptr_offset[0], ptr_offset[1], dtype)


def _zero(dtype) -> ir.Constant:
    return ir.Constant(memory_type(dtype), 0)


def _widen(builder, value, acc_dtype):
    """float16 (scalar or vector) to the float32 accumulator type."""
    typ = memory_type(acc_dtype)
    if isinstance(value.type, ir.VectorType):
        typ = ir.VectorType(typ, value.type.count)
    return builder.fpext(value, typ) if value.type != typ else value


def _splat(builder, scalar, width: int):
    vec = builder.insert_element(ir.Constant(ir.VectorType(scalar.type, width), None), scalar, ir.Constant(I32, 0))
    return builder.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, width), None))


def _load_vector(builder, ptr, offset, dtype, width: int):
    """Elements offset .. offset + width - 1 (contiguous) as one vector."""
    return builder.load(element_ptr(builder, ptr, offset, dtype), typ=ir.VectorType(memory_type(dtype), width),
                        align=np.dtype(dtype).itemsize)


def _is_int(value) -> bool:
    return isinstance(getattr(value.type, "element", value.type), ir.IntType)


def _madd(builder, acc, a, b, flags=_FLOAT_FLAGS):
    if _is_int(acc):  # wraps in the dtype, as the reference
        return builder.add(acc, builder.mul(a, b))
    return builder.fadd(acc, builder.fmul(a, b, flags=flags), flags=flags)


def _tree(builder, values: list):
    """The sum of `values` (same type), pairwise."""
    while len(values) > 1:
        pairs = [(builder.add if _is_int(values[0]) else builder.fadd)(a, b, flags=() if _is_int(a) else ("reassoc",))
                 for a, b in zip(values[::2], values[1::2])]
        values = pairs + values[len(pairs) * 2:]
    return values[0]


def _reduce(builder, vector):
    """The sum of a vector's elements (reassociated)."""
    elem, width = vector.type.element, vector.type.count
    suffix = f"v{width}{'i' if _is_int(vector) else 'f'}{elem.width if _is_int(vector) else _FLOAT_BITS[str(elem)]}"
    if _is_int(vector):
        fn = _intrinsic(builder.module, f"llvm.vector.reduce.add.{suffix}", elem, [vector.type])
        return builder.call(fn, [vector])
    fn = _intrinsic(builder.module, f"llvm.vector.reduce.fadd.{suffix}", elem, [elem, vector.type])
    return builder.call(fn, [ir.Constant(elem, -0.0), vector], fastmath=("reassoc",))


def _intrinsic(module: ir.Module, name: str, ret: ir.Type, args: list) -> ir.Function:
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(ret, args), name)


def _declare(module: ir.Module, dtype, routine: str, nargs: int) -> ir.Function:
    name = _symbol(_BLAS_PREFIX[dtype] + routine)
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * nargs), name)


class _Consts:
    """Pointers to private module constants: the by-reference scalar arguments of a BLAS call."""

    def __init__(self, module: ir.Module, dtype):
        self.module, self.dtype = module, np.dtype(dtype)

    def _get(self, typ: ir.Type, value, tag: str) -> ir.GlobalVariable:
        name = f"ember.blas.{tag}"
        if name not in self.module.globals:
            g = ir.GlobalVariable(self.module, typ, name)
            g.initializer, g.global_constant, g.linkage, g.unnamed_addr = ir.Constant(typ, value), True, "private", True
        return self.module.globals[name]

    def char(self, c: str):
        return self._get(I8, ord(c), f"char.{c}")

    def int(self, v: int):
        return self._get(I32, int(v), f"i32.{int(v)}")

    def scalar(self, v: float):
        return self._get(memory_type(self.dtype), v, f"{self.dtype.name}.{v!r}")
