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
- ember_enable_x64 (EMBER_ENABLE_X64 or JAX_ENABLE_X64; JAX's name jax_enable_x64): 64-bit mode, off
  by default as in JAX. On, new arrays and Python scalars default to float64/int64/uint64 where they
  default to float32/int32/uint32 (creation functions, weak scalars, sums of bools and small ints,
  argmax, integer true division...). Off, explicit 64-bit NumPy inputs stay 64-bit (JAX truncates them
  to 32 bits): Ember's one documented difference. `ember.enable_x64()` switches it for a `with` block.
  The switch is process-wide (JAX's context manager is per thread).
- ember_num_threads (EMBER_NUM_THREADS): the threads Ember's native code may run on, its own loops
  and the BLAS calls it makes. Default: the CPUs this process may use (`os.sched_getaffinity`),
  at most OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS where set (a Dask worker's caps).
  1 runs everything on the calling thread.
- ember_eager_native (EMBER_EAGER_NATIVE, on by default): the eager fast path's hottest calls (`x.at[k].set`,
  `sum(x)`) run as native builtins once the process has made enough of them (ember/numpy/_native.py).
  Off, they stay in Python: the same results, slower.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
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
    "ember_enable_x64": _Option("x64_enabled", "EMBER_ENABLE_X64", bool),
    "ember_eager_native": _Option("eager_native", "EMBER_EAGER_NATIVE", bool),
}
# JAX's names for the options both have: code ported from JAX sets them unchanged
_JAX_NAMES = {"jax_enable_x64": "ember_enable_x64", "jax_debug_nans": "ember_debug_nans",
              "jax_debug_infs": "ember_debug_infs"}


def _env_flag(var: str, default: bool = False) -> bool:
    raw = os.environ.get(var, "1" if default else "")
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
eager_native: bool = _env_flag("EMBER_EAGER_NATIVE", default=True)
num_threads: int = _env_count("EMBER_NUM_THREADS", 1) or available_cpus()
x64_enabled: bool = _env_flag("EMBER_ENABLE_X64") or _env_flag("JAX_ENABLE_X64")


def _option(name: str) -> _Option:
    name = _JAX_NAMES.get(name, name)
    if name not in _OPTIONS:
        raise AttributeError(f"ember has no config option {name!r}; the options are {sorted(_OPTIONS)} "
                             f"(and JAX's names {sorted(_JAX_NAMES)})")
    return _OPTIONS[name]


_watchers: dict[str, list] = {}


def watch(name: str, callback) -> None:
    """Call `callback(value)` whenever option `name` is updated (the thread pool follows num_threads)."""
    _option(name)
    _watchers.setdefault(_JAX_NAMES.get(name, name), []).append(callback)


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
    for callback in _watchers.get(_JAX_NAMES.get(name, name), ()):
        callback(value)


def read(name: str) -> bool | int:
    """The current value of option `name`."""
    return globals()[_option(name).attr]


@contextlib.contextmanager
def enable_x64(new_val: bool = True) -> Iterator[None]:
    """64-bit mode (or 32-bit with `new_val=False`) inside a `with` block, as `jax.enable_x64`; the
    previous mode comes back after it, even on an exception."""
    before = x64_enabled
    update("ember_enable_x64", new_val)
    try:
        yield
    finally:
        update("ember_enable_x64", before)


def __getattr__(name: str):
    """JAX's attribute names for an option's value: `ember.config.jax_enable_x64`."""
    if name in _JAX_NAMES:
        return globals()[_OPTIONS[_JAX_NAMES[name]].attr]
    raise AttributeError(f"module 'ember.config' has no attribute {name!r}; its options are {sorted(_OPTIONS)}")
