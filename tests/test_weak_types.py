"""Weak types against JAX 0.10 (x64 enabled): which results are weakly typed, under jit, where ember
carries the flag on traced values. Skipped where JAX is not installed (CI installs it).

A weak result promotes like a Python scalar: `(x_i32 * 0.5) + y_f16` is float16 in both. Ember keeps
JAX's 32-bit defaults, so where JAX gives a weak int64/float64 (its x64 default type) ember gives a
weak int32/float32 (float64 from 64-bit inputs). Eager results are NumPy arrays, which cannot carry
the flag: their dtype is the jit result's, and a later operation treats them as strong.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as enp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

B = np.array([True, False, True])
I32 = np.arange(3, dtype=np.int32)
I64 = np.arange(3, dtype=np.int64)
I8 = np.arange(3, dtype=np.int8)
U8 = np.arange(3, dtype=np.uint8)
F16 = np.linspace(0.5, 1.5, 3).astype(np.float16)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _half(np_, x):
    return np_.multiply(x, 0.5)


# (name, fn(np_, *args) written once for ember.numpy and jax.numpy, args, ember's dtype, weak)
CASES = [
    ("int array * Python float", lambda np_, x: np_.multiply(x, 0.5), (I32,), "float32", True),
    ("Python float * uint8 array", lambda np_, x: np_.multiply(0.5, x), (U8,), "float32", True),
    ("int64 array * Python float", lambda np_, x: np_.multiply(x, 0.5), (I64,), "float64", True),
    ("bool array + Python int", lambda np_, b: np_.add(b, 1), (B,), "int32", True),
    ("bool array + Python float", lambda np_, b: np_.add(b, 1.5), (B,), "float32", True),
    ("bool array * Python bool", lambda np_, b: np_.multiply(b, True), (B,), "bool", False),
    ("int array + Python int", lambda np_, x: np_.add(x, 1), (I32,), "int32", False),
    ("(i32 * 0.5) + f16", lambda np_, x, y: np_.add(_half(np_, x), y), (I32, F16), "float16", False),
    ("(bool + 1) + u8", lambda np_, b, y: np_.add(np_.add(b, 1), y), (B, U8), "uint8", False),
    ("(bool + 1) * i8", lambda np_, b, y: np_.multiply(np_.add(b, 1), y), (B, I8), "int8", False),
    ("(i32 * 0.5) + i32", lambda np_, x: np_.add(_half(np_, x), x), (I32,), "float32", True),
    ("(i64 * 0.5) + i8", lambda np_, x, y: np_.add(_half(np_, x), y), (I64, I8), "float64", True),
    ("(i32 * 0.5) * 2", lambda np_, x: np_.multiply(_half(np_, x), 2), (I32,), "float32", True),
    ("where(b, 1.0, 2.0)", lambda np_, b: np_.where(b, 1.0, 2.0), (B,), "float32", True),
    ("where(b, 1, 2.0)", lambda np_, b: np_.where(b, 1, 2.0), (B,), "float32", True),
    ("where(b, 1, 2)", lambda np_, b: np_.where(b, 1, 2), (B,), "int32", True),
    ("where(b, i32, 2.0)", lambda np_, b, x: np_.where(b, x, 2.0), (B, I32), "float32", True),
    ("where(b, f16, 2.0)", lambda np_, b, x: np_.where(b, x, 2.0), (B, F16), "float16", False),
    ("full(3, 2.0)", lambda np_: np_.full(3, 2.0), (), "float32", True),
    ("full(3, 2)", lambda np_: np_.full(3, 2), (), "int32", True),
    ("full(3, 2.0, float32)", lambda np_: np_.full(3, 2.0, np.float32), (), "float32", False),
    ("zeros(3)", lambda np_: np_.zeros(3, np.float32), (), "float32", False),
    ("full(3, weak)", lambda np_, x: np_.full(3, _half(np_, x)[0]), (I32,), "float32", True),
    ("zeros_like(weak)", lambda np_, x: np_.zeros_like(_half(np_, x)), (I32,), "float32", True),
    ("ones_like(weak)", lambda np_, x: np_.ones_like(_half(np_, x)), (I32,), "float32", True),
    ("full_like(weak, 1)", lambda np_, x: np_.full_like(_half(np_, x), 1), (I32,), "float32", True),
    ("full_like(weak, 1, float32)", lambda np_, x: np_.full_like(_half(np_, x), 1, np.float32), (I32,),
     "float32", False),
    ("full_like(i32, 1.0)", lambda np_, x: np_.full_like(x, 1.0), (I32,), "int32", False),
    ("sum(weak)", lambda np_, x: np_.sum(_half(np_, x)), (I32,), "float32", False),
    ("sum(bool + 1)", lambda np_, b: np_.sum(np_.add(b, 1)), (B,), "int32", False),
    ("mean(bool + 1)", lambda np_, b: np_.mean(np_.add(b, 1)), (B,), "float32", False),
    ("prod(weak)", lambda np_, x: np_.prod(_half(np_, x)), (I32,), "float32", False),
    ("max(weak)", lambda np_, x: np_.max(_half(np_, x)), (I32,), "float32", False),
    ("astype(weak, float32)", lambda np_, x: _half(np_, x).astype(np.float32), (I32,), "float32", False),
    ("i32 / 2", lambda np_, x: np_.divide(x, 2), (I32,), "float32", False),
    ("i32 / 2.0", lambda np_, x: np_.divide(x, 2.0), (I32,), "float32", True),
    ("sqrt(i32)", lambda np_, x: np_.sqrt(x), (I32,), "float32", False),
    ("exp(weak)", lambda np_, x: np_.exp(_half(np_, x)), (I32,), "float32", True),
    ("-weak", lambda np_, x: np_.negative(_half(np_, x)), (I32,), "float32", True),
    ("abs(weak)", lambda np_, x: np_.abs(_half(np_, x)), (I32,), "float32", True),
    ("reshape(weak)", lambda np_, x: np_.reshape(_half(np_, x), (3, 1)), (I32,), "float32", True),
    ("weak[0]", lambda np_, x: _half(np_, x)[0], (I32,), "float32", True),
    ("maximum(i32, 0.5)", lambda np_, x: np_.maximum(x, 0.5), (I32,), "float32", True),
    ("clip(i32, 0.5, 1.5)", lambda np_, x: np_.clip(x, 0.5, 1.5), (I32,), "float32", True),
    ("floor_divide(i32, 2.0)", lambda np_, x: np_.floor_divide(x, 2.0), (I32,), "float32", True),
    ("concatenate(weak, weak)", lambda np_, x: np_.concatenate([_half(np_, x), _half(np_, x)]), (I32,),
     "float32", True),
    ("concatenate(weak, f16)", lambda np_, x, y: np_.concatenate([_half(np_, x), y]), (I32, F16),
     "float16", False),
    ("stack(weak, i32)", lambda np_, x: np_.stack([_half(np_, x), x]), (I32,), "float32", True),
    ("dot(weak, weak)", lambda np_, x: np_.dot(_half(np_, x), _half(np_, x)), (I32,), "float32", True),
    ("dot(Python float, f16)", lambda np_, y: np_.dot(2.0, y), (F16,), "float16", False),
    ("outer(f16, Python float)", lambda np_, y: np_.outer(y, 2.5), (F16,), "float16", False),
    ("dot(weak, f16)", lambda np_, x, y: np_.dot(_half(np_, x), y), (I32, F16), "float16", False),
    ("Python float argument * 3", lambda np_, s: np_.multiply(s, 3), (2.0,), "float32", True),
    ("Python int argument / 3", lambda np_, s: np_.divide(s, 3), (2,), "float32", True),
    ("Python int argument + u8", lambda np_, s, y: np_.add(s, y), (2, U8), "uint8", False),
]


# Strong results that JAX computes from a weak value of its 64-bit default type (a reduction of one).
FROM_JAX_DEFAULT = {"sum(weak)", "sum(bool + 1)", "mean(bool + 1)", "prod(weak)", "max(weak)"}

# Eagerly a weak intermediate is a strong NumPy array, so it promotes as its dtype.
EAGER = {"(i32 * 0.5) + f16": "float32", "(bool + 1) + u8": "int32", "(bool + 1) * i8": "int32",
         "concatenate(weak, f16)": "float32", "dot(weak, f16)": "float32"}


def _jax_default(dtype: np.dtype) -> np.dtype:
    """The dtype JAX (x64) gives where ember gives its 32-bit default `dtype`: the 64-bit one."""
    return {np.dtype(np.int32): np.dtype(np.int64), F32: F64}.get(dtype, dtype)


@pytest.mark.parametrize("name, fn, args, dtype, weak", CASES, ids=[c[0] for c in CASES])
def test_weak_types_match_jax_under_jit(name, fn, args, dtype, weak):
    dtype = np.dtype(dtype)
    out = jax.jit(lambda *a: fn(jnp, *a))(*args)
    jax_dtype = _jax_default(dtype) if weak or name in FROM_JAX_DEFAULT else dtype
    assert (np.dtype(out.dtype), out.weak_type) == (jax_dtype, weak)
    aval = ember.make_graph(lambda *a: fn(enp, *a))(*args).outputs[0].aval
    assert (aval.dtype, aval.weak_type) == (dtype, weak)
    assert ember.jit(lambda *a: fn(enp, *a))(*args).dtype == dtype


@pytest.mark.parametrize("name, fn, args, dtype, weak", CASES, ids=[c[0] for c in CASES])
def test_eager_results_have_the_jit_dtype(name, fn, args, dtype, weak):
    """Eager results have the jit dtype, but for a weak intermediate's promotion (EAGER)."""
    assert np.asarray(fn(enp, *args)).dtype == np.dtype(EAGER.get(name, dtype))


def test_the_issue_chain_is_float16_under_jit_and_strong_when_eager():
    f = lambda x, y: x * 0.5 + y  # noqa: E731
    assert ember.jit(f)(I32, F16).dtype == np.float16
    assert jax.jit(f)(I32, F16).dtype == np.float16
    # Eagerly `x * 0.5` is a NumPy array, strong float32, so the sum is float32 (JAX: float16).
    assert enp.add(enp.multiply(I32, 0.5), F16).dtype == F32


def test_concrete_arrays_are_strong_even_inside_jit():
    """asarray of a Python scalar is a concrete NumPy array (JAX: a weak array), so it promotes as
    float32; a traced full() of it is weak."""
    assert ember.jit(lambda y: enp.asarray(2.0) * y)(F16).dtype == F32
    assert ember.jit(lambda y: enp.full((), 2.0) * y)(F16).dtype == np.float16


def test_weak_results_of_one_jit_are_strong_arguments_of_the_next():
    """A jit result is a NumPy array, so passed to another jit it is strong (JAX's weak jax.Array
    would stay weak: eager weak types cannot be carried)."""
    half = ember.jit(lambda x: x * 0.5)(I32)
    assert ember.jit(lambda a, y: a + y)(half, F16).dtype == F32


def test_gradient_through_a_weak_promotion_keeps_the_inputs_dtype():
    g = ember.grad(lambda x: enp.sum((x * 0.5 + x) * x))(np.arange(3.0, dtype=np.float16))
    assert g.dtype == np.float16
    np.testing.assert_allclose(g, 3.0 * np.arange(3.0), rtol=1e-3)
    graph = ember.make_graph(ember.grad(lambda s: s * 3.0))(2.0)
    assert graph.inputs[0].aval.weak_type and graph.outputs[0].aval.dtype == F32


def test_weak_intermediates_promote_as_in_jax_under_vmap():
    x, y = np.arange(6, dtype=np.int32).reshape(2, 3), np.ones((2, 3), np.float16)
    f = lambda r, z: r * 0.5 + z  # noqa: E731
    assert ember.vmap(f)(x, y).dtype == jax.vmap(f)(x, y).dtype == np.float16
    assert ember.jit(ember.vmap(f))(x, y).dtype == np.float16


def test_weak_results_of_vmap_stay_weak_inside_jit_as_in_jax():
    """vmap replays the traced graph: its weak Literals stay weak there and where the batched graph is
    inlined into the caller's trace."""
    x, y = np.arange(6, dtype=np.int32).reshape(2, 3), np.ones((2, 3), np.float16)
    f = lambda x, y, vmap: vmap(lambda r: r * 0.5)(x) + y  # noqa: E731
    assert ember.jit(lambda x, y: f(x, y, ember.vmap))(x, y).dtype == np.float16
    assert jax.jit(lambda x, y: f(x, y, jax.vmap))(x, y).dtype == np.float16
    aval = ember.make_graph(ember.vmap(lambda r: r * 0.5))(x).outputs[0].aval
    assert (aval.dtype, aval.weak_type) == (F32, True)


def test_weak_values_returned_through_grad_stay_weak_inside_jit():
    """autodiff replays the forward graph with weak literals kept weak, so an aux (or value) that is
    weak in the function is weak where grad returns it, as in JAX: here + f16 stays f16."""

    def f(x):
        return ember.numpy.sum(x), x.astype(np.int32) * 0.5

    out = ember.jit(lambda x, h: ember.grad(f, has_aux=True)(x)[1] + h)(np.ones(3, np.float32),
                                                                       np.ones(3, np.float16))
    assert out.dtype == np.float16
