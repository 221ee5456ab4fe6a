"""The beta distribution with shapes `a` and `b` on [loc, loc + scale] (jax.scipy.stats.beta)."""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember.lax import clamp
from ember.scipy.special import betainc, betaln, promote_inexact, xlog1py, xlogy

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, a, b, loc=0, scale=1):
    """(a-1) log y + (b-1) log(1-y) - log B(a, b) - log scale for y = (x - loc) / scale in [0, 1], -inf
    outside; nan for a, b or scale <= 0."""
    x, a, b, loc, scale = promote_inexact(x, a, b, loc, scale)
    y = jnp.divide(jnp.subtract(x, loc), scale)
    log_linear = jnp.add(xlogy(jnp.subtract(a, 1), y), xlog1py(jnp.subtract(b, 1), jnp.negative(y)))
    log_probs = jnp.subtract(jnp.subtract(log_linear, betaln(a, b)), jnp.log(scale))
    outside = jnp.logical_or(jnp.greater(x, jnp.add(loc, scale)), jnp.less(x, loc))
    result = jnp.where(outside, -np.inf, log_probs)
    bad = jnp.logical_or(jnp.logical_or(jnp.less_equal(a, 0), jnp.less_equal(b, 0)), jnp.less_equal(scale, 0))
    return jnp.where(bad, np.nan, result)


def pdf(x, a, b, loc=0, scale=1):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1):
    """I_y(a, b), the regularized incomplete beta function at y = (x - loc) / scale clamped to [0, 1]."""
    x, a, b, loc, scale = promote_inexact(x, a, b, loc, scale)
    return betainc(a, b, clamp(0.0, jnp.divide(jnp.subtract(x, loc), scale), 1.0))


def logcdf(x, a, b, loc=0, scale=1):
    """log(cdf)."""
    return jnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    """I_{1-y}(b, a) = 1 - cdf, computed directly."""
    x, a, b, loc, scale = promote_inexact(x, a, b, loc, scale)
    return betainc(b, a, jnp.subtract(1, clamp(0.0, jnp.divide(jnp.subtract(x, loc), scale), 1.0)))


def logsf(x, a, b, loc=0, scale=1):
    """log(sf)."""
    return jnp.log(sf(x, a, b, loc, scale))
