"""jax.numpy's dtype functions: result_type and promote_types on JAX's lattice (against JAX, in both
64-bit modes), and NumPy's can_cast, issubdtype, iinfo and finfo."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp

COVERED = {"result_type", "promote_types", "can_cast", "issubdtype"}

ARGS = [(np.float32, 1.0), (np.int8, 2.5), (np.int32, np.uint32), (np.int64, np.uint64), (np.float16, np.int8),
        (bool, int), (int, float), (np.bool_, 2), ("float32", "int32"), (np.uint8, np.int8),
        (np.ones(2, np.int16), 3), (np.float64(1.0), np.float32)]


def _bits(a) -> int:
    """The width of an explicitly typed argument (0 for Python scalars and their types: weak)."""
    if (isinstance(a, type) and a in (bool, int, float)) or type(a) in (bool, int, float):
        return 0
    return 8 * (a.dtype if isinstance(a, (np.ndarray, np.generic)) else np.dtype(a)).itemsize


@pytest.mark.parametrize("x64", [False, True])
def test_result_type_and_promote_types_are_jaxs(x64):
    """jnp.result_type canonicalizes to 32 bits with 64-bit mode off; Ember's promotion keeps 64-bit
    joins then (tests/test_jax_conventions.py), so those cases are compared in 64-bit mode only."""
    with jax.enable_x64(x64), ember.enable_x64(x64):
        for args in ARGS:
            if not x64 and (any(_bits(a) == 64 for a in args) or enp.result_type(*args).itemsize == 8):
                continue  # 64-bit mode off: explicit 64-bit types and joins at int64 stay 64-bit (documented)
            assert enp.result_type(*args) == jnp.result_type(*args), args
        pairs = [(np.int8, np.uint8), (np.float16, np.int16), (np.bool_, np.float32)]
        for a, b in pairs + ([(np.int32, np.uint32)] if x64 else []):
            assert enp.promote_types(a, b) == jnp.promote_types(a, b), (a, b)
        x = enp.ones(3, enp.int8)
        assert (x * 2.5).dtype == enp.result_type(x, 2.5)  # the operators' promotion is result_type's


def test_numpy_dtype_functions():
    assert enp.can_cast(np.int8, np.int32) and not enp.can_cast(np.float64, np.float32)
    assert enp.issubdtype(np.float32, np.floating) and not enp.issubdtype(np.int32, np.floating)
    x = enp.ones(3, enp.int8)  # the abstract types, as JAX code writes them
    assert enp.issubdtype(x.dtype, enp.integer) and enp.issubdtype(x.dtype, enp.signedinteger)
    assert not enp.issubdtype(x.dtype, enp.inexact) and enp.issubdtype(enp.float32, enp.floating)
    assert all(getattr(enp, n) is getattr(jnp, n) for n in ("generic", "number", "inexact", "floating", "integer",
                                                             "signedinteger", "unsignedinteger", "complexfloating"))
    assert enp.finfo(np.float32).eps == np.finfo(np.float32).eps and enp.iinfo(np.int8).max == 127
    with pytest.raises(ValueError):
        enp.result_type()
