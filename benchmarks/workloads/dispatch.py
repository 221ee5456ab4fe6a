"""The call-overhead floor: a jitted function on a 1-element array, where the work itself is nothing."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import RunConfig
from benchmarks.harness import Case, Row

NAME = "dispatch"
TITLE = "call overhead on a 1-element array"
MEASURE_MEMORY = False
DESCRIPTION = """\
`x + 1` and the gradient of `sum(x * x)` on a float32 array of one element: what one call of a jitted
function costs when there is no work (argument checks, cache lookup, executable launch, output
allocation). NumPy's `x + 1` (resp. `2 * x`) is the floor."""


def cases(cfg: RunConfig) -> Iterator[Case]:
    """forward x + 1; grad of sum(x * x)."""
    x = np.ones(1, np.float32)
    yield Case(NAME, "x + 1", [cfg.baseline.impl(lambda fw: lambda v: v + 1, (x,))]
               + [fw.impl(lambda fw: lambda v: v + 1, (x,)) for fw in cfg.peers_and_ember(forward_only=True)])
    yield Case(NAME, "grad sum(x * x)", [cfg.baseline.impl(lambda fw: lambda v: 2 * v, (x,))]
               + [fw.impl(lambda fw: fw.grad(lambda v: fw.ops.sum(v * v)), (x,)) for fw in cfg.peers_and_ember()])


def derived(rows: list[Row]) -> list[Derived]:
    """Nothing beyond the table."""
    return []
