"""The Cauchy distribution around `loc` with scale `scale` (jax.scipy.stats.cauchy)."""

from __future__ import annotations

import math

import ember.numpy as jnp
from ember.scipy.special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def _scaled(x, loc, scale):
    return jnp.divide(jnp.subtract(x, loc), scale)


def logpdf(x, loc=0, scale=1):
    """-log(pi scale) - log1p(z**2) for z = (x - loc) / scale."""
    x, loc, scale = promote_inexact(x, loc, scale)
    z = _scaled(x, loc, scale)
    return jnp.negative(jnp.add(jnp.log(jnp.multiply(math.pi, scale)), jnp.log1p(jnp.multiply(z, z))))


def pdf(x, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """1/2 + arctan(z) / pi."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return jnp.add(0.5, jnp.multiply(1 / math.pi, jnp.arctan(_scaled(x, loc, scale))))


def logcdf(x, loc=0, scale=1):
    """log(cdf)."""
    return jnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    """cdf(-x, -loc, scale)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return cdf(jnp.negative(x), jnp.negative(loc), scale)


def logsf(x, loc=0, scale=1):
    """logcdf(-x, -loc, scale)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return logcdf(jnp.negative(x), jnp.negative(loc), scale)


def ppf(q, loc=0, scale=1):
    """tan(pi q - pi/2) * scale + loc."""
    q, loc, scale = promote_inexact(q, loc, scale)
    return jnp.add(jnp.multiply(jnp.tan(jnp.subtract(jnp.multiply(math.pi, q), math.pi / 2)), scale), loc)


def isf(q, loc=0, scale=1):
    """tan(pi/2 - pi q) * scale + loc."""
    q, loc, scale = promote_inexact(q, loc, scale)
    return jnp.add(jnp.multiply(jnp.tan(jnp.subtract(math.pi / 2, jnp.multiply(math.pi, q))), scale), loc)
