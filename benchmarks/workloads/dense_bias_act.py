"""Seed 004: gradient of sum(tanh(w @ x + b)^2) w.r.t. w, x and b: time and peak memory.

The seed's point is memory: a fused dense + bias + activation can overwrite w @ x in place, because tanh's
derivative can be written in terms of its output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from benchmarks.derived import Derived, over_floor
from benchmarks.frameworks import Ember, Framework, Jax, Ops, RunConfig
from benchmarks.harness import Case, Row, floor, log
from benchmarks.report import Table, fmt_bytes, fmt_ratio

NAME = "dense_bias_act"
TITLE = "dense + bias + tanh gradient, time and memory (seed 004)"
MEASURE_MEMORY = True
FULL_SIZES = (100, 1024)
QUICK_SIZES = (100, 256)
DESCRIPTION = """\
`sum(tanh(w @ x + b[:, None])**2)`, gradient w.r.t. (w, x, b), w and x n x n, b of length n, float32,
n = 100 and 1024 (`--quick`: 100 and 256). Peak memory is the memory one call allocates beyond its
inputs, where a tool reports it: for Ember the memory plan (`Lowered.memory()`: `peak_bytes` of the
intermediates + `output_bytes`), for JAX the compiled executable's `memory_analysis()` (output + temp
bytes), for NumPy `tracemalloc`'s peak during one call. PyTorch reports no CPU allocator statistics.
The table after the timings sets Ember's plan for the optimized and the `optimize=False` graph beside
JAX's, like for like: intermediates against JAX's temp bytes, outputs + intermediates against JAX's
output + temp bytes."""


def loss(ops: Ops, w: Any, x: Any, b: Any) -> Any:
    """The seed's scalar: sum of the squared activations."""
    return ops.sum(ops.tanh(w @ x + b[:, None]) ** 2)


def numpy_grad(w: np.ndarray, x: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """By hand: y = tanh(z), dL/dz = 2 y (1 - y^2); dw = dz x^T, dx = w^T dz, db = row sums of dz."""
    y = np.tanh(w @ x + b[:, None])
    gz = 2.0 * y * (1.0 - y * y)
    return gz @ x.T, w.T @ gz, gz.sum(axis=1)


def inputs(n: int, dtype: type = np.float32, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w scaled by 1/sqrt(n) so tanh is not saturated; x and b standard normal."""
    rng = np.random.default_rng(seed)
    return ((rng.standard_normal((n, n)) / np.sqrt(n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype),
            rng.standard_normal(n).astype(dtype))


def cases(cfg: RunConfig) -> Iterator[Case]:
    """One case per size; memory measured for every implementation that has a tool for it."""
    for n in QUICK_SIZES if cfg.quick else FULL_SIZES:
        args = inputs(n)
        yield Case(NAME, "grad w, x, b", [cfg.baseline.impl(lambda fw: numpy_grad, args, memory=True)]
                   + [fw.impl(lambda fw: fw.grad(lambda w, x, b: loss(fw.ops, w, x, b), argnums=(0, 1, 2)), args,
                              memory=True) for fw in cfg.peers_and_ember()]
                   + [floor("three sgemm calls (SciPy's BLAS)", three_sgemm, args)],
                   {"n": n})


def three_sgemm(w: np.ndarray, x: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """The gradient's three n x n x n products (w @ x forward; g @ x^T and w^T @ g backward) as the
    SciPy sgemm calls the llvm backend makes, on transposed views (no copies): its floor."""
    from scipy.linalg import blas

    a, c = x.T, w.T  # Fortran-ordered views of the C-ordered inputs
    return blas.sgemm(1.0, a, c), blas.sgemm(1.0, a, c, trans_a=1), blas.sgemm(1.0, a, c, trans_b=1)


def derived(rows: list[Row]) -> list[Derived]:
    """Each implementation over the three sgemm calls (the issue's goal at n = 1024: within 1.05x)."""
    return over_floor(NAME, rows)


MEMORY_COLUMNS = ["function", "n", "bytes", "{ember} optimized", "{ember} optimize=False",
                  "optimized / optimize=False", "jax.jit", "{ember} optimized / JAX"]
MEASURES = (("intermediates", "intermediates (JAX: temp)"),
            ("outputs + intermediates", "outputs + intermediates (JAX: output + temp)"))
# compiled: the bytes a call works in beyond inputs and outputs, Ember's plan's buffers and kernel scratch
ARENA = ("arena", "arena: buffers + kernel scratch (JAX: temp)")


def functions(fw: Framework) -> list[tuple[str, Callable]]:
    """The functions whose memory is compared: the gradient the timings run, and the forward loss."""
    return [("grad w, x, b", fw.grad(lambda w, x, b: loss(fw.ops, w, x, b), argnums=(0, 1, 2))),
            ("forward", lambda w, x, b: loss(fw.ops, w, x, b))]


def ember_bytes(fw: Ember, fn: Callable, args: tuple, optimize: bool, arena: bool = False) -> dict[str, int | None]:
    """The plan's intermediates (`peak_bytes`) and outputs + intermediates; with `arena`, compiled, also
    the arena a call works in (`arena_bytes`: None where the backend does not say)."""
    lowered = fw.lower(fn, args, optimize)
    if arena:
        lowered.compile()
    report = lowered.memory()
    return {"intermediates": report.peak_bytes, "outputs + intermediates": report.peak_bytes + report.output_bytes,
            "arena": report.arena_bytes}


def jax_bytes(fw: Jax, fn: Callable, args: tuple) -> dict[str, int]:
    """XLA's temp bytes, and output + temp bytes (less outputs aliasing donated inputs: none here)."""
    m = fw.memory_analysis(fn, args)
    return {"intermediates": m.temp_size_in_bytes, "arena": m.temp_size_in_bytes,
            "outputs + intermediates": m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes}


def _measured(table: Table, what: str, get: Callable[..., dict[str, int]], *args: Any) -> dict[str, int] | None:
    """`get(*args)`, or None with the failure recorded in the table (the run then exits 1)."""
    try:
        return get(*args)
    except Exception as e:  # reported loudly, the other entries still run
        table.errors.append(f"{what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
        log(f"  !!! {table.errors[-1]}")
        return None


def _ratio(num: int | None, den: int | None) -> float | None:
    return num / den if num is not None and den else None


def add_memory_rows(table: Table, ember: Ember, jax: Framework, functions, args: tuple, where: str, size: str,
                    params: dict, arena: bool = False) -> None:
    """One size's rows and records of a memory table: each of `functions(framework)`'s (label, fn) on
    `args`, Ember's plan optimized and not beside JAX's analysis (or JAX's status), for each measure;
    with `arena`, also each compiled function's arena against XLA's temp bytes."""
    jax_ok = isinstance(jax, Jax)
    for (label, fn), (_, jfn) in zip(functions(ember), functions(jax) if jax_ok else functions(ember)):
        opt = _measured(table, f"{label}, {where}, optimized", ember_bytes, ember, fn, args, True, arena)
        naive = _measured(table, f"{label}, {where}, optimize=False", ember_bytes, ember, fn, args, False, arena)
        peer = _measured(table, f"{label}, {where}, jax.jit", jax_bytes, jax, jfn, args) if jax_ok else None
        for key, measure in MEASURES + ((ARENA,) if arena else ()):
            o, u, j = ((d or {}).get(key) for d in (opt, naive, peer))
            table.rows.append([label, size, measure, fmt_bytes(o), fmt_bytes(u), fmt_ratio(_ratio(o, u)),
                               fmt_bytes(j) if jax_ok else jax.status, fmt_ratio(_ratio(o, j))])
            table.records.append({"function": label, **params, "bytes": key, "ember_optimized": o,
                                  "ember_unoptimized": u, "jax": j, "optimized_over_unoptimized": _ratio(o, u),
                                  "optimized_over_jax": _ratio(o, j)})


def memory_table(cfg: RunConfig, ember: Ember, jax: Framework) -> Table:
    """Ember's memory plan, optimized and not, beside JAX's memory analysis, per function and size."""
    table = Table(f"Memory: {ember.name}'s plan (`lower(...).memory()`) beside JAX's `memory_analysis()`",
                  [c.format(ember=ember.name) for c in MEMORY_COLUMNS])
    for n in QUICK_SIZES if cfg.quick else FULL_SIZES:
        log(f"  memory plans, n={n} ...")
        add_memory_rows(table, ember, jax, functions, inputs(n), f"n={n}", f"{n:,}", {"n": n})
    table.note = ("Bytes beyond the inputs. *intermediates*: Ember's `memory().peak_bytes`, the most bytes of "
                  "intermediate values live at once under the plan, against XLA's `temp_size_in_bytes`; "
                  "*outputs + intermediates*: `peak_bytes + output_bytes` against XLA's `output_size_in_bytes + "
                  "temp_size_in_bytes`. *optimize=False* is the naive plan (every value its own buffer, freed "
                  "after its last use).")
    return table


def tables(cfg: RunConfig) -> list[Table]:
    """The memory table, on the first Ember backend (the plan does not depend on the backend)."""
    ember = next(fw for fw in cfg.frameworks if isinstance(fw, Ember))
    jax = next(fw for fw in cfg.frameworks if fw.kind == "jax")
    return [memory_table(cfg, ember, jax)]
