"""C types of the CUDA renderer, shared by the kernel source, the device prelude and the host header.

Every dtype has a memory type (how an element is stored in a buffer) and a register type (how a
value is held while computed). They differ for float16 alone: it is stored as `ember_half` (16 bits,
IEEE binary16) and held as a `float` whose value is always representable in float16 (each float16
op computes in float32 and rounds with `ember_rh`, exactly as NumPy computes float16).
"""

from __future__ import annotations

import numpy as np

MEMORY = {
    np.dtype(bool): "bool",
    np.dtype(np.int8): "signed char",
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int16): "short",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.int32): "int",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.int64): "long long",
    np.dtype(np.uint64): "unsigned long long",
    np.dtype(np.float16): "ember_half",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}

REGISTER = {**MEMORY, np.dtype(np.float16): "float"}


def memory_type(dtype) -> str:
    """The C type of one stored element of `dtype`."""
    return MEMORY[np.dtype(dtype)]


def register_type(dtype) -> str:
    """The C type a value of `dtype` is computed in (float16: float)."""
    return REGISTER[np.dtype(dtype)]
