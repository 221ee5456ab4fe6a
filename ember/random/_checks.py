"""Argument checks shared by the samplers: shapes and dtypes as JAX canonicalizes them, with JAX's
exception classes and messages, naming the user's line. Defaults are read at call time from
`ember.tracer.dtypes` (64-bit mode switches them there)."""

from __future__ import annotations

import numbers

import numpy as np

import ember.tracer.dtypes as dtypes
from ember.errors import ArgumentError, ArgumentValueError, user_location


def shape_arg(name: str, shape) -> tuple[int, ...]:
    """`shape` as a tuple of nonnegative ints (an int is a 1-d shape), or JAX's TypeError."""
    if isinstance(shape, numbers.Integral) or (isinstance(shape, np.ndarray) and shape.ndim == 0):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        dims = None
    if dims is None or not all(isinstance(d, (numbers.Integral, np.integer)) and not isinstance(d, bool)
                               for d in dims):
        raise ArgumentError(f"{name}: shapes must be 1D sequences of concrete values of integer type, got "
                            f"{shape!r}.", user_location())
    if any(d < 0 for d in dims):
        raise ArgumentError(f"{name}: shape {dims} has a negative dimension", user_location())
    return tuple(int(d) for d in dims)


def check_shape(name: str, shape: tuple[int, ...], *param_shapes) -> None:
    """JAX's rule: the parameters' shapes broadcast with `shape` to `shape` itself (ValueError)."""
    if not param_shapes:
        return
    try:
        result = np.broadcast_shapes(shape, *param_shapes)
    except ValueError:
        result = None
    if result != shape:
        raise ArgumentValueError(
            f"{name} parameter shapes must be broadcast-compatible with shape argument, and the result of "
            f"broadcasting the shapes must equal the shape argument, but got parameter shapes "
            f"{[tuple(s) for s in param_shapes]} for shape argument {shape}.", user_location())


def broadcast_shapes(name: str, *shapes) -> tuple[int, ...]:
    """The shape the parameters broadcast to (JAX's ValueError if they do not)."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ArgumentValueError(f"{name}: incompatible shapes for broadcasting: {[tuple(s) for s in shapes]}",
                                 user_location()) from None


def shape_or_broadcast(name: str, shape, *args) -> tuple[int, ...]:
    """`shape` checked against the parameters', or (None) the parameters' broadcast shape."""
    param_shapes = [np.shape(a) for a in args]
    if shape is None:
        return broadcast_shapes(name, *param_shapes) if param_shapes else ()
    shape = shape_arg(name, shape)
    check_shape(name, shape, *param_shapes)
    return shape


def float_dtype(name: str, dtype) -> np.dtype:
    """The float dtype a sampler returns: `dtype`, or the default float (JAX's ValueError otherwise)."""
    dt = dtypes.canonicalize(dtypes.float_ if dtype is None else dtype)
    if dt.kind != "f":
        raise ArgumentValueError(f"dtype argument to `{name}` must be a float dtype, got {dt.name}", user_location())
    return dt


def int_dtype(name: str, dtype) -> np.dtype:
    """The integer dtype a sampler returns: `dtype`, or the default int (JAX's TypeError otherwise)."""
    dt = dtypes.canonicalize(dtypes.int_ if dtype is None else dtype)
    if dt.kind not in "iu":
        raise ArgumentError(f"{name} only accepts integer dtypes, got {dt.name}", user_location())
    return dt


def dtype_of(x) -> np.dtype:
    """The dtype `x` takes as an operand: its own, or for a Python scalar the default of its kind."""
    if isinstance(x, bool):
        return np.dtype(bool)
    if isinstance(x, int):
        return dtypes.int_
    if isinstance(x, float):
        return dtypes.float_
    return np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)
