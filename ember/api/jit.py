"""`jit`: trace once per signature, optimize, compile with a backend, cache; `make_graph`, `dump`.

The cache key is (pytree structure, shapes, dtypes and weak types of the array leaves, static argument
values, backend, optimize); a call with a new key retraces. Inside another trace a jitted function is
simply inlined, so transforms see through it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from collections import namedtuple
from collections.abc import Callable, Iterable

import numpy as np

from ember.api.tracing import fun_name, leaf_avals, to_array, trace_pytree
from ember.backends import default_backend, get_backend
from ember.errors import ArgumentError, ArgumentValueError, TracerEscapeError, user_location
from ember.passes.pipeline import optimize as run_pipeline
from ember.passes.stages import Stage, StageRecorder, recording
from ember.tracer.ir import Graph
from ember.tracer.trace import Tracer, is_tracing
from ember.tree import PyTreeDef, tree_flatten, tree_unflatten

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "size"])


def _as_tuple(x) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    return tuple(x)


class Lowered:
    """A traced and optimized function: its stages, graphs, text, dumps, and `compile()`."""

    def __init__(self, name: str, stages: list[Stage], in_tree: PyTreeDef, out_tree: PyTreeDef,
                 backend: str, split_args: Callable):
        self.name = name
        self.stages = stages
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.backend = backend
        self._split_args = split_args
        self._executable = None

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
        """The graph after the optimization pipeline (the traced one when optimize=False)."""
        return self.stages[-1].graph

    def text(self, stage: str = "optimized") -> str:
        from ember.viz.text import stage_text

        s = self.stages[-1] if stage == "optimized" else self.stage(stage)
        return stage_text(s)

    def dump(self, path: str, stages: Iterable[str] | None = None, formats=None) -> list[str]:
        """Write the chosen stages (all by default) as text, DOT and SVG files under `path`."""
        from ember.viz.dump import write_stages

        chosen = self.stages if stages is None else [self.stage(n) for n in stages]
        return write_stages(chosen, path, formats, name=self.name)

    def source(self) -> str:
        """The code the backend generated for the optimized graph (Python for the numpy backend)."""
        self.compile()
        src = getattr(self._executable, "source", None)
        if src is None:
            raise NotImplementedError(f"the {self.backend} backend does not expose generated code")
        return src

    def compile(self) -> Compiled:
        if self._executable is None:
            self._executable = get_backend(self.backend).compile(self.optimized)
        return Compiled(self)


class Compiled:
    """A compiled function for one signature; call it with arguments of that signature."""

    def __init__(self, lowered: Lowered):
        self.lowered = lowered

    def __call__(self, *args, **kwargs):
        low = self.lowered
        _, dyn, _ = low._split_args(args, kwargs)
        leaves, tree = tree_flatten(dyn)
        avals = leaf_avals(leaves, dyn)
        expected = low.graph.in_avals
        if tree != low.in_tree or any(not a.same_type(b) for a, b in zip(avals, expected)):
            got = ", ".join(a.str_short() for a in avals)
            want = ", ".join(a.str_short() for a in expected)
            raise ArgumentError(f"compiled {low.name} takes ({want}) structured as {low.in_tree}; got ({got}) "
                                f"structured as {tree}", user_location())
        outs = low._executable(*[to_array(x) for x in leaves])
        return tree_unflatten(low.out_tree, outs)


class _Entry:
    __slots__ = ("executable", "out_tree", "lowered")

    def __init__(self, executable, out_tree, lowered):
        self.executable, self.out_tree, self.lowered = executable, out_tree, lowered


class Jitted:
    """The result of `jit(fun)`: call it, `lower(...)` it, or look at `cache_info()`."""

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(), donate_argnums=(),
                 backend: str | None = None, optimize: bool = True):
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._backend = backend
        self._optimize = optimize
        nums = {int(i) for i in _as_tuple(static_argnums)}
        names = set(_as_tuple(static_argnames))
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        nums = {i if i >= 0 else len(positional) + i for i in nums}
        for i in nums:
            if i < len(positional):
                names.add(positional[i])
        for n in list(names):
            if n in positional:
                nums.add(positional.index(n))
        self._static_nums = frozenset(nums)
        self._static_names = frozenset(names)
        self.donate_argnums = tuple(sorted(int(i) for i in _as_tuple(donate_argnums)))
        self._cache: dict = {}
        self._fast: dict = {}  # (backend, (shape, dtype) per array argument) -> the same entries
        self._hits = self._misses = 0

    # -- arguments -------------------------------------------------------------------------------
    def _split_args(self, args: tuple, kwargs: dict):
        """(static key, dynamic (args, kwargs), the static values to put back into the call)."""
        if not self._static_nums and not self._static_names:
            return (), (args, kwargs), None
        static_pos = tuple((i, args[i]) for i in sorted(self._static_nums) if i < len(args))
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self._static_names))
        dyn_args = tuple(a for i, a in enumerate(args) if i not in self._static_nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self._static_names}
        key = (static_pos, static_kw)
        try:
            hash(key)
        except TypeError:
            bad = next(v for _, v in static_pos + static_kw if not _hashable(v))
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

    def _call_fun(self, statics, dyn_args, dyn_kwargs):
        if statics is None:
            return self._fun(*dyn_args, **dyn_kwargs)
        static_pos, static_kw = statics
        args = list(dyn_args)
        for i, v in static_pos:
            args.insert(i, v)
        return self._fun(*args, **dyn_kwargs, **dict(static_kw))

    # -- calls -----------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if is_tracing():
            return self._fun(*args, **kwargs)
        backend = self._backend or default_backend()
        # Fast path for the common call f(array, array, ...): no pytree flattening.
        fast_key = None
        if not kwargs and not self._static_nums and all(type(x) is np.ndarray for x in args):
            fast_key = (backend,) + tuple((x.shape, x.dtype) for x in args)
            entry = self._fast.get(fast_key)
            if entry is not None:
                self._hits += 1
                return tree_unflatten(entry.out_tree, entry.executable(*args))
        static_key, dyn, _ = self._split_args(args, kwargs)
        leaves, in_tree = tree_flatten(dyn)
        if not all(_is_array_leaf(x) for x in leaves):
            self._check_leaves(args, kwargs)
        arrays = [to_array(x) for x in leaves]
        key = (in_tree, tuple((a.shape, a.dtype, not isinstance(x, np.ndarray) and not isinstance(x, np.generic))
                              for a, x in zip(arrays, leaves)), static_key, backend)
        entry = self._cache.get(key)
        if entry is None:
            self._misses += 1
            lowered = self.lower(*args, **kwargs)
            lowered.compile()
            entry = self._cache[key] = _Entry(lowered._executable, lowered.out_tree, lowered)
            dump_dir = os.environ.get("EMBER_DUMP_DIR")
            if dump_dir:
                name = getattr(self, "__name__", fun_name(self._fun))
                lowered.dump(_dump_path(dump_dir, f"{_safe(name)}_{self._misses}"))
        else:
            self._hits += 1
        if fast_key is not None:
            self._fast[fast_key] = entry
        return tree_unflatten(entry.out_tree, entry.executable(*arrays))

    def lower(self, *args, **kwargs) -> Lowered:
        """Trace and optimize for these arguments, without running; see Lowered."""
        static_key, dyn, statics = self._split_args(args, kwargs)
        dyn_args, dyn_kwargs = dyn
        if not all(_is_array_leaf(x) for x in tree_flatten(dyn)[0]):
            self._check_leaves(args, kwargs)

        def fun(*a, **kw):
            return self._call_fun(statics, a, kw)

        fun.__name__ = fun_name(self._fun)
        with contextlib.suppress(TypeError, ValueError):  # the names errors give the dynamic arguments
            sig = inspect.signature(self._fun)
            fun.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values()
                                                        if p.name not in self._static_names])
        with recording(StageRecorder()) as rec:
            graph, _, in_tree, out_tree = trace_pytree(fun, dyn_args, dyn_kwargs)
            rec.add("traced", graph)
            if self._optimize:
                run_pipeline(graph)
        return Lowered(fun_name(self._fun), rec.stages, in_tree, out_tree, self._backend or default_backend(),
                       self._split_args)

    def cache_info(self) -> CacheInfo:
        """hits: calls served from the cache; misses: traces (one per new signature); size: entries."""
        return CacheInfo(self._hits, self._misses, len(self._cache))

    def clear_cache(self) -> None:
        self._cache.clear()
        self._fast.clear()
        self._hits = self._misses = 0

    def __repr__(self):
        return f"<jit of {fun_name(self._fun)}>"


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def _is_array_leaf(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic, bool, int, float))


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
        backend: str | None = None, optimize: bool = True):
    """Compile `fun`: trace it once per signature, optimize the graph and run it on `backend`.

    Usable as `jit(f)`, `@jit` or `@jit(static_argnums=...)`. `optimize=False` skips every
    optimization pass (the baseline passes are compared against). `donate_argnums` names arguments
    whose buffers the compiled function may reuse; the numpy backend never writes into arguments, so
    it is accepted and recorded for the in-place memory plan.

    NumPy arrays that `fun` closes over (globals, closure variables) are constants of the graph: their
    values are copied when `fun` is traced, so mutating such an array afterwards does not change
    the results of later calls with the same signature (pass it as an argument if it changes).
    Outputs are fresh NumPy arrays: they never share memory with the arguments or with each other.
    """
    if fun is None:
        return lambda f: jit(f, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, backend=backend, optimize=optimize)
    if backend is not None:
        get_backend(backend)  # fail early on an unknown name
    return Jitted(fun, static_argnums, static_argnames, donate_argnums, backend, optimize)


def make_graph(fun: Callable, static_argnums=()) -> Callable[..., Graph]:
    """`make_graph(f)(*args)` returns the Graph that tracing f on these arguments gives."""
    j = fun if isinstance(fun, Jitted) else Jitted(fun, static_argnums=static_argnums, optimize=False)

    def graph_of(*args, **kwargs) -> Graph:
        return j.lower(*args, **kwargs).graph

    return graph_of


def dump(fun: Callable, *args, path: str, stages: Iterable[str] | None = None, formats=None, **kwargs) -> list[str]:
    """Trace `fun` on the arguments and write every stage (or the named ones) under `path`."""
    j = fun if isinstance(fun, Jitted) else jit(fun)
    return j.lower(*args, **kwargs).dump(path, stages, formats)
