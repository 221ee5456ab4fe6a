"""jax.nn.initializers: functions `init(key, shape, dtype=float32)` that create parameter arrays, drawn with
ember.random so that the same key gives JAX's numbers (to float rounding), as Keras and Sonnet define
them: constants, normal/uniform/truncated normal, variance scaling (glorot, he, lecun) and orthogonal."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

import ember.numpy as jnp
import ember.random as random
from ember.errors import ArgumentValueError, DTypeError, user_location
from ember.errors import missing_attribute as _missing_attribute
from ember.nn._functions import default_float

Axes = int | Sequence[int]

# The standard deviation of a standard normal truncated to (-2, 2), which variance_scaling divides by.
_TRUNCATED_STDDEV = 0.87962566103423978
_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


@runtime_checkable
class Initializer(Protocol):
    """What every initializer here is: called with a PRNG key, a shape and optionally a dtype."""

    def __call__(self, key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
        ...


def _shape(shape) -> tuple[int, ...]:
    """`shape` as a tuple of ints (an int is a 1-d shape)."""
    try:
        return (operator.index(shape),) if np.ndim(shape) == 0 else tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"an initializer's shape must be a tuple of ints, got {shape!r} (at {user_location()})") \
            from None


def _float_dtype(dtype, name: str) -> np.dtype:
    """The dtype an initializer creates: `dtype`, or the default float; only real floats are sampled."""
    dtype = default_float() if dtype is None else np.dtype(dtype)
    if dtype.kind != "f":
        raise DTypeError(f"nn.initializers.{name} samples real floats; got dtype {dtype} (complex and integer "
                         "weights are not supported)", user_location())
    return dtype


# --- constants and plain distributions -----------------------------------------------------------

def zeros(key, shape, dtype=None):
    """An array of zeros (the key is ignored)."""
    return jnp.zeros(_shape(shape), default_float() if dtype is None else dtype)


def ones(key, shape, dtype=None):
    """An array of ones (the key is ignored)."""
    return jnp.ones(_shape(shape), default_float() if dtype is None else dtype)


def constant(value, dtype=None) -> Initializer:
    """An initializer that fills arrays with `value`."""
    def init(key, shape, dtype=dtype):
        return jnp.full(_shape(shape), value, default_float() if dtype is None else dtype)
    return init


def uniform(scale=1e-2, dtype=None) -> Initializer:
    """An initializer drawing uniformly from [0, scale)."""
    def init(key, shape, dtype=dtype):
        dtype = _float_dtype(dtype, "uniform")
        return jnp.multiply(random.uniform(key, _shape(shape), dtype), jnp.asarray(scale, dtype))
    return init


def normal(stddev=1e-2, dtype=None) -> Initializer:
    """An initializer drawing from a normal distribution of mean 0 and standard deviation `stddev`."""
    def init(key, shape, dtype=dtype):
        dtype = _float_dtype(dtype, "normal")
        return jnp.multiply(random.normal(key, _shape(shape), dtype), jnp.asarray(stddev, dtype))
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0) -> Initializer:
    """An initializer drawing a standard normal truncated to (lower, upper), times `stddev` (no
    correction of the standard deviation for the truncation, unlike variance_scaling)."""
    def init(key, shape, dtype=dtype):
        dtype = _float_dtype(dtype, "truncated_normal")
        sample = random.truncated_normal(key, lower, upper, _shape(shape), dtype)
        return jnp.multiply(sample, jnp.asarray(stddev, dtype))
    return init


# --- variance scaling -----------------------------------------------------------------------------

def _size(shape: tuple[int, ...], axes: Axes) -> int:
    return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)


def _compute_fans(shape: Sequence[int], in_axis: Axes = -2, out_axis: Axes = -1,
                 batch_axis: Axes = ()) -> tuple[float, float]:
    """(fan_in, fan_out) of a weight of `shape`: the input and output sizes, each times the receptive
    field (the product of the axes that are neither input, output nor batch: a convolution's window)."""
    shape = _shape(shape)
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ArgumentValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional weights "
                                 "tensor with default in_axis. Must be at least 2D or specify in_axis explicitly.",
                                 user_location())
    try:
        in_size, out_size, batch_size = (_size(shape, a) for a in (in_axis, out_axis, batch_axis))
    except IndexError:
        raise ArgumentValueError(f"in_axis={in_axis}, out_axis={out_axis} or batch_axis={batch_axis} is out of "
                                 f"bounds for a weight of shape {shape}", user_location()) from None
    receptive_field = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field, out_size * receptive_field


def _denominator(mode: str, fan_in: float, fan_out: float) -> float:
    return {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
            "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]


def variance_scaling(scale, mode: str, distribution: str, in_axis: Axes = -2, out_axis: Axes = -1,
                     batch_axis: Axes = (), dtype=None) -> Initializer:
    """An initializer whose samples have variance scale / n, n the fan of `mode` (fan_in, fan_out,
    their mean fan_avg or geometric mean fan_geo_avg), drawn from a normal, a normal truncated at two
    standard deviations (rescaled so the variance holds) or a uniform distribution on +-sqrt(3 scale / n)."""
    if mode not in _MODES:
        raise ArgumentValueError(f"invalid mode for variance scaling initializer: {mode!r} (one of "
                                 f"{', '.join(_MODES)})", user_location())
    if distribution not in _DISTRIBUTIONS:
        raise ArgumentValueError(f"invalid distribution for variance scaling initializer: {distribution!r} (one "
                                 f"of {', '.join(_DISTRIBUTIONS)})", user_location())

    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        dtype = _float_dtype(dtype, "variance_scaling")
        variance = jnp.asarray(scale / _denominator(mode, *_compute_fans(shape, in_axis, out_axis, batch_axis)), dtype)
        if distribution == "truncated_normal":
            stddev = jnp.divide(jnp.sqrt(variance), jnp.asarray(_TRUNCATED_STDDEV, dtype))
            return jnp.multiply(random.truncated_normal(key, -2, 2, shape, dtype), stddev)
        if distribution == "normal":
            return jnp.multiply(random.normal(key, shape, dtype), jnp.sqrt(variance))
        return jnp.multiply(random.uniform(key, shape, dtype, -1), jnp.sqrt(jnp.multiply(3, variance)))
    return init


def glorot_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype=None) -> Initializer:
    """Glorot (Xavier) uniform: variance_scaling(1, "fan_avg", "uniform")."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype=None) -> Initializer:
    """Glorot (Xavier) normal: variance_scaling(1, "fan_avg", "truncated_normal")."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def lecun_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype=None) -> Initializer:
    """LeCun uniform: variance_scaling(1, "fan_in", "uniform")."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype=None) -> Initializer:
    """LeCun normal: variance_scaling(1, "fan_in", "truncated_normal")."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def he_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype=None) -> Initializer:
    """He (Kaiming) uniform: variance_scaling(2, "fan_in", "uniform")."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype=None) -> Initializer:
    """He (Kaiming) normal: variance_scaling(2, "fan_in", "truncated_normal")."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


# --- orthogonal -----------------------------------------------------------------------------------

def _orthonormal_columns(z):
    """Q of the QR factorization of a tall matrix `z` with R's diagonal positive, which is what JAX's
    q * sign(diag(r)) gives from LAPACK's QR (that Q is unique): classical Gram-Schmidt applied twice
    per column ("twice is enough" for orthogonality to rounding), in float64."""
    z = jnp.asarray(z, jnp.float64)
    columns: list = []
    for j in range(jnp.shape(z)[1]):
        v = z[:, j]
        for _ in range(2 if columns else 0):
            q = jnp.stack(columns, axis=1)
            v = jnp.subtract(v, jnp.matmul(q, jnp.matmul(v, q)))
        columns.append(jnp.divide(v, jnp.sqrt(jnp.sum(jnp.square(v)))))
    return jnp.stack(columns, axis=1)


def _orthogonal_matrix(key, n: int, m: int, dtype):
    """jax.random.orthogonal(key, n, (), dtype, m): an n x m matrix with orthonormal rows or columns
    (whichever are fewer), from the QR factorization of a standard normal sample."""
    z = random.normal(key, (max(n, m), min(n, m)), dtype)
    q = jnp.asarray(_orthonormal_columns(z), dtype)
    return jnp.transpose(q) if n < m else q


def orthogonal(scale=1.0, column_axis: int = -1, dtype=None) -> Initializer:
    """An initializer of (semi-)orthogonal matrices times `scale`: the axis `column_axis` holds the
    columns; all other axes, flattened, the rows."""
    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        dtype = _float_dtype(dtype, "orthogonal")
        if len(shape) < 2:
            raise ArgumentValueError(f"orthogonal initializer requires at least a 2D shape, got {shape}",
                                     user_location())
        if 0 in shape:
            return jnp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        q = _orthogonal_matrix(key, math.prod(shape) // n_cols, n_cols, dtype)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return jnp.multiply(jnp.asarray(scale, dtype), jnp.moveaxis(q, -1, column_axis))
    return init


def delta_orthogonal(scale=1.0, column_axis: int = -1, dtype=None) -> Initializer:
    """An initializer of convolution kernels (3-5 dimensions) that are zero but at the window's centre,
    which holds an orthogonal matrix (Xiao et al. 2018): the convolution starts as an isometry."""
    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        dtype = _float_dtype(dtype, "delta_orthogonal")
        if len(shape) not in (3, 4, 5):
            raise ArgumentValueError(f"Delta orthogonal initializer requires a 3D, 4D or 5D shape, got {shape}",
                                     user_location())
        if shape[-1] < shape[-2]:
            raise ArgumentValueError(f"`fan_in` must be less or equal than `fan_out`: shape {shape}",
                                     user_location())
        matrix = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        centre = np.zeros(shape[:-2] + (1, 1), dtype)
        centre[tuple((k - 1) // 2 for k in shape[:-2])] = 1
        return jnp.multiply(centre, matrix)
    return init


__all__ = [
    "Initializer", "zeros", "ones", "constant", "uniform", "normal", "truncated_normal", "variance_scaling",
    "glorot_uniform", "glorot_normal", "xavier_uniform", "xavier_normal", "lecun_uniform", "lecun_normal",
    "he_uniform", "he_normal", "kaiming_uniform", "kaiming_normal", "orthogonal", "delta_orthogonal"]


def __getattr__(name: str):
    """Say that a missing name is not in jax.nn.initializers either, with the closest names here."""
    raise _missing_attribute("ember.nn.initializers", name, {k: globals()[k] for k in __all__})
