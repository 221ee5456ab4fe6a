"""Factorization steps (cholesky, triangular_solve, lu, qr, eigh, svd) as CUDA C kernels of our own.

Correctness first, for the small and batched matrices a program meets: cholesky and lu give each
matrix a block (a block-stride loop over the stack) and work in its output buffer in global memory,
the block's threads sharing each column's updates between `__syncthreads`; triangular_solve gives each
right-hand side (a column of B, or a row for a solve from the right) a thread that substitutes forward
or backward. Each computes what the primitive's numpy reference (LAPACK) does, in another order of
operations: the same values up to rounding. Cholesky right-looking (the column scaled by its
diagonal's square root, then the trailing triangle updated), failing as LAPACK does on a diagonal that
is not positive (or NaN), and then NaN below the diagonal as JAX; LU with partial pivoting (the first
largest magnitude in the column, the rows swapped, the column divided unless its pivot is zero).
qr, eigh and svd give each matrix one thread, working in scratch: Householder QR with LAPACK's sign
conventions (so q and r are LAPACK's up to rounding), cyclic Jacobi for eigh and one-sided Jacobi for
svd (eigenvalues and singular values LAPACK's up to rounding; the vectors' signs are the algorithm's
own, and full_matrices' extra columns, which are not unique, a Gram-Schmidt completion).
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


# --- qr, eigh and svd: a thread per matrix, its working copies in scratch --------------------------------

_EPS = {np.dtype(np.float32): "1.1920929e-07f", np.dtype(np.float64): "2.220446049250313e-16"}
SWEEPS = 60  # Jacobi sweeps at most (each converges quadratically; a few suffice)


def _per_thread(count: int) -> str:
    """The grid-stride loop giving each thread whole matrices b."""
    return (f"  for ({_I} b = ({_I})blockIdx.x * blockDim.x + threadIdx.x; b < {count}LL; "
            f"b += ({_I})gridDim.x * blockDim.x) {{\n")


def _scratch_param(ctx, name: str, dtype, count: int, at: int):
    """A scratch region (its parameter and launch argument), and the byte offset after it."""
    region = ctx.scratch(dtype, count, at)
    return (f"{memory_type(dtype)}* __restrict__", name), region, at + -(-count * np.dtype(dtype).itemsize // 256) * 256


def _qr(ctx, step: Factorization) -> None:
    """Householder QR with LAPACK's conventions (beta = -sign(alpha) |x|, tau = (beta - alpha) / beta), then
    q = H_0 ... H_{k-1} applied to the identity's first columns."""
    x = step.operands[0]
    q_out, r_out = step.outs
    shape, dt = ctx.buffers[x].shape, ctx.buffers[x].dtype
    m, n = shape[-2:]
    k, count = min(m, n), prod(shape[:-2])
    cols = ctx.buffers[q_out].shape[-1]
    if count == 0 or m == 0:
        return
    t = memory_type(dt)
    work_p, work, at = _scratch_param(ctx, "work", dt, count * m * n, 0)
    tau_p, tau, _ = _scratch_param(ctx, "taus", dt, count * max(k, 1), at)
    col = "for (long long i = j + 1; i < M; ++i)"
    body = (
        f"  const long long M = {m}LL, N = {n}LL, K = {k}LL, C = {cols}LL;\n" + _per_thread(count) +
        f"    const {t}* a0 = {x} + b * M * N; {t}* a = work + b * M * N; {t}* tau = taus + b * {max(k, 1)}LL;\n"
        f"    {t}* q = {q_out} + b * M * C; {t}* r = {r_out} + b * C * N;\n"
        "    for (long long p = 0; p < M * N; ++p) a[p] = a0[p];\n"
        "    for (long long j = 0; j < K; ++j) {\n"
        f"      const {t} alpha = a[j * N + j]; {t} norm2 = 0;\n"
        f"      {col} norm2 = norm2 + a[i * N + j] * a[i * N + j];\n"
        f"      {t} h = 0;\n"
        "      if (norm2 != 0) {\n"
        f"        const {t} root = {_SQRT[dt]}(alpha * alpha + norm2);\n"
        f"        const {t} beta = alpha >= 0 ? -root : root;\n"
        f"        h = (beta - alpha) / beta; const {t} scale = ({t})1 / (alpha - beta);\n"
        f"        {col} a[i * N + j] = a[i * N + j] * scale;\n"
        "        a[j * N + j] = beta;\n      }\n"
        "      tau[j] = h;\n"
        "      for (long long c = j + 1; c < N; ++c) {\n"
        f"        {t} d = a[j * N + c];\n        {col} d = d + a[i * N + j] * a[i * N + c];\n"
        "        d = d * h; a[j * N + c] = a[j * N + c] - d;\n"
        f"        {col} a[i * N + c] = a[i * N + c] - d * a[i * N + j];\n      }}\n    }}\n"
        f"    for (long long i = 0; i < C; ++i) for (long long c = 0; c < N; ++c) "
        f"r[i * N + c] = c >= i ? a[i * N + c] : ({t})0;\n"
        + _identity("q", "M", "C", t) +
        "    for (long long j = K - 1; j >= 0; --j) {\n"
        "      for (long long c = 0; c < C; ++c) {\n"
        f"        {t} d = q[j * C + c];\n        {col} d = d + a[i * N + j] * q[i * C + c];\n"
        "        d = d * tau[j]; q[j * C + c] = q[j * C + c] - d;\n"
        f"        {col} q[i * C + c] = q[i * C + c] - d * a[i * N + j];\n      }}\n    }}\n  }}\n")
    params = [ctx.param(x, False), work_p, tau_p, ctx.param(q_out, True), ctx.param(r_out, True)]
    ctx.out.launches.append(ctx.define(body, params, -(-count // BLOCK), [x, work, tau, q_out, r_out]))


def _rotation(ratio: str, t: str, dt) -> str:
    """c and s of the Jacobi rotation zeroing the pair whose (difference / (2 coupling)) is `ratio`: the
    smaller root t of t^2 + 2 ratio t - 1 = 0 (Rutishauser's form, no cancellation)."""
    sign = f"({ratio} >= 0 ? ({t})1 : ({t})-1)"
    return (f"        const {t} tan = {sign} / ({_ABS[dt]}({ratio}) + {_SQRT[dt]}({ratio} * {ratio} + 1));\n"
            f"        const {t} c = ({t})1 / {_SQRT[dt]}(tan * tan + 1), s = tan * c;\n")


def _identity(name: str, rows: str, cols: str, t: str) -> str:
    return (f"    for (long long i = 0; i < {rows}; ++i) for (long long j = 0; j < {cols}; ++j) "
            f"{name}[i * {cols} + j] = i == j ? ({t})1 : ({t})0;\n")


def _rotate(name: str, rows: str, stride: str, t: str) -> str:
    """Columns p and q of the row-major matrix `name` (`rows` rows, row length `stride`) rotated by (c, s)."""
    return (f"        for (long long i = 0; i < {rows}; ++i) {{ const {t} up = {name}[i * {stride} + p], "
            f"uq = {name}[i * {stride} + q]; {name}[i * {stride} + p] = c * up - s * uq; "
            f"{name}[i * {stride} + q] = s * up + c * uq; }}\n")


def _eigh(ctx, step: Factorization) -> None:
    """Cyclic Jacobi on the symmetric matrix read from one triangle; eigenvalues sorted ascending with their
    eigenvectors (whose signs may differ from LAPACK's)."""
    x = step.operands[0]
    v_out, w_out = step.outs
    shape, dt = ctx.buffers[x].shape, ctx.buffers[x].dtype
    n, count = shape[-1], prod(shape[:-2])
    if count == 0 or n == 0:
        return
    t = memory_type(dt)
    work_p, work, _ = _scratch_param(ctx, "work", dt, count * n * n, 0)
    mine = "i >= j" if step.param("lower") else "i <= j"
    body = (
        f"  const long long N = {n}LL;\n" + _per_thread(count) +
        f"    const {t}* a0 = {x} + b * N * N; {t}* a = work + b * N * N; {t}* v = {v_out} + b * N * N; "
        f"{t}* w = {w_out} + b * N;\n"
        f"    for (long long i = 0; i < N; ++i) for (long long j = 0; j < N; ++j) {{ "
        f"a[i * N + j] = ({mine}) ? a0[i * N + j] : a0[j * N + i]; v[i * N + j] = i == j ? ({t})1 : ({t})0; }}\n"
        f"    for (int sweep = 0; sweep < {SWEEPS}; ++sweep) {{\n"
        f"      {t} off = 0, total = 0;\n"
        "      for (long long i = 0; i < N; ++i) for (long long j = 0; j < N; ++j) { "
        "total = total + a[i * N + j] * a[i * N + j]; if (i != j) off = off + a[i * N + j] * a[i * N + j]; }\n"
        f"      if (off <= {_EPS[dt]} * {_EPS[dt]} * total) break;\n"
        "      for (long long p = 0; p + 1 < N; ++p) for (long long q = p + 1; q < N; ++q) {\n"
        f"        const {t} apq = a[p * N + q];\n        if (apq == 0) continue;\n"
        f"        const {t} theta = (a[q * N + q] - a[p * N + p]) / (2 * apq);\n"
        + _rotation("theta", t, dt) + _rotate("a", "N", "N", t) +
        f"        for (long long j = 0; j < N; ++j) {{ const {t} ap = a[p * N + j], aq = a[q * N + j]; "
        "a[p * N + j] = c * ap - s * aq; a[q * N + j] = s * ap + c * aq; }\n"
        + _rotate("v", "N", "N", t) +
        "      }\n    }\n"
        "    for (long long i = 0; i < N; ++i) w[i] = a[i * N + i];\n"
        "    for (long long i = 0; i < N; ++i) {\n"
        "      long long best = i; for (long long j = i + 1; j < N; ++j) if (w[j] < w[best]) best = j;\n"
        f"      if (best != i) {{ const {t} held = w[i]; w[i] = w[best]; w[best] = held; "
        f"for (long long r = 0; r < N; ++r) {{ const {t} e = v[r * N + i]; v[r * N + i] = v[r * N + best]; "
        "v[r * N + best] = e; } }\n    }\n  }\n")
    params = [ctx.param(x, False), work_p, ctx.param(v_out, True), ctx.param(w_out, True)]
    ctx.out.launches.append(ctx.define(body, params, -(-count // BLOCK), [x, work, v_out, w_out]))


def _svd(ctx, step: Factorization) -> None:
    """One-sided Jacobi on G = A (m >= n) or A^T: columns of G rotated until orthogonal (V accumulating the
    rotations), singular values their norms, sorted descending; G's normalized columns (completed to an
    orthonormal basis by Gram-Schmidt where full matrices or zero singular values ask) are U (or V^T's
    rows). Vectors' signs may differ from LAPACK's."""
    x = step.operands[0]
    shape, dt = ctx.buffers[x].shape, ctx.buffers[x].dtype
    m, n = shape[-2:]
    k, count = min(m, n), prod(shape[:-2])
    uv, full = step.param("compute_uv"), step.param("full_matrices")
    if count == 0 or k == 0:
        return
    t = memory_type(dt)
    tall = m >= n
    rows = max(m, n)
    width = rows if (uv and full) else k  # G's columns, completed to an orthonormal basis where asked
    g_p, g, at = _scratch_param(ctx, "gwork", dt, count * rows * width, 0)
    v_p, vw, at = _scratch_param(ctx, "vwork", dt, count * k * k, at)
    read = "a0[i * Nn + j]" if tall else "a0[j * Nn + i]"
    outs = step.outs
    lines = [
        f"  const long long R = {rows}LL, K = {k}LL, W = {width}LL, Nn = {n}LL;\n", _per_thread(count),
        f"    const {t}* a0 = {x} + b * {m * n}LL; {t}* g = gwork + b * R * W; {t}* vw = vwork + b * K * K;\n",
        f"    {t}* sv = {outs[0]} + b * K;\n",
        f"    for (long long i = 0; i < R; ++i) for (long long j = 0; j < W; ++j) "
        f"g[i * W + j] = j < K ? {read} : ({t})0;\n", _identity("vw", "K", "K", t),
        f"    for (int sweep = 0; sweep < {SWEEPS}; ++sweep) {{\n      bool rotated = false;\n",
        "      for (long long p = 0; p + 1 < K; ++p) for (long long q = p + 1; q < K; ++q) {\n",
        f"        {t} alpha = 0, beta = 0, gamma = 0;\n",
        "        for (long long i = 0; i < R; ++i) { alpha = alpha + g[i * W + p] * g[i * W + p]; "
        "beta = beta + g[i * W + q] * g[i * W + q]; gamma = gamma + g[i * W + p] * g[i * W + q]; }\n",
        f"        if (gamma == 0 || {_ABS[dt]}(gamma) <= {_EPS[dt]} * {_SQRT[dt]}(alpha * beta)) continue;\n",
        "        rotated = true;\n",
        f"        const {t} zeta = (beta - alpha) / (2 * gamma);\n", _rotation("zeta", t, dt),
        _rotate("g", "R", "W", t), _rotate("vw", "K", "K", t),
        "      }\n      if (!rotated) break;\n    }\n",
        f"    for (long long j = 0; j < K; ++j) {{ {t} norm2 = 0; for (long long i = 0; i < R; ++i) "
        f"norm2 = norm2 + g[i * W + j] * g[i * W + j]; sv[j] = {_SQRT[dt]}(norm2); }}\n",
        "    for (long long i = 0; i < K; ++i) {\n",
        "      long long best = i; for (long long j = i + 1; j < K; ++j) if (sv[j] > sv[best]) best = j;\n",
        f"      if (best != i) {{ const {t} held = sv[i]; sv[i] = sv[best]; sv[best] = held;\n",
        f"        for (long long r = 0; r < R; ++r) {{ const {t} e = g[r * W + i]; g[r * W + i] = g[r * W + best]; "
        "g[r * W + best] = e; }\n",
        f"        for (long long r = 0; r < K; ++r) {{ const {t} e = vw[r * K + i]; vw[r * K + i] = vw[r * K + best]; "
        "vw[r * K + best] = e; } }\n    }\n",
    ]
    if uv:
        lines += [
            "    for (long long j = 0; j < K; ++j) if (sv[j] != 0) for (long long i = 0; i < R; ++i) "
            "g[i * W + j] = g[i * W + j] / sv[j];\n",
            # Gram-Schmidt completion: columns past K, or of a zero singular value, from unit vectors
            "    for (long long j = 0; j < W; ++j) {\n      if (j < K && sv[j] != 0) continue;\n",
            "      for (long long e = 0; e < R; ++e) {\n",
            f"        for (long long i = 0; i < R; ++i) g[i * W + j] = i == e ? ({t})1 : ({t})0;\n",
            "        for (int twice = 0; twice < 2; ++twice) for (long long o = 0; o < W; ++o) {\n",
            "          if (o == j || (o > j && (o >= K || sv[o] == 0))) continue;\n",
            f"          {t} d = 0; for (long long i = 0; i < R; ++i) d = d + g[i * W + o] * g[i * W + j];\n",
            "          for (long long i = 0; i < R; ++i) g[i * W + j] = g[i * W + j] - d * g[i * W + o];\n        }\n",
            f"        {t} norm2 = 0; for (long long i = 0; i < R; ++i) norm2 = norm2 + g[i * W + j] * g[i * W + j];\n",
            f"        if (norm2 > ({t})0.25) {{ const {t} inv = ({t})1 / {_SQRT[dt]}(norm2); "
            "for (long long i = 0; i < R; ++i) g[i * W + j] = g[i * W + j] * inv; break; }\n      }\n    }\n",
        ]
        u_out, vt_out = outs[1], outs[2]
        u_cols, vt_rows = ctx.buffers[u_out].shape[-1], ctx.buffers[vt_out].shape[-2]
        lines.append(f"    {t}* u = {u_out} + b * {m * u_cols}LL; {t}* vt = {vt_out} + b * {vt_rows * n}LL;\n")
        if tall:  # u = G (m x u_cols), vt = V^T
            lines += [f"    for (long long i = 0; i < {m}LL; ++i) for (long long j = 0; j < {u_cols}LL; ++j) "
                      "u[i * " + f"{u_cols}LL + j] = g[i * W + j];\n",
                      f"    for (long long i = 0; i < {vt_rows}LL; ++i) for (long long j = 0; j < {n}LL; ++j) "
                      f"vt[i * {n}LL + j] = vw[j * K + i];\n"]
        else:  # A^T = G S V^T: u = V, vt = G^T
            lines += [f"    for (long long i = 0; i < {m}LL; ++i) for (long long j = 0; j < {u_cols}LL; ++j) "
                      f"u[i * {u_cols}LL + j] = vw[i * K + j];\n",
                      f"    for (long long i = 0; i < {vt_rows}LL; ++i) for (long long j = 0; j < {n}LL; ++j) "
                      "vt[i * " + f"{n}LL + j] = g[j * W + i];\n"]
    lines.append("  }\n")
    params = [ctx.param(x, False), g_p, v_p] + [ctx.param(o, True) for o in outs]
    ctx.out.launches.append(ctx.define("".join(lines), params, -(-count // BLOCK), [x, g, vw, *outs]))


_ROUTINES = {"cholesky": _cholesky, "triangular_solve": _triangular_solve, "lu": _lu, "qr": _qr, "eigh": _eigh,
             "svd": _svd}
