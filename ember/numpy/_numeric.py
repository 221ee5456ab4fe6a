"""Comparisons of whole arrays (isclose, allclose, array_equal, array_equiv), polynomials (polyval,
polyadd, polysub) and piecewise-linear interpolation (interp), with jax.numpy's semantics, composed
of existing primitives."""

from __future__ import annotations

import numpy as np

from ember.errors import ArgumentValueError, IncompatibleShapesError, user_location
from ember.numpy._core import asarray, broadcast_shapes, dtype_weak, promote, shape_of, to_dtype
from ember.numpy._math import abs, add, equal, isfinite, isnan, logical_and, logical_or, multiply, subtract
from ember.numpy._reductions import all as _all
from ember.tracer import dtypes
from ember.tracer import prims as P


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


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) at x (xp increasing, by contract); left and
    right (default fp's ends) outside. The interval is found by comparisons with every xp."""
    if period is not None:
        raise NotImplementedError("interp: period= is not supported by ember yet")
    x, xp, fp = (asarray(v) for v in (x, xp, fp))
    if len(xp.shape) != 1 or shape_of(xp) != shape_of(fp):
        raise ArgumentValueError(f"interp: xp and fp must be 1-D of one length, got shapes {shape_of(xp)} and "
                                 f"{shape_of(fp)}", user_location())
    if isinstance(left, str) or isinstance(right, str):
        raise NotImplementedError("interp: string values of left/right ('extrapolate') are not supported")
    x, xp, fp = promote(x, xp, fp, name="interp")
    dt = dtypes.default_float_for(dtype_weak(x)[0])
    x, xp, fp = (to_dtype(v, dt) for v in (x, xp, fp))
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
    lo = P.reshape(P.slice(fp, (0,), (1,)), ()) if left is None else to_dtype(left, dt)
    hi = P.reshape(P.slice(fp, (n - 1,), (n,)), ()) if right is None else to_dtype(right, dt)
    f = P.select(P.lt(xf, P.reshape(P.slice(xp, (0,), (1,)), ())), P.broadcast_to(lo, (m,)), f)
    f = P.select(P.gt(xf, P.reshape(P.slice(xp, (n - 1,), (n,)), ())), P.broadcast_to(hi, (m,)), f)
    return P.reshape(f, shape)
