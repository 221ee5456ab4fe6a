"""ember.numpy.linalg: norms (vector and matrix), as numpy.linalg.norm."""

from __future__ import annotations

import numpy as np

from ember.errors import AxisError, IncompatibleShapesError, ShapeError, user_location
from ember.errors import missing_attribute as _missing_attribute
from ember.numpy import _math as m
from ember.numpy import _reductions as r
from ember.numpy._core import asarray, normalize_axes, normalize_axis, to_dtype
from ember.tracer import dtypes

__all__ = ["norm"]


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
        raise NotImplementedError(f"norm: ord={ord!r} needs singular values, which ember does not compute")
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


def __getattr__(name: str):
    """Say that a missing name is not implemented yet, with the closest names and the fallback."""
    raise _missing_attribute('ember.numpy.linalg', name, globals(), ("numpy.linalg", np.linalg))
