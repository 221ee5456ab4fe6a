"""The CUDA scalar op table against the primitives' NumPy rules, executed: every elementwise primitive
outside the math library at every dtype it accepts, and every conversion, rendered into one
translation unit of loops. The unit runs as host C++ (one cached g++ build, undefined behaviour
sanitized: the GPU would not give x86's answers where C leaves them open) and must match NumPy bit for
bit on edge-case and random inputs, float16 register values being float16 values; the same source
compiles for sm_90 through the backend's NVRTC compile (warnings are errors), and with a GPU runs there
against the same checks. Both builds put the real preludes (the host header, DEVICE_PRELUDE) first.
Math-library primitives render as calls to the math renderer's functions, checked by name."""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
import warnings
import zlib

import numpy as np
import pytest

from ember.backends.cuda import nvrtc, runtime, scalar
from ember.backends.cuda.prelude import DEVICE_PRELUDE, host_header
from ember.backends.cuda.types import memory_type, register_type
from ember.backends.kernel import Op
from ember.backends.llvm import scalar as llvm_scalar
from ember.tracer import prims as P
from tests.backends.cuda.test_cuda_math import host_build
from tests.backends.llvm.test_scalar import (
    CONVERSIONS,
    PRIMS,
    _conversion_inputs,
    _scalar_path_uint32,
    assert_matches,
    edge_values,
    inputs,
    reference,
    signatures,
)

_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
FLOATS = (_F16, _F32, _F64)
MATH = {p.name for p in (*llvm_scalar.MATH_LIBRARY, P.nextafter_p)}

# executed cases: float pow goes to the math library unless its exponent is a literal (POW_LITERALS)
CASES = [(name, sig) for name in sorted(PRIMS) if name not in MATH and name != "convert_element_type"
         for sig in signatures(name) if not (name == "pow" and sig[0][0].kind == "f")]
POW_LITERALS = [(d, n) for d in FLOATS for n in (2, 3, 4, -1)]
FLOAT_TO_INT = [(s, d) for s, d in CONVERSIONS if s.kind == "f" and d.kind in "iu"]
CONSTANTS = [(np.float32, -0.0), (np.float64, -0.0), (np.float16, -0.0), (np.float32, np.inf),
             (np.float64, -np.inf), (np.float16, np.inf),
             (np.float32, np.uint32(0x7FC00123).view(np.float32)),
             (np.float32, np.uint32(0xFF800123).view(np.float32)),
             (np.float64, np.uint64(0x7FF0000000000123).view(np.float64)),
             (np.float64, np.uint64(0xFFF8000000000000).view(np.float64)),
             (np.float16, np.uint16(0x7D01).view(np.float16)), (np.float16, np.uint16(0xFE00).view(np.float16)),
             (np.float64, np.finfo(np.float64).smallest_subnormal),
             (np.float32, np.finfo(np.float32).smallest_subnormal),
             (np.float16, np.finfo(np.float16).smallest_subnormal), (np.float16, 65504.0), (np.float32, 0.1),
             (np.float64, 0.1), (np.float64, -2.5), (np.float32, 3.0), (np.float64, 2.0**63),
             (np.uint64, 2**64 - 1), (np.int64, -(2**63)), (np.int64, 2**63 - 1), (np.int32, -(2**31)),
             (np.uint32, 2**32 - 1), (np.int16, -(2**15)), (np.uint16, 65535), (np.uint8, 255), (np.int8, -128),
             (np.int8, -1), (bool, True), (bool, False)]


# --- the translation unit ----------------------------------------------------------------------------

# each kernel is a loop over its elements: the whole loop on the host, where the kernels are called directly
# (no launch: the sanitizer watches one thread), and one element a thread on the GPU (a loop that NVVM would
# unroll costs several times the compile time)
HOST_PRELUDE = host_header() + "#define EMBER_LOOP(i, n) for (long long i = 0; i < (n); ++i)\n"
DEVICE_SOURCE_PRELUDE = DEVICE_PRELUDE + (
    "#define EMBER_LOOP(i, n) if (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n))\n")


def _load(ref: str, dtype: np.dtype) -> str:
    return f"ember_h2f({ref})" if dtype == _F16 else ref


def _loop(fn: str, in_dtypes, out_dtype, render) -> str:
    """`fn(in0.., out, n)`: out[i] = render([x0, ..]) over register values x_k = in_k[i]. The output
    holds the register value (float for float16, to check it is a float16 value: a missing rounding
    would otherwise hide behind the store's)."""
    params = [f"const {memory_type(d)}* a{k}" for k, d in enumerate(in_dtypes)]
    loads = "".join(f"{register_type(d)} x{k} = {_load(f'a{k}[i]', d)}; " for k, d in enumerate(in_dtypes))
    expr = render([f"x{k}" for k in range(len(in_dtypes))])
    params += [f"{register_type(out_dtype)}* out", "long long n"]
    return (f'extern "C" __global__ void {fn}({", ".join(params)}) '
            f"{{ EMBER_LOOP(i, n) {{ {loads}out[i] = {expr}; }} }}\n")


def _op_loop(fn: str, name: str, args, out, params) -> str:
    op = Op(name, tuple(range(len(args))), out, params)
    return _loop(fn, args, out, lambda xs: scalar.emit_op(op, xs, args, set()))


def case_fn(name, args, out) -> str:
    return "_".join([name, *(a.name for a in args), out.name])


@functools.cache
def source() -> str:
    """Every executed kernel of this module in one translation unit (no prelude)."""
    parts = [_op_loop(case_fn(name, args, out), name, args, out, params) for name, (args, out, params) in CASES]
    for src, dst in CONVERSIONS:
        parts.append(_loop(f"convert_{src.name}_{dst.name}", [src], dst,
                           lambda xs, s=src, d=dst: scalar.convert(xs[0], s, d)))
    for src, dst in FLOAT_TO_INT:  # a compound operand: bound once by a lambda
        parts.append(_loop(f"convert_expr_{src.name}_{dst.name}", [src], dst,
                           lambda xs, s=src, d=dst: scalar.convert(f"(+{xs[0]})", s, d)))
    for dt, n in POW_LITERALS:
        op = Op("pow", (0, 1), dt)
        parts.append(_loop(f"pow_literal_{dt.name}_{n + 1}", [dt], dt, lambda xs, d=dt, k=n, o=op: scalar.emit_op(
            o, [xs[0], scalar.constant(float(k), d)], [d, d], set())))
    for k, (dt, value) in enumerate(CONSTANTS):
        dt = np.dtype(dt)
        parts.append(_loop(f"constant_{k}", [], dt, lambda xs, v=value, d=dt: scalar.constant(v, d)))
    return "".join(parts)


# undefined behaviour the rules must never reach (x86 happens to give the wanted results for most of it,
# the GPU does not): reported on stderr, and a report fails the test. The flags are host.py's but for the
# sanitizer (and -Wextra), which is why this module builds its own library rather than a HostModule.
SANITIZE = "-fsanitize=float-cast-overflow,signed-integer-overflow,integer-divide-by-zero,shift"
GXX_FLAGS = ("-std=c++20", "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-pthread", "-Wall", "-Wextra", "-Werror",
             SANITIZE, "-fsanitize-recover=all")


@functools.cache
def library() -> ctypes.CDLL:
    """The host build of `source()` (warnings are errors)."""
    return host_build(HOST_PRELUDE + source(), GXX_FLAGS)


def _stderr_of(call) -> str:
    """What `call()` writes to file descriptor 2 (where the sanitizer reports)."""
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            call()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode(errors="replace")


def run(fn: str, out_dtype, *arrays, n: int | None = None) -> np.ndarray:
    """Loop `fn` of the host build over `arrays`; fails on undefined behaviour (a sanitizer report)."""
    out_dtype = np.dtype(out_dtype)
    arrays = [np.ascontiguousarray(a) for a in arrays]
    out = np.zeros(len(arrays[0]) if n is None else n, register_dtype(out_dtype))
    f = getattr(library(), fn)
    f.argtypes = [ctypes.c_void_p] * (len(arrays) + 1) + [ctypes.c_longlong]
    report = _stderr_of(lambda: f(*(a.ctypes.data for a in arrays), out.ctypes.data, len(out)))
    assert "runtime error" not in report, report
    return from_register(fn, out, out_dtype)


def register_dtype(dtype: np.dtype) -> np.dtype:
    return _F32 if dtype == _F16 else dtype


def from_register(fn: str, out: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`out` (register values) as `dtype`; fails on a float16 result that is not a float16 value (a
    missing `ember_rh`)."""
    if dtype != _F16:
        return out
    with np.errstate(over="ignore"):
        half = out.astype(_F16)
    unrounded = np.flatnonzero(~np.isnan(out) & (half.astype(_F32).view(np.uint32) != out.view(np.uint32)))
    assert unrounded.size == 0, f"{fn}: float32 register values not float16 values: {out[unrounded[:8]]}"
    return half


# --- the checks: (kernel, result dtype, operands, NumPy's result, primitive) ---------------------------

def _case_id(case) -> str:
    name, (args, _, _) = case
    return f"{name}-{args[-1].name}"


def op_check(case):
    name, (args, out, params) = case
    operands = inputs(name, args, np.random.default_rng(zlib.crc32(_case_id(case).encode())))
    return case_fn(name, args, out), out, operands, reference(name, params, *operands), name


def _astype_x86(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if x.dtype.kind == "f" and dst == np.uint32:
            return _scalar_path_uint32(x)
        return x.astype(dst)


def convert_check(src, dst, prefix: str = "convert"):
    x = _conversion_inputs(src, np.random.default_rng(src.num * 31 + dst.num))
    return f"{prefix}_{src.name}_{dst.name}", dst, [x], _astype_x86(x, dst), "convert_element_type"


def pow_check(dt, n):
    x = edge_values(dt)
    wide = x.astype(_F32) if dt == _F16 else x
    with np.errstate(all="ignore"):
        sq = wide * wide
        want = {2: sq, 3: sq * wide, 4: sq * sq, -1: wide.dtype.type(1) / wide}[n].astype(dt)
    return f"pow_literal_{dt.name}_{n + 1}", dt, [x], want, "pow"


def check_constants(run_fn) -> None:
    """Each constant's stored bits; a float16 NaN is held as the float32 NaN with its payload moved up
    (not quieted): its register value is checked."""
    for k, (dt, value) in enumerate(CONSTANTS):
        dt = np.dtype(dt)
        want = np.array([value], dt)
        if dt == _F16 and np.isnan(want[0]):
            h = int(want.view(np.uint16)[0])
            bits = ((h & 0x8000) << 16) | 0x7F800000 | ((h & 0x3FF) << 13)
            assert int(run_fn(f"constant_{k}", _F32, n=1).view(np.uint32)[0]) == bits, (dt, value)
            continue
        got = run_fn(f"constant_{k}", dt, n=1)
        bits = f"u{dt.itemsize}"
        assert got.view(bits)[0] == want.view(bits)[0], (dt, value, got)


def all_checks():
    yield from map(op_check, CASES)
    yield from (convert_check(s, d) for s, d in CONVERSIONS)
    yield from (convert_check(s, d, "convert_expr") for s, d in FLOAT_TO_INT)
    yield from (pow_check(d, n) for d, n in POW_LITERALS)


def check(run_fn, fn, out, operands, want, name) -> None:
    assert_matches(name, run_fn(fn, out, *operands), want, operands)


# --- executed on the host ----------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=map(_case_id, CASES))
def test_op_matches_numpy_reference(case):
    check(run, *op_check(case))


@pytest.mark.parametrize("src,dst", CONVERSIONS, ids=[f"{a.name}-{b.name}" for a, b in CONVERSIONS])
def test_convert_matches_numpy_astype(src, dst):
    """Bit for bit as NumPy's astype on x86: NaN, infinities and out-of-range floats to ints (the GPU
    would saturate, C leaves it undefined), float64 -> float16 in one rounding."""
    check(run, *convert_check(src, dst))


@pytest.mark.parametrize("src,dst", FLOAT_TO_INT, ids=[f"{a.name}-{b.name}" for a, b in FLOAT_TO_INT])
def test_convert_of_compound_expression(src, dst):
    """A compound operand, used several times by the x86 rules, is bound once and converts the same."""
    check(run, *convert_check(src, dst, "convert_expr"))


@pytest.mark.parametrize("dt,n", POW_LITERALS, ids=[f"{d.name}-{n}" for d, n in POW_LITERALS])
def test_pow_by_literal_exponent_multiplies(dt, n):
    """x ** 2, 3, 4, -1 with `constant`'s literal: products in the register type, float16 rounded once,
    as the LLVM table (not the math library's pow)."""
    check(run, *pow_check(dt, n))


def test_constants_keep_their_bits():
    """-0.0, infinities, NaN payloads, subnormals, uint64 max and int minima survive as C literals."""
    check_constants(run)


# --- rendered, not executed --------------------------------------------------------------------------

MATH_CASES = [(name, dt) for name in sorted(MATH) for dt in FLOATS]


@pytest.mark.parametrize("name,dt", MATH_CASES, ids=[f"{n}-{d.name}" for n, d in MATH_CASES])
def test_math_primitives_call_the_math_renderer(name, dt):
    """ember_<name>_<f32|f64>, float16 through float32 (nextafter by its float16 algorithm) rounded once,
    and the function recorded in `need`."""
    args, out, params = next(s for s in signatures(name) if s[0][-1] == dt)
    xs = [f"x{k}" for k in range(len(args))]
    need: set = set()
    expr = scalar.emit_op(Op(name, tuple(range(len(args))), out, params), xs, args, need)
    fn = "nextafter_f16" if (name, dt) == ("nextafter", _F16) else name
    fmt = "f64" if dt == _F64 else "f32"
    call = f"ember_{fn}_{fmt}({', '.join(xs)})"
    assert expr == (f"ember_rh({call})" if dt == _F16 else call)
    assert need == {(fn, fmt)}


@pytest.mark.parametrize("dt", FLOATS, ids=[d.name for d in FLOATS])
def test_float_pow_of_a_variable_calls_pow(dt):
    need: set = set()
    expr = scalar.emit_op(Op("pow", (0, 1), dt), ["x", "y"], [dt, dt], need)
    fmt = "f64" if dt == _F64 else "f32"
    assert expr == ("ember_rh(ember_pow_f32(x, y))" if dt == _F16 else f"ember_pow_{fmt}(x, y)")
    assert need == {("pow", fmt)}


def test_table_has_the_llvm_tables_primitives():
    assert set(scalar.OPS) == set(llvm_scalar.OPS)
    with pytest.raises(NotImplementedError, match="no scalar rule"):
        scalar.emit_op(Op("dot_general", (0, 1), _F32), ["x", "y"], [_F32, _F32], set())


# --- compiled for the GPU ----------------------------------------------------------------------------

def device_source() -> str:
    """The kernels as the GPU compiles them: CI compiles this very text for sm_90, so a GPU of that
    architecture loads it from the compile cache."""
    return DEVICE_SOURCE_PRELUDE + source()


def test_source_compiles_for_sm90_through_nvrtc():
    """The same kernels as CUDA C compile to a cubin for sm_90 through the backend's compile (its options,
    its cache, every warning an error)."""
    try:
        nvrtc.nvrtc_version()
    except nvrtc.CudaUnavailableError as error:
        pytest.skip(str(error))
    assert nvrtc.compile_cubin(device_source(), "sm_90")[:4] == b"\x7fELF"


# --- executed on a GPU -------------------------------------------------------------------------------

@pytest.mark.gpu
def test_every_check_holds_on_the_device():
    """Every host check again, run by the GPU on the same source (its own cvt conversions and
    arithmetic): one thread per element."""
    cp = runtime.cupy_module()
    module = runtime.load_module(device_source())

    def run_on_device(fn: str, out_dtype, *arrays, n: int | None = None) -> np.ndarray:
        out_dtype = np.dtype(out_dtype)
        ins = [cp.asarray(np.ascontiguousarray(a)) for a in arrays]
        out = cp.zeros(len(arrays[0]) if n is None else n, register_dtype(out_dtype))
        blocks = max(1, -(-len(out) // 256))
        runtime.launch(module, fn, blocks, 256, (*ins, out, np.int64(len(out))))
        return from_register(fn, cp.asnumpy(out), out_dtype)

    failures = []
    for fn, out, operands, want, name in all_checks():
        try:
            check(run_on_device, fn, out, operands, want, name)
        except AssertionError as e:
            failures.append(f"{fn}: {e}")
    check_constants(run_on_device)
    assert not failures, f"{len(failures)} kernels differ on the device:\n" + "\n".join(failures[:20])
