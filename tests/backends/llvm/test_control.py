"""cond, while and scan compiled natively by the llvm backend (llvm/control.py): every control-flow
program of tests/backends/control_cases.py, unoptimized, optimized (fused bodies) and through jit,
against its Python loop; loops that never call back into Python; inputs never written; empty scans,
trivial and nested bodies, a big carry, bodies split into segments, concurrent calls; the plan and
cache keys of control nodes."""

import threading

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.llvm import entry as E
from ember.backends.llvm.executable import LLVMExecutable
from ember.backends.llvm.graph import build_module
from ember.passes.memory import WORKSPACE, plan_memory
from ember.passes.pipeline import optimize
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Node
from ember.tracer.trace import trace_flat
from ember.tree import tree_flatten
from tests.backends import control_cases as C

SEEDS = range(4)


def _close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6)


def _graph(fn, *avals):
    """The flat graph of `fn` over ((shape, dtype), ...)."""
    def flat(*a):
        return tree_flatten(fn(*a))[0]
    return trace_flat(flat, [ShapedArray(s, np.dtype(d)) for s, d in avals])


def _compiled(graph):
    return LLVMExecutable(graph, plan_memory(graph))


@pytest.mark.parametrize("name", sorted(C.PROGRAMS))
def test_each_program_unoptimized_matches_its_python_loop(name):
    executable = _compiled(C.traced(name))
    for seed in SEEDS:
        args = C.args_for(name, seed)
        _close(executable(*args), C.reference(name, args))


@pytest.mark.parametrize("name", sorted(C.PROGRAMS))
def test_each_program_through_jit_matches_its_python_loop(name):
    fn = ember.jit(C.PROGRAMS[name][0], backend="llvm")
    for seed in SEEDS:
        args = C.args_for(name, seed)
        out = fn(*args)
        _close(list(out) if isinstance(out, tuple) else [out], C.reference(name, args))


@pytest.mark.parametrize("name", sorted(C.PROGRAMS))
def test_each_program_under_the_pipelines_plan_matches_its_python_loop(name):
    """The optimizer's graph (bodies fused) under its own plan, as jit compiles it."""
    graph, plan = optimize(C.traced(name))
    if name in ("scan-rnn", "nested-scan-cond"):
        assert any(n.prim is P.fusion_p for node in graph.nodes for body in node.subgraphs()
                   for n in body.all_nodes())
    executable = LLVMExecutable(graph, plan)
    for seed in SEEDS:
        args = C.args_for(name, seed)
        _close(executable(*args), C.reference(name, args))


def test_a_long_scan_is_one_native_loop():
    """10**5 steps: the entry calls the body's function once in its IR (a loop, not unrolled), the
    module declares nothing it could call Python through, and the sum is the sequential one."""
    n = 10**5
    graph = _graph(lambda c, xs: lax.scan(lambda c, x: (c + x, c), c, xs), ((), "float32"), ((n,), "float32"))
    executable = _compiled(graph)
    source = executable.source
    entry = source[source.index('@"ember_entry"'):]
    entry = entry[:entry.index("\n}")]
    assert entry.count('call void @"body0"') == 1 and "phi" in entry
    declared = {line.split("@")[1].split("(")[0] for line in source.splitlines() if line.startswith("declare")}
    assert all(name.startswith('"llvm.') for name in declared), declared
    xs = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    total, before = executable(np.float32(0.0), xs)
    partial = np.cumsum(xs, dtype=np.float32)  # sequential float32 sums, as the loop adds
    assert total == partial[-1]
    np.testing.assert_array_equal(before, np.concatenate([[0.0], partial[:-1]]).astype(np.float32))


def test_inputs_are_never_written():
    """A scan whose carry init and xs are user arrays, a while loop's carry, and a cond's operands."""
    rng = np.random.default_rng(1)
    c, xs = rng.standard_normal(5).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    cases = [
        (lambda c, xs: lax.scan(lambda c, x: (c * 2.0 + x, c), c, xs), (c, xs)),
        (lambda c, xs: lax.while_loop(lambda v: jnp.sum(v) < 100.0, lambda v: v * 2.0 + 1.0, c), (c, xs)),
        (lambda c, xs: lax.cond(jnp.sum(c) > 0, lambda a, b: a + b[0], lambda a, b: a - b[1], c, xs), (c, xs)),
    ]
    for fn, args in cases:
        graph = _graph(fn, (c.shape, "float32"), (xs.shape, "float32"))
        kept = [a.copy() for a in args]
        got = _compiled(graph)(*args)
        _close(got, [np.asarray(o) for o in P.run_numpy(graph, kept)])
        for a, k in zip(args, kept):
            np.testing.assert_array_equal(a, k)


def test_a_cond_index_out_of_range_is_clamped_natively():
    """A cond node given an index lax did not clamp runs its first or last branch, as its numpy rule."""
    traced = _graph(lambda i, x: lax.switch(i, [lambda a: a + 1.0, lambda a: a * 3.0, lambda a: -a], x),
                    ((), "int32"), ((2,), "float32"))
    (node,) = [n for n in traced.nodes if n.prim is P.cond_p]
    bare = Node(P.cond_p, (traced.inputs[0], traced.inputs[1]), node.params, node.outputs)
    graph = traced.replace(nodes=[bare])
    executable = _compiled(graph)
    x = np.array([1.5, -2.0], np.float32)
    for i, want in [(-5, x + 1), (0, x + 1), (1, x * 3), (2, -x), (7, -x), (2**31 - 1, -x), (-2**31, x + 1)]:
        (got,) = executable(np.int32(i), x)
        np.testing.assert_array_equal(got, want)


def test_a_scan_of_length_zero_returns_the_initial_carry_and_empty_stacks():
    graph = _graph(lambda c, xs: lax.scan(lambda c, x: (c * x, (c, x + 1.0)), c, xs), ((3,), "float32"),
                   ((0, 3), "float32"))
    c = np.arange(3, dtype=np.float32)
    carry, ys0, ys1 = _compiled(graph)(c, np.zeros((0, 3), np.float32))
    np.testing.assert_array_equal(carry, c)
    assert ys0.shape == ys1.shape == (0, 3)


def test_bodies_returning_an_input_unchanged_and_a_literal():
    """The body's outputs are copies of its input and a constant: its function copies and stores them."""
    def fn(c, xs):
        return lax.scan(lambda c, x: (c, jnp.asarray(2.5, jnp.float32)), c, xs)

    graph = _graph(fn, ((2,), "float32"), ((4, 2), "float32"))
    body = graph.nodes[-1].params["body"]
    assert body.outputs[0] is body.inputs[0] and not body.nodes  # nothing computed: a copy and a literal
    c = np.array([1.0, -2.0], np.float32)
    carry, ys = _compiled(graph)(c, np.ones((4, 2), np.float32))
    np.testing.assert_array_equal(carry, c)
    np.testing.assert_array_equal(ys, np.full(4, 2.5, np.float32))


def test_a_big_carry():
    n = 10**5
    graph = _graph(lambda c, xs: lax.scan(lambda c, x: (c * 0.5 + x, jnp.sum(c)), c, xs), ((n,), "float32"),
                   ((6,), "float32"))
    rng = np.random.default_rng(2)
    c, xs = rng.standard_normal(n).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    carry, sums = _compiled(graph)(c, xs)
    want, h = [], c
    for x in xs:
        want.append(np.sum(h, dtype=np.float64))
        h = h * np.float32(0.5) + x
    np.testing.assert_array_equal(carry, h)
    np.testing.assert_allclose(sums, want, rtol=1e-4, atol=1e-2)


def test_bodies_split_into_segments(monkeypatch):
    """A body past SEGMENT_NODES nodes is emitted as segment functions taking its (ins, outs, ws)."""
    import ember.backends.llvm.graph as G

    monkeypatch.setattr(G, "SEGMENT_NODES", 2)
    graph = C.traced("nested-scan-cond")
    module = build_module(graph, plan_memory(graph))
    assert 'define internal void @"body0.segment0"(ptr %".1", ptr %".2", ptr %".3")' in module.ir
    # a constant unique to this test keys the compiled code apart from every other test's
    fn = lambda xs, w: C._nested(xs, w * 1.0009765625)  # noqa: E731
    executable = _compiled(_graph(fn, ((4, 3, 3), "float32"), ((3,), "float32")))
    assert 'define internal void @"body0.segment0"' in executable.source
    for seed in SEEDS:
        xs, w = C.args_for("nested-scan-cond", seed)
        _close(executable(xs, w), C.reference("nested-scan-cond", [xs, w * np.float32(1.0009765625)]))


def test_calls_from_two_threads_at_once():
    """A graph with a loop releases the GIL; each thread has its own workspace (the carry regions)."""
    graph = C.traced("fori-dynamic")
    executable = _compiled(graph)
    assert executable.releases_gil
    inputs = [C.args_for("fori-dynamic", seed) for seed in range(8)]
    for args in inputs:
        args[1] = np.asarray(2000 + 1000 * (int(args[1]) % 2), np.int32)
    wants = [C.reference("fori-dynamic", args) for args in inputs]
    failures = []

    def work(k):
        for _ in range(20):
            for args, want in zip(inputs[k::2], wants[k::2]):
                got = executable(*args)
                if not np.allclose(got[0], want[0], rtol=1e-4, atol=1e-4):
                    failures.append((k, got, want))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_control_outputs_never_share_an_operand_buffer():
    """A body reads the operands while the node writes its outputs: even an operand dying at the node
    (workspace, same shape and dtype) keeps its buffer apart from the outputs."""
    def fn(c, xs):
        d = c * 2.0
        return lax.scan(lambda c, x: (c + x, c), d, xs * 3.0)

    graph = _graph(fn, ((4,), "float32"), ((5, 4), "float32"))
    plan = plan_memory(graph)
    (node,) = [n for n in graph.nodes if n.prim is P.scan_p]
    operands = {plan.buffer[a] for a in node.inputs if plan.buffer_class.get(a) == WORKSPACE}
    assert operands and not operands & {plan.buffer[v] for v in node.outputs}
    assert not any(v in plan.inplace for v in node.outputs)


def test_the_code_signature_and_kernels_cover_bodies():
    """Two scans differing only inside the body have different disk-cache keys; the module's kernels
    and IR show the body functions."""
    avals = (((3,), "float32"), ((4, 3), "float32"))
    g1 = _graph(lambda c, xs: lax.scan(lambda c, x: (c + x, c), c, xs), *avals)
    g2 = _graph(lambda c, xs: lax.scan(lambda c, x: (c - x, c), c, xs), *avals)
    assert E.code_signature(g1, plan_memory(g1)) != E.code_signature(g2, plan_memory(g2))
    module = build_module(g1, plan_memory(g1))
    assert any(k.startswith("body0: the scan body of scan") and "add" in k for k in module.kernels)
    assert 'define internal void @"body0"(ptr %"ins", ptr %"outs", ptr %"ws")' in module.ir
    lowered = ember.jit(C.PROGRAMS["nested-scan-cond"][0], backend="llvm").lower(*C.args_for("nested-scan-cond"))
    source = lowered.source()
    assert all(f'define internal void @"body{k}"' in source for k in range(4))  # outer, inner, 2 branches
