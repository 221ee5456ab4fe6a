"""custom_vjp's primal output under differentiation comes from `fwd`, as in JAX (checked against
jax.custom_vjp: values and gradients, eagerly, under jit, vmap and grad of grad), the undecorated
function's when nothing differentiates it; and a `fwd` whose output differs in shape or dtype from the
function's raises a TypeError naming both, however the function is called (JAX raises only under
grad of jit)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as enp

jax = pytest.importorskip("jax", reason="jax.custom_vjp is the reference")
jnp = jax.numpy


def _scaled(cv, np_):
    """The issue's example: f(x) = 10x, but fwd says 2x; bwd passes the cotangent through."""
    @cv
    def f(x):
        return 10.0 * x

    f.defvjp(lambda x: (2.0 * x, x), lambda r, g: (g,))
    return f


def _squared(cv, np_):
    """fwd computes another function (x**2 for sin x) and bwd its derivative from the residual."""
    @cv
    def f(x):
        return np_.sin(x)

    f.defvjp(lambda x: (x * x, x), lambda r, g: (2.0 * r * g,))
    return f


def _calls_itself(cv, np_):
    """fwd calls the function and adds one: differentiating fwd's output again meets the rule (3 e^x)."""
    @cv
    def f(x):
        return np_.exp(x)

    f.defvjp(lambda x: (f(x) + 1.0, x), lambda r, g: (3.0 * np_.exp(r) * g,))
    return f


def _own_rule(cv, np_):
    """The usual pattern, fwd returning the function's own output, with a rule unlike its derivative:
    JAX meets the rule at every order of differentiation."""
    @cv
    def f(x):
        return np_.sin(x)

    f.defvjp(lambda x: (f(x), x), lambda r, g: (np_.exp(r) * g,))
    return f


def _pair(cv, np_):
    """Two outputs (a tuple), both taken from fwd."""
    @cv
    def f(x):
        return x, 2.0 * x

    f.defvjp(lambda x: ((x + 1.0, 3.0 * x), x), lambda r, g: (g[0] + r * g[1],))
    return f


def _loss_of(make, np_, cv):
    f = make(cv, np_)
    if make is _pair:
        return lambda x: np_.sum(f(x)[0] * f(x)[1])
    return lambda x: np_.sum(f(x) ** 2)


MAKERS = [_scaled, _squared, _calls_itself, _own_rule, _pair]
X = np.array([0.3, -1.2, 2.0], dtype=np.float32)
XS = np.stack([X, X * 0.5 - 0.25]).astype(np.float32)


def _both(make):
    return _loss_of(make, enp, ember.custom_vjp), _loss_of(make, jnp, jax.custom_vjp)


def _close(got, want, what):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-6, err_msg=what)


def test_the_issue_example():
    f = _scaled(ember.custom_vjp, enp)
    value, grad = ember.value_and_grad(lambda x: f(x) ** 2)(3.0)
    assert (float(value), float(grad)) == (36.0, 12.0)
    assert float(f(3.0)) == 30.0  # not differentiated: the function's own output


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__)
def test_value_and_grad_match_jax(make):
    ours, theirs = _both(make)
    want = jax.value_and_grad(theirs)(X)
    _close(ember.value_and_grad(ours)(X), want, "value_and_grad")
    _close(ember.jit(ember.value_and_grad(ours))(X), want, "jit(value_and_grad)")
    _close(ember.vmap(ember.value_and_grad(ours))(XS), jax.vmap(jax.value_and_grad(theirs))(XS),
           "vmap(value_and_grad)")


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__)
def test_grad_of_grad_matches_jax(make):
    ours, theirs = _both(make)
    x = X[1]
    want = jax.grad(jax.grad(theirs))(x)
    _close(ember.grad(ember.grad(ours))(x), want, "grad(grad)")
    _close(ember.jit(ember.grad(ember.grad(ours)))(x), want, "jit(grad(grad))")
    _close(ember.vmap(ember.grad(ember.grad(ours)))(X), jax.vmap(jax.grad(jax.grad(theirs)))(X), "vmap(grad(grad))")
    # third and fourth order: fwd's output, differentiated again, meets the rule wherever fwd calls the function
    g3, j3 = ember.grad(ember.grad(ember.grad(ours))), jax.grad(jax.grad(jax.grad(theirs)))
    _close(g3(x), j3(x), "grad(grad(grad))")
    _close(ember.jit(ember.grad(g3))(x), jax.grad(j3)(x), "jit of the fourth derivative")
    # the value of an inner value_and_grad, differentiated again
    inner = lambda vg: lambda x: vg(x)[0]  # noqa: E731
    _close(ember.grad(inner(ember.value_and_grad(ours)))(x), jax.grad(inner(jax.value_and_grad(theirs)))(x),
           "grad of an inner value")


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__)
def test_vjp_primal_and_undifferentiated_value(make):
    ours, theirs = make(ember.custom_vjp, enp), make(jax.custom_vjp, jnp)
    out, _ = ember.vjp(ours, X)
    _close(out, jax.vjp(theirs, X)[0], "vjp's primal output")
    _close(ours(X), theirs(X), "eager call")
    _close(ember.jit(ours)(X), jax.jit(theirs)(X), "jit call")
    _close(ember.vmap(ours)(XS), jax.vmap(theirs)(XS), "vmap call")


def _bad_shape():
    @ember.custom_vjp
    def f(x):
        return enp.sum(x)

    f.defvjp(lambda x: (x, x), lambda r, g: (g * enp.ones_like(r),))
    return f


def _bad_dtype():
    @ember.custom_vjp
    def f(x):
        return x * 2.0

    f.defvjp(lambda x: (x.astype(np.int32), x), lambda r, g: (g,))
    return f


@pytest.mark.parametrize("make, words", [(_bad_shape, ("shape (3,)", "shape ()")),
                                         (_bad_dtype, ("dtype int32", "dtype float32"))],
                         ids=["shape", "dtype"])
@pytest.mark.parametrize("how", ["eager", "jit", "grad", "jit(grad)", "vmap"])
def test_fwd_output_must_match_the_function(make, words, how):
    f = make()
    call = {"eager": f, "jit": ember.jit(f), "grad": ember.grad(lambda x: enp.sum(f(x))),
            "jit(grad)": ember.jit(ember.grad(lambda x: enp.sum(f(x)))), "vmap": ember.vmap(f)}[how]
    with pytest.raises(TypeError) as e:
        call(XS if how == "vmap" else X)
    msg = str(e.value)
    assert "fwd" in msg and all(w in msg for w in words), msg


def test_eager_check_runs_once_per_signature():
    """An eager call traces fwd to check it once per argument signature, not on every call."""
    calls = []

    @ember.custom_vjp
    def f(x):
        return 2.0 * x

    def fwd(x):
        calls.append(1)
        return f(x), None

    f.defvjp(fwd, lambda r, g: (2.0 * g,))
    for _ in range(3):
        np.testing.assert_allclose(f(X), 2 * X)
    f(XS)
    assert len(calls) == 2
