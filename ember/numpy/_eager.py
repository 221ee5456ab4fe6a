"""The eager fast path: an ember.numpy call on concrete arrays, outside any trace, replays what the
first call of its signature did instead of running the tracing machinery again.

A signature is the function, the shape and dtype of each array operand, the type of each scalar
operand and the value of every other argument (axes, shapes, options). Its first call traces the
function into a graph (abstractly, as jit would) and keeps the graph's nodes as a list of numpy
reference calls; later calls run that list and nothing else: no promotion, no broadcasting logic, no
shape rules, no user-line lookups. A call whose graph cannot be traced without the operands' values
(a boolean mask, `nonzero`) or whose arguments cannot key a cache (a list) takes the full path, which
gives the same results as always (and the same errors).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ember import config
from ember.tracer import dtypes
from ember.tracer.array import Array
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Var
from ember.tracer.primitive import impl_rules
from ember.tracer.trace import Tracer, trace_flat, trace_state
from ember.tree import tree_flatten, tree_unflatten

MISS = object()  # the fast path cannot serve this call: take the full one
_SLOW = object()  # a signature whose calls always take the full path
MAX_SIGNATURES = 256  # per function; a full table is emptied (a rare workload of endless shapes)
_PY_SCALARS = (bool, int, float)
_tables: list[dict] = []  # every function's table, emptied when 64-bit mode switches


class _Replay:
    """The numpy reference calls of one signature's graph, on a list of slots: the operands, then the
    graph's consts and literals, then each node's outputs."""

    __slots__ = ("fixed", "steps", "outs", "avals", "tree", "scalars")

    def __init__(self, graph, tree, scalars: tuple):
        slot: dict = {}
        fixed = []
        for v in graph.inputs:
            slot[v] = len(slot)
        for v, value in zip(graph.consts, graph.const_values):
            slot[v] = len(slot)
            fixed.append(value)

        def index(atom) -> int:
            if isinstance(atom, Var):
                return slot[atom]
            fixed.append(atom.val)
            return len(graph.inputs) + len(fixed) - 1

        # literals first (operands, then consts and literals, then the nodes' outputs in order)
        node_ins = [tuple(index(a) if not isinstance(a, Var) else a for a in node.inputs) for node in graph.nodes]
        out_literals = {id(o): index(o) for o in graph.outputs if not isinstance(o, Var)}
        base = len(graph.inputs) + len(fixed)
        for k, v in enumerate(o for node in graph.nodes for o in node.outputs):
            slot[v] = base + k
        self.fixed = fixed
        self.steps = [(impl_rules[node.prim], tuple(slot[a] if isinstance(a, Var) else a for a in ins),
                       dict(node.params), node.prim.multiple_results) for node, ins in zip(graph.nodes, node_ins)]
        self.outs = tuple(slot[o] if isinstance(o, Var) else out_literals[id(o)] for o in graph.outputs)
        self.avals = tuple(o.aval for o in graph.outputs)
        self.tree = tree
        self.scalars = tuple((k, d) for k, d in enumerate(scalars) if d is not None)  # Python scalars' dtypes

    def __call__(self, operands: list):
        env = operands + self.fixed
        for impl, ins, params, multi in self.steps:
            out = impl(*[env[i] for i in ins], **params)
            if multi:
                env.extend(out)
            else:
                env.append(out)
        known = env[:len(operands) + len(self.fixed)]
        if self.tree is None:
            return _result(env[self.outs[0]], self.avals[0].dtype, known)
        return tree_unflatten(self.tree, [_result(env[i], aval.dtype, known) for i, aval in zip(self.outs, self.avals)])


def _result(out, dtype: np.dtype, known: list) -> Array:
    """A reference's result as an Array the caller owns (as tracer/trace.py's eager path gives it): a
    view or one of the `known` values (operands, consts) is copied, so results never alias inputs."""
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    if out.dtype != dtype:
        return out.astype(dtype).view(Array)
    if out.base is not None:
        return out.copy().view(Array)
    for v in known:
        if out is v:
            return out.copy().view(Array)
    return out.view(Array)


def fast_path(fn: Callable, operand_positions: tuple[int, ...] | str) -> Callable:
    """`fn` (a public ember.numpy function) as `fast(args, kwargs)`: its result by replay, or MISS.
    `operand_positions`: the positional parameters that are arrays ("*": all of them)."""
    table: dict = {}
    _tables.append(table)
    every = operand_positions == "*"

    def fast(args: tuple, kwargs: dict):
        if getattr(trace_state, "stack", None):
            return MISS
        key = []
        operands = []
        for i, x in enumerate(args):
            if every or i in operand_positions:
                t = type(x)
                if t is Array:
                    key.append((x.shape, x.dtype))
                    operands.append(x.view(np.ndarray))
                elif t is np.ndarray:
                    key.append((x.shape, x.dtype))
                    operands.append(x)
                elif t in _PY_SCALARS:
                    key.append(t)
                    operands.append(x)
                elif isinstance(x, np.generic):
                    key.append((t, x.dtype))
                    operands.append(x)
                else:
                    return MISS
            else:
                key.append((type(x), x))
        if kwargs:
            key.append(tuple((k, type(v), v) for k, v in kwargs.items()))
        key = tuple(key)
        try:
            replay = table.get(key)
        except TypeError:  # an unhashable argument (a list of axes): no signature
            return MISS
        if replay is None:
            replay = _record(fn, args, kwargs, every, operand_positions)
            if len(table) >= MAX_SIGNATURES:
                table.clear()
            table[key] = replay
        if replay is _SLOW:
            return MISS
        for k, d in replay.scalars:
            try:
                operands[k] = np.asarray(operands[k], dtype=d)[()]
            except OverflowError:  # a Python int out of its dtype: the full path says so
                return MISS
        return replay(operands)

    return fast


def _record(fn: Callable, args: tuple, kwargs: dict, every: bool, positions) -> _Replay | object:
    """Trace `fn` on this call's signature: its replay, or _SLOW where it cannot be traced."""
    where = [i for i in range(len(args)) if every or i in positions]
    avals, scalars = [], []
    for i in where:
        x = args[i]
        if type(x) in _PY_SCALARS:
            dt, weak = dtypes.scalar_dtype(x)
            avals.append(ShapedArray((), dt, weak))
            scalars.append(dt)
        else:
            avals.append(ShapedArray(np.shape(x), dtypes.canonicalize(x.dtype)))
            scalars.append(None)
    tree_box = []

    def flat(*tracers):
        call = list(args)
        for i, t in zip(where, tracers):
            call[i] = t
        out = fn(*call, **kwargs)
        leaves, tree = tree_flatten(out)
        if not all(isinstance(leaf, Tracer) for leaf in leaves):  # a Python value out: not replayable
            raise TypeError("not an array")
        tree_box.append(None if tree.node is None else tree)
        return leaves

    try:
        graph = trace_flat(flat, avals)
    except Exception:  # noqa: BLE001 - value-dependent or an error: the full path runs (and raises) as always
        return _SLOW
    return _Replay(graph, tree_box[0], _scalar_dtypes(graph, scalars))


def _scalar_dtypes(graph, scalars: list) -> tuple:
    """The dtype each Python scalar operand is converted to at a replay (None for arrays): the dtype
    its uses convert it to where they all convert it to one (`x_f64 // 0.1` takes 0.1 as a float64,
    as the full path's literal is, not rounded to its weak float32 first), else its own."""
    uses: dict = {}
    for node in graph.nodes:
        for a in node.inputs:
            if isinstance(a, Var):
                uses.setdefault(a, []).append(node)
    out = []
    for v, dt in zip(graph.inputs, scalars):
        if dt is not None:
            targets = {n.params["new_dtype"] if n.prim.name == "convert_element_type" else None
                       for n in uses.get(v, [])}
            if len(targets) == 1 and None not in targets:
                dt = targets.pop()
        out.append(dt)
    return tuple(out)


def with_fast_path(fn: Callable, operand_positions) -> Callable:
    """`fn` taking the fast path when it can."""
    fast = fast_path(fn, operand_positions)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fast(args, kwargs)
        return fn(*args, **kwargs) if out is MISS else out

    wrapper.fast = fast
    return wrapper


def _clear(_value) -> None:
    for table in _tables:
        table.clear()


config.watch("ember_enable_x64", _clear)
