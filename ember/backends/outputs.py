"""Checks of caller-provided output arrays (`out=` of a compiled call), shared by every backend.

An executable given `out` writes its results into those arrays and returns them, so each must be
exactly what the backend would have allocated: the output's shape and dtype, C-contiguous, aligned
and writeable, and sharing memory with no input and no other `out` array (a kernel may read an
input after writing an output). The errors are the classes NumPy's ufunc `out=` raises: TypeError
for a wrong type or dtype, ValueError for a wrong shape, layout or overlap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.backends.device_arrays import is_device_array
from ember.backends.device_arrays import overlap as device_overlap
from ember.errors import ArgumentError, ArgumentValueError, user_location
from ember.tracer.aval import ShapedArray


def check_out(outs: Sequence, avals: Sequence[ShapedArray], inputs: Sequence,
              names: Sequence[str] | None = None) -> list[np.ndarray]:
    """`outs` (one array per output, flat) as a list, after checking each against its output's aval
    and against `inputs` and each other; `names` are the user's names of the outs (`out[k]` else)."""
    outs = list(outs)
    if len(outs) != len(avals):
        raise ArgumentValueError(f"out has {len(outs)} arrays, but the function has {len(avals)} outputs: pass one "
                                 "array per output", user_location())
    for k, (o, aval) in enumerate(zip(outs, avals)):
        if not _fits(o, aval):
            raise _out_error(_name(names, k), o, aval)
    for k, o in enumerate(outs):
        if not o.size:
            continue
        for i, x in enumerate(inputs):
            if (isinstance(x, np.ndarray) or is_device_array(x)) and _overlap(o, x):
                raise ArgumentValueError(f"{_name(names, k)} shares memory with input {i} of the call (its arrays, "
                                         "flat); the results are written while the inputs are read: pass a separate "
                                         "array", user_location())
        for j in range(k):
            if _overlap(o, outs[j]):
                raise ArgumentValueError(f"{_name(names, k)} shares memory with another out array; pass one separate "
                                         "array per output", user_location())
    return outs


def _name(names: Sequence[str] | None, k: int) -> str:
    return names[k] if names else f"out[{k}]"


def _fits(o, aval: ShapedArray) -> bool:
    """Whether `o` is what the backend would have allocated for `aval` (checked cheaply: every call)."""
    if is_device_array(o):  # a GPU array (the cuda backend's outputs)
        return o.dtype == aval.dtype and o.shape == aval.shape and o.flags.c_contiguous
    if type(o) is not np.ndarray and (not isinstance(o, np.ndarray) or isinstance(o, np.ma.MaskedArray)):
        return False
    flags = o.flags
    return (o.dtype == aval.dtype and o.shape == aval.shape and flags.writeable and flags.c_contiguous
            and flags.aligned)


def _out_error(name: str, o, aval: ShapedArray) -> Exception:
    """What is wrong with `o` as the out array of an output `aval`, and what to pass instead."""
    device = is_device_array(o)
    hint = (f"pass a C-contiguous {aval.dtype.name} GPU array of shape {aval.shape}, e.g. "
            f"cupy.empty({aval.shape}, cupy.{aval.dtype.name})" if device else
            f"pass a C-contiguous, aligned, writeable {aval.dtype.name} ndarray of shape {aval.shape}, e.g. "
            f"np.empty({aval.shape}, np.{aval.dtype.name})")
    if not device and (not isinstance(o, np.ndarray) or isinstance(o, np.ma.MaskedArray)):
        return ArgumentError(f"{name} is a {type(o).__name__}, not an ndarray: {hint}", user_location())
    if o.dtype != aval.dtype:
        return ArgumentError(f"{name} has dtype {o.dtype}, but output {aval.str_short()} has dtype "
                             f"{aval.dtype.name} (no casting): {hint}", user_location())
    if o.shape != aval.shape:
        return ArgumentValueError(f"{name} has shape {o.shape}, but output {aval.str_short()} has shape "
                                  f"{aval.shape}: {hint}", user_location())
    flags = o.flags
    if device:
        return ArgumentValueError(f"{name} is not C-contiguous: {hint}", user_location())
    what = "read-only" if not flags.writeable else "not C-contiguous" if not flags.c_contiguous else "not aligned"
    return ArgumentValueError(f"{name} is {what}: {hint}", user_location())


def _overlap(a, b) -> bool:
    if is_device_array(a) or is_device_array(b):
        return device_overlap(a, b)
    return b.size > 0 and np.may_share_memory(a, b) and np.shares_memory(a, b)
