"""Runtime options, named after JAX's: `ember.config.update("ember_debug_nans", True)`, read back with
`ember.config.read("ember_debug_nans")` or the attribute `ember.config.debug_nans`. Each option's
default comes from its environment variable (EMBER_DEBUG_NANS=1), read when ember is imported. Options
are typed: a flag takes a bool, a count an int in its range, and a wrong type or value raises.

- ember_debug_nans: a compiled function whose output holds a NaN that its inputs did not is rerun
  node by node, and a FloatingPointError names the node that made the first NaN.
- ember_debug_infs: the same for infinities.
- ember_check_oracle: every compiled call is also run on the oracle (the graph before optimization,
  naive plan, numpy backend) and an AssertionError names the output that differs, an input that was
  written without being donated, or an output that aliases another or an input. The test suite turns
  it on, so every function it tests is a differential test of the optimizer. Slow: for debugging.
- ember_num_threads (EMBER_NUM_THREADS): the threads Ember's native code may run on, its own loops
  and the BLAS calls it makes. Default: the CPUs this process may use (`os.sched_getaffinity`),
  at most OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS where set (a Dask worker's caps).
  1 runs everything on the calling thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"", "0", "false", "no", "off"}


@dataclass(frozen=True)
class _Option:
    attr: str  # the module attribute holding the value
    env: str  # the environment variable giving the default
    kind: type  # bool or int
    minimum: int = 0  # for ints


_OPTIONS = {
    "ember_debug_nans": _Option("debug_nans", "EMBER_DEBUG_NANS", bool),
    "ember_debug_infs": _Option("debug_infs", "EMBER_DEBUG_INFS", bool),
    "ember_check_oracle": _Option("check_oracle", "EMBER_CHECK_ORACLE", bool),
    "ember_num_threads": _Option("num_threads", "EMBER_NUM_THREADS", int, minimum=1),
}


def _env_flag(var: str) -> bool:
    raw = os.environ.get(var, "")
    text = raw.strip().lower()
    if text not in _TRUE | _FALSE:
        raise ValueError(f"{var}={raw!r} is not a boolean; set it to 1 or 0")
    return text in _TRUE


def _env_count(var: str, minimum: int) -> int | None:
    """The integer in environment variable `var`, or None when it is unset or empty."""
    raw = os.environ.get(var, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = None
    if n is None or n < minimum:
        raise ValueError(f"{var}={raw!r} is not an integer >= {minimum}; set it to a count such as 1 or 4")
    return n


# thread caps a process inherits: a Dask nanny sets all three to 1 for its workers (each runs nthreads
# tasks at once), so Ember's pool and BLAS calls follow the smallest one set
THREAD_CAPS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), at most each of OMP_NUM_THREADS,
    OPENBLAS_NUM_THREADS and MKL_NUM_THREADS that is a positive integer (a malformed value is ignored,
    as OpenMP runtimes ignore it)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    for var in THREAD_CAPS:
        cap = os.environ.get(var, "").split(",")[0].strip()
        if cap.isdigit() and int(cap) > 0:
            n = min(n, int(cap))
    return max(n, 1)


debug_nans: bool = _env_flag("EMBER_DEBUG_NANS")
debug_infs: bool = _env_flag("EMBER_DEBUG_INFS")
check_oracle: bool = _env_flag("EMBER_CHECK_ORACLE")
num_threads: int = _env_count("EMBER_NUM_THREADS", 1) or available_cpus()


def _option(name: str) -> _Option:
    if name not in _OPTIONS:
        raise AttributeError(f"ember has no config option {name!r}; the options are {sorted(_OPTIONS)}")
    return _OPTIONS[name]


_watchers: dict[str, list] = {}


def watch(name: str, callback) -> None:
    """Call `callback(value)` whenever option `name` is updated (the thread pool follows num_threads)."""
    _option(name)
    _watchers.setdefault(name, []).append(callback)


def update(name: str, value: bool | int) -> None:
    """Set option `name` (e.g. "ember_debug_nans") to `value` (a bool for flags, an int for counts)."""
    opt = _option(name)
    if opt.kind is bool:
        if not isinstance(value, (bool, int)):
            raise TypeError(f"config option {name} takes a bool, got {type(value).__name__}")
        value = bool(value)
    else:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"config option {name} takes an int, got {type(value).__name__}")
        if value < opt.minimum:
            raise ValueError(f"config option {name} takes an int >= {opt.minimum}, got {value}")
        value = int(value)
    globals()[opt.attr] = value
    for callback in _watchers.get(name, ()):
        callback(value)


def read(name: str) -> bool | int:
    """The current value of option `name`."""
    return globals()[_option(name).attr]
