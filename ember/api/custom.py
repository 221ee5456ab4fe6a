"""custom_vjp: a function with a hand-written backward rule.

    @custom_vjp
    def f(x): ...
    def f_fwd(x): return f(x), residuals
    def f_bwd(residuals, ct): return (ct_x,)
    f.defvjp(f_fwd, f_bwd)

All three are traced into subgraphs of one `custom_vjp_call` node, so the rule survives jit, vmap and
higher-order differentiation. Arguments listed in `nondiff_argnums` (functions, flags, ...) are passed
as Python values to fun and fwd, and first to bwd, as in JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from ember.api.tracing import fun_name, trace_pytree
from ember.errors import TransformError, user_location
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


class custom_vjp:
    """Wrap `fun` so that differentiation uses the rule given with `defvjp(fwd, bwd)`."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self._tracing_rules = 0  # > 0 while fwd/bwd are traced: calls to self inside them run `fun`

    def defvjp(self, fwd: Callable, bwd: Callable) -> custom_vjp:
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args):
        name = fun_name(self.fun)
        if self.fwd is None:
            raise TransformError(f"custom_vjp function {name} has no backward rule; call "
                                 f"{name}.defvjp(fwd, bwd) first", user_location())
        if not is_tracing() or self._tracing_rules:
            return self.fun(*args)
        self._tracing_rules += 1
        try:
            return self._bind(name, args)
        finally:
            self._tracing_rules -= 1

    def _bind(self, name: str, args: tuple):
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

        primal, leaves, _, out_tree = trace_pytree(with_nondiff(self.fun), dyn)
        fwd, _, _, fwd_tree = trace_pytree(with_nondiff(self.fwd), dyn)
        if fwd_tree.node is not tuple or len(fwd_tree.children) != 2 or fwd_tree.children[0] != out_tree:
            raise TransformError(f"the fwd rule of {name} must return (output, residuals) with the output "
                                 f"structured like {name}'s ({out_tree}); got {fwd_tree}", user_location())
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
                                        num_consts=(len(cp), len(cf), len(cb)), name=name)
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
