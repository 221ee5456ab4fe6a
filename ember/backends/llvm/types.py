"""NumPy dtypes as LLVM IR types and element addresses: the conventions every renderer module shares.

In memory a bool is one byte (`i8`, as NumPy stores it) and float16 is `half`; in registers a bool is
`i1`. Pointers are opaque (`ptr`); an element's address is a GEP over the element type, never
ptrtoint/inttoptr arithmetic (which LLVM 22 can miscompile under unrolling). Indices are i64.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()

_FLOAT_TYPES = {np.dtype(np.float16): HALF, np.dtype(np.float32): FLOAT, np.dtype(np.float64): DOUBLE}


def memory_type(dtype) -> ir.Type:
    """The IR type of one element of a NumPy array of `dtype` (bool: i8)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return _FLOAT_TYPES[dtype]
    if dtype.kind in "iub":
        return ir.IntType(8 * dtype.itemsize)
    raise TypeError(f"the llvm backend has no IR type for {dtype}")


def value_type(dtype) -> ir.Type:
    """The IR type of a scalar of `dtype` in registers (bool: i1)."""
    return I1 if np.dtype(dtype).kind == "b" else memory_type(dtype)


def index(value: int) -> ir.Constant:
    return ir.Constant(I64, int(value))


def element_ptr(builder: ir.IRBuilder, ptr: ir.Value, offset: ir.Value, dtype) -> ir.Value:
    """The address of element `offset` (an i64 count of elements) of the array of `dtype` at `ptr`."""
    return builder.gep(ptr, [offset], inbounds=True, source_etype=memory_type(dtype))


def load(builder: ir.IRBuilder, ptr: ir.Value, offset: ir.Value, dtype) -> ir.Value:
    """Element `offset` of the array at `ptr` as a register value (a bool becomes i1)."""
    raw = builder.load(element_ptr(builder, ptr, offset, dtype), typ=memory_type(dtype))
    return builder.icmp_unsigned("!=", raw, ir.Constant(I8, 0)) if np.dtype(dtype).kind == "b" else raw


def store(builder: ir.IRBuilder, value: ir.Value, ptr: ir.Value, offset: ir.Value, dtype) -> None:
    """Store register `value` as element `offset` of the array at `ptr` (an i1 is stored as 0 or 1)."""
    if np.dtype(dtype).kind == "b" and value.type == I1:
        value = builder.zext(value, I8)
    builder.store(value, element_ptr(builder, ptr, offset, dtype))
