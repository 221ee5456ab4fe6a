"""custom_jvp: a function with a hand-written forward-mode rule, JAX's API.

    @custom_jvp
    def f(x): ...

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        t, = tangents
        return f(x), t * df(x)

The function and its rule are traced into the subgraphs of one `custom_jvp_call` node, so the rule
survives jit and vmap and serves every order of differentiation: forward mode runs it, reverse mode
linearizes it in its tangents and transposes it (as JAX does), and a second derivative differentiates
the rule's own body. A call of the function inside its own rule (the usual way to compute the primal
output there) stays a call whose rule is that same rule, so differentiating the output again meets the
rule again, as in JAX. `defjvps` gives one rule per argument, summed. Arguments in `nondiff_argnums`
are passed as Python values to the function and first to the rule.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence

import numpy as np

from ember.api.custom import closure_convert
from ember.api.tracing import check_callable, fun_name, leaf_avals, trace_pytree
from ember.errors import ArgumentError, user_location
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph
from ember.tracer.trace import is_tracing, trace_flat
from ember.tree import PyTreeDef, tree_flatten, tree_map, tree_unflatten


class custom_jvp:
    """Wrap `fun` so that differentiation uses the rule given with `defjvp(jvp)` (or `defjvps`)."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        check_callable(fun, "custom_jvp")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable | None = None
        self._rules: list[tuple] = []  # the signatures of the calls whose rules are being traced, innermost last
        self._inline = 0  # > 0 while a rule is traced again without recursive calls: those run `fun`

    def defjvp(self, jvp: Callable) -> Callable:
        """Set the rule `jvp(*nondiff, primals, tangents) -> (out, tangent_out)`; returns it, so it can
        decorate the rule, as in JAX."""
        check_callable(jvp, "defjvp", "the jvp rule")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """One rule per argument, `jvp_i(tangent_i, out, *primals) -> its tangent contribution` (None:
        the output does not depend on it); the tangent is their sum."""
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            out = self(*primals)
            terms = [rule(t, out, *primals) for rule, t in zip(jvps, tangents) if rule is not None]
            zero = tree_map(lambda o: P.full(np.shape(o), 0, o.dtype), out)
            return out, functools.reduce(lambda a, b: tree_map(P.add, a, b), terms, zero) if terms else zero

        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        name = fun_name(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = _positional(self.fun, args, kwargs, name)
        if not is_tracing():
            return self.fun(*args)
        signature = self._signature(args)
        if signature in self._rules:
            if signature != self._rules[-1] or self._inline:  # not the innermost rule's own call
                return self.fun(*args)
            return self._bind(name, args, recursive=True)
        return self._bind(name, args)

    def _signature(self, args: tuple) -> tuple:
        """What makes two calls' rules interchangeable: argument structure and avals, the same nondiff values."""
        dyn = [a for i, a in enumerate(args) if i not in self.nondiff_argnums]
        leaves, tree = tree_flatten(dyn)
        return tree, tuple(leaf_avals(leaves, dyn)), tuple(id(args[i]) for i in self.nondiff_argnums)

    def _bind(self, name: str, args: tuple, recursive: bool = False):
        """Trace fun and (unless `recursive`: a call inside its own rule, whose rule is that one) the rule,
        and bind one custom_jvp_call."""
        nondiff = {i: args[i] for i in self.nondiff_argnums}
        dyn = tuple(a for i, a in enumerate(args) if i not in nondiff)
        statics = [nondiff[i] for i in sorted(nondiff)]

        def with_nondiff(*d):
            it = iter(d)
            return self.fun(*[nondiff[i] if i in nondiff else next(it) for i in range(len(args))])

        primal, leaves, _, out_tree = trace_pytree(with_nondiff, dyn)
        rule, cj = None, []
        if not recursive:
            rule, cj = self._traced_rule(name, args, statics, dyn, primal, out_tree)
        primal, cp = closure_convert(primal)
        outs = P.custom_jvp_call_p.bind(*cp, *cj, *leaves, primal=primal, jvp=rule,
                                        num_consts=(len(cp), len(cj)), name=name)
        return tree_unflatten(out_tree, outs)

    def _traced_rule(self, name, args, statics, dyn, primal, out_tree) -> tuple[Graph, list]:
        """The rule's graph, closure-converted, and the values it closes over. Its recursive calls take
        no such values, so a rule that closes over traced values is traced again with them inlined."""
        self._rules.append(self._signature(args))
        try:
            rule, consts = closure_convert(_trace_rule(self.jvp, name, statics, dyn, primal, out_tree))
            if consts and any(n.prim is P.custom_jvp_call_p and n.params["jvp"] is None for n in rule.nodes):
                self._inline += 1
                try:
                    rule, consts = closure_convert(_trace_rule(self.jvp, name, statics, dyn, primal, out_tree))
                finally:
                    self._inline -= 1
        finally:
            self._rules.pop()
        return rule, consts


def _positional(fun: Callable, args: tuple, kwargs: dict, name: str) -> tuple:
    """Keyword arguments moved to their positions by fun's signature, defaults filled in (as JAX does)."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"custom_jvp function {name}: {e}", user_location()) from None
    if bound.kwargs:
        raise ArgumentError(f"custom_jvp function {name} was called with keyword-only argument(s) "
                            f"{', '.join(bound.kwargs)}; make them ordinary parameters or pass them positionally",
                            user_location())
    bound.apply_defaults()
    return bound.args


def _trace_rule(jvp: Callable, name: str, statics: list, dyn: tuple, primal: Graph, out_tree: PyTreeDef) -> Graph:
    """The rule traced on (args, tangents of the float args) -> outs + tangents of the float outs; the
    integer arguments' tangents are zeros. JAX's TypeErrors for a rule whose output does not fit."""
    in_avals = primal.in_avals
    floats = [dtypes.is_float(a.dtype) for a in in_avals]
    dyn_tree = tree_flatten(dyn)[1]
    n = len(in_avals)

    def flat_rule(*flat):
        it = iter(flat[n:])
        ts = [next(it) if f else P.full(a.shape, 0, a.dtype) for a, f in zip(in_avals, floats)]
        res = jvp(*statics, tree_unflatten(dyn_tree, flat[:n]), tree_unflatten(dyn_tree, ts))
        if not isinstance(res, (tuple, list)) or len(res) != 2:
            raise TypeError(f"Custom JVP rule of {name} must return a pair (primal_out, tangent_out), got "
                            f"{type(res).__name__}")
        outs, out_t = tree_flatten(res[0]), tree_flatten(res[1])
        if outs[1] != out_tree or out_t[1] != out_tree:
            raise TypeError(f"Custom JVP rule of {name} must produce primal and tangent outputs with the "
                            f"structure of {name}'s output {out_tree}, got {outs[1]} and {out_t[1]}")
        return list(outs[0]) + _tangents_out(outs[0], out_t[0], primal, name)

    avals = list(in_avals) + [a for a, f in zip(in_avals, floats) if f]
    return trace_flat(flat_rule, [ShapedArray(a.shape, a.dtype, a.weak_type) for a in avals])


def _tangents_out(outs: list, tangents: list, primal: Graph, name: str) -> list:
    """The rule's tangents of the float outputs, in their dtypes; shapes must match (TypeError, as JAX)."""
    result = []
    for i, (o, t, v) in enumerate(zip(outs, tangents, primal.outputs)):
        want = v.aval
        if tuple(np.shape(o)) != want.shape or np.result_type(o.dtype if hasattr(o, "dtype") else o) != want.dtype:
            raise TypeError(f"Custom JVP rule of {name} returned a primal output {i} of shape {np.shape(o)} "
                            f"and dtype {getattr(o, 'dtype', type(o).__name__)}, but {name} returns "
                            f"{want.str_short()}")
        if not dtypes.is_float(want.dtype):
            continue
        if tuple(np.shape(t)) != want.shape:
            raise TypeError(f"Custom JVP rule of {name} must produce primal and tangent outputs with "
                            f"corresponding shapes, got {want.str_short()} and a tangent of shape {np.shape(t)} "
                            f"(output {i})")
        result.append(P.convert_element_type(t, want.dtype) if hasattr(t, "dtype")
                      else np.asarray(t, want.dtype))
    return result


def _install_numpy_rules() -> None:
    """ember.numpy's functions whose derivatives are custom rules (a layer below this one, they cannot
    make them): det's adjugate JVP, as JAX's (finite and exact at singular matrices)."""
    from ember.numpy import linalg

    det = custom_jvp(linalg._det_by_lu)
    det.defjvp(linalg._det_lu_jvp)
    linalg.det_with_adjugate_jvp = det


_install_numpy_rules()
