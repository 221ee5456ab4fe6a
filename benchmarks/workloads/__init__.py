"""The seed workloads, one module each. A workload module defines:

- `NAME`, `TITLE` (one line) and `DESCRIPTION` (Markdown shown above its table: sizes, what is measured);
- `MEASURE_MEMORY` (whether its table has a peak-memory column);
- `cases(cfg: RunConfig) -> Iterator[Case]`, generated lazily so large inputs live one case at a time;
- `derived(rows: list[Row]) -> list[Derived]`: ratios the seeds ask about (may return []);
- optionally `tables(cfg: RunConfig) -> list[report.Table]`: extra tables that are not timings (memory plans),
  `HIDE_COLUMNS`: columns of the timing table that mean nothing for the workload, `X_LABEL`: the plots'
  abscissa (default "n"), and `SETTINGS`: overrides of the full run's timing Settings (e.g. fewer repetitions
  for phases that take seconds).
"""

from __future__ import annotations

from types import ModuleType

from benchmarks.workloads import (
    blas_threads,
    control_flow,
    conv_bias_act,
    cosine,
    dead_gradient,
    dense_bias_act,
    dispatch,
    eager,
    eam,
    linalg,
    optimizer,
    per_sample,
    startup,
    threads,
)

WORKLOADS: dict[str, ModuleType] = {m.NAME: m for m in (cosine, eam, per_sample, dead_gradient, dense_bias_act,
                                                         conv_bias_act,
                                                         dispatch, optimizer, blas_threads, threads, startup,
                                                         control_flow, eager, linalg)}
