"""Abstract values: what the tracer knows of an array (shape, dtype, weak type), never its data."""

from __future__ import annotations

import math

import numpy as np

from ember.tracer import dtypes


class ShapedArray:
    """The aval of an array: a static shape tuple, a numpy dtype and whether the type is weak."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape: tuple[int, ...], dtype, weak_type: bool = False):
        self.shape = tuple(map(int, shape))
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.weak_type = bool(weak_type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def update(self, shape=None, dtype=None, weak_type=None) -> ShapedArray:
        return ShapedArray(
            self.shape if shape is None else shape,
            self.dtype if dtype is None else dtype,
            self.weak_type if weak_type is None else weak_type,
        )

    def str_short(self) -> str:
        """jaxpr-style type: f32[16,4]."""
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def same_type(self, other: ShapedArray) -> bool:
        """Shape and dtype equal (weak types are a promotion hint and may differ)."""
        return self.shape == other.shape and self.dtype == other.dtype

    def __eq__(self, other):
        return (
            isinstance(other, ShapedArray)
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.weak_type == other.weak_type
        )

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        return f"ShapedArray({self.str_short()}{', weak' if self.weak_type else ''})"


