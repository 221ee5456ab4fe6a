"""What the distributions share: JAX's promotion of their arguments and lax.clamp."""

from __future__ import annotations

import ember.numpy as jnp
from ember.scipy.special import promote_inexact

__all__ = ["promote_inexact", "clamp"]


def clamp(lo: float, y, hi: float):
    """y limited to [lo, hi] as lax.clamp: nan stays nan, and the gradient is 0 at the bounds themselves."""
    inside = jnp.logical_and(jnp.greater(y, lo), jnp.less(y, hi))
    return jnp.where(inside, y, jnp.where(jnp.less_equal(y, lo), lo, jnp.where(jnp.greater_equal(y, hi), hi, y)))

