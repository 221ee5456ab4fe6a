"""`convert_element_type`: change an array's dtype (the only primitive that does)."""

from __future__ import annotations

from ember.tracer import dtypes
from ember.tracer.primitive import Primitive, batch_rules, def_impl, def_shape, def_vjp
from ember.tracer.prims._util import elementwise_batch, unchanged

convert_element_type_p = Primitive("convert_element_type", kind="elementwise")


def convert_element_type(x, new_dtype):
    """`x` as `new_dtype` (float -> int truncates toward zero, as a C cast)."""
    new_dtype = dtypes.canonicalize(new_dtype)
    if getattr(x, "dtype", None) == new_dtype:
        return unchanged(x)
    return convert_element_type_p.bind(x, new_dtype=new_dtype)


@def_shape(convert_element_type_p)
def _convert_shape(x, *, new_dtype):
    return x.update(dtype=dtypes.canonicalize(new_dtype), weak_type=False)


@def_impl(convert_element_type_p)
def _convert_impl(x, *, new_dtype):
    return x.astype(new_dtype)


@def_vjp(convert_element_type_p)
def _convert_vjp(ct, x, *, out, active, new_dtype):
    x_dtype = x.dtype
    if not active[0] or not (dtypes.is_float(x_dtype) and dtypes.is_float(new_dtype)):
        return (None,)
    return (convert_element_type(ct, x_dtype),)


batch_rules[convert_element_type_p] = elementwise_batch(convert_element_type_p)
