"""The Laplace (double exponential) distribution around `loc` with scale `scale` (jax.scipy.stats.laplace)."""

from __future__ import annotations

import ember.numpy as jnp
from ember.scipy.special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf"]


def logpdf(x, loc=0, scale=1):
    """-|x - loc| / scale - log(2 scale)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    return jnp.negative(jnp.add(jnp.divide(jnp.abs(jnp.subtract(x, loc)), scale), jnp.log(jnp.multiply(2, scale))))


def pdf(x, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """exp(d) / 2 for d = (x - loc) / scale <= 0, 1 - exp(-d) / 2 above."""
    x, loc, scale = promote_inexact(x, loc, scale)
    d = jnp.divide(jnp.subtract(x, loc), scale)
    return jnp.where(jnp.less_equal(d, 0), jnp.multiply(0.5, jnp.exp(d)),
                     jnp.subtract(1, jnp.multiply(0.5, jnp.exp(jnp.negative(d)))))
