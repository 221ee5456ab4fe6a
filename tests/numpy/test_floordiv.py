"""Floor division, remainder, fmod and divmod against NumPy bit for bit (signs of zeros included) on a
grid of special operands, eagerly and under jit; their gradients against JAX's; divmod on traced
values. NumPy derives // and % from fmod (npy_divmod), so a divisor that is not exactly representable
(0.1) gives 1 // 0.1 == 9, not floor(1 / 0.1) == 10. Values follow NumPy where JAX differs (JAX gives
-3 % 0.75 == -0.0, NumPy +0.0)."""

from __future__ import annotations

import os
import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.numpy as enp

FLOATS = [np.float16, np.float32, np.float64]


def _grid_values(dtype) -> np.ndarray:
    """±0, ±inf, NaN, subnormals, huge and tiny values, exact and inexact divisors, both signs."""
    fi = np.finfo(dtype)
    base = [0.0, 1.0, 0.5, 0.1, 0.75, 0.3, 2.5, 3.0, 7.0, 1e-3, 1e4, float(fi.tiny), float(fi.smallest_subnormal),
            float(fi.max), float(fi.max) / 3, np.inf, np.nan]
    return np.array(base + [-v for v in base], dtype)


def _grid(dtype):
    v = _grid_values(dtype)
    a, b = np.meshgrid(v, v, indexing="ij")
    return a.ravel(), b.ravel()


def _numpy(fn, *args):
    with np.errstate(all="ignore"):
        return fn(*args)


def _ember(fn, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def assert_same_bits(got, want, what=""):
    """Equal dtype and values (NaN equals NaN), and equal signs wherever the value is not NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    np.testing.assert_array_equal(got, want, err_msg=what)
    num = ~np.isnan(want) if want.dtype.kind == "f" else np.ones(want.shape, bool)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]), err_msg=f"{what}: sign of zero")


OPS = {
    "floor_divide": (enp.floor_divide, np.floor_divide),
    "remainder": (enp.remainder, np.remainder),
    "mod": (enp.mod, np.mod),
    "fmod": (enp.fmod, np.fmod),
    "divmod": (enp.divmod, np.divmod),
    "//": (lambda a, b: a // b, lambda a, b: a // b),
    "%": (lambda a, b: a % b, lambda a, b: a % b),
}


def _check(fn, ref, args, what):
    want = _numpy(ref, *args)
    for mode, call in (("eager", fn), ("jit", ember.jit(fn))):
        got = _ember(call, *args)
        if isinstance(want, tuple):
            assert isinstance(got, tuple) and len(got) == 2
            for i, (g, w) in enumerate(zip(got, want)):
                assert_same_bits(g, w, f"{what} {mode} [{i}]")
        else:
            assert_same_bits(got, want, f"{what} {mode}")


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", sorted(OPS))
def test_grid_matches_numpy_bit_for_bit(op, dtype):
    fn, ref = OPS[op]
    a, b = _grid(dtype)
    _check(fn, ref, (a, b), f"{op} {dtype.__name__}")


_JITTED = {op: ember.jit(OPS[op][0]) for op in ("floor_divide", "remainder", "divmod")}


@settings(max_examples=40, deadline=None, derandomize=bool(os.environ.get("CI")))
@given(data=st.data(), dtype=st.sampled_from(FLOATS), op=st.sampled_from(sorted(_JITTED)))
def test_random_operands_match_numpy_bit_for_bit(data, dtype, op):
    width = np.dtype(dtype).itemsize * 8
    arrays = hnp.arrays(dtype, (6,), elements=st.floats(width=width, allow_subnormal=True))
    a, b = data.draw(arrays), data.draw(arrays)
    want = _numpy(OPS[op][1], a, b)
    for mode, got in (("eager", _ember(OPS[op][0], a, b)), ("jit", _ember(_JITTED[op], a, b))):
        for i, (g, w) in enumerate(zip(got, want) if op == "divmod" else [(got, want)]):
            assert_same_bits(g, w, f"{op} {mode} [{i}] of {a!r}, {b!r}")


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("divisor", [0.1, -0.1, 0.75, 3.0, np.inf, -np.inf, 0.0, -0.0, np.nan])
def test_python_scalar_divisor_matches_numpy(divisor, dtype):
    """A Python float divisor is weak: it takes the array's dtype on both sides (NumPy 2 does too)."""
    a = _grid_values(dtype)
    for op in ("//", "%", "fmod"):
        fn, ref = OPS[op]
        _check(lambda x, fn=fn: fn(x, divisor), lambda x, ref=ref: ref(x, divisor), (a,),
               f"{op} {divisor} {dtype.__name__}")
    _check(lambda x: divmod(divisor, x), lambda x: divmod(divisor, x), (a,), f"rdivmod {divisor}")


def test_inexact_divisor_reproducers():
    one = np.array([1.0])
    np.testing.assert_array_equal(ember.jit(lambda a: a // 0.1)(one), [9.0])
    for dt in (np.float32, np.float64):
        got = ember.jit(lambda a: a % 0.1)(np.array([1.0, 0.5], dt))
        np.testing.assert_array_equal(got, np.array([1.0, 0.5], dt) % dt(0.1))
        assert np.all(got > 0.09)
    np.testing.assert_array_equal(enp.mod(one, 0.1), np.mod(one, 0.1))
    assert enp.mod(one, 0.1)[0] > 0.09


def test_infinite_divisor_reproducers():
    x, y = np.array([1.0, 3.0, -3.0]), np.array([np.inf, -np.inf, np.inf])
    for call in (enp.mod, ember.jit(enp.mod)):
        np.testing.assert_array_equal(call(x, y), [1.0, -np.inf, np.inf])
    for call in (enp.floor_divide, ember.jit(enp.floor_divide)):
        np.testing.assert_array_equal(call(np.array([-1.0]), np.inf), [-1.0])


INTS = [np.int8, np.int32, np.uint8]


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", sorted(OPS))
def test_integer_grid_matches_numpy(op, dtype):
    """Integers too, a zero divisor included (NumPy gives 0 for both // and %)."""
    info = np.iinfo(dtype)
    v = np.array(sorted({0, 1, 2, 3, 7, 10, info.max, info.max - 1} | ({-1, -2, -3, -7, -10, info.min + 1}
                                                                        if info.min < 0 else set())), dtype)
    a, b = (m.ravel() for m in np.meshgrid(v, v, indexing="ij"))
    fn, ref = OPS[op]
    _check(fn, ref, (a, b), f"{op} {dtype.__name__}")


def test_divmod_on_traced_values():
    x = np.array([2.0, -2.0])
    q, r = ember.jit(lambda a: divmod(a, 0.75))(x)
    np.testing.assert_array_equal(q, [2.0, -3.0])
    np.testing.assert_array_equal(r, [0.5, 0.25])
    q, r = ember.jit(lambda a: divmod(5.0, a))(x)
    np.testing.assert_array_equal(q, [2.0, -3.0])
    np.testing.assert_array_equal(r, [1.0, -1.0])
    q, r = ember.jit(lambda a, b: divmod(a, b))(np.array([7, -7], np.int32), np.array([2, 2], np.int32))
    np.testing.assert_array_equal(q, [3, -4])
    np.testing.assert_array_equal(r, [1, 1])
    assert q.dtype == np.int32


def test_divmod_under_vmap():
    x, y = np.array([[1.0, -2.5], [7.3, 0.1]]), np.array([0.1, -0.75])
    q, r = ember.vmap(lambda a: enp.divmod(a, y))(x)
    wq, wr = np.divmod(x, y)
    assert_same_bits(q, wq)
    assert_same_bits(r, wr)


# Gradients of JAX 0.10.2 (jax.vmap(jax.grad(f, argnums=(0, 1)))) at these points: d/dx = 1 for the
# remainders, d/dy = -trunc(x / y) (+1 where the remainder took the divisor's sign), 0 for //.
GX = np.array([1.0, 0.5, -3, 3, 1, 2.5, 0.0, -0.0, 1., 3., -3., -1., 7.3, -7.3, 1e300])
GY = np.array([0.1, 0.1, 0.75, -0.75, 0.5, 0.0, 1.0, 1.0, np.inf, -np.inf, np.inf, 0.3, -2.1, 2.1, 1e-10])
JAX_DY = {
    "remainder": [-10.0, -5.0, 4.0, 4.0, -2.0, -np.inf, 0.0, 0.0, 0.0, 1.0, 1.0, 4.0, 4.0, 4.0, -np.inf],
    "fmod": [-10.0, -5.0, 4.0, 4.0, -2.0, -np.inf, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 3.0, 3.0, -np.inf],
    "floor_divide": [0.0] * 15,
}
JAX_DX = {"remainder": 1.0, "fmod": 1.0, "floor_divide": 0.0}


@pytest.mark.parametrize("name", sorted(JAX_DY))
def test_gradients_match_jax(name):
    fn = getattr(enp, name)
    gx, gy = _ember(ember.vmap(ember.grad(fn, argnums=(0, 1))), GX, GY)
    np.testing.assert_array_equal(gx, np.full(GX.shape, JAX_DX[name]))
    np.testing.assert_array_equal(gy, JAX_DY[name])


def test_divmod_gradient_is_the_remainders():
    gx, gy = _ember(ember.vmap(ember.grad(lambda a, b: sum(enp.divmod(a, b)), argnums=(0, 1))), GX, GY)
    np.testing.assert_array_equal(gx, np.ones(GX.shape))
    np.testing.assert_array_equal(gy, JAX_DY["remainder"])


def test_float16_gradients_flow_through_the_float32_computation():
    x, y = np.array([1.0, -2.5], np.float16), np.array([0.3, 0.75], np.float16)
    gx, gy = ember.grad(lambda a, b: enp.sum(enp.remainder(a, b)), argnums=(0, 1))(x, y)
    assert gx.dtype == gy.dtype == np.float16
    np.testing.assert_array_equal(gx, [1.0, 1.0])
    np.testing.assert_array_equal(gy, [-3.0, 4.0])
