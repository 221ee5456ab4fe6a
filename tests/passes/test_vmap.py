"""The batching transform at graph level: unbatched values stay unbatched, the batch axis moves
through contractions instead of looping, and the graph does not grow with the batch size."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.numpy as jnp
from ember.passes.vmap import vmap_graph
from ember.tracer import ShapedArray, trace_flat


def _graph(fn, *shapes):
    return trace_flat(lambda *a: [fn(*a)], [ShapedArray(s, np.float32) for s in shapes])


def test_unbatched_subgraph_is_left_alone():
    """Work that depends only on unbatched inputs is emitted once, unbatched."""
    g = _graph(lambda w, x: jnp.tanh(w * 2.0).sum() * x, (5,), (3,))
    vg = vmap_graph(g, [None, 0], 8).verify()
    tanh = next(n for n in vg.nodes if n.prim.name == "tanh")
    assert tanh.outputs[0].aval.shape == (5,)


def test_matmul_with_unbatched_weights_is_one_contraction_without_broadcasting_w():
    g = _graph(lambda w, x: w @ x, (4, 3), (3,))
    vg = vmap_graph(g, [None, 0], 16).verify()
    assert [n.prim.name for n in vg.nodes if n.prim.name not in ("transpose", "reshape")] == ["dot_general"]
    assert vg.in_avals[0].shape == (4, 3)
    assert not any(v.aval.shape == (16, 4, 3) for n in vg.nodes for v in n.outputs)


def test_both_batched_contraction_gains_a_batch_dimension():
    g = _graph(lambda a, b: jnp.outer(a, b), (4,), (3,))
    vg = vmap_graph(g, [0, 0], 7).verify()
    dots = [n for n in vg.nodes if n.prim.name == "dot_general"]
    assert len(dots) == 1
    (_, _), (lb, rb) = dots[0].params["dimension_numbers"]
    assert len(lb) == 1 and len(rb) == 1
    assert vg.outputs[0].aval.shape == (7, 4, 3)


@pytest.mark.parametrize("activation", [None, jnp.tanh])
def test_per_sample_gradient_graph_does_not_grow_with_the_batch(activation):
    params = nn.init_mlp([10, 32, 32, 10])

    def loss(params, x):
        return jnp.sum(nn.mlp(params, x, activation))

    per_sample = ember.vmap(ember.grad(loss), in_axes=(None, 0))
    sizes = {}
    for batch in (4, 256):
        xs = np.zeros((batch, 10), np.float32)
        g = ember.jit(per_sample).lower(params, xs).optimized
        sizes[batch] = sorted(n.prim.name for n in g.nodes)
        producer = {v: n for n in g.nodes for v in n.outputs}
        for w_grad, shape in zip(g.outputs[0::2], [(batch, 10, 32), (batch, 32, 32), (batch, 32, 10)]):
            assert w_grad.aval.shape == shape
            node = producer[w_grad]
            # one kernel: an outer product (a dot without contracting axes) is a multiply of broadcasts,
            # fused with any transpose of its result into one loop
            if node.prim.name == "fusion":
                assert [n.prim.name for n in node.params["body"].nodes if n.prim.kind != "layout"] == ["mul"]
            else:
                assert node.prim.name == "dot_general", "a per-sample weight gradient is one contraction"
    assert sizes[4] == sizes[256]


def test_out_dims_none_requires_an_unbatched_output():
    g = _graph(lambda w, x: (w * 2.0) + 0.0 * w, (3,), (2,))
    vg = vmap_graph(g, [None, 0], 5, out_dims=None).verify()
    assert vg.outputs[0].aval.shape == (3,)
    g2 = _graph(lambda w, x: x * 2.0, (3,), (2,))
    with pytest.raises(ember.errors.BatchingError, match="out_axes is None"):
        vmap_graph(g2, [None, 0], 5, out_dims=None)


def test_recorded_stages():
    low = ember.jit(ember.vmap(lambda x: x * 2.0)).lower(np.ones((3, 2), np.float32))
    assert {"before vmap", "after vmap"} <= set(low.stage_names)
