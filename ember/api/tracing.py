"""Pytree-level tracing shared by jit and the transforms: argument checks, avals,
`trace_pytree(fun, args) -> (Graph, leaves, in_tree, out_tree)`, and the known-values fallback that
runs Python control flow on values when a transform is called outside jit."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence

import numpy as np

from ember.backends.device_arrays import is_device_array
from ember.errors import (
    ArgumentError,
    ArgumentValueError,
    ConcretizationError,
    DTypeError,
    TracerEscapeError,
    user_location,
)
from ember.numpy.util import plain_array
from ember.tracer import dtypes
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph
from ember.tracer.prims.util import PY_SCALARS as _PY_SCALARS
from ember.tracer.trace import Tracer, current_builder, eval_graph, is_tracing, new_builder
from ember.tree import PyTreeDef, tree_flatten, tree_flatten_with_keystr, tree_unflatten

# Leaves a call can pass straight to an executable (no pytree or conversion work).
ARRAY_LEAF_TYPES = (np.ndarray, np.generic, bool, int, float)


def is_hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def fun_name(fun) -> str:
    return getattr(fun, "__name__", None) or type(fun).__name__


def check_callable(fun, transform: str, which: str = "its first argument") -> None:
    """Raise a TypeError now when a transform is given something that is not a function (as JAX does),
    instead of failing at the first call."""
    if not callable(fun):
        shown = repr(fun)
        shown = shown if len(shown) < 60 else shown[:57] + "..."
        raise ArgumentError(f"Expected a callable value: {transform} takes a function as {which}, "
                            f"got {type(fun).__name__} {shown}", user_location())


def arg_name(path: str) -> str:
    """The user's name for a leaf path of (args, kwargs): "[0][1]['w']" -> "argument 1['w']",
    "[1]['y']" -> "keyword argument 'y'"."""
    m = re.match(r"\[([01])\]\[([^\]]+)\](.*)", path)
    if m is None:
        return f"argument {path or '(top level)'}"
    which, key, rest = m.groups()
    return f"argument {key}{rest}" if which == "0" else f"keyword argument {key}{rest}"


def _bad_leaf(path: str, x, what: str) -> ArgumentError:
    hint = ("; mark it static with jit(..., static_argnums=...) if it configures the function"
            if what == "argument" else "")
    where = arg_name(path) if what == "argument" else f"{what} {path or '(top level)'}"
    return ArgumentError(f"{where} has type {type(x).__name__}, which is not an array; ember functions take "
                         f"NumPy arrays, Python scalars or pytrees (tuples, lists, dicts, dataclasses) of them"
                         f"{hint}", user_location())


def leaf_aval(x) -> ShapedArray | None:
    """The aval of an argument leaf, or None if the leaf is not an array or scalar."""
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, np.ndarray):
        x = plain_array(x)
        return ShapedArray(x.shape, dtypes.canonicalize(x.dtype.newbyteorder("=")))
    if isinstance(x, np.generic):
        return ShapedArray((), dtypes.canonicalize(x.dtype))
    if is_device_array(x):
        return ShapedArray(tuple(x.shape), dtypes.canonicalize(np.dtype(x.dtype)))
    if isinstance(x, _PY_SCALARS):
        dt, weak = dtypes.scalar_dtype(x)
        return ShapedArray((), dt, weak)
    return None


def leaf_avals(leaves: Sequence, tree_for_paths, what: str = "argument") -> list[ShapedArray]:
    """The aval of every leaf; a leaf that is not an array raises an ArgumentError naming its path in
    `tree_for_paths` (for arguments: the call's (args, kwargs))."""
    avals = []
    for x in leaves:
        try:
            a = leaf_aval(x)
        except (DTypeError, ArgumentValueError) as e:
            a = e
        if a is None or isinstance(a, Exception):
            bad = next(p for p, leaf in tree_flatten_with_keystr(tree_for_paths)[0] if leaf is x)
            if isinstance(a, Exception):
                where = arg_name(bad) if what == "argument" else f"{what} {bad or '(top level)'}"
                cls = ArgumentValueError if isinstance(a, ArgumentValueError) else ArgumentError
                raise cls(f"{where}: {a.message}", user_location()) from None
            raise _bad_leaf(bad, x, what)
        avals.append(a)
    return avals


def to_array(x) -> np.ndarray:
    """A leaf as the NumPy array an executable takes: native byte order (an aval's dtype is native);
    Python scalars get their weak dtype."""
    if isinstance(x, np.ndarray):
        x = plain_array(x)
        return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))
    if isinstance(x, _PY_SCALARS):
        return np.asarray(x, dtype=dtypes.scalar_dtype(x)[0])
    if is_device_array(x):  # a GPU array goes to the cuda backend as it is
        return x
    return np.asarray(x)


def input_names(fun: Callable, args: tuple, kwargs: dict) -> list[str]:
    """The user's name of every leaf of (args, kwargs): parameter name plus pytree path (`x`,
    `params['w']`), from `fun`'s signature; positional ones become `argument 0` where it has none."""
    try:
        params = list(inspect.signature(inspect.unwrap(fun)).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    names = []
    for path, _ in tree_flatten_with_keystr((args, kwargs))[0]:
        m = re.match(r"\[([01])\]\[([^\]]+)\](.*)", path)
        if m is None:
            names.append(arg_name(path))
            continue
        which, key, rest = m.groups()
        if which == "1":
            names.append(key.strip("'") + rest)
        elif int(key) < len(positional):
            names.append(positional[int(key)] + rest)
        elif star is not None:
            names.append(f"{star}[{int(key) - len(positional)}]{rest}")
        else:
            names.append(f"argument {key}{rest}")
    return names


class OutTree:
    """Filled in with the output treedef when the traced function returns."""

    treedef: PyTreeDef | None = None


def flatten_outputs(out, name: str) -> tuple[list, PyTreeDef]:
    leaves, treedef = tree_flatten(out)
    for x in leaves:
        if not isinstance(x, (Tracer, np.ndarray, np.generic) + _PY_SCALARS):
            bad = next(p for p, leaf in tree_flatten_with_keystr(out)[0] if leaf is x)
            raise ArgumentError(f"function {name} returned a value of type {type(x).__name__} at output "
                                f"{bad or '(top level)'}; ember functions must return arrays, scalars or pytrees "
                                "of them", user_location())
    return leaves, treedef


def _known_inputs(known: bool | None, leaves: Sequence, avals: Sequence[ShapedArray]) -> list | None:
    """The concrete value of each input for a known-values trace, or None for an abstract one.
    `known=None` inherits the enclosing trace's mode; an input whose aval differs from its leaf's
    (a vmapped argument) or whose value is unknown stays abstract. A concrete leaf is an input of
    the outermost known trace: the differentiated values are marked by the trace of the transform."""
    if known is None:
        b = current_builder()
        known = b is not None and b.known is not None
    if not known:
        return None
    values = []
    for x, a in zip(leaves, avals):
        if isinstance(x, Tracer):
            v = x.known_value() if x.aval.shape == a.shape and x.aval.dtype == a.dtype else None
        else:
            v = to_array(x)
            v = v if v.shape == a.shape and dtypes.canonicalize(v.dtype) == a.dtype else None
        values.append(v)
    return values


def trace_pytree(fun: Callable, args: tuple, kwargs: dict | None = None,
                 avals: Sequence[ShapedArray] | None = None, known: bool | None = None,
                 differentiated: Sequence[bool] | None = None, transform: str = "jit",
                 names: Callable[[], list[str]] | None = None) -> tuple[Graph, list, PyTreeDef, PyTreeDef]:
    """Trace `fun(*args, **kwargs)` with one graph input per array leaf of (args, kwargs). With
    `known` (by default: when the enclosing trace knows values) the trace also evaluates every node;
    `differentiated` flags the leaves a transform differentiates (their values must not become
    Python floats), besides those that depend on the enclosing trace's differentiated values.
    `transform` (jit, grad, vjp, vmap) and the inputs' names (`names`, by default from `fun`'s
    signature) are what concretization errors tell."""
    kwargs = kwargs or {}
    leaves, in_tree = tree_flatten((args, kwargs))
    if avals is None:
        avals = leaf_avals(leaves, (args, kwargs))
    values = _known_inputs(known, leaves, avals)
    name = fun_name(fun)
    out = OutTree()

    def flat_fun(*tracers):
        a, kw = tree_unflatten(in_tree, tracers)
        res = fun(*a, **kw)
        flat, out.treedef = flatten_outputs(res, name)
        return flat

    diff = [bool(d) or (isinstance(x, Tracer) and x.differentiated())
            for x, d in zip(leaves, differentiated or [False] * len(leaves))]
    with new_builder(values is not None) as b:
        b.transform = transform
        b.input_names = names or functools.partial(input_names, fun, args, kwargs)
        ins = [b.new_input(a, v, d) for a, v, d in zip(avals, values or [None] * len(avals), diff)]
        graph = b.build(flat_fun(*ins))
    return graph, leaves, in_tree, out.treedef


def trace_for_call(fun: Callable, args: tuple,
                   transform: str = "jit") -> tuple[Graph, list, PyTreeDef, PyTreeDef, bool]:
    """`trace_pytree` plus a flag: outside any trace, a function that needs concrete values (Python
    control flow on them) is traced again with its values known (True), a graph for this call only."""
    diff = [dtypes.is_float(a.dtype) for a in leaf_avals(tree_flatten(args)[0], (args, {}))]  # vjp: every float
    try:
        return (*trace_pytree(fun, args, differentiated=diff, transform=transform), False)
    except ConcretizationError:
        if is_tracing():
            raise
    return (*trace_pytree(fun, args, known=True, differentiated=diff, transform=transform), True)


def call_with_known_values(fun: Callable, args: tuple, kwargs: dict):
    """Run `fun` on concrete arguments in a trace that evaluates every node on the numpy reference as
    it is emitted, so Python control flow on values works; nothing is cached or compiled."""
    leaves, in_tree = tree_flatten((args, kwargs))
    avals = leaf_avals(leaves, (args, kwargs))
    with new_builder(known=True) as b:
        ins = [b.new_input(a, to_array(x)) for a, x in zip(avals, leaves)]
        a, kw = tree_unflatten(in_tree, ins)
        flat, treedef = flatten_outputs(fun(*a, **kw), fun_name(fun))
        values = [_concrete_output(x) for x in flat]
    return tree_unflatten(treedef, values)


def _concrete_output(x) -> np.ndarray:
    """An output of a known-values call as a fresh array (never an argument's own buffer)."""
    if isinstance(x, Tracer):
        v = x.known_value()
        if v is None:
            raise TracerEscapeError("a function evaluated with values known returned a traced value of another "
                                    "trace (it escaped from it); return values computed from the arguments",
                                    user_location())
        return np.array(v, copy=True)
    return np.array(to_array(x), copy=True)


def inline(graph: Graph, leaves: Sequence) -> list:
    """Evaluate a transformed graph on the call's leaves, inside the current trace."""
    return eval_graph(graph, list(leaves))


