"""The gamma distribution with shape `a`, shifted by `loc` and scaled by `scale` (jax.scipy.stats.gamma)."""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember.lax import clamp
from ember.scipy.special import gammainc, gammaincc, gammaln, promote_inexact, xlogy

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, a, loc=0, scale=1):
    """(a - 1) log y - y - log Gamma(a) - log scale for y = (x - loc) / scale >= 0, -inf below loc."""
    x, a, loc, scale = promote_inexact(x, a, loc, scale)
    ok = jnp.greater_equal(x, loc)
    y = jnp.where(ok, jnp.divide(jnp.subtract(x, loc), scale), 1)
    log_linear = jnp.subtract(xlogy(jnp.subtract(a, 1), y), y)
    return jnp.where(ok, jnp.subtract(log_linear, jnp.add(gammaln(a), jnp.log(scale))), -np.inf)


def pdf(x, a, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    """P(a, y), the regularized lower incomplete gamma function at y = (x - loc) / scale clamped to [0, inf]."""
    x, a, loc, scale = promote_inexact(x, a, loc, scale)
    return gammainc(a, clamp(0.0, jnp.divide(jnp.subtract(x, loc), scale), np.inf))


def sf(x, a, loc=0, scale=1):
    """Q(a, y) = 1 - cdf, computed directly (accurate in the upper tail); 1 below loc."""
    x, a, loc, scale = promote_inexact(x, a, loc, scale)
    y = jnp.divide(jnp.subtract(x, loc), scale)
    return jnp.where(jnp.less(y, 0), 1, gammaincc(a, y))


def logcdf(x, a, loc=0, scale=1):
    """log(cdf)."""
    return jnp.log(cdf(x, a, loc, scale))


def logsf(x, a, loc=0, scale=1):
    """log(sf)."""
    return jnp.log(sf(x, a, loc, scale))
