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


def byte_span(x) -> tuple[int, int]:
    """[start, end) of the memory a GPU array of any strides may touch (CuPy's pointer and strides read
    directly: its `__cuda_array_interface__` builds a dict on each access)."""
    ptr = getattr(getattr(x, "data", None), "ptr", None)
    if isinstance(ptr, int) and getattr(x, "_c_contiguous", False):  # CuPy's flag, read without a Flags object
        return ptr, ptr + x.nbytes
    strides = getattr(x, "strides", None) if isinstance(ptr, int) else None
    itemsize = np.dtype(x.dtype).itemsize
    if strides is None:
        face = x.__cuda_array_interface__
        ptr, strides = face["data"][0], face.get("strides")
    if strides is None:  # C-contiguous
        strides = [itemsize * int(np.prod(x.shape[k + 1:], dtype=np.int64)) for k in range(len(x.shape))]
    lo = sum(min(0, (n - 1) * s) for n, s in zip(x.shape, strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(x.shape, strides)) + itemsize
    return ptr + lo, ptr + hi


def overlap(a, b) -> bool:
    """Whether GPU arrays `a` and `b`, both holding elements, may share memory (their byte spans meet);
    False when either is not a GPU array."""
    if not (is_device_array(a) and is_device_array(b)) or not a.size or not b.size:
        return False
    (s, e), (t, f) = byte_span(a), byte_span(b)
    return s < f and t < e
