"""Turn measured rows into the Markdown table, the JSON file and the scaling plots."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field

from benchmarks.derived import Derived
from benchmarks.harness import FAILED, Row, case_label, fmt_time

COLUMNS = ["case", "implementation", "median", "IQR", "min", "compile/trace", "× numpy", "× JAX",
           "reps×calls", "notes"]
MEMORY_COLUMN = "peak memory"

METHODOLOGY = """\
**How to read this.** *median*, *IQR* (interquartile range) and *min* are per call, over the timed
samples (each sample is *calls* back-to-back calls, with the GC paused unless the workload says
otherwise). All implementations of a case are timed interleaved: each repetition runs every
implementation once, in a rotating order. Before any timing, each result is checked against the
hand-written NumPy baseline (float32: 5e-4, float64: 1e-9, relative to the baseline's largest
magnitude). *compile/trace* is the first call minus the steady-state median: tracing, optimizing and
compiling for `ember.jit` and `jax.jit`, warm-up for eager PyTorch. *× numpy* and *× JAX* are median /
median of the baseline resp. `jax.jit` in the same case (> 1: slower). JAX runs on the CPU (`jax.jit`,
float64 enabled); PyTorch eager uses `torch.autograd.grad`, `torch.func` its `grad`/`vmap`. Absent or
disabled peers are listed as such, never estimated."""


@dataclass
class Table:
    """A workload's extra table (not timings, e.g. the memory plans beside JAX's): Markdown cells per row,
    and the same numbers as records for the JSON. `errors` are failures the run must exit 1 for."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    note: str = ""
    errors: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        """The title in bold, the table, then the note."""
        lines = [f"**{self.title}**", "", "| " + " | ".join(self.columns) + " |",
                 "|" + "|".join("---" for _ in self.columns) + "|"]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines + (["", self.note] if self.note else []))

    def to_dict(self) -> dict:
        """A JSON-able dict."""
        return asdict(self)


@dataclass
class Section:
    """One workload's rows, with what the table heading and the plots need to know about it."""

    name: str
    title: str
    description: str
    measure_memory: bool
    rows: list[Row] = field(default_factory=list)
    hide_columns: tuple[str, ...] = ()     # columns that mean nothing for this workload
    x_label: str = "n"                     # the plots' abscissa
    tables: list[Table] = field(default_factory=list)


@dataclass
class Results:
    """Everything one run produced."""

    meta: dict
    settings: dict
    sections: list[Section]
    derived: list[Derived]

    @property
    def rows(self) -> list[Row]:
        """Every row of every section."""
        return [r for s in self.sections for r in s.rows]

    @property
    def failed(self) -> list[Row]:
        """The rows that failed their check or raised."""
        return [r for r in self.rows if r.status.startswith(FAILED)]

    @property
    def table_errors(self) -> list[str]:
        """Failures while building the extra tables."""
        return [f"{s.name} / {t.title}: {e}" for s in self.sections for t in s.tables for e in t.errors]


def fmt_bytes(n: int | None) -> str:
    """Bytes in a readable binary unit with three significant digits."""
    if n is None:
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def fmt_ratio(v: float | None) -> str:
    """A ratio as `1.23×` (thousands separated above 100)."""
    if v is None:
        return "—"
    return f"{v:.3g}×" if v < 99.95 else f"{v:,.0f}×"


def _compile(r: Row) -> str:
    """The compile column: first call minus steady state; '≈0' when that is within the run-time noise."""
    if r.median_s is None or r.baseline or r.compile_s is None:
        return "—"
    if r.compile_kind != "lower+compile" and r.compile_s <= max(r.q3_s - r.q1_s, 0.05 * r.median_s):
        return "≈0"
    return fmt_time(r.compile_s)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(section: Section) -> str:
    """The Markdown table of one workload; rows grouped by case (in first-appearance order), then size."""
    cols = COLUMNS[:8] + ([MEMORY_COLUMN] if section.measure_memory else []) + COLUMNS[8:]
    shown = [c not in section.hide_columns for c in cols]
    cols = [c for c, keep in zip(cols, shown) if keep]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    order = {c: i for i, c in enumerate(dict.fromkeys(r.case for r in section.rows))}
    rows = sorted(section.rows, key=lambda r: (order[r.case], r.x if r.x is not None else 0))
    for r in rows:
        ok = r.median_s is not None
        notes = r.note if ok else (f"**{r.status}**" if r.status.startswith(FAILED) else r.status)
        cells = [case_label(r), r.impl,
                 fmt_time(r.median_s) if ok else "—",
                 fmt_time(r.q3_s - r.q1_s) if ok else "—",
                 fmt_time(r.min_s) if ok else "—",
                 _compile(r),
                 fmt_ratio(r.vs_baseline), fmt_ratio(r.vs_jax)]
        if section.measure_memory:
            cells.append(fmt_bytes(r.memory_bytes) if r.memory_bytes is not None else (r.memory_note or "—"))
        cells += [f"{r.reps}×{r.number}" if ok else "—", notes]
        cells = [c for c, keep in zip(cells, shown) if keep]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def derived_table(derived: list[Derived], impl_order: list[str] | None = None) -> str:
    """The seeds' questions answered: one line per ratio, one column per implementation (in table order)."""
    present = {d.impl for d in derived}
    impls = [i for i in dict.fromkeys((impl_order or []) + [d.impl for d in derived]) if i in present]
    lines = ["| workload | ratio | " + " | ".join(impls) + " |", "|---|---|" + "---|" * len(impls)]
    for (workload, what) in dict.fromkeys((d.workload, d.what) for d in derived):
        value = {d.impl: d.value for d in derived if (d.workload, d.what) == (workload, what)}
        lines.append(f"| {workload} | {_cell(what)} | " + " | ".join(fmt_ratio(value.get(i)) for i in impls) + " |")
    return "\n".join(lines)


def markdown(results: Results) -> str:
    """The whole report: environment, one table per workload, derived ratios, methodology."""
    m, v = results.meta, results.meta["versions"]
    s = results.settings
    out = [f"# Ember benchmarks — {m['date']}", "",
           f"- machine: {m['machine']} ({m['os']})",
           "- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
           f"- command: `{m['command']}` ({m.get('wall_s', '?')} s)",
           f"- 1-minute load average at start / end: {m.get('load_start')} / {m.get('load_end')} (on "
           f"{m['machine'].split('-core')[0]} cores; other processes inflate and spread the timings)",
           f"- threads: {m.get('threads', 'library defaults')}",
           f"- BLAS kernels: {m.get('blas', 'unknown')}",
           f"- timing: {s['budget_s']:g} s budget per case, samples of ≥ {s['sample_s'] * 1e3:g} ms, "
           f"{s['min_reps']}–{s['max_reps']} repetitions", ""]
    for sec in results.sections:
        out += [f"## {sec.name}: {sec.title}", "", sec.description, "", table(sec), ""]
        out += [part for t in sec.tables for part in (t.markdown(), "")]
    if results.derived:
        kinds = ["numpy", "ember", "jax", "torch"]
        first = {r.impl: (kinds.index(r.framework) if r.framework in kinds else len(kinds), i)
                 for i, r in reversed(list(enumerate(results.rows)))}
        order = sorted(first, key=first.get)
        out += ["## Derived ratios", "", derived_table(results.derived, order), ""]
    out += [METHODOLOGY, ""]
    if results.failed:
        out += [f"**{len(results.failed)} implementation(s) FAILED** (see notes); the run exits with status 1.", ""]
    if results.table_errors:
        out += [f"**{len(results.table_errors)} table entr(ies) FAILED**: " + "; ".join(results.table_errors)
                + "; the run exits with status 1.", ""]
    return "\n".join(out)


def write_json(results: Results, path: str) -> None:
    """Everything, machine-readable: meta, settings, rows, derived ratios."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data = {"meta": results.meta, "settings": results.settings,
            "rows": [r.to_dict() for r in results.rows], "derived": [d.to_dict() for d in results.derived],
            "tables": {s.name: [t.to_dict() for t in s.tables] for s in results.sections if s.tables}}
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=str)


def write_plots(results: Results, directory: str) -> list[str] | str:
    """Run time vs size (log-log, IQR error bars) for each workload with a size axis; PNG paths, or why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plots skipped: matplotlib is not installed (pip install matplotlib)"
    os.makedirs(directory, exist_ok=True)
    paths = []
    for sec in results.sections:
        rows = [r for r in sec.rows if r.x is not None and r.median_s is not None]
        series = list(dict.fromkeys(r.series for r in rows))
        if not series:
            continue
        ncols = min(2, len(series))
        nrows = math.ceil(len(series) / ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(6.5 * ncols, 4.5 * nrows), squeeze=False)
        for ax, name in zip(axes.flat, series):
            mine = [r for r in rows if r.series == name]
            for impl in dict.fromkeys(r.impl for r in mine):
                pts = sorted((r for r in mine if r.impl == impl), key=lambda r: r.x)
                xs, ys = [r.x for r in pts], [r.median_s for r in pts]
                err = [[r.median_s - r.q1_s for r in pts], [r.q3_s - r.median_s for r in pts]]
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=impl)
            ax.set(xscale="log", yscale="log", xlabel=sec.x_label, ylabel="time per call (s)", title=name)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        for ax in list(axes.flat)[len(series):]:
            ax.set_visible(False)
        fig.suptitle(f"{sec.name}: {sec.title} ({results.meta['date']})")
        fig.tight_layout()
        path = os.path.join(directory, f"{sec.name}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
