"""Tracing: a stack of graph Builders, the Tracer values that stand for arrays while a function runs,
`bind` (stage a primitive, or run its numpy reference when nothing is being traced), `trace_flat`
(function -> Graph) and `eval_graph` (Graph -> values, re-binding every node: how transforms inline).
"""

from __future__ import annotations

import contextlib
import operator
import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ember.errors import (
    ArgumentError,
    ConcretizationError,
    EmberError,
    ImmutableArrayError,
    TracerEscapeError,
    add_note,
    user_location,
)
from ember.tracer import dtypes
from ember.tracer.array import Array
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph, Literal, Node, Params, Var, verified
from ember.tracer.primitive import Primitive, impl_rules, shape_rules

class _TraceState(threading.local):
    """Per thread: `stack`, the builders of the traces under way (None before the thread's first)."""

    stack: list | None = None


# jit's hit path and the eager fast path read `trace_state.stack` directly: is_tracing() costs 70 ns
trace_state = _TraceState()


def _stack() -> list[Builder]:
    s = trace_state.stack
    if s is None:
        s = trace_state.stack = []
    return s


def current_builder() -> Builder | None:
    s = _stack()
    return s[-1] if s else None


def is_tracing() -> bool:
    """True while some function is being traced (ember.numpy calls are staged, not run)."""
    return bool(_stack())


class Builder:
    """Collects the nodes of one graph under construction. With `known`, it also evaluates every node
    on the values of its inputs (numpy reference), so Python control flow on values works (outside jit)."""

    def __init__(self, known: bool = False):
        self.known: dict[Var, np.ndarray] | None = {} if known else None
        self.differentiated: set[Var] = set()  # known mode: values that depend on a differentiated input
        self.level = len(_stack())
        self.active = True
        self.inputs: list[Var] = []
        self.nodes: list[Node] = []
        self.consts: list[Var] = []
        self.const_values: list = []
        self._const_index: dict[int, Var] = {}
        self._keepalive: list = []
        self.loc_override: str | None = None
        self.role: str | None = None
        # Set by the transform that traces: its name, and a hook giving the user's name of each input
        # (called only to word an error, so tracing never pays for it).
        self.transform: str | None = None
        self.input_names: Callable[[], list[str]] | None = None

    def sources(self, var: Var) -> list[str]:
        """The user's names of the inputs that `var` depends on (walking the nodes back from it)."""
        producer = {o: n for n in self.nodes for o in n.outputs}
        index = {v: i for i, v in enumerate(self.inputs)}
        seen, stack, hit = {var}, [var], set()
        while stack:
            v = stack.pop()
            if v in index:
                hit.add(index[v])
            node = producer.get(v)
            for a in node.inputs if node is not None else ():
                if isinstance(a, Var) and a not in seen:
                    seen.add(a)
                    stack.append(a)
        names = self.input_names() if self.input_names is not None else []
        return [names[i] if i < len(names) else f"input {i}" for i in sorted(hit)]

    # -- values ----------------------------------------------------------------------------------
    def new_input(self, aval: ShapedArray, value=None, differentiated: bool = False) -> Tracer:
        """A graph input; `value` is its concrete value when this builder evaluates with values known
        (`differentiated`: a value being differentiated, which must not become a Python float)."""
        v = Var(aval)
        self.inputs.append(v)
        if self.known is not None and value is not None:
            self.known[v] = value
            if differentiated:
                self.differentiated.add(v)
        return Tracer(self, v)

    def _const(self, key_obj, value, aval: ShapedArray) -> Var:
        key = id(key_obj)
        v = self._const_index.get(key)
        if v is None:
            v = self._const_index[key] = Var(aval)
            self.consts.append(v)
            self.const_values.append(value)
            self._keepalive.append(key_obj)
            concrete = value.known_value() if isinstance(value, Tracer) else value
            if self.known is not None and concrete is not None:
                self.known[v] = concrete
                if isinstance(value, Tracer) and value.differentiated():
                    self.differentiated.add(v)
        return v

    def lift(self, x):
        """The Var or Literal that stands for `x` in this graph."""
        if isinstance(x, Tracer):
            b = x._builder
            if b is self:
                return x._var
            if not b.active:
                raise _escaped_error()
            if b.level < self.level:  # a value of an enclosing trace: close over it
                return self._const(x._var, x, x._var.aval)
            raise _escaped_error()
        if isinstance(x, (Var, Literal)):
            return x
        return to_atom_value(x, self)

    # -- nodes -----------------------------------------------------------------------------------
    def emit(self, prim: Primitive, atoms, params: Params, out_avals, loc) -> list[Tracer]:
        outs = [Var(a) for a in out_avals]
        node = Node(prim, atoms, params, outs, loc, self.role)
        self.nodes.append(node)
        if self.known is not None:
            self._evaluate(node)
        return [Tracer(self, v) for v in outs]

    def _evaluate(self, node: Node) -> None:
        """Known-values mode: compute the node's outputs with its numpy reference, when its inputs are known."""
        vals = []
        for a in node.inputs:
            v = a.val if isinstance(a, Literal) else self.known.get(a)
            if v is None:
                return
            vals.append(v)
        out = impl_rules[node.prim](*vals, **node.params)
        outs = out if node.prim.multiple_results else (out,)
        for var, o in zip(node.outputs, outs):
            self.known[var] = np.asarray(o, dtype=var.aval.dtype)
        if node.prim.name not in _GRADIENT_BARRIERS and any(a in self.differentiated for a in node.inputs
                                                            if isinstance(a, Var)):
            self.differentiated.update(v for v in node.outputs if dtypes.is_float(v.aval.dtype))

    def build(self, outputs: Sequence) -> Graph:
        outs = [self.lift(o) for o in outputs]
        return verified(Graph(self.inputs, self.nodes, outs, self.consts, self.const_values))

    @contextlib.contextmanager
    def at(self, loc: str | None = None, role: str | None = None):
        """Emit nodes with `loc` as their source line (and `role` as their annotation)."""
        saved = self.loc_override, self.role
        if loc is not None:
            self.loc_override = loc
        if role is not None:
            self.role = role
        try:
            yield self
        finally:
            self.loc_override, self.role = saved


_GRADIENT_BARRIERS = frozenset({"stop_gradient"})


def to_atom_value(x, builder: Builder | None):
    """Python/NumPy scalar -> Literal; NumPy array -> const Var of `builder` (or the array itself)."""
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return Literal(x[()], dtypes.canonicalize(x.dtype), False)
        if builder is None:
            return x
        dt = dtypes.canonicalize(x.dtype)
        snapshot = np.array(x, dtype=dt, copy=True)
        snapshot.flags.writeable = False
        return builder._const(x, snapshot, ShapedArray(x.shape, dt))
    if isinstance(x, (bool, int, float, complex, np.generic)):
        dt, weak = dtypes.scalar_dtype(x)
        return Literal(x, dt, weak)
    raise ArgumentError(
        f"{type(x).__name__} value {_short_repr(x)} cannot be used as an array; ember operations take "
        "arrays, Python scalars or the traced values of a function")


def _short_repr(x) -> str:
    r = repr(x)
    return r if len(r) < 60 else r[:57] + "..."


def _escaped_error() -> TracerEscapeError:
    return TracerEscapeError(
        "a traced value escaped from the function that created it (stored in a global, a closure or "
        "an attribute) and was used after that trace ended; return it from the function instead",
        user_location())


def stage_const(x: np.ndarray) -> Tracer:
    """A NumPy array as a value of the innermost trace (a const of its graph)."""
    b = current_builder()
    return Tracer(b, b.lift(x))


# --- bind -----------------------------------------------------------------------------------------

def bind(prim: Primitive, args: Sequence, params: Mapping):
    """Apply `prim`: stage a node into the innermost trace, or evaluate eagerly when none is active."""
    params = _checked_params(prim, params)
    stack = _stack()
    if not stack:
        return _eager(prim, args, params)
    b = stack[-1]
    atoms = [b.lift(a) for a in args]
    loc = b.loc_override or user_location()
    try:
        out = shape_rules[prim](*[a.aval for a in atoms], **params)
    except EmberError as e:
        raise e.with_loc(loc) from None
    except Exception as e:  # not ember's own: say which operation and which line of the user's
        add_note(e, f"raised by the shape rule of {prim.name} while tracing, at {loc}")
        raise
    if prim.multiple_results:
        return b.emit(prim, atoms, params, out, loc)
    return b.emit(prim, atoms, params, (out,), loc)[0]


def _checked_params(prim: Primitive, params: Mapping) -> Params:
    """`params` in canonical form; an unhashable value (which no cache could key on) raises."""
    params = params if isinstance(params, Params) else Params(params)
    bad = params.unhashable()
    if bad is not None:
        raise ArgumentError(
            f"{prim.name}: param {bad!r} has an unhashable value of type {type(params[bad]).__name__}; "
            "primitive params must be hashable (tuples, not lists or arrays; Python scalars; np.dtype)",
            user_location())
    return params


_EAGER_AVALS: dict = {}  # (primitive, params, operands' (shape, dtype)...) -> the shape rule's answer
_EAGER_AVALS_MAX = 8192


def _eager(prim: Primitive, args, params):
    """Evaluate `prim` on concrete operands with its numpy reference; the shape rule runs once per
    (primitive, params, operand shapes and dtypes), its answer cached."""
    vals = []
    for a in args:
        if isinstance(a, Tracer):
            raise _escaped_error()
        if type(a) is Array:
            vals.append(a.view(np.ndarray))
            continue
        atom = a if isinstance(a, Literal) else to_atom_value(a, None)
        vals.append(atom.val if isinstance(atom, Literal) else atom)
    rule = shape_rules[prim]
    try:
        key = (prim, params, *[(np.shape(v), v.dtype) for v in vals])
        cached = _EAGER_AVALS.get(key)
    except TypeError:  # an unhashable param value: no caching
        key, cached = None, None
    out_aval = cached[1] if cached is not None and cached[0] is rule else None  # (a rule replaced: asked again)
    if out_aval is None:
        avals = [ShapedArray(np.shape(v), dtypes.canonicalize(v.dtype)) for v in vals]
        try:
            out_aval = rule(*avals, **params)
        except EmberError as e:
            raise e.with_loc(user_location()) from None
        except Exception as e:
            add_note(e, f"raised by the shape rule of {prim.name}, at {user_location()}")
            raise
        if key is not None:
            if len(_EAGER_AVALS) >= _EAGER_AVALS_MAX:
                _EAGER_AVALS.clear()
            _EAGER_AVALS[key] = (rule, out_aval)
    out = impl_rules[prim](*vals, **params)
    if prim.multiple_results:
        return [_eager_result(o, a, vals) for o, a in zip(out, out_aval)]
    return _eager_result(out, out_aval, vals)


def _eager_result(out, aval: ShapedArray, operands) -> Array:
    """A numpy reference's result as an Array the caller owns: one that does not own its data (a
    view), is an operand itself, or is read-only is copied, so eager results never alias inputs."""
    out = np.asarray(out)
    if out.dtype != aval.dtype:
        return out.astype(aval.dtype).view(Array)
    if out.base is not None or not out.flags.writeable or any(out is v for v in operands):
        return np.array(out).view(Array)
    return out.view(Array)


# --- trace and evaluate ---------------------------------------------------------------------------

@contextlib.contextmanager
def new_builder(known: bool = False):
    b = Builder(known)
    stack = _stack()
    stack.append(b)
    try:
        yield b
    finally:
        stack.pop()
        b.active = False


def trace_flat(fn: Callable, in_avals: Sequence[ShapedArray]) -> Graph:
    """Trace `fn(*tracers) -> sequence of outputs` into a Graph with one input per aval."""
    with new_builder() as b:
        args = [b.new_input(a) for a in in_avals]
        outs = fn(*args)
        return b.build(outs)


def eval_graph(graph: Graph, args: Sequence, role: str | None = None) -> list:
    """Evaluate `graph` on `args` by binding each node: into the current trace, or eagerly."""
    if len(args) != len(graph.inputs):
        raise TypeError(f"graph takes {len(graph.inputs)} inputs, got {len(args)}")
    env: dict[Var, object] = dict(zip(graph.inputs, args))
    env.update(zip(graph.consts, graph.const_values))
    b = current_builder()
    for node in graph.nodes:
        ins = [env[a] if isinstance(a, Var) else a for a in node.inputs]  # Literals keep their weak type
        if b is not None:
            with b.at(node.loc, role or node.role):
                out = bind(node.prim, ins, node.params)
        else:
            out = bind(node.prim, ins, node.params)
        if node.prim.multiple_results:
            env.update(zip(node.outputs, out))
        else:
            env[node.outputs[0]] = out
    return [env[v] if isinstance(v, Var) else v.val for v in graph.outputs]


# --- the Tracer -----------------------------------------------------------------------------------

_WHERE = "Use ember.numpy.where(cond, a, b) to choose elementwise"
# What to suggest, by the transform that traced the value: only jit has static arguments.
_ADVICE = {
    "jit": ("jit traces the function once for all inputs of the same shape and dtype, so array values are "
            f"unknown while tracing. {_WHERE}, or pass the value as a static argument (jit(..., "
            "static_argnums=...) or static_argnames=...) if it configures the function rather than being data"),
    "grad": ("grad traces the function into one graph for all input values, so array values are unknown "
             f"while tracing. {_WHERE}; a value that configures the function rather than being data can be "
             "bound before differentiating, e.g. grad(functools.partial(f, n=3))"),
    "vjp": ("vjp traces the function into one graph for all input values, so array values are unknown "
            f"while tracing. {_WHERE}; bind configuration values first with functools.partial"),
    "vmap": ("vmap traces the function once for the whole batch, so a per-example value cannot steer Python "
             f"control flow. {_WHERE} (it selects per example); a value that configures the function can be "
             "bound first with functools.partial"),
}


class Tracer:
    """Stands for an array while a function is traced; operators stage primitives.

    NumPy-style operators and methods are installed by `ember.numpy` (see ember/numpy/_methods.py).
    """

    __slots__ = ("_builder", "_var")
    __array_priority__ = 1000

    def __init__(self, builder: Builder, var: Var):
        self._builder = builder
        self._var = var

    @property
    def aval(self) -> ShapedArray:
        return self._var.aval

    @property
    def shape(self) -> tuple[int, ...]:
        return self._var.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self._var.aval.dtype

    @property
    def ndim(self) -> int:
        return len(self._var.aval.shape)

    @property
    def size(self) -> int:
        return self._var.aval.size

    @property
    def weak_type(self) -> bool:
        return self._var.aval.weak_type

    def __repr__(self):
        return f"Tracer<{self.aval.str_short()}>"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    def known_value(self) -> np.ndarray | None:
        """The concrete value, when this tracer's trace evaluates with values known (outside jit)."""
        b = self._builder
        return b.known.get(self._var) if b.known is not None and b.active else None

    def differentiated(self) -> bool:
        """True for a known value that depends on an argument being differentiated."""
        return self._var in self._builder.differentiated

    def _no_lost_gradient(self, what: str) -> None:
        """A differentiated value must not leave the trace as a Python number or NumPy array (its
        gradient would silently be lost); JAX raises here too. bool/int/index stay allowed."""
        if self.differentiated():
            raise ConcretizationError(
                f"a value of type {self.aval.str_short()} that depends on an argument being differentiated was "
                f"converted to a {what}, which would lose its gradient; keep it an array and use ember.numpy "
                "operations on it (or ember.stop_gradient it first)", user_location())

    def _concrete(self, what: str):
        raise ConcretizationError(f"a traced value of type {self.aval.str_short()}{self._provenance()} was "
                                  f"used as a Python {what}. {self._advice()}", user_location())

    def _provenance(self) -> str:
        names = self._builder.sources(self._var)
        if not names:
            return ""
        shown = ", ".join(f"`{n}`" for n in names[:4]) + (", ..." if len(names) > 4 else "")
        return f" (it depends on argument{'s' if len(names) > 1 else ''} {shown})"

    def _advice(self) -> str:
        kind = self._builder.transform or "jit"
        return _ADVICE[kind if kind in _ADVICE else "jit"]

    def __bool__(self):
        if (v := self.known_value()) is not None:
            return bool(v)
        self._concrete("bool (e.g. `if x > 0:`, `while`, `and`/`or`)")

    def __int__(self):
        if (v := self.known_value()) is not None:
            return int(v)
        self._concrete("int")

    def __float__(self):
        if (v := self.known_value()) is not None:
            self._no_lost_gradient("Python float")
            return float(v)
        self._concrete("float")

    def __complex__(self):
        if (v := self.known_value()) is not None:
            self._no_lost_gradient("Python complex")
            return complex(v)
        self._concrete("complex")

    def __index__(self):
        if (v := self.known_value()) is not None:
            return operator.index(v)
        self._concrete("index (e.g. range(x) or a list index)")

    def __setitem__(self, key, value):
        k = _key_text(key)
        raise ImmutableArrayError(
            f"traced arrays are immutable, so `x[{k}] = ...` cannot assign in place; write "
            f"`x = x.at[{k}].set(value)` (or .add(value)), which returns the updated array",
            user_location())

    def __array__(self, dtype=None, copy=None):
        if (v := self.known_value()) is not None:
            self._no_lost_gradient("NumPy array")
            return np.array(v, dtype=dtype, copy=True)
        raise ConcretizationError(
            f"a traced value of type {self.aval.str_short()}{self._provenance()} was converted to a NumPy "
            "array (np.asarray, np.array or a NumPy function that is not a ufunc). Inside traced functions "
            "call ember.numpy instead of numpy", user_location())

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = _numpy_equivalent("numpy", ufunc.__name__)
        if method != "__call__" or fn is None or "out" in kwargs:
            raise ConcretizationError(
                f"numpy.{ufunc.__name__}{'' if method == '__call__' else '.' + method} cannot run on a "
                f"traced value; use ember.numpy.{ufunc.__name__} inside traced functions", user_location())
        return fn(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        fn = _numpy_equivalent(func.__module__ or "numpy", func.__name__)
        if fn is None:
            raise ConcretizationError(
                f"{func.__module__}.{func.__name__} cannot run on a traced value and ember.numpy has no "
                "equivalent; rewrite it with ember.numpy functions", user_location())
        return fn(*args, **kwargs)


def _key_text(key) -> str:
    """An index as the user would write it between brackets: (0, slice(1, None)) -> '0, 1:'."""
    if isinstance(key, tuple):
        return ", ".join(_key_text(k) for k in key) if key else "()"
    if isinstance(key, slice):
        parts = ["" if v is None else str(v) for v in (key.start, key.stop, key.step)]
        return ":".join(parts[:2] if key.step is None else parts)
    if key is Ellipsis:
        return "..."
    if isinstance(key, (int, np.integer)) or key is None or isinstance(key, list):
        return repr(key if not isinstance(key, np.integer) else int(key))
    return "idx"


_UFUNC_ALIASES = {"true_divide": "divide", "absolute": "abs"}

# NumPy namespace ("numpy", "numpy.linalg") -> the namespace implementing it on traced values.
# ember.numpy registers itself at import (the tracer layer cannot import the layer above it).
numpy_dispatch: dict[str, object] = {}


def _numpy_equivalent(module: str, name: str):
    if module != "numpy" and not module.startswith("numpy."):
        return None
    namespace = numpy_dispatch.get("numpy.linalg" if module.startswith("numpy.linalg") else "numpy")
    fn = getattr(namespace, _UFUNC_ALIASES.get(name, name), None)
    return fn if callable(fn) else None
