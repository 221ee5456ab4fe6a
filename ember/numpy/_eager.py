"""The eager fast path: an ember.numpy call on concrete arrays, outside any trace, replays what an
earlier call of its signature did instead of running the tracing machinery again.

A signature is the function, the shape and dtype of each array operand, the type of each scalar
operand and the value of every other argument (axes, shapes, options). Its first call takes the full
path (a one-off call pays no trace); its second traces the function into a graph (abstractly, as jit
would) and keeps the graph's nodes as a list of numpy reference calls; later calls run that list and
nothing else: no promotion, no broadcasting logic, no shape rules, no user-line lookups. A call
whose graph cannot be traced without the operands' values (a boolean mask, `nonzero`) or whose
arguments cannot key a cache (a list) takes the full path, which gives the same results as always
(and the same errors).
"""

from __future__ import annotations

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
_SEEN = object()  # a signature called once: recorded at its second call (a one-off call costs no trace)
MAX_SIGNATURES = 256  # per function; a full table is emptied (a rare workload of endless shapes)
_PY_SCALARS = (bool, int, float)
_tables: list[dict] = []  # every function's table, emptied when 64-bit mode switches


class _Replay:
    """One signature's graph as a generated Python function over the numpy references: its arguments
    are the operands, the graph's consts and literals are its globals, and its results are Arrays that
    never alias an operand or a const (a view or one of them is copied, as bind's eager path does)."""

    __slots__ = ("run", "scalars", "convert", "source")

    def __init__(self, graph, tree, scalars: tuple):
        names: dict = {v: f"o{k}" for k, v in enumerate(graph.inputs)}
        env: dict = {"ndarray": np.ndarray, "asarray": np.asarray, "Array": Array, "unflatten": tree_unflatten,
                     "tree": tree}

        def const(value) -> str:
            name = f"c{len(env)}"
            env[name] = value
            return name

        for v, value in zip(graph.consts, graph.const_values):
            names[v] = const(value)
        lines = []
        for k, node in enumerate(graph.nodes):
            args = [names[a] if isinstance(a, Var) else const(a.val) for a in node.inputs]
            fn = const(impl_rules[node.prim])
            if node.params:  # (a node without operands, such as iota, has only its params)
                args.append("**" + const(dict(node.params)))
            call = f"{fn}({', '.join(args)})"
            if node.prim.multiple_results:
                outs = [f"r{k}_{j}" for j in range(len(node.outputs))]
                lines.append(f"    {', '.join(outs)}, = {call}")
                names.update(zip(node.outputs, outs))
            else:
                lines.append(f"    r{k} = {call}")
                names[node.outputs[0]] = f"r{k}"
        known = [names[v] for v in graph.inputs] + [names[v] for v in graph.consts]
        results, given = [], set()
        for j, o in enumerate(graph.outputs):
            value = names[o] if isinstance(o, Var) else const(np.asarray(o.val))
            dt = const(o.aval.dtype)
            # an operand, a const, a literal or an output given already: a copy
            same = " or ".join(f"out is {n}" for n in known) or "False"
            if not isinstance(o, Var) or value in given:
                same = "True"
            given.add(value)
            lines += [f"    out = {value}",
                      "    if type(out) is not ndarray:",
                      "        out = asarray(out)",
                      f"    if out.dtype != {dt}:",
                      f"        y{j} = out.astype({dt}).view(Array)",
                      f"    elif out.base is not None or {same}:",
                      f"        y{j} = out.copy().view(Array)",
                      "    else:",
                      f"        y{j} = out.view(Array)"]
            results.append(f"y{j}")
        lines.append(f"    return {results[0]}" if tree is None else
                     f"    return unflatten(tree, [{', '.join(results)}])")
        params = ", ".join(names[v] for v in graph.inputs)
        self.source = f"def run({params}):\n" + "\n".join(lines) + "\n"
        exec(compile(self.source, "<ember eager replay>", "exec"), env)  # noqa: S102 - our own code
        self.run = env["run"]
        self.scalars = tuple((k, d.type) for k, d in enumerate(scalars) if d is not None)  # Python scalars' types
        # per operand, the scalar type a Python scalar becomes (None: an array), or None if there are none
        self.convert = tuple(None if d is None else d.type for d in scalars) if self.scalars else None


def fast_path(fn: Callable, operand_positions: tuple[int, ...] | str) -> Callable:
    """`fn` (a public ember.numpy function) as `fast(args, kwargs)`: its result by replay, or MISS.
    `operand_positions`: the positional parameters that are arrays ("*": all of them)."""
    table: dict = {}
    _tables.append(table)
    every = operand_positions == "*"

    def fast(args: tuple, kwargs: dict):
        if getattr(trace_state, "stack", None):
            return MISS
        if len(args) == 1 and not kwargs:  # the common case (a unary function, a method), unrolled
            x = args[0]
            t = type(x)
            if t is Array:
                key, x = (x.shape, x.dtype), x.view(np.ndarray)
            elif t is np.ndarray:
                key = (x.shape, x.dtype)
            else:
                return slow(args, kwargs)
            replay = table.get(key)
            if replay.__class__ is _Replay and not replay.scalars:
                return replay.run(x)
            return slow(args, kwargs)
        if len(args) == 2 and every and not kwargs:  # a binary operator or function, unrolled
            a, b = args
            t = type(a)
            if t is Array:
                ka, a = (a.shape, a.dtype), a.view(np.ndarray)
            elif t is np.ndarray:
                ka = (a.shape, a.dtype)
            elif t in _PY_SCALARS:
                ka = t
            else:
                return slow(args, kwargs)
            t = type(b)
            if t is Array:
                kb, b = (b.shape, b.dtype), b.view(np.ndarray)
            elif t is np.ndarray:
                kb = (b.shape, b.dtype)
            elif t in _PY_SCALARS:
                kb = t
            else:
                return slow(args, kwargs)
            replay = table.get((ka, kb))
            if replay.__class__ is _Replay:
                convert = replay.convert
                if convert is not None:
                    try:
                        if convert[0] is not None:
                            a = convert[0](a)
                        if convert[1] is not None:
                            b = convert[1](b)
                    except OverflowError:  # a Python int out of its dtype: the full path says so
                        return MISS
                return replay.run(a, b)
        return slow(args, kwargs)

    def slow(args: tuple, kwargs: dict):
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
        key = key[0] if len(key) == 1 and not kwargs else tuple(key)
        try:
            replay = table.get(key)
        except TypeError:  # an unhashable argument (a list of axes): no signature
            return MISS
        if replay is None or replay is _SEEN:
            if len(table) >= MAX_SIGNATURES:
                table.clear()
            if replay is None:
                table[key] = _SEEN
                return MISS
            replay = table[key] = _record(fn, args, kwargs, every, operand_positions)
        if replay is _SLOW:
            return MISS
        for k, d in replay.scalars:
            try:
                operands[k] = d(operands[k])
            except OverflowError:  # a Python int out of its dtype: the full path says so
                return MISS
        return replay.run(*operands)

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


def _clear(_value) -> None:
    for table in _tables:
        table.clear()


config.watch("ember_enable_x64", _clear)
