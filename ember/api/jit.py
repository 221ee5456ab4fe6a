"""`jit`: trace once per signature, optimize, compile with a backend, cache; `make_graph`, `dump`.

The cache key is (pytree structure, shapes, dtypes and weak types of the array leaves, static argument
types and values, backend); a call with a new key retraces. A call with plain ndarrays only (no
keywords, no statics) takes a hit path keyed by their shapes and dtypes, with no pytree work; a Python or
NumPy scalar among them is keyed by its type (which fixes its dtype and weak type) and converted to
the 0-d array the executable takes.
Caches are bounded (LRU) and shared: they belong to the underlying function (held weakly) and the
options, not to the wrapper object (api/cache.py). Inside another trace a jitted function's graph (traced
once per signature) is re-emitted, so transforms see through it. What `lower` returns is in
api/lowered.py; EMBER_DUMP_DIR's dumps in api/dumps.py.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import time
import types
import weakref
from collections.abc import Callable, Iterable

import numpy as np

import ember.config as config
from ember.api import pickling
from ember.api.cache import DEFAULT_CACHE_SIZE, CacheInfo, Entry, ScalarHit, shared_cache
from ember.api.dumps import dump_when_asked
from ember.api.lowered import PY_SCALAR_DTYPES, Lowered, Statics
from ember.api.tracing import (
    ARRAY_LEAF_TYPES,
    check_callable,
    fun_name,
    is_hashable,
    leaf_avals,
    to_array,
    trace_pytree,
)
from ember.backends import available_backends, default_backend, get_backend
from ember.backends.device_arrays import DEVICE_TYPES, is_device_array
from ember.errors import (
    ArgumentValueError,
    TracerEscapeError,
    api_boundary,
    filter_traceback,
    user_location,
)
from ember.passes.pipeline import disabled_passes
from ember.passes.pipeline import optimize as run_pipeline
from ember.passes.stages import StageRecorder, recording
from ember.tracer.array import Array
from ember.tracer.ir import Graph
from ember.tracer.trace import Tracer, eval_graph, trace_state  # trace_state: read directly on the hit path
from ember.tree import tree_flatten, tree_unflatten


def _as_tuple(x) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    return tuple(x)


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
        self._options = dict(static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, backend=backend, optimize=optimize,
                             disable_passes=tuple(disable_passes), cache_size=cache_size)
        self._backend = backend
        self._disabled = disabled_passes(optimize, disable_passes)
        if not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"jit cache_size must be a positive int, got {cache_size!r}")
        self._static_nums, self._static_names = _static_numbers(fun, static_argnums, static_argnames)
        self.donate_argnums = tuple(sorted(int(i) for i in _as_tuple(donate_argnums)))
        options = ("jit", self._static_nums, self._static_names, self.donate_argnums, backend, self._disabled)
        root, chain = cache_key if cache_key is not None else (fun, ())
        self._key = (root, chain + (options,))
        # one cache per mode: 64-bit mode changes what tracing gives (Python scalars, default dtypes);
        # `_cache` is the current mode's, swapped when the mode switches (the hit path reads no flag)
        self._caches = (shared_cache(root, self._key[1], cache_size),
                        shared_cache(root, self._key[1] + ("x64",), cache_size))
        self._cache = self._caches[config.x64_enabled]
        _live.add(self)

    def _cache_key(self):
        """(the underlying function, the transforms and options over it): what the cache is shared by."""
        return self._key

    def __reduce__(self):
        """Pickled as its function and options (by name where importable), never compiled code or a cache."""
        return pickling.reduce(self, _rebuild_jitted, self._fun, self._options)

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
            if trace_state.stack:
                return self._call_traced(args, kwargs)
            backend = self._backend or _backend_of_env.get(_read_backend_env()) or _default_backend()
            if kwargs:
                return self._call_slow(backend, args, kwargs)
            # The hit path for f(array, ...), about 0.7 us: a key of each array's shape and dtype (of each
            # other argument's type: a scalar's type fixes its dtype and weak type), one lookup, the executable
            # without the checks' wrapper unless a check option is on.
            if len(args) == 1:
                x = args[0]
                sig = ((backend, x.shape, x.dtype) if type(x) is Array or type(x) is np.ndarray
                       or type(x) in DEVICE_TYPES else (backend, type(x)))
            else:
                sig = (backend,)
                for x in args:
                    sig += ((x.shape, x.dtype) if type(x) is Array or type(x) is np.ndarray or type(x) in DEVICE_TYPES
                            else (type(x),))
            cache = self._cache
            entry = cache.fast.get(sig)
            if entry is None:
                return self._call_slow(backend, args, kwargs)
            if entry.__class__ is ScalarHit:  # scalars converted to 0-d arrays (np.array: about 0.1 us)
                try:
                    args = (_array(args[0], entry.first),) if entry.first is not None else entry.arrays(args)
                except OverflowError:  # a Python int out of the default int's range: the slow path says so
                    return self._call_slow(backend, args, kwargs)
                entry = entry.entry
            entry.used = cache.clock = cache.clock + 1  # a hit (see Cache.hits)
            if config.check_oracle or config.debug_nans or config.debug_infs:
                outs = entry.executable(*args)
                return outs[0] if entry.single else tree_unflatten(entry.out_tree, outs)
            return entry.call(*args)
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
        key = (in_tree, tuple((a.shape, a.dtype, not isinstance(x, (np.ndarray, np.generic)) and not is_device_array(x))
                              for a, x in zip(arrays, leaves)), static_key, backend)
        entry = cache.entries.get(key)
        if entry is None:
            entry = self._compile(key, args, kwargs)
        else:
            cache.touch(entry)
        if key in cache.entries:
            fast = _fast_key(backend, args, kwargs, arrays, self._static_nums)
            if fast is not None and fast[0] not in cache.fast:
                cache.fast[fast[0]] = entry if fast[1] is None else ScalarHit(entry, fast[1])
                entry.fast_keys.append(fast[0])
        return _run(entry, arrays)

    def _compile(self, key, args: tuple, kwargs: dict) -> Entry:
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
                entry = Entry(lowered._executable, lowered.out_tree, lowered, key)
                cache.add(entry)
        finally:
            with cache._guard:
                cache._locks.pop(key, None)
        dump_when_asked(lowered, getattr(self, "__name__", fun_name(self._fun)), cache.misses)
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
        info = Statics(tuple(i for i, _ in static_pos), frozenset(k for k, _ in static_kw) | self._static_names,
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
        for cache in self._caches:
            cache.clear()

    def __repr__(self):
        return f"<jit of {fun_name(self._fun)}>"


_live: weakref.WeakSet = weakref.WeakSet()  # every Jitted, to swap its cache when the mode switches


def _switch_mode(on: bool) -> None:
    for jitted in list(_live):
        jitted._cache = jitted._caches[on]


config.watch("ember_enable_x64", _switch_mode)


def _rebuild_jitted(fun: Callable, options: dict) -> Jitted:
    return Jitted(fun, **options)


def _run(entry: Entry, arrays) -> object:
    """Run a cached entry: the backend's executable itself unless a debug or oracle check is on."""
    if config.check_oracle or config.debug_nans or config.debug_infs:
        outs = entry.executable(*arrays)
        return outs[0] if entry.single else tree_unflatten(entry.out_tree, outs)
    return entry.call(*arrays)


def _is_array_leaf(x) -> bool:
    return isinstance(x, ARRAY_LEAF_TYPES) or is_device_array(x)


_array = np.array  # a local name: 30 ns less than np.array on the hit path




def _fast_key(backend: str, args: tuple, kwargs: dict, arrays: list, static_nums) -> tuple | None:
    """(the hit path's key, the dtypes to convert scalar arguments to or None when there are none) for
    a positional call of plain ndarrays passed to the executable as they are and of Python or NumPy
    scalars; None when the call cannot take the hit path."""
    if kwargs or static_nums or len(arrays) != len(args):
        return None
    sig, convert = (backend,), []
    for x, a in zip(args, arrays):
        if ((type(x) is np.ndarray or is_device_array(x)) and a is x) or (
                type(x) is Array and a.base is (x if x.base is None else x.base)):  # (an Array's data, as it is)
            sig += (x.shape, x.dtype)
            convert.append(None)
        elif type(x) in PY_SCALAR_DTYPES or isinstance(x, np.generic):
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


def jit(fun: Callable | None = None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        backend: str | None = None, optimize: bool = True, disable_passes: Iterable[str] = (),
        cache_size: int = DEFAULT_CACHE_SIZE):
    """Compile `fun`: trace it once per signature, optimize the graph and run it on `backend`.

    Usable as `jit(f)`, `@jit` or `@jit(static_argnums=...)`. `optimize=False` skips every
    optimization pass (the baseline passes are compared against); `disable_passes` skips the named
    ones (simplify, cse, hoist, dce, fusion, inplace). `donate_argnums` names arguments
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
