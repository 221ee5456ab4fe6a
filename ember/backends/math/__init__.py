"""Vectorizable math written once (exp and log in every base, powers and roots, trigonometric and
hyperbolic functions and their inverses, erf/erfc/erf_inv, lgamma, digamma, zeta...: FUNCTIONS lists them)
for float32 and float64, as algorithms over an emitter protocol (`emitter.Emitter`) that every renderer
implements: the LLVM renderer (`backends/llvm/mathlib.py`) emits inline IR, the NumPy emitter
(`numpy_emitter.py`) computes on arrays with the same IEEE semantics, so the same algorithm runs compiled
and, for tests and `kernel.evaluate(..., math="algorithm")`, uncompiled.

Adding a function:
1. write `def name(e, x)` (or `(e, x, y)`) in the family module it belongs to, branch-free, using only the
   emitter's operations (`e.f` is the format: its constants, `e.f is F32` for per-format algorithms);
2. add a line `"name": (arity, module.name)` to FUNCTIONS below;
3. give it an ulp budget and inputs in its family's accuracy tests (tests/backends/llvm/test_mathlib.py,
   tests/backends/test_math_{trig,explog,special}.py): they run it compiled and under the NumPy emitter with
   the same budget, and `test_every_function_has_an_ulp_budget` fails until it has one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ember.backends.math import (
    atan,
    bases,
    erf,
    exp_log,
    float_bits,
    hyperbolic,
    power,
    roots,
    sinh,
    special,
    tan,
    trig,
)
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
    "tan": (1, tan.tan),
    "atan": (1, atan.atan),
    "asin": (1, atan.asin),
    "acos": (1, atan.acos),
    "atan2": (2, atan.atan2),
    "sinh": (1, sinh.sinh),
    "cosh": (1, sinh.cosh),
    "asinh": (1, sinh.asinh),
    "acosh": (1, sinh.acosh),
    "atanh": (1, sinh.atanh),
    "exp2": (1, bases.exp2),
    "log2": (1, bases.log2),
    "log10": (1, bases.log10),
    "cbrt": (1, roots.cbrt),
    "logaddexp": (2, bases.logaddexp),
    "logaddexp2": (2, bases.logaddexp2),
    "nextafter": (2, float_bits.nextafter),
    "nextafter_f16": (2, float_bits.nextafter_f16),
    "erfc": (1, special.erfc),
    "erf_inv": (1, special.erf_inv),
    "lgamma": (1, special.lgamma),
    "digamma": (1, special.digamma),
    "zeta": (2, special.zeta),
    "polygamma": (2, special.polygamma),
}
PRIVATE = ("pow_f32_in_f64",)           # helpers other algorithms call, not functions of their own
NAMES = tuple(n for n in FUNCTIONS if n not in PRIVATE)
# float16 computes in float32 and rounds once, except where rounding would undo the result: these functions
# have a float32 version of their own for float16 values (nextafter's neighbour is float16's, not float32's)
FLOAT16_IN_FLOAT32 = {"nextafter": "nextafter_f16"}


def evaluate(name: str, *arrays) -> np.ndarray:
    """FUNCTIONS[name] on float32 or float64 arrays (broadcast together) under the NumPy emitter, bit for
    bit what compiled code computes; float16 computes in float32 (by FLOAT16_IN_FLOAT32's function where it
    has one) and rounds once, as the compiled op."""
    if name not in FUNCTIONS:
        raise ValueError(f"the math library has no function {name!r}; it has {', '.join(NAMES)}")
    if len(arrays) != FUNCTIONS[name][0]:
        raise TypeError(f"{name} takes {FUNCTIONS[name][0]} argument(s), got {len(arrays)}")
    arrays = [np.asarray(a) for a in arrays]
    dtype = np.result_type(*arrays)
    _, algorithm = FUNCTIONS[FLOAT16_IN_FLOAT32.get(name, name) if dtype == np.float16 else name]
    compute = np.dtype(np.float32) if dtype == np.float16 else dtype
    if compute not in FORMATS:
        raise TypeError(f"the math library computes in float32 or float64, not {dtype}")
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    flat = [np.broadcast_to(a.astype(compute), shape).ravel() for a in arrays]
    with np.errstate(all="ignore"):
        out = algorithm(NumpyEmitter(FORMATS[compute]), *flat)
    return np.broadcast_to(np.asarray(out, compute), (int(np.prod(shape)),)).reshape(shape).astype(dtype)


__all__ = ["F32", "F64", "FLOAT16_IN_FLOAT32", "FORMATS", "FUNCTIONS", "Format", "NAMES", "NumpyEmitter", "evaluate"]
