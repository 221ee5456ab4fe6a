"""convolve and correlate of 1-D arrays, as jnp computes them: one `conv_general_dilated` of the
longer operand with the shorter (flipped for convolve), padded for the mode."""

from __future__ import annotations

from ember.errors import ArgumentValueError, IncompatibleShapesError, user_location
from ember.numpy._core import asarray, dtype_weak, to_dtype
from ember.tracer import dtypes
from ember.tracer import prims as P

_MODES = ("full", "same", "valid")


def _conv1d(a, v, mode: str, op: str, preferred_element_type):
    """jnp's `_conv`: promote (to an inexact dtype unless `preferred_element_type` says otherwise),
    put the longer operand first, pad for `mode`, convolve; correlate's swapped operands reverse the result."""
    a, v = asarray(a), asarray(v)
    if len(a.shape) != 1 or len(v.shape) != 1:
        raise IncompatibleShapesError(f"{op}() only support 1-dimensional inputs.", user_location())
    target, weak = dtypes.result_type(dtype_weak(a), dtype_weak(v))
    if preferred_element_type is None:
        target = dtypes.default_float_for(target)
    a, v = to_dtype(a, target, weak), to_dtype(v, target, weak)
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise IncompatibleShapesError(f"{op}: inputs cannot be empty, got shapes {tuple(a.shape)} and "
                                      f"{tuple(v.shape)}.", user_location())
    if mode not in _MODES:
        raise ArgumentValueError("mode must be one of ['full', 'same', 'valid']", user_location())
    reverse = False
    if a.shape[0] < v.shape[0]:
        a, v, reverse = v, a, op == "correlate"
    if op == "convolve":
        v = P.rev(v, (0,))
    k = v.shape[0]
    padding = {"valid": (0, 0), "same": (k // 2, k - k // 2 - 1), "full": (k - 1, k - 1)}[mode]
    from ember.lax.convolution import conv_general_dilated

    out = conv_general_dilated(P.reshape(a, (1, 1, a.shape[0])), P.reshape(v, (1, 1, k)), (1,), [padding],
                               preferred_element_type=preferred_element_type)
    out = P.reshape(out, (out.shape[-1],))
    return P.rev(out, (0,)) if reverse else out


def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None):
    """The discrete convolution of two 1-D arrays (sum_j a[k - j] v[j]), as jnp.convolve."""
    return _conv1d(a, v, mode, "convolve", preferred_element_type)


def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of two 1-D arrays (sum_j a[k + j] v[j]), as jnp.correlate."""
    return _conv1d(a, v, mode, "correlate", preferred_element_type)
