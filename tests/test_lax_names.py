"""`ember.lax`'s layout, slicing, reduction and contraction names give jax.lax's results (values, shapes
and dtypes: nothing is promoted), eagerly and under jit, with jax.lax's gradients at the same points and
its exception classes for the same mistakes."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.lax as lax

try:
    import jax
    import jax.lax as jlax
except ImportError:  # the comparisons with JAX skip; the tests that state their own answers still run
    jax = jlax = None
needs_jax = pytest.mark.skipif(jax is None, reason="compares with JAX")

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3)).astype(np.float32)
Y = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((2, 3, 4)).astype(np.float32)
C = rng.standard_normal((2, 4, 5)).astype(np.float32)
V = np.arange(10, dtype=np.float32)
I8 = np.arange(6, dtype=np.int8).reshape(2, 3)

# name -> a call of the library `l` (ember.lax or jax.lax)
CASES = {
    "dot_general": lambda l: l.dot_general(B, C, (((2,), (1,)), ((0,), (0,)))),
    "dot_general_mixed": lambda l: l.dot_general(X, np.ones((3, 2), np.int32), (((1,), (0,)), ((), ()))),
    "dot": lambda l: l.dot(X, Y),
    "dot_vec": lambda l: l.dot(V, V),
    "dot_mv": lambda l: l.dot(Y.T, X[0]),
    "dot_pref": lambda l: l.dot(I8, I8.T, preferred_element_type=np.float32),
    "batch_matmul": lambda l: l.batch_matmul(B, C),
    "broadcast": lambda l: l.broadcast(X, (4, 1)),
    "broadcast_in_dim": lambda l: l.broadcast_in_dim(X[0], (2, 3, 5), (1,)),
    "broadcast_to_rank": lambda l: l.broadcast_to_rank(X, 4),
    "broadcast_to_rank_same": lambda l: l.broadcast_to_rank(X, 1),
    "broadcasted_iota": lambda l: l.broadcasted_iota(np.int32, (2, 3), 1),
    "iota": lambda l: l.iota(np.float32, 5),
    "reshape": lambda l: l.reshape(X, (3, 2)),
    "reshape_dims": lambda l: l.reshape(X, (3, 2), (1, 0)),
    "squeeze": lambda l: l.squeeze(X.reshape(1, 2, 1, 3), (0, -2)),
    "expand_dims": lambda l: l.expand_dims(X, (0, -1)),
    "transpose": lambda l: l.transpose(B, (2, 0, 1)),
    "rev": lambda l: l.rev(B, (0, 2)),
    "concatenate": lambda l: l.concatenate([X, X * 2, X[:1]], 0),
    "pad": lambda l: l.pad(X, np.float32(-1), ((1, 0, 1), (0, 2, 0))),
    "pad_negative": lambda l: l.pad(V, 0.0, ((-1, 2, 1),)),
    "pad_negative_high": lambda l: l.pad(X, 0.0, ((0, -1, 0), (-2, 1, 2))),
    "slice": lambda l: l.slice(B, (0, 1, 0), (2, 3, 4), (1, 1, 2)),
    "slice_in_dim": lambda l: l.slice_in_dim(B, -3, None, 2, axis=2),
    "index_in_dim": lambda l: l.index_in_dim(B, -1, 1, False),
    "index_in_dim_keep": lambda l: l.index_in_dim(B, 0, 2),
    "split": lambda l: tuple(l.split(B, (1, 3), 2)),
    "dynamic_slice": lambda l: l.dynamic_slice(B, (1, 2, 1), (1, 1, 3)),
    "dynamic_slice_clamped": lambda l: l.dynamic_slice(V, (8,), (4,)),
    "dynamic_slice_negative": lambda l: l.dynamic_slice(V, (-3,), (2,)),
    "dynamic_slice_very_negative": lambda l: l.dynamic_slice(V, (-30,), (2,)),
    "dynamic_slice_array_starts": lambda l: l.dynamic_slice(X, np.array([1, 5]), (1, 2)),
    "dynamic_update_slice": lambda l: l.dynamic_update_slice(V, np.ones(3, np.float32), (9,)),
    "dynamic_update_slice_2d": lambda l: l.dynamic_update_slice(B, np.zeros((1, 2, 2), np.float32), (1, -1, 1)),
    "dynamic_slice_in_dim": lambda l: l.dynamic_slice_in_dim(B, 1, 2, 2),
    "dynamic_update_slice_in_dim": lambda l: l.dynamic_update_slice_in_dim(X, np.ones((2, 1), np.float32), 1, 1),
    "dynamic_index_in_dim": lambda l: l.dynamic_index_in_dim(B, 1, 2, False),
    "dynamic_index_in_dim_keep": lambda l: l.dynamic_index_in_dim(B, -1, 1),
    "dynamic_update_index_in_dim": lambda l: l.dynamic_update_index_in_dim(X, np.ones(2, np.float32), 1, 1),
    "dynamic_update_index_in_dim_keep": lambda l: l.dynamic_update_index_in_dim(X, np.ones((1, 3), np.float32), 0, 0),
    "full": lambda l: l.full((2, 3), 1.5),
    "full_int": lambda l: l.full((2,), 7),
    "full_dtype": lambda l: l.full((2,), 1, np.float16),
    "full_like": lambda l: l.full_like(X, 2),
    "full_like_shape": lambda l: l.full_like(X, 2.7, np.int32, (4,)),
    "clamp": lambda l: l.clamp(np.float32(-0.5), X, np.float32(0.5)),
    "clamp_arrays": lambda l: l.clamp(X * 0, X, np.abs(X) * 0 + 0.3),
    "clamp_int": lambda l: l.clamp(1, np.arange(4, dtype=np.int32), 2),
    "reduce_sum": lambda l: l.reduce_sum(B, (0, 2)),
    "reduce_sum_int8": lambda l: l.reduce_sum(I8, (0, 1)),
    "reduce_max": lambda l: l.reduce_max(B, (1,)),
    "reduce_min": lambda l: l.reduce_min(B, (0, 1, 2)),
    "reduce_prod": lambda l: l.reduce_prod(X, (1,)),
    "reduce_and": lambda l: l.reduce_and(X > 0, (1,)),
    "reduce_or": lambda l: l.reduce_or(X > 1, (0,)),
    "argmax": lambda l: l.argmax(B, 1, np.int32),
    "argmin": lambda l: l.argmin(X, 0, np.int8),
    "collapse": lambda l: l.collapse(B, 1),
    "collapse_range": lambda l: l.collapse(B, 0, 2),
    "collapse_negative": lambda l: l.collapse(B, -2, -1),
}


def _parts(x) -> tuple:
    return tuple(np.asarray(p) for p in (x if isinstance(x, tuple) else (x,)))


def assert_same(got, want):
    for g, w in zip(_parts(got), _parts(want), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def jax_results() -> dict:
    """Every case computed by jax.lax, in one jax.jit (JAX's eager dispatch compiles each op apart)."""
    names = list(CASES)
    with jax.enable_x64(False):  # (another test of this process may have switched JAX to 64 bits)
        return dict(zip(names, jax.jit(lambda: tuple(CASES[n](jlax) for n in names))(), strict=True))


@needs_jax
@pytest.mark.parametrize("name", list(CASES))
def test_matches_jax_lax(name, jax_results):
    assert_same(CASES[name](lax), jax_results[name])


def test_every_case_traces_and_runs_optimized_to_the_eager_result():
    names = list(CASES)
    compiled = ember.jit(lambda: tuple(CASES[n](lax) for n in names), backend="numpy")()
    for name, got in zip(names, compiled, strict=True):
        assert_same(got, CASES[name](lax))


def test_dynamic_slices_clamp_their_starts():
    np.testing.assert_array_equal(lax.dynamic_slice(V, (8,), (4,)), [6, 7, 8, 9])
    np.testing.assert_array_equal(lax.dynamic_slice(V, (-3,), (2,)), [7, 8])
    np.testing.assert_array_equal(lax.dynamic_update_slice(V[:4], np.array([-1, -2], np.float32), (3,)),
                                  [0, 1, -1, -2])


@needs_jax
def test_traced_starts_match_jax():
    update = np.full((1, 2, 2), 9.0, np.float32)

    def body(l):
        return lambda b, s: (l.dynamic_slice(b, (s[0], s[1], s[2]), (1, 1, 3)), l.dynamic_slice(b, s, (2, 1, 1)),
                             l.dynamic_update_slice(b, update, s))

    mine, theirs = ember.jit(body(lax)), jax.jit(body(jlax))
    for starts in [(1, 2, 1), (-1, -5, 3), (5, 5, 5)]:  # inside, negative, clamped
        s = np.array(starts, np.int32)
        assert_same(mine(B, s), theirs(B, s))


@needs_jax
def test_gradients_and_vmap_match_jax():
    def take(l):
        return lambda v, i: (l.dynamic_slice(v, (i,), (3,)) ** 2).sum()

    def put(l):
        return lambda v, u, i: (l.dynamic_update_slice(v, u, (i,)) ** 2).sum()

    def row(l):
        return lambda v, i: l.dynamic_index_in_dim(v, i, 0, False)

    def padded(l):
        return lambda x: (l.pad(x, np.float32(3.0), ((-1, 2, 1),)) ** 2).sum()

    for i in (np.int32(8), np.int32(-2)):
        assert_same(ember.grad(take(lax))(V, i), jax.jit(jax.grad(take(jlax)))(V, i))
    u = np.ones(2, np.float32)
    assert_same(ember.grad(put(lax), (0, 1))(V, u, np.int32(3)),
                jax.jit(jax.grad(put(jlax), (0, 1)))(V, u, np.int32(3)))
    idx = np.array([0, 3, -1, 12], np.int32)
    assert_same(ember.vmap(row(lax), (None, 0))(V, idx), jax.jit(jax.vmap(row(jlax), (None, 0)))(V, idx))
    assert_same(ember.grad(padded(lax))(V[:4]), jax.jit(jax.grad(padded(jlax)))(V[:4]))


@needs_jax
def test_clamp_gradient_at_the_bounds_is_laxs():
    """At a tie neither x nor the bound gets the gradient (jnp.clip splits it; lax.clamp does not)."""
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0], np.float32)
    lo, hi = np.zeros(5, np.float32), np.ones(5, np.float32)
    weights = np.arange(1, 6, dtype=np.float32)

    def loss(l):
        return lambda lo, x, hi: (l.clamp(lo, x, hi) * weights).sum()

    assert_same(ember.grad(loss(lax), (0, 1, 2))(lo, x, hi), jax.jit(jax.grad(loss(jlax), (0, 1, 2)))(lo, x, hi))


BAD = {
    "concatenate_dtypes": lambda l: l.concatenate([X, X.astype(np.int32)], 0),
    "concatenate_ranks": lambda l: l.concatenate([X, V[:3]], 0),
    "concatenate_negative_dimension": lambda l: l.concatenate([X, X], -1),
    "pad_python_int_on_floats": lambda l: l.pad(X, 0, ((1, 1, 0), (0, 0, 0))),
    "clamp_dtypes": lambda l: l.clamp(np.int32(0), X, 1.0),
    "clamp_shapes": lambda l: l.clamp(np.zeros(3, np.float32), X, 1.0),
    "dynamic_slice_float_start": lambda l: l.dynamic_slice(X, (1.0, 2), (1, 2)),
    "dynamic_slice_too_big": lambda l: l.dynamic_slice(X, (0, 0), (3, 2)),
    "dynamic_update_slice_dtypes": lambda l: l.dynamic_update_slice(V, np.ones(2, np.int32), (4,)),
    "dynamic_update_slice_rank": lambda l: l.dynamic_update_slice(V, np.ones((1, 2), np.float32), (4,)),
    "index_in_dim_out_of_range": lambda l: l.index_in_dim(X, 5, 0),
    "slice_out_of_range": lambda l: l.slice_in_dim(X, 0, 5, axis=0),
    "reduce_negative_axis": lambda l: l.reduce_sum(X, (-1,)),
    "reduce_repeated_axis": lambda l: l.reduce_max(X, (0, 0)),
    "reduce_sum_bool": lambda l: l.reduce_sum(X > 0, (0,)),
    "reduce_and_float": lambda l: l.reduce_and(X, (1,)),
    "argmax_negative_axis": lambda l: l.argmax(X, -1, np.int32),
    "squeeze_not_one": lambda l: l.squeeze(X, (0,)),
    "squeeze_repeated": lambda l: l.squeeze(np.ones((1, 3)), (0, 0)),
    "expand_dims_repeated": lambda l: l.expand_dims(X, (0, 0)),
    "reshape_bad_dimensions": lambda l: l.reshape(X, (3, 2), (0, 0)),
    "transpose_not_a_permutation": lambda l: l.transpose(X, (0, 0)),
    "rev_negative": lambda l: l.rev(X, (-1,)),
    "broadcast_in_dim_sizes": lambda l: l.broadcast_in_dim(X, (4, 3), (0, 1)),
    "split_sizes": lambda l: l.split(X, (1, 1), 1),
    "collapse_range": lambda l: l.collapse(X, 1, 0),
    "iota_negative": lambda l: l.iota(np.int32, -1),
    "full_of_an_array": lambda l: l.full((2,), np.ones(2)),
    "dot_needs_dimension_numbers": lambda l: l.dot(B, Y),
    "dot_shapes": lambda l: l.dot(X, X),
    "batch_matmul_ranks": lambda l: l.batch_matmul(B, Y),
    "batch_matmul_batch": lambda l: l.batch_matmul(B, np.ones((3, 4, 5), np.float32)),
}


@needs_jax
@pytest.mark.parametrize("name", list(BAD))
def test_mistakes_raise_jaxs_exception_class(name):
    with pytest.raises(Exception) as theirs:
        BAD[name](jlax)
    builtin = next(c for c in type(theirs.value).__mro__ if c.__module__ == "builtins")
    with pytest.raises(builtin):
        BAD[name](lax)


def test_mistakes_name_the_users_line():
    with pytest.raises(TypeError, match=r"same dtypes.*test_lax_names.py:\d+"):
        lax.concatenate([X, X.astype(np.int32)], 0)
    with pytest.raises(ValueError, match=r"duplicate value in 'axes'.*test_lax_names.py:\d+"):
        lax.reduce_max(X, (0, 0))


def test_structured_ops_not_written_yet_still_say_so():
    with pytest.raises(AttributeError, match="not implemented"):
        lax.associative_scan  # noqa: B018
