"""Timing harness shared by every workload: cases, implementations, result checks, interleaved runs, stats.

One case (say "eam grad, n=1000") has several implementations (hand-written NumPy, Ember on each backend,
JAX, PyTorch). Each is prepared (compiled) and called once, its output is checked against the baseline,
then all of them are timed together: every repetition runs each implementation once, in a rotating order,
so slow drifts of the machine (thermal, other load) hit every implementation alike.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

# Row statuses that are not measurements.
ABSENT = "absent"
DISABLED = "disabled"
FAILED = "FAILED"
CALIBRATION_CALLS = 3  # warm calls timed after the first to size the samples


class MismatchError(AssertionError):
    """An implementation's result differs from the baseline's beyond the case's tolerance."""


@dataclass
class Prepared:
    """A compiled implementation, ready to be called with its arguments already bound."""

    run: Callable[[], Any]
    compile_s: float | None = None          # explicit lower+compile time; None: derive from the first call
    memory: Callable[[], int | None] | None = None   # peak bytes of one call, where a tool reports it
    memory_note: str = ""                    # shown instead of a number when memory is None
    subset: tuple[Callable[[], Any], float, str] | None = None  # (cheaper run, time scale, note) for slow loops
    note: str = ""
    after_first: Callable[[], str] | None = None  # run after the first call: a note to add (e.g. a cache reload)
    keep_gc: bool = False                    # time with the GC running: collecting is part of building graphs
    calibrate: bool = True                   # False: the first call is already warm and estimates the time


@dataclass
class Impl:
    """One implementation of a case: a row of the table."""

    name: str
    framework: str                           # numpy | ember | jax | torch
    prepare: Callable[[], Prepared] | None = None
    status: str | None = None               # set for absent or disabled peers: no prepare, no timing
    baseline: bool = False
    check: bool = True                       # False: a floor row, computing something else (not checked)


FLOOR = "floor"


def floor(name: str, fn: Callable[..., Any], args: tuple) -> Impl:
    """A row timing a lower bound of the case beside its implementations (one pass of np.exp over
    the input, the BLAS calls a product needs): `fn(*args)` computes something else, so it is never
    checked against the baseline; derived ratios set implementations over it."""
    return Impl(f"{FLOOR}: {name}", FLOOR, lambda: Prepared(lambda: fn(*args)), check=False)


@dataclass
class Case:
    """One measured point: a workload, a case name, parameters, and its implementations (baseline first)."""

    workload: str
    name: str
    impls: list[Impl]
    params: dict = field(default_factory=dict)
    rtol: float | None = None               # defaults by dtype of the baseline's output
    atol: float | None = None
    series: str | None = None               # plot line group (scaling workloads)
    x: float | None = None                  # plot abscissa (problem size)


@dataclass
class Row:
    """The measurement of one implementation of one case, as written to the table and the JSON."""

    workload: str
    case: str
    impl: str
    framework: str
    status: str = "ok"
    baseline: bool = False
    params: dict = field(default_factory=dict)
    median_s: float | None = None
    q1_s: float | None = None
    q3_s: float | None = None
    min_s: float | None = None
    reps: int = 0
    number: int = 0                          # calls per timed sample
    first_call_s: float | None = None
    compile_s: float | None = None
    compile_kind: str | None = None          # "lower+compile" | "first call - steady"
    memory_bytes: int | None = None
    memory_note: str = ""
    vs_baseline: float | None = None
    vs_jax: float | None = None
    max_abs_err: float | None = None
    note: str = ""
    series: str | None = None
    x: float | None = None

    def to_dict(self) -> dict:
        """A JSON-able dict."""
        return asdict(self)


@dataclass
class Settings:
    """How long and how often to time: the per-case budget is split over adaptive repetitions."""

    budget_s: float = 2.0                    # timing budget of one case (all implementations together)
    sample_s: float = 0.005                  # aim for samples at least this long (calls are batched)
    min_reps: int = 5
    max_reps: int = 200
    max_number: int = 10_000
    slow_call_s: float = 0.5                 # a loop slower than this is timed on its subset, if it has one
    measure_memory: bool = True
    calibration_calls: int = CALIBRATION_CALLS  # warm calls timed to size the samples


def log(msg: str) -> None:
    """Progress line on stderr (stdout is reserved for the table)."""
    print(msg, file=sys.stderr, flush=True)


def case_label(row: Row) -> str:
    """The case name, with the problem size when the case has one."""
    n, updates = row.params.get("n"), row.params.get("updates")
    if updates is not None:
        return f"{row.case}, {updates:,} updates"
    return f"{row.case}, n={n:,}" if n is not None else row.case


def fmt_time(s: float | None) -> str:
    """Seconds in a readable unit with three significant digits."""
    if s is None or not math.isfinite(s):
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale * 0.9995 or unit == "ns":
            v = s / scale
            return f"{v:.3g} {unit}" if v < 999.5 else f"{v:.0f} {unit}"
    raise AssertionError


# -- result checks -------------------------------------------------------------------------------------

def to_numpy_leaves(tree: Any) -> list[np.ndarray]:
    """Flatten tuples/lists/dicts of NumPy, JAX or torch arrays (or scalars) into NumPy arrays."""
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in to_numpy_leaves(tree[k])]
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in to_numpy_leaves(t)]
    if hasattr(tree, "detach"):  # torch.Tensor, without importing torch
        tree = tree.detach().cpu().numpy()
    return [np.asarray(tree)]


def default_tolerance(dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol) relative to the reference's largest magnitude, by floating-point precision."""
    if np.dtype(dtype) == np.float64:
        return 1e-9, 1e-12
    return 5e-4, 1e-6


def check_close(out: Any, ref: Any, rtol: float | None = None, atol: float | None = None) -> float:
    """Raise MismatchError unless `out` matches `ref` in structure, shape, dtype and value; return max error."""
    got, want = to_numpy_leaves(out), to_numpy_leaves(ref)
    if len(got) != len(want):
        raise MismatchError(f"{len(got)} output arrays, the baseline has {len(want)}")
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            raise MismatchError(f"output {i} has shape {g.shape}, the baseline's is {w.shape}")
        if g.dtype != w.dtype:
            raise MismatchError(f"output {i} has dtype {g.dtype}, the baseline's is {w.dtype}")
        r, a = default_tolerance(w.dtype)
        r, a = rtol if rtol is not None else r, atol if atol is not None else a
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0
        if not np.isfinite(err) or err > a + r * scale:
            raise MismatchError(f"output {i} {w.dtype}{list(w.shape)}: max |error| {err:.3g} exceeds "
                                f"{a:.1g} + {r:.1g} * max|baseline| ({scale:.3g})")
        worst = max(worst, err)
    return worst


# -- timing --------------------------------------------------------------------------------------------

def _timed_sample(fn: Callable[[], Any], number: int, keep_gc: bool = False) -> float:
    """Seconds per call of `number` back-to-back calls, with the garbage collector paused unless `keep_gc`
    (then a collection first, so no sample inherits another's garbage)."""
    gc_was = gc.isenabled()
    if keep_gc:
        gc.collect()
    else:
        gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - t0) / number
    finally:
        if gc_was:
            gc.enable()


@dataclass
class _Live:
    """An implementation during measurement."""

    row: Row
    fn: Callable[[], Any]
    scale: float = 1.0
    t_est: float = 0.0
    number: int = 1
    samples: list[float] = field(default_factory=list)
    keep_gc: bool = False


def _prepare(case: Case, impl: Impl, row: Row, ref: Any, settings: Settings) -> tuple[_Live | None, Any]:
    """Compile, call once (timed), check against the reference; return the live entry and the output."""
    try:
        prepared = impl.prepare()
        t0 = time.perf_counter()
        out = prepared.run()
        row.first_call_s = time.perf_counter() - t0
        if ref is not None and impl.check:
            row.max_abs_err = check_close(out, ref, case.rtol, case.atol)
        t_est = row.first_call_s
        if prepared.calibrate:
            t_est = _warm_estimate(prepared.run, settings)
    except Exception as e:  # any failure becomes a loud FAILED row
        row.status = f"{FAILED}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        log(f"  !!! {impl.name}: {row.status}")
        return None, None
    if prepared.compile_s is not None:
        row.compile_s, row.compile_kind = prepared.compile_s, "lower+compile"
    else:
        row.compile_kind = "first call - steady"  # compile_s is filled in from the median
    row.note = prepared.note
    if prepared.after_first is not None:
        try:
            row.note = "; ".join(n for n in (row.note, prepared.after_first()) if n)
        except Exception as e:  # an extra measurement failing is reported, not fatal
            row.note = "; ".join(n for n in (row.note, f"after first call: {type(e).__name__}: {e}") if n)[:300]
    live = _Live(row, prepared.run, t_est=t_est, keep_gc=prepared.keep_gc)
    if prepared.subset is not None and t_est > settings.slow_call_s:
        fn, scale, note = prepared.subset
        live.fn, live.scale = fn, scale
        t0 = time.perf_counter()
        fn()
        live.t_est = time.perf_counter() - t0
        row.note = "; ".join(n for n in (row.note, note) if n)
    if settings.measure_memory and prepared.memory is not None:
        try:
            row.memory_bytes = prepared.memory()
        except Exception as e:  # a memory tool failing is reported, not fatal
            row.memory_note = f"error: {type(e).__name__}"
    if row.memory_bytes is None and not row.memory_note:
        row.memory_note = prepared.memory_note
    return live, out


def _warm_estimate(run: Callable[[], Any], settings: Settings) -> float:
    """Seconds per warm call: the fastest of up to `calibration_calls` calls after the first (a call that
    warms a cache on its second run, as an eager replay records then, would otherwise size the samples
    for the recording: a few calls per sample, whose cold start then inflates the median)."""
    best = math.inf
    for _ in range(max(settings.calibration_calls, 1)):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        if best > settings.slow_call_s:   # a slow call is its own estimate: no more calls spent on it
            break
    return best


def measure_case(case: Case, settings: Settings) -> list[Row]:
    """Prepare and check every implementation of `case`, then time them interleaved; one Row each."""
    rows: list[Row] = []
    live: list[_Live] = []
    ref = None
    for impl in case.impls:
        row = Row(case.workload, case.name, impl.name, impl.framework, baseline=impl.baseline,
                  params=dict(case.params), series=case.series, x=case.x)
        rows.append(row)
        if impl.status is not None:
            row.status = impl.status
            continue
        log(f"  preparing {impl.name} ...")
        entry, out = _prepare(case, impl, row, ref, settings)
        if impl.baseline:
            if entry is None:
                raise RuntimeError(f"the baseline of {case.workload}/{case.name} failed: {row.status}")
            ref = out
        if entry is not None:
            live.append(entry)
    if not live:
        return rows
    for e in live:
        e.number = int(min(settings.max_number, max(1, math.ceil(settings.sample_s / max(e.t_est, 1e-9)))))
    round_cost = sum(e.number * e.t_est for e in live)
    reps = int(min(settings.max_reps, max(settings.min_reps, settings.budget_s // max(round_cost, 1e-9))))
    for r in range(reps):
        k = r % len(live)
        for e in live[k:] + live[:k]:        # rotate the order: no implementation always runs first
            e.samples.append(_timed_sample(e.fn, e.number, e.keep_gc) * e.scale)
    for e in live:
        _summarize(e)
    _ratios(rows)
    for row in rows:
        log(f"  {row.impl:<32} {_progress(row)}")
    return rows


def _summarize(e: _Live) -> None:
    row, s = e.row, np.asarray(e.samples)
    row.median_s = float(np.median(s))
    row.q1_s, row.q3_s = (float(q) for q in np.percentile(s, [25, 75]))
    row.min_s = float(s.min())
    row.reps, row.number = len(s), e.number
    if row.compile_kind == "first call - steady":
        row.compile_s = max(0.0, row.first_call_s - row.median_s)


def _ratios(rows: list[Row]) -> None:
    base = next((r for r in rows if r.median_s is not None and r.baseline), None)
    jax = next((r for r in rows if r.median_s is not None and r.framework == "jax"), None)
    for r in rows:
        if r.median_s is None:
            continue
        if base is not None:
            r.vs_baseline = r.median_s / base.median_s
        if jax is not None:
            r.vs_jax = r.median_s / jax.median_s


def _progress(row: Row) -> str:
    if row.median_s is None:
        return row.status
    comp = f", compile {fmt_time(row.compile_s)}" if row.compile_s else ""
    return f"median {fmt_time(row.median_s)} (IQR {fmt_time(row.q3_s - row.q1_s)}, {row.reps} reps){comp}"


def run_cases(cases: Iterable[Case], settings: Settings, total: int | None = None) -> Iterator[Row]:
    """Measure each case in turn (cases are generated lazily, so big inputs live one case at a time)."""
    for i, case in enumerate(cases, 1):
        params = ", ".join(f"{k}={v}" for k, v in case.params.items())
        log(f"[{case.workload} {i}{f'/{total}' if total else ''}] {case.name}" + (f" ({params})" if params else ""))
        yield from measure_case(case, settings)
