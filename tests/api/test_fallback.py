"""Python control flow on values outside jit: grad, value_and_grad, vjp, jacrev and hessian evaluate
with values known when tracing needs them (for that call only, on the numpy reference), as JAX does;
inside jit the concretization error stays."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp


def branchy(x):
    return 3 * x**2 if x < 3 else -4 * x


def test_grad_of_a_branch_on_a_value():
    assert ember.grad(branchy)(2.0) == 12.0
    assert ember.grad(branchy)(5.0) == -4.0


def test_two_calls_with_one_signature_take_different_branches():
    g = ember.grad(branchy)
    x1, x2 = np.float64(1.0), np.float64(4.0)
    assert g(x1) == 6.0 and g(x2) == -4.0 and g(x1) == 6.0
    assert g.cache_info().size == 0  # nothing cached by signature


def test_value_and_grad_with_a_keyword_flag():
    def loss(w, x, training=False):
        y = jnp.sum(w * x)
        if training:
            y = y + 0.5 * jnp.sum(w**2)
        return y

    w, x = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    v, g = ember.value_and_grad(loss)(w, x, training=True)
    np.testing.assert_allclose(v, 1.0 + 2.5)
    np.testing.assert_allclose(g, x + w)
    v, g = ember.value_and_grad(loss)(w, x, training=False)
    np.testing.assert_allclose(g, x)


def test_while_loop_on_a_value():
    def f(x):
        while x < 10.0:
            x = x * 2.0
        return x

    assert ember.grad(f)(3.0) == 4.0  # 3 -> 6 -> 12: two doublings
    assert ember.grad(f)(0.75) == 16.0


def test_int_of_a_value_as_a_loop_count():
    def f(x, n):
        out = x
        for _ in range(int(n) - 1):
            out = out * x
        return out

    assert ember.grad(f)(2.0, np.int32(3)) == 12.0
    assert ember.grad(f)(2.0, np.int32(4)) == 32.0


def test_vjp_of_a_branching_function():
    def f(x):
        return jnp.sin(x) if jnp.sum(x) > 0 else jnp.cos(x)

    x = np.array([0.5, 1.0])
    out, pullback = ember.vjp(f, x)
    np.testing.assert_allclose(out, np.sin(x))
    np.testing.assert_allclose(pullback(np.ones(2))[0], np.cos(x))
    out, pullback = ember.vjp(f, -x)
    np.testing.assert_allclose(pullback(np.ones(2))[0], -np.sin(-x))


def test_jacrev_and_hessian_of_branching_functions():
    def f(x):
        return x**3 if jnp.sum(x) > 0 else -x

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(ember.jacrev(f)(x), np.diag(3 * x**2))
    np.testing.assert_allclose(ember.jacrev(f)(-x), -np.eye(2))

    def s(x):
        return jnp.sum(x**3) if x[0] > 0 else jnp.sum(x**2)

    np.testing.assert_allclose(ember.hessian(s)(x), np.diag(6 * x))
    np.testing.assert_allclose(ember.hessian(s)(-x), 2 * np.eye(2))


def test_grad_of_grad_of_a_branch():
    gg = ember.grad(ember.grad(branchy))
    assert gg(1.0) == 6.0 and gg(4.0) == 0.0


def test_a_function_without_branches_keeps_the_compiled_cache():
    g = ember.grad(lambda x: jnp.sum(jnp.sin(x)))
    x = np.linspace(0, 1, 3)
    g(x)
    g(x + 1)
    info = g.cache_info()
    assert info.misses == 1 and info.hits == 1 and info.size == 1


def test_inside_jit_the_error_stays():
    with pytest.raises(ember.ConcretizationError) as e:
        ember.jit(ember.grad(branchy))(2.0)
    assert "test_fallback.py:" in str(e.value)
    with pytest.raises(ember.ConcretizationError):
        ember.jit(lambda x: ember.grad(branchy)(x) * 2)(2.0)


def test_vmap_still_cannot_branch_on_batched_values():
    with pytest.raises(ember.ConcretizationError):
        ember.vmap(ember.grad(branchy))(np.array([1.0, 4.0]))
    # an unmapped argument keeps its value, as in JAX
    out = ember.vmap(lambda x, k: x * 2 if k > 0 else x, in_axes=(0, None))(np.arange(3.0), 1.0)
    np.testing.assert_allclose(out, 2 * np.arange(3.0))


def test_a_jitted_function_called_from_a_fallback_still_cannot_branch():
    inner = ember.jit(branchy)
    with pytest.raises(ember.ConcretizationError):
        ember.grad(lambda x: inner(x) if x > 0 else x)(2.0)
    ok = ember.jit(lambda x: x * 3)
    assert ember.grad(lambda x: ok(x) if x > 0 else x)(2.0) == 3.0


def test_fallback_outputs_are_fresh_arrays():
    x = np.array([1.0, 2.0])
    v, g = ember.value_and_grad(lambda w, flag: jnp.sum(w) if flag else 0.0 * jnp.sum(w), has_aux=False)(x, True)
    assert v == 3.0
    np.testing.assert_allclose(g, np.ones(2))
    out = ember.vmap(lambda a, k: a if k > 0 else -a, in_axes=(0, None))(x, 1.0)
    assert not np.shares_memory(out, x)


def test_a_signature_that_needed_values_skips_the_failing_trace():
    calls = []

    def f(x):
        calls.append(1)
        return branchy(x)

    g = ember.grad(f)
    g(2.0)
    assert len(calls) == 2  # the abstract trace that failed, then the evaluation with values known
    assert g(5.0) == -4.0 and len(calls) == 3
    assert g(np.float32(2.0)) == 12.0 and len(calls) == 5  # a new signature tries the compiled path again


def test_converting_a_differentiated_value_raises_instead_of_losing_its_gradient():
    def f(x, y):
        if x > 0:  # bool, int and index of values stay allowed (JAX too)
            return x * float(y) + x * int(x)
        return x

    assert ember.grad(f)(2.0, 3.0) == 5.0  # y is not differentiated: float(y) is fine
    for fun in (lambda x: x * float(x) if x > 0 else x, lambda x: jnp.sum(np.asarray(x) * x) if x > 0 else x):
        with pytest.raises(ember.ConcretizationError, match="lose its gradient") as e:
            ember.grad(fun)(2.0)
        assert "test_fallback.py:" in str(e.value)
    with pytest.raises(ember.ConcretizationError, match="lose its gradient"):
        ember.jacrev(lambda x: x * float(jnp.sum(x)) if x[0] > 0 else x)(np.ones(2))
    stopped = ember.grad(lambda x: x * float(ember.stop_gradient(x)) if x > 0 else x)(2.0)
    assert stopped == 2.0
