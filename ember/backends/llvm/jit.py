"""Compile LLVM IR to native code: O3 with loop and SLP vectorization (no unrolling), object code, one ORC LLJIT.

`compile_ir(ir_text, symbols, name)` optimizes the module for the host CPU, emits object code (or
loads it from the disk cache, `cache.py`) and links it into the process-wide LLJIT as a library of
its own; `Library.close()` frees that code through its resource tracker (ORC keeps ~8 KB per closed
library, whatever the code size; MCJIT kept ~11 KB per module and needs an engine per module).
LLVM is not thread-safe here: every LLVM call in this module holds `LLVM_LOCK`. A TargetMachine is
created per use, never shared: one that an engine took over aborts with bad_alloc when reused.
LLVM's initialization and the LLJIT's creation are the process's one-time setup (ember/backends), not
the compile time of the function that first needs them.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import llvmlite.binding as llvm

from ember import config
from ember.backends import one_time_seconds, one_time_setup
from ember.backends.llvm import cache

LLVM_LOCK = threading.RLock()
OPT_LEVEL = 3
# LLVM's loop unroller is off: the vectorizer still interleaves its vector loops, and unrolling them
# again doubled compile time (cosine-softmax gradient: 163 -> 97 ms) while running no faster on the
# seed workloads (the same or up to 1.5x slower: bigger code around small, static trip counts).
LOOP_UNROLLING = False
# Code model and relocation shape the object code, so they are part of the cache key. JIT code uses
# the large code model: RuntimeDyld may place sections and imported symbols beyond 2 GiB of each other.
CODEGEN = "rtdyld jit-large-code-model"

_target: Target | None = None
_lljit: llvm.LLJIT | None = None
_names = itertools.count()


@dataclass(frozen=True)
class Target:
    """The host target that generated modules set (`module.triple`, `module.data_layout`) and code is built for."""

    triple: str
    data_layout: str
    cpu: str
    features: str


def _initialize() -> Target:
    global _target
    with LLVM_LOCK, one_time_setup():
        if _target is None:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            triple, cpu = llvm.get_process_triple(), llvm.get_host_cpu_name()
            features = llvm.get_host_cpu_features().flatten()
            tm = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features,
                                                                       opt=OPT_LEVEL, jit=True)
            _target = Target(triple, str(tm.target_data), cpu, features)
            tm.close()
        return _target


def target() -> Target:
    """The host's triple, data layout, CPU name and features (LLVM initialized on first use)."""
    return _target or _initialize()


def _target_machine() -> llvm.TargetMachine:
    """A new TargetMachine for the host: one per use, since an owner may take it over."""
    t = target()
    return llvm.Target.from_triple(t.triple).create_target_machine(cpu=t.cpu, features=t.features,
                                                                   opt=OPT_LEVEL, jit=True)


def _jit() -> llvm.LLJIT:
    """The process's LLJIT (made on first use, under the caller's LLVM_LOCK: one-time setup)."""
    global _lljit
    if _lljit is None:
        with one_time_setup():
            # errors come back from each link as exceptions; suppressed here, ORC would also print them
            _lljit = llvm.create_lljit_compiler(_target_machine(), suppress_errors=True)
    return _lljit


def _optimized(ir_text: str, context, tm: llvm.TargetMachine) -> llvm.ModuleRef:
    """Parse and verify `ir_text` in `context` and run the O3 pipeline (loop and SLP vectorization) on it."""
    module = llvm.parse_assembly(ir_text, context=context)
    module.verify()
    t = target()
    module.triple, module.data_layout = t.triple, t.data_layout  # always the host: this is a JIT
    pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = LOOP_UNROLLING
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    pb.close()
    pto.close()
    return module


def _codegen(ir_text: str, emit) -> object:
    """`emit(tm, optimized_module)` in a fresh context, everything freed after (under the caller's lock)."""
    context, tm = llvm.create_context(), _target_machine()
    module = None
    try:
        module = _optimized(ir_text, context, tm)
        return emit(tm, module)
    finally:
        if module is not None:
            module.close()
        tm.close()
        context.close()


def _unresolved(ir_text: str, symbols: Mapping[str, int]) -> list[str]:
    """Functions `ir_text` declares that neither `symbols` nor the process define (to explain a link error)."""
    process = ctypes.CDLL(None)
    declared = re.findall(r'^declare [^@]*@"?([^"(]+)"?\(', ir_text, re.MULTILINE)
    return [s for s in declared if not s.startswith("llvm.") and s not in symbols and not hasattr(process, s)]


def _link(obj: bytes, symbols: Mapping[str, int], name: str, ir_text: str) -> tuple[str, llvm.ResourceTracker]:
    """Load object code into the LLJIT as a new library exporting `name`; its unique name and tracker."""
    library = f"{name}#{next(_names)}"
    builder = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process().export_symbol(name)
    for symbol, address in symbols.items():
        builder.import_symbol(symbol, address)
    try:
        return library, builder.link(_jit(), library)
    except RuntimeError as e:
        missing = ", ".join(_unresolved(ir_text, symbols)) or "none found among its declarations"
        raise RuntimeError(f"linking the compiled code of {name!r} failed ({e}); undefined functions: {missing}. "
                           f"Every external function it calls must be in the process or passed in `symbols`.") from e


class Library:
    """Compiled code loaded into the process: function addresses until `close()` frees it. `ir` is
    the module's text; after a disk-cache hit keyed by something other than the text, it is made
    on first use by the `source` function given."""

    def __init__(self, name: str, source: str | Callable[[], str], library: str, tracker: llvm.ResourceTracker,
                 compile_seconds: float, from_cache: bool):
        self.name, self.library = name, library
        self._ir, self._source = (source, None) if isinstance(source, str) else (None, source)
        self.compile_seconds, self.from_cache = compile_seconds, from_cache
        self._trackers = [tracker]
        self._addresses = {name: tracker[name]}
        self._listing: tuple[str, str] | None = None

    @property
    def ir(self) -> str:
        """The module's LLVM IR as generated (before optimization)."""
        if self._ir is None:
            self._ir = self._source()
        return self._ir

    @property
    def closed(self) -> bool:
        return not self._trackers

    def address(self, symbol: str) -> int:
        """The address of the external function `symbol` (valid until `close()`)."""
        if self.closed:
            raise RuntimeError(f"library {self.library!r} is closed: its code was freed")
        if symbol not in self._addresses:
            with LLVM_LOCK:
                try:
                    tracker = _jit().lookup(self.library, symbol)
                except RuntimeError as e:
                    raise KeyError(f"{symbol!r} is not an external symbol of library {self.library!r}: {e}") from e
                # a lookup's tracker frees the whole library when disposed: keep it until close()
                self._trackers.append(tracker)
                self._addresses[symbol] = tracker[symbol]
        return self._addresses[symbol]

    def _listings(self) -> tuple[str, str]:
        if self._listing is None:
            with LLVM_LOCK:
                self._listing = _codegen(self.ir, lambda tm, m: (str(m), tm.emit_assembly(m)))
        return self._listing

    @property
    def optimized_ir(self) -> str:
        """The module after the O3 pipeline (regenerated on demand from `ir`)."""
        return self._listings()[0]

    def asm(self) -> str:
        """The native assembly of the module (regenerated on demand from `ir`, also after a cache hit)."""
        return self._listings()[1]

    def close(self) -> None:
        """Free the code; addresses taken from this library must not be called afterwards."""
        with LLVM_LOCK:
            trackers, self._trackers = self._trackers, []
            for tracker in trackers:
                tracker.close()

    def __del__(self) -> None:
        if getattr(self, "_trackers", None) and LLVM_LOCK is not None:  # None at interpreter shutdown
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("from cache" if self.from_cache else "compiled")
        return f"<Library {self.library} {state} in {self.compile_seconds * 1e3:.2f} ms>"


def cache_key(content: str) -> str:
    """The disk cache key of code made from `content` (IR text, or what determines it) for this
    host: target, options and versions included, and the dtype mode (the content names every dtype, so
    this only keeps each mode's entries apart)."""
    t = target()
    return cache.key(content, t.triple, t.data_layout, t.cpu, t.features, f"O{OPT_LEVEL}",
                     f"unroll={LOOP_UNROLLING}", CODEGEN, ".".join(map(str, llvm.llvm_version_info)),
                     "x64" if config.x64_enabled else "x32")


def compile_ir(ir_text: str, symbols: Mapping[str, int], name: str) -> Library:
    """Compile `ir_text` (or reload it from the disk cache, keyed by the text) and load it; `name` is
    the function to export. `symbols` maps external names the code calls (e.g. BLAS routines) to
    their addresses."""
    return compile_keyed(cache_key(ir_text), lambda: (ir_text, b""), symbols, name)[0]


def compile_keyed(key: str, build: Callable[[], tuple[str, bytes]],
                  symbols: Mapping[str, int] | Callable[[bytes], Mapping[str, int]],
                  name: str) -> tuple[Library, bytes]:
    """Load the code cached under `key` (see `cache_key`), else compile the IR that `build()`
    returns with `meta` (bytes kept beside the code) and cache both; (library, meta). A hit never
    calls `build`, so a key made from what determines the IR (a graph and its plan) skips generating
    it. `symbols` may be a function of `meta`. `compile_seconds` excludes the process's one-time setup
    (LLVM's initialization, the LLJIT, libraries the symbols bind on first use) and waiting for the lock.
    """
    target()  # the first call initializes LLVM under the lock: not this function's compile time
    setup = one_time_seconds()
    start = time.perf_counter()
    found = _unpack(cache.load(key))
    source: str | Callable[[], str]
    if found is not None:
        meta, obj = found
        source = lambda: build()[0]  # noqa: E731 (made again only if the text is asked for)
        ir_text = ""
    else:
        ir_text, meta = build()
        source, obj = ir_text, None
    waiting = time.perf_counter()
    with LLVM_LOCK:
        waited = time.perf_counter() - waiting
        if obj is None:
            obj = _codegen(ir_text, lambda tm, m: tm.emit_object(m))
        resolved = symbols(meta) if callable(symbols) else symbols
        library, tracker = _link(obj, dict(resolved), name, ir_text)
    if found is None:
        cache.store(key, _pack(meta, obj))
    seconds = time.perf_counter() - start - waited - (one_time_seconds() - setup)
    return Library(name, source, library, tracker, seconds, found is not None), meta


_META = struct.Struct("<I")


def _pack(meta: bytes, obj: bytes) -> bytes:
    return _META.pack(len(meta)) + meta + obj


def _unpack(payload: bytes | None) -> tuple[bytes, bytes] | None:
    """(meta, object code) of a cache payload (already checked against its digest), or None."""
    if payload is None or len(payload) < _META.size:
        return None
    (n,) = _META.unpack_from(payload)
    if _META.size + n > len(payload):
        return None
    return payload[_META.size:_META.size + n], payload[_META.size + n:]
