"""grad, value_and_grad, vjp, jacrev and stop_gradient (hessian, forward over reverse, is in forward.py).

Each traces the user's function to a Graph, transforms it with ember.passes.autodiff and evaluates
the result on the arguments: inlined into the current trace, or (at top level) through an implicit,
cached jit, so `grad(f)(x)` and `jit(grad(f))(x)` compile the same single graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ember.api.custom import closure_convert
from ember.api.tracing import (
    arg_name,
    check_callable,
    fun_name,
    inline,
    leaf_avals,
    to_array,
    trace_for_call,
    trace_pytree,
)
from ember.api.transformed import Transformed
from ember.errors import (
    ArgumentValueError,
    EmberError,
    TransformError,
    api_boundary,
    filter_traceback,
    user_location,
)
from ember.passes import control_flow  # noqa: F401  (registers the VJP and batching rules of cond, while, scan)
from ember.passes.autodiff import differentiable_outputs, grad_graph, split_forward_backward, vjp_graph
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.trace import Tracer, eval_graph, is_tracing
from ember.tree import register_pytree_node, tree_flatten, tree_flatten_with_keystr, tree_map, tree_unflatten


class ArgnumsError(TransformError, TypeError):
    """argnums names an argument twice or one the call does not have (a TypeError, as in JAX)."""


def _argnums(argnums, n_args: int, name: str) -> tuple[tuple[int, ...], bool]:
    """argnums as non-negative positions in the order given (negative ones count from the end), and
    whether it was a single int; duplicates and out-of-range positions raise an ArgnumsError."""
    single = isinstance(argnums, (int, np.integer))
    nums = (argnums,) if single else tuple(argnums)
    if not nums:
        raise TransformError(f"argnums of {name} must not be empty", user_location())
    if not all(isinstance(i, (int, np.integer)) for i in nums):
        raise ArgnumsError(f"argnums of {name} must be ints, got {argnums!r}", user_location())
    nums = tuple(int(i) for i in nums)
    for i in nums:
        if not -n_args <= i < n_args:
            valid = (f"0..{n_args - 1} (or {-n_args}..-1 counting from the end)" if n_args
                     else "none: it was called without positional arguments")
            raise ArgnumsError(f"argnums {i} is out of range: {name} was called with {n_args} positional "
                               f"argument(s), so valid argnums are {valid}", user_location())
    resolved = tuple(i % n_args for i in nums)
    dup = next((i for k, i in enumerate(resolved) if i in resolved[:k]), None)
    if dup is not None:
        raise ArgnumsError(f"argnums {tuple(nums)} of {name} names argument {dup} twice; list each "
                           "argument once", user_location())
    return resolved, single


def _differentiate(transform, graph, mask):
    """Run an autodiff graph transform; an error that a rule raised without a location (e.g. a
    custom_vjp closing over a differentiated value) gets the user's line."""
    try:
        return transform(graph, mask)
    except EmberError as e:
        raise e.with_loc(user_location()) from None


def _active_mask(args: tuple, kwargs: dict, nums: Sequence[int], name: str, what: str) -> list[bool]:
    """One flag per leaf of (args, kwargs): True for the leaves of the differentiated arguments."""
    with_paths = tree_flatten_with_keystr((args, kwargs))[0]
    avals = leaf_avals([leaf for _, leaf in with_paths], (args, kwargs))  # raises on non-array leaves
    mask = []
    for (path, _), aval in zip(with_paths, avals):
        m = re.match(r"\[0\]\[(\d+)\]", path)  # a leaf of positional argument int(m[1])
        active = m is not None and int(m[1]) in nums
        if active and not dtypes.is_float(aval.dtype):
            raise TransformError(
                f"{what} requires floating-point inputs, but {arg_name(path)} of {name} has dtype "
                f"{aval.dtype.name}; differentiate with respect to a float argument (convert it with "
                ".astype(float)) or leave it out of argnums", user_location())
        mask.append(active)
    return mask


def _check_scalar_loss(graph, out_tree, has_aux: bool, name: str, what: str):
    outs = graph.outputs
    if has_aux:
        if out_tree.node is not tuple or len(out_tree.children) != 2:
            raise TransformError(f"{what}(has_aux=True) needs {name} to return a pair (loss, aux), got "
                                 f"{out_tree}", user_location())
        n_loss = out_tree.children[0].num_leaves
    else:
        n_loss = len(outs)
    if n_loss != 1 or outs[0].aval.shape != ():
        got = ", ".join(o.aval.str_short() for o in outs[:n_loss]) or "nothing"
        fix = "use vjp or jacrev to differentiate non-scalar outputs"
        kids = out_tree.children if out_tree.node in (tuple, list) else ()
        if not has_aux and len(kids) >= 2 and kids[0].num_leaves == 1 and outs[0].aval.shape == ():
            fix = (f"if the first element is the loss and the rest auxiliary data, pass has_aux=True "
                   f"({what}(f, has_aux=True) returns (gradient, aux)); to differentiate every output, {fix}")
        raise TransformError(f"{what} needs {name} to return a scalar, got {got}; {fix}", user_location())
    if not dtypes.is_float(outs[0].aval.dtype):
        raise TransformError(f"{what} needs a floating-point output, but {name} returned "
                             f"{outs[0].aval.str_short()}", user_location())


def _grads_in_argnums_order(flat: Sequence, args: tuple, nums: tuple[int, ...], single: bool):
    """Flat gradients (in argument order, as the graph has them) regrouped per argument and put in
    the order argnums gives."""
    it = iter(flat)
    per_arg = {}
    for i in sorted(nums):
        leaves, tree = tree_flatten(args[i])
        per_arg[i] = tree_unflatten(tree, [next(it) for _ in leaves])
    return per_arg[nums[0]] if single else tuple(per_arg[i] for i in nums)


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """A function returning (fun(*args), gradient of fun w.r.t. args[argnums]); the value is
    ((loss, aux), grads) with has_aux=True. Gradients have the structure of their arguments."""
    check_callable(fun, "value_and_grad")
    name = fun_name(fun)

    def impl(*args, **kwargs):
        nums, single = _argnums(argnums, len(args), name)
        mask = _active_mask(args, kwargs, nums, name, "grad")
        graph, leaves, _, out_tree = trace_pytree(fun, args, kwargs, differentiated=mask, transform="grad")
        _check_scalar_loss(graph, out_tree, has_aux, name, "grad")
        results = inline(_differentiate(grad_graph, graph, mask), leaves)
        n_out = len(graph.outputs)
        value = tree_unflatten(out_tree, results[:n_out])
        return value, _grads_in_argnums_order(results[n_out:], args, nums, single)

    return Transformed(impl, fun, "value_and_grad", (argnums, has_aux),
                       recipe=(value_and_grad, (fun, argnums, has_aux)))


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of scalar-valued `fun` with respect to args[argnums] (aux too with has_aux)."""
    check_callable(fun, "grad")
    vg = value_and_grad(fun, argnums, has_aux)

    def impl(*args, **kwargs):
        value, g = vg._impl(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return Transformed(impl, fun, "grad", (argnums, has_aux), recipe=(grad, (fun, argnums, has_aux)))


class _Backward:
    """What a pullback needs besides its residuals: the backward graph (residuals + cotangents ->
    gradients, no consts from a finished trace), the output and argument structure, and the
    executable, compiled on the first call outside a trace. Shared by every copy of a pullback,
    and its pytree aux data."""

    def __init__(self, graph, ct_tree, out_avals, diff, n_main, primal_trees, name, compiled: bool = True):
        self.graph, self.ct_tree, self.out_avals, self.diff = graph, ct_tree, out_avals, diff
        self.n_main, self.primal_trees, self.name = n_main, primal_trees, name
        self.compiled = compiled  # False for a function evaluated with values known: numpy reference only
        self._executable = None

    def run(self, residuals: list, cts: list) -> list:
        if is_tracing() or not self.compiled:
            return eval_graph(self.graph, residuals + cts)
        if self._executable is None:
            from ember.api.compile import compile_graph

            self._executable = compile_graph(self.graph, donate=())[0]
        return self._executable(*[np.asarray(r) for r in residuals], *cts)


class _VJPFunction:
    """The pullback returned by `vjp`: call it with cotangents shaped like the (main) outputs. A
    pytree whose leaves are the residuals, so it can be jitted, vmapped, returned from jit and
    passed through pytrees."""

    def __init__(self, backward: _Backward, residuals: Sequence):
        self._bwd, self._residuals = backward, list(residuals)
        self.__name__ = f"vjp of {backward.name}"

    @api_boundary
    def __call__(self, ct):
        try:
            bwd = self._bwd
            ct_leaves, ct_tree = tree_flatten(ct)
            if ct_tree != bwd.ct_tree:
                raise ArgumentValueError(f"the vjp of {bwd.name} takes cotangents structured like its output "
                                         f"{bwd.ct_tree}, got {ct_tree}", user_location())
            for i, c in enumerate(ct_leaves):
                shape, want = tuple(np.shape(c)), bwd.out_avals[i].shape
                if shape != want:
                    raise ArgumentValueError(f"cotangent {i} of the vjp of {bwd.name} has shape {shape}, but "
                                             f"the output has shape {want}", user_location())
            self._check_residuals()
            tracing = is_tracing()
            cts = []
            for i in bwd.diff:  # aux outputs (i >= n_main) get zero cotangents
                aval = bwd.out_avals[i]
                if i < bwd.n_main:
                    cts.append(_as_cotangent(ct_leaves[i], aval.dtype))
                else:
                    cts.append(P.full(aval.shape, 0, aval.dtype) if tracing else np.zeros(aval.shape, aval.dtype))
            it = iter(bwd.run(self._residuals, cts))
            return tuple(tree_unflatten(tree, [next(it) if active else np.zeros(shape, dt)
                                               for active, shape, dt in info])
                         for tree, info in bwd.primal_trees)
        except Exception as e:
            filter_traceback(e)
            raise

    def _check_residuals(self) -> None:
        want = self._bwd.graph.in_avals[:len(self._residuals)]
        for r, a in zip(self._residuals, want):
            if tuple(np.shape(r)) != a.shape:
                raise TransformError(f"the vjp of {self._bwd.name} holds a residual of shape {np.shape(r)} where "
                                     f"its backward pass expects {a.shape}; a pullback returned from vmap holds "
                                     "batched residuals: call it inside the vmapped function instead",
                                     user_location())

    def __repr__(self):
        return f"<{self.__name__}>"


def _as_cotangent(c, dtype):
    """A cotangent leaf in the output's dtype (traced values are converted in the graph)."""
    if isinstance(c, Tracer):
        return c if c.aval.dtype == dtype else P.convert_element_type(c, dtype)
    return np.asarray(c, dtype=dtype)


register_pytree_node(_VJPFunction, lambda f: (f._residuals, f._bwd), lambda bwd, res: _VJPFunction(bwd, res))


@api_boundary
def vjp(fun: Callable, *primals, has_aux: bool = False):
    try:
        """(fun(*primals), vjp_fn) where vjp_fn(ct) returns one cotangent per primal; with has_aux,
        (out, vjp_fn, aux). The forward runs now; vjp_fn runs only the backward part, from the saved
        residuals."""
        check_callable(fun, "vjp")
        name = fun_name(fun)
        graph, leaves, _, out_tree, known = trace_for_call(fun, primals, transform="vjp")  # known: values known
        if has_aux and (out_tree.node is not tuple or len(out_tree.children) != 2):
            raise TransformError(f"vjp(has_aux=True) needs {name} to return a pair (out, aux), got {out_tree}",
                                 user_location())
        avals = graph.in_avals
        mask = [dtypes.is_float(a.dtype) for a in avals]
        n_out = len(graph.outputs)
        forward, backward, _ = split_forward_backward(_differentiate(vjp_graph, graph, mask), len(leaves), n_out)
        if not is_tracing() and not known:  # the residuals are read by every call of the pullback: never donated
            from ember.api.compile import compile_graph

            fwd_out = compile_graph(forward, donate=())[0](*[to_array(x) for x in leaves])  # scalars: their weak dtypes
        else:
            fwd_out = eval_graph(forward, list(leaves))
        backward, hoisted = closure_convert(backward)  # values of this trace become residuals
        out_value = tree_unflatten(out_tree, fwd_out[:n_out])
        flags = iter(zip(avals, mask))
        primal_trees = []
        for p in primals:
            p_leaves, p_tree = tree_flatten(p)
            primal_trees.append((p_tree, [(m, a.shape, a.dtype) for a, m in (next(flags) for _ in p_leaves)]))
        ct_tree = out_tree.children[0] if has_aux else out_tree
        bwd = _Backward(backward, ct_tree, graph.out_avals, differentiable_outputs(graph), ct_tree.num_leaves,
                        primal_trees, name, compiled=not known)
        fn = _VJPFunction(bwd, hoisted + list(fwd_out[n_out:]))
        return (out_value[0], fn, out_value[1]) if has_aux else (out_value, fn)
    except Exception as e:
        filter_traceback(e)
        raise


def of_argnums(fun: Callable, args: tuple, nums: Sequence[int]) -> Callable:
    """`fun` as a function of args[nums] alone, the other arguments fixed at their values in `args`."""
    def partial(*dyn):
        full = list(args)
        for i, d in zip(nums, dyn):
            full[i] = d
        return fun(*full)

    return partial


def unit_basis(n: int, shape: tuple, dtype) -> object:
    """The n unit vectors of a space of `shape` (n elements), stacked: (n,) + shape, of `dtype`."""
    eye = P.eq(P.iota(dtypes.int_, (n, n), 0), P.iota(dtypes.int_, (n, n), 1))
    return P.reshape(P.convert_element_type(eye, dtype), (n,) + tuple(shape))


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The Jacobian of `fun` w.r.t. args[argnums] by reverse mode: one vjp, batched over the rows
    with vmap. Each entry has shape out.shape + arg.shape; the result mirrors the output's structure
    (then the arguments')."""
    check_callable(fun, "jacrev")
    from ember.api.batching import vmap

    name = fun_name(fun)

    def impl(*args):
        nums, single = _argnums(argnums, len(args), name)
        _active_mask(args, {}, nums, name, "jacrev")

        partial = of_argnums(fun, args, nums)
        dyn = tuple(args[i] for i in nums)
        if has_aux:
            out, pullback, aux = vjp(partial, *dyn, has_aux=True)
        else:
            out, pullback = vjp(partial, *dyn)
        out_leaves, out_tree = tree_flatten(out)
        rows = []
        for j, o in enumerate(out_leaves):
            shape = tuple(np.shape(o))
            n = int(np.prod(shape, dtype=np.int64))
            dt = o.dtype

            def row_pullback(e, j=j):
                cts = [e if k == j else P.full(np.shape(x), 0, x.dtype) for k, x in enumerate(out_leaves)]
                return pullback(tree_unflatten(out_tree, cts))

            if shape == ():  # one row: a plain pullback, no batching (jacrev of a scalar is grad)
                rows.append(row_pullback(P.full((), 1, dt)))
                continue
            basis = unit_basis(n, shape, dt)
            cols = vmap(row_pullback)(basis)
            rows.append(tree_map(lambda c, shape=shape: P.reshape(c, shape + tuple(np.shape(c))[1:]), cols))
        per_out = [r[0] if single else r for r in rows]
        jac = tree_unflatten(out_tree, per_out)
        return (jac, aux) if has_aux else jac

    return Transformed(impl, fun, "jacrev", (argnums, has_aux), recipe=(jacrev, (fun, argnums, has_aux)))


jacobian = jacrev


def stop_gradient(x):
    """`x` (a pytree) treated as a constant by differentiation."""
    from ember.numpy import asarray

    return tree_map(lambda leaf: P.stop_gradient(asarray(leaf)), x)
