"""The optimization pipeline: `optimize(graph, donate) -> (Graph, Plan)`.

Lowering always runs: `inline` first (backends never see custom_vjp_call) and `memory` last (a plan
is always computed). Between them the optimizations in PASSES run unless switched off by name
(`disable_passes`) or all at once (`optimize=False` on jit, which disables every OPTIONAL pass).
Each pass is recorded as the stage "after <name>", with the refusals it recorded (explain.py); only
"after memory" carries the plan (the stages before memory planning have `plan=None`). `inplace` is
not a graph pass but the memory plan's buffer-reuse decision: disabling it leaves the naive plan.
Every pass but memory also runs on the bodies of control flow (passes/bodies.py); backends plan a
body's memory when they compile it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from ember.passes.bodies import hoist, prune_loops, recursive
from ember.passes.cse import cse
from ember.passes.dce import dce
from ember.passes.explain import collecting
from ember.passes.fusion import fusion
from ember.passes.inline import inline
from ember.passes.memory import Plan, plan_memory
from ember.passes.simplify import simplify
from ember.passes.stages import record
from ember.tracer.ir import Graph, verified

# The optimizations, in order; `inplace` is an accepted name before it exists.
# Each runs on control-flow bodies too (innermost first); `hoist` moves loop-invariant work out of them.
PASSES: list[tuple[str, Callable[[Graph], Graph]]] = [
    ("simplify", recursive(simplify)),
    ("cse", recursive(cse)),
    ("hoist", recursive(hoist)),
    ("dce", recursive(lambda g: dce(prune_loops(dce(g))))),
    ("fusion", recursive(fusion)),
]
OPTIONAL = ("simplify", "cse", "hoist", "dce", "fusion", "inplace")


def check_pass_names(disable_passes: Iterable[str]) -> tuple[str, ...]:
    """`disable_passes` as a tuple, or a ValueError naming the unknown names and the valid ones."""
    names = (disable_passes,) if isinstance(disable_passes, str) else tuple(disable_passes)
    unknown = [n for n in names if n not in OPTIONAL]
    if unknown:
        raise ValueError(f"disable_passes names unknown passes {unknown}; the passes that can be disabled "
                         f"are {list(OPTIONAL)} (inline and memory always run)")
    return names


def disabled_passes(optimize: bool = True, disable_passes: Iterable[str] = ()) -> tuple[str, ...]:
    """The passes jit's switches turn off: every optional one when `optimize` is False, else those named
    by `disable_passes` and by the environment (`EMBER_DISABLE_PASSES=cse,dce`, to bisect a result
    without editing code)."""
    names = check_pass_names(disable_passes)
    env = [n.strip() for n in os.environ.get("EMBER_DISABLE_PASSES", "").split(",") if n.strip()]
    try:
        names += tuple(n for n in check_pass_names(env) if n not in names)
    except ValueError as e:
        raise ValueError(f"EMBER_DISABLE_PASSES: {e}") from None
    return OPTIONAL if not optimize else names


def stage_names(disable_passes: Iterable[str] = ()) -> list[str]:
    """The stages `optimize` records with these passes disabled, in order."""
    off = set(check_pass_names(disable_passes))
    return ["after inline"] + [f"after {n}" for n, _ in PASSES if n not in off] + ["after memory"]


def _run(name: str, fn: Callable[[Graph], Graph], graph: Graph) -> Graph:
    with collecting() as refusals:
        graph = verified(fn(graph))
    record(f"after {name}", graph, refusals=refusals)
    return graph


def optimize(graph: Graph, donate: Iterable[int] = (), disable_passes: Iterable[str] = ()) -> tuple[Graph, Plan]:
    """Run the pipeline on `graph` (`donate`: flat input indices the plan may overwrite)."""
    off = set(check_pass_names(disable_passes))
    graph = _run("inline", recursive(inline), graph)
    for name, fn in PASSES:
        if name not in off:
            graph = _run(name, fn, graph)
    with collecting() as refusals:
        plan = plan_memory(graph, donate, inplace="inplace" not in off)
    record("after memory", graph, plan=plan, refusals=refusals)
    return graph, plan
