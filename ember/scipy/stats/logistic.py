"""The logistic distribution around `loc` with scale `scale` (jax.scipy.stats.logistic)."""

from __future__ import annotations

import ember.numpy as jnp
from ember.scipy.special import expit, logit, promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    """-2 logaddexp(z/2, -z/2) - log scale for z = (x - loc) / scale (no overflow at large |z|)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    half = jnp.divide(jnp.divide(jnp.subtract(x, loc), scale), 2)
    return jnp.subtract(jnp.multiply(-2, jnp.logaddexp(half, jnp.negative(half))), jnp.log(scale))


def pdf(x, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """expit((x - loc) / scale)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return expit(jnp.divide(jnp.subtract(x, loc), scale))


def sf(x, loc=0, scale=1):
    """expit(-(x - loc) / scale)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return expit(jnp.negative(jnp.divide(jnp.subtract(x, loc), scale)))


def ppf(x, loc=0, scale=1):
    """logit(x) * scale + loc."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return jnp.add(jnp.multiply(logit(x), scale), loc)


def isf(x, loc=0, scale=1):
    """-logit(x) * scale + loc."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return jnp.add(jnp.multiply(jnp.negative(logit(x)), scale), loc)
