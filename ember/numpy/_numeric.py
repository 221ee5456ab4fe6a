"""Comparisons of whole arrays (isclose, allclose, array_equal, array_equiv), polynomials (polyval,
polyadd, polysub, polydiv, vander, polyfit) and piecewise-linear interpolation (interp), with
jax.numpy's semantics, composed of existing primitives."""

from __future__ import annotations

import operator

import numpy as np

from ember.errors import (
    ArgumentValueError,
    ConcretizationError,
    IncompatibleShapesError,
    ShapeError,
    user_location,
)
from ember.numpy import linalg
from ember.numpy._convolve import convolve
from ember.numpy._core import asarray, broadcast_shapes, dtype_weak, promote, shape_of, to_dtype
from ember.numpy._math import (
    abs,
    add,
    divide,
    equal,
    isfinite,
    isnan,
    logical_and,
    logical_or,
    multiply,
    negative,
    power,
    remainder,
    sqrt,
    subtract,
)
from ember.numpy._products import matmul, outer
from ember.numpy._reductions import all as _all
from ember.numpy._reductions import sum as _sum
from ember.numpy._shape import concatenate, expand_dims, stack
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.array import Array


def _float_pair(a, b):
    """a and b promoted together, then to a float dtype (integers compare as floats, as in JAX)."""
    a, b = promote(asarray(a), asarray(b), name="isclose")
    dt = dtypes.default_float_for(dtype_weak(a)[0])
    return to_dtype(a, dt, dtype_weak(a)[1]), to_dtype(b, dt, dtype_weak(b)[1])


def _finite_parts(finite, a, b):
    """a and b broadcast to `finite`'s shape, with 0 where either is not finite."""
    shape = shape_of(finite)
    zero = P.full(shape, 0, a.dtype)
    return tuple(P.select(finite, v if shape_of(v) == shape else P.broadcast_to(v, shape), zero)
                 for v in (a, b))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """Elementwise |a - b| <= atol + rtol * |b| (or a == b, covering equal infinities); NaNs are
    close to each other only with `equal_nan`."""
    a, b = _float_pair(a, b)
    dt = dtype_weak(a)[0]
    rtol, atol = to_dtype(rtol, dt), to_dtype(atol, dt)
    finite = logical_and(isfinite(a), isfinite(b))
    # the range test on finite pairs only (so no inf - inf is computed: no warning from NumPy eagerly)
    fa, fb = _finite_parts(finite, a, b)
    close = P.le(abs(subtract(fa, fb)), add(atol, multiply(rtol, abs(fb))))
    out = logical_or(equal(a, b), logical_and(finite, close))
    return logical_or(out, logical_and(isnan(a), isnan(b))) if equal_nan else out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """Whether every element of a is close to b's (isclose)."""
    return _all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan: bool = False):
    """Whether a1 and a2 have one shape and equal elements (NaNs equal with `equal_nan`)."""
    a1, a2 = asarray(a1), asarray(a2)
    if shape_of(a1) != shape_of(a2):
        return np.asarray(False)
    eq = equal(a1, a2)
    if equal_nan and (dtypes.is_float(a1.dtype) or dtypes.is_float(a2.dtype)):
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return _all(eq)


def array_equiv(a1, a2):
    """Whether a1 and a2 broadcast together with equal elements."""
    a1, a2 = asarray(a1), asarray(a2)
    try:
        broadcast_shapes(shape_of(a1), shape_of(a2), name="array_equiv")
    except IncompatibleShapesError:
        return np.asarray(False)
    return _all(equal(a1, a2))


def polyval(p, x, *, unroll: int = 16):
    """The polynomial with coefficients p (highest degree first, along p's first axis) at x, by
    Horner's rule (unrolled: the coefficient count is static)."""
    p, x = promote(asarray(p), asarray(x), name="polyval")
    shape = broadcast_shapes(shape_of(p)[1:], shape_of(x), name="polyval")
    dt, weak = dtype_weak(x)
    y = P.full(shape, 0, dt, weak_type=weak)
    for i in range(shape_of(p)[0]):
        y = add(multiply(y, x), P.reshape(P.slice(p, (i,) + (0,) * (len(p.shape) - 1),
                                                  (i + 1,) + tuple(p.shape[1:])), tuple(p.shape[1:])))
    return y


def _poly_pad(a, n: int):
    """The 1-D coefficients `a` with leading zeros up to length n."""
    return P.pad(a, to_dtype(0, a.dtype), ((n - a.shape[0], 0, 0),))


def polyadd(a1, a2):
    """Sum of two polynomials (1-D coefficients, highest degree first)."""
    a1, a2 = promote(asarray(a1), asarray(a2), name="polyadd")
    n = max(a1.shape[0], a2.shape[0])
    return add(_poly_pad(a1, n), _poly_pad(a2, n))


def polysub(a1, a2):
    """Difference of two polynomials (1-D coefficients, highest degree first)."""
    a1, a2 = promote(asarray(a1), asarray(a2), name="polysub")
    n = max(a1.shape[0], a2.shape[0])
    return subtract(_poly_pad(a1, n), _poly_pad(a2, n))


def _concrete_int(value, what: str) -> int:
    """`value` as a Python int, or JAX's ConcretizationError when it is traced."""
    try:
        return operator.index(value)
    except TypeError:
        raise ConcretizationError(f"{what} must be a concrete integer", user_location()) from None


def vander(x, N: int | None = None, increasing: bool = False):  # noqa: N803 - NumPy's name
    """The Vandermonde matrix of the 1-D x: columns x**(N-1), ..., x**0 (increasing: x**0 first), in x's
    dtype, as jnp.vander."""
    x = asarray(x)
    if len(x.shape) != 1:
        raise ArgumentValueError("vander: x must be a one-dimensional array", user_location())
    n = x.shape[0] if N is None else _concrete_int(N, "vander: 'N' argument")
    if n < 0:
        raise ArgumentValueError("vander: N must be nonnegative", user_location())
    exponents = P.iota(dtype_weak(x)[0], (n,), 0)
    if not increasing:
        exponents = P.rev(exponents, (0,))
    return power(expand_dims(x, -1), expand_dims(exponents, 0))


def _check_polyfit_args(x, y, w):
    """JAX's TypeErrors for polyfit's shapes: x 1-D and not empty, y 1-D or 2-D of x's length, w 1-D."""
    if len(x.shape) != 1:
        raise ShapeError("polyfit: expected 1D vector for x", user_location())
    if x.shape[0] == 0:
        raise ShapeError("polyfit: expected non-empty vector for x", user_location())
    if not 1 <= len(y.shape) <= 2:
        raise ShapeError("polyfit: expected 1D or 2D array for y", user_location())
    if x.shape[0] != y.shape[0]:
        raise ShapeError("polyfit: expected x and y to have same length", user_location())
    if w is not None and len(w.shape) != 1:
        raise ShapeError("polyfit: expected a 1-d array for weights", user_location())
    if w is not None and w.shape[0] != y.shape[0]:
        raise ShapeError("polyfit: expected w and y to have the same length", user_location())


def _polyfit_cov(lhs, scale, resids, n_points: int, order: int, cov, vector: bool):
    """The coefficients' covariance: (lhs^T lhs)^-1 unscaled by the columns' scale, times the residual
    variance per right-hand side unless cov == 'unscaled' (JAX's polyfit)."""
    base = divide(linalg.inv(matmul(lhs.T, lhs)), outer(scale, scale))
    if isinstance(cov, str) and cov == "unscaled":
        fac = P.full((1,), 1, base.dtype)
    elif n_points <= order:
        raise ArgumentValueError("polyfit: the number of data points must exceed order to scale the covariance "
                                 "matrix", user_location())
    else:
        fac = divide(resids, n_points - order)
    if vector:
        return multiply(base, P.reshape(fac, (1, 1)))
    return multiply(expand_dims(base, -1), P.reshape(fac, (1, 1, fac.shape[0])))


def polyfit(x, y, deg: int, rcond=None, full: bool = False, w=None, cov: bool = False):
    """The least-squares polynomial of degree `deg` through (x, y) (y's columns fitted independently),
    highest degree first, weighted by `w`: the Vandermonde system with unit-norm columns solved by lstsq,
    as jnp.polyfit. `full` adds (residuals, rank, singular values, rcond); `cov` the covariance."""
    x, y = asarray(x), asarray(y)
    w = None if w is None else asarray(w)
    deg = _concrete_int(deg, "polyfit: deg")
    if deg < 0:
        raise ArgumentValueError("polyfit: expected deg >= 0", user_location())
    _check_polyfit_args(x, y, w)
    order = deg + 1
    x, y = promote(x, y, name="polyfit")
    dt = dtypes.default_float_for(dtype_weak(x)[0])
    x, y = to_dtype(x, dt), to_dtype(y, dt)
    if rcond is None:
        rcond = x.shape[0] * float(np.finfo(dt).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = to_dtype(w, dtypes.default_float_for(dtype_weak(w)[0]))
        lhs = multiply(lhs, expand_dims(w, -1))
        rhs = multiply(rhs, expand_dims(w, -1) if len(rhs.shape) == 2 else w)
    scale = sqrt(_sum(multiply(lhs, lhs), axis=0))
    lhs = divide(lhs, expand_dims(scale, 0))
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = divide(c, expand_dims(scale, -1)) if len(c.shape) > 1 else divide(c, scale)
    if full:
        return c, resids, rank, s, asarray(rcond)
    if cov:
        return c, _polyfit_cov(lhs, scale, resids, x.shape[0], order, cov, len(y.shape) == 1)
    return c


def _trim_leading(a, tol, name: str):
    """The concrete 1-D `a` without its leading entries below `tol` in magnitude (exact zeros for tol 0;
    all of it if all are)."""
    if not isinstance(a, np.ndarray):
        raise ConcretizationError(f"{name}: trim_leading_zeros=True needs concrete coefficients (the result's "
                                  "length depends on their values)", user_location())
    small = np.abs(a) < tol if tol else a == 0
    return a[:0] if small.all() else a[int(np.argmin(small)):]


def polymul(a1, a2, *, trim_leading_zeros: bool = False):
    """The product of two polynomials (1-D coefficients, highest degree first): their full convolution,
    as jnp.polymul (leading zeros kept unless `trim_leading_zeros`, which needs concrete values)."""
    a1, a2 = promote(asarray(a1), asarray(a2), name="polymul")
    dt = dtypes.default_float_for(dtype_weak(a1)[0])
    a1, a2 = to_dtype(a1, dt), to_dtype(a2, dt)
    if trim_leading_zeros and (a1.shape[0] > 1 or a2.shape[0] > 1):
        a1, a2 = (_trim_leading(a, 0, "polymul") for a in (a1, a2))
    a1 = a1 if a1.shape[0] else np.zeros(1, dt)
    a2 = a2 if a2.shape[0] else np.zeros(1, dt)
    return convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros: bool = False):
    """(quotient, remainder) of the polynomial division u / v (1-D coefficients, highest degree first),
    by JAX's long division: the remainder keeps u's length unless `trim_leading_zeros` (concrete only)."""
    u, v = promote(asarray(u), asarray(v), name="polydiv")
    dt = dtypes.default_float_for(dtype_weak(u)[0])
    u, v = to_dtype(u, dt), to_dtype(v, dt)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = divide(1.0, v[0])
    quotient = []
    for k in range(m - n + 1):
        d = multiply(scale, u[k])
        quotient.append(d)
        u = add(u, P.pad(multiply(negative(d), v), to_dtype(0, dt), ((k, m - n - k, 0),)))
    q = stack(quotient) if quotient else P.full((1,), 0, dt)
    if trim_leading_zeros:
        u = np.array(_trim_leading(u, np.sqrt(np.finfo(dt).eps), "polydiv")).view(Array)
    return q, u


def _periodic(x, xp, fp, period, dt):
    """x and xp reduced modulo |period|, xp sorted (fp with it) and extended by one point each side."""
    if np.ndim(period) != 0:
        raise ArgumentValueError(f"interp: period must be a scalar; got {period}", user_location())
    period = abs(to_dtype(period, dt))
    x, xp = remainder(x, period), remainder(xp, period)
    xp, fp = P.sort((xp, fp), 0, 1)
    n = xp.shape[0]
    xp = concatenate([subtract(xp[n - 1:], period), xp, add(xp[:1], period)])
    return x, xp, concatenate([fp[n - 1:], fp, fp[:1]])


def _extrapolates(side, name: str) -> bool:
    """Whether left/right is 'extrapolate' (JAX's ValueError for other strings)."""
    if not isinstance(side, str):
        return False
    if side != "extrapolate":
        raise ArgumentValueError(f"interp: the only valid string value of `{name}` is 'extrapolate', but got: "
                                 f"{side!r}", user_location())
    return True


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) at x (xp increasing, by contract); left and
    right (default fp's ends, 'extrapolate' the end segments' lines) outside; with `period`, x and xp are
    angles modulo it (left and right ignored). The interval is found by comparisons with every xp."""
    x, xp, fp = (asarray(v) for v in (x, xp, fp))
    if len(xp.shape) != 1 or shape_of(xp) != shape_of(fp):
        raise ArgumentValueError(f"interp: xp and fp must be 1-D of one length, got shapes {shape_of(xp)} and "
                                 f"{shape_of(fp)}", user_location())
    extrapolate_left, extrapolate_right = _extrapolates(left, "left"), _extrapolates(right, "right")
    x, xp, fp = promote(x, xp, fp, name="interp")
    dt = dtypes.default_float_for(dtype_weak(x)[0])
    x, xp, fp = (to_dtype(v, dt) for v in (x, xp, fp))
    if period is not None:
        x, xp, fp = _periodic(x, xp, fp, period, dt)
        extrapolate_left = extrapolate_right = True
    n, shape = xp.shape[0], shape_of(x)
    flat = P.reshape(x, (int(np.prod(shape)), 1))
    m = flat.shape[0]
    i = P.reduce_sum(P.convert_element_type(P.le(P.broadcast_to(P.reshape(xp, (1, n)), (m, n)),
                                                 P.broadcast_to(flat, (m, n))), dtypes.int_), (1,))
    i = P.maximum(P.minimum(i, dtypes.int_.type(n - 1)), dtypes.int_.type(1))  # searchsorted, clipped
    at = lambda v, k: P.gather(v, P.reshape(k, (m, 1)))  # noqa: E731
    x0, x1, f0, f1 = at(xp, P.sub(i, dtypes.int_.type(1))), at(xp, i), at(fp, P.sub(i, dtypes.int_.type(1))), at(fp, i)
    xf = P.reshape(flat, (m,))
    dx = P.sub(x1, x0)
    flat_dx = P.le(P.abs(dx), dt.type(np.spacing(np.finfo(dt).eps)))
    step = P.div(P.sub(xf, x0), P.select(flat_dx, P.full((m,), 1, dt), dx))
    f = P.select(flat_dx, f0, P.add(f0, P.mul(step, P.sub(f1, f0))))
    if not extrapolate_left:
        lo = P.reshape(P.slice(fp, (0,), (1,)), ()) if left is None else to_dtype(left, dt)
        f = P.select(P.lt(xf, P.reshape(P.slice(xp, (0,), (1,)), ())), P.broadcast_to(lo, (m,)), f)
    if not extrapolate_right:
        hi = P.reshape(P.slice(fp, (n - 1,), (n,)), ()) if right is None else to_dtype(right, dt)
        f = P.select(P.gt(xf, P.reshape(P.slice(xp, (n - 1,), (n,)), ())), P.broadcast_to(hi, (m,)), f)
    return P.reshape(f, shape)
