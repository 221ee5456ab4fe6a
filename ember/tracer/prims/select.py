"""`select(pred, on_true, on_false)`: the elementwise choice behind `ember.numpy.where`.

Each operand has the result's shape or is 0-d; `pred` is bool, the branches share a dtype.
"""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.tracer.aval import ShapedArray
from ember.tracer.primitive import Primitive, batch_rules, def_impl, def_shape, def_vjp
from ember.tracer.prims.util import elementwise_batch, scalar_like, unbroadcast_scalar, zero_scalar

select_p = Primitive("select", kind="elementwise", expensive=False, no_ufunc="np.where is not a ufunc")


def select(pred, on_true, on_false):
    """`on_true` where `pred` holds, else `on_false` (Python scalars take the other branch's dtype)."""
    return select_p.bind(pred, scalar_like(on_true, on_false), scalar_like(on_false, on_true))


@def_shape(select_p)
def _select_shape(pred, t, f):
    if pred.dtype != np.dtype(bool):
        raise DTypeError(f"select: the predicate must be bool, got {pred.dtype.name}")
    if t.dtype != f.dtype:
        raise DTypeError(f"select: branch dtypes {t.dtype.name} and {f.dtype.name} differ")
    shape = ()
    for a in (pred, t, f):
        if a.shape:
            if shape and a.shape != shape:
                raise ShapeError(f"select: operand shapes {pred.shape}, {t.shape} and {f.shape} differ "
                                 "(select takes equal shapes or scalars)")
            shape = a.shape
    return ShapedArray(shape, t.dtype, t.weak_type and f.weak_type)


@def_impl(select_p)
def _select_impl(pred, t, f):
    return np.where(pred, t, f)


@def_vjp(select_p)
def _select_vjp(ct, pred, t, f, *, out, active):
    zero = zero_scalar(ct)
    ct_t = unbroadcast_scalar(select(pred, ct, zero), t) if active[1] else None
    ct_f = unbroadcast_scalar(select(pred, zero, ct), f) if active[2] else None
    return None, ct_t, ct_f


batch_rules[select_p] = elementwise_batch(select_p)
