"""`convert_element_type`: change an array's dtype (the only primitive that does), and set whether
the result is weakly typed (as JAX's, so `int_array * 0.5` stays weak and promotes like a scalar)."""

from __future__ import annotations

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
