"""Transformed functions pickle, so they ship to Dask workers: by qualified name where importable (plain
pickle), as their transform and arguments otherwise (closures through cloudpickle), before and after a
first call, never carrying compiled code or a cache; an unpicklable captured value is named."""

import pickle
import subprocess
import sys
import threading

import cloudpickle
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.api import pickle_helpers as H

RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 3))
X = RNG.standard_normal((5, 4))


def _same(a, b):
    for x, y in zip(ember.tree.tree_leaves(a), ember.tree.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["jitted_loss", "clip_gradient"])
def test_module_level_functions_pickle_by_name(name):
    f = getattr(H, name)
    data = pickle.dumps(f)
    assert name.encode() in data and len(data) < 200  # a reference, not the function's code
    assert pickle.loads(data) is f


def test_a_transform_of_an_importable_function_pickles_as_references():
    """`grad_of_loss = grad(loss)` is not under its own name (its __qualname__ is loss's): it pickles as
    the transform and the function, both by name."""
    data = pickle.dumps(H.grad_of_loss)
    assert b"autodiff" in data and b"pickle_helpers" in data and len(data) < 300
    _same(pickle.loads(data)(W, X), H.grad_of_loss(W, X))


def test_jit_of_an_importable_function_pickles_with_plain_pickle():
    f = ember.jit(H.loss, static_argnums=(), donate_argnums=())
    want = f(W, X)  # compiled: the pickle still carries no code or cache
    g = pickle.loads(pickle.dumps(f))
    assert g is not f and g(W, X) == want
    assert g.cache_info().misses == 1 and f.cache_info().misses == 1


def _kinds():
    scale = 0.5  # closed over: these pickle by value through cloudpickle

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2) * scale

    per_sample = ember.vmap(ember.grad(loss), in_axes=(None, 0))
    return {
        "jit": (ember.jit(loss), (W, X)),
        "jit-options": (ember.jit(loss, backend="numpy", optimize=False), (W, X)),
        "grad": (ember.grad(loss), (W, X)),
        "grad-argnums": (ember.grad(loss, argnums=(0, 1)), (W, X)),
        "value_and_grad": (ember.value_and_grad(loss), (W, X)),
        "vmap": (ember.vmap(lambda x: jnp.sin(x) * scale, in_axes=1), (X,)),
        "jacrev": (ember.jacrev(lambda w: jnp.tanh(X @ w) * scale), (W,)),
        "hessian": (ember.hessian(lambda v: jnp.sum(jnp.sin(v) * scale)), (X[0],)),
        "per-sample": (ember.jit(per_sample), (W, X[:, None, :])),
        "custom_vjp": (ember.jit(ember.grad(lambda x: jnp.sum(H.clip_gradient(x * 10.0) * scale))), (X,)),
    }


@pytest.mark.parametrize("kind", list(_kinds()))
@pytest.mark.parametrize("called_first", [False, True])
def test_each_kind_round_trips_through_cloudpickle(kind, called_first):
    f, args = _kinds()[kind]
    if called_first:
        want = f(*args)
    g = cloudpickle.loads(cloudpickle.dumps(f))
    if not called_first:
        want = f(*args)
    _same(g(*args), want)


def test_closures_also_go_through_plain_pickle():
    """Plain pickle takes a closure too: its function travels as embedded cloudpickle bytes."""
    f, args = _kinds()["per-sample"]
    _same(pickle.loads(pickle.dumps(f))(*args), f(*args))


def test_a_custom_vjp_closure_keeps_its_rule():
    lo = -0.25

    @ember.custom_vjp
    def clip(x):
        return x

    clip.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, lo, 1.0),))
    g = cloudpickle.loads(cloudpickle.dumps(ember.grad(lambda x: jnp.sum(clip(x) * -3.0))))
    np.testing.assert_array_equal(g(np.ones(3)), np.full(3, lo))


def test_an_unpicklable_closure_names_the_captured_value():
    lock = threading.Lock()

    def loss(w):
        with lock:
            return jnp.sum(w)

    for f in (ember.jit(loss), ember.grad(loss), ember.jit(ember.vmap(ember.grad(loss)))):
        with pytest.raises(pickle.PicklingError, match=r"closes over `lock` of type lock.*Pass it as an argument"):
            cloudpickle.dumps(f)


WORKER = """
import pickle, sys
import numpy as np
f = pickle.loads(sys.stdin.buffer.read())
print(repr(float(np.asarray(f(np.ones((4, 3)), np.ones((5, 4))).sum()))))
"""


def test_another_process_compiles_and_runs_it():
    """What a Dask worker does: unpickle in a fresh process (no Ember state), call, get the same answer."""
    scale = 2.0
    f = ember.jit(ember.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w)) * scale))
    want = float(np.asarray(f(np.ones((4, 3)), np.ones((5, 4)))).sum())
    done = subprocess.run([sys.executable, "-c", WORKER], input=pickle.dumps(f), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert float(done.stdout.decode()) == want


def test_ember_numpy_and_lax_functions_pickle_by_reference():
    """Functions made by factories (ember.numpy.tanh, ember.lax.add) carry their public names, so a jitted
    closure over them, or they themselves, arrive on a worker as themselves (by value they would lose
    their registrations)."""
    from ember import lax
    from ember.numpy import sum as esum
    from ember.numpy import tanh

    for f in (tanh, esum, jnp.add, jnp.amax, lax.add, lax.erf_inv, ember.nn.relu):
        assert pickle.loads(pickle.dumps(f)) is f
    g = ember.jit(lambda x, act=tanh: esum(act(x)))
    _same(cloudpickle.loads(cloudpickle.dumps(g))(np.ones(3)), g(np.ones(3)))
