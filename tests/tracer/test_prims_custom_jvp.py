"""custom_jvp_call (via ember.custom_jvp): numpy reference, its shape rule's errors, its VJP (the rule
linearized and transposed), its JVP (the rule) and its batching, as the other test_prims_* files test
each primitive; the registry check in test_prims_custom.py reads COVERED."""

import numpy as np
import pytest

import ember
from ember.errors import ShapeError
from ember.tracer import prims as P
from tests.helpers import assert_tree_allclose, check_grads, loop_vmap, prim_names

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
THIS_FILE = "test_prims_custom_jvp.py"


def total(x):
    return P.reduce_sum(x, tuple(range(len(x.shape))))


def make_scaled_sin(scale: float = 1.0):
    """f(x, y) = sin(x) * y whose rule scales its x part by `scale` (1: the true derivative); the rule
    calls f itself, as rules do."""
    @ember.custom_jvp
    def f(x, y):
        return P.mul(P.sin(x), y)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), P.add(P.mul(P.mul(P.mul(P.cos(x), tx), y), scale), P.mul(P.sin(x), ty))

    return f


@pytest.mark.parametrize("shape", [(), (0, 3), (2, 3)], ids=str)
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_custom_jvp_call_reference(shape, dtype, rng):
    f = make_scaled_sin()
    x, y = rng.normal(size=shape).astype(dtype), rng.normal(size=shape).astype(dtype)
    got = ember.jit(f, optimize=False)(x, y)
    want = np.sin(x.astype(np.float64)) * y
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == F32 else 1e-12, atol=1e-6)
    np.testing.assert_allclose(f(x, y), want, rtol=2e-6 if dtype == F32 else 1e-12, atol=1e-6)  # eager
    assert "custom_jvp_call" in prim_names(f, x, y)


def test_custom_jvp_call_shape_rule_checks_operands():
    f = make_scaled_sin()
    params = next(n.params for n in ember.make_graph(f)(np.zeros(3), np.zeros(3)).nodes
                  if n.prim.name == "custom_jvp_call")
    with pytest.raises(ShapeError) as info:
        ember.jit(lambda a, b: P.custom_jvp_call_p.bind(a, b, **params))(np.zeros(3, F32), np.zeros(3))
    msg = str(info.value)
    assert "custom_jvp" in msg and "f32[3]" in msg and "f64[3]" in msg and THIS_FILE in msg


@pytest.mark.parametrize("shape", [(), (5,)], ids=str)
def test_custom_jvp_call_vjp_matches_finite_differences(shape, rng):
    f = make_scaled_sin()
    x, y = rng.normal(size=shape), rng.normal(size=shape)
    check_grads(lambda a, b: total(f(a, b)), (x, y), argnums=(0, 1))


def test_custom_jvp_call_vjp_and_jvp_use_the_rule_at_every_order(rng):
    f = make_scaled_sin(scale=3.0)
    x, y, t = rng.normal(size=(4,)), rng.normal(size=(4,)), rng.normal(size=(4,))
    gx, gy = ember.grad(lambda a, b: total(f(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, 3 * np.cos(x) * y, rtol=1e-12)
    np.testing.assert_allclose(gy, np.sin(x), rtol=1e-12)
    np.testing.assert_allclose(ember.jvp(lambda a: f(a, y), (x,), (t,))[1], 3 * np.cos(x) * y * t, rtol=1e-12)
    # d/dx of f(x, y)**2 / 2 = f * f_x; again: f_x**2 + f * f_xx, every f_x by the rule (3 cos(x) y)
    h = ember.grad(lambda a: total(ember.grad(lambda b: P.mul(total(P.mul(f(b, y), f(b, y))), 0.5))(a)))(x)
    np.testing.assert_allclose(h, (3 * np.cos(x) * y) ** 2 - np.sin(x) * y * 3 * np.sin(x) * y, rtol=1e-12)


@pytest.mark.parametrize("in_axes,out_axes", [((0, 0), 0), ((1, None), 1), ((None, -1), -1)], ids=str)
def test_custom_jvp_call_batching(in_axes, out_axes, rng):
    f = make_scaled_sin(scale=2.0)

    def shape(ax):
        return (2, 4) if ax is None else {0: (3, 2, 4), 1: (2, 3, 4), -1: (2, 4, 3)}[ax]

    x, y = rng.normal(size=shape(in_axes[0])), rng.normal(size=shape(in_axes[1]))
    got = ember.vmap(f, in_axes, out_axes)(x, y)
    assert_tree_allclose(got, loop_vmap(f, in_axes, (x, y), out_axes), rtol=1e-12, atol=1e-12)
    assert "custom_jvp_call" in prim_names(ember.vmap(f, in_axes, out_axes), x, y)
    g = ember.vmap(ember.grad(lambda a, b: total(f(a, b))), in_axes)(x, y)
    assert_tree_allclose(g, loop_vmap(ember.grad(lambda a, b: total(f(a, b))), in_axes, (x, y)), rtol=1e-12)


COVERED = {
    "reference": {"custom_jvp_call"},
    "errors": {"custom_jvp_call"},
    "vjp": {"custom_jvp_call"},
    "batch": {"custom_jvp_call"},
}
