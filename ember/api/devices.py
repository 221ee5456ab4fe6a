"""JAX's device functions for code ported as it is: Ember's eager arrays live in host memory (the CPU
backends) or are CuPy arrays (the cuda backend, which takes and returns them), so `device_put` makes
Arrays, `device_get` NumPy arrays, and `block_until_ready` waits for nothing."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.tracer.array import CPU, Array, Device
from ember.tree import tree_map


def devices(backend: str | None = None) -> list[Device]:
    """The devices Ember's arrays live on: the host CPU, as jax.devices("cpu") lists it."""
    if backend not in (None, "cpu"):
        raise RuntimeError(f"Ember's arrays live on the CPU; jax.devices({backend!r}) has no Ember counterpart "
                           "(the cuda backend takes CuPy arrays: ember.jit(f, backend='cuda'))")
    return [CPU]


def local_devices(process_index: int | None = None, backend: str | None = None) -> list[Device]:
    """devices(), as jax.local_devices."""
    return devices(backend)


def device_count(backend: str | None = None) -> int:
    return len(devices(backend))


def local_device_count(backend: str | None = None) -> int:
    return len(devices(backend))


def _put(x):
    import ember.numpy as jnp

    return jnp.asarray(x) if isinstance(x, (np.ndarray, np.generic, bool, int, float)) else x


def device_put(x: Any, device: Device | None = None, *, donate: bool = False, may_alias: bool | None = None) -> Any:
    """`x` (a pytree) with its NumPy arrays and scalars as Arrays (copies: NumPy's owner may write its
    arrays), as jax.device_put; Arrays are immutable and stay as they are."""
    if device is not None and not isinstance(device, Device):
        raise TypeError(f"device_put: device must be one of ember.devices(), got {device!r}")
    return tree_map(_put, x)


def device_get(x: Any) -> Any:
    """`x` (a pytree) with its Arrays as NumPy arrays (their data, not copied), as jax.device_get."""
    return tree_map(lambda a: np.asarray(a) if isinstance(a, Array) else a, x)


def block_until_ready(x: Any) -> Any:
    """`x` itself: CPU results are ready when returned (CuPy ones are synchronized on return too)."""
    return x
