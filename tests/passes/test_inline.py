"""The inline pass: custom_vjp_call never reaches a backend, whatever path built the graph."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.passes.inline import inline
from tests.helpers import all_nodes

SCALE = np.array([1.0, 2.0, 3.0])


@ember.custom_vjp
def clip_grad(x):
    return jnp.sin(x) * SCALE  # closes over an array: a const of the primal subgraph


def _fwd(x):
    return clip_grad(x), jnp.cos(x)


def _bwd(cos_x, ct):
    return (jnp.clip(ct * cos_x * SCALE, -0.5, 0.5),)


clip_grad.defvjp(_fwd, _bwd)


@ember.custom_vjp
def outer(x):
    return clip_grad(x * 2.0) + 1.0  # a custom_vjp inside a custom_vjp's primal


outer.defvjp(lambda x: (outer(x), x), lambda x, ct: (ct * 3.0,))


def _jit(f):
    return ember.jit(f)


def _grad(f):
    return ember.jit(ember.grad(lambda x: jnp.sum(f(x))))


def _vmap(f):
    return ember.jit(ember.vmap(f))


def _optimize_false(f):
    return ember.jit(f, optimize=False)


@pytest.mark.parametrize("fn", [clip_grad, outer, lambda x: outer(clip_grad(x))], ids=["plain", "nested", "chain"])
@pytest.mark.parametrize("wrap", [_jit, _grad, _vmap, _optimize_false])
def test_no_custom_vjp_call_after_lowering(fn, wrap):
    x = np.array([0.3, -1.2, 2.0])
    args = (np.stack([x, 2 * x]),) if wrap is _vmap else (x,)
    f = wrap(fn)
    low = f.lower(*args)
    assert "custom_vjp_call" in {n.prim.name for n in all_nodes(low.graph)} or wrap is _grad
    assert "custom_vjp_call" not in {n.prim.name for n in all_nodes(low.optimized)}
    low.optimized.verify()
    if wrap is _vmap:  # values as the user's functions run eagerly, row by row
        np.testing.assert_allclose(f(*args), np.stack([fn(row) for row in args[0]]), rtol=1e-12)
    elif wrap is not _grad:
        np.testing.assert_allclose(f(*args), fn(*args), rtol=1e-12)


def test_inlined_values_and_gradients_unchanged():
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(ember.jit(outer)(x), np.sin(2 * x) * SCALE + 1.0, rtol=1e-12)
    np.testing.assert_allclose(ember.jit(clip_grad)(x), np.sin(x) * SCALE, rtol=1e-12)
    g = ember.grad(lambda x: jnp.sum(clip_grad(x)))(x)
    np.testing.assert_allclose(g, np.clip(np.cos(x) * SCALE, -0.5, 0.5), rtol=1e-12)
    np.testing.assert_allclose(ember.grad(lambda x: jnp.sum(outer(x)))(x), 3.0 * np.ones(3))
    batched = ember.vmap(outer)(np.stack([x, -x]))
    np.testing.assert_allclose(batched, np.sin(2 * np.stack([x, -x])) * SCALE + 1.0, rtol=1e-12)


def test_inline_keeps_user_lines_and_lifts_subgraph_consts():
    x = np.ones(3)
    traced = ember.make_graph(outer)(x)
    flat = inline(traced).verify()
    assert [n.prim.name for n in flat.nodes] == ["mul", "sin", "mul", "add"]
    assert all(n.loc and "test_inline.py" in n.loc for n in flat.nodes)
    assert any(val is not None and np.array_equal(val, SCALE) for val in flat.const_values)
    assert inline(flat) is flat  # nothing to inline: the same graph


def test_inline_is_the_first_recorded_stage():
    low = ember.jit(clip_grad).lower(np.ones(3))
    assert low.stage_names[1] == "after inline"
    assert "custom_vjp_call" not in low.text("after inline")
