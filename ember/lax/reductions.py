"""lax's reductions (`reduce_sum`, `reduce_max`, `reduce_min`, `reduce_prod`, `reduce_and`, `reduce_or`,
`argmax`, `argmin`) and contractions (`dot_general`, `dot`, `batch_matmul`) with lax's signatures and
checks: axes are non-negative and distinct, the result keeps the operand's dtype (no accumulation in a
wider type, as lax), and a contraction of two dtypes computes in their promoted type (or in
`preferred_element_type`), as lax's dot_general does. `precision` is accepted and has no effect: Ember
computes in the operands' own precision.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import AxisError, DTypeError, IncompatibleShapesError, user_location
from ember.lax.layout import as_operand, dtype_of
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.prims.util import shape_of


def _axes(name: str, operand, axes: Sequence[int]) -> tuple[int, ...]:
    """`axes` checked as lax checks a reduction's: within [0, rank) and distinct (ValueError otherwise)."""
    axes = tuple(int(a) for a in axes)
    nd = len(shape_of(operand))
    if any(not 0 <= a < nd for a in axes):
        raise AxisError(f"lax.{name}: reduction axes {axes} contains out-of-bounds indices for a rank-{nd} operand "
                        f"(lax takes no negative axes)", user_location())
    if len(set(axes)) != len(axes):
        raise AxisError(f"lax.{name}: duplicate value in 'axes' of reduction: {axes}", user_location())
    return axes


def reduce_sum(operand, axes: Sequence[int]):
    """The sum over `axes`, in the operand's dtype."""
    return P.reduce_sum(as_operand(operand), _axes("reduce_sum", operand, axes))


def reduce_prod(operand, axes: Sequence[int]):
    """The product over `axes`, in the operand's dtype."""
    return P.reduce_prod(as_operand(operand), _axes("reduce_prod", operand, axes))


def reduce_max(operand, axes: Sequence[int]):
    """The maximum over `axes`."""
    return P.reduce_max(as_operand(operand), _axes("reduce_max", operand, axes))


def reduce_min(operand, axes: Sequence[int]):
    """The minimum over `axes`."""
    return P.reduce_min(as_operand(operand), _axes("reduce_min", operand, axes))


def reduce_and(operand, axes: Sequence[int]):
    """Whether every entry over `axes` is true, for a bool operand (the bitwise reduction of integers is
    not implemented)."""
    return P.reduce_min(_bool_operand("reduce_and", operand), _axes("reduce_and", operand, axes))


def reduce_or(operand, axes: Sequence[int]):
    """Whether any entry over `axes` is true, for a bool operand (the bitwise reduction of integers is
    not implemented)."""
    return P.reduce_max(_bool_operand("reduce_or", operand), _axes("reduce_or", operand, axes))


def _bool_operand(name: str, operand):
    dt = dtype_of(operand)
    if dt.kind == "b":
        return as_operand(operand)
    if dt.kind in "iu":
        raise DTypeError(f"lax.{name} of integers (a bitwise reduction) is not implemented in Ember; for a bool "
                         f"result compare first (x != 0)", user_location())
    raise DTypeError(f"lax.{name}: logical reduction requires operand dtype bool or int, got {dt.name}",
                     user_location())


def argmax(operand, axis: int, index_dtype):
    """The index of the largest entry along `axis` (the first of ties), as `index_dtype`."""
    return P.argmax(as_operand(operand), _arg_axis(operand, axis), _index_dtype("argmax", index_dtype))


def argmin(operand, axis: int, index_dtype):
    """The index of the smallest entry along `axis` (the first of ties), as `index_dtype`."""
    return P.argmin(as_operand(operand), _arg_axis(operand, axis), _index_dtype("argmin", index_dtype))


def _arg_axis(operand, axis: int) -> int:
    shape = shape_of(operand)
    if not 0 <= int(axis) < len(shape):
        raise AxisError(f"Invalid axis {axis} for operand shape {shape}", user_location())
    return int(axis)


def _index_dtype(name: str, index_dtype) -> np.dtype:
    dt = dtypes.canonicalize(index_dtype)
    if dt.kind not in "iu":
        raise DTypeError(f"lax.{name}: index_dtype must be an integer type, got {dt.name}", user_location())
    return dt


# --- contractions ------------------------------------------------------------------------------------

def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """The contraction ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)): batch axes, then
    lhs's free axes, then rhs's. Operands of two dtypes compute in their promoted one; with
    `preferred_element_type` both are converted to it first."""
    lhs, rhs = as_operand(lhs), as_operand(rhs)
    a, b = dtype_of(lhs), dtype_of(rhs)
    dt = dtypes.canonicalize(preferred_element_type) if preferred_element_type is not None else (
        a if a == b else dtypes.promote_types(a, b))
    lhs = lhs if a == dt else P.convert_element_type(lhs, dt)
    rhs = rhs if b == dt else P.convert_element_type(rhs, dt)
    return P.dot_general(lhs, rhs, dimension_numbers)


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None):
    """Vector-vector, matrix-vector or matrix-matrix product; any other contraction needs
    `dimension_numbers` (then it is dot_general)."""
    if dimension_numbers is not None:
        return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)
    ls, rs = shape_of(lhs), shape_of(rhs)
    if len(ls) not in (1, 2) or len(rs) not in (1, 2) or ls[-1] != rs[0]:
        raise IncompatibleShapesError(
            "lax.dot: dimension_numbers must be specified when not performing simple un-batched matrix-matrix, "
            f"matrix-vector, or vector-vector products; got lhs.shape={ls}, rhs.shape={rs}", user_location())
    return dot_general(lhs, rhs, (((len(ls) - 1,), (0,)), ((), ())), precision, preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    """Matrix products over the leading (batch) axes: (..., m, k) x (..., k, n) -> (..., m, n)."""
    nl, nr = len(shape_of(lhs)), len(shape_of(rhs))
    if nl != nr:
        raise IncompatibleShapesError(f"Arguments to batch_matmul must have same ndim, got {nl}, {nr}", user_location())
    if nl < 2:
        raise IncompatibleShapesError(f"Arguments to batch_matmul must be at least 2D, got {nl}, {nr}", user_location())
    batch = tuple(range(nl - 2))
    return dot_general(lhs, rhs, (((nl - 1,), (nl - 2,)), (batch, batch)), precision)
