"""debug_nans / debug_infs: find the node that first produced a NaN or an infinity; check_oracle:
compare every compiled call with the oracle.

`Checked` wraps every compiled Executable. While `ember.config.debug_nans` (or `debug_infs`) is on, an
output holding a NaN (inf) that no input or closed-over array held makes it rerun the unoptimized
graph (constant folding could have moved a NaN into a const) node by node on the numpy rules and
raise FloatingPointError (as JAX's jax_debug_nans does) naming the first node whose result has one
while its array operands had none: its primitive, the user's line, and whether it belongs to the
forward or the backward (gradient) pass. A literal NaN in the program counts as made by its node.

While `ember.config.check_oracle` is on, each call also runs the oracle (the graph before optimization
with the naive plan on the numpy backend) on copies of the inputs, and raises AssertionError when an
output differs (beyond a tight tolerance for floats), an input that was not donated changed, or an
output shares memory with another output or an input; given `out=` arrays, the executable must also
return exactly those arrays. An executable that is itself the oracle is not checked.

While no option is on, callers may run `Checked.unchecked` instead (jit's hit path does): the
executable itself, or the wrapper when donated arguments must first be unshared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

import ember.config as config
from ember.backends.device_arrays import is_device_array, to_host
from ember.backends.device_arrays import overlap as device_overlap
from ember.tracer.ir import Graph, Node, Var
from ember.tracer.primitive import impl_rules

if TYPE_CHECKING:
    from ember.passes.memory import Plan

# what is looked for: config attribute -> (name in messages, test of one array)
_KINDS: dict[str, tuple[str, Callable[[np.ndarray], bool]]] = {
    "debug_nans": ("nan", lambda x: bool(np.isnan(x).any())),
    "debug_infs": ("inf", lambda x: bool(np.isinf(x).any())),
}
_PASS_OF_ROLE = {"backward": "the backward pass (the gradient computation)", "active": "the forward pass",
                 "inactive": "the forward pass"}


# float tolerances of the oracle check: relative, and absolute times the output's largest magnitude
ORACLE_RTOL = {np.dtype(np.float16): 4e-3, np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-11}


def unshare_donated(args: Sequence, donated: frozenset) -> Sequence:
    """`args` with each donated array that may share memory with another argument copied: the plan
    may overwrite a donated buffer, and the same array passed again undonated must keep its values."""
    for i in donated:
        if is_device_array(args[i]):
            if any(j != i and device_overlap(args[i], a) for j, a in enumerate(args)):
                args = list(args)
                args[i] = args[i].copy()
        elif any(j != i and np.may_share_memory(args[i], a) for j, a in enumerate(args)):
            args = list(args)
            args[i] = np.array(args[i], copy=True)
    return args




class Checked:
    """An Executable that checks its outputs for new NaNs/infs while the debug options are on, and
    against the oracle while check_oracle is on. `oracle_plan` gives the naive plan of `source` (the
    caller plans memory, not the backends), asked for at the first oracle check."""

    __slots__ = ("executable", "source_graph", "donated", "name", "is_oracle", "oracle_plan", "_oracle", "unchecked")

    def __init__(self, executable, source: Graph, donated: Sequence[int] = (), name: str = "a compiled function",
                 is_oracle: bool = False, oracle_plan: Callable[[], Plan] | None = None):
        self.executable = executable
        self.source_graph = source  # before optimization: the user's nodes and consts
        self.donated = frozenset(donated)
        self.name = name
        self.is_oracle = is_oracle  # the source graph with the naive plan on the numpy backend
        self.oracle_plan = oracle_plan
        self._oracle = None
        # what a caller may run instead while no check option is on (jit's hit path): the executable
        # itself, unless donated arguments must first be unshared
        self.unchecked = self if self.donated else executable

    def __call__(self, *args, out: list | None = None) -> list:
        """The executable's outputs (written into `out` and returned, when given), checked as the
        options say."""
        if self.donated:
            args = unshare_donated(args, self.donated)
        if config.check_oracle and not self.is_oracle:
            return self._call_checked(args, out)
        outs = self._run(args, out)
        if config.debug_nans or config.debug_infs:
            check(self.source_graph, args, outs)
        return outs

    def _run(self, args, out) -> list:
        return self.executable(*args) if out is None else self.executable(*args, out=out)

    def _call_checked(self, args, out) -> list:
        saved = [np.array(to_host(a), copy=True) for a in args]
        outs = self._run(args, out)
        if out is not None and (len(outs) != len(out) or any(o is not given for o, given in zip(outs, out))):
            raise AssertionError(f"{self.name}: given out= arrays, the executable returned other arrays")
        if config.debug_nans or config.debug_infs:
            check(self.source_graph, args, outs)
        if self._oracle is None:
            from ember.backends.numpy import NumpyExecutable

            if self.oracle_plan is None:
                raise ValueError(f"{self.name}: check_oracle is on, but the executable was wrapped without "
                                 "oracle_plan (the naive plan of its source graph)")
            self._oracle = NumpyExecutable(self.source_graph, self.oracle_plan(), check=False)
        with np.errstate(all="ignore"):
            expected = self._oracle(*saved)  # the naive plan writes no input
        check_against_oracle(self.name, args, saved, outs, expected, self.donated)
        return outs

    def __getattr__(self, name):  # the backend's extras (e.g. `source`)
        return getattr(self.executable, name)


def check_against_oracle(name: str, args: Sequence, saved: Sequence, outs: Sequence, expected: Sequence,
                         donated=frozenset()) -> None:
    """AssertionError unless `outs` equal the oracle's `expected`, every argument not `donated` equals
    its copy `saved` before the call (bit for bit), and no output aliases another output or an input."""
    if len(outs) != len(expected):
        raise AssertionError(f"{name}: the optimized code returned {len(outs)} outputs, the oracle {len(expected)}")
    for k, (got, want) in enumerate(zip(outs, expected)):
        _compare(name, k, to_host(got), np.asarray(want))
    for i, (a, s) in enumerate(zip(args, saved)):
        a = to_host(a)
        if i not in donated and (a.dtype != s.dtype or a.shape != s.shape or a.tobytes() != s.tobytes()):
            raise AssertionError(f"{name}: input {i} was written by the optimized code but is not donated")
    arrays = [o for o in outs if isinstance(o, np.ndarray) and o.size]
    inputs = [a for a in args if isinstance(a, np.ndarray) and a.size]
    for k, o in enumerate(arrays):
        for what, others in (("an input", inputs), ("an earlier output", arrays[:k])):
            if any(np.may_share_memory(o, x) and np.shares_memory(o, x) for x in others):
                raise AssertionError(f"{name}: output {k} shares memory with {what}")


def _compare(name: str, k: int, got: np.ndarray, want: np.ndarray) -> None:
    where = f"{name}: output {k} of the optimized code differs from the oracle (optimize=False, numpy backend)"
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"{where}: {got.dtype}{list(got.shape)} instead of {want.dtype}{list(want.shape)}")
    if want.dtype.kind not in "fc":
        if not np.array_equal(got, want):
            bad = int(np.count_nonzero(got != want))
            raise AssertionError(f"{where}: {bad} of {want.size} elements differ (exact comparison)")
        return
    nan, inf = np.isnan(want), np.isinf(want)
    if not np.array_equal(np.isnan(got), nan):
        raise AssertionError(f"{where}: NaN in {int(np.count_nonzero(np.isnan(got) != nan))} other places")
    if not np.array_equal(np.where(inf, want, 0), np.where(np.isinf(got), got, 0)):
        raise AssertionError(f"{where}: infinities differ (position or sign)")
    fin = ~(nan | inf)
    g, w = got[fin].astype(np.float64), want[fin].astype(np.float64)
    rtol = ORACLE_RTOL.get(want.dtype, 1e-11)
    scale = max(1.0, float(np.abs(w).max(initial=0.0)))
    err = np.abs(g - w)
    if (err > rtol * (np.abs(w) + scale)).any():
        raise AssertionError(f"{where}: max error {err.max():.3g} (largest magnitude {scale:.3g}); the tolerance "
                             f"is {rtol:g} relative to each element plus the largest magnitude")


def _has(test, values: Sequence) -> bool:
    return any(test(v) for v in map(to_host, values) if v.dtype.kind in "fc")


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
