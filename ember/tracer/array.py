"""`Array`: what Ember returns outside a trace, eagerly and from `jit`. It behaves like a `jax.Array`
(immutable, `.at[...]` updates, JAX promotion in its operators, `.block_until_ready()`, `.device`)
and is a NumPy array underneath: a subclass of `np.ndarray`, so `np.asarray` of it is zero-copy,
the native entry reads it at full speed and Matplotlib or Dask take it as they take an ndarray.

A subclass rather than a wrapper, by measurement (docs/architecture.md, "Eager arrays"): a wrapper
pays an attribute fetch and a conversion on every jit call and every NumPy call, a subclass only a
`view` where an ndarray becomes an Array. NumPy's own functions (`np.sin(a)`, `np.mean(a)`) take
its data as a plain ndarray and give plain ndarrays, as they do for a jax.Array; its operators and
methods are ember.numpy's (installed by ember/numpy/_methods.py, as for traced values).
"""

from __future__ import annotations

import numpy as np


class Device:
    """The device an Array lives on (the host CPU), with the fields of JAX's device objects."""

    platform = "cpu"
    device_kind = "cpu"
    id = 0
    process_index = 0

    def __repr__(self) -> str:
        return "CpuDevice(id=0)"


CPU = Device()

_IMMUTABLE = ("{what} is not supported: ember arrays are immutable, as JAX arrays are. Instead of "
              "``x[idx] = y``, use ``x = x.at[idx].set(y)`` (or another .at[] method: add, get); to work "
              "on a mutable copy, use ``np.array(x)``")


def _plain(x):
    """`x` with every Array in it (at the top, or in a list or tuple) seen as a plain ndarray."""
    if type(x) is Array:
        return x.view(np.ndarray)
    if isinstance(x, (list, tuple)) and any(type(y) is Array or isinstance(y, (list, tuple)) for y in x):
        return type(x)(_plain(y) for y in x) if type(x) in (list, tuple) else x
    return x


def _mutating(name: str):
    """An ndarray method that changes the array in place, refused."""
    def method(self, *args, **kwargs):
        raise TypeError(_IMMUTABLE.format(what=f"Array.{name}(), which changes the array in place,"))

    method.__name__ = name
    return method


class Array(np.ndarray):
    """An immutable n-d array: what ember.numpy and jit return (see the module's docstring)."""

    __slots__ = ()  # no per-instance dict: an Array costs what an ndarray costs to make and free
    weak_type = False  # eager values are strongly typed, as their NumPy dtype says

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's ufuncs work on the data and give plain ndarrays (writing into an Array raises)."""
        out = kwargs.get("out")
        if out is not None and any(type(o) is Array for o in out):
            raise TypeError(_IMMUTABLE.format(what=f"np.{ufunc.__name__}(..., out=<ember Array>)"))
        return getattr(ufunc, method)(*(_plain(x) for x in inputs), **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions work on the data and give plain ndarrays, as for a jax.Array."""
        return func(*(_plain(x) for x in args), **{k: _plain(v) for k, v in kwargs.items()})

    def __setitem__(self, key, value):
        raise TypeError(_IMMUTABLE.format(what=f"item assignment on an {type(self).__name__}"))

    def block_until_ready(self) -> Array:
        """Itself: CPU results are ready when returned."""
        return self

    def copy_to_host_async(self) -> None:
        """Nothing to do: the data is in host memory."""

    @property
    def device(self) -> Device:
        return CPU

    def devices(self) -> set[Device]:
        return {CPU}

    @property
    def is_fully_addressable(self) -> bool:
        return True

    def __reduce__(self):
        """Pickled as its data, unpickled as an Array."""
        return (_rebuild, (self.view(np.ndarray).copy(),))


for _name in ("fill", "put", "resize", "itemset", "setfield", "partition"):
    setattr(Array, _name, _mutating(_name))


def _rebuild(data: np.ndarray) -> Array:
    return data.view(Array)


def as_array(x: np.ndarray) -> Array:
    """`x` (a plain ndarray) as an Array, sharing its data."""
    return x.view(Array)


def plain(x):
    """An Array's data as a plain ndarray (a view); anything else unchanged."""
    return x.view(np.ndarray) if type(x) is Array else x
