"""The jit cache: static keys by type and value, compile() on dynamic arguments only, argument-number
checks, the LRU bound, methods, and one trace per signature shared across wrappers and call sites."""

from __future__ import annotations

import dataclasses
import gc

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.tree import tree_flatten
from tests.helpers import all_nodes

# --- A: static arguments that compare equal but differ in type --------------------------------------


def test_equal_statics_of_different_types_trace_separately():
    f = ember.jit(lambda k: k, static_argnums=0)
    a, b, c = f(1), f(True), f(1.0)
    assert (a.dtype.kind, b.dtype.kind, c.dtype.kind) == ("i", "b", "f")
    assert f.cache_info().misses == 3


def test_static_tuples_are_keyed_recursively_and_signed_zero_differs():
    f = ember.jit(lambda x, k: x * k[0], static_argnums=1)
    x = np.ones(2, np.float32)
    assert f(x, (2,)).dtype == np.float32
    assert f(x, (2.0,)).dtype == np.float32
    assert f(x, (True,)).dtype == np.float32
    assert f.cache_info().misses == 3
    g = ember.jit(lambda x, z: x / z, static_argnums=1)
    with np.errstate(divide="ignore"):
        assert g(np.float64(1.0), 0.0) == np.inf and g(np.float64(1.0), -0.0) == -np.inf
    f(x, (2,))
    assert f.cache_info().hits == 1


# --- B: compile() takes only the dynamic arguments --------------------------------------------------


def test_compiled_takes_only_dynamic_arguments():
    f = ember.jit(lambda x, n: x**n, static_argnums=1)
    x = np.array([2.0, 3.0])
    compiled = f.lower(x, 3).compile()
    np.testing.assert_allclose(compiled(x), x**3)
    with pytest.raises(TypeError) as e:
        compiled(x, 4)
    msg = str(e.value)
    assert "static" in msg and "argument 1" in msg and "test_jit_cache.py:" in msg


def test_compiled_rejects_a_static_keyword_argument():
    f = ember.jit(lambda x, scale=1.0: x * scale, static_argnames="scale")
    x = np.ones(2)
    compiled = f.lower(x, scale=2.0).compile()
    np.testing.assert_allclose(compiled(x), 2 * x)
    with pytest.raises(TypeError, match="'scale'"):
        compiled(x, scale=5.0)


# --- C: static argument numbers and names are checked; the cache is bounded -------------------------


@pytest.mark.parametrize("nums", [1, -2, (0, 3)])
def test_static_argnums_out_of_range_raise_at_jit_time(nums):
    with pytest.raises(ValueError, match="static_argnums") as e:
        ember.jit(lambda x: x, static_argnums=nums)
    assert "1 positional" in str(e.value) and "test_jit_cache.py:" in str(e.value)


def test_static_argnames_unknown_raise_and_varargs_are_accepted():
    with pytest.raises(ValueError, match="'y'"):
        ember.jit(lambda x: x, static_argnames="y")
    f = ember.jit(lambda x, *rest: x, static_argnums=3)  # *rest: cannot be checked before the call
    np.testing.assert_allclose(f(np.ones(1)), 1.0)
    g = ember.jit(lambda x, **kw: x * kw["s"], static_argnames="s")
    np.testing.assert_allclose(g(np.ones(1), s=2.0), 2.0)


def test_cache_is_a_bounded_lru():
    f = ember.jit(lambda x: x + 1, cache_size=3)
    for n in range(1, 6):
        f(np.ones(n))
    info = f.cache_info()
    assert info.size == 3 and info.maxsize == 3 and info.misses == 5
    f(np.ones(5))  # still cached (most recent)
    assert f.cache_info().hits == 1
    f(np.ones(1))  # evicted: traced again
    assert f.cache_info().misses == 6
    assert not f._cache._locks  # a trace lock lives only while its signature compiles


def test_fast_path_is_bounded_with_the_cache():
    f = ember.jit(lambda x: x * 2, cache_size=2)
    for n in range(1, 20):
        f(np.ones(n))
    assert len(f._cache.fast) <= 2 and f.cache_info().size == 2
    f(np.ones(19))
    f(np.ones(18))
    f(np.ones(1))  # least recently used is 17 now
    assert f.cache_info().misses == 20 and f.cache_info().hits == 2
    np.testing.assert_allclose(f(np.ones(19)), 2.0)


def test_cache_size_must_be_positive():
    with pytest.raises(ValueError, match="cache_size"):
        ember.jit(lambda x: x, cache_size=0)


# --- D: @jit on methods -------------------------------------------------------------------------------


class Scaler:
    def __init__(self, k):
        self.k = k

    @ember.jit(static_argnums=0)
    def apply(self, x):
        return x * self.k


@dataclasses.dataclass
class Affine:
    w: np.ndarray
    b: np.ndarray

    @ember.jit
    def __call__(self, x):
        return x * self.w + self.b


def test_jit_on_a_method_with_static_self():
    x = np.arange(3.0)
    np.testing.assert_allclose(Scaler(2.0).apply(x), 2 * x)
    np.testing.assert_allclose(Scaler(3.0).apply(x), 3 * x)
    assert Scaler.apply.cache_info().misses == 2


def test_jit_on_a_method_of_a_pytree_dataclass():
    x = np.arange(3.0)
    a = Affine(np.full(3, 2.0), np.ones(3))
    np.testing.assert_allclose(a(x), 2 * x + 1)
    np.testing.assert_allclose(Affine(np.full(3, 5.0), np.zeros(3))(x), 5 * x)
    assert Affine.__call__.cache_info().misses == 1  # self is a dynamic argument: one signature


# --- E: one trace per signature, shared by wrappers and call sites -----------------------------------


def _counted(body):
    calls = []

    def f(x):
        calls.append(1)
        return body(x)

    return f, calls


def test_jitted_inside_jit_is_traced_once_per_signature():
    f, calls = _counted(lambda x: jnp.sin(x) * 2)
    g = ember.jit(f)
    outer = ember.jit(lambda x: g(x) + g(x + 1))
    x = np.linspace(0, 1, 4)
    np.testing.assert_allclose(outer(x), 2 * np.sin(x) + 2 * np.sin(x + 1))
    assert len(calls) == 1
    prims = [n.prim.name for n in all_nodes(outer.lower(x).graph)]
    assert prims.count("sin") == 2
    g(np.ones(2, np.float32))  # a new signature outside a trace: compiled separately
    ember.jit(lambda x: g(x) * g(x))(np.ones(3))  # another outer function, a new signature
    assert len(calls) == 3


def test_inner_graph_closing_over_an_outer_tracer_is_not_reused():
    @ember.jit
    def outer(x, y):
        h = ember.jit(lambda z: z * y)  # closes over the outer trace's y
        return h(x) + h(x + 1)

    x, y = np.arange(3.0), np.full(3, 2.0)
    np.testing.assert_allclose(outer(x, y), x * 2 + (x + 1) * 2)
    np.testing.assert_allclose(outer(x, 3 * y), x * 6 + (x + 1) * 6)


def test_inner_closure_rebound_within_one_trace_is_retraced():
    @ember.jit
    def outer(x):
        a = x
        h = ember.jit(lambda z: z * a)
        first = h(x)
        a = x + 1  # the closure now holds another value of the same trace
        return first, h(x)

    x = np.arange(3.0)
    first, second = outer(x)
    np.testing.assert_allclose(first, x * x)
    np.testing.assert_allclose(second, x * (x + 1))


def test_inner_jit_with_static_arguments_is_traced_once_per_static_value():
    calls = []

    def f(x, n):
        calls.append(n)
        return x**n

    g = ember.jit(f, static_argnums=1)
    outer = ember.jit(lambda x: g(x, 2) + g(x + 1, 2) + g(x, 3))
    x = np.arange(3.0)
    np.testing.assert_allclose(outer(x), x**2 + (x + 1) ** 2 + x**3)
    assert sorted(calls) == [2, 3]


def test_jit_of_the_same_function_twice_shares_the_cache():
    f, calls = _counted(lambda x: x * 3)
    ember.jit(f)(np.ones(2))
    ember.jit(f)(np.ones(2))
    assert len(calls) == 1
    ember.jit(f, optimize=False)(np.ones(2))  # other options: another cache
    assert len(calls) == 2


@pytest.mark.parametrize("make", [lambda f: ember.grad(f), lambda f: ember.value_and_grad(f, has_aux=False),
                                  lambda f: ember.vmap(f), lambda f: ember.jacrev(f)],
                         ids=["grad", "value_and_grad", "vmap", "jacrev"])
def test_transform_created_twice_compiles_once_per_signature(make):
    f, calls = _counted(lambda x: jnp.sum(jnp.sin(x)))
    x = np.linspace(0, 1, 3)
    for a, b in zip(tree_flatten(make(f)(x))[0], tree_flatten(make(f)(x))[0]):
        np.testing.assert_array_equal(a, b)
    assert len(calls) == 1
    make(f)(np.ones(5))
    assert len(calls) == 2


def test_transform_options_are_part_of_the_key():
    f, calls = _counted(lambda xy: xy[0] * xy[1])
    xy = (np.float64(2.0), np.float64(5.0))
    assert ember.grad(lambda a, b: f((a, b)), argnums=0)(*xy) == 5.0
    assert ember.grad(lambda a, b: f((a, b)), argnums=1)(*xy) == 2.0
    g = ember.grad(lambda a: a**3)
    assert ember.grad(g)(np.float64(1.0)) == 6.0 and ember.grad(g)(np.float64(2.0)) == 12.0


def test_shared_cache_does_not_keep_the_function_alive():
    import weakref

    def f(x):
        return x + 1

    ember.jit(f)(np.ones(2))
    ref = weakref.ref(f)
    del f
    gc.collect()
    assert ref() is None


def test_a_signature_is_traced_once_under_concurrent_calls():
    import threading
    import time

    calls = []

    def f(x):
        calls.append(1)
        time.sleep(0.05)  # hold the trace so the other threads arrive meanwhile
        return x * 2

    g = ember.jit(f)
    x = np.ones(3)
    results = []
    threads = [threading.Thread(target=lambda: results.append(g(x))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(results) == 4
    assert g.cache_info().misses == 1 and g.cache_info().hits == 3
