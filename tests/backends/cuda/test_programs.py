"""Whole programs on the CUDA backend, run as host C++ (cuda-host) against the oracle.

The seed workloads (forward, grad and vmap(grad) at small sizes, float64 and float32), a derandomized
sample of the random programs of tests/test_random_programs.py (forward and grad), and plans that write
in place or into donated inputs are lowered by `ember.jit(f).lower(...)` (the optimized graph and its
plan), compiled together by `compile_many` (one g++ build for the module) and compared with the oracle
(`ember.jit(f, backend="numpy", optimize=False)`) by the oracle check's own comparison: its tolerances,
inputs not donated unchanged bit for bit, no output sharing memory with an input or another output.
One executable is called twice and from two threads at once, and the module's source compiles to one
sm_90 cubin through NVRTC. tests/backends/cuda/test_device_programs.py runs the same cases on a GPU.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import ember
import ember.numpy as enp
from benchmarks.frameworks import Ember
from benchmarks.workloads import cosine, dead_gradient, dense_bias_act, eam, per_sample
from ember.backends.debug import check_against_oracle
from ember.tree import tree_flatten
from tests.test_random_programs import EMBER, GENERATED, JUMP, Program, _Guard, _inputs, _losses, programs, run

OPS = Ember("numpy").ops
RANDOM_PROGRAMS = 34  # the sample of random programs (each run forward and as a gradient)
DTYPES = (np.float64, np.float32)


@dataclass
class Case:
    """A function and its arguments; `donate`: donate_argnums (positional, each a single array);
    `disable`: passes switched off (without fusion, most elementwise nodes are written in place)."""

    name: str
    fn: object
    args: tuple
    donate: tuple = ()
    disable: tuple = ()
    graph: object = field(default=None, repr=False)
    plan: object = field(default=None, repr=False)
    expected: list = field(default_factory=list, repr=False)

    @property
    def flat_args(self) -> list:
        return tree_flatten(self.args)[0]

    def lower(self) -> Case:
        """The optimized graph and plan, and the oracle's flat outputs (from copies of the arguments)."""
        low = ember.jit(self.fn, donate_argnums=self.donate, disable_passes=self.disable).lower(*self.args)
        self.graph, self.plan = low.optimized, low.stages[-1].plan
        oracle = ember.jit(self.fn, backend="numpy", optimize=False)
        with np.errstate(all="ignore"):
            self.expected = [np.asarray(o) for o in tree_flatten(oracle(*_copies(self.args)))[0]]
        return self


def _copies(args):
    return tuple(tuple(np.copy(a) for a in x) if isinstance(x, tuple) else np.copy(x) for x in args)


# --- the cases --------------------------------------------------------------------------------------

def workload_cases() -> list[Case]:
    """The benchmarked functions of the seed workloads, at small sizes, in float64 and float32."""
    rng = np.random.default_rng(1)
    out = []
    for dt in DTYPES:
        t = np.dtype(dt).name
        x, xs = rng.random(100).astype(dt), rng.random((5, 40)).astype(dt)
        energy = lambda v: eam.eam(OPS, v)  # noqa: E731
        out += [Case(f"eam-forward-{t}", energy, (x,)), Case(f"eam-grad-{t}", ember.grad(energy), (x,)),
                Case(f"eam-vmap-grad-{t}", ember.vmap(ember.grad(energy)), (xs,)),
                Case(f"eam-grad-long-{t}", ember.grad(energy), (rng.random(60000).astype(dt),))]  # two-stage sum
        w, xd, b = dense_bias_act.inputs(12, dt, seed=2)
        dense = lambda w, x, b: dense_bias_act.loss(OPS, w, x, b)  # noqa: E731
        out += [Case(f"dense-forward-{t}", dense, (w, xd, b)),
                Case(f"dense-grad-{t}", ember.grad(dense, argnums=(0, 1, 2)), (w, xd, b))]
        a, bb, weights = cosine.inputs(dict(B=2, R=3, N=4, W=8), dt)
        out += [Case(f"cosine-forward-{t}", lambda a, b: cosine.cosine_vectorized(OPS, a, b), (a, bb)),
                Case(f"cosine-grad-{t}", ember.grad(cosine.loss_fn(cosine.cosine_vectorized, OPS, weights),
                                                    argnums=(0, 1)), (a, bb))]
        if dt == np.float32:  # the naive loops (two updates: 60 launches), in one dtype
            a1, b1, w1 = cosine.inputs(dict(B=1, R=1, N=2, W=4), dt, seed=3)
            out.append(Case(f"cosine-naive-grad-{t}", ember.grad(cosine.loss_fn(cosine.cosine_naive, OPS, w1),
                                                                 argnums=(0, 1)), (a1, b1)))
        params = tuple(p.astype(dt) for p in per_sample.init_params(sizes=(6, 8, 8, 3)))
        batch = rng.standard_normal((7, 6)).astype(dt)
        for act in per_sample.ACTIVATIONS:
            loss = lambda p, x, act=act: OPS.sum(per_sample.mlp(OPS, p, x, act))  # noqa: E731
            out.append(Case(f"mlp-{act}-vmap-grad-{t}", ember.vmap(ember.grad(loss), in_axes=(None, 0)),
                            (params, batch)))
            if act == "tanh":  # one mean gradient (the CI budget); both activations batched
                out.append(Case(f"mlp-{act}-mean-grad-{t}", ember.grad(lambda p, x, loss=loss: loss(p, x) / 7.0),
                                (params, batch)))
        p, c = rng.random(50).astype(dt), rng.random(50).astype(dt)
        onehot = np.zeros(50, dt)
        onehot[3] = 1
        for k, variant in enumerate(dead_gradient.VARIANTS):
            model = dead_gradient.model(variant)
            out.append(Case(f"dead-gradient-{k}-{t}", ember.grad(lambda p, c, h, m=model: OPS.sum(m(OPS, p, c, h))),
                            (p, c, onehot)))
    return out


@functools.cache
def sample_programs(n: int = RANDOM_PROGRAMS) -> list[Program]:
    """The first `n` distinct programs with at least one op that the derandomized generator draws, and
    then the first one using each op family those miss (so every family is compiled)."""
    seen: list[Program] = []
    extra: dict[str, Program] = {}

    @settings(max_examples=8 * n, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(prog=programs(max_ops=6))
    def collect(prog):
        if not prog.ops or prog in seen:
            return
        if len(seen) < n:
            seen.append(prog)
            return
        reached = {op[0] for p in [*seen, *extra.values()] for op in p.ops}
        for family in {op[0] for op in prog.ops} - reached:
            extra.setdefault(family, prog)

    collect()
    return seen + [p for k, p in enumerate(extra.values()) if p not in list(extra.values())[:k]]


def _usable(prog: Program, inputs) -> bool:
    """Away from jumps (a tie or a tiny divisor could flip between two orders of rounding) and overflow."""
    guard = _Guard()
    with np.errstate(all="ignore"):
        outs = run(EMBER, prog, inputs, guard)
    return guard.status != JUMP and all(np.all(np.isfinite(o)) and np.max(np.abs(o), initial=0) < 1e4
                                        for o in outs)


def random_cases(n: int = RANDOM_PROGRAMS) -> list[Case]:
    """Each sampled program forward, and every third one also as the gradient of sum(outputs * weights)
    w.r.t. every input (the CI budget), alternately in float64 and float32 (programs whose inputs sit
    at a jump are left out)."""
    out = []
    for k, prog in enumerate(sample_programs(n)):
        dt = DTYPES[k % 2]
        inputs = _inputs(prog, k, dt)
        if not _usable(prog, inputs):
            continue
        forward = lambda *xs, prog=prog: run(EMBER, prog, xs)  # noqa: E731
        loss, _ = _losses(prog, forward(*inputs), k)
        out.append(Case(f"random-{k}-forward-{np.dtype(dt).name}", forward, tuple(inputs)))
        if k % 3 == 0:
            out.append(Case(f"random-{k}-grad-{np.dtype(dt).name}",
                            ember.grad(loss, argnums=tuple(range(len(inputs)))), tuple(inputs)))
    return out


def _dense_tanh(x, w):
    h = enp.tanh(x @ w + 1.0)
    return enp.sum(h * h, axis=0), enp.exp(-h)


def _exp_times(x, y):
    return enp.sum(enp.exp(x) * y)


def _tanh_chain(x):
    return enp.sum(enp.sin(enp.tanh(x * 2.0)))


NO_FUSION = ("fusion",)
F32, F64 = np.float32, np.float64
# name -> (fn, argument shapes, dtype, donate_argnums, disabled passes): plans that write in place. A
# donated twin takes its plain case's dtype, so its kernels are the plain case's (no new compile work).
INPLACE = {
    "dense-tanh": (_dense_tanh, ((16, 8), (8, 8)), F32, (), NO_FUSION),
    "dense-tanh-donated-x": (_dense_tanh, ((16, 8), (8, 8)), F32, (0,), NO_FUSION),
    "dense-bias-grad": (ember.grad(lambda w, x, b: dense_bias_act.loss(OPS, w, x, b), argnums=(0, 1, 2)),
                        ((10, 10), (10, 10), (10,)), F64, (), NO_FUSION),
    "dense-bias-grad-donated": (ember.grad(lambda w, x, b: dense_bias_act.loss(OPS, w, x, b), argnums=(0, 1, 2)),
                                ((10, 10), (10, 10), (10,)), F64, (0, 1), NO_FUSION),
    "tanh-backward": (ember.grad(_tanh_chain), ((40, 30),), F32, (), NO_FUSION),
    "exp-donated-x": (_exp_times, ((300,), (300,)), F64, (0,), NO_FUSION),
    "exp-donated-both": (_exp_times, ((300,), (300,)), F64, (0, 1), NO_FUSION),
    "eam-grad-donated": (ember.grad(lambda v: eam.eam(OPS, v)), ((300,),), F64, (0,), NO_FUSION),
}
WRITES_DONATED = ("dense-tanh-donated-x", "exp-donated-x", "exp-donated-both", "eam-grad-donated")


def inplace_cases() -> list[Case]:
    rng = np.random.default_rng(3)
    return [Case(f"inplace-{name}", fn, tuple((rng.standard_normal(s) * 0.5).astype(dt) for s in shapes), donate,
                 disable)
            for name, (fn, shapes, dt, donate, disable) in INPLACE.items()]


def all_cases() -> dict[str, Case]:
    cases = workload_cases() + random_cases() + inplace_cases()
    assert len({c.name for c in cases}) == len(cases)
    return {c.name: c.lower() for c in cases}


# --- running and checking ---------------------------------------------------------------------------

def call_and_check(case: Case, exe, to_device=lambda a: a) -> tuple[list, list]:
    """Call `exe` on `to_device` copies of the case's arguments (fresh copies of the donated ones) and
    check it as the oracle check does; (the arguments given, the outputs returned)."""
    flat = case.flat_args
    args = [to_device(np.copy(a) if i in case.donate else a) for i, a in enumerate(flat)]
    saved = [np.copy(a) for a in flat]
    outs = exe(*args)
    check_against_oracle(case.name, args, saved, outs, case.expected, frozenset(case.donate))
    return args, outs


def writes_input(exe) -> bool:
    """Whether a kernel of `exe`'s program writes into an input's array (a donated buffer reused)."""
    return any(name.startswith("out") and w.kind == "in"
               for r in exe.program.runs for name, (w, _, _) in r.where.items())


@pytest.fixture(scope="module")
def cases() -> dict[str, Case]:
    return all_cases()


@pytest.fixture(scope="module")
def compiled(cases) -> dict:
    from ember.backends.cuda.backend import compile_many

    exes = compile_many([(c.graph, c.plan) for c in cases.values()], device="cuda-host")
    return dict(zip(cases, exes))


def test_the_cases_cover_what_they_claim(cases):
    """The sample reaches every op family, enough of it survives the filter, and the in-place cases
    have in-place plans."""
    assert {op[0] for prog in sample_programs() for op in prog.ops} == set(GENERATED)
    forward = [n for n in cases if n.startswith("random-") and "-forward-" in n]
    assert len(forward) >= 0.9 * len(sample_programs())
    assert sum(n.startswith("random-") and "-grad-" in n for n in cases) >= 0.3 * RANDOM_PROGRAMS
    for name, case in cases.items():
        if name.startswith("inplace-"):
            assert case.plan.inplace, f"{name}: the plan writes nothing in place"


def test_programs_match_the_oracle(cases, compiled):
    """Every case's outputs within the oracle's tolerance, inputs not donated unchanged, no aliasing."""
    failures = []
    for name, case in cases.items():
        try:
            call_and_check(case, compiled[name])
        except Exception as e:  # every case is run; all failures are reported together
            failures.append(f"{name}: {type(e).__name__}: {e}")
    assert not failures, f"{len(failures)} of {len(cases)} programs fail:\n" + "\n".join(failures)


def test_donated_inputs_are_written_in_place(cases, compiled):
    """The donated cases really write into an input's array (so the check above covered it)."""
    names = [f"inplace-{n}" for n in WRITES_DONATED]
    assert all(cases[n].donate for n in names)
    assert [n for n in names if not writes_input(compiled[n])] == []


TWICE = ("eam-grad-float64", "dense-grad-float32", "mlp-tanh-vmap-grad-float32", "inplace-dense-tanh")


@pytest.mark.parametrize("name", TWICE)
def test_called_twice_gives_the_same_results(cases, compiled, name):
    case, exe = cases[name], compiled[name]
    first = [np.copy(o) for o in call_and_check(case, exe)[1]]
    _, second = call_and_check(case, exe)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


CALLS = 6  # per thread


def two_threads_match_alone(exe, inputs: list, to_host) -> None:
    """Two threads call `exe` at once, each on its own inputs, CALLS times: every result equals, bit for
    bit, that input's result from a call alone (so the threads never shared a workspace)."""
    alone = [[to_host(o) for o in exe(*args)] for args in inputs]
    start = threading.Barrier(2)
    got: list = [[], []]

    def work(k):
        start.wait()
        for _ in range(CALLS):
            got[k].append([to_host(o) for o in exe(*inputs[k])])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not np.array_equal(alone[0][0], alone[1][0])
    for k in range(2):
        assert len(got[k]) == CALLS
        for outs in got[k]:
            for a, b in zip(outs, alone[k]):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ("eam-grad-float64", "dense-grad-float32"))
def test_two_threads_at_once_use_their_own_workspaces(cases, compiled, name):
    """Two threads call one executable at once on different inputs, each many times: each gets its
    own inputs' results, bit for bit those of a call alone."""
    case, exe = cases[name], compiled[name]
    assert exe.program.workspace_bytes > 0
    rng = np.random.default_rng(5)
    inputs = [case.flat_args, [(a + 0.25 * rng.random(a.shape)).astype(a.dtype) for a in case.flat_args]]
    two_threads_match_alone(exe, inputs, np.copy)


def test_all_compile_to_one_sm90_cubin(compiled):
    from ember.backends.cuda import nvrtc
    from ember.backends.cuda.prelude import DEVICE_PRELUDE

    exes = list(compiled.values())
    assert all(e.source is exes[0].source for e in exes)
    assert nvrtc.compile_cubin(DEVICE_PRELUDE + exes[0].source, "sm_90")
