"""Dense linear algebra as jax.lax.linalg: `cholesky`, `triangular_solve` and `lu`, batched over leading axes.

Every operand is a stack of matrices (its last two axes), float32 or float64. The references are
SciPy's LAPACK and BLAS (what JAX calls on the CPU), so singular and indefinite inputs give what JAX
gives: a Cholesky factorization that fails is NaN in its lower triangle, a triangular solve divides by
a zero diagonal (inf and NaN), and LU records zero pivots and goes on. Gradients follow JAX's rules:
cholesky's is Murray (2016), L^-T phi(L^T Lbar) L^-1 (the transpose of JAX's `_cholesky_jvp_rule`),
triangular_solve's is JAX's transpose rule for b and -op(A)^-T Xbar X^T for a, and lu's is the
transpose of JAX's `_lu_jvp_rule` (De Hoog, Anderssen and Lukas).
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
