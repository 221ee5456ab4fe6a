"""vmap as the user sees it: in_axes/out_axes forms, axis_size, kwargs, nesting, composition with
grad and jit in every order, and per-sample gradients that stay one batched graph."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.numpy as jnp
from tests.helpers import all_nodes, assert_tree_allclose, loop_vmap


def _f(w, x):
    return jnp.tanh(x @ w)


def _loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


# --- in_axes / out_axes ---------------------------------------------------------------------------

def test_in_axes_int(rng):
    xs = rng.standard_normal((5, 3))
    np.testing.assert_allclose(ember.vmap(lambda x: jnp.sum(x**2))(xs), np.sum(xs**2, axis=1))
    np.testing.assert_allclose(ember.vmap(lambda x: jnp.sum(x**2), in_axes=1)(xs), np.sum(xs**2, axis=0))


def test_in_axes_negative(rng):
    xs = rng.standard_normal((2, 3, 4))
    out = ember.vmap(lambda x: x @ np.ones(3), in_axes=-1)(xs)
    np.testing.assert_allclose(out, loop_vmap(lambda x: x @ np.ones(3), (2,), (xs,)))


def test_in_axes_none_and_tuple(rng):
    w, xs = rng.standard_normal((3, 2)), rng.standard_normal((6, 4, 3))
    out = ember.vmap(_f, in_axes=(None, 0))(w, xs)
    np.testing.assert_allclose(out, np.tanh(xs @ w))
    out = ember.vmap(_f, in_axes=[None, 1])(w, xs.transpose(1, 0, 2))  # a list works like a tuple
    np.testing.assert_allclose(out, np.tanh(xs.transpose(1, 0, 2) @ w).transpose(1, 0, 2))
    ws = rng.standard_normal((6, 3, 2))
    out = ember.vmap(_f, in_axes=(0, 0))(ws, xs)
    np.testing.assert_allclose(out, loop_vmap(lambda w, x: np.tanh(x @ w), (0, 0), (ws, xs)), rtol=1e-12)


def test_in_axes_pytree_prefix(rng):
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal((7, 2))}
    xs = rng.standard_normal((7, 3))

    def f(p, x):
        return jnp.tanh(x @ p["w"] + p["b"])

    out = ember.vmap(f, in_axes=({"w": None, "b": 0}, 0))(params, xs)
    np.testing.assert_allclose(out, np.tanh(xs @ params["w"] + params["b"]))


def test_out_axes_int_negative_and_pytree(rng):
    xs = rng.standard_normal((5, 3))
    f = lambda x: {"a": x * 2, "b": (jnp.sum(x), x[:2])}  # noqa: E731
    out = ember.vmap(lambda x: x * 2, out_axes=1)(xs)
    np.testing.assert_allclose(out, (xs * 2).T)
    out = ember.vmap(f, out_axes=-1)(xs)
    np.testing.assert_allclose(out["b"][1], xs[:, :2].T)
    np.testing.assert_allclose(out["b"][0], xs.sum(1))
    out = ember.vmap(f, out_axes={"a": 1, "b": (0, -1)})(xs)
    np.testing.assert_allclose(out["a"], (xs * 2).T)
    np.testing.assert_allclose(out["b"][0], xs.sum(1))
    np.testing.assert_allclose(out["b"][1], xs[:, :2].T)


def test_out_axes_none_for_unbatched_output(rng):
    w, xs = rng.standard_normal(3), rng.standard_normal((4, 3))
    y, w_out = ember.vmap(lambda w, x: (x @ w, w * 2), in_axes=(None, 0), out_axes=(0, None))(w, xs)
    np.testing.assert_allclose(y, xs @ w)
    np.testing.assert_allclose(w_out, w * 2)  # not stacked
    with pytest.raises(ember.errors.BatchingError, match="out_axes is None"):
        ember.vmap(lambda w, x: (x @ w, w * 2), in_axes=(None, 0), out_axes=None)(w, xs)


def test_unbatched_output_is_broadcast(rng):
    w, xs = rng.standard_normal(3), rng.standard_normal((4, 3))
    out = ember.vmap(lambda w, x: w * 2, in_axes=(None, 0))(w, xs)
    np.testing.assert_allclose(out, np.tile(w * 2, (4, 1)))


def test_axis_size_without_batched_input(rng):
    w = rng.standard_normal(3)
    out = ember.vmap(lambda w: jnp.sin(w), in_axes=None, axis_size=4)(w)
    np.testing.assert_allclose(out, np.tile(np.sin(w), (4, 1)))
    out = ember.vmap(lambda w: jnp.sin(w), in_axes=None, axis_size=2, out_axes=1)(w)
    assert out.shape == (3, 2)


def test_kwargs_are_mapped_over_axis_0(rng):
    xs, ys = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    out = ember.vmap(lambda x, y: jnp.dot(x, y))(xs, y=ys)
    np.testing.assert_allclose(out, np.sum(xs * ys, axis=1))


def test_nested_vmap_vs_double_loop(rng):
    A, B = rng.standard_normal((3, 4, 5)), rng.standard_normal((4, 5))

    def f(a, b):
        return jnp.sum(jnp.sin(a) * b)

    out = ember.vmap(ember.vmap(f, in_axes=(0, 0)), in_axes=(0, None))(A, B)
    ref = np.array([[np.sum(np.sin(A[i, j]) * B[j]) for j in range(4)] for i in range(3)])
    assert out.shape == (3, 4)
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    out = ember.vmap(ember.vmap(f, in_axes=(1, 0)), in_axes=(0, None))(A.transpose(0, 2, 1), B)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


# --- composition with grad and jit -----------------------------------------------------------------

@pytest.fixture
def data(rng):
    return rng.standard_normal((3, 2)), rng.standard_normal((8, 3))


def _per_sample_grads_loop(w, xs):
    return np.stack([ember.grad(_loss)(w, x) for x in xs])


COMPOSITIONS = {
    "jit(vmap(grad))": lambda: ember.jit(ember.vmap(ember.grad(_loss), in_axes=(None, 0))),
    "vmap(grad)": lambda: ember.vmap(ember.grad(_loss), in_axes=(None, 0)),
    "vmap(jit(grad))": lambda: ember.vmap(ember.jit(ember.grad(_loss)), in_axes=(None, 0)),
    "jit(vmap(jit(grad)))": lambda: ember.jit(ember.vmap(ember.jit(ember.grad(_loss)), in_axes=(None, 0))),
}


@pytest.mark.parametrize("name", list(COMPOSITIONS))
def test_per_sample_grad_compositions(name, data):
    w, xs = data
    out = COMPOSITIONS[name]()(w, xs)
    assert out.shape == (8, 3, 2)
    np.testing.assert_allclose(out, _per_sample_grads_loop(w, xs), rtol=1e-10, atol=1e-12)


def test_grad_of_sum_of_vmap(data):
    w, xs = data
    g = ember.grad(lambda w: jnp.sum(ember.vmap(_loss, in_axes=(None, 0))(w, xs)))(w)
    np.testing.assert_allclose(g, _per_sample_grads_loop(w, xs).sum(0), rtol=1e-10)


def test_vmap_of_jit(data):
    w, xs = data
    out = ember.vmap(ember.jit(_f), in_axes=(None, 0))(w, xs)
    np.testing.assert_allclose(out, loop_vmap(lambda w, x: np.tanh(x @ w), (None, 0), (w, xs)))
    out = ember.jit(ember.vmap(ember.jit(_f), in_axes=(None, 0)))(w, xs)
    np.testing.assert_allclose(out, np.tanh(xs @ w))


def test_vmap_vmap_grad(data):
    w, xs = data
    xs2 = xs.reshape(2, 4, 3)
    out = ember.vmap(ember.vmap(ember.grad(_loss), in_axes=(None, 0)), in_axes=(None, 0))(w, xs2)
    assert out.shape == (2, 4, 3, 2)
    np.testing.assert_allclose(out.reshape(8, 3, 2), _per_sample_grads_loop(w, xs), rtol=1e-10, atol=1e-12)


def test_vmap_of_grad_over_both_arguments(data):
    _, xs = data
    ws = np.random.default_rng(1).standard_normal((8, 3, 2))
    out = ember.vmap(ember.grad(_loss))(ws, xs)
    ref = np.stack([ember.grad(_loss)(w, x) for w, x in zip(ws, xs)])
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)


# --- per-sample gradients of an MLP (seed 002) -----------------------------------------------------

def _mlp_loss(activation):
    def loss(params, x):
        return jnp.sum(nn.mlp(params, x, activation))
    return loss


@pytest.mark.parametrize("activation", [None, jnp.tanh], ids=["identity", "tanh"])
def test_mlp_per_sample_gradients_match_loop(activation, rng):
    params = nn.init_mlp([10, 32, 32, 10], seed=1)
    xs = rng.standard_normal((256, 10)).astype(np.float32)
    loss = _mlp_loss(activation)
    per_sample = ember.jit(ember.vmap(ember.grad(loss), in_axes=(None, 0)))(params, xs)
    assert [(w.shape, b.shape) for w, b in per_sample] == [((256, 10, 32), (256, 32)), ((256, 32, 32), (256, 32)),
                                                           ((256, 32, 10), (256, 10))]
    single = ember.jit(ember.grad(loss))
    for i in (0, 1, 77, 255):
        row = [(w[i], b[i]) for w, b in per_sample]
        assert_tree_allclose(row, single(params, xs[i]), rtol=1e-5, atol=1e-5)
    mean = ember.grad(lambda p: jnp.sum(_batch_loss(loss, p, xs)))(params)
    assert_tree_allclose([(w.sum(0), b.sum(0)) for w, b in per_sample], mean, rtol=1e-4, atol=1e-4)


def _batch_loss(loss, params, xs):
    """The batch loss written with a batched forward pass (no vmap): sum of per-sample losses."""
    return loss(params, xs)


def _dot_nodes(graph):
    return [n for n in all_nodes(graph) if n.prim.name == "dot_general"]


def test_per_sample_gradient_graph_is_batched_not_looped():
    """jit(vmap(grad(loss))) is one graph whose size does not depend on the batch: no op repeats per
    example, and each per-sample weight gradient is one node: a dot_general with a batch dimension, or (an
    outer product) one loop multiplying broadcasts."""
    params = nn.init_mlp([10, 32, 32, 10], seed=1)
    loss = _mlp_loss(jnp.tanh)
    f = ember.jit(ember.vmap(ember.grad(loss), in_axes=(None, 0)))
    graphs = {}
    for batch in (8, 256):
        xs = np.zeros((batch, 10), np.float32)
        graphs[batch] = f.lower(params, xs).optimized
    small, large = graphs[8], graphs[256]
    assert len(all_nodes(small)) == len(all_nodes(large))
    assert Counter(n.prim.name for n in all_nodes(small)) == Counter(n.prim.name for n in all_nodes(large))
    counts = Counter(n.prim.name for n in all_nodes(large))
    assert max(counts.values()) < 32, counts  # nothing repeats once per example
    assert not {"slice", "gather", "concatenate"} & set(counts)  # no per-example slicing and stacking
    dots = _dot_nodes(large)
    assert len(dots) == len(_dot_nodes(small)) <= 8
    for node in dots:
        (lc, rc), (lb, rb) = node.params["dimension_numbers"]
        lhs, rhs = (a.aval.shape for a in node.inputs)
        if lhs[:1] == (256,) and rhs[:1] == (256,):  # both operands per-example: a batched contraction
            assert lb == (0,) and rb == (0,), node
    sizes = {256 * w.size for w, _ in params}
    producer = {v: n for n in large.nodes for v in n.outputs}
    weight_grads = [producer[v] for v in large.outputs if v.aval.size in sizes and 256 in v.aval.shape]
    assert len(weight_grads) == len(params)  # one node per layer's per-sample dW, not 256
    for node in weight_grads:
        if node.prim.name == "fusion":  # an outer product: a multiply of broadcasts, one loop
            assert [n.prim.name for n in node.params["body"].nodes if n.prim.kind != "layout"] == ["mul"], node
            continue
        assert node.prim.name == "dot_general", node
        (_, _), (lb, rb) = node.params["dimension_numbers"]
        batched = [256 in a.aval.shape for a in node.inputs]
        assert (lb and rb) or batched.count(True) == 1, node  # batched contraction, or an outer product


# --- non-array arguments and the type of in_axes ---------------------------------------------------

def test_non_array_arguments_pass_through_at_in_axes_none(rng):
    """A function and a string at in_axes None reach the mapped function untouched (as in JAX)."""
    xs = rng.standard_normal((4, 3))
    seen = []

    def f(op, tag, x):
        seen.append((op, tag))
        return op(x) * 2.0

    np.testing.assert_allclose(ember.vmap(f, in_axes=(None, None, 0))(jnp.sin, "hi", xs), 2 * np.sin(xs))
    np.testing.assert_allclose(ember.vmap(f, in_axes=(None, None, 0))(jnp.cos, "hi", xs), 2 * np.cos(xs))
    assert seen and all(tag == "hi" for _, tag in seen) and {op for op, _ in seen} == {jnp.sin, jnp.cos}
    traces = len(seen)
    ember.vmap(f, in_axes=(None, None, 0))(jnp.sin, "hi", xs)
    vf = ember.vmap(f, in_axes=(None, None, 0))
    vf(jnp.sin, "hi", xs)
    vf(jnp.sin, "hi", xs + 1)  # cached per (function, string, shapes): no new trace
    assert len(seen) == traces + 2
    out = ember.jit(lambda xs: ember.vmap(f, in_axes=(None, None, 1))(jnp.tanh, "t", xs))(xs)
    np.testing.assert_allclose(out, 2 * np.tanh(xs.T))
    # inside a pytree, next to mapped leaves; unhashable non-array values too
    params = {"act": jnp.tanh, "w": rng.standard_normal(3), "names": ["a", "b"]}
    g = ember.vmap(lambda p, x: p["act"](x * p["w"]), in_axes=({"act": None, "w": None, "names": None}, 0))
    np.testing.assert_allclose(g(params, xs), np.tanh(xs * params["w"]))
    np.testing.assert_allclose(ember.grad(lambda xs: jnp.sum(g(params, xs)))(xs),
                               (1 - np.tanh(xs * params["w"]) ** 2) * params["w"], rtol=1e-12)


def test_non_array_argument_at_a_mapped_axis_raises():
    with pytest.raises(ember.ArgumentError, match=r"argument 0 has type function.*cannot map it along axis 0.*"
                                                  r"in_axes None"):
        ember.vmap(lambda f, x: f(x))(jnp.sin, np.ones(3))


@pytest.mark.parametrize("spec", [True, False, (True,), [False], (0.0,), {"x": 0}, ({"a": True},)],
                         ids=repr)
def test_in_axes_of_the_wrong_type_raise_type_error(spec):
    with pytest.raises(TypeError, match="vmap in_axes must be an int, None, or") as info:
        ember.vmap(lambda x: x, in_axes=spec)
    assert "test_vmap_api.py" in str(info.value)


@pytest.mark.parametrize("spec", [True, (0, False), 1.0])
def test_out_axes_of_the_wrong_type_raise_type_error(spec):
    with pytest.raises(TypeError, match="vmap out_axes must be an int, None, or"):
        ember.vmap(lambda x: (x, x), out_axes=spec)
