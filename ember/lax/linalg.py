"""`ember.lax.linalg`, as jax.lax.linalg: the factorization primitives under lax's names and signatures
(`cholesky` with `symmetrize_input`, `triangular_solve`, `lu`, `qr`, `eigh`, `svd`) and
`lu_pivots_to_permutation`."""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, IncompatibleShapesError, user_location
from ember.errors import missing_attribute as _missing_attribute
from ember.lax.control import fori_loop
from ember.lax.slicing import dynamic_index_in_dim
from ember.tracer import prims as P
from ember.tracer.prims import lu, triangular_solve
from ember.tracer.prims.util import shape_of

__all__ = ["cholesky", "eigh", "lu", "lu_pivots_to_permutation", "qr", "svd", "triangular_solve"]


def cholesky(x, *, symmetrize_input: bool = True):
    """The lower Cholesky factor of each matrix of x, reading (x + x^T) / 2 with `symmetrize_input`, else
    x's lower triangle; NaN where a matrix is not positive definite."""
    return P.cholesky(_symmetrized(x) if symmetrize_input else x)


def _symmetrized(x):
    nd = len(shape_of(x))
    return P.mul(P.add(x, P.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))), 0.5)


def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None):
    """(q, r) with x = q r (Householder, LAPACK's signs); pivoting is not implemented in Ember."""
    del use_magma
    if pivoting:
        raise NotImplementedError("lax.linalg.qr: pivoting=True is not implemented in Ember")
    return P.qr(x, full_matrices=full_matrices)


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index=None, implementation=None):
    """(v, w): eigenvectors (columns) and ascending eigenvalues of each symmetric matrix."""
    del sort_eigenvalues, implementation  # always sorted; one implementation
    if subset_by_index is not None:
        raise NotImplementedError("lax.linalg.eigh: subset_by_index is not implemented in Ember")
    return P.eigh(_symmetrized(x) if symmetrize_input else x, lower=lower)


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None, algorithm=None):
    """(u, s, vt) with x = u diag(s) vt (s descending), or s alone without `compute_uv`."""
    del algorithm
    if subset_by_index is not None:
        raise NotImplementedError("lax.linalg.svd: subset_by_index is not implemented in Ember")
    if not compute_uv:
        return P.svd(x, full_matrices=full_matrices, compute_uv=False)[0]
    s, u, vt = P.svd(x, full_matrices=full_matrices)
    return u, s, vt


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """The permutation of range(permutation_size) that the row swaps `pivots` (int32, (..., k)) make in
    order: row i swapped with row pivots[i]."""
    shape = shape_of(pivots)
    if np.dtype(pivots.dtype) != np.int32:
        raise DTypeError(f"lu_pivots_to_permutation: pivots must be int32, got {np.dtype(pivots.dtype).name}",
                         user_location())
    k, m = shape[-1], int(permutation_size)
    if m < k:
        raise IncompatibleShapesError(f"lu_pivots_to_permutation: permutation_size {m} is smaller than the "
                                      f"{k} pivots", user_location())
    full = shape[:-1] + (m,)
    axis = len(full) - 1
    rows = P.iota(np.int32, full, axis)

    def widen(column):  # (..., 1) -> (..., m)
        return P.broadcast_in_dim(P.reshape(column, full[:-1]), full, tuple(range(axis)))

    def swap(i, perm):
        p = widen(dynamic_index_in_dim(pivots, i, axis))
        here = widen(dynamic_index_in_dim(perm, i, axis))
        there = widen(P.reduce_sum(P.select(P.eq(rows, p), perm, 0), (axis,)))
        return P.select(P.eq(rows, P.convert_element_type(i, np.int32)), there, P.select(P.eq(rows, p), here, perm))

    return fori_loop(0, k, swap, rows)


def __getattr__(name: str):
    """Say whether jax.lax.linalg has a name Ember lacks."""
    raise _missing_attribute("ember.lax.linalg", name, globals())
