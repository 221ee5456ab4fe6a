"""Reverse-mode autodiff on composite functions and the seed workloads, against central finite
differences in float64; plus the pass-level pieces (activity, vjp_graph, split_forward_backward)."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.numpy as jnp
from ember.passes.autodiff import activity, grad_graph, split_forward_backward, vjp_graph
from ember.passes.memory import plan_memory
from ember.tracer import ShapedArray, trace_flat
from tests.helpers import check_grads, eam, numerical_grad

RNG = np.random.default_rng(42)


def _w(*shape):
    return RNG.standard_normal(shape)


# --- seed 000: pairwise cosine similarity + softmax ------------------------------------------------

def cosine_vectorized(a, b):
    """a: (B, R, W), b: (B, N, W) -> softmax over N of cosine similarities, (B, R, N)."""
    dots = jnp.einsum("brw,bnw->brn", a, b)
    na = jnp.sqrt(jnp.sum(a * a, axis=-1))
    nb = jnp.sqrt(jnp.sum(b * b, axis=-1))
    return nn.softmax(dots / (na[:, :, None] * nb[:, None, :]), axis=-1)


def cosine_loops(a, b):
    """The seed's scalar-style loops, with functional updates."""
    B, R, _ = a.shape
    N = b.shape[1]
    r = jnp.zeros((B, R, N), dtype=a.dtype)
    for k in range(B):
        for j in range(R):
            for i in range(N):
                u, v = a[k, j], b[k, i]
                r = r.at[k, j, i].set(jnp.dot(u, v) / (jnp.linalg.norm(u) * jnp.linalg.norm(v)))
    return nn.softmax(r, axis=-1)


@pytest.mark.parametrize("impl", [cosine_vectorized, cosine_loops])
def test_cosine_softmax_gradient(impl):
    a, b = _w(2, 3, 5), _w(2, 4, 5)
    weights = _w(2, 3, 4)
    check_grads(lambda a, b: jnp.sum(impl(a, b) * weights), (a, b), argnums=(0, 1))


def test_cosine_versions_agree():
    a, b = _w(2, 3, 5), _w(2, 4, 5)
    np.testing.assert_allclose(ember.jit(cosine_loops)(a, b), ember.jit(cosine_vectorized)(a, b), rtol=1e-12)


# --- seed 001: the eam function --------------------------------------------------------------------

def test_eam_gradient_matches_hand_written_and_finite_differences():
    x = RNG.random(20)
    rho_i = np.exp(-3 * (x + 1))
    rho = rho_i.sum()
    by_hand = (2 * rho + 3 * rho**2 + rho**3) * (-3 * rho_i)
    np.testing.assert_allclose(ember.grad(eam)(x), by_hand, rtol=1e-12)
    check_grads(eam, (x,))


# --- an MLP loss -----------------------------------------------------------------------------------

@pytest.mark.parametrize("act", [None, jnp.tanh, nn.relu, nn.gelu, nn.sigmoid])
def test_mlp_loss_gradient(act):
    params = nn.init_mlp([3, 4, 2], seed=3, dtype=np.float64)
    x, y = _w(5, 3), _w(5, 2)

    def loss(params, x):
        return jnp.mean((nn.mlp(params, x, act) - y) ** 2)

    check_grads(loss, (params, x), argnums=(0, 1))


# --- other composites ------------------------------------------------------------------------------

COMPOSITES = {
    "softmax": lambda x: jnp.sum(nn.softmax(x, axis=0) * np.arange(12.0).reshape(3, 4)),
    "log_softmax": lambda x: jnp.sum(nn.log_softmax(x) * np.arange(12.0).reshape(3, 4)),
    "logsumexp": lambda x: nn.logsumexp(x),
    "logsumexp_axis": lambda x: jnp.sum(nn.logsumexp(x, axis=1) ** 2),
    "norm": lambda x: jnp.linalg.norm(x),
    "norm_rows": lambda x: jnp.sum(jnp.linalg.norm(x, ord=3, axis=1)),
    "fro_times_l1": lambda x: jnp.linalg.norm(x, "fro") * jnp.linalg.norm(x[0], 1),
    "einsum_trace": lambda x: jnp.einsum("ij,kj->", x, x) + jnp.einsum("ii->", x[:, :3]),
    "var_std": lambda x: jnp.var(x, axis=0).sum() + jnp.std(x, ddof=1),
    "indexing": lambda x: jnp.sum(x[::2, np.array([0, 3, 3])] * x[1:, 1:3].sum()),
    "where_clip": lambda x: jnp.sum(jnp.where(x > 0.1, x**2, jnp.clip(x, -0.5, 0.5))),
    "prod": lambda x: jnp.prod(x[0]) + jnp.sum(jnp.prod(x, axis=0)),
    "max_min": lambda x: jnp.max(x) * jnp.min(x, axis=1).sum(),
    "concat_stack": lambda x: jnp.sum(jnp.concatenate([x, 2 * x], axis=1) * jnp.stack([x, x, x]).sum(0).sum()),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_gradient(name):
    x = _w(3, 4)
    check_grads(COMPOSITES[name], (x,))


def test_grad_of_grad_and_hessian_match_finite_differences():
    x = _w(4)
    A = _w(4, 4)

    def f(x):
        return jnp.sum(jnp.tanh(A @ x) ** 2) + jnp.sum(x**3)

    hess = ember.hessian(f)(x)
    num = np.stack([numerical_grad(lambda x, i=i: ember.grad(f)(x)[i], (x,)) for i in range(4)])
    np.testing.assert_allclose(hess, num, rtol=1e-6, atol=1e-8)
    d2 = ember.grad(ember.grad(lambda t: jnp.sin(t) * t))(0.7)
    np.testing.assert_allclose(d2, 2 * np.cos(0.7) - 0.7 * np.sin(0.7), rtol=1e-6)


# --- pass-level pieces -----------------------------------------------------------------------------

def _graph(fn, *shapes):
    return trace_flat(lambda *a: [fn(*a)], [ShapedArray(s, np.float64) for s in shapes])


def test_activity_follows_only_differentiated_inputs():
    g = _graph(lambda x, c: jnp.sum(jnp.exp(c) * x) + jnp.sum(c), (3,), (3,))
    act = activity(g, [True, False])
    exp_node = next(n for n in g.nodes if n.prim.name == "exp")
    assert exp_node.outputs[0] not in act
    assert g.outputs[0] in act


def test_stop_gradient_cuts_activity():
    g = _graph(lambda x: jnp.sum(ember.stop_gradient(x) * x), (3,))
    sg = next(n for n in g.nodes if n.prim.name == "stop_gradient")
    assert sg.outputs[0] not in activity(g, [True])
    x = _w(3)
    np.testing.assert_allclose(ember.grad(lambda x: jnp.sum(ember.stop_gradient(x) * x))(x), x)


def test_vjp_graph_and_split_forward_backward():
    g = _graph(lambda x, y: jnp.tanh(x) * y, (3,), (3,))
    vg = vjp_graph(g, [True, True]).verify()
    assert len(vg.inputs) == 3 and len(vg.outputs) == 3
    fwd, bwd, n_res = split_forward_backward(vg, 2, 1)
    fwd.verify()
    bwd.verify()
    x, y, ct = _w(3), _w(3), _w(3)
    run = ember.backends.get_backend("numpy")
    out_res = run.compile(fwd, plan_memory(fwd))(x, y)
    grads = run.compile(bwd, plan_memory(bwd))(*out_res[1:], ct)
    np.testing.assert_allclose(out_res[0], np.tanh(x) * y)
    np.testing.assert_allclose(grads[0], ct * y * (1 - np.tanh(x) ** 2))
    np.testing.assert_allclose(grads[1], ct * np.tanh(x))
    # the backward part reads only residuals and cotangents, never recomputes tanh
    assert "tanh" not in [n.prim.name for n in bwd.nodes]
    assert n_res == len(bwd.inputs) - 1


def test_grad_graph_has_forward_and_backward_in_one_graph():
    g = _graph(lambda x: jnp.sum(jnp.exp(x)), (3,))
    gg = grad_graph(g, [True]).verify()
    assert [n.prim.name for n in gg.nodes].count("exp") == 1  # the backward reuses exp's output
