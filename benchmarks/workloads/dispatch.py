"""The call-overhead floor: a jitted function on a 1-element array, where the work itself is nothing; and
what a scalar argument (a learning rate, a step size) adds to a call, passed as a Python float, a NumPy
scalar or a 0-d array."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import Framework, RunConfig, Unavailable
from benchmarks.harness import Case, Impl, Prepared, Row

NAME = "dispatch"
TITLE = "call overhead on a 1-element array"
MEASURE_MEMORY = False
DESCRIPTION = """\
`x + 1` and the gradient of `sum(x * x)` on a float32 array of one element: what one call of a jitted
function costs when there is no work (argument checks, cache lookup, executable launch, output
allocation). NumPy's `x + 1` (resp. `2 * x`) is the floor.

`grad(c[0] * p)` is the gradient w.r.t. a scalar p (c: a closed-over float32 array of 10), with p passed
as a Python float (weakly typed: the result is float32), a `np.float64` scalar (typed: float64) and a
float32 0-d array: the scalar rows minus the 0-d row are what converting the scalar costs. JAX gets the
same Python float and NumPy scalar (x64 on, so the NumPy scalar stays float64) and a device array for
the 0-d row; the hand-written row returns c[0] in the result's dtype."""


def cases(cfg: RunConfig) -> Iterator[Case]:
    """forward x + 1; grad of sum(x * x); grad of c[0] * p for each way of passing the scalar p."""
    x = np.ones(1, np.float32)
    yield Case(NAME, "x + 1", [cfg.baseline.impl(lambda fw: lambda v: v + 1, (x,))]
               + [fw.impl(lambda fw: lambda v: v + 1, (x,)) for fw in cfg.peers_and_ember(forward_only=True)])
    yield Case(NAME, "grad sum(x * x)", [cfg.baseline.impl(lambda fw: lambda v: 2 * v, (x,))]
               + [fw.impl(lambda fw: fw.grad(lambda v: fw.ops.sum(v * v)), (x,)) for fw in cfg.peers_and_ember()])
    yield from _scalar_cases(cfg)


SCALARS = (("Python float", lambda: 0.5, np.float32), ("np.float64 scalar", lambda: np.float64(0.5), np.float64),
           ("0-d float32 array", lambda: np.array(0.5, np.float32), np.float32))


def _scalar_impl(fw: Framework, c: np.ndarray, make_arg, dtype, array_arg: bool) -> Impl:
    """`jit(grad(p -> c[0] * p))(p)` on framework `fw`, p given as it is (a device array where `array_arg`)."""
    if isinstance(fw, Unavailable):
        return fw.impl(None, ())

    def prepare() -> Prepared:
        cc, note = fw.asarray(c), ""
        grad = fw.grad(lambda p: cc[0] * p)
        if fw.kind == "jax" and type(make_arg()) is float:  # not np.float64, a subclass of float
            # with x64 on (the float64 workloads need it) JAX's gradient w.r.t. a weak Python float is float64;
            # ember keeps JAX's 32-bit default (float32), which JAX gives with x64 off
            grad, note = (lambda p, g=grad: g(p).astype(dtype)), "cast to float32 in the jitted function (x64 on)"
        jitted = fw.jit(grad)
        p = fw.asarray(make_arg()) if array_arg else make_arg()
        return Prepared(lambda: fw.block(jitted(p)), note=note)

    return Impl(fw.name, fw.kind, prepare)


def _scalar_cases(cfg: RunConfig) -> Iterator[Case]:
    """grad of c[0] * p with p a Python float, a NumPy float64 scalar and a 0-d array."""
    c = np.arange(1, 11, dtype=np.float32)
    fws = [fw for fw in cfg.peers_and_ember() if fw.kind in ("ember", "jax")]
    for name, make_arg, dtype in SCALARS:
        hand = cfg.baseline.impl(lambda fw, dtype=dtype: lambda p: np.asarray(c[0], dtype), (make_arg(),))
        yield Case(NAME, f"grad(c[0] * p), p: {name}",
                   [hand] + [_scalar_impl(fw, c, make_arg, dtype, name.startswith("0-d")) for fw in fws])


def derived(rows: list[Row]) -> list[Derived]:
    """Nothing beyond the table."""
    return []
