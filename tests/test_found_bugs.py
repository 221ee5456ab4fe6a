"""Bugs the random-program tests (tests/test_random_programs.py) and their probes against JAX found,
kept as minimal reproducers (all fixed; a new open one is marked xfail(strict=True) until its fix)."""

import numpy as np
import pytest

import ember


@pytest.mark.parametrize("index", [np.array([1, 0]), [1, 0]], ids=["ndarray", "list"])
def test_integer_array_index_before_ellipsis_under_jit(index):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = ember.jit(lambda a: a[index, ...])(x)
    np.testing.assert_array_equal(out, x[np.asarray(index), ...])


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_reciprocal_of_integers_is_float_as_in_jax(jitted):
    import ember.numpy as enp

    fn = ember.jit(enp.reciprocal) if jitted else enp.reciprocal
    out = fn(np.array([1, 2, 4], np.int32))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [1.0, 0.5, 0.25])


def test_at_set_with_duplicate_indices_differentiates_only_the_winner():
    import ember.numpy as enp

    x = np.array([1.0, 2.0, 3.0])
    v = np.array([5.0, 7.0])
    idx = np.array([0, 0])
    assert ember.jit(lambda a, u: a.at[idx].set(u))(x, v)[0] == 7.0  # the last update wins
    gx, gv = ember.grad(lambda a, u: enp.sum(a.at[idx].set(u) * 2.0), argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(gx, [0.0, 2.0, 2.0])
    np.testing.assert_array_equal(gv, [0.0, 2.0])


@pytest.mark.parametrize("use", ["index", "at"])
def test_asarray_of_a_constant_supports_traced_indexing_and_at(use):
    import ember.numpy as enp

    c = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    if use == "index":
        fn, expected = (lambda k: enp.asarray(c)[k]), c[1]
    else:
        fn, expected = (lambda k: enp.asarray(c).at[k].set(0.0)), np.where(np.arange(3)[:, None] == 1, 0.0, c)
    np.testing.assert_array_equal(ember.jit(fn)(np.int32(1)), expected)
