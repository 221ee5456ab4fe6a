"""The Poisson distribution with mean `mu`, shifted by `loc` (jax.scipy.stats.poisson)."""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember.scipy.special import gammaincc, gammaln, promote_inexact, xlogy

__all__ = ["logpmf", "pmf", "cdf"]


def logpmf(k, mu, loc=0):
    """x log mu - log x! - mu for x = k - loc; -inf for negative x and for a k that is not an integer."""
    k, mu, loc = promote_inexact(k, mu, loc)
    x = jnp.subtract(k, loc)
    log_probs = jnp.subtract(jnp.subtract(xlogy(x, mu), gammaln(jnp.add(x, 1))), mu)
    return jnp.where(jnp.logical_or(jnp.less(x, 0), jnp.not_equal(jnp.round(k), k)), -np.inf, log_probs)


def pmf(k, mu, loc=0):
    """exp(logpmf)."""
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """P(X <= k - loc) = Q(floor(k - loc + 1), mu), the regularized upper incomplete gamma function; 0 below 0."""
    k, mu, loc = promote_inexact(k, mu, loc)
    x = jnp.subtract(k, loc)
    return jnp.where(jnp.less(x, 0), 0, gammaincc(jnp.floor(jnp.add(1, x)), mu))
