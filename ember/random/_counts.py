"""Counts as JAX 0.10.2 draws them, each algorithm a `while_loop` over the whole array (one draw per
element per trip) that runs until every element is done. Poisson: Knuth's product of uniforms below rate
10, Hormann's transformed rejection (PTRS) above. Binomial: sums of geometric waiting times below 10
expected successes, Hormann's BTRS above."""

from __future__ import annotations

import numpy as np

import ember.lax as lax
import ember.numpy as jnp
import ember.tracer.dtypes as dtypes
from ember.api import jit
from ember.random import _prng
from ember.random._checks import dtype_of, float_dtype, int_dtype, shape_arg, shape_or_broadcast
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


def _until_accepted(body, key, shape, work_dtype, dtype, max_iters):
    """A transformed-rejection loop: `body((i, k, accepted, key))` draws again where no sample was
    accepted, until all are (or `max_iters`); the samples as `dtype` (-1 where none was accepted)."""
    def more(state):
        i, _, accepted, _ = state
        return jnp.any(~accepted) & (i < max_iters)

    init = (jnp.zeros((), np.int32), jnp.full(shape, -1, work_dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(more, body, init)[1].astype(dtype)


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

    return _until_accepted(body, key, shape, lam.dtype, dtype, max_iters)


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


# --- binomial ----------------------------------------------------------------------------------------

_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287)


def _stirling_approx_tail(k):
    """log(k!) minus its Stirling approximation: a table for k <= 9, the series beyond."""
    dtype = np.dtype(k.dtype)
    small = k <= 9
    k = jnp.clip(k, dtype.type(0), dtype.type(9))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    table = jnp.asarray(np.array(_STIRLING_TAIL, dtype))
    return jnp.where(small, jnp.take(table, jnp.floor(k).astype(np.int32)), approx)


def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    """Count geometric waiting times (in trials) until they pass `count`, minus one."""
    log1minusprob = jnp.log1p(-prob)

    def body(state):
        i, num_geom, geom_sum, key = state
        keys = _prng.split(key, (2,))
        num_geom = jnp.where(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(keys[0], prob.dtype.type(0), prob.dtype.type(1), shape, prob.dtype)
        return i + 1, num_geom, geom_sum + jnp.ceil(jnp.log(u) / log1minusprob), keys[1]

    def more(state):
        i, _, geom_sum, _ = state
        return jnp.any(geom_sum <= count) & (i < max_iters)

    zeros = jnp.zeros(shape, prob.dtype)
    k = lax.while_loop(more, body, (jnp.zeros((), np.int32), zeros, zeros, key))[1]
    return (k - 1).astype(dtype)


def _btrs(key, count, prob, shape, dtype, max_iters):
    """Hormann's transformed rejection with squeeze for the binomial (BTRS)."""
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body(state):
        i, k_out, accepted, key = state
        keys = _prng.split(key, (3,))
        u = _uniform(keys[1], prob.dtype.type(0), prob.dtype.type(1), shape, prob.dtype)
        v = _uniform(keys[2], prob.dtype.type(0), prob.dtype.type(1), shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k) - _stirling_approx_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, jnp.where(accept, k, k_out), accepted | accept, keys[0]

    return _until_accepted(body, key, shape, prob.dtype, dtype, max_iters)


@jit(static_argnums=(3, 4, 5))
def _binomial(key, count, prob, shape, dtype, pdtype):
    prob = jnp.broadcast_to(lax.convert_element_type(prob, pdtype), shape)
    count = jnp.broadcast_to(lax.convert_element_type(count, pdtype), shape)
    p_lt_half = prob < 0.5
    q = jnp.where(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = jnp.isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan, q_neg = jnp.isnan(q), q < 0.0
    q = jnp.where(q_is_nan | q_neg, jnp.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)  # as NumPy's binomial does for a float count
    count_inv = jnp.where(use_inversion, count, jnp.zeros_like(count))
    count_btrs = jnp.where(use_inversion, jnp.full_like(count, 1e4), count)
    q_btrs = jnp.where(use_inversion, jnp.full_like(q, 0.5), q)
    max_iters = int(np.iinfo(np.int32).max)  # JAX's bound is the float max: neither is ever reached
    samples = jnp.where(use_inversion, _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
                        _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_neg | q_is_nan | count_nan_or_neg  # NaN for a NaN q or a NaN or negative count
    samples = jnp.where(invalid, jnp.full_like(samples, np.nan), samples)
    samples = jnp.where(count_inf & ~invalid, jnp.full_like(samples, np.inf), samples)
    return jnp.where(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples, count.astype(dtype) - samples)


def binomial(key: KeyLike, n: ArrayLike, p: ArrayLike, shape: Shape | None = None,
             dtype: DTypeLike | None = None) -> Array:
    """Binomial(n, p) counts as floats (default float dtype), as jax.random.binomial."""
    data, _ = check_key("binomial", key)
    dt = float_dtype("binomial", dtype)
    shape = shape_or_broadcast("binomial", shape, n, p)
    pdt = dtype_of(p) if dtype_of(p).kind == "f" else dtypes.float_
    return _binomial(data, n, p, shape, dt, pdt)
