"""The dtype policy: supported dtypes, defaults, weakly typed Python scalars and promotion.

Follows JAX: new arrays default to float32/int32, Python scalars are *weak* (``x * 2.0`` keeps x's
dtype), and strong dtypes promote with NumPy's table. float64 is fully supported (no x64 flag).
"""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, user_location

float_ = np.dtype(np.float32)
int_ = np.dtype(np.int32)
bool_ = np.dtype(np.bool_)

SUPPORTED = tuple(
    np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64,
    )
)
_SUPPORTED_SET = frozenset(SUPPORTED)

_SHORT = {
    "bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "float32": "f32", "float64": "f64",
}


def canonicalize(dtype) -> np.dtype:
    """Return the np.dtype for `dtype`, or raise a DTypeError naming the supported ones (and the
    user's line: wrappers such as astype and convert_element_type call this before any rule runs)."""
    if dtype is float:
        return float_
    if dtype is int:
        return int_
    if dtype is bool:
        return bool_
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{dtype!r} is not a dtype", user_location()) from None
    if dt not in _SUPPORTED_SET:
        names = ", ".join(d.name for d in SUPPORTED)
        raise DTypeError(f"dtype {dt.name} is not supported by ember; use one of: {names}", user_location())
    return dt


def short_name(dtype: np.dtype) -> str:
    """The compact name used in graph text: f32, i64, bool, ..."""
    return _SHORT.get(dtype.name, dtype.name)


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f"


def is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def is_bool(dtype: np.dtype) -> bool:
    return dtype.kind == "b"


def _kind_rank(dtype: np.dtype) -> int:
    return {"b": 0, "i": 1, "u": 1, "f": 2}[dtype.kind]


_DEFAULT_FOR_RANK = {0: bool_, 1: int_, 2: float_}


def scalar_dtype(x) -> tuple[np.dtype, bool]:
    """(dtype, weak) of a Python or NumPy scalar. Python scalars are weak, NumPy scalars strong."""
    if isinstance(x, (bool, np.bool_)):
        return bool_, not isinstance(x, np.bool_)
    if isinstance(x, np.generic):
        return canonicalize(x.dtype), False
    if isinstance(x, int):
        return int_, True
    if isinstance(x, float):
        return float_, True
    if isinstance(x, complex):
        raise DTypeError("complex numbers are not supported by ember", user_location())
    raise DTypeError(f"{type(x).__name__} is not a scalar type", user_location())


def result_type(*operands: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """Promote (dtype, weak) pairs: strong dtypes by NumPy's table, weak ones only raise the kind."""
    strong = [d for d, w in operands if not w]
    weak = [d for d, w in operands if w]
    if strong:
        base = strong[0] if len(strong) == 1 else np.result_type(*strong)
        base = canonicalize(base)
        top = max((_kind_rank(d) for d in weak), default=-1)
        if top > _kind_rank(base):
            return _DEFAULT_FOR_RANK[top], False
        return base, False
    top = max(_kind_rank(d) for d in weak)
    same = [d for d in weak if _kind_rank(d) == top]
    return (same[0] if all(d == same[0] for d in same) else _DEFAULT_FOR_RANK[top]), True


def default_float_for(dtype: np.dtype) -> np.dtype:
    """The float dtype an operation like true division or sqrt produces from `dtype`."""
    return dtype if is_float(dtype) else float_
