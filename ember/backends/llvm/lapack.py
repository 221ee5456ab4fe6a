"""Factorization steps (cholesky, triangular_solve, lu, qr, eigh, svd) as calls of the LAPACK and BLAS that
SciPy ships.

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
- qr (geqrf, then orgqr over the reflectors), eigh (syevd) and svd (gesdd) run as the reference runs
  them: on a column-major copy in scratch, with the workspace sizes it passes (prims.linalg.lapack_work),
  their factors transposed back; eigh and svd give NaN where LAPACK fails, as JAX. The routines compiled
  from Fortran get a hidden length per CHARACTER argument.
LAPACK's `info` and workspaces live in scratch: no call allocates.
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
from ember.backends.llvm.types import I32, I64, PTR, element_ptr, index, load, memory_type, store
from ember.tracer.prims.linalg import lapack_work


def _regions(step: Factorization, buffers: Mapping[str, Buffer]) -> dict[str, tuple[int, int, np.dtype]]:
    """name -> (byte offset, elements, dtype) of each region of scratch the routine works in: matrices in
    column-major order, LAPACK's workspaces (sized by prims.linalg.lapack_work, as the reference) and
    its info, each 64-byte aligned."""
    x = buffers[step.operands[0]]
    dt, i32 = x.dtype, np.dtype(np.int32)
    m, n = x.shape[-2:]
    k = min(m, n)
    wanted: list[tuple[str, int, np.dtype]] = []
    if step.routine == "lu":
        wanted = [("a", m * n, dt)]
    elif step.routine == "qr":
        cols = m if step.param("full_matrices") else k
        work = max(lapack_work("geqrf", dt, m, n)[0], lapack_work("orgqr", dt, m, cols)[0])
        wanted = [("a", m * max(n, cols), dt), ("tau", k, dt), ("work", work, dt)]
    elif step.routine == "eigh":
        work, iwork = lapack_work("syevd", dt, n, n, lower=step.param("lower"))
        wanted = [("a", n * n, dt), ("work", work, dt), ("iwork", iwork, i32)]
    elif step.routine == "svd":
        uv, full = step.param("compute_uv"), step.param("full_matrices")
        work, iwork = lapack_work("gesdd", dt, m, n, compute_uv=uv, full_matrices=full)
        u_cols, vt_rows = (m, n) if full else (k, k)
        wanted = [("a", m * n, dt), ("u", m * u_cols if uv else 1, dt), ("vt", vt_rows * n if uv else 1, dt),
                  ("work", work, dt), ("iwork", iwork, i32)]
    if step.routine != "triangular_solve":
        wanted.append(("info", 1, i32))
    regions, at = {}, 0
    for name, count, dtype in wanted:
        regions[name] = (at, count, np.dtype(dtype))
        at += -(-count * np.dtype(dtype).itemsize // ALIGN) * ALIGN
    return regions


def step_scratch_bytes(step: Factorization, buffers: Mapping[str, Buffer]) -> int:
    """Bytes of scratch `emit_step` needs (its regions, one after another)."""
    regions = _regions(step, buffers)
    return max((o + -(-c * d.itemsize // ALIGN) * ALIGN for o, c, d in regions.values()), default=0)


def emit_step(builder: ir.IRBuilder, step: Factorization, buffers: Mapping[str, Buffer],
              ptrs: Mapping[str, ir.Value], scratch: ir.Value) -> None:
    """Append the calls computing `step` at the builder's position, which ends after them."""
    if any(prod(buffers[b].shape) == 0 for b in step.operands + step.outs[:1]):
        _empty(builder, step, buffers, ptrs)
        return
    regions = {name: builder.gep(scratch, [index(at)], inbounds=True, source_etype=ir.IntType(8))
               for name, (at, _, _) in _regions(step, buffers).items()}
    _ROUTINES[step.routine](builder, step, buffers, ptrs, regions)


def _empty(builder, step: Factorization, buffers, ptrs) -> None:
    """No matrix element: lu's permutation is still the identity of each (zero-column) stack entry, and qr's
    q and svd's u and vt the identity's columns (as the reference); every other output is empty."""
    if step.routine == "lu":
        perm = buffers[step.outs[2]]
        m = perm.shape[-1]
        _loop(builder, 0, prod(perm.shape), lambda t: store(
            builder, builder.trunc(builder.srem(t, index(m)), I32), ptrs[perm.name], t, np.int32))
        return
    eyes = {"qr": step.outs[:1], "svd": step.outs[1:]}.get(step.routine, ())
    for name in eyes:
        out = buffers[name]
        rows, cols = out.shape[-2:]

        def element(t, out=out, rows=rows, cols=cols):
            inner = builder.srem(t, index(rows * cols))
            diagonal = builder.icmp_signed("==", builder.sdiv(inner, index(cols)), builder.srem(inner, index(cols)))
            one, zero = (ir.Constant(memory_type(out.dtype), v) for v in (1.0, 0.0))
            store(builder, builder.select(diagonal, one, zero), ptrs[out.name], t, out.dtype)
        _loop(builder, 0, prod(out.shape), element)


def _matrices(builder, count: int, body) -> None:
    """body(b) for each matrix b of a stack of `count`."""
    _loop(builder, 0, count, body)


def _offset(builder, b: ir.Value, size: int) -> ir.Value:
    return builder.mul(b, index(size), flags=["nsw", "nuw"])


def _at(builder, ptr: ir.Value, b: ir.Value, size: int, dtype) -> ir.Value:
    """The address of matrix b of a stack of matrices of `size` elements at `ptr`."""
    return element_ptr(builder, ptr, _offset(builder, b, size), dtype)


# --- cholesky ----------------------------------------------------------------------------------------

def _cholesky(builder, step: Factorization, buffers, ptrs, regions) -> None:
    """potrf('U') on the copy in the output, then zeros above the diagonal and NaN below where it failed."""
    x = buffers[step.operands[0]]
    n, dt = x.shape[-1], x.dtype
    size = n * n
    c = _Consts(builder.module, dt)
    potrf = _declare(builder.module, dt, "potrf", 5)
    info = regions["info"]
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

def _triangular_solve(builder, step: Factorization, buffers, ptrs, regions) -> None:
    """trsm on the copy of b in the output: the other side and triangle, column-major (module docstring)."""
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

def _lu(builder, step: Factorization, buffers, ptrs, regions) -> None:
    """getrf on a column-major copy; 0-based pivots and the permutation their swaps make."""
    x = buffers[step.operands[0]]
    m, n = x.shape[-2:]
    k, dt = min(m, n), x.dtype
    c = _Consts(builder.module, dt)
    getrf = _declare(builder.module, dt, "getrf", 6)
    col_major, info = regions["a"], regions["info"]
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


def _relayout(builder, src, dst, m: int, n: int, dt, to_column_major: bool, ld: int | None = None) -> None:
    """Copy an m x n matrix from row-major `src` to column-major `dst`, or back (element (i, j) at
    i n + j row-major, i + j ld column-major; ld defaults to m)."""
    ld = m if ld is None else ld

    def row(i):
        def element(j):
            row_major = builder.add(builder.mul(i, index(n)), j)
            column_major = builder.add(builder.mul(j, index(ld)), i)
            frm, to = (row_major, column_major) if to_column_major else (column_major, row_major)
            store(builder, load(builder, src, frm, dt), dst, to, dt)
        _loop(builder, 0, n, element)
    _loop(builder, 0, m, row)


def _fill(builder, dst, count: int, value: ir.Value, dt) -> None:
    _loop(builder, 0, count, lambda t: store(builder, value, dst, t, dt))


def _failed(builder, info: ir.Value) -> ir.Value:
    return builder.icmp_signed("!=", builder.load(info, typ=I32), ir.Constant(I32, 0))


def _declare_fortran(module: ir.Module, dtype, routine: str, pointers: int, characters: int) -> ir.Function:
    """A LAPACK routine compiled from Fortran: its pointer arguments, then one hidden length (i64) per
    CHARACTER argument, as gfortran passes them."""
    name = blas.symbol(("s" if np.dtype(dtype) == np.float32 else "d") + routine)
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * pointers + [I64] * characters), name)


# --- qr ----------------------------------------------------------------------------------------------------

def _qr(builder, step: Factorization, buffers, ptrs, regions) -> None:
    """geqrf, R from the upper triangle, then orgqr over the reflectors (zero columns beyond n for a full q)."""
    x = buffers[step.operands[0]]
    m, n = x.shape[-2:]
    dt, k = x.dtype, min(m, n)
    cols = m if step.param("full_matrices") else k
    c = _Consts(builder.module, dt)
    geqrf = _declare(builder.module, dt, "geqrf", 8)
    orgqr = _declare(builder.module, dt, "orgqr", 9)
    a, tau, work, info = (regions[r] for r in ("a", "tau", "work", "info"))
    lwork_qr = lapack_work("geqrf", dt, m, n)[0]
    lwork_q = lapack_work("orgqr", dt, m, cols)[0]
    q_out, r_out = (ptrs[name] for name in step.outs)
    zero = ir.Constant(memory_type(dt), 0.0)

    def matrix(b):
        _relayout(builder, _at(builder, ptrs[x.name], b, m * n, dt), a, m, n, dt, to_column_major=True)
        blas.emit_threads(builder, m * n * k)
        builder.call(geqrf, [c.int(m), c.int(n), a, c.int(m), tau, work, c.int(lwork_qr), info])
        r = _at(builder, r_out, b, cols * n, dt)
        _relayout(builder, a, r, cols, n, dt, to_column_major=False, ld=m)

        # R's strict lower part holds reflectors: zeros there
        _loop(builder, 1, cols, lambda i: _loop(builder, 0, builder.select(
            builder.icmp_signed("<", i, index(n)), i, index(n)), lambda j: store(
            builder, zero, r, builder.add(builder.mul(i, index(n)), j), dt)))
        if cols > n:  # the reflectors' matrix gets zero columns up to q's
            _fill(builder, element_ptr(builder, a, index(m * n), dt), m * (cols - n), zero, dt)
        builder.call(orgqr, [c.int(m), c.int(cols), c.int(k), a, c.int(m), tau, work, c.int(lwork_q), info])
        _relayout(builder, a, _at(builder, q_out, b, m * cols, dt), m, cols, dt, to_column_major=False)

    _matrices(builder, prod(x.shape[:-2]), matrix)


# --- eigh --------------------------------------------------------------------------------------------------

def _eigh(builder, step: Factorization, buffers, ptrs, regions) -> None:
    """syevd('V', lower or upper) on a column-major copy: the eigenvectors overwrite it; NaN if it fails."""
    x = buffers[step.operands[0]]
    n, dt = x.shape[-1], x.dtype
    c = _Consts(builder.module, dt)
    syevd = _declare_fortran(builder.module, dt, "syevd", 11, 2)
    a, work, iwork, info = (regions[r] for r in ("a", "work", "iwork", "info"))
    lwork, liwork = lapack_work("syevd", dt, n, n, lower=step.param("lower"))
    v_out, w_out = (ptrs[name] for name in step.outs)
    nan = ir.Constant(memory_type(dt), float("nan"))
    one = ir.Constant(I64, 1)

    def matrix(b):
        _relayout(builder, _at(builder, ptrs[x.name], b, n * n, dt), a, n, n, dt, to_column_major=True)
        w = _at(builder, w_out, b, n, dt)
        blas.emit_threads(builder, n * n * n)
        builder.call(syevd, [c.char("V"), c.char("L" if step.param("lower") else "U"), c.int(n), a, c.int(n), w,
                             work, c.int(lwork), iwork, c.int(liwork), info, one, one])
        v = _at(builder, v_out, b, n * n, dt)
        _relayout(builder, a, v, n, n, dt, to_column_major=False)
        with builder.if_then(_failed(builder, info)):
            _fill(builder, v, n * n, nan, dt)
            _fill(builder, w, n, nan, dt)

    _matrices(builder, prod(x.shape[:-2]), matrix)


# --- svd ---------------------------------------------------------------------------------------------------

def _svd(builder, step: Factorization, buffers, ptrs, regions) -> None:
    """gesdd on a column-major copy (jobz 'A', 'S' or 'N'); u and vt come back row-major; NaN if it fails."""
    x = buffers[step.operands[0]]
    m, n = x.shape[-2:]
    dt, k = x.dtype, min(m, n)
    uv, full = step.param("compute_uv"), step.param("full_matrices")
    u_cols, vt_rows = (m, n) if full else (k, k)
    c = _Consts(builder.module, dt)
    gesdd = _declare_fortran(builder.module, dt, "gesdd", 14, 1)
    a, u, vt, work, iwork, info = (regions[r] for r in ("a", "u", "vt", "work", "iwork", "info"))
    lwork = lapack_work("gesdd", dt, m, n, compute_uv=uv, full_matrices=full)[0]
    jobz = "N" if not uv else "A" if full else "S"
    nan = ir.Constant(memory_type(dt), float("nan"))
    outs = [ptrs[name] for name in step.outs]

    def matrix(b):
        _relayout(builder, _at(builder, ptrs[x.name], b, m * n, dt), a, m, n, dt, to_column_major=True)
        s = _at(builder, outs[0], b, k, dt)
        blas.emit_threads(builder, m * n * k)
        builder.call(gesdd, [c.char(jobz), c.int(m), c.int(n), a, c.int(m), s, u, c.int(m if uv else 1), vt,
                             c.int(vt_rows if uv else 1), work, c.int(lwork), iwork, info, ir.Constant(I64, 1)])
        written = [(s, k)]
        if uv:
            u_b, vt_b = _at(builder, outs[1], b, m * u_cols, dt), _at(builder, outs[2], b, vt_rows * n, dt)
            _relayout(builder, u, u_b, m, u_cols, dt, to_column_major=False)
            _relayout(builder, vt, vt_b, vt_rows, n, dt, to_column_major=False)
            written += [(u_b, m * u_cols), (vt_b, vt_rows * n)]
        with builder.if_then(_failed(builder, info)):
            for ptr, count in written:
                _fill(builder, ptr, count, nan, dt)

    _matrices(builder, prod(x.shape[:-2]), matrix)


_ROUTINES = {"cholesky": _cholesky, "triangular_solve": _triangular_solve, "lu": _lu, "qr": _qr, "eigh": _eigh,
             "svd": _svd}
