"""The Dirichlet distribution with concentrations `alpha` over the simplex (jax.scipy.stats.dirichlet):
x's first axis runs over the categories (or all but the last, which is then 1 minus their sum)."""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember.errors import ArgumentValueError, user_location
from ember.scipy.special import gammaln, promote_inexact, xlogy

__all__ = ["logpdf", "pdf"]


def _is_simplex(x):
    """Whether each column of x is positive and sums to 1 (within 1e-6, as JAX)."""
    return jnp.logical_and(jnp.all(jnp.greater(x, 0), axis=0), jnp.less(jnp.abs(jnp.subtract(jnp.sum(x, axis=0), 1)),
                                                                         1e-6))


def logpdf(x, alpha):
    """sum((alpha - 1) log x) - (sum log Gamma(alpha) - log Gamma(sum alpha)) on the simplex, -inf off it."""
    x, alpha = promote_inexact(x, alpha)
    if alpha.ndim != 1:
        raise ArgumentValueError(f"dirichlet.logpdf: `alpha` must be one-dimensional; got alpha.shape={alpha.shape}",
                                 user_location())
    if x.ndim == 0 or x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ArgumentValueError("dirichlet.logpdf: `x` must have either the same number of entries as `alpha` or "
                                 f"one entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}", user_location())
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, jnp.subtract(1, jnp.sum(x, axis=0, keepdims=True))], axis=0)
    normalizer = jnp.subtract(jnp.sum(gammaln(alpha)), gammaln(jnp.sum(alpha)))
    if x.ndim > 1:
        alpha = jnp.reshape(alpha, alpha.shape + (1,) * (x.ndim - 1))
    log_probs = jnp.subtract(jnp.sum(xlogy(jnp.subtract(alpha, 1), x), axis=0), normalizer)
    return jnp.where(_is_simplex(x), log_probs, -np.inf)


def pdf(x, alpha):
    """exp(logpdf)."""
    return jnp.exp(logpdf(x, alpha))
