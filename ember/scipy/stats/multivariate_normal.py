"""The multivariate normal distribution with mean `mean` and covariance `cov`
(jax.scipy.stats.multivariate_normal): a scalar mean is the one-dimensional normal, a scalar covariance
means cov times the identity, and a covariance matrix (or a stack of them) is factored by Cholesky."""

from __future__ import annotations

import math

import ember.numpy as jnp
from ember.errors import ArgumentValueError, user_location
from ember.numpy.linalg import cholesky
from ember.scipy.linalg import solve_triangular
from ember.scipy.special import promote_inexact

__all__ = ["logpdf", "pdf"]

_LOG_2PI = math.log(2 * math.pi)


def logpdf(x, mean, cov, allow_singular=None):
    """-(|L^-1 (x - mean)|**2 + n log(2 pi)) / 2 - sum(log diag L), L the lower Cholesky factor of cov
    (read symmetrized, as lax's cholesky); x, mean and cov's stacks broadcast. allow_singular is not
    supported (NotImplementedError, as in JAX)."""
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = promote_inexact(x, mean, cov)
    if not jnp.shape(mean):
        return jnp.subtract(jnp.divide(jnp.multiply(-0.5, jnp.square(jnp.subtract(x, mean))), cov),
                            jnp.multiply(0.5, jnp.add(_LOG_2PI, jnp.log(cov))))
    n = jnp.shape(mean)[-1]
    y = jnp.subtract(x, mean)
    if not jnp.shape(cov):
        quadratic = jnp.divide(jnp.multiply(-0.5, jnp.sum(jnp.multiply(y, y), axis=-1)), cov)
        return jnp.subtract(quadratic, jnp.multiply(n / 2, jnp.add(_LOG_2PI, jnp.log(cov))))
    if jnp.ndim(cov) < 2 or tuple(jnp.shape(cov)[-2:]) != (n, n):
        raise ArgumentValueError(f"multivariate_normal.logpdf got incompatible shapes: mean {jnp.shape(mean)}, "
                                 f"cov {jnp.shape(cov)}", user_location())
    factor = cholesky(cov)
    z = solve_triangular(factor, y[..., None], lower=True)[..., 0]
    half_log_det = jnp.sum(jnp.log(jnp.diagonal(factor, axis1=-2, axis2=-1)), axis=-1)
    return jnp.subtract(jnp.subtract(jnp.multiply(-0.5, jnp.sum(jnp.multiply(z, z), axis=-1)), n / 2 * _LOG_2PI),
                        half_log_det)


def pdf(x, mean, cov):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, mean, cov))
