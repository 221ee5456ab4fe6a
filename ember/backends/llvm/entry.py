"""What running a compiled graph needs without generating its code: the entry function's name, the
layout of the argument tuple it reads (CPython tuples, NumPy arrays), the external symbols it binds,
the consts as it reads them, and the code signature the disk cache keys on.

Kept apart from the code generators (graph.py, loops.py, dot.py, mathlib.py, ...), which only a
disk-cache miss imports: a new process whose first function is on disk skips their import (~16 ms).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from typing import TYPE_CHECKING

import numpy as np

from ember.backends.llvm import pool
from ember.tracer.array import Array

if TYPE_CHECKING:
    from ember.passes.memory import Plan
    from ember.tracer.ir import Graph

ENTRY = "ember_entry"
ALIGN = 64
# CPython/NumPy object layouts on 64-bit builds (checked at run time by executable.check_layout)
TUPLE_ITEMS = 24
ARRAY_DATA, ARRAY_NDIM, ARRAY_DIMS, ARRAY_DESCR, ARRAY_FLAGS = 16, 24, 32, 56, 64
DESCR_BYTEORDER, DESCR_TYPE_NUM = 26, 28  # the same in NumPy 1.x and 2.x
NPY_C_CONTIGUOUS, NPY_ALIGNED = 0x1, 0x100
PYARRAY_TYPE = "ember_pyarray_type"
EMBER_ARRAY_TYPE = "ember_array_type"  # ember's Array, the ndarray subclass jit returns: read as fast
# the external symbols generated code reads: name -> the Python object whose address binds it
SYMBOLS: dict[str, object] = {PYARRAY_TYPE: np.ndarray, EMBER_ARRAY_TYPE: Array}


def code_signature(graph: Graph, plan: Plan) -> str:
    """Everything the generated code depends on, as text: the graph's structure (consts by shape and
    dtype only: they are runtime buffers), the plan's schedule, buffers, classes and in-place writes,
    how large loops split into chunks, and the backend's own source files (so a changed code generator
    never reuses old code). The disk cache keys on it, so a hit skips generating the IR."""
    index: dict = {}
    for v in [*graph.inputs, *graph.consts, *(o for n in graph.nodes for o in n.outputs)]:
        index[v] = len(index)
    position = {id(n): i for i, n in enumerate(graph.nodes)}

    def by_index(mapping, value=lambda x: x):
        return tuple(sorted((index[v], value(x)) for v, x in mapping.items() if v in index))

    plan_data = (tuple(position[id(n)] for n in plan.schedule), by_index(plan.buffer), by_index(plan.buffer_class),
                 by_index(plan.nbytes), by_index(plan.inplace, lambda o: index.get(o, -1)))
    threads = (pool.PARALLEL_MIN_WORK, pool.MIN_CHUNK_WORK, pool.MAX_CHUNKS)  # how loops split into chunks
    return repr((graph.fingerprint(consts=False), plan_data, threads, _generator_files()))


def code_signature_setup() -> None:
    """Read the code generator's files once (when the backend loads, not in a function's compile)."""
    _generator_files()


@functools.cache
def _generator_files() -> tuple:
    """(path, size, mtime) of every module of the ember package: any change to them, a new version
    or an edited checkout, is a new key (a spurious miss at worst, never stale code)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                found.append((os.path.relpath(os.path.join(folder, name), root), st.st_size, st.st_mtime_ns))
    return tuple(found)


def runtime_consts(graph: Graph) -> list[np.ndarray]:
    """The consts as the entry reads them: C-contiguous, aligned arrays of their avals' dtypes."""
    return [np.require(np.asarray(c, dtype=v.aval.dtype), requirements=["C", "A"])
            for v, c in zip(graph.consts, graph.const_values)]


@functools.cache
def libm_symbols() -> dict[str, int]:
    """The C functions generated code may call (float rem is `frem`, which LLVM lowers to fmod/fmodf),
    name -> address, for a JIT that does not search the process's own symbols."""
    libm = ctypes.CDLL(None)  # CPython links libm; find_library would run a subprocess (milliseconds)
    if not all(hasattr(libm, name) for name in ("fmod", "fmodf")):
        libm = ctypes.CDLL(ctypes.util.find_library("m"))
    return {name: ctypes.cast(getattr(libm, name), ctypes.c_void_p).value for name in ("fmod", "fmodf")}
