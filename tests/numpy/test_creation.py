"""Array creation against NumPy: array, asarray, zeros/ones/full/empty and their *_like, arange,
linspace, eye, identity; eager and under jit (where they become iota/broadcast nodes).

Deliberate differences from NumPy: new arrays default to float32 (int32 for integer fills and
ranges, see test_promotion.py); `empty`/`empty_like` return zeros (there is no uninitialized memory
to hand out); lists of Python floats become float32 arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.numpy.cases import (
    A,
    Case,
    case_tests,
    covered,
)


def _shape_cases():
    cases = []
    for name in ("zeros", "ones", "empty"):
        fn, ref = getattr(jnp, name), (np.zeros if name == "empty" else getattr(np, name))
        for shape in ((2, 3), 4, (), (0, 3), (2, 1, 3)):
            cases.append(Case(name, lambda fn=fn, s=shape: fn(s), lambda ref=ref, s=shape: ref(s), (),
                              note=str(shape)))
        for dt in (np.int8, np.float64, np.bool_, np.uint8):
            cases.append(Case(name, lambda fn=fn, dt=dt: fn((3, 2), dt), lambda ref=ref, dt=dt: ref((3, 2), dt), (),
                              dtype=np.dtype(dt), note=np.dtype(dt).name))
        cases.append(Case(name, lambda fn=fn: fn([2, 2], dtype=int), lambda ref=ref: ref([2, 2], dtype=np.int32), (),
                          note="dtype=int"))
    return cases


def _full_cases():
    f = jnp.full
    return [
        Case("full", lambda: f((2, 3), 1.5), lambda: np.full((2, 3), 1.5), ()),
        Case("full", lambda: f(4, 7), lambda: np.full(4, 7), (), note="int fill"),
        Case("full", lambda: f((), True), lambda: np.full((), True), (), note="bool fill"),
        Case("full", lambda: f((2, 2), 2.5, np.float64), lambda: np.full((2, 2), 2.5, np.float64), (),
             dtype=np.float64),
        Case("full", lambda: f((3,), 2.7, np.int32), lambda: np.full((3,), 2.7, np.int32), (), note="truncates"),
        Case("full", lambda: f((0, 2), 1.0), lambda: np.full((0, 2), 1.0), ()),
        Case("full", lambda v: f((2, 3), v), lambda v: np.full((2, 3), v), (A((), "f64"),), note="traced fill"),
        Case("full", lambda v: f((2, 3), v), lambda v: np.full((2, 3), v), (A((3,), "f32"),), note="array fill"),
        Case("full", lambda v: f((2, 3), v, np.float64), lambda v: np.full((2, 3), v, np.float64),
             (A((2, 1), "f32"),), grad=False, note="array fill, dtype"),
        Case("full", lambda v: f((4,), v), lambda v: np.full((4,), v), (A((), "i32"),), note="int fill"),
        Case("full", lambda: f((2,), np.float64(0.5)), lambda: np.full((2,), np.float64(0.5)), (),
             dtype=np.float64, note="numpy scalar fill"),
    ]


def _like_cases():
    cases = []
    for name in ("zeros_like", "ones_like", "empty_like"):
        fn = getattr(jnp, name)
        ref = np.zeros_like if name == "empty_like" else getattr(np, name)
        for spec in (A((2, 3)), A((), "f64"), A((0, 4), "i32"), A((3,), "bool"), A((2, 1, 2), "u8")):
            cases.append(Case(name, fn, ref, (spec,)))
        cases.append(Case(name, lambda x, fn=fn: fn(x, dtype=np.float64), lambda x, ref=ref: ref(x, dtype=np.float64),
                          (A((2, 3), "i32"),), dtype=np.float64, note="dtype"))
        cases.append(Case(name, lambda x, fn=fn: fn(x, shape=(4, 1)), lambda x, ref=ref: ref(x, shape=(4, 1)),
                          (A((2, 3)),), note="shape"))
    fl = jnp.full_like
    cases += [
        Case("full_like", lambda x: fl(x, 2.5), lambda x: np.full_like(x, 2.5), (A((2, 3)),)),
        Case("full_like", lambda x: fl(x, 2.5), lambda x: np.full_like(x, 2.5), (A((3,), "i32"),), note="truncates"),
        Case("full_like", lambda x: fl(x, 1, dtype=np.float64), lambda x: np.full_like(x, 1, dtype=np.float64),
             (A((2, 2), "i32"),), dtype=np.float64),
        Case("full_like", lambda x: fl(x, 3, shape=(2, 2)), lambda x: np.full_like(x, 3, shape=(2, 2)), (A((5,)),)),
        Case("full_like", fl, np.full_like, (A((2, 3), "f64"), A((), "f64")), note="traced fill"),
        Case("full_like", fl, np.full_like, (A((2, 3)), A((3,))), note="array fill"),
        Case("full_like", fl, np.full_like, (A((0,)), A(())), note="empty"),
    ]
    return cases


def _arange_cases():
    ar = jnp.arange
    cases = []
    for args in ((5,), (2, 10, 3), (10, 2, -2), (0.0, 1.0, 0.1), (-3.5, 2), (3, 3), (5, 0), (1, 10, 0.5), (0, -5, -1),
                 (2.5,), (-1, 1, 0.25)):
        cases.append(Case("arange", lambda a=args: ar(*a), lambda a=args: np.arange(*a), (), note=repr(args)))
    for args, dt in (((5,), np.float64), ((1, 7, 2), np.int8), ((0, 2, 0.5), np.float64), ((4,), np.float32),
                     ((6,), np.uint8)):
        cases.append(Case("arange", lambda a=args, dt=dt: ar(*a, dtype=dt),
                          lambda a=args, dt=dt: np.arange(*a, dtype=dt), (), dtype=np.dtype(dt),
                          note=f"{args} {np.dtype(dt).name}"))
    cases.append(Case("arange", lambda x: jnp.multiply(ar(4), x), lambda x: np.arange(4) * x, (A((3, 1)),),
                      dtype=np.float32, note="with input"))  # int32 x f32 is f32 (JAX's lattice)
    return cases


def _linspace_cases():
    ls = jnp.linspace
    cases = []
    for args, kw in (((0, 1, 5), {}), ((2, 3), {"num": 4, "endpoint": False}), ((0, 1, 0), {}), ((-1, 1, 1), {}),
                     ((1.5, -2.5, 7), {"dtype": np.float64}), ((0, 10, 5), {"dtype": np.int32}), ((0, 1), {})):
        cases.append(Case("linspace", lambda a=args, k=kw: ls(*a, **k), lambda a=args, k=kw: np.linspace(*a, **k), (),
                          dtype=np.dtype(kw.get("dtype", np.float32)), note=f"{args} {kw}"))
    cases.append(Case("linspace", lambda x: ls(0, 1, 3) * x, lambda x: np.linspace(0, 1, 3) * x, (A((3,)),),
                      dtype=np.float32, note="times input"))
    return cases


def _eye_cases():
    cases = []
    for args, kw in (((3,), {}), ((2, 4), {}), ((4, 3), {"k": 1}), ((3,), {"k": -2}), ((3,), {"k": 5}),
                     ((3, None, -1), {}), ((3,), {"dtype": int}), ((2, 3), {"dtype": np.bool_}), ((0,), {}),
                     ((3,), {"dtype": np.float64})):
        ref_kw = {**kw, "dtype": np.int32} if kw.get("dtype") is int else kw
        cases.append(Case("eye", lambda a=args, k=kw: jnp.eye(*a, **k), lambda a=args, k=ref_kw: np.eye(*a, **k), (),
                          dtype=np.dtype(ref_kw.get("dtype", np.float32)), note=f"{args} {kw}"))
    cases.append(Case("eye", lambda x: jnp.eye(3) @ x, lambda x: np.eye(3, dtype=np.float32) @ x, (A((3, 2)),),
                      note="matmul"))
    for n, kw in ((4, {}), (1, {"dtype": np.bool_}), (2, {"dtype": np.int8})):
        cases.append(Case("identity", lambda n=n, k=kw: jnp.identity(n, **k), lambda n=n, k=kw: np.identity(n, **k),
                          (), note=f"{n} {kw}"))
    return cases


def _array_cases():
    cases = []
    for name in ("array", "asarray"):
        fn, ref = getattr(jnp, name), getattr(np, name)
        cases += [
            Case(name, fn, ref, (A((2, 3)),)),
            Case(name, fn, ref, (A((), "f64"),)),
            Case(name, fn, ref, (A((0,), "i8"),)),
            Case(name, lambda x, fn=fn: fn(x, dtype=np.int32), lambda x, ref=ref: ref(x, dtype=np.int32),
                 (A((5,), "f64"),), note="float to int truncates"),
            Case(name, lambda x, fn=fn: fn(x, np.float64), lambda x, ref=ref: ref(x, np.float64), (A((2, 2), "f32"),)),
            Case(name, lambda x, fn=fn: fn(x, dtype=bool), lambda x, ref=ref: ref(x, dtype=bool), (A((4,), "i32"),)),
            Case(name, lambda fn=fn: fn([[1, 2], [3, 4]]), lambda ref=ref: ref([[1, 2], [3, 4]], np.int32), (),
                 note="int list"),
            Case(name, lambda fn=fn: fn([1.5, 2]), lambda ref=ref: ref([1.5, 2], np.float32), (), note="float list"),
            Case(name, lambda fn=fn: fn([True, False]), lambda ref=ref: ref([True, False]), (), note="bool list"),
            Case(name, lambda fn=fn: fn(2.5), lambda ref=ref: ref(2.5, np.float32), (), note="python float"),
            Case(name, lambda fn=fn: fn(3), lambda ref=ref: ref(3, np.int32), (), note="python int"),
            Case(name, lambda fn=fn: fn([[1.0, 2.0]], dtype=np.float64),
                 lambda ref=ref: ref([[1.0, 2.0]], dtype=np.float64), (), dtype=np.float64, note="list with dtype"),
            Case(name, lambda a, b, fn=fn: fn([a, b]), lambda a, b, ref=ref: ref([a, b]), (A((3,)), A((3,))),
                 note="list of arrays"),
            Case(name, lambda a, b, fn=fn: fn([[a, 1.0], [2.0, b]]),
                 lambda a, b, ref=ref: ref([[a, 1.0], [2.0, b]], dtype=a.dtype), (A(()), A(())),
                 note="scalars and floats"),
            Case(name, lambda a, fn=fn: fn([a, 2]), lambda a, ref=ref: ref([a, 2], dtype=a.dtype), (A((), "f32"),),
                 note="weak int joins f32"),
            Case(name, lambda a, b, fn=fn: fn((a, b), dtype=np.float64),
                 lambda a, b, ref=ref: ref((a, b), dtype=np.float64), (A((2,)), A((2,), "i32")), dtype=np.float64,
                 note="tuple, dtype"),
            Case(name, lambda a, fn=fn: fn([[a, a], [a, a]]), lambda a, ref=ref: ref([[a, a], [a, a]]),
                 (A((2,), "i32"),), note="nested"),
        ]
    return cases


CASES = _shape_cases() + _full_cases() + _like_cases() + _arange_cases() + _linspace_cases() + _eye_cases() + \
    _array_cases()
COVERED = covered(CASES)


test_values_match_numpy, test_grads_match_finite_differences, test_vmap_matches_loop = \
    case_tests(CASES)


def test_array_copies_and_asarray_copies_only_numpy_arrays():
    """As jax.numpy: a NumPy array (which its owner may write) is copied into an Array; an Array is
    immutable, so asarray gives it back."""
    x = np.arange(3.0)
    assert jnp.array(x) is not x
    assert not np.shares_memory(jnp.array(x), x)
    a = jnp.asarray(x)
    assert type(a) is ember.Array and not np.shares_memory(a, x)
    assert jnp.asarray(a) is a and jnp.asarray(a, np.float32) is not a
    np.testing.assert_array_equal(jnp.array(x), x)


def test_creation_inside_a_trace_stages_nodes_not_constants():
    graph = ember.make_graph(lambda x: x + jnp.zeros((50, 50)) + jnp.arange(50) + jnp.eye(50))(np.ones((50, 50)))
    assert not graph.consts, "creation functions should emit broadcast/iota nodes, not 50x50 constants"
    prims = {n.prim.name for n in graph.nodes}
    assert "iota" in prims and "broadcast_in_dim" in prims


def test_traced_sizes_raise_concretization_errors():
    with pytest.raises(ember.ConcretizationError, match="arange"):
        ember.jit(lambda n: jnp.arange(n))(3)
    with pytest.raises(ember.ConcretizationError):
        ember.jit(lambda n: jnp.zeros(n))(3)
    with pytest.raises(ember.ConcretizationError, match="linspace"):
        ember.jit(lambda n: jnp.linspace(0.0, 1.0, n))(3)


def test_linspace_with_traced_and_array_bounds_as_in_jax():
    """Only `num` fixes the shape: traced or array bounds work (values along `axis`), with JAX's results
    (integer dtypes take the floor); the gradient flows to both bounds."""
    lin = ember.jit(lambda a, b: jnp.linspace(a, b, 4))
    np.testing.assert_allclose(lin(np.float32(1.0), np.float32(2.0)), [1.0, 4 / 3, 5 / 3, 2.0], rtol=1e-6)
    out = ember.jit(lambda a: jnp.linspace(a, np.array([[2.0], [3.0]], np.float32), 3, endpoint=False, axis=-1))(
        np.array([0.0, 1.0], np.float32))
    np.testing.assert_allclose(out, [[[0, 2 / 3, 4 / 3], [1, 4 / 3, 5 / 3]], [[0, 1, 2], [1, 5 / 3, 7 / 3]]], rtol=1e-6)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(ember.jit(lambda a: jnp.linspace(a, 2, 3, dtype=np.int32))(np.float32(-1.0)),
                                  [-1, 0, 2])
    ga, gb = ember.grad(lambda a, b: jnp.sum(jnp.linspace(a, b, 4) ** 2), argnums=(0, 1))(1.0, 2.0)
    np.testing.assert_allclose([ga, gb], [44 / 9, 64 / 9], rtol=1e-6)  # jax.grad gives 4.888889, 7.111111


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="arange"):
        jnp.arange(0, 5, 0)
    with pytest.raises(TypeError, match="shape"):
        jnp.zeros("abc")
    with pytest.raises(TypeError, match="array"):
        jnp.asarray(object())
    with pytest.raises(ember.DTypeError):
        jnp.ones(3, dtype="complex128")
