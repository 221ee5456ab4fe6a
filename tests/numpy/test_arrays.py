"""Array structure functions (ember/numpy/_arrays.py) against NumPy, and against live JAX where JAX
differs (pad's integer modes, take_along_axis's fill, repeat's total_repeat_length): values eagerly,
a representative set under jit (both backends; the suite checks every compiled call against the
oracle), gradients against jax.grad in float64, vmap against a loop, and the errors."""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jjnp
import numpy as np

import ember
import ember.numpy as jnp
from ember.errors import ArgumentError, ArgumentValueError
from tests.helpers import loop_vmap, raises_naming
from tests.numpy.cases import assert_matches, expected_dtype

RNG = np.random.default_rng(0)
M34 = RNG.standard_normal((3, 4)).astype(np.float32)
M234 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
V3 = RNG.standard_normal(3).astype(np.float32)
V5 = RNG.standard_normal(5).astype(np.float32)
I34 = RNG.integers(-5, 6, (3, 4)).astype(np.int32)
IDX = RNG.integers(0, 4, (3, 2)).astype(np.int32)
B5 = np.array([True, False, False, True, True])
VEC = RNG.standard_normal((4, 3)).astype(np.float32)
VEC2 = RNG.standard_normal((4, 2)).astype(np.float32)

# (label, ember call, NumPy call): each is called with the module (ember.numpy or numpy) as `m`.
CASES = [
    ("tri", lambda m: m.tri(3, 4, 1, dtype=np.float32)),
    ("tri_int", lambda m: m.tri(4, k=-1, dtype=np.int32)),
    ("tril", lambda m: m.tril(M34)), ("tril_k", lambda m: m.tril(M234, -1)), ("triu", lambda m: m.triu(M34, 2)),
    ("triu_int", lambda m: m.triu(I34, -1)),
    ("diag_of_2d", lambda m: m.diag(M34, 1)), ("diag_of_2d_neg", lambda m: m.diag(M34, -2)),
    ("diag_of_1d", lambda m: m.diag(V3)), ("diag_of_1d_k", lambda m: m.diag(V3, 2)),
    ("diag_of_1d_negk", lambda m: m.diag(V3, -1)),
    ("diagonal", lambda m: m.diagonal(M234)), ("diagonal_axes", lambda m: m.diagonal(M234, 1, -1, 0)),
    ("diagonal_neg", lambda m: m.diagonal(M234, -1, 2, 1)), ("diagonal_far", lambda m: m.diagonal(M34, 5)),
    ("diagflat", lambda m: m.diagflat(M34[:2, :2], -1)),
    ("trace", lambda m: m.trace(M34)), ("trace_offset", lambda m: m.trace(M234, 1, 0, 2)),
    ("trace_int", lambda m: m.trace(I34)),
    ("kron", lambda m: m.kron(M34[:2, :3], V3)), ("kron_int", lambda m: m.kron(I34[:2], I34[:1, :2])),
    ("cross3", lambda m: m.cross(VEC, VEC[::-1])), ("cross2", lambda m: m.cross(VEC2, VEC2[::-1])),
    ("cross23", lambda m: m.cross(VEC2, VEC)), ("cross32", lambda m: m.cross(VEC, VEC2)),
    ("cross_axes", lambda m: m.cross(VEC.T, VEC, axisa=0, axisc=0)),
    ("cross_axis", lambda m: m.cross(VEC.T, VEC.T[::-1], axis=0)),
    ("meshgrid", lambda m: m.meshgrid(V3, V5)), ("meshgrid_ij", lambda m: m.meshgrid(V3, V5, V3, indexing="ij")),
    ("meshgrid_sparse", lambda m: m.meshgrid(V3, V5, sparse=True)),
    ("indices", lambda m: m.indices((2, 3))), ("indices_sparse", lambda m: m.indices((2, 3, 2), sparse=True)),
    ("tile", lambda m: m.tile(M34, 2)), ("tile_more", lambda m: m.tile(V3, (2, 1, 2))),
    ("tile_fewer", lambda m: m.tile(M234, (2, 1))),
    ("repeat", lambda m: m.repeat(M34, 2)), ("repeat_axis", lambda m: m.repeat(M34, 3, axis=-1)),
    ("repeat_array", lambda m: m.repeat(M34, np.array([1, 0, 2]), axis=0)),
    ("roll", lambda m: m.roll(M34, 2)), ("roll_axis", lambda m: m.roll(M34, -1, axis=1)),
    ("roll_tuple", lambda m: m.roll(M234, (1, -5), axis=(0, 2))),
    ("rot90", lambda m: m.rot90(M34)), ("rot90_2", lambda m: m.rot90(M234, 2, (1, 2))),
    ("rot90_3", lambda m: m.rot90(M234, -1, (2, 0))),
    ("take_along_axis", lambda m: m.take_along_axis(M34, IDX, 1)),
    ("take_along_axis_0", lambda m: m.take_along_axis(M34, np.array([[2, 0, 1, 1]]), 0)),
    ("take_along_axis_neg", lambda m: m.take_along_axis(M34, -1 - IDX, -1)),
    ("take_along_axis_none", lambda m: m.take_along_axis(M34, np.array([11, 0, 5]), None)),
    ("diff", lambda m: m.diff(M34)), ("diff_2_axis0", lambda m: m.diff(M234, 2, axis=0)),
    ("diff_n0", lambda m: m.diff(M34, 0)), ("diff_bool", lambda m: m.diff(B5)),
    ("diff_int", lambda m: m.diff(I34, axis=0)),
    ("diff_prepend", lambda m: m.diff(M34, prepend=np.float32(0.5), append=M34[:, :2])),
    ("ediff1d", lambda m: m.ediff1d(M34)), ("ediff1d_ends", lambda m: m.ediff1d(V5, to_end=np.array([1, 2]),
                                                                                 to_begin=-3.0)),
    ("gradient", lambda m: m.gradient(V5)), ("gradient_2d", lambda m: m.gradient(M34)),
    ("gradient_h", lambda m: m.gradient(M34, 0.5, axis=1)),
    ("gradient_x", lambda m: m.gradient(V5, np.array([0.0, 0.5, 1.5, 1.75, 3.0], np.float32))),
    ("gradient_2h", lambda m: m.gradient(M34, 2.0, np.array([0, 1, 3, 4], np.float32))),
]

# read by test_math's every-function check: each is called in CASES, PAD_CASES or JAX_CASES below
COVERED = {"tri", "tril", "triu", "diag", "diagonal", "diagflat", "trace", "kron", "cross", "meshgrid", "indices",
           "tile", "repeat", "roll", "rot90", "take_along_axis", "put_along_axis", "diff", "ediff1d", "gradient", "pad"}

PAD_CASES = [
    ((2, 1), {}), (((1, 2), (0, 3)), {"constant_values": 1.5}),
    (((1, 2), (3, 1)), {"constant_values": ((1, 2), (3, 4))}), (1, {"constant_values": (5, 6)}),
    ((2, 3), {"mode": "edge"}), (((4, 9), (1, 0)), {"mode": "wrap"}),
    (((1, 2), (3, 2)), {"mode": "reflect"}), (((5, 7), (6, 2)), {"mode": "reflect"}),
    (((5, 7), (6, 2)), {"mode": "reflect", "reflect_type": "odd"}),
    (((5, 7), (6, 2)), {"mode": "symmetric"}), (((5, 4), (6, 2)), {"mode": "symmetric", "reflect_type": "odd"}),
    (((2, 3), (1, 2)), {"mode": "linear_ramp", "end_values": ((1, -2), (3, 0))}),
    ((2, 3), {"mode": "maximum"}), ((2, 3), {"mode": "minimum", "stat_length": 2}),
    (((2, 3), (1, 1)), {"mode": "mean", "stat_length": ((1, 2), (9, 3))}),
    ((2, 1), {"mode": "median"}), (((1, 2), (2, 1)), {"mode": "median", "stat_length": ((2, 3), (4, 1))}),
]


def _as_numpy(out):
    return [np.asarray(o) for o in out] if isinstance(out, (list, tuple)) else out


def test_values_match_numpy():
    for label, call in CASES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2 deprecates cross of 2-vectors
            want = _as_numpy(call(np))
        got = call(jnp)
        ins = [np.float32] if label not in ("tri_int", "triu_int", "trace_int", "kron_int", "diff_bool",
                                            "diff_int", "indices", "indices_sparse") else [np.int32]
        if isinstance(want, list):
            assert_matches(list(got), want, [expected_dtype(w.dtype, ins) for w in want], what=label)
        else:
            assert_matches(got, want, expected_dtype(np.asarray(want).dtype, ins), what=label)


def test_pad_matches_numpy_and_jax():
    """Every mode on a float and an int array: NumPy's values, JAX's dtypes (from jax.eval_shape, which
    compiles nothing) and JAX's values where they differ (the integer ramp and mean)."""
    x_int = I34 * 3
    with jax.enable_x64(False):
        for width, kw in PAD_CASES:
            for x in (M34, x_int):
                got = jnp.pad(x, width, **kw)
                ref = jax.eval_shape(lambda x, width=width, kw=kw: jjnp.pad(x, width, **kw), x)
                if x.dtype == np.int32 and kw.get("mode") in ("linear_ramp", "mean", "median"):
                    want = np.asarray(jjnp.pad(x, width, **kw))
                else:
                    want = np.pad(x, width, **kw)
                assert_matches(got, want, ref.dtype, what=f"pad {width} {kw} {x.dtype}")
        for mode in ("constant", "edge", "wrap", "reflect", "empty"):
            assert_matches(jnp.pad(np.float32(3), 2, mode), np.float32(3), np.float32, what=f"0-d pad {mode}")
        assert_matches(jnp.pad(M34, 1, "empty"), np.pad(M34, 1), np.float32, what="empty")


BAD = np.array([[0, 4, -5, 2]] * 3, np.int32)  # out of bounds both ways: JAX fills (NaN, INT_MIN)
# (label, call) with the module as m, where JAX differs from NumPy or NumPy has no such argument
JAX_CASES = [
    *((f"take {kw}", lambda m, x=x, kw=kw: m.take_along_axis(x, BAD, 1, **kw))
      for x, kw in ((M34, {}), (I34, {}), (M34, {"mode": "clip"}), (M34, {"fill_value": -1.0}))),
    *((f"repeat {r} {t}", lambda m, r=r, t=t: m.repeat(M34, r, axis=0, total_repeat_length=t))
      for r, t in ((np.array([1, 0, 2]), 5), (np.array([2, 1, 1]), 2), (2, 7), (np.array([0, 0, 0]), 2))),
    ("take empty axis", lambda m: m.take_along_axis(np.zeros((3, 0), np.float32), IDX, 1)),
    ("take promise_in_bounds", lambda m: m.take_along_axis(M34, IDX, 1, mode="promise_in_bounds")),
    ("gradient int", lambda m: m.gradient(I34)), ("tri", lambda m: m.tri(3)),
    ("trace int8", lambda m: m.trace(I34.astype(np.int8))),
    ("diff uint8", lambda m: m.diff(np.array([1, 5, 2], np.uint8))),
]


@functools.cache
def _jax_refs() -> list:
    with jax.enable_x64(False):  # one compiled JAX function for all the references
        return jax.jit(lambda: [call(jjnp) for _, call in JAX_CASES])()


def test_where_jax_differs_from_numpy():
    refs = _jax_refs()
    for (label, call), ref in zip(JAX_CASES, refs):
        if isinstance(ref, list):
            assert_matches(list(call(jnp)), [np.asarray(r) for r in ref], [r.dtype for r in ref], what=label)
        else:
            assert_matches(call(jnp), np.asarray(ref), ref.dtype, what=label)
    put = jnp.put_along_axis(M34, IDX, 7.0, axis=1, inplace=False)
    want = M34.copy()
    np.put_along_axis(want, IDX, 7.0, axis=1)
    assert_matches(put, want, np.float32, what="put_along_axis")
    dropped = jnp.put_along_axis(M34, np.array([[9], [0], [-1]]), np.array([[1.0], [2.0], [3.0]], np.float32), 1,
                                 inplace=False)
    want = M34.copy()
    want[1, 0], want[2, 3] = 2.0, 3.0  # out of bounds dropped, negative wrapped, as JAX
    assert_matches(dropped, want, np.float32, what="put_along_axis out of bounds")


def test_weak_types_survive():
    """A weakly typed operand (an int array plus a Python float) stays weak through the structure
    functions, so a float16 array then decides the dtype, as in JAX."""
    def f(xi, h):
        w = xi + 0.5
        return (jnp.tril(w) + h, jnp.pad(w, 1)[1:-1, 1:-1] + h, jnp.roll(w, 1) + h, jnp.diagonal(w)[0] + h[0, 0])

    h = M34.astype(np.float16)
    with jax.enable_x64(False):
        want = jax.jit(lambda xi, h: (jjnp.tril(xi + 0.5) + h, jjnp.pad(xi + 0.5, 1)[1:-1, 1:-1] + h,
                                      jjnp.roll(xi + 0.5, 1) + h, jjnp.diagonal(xi + 0.5)[0] + h[0, 0]))(I34, h)
    got = ember.jit(f)(I34, h)
    for g, w in zip(got, want):
        assert_matches(g, np.asarray(w), w.dtype)


def _structure(x, idx):
    """A representative mix compiled once per backend (the suite checks it against the oracle)."""
    return (jnp.tril(x, -1), jnp.diagonal(x, 1), jnp.trace(x), jnp.roll(x, 3, axis=1), jnp.rot90(x),
            jnp.tile(x, (1, 2)), jnp.repeat(x, 2, axis=0), jnp.take_along_axis(x, idx, 1),
            jnp.diff(x, 2), jnp.pad(x, ((1, 2), (3, 1)), mode="reflect"), jnp.pad(x, 2, mode="wrap"),
            jnp.pad(x, 1, mode="mean"), jnp.gradient(x, axis=0), jnp.kron(x[:2, :2], x[:1]),
            jnp.put_along_axis(x, idx, 0.0, 1, inplace=False), jnp.diag(x[0], -1))


def test_structure_under_jit():
    with np.errstate(all="ignore"):
        want = _structure(M34, IDX)
        got = ember.jit(_structure)(M34, IDX)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, np.asarray(w), w.dtype, what=f"output {i}")


def test_traced_roll_shift_and_repeat_counts():
    want_rep = np.repeat(M34, [3, 0, 2], axis=0)
    for x64 in (False, True):  # the index arithmetic is in the default int of either mode
        with ember.enable_x64(x64):
            f = ember.jit(lambda x, s, r: (jnp.roll(x, s, axis=1), jnp.repeat(x, r, axis=0, total_repeat_length=6)))
            roll, rep = f(M34, np.int32(-3), np.array([3, 0, 2], np.int32))
        assert_matches(roll, np.roll(M34, -3, axis=1), np.float32)
        assert_matches(rep, np.concatenate([want_rep, want_rep[-1:]]), np.float32)


GRAD_X = np.random.default_rng(5).standard_normal((3, 4))


def _loss(m, x):
    """Differentiable uses, each weighted so that no gradient can hide in another's."""
    idx = np.array([[2, 0, 0, 3], [1, 1, 3, 0], [0, 2, 2, 1]], np.int32)
    w = np.arange(1.0, 67.0).reshape(6, 11) / 10
    terms = (m.trace(x, 1), m.sum(m.diff(x, 2) * w[:3, :2]), m.sum(m.pad(x, ((2, 1), (3, 4)), mode="reflect") * w),
             m.sum(m.pad(x, ((2, 1), (3, 0)), mode="symmetric", reflect_type="odd") * w[:, :7]),
             m.sum(m.roll(x, (1, -2), (0, 1)) * w[:3, :4]), m.sum(m.take_along_axis(x, idx, 1) * w[:3, 2:6]),
             m.sum(m.pad(x, ((2, 1), (1, 2)), mode="maximum") * w[:, :7]),
             m.sum(m.gradient(x, axis=1) * w[:3, 1:5]), m.sum(m.tril(x) ** 2 * w[:3, :4]),
             m.sum(m.pad(x, ((1, 1), (2, 1)), mode="median") * w[:5, :7]))
    return sum(t * (i + 1) for i, t in enumerate(terms))


@functools.cache
def _jax_grad() -> np.ndarray:
    with jax.enable_x64(True):
        return np.asarray(jax.jit(jax.grad(lambda x: _loss(jjnp, x)))(GRAD_X))


def test_grads_match_jax():
    assert_matches(ember.grad(lambda x: _loss(jnp, x))(GRAD_X), _jax_grad(), np.float64)


def test_vmap_matches_a_loop():
    def f(x, idx):
        return jnp.trace(x) + jnp.sum(jnp.take_along_axis(x, idx, 1) * jnp.roll(x, 1, 0)[:, :2]) + jnp.sum(
            jnp.pad(x, 1, "edge") ** 2) + jnp.sum(jnp.diagonal(x, -1))

    xs = RNG.standard_normal((4, 3, 4)).astype(np.float32)
    idxs = RNG.integers(0, 4, (4, 3, 2)).astype(np.int32)
    got = ember.vmap(f)(xs, idxs)
    want = loop_vmap(f, (0, 0), (xs, idxs))
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_bad_input_names_the_users_line():
    here = "test_arrays.py"
    for exc, call, words in (
            (ArgumentValueError, lambda: jnp.tril(V3), ("tril", "2-dimensional")),
            (ArgumentValueError, lambda: jnp.diagonal(M34, 0, 1, 1), ("diagonal", "same")),
            (ArgumentValueError, lambda: jnp.cross(M34, M34), ("cross", "2 or 3")),
            (ArgumentValueError, lambda: jnp.pad(M34, -1), ("negative",)),
            (ArgumentValueError, lambda: jnp.pad(M34, ((1, 2, 3),)), ("pad_width", "shape")),
            (ArgumentError, lambda: jnp.pad(M34, 1.5), ("pad_width", "integral")),
            (ArgumentValueError, lambda: jnp.pad(M34, 1, "edge", constant_values=1), ("edge", "constant_values")),
            (ArgumentValueError, lambda: jnp.put_along_axis(M34, IDX, 1.0, 1), ("inplace=False",)),
            (ArgumentValueError, lambda: jnp.take_along_axis(M34, IDX[0], 1), ("same number",)),
            (ArgumentError, lambda: ember.jit(lambda x, r: jnp.repeat(x, r))(M34, np.int32(2)),
             ("total_repeat_length",)),
            (ArgumentValueError, lambda: jnp.gradient(M34[:1]), ("at least 2",))):
        raises_naming(exc, call, words=words, location=here)


def test_methods():
    x = jnp.asarray(M234)
    got = ember.jit(lambda x: (x.trace(1, 1, 2), x.diagonal(0, 0, 2), x.repeat(2, axis=1)))(x)
    for g, w in zip(got, (M234.trace(1, 1, 2), M234.diagonal(0, 0, 2), M234.repeat(2, axis=1))):
        assert_matches(g, w, np.float32)
    assert_matches(x.trace(), M234.trace(), np.float32)


REPLAYED = (("tril", lambda m, x, i: m.tril(x, 1)), ("pad", lambda m, x, i: m.pad(x, 2, "reflect")),
            ("roll", lambda m, x, i: m.roll(x, 1)), ("take", lambda m, x, i: m.take_along_axis(x, i, 1)),
            ("diff", lambda m, x, i: m.diff(x, axis=0)), ("diag", lambda m, x, i: m.diag(x[0], 1)))


def test_eager_replay_follows_new_values():
    """Repeated eager calls of one signature replay a recorded graph (ember/numpy/_eager.py): they must
    follow each call's values (the recorded graph holds iotas, which have no operands)."""
    rng = np.random.default_rng(7)
    for _ in range(4):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        idx = rng.integers(0, 4, (3, 2))
        for label, call in REPLAYED:
            assert_matches(call(jnp, x, idx), call(np, x, idx), np.float32, what=label)


def _pad_with(vector, pad_width, iaxis, kwargs):
    """NumPy's documented example of a padding function (a value at both ends of each vector)."""
    value = kwargs.get("padder", 10)
    vector = vector.at[:pad_width[0]].set(value)
    return vector.at[vector.shape[0] - pad_width[1]:].set(value)


def test_pad_with_a_callable_mode_as_jax():
    """A callable mode pads with zeros, then replaces each vector along each axis by the function's
    result, as jnp.pad: values eagerly and under jit, and a gradient through the function."""
    a = np.arange(6.0).reshape(2, 3)
    for width, kw in ((2, {}), (((1, 0), (0, 2)), {"padder": 100.0})):
        want = np.asarray(jjnp.pad(a, width, _pad_with, **kw))
        np.testing.assert_array_equal(jnp.pad(a, width, _pad_with, **kw), want)
        np.testing.assert_array_equal(ember.jit(lambda x, w=width, k=kw: jnp.pad(x, w, _pad_with, **k))(a), want)
    double = lambda v, w, i, k: v * 2.0  # noqa: E731
    got = ember.grad(lambda x: jnp.sum(jnp.pad(x, 1, double) ** 2))(a)
    np.testing.assert_allclose(got, jax.grad(lambda x: jjnp.sum(jjnp.pad(x, 1, double) ** 2))(a), rtol=1e-12)
