"""Factorization steps (cholesky, triangular_solve, lu) as CUDA C kernels of our own.

Correctness first, for the small and batched matrices a program meets: cholesky and lu give each
matrix a block (a block-stride loop over the stack) and work in its output buffer in global memory,
the block's threads sharing each column's updates between `__syncthreads`; triangular_solve gives each
right-hand side (a column of B, or a row for a solve from the right) a thread that substitutes forward
or backward. Each computes what the primitive's numpy reference (LAPACK) does, in another order of
operations: the same values up to rounding. Cholesky right-looking (the column scaled by its
diagonal's square root, then the trailing triangle updated), failing as LAPACK does on a diagonal that
is not positive (or NaN), and then NaN below the diagonal as JAX; LU with partial pivoting (the first
largest magnitude in the column, the rows swapped, the column divided unless its pivot is zero).
"""

from __future__ import annotations

from math import prod

import numpy as np

from ember.backends.cuda.types import memory_type
from ember.backends.kernel import Factorization
from ember.backends.schedule import GridPolicy

_NAN = {np.dtype(np.float32): "__int_as_float(0x7fc00000)",
        np.dtype(np.float64): "__longlong_as_double(0x7ff8000000000000LL)"}
_SQRT = {np.dtype(np.float32): "sqrtf", np.dtype(np.float64): "sqrt"}
_ABS = {np.dtype(np.float32): "fabsf", np.dtype(np.float64): "fabs"}
_I = "long long"
BLOCK = GridPolicy().block  # the threads of every launch (render.py's)


def render(ctx, step: Factorization) -> None:
    """Append the launches computing `step` to the renderer's context (render._Context)."""
    _ROUTINES[step.routine](ctx, step)


def _launch(ctx, body: str, reads: tuple[str, ...], writes: tuple[str, ...], blocks: int) -> None:
    params = [ctx.param(name, False) for name in reads] + [ctx.param(name, True) for name in writes]
    ctx.out.launches.append(ctx.define(body, params, blocks, list(reads + writes)))


def _matrices(count: int) -> str:
    """The block-stride loop over a stack of `count` matrices (every thread of a block takes the same b)."""
    return f"  for ({_I} b = blockIdx.x; b < {count}LL; b += gridDim.x) {{\n"


def _threads(var: str, start: str, stop: str, body: str) -> str:
    """A loop of the block's threads over [start, stop)."""
    return f"    for ({_I} {var} = ({start}) + threadIdx.x; {var} < ({stop}); {var} += blockDim.x) {{ {body} }}\n"


# --- cholesky ----------------------------------------------------------------------------------------

def _cholesky(ctx, step: Factorization) -> None:
    x, out = step.operands[0], step.outs[0]
    shape, dt = ctx.buffers[x].shape, ctx.buffers[x].dtype
    n, count = shape[-1], prod(shape[:-2])
    if n == 0 or count == 0:
        return
    t, nn = memory_type(dt), n * n
    body = (
        "  __shared__ int failed;\n" + _matrices(count) +
        f"    const {t}* a = {x} + b * {nn}LL;\n    {t}* l = {out} + b * {nn}LL;\n" +
        _threads("p", "0", f"{nn}LL", f"l[p] = (p % {n}LL) <= (p / {n}LL) ? a[p] : ({t})0;") +
        "    if (threadIdx.x == 0) failed = 0;\n    __syncthreads();\n"
        f"    for ({_I} j = 0; j < {n}LL; ++j) {{\n"
        f"      if (threadIdx.x == 0) {{ const {t} d = l[j * {n}LL + j]; if (!(d > ({t})0)) failed = 1; "
        f"l[j * {n}LL + j] = {_SQRT[dt]}(d); }}\n"
        "      __syncthreads();\n"
        f"      const {t} diagonal = l[j * {n}LL + j];\n"
        "  " + _threads("i", "j + 1", f"{n}LL", f"l[i * {n}LL + j] = l[i * {n}LL + j] / diagonal;") +
        "      __syncthreads();\n"
        f"      const {_I} rest = {n}LL - j - 1;\n"
        "  " + _threads("p", "0", "rest * rest", f"const {_I} i = j + 1 + p / rest, k = j + 1 + p % rest; "
                        f"if (k <= i) l[i * {n}LL + k] = l[i * {n}LL + k] - l[i * {n}LL + j] * l[k * {n}LL + j];") +
        "      __syncthreads();\n    }\n"
        "    if (failed) {\n" +
        "  " + _threads("p", "0", f"{nn}LL", f"l[p] = (p % {n}LL) <= (p / {n}LL) ? {_NAN[dt]} : ({t})0;") +
        "    }\n    __syncthreads();\n  }\n")
    _launch(ctx, body, (x,), (out,), count)


# --- triangular solve ------------------------------------------------------------------------------------

def _triangular_solve(ctx, step: Factorization) -> None:
    """Each thread solves M x = b for one right-hand side, M = op(A) (left side) or op(A)^T (right)."""
    a, rhs = step.operands
    out = step.outs[0]
    shape, dt = ctx.buffers[rhs].shape, ctx.buffers[rhs].dtype
    m, n = shape[-2:]
    left = step.param("left_side")
    size, vectors = (m, n) if left else (n, m)  # each solve's length, and the solves per matrix
    total = prod(shape[:-2]) * vectors
    if total == 0 or size == 0:
        return
    t = memory_type(dt)
    swap = step.param("transpose_a") != (not left)  # M[i, k] is A[k, i]
    forward = step.param("lower") != swap  # M lower triangular
    def mat(i: str, k: str) -> str:
        return f"A[{k} * {size}LL + {i}]" if swap else f"A[{i} * {size}LL + {k}]"

    def element(buffer: str, i: str) -> str:
        return f"{buffer}[{i} * {n}LL + v]" if left else f"{buffer}[v * {n}LL + {i}]"

    rows = f"{_I} i = 0; i < {size}LL; ++i" if forward else f"{_I} i = {size}LL - 1; i >= 0; --i"
    known = f"{_I} k = 0; k < i; ++k" if forward else f"{_I} k = i + 1; k < {size}LL; ++k"
    divide = "" if step.param("unit_diagonal") else f"      acc = acc / {mat('i', 'i')};\n"
    body = (
        f"  for ({_I} w = ({_I})blockIdx.x * blockDim.x + threadIdx.x; w < {total}LL; "
        f"w += ({_I})gridDim.x * blockDim.x) {{\n"
        f"    const {_I} b = w / {vectors}LL, v = w % {vectors}LL;\n"
        f"    const {t}* A = {a} + b * {size * size}LL;\n"
        f"    const {t}* B = {rhs} + b * {m * n}LL;\n    {t}* X = {out} + b * {m * n}LL;\n"
        f"    for ({rows}) {{\n"
        f"      {t} acc = {element('B', 'i')};\n"
        f"      for ({known}) acc = acc - {mat('i', 'k')} * {element('X', 'k')};\n"
        f"{divide}      {element('X', 'i')} = acc;\n    }}\n  }}\n")
    _launch(ctx, body, (a, rhs), (out,), -(-total // BLOCK))


# --- lu ----------------------------------------------------------------------------------------------------

def _lu(ctx, step: Factorization) -> None:
    x = step.operands[0]
    out, piv, perm = step.outs
    shape, dt = ctx.buffers[x].shape, ctx.buffers[x].dtype
    m, n = shape[-2:]
    k, count = min(m, n), prod(shape[:-2])
    if count == 0 or m == 0:
        return
    t = memory_type(dt)
    swap_rows = f"const {t} held = lu[j * {n}LL + c]; lu[j * {n}LL + c] = lu[p * {n}LL + c]; lu[p * {n}LL + c] = held;"
    body = (
        "  __shared__ long long pivot;\n" + _matrices(count) +
        f"    const {t}* a = {x} + b * {m * n}LL;\n    {t}* lu = {out} + b * {m * n}LL;\n"
        f"    int* pivots = {piv} + b * {k}LL;\n    int* perm = {perm} + b * {m}LL;\n" +
        _threads("q", "0", f"{m * n}LL", "lu[q] = a[q];") +
        _threads("i", "0", f"{m}LL", "perm[i] = (int)i;") +
        "    __syncthreads();\n"
        f"    for ({_I} j = 0; j < {k}LL; ++j) {{\n"
        "      if (threadIdx.x == 0) {\n"
        f"        {_I} p = j; {t} best = {_ABS[dt]}(lu[j * {n}LL + j]);\n"
        f"        for ({_I} i = j + 1; i < {m}LL; ++i) {{ const {t} v = {_ABS[dt]}(lu[i * {n}LL + j]); "
        "if (v > best) { best = v; p = i; } }\n"
        "        pivot = p; pivots[j] = (int)p;\n"
        "        const int held = perm[j]; perm[j] = perm[p]; perm[p] = held;\n"
        "      }\n      __syncthreads();\n"
        f"      const {_I} p = pivot;\n"
        "      if (p != j) {\n" + "  " + _threads("c", "0", f"{n}LL", swap_rows) + "      }\n"
        "      __syncthreads();\n"
        f"      const {t} d = lu[j * {n}LL + j];\n"
        f"      if (d != ({t})0) {{\n"
        + "  " + _threads("i", "j + 1", f"{m}LL", f"lu[i * {n}LL + j] = lu[i * {n}LL + j] / d;")
        + "      }\n      __syncthreads();\n"
        f"      const {_I} cols = {n}LL - j - 1;\n"
        "  " + _threads("q", "0", f"({m}LL - j - 1) * cols", f"const {_I} i = j + 1 + q / cols, c = j + 1 + q % cols; "
                        f"lu[i * {n}LL + c] = lu[i * {n}LL + c] - lu[i * {n}LL + j] * lu[j * {n}LL + c];") +
        "      __syncthreads();\n    }\n  }\n")
    _launch(ctx, body, (x,), (out, piv, perm), count)


_ROUTINES = {"cholesky": _cholesky, "triangular_solve": _triangular_solve, "lu": _lu}
