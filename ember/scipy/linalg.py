"""`ember.scipy.linalg`, as jax.scipy.linalg: triangular, Cholesky and LU solves with SciPy's signatures
(`solve_triangular`, `cholesky`, `cho_factor`/`cho_solve`, `lu_factor`/`lu_solve`, `solve`, `inv`,
`det`), the decompositions (`lu` as (p, l, u), `qr`, `eigh`, `svd`), `block_diag` and `expm` (JAX's
scaling and squaring with Pade approximants, differentiated through its operations).

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

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "inv", "lu", "lu_factor",
           "lu_solve", "qr", "solve", "solve_triangular", "svd"]

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


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False, debug: bool = False,
          check_finite: bool = True, assume_a: str = "gen"):
    """x with a x = b. Every `assume_a` solves by LU, whose gradient is JAX's for each (JAX's 'pos' factors by
    Cholesky but differentiates the plain solve, which LU's rounding alone tells from)."""
    del lower, overwrite_a, overwrite_b, debug, check_finite
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"solve: expected assume_a to be one of ['gen', 'sym', 'her', 'pos']; got {assume_a!r}")
    return jnp.linalg.solve(a, b)


def inv(a, overwrite_a: bool = False, check_finite: bool = True):
    """The inverse of each square matrix."""
    return jnp.linalg.inv(a)


def det(a, overwrite_a: bool = False, check_finite: bool = True):
    """The determinant of each square matrix."""
    return jnp.linalg.det(a)


def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """(p, l, u) with a = p l u (p a permutation matrix, l unit lower, u upper), or (p l, u) with
    `permute_l`, as scipy.linalg.lu."""
    del overwrite_a, check_finite
    (a,) = _inexact(a)
    packed, _, permutation = P.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    rows = jnp.arange(m, dtype=np.int32)
    p = (jnp.expand_dims(permutation, -2) == rows[:, None]).astype(a.dtype)
    below = rows[:, None] > jnp.arange(k, dtype=np.int32)
    l_ = jnp.where(below, packed[..., :, :k], 0.0) + jnp.eye(m, k, dtype=a.dtype)
    u = jnp.where(rows[:k, None] <= jnp.arange(n, dtype=np.int32), packed[..., :k, :], 0.0)
    return (p @ l_, u) if permute_l else (p, l_, u)


def qr(a, overwrite_a: bool = False, lwork=None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True):
    """(q, r) (mode 'full' or 'economic') or (r,) (mode 'r'), as scipy.linalg.qr; no pivoting."""
    del overwrite_a, lwork, check_finite
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not implemented in Ember")
    if mode not in ("full", "r", "economic"):
        raise ValueError(f"qr: unsupported mode {mode!r}")
    (a,) = _inexact(a)
    q, r = P.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1, check_finite: bool = True):
    """(w, v), or w with `eigvals_only`, of each symmetric matrix read from its `lower` (or upper) triangle;
    only the standard problem (b=None, type=1), as JAX's."""
    del overwrite_a, overwrite_b, turbo, check_finite
    if b is not None or type != 1 or eigvals is not None:
        raise NotImplementedError("eigh: only the b=None, type=1, eigvals=None case is implemented (as JAX)")
    (a,) = _inexact(a)
    _square("eigh", a)
    v, w = P.eigh(a, lower=lower)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd"):
    """(u, s, vh), or s without `compute_uv`, as scipy.linalg.svd (gesdd)."""
    del overwrite_a, check_finite, lapack_driver
    (a,) = _inexact(a)
    if not compute_uv:
        return P.svd(a, full_matrices=full_matrices, compute_uv=False)[0]
    s, u, vt = P.svd(a, full_matrices=full_matrices)
    return u, s, vt


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


# Pade approximants of exp (Higham 2005, as JAX's expm): each order's coefficients b_0..b_m, and the
# 1-norm bounds choosing the order, per precision (the last order for norms above the largest bound,
# after scaling the matrix by 2^-s so its norm is at most MAX_NORM)
_PADE = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880., 3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
         10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.),
}
_ORDERS = {np.dtype(np.float64): ((3, 5, 7, 9, 13), (1.495585217958292e-002, 2.539398330063230e-001,
                                                      9.504178996162932e-001, 2.097847961257068e+000),
                                  5.371920351148152),
           np.dtype(np.float32): ((3, 5, 7), (4.258730016922831e-001, 1.880152677804762e+000), 3.925724783138660)}


def _pade(order: int, a, eye):
    """(U, V), the odd and even parts of the order's numerator (P = U + V, Q = V - U), as JAX computes them."""
    b = _PADE[order]
    a2 = a @ a
    powers = [eye, a2]
    if order == 13:
        a4 = a2 @ a2
        a6 = a4 @ a2
        u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
        return u, v
    for _ in range(order // 2 - 1):
        powers.append((powers[-1] @ a2) if len(powers) > 2 else a2 @ a2)
    odd = sum((b[2 * k + 1] * p for k, p in enumerate(powers[1:], 1)), b[1] * eye)
    even = sum((b[2 * k] * p for k, p in enumerate(powers[1:], 1)), b[0] * eye)
    return a @ odd, even


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16):  # noqa: N803 - SciPy's name
    """The matrix exponential of each square matrix: A scaled by 2^-s to a bounded 1-norm, the Pade
    approximant its norm selects, and s squarings (NaN past max_squarings), as jax.scipy.linalg.expm;
    its gradient is that computation's."""
    from ember.lax import scan

    (a,) = _inexact(A)
    _square("expm", a)
    if a.dtype not in _ORDERS:
        raise TypeError(f"expm: A.dtype={a.dtype} is not supported (float32 or float64)")
    orders, bounds, max_norm = _ORDERS[a.dtype]
    n = a.shape[-1]
    norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)  # the 1-norm of each matrix
    squarings = jnp.maximum(0.0, jnp.floor(jnp.log2(norm / max_norm)))
    scaled = a / jnp.expand_dims(2.0 ** squarings, (-1, -2)).astype(a.dtype)
    choice = sum(((norm >= bound).astype(np.int32) for bound in bounds), jnp.zeros(norm.shape, np.int32))
    eye = jnp.eye(n, dtype=a.dtype)
    u = v = None
    for k, order in enumerate(orders):  # every order, the norm's choice kept: stacks need no branch
        uk, vk = _pade(order, scaled, eye)
        pick = jnp.expand_dims(choice == k, (-1, -2))
        u, v = (uk, vk) if u is None else (jnp.where(pick, uk, u), jnp.where(pick, vk, v))
    p, q = u + v, v - u
    r = solve_triangular(q, p) if upper_triangular else jnp.linalg.solve(q, p)

    def square(r, i):
        return jnp.where(jnp.expand_dims(i < squarings, (-1, -2)), r @ r, r), None

    r, _ = scan(square, r, jnp.arange(max_squarings, dtype=a.dtype))
    return jnp.where(jnp.expand_dims(squarings > max_squarings, (-1, -2)), np.nan, r)


def __getattr__(name: str):
    """Say whether jax.scipy.linalg has a name Ember lacks and what to use."""
    raise _missing_attribute("ember.scipy.linalg", name, globals())
