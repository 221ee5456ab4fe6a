"""`jit`: trace once per signature, optimize, compile with a backend, cache; `make_graph`, `dump`.

The cache key is (pytree structure, shapes, dtypes and weak types of the array leaves, static argument
types and values, backend); a call with a new key retraces. A call with plain ndarrays only (no
keywords, no statics) takes a hit path keyed by their shapes and dtypes, with no pytree work; a Python or
NumPy scalar among them is keyed by its type (which fixes its dtype and weak type) and converted to
the 0-d array the executable takes.
Caches are bounded (LRU) and shared: they belong to the underlying function (held weakly) and the
options, not to the wrapper object. Inside another trace a jitted function's graph (traced once per
signature) is re-emitted, so transforms see through it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import threading
import time
import types
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

import ember.config as config
from ember.api.compile import compile_graph
from ember.api.tracing import (
    ARRAY_LEAF_TYPES,
    check_callable,
    fun_name,
    is_hashable,
    leaf_avals,
    to_array,
    trace_pytree,
)
from ember.backends import available_backends, default_backend, get_backend, one_time_seconds
from ember.backends.outputs import check_out
from ember.errors import (
    ArgumentError,
    ArgumentValueError,
    TracerEscapeError,
    api_boundary,
    filter_traceback,
    user_location,
)
from ember.passes.pipeline import disabled_passes
from ember.passes.pipeline import optimize as run_pipeline
from ember.passes.stages import Stage, StageRecorder, recording
from ember.tracer import dtypes
from ember.tracer.ir import Graph
from ember.tracer.trace import Tracer, eval_graph
from ember.tracer.trace import _state as _trace_state  # read directly on the hit path: is_tracing() costs 70 ns
from ember.tree import PyTreeDef, tree_flatten, tree_flatten_with_path, tree_unflatten

if TYPE_CHECKING:
    from ember.viz.explain import Explanation
    from ember.viz.memory_report import MemoryReport

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "size", "maxsize"])
DEFAULT_CACHE_SIZE = 128


def _as_tuple(x) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    return tuple(x)


@dataclass(frozen=True)
class Timings:
    """Where the time to make a compiled function went, in seconds: `trace` (tracing, grad and vmap
    included), `optimize` (the pass pipeline and memory plan) and, once compiled, `compile` (the
    backend's whole step: for llvm, generating IR and running LLVM, or loading the code from the
    disk cache, then linking), of which `native` is the part past the cache lookup (`from_cache`:
    whether it was a load); None where that has not run or the backend has no such part (numpy).
    `one_time` is the process's one-time setup this compile paid for, apart from `compile`: loading
    the backend (imports, LLVM's initialization), binding a library on first use (BLAS, scipy.special);
    None for every function compiled after that setup. Their sum is the wall time of the function's
    first call, less running it (a jitted call's own cost: microseconds)."""

    trace: float
    optimize: float
    compile: float | None = None
    native: float | None = None
    from_cache: bool | None = None
    one_time: float | None = None

    @property
    def total(self) -> float:
        """trace + optimize + compile + one_time (those that ran)."""
        return sum(t for t in (self.trace, self.optimize, self.compile, self.one_time) if t is not None)

    def __str__(self) -> str:
        def ms(s: float | None) -> str:
            return "not yet" if s is None else f"{s * 1e3:.2f} ms"

        native = "" if self.native is None else \
            f" ({'disk cache load' if self.from_cache else 'LLVM'} {ms(self.native)} of it)"
        text = f"trace {ms(self.trace)}, optimize {ms(self.optimize)}, compile {ms(self.compile)}{native}"
        if self.one_time is not None:
            text += f"; once per process: {ms(self.one_time)} (loading the backend, binding libraries)"
        return text


class Lowered:
    """A traced and optimized function: its stages, graphs, text, dumps, and `compile()`."""

    def __init__(self, name: str, stages: list[Stage], in_tree: PyTreeDef, out_tree: PyTreeDef,
                 backend: str, statics: _Statics, disabled: tuple[str, ...] = (),
                 seconds: tuple[float, float] = (0.0, 0.0)):
        self.name = name
        self.disabled = disabled  # the optional passes switched off (all of them with optimize=False)
        self.stages = stages
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.backend = backend
        self.statics = statics
        self._executable = None
        self._seconds = seconds  # (trace, optimize)
        self._compile_seconds: float | None = None
        self._one_time_seconds: float | None = None

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage {name!r}; stages: {[s.name for s in self.stages]}")

    @property
    def stage_names(self) -> list[str]:
        return [s.name for s in self.stages]

    @property
    def graph(self) -> Graph:
        """The graph as traced (after any grad/vmap transforms, before optimization)."""
        return self.stage("traced").graph

    @property
    def optimized(self) -> Graph:
        """The graph after the pipeline (with optimize=False: the traced one with custom_vjp inlined)."""
        return self.stages[-1].graph

    def text(self, stage: str = "optimized") -> str:
        from ember.viz.text import stage_text

        s = self.stages[-1] if stage == "optimized" else self.stage(stage)
        return stage_text(s)

    def dump(self, path: str, stages: Iterable[str] | None = None, formats=None) -> list[str]:
        """Write the chosen stages (all by default) as text, DOT and SVG files under `path`, and with
        format "code" (a default one) the backend's generated code: it compiles first, then writes
        `<name>.source.py` (numpy) or `<name>.ll` and `<name>.s` (llvm)."""
        from ember.viz.dump import wants_code, write_code, write_stages

        chosen = self.stages if stages is None else [self.stage(n) for n in stages]
        written = write_stages(chosen, path, formats, name=self.name)
        if wants_code(formats):
            self.compile()
            written += write_code(self._executable, path, self.name)
        return written

    def source(self) -> str:
        """The code the backend generated for the optimized graph (Python for the numpy backend, LLVM
        IR for llvm)."""
        self.compile()
        src = getattr(self._executable, "source", None)
        if src is None:
            raise NotImplementedError(f"the {self.backend} backend does not expose generated code")
        return src

    def asm(self) -> str:
        """The assembly the backend generated for the optimized graph (llvm); backends that generate
        none (numpy: see `source()`) raise NotImplementedError."""
        self.compile()
        asm = getattr(self._executable, "asm", None)
        if callable(asm):
            asm = asm()
        if asm is None:
            raise NotImplementedError(f"the {self.backend} backend generates no assembly; Lowered.source() shows "
                                      "the code it generates")
        return asm

    def memory(self) -> MemoryReport:
        """The memory plan as a report: peak bytes of intermediates, buffers, bytes saved by in-place
        reuse and by donation, a per-buffer table (`print` it) and `.plot(path)` of the timeline."""
        from ember.viz.memory_report import MemoryReport

        return MemoryReport.of(self.stages[-1].plan, self.optimized)

    def explain(self) -> Explanation:
        """Why each edge was not fused and each value not written in place (rule, nodes, user's line),
        with the fusions and in-place writes that were made; print it to read the report."""
        from ember.viz.explain import Explanation

        return Explanation.of(self.stages, self.name, self.disabled)

    def compile(self) -> Compiled:
        if self._executable is None:
            setup, start = one_time_seconds(), time.perf_counter()
            get_backend(self.backend)  # loaded once per process: one-time setup
            self._executable, _ = compile_graph(self.optimized, backend=self.backend, plan=self.stages[-1].plan,
                                                source=self.stage("after inline").graph, name=self.name)
            once = one_time_seconds() - setup  # the process's setup this compile ran, not its own work
            self._compile_seconds = time.perf_counter() - start - once
            self._one_time_seconds = once or None
        return Compiled(self)

    def timings(self) -> Timings:
        """How long tracing, optimizing and (once `compile()` ran) the backend's compile step and the
        process's one-time setup it paid for took."""
        exe = getattr(self._executable, "executable", self._executable)
        return Timings(*self._seconds, self._compile_seconds, getattr(exe, "compile_seconds", None),
                       getattr(exe, "from_cache", None), self._one_time_seconds)


class Compiled:
    """A compiled function for one signature; call it with the dynamic arguments of that signature
    (static arguments were fixed when lowering, as in JAX). `out=` writes the results into arrays
    the caller gives (see `__call__`)."""

    def __init__(self, lowered: Lowered):
        self.lowered = lowered
        exe = lowered._executable
        self._unchecked = getattr(exe, "unchecked", exe)
        self._single = lowered.out_tree.node is None
        avals = lowered.graph.in_avals
        plain = lowered.in_tree == tree_flatten((tuple(range(len(avals))), {}))[1]
        # the hit path: positional plain ndarrays of exactly these shapes and dtypes
        self._fast_sig = tuple((a.shape, a.dtype) for a in avals) if plain else None
        # per input, the scalar types taken as they are where it is 0-d (a Python float where it is float32)
        self._scalar_types = tuple(frozenset(t for t, d in _PY_SCALAR_DTYPES.items() if d == a.dtype) | {a.dtype.type}
                                   if a.shape == () else frozenset() for a in avals)
        self._out_avals = lowered.optimized.out_avals
        self._out_names = None
        self._takes_out = "out" in (lowered.in_tree.children[1].aux or ())  # a keyword argument named out

    def __call__(self, *args, out=None, **kwargs):
        """The function's outputs for these arguments. Given `out`, arrays with the structure of the
        outputs (one array for a single output), writes the results into them and returns them, with
        no allocation: each must have its output's exact shape and dtype, be a C-contiguous,
        aligned, writeable ndarray, and share memory with no argument and no other `out` array
        (else a ValueError or TypeError, as NumPy's ufunc `out=` raises). Only compiled calls take
        `out`; a jitted function's keyword arguments are the function's own."""
        low = self.lowered
        if out is not None and self._takes_out:
            raise ArgumentError(f"compiled {low.name} was lowered with a keyword argument 'out', but out= of a "
                                "compiled call names the arrays to write the results into: lower and call it with "
                                "that argument passed by position", user_location())
        arrays, sig = args, self._fast_sig
        if kwargs or sig is None or len(args) != len(sig):
            arrays = self._arrays(args, kwargs)
        else:
            for x, (shape, dtype) in zip(args, sig):
                if type(x) is not np.ndarray or x.shape != shape or x.dtype != dtype:
                    arrays = self._scalars_converted(args) or self._arrays(args, kwargs)
                    break
        checking = config.check_oracle or config.debug_nans or config.debug_infs
        exe = low._executable if checking else self._unchecked
        if out is None:
            outs = exe(*arrays)
        else:
            outs = exe(*arrays, out=self._check_out(out, arrays))
        return outs[0] if self._single else tree_unflatten(low.out_tree, outs)

    def _scalars_converted(self, args: tuple) -> list | None:
        """The arrays of a positional call of plain ndarrays and scalars that match the signature as
        they are (a scalar where a 0-d input of its dtype is), scalars converted; else None."""
        if len(args) == 1 and type(args[0]) in self._scalar_types[0]:  # the common case, without the loop
            try:
                return (_array(args[0], self._fast_sig[0][1]),)
            except OverflowError:  # a Python int out of the default int's range: as the checked path says
                return None
        arrays = []
        for x, (shape, dtype), taken in zip(args, self._fast_sig, self._scalar_types):
            if type(x) is np.ndarray:
                if x.shape != shape or x.dtype != dtype:
                    return None
            elif type(x) in taken or (not shape and isinstance(x, np.generic) and x.dtype == dtype):
                try:
                    x = _array(x, dtype)
                except OverflowError:  # a Python int out of the default int's range: as the checked path says
                    return None
            else:
                return None
            arrays.append(x)
        return arrays

    def _arrays(self, args: tuple, kwargs: dict) -> list:
        """The flat arrays of a call, checked against the signature (ArgumentError naming both)."""
        low = self.lowered
        self._reject_statics(args, kwargs)
        dyn = (args, kwargs)
        leaves, tree = tree_flatten(dyn)
        avals = leaf_avals(leaves, dyn)
        expected = low.graph.in_avals
        if tree != low.in_tree or any(not a.same_type(b) for a, b in zip(avals, expected)):
            got = ", ".join(a.str_short() for a in avals)
            want = ", ".join(a.str_short() for a in expected)
            raise ArgumentError(f"compiled {low.name} takes ({want}) structured as {low.in_tree}; got ({got}) "
                                f"structured as {tree}", user_location())
        return [to_array(x) for x in leaves]

    def _check_out(self, out, arrays) -> list:
        """`out` flattened and checked (ember/backends/outputs.py) against the outputs and arguments."""
        low = self.lowered
        if self._out_names is None:
            paths = tree_flatten_with_path(tree_unflatten(low.out_tree, [0] * low.out_tree.num_leaves))[0]
            self._out_names = [f"out{p}" for p, _ in paths]
        if self._single and isinstance(out, np.ndarray):
            flat = [out]
        else:
            flat, tree = tree_flatten(out)
            if tree != low.out_tree:
                want = low.out_tree
                count_only = tree.node is want.node is not None and len(tree.children) != len(want.children)
                cls = ArgumentValueError if count_only else ArgumentError  # as NumPy's out= of the wrong length
                raise cls(f"out= of compiled {low.name} is structured as {tree}, but its outputs are structured as "
                          f"{low.out_tree}: pass one array per output in that structure", user_location())
        return check_out(flat, self._out_avals, arrays, self._out_names)

    def _reject_statics(self, args: tuple, kwargs: dict) -> None:
        """A TypeError naming the static arguments the call passed again (by keyword, or as extra
        positional arguments in their places)."""
        st = self.lowered.statics
        named = [f"keyword argument {k!r}" for k in kwargs if k in st.names]
        if st.positions and len(args) == st.n_dynamic + len(st.positions):
            named += [f"argument {i}" for i in st.positions]
        if named:
            raise ArgumentError(f"compiled {self.lowered.name} takes only its dynamic arguments, but the call "
                                f"passes static {', '.join(named)} again; static arguments are fixed when "
                                "lowering: drop them from the call (lower again for other values)", user_location())


_Statics = namedtuple("_Statics", ["positions", "names", "n_dynamic"])


class _Entry:
    """A compiled signature: its executable (checked: see backends/debug.py), the same without the
    checks (`unchecked`, what runs while no debug or oracle option is on), the output structure, and
    the hit path's keys filed for it (several: a 0-d float32 array and an np.float32 scalar reach one)."""

    __slots__ = ("executable", "unchecked", "out_tree", "single", "lowered", "key", "fast_keys", "used")

    def __init__(self, executable, out_tree: PyTreeDef, lowered, key):
        self.executable, self.out_tree, self.lowered, self.key = executable, out_tree, lowered, key
        self.unchecked = getattr(executable, "unchecked", executable)
        self.single = out_tree.node is None  # one array out: no unflattening
        self.fast_keys: list = []
        self.used = 0


class _ScalarHit:
    """The hit path's value for a key with scalar arguments: the entry, and per positional argument the
    dtype to convert a scalar to (None: an ndarray passed as it is)."""

    __slots__ = ("entry", "dtypes", "first")

    def __init__(self, entry: _Entry, dtypes: tuple):
        self.entry, self.dtypes = entry, dtypes
        self.first = dtypes[0] if len(dtypes) == 1 else None  # one scalar argument: no loop

    def arrays(self, args: tuple) -> tuple | list:
        """`args` as the executable takes them (OverflowError: a Python int out of its dtype's range)."""
        if self.first is not None:
            return (_array(args[0], self.first),)
        return [x if d is None else _array(x, d) for x, d in zip(args, self.dtypes)]


class _Cache:
    """The executables of one function under one set of options, least recently used first, and the
    graphs it was traced to inside other traces. Shared by every wrapper over that function."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.entries: dict = {}
        # (backend, shape, dtype, ..., scalar type, ...) of plain arrays and scalars -> an entry (a _ScalarHit
        # where scalars are converted)
        self.fast: dict = {}
        self.graphs: OrderedDict = OrderedDict()  # signature inside a trace -> (graph, out_tree)
        self.misses = self.adds = 0
        # Every use of an entry ticks the clock: a hit, or its add, so hits = clock - adds (one store
        # less on the hit path). entry.used is the clock at its last use: least recently used = smallest.
        self.clock = 0
        self._locks: dict = {}
        self._guard = threading.Lock()

    @property
    def hits(self) -> int:
        return self.clock - self.adds

    def touch(self, entry: _Entry) -> None:
        """Count a hit of `entry`."""
        entry.used = self.clock = self.clock + 1

    def add(self, entry: _Entry) -> None:
        """Insert `entry`, evicting the least recently used ones (rare: a scan only when compiling, so
        a hit costs no hashing of the key)."""
        self.adds += 1
        entry.used = self.clock = self.clock + 1
        self.entries[entry.key] = entry
        while len(self.entries) > self.maxsize:
            old = min(self.entries.values(), key=lambda e: e.used)
            del self.entries[old.key]
            for k in old.fast_keys:
                self.fast.pop(k, None)

    def lock(self, key) -> threading.Lock:
        """The lock under which signature `key` is traced and compiled once, even from many threads."""
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def add_graph(self, key, graph_and_tree) -> None:
        self.graphs[key] = graph_and_tree
        while len(self.graphs) > self.maxsize:
            self.graphs.popitem(last=False)

    def clear(self) -> None:
        self.entries.clear()
        self.fast.clear()
        self.graphs.clear()
        self.misses = self.adds = self.clock = 0


_shared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def shared_cache(root, key, maxsize: int) -> _Cache:
    """The cache for `root` (the user's function, held weakly) under `key` (transforms and options);
    a private one when `root` cannot be weakly referenced or `key` is not hashable."""
    try:
        per_fun = _shared.get(root)
        if per_fun is None:
            per_fun = _shared[root] = {}
        key = (key, maxsize)
        cache = per_fun.get(key)
    except TypeError:
        return _Cache(maxsize)
    if cache is None:
        cache = per_fun[key] = _Cache(maxsize)
    return cache


def _static_key(v):
    """A cache key for a static value that tells apart equal values of different types (1, True, 1.0),
    recursively through tuples, and signed zeros."""
    if isinstance(v, tuple):
        return (type(v), tuple(_static_key(x) for x in v))
    if isinstance(v, float):
        return (type(v), float(v).hex())
    return (type(v), v)


def _static_numbers(fun: Callable, static_argnums, static_argnames) -> tuple[frozenset, frozenset]:
    """The static positions and names of `fun`, each given either way; out-of-range numbers and unknown
    names raise a ValueError now, as in JAX, when the signature allows checking them."""
    nums = {int(i) for i in _as_tuple(static_argnums)}
    names = set(_as_tuple(static_argnames))
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return frozenset(nums), frozenset(names)
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_pos = any(p.kind == p.VAR_POSITIONAL for p in params)
    var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
    n = len(positional)
    bad = sorted(i for i in nums if i < -n or (i >= n and not var_pos))
    if bad:
        raise ArgumentValueError(f"jit of {fun_name(fun)} has static_argnums={tuple(sorted(nums))}, but "
                                 f"{fun_name(fun)} takes only {n} positional argument(s), so {bad} is out of "
                                 "range", user_location())
    unknown = sorted(k for k in names if k not in {p.name for p in params if p.kind != p.POSITIONAL_ONLY})
    if unknown and not var_kw:
        raise ArgumentValueError(f"jit of {fun_name(fun)} has static_argnames {unknown}, which {fun_name(fun)} does "
                                 f"not take; its parameters are {[p.name for p in params]}", user_location())
    nums = {i % n if i < 0 else i for i in nums}
    names |= {positional[i] for i in nums if i < n}
    nums |= {positional.index(k) for k in names if k in positional}
    return frozenset(nums), frozenset(names)


class Jitted:
    """The result of `jit(fun)`: call it, `lower(...)` it, or look at `cache_info()`."""

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(), donate_argnums=(),
                 backend: str | None = None, optimize: bool = True, disable_passes: Iterable[str] = (),
                 cache_size: int = DEFAULT_CACHE_SIZE, cache_key=None):
        check_callable(fun, "jit")
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._backend = backend
        self._disabled = disabled_passes(optimize, disable_passes)
        if not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"jit cache_size must be a positive int, got {cache_size!r}")
        self._static_nums, self._static_names = _static_numbers(fun, static_argnums, static_argnames)
        self.donate_argnums = tuple(sorted(int(i) for i in _as_tuple(donate_argnums)))
        options = ("jit", self._static_nums, self._static_names, self.donate_argnums, backend, self._disabled)
        root, chain = cache_key if cache_key is not None else (fun, ())
        self._key = (root, chain + (options,))
        self._cache = shared_cache(*self._key, cache_size)

    def _cache_key(self):
        """(the underlying function, the transforms and options over it): what the cache is shared by."""
        return self._key

    def __get__(self, obj, objtype=None):
        """`@jit` on a method: accessed through an instance, a bound method passing the instance first
        (mark it static with static_argnums=0, or make the class a pytree, e.g. a dataclass)."""
        return self if obj is None else types.MethodType(self, obj)

    # -- arguments -------------------------------------------------------------------------------
    def _split_args(self, args: tuple, kwargs: dict):
        """(static key, dynamic (args, kwargs), the static values to put back into the call)."""
        if not self._static_nums and not self._static_names:
            return (), (args, kwargs), None
        static_pos = tuple((i, args[i]) for i in sorted(self._static_nums) if i < len(args))
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self._static_names))
        dyn_args = tuple(a for i, a in enumerate(args) if i not in self._static_nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self._static_names}
        key = tuple((i, _static_key(v)) for i, v in static_pos + static_kw)
        try:
            hash(key)
        except TypeError:
            bad = next(v for _, v in static_pos + static_kw if not is_hashable(v))
            raise ArgumentValueError(f"static argument of {fun_name(self._fun)} has unhashable type "
                                f"{type(bad).__name__}; static arguments are cache keys and must be hashable "
                                "(use a tuple instead of a list)", user_location()) from None
        return key, (dyn_args, dyn_kwargs), (static_pos, static_kw)

    def _check_leaves(self, args: tuple, kwargs: dict) -> None:
        """Raise an ArgumentError naming the first argument leaf that is not an array, by its path in
        the user's call (static arguments keep their positions but are not checked)."""
        shown = (tuple(None if i in self._static_nums else a for i, a in enumerate(args)),
                 {k: v for k, v in kwargs.items() if k not in self._static_names})
        leaves = tree_flatten(shown)[0]
        leaf_avals(leaves, shown)  # raises with the path of a bad leaf
        if any(isinstance(x, Tracer) for x in leaves):
            raise TracerEscapeError(f"{fun_name(self._fun)} was called with a traced value outside of any trace "
                                    "(it escaped from an earlier trace, e.g. stored in a global); return it "
                                    "from the traced function instead", user_location())

    def _with_statics(self, statics) -> Callable:
        """`fun` of the dynamic arguments only, with the static values put back in their places."""
        if statics is None:
            return self._fun
        static_pos, static_kw = statics

        def fun(*dyn_args, **dyn_kwargs):
            args = list(dyn_args)
            for i, v in static_pos:
                args.insert(i, v)
            return self._fun(*args, **dyn_kwargs, **dict(static_kw))

        fun.__name__ = fun_name(self._fun)
        with contextlib.suppress(TypeError, ValueError):  # the names errors give the dynamic arguments
            sig = inspect.signature(self._fun)
            fun.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values()
                                                        if p.name not in self._static_names])
        return fun

    # -- calls -----------------------------------------------------------------------------------
    @api_boundary
    def __call__(self, *args, **kwargs):
        try:
            if getattr(_trace_state, "stack", None):
                return self._call_traced(args, kwargs)
            backend = self._backend or _backend_of_env.get(_read_backend_env()) or _default_backend()
            if kwargs:
                return self._call_slow(backend, args, kwargs)
            # The hit path for f(array, ...), about 0.7 us: a key of each array's shape and dtype (of each
            # other argument's type: a scalar's type fixes its dtype and weak type), one lookup, the executable
            # without the checks' wrapper unless a check option is on.
            if len(args) == 1:
                x = args[0]
                sig = (backend, x.shape, x.dtype) if type(x) is np.ndarray else (backend, type(x))
            else:
                sig = (backend,)
                for x in args:
                    sig += (x.shape, x.dtype) if type(x) is np.ndarray else (type(x),)
            cache = self._cache
            entry = cache.fast.get(sig)
            if entry is None:
                return self._call_slow(backend, args, kwargs)
            if entry.__class__ is _ScalarHit:  # scalars converted to 0-d arrays (np.array: about 0.1 us)
                try:
                    args = (_array(args[0], entry.first),) if entry.first is not None else entry.arrays(args)
                except OverflowError:  # a Python int out of the default int's range: the slow path says so
                    return self._call_slow(backend, args, kwargs)
                entry = entry.entry
            entry.used = cache.clock = cache.clock + 1  # a hit (see _Cache.hits)
            outs = (entry.executable if config.check_oracle or config.debug_nans or config.debug_infs
                    else entry.unchecked)(*args)
            return outs[0] if entry.single else tree_unflatten(entry.out_tree, outs)
        except Exception as e:
            filter_traceback(e)
            raise

    def _call_slow(self, backend: str, args: tuple, kwargs: dict):
        """Any call: flatten the pytrees, key by structure, avals (weak types included) and statics;
        trace and compile a new signature. A call whose arrays reach the executable unchanged also
        files its entry under the hit path's key."""
        cache = self._cache
        static_key, dyn, _ = self._split_args(args, kwargs)
        leaves, in_tree = tree_flatten(dyn)
        if not all(_is_array_leaf(x) for x in leaves):
            self._check_leaves(args, kwargs)
        arrays = [to_array(x) for x in leaves]
        key = (in_tree, tuple((a.shape, a.dtype, not isinstance(x, np.ndarray) and not isinstance(x, np.generic))
                              for a, x in zip(arrays, leaves)), static_key, backend)
        entry = cache.entries.get(key)
        if entry is None:
            entry = self._compile(key, args, kwargs)
        else:
            cache.touch(entry)
        if key in cache.entries:
            fast = _fast_key(backend, args, kwargs, arrays, self._static_nums)
            if fast is not None and fast[0] not in cache.fast:
                cache.fast[fast[0]] = entry if fast[1] is None else _ScalarHit(entry, fast[1])
                entry.fast_keys.append(fast[0])
        return _run(entry, arrays)

    def _compile(self, key, args: tuple, kwargs: dict) -> _Entry:
        """Trace, optimize and compile one signature, once (a second thread waits and finds it)."""
        cache = self._cache
        try:
            with cache.lock(key):
                entry = cache.entries.get(key)
                if entry is not None:
                    cache.touch(entry)
                    return entry
                cache.misses += 1
                lowered = self.lower(*args, **kwargs)
                lowered.compile()
                entry = _Entry(lowered._executable, lowered.out_tree, lowered, key)
                cache.add(entry)
        finally:
            with cache._guard:
                cache._locks.pop(key, None)
        dump_dir = os.environ.get("EMBER_DUMP_DIR")
        if dump_dir:
            name = getattr(self, "__name__", fun_name(self._fun))
            lowered.dump(_dump_path(dump_dir, f"{_safe(name)}_{cache.misses}"))
        return entry

    def _call_traced(self, args: tuple, kwargs: dict):
        """Inside another trace: trace `fun` once per signature (abstractly, even where the enclosing
        trace knows values) and re-emit its graph into the enclosing trace. A graph that closes over
        a value of the enclosing trace is not kept: it is valid only in that trace."""
        static_key, (dyn_args, dyn_kwargs), statics = self._split_args(args, kwargs)
        leaves, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        avals = leaf_avals(leaves, (dyn_args, dyn_kwargs))
        key = (in_tree, tuple(avals), static_key)
        found = self._cache.graphs.get(key)
        if found is None:
            graph, _, _, out_tree = trace_pytree(self._with_statics(statics), dyn_args, dyn_kwargs, avals, known=False)
            found = (graph, out_tree)
            if not any(isinstance(c, Tracer) for c in graph.const_values):
                self._cache.add_graph(key, found)
        else:
            self._cache.graphs.move_to_end(key)
        graph, out_tree = found
        return tree_unflatten(out_tree, eval_graph(graph, leaves))

    def lower(self, *args, **kwargs) -> Lowered:
        """Trace and optimize for these arguments, without running; see Lowered."""
        _, dyn, statics = self._split_args(args, kwargs)
        dyn_args, dyn_kwargs = dyn
        if not all(_is_array_leaf(x) for x in tree_flatten(dyn)[0]):
            self._check_leaves(args, kwargs)
        with recording(StageRecorder()) as rec:
            start = time.perf_counter()
            graph, _, in_tree, out_tree = trace_pytree(self._with_statics(statics), dyn_args, dyn_kwargs, known=False)
            rec.add("traced", graph)
            traced = time.perf_counter()
            run_pipeline(graph, self._flat_donate(args), self._disabled)
            seconds = (traced - start, time.perf_counter() - traced)
        static_pos, static_kw = statics or ((), ())
        info = _Statics(tuple(i for i, _ in static_pos), frozenset(k for k, _ in static_kw) | self._static_names,
                        len(dyn_args))
        return Lowered(fun_name(self._fun), rec.stages, in_tree, out_tree, self._backend or _default_backend(), info,
                       self._disabled, seconds)

    def _flat_donate(self, args: tuple) -> list[int]:
        """donate_argnums as indices into the flat inputs (the leaves of the dynamic arguments)."""
        flat, start = [], 0
        for i, a in enumerate(args):
            if i in self._static_nums:
                continue
            n = len(tree_flatten(a)[0])
            if i in self.donate_argnums:
                flat += range(start, start + n)
            start += n
        return flat

    def cache_info(self) -> CacheInfo:
        """hits: calls served from the cache; misses: traces (one per new signature); size: entries;
        maxsize: the bound (least recently used entries go first). Shared by every jit of the same
        function with the same options."""
        c = self._cache
        return CacheInfo(c.hits, c.misses, len(c.entries), c.maxsize)

    def clear_cache(self) -> None:
        self._cache.clear()

    def __repr__(self):
        return f"<jit of {fun_name(self._fun)}>"


def _run(entry: _Entry, arrays) -> object:
    """Run a cached entry: the backend's executable itself unless a debug or oracle check is on."""
    exe = entry.executable if config.check_oracle or config.debug_nans or config.debug_infs else entry.unchecked
    outs = exe(*arrays)
    return outs[0] if entry.single else tree_unflatten(entry.out_tree, outs)


def _is_array_leaf(x) -> bool:
    return isinstance(x, ARRAY_LEAF_TYPES)


_PY_SCALAR_DTYPES = {float: dtypes.float_, int: dtypes.int_, bool: dtypes.bool_}  # as dtypes.scalar_dtype
_array = np.array  # a local name: 30 ns less than np.array on the hit path


def _fast_key(backend: str, args: tuple, kwargs: dict, arrays: list, static_nums) -> tuple | None:
    """(the hit path's key, the dtypes to convert scalar arguments to or None when there are none) for
    a positional call of plain ndarrays passed to the executable as they are and of Python or NumPy
    scalars; None when the call cannot take the hit path."""
    if kwargs or static_nums or len(arrays) != len(args):
        return None
    sig, convert = (backend,), []
    for x, a in zip(args, arrays):
        if type(x) is np.ndarray and a is x:
            sig += (x.shape, x.dtype)
            convert.append(None)
        elif type(x) in _PY_SCALAR_DTYPES or isinstance(x, np.generic):
            sig += (type(x),)  # the type fixes the dtype (and the weak type) the slow path gave `a`
            convert.append(a.dtype)
        else:
            return None
    return sig, (tuple(convert) if any(d is not None for d in convert) else None)


def _environ_reader(name: str) -> Callable[[], object]:
    """A cheap read of one environment variable's raw value: `os.environ.get` costs about 0.8 us when
    the variable is unset (a KeyError inside), more than the rest of a jitted call's dispatch."""
    data, encode = getattr(os.environ, "_data", None), getattr(os.environ, "encodekey", None)
    if isinstance(data, dict) and encode is not None:
        return functools.partial(data.get, encode(name))
    return functools.partial(os.environ.get, name)


_read_backend_env = _environ_reader("EMBER_BACKEND")
_backend_of_env: dict = {}  # raw value of EMBER_BACKEND -> default_backend() under it


def _default_backend() -> str:
    """`default_backend()`, computed once per value of EMBER_BACKEND."""
    raw = _read_backend_env()
    name = _backend_of_env.get(raw)
    if name is None:
        name = _backend_of_env[raw] = default_backend()
    return name


_dumped: set[str] = set()


def _dump_path(dump_dir: str, base: str) -> str:
    """dump_dir/base, or dump_dir/base_2, _3, ... when this process already dumped there (two
    functions with one name, e.g. two lambdas), so no dump overwrites another."""
    path, k = os.path.join(dump_dir, base), 2
    while path in _dumped:
        path, k = os.path.join(dump_dir, f"{base}_{k}"), k + 1
    _dumped.add(path)
    return path


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def jit(fun: Callable | None = None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        backend: str | None = None, optimize: bool = True, disable_passes: Iterable[str] = (),
        cache_size: int = DEFAULT_CACHE_SIZE):
    """Compile `fun`: trace it once per signature, optimize the graph and run it on `backend`.

    Usable as `jit(f)`, `@jit` or `@jit(static_argnums=...)`. `optimize=False` skips every
    optimization pass (the baseline passes are compared against); `disable_passes` skips the named
    ones (simplify, cse, dce, fusion, inplace). `donate_argnums` names arguments
    whose buffers the compiled function may reuse; the numpy backend never writes into arguments, so
    it is accepted and recorded for the in-place memory plan. At most `cache_size` signatures stay
    compiled (least recently used first out); every jit of the same function with the same options
    shares them, and inside another trace the function is traced once per signature.

    NumPy arrays that `fun` closes over (globals, closure variables) are constants of the graph: their
    values are copied when `fun` is traced, so mutating such an array afterwards does not change
    the results of later calls with the same signature (pass it as an argument if it changes).
    Outputs are fresh NumPy arrays: they never share memory with the arguments or with each other.
    To write them into arrays of your own instead, with no allocation, call the compiled function:
    `f.lower(*args).compile()(*args, out=...)` (see `Compiled.__call__`); `f(..., out=...)` passes
    `out` to `fun`, like any keyword argument.
    """
    if fun is None:
        return lambda f: jit(f, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, backend=backend, optimize=optimize,
                             disable_passes=disable_passes, cache_size=cache_size)
    if backend is not None and backend not in available_backends():
        get_backend(backend)  # fail early on an unknown name (a known one loads at the first compile)
    return Jitted(fun, static_argnums, static_argnames, donate_argnums, backend, optimize, disable_passes,
                  cache_size)


def make_graph(fun: Callable, static_argnums=()) -> Callable[..., Graph]:
    """`make_graph(f)(*args)` returns the Graph that tracing f on these arguments gives."""
    check_callable(fun, "make_graph")
    j = fun if isinstance(fun, Jitted) else Jitted(fun, static_argnums=static_argnums, optimize=False)

    def graph_of(*args, **kwargs) -> Graph:
        return j.lower(*args, **kwargs).graph

    return graph_of


def dump(fun: Callable, *args, path: str, stages: Iterable[str] | None = None, formats=None, **kwargs) -> list[str]:
    """Trace `fun` on the arguments and write every stage (or the named ones) under `path`."""
    check_callable(fun, "dump")
    j = fun if isinstance(fun, Jitted) else jit(fun)
    return j.lower(*args, **kwargs).dump(path, stages, formats)
