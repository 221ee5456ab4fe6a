"""Poisson samples as JAX 0.10.2 draws them: Knuth's product of uniforms below rate 10, Hormann's
transformed rejection above, each a `while_loop` over the whole array (one uniform draw per element per
trip) that runs until every element is done."""

from __future__ import annotations

import numpy as np

import ember.lax as lax
import ember.numpy as jnp
from ember.api import jit
from ember.random import _prng
from ember.random._checks import int_dtype, shape_arg
from ember.random._distributions import _uniform
from ember.random._keys import Array, ArrayLike, DTypeLike, KeyLike, Shape, check_key

_F32 = np.dtype(np.float32)


def _knuth(key, lam, shape, dtype, max_iters):
    """Count uniforms until their product falls below exp(-lam), minus one."""
    def body(state):
        i, k, key, log_prod = state
        keys = _prng.split(key, (2,))
        k = jnp.where(log_prod > -lam, k + 1, k)
        u = _uniform(keys[1], _F32.type(0), _F32.type(1), shape, _F32)
        return i + 1, k, keys[0], log_prod + jnp.log(u)

    def more(state):
        i, _, _, log_prod = state
        return jnp.any(log_prod > -lam) & (i < max_iters)

    init = (jnp.zeros((), np.int32), jnp.zeros(shape, dtype), key, jnp.zeros(shape, _F32))
    k = lax.while_loop(more, body, init)[1]
    return (k - 1).astype(dtype)


def _rejection(key, lam, shape, dtype, max_iters):
    """Hormann's transformed rejection with squeeze (PTRS), for large rates."""
    log_lam = jnp.log(lam)
    b = 0.931 + 2.53 * jnp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(state):
        i, k_out, accepted, key = state
        keys = _prng.split(key, (3,))
        u = _uniform(keys[1], _F32.type(0), _F32.type(1), shape, lam.dtype) - 0.5
        v = _uniform(keys[2], _F32.type(0), _F32.type(1), shape, lam.dtype)
        u_shifted = 0.5 - jnp.abs(u)
        k = jnp.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = jnp.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, jnp.where(accept, k, k_out), accepted | accept, keys[0]

    def more(state):
        i, _, accepted, _ = state
        return jnp.any(~accepted) & (i < max_iters)

    init = (jnp.zeros((), np.int32), jnp.full(shape, -1, lam.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(more, body, init)[1].astype(dtype)


@jit(static_argnums=(2, 3))
def _poisson(key, lam, shape, dtype):
    lam = jnp.broadcast_to(lax.convert_element_type(lam, _F32), shape)
    use_knuth = jnp.isnan(lam) | (lam < 10)
    lam_knuth = jnp.where(use_knuth, lam, jnp.zeros_like(lam))
    lam_rejection = jnp.where(use_knuth, jnp.full_like(lam, 1e5), lam)
    max_iters = min(int(np.iinfo(dtype).max), int(np.iinfo(np.int32).max))  # "insanely conservative", as JAX
    result = jnp.where(use_knuth, _knuth(key, lam_knuth, shape, dtype, max_iters),
                       _rejection(key, lam_rejection, shape, dtype, max_iters))
    return jnp.where(lam == 0, jnp.zeros_like(result), result)


def poisson(key: KeyLike, lam: ArrayLike, shape: Shape | None = None, dtype: DTypeLike | None = None) -> Array:
    """Poisson(lam) integers (default int dtype); lam >= 0 broadcast to `shape`."""
    data, _ = check_key("poisson", key)
    dt = int_dtype("poisson", dtype)
    shape = tuple(np.shape(lam)) if shape is None else shape_arg("poisson", shape)
    return _poisson(data, lam, shape, dt)
