"""JAX's dtype functions: `result_type` and `promote_types` on JAX's promotion lattice (the one every
ember.numpy operation uses), and NumPy's `can_cast`, `issubdtype`, `iinfo` and `finfo`."""

from __future__ import annotations

import numpy as np

from ember.numpy._core import dtype_weak
from ember.tracer import dtypes

_PY_TYPES = {bool: True, int: 0, float: 0.0}  # a Python scalar type stands for a (weak) value of it

# the abstract scalar types issubdtype takes (jnp.floating, ...): NumPy's, as jax.numpy's are
generic, number, inexact, floating, complexfloating = np.generic, np.number, np.inexact, np.floating, np.complexfloating
integer, signedinteger, unsignedinteger = np.integer, np.signedinteger, np.unsignedinteger

iinfo = np.iinfo
finfo = np.finfo
can_cast = np.can_cast
issubdtype = np.issubdtype


def _pair(x) -> tuple[np.dtype, bool]:
    """(dtype, weak) of an array, a scalar, a dtype or a Python scalar type (weak, as JAX takes it)."""
    if isinstance(x, type) and x in _PY_TYPES:
        return dtypes.scalar_dtype(_PY_TYPES[x])
    if isinstance(x, (np.dtype, str)) or (isinstance(x, type) and issubclass(x, np.generic)):
        return dtypes.canonicalize(x), False
    if hasattr(x, "dtype") and isinstance(x.dtype, np.dtype) and not hasattr(x, "shape"):
        return dtypes.canonicalize(x.dtype), False  # a scalar type of ember.numpy (ember.numpy.float32)
    return dtype_weak(x)


def result_type(*args) -> np.dtype:
    """The dtype JAX's promotion gives `args` (arrays, scalars, dtypes; Python scalars and the types int,
    float and bool are weak), as jax.numpy.result_type."""
    if not args:
        raise ValueError("at least one array or dtype is required")
    return dtypes.result_type(*(_pair(a) for a in args))[0]


def promote_types(a, b) -> np.dtype:
    """The dtype two dtypes promote to on JAX's lattice (both strong; not canonicalized to 32 bits with
    64-bit mode off: int32 with uint32 is int64), as jax.numpy.promote_types."""
    return dtypes.promote_types(dtypes.canonicalize(a), dtypes.canonicalize(b))
