"""ember.random against values recorded from JAX 0.10.2 (jax_values.json, written by record_jax.py from the
calls in cases.py): integers, booleans and keys bit for bit, `bits`/`uniform`/`randint` bit for bit, the
float transforms to float rounding. The pure-NumPy Threefry in reference.py is checked against the same
values, so a mistake would have to be made twice, the same way, to pass.

The recorded cases run on the numpy backend (compiling ~100 small functions with LLVM would take most of
the suite's budget); test_streams.py runs the same streams compiled.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.random as random
from tests.random import cases, reference

HERE = Path(__file__).resolve().parent

RECORDED = json.loads((HERE / "jax_values.json").read_text())
EXACT_FLOATS = ("random.uniform(", "random.bits(")


def _result_leaves(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _result_leaves(v)]
    if isinstance(value, random.KeyArray):
        return [np.asarray(random.key_data(value))]
    return [np.asarray(value)]


def _expected_leaves(rec) -> list:
    if isinstance(rec, list):
        return [leaf for r in rec for leaf in _expected_leaves(r)]
    return [np.array(rec["value"], dtype=rec["dtype"]).reshape(rec["shape"])]


def _check(expr: str, got, rec) -> None:
    exact = expr.startswith(EXACT_FLOATS) or "randint" in expr
    for g, e in zip(_result_leaves(got), _expected_leaves(rec), strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype, (expr, g.shape, g.dtype, e.shape, e.dtype)
        if e.dtype.kind != "f" or exact and "grad(" not in expr:
            np.testing.assert_array_equal(g, e, err_msg=expr)
        else:
            rtol = 1e-12 if e.dtype == np.float64 else 2e-6
            np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol * np.abs(e).max(initial=1.0), err_msg=expr)


@pytest.fixture(scope="module")
def ns():
    return cases.namespace(random, ember.grad, ember.vmap, ember.jit)


@pytest.fixture(autouse=True)
def numpy_backend(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "numpy")


def test_the_recording_covers_the_cases():
    assert sorted(RECORDED["cases"]) == sorted(cases.DISTRIBUTIONS)
    assert sorted(RECORDED["x64"]) == sorted(cases.X64) and RECORDED["jax_version"] == "0.10.2"
    assert sorted(RECORDED["x64_defaults"]) == sorted(cases.X64_DEFAULTS) and "program" in RECORDED


@pytest.mark.parametrize("expr", cases.DISTRIBUTIONS)
def test_matches_jax(expr, ns):
    _check(expr, eval(expr, ns), RECORDED["cases"][expr])


@pytest.mark.parametrize("expr", cases.X64)
def test_matches_jax_x64_with_explicit_64_bit_dtypes(expr, ns):
    _check(expr, eval(expr, ns), RECORDED["x64"][expr])


@pytest.mark.parametrize("expr", cases.X64_DEFAULTS)
def test_matches_jax_in_64_bit_mode(expr, ns):
    with ember.enable_x64():
        got = eval(expr, ns)
    _check(expr, got, RECORDED["x64_defaults"][expr])


def test_a_jax_program_runs_unchanged_with_ember_as_jax():
    """cases.PROGRAM, JAX code, with `jax` bound to ember: the same keys, weights, dropout masks, gradients
    and samples as JAX computed."""
    import ember.numpy as jnp

    space: dict = {}
    exec(cases.PROGRAM, space)
    got = _result_leaves(space["program"](ember, jnp))
    want = _expected_leaves(RECORDED["program"])
    for i, (g, e) in enumerate(zip(got, want, strict=True)):
        assert g.shape == e.shape and g.dtype == e.dtype, (i, g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-7, err_msg=f"output {i}")


# --- the NumPy reference against the same recording ---------------------------------------------------

def _recorded(expr: str, x64: bool = False) -> np.ndarray:
    (leaf,) = _expected_leaves(RECORDED["x64" if x64 else "cases"][expr])
    return leaf


def test_the_reference_threefry_matches_jax():
    k0 = reference.seed(0)
    assert (_recorded("random.PRNGKey(42)") == reference.seed(42)).all()
    assert (_recorded("random.PRNGKey(-1)") == reference.seed(-1 & 0xFFFFFFFF)).all()  # 32-bit default int
    assert (_recorded("random.PRNGKey(np.int64(2**40 + 3))", x64=True) == reference.seed(2**40 + 3)).all()
    assert (_recorded("random.split(K0)") == reference.split(k0)).all()
    assert (_recorded("random.fold_in(K0, 5)") == reference.fold_in(k0, 5)).all()
    assert (_recorded("random.bits(K0, (5,))") == reference.random_bits(k0, 32, (5,))).all()
    assert (_recorded("random.bits(K0, (5,), np.uint64)", x64=True) == reference.random_bits(k0, 64, (5,))).all()
    assert (_recorded("random.uniform(K0, (7,))") == reference.uniform(k0, (7,))).all()
    u64 = reference.uniform(k0, (7,), np.float64)
    assert (_recorded("random.uniform(K0, (7,), np.float64)", x64=True) == u64).all()
    k42 = reference.seed(42)
    assert (_recorded("random.bits(K42, (2, 3), np.uint8)") == reference.random_bits(k42, 8, (2, 3))).all()
    kf = reference.fold_in(reference.split(reference.seed(7), (3,))[2], 11)
    assert (_recorded("random.bits(KF, (4,), np.uint16)") == reference.random_bits(kf, 16, (4,))).all()
