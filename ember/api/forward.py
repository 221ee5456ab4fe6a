"""Forward mode: `jvp`, `linearize`, `jacfwd` and `hessian`, as JAX defines them, on the JVP transform.

Each traces the user's function once and transforms the graph with ember.passes.forward (a JVP
interpreter: one forward pass computes outputs and tangents together). `jvp` runs that graph: inlined
into the current trace, or compiled at top level. `linearize` cuts it, as reverse mode cuts a vjp
graph, into the forward part (run now; it keeps the residuals) and the tangent part, which f_jvp
runs for each tangent. `jacfwd` batches f_jvp over the input basis with vmap; `hessian` is jacfwd of
jacrev. Forward mode meeting a custom_vjp function raises JAX's TypeError (custom_vjp_call's JVP rule).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.api.autodiff import _argnums, _differentiate, jacrev, of_argnums, unit_basis
from ember.api.custom import closure_convert
from ember.api.tracing import check_callable, fun_name, to_array, trace_for_call
from ember.errors import ArgumentError, GraphError, TransformError, user_location
from ember.passes.autodiff import split_forward_backward
from ember.passes.dce import dce
from ember.passes.forward import jvp_graph
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.ir import Graph, verified
from ember.tracer.trace import Tracer, eval_graph, is_tracing
from ember.tree import PyTreeDef, tree_flatten, tree_map, tree_unflatten


def _dtype_of(x) -> np.dtype:
    """The dtype of an array, tracer or Python scalar."""
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.result_type(x)


def _zeros_like(x):
    return P.full(np.shape(x), 0, x.dtype)


def _check(primals, tangents, name: str) -> None:
    """JAX's argument rules: tuples of equal length and structure, tangents of the primals' shapes and
    dtypes."""
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


class _Staged:
    """A transformed graph run as vjp runs its pullback: inlined while tracing, on the numpy reference
    for a call with values known (`compiled` false), else compiled once, on its first call."""

    def __init__(self, graph: Graph, compiled: bool):
        self.graph, self.compiled = graph, compiled
        self._executable = None

    def __call__(self, args: Sequence) -> list:
        if is_tracing() or not self.compiled:
            return eval_graph(self.graph, list(args))
        if self._executable is None:
            from ember.api.compile import compile_graph

            self._executable = compile_graph(self.graph, donate=())[0]
        return self._executable(*[a if isinstance(a, np.ndarray) else to_array(a) for a in args])


def _tangent_leaves(tangents, graph: Graph, mask: Sequence[bool]) -> list:
    """The tangents of the float primals, in their avals' dtypes (the others are ignored: zero)."""
    leaves = tree_flatten(tuple(tangents))[0]
    return [t if isinstance(t, Tracer) else np.asarray(t, dtype=a.dtype)
            for t, a, m in zip(leaves, graph.in_avals, mask) if m]


def _out_tangents(graph: Graph, tangents: Sequence, n_main: int) -> list:
    """One tangent per main output: the graph's, for float outputs; zeros for integer ones."""
    it = iter(tangents)
    zeros = (lambda a: P.full(a.shape, 0, a.dtype)) if is_tracing() else (lambda a: np.zeros(a.shape, a.dtype))
    return [next(it) if dtypes.is_float(v.aval.dtype) else zeros(v.aval) for v in graph.outputs[:n_main]]


def _trace(fun: Callable, primals: tuple, has_aux: bool, name: str):
    """fun traced on the primals, and the number of its main (non-aux) outputs."""
    graph, leaves, _, out_tree, known = trace_for_call(fun, tuple(primals), transform="jvp")
    if has_aux and (out_tree.node is not tuple or len(out_tree.children) != 2):
        raise TransformError(f"{name}(has_aux=True) needs {fun_name(fun)} to return a pair (out, aux), got "
                             f"{out_tree}", user_location())
    main_tree = out_tree.children[0] if has_aux else out_tree
    return graph, leaves, out_tree, main_tree, known


def jvp(fun: Callable, primals, tangents, has_aux: bool = False):
    """(fun(*primals), J·tangents), with has_aux (out, J·tangents, aux): JAX's `jvp`, one forward
    pass computing both. Tangents of integer primals are ignored (their derivative is zero)."""
    check_callable(fun, "jvp")
    _check(primals, tangents, "jvp")
    graph, leaves, out_tree, main_tree, known = _trace(fun, primals, has_aux, "jvp")
    mask = [dtypes.is_float(a.dtype) for a in graph.in_avals]
    n_out = len(graph.outputs)
    results = _Staged(_differentiate(jvp_graph, graph, mask), not known)(
        list(leaves) + _tangent_leaves(tangents, graph, mask))
    out = tree_unflatten(out_tree, results[:n_out])
    t_out = tree_unflatten(main_tree, _out_tangents(graph, results[n_out:], main_tree.num_leaves))
    return (out[0], t_out, out[1]) if has_aux else (out, t_out)


class _JVPFunction:
    """The f_jvp that `linearize` returns: the tangent part of the JVP graph with its residuals."""

    def __init__(self, tangent: _Staged, residuals: list, graph: Graph, mask: list, primal_tree: PyTreeDef,
                 main_tree: PyTreeDef, name: str):
        self._tangent, self._residuals, self._graph, self._mask = tangent, residuals, graph, mask
        self._primal_tree, self._main_tree = primal_tree, main_tree
        self.__name__ = f"jvp of {name}"

    def __call__(self, *tangents):
        t_tree = tree_flatten(tuple(tangents))[1]
        if t_tree != self._primal_tree:
            raise ArgumentError(f"{self.__name__} takes tangents structured like the primals {self._primal_tree}, "
                                f"got {t_tree}", user_location())
        touts = self._tangent(self._residuals + _tangent_leaves(tangents, self._graph, self._mask))
        return tree_unflatten(self._main_tree, _out_tangents(self._graph, touts, self._main_tree.num_leaves))

    def __repr__(self):
        return f"<{self.__name__}>"


def linearize(fun: Callable, *primals, has_aux: bool = False):
    """(fun(*primals), f_jvp) where f_jvp(*tangents) = J·tangents: JAX's `linearize` (with has_aux:
    (out, f_jvp, aux)). The forward part runs now; f_jvp runs only the tangent part, from its residuals."""
    check_callable(fun, "linearize")
    graph, leaves, out_tree, main_tree, known = _trace(fun, primals, has_aux, "linearize")
    mask = [dtypes.is_float(a.dtype) for a in graph.in_avals]
    n_out = len(graph.outputs)
    forward, tangent = _cut(_differentiate(jvp_graph, graph, mask), graph, len(leaves), n_out)
    fwd_out = _Staged(forward, not known)(leaves)
    tangent, hoisted = closure_convert(tangent)  # values of this trace become residuals
    f_jvp = _JVPFunction(_Staged(tangent, not known), hoisted + list(fwd_out[n_out:]), graph, mask,
                         tree_flatten(tuple(primals))[1], main_tree, fun_name(fun))
    out = tree_unflatten(out_tree, fwd_out[:n_out])
    return (out[0], f_jvp, out[1]) if has_aux else (out, f_jvp)


def _cut(jvp: Graph, graph: Graph, n_primals: int, n_out: int) -> tuple[Graph, Graph]:
    """The JVP graph cut into its primal part (outputs + residuals) and its tangent part (residuals +
    tangents -> tangents). A node that computes values and tangents together (a while_loop carrying its
    tangents) cannot be cut: then the primal part is `graph` itself, its inputs the residuals, and the
    tangent part runs the whole JVP graph again (as JAX's partial evaluation of a while_loop does)."""
    try:
        forward, tangent, _ = split_forward_backward(jvp, n_primals, n_out)
        return forward, tangent
    except GraphError:
        forward = graph.replace(outputs=list(graph.outputs) + list(graph.inputs))
        return verified(forward), verified(dce(jvp.replace(outputs=jvp.outputs[n_out:])))


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
        if has_aux:
            out, f_jvp, aux = linearize(partial, *dyn, has_aux=True)
        else:
            out, f_jvp = linearize(partial, *dyn)
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


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """Second derivatives of `fun` as JAX defines them, forward over reverse: jacfwd(jacrev(fun)). Each
    entry has shape out.shape + arg_i.shape + arg_j.shape (with has_aux, (hessian, aux))."""
    check_callable(fun, "hessian")
    return jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)


def _columns_last(c, in_shape: tuple):
    """(n,) + out.shape -> out.shape + in_shape: the basis axis moved last and unflattened."""
    nd = len(np.shape(c))
    moved = P.transpose(c, tuple(range(1, nd)) + (0,))
    return P.reshape(moved, tuple(np.shape(c))[1:] + in_shape)
