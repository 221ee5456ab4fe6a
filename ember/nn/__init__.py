"""Neural-network functions (jax.nn's names and semantics) in stable formulations, small Dense/MLP
helpers, and `ember.nn.initializers`. The activations beyond relu, sigmoid and gelu live in
`_functions.py`; this module holds the first ones, the softmax family and the MLP helpers."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ember.numpy as jnp
import ember.random as random
from ember.api import custom_vjp, stop_gradient
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
from ember.nn._functions import masked as _masked
from ember.nn._pooling import avg_pool, max_pool
from ember.scipy.special import erf, expit

__all__ = [
    "relu", "sigmoid", "gelu", "logsumexp", "logmeanexp", "softmax", "log_softmax", "celu", "elu", "glu",
    "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity", "leaky_relu", "log1mexp",
    "log_sigmoid", "mish", "one_hot", "relu6", "selu", "silu", "soft_sign", "softplus", "sparse_plus",
    "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh", "initializers", "init_mlp", "dense", "mlp",
    "max_pool", "avg_pool",
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


def _max(x, axis: Axis, where, keepdims: bool = True):
    """The max of `x` along `axis` over `where` (-inf over no elements), with no gradient through it."""
    return stop_gradient(jnp.max(_masked(x, where, -np.inf), axis=axis, keepdims=keepdims, initial=-np.inf))


def logsumexp(a, axis: Axis = None, b=None, keepdims: bool = False, return_sign: bool = False, where=None):
    """log(sum(b * exp(a))) along `axis` over `where`, without overflow: the max is subtracted first
    (replaced by 0 where it is infinite). With `b`, a negative sum gives nan, or with `return_sign` the
    pair (log|sum|, sign(sum)), as jax.nn.logsumexp."""
    if b is not None:
        a, b = jnp.broadcast_arrays(*_floats(a, b))
        a = jnp.where(jnp.not_equal(b, 0), a, -np.inf)
    a = _masked(_float(a), where, -np.inf)
    m = _max(a, axis, None)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    terms = jnp.exp(jnp.subtract(a, m))
    total = jnp.sum(terms if b is None else jnp.multiply(terms, b), axis=axis, keepdims=keepdims)
    sign = jnp.sign(total)
    out = jnp.add(jnp.log(jnp.abs(total)), m if keepdims else jnp.reshape(m, jnp.shape(total)))
    if return_sign:
        return out, sign
    return out if b is None else jnp.where(jnp.less(sign, 0), np.nan, out)


def _floats(*args):
    """The arguments promoted together to one float dtype (JAX's promote_args_inexact): the dtype of
    the sum of a typed zero of each, made a float."""
    args = [jnp.asarray(x) for x in args]
    dtype = _float(functools.reduce(jnp.add, [jnp.zeros((), x.dtype) for x in args])).dtype
    return [jnp.asarray(x, dtype) for x in args]


def softmax(x, axis: Axis = -1, where=None):
    """exp(x) / sum(exp(x)) along `axis`, shifted by the max (no gradient through it) for stability;
    elements outside `where` take no part and give 0. Any +inf makes the result nan, as in JAX."""
    x = _float(x)
    e = jnp.exp(jnp.subtract(_masked(x, where, -np.inf), _max(x, axis, where)))
    out = jnp.divide(e, jnp.sum(_masked(e, where, 0.0), axis=axis, keepdims=True))
    return _masked(out, where, 0.0)


def log_softmax(x, axis: Axis = -1, where=None):
    """x - logsumexp(x) along `axis`, computed stably; elements outside `where` give -inf."""
    x = _float(x)
    shifted = jnp.subtract(_masked(x, where, -np.inf), _max(x, axis, where))
    total = jnp.sum(_masked(jnp.exp(shifted), where, 0.0), axis=axis, keepdims=True)
    return _masked(jnp.subtract(shifted, jnp.log(total)), where, -np.inf)


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
