"""Forward mode: `jvp`, `linearize` and `jacfwd`, as JAX defines them, by transposing reverse mode.

A pullback ct -> J^T ct is linear in ct, so its own pullback is ct-independent and maps t -> J t: the
Jacobian-vector product is the vjp of the vjp, evaluated at a zero cotangent (any would do). So every
primitive's forward behaviour follows from its VJP rule, whose own VJP the second-derivative tests
already check for every primitive (tests/tracer/test_second_derivatives.py): no second table of rules
to keep in step. The cost is two reverse passes where a JVP rule would take one forward pass; under
`jit` the optimizer fuses and simplifies both. A `custom_vjp` function has no forward rule to transpose
(its backward rule need not be linear-correct in that sense), so JAX's TypeError is raised for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.api.autodiff import _argnums, of_argnums, unit_basis, vjp
from ember.api.tracing import check_callable, fun_name, trace_for_call
from ember.errors import ArgumentError, user_location
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.prims.custom import custom_vjp_call_p
from ember.tree import tree_flatten, tree_map, tree_unflatten


def _dtype_of(x) -> np.dtype:
    """The dtype of an array, tracer or Python scalar."""
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.result_type(x)


def _zeros_like(x):
    return P.full(np.shape(x), 0, x.dtype)


def _check(fun: Callable, primals, tangents, name: str) -> None:
    """JAX's argument rules: tuples of equal length and structure, tangents of the primals' shapes and
    dtypes; no custom_vjp function inside (TypeError, as JAX)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ArgumentError(f"{name}: primals and tangents must be tuples, got {type(primals).__name__} and "
                            f"{type(tangents).__name__}", user_location())
    if len(primals) != len(tangents):
        raise ArgumentError(f"{name}: {len(primals)} primals but {len(tangents)} tangents; pass one tangent per "
                            "primal", user_location())
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise ArgumentError(f"{name}: tangents are structured as {t_tree}, primals as {p_tree}", user_location())
    for k, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        if np.shape(p) != np.shape(t) or _dtype_of(p) != _dtype_of(t):
            raise ArgumentError(f"{name}: tangent {k} is {_dtype_of(t)}{list(np.shape(t))}, its primal "
                                f"{_dtype_of(p)}{list(np.shape(p))}: a tangent has its primal's shape and "
                                "dtype", user_location())
    graph = trace_for_call(fun, tuple(primals), transform="jvp")[0]
    if any(n.prim is custom_vjp_call_p for n in graph.all_nodes()):
        raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


def jvp(fun: Callable, primals, tangents, has_aux: bool = False):
    """(fun(*primals), J·tangents), with has_aux (out, J·tangents, aux): JAX's `jvp`. Tangents of
    integer primals are ignored (their derivative is zero)."""
    check_callable(fun, "jvp")
    _check(fun, primals, tangents, "jvp")
    out, f_jvp, *aux = linearize(fun, *primals, has_aux=has_aux, _checked=True)
    return (out, f_jvp(*tangents), aux[0]) if has_aux else (out, f_jvp(*tangents))


def linearize(fun: Callable, *primals, has_aux: bool = False, _checked: bool = False):
    """(fun(*primals), f_jvp) where f_jvp(*tangents) = J·tangents, reusing the forward pass: JAX's
    `linearize` (with has_aux: (out, f_jvp, aux))."""
    check_callable(fun, "linearize")
    if not _checked:
        _check(fun, primals, primals, "linearize")
    if has_aux:
        out, pullback, aux = vjp(fun, *primals, has_aux=True)
    else:
        out, pullback = vjp(fun, *primals)
    _, transposed = vjp(pullback, tree_map(_zeros_like, out))
    int_primal = [not dtypes.is_float(_dtype_of(p)) for p in tree_flatten(tuple(primals))[0]]

    def f_jvp(*tangents):
        leaves, tree = tree_flatten(tuple(tangents))
        leaves = [_zeros_like(t) if skip else t for t, skip in zip(leaves, int_primal)]
        (jt,) = transposed(tree_unflatten(tree, leaves))
        return jt

    return (out, f_jvp, aux) if has_aux else (out, f_jvp)


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The Jacobian of `fun` w.r.t. args[argnums] by forward mode: one linearization, its f_jvp batched
    over the input basis with vmap. Entries have shape out.shape + arg.shape, as jacrev's (and JAX's)."""
    check_callable(fun, "jacfwd")
    from ember.api.batching import vmap
    from ember.api.transformed import Transformed

    name = fun_name(fun)

    def impl(*args):
        nums, single = _argnums(argnums, len(args), name)

        partial = of_argnums(fun, args, nums)
        dyn = tuple(args[i] for i in nums)
        for i, d in zip(nums, dyn):
            for leaf in tree_flatten(d)[0]:
                if not dtypes.is_float(_dtype_of(leaf)):
                    raise TypeError(f"jacfwd of {name} needs float arguments at argnums; argument {i} holds "
                                    f"{_dtype_of(leaf)}")
        _check(partial, dyn, dyn, "jacfwd")
        if has_aux:
            out, f_jvp, aux = linearize(partial, *dyn, has_aux=True, _checked=True)
        else:
            out, f_jvp = linearize(partial, *dyn, _checked=True)
        out_leaves, out_tree = tree_flatten(out)
        per_arg = []  # per argnum: per output leaf, the entry structured like that argument
        for k, d in enumerate(dyn):
            d_leaves, d_tree = tree_flatten(d)
            cols_per_leaf = []
            for j, leaf in enumerate(d_leaves):
                shape = tuple(np.shape(leaf))
                n = int(np.prod(shape, dtype=np.int64))
                eye = unit_basis(n, shape, leaf.dtype)

                def column(e, k=k, j=j, d_leaves=d_leaves, d_tree=d_tree):
                    tangents = [tree_map(_zeros_like, x) for x in dyn]
                    leaves = [e if i == j else _zeros_like(x) for i, x in enumerate(d_leaves)]
                    tangents[k] = tree_unflatten(d_tree, leaves)
                    return f_jvp(*tangents)

                cols = tree_flatten(vmap(column)(eye))[0]  # per output leaf: (n,) + out.shape
                cols_per_leaf.append([_columns_last(c, shape) for c in cols])
            per_arg.append([tree_unflatten(d_tree, [c[o] for c in cols_per_leaf]) for o in range(len(out_leaves))])
        jac = tree_unflatten(out_tree, [per_arg[0][o] if single else tuple(p[o] for p in per_arg)
                                        for o in range(len(out_leaves))])
        return (jac, aux) if has_aux else jac

    return Transformed(impl, fun, "jacfwd", (argnums, has_aux), recipe=(jacfwd, (fun, argnums, has_aux)))


def _columns_last(c, in_shape: tuple):
    """(n,) + out.shape -> out.shape + in_shape: the basis axis moved last and unflattened."""
    nd = len(np.shape(c))
    moved = P.transpose(c, tuple(range(1, nd)) + (0,))
    return P.reshape(moved, tuple(np.shape(c))[1:] + in_shape)
