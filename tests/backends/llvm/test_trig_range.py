"""sin and cos over the whole float range: every binade of float32 and float64, both signs, against mpmath
with enough precision for the argument's exponent; the inputs closest to multiples of pi/2 on either side
of the switch from Cody-Waite to Payne-Hanek; the issue's examples through jit and grad; the common case
still vectorized, with the large-argument path a call of a vector function."""

from __future__ import annotations

import re

import mpmath
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.backends.math.trig import SINCOS_BIG
from tests.backends.llvm.harness import Compiled, new_module
from tests.backends.llvm.test_mathlib import LD, _check, _loop, run

DTYPES = (np.float32, np.float64)


@pytest.fixture(scope="module")
def lib() -> Compiled:
    module = new_module("trig_range")
    for dtype in DTYPES:
        for name in ("sin", "cos"):
            _loop(module, name, dtype, 1)
    return Compiled(module)


def exact(name: str, x: np.ndarray) -> np.ndarray:
    """sin or cos of each x to 30 digits, as long doubles: mpmath with 2**-140 relative precision left
    after the argument's integer bits."""
    out = []
    for v in x.astype(np.float64):
        m, e = np.frexp(v)
        with mpmath.workprec(max(int(e), 0) + 160):
            r = getattr(mpmath, name)(mpmath.mpf(float(v)))
            out.append(LD(mpmath.nstr(r, 30, min_fixed=1, max_fixed=0)))
    return np.array(out, LD)


def every_binade(dtype, per_binade: int, seed: int) -> np.ndarray:
    """`per_binade` mantissas (the smallest, the largest, random ones) in every binade from the smallest
    subnormal to the largest finite number, positive."""
    fi = np.finfo(dtype)
    rng = np.random.default_rng(seed)
    mant = np.concatenate([[1.0, 2 - fi.eps, 1.5], rng.uniform(1, 2, per_binade - 3)]).astype(np.float64)
    exps = np.arange(fi.minexp - fi.nmant, fi.maxexp)
    x = np.ldexp(mant[None, :], exps[:, None]).ravel()
    return np.unique(x[np.isfinite(x.astype(dtype)) & (x.astype(dtype) > 0)].astype(dtype))


def near_multiples_of_half_pi(dtype, n: np.ndarray) -> np.ndarray:
    """The float nearest n pi/2 and its two neighbours on either side."""
    with mpmath.workprec(200):
        p = np.array([float(mpmath.mpf(int(k)) * mpmath.pi / 2) for k in n]).astype(dtype)
    out = [p]
    up, down = p, p
    for _ in range(2):
        up, down = np.nextafter(up, dtype(np.inf)), np.nextafter(down, dtype(0))
        out += [up, down]
    return np.concatenate(out)


def check_both_signs(lib, name: str, dtype, x: np.ndarray) -> float:
    """ulp error of name(x) and name(-x) (reference computed once: sin is odd, cos even)."""
    ref = exact(name, x)
    worst = _check(name, dtype, run(lib, name, dtype, x), ref, (x,))
    neg = -ref if name == "sin" else ref
    return max(worst, _check(name, dtype, run(lib, name, dtype, -x), neg, (-x,)))


@pytest.mark.parametrize("name", ["sin", "cos"])
@pytest.mark.parametrize("dtype,per_binade", [(np.float32, 12), (np.float64, 4)], ids=["float32", "float64"])
def test_every_binade(lib, name, dtype, per_binade):
    x = every_binade(dtype, per_binade, seed=1 if name == "sin" else 2)
    assert check_both_signs(lib, name, dtype, x) <= 2


# the float64 closest to a multiple of pi/2 (Muller, Elementary Functions: 6381956970095103 * 2**797 is
# within 4.7e-19 of one), and float32 inputs whose reduction cancels deeply
HARD = {np.float64: [np.ldexp(6381956970095103.0, 797), np.ldexp(5261692873635770.0, 499), 1e22, 1e300],
        np.float32: [np.ldexp(16367173.0, 72), np.ldexp(13176795.0, -15 + 24), 1e9, 3e38]}


def hard_inputs(dtype) -> np.ndarray:
    """Where cancellation is deepest: the floats nearest k pi/2 below the switch (Cody-Waite), just above it
    and far above it (Payne-Hanek), the switch itself and its neighbours, and known hard cases."""
    big = SINCOS_BIG["f32" if dtype == np.float32 else "f64"]
    rng = np.random.default_rng(3)
    top = int(big * 2 / np.pi)
    k = np.concatenate([np.arange(1, 300), np.arange(top - 300, top + 300), rng.integers(1, top, 600),
                        rng.integers(top, 1 << 40, 300)])
    hard = np.array(HARD[dtype], dtype)
    x = np.concatenate([near_multiples_of_half_pi(dtype, k), np.nextafter(dtype(big), dtype([0, np.inf])),
                        [dtype(big)], hard, np.nextafter(hard, dtype(0)), np.nextafter(hard, dtype(np.inf))])
    return np.unique(x.astype(dtype))


@pytest.mark.parametrize("name", ["sin", "cos"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_near_multiples_of_half_pi_on_both_paths(lib, name, dtype):
    assert check_both_signs(lib, name, dtype, hard_inputs(dtype)) <= 2


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_special_values(lib, dtype):
    """NaN for infinities and NaN, as NumPy; sin keeps the sign of zero; the largest finite inputs are finite."""
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, np.finfo(dtype).max, -np.finfo(dtype).max], dtype)
    with np.errstate(invalid="ignore"):
        for name, want in (("sin", np.sin(x)), ("cos", np.cos(x))):
            got = run(lib, name, dtype, x)
            assert np.array_equal(np.isnan(got), np.isnan(want)), name
            assert np.array_equal(np.signbit(got[3:5]), np.signbit(want[3:5])), name
            assert np.isfinite(got[5:]).all() and (np.abs(got[5:]) <= 1).all(), name


def test_the_issue_examples_through_jit():
    x32 = np.float32([999508.0, 1e9, 3e38, 206083.0])
    got = np.asarray(ember.jit(enp.sin, backend="llvm")(x32))
    np.testing.assert_allclose(got, np.sin(x32.astype(np.float64)), rtol=3e-7)
    np.testing.assert_allclose(got[:3], [-0.7659273, 0.5458434, 0.8749049], rtol=3e-7)
    x64 = np.array([1e16, 1e17, 1e300])
    got = np.asarray(ember.jit(enp.sin, backend="llvm")(x64))
    np.testing.assert_allclose(got, np.sin(x64), rtol=1e-15)
    assert got[0] == pytest.approx(0.77968801, abs=1e-8)
    np.testing.assert_allclose(np.asarray(ember.jit(enp.cos, backend="llvm")(x64)), np.cos(x64), rtol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_gradient_at_large_arguments_is_cos(dtype):
    x = np.array([999508.0, 1e9, 3e38 if dtype == np.float32 else 1e300, -2.5e7, 7.0], dtype)
    grad = ember.jit(ember.grad(lambda v: enp.sum(enp.sin(v))), backend="llvm")(x)
    np.testing.assert_allclose(np.asarray(grad), np.cos(x.astype(np.float64)), rtol=4e-7 if dtype == np.float32
                               else 1e-15, atol=1e-30)
    grad = ember.jit(ember.grad(lambda v: enp.sum(enp.cos(v))), backend="llvm")(x)
    np.testing.assert_allclose(np.asarray(grad), -np.sin(x.astype(np.float64)), rtol=4e-7 if dtype == np.float32
                               else 1e-15, atol=1e-30)


def test_common_case_vectorized_with_a_vector_call_for_large_arguments(lib):
    """The loop runs sin in vectors; large arguments go through one call of the vector variant per vector
    (it tests whether any lane is large), not a scalar call per element."""
    for dtype in ("float32", "float64"):
        start = lib.optimized_ir.index(f"@loop_sin_{dtype}(")
        body = lib.optimized_ir[start:lib.optimized_ir.index("\n}\n", start)]
        assert re.search(r"call [^\n]*<(4|8|16|32) x (float|double)> @\"?ember_math_sin_big_f(32|64)_v", body), dtype
    # the loop's frame is realigned, so the vectors spilled around that call never straddle cache lines
    assert re.search(r'define void @"?loop_sin_float32"?\(.*\) "stackrealign" alignstack\(64\)$', lib.ir, re.M)
