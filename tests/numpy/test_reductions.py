"""Reductions against NumPy: sum, prod, mean, max/amax, min/amin, argmax, argmin, var, std, all, any
with axis None / int / negative / tuple and keepdims; eager, under jit, gradients and vmap.

Deliberate differences from NumPy (see test_promotion.py): sums and products of int32/bool are
int32 and of smaller ints keep their dtype (NumPy: int64); mean/var/std of integers are float32;
argmax/argmin return int32.
"""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.numpy as jnp
from tests.helpers import check_grads
from tests.numpy.cases import (
    A,
    Case,
    assert_matches,
    case_tests,
    covered,
    expected_dtype,
)

# (shape, axis) combinations every reduction is tested on.
AXES = [((), None), ((5,), None), ((5,), 0), ((5,), -1), ((2, 3), None), ((2, 3), 0), ((2, 3), -1), ((2, 3), (0, 1)),
        ((2, 3, 4), 1), ((2, 3, 4), (0, 2)), ((2, 3, 4), (-1, -3)), ((2, 3, 4), None), ((0,), None), ((2, 0, 3), 1),
        ((2, 0, 3), (0, 2)), ((), ()), ((), 0), ((), -1)]  # NumPy lets an int axis 0/-1 reduce a 0-d array
EMPTY_OK = ("sum", "prod", "mean", "all", "any", "var", "std")  # reductions NumPy allows over no elements
SUM_LIKE = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "amax": np.amax, "min": np.min,
            "amin": np.amin, "var": np.var, "std": np.std, "all": np.all, "any": np.any}
EXTRA_DTYPES = {"sum": ("i32", "bool", "f64"), "prod": ("i32", "f64"), "mean": ("i32", "bool", "f64"),
                "max": ("i32", "bool", "f64"), "amax": ("u8",), "min": ("i32", "i8"), "amin": ("f64",),
                "var": ("i32", "f64"), "std": ("i32", "f64"), "all": ("i32", "bool", "f32"),
                "any": ("i32", "bool", "f64")}


def _empty(shape, axis) -> bool:
    """Does the reduction run over zero elements?"""
    if axis is None or shape == ():
        return 0 in shape
    axes = (axis,) if isinstance(axis, int) else axis
    return any(shape[a] == 0 for a in axes)


def _reduction_cases():
    cases = []
    for name, ref in SUM_LIKE.items():
        fn = getattr(jnp, name)
        for shape, axis in AXES:
            if _empty(shape, axis) and name not in EMPTY_OK:
                continue
            if shape == () and isinstance(axis, int) and name in ("mean", "var", "std"):
                continue  # NumPy's quirk (an int axis of a 0-d array) covers ufunc reductions only
            dom = "int" if name in ("all", "any") else "normal"
            for keepdims in (False, True):
                cases.append(Case(name, lambda x, fn=fn, a=axis, k=keepdims: fn(x, axis=a, keepdims=k),
                                  lambda x, ref=ref, a=axis, k=keepdims: ref(x, axis=a, keepdims=k),
                                  (A(shape, "f32" if name not in ("all", "any") else "i32", dom),),
                                  grad=not (name == "std" and shape == ()),  # sqrt at 0
                                  note=f"axis={axis} keepdims={keepdims}"))
        for dt in EXTRA_DTYPES[name]:
            dom = "posint" if name == "prod" else "int"
            for axis in (None, 1):
                cases.append(Case(name, lambda x, fn=fn, a=axis: fn(x, axis=a),
                                  lambda x, ref=ref, a=axis: ref(x, axis=a), (A((2, 3), dt, dom),),
                                  note=f"axis={axis}"))
        cases.append(Case(name, fn, ref, (A((3, 4)),), note="positional"))
    return cases


def _special_cases():
    s, p, m = jnp.sum, jnp.prod, jnp.mean
    return [
        # bools and small ints accumulate in int32 / uint32, as in JAX (NumPy: int64 / uint64)
        Case("sum", s, np.sum, (A((2, 3), "i8"),), dtype=np.int32),  # as JAX: the default int
        Case("sum", lambda x: s(x, axis=0), lambda x: np.sum(x, axis=0), (A((2, 3), "u8"),), dtype=np.uint32),
        Case("prod", p, np.prod, (A((2, 2), "i16", "posint"),), dtype=np.int32),
        Case("sum", lambda x: s(x, dtype=np.float32), lambda x: np.sum(x, dtype=np.float32), (A((2, 3), "i32"),)),
        Case("sum", lambda x: s(x, axis=1, dtype=np.float64), lambda x: np.sum(x, axis=1, dtype=np.float64),
             (A((2, 3), "f32"),)),
        Case("sum", lambda x: s(x, dtype=np.int64), lambda x: np.sum(x, dtype=np.int64), (A((4,), "bool"),),
             dtype=np.int64),
        Case("prod", lambda x: p(x, axis=-1, dtype=np.float64), lambda x: np.prod(x, axis=-1, dtype=np.float64),
             (A((2, 3), "i32"),), dtype=np.float64),
        Case("mean", lambda x: m(x, dtype=np.float64), lambda x: np.mean(x, dtype=np.float64), (A((3, 4), "i32"),),
             dtype=np.float64),
        Case("mean", lambda x: m(x, axis=0, dtype=np.float64), lambda x: np.mean(x, axis=0, dtype=np.float64),
             (A((3, 4), "f32"),)),
        Case("sum", s, np.sum, (A((0, 3), "i32"),), note="empty int"),
        Case("max", lambda x: jnp.max(x, initial=0.5), lambda x: np.max(x, initial=0.5), (A((2, 3)),)),
        Case("max", lambda x: jnp.max(x, axis=0, initial=-1.0), lambda x: np.max(x, axis=0, initial=-1.0),
             (A((0, 3)),), note="empty with initial"),
        Case("min", lambda x: jnp.min(x, axis=1, initial=2), lambda x: np.min(x, axis=1, initial=2),
             (A((3, 2), "i32"),)),
        Case("max", jnp.max, np.max, (A((3, 4), "f32", "special"),), grad=False, note="nan propagates"),
        Case("min", lambda x: jnp.min(x, axis=1), lambda x: np.min(x, axis=1), (A((2, 5), "f64", "special"),),
             grad=False, note="inf"),
        Case("sum", lambda x: s(x, axis=0), lambda x: np.sum(x, axis=0), (A((3, 5), "f32", "special"),), grad=False,
             note="inf nan"),
    ]


def _arg_cases():
    cases = []
    for name in ("argmax", "argmin"):
        fn, ref = getattr(jnp, name), getattr(np, name)
        for shape, axis in (((5,), None), ((5,), 0), ((2, 3), None), ((2, 3), 0), ((2, 3), -1), ((2, 3, 4), 1),
                            ((), None), ((), 0), ((), -1), ((1,), 0), ((3, 1, 2), -2)):
            for keepdims in (False, True):
                cases.append(Case(name, lambda x, fn=fn, a=axis, k=keepdims: fn(x, axis=a, keepdims=k),
                                  lambda x, ref=ref, a=axis, k=keepdims: ref(x, axis=a, keepdims=k),
                                  (A(shape),), note=f"axis={axis} keepdims={keepdims}"))
        for dt in ("i32", "bool", "f64", "u8"):
            cases.append(Case(name, lambda x, fn=fn: fn(x, axis=1), lambda x, ref=ref: ref(x, axis=1), (A((3, 4), dt),),
                              note="ties first" if dt in ("i32", "bool", "u8") else ""))
        cases.append(Case(name, fn, ref, (A((4, 3), "f32", "special"),), note="nan first"))
    return cases


def _jax_ddof(ref, x, axis, ddof):
    """NumPy's var/std, but nan with no degrees of freedom left (JAX's; NumPy divides by zero)."""
    n = x.size if axis is None else np.prod([x.shape[a] for a in np.atleast_1d(axis)])
    with np.errstate(divide="ignore", invalid="ignore"):
        out = ref(x, axis=axis, ddof=ddof)
    return out if n > ddof else np.full_like(out, np.nan)


def _var_cases():
    cases = []
    for name in ("var", "std"):
        fn, ref = getattr(jnp, name), getattr(np, name)
        # (shape, axis, ddof, differentiable: some degrees of freedom left)
        for shape, axis, ddof, grad in (((5,), None, 1, True), ((2, 3), 0, 1, True), ((2, 3, 4), (0, 2), 2, True),
                                        ((4, 3), -1, 0, True), ((3,), 0, 3, False), ((3,), None, 4, False),
                                        ((1, 2), 0, 1, False)):
            cases.append(Case(name, lambda x, fn=fn, a=axis, d=ddof: fn(x, axis=a, ddof=d),
                              lambda x, ref=ref, a=axis, d=ddof: _jax_ddof(ref, x, a, d), (A(shape),), grad=grad,
                              note=f"axis={axis} ddof={ddof}"))
        cases.append(Case(name, lambda x, fn=fn: fn(x, axis=1, ddof=1, keepdims=True),
                          lambda x, ref=ref: ref(x, axis=1, ddof=1, keepdims=True), (A((2, 4), "f64"),),
                          note="ddof keepdims"))
        cases.append(Case(name, lambda x, fn=fn: fn(x, dtype=np.float64), lambda x, ref=ref: ref(x, dtype=np.float64),
                          (A((2, 3), "i32"),), dtype=np.float64, note="dtype"))
        cases.append(Case(name, fn, ref, (A((4,), "f32", "pos"),), note="constant shift"))
    return cases


CASES = _reduction_cases() + _special_cases() + _arg_cases() + _var_cases()
COVERED = covered(CASES)


test_values_match_numpy, test_grads_match_finite_differences, test_vmap_matches_loop = \
    case_tests(CASES)


@settings(max_examples=20, deadline=None, database=None)
@given(data=st.data(), name=st.sampled_from(["sum", "mean", "max", "prod", "var", "argmin", "any"]))
def test_random_shapes_and_axes(data, name):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3), label="shape")
    if name == "argmin":
        axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    else:
        axis = data.draw(st.none() | hnp.valid_tuple_axes(len(shape), min_size=1), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    x = A(shape, "f32").make(np.random.default_rng(0))
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    dtype = expected_dtype(want.dtype, [x.dtype])
    fn = getattr(jnp, name)
    assert_matches(fn(x, axis=axis, keepdims=keepdims), want, dtype, what="eager")
    assert_matches(ember.jit(lambda v: fn(v, axis=axis, keepdims=keepdims))(x), want, dtype, what="jit")


def test_max_gradient_splits_ties_evenly():
    g = ember.grad(lambda x: jnp.max(x))(np.array([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_allclose(g, [0.0, 0.5, 0.5, 0.0])
    g = ember.grad(lambda x: jnp.sum(jnp.min(x, axis=1)))(np.array([[1.0, 1.0, 2.0], [0.0, 4.0, 5.0]]))
    np.testing.assert_allclose(g, [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])


@pytest.mark.parametrize("x", [[[0.0, 2.0, 3.0], [1.5, -2.0, 0.5]], [[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]]],
                         ids=["one zero", "several zeros"])
def test_prod_gradient_with_zeros(x):
    x = np.array(x)
    check_grads(lambda v: jnp.sum(jnp.prod(v, axis=1) * np.array([1.0, -2.0])), (x,))
    check_grads(lambda v: jnp.prod(v[0]), (x,))


def test_argmax_has_no_gradient_but_does_not_block_others():
    g = ember.grad(lambda x: jnp.sum(x * jnp.argmax(x, axis=0).astype(np.float64)))(np.array([[1.0, 4.0], [3.0, 2.0]]))
    np.testing.assert_allclose(g, [[1.0, 0.0], [1.0, 0.0]])


@pytest.mark.parametrize("name", ["max", "min", "amax", "argmax", "argmin"])
def test_reductions_without_identity_reject_empty_input(name):
    fn = getattr(jnp, name)
    with pytest.raises(ValueError):
        getattr(np, name)(np.zeros((0, 3)), axis=0)
    with pytest.raises(ember.errors.SHAPE_ERRORS, match=name.replace("amax", "max")):
        fn(np.zeros((0, 3)), axis=0)
    with pytest.raises(ember.errors.SHAPE_ERRORS, match=name.replace("amax", "max")):
        ember.jit(lambda x: fn(x, axis=0))(np.zeros((0, 3)))


@pytest.mark.parametrize("name", ["sum", "mean", "max", "argmax", "var", "all"])
def test_axis_out_of_bounds_raises(name):
    fn = getattr(jnp, name)
    for axis in (2, -3):
        with pytest.raises(ember.errors.SHAPE_ERRORS, match=f"{name}.*axis") as info:
            ember.jit(lambda x, a=axis: fn(x, axis=a))(np.ones((2, 3)))
        assert "test_reductions.py" in str(info.value)
    if name != "argmax":
        with pytest.raises(ember.errors.SHAPE_ERRORS, match="repeated"):
            fn(np.ones((2, 3)), axis=(0, -2))


@pytest.mark.parametrize("name", ["mean", "var", "std"])
def test_mean_of_a_scalar_over_axis_zero_is_an_error(name):
    with pytest.raises(ValueError):
        getattr(np, name)(np.float32(1.0), axis=0)
    with pytest.raises(ember.errors.SHAPE_ERRORS, match=name.replace("std", "var")):
        ember.jit(lambda x: getattr(jnp, name)(x, axis=0))(np.float32(1.0))


@pytest.mark.parametrize("axis", [1, -2, (0,), (-1,)])
def test_reduction_of_a_scalar_over_other_axes_is_an_error(axis):
    with pytest.raises(ValueError):
        np.sum(np.float32(1.0), axis=axis)
    with pytest.raises(ember.errors.SHAPE_ERRORS, match="sum"):
        jnp.sum(np.float32(1.0), axis=axis)
    with pytest.raises(ember.errors.SHAPE_ERRORS, match="mean"):
        ember.jit(lambda x: jnp.mean(x, axis=axis))(np.float32(1.0))


@pytest.mark.parametrize("fn", [jnp.sum, ember.jit(jnp.sum)], ids=["eager", "jit"])
def test_small_int_sums_do_not_wrap(fn):
    """Bools and small ints accumulate in int32, unsigned ones in uint32 (as JAX's sums)."""
    assert fn(np.array([100] * 3, np.int8)) == 300 and fn(np.array([100] * 3, np.int8)).dtype == np.int32
    assert fn(np.array([200, 200], np.uint8)) == 400 and fn(np.array([200, 200], np.uint8)).dtype == np.uint32
    assert jnp.prod(np.array([100, 100], np.int16)) == 10000


@pytest.mark.parametrize("name, want", [("mean", 0.5), ("var", 0.25), ("std", 0.5)])
def test_float16_mean_and_var_over_more_elements_than_float16_counts(name, want):
    """70000 > 65504, the largest float16: the count and the sum are computed in float32."""
    x = (np.arange(70000) % 2).astype(np.float16)
    for fn in (getattr(jnp, name), ember.jit(getattr(jnp, name))):
        got = fn(x)
        assert got.dtype == np.float16 and got == want
    g = ember.grad(lambda v: jnp.mean(v))(x)
    assert g.dtype == np.float16 and np.all(g == np.float16(1 / 70000))
