"""`convert_element_type`: change an array's dtype by value, and set whether the result is weakly
typed (as JAX's, so `int_array * 0.5` stays weak and promotes like a scalar); `bitcast_convert_type`:
read an array's bits as another dtype of the same width (random bits become floats this way)."""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError
from ember.tracer import dtypes
from ember.tracer.primitive import Primitive, batch_rules, def_impl, def_shape, def_vjp
from ember.tracer.prims.util import elementwise_batch, unchanged

convert_element_type_p = Primitive("convert_element_type", kind="elementwise", expensive=False,
                                   no_ufunc="a cast (astype), not a ufunc")


def convert_element_type(x, new_dtype, weak_type: bool = False):
    """`x` as `new_dtype`, weakly typed if `weak_type` (float -> int truncates toward zero, as a C
    cast). A traced value already of that dtype and weak type is returned as is."""
    new_dtype = dtypes.canonicalize(new_dtype)
    weak_type = bool(weak_type)
    # A NumPy array carries no weak type (eager values are strong), so only its dtype can change.
    if getattr(x, "dtype", None) == new_dtype and getattr(x, "weak_type", weak_type) == weak_type:
        return unchanged(x)
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)


@def_shape(convert_element_type_p)
def _convert_shape(x, *, new_dtype, weak_type=False):
    return x.update(dtype=dtypes.canonicalize(new_dtype), weak_type=weak_type)


@def_impl(convert_element_type_p)
def _convert_impl(x, *, new_dtype, weak_type=False):
    return x.astype(new_dtype)


@def_vjp(convert_element_type_p)
def _convert_vjp(ct, x, *, out, active, new_dtype, weak_type=False):
    """The cotangent converted back to `x`'s dtype and weak type (only between float dtypes: no
    gradient flows through a conversion from or to an integer or bool)."""
    x_dtype = x.dtype
    if not active[0] or not (dtypes.is_float(x_dtype) and dtypes.is_float(new_dtype)):
        return (None,)
    return (convert_element_type(ct, x_dtype, getattr(x, "weak_type", False)),)


batch_rules[convert_element_type_p] = elementwise_batch(convert_element_type_p)


bitcast_convert_type_p = Primitive("bitcast_convert_type", kind="elementwise", expensive=False,
                                   no_ufunc="a reinterpretation of the bits (ndarray.view), not a ufunc")


def bitcast_convert_type(x, new_dtype):
    """`x`'s bits read as `new_dtype`, of the same width (uint32 <-> float32 <-> int32, ...), as
    lax.bitcast_convert_type. A traced value already of that dtype is returned as is."""
    new_dtype = dtypes.canonicalize(new_dtype)
    if getattr(x, "dtype", None) == new_dtype and not getattr(x, "weak_type", False):
        return unchanged(x)
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype)


@def_shape(bitcast_convert_type_p)
def _bitcast_shape(x, *, new_dtype):
    """Same width only; bool only to bool, as JAX (which adds or drops a trailing axis between widths:
    not supported here, so say so)."""
    old, new = x.dtype, np.dtype(new_dtype)
    if old == new:
        return x.update(weak_type=False)
    if old.kind == "b" or new.kind == "b":
        raise DTypeError(f"bitcast_convert_type does not support bool unless the operand and destination "
                         f"types match; got operand dtype={old.name}, new_dtype={new.name}")
    if old.itemsize != new.itemsize:
        raise DTypeError(f"bitcast_convert_type between dtypes of different widths ({old.name} to "
                         f"{new.name}) is not supported: bitcast to a dtype of {8 * old.itemsize} bits")
    return x.update(dtype=new, weak_type=False)


@def_impl(bitcast_convert_type_p)
def _bitcast_impl(x, *, new_dtype):
    return np.array(x).view(new_dtype)  # a copy: the result never aliases the operand


@def_vjp(bitcast_convert_type_p)
def _bitcast_vjp(ct, x, *, out, active, new_dtype):
    """No gradient through a reinterpretation of bits (JAX's is zero)."""
    return (None,)


batch_rules[bitcast_convert_type_p] = elementwise_batch(bitcast_convert_type_p)
