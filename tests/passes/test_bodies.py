"""The optimizer reaches into control-flow bodies: every pass runs on them (innermost first), consts a
pass creates in a body become the node's operands, and loop-invariant work leaves scan and while
bodies (computed once). Checked structurally and against the unoptimized oracle."""

import numpy as np

import ember
import ember.numpy as jnp
from ember import lax
from ember.passes.bodies import hoist, recursive
from ember.passes.simplify import simplify
from ember.tracer import prims as P


def _loops(graph):
    return [n for n in graph.nodes if n.prim in P.CONTROL_PRIMS]


def _names(nodes) -> set:
    """The primitives of `nodes`, a fusion counted with what it fuses."""
    out = set()
    for n in nodes:
        out.add(n.prim.name)
        if n.prim.name == "fusion":
            out |= {m.prim.name for m in n.params["body"].nodes}
    return out


def _rnn(w, h0, xs):
    def step(h, x):
        w2 = jnp.tanh(w) * 0.5  # invariant: leaves the loop
        return jnp.tanh(h @ w2 + x), jnp.sum(h)
    return lax.scan(step, h0, xs)


def test_invariant_work_leaves_the_loop_and_bodies_are_fused(rng):
    args = (rng.normal(size=(4, 4)).astype(np.float32), np.zeros(4, np.float32),
            rng.normal(size=(7, 4)).astype(np.float32))
    low = ember.jit(_rnn).lower(*args)
    (loop,) = _loops(low.optimized)
    body = loop.params["body"]
    in_front = [n for n in low.optimized.nodes if n is not loop]
    assert _names(in_front) >= {"tanh", "mul"}, "the invariant tanh(w) * 0.5 runs in front of the loop"
    assert {n.prim.name for n in body.nodes} <= {"fusion", "reduce_sum"}, "the body's matmul epilogue is fused"
    assert "dot_general" in _names(body.nodes)
    oracle = ember.jit(_rnn, optimize=False, backend="numpy")(*args)
    for a, b in zip(ember.jit(_rnn)(*args), oracle):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


def test_hoist_keeps_inflating_nodes_and_while_bodies(rng):
    def f(x, a):
        def body(c):
            big = jnp.broadcast_to(a, (64, 3))  # larger than what it reads: stays, fusion makes it free
            k = jnp.exp(a) + 1.0  # invariant and small: leaves
            return c[0] + jnp.sum(big, axis=0) * k, c[1] + 1
        return lax.while_loop(lambda c: c[1] < 3, body, (x, 0))[0]

    x, a = np.zeros(3, np.float32), rng.normal(size=3).astype(np.float32)
    g = ember.make_graph(f)(x, a)
    h = hoist(g).verify()
    (loop,) = _loops(h)
    names = [n.prim.name for n in loop.params["body_graph"].nodes]
    assert "exp" not in names and "broadcast_in_dim" in names
    assert "exp" in [n.prim.name for n in h.nodes]
    np.testing.assert_allclose(ember.jit(f)(x, a), ember.jit(f, optimize=False, backend="numpy")(x, a), rtol=1e-6)


def test_nested_loops_hoist_outward_level_by_level(rng):
    def f(w, xs):
        def outer(c, x):
            inner = lax.fori_loop(0, 3, lambda i, d: d * jnp.sum(jnp.sin(w)) + x, c)
            return inner, None
        return lax.scan(outer, jnp.zeros(2, jnp.float32), xs)[0]

    w, xs = rng.normal(size=5).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)
    g = ember.jit(f).lower(w, xs).optimized
    (loop,) = _loops(g)
    (inner,) = _loops(loop.params["body"])
    inner_names = {n.prim.name for n in inner.params["body"].all_nodes()}
    assert "sin" not in inner_names and "sin" not in {n.prim.name for n in loop.params["body"].nodes}
    np.testing.assert_allclose(ember.jit(f)(w, xs), ember.jit(f, optimize=False, backend="numpy")(w, xs), rtol=2e-6)


def test_a_const_folded_in_a_body_becomes_an_operand():
    table = np.arange(6, dtype=np.float32).reshape(2, 3)

    def f(x):
        return lax.fori_loop(0, 2, lambda i, v: v + jnp.sum(table * 2.0, axis=0), x)

    g = ember.make_graph(f)(np.zeros(3, np.float32))
    s = recursive(simplify)(g).verify()
    for loop in _loops(s):
        assert not loop.params["body"].consts
    np.testing.assert_allclose(ember.jit(f)(np.zeros(3, np.float32)), 2 * np.sum(table * 2, axis=0))


def test_hoist_can_be_disabled_by_name():
    f = ember.jit(lambda w, h0, xs: _rnn(w, h0, xs), disable_passes=("hoist",))
    args = (np.eye(4, dtype=np.float32), np.zeros(4, np.float32), np.ones((3, 4), np.float32))
    low = f.lower(*args)
    assert "after hoist" not in low.stage_names
    (loop,) = _loops(low.optimized)
    assert "tanh" in {n.prim.name for n in loop.params["body"].all_nodes()}


def test_dead_loop_state_is_pruned(rng):
    """A carry nobody reads after the loop (a counter, here) and a stacked output nobody reads leave
    the loop, with the work only they needed; a carry another live carry needs stays."""
    def newton(a):
        return lax.while_loop(lambda c: jnp.abs(c[0] * c[0] - a) > 1e-6 * a,
                              lambda c: ((c[0] + a / c[0]) * 0.5, c[1] + 1, c[2] * 2.0), (a, 0, a))[0]

    a = np.float32(9.0)
    (loop,) = _loops(ember.jit(newton).lower(a).optimized)
    assert [v.aval.dtype for v in loop.outputs] == [np.float32] and len(loop.params["body_graph"].outputs) == 1
    np.testing.assert_allclose(ember.jit(newton)(a), 3.0, rtol=1e-6)
    np.testing.assert_allclose(ember.jit(ember.vmap(newton))(np.array([2.0, 9.0], np.float32)), np.sqrt([2.0, 9.0]),
                               rtol=1e-6)

    def rnn_last(w, xs):
        def step(c, x):
            h, k = c
            h = jnp.tanh(h @ w + x)
            return (h, k + h), jnp.sum(h * h)  # k and the stacked sums are never read
        return lax.scan(step, (jnp.zeros(3, xs.dtype), jnp.zeros(3, xs.dtype)), xs)[0][0]

    w, xs = rng.normal(size=(3, 3)), rng.normal(size=(5, 3))
    (loop,) = _loops(ember.jit(rnn_last).lower(w, xs).optimized)
    assert loop.params["num_carry"] == 1 and len(loop.outputs) == 1
    np.testing.assert_allclose(ember.jit(rnn_last)(w, xs), ember.jit(rnn_last, optimize=False, backend="numpy")(w, xs),
                               rtol=1e-12)
