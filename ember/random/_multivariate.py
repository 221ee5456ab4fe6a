"""`multivariate_normal`, as jax.random builds it: standard normals of shape `shape + (n,)` mapped through
a factor of the covariance (its Cholesky factor, or U sqrt(S) of its SVD, or V sqrt(w) of its eigh), plus
the mean. The factorizations are LAPACK's, as JAX calls them on the CPU, so a key gives JAX's draws to
float rounding; the samples differentiate in the mean and the covariance through the factorization.
"""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
import ember.numpy.linalg as linalg
from ember.api import jit
from ember.errors import ArgumentValueError, user_location
from ember.random._checks import check_shape, float_dtype, shape_arg
from ember.random._distributions import _normal
from ember.random._keys import Array, ArrayLike, DTypeLike, KeyLike, Shape, check_key
from ember.tracer import dtypes

_METHODS = ("svd", "eigh", "cholesky")


def _inexact_dtype(mean, cov) -> np.dtype:
    """The dtype mean and cov promote to, made inexact (jnp's promote_dtypes_inexact)."""
    return dtypes.default_float_for(jnp.result_type(mean, cov))


def _sample_shape(shape, mean_shape: tuple, cov_shape: tuple) -> tuple[int, ...]:
    """The batch shape of the draws: `shape` checked against the parameters' batch shapes, or (None) their
    broadcast shape; JAX's ValueErrors for a scalar mean, a vector cov, or a cov not (..., n, n)."""
    if len(mean_shape) < 1:
        raise ArgumentValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == {len(mean_shape)}",
                                 user_location())
    if len(cov_shape) < 2:
        raise ArgumentValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {len(cov_shape)}",
                                 user_location())
    n = mean_shape[-1]
    if cov_shape[-2:] != (n, n):
        raise ArgumentValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, but got "
                                 f"cov.shape == {cov_shape}.", user_location())
    if shape is None:
        try:
            return tuple(np.broadcast_shapes(mean_shape[:-1], cov_shape[:-2]))
        except ValueError:
            raise ArgumentValueError(f"multivariate_normal: incompatible shapes for broadcasting: "
                                     f"{[mean_shape[:-1], cov_shape[:-2]]}", user_location()) from None
    shape = shape_arg("multivariate_normal", shape)
    check_shape("multivariate_normal", shape, mean_shape[:-1], cov_shape[:-2])
    return shape


def multivariate_normal(key: KeyLike, mean: ArrayLike, cov: ArrayLike, shape: Shape | None = None,
                        dtype: DTypeLike | None = None, method: str = "cholesky") -> Array:
    """Normal vectors with the given mean (..., n) and covariance (..., n, n), of shape
    `shape + (n,)` (by default the parameters' broadcast batch shape), as jax.random.multivariate_normal.
    `method` picks the covariance's factor: 'cholesky', or 'svd'/'eigh' for a singular covariance."""
    data, _ = check_key("multivariate_normal", key)
    if method not in _METHODS:
        raise ArgumentValueError("method must be one of {'svd', 'eigh', 'cholesky'}", user_location())
    param_dtype = _inexact_dtype(mean, cov)
    dt = param_dtype if dtype is None else float_dtype("multivariate_normal", dtype)
    shape = _sample_shape(shape, tuple(np.shape(mean)), tuple(np.shape(cov)))
    return _multivariate_normal(data, jnp.asarray(mean).astype(param_dtype), jnp.asarray(cov).astype(param_dtype),
                                shape, dt, method)


def _factor(cov, method: str):
    """A matrix F with F F^T = cov, by `method`."""
    if method == "svd":
        u, s, _ = linalg.svd(cov)
        return u * jnp.sqrt(s[..., None, :])
    if method == "eigh":
        w, v = linalg.eigh(cov)
        return v * jnp.sqrt(w[..., None, :])
    return linalg.cholesky(cov)


@jit(static_argnums=(3, 4, 5))
def _multivariate_normal(key, mean, cov, shape, dtype, method):
    samples = _normal(key, shape + tuple(mean.shape[-1:]), dtype)
    return mean + jnp.einsum("...ij,...j->...i", _factor(cov, method), samples)
