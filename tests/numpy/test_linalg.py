"""ember.numpy.linalg.norm against numpy.linalg.norm: vector orders None/1/2/inf/-inf/0/3/-1, matrix
orders fro/1/-1/inf/-inf and 2/-2/nuc (singular values), axis and keepdims; eager, under jit, gradients
and vmap.

Deliberate differences from NumPy: norms of integer arrays are float32 (NumPy: float64).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.helpers import check_grads
from tests.numpy.cases import (
    A,
    Case,
    case_tests,
    covered,
)

INF = np.inf


def _norm(spec, note="", grad=True, **kw):
    return Case("linalg.norm", lambda x: jnp.linalg.norm(x, **kw), lambda x: np.linalg.norm(x, **kw), (spec,),
                grad=grad, note=note or ", ".join(f"{k}={v!r}" for k, v in kw.items()))


def _vector_cases():
    cases = []
    for ord in (None, 1, 2, INF, -INF, 0, 3, -1, 0.5):
        # ord 0 counts nonzeros (no gradient); 1/inf/-inf/-1 are smooth away from ties and zeros.
        grad = ord != 0
        cases += [
            _norm(A((5,), "f32", "nonzero"), ord=ord, grad=grad),
            _norm(A((5,), "f64", "nonzero"), ord=ord, grad=grad),
            _norm(A((2, 3), "f32", "nonzero"), ord=ord, axis=1, grad=grad),
            _norm(A((2, 3, 4), "f32", "nonzero"), ord=ord, axis=-2, keepdims=True, grad=grad),
            _norm(A((4, 3), "f32", "nonzero"), ord=ord, axis=(0,), grad=grad),
        ]
    cases += [
        _norm(A((2, 3, 4))),
        _norm(A((2, 3)), keepdims=True),
        _norm(A(())),
        _norm(A((0,)), grad=False),
        _norm(A((3, 0)), axis=1, ord=1, grad=False),
        _norm(A((5,), "i32"), note="int"),
        _norm(A((4,), "bool"), ord=1, note="bool"),
        _norm(A((6,), "f32", "special"), ord=2, grad=False, note="inf nan"),
        _norm(A((5,), "f32", "special"), ord=0, grad=False, note="zeros"),
        _norm(A((2, 3), "f32", "nonzero"), ord=2, axis=0),
    ]
    return cases


def _matrix_cases():
    cases = []
    for ord in ("fro", 1, -1, INF, -INF, None):
        cases += [
            _norm(A((3, 4), "f32", "nonzero"), ord=ord),
            _norm(A((3, 4), "f64", "nonzero"), ord=ord, keepdims=True),
            _norm(A((2, 3, 4), "f32", "nonzero"), ord=ord, axis=(1, 2)),
            _norm(A((2, 3, 4), "f32", "nonzero"), ord=ord, axis=(2, 0), keepdims=True),
            _norm(A((3, 2, 4), "f32", "nonzero"), ord=ord, axis=(-1, -3)),
            _norm(A((3, 3), "i32", "nonzero"), ord=ord),
        ]
    return cases


CASES = _vector_cases() + _matrix_cases()
COVERED = covered(CASES)


test_values_match_numpy, test_grads_match_finite_differences, test_vmap_matches_loop = \
    case_tests(CASES)


def test_gradient_of_the_euclidean_norm_is_the_unit_vector():
    x = np.array([3.0, -4.0])
    np.testing.assert_allclose(ember.grad(jnp.linalg.norm)(x), x / 5.0)
    check_grads(lambda v: jnp.linalg.norm(v @ np.array([[1.0, 2.0], [0.5, -1.0]]), "fro"),
                (np.array([[1.0, 2.0], [3.0, -1.5]]),))


def test_numpy_linalg_norm_on_a_tracer_dispatches_to_ember():
    x = np.array([[1.0, -2.0], [3.0, 4.0]])
    got = ember.jit(lambda v: np.linalg.norm(v, axis=1))(x)
    np.testing.assert_allclose(got, np.linalg.norm(x, axis=1))


def test_spectral_matrix_norms_are_singular_values():
    """ord 2, -2 and 'nuc': the largest, the smallest and the sum of the singular values (one jit)."""
    x = np.random.default_rng(0).normal(size=(2, 3, 4))

    def norms(v):
        return [jnp.linalg.norm(v, o, axis=(1, 2)) for o in (2, -2, "nuc")] + [
            jnp.linalg.norm(v, 2, axis=(2, 0), keepdims=True), jnp.linalg.norm(v[0], "nuc")]

    for got in (ember.jit(norms)(x), norms(x)):
        for o, g in zip((2, -2, "nuc"), got):
            np.testing.assert_allclose(g, np.linalg.norm(x, o, axis=(1, 2)), rtol=1e-6)
        np.testing.assert_allclose(got[3], np.linalg.norm(x, 2, axis=(2, 0), keepdims=True), rtol=1e-6)
        np.testing.assert_allclose(got[4], np.linalg.norm(x[0], "nuc"), rtol=1e-6)


@pytest.mark.parametrize("x_shape, kw, exc", [
    ((2, 3), {"ord": "fro", "axis": 0}, ValueError),
    ((2, 3), {"ord": "bad"}, ValueError),
    ((2, 3, 4), {"ord": 1}, ember.errors.SHAPE_ERRORS),
    ((2, 3), {"axis": (0, 0)}, ember.errors.SHAPE_ERRORS),
    ((2, 3), {"axis": (0, 2)}, ember.errors.SHAPE_ERRORS),
    ((2, 3), {"axis": (0, -3)}, ember.errors.SHAPE_ERRORS),
    ((2, 3), {"axis": 2}, ember.errors.SHAPE_ERRORS),
    ((2, 3, 4), {"axis": (0, 1, 2)}, ember.errors.SHAPE_ERRORS),
])
def test_bad_orders_and_axes_raise(x_shape, kw, exc):
    with pytest.raises(ValueError):  # NumPy rejects these too
        np.linalg.norm(np.ones(x_shape), **kw)
    with pytest.raises(exc, match="norm"):
        ember.jit(lambda v: jnp.linalg.norm(v, **kw))(np.ones(x_shape))
