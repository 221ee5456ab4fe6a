"""The normal distribution with mean `loc` and standard deviation `scale` (jax.scipy.stats.norm)."""

from __future__ import annotations

import math

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    """-(log(2 pi scale**2) + ((x - loc) / scale)**2) / 2."""
    x, loc, scale = promote_inexact(x, loc, scale)
    scale_sq = jnp.square(scale)
    log_normalizer = jnp.log(jnp.multiply(2 * math.pi, scale_sq))
    quadratic = jnp.divide(jnp.square(jnp.subtract(x, loc)), scale_sq)
    return jnp.divide(jnp.add(log_normalizer, quadratic), -2)


def pdf(x, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """ndtr((x - loc) / scale)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return special.ndtr(jnp.divide(jnp.subtract(x, loc), scale))


def logcdf(x, loc=0, scale=1):
    """log_ndtr((x - loc) / scale): accurate in both tails, with log_ndtr's gradient there."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return special.log_ndtr(jnp.divide(jnp.subtract(x, loc), scale))


def sf(x, loc=0, scale=1):
    """1 - cdf, as cdf(-x, -loc, scale) (no cancellation in the upper tail)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return cdf(jnp.negative(x), jnp.negative(loc), scale)


def logsf(x, loc=0, scale=1):
    """log(1 - cdf), as logcdf(-x, -loc, scale)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return logcdf(jnp.negative(x), jnp.negative(loc), scale)


def ppf(q, loc=0, scale=1):
    """The quantile function, ndtri(q) * scale + loc, in the default float dtype (as JAX's)."""
    return jnp.asarray(jnp.add(jnp.multiply(special.ndtri(q), scale), loc), float)


def isf(q, loc=0, scale=1):
    """The inverse survival function, ppf(1 - q)."""
    q = jnp.asarray(q)
    return ppf(jnp.subtract(jnp.asarray(1, q.dtype), q), loc, scale)
