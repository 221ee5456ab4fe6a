"""exp2, log2, log10, cbrt, logaddexp, logaddexp2 and nextafter of the math library (ember.backends.math:
bases.py, roots.py, float_bits.py), and ember.numpy's hypot and copysign: the error in ulp of the result
against a reference about 2**-62 relative (x86 long double, itself checked against mpmath on a sample) over
each function's whole domain (random bit patterns of every binade, subnormals, +-0, +-inf, NaN, huge and
negative arguments, the range-reduction boundaries), under the NumPy emitter (the algorithm itself, nothing
compiled) and compiled (jit of the ember.numpy function on the llvm backend, which must give the NumPy
emitter's bits). Exact results are exact: 2**n, log2(2**n), log10(10**n), cbrt(n**3).
"""

from __future__ import annotations

import zlib

import mpmath
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.math import evaluate
from tests.helpers import near as _near

# the inputs hold infinities, NaNs, zeros and the largest floats on purpose: NumPy's warnings about them are expected
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
DTYPES = (np.float32, np.float64)
LD = np.longdouble
EXTENDED = np.finfo(LD).nmant >= 63

# max ulp allowed (measured max over these inputs: float32, float64; then JAX 0.10's XLA CPU on the same
# inputs where they are normal, as XLA flushes subnormals). float32 over every binade with a stride of 127
# bit patterns (34M inputs, compiled): exp2 0.85, log2 0.70, log10 0.64, cbrt 0.50
BUDGET = {
    "exp2": (1, 1),            # 0.80, 0.85; XLA 67 (and 0 for 2**-126), 716 (exp(x ln 2): 2**1001 inexact)
    "log2": (1, 1),            # 0.59, 0.60; XLA 1.96, 1.32
    "log10": (1, 1),           # 0.63, 0.62; XLA 2.41, 1.58
    "cbrt": (1, 1),            # 0.50, 0.50; XLA 0.89, 3.0
    # in ulp of the larger of the result and max(x, y): where the result cancels (x, y < 0 with b**x + b**y
    # near 1) even b**x + b**y rounded once leaves an error of that size. On 1.8M more random pairs (bit
    # patterns, nearby and negative pairs): 0.68 and 0.95 (float32), 0.61 and 0.66 (float64)
    "logaddexp": (1, 1),       # 0.55, 0.50; XLA 5.3, 3.9
    "logaddexp2": (1, 1),      # 0.52, 0.51; XLA 42, 113
    "hypot": (2, 2),           # 1.76, 1.75 (JAX's composition, both backends); XLA 1.76, 1.75
}


# ---- inputs ----------------------------------------------------------------------------------------

def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(" ".join(map(str, key)).encode()))


def _bits(rng, dtype, n: int) -> np.ndarray:
    """Random bit patterns: every binade equally likely, subnormals, infinities and NaNs included."""
    itype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    return rng.integers(0, np.iinfo(itype).max, n, dtype=itype, endpoint=True).view(dtype)




def _specials(dtype) -> np.ndarray:
    fi = np.finfo(dtype)
    v = np.array([0.0, 1.0, 2.0, 0.5, 3.0, 10.0, np.inf, np.nan, fi.tiny, fi.smallest_subnormal,
                  fi.smallest_subnormal * 7, fi.tiny / 3, fi.max, fi.eps, 1 - fi.epsneg, 1 + fi.eps], dtype)
    return np.concatenate([v, -v])


def unary_inputs(name: str, dtype, n: int = 12_000) -> np.ndarray:
    rng = _rng(name, np.dtype(dtype).name)
    fi = np.finfo(dtype)
    lim = fi.maxexp + fi.nmant + 4
    parts = [_specials(dtype), _bits(rng, dtype, n)]
    if name == "exp2":
        parts += [rng.uniform(-lim, fi.maxexp + 2, n), rng.uniform(-2, 2, n // 4),
                  _near(np.arange(-lim, fi.maxexp + 2) + 0.5, dtype),         # rint's ties: r = +-1/2
                  _near(np.arange(-lim, fi.maxexp + 2), dtype)]
    elif name in ("log2", "log10"):
        parts += [np.abs(_bits(rng, dtype, n)), rng.uniform(0.5, 2, n // 2),
                  1 + np.geomspace(fi.eps, 0.1, n // 4) * rng.choice([-1, 1], n // 4),
                  _near(np.sqrt(0.5) * 2.0 ** np.arange(fi.minexp, fi.maxexp - 1), dtype),
                  _near(10.0 ** np.arange(-40, 40), dtype)]
    elif name == "cbrt":
        parts += [rng.uniform(-30, 30, n // 2), _near(8.0 ** np.arange(-50, 42), dtype),
                  _near(-(2.0 ** np.arange(fi.minexp - fi.nmant, fi.maxexp)), dtype, 1)]
    return np.concatenate([np.asarray(p, dtype) for p in parts])


def binary_inputs(name: str, dtype, n: int = 8_000) -> tuple[np.ndarray, np.ndarray]:
    """Pairs for logaddexp(2): random magnitudes of both signs, equal and nearly equal operands, results
    near 0 (the cancellation), every pair of special values, random bit patterns."""
    with np.errstate(all="ignore"):
        return _binary_inputs(name, dtype, n)


def _binary_inputs(name: str, dtype, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = _rng(name, np.dtype(dtype).name)
    fi = np.finfo(dtype)
    sp = np.array([0.0, -0.0, 1.0, -1.0, 700.0, -700.0, np.inf, -np.inf, np.nan, fi.max, -fi.max, fi.tiny], dtype)
    sx, sy = (g.ravel() for g in np.meshgrid(sp, sp))
    mag = 10.0 ** rng.uniform(-8, np.log10(float(fi.max)) - 1, n)
    a = rng.uniform(-60, 60, n)
    x = np.concatenate([sx, mag * rng.choice([-1, 1], n), a, a, rng.uniform(-1, 0, n), _bits(rng, dtype, n)])
    d = rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-6, 1, n)
    near0 = np.log(-np.expm1(x[-2 * n:-n])) if name == "logaddexp" else np.log2(-np.expm1(x[-2 * n:-n] * np.log(2)))
    y = np.concatenate([sy, 10.0 ** rng.uniform(-8, np.log10(float(fi.max)) - 1, n) * rng.choice([-1, 1], n),
                        a, a + d, near0, _bits(rng, dtype, n)])
    return x.astype(dtype), y.astype(dtype)


# ---- references ------------------------------------------------------------------------------------

_LONG = {"exp2": np.exp2, "log2": np.log2, "log10": np.log10, "cbrt": np.cbrt, "logaddexp": np.logaddexp,
         "logaddexp2": np.logaddexp2, "hypot": np.hypot}
_MP = {"exp2": lambda x: mpmath.power(2, x), "log2": lambda x: mpmath.log(x, 2), "log10": mpmath.log10,
       "cbrt": lambda x: mpmath.cbrt(x) if x >= 0 else -mpmath.cbrt(-x),
       "logaddexp": lambda x, y: mpmath.log(mpmath.exp(x) + mpmath.exp(y)),
       "logaddexp2": lambda x, y: mpmath.log(mpmath.power(2, x) + mpmath.power(2, y), 2),
       "hypot": lambda x, y: mpmath.sqrt(x * x + y * y)}


def _mpmath(name: str, *args: np.ndarray) -> np.ndarray:
    def one(*vs):
        v = _MP[name](*(mpmath.mpf(float(a)) for a in vs))
        return LD(mpmath.nstr(v, 30, min_fixed=1, max_fixed=0)) if isinstance(v, mpmath.mpf) else LD(np.nan)
    with mpmath.workdps(40):
        return np.array([one(*vs) for vs in zip(*args)], LD)


def reference(name: str, *args: np.ndarray) -> np.ndarray:
    """name(*args) in long double (x86: 11 bits beyond float64), or mpmath where long double is float64."""
    if not EXTENDED:
        return _mpmath(name, *args)
    with np.errstate(all="ignore"):
        return _LONG[name](*(a.astype(LD) for a in args))


def ulp_error(got: np.ndarray, ref: np.ndarray, dtype, scale: np.ndarray | None = None) -> np.ndarray:
    """|got - ref| in ulps of `dtype` at |ref| (or at max(|ref|, scale)): 0 where got is ref rounded (zeros
    and infinities included), inf where one is NaN and the other is not, or got is infinite and ref rounds
    to a finite number."""
    fi = np.finfo(dtype)
    with np.errstate(all="ignore"):
        same = (got == ref.astype(dtype)) | (np.isnan(got) & np.isnan(ref))
        at = np.abs(ref) if scale is None else np.maximum(np.abs(ref), np.abs(scale).astype(LD))
        ulp = np.ldexp(LD(1), np.maximum(np.frexp(at)[1] - 1, fi.minexp) - fi.nmant)
        err = np.abs(got.astype(LD) - ref) / ulp
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


def check(name: str, dtype, got: np.ndarray, args, scale=None) -> float:
    err = ulp_error(got, reference(name, *args), dtype, scale)
    worst = int(np.argmax(err))
    budget = BUDGET[name][DTYPES.index(dtype)]
    assert err[worst] <= budget, (f"{name} {np.dtype(dtype).name}: {err[worst]:.3g} ulp > {budget} at "
                                  f"{[a[worst] for a in args]}: got {got[worst]!r}")
    return float(err[worst])


@pytest.mark.skipif(not EXTENDED, reason="no x86 long double here: the reference is mpmath itself")
@pytest.mark.parametrize("name", sorted(_LONG))
def test_long_double_reference_agrees_with_mpmath(name):
    rng = _rng("reference", name)
    args = [rng.uniform(0.01, 50, 40) for _ in range(2 if name in ("logaddexp", "logaddexp2", "hypot") else 1)]
    err = ulp_error(reference(name, *args).astype(np.float64), _mpmath(name, *args), np.float64)
    assert err.max() <= 0.5


# ---- under the NumPy emitter ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["exp2", "log2", "log10", "cbrt"])
def test_unary_accuracy(name, dtype):
    x = unary_inputs(name, dtype)
    check(name, dtype, evaluate(name, x), (x,))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_accuracy(name, dtype):
    x, y = binary_inputs(name, dtype)
    check(name, dtype, evaluate(name, x, y), (x, y), scale=np.maximum(x, y))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_exact_results_are_exact(dtype):
    fi = np.finfo(dtype)
    n = np.arange(fi.minexp - fi.nmant, fi.maxexp).astype(dtype)
    np.testing.assert_array_equal(evaluate("exp2", n), np.ldexp(dtype(1), n.astype(int)))
    np.testing.assert_array_equal(evaluate("log2", np.ldexp(dtype(1), n.astype(int))), n)
    k = np.arange(0, 11 if dtype == np.float32 else 23)       # 10**k exact in the format
    np.testing.assert_array_equal(evaluate("log10", (10.0 ** k).astype(dtype)), k.astype(dtype))
    roots = np.arange(-400, 401).astype(dtype)
    roots = roots[np.abs(roots) ** 3 < 2.0 ** (fi.nmant + 1)]  # cubes exact in the format
    np.testing.assert_array_equal(evaluate("cbrt", roots ** 3), roots)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_special_values(dtype):
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, inf, -inf, nan, -1.0], dtype)
    cases = {"exp2": [1, 1, inf, 0, nan, 0.5], "log2": [-inf, -inf, inf, nan, nan, nan],
             "log10": [-inf, -inf, inf, nan, nan, nan], "cbrt": [0.0, -0.0, inf, -inf, nan, -1.0]}
    for name, want in cases.items():
        got = evaluate(name, x)
        np.testing.assert_array_equal(got, np.array(want, dtype), err_msg=name)
        assert np.array_equal(np.signbit(got[:2]), np.signbit(np.array(want[:2], dtype))), name


def _all_pairs(dtype, n: int):
    """Every pair of special values and random bit patterns (x, y), (x, -x) and (x, x)."""
    fi = np.finfo(dtype)
    sp = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, fi.max, -fi.max, fi.tiny, -fi.tiny,
                   fi.smallest_subnormal, -fi.smallest_subnormal], dtype)
    sx, sy = (g.ravel() for g in np.meshgrid(sp, sp))
    b = _bits(_rng("pairs", np.dtype(dtype).name), dtype, n)
    return np.concatenate([sx, b, b, b]), np.concatenate([sy, b[::-1], -b, b])


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit, any NaN matching any NaN."""
    itype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return bool(((a.view(itype) == b.view(itype)) | (np.isnan(a) & np.isnan(b))).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_nextafter_is_numpys(dtype):
    x, y = _all_pairs(dtype, 5000)
    with np.errstate(all="ignore"):
        assert _same_bits(evaluate("nextafter", x, y), np.nextafter(x, y))


def test_nextafter_of_every_float16():
    """float16 through float32 (`nextafter_f16`) toward +-inf, +-0 and other float16s, every float16 x."""
    x = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    y = np.array([np.inf, -np.inf, 0.0, -0.0], np.float16)
    xs, ys = np.concatenate([np.tile(x, 4), x]), np.concatenate([np.repeat(y, x.size), np.roll(x, 5)])
    with np.errstate(all="ignore"):
        got = evaluate("nextafter_f16", xs.astype(np.float32), ys.astype(np.float32)).astype(np.float16)
        assert _same_bits(got, np.nextafter(xs, ys))
        assert _same_bits(evaluate("nextafter", xs, ys), got)          # evaluate's float16 takes nextafter_f16


# ---- compiled: the llvm backend gives the NumPy emitter's bits ----------------------------------------

_JNP = {"exp2": jnp.exp2, "log2": jnp.log2, "log10": jnp.log10, "cbrt": jnp.cbrt, "logaddexp": jnp.logaddexp,
        "logaddexp2": jnp.logaddexp2, "nextafter": jnp.nextafter}


def _compiled(fn, *args):
    return np.asarray(ember.jit(fn, backend="llvm")(*args))


@pytest.mark.parametrize("dtype", (np.float16, *DTYPES), ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["exp2", "log2", "log10", "cbrt"])
def test_compiled_unary_is_the_algorithm(name, dtype):
    x = unary_inputs(name, np.float32 if dtype == np.float16 else dtype, 4000).astype(dtype)
    got = _compiled(_JNP[name], x)
    assert _same_bits(got, evaluate(name, x))
    if dtype != np.float16:
        check(name, dtype, got, (x,))


@pytest.mark.parametrize("name", ["exp2", "log2", "log10", "cbrt"])
def test_float32_every_binade(name):
    """Compiled, over every binade of float32 from the subnormals to the largest, both signs: every 8191st
    bit pattern (a prime stride, so the mantissas vary), half a million inputs."""
    bits = np.arange(0, 0x7F800000, 8191, dtype=np.uint32)
    x = np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
    if name == "exp2":
        x = x[np.abs(x) < 160]                                   # beyond, 0 or inf (tested above)
    check(name, np.float32, _compiled(_JNP[name], x), (x,))


@pytest.mark.parametrize("dtype", (np.float16, *DTYPES), ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2", "nextafter"])
def test_compiled_binary_is_the_algorithm(name, dtype):
    if name == "nextafter":
        x, y = _all_pairs(dtype, 2000)
        with np.errstate(all="ignore"):
            want = np.nextafter(x, y)
        assert _same_bits(_compiled(_JNP[name], x, y), want)
        return
    x, y = (v.astype(dtype) for v in binary_inputs(name, np.float32 if dtype == np.float16 else dtype, 2000))
    assert _same_bits(_compiled(_JNP[name], x, y), evaluate(name, x, y))


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_hypot_accuracy_without_overflow_or_underflow(backend, dtype):
    """JAX's composition: max * sqrt(1 + (min / max)**2) at every magnitude, subnormal to the largest."""
    rng = _rng("hypot", np.dtype(dtype).name)
    fi = np.finfo(dtype)
    x = np.concatenate([_bits(rng, dtype, 6000), rng.uniform(-10, 10, 2000), np.full(3, fi.max), [fi.tiny] * 3])
    y = np.concatenate([_bits(rng, dtype, 6000), rng.uniform(-10, 10, 2000), [fi.max, 1.0, fi.tiny],
                        [fi.tiny, fi.smallest_subnormal, 0.0]])
    x, y = x.astype(dtype), y.astype(dtype)
    y[:2000] = (x[:2000] * rng.uniform(0.1, 10, 2000)).astype(dtype)     # comparable magnitudes
    got = np.asarray(ember.jit(jnp.hypot, backend=backend)(x, y))
    check("hypot", dtype, got, (x, y))


@pytest.mark.parametrize("dtype", (np.float16, *DTYPES), ids=lambda d: np.dtype(d).name)
def test_copysign_is_numpys(dtype):
    x, y = _all_pairs(dtype, 2000)
    assert _same_bits(_compiled(jnp.copysign, x, y), np.copysign(x, y))
