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
    # intermediates only: a, then a and b (a is read again by the add, so sin cannot write into it)
    assert plan.live_bytes == (4 * N, 8 * N, 8 * N) and plan.peak_bytes == 8 * N
    assert not plan.inplace and len(set(plan.buffer.values())) == 4


def test_chain_frees_each_value_after_its_consumer():
    g = _graph(lambda x: [jnp.cos(jnp.sin(jnp.exp(x)))], (N,))
    naive = plan_memory(g, inplace=False)
    assert [len(f) for f in naive.frees] == [0, 1, 1]
    assert naive.peak_bytes == 2 * 4 * N  # operand + result, never more
    assert naive.buffers == 4 and naive.saved_bytes == 0 and not naive.inplace
    plan = plan_memory(g)  # sin writes into exp's buffer; cos is the output, fresh
    exp_, sin_, cos_ = g.nodes
    assert plan.inplace == {sin_.outputs[0]: exp_.outputs[0]} and plan.frees == naive.frees
    assert plan.peak_bytes == 4 * N and plan.naive_peak_bytes == 8 * N
    assert plan.buffers == 3 and plan.saved_bytes == plan.inplace_saved_bytes == 4 * N


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
    f = lambda x: jnp.cos(jnp.sin(jnp.exp(x)))  # noqa: E731
    report = ember.jit(f, disable_passes=("fusion",)).lower(np.ones(N, np.float32)).memory()
    assert report.peak_bytes == 4 * N and report.naive_peak_bytes == 8 * N
    assert report.buffers == 3 and report.saved_bytes == report.inplace_saved_bytes == 4 * N
    assert report.donation_saved_bytes == 0
    assert report.input_bytes == 4 * N and report.output_bytes == 4 * N and report.workspace_bytes == 4 * N
    naive = ember.jit(f, optimize=False).lower(np.ones(N, np.float32)).memory()
    assert naive.peak_bytes == 8 * N and naive.buffers == 4 and naive.saved_bytes == 0
    assert naive.workspace_bytes == 8 * N and not naive.reuse


def test_memory_report_table_names_values_as_the_text_does():
    def f(x):
        y = jnp.exp(x)
        return jnp.sum(jnp.sin(y) * 2.0)

    low = ember.jit(f, donate_argnums=0, disable_passes=("fusion",)).lower(np.ones(N, np.float32))
    report = low.memory()
    text = str(report)
    # exp, sin and mul all write into the donated argument: no intermediate buffer at all
    assert text.startswith(f"memory plan (in place and pooled): peak 0 bytes of intermediates (naive plan {8 * N})")
    assert f"saved {12 * N} bytes: 0 by in-place reuse, {12 * N} by donation" in text
    (row,) = [r for r in report.table if r.cls == "donated"]
    line = f"{f.__code__.co_filename.rsplit('/', 1)[-1]}:{f.__code__.co_firstlineno + 1}"
    assert [(name, prim) for name, prim, _ in row.values] == [("a", "donated"), ("b", "exp"), ("c", "sin"),
                                                               ("d", "mul")]
    assert row.values[1][2].endswith(line) and row.first is None and row.last == 3
    assert "b:f32[1000] = exp a" in low.text()
    assert f"#0     donated         4000  in-3      a donated, b exp {row.values[1][2]}, c sin" in text


def test_memory_plot_writes_a_png(tmp_path, monkeypatch):
    def f(x):
        return jnp.sum(jnp.tanh(jnp.exp(x) * 2.0) + jnp.sin(x))

    for opt in (True, False):
        path = tmp_path / f"memory_{opt}.png"
        out = ember.jit(f, optimize=opt).lower(np.ones(N, np.float32)).memory().plot(str(path))
        assert out == str(path) and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install ember\[plots\]"):
        ember.jit(f).lower(np.ones(N, np.float32)).memory().plot(str(tmp_path / "x.png"))


def test_plan_is_printed_in_text_and_dumps(tmp_path):
    low = ember.jit(lambda x: jnp.exp(x) * 2.0, disable_passes=("fusion",)).lower(np.ones(3, np.float32))
    text = low.text()
    assert "# memory plan: peak 12 bytes of intermediates (naive 12), 3 buffers, saved 0 bytes" in text
    assert "b:workspace:12B #1 alloc" in text and "free b" in text
    assert "memory plan" not in low.text("after dce")
    low.dump(str(tmp_path), formats=["txt"])
    dumped = (tmp_path / f"{len(low.stages) - 1:02d}_after_memory.txt").read_text()
    assert "# memory plan: peak 12 bytes" in dumped
    chain = ember.jit(lambda x: jnp.sum(jnp.sin(jnp.exp(x))), disable_passes=("fusion",)).lower(
        np.ones(3, np.float32)).text()
    assert "c:workspace:12B #1 in place of b  free b" in chain


def test_plan_text_shows_pool_reuse():
    def f(x):
        a = jnp.exp(x)
        b = jnp.sin(a) * a
        return jnp.sum(jnp.cos(b) * b)

    text = ember.jit(f, disable_passes=("fusion",)).lower(np.ones(3, np.float32)).text()
    assert "d:workspace:12B #2 in place of c  free b c" in text  # c dies at the mul, b too
    assert "e:workspace:12B #1 reuse" in text  # b's buffer, released after the mul
    assert "peak 24 bytes of intermediates (naive 36), 4 buffers" in text


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
        plan = low.stages[-1].plan
        _check_plan(low.optimized, plan)
        assert plan.peak_bytes == max(plan.live_bytes, default=0) <= plan.naive_peak_bytes
        assert plan.peak_bytes <= low.memory().workspace_bytes + plan.saved_bytes


def test_a_compiled_functions_report_names_its_backend_arena():
    """Before compiling, the report is the plan's; once compiled on llvm it also gives the arena each call
    works in (the plan's buffers plus kernel scratch: here a dot's), at least the plan's intermediates,
    and the scratch part of it."""
    f = lambda a, b: jnp.tanh(a @ b)  # noqa: E731
    a, b = np.ones((64, 64), np.float32), np.ones((64, 64), np.float32)
    lowered = ember.jit(f, backend="llvm").lower(a, b)
    assert lowered.memory().arena_bytes is None
    lowered.compile()
    report = lowered.memory()
    assert report.arena_bytes is not None and report.arena_bytes >= report.peak_bytes
    assert report.scratch_bytes == report.arena_bytes - report.workspace_bytes >= 0
    text = f"backend arena {report.arena_bytes} B per call: the plan's buffers and {report.scratch_bytes} B"
    assert text in str(report)
    assert ember.jit(f, backend="numpy").lower(a, b).memory().arena_bytes is None
