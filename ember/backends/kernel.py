"""A fusion body lowered to the loop-level description every renderer shares (LLVM IR, CUDA C).

`lower_kernel(body, kind)` gives a `Kernel`: buffers (inputs, outputs, temps) and steps run in
order. A `Loop` walks an iteration space, computes a scalar op DAG per point (loads through index
maps, the primitives' scalar ops, shared subexpressions once), folds values into reductions over
some of its axes and stores values at the identity index; a `Contraction` is a dot_general into a
buffer (an epilogue's loop then runs over that buffer), a `Convolution` a conv_general_dilated
likewise, a `WindowReduce` a reduce_window_sum/max/min; an `ArgReduce` is an argmax/argmin along one
axis, a `Scatter` writes updates at computed positions, a `Cumulative` is a running sum, product,
max or min along one axis, a `Sort` sorts several operands together along one axis, writing one
output each, and a `Factorization` runs a dense linear-algebra routine on stacks of matrices, writing
each of its outputs (their operands are buffers: a computed operand is stored first). Layout ops never
appear as ops: broadcast,
reshape, transpose, slice, pad, rev, concatenate, iota and gather become index arithmetic
(kernel_index) and selects. Reductions and dots are the only values held in buffers between steps,
so consumers of a reduced value run in a later loop over the reduced space. `evaluate` runs a
kernel with NumPy, vectorized over the space: the proof that the description means the body.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ember.backends import kernel_index as ix
from ember.backends import math as math_lib
from ember.backends.kernel_index import Ix
from ember.errors import EmberError
from ember.passes.memory import Plan, body_shareable
from ember.tracer import prims as P
from ember.tracer.ir import Graph, Literal, Node, Var
from ember.tracer.primitive import impl_rules
from ember.tracer.prims.reduce import identity as _identity
from ember.tracer.prims.sort import cumulative_reference


class KernelError(EmberError, ValueError):
    """A fusion body holds something no kernel can compute (a primitive outside the fusible set)."""


@dataclass(frozen=True)
class Buffer:
    name: str  # in<k>, out<k> or t<k>
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class Op:
    """One scalar op of a loop's DAG; `args` are ids of earlier ops of the same loop. `prim` is a
    primitive's name (params as sorted pairs), or load (buffer, index), const (value) or index (an
    index expression as a value: iota, pad predicates)."""

    prim: str
    args: tuple[int, ...]
    dtype: np.dtype
    params: tuple = ()

    def param(self, name: str):
        return dict(self.params)[name]


@dataclass(frozen=True)
class Reduce:
    """`out`[kept loop vars] = fold of op `value` with `combine` over the loop's reduce axes,
    accumulated in `acc_dtype` from `init`, then converted to the buffer's dtype."""

    combine: str  # add, mul, max, min
    value: int
    acc_dtype: np.dtype
    init: object
    out: str


@dataclass(frozen=True)
class Store:
    buffer: str
    value: int
    index: tuple[Ix, ...]


@dataclass(frozen=True)
class Loop:
    space: tuple[int, ...]
    reduce_axes: tuple[int, ...]
    ops: tuple[Op, ...]
    reductions: tuple[Reduce, ...]
    stores: tuple[Store, ...]


@dataclass(frozen=True)
class Contraction:
    """out = dot_general(lhs, rhs) with the prim's dimension_numbers (output: batch, lhs free, rhs free)."""

    lhs: str
    rhs: str
    dimension_numbers: tuple
    out: str


@dataclass(frozen=True)
class ArgReduce:
    """out[kept] = the index along `axis` of the first maximum (argmax) or minimum (argmin) of
    `operand`, a NaN counting as the extremum (the first NaN wins), as numpy's argmax/argmin;
    converted (wrapping) to `index_dtype`, out's dtype."""

    combine: str  # argmax, argmin
    operand: str
    axis: int
    index_dtype: np.dtype
    out: str


@dataclass(frozen=True)
class Scatter:
    """out = operand with `updates` written at the index vectors `indices` (the prims' layout, with
    `batch_dims`), in row-major update order: `replace` keeps the last of duplicates; `add`, `mul`,
    `min` and `max` combine each update into its target as that elementwise primitive does (NumPy's
    ufunc.at: min and max propagate NaN; on bools mul and min are `and`, add and max `or`); an
    out-of-range index vector's update is dropped. out starts as a copy of operand (none needed when
    they are the same buffer: a scatter written in place)."""

    mode: str  # replace, or the combining primitive's name: add, mul, min, max
    operand: str
    indices: str
    updates: str
    batch_dims: int
    out: str


@dataclass(frozen=True)
class Cumulative:
    """out = the running `combine` of `operand` along `axis`, from the end when `reverse` (cumsum,
    cumprod, cummax, cummin, cumlogsumexp); float16 sums and products accumulate in float32 (`acc_dtype`), and a
    float sum starts from +0.0 (as JAX's: a sum of -0.0s is +0.0)."""

    combine: str  # add, mul, max, min, logaddexp
    operand: str
    axis: int
    reverse: bool
    out: str


@dataclass(frozen=True)
class Sort:
    """outs = `operands` sorted together along `dimension`, stably, lexicographically by the first
    `num_keys` in JAX's total order (-0.0 equals 0.0; NaNs equal each other, after +inf)."""

    operands: tuple[str, ...]
    dimension: int
    num_keys: int
    outs: tuple[str, ...]


@dataclass(frozen=True)
class Factorization:
    """outs = dense linear-algebra `routine` (cholesky, triangular_solve, lu, qr, eigh, svd) of the `operands`,
    each a stack of matrices (the last two axes; the leading ones batched), with the primitive's
    `params` (sorted name, value pairs): what the primitive's numpy reference computes. One step
    writes every output of its routine (lu's factors, pivots and permutation)."""

    routine: str
    operands: tuple[str, ...]
    params: tuple
    outs: tuple[str, ...]

    def param(self, name: str):
        return dict(self.params)[name]


@dataclass(frozen=True)
class Convolution:
    """out = conv_general_dilated(lhs, rhs) with the primitive's canonical params (explicit (lo, hi)
    padding, dimension numbers as (lhs_spec, rhs_spec, out_spec) int tuples)."""

    lhs: str
    rhs: str
    window_strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    lhs_dilation: tuple[int, ...]
    rhs_dilation: tuple[int, ...]
    dimension_numbers: tuple[tuple[int, ...], ...]
    feature_group_count: int
    batch_group_count: int
    out: str

    def params(self) -> dict:
        """The primitive's params, as its numpy reference takes them."""
        return {name: getattr(self, name) for name in CONV_PARAMS}


@dataclass(frozen=True)
class WindowReduce:
    """out = each window of `operand` folded by `combine` (add, max, min: reduce_window_sum/max/min)
    with the primitive's params; padding and base-dilation holes hold the fold's identity."""

    combine: str
    operand: str
    window_dimensions: tuple[int, ...]
    window_strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    base_dilation: tuple[int, ...]
    window_dilation: tuple[int, ...]
    out: str

    def params(self) -> dict:
        return {name: getattr(self, name) for name in WINDOW_PARAMS}


WINDOW_PARAMS = ("window_dimensions", "window_strides", "padding", "base_dilation", "window_dilation")
CONV_PARAMS = ("window_strides", "padding", "lhs_dilation", "rhs_dilation", "dimension_numbers",
               "feature_group_count", "batch_group_count")
Step = Loop | Contraction | ArgReduce | Scatter | Cumulative | Sort | Factorization
Step = Step | Convolution
Step = Step | WindowReduce


@dataclass(frozen=True)
class Kernel:
    """`shareable`: the (output, input) name pairs that may be one buffer, from the body
    (`passes.memory.body_shareable`, which the memory plan's in-place writes keep to): the only
    pairs a caller may pass one buffer for."""

    kind: str
    inputs: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]
    temps: tuple[Buffer, ...]
    steps: tuple[Step, ...]
    shareable: frozenset[tuple[str, str]] = frozenset()

    def __str__(self) -> str:
        return kernel_text(self)


def step_reads(step: Step) -> tuple[str, ...]:
    """The buffers a step other than a Loop reads whole (a Loop reads through its load ops)."""
    if isinstance(step, Contraction):
        return (step.lhs, step.rhs)
    if isinstance(step, ArgReduce):
        return (step.operand,)
    if isinstance(step, Scatter):
        return (step.operand, step.indices, step.updates)
    if isinstance(step, Convolution):
        return (step.lhs, step.rhs)
    if isinstance(step, WindowReduce):
        return (step.operand,)
    if isinstance(step, Cumulative):
        return (step.operand,)
    if isinstance(step, (Sort, Factorization)):
        return step.operands
    return ()


def step_writes(step: Step) -> tuple[str, ...]:
    """The buffers a step other than a Loop writes (a Sort's and a Factorization's: one per output)."""
    return step.outs if isinstance(step, (Sort, Factorization)) else (step.out,)


_COMBINE = {P.reduce_sum_p: "add", P.reduce_prod_p: "mul", P.reduce_max_p: "max", P.reduce_min_p: "min"}
_WIDENED = {np.dtype(np.float16): np.dtype(np.float32)}


def acc_dtype(combine: str, dtype: np.dtype) -> np.dtype:
    """float16 sums and products accumulate in float32; ints as their numpy reference (own dtype)."""
    return _WIDENED.get(dtype, dtype) if combine in ("add", "mul") else dtype


# --- lowering ---------------------------------------------------------------------------------------

def lower_kernel(body: Graph, kind: str) -> Kernel:
    """The loop description of fusion body `body` (made by fusion rule `kind`)."""
    return _Lowering(body, kind).kernel()


class _Lowering:
    def __init__(self, body: Graph, kind: str):
        self.body, self.kind = body, kind
        self.producer = {v: n for n in body.nodes for v in n.outputs}
        for n in body.nodes:
            if n.prim not in _EMIT and n.prim not in _COMBINE and n.prim not in _STEPS \
                    and n.prim.kind != "elementwise":
                raise KernelError(f"a kernel cannot compute {n.prim.name}: it is not a fusible primitive")
        self.inputs = tuple(Buffer(f"in{k}", v.aval.shape, v.aval.dtype) for k, v in enumerate(body.inputs))
        self.outputs = tuple(Buffer(f"out{k}", v.aval.shape, v.aval.dtype) for k, v in enumerate(body.outputs))
        self.buffer = {v: b.name for v, b in zip(body.inputs, self.inputs)}
        self.temps: list[Buffer] = []
        self.level: dict = {}
        self._reads: dict = {}

    def materialized(self, v) -> bool:
        node = self.producer.get(v)
        return node is not None and (node.prim in _COMBINE or node.prim in _STEPS)

    def reads(self, v) -> frozenset:
        """Materialized values whose buffers computing `v` elementwise reads."""
        if isinstance(v, Literal) or v not in self.producer:
            return frozenset()
        if v not in self._reads:
            if self.materialized(v):
                self._reads[v] = frozenset([v])
            else:
                node = self.producer[v]
                self._reads[v] = frozenset().union(*(self.reads(a) for a in node.inputs))
        return self._reads[v]

    def level_of(self, deps) -> int:
        return 1 + max((self.level[d] for d in deps), default=-1)

    def assign(self, v, name: str | None = None) -> str:
        if v not in self.buffer:
            if name is None:
                name = f"t{len(self.temps)}"
                self.temps.append(Buffer(name, v.aval.shape, v.aval.dtype))
            self.buffer[v] = name
        return self.buffer[v]

    def jobs(self) -> list:
        """(level, what, var, buffer name) for every reduction, step (a contraction, arg-reduction or
        scatter, whose operands are buffers) and store, producers first."""
        out_names = {}
        for v, b in zip(self.body.outputs, self.outputs):
            if self.materialized(v) and v not in out_names:
                out_names[v] = b.name
        jobs = []
        for node in self.body.nodes:
            v = node.outputs[0]
            if not self.materialized(v):
                continue
            if node.prim in _STEPS:
                after = [self.level.get(a, -1) for a in node.inputs]
                for a in node.inputs:
                    if a not in self.buffer:
                        jobs.append((self.level_of(self.reads(a)), "store", a, self.assign(a)))
                        after.append(jobs[-1][0])
                for w in node.outputs:  # a step writes every output of its node
                    self.level[w] = 1 + max(after)
                    self.assign(w, out_names.get(w))
                jobs.append((self.level[v], "step", v, self.buffer[v]))
            else:
                self.level[v] = self.level_of(self.reads(node.inputs[0]))
                jobs.append((self.level[v], "reduce", v, self.assign(v, out_names.get(v))))
        for v, b in zip(self.body.outputs, self.outputs):
            if out_names.get(v) != b.name:
                jobs.append((self.level_of(self.reads(v)), "store", v, b.name))
        # reductions first within a level, so a store over their space joins their loop (a value both
        # reduced and stored, as argmax's operand beside a reduce_max, is computed once)
        return sorted(jobs, key=lambda j: (j[0], j[1] == "store"))

    def kernel(self) -> Kernel:
        steps: list = []
        loops: dict = {}  # (level, space, reduce axes) -> [jobs]
        for job in self.jobs():
            lvl, what, v, _ = job
            if what == "step":
                steps.append((lvl, job))
                continue
            if what == "reduce":
                node = self.producer[v]
                key = (lvl, node.inputs[0].aval.shape, node.params["axes"])
            else:
                space = v.aval.shape
                key = next((k for k in loops if k[:2] == (lvl, space)), (lvl, space, ()))
            if key not in loops:
                loops[key] = []
                steps.append((lvl, key))
            loops[key].append(job)
        built = [self.step(s[1]) if s[1][1] == "step" else self.loop(s[1], loops[s[1]])
                 for s in sorted(steps, key=lambda s: s[0])]
        shareable = frozenset((f"out{m}", f"in{k}") for m, k in body_shareable(self.body))
        return _alias_epilogues(Kernel(self.kind, self.inputs, self.outputs, tuple(self.temps), tuple(built),
                                       shareable))

    def step(self, job) -> Step:
        _, _, v, name = job
        node = self.producer[v]
        out = tuple(self.buffer[w] for w in node.outputs) if node.prim.multiple_results else name
        return _STEPS[node.prim](*(self.buffer[a] for a in node.inputs), out=out, **node.params)

    def loop(self, key, jobs) -> Loop:
        _, space, axes = key
        idx = tuple(ix.var(a, n) for a, n in enumerate(space))
        # a step operand materialized by this loop is computed here (by every reader in it), not loaded
        own = {v for _, what, v, name in jobs if what == "store" and self.buffer.get(v) == name}
        b = _LoopBuilder(self, space, own)
        reductions, stores = [], []
        for _, what, v, name in jobs:
            if what == "reduce":
                node = self.producer[v]
                combine, dt = _COMBINE[node.prim], node.inputs[0].aval.dtype
                value = b.emit(node.inputs[0], idx)
                init = _identity(node.prim, dt)
                reductions.append(Reduce(combine, value, acc_dtype(combine, dt), init, name))
            else:
                stores.append(Store(name, b.emit(v, idx), idx))
        return Loop(space, axes, tuple(b.ops), tuple(reductions), tuple(stores))


# --- a scheduled graph node as a kernel (every backend lowers nodes this way) ----------------------

def single_node_body(node: Node) -> Graph:
    """`node` as a fusion body of its own: its Var operands become body inputs (Literals stay)."""
    inputs = [Var(a.aval) for a in node.inputs if isinstance(a, Var)]
    it = iter(inputs)
    args = [next(it) if isinstance(a, Var) else a for a in node.inputs]
    outs = [Var(v.aval) for v in node.outputs]
    return Graph(inputs, [Node(node.prim, args, node.params, outs, node.loc, node.role)], outs)


def check_inplace(node: Node, kernel: Kernel, bound: list, plan: Plan) -> None:
    """Raise unless every in-place write the plan asks of `node` is a pair its kernel may share
    (`Kernel.shareable`): the renderer renders the plan's decisions, it does not revise them."""
    for k, v in enumerate(node.outputs):
        operand = plan.inplace.get(v)
        bad = [j for j, a in enumerate(bound) if operand is not None and a is operand
               and (f"out{k}", f"in{j}") not in kernel.shareable]
        if bad:
            raise ValueError(f"the memory plan writes output {k} of {node.prim.name}"
                             f"{' at ' + node.loc if node.loc else ''} in place of operand {bad[0]}, which its "
                             "kernel reads where or after it writes that output (not in Kernel.shareable)")


def node_kernel(node: Node) -> tuple[Kernel, list]:
    """The kernel description of a scheduled node and the graph atoms bound to its inputs."""
    if node.prim is P.fusion_p:
        return lower_kernel(node.params["body"], node.params["kind"]), list(node.inputs)
    return lower_kernel(single_node_body(node), node.prim.kind), [a for a in node.inputs if isinstance(a, Var)]


class _LoopBuilder:
    """Emits the scalar ops of one loop: `emit(v, index)` gives the op id of `v`'s element at `index`,
    hash-consed so a subexpression is computed once."""

    def __init__(self, lowering: _Lowering, space, own=frozenset()):
        self.lowering, self.space, self.own = lowering, space, own
        self.ops: list[Op] = []
        self.ids: dict = {}
        self.memo: dict = {}

    def op(self, prim: str, args, dtype, params=()) -> int:
        o = Op(prim, tuple(args), np.dtype(dtype), tuple(params))
        if o not in self.ids:
            self.ids[o] = len(self.ops)
            self.ops.append(o)
        return self.ids[o]

    def const(self, value, dtype) -> int:
        """A constant op, hash-consed by its bits: -0.0 and 0.0 (equal as floats) stay apart."""
        scalar = np.asarray(value, dtype)[()]
        return self.op("const", (), dtype, (("bits", scalar.tobytes()), ("value", scalar.item())))

    def index(self, expr: Ix, dtype=np.int64) -> int:
        if expr.op == "const":
            return self.const(expr.args[0], dtype)
        return self.op("index", (), dtype, (("index", expr),))

    def emit(self, v, index: tuple) -> int:
        if isinstance(v, Literal):
            return self.const(v.val, v.dtype)
        if v.aval.size == 0:  # never read: a loop over it runs no iteration, a select never picks it
            return self.const(0, v.aval.dtype)
        key = (v, index)
        if key not in self.memo:
            name = self.lowering.buffer.get(v)
            if name is not None and v not in self.own:
                self.memo[key] = self.op("load", (), v.aval.dtype, (("buffer", name), ("index", index)))
            else:
                node = self.lowering.producer[v]
                rule = _EMIT.get(node.prim, _elementwise)
                self.memo[key] = rule(self, node, index, **node.params)
        return self.memo[key]

    def select(self, pred: Ix, on_true, on_false) -> int:
        """select over an index predicate, folded when the predicate is decided (operands are thunks)."""
        if pred == ix.TRUE:
            return on_true()
        if pred == ix.FALSE:
            return on_false()
        t, f = on_true(), on_false()
        return self.op("select", (self.index(pred, bool), t, f), self.ops[t].dtype)


# --- emit rules: a node's element at an index, keyed by primitive -----------------------------------

def _elementwise(b: _LoopBuilder, node, index, **params) -> int:
    args = [b.emit(a, index if a.aval.shape else ()) for a in node.inputs]
    return b.op(node.prim.name, args, node.outputs[0].aval.dtype, sorted(params.items()))


def _broadcast(b, node, index, *, shape, broadcast_dimensions):
    x = node.inputs[0]
    inner = tuple(ix.const(0) if n == 1 else index[d] for n, d in zip(x.aval.shape, broadcast_dimensions))
    return b.emit(x, inner)


def strides(shape) -> list[int]:
    """C-order element strides of `shape`."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


def _reshape(b, node, index, *, new_sizes):
    x = node.inputs[0]
    linear = ix.add(*(ix.mul(i, s) for i, s in zip(index, strides(new_sizes))))
    inner = tuple(ix.mod(ix.floordiv(linear, s), n) for s, n in zip(strides(x.aval.shape), x.aval.shape))
    return b.emit(x, inner)


def _transpose(b, node, index, *, permutation):
    inner = [None] * len(index)
    for k, p in enumerate(permutation):
        inner[p] = index[k]
    return b.emit(node.inputs[0], tuple(inner))


def _slice(b, node, index, *, start_indices, limit_indices, strides):
    inner = tuple(ix.add(ix.mul(i, st), s) for i, s, st in zip(index, start_indices, strides))
    return b.emit(node.inputs[0], inner)


def _rev(b, node, index, *, dimensions):
    shape = node.inputs[0].aval.shape
    inner = tuple(ix.add(ix.mul(i, -1), shape[k] - 1) if k in dimensions else i for k, i in enumerate(index))
    return b.emit(node.inputs[0], inner)


def _pad(b, node, index, *, padding_config):
    """Inside the operand's region (in range and on the interior stride) load it, else the padding value.
    The operand index is clamped, so renderers may load it unconditionally."""
    x, value = node.inputs
    if x.aval.size == 0:  # all padding
        return b.emit(value, ())
    inner, preds = [], []
    for i, n, (lo, _, interior) in zip(index, x.aval.shape, padding_config):
        step = interior + 1
        last = lo + max(n - 1, 0) * step
        offset = ix.clamp(ix.add(i, -lo), 0, last - lo)
        inner.append(ix.floordiv(offset, step))
        preds += [ix.ge(i, lo), ix.lt(i, last + 1), ix.eq(ix.mod(offset, step), 0)]
    return b.select(ix.and_(*preds), lambda: b.emit(x, tuple(inner)), lambda: b.emit(value, ()))


def _iota(b, node, index, *, dtype, shape, dimension):
    return b.index(index[dimension], dtype)


def _concatenate(b, node, index, *, dimension):
    offsets = np.cumsum([0] + [a.aval.shape[dimension] for a in node.inputs]).tolist()

    def part(k):
        i = index[dimension]
        local = ix.clamp(ix.add(i, -offsets[k]), 0, node.inputs[k].aval.shape[dimension] - 1)
        inner = index[:dimension] + (local,) + index[dimension + 1:]
        if k == len(node.inputs) - 1:
            return b.emit(node.inputs[k], inner)
        return b.select(ix.lt(i, offsets[k + 1]), lambda: b.emit(node.inputs[k], inner), lambda: part(k + 1))

    return part(0)


def _gather(b, node, index, *, batch_dims):
    """operand[batch, clamp(indices[batch, n, j]), slice]: a data-dependent load (clamped as the prim)."""
    operand, indices = node.inputs
    nb, k = batch_dims, indices.aval.shape[-1]
    n_rank = indices.aval.ndim - 1 - nb
    lead = index[:nb + n_rank]
    inner = list(index[:nb])
    for j in range(k):
        size = operand.aval.shape[nb + j]
        read = b.emit(indices, lead + (ix.const(j),))
        inner.append(ix.clamp(ix.value(read), 0, max(size - 1, 0)))
    return b.emit(operand, tuple(inner) + index[nb + n_rank:])


_EMIT = {P.broadcast_in_dim_p: _broadcast, P.reshape_p: _reshape, P.transpose_p: _transpose,
         P.slice_p: _slice, P.rev_p: _rev, P.pad_p: _pad, P.iota_p: _iota,
         P.concatenate_p: _concatenate, P.gather_p: _gather}


# --- steps: a node whose operands are buffers, keyed by primitive -----------------------------------

def _contraction(lhs, rhs, *, out, dimension_numbers):
    return Contraction(lhs, rhs, dimension_numbers, out)


def _convolution(lhs, rhs, *, out, **params):
    return Convolution(lhs, rhs, out=out, **params)


def _window_reduce(combine):
    def rule(operand, *, out, **params):
        return WindowReduce(combine, operand, out=out, **params)
    return rule


def _arg_reduce(combine):
    def rule(operand, *, out, axis, index_dtype):
        return ArgReduce(combine, operand, axis, np.dtype(index_dtype), out)
    return rule


def _scatter(mode):
    def rule(operand, indices, updates, *, out, batch_dims):
        return Scatter(mode, operand, indices, updates, batch_dims, out)
    return rule


def _cumulative(combine):
    def rule(operand, *, out, axis, reverse):
        return Cumulative(combine, operand, axis, reverse, out)
    return rule


def _sort(*operands, out, dimension, is_stable, num_keys):
    return Sort(tuple(operands), dimension, num_keys, tuple(out))


def _factorization(routine):
    def rule(*operands, out, **params):
        outs = out if isinstance(out, tuple) else (out,)
        return Factorization(routine, operands, tuple(sorted(params.items())), outs)
    return rule


# a WindowReduce's fold by primitive: the reduction primitive whose combine and identity it uses
WINDOW_FOLDS = {P.reduce_window_sum_p: P.reduce_sum_p, P.reduce_window_max_p: P.reduce_max_p,
                P.reduce_window_min_p: P.reduce_min_p}
# a Scatter's mode by primitive: its combining elementwise primitive's name, or replace
SCATTER_MODES = {P.scatter_p: "replace", P.scatter_add_p: "add", P.scatter_mul_p: "mul", P.scatter_min_p: "min",
                 P.scatter_max_p: "max"}
_STEPS = {P.dot_general_p: _contraction, P.argmax_p: _arg_reduce("argmax"), P.argmin_p: _arg_reduce("argmin"),
          **{prim: _scatter(mode) for prim, mode in SCATTER_MODES.items()},
          P.cumsum_p: _cumulative("add"),
          P.cumprod_p: _cumulative("mul"),
          P.cummax_p: _cumulative("max"),
          P.cummin_p: _cumulative("min"),
          P.cumlogsumexp_p: _cumulative("logaddexp"),
          P.sort_p: _sort,
          P.cholesky_p: _factorization("cholesky"),
          P.triangular_solve_p: _factorization("triangular_solve"),
          P.lu_p: _factorization("lu"),
          P.qr_p: _factorization("qr"),
          P.eigh_p: _factorization("eigh"),
          P.svd_p: _factorization("svd"),
          P.conv_general_dilated_p: _convolution,
          **{prim: _window_reduce(_COMBINE[fold]) for prim, fold in WINDOW_FOLDS.items()},
}


# steps that write their whole result before anything reads it, so an epilogue can run over it in place
_EPILOGUE_STEPS = (Contraction, Convolution)


def _alias_epilogues(k: Kernel) -> Kernel:
    """A contraction or convolution whose temp is read only by the loop storing an output of its shape
    and dtype, at the identity index, writes that output instead: the epilogue then runs in place over it."""
    steps = list(k.steps)
    temps = {t.name: t for t in k.temps}
    for s, c in enumerate(steps):
        if not isinstance(c, _EPILOGUE_STEPS) or c.out not in temps:
            continue
        readers = [n for n, st in enumerate(steps) if isinstance(st, Loop) and _loads_of(st, c.out)]
        if len(readers) != 1 or any(c.out in step_reads(st) for st in steps):
            continue
        loop = steps[readers[0]]
        identity = tuple(ix.var(a, n) for a, n in enumerate(loop.space))
        if loop.reduce_axes or any(o.param("index") != identity for o in _loads_of(loop, c.out)):
            continue
        t = temps[c.out]
        target = next((st.buffer for st in loop.stores if st.index == identity and any(
            o.name == st.buffer and o.shape == t.shape and o.dtype == t.dtype for o in k.outputs)), None)
        if target is None:
            continue
        steps[s] = replace(c, out=target)
        steps[readers[0]] = replace(loop, ops=tuple(
            replace(o, params=(("buffer", target), ("index", o.param("index")))) if o in _loads_of(loop, c.out)
            else o for o in loop.ops))
        del temps[c.out]
    return replace(k, temps=tuple(temps.values()), steps=tuple(steps))


def _loads_of(loop: Loop, name: str) -> list[Op]:
    return [o for o in loop.ops if o.prim == "load" and o.param("buffer") == name]


# --- printing ---------------------------------------------------------------------------------------

def _buf_text(b: Buffer) -> str:
    return f"{b.name}: {b.dtype.name}[{','.join(map(str, b.shape))}]"


def _index_text(index) -> str:
    return "[" + ", ".join(map(str, index)) + "]"


def _op_text(o: Op) -> str:
    if o.prim == "load":
        rhs = f"load {o.param('buffer')}{_index_text(o.param('index'))}"
    elif o.prim == "const":
        rhs = f"const {o.param('value')!r}"
    elif o.prim == "index":
        rhs = f"index {o.param('index')}"
    else:
        params = "".join(f" {k}={v}" for k, v in o.params)
        rhs = f"{o.prim}{params} " + " ".join(f"%{a}" for a in o.args)
    return f"{rhs} : {o.dtype.name}"


_STEP_TEXT = {
    Contraction: lambda s: f"  {s.out} = dot_general {s.lhs} {s.rhs} dimension_numbers={s.dimension_numbers}",
    ArgReduce: lambda s: f"  {s.out} = {s.combine} {s.operand} axis={s.axis} index_dtype={s.index_dtype.name}",
    Scatter: lambda s: f"  {s.out} = scatter-{s.mode} {s.operand} at {s.indices} of {s.updates} "
                       f"batch_dims={s.batch_dims}",
    Cumulative: lambda s: f"  {s.out} = cumulative-{s.combine} {s.operand} axis={s.axis}"
                          f"{' reverse' if s.reverse else ''}",
    Sort: lambda s: f"  {', '.join(s.outs)} = sort {' '.join(s.operands)} dimension={s.dimension} "
                    f"num_keys={s.num_keys}",
    Factorization: lambda s: f"  {', '.join(s.outs)} = {s.routine} {' '.join(s.operands)}"
                             + "".join(f" {k}={v}" for k, v in s.params),
    Convolution: lambda s: f"  {s.out} = conv_general_dilated {s.lhs} {s.rhs} "
                           + " ".join(f"{k}={v}" for k, v in s.params().items()),
    WindowReduce: lambda s: f"  {s.out} = window-{s.combine} {s.operand} "
                            + " ".join(f"{k}={v}" for k, v in s.params().items()),
}


def kernel_text(k: Kernel) -> str:
    """Readable pseudo-code, one line per op, for dumps."""
    lines = [f"kernel {k.kind} ({', '.join(map(_buf_text, k.inputs))}) -> ({', '.join(map(_buf_text, k.outputs))})"]
    if k.temps:
        lines.append("  temps " + ", ".join(map(_buf_text, k.temps)))
    for step in k.steps:
        if not isinstance(step, Loop):
            lines.append(_STEP_TEXT[type(step)](step))
            continue
        space = ", ".join(f"i{a}<{n}" for a, n in enumerate(step.space))
        red = f" reduce ({', '.join(f'i{a}' for a in step.reduce_axes)})" if step.reduce_axes else ""
        lines.append(f"  loop [{space}]{red}:")
        lines += [f"    %{n} = {_op_text(o)}" for n, o in enumerate(step.ops)]
        kept = tuple(ix.var(a, n) for a, n in enumerate(step.space) if a not in step.reduce_axes)
        lines += [f"    {r.out}{_index_text(kept)} = {r.combine}-reduce %{r.value} "
                  f"(acc {r.acc_dtype.name}, init {r.init!r})" for r in step.reductions]
        lines += [f"    {s.buffer}{_index_text(s.index)} = %{s.value}" for s in step.stores]
    return "\n".join(lines)


# --- the reference evaluator ------------------------------------------------------------------------

_PRIMS = {p.name: p for p in impl_rules}
_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def evaluate(kernel: Kernel, *arrays, math: str = "numpy") -> tuple[np.ndarray, ...]:
    """Run `kernel` on NumPy arrays, vectorized over each loop's space (np.indices, no Python loop per
    element): what every renderer's code must compute. math="algorithm" computes the float ops the math
    library implements (exp, log, tanh, pow, ...) with its algorithms under the NumPy emitter, bit for bit
    what the compiled kernel computes, instead of with the primitives' NumPy references."""
    if math not in ("numpy", "algorithm"):
        raise ValueError(f"math is 'numpy' (the primitives' references) or 'algorithm', not {math!r}")
    bufs = {b.name: np.asarray(a) for b, a in zip(kernel.inputs, arrays)}
    for b in kernel.outputs + kernel.temps:
        bufs[b.name] = np.empty(b.shape, b.dtype)
    for step in kernel.steps:
        if isinstance(step, Loop):
            _run_loop(step, bufs, math == "algorithm")
        else:
            values = _STEP_EVAL[type(step)](step, *(bufs[b] for b in step_reads(step)))
            for name, value in zip(step_writes(step), values if isinstance(step, (Sort, Factorization)) else (values,),
                                   strict=True):
                bufs[name][...] = value
    return tuple(bufs[b.name] for b in kernel.outputs)


_SCATTER_PRIMS = {mode: prim for prim, mode in SCATTER_MODES.items()}
_WINDOW_PRIMS = {_COMBINE[fold]: prim for prim, fold in WINDOW_FOLDS.items()}
# A step computes what its primitive's numpy reference computes on its operand buffers.
_STEP_EVAL = {
    Contraction: lambda s, lhs, rhs: impl_rules[P.dot_general_p](lhs, rhs, dimension_numbers=s.dimension_numbers),
    ArgReduce: lambda s, x: impl_rules[_PRIMS[s.combine]](x, axis=s.axis, index_dtype=s.index_dtype),
    Scatter: lambda s, x, i, u: impl_rules[_SCATTER_PRIMS[s.mode]](x, i, u, batch_dims=s.batch_dims),
    Cumulative: lambda s, x: cumulative_reference(s.combine, x, s.axis, s.reverse),
    Sort: lambda s, *xs: impl_rules[P.sort_p](*xs, dimension=s.dimension, is_stable=True, num_keys=s.num_keys),
    Factorization: lambda s, *xs: _factorization_eval(s, xs),
    Convolution: lambda s, lhs, rhs: impl_rules[P.conv_general_dilated_p](lhs, rhs, **s.params()),
    WindowReduce: lambda s, x: impl_rules[_WINDOW_PRIMS[s.combine]](x, **s.params()),
}


def _factorization_eval(step: Factorization, operands) -> tuple:
    """The routine's primitive's reference on the operand buffers, as a tuple of outputs."""
    prim = _PRIMS[step.routine]
    result = impl_rules[prim](*operands, **dict(step.params))
    return tuple(result) if prim.multiple_results else (result,)


def _run_loop(loop: Loop, bufs: dict, algorithms: bool = False) -> None:
    loop_vars = np.indices(loop.space, sparse=True) if loop.space else ()
    values: list = []
    for o in loop.ops:
        if algorithms and o.prim in _ALGORITHMS and o.dtype.kind == "f":
            values.append(_eval_math(o, values, loop.ops))
        else:
            values.append(_eval_op(o, values, loop_vars, bufs))
    for r in loop.reductions:
        full = np.broadcast_to(values[r.value], loop.space).astype(r.acc_dtype)
        folded = _UFUNC[r.combine].reduce(full, axis=loop.reduce_axes, initial=r.init)
        bufs[r.out][...] = np.asarray(folded).astype(bufs[r.out].dtype)
    for s in loop.stores:
        bufs[s.buffer][...] = np.broadcast_to(values[s.value], loop.space)


# the ops the renderers compute with the math library's algorithms: sqrt and rsqrt render as the IEEE
# operations, which their NumPy references are
_ALGORITHMS = frozenset(math_lib.NAMES) - {"sqrt", "rsqrt"}
# pow with these constant exponents renders as products, not the math library's pow (llvm/scalar.py)
_SMALL_POWERS = {2.0: lambda x: x * x, 3.0: lambda x: x * x * x, 4.0: lambda x: (x * x) * (x * x),
                 -1.0: lambda x: 1 / x}


def _eval_math(o: Op, values: list, ops: list):
    """A float op of the math library by its algorithm (float16 in float32, rounded once, as rendered)."""
    args = [values[a] for a in o.args]
    exponent = ops[o.args[1]] if o.prim == "pow" else None
    if exponent is not None and exponent.prim == "const" and float(exponent.param("value")) in _SMALL_POWERS:
        wide = np.asarray(args[0], np.float32 if o.dtype == np.float16 else o.dtype)
        with np.errstate(all="ignore"):                      # IEEE results: overflow is inf
            return _SMALL_POWERS[float(exponent.param("value"))](wide).astype(o.dtype)
    return math_lib.evaluate(o.prim, *(np.asarray(a, o.dtype) for a in args))


def _eval_op(o: Op, values: list, loop_vars, bufs: dict):
    if o.prim == "load":
        where = tuple(ix.evaluate(i, loop_vars, values) for i in o.param("index"))
        return bufs[o.param("buffer")][where]
    if o.prim == "const":
        return np.asarray(o.param("value"), o.dtype)[()]
    if o.prim == "index":
        return np.asarray(ix.evaluate(o.param("index"), loop_vars, values)).astype(o.dtype)
    return impl_rules[_PRIMS[o.prim]](*(values[a] for a in o.args), **dict(o.params))
