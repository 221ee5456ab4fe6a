"""The CUDA C math library (ember/backends/cuda/mathlib.py): every function of the registry at both formats,
compiled as host C++ after the host header (one g++ build for the module, cached by source hash), is bit for
bit the NumPy emitter's result (NaN as NaN) on random inputs over its useful range, specials, signed zeros,
subnormals, every binade up to the largest float (Payne-Hanek) and operand grids; the GPU's kernels of it
compile for sm_90 through the backend's NVRTC compile (warnings are errors), and with a GPU run there
against the same checks."""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from ember.backends.cuda import nvrtc, runtime
from ember.backends.cuda.host import cache_dir as host_cache_dir
from ember.backends.cuda.host import compiler_version
from ember.backends.cuda.mathlib import CEmitter, float_literal, function_name, math_source
from ember.backends.cuda.prelude import DEVICE_PRELUDE, host_header
from ember.backends.math import F32, F64, FUNCTIONS, evaluate
from tests.backends.llvm.test_mathlib import special_values
from tests.backends.llvm.test_trig_range import every_binade
from tests.helpers import near

FORMATS = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
CTYPE = {"f32": "float", "f64": "double"}
DTYPES = (np.float32, np.float64)

GXX_FLAGS = ("-std=c++20", "-O1", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-pthread")

NAMES = tuple(FUNCTIONS)                            # the registry's functions (not the probes below)
NEEDED = [(name, fmt) for name in NAMES for fmt in ("f32", "f64")]

# where each function varies (random inputs are drawn uniformly here, besides random bits and every binade)
RANGE = {
    "exp": (-110, 95), "expm1": (-110, 95), "exp2": (-160, 130), "log": (0, 4), "log1p": (-1, 3), "log2": (0, 4),
    "log10": (0, 4), "tanh": (-30, 30), "logistic": (-120, 120), "sin": (-1e4, 1e4), "cos": (-1e4, 1e4),
    "tan": (-1e4, 1e4), "erf": (-7, 7), "erfc": (-7, 30), "erf_inv": (-1, 1), "sqrt": (0, 100),
    "rsqrt": (0, 100), "atan": (-50, 50), "asin": (-1, 1), "acos": (-1, 1), "sinh": (-100, 100),
    "cosh": (-100, 100), "asinh": (-1e3, 1e3), "acosh": (1, 1e3), "atanh": (-1, 1), "cbrt": (-1e3, 1e3),
    "lgamma": (-40, 60), "digamma": (-30, 40),
    # two operands: x's and y's ranges alike
    "pow": (0, 8), "pow_f32_in_f64": (0, 8), "atan2": (-10, 10), "logaddexp": (-120, 120),
    "logaddexp2": (-150, 150), "nextafter": (-4, 4), "nextafter_f16": (-4, 4), "zeta": (1, 30),
    "polygamma": (0, 12),
}
# operands either side of the grids of two-operand functions
GRID = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -2.5, 7.25, 30.0, 1e4, -1e4, 2.0 ** 60, np.inf, -np.inf,
        np.nan]


# ---- probes: each protocol operation alone, rendered and run as the algorithms are (registered as functions
# for the module's duration), so a semantic no algorithm input reaches (ordered != at NaN, 128-bit ctlz of a
# zero high word) is still checked against the NumPy emitter

def _bits_result(op):
    """An integer operation on the operands' bits, its result returned as the bits of a float."""
    return lambda e, x, y: e.from_bits(op(e, e.bits(x), e.bits(y)))


def _wide(e, hi, lo):
    """The double-width integer hi:lo."""
    w = e.f.width
    return e.or_(e.shl(e.zext(hi, 2 * w), e.i(w, 2 * w)), e.zext(lo, 2 * w))


def _conditions(e, x, y):
    """Every comparison and condition operation as one bit each of an integer."""
    bx, by = e.bits(x), e.bits(y)
    ops = ("<", "<=", ">", ">=", "==", "!=")
    conds = [e.cmp(op, x, y) for op in ops] + [e.ucmp(op, x, y) for op in ops] + [e.isnan(x)]
    conds += [e.icmp(op, bx, by) for op in ops] + [e.icmp(op, bx, by, signed=False) for op in ops]
    conds += [e.and_(conds[0], conds[6]), e.or_(conds[1], conds[12]), e.xor(conds[2], conds[3]), e.not_(conds[5])]
    conds += [e.icmp("==", conds[0], conds[13]), e.select(conds[12], conds[2], conds[4])]
    acc = e.i(0)
    for k, cond in enumerate(conds):
        acc = e.or_(acc, e.select(cond, e.i(1 << k), e.i(0)))
    return e.from_bits(acc)


def _other(e):
    return F64 if e.f is F32 else F32


def _shift(e, n):
    return e.and_(n, e.i(e.f.width - 1))


_FLOAT_PROBES = {
    "add": lambda e, x, y: e.add(x, y), "sub": lambda e, x, y: e.sub(x, y), "mul": lambda e, x, y: e.mul(x, y),
    "div": lambda e, x, y: e.div(x, y), "neg": lambda e, x, y: e.neg(x), "abs": lambda e, x, y: e.abs(x),
    "sqrt": lambda e, x, y: e.sqrt(x), "fma": lambda e, x, y: e.fma(x, y, e.c(1.0 / 3.0)),
    "rint": lambda e, x, y: e.rint(x), "floor": lambda e, x, y: e.floor(x), "ceil": lambda e, x, y: e.ceil(x),
    "trunc": lambda e, x, y: e.trunc(x), "copysign": lambda e, x, y: e.copysign(x, y),
    "min": lambda e, x, y: e.min(x, y), "max": lambda e, x, y: e.max(x, y),
    "convert": lambda e, x, y: (o := e.at(_other(e))).convert(o.mul(e.convert(x, _other(e)), o.c(1.0 / 3.0)), e.f),
    "rare": lambda e, x, y: e.add(e.rare("probe_rare", lambda e, x, ax: e.mul(ax, e.c(3.0)), x, 10.0), e.c(0.5)),
    "call": lambda e, x, y: e.call("exp", e.mul(x, y)),
}
_BITS_PROBES = {
    "conditions": _conditions,
    "iadd": _bits_result(lambda e, a, b: e.iadd(a, b)), "isub": _bits_result(lambda e, a, b: e.isub(a, b)),
    "imul": _bits_result(lambda e, a, b: e.imul(a, b)), "ineg": _bits_result(lambda e, a, b: e.ineg(a)),
    "and": _bits_result(lambda e, a, b: e.and_(a, b)), "or": _bits_result(lambda e, a, b: e.or_(a, b)),
    "xor": _bits_result(lambda e, a, b: e.xor(a, b)), "not": _bits_result(lambda e, a, b: e.not_(a)),
    "shl": _bits_result(lambda e, a, b: e.shl(a, _shift(e, b))),
    "ashr": _bits_result(lambda e, a, b: e.ashr(a, _shift(e, b))),
    "lshr": _bits_result(lambda e, a, b: e.lshr(a, _shift(e, b))),
    "ctlz": _bits_result(lambda e, a, b: e.ctlz(e.lshr(a, _shift(e, b)))),
    "fshl": _bits_result(lambda e, a, b: e.fshl(a, b, b)),
    "wide_mul_high": _bits_result(lambda e, a, b: e.itrunc(e.lshr(e.imul(e.zext(a, 2 * e.f.width), e.zext(
        b, 2 * e.f.width)), e.i(e.f.width, 2 * e.f.width)), e.f.width)),
    "wide_sext_high": _bits_result(lambda e, a, b: e.itrunc(e.lshr(e.sext(a, 2 * e.f.width), e.i(
        e.f.width, 2 * e.f.width)), e.f.width)),
    "wide_ctlz": _bits_result(lambda e, a, b: e.itrunc(e.ctlz(_wide(e, e.lshr(a, _shift(e, b)), b)), e.f.width)),
    "wide_ashr": _bits_result(lambda e, a, b: e.itrunc(e.ashr(_wide(e, a, b), e.zext(_shift(e, b), 2 * e.f.width)),
                                                       e.f.width)),
    "wide_signed_less": _bits_result(lambda e, a, b: e.select(e.icmp("<", _wide(e, a, b), _wide(e, b, a)), a, b)),
    "to_int": _bits_result(lambda e, a, b: e.to_int(e.clamp(e.trunc(e.from_bits(a)), -1e6, 1e6))),
    "table": _bits_result(lambda e, a, b: e.load(e.table(f"probe_words.{e.f.name}", e.f.width, [
        (k * 0x9E3779B97F4A7C15) % (1 << e.f.width) for k in range(8)]), e.and_(e.itrunc(a, 32), e.i(7, 32)))),
}
_FLOAT_FROM_INTS = {
    "to_float": lambda e, x, y: e.to_float(e.bits(x)),
    "to_float_unsigned": lambda e, x, y: e.to_float(e.bits(x), signed=False),
    "to_float_wide": lambda e, x, y: e.to_float(_wide(e, e.bits(x), e.bits(y)), signed=False),
}
PROBES = {f"probe_{k}": (2, fn) for k, fn in {**_FLOAT_PROBES, **_FLOAT_FROM_INTS, **_BITS_PROBES}.items()}
EXACT = {f"probe_{k}" for k in _BITS_PROBES}          # integer results: every bit, NaN patterns included
PROBED = [(name, fmt) for name in PROBES for fmt in ("f32", "f64")]


@pytest.fixture(scope="module")
def registry():
    """The probes registered as math functions while this module runs."""
    with pytest.MonkeyPatch.context() as patch:
        for name, entry in PROBES.items():
            patch.setitem(FUNCTIONS, name, entry)
        yield


def _signaling(a: np.ndarray) -> np.ndarray:
    """Where a is a signaling NaN (its quiet bit clear)."""
    quiet = np.uint32(1 << 22) if a.dtype == np.float32 else np.uint64(1 << 51)
    return np.isnan(a) & ((a.view(quiet.dtype) & quiet) == 0)


def _defined(name: str, args: list[np.ndarray]) -> list[np.ndarray]:
    """The operand pairs whose result the protocol defines for probe `name`."""
    keep = np.ones(args[0].shape, bool)
    if name not in EXACT or name == "probe_to_int":
        # float operations on signaling NaNs vary by library: glibc's truncf passes one through and its
        # fminf then returns NaN, where NumPy, LLVM's minnum and the GPU return the other operand
        keep &= ~_signaling(args[0]) & ~_signaling(args[1])
    if name in ("probe_min", "probe_max"):          # minNum leaves min(-0, +0)'s sign open (NumPy's varies)
        keep &= (args[0] != 0) | (args[1] != 0)
    return [a[keep] for a in args]


def _probe_operands(dtype) -> list[np.ndarray]:
    """A grid of specials and random bit patterns, both operands."""
    rng = np.random.default_rng(7)
    grid = np.array(GRID + [np.finfo(dtype).max, np.finfo(dtype).smallest_subnormal, 1e6, 11.0], dtype)
    gx, gy = (a.ravel() for a in np.meshgrid(grid, grid))
    uint = np.uint32 if dtype == np.float32 else np.uint64
    rx, ry = (rng.integers(0, np.iinfo(uint).max, 2000, dtype=uint, endpoint=True).view(dtype) for _ in range(2))
    return [np.concatenate([gx, rx]), np.concatenate([gy, ry])]


def _first_operand(name: str, dtype) -> np.ndarray:
    """Inputs of one operand: specials, every binade of both signs, random bits, log-spaced and uniform."""
    rng = np.random.default_rng(zlib.crc32(f"{name} {np.dtype(dtype).name}".encode()))
    lo, hi = RANGE[name]
    bits = rng.integers(0, 2 ** 63, 600, dtype=np.uint64)
    random_bits = (bits.view(np.float64) if dtype == np.float64 else bits.astype(np.uint32).view(np.float32))
    binades = every_binade(dtype, 3, seed=1)
    binades = rng.choice(binades, min(binades.size, 1000), replace=False)
    parts = [special_values(dtype), [0.0, -0.0], binades, -binades, random_bits, rng.uniform(lo, hi, 1500),
             near(np.arange(-12, 13), dtype, 2)]
    return np.concatenate([np.asarray(p, dtype) for p in parts])


@np.errstate(all="ignore")
def _operands(name: str, dtype) -> list[np.ndarray]:
    """One array per operand: a unary function's inputs, or a grid and random pairs for two operands."""
    x = _first_operand(name, dtype)
    if FUNCTIONS[name][0] == 1:
        return [x]
    rng = np.random.default_rng(zlib.crc32(f"{name} {np.dtype(dtype).name} y".encode()))
    lo, hi = RANGE[name]
    grid = np.array(GRID + [np.finfo(dtype).max, np.finfo(dtype).smallest_subnormal], dtype)
    gx, gy = (a.ravel() for a in np.meshgrid(grid, grid))
    rx, ry = rng.uniform(lo, hi, 1500), rng.uniform(lo, hi, 1500)
    if name == "polygamma":                                  # orders are small integers; x anywhere
        rx, ry = np.floor(rx), rng.uniform(-10, 30, 1500)
    if name == "nextafter_f16":                              # float16 values, as its callers hold them
        rx, ry = (v.astype(np.float16) for v in (rx, ry))
    ys = rng.permutation(x)
    return [np.concatenate([gx, rx, x]).astype(dtype), np.concatenate([gy, ry, ys]).astype(dtype)]


def _driver(name: str, fmt: str) -> str:
    """extern "C" void run_<name>_<fmt>(x, y, out, n): out[i] = name(x[i] (, y[i])) for i < n."""
    ty = CTYPE[fmt]
    args = "x[i]" if FUNCTIONS[name][0] == 1 else "x[i], y[i]"
    return (f'extern "C" void run_{name}_{fmt}(const {ty}* x, const {ty}* y, {ty}* out, long long n) {{\n'
            f"  (void)y;\n  for (long long i = 0; i < n; ++i) out[i] = {function_name(name, fmt)}({args});\n}}\n")


def host_build(source: str, flags: tuple[str, ...]) -> ctypes.CDLL:
    """`source` built by g++ with `flags` into a shared library and loaded, cached by the hash of the source, the
    flags and the compiler's version beside the host builds (`<EMBER_CACHE_DIR>/cuda-host/`, so `python -m
    ember.cache` counts and clears it); with the disk cache off, built in a directory removed at exit. The
    library is renamed into place whole, so concurrent test processes never load half a file."""
    key = hashlib.sha256("\0".join((source, compiler_version(), *flags)).encode()).hexdigest()
    directory = host_cache_dir() or _private_dir()
    lib = directory / f"{key}.so"
    if not lib.exists():
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".so")
        os.close(fd)
        try:
            with tempfile.NamedTemporaryFile("w", suffix=".cpp") as cpp:
                cpp.write(source)
                cpp.flush()
                done = subprocess.run(["g++", *flags, cpp.name, "-o", tmp], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr[-4000:]
            os.replace(tmp, lib)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return ctypes.CDLL(str(lib))


@functools.cache
def _private_dir() -> Path:
    """A directory of this process for builds while the disk cache is off, removed at exit."""
    path = Path(tempfile.mkdtemp(prefix="ember-cuda-tests-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@pytest.fixture(scope="module")
def lib(registry) -> ctypes.CDLL:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    needed = NEEDED + PROBED
    source = host_header() + math_source(needed) + "".join(_driver(name, fmt) for name, fmt in needed)
    return host_build(source, GXX_FLAGS)


def _run(lib: ctypes.CDLL, name: str, dtype, args: list[np.ndarray]) -> np.ndarray:
    args = [np.ascontiguousarray(a, dtype) for a in args]
    x, y = args[0], args[-1]
    out = np.empty_like(x)
    getattr(lib, f"run_{name}_{FORMATS[np.dtype(dtype)]}")(
        x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_longlong(x.size))
    return out


def _assert_same_bits(name: str, dtype, got: np.ndarray, want: np.ndarray, args: list[np.ndarray],
                      exact: bool = False) -> None:
    """got == want bit for bit; NaN matches any NaN unless `exact` (integer results)."""
    uint = np.uint32 if dtype == np.float32 else np.uint64
    same = got.view(uint) == want.view(uint)
    if not exact:
        same |= np.isnan(got) & np.isnan(want)
    if not same.all():
        k = int(np.argmin(same))
        raise AssertionError(f"{name} {np.dtype(dtype).name}: {int((~same).sum())} of {same.size} differ, first at "
                             f"{[a[k] for a in args]}: C {got[k]!r}, NumPy emitter {want[k]!r}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_function_is_the_numpy_emitter_bit_for_bit(lib, dtype):
    for name in NAMES:
        args = _operands(name, dtype)
        _assert_same_bits(name, dtype, _run(lib, name, dtype, args), evaluate(name, *args), args)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_protocol_operation_is_the_numpy_emitter_bit_for_bit(lib, dtype):
    args = _probe_operands(dtype)
    for name in PROBES:
        probe = _defined(name, args)
        want = evaluate(name, *probe)
        _assert_same_bits(name, dtype, _run(lib, name, dtype, probe), want, probe, exact=name in EXACT)


def _kernel(name: str, fmt: str) -> str:
    """__global__ run_<name>_<fmt>(x, y, out, n): out[i] = name(x[i] (, y[i])), one element a thread."""
    ty = CTYPE[fmt]
    args = "x[i]" if FUNCTIONS[name][0] == 1 else "x[i], y[i]"
    return (f'extern "C" __global__ void run_{name}_{fmt}(const {ty}* x, const {ty}* y, {ty}* out, long long n) {{\n'
            f"  (void)y;\n  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  if (i < n) out[i] = {function_name(name, fmt)}({args});\n}}\n")


def device_source() -> str:
    """The GPU's kernels: one per function and probe at both formats, after the device prelude. CI compiles
    this very text for sm_90, so a GPU of that architecture loads it from the compile cache."""
    needed = NEEDED + PROBED
    return DEVICE_PRELUDE + math_source(needed) + "".join(_kernel(name, fmt) for name, fmt in needed)


def test_math_source_compiles_through_nvrtc_for_sm90(registry):
    """Through the backend's compile (its options, its cache, every warning an error)."""
    try:
        nvrtc.nvrtc_version()
    except nvrtc.CudaUnavailableError as error:
        pytest.skip(str(error))
    assert nvrtc.compile_cubin(device_source(), "sm_90")[:4] == b"\x7fELF"


def test_math_source_defines_callees_first_and_each_once():
    source = math_source([("lgamma", "f64"), ("sin", "f64"), ("lgamma", "f64")])
    defined = re.findall(r"^static [^(\[]*?\b(ember_\w+)", source, re.M)
    assert len(defined) == len(set(defined))
    for callee in ("ember_log_f64", "ember_sin_f64", "ember_math_rare_sin_big_f64", "ember_math_table_two_over_pi_f64"):
        assert defined.index(callee) < defined.index("ember_lgamma_f64")
    assert defined.index("ember_math_rare_sin_big_f64") < defined.index("ember_sin_f64")
    assert math_source([]) == ""


def test_literals_are_exact():
    assert float_literal(np.log(2), "f32") == "0x1.62e43p-1f"
    assert float_literal(-1.5, "f64") == "(-0x1.8p+0)"
    assert float_literal(-0.0, "f32") == "(-0x0p+0f)"
    assert float_literal(np.inf, "f64") == "__longlong_as_double((long long)0x7ff0000000000000ull)"
    assert float_literal(-np.inf, "f32") == "__int_as_float((int)0xff800000u)"
    for v in (np.pi, 1e-310, 5e-324, np.finfo(np.float64).max):
        assert float.fromhex(float_literal(v, "f64").strip("()")) == v
    e = CEmitter(F32)
    assert e.i(-1).text == "0xffffffffu" and e.i(1 << 70, 128).text.endswith("<< 64) | 0x0ull)")


def test_function_name_convention():
    assert function_name("exp", "f32") == "ember_exp_f32" and function_name("zeta", "f64") == "ember_zeta_f64"


@pytest.mark.gpu
def test_on_the_gpu_every_function_and_operation_is_the_numpy_emitter_bit_for_bit(registry):
    cupy = runtime.cupy_module()
    module = runtime.load_module(device_source())
    failures = []
    for dtype in DTYPES:
        probe_args = _probe_operands(dtype)
        for name in (*NAMES, *PROBES):
            args = _operands(name, dtype) if name in NAMES else _defined(name, probe_args)
            x, y = (cupy.asarray(np.ascontiguousarray(a, dtype)) for a in (args[0], args[-1]))
            out = cupy.empty_like(x)
            runtime.launch(module, f"run_{name}_{FORMATS[np.dtype(dtype)]}", (x.size + 255) // 256, 256,
                           (x, y, out, np.int64(x.size)))
            try:
                _assert_same_bits(name, dtype, cupy.asnumpy(out), evaluate(name, *args), args, exact=name in EXACT)
            except AssertionError as error:
                failures.append(str(error))
    assert not failures, "\n".join(failures)
