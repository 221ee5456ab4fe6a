"""Elementwise primitives (unary, binary, select, convert_element_type): numpy reference and
shape/dtype rule, rule errors, VJP rules against finite differences, batching rules against a loop.

Expected values come from independent NumPy/Python computations, never from the primitives' own
numpy rules. `COVERED` lists what each family of tests covers; test_prims_custom.py checks that
every registered primitive appears in it.
"""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
from ember.errors import DTypeError, ShapeError
from ember.tracer import prims as P
from tests.helpers import (
    check_grads,
    compiled_cover,
    loop_vmap,
    prim_names,
    raises_naming,
    run,
    vmap_checker,
)

F16, F32, F64, I32, I8, U8, BOOL = (np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int32, np.int8,
                                                           np.uint8, bool))
FLOATS = (F32, F64)
SHAPES = [(), (0, 3), (5,), (2, 3, 4)]
THIS_FILE = "test_prims_elementwise.py"


def total(x, w=None):
    """sum(x * w) over all axes: the scalar loss the VJP tests differentiate."""
    if w is not None:
        x = P.mul(x, w)
    return P.reduce_sum(x, tuple(range(len(x.shape))))


def sample(rng, shape, dtype, lo=-2.0, hi=2.0):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(int(max(lo, np.iinfo(dtype).min)), int(hi) + 1, shape).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


def assert_matches(got, want, dtype, rtol=None):
    """`got` has the expected shape and dtype and equals `want` (computed in float64 or exactly)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == np.dtype(dtype), f"dtype {got.dtype}, expected {np.dtype(dtype)}"
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    if got.dtype.kind == "f":
        tol = rtol if rtol is not None else {2: 2e-3, 4: 2e-6, 8: 1e-12}[got.dtype.itemsize]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype))


# --- unary ----------------------------------------------------------------------------------------

def _round_half_even(x):
    return np.array([float(round(float(v))) for v in x.ravel()], np.float64).reshape(x.shape)


def _erf(x):
    return np.array([math.erf(float(v)) for v in x.ravel()], np.float64).reshape(x.shape)


def _erfc(x):
    return np.array([math.erfc(float(v)) for v in x.ravel()], np.float64).reshape(x.shape)


def _lgamma(x):
    return np.array([math.lgamma(float(v)) for v in x.ravel()], np.float64).reshape(x.shape)


def _mp(fn):
    """An mpmath function element by element on float64 values: the special functions' independent
    references."""
    def ref(*args):
        b = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in args))
        vals = [float(fn(*map(float, t))) for t in zip(*(a.ravel() for a in b))]
        return np.array(vals, np.float64).reshape(b[0].shape)
    return ref


def _invert(x):
    return ~x if x.dtype == BOOL else -x.astype(np.int64) - 1


# name: (wrapper, independent reference on float64 / exact values, domain, accepted dtypes, out dtype)
UNARY = {
    "neg": (P.neg, lambda x: 0 - x, (-3, 3), (F32, F64, I32, I8), None),
    "exp": (P.exp, np.exp, (-2, 2), FLOATS, None),
    "log": (P.log, np.log, (0.1, 3), FLOATS, None),
    "log1p": (P.log1p, lambda x: np.log(1 + x), (-0.5, 3), FLOATS, None),
    "expm1": (P.expm1, lambda x: np.exp(x) - 1, (-2, 2), FLOATS, None),
    "tanh": (P.tanh, lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1), (-2, 2), FLOATS, None),
    "logistic": (P.logistic, lambda x: 1 / (1 + np.exp(-x)), (-4, 4), FLOATS, None),
    "sin": (P.sin, np.sin, (-3, 3), FLOATS, None),
    "cos": (P.cos, np.cos, (-3, 3), FLOATS, None),
    "sqrt": (P.sqrt, lambda x: x ** 0.5, (0.1, 3), FLOATS, None),
    "rsqrt": (P.rsqrt, lambda x: x ** -0.5, (0.1, 3), FLOATS, None),
    "abs": (P.abs, lambda x: np.where(x < 0, -x, x), (-3, 3), (F32, F64, I32), None),
    "sign": (P.sign, lambda x: (x > 0).astype(np.float64) - (x < 0), (-3, 3), (F32, F64, I32), None),
    "floor": (P.floor, lambda x: np.floor(x), (-3, 3), FLOATS, None),
    "ceil": (P.ceil, lambda x: -np.floor(-x), (-3, 3), FLOATS, None),
    "round": (P.round, _round_half_even, (-3, 3), FLOATS, None),
    "erf": (P.erf, _erf, (-2, 2), FLOATS, None),
    "is_finite": (P.is_finite, lambda x: ~(np.isnan(x) | np.isinf(x)), (-3, 3), FLOATS, BOOL),
    "not": (P.not_, _invert, (-5, 5), (BOOL, I32, U8), None),
    "tan": (P.tan, lambda x: np.sin(x) / np.cos(x), (-1.2, 1.2), FLOATS, None),
    "atan": (P.atan, lambda x: np.arcsin(x / np.sqrt(1 + x * x)), (-3, 3), FLOATS, None),
    "asin": (P.asin, lambda x: np.arctan2(x, np.sqrt(1 - x * x)), (-0.9, 0.9), FLOATS, None),
    "acos": (P.acos, lambda x: np.arctan2(np.sqrt(1 - x * x), x), (-0.9, 0.9), FLOATS, None),
    "sinh": (P.sinh, lambda x: (np.exp(x) - np.exp(-x)) / 2, (-2, 2), FLOATS, None),
    "cosh": (P.cosh, lambda x: (np.exp(x) + np.exp(-x)) / 2, (-2, 2), FLOATS, None),
    "asinh": (P.asinh, lambda x: np.sign(x) * np.log(np.abs(x) + np.sqrt(x * x + 1)), (-3, 3), FLOATS, None),
    "acosh": (P.acosh, lambda x: np.log(x + np.sqrt(x * x - 1)), (1.1, 3), FLOATS, None),
    "atanh": (P.atanh, lambda x: 0.5 * np.log((1 + x) / (1 - x)), (-0.9, 0.9), FLOATS, None),
    "cbrt": (P.cbrt, lambda x: np.sign(x) * np.abs(x) ** (1 / 3), (-3, 3), FLOATS, None),
    "exp2": (P.exp2, lambda x: np.exp(x * np.log(2)), (-3, 3), FLOATS, None),
    "log2": (P.log2, lambda x: np.log(x) / np.log(2), (0.1, 3), FLOATS, None),
    "log10": (P.log10, lambda x: np.log(x) / np.log(10), (0.1, 3), FLOATS, None),
    "erfc": (P.erfc, _erfc, (-2, 2), FLOATS, None),
    "lgamma": (P.lgamma, _lgamma, (0.2, 5), FLOATS, None),
    "erf_inv": (P.erf_inv, _mp(mpmath.erfinv), (-0.9, 0.9), FLOATS, None),
    "digamma": (P.digamma, _mp(mpmath.digamma), (0.2, 5), FLOATS, None),
}


def _with_f16(dts):
    """The reference tests also run float16 wherever float32 is accepted."""
    return dts + (F16,) if F32 in dts else dts


UNARY_CASES = [pytest.param(name, dt, id=f"{name}-{dt.name}") for name, spec in UNARY.items()
               for dt in _with_f16(spec[3])]


def _unary_input(rng, name, shape, dtype):
    lo, hi = UNARY[name][2]
    x = sample(rng, shape, dtype, lo, hi)
    if name == "round" and x.size:  # pin the tie-breaking rule: halves round to even
        flat = x.reshape(-1)
        flat[: min(4, flat.size)] = np.array([0.5, 1.5, 2.5, -0.5], dtype)[: min(4, flat.size)]
    if name == "is_finite" and x.size:
        flat = x.reshape(-1)
        flat[: min(3, flat.size)] = np.array([np.inf, np.nan, -np.inf], dtype)[: min(3, flat.size)]
    return x


@pytest.mark.parametrize("name,dtype", UNARY_CASES)
def test_unary_reference(name, dtype, rng):
    fn, ref, _, _, out_dtype = UNARY[name]
    for shape in SHAPES:
        x = _unary_input(rng, name, shape, dtype)
        want = ref(x.astype(np.float64) if dtype.kind == "f" else x)
        for got in (run(lambda a: fn(a), x), fn(x)):  # traced + numpy backend, and eager
            assert_matches(got, want, out_dtype or dtype)
    assert name in prim_names(fn, x)


# --- binary ---------------------------------------------------------------------------------------

def _trunc_div(x, y):
    if x.dtype.kind in "iu":
        return np.trunc(x.astype(np.float64) / y.astype(np.float64))
    return x / y


def _int_pow(x, y):
    if x.dtype.kind not in "iu":
        return x ** y
    xb, yb = np.broadcast_arrays(x, y)
    return np.array([int(a) ** int(b) for a, b in zip(xb.ravel(), yb.ravel())], np.int64).reshape(xb.shape)


def _c_fmod(x, y):
    """C's fmod element by element: math.fmod for floats, truncating integer remainder."""
    xb, yb = np.broadcast_arrays(x, y)
    if xb.dtype.kind in "iu":
        vals = [int(a) - int(b) * int(abs(int(a)) // abs(int(b))) * (1 if (a < 0) == (b < 0) else -1)
                for a, b in zip(xb.ravel(), yb.ravel())]
        return np.array(vals, np.int64).reshape(xb.shape)
    return np.array([math.fmod(float(a), float(b)) for a, b in zip(xb.ravel(), yb.ravel())]).reshape(xb.shape)


ARITH = (F32, F64, I32, BOOL)
NUMERIC = (F32, F64, I32)
ANY = (F32, F64, I32, BOOL)
# name: (wrapper, reference, accepted dtypes, out dtype, domain of x, domain of y)
BINARY = {
    "add": (P.add, lambda x, y: x | y if np.asarray(x).dtype == BOOL else x + y, ARITH, None, None, None),
    "sub": (P.sub, lambda x, y: x - y, NUMERIC, None, None, None),
    "mul": (P.mul, lambda x, y: x & y if np.asarray(x).dtype == BOOL else x * y, ARITH, None, None, None),
    "div": (P.div, _trunc_div, NUMERIC, None, (-7, 7), (0.5, 3)),
    "pow": (P.pow, _int_pow, NUMERIC, None, (0.2, 3), (0, 3)),
    "rem": (P.rem, _c_fmod, NUMERIC, None, (-7, 7), (0.5, 3)),
    "max": (P.maximum, lambda x, y: np.where(x > y, x, y), ANY, None, None, None),
    "min": (P.minimum, lambda x, y: np.where(x < y, x, y), ANY, None, None, None),
    "eq": (P.eq, lambda x, y: x == y, ANY, BOOL, (-2, 2), (-2, 2)),
    "ne": (P.ne, lambda x, y: x != y, ANY, BOOL, (-2, 2), (-2, 2)),
    "lt": (P.lt, lambda x, y: x < y, ANY, BOOL, None, None),
    "le": (P.le, lambda x, y: x <= y, ANY, BOOL, (-2, 2), (-2, 2)),
    "gt": (P.gt, lambda x, y: x > y, ANY, BOOL, None, None),
    "ge": (P.ge, lambda x, y: x >= y, ANY, BOOL, (-2, 2), (-2, 2)),
    "and": (P.and_, lambda x, y: x & y, (BOOL, I32, U8), None, None, None),
    "or": (P.or_, lambda x, y: x | y, (BOOL, I32, U8), None, None, None),
    # the half-angle form (x > 0 or y != 0 here)
    "atan2": (P.atan2, lambda y, x: 2 * np.arctan(y / (np.sqrt(x * x + y * y) + x)), FLOATS, None, (-2, 2), (0.1, 2)),
    # nextafter's step is below the float tolerance: its bits are tested in tests/backends/test_math_explog.py
    "nextafter": (P.nextafter, lambda x, y: x + 0 * y, FLOATS, None, None, None),
    "copysign": (P.copysign, lambda x, y: np.where(np.signbit(y), -np.abs(x), np.abs(x)), FLOATS, None, None, None),
    "logaddexp": (P.logaddexp, lambda x, y: np.log(np.exp(x) + np.exp(y)), FLOATS, None, None, None),
    "logaddexp2": (P.logaddexp2, lambda x, y: np.log(2.0 ** x + 2.0 ** y) / np.log(2), FLOATS, None, None, None),
    # polygamma's order is a whole number (drawn from [1, 3] and floored in _binary_inputs)
    "polygamma": (P.polygamma, _mp(lambda m, x: mpmath.polygamma(int(m), x)), FLOATS, None,
                  (1, 3), (0.5, 3)),
    "zeta": (P.zeta, _mp(mpmath.zeta), FLOATS, None, (1.5, 4), (0.5, 3)),
}
BINARY_CASES = [pytest.param(name, dt, id=f"{name}-{dt.name}") for name, spec in BINARY.items()
                for dt in _with_f16(spec[2])]
SHAPE_PAIRS = [((), ()), ((5,), (5,)), ((0, 3), (0, 3)), ((2, 3, 4), (2, 3, 4)), ((), (2, 3)), ((2, 3), ()),
               ((0, 3), ())]


def _binary_inputs(rng, name, sx, sy, dtype):
    _, _, _, _, dx, dy = BINARY[name]
    dx, dy = dx or (-3, 3), dy or (-3, 3)
    x, y = sample(rng, sx, dtype, *dx), sample(rng, sy, dtype, *dy)
    if name in ("div", "rem") and dtype.kind in "iu":  # nonzero divisors of both signs
        y = (np.where(rng.random(sy) < 0.5, -1, 1) * rng.integers(1, 4, sy)).astype(dtype)
    elif name == "rem":
        y = (np.where(rng.random(sy) < 0.5, -1, 1) * y).astype(dtype)
    elif name == "polygamma":
        x = np.floor(x).astype(dtype)
    return x, y


def _exact(x):
    return x.astype(np.float64) if x.dtype.kind == "f" else x


@pytest.mark.parametrize("name,dtype", BINARY_CASES)
def test_binary_reference(name, dtype, rng):
    fn, ref, _, out_dtype, _, _ = BINARY[name]
    for sx, sy in SHAPE_PAIRS:
        x, y = _binary_inputs(rng, name, sx, sy, dtype)
        want = ref(_exact(x), _exact(y))
        for got in (run(lambda a, b: fn(a, b), x, y), fn(x, y)):
            assert_matches(got, want, out_dtype or dtype)
    assert name in prim_names(fn, x, y)


@pytest.mark.parametrize("name", ["add", "mul", "sub", "max", "lt"])
def test_binary_python_scalar_operand_takes_the_array_dtype(name, rng):
    fn, ref, _, out_dtype, _, _ = BINARY[name]
    x = sample(rng, (4,), F32)
    for got, want in ((run(lambda a: fn(a, 1.5), x), ref(_exact(x), 1.5)),
                      (run(lambda a: fn(1.5, a), x), ref(1.5, _exact(x)))):
        assert_matches(got, want, out_dtype or F32)


@st.composite
def _operand_shapes(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    kind = draw(st.sampled_from(["same", "x scalar", "y scalar"]))
    return (() if kind == "x scalar" else shape), (() if kind == "y scalar" else shape)


@settings(max_examples=25, deadline=None)
@given(shapes=_operand_shapes(), name=st.sampled_from(["add", "mul", "max", "ge"]),
       dtype=st.sampled_from([F32, F64]), seed=st.integers(0, 2 ** 16))
def test_binary_shape_rule_property(shapes, name, dtype, seed):
    fn, ref, _, out_dtype, _, _ = BINARY[name]
    x, y = _binary_inputs(np.random.default_rng(seed), name, *shapes, dtype)
    assert_matches(run(lambda a, b: fn(a, b), x, y), ref(_exact(x), _exact(y)), out_dtype or dtype)


# --- select and convert_element_type ---------------------------------------------------------------

def _where_loop(p, t, f):
    p, t, f = np.broadcast_arrays(p, t, f)
    return np.array([b if c else d for c, b, d in zip(p.ravel(), t.ravel(), f.ravel())],
                    dtype=t.dtype).reshape(p.shape)


SELECT_SHAPES = [((), (), ()), ((4,), (4,), (4,)), ((0, 3), (0, 3), (0, 3)), ((2, 3, 4), (2, 3, 4), (2, 3, 4)),
                 ((), (2, 3), (2, 3)), ((2, 3), (), (2, 3)), ((2, 3), (2, 3), ()), ((2, 3), (), ()),
                 ((), (), (3,))]


@pytest.mark.parametrize("dtype", [F32, F64, I32, BOOL], ids=str)
def test_select_reference(dtype, rng):
    for sp, st_, sf in SELECT_SHAPES:
        p, t, f = rng.random(sp) < 0.5, sample(rng, st_, dtype), sample(rng, sf, dtype)
        want = _where_loop(p, t, f)
        for got in (run(lambda a, b, c: P.select(a, b, c), p, t, f), P.select(p, t, f)):
            assert_matches(got, want, dtype)
    assert "select" in prim_names(P.select, p, t, f)


def _trunc_to_int(x):
    return np.trunc(x.astype(np.float64))


CONVERSIONS = [
    (F32, F64, lambda x: x.astype(np.float64)),
    (F64, F32, lambda x: np.array([np.float32(float(v)) for v in x.ravel()], np.float32).reshape(x.shape)),
    (F32, I32, _trunc_to_int),
    (F64, I8, _trunc_to_int),
    (I32, F32, lambda x: x.astype(np.float64)),
    (BOOL, F32, lambda x: np.where(x, 1.0, 0.0)),
    (F32, BOOL, lambda x: x != 0),
    (I32, BOOL, lambda x: x != 0),
    (I32, U8, lambda x: x % 256),
    (F32, np.dtype(np.float16), lambda x: x.astype(np.float64)),
]


@pytest.mark.parametrize("src,dst,ref", CONVERSIONS, ids=[f"{a.name}-{b.name}" for a, b, _ in CONVERSIONS])
def test_convert_element_type_reference(src, dst, ref, rng):
    for shape in SHAPES:
        x = sample(rng, shape, src, -5, 5)
        if x.size and src.kind == "f":
            x.reshape(-1)[0] = 0.0  # zero converts to False / 0
        for got in (run(lambda a: P.convert_element_type(a, dst), x), P.convert_element_type(x, dst)):
            assert_matches(got, ref(x), dst)
    assert "convert_element_type" in prim_names(lambda a: P.convert_element_type(a, dst), x)


def test_convert_element_type_output_is_strong():
    out = ember.make_graph(lambda a: P.convert_element_type(P.mul(a, 2.0), F64))(1.0).outputs[0]
    assert out.aval.dtype == F64 and not out.aval.weak_type


# --- shape/dtype rule errors ---------------------------------------------------------------------

_REJECTS = {"float": I32, "numeric": BOOL, "intbool": F32}
_UNARY_KIND = {name: ("intbool" if name == "not" else "numeric" if I32 in spec[3] else "float")
               for name, spec in UNARY.items()}


def _raises(exc, fn, *args, words=()):
    """Tracing `fn` on args raises `exc`, naming every word and this file's line."""
    return raises_naming(exc, ember.jit(fn), *args, words=words, location=THIS_FILE)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_rejects_dtype(name):
    fn = UNARY[name][0]
    bad = _REJECTS[_UNARY_KIND[name]]
    _raises(DTypeError, lambda a: fn(a), np.zeros(3, bad), words=(name, bad.name))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_rejects_mismatched_shapes_and_dtypes(name):
    fn, _, accepted, _, _, _ = BINARY[name]
    dt = accepted[0]
    _raises(ShapeError, lambda a, b: fn(a, b), np.zeros((2, 3), dt), np.zeros((3, 2), dt),
            words=(name, "(2, 3)", "(3, 2)"))
    _raises(ShapeError, lambda a, b: fn(a, b), np.zeros((3,), dt), np.zeros((1,), dt), words=(name, "(3,)", "(1,)"))
    other = I32 if dt != I32 else F32
    _raises(DTypeError, lambda a, b: fn(a, b), np.zeros(3, dt), np.zeros(3, other), words=(name, dt.name, other.name))
    _raises(DTypeError, lambda a, b: fn(a, b), np.zeros(3, F32), np.zeros(3, F64), words=(name, "float32", "float64"))


@pytest.mark.parametrize("name,bad", [("sub", BOOL), ("div", BOOL), ("pow", BOOL), ("and", F32), ("or", F64)])
def test_binary_rejects_kind(name, bad):
    fn = BINARY[name][0]
    _raises(DTypeError, lambda a, b: fn(a, b), np.zeros(3, bad), np.zeros(3, bad), words=(name, bad.name))


def test_select_rule_errors():
    p, x = np.zeros(3, bool), np.zeros(3, F32)
    _raises(DTypeError, lambda a, b, c: P.select(a, b, c), x, x, x, words=("select", "bool", "float32"))
    _raises(DTypeError, lambda a, b, c: P.select(a, b, c), p, x, x.astype(F64), words=("select", "float32", "float64"))
    _raises(ShapeError, lambda a, b, c: P.select(a, b, c), np.zeros(4, bool), x, x, words=("select", "(4,)", "(3,)"))
    _raises(ShapeError, lambda a, b, c: P.select(a, b, c), p, x, np.zeros((3, 1), F32),
            words=("select", "(3,)", "(3, 1)"))


def test_convert_element_type_rejects_unsupported_dtype():
    _raises(DTypeError, lambda a: P.convert_element_type(a, np.complex64), np.zeros(3, F32), words=("complex64",))
    _raises(DTypeError, lambda a: P.convert_element_type(a, "not-a-dtype"), np.zeros(3, F32), words=("not-a-dtype",))


def test_eager_rule_errors_name_the_op_and_the_callers_line():
    with pytest.raises(ShapeError) as info:
        P.mul(np.zeros(2, F32), np.zeros(3, F32))
    assert "mul" in str(info.value) and THIS_FILE in str(info.value)


# --- VJP rules ------------------------------------------------------------------------------------

UNARY_DIFF = ["neg", "exp", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "abs",
              "erf", "tan", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt", "exp2", "log2",
              "log10", "erfc", "lgamma", "erf_inv", "digamma"]
UNARY_NONDIFF = ["sign", "floor", "ceil", "round", "is_finite"]
VJP_SHAPES = [(), (5,), (2, 3), (0, 3)]


@pytest.mark.parametrize("name", UNARY_DIFF)
def test_unary_vjp(name, rng):
    fn, _, (lo, hi), _, _ = UNARY[name]
    for shape in VJP_SHAPES:
        x = rng.uniform(lo, hi, shape)
        if name in ("abs", "cbrt"):
            x = np.where(np.abs(x) < 0.1, 0.5, x)  # away from the kink (cbrt: its infinite derivative at 0)
        w = rng.normal(size=shape)
        check_grads(lambda a, w=w: total(fn(a), w), (x,))
    assert name in prim_names(lambda a: total(fn(a), w), x)


@pytest.mark.parametrize("name", UNARY_NONDIFF + ["not"])
def test_unary_nondifferentiable_gives_zero_gradient(name, rng):
    fn = UNARY[name][0]
    x = rng.uniform(-3, 3, (2, 3))
    if name == "not":
        f = lambda a: total(P.convert_element_type(P.not_(P.gt(a, 0.0)), F64), x)  # noqa: E731
    elif name == "is_finite":
        f = lambda a: total(P.convert_element_type(P.is_finite(a), F64), x)  # noqa: E731
    else:
        f = lambda a: total(P.add(fn(a), P.mul(a, 0.0)), x)  # noqa: E731
    g = ember.grad(f)(x)
    assert g.shape == x.shape and g.dtype == F64
    np.testing.assert_array_equal(g, np.zeros_like(x))
    assert name in prim_names(f, x)


def test_abs_and_sign_at_zero():
    g = ember.grad(lambda a: total(P.abs(a)))(np.array([-1.0, 0.0, -0.0, 2.0]))
    np.testing.assert_array_equal(g, [-1.0, 1.0, 1.0, 1.0])  # abs'(0) = 1, as in JAX


def _no_ties(x, y, gap=0.2):
    """Move the higher-rank operand away from the other so that max/min have no ties."""
    if np.ndim(y) >= np.ndim(x):
        return x, np.where(np.abs(y - x) < gap, x + 0.5, y)
    return np.where(np.abs(x - y) < gap, y + 0.5, x), y


VJP_PAIRS = [((), ()), ((5,), (5,)), ((2, 3), (2, 3)), ((), (2, 3)), ((2, 3), ()), ((0, 3), ())]
BINARY_DIFF = ["add", "sub", "mul", "div", "pow", "max", "min", "rem", "atan2", "copysign", "logaddexp",
               "logaddexp2"]


def _diff_inputs(rng, name, sx, sy):
    if name == "pow":
        return rng.uniform(0.5, 2.0, sx), rng.uniform(-1.5, 2.5, sy)
    if name == "div":
        return rng.uniform(-2, 2, sx), rng.uniform(0.5, 2, sy) * np.where(rng.random(sy) < 0.5, -1, 1)
    if name == "rem":  # x / y away from the integers, where rem jumps
        while True:
            x, y = rng.uniform(-4, 4, sx), rng.uniform(0.5, 2, sy) * np.where(rng.random(sy) < 0.5, -1, 1)
            frac = np.abs(x / y) % 1.0
            if np.all((frac > 0.05) & (frac < 0.95)):
                return x, y
    if name == "copysign":  # away from x's kink and y's jump at 0
        return (rng.uniform(0.2, 2, sx) * np.where(rng.random(sx) < 0.5, -1, 1),
                rng.uniform(0.2, 2, sy) * np.where(rng.random(sy) < 0.5, -1, 1))
    return _no_ties(rng.uniform(-2, 2, sx), rng.uniform(-2, 2, sy))


@pytest.mark.parametrize("name,first,error", [("polygamma", 1.0, ValueError), ("zeta", 2.5, NotImplementedError)])
def test_polygamma_and_zeta_vjp_in_their_second_operand(name, first, error, rng):
    """As JAX: polygamma differentiates in x and zeta in q; differentiating the order m (ValueError) or
    zeta's s (NotImplementedError) raises."""
    fn = BINARY[name][0]
    for shape in VJP_SHAPES:
        q, w = rng.uniform(0.5, 3, shape), rng.normal(size=shape)
        check_grads(lambda a, w=w: total(fn(first, a), w), (q,))
    q = rng.uniform(0.5, 3, (3,))
    with pytest.raises(error):
        ember.grad(lambda a: total(fn(a, q)))(np.full(3, first))


def test_nextafter_has_no_vjp():
    """As JAX: differentiating through nextafter raises NotImplementedError with JAX's message."""
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'nextafter' not implemented"):
        ember.grad(lambda a: total(P.nextafter(a, 3.0)))(np.ones(3))


@pytest.mark.parametrize("name", BINARY_DIFF)
def test_binary_vjp_both_operands(name, rng):
    fn = BINARY[name][0]
    for sx, sy in VJP_PAIRS:
        x, y = _diff_inputs(rng, name, sx, sy)
        w = rng.normal(size=np.broadcast_shapes(sx, sy))
        gx, gy = check_grads(lambda a, b, w=w: total(fn(a, b), w), (x, y), argnums=(0, 1))
        assert np.shape(gx) == sx and np.shape(gy) == sy
    assert name in prim_names(lambda a, b: total(fn(a, b), w), x, y)


@pytest.mark.parametrize("name", BINARY_DIFF)
def test_binary_vjp_one_operand_active(name, rng):
    fn = BINARY[name][0]
    for sx, sy in VJP_PAIRS:  # the other operand is a closed-over constant
        x, y = _diff_inputs(rng, name, sx, sy)
        w = rng.normal(size=np.broadcast_shapes(sx, sy))
        (gx,) = check_grads(lambda a, y=y, w=w: total(fn(a, y), w), (x,))
        (gy,) = check_grads(lambda b, x=x, w=w: total(fn(x, b), w), (y,))
        assert np.shape(gx) == sx and np.shape(gy) == sy
    x, y = _diff_inputs(rng, name, (2, 3), (2, 3))
    w = rng.normal(size=(2, 3))
    c = 0.7 if name != "max" else 0.0
    xs = np.where(np.abs(x - c) < 0.1, c + 0.3, x)
    if name == "rem":  # x / 0.7 away from the integers
        xs = np.where(np.abs(xs / c - np.round(xs / c)) < 0.05, xs + 0.2, xs)
    check_grads(lambda a: total(fn(a, c), w), (xs,))  # Python scalar operand (a Literal)
    if name != "pow":  # (rem: 0.7 / y away from the integers)
        check_grads(lambda b: total(fn(c, b), w), (np.where(np.abs(np.abs(y) - c) < 0.1, np.sign(y) * (c + 0.3), y),))


def test_relu_style_max_vjp(rng):
    x = rng.uniform(-2, 2, (3, 4))
    x = np.where(np.abs(x) < 0.1, 0.5, x)
    w = rng.normal(size=(3, 4))
    g = check_grads(lambda a: total(P.maximum(a, 0.0), w), (x,))[0]
    np.testing.assert_array_equal(g, np.where(x > 0, w, 0.0))
    # ties split evenly (as jax.lax.max), whether or not the other operand is differentiated
    z = np.array([0.0, 1.0, -1.0])
    np.testing.assert_array_equal(ember.grad(lambda a: total(P.maximum(a, 0.0)))(z), [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(ember.grad(lambda a: total(P.minimum(a, 0.0)))(z), [0.5, 0.0, 1.0])
    gx, gy = ember.grad(lambda a, b: total(P.maximum(a, b)), argnums=(0, 1))(z, np.zeros(3))
    np.testing.assert_array_equal(gx, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(gy, [0.5, 0.0, 1.0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # 0 ** -1 = inf before the select drops it
def test_pow_vjp_at_zero():
    gx, gy = ember.grad(lambda a, b: total(P.pow(a, b)), argnums=(0, 1))(np.array([0.0, 0.0, 2.0]),
                                                                          np.array([0.0, 2.0, 3.0]))
    np.testing.assert_allclose(gx, [0.0, 0.0, 12.0])
    np.testing.assert_allclose(gy, [0.0, 0.0, 8.0 * np.log(2.0)])


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge", "and", "or"])
def test_comparisons_and_logic_give_zero_gradient(name, rng):
    fn = BINARY[name][0]
    x, y = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (2, 3))
    if name in ("and", "or"):
        f = lambda a, b: total(P.convert_element_type(fn(P.gt(a, 0.0), P.lt(b, 0.0)), F64))  # noqa: E731
    else:
        f = lambda a, b: total(P.add(P.convert_element_type(fn(a, b), F64), P.mul(a, 0.0)))  # noqa: E731
    gx, gy = ember.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, np.zeros_like(x))
    np.testing.assert_array_equal(gy, np.zeros_like(y))
    assert name in prim_names(f, x, y)


SELECT_VJP = [((2, 3), (2, 3), (2, 3)), ((), (2, 3), (2, 3)), ((2, 3), (), (2, 3)), ((2, 3), (2, 3), ()),
              ((), (), ()), ((3,), (), ())]


@pytest.mark.parametrize("sp,st_,sf", SELECT_VJP)
def test_select_vjp(sp, st_, sf, rng):
    shape = np.broadcast_shapes(sp, st_, sf)
    p = rng.random(sp) < 0.5
    t, f, w = rng.normal(size=st_), rng.normal(size=sf), rng.normal(size=shape)
    gt, gf = check_grads(lambda a, b: total(P.select(p, a, b), w), (t, f), argnums=(0, 1))
    pb = np.broadcast_to(p, shape)
    np.testing.assert_allclose(gt, np.sum(np.where(pb, w, 0.0)) if st_ == () else np.where(pb, w, 0.0))
    np.testing.assert_allclose(gf, np.sum(np.where(pb, 0.0, w)) if sf == () else np.where(pb, 0.0, w))


def test_select_predicate_from_the_input_is_not_differentiated(rng):
    x = rng.uniform(-2, 2, (6,))
    g = check_grads(lambda a: total(P.select(P.gt(a, 0.0), P.mul(a, a), P.neg(a))), (np.where(np.abs(x) < .1, .5, x),))
    assert g[0].shape == (6,)


def test_convert_element_type_vjp(rng):
    x64, w = rng.normal(size=(2, 3)), rng.normal(size=(2, 3)).astype(F32)
    g = ember.grad(lambda a: total(P.convert_element_type(a, F32), w))(x64)
    assert g.dtype == F64
    np.testing.assert_array_equal(g, w.astype(F64))
    x32, w64 = x64.astype(F32), rng.normal(size=(2, 3))
    g = ember.grad(lambda a: total(P.mul(P.convert_element_type(a, F64), w64)))(x32)
    assert g.dtype == F32
    np.testing.assert_allclose(g, w64.astype(F32))
    # through a float -> int conversion nothing flows back
    g = ember.grad(lambda a: total(P.add(P.convert_element_type(P.convert_element_type(a, I32), F64),
                                         P.mul(a, 0.0))))(x64)
    np.testing.assert_array_equal(g, np.zeros_like(x64))
    # round trip f64 -> f32 -> f64 against finite differences with a step f32 resolves
    check_grads(lambda a: total(P.convert_element_type(P.convert_element_type(a, F32), F64), w64),
                (x64,), eps=1e-3, rtol=1e-3, atol=1e-4)


# --- backward passes written in terms of the output ------------------------------------------------

_FROM_OUTPUT = {
    "exp": P.exp, "tanh": P.tanh, "logistic": P.logistic, "sqrt": P.sqrt, "rsqrt": P.rsqrt, "expm1": P.expm1,
}  # max(x, 0) reads x to split ties as JAX does; nn.relu's own rule reads only its output (test_nn.py)


def _backward_readers_of_input(fn, x):
    """(roles of the nodes that read the input of grad(sum(fn(x) * w)), whole stage text)."""
    w = np.linspace(0.5, 1.5, x.size).reshape(x.shape)
    stage = ember.jit(ember.grad(lambda a: total(fn(a), w))).lower(x).stage("after autodiff")
    x_var = stage.graph.inputs[0]
    roles = [stage.annotations.get(n) for n in stage.graph.nodes if x_var in n.inputs]
    return roles, stage


@pytest.mark.parametrize("name", sorted(_FROM_OUTPUT))
def test_vjp_does_not_read_the_input(name):
    roles, stage = _backward_readers_of_input(_FROM_OUTPUT[name], np.linspace(0.2, 2.0, 6))
    assert roles == ["active"], f"{name}: input read by nodes with roles {roles}\n{stage.graph}"
    assert "backward" in stage.annotations.values()


def test_vjp_input_reader_check_detects_a_backward_read():
    roles, _ = _backward_readers_of_input(P.sin, np.linspace(0.2, 2.0, 6))  # d sin = cos(x) reads x
    assert "backward" in roles and "active" in roles


# --- batching rules --------------------------------------------------------------------------------

check_vmap = vmap_checker(tol=1e-6)


# (per-example shape, in_axes, out_axes); the batch size is 3
UNARY_VMAP = [((2, 4), 0, 0), ((2, 4), 1, 0), ((2, 4), -1, 1), ((2, 4), 0, 2), ((), 0, 0), ((0, 2), 1, 1)]


def _batched(rng, shape, axis, dtype, lo=-2, hi=2, size=3):
    if axis is None:
        return sample(rng, shape, dtype, lo, hi)
    full = list(shape)
    full.insert(axis % (len(shape) + 1), size)
    return sample(rng, tuple(full), dtype, lo, hi)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_batching(name, rng):
    fn, _, (lo, hi), dts, _ = UNARY[name]
    for shape, ax, oax in UNARY_VMAP:
        x = _batched(rng, shape, ax, dts[0], lo, hi)
        check_vmap(lambda a: fn(a), ax, (x,), oax)
    assert name in prim_names(ember.vmap(lambda a: fn(a)), x)


# (x per-example shape, y per-example shape, in_axes, out_axes)
BINARY_VMAP = [((2, 4), (2, 4), (0, 0), 0), ((2, 4), (2, 4), (0, None), 1), ((2, 4), (2, 4), (None, 1), 0),
               ((2, 4), (2, 4), (1, -1), -1), ((2, 4), (), (0, None), 0), ((), (2, 4), (0, None), 1),
               ((), (2, 4), (None, 2), 0), ((), (), (0, 0), 0), ((2, 4), (), (None, 0), 2)]


def _binary_features(config) -> list:
    """The elementwise batching rule moves and broadcasts batch axes the same way whatever the axis:
    which operands are batched and which are scalars are the layouts it makes."""
    sx, sy, axes, oax = config
    return [("batched", axes[0] is None, axes[1] is None), ("scalar", len(sx) == 0, len(sy) == 0),
            ("moved", axes[0] not in (0, None) or axes[1] not in (0, None) or oax != 0)]


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_batching(name, rng):
    fn, _, dts, _, dx, dy = BINARY[name]
    dt = dts[0] if name not in ("and", "or") else I32
    for sx, sy, axes, oax in compiled_cover(BINARY_VMAP, _binary_features):
        x = _batched(rng, sx, axes[0], dt, *(dx or (-3, 3)))
        y = _batched(rng, sy, axes[1], dt, *(dy or (-3, 3)))
        check_vmap(lambda a, b: fn(a, b), axes, (x, y), oax)
    assert name in prim_names(ember.vmap(lambda a, b: fn(a, b), axes), x, y)


_S = (2, 4)
SELECT_VMAP = [((_S, _S, _S), (0, 0, 0), 0), ((_S, _S, _S), (0, None, None), 1), ((_S, _S, _S), (None, 0, None), 0),
               ((_S, _S, _S), (None, None, 1), 1), ((_S, _S, _S), (1, 0, -1), 0), (((), _S, _S), (0, None, None), 0),
               (((), _S, ()), (0, 1, None), 1), ((_S, (), ()), (None, 0, 0), 0), (((), (), ()), (0, 0, None), 0)]


@pytest.mark.parametrize("shapes,axes,oax", SELECT_VMAP)
def test_select_batching(shapes, axes, oax, rng):
    p = _batched(rng, shapes[0], axes[0], BOOL)
    t, f = (_batched(rng, s, a, F32) for s, a in zip(shapes[1:], axes[1:]))
    check_vmap(lambda a, b, c: P.select(a, b, c), axes, (p, t, f), oax)


@pytest.mark.parametrize("src,dst", [(F32, F64), (F64, I32), (I32, F32), (F32, BOOL)], ids=str)
def test_convert_element_type_batching(src, dst, rng):
    for shape, ax, oax in UNARY_VMAP:
        x = _batched(rng, shape, ax, src, -4, 4)
        check_vmap(lambda a: P.convert_element_type(a, dst), ax, (x,), oax)


def test_nested_vmap_binary_and_select(rng):
    x, y = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))

    def f(a, b):
        return P.select(P.gt(a, b), P.mul(a, b), P.exp(P.sub(a, b)))

    inner = ember.vmap(f, (None, 0))
    got = ember.vmap(inner, (0, None), 1)(x, y)
    want = loop_vmap(lambda a, b: loop_vmap(f, (None, 0), (a, b)), (0, None), (x, y), 1)
    assert got.shape == (5, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_vmap_of_grad_of_elementwise(rng):
    x = rng.uniform(0.2, 2, (3, 5))
    f = ember.grad(lambda a: total(P.mul(P.tanh(a), P.log(a))))
    check_vmap(f, 0, (x,))
    check_vmap(f, 1, (x,), 1)


COVERED = {
    "reference": set(UNARY) | set(BINARY) | {"select", "convert_element_type"},
    "errors": set(UNARY) | set(BINARY) | {"select", "convert_element_type"},
    "vjp": set(UNARY_DIFF) | set(UNARY_NONDIFF) | {"not"} | set(BINARY_DIFF)
    | {"eq", "ne", "lt", "le", "gt", "ge", "and", "or", "select", "convert_element_type", "nextafter",
       "polygamma", "zeta"},
    "batch": set(UNARY) | set(BINARY) | {"select", "convert_element_type"},
}
