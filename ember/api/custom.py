"""custom_vjp: a function with a hand-written backward rule.

    @custom_vjp
    def f(x): ...
    def f_fwd(x): return f(x), residuals
    def f_bwd(residuals, ct): return (ct_x,)
    f.defvjp(f_fwd, f_bwd)

All three are traced into subgraphs of one `custom_vjp_call` node, so the rule survives jit, vmap and
higher-order differentiation. As in JAX, a differentiated call takes its output from `fwd`, not from
the function; a call to the function inside `fwd` stays a custom_vjp_call there, so a transform that
differentiates the output again meets the rule. fwd's output must have the function's structure,
shapes and dtypes: anything else raises a TypeError, differentiated or not (JAX raises only under
grad of jit and otherwise uses fwd's output, a silent shape change). Arguments listed in
`nondiff_argnums` (functions, flags, ...) are passed as Python values to fun and fwd, and first to bwd,
as in JAX. Keyword arguments are resolved to
positions by fun's signature (defaults filled in), so fwd and bwd only ever see positional ones.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence

import numpy as np

from ember.api import pickling
from ember.api.tracing import check_callable, fun_name, trace_pytree
from ember.errors import ArgumentError, TransformError, user_location
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph
from ember.tracer.trace import Tracer, is_tracing, new_builder
from ember.tree import tree_flatten, tree_unflatten


def closure_convert(graph: Graph) -> tuple[Graph, list]:
    """Move consts that are values of an enclosing trace into leading inputs (array consts stay)."""
    hoisted = [(v, val) for v, val in zip(graph.consts, graph.const_values) if isinstance(val, Tracer)]
    if not hoisted:
        return graph, []
    kept = [(v, val) for v, val in zip(graph.consts, graph.const_values) if not isinstance(val, Tracer)]
    g = graph.replace(inputs=[v for v, _ in hoisted] + list(graph.inputs), consts=[v for v, _ in kept],
                      const_values=[val for _, val in kept])
    return g, [val for _, val in hoisted]


def _resolve_kwargs(fun: Callable, args: tuple, kwargs: dict, name: str) -> tuple:
    """Keyword arguments moved to their positions by fun's signature, defaults filled in (as JAX
    does), so fwd and bwd see positional arguments only."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as e:
        raise ArgumentError(f"custom_vjp function {name}: {e}", user_location()) from None
    except ValueError:  # no signature to resolve against
        bound = None
    stuck = [k for k in kwargs if bound is None or k in bound.kwargs]
    if stuck:
        raise ArgumentError(f"custom_vjp function {name} was called with keyword argument(s) "
                            f"{', '.join(stuck)} that cannot be resolved to positions; make them ordinary "
                            "(positional-or-keyword) parameters or pass them positionally", user_location())
    bound.apply_defaults()
    return bound.args


def _rebuild_custom_vjp(fun: Callable, nondiff_argnums: tuple, fwd: Callable | None, bwd: Callable | None):
    f = custom_vjp(fun, nondiff_argnums)
    return f if fwd is None else f.defvjp(fwd, bwd)


class custom_vjp:
    """Wrap `fun` so that differentiation uses the rule given with `defvjp(fwd, bwd)`."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        check_callable(fun, "custom_vjp")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self._inline_self = 0  # > 0 while fun, bwd or a nested fwd are traced: calls to self run `fun`
        self._in_fwd = 0  # > 0 while the outermost fwd is traced: calls to self bind a nested call
        self._fwd_signature = None  # the argument signature of the call whose fwd is being traced
        self._checked: set = set()  # the argument signatures whose fwd output was checked (eager calls)

    def __reduce__(self):
        """Pickled as its function and rule (by name where importable), not its tracing state."""
        return pickling.reduce(self, _rebuild_custom_vjp, self.fun, self.nondiff_argnums, self.fwd, self.bwd)

    def defvjp(self, fwd: Callable, bwd: Callable) -> custom_vjp:
        check_callable(fwd, "defvjp", "fwd (its first argument)")
        check_callable(bwd, "defvjp", "bwd (its second argument)")
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args, **kwargs):
        name = fun_name(self.fun)
        if self.fwd is None:
            raise TransformError(f"custom_vjp function {name} has no backward rule; call "
                                 f"{name}.defvjp(fwd, bwd) first", user_location())
        args = _resolve_kwargs(self.fun, args, kwargs, name)
        if self._inline_self:
            return self.fun(*args)
        if not is_tracing():
            self._check_eager(name, args)
            return self.fun(*args)
        return self._bind(name, args, nested=bool(self._in_fwd))

    def _check_eager(self, name: str, args: tuple) -> None:
        """Outside a trace `fun` runs alone; fwd's output is checked against it once per signature, by
        tracing both (a fwd that returns another shape or dtype is an error however it is called)."""
        leaves, tree = tree_flatten(args)
        try:
            key = (tree, tuple((np.shape(v), np.result_type(v)) for v in leaves),
                   tuple(args[i] for i in self.nondiff_argnums))
            if key in self._checked:
                return
        except TypeError:  # an unhashable nondiff argument: check every call
            key = None
        self._trace_checked(name, args)
        if key is not None:
            if len(self._checked) >= 256:  # bounded: a function called eagerly with ever new shapes
                self._checked.clear()
            self._checked.add(key)

    def _with_nondiff(self, args: tuple):
        """The dynamic arguments, and a wrapper calling a rule with the nondiff ones put back."""
        nondiff = {i: args[i] for i in self.nondiff_argnums}
        dyn = tuple(a for i, a in enumerate(args) if i not in nondiff)

        def with_nondiff(f):
            def call(*d):
                full, it = [], iter(d)
                for i in range(len(args)):
                    full.append(nondiff[i] if i in nondiff else next(it))
                return f(*full)

            call.__name__ = fun_name(f)
            return call

        return nondiff, dyn, with_nondiff

    def _trace_checked(self, name: str, args: tuple, nested: bool = True):
        """fun and fwd traced on `args`, fwd's output checked against fun's. With `nested` false, calls to
        self inside fwd bind a custom_vjp_call of their own (so differentiating fwd's output again meets
        the rule); with `nested` true (inside such a call, or only checking) they run `fun`."""
        _, dyn, with_nondiff = self._with_nondiff(args)
        self._inline_self += 1
        try:
            primal, leaves, _, out_tree = trace_pytree(with_nondiff(self.fun), dyn)
            if nested:
                fwd, _, _, fwd_tree = trace_pytree(with_nondiff(self.fwd), dyn)
        finally:
            self._inline_self -= 1
        if not nested:
            self._in_fwd += 1
            saved, self._fwd_signature = self._fwd_signature, self._signature(args)
            try:
                fwd, _, _, fwd_tree = trace_pytree(with_nondiff(self.fwd), dyn)
            finally:
                self._in_fwd -= 1
                self._fwd_signature = saved
        if fwd_tree.node is not tuple or len(fwd_tree.children) != 2 or fwd_tree.children[0] != out_tree:
            raise TransformError(f"the fwd rule of {name} must return (output, residuals) with the output "
                                 f"structured like {name}'s ({out_tree}); got {fwd_tree}", user_location())
        for i, (p, f) in enumerate(zip(primal.outputs, fwd.outputs)):
            if p.aval.shape != f.aval.shape or p.aval.dtype != f.aval.dtype:
                which = f" (output {i})" if len(primal.outputs) > 1 else ""
                raise TransformError(
                    f"the fwd rule of {name} returns a primal output{which} of shape {f.aval.shape} and dtype "
                    f"{f.aval.dtype}, but {name} returns shape {p.aval.shape} and dtype {p.aval.dtype}; under "
                    f"differentiation the output comes from fwd, so both must agree", user_location())
        return primal, fwd, leaves, out_tree, fwd_tree

    def _signature(self, args: tuple) -> tuple:
        """What makes two calls' rules interchangeable: argument structure, shapes and dtypes, and the
        very same nondiff arguments."""
        nondiff, dyn, _ = self._with_nondiff(args)
        leaves, tree = tree_flatten(dyn)
        return (tree, tuple((np.shape(v), np.result_type(v.dtype if hasattr(v, "dtype") else v)) for v in leaves),
                tuple(id(v) for v in nondiff.values()))

    def _bind(self, name: str, args: tuple, nested: bool):
        nondiff, dyn, _ = self._with_nondiff(args)
        # A call from inside fwd on arguments like fwd's own: differentiated, it can run that fwd (which
        # holds this call again), so every order of differentiation meets the rule, as in JAX.
        caller_fwd = nested and self._fwd_signature is not None and self._signature(args) == self._fwd_signature
        primal, fwd, leaves, out_tree, fwd_tree = self._trace_checked(name, args, nested)
        self._inline_self += 1
        try:
            return self._bind_traced(name, nondiff, dyn, primal, fwd, leaves, out_tree, fwd_tree, caller_fwd)
        finally:
            self._inline_self -= 1

    def _bind_traced(self, name, nondiff, dyn, primal, fwd, leaves, out_tree, fwd_tree, caller_fwd=False):
        n_out = out_tree.num_leaves
        res_tree = fwd_tree.children[1]
        res_avals = [v.aval for v in fwd.outputs[n_out:]]
        ct_avals = [v.aval for v in primal.outputs]
        arg_trees = [tree_flatten(a)[1] for a in dyn]
        bwd = self._trace_bwd(name, nondiff, res_tree, res_avals, out_tree, ct_avals, dyn, arg_trees, primal)
        primal, cp = closure_convert(primal)
        fwd, cf = closure_convert(fwd)
        bwd, cb = closure_convert(bwd)
        outs = P.custom_vjp_call_p.bind(*cp, *cf, *cb, *leaves, primal=primal, fwd=fwd, bwd=bwd,
                                        num_consts=(len(cp), len(cf), len(cb)), name=name, caller_fwd=caller_fwd)
        return tree_unflatten(out_tree, outs)

    def _trace_bwd(self, name, nondiff, res_tree, res_avals, out_tree, ct_avals, dyn, arg_trees, primal) -> Graph:
        n_res = len(res_avals)
        arg_avals = primal.in_avals

        def flat_bwd(*flat):
            res = tree_unflatten(res_tree, flat[:n_res])
            ct = tree_unflatten(out_tree, flat[n_res:])
            statics = [nondiff[i] for i in sorted(nondiff)]
            cts = self.bwd(*statics, res, ct)
            if not isinstance(cts, (tuple, list)) or len(cts) != len(dyn):
                raise TransformError(f"the bwd rule of {name} must return a tuple with one cotangent per "
                                     f"differentiable argument ({len(dyn)}), got {type(cts).__name__}"
                                     f"{'' if not isinstance(cts, (tuple, list)) else f' of length {len(cts)}'}",
                                     user_location())
            flat_cts = []
            avals = iter(arg_avals)
            for i, (c, tree) in enumerate(zip(cts, arg_trees)):
                n = tree.num_leaves
                want = [next(avals) for _ in range(n)]
                if c is None:
                    flat_cts += [P.full(a.shape, 0, a.dtype) for a in want]
                    continue
                c_leaves, c_tree = tree_flatten(c)
                if c_tree != tree:
                    raise TransformError(f"the bwd rule of {name} returned a cotangent for argument {i} "
                                         f"structured as {c_tree}, but the argument is {tree}", user_location())
                for c_leaf, a in zip(c_leaves, want):
                    if tuple(np.shape(c_leaf)) != a.shape:
                        raise TransformError(f"the bwd rule of {name} returned a cotangent of shape "
                                             f"{tuple(np.shape(c_leaf))} for an argument of shape {a.shape}",
                                             user_location())
                    flat_cts.append(P.convert_element_type(c_leaf, a.dtype) if hasattr(c_leaf, "dtype")
                                    else np.asarray(c_leaf, a.dtype))
            return flat_cts

        with new_builder() as b:
            ins = [b.new_input(ShapedArray(a.shape, a.dtype)) for a in list(res_avals) + list(ct_avals)]
            return b.build(flat_bwd(*ins))
