"""Indexing against NumPy: x[key] (ints, slices with steps, None, Ellipsis, integer arrays concrete and
traced, mixed basic/advanced indices, boolean NumPy masks, 0-d arrays), x.at[key].set/add/get, and
take; eager (NumPy arrays, no trace), under jit, gradients and vmap.

Deliberate differences from NumPy (as in JAX): traced integer indices cannot be bounds-checked, so
out-of-range entries are clamped into range (concrete ones raise IndexError); indexing with a traced
boolean mask raises ConcretizationError (its result's shape would depend on the data); boolean
scalars are not accepted as indices.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.numpy._indexing import at, getitem
from tests.helpers import check_grads, loop_vmap
from tests.numpy.cases import (
    A,
    Case,
    assert_matches,
    check_case_grads,
    check_values,
    check_vmap,
    covered,
    grad_params,
    value_params,
    vmap_params,
)

S = slice
X = np.random.default_rng(1).standard_normal((4, 5, 6)).astype(np.float32)
_masks = np.random.default_rng(2)
MASK3 = _masks.random((4, 5, 6)) < 0.3
MASK1 = np.array([True, False, True, True])
MASK2 = _masks.random((4, 5)) < 0.5
MASK5 = np.array([False, True, False, False, True])

BASIC_KEYS = [
    0, -1, 3, (1, 2), (-1, -2, -3), (1, 2, 3), S(None), S(1, 3), S(None, None, 2), S(None, None, -1), S(3, 0, -2),
    S(3, 1), S(-2, None), S(10, 20), S(None, None, -3), S(-10, 2), (S(1, 3), S(None, None, -2)),
    (S(None), S(None), S(5, None, -4)), (1, S(None, None, -1), 2), (S(None), S(4, 0, -1), S(0, 6, 5)), None, (None, 1),
    (Ellipsis, 1), (1, Ellipsis), (Ellipsis, None), (None, Ellipsis, None), Ellipsis, (), (S(None), None, 2),
    (0, None, S(1, 2), None), (Ellipsis, S(None, None, -1)), (None, None), (np.int64(2), np.int32(-1)),
    (S(0, 0), 1), (1, 2, S(None, None, -1)),
]
ADVANCED_KEYS = [
    [0, 2], [[0, 1], [2, 3]], np.array([-1, 0]), np.array([3, 3, 0]), (S(None), [1, 3]), ([0, 1], [1, 2]),
    ([0, 1], S(None), [1, 2]), (S(None), [0, 1], [1, 2]), (1, S(None), [0, 2]), ([0, 1], 1), (S(None), 1, [0, 2]),
    (0, [1, 2], [3, 4]), (Ellipsis, [0, 1]), ([[0], [1]], S(1, 3), [0, 1, 2]), ([[0], [1]], [0, 1, 2]),
    (None, [0, 1], S(None), [2, 3]), (S(None, None, -1), [0, -1]), (np.array(2),), (np.array(-1), np.array([0, 1])),
    (np.array([], dtype=np.int32),), np.array([0, 1], dtype=np.int64), np.array([1], dtype=np.uint8),
    (S(1, None), [[-1, 0]], S(None, None, 2)), ([2], [-1], [0]), (-1, S(None), [[0]], ), [[[1]]], (np.array(1), 2),
]
BOOL_KEYS = [MASK3, MASK1, MASK2, (S(None), MASK5), (MASK1, 2), (Ellipsis, MASK5, S(None, 2)),
             np.zeros(4, bool), (MASK2, S(None, None, -1)), [True, False, False, True]]


def _key_id(key) -> str:
    r = repr(key).replace("slice", "S").replace("array", "a").replace(" ", "")
    return r if len(r) < 60 else r[:57] + "..."


def _check_getitem(x, key):
    want = x[key]
    assert_matches(getitem(x, key), want, x.dtype, what="eager")
    assert_matches(ember.jit(lambda v: v[key])(x), want, x.dtype, what="jit")


@pytest.mark.parametrize("key", BASIC_KEYS + ADVANCED_KEYS + BOOL_KEYS,
                         ids=[_key_id(k) for k in BASIC_KEYS + ADVANCED_KEYS + BOOL_KEYS])
def test_getitem_matches_numpy(key):
    _check_getitem(X, key)


@pytest.mark.parametrize("key", [0, -3, S(None, None, -2), [4, 0, -7], None, Ellipsis, (), np.array(5),
                                 np.arange(7) % 3 == 1, (None, S(1, 6, 2))], ids=_key_id)
def test_getitem_of_a_vector(key):
    _check_getitem(np.arange(7, dtype=np.int32) * 3, key)


@pytest.mark.parametrize("key", [(), None, Ellipsis, (None, None), (Ellipsis, None)], ids=_key_id)
def test_getitem_of_a_scalar(key):
    _check_getitem(np.array(2.5, np.float64), key)


def test_getitem_of_a_zero_size_array():
    x = np.zeros((0, 3), np.float32)
    for key in (S(None), (S(None), 1), (Ellipsis, [0, 2]), S(None, None, -1), np.zeros(0, bool)):
        _check_getitem(x, key)


# Functions of (x, index array) applied to NumPy arrays give NumPy's answer; under jit the index array
# is a traced value.
TRACED = [
    ("x[i]", lambda v, i: v[i], np.array([0, -1, 2])),
    ("x[i] 2-d", lambda v, i: v[i], np.array([[1], [-4]])),
    ("x[:, i]", lambda v, i: v[:, i], np.array([4, -5, 0])),
    ("x[i, :, i]", lambda v, i: v[i, :, i], np.array([0, -1])),
    ("x[1:, i]", lambda v, i: v[1:, i], np.array([[0, 1], [2, -2]])),
    ("x[i] 0-d", lambda v, i: v[i], np.array(2)),
    ("x[..., i] 0-d", lambda v, i: v[..., i], np.array(-1)),
    ("x[i, 2]", lambda v, i: v[i, 2], np.array([1, -1])),
    ("x[[0, 1], i]", lambda v, i: v[[0, 1], i], np.array([3, -3])),
    ("x[i, ::-1, None]", lambda v, i: v[i, ::-1, None], np.array([2, 2, 0])),
    ("x[i, i, i]", lambda v, i: v[i, i, i], np.array([[0], [-1]])),
    ("x[None, i, 1:3]", lambda v, i: v[None, i, 1:3], np.array([1], dtype=np.int64)),
    ("x[i] empty", lambda v, i: v[i], np.zeros(0, np.int32)),
    ("x[2, :, i] uint8", lambda v, i: v[2, :, i], np.array([5, 0], np.uint8)),
]


@pytest.mark.parametrize("fn, idx", [(f, i) for _, f, i in TRACED], ids=[n for n, _, _ in TRACED])
def test_traced_integer_indices(fn, idx):
    assert_matches(ember.jit(fn)(X, idx), fn(X, idx), X.dtype, what="jit")


def test_traced_indices_out_of_range_are_clamped():
    x = np.arange(5.0)
    got = ember.jit(lambda v, i: v[i])(x, np.array([7, -9, 2]))
    np.testing.assert_array_equal(got, [4.0, 0.0, 2.0])


@pytest.mark.parametrize("key", [4, -5, (0, 5), (S(None), S(None), 6), [0, 4], np.array([-5]), (0, 0, 0, 0),
                                 (Ellipsis, Ellipsis), (0, [1], 6), np.ones(3, bool),
                                 (MASK1, MASK1)], ids=_key_id)
def test_bad_concrete_indices_raise_index_error(key):
    with pytest.raises(IndexError):
        X[key]
    with pytest.raises(IndexError):
        getitem(X, key)
    with pytest.raises(IndexError):
        ember.jit(lambda v: v[key])(X)


@pytest.mark.parametrize("key", [1.5, "a", np.array([0.5]), (0, 1.0)], ids=_key_id)
def test_indices_of_a_wrong_type_raise_type_error(key):
    """As in JAX (NumPy raises IndexError): the index's type is wrong, not its value."""
    with pytest.raises(TypeError, match="integer"):
        getitem(X, key)
    with pytest.raises(TypeError, match="integer"):
        ember.jit(lambda v: v[key])(X)


def test_traced_boolean_masks_raise_index_error():
    with pytest.raises(ember.errors.NonConcreteBooleanIndexError, match="where") as info:
        ember.jit(lambda v: v[v > 0])(X)
    assert isinstance(info.value, IndexError) and "test_indexing.py" in str(info.value)
    with pytest.raises(IndexError):
        ember.jit(lambda v, m: v[m])(X, MASK1)
    with pytest.raises(TypeError, match="integer"):
        ember.jit(lambda v, i: v[i])(X, np.array([0.0]))


# --- x.at[key] --------------------------------------------------------------------------------------

AT_KEYS = [1, -1, S(1, 3), S(None, None, -2), (S(None), 2), [0, 2], [[0], [3]], (S(None), [1, 3]), (Ellipsis, 0),
           ([0, 1], S(None), [1, 2]), MASK3, MASK1, (1, S(None), [0, 2]), (), (S(None), S(4, 0, -2), -1),
           (np.array(-2),), (S(3, 1),)]
ADD_KEYS = AT_KEYS + [np.array([1, 1, 3]), ([0, 0, 0], S(None), [5, 5, 5]), (S(None), [[1, 1], [1, 2]])]


def _values(key, kind, rng):
    shape = X[key].shape
    if kind == "scalar":
        return 2.5
    if kind == "trailing":
        return rng.standard_normal(shape[-1:]).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("kind", ["scalar", "full", "trailing"])
@pytest.mark.parametrize("key", AT_KEYS, ids=_key_id)
def test_at_set_and_get(key, kind):
    u = _values(key, kind, np.random.default_rng(0))
    want = X.copy()
    want[key] = u
    assert_matches(at(X)[key].set(u), want, X.dtype, what="eager set")
    assert_matches(ember.jit(lambda v, w: v.at[key].set(w))(X, u), want, X.dtype, what="jit set")
    assert_matches(ember.jit(lambda v: v.at[key].get())(X), X[key], X.dtype, what="jit get")
    assert_matches(at(X)[key].get(), X[key], X.dtype, what="eager get")


@pytest.mark.parametrize("kind", ["scalar", "full", "trailing"])
@pytest.mark.parametrize("key", ADD_KEYS, ids=_key_id)
def test_at_add_accumulates_repeated_indices(key, kind):
    u = _values(key, kind, np.random.default_rng(0))
    want = X.copy()
    np.add.at(want, key, u)
    assert_matches(at(X)[key].add(u), want, X.dtype, what="eager add")
    assert_matches(ember.jit(lambda v, w: v.at[key].add(w))(X, u), want, X.dtype, what="jit add")


def test_at_does_not_modify_its_input():
    x = X.copy()
    at(x)[0].set(0.0)
    ember.jit(lambda v: v.at[0].add(1.0))(x)
    np.testing.assert_array_equal(x, X)


@pytest.mark.parametrize("op, key_of, idx, upd", [
    ("add", lambda i: (i,), np.array([1, 1, -1]), np.ones((3, 5, 6), np.float32)),
    ("add", lambda i: (S(None), i), np.array([[0, 0], [4, -5]]), np.full((4, 2, 2, 6), 0.5, np.float32)),
    ("set", lambda i: (i, 2), np.array([3, 0]), np.float32(7.0)),
    ("set", lambda i: (Ellipsis, i), np.array(-1), np.arange(20, dtype=np.float32).reshape(4, 5)),
], ids=["add", "add 2-d", "set", "set 0-d"])
def test_at_with_traced_indices(op, key_of, idx, upd):
    def f(v, i, u):
        ref = v.at[key_of(i)]
        return ref.add(u) if op == "add" else ref.set(u)

    want = X.copy()
    if op == "add":
        np.add.at(want, key_of(idx), upd)
    else:
        want[key_of(idx)] = upd
    assert_matches(ember.jit(f)(X, idx, upd), want, X.dtype, what="jit")


def test_at_converts_values_to_the_array_dtype():
    x = np.arange(6, dtype=np.int32)
    got = ember.jit(lambda v: v.at[[1, 3]].set(2.7))(x)
    want = x.copy()
    want[[1, 3]] = 2.7
    assert_matches(got, want, np.int32)
    assert_matches(ember.jit(lambda v: v.at[:2].add(True))(x), x + np.array([1, 1, 0, 0, 0, 0]), np.int32)


def test_at_with_values_of_the_wrong_shape_raises():
    with pytest.raises(ember.errors.SHAPE_ERRORS, match=r"\(3,\).*\(2, 6\)") as info:
        ember.jit(lambda v: v.at[0, :2].set(np.ones(3, np.float32)))(X)
    assert "test_indexing.py" in str(info.value)
    with pytest.raises(IndexError):
        ember.jit(lambda v: v.at[4].set(1.0))(X)


# --- gradients --------------------------------------------------------------------------------------

GRAD_KEYS = [1, (S(None, None, -1), None, 2), (S(1, 3), Ellipsis, S(None, None, 2)), [0, 2, 0], (1, S(None), [0, 2]),
             ([0, 1], S(None), [1, 1]), MASK2, (Ellipsis, [[0, 5], [5, 5]]), ()]


@pytest.mark.parametrize("key", GRAD_KEYS, ids=_key_id)
def test_getitem_gradients(key):
    x = np.random.default_rng(0).standard_normal((4, 5, 6))
    w = np.random.default_rng(1).standard_normal(x[key].shape)
    check_grads(lambda v: jnp.sum(v[key] * w), (x,))


@pytest.mark.parametrize("key", [1, [0, 2], (S(None), [1, 1, 3]), MASK1, (S(None, None, -2), 0)], ids=_key_id)
def test_at_gradients(key):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5))
    u = rng.standard_normal(x[key].shape)
    w = rng.standard_normal(x.shape)
    check_grads(lambda v, y: jnp.sum(v.at[key].add(y * y) * w), (x, u), argnums=(0, 1))
    if not (isinstance(key, tuple) and isinstance(key[1], list)):  # set with repeated indices is ambiguous
        check_grads(lambda v, y: jnp.sum(v.at[key].set(jnp.sin(y)) * w), (x, u), argnums=(0, 1))
    check_grads(lambda v: jnp.sum(v.at[key].get() ** 2), (x,))


def test_gradient_of_traced_indices_accumulates_repeats():
    x = np.arange(5.0)
    g = ember.grad(lambda v, i: jnp.sum(v[i] * np.array([1.0, 2.0, 3.0])))(x, np.array([1, 1, -1]))
    np.testing.assert_allclose(g, [0.0, 3.0, 0.0, 0.0, 3.0])


# --- vmap ---------------------------------------------------------------------------------------------

VMAP_KEYS = [1, S(None, None, -1), (None, 2), (Ellipsis, [0, 1]), ([0, 1], S(None), [1, 2]), (1, S(None), [0, 2]),
             MASK2, [[2, 0]]]


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("key", VMAP_KEYS, ids=_key_id)
def test_vmap_of_getitem(key, axis):
    xs = np.random.default_rng(0).standard_normal((3, 4, 5, 6)).astype(np.float32)
    xs = np.moveaxis(xs, 0, axis)

    def f(v):
        return v[key]

    assert_matches(ember.vmap(f, in_axes=axis)(xs), loop_vmap(f, axis, (xs,)), np.float32)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (1, 0), (None, 1)])
def test_vmap_of_traced_indices_and_at(in_axes):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((3, 4, 5)).astype(np.float32)
    idx = rng.integers(-4, 4, size=(3, 2)).astype(np.int32)
    x_arg = xs if in_axes[0] == 0 else (np.moveaxis(xs, 0, 1) if in_axes[0] == 1 else xs[0])
    i_arg = idx if in_axes[1] == 0 else (idx.T.copy() if in_axes[1] == 1 else idx[0])
    funcs = [lambda v, i: v[i], lambda v, i: v[:, i], lambda v, i: at(v)[i].add(1.0),
             lambda v, i: at(v)[i, 1:3].set(v[i, :2] * 2.0), lambda v, i: jnp.take(v, i, axis=1)]
    for f in funcs:
        got = ember.vmap(f, in_axes=in_axes)(x_arg, i_arg)
        assert_matches(got, loop_vmap(lambda v, i, f=f: f(jnp.asarray(v), i), in_axes, (x_arg, i_arg)), np.float32)


# --- take -----------------------------------------------------------------------------------------------

def _take(spec, idx, axis="none", note=""):
    kw = {} if axis == "none" else {"axis": axis}
    return Case("take", lambda a: jnp.take(a, idx, **kw), lambda a: np.take(a, idx, **kw), (spec,),
                note=note or f"{idx!r} {kw}")


TAKE_CASES = [
    _take(A((5,)), np.array([0, 2, -1])),
    _take(A((3, 4)), np.array([[0, 1], [2, 11]])),
    _take(A((3, 4)), np.array([2, 0, 2]), 0),
    _take(A((3, 4), "i32"), np.array([3, -4]), 1),
    _take(A((2, 3, 4), "f64"), -1, -1),
    _take(A((2, 3, 4)), np.array([[0, 2], [1, 1]]), 1),
    _take(A((2, 3)), 4),
    _take(A((2, 3), "bool"), np.array([1]), 0),
    _take(A((3, 4)), np.array([], np.int32), 1),
    _take(A((3, 4)), np.array(2), 0),
    Case("take", lambda a, i: jnp.take(a, i, axis=1), lambda a, i: np.take(a, i, axis=1),
         (A((3, 5)), A((2,), "i32", "posint")), note="traced indices"),
    Case("take", jnp.take, np.take, (A((2, 3)), A((2, 2), "i32", "posint")), note="traced, flat"),
]
COVERED = covered(TAKE_CASES)


@pytest.mark.parametrize("case", value_params(TAKE_CASES))
def test_take_values(case):
    check_values(case)


@pytest.mark.parametrize("case", grad_params(TAKE_CASES))
def test_take_grads(case):
    check_case_grads(case)


@pytest.mark.parametrize("case, mode", vmap_params(TAKE_CASES))
def test_take_vmap(case, mode):
    check_vmap(case, mode)


def test_take_errors():
    with pytest.raises(IndexError):
        jnp.take(np.ones((2, 3)), np.array([3]), axis=1)
    with pytest.raises(ember.errors.SHAPE_ERRORS, match="take.*axis 2"):
        ember.jit(lambda a: jnp.take(a, np.array([0]), axis=2))(np.ones((2, 3)))


# --- Ellipsis next to every kind of index ---------------------------------------------------------

CUBE = np.arange(64.0, dtype=np.float32).reshape(4, 4, 4)
TRACED = "traced"  # stands for an integer array passed to jit as an argument
_PARTS = {"int": 1, "neg int": -1, "slice": slice(1, None), "rev slice": slice(None, None, -2), "None": None,
          "list": [0, 2], "array": np.array([[0], [3]]), TRACED: TRACED,
          "mask": np.array([True, False, True, True])}
_TRACED_VALUE = np.array([[2, -1]], np.int32)


def _ellipsis_keys():
    keys = []
    for n in (1, 2):
        for names in __import__("itertools").product(_PARTS, repeat=n):
            for pos in range(n + 1):
                keys.append(list(names[:pos]) + ["..."] + list(names[pos:]))
    return keys


def _build(names, traced):
    return tuple(Ellipsis if n == "..." else traced if n == TRACED else _PARTS[n] for n in names)


@pytest.mark.parametrize("names", _ellipsis_keys(), ids=lambda names: ",".join(names))
def test_ellipsis_in_every_position_matches_numpy(names):
    f = ember.jit(lambda x, i: x[_build(names, i)])
    try:
        want = CUBE[_build(names, _TRACED_VALUE)]
    except IndexError as e:  # index arrays that do not broadcast: a ValueError in JAX, as in ember
        assert "broadcast" in str(e)
        with pytest.raises(ValueError, match="broadcast"):
            f(CUBE, _TRACED_VALUE)
        return
    got = f(CUBE, _TRACED_VALUE)
    np.testing.assert_array_equal(got, want)
    assert got.shape == want.shape


# --- traced indices in .at[] updates: reads clamp, writes drop (as in JAX) --------------------------

V4 = np.arange(4.0, dtype=np.float32)
M34 = np.arange(12.0, dtype=np.float32).reshape(3, 4)
W4 = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
_I = np.int32
# (id, fn(m) where m is ember or jax, args, the result JAX 0.10 gives)
AT_CASES = [
    ("argmax+2 set", lambda m: m.jit(lambda v: v.at[m.numpy.argmax(v) + 2].set(-1.0)), (V4,), [0, 1, 2, 3]),
    ("set -1", lambda m: m.jit(lambda v, i: v.at[i].set(-1.0)), (V4, _I(-1)), [0, 1, 2, -1]),
    ("set -5 wraps once, drops", lambda m: m.jit(lambda v, i: v.at[i].set(-1.0)), (V4, _I(-5)), [0, 1, 2, 3]),
    ("set 4", lambda m: m.jit(lambda v, i: v.at[i].set(-1.0)), (V4, _I(4)), [0, 1, 2, 3]),
    ("add 7", lambda m: m.jit(lambda v, i: v.at[i].add(10.0)), (V4, _I(7)), [0, 1, 2, 3]),
    ("add -9", lambda m: m.jit(lambda v, i: v.at[i].add(10.0)), (V4, _I(-9)), [0, 1, 2, 3]),
    ("set array", lambda m: m.jit(lambda v, i: v.at[i].set(-1.0)), (V4, np.array([7, -9, -1, 2, -4, 4], _I)),
     [-1, 1, -1, -1]),
    ("add array", lambda m: m.jit(lambda v, i: v.at[i].add(1.0)), (V4, np.array([7, -1, -1, 0, 4], _I)),
     [1, 1, 2, 5]),
    ("get 7 clamps", lambda m: m.jit(lambda v, i: v.at[i].get()), (V4, _I(7)), 3),
    ("get -7 wraps then clamps", lambda m: m.jit(lambda v, i: v.at[i].get()), (V4, _I(-7)), 0),
    ("getitem", lambda m: m.jit(lambda v, i: v[i]), (V4, np.array([7, -9, -1, 2], _I)), [3, 0, 3, 2]),
    ("2-D row out", lambda m: m.jit(lambda x, i: x.at[i, 1].set(-1.0)), (M34, _I(3)), M34),
    ("2-D row -1", lambda m: m.jit(lambda x, i: x.at[i, 1:].set(-1.0)), (M34, _I(-1)),
     [[0, 1, 2, 3], [4, 5, 6, 7], [8, -1, -1, -1]]),
    ("2-D rows + slice", lambda m: m.jit(lambda x, i: x.at[i, 1:].set(-1.0)), (M34, np.array([0, 5], _I)),
     [[0, -1, -1, -1], [4, 5, 6, 7], [8, 9, 10, 11]]),
    ("2-D row, traced col", lambda m: m.jit(lambda x, i: x.at[..., i].add(1.0)), (M34, np.array([4, -4], _I)),
     M34 + np.array([1, 0, 0, 0])),
    ("grad set duplicates: the winner",
     lambda m: m.jit(m.grad(lambda q, v, w: (m.numpy.asarray(v).at[np.array([1, 1])].set(q) * w).sum())),
     (np.array([5.0, 6.0], np.float32), V4, W4), [0, 2]),
    ("grad set duplicates, operand", lambda m: m.jit(m.grad(lambda v, w: (v.at[np.array([1, 1])].set(5.0) * w).sum())),
     (V4, W4), [1, 0, 3, 4]),
    ("grad set traced duplicates",
     lambda m: m.jit(m.grad(lambda q, v, w, i: (m.numpy.asarray(v).at[i].set(q) * w).sum())),
     (np.array([5.0, 6.0, 7.0], np.float32), V4, W4, np.array([2, 2, 2], _I)), [0, 0, 3]),
    ("grad set out of bounds", lambda m: m.jit(m.grad(lambda q, v, w, i: (m.numpy.asarray(v).at[i].set(q) * w).sum())),
     (np.array([5.0, 6.0], np.float32), V4, W4, np.array([1, 7], _I)), [2, 0]),
    ("grad add out of bounds", lambda m: m.jit(m.grad(lambda q, v, w, i: (m.numpy.asarray(v).at[i].add(q) * w).sum())),
     (np.array([5.0, 6.0], np.float32), V4, W4, np.array([-1, -7], _I)), [4, 0]),
    ("grad of clamped reads is dropped", lambda m: m.jit(m.grad(lambda v, i: v.at[i].get().sum())),
     (V4, np.array([9, -1, -9], _I)), [0, 0, 0, 1]),
]


@pytest.mark.parametrize("fn, args, want", [c[1:] for c in AT_CASES], ids=[c[0] for c in AT_CASES])
def test_traced_indices_in_updates_follow_jax(fn, args, want):
    np.testing.assert_array_equal(fn(ember)(*args), np.asarray(want, np.float32))


@pytest.mark.parametrize("fn, args, want", [c[1:] for c in AT_CASES], ids=[c[0] for c in AT_CASES])
def test_traced_update_table_matches_jax(fn, args, want):
    jax = pytest.importorskip("jax")
    np.testing.assert_array_equal(np.asarray(fn(jax)(*args)), np.asarray(want, np.float32))


def test_traced_update_vmaps_like_a_loop():
    f = ember.jit(lambda v, i: v.at[i].set(-1.0))
    idx = np.array([[1, 5], [-1, -6], [0, 3]], np.int32)
    got = ember.vmap(f, in_axes=(None, 0))(V4, idx)
    np.testing.assert_array_equal(got, np.stack([f(V4, i) for i in idx]))
