"""ember against JAX 0.10 (x64 enabled): type promotion, gradients at ties and kinks, and the dtypes
reductions accumulate in. Skipped where JAX is not installed (CI installs it).

Ember keeps JAX's 32-bit defaults for Python scalars and new arrays (a Python int is a weak int32, a
Python float a weak float32) but supports int64/float64 like x64 mode, so a result that JAX gives a
*default* dtype (a weak int64/float64 from a Python scalar) is ember's default instead; everything
else must match JAX exactly.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.tracer import dtypes

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float16", "float32", "float64"]
DTS = [np.dtype(n) for n in NAMES]


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _jax_result(operands) -> tuple[np.dtype, bool]:
    """JAX's (dtype, weak) for (dtype, weak) operands, as its operations promote them (concatenate
    here; jnp.result_type itself widens weak results to the default type). Python bools are strong."""
    avals = [jax.ShapeDtypeStruct((1,), d, weak_type=w and d != np.bool_) for d, w in operands]
    out = jax.eval_shape(lambda *xs: jnp.concatenate(xs), *avals)
    return np.dtype(out.dtype), bool(out.weak_type)


def _ember_expected(operands) -> tuple[np.dtype, bool]:
    """JAX's answer, with ember's 32-bit defaults where JAX lands on a weak default type (the join
    of a strong type with a weak one at i* or f*), except that a 64-bit operand (an int64, or a weak
    int64/float64 such as `x_i64 * 0.5`) gives the 64-bit type."""
    dt, weak = _jax_result(operands)
    if weak and not all(w and d != np.bool_ for d, w in operands):
        wide = any(np.dtype(d).itemsize == 8 for d, _ in operands)
        if dt == np.int64 and not wide:
            dt = dtypes.int_
        elif dt == np.float64 and not wide:
            dt = dtypes.float_
    return dt, weak


# --- A. type promotion --------------------------------------------------------------------------

@pytest.mark.parametrize("a", DTS, ids=NAMES)
def test_promote_types_matches_jax_for_every_pair(a):
    for b in DTS:
        assert dtypes.promote_types(a, b) == np.dtype(jnp.promote_types(a, b)), (a, b)


def test_result_type_matches_jax_for_every_typed_and_weak_pair_and_triple():
    kinds = [(d, w) for d in DTS for w in (False, True)]
    for ops in itertools.chain(itertools.product(kinds, repeat=2),
                               itertools.combinations_with_replacement(kinds, 3)):
        assert dtypes.result_type(*ops) == _ember_expected(ops), ops


def _ops(x, y):
    """Every kind of operation that promotes its operands, applied to two 1-d arrays of length 2."""
    return (enp.add(x, y), enp.multiply(x, y), enp.maximum(x, y), enp.where(enp.equal(x, x), x, y),
            enp.concatenate([x, y]), enp.stack([x, y]), enp.clip(x, y, y), enp.dot(x, y), enp.matmul(x, y),
            enp.einsum("i,i->", x, y), enp.outer(x, y))


def _jax_ops(x, y):
    return (x + y, x * y, jnp.maximum(x, y), jnp.where(x == x, x, y), jnp.concatenate([x, y]),
            jnp.stack([x, y]), jnp.clip(x, y, y), jnp.dot(x, y), jnp.matmul(x, y), jnp.einsum("i,i->", x, y),
            jnp.outer(x, y))


@pytest.mark.parametrize("a", DTS, ids=NAMES)
def test_every_promoting_operation_follows_jax_eagerly_and_under_jit(a):
    for b in DTS:
        x, y = np.ones(2, a), np.ones(2, b)
        want = [o.dtype for o in jax.eval_shape(_jax_ops, jax.ShapeDtypeStruct((2,), a),
                                                jax.ShapeDtypeStruct((2,), b))]
        assert [o.dtype for o in _ops(x, y)] == want, (a, b)
        assert [o.dtype for o in ember.jit(_ops)(x, y)] == want, (a, b)


SCALARS = [True, 2, 0.5]


@pytest.mark.parametrize("a", DTS, ids=NAMES)
def test_python_scalars_stay_weak_in_every_promoting_operation(a):
    for s in SCALARS:
        def ops(x, s=s, np_=enp):
            return (np_.add(x, s), np_.multiply(s, x), np_.maximum(x, s), np_.where(np_.equal(x, x), x, s),
                    np_.clip(x, s, s))

        x = np.ones(2, a)
        want, _ = _ember_expected([(a, False), (dtypes.scalar_dtype(s)[0], True)])
        if a == np.bool_ and isinstance(s, bool):
            want = np.dtype(bool)
        for got in (ops(x), ember.jit(ops)(x)):
            assert all(o.dtype == want for o in got), (a, s, [o.dtype for o in got])


def test_the_issue_examples():
    f32, i32, f16, i64 = (np.ones(3, t) for t in (np.float32, np.int32, np.float16, np.int64))
    assert enp.multiply(f32, i32).dtype == np.float32
    assert enp.add(i32, f16).dtype == np.float16
    assert ember.jit(enp.add)(i64, f32).dtype == np.float32
    assert enp.concatenate([i32, f32]).dtype == np.float32
    assert ember.jit(lambda a, b: enp.concatenate([a, b]))(i32, f32).dtype == np.float32


# --- B. gradients at ties and kinks ---------------------------------------------------------------

class _Lib:
    def __init__(self, np_, nn):
        self.np, self.nn = np_, nn


EMBER, JAX = _Lib(enp, ember.nn), _Lib(jnp, jax.nn)
TIES = np.array([-1.0, 0.0, -0.0, 1.0, 2.0, 0.5])
MAT = np.array([[1.0, 3.0, 3.0], [0.0, 0.0, -2.0], [2.0, 2.0, 2.0], [-1.0, 5.0, -1.0]])

# (name, f(lib, x) -> array, x): every tie and kink JAX gives a rule for, on values that hit them.
KINKS = [
    ("maximum(x, 0)", lambda m, x: m.np.maximum(x, 0.0), TIES),
    ("maximum(0, x)", lambda m, x: m.np.maximum(0.0, x), TIES),
    ("minimum(x, 0)", lambda m, x: m.np.minimum(x, 0.0), TIES),
    ("maximum(x, 1 - x)", lambda m, x: m.np.maximum(x, 1.0 - x), TIES),
    ("minimum(x, x)", lambda m, x: m.np.minimum(x, x), TIES),
    ("maximum(x, row) broadcast", lambda m, x: m.np.maximum(x[:, None], np.array([0, 1, 5], x.dtype)), TIES),
    ("maximum(x, x[::-1])", lambda m, x: m.np.maximum(x, x[::-1]), np.array([1.0, 2.0, 2.0, 1.0])),
    ("clip(x, 0, 1)", lambda m, x: m.np.clip(x, 0.0, 1.0), TIES),
    ("clip(x, 1, 0)", lambda m, x: m.np.clip(x, 1.0, 0.0), TIES),
    ("abs", lambda m, x: m.np.abs(x), TIES),
    ("sign", lambda m, x: m.np.sign(x) * x, TIES),
    ("floor", lambda m, x: m.np.floor(x) + x, TIES),
    ("ceil", lambda m, x: m.np.ceil(x) * x, TIES),
    ("round", lambda m, x: m.np.round(x) * x, TIES),
    ("relu", lambda m, x: m.nn.relu(x), TIES),
    ("relu(x) + maximum(x, 0)", lambda m, x: m.nn.relu(x) + m.np.maximum(x, 0.0), TIES),
    ("max", lambda m, x: m.np.max(x), MAT),
    ("min axis 1", lambda m, x: m.np.min(x, axis=1), MAT),
    ("amax axis 0 keepdims", lambda m, x: m.np.amax(x, axis=0, keepdims=True), MAT),
    ("amin", lambda m, x: m.np.amin(x, axis=(0, 1)), MAT),
    ("max initial", lambda m, x: m.np.max(x, axis=1, initial=3.0), MAT),
    ("max of relu", lambda m, x: m.np.max(m.nn.relu(x), axis=0), MAT),
]


def _loss(f, m):
    """A scalar that weighs each output differently, so misrouted cotangents show."""
    def loss(x):
        y = f(m, x)
        return m.np.sum(y * np.arange(1, y.size + 1, dtype=y.dtype).reshape(y.shape))

    return loss


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name, f, x", KINKS, ids=[k[0] for k in KINKS])
def test_values_and_gradients_at_ties_and_kinks_match_jax(name, f, x, dtype):
    x = x.astype(dtype)
    want = np.asarray(f(JAX, jnp.asarray(x)))
    got = ember.jit(lambda v: f(EMBER, v))(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    g_want = np.asarray(jax.grad(_loss(f, JAX))(jnp.asarray(x)))
    g_got = ember.grad(_loss(f, EMBER))(x)
    assert g_got.dtype == g_want.dtype
    np.testing.assert_array_equal(g_got, g_want)
    batch = np.stack([x, -x, x[::-1]])
    np.testing.assert_array_equal(ember.vmap(ember.grad(_loss(f, EMBER)))(batch),
                                  np.asarray(jax.vmap(jax.grad(_loss(f, JAX)))(jnp.asarray(batch))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_ties_split_between_two_differentiated_operands_as_in_jax(dtype):
    x, y = np.array([0.0, 1.0, 2.0, np.nan, 1.0], dtype), np.array([0.0, 2.0, 2.0, 1.0, np.nan], dtype)
    for name in ("maximum", "minimum"):
        want = jax.grad(lambda a, b, n=name: jnp.sum(getattr(jnp, n)(a, b)), (0, 1))(x, y)
        got = ember.grad(lambda a, b, n=name: enp.sum(getattr(enp, n)(a, b)), (0, 1))(x, y)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, np.asarray(w))
    want = jax.grad(lambda a, lo, hi: jnp.sum(jnp.clip(a, lo, hi)), (0, 1, 2))(x, y, y + 1)
    got = ember.grad(lambda a, lo, hi: enp.sum(enp.clip(a, lo, hi)), (0, 1, 2))(x, y, y + 1)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.asarray(w))


def test_the_issue_gradient_examples():
    assert ember.grad(lambda x: enp.maximum(x, 0.0))(0.0) == 0.5
    assert ember.grad(lambda x: enp.minimum(x, 0.0))(0.0) == 0.5
    assert ember.grad(lambda x: enp.clip(x, 0.0, 1.0))(1.0) == 0.5
    assert ember.grad(enp.abs)(0.0) == 1.0
    assert ember.grad(ember.nn.relu)(0.0) == 0.0


# --- C. sums of small ints, D. float16 means --------------------------------------------------------

def _ember_int(jax_dtype: np.dtype, x_dtype: np.dtype) -> np.dtype:
    """JAX (x64) accumulates in int64/uint64; ember in its default int32/uint32 unless x is 64-bit."""
    if jax_dtype.kind in "iu" and jax_dtype.itemsize == 8 and x_dtype.itemsize < 8:
        return np.dtype(np.int32 if jax_dtype.kind == "i" else np.uint32)
    return jax_dtype


INTS = [d for d in DTS if d.kind in "biu"]


@pytest.mark.parametrize("dt", INTS, ids=[d.name for d in INTS])
def test_integer_sums_products_and_means_accumulate_as_in_jax(dt):
    x = np.array([100, 100, 100, 27], dt) if dt != np.bool_ else np.array([True] * 5)
    m = np.array([[3, 5], [7, 11]], dt) if dt != np.bool_ else np.array([[True, False], [True, True]])
    for name, arg in (("sum", x), ("prod", m), ("mean", x), ("var", m)):
        want = np.asarray(getattr(jnp, name)(arg, axis=0 if name == "var" else None))
        ours = lambda v, name=name: getattr(enp, name)(v, axis=0 if name == "var" else None)  # noqa: E731
        for got in (ours(arg), ember.jit(ours)(arg)):
            assert got.dtype == _ember_int(want.dtype, dt), (name, got.dtype, want.dtype)
            np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-6)


def test_the_issue_sum_examples():
    for sum_ in (enp.sum, ember.jit(enp.sum)):
        assert sum_(np.array([100] * 3, np.int8)) == 300
        assert sum_(np.array([200, 200], np.uint8)) == 400


@pytest.mark.parametrize("name", ["mean", "var", "std", "sum"])
def test_float16_reductions_over_more_than_65504_elements_match_jax(name):
    x = (np.arange(70000) % 7 / 8).astype(np.float16)  # the sum, 26249.25, fits float16; its count does not
    fn = getattr(enp, name)
    want = np.asarray(getattr(jnp, name)(x))
    for got in (fn(x), ember.jit(fn)(x)):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, want)
    ones = np.ones((2, 70000), np.float16)
    want = np.asarray(getattr(jnp, name)(ones, axis=1))
    np.testing.assert_array_equal(ember.jit(lambda v: fn(v, axis=1))(ones), want)
