"""jax.nn's other activations and helpers, written as JAX 0.10.2 writes them so that values, dtypes and
gradients (at the kinks too: relu6 and log1mexp have their own JVP rules there) are JAX's."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

import ember.lax as lax
import ember.numpy as jnp
from ember.api import custom_jvp
from ember.errors import ArgumentValueError, ConcretizationError, user_location
from ember.scipy.special import expit, logsumexp

Axis = int | Sequence[int] | None


def default_float() -> np.dtype:
    """The dtype a Python float becomes (JAX's default float: float32, float64 in 64-bit mode)."""
    return np.dtype(jnp.asarray(0.0).dtype)


def as_float(x):
    """`x` as an array of a float dtype, as JAX's promote_args_inexact: bools and integers up to 32 bits
    become float32 (in 64-bit mode too), 64-bit integers float64 (Ember keeps 64-bit inputs)."""
    x = jnp.asarray(x)
    if x.dtype.kind == "f":
        return x
    return jnp.asarray(x, jnp.float64 if x.dtype.itemsize == 8 else jnp.float32)


def masked(x, where, fill):
    """`x` with the elements outside `where` replaced by `fill` (no mask: `x` itself)."""
    return x if where is None else jnp.where(where, x, fill)


def count(x, axis: Axis, where, keepdims: bool, dtype):
    """How many elements of `x` a reduction over `axis` takes (those in `where`), in `dtype`."""
    ones = jnp.ones(jnp.shape(x), dtype)
    return jnp.sum(masked(ones, where, 0), axis=axis, keepdims=keepdims)


# --- elementwise activations ----------------------------------------------------------------------

def identity(x):
    """The argument as an array, unchanged (integers stay integers)."""
    return jnp.asarray(x)


def tanh(x):
    """Hyperbolic tangent, jnp.tanh."""
    return jnp.tanh(x)


@custom_jvp
def relu6(x):
    """min(max(x, 0), 6); its gradient is 0 at both kinks (x = 0 and x = 6), as JAX's rule gives."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6.defjvps(lambda g, out, x: jnp.where(jnp.logical_and(jnp.greater(x, 0), jnp.less(x, 6)), g, 0))


def hard_sigmoid(x):
    """relu6(x + 3) / 6: a piecewise-linear sigmoid."""
    return jnp.divide(relu6(jnp.add(x, 3.0)), 6.0)


def hard_silu(x):
    """x * hard_sigmoid(x) (hard swish)."""
    x = jnp.asarray(x)
    return jnp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


def hard_tanh(x):
    """x clipped to [-1, 1] by selects (gradient 1 at the bounds themselves; integers stay integers)."""
    x = jnp.asarray(x)
    return jnp.where(jnp.greater(x, 1), 1, jnp.where(jnp.less(x, -1), -1, x))


def softplus(x):
    """log(1 + exp(x)), as logaddexp(x, 0) so that it neither overflows nor loses small values."""
    return jnp.logaddexp(x, 0)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), stable at both ends (x negated in its own dtype, as JAX does)."""
    return jnp.negative(softplus(jnp.negative(jnp.asarray(x))))


def silu(x):
    """x * sigmoid(x) (swish). Integer inputs take the default float (JAX's sigmoid rejects them)."""
    x = as_float(x)
    return jnp.multiply(x, expit(x))


swish = silu


def mish(x):
    """x * tanh(softplus(x))."""
    x = jnp.asarray(x)
    return jnp.multiply(x, jnp.tanh(softplus(x)))


def soft_sign(x):
    """x / (|x| + 1)."""
    x = jnp.asarray(x)
    return jnp.divide(x, jnp.add(jnp.abs(x), 1))


def squareplus(x, b=4):
    """(x + sqrt(x**2 + b)) / 2: a smooth relu whose smoothness `b` sets."""
    x = jnp.asarray(x)
    return jnp.divide(jnp.add(x, jnp.sqrt(jnp.add(jnp.square(x), b))), 2)


def sparse_plus(x):
    """0 for x <= -1, (x + 1)**2 / 4 between, x for x >= 1: softplus's piecewise-quadratic twin."""
    x = jnp.asarray(x)
    inner = jnp.divide(jnp.square(jnp.add(x, 1.0)), 4)
    return jnp.where(jnp.less_equal(x, -1.0), 0.0, jnp.where(jnp.greater_equal(x, 1.0), x, inner))


def sparse_sigmoid(x):
    """clip((x + 1) / 2, 0, 1): the derivative of sparse_plus."""
    return jnp.multiply(0.5, jnp.clip(jnp.add(x, 1.0), 0.0, 2.0))


def leaky_relu(x, negative_slope=1e-2):
    """x for x >= 0, negative_slope * x below."""
    x = jnp.asarray(x)
    return jnp.where(jnp.greater_equal(x, 0), x, jnp.multiply(negative_slope, x))


def elu(x, alpha=1.0):
    """x for x > 0, alpha * (exp(x) - 1) otherwise; expm1 reads only non-positive values, so a large
    x cannot overflow into the branch not taken (and poison its gradient)."""
    x = jnp.asarray(x)
    positive = jnp.greater(x, 0)
    return jnp.where(positive, x, jnp.multiply(alpha, jnp.expm1(jnp.where(positive, 0.0, x))))


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha): elu made continuously differentiable in alpha."""
    x = jnp.asarray(x)
    return jnp.add(jnp.maximum(x, 0.0), jnp.multiply(alpha, jnp.expm1(jnp.divide(jnp.minimum(x, 0.0), alpha))))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants of Klambauer et al."""
    return jnp.multiply(_SELU_SCALE, elu(x, _SELU_ALPHA))


@custom_jvp
def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0, by the branch that is accurate on each side of log 2 (Maechler);
    its gradient is 1 / expm1(x), JAX's rule."""
    x = jnp.asarray(x)  # negated in its own dtype, as JAX does
    near = jnp.log(jnp.negative(jnp.expm1(jnp.negative(x))))
    far = jnp.log1p(jnp.negative(jnp.exp(jnp.negative(x))))
    return jnp.where(jnp.less(x, math.log(2.0)), near, far)


log1mexp.defjvps(lambda g, out, x: jnp.divide(g, jnp.expm1(as_float(x))))


def glu(x, axis: int = -1):
    """Gated linear unit: the first half of `x` along `axis` times the sigmoid of the second half."""
    x = jnp.asarray(x)
    if jnp.shape(x)[axis] % 2:
        raise ArgumentValueError(f"glu: the size of axis {axis} must be even to split it in two halves, "
                                 f"got {jnp.shape(x)[axis]} (shape {jnp.shape(x)})", user_location())
    first, second = jnp.split(x, 2, axis)
    return jnp.multiply(first, expit(second))


def logmeanexp(x, axis: Axis = None, where=None, keepdims: bool = False):
    """log(mean(exp(x))) along `axis` over `where`: logsumexp minus the log of the count."""
    lse = logsumexp(x, axis=axis, keepdims=keepdims, where=where)
    return jnp.subtract(lse, jnp.log(count(x, axis, where, keepdims, lse.dtype)))


# --- normalization and encodings ------------------------------------------------------------------

def standardize(x, axis: Axis = -1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm: str = "fast"):
    """(x - mean) / sqrt(variance + epsilon) along `axis`, the statistics taken over `where` when given.
    algorithm "fast" (JAX's default) takes the variance as mean(x**2) - mean**2 clipped at 0; "stable"
    as mean((x - mean)**2)."""
    if algorithm not in ("fast", "stable"):
        raise ArgumentValueError(f"standardize: unknown algorithm {algorithm!r}; expected 'fast' or 'stable'",
                                 user_location())
    x = jnp.asarray(x)
    mean = _mean(x, axis, where) if mean is None else _weak(mean, x)
    if variance is None:
        if algorithm == "stable":
            variance = _mean(jnp.square(jnp.subtract(x, mean)), axis, where)
        else:
            variance = jnp.clip(jnp.subtract(_mean(jnp.square(x), axis, where), jnp.square(mean)), 0)
    centered = jnp.subtract(x, mean)
    return jnp.multiply(centered, lax.rsqrt(jnp.add(_weak(variance, centered), epsilon)))


def _weak(value, like):
    """A Python scalar as an array of `like`'s float dtype, as JAX's weak typing keeps it (two Python
    scalars combined eagerly would otherwise give a default-float array); arrays unchanged."""
    if isinstance(value, (bool, int, float)):
        return jnp.asarray(value, as_float(like).dtype)
    return value


def _mean(x, axis: Axis, where):
    """jnp.mean(x, axis, keepdims=True, where=where): the sum over `where` divided by its count."""
    if where is None:
        return jnp.mean(x, axis=axis, keepdims=True)
    x = as_float(x)
    return jnp.divide(jnp.sum(masked(x, where, 0), axis=axis, keepdims=True), count(x, axis, where, True, x.dtype))


def one_hot(x, num_classes: int, *, dtype=None, axis: int = -1):
    """x[..., None] == arange(num_classes) along a new axis `axis`, as `dtype` (default float): indices
    outside [0, num_classes), negative ones included, encode as all zeros."""
    try:
        num_classes = operator.index(num_classes)
    except TypeError:
        raise ConcretizationError(f"one_hot: num_classes must be a concrete int (it sets the shape), got "
                                  f"{type(num_classes).__name__}", user_location()) from None
    x = jnp.asarray(x)
    ndim = jnp.ndim(x) + 1
    if not -ndim <= axis < ndim:
        raise ArgumentValueError(f"one_hot: axis {axis} is out of bounds for the result's {ndim} dimensions",
                                 user_location())
    axis = axis % ndim
    classes = jnp.reshape(jnp.arange(num_classes, dtype=x.dtype), (num_classes,) + (1,) * (ndim - 1 - axis))
    hits = jnp.equal(jnp.expand_dims(x, axis), classes)
    return jnp.asarray(hits, default_float() if dtype is None else dtype)
