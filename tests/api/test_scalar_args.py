"""Python and NumPy scalar arguments on jit's hit path: keyed by their type (a Python float is weakly
typed, a NumPy scalar is not, as in JAX), converted to the 0-d array the executable takes, one trace per
type whatever the value, the same results and errors as the general path; and the same for a compiled
function's call."""

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.errors import ArgumentError

BACKENDS = ("llvm", "numpy")


def _counting(fn):
    """`fn` and the list of avals it was traced with (one item per trace)."""
    traces = []

    def f(*args):
        traces.append(tuple(a.aval.str_short() for a in args))
        return fn(*args)

    return f, traces


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_values_of_one_scalar_type_trace_once_and_hit(backend, monkeypatch):
    c = np.arange(1, 11, dtype=np.float32)
    f, traces = _counting(lambda p: c[3] * p * p)
    g = ember.jit(ember.grad(f), backend=backend)
    values = [0.0, 1.0, -2.5, 1e-3, 3.25, 1e6, -0.0, 7.0]
    g(5.0)
    monkeypatch.setattr(g, "_call_slow", None)  # from now on every call must take the hit path
    for v in values * 2:
        got = g(v)
        assert type(got) is ember.Array and got.dtype == np.float32 and got.shape == ()
        assert got == np.float32(2 * 4.0 * np.float32(v))
    assert len(traces) == 1
    info = g.cache_info()
    assert (info.misses, info.size, info.hits) == (1, 1, 2 * len(values))


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_scalars_trace_once_per_type(backend):
    f, traces = _counting(lambda x: x * 3)
    g = ember.jit(f, backend=backend)
    for v in range(-5, 6):
        for t in (np.float64, np.float32, np.int64, np.int32, np.float16, np.uint8):
            if v < 0 and t is np.uint8:
                continue
            got = g(t(v))
            assert got.dtype == np.dtype(t) and got == t(v) * t(3)
    assert len(traces) == 6 and g.cache_info().misses == 6


def test_weak_types_are_kept_on_the_hit_path():
    """f32 array * Python float stays f32, * NumPy float64 scalar promotes; Python int is weak too."""
    g = ember.jit(lambda x, s: x * s)
    x = np.ones(3, np.float32)
    for round_ in range(3):  # the first round traces, the others hit
        assert g(x, 0.5 + round_).dtype == np.float32
        assert g(x, np.float64(0.5)).dtype == np.float64
        assert g(x, np.float32(0.5)).dtype == np.float32
        assert g(x, 2 + round_).dtype == np.float32
        assert g(x, np.int64(2)).dtype == np.float32  # f32 and i64 meet at f32 on JAX's lattice
        assert g(x, True).dtype == np.float32
    i8 = np.arange(3, dtype=np.int8)
    for _ in range(2):
        assert g(i8, 3).dtype == np.int8  # a weak Python int keeps the array's int8
        assert g(i8, np.int32(3)).dtype == np.int32
        assert g(i8, 0.5).dtype == np.float32
    np.testing.assert_array_equal(g(i8, 3), i8 * 3)


def test_weak_scalar_result_dtypes_match_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    f16 = np.ones(2, np.float16)
    scalars = [1.5, 2, True, np.float64(1.5), np.float32(1.5), np.int32(2), np.bool_(True), np.float16(1.5)]
    g = ember.jit(lambda s, y: enp.add(s, y))
    ref = jax.jit(lambda s, y: jnp.add(s, y))
    for _ in range(2):
        for s in scalars:
            with jax.enable_x64(True):
                want = np.asarray(ref(s, f16)).dtype
            assert g(s, f16).dtype == want, s


def test_python_bool_int_and_float_key_apart():
    f, traces = _counting(lambda s: s)
    g = ember.jit(f)
    for _ in range(2):
        assert g(True).dtype == np.bool_ and g(True) == np.True_
        assert g(1).dtype == np.int32 and g(1) == 1
        assert g(1.0).dtype == np.float32 and g(1.0) == 1.0
    assert g(np.bool_(True)).dtype == np.bool_
    assert traces == [("bool[]",), ("i32[]",), ("f32[]",), ("bool[]",)]
    assert g.cache_info().misses == 4


def test_numpy_scalar_and_python_float_of_one_value_are_two_entries():
    g = ember.jit(lambda s: s * 2)
    g(1.0)
    g(np.float32(1.0))
    assert g.cache_info().misses == 2 and g.cache_info().size == 2
    g(np.array(1.0, np.float32))  # a 0-d array has the NumPy scalar's (strong) signature
    g(1.0)
    g(np.float32(2.0))
    assert g.cache_info().misses == 2 and g.cache_info().hits == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_array_and_scalar_arguments(backend, monkeypatch):
    f, traces = _counting(lambda x, lr, n, flag, y: enp.where(flag, x - lr * y, x) * n)
    g = ember.jit(f, backend=backend)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(3,)).astype(np.float32)
    for k in range(10):
        lr, n, flag = 0.1 * k, k - 3, k % 2 == 0
        got = g(x, lr, n, flag, y)
        want = np.where(flag, x - np.float32(lr) * y, x) * np.float32(n)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert len(traces) == 1 and g.cache_info().hits == 9
    with monkeypatch.context() as m:
        m.setattr(g, "_call_slow", None)  # every signature seen: the hit path serves them
        np.testing.assert_allclose(g(x, 0.25, 2, False, y), x * 2)
    g(x, np.float64(0.1), 2, True, y)  # a typed float64 learning rate: a new signature, float64 result
    assert len(traces) == 2 and g(x, np.float64(0.1), 2, True, y).dtype == np.float64


def test_python_int_out_of_int32_range_raises_on_every_path():
    g = ember.jit(lambda n: n + 1)
    assert g(5) == 6
    for _ in range(2):  # with an int entry on the hit path, and again
        with pytest.raises(OverflowError):
            g(2**40)
    assert g(np.int64(2**40)) == 2**40 + 1  # a typed int64 scalar is its own signature
    assert g(2**31 - 1).dtype == np.int32
    assert g.cache_info().misses == 2


def test_hit_path_entries_leave_with_their_signature():
    g = ember.jit(lambda s: s + 1, cache_size=1)
    g(np.float32(1.0))
    g(np.array(1.0, np.float32))  # the same entry, filed under two keys
    assert len(g._cache.fast) == 2
    g(1.0)  # evicts it, with both keys
    assert len(g._cache.fast) == 1 and g.cache_info().size == 1
    assert g(np.float32(2.0)) == 3.0 and g.cache_info().misses == 3


def test_complex_and_other_scalars_keep_their_errors():
    g = ember.jit(lambda s: s * 2)
    for _ in range(2):
        with pytest.raises(ArgumentError, match="type complex"):
            g(1j)
        with pytest.raises(ArgumentError, match="complex"):
            g(np.complex64(1j))
    with pytest.raises(ArgumentError, match="not an array"):
        g("a")


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_takes_scalars_of_its_signature(backend, monkeypatch):
    g = ember.jit(lambda x, s: x * s, backend=backend)
    x = np.arange(3, dtype=np.float32)
    cf = g.lower(x, 2.0).compile()
    monkeypatch.setattr(cf, "_arrays", None)  # the checked path: not taken by scalars of the signature
    for s in (2.0, 0.5, np.float32(3.0), np.array(4.0, np.float32)):
        got = cf(x, s)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, x * np.float32(s))
    monkeypatch.undo()
    with pytest.raises(ArgumentError, match="f64"):
        cf(x, np.float64(2.0))
    with pytest.raises(ArgumentError, match="i32"):
        cf(x, 2)
    ci = ember.jit(lambda n: n * 2, backend=backend).lower(3).compile()
    assert ci(5) == 10 and ci(np.int32(5)).dtype == np.int32
    with pytest.raises(ArgumentError, match="bool"):
        ci(True)
    with pytest.raises(OverflowError):
        ci(2**40)
