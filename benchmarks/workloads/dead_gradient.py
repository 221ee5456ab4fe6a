"""Seed 003: the backward pass should not cost O(n) when the forward pass merely touches a large array.

p -> c[0] * p and p -> dot(c, onehot) * p, gradient w.r.t. the scalar p, c of length n = 10**3 .. 10**7,
with c closed over (a constant of the traced function) or passed as a non-differentiated argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import Framework, RunConfig
from benchmarks.harness import Case, MismatchError, Row, check_close

NAME = "dead_gradient"
TITLE = "dead gradients: d/dp of c[0]*p and dot(c, onehot)*p (seed 003)"
MEASURE_MEMORY = False
FULL_SIZES = (10**3, 10**4, 10**5, 10**6, 10**7)
QUICK_SIZES = (10**3, 10**4, 10**5)
VARIANTS = ("c[0]*p", "dot(c, onehot)*p")
PASSING = ("closed over", "argument")
DESCRIPTION = """\
Gradient w.r.t. the scalar p (float32) of `c[0] * p` and of `dot(c, onehot) * p` (onehot: closed over,
1 at index 0), c float32 of length n = 10**3 .. 10**7 (`--quick`: up to 10**5). *closed over*: c is a
constant of the function (Ember and XLA may fold `c[0]`, or even the whole dot, at compile time;
legitimate, and that cost lands in the compile column). *argument*: c is a non-differentiated argument,
so every call reads it (checked: each implementation is called with 2c and must return twice the
gradient). The baseline is the hand-written derivative, c[0] resp. dot(c, onehot). Timed: one call of the
gradient function (forward and backward together, as users call it); the seed timed the pullback alone.
`dot(c, onehot)` with c an argument is O(n) in the forward pass for everyone (including the baseline): the
question is whether the backward pass adds another O(n) (a dense cotangent for c)."""


def model(variant: str) -> Callable:
    """p, c, onehot -> the seed's scalar."""
    if variant == VARIANTS[0]:
        return lambda ops, p, c, onehot: c[0] * p
    return lambda ops, p, c, onehot: ops.dot(c, onehot) * p


def numpy_grad(variant: str) -> Callable:
    """The hand-written derivative w.r.t. p (c passed in)."""
    if variant == VARIANTS[0]:
        return lambda p, c, onehot: np.asarray(c[0])
    return lambda p, c, onehot: np.asarray(np.dot(c, onehot))


def _reads_c(p: np.ndarray, c: np.ndarray) -> Callable[[Callable], None]:
    """A probe: the compiled gradient, called with 2c, must return twice the gradient (c is really read)."""
    def probe(call: Callable) -> None:
        try:
            check_close(call(p, 2 * c), 2 * np.asarray(call(p, c)))
        except MismatchError as e:
            raise MismatchError(f"the gradient did not follow a new c (is c baked in?): {e}") from None

    return probe


def _case(cfg: RunConfig, variant: str, passing: str, n: int, p: np.ndarray, c: np.ndarray,
          onehot: np.ndarray) -> Case:
    """One series point: every implementation of the gradient for this variant, passing and size."""
    f, hand = model(variant), numpy_grad(variant)
    series = f"{variant}, c {passing}"
    if passing == "closed over":
        def make(fw: Framework) -> Callable:
            cc, oh = fw.asarray(c), fw.asarray(onehot)
            return fw.grad(lambda q: f(fw.ops, q, cc, oh))

        def make_np(fw: Framework) -> Callable:
            return lambda q: hand(q, c, onehot)

        args, probe = (p,), None
    else:
        def make(fw: Framework) -> Callable:
            oh = fw.asarray(onehot)
            return fw.grad(lambda q, cc: f(fw.ops, q, cc, oh), argnums=0)

        def make_np(fw: Framework) -> Callable:
            return lambda q, cc: hand(q, cc, onehot)

        args, probe = (p, c), _reads_c(p, c)
    return Case(NAME, series, [cfg.baseline.impl(make_np, args, probe=probe)]
                + [fw.impl(make, args, probe=probe) for fw in cfg.peers_and_ember()],
                {"n": n}, series=series, x=n)


def cases(cfg: RunConfig) -> Iterator[Case]:
    """Every size x variant x passing (size outermost: one c in memory at a time)."""
    p = np.asarray(np.float32(1.5))
    for n in QUICK_SIZES if cfg.quick else FULL_SIZES:
        c = np.random.default_rng(n).random(n).astype(np.float32)
        onehot = np.zeros(n, np.float32)
        onehot[0] = 1.0
        for variant in VARIANTS:
            for passing in PASSING:
                yield _case(cfg, variant, passing, n, p, c, onehot)


def derived(rows: list[Row]) -> list[Derived]:
    """t(largest n) / t(smallest n) per series and implementation: 1 means no O(n) cost."""
    out = []
    for series in dict.fromkeys(r.series for r in rows if r.workload == NAME):
        mine = [r for r in rows if r.series == series and r.median_s is not None]
        if not mine:
            continue
        lo, hi = min(r.x for r in mine), max(r.x for r in mine)
        what = f"t(n={hi:.0e}) / t(n={lo:.0e}), {series}".replace("e+0", "e")
        for impl in dict.fromkeys(r.impl for r in mine):
            a = next((r for r in mine if r.impl == impl and r.x == hi), None)
            b = next((r for r in mine if r.impl == impl and r.x == lo), None)
            if a is not None and b is not None:
                out.append(Derived(NAME, what, impl, a.median_s / b.median_s))
    return out
