"""Keys: seeds as JAX makes them, typed key arrays as JAX's (shape, dtype, indexing, iteration,
reshaping, pytree), raw and typed keys interchangeable, and keys through jit and vmap."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.random as random
from tests.random import reference


@pytest.fixture(autouse=True)
def numpy_backend(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "numpy")


@pytest.mark.parametrize("seed, words", [
    (0, (0, 0)), (42, (0, 42)), (-1, (0, 2**32 - 1)),  # a Python int takes the default int's 32 bits, as JAX
    (2**40 + 3, (0, 3)), (True, (0, 1)), (np.int32(-7), (0, 2**32 - 7)), (np.int8(-2), (0, 2**32 - 2)),
    (np.uint32(2**32 - 1), (0, 2**32 - 1)), (np.uint8(200), (0, 200)),
    (np.int64(2**40 + 3), (256, 3)), (np.int64(-5), (2**32 - 1, 2**32 - 5)),  # 64-bit NumPy ints keep 64 bits
    (np.uint64(2**64 - 1), (2**32 - 1, 2**32 - 1)),
])
def test_seeds_as_jax(seed, words):
    key = random.PRNGKey(seed)
    assert key.dtype == np.uint32 and key.shape == (2,) and tuple(key.tolist()) == words
    assert (random.key_data(random.key(seed)) == key).all()
    if isinstance(seed, np.int64):
        assert (key == reference.seed(int(seed))).all()


def test_seed_errors():
    with pytest.raises(OverflowError):
        random.PRNGKey(2**64)
    with pytest.raises(TypeError, match="seed must be an integer"):
        random.PRNGKey(1.5)
    with pytest.raises(TypeError, match=r"scalar seed, but was given an array of shape \(2,\)"):
        random.key(np.arange(2))
    with pytest.raises(TypeError, match="given a PRNG key"):
        random.key(random.key(0))
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        random.key(0, impl="rbg")


def test_traced_seeds_make_the_same_keys():
    seeds = np.array([0, 5, -3, 2**31 - 1], np.int32)
    looped = np.stack([random.PRNGKey(s) for s in seeds])
    assert (ember.vmap(random.PRNGKey)(seeds) == looped).all()
    assert (ember.jit(random.PRNGKey)(np.int64(-5)) == random.PRNGKey(np.int64(-5))).all()
    assert (ember.jit(random.PRNGKey)(np.uint8(200)) == random.PRNGKey(np.uint8(200))).all()


def test_a_typed_key_array_is_an_array_of_keys():
    key = random.key(3)
    assert key.shape == () and key.ndim == 0 and key.size == 1 and str(key.dtype) == "key<fry>"
    assert "key<fry>" in repr(key) and random.key_impl(key) == "threefry2x32" and random.key_dtype() == key.dtype
    keys = random.split(key, (2, 3))
    assert isinstance(keys, random.KeyArray) and keys.shape == (2, 3) and len(keys) == 2
    data = random.key_data(keys)
    assert data.shape == (2, 3, 2) and data.dtype == np.uint32
    assert (random.key_data(keys[1, 2]) == data[1, 2]).all() and keys[1, 2].shape == ()
    assert (random.key_data(keys[..., 0]) == data[:, 0]).all() and keys[..., 0].shape == (2,)
    assert keys[:, 1:].shape == (2, 2) and keys.T.shape == (3, 2) and keys.reshape(6).shape == (6,)
    assert (random.key_data(keys.ravel()) == data.reshape(6, 2)).all()
    assert (random.key_data(keys.T) == data.transpose(1, 0, 2)).all()
    assert keys[:1].squeeze().shape == (3,) and keys.reshape(3, 1, 2).squeeze(1).shape == (3, 2)
    rows = list(keys)
    assert len(rows) == 2 and all(r.shape == (3,) for r in rows)
    assert (keys == random.wrap_key_data(data)).all() and not (keys != keys).any()
    with pytest.raises(TypeError, match="key_data"):
        np.asarray(key)
    with pytest.raises(TypeError):
        len(key)
    with pytest.raises(TypeError):
        iter(key)
    with pytest.raises(TypeError):
        bool(key)


def test_typed_and_raw_keys_give_the_same_numbers_and_keep_their_form():
    raw, typed = random.PRNGKey(7), random.key(7)
    assert (random.key_data(typed) == raw).all()
    split_raw, split_typed = random.split(raw, 3), random.split(typed, 3)
    assert isinstance(split_raw, np.ndarray) and isinstance(split_typed, random.KeyArray)
    assert (random.key_data(split_typed) == split_raw).all()
    assert (random.fold_in(raw, 9) == random.key_data(random.fold_in(typed, 9))).all()
    assert (random.bits(raw, (4,)) == random.bits(typed, (4,))).all()
    assert (random.bits(split_raw[1], (4,)) == random.bits(split_typed[1], (4,))).all()


def test_split_matches_the_reference():
    key = random.PRNGKey(2024)
    assert (random.split(key, (2, 2)) == reference.split(reference.seed(2024), (2, 2))).all()
    assert random.split(key, 0).shape == (0, 2)
    assert (random.fold_in(key, 2**32 - 1) == reference.fold_in(reference.seed(2024), 2**32 - 1)).all()
    with pytest.raises(OverflowError):
        random.fold_in(key, -1)


def test_typed_keys_are_pytrees_through_jit_and_vmap():
    keys = random.split(random.key(1), 4)
    assert len(ember.tree.leaves(keys)) == 1
    out = ember.jit(lambda k: random.split(k, 2))(keys[0])
    assert isinstance(out, random.KeyArray) and out.shape == (2,)
    assert (random.key_data(out) == random.key_data(random.split(keys[0]))).all()
    folded = ember.vmap(lambda k: random.fold_in(k, 3))(keys)
    assert isinstance(folded, random.KeyArray) and folded.shape == (4,)
    assert all((random.key_data(folded[i]) == random.key_data(random.fold_in(keys[i], 3))).all() for i in range(4))
    inner = ember.jit(lambda k: random.key_data(k[1:]))(keys)
    assert (inner == random.key_data(keys)[1:]).all()
