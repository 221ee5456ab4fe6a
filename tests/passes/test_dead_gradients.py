"""Dead-gradient elimination (seed 003): touching a large constant in the forward pass must not make
the backward pass grow with it. For n = 10**3 and 10**7 the gradient graphs must have the same
nodes, and no node may produce a value whose size grows with n: c is read, never copied, zero-filled
or scattered into."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp

SMALL, LARGE = 10**3, 10**7


def _onehot(n):
    e = np.zeros(n)
    e[0] = 1.0
    return e


def _lowered_closed_over(kind: str, n: int):
    c = np.arange(n, dtype=np.float64) + 2.0
    e = _onehot(n)
    if kind == "index":
        def f(p):
            return jnp.asarray(c)[0] * p
    else:
        def f(p):
            return jnp.dot(c, e) * p
    return ember.jit(ember.grad(f)).lower(np.float64(1.5)), (np.float64(1.5),), c


def _lowered_argument(kind: str, n: int):
    c = np.arange(n, dtype=np.float64) + 2.0
    e = _onehot(n)
    if kind == "index":
        def f(p, c, e):
            return c[0] * p
    else:
        def f(p, c, e):
            return jnp.dot(c, e) * p
    args = (np.float64(1.5), c, e)
    return ember.jit(ember.grad(f)).lower(*args), args, c


def _node_sizes(graph):
    return sorted((node.prim.name, v.aval.size) for node in graph.nodes for v in node.outputs)


@pytest.mark.parametrize("make", [_lowered_closed_over, _lowered_argument], ids=["closed_over", "argument"])
@pytest.mark.parametrize("kind", ["index", "dot"])
def test_gradient_graph_does_not_grow_with_the_constant(make, kind):
    small, _, _ = make(kind, SMALL)
    large, args, c = make(kind, LARGE)
    g_small, g_large = small.stage("after autodiff").graph, large.stage("after autodiff").graph
    assert len(g_small.nodes) == len(g_large.nodes)
    assert _node_sizes(g_small) == _node_sizes(g_large)
    # The optimizer may fold the small constant away entirely; it must never add n-sized work.
    for g in (g_large, large.optimized):
        assert all(size < SMALL for _, size in _node_sizes(g)), _node_sizes(g)
        # nothing is scattered or padded into, and nothing n-sized is broadcast (zero-filled)
        assert not {n.prim.name for n in g.nodes} & {"scatter_add", "scatter", "pad"}
    assert len(large.optimized.nodes) <= len(g_large.nodes)
    # and the gradient is right: d/dp (c[0] * p) = c[0] = 2
    grad_fn = large.compile()
    np.testing.assert_allclose(grad_fn(*args), c[0])


@pytest.mark.parametrize("kind", ["index", "dot"])
def test_constant_is_read_by_forward_nodes_only(kind):
    """With c an argument, the after-autodiff stage marks every node touching c inactive: no
    backward node reads c."""
    lowered, _, _ = _lowered_argument(kind, SMALL)
    stage = lowered.stage("after autodiff")
    c_var = stage.graph.inputs[1]
    readers = [n for n in stage.graph.nodes if c_var in n.inputs]
    assert readers, "the forward pass must read c"
    assert all(stage.annotations.get(n) == "inactive" for n in readers)


def test_indexing_an_active_array_pulls_back_as_a_scatter_into_zeros():
    """x[i] with x active: the cotangent of x is one buffer that every indexing scatters into,
    instead of dense arrays added together."""
    n = 1000

    def f(x, i):
        return x[i] * 3.0 + x[5] * x[7]

    x = np.linspace(0.0, 1.0, n)
    lowered = ember.jit(ember.grad(f)).lower(x, np.int32(2))
    g = lowered.stage("after autodiff").graph
    prims = [node.prim.name for node in g.nodes]
    dense_adds = [node for node in g.nodes if node.prim.name == "add" and node.outputs[0].aval.size == n]
    assert not dense_adds, "cotangents of the indexings were added densely"
    # the first contribution fills the buffer (a pad), the others scatter into it
    assert prims.count("pad") == 1 and prims.count("scatter_add") == 2
    np.testing.assert_allclose(lowered.compile()(x, np.int32(2)),
                               np.eye(n)[2] * 3.0 + np.eye(n)[5] * x[7] + np.eye(n)[7] * x[5])


def test_slicing_pulls_back_as_a_pad():
    def f(x):
        return jnp.sum(x[10:20] ** 2)

    x = np.linspace(0.0, 1.0, 100)
    g = ember.make_graph(ember.grad(f))(x)
    assert "pad" in [n.prim.name for n in g.nodes]
    expected = np.zeros(100)
    expected[10:20] = 2 * x[10:20]
    np.testing.assert_allclose(ember.grad(f)(x), expected)


def test_non_differentiated_argument_gets_no_backward_work():
    """grad w.r.t. w only: the data x is inactive, so nothing in the backward pass has x's shape
    except what the gradient of w needs."""
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w))

    w, x = np.ones((5, 3)), np.ones((1000, 5))
    stage = ember.jit(ember.grad(loss)).lower(w, x).stage("after autodiff")
    x_var = stage.graph.inputs[1]
    roles = stage.annotations
    backward = [n for n in stage.graph.nodes if roles.get(n) == "backward"]
    assert all(v.aval.shape != (1000, 5) for n in backward for v in n.outputs), "x got a cotangent"
    assert [n.prim.name for n in backward].count("dot_general") == 1, "only w's gradient needs a contraction"
    assert any(x_var in n.inputs for n in backward), "w's gradient reads x"
