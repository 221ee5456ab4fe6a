"""PRNG keys: raw keys (uint32[..., 2], what `PRNGKey` returns) and typed key arrays (`key`), whose
elements are whole keys, as JAX's. Every random function takes either form and returns keys in the form
it was given.

A typed key array is a pytree with one leaf, its uint32[..., 2] key data, so jit, vmap, grad and the tree
functions pass it through; its shape is the data's leading dimensions and its dtype prints as key<fry>.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

import ember.numpy as jnp
import ember.tracer.dtypes as dtypes
from ember.errors import ArgumentError, ArgumentValueError, user_location
from ember.random import _prng
from ember.tracer import Tracer
from ember.tree import register_pytree_node

IMPL_NAME = "threefry2x32"
# for annotations: arrays (NumPy or traced), keys of either form, shapes and dtypes as jax.random takes them
Array = Any
ArrayLike = Any
KeyLike = Any
DTypeLike = Any
Shape = Sequence[int] | int
_U32 = np.dtype(np.uint32)


class KeyDType:
    """The dtype of a typed key array: one Threefry-2x32 key (two uint32 words) per element."""

    name = "key<fry>"
    itemsize = 8

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        return isinstance(other, KeyDType) or other == self.name or other == IMPL_NAME

    def __hash__(self) -> int:
        return hash(KeyDType)


KEY_DTYPE = KeyDType()


class KeyArray:
    """An array of PRNG keys (`key(seed)`, `split(key)`): indexes, reshapes and iterates over keys,
    never over the words inside them. `key_data` returns the words."""

    __slots__ = ("_data",)
    __hash__ = None  # type: ignore[assignment]
    __array_priority__ = 100

    def __init__(self, data):
        _check_key_data(data)
        self._data = data

    @classmethod
    def _wrap(cls, data) -> KeyArray:
        """A key array around `data` unchecked (pytree unflattening gets placeholders as well as arrays)."""
        out = object.__new__(cls)
        out._data = data
        return out

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape[:-1])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> KeyDType:
        return KEY_DTYPE

    @property
    def itemsize(self) -> int:
        return KEY_DTYPE.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * KEY_DTYPE.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (KeyArray._wrap(self._data[i]) for i in range(self.shape[0]))

    def __getitem__(self, index) -> KeyArray:
        index = index if isinstance(index, tuple) else (index,)
        if any(i is Ellipsis for i in index):  # the ellipsis must not reach the words' axis
            index = (*index, slice(None))
        return KeyArray._wrap(self._data[index])

    def reshape(self, *shape, order: str = "C") -> KeyArray:
        """The keys in a new shape (row-major)."""
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = tuple(shape[0])
        if order != "C":
            raise ValueError(f"key arrays reshape in row-major order only; got order={order!r}")
        return KeyArray._wrap(jnp.reshape(self._data, (*shape, 2)))

    def ravel(self) -> KeyArray:
        return self.reshape(-1)

    flatten = ravel

    def transpose(self, *axes) -> KeyArray:
        """The keys with their axes permuted (reversed by default)."""
        if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
            axes = tuple(axes[0])
        nd = self.ndim
        perm = tuple(range(nd))[::-1] if not axes else tuple(a % nd for a in axes)
        return KeyArray._wrap(jnp.transpose(self._data, (*perm, nd)))

    @property
    def T(self) -> KeyArray:
        return self.transpose()

    def squeeze(self, axis=None) -> KeyArray:
        """The keys without the unit axes named (all of them by default)."""
        nd = self.ndim
        if axis is None:
            axis = tuple(i for i, d in enumerate(self.shape) if d == 1)
        axis = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
        return KeyArray._wrap(jnp.squeeze(self._data, tuple(a % nd for a in axis)) if axis else self._data)

    def copy(self) -> KeyArray:
        """The same keys in new memory (a traced value is a value already)."""
        return KeyArray._wrap(self._data.copy() if isinstance(self._data, np.ndarray) else self._data)

    def block_until_ready(self) -> KeyArray:
        return self

    def __eq__(self, other):
        if not isinstance(other, KeyArray):
            return NotImplemented
        return jnp.all(self._data == other._data, axis=-1)

    def __ne__(self, other):
        if not isinstance(other, KeyArray):
            return NotImplemented
        return jnp.any(self._data != other._data, axis=-1)

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("an array of PRNG keys cannot be converted to a NumPy array; use "
                        "ember.random.key_data(keys) to get the underlying uint32 words")

    def __repr__(self) -> str:
        return f"Array({self.shape}, dtype={KEY_DTYPE.name}) overlaying:\n{self._data}"


register_pytree_node(KeyArray, lambda k: ((k._data,), None), lambda _, children: KeyArray._wrap(children[0]))


def _check_key_data(data) -> None:
    """Raise JAX's TypeError unless `data` is uint32 with a trailing axis of 2 (the words of keys)."""
    if not all(hasattr(data, a) for a in ("ndim", "shape", "dtype")):
        raise ArgumentError(f"invalid PRNG key data: expected an array with ndim, shape and dtype; got {data!r}",
                            user_location())
    if data.ndim < 1 or tuple(data.shape[-1:]) != (2,):
        raise ArgumentError("invalid PRNG key data: expected key_data.shape to end with (2,) (a threefry2x32 "
                            f"key is two uint32 words); got shape={tuple(data.shape)}", user_location())
    if np.dtype(data.dtype) != _U32:
        raise ArgumentError(f"invalid PRNG key data: expected key_data.dtype = uint32; got dtype={data.dtype}",
                            user_location())


def check_key(name: str, key: KeyLike, *, allow_batched: bool = False) -> tuple:
    """(the uint32[..., 2] data of `key`, whether it was typed), or JAX's error for a key that is not one
    (TypeError) or is a batch where one key is wanted (ValueError)."""
    if isinstance(key, KeyArray):
        data, typed = key._data, True
    elif isinstance(key, (np.ndarray, np.generic, numbers.Number, Tracer)) or hasattr(key, "__array__"):
        if isinstance(key, numbers.Number):
            key = np.asarray(key)
        _check_key_data(key)
        data, typed = key, False
    else:
        raise ArgumentError(f"{name}: unexpected PRNG key type {type(key)}", user_location())
    if not allow_batched and len(data.shape) > 1:
        raise ArgumentValueError(f"{name} accepts a single key, but was given a key array of shape "
                                 f"{tuple(data.shape[:-1])} != (). Use ember.vmap for batching.", user_location())
    return data, typed


def return_keys(typed: bool, data: Array) -> Array:
    """Keys in the form the caller gave them: a typed key array or raw data."""
    return KeyArray._wrap(data) if typed else data


def _check_impl(impl) -> None:
    if impl is None or impl == IMPL_NAME or isinstance(impl, KeyDType):
        return
    if isinstance(impl, str):
        raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: "{IMPL_NAME}"? '
                         "(Ember implements threefry2x32, JAX's default, only)")
    raise TypeError(f"unrecognized type {type(impl)} for specifying PRNG implementation.")


def _seed_data(ctor: str, seed):
    """The raw key of an integer seed, as JAX makes it: the seed's 64-bit two's complement as (high word,
    low word); a Python int takes the default int's width, so with 32-bit defaults only its low word
    counts, as in JAX without x64. Explicit 64-bit NumPy integers keep their 64 bits (JAX without x64
    truncates them; Ember keeps 64-bit inputs)."""
    if isinstance(seed, KeyArray):
        raise ArgumentError(f"{ctor} accepts a scalar seed, but was given a PRNG key.", user_location())
    if isinstance(seed, Tracer):
        _check_seed(ctor, seed.shape, np.dtype(seed.dtype), seed)
        return _prng.seed_traced(seed)
    if isinstance(seed, (bool, np.bool_)):
        return _prng.seed_words(int(seed), 32)
    if isinstance(seed, int):
        if not -(2**63) <= seed < 2**63:
            raise OverflowError("Python int too large to convert to C long")
        return _prng.seed_words(seed, dtypes.int_.itemsize * 8)
    arr = np.asarray(seed)
    _check_seed(ctor, arr.shape, arr.dtype, seed)
    return _prng.seed_words(int(arr), arr.dtype.itemsize * 8)


def _check_seed(ctor: str, shape, dtype: np.dtype, seed) -> None:
    if tuple(shape):
        raise ArgumentError(f"{ctor} accepts a scalar seed, but was given an array of shape {tuple(shape)} != (). "
                            "Use ember.vmap for batching", user_location())
    if dtype.kind not in "iub":
        raise ArgumentError(f"PRNG key seed must be an integer; got {seed!r}", user_location())


def key(seed: int | ArrayLike, *, impl: str | None = None, dtype: DTypeLike | None = None) -> KeyArray:
    """A typed PRNG key (a 0-d key array) from an integer seed, as jax.random.key."""
    if impl is not None and dtype is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to ember.random.key")
    _check_impl(impl if dtype is None else dtype)
    return KeyArray._wrap(_seed_data("key", seed))


def PRNGKey(seed: int | ArrayLike, *, impl: str | None = None) -> Array:
    """A raw PRNG key (uint32[2]) from an integer seed, as jax.random.PRNGKey."""
    _check_impl(impl)
    return _seed_data("PRNGKey", seed)


def key_data(keys: KeyLike) -> Array:
    """The uint32[..., 2] words of typed (or raw) keys."""
    data, _ = check_key("key_data", keys, allow_batched=True)
    return data


def wrap_key_data(key_bits_array: ArrayLike, *, impl: str | None = None,
                  dtype: DTypeLike | None = None) -> KeyArray:
    """The typed key array whose words are `key_bits_array` (uint32[..., 2])."""
    if impl is not None and dtype is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to ember.random.wrap_key_data")
    _check_impl(impl if dtype is None else dtype)
    if isinstance(key_bits_array, (list, tuple, numbers.Number)):
        key_bits_array = np.asarray(key_bits_array)
    return KeyArray(key_bits_array)


def key_impl(keys: KeyLike) -> str:
    """The name of the keys' PRNG implementation: 'threefry2x32'."""
    check_key("key_impl", keys, allow_batched=True)
    return IMPL_NAME


def key_dtype(impl: str | None = None) -> KeyDType:
    """The dtype of typed keys (key<fry>): Ember has one implementation, threefry2x32."""
    _check_impl(impl)
    return KEY_DTYPE


def clone(key: KeyLike) -> Array:
    """`key` itself: keys are immutable values here (JAX's clone matters for key-reuse checking only)."""
    return key


def split(key: KeyLike, num: int | Sequence[int] = 2) -> Array:
    """`num` new keys (an int, or a shape) from one, with a leading axis (axes) of that shape."""
    data, typed = check_key("split", key)
    if hasattr(num, "__len__"):
        shape = tuple(num)
    else:
        shape = (num,)
    if not all(isinstance(d, numbers.Integral) and d >= 0 for d in shape):
        raise ArgumentError(f"split: num must be a nonnegative int or a tuple of them, got {num!r}", user_location())
    return return_keys(typed, _prng.split(data, tuple(int(d) for d in shape)))


def fold_in(key: KeyLike, data: int | ArrayLike) -> Array:
    """The key that the integer `data` (taken as uint32) folds into `key`."""
    words, typed = check_key("fold_in", key)
    if np.ndim(data):
        raise ArgumentError("fold_in accepts a scalar, but was given an array of shape "
                            f"{np.shape(data)} != (). Use ember.vmap for batching.", user_location())
    if isinstance(data, int):
        data = np.uint32(data)  # OverflowError outside [0, 2**32), as JAX
    return return_keys(typed, _prng.fold_in(words, jnp.asarray(data).astype(_U32)))
