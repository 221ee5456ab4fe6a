"""A pure-NumPy Threefry-2x32 and JAX's partitionable key operations, written from the Threefry paper
(Salmon et al. 2011, 20 rounds) and JAX's layout of counters, as an independent check of ember.random.

JAX 0.10's default (`jax_threefry_partitionable=True`): element i of a result of shape S is hashed from
the 64-bit counter i (row-major index), its high and low words as the two Threefry inputs; `split` keeps
both output words as the new key, `bits` xors them (32 bits) or joins them (64 bits). `fold_in` hashes the
pair (0, data) with the unsplit hash, the same in either mode.
"""

from __future__ import annotations

import math

import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def _rotl(x: np.ndarray, d: int) -> np.ndarray:
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def threefry2x32(k0, k1, x0, x1) -> tuple[np.ndarray, np.ndarray]:
    """The Threefry-2x32 block cipher of the counter words (x0, x1) under key (k0, k1): 20 rounds, a key
    injection every 4."""
    k0, k1 = np.uint32(k0), np.uint32(k1)
    x0, x1 = np.asarray(x0, np.uint32), np.asarray(x1, np.uint32)
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    with np.errstate(over="ignore"):
        x0, x1 = x0 + ks[0], x1 + ks[1]
        for block in range(5):
            for r in _ROTATIONS[block % 2]:
                x0 = x0 + x1
                x1 = _rotl(x1, r) ^ x0
            x0 = x0 + ks[(block + 1) % 3]
            x1 = x1 + ks[(block + 2) % 3] + np.uint32(block + 1)
    return x0, x1


def seed(value: int) -> np.ndarray:
    """The raw key of an integer seed: its 64-bit two's complement as (high word, low word)."""
    v = int(value) & (2**64 - 1)
    return np.array([v >> 32, v & 0xFFFFFFFF], np.uint32)


def counters(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The row-major index of each element of `shape` as a 64-bit counter: (high words, low words)."""
    i = np.arange(math.prod(shape), dtype=np.uint64).reshape(shape)
    return (i >> np.uint64(32)).astype(np.uint32), (i & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def split(key: np.ndarray, shape: tuple[int, ...] = (2,)) -> np.ndarray:
    """`shape` new raw keys: both hash words of each counter."""
    b0, b1 = threefry2x32(key[0], key[1], *counters(shape))
    return np.stack([b0, b1], axis=-1)


def fold_in(key: np.ndarray, data: int) -> np.ndarray:
    """The key that `data` (taken as uint32) folds into `key`: the hash of the pair (0, data)."""
    b0, b1 = threefry2x32(key[0], key[1], np.uint32(0), np.uint32(int(data) & 0xFFFFFFFF))
    return np.array([b0, b1], np.uint32)


def random_bits(key: np.ndarray, bit_width: int, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform bits of `bit_width` for each element of `shape`."""
    b0, b1 = threefry2x32(key[0], key[1], *counters(shape))
    if bit_width == 64:
        return (b0.astype(np.uint64) << np.uint64(32)) | b1.astype(np.uint64)
    return (b0 ^ b1).astype(f"uint{bit_width}")


def uniform(key: np.ndarray, shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    """Floats in [0, 1): the top mantissa-many random bits under the exponent of 1.0, minus 1."""
    dtype = np.dtype(dtype)
    nbits, nmant = dtype.itemsize * 8, np.finfo(dtype).nmant
    bits = random_bits(key, nbits, shape)
    utype = bits.dtype.type
    one = np.array(1.0, dtype).view(bits.dtype)
    return ((bits >> utype(nbits - nmant)) | one).view(dtype) - dtype.type(1.0)
