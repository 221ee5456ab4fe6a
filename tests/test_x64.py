"""64-bit mode (`jax_enable_x64`): every default JAX switches, against a table recorded from JAX 0.10.2
(x64 off and on), eagerly and under jit; the switch, its names, its context manager, and the jit cache
keyed on it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp

# (expression, dtype with x64 off, with x64 on), recorded from jax.numpy 0.10.2; "ERR X" is an exception
JAX_TABLE = [
    ('jnp.array(1.0)', 'float32', 'float64'),
    ('jnp.array(1)', 'int32', 'int64'),
    ('jnp.array(True)', 'bool', 'bool'),
    ('jnp.asarray([1.0, 2.0])', 'float32', 'float64'),
    ('jnp.asarray([1, 2])', 'int32', 'int64'),
    ('jnp.zeros(2)', 'float32', 'float64'),
    ('jnp.ones(2)', 'float32', 'float64'),
    ('jnp.empty(2)', 'float32', 'float64'),
    ('jnp.full(2, 1.5)', 'float32', 'float64'),
    ('jnp.full(2, 3)', 'int32', 'int64'),
    ('jnp.eye(2)', 'float32', 'float64'),
    ('jnp.identity(2)', 'float32', 'float64'),
    ('jnp.arange(3)', 'int32', 'int64'),
    ('jnp.arange(3.0)', 'float32', 'float64'),
    ('jnp.arange(0, 1, 0.5)', 'float32', 'float64'),
    ('jnp.linspace(0, 1, 3)', 'float32', 'float64'),
    ('jnp.zeros_like(np.ones(2, np.int8), dtype=float)', 'float32', 'float64'),
    ('jnp.sin(2.0)', 'float32', 'float64'),
    ('jnp.sqrt(4)', 'float32', 'float64'),
    ('jnp.exp(np.int32(1))', 'float32', 'float32'),
    ('jnp.sqrt(np.ones(2, np.int32))', 'float32', 'float32'),
    ('jnp.sqrt(np.ones(2, np.int8))', 'float32', 'float32'),
    ('jnp.true_divide(np.ones(2, np.int32), np.ones(2, np.int32))', 'float32', 'float32'),
    ('jnp.true_divide(np.ones(2, np.int8), np.ones(2, np.int8))', 'float32', 'float32'),
    ('jnp.multiply(np.ones(2, np.int8), 2.5)', 'float32', 'float64'),
    ('jnp.add(np.ones(2, np.int32), 1)', 'int32', 'int32'),
    ('jnp.add(np.ones(2, np.float32), 1.0)', 'float32', 'float32'),
    ('jnp.add(np.ones(2, np.uint8), 1)', 'uint8', 'uint8'),
    ('jnp.add(np.ones(2, np.bool_), 1)', 'int32', 'int64'),
    ('jnp.add(np.ones(2, np.bool_), 1.0)', 'float32', 'float64'),
    ('jnp.sum(np.ones(3, np.bool_))', 'int32', 'int64'),
    ('jnp.sum(np.ones(3, np.int8))', 'int32', 'int64'),
    ('jnp.sum(np.ones(3, np.int32))', 'int32', 'int64'),
    ('jnp.sum(np.ones(3, np.uint8))', 'uint32', 'uint64'),
    ('jnp.sum(np.ones(3, np.uint32))', 'uint32', 'uint64'),
    ('jnp.prod(np.ones(3, np.int16))', 'int32', 'int64'),
    ('jnp.mean(np.ones(3, np.int32))', 'float32', 'float32'),
    ('jnp.mean(np.ones(3, np.bool_))', 'float32', 'float32'),
    ('jnp.var(np.ones(3, np.int32))', 'float32', 'float32'),
    ('jnp.mean(np.ones(3, np.float16))', 'float16', 'float16'),
    ('jnp.argmax(np.ones(3))', 'int32', 'int64'),
    ('jnp.argmin(np.ones(3))', 'int32', 'int64'),
    ('jnp.where(np.ones(3) > 0, 1, 0)', 'int32', 'int64'),
    ('jnp.where(np.ones(3) > 0, 1.0, 0.0)', 'float32', 'float64'),
    ('jnp.round(np.ones(2, np.int32))', 'int32', 'int32'),
    ('jnp.floor_divide(np.ones(2, np.int32), 2)', 'int32', 'int32'),
    ('jnp.power(np.ones(2, np.int32), 2.0)', 'float32', 'float64'),
    ('jnp.abs(-1)', 'int32', 'int64'),
    ('jnp.maximum(1, 2.0)', 'float32', 'float64'),
    ('jnp.linalg.norm(np.ones(2, np.int32))', 'float32', 'float32'),
    ('jnp.dot(np.ones(2, np.int8), np.ones(2, np.int8))', 'int8', 'int8'),
    ('jnp.matmul(np.ones((2, 2), np.bool_), np.ones((2, 2), np.bool_))', 'bool', 'bool'),
    ('jnp.float32(1) * 2.0', 'float32', 'float32'),
    ('jnp.int32(1) + 2', 'int32', 'int32'),
    ('jnp.ones(2, dtype=int)', 'int32', 'int64'),
    ('jnp.ones(2, dtype=float)', 'float32', 'float64'),
    ('jnp.array(2**40)', 'ERR OverflowError', 'int64'),
    ('jnp.clip(np.ones(2, np.int32), 0, 1.5)', 'float32', 'float64'),
    ('jnp.std(np.ones(3, np.int8))', 'float32', 'float32'),
    ('jnp.log(np.ones(2, np.uint32))', 'float32', 'float32'),
    ('jnp.arctan2(1, 2)', 'float32', 'float64'),
    ('jnp.hypot(np.ones(2, np.int32), 1)', 'float32', 'float32'),
    ('jnp.logaddexp(1, 2)', 'float32', 'float64'),
    ('jnp.sign(np.ones(2, np.int8))', 'int8', 'int8'),
    ('jnp.square(3)', 'int32', 'int64'),
    ('jnp.reciprocal(np.ones(2, np.int32))', 'float32', 'float32'),
]


def _dtype_of(expr: str, jitted: bool) -> str:
    def fn():
        return eval(expr, {"np": np, "jnp": jnp})

    try:
        return str((ember.jit(fn)() if jitted else fn()).dtype)
    except Exception as e:
        return "ERR " + type(e).__name__


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_defaults_follow_jax_in_both_modes_eagerly_and_under_jit(x64):
    with ember.enable_x64(x64):
        for jitted in (False, True):
            got = {expr: _dtype_of(expr, jitted) for expr, *_ in JAX_TABLE}
            want = {expr: (on if x64 else off) for expr, off, on in JAX_TABLE}
            assert got == want, {k: (got[k], want[k]) for k in got if got[k] != want[k]}


def test_context_manager_restores_the_mode_and_config_reads_both_names():
    assert not ember.config.read("jax_enable_x64") and not ember.config.x64_enabled
    with ember.enable_x64():
        assert ember.config.read("jax_enable_x64") and ember.config.jax_enable_x64
        assert ember.config.read("ember_enable_x64")
        with ember.enable_x64(False):
            assert jnp.zeros(1).dtype == np.float32
        assert jnp.zeros(1).dtype == np.float64
    with pytest.raises(ZeroDivisionError), ember.enable_x64():
        raise ZeroDivisionError
    assert not ember.config.x64_enabled and jnp.zeros(1).dtype == np.float32


def test_config_update_takes_jax_names_and_checks_types():
    try:
        ember.config.update("jax_enable_x64", True)
        assert jnp.asarray(1.5).dtype == np.float64
    finally:
        ember.config.update("jax_enable_x64", False)
    assert jnp.asarray(1.5).dtype == np.float32
    ember.config.update("jax_debug_nans", False)
    assert ember.config.read("jax_debug_nans") is False
    with pytest.raises(TypeError, match="takes a bool"):
        ember.config.update("jax_enable_x64", "yes")
    with pytest.raises(AttributeError, match="jax_enable_x64"):
        ember.config.update("jax_enable_x65", True)


def test_jit_keeps_one_cache_per_mode():
    @ember.jit
    def f(x):
        return x * 2.5 + jnp.ones(3)

    i32 = np.ones(3, np.int32)
    assert f(i32).dtype == np.float32
    with ember.enable_x64():
        assert f(i32).dtype == np.float64
        assert f(0.5).dtype == np.float64  # a Python float argument is float64 too
        assert f.cache_info().misses == 2
    assert f(i32).dtype == np.float32 and f(0.5).dtype == np.float32
    assert f.cache_info().misses == 2 and f.cache_info().hits == 1


def test_explicit_64_bit_inputs_stay_64_bit_with_x64_off():
    """Ember's documented difference: JAX would truncate them to 32 bits with a warning."""
    x = np.arange(3, dtype=np.int64)
    assert (jnp.sum(x).dtype, jnp.sqrt(x).dtype) == (np.int64, np.float64)
    assert ember.jit(lambda y: y * 0.5)(np.ones(2)).dtype == np.float64


def test_grad_of_a_python_float_is_float64_in_64_bit_mode():
    with ember.enable_x64():
        g = ember.grad(lambda x: jnp.sin(x) * x)(1.0)
    assert g.dtype == np.float64 and np.isclose(g, np.cos(1.0) * 1.0 + np.sin(1.0), rtol=1e-15)


@pytest.mark.parametrize("var", ["JAX_ENABLE_X64", "EMBER_ENABLE_X64"])
def test_the_environment_turns_it_on_at_import(var):
    code = "import ember, ember.numpy as jnp; print(ember.config.x64_enabled, jnp.arange(2).dtype)"
    env = {**os.environ, var: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "int64"]
