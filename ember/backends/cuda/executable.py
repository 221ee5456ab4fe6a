"""Running a CUDA program: on a GPU through CuPy, or as host C++ on the CPU (the host check).

One executor walks the program's launches on a `Device`: `CupyDevice` (CuPy arrays, `RawModule`
kernels on CuPy's current stream, contractions of float32/float64 through cuBLAS) or `HostDevice`
(NumPy arrays, the same kernels compiled as host C++ by host.py, every block's threads as real
threads). Calls on a GPU are asynchronous, as CuPy's own: the workspace belongs to one (thread,
stream) pair, so two calls in flight on different streams never share one, and calls on one stream
are ordered by it. Consts and literal operands are copied to the device once. A control-flow node is
one step whose runner (control.py) launches its bodies' programs, bound to the same workspace.
"""

from __future__ import annotations

import threading

import numpy as np

from ember.backends.cuda import control
from ember.backends.cuda.program import ControlRun, Program, Where
from ember.backends.cuda.render import Gemm, Scratch
from ember.tracer.ir import Graph


class HostDevice:
    """NumPy arrays and kernels compiled as host C++ (every block's threads as real threads)."""

    xp = np
    name = "cuda-host"

    def __init__(self, module):
        self.module = module

    def key(self):
        return threading.get_ident()

    empty = staticmethod(np.empty)

    def kernel(self, name: str):
        """A callable (grid, block, args) launching kernel `name` (grid and block: 1-tuples)."""
        launch = self.module.launch
        return lambda grid, block, args: launch(name, (grid[0], 1, 1), (block[0], 1, 1), args)

    def can_gemm(self, g: Gemm) -> bool:
        return False  # the host check runs the contraction kernel

    def upload(self, a: np.ndarray):
        return _host_aligned(np.require(a, requirements=["C", "A"]))

    def aligned(self, a) -> bool:
        return a.ctypes.data % ALIGN == 0

    def input(self, x, shape, dtype, k: int):
        a = _checked(np.asarray(x), shape, dtype, k)
        if not (a.flags.c_contiguous and a.flags.aligned and a.dtype.isnative):
            a = np.array(a, dtype=dtype.newbyteorder("="), order="C")
        return _host_aligned(a)


GEMM_MIN_WORK = 1 << 15  # multiply-adds per batch element from which a contraction goes to cuBLAS
ALIGN = 16  # bytes: kernels read and write identity-indexed buffers with 16-byte vector accesses


def _checked(a, shape: tuple, dtype: np.dtype, k: int):
    """`a` (input k), unless its shape or dtype is not the compiled function's (ValueError, TypeError)."""
    if a.shape != shape:
        raise ValueError(f"input {k} has shape {a.shape}; the compiled function takes {shape}")
    if a.dtype != dtype:
        raise TypeError(f"input {k} has dtype {a.dtype}; the compiled function takes {dtype}")
    return a


def _host_aligned(a: np.ndarray) -> np.ndarray:
    """`a`, or a copy of it starting at a 16-byte boundary."""
    if a.ctypes.data % ALIGN == 0:
        return a
    raw = np.empty(a.nbytes + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    out = raw[skip:skip + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


class CupyDevice:
    """CuPy arrays on the current device; kernels from a RawModule, launched on the current stream."""

    name = "cuda"

    def __init__(self, module):
        import cupy

        self.xp, self.module, self._ndarray = cupy, module, cupy.ndarray
        self._stream = cupy.cuda.get_current_stream
        self.empty = cupy.ndarray  # C order, from CuPy's memory pool (cupy.empty without its wrapper)

    def key(self):
        return threading.get_ident(), self._stream().ptr

    def kernel(self, name: str):
        """The RawKernel `name`: called as (grid, block, args), on the current stream."""
        return self.module.get_function(name)

    def can_gemm(self, g: Gemm) -> bool:
        """cuBLAS takes float32 and float64 contractions of at least `GEMM_MIN_WORK` multiply-adds per
        batch element; the others run the contraction kernel (one launch, where CuPy's matmul costs tens
        of microseconds of Python and cuBLAS gains nothing on a 16x4x64 product)."""
        dt = g.out.dtype
        if dt not in (np.float32, np.float64) or g.lhs.dtype != dt or g.rhs.dtype != dt:
            return False
        (lc, rc), (lb, rb) = g.step.dimension_numbers
        batch = int(np.prod([g.lhs.shape[d] for d in lb], dtype=np.int64))
        work = int(np.prod(g.lhs.shape, dtype=np.int64)) * int(np.prod(g.rhs.shape, dtype=np.int64))
        contracted = int(np.prod([g.lhs.shape[d] for d in lc], dtype=np.int64))
        return work // max(batch * batch * max(contracted, 1), 1) >= GEMM_MIN_WORK

    def gemm(self, g: Gemm, lhs, rhs, out) -> None:
        """A contraction through cuBLAS (CuPy's matmul): operands as (batch, M, K) and (batch, K, N)
        views or copies, the result written into `out` viewed as (batch, M, N)."""
        (lc, rc), (lb, rb) = g.step.dimension_numbers
        lf = [d for d in range(len(g.lhs.shape)) if d not in lc and d not in lb]
        rf = [d for d in range(len(g.rhs.shape)) if d not in rc and d not in rb]
        size = lambda shape, dims: int(np.prod([shape[d] for d in dims], dtype=np.int64))  # noqa: E731
        bsz, m, n, k = size(g.lhs.shape, lb), size(g.lhs.shape, lf), size(g.rhs.shape, rf), size(g.lhs.shape, lc)
        a = lhs.reshape(g.lhs.shape).transpose([*lb, *lf, *lc]).reshape(bsz, m, k)
        b = rhs.reshape(g.rhs.shape).transpose([*rb, *rc, *rf]).reshape(bsz, k, n)
        self.xp.matmul(a, b, out=out.reshape(bsz, m, n))

    def upload(self, a: np.ndarray):
        return self.xp.asarray(np.require(a, requirements=["C", "A"]))  # a fresh allocation: 256-byte aligned

    def aligned(self, a) -> bool:
        return a.data.ptr % ALIGN == 0

    def input(self, x, shape, dtype, k: int):
        if (type(x) is self._ndarray and x.shape == shape and x.dtype == dtype
                and getattr(x, "_c_contiguous", False) and not x.data.ptr % ALIGN):  # the common case, cheaply
            return x
        xp = self.xp
        if isinstance(x, xp.ndarray):
            _checked(x, shape, dtype, k)
            return x if x.flags.c_contiguous and x.data.ptr % ALIGN == 0 else x.copy()
        a = _checked(np.asarray(x), shape, dtype, k)
        return xp.asarray(np.ascontiguousarray(a, dtype=dtype.newbyteorder("=")))


class _Workspace:
    """One (thread, stream)'s workspace and its typed views, made once."""

    def __init__(self, xp, nbytes: int):
        self.raw = xp.empty(max(nbytes, 1), np.uint8)
        self.views: dict = {}
        self.launches = None

    def view(self, offset: int, shape, dtype):
        key = (offset, shape, dtype)
        got = self.views.get(key)
        if got is None:
            n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            got = self.views[key] = self.raw[offset:offset + n].view(dtype).reshape(shape)
        return got


class _Loaded:
    """A program's consts and literal operands on the device (uploaded once per executable), and the
    bodies of its control-flow nodes loaded alike (`bodies[j]`: those of run j)."""

    def __init__(self, program: Program, device):
        g = program.graph
        self.program = program
        self.fixed = {"const": [device.upload(np.asarray(c, dtype=v.aval.dtype)) for v, c in zip(g.consts,
                                                                                                g.const_values)],
                      "literal": [device.upload(a) for a in program.literals]}
        self.bodies = [[_Loaded(b, device) for b in run.bodies] if isinstance(run, ControlRun) else []
                       for run in program.runs]


class _Launches:
    """A loaded program's launches resolved against one workspace (its values from byte `base` on):
    `run(ins, outs)` launches them on the call's inputs and outputs. A body of a control-flow node is
    one of these too, run by its node's runner (control.py) once per trip."""

    def __init__(self, loaded: _Loaded, device, ws: _Workspace | None, base: int = 0):
        self.device, self.ws, self.base = device, ws, base
        self.program, self.fixed = loaded.program, loaded.fixed
        self.copies = self.program.copies
        graph = self.program.graph
        self.n_in, self.n_out = len(graph.inputs), len(graph.outputs)
        self.values: list = []  # every argument but the call's inputs and outputs, resolved once
        self.steps = []
        for run, bodies in zip(self.program.runs, loaded.bodies):
            if isinstance(run, ControlRun):
                self.steps.append(self._control(run, bodies))
            else:
                self.steps.extend(self._kernels(run))

    def _index(self, w: Where, shape, dtype) -> int:
        """Where a value is found in a call's `ins + outs + values`: the call's input or output array, or
        a workspace view, const or literal added to `values`."""
        if w.kind == "in":
            return w.at
        if w.kind == "out":
            return self.n_in + w.at
        if w.kind == "ws":
            return self._value(self.ws.view(self.base + w.at, shape, dtype))
        return self._value(self.fixed[w.kind][w.at].reshape(shape))

    def _value(self, value) -> int:
        self.values.append(value)
        return self.n_in + self.n_out + len(self.values) - 1

    def _kernels(self, run) -> list:
        """The launches of one node as steps (kernel, grid, block, argument indices into a call's
        `ins + outs + values`, the arguments themselves where `_fixed`)."""
        dev, steps = self.device, []
        for launch in run.launches:
            names: tuple = ()
            if isinstance(launch, Gemm):
                if dev.can_gemm(launch):
                    names, call = (launch.step.lhs, launch.step.rhs, launch.step.out), _gemm_call(dev, launch)
                    grid = block = None
                launch = launch.fallback
            if not names:
                names, call = launch.args, dev.kernel(launch.kernel)
                grid, block = (launch.grid,), (launch.block,)
            index = []
            for a in names:
                if isinstance(a, str):
                    index.append(self._index(*run.where[a]))
                elif isinstance(a, Scratch):
                    index.append(self._value(self.ws.view(self.base + run.scratch + a.offset, (a.count,), a.dtype)))
                else:
                    index.append(self._value(a))
            steps.append((call, grid, block, tuple(index), self._fixed(index)))
        return steps

    def _fixed(self, index) -> tuple | None:
        """The arguments at `index` when none is the call's own input or output (resolved once), else None."""
        first = self.n_in + self.n_out
        return None if any(i < first for i in index) else tuple(self.values[i - first] for i in index)

    def _control(self, run: ControlRun, bodies: list) -> tuple:
        """A control node as one step: its runner called on its operands and results (found as a
        kernel's arguments are), its argument lists prepared once here when none is the call's own."""
        node, dev = run.node, self.device
        avals = [a.aval for a in node.inputs] + [v.aval for v in node.outputs]
        index = tuple(self._index(w, tuple(a.shape), np.dtype(a.dtype)) for w, a in zip(run.operands + run.results,
                                                                                          avals))
        buffers = [self.ws.view(self.base + w.at, shape, dtype) for w, shape, dtype in run.buffers]
        bound = [_Launches(b, dev, self.ws, self.base + run.bodies_at) for b in bodies]
        loop = control.runner(node, bound, buffers, dev.xp)
        fixed = self._fixed(index)
        return _ControlStep(loop, None if fixed is None else loop.prepare(fixed)), None, None, index, fixed

    def run(self, ins: list, outs: list) -> None:
        """Every launch in order, then the outputs no kernel wrote into their own array."""
        get = (ins + outs + self.values).__getitem__
        for call, grid, block, index, fixed in self.steps:
            call(grid, block, tuple(map(get, index)) if fixed is None else fixed)
        if self.copies:
            self._copy_outputs(ins, outs)

    def _copy_outputs(self, ins: list, outs: list) -> None:
        """Outputs no kernel wrote into their own array: inputs, consts, literals, repeats."""
        arrays = {"in": ins, "out": outs, **self.fixed}
        for i, src in enumerate(self.program.outputs):
            if src is not None:
                out = outs[i]
                value = (self.ws.view(self.base + src.at, out.shape, out.dtype) if src.kind == "ws"
                         else arrays[src.kind][src.at])
                self.device.xp.copyto(out, value.reshape(out.shape))


class _ControlStep:
    """A control node's runner as a step: called with the node's operands and results, or with none
    when they were `prepared` once (every one in the workspace, a const or a literal)."""

    def __init__(self, loop, prepared=None):
        self.loop, self.prepared = loop, prepared

    def __call__(self, grid, block, args) -> None:
        self.loop.run(self.loop.prepare(args) if self.prepared is None else self.prepared)


class CudaExecutable:
    """`program` on `device`: called with arrays (NumPy, or CuPy on a GPU), returns the device's arrays
    (or writes the `out=` arrays given)."""

    source_suffix = ".cu"

    @property
    def compiler(self) -> str:
        """What compiled the source (Timings names it)."""
        return "NVRTC" if isinstance(self.device, CupyDevice) else "g++ (host C++)"

    def __init__(self, graph: Graph, program: Program, device, source: str, compile_seconds: float = 0.0,
                 from_cache: bool = False):
        self._graph, self.program, self.device = graph, program, device
        self.source = source
        self.compile_seconds, self.from_cache = compile_seconds, from_cache
        self._in_specs = [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in graph.inputs]
        self._outs = [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in graph.outputs]
        self._loaded = _Loaded(program, device)
        self._workspaces: dict = {}
        self._lock = threading.Lock()
        # a program without intermediates in memory has one launch plan for every thread and stream
        self._shared = None if program.workspace_bytes else _Launches(self._loaded, device, None)
        self._empty = device.empty

    @property
    def kernels(self) -> list[str]:
        return [k.text for k in self.program.kernels.values()]

    def _launches(self) -> _Launches:
        """This (thread, stream)'s launches, over its own workspace (made on its first call)."""
        key = self.device.key()
        ws = self._workspaces.get(key)
        if ws is None:
            with self._lock:
                ws = _Workspace(self.device.xp, self.program.workspace_bytes)
                ws.launches = _Launches(self._loaded, self.device, ws)
                self._workspaces[key] = ws
        return ws.launches

    def __call__(self, *args, out=None) -> list:
        if len(args) != len(self._in_specs):
            raise TypeError(f"the executable takes {len(self._in_specs)} arrays, got {len(args)}")
        dev = self.device
        take = dev.input
        ins = [take(x, s, d, k) for k, (x, (s, d)) in enumerate(zip(args, self._in_specs))]
        empty = self._empty
        outs = [empty(s, d) for s, d in self._outs] if out is None else [
            o if dev.aligned(o) else empty(o.shape, o.dtype) for o in out]
        (self._shared or self._launches()).run(ins, outs)
        if out is not None:
            for given, o in zip(out, outs):
                if o is not given:  # a misaligned out= array: the results went to an aligned one first
                    dev.xp.copyto(given, o)
            return list(out)
        return outs


def _gemm_call(dev, g: Gemm):
    """A step calling `dev.gemm` for `g` on its (lhs, rhs, out) arguments."""
    return lambda grid, block, operands: dev.gemm(g, *operands)
