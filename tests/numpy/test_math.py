"""Elementwise functions of ember.numpy against NumPy: values (eager and under jit), result dtypes,
gradients, vmap and shape errors. Also the check that every exported function has test cases.

Deliberate differences from NumPy (see test_promotion.py): float results of integer operands are
float32; `x_int / 2.5` is float32; floor/ceil/round of integers return them unchanged (as NumPy 2).
`square(bool)` stays bool (NumPy: int8) and is not compared here.
"""

from __future__ import annotations

import importlib

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.numpy as jnp
from tests.numpy.cases import (
    A,
    Case,
    assert_matches,
    case_tests,
    covered,
)

SHAPES = [(), (0,), (5,), (2, 3), (2, 1, 3)]

# name -> (NumPy function, value domain, differentiable, dtypes NumPy accepts besides floats)
UNARY = {
    "exp": (np.exp, "normal", True, ("i32", "bool")),
    "log": (np.log, "pos", True, ("i32",)),
    "log1p": (np.log1p, "pos", True, ("i32",)),
    "expm1": (np.expm1, "normal", True, ("i32",)),
    "tanh": (np.tanh, "normal", True, ("i32", "u8")),
    "sin": (np.sin, "normal", True, ("i32",)),
    "cos": (np.cos, "normal", True, ("i32",)),
    "sqrt": (np.sqrt, "pos", True, ("i32", "bool", "u8")),
    "log2": (np.log2, "pos", True, ("i32",)),
    "log10": (np.log10, "pos", True, ("i32",)),
    "floor": (np.floor, "normal", False, ("i32", "u8", "bool")),
    "ceil": (np.ceil, "normal", False, ("i32", "i8", "bool")),
    "negative": (np.negative, "normal", True, ("i32", "i8")),
    "positive": (np.positive, "normal", True, ("i32",)),
    "abs": (np.abs, "nonzero", True, ("i32", "i8", "bool")),
    "absolute": (np.absolute, "nonzero", True, ("i32",)),
    "sign": (np.sign, "normal", False, ("i32", "i8")),
    "square": (np.square, "normal", True, ("i32", "u8")),
    # JAX's reciprocal makes integers float first (NumPy's truncates: 1 // 2 == 0)
    "reciprocal": (lambda x: np.reciprocal(x.astype(np.float32) if x.dtype.kind in "iub" else x), "nonzero", True,
                   ("i32",)),
    "isfinite": (np.isfinite, "special", False, ("i32", "bool")),
    "isinf": (np.isinf, "special", False, ("i32", "bool")),
    "isnan": (np.isnan, "special", False, ("i32", "bool")),
    "logical_not": (np.logical_not, "normal", False, ("i32", "bool")),
    "round": (np.round, "halves", False, ("i32", "u8")),
    "around": (np.round, "halves", False, ("i32",)),
}


def _unary_cases():
    cases = []
    for name, (ref, dom, grad, others) in UNARY.items():
        fn = getattr(jnp, name)
        for shape in SHAPES:
            cases.append(Case(name, fn, ref, (A(shape, "f32", dom),), grad=grad))
        cases.append(Case(name, fn, ref, (A((2, 3), "f64", dom),), grad=grad))
        for dt in others:
            cases.append(Case(name, fn, ref, (A((2, 3), dt, "posint" if dom in ("pos", "nonzero") else dom),)))
        if dom != "special":
            cases.append(Case(name, fn, ref, (A((4,), "f32", "special"),), grad=False, note="special"))
    cases += [
        Case("round", lambda x: jnp.round(x, 1), lambda x: np.round(x, 1), (A((12,), "f32", "halves"),),
             grad=False, note="decimals=1"),
        Case("round", lambda x: jnp.round(x, 2), lambda x: np.round(x, 2), (A((3, 4), "f64"),), note="decimals=2"),
        Case("round", lambda x: jnp.round(x, -1), lambda x: np.round(x, -1), (A((12,), "f64", "halves"),),
             note="decimals=-1"),
        Case("around", lambda x: jnp.around(x, -2), lambda x: np.around(x, -2),
             (A((12,), "f32", "halves"),), note="decimals=-2"),
        Case("round", lambda x: jnp.round(x * 10, -1), lambda x: np.round(x * 10, -1), (A((12,), "i32"),),
             note="int decimals=-1"),
        Case("sign", jnp.sign, np.sign, (A((6,), "i32"),), note="int"),
        Case("isfinite", jnp.isfinite, np.isfinite, (A((2, 5), "f64", "special"),)),
        Case("abs", jnp.abs, np.abs, (A((3, 4), "f32", "special"),), grad=False, note="inf nan"),
        *(Case(name, getattr(jnp, name), np.invert, (A((2, 3), dt),), note=dt)
          for name in ("invert", "bitwise_not", "bitwise_invert") for dt in ("i32", "u8", "bool")),
        *(Case("bitwise_count", jnp.bitwise_count, np.bitwise_count, (A((2, 3), dt),), note=dt)
          for dt in ("i32", "i8", "u8")),
    ]
    return cases


# name -> (NumPy function, domain of the second operand, differentiable, non-float dtypes NumPy accepts)
BINARY = {
    "add": (np.add, "normal", True, ("i32", "bool")),
    "subtract": (np.subtract, "normal", True, ("i32",)),
    "multiply": (np.multiply, "normal", True, ("i32", "bool")),
    "divide": (np.divide, "nonzero", True, ("i32",)),
    "true_divide": (np.true_divide, "nonzero", True, ("i32",)),
    "power": (np.power, "normal", True, ("i32",)),
    "maximum": (np.maximum, "normal", True, ("i32", "bool")),
    "minimum": (np.minimum, "normal", True, ("i32", "bool")),
    "equal": (np.equal, "normal", False, ("i32", "bool")),
    "not_equal": (np.not_equal, "normal", False, ("i32", "bool")),
    "less": (np.less, "normal", False, ("i32", "bool")),
    "less_equal": (np.less_equal, "normal", False, ("i32",)),
    "greater": (np.greater, "normal", False, ("i32",)),
    "greater_equal": (np.greater_equal, "normal", False, ("i32", "bool")),
    "logical_and": (np.logical_and, "normal", False, ("i32", "bool")),
    "logical_or": (np.logical_or, "normal", False, ("i32", "bool")),
    "logical_xor": (np.logical_xor, "normal", False, ("i32", "bool")),
    "floor_divide": (np.floor_divide, "nonzero", True, ("i32", "i8")),
    "remainder": (np.remainder, "nonzero", True, ("i32", "i8")),
    "mod": (np.mod, "nonzero", True, ("i32",)),
    "fmod": (np.fmod, "nonzero", True, ("i32", "i8")),
    "divmod": (np.divmod, "nonzero", True, ("i32", "u8")),
    "bitwise_and": (np.bitwise_and, None, False, ("i32", "bool", "u8")),
    "bitwise_or": (np.bitwise_or, None, False, ("i32", "bool", "i8")),
    "bitwise_xor": (np.bitwise_xor, None, False, ("i32", "bool", "u8")),
}

PAIRS = [((), ()), ((4,), ()), ((), (4,)), ((2, 3), (3,)), ((2, 1, 4), (3, 1)), ((0,), (1,)), ((2, 3), (2, 3)),
         ((3, 1), (1, 0))]


def _binary_cases():
    cases = []
    for name, (ref, dom2, grad, others) in BINARY.items():
        fn = getattr(jnp, name)
        dom1 = "pos" if name == "power" else "normal"
        if dom2 is not None:  # float operands
            for s1, s2 in PAIRS:
                cases.append(Case(name, fn, ref, (A(s1, "f32", dom1), A(s2, "f32", dom2)), grad=grad))
            cases.append(Case(name, fn, ref, (A((2, 3), "f64", dom1), A((3,), "f64", dom2)), grad=grad))
            cases.append(Case(name, fn, ref, (A((2, 3), "f32", dom1), A((2, 1), "f64", dom2)), grad=grad))
            cases.append(Case(name, fn, ref, (A((3,), "f32", dom1), 2.5), grad=grad))
            cases.append(Case(name, fn, ref, (1.5, A((2, 2), "f32", dom2)), grad=grad))
            cases.append(Case(name, fn, ref, (A((3,), "f64", dom1), 2), grad=grad))
        for dt in others:
            d2 = {"normal": "int", "nonzero": "nonzero", None: "int"}[dom2]
            d2 = "posint" if name == "power" else d2
            cases.append(Case(name, fn, ref, (A((2, 3), dt), A((3,), dt, d2))))
            if dt not in ("bool", "u8"):
                cases.append(Case(name, fn, ref, (A((4,), dt), 3 if d2 != "int" else -3), note="weak int"))
                cases.append(Case(name, fn, ref, (-7, A((2, 2), dt, d2)), note="weak int left"))
        if name not in ("bitwise_and", "bitwise_or", "bitwise_xor", "floor_divide", "remainder", "mod", "fmod",
                        "divmod", "power"):
            cases.append(Case(name, fn, ref, (A((2, 3), "i32"), A((3,), "f32", dom2)), note="int-float"))
            cases.append(Case(name, fn, ref, (A((4,), "i32"), 0.5), note="int with weak float"))
    cases += [
        Case("maximum", jnp.maximum, np.maximum, (A((10,), "f32", "special"), A((), "f32")), grad=False,
             note="nan propagates"),
        Case("minimum", jnp.minimum, np.minimum, (A((10,), "f64", "special"), A((10,), "f64")), grad=False,
             note="nan propagates"),
        Case("equal", jnp.equal, np.equal, (A((3, 4), "i32"), A((4,), "i32")), note="ties"),
        Case("less_equal", jnp.less_equal, np.less_equal, (A((3, 4), "i8"), A((3, 1), "i8")), note="ties"),
        Case("floor_divide", jnp.floor_divide, np.floor_divide, (A((3, 4), "f64", "halves"), -1.5), grad=False,
             note="negative float divisor"),
        Case("remainder", jnp.remainder, np.remainder, (A((12,), "f32", "halves"), -2.0), grad=False,
             note="negative float divisor"),
        Case("floor_divide", jnp.floor_divide, np.floor_divide, (A((2, 5), "i32"), A((5,), "i16", "nonzero")),
             note="int32 by int16"),
        Case("remainder", jnp.remainder, np.remainder, (A((2, 5), "u8", "posint"), A((5,), "u8", "posint")),
             note="unsigned"),
        Case("floor_divide", jnp.floor_divide, np.floor_divide, (A((2, 5), "u8", "posint"), 2), note="unsigned"),
        Case("power", jnp.power, np.power, (A((5,), "f32"), 2), note="integer exponent"),
        Case("power", jnp.power, np.power, (A((5,), "f32"), 3.0), note="negative base"),
        Case("power", jnp.power, np.power, (2.0, A((2, 3), "f32")), note="scalar base"),
        Case("multiply", jnp.multiply, np.multiply, (A((3,), "bool"), A((2, 3), "i32")), note="bool-int"),
        Case("add", jnp.add, np.add, (A((4,), "u8"), A((4,), "i8")), note="u8-i8"),
        # shift amounts in [1, 5): beyond the width NumPy's result is the platform's (JAX's: 0 or the sign fill)
        *(Case(name, getattr(jnp, name), getattr(np, name), (A((2, 3), dt), A((3,), dt2, "posint")), note=dt + dt2)
          for name in ("left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift")
          for dt, dt2 in (("i32", "i32"), ("i8", "u8"), ("u8", "u8"))),
        Case("right_shift", jnp.right_shift, np.right_shift, (A((5,), "i8"), 2), note="weak int amount"),
    ]
    return cases


def _where_cases():
    ref = np.where
    f = jnp.where
    return [
        Case("where", f, ref, (A((3,), "bool"), A((3,)), A((3,)))),
        Case("where", f, ref, (A((2, 3), "bool"), A((3,)), A((2, 1)))),
        Case("where", f, ref, (A((3,), "bool"), A((2, 3), "f64"), 0.0)),
        Case("where", f, ref, (A((2, 1, 3), "bool"), 1.0, A((4, 1)))),
        Case("where", f, ref, (A((), "bool"), A((2, 2)), A((2, 2)))),
        Case("where", f, ref, (A((0, 3), "bool"), A((3,)), A(()))),
        Case("where", f, ref, (A((4,), "i32"), A((4,), "i32"), A((4,), "i32")), note="int condition"),
        Case("where", f, ref, (A((4,), "f32"), A((4,), "f32"), A((4,), "i32")), note="float cond, mixed"),
        Case("where", f, ref, (A((2, 3), "bool"), A((2, 3), "f32"), A((2, 3), "f64"))),
        Case("where", f, ref, (A((2, 3), "bool"), 1.0, 0.0), note="scalar branches"),
        Case("where", f, ref, (A((4,), "bool"), A((4,), "f16"), 2.5), note="weak float keeps f16"),
        Case("where", f, ref, (A((4,), "bool"), A((4,), "i8"), 3), note="weak int keeps i8"),
        Case("where", lambda c, x: jnp.where(c > 0, x, -x), lambda c, x: np.where(c > 0, x, -x),
             (A((2, 3)), A((2, 3), "f64")), note="traced condition"),
    ]


def _clip_cases():
    return [
        Case("clip", lambda x: jnp.clip(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), (A((3, 4)),)),
        Case("clip", lambda x: jnp.clip(x, None, 0.3), lambda x: np.clip(x, None, 0.3), (A((5,), "f64"),)),
        Case("clip", lambda x: jnp.clip(x, -0.3, None), lambda x: np.clip(x, -0.3, None), (A(()),)),
        Case("clip", lambda x: jnp.clip(x, -0.3), lambda x: np.clip(x, -0.3, None), (A((0, 2)),), note="no max"),
        Case("clip", jnp.clip, np.clip, (A((2, 3)), A((3,), "f32", "unit"), A((2, 1), "f32", "pos"))),
        Case("clip", lambda x: jnp.clip(x, -2, 3), lambda x: np.clip(x, -2, 3), (A((6,), "i32"),)),
        Case("clip", lambda x: jnp.clip(x, 1.0, -1.0), lambda x: np.clip(x, 1.0, -1.0), (A((4,)),),
             note="min>max"),
        Case("clip", lambda x: jnp.clip(x, min=-0.5, max=0.5), lambda x: np.clip(x, min=-0.5, max=0.5),
             (A((3, 4)),), note="min/max keywords"),
    ]


CASES = _unary_cases() + _binary_cases() + _where_cases() + _clip_cases()
COVERED = covered(CASES)


test_values_match_numpy, test_grads_match_finite_differences, test_vmap_matches_loop = \
    case_tests(CASES)


@settings(max_examples=15, deadline=None, database=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3),
       name=st.sampled_from(["add", "maximum", "power", "where", "greater"]))
def test_broadcasting_of_random_shapes(shapes, name):
    s1, s2, s3 = shapes.input_shapes
    rng = np.random.default_rng(0)
    x, y = A(s1, "f32", "pos").make(rng), A(s2).make(rng)
    if name == "where":
        c = A(s3, "bool").make(rng)
        fn, ref, args = jnp.where, np.where, (c, x, y)
    else:
        fn, ref, args = getattr(jnp, name), getattr(np, name), (x, y)
    want = ref(*args)
    assert_matches(fn(*args), want, want.dtype, what="eager")
    assert_matches(ember.jit(fn)(*args), want, want.dtype, what="jit")
    assert want.shape == np.broadcast_shapes(*(np.shape(a) for a in args))


def test_floor_divide_and_remainder_follow_the_divisor_sign():
    x = np.array([7, -7, 7, -7, 0, 6, -6], np.int32)
    y = np.array([2, 2, -2, -2, 3, -4, 4], np.int32)
    for fn, ref in ((jnp.floor_divide, np.floor_divide), (jnp.remainder, np.remainder)):
        for got in (fn(x, y), ember.jit(fn)(x, y), ember.jit(fn)(x.astype(np.float64), y.astype(np.float64))):
            np.testing.assert_array_equal(got, ref(x, y))
    np.testing.assert_array_equal(ember.jit(lambda a: a // -3)(x), x // -3)
    np.testing.assert_array_equal(ember.jit(lambda a: a % -3)(x), x % -3)
    np.testing.assert_array_equal(ember.jit(lambda a: 5 % a)(y), 5 % y)


def test_round_is_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], np.float32)
    np.testing.assert_array_equal(ember.jit(jnp.round)(x), [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0])


def test_clip_without_bounds_raises():
    with pytest.raises(ValueError, match="clip"):
        jnp.clip(np.ones(3), None, None)


def test_where_needs_both_branches_or_none():
    """One branch is an error; none is jnp.nonzero, traceable only with size= (as in JAX)."""
    with pytest.raises(ember.errors.SHAPE_ERRORS, match="where"):
        jnp.where(np.ones(3) > 0, 1.0)
    with pytest.raises(ember.errors.ConcretizationError, match="size="):
        ember.jit(lambda c: jnp.where(c))(np.ones(3) > 0)


def test_operations_on_unsupported_kinds_raise_dtype_errors():
    with pytest.raises(ember.DTypeError):
        ember.jit(jnp.negative)(np.array([True]))
    with pytest.raises(ember.DTypeError):
        ember.jit(jnp.bitwise_and)(np.ones(2), np.ones(2))


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_broadcast_mismatch_raises_shape_error_naming_the_line(mode):
    def f(x, y):
        return jnp.add(x, y)

    fn = f if mode == "eager" else ember.jit(f)
    with pytest.raises(ember.errors.SHAPE_ERRORS) as info:
        fn(np.ones(3, np.float32), np.ones(4, np.float32))
    msg = str(info.value)
    assert "add" in msg and "(3,)" in msg and "(4,)" in msg
    assert f"test_math.py:{f.__code__.co_firstlineno + 1}" in msg


# --- every exported function has cases -----------------------------------------------------------

_CASE_MODULES = ["test_math", "test_creation", "test_reductions", "test_shape", "test_products", "test_indexing",
                 "test_linalg", "test_trig_functions", "test_explog_functions"]
_CASE_MODULES += ["test_arrays", "test_nan_stats"]  # ember/numpy/_arrays.py, _stats.py and _numeric.py
_CASE_MODULES += ["test_sorting"]  # ember/numpy/_sorting.py
_CASE_MODULES += ["test_linalg_solve"]  # ember/numpy/linalg.py's factorizations and solves
_CASE_MODULES += ["test_dtype_functions"]  # ember/numpy/_dtypes.py
_NUMPY_ELSEWHERE = ["tests.tracer.test_prims_conv"]  # convolve, correlate


def exported_functions() -> set[str]:
    """The callables ember.numpy exports (dtypes and other classes excluded), plus linalg's."""
    names = {n for n in jnp.__all__ if callable(getattr(jnp, n)) and not isinstance(getattr(jnp, n), type)}
    names |= {f"linalg.{n}" for n in jnp.linalg.__all__}
    return names


def test_every_exported_function_has_cases():
    tested: set[str] = set()
    for mod in _CASE_MODULES:
        tested |= importlib.import_module(f"tests.numpy.{mod}").COVERED
    for mod in _NUMPY_ELSEWHERE:  # ember.numpy functions tested beside the primitive they wrap
        tested |= importlib.import_module(mod).NUMPY_COVERED
    missing = sorted(exported_functions() - tested)
    assert not missing, f"ember.numpy functions without test cases: {missing}"
    assert {"exp", "sum", "einsum", "linalg.norm", "take", "zeros"} <= exported_functions()
