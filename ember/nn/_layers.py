"""Layers as functions of their parameters, in flax.linen's layout: `conv` (Conv: inputs
(batch, spatial..., features), kernel (spatial..., in_features / groups, out_features), a bias per
output feature), and `conv_bias_act` / `dense_bias_act`, a layer followed by its activation. Written
as one convolution (or product), one broadcast add and one elementwise activation, the shape the
fusion pass turns into one kernel whose epilogue writes the activation over the product in place."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ember.numpy as jnp
from ember import lax
from ember.errors import ArgumentValueError, ShapeError, user_location

Padding = str | int | Sequence[int] | Sequence[tuple[int, int]]


def _kernel_bias(params: Any, name: str) -> tuple[Any, Any]:
    """(kernel, bias or None) from Flax's {"kernel", "bias"} dict or a (kernel, bias) / (kernel,) tuple."""
    if isinstance(params, Mapping):
        if "kernel" not in params:
            raise ArgumentValueError(f"{name}: params need a 'kernel' entry, got keys {sorted(params)}",
                                     user_location())
        return params["kernel"], params.get("bias")
    if isinstance(params, (tuple, list)) and len(params) in (1, 2):
        return params[0], params[1] if len(params) == 2 else None
    raise ArgumentValueError(f"{name}: params must be {{'kernel', 'bias'}} or (kernel, bias), got "
                             f"{type(params).__name__}", user_location())


def _per_axis(value: int | Sequence[int] | None, nd: int, what: str) -> tuple[int, ...]:
    """An int or one int per spatial axis, as Flax's Conv takes strides and dilations (None: all 1)."""
    if value is None:
        return (1,) * nd
    if isinstance(value, int):
        return (value,) * nd
    value = tuple(value)
    if len(value) != nd:
        raise ShapeError(f"conv: {what} {value} must have one entry per spatial axis ({nd})", user_location())
    return value


def _padding(padding: Padding, nd: int) -> str | tuple[tuple[int, int], ...]:
    """lax's padding from Flax's forms: a string, an int (both sides of every axis), one int per axis
    (both sides) or one (low, high) pair per axis."""
    if isinstance(padding, str):
        return padding
    if isinstance(padding, int):
        return ((padding, padding),) * nd
    pads = tuple(padding)
    if len(pads) != nd:
        raise ShapeError(f"conv: padding {pads} must have one entry per spatial axis ({nd})", user_location())
    return tuple((p, p) if isinstance(p, int) else tuple(p) for p in pads)


def _dimension_numbers(nd: int) -> lax.ConvDimensionNumbers:
    """Flax's layout as lax's dimension numbers: (batch, spatial..., features) in and out, kernel
    (spatial..., in, out)."""
    lhs = (0, nd + 1, *range(1, nd + 1))
    return lax.ConvDimensionNumbers(lhs, (nd + 1, nd, *range(nd)), lhs)


def conv(params: Any, x: Any, strides: int | Sequence[int] | None = None, padding: Padding = "SAME",
         input_dilation: int | Sequence[int] | None = None, kernel_dilation: int | Sequence[int] | None = None,
         feature_group_count: int = 1) -> Any:
    """flax.linen.Conv's forward pass: x (batch, spatial..., in) or (spatial..., in) convolved with the
    kernel (spatial..., in / groups, out), plus the bias when params have one."""
    kernel, bias = _kernel_bias(params, "conv")
    x, kernel = jnp.asarray(x), jnp.asarray(kernel)
    nd = kernel.ndim - 2
    if nd < 1:
        raise ShapeError(f"conv: the kernel needs spatial axes, in and out features, got shape {kernel.shape}",
                         user_location())
    batched = x.ndim == nd + 2
    if not batched and x.ndim != nd + 1:
        raise ShapeError(f"conv: inputs of shape {x.shape} need {nd} spatial axes (and features, after an "
                         f"optional batch axis) for a kernel of shape {kernel.shape}", user_location())
    y = lax.conv_general_dilated(x if batched else x[None], kernel, _per_axis(strides, nd, "strides"),
                                 _padding(padding, nd), _per_axis(input_dilation, nd, "input_dilation"),
                                 _per_axis(kernel_dilation, nd, "kernel_dilation"), _dimension_numbers(nd),
                                 feature_group_count)
    if bias is not None:
        y = jnp.add(y, _feature_bias(bias, kernel.shape[-1], "conv"))
    return y if batched else y[0]


def _feature_bias(bias: Any, features: int, name: str) -> Any:
    """The bias as an array of one value per output feature (it broadcasts along the last axis)."""
    bias = jnp.asarray(bias)
    if bias.shape != (features,):
        raise ShapeError(f"{name}: the bias must have shape ({features},), one value per output feature, got "
                         f"{bias.shape}", user_location())
    return bias


def conv_bias_act(params: Any, x: Any, act: Callable | None = None, **conv_options: Any) -> Any:
    """act(conv(params, x)) with conv's options (strides, padding, dilations, feature groups); no
    activation when `act` is None."""
    y = conv(params, x, **conv_options)
    return y if act is None else act(y)


def dense_bias_act(params: Any, x: Any, act: Callable | None = None) -> Any:
    """act(x @ kernel + bias), flax.linen.Dense's layout (kernel (in, out), contracted with x's last
    axis, leading axes batch); no activation when `act` is None."""
    kernel, bias = _kernel_bias(params, "dense_bias_act")
    x, kernel = jnp.asarray(x), jnp.asarray(kernel)
    if kernel.ndim != 2 or x.ndim < 1 or x.shape[-1] != kernel.shape[0]:
        raise ShapeError(f"dense_bias_act: inputs of shape {x.shape} need a last axis of the kernel's "
                         f"{kernel.shape[0] if kernel.ndim else '?'} in features, kernel (in, out) of shape "
                         f"{kernel.shape}", user_location())
    y = jnp.matmul(x, kernel)
    if bias is not None:
        y = jnp.add(y, _feature_bias(bias, kernel.shape[1], "dense_bias_act"))
    return y if act is None else act(y)
