"""The eager fast path's native tier (ember/numpy/_native.py, ember/backends/llvm/eager.py): it comes
in after enough calls, gives exactly what the Python tier gives for every kind of call (the ones it
serves and the ones it hands back), leaks no reference, and steps aside when switched off or when its
compiler fails."""

from __future__ import annotations

import gc
import sys
import threading

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import config
from ember.numpy import _eager, _indexing, _native


@pytest.fixture
def python_tier():
    _native.uninstall()
    yield
    _native.uninstall()


@pytest.fixture
def native_tier():
    _native.uninstall()
    assert _native.install(), _native.status
    yield
    _native.uninstall()


def _outcome(fn, *args, **kwargs):
    """What `fn(*args, **kwargs)` gives: its value, dtype and type, or its exception's class."""
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        return ("raised", type(e))
    return (type(out), np.asarray(out).dtype, np.asarray(out).tolist())


ARRAYS = {
    "f4": np.arange(6, dtype=np.float32), "f8": np.arange(6, dtype=np.float64),
    "f2": np.arange(6, dtype=np.float16),
    "i4": np.arange(6, dtype=np.int32), "bool": np.arange(6) % 2 == 0,
    "f4_matrix": np.arange(6, dtype=np.float32).reshape(2, 3), "f4_scalar": np.array(1.5, np.float32),
    "f4_strided": np.arange(12, dtype=np.float32)[::2], "f8_big_endian": np.arange(6, dtype=">f8"),
    "f4_empty": np.zeros(0, np.float32),
}
KEYS = [0, 3, -1, -6, 5, 6, -7, 2**70, True, np.int64(2), slice(1, 3), (0,), None, Ellipsis]
VALUES = [2.5, 1e300, float("nan"), float("-inf"), 7, True, np.float32(0.25), -0.0]
UPDATES = [("set", {}), ("set", {"mode": "clip"}), ("set", {"mode": "drop"}), ("add", {}),
           ("set", {"unique_indices": True})]


def _update_cases():
    for name, a in ARRAYS.items():
        for key in KEYS:
            for value in VALUES:
                for how, kw in UPDATES:
                    yield name, a, key, value, how, kw


def _in_both_tiers(run):
    """`run()` in the Python tier, then in the native one: (python's result, native's result)."""
    _native.uninstall()
    _native._countdown = 1 << 62  # (stay in Python for the whole run)
    python = run()
    assert _native.install(), _native.status
    try:
        native = run()
    finally:
        _native.uninstall()
    return python, native


def _all_updates():
    x = {name: a.view(ember.Array) for name, a in ARRAYS.items()}  # (jnp.asarray refuses ">f8")
    return [_outcome(getattr(x[name].at[key], how), value, **kw)
            for name, _, key, value, how, kw in _update_cases()]


def test_the_native_tier_comes_after_enough_calls_and_leaves_when_switched_off(python_tier):
    assert not _native.installed()
    x = jnp.arange(4.0)
    for _ in range(_native.NATIVE_AFTER):
        x.at[1].set(2.0)
    assert _native.installed() and _native.status == "installed"
    assert type(ember.Array.at.fget).__name__ == "builtin_function_or_method"
    assert type(_indexing._IndexUpdateRef.__dict__["set"]).__name__ == "method_descriptor"
    np.testing.assert_array_equal(x.at[1].set(2.0), [0, 2, 2, 3])
    try:
        config.update("ember_eager_native", False)
        assert not _native.installed() and not _native.install() and "off" in _native.status
        for _ in range(_native.NATIVE_AFTER + 1):
            x.at[1].set(2.0)
        assert not _native.installed()
    finally:
        config.update("ember_eager_native", True)
    assert not _native.installed() and _native._countdown == _native.NATIVE_AFTER


def test_every_update_is_the_same_in_both_tiers():
    """Every array kind, key, value, method and keyword: the same value, dtype, type or exception."""
    python, native = _in_both_tiers(_all_updates)
    cases = list(_update_cases())
    assert len(python) == len(native) == len(cases)
    differ = [(c[0], c[2], c[3], c[4], c[5], p, n) for c, p, n in zip(cases, python, native)
              if repr(p) != repr(n)]
    assert not differ, differ[:5]
    served = [p for c, p in zip(cases, python) if p[0] is ember.Array]
    assert len(served) > 100  # (the table reaches the native branch and the hand-back alike)


def test_the_native_set_writes_what_numpy_writes(native_tier):
    for dtype in (np.float32, np.float64):
        a = np.linspace(-3, 3, 7).astype(dtype)
        x = jnp.asarray(a)
        for key in range(-7, 7):
            for value in (0.1, 1e-46, 3.4028235677973366e38, 1e39, -2.5, float("nan")):
                got = x.at[key].set(value)
                want = a.copy()
                with np.errstate(over="ignore"):  # (1e39 into float32: inf, as in JAX)
                    want[key] = value
                assert type(got) is ember.Array and got.dtype == dtype and not np.shares_memory(got, x)
                np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(x, a)  # the operand is never written
        np.testing.assert_array_equal(x.at[1].set(values=4.0), np.where(np.arange(7) == 1, 4, a))  # (by Python)


def test_under_a_trace_the_native_tier_hands_the_call_back(native_tier):
    const = jnp.arange(4.0)
    f = ember.jit(lambda y, s: (const.at[1].set(2.0) + y, jnp.sum(const) * s, jnp.sum(y)))
    a, b, c = f(jnp.ones(4), 2.0)
    np.testing.assert_array_equal(a, [1, 3, 3, 4])
    assert float(b) == 12.0 and float(c) == 4.0
    g = ember.grad(lambda y: jnp.sum(y.at[0].set(5.0) * y))
    np.testing.assert_array_equal(g(jnp.arange(3.0)), [5, 2, 4])
    np.testing.assert_array_equal(ember.vmap(lambda r: r.at[-1].set(9.0))(jnp.zeros((2, 3))), [[0, 0, 9]] * 2)


def test_a_trace_on_another_thread_does_not_stop_this_one(native_tier):
    started, release, seen = threading.Event(), threading.Event(), []

    def traced(y):
        started.set()
        release.wait(5)
        return y + 1

    worker = threading.Thread(target=lambda: seen.append(ember.jit(traced)(jnp.ones(2))))
    worker.start()
    try:
        assert started.wait(5)
        x = jnp.arange(3.0)
        out = x.at[0].set(7.0)
        assert type(out) is ember.Array and out.tolist() == [7, 1, 2]
        assert type(jnp.sum(x)) is ember.Array and float(jnp.sum(x)) == 3.0
    finally:
        release.set()
        worker.join()
    assert seen[0].tolist() == [2, 2]


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_whole_reductions_are_the_same_in_both_tiers(name):
    fn = getattr(jnp, name)
    operands = [a.view(ember.Array) for a in ARRAYS.values()] + list(ARRAYS.values()) + [
        [1.0, 2.0], 3.0, np.float32(2.0), jnp.asarray(np.arange(24.0).reshape(2, 3, 4))]

    def outcomes():
        calls = [_outcome(fn, a) for a in operands for _ in range(3)]  # (the third call replays)
        methods = [_outcome(getattr(a, name)) for a in operands if type(a) is ember.Array for _ in range(3)]
        return calls + methods

    python, native = _in_both_tiers(outcomes)
    assert repr(python) == repr(native)
    assert python[0][0] is ember.Array  # (served by the lane)
    empty = 3 * list(ARRAYS).index("f4_empty")
    assert (python[empty][0] == "raised") == (name in ("max", "min"))  # no identity: JAX's error
    assert _native.install() and _eager._whole_lane(fn) is _eager._whole_lane() is _eager.MISS  # (misused: MISS)
    _native.uninstall()


def test_the_native_tier_leaks_no_reference(native_tier):
    x, key, value = jnp.arange(300.0), int("257"), 1.5  # (257: not one of CPython's shared small ints)
    lanes = jnp.sum.fast.lanes
    jnp.sum(x), jnp.sum(x), jnp.sum(x)
    gc.collect()
    gc.disable()  # (a collection in the loop would free other objects' references)
    try:
        def counts():
            return [sys.getrefcount(o) for o in (x, key, value, None, _eager.MISS, lanes, x.dtype)]

        def calls():
            x.at[key].set(value)
            x.at[key].set(7)  # (handed back to Python)
            x.at[key].set(value, mode="clip")
            jnp.sum(x)
            jnp.sum(x.view(np.ndarray))
            jnp.sum(3.0)

        for _ in range(3):  # (first calls record their signatures)
            calls()
        before = counts()
        for _ in range(300):
            calls()
        assert counts() == before
    finally:
        gc.enable()


def test_a_failing_compiler_leaves_the_python_tier(python_tier):
    compiler = _native._compiler

    def broken(targets):
        raise RuntimeError("no LLVM here")

    _native.register(broken)
    try:
        assert not _native.install()
        assert "RuntimeError: no LLVM here" in _native.status
        np.testing.assert_array_equal(jnp.arange(3.0).at[0].set(5.0), [5, 1, 2])
        assert float(jnp.sum(jnp.arange(3.0))) == 3.0
    finally:
        _native.register(compiler)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_native_sum_adds_in_numpys_order(native_tier, dtype):
    """The native tier sums small contiguous float arrays itself: bit for bit NumPy's pairwise sum, for
    every length around its block boundaries, signed zeros, infinities and NaNs, and any shape."""
    rng = np.random.default_rng(7)
    sizes = [*range(0, 140), 255, 256, 257, 1000, 4095, 4096, 4103, 65535, 65536, 65537, 100_000]
    for n in sizes:
        a = (rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)).astype(dtype)
        zeros = np.where(rng.random(n) < 0.5, -0.0, 0.0).astype(dtype)
        special = a.copy()
        special[rng.integers(0, max(n, 1), min(n, 3))] = rng.choice([np.inf, -np.inf, np.nan], min(n, 3))
        for v in (a, zeros, special, -np.abs(zeros)):
            got = jnp.sum(v.view(ember.Array))
            assert type(got) is ember.Array and got.dtype == dtype and got.shape == ()
            with np.errstate(invalid="ignore"):  # (inf - inf: NumPy warns, JAX and this tier do not)
                want = np.add.reduce(v)
            assert got.tobytes() == want.tobytes() or (np.isnan(got) and np.isnan(want)), n
    m = rng.standard_normal((6, 7, 5)).astype(dtype)
    for v in (m, m[:, ::2], m.T, m[1:, 2:]):  # contiguous, then strided: NumPy's reduce
        assert jnp.sum(v.view(ember.Array)).tobytes() == np.add.reduce(v, axis=None).tobytes()
