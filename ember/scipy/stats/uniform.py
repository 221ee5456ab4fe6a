"""The uniform distribution on [loc, loc + scale] (jax.scipy.stats.uniform)."""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember.scipy.special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "ppf"]


def logpdf(x, loc=0, scale=1):
    """-log scale on [loc, loc + scale], -inf outside."""
    x, loc, scale = promote_inexact(x, loc, scale)
    outside = jnp.logical_or(jnp.greater(x, jnp.add(loc, scale)), jnp.less(x, loc))
    return jnp.where(outside, -np.inf, jnp.negative(jnp.log(scale)))


def pdf(x, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """0 below loc, 1 above loc + scale, (x - loc) / scale between (and 0 for nan, as JAX's select gives)."""
    x, loc, scale = promote_inexact(x, loc, scale)
    top = jnp.add(loc, scale)
    inside = jnp.logical_and(jnp.greater_equal(x, loc), jnp.less_equal(x, top))
    value = jnp.where(inside, jnp.divide(jnp.subtract(x, loc), scale), jnp.zeros_like(x))
    return jnp.where(jnp.less(x, loc), 0, jnp.where(jnp.greater(x, top), 1, value))


def ppf(q, loc=0, scale=1):
    """loc + scale q; nan for q outside [0, 1]."""
    q, loc, scale = promote_inexact(q, loc, scale)
    bad = jnp.logical_or(jnp.isnan(q), jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)))
    return jnp.where(bad, np.nan, jnp.add(loc, jnp.multiply(scale, q)))
