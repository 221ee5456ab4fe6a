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
from ember.passes.pipeline import PASSES, optimize
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
    out = run.compile(s)(x)
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


def test_pipeline_records_each_pass():
    low = ember.jit(lambda x: jnp.sum(jnp.exp(x) * 1.0)).lower(np.ones(3, np.float32))
    assert low.stage_names == ["traced"] + [f"after {name}" for name, _ in PASSES]
    assert low.optimized is low.stages[-1].graph
    assert low.stage("after dce").graph is low.optimized


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
    np.testing.assert_allclose(ember.jit(fn)(*args), ember.jit(fn, optimize=False)(*args), rtol=1e-12)


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
    once = optimize(g)
    twice = optimize(once)
    assert _prims(once) == _prims(twice)
