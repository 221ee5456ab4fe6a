"""Backend registry: `compile(graph, plan) -> Executable`, selected by name. jit and vjp reach a
backend only through `ember.backends.compile.compile_graph`, which lowers the graph and computes the plan.

An Executable is called with flat arrays and returns a list of flat arrays that the caller owns:
never an argument, a constant or a read-only view, and never the same array twice (writing into one
output must not change anything else). With `out=` (a list of checked arrays, see outputs.py) it writes
the results into those arrays and returns them. `EMBER_BACKEND` picks the default (llvm unless set);
`default_backend()` names it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Protocol

from ember.passes.memory import Plan
from ember.tracer.ir import Graph


class Executable(Protocol):
    def __call__(self, *args, out: list | None = None) -> list: ...


class Backend(Protocol):
    name: str

    def compile(self, graph: Graph, plan: Plan | None = None) -> Executable: ...


_loaders: dict[str, Callable[[], Backend]] = {}
_loaded: dict[str, Backend] = {}


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
        backend = _loaded[name] = _loaders[name]()
    return backend


def _lazy(module: str) -> Callable[[], Backend]:
    return lambda: importlib.import_module(module).BACKEND


register_backend("numpy", _lazy("ember.backends.numpy"))
register_backend("llvm", _lazy("ember.backends.llvm.backend"))
