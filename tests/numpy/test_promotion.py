"""dtype promotion of ember.numpy (JAX rules: weak Python scalars, float32/int32 defaults, JAX's
lattice between strong dtypes; tests/test_jax_conventions.py checks every combination against JAX).

Deliberate differences from NumPy, checked here and relied on by the harness (`expected_dtype` in
cases.py):
- new arrays and Python scalars default to float32 / int32 / bool, not float64 / int64;
- results NumPy computes in a float type from integer or bool operands only (true division, sqrt,
  exp, mean, var, ...) are float32, where NumPy gives float64 (or float16 for 8-bit ints); from
  64-bit integers they are float64 (jnp's inexact dtypes with x64 enabled);
- integer and bool sums and products accumulate in int32 (unsigned ints in uint32; 64-bit ints keep
  their dtype) where NumPy widens to int64/uint64; argmax/argmin return int32, not int64;
- a Python float combined with an integer array gives float32 (float64 for 64-bit ints, as JAX with
  x64), and a list of Python floats is a float32 array;
- integers never widen a float array: i32 x f32 is f32, i16 x f16 is f16 (NumPy: f64, f32);
- `astype(float)` / `dtype=float` mean float32 (the default float), `int` means int32.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.tracer import dtypes
from tests.numpy.cases import DTYPES, A, expected_dtype

STRONG = ["bool", "i8", "i16", "i32", "i64", "u8", "u32", "f16", "f32", "f64"]


@pytest.mark.parametrize("a", STRONG)
@pytest.mark.parametrize("b", STRONG)
def test_strong_dtypes_promote_on_jaxs_lattice(a, b):
    x = np.ones(2, DTYPES[a])
    y = np.ones(2, DTYPES[b])
    want = expected_dtype(np.result_type(x, y), [x.dtype, y.dtype])
    assert jnp.add(x, y).dtype == want
    assert ember.jit(jnp.multiply)(x, y).dtype == want
    assert ember.jit(lambda u, v: jnp.where(u > 0, u, v))(x, y).dtype == want


# (array dtype, Python scalar) -> result dtype. Python scalars are weak: they never widen an array
# of their own kind, and raise the kind to the default type of the higher kind (JAX's lattice).
WEAK = [
    ("bool", True, "bool"), ("bool", 2, "i32"), ("bool", 2.5, "f32"),
    ("i8", 2, "i8"), ("i8", 2.5, "f32"), ("u8", 3, "u8"), ("i16", 2, "i16"),
    ("i32", 2, "i32"), ("i32", 2.5, "f32"), ("i64", 2, "i64"), ("i64", 2.5, "f64"),
    ("u32", 2, "u32"), ("f16", 2, "f16"), ("f16", 2.5, "f16"), ("f32", 2, "f32"),
    ("f32", 2.5, "f32"), ("f64", 2.5, "f64"), ("f64", True, "f64"), ("i32", True, "i32"),
]


@pytest.mark.parametrize("arr, scalar, want", WEAK, ids=[f"{a}-{s!r}" for a, s, _ in WEAK])
def test_python_scalars_are_weak(arr, scalar, want):
    x = np.ones(3, DTYPES[arr])
    want = np.dtype(DTYPES[want])
    op = jnp.logical_or if arr == "bool" and isinstance(scalar, bool) else jnp.add
    for got in (op(x, scalar), op(scalar, x), ember.jit(lambda v: op(v, scalar))(x),
                ember.jit(lambda v: op(scalar, v))(x)):
        assert got.dtype == want
    if arr != "bool":
        assert ember.jit(lambda v: v * scalar)(x).dtype == want
        assert ember.jit(lambda v: scalar * v)(x).dtype == want


def test_weak_scalar_arguments_of_jit_stay_weak():
    x = np.ones(3, np.float16)
    assert ember.jit(lambda a, s: a * s)(x, 2.0).dtype == np.float16
    assert ember.jit(lambda a, s: a + s)(np.ones(2, np.int8), 3).dtype == np.int8
    # A NumPy scalar is strong.
    assert ember.jit(lambda a, s: a * s)(x, np.float32(2.0)).dtype == np.float32


def test_new_arrays_default_to_32_bits():
    assert jnp.asarray(1).dtype == np.int32
    assert jnp.asarray(1.0).dtype == np.float32
    assert jnp.asarray(True).dtype == np.bool_
    assert jnp.asarray([1, 2]).dtype == np.int32
    assert jnp.asarray([1, 2.5]).dtype == np.float32
    assert jnp.asarray([True, 2]).dtype == np.int32
    assert jnp.zeros(3).dtype == np.float32
    assert jnp.arange(3).dtype == np.int32
    assert jnp.arange(3.0).dtype == np.float32
    # NumPy arrays and scalars keep their dtype, float64 included (np.float64 is a Python float, but strong).
    assert jnp.asarray([np.float64(1.0), 2.5]).dtype == np.float64
    assert jnp.asarray([np.float32(1.0), 2]).dtype == np.float32
    assert jnp.asarray(np.ones(2)).dtype == np.float64
    assert jnp.asarray(np.float64(1.0)).dtype == np.float64


@pytest.mark.parametrize("fn", [jnp.sqrt, jnp.exp, jnp.divide, jnp.mean, jnp.var, jnp.std, jnp.linalg.norm],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", ["bool", "u8", "i8", "i32", "i64"])
def test_float_results_of_integer_operands_are_float32(fn, dt):
    """... and float64 for 64-bit integers, as jnp with x64 enabled."""
    x = A((3,), dt, "posint").make(np.random.default_rng(0))
    call = (lambda v: fn(v, v)) if fn is jnp.divide else fn
    want = np.float64 if dt == "i64" else np.float32
    with np.errstate(all="ignore"):
        assert call(x).dtype == want
        assert ember.jit(call)(x).dtype == want


@pytest.mark.parametrize("dt, want", [("bool", "i32"), ("i8", "i32"), ("i16", "i32"), ("u8", "u32"),
                                      ("i32", "i32"), ("u32", "u32"), ("i64", "i64"), ("f16", "f16")])
def test_sums_accumulate_in_the_default_int(dt, want):
    """Sums/products of bools and small ints widen to int32 (unsigned: uint32), as JAX's do, but
    not to 64 bits (NumPy: int64/uint64)."""
    x = A((4,), dt, "posint").make(np.random.default_rng(0))
    for fn in (jnp.sum, jnp.prod):
        assert fn(x).dtype == np.dtype(DTYPES[want])
        assert ember.jit(fn)(x).dtype == np.dtype(DTYPES[want])
    assert ember.jit(lambda v: jnp.sum(v, dtype=np.int64))(x).dtype == np.int64


def test_builtin_types_as_dtypes_mean_32_bits():
    x = np.arange(3, dtype=np.int64)
    assert ember.jit(lambda v: v.astype(float))(x).dtype == np.float32
    assert ember.jit(lambda v: v.astype(int))(x.astype(np.float64)).dtype == np.int32
    assert jnp.zeros(2, dtype=float).dtype == np.float32
    assert jnp.asarray([1, 2], dtype=np.float64).dtype == np.float64


def test_unsupported_dtypes_raise_dtype_error():
    with pytest.raises(ember.DTypeError, match="complex"):
        jnp.zeros(2, dtype=np.complex64)
    with pytest.raises(ember.DTypeError):
        jnp.add(np.ones(2), 1j)


U64 = {"u64": np.uint64}


@pytest.mark.parametrize("np_dt, ins, want", [
    ("f64", ["i32"], "f32"), ("f16", ["u8"], "f32"), ("f64", ["i64"], "f64"), ("f64", ["i64", "bool"], "f64"),
    ("f64", ["i32", "f32"], "f32"), ("f64", ["i16", "f16"], "f16"),
    ("f32", ["i16", "f16"], "f16"), ("f64", ["f32"], "f64"), ("f64", ["i32", "f64"], "f64"), ("f32", ["f32"], "f32"),
    ("i64", ["i32"], "i32"), ("i64", ["bool"], "i32"), ("i64", ["i64"], "i64"), ("i64", ["i32", "u32"], "i64"),
    ("i64", ["f64"], "i32"), ("u64", ["u8"], "u32"), ("u64", ["u32"], "u32"), ("u64", ["i64", "u8"], "u64"),
    ("bool", ["f32"], "bool"),
])
def test_expected_dtype_rule(np_dt, ins, want):
    names = {**DTYPES, **U64}
    assert expected_dtype(names[np_dt], [names[d] for d in ins]) == np.dtype(names[want])


@pytest.mark.parametrize("b", STRONG)
def test_weak_intermediates_promote_like_python_scalars_under_jit(b):
    """`x_i32 * 0.5` is a weak float32, so it joins a typed array as a Python float would (JAX)."""
    y = np.ones(3, DTYPES[b])
    want = dtypes.result_type((np.dtype(np.float32), True), (y.dtype, False))[0]
    for f in (lambda x, v: jnp.add(x * 0.5, v), lambda x, v: jnp.where(v == v, x * 0.5, v),
              lambda x, v: jnp.concatenate([x * 0.5, v]), lambda x, v: jnp.dot(x * 0.5, v)):
        assert ember.jit(f)(np.arange(3, dtype=np.int32), y).dtype == want


def test_promotion_converts_only_operands_of_another_dtype():
    """A weak operand of the result's dtype is not made strong by a node: the result is weak only if
    every operand is, so its flag cannot matter."""
    x, v = np.arange(3, dtype=np.int32), np.ones(3, np.float32)
    g = ember.make_graph(lambda x, v: jnp.concatenate([x * 0.5, v + x * 0.5]))(x, v)
    assert [n.prim.name for n in g.nodes] == ["convert_element_type", "mul", "convert_element_type", "mul",
                                              "add", "concatenate"]
    assert all(n.params["weak_type"] for n in g.nodes if n.prim.name == "convert_element_type")
