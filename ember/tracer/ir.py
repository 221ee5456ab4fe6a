"""The IR: SSA graphs of primitive applications, their invariants (`verify`), structural
fingerprints and jaxpr-like text.

A Graph is immutable by convention: passes build a new one. Vars carry avals; Literals hold scalars.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from ember.errors import EmberError, GraphError
from ember.tracer import dtypes
from ember.tracer.aval import ShapedArray

# Tests set this: every graph that tracing or a transform (grad, vmap) produces is verified.
VERIFY = False


def verified(graph: Graph) -> Graph:
    """`graph`, checked by `Graph.verify` when VERIFY is set; tracing and transforms return through it.
    A graph checked once is not checked again (graphs are immutable; a pass that changes nothing
    returns the graph it was given)."""
    if VERIFY and not graph._verified:
        graph.verify()
        graph._verified = True
    return graph


class Var:
    """An SSA value: defined once (graph input, const or node output), used by later nodes."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Var<{self.aval.str_short()}>@{id(self) & 0xFFFF:x}"


class Literal:
    """A scalar constant operand. `value` is a Python scalar, `val` the same as a NumPy scalar.

    `key` is its identity (dtype and value bits): what CSE, backends and caches compare, so -0.0 is
    not 0.0, NaN payloads are kept apart and 1, 1.0 and True of different dtypes never merge.
    """

    __slots__ = ("value", "val", "aval", "key")

    def __init__(self, value, dtype, weak_type: bool = False):
        dt = dtypes.canonicalize(dtype)
        try:
            self.val = np.asarray(value, dtype=dt)[()]
        except OverflowError:  # a Python int out of an integer dtype's range wraps around, as in JAX
            self.val = dtypes.wrap_python_int(value, dt)
        self.value = self.val.item()
        self.aval = ShapedArray((), dt, weak_type)
        self.key = (dt.str, self.val.tobytes())

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def shape(self) -> tuple:
        return ()

    def __repr__(self):
        return f"{_format_scalar(self.val)}:{self.aval.str_short()}"


Atom = Var | Literal


def canonical_param(v):
    """A param value in canonical form, so equal params hash equally: dtypes (and NumPy scalar
    types) become np.dtype, lists tuples, NumPy scalars Python scalars; recursively in sequences."""
    if isinstance(v, (list, tuple)):
        return tuple(canonical_param(x) for x in v)
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v)
    return v


class Params(Mapping):
    """A hashable, immutable mapping of a node's static parameters, held in canonical form."""

    __slots__ = ("_d", "_hash")

    def __init__(self, d: Mapping | None = None, /, **kw):
        self._d = {k: canonical_param(v) for k, v in dict(d or {}, **kw).items()}
        self._hash = None

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(frozenset(self._d.items()))
        return self._hash

    def __eq__(self, other):
        return isinstance(other, Params) and self._d == other._d

    def replace(self, **kw) -> Params:
        return Params(self._d, **kw)

    def unhashable(self) -> str | None:
        """The name of the first param whose value cannot be hashed, or None (hashing the whole mapping
        once, so the check leaves its hash cached for CSE and caches)."""
        try:
            hash(self)
            return None
        except TypeError:
            pass
        for k, v in self._d.items():
            try:
                hash(v)
            except TypeError:
                return k
        return None

    def __repr__(self):
        return f"Params({self._d!r})"


class Node:
    """One primitive application: `outputs = prim[params](*inputs)`, created at user line `loc`.

    `role` says which part of a differentiated program made it ("active"/"inactive" forward work or
    "backward"); like `loc` it is provenance that passes keep, so errors can say forward or backward.
    """

    __slots__ = ("prim", "inputs", "params", "outputs", "loc", "role")

    def __init__(self, prim, inputs: Sequence[Atom], params: Params, outputs: Sequence[Var], loc=None,
                 role: str | None = None):
        self.prim = prim
        self.inputs = tuple(inputs)
        self.params = params
        self.outputs = tuple(outputs)
        self.loc = loc
        self.role = role

    def subgraphs(self) -> list[Graph]:
        """The Graphs held in this node's params (fusion bodies, custom rules), tuples included."""
        found: list[Graph] = []

        def visit(v):
            if isinstance(v, Graph):
                found.append(v)
            elif isinstance(v, tuple):
                for x in v:
                    visit(x)

        for v in self.params.values():
            visit(v)
        return found

    def __repr__(self):
        return f"Node({self.prim.name}, {len(self.inputs)} in, {len(self.outputs)} out)"


class Graph:
    """`Graph(inputs, nodes, outputs)` in SSA form, nodes in topological order.

    `consts` are Vars bound to `const_values`: closed-over arrays, or tracers of an enclosing trace
    when the graph was built inside one (they are bound again when the graph is evaluated there).
    """

    __slots__ = ("inputs", "nodes", "outputs", "consts", "const_values", "_fingerprint", "_verified", "__weakref__")

    def __init__(self, inputs, nodes, outputs, consts=(), const_values=()):
        self.inputs = tuple(inputs)
        self.nodes = tuple(nodes)
        self.outputs = tuple(outputs)
        self.consts = tuple(consts)
        self.const_values = tuple(const_values)
        self._fingerprint = None
        self._verified = False

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.inputs]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outputs]

    def replace(self, **kw) -> Graph:
        fields = dict(inputs=self.inputs, nodes=self.nodes, outputs=self.outputs, consts=self.consts,
                      const_values=self.const_values)
        fields.update(kw)
        return Graph(**fields)

    def all_nodes(self) -> list[Node]:
        """Every node, including those of the subgraphs held in params, recursively."""
        out = []
        for node in self.nodes:
            out.append(node)
            for g in node.subgraphs():
                out += g.all_nodes()
        return out

    def fingerprint(self, consts: bool = True) -> str:
        """A structural hash (hex) independent of Var identity: prims, params (subgraphs by their
        fingerprint), avals, literal keys, topology, and consts by aval and content (by aval only
        with `consts=False`: what code that reads consts at run time depends on). Kernel and disk
        caches key on it."""
        if not consts:
            return hashlib.sha256(repr(_structure(self, const_values=False)).encode()).hexdigest()
        if self._fingerprint is None:
            self._fingerprint = hashlib.sha256(repr(_structure(self)).encode()).hexdigest()
        return self._fingerprint

    def verify(self) -> Graph:
        """Check SSA form, operand definitions, params and that every aval matches its shape rule,
        in this graph and, recursively, in the subgraphs its params hold."""
        from ember.tracer.primitive import primitives, shape_rules

        defined: set[int] = set()

        def define(v, what):
            if not isinstance(v, Var):
                raise GraphError(f"{what} {v!r} is not a Var")
            if id(v) in defined:
                raise GraphError(f"{what} {v!r} is defined twice (graph is not SSA)")
            defined.add(id(v))

        for v in self.inputs:
            define(v, "input")
        if len(self.consts) != len(self.const_values):
            raise GraphError(f"{len(self.consts)} consts but {len(self.const_values)} const values")
        for v, val in zip(self.consts, self.const_values):
            define(v, "const")
            shape, dtype = getattr(val, "shape", None), getattr(val, "dtype", None)
            if shape is not None and tuple(shape) != v.aval.shape:
                raise GraphError(f"const {v!r} is bound to a value of shape {tuple(shape)}")
            if dtype is not None and dtype != v.aval.dtype:
                raise GraphError(f"const {v!r} is bound to a value of dtype {dtype}")
        names = Namer()
        for node in self.nodes:
            if primitives.get(node.prim.name) is not node.prim:
                raise GraphError(f"unregistered primitive {node.prim!r}")
            if not isinstance(node.params, Params):
                raise GraphError(f"{node.prim.name}: params must be a Params mapping")
            bad = node.params.unhashable()
            if bad is not None:
                raise GraphError(f"{node.prim.name}: param {bad!r} is not hashable")
            for i, sub in enumerate(node.subgraphs()):
                try:
                    sub.verify()
                except GraphError as e:
                    raise GraphError(f"{node_text(node, names)}: subgraph {i}: {e}") from None
            for a in node.inputs:
                if isinstance(a, Var) and id(a) not in defined:
                    raise GraphError(f"{node_text(node, names)}: operand {a!r} used before definition")
                if not isinstance(a, (Var, Literal)):
                    raise GraphError(f"{node.prim.name}: operand {a!r} is neither Var nor Literal")
            try:
                expected = shape_rules[node.prim](*[a.aval for a in node.inputs], **node.params)
            except EmberError as e:
                raise GraphError(f"{node_text(node, names)}: shape rule failed: {e}") from None
            expected = expected if node.prim.multiple_results else (expected,)
            if len(expected) != len(node.outputs):
                raise GraphError(f"{node_text(node, names)}: {len(node.outputs)} outputs, rule gives "
                                 f"{len(expected)}")
            for v, aval in zip(node.outputs, expected):
                if not v.aval.same_type(aval):
                    raise GraphError(f"{node_text(node, names)}: output {v.aval.str_short()} but rule "
                                     f"gives {aval.str_short()}")
            for v in node.outputs:
                define(v, "node output")
        for v in self.outputs:
            if isinstance(v, Var) and id(v) not in defined:
                raise GraphError(f"output {v!r} is not defined in the graph")
            if not isinstance(v, (Var, Literal)):
                raise GraphError(f"output {v!r} is neither Var nor Literal")
        return self

    def text(self, locs: bool = True, annotations: Mapping | None = None) -> str:
        return graph_text(self, locs=locs, annotations=annotations)

    def __str__(self):
        return graph_text(self)

    def __repr__(self):
        return (f"<Graph {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
                f"{len(self.outputs)} outputs>")


# --- fingerprints ---------------------------------------------------------------------------------

def _aval_key(aval: ShapedArray) -> tuple:
    return (aval.shape, aval.dtype.str, aval.weak_type)


def _param_key(v):
    """A param value as plain data: subgraphs by fingerprint, scalars with their type and bits."""
    if isinstance(v, Graph):
        return ("graph", v.fingerprint())
    if isinstance(v, tuple):
        return tuple(_param_key(x) for x in v)
    if isinstance(v, np.dtype):
        return ("dtype", v.str)
    if isinstance(v, float):
        return ("float", np.float64(v).tobytes())
    if isinstance(v, (bool, int, str, type(None))):
        return (type(v).__name__, v)
    if callable(v):
        return ("callable", getattr(v, "__module__", None), getattr(v, "__qualname__", repr(v)))
    return (type(v).__name__, repr(v))


def _const_key(v: Var, val) -> tuple:
    if not isinstance(val, (np.ndarray, np.generic)):
        raise GraphError(f"const {v!r} is bound to a {type(val).__name__} (a value of an enclosing trace), "
                         "so the graph has no fingerprint until that trace ends")
    arr = np.ascontiguousarray(val)
    return (_aval_key(v.aval), arr.dtype.str, arr.shape, hashlib.sha256(arr.tobytes()).hexdigest())


def _structure(graph: Graph, const_values: bool = True) -> tuple:
    """The graph as nested plain data, each Var replaced by its definition order (consts by aval
    only unless `const_values`)."""
    index: dict[Var, int] = {}

    def define(v: Var) -> tuple:
        index[v] = len(index)
        return _aval_key(v.aval)

    def ref(a):
        if isinstance(a, Literal):
            return ("lit", a.key)
        return index.get(a, ("free", _aval_key(a.aval)))

    ins = tuple(define(v) for v in graph.inputs)
    consts = tuple((define(v), _const_key(v, val) if const_values else None)
                   for v, val in zip(graph.consts, graph.const_values))
    nodes = tuple((n.prim.name, tuple(sorted((k, _param_key(p)) for k, p in n.params.items())),
                   tuple(ref(a) for a in n.inputs), tuple(define(v) for v in n.outputs))
                  for n in graph.nodes)
    return ins, consts, nodes, tuple(ref(a) for a in graph.outputs)


# --- printing ---------------------------------------------------------------------------------

def _format_scalar(v) -> str:
    """Python-style text of a scalar. A NumPy float prints the shortest digits that round-trip in
    its own dtype, so the literal 0.1 of an f32 graph reads 0.1, not 0.10000000149011612."""
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return str(v) if isinstance(v, np.floating) else repr(v)
    return repr(v.item() if isinstance(v, np.generic) else v)


class Namer:
    """jaxpr-style names (a, b, ..., z, ba, bb, ...) assigned on first sight."""

    def __init__(self):
        self._names: dict[Var, str] = {}  # by identity (Var has no __eq__)
        self._gen = self._names_iter()

    @staticmethod
    def _names_iter():
        letters = "abcdefghijklmnopqrstuvwxyz"
        for n in itertools.count(1):
            for combo in itertools.product(letters, repeat=n):
                if n > 1 and combo[0] == "a":
                    continue
                yield "".join(combo)

    def __call__(self, atom) -> str:
        if isinstance(atom, Literal):
            return repr(atom)
        name = self._names.get(atom)  # id() key could be reused by a new Var once the old one is freed
        if name is None:
            name = self._names[atom] = next(self._gen)
        return name

    def typed(self, v: Var) -> str:
        return f"{self(v)}:{v.aval.str_short()}"


def format_param(v, indent: int = 0) -> str:
    if isinstance(v, Graph):
        inner = graph_text(v, locs=False, indent=indent + 4)
        return "\n" + inner
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, tuple):
        inner = ",".join(format_param(x, indent) for x in v)
        return f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, float):
        return _format_scalar(v)
    if callable(v) and hasattr(v, "__name__"):
        return v.__name__
    return repr(v)


def node_text(node: Node, names: Namer, indent: int = 0) -> str:
    outs = " ".join(names.typed(v) for v in node.outputs)
    params = ""
    if node.params:
        params = "[" + " ".join(f"{k}={format_param(v, indent)}" for k, v in node.params.items()) + "]"
    ins = " ".join(names(a) for a in node.inputs)
    return f"{outs} = {node.prim.name}{params} {ins}".rstrip()


def graph_text(graph: Graph, locs: bool = True, annotations: Mapping | None = None,
               indent: int = 0, names: Namer | None = None) -> str:
    """jaxpr-like text, one node per line, with the user's line as a trailing comment."""
    names = names or Namer()
    pad = " " * indent
    consts = " ".join(names.typed(v) for v in graph.consts)
    ins = " ".join(names.typed(v) for v in graph.inputs)
    lines = [f"{pad}{{ lambda {consts + ' ' if consts else ''}; {ins} ."]
    body = []
    for node in graph.nodes:
        body.append((node_text(node, names, indent + 4), node))
    width = max((len(t) for t, _ in body if "\n" not in t), default=0)
    for text, node in body:
        comment = []
        if locs and node.loc:
            comment.append(node.loc)
        if annotations:
            role = annotations.get(node)
            if role:
                comment.append(role)
        suffix = ("  # " + "  ".join(comment)) if comment else ""
        if "\n" in text:
            lines.append(f"{pad}    {text}{suffix}")
        else:
            lines.append(f"{pad}    {text.ljust(width) if suffix else text}{suffix}")
    outs = " ".join(names(v) for v in graph.outputs)
    lines.append(f"{pad}  in ({outs}) }}")
    return "\n".join(lines)
