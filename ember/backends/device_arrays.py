"""Arrays that live on a GPU (CuPy's, or any with `__cuda_array_interface__`), recognized without
importing CuPy: jit takes them as arguments for the cuda backend, and checks read them back."""

from __future__ import annotations

import numpy as np

# the GPU array types seen so far (CuPy's): hit paths test `type(x) in DEVICE_TYPES`, a set lookup
DEVICE_TYPES: set = set()


def is_device_array(x) -> bool:
    """Whether `x` is a GPU array (it exposes `__cuda_array_interface__`)."""
    if type(x) in DEVICE_TYPES:
        return True
    if hasattr(type(x), "__cuda_array_interface__"):
        DEVICE_TYPES.add(type(x))
        return True
    return False


def to_host(x) -> np.ndarray:
    """`x` as a NumPy array (a GPU array copied back; CuPy refuses the implicit conversion)."""
    if is_device_array(x):
        return x.get()
    return np.asarray(x)


def byte_range(x) -> tuple[int, int]:
    """[start, end) of a C-contiguous GPU array's memory (CuPy's pointer read directly: its
    `__cuda_array_interface__` builds a dict on each access)."""
    ptr = getattr(getattr(x, "data", None), "ptr", None)
    start = ptr if isinstance(ptr, int) else x.__cuda_array_interface__["data"][0]
    return start, start + x.nbytes


def byte_span(x) -> tuple[int, int]:
    """[start, end) of the memory a GPU array of any strides may touch."""
    face = x.__cuda_array_interface__
    start, itemsize = face["data"][0], np.dtype(face["typestr"]).itemsize
    strides = face.get("strides") or [itemsize * int(np.prod(x.shape[k + 1:], dtype=np.int64))
                                      for k in range(len(x.shape))]
    lo = sum(min(0, (n - 1) * s) for n, s in zip(x.shape, strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(x.shape, strides)) + itemsize
    return start + lo, start + hi
