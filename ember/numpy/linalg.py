"""ember.numpy.linalg, as jax.numpy.linalg: factorizations and solves on stacks of matrices (the last
two axes; the leading ones batched and broadcast) and norms.

cholesky, solve, inv, det and slogdet compose the primitives of tracer/prims/linalg.py (cholesky, lu,
triangular_solve), so they trace, differentiate (their gradients are those primitives' rules), batch
and compile as those do. As in JAX: integer operands are promoted to floats; a singular matrix's
solve and inverse hold infinities and NaN (the triangular solves divide by a zero pivot), its det is 0
and its slogdet (0, -inf); det and slogdet of 2 x 2 (and det of 3 x 3) matrices are JAX's closed
forms. Unlike JAX, the gradient of det at a singular matrix of size 4 or more is NaN (JAX's custom
rule gives the adjugate there).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ember.errors import AxisError, IncompatibleShapesError, ShapeError, user_location
from ember.errors import missing_attribute as _missing_attribute
from ember.numpy import _arrays, _products
from ember.numpy import _math as m
from ember.numpy import _reductions as r
from ember.numpy._core import asarray, broadcast_shapes, normalize_axes, normalize_axis, promote, to_dtype
from ember.numpy._creation import eye
from ember.numpy._products import matmul
from ember.numpy._shape import broadcast_to, concatenate, expand_dims, moveaxis, reshape, squeeze, swapaxes
from ember.tracer import dtypes
from ember.tracer import prims as P

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "lstsq", "matmul", "matrix_norm",
           "matrix_power",
           "matrix_rank", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals",
           "tensordot", "tensorinv", "tensorsolve", "trace", "vector_norm"]


class SlogdetResult(NamedTuple):
    """slogdet's (sign, logabsdet), as jax.numpy.linalg's."""

    sign: object
    logabsdet: object


class QRResult(NamedTuple):
    Q: object
    R: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def _inexact(x):
    """x as an array of a float dtype (integers and bools promoted as jnp's promote_dtypes_inexact)."""
    x = asarray(x)
    return x if dtypes.is_float(x.dtype) else to_dtype(x, dtypes.default_float_for(x.dtype))


def _square(x, name: str, error=IncompatibleShapesError):
    """x, which must be a stack of square matrices: else `error` (JAX's class) naming the user's line."""
    shape = tuple(x.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise error(f"{name}: the argument must have shape [..., n, n] (a stack of square matrices), got {shape}",
                    user_location())
    return x


def _mT(x):
    return swapaxes(x, -1, -2)


def _diagonal(x):
    """The diagonals of a stack of square matrices (..., n)."""
    n = x.shape[-1]
    return r.sum(m.multiply(x, eye(n, dtype=x.dtype)), axis=-1)


def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    """The Cholesky factor of each symmetric positive-definite matrix: lower (a = L L^T), or upper
    (a = U^T U) with `upper`; NaN where a matrix is not positive definite, as JAX. With
    `symmetrize_input` the factorization reads (a + a^T) / 2, so its gradient is symmetric."""
    a = _square(_inexact(a), "cholesky")
    if symmetrize_input:
        a = m.multiply(m.add(a, _mT(a)), 0.5)
    factor = P.cholesky(a)
    return _mT(factor) if upper else factor


def _solve_matrices(a, b):
    """X with a X = b for a (..., m, m) and b (..., m, k) of the same leading axes, through a's LU."""
    lu, _, permutation = P.lu(a)
    return P.lu_solve(lu, permutation, b)


def solve(a, b):
    """x with a @ x = b: b (m,) is one right-hand side for every matrix of a, b (..., m, k) a stack of them,
    the leading axes broadcast against a's."""
    a, b = promote(_inexact(asarray(a)), _inexact(asarray(b)), name="solve")
    if len(a.shape) < 2:
        raise IncompatibleShapesError(f"solve: the left-hand side must be at least two-dimensional, got shape "
                                      f"{tuple(a.shape)}", user_location())
    _square(a, "solve")
    n = a.shape[-1]
    vector = len(b.shape) == 1
    if vector:
        b = expand_dims(b, -1)
    if len(b.shape) < 2 or b.shape[-2] != n:
        given = tuple(b.shape[:-1] if vector else b.shape)
        raise IncompatibleShapesError(f"solve: shapes {tuple(a.shape)} and {given} do not match (b must be (n,) "
                                      "or (..., n, k))", user_location())
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2] if not vector else (), name="solve")
    x = _solve_matrices(broadcast_to(a, batch + (n, n)), broadcast_to(b, batch + tuple(b.shape[-2:])))
    return squeeze(x, -1) if vector else x


def inv(a):
    """The inverse of each square matrix (a singular one's holds infinities and NaN, as JAX's)."""
    a = _square(_inexact(a), "inv")
    n = a.shape[-1]
    return _solve_matrices(a, broadcast_to(eye(n, dtype=a.dtype), tuple(a.shape)))


def _entry(a, i: int, j: int):
    return a[..., i, j]


def _det_2x2(a):
    return m.subtract(m.multiply(_entry(a, 0, 0), _entry(a, 1, 1)), m.multiply(_entry(a, 0, 1), _entry(a, 1, 0)))


def _det_3x3(a):
    """JAX's closed form (its six products, in its order)."""
    def term(*ij):
        return m.multiply(m.multiply(_entry(a, *ij[0]), _entry(a, *ij[1])), _entry(a, *ij[2]))
    plus = m.add(m.add(term((0, 0), (1, 1), (2, 2)), term((0, 1), (1, 2), (2, 0))), term((0, 2), (1, 0), (2, 1)))
    return m.subtract(m.subtract(m.subtract(plus, term((0, 2), (1, 1), (2, 0))), term((0, 0), (1, 2), (2, 1))),
                      term((0, 1), (1, 0), (2, 2)))


def _lu_parity(pivots, dtype):
    """The sign of the row permutation an LU's pivots describe (+-1 per matrix)."""
    n = pivots.shape[-1]
    swaps = r.sum(m.not_equal(pivots, np.arange(n, dtype=np.int32)), axis=-1)
    return m.where(m.equal(m.remainder(swaps, 2), 0), 1.0, -1.0).astype(dtype)


def _lu_sign_and_diagonal(a):
    """The sign of the row permutation of a's LU (+-1 per matrix) and U's diagonal."""
    lu, pivots, _ = P.lu(a)
    return _lu_parity(pivots, a.dtype), _diagonal(lu)


def _det_by_lu(a):
    """det by LU: the product of U's diagonal times the sign of the row swaps."""
    parity, diagonal = _lu_sign_and_diagonal(a)
    return m.multiply(parity, r.prod(diagonal, axis=-1))


def _corner(n: int) -> np.ndarray:
    corner = np.zeros((n, n), bool)
    corner[-1, -1] = True
    return corner


def _cofactor_solve(a, b):
    """(det(a), adjugate(a) @ b) for square a (..., n, n) and b of its shape, finite where a is singular
    (JAX's _cofactor_solve): with P a = L U, U's last pivot is replaced by 1 / (the product of the others)
    so that the triangular solves give det(a) a^-1 b for rank n and n - 1 alike; a matrix of lower rank
    (whose adjugate is 0) is detected by U^-1 1 overflowing and gives zeros."""
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, 0], b
    lu, pivots, permutation = P.lu(a)
    diagonal = _diagonal(lu)
    parity = _lu_parity(pivots, a.dtype)
    leading = m.multiply(r.prod(diagonal[..., :-1], axis=-1), parity)  # det(a) / u_nn
    det_a = m.multiply(leading, diagonal[..., -1])
    lu = m.where(_corner(n), expand_dims(expand_dims(m.divide(1.0, leading), -1), -1), lu)
    probe = P.triangular_solve(lu, broadcast_to(np.ones((n, 1), a.dtype), tuple(a.shape[:-1]) + (1,)),
                               left_side=True, lower=False)
    low_rank = r.any(m.logical_not(m.isfinite(probe)), axis=(-2, -1))
    low_rank = expand_dims(expand_dims(low_rank, -1), -1)
    rows = broadcast_to(expand_dims(permutation, -1), tuple(b.shape))
    x = _arrays.take_along_axis(m.where(low_rank, 0.0, b), rows, axis=-2)
    x = P.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = concatenate([m.multiply(x[..., :-1, :], expand_dims(expand_dims(det_a, -1), -1)), x[..., -1:, :]], axis=-2)
    x = P.triangular_solve(lu, x, left_side=True, lower=False)
    return det_a, m.where(low_rank, 0.0, x)


def _det_lu_jvp(primals, tangents):
    """d det = tr(adjugate(a) da), JAX's rule: the adjugate (not det a^-1) keeps it finite at singular a."""
    (a,), (da,) = primals, tangents
    value, adjugate_da = _cofactor_solve(a, da)
    return value, _arrays.trace(adjugate_da, axis1=-2, axis2=-1)


# _det_by_lu with _det_lu_jvp as its custom_jvp: ember.custom_jvp sits in the api layer, above this one,
# so ember.api installs it when it loads (api/custom_jvp.py); until then det differentiates through lu
det_with_adjugate_jvp: Callable | None = None


def det(a):
    """The determinant of each square matrix: closed forms for 2 x 2 and 3 x 3 (as JAX), else the product
    of U's diagonal times the sign of the LU's row swaps, whose derivative is the adjugate's (JAX's: finite
    and exact at singular matrices too)."""
    a = _square(_inexact(a), "det")
    n = a.shape[-1]
    if n == 2:
        return _det_2x2(a)
    if n == 3:
        return _det_3x3(a)
    return (det_with_adjugate_jvp or _det_by_lu)(a)


def slogdet(a, *, method: str | None = None) -> SlogdetResult:
    """(sign, log |det|) of each square matrix, as JAX's: a singular matrix gives (0, -inf); 1 x 1 and
    2 x 2 matrices use the closed forms, larger ones the LU factorization (method 'lu')."""
    a = _square(_inexact(a), "slogdet")
    if method not in (None, "lu"):
        raise ValueError(f"slogdet: unknown method {method!r} (Ember has 'lu')")
    n = a.shape[-1]
    if n <= 2:
        value = _entry(a, 0, 0) if n == 1 else _det_2x2(a)
        return SlogdetResult(m.sign(value), m.log(m.abs(value)))
    parity, diagonal = _lu_sign_and_diagonal(a)
    zero = r.any(m.equal(diagonal, 0), axis=-1)
    negatives = r.sum(m.less(diagonal, 0), axis=-1)
    sign = m.where(zero, 0.0, m.where(m.equal(m.remainder(negatives, 2), 0), parity, m.negative(parity)))
    logdet = m.where(zero, -np.inf, r.sum(m.log(m.abs(diagonal)), axis=-1))
    return SlogdetResult(sign.astype(a.dtype), logdet.astype(a.dtype))


def matrix_power(a, n: int):
    """a raised to the integer power n by repeated squaring (n < 0: of the inverse; n == 0: identity)."""
    a = _inexact(a) if not hasattr(a, "dtype") else asarray(a)
    _square(a, "matrix_power", ShapeError)
    try:
        n = operator.index(n)
    except TypeError as e:
        raise ShapeError(f"matrix_power: the exponent must be an integer, got {n!r}", user_location()) from e
    if n == 0:
        return broadcast_to(eye(a.shape[-1], dtype=a.dtype), tuple(a.shape))
    if n < 0:
        a, n = inv(a), -n
    result, power = None, a
    while True:
        n, bit = divmod(n, 2)
        if bit:
            result = power if result is None else matmul(result, power)
        if n == 0:
            return result
        power = matmul(power, power)


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The cheapest parenthesization of a chain of matrices with shapes dims[i] x dims[i + 1] (the
    textbook dynamic program, as numpy.linalg.multi_dot): split[i][j] is where (i..j) splits."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices in the cheapest order; the first and last may be vectors."""
    del precision  # Ember computes in the operands' precision
    arrays = [asarray(x) for x in arrays]
    if len(arrays) < 2:
        raise ValueError(f"multi_dot requires at least two arrays; got {len(arrays)}")
    if not (arrays[0].ndim in (1, 2) and arrays[-1].ndim in (1, 2) and all(x.ndim == 2 for x in arrays[1:-1])):
        raise IncompatibleShapesError("multi_dot: the arrays must be two-dimensional, except the first and last, "
                                      f"which may be one-dimensional; got shapes {[tuple(x.shape) for x in arrays]}",
                                      user_location())
    first_vector, last_vector = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first_vector:
        arrays[0] = expand_dims(arrays[0], 0)
    if last_vector:
        arrays[-1] = expand_dims(arrays[-1], -1)
    if any(x.shape[1] != y.shape[0] for x, y in zip(arrays, arrays[1:])):
        raise IncompatibleShapesError("multi_dot: each array's last dimension must match the next one's first; got "
                                      f"shapes {[tuple(x.shape) for x in arrays]}", user_location())
    split = _chain_order([arrays[0].shape[0]] + [x.shape[1] for x in arrays])

    def product(i: int, j: int):
        return arrays[i] if i == j else matmul(product(i, split[i][j]), product(split[i][j] + 1, j))

    out = product(0, len(arrays) - 1)
    if first_vector:
        out = squeeze(out, 0)
    if last_vector:
        out = squeeze(out, -1)
    return out


def _matrices(x, name: str):
    x = _inexact(x)
    if len(x.shape) < 2:
        raise IncompatibleShapesError(f"{name}: the argument must be a stack of matrices (at least 2-D), got shape "
                                      f"{tuple(x.shape)}", user_location())
    return x


def qr(a, mode: str = "reduced"):
    """QRResult(Q, R) of each matrix, LAPACK's Householder signs: `mode` 'reduced' (Q with min(m, n)
    columns), 'complete' (Q square), or 'r' (R alone)."""
    a = _matrices(a, "qr")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: unsupported mode {mode!r} (Ember has 'reduced', 'complete' and 'r')")
    q, r_ = P.qr(a, full_matrices=mode == "complete")
    return r_ if mode == "r" else QRResult(q, r_)


def eigh(a, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:  # noqa: N803 - NumPy's name
    """EighResult(eigenvalues ascending, eigenvectors as columns) of each symmetric matrix, reading its
    UPLO ('L', the default, or 'U') triangle, or (a + a^T) / 2 with `symmetrize_input`. Gradients
    assume distinct eigenvalues, as JAX's."""
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"eigh: UPLO must be one of None, 'L', or 'U', got {UPLO!r}")
    a = _square(_inexact(a), "eigh")
    if symmetrize_input:
        a = m.multiply(m.add(a, _mT(a)), 0.5)
    v, w = P.eigh(a, lower=UPLO != "U")
    return EighResult(w, v)


def eigvalsh(a, UPLO: str | None = "L", *, symmetrize_input: bool = True):  # noqa: N803 - NumPy's name
    """The eigenvalues of each symmetric matrix, ascending."""
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index=None):
    """SVDResult(U, S, Vh) with a = U diag(S) Vh (S descending; LAPACK's gesdd, as JAX on the CPU), or S
    alone without `compute_uv`; for a symmetric a with `hermitian`, from its eigh (|eigenvalues|). Gradients
    assume distinct singular values, as JAX's."""
    if subset_by_index is not None:
        raise NotImplementedError("svd: subset_by_index is not implemented in Ember")
    if hermitian:
        return _svd_hermitian(a, compute_uv)
    a = _matrices(a, "svd")
    if not compute_uv:
        return P.svd(a, full_matrices=full_matrices, compute_uv=False)[0]
    s, u, vt = P.svd(a, full_matrices=full_matrices)
    return SVDResult(u, s, vt)


def _svd_hermitian(a, compute_uv: bool):
    """JAX's SVD of a symmetric matrix: S = |w| of its eigh sorted descending, U the eigenvectors in
    that order, Vh = (U sign(w))^T."""
    w, v = eigh(a)
    s = m.abs(w)
    last = len(s.shape) - 1
    if not compute_uv:
        return P.rev(P.sort((s,), last)[0], (last,))
    order = P.iota(np.dtype(np.int32), tuple(s.shape), last)
    s, order, sign = (P.rev(x, (last,)) for x in P.sort((s, order, m.sign(w)), last, num_keys=1))
    u = _arrays.take_along_axis(v, expand_dims(order, -2), axis=-1)
    return SVDResult(u, s, _mT(m.multiply(u, expand_dims(sign, -2))))


def svdvals(x, /):
    """The singular values of each matrix, descending."""
    return svd(x, compute_uv=False)


def _eps(dtype) -> float:
    return float(np.finfo(dtype).eps)


def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse of each matrix by its SVD, singular values at most rtol times the
    largest dropped (rtol defaults to 10 max(m, n) eps), as JAX's."""
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    a = _matrices(a, "pinv")
    rows, cols = a.shape[-2:]
    if rows == 0 or cols == 0:
        return m.multiply(broadcast_to(_mT(a), tuple(a.shape[:-2]) + (cols, rows)), 1.0)
    if rtol is None:
        rtol = 10.0 * max(rows, cols) * _eps(a.dtype)
    u, s, vt = svd(a, full_matrices=False, hermitian=hermitian)
    cutoff = m.multiply(expand_dims(asarray(rtol, a.dtype), -1), s[..., 0:1])
    s = m.where(m.greater(s, cutoff), s, np.inf).astype(a.dtype)
    return matmul(_mT(vt), m.divide(_mT(u), expand_dims(s, -1)))


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False):
    """(x, residuals, rank, s): the least-squares solution of a x = b by the SVD (singular values below
    rcond times the largest dropped; rcond defaults to eps max(m, n)), as JAX's."""
    a, b = promote(_inexact(asarray(a)), _inexact(asarray(b)), name="lstsq")
    if len(a.shape) != 2:
        raise ShapeError(f"lstsq: {len(a.shape)}-dimensional array given. Array must be two-dimensional",
                         user_location())
    if a.shape[0] != b.shape[0]:
        raise IncompatibleShapesError("lstsq: leading dimensions of input arrays must match", user_location())
    vector = len(b.shape) == 1
    if vector:
        b = expand_dims(b, -1)
    rows, cols = a.shape
    if rcond is None:
        rcond = _eps(a.dtype) * max(rows, cols)
    u, s, vt = svd(a, full_matrices=False)
    kept = m.logical_and(m.greater(s, 0), m.greater_equal(s, m.multiply(asarray(rcond, s.dtype), s[0])))
    rank = r.sum(kept)
    s_inv = m.where(kept, m.divide(1.0, m.where(kept, s, 1.0)), 0.0).astype(a.dtype)
    x = matmul(_mT(vt), m.multiply(expand_dims(s_inv, -1), matmul(_mT(u), b)))
    if numpy_resid and (isinstance(rank, np.ndarray) and (int(rank) < cols or rows <= cols)):
        resid = asarray(np.zeros((0,), a.dtype))
    else:
        resid = r.sum(m.square(m.subtract(b, matmul(a, x))), axis=0)
    return (squeeze(x, -1) if vector else x), resid, rank, s


def matrix_rank(M, rtol=None, *, hermitian: bool = False, tol=None):  # noqa: N803 - NumPy's name
    """The number of singular values of each matrix above rtol (default: max(m, n) eps times the
    largest), as JAX's."""
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    M = _inexact(M)
    if len(M.shape) < 2:
        return r.any(m.not_equal(M, 0)).astype(np.int32)
    s = m.abs(eigvalsh(M)) if hermitian else svdvals(M)
    if rtol is None:
        rtol = m.multiply(r.max(s, axis=-1), max(M.shape[-2:]) * _eps(s.dtype))
    return r.sum(m.greater(s, expand_dims(asarray(rtol, s.dtype), -1)), axis=-1)


def cond(x, p=None):
    """The condition number of each matrix in norm p (default 2: the ratio of extreme singular values);
    NaN becomes inf where x holds no NaN, as JAX's."""
    x = _inexact(x)
    if len(x.shape) < 2:
        raise IncompatibleShapesError(f"cond: input array must be at least 2D; got shape {tuple(x.shape)}",
                                      user_location())
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise IncompatibleShapesError(f"cond: input array must not be empty; got shape {tuple(x.shape)}",
                                      user_location())
    if p is None or p == 2:
        s = svdvals(x)
        return m.divide(s[..., 0], s[..., -1])
    if p == -2:
        s = svdvals(x)
        ratio = m.divide(s[..., -1], s[..., 0])
    else:
        _square(x, "cond")
        ratio = m.multiply(norm(x, ord=p, axis=(-2, -1)), norm(inv(x), ord=p, axis=(-2, -1)))
    clean = m.logical_not(r.any(m.isnan(x), axis=(-2, -1)))
    return m.where(m.logical_and(m.isnan(ratio), clean), np.inf, ratio)


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return m.sqrt(r.sum(m.multiply(x, x), axis, keepdims=keepdims))
    if ord == float("inf"):
        return r.max(m.abs(x), axis, keepdims=keepdims)
    if ord == float("-inf"):
        return r.min(m.abs(x), axis, keepdims=keepdims)
    if ord == 0:
        return r.sum(m.not_equal(x, 0), axis, keepdims=keepdims).astype(x.dtype)
    if ord == 1:
        return r.sum(m.abs(x), axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    return m.power(r.sum(m.power(m.abs(x), float(ord)), axis, keepdims=keepdims), 1.0 / ord)


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if ord in (None, "fro"):
        return m.sqrt(r.sum(m.multiply(x, x), axes, keepdims=keepdims))
    if ord in (1, -1):
        col_sums = r.sum(m.abs(x), row, keepdims=True)
        out = (r.max if ord == 1 else r.min)(col_sums, col, keepdims=True)
    elif ord in (float("inf"), float("-inf")):
        row_sums = r.sum(m.abs(x), col, keepdims=True)
        out = (r.max if ord > 0 else r.min)(row_sums, row, keepdims=True)
    elif ord in (2, -2, "nuc"):
        s = svdvals(moveaxis(x, (row, col), (-2, -1)))
        out = r.max(s, -1) if ord == 2 else r.min(s, -1) if ord == -2 else r.sum(s, -1)
        if not keepdims:
            return out
        return expand_dims(out, tuple(sorted((row, col))))
    else:
        raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
    if keepdims:
        return out
    from ember.numpy._shape import squeeze

    return squeeze(out, axes)


def norm(x, ord=None, axis=None, keepdims: bool = False):
    """Vector norms along one axis, matrix norms over two, as numpy.linalg.norm."""
    x = asarray(x)
    if not dtypes.is_float(x.dtype):
        x = to_dtype(x, dtypes.default_float_for(x.dtype))
    nd = len(x.shape)
    if axis is None:
        if ord is None:
            return _vector_norm(x, None, None, keepdims)
        if nd == 1:
            return _vector_norm(x, ord, 0, keepdims)
        if nd == 2:
            return _matrix_norm(x, ord, (0, 1), keepdims)
        raise IncompatibleShapesError(f"norm: ord={ord!r} needs a 1-D or 2-D array or an explicit axis",
                                      user_location())
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if len(axes) == 1:
        return _vector_norm(x, ord, normalize_axes(axes, nd, "norm")[0], keepdims)
    if len(axes) == 2:
        row, col = (normalize_axis(a, nd, "norm") for a in axes)
        if row == col:
            raise AxisError("norm: duplicate axes given", user_location())
        return _matrix_norm(x, ord, (row, col), keepdims)
    raise ShapeError(f"norm: axis must be an int or a pair of ints, got {axis!r}", user_location())


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro"):
    """The norm of each matrix over the last two axes (norm with axis=(-2, -1))."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):
    """The vector norm over `axis` (all axes by default, flattened), as the array API's."""
    x = _inexact(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
        if keepdims:
            raise NotImplementedError("vector_norm: keepdims with axis=None is not implemented in Ember")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return _vector_norm(x, ord, axes if len(axes) > 1 else axes[0], keepdims)


def outer(x1, x2, /):
    """The outer product of two vectors."""
    x1, x2 = asarray(x1), asarray(x2)
    if len(x1.shape) != 1 or len(x2.shape) != 1:
        raise IncompatibleShapesError(f"outer: input arrays must be one-dimensional, got shapes {tuple(x1.shape)} "
                                      f"and {tuple(x2.shape)}", user_location())
    return _products.outer(x1, x2)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    """ember.numpy.tensordot with the array API's keyword `axes`."""
    del precision
    out = _products.tensordot(x1, x2, axes=axes)
    return out if preferred_element_type is None else out.astype(preferred_element_type)


def diagonal(x, /, *, offset: int = 0):
    """The diagonals of a stack of matrices (the last two axes), as the array API's."""
    return _arrays.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset: int = 0, dtype=None):
    """The traces of a stack of matrices (the last two axes), as the array API's."""
    return _arrays.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def cross(x1, x2, /, *, axis: int = -1):
    """The cross products of 3-vectors along `axis`, as the array API's (2-vectors are an error here)."""
    x1, x2 = asarray(x1), asarray(x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise IncompatibleShapesError(f"cross: both inputs must hold 3-vectors along axis {axis}; got shapes "
                                      f"{tuple(x1.shape)} and {tuple(x2.shape)}", user_location())
    return _arrays.cross(x1, x2, axis=axis)


def tensorinv(a, ind: int = 2):
    """The inverse of `a` seen as a matrix of its first `ind` axes by the rest."""
    a = _inexact(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer; got {ind}")
    rows, cols = tuple(a.shape[:ind]), tuple(a.shape[ind:])
    if math.prod(rows) != math.prod(cols):
        raise IncompatibleShapesError(f"tensorinv: the product of the first {ind} dimensions of {tuple(a.shape)} "
                                      "must equal that of the others", user_location())
    return reshape(inv(reshape(a, (math.prod(rows), math.prod(cols)))), cols + rows)


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b: `a`'s leading axes (after moving `axes` last) are b's."""
    a, b = promote(_inexact(asarray(a)), _inexact(asarray(b)), name="tensorsolve")
    if axes is not None:
        nd = len(a.shape)
        a = moveaxis(a, tuple(axes), tuple(range(nd - len(axes), nd)))
    lead, out_shape = tuple(a.shape[:len(b.shape)]), tuple(a.shape[len(b.shape):])
    if lead != tuple(b.shape) or math.prod(lead) != math.prod(out_shape):
        raise IncompatibleShapesError(f"tensorsolve: a's leading shape {lead} must be b's {tuple(b.shape)}, with as "
                                      f"many elements as the rest {out_shape}", user_location())
    return reshape(solve(reshape(a, (math.prod(lead), math.prod(out_shape))), reshape(b, (-1,))), out_shape)


def __getattr__(name: str):
    """Say that a missing name is not implemented yet, with the closest names and the fallback."""
    raise _missing_attribute('ember.numpy.linalg', name, globals(), ("numpy.linalg", np.linalg))
