"""Dense linear algebra as jax.lax.linalg: `cholesky`, `triangular_solve`, `lu`, `qr`, `eigh` and `svd`,
batched over leading axes.

Every operand is a stack of matrices (its last two axes), float32 or float64. The references are
SciPy's LAPACK and BLAS (what JAX calls on the CPU: potrf, trsm, getrf, geqrf/orgqr, syevd, gesdd), so
singular and indefinite inputs give what JAX gives: a Cholesky factorization that fails is NaN in its
lower triangle, a triangular solve divides by a zero diagonal (inf and NaN), and LU records zero pivots
and goes on. Gradients follow JAX's rules: cholesky's is Murray (2016), L^-T phi(L^T Lbar) L^-1 (the
transpose of JAX's `_cholesky_jvp_rule`), triangular_solve's is JAX's transpose rule for b and
-op(A)^-T Xbar X^T for a, and lu's, qr's, eigh's and svd's are the transposes of JAX's JVP rules (for
distinct eigenvalues and singular values, as JAX's). The last section holds compositions the numpy,
scipy and lax faces share (row gathers, `lu_solve`).
"""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, IncompatibleShapesError, ShapeError
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.primitive import Primitive, def_batch, def_impl, def_shape, def_vjp
from ember.tracer.prims.util import bdim_at_front, moveaxis, shape_of

cholesky_p = Primitive("cholesky", kind="opaque", expensive=True)
triangular_solve_p = Primitive("triangular_solve", kind="opaque", expensive=True)
lu_p = Primitive("lu", multiple_results=True, kind="opaque", expensive=True)
qr_p = Primitive("qr", multiple_results=True, kind="opaque", expensive=True)
eigh_p = Primitive("eigh", multiple_results=True, kind="opaque", expensive=True)
svd_p = Primitive("svd", multiple_results=True, kind="opaque", expensive=True)

LINALG_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def cholesky(x):
    """The lower Cholesky factor L of each symmetric positive-definite matrix (x = L L^T), zeros above
    the diagonal; only x's lower triangle is read. A matrix that is not positive definite gives NaN."""
    return cholesky_p.bind(x)


def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False):
    """X with op(a) X = b (`left_side`) or X op(a) = b, op(a) = a or its transpose, reading the
    `lower` or upper triangle of a (its diagonal taken as ones with `unit_diagonal`). Real matrices
    only, so `conjugate_a` changes nothing (as in lax.linalg for real operands)."""
    del conjugate_a  # real matrices are their own conjugates
    return triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                   transpose_a=bool(transpose_a), unit_diagonal=bool(unit_diagonal))


def lu(x):
    """(lu, pivots, permutation) of x's LU factorization with partial pivoting, as lax.linalg.lu:
    P x = L U with L's strict lower triangle and U in `lu`, pivots[i] the row swapped with row i
    (int32), and the permutation those swaps give (int32)."""
    return tuple(lu_p.bind(x))


def qr(x, *, full_matrices: bool = True):
    """(q, r) with x = q r, q orthonormal columns and r upper triangular (LAPACK's Householder signs):
    q (..., m, m) and r (..., m, n) with `full_matrices`, else (..., m, k) and (..., k, n), k = min(m, n)."""
    return tuple(qr_p.bind(x, full_matrices=bool(full_matrices)))


def eigh(x, *, lower: bool = True):
    """(v, w): the eigenvectors (columns of v) and ascending eigenvalues w of each symmetric matrix,
    reading its `lower` (or upper) triangle, as lax.linalg.eigh without symmetrizing."""
    return tuple(eigh_p.bind(x, lower=bool(lower)))


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True):
    """(s, u, vt) with x = u diag(s) vt (s descending, LAPACK's gesdd), or (s,) without `compute_uv`;
    u (..., m, m) and vt (..., n, n) with `full_matrices`, else (..., m, k) and (..., k, n)."""
    return tuple(svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv)))


# --- shape rules --------------------------------------------------------------------------------------

def _check_matrices(name: str, x: ShapedArray, what: str = "operand") -> None:
    if x.ndim < 2:
        raise ShapeError(f"{name}: the {what} must have rank at least 2 (a stack of matrices), got shape {x.shape}")
    if x.dtype not in LINALG_DTYPES:
        raise DTypeError(f"{name}: the {what} must be float32 or float64, got {x.dtype.name}")


def _check_square(name: str, x: ShapedArray, what: str = "operand") -> None:
    if x.shape[-1] != x.shape[-2]:
        raise IncompatibleShapesError(f"{name}: the {what} must be a stack of square matrices, got shape {x.shape}")


@def_shape(cholesky_p)
def _cholesky_shape(x):
    _check_matrices("cholesky", x)
    _check_square("cholesky", x)
    return ShapedArray(x.shape, x.dtype)


@def_shape(triangular_solve_p)
def _triangular_solve_shape(a, b, *, left_side, lower, transpose_a, unit_diagonal):
    _check_matrices("triangular_solve", a, "first operand (a)")
    _check_matrices("triangular_solve", b, "second operand (b)")
    _check_square("triangular_solve", a, "first operand (a)")
    if a.dtype != b.dtype:
        raise DTypeError(f"triangular_solve: operand dtypes {a.dtype.name} and {b.dtype.name} differ")
    common = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[:-2] != b.shape[:-2] or a.shape[-1] != common:
        side = "rows" if left_side else "columns"
        raise IncompatibleShapesError(f"triangular_solve: incompatible shapes {a.shape} and {b.shape} (the batch "
                                      f"axes must be equal and b's {side} match a's size)")
    return ShapedArray(b.shape, b.dtype)


@def_shape(lu_p)
def _lu_shape(x):
    _check_matrices("lu", x)
    *batch, m, n = x.shape
    batch = tuple(batch)
    return (ShapedArray(x.shape, x.dtype), ShapedArray(batch + (min(m, n),), np.int32),
            ShapedArray(batch + (m,), np.int32))


@def_shape(qr_p)
def _qr_shape(x, *, full_matrices):
    _check_matrices("qr", x)
    *batch, m, n = x.shape
    k = m if full_matrices else min(m, n)
    return ShapedArray(tuple(batch) + (m, k), x.dtype), ShapedArray(tuple(batch) + (k, n), x.dtype)


@def_shape(eigh_p)
def _eigh_shape(x, *, lower):
    _check_matrices("eigh", x)
    _check_square("eigh", x)
    return ShapedArray(x.shape, x.dtype), ShapedArray(x.shape[:-1], x.dtype)


@def_shape(svd_p)
def _svd_shape(x, *, full_matrices, compute_uv):
    _check_matrices("svd", x)
    *batch, m, n = x.shape
    batch, k = tuple(batch), min(m, n)
    s = ShapedArray(batch + (k,), x.dtype)
    if not compute_uv:
        return (s,)
    u_cols, vt_rows = (m, n) if full_matrices else (k, k)
    return s, ShapedArray(batch + (m, u_cols), x.dtype), ShapedArray(batch + (vt_rows, n), x.dtype)


# --- numpy references (SciPy's LAPACK and BLAS, one matrix at a time) ---------------------------------

def _stack(x: np.ndarray) -> np.ndarray:
    """x as (batch, rows, columns)."""
    return x.reshape((-1,) + x.shape[-2:])


@def_impl(cholesky_p)
def _cholesky_impl(x):
    from scipy.linalg import lapack

    n = x.shape[-1]
    out = np.zeros(x.shape, x.dtype)
    if out.size == 0:
        return out
    potrf = lapack.get_lapack_funcs("potrf", dtype=x.dtype)
    failed = np.where(np.tri(n, dtype=bool), np.nan, 0).astype(x.dtype)
    for a, r in zip(_stack(x), _stack(out)):
        c, info = potrf(a, lower=True, clean=True)
        r[...] = c if info == 0 else failed
    return out


@def_impl(triangular_solve_p)
def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, unit_diagonal):
    from scipy.linalg import blas

    out = np.empty(b.shape, b.dtype)
    if out.size == 0:
        return out
    trsm = blas.get_blas_funcs("trsm", dtype=b.dtype)
    for m, rhs, r in zip(_stack(a), _stack(b), _stack(out)):
        r[...] = trsm(1.0, m, rhs, side=int(not left_side), lower=int(lower), trans_a=int(transpose_a),
                      diag=int(unit_diagonal))
    return out


def permutation_of(pivots: np.ndarray, m: int) -> np.ndarray:
    """The permutation of range(m) that the row swaps `pivots` (in order) make."""
    perm = np.arange(m, dtype=np.int32)
    for i, p in enumerate(pivots):
        perm[i], perm[p] = perm[p], perm[i]
    return perm


@def_impl(lu_p)
def _lu_impl(x):
    from scipy.linalg import lapack

    *batch, m, n = x.shape
    out = np.array(x)
    pivots = np.zeros(tuple(batch) + (min(m, n),), np.int32)
    perm = np.broadcast_to(np.arange(m, dtype=np.int32), tuple(batch) + (m,)).copy()
    if out.size == 0:
        return out, pivots, perm
    getrf = lapack.get_lapack_funcs("getrf", dtype=x.dtype)
    for r, piv, pm in zip(_stack(out), pivots.reshape(-1, min(m, n)), perm.reshape(-1, m)):
        r[...], piv[...], _ = getrf(r)
        pm[...] = permutation_of(piv, m)
    return out, pivots, perm


def lapack_work(routine: str, dtype, m: int, n: int, **flags) -> tuple[int, ...]:
    """The workspace sizes (elements; then integers where the routine takes them) that both the
    reference and the llvm backend pass `routine`: LAPACK's blocking, so its rounding, depends on them."""
    from scipy.linalg import lapack

    prefix = "s" if np.dtype(dtype) == np.float32 else "d"
    if routine == "geqrf":
        return (max(1, int(getattr(lapack, prefix + "geqrf_lwork")(max(m, 1), max(n, 1))[0])),)
    if routine == "orgqr":  # n: the columns of q; room for blocks of 64 columns
        return (64 * max(1, n),)
    if routine == "syevd":
        work, iwork, _ = getattr(lapack, prefix + "syevd_lwork")(max(n, 1), compute_v=1, lower=int(flags["lower"]))
        return max(1, int(work)), max(1, int(iwork))
    if routine == "gesdd":
        work, _ = getattr(lapack, prefix + "gesdd_lwork")(max(m, 1), max(n, 1), compute_uv=int(flags["compute_uv"]),
                                                          full_matrices=int(flags["full_matrices"]))
        return max(1, int(work)), 8 * max(1, min(m, n))
    raise ValueError(f"no workspace rule for {routine}")


def _qr_matrix(a: np.ndarray, full_matrices: bool) -> tuple[np.ndarray, np.ndarray]:
    """One matrix's (q, r) by geqrf and orgqr with lapack_work's sizes."""
    from scipy.linalg import lapack

    m, n = a.shape
    cols = m if full_matrices else min(m, n)
    geqrf, orgqr = lapack.get_lapack_funcs(("geqrf", "orgqr"), dtype=a.dtype)
    packed, tau, _, _ = geqrf(a, lwork=lapack_work("geqrf", a.dtype, m, n)[0])
    r = np.triu(packed[:cols, :])
    reflectors = np.zeros((m, max(cols, n)), a.dtype, order="F")
    reflectors[:, :n] = packed
    q, _, _ = orgqr(reflectors[:, :cols], tau, lwork=lapack_work("orgqr", a.dtype, m, cols)[0])
    return q, r


@def_impl(qr_p)
def _qr_impl(x, *, full_matrices):
    (q_aval, r_aval) = _qr_shape(ShapedArray(x.shape, x.dtype), full_matrices=full_matrices)
    q, r = np.zeros(q_aval.shape, x.dtype), np.zeros(r_aval.shape, x.dtype)
    if x.size:
        for a, qq, rr in zip(_stack(x), _stack(q), _stack(r)):
            qq[...], rr[...] = _qr_matrix(a, full_matrices)
    elif q.size:  # no columns: q is the identity's first columns
        q[...] = np.eye(*q.shape[-2:], dtype=x.dtype)
    return q, r


@def_impl(eigh_p)
def _eigh_impl(x, *, lower):
    from scipy.linalg import lapack

    n = x.shape[-1]
    v, w = np.zeros(x.shape, x.dtype), np.zeros(x.shape[:-1], x.dtype)
    if x.size == 0:
        return v, w
    syevd = lapack.get_lapack_funcs("syevd", dtype=x.dtype)
    lwork, liwork = lapack_work("syevd", x.dtype, n, n, lower=lower)
    for a, vv, ww in zip(_stack(x), _stack(v), w.reshape(-1, n)):
        ww[...], vv[...], info = syevd(a, compute_v=1, lower=int(lower), lwork=lwork, liwork=liwork)
        if info:
            vv[...], ww[...] = np.nan, np.nan
    return v, w


@def_impl(svd_p)
def _svd_impl(x, *, full_matrices, compute_uv):
    from scipy.linalg import lapack

    avals = _svd_shape(ShapedArray(x.shape, x.dtype), full_matrices=full_matrices, compute_uv=compute_uv)
    outs = [np.zeros(a.shape, x.dtype) for a in avals]
    m, n = x.shape[-2:]
    if x.size == 0:
        if compute_uv:  # no singular values: the identity's columns, as LAPACK
            for o in outs[1:]:
                o[...] = np.eye(*o.shape[-2:], dtype=x.dtype)
        return tuple(outs)
    gesdd = lapack.get_lapack_funcs("gesdd", dtype=x.dtype)
    lwork = lapack_work("gesdd", x.dtype, m, n, compute_uv=compute_uv, full_matrices=full_matrices)[0]
    for b, a in enumerate(_stack(x)):
        u, s, vt, info = gesdd(a, compute_uv=int(compute_uv), full_matrices=int(full_matrices), lwork=lwork)
        parts = (s, u, vt) if compute_uv else (s,)
        for o, p in zip(outs, parts):
            o.reshape((-1,) + o.shape[-(p.ndim):])[b] = np.nan if info else p
    return tuple(outs)


# --- matrix helpers for the rules (traced; the matrix axes are the last two) --------------------------

def _mT(x):
    """x with its last two axes swapped."""
    nd = len(shape_of(x))
    return P.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _matmul(a, b):
    """a @ b over the matrix axes, the leading axes batched (equal in a and b)."""
    nd = len(shape_of(a))
    batch = tuple(range(nd - 2))
    return P.dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _offsets(shape):
    """column - row of every element of `shape` (int32)."""
    nd = len(shape)
    return P.sub(P.iota(np.int32, shape, nd - 1), P.iota(np.int32, shape, nd - 2))


def _triangle(x, lower: bool, k: int = 0):
    """x on and below diagonal k (lower) or on and above it, zeros elsewhere (tril/triu)."""
    off = _offsets(shape_of(x))
    return P.select(P.le(off, k) if lower else P.ge(off, k), x, 0.0)


def _phi(x):
    """The lower triangle of x with its diagonal halved (Murray 2016's Phi)."""
    off = _offsets(shape_of(x))
    return P.select(P.lt(off, 0), x, P.select(P.eq(off, 0), P.mul(x, 0.5), 0.0))


def _eye_like(shape, dtype, start: int = 0):
    """Ones on the diagonal from row `start` on, zeros elsewhere, of `shape` (matrix axes last)."""
    nd = len(shape)
    rows = P.iota(np.int32, shape, nd - 2)
    on = P.and_(P.eq(rows, P.iota(np.int32, shape, nd - 1)), P.ge(rows, start))
    return P.convert_element_type(on, dtype)


# --- VJP rules ----------------------------------------------------------------------------------------

@def_vjp(cholesky_p)
def _cholesky_vjp(ct, x, *, out, active):
    """Sigma_bar = L^-T Phi(L^T Lbar) L^-1: the transpose of JAX's forward rule L Phi(L^-1 dSigma L^-T)."""
    inner = _phi(_matmul(_mT(out), ct))
    right = triangular_solve(out, inner, left_side=False, lower=True)
    return (triangular_solve(out, right, left_side=True, lower=True, transpose_a=True),)


@def_vjp(triangular_solve_p)
def _triangular_solve_vjp(ct, a, b, *, out, active, left_side, lower, transpose_a, unit_diagonal):
    """b's cotangent solves with op(a) transposed (JAX's transpose rule); a's is -ct_b X^T (left side)
    or -X^T ct_b, transposed back when op transposes, on the triangle that a's solve reads."""
    ct_b = triangular_solve(a, ct, left_side=left_side, lower=lower, transpose_a=not transpose_a,
                            unit_diagonal=unit_diagonal)
    ct_a = None
    if active[0]:
        grad_op = _matmul(ct_b, _mT(out)) if left_side else _matmul(_mT(out), ct_b)
        grad = _mT(grad_op) if transpose_a else grad_op
        k = (-1 if lower else 1) if unit_diagonal else 0
        ct_a = P.neg(_triangle(grad, lower, k))
    return ct_a, ct_b if active[1] else None


def _lu_factors(lu_out):
    """L (m x m, unit lower) and U (n x n, upper, ones on the diagonal past min(m, n)) from packed lu."""
    *batch, m, n = shape_of(lu_out)
    k, nb = min(m, n), len(batch)
    dtype = lu_out.dtype
    starts = (0,) * (nb + 2)
    keep = [(0, 0, 0)] * nb
    lower = P.slice(lu_out, starts, tuple(batch) + (m, k))
    lower = P.pad(_triangle(lower, True, -1), 0.0, keep + [(0, 0, 0), (0, m - k, 0)])
    upper = P.slice(lu_out, starts, tuple(batch) + (k, n))
    upper = P.pad(_triangle(upper, False), 0.0, keep + [(0, n - k, 0), (0, 0, 0)])
    l_full = P.add(lower, _eye_like(tuple(batch) + (m, m), dtype))
    u_full = P.add(upper, _eye_like(tuple(batch) + (n, n), dtype, start=k))
    return l_full, u_full


@def_vjp(lu_p)
def _lu_vjp(ct, x, *, out, active):
    """The transpose of JAX's `_lu_jvp_rule`: with F = L^-1 (P dA) U^-1 and d(lu) = L tril(F, -1) +
    triu(F) U, Fbar = tril(L^T ct, -1) + triu(ct U^T) and Abar = P^T L^-T Fbar U^-T."""
    ct_lu = ct[0]
    if ct_lu is None:
        return (None,)
    lu_out, _, perm = out
    l_full, u_full = _lu_factors(lu_out)
    f_bar = P.add(_triangle(_matmul(_mT(l_full), ct_lu), True, -1), _triangle(_matmul(ct_lu, _mT(u_full)), False))
    y = triangular_solve(l_full, f_bar, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
    y = triangular_solve(u_full, y, left_side=False, lower=False, transpose_a=True)
    m = shape_of(perm)[-1]
    shape = shape_of(perm) + (m,)
    rows = P.broadcast_in_dim(perm, shape, tuple(range(len(shape) - 1)))
    onehot = P.convert_element_type(P.eq(rows, P.iota(np.int32, shape, len(shape) - 1)), lu_out.dtype)
    return (_matmul(_mT(onehot), y),)


def _not_differentiable(name: str, why: str):
    from ember.errors import DifferentiationError

    return DifferentiationError(f"{name}: {why} (as in JAX)")


@def_vjp(qr_p)
def _qr_vjp(ct, x, *, out, active, full_matrices):
    """The transpose of JAX's `qr_jvp_rule` (m >= n, q with min(m, n) columns): with C = Q^T dA R^-1,
    dQ = Q (do - C) + dA R^-1 and dR = (C - do) R, do = tril(C, -1) - tril(C, -1)^T."""
    *_, m, n = shape_of(x)
    if m < n or (full_matrices and m != n):
        raise _not_differentiable("qr", "the derivative needs m >= n and full_matrices=False for m != n")
    q, r = out
    q_bar, r_bar = (c if c is not None else P.full(shape_of(o), 0.0, o.dtype) for c, o in zip(ct, out))
    e = _matmul(r_bar, _mT(r))
    g = _matmul(_mT(q), q_bar)
    skew_bar = P.sub(g, e)
    c_bar = P.add(P.sub(e, g), _triangle(P.sub(skew_bar, _mT(skew_bar)), True, -1))
    rinv_bar = P.add(q_bar, _matmul(q, c_bar))
    return (triangular_solve(r, rinv_bar, left_side=False, lower=False, transpose_a=True),)


def _eigenvalue_gaps(w):
    """F[i, j] = 1 / (w_j - w_i) off the diagonal, 0 on it (JAX's Fmat; inf where eigenvalues repeat)."""
    *batch, n = shape_of(w)
    shape = tuple(batch) + (n, n)
    nb = len(batch)
    cols = P.broadcast_in_dim(w, shape, tuple(range(nb)) + (nb + 1,))
    rows = P.broadcast_in_dim(w, shape, tuple(range(nb)) + (nb,))
    eye = _eye_like(shape, w.dtype)
    return P.sub(P.div(1.0, P.add(eye, P.sub(cols, rows))), eye)


def _diag_matrix(d):
    """The diagonal matrices (..., n, n) of the vectors d (..., n)."""
    *batch, n = shape_of(d)
    shape = tuple(batch) + (n, n)
    return P.mul(P.broadcast_in_dim(d, shape, tuple(range(len(batch))) + (len(batch) + 1,)), _eye_like(shape, d.dtype))


@def_vjp(eigh_p)
def _eigh_vjp(ct, x, *, out, active, lower):
    """The transpose of JAX's `_eigh_jvp_rule` (distinct eigenvalues): with S = V^T dA V, dV = V (F * S)
    and dw = diag(S), so Abar = V (F * (V^T Vbar) + diag(wbar)) V^T."""
    v, w = out
    v_bar, w_bar = ct
    s_bar = None
    if v_bar is not None:
        s_bar = P.mul(_eigenvalue_gaps(w), _matmul(_mT(v), v_bar))
    if w_bar is not None:
        s_bar = _diag_matrix(w_bar) if s_bar is None else P.add(s_bar, _diag_matrix(w_bar))
    return (_matmul(v, _matmul(s_bar, _mT(v))),)


def _scale_columns(x, d):
    """x * d[..., None, :]: column j of each matrix times d[j]."""
    shape = shape_of(x)
    nb = len(shape) - 2
    return P.mul(x, P.broadcast_in_dim(d, shape, tuple(range(nb)) + (nb + 1,)))


def _scale_rows(x, d):
    """x * d[..., :, None]."""
    shape = shape_of(x)
    nb = len(shape) - 2
    return P.mul(x, P.broadcast_in_dim(d, shape, tuple(range(nb)) + (nb,)))


@def_vjp(svd_p)
def _svd_vjp(ct, x, *, out, active, full_matrices, compute_uv):
    """The transpose of JAX's `_svd_jvp_rule` (distinct nonzero singular values; reduced factors): with
    dS = U^T dA V, ds = diag(dS), dU = U (F * (dS s + (dS s)^T)) (+ (I - U U^T) dA V / s when m > n) and
    dV = V (F * (s dS + (s dS)^T)) (+ (I - V V^T) dA^T U / s when n > m), F[i, j] = 1 / (s_j^2 - s_i^2)."""
    *_, m, n = shape_of(x)
    if compute_uv and full_matrices and m != n:
        raise _not_differentiable("svd", "the derivative of full_matrices=True factors of a non-square matrix "
                                         "is not implemented")
    s, u, vt = svd(x, full_matrices=False, compute_uv=True) if not compute_uv else out
    s_bar = ct[0]
    u_bar, vt_bar = (ct[1], ct[2]) if compute_uv else (None, None)
    ds_bar = _diag_matrix(s_bar) if s_bar is not None else P.full(shape_of(s) + shape_of(s)[-1:], 0.0, s.dtype)
    v = _mT(vt)
    gaps = _eigenvalue_gaps(P.mul(s, s))
    inv_s = P.div(1.0, s)
    extra = None
    if u_bar is not None:
        sym = P.mul(gaps, _matmul(_mT(u), u_bar))
        t_bar = P.add(sym, _mT(sym))
        ds_bar = P.add(ds_bar, _scale_columns(t_bar, s))
        if m > n:
            proj = P.sub(u_bar, _matmul(u, _matmul(_mT(u), u_bar)))
            extra = _matmul(_scale_columns(proj, inv_s), vt)
    if vt_bar is not None:
        v_bar = _mT(vt_bar)
        sym = P.mul(gaps, _matmul(_mT(v), v_bar))
        t_bar = P.add(sym, _mT(sym))
        ds_bar = P.add(ds_bar, _scale_rows(t_bar, s))
        if n > m:
            proj = P.sub(v_bar, _matmul(v, _matmul(vt, v_bar)))
            term = _matmul(_scale_columns(u, inv_s), _mT(proj))
            extra = term if extra is None else P.add(extra, term)
    a_bar = _matmul(u, _matmul(ds_bar, vt))
    return (a_bar if extra is None else P.add(a_bar, extra),)


# --- batching rules: the batch axis to the front, a leading batch axis of the stack --------------------

@def_batch(cholesky_p)
def _cholesky_batch(args, dims):
    (x,), (d,) = args, dims
    return cholesky(moveaxis(x, d, 0)), 0


@def_batch(triangular_solve_p)
def _triangular_solve_batch(args, dims, **params):
    size = next(shape_of(a)[d] for a, d in zip(args, dims) if d is not None)
    a, b = (bdim_at_front(x, d, size) for x, d in zip(args, dims))
    return triangular_solve_p.bind(a, b, **params), 0


@def_batch(lu_p)
def _lu_batch(args, dims):
    (x,), (d,) = args, dims
    return lu(moveaxis(x, d, 0)), [0, 0, 0]


def _front_batch(prim):
    """A rule batching `prim` (one operand, multiple results) by moving the batch axis to the front."""
    def rule(args, dims, **params):
        (x,), (d,) = args, dims
        outs = prim.bind(moveaxis(x, d, 0), **params)
        return outs, [0] * len(outs)
    return rule


for _prim in (qr_p, eigh_p, svd_p):
    def_batch(_prim)(_front_batch(_prim))


# --- compositions the numpy, scipy and lax faces share ----------------------------------------------------

def take_rows(x, rows):
    """x[..., rows[..., i], :] for each i: the rows of each matrix of x (..., m, k) picked by the int32
    indices rows (..., r), the leading axes batched."""
    nb = len(shape_of(x)) - 2
    return P.gather(x, P.reshape(rows, shape_of(rows) + (1,)), batch_dims=nb)


def inverse_permutation(permutation):
    """The permutation undoing `permutation` (..., m): inverse[permutation[i]] = i (exact integer sums)."""
    shape = shape_of(permutation)
    m, nd = shape[-1], len(shape)
    full = shape + (m,)
    hits = P.eq(P.broadcast_in_dim(permutation, full, tuple(range(nd))), P.iota(np.int32, full, nd))
    return P.reduce_sum(P.select(hits, P.iota(np.int32, full, nd - 1), 0), (nd - 1,))


def lu_solve(lu_out, permutation, b, trans: int = 0):
    """X with A X = b (trans 0) or A^T X = b (trans 1, 2) from A's packed LU factors and permutation,
    b (..., m, k) batched as lu_out: the two triangular solves of JAX's `_lu_solve_core`."""
    if trans == 0:
        x = take_rows(b, permutation)
        x = triangular_solve(lu_out, x, left_side=True, lower=True, unit_diagonal=True)
        return triangular_solve(lu_out, x, left_side=True, lower=False)
    if trans in (1, 2):
        x = triangular_solve(lu_out, b, left_side=True, lower=False, transpose_a=True)
        x = triangular_solve(lu_out, x, left_side=True, lower=True, unit_diagonal=True, transpose_a=True)
        return take_rows(x, inverse_permutation(permutation))
    raise ValueError(f"lu_solve: 'trans' must be 0, 1 or 2, got {trans!r}")
