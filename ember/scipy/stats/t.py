"""Student's t distribution with `df` degrees of freedom, shifted by `loc` and scaled by `scale`
(jax.scipy.stats.t)."""

from __future__ import annotations

import math

import ember.numpy as jnp
from ember.scipy.special import gammaln, promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, df, loc=0, scale=1):
    """log Gamma((df+1)/2) - log Gamma(df/2) - log(pi df scale**2)/2 - (df+1)/2 log1p(((x-loc)/scale)**2 / df)."""
    x, df, loc, scale = promote_inexact(x, df, loc, scale)
    scaled = jnp.divide(jnp.subtract(x, loc), scale)
    half_df = jnp.divide(df, 2)
    half_df_plus_half = jnp.add(half_df, 0.5)
    log_norm = jnp.divide(jnp.log(jnp.multiply(jnp.multiply(jnp.multiply(scale, scale), math.pi), df)), 2)
    normalizer = jnp.subtract(jnp.add(gammaln(half_df), log_norm), gammaln(half_df_plus_half))
    quadratic = jnp.divide(jnp.multiply(scaled, scaled), df)
    return jnp.negative(jnp.add(normalizer, jnp.multiply(half_df_plus_half, jnp.log1p(quadratic))))


def pdf(x, df, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, df, loc, scale))
