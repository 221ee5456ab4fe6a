"""Control flow on the CUDA backends: cond, while and scan run by the host over device bodies.

Every program of tests/backends/control_cases.py, a few here that reach the runners' other paths
(slices staged where a view would misalign vector accesses, wide slices passed as views, loop
operands and results all in the workspace so their argument lists are prepared once, a carry passed
through, zero-trip loops, a scan of one step), and some under grad and vmap (lowered by jit: reverse
scans over stacked residuals, a batched while), is compiled with its plan into one module
(`compile_many`: one g++ build) and checked against its Python-loop reference (the transformed ones
against the numpy backend) for a few seeds, its inputs unchanged and its outputs fresh arrays. The
same runs on a GPU with CuPy arrays in and out.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cuda import control
from ember.backends.cuda.backend import compile_many
from ember.backends.cuda.executable import _ControlStep
from ember.backends.cuda.program import ControlRun
from ember.backends.device_arrays import overlap, to_host
from ember.passes.memory import plan_memory
from ember.tracer.aval import ShapedArray
from ember.tracer.trace import trace_flat
from ember.tree import tree_flatten
from tests.backends import control_cases as C

F = "float32"


def _staged(c, xs):
    return lax.scan(lambda c, x: (c + x, c * x), c, xs)


def _staged_ref(c, xs):
    ys = []
    for x in xs:
        ys.append(c * x)
        c = c + x
    return c, np.array(ys, np.float32)


def _in_workspace(x, xs):
    c, ys = lax.scan(lambda c, x: (c * 0.5 + x, c - x), x * 1.0, xs * 2.0, reverse=True)
    return c + 1.0, ys * 3.0


def _in_workspace_ref(x, xs):
    c, ys = x, np.empty_like(xs)
    for i in range(len(xs) - 1, -1, -1):
        ys[i] = c - xs[i] * np.float32(2.0)
        c = c * np.float32(0.5) + xs[i] * np.float32(2.0)
    return c + np.float32(1.0), ys * np.float32(3.0)


def _passthrough(a, b, xs):
    return lax.scan(lambda c, x: ((c[0], c[1] + x), c[0]), (a, b), xs)


def _passthrough_ref(a, b, xs):
    ys = []
    for x in xs:
        ys.append(a)
        b = b + x
    return a, b, np.array(ys, np.float32)


def _while_never(x):
    return lax.while_loop(lambda c: jnp.sum(c) > 1e30, lambda c: c * 2.0, x)


# name -> (function, argument types, reference): the runners' other paths
EXTRA = {
    "scan-staged": (_staged, (((1027,), F), ((3, 1027), F)), _staged_ref),
    "scan-wide-views": (_staged, (((1024,), F), ((3, 1024), F)), _staged_ref),
    "scan-in-workspace": (_in_workspace, (((5,), F), ((4, 5), F)), _in_workspace_ref),
    "scan-passthrough": (_passthrough, (((2,), F), ((3,), F), ((4, 3), F)), _passthrough_ref),
    "scan-one-step": (_staged, (((3,), F), ((1, 3), F)), _staged_ref),
    "while-zero-trips": (_while_never, (((4,), F),), lambda x: x),
}


def _grad_rnn(w, h0, xs):
    h, ys = C.PROGRAMS["scan-rnn"][0](h0, xs, w)
    return jnp.sum(ys) + jnp.sum(h * h)


def _newton(x):
    return lax.while_loop(lambda c: jnp.abs(c[0] * c[0] - x) > 1e-4,
                          lambda c: (c[0] - (c[0] * c[0] - x) / (2.0 * c[0]), c[1] + 1), (x, 0))


# name -> (function, argument types): under transforms, lowered by jit (the optimized graph and its plan),
# against the numpy backend's unoptimized run (control nodes by their numpy rules)
TRANSFORMED = {
    "grad-scan-rnn": (ember.grad(_grad_rnn, argnums=(0, 1)), (((4, 4), F), ((4,), F), ((6, 4), F))),
    "grad-fori": (ember.grad(lambda x: jnp.sum(C.PROGRAMS["fori-static"][0](x))), (((3, 2), F),)),
    "grad-cond": (ember.grad(lambda p, x, y: jnp.sum(C.PROGRAMS["cond"][0](p, x, y)), argnums=(1, 2)),
                  (((), F), ((4,), F), ((4,), F))),
    "vmap-while": (ember.vmap(_newton), (((3,), F),)),
    "vmap-scan-reverse": (ember.vmap(C.PROGRAMS["scan-reverse"][0]), (((2, 3), F), ((2, 5, 3), F))),
}
# every branch, and an index clamped to the last one; the transformed programs (slow on the host) once
SEEDS = {"switch": range(4), **{name: range(1) for name in TRANSFORMED}, "grad-cond": range(2)}
DEFAULT_SEEDS = range(2)


def _traced(name: str):
    if name in C.PROGRAMS:
        return C.traced(name)
    fn, avals, _ = EXTRA[name]

    def flat(*a):
        return tree_flatten(fn(*a))[0]

    return trace_flat(flat, [ShapedArray(s, np.dtype(d)) for s, d in avals])


def _lowered(name: str) -> tuple:
    """(graph, plan): a program traced and planned, or a transformed one as jit optimizes it."""
    if name in TRANSFORMED:
        low = ember.jit(TRANSFORMED[name][0]).lower(*_args(name, 0))
        return low.optimized, low.stages[-1].plan
    g = _traced(name)
    return g, plan_memory(g)


def _args(name: str, seed: int) -> list[np.ndarray]:
    if name in C.PROGRAMS:
        return C.args_for(name, seed)
    rng = np.random.default_rng(seed)
    avals = TRANSFORMED[name][1] if name in TRANSFORMED else EXTRA[name][1]
    args = [(rng.standard_normal(s) * 0.5).astype(d) for s, d in avals]
    if name == "vmap-while":
        args[0] = np.abs(args[0]) * 10.0 + 1.0  # square roots of positive numbers
    if name == "grad-cond":
        args[0] = np.float32(1.0 if seed % 2 == 0 else -1.0)
    return args


def _reference(name: str, args) -> list[np.ndarray]:
    if name in C.PROGRAMS:
        return C.reference(name, args)
    if name in TRANSFORMED:
        out = ember.jit(TRANSFORMED[name][0], backend="numpy", optimize=False)(*[np.array(a) for a in args])
        return [np.asarray(o) for o in tree_flatten(out)[0]]
    out = EXTRA[name][2](*[np.array(a) for a in args])
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


NAMES = sorted(C.PROGRAMS) + sorted(EXTRA) + sorted(TRANSFORMED)


def _compiled(device: str) -> dict:
    """name -> executable, every program from one module for `device`."""
    return dict(zip(NAMES, compile_many([_lowered(name) for name in NAMES], device=device)))


@pytest.fixture(scope="module")
def compiled():
    return _compiled("cuda-host")


def _overlap(a, b) -> bool:
    return np.shares_memory(a, b) if isinstance(a, np.ndarray) else overlap(a, b)


def _check(name: str, exe, args, to_device=np.array) -> list:
    """Run `exe` on copies of `args` (made by `to_device`): its outputs match the reference, its inputs are
    unchanged and no output shares memory with an input or another output. Returns the outputs."""
    ins = [to_device(a) for a in args]
    got = exe(*ins)
    want = _reference(name, args)
    assert len(got) == len(want), name
    for k, (g, w) in enumerate(zip(got, want)):
        g = to_host(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (name, k, g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=f"{name} output {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{name} output {k}")
    for k, (a, x) in enumerate(zip(args, ins)):
        np.testing.assert_array_equal(to_host(x), a, err_msg=f"{name} wrote input {k}")
    for k, o in enumerate(got):
        assert not any(_overlap(o, p) for p in ins + got[:k]), f"{name}: output {k} shares memory"
    return got


@pytest.mark.parametrize("name", NAMES)
def test_matches_the_python_loop(compiled, name):
    """Each seed calls the executable again with other arguments, so argument lists prepared once per
    executable (scan-in-workspace: every loop operand in the workspace) or per call follow them."""
    for seed in SEEDS.get(name, DEFAULT_SEEDS):
        args = _args(name, seed)
        _check(name, compiled[name], args)


def test_control_nodes_are_host_runs_and_their_kernels_join_the_module(compiled):
    """Each program's control nodes are ControlRuns, and their bodies' kernels (nested ones too) are in the
    one module every executable shares."""
    exe = compiled["nested-scan-cond"]
    (scan,) = [r for r in exe.program.runs if isinstance(r, ControlRun)]
    inner = [r for r in scan.bodies[0].runs if isinstance(r, ControlRun)]
    assert [r.node.prim.name for r in inner] == ["scan", "cond"]
    names = set(exe.program.kernels)
    for program in [scan.bodies[0], *(b for r in inner for b in r.bodies)]:
        assert set(program.kernels) <= names
        assert all(f" {k}(" in exe.source for k in program.kernels)
    assert all(e.source is exe.source for e in compiled.values())


def test_the_module_compiles_to_one_cubin(compiled):
    """Every body's kernels, nested ones too, compile for a GPU through NVRTC (no device needed)."""
    from ember.backends.cuda import nvrtc
    from ember.backends.cuda.prelude import DEVICE_PRELUDE

    assert nvrtc.compile_cubin(DEVICE_PRELUDE + compiled["nested-scan-cond"].source, "sm_90")


def test_unaligned_slices_are_staged_and_aligned_ones_are_views(compiled):
    """A slice of 1027 float32 (large enough for vector accesses, not a multiple of 16 bytes) goes through a
    staging buffer, x and y alike; one of 1024 is a view (no loop buffer beyond the two carry sets)."""
    for name, extra in (("scan-staged", 2), ("scan-wide-views", 0)):
        (run,) = [r for r in compiled[name].program.runs if isinstance(r, ControlRun)]
        assert len(run.buffers) == 2 + extra, name


def test_long_scans_make_their_steps_as_they_go(compiled, monkeypatch):
    """Past `KEPT_STEPS` a scan streams its steps' argument lists (per call, and where they were
    prepared once per executable); the results are the same. Fresh executables of the same module (no
    compile) take the lowered limit when they bind their launches."""
    monkeypatch.setattr(control, "KEPT_STEPS", 2)
    fresh = _compiled("cuda-host")
    for name in ("scan-in-workspace", "nested-scan-cond"):
        assert fresh[name] is not compiled[name] and fresh[name].source == compiled[name].source
        _check(name, fresh[name], _args(name, 0))
    (step,) = [s[0] for s in fresh["scan-in-workspace"]._launches().steps if isinstance(s[0], _ControlStep)]
    split, steps = step.prepared
    assert steps is None and len(split) == 5  # prepared once, streamed


def test_length_zero_returns_the_initial_carry_in_a_fresh_array(compiled):
    c, xs = np.arange(2, dtype=np.float32), np.zeros((0, 2), np.float32)
    carry, ys = compiled["scan-empty"](c, xs)
    np.testing.assert_array_equal(carry, c)
    assert ys.shape == (0, 2) and not np.shares_memory(carry, c)


def test_a_zero_trip_while_returns_its_initial_carry(compiled):
    x = np.ones(4, np.float32)
    (out,) = compiled["while-zero-trips"](x)
    np.testing.assert_array_equal(out, x)
    assert not np.shares_memory(out, x)


def test_two_threads_at_once(compiled):
    """Each thread has its own workspace, its loop buffers and bodies' workspaces included."""
    exe, errors = compiled["scan-reverse"], []

    def work(seed):
        try:
            _check("scan-reverse", exe, _args("scan-reverse", seed))
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_loop_buffers_follow_the_node():
    """scan: two carry sets (and staging); while: two carry sets and the predicate; cond: none."""
    def nodes(name):
        return {n.prim.name: n for n in _traced(name).nodes}

    scan = nodes("scan-rnn")["scan"]
    assert control.loop_buffers(scan) == [((4,), np.dtype(F))] * 2
    loop = nodes("while")["while"]
    assert control.loop_buffers(loop) == [((3,), np.dtype(F)), ((), np.dtype("int32"))] * 2 + [((), np.dtype(bool))]
    assert control.loop_buffers(nodes("switch")["cond"]) == []


@pytest.mark.gpu
def test_every_program_on_the_device():
    """The same programs on a GPU: CuPy arrays in, CuPy arrays out, against the Python loops."""
    from ember.backends.cuda import runtime

    cp = runtime.cupy_module()
    exes = _compiled("cuda")
    for name in NAMES:
        for seed in SEEDS.get(name, DEFAULT_SEEDS):
            args = _args(name, seed)
            outs = _check(name, exes[name], args, cp.asarray)
            assert all(isinstance(o, cp.ndarray) for o in outs), name
