"""Backend registry: `compile(graph, plan) -> Executable`, selected by name. A backend compiles the
graph under the memory plan it is given and never plans memory itself: jit and vjp reach a backend only
through `ember.api.compile.compile_graph`, which lowers the graph and computes the plan.

An Executable is called with flat arrays and returns a list of flat arrays that the caller owns:
never an argument, a constant or a read-only view, and never the same array twice (writing into one
output must not change anything else). With `out=` (a list of checked arrays, see outputs.py) it writes
the results into those arrays and returns them. `EMBER_BACKEND` picks the default (llvm unless set);
`default_backend()` names it.

One-time setup of the process (loading a backend: its imports and LLVM's initialization; binding a
library such as BLAS or scipy.special) runs under `one_time_setup()` or as a `@one_time` function:
`one_time_seconds()` sums what this thread spent there, so the compile that paid for it reports it
apart from its own work (`Timings.one_time`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from ember.passes.memory import Plan
from ember.tracer.ir import Graph


class Executable(Protocol):
    def __call__(self, *args, out: list | None = None) -> list: ...


class Backend(Protocol):
    name: str

    def compile(self, graph: Graph, plan: Plan) -> Executable: ...


_loaders: dict[str, Callable[[], Backend]] = {}
_loaded: dict[str, Backend] = {}
_setup = threading.local()  # .seconds: one-time setup this thread ran; .depth: nesting of one_time_setup
T = TypeVar("T")


def one_time_seconds() -> float:
    """Seconds this thread has spent in one-time setup so far (compare before and after a step)."""
    return getattr(_setup, "seconds", 0.0)


@contextlib.contextmanager
def one_time_setup() -> Iterator[None]:
    """Count the time inside as this process's one-time setup (nested regions count once)."""
    depth = getattr(_setup, "depth", 0)
    _setup.depth = depth + 1
    start = time.perf_counter()
    try:
        yield
    finally:
        _setup.depth = depth
        if depth == 0:
            _setup.seconds = one_time_seconds() + time.perf_counter() - start


def one_time(fn: Callable[[], T]) -> Callable[[], T]:
    """`fn` (no arguments) run once per process, as `functools.cache` does, its first call counted as
    one-time setup (a library loaded, symbols bound)."""
    lock, done = threading.Lock(), []

    @functools.wraps(fn)
    def once() -> T:
        if not done:
            with lock:
                if not done:
                    with one_time_setup():
                        done.append(fn())
        return done[0]

    once.cache_clear = done.clear  # as functools.cache's: the next call runs `fn` again
    return once


def register_backend(name: str, loader: Callable[[], Backend]) -> None:
    """Register a backend by name; `loader` is called on first use (so optional deps load lazily)."""
    _loaders[name] = loader
    _loaded.pop(name, None)


def available_backends() -> list[str]:
    return sorted(_loaders)


def default_backend() -> str:
    """The backend jit uses when none is named: $EMBER_BACKEND, else 'llvm' (native code on the CPU)."""
    name = os.environ.get("EMBER_BACKEND", "").strip() or "llvm"
    if name not in _loaders:
        raise ValueError(f"EMBER_BACKEND={name!r} is not a known backend; available: {available_backends()}")
    return name


def get_backend(name: str | None = None) -> Backend:
    name = name or default_backend()
    backend = _loaded.get(name)
    if backend is None:
        if name not in _loaders:
            raise ValueError(f"unknown backend {name!r}; available: {available_backends()}")
        with one_time_setup():  # imports, and the backend's own setup (LLVM's)
            backend = _loaded[name] = _loaders[name]()
    return backend


def _lazy(module: str) -> Callable[[], Backend]:
    return lambda: importlib.import_module(module).BACKEND


register_backend("numpy", _lazy("ember.backends.numpy"))
register_backend("llvm", _lazy("ember.backends.llvm.backend"))
# cuda needs CuPy and a device (a clear error says which is missing); cuda-host runs the same CUDA
# source as host C++ on the CPU (needs only a C++ compiler): how kernels are checked without a GPU
register_backend("cuda", lambda: importlib.import_module("ember.backends.cuda.backend").CudaBackend())
register_backend("cuda-host", lambda: importlib.import_module("ember.backends.cuda.backend").CudaHostBackend())
