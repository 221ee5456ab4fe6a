"""vmap: map a function over an axis of its arguments without a Python loop.

The function is traced once on per-example shapes, batched by ember.passes.vmap, and evaluated on the
whole batch (inlined while tracing, through an implicit cached jit otherwise).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from ember.api.jit import jit
from ember.api.tracing import (
    ARRAY_LEAF_TYPES,
    arg_name,
    call_with_known_values,
    check_callable,
    fun_name,
    inline,
    input_names,
    is_hashable,
    leaf_aval,
    leaf_avals,
    trace_pytree,
)
from ember.api.transformed import Transformed
from ember.errors import (
    ArgumentError,
    BatchingError,
    ConcretizationError,
    EmberError,
    TransformError,
    api_boundary,
    filter_traceback,
    user_location,
)
from ember.passes import control_flow  # noqa: F401  (registers the VJP and batching rules of cond, while, scan)
from ember.passes.vmap import vmap_graph
from ember.tracer.trace import is_tracing
from ember.tree import broadcast_prefix, tree_flatten, tree_flatten_with_keystr, tree_unflatten


def _in_axes_per_leaf(in_axes, args: tuple, kwargs: dict, name: str) -> list:
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise BatchingError(f"vmap in_axes has {len(in_axes)} entries but {name} was called with "
                                 f"{len(args)} positional arguments; give one entry per argument (or a single "
                                 "int/None for all)", user_location())
        per_leaf = []
        for i, (ax, a) in enumerate(zip(in_axes, args)):
            try:
                per_leaf += broadcast_prefix(ax, a, what="vmap in_axes", root=f"argument {i}")
            except ValueError as e:
                raise BatchingError(f"{e}; in_axes must be a prefix of the arguments' structure (an int or "
                                     "None applies to a whole subtree)", user_location()) from None
    else:  # an int or None (vmap checked the spec)
        per_leaf = [in_axes] * len(tree_flatten(args)[0])
    return per_leaf + [0] * len(tree_flatten(kwargs)[0])


class AxesError(TransformError, TypeError):
    """in_axes or out_axes is not an int, None, or a container of them (a TypeError, as in JAX)."""


def _check_axes_spec(axes, what: str) -> None:
    """Reject at vmap() time what JAX rejects there: bools, floats, ... as axes."""
    if what == "in_axes" and not (axes is None or isinstance(axes, (tuple, list))
                                  or isinstance(axes, int) and not isinstance(axes, bool)):
        raise AxesError(f"vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                        f"positional arguments passed to the function, but got {axes!r}", user_location())
    bad = [ax for ax in tree_flatten(axes)[0] if isinstance(ax, bool) or not isinstance(ax, int)]
    if bad:
        raise AxesError(f"vmap {what} must be an int, None, or (nested) container with those types as leaves, "
                        f"but got {axes!r} (an axis is an int; None means not mapped)", user_location())


def _is_static(leaf, axis) -> bool:
    """A leaf passed through untouched: not mapped (in_axes None) and not an array (a function, a string)."""
    if axis is not None:
        return False
    try:
        return leaf_aval(leaf) is None
    except EmberError:
        return False


class _Statics:
    """The non-array leaves of a call, as a jit cache key: hashed by value, or by identity when
    unhashable (the key keeps them alive, so identities stay unique)."""

    def __init__(self, tree, static: dict):
        self.tree, self.static = tree, static
        self._key = (tree, tuple((i, v if is_hashable(v) else ("<by id>", id(v))) for i, v in static.items()))

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, _Statics) and self._key == other._key

    def rebuild(self, dyn: Sequence) -> tuple:
        it = iter(dyn)
        n = self.tree.num_leaves
        return tree_unflatten(self.tree, [self.static[i] if i in self.static else next(it) for i in range(n)])


def _reject_unmappable(dyn: Sequence[tuple]) -> None:
    """A non-array leaf (path, leaf, axis) given an axis: say how to pass it through instead."""
    for path, leaf, ax in dyn:
        if ax is not None and not isinstance(leaf, ARRAY_LEAF_TYPES) and leaf_aval(leaf) is None:
            raise ArgumentError(f"{arg_name(path)} has type {type(leaf).__name__}, which is not an array, so vmap "
                                f"cannot map it along axis {ax}; give it in_axes None to pass it through unchanged",
                                user_location())


class _Vmapped(Transformed):
    """vmap's function: non-array arguments at in_axes None reach the implicit jit as one static key."""

    def __init__(self, impl: Callable, fun: Callable, in_axes, options):
        super().__init__(impl, fun, "vmap", options, recipe=(vmap, (fun, *options)))
        self._in_axes = in_axes
        self._static_jit = None

    @api_boundary
    def __call__(self, *args, **kwargs):
        try:
            if is_tracing():
                return self._impl(*args, **kwargs)
            if all(isinstance(x, ARRAY_LEAF_TYPES) for x in (*args, *kwargs.values())):
                return super().__call__(*args, **kwargs)  # no pytree to look into: the common, fast case
            leaves, tree = tree_flatten((args, kwargs))
            if all(isinstance(x, ARRAY_LEAF_TYPES) for x in leaves):
                return super().__call__(*args, **kwargs)
            axes = _in_axes_per_leaf(self._in_axes, args, kwargs, fun_name(self.__wrapped__))
            static = {i: x for i, (x, ax) in enumerate(zip(leaves, axes)) if _is_static(x, ax)}
            paths = [p for p, _ in tree_flatten_with_keystr((args, kwargs))[0]]
            _reject_unmappable([(p, x, ax) for i, (p, x, ax) in enumerate(zip(paths, leaves, axes)) if i not in static])
            if not static:
                return super().__call__(*args, **kwargs)
            statics, dyn = _Statics(tree, static), [x for i, x in enumerate(leaves) if i not in static]
            try:
                return self._with_statics()(statics, *dyn)
            except ConcretizationError:
                return call_with_known_values(functools.partial(self._run, statics), tuple(dyn), {})
        except Exception as e:
            filter_traceback(e)
            raise

    def _run(self, statics: _Statics, *dyn):
        a, kw = statics.rebuild(dyn)
        return self._impl(*a, **kw)

    def _with_statics(self):
        """The implicit jit for calls with static leaves: they come first, as one static argument."""
        if self._static_jit is None:
            self._static_jit = jit(self._run, static_argnums=0)
            self._static_jit.__name__ = f"vmap({fun_name(self.__wrapped__)})"
        return self._static_jit


def vmap(fun: Callable, in_axes=0, out_axes=0, axis_size: int | None = None) -> Callable:
    """Vectorize `fun` over axis `in_axes` of its arguments (None: not mapped; pytrees of them allowed)
    and stack the results along `out_axes`. Keyword arguments are mapped over axis 0. Arguments that
    are not arrays (functions, strings) pass through untouched where in_axes is None."""
    check_callable(fun, "vmap")
    name = fun_name(fun)
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")

    def impl(*args, **kwargs):
        axes = _in_axes_per_leaf(in_axes, args, kwargs, name)
        leaves_paths, in_tree = tree_flatten_with_keystr((args, kwargs))
        static = {i: leaf for i, ((_, leaf), ax) in enumerate(zip(leaves_paths, axes)) if _is_static(leaf, ax)}
        dyn = [(path, leaf, ax) for i, ((path, leaf), ax) in enumerate(zip(leaves_paths, axes)) if i not in static]
        _reject_unmappable(dyn)
        avals = leaf_avals([leaf for _, leaf, _ in dyn], (args, kwargs))
        dims, sizes = [], {}
        for (path, _, ax), aval in zip(dyn, avals):
            where = arg_name(path)
            if ax is None:
                dims.append(None)
                continue
            nd = len(aval.shape)
            if not -nd <= ax < nd:
                valid = f"{-nd}..{nd - 1}" if nd else "none (it is a scalar; use None for it)"
                raise BatchingError(f"vmap in_axes={ax} is out of range for {where} of shape {aval.shape}; "
                                     f"valid axes: {valid}", user_location())
            ax %= nd
            dims.append(ax)
            sizes[where] = aval.shape[ax]
        if len(set(sizes.values())) > 1:
            listing = ", ".join(f"{k} has size {v}" for k, v in sizes.items())
            raise BatchingError(f"vmap got inconsistent sizes for the mapped axes: {listing}", user_location())
        if sizes:
            size = next(iter(sizes.values()))
            if axis_size is not None and axis_size != size:
                raise BatchingError(f"vmap axis_size={axis_size} but the mapped arguments have size {size}",
                                     user_location())
        elif axis_size is None:
            raise BatchingError("vmap: no argument is mapped (all in_axes are None); pass axis_size=... to say "
                                 "how many times to map", user_location())
        else:
            size = axis_size
        example = [a if d is None else a.update(shape=a.shape[:d] + a.shape[d + 1:]) for a, d in zip(avals, dims)]

        def with_statics(*dyn_leaves):
            a, kw = _Statics(in_tree, static).rebuild(dyn_leaves)
            return fun(*a, **kw)

        with_statics.__name__ = name
        dyn_leaves = tuple(leaf for _, leaf, _ in dyn)
        graph, leaves, _, out_tree = trace_pytree(
            with_statics, dyn_leaves, {}, example, transform="vmap",
            names=lambda: [n for i, n in enumerate(input_names(fun, args, kwargs)) if i not in static])
        out_dims = _out_axes_per_leaf(out_axes, out_tree, graph)
        try:
            batched = vmap_graph(graph, dims, size, out_dims)
        except EmberError as e:  # e.g. out_axes=None for a batched output: name the user's line
            raise e.with_loc(user_location()) from None
        return tree_unflatten(out_tree, inline(batched, leaves))

    return _Vmapped(impl, fun, in_axes, (in_axes, out_axes, axis_size))


def _out_axes_per_leaf(out_axes, out_tree, graph) -> list:
    outs = tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
    if isinstance(out_axes, list):
        out_axes = tuple(out_axes)
    try:
        per_leaf = broadcast_prefix(out_axes, outs, what="vmap out_axes", root="output")
    except ValueError as e:
        raise BatchingError(f"{e}; out_axes must be a prefix of the output's structure", user_location()) from None
    result = []
    for ax, v in zip(per_leaf, graph.outputs):
        if ax is None:
            result.append(None)
            continue
        nd = len(v.aval.shape) + 1
        if not -nd <= ax < nd:
            raise BatchingError(f"vmap out_axes={ax} is out of range for an output of per-example shape "
                                 f"{v.aval.shape}; valid axes: {-nd}..{nd - 1}", user_location())
        result.append(ax % nd)
    return result
