"""`MemoryReport`, what `Lowered.memory()` returns: a memory plan's totals, its buffers and a timeline.

`str(report)` prints the summary and a table with one row per buffer (id, class, bytes, the values it
holds with their producing primitive and user line, its live range in schedule steps); `plot(path)`
draws the workspace bytes live at each step, beside the naive plan's (every value its own buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.passes.memory import CONST, DONATED, INPUT, OUTPUT, WORKSPACE, Plan, naive_live_bytes
from ember.tracer.ir import Graph, Namer
from ember.viz.names import GraphNames


@dataclass(frozen=True)
class BufferRow:
    """One buffer: id, class, bytes, the values in it as (name, producing prim, user line), and the
    schedule steps it is live (`first` is None for an argument or const: live from the call's start)."""

    id: int
    cls: str
    nbytes: int
    values: tuple[tuple[str, str, str], ...]
    first: int | None
    last: int


@dataclass(frozen=True)
class MemoryReport:
    """A memory plan for a user: peak bytes of intermediates, buffers, what in-place reuse and donation
    saved, the bytes of each class, the per-buffer table and the timeline."""

    peak_bytes: int
    buffers: int
    saved_bytes: int
    inplace_saved_bytes: int
    donation_saved_bytes: int
    input_bytes: int
    const_bytes: int
    output_bytes: int
    workspace_bytes: int
    naive_peak_bytes: int
    reuse: bool
    table: tuple[BufferRow, ...] = ()
    live_bytes: tuple[int, ...] = ()
    naive_live_bytes: tuple[int, ...] = ()
    steps: tuple[str, ...] = ()
    # once compiled: the bytes the backend's executable holds per thread for a call (the plan's buffers,
    # kernel temporaries and scratch: im2col windows, LAPACK workspaces, sort buffers); None before
    arena_bytes: int | None = None

    @property
    def scratch_bytes(self) -> int | None:
        """The arena beyond the plan's workspace buffers: what kernels need for themselves (temporaries
        and scratch, the largest kernel's), so the windows a convolution works in show as workspace of
        the call; None before compiling. Exact up to the buffers' alignment and any buffer the backend
        keeps in an output's array (the arena then holds less than the plan's buffers)."""
        return None if self.arena_bytes is None else max(self.arena_bytes - self.workspace_bytes, 0)

    @classmethod
    def of(cls, plan: Plan, graph: Graph | None = None) -> MemoryReport:
        """The report of `plan`; with the planned `graph`, values are named as in its text."""
        return cls(plan.peak_bytes, plan.buffers, plan.saved_bytes, plan.inplace_saved_bytes,
                   plan.donation_saved_bytes, plan.bytes_of(INPUT) + plan.bytes_of(DONATED), plan.bytes_of(CONST),
                   plan.bytes_of(OUTPUT), plan.bytes_of(WORKSPACE), plan.naive_peak_bytes, plan.reuse,
                   _rows(plan, graph), plan.live_bytes, naive_live_bytes(plan),
                   tuple(n.prim.name for n in plan.schedule))

    def text(self) -> str:
        kind = "in place and pooled" if self.reuse else "naive: every value its own buffer, in-place off"
        lines = [f"memory plan ({kind}): peak {self.peak_bytes} bytes of intermediates "
                 f"(naive plan {self.naive_peak_bytes}), {self.buffers} buffers",
                 f"  saved {self.saved_bytes} bytes: {self.inplace_saved_bytes} by in-place reuse, "
                 f"{self.donation_saved_bytes} by donation",
                 f"  inputs {self.input_bytes} B, consts {self.const_bytes} B, outputs {self.output_bytes} B, "
                 f"workspace {self.workspace_bytes} B",
                 *([f"  backend arena {self.arena_bytes} B per call: the plan's buffers and {self.scratch_bytes} B "
                    "of kernel scratch (temporaries, im2col windows, LAPACK workspaces)"]
                   if self.arena_bytes is not None else []),
                 f"  {'buffer':<7s}{'class':<10s}{'bytes':>10s}  {'live':<10s}values"]
        for r in self.table:
            live = f"{'in' if r.first is None else r.first}-{'out' if r.last >= len(self.steps) else r.last}"
            values = ", ".join(f"{name} {prim}" + (f" {loc}" if loc else "") for name, prim, loc in r.values)
            lines.append(f"  #{r.id:<6d}{r.cls:<10s}{r.nbytes:>10d}  {live:<10s}{values}")
        return "\n".join(lines)

    def __str__(self):
        return self.text()

    def plot(self, path: str) -> str:
        """Draw the workspace bytes live over the schedule (and the naive plan's) to a PNG at `path`."""
        try:
            import matplotlib
        except ImportError:
            raise ImportError("MemoryReport.plot needs matplotlib: pip install ember[plots]") from None
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(max(6.0, min(24.0, 0.3 * len(self.steps))), 4))
        steps = range(len(self.steps))
        if self.reuse:
            ax.step(steps, self.naive_live_bytes, where="mid", color="0.6", label="naive plan")
        ax.step(steps, self.live_bytes, where="mid", color="C3", label="this plan" if self.reuse else "naive plan")
        ax.fill_between(steps, self.live_bytes, step="mid", color="C3", alpha=0.25)
        ax.axhline(self.peak_bytes, color="C3", linestyle=":", linewidth=1)
        if len(self.steps) <= 40:
            ax.set_xticks(list(steps), self.steps, rotation=90, fontsize=7)
        ax.set_xlabel("schedule step")
        ax.set_ylabel("live intermediate bytes")
        ax.set_title(f"peak {self.peak_bytes} B (naive {self.naive_peak_bytes} B), saved {self.saved_bytes} B")
        ax.legend(loc="upper right")
        fig.tight_layout()
        fig.savefig(path, format="png")
        plt.close(fig)
        return path


def _rows(plan: Plan, graph: Graph | None) -> tuple[BufferRow, ...]:
    """One row per buffer id, in id order (values named as `Lowered.text()` names them)."""
    names = GraphNames(graph) if graph is not None else Namer()
    step = {v: j for j, node in enumerate(plan.schedule) for v in node.outputs}
    producer = {v: node for node in plan.schedule for v in node.outputs}
    members: dict[int, list] = {}
    for v in plan.buffer_class:
        members.setdefault(plan.buffer[v], []).append(v)
    rows = []
    for b in sorted(members):
        vals = members[b]
        first = step.get(vals[0])
        values = tuple((names(v), producer[v].prim.name if v in producer else plan.buffer_class[v],
                        (producer[v].loc or "") if v in producer else "") for v in vals)
        last = max(plan.last_use.get(v, step.get(v, -1)) for v in vals)
        rows.append(BufferRow(b, plan.buffer_class[vals[0]], plan.nbytes[vals[0]], values, first, last))
    return tuple(rows)
