"""vmap: map a function over an axis of its arguments without a Python loop.

The function is traced once on per-example shapes, batched by ember.passes.vmap, and evaluated on the
whole batch (inlined while tracing, through an implicit cached jit otherwise).
"""

from __future__ import annotations

from collections.abc import Callable

from ember.api.tracing import Transformed, arg_name, fun_name, inline, leaf_avals, trace_pytree
from ember.errors import BatchingError, EmberError, TransformError, user_location
from ember.passes.vmap import vmap_graph
from ember.tree import broadcast_prefix, tree_flatten, tree_flatten_with_path, tree_unflatten


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
    elif in_axes is None or isinstance(in_axes, int):
        per_leaf = [in_axes] * len(tree_flatten(args)[0])
    else:
        raise TransformError(f"vmap in_axes must be an int, None, or a tuple with one entry per argument, got "
                             f"{in_axes!r}", user_location())
    return per_leaf + [0] * len(tree_flatten(kwargs)[0])


def vmap(fun: Callable, in_axes=0, out_axes=0, axis_size: int | None = None) -> Callable:
    """Vectorize `fun` over axis `in_axes` of its arguments (None: not mapped; pytrees of them allowed)
    and stack the results along `out_axes`. Keyword arguments are mapped over axis 0."""
    name = fun_name(fun)

    def impl(*args, **kwargs):
        axes = _in_axes_per_leaf(in_axes, args, kwargs, name)
        leaves_paths, _ = tree_flatten_with_path((args, kwargs))
        avals = leaf_avals([leaf for _, leaf in leaves_paths], (args, kwargs))
        dims, sizes = [], {}
        for (path, _), aval, ax in zip(leaves_paths, avals, axes):
            where = arg_name(path)
            if ax is None:
                dims.append(None)
                continue
            if not isinstance(ax, int):
                raise TransformError(f"vmap in_axes entries must be int or None, got {ax!r} for {where}",
                                     user_location())
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
        graph, leaves, _, out_tree = trace_pytree(fun, args, kwargs, example, transform="vmap")
        out_dims = _out_axes_per_leaf(out_axes, out_tree, graph)
        try:
            batched = vmap_graph(graph, dims, size, out_dims)
        except EmberError as e:  # e.g. out_axes=None for a batched output: name the user's line
            raise e.with_loc(user_location()) from None
        return tree_unflatten(out_tree, inline(batched, leaves))

    return Transformed(impl, fun, "vmap")


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
