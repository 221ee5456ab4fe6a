"""simplify, cse, dce and the pipeline: each rewrite is checked structurally, and whole programs
(random ones included) give identical results with and without optimization."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.nn as nn
import ember.numpy as jnp
import ember.passes.simplify as simplify_module
from ember.passes.cse import cse
from ember.passes.dce import dce
from ember.passes.memory import Plan, plan_memory
from ember.passes.pipeline import PASSES, optimize, stage_names
from ember.passes.simplify import FOLD_LIMIT, simplify
from ember.tracer import ShapedArray, trace_flat


def _graph(fn, *shapes, dtype=np.float32):
    return trace_flat(lambda *a: list(fn(*a)), [ShapedArray(s, dtype) for s in shapes])


def _prims(g):
    return [n.prim.name for n in g.nodes]


def test_dce_drops_unused_nodes_and_consts_but_keeps_inputs():
    big = np.arange(10.0, dtype=np.float32)

    def fn(x, y):
        jnp.sin(y) + big  # computed, never used
        return [jnp.exp(x)]

    g = _graph(fn, (10,), (10,))
    assert "sin" in _prims(g) and len(g.consts) == 1
    d = dce(g).verify()
    assert _prims(d) == ["exp"] and not d.consts and len(d.inputs) == 2


def test_cse_merges_identical_nodes():
    g = _graph(lambda x: [jnp.exp(x) + jnp.exp(x), jnp.exp(x) * 2.0], (3,))
    c = cse(g).verify()
    assert _prims(c).count("exp") == 1


def test_simplify_identities():
    g = _graph(lambda x: [x * 1.0, 0.0 + x, x - 0.0, x / 1.0, jnp.negative(-x), x**1, x.reshape(3).reshape(3),
                          x.T.T, ember.stop_gradient(x), jnp.where(True, x, 2 * x)], (3,))
    s = dce(simplify(g)).verify()
    assert all(o is s.inputs[0] for o in s.outputs), s
    assert not s.nodes


def test_simplify_rewrites_square_and_composes_transposes():
    g = _graph(lambda x: [x**2, jnp.transpose(jnp.transpose(x, (1, 2, 0)), (1, 2, 0))], (2, 3, 4))
    s = dce(simplify(g)).verify()
    assert "pow" not in _prims(s) and _prims(s).count("transpose") == 1
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    run = ember.backends.get_backend("numpy")
    out = run.compile(s, plan_memory(s))(x)
    np.testing.assert_allclose(out[0], x**2)
    np.testing.assert_allclose(out[1], np.transpose(np.transpose(x, (1, 2, 0)), (1, 2, 0)))


def test_simplify_folds_constant_expressions_with_small_results(monkeypatch):
    small = np.arange(8.0)
    large = np.arange(float(FOLD_LIMIT + 1))
    g = _graph(lambda x: [x + jnp.sum(jnp.exp(small)), x + jnp.sum(large), jnp.sum(x + jnp.exp(large))], (),
               dtype=np.float64)
    s = dce(simplify(g)).verify()
    prims = _prims(s)
    assert prims.count("reduce_sum") == 1, "constant reductions with a scalar result fold"
    assert "exp" in prims, "a constant result larger than FOLD_LIMIT stays a computation"
    monkeypatch.setattr(simplify_module, "FOLD_INPUT_LIMIT", FOLD_LIMIT)
    s = dce(simplify(g)).verify()
    assert _prims(s).count("reduce_sum") == 2, "reading more than FOLD_INPUT_LIMIT elements is not folded"


def test_simplify_keeps_broadcasts_of_scalars():
    g = _graph(lambda x: [x + jnp.zeros((5,))], (5,))
    assert "broadcast_in_dim" in _prims(g)
    s = simplify(g).verify()
    assert all(v.aval.shape == () for v, val in zip(s.consts, s.const_values)), "a splat became a const"


def test_pipeline_records_each_pass_and_only_memory_carries_the_plan():
    low = ember.jit(lambda x: jnp.sum(jnp.exp(x) * 1.0)).lower(np.ones(3, np.float32))
    assert low.stage_names == ["traced", "after inline"] + [f"after {name}" for name, _ in PASSES] + ["after memory"]
    assert low.optimized is low.stages[-1].graph
    assert low.stage("after fusion").graph is low.optimized
    assert isinstance(low.stage("after memory").plan, Plan)
    assert all(s.plan is None for s in low.stages[:-1])


def test_optimize_returns_graph_and_plan_with_donation():
    g = _graph(lambda x, y: [jnp.exp(x) * 1.0 + y], (3,), (3,))
    out, plan = optimize(g, donate=(1,), disable_passes=("fusion",))
    assert _prims(out) == ["exp", "add"] and plan.schedule == out.nodes
    assert plan.donated == (1,) and plan.buffer_class[out.inputs[1]] == "donated"
    assert plan.buffer_class[out.inputs[0]] == "input"


_PROGRAM = (lambda x: [jnp.exp(x * 1.0) + jnp.exp(x * 1.0)], (4,))


@pytest.mark.parametrize("disabled, present, absent", [
    ((), ["after simplify", "after cse", "after dce"], []),
    (("simplify",), ["after cse", "after dce"], ["after simplify"]),
    (("cse", "dce"), ["after simplify"], ["after cse", "after dce"]),
    (("simplify", "cse", "dce", "fusion", "inplace"), [], ["after simplify", "after cse", "after dce"]),
])
def test_disable_passes_by_name(disabled, present, absent):
    fn, shape = _PROGRAM
    x = np.linspace(0, 1, 4)
    f = ember.jit(lambda x: fn(x)[0], disable_passes=disabled)
    low = f.lower(x)
    names = low.stage_names
    assert names[:2] == ["traced", "after inline"] and names[-1] == "after memory"
    assert all(n in names for n in present) and not any(n in names for n in absent)
    assert names[1:] == stage_names(disabled)
    np.testing.assert_allclose(f(x), 2 * np.exp(x), rtol=1e-12)
    if "cse" in disabled and "simplify" not in disabled:
        assert [n.prim.name for n in low.optimized.all_nodes()].count("exp") == 2


def test_optimize_false_disables_every_optional_pass():
    low = ember.jit(lambda x: x * 1.0, optimize=False).lower(np.ones(3))
    assert low.stage_names == ["traced", "after inline", "after memory"]
    assert _prims(low.optimized) == ["mul"] and low.stages[-1].plan is not None


@pytest.mark.parametrize("bad", [("simplfy",), "cse2", ("dce", "fuse")])
def test_unknown_pass_names_raise_a_clear_error(bad):
    with pytest.raises(ValueError, match="disable_passes names unknown passes.*simplify.*inplace"):
        ember.jit(lambda x: x, disable_passes=bad)
    with pytest.raises(ValueError, match="unknown passes"):
        optimize(_graph(lambda x: [x], (2,)), disable_passes=bad)


PROGRAMS = {
    "mlp_grad": (lambda w, x: ember.grad(lambda w: jnp.sum(nn.mlp([(w, jnp.zeros(4))], x, jnp.tanh) ** 2))(w),
                 [(3, 4), (5, 3)]),
    "softmax_grad": (lambda a, b: ember.grad(lambda a: jnp.sum(nn.softmax(a @ b.T) * b[:, :2].sum()))(a),
                     [(4, 3), (2, 3)]),
    "indexing": (lambda a, b: a[1:, ::2].sum() + jnp.take(b, np.array([0, 1, 1]), axis=1).max(), [(4, 3), (2, 3)]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_optimized_equals_unoptimized(name):
    fn, shapes = PROGRAMS[name]
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s) for s in shapes]
    # fused code may round differently (a softmax gradient sums to 1e-17 rather than 0): atol too
    np.testing.assert_allclose(ember.jit(fn)(*args), ember.jit(fn, optimize=False)(*args), rtol=1e-12, atol=1e-15)


_UNARY = [jnp.exp, jnp.tanh, jnp.sin, lambda x: x * 1.0, lambda x: jnp.negative(-x), lambda x: x**2, lambda x: x + 0.0,
          lambda x: jnp.maximum(x, 0.0), lambda x: x.T.T, lambda x: ember.stop_gradient(x) * x]
_BINARY = [jnp.add, jnp.multiply, jnp.subtract, lambda a, b: jnp.where(a > b, a, b * 1.0)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_UNARY) - 1), st.integers(0, len(_BINARY) - 1),
                          st.integers(0, 5)), min_size=1, max_size=8))
def test_random_programs_optimize_to_the_same_values(steps):
    def program(x, y):
        vals = [x, y]
        for u, b, k in steps:
            a = _UNARY[u](vals[k % len(vals)])
            vals.append(_BINARY[b](a, vals[(k + 1) % len(vals)]))
        return jnp.sum(vals[-1]), ember.grad(lambda x: jnp.sum(jnp.tanh(vals[-1]) * x))(x)

    rng = np.random.default_rng(len(steps))
    x, y = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    ref = ember.jit(program, optimize=False)(x, y)
    got = ember.jit(program)(x, y)
    for a, b in zip(ref, got):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    lowered = ember.jit(program).lower(x, y)
    assert len(lowered.optimized.nodes) <= len(lowered.graph.nodes)


def test_optimize_is_idempotent_on_its_output():
    g = ember.make_graph(ember.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2)))(np.ones(3))
    once, _ = optimize(g)
    twice, _ = optimize(once)
    assert _prims(once) == _prims(twice)


@pytest.mark.parametrize("wrap", [lambda g: g, ember.vmap], ids=["grad", "vmap_grad"])
def test_autodiff_roles_survive_the_pipeline(wrap):
    """Nodes keep their role (like their line) through inlining, simplify, CSE and DCE, so the
    optimized graph still tells forward from backward work (debug_nans and dumps read it)."""
    f = ember.jit(wrap(ember.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2 * 1.0))))
    x = np.ones((2, 3)) if wrap is ember.vmap else np.ones(3)
    low = f.lower(x)
    roles = {n.prim.name: n.role for n in low.optimized.all_nodes() if n.prim.name in ("tanh", "sub")}
    assert roles == {"tanh": "active", "sub": "backward"}
    assert all(n.role for n in low.optimized.all_nodes())
    assert "backward" in low.text("after dce") and "active" in low.text("after dce")


def test_disable_passes_from_the_environment(monkeypatch):
    """EMBER_DISABLE_PASSES bisects without editing code: its names add to jit's `disable_passes`;
    an unknown name says which variable holds it."""
    fn, _ = _PROGRAM
    x = np.linspace(0, 1, 4)
    monkeypatch.setenv("EMBER_DISABLE_PASSES", "cse, hoist, dce, fusion")
    names = ember.jit(lambda x: fn(x)[0], disable_passes=("simplify",)).lower(x).stage_names
    assert names == ["traced", "after inline", "after memory"]
    monkeypatch.setenv("EMBER_DISABLE_PASSES", "fusoin")
    with pytest.raises(ValueError, match="EMBER_DISABLE_PASSES.*fusoin"):
        ember.jit(lambda x: fn(x)[0])
