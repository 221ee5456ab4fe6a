"""The NumPy emitter of the math library (ember.backends.math): fma correctly rounded (checked against
exact rational arithmetic on random and adversarial float32/float64 triples), integer operations of every
width against Python ints, `evaluate`'s argument checks; and every algorithm run under it, uncompiled,
against the compiled tests' references with their ulp budgets (on samples of their inputs: the dense and
exhaustive sweeps stay compiled-only); kernel.evaluate(..., math="algorithm") against the compiled kernel."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.backends.kernel import evaluate as evaluate_kernel
from ember.backends.kernel import lower_kernel
from ember.backends.math import F32, F64, evaluate
from ember.backends.math.numpy_emitter import NumpyEmitter
from ember.tracer import ShapedArray, trace_flat
from tests.backends.llvm.test_mathlib import (  # NAMES: the functions budgeted there
    NAMES,
    _assert_specials_match,
    _check,
    _numpy_rule,
    inputs,
    pow_inputs,
    reference,
    special_values,
)
from tests.backends.llvm.test_trig_range import every_binade, exact, hard_inputs

DTYPES = (np.float32, np.float64)


# ---- fma -------------------------------------------------------------------------------------------------

def _is_correctly_rounded(r, value: Fraction, dtype) -> bool:
    """r is `value` rounded to nearest even in `dtype`: no neighbour of r is closer (ties: r is even), and r
    is infinite only where |value| is at least max + half an ulp of max."""
    fi = np.finfo(dtype)
    big = Fraction(float(fi.max)) + Fraction(float(fi.max - np.nextafter(fi.max, dtype(0)))) / 2
    if np.isinf(r):
        return abs(value) >= big and (value > 0) == (r > 0)
    d = abs(value - Fraction(float(r)))
    itype = np.uint32 if dtype == np.float32 else np.uint64
    for n in (np.nextafter(r, dtype(-np.inf)), np.nextafter(r, dtype(np.inf))):
        if np.isinf(n):
            continue
        dn = abs(value - Fraction(float(n)))
        if dn < d or (dn == d and int(np.asarray(r, dtype).view(itype)) & 1):
            return False
    return True


def _adversarial(dtype, rng, n: int):
    """Triples whose fma lands on, or one unit beside, a rounding midpoint; cancellations of the product
    by its own rounding; subnormal and overflowing results; products far beside c."""
    f32 = dtype == np.float32
    mant = 23 if f32 else 52
    k = rng.integers(1, 2 ** (11 if f32 else 25), n).astype(np.float64)
    j = rng.integers(1, 2 ** (11 if f32 else 25), n).astype(np.float64)
    a = 1 + k * 2.0 ** -mant
    b = 1 + j * 2.0 ** -mant                                   # a b = 1 + (k + j) u + k j u**2
    tie = 2.0 ** -(mant + 1) - k * j * 2.0 ** (-2 * mant)       # lands a b + c on a midpoint
    nudge = rng.choice([-1.0, 0.0, 1.0], n) * 2.0 ** (-2 * mant - 1)
    rows = [(a, b, tie), (a, b, tie + nudge), (a, -b, -tie), (a, b, -(a * b).astype(dtype))]
    # products exactly on a midpoint (k j = 2**(mant - 1) mod 2**mant), c far below the product's last bit:
    # rounding the sum first to a wider precision, or c's bits lost in the low part, would round to even
    h = (mant - 1) // 2
    k = 2.0 ** h * (2 * rng.integers(0, 2 ** (mant - h - 1), n) + 1)
    j = 2.0 ** (mant - 1 - h) * (2 * rng.integers(0, 2 ** h, n) + 1)
    below = 54 if f32 else 107                                  # half a float64 ulp of the product, or of its low part
    c = rng.choice([-1.0, 1.0], n) * 2.0 ** -(below + rng.integers(0, 14, n))
    rows += [(1 + k * 2.0 ** -mant, 1 + j * 2.0 ** -mant, c), (1 + k * 2.0 ** -mant, -1 - j * 2.0 ** -mant, c)]
    fi = np.finfo(dtype)
    scale = rng.uniform(-1, 1, n)
    rows += [(scale * float(fi.tiny), rng.uniform(-1, 1, n), scale * float(fi.smallest_subnormal) * 3),
             (np.full(n, float(fi.max) / 2), rng.uniform(1.9, 2.1, n), -rng.uniform(0, 1, n) * float(fi.max)),
             (rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-60, 60, n), rng.uniform(-1, 1, n),
              rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-200, 200, n))]
    with np.errstate(over="ignore"):
        rows = [tuple(np.asarray(v, np.float64).astype(dtype) for v in row) for row in rows]
    return [tuple(v[ok] for v in row) for row in rows for ok in [np.isfinite(np.stack(row)).all(axis=0)]]


def _random_bits(dtype, rng, n: int) -> np.ndarray:
    itype = np.uint32 if dtype == np.float32 else np.uint64
    x = rng.integers(0, np.iinfo(itype).max, n, dtype=itype, endpoint=True).view(dtype)
    return np.where(np.isfinite(x), x, dtype(1.5))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_fma_is_correctly_rounded(dtype):
    rng = np.random.default_rng(11)
    fmt = F32 if dtype == np.float32 else F64
    e = NumpyEmitter(fmt)
    # random bit patterns, and random ones with exponents that make the product and c comparable
    triples = [tuple(_random_bits(dtype, rng, 400) for _ in range(3))]
    a, b = (rng.uniform(-4, 4, 400) * 2.0 ** rng.integers(-30, 30, 400) for _ in range(2))
    triples.append(tuple(v.astype(dtype) for v in (a, b, -(a * b) * rng.uniform(0.5, 1.5, 400))))
    triples += _adversarial(dtype, rng, 300)
    for a, b, c in triples:
        with np.errstate(all="ignore"):
            got = e.fma(a, b, c)
        assert got.dtype == dtype
        for x, y, z, r in zip(a, b, c, got):
            value = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
            assert _is_correctly_rounded(r, value, dtype), (x, y, z, r, value)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_fma_signed_zeros_and_specials(dtype):
    """Exact zeros take IEEE's signs; infinities and NaN as a * b + c (the product exact) gives them."""
    e = NumpyEmitter(F32 if dtype == np.float32 else F64)
    z, inf, nan = 0.0, np.inf, np.nan
    tiny = 2.0 ** -70                                         # tiny**2 is float32's subnormal 2**-140
    a = np.array([-z, z, -z, 1, 2, inf, inf, 1, nan, tiny, -tiny, 3], dtype)
    b = np.array([1, 1, -1, -z, 3, z, 2, 2, 1, tiny, tiny, -2], dtype)
    c = np.array([-z, -z, -z, -z, -6, 1, -inf, inf, 1, -z, z, 6], dtype)
    want = np.array([-z, z, z, -z, z, nan, nan, inf, nan, tiny ** 2, -tiny ** 2, z], dtype)
    with np.errstate(all="ignore"):
        got = e.fma(a, b, c)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok]) and np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


# ---- integers ----------------------------------------------------------------------------------------

def _as_ints(v, width: int) -> list[int]:
    """The values as unsigned Python ints of `width` bits."""
    return [int(x) % (1 << width) for x in np.asarray(v).ravel()]


@pytest.mark.parametrize("width", [32, 64, 128])
def test_integer_operations_wrap_as_twos_complement(width):
    rng = np.random.default_rng(width)
    e = NumpyEmitter(F32 if width == 32 else F64)
    mask = (1 << width) - 1
    xs = [int(v) & mask for v in rng.integers(0, 2 ** 62, 40)] + [0, 1, mask, 1 << (width - 1), (1 << (width - 1)) - 1]
    ys = [(x * 0x9E3779B97F4A7C15 + 12345) & mask for x in xs]
    a = np.array([e.i(x, width) for x in xs]).ravel()
    b = np.array([e.i(y, width) for y in ys]).ravel()
    if width == 128:
        a, b = a.astype(object), b.astype(object)
    signed = lambda v: v - (1 << width) if v >> (width - 1) else v      # noqa: E731
    shift = np.array([e.i(s, width) for s in [3] * len(xs)]).ravel()
    if width == 128:
        shift = shift.astype(object)
    assert _as_ints(e.iadd(a, b), width) == [(x + y) & mask for x, y in zip(xs, ys)]
    assert _as_ints(e.isub(a, b), width) == [(x - y) & mask for x, y in zip(xs, ys)]
    assert _as_ints(e.imul(a, b), width) == [(x * y) & mask for x, y in zip(xs, ys)]
    assert _as_ints(e.ineg(a), width) == [-x & mask for x in xs]
    assert _as_ints(e.shl(a, shift), width) == [(x << 3) & mask for x in xs]
    assert _as_ints(e.lshr(a, shift), width) == [x >> 3 for x in xs]
    assert _as_ints(e.ashr(a, shift), width) == [(signed(x) >> 3) & mask for x in xs]
    assert e.icmp("<", a, b).tolist() == [signed(x) < signed(y) for x, y in zip(xs, ys)]
    assert e.icmp("<", a, b, signed=False).tolist() == [x < y for x, y in zip(xs, ys)]
    assert _as_ints(e.ctlz(a), width) == [width - x.bit_length() for x in xs]
    assert _as_ints(e.and_(a, b), width) == [x & y for x, y in zip(xs, ys)]
    assert _as_ints(e.not_(a), width) == [~x & mask for x in xs]
    if width < 128:
        assert _as_ints(e.zext(a, 128), 128) == xs
        assert _as_ints(e.sext(a, 128), 128) == [signed(x) & ((1 << 128) - 1) for x in xs]
        assert _as_ints(e.itrunc(e.zext(a, 128), width), width) == xs
        s = np.array([e.i(v, width) for v in range(len(xs))]).ravel() % width
        s = np.asarray(s, a.dtype)
        want = [((x << (k % width)) | (y >> (width - k % width))) & mask if k % width else x
                for x, y, k in zip(xs, ys, range(len(xs)))]
        assert _as_ints(e.fshl(a, b, s), width) == want


def test_conversions_round_and_truncate():
    e = NumpyEmitter(F64)
    assert e.to_float(np.array([2 ** 53 + 1, -(2 ** 53) - 1], np.int64)).tolist() == [2.0 ** 53, -(2.0 ** 53)]
    assert e.to_float(np.array([-1], np.int64), signed=False).tolist() == [2.0 ** 64]
    assert e.to_int(np.array([-2.0, 3.0])).tolist() == [-2, 3]
    assert e.convert(np.array([1 + 2.0 ** -24 + 2.0 ** -50]), F32).tolist() == [1 + 2.0 ** -23]
    assert _as_ints(e.bits(np.array([1.0])), 64) == [0x3FF0000000000000]
    assert e.pow2(np.array([-1022, 0, 1023], np.int64)).tolist() == [2.0 ** -1022, 1.0, 2.0 ** 1023]
    assert e.scale(np.array([1.5]), np.array([-1074], np.int64)).tolist() == [2.0 ** -1073]


def test_evaluate_checks_its_arguments():
    with pytest.raises(ValueError, match="no function 'gamma'"):
        evaluate("gamma", np.ones(3))
    with pytest.raises(TypeError, match="float32 or float64"):
        evaluate("exp", np.ones(3, np.int32))
    with pytest.raises(TypeError, match="pow takes 2"):
        evaluate("pow", np.ones(3))


# ---- the algorithms under the NumPy emitter, with the compiled tests' inputs, references and budgets -----

def _sample(x: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The special values at the front of `x` and n of the rest, at random."""
    head = 32
    rest = np.random.default_rng(seed).permutation(np.arange(head, x.size))[:n]
    return np.concatenate([x[:head], x[np.sort(rest)]])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", [n for n in NAMES if n != "pow"])
def test_unary_accuracy(name, dtype):
    x = _sample(inputs(name, dtype, 20_000), 800 if (name, dtype) == ("erf", np.float64) else 3000, 1)
    _check(name, dtype, evaluate(name, x), reference(name, dtype, x), (x,))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_pow_accuracy(dtype):
    x, y = pow_inputs(dtype, 4000)
    keep = np.random.default_rng(2).permutation(x.size)[:4000]
    x, y = x[keep], y[keep]
    _check("pow", dtype, evaluate("pow", x, y), reference("pow", dtype, x, y), (x, y))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_special_values_match_numpy(dtype):
    x = special_values(dtype)
    for name in NAMES:
        if name != "pow":
            accurate = np.abs(x) <= 1e4 if name in ("sin", "cos") else True
            _assert_specials_match(name, evaluate(name, x), _numpy_rule(name, dtype, x), x, accurate=accurate)
    v = np.concatenate([x[:16], -x[:16]])
    a, b = (g.ravel() for g in np.meshgrid(v, v))
    _assert_specials_match("pow", evaluate("pow", a, b), _numpy_rule("pow", dtype, a, b), a, b)


@pytest.mark.parametrize("name", ["sin", "cos"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_sin_cos_large_arguments(name, dtype):
    """Both reductions, Payne-Hanek's integer arithmetic (128-bit for float64) included: a few mantissas in
    every binade and the floats nearest multiples of pi/2, both signs."""
    x = np.concatenate([every_binade(dtype, 4, seed=1 if name == "sin" else 2),
                        _sample(hard_inputs(dtype), 300, 3)])
    ref = exact(name, x)
    _check(name, dtype, evaluate(name, x), ref, (x,))
    _check(name, dtype, evaluate(name, -x), -ref if name == "sin" else ref, (-x,))


def test_float16_rounds_the_float32_result():
    x = np.linspace(-4, 4, 101).astype(np.float16)
    got = evaluate("tanh", x)
    assert got.dtype == np.float16
    assert np.array_equal(got, evaluate("tanh", x.astype(np.float32)).astype(np.float16))


# ---- kernel.evaluate(..., math="algorithm") --------------------------------------------------------------

def _fusion(x, y):
    return [enp.tanh(enp.exp(x) * 0.5 - enp.log(enp.abs(y) + 1.0)) + x ** 2, enp.exp(-x * x) * y ** 3]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=lambda d: np.dtype(d).name)
def test_kernel_evaluate_with_algorithms_matches_the_compiled_kernel(dtype):
    """An exp/tanh/log fusion (with x**2 and y**3, which render as products) evaluated with the math
    algorithms is the compiled kernel's result bit for bit; with the default NumPy references it is not."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(4096) * 3).astype(dtype)
    y = np.concatenate([rng.standard_normal(4000) * 50, [0.0, -0.0, np.inf, -np.inf, np.nan] * 19,
                        [1e-30]]).astype(dtype)
    graph = trace_flat(lambda a, b: _fusion(a, b), [ShapedArray(v.shape, v.dtype) for v in (x, y)])
    kernel = lower_kernel(graph, "loop")
    compiled = ember.jit(lambda a, b: _fusion(a, b), backend="llvm")(x, y)
    algorithm = evaluate_kernel(kernel, x, y, math="algorithm")
    reference = evaluate_kernel(kernel, x, y)
    itype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    for got, want in zip(algorithm, compiled):
        want = np.asarray(want)
        same = (got.view(itype) == want.view(itype)) | (np.isnan(got) & np.isnan(want))
        assert got.dtype == want.dtype and same.all(), (x[~same][:4], got[~same][:4], want[~same][:4])
    if dtype != np.float16:
        assert any((a != r).any() for a, r in zip(algorithm, reference))    # the option changes the result


def test_kernel_evaluate_rejects_an_unknown_math_option():
    kernel = lower_kernel(trace_flat(lambda a: [enp.exp(a)], [ShapedArray((3,), np.dtype(np.float32))]), "loop")
    with pytest.raises(ValueError, match="'numpy'.*or 'algorithm'"):
        evaluate_kernel(kernel, np.ones(3, np.float32), math="fast")


def test_the_disk_cache_key_covers_the_algorithms():
    """The code signature lists every module of the math library: an edited algorithm is a new key."""
    from ember.backends.llvm.entry import _generator_files

    listed = {path for path, _, _ in _generator_files()}
    for module in ("__init__", "emitter", "formats", "numpy_emitter", "exp_log", "hyperbolic", "trig", "erf", "power"):
        assert f"backends/math/{module}.py" in listed
