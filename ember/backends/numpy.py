"""The reference backend: runs a graph with each primitive's numpy rule.

It is the oracle every optimized or compiled path is tested against. `compile` generates one
straight-line Python function per graph (one call per node, values in local variables, released
with `del` where the memory plan frees them), so a call costs one Python frame rather than an interpreter loop;
`NumpyExecutable.source` shows that code.
"""

from __future__ import annotations

import functools

import numpy as np

from ember.passes.memory import Plan, plan_memory
from ember.tracer import prims as P
from ember.tracer.ir import Graph, Literal, Var
from ember.tracer.primitive import impl_rules

# Tests set this to check every node's result against its aval (shape and dtype).
CHECK = False

# Prims whose numpy reference may return a view of an operand (or the operand itself): such graph
# outputs are copied before they reach the caller.
VIEW_PRIMS = frozenset({P.broadcast_in_dim_p, P.reshape_p, P.transpose_p, P.slice_p, P.rev_p, P.iota_p,
                        P.stop_gradient_p})


def _may_view(node, v) -> bool:
    """Whether `node`'s output `v` may be a view of another array (a fusion's, when its body makes it so)."""
    if node.prim is not P.fusion_p:
        return node.prim in VIEW_PRIMS
    body = node.params["body"]
    out = body.outputs[node.outputs.index(v)]
    inner = next((n for n in body.nodes if out in n.outputs), None)
    return inner is None or _may_view(inner, out)


class NumpyExecutable:
    """A graph compiled to a Python function over NumPy arrays."""

    def __init__(self, graph: Graph, plan: Plan | None = None, check: bool | None = None):
        self.graph = graph
        plan = plan if plan is not None else plan_memory(graph)
        external = set(graph.inputs) | set(graph.consts)
        self.check = CHECK if check is None else check
        namespace: dict = {"_array": np.array, "_asarray": np.asarray, "_check": _check}
        names: dict[Var, str] = {}
        lines = []
        args = []
        for i, v in enumerate(graph.inputs):
            names[v] = f"a{i}"
            args.append(names[v])
        for i, (v, val) in enumerate(zip(graph.consts, graph.const_values)):
            names[v] = f"c{i}"
            namespace[names[v]] = val
        literals: dict[tuple, str] = {}

        def ref(a) -> str:
            if isinstance(a, Literal):
                key = a.key
                if key not in literals:
                    literals[key] = f"l{len(literals)}"
                    namespace[literals[key]] = a.val
                return literals[key]
            return names[a]

        for j, node in enumerate(graph.nodes):
            fn = impl_rules[node.prim]
            namespace[f"f{j}"] = functools.partial(fn, **node.params) if node.params else fn
            outs = []
            for k, v in enumerate(node.outputs):
                names[v] = f"v{j}_{k}" if node.prim.multiple_results else f"v{j}"
                outs.append(names[v])
            target = ", ".join(outs) + ("," if node.prim.multiple_results and len(outs) == 1 else "")
            call = f"f{j}({', '.join(ref(a) for a in node.inputs)})"
            if node.prim.multiple_results and not outs:
                target = "_"
            lines.append(f"    {target} = {call}  # {node.prim.name} {node.loc or ''}".rstrip())
            if self.check:
                namespace[f"n{j}"] = node
                result = f"({target})" if node.prim.multiple_results else target
                lines.append(f"    _check(n{j}, {result})")
            dead = [names[v] for v in plan.frees[j] if v not in external]  # the caller holds inputs
            if dead:
                lines.append(f"    del {', '.join(dead)}")
        # Outputs that may alias an input, a const or a read-only view, or that repeat an earlier
        # output, are copied: the caller owns every array it gets back.
        producer = {v: node for node in graph.nodes for v in node.outputs}
        rets = []
        for i, a in enumerate(graph.outputs):
            copy = (isinstance(a, Literal) or a in external or (a in producer and _may_view(producer[a], a))
                    or a in graph.outputs[:i])
            rets.append(f"{'_array' if copy else '_asarray'}({ref(a)})")
        lines.append(f"    return [{', '.join(rets)}]")
        self.source = f"def run({', '.join(args)}):\n" + "\n".join(lines) + "\n"
        exec(compile(self.source, "<ember numpy graph>", "exec"), namespace)  # noqa: S102 - our own code
        self._run = namespace["run"]
        self._n_inputs = len(graph.inputs)

    def __call__(self, *args) -> list[np.ndarray]:
        if len(args) != self._n_inputs:
            raise TypeError(f"the executable takes {self._n_inputs} arrays, got {len(args)}")
        return self._run(*args)


def _check(node, res):
    results = res if node.prim.multiple_results else (res,)
    for v, r in zip(node.outputs, results):
        r = np.asarray(r)
        if r.shape != v.aval.shape or r.dtype != v.aval.dtype:
            raise AssertionError(f"numpy rule of {node.prim.name} (at {node.loc}) returned "
                                 f"{r.dtype}{list(r.shape)}, its aval is {v.aval.str_short()}")


class NumpyBackend:
    name = "numpy"

    def compile(self, graph: Graph, plan: Plan | None = None) -> NumpyExecutable:
        return NumpyExecutable(graph, plan)


BACKEND = NumpyBackend()
