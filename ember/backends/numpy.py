"""The reference backend: interprets a graph node by node with each primitive's numpy rule.

It is the oracle every optimized or compiled path is tested against. `compile` turns the graph into
a flat list of steps over numbered slots, so a call costs one Python loop over the nodes; slots are
released after their last use.
"""

from __future__ import annotations

import numpy as np

from ember.tracer.ir import Graph, Literal, Var
from ember.tracer.primitive import impl_rules, view_prims

# Tests set this to check every node's result against its aval (shape and dtype).
CHECK = False


class NumpyExecutable:
    """A graph prepared for repeated interpretation."""

    def __init__(self, graph: Graph, check: bool | None = None):
        self.graph = graph
        self.check = CHECK if check is None else check
        slot: dict[Var, int] = {}
        template: list = []

        def new_slot(value=None) -> int:
            template.append(value)
            return len(template) - 1

        for v in graph.inputs:
            slot[v] = new_slot()
        for v, val in zip(graph.consts, graph.const_values):
            slot[v] = new_slot(val)
        lit_slots: dict[tuple, int] = {}

        def atom_slot(a) -> int:
            if isinstance(a, Literal):
                key = (a.value, a.aval.dtype)
                if key not in lit_slots:
                    lit_slots[key] = new_slot(a.val)
                return lit_slots[key]
            return slot[a]

        steps = []
        for node in graph.nodes:
            ins = tuple(atom_slot(a) for a in node.inputs)
            outs = tuple(new_slot() for _ in node.outputs)
            for v, s in zip(node.outputs, outs):
                slot[v] = s
            steps.append((impl_rules[node.prim], ins, outs, dict(node.params), node))
        self._outputs = tuple(atom_slot(a) for a in graph.outputs)
        self._n_inputs = len(graph.inputs)
        self._template = template

        # Release a slot after its last reader (inputs and consts are never released).
        last_use: dict[int, int] = {}
        for i, (_, ins, _, _, _) in enumerate(steps):
            for s in ins:
                last_use[s] = i
        keep = set(range(len(graph.inputs) + len(graph.consts))) | set(lit_slots.values()) | set(self._outputs)
        frees: list[list[int]] = [[] for _ in steps]
        for s, i in last_use.items():
            if s not in keep:
                frees[i].append(s)
        self._steps = [(fn, ins, outs[0] if len(outs) == 1 and not node.prim.multiple_results else outs,
                        params, tuple(frees[i]), node) for i, (fn, ins, outs, params, node) in enumerate(steps)]
        # Outputs that may alias an input, a const or a read-only view get copied on the way out.
        producer = {v: node for node in graph.nodes for v in node.outputs}
        external = set(graph.inputs) | set(graph.consts)
        self._copy_out = tuple(
            isinstance(a, Literal) or a in external or (a in producer and producer[a].prim in view_prims)
            or a in graph.outputs[:i]  # the same value returned twice: each output gets its own array
            for i, a in enumerate(graph.outputs))

    def __call__(self, *args) -> list[np.ndarray]:
        env = self._template.copy()
        env[:self._n_inputs] = args
        check = self.check
        for fn, ins, out, params, frees, node in self._steps:
            res = fn(*[env[i] for i in ins], **params)
            if type(out) is int:
                env[out] = res
            else:
                for s, r in zip(out, res):
                    env[s] = r
            if check:
                _check(node, res)
            for s in frees:
                env[s] = None
        return [np.array(env[s]) if copy else np.asarray(env[s])
                for s, copy in zip(self._outputs, self._copy_out)]


def _check(node, res):
    results = res if node.prim.multiple_results else (res,)
    for v, r in zip(node.outputs, results):
        r = np.asarray(r)
        if r.shape != v.aval.shape or r.dtype != v.aval.dtype:
            raise AssertionError(f"numpy rule of {node.prim.name} (at {node.loc}) returned "
                                 f"{r.dtype}{list(r.shape)}, its aval is {v.aval.str_short()}")


class NumpyBackend:
    name = "numpy"

    def compile(self, graph: Graph, plan=None) -> NumpyExecutable:
        return NumpyExecutable(graph)


BACKEND = NumpyBackend()
