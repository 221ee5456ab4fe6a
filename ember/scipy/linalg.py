"""`ember.scipy.linalg`, as jax.scipy.linalg: triangular, Cholesky and LU solves with SciPy's signatures
(`solve_triangular`, `cholesky`, `cho_factor`/`cho_solve`, `lu_factor`/`lu_solve`) and `block_diag`.

They compose the factorization primitives (tracer/prims/linalg.py), so they trace, differentiate,
batch and compile as those do; as in JAX, `overwrite_*`, `check_finite` and `debug` are accepted and
unused, integer operands are promoted to floats, and b of shape (n,) is one right-hand side, (..., n, k)
a stack of them (leading axes broadcast against the matrix's).
"""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember.errors import IncompatibleShapesError, user_location
from ember.errors import missing_attribute as _missing_attribute
from ember.lax.linalg import lu_pivots_to_permutation
from ember.tracer import dtypes
from ember.tracer import prims as P

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "lu_factor", "lu_solve", "solve_triangular"]

_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}  # real matrices: C is T


def _inexact(*xs) -> list:
    """The operands promoted together, then to a float dtype (as jnp's promote_dtypes_inexact)."""
    xs = [jnp.asarray(x) for x in xs]
    dt = _promoted(xs)
    dt = dt if dtypes.is_float(dt) else dtypes.default_float_for(dt)
    return [x.astype(dt) if x.dtype != dt else x for x in xs]


def _promoted(xs) -> np.dtype:
    """The dtype arrays promote to on JAX's lattice."""
    dt = xs[0].dtype
    for x in xs[1:]:
        dt = dtypes.promote_types(dt, x.dtype)
    return np.dtype(dt)


def _square(name: str, a) -> None:
    shape = tuple(a.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise IncompatibleShapesError(f"{name}: the matrix must have shape (..., n, n), got {shape}", user_location())


def _solve_with(name: str, a, b, solve):
    """solve(a, b) on stacks: b (n,) becomes one column, b (..., n, k) is broadcast with a's leading axes."""
    _square(name, a)
    n = a.shape[-1]
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    if b.ndim < 2 or b.shape[-2] != n:
        raise IncompatibleShapesError(f"{name}: b's shape {tuple(b.shape)} does not fit a {n} x {n} matrix "
                                      "(b must be (n,) or (..., n, k))", user_location())
    batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    x = solve(jnp.broadcast_to(a, batch + (n, n)), jnp.broadcast_to(b, batch + tuple(b.shape[-2:])))
    return x[..., 0] if vector else x


def solve_triangular(a, b, trans: int | str = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug=None, check_finite: bool = True):
    """x with a x = b (trans 0 or 'N') or a^T x = b (1, 'T', 2, 'C'), reading a's lower or upper triangle
    (its diagonal as ones with `unit_diagonal`)."""
    del overwrite_b, debug, check_finite
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: invalid 'trans' value {trans!r}")
    a, b = _inexact(a, b)
    return _solve_with("solve_triangular", a, b, lambda a, b: P.triangular_solve(
        a, b, left_side=True, lower=bool(lower), transpose_a=_TRANS[trans], unit_diagonal=bool(unit_diagonal)))


def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The Cholesky factor of each matrix: upper (a = U^T U, from a's upper triangle) unless `lower`
    (a = L L^T, from its lower triangle); the input is not symmetrized, as in jax.scipy."""
    del overwrite_a, check_finite
    (a,) = _inexact(a)
    _square("cholesky", a)
    if lower:
        return P.cholesky(a)
    return jnp.swapaxes(P.cholesky(jnp.swapaxes(a, -1, -2)), -1, -2)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """(c, lower): the Cholesky factor for `cho_solve` (zeros in the other triangle, as JAX's)."""
    return cholesky(a, lower=lower, overwrite_a=overwrite_a, check_finite=check_finite), lower


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """x with a x = b from cho_factor's (c, lower): two triangular solves with c."""
    del overwrite_b, check_finite
    c, lower = c_and_lower
    c, b = _inexact(c, b)

    def solve(c, b):
        y = P.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower)
        return P.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower)

    return _solve_with("cho_solve", c, b, solve)


def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True):
    """(lu, piv): the packed LU factors and the row swaps (int32) for `lu_solve`."""
    del overwrite_a, check_finite
    (a,) = _inexact(a)
    lu, pivots, _ = P.lu(a)
    return lu, pivots


def lu_solve(lu_and_piv, b, trans: int = 0, overwrite_b: bool = False, check_finite: bool = True):
    """x with a x = b (trans 0) or a^T x = b (1, 2) from lu_factor's (lu, piv)."""
    del overwrite_b, check_finite
    lu, pivots = lu_and_piv
    if trans not in (0, 1, 2):
        raise ValueError(f"lu_solve: 'trans' must be 0, 1 or 2, got {trans!r}")
    lu, b = _inexact(lu, b)
    permutation = lu_pivots_to_permutation(jnp.asarray(pivots), lu.shape[-2])
    return _solve_with("lu_solve", lu, b, lambda lu_, b_: P.lu_solve(
        lu_, jnp.broadcast_to(permutation, tuple(lu_.shape[:-1])), b_, trans))


def block_diag(*arrs):
    """The block-diagonal matrix of the arrays (each at most 2-D; a scalar or vector is one row)."""
    if not arrs:
        arrs = (jnp.zeros((1, 0)),)
    arrs = [jnp.asarray(a) for a in arrs]
    bad = [k for k, a in enumerate(arrs) if a.ndim > 2]
    if bad:
        raise ValueError(f"block_diag: arguments must have at most 2 dimensions, got shape "
                         f"{tuple(arrs[bad[0]].shape)} at argument {bad[0]}")
    dt = _promoted(arrs)
    blocks = [jnp.atleast_2d(a).astype(dt) for a in arrs]
    total = sum(b.shape[1] for b in blocks)
    rows, start = [], 0
    for b in blocks:
        cols = b.shape[1]
        rows.append(P.pad(b, 0, ((0, 0, 0), (start, total - start - cols, 0))))
        start += cols
    return jnp.concatenate(rows, axis=0)


def __getattr__(name: str):
    """Say whether jax.scipy.linalg has a name Ember lacks and what to use."""
    raise _missing_attribute("ember.scipy.linalg", name, globals())
