"""A kernel description (kernel.py) rendered as CUDA C kernels and the launches that run it.

`render_kernel(kernel, aliased)` gives a `Rendered`: kernel definitions (named by a hash of their text,
so equal kernels of different graphs are one), the launches in order, the scratch they need and the
math functions they call. Each step of the description becomes:

- a `Loop`: one kernel mapped onto threads by `schedule.gpu_grid` (the shared description and its
  index forms, a GPU mapping decided by shape alone). Without reductions it is a grid-stride loop, one
  point per thread; with reductions each work item (a kept index and a chunk of the reduced space) is
  walked by 1, 32 or 256 lanes, each lane folding its elements (float sums in double, float64 ones
  compensated), then a warp-shuffle tree and, across warps, a tree through shared memory. With chunks,
  a second kernel folds each kept index's partials in chunk order. The tree shapes and the chunking
  depend on the shape alone, so results are identical run to run on any device.
- a `Contraction`: a `Gemm` launch that a GPU runs through cuBLAS where it can (float32/64), with a
  kernel (one thread per output element, the contraction walked in order) for the other dtypes and
  for host execution.
- a `Convolution`: one kernel, one thread per output element summing its window (cuda/conv.py); a
  `WindowReduce` likewise folds its window (cuda/windows.py).
- an `ArgReduce`: one kernel, a (value, index) fold per lane and the same trees.
- a `Factorization` (cholesky, triangular_solve, lu): kernels of linalg.py, a block per matrix or a
  thread per right-hand side.
- a `Scatter`: the operand copied to the output, then one thread per update element; `add` adds with
  atomics, `mul`, `min` and `max` (and `add` below 4 bytes) combine through a compare-and-swap loop
  (`ember_atomic_update`) by the elementwise rule of their primitive (float sums and products may then
  vary run to run in the last bits, and a min/max tie of +0 and -0 in its sign: the kernels that may),
  `replace` lets the last update in row-major order win through an atomicMax claim, as the reference does.
- a `Cumulative` or a `Sort`: one thread per row (cuda/sort.py).

Values are computed in register types and stored in memory types (types.py); scalar ops come from
`scalar.py`'s table and transcendental functions from `mathlib.py`, keyed by name in `need`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ember.backends.cuda import conv as conv_rules
from ember.backends.cuda import linalg
from ember.backends.cuda import scalar as S
from ember.backends.cuda import sort as sort_rules
from ember.backends.cuda import windows as window_rules
from ember.backends.cuda.types import memory_type, register_type
from ember.backends.kernel import (
    ArgReduce,
    Buffer,
    Contraction,
    Convolution,
    Cumulative,
    Factorization,
    Kernel,
    Loop,
    Op,
    Scatter,
    Sort,
    WindowReduce,
    strides,
)
from ember.backends.kernel_index import Ix
from ember.backends.schedule import GridPolicy, affine, gpu_grid, no_alias, offset, round_up

POLICY = GridPolicy()
BLOCK = POLICY.block
MAX_BLOCKS = 8192  # a grid-stride loop's grid; more blocks than this only add scheduling work
WARP = 32
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_BOOL = np.dtype(bool)


@dataclass(frozen=True)
class CudaKernel:
    name: str
    params: tuple[tuple[str, str], ...]  # (C type, name) per parameter
    text: str


@dataclass(frozen=True)
class Scratch:
    """`count` elements of `dtype` at byte `offset` of the kernel's scratch region."""

    offset: int
    dtype: np.dtype
    count: int


@dataclass(frozen=True)
class Launch:
    """`kernel` over `grid` blocks of `block` threads; an argument is a buffer name of the kernel
    description, a `Scratch` region, or a NumPy scalar of the parameter's type."""

    kernel: str
    grid: int
    block: int
    args: tuple


@dataclass(frozen=True)
class Gemm:
    """A contraction a GPU may hand to cuBLAS; `fallback` computes it everywhere."""

    step: Contraction
    lhs: Buffer
    rhs: Buffer
    out: Buffer
    fallback: Launch


@dataclass
class Rendered:
    kernels: list[CudaKernel] = field(default_factory=list)
    launches: list = field(default_factory=list)
    scratch_bytes: int = 0
    need: set = field(default_factory=set)


def render_kernel(kernel: Kernel, aliased: frozenset[tuple[str, str]] = frozenset()) -> Rendered:
    """CUDA C for `kernel`, the caller passing one buffer for each (output, input) pair in `aliased`."""
    out = Rendered()
    buffers = {b.name: b for b in kernel.inputs + kernel.outputs + kernel.temps}
    restrict = no_alias(kernel, aliased)
    for step in kernel.steps:
        _STEP_RULES[type(step)](_Context(out, buffers, restrict), step)
    return out


@dataclass
class _Context:
    out: Rendered
    buffers: dict
    restrict: set

    def scratch(self, dtype, count: int, at: int = 0) -> Scratch:
        """A scratch region for this step (steps run one after another, so they share scratch)."""
        s = Scratch(at, np.dtype(dtype), count)
        self.out.scratch_bytes = max(self.out.scratch_bytes, at + round_up(count * s.dtype.itemsize))
        return s

    def define(self, body: str, params: list[tuple[str, str]], grid: int, args: list) -> Launch:
        """Define a kernel (named by the hash of its text) and return its launch."""
        text = _kernel_text("KERNEL", params, body)
        name = "ek_" + hashlib.sha256(text.encode()).hexdigest()[:16]
        if all(k.name != name for k in self.out.kernels):
            self.out.kernels.append(CudaKernel(name, tuple(params), text.replace("KERNEL", name, 1)))
        return Launch(name, max(1, min(grid, MAX_BLOCKS)), BLOCK, tuple(args))

    def param(self, name: str, written: bool) -> tuple[str, str]:
        b = self.buffers[name]
        qual = "" if written else "const "
        res = " __restrict__" if name in self.restrict else ""
        return f"{qual}{memory_type(b.dtype)}*{res}", name


def _kernel_text(name: str, params, body: str) -> str:
    plist = ", ".join(f"{t} {n}" for t, n in params)
    return f'extern "C" __global__ void __launch_bounds__({BLOCK}) {name}({plist}) {{\n{body}}}\n'


def _stride_loop(var: str, count: str, I: str, body: str | None = None) -> str:
    """A grid-stride loop header over [0, count) (with `body`: the whole one-statement loop)."""
    step = f"{var} += ({I})gridDim.x * {BLOCK}"
    head = f"  for ({I} {var} = ({I})blockIdx.x * {BLOCK} + threadIdx.x; {var} < {count}; {step})"
    return f"{head} {body}\n" if body is not None else f"{head} {{\n"


def _index_type(*sizes: int) -> str:
    """32-bit index arithmetic where every size fits (64-bit division is slow on a GPU)."""
    return "int" if max(sizes, default=0) < 2**31 - 1 else "long long"


# --- loops ------------------------------------------------------------------------------------------

class _LoopWriter:
    """The C statements of one Loop's scalar ops, placed by what they read: nothing (the kernel's
    prologue), the kept axes (once per work item) or the reduced axes (once per point)."""

    def __init__(self, ctx: _Context, loop: Loop, I: str):
        self.ctx, self.loop, self.I = ctx, loop, I
        self.need = ctx.out.need
        self.axes_of: list[frozenset] = []
        for o in loop.ops:
            self.axes_of.append(self._op_axes(o))
        self.names: dict[int, str] = {}
        self.vector: dict = {}  # buffer -> (vector variable, lane, flat index name): identity loads read it

    def _op_axes(self, o: Op) -> frozenset:
        if o.prim == "load":
            return frozenset().union(*(_ix_axes(i, self.axes_of) for i in o.param("index")))
        if o.prim == "index":
            return _ix_axes(o.param("index"), self.axes_of)
        return frozenset().union(*(self.axes_of[a] for a in o.args))

    def ops_at(self, placed: set, allowed: frozenset, axis_expr: dict, indent: str = "    ", suffix: str = "") -> str:
        """Statements of the ops not yet placed whose axes are all in `allowed`."""
        lines = []
        for k, o in enumerate(self.loop.ops):
            if k in placed or not self.axes_of[k] <= allowed:
                continue
            placed.add(k)
            if o.prim == "const":  # a literal operand: rules see it (x ** 2.0 multiplies)
                self.names[k] = S.constant(o.param("value"), o.dtype)
                continue
            self.names[k] = f"v{k}{suffix}"
            lines.append(f"const {register_type(o.dtype)} v{k}{suffix} = {self._op(o, axis_expr)};")
        return "".join(f"{indent}{x}\n" for x in lines)

    def _op(self, o: Op, axis_expr: dict) -> str:
        if o.prim == "load":
            b = self.ctx.buffers[o.param("buffer")]
            at = self.ix(offset(o.param("index"), b.shape), axis_expr)
            vec = self.vector.get(b.name)
            if vec is not None and at in (vec[2], f"({vec[2]})"):
                return _load(f"{vec[0]}.v", str(vec[1]), b.dtype)
            return _load(b.name, at, b.dtype)
        if o.prim == "const":
            return S.constant(o.param("value"), o.dtype)
        if o.prim == "index":
            x = o.param("index")
            src = _BOOL if _is_predicate(x) else _I64
            return S.convert(f"({self.ix(x, axis_expr)})", src, o.dtype) if src != o.dtype else self.ix(x, axis_expr)
        args = [self.names[a] for a in o.args]
        return S.emit_op(o, args, [self.loop.ops[a].dtype for a in o.args], self.need)

    def ix(self, x: Ix, axis_expr: dict) -> str:
        return _render_ix(x, axis_expr, self.names, self.I)


def _ix_axes(x: Ix, axes_of: list) -> frozenset:
    if x.op == "var":
        return frozenset([x.args[0]])
    if x.op == "value":
        return axes_of[x.args[0]]
    return frozenset().union(*(_ix_axes(a, axes_of) for a in x.args if isinstance(a, Ix)))


def _is_predicate(x: Ix) -> bool:
    return x.op in ("lt", "ge", "eq", "and") or (x.op == "const" and isinstance(x.args[0], bool))


def _render_ix(x: Ix, axis_expr: dict, names: dict, I: str) -> str:
    """`x` as a C expression of type `I` (predicates: bool). Affine parts whose coefficients follow a
    flat index's strides render through that index (see `_Flat`)."""
    op, a = x.op, x.args

    def r(y):
        return _render_ix(y, axis_expr, names, I)

    if op == "const":
        return ("true" if a[0] else "false") if isinstance(a[0], bool) else _int_literal(a[0], I)
    if op == "var":
        return axis_expr[a[0]]
    if op == "value":
        return f"(({I}){names[a[0]]})"
    if op in ("add", "mul"):
        flat = axis_expr.get("flat")
        if flat is not None:
            got = flat.render(x, r, I)
            if got is not None:
                return got
        if op == "add":
            return "(" + " + ".join(r(t) for t in a) + ")"
        return f"({r(a[0])} * {_int_literal(a[1], I)})"
    if op in _IX_INFIX:  # an index and a constant (floordiv and mod see non-negative operands only)
        return f"({r(a[0])} {_IX_INFIX[op]} {_int_literal(a[1], I)})"
    if op == "clamp":
        return f"ember_clamp({r(a[0])}, ({I}){_int_literal(a[1], I)}, ({I}){_int_literal(a[2], I)})"
    if op == "and":
        return "(" + " && ".join(r(t) for t in a) + ")"
    raise ValueError(f"unknown index op {op}")


_IX_INFIX = {"floordiv": "/", "mod": "%", "lt": "<", "ge": ">=", "eq": "=="}


def _int_literal(v: int, I: str) -> str:
    v = int(v)
    if I == "int" and -2**31 < v < 2**31:
        return str(v)
    return f"{v}LL" if v > -2**63 else "(-9223372036854775807LL - 1)"


@dataclass(frozen=True)
class _Flat:
    """Flat indices over groups of loop axes (C order within a group): an affine form whose
    coefficients on a group's axes are one multiple of the group's strides reads that flat index
    times the multiple (an identity load is `p`, a row of a reduction `k * R + r`)."""

    groups: tuple  # ((name, axes, extents), ...)

    def render(self, x: Ix, r, I: str) -> str | None:
        coefs, atoms, k = affine(x)
        used = set(coefs) - {a for _, axes, extents in self.groups for a, n in zip(axes, extents) if n == 1}
        terms = []
        for name, axes, extents in self.groups:
            live = [(a, n) for a, n in zip(axes, extents) if n > 1]
            if not any(coefs.get(a, 0) for a, _ in live):
                continue
            strides, acc = {}, 1
            for a, n in reversed(live):
                strides[a] = acc
                acc *= n
            first = live[-1][0]
            mult = coefs.get(first, 0)
            if mult == 0 or any(coefs.get(a, 0) != mult * strides[a] for a, _ in live):
                return None
            terms.append(name if mult == 1 else f"{name} * {_int_literal(mult, I)}")
            used -= {a for a, _ in live}
        if any(coefs.get(a, 0) for a in used):
            return None
        terms += [r(atom) if c == 1 else f"{r(atom)} * {_int_literal(c, I)}" for atom, c in atoms.items()]
        if k or not terms:
            terms.append(_int_literal(k, I))
        return "(" + " + ".join(terms) + ")"


def _axis_exprs(axes, extents, flat: str, I: str) -> dict:
    """Each axis of a C-ordered group as an expression of the group's flat index."""
    out, stride = {}, 1
    live = [(a, n) for a, n in zip(axes, extents)]
    for j in range(len(live) - 1, -1, -1):
        a, n = live[j]
        if n == 1:
            out[a] = "0"
            continue
        v = flat if stride == 1 else f"({flat} / {_int_literal(stride, I)})"
        outer = all(m == 1 for _, m in live[:j])
        out[a] = v if outer else f"({v} % {_int_literal(n, I)})"
        stride *= n
    return out


def _load(name: str, at: str, dtype: np.dtype) -> str:
    if dtype == np.float16:
        return f"ember_h2f({name}[{at}])"
    return f"{name}[{at}]"


def _store(name: str, at: str, value: str, dtype: np.dtype) -> str:
    if dtype == np.float16:
        return f"{name}[{at}] = ember_f2h({value});"
    return f"{name}[{at}] = {value};"


def _loop(ctx: _Context, loop: Loop) -> None:
    grid = gpu_grid(loop, POLICY)
    if not loop.reductions:
        if int(np.prod(loop.space, dtype=np.int64)):
            _elementwise(ctx, loop)
    elif grid.kept:
        _reduction(ctx, loop, grid)


def _params(ctx: _Context, loop: Loop, reduced_here: bool = True) -> list[tuple[str, str]]:
    written = {s.buffer for s in loop.stores} | ({r.out for r in loop.reductions} if reduced_here else set())
    read = {o.param("buffer") for o in loop.ops if o.prim == "load"}
    return [ctx.param(n, n in written) for n in ctx.buffers if n in written or n in read]


def _elementwise(ctx: _Context, loop: Loop) -> None:
    """A grid-stride loop, one point per thread; where every store (and some load) is at the identity
    index and the space is large, each thread takes `VECTOR` consecutive points per step through one
    vector load or store per such buffer (a scalar loop finishes the tail)."""
    total = int(np.prod(loop.space, dtype=np.int64))
    I = _index_type(total + VECTOR * BLOCK, *(int(np.prod(b.shape, dtype=np.int64)) for b in ctx.buffers.values()))
    axes = tuple(range(len(loop.space)))
    w = _LoopWriter(ctx, loop, I)
    placed: set = set()
    pro = w.ops_at(placed, frozenset(), _flat_exprs(loop, "p", I))
    params = _params(ctx, loop)
    width = _vector_width(ctx, loop, total, I)
    if width == 1:
        text = pro + _stride_loop("p", _int_literal(total, I), I) + _points(ctx, w, loop, placed, "p", I) + "  }\n"
        ctx.out.launches.append(ctx.define(text, params, -(-total // BLOCK), [n for _, n in params]))
        return
    vec_loads = {o.param("buffer") for o in loop.ops if o.prim == "load"} - {s.buffer for s in loop.stores}
    vec_loads = {n for n in vec_loads if _identity_reads(ctx, loop, n, I)}
    main = total // width
    lines = [pro, _stride_loop("j", _int_literal(main, I), I)]
    for n in sorted(vec_loads):
        t = memory_type(ctx.buffers[n].dtype)
        vec = f"ember_vec<{t}, {width}>"
        lines.append(f"    const {vec} q_{n} = reinterpret_cast<const {vec}*>({n})[j];\n")
    stored = {}
    for s in loop.stores:
        stored.setdefault(s.buffer, []).append(s)
    for n in stored:
        lines.append(f"    ember_vec<{memory_type(ctx.buffers[n].dtype)}, {width}> s_{n};\n")
    for lane in range(width):
        flat = f"p{lane}"
        lines.append(f"    const {I} {flat} = j * {width} + {lane}; (void){flat};\n")
        w.vector = {n: (f"q_{n}", lane, flat) for n in vec_loads}
        lines.append(w.ops_at(set(placed), frozenset(axes), _flat_exprs(loop, flat, I), suffix=f"_{lane}"))
        for s in loop.stores:
            b = ctx.buffers[s.buffer]
            lines.append(f"    {_store(f's_{s.buffer}.v', str(lane), w.names[s.value], b.dtype)}\n")
    w.vector = {}
    for n in stored:
        t = memory_type(ctx.buffers[n].dtype)
        lines.append(f"    reinterpret_cast<ember_vec<{t}, {width}>*>({n})[j] = s_{n};\n")
    lines.append("  }\n")
    if total % width:
        tail = f"({I})blockIdx.x * {BLOCK} + threadIdx.x + {_int_literal(main * width, I)}"
        lines.append(f"  for ({I} p = {tail}; p < {_int_literal(total, I)}; p += ({I})gridDim.x * {BLOCK}) {{\n")
        lines.append(_points(ctx, w, loop, placed, "p", I) + "  }\n")
    ctx.out.launches.append(ctx.define("".join(lines), params, -(-main // BLOCK), [n for _, n in params]))


VECTOR_BYTES = 16  # the widest load a thread issues
VECTOR = 4  # points per thread and step, at most
VECTOR_MIN = 4 * BLOCK  # points below which a loop stays scalar


def _vector_width(ctx: _Context, loop: Loop, total: int, I: str) -> int:
    """Points per thread and step: 1 unless the space is large and every store is at the identity index;
    else as many as fit one 16-byte access of the widest identity-accessed buffer (at most 4)."""
    if total < VECTOR_MIN or not loop.stores:
        return 1
    if not all(_identity_at(ctx, s.buffer, s.index, loop, I) for s in loop.stores):
        return 1
    names = {s.buffer for s in loop.stores} | {o.param("buffer") for o in loop.ops if o.prim == "load"}
    widest = max(ctx.buffers[n].dtype.itemsize for n in names)
    return max(1, min(VECTOR, VECTOR_BYTES // widest))


def _identity_at(ctx: _Context, name: str, index, loop: Loop, I: str) -> bool:
    b = ctx.buffers[name]
    if b.shape != loop.space:
        return False
    return _render_ix(offset(index, b.shape), _flat_exprs(loop, "p", I), {}, I) in ("p", "(p)")


def _identity_reads(ctx: _Context, loop: Loop, name: str, I: str) -> bool:
    """Whether buffer `name` is read at the identity index (some load of it is)."""
    return any(o.prim == "load" and o.param("buffer") == name and _identity_at(ctx, name, o.param("index"), loop, I)
               for o in loop.ops)


def _flat_exprs(loop: Loop, flat: str, I: str) -> dict:
    axes = tuple(range(len(loop.space)))
    exprs = _axis_exprs(axes, loop.space, flat, I)
    exprs["flat"] = _Flat(((flat, axes, loop.space),))
    return exprs


def _points(ctx: _Context, w: _LoopWriter, loop: Loop, placed: set, flat: str, I: str) -> str:
    """One point's ops (those not in the prologue) and stores, at flat index `flat`."""
    exprs = _flat_exprs(loop, flat, I)
    text = w.ops_at(set(placed), frozenset(range(len(loop.space))), exprs)
    for s in loop.stores:
        b = ctx.buffers[s.buffer]
        text += f"    {_store(s.buffer, w.ix(offset(s.index, b.shape), exprs), w.names[s.value], b.dtype)}\n"
    return text


@dataclass(frozen=True)
class _Acc:
    """A reduction's accumulator: its C register type, whether it sums floats in double (`wide`), and
    whether that sum is compensated (float64 data)."""

    ctype: str
    wide: bool
    compensated: bool


def _acc(r) -> _Acc:
    if r.combine == "add" and r.acc_dtype.kind == "f":
        return _Acc("double", True, r.acc_dtype == _F64)
    return _Acc(register_type(r.acc_dtype), False, False)


def _combine(ctx: _Context, r, a: str, b: str) -> str:
    """`a` combined with `b` (both in the accumulator's register type)."""
    if _acc(r).wide:
        return f"({a} + {b})"
    prim = {"add": "add", "mul": "mul", "max": "max", "min": "min"}[r.combine]
    op = Op(prim, (0, 1), r.acc_dtype)
    return S.emit_op(op, [a, b], [r.acc_dtype, r.acc_dtype], ctx.out.need)


def _init(r) -> str:
    acc = _acc(r)
    return S.constant(r.init, _F64 if acc.wide else r.acc_dtype)


def _fold(ctx: _Context, r, j: int, value: str, value_dtype: np.dtype) -> str:
    acc = _acc(r)
    if acc.wide:
        v = S.convert(value, value_dtype, _F64) if value_dtype != _F64 else value
        if acc.compensated:
            return (f"{{ const double y = {v} - c{j}; const double t = a{j} + y; "
                    f"c{j} = (t - a{j}) - y; a{j} = t; }}")
        return f"a{j} += {v};"
    v = S.convert(value, value_dtype, r.acc_dtype) if value_dtype != r.acc_dtype else value
    return f"a{j} = {_combine(ctx, r, f'a{j}', v)};"


def _shuffle(ctype: str, value: str, delta: int) -> str:
    if ctype in ("bool", "signed char", "unsigned char", "short", "unsigned short"):
        return f"({ctype})__shfl_down_sync(0xffffffffu, (int){value}, {delta})"
    return f"__shfl_down_sync(0xffffffffu, {value}, {delta})"


def _shuffle_fold(ctx: _Context, r, acc: _Acc, j: int, delta: int) -> str:
    """Accumulator j folded with lane + delta's (every lane of the warp shuffles: none may skip it, so
    the shuffled value is bound once before the combine, which may read its operands twice)."""
    return (f"{{ const {acc.ctype} o = {_shuffle(acc.ctype, f'a{j}', delta)}; "
            f"a{j} = {_combine(ctx, r, f'a{j}', 'o')}; }}")


def _tree(ctx: _Context, accs: list, lanes: int) -> str:
    """Fold every lane's accumulators into lane 0 of the work item: shuffles within a warp, then (a
    block per item) each warp's result through shared memory and the first warp."""
    lines = []
    for delta in (16, 8, 4, 2, 1):
        for j, (r, acc) in enumerate(accs):
            lines.append(_shuffle_fold(ctx, r, acc, j, delta))
    if lanes > WARP:
        warps = lanes // WARP
        for j in range(len(accs)):
            lines.append(f"if (lane % {WARP} == 0) sh{j}[lane / {WARP}] = a{j};")
        lines.append("__syncthreads();")
        lines.append(f"if (lane < {WARP}) {{")
        for j, (r, _) in enumerate(accs):
            lines.append(f"  a{j} = lane < {warps} ? sh{j}[lane] : {_init(r)};")
        for delta in [d for d in (16, 8, 4, 2, 1) if d < warps]:
            for j, (r, acc) in enumerate(accs):
                lines.append("  " + _shuffle_fold(ctx, r, acc, j, delta))
        lines.append("}")
        lines.append("__syncthreads();")
    return "".join(f"    {x}\n" for x in lines)


def _finish(r, j: int, acc: _Acc, at: str, ctx: _Context) -> str:
    """Store accumulator j, converted to its output's dtype, at `at`."""
    b = ctx.buffers[r.out]
    value = f"a{j}" if not acc.compensated else f"(a{j} + c{j})"
    src = _F64 if acc.wide else r.acc_dtype
    if acc.wide and r.acc_dtype != _F64:
        value, src = S.convert(value, _F64, r.acc_dtype), r.acc_dtype
    if src != b.dtype:
        value = S.convert(value, src, b.dtype)
    return _store(r.out, at, value, b.dtype)


def _reduction(ctx: _Context, loop: Loop, grid) -> None:
    total = int(np.prod(loop.space, dtype=np.int64))
    sizes = [total, grid.items * grid.lanes, *(int(np.prod(b.shape, dtype=np.int64)) for b in ctx.buffers.values())]
    I = _index_type(*sizes)
    kept_axes = tuple(a for a in range(len(loop.space)) if a not in loop.reduce_axes)
    red_axes = tuple(a for a in range(len(loop.space)) if a in loop.reduce_axes)
    kept_ext = tuple(loop.space[a] for a in kept_axes)
    red_ext = tuple(loop.space[a] for a in red_axes)
    axis_expr = {**_axis_exprs(kept_axes, kept_ext, "k", I), **_axis_exprs(red_axes, red_ext, "r", I)}
    axis_expr["flat"] = _Flat((("k", kept_axes, kept_ext), ("r", red_axes, red_ext)))
    w = _LoopWriter(ctx, loop, I)
    accs = [(r, _acc(r)) for r in loop.reductions]
    lanes, chunks = grid.lanes, grid.chunks
    placed: set = set()
    lines = []
    if lanes > WARP:
        for j, (_, acc) in enumerate(accs):
            lines.append(f"  __shared__ {acc.ctype} sh{j}[{lanes // WARP}];\n")
    lines.append(w.ops_at(placed, frozenset(), axis_expr))
    per_block = BLOCK // lanes
    lines.append(f"  const int lane = threadIdx.x % {lanes};\n" if lanes > 1 else "  const int lane = 0;\n")
    lines.append("  (void)lane;\n")
    items = _int_literal(grid.items, I)
    lines.append(f"  for ({I} w = ({I})blockIdx.x * {per_block} + threadIdx.x / {lanes}; w < {items}; "
                 f"w += ({I})gridDim.x * {per_block}) {{\n")
    kept = _int_literal(grid.kept, I)
    if chunks > 1:
        lines.append(f"    const {I} k = w % {kept};\n    const {I} c = w / {kept};\n")
    else:
        lines.append(f"    const {I} k = w;\n    const {I} c = 0;\n")
    lines.append("    (void)k; (void)c;\n")
    lines.append(w.ops_at(placed, frozenset(kept_axes), axis_expr))
    for j, (r, acc) in enumerate(accs):
        lines.append(f"    {acc.ctype} a{j} = {_init(r)};\n")
        if acc.compensated:
            lines.append(f"    double c{j} = 0.0;\n")
    cs = _int_literal(grid.chunk_size, I)
    end = f"({cs} * c + {cs} < {_int_literal(grid.reduced, I)} ? {cs} * c + {cs} : {_int_literal(grid.reduced, I)})"
    lines.append(f"    const {I} r_end = {end};\n")
    lines.append(f"    for ({I} r = {cs} * c + lane; r < r_end; r += {lanes}) {{\n")
    lines.append(w.ops_at(placed, frozenset(range(len(loop.space))), axis_expr, "      "))
    for j, (r, _) in enumerate(accs):
        lines.append(f"      {_fold(ctx, r, j, w.names[r.value], loop.ops[r.value].dtype)}\n")
    for s in loop.stores:
        b = ctx.buffers[s.buffer]
        at = w.ix(offset(s.index, b.shape), axis_expr)
        lines.append(f"      {_store(s.buffer, at, w.names[s.value], b.dtype)}\n")
    lines.append("    }\n")
    if accs and any(a.compensated for _, a in accs):
        lines += [f"    a{j} -= c{j};\n" for j, (_, a) in enumerate(accs) if a.compensated]
    if lanes > 1:
        lines.append(_tree(ctx, accs, lanes))
    params = _params(ctx, loop, chunks == 1)
    args: list = [n for _, n in params]
    lines.append("    if (lane == 0) {\n")
    parts = []
    if chunks == 1:
        for j, (r, acc) in enumerate(accs):
            lines.append(f"      {_finish(r, j, _Acc(acc.ctype, acc.wide, False), 'k', ctx)}\n")
    else:
        at = 0
        for j, (r, acc) in enumerate(accs):
            dt = _F64 if acc.wide else r.acc_dtype
            region = ctx.scratch(dt, grid.items, at)
            at += round_up(grid.items * region.dtype.itemsize)
            parts.append((r, acc, region))
            params.append((f"{memory_type(dt)}* __restrict__", f"part{j}"))
            args.append(region)
            lines.append(f"      {_store(f'part{j}', 'w', f'a{j}', dt)}\n")
    lines.append("    }\n  }\n")
    blocks = -(-grid.items // per_block)
    ctx.out.launches.append(ctx.define("".join(lines), params, blocks, args))
    if parts:
        _second_stage(ctx, parts, grid, I)


def _second_stage(ctx: _Context, parts, grid, I: str) -> None:
    """Each kept index's chunk partials folded in chunk order, then converted and stored."""
    params, args, lines = [], [], []
    for j, (r, _, region) in enumerate(parts):
        params.append((f"const {memory_type(region.dtype)}* __restrict__", f"part{j}"))
        args.append(region)
        params.append(ctx.param(r.out, True))
        args.append(r.out)
    kept, chunks = _int_literal(grid.kept, I), _int_literal(grid.chunks, I)
    wide = grid.chunks > SERIAL_CHUNKS  # a block per kept index: its lanes fold chunks, then the tree
    if wide:
        for j, (_, acc, _) in enumerate(parts):
            lines.append(f"  __shared__ {acc.ctype} sh{j}[{BLOCK // WARP}];\n")
        lines.append("  const int lane = threadIdx.x;\n")
        lines.append(f"  for ({I} k = blockIdx.x; k < {kept}; k += gridDim.x) {{\n")
        first, step = "lane", BLOCK
    else:
        lines.append(_stride_loop("k", f"{kept}", I))
        first, step = "0", 1
    for j, (r, acc, region) in enumerate(parts):
        lines.append(f"    {acc.ctype} a{j} = {_init(r)};\n")
        lines.append(f"    for ({I} c = {first}; c < {chunks}; c += {step}) {{\n")
        part = _load(f"part{j}", f"c * {kept} + k", region.dtype)
        lines.append(f"      const {acc.ctype} o = {part};\n      a{j} = {_combine(ctx, r, f'a{j}', 'o')};\n    }}\n")
    if wide:
        lines.append(_tree(ctx, [(r, acc) for r, acc, _ in parts], BLOCK))
        lines.append("    if (lane == 0) {\n")
    for j, (r, acc, _) in enumerate(parts):
        lines.append(f"    {_finish(r, j, _Acc(acc.ctype, acc.wide, False), 'k', ctx)}\n")
    lines.append("    }\n  }\n" if wide else "  }\n")
    blocks = grid.kept if wide else -(-grid.kept // BLOCK)
    ctx.out.launches.append(ctx.define("".join(lines), params, blocks, args))


SERIAL_CHUNKS = 32  # a second stage folds up to this many chunks per thread; more, a block per kept index


# --- contractions -----------------------------------------------------------------------------------

def _contraction(ctx: _Context, step: Contraction) -> None:
    lhs, rhs, out = ctx.buffers[step.lhs], ctx.buffers[step.rhs], ctx.buffers[step.out]
    (lc, rc), (lb, rb) = step.dimension_numbers
    total = int(np.prod(out.shape, dtype=np.int64))
    if total == 0:
        return
    I = _index_type(total, *(int(np.prod(b.shape, dtype=np.int64)) for b in (lhs, rhs)))
    lfree = [d for d in range(len(lhs.shape)) if d not in lc and d not in lb]
    rfree = [d for d in range(len(rhs.shape)) if d not in rc and d not in rb]
    # output axes: batch, lhs free, rhs free
    out_axes = list(range(len(out.shape)))
    axis_expr = _axis_exprs(out_axes, out.shape, "p", I)
    lstr, rstr = strides(lhs.shape), strides(rhs.shape)
    lterm, rterm = [], []
    pos = 0
    for bl, br in zip(lb, rb):
        lterm.append(f"{axis_expr[pos]} * {_int_literal(lstr[bl], I)}")
        rterm.append(f"{axis_expr[pos]} * {_int_literal(rstr[br], I)}")
        pos += 1
    for d in lfree:
        lterm.append(f"{axis_expr[pos]} * {_int_literal(lstr[d], I)}")
        pos += 1
    for d in rfree:
        rterm.append(f"{axis_expr[pos]} * {_int_literal(rstr[d], I)}")
        pos += 1
    csizes = [lhs.shape[d] for d in lc]
    K = int(np.prod(csizes, dtype=np.int64))
    kexpr = _axis_exprs(list(range(len(lc))), csizes, "q", I)
    for j, (dl, dr) in enumerate(zip(lc, rc)):
        lterm.append(f"{kexpr[j]} * {_int_literal(lstr[dl], I)}")
        rterm.append(f"{kexpr[j]} * {_int_literal(rstr[dr], I)}")
    dt = out.dtype
    acc_dt = np.dtype(np.float32) if dt == np.float16 else dt
    wide = dt.kind == "f"
    acc_t = "double" if wide else register_type(acc_dt)
    a, b = _load("lhs", " + ".join(lterm) or "0", lhs.dtype), _load("rhs", " + ".join(rterm) or "0", rhs.dtype)
    if wide:
        fold = f"acc += (double){a} * (double){b};" if dt != _F64 else f"acc = fma({a}, {b}, acc);"
        result = S.convert("acc", _F64, dt) if dt != _F64 else "acc"
        init = "0.0"
    else:
        mul = S.emit_op(Op("mul", (0, 1), acc_dt), ["x", "y"], [acc_dt, acc_dt], ctx.out.need)
        add = S.emit_op(Op("add", (0, 1), acc_dt), ["acc", f"({mul})"], [acc_dt, acc_dt], ctx.out.need)
        fold = f"{{ const {acc_t} x = {a}; const {acc_t} y = {b}; acc = {add}; }}"
        result, init = "acc", S.constant(0, acc_dt)
    text = (_stride_loop("p", f"{_int_literal(total, I)}", I) +
            f"    {acc_t} acc = {init};\n"
            f"    for ({I} q = 0; q < {_int_literal(K, I)}; ++q) {{\n      {fold}\n    }}\n"
            f"    {_store('out', 'p', result, dt)}\n  }}\n")
    params = [(f"const {memory_type(lhs.dtype)}* __restrict__", "lhs"),
              (f"const {memory_type(rhs.dtype)}* __restrict__", "rhs"),
              (f"{memory_type(dt)}* __restrict__", "out")]
    launch = ctx.define(text, params, -(-total // BLOCK), [step.lhs, step.rhs, step.out])
    ctx.out.launches.append(Gemm(step, lhs, rhs, out, launch))


# --- arg reductions ---------------------------------------------------------------------------------

def _better(combine: str, dtype: np.dtype, v: str, i: str, bv: str, bi: str) -> str:
    """Whether (v, i) replaces (bv, bi): the larger (argmax) value, NaN above all, ties to the lower index."""
    cmp = ">" if combine == "argmax" else "<"
    if dtype.kind != "f":
        return f"({v} {cmp} {bv} || ({v} == {bv} && {i} < {bi}))"
    return (f"(({v} != {v}) ? (({bv} != {bv}) ? {i} < {bi} : true) : "
            f"(({bv} != {bv}) ? false : ({v} {cmp} {bv} || ({v} == {bv} && {i} < {bi}))))")


def _arg_reduce(ctx: _Context, step: ArgReduce) -> None:
    x, o = ctx.buffers[step.operand], ctx.buffers[step.out]
    shape = x.shape
    outer = int(np.prod(shape[:step.axis], dtype=np.int64))
    n = shape[step.axis]
    inner = int(np.prod(shape[step.axis + 1:], dtype=np.int64))
    items = outer * inner
    if items == 0:
        return
    I = _index_type(int(np.prod(shape, dtype=np.int64)) + BLOCK, items * BLOCK)
    lanes = 1 if n <= 64 or inner > 1 else BLOCK
    rt, dt = register_type(x.dtype), x.dtype
    per_block = BLOCK // lanes
    lines = []
    if lanes > 1:
        lines.append(f"  __shared__ {rt} shv[{lanes // WARP}];\n  __shared__ {I} shi[{lanes // WARP}];\n")
    lines.append(f"  const int lane = threadIdx.x % {lanes};\n" if lanes > 1 else "  const int lane = 0;\n")
    lines.append(f"  for ({I} w = ({I})blockIdx.x * {per_block} + threadIdx.x / {lanes}; w < {_int_literal(items, I)}; "
                 f"w += ({I})gridDim.x * {per_block}) {{\n")
    lines.append(f"    const {I} base = (w / {_int_literal(inner, I)}) * {_int_literal(n * inner, I)} + "
                 f"w % {_int_literal(inner, I)};\n")
    lines.append(f"    {rt} bv = {_load('x', 'base', dt)};\n    {I} bi = 0;\n    bool any = lane == 0;\n")
    lines.append(f"    for ({I} r = lane; r < {_int_literal(n, I)}; r += {lanes}) {{\n"
                 f"      const {rt} v = {_load('x', f'base + r * {_int_literal(inner, I)}', dt)};\n"
                 f"      if (!any || {_better(step.combine, dt, 'v', 'r', 'bv', 'bi')}) "
                 "{ bv = v; bi = r; any = true; }\n"
                 "    }\n")
    if lanes > 1:
        def fold(src_v, src_i, src_any):
            cond = _better(step.combine, dt, src_v, src_i, "bv", "bi")
            return f"if ({src_any} && (!any || {cond})) {{ bv = {src_v}; bi = {src_i}; any = true; }}"
        lines.append("    {\n")
        for delta in (16, 8, 4, 2, 1):
            lines.append(f"      {{ const {rt} ov = {_shuffle(rt, 'bv', delta)}; const {I} oi = "
                         f"{_shuffle(I, 'bi', delta)}; const bool oa = {_shuffle('bool', 'any', delta)};"
                         f" if ((threadIdx.x % {WARP}) + {delta} < {WARP}) {{ {fold('ov', 'oi', 'oa')} }} }}\n")
        lines.append(f"      if (lane % {WARP} == 0) {{ shv[lane / {WARP}] = bv; "
                     f"shi[lane / {WARP}] = any ? bi : -1; }}\n"
                     "      __syncthreads();\n"
                     f"      if (lane == 0) {{ for (int q = 1; q < {lanes // WARP}; ++q) {{ "
                     f"if (shi[q] >= 0) {{ {fold('shv[q]', 'shi[q]', 'true')} }} }} }}\n"
                     "      __syncthreads();\n    }\n")
    out_value = S.convert("bi", _I64, step.index_dtype) if I == "long long" else S.convert(
        "bi", np.dtype(np.int32), step.index_dtype)
    lines.append(f"    if (lane == 0) {_store('out', 'w', out_value, o.dtype)}\n  }}\n")
    params = [(f"const {memory_type(dt)}* __restrict__", "x"), (f"{memory_type(o.dtype)}* __restrict__", "out")]
    ctx.out.launches.append(ctx.define("".join(lines), params, -(-items // per_block), [step.operand, step.out]))


# --- scatter ----------------------------------------------------------------------------------------

def _scatter(ctx: _Context, step: Scatter) -> None:
    op, idx = ctx.buffers[step.operand], ctx.buffers[step.indices]
    dt = op.dtype
    size = int(np.prod(op.shape, dtype=np.int64))
    nb, k = step.batch_dims, idx.shape[-1]
    sizes = op.shape[nb:nb + k]
    batch = int(np.prod(op.shape[:nb], dtype=np.int64))
    n = int(np.prod(idx.shape[nb:-1], dtype=np.int64))
    targets = int(np.prod(sizes, dtype=np.int64))
    width = int(np.prod(op.shape[nb + k:], dtype=np.int64))
    I = "long long"
    mt = memory_type(dt)
    if step.out != step.operand and size:
        text = (_stride_loop("p", f"{size}LL", I, "out[p] = x[p];"))
        params = [(f"const {mt}* __restrict__", "x"), (f"{mt}* __restrict__", "out")]
        ctx.out.launches.append(ctx.define(text, params, -(-size // BLOCK), [step.operand, step.out]))
    count = batch * n * width
    if not count or not size:
        return
    need = ctx.out.need
    rt = register_type(dt)
    add = S.emit_op(Op("add", (0, 1), dt), ["ov", "nv"], [dt, dt], need)
    if step.mode == "add" and nb == 0 and k == 0:
        text = (_stride_loop("s", f"{width}LL", I) +
                f"    {rt} ov = {S.constant(0, dt)};\n"
                f"    for ({I} j = 0; j < {n}LL; ++j) {{ const {rt} nv_ = {_load('upd', f'j * {width}LL + s', dt)}; "
                f"ov = {S.emit_op(Op('add', (0, 1), dt), ['ov', 'nv_'], [dt, dt], need)}; }}\n"
                f"    const {rt} nv_ = ov; {{ const {rt} ov = {_load('out', 's', dt)}; const {rt} nv = nv_;"
                f" {_store('out', 's', add, dt)} }}\n  }}\n")
        params = [(f"const {mt}* __restrict__", "upd"), (f"{mt}* __restrict__", "out")]
        ctx.out.launches.append(ctx.define(text, params, -(-width // BLOCK), [step.updates, step.out]))
        return
    it = memory_type(idx.dtype)
    target = [f"    const {I} b = u / {n * width}LL;\n    const {I} j = (u / {width}LL) % {n}LL;\n"
              f"    const {I} s = u % {width}LL;\n    bool ok = true;\n    {I} pos = 0;\n"]
    for c, extent in enumerate(sizes):
        target.append(f"    {{ const {I} i = ({I})ix[(b * {n}LL + j) * {k}LL + {c}]; "
                      f"ok = ok && (unsigned long long)i < {extent}ULL; pos = pos * {extent}LL + i; }}\n")
    target.append(f"    const {I} t = (b * {targets}LL + pos) * {width}LL + s;\n")
    loop = _stride_loop("u", f"{count}LL", I)
    grid = -(-count // BLOCK)
    if step.mode != "replace":
        value = _load("upd", "u", dt)
        update = f"ember_atomic_add(out + t, {value})"
        if step.mode != "add" or dt.itemsize < 4:
            combine = S.emit_op(Op(step.mode, (0, 1), dt), ["ov", "nv"], [dt, dt], need)
            lam = (f"[&]({mt} cur) -> {mt} {{ const {rt} ov = {_load('(&cur)', '0', dt)}; const {rt} nv = {value};"
                   f" {mt} res; {_store('(&res)', '0', combine, dt)} return res; }}")
            update = f"ember_atomic_update(out + t, {lam})"
        text = loop + "".join(target) + f"    if (ok) {update};\n  }}\n"
        params = [(f"const {it}* __restrict__", "ix"), (f"const {mt}* __restrict__", "upd"), (f"{mt}*", "out")]
        ctx.out.launches.append(ctx.define(text, params, grid, [step.indices, step.updates, step.out]))
        return
    claim = ctx.scratch(np.uint64, size)
    fill = (_stride_loop("p", f"{size}LL", I, "win[p] = 0ULL;"))
    ctx.out.launches.append(ctx.define(fill, [("unsigned long long* __restrict__", "win")], -(-size // BLOCK), [claim]))
    text = loop + "".join(target) + "    if (ok) atomicMax(win + t, (unsigned long long)u + 1ULL);\n  }\n"
    params = [(f"const {it}* __restrict__", "ix"), ("unsigned long long* __restrict__", "win")]
    ctx.out.launches.append(ctx.define(text, params, grid, [step.indices, claim]))
    text = loop + "".join(target) + "    if (ok && win[t] == (unsigned long long)u + 1ULL) out[t] = upd[u];\n  }\n"
    params = [(f"const {it}* __restrict__", "ix"), ("const unsigned long long* __restrict__", "win"),
              (f"const {mt}* __restrict__", "upd"), (f"{mt}* __restrict__", "out")]
    ctx.out.launches.append(ctx.define(text, params, grid, [step.indices, claim, step.updates, step.out]))


_STEP_RULES = {
    Loop: _loop,
    Contraction: _contraction,
    ArgReduce: _arg_reduce,
    Scatter: _scatter,
    Cumulative: sort_rules.cumulative,
    Sort: sort_rules.sort,
    Factorization: linalg.render,
    Convolution: conv_rules.render_convolution,
    WindowReduce: window_rules.render_window_reduce,
}

# Helpers every kernel source may use, in CUDA C that the device prelude and the host header both accept.
COMMON = r"""
template <typename T, int N> struct alignas(sizeof(T) * N) ember_vec { T v[N]; };
template <typename T> __device__ __forceinline__ T ember_clamp(T x, T lo, T hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}
__device__ __forceinline__ void ember_atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void ember_atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void ember_atomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void ember_atomic_add(unsigned int* p, unsigned int v) { atomicAdd(p, v); }
__device__ __forceinline__ void ember_atomic_add(unsigned long long* p, unsigned long long v) { atomicAdd(p, v); }
__device__ __forceinline__ void ember_atomic_add(long long* p, long long v) {
  atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
// *p = f(*p) atomically: a compare-and-swap loop on the element (8 or 4 bytes) or on the 4-byte word
// holding it (1 or 2 bytes, its neighbours left as they are)
template <typename T, typename F> __device__ __forceinline__ void ember_atomic_update(T* p, F f) {
  if constexpr (sizeof(T) == 8) {
    unsigned long long* word = (unsigned long long*)p;
    unsigned long long old = *word, assumed;
    do {
      assumed = old;
      T cur;
      memcpy(&cur, &assumed, sizeof(T));
      const T next = f(cur);
      unsigned long long nbits;
      memcpy(&nbits, &next, sizeof(T));
      old = atomicCAS(word, assumed, nbits);
    } while (assumed != old);
  } else {
    unsigned int* word = (unsigned int*)((unsigned long long)p & ~3ULL);
    const unsigned int shift = (unsigned int)((unsigned long long)p & 3ULL) * 8u;
    const unsigned int mask = (sizeof(T) == 4 ? 0xffffffffu : sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      const unsigned int bits = (assumed & mask) >> shift;
      T cur;
      memcpy(&cur, &bits, sizeof(T));
      const T next = f(cur);
      unsigned int nbits = 0;
      memcpy(&nbits, &next, sizeof(T));
      old = atomicCAS(word, assumed, (assumed & ~mask) | (nbits << shift));
    } while (assumed != old);
  }
}
"""
