"""The memory plan: schedule, liveness, buffer classes, byte sizes, peak estimate, and its users
(the numpy backend's frees, Lowered.memory(), text dumps, donate_argnums)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends import get_backend
from ember.passes.memory import plan_memory
from ember.passes.pipeline import optimize
from ember.tracer import ShapedArray, trace_flat

N = 1000  # f32 elements: 4000 bytes per value


def _graph(fn, *shapes, dtype=np.float32):
    return trace_flat(lambda *a: list(fn(*a)), [ShapedArray(s, dtype) for s in shapes])


def test_liveness_and_frees_of_a_diamond():
    def diamond(x):
        e = jnp.exp(x)
        return [e + jnp.sin(e)]

    g = _graph(diamond, (N,))
    x = g.inputs[0]
    exp_, sin_, add_ = g.nodes
    a, b, c = exp_.outputs[0], sin_.outputs[0], add_.outputs[0]
    plan = plan_memory(g)
    assert plan.schedule == g.nodes
    assert plan.last_use[x] == 0 and plan.last_use[a] == 2 and plan.last_use[b] == 2
    assert plan.last_use[c] == len(g.nodes)  # an output is read after the last node
    assert plan.frees == ((), (), (a, b))
    assert plan.nbytes[a] == 4 * N
    assert [plan.buffer_class[v] for v in (x, a, b, c)] == ["input", "workspace", "workspace", "output"]
    # x throughout; a, b and c coexist while the add runs
    assert plan.peak_bytes == 4 * 4 * N


def test_chain_frees_each_value_after_its_consumer():
    g = _graph(lambda x: [jnp.cos(jnp.sin(jnp.exp(x)))], (N,))
    plan = plan_memory(g)
    assert [len(f) for f in plan.frees] == [0, 1, 1]
    assert plan.peak_bytes == 3 * 4 * N  # input + operand + result, never more
    assert plan.buffers == 4 and plan.saved_bytes == 0


def test_buffer_classes_consts_donation_and_unused_values():
    w = np.arange(N, dtype=np.float32)
    g = _graph(lambda x, y: [x * w + y, jnp.exp(y)], (N,), (N,))
    unused = _graph(lambda x: (jnp.sin(x), [x * 2.0])[1], (N,))  # sin is dead but kept without DCE
    plan = plan_memory(g, donate=(0,))
    x, y = g.inputs
    assert plan.buffer_class[x] == "donated" and plan.buffer_class[y] == "input"
    assert plan.buffer_class[g.consts[0]] == "const"
    assert plan.bytes_of("const") == 4 * N and plan.donated == (0,)
    freed = {v for f in plan.frees for v in f}
    assert x in freed and y not in freed and g.consts[0] not in freed  # only the donated input is released
    u = plan_memory(unused)
    assert u.frees[0] == unused.nodes[0].outputs  # freed where it is made
    with pytest.raises(ValueError, match="out of range"):
        plan_memory(g, donate=(2,))


def test_numpy_backend_frees_what_the_plan_frees():
    g = _graph(lambda x: [jnp.cos(jnp.sin(jnp.exp(x)))], (4,))
    plan = plan_memory(g)
    source = get_backend("numpy").compile(g, plan).source
    assert source.count("del ") == 2
    # the backend follows the plan it is given, it does not recompute liveness
    keep_all = type(plan)(plan.schedule, (), plan.buffer_class, plan.nbytes, plan.last_use,
                          ((),) * len(g.nodes), plan.peak_bytes)
    exe = get_backend("numpy").compile(g, keep_all)
    assert "del " not in exe.source
    x = np.linspace(0, 1, 4, dtype=np.float32)
    np.testing.assert_allclose(exe(x)[0], np.cos(np.sin(np.exp(x))), rtol=1e-6)


def test_lowered_memory_report():
    f = ember.jit(lambda x: jnp.cos(jnp.sin(jnp.exp(x))), disable_passes=("fusion",))
    report = f.lower(np.ones(N, np.float32)).memory()
    assert report.peak_bytes == 3 * 4 * N
    assert report.buffers == 4 and report.saved_bytes == 0
    assert report.input_bytes == 4 * N and report.output_bytes == 4 * N and report.workspace_bytes == 8 * N


def test_plan_is_printed_in_text_and_dumps(tmp_path):
    low = ember.jit(lambda x: jnp.exp(x) * 2.0, disable_passes=("fusion",)).lower(np.ones(3, np.float32))
    text = low.text()
    assert "# memory plan: peak 36 bytes, 3 buffers, in-place saved 0 bytes" in text
    assert "alloc b:workspace:12B" in text and "free b" in text
    assert "memory plan" not in low.text("after dce")
    low.dump(str(tmp_path), formats=["txt"])
    dumped = (tmp_path / f"{len(low.stages) - 1:02d}_after_memory.txt").read_text()
    assert "# memory plan: peak 36 bytes" in dumped


def test_donate_argnums_become_flat_input_indices():
    def f(a, scale, params, b):
        return params["w"] * a * scale + params["b"] + b

    j = ember.jit(f, static_argnums=(1,), donate_argnums=(2, 3))
    x = np.ones(3)
    low = j.lower(x, 2.0, {"b": x, "w": x}, x)
    plan = low.stages[-1].plan
    assert plan.donated == (1, 2, 3)  # a is 0; params' two leaves 1, 2; b 3 (scale is static)
    np.testing.assert_allclose(j(x, 2.0, {"b": x, "w": x}, x), 4 * x)


def test_optimize_plans_the_optimized_graph():
    g = _graph(lambda x: [jnp.exp(x) + jnp.exp(x)], (N,))
    out, plan = optimize(g, disable_passes=("fusion",))
    assert plan.schedule == out.nodes and len(out.nodes) == 2


def test_plan_is_drawn_in_dot_dumps(tmp_path):
    low = ember.jit(lambda x: jnp.exp(x) * 2.0, disable_passes=("fusion",)).lower(np.ones(3, np.float32))
    low.dump(str(tmp_path), formats=["dot"])
    memory_dot = (tmp_path / f"{len(low.stages) - 1:02d}_after_memory.dot").read_text()
    assert "workspace 12B" in memory_dot and "output 12B" in memory_dot and "frees b" in memory_dot
    assert "workspace" not in (tmp_path / "00_traced.dot").read_text()


def _check_plan(graph, plan):
    """Every workspace value is freed exactly once, after its last reader and never before; inputs,
    consts and outputs never."""
    freed_at = {}
    for j, vals in enumerate(plan.frees):
        for v in vals:
            assert v not in freed_at, "freed twice"
            freed_at[v] = j
    for j, node in enumerate(graph.nodes):
        for a in node.inputs:
            assert freed_at.get(a, j) >= j, "read after it was freed"
    for v, cls in plan.buffer_class.items():
        assert (v in freed_at) == (cls in ("workspace", "donated") and v in plan.last_use), (cls, v)
    outs = {v for v in graph.outputs if hasattr(v, "aval")}
    assert not outs & set(freed_at)


@pytest.mark.parametrize("name", ["mlp_grad", "softmax_grad", "indexing"])
def test_plans_of_whole_programs_are_consistent(name):
    from tests.passes.test_optimize import PROGRAMS

    fn, shapes = PROGRAMS[name]
    args = [np.ones(s) for s in shapes]
    for optimize_ in (True, False):
        low = ember.jit(fn, optimize=optimize_, donate_argnums=(0,)).lower(*args)
        _check_plan(low.optimized, low.stages[-1].plan)
        assert low.memory().peak_bytes >= low.memory().input_bytes + low.memory().output_bytes
