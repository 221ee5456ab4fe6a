"""Pooling over the spatial axes of (batch, spatial..., features) arrays, as flax.linen's
`max_pool` and `avg_pool`: one lax.reduce_window each (avg_pool a sum divided by the window size,
or by the count of real elements with count_include_pad=False)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.errors import ShapeError, user_location


def _pool(inputs, init, computation, window_shape: Sequence[int], strides, padding):
    """reduce_window over the spatial axes: the window (1, *window_shape, 1); an input without a
    batch axis (spatial..., features) is pooled as a batch of one."""
    inputs = jnp.asarray(inputs)
    nd = len(window_shape)
    strides = tuple(strides) if strides is not None else (1,) * nd
    if len(strides) != nd:
        raise ShapeError(f"pool: strides {strides} must have one entry per window axis {tuple(window_shape)}",
                         user_location())
    batched = inputs.ndim == nd + 2
    if not batched and inputs.ndim != nd + 1:
        raise ShapeError(f"pool: inputs of shape {inputs.shape} need {nd} spatial axes between the batch and "
                         "the features", user_location())
    x = inputs if batched else inputs[None]
    if not isinstance(padding, str):
        padding = ((0, 0), *tuple(tuple(p) for p in padding), (0, 0))
    out = lax.reduce_window(x, init, computation, (1, *window_shape, 1), (1, *strides, 1), padding)
    return out if batched else out[0]


def max_pool(inputs, window_shape: Sequence[int], strides: Sequence[int] | None = None, padding="VALID"):
    """The maximum of each window (padding never wins), as flax.linen.max_pool."""
    dt = jnp.asarray(inputs).dtype
    init = -np.inf if np.dtype(dt).kind == "f" else np.iinfo(dt).min
    return _pool(inputs, np.asarray(init, dt)[()], lax.max, window_shape, strides, padding)


def avg_pool(inputs, window_shape: Sequence[int], strides: Sequence[int] | None = None, padding="VALID",
             count_include_pad: bool = True):
    """The mean of each window, as flax.linen.avg_pool: over the whole window (padding counts as
    zeros), or with count_include_pad=False over its real elements only."""
    inputs = jnp.asarray(inputs)
    total = _pool(inputs, np.zeros((), inputs.dtype)[()], lax.add, window_shape, strides, padding)
    if count_include_pad:
        return total / float(np.prod(window_shape))
    ones = jnp.ones(inputs.shape[-len(window_shape) - 1:-1] + (1,), inputs.dtype)
    counts = _pool(ones, np.zeros((), inputs.dtype)[()], lax.add, window_shape, strides, padding)
    return total / counts
