"""The chi-squared distribution with `df` degrees of freedom, shifted by `loc` and scaled by `scale`
(jax.scipy.stats.chi2)."""

from __future__ import annotations

import math

import numpy as np

import ember.numpy as jnp
from ember.lax import clamp
from ember.scipy.special import gammainc, gammaincc, gammaln, promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, df, loc=0, scale=1):
    """(df/2 - 1) log y - y/2 - log Gamma(df/2) - df/2 log 2 - log scale for y = (x - loc) / scale; -inf
    below loc."""
    x, df, loc, scale = promote_inexact(x, df, loc, scale)
    y = jnp.divide(jnp.subtract(x, loc), scale)
    half_df = jnp.divide(df, 2)
    kernel = jnp.subtract(jnp.multiply(jnp.subtract(half_df, 1), jnp.log(y)), jnp.divide(y, 2))
    normalizer = jnp.negative(jnp.add(gammaln(half_df), jnp.divide(jnp.multiply(math.log(2.0), df), 2)))
    log_probs = jnp.add(jnp.subtract(normalizer, jnp.log(scale)), kernel)
    return jnp.where(jnp.less(x, loc), -np.inf, log_probs)


def pdf(x, df, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, df, loc, scale))


def _half_y(x, loc, scale):
    """(x - loc) / (2 scale), clamped to [0, inf]."""
    return clamp(0.0, jnp.divide(jnp.subtract(x, loc), jnp.multiply(scale, 2)), np.inf)


def cdf(x, df, loc=0, scale=1):
    """P(df/2, y/2), the regularized lower incomplete gamma function."""
    x, df, loc, scale = promote_inexact(x, df, loc, scale)
    return gammainc(jnp.divide(df, 2), _half_y(x, loc, scale))


def logcdf(x, df, loc=0, scale=1):
    """log(cdf)."""
    return jnp.log(cdf(x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    """Q(df/2, y/2) = 1 - cdf, computed directly."""
    x, df, loc, scale = promote_inexact(x, df, loc, scale)
    return gammaincc(jnp.divide(df, 2), _half_y(x, loc, scale))


def logsf(x, df, loc=0, scale=1):
    """log(sf)."""
    return jnp.log(sf(x, df, loc, scale))
