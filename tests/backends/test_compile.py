"""compile_graph: the one road to a backend. jit and vjp both reach `compile(graph, plan)` through it,
with the lowered graph (no custom_vjp_call) and a plan that carries the donated inputs."""

import numpy as np
import pytest

import ember
import ember.backends as backends
import ember.numpy as jnp
from ember.api.compile import compile_graph
from ember.passes.memory import Plan
from ember.tracer import ShapedArray, trace_flat


class Recording:
    """A backend that records what it is asked to compile and runs it with the numpy backend."""

    name = "recording"

    def __init__(self):
        self.calls: list[tuple] = []

    def compile(self, graph, plan=None):
        self.calls.append((graph, plan))
        return backends.get_backend("numpy").compile(graph, plan)


@pytest.fixture
def recording(monkeypatch):
    rec = Recording()
    monkeypatch.setitem(backends._loaders, "recording", lambda: rec)
    monkeypatch.setitem(backends._loaded, "recording", rec)
    return rec


@ember.custom_vjp
def double(x):
    return x * 2.0


double.defvjp(lambda x: (double(x), None), lambda _, ct: (ct * 2.0,))


def test_compile_graph_runs_the_pipeline_and_returns_its_stages(recording):
    g = trace_flat(lambda x: [double(x) * 1.0], [ShapedArray((3,), np.float64)])
    exe, stages = compile_graph(g, donate=(0,), backend="recording")
    assert [s.name for s in stages] == ["after inline", "after simplify", "after cse", "after hoist", "after dce",
                                        "after fusion", "after memory"]
    (graph, plan), = recording.calls
    assert graph is stages[-1].graph and plan is stages[-1].plan and plan.donated == (0,)
    assert [n.prim.name for n in graph.nodes] == ["mul"]
    np.testing.assert_allclose(exe(np.ones(3)), [2 * np.ones(3)])


def test_compile_graph_with_a_plan_runs_no_pass(recording):
    g = trace_flat(lambda x: [x * 1.0], [ShapedArray((3,), np.float64)])
    exe, stages = compile_graph(g, backend="recording", plan=Plan((), (), {}, {}, {}, ((),), 0))
    assert stages == [] and recording.calls[0][0] is g


def test_optimize_false_still_lowers(recording):
    g = trace_flat(lambda x: [double(x) * 1.0], [ShapedArray((3,), np.float64)])
    _, stages = compile_graph(g, backend="recording", optimize=False)
    assert [s.name for s in stages] == ["after inline", "after memory"]
    assert [n.prim.name for n in recording.calls[0][0].nodes] == ["mul", "mul"]


def test_jit_reaches_the_backend_with_the_lowered_graph_and_donation(recording):
    f = ember.jit(lambda a, b: double(a) + b, donate_argnums=(1,), backend="recording")
    x = np.arange(3.0)
    np.testing.assert_allclose(f(x, x), 3 * x)
    (graph, plan), = recording.calls
    low = f.lower(x, x)
    assert plan.donated == (1,) and plan.buffer_class[graph.inputs[1]] == "donated"
    assert "custom_vjp_call" not in {n.prim.name for n in graph.nodes}
    assert [n.prim.name for n in graph.nodes] == [n.prim.name for n in low.optimized.nodes]


def test_vjp_compiles_forward_and_backward_through_compile_graph(recording, monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "recording")

    def f(x):
        return jnp.sum(jnp.tanh(double(x)) * 1.0)

    x = np.array([0.1, -0.4])
    out, pullback = ember.vjp(f, x)
    (g,) = pullback(np.float64(1.0))
    np.testing.assert_allclose(out, np.sum(np.tanh(2 * x)))
    np.testing.assert_allclose(g, 2 * (1 - np.tanh(2 * x) ** 2))
    assert len(recording.calls) == 2  # forward and backward
    for graph, plan in recording.calls:
        assert isinstance(plan, Plan) and plan.donated == ()  # residuals are never donated
        assert "custom_vjp_call" not in {n.prim.name for n in graph.nodes}
        assert not any(n.prim.name == "mul" and any(getattr(a, "value", None) == 1.0 for a in n.inputs)
                       for n in graph.nodes)  # optimized: x * 1.0 is gone
