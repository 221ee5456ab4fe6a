"""Samplers built on sorts and scans, as jax.random builds them (so a key gives JAX's draws):
`permutation` (sorts by fresh random 32-bit keys, JAX's `_shuffle`) and `choice` (randint; a prefix of a
permutation; with `p`, a search of uniform draws in the cumulative sum, or the Gumbel top-k trick
without replacement).
"""

from __future__ import annotations

import math

import numpy as np

import ember.lax as lax
import ember.numpy as jnp
import ember.tracer.dtypes as dtypes
from ember.api import jit
from ember.errors import ArgumentError, ArgumentValueError, ConcretizationError, user_location
from ember.random import _prng
from ember.random._checks import shape_arg
from ember.random._distributions import gumbel, randint, uniform
from ember.random._keys import Array, ArrayLike, KeyLike, Shape, check_key
from ember.tracer.trace import Tracer


@jit(static_argnums=(2,))
def _shuffle(key, x, axis: int):
    """`x` shuffled along `axis`: sorted by random 32-bit keys, in as many rounds (each with a fresh key) as
    make collisions of keys unlikely to bias the result, as JAX's `_shuffle`."""
    rounds = math.ceil(3 * math.log(max(1, math.prod(x.shape))) / math.log(np.iinfo(np.uint32).max))
    for _ in range(rounds):
        pair = _prng.split(key, (2,))
        key, subkey = pair[0], pair[1]
        _, x = lax.sort_key_val(_prng.random_bits(subkey, 32, tuple(x.shape)), x, axis)
    return x


def _concrete_int(name: str, x) -> int:
    if isinstance(x, Tracer):
        raise ConcretizationError(f"{name}: an integer x must be concrete (it is the permutation's length)",
                                  user_location())
    return int(x)


def permutation(key: KeyLike, x: int | ArrayLike, axis: int = 0, independent: bool = False) -> Array:
    """A random permutation of range(x) for an int `x`, else of `x` along `axis` (of each slice along it
    independently when `independent`), as jax.random.permutation."""
    data, _ = check_key("permutation", key)
    ndim = len(np.shape(x))
    if not ndim:
        if not np.issubdtype(np.asarray(x).dtype if not isinstance(x, Tracer) else x.dtype, np.integer):
            raise ArgumentError("x must be an integer or at least 1-dimensional", user_location())
        return _shuffle(data, jnp.arange(_concrete_int("permutation", x)), 0)
    if not -ndim <= axis < ndim:
        raise ArgumentValueError(f"permutation: axis {axis} is out of bounds for an array of rank {ndim}",
                                 user_location())
    axis %= ndim
    x = jnp.asarray(x)
    if independent or ndim == 1:
        return _shuffle(data, x, axis)
    order = _shuffle(data, jnp.arange(x.shape[axis]), 0)
    return jnp.take(x, order, axis)


def choice(key: KeyLike, a: int | ArrayLike, shape: Shape = (), replace: bool = True, p: ArrayLike | None = None,
           axis: int = 0, mode: str | None = None) -> Array:
    """`shape` draws from `a` (range(a) for an int) along `axis`, with or without replacement, uniformly
    or with probabilities `p`, as jax.random.choice."""
    data, _ = check_key("choice", key)
    if not isinstance(shape, (tuple, list)):
        raise ArgumentError(f"shape argument of ember.random.choice must be a sequence, got {shape}", user_location())
    shape = shape_arg("choice", shape)
    arr = jnp.asarray(a)
    if not arr.shape:
        n = _concrete_int("choice", a)
    else:
        if not -arr.ndim <= axis < arr.ndim:
            raise ArgumentValueError(f"choice: axis {axis} is out of bounds for an array of rank {arr.ndim}",
                                     user_location())
        axis %= arr.ndim
        n = arr.shape[axis]
    draws = math.prod(shape)
    if draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n <= 0:
        raise ArgumentValueError("a must be greater than 0 unless no samples are taken", user_location())
    if not replace and draws > n:
        raise ArgumentValueError(f"Cannot take a larger sample (size {draws}) than population (size {n}) when "
                                 "'replace=False'", user_location())
    if p is None:
        if replace:
            ind = randint(data, shape, 0, n)
            result = ind if not arr.shape else jnp.take(arr, ind, axis)
        else:
            shuffled = permutation(data, n if not arr.shape else arr, axis)
            result = lax.slice_in_dim(shuffled, 0, draws, axis=axis if arr.shape else 0)
    else:
        p = jnp.asarray(p)
        if p.dtype.kind != "f":
            p = p.astype(dtypes.default_float_for(p.dtype))
        if p.shape != (n,):
            raise ArgumentValueError(f"p must be None or a 1D vector with the same size as a.shape[axis]. p has "
                                     f"shape {p.shape} and a.shape[axis] is {n}.", user_location())
        if replace:
            cumulative = jnp.cumsum(p)
            r = cumulative[-1] * (1 - uniform(data, shape, dtype=cumulative.dtype))
            ind = jnp.searchsorted(cumulative, r).astype(dtypes.int_)
        else:
            g = gumbel(data, (n,), dtype=p.dtype, mode=mode) + jnp.log(p)
            ind = lax.top_k(g, draws)[1].astype(dtypes.int_)
        result = ind if not arr.shape else jnp.take(arr, ind, axis)
    return result.reshape(shape if not arr.shape else arr.shape[:axis] + shape + arr.shape[axis + 1:])
