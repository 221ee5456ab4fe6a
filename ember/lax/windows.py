"""lax.reduce_window for its monoids: the sum (init 0), max (init -inf or the dtype's lowest) and min
(init +inf or the highest) of padded, dilated windows, each one primitive (tracer/prims/windows.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.errors import ArgumentValueError, user_location
from ember.lax.convolution import padtype_to_pads
from ember.lax.layout import as_operand
from ember.tracer import prims as P
from ember.tracer.prims.reduce import identity
from ember.tracer.prims.util import shape_of
from ember.tracer.prims.windows import FOLDS, window_out_shape
from ember.tracer.prims.windows import reduce_window as _bind
from ember.tracer.trace import Tracer

# the lax function a caller passes as `computation` -> its window primitive
_MONOIDS = {P.add: P.reduce_window_sum_p, P.maximum: P.reduce_window_max_p, P.minimum: P.reduce_window_min_p}


def reduce_window(operand, init_value, computation: Callable, window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding: str | Sequence[tuple[int, int]] = "VALID",
                  base_dilation: Sequence[int] | None = None, window_dilation: Sequence[int] | None = None):
    """Fold each window of `operand` with `computation` (lax.add, lax.max or lax.min) from
    `init_value`, its identity, as jax.lax.reduce_window does for these monoids."""
    operand = as_operand(operand)
    nd = len(window_dimensions)
    window_strides = (1,) * nd if window_strides is None else tuple(window_strides)
    base_dilation = (1,) * nd if base_dilation is None else tuple(base_dilation)
    window_dilation = (1,) * nd if window_dilation is None else tuple(window_dilation)
    prim = _MONOIDS.get(computation)
    dtype = np.dtype(operand.dtype)
    if prim is None or isinstance(init_value, Tracer) or np.ndim(init_value) != 0 or not _same(
            init_value, identity(FOLDS[prim], dtype)):
        raise ArgumentValueError(
            "ember.lax.reduce_window takes the monoids (lax.add, 0), (lax.max, -inf or the dtype's lowest) and "
            f"(lax.min, +inf or the highest) as (computation, init_value); got {computation!r} with {init_value!r}",
            user_location())
    if isinstance(padding, str):
        spans = [(k - 1) * d + 1 for k, d in zip(window_dimensions, window_dilation)]
        padding = padtype_to_pads(shape_of(operand), spans, window_strides, padding)
    return _bind(prim, operand, window_dimensions=window_dimensions, window_strides=window_strides,
                 padding=tuple(tuple(p) for p in padding), base_dilation=base_dilation,
                 window_dilation=window_dilation)


def _same(value, ident) -> bool:
    return bool(np.asarray(value) == np.asarray(ident))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding, base_dilation=None,
                              window_dilation=None) -> tuple[int, ...]:
    """The output shape of reduce_window (explicit padding pairs), as jax.lax's."""
    nd = len(window_dimensions)
    return window_out_shape(operand_shape, window_dimensions, window_strides, padding,
                            (1,) * nd if base_dilation is None else base_dilation,
                            (1,) * nd if window_dilation is None else window_dilation)
