"""The Python side of a compiled graph: one foreign call per execution.

A call builds one tuple (inputs, outputs, this thread's workspace, consts) and hands it to the
native entry, which reads the arrays' data pointers itself (graph.py). Outputs are the only arrays
allocated per call, and none with `out=`. Inputs the entry refuses (not an exact ndarray, not
C-contiguous or aligned, another dtype object, byte-swapped) are converted here and the call is
repeated. Entries that touch many elements are called through `CFUNCTYPE`, which releases the GIL,
so threads run them in parallel; small ones through `PYFUNCTYPE`, which saves the release.
"""

from __future__ import annotations

import ctypes
import functools
import json
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ember.backends.llvm import blas, capi, jit, pool
from ember.backends.llvm import entry as E
from ember.passes.memory import Plan
from ember.tracer.array import Array
from ember.tracer.ir import Graph

if TYPE_CHECKING:
    from ember.backends.llvm.graph import GraphModule

# a thread keeps its workspace across calls up to this size; larger ones are allocated per call
KEEP_WORKSPACE_BYTES = 64 << 20
_empty = np.empty


class LayoutError(RuntimeError):
    """This CPython or NumPy lays out tuples or arrays differently than the native entry reads them."""


def check_layout() -> None:
    """Raise LayoutError unless the offsets graph.py reads match this interpreter and NumPy."""
    a = np.zeros((2, 3), np.float32)
    t = (a,)

    def at(obj, off, typ=ctypes.c_void_p):
        return typ.from_address(id(obj) + off).value

    dims = at(a, E.ARRAY_DIMS)
    ok = (at(t, E.TUPLE_ITEMS) == id(a) and at(a, 8) == id(np.ndarray) and at(a, E.ARRAY_DATA) == a.ctypes.data
          and at(a, E.ARRAY_NDIM, ctypes.c_int) == 2 and at(a, E.ARRAY_DESCR) == id(a.dtype)
          and at(a.dtype, E.DESCR_TYPE_NUM, ctypes.c_int) == a.dtype.num
          and at(a.dtype, E.DESCR_BYTEORDER, ctypes.c_char) == a.dtype.byteorder.encode()
          and (ctypes.c_ssize_t * 2).from_address(dims)[:] == [2, 3]
          and at(a, E.ARRAY_FLAGS, ctypes.c_int) & E.NPY_C_CONTIGUOUS)
    if not ok:
        raise LayoutError("the llvm backend cannot read this Python's tuples or NumPy's arrays natively; "
                          "use the numpy backend (EMBER_BACKEND=numpy)")


def _runtime_symbols(meta: dict) -> dict[str, int]:
    """The external functions the code may call: BLAS (blas.py, only where it does), the thread pool
    (only where it does), fmod, and the objects whose addresses it reads (entry.SYMBOLS)."""
    routines = blas.symbols() if meta["blas"] else {}
    threads = pool.symbols() if meta.get("parallel") else {}
    return {**routines, **threads, **E.libm_symbols(), **{k: id(obj) for k, obj in E.SYMBOLS.items()}}


# One METH_O function for every entry, compiled once per process: its `self` is the entry's address (a
# Python int), so an entry called as a builtin needs no wrapper in its own module (which cost a small
# module about 10% more LLVM time). It returns None when the entry ran, True when it refused an input.
_TRAMPOLINE = """
declare void @Py_IncRef(ptr)
declare ptr @PyLong_AsVoidPtr(ptr)
@ember_py_none = external global i8
@ember_py_true = external global i8

define ptr @ember_trampoline(ptr %self, ptr %args) {
  %entry = call ptr @PyLong_AsVoidPtr(ptr %self)
  %rc = call i32 %entry(ptr %args)
  %ran = icmp eq i32 %rc, 0
  %result = select i1 %ran, ptr @ember_py_none, ptr @ember_py_true
  call void @Py_IncRef(ptr %result)
  ret ptr %result
}
"""


@functools.cache
def _trampoline() -> tuple[jit.Library, capi.MethodDef]:
    """The trampoline's code and its method definition (kept for the process's life)."""
    library = jit.compile_ir(_TRAMPOLINE, {"ember_py_none": id(None), "ember_py_true": id(True)}, "ember_trampoline")
    return library, capi.definition("ember_entry", library.address("ember_trampoline"), capi.METH_O)


def _builtin(address: int) -> Callable:
    """The entry at `address` as a Python builtin function of its argument tuple (through the trampoline)."""
    _, definition = _trampoline()
    return capi.builtin(definition, int(address))  # (the builtin's `self`, which it keeps)


def _aligned_empty(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + E.ALIGN, np.uint8)
    skip = -raw.ctypes.data % E.ALIGN
    return raw[skip:skip + max(nbytes, 1)]


class LLVMExecutable:
    """`graph` under `plan` compiled to native code; called with arrays, returns fresh output arrays
    (or writes the `out=` arrays given)."""

    source_suffix = ".ll"

    def __init__(self, graph: Graph, plan: Plan):
        self._graph, self._plan, self._module = graph, plan, None
        # keyed by the graph and plan: a disk-cache hit loads the code without generating its IR
        key = jit.cache_key(E.code_signature(graph, plan))
        self.library, raw = jit.compile_keyed(key, self._ir_and_meta, lambda m: _runtime_symbols(json.loads(m)),
                                              E.ENTRY)
        meta = json.loads(raw)
        self.compile_seconds = self.library.compile_seconds  # LLVM, or the disk-cache load
        self.from_cache = self.library.from_cache
        self.releases_gil = meta["release_gil"]
        self.parallel = bool(meta.get("parallel"))
        if self.parallel:
            pool.ensure_threads()
        if self.releases_gil:
            self._entry = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object)(self.library.address(E.ENTRY))
        else:  # holding the GIL: called as a builtin function, 0.2 us less per call than through ctypes
            self._entry = _builtin(self.library.address(E.ENTRY))
        self._n_in = len(graph.inputs)
        self._outs = [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in graph.outputs]
        self._single = len(self._outs) == 1
        self._in_specs = [(tuple(v.aval.shape), np.dtype(v.aval.dtype).newbyteorder("=")) for v in graph.inputs]
        self._consts = tuple(E.runtime_consts(graph))
        self._ws_bytes = meta["workspace_bytes"]
        self._tls = threading.local()
        weakref.finalize(self, self.library.close)

    def _built(self) -> GraphModule:
        """The module generated for the graph (made on demand after a disk-cache hit: the code generators
        are imported only then)."""
        if self._module is None:
            from ember.backends.llvm.graph import build_module

            self._module = build_module(self._graph, self._plan)
        return self._module

    def _ir_and_meta(self) -> tuple[str, bytes]:
        """The IR to compile, and what a call needs besides the graph, kept beside the cached code."""
        module = self._built()
        meta = {"workspace_bytes": module.workspace_bytes, "release_gil": module.release_gil,
                "blas": blas.uses_blas(module.ir), "parallel": pool.PARALLEL_FOR in module.ir}
        return module.ir, json.dumps(meta).encode()

    @property
    def source(self) -> str:
        """The generated LLVM IR."""
        return self.library.ir

    @property
    def workspace_bytes(self) -> int:
        """The arena a call works in: the plan's buffers, kernel temporaries and scratch (per thread)."""
        return self._ws_bytes

    @property
    def kernels(self) -> list[str]:
        """The kernel descriptions the module's functions render, as text."""
        return self._built().kernels

    @property
    def asm(self) -> str:
        return self.library.asm()

    def _tail(self) -> tuple:
        """(workspace, *consts): kept per thread, unless the workspace is large (then per call)."""
        tail = (_aligned_empty(self._ws_bytes), *self._consts)
        if self._ws_bytes <= KEEP_WORKSPACE_BYTES:
            self._tls.tail = tail
        return tail

    def __call__(self, *args, out=None) -> list[np.ndarray]:
        if len(args) != self._n_in:
            raise TypeError(f"the executable takes {self._n_in} arrays, got {len(args)}")
        try:
            tail = self._tls.tail
        except AttributeError:
            tail = self._tail()
        if out is not None:
            outs = list(out)
        elif self._single:  # the common case without the loop (about 0.15 us less)
            outs = [_empty(*self._outs[0]).view(Array)]  # outputs are ember Arrays
        else:
            outs = [_empty(s, d).view(Array) for s, d in self._outs]
        if self._entry((*args, *outs, *tail)):
            self._again(args, (*outs, *tail))
        return outs

    def single_output(self) -> Callable[..., Array]:
        """A function of the inputs returning the one output: what `__call__` does without `out=` and
        without the outputs' list (the jit hit path's call)."""
        entry, tls, tail_of, again, n_in = self._entry, self._tls, self._tail, self._again, self._n_in
        ((shape, dtype),) = self._outs

        def call(*args):
            if len(args) != n_in:  # (the entry reads the tuple's items unchecked)
                raise TypeError(f"the executable takes {n_in} arrays, got {len(args)}")
            try:
                tail = tls.tail
            except AttributeError:
                tail = tail_of()
            out = _empty(shape, dtype).view(Array)
            if entry((*args, out, *tail)):
                again(args, (out, *tail))
            return out

        return call

    def _again(self, args: tuple, tail: tuple) -> None:
        """Call the entry again with the inputs it refused converted."""
        if self._entry(self._prepared(args) + tail):
            raise RuntimeError("the native entry refused an input after its conversion (please report it)")

    def _prepared(self, args: tuple) -> tuple:
        """`args` as the entry reads them: exact ndarrays, C-contiguous, aligned, native byte order."""
        fixed = []
        for k, (x, (shape, dtype)) in enumerate(zip(args, self._in_specs)):
            a = np.asarray(x)
            if a.shape != shape:
                raise ValueError(f"input {k} has shape {a.shape}; the compiled function takes {shape}")
            if (a.dtype.kind, a.dtype.itemsize) != (dtype.kind, dtype.itemsize):  # byte order may differ
                raise TypeError(f"input {k} has dtype {a.dtype}; the compiled function takes {dtype}")
            ok = (type(a) is np.ndarray and a.dtype == dtype and a.dtype.isnative and a.flags.c_contiguous
                  and a.flags.aligned)
            fixed.append(a if ok else np.array(a, dtype=dtype, order="C", copy=True))
        return tuple(fixed)
