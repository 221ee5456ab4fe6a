"""The Poisson distribution with mean `mu`, shifted by `loc` (jax.scipy.stats.poisson)."""

from __future__ import annotations

import math

import numpy as np

import ember.numpy as jnp
from ember.scipy.special import entr, gammaincc, gammaln, promote_inexact, xlogy

__all__ = ["logpmf", "pmf", "cdf", "entropy"]


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


def _entropy_by_sum(mu, terms: int, upper):
    """-sum p log p over k < min(terms, upper(mu)), the pmf tabulated for k = 0 .. terms-1 (a column each mu)."""
    k = jnp.reshape(jnp.arange(terms, dtype=mu.dtype), (terms, 1))
    probs = pmf(k, mu, 0)
    probs = jnp.where(jnp.less(k, jnp.ceil(upper)), probs, 0.0)
    return jnp.sum(entr(probs), axis=0)


def entropy(mu, loc=0):
    """The entropy -sum p(k) log p(k): summed over the first 35 terms for mu < 10 and 250 for mu < 100,
    the asymptotic 0.5 log(2 pi e mu) - 1/(12 mu) beyond (as JAX); 0 at mu = 0. Shape: mu and loc broadcast."""
    mu, loc = promote_inexact(mu, loc)
    shape = np.broadcast_shapes(jnp.shape(mu), jnp.shape(loc))
    flat = jnp.ravel(mu)
    small = _entropy_by_sum(flat, 35, jnp.add(flat, 20))
    medium = _entropy_by_sum(flat, 250, jnp.add(jnp.add(flat, jnp.multiply(10, jnp.sqrt(flat))), 20))
    large = jnp.subtract(jnp.multiply(0.5, jnp.log(jnp.multiply(2 * math.pi * math.e, flat))),
                         jnp.divide(1.0, jnp.multiply(12, flat)))
    result = jnp.where(jnp.equal(flat, 0), 0, jnp.where(jnp.less(flat, 10), small,
                                                        jnp.where(jnp.less(flat, 100), medium, large)))
    return jnp.broadcast_to(jnp.reshape(result, jnp.shape(mu)), shape)
