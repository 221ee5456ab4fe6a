"""Threefry-2x32 and the key operations on raw key data (uint32[2]), as JAX 0.10 computes them.

JAX's default mode (`jax_threefry_partitionable=True`): element i of a result of shape S is the hash of
the 64-bit counter i (its row-major index) split into its high and low words; `split` keeps both output
words as the new key, `random_bits` xors them (8, 16 and 32 bits, the narrow ones truncated) or joins
them (64 bits). `fold_in` hashes the pair (0, data) with the plain two-word hash. The functions here are
jitted with their shapes and widths static, as JAX's are, so an eager call runs one compiled function.
"""

from __future__ import annotations

import math

import numpy as np

import ember.lax as lax
import ember.numpy as jnp
from ember.api import jit

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA  # Threefry's key-schedule constant
_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)
UINT_DTYPES = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: _U64}


def _rotate_left(x, d, complement):
    return lax.bitwise_or(lax.shift_left(x, d), lax.shift_right_logical(x, complement))


def threefry2x32(k0, k1, x0, x1):
    """The Threefry-2x32 hash (20 rounds, a key injection every 4) of the counter words (x0, x1) under
    the key (k0, k1): two uint32 arrays of the counters' shape.

    A fori_loop over the 5 blocks of 4 rounds, the key schedule and the two sets of rotations (and their
    complements, 32 - r) rotating in its carry as scalars, as JAX lowers it on the CPU: the unrolled 20
    rounds make a graph of ~130 nodes that takes seconds to fuse, where the loop body is ~25."""
    k0 = lax.convert_element_type(k0, _U32)
    k1 = lax.convert_element_type(k1, _U32)
    k2 = lax.bitwise_xor(lax.bitwise_xor(k0, k1), np.uint32(_PARITY))
    rotations = tuple(jnp.asarray(np.uint32(r)) for r in (*_ROTATIONS[0], *_ROTATIONS[1]))
    complements = tuple(jnp.asarray(np.uint32(32 - r)) for r in (*_ROTATIONS[0], *_ROTATIONS[1]))

    def block(i, carry):
        x0, x1, ka, kb, kc, rot, comp = carry
        for j in range(4):
            x0 = x0 + x1
            x1 = lax.bitwise_xor(_rotate_left(x1, rot[j], comp[j]), x0)
        x0 = x0 + ka
        x1 = x1 + kb + lax.convert_element_type(i + 1, _U32)
        # the next block injects the schedule rotated by one and uses the other set of rotations
        return x0, x1, kb, kc, ka, rot[4:] + rot[:4], comp[4:] + comp[:4]

    out = lax.fori_loop(0, 5, block, (x0 + k0, x1 + k1, k1, k2, k0, rotations, complements))
    return out[0], out[1]


def iota_2x32(shape: tuple[int, ...]):
    """The row-major index of each element of `shape` as a 64-bit counter, in two uint32 arrays (high
    words, low words): JAX's `iota_2x32_shape`."""
    size = math.prod(shape)
    if size <= 2**32:
        lo = jnp.arange(size, dtype=_U32).reshape(shape)
        return jnp.zeros(shape, _U32), lo
    i = jnp.arange(size, dtype=_U64).reshape(shape)
    return (lax.convert_element_type(lax.shift_right_logical(i, 32), _U32),
            lax.convert_element_type(i, _U32))


def _hash_counters(key, shape: tuple[int, ...]):
    hi, lo = iota_2x32(shape)
    return threefry2x32(key[0], key[1], hi, lo)


@jit(static_argnums=(1,))
def split(key, shape: tuple[int, ...]):
    """`shape` new raw keys from one: both hash words of each counter."""
    b0, b1 = _hash_counters(key, shape)
    return jnp.stack([b0, b1], axis=-1)


@jit
def fold_in(key, data):
    """The raw key that uint32 `data` folds into `key`: the hash of the pair (0, data)."""
    b0, b1 = threefry2x32(key[0], key[1], np.uint32(0), data)
    return jnp.stack([b0, b1])


@jit(static_argnums=(1, 2))
def random_bits(key, bit_width: int, shape: tuple[int, ...]):
    """Uniform unsigned integers of `bit_width` bits (8, 16, 32 or 64) and shape `shape`."""
    b0, b1 = _hash_counters(key, shape)
    if bit_width == 64:
        hi = lax.convert_element_type(b0, _U64)
        return lax.bitwise_or(lax.shift_left(hi, 32), lax.convert_element_type(b1, _U64))
    bits = lax.bitwise_xor(b0, b1)
    return bits if bit_width == 32 else lax.convert_element_type(bits, UINT_DTYPES[bit_width])


def seed_words(seed_value: int, bits: int) -> np.ndarray:
    """The raw key of a concrete integer seed of `bits` bits: (high word, low word) of its two's
    complement, the high word 0 for seeds of 32 bits or fewer."""
    v = int(seed_value) & (2**64 - 1 if bits == 64 else 0xFFFFFFFF)  # narrow signed ints sign-extend
    return np.array([v >> 32, v & 0xFFFFFFFF], _U32)


@jit
def seed_traced(seed):
    """The raw key of a traced integer seed (what `seed_words` computes for a concrete one)."""
    dt = np.dtype(seed.dtype)
    if dt.itemsize == 8:
        wide = lax.convert_element_type(seed, _U64)
        hi = lax.convert_element_type(lax.shift_right_logical(wide, 32), _U32)
        lo = lax.convert_element_type(wide, _U32)
    else:
        narrow = seed if dt.kind == "u" or dt.itemsize == 4 else lax.convert_element_type(seed, np.int32)
        lo = lax.convert_element_type(narrow, _U32)
        hi = jnp.zeros((), _U32)
    return jnp.stack([hi, lo])
