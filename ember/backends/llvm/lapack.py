"""Factorization steps (cholesky, triangular_solve, lu) as calls of the LAPACK and BLAS that SciPy ships.

The routines are reached as dot.py reaches gemm: by symbols that blas.py binds to SciPy's OpenBLAS
(Ember's private copy, or scipy.linalg.cython_blas/cython_lapack), Fortran ABI (every argument by
pointer), one call per matrix of the stack. LAPACK works in place, so each call runs on the step's
output buffer holding a copy of the operand; Fortran is column-major, so a row-major matrix is its
transpose there:
- cholesky: potrf('U') of the row-major matrix is L^T in column-major, which is L row-major; then the
  strict upper triangle is zeroed, and a failed factorization (info != 0) made NaN below it, as JAX.
- triangular_solve: op(A) X = B row-major is X^T op(A)^T = B^T column-major, so trsm runs with the
  other side and the other triangle, the same transpose flag.
- lu: getrf pivots rows, so the matrix is transposed into column-major scratch and back; its 1-based
  pivots become 0-based in place, and the permutation is the swaps applied to 0..m-1.
LAPACK's `info` lives in scratch: no call allocates.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod

import numpy as np
from llvmlite import ir

from ember.backends.kernel import Buffer, Factorization
from ember.backends.llvm import blas
from ember.backends.llvm.dot import _Consts, _declare
from ember.backends.llvm.indexing import ALIGN, _loop, _memmove
from ember.backends.llvm.types import I32, I64, element_ptr, index, load, memory_type, store

_INFO_BYTES = ALIGN  # LAPACK's info (an i32), on its own granule of scratch


def step_scratch_bytes(step: Factorization, buffers: Mapping[str, Buffer]) -> int:
    """Bytes of scratch `emit_step` needs: lu a column-major copy of one matrix and info, cholesky info."""
    if step.routine == "lu":
        x = buffers[step.operands[0]]
        return -(-prod(x.shape[-2:]) * x.dtype.itemsize // ALIGN) * ALIGN + _INFO_BYTES
    return _INFO_BYTES if step.routine == "cholesky" else 0


def emit_step(builder: ir.IRBuilder, step: Factorization, buffers: Mapping[str, Buffer],
              ptrs: Mapping[str, ir.Value], scratch: ir.Value) -> None:
    """Append the calls computing `step` at the builder's position, which ends after them."""
    if any(prod(buffers[b].shape) == 0 for b in step.operands + step.outs[:1]):
        _empty(builder, step, buffers, ptrs)
        return
    _ROUTINES[step.routine](builder, step, buffers, ptrs, scratch)


def _empty(builder, step: Factorization, buffers, ptrs) -> None:
    """No matrix element: lu's permutation is still the identity of each (zero-column) stack entry."""
    if step.routine != "lu":
        return
    perm = buffers[step.outs[2]]
    m = perm.shape[-1]
    if prod(perm.shape):
        _loop(builder, 0, prod(perm.shape), lambda t: store(
            builder, builder.trunc(builder.srem(t, index(m)), I32), ptrs[perm.name], t, np.int32))


def _matrices(builder, count: int, body) -> None:
    """body(b) for each matrix b of a stack of `count`."""
    _loop(builder, 0, count, body)


def _offset(builder, b: ir.Value, size: int) -> ir.Value:
    return builder.mul(b, index(size), flags=["nsw", "nuw"])


def _at(builder, ptr: ir.Value, b: ir.Value, size: int, dtype) -> ir.Value:
    """The address of matrix b of a stack of matrices of `size` elements at `ptr`."""
    return element_ptr(builder, ptr, _offset(builder, b, size), dtype)


def _info(builder, scratch: ir.Value, at: int = 0) -> ir.Value:
    return builder.gep(scratch, [index(at)], inbounds=True, source_etype=ir.IntType(8))


# --- cholesky ----------------------------------------------------------------------------------------

def _cholesky(builder, step: Factorization, buffers, ptrs, scratch) -> None:
    x = buffers[step.operands[0]]
    n, dt = x.shape[-1], x.dtype
    size = n * n
    c = _Consts(builder.module, dt)
    potrf = _declare(builder.module, dt, "potrf", 5)
    info = _info(builder, scratch)
    nan = ir.Constant(memory_type(dt), float("nan"))
    zero = ir.Constant(memory_type(dt), 0.0)

    def matrix(b):
        dst = _at(builder, ptrs[step.outs[0]], b, size, dt)
        _memmove(builder, dst, _at(builder, ptrs[x.name], b, size, dt), size * dt.itemsize)
        blas.emit_threads(builder, n * n * n // 3)
        builder.call(potrf, [c.char("U"), c.int(n), dst, c.int(n), info])
        failed = builder.icmp_signed("!=", builder.load(info, typ=I32), ir.Constant(I32, 0))

        def row(i):
            def element(j):
                at = builder.add(builder.mul(i, index(n)), j)
                keep = builder.select(failed, nan, load(builder, dst, at, dt))
                store(builder, builder.select(builder.icmp_signed(">", j, i), zero, keep), dst, at, dt)
            _loop(builder, 0, n, element)
        _loop(builder, 0, n, row)

    _matrices(builder, prod(x.shape[:-2]), matrix)


# --- triangular solve ----------------------------------------------------------------------------------

def _triangular_solve(builder, step: Factorization, buffers, ptrs, scratch) -> None:
    a, rhs = (buffers[name] for name in step.operands)
    dt = rhs.dtype
    n = a.shape[-1]
    rows, cols = rhs.shape[-1], rhs.shape[-2]  # B^T column-major
    c = _Consts(builder.module, dt)
    trsm = _declare(builder.module, dt, "trsm", 11)
    flags = [c.char("R" if step.param("left_side") else "L"), c.char("U" if step.param("lower") else "L"),
             c.char("T" if step.param("transpose_a") else "N"), c.char("U" if step.param("unit_diagonal") else "N")]

    def matrix(b):
        dst = _at(builder, ptrs[step.outs[0]], b, rows * cols, dt)
        _memmove(builder, dst, _at(builder, ptrs[rhs.name], b, rows * cols, dt), rows * cols * dt.itemsize)
        blas.emit_threads(builder, n * rows * cols)
        builder.call(trsm, flags + [c.int(rows), c.int(cols), c.scalar(1.0), _at(builder, ptrs[a.name], b, n * n, dt),
                                    c.int(n), dst, c.int(rows)])

    _matrices(builder, prod(rhs.shape[:-2]), matrix)


# --- lu --------------------------------------------------------------------------------------------------

def _lu(builder, step: Factorization, buffers, ptrs, scratch) -> None:
    x = buffers[step.operands[0]]
    m, n = x.shape[-2:]
    k, dt = min(m, n), x.dtype
    c = _Consts(builder.module, dt)
    getrf = _declare(builder.module, dt, "getrf", 6)
    col_major = scratch
    info = _info(builder, scratch, step_scratch_bytes(step, buffers) - _INFO_BYTES)
    out, piv_out, perm_out = (ptrs[name] for name in step.outs)

    def matrix(b):
        _relayout(builder, _at(builder, ptrs[x.name], b, m * n, dt), col_major, m, n, dt, to_column_major=True)
        piv = _at(builder, piv_out, b, k, np.int32)
        blas.emit_threads(builder, m * n * k)
        builder.call(getrf, [c.int(m), c.int(n), col_major, c.int(max(m, 1)), piv, info])
        _relayout(builder, col_major, _at(builder, out, b, m * n, dt), m, n, dt, to_column_major=False)
        _loop(builder, 0, k, lambda t: store(builder, builder.sub(load(builder, piv, t, np.int32), ir.Constant(I32, 1)),
                                             piv, t, np.int32))
        perm = _at(builder, perm_out, b, m, np.int32)
        _loop(builder, 0, m, lambda i: store(builder, builder.trunc(i, I32), perm, i, np.int32))

        def swap(t):
            p = builder.sext(load(builder, piv, t, np.int32), I64)
            here, there = load(builder, perm, t, np.int32), load(builder, perm, p, np.int32)
            store(builder, there, perm, t, np.int32)
            store(builder, here, perm, p, np.int32)
        _loop(builder, 0, k, swap)

    _matrices(builder, prod(x.shape[:-2]), matrix)


def _relayout(builder, src, dst, m: int, n: int, dt, to_column_major: bool) -> None:
    """Copy an m x n matrix from row-major `src` to column-major `dst`, or back (element (i, j) at
    i n + j row-major, i + j m column-major)."""
    def row(i):
        def element(j):
            row_major = builder.add(builder.mul(i, index(n)), j)
            column_major = builder.add(builder.mul(j, index(m)), i)
            frm, to = (row_major, column_major) if to_column_major else (column_major, row_major)
            store(builder, load(builder, src, frm, dt), dst, to, dt)
        _loop(builder, 0, n, element)
    _loop(builder, 0, m, row)


_ROUTINES = {"cholesky": _cholesky, "triangular_solve": _triangular_solve, "lu": _lu}
