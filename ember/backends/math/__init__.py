"""Vectorizable math written once: exp, expm1, log, log1p, tanh, logistic, sin, cos, pow, erf, sqrt, rsqrt
for float32 and float64, as algorithms over an emitter protocol (`emitter.Emitter`) that every renderer
implements: the LLVM renderer (`backends/llvm/mathlib.py`) emits inline IR, the NumPy emitter
(`numpy_emitter.py`) computes on arrays with the same IEEE semantics, so the same algorithm runs compiled
and, for tests and `kernel.evaluate(..., math="algorithm")`, uncompiled.

Adding a function:
1. write `def name(e, x)` (or `(e, x, y)`) in the family module it belongs to, branch-free, using only the
   emitter's operations (`e.f` is the format: its constants, `e.f is F32` for per-format algorithms);
2. add a line `"name": (arity, module.name)` to FUNCTIONS below;
3. give it an ulp budget and inputs in tests/backends/llvm/test_mathlib.py: the accuracy tests run it
   compiled, and tests/backends/test_math_numpy.py runs it under the NumPy emitter with the same budget.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ember.backends.math import erf, exp_log, hyperbolic, power, trig
from ember.backends.math.formats import F32, F64, FORMATS, Format
from ember.backends.math.numpy_emitter import NumpyEmitter

# name -> (arity, algorithm): the registry every renderer reads
FUNCTIONS: dict[str, tuple[int, Callable]] = {
    "exp": (1, exp_log.exp),
    "expm1": (1, exp_log.expm1),
    "log": (1, exp_log.log),
    "log1p": (1, exp_log.log1p),
    "tanh": (1, hyperbolic.tanh),
    "logistic": (1, hyperbolic.logistic),
    "sin": (1, trig.sin),
    "cos": (1, trig.cos),
    "pow": (2, power.pow),
    "erf": (1, erf.erf),
    "sqrt": (1, power.sqrt),
    "rsqrt": (1, power.rsqrt),
    "pow_f32_in_f64": (2, power.pow_f32_in_f64),
}
PRIVATE = ("pow_f32_in_f64",)           # helpers other algorithms call, not functions of their own
NAMES = tuple(n for n in FUNCTIONS if n not in PRIVATE)


def evaluate(name: str, *arrays) -> np.ndarray:
    """FUNCTIONS[name] on float32 or float64 arrays (broadcast together) under the NumPy emitter, bit for
    bit what compiled code computes; float16 computes in float32 and rounds once, as the compiled op."""
    if name not in FUNCTIONS:
        raise ValueError(f"the math library has no function {name!r}; it has {', '.join(NAMES)}")
    arity, algorithm = FUNCTIONS[name]
    if len(arrays) != arity:
        raise TypeError(f"{name} takes {arity} argument(s), got {len(arrays)}")
    arrays = [np.asarray(a) for a in arrays]
    dtype = np.result_type(*arrays)
    compute = np.dtype(np.float32) if dtype == np.float16 else dtype
    if compute not in FORMATS:
        raise TypeError(f"the math library computes in float32 or float64, not {dtype}")
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    flat = [np.broadcast_to(a.astype(compute), shape).ravel() for a in arrays]
    with np.errstate(all="ignore"):
        out = algorithm(NumpyEmitter(FORMATS[compute]), *flat)
    return np.broadcast_to(np.asarray(out, compute), (int(np.prod(shape)),)).reshape(shape).astype(dtype)


__all__ = ["F32", "F64", "FORMATS", "FUNCTIONS", "Format", "NAMES", "NumpyEmitter", "evaluate"]
