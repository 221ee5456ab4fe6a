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
    names = names or [f"out[{k}]" for k in range(len(outs))]
    for name, o, aval in zip(names, outs, avals):
        _check_one(name, o, aval)
    for k, o in enumerate(outs):
        if o.size == 0:
            continue
        shared = next((i for i, x in enumerate(inputs) if isinstance(x, np.ndarray) and _overlap(o, x)), None)
        if shared is not None:
            raise ArgumentValueError(f"{names[k]} shares memory with input {shared} of the call (its arrays, flat); "
                                     "the results are written while the inputs are read: pass a separate array",
                                     user_location())
        if any(_overlap(o, other) for other in outs[:k]):
            raise ArgumentValueError(f"{names[k]} shares memory with another out array; pass one separate array per "
                                     "output", user_location())
    return outs


def _check_one(name: str, o, aval: ShapedArray) -> None:
    want = f"a C-contiguous, aligned, writeable {aval.dtype.name} ndarray of shape {aval.shape}"
    hint = f"pass {want}, e.g. np.empty({aval.shape}, np.{aval.dtype.name})"
    if not isinstance(o, np.ndarray) or isinstance(o, np.ma.MaskedArray):
        raise ArgumentError(f"{name} is a {type(o).__name__}, not an ndarray: {hint}", user_location())
    if o.dtype != aval.dtype:
        raise ArgumentError(f"{name} has dtype {o.dtype}, but output {aval.str_short()} has dtype {aval.dtype.name} "
                            f"(no casting): {hint}", user_location())
    if o.shape != aval.shape:
        raise ArgumentValueError(f"{name} has shape {o.shape}, but output {aval.str_short()} has shape "
                                 f"{aval.shape}: {hint}", user_location())
    flags = o.flags
    for ok, what in ((flags.writeable, "read-only"), (flags.c_contiguous, "not C-contiguous"),
                     (flags.aligned, "not aligned")):
        if not ok:
            raise ArgumentValueError(f"{name} is {what}: {hint}", user_location())


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    return b.size > 0 and np.may_share_memory(a, b) and np.shares_memory(a, b)
