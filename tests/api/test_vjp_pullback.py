"""The pullback `vjp` returns is a function like any other: it can be jitted, vmapped (rows of the
Jacobian), differentiated, returned from jit and passed through pytrees (its leaves are the
residuals), as in JAX."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.tree import tree_flatten, tree_unflatten
from tests.helpers import assert_tree_allclose


def f(x, w):
    return jnp.tanh(w @ x) * x[::-1]


@pytest.fixture
def xw(rng):
    return rng.standard_normal(3), rng.standard_normal((3, 3))


def test_vmap_of_pullback_gives_jacobian_rows(xw):
    x, w = xw
    _, pb = ember.vjp(f, x, w)
    jx, jw = ember.vmap(pb)(np.eye(3))
    want_x, want_w = ember.jacrev(f, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(jx, want_x, rtol=1e-12)
    np.testing.assert_allclose(jw, want_w, rtol=1e-12)


def test_jit_of_pullback_matches_calling_it(xw, rng):
    x, w = xw
    _, pb = ember.vjp(f, x, w)
    ct = rng.standard_normal(3)
    assert_tree_allclose(ember.jit(pb)(ct), pb(ct), rtol=1e-12, atol=0)
    np.testing.assert_allclose(pb(ct)[0], ct @ ember.jacrev(f)(x, w), rtol=1e-12)


def test_pullback_differentiated_with_respect_to_the_cotangent(xw):
    x, w = xw
    _, pb = ember.vjp(f, x, w)
    g = ember.grad(lambda ct: jnp.sum(pb(ct)[0]))(np.ones(3))
    np.testing.assert_allclose(g, ember.jacrev(f)(x, w) @ np.ones(3), rtol=1e-12)


def test_pullback_returned_from_jit(xw, rng):
    x, w = xw
    out, pb = ember.jit(lambda x, w: ember.vjp(f, x, w))(x, w)
    out_ref, pb_ref = ember.vjp(f, x, w)
    np.testing.assert_allclose(out, out_ref, rtol=1e-12)
    ct = rng.standard_normal(3)
    assert_tree_allclose(pb(ct), pb_ref(ct), rtol=1e-12, atol=0)
    x2 = x + 1.0  # a second call reuses the cached trace with new residuals
    _, pb2 = ember.jit(lambda x, w: ember.vjp(f, x, w))(x2, w)
    assert_tree_allclose(pb2(ct), ember.vjp(f, x2, w)[1](ct), rtol=1e-12, atol=0)


def test_pullback_closing_over_a_value_of_the_enclosing_trace(rng):
    """A traced value the function closes over becomes a residual, not a const of a finished trace."""
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    out, pb = ember.jit(lambda x, y: ember.vjp(lambda a: jnp.sin(a) * y, x))(x, y)
    np.testing.assert_allclose(out, np.sin(x) * y, rtol=1e-12)
    (g,) = pb(np.ones(4))
    np.testing.assert_allclose(g, np.cos(x) * y, rtol=1e-12)


def test_pullback_is_a_pytree_of_its_residuals(xw, rng):
    x, w = xw
    _, pb = ember.vjp(f, x, w)
    leaves, tree = tree_flatten({"pb": pb, "k": 1.0})
    assert all(isinstance(leaf, (np.ndarray, float)) for leaf in leaves) and len(leaves) > 1
    rebuilt = tree_unflatten(tree, leaves)["pb"]
    ct = rng.standard_normal(3)
    assert_tree_allclose(rebuilt(ct), pb(ct), rtol=1e-12, atol=0)
    through_jit = ember.jit(lambda p, c: p(c))(pb, ct)  # as an argument of a jitted function
    assert_tree_allclose(through_jit, pb(ct), rtol=1e-12, atol=0)


def test_pullback_with_aux_and_pytree_output_through_jit(rng):
    x = rng.standard_normal(3)

    def g(x):
        return {"s": jnp.sin(x), "c": jnp.sum(jnp.cos(x))}, x * 2

    out, pb, aux = ember.jit(lambda x: ember.vjp(g, x, has_aux=True))(x)
    np.testing.assert_allclose(aux, 2 * x)
    (gx,) = pb({"s": np.ones(3), "c": np.float64(2.0)})
    np.testing.assert_allclose(gx, np.cos(x) - 2 * np.sin(x), rtol=1e-12)
    (gv,) = ember.vmap(lambda s: pb({"s": s, "c": np.float64(0.0)}))(np.eye(3))
    np.testing.assert_allclose(gv, np.diag(np.cos(x)), rtol=1e-12)


def test_pullback_with_batched_residuals_raises(rng):
    xs = rng.standard_normal((2, 3))
    pb = ember.vmap(lambda x: ember.vjp(jnp.sin, x)[1])(xs)
    with pytest.raises(ember.TransformError, match="batched residuals") as info:
        pb(np.ones(3))
    assert "test_vjp_pullback.py" in str(info.value)
