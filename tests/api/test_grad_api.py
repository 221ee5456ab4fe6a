"""grad, value_and_grad, vjp, jacrev, hessian and stop_gradient as the user sees them."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.tracer import prims as P
from ember.tracer.primitive import impl_rules
from ember.tree import tree_structure
from tests.helpers import all_nodes, assert_tree_allclose, check_grads, numerical_grad


def _loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


def _loss_np(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def _loss_grad_w(w, x):
    t = np.tanh(x @ w)
    return x.T @ (2 * t * (1 - t**2))


# --- grad forms ---------------------------------------------------------------------------------

def test_grad_call_form(rng):
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(ember.grad(_loss)(w, x), _loss_grad_w(w, x), rtol=1e-10)


def test_grad_decorator_form(rng):
    @ember.grad
    def g(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(g(w, x), _loss_grad_w(w, x), rtol=1e-10)
    assert g.__name__ == "g"


def test_grad_matches_finite_differences(rng):
    check_grads(_loss, (rng.standard_normal((3, 2)), rng.standard_normal((4, 3))), argnums=(0, 1))


def test_argnums_int_and_tuple(rng):
    f = lambda a, b, c: jnp.sum(a * b**2 + c)  # noqa: E731
    a, b, c = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    np.testing.assert_allclose(ember.grad(f, argnums=1)(a, b, c), 2 * a * b)
    np.testing.assert_allclose(ember.grad(f, argnums=-1)(a, b, c), np.ones(3))
    ga, gc = ember.grad(f, argnums=(0, 2))(a, b, c)
    np.testing.assert_allclose(ga, b**2)
    np.testing.assert_allclose(gc, np.ones(3))
    (gb,) = ember.grad(f, argnums=(1,))(a, b, c)  # a 1-tuple gives a 1-tuple
    np.testing.assert_allclose(gb, 2 * a * b)


def test_has_aux(rng):
    def f(x):
        y = jnp.sin(x)
        return jnp.sum(y), {"y": y, "n": jnp.sum(x > 0)}

    x = rng.standard_normal(4)
    g, aux = ember.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g, np.cos(x))
    np.testing.assert_allclose(aux["y"], np.sin(x))
    assert aux["n"] == np.sum(x > 0)


def test_value_and_grad(rng):
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    value, g = ember.value_and_grad(_loss)(w, x)
    np.testing.assert_allclose(value, _loss_np(w, x), rtol=1e-12)
    np.testing.assert_allclose(g, _loss_grad_w(w, x), rtol=1e-10)
    (value, aux), (gw, gx) = ember.value_and_grad(lambda w, x: (_loss(w, x), x * 2), argnums=(0, 1),
                                                  has_aux=True)(w, x)
    np.testing.assert_allclose(value, _loss_np(w, x), rtol=1e-12)
    np.testing.assert_allclose(aux, x * 2)
    np.testing.assert_allclose(gw, _loss_grad_w(w, x), rtol=1e-10)
    assert gx.shape == x.shape


def test_keyword_arguments_are_not_differentiated(rng):
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    g = ember.grad(lambda x, y: jnp.sum(x * y))(x, y=y)
    np.testing.assert_allclose(g, y)


def test_gradient_dtype_follows_argument():
    g = ember.grad(lambda x: jnp.sum(x**2))(np.ones(3, np.float32))
    assert g.dtype == np.float32
    g64 = ember.grad(lambda x: jnp.sum(x**2))(np.ones(3))
    assert g64.dtype == np.float64


def test_pytree_arguments_give_pytree_gradients(rng):
    params = {"w": rng.standard_normal((3, 2)), "b": (rng.standard_normal(2), [rng.standard_normal(())])}

    def f(p, x):
        return jnp.sum(jnp.tanh(x @ p["w"] + p["b"][0]) * p["b"][1][0])

    x = rng.standard_normal((4, 3))
    g = ember.grad(f)(params, x)
    assert tree_structure(g) == tree_structure(params)
    ref = numerical_grad(ember.jit(f), (params, x))
    assert_tree_allclose(g, ref, rtol=1e-6, atol=1e-8)


# --- vjp ----------------------------------------------------------------------------------------

def test_vjp_returns_output_and_pullback(rng):
    A = rng.standard_normal((4, 3))
    x = rng.standard_normal(3)
    out, pullback = ember.vjp(lambda x: jnp.tanh(A @ x), x)
    np.testing.assert_allclose(out, np.tanh(A @ x))
    J = (1 - np.tanh(A @ x) ** 2)[:, None] * A
    for ct in (np.ones(4), rng.standard_normal(4), np.eye(4)[2]):
        (g,) = pullback(ct)
        np.testing.assert_allclose(g, ct @ J, rtol=1e-10)


def test_vjp_pullback_runs_only_the_backward_part(rng, monkeypatch):
    """The forward (here: the only `sin`) runs once in vjp; each pullback call runs only the saved
    backward graph. Counted through the numpy backend's sin implementation."""
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    monkeypatch.setattr(ember.config, "check_oracle", False)  # the oracle would run sin again
    sin_calls = []
    real_sin = impl_rules[P.sin_p]
    monkeypatch.setitem(impl_rules, P.sin_p, lambda x, **kw: sin_calls.append(1) or real_sin(x, **kw))
    traces = []

    def f(x, y):
        traces.append(1)
        return jnp.sin(x) * y

    x, y = rng.standard_normal(3), rng.standard_normal(3)
    out, pullback = ember.vjp(f, x, y)
    np.testing.assert_allclose(out, np.sin(x) * y)
    assert len(traces) == 1 and len(sin_calls) == 1
    c1, c2 = rng.standard_normal(3), rng.standard_normal(3)
    gx1, gy1 = pullback(c1)
    gx2, gy2 = pullback(c2)
    assert len(traces) == 1 and len(sin_calls) == 1  # no retrace, no forward re-run
    np.testing.assert_allclose(gx1, c1 * np.cos(x) * y)
    np.testing.assert_allclose(gy1, c1 * np.sin(x))
    np.testing.assert_allclose(gx2, c2 * np.cos(x) * y)
    np.testing.assert_allclose(gy2, c2 * np.sin(x))
    np.testing.assert_allclose(pullback(3 * c1)[0], 3 * gx1)  # linear in the cotangent


def test_vjp_pytrees_and_has_aux(rng):
    p = {"a": rng.standard_normal(3), "b": rng.standard_normal(3)}

    def f(p):
        return {"prod": p["a"] * p["b"], "sum": jnp.sum(p["a"])}, p["a"] * 10

    out, pullback, aux = ember.vjp(f, p, has_aux=True)
    np.testing.assert_allclose(aux, p["a"] * 10)
    np.testing.assert_allclose(out["prod"], p["a"] * p["b"])
    (g,) = pullback({"prod": np.ones(3), "sum": np.float64(2.0)})
    assert set(g) == {"a", "b"}
    np.testing.assert_allclose(g["a"], p["b"] + 2.0)
    np.testing.assert_allclose(g["b"], p["a"])


def test_vjp_inside_jit(rng):
    def f(x):
        _, pullback = ember.vjp(jnp.sin, x)
        return pullback(jnp.ones_like(x))[0] + pullback(2 * jnp.ones_like(x))[0]

    x = rng.standard_normal(3)
    np.testing.assert_allclose(ember.jit(f)(x), 3 * np.cos(x))


# --- jacrev and hessian ----------------------------------------------------------------------------

def test_jacrev_vector_to_vector(rng):
    A = rng.standard_normal((4, 3))
    x = rng.standard_normal(3)
    J = ember.jacrev(lambda x: jnp.tanh(A @ x))(x)
    np.testing.assert_allclose(J, (1 - np.tanh(A @ x) ** 2)[:, None] * A, rtol=1e-10)


def test_jacrev_matrix_to_vector(rng):
    M, x = rng.standard_normal((2, 3)), rng.standard_normal(3)
    J = ember.jacrev(lambda M: M @ x)(M)
    assert J.shape == (2, 2, 3)
    ref = np.zeros((2, 2, 3))
    for i in range(2):
        ref[i, i] = x
    np.testing.assert_allclose(J, ref)


def test_jacrev_pytree_output_and_argnums(rng):
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    J = ember.jacrev(lambda x, y: {"p": x * y, "s": jnp.sum(x)}, argnums=(0, 1))(x, y)
    assert set(J) == {"p", "s"}
    np.testing.assert_allclose(J["p"][0], np.diag(y))
    np.testing.assert_allclose(J["p"][1], np.diag(x))
    np.testing.assert_allclose(J["s"][0], np.ones(3))
    np.testing.assert_allclose(J["s"][1], np.zeros(3))


def _fd_jacobian_of_grad(f, x, eps=1e-6):
    g = ember.grad(f)
    cols = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        cols.append((g(x + e) - g(x - e)) / (2 * eps))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("name", ["cube", "tanh_affine"])
def test_hessian_matches_finite_differences(name, rng):
    A = rng.standard_normal((3, 4))
    f = {"cube": lambda x: jnp.sum(x**3), "tanh_affine": lambda x: jnp.sum(jnp.tanh(A @ x))}[name]
    x = rng.standard_normal(4)
    H = ember.hessian(f)(x)
    assert H.shape == (4, 4)
    np.testing.assert_allclose(H, _fd_jacobian_of_grad(f, x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    if name == "cube":
        np.testing.assert_allclose(H, np.diag(6 * x))


def test_hessian_two_arguments(rng):
    def f(x, y):
        return jnp.sum(jnp.sin(x) * y**2)

    x, y = rng.standard_normal(3), rng.standard_normal(3)
    (hxx, hxy), (hyx, hyy) = ember.hessian(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(hxx, np.diag(-np.sin(x) * y**2), atol=1e-12)
    np.testing.assert_allclose(hxy, np.diag(2 * np.cos(x) * y), atol=1e-12)
    np.testing.assert_allclose(hyx, np.diag(2 * np.cos(x) * y), atol=1e-12)
    np.testing.assert_allclose(hyy, np.diag(2 * np.sin(x)), atol=1e-12)
    g = ember.jit(ember.grad(f, argnums=(0, 1)))
    eps = 1e-6
    for j, H_row in enumerate([(hxx, hxy), (hyx, hyy)]):  # H[j][k] = d grad_j / d arg_k
        for k in range(2):
            cols = []
            for e in np.eye(3):
                plus = [x, y]
                minus = [x, y]
                plus[k], minus[k] = plus[k] + eps * e, minus[k] - eps * e
                cols.append((g(*plus)[j] - g(*minus)[j]) / (2 * eps))
            np.testing.assert_allclose(H_row[k], np.stack(cols, axis=-1), rtol=1e-5, atol=1e-8)


def test_hessian_of_a_non_scalar_function(rng):
    """Shape out + in + in, as JAX: H[i, j, k] = d2 f_i / dx_j dx_k of f_i = sin(x_i) x_(n-1-i)."""
    x = rng.standard_normal(3)
    H = ember.hessian(lambda x: jnp.sin(x) * x[::-1])(x)
    ref = np.zeros((3, 3, 3))
    for i in range(3):
        r = 2 - i
        ref[i, i, i] -= np.sin(x[i]) * x[r]
        ref[i, i, r] += np.cos(x[i])
        ref[i, r, i] += np.cos(x[i])
    np.testing.assert_allclose(H, ref, atol=1e-12)


def test_hessian_of_a_scalar_costs_no_more_than_jacrev_of_grad(rng):
    """hessian is jacrev(jacrev): the inner one, on a scalar, must be a plain grad (no size-1 vmap)."""
    A, x = rng.standard_normal((5, 4)), rng.standard_normal(4)

    def f(x):
        return jnp.sum(jnp.tanh(A @ x) ** 2)

    H = ember.hessian(f)
    ref = ember.jacrev(ember.grad(f))
    np.testing.assert_allclose(H(x), ref(x), rtol=1e-12)
    assert len(H.lower(x).optimized.nodes) <= len(ref.lower(x).optimized.nodes)


def test_hessian_and_jacrev_with_aux(rng):
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    H, aux = ember.hessian(lambda x: (jnp.sum(x**3), {"twice": x * 2}), has_aux=True)(x)
    np.testing.assert_allclose(H, np.diag(6 * x), atol=1e-12)
    np.testing.assert_allclose(aux["twice"], 2 * x)
    (jy, jx), aux = ember.jacrev(lambda x, y: (x * y**2, jnp.sum(y)), argnums=(1, 0), has_aux=True)(x, y)
    np.testing.assert_allclose(jy, np.diag(2 * x * y), atol=1e-12)
    np.testing.assert_allclose(jx, np.diag(y**2), atol=1e-12)
    np.testing.assert_allclose(aux, np.sum(y))


def test_jacobian_is_jacrev(rng):
    x = rng.standard_normal(3)
    assert ember.jacobian is ember.jacrev
    np.testing.assert_allclose(ember.jacobian(jnp.sin)(x), np.diag(np.cos(x)), atol=1e-12)


def test_grad_of_grad_scalar():
    d2 = ember.grad(ember.grad(jnp.sin))
    for x in (0.3, -1.2, 2.0):
        np.testing.assert_allclose(d2(np.float64(x)), -np.sin(x), rtol=1e-12)
    d3 = ember.grad(ember.grad(ember.grad(lambda x: x**4)))
    np.testing.assert_allclose(d3(np.float64(1.5)), 24 * 1.5)


# --- stop_gradient ------------------------------------------------------------------------------

def test_stop_gradient(rng):
    x = rng.standard_normal(3)
    g = ember.grad(lambda x: jnp.sum(x * ember.stop_gradient(x)))(x)
    np.testing.assert_allclose(g, x)  # not 2x
    g = ember.grad(lambda x: jnp.sum(ember.stop_gradient(jnp.sin(x))))(x)
    np.testing.assert_allclose(g, np.zeros(3))
    tree = ember.stop_gradient({"a": x, "b": (x,)})
    np.testing.assert_allclose(tree["b"][0], x)


# --- jit(grad) is one graph ---------------------------------------------------------------------

def test_jit_of_grad_equals_grad_and_is_one_graph(rng):
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    g = ember.grad(_loss)
    jg = ember.jit(g)
    np.testing.assert_allclose(jg(w, x), g(w, x), rtol=1e-12)
    low = jg.lower(w, x)
    assert "before autodiff" in low.stage_names and "after autodiff" in low.stage_names
    prims = [n.prim.name for n in all_nodes(low.optimized)]
    assert "tanh" in prims  # forward ...
    assert prims.count("dot_general") >= 2  # ... and backward (x.T @ ct) in the same graph
    assert len(low.optimized.outputs) == 1 and low.optimized.outputs[0].aval.shape == (3, 2)
    assert jg.cache_info().misses == 1


def test_grad_with_large_closed_over_constant(rng):
    c = rng.standard_normal(200_000)
    f = lambda p: jnp.sum(c * p) + p**2  # noqa: E731
    p = np.float64(0.5)
    np.testing.assert_allclose(ember.grad(f)(p), c.sum() + 2 * p, rtol=1e-9)
    graph = ember.jit(ember.grad(f)).lower(p).optimized
    big = [n.prim.name for n in all_nodes(graph) if any(v.aval.size >= c.size for v in n.outputs)]
    assert big == []  # the constant is inactive: no cotangent (or any other array) of its size is formed
    assert len(graph.nodes) <= 4
