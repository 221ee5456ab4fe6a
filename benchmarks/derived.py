"""Derived ratios: the numbers the seeds ask about, computed from measured rows (e.g. per-sample/mean-batch)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from benchmarks.harness import FLOOR, Row, case_label


@dataclass
class Derived:
    """One derived ratio for one implementation: `what` (e.g. 'per-sample / mean-batch, tanh') = value."""

    workload: str
    what: str
    impl: str
    value: float | None

    def to_dict(self) -> dict:
        """A JSON-able dict."""
        return asdict(self)


def ratios(workload: str, rows: list[Row], what: str, num: Callable[[Row], bool],
           den: Callable[[Row], bool]) -> list[Derived]:
    """median(num row) / median(den row) for every implementation that has both rows measured."""
    out = []
    for impl in dict.fromkeys(r.impl for r in rows):
        a = next((r for r in rows if r.impl == impl and num(r) and r.median_s is not None), None)
        b = next((r for r in rows if r.impl == impl and den(r) and r.median_s is not None), None)
        if a is not None and b is not None:
            out.append(Derived(workload, what, impl, a.median_s / b.median_s))
    return out


def over_floor(workload: str, rows: list[Row]) -> list[Derived]:
    """In every case with a floor row: each implementation's median over the floor's."""
    out = []
    for row in rows:
        if row.framework != FLOOR or row.median_s is None:
            continue
        for r in rows:
            if r is not row and r.case == row.case and r.params == row.params and r.median_s is not None:
                out.append(Derived(workload, f"{case_label(r)}: / {row.impl}", r.impl, r.median_s / row.median_s))
    return out
