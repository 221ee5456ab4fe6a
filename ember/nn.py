"""Neural-network functions in stable formulations, and small Dense/MLP helpers."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

import ember.numpy as jnp
from ember.api import custom_vjp, stop_gradient
from ember.errors import missing_attribute as _missing_attribute
from ember.scipy.special import erf, expit


def _float(x):
    """`x` as an array of a float dtype (integers and bools become float32, 64-bit ones float64, as
    JAX's x64 promotion gives)."""
    x = jnp.asarray(x)
    if x.dtype.kind == "f":
        return x
    return jnp.asarray(x, jnp.float64 if x.dtype.itemsize == 8 else jnp.float32)


@custom_vjp
def _relu(x):
    return jnp.maximum(x, 0)


def _relu_fwd(x):
    out = _relu(x)
    return out, out


def _relu_bwd(out, ct):
    return (jnp.where(jnp.greater(out, 0), ct, 0),)


_relu.defvjp(_relu_fwd, _relu_bwd)


def relu(x):
    """max(x, 0) with its own gradient rule, as jax.nn.relu: 0 at x = 0 (where `maximum` splits a tie
    and gives 0.5); the backward pass reads only the output."""
    return _relu(jnp.asarray(x))


def sigmoid(x):
    """1 / (1 + exp(-x)), computed stably (the `logistic` primitive, as scipy.special.expit)."""
    return expit(x)


def gelu(x, approximate: bool = True):
    """Gaussian error linear unit: the tanh approximation by default (as in JAX), or exact with erf."""
    x = _float(x)
    if approximate:
        cube = jnp.multiply(x, jnp.multiply(x, x))
        inner = jnp.multiply(math.sqrt(2.0 / math.pi), jnp.add(x, jnp.multiply(0.044715, cube)))
        cdf = jnp.multiply(0.5, jnp.add(1.0, jnp.tanh(inner)))
    else:
        cdf = jnp.multiply(0.5, jnp.add(1.0, erf(jnp.multiply(x, 1.0 / math.sqrt(2.0)))))
    return jnp.multiply(x, cdf)


def _max_shift(x, axis):
    """The max along `axis` (kept; -inf over no elements), with infinities replaced by 0 and no
    gradient through it."""
    m = stop_gradient(jnp.max(x, axis=axis, keepdims=True, initial=-np.inf))
    return jnp.where(jnp.isfinite(m), m, 0.0)


def logsumexp(x, axis=None, keepdims: bool = False):
    """log(sum(exp(x))) without overflow: the max is subtracted first (-inf over no elements)."""
    x = _float(x)
    m = _max_shift(x, axis)
    out = jnp.log(jnp.sum(jnp.exp(jnp.subtract(x, m)), axis=axis, keepdims=keepdims))
    return jnp.add(out, m if keepdims else jnp.reshape(m, jnp.shape(out)))


def softmax(x, axis: int | Sequence[int] = -1):
    """exp(x) / sum(exp(x)) along `axis`, shifted by the max for stability."""
    x = _float(x)
    e = jnp.exp(jnp.subtract(x, _max_shift(x, axis)))
    return jnp.divide(e, jnp.sum(e, axis=axis, keepdims=True))


def log_softmax(x, axis: int | Sequence[int] = -1):
    """x - logsumexp(x) along `axis`, computed stably."""
    x = _float(x)
    shifted = jnp.subtract(x, _max_shift(x, axis))
    return jnp.subtract(shifted, jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True)))


# --- Dense / MLP helpers --------------------------------------------------------------------------

def init_mlp(sizes: Sequence[int], seed: int = 0, dtype=np.float32) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(w, b), ...] for layers sizes[0] -> sizes[1] -> ...; w is (in, out), scaled by 1/sqrt(in)."""
    rng = np.random.default_rng(seed)
    return [((rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)).astype(dtype), np.zeros(n_out, dtype))
            for n_in, n_out in zip(sizes[:-1], sizes[1:])]


def dense(params, x):
    """x @ w + b for params (w, b); x may carry leading batch axes."""
    w, b = params
    return jnp.add(jnp.matmul(x, w), b)


def mlp(params, x, activation: Callable | None = relu):
    """Dense layers with `activation` between them (none after the last; identity when None)."""
    for i, layer in enumerate(params):
        x = dense(layer, x)
        if activation is not None and i < len(params) - 1:
            x = activation(x)
    return x


def __getattr__(name: str):
    """Say that a missing name is not implemented yet, with the closest names and the fallback."""
    raise _missing_attribute('ember.nn', name, globals(), None)
