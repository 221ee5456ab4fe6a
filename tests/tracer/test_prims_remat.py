"""remat_call (via ember.checkpoint) and checkpoint_name: numpy reference, shape rule errors, VJP
against finite differences and the un-checkpointed function, batching against a loop. Runs on both
backends."""

import numpy as np
import pytest

import ember
from ember.errors import ShapeError
from ember.tracer import prims as P
from tests.helpers import assert_tree_allclose, check_grads, loop_vmap, prim_names

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
THIS_FILE = "test_prims_remat.py"


def total(x):
    return P.reduce_sum(x, tuple(range(len(x.shape))))


def body(w, x):
    """Two products and a nonlinearity whose VJP needs its input (sin), so remat has work to redo."""
    return P.sin(P.dot_general(w, P.tanh(P.dot_general(w, x, (((1,), (0,)), ((), ())))), (((1,), (0,)), ((), ()))))


@pytest.mark.parametrize("shape", [(4,), (4, 3)], ids=str)
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_remat_call_reference(shape, dtype, rng):
    w, x = rng.normal(size=(4, 4)).astype(dtype), rng.normal(size=shape).astype(dtype)
    f = ember.checkpoint(body)
    got = ember.jit(f, optimize=False)(w, x)
    want = np.sin(w @ np.tanh(w @ x))
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == F32 else 1e-12, atol=1e-6)
    np.testing.assert_allclose(ember.jit(f)(w, x), want, rtol=2e-5 if dtype == F32 else 1e-12, atol=1e-6)
    assert "remat_call" in prim_names(f, w, x)
    params = next(n.params for n in ember.make_graph(f)(w, x).nodes if n.prim.name == "remat_call")
    (eager,) = P.remat_call_p.bind(w, x, **params)  # bound outside any trace: the numpy reference
    np.testing.assert_allclose(eager, want, rtol=2e-6 if dtype == F32 else 1e-12, atol=1e-6)


def test_remat_call_shape_rule_checks_operands():
    f = ember.checkpoint(body)
    params = next(n.params for n in ember.make_graph(f)(np.zeros((4, 4)), np.zeros(4)).nodes
                  if n.prim.name == "remat_call")
    with pytest.raises(ShapeError) as info:
        ember.jit(lambda a, b: P.remat_call_p.bind(a, b, **params))(np.zeros((4, 4), F32), np.zeros(4))
    msg = str(info.value)
    assert "body" in msg and "f32[4,4]" in msg and "f64[4,4]" in msg and THIS_FILE in msg
    with pytest.raises(ShapeError, match="takes 2 operands, got 1"):
        ember.jit(lambda a: P.remat_call_p.bind(a, **params))(np.zeros((4, 4)))


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable", "everything_saveable"])
def test_remat_call_vjp_matches_finite_differences_and_the_plain_function(policy, rng):
    w, x = rng.normal(size=(4, 4)) / 2, rng.normal(size=(4, 3))
    f = ember.checkpoint(body, policy=getattr(ember.checkpoint_policies, policy))
    grads = check_grads(lambda a, b: total(f(a, b)), (w, x), argnums=(0, 1))
    plain = ember.grad(lambda a, b: total(body(a, b)), argnums=(0, 1))(w, x)
    assert_tree_allclose(grads, plain, rtol=1e-12, atol=1e-12)


def test_remat_call_second_derivative(rng):
    x = rng.normal(size=(5,))
    f = ember.checkpoint(lambda a: P.sin(P.mul(a, a)))
    h = ember.grad(lambda a: total(ember.grad(lambda b: total(f(b)))(a)))(x)
    np.testing.assert_allclose(h, 2 * np.cos(x * x) - 4 * x * x * np.sin(x * x), rtol=1e-12)


@pytest.mark.parametrize("in_axes,out_axes", [((None, 0), 0), ((None, 1), 1), ((0, 0), 0), ((0, None), -1)],
                         ids=str)
def test_remat_call_batching(in_axes, out_axes, rng):
    f = ember.checkpoint(body)

    def shape(ax, base):
        return base if ax is None else base[:ax] + (2,) + base[ax:]

    w, x = rng.normal(size=shape(in_axes[0], (4, 4))), rng.normal(size=shape(in_axes[1], (4, 3)))
    got = ember.vmap(f, in_axes, out_axes)(w, x)
    assert_tree_allclose(got, loop_vmap(f, in_axes, (w, x), out_axes), rtol=1e-12, atol=1e-12)
    assert "remat_call" in prim_names(ember.vmap(f, in_axes, out_axes), w, x)  # still rematerialized
    per_example = ember.grad(lambda a, b: total(f(a, b)), argnums=(0, 1))
    assert_tree_allclose(ember.vmap(per_example, in_axes, out_axes)(w, x),
                         loop_vmap(per_example, in_axes, (w, x), out_axes), rtol=1e-12, atol=1e-12)


# --- checkpoint_name -------------------------------------------------------------------------------

def named(x):
    return P.mul(P.checkpoint_name(P.sin(x), "s"), x)


def test_checkpoint_name_reference_and_errors(rng):
    x = rng.normal(size=(2, 3)).astype(F32)
    np.testing.assert_allclose(ember.jit(named, optimize=False)(x), np.sin(x) * x, rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(P.checkpoint_name(x, "x"), x)
    assert "checkpoint_name" in prim_names(named, x)
    with pytest.raises(TypeError, match="the name must be a str, got int 3") as info:
        ember.jit(lambda a: P.checkpoint_name(a, 3))(x)
    assert THIS_FILE in str(info.value)


def test_checkpoint_name_vjp_and_batching(rng):
    x = rng.normal(size=(3, 4))
    check_grads(lambda a: total(named(a)), (x,))
    assert_tree_allclose(ember.vmap(named, 1, 1)(x), loop_vmap(named, 1, (x,), 1), rtol=1e-12, atol=1e-12)
    assert "checkpoint_name" in prim_names(ember.vmap(named, 1, 1), x)


COVERED = {name: {"remat_call", "checkpoint_name"} for name in ("reference", "errors", "vjp", "batch")}
