"""The jit call path: the hit path for plain array arguments (keyed by shape and dtype) must give the
same results, retraces and errors as the general path, and see option changes made after a signature
was compiled."""

import numpy as np
import pytest

import ember
import ember.config
import ember.numpy as jnp
from ember.backends.debug import Checked


def test_new_shapes_and_dtypes_retrace_and_cached_ones_hit():
    traces = []

    def f(x):
        traces.append(x.aval.str_short())
        return x * 2

    jf = ember.jit(f)
    for x in (np.ones(3, np.float32), np.ones(3, np.float32), np.ones(4, np.float32), np.ones(3, np.float64),
              np.ones((3, 1), np.float32), np.ones(3, np.int32), np.ones(3, np.float32)):
        out = jf(x)
        assert out.dtype == x.dtype and out.shape == x.shape
        np.testing.assert_array_equal(out, x * 2)
    assert traces == ["f32[3]", "f32[4]", "f64[3]", "f32[3,1]", "i32[3]"]
    assert jf.cache_info()[:3] == (2, 5, 5)


def test_weak_python_scalars_key_apart_from_typed_arrays():
    jf = ember.jit(lambda x, s: x * s)
    x = np.ones(2, np.float32)
    for _ in range(2):  # the second round runs from the cache
        assert jf(x, 2.0).dtype == np.float32  # a Python float is weak: x keeps float32
        assert jf(x, np.float64(2.0)).dtype == np.float64  # a typed scalar promotes
        assert jf(x, np.array(2.0)).dtype == np.float64  # so does a 0-d array
        assert jf(x, 2).dtype == np.float32
    assert jf.cache_info().misses == 3  # a typed scalar and a 0-d array share one signature


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_arrays_not_passed_as_they_are_still_run_correctly():
    jf = ember.jit(lambda x: x + 1)
    base = np.arange(6, dtype=np.float32)
    for x in (base, base[::2], base.reshape(2, 3).T, np.asmatrix(base), base.astype(">f4"), base.astype(">f4")):
        got = jf(x)
        assert type(got) is ember.Array and got.dtype == np.float32
        np.testing.assert_array_equal(got, np.asarray(x, np.float32) + 1)


def test_big_endian_arguments_are_made_native():
    """A non-native array has the aval of its native dtype, and the executable gets it converted."""
    x = np.arange(4, dtype=">f8")
    assert ember.jit(lambda x: x * 2)(x).dtype == np.float64
    low = ember.jit(lambda x: x * 2).lower(x)
    assert low.graph.in_avals[0].dtype == np.dtype("float64")
    np.testing.assert_array_equal(low.compile()(x), np.arange(4) * 2.0)


def test_inside_a_trace_a_cached_function_is_staged_not_run():
    inner = ember.jit(lambda c: jnp.sin(c) * 3.0)
    c = np.linspace(0, 1, 5)
    inner(c)
    inner(c)  # cached for concrete arrays
    outer = ember.jit(lambda y: inner(c) + y)
    assert "sin" in [n.prim.name for n in outer.lower(c).graph.nodes]
    np.testing.assert_allclose(outer(c), np.sin(c) * 3.0 + c)


def test_debug_options_turned_on_after_compiling_apply_to_cached_calls(monkeypatch):
    monkeypatch.setattr(ember.config, "check_oracle", False)
    jf = ember.jit(lambda x: jnp.log(x) * 2.0)
    x = np.array([1.0, -1.0])
    with np.errstate(invalid="ignore"):
        assert np.isnan(jf(x)[1]) and np.isnan(jf(x)[1])  # cached, no check on
    monkeypatch.setattr(ember.config, "debug_nans", True)
    with pytest.raises(FloatingPointError, match="log"):
        jf(x)


def test_oracle_check_turned_on_after_compiling_applies_to_cached_calls(monkeypatch):
    monkeypatch.setattr(ember.config, "check_oracle", False)
    jf = ember.jit(lambda x: x * 2.0)
    x = np.ones(3)
    jf(x)
    entry = next(iter(jf._cache.entries.values()))
    wrong = Checked(lambda *a: [np.zeros(3)], entry.executable.source_graph, name="wrong",
                    oracle_plan=entry.executable.oracle_plan)
    entry.use(wrong)
    np.testing.assert_array_equal(jf(x), 0.0)  # no check: what the executable returns
    monkeypatch.setattr(ember.config, "check_oracle", True)
    with pytest.raises(AssertionError, match="differs from the oracle"):
        jf(x)


def test_checked_runs_the_executable_itself_only_when_nothing_is_donated():
    def exe(*a):
        return [a[0] * 1]

    graph = ember.make_graph(lambda x: x * 1)(np.ones(2))
    assert Checked(exe, graph).unchecked is exe
    donating = Checked(exe, graph, donated=(0,))
    assert donating.unchecked is donating  # donated arguments are unshared first


def test_cached_call_with_donation_still_unshares_aliased_arguments(monkeypatch):
    monkeypatch.setattr(ember.config, "check_oracle", False)

    def f(a, b):
        return jnp.sum(jnp.sin(jnp.exp(a)) * 2.0) + jnp.sum(b)

    x = np.linspace(0, 1, 100).astype(np.float32)
    keep = x.copy()
    jf = ember.jit(f, donate_argnums=0, disable_passes=("fusion",))
    for _ in range(3):
        np.testing.assert_allclose(jf(x, x), f(keep.copy(), keep.copy()), rtol=1e-5)
        np.testing.assert_array_equal(x, keep)


def test_ember_backend_is_read_on_every_call(monkeypatch):
    jf = ember.jit(lambda x: x + 1)
    x = np.ones(2)
    monkeypatch.delenv("EMBER_BACKEND", raising=False)
    jf(x)
    jf(x)
    monkeypatch.setenv("EMBER_BACKEND", "no-such-backend")
    with pytest.raises(ValueError, match="no-such-backend"):
        jf(x)
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    np.testing.assert_array_equal(jf(x), 2.0)


def test_pytree_outputs_and_single_outputs_from_the_cache():
    jf = ember.jit(lambda x: {"a": x + 1, "b": (x * 2, x.sum())})
    x = np.arange(3.0)
    for _ in range(2):
        out = jf(x)
        assert sorted(out) == ["a", "b"] and isinstance(out["b"], tuple)
        np.testing.assert_array_equal(out["b"][0], x * 2)
    single = ember.jit(lambda x: [x + 1])
    assert isinstance(single(x), list) and isinstance(single(x), list)


def test_hits_and_misses_are_counted_on_every_path():
    jf = ember.jit(lambda x, n=1: x * n)
    x = np.ones(2)
    jf(x)
    jf(x)  # hit path
    jf(x, n=2)  # keyword: general path, new signature
    jf(x, n=3)  # general path, cached
    jf(x=x)  # another structure
    assert jf.cache_info()[:3] == (2, 3, 3)
    jf.clear_cache()
    assert jf.cache_info()[:3] == (0, 0, 0)
    jf(x)
    assert jf.cache_info()[:3] == (0, 1, 1)


def test_compiled_hit_path_checks_the_signature():
    x = np.ones(3, np.float32)
    c = ember.jit(lambda x, s: x * s).lower(x, 2.0).compile()
    np.testing.assert_array_equal(c(x, 2.0), 2.0)
    np.testing.assert_array_equal(c(x, np.float32(3.0)), 3.0)  # the weak scalar's dtype, typed
    np.testing.assert_array_equal(c(x.astype(">f4"), 2.0), 2.0)  # made native
    for bad in ((np.ones(4, np.float32), 2.0), (np.ones(3), 2.0), (x, np.ones(2, np.float32)), (x,)):
        with pytest.raises(TypeError, match="compiled <lambda> takes"):
            c(*bad)
    p = ember.jit(lambda x, y: x - y).lower(x, x).compile()
    np.testing.assert_array_equal(p(x, x * 3), -2.0)
    with pytest.raises(TypeError, match=r"takes \(f32\[3\], f32\[3\]\)"):
        p(x, np.ones(3, np.int32))
    with pytest.raises(TypeError, match="takes"):
        p(x, y=x)  # another structure
