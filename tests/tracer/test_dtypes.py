"""The dtype policy: canonical dtypes, weakly typed Python scalars and promotion (as in JAX, a Python
scalar never widens an array's dtype; strong dtypes promote on JAX's lattice), checked on
dtypes.result_type directly and through ember.numpy on tracers and in eager mode."""

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.errors import DTypeError
from ember.tracer import dtypes
from ember.tracer import prims as P

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U32, BOOL = np.dtype(np.uint8), np.dtype(np.uint32), np.dtype(bool)
THIS_FILE = "test_dtypes.py"


def arr(dtype, shape=(3,)):
    return np.ones(shape, dtype)


# (description, ember.numpy function of x, dtype of x, expected result dtype)
PROMOTIONS = [
    ("python float * f16", lambda x: enp.multiply(x, 2.5), F16, F16),
    ("python float + f32 (left)", lambda x: enp.add(1.5, x), F32, F32),
    ("python int * f16", lambda x: enp.multiply(x, 3), F16, F16),
    ("python int + int8", lambda x: enp.add(x, 100), I8, I8),
    ("python int - uint8", lambda x: enp.subtract(3, x), U8, U8),
    ("python float + int32", lambda x: enp.add(x, 1.5), I32, F32),
    ("python float * int8", lambda x: enp.multiply(x, 0.5), I8, F32),
    ("python float + bool", lambda x: enp.add(x, 1.5), BOOL, F32),
    ("python int + bool", lambda x: enp.add(x, 1), BOOL, I32),
    ("python bool & bool", lambda x: enp.bitwise_and(x, True), BOOL, BOOL),
    ("python bool + int8", lambda x: enp.add(x, True), I8, I8),
    ("f32 + f64", lambda x: enp.add(x, arr(F64)), F32, F64),
    ("f16 * f32", lambda x: enp.multiply(x, arr(F32)), F16, F32),
    ("int32 + bool", lambda x: enp.add(x, arr(BOOL)), I32, I32),
    ("bool + bool", lambda x: enp.add(x, arr(BOOL)), BOOL, BOOL),
    ("uint8 + int8", lambda x: enp.add(x, arr(I8)), U8, I16),
    ("int32 + int64", lambda x: enp.add(x, arr(I64)), I32, I64),
    ("int8 + f16", lambda x: enp.add(x, arr(F16)), I8, F16),
    ("int32 * f32", lambda x: enp.multiply(x, arr(F32)), I32, F32),
    ("int32 + f16", lambda x: enp.add(x, arr(F16)), I32, F16),
    ("int64 - f32", lambda x: enp.subtract(x, arr(F32)), I64, F32),
    ("python float * int64", lambda x: enp.multiply(x, 0.5), I64, F64),
    ("uint32 + int32", lambda x: enp.add(x, arr(I32)), U32, I64),
    ("numpy f64 scalar is strong", lambda x: enp.multiply(x, np.float64(2.0)), F32, F64),
    ("numpy int8 scalar + uint8", lambda x: enp.add(x, np.int8(1)), U8, I16),
    ("0-d f64 array is strong", lambda x: enp.multiply(x, np.array(2.0)), F32, F64),
    ("int32 / python int", lambda x: enp.divide(x, 2), I32, F32),
    ("f16 / python int", lambda x: enp.divide(x, 2), F16, F16),
    ("sqrt of int32", lambda x: enp.sqrt(x), I32, F32),
    ("exp of f16", lambda x: enp.exp(x), F16, F16),
    ("where with a python scalar", lambda x: enp.where(enp.greater(x, 0), x, 0.0), F16, F16),
    ("maximum with a python int", lambda x: enp.maximum(x, 0), I8, I8),
    ("comparison", lambda x: enp.less(x, 1.5), I32, BOOL),
]
IDS = [p[0] for p in PROMOTIONS]


@pytest.mark.parametrize("fn,dtype,want", [p[1:] for p in PROMOTIONS], ids=IDS)
def test_promotion_on_tracers(fn, dtype, want):
    g = ember.make_graph(fn)(arr(dtype))
    assert g.outputs[0].aval.dtype == want
    assert ember.jit(fn)(arr(dtype)).dtype == want


@pytest.mark.parametrize("fn,dtype,want", [p[1:] for p in PROMOTIONS], ids=IDS)
def test_promotion_in_eager_mode(fn, dtype, want):
    out = fn(arr(dtype))
    assert isinstance(out, np.ndarray) and out.dtype == want


# operators and NumPy ufuncs on tracers go through ember.numpy too
OPERATORS = [
    ("x * 2.5", lambda x: x * 2.5, F16, F16),
    ("1.5 + x", lambda x: 1.5 + x, I32, F32),
    ("x / 2", lambda x: x / 2, I8, F32),
    ("x & True", lambda x: x & True, BOOL, BOOL),
    ("x + 1", lambda x: x + 1, BOOL, I32),
    ("2 ** x", lambda x: 2 ** x, F16, F16),
    ("-x", lambda x: -x, I8, I8),
    ("x < 1.5", lambda x: x < 1.5, U8, BOOL),
    ("np.sin(x)", lambda x: np.sin(x), F16, F16),
    ("np.float64 * x", lambda x: np.float64(2.0) * x, F32, F64),
    ("f64 array * x", lambda x: np.ones(3) * x, F32, F64),
]


@pytest.mark.parametrize("fn,dtype,want", [p[1:] for p in OPERATORS], ids=[p[0] for p in OPERATORS])
def test_operators_on_tracers_promote_like_ember_numpy(fn, dtype, want):
    assert ember.jit(fn)(arr(dtype)).dtype == want


def test_python_scalar_arguments_are_weak():
    x16 = arr(F16)
    assert ember.jit(lambda a, b: a * b)(2.0, x16).dtype == F16
    assert ember.jit(lambda a, b: a + b)(2, arr(I8)).dtype == I8
    assert ember.jit(lambda a, b: a + b)(2, 1.5).dtype == F32
    assert ember.jit(lambda a, b: enp.exp(a) * b)(2.0, x16).dtype == F16
    g = ember.make_graph(lambda a: a)(2.0)
    assert g.inputs[0].aval.weak_type and g.inputs[0].aval.dtype == F32
    assert not ember.make_graph(lambda a: a)(np.float32(2.0)).inputs[0].aval.weak_type


def test_primitive_wrappers_keep_weak_operands_weak():
    """A Python scalar operand of a primitive wrapper is a weak Literal of the other operand's dtype."""
    g = ember.make_graph(lambda a: P.select(P.gt(a, 0.0), P.mul(P.add(a, 1), 2.0), 0.5))(2.0)
    assert g.outputs[0].aval == dtypes_aval(F32, weak=True)
    g = ember.make_graph(lambda a: P.mul(a, 2.0))(np.float32(2.0))
    assert g.outputs[0].aval == dtypes_aval(F32, weak=False)
    lit = g.nodes[0].inputs[1]
    assert lit.aval == dtypes_aval(F32, weak=True) and lit.value == 2.0


def dtypes_aval(dtype, weak):
    from ember.tracer.aval import ShapedArray

    return ShapedArray((), dtype, weak)


def test_weak_type_survives_arithmetic_with_python_scalars():
    assert ember.jit(lambda a, b: (a * 2) * b)(2.0, arr(F16)).dtype == F16


# --- convert_element_type's weak_type ------------------------------------------------------------

def _converts(graph):
    return [n for n in graph.nodes if n.prim is P.convert_element_type_p]


def test_convert_element_type_sets_the_weak_type_param_and_aval():
    g = ember.make_graph(lambda a: P.convert_element_type(a, F32, weak_type=True))(arr(I32))
    (node,) = _converts(g)
    assert dict(node.params) == {"new_dtype": F32, "weak_type": True}
    assert g.outputs[0].aval.weak_type and g.outputs[0].aval.dtype == F32
    assert "weak_type=True" in str(g)
    (node,) = _converts(ember.make_graph(lambda a: P.convert_element_type(a, F64))(arr(I32)))
    assert node.params["weak_type"] is False and not node.outputs[0].aval.weak_type


def test_convert_element_type_weak_type_is_canonical():
    one = ember.make_graph(lambda a: P.convert_element_type(a, F32, weak_type=1))(arr(I32))
    true = ember.make_graph(lambda a: P.convert_element_type(a, F32, weak_type=True))(arr(I32))
    assert _converts(one)[0].params["weak_type"] is True and one.fingerprint() == true.fingerprint()


def test_convert_to_the_same_dtype_changes_only_the_weak_type():
    """A weak float32 made strong is a node (as astype in JAX); the same dtype and weak type is none."""
    g = ember.make_graph(lambda s: P.convert_element_type(s, F32))(2.0)
    assert len(_converts(g)) == 1 and not g.outputs[0].aval.weak_type
    assert not _converts(ember.make_graph(lambda s: P.convert_element_type(s, F32, weak_type=True))(2.0))
    assert not _converts(ember.make_graph(lambda a: P.convert_element_type(a, F32))(arr(F32)))


def test_convert_element_type_eagerly_is_a_numpy_array_of_the_dtype():
    x = np.arange(3, dtype=np.int32)
    out = P.convert_element_type(x, F32, weak_type=True)
    assert isinstance(out, np.ndarray) and out.dtype == F32
    np.testing.assert_array_equal(out, [0.0, 1.0, 2.0])
    same = P.convert_element_type(out, F32, weak_type=True)
    assert same.dtype == F32 and same is not out


def test_convert_vjp_gives_the_cotangent_the_inputs_dtype_and_weak_type():
    f = lambda s: P.mul(P.convert_element_type(s, F64), 3.0)  # noqa: E731
    g = ember.make_graph(ember.grad(f))(2.0)
    back = [n for n in _converts(g) if n.params["new_dtype"] == F32]
    assert back and all(n.params["weak_type"] for n in back)
    assert g.outputs[0].aval.dtype == F32
    out = ember.grad(f)(2.0)
    assert out.dtype == F32 and out == 3.0


def test_convert_batching_keeps_the_weak_type():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    g = ember.make_graph(ember.vmap(lambda r: P.convert_element_type(r, F32, weak_type=True)))(x)
    assert g.outputs[0].aval.weak_type and g.outputs[0].aval.shape == (2, 3)
    assert _converts(g)[0].params["weak_type"] is True


# --- dtypes module --------------------------------------------------------------------------------

@pytest.mark.parametrize("operands,want", [
    (((F16, False), (F32, True)), (F16, False)),
    (((I32, False), (F32, True)), (F32, True)),
    (((I8, False), (I32, True)), (I8, False)),
    (((BOOL, False), (I32, True)), (I32, True)),
    (((BOOL, False), (BOOL, True)), (BOOL, False)),
    (((F32, False), (F64, False)), (F64, False)),
    (((U8, False), (I8, False)), (I16, False)),
    (((I32, False), (F16, False)), (F16, False)),
    (((I64, False), (np.dtype(np.uint64), False)), (F64, True)),
    (((I64, False), (F32, True)), (F64, True)),
    (((F64, True), (F32, True)), (F64, True)),
    (((I32, True), (F32, True)), (F32, True)),
    (((BOOL, True), (I32, True)), (I32, True)),
    (((F16, True), (F16, True)), (F16, True)),
    (((I64, True), (I32, True)), (I64, True)),
    (((F64, True), (I8, False)), (F64, True)),  # a weak float64 (x_i64 * 0.5) keeps a weak join 64-bit
    (((I64, True), (BOOL, False)), (I64, True)),
    (((F32, True),), (F32, True)),
    (((I16, False),), (I16, False)),
], ids=str)
def test_result_type(operands, want):
    assert dtypes.result_type(*operands) == want


@pytest.mark.parametrize("value,want", [
    (1.5, (F32, True)), (3, (I32, True)), (True, (BOOL, True)), (np.float64(1), (F64, False)),
    (np.int8(1), (I8, False)), (np.bool_(True), (BOOL, False)), (np.float16(1), (F16, False)),
], ids=str)
def test_scalar_dtype(value, want):
    assert dtypes.scalar_dtype(value) == want


def test_scalar_dtype_rejects_complex_and_non_scalars():
    with pytest.raises(DTypeError, match="complex"):
        dtypes.scalar_dtype(1j)
    with pytest.raises(DTypeError, match="str"):
        dtypes.scalar_dtype("1")


@pytest.mark.parametrize("spec,want", [(float, F32), (int, I32), (bool, BOOL), ("float64", F64), (np.int8, I8),
                                       (np.dtype("uint32"), U32), ("f2", F16)], ids=str)
def test_canonicalize(spec, want):
    assert dtypes.canonicalize(spec) == want


@pytest.mark.parametrize("spec,word", [(np.complex64, "complex64"), ("float128", "float128"), ("foo", "foo"),
                                       (object, "object")], ids=str)
def test_canonicalize_rejects_unsupported_dtypes_naming_the_users_line(spec, word):
    with pytest.raises(DTypeError) as info:
        dtypes.canonicalize(spec)
    msg = str(info.value)
    assert word in msg and THIS_FILE in msg
    if word != "foo":  # a dtype NumPy knows: the message lists the supported ones
        assert "float32" in msg


def test_unsupported_dtypes_while_tracing_name_the_users_line():
    for fn in (lambda a: enp.asarray(a).astype(np.complex64), lambda a: P.convert_element_type(a, np.complex128),
               lambda a: enp.zeros(3, dtype=np.complex64)):
        with pytest.raises(DTypeError) as info:
            ember.jit(fn)(arr(F32))
        assert "complex" in str(info.value) and THIS_FILE in str(info.value)


def test_short_names_and_kinds():
    assert [dtypes.short_name(d) for d in dtypes.SUPPORTED] == [
        "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64"]
    assert dtypes.is_float(F16) and not dtypes.is_float(I32)
    assert dtypes.is_int(U8) and dtypes.is_int(I64) and not dtypes.is_int(BOOL)
    assert dtypes.is_bool(BOOL) and not dtypes.is_bool(U8)
    assert dtypes.default_float_for(I32) == F32 and dtypes.default_float_for(F16) == F16
    assert dtypes.default_float_for(BOOL) == F32


def test_defaults_for_new_arrays():
    assert enp.zeros(3).dtype == F32 and enp.asarray(1.0).dtype == F32 and enp.asarray(1).dtype == I32
    assert enp.asarray([1, 2]).dtype == I32 and enp.asarray([True]).dtype == BOOL
    assert enp.arange(3).dtype == I32 and enp.asarray(np.arange(3, dtype=np.int64)).dtype == I64
