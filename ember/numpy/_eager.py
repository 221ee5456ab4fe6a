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
from ember.numpy import _native
from ember.tracer import dtypes
from ember.tracer.array import Array
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Var
from ember.tracer.primitive import eager_specializers, impl_rules, operand_impls
from ember.tracer.trace import Tracer, trace_flat, trace_state
from ember.tree import tree_flatten, tree_unflatten

MISS = object()  # the fast path cannot serve this call: take the full one
_SLOW = object()  # a signature whose calls always take the full path
_SEEN = object()  # a signature called once: recorded at its second call (a one-off call costs no trace)
MAX_SIGNATURES = 256  # per function; a full table is emptied (a rare workload of endless shapes)
_PY_SCALARS = (bool, int, float)
_NDARRAY = np.ndarray  # (a module global: the hot path's checks skip the attribute lookup on np)
_asarray = np.asarray
_dot = np.dot
_empty = np.empty
_tables: list[dict] = []  # every function's table, emptied when 64-bit mode switches


class _Replay:
    """One signature's graph as a generated Python function over the numpy references: its arguments
    are the operands, the graph's consts and literals are its globals, and its results are Arrays that
    never alias an operand or a const (a view or one of them is copied, as bind's eager path does).
    `memo`: per operand, the last Python scalar converted and its conversion (`x + 1.0` in a loop
    passes the same float object each time)."""

    __slots__ = ("run", "scalars", "convert", "source", "memo", "ufunc", "dtype", "reduce", "product", "pairwise")

    def __init__(self, graph, tree, scalars: tuple):
        names: dict = {v: f"o{k}" for k, v in enumerate(graph.inputs)}
        converted = {v: d for v, d in zip(graph.inputs, scalars) if d is not None}  # scalar operands' dtypes
        env: dict = {"ndarray": np.ndarray, "asarray": np.asarray, "Array": Array, "unflatten": tree_unflatten,
                     "tree": tree}

        def const(value) -> str:
            name = f"c{len(env)}"
            env[name] = value
            return name

        for v, value in zip(graph.consts, graph.const_values):
            names[v] = const(value)
        lines = []
        calls = []  # (function, argument names, trailing arguments) of each node the replay calls
        fresh = set()  # values a ufunc made: new ndarrays of a known dtype
        for k, node in enumerate(graph.nodes):
            args = [names[a] if isinstance(a, Var) else const(a.val) for a in node.inputs]
            if _converts_to_itself(node, converted):  # a scalar operand is converted to this dtype already
                names[node.outputs[0]] = names[node.inputs[0]]
                continue
            direct, extra = operand_impls.get(node.prim), ()
            if direct is None and node.prim in eager_specializers and all(isinstance(a, Var) for a in node.inputs):
                direct = eager_specializers[node.prim](node.params, [a.aval for a in node.inputs])
                if isinstance(direct, tuple):  # (function, its trailing arguments)
                    direct, extra = direct[0], direct[1:]
                if direct is not None:
                    fresh.add(node.outputs[0])  # a specializer's result is new memory of the output's dtype
            calls.append((direct, args, extra))
            if direct is not None:
                call = f"{const(direct)}({', '.join(args + [const(e) for e in extra])})"
            else:  # (a node without operands, iota, has only its params)
                call = (f"{const(impl_rules[node.prim])}"
                        f"({', '.join(args + (['**' + const(dict(node.params))] if node.params else []))})")
            if node.prim.multiple_results:
                outs = [f"r{k}_{j}" for j in range(len(node.outputs))]
                lines.append(f"    {', '.join(outs)}, = {call}")
                names.update(zip(node.outputs, outs))
            else:
                lines.append(f"    r{k} = {call}")
                names[node.outputs[0]] = f"r{k}"
                if _makes_fresh(direct, node):
                    fresh.add(node.outputs[0])
        known = [names[v] for v in graph.inputs] + [names[v] for v in graph.consts]
        results, given = [], set()
        for j, o in enumerate(graph.outputs):
            value = names[o] if isinstance(o, Var) else const(np.asarray(o.val))
            dt = const(o.aval.dtype)
            # an operand, a const, a literal or an output given already: a copy
            same = " or ".join(f"out is {n}" for n in known) or "False"
            if not isinstance(o, Var) or value in given:
                same = "True"
            elif o in fresh:  # a new array (or NumPy scalar): an Array as it is when its dtype is the one expected
                wrap = f"{value}.view(Array)" if o.aval.ndim else f"asarray({value}).view(Array)"
                lines += [f"    if {value}.dtype is {dt}:", f"        y{j} = {wrap}", "    else:"]
                lines += ["    " + line for line in _checked_result(j, value, dt, same)]
                given.add(value)
                results.append(f"y{j}")
                continue
            given.add(value)
            lines += _checked_result(j, value, dt, same)
            results.append(f"y{j}")
        lines.append(f"    return {results[0]}" if tree is None else
                     f"    return unflatten(tree, [{', '.join(results)}])")
        params = ", ".join(names[v] for v in graph.inputs)
        self.source = f"def run({params}):\n" + "\n".join(lines) + "\n"
        exec(compile(self.source, "<ember eager replay>", "exec"), env)  # noqa: S102 - our own code
        self.run = env["run"]
        self.scalars = tuple((k, d.type) for k, d in enumerate(scalars) if d is not None)  # Python scalars' types
        # per operand, the dtype a Python scalar becomes (None: an array), or None if there are none
        self.convert = tuple(scalars) if self.scalars else None
        self.memo = [(None, None)] * len(scalars)
        # the ufunc whose one call on the operands is the whole graph, and its result's dtype (else None)
        only = calls[0] if len(calls) == 1 and tree is None and not graph.consts else (None, None, ())
        whole = only[1] == [f"o{k}" for k in range(len(graph.inputs))] and list(graph.outputs) == list(
            graph.nodes[-1].outputs)
        single = whole and isinstance(only[0], np.ufunc)
        # the ufunc's reduce when the graph is that reduce over every axis of its one operand, keeping its
        # dtype (a float one: see reduce.py's specializer), else None
        x = graph.inputs[0].aval if len(graph.inputs) == 1 else None
        self.reduce = only[0] if (whole and x is not None and x.ndim and isinstance(getattr(only[0], "__self__", None),
                                                                                   np.ufunc)
                                  and only[0].__name__ == "reduce" and only[2] == (tuple(range(x.ndim)),)
                                  and graph.outputs[0].aval.dtype == x.dtype) else None
        # a sum (NumPy's add.reduce, pairwise): the native tier sums small float ones itself, in NumPy's order
        self.pairwise = self.reduce is not None and self.reduce.__self__ is np.add
        # the result's dtype of a ufunc or reduce lane
        self.ufunc, self.dtype = (only[0] if single else None,
                                  graph.outputs[0].aval.dtype if single or self.reduce is not None else None)
        # np.dot when the graph is that one product of its two operands (a matrix or vector product)
        self.product = only[0] if whole and only[0] is np.dot and len(graph.inputs) == 2 else None


def _converts_to_itself(node, converted: dict) -> bool:
    """Whether `node` converts a Python scalar operand to the dtype the replay converts it to already."""
    if node.prim.name != "convert_element_type" or not isinstance(node.inputs[0], Var):
        return False
    dtype = converted.get(node.inputs[0])
    return dtype is not None and dtype == node.params["new_dtype"]  # (np.dtype(...) == None holds for float64)


def _makes_fresh(direct, node) -> bool:
    """Whether `node` is a ufunc call on Vars whose result is a new n-d array (never a view or a scalar)."""
    return isinstance(direct, np.ufunc) and node.outputs[0].aval.ndim > 0 and all(
        isinstance(a, Var) for a in node.inputs)


def _checked_result(j: int, value: str, dt: str, same: str) -> list[str]:
    """Lines making `y<j>`, the Array of result `value` in dtype `dt`: converted, or copied where it may
    be an operand, a const or a view."""
    return ["    out = " + value,
            "    if type(out) is not ndarray:",
            "        out = asarray(out)",
            f"    if out.dtype != {dt}:",
            f"        y{j} = out.astype({dt}).view(Array)",
            f"    elif out.base is not None or {same}:",
            f"        y{j} = out.copy().view(Array)",
            "    else:",
            f"        y{j} = out.view(Array)"]


def _scalar(replay: _Replay, k: int, x):
    """Python scalar operand `k` as the replay takes it, a 0-d array of its dtype (a ufunc takes one
    in two thirds of a NumPy scalar's time), remembered: the same object converts the same; MISS for a
    Python int out of its dtype (the full path says so)."""
    memo = replay.memo[k]
    if memo[0] is x:
        return memo[1]
    try:
        converted = np.array(x, replay.convert[k])
    except OverflowError:
        return MISS
    replay.memo[k] = (x, converted)  # one store of a pair: another thread sees the old pair or the new
    return converted


def fast_path(fn: Callable, operand_positions: tuple[int, ...] | str) -> Callable:
    """`fn` (a public ember.numpy function) as `fast(args, kwargs)`: its result by replay, or MISS.
    `operand_positions`: the positional parameters that are arrays ("*": all of them). For a function
    of one operand or of two, `fast.unary(x)` and `fast.binary(a, b)` are the same without packing the
    arguments.

    An elementwise function (`fn.elementwise`: its graph is one primitive after promotion and NumPy's
    broadcasting) whose replay is one ufunc of its operands has a lane: the replay filed under its
    operands' dtypes (a Python scalar's type) alone, whose call is that ufunc's, for operands of any
    shape (a shape NumPy cannot broadcast takes the full path, which raises JAX's error). A lane skips
    the shape key and the generated function: `sin` on 10 elements 1.15 -> 0.8 us (NumPy: 0.28).
    A reduction that of one operand alone reduces every axis (`fn.whole`) has a lane too, filed by the
    operand's dtype when its replay is one ufunc's reduce (`_Replay.reduce`), called over all axes of any
    non-empty operand. A matrix product (`fn.product`) whose replay is np.dot has a lane for operands of
    one or two axes: np.dot is matmul there (at any contracted size)."""
    table: dict = {}
    _tables.append(table)
    every = operand_positions == "*"
    whole, product = getattr(fn, "whole", False), getattr(fn, "product", False)
    lanes: dict | None = {} if getattr(fn, "elementwise", False) or whole or product else None
    if lanes is not None:
        _tables.append(lanes)

    def fast(args: tuple, kwargs: dict):
        if not kwargs:
            if len(args) == 1:
                return unary(args[0])
            if len(args) == 2 and (every or operand_positions == (0, 1)):
                return binary(*args)
        return slow(args, kwargs)

    def unary(x):
        """A function of one operand, or a method without arguments."""
        if trace_state.stack:
            return MISS
        t = type(x)
        if t is Array:
            v = x.view(_NDARRAY)
        elif t is _NDARRAY:
            v = x
        else:
            return slow((x,), {})
        if lanes:
            replay = lanes.get(x.dtype)
            if replay is not None:
                if replay.reduce is None:
                    return _by_lane(replay, v)
                out = _by_reduce_lane(replay, v)
                if out is not MISS:
                    return out
        replay = table.get((x.shape, x.dtype))
        if replay.__class__ is _Replay and not replay.scalars:
            return replay.run(v)
        return slow((x,), {})

    def binary(a, b):
        """A binary operator or function of two operands, unrolled."""
        if trace_state.stack:
            return MISS
        t = type(a)
        if t is Array:
            da, x = a.dtype, a.view(_NDARRAY)
        elif t is _NDARRAY:
            da, x = a.dtype, a
        elif t is float or t is int or t is bool:  # (three identity tests: cheaper than `in _PY_SCALARS`)
            da, x = t, a
        else:
            return slow((a, b), {})
        t = type(b)
        if t is Array:
            db, y = b.dtype, b.view(_NDARRAY)
        elif t is _NDARRAY:
            db, y = b.dtype, b
        elif t is float or t is int or t is bool:
            db, y = t, b
        else:
            return slow((a, b), {})
        replay = lanes.get((da, db)) if lanes else None
        if replay is not None and replay.product is not None:
            if 0 < x.ndim < 3 and 0 < y.ndim < 3:  # (a product lane is filed for two arrays)
                out = _by_product_lane(x, y)
                return slow((a, b), {}) if out is MISS else out
            replay = None
        if replay is None:
            replay = table.get((da if da.__class__ is type else (a.shape, da),
                                db if db.__class__ is type else (b.shape, db)))
            if replay.__class__ is not _Replay:
                return slow((a, b), {})
        if replay.convert is not None:  # a Python scalar: its conversion, remembered (see _scalar)
            if da.__class__ is type:
                memo = replay.memo[0]
                x = memo[1] if memo[0] is x else _scalar(replay, 0, x)
                if x is MISS:
                    return MISS
            if db.__class__ is type:
                memo = replay.memo[1]
                y = memo[1] if memo[0] is y else _scalar(replay, 1, y)
                if y is MISS:
                    return MISS
        if replay.ufunc is not None:
            try:
                return _by_lane(replay, x, y)
            except ValueError:  # shapes NumPy cannot broadcast: the full path raises JAX's error
                return slow((a, b), {})
        return replay.run(x, y)

    def slow(args: tuple, kwargs: dict):
        key = []
        operands = []
        for i, x in enumerate(args):
            if every or i in operand_positions:
                t = type(x)
                if t is Array:
                    key.append((x.shape, x.dtype))
                    operands.append(x.view(_NDARRAY))
                elif t is _NDARRAY:
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
            if lanes is not None and replay is not _SLOW and not kwargs and (
                    replay.reduce is not None if whole else replay.product is not None if product
                    else replay.ufunc is not None):
                _file_lane(lanes, args, replay)
        if replay is _SLOW:
            return MISS
        for k, _ in replay.scalars:
            operands[k] = _scalar(replay, k, operands[k])
            if operands[k] is MISS:
                return MISS
        return replay.run(*operands)

    fast.unary = unary
    fast.lanes = lanes
    fast.binary = binary
    return fast


def _by_lane(replay: _Replay, *operands) -> Array:
    """The replay's one ufunc on the operands, as an Array: a ufunc's result is new memory."""
    out = replay.ufunc(*operands)
    if out.dtype is not replay.dtype:  # (never for the dtypes it was filed under; the full checks)
        return replay.run(*operands)
    return (out if out.__class__ is _NDARRAY else np.asarray(out)).view(Array)  # (0-d: a NumPy scalar)


def _by_reduce_lane(replay: _Replay, v: np.ndarray):
    """The replay's reduce over every axis of `v` into a new 0-d Array, or MISS for an empty operand
    without an identity (the full path raises JAX's error)."""
    out = _empty((), replay.dtype)
    try:
        replay.reduce(v, None, None, out)
    except ValueError:
        return MISS
    return out.view(Array)


def _by_product_lane(x: np.ndarray, y: np.ndarray):
    """np.dot of two plain arrays of one or two axes as an Array, or MISS for shapes that do not align
    (the full path raises JAX's error). `product_method` inlines it (a frame less)."""
    try:
        out = _dot(x, y)
    except ValueError:
        return MISS
    return (out if out.__class__ is _NDARRAY else _asarray(out)).view(Array)


def _file_lane(lanes: dict, args: tuple, replay: _Replay) -> None:
    """File `replay` (one ufunc of the operands) under the operands' dtypes, or Python scalars' types."""
    key = []
    for x in args:
        t = type(x)
        if t is Array or t is _NDARRAY:
            key.append(x.dtype)
        elif t in _PY_SCALARS:
            key.append(t)
        else:  # a NumPy scalar: no lane
            return
    if len(lanes) >= MAX_SIGNATURES:
        lanes.clear()
    lanes[key[0] if len(key) == 1 else tuple(key)] = replay


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
            if not x.dtype.isnative:  # byte-swapped data: the full path converts it (plain_array)
                return _SLOW
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


def _whole_lane(a, lanes: dict):
    """A reduction's lane over every axis of `a` (an ndarray or Array, outside any trace), or MISS. The
    native tier replaces this function (ember/numpy/_native.py)."""
    t = type(a)
    if (t is Array or t is _NDARRAY) and not trace_state.stack:
        replay = lanes.get(a.dtype)  # (a whole function's lanes are all reductions)
        if replay is not None:
            _native.hit()
            return _by_reduce_lane(replay, a.view(_NDARRAY) if t is Array else a)
    return MISS


def whole_wrapper(fast: Callable, full: Callable) -> Callable:
    """The public function of a reduction over every axis by default (`fn.whole`): called with its operand
    alone, its reduce lane runs first (`_whole_lane`, native once the process is warm), then
    `fast.unary`, which takes every other case it can."""
    lanes, unary = fast.lanes, fast.unary

    def wrapper(a, *args, **kwargs):
        if not args and not kwargs:
            out = _whole_lane(a, lanes)
            if out is MISS:
                out = unary(a)
            if out is not MISS:
                return out
        return full(a, *args, **kwargs)

    return wrapper


def product_method(fast: Callable, full: Callable) -> Callable:
    """An Array's `@` (matmul's operator): with another Array, both of one or two axes, whose dtypes have
    a product lane, np.dot runs in this one frame; every other call goes as `fast.binary`, then `full`."""
    lanes, binary = fast.lanes, fast.binary

    def method(self, other):
        if type(other) is Array and type(self) is Array and 0 < self.ndim < 3 and 0 < other.ndim < 3 \
                and not trace_state.stack:
            replay = lanes.get((self.dtype, other.dtype))  # (matmul's lanes are all products)
            if replay is not None:  # (_by_product_lane, inlined)
                try:
                    out = _dot(self.view(_NDARRAY), other.view(_NDARRAY))
                    return (out if out.__class__ is _NDARRAY else _asarray(out)).view(Array)
                except ValueError:  # shapes that do not align: the full path raises JAX's error
                    pass
        out = binary(self, other)
        return full(self, other) if out is MISS else out

    return method
