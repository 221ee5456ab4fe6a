"""Bad arguments raise JAX's exception classes, with messages that say what is wrong and name the
user's line (this file); names jax.random has and Ember lacks say why."""

from __future__ import annotations

import numpy as np
import pytest

import ember.random as random

K = np.array([0, 42], np.uint32)
HERE = "test_errors.py:"


@pytest.mark.parametrize("call, exc, match", [
    (lambda: random.normal(np.zeros(3, np.uint32)), TypeError, r"shape to end with \(2,\)"),
    (lambda: random.normal(np.zeros(2, np.int32)), TypeError, "key_data.dtype = uint32"),
    (lambda: random.normal(3), TypeError, "key_data"),
    (lambda: random.normal([0, 1]), TypeError, "unexpected PRNG key type"),
    (lambda: random.normal(random.split(K)), ValueError, r"accepts a single key.*shape \(2,\).*vmap"),
    (lambda: random.split(random.split(random.key(0))), ValueError, "split accepts a single key"),
    (lambda: random.fold_in(K, np.arange(2)), TypeError, "fold_in accepts a scalar"),
    (lambda: random.normal(K, (2,), np.int32), ValueError, "must be a float dtype, got int32"),
    (lambda: random.uniform(K, (2,), np.uint8), ValueError, "must be a float dtype"),
    (lambda: random.randint(K, (2,), 0, 5, np.float32), TypeError, "randint only accepts integer dtypes"),
    (lambda: random.bits(K, (2,), np.int32), ValueError, "must be an unsigned int dtype"),
    (lambda: random.normal(K, (2.0,)), TypeError, "1D sequences of concrete values of integer type"),
    (lambda: random.normal(K, (-1,)), TypeError, "negative dimension"),
    (lambda: random.uniform(K, (2,), minval=np.zeros(3)), TypeError, r"minval of shape \(3,\)"),
    (lambda: random.randint(K, (2,), np.zeros(3, np.int32), 5), ValueError, "broadcast-compatible"),
    (lambda: random.truncated_normal(K, np.zeros(2), 1.0, (3,)), ValueError, "broadcast-compatible"),
    (lambda: random.gamma(K, np.ones(3), (2,)), ValueError, "broadcast-compatible"),
    (lambda: random.bernoulli(K, 1), TypeError, "must have a floating dtype"),
    (lambda: random.bernoulli(K, 0.5, mode="mid"), ValueError, "expected 'high' or 'low'"),
    (lambda: random.gumbel(K, mode="max"), ValueError, "valid mode"),
    (lambda: random.categorical(K, np.zeros((2, 3)), shape=(4,)), ValueError, "broadcast-compatible"),
    (lambda: random.categorical(K, np.zeros(3), shape=(4,), replace=False), ValueError, r"\(4\) cannot exceed"),
    (lambda: random.categorical(K, np.zeros(3), axis=1), ValueError, "out of bounds"),
    (lambda: random.dirichlet(K, 1.0), ValueError, "alpha.ndim >= 1"),
    (lambda: random.normal(K, (2,), "float128"), TypeError, "not supported"),
    (lambda: random.multivariate_normal(K, np.zeros(3), np.eye(3), method="lu"), ValueError, "method must be one"),
    (lambda: random.multivariate_normal(K, 0.0, np.eye(3)), ValueError, "mean.ndim >= 1"),
    (lambda: random.multivariate_normal(K, np.zeros(3), np.ones(3)), ValueError, "cov.ndim >= 2"),
    (lambda: random.multivariate_normal(K, np.zeros(3), np.eye(2)), ValueError, r"cov.shape == \(..., n, n\)"),
    (lambda: random.multivariate_normal(K, np.zeros((2, 3)), np.eye(3), (3,)), ValueError, "broadcast-compatible"),
    (lambda: random.multivariate_normal(K, np.zeros(3), np.eye(3), dtype=np.int32), ValueError, "float dtype"),
])
def test_errors_as_jax_naming_the_line(call, exc, match):
    with pytest.raises(exc, match=match) as info:
        call()
    assert HERE in str(info.value)


def test_names_ember_lacks_say_why():
    with pytest.raises(AttributeError, match=r"multinomial is not implemented in Ember yet \(JAX 0.10.2 has "
                                             r"jax.random.multinomial\); it is not written yet"):
        random.multinomial  # noqa: B018
    with pytest.raises(AttributeError, match="orthogonal.*not written yet.*qr"):
        random.orthogonal  # noqa: B018
    with pytest.raises(AttributeError, match=r"nor has jax.random.*closest names it has: ember.random.normal"):
        random.normall  # noqa: B018
    assert all(hasattr(random, n) or n in random._HINTS for n in
               "PRNGKey ball bernoulli beta bits categorical cauchy chisquare clone dirichlet double_sided_maxwell "
               "exponential f fold_in gamma generalized_normal geometric gumbel key key_data key_dtype key_impl "
               "laplace loggamma logistic lognormal maxwell multivariate_normal normal pareto poisson rademacher "
               "randint rayleigh split t triangular truncated_normal uniform wald weibull_min wrap_key_data".split())
