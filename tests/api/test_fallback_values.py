"""Outside jit, grad evaluates with values known when Python needs them: `.item()`, `.tolist()` and
sizes of new arrays (`arange(n)`, `zeros(n)`) read them, as in JAX; a differentiated value still
cannot leave the trace as a Python number, and inside jit the concretization error stays."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp


def test_item_and_tolist_read_known_values():
    def f(x, n):
        k = n.item()
        assert n.tolist() == k
        return jnp.sum(x ** k)

    g = ember.grad(f)(np.array([1.0, 2.0]), np.array(3))
    np.testing.assert_allclose(g, [3.0, 12.0])


def test_sizes_of_new_arrays_may_be_known_values():
    def f(x, n):
        return jnp.sum(x * jnp.sum(jnp.arange(n))) + jnp.sum(jnp.zeros(n))

    np.testing.assert_allclose(ember.grad(f)(np.array([1.0, 2.0]), np.array(4)), [6.0, 6.0])
    np.testing.assert_allclose(ember.grad(f)(np.array([1.0, 2.0]), np.array(3)), [3.0, 3.0])


def test_a_differentiated_value_cannot_become_a_python_number():
    with pytest.raises(ember.ConcretizationError, match="gradient"):
        ember.grad(lambda x: x * x.item())(2.0)
    with pytest.raises(ember.ConcretizationError):
        ember.grad(lambda x: jnp.sum(jnp.arange(x)) * x)(3.0)


def test_inside_jit_item_and_sizes_stay_errors():
    with pytest.raises(ember.ConcretizationError, match="item"):
        ember.jit(lambda x: x.item())(np.array(2.0))
    with pytest.raises(ember.ConcretizationError, match="arange"):
        ember.jit(lambda n: jnp.arange(n))(np.array(3))
