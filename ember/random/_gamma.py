"""Gamma and the samplers built on it (loggamma, beta, dirichlet, chisquare, t, f, generalized_normal,
ball), as JAX 0.10.2 computes them.

Each element gets its own key (a split of the caller's into one per element) and runs Marsaglia and
Tsang's rejection loop (a `while_loop`, vmapped over the elements as JAX's CPU lowering does: finished
elements wait, frozen, for the others). The gradient in the shape parameter is JAX's implicit
reparameterization: d sample / d alpha = -(dF/dalpha) / (dF/dx) of the gamma CDF F at the sample, from the
series or continued fraction of the incomplete gamma function (JAX's `random_gamma_grad`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

import ember.lax as lax
import ember.numpy as jnp
from ember.api import custom_vjp, jit, vmap
from ember.errors import ArgumentValueError, user_location
from ember.random import _prng
from ember.random._checks import check_shape, float_dtype, shape_arg, shape_or_broadcast
from ember.random._distributions import _exponential, _normal, _rademacher, _uniform
from ember.random._keys import Array, ArrayLike, DTypeLike, KeyLike, Shape, check_key


def _gamma_one(key, alpha, log_space: bool):
    """One Gamma(alpha) sample from one key (Marsaglia-Tsang; alpha < 1 boosted to alpha + 1 and scaled
    by u ** (1 / alpha), in log space when asked, for tiny alpha)."""
    dtype = np.dtype(alpha.dtype)
    zero, one = jnp.zeros((), dtype), jnp.ones((), dtype)
    boost_mask = alpha >= one
    alpha_orig = alpha
    alpha = jnp.where(boost_mask, alpha, alpha + one)
    d = alpha - dtype.type(1.0 / 3.0)
    c = dtype.type(1.0 / 3.0) / jnp.sqrt(d)

    def rejected(state):
        _, x2, v, u = state
        return (u >= one - dtype.type(0.0331) * (x2 * x2)) & (jnp.log(u) >= x2 * dtype.type(0.5) + d * (
            (one - v) + jnp.log(v)))

    def next_candidate(state):
        key = state[0]
        keys = _prng.split(key, (2,))
        x = _normal(keys[1], (), dtype)
        return keys[0], x, one + x * c

    def propose(state):
        keys = _prng.split(state[0], (3,))
        _, x, v = lax.while_loop(lambda s: s[2] <= zero, next_candidate, (keys[1], zero, -one))
        u = _uniform(keys[2], zero, one, (), dtype)
        return keys[0], x * x, v * v * v, u

    keys = _prng.split(key, (2,))
    _, _, v, _ = lax.while_loop(rejected, propose, (keys[0], zero, one, one + one))
    if log_space:
        log_samples = -_exponential(keys[1], (), dtype)
        log_boost = jnp.where(boost_mask | (log_samples == 0), zero, log_samples * (one / alpha_orig))
        return jnp.log(d) + jnp.log(v) + log_boost
    samples = one - _uniform(keys[1], zero, one, (), dtype)
    boost = jnp.where(boost_mask, one, jnp.power(samples, one / alpha_orig))
    return d * v * boost


def _gamma_impl(key, a, log_space: bool):
    keys = _prng.split(key, (math.prod(a.shape),))
    samples = vmap(functools.partial(_gamma_one, log_space=log_space))(keys, jnp.reshape(a, (-1,)))
    return jnp.reshape(samples, a.shape)


@functools.partial(custom_vjp, nondiff_argnums=(2,))
def _gamma_sample(key, a, log_space: bool):
    return _gamma_impl(key, a, log_space)


def _gamma_sample_fwd(key, a, log_space: bool):
    sample = _gamma_impl(key, a, log_space)
    return sample, (sample, a)


def _gamma_sample_bwd(log_space: bool, residuals, ct):
    sample, a = residuals
    if log_space:  # d log(s) = ds / s; s may round to 0: the smallest normal float instead
        s = jnp.exp(sample)
        s = jnp.where(s == 0, np.finfo(s.dtype).tiny, s)
        return None, ct * random_gamma_grad(a, s) / s
    return None, ct * random_gamma_grad(a, sample)


_gamma_sample.defvjp(_gamma_sample_fwd, _gamma_sample_bwd)


@jit(static_argnums=(2, 3, 4))
def _gamma(key, a, shape, dtype, log_space=False):
    a = jnp.broadcast_to(lax.convert_element_type(a, dtype), shape)
    return _gamma_sample(key, a, log_space)


def gamma(key: KeyLike, a: ArrayLike, shape: Shape | None = None, dtype: DTypeLike | None = None) -> Array:
    """Gamma(a) floats of unit scale; differentiable in `a` (implicit reparameterization, as JAX)."""
    data, _ = check_key("gamma", key)
    dt = float_dtype("gamma", dtype)
    return _gamma(data, a, shape_or_broadcast("gamma", shape, a), dt, False)


def loggamma(key: KeyLike, a: ArrayLike, shape: Shape | None = None,
             dtype: DTypeLike | None = None) -> Array:
    """log of Gamma(a) floats, sampled in log space (accurate where gamma rounds to 0, a << 1)."""
    data, _ = check_key("loggamma", key)
    dt = float_dtype("loggamma", dtype)
    return _gamma(data, a, shape_or_broadcast("loggamma", shape, a), dt, True)


# --- d sample / d alpha: JAX's random_gamma_grad -----------------------------------------------------

def _series_sample_grad(x, a, enabled, eps: float):
    """-(dP/da) / (dP/dx) from the power series of the lower incomplete gamma function P(a, x)."""
    def more(state):
        return jnp.any(state[0])

    def term(state):
        on, r, c, ans, dc_da, dans_da = state
        r2 = r + 1
        dc_da2 = dc_da * (x / r2) - (c * x) / (r2 * r2)
        dans_da2 = dans_da + dc_da2
        c2 = c * (x / r2)
        ans2 = ans + c2
        keep = on & (jnp.abs(dc_da2 / dans_da2) > eps)
        return (keep, *(jnp.where(on, new, old) for new, old in
                        ((r2, r), (c2, c), (ans2, ans), (dc_da2, dc_da), (dans_da2, dans_da))))

    ones, zeros = jnp.ones_like(a), jnp.zeros_like(a)
    _, _, _, ans, _, dans_da = lax.while_loop(more, term, (enabled, a, ones, ones, zeros, zeros))
    dlogax_da = jnp.log(x) - lax.digamma(a + 1)
    return -(dans_da + ans * dlogax_da) * x / a


def _continued_fraction_sample_grad(x, a, enabled, eps: float):
    """The same from the continued fraction of the upper incomplete gamma function (x > 1 and x > a)."""
    def more(state):
        return (state[5] < 2000) & jnp.any(state[0])

    def step(state):
        (on, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = state
        c = c + 1
        y2, z2 = y + 1, z + 2
        yc = y2 * c
        pk = pkm1 * z2 - pkm2 * yc
        qk = qkm1 * z2 - qkm2 * yc
        nonzero = qk != 0
        r = pk / qk
        t2 = jnp.where(nonzero, jnp.abs((ans - r) / r), jnp.ones_like(r))
        ans2 = jnp.where(nonzero, r, ans)
        dpk_da = dpkm1_da * z2 - pkm1 - dpkm2_da * yc + pkm2 * c
        dqk_da = dqkm1_da * z2 - qkm1 - dqkm2_da * yc + qkm2 * c
        dans_da2 = jnp.where(nonzero, (dpk_da - ans2 * dqk_da) / qk, dans_da)
        change = jnp.where(nonzero, jnp.abs(dans_da2 - dans_da), jnp.ones_like(dans_da))
        rescale = jnp.abs(pk) > 1 / eps
        shrink = [jnp.where(rescale, v * eps, v) for v in (pkm1, pk, qkm1, qk, dpkm1_da, dqkm1_da, dpk_da, dqk_da)]
        pkm2_, pkm1_, qkm2_, qkm1_, dpkm2_, dqkm2_, dpkm1_, dqkm1_ = shrink
        keep = on & (change > eps)
        new = (ans2, t2, y2, z2, None, pkm1_, qkm1_, pkm2_, qkm2_, dpkm2_, dqkm2_, dpkm1_, dqkm1_, dans_da2)
        old = state[1:]
        out = tuple(c if n is None else jnp.where(on, n, o) for n, o in zip(new, old))
        return (keep, *out)

    y = 1 - a
    z = x + y + 1
    pkm1, qkm1 = x + 1, z * x
    ans = pkm1 / qkm1
    zeros = jnp.zeros_like(x)
    dqkm1_da = -x
    dans_da = (zeros - ans * dqkm1_da) / qkm1
    init = (enabled, ans, jnp.ones_like(x), y, z, jnp.zeros((), x.dtype), pkm1, qkm1, jnp.ones_like(x), x,
            zeros, zeros, zeros, dqkm1_da, dans_da)
    out = lax.while_loop(more, step, init)
    ans, dans_da = out[1], out[14]
    dlogax_da = jnp.log(x) - lax.digamma(a)
    return -(dans_da + ans * dlogax_da) * x


def random_gamma_grad(a: ArrayLike, x: ArrayLike) -> Array:
    """d x / d a for a Gamma(a) sample x (JAX's lax.random_gamma_grad)."""
    dtype = np.dtype(x.dtype)
    eps = float(np.finfo(dtype).eps)
    is_nan = jnp.isnan(a) | jnp.isnan(x)
    x_is_zero = x == 0
    domain_error = (x < 0) | (a <= 0)
    use_cf = (x > 1) & (x > a)
    log_ax = a * jnp.log(x) - x - lax.lgamma(a)
    underflow = log_ax < -np.log(np.finfo(dtype).max)
    enabled = ~(x_is_zero | domain_error | underflow | is_nan)
    out = jnp.where(use_cf, -_continued_fraction_sample_grad(x, a, enabled & use_cf, eps),
                    _series_sample_grad(x, a, enabled & ~use_cf, eps))
    out = jnp.where(x_is_zero, jnp.zeros_like(out), out)
    return jnp.where(domain_error | is_nan, jnp.full_like(out, np.nan), out)


# --- built on gamma ----------------------------------------------------------------------------------

def beta(key: KeyLike, a: ArrayLike, b: ArrayLike, shape: Shape | None = None,
         dtype: DTypeLike | None = None) -> Array:
    """Beta(a, b) floats: G_a / (G_a + G_b) from two log-gamma draws, without losing small values."""
    data, _ = check_key("beta", key)
    dt = float_dtype("beta", dtype)
    return _beta(data, a, b, shape_or_broadcast("beta", shape, a, b), dt)


@jit(static_argnums=(3, 4))
def _beta(key, a, b, shape, dtype):
    keys = _prng.split(key, (2,))
    log_a = _gamma(keys[0], a, shape, dtype, True)
    log_b = _gamma(keys[1], b, shape, dtype, True)
    log_max = jnp.maximum(log_a, log_b)
    ga, gb = jnp.exp(log_a - log_max), jnp.exp(log_b - log_max)
    return ga / (ga + gb)


def dirichlet(key: KeyLike, alpha: ArrayLike, shape: Shape | None = None,
              dtype: DTypeLike | None = None) -> Array:
    """Dirichlet(alpha) vectors along alpha's last axis: softmax of log-gamma draws."""
    data, _ = check_key("dirichlet", key)
    dt = float_dtype("dirichlet", dtype)
    if np.ndim(alpha) < 1:
        raise ArgumentValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {np.ndim(alpha)}",
                                 user_location())
    batch = tuple(np.shape(alpha)[:-1])
    shape = batch if shape is None else shape_arg("dirichlet", shape)
    check_shape("dirichlet", shape, batch)
    return _dirichlet(data, alpha, shape, dt)


@jit(static_argnums=(2, 3))
def _dirichlet(key, alpha, shape, dtype):
    log_g = _gamma(key, alpha, (*shape, np.shape(alpha)[-1]), dtype, True)
    e = jnp.exp(log_g - lax.stop_gradient(jnp.max(log_g, axis=-1, keepdims=True)))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def chisquare(key: KeyLike, df: ArrayLike, shape: Shape | None = None,
              dtype: DTypeLike | None = None) -> Array:
    """Chi-square(df) floats: 2 * Gamma(df / 2), from log space."""
    data, _ = check_key("chisquare", key)
    dt = float_dtype("chisquare", dtype)
    return _chisquare(data, df, shape_or_broadcast("chisquare", shape, df), dt)


@jit(static_argnums=(2, 3))
def _chisquare(key, df, shape, dtype):
    half_df = lax.convert_element_type(df, dtype) / dtype.type(2)
    return jnp.exp(_gamma(key, half_df, shape, dtype, True)) * dtype.type(2)


def f(key: KeyLike, dfnum: ArrayLike, dfden: ArrayLike, shape: Shape | None = None,
      dtype: DTypeLike | None = None) -> Array:
    """F(dfnum, dfden) floats: a ratio of scaled chi-squares."""
    data, _ = check_key("f", key)
    dt = float_dtype("f", dtype)
    return _f(data, dfnum, dfden, shape_or_broadcast("f", shape, dfnum, dfden), dt)


@jit(static_argnums=(3, 4))
def _f(key, dfnum, dfden, shape, dtype):
    dfden = lax.convert_element_type(dfden, dtype)
    dfnum = lax.convert_element_type(dfnum, dtype)
    keys = _prng.split(key, (2,))
    num = _chisquare(keys[1], dfnum, shape, dtype) / dfnum
    den = _chisquare(keys[0], dfden, shape, dtype) / dfden
    return num / den


def t(key: KeyLike, df: ArrayLike, shape: Shape | None = None, dtype: DTypeLike | None = None) -> Array:
    """Student's t(df) floats: normal * sqrt(df / (2 Gamma(df / 2)))."""
    data, _ = check_key("t", key)
    dt = float_dtype("t", dtype)
    return _t(data, df, shape_or_broadcast("t", shape, df), dt)


@jit(static_argnums=(2, 3))
def _t(key, df, shape, dtype):
    df = lax.convert_element_type(df, dtype)
    keys = _prng.split(key, (2,))
    n = _normal(keys[0], shape, dtype)
    half_df = df / dtype.type(2)
    g = _gamma(keys[1], half_df, shape, dtype, False)
    return n * jnp.sqrt(half_df / g)


def generalized_normal(key: KeyLike, p: float, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """Generalized normal floats of power p: a random sign times Gamma(1/p) ** (1/p)."""
    data, _ = check_key("generalized_normal", key)
    dt = float_dtype("generalized_normal", dtype)
    return _generalized_normal(data, p, shape_arg("generalized_normal", shape), dt)


@jit(static_argnums=(2, 3))
def _generalized_normal(key, p, shape, dtype):
    keys = _prng.split(key, (2,))
    g = _gamma(keys[0], 1 / p, shape, dtype, False)
    r = _rademacher(keys[1], shape, dtype)
    return r * g ** (1 / p)


def ball(key: KeyLike, d: int, p: float = 2, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """Points uniform in the unit p-norm ball of dimension d (Barthe et al.), shape (*shape, d)."""
    data, _ = check_key("ball", key)
    dt = float_dtype("ball", dtype)
    if not isinstance(d, int) or d < 0:
        raise ArgumentValueError(f"ball: d must be a nonnegative int, got {d!r}", user_location())
    return _ball(data, p, d, shape_arg("ball", shape), dt)


@jit(static_argnums=(2, 3, 4))
def _ball(key, p, d, shape, dtype):
    keys = _prng.split(key, (2,))
    g = _generalized_normal(keys[0], p, (*shape, d), dtype)
    e = _exponential(keys[1], shape, dtype)
    return g / ((jnp.sum(jnp.abs(g) ** p, axis=-1) + e) ** (1 / p))[..., None]
