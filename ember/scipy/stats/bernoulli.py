"""The Bernoulli distribution: 1 with probability `p`, 0 otherwise, shifted by `loc`
(jax.scipy.stats.bernoulli)."""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember.scipy.special import promote_inexact, xlog1py, xlogy

__all__ = ["logpmf", "pmf", "cdf", "ppf"]


def logpmf(k, p, loc=0):
    """x log p + (1 - x) log(1 - p) for x = k - loc in [0, 1] (xlogy's conventions at p = 0 and 1), -inf
    outside."""
    k, p, loc = promote_inexact(k, p, loc)
    x = jnp.subtract(k, loc)
    log_probs = jnp.add(xlogy(x, p), xlog1py(jnp.subtract(1, x), jnp.negative(p)))
    return jnp.where(jnp.logical_or(jnp.less(x, 0), jnp.greater(x, 1)), -np.inf, log_probs)


def pmf(k, p, loc=0):
    """exp(logpmf)."""
    return jnp.exp(logpmf(k, p, loc))


def _invalid(p):
    return jnp.logical_or(jnp.isnan(p), jnp.logical_or(jnp.less(p, 0), jnp.greater(p, 1)))


def cdf(k, p):
    """0 below 0, 1 - p on [0, 1), 1 from 1 on; nan for a nan k or a p outside [0, 1]."""
    k, p = promote_inexact(k, p)
    zero = jnp.zeros_like(k)
    value = jnp.where(jnp.less(k, 0), zero, jnp.where(jnp.less(k, 1), jnp.subtract(1, p),
                                                      jnp.where(jnp.greater_equal(k, 1), 1, zero)))
    return jnp.where(jnp.logical_or(jnp.isnan(k), _invalid(p)), np.nan, value)


def ppf(q, p):
    """0 for q <= 1 - p, else 1; nan for q or p outside [0, 1]."""
    q, p = promote_inexact(q, p)
    bad = jnp.logical_or(_invalid(p), jnp.logical_or(jnp.isnan(q), jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1))))
    return jnp.where(bad, np.nan, jnp.where(jnp.less_equal(q, jnp.subtract(1, p)), jnp.zeros_like(q), 1))
