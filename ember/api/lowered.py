"""What `Jitted.lower` returns and what it compiles to: `Lowered` (the recorded stages, their text,
dumps and reports, `compile()`), `Compiled` (one signature's executable, called with its dynamic
arguments, `out=`) and `Timings` (where the time to make it went)."""

from __future__ import annotations

import time
from collections import namedtuple
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

import ember.config as config
from ember.api.compile import compile_graph
from ember.api.tracing import leaf_avals, to_array
from ember.backends import get_backend, one_time_seconds
from ember.backends.device_arrays import DEVICE_TYPES
from ember.backends.outputs import check_out
from ember.errors import ArgumentError, ArgumentValueError, user_location
from ember.passes.stages import Stage
from ember.tracer import dtypes
from ember.tracer.array import Array
from ember.tracer.ir import Graph
from ember.tree import PyTreeDef, tree_flatten, tree_flatten_with_keystr, tree_unflatten

if TYPE_CHECKING:
    import networkx

    from ember.viz.explain import Explanation
    from ember.viz.memory_report import MemoryReport

# What `Lowered.compile()` was told about static arguments: their positions and names, and how many
# dynamic positional arguments the call had (a compiled call rejects statics passed again).
Statics = namedtuple("Statics", ["positions", "names", "n_dynamic"])
PY_SCALAR_DTYPES = {float: dtypes.float_, int: dtypes.int_, bool: dtypes.bool_}  # as dtypes.scalar_dtype
_array = np.array  # a module-level name: 30 ns less than np.array on a compiled call's path


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
    compiler: str = "LLVM"  # what `native` ran: the backend's `compiler` (LLVM, NVRTC, g++)

    @property
    def total(self) -> float:
        """trace + optimize + compile + one_time (those that ran)."""
        return sum(t for t in (self.trace, self.optimize, self.compile, self.one_time) if t is not None)

    def __str__(self) -> str:
        def ms(s: float | None) -> str:
            return "not yet" if s is None else f"{s * 1e3:.2f} ms"

        native = "" if self.native is None else \
            f" ({'disk cache load' if self.from_cache else self.compiler} {ms(self.native)} of it)"
        text = f"trace {ms(self.trace)}, optimize {ms(self.optimize)}, compile {ms(self.compile)}{native}"
        if self.one_time is not None:
            text += f"; once per process: {ms(self.one_time)} (loading the backend, binding libraries)"
        return text


class Lowered:
    """A traced and optimized function: its stages, graphs, text, dumps, and `compile()`."""

    def __init__(self, name: str, stages: list[Stage], in_tree: PyTreeDef, out_tree: PyTreeDef,
                 backend: str, statics: Statics, disabled: tuple[str, ...] = (),
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

    def to_networkx(self, stage: str = "optimized") -> networkx.DiGraph:
        """The graph of a recorded stage (one of `stage_names`; "optimized": the last) as a
        `networkx.DiGraph` for analyses of your own: a networkx node per input, const and graph node,
        keyed by the name `text(stage)` prints, with `prim`, `aval`, `loc` and `node` attributes, and
        an edge from producer to consumer per value read (see ember/viz/nxgraph.py)."""
        from ember.viz.nxgraph import graph_to_networkx

        s = self.stages[-1] if stage == "optimized" else self.stage(stage)
        return graph_to_networkx(s.graph, self.name, s.name)

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
        reuse and by donation, a per-buffer table (`print` it) and `.plot(path)` of the timeline; once
        compiled, also the arena the backend holds per call (`arena_bytes`: the plan's buffers and
        `scratch_bytes` of kernel scratch such as im2col's windows), where the backend says."""
        import dataclasses

        from ember.viz.memory_report import MemoryReport

        report = MemoryReport.of(self.stages[-1].plan, self.optimized)
        exe = getattr(self._executable, "executable", self._executable)
        arena = getattr(exe, "workspace_bytes", None)
        return report if arena is None else dataclasses.replace(report, arena_bytes=int(arena))

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
                       getattr(exe, "from_cache", None), self._one_time_seconds, getattr(exe, "compiler", "LLVM"))


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
        self._scalar_types = tuple(frozenset(t for t, d in PY_SCALAR_DTYPES.items() if d == a.dtype) | {a.dtype.type}
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
                if (type(x) is not np.ndarray and type(x) not in DEVICE_TYPES) or x.shape != shape or x.dtype != dtype:
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
            if type(x) is np.ndarray or type(x) is Array:
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
            paths = tree_flatten_with_keystr(tree_unflatten(low.out_tree, [0] * low.out_tree.num_leaves))[0]
            self._out_names = [f"out{p}" for p, _ in paths]
        if self._single and (isinstance(out, np.ndarray) or type(out) in DEVICE_TYPES):
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
