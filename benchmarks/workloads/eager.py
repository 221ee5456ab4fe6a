"""Eager calls (issue 27's fast path): one ember.numpy operation on concrete arrays outside any jit, as
users run them at a prompt or in a notebook, against NumPy's own call and JAX's eager dispatch."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import Framework, RunConfig, Unavailable
from benchmarks.harness import Case, Impl, Prepared, Row

NAME = "eager"
TITLE = "eager calls: one operation outside jit"
MEASURE_MEMORY = False
DESCRIPTION = """\
One operation called eagerly (no jit) on float32 arrays of 10 and 10**6 elements: `sin(x)`, `x + 1`,
`x @ y` (a (2, 5) matrix times a 5-vector, or 1000x1000 times 1000), `sum(x)` and `x.at[0].set(2.0)`
(NumPy: a copy, then the assignment). Ember's calls replay the first call of their signature
(ember/numpy/_eager.py), and `sum` and `.at[].set` run as native builtins once the process is warm
(ember/numpy/_native.py; timed warm); JAX's run its eager dispatch on committed device arrays. Goal
(issue 27): at most 1.5 us at 10 elements, within 3x of NumPy's call."""

SIZES = {10: ((2, 5), (5,)), 10**6: ((1000, 1000), (1000,))}


def _numpy_at_set(x):
    out = x.copy()
    out[0] = 2.0
    return out


# name -> (the operation on a module of array functions (numpy / ember.numpy / jax.numpy), NumPy's own)
OPS: dict[str, tuple[Callable, Callable]] = {
    "sin": (lambda m: lambda x, a, v: m.sin(x), lambda x, a, v: np.sin(x)),
    "x + 1": (lambda m: lambda x, a, v: x + 1.0, lambda x, a, v: x + 1.0),
    "x @ y": (lambda m: lambda x, a, v: a @ v, lambda x, a, v: a @ v),
    "sum": (lambda m: lambda x, a, v: m.sum(x), lambda x, a, v: np.sum(x)),
    ".at[].set": (lambda m: lambda x, a, v: x.at[0].set(2.0), lambda x, a, v: _numpy_at_set(x)),
}


def _eager(fw: Framework, op: Callable, args: tuple) -> Impl:
    """`op` called eagerly on `fw`'s arrays (converted once, outside the timing)."""
    if isinstance(fw, Unavailable):
        return fw.impl(None, ())
    if fw.kind == "ember":
        import ember.numpy as module

        convert = module.asarray
    else:
        module, convert = fw.jnp, fw.asarray

    def prepare() -> Prepared:
        fn, native = op(module), tuple(convert(a) for a in args)
        return Prepared(lambda: fw.block(fn(*native)))

    return Impl(f"{fw.kind} eager", fw.kind, prepare)


def cases(cfg: RunConfig) -> Iterator[Case]:
    """Each operation at each size: NumPy, Ember eager, JAX eager."""
    rng = np.random.default_rng(0)
    ember = next(fw for fw in cfg.frameworks if fw.kind == "ember")
    jax = next(fw for fw in cfg.frameworks if fw.kind == "jax")
    for n, (a_shape, v_shape) in SIZES.items():
        args = (rng.standard_normal(n).astype(np.float32), rng.standard_normal(a_shape).astype(np.float32),
                rng.standard_normal(v_shape).astype(np.float32))
        for name, (op, numpy_op) in OPS.items():
            hand = Impl("numpy", "numpy", lambda f=numpy_op, a=args: Prepared(lambda: f(*a)), baseline=True)
            yield Case(NAME, name, [hand, _eager(ember, op, args), _eager(jax, op, args)], params={"n": n})


def derived(rows: list[Row]) -> list[Derived]:
    """Nothing beyond the table (its ratio column is Ember's and JAX's time over NumPy's)."""
    return []
