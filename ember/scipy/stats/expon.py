"""The exponential distribution on [loc, inf) with mean `scale` (jax.scipy.stats.expon)."""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember.scipy.special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1):
    """-(x - loc) / scale - log scale from loc on, -inf below."""
    x, loc, scale = promote_inexact(x, loc, scale)
    log_probs = jnp.negative(jnp.add(jnp.divide(jnp.subtract(x, loc), scale), jnp.log(scale)))
    return jnp.where(jnp.less(x, loc), -np.inf, log_probs)


def pdf(x, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """-expm1(-(x - loc) / scale) from loc on, 0 below."""
    x, loc, scale = promote_inexact(x, loc, scale)
    neg_scaled = jnp.divide(jnp.subtract(loc, x), scale)
    return jnp.where(jnp.less(x, loc), jnp.zeros_like(neg_scaled), jnp.negative(jnp.expm1(neg_scaled)))


def logsf(x, loc=0, scale=1):
    """-(x - loc) / scale from loc on, 0 below."""
    x, loc, scale = promote_inexact(x, loc, scale)
    neg_scaled = jnp.divide(jnp.subtract(loc, x), scale)
    return jnp.where(jnp.less(x, loc), jnp.zeros_like(neg_scaled), neg_scaled)


def sf(x, loc=0, scale=1):
    """exp(logsf)."""
    return jnp.exp(logsf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    """log1p(-sf)."""
    return jnp.log1p(jnp.negative(sf(x, loc, scale)))


def ppf(q, loc=0, scale=1):
    """loc - scale log1p(-q); nan for q outside [0, 1]."""
    q, loc, scale = promote_inexact(q, loc, scale)
    bad = jnp.logical_or(jnp.isnan(q), jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)))
    return jnp.where(bad, np.nan, jnp.subtract(loc, jnp.multiply(scale, jnp.log1p(jnp.negative(q)))))
