"""The dtype policy: supported dtypes, defaults, weakly typed Python scalars and promotion.

Follows JAX: new arrays default to float32/int32, Python scalars are *weak* (``x * 2.0`` keeps x's
dtype), and strong dtypes promote on JAX's lattice (int32 with float16 is float16), as JAX does
with x64 enabled: float64 and int64 are fully supported whatever the mode. 64-bit mode
(`ember_enable_x64`, JAX's switch) changes the defaults `float_`, `int_` and `uint_` to float64, int64
and uint64: read them as attributes of this module when they are needed, never copy them.
"""

from __future__ import annotations

import functools

import numpy as np

from ember import config
from ember.errors import DTypeError, user_location

float_ = np.dtype(np.float32)
int_ = np.dtype(np.int32)
uint_ = np.dtype(np.uint32)
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
    if isinstance(dtype, np.dtype) and dtype in _SUPPORTED_SET:  # one of Ember's already (np.dtype: 150 ns)
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{dtype!r} is not a dtype", user_location()) from None
    if not dt.isnative:  # '>f4' on this machine: the values are float32s, kept in its own byte order
        dt = dt.newbyteorder("=")
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


_INT_WEAK, _FLOAT_WEAK = "i*", "f*"  # the lattice nodes of weakly typed Python ints and floats

# JAX's promotion lattice (x64 mode; no bfloat16 or complex in ember): each node and the nodes just
# above it. Two dtypes promote to the lowest node above both; unsigned and signed 64-bit meet at f*.
_LATTICE = {
    "bool": ("i*",), "i*": ("uint8", "int8"), "f*": ("float16",),
    "uint8": ("int16", "uint16"), "uint16": ("int32", "uint32"), "uint32": ("int64", "uint64"),
    "uint64": ("f*",), "int8": ("int16",), "int16": ("int32",), "int32": ("int64",), "int64": ("f*",),
    "float16": ("float32",), "float32": ("float64",), "float64": (),
}


def _upper_closure(node: str) -> frozenset[str]:
    seen, todo = {node}, [node]
    while todo:
        for up in _LATTICE[todo.pop()]:
            if up not in seen:
                seen.add(up)
                todo.append(up)
    return frozenset(seen)


_UPPER = {n: _upper_closure(n) for n in _LATTICE}


def _join(nodes) -> str:
    """The least upper bound of lattice nodes: the common upper node whose closure is all of them."""
    common = frozenset.intersection(*(_UPPER[n] for n in nodes))
    return next(n for n in common if _UPPER[n] == common)


def _node(dtype: np.dtype, weak: bool) -> str:
    if weak and dtype.kind in "iu":
        return _INT_WEAK
    if weak and dtype.kind == "f":
        return _FLOAT_WEAK
    return dtype.name


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype two strongly typed arrays promote to (jnp.promote_types with x64 enabled)."""
    return result_type((np.dtype(a), False), (np.dtype(b), False))[0]


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


def wrap_python_int(value: int, dtype: np.dtype) -> np.generic:
    """A Python int that does not fit integer `dtype`, converted with two's-complement wrap-around, as
    JAX converts a weakly typed int (uint8 array + 300 is + 44, - 1 is + 255). An int beyond 64 bits
    fits no dtype: an OverflowError naming the user's line, as JAX raises."""
    bits = 8 * dtype.itemsize
    if isinstance(value, bool) or not isinstance(value, int) or dtype.kind not in "iu" \
            or not -(1 << 63) <= value < (1 << 63):
        raise OverflowError(f"Python integer {value} does not fit in 64 bits, so it cannot wrap around to "
                            f"{dtype.name} (JAX raises too); use a float or a NumPy integer (at {user_location()})")
    wrapped = value & ((1 << bits) - 1)
    if dtype.kind == "i" and wrapped >= 1 << (bits - 1):
        wrapped -= 1 << bits
    return np.asarray(wrapped, dtype=dtype)[()]


@functools.lru_cache(maxsize=4096)  # every operation of every trace asks: a few dtypes, asked often
def result_type(*operands: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """Promote (dtype, weak) pairs on JAX's lattice, the one promotion rule of every ember operation.

    Weak values only raise the kind; all-weak operands join as if strong and stay weak. A join at i*
    or f* (bool with a Python int, ints with a Python float, int64 with uint64) is weak and takes the
    default int32 / float32, or the 64-bit type when a 64-bit operand is involved (an int64, or a
    weak float64 such as `x_i64 * 0.5`: JAX's x64 answer).
    """
    operands = [(np.dtype(d), bool(w) and d != bool_) for d, w in operands]  # bools are bools, weak or not
    all_weak = all(w for _, w in operands)
    top = _join([d.name if all_weak else _node(d, w) for d, w in operands])
    wide = any(d.itemsize == 8 for d, _ in operands)  # at i* / f* only bools, ints and weak values meet
    if top == _INT_WEAK:
        return (np.dtype(np.int64) if wide else int_), True
    if top == _FLOAT_WEAK:
        return (np.dtype(np.float64) if wide else float_), True
    return np.dtype(top), all_weak


def default_float_for(dtype: np.dtype) -> np.dtype:
    """The float dtype an operation like true division, sqrt or mean produces from `dtype`: float64
    for 64-bit integers, float32 for bools and the other integers, in either mode (jnp's
    to_inexact_dtype: 64-bit mode does not widen an int32's sqrt)."""
    if is_float(dtype):
        return dtype
    return np.dtype(np.float64) if is_int(dtype) and dtype.itemsize == 8 else np.dtype(np.float32)


def sum_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a sum or product of `dtype` gives: bools and narrower signed ints widen to the
    default int, narrower unsigned ints to the default unsigned int (jnp's promote_integers)."""
    if is_bool(dtype) or (dtype.kind == "i" and dtype.itemsize < int_.itemsize):
        return int_
    if dtype.kind == "u" and dtype.itemsize < uint_.itemsize:
        return uint_
    return dtype


def accumulation_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a reduction giving `dtype` accumulates in: float32 for float16, whose sums and
    counts overflow at 65504 (as JAX upcasts float16 reductions)."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _set_x64(on: bool) -> None:
    """Switch the defaults to 64 bits or back (config.update("jax_enable_x64", ...) calls this)."""
    global float_, int_, uint_
    float_, int_, uint_ = (np.dtype(t) for t in ((np.float64, np.int64, np.uint64) if on else
                                                 (np.float32, np.int32, np.uint32)))
    result_type.cache_clear()


config.watch("ember_enable_x64", _set_x64)
_set_x64(config.x64_enabled)
