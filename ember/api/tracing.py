"""Pytree-level tracing shared by jit and the transforms: argument checks, avals, and
`trace_pytree(fun, args) -> (Graph, leaves, in_tree, out_tree)`."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence

import numpy as np

from ember.errors import ArgumentError, ArgumentValueError, DTypeError, user_location
from ember.numpy._core import plain_array
from ember.tracer import dtypes
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph
from ember.tracer.trace import Tracer, eval_graph, is_tracing, new_builder
from ember.tree import PyTreeDef, tree_flatten, tree_flatten_with_path, tree_unflatten

_PY_SCALARS = (bool, int, float)


def fun_name(fun) -> str:
    return getattr(fun, "__name__", None) or type(fun).__name__


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
        return ShapedArray(x.shape, dtypes.canonicalize(x.dtype))
    if isinstance(x, np.generic):
        return ShapedArray((), dtypes.canonicalize(x.dtype))
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
            bad = next(p for p, leaf in tree_flatten_with_path(tree_for_paths)[0] if leaf is x)
            if isinstance(a, Exception):
                where = arg_name(bad) if what == "argument" else f"{what} {bad or '(top level)'}"
                cls = ArgumentValueError if isinstance(a, ArgumentValueError) else ArgumentError
                raise cls(f"{where}: {a.message}", user_location()) from None
            raise _bad_leaf(bad, x, what)
        avals.append(a)
    return avals


def to_array(x) -> np.ndarray:
    """A leaf as the NumPy array an executable takes (Python scalars get their weak dtype)."""
    if isinstance(x, np.ndarray):
        return plain_array(x)
    if isinstance(x, _PY_SCALARS):
        return np.asarray(x, dtype=dtypes.scalar_dtype(x)[0])
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
    for path, _ in tree_flatten_with_path((args, kwargs))[0]:
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
            bad = next(p for p, leaf in tree_flatten_with_path(out)[0] if leaf is x)
            raise ArgumentError(f"function {name} returned a value of type {type(x).__name__} at output "
                                f"{bad or '(top level)'}; ember functions must return arrays, scalars or pytrees "
                                "of them", user_location())
    return leaves, treedef


def trace_pytree(fun: Callable, args: tuple, kwargs: dict | None = None,
                 avals: Sequence[ShapedArray] | None = None,
                 transform: str = "jit") -> tuple[Graph, list, PyTreeDef, PyTreeDef]:
    """Trace `fun(*args, **kwargs)` with one graph input per array leaf of (args, kwargs); `transform`
    (jit, grad, vjp, vmap) and the inputs' names are what concretization errors tell the user."""
    kwargs = kwargs or {}
    leaves, in_tree = tree_flatten((args, kwargs))
    if avals is None:
        avals = leaf_avals(leaves, (args, kwargs))
    name = fun_name(fun)
    out = OutTree()

    def flat_fun(*tracers):
        a, kw = tree_unflatten(in_tree, tracers)
        res = fun(*a, **kw)
        flat, out.treedef = flatten_outputs(res, name)
        return flat

    with new_builder() as b:
        b.transform = transform
        b.input_names = functools.partial(input_names, fun, args, kwargs)
        ins = [b.new_input(a) for a in avals]
        graph = b.build(flat_fun(*ins))
    return graph, leaves, in_tree, out.treedef


class Transformed:
    """A transformed function (grad, vmap, ...): inlined while tracing, compiled and cached by an
    implicit jit when called with concrete arrays."""

    def __init__(self, impl: Callable, wrapped: Callable, kind: str):
        functools.update_wrapper(self, wrapped)
        self._impl = impl
        self._kind = kind
        self._jitted = None

    def __call__(self, *args, **kwargs):
        if is_tracing():
            return self._impl(*args, **kwargs)
        return self._jit()(*args, **kwargs)

    def _jit(self):
        if self._jitted is None:
            from ember.api.jit import jit

            self._jitted = jit(self._impl)
            self._jitted.__name__ = f"{self._kind}({fun_name(self.__wrapped__)})"
        return self._jitted

    def lower(self, *args, **kwargs):
        return self._jit().lower(*args, **kwargs)

    def cache_info(self):
        return self._jit().cache_info()

    def __repr__(self):
        return f"<{self._kind} of {fun_name(self.__wrapped__)}>"


def inline(graph: Graph, leaves: Sequence) -> list:
    """Evaluate a transformed graph on the call's leaves, inside the current trace."""
    return eval_graph(graph, list(leaves))


