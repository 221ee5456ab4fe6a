"""Neural-network functions (jax.nn's names and semantics) in stable formulations, small Dense/MLP
helpers, and `ember.nn.initializers`. The activations beyond relu, sigmoid and gelu live in
`_functions.py`; this module holds the first ones, the softmax family and the MLP helpers."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ember.numpy as jnp
import ember.random as random
import ember.scipy.special as _special
from ember.api import custom_vjp
from ember.errors import missing_attribute as _missing_attribute
from ember.nn import initializers
from ember.nn._functions import (
    Axis,
    celu,
    elu,
    glu,
    hard_sigmoid,
    hard_silu,
    hard_swish,
    hard_tanh,
    identity,
    leaky_relu,
    log1mexp,
    log_sigmoid,
    logmeanexp,
    mish,
    one_hot,
    relu6,
    selu,
    silu,
    soft_sign,
    softplus,
    sparse_plus,
    sparse_sigmoid,
    squareplus,
    standardize,
    swish,
    tanh,
)
from ember.nn._functions import as_float as _float
from ember.nn._layers import conv, conv_bias_act, dense_bias_act
from ember.nn._pooling import avg_pool, max_pool
from ember.scipy.special import erf, expit

__all__ = [
    "relu", "sigmoid", "gelu", "logsumexp", "logmeanexp", "softmax", "log_softmax", "celu", "elu", "glu",
    "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity", "leaky_relu", "log1mexp",
    "log_sigmoid", "mish", "one_hot", "relu6", "selu", "silu", "soft_sign", "softplus", "sparse_plus",
    "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh", "initializers", "init_mlp", "dense", "mlp",
    "max_pool", "avg_pool",
    "conv", "conv_bias_act", "dense_bias_act",
]


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


def logsumexp(a, axis: Axis = None, b=None, keepdims: bool = False, return_sign: bool = False, where=None):
    """log(sum(b * exp(a))) along `axis` over `where`, without overflow; with `b` and `return_sign` the
    pair (log|sum|, sign(sum)): ember.scipy.special.logsumexp, as jax.nn's is jax.scipy.special's."""
    return _special.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign, where=where)


def softmax(x, axis: Axis = -1, where=None):
    """exp(x) / sum(exp(x)) along `axis`, shifted by the max (no gradient through it) for stability;
    elements outside `where` take no part and give 0. Any +inf makes the result nan, as in JAX.
    ember.scipy.special.softmax computes it (there the axis defaults to all axes)."""
    return _special.softmax(x, axis=axis, where=where)


def log_softmax(x, axis: Axis = -1, where=None):
    """x - logsumexp(x) along `axis`, computed stably; elements outside `where` give -inf
    (ember.scipy.special.log_softmax computes it)."""
    return _special.log_softmax(x, axis=axis, where=where)


# --- Dense / MLP helpers --------------------------------------------------------------------------

def init_mlp(sizes: Sequence[int], seed: int = 0, dtype=np.float32, key=None) -> list[tuple[Any, Any]]:
    """[(w, b), ...] for layers sizes[0] -> sizes[1] -> ...; w is (in, out), normal with variance 1/in
    (drawn with NumPy from `seed`, or, given an ember.random `key`, with JAX's stream: the key split
    once per layer, each weight variance_scaling(1, "fan_in", "normal")); b is zero."""
    layers = list(zip(sizes[:-1], sizes[1:]))
    if key is None:
        rng = np.random.default_rng(seed)
        return [((rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)).astype(dtype), np.zeros(n_out, dtype))
                for n_in, n_out in layers]
    init = initializers.variance_scaling(1.0, "fan_in", "normal", dtype=dtype)
    keys = random.split(key, len(layers)) if layers else []
    return [(init(k, (n_in, n_out)), jnp.zeros((n_out,), dtype)) for k, (n_in, n_out) in zip(keys, layers)]


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


# What to use for the jax.nn names Ember lacks (missing_attribute says JAX has them).
_HINTS: dict[str, str] = {
    "dot_product_attention": "write it with ember.numpy: softmax(q @ k^T * scale (+ bias, masked)) @ v, with "
                             "ember.nn.softmax(..., where=mask) for the mask",
    "scaled_matmul": "Ember has no block-scaled (fp8/fp4) types; use ember.numpy.matmul",
    "scaled_dot_general": "Ember has no block-scaled (fp8/fp4) types; use ember.numpy.einsum or tensordot",
    "get_scaled_dot_general_config": "Ember has no block-scaled (fp8/fp4) types",
    "normalize": "JAX renamed it: use ember.nn.standardize",
}


def __getattr__(name: str):
    """Say whether jax.nn has a missing name and what to use, with the closest names ember.nn has."""
    raise _missing_attribute("ember.nn", name, {k: globals()[k] for k in __all__}, hints=_HINTS)
