"""debug_nans / debug_infs: find the node that first produced a NaN or an infinity.

`Checked` wraps every compiled Executable. While `ember.config.debug_nans` (or `debug_infs`) is on, an
output holding a NaN (inf) that no input or closed-over array held makes it rerun the unoptimized
graph (constant folding could have moved a NaN into a const) node by node on the numpy rules and
raise FloatingPointError (as JAX's jax_debug_nans does) naming the first node whose result has one
while its array operands had none: its primitive, the user's line, and whether it belongs to the
forward or the backward (gradient) pass. A literal NaN in the program counts as made by its node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import ember.config as config
from ember.tracer.ir import Graph, Node, Var
from ember.tracer.primitive import impl_rules

# what is looked for: config attribute -> (name in messages, test of one array)
_KINDS: dict[str, tuple[str, Callable[[np.ndarray], bool]]] = {
    "debug_nans": ("nan", lambda x: bool(np.isnan(x).any())),
    "debug_infs": ("inf", lambda x: bool(np.isinf(x).any())),
}
_PASS_OF_ROLE = {"backward": "the backward pass (the gradient computation)", "active": "the forward pass",
                 "inactive": "the forward pass"}


class Checked:
    """An Executable that checks its outputs for new NaNs/infs while the debug options are on."""

    __slots__ = ("executable", "source_graph")

    def __init__(self, executable, source: Graph):
        self.executable = executable
        self.source_graph = source  # before optimization: the user's nodes and consts

    def __call__(self, *args) -> list:
        outs = self.executable(*args)
        if config.debug_nans or config.debug_infs:
            check(self.source_graph, args, outs)
        return outs

    def __getattr__(self, name):  # the backend's extras (e.g. `source`)
        return getattr(self.executable, name)


def _has(test, values: Sequence) -> bool:
    return any(test(v) for v in map(np.asarray, values) if v.dtype.kind in "fc")


def check(graph: Graph, args: Sequence, outs: Sequence) -> None:
    """Raise FloatingPointError if `outs` hold a NaN (inf) that `args` and `graph`'s consts did not."""
    for attr, (kind, test) in _KINDS.items():
        if getattr(config, attr) and _has(test, outs) and not _has(test, list(args) + list(graph.const_values)):
            raise _culprit_error(graph, args, kind, test)


def _culprit_error(graph: Graph, args: Sequence, kind: str, test) -> FloatingPointError:
    node = first_producer(graph, args, test)
    if node is None:
        return FloatingPointError(
            f"invalid value ({kind}) in the output of a compiled function, but rerunning its graph on the numpy "
            f"backend produced none: the backend's code differs from the numpy reference (please report it)")
    where = f" at {node.loc}" if node.loc else ""
    part = _PASS_OF_ROLE.get(node.role)
    part = f", in {part}" if part else ""
    option = "ember_debug_nans" if kind == "nan" else "ember_debug_infs"
    return FloatingPointError(
        f"invalid value ({kind}) encountered in {node.prim.name}{where}{part}: its operands held no {kind}, "
        f"its result does. (Raised because {option} is on; ember.config.update({option!r}, False) turns "
        "the check off.)")


def first_producer(graph: Graph, args: Sequence, test) -> Node | None:
    """Rerun `graph` node by node with the numpy rules; the first node whose result passes `test`
    while its array operands (Vars: arguments, consts, earlier results) do not."""
    env: dict[Var, object] = dict(zip(graph.inputs, args))
    env.update(zip(graph.consts, graph.const_values))
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            ins = [env[a] if isinstance(a, Var) else a.val for a in node.inputs]
            out = impl_rules[node.prim](*ins, **node.params)
            outs = list(out) if node.prim.multiple_results else [out]
            env.update(zip(node.outputs, outs))
            if _has(test, outs) and not _has(test, [env[a] for a in node.inputs if isinstance(a, Var)]):
                return node
    return None
