"""The compile pipeline (ember/backends/llvm/jit.py): O3 object code for the host loaded into one ORC
LLJIT, libraries that free their code when closed, imported symbols, thread safety."""

from __future__ import annotations

import ctypes
import sys
import threading
import time

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from ember.backends.llvm import jit

F32, I64, PTR = ir.FloatType(), ir.IntType(64), ir.PointerType()
CHAIN = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def _loop(fn: ir.Function, n: ir.Value, body) -> ir.IRBuilder:
    """`for i in range(n): body(builder, i)` in `fn`; returns a builder positioned after the loop."""
    entry, loop, done = (fn.append_basic_block(name) for name in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(I64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), entry)
    body(b, i)
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    return b


def _poly_kernel(module: ir.Module, name: str, coeffs: list[float]) -> ir.Function:
    """internal `name(ptr x, ptr y, i64 n)`: y[i] = clip(horner(coeffs, x[i]), -1, 1) in float32."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), name)
    fn.linkage = "internal"
    x, y, n = fn.args

    def body(b: ir.IRBuilder, i: ir.Value) -> None:
        v = b.load(b.gep(x, [i], inbounds=True, source_etype=F32), typ=F32)
        acc = ir.Constant(F32, coeffs[0])
        for c in coeffs[1:]:
            acc = b.fadd(b.fmul(acc, v), ir.Constant(F32, c))
        low, high = ir.Constant(F32, -1.0), ir.Constant(F32, 1.0)
        acc = b.select(b.fcmp_ordered("<", acc, low), low, acc)
        acc = b.select(b.fcmp_ordered(">", acc, high), high, acc)
        b.store(acc, b.gep(y, [i], inbounds=True, source_etype=F32))

    _loop(fn, n, body).ret_void()
    return fn


def _sum_kernel(module: ir.Module) -> ir.Function:
    """internal `sum(ptr y, i64 n) -> float` with a reassoc add, so the loop vectorizes."""
    fn = ir.Function(module, ir.FunctionType(F32, [PTR, I64]), "sum")
    fn.linkage = "internal"
    y, n = fn.args
    zero, totals = ir.Constant(F32, 0.0), []

    def body(b: ir.IRBuilder, i: ir.Value) -> None:
        acc = b.phi(F32)
        acc.add_incoming(zero, fn.blocks[0])
        total = b.fadd(acc, b.load(b.gep(y, [i], inbounds=True, source_etype=F32), typ=F32))
        total.flags.append("reassoc")
        acc.add_incoming(total, b.block)
        totals.append(total)

    b = _loop(fn, n, body)
    result = b.phi(F32)
    result.add_incoming(zero, fn.blocks[0])
    result.add_incoming(totals[0], fn.blocks[1])
    b.ret(result)
    return fn


def chain_module(layers: list[list[float]], name: str = "chain") -> str:
    """A realistic module: `name(ptr x, ptr t, i64 n) -> float` runs one loop per layer (t = p_k(...p_1(x))),
    then a vectorized sum of t, through internal helpers; a few hundred lines of IR for 8 layers."""
    module = ir.Module(name)
    kernels = [_poly_kernel(module, f"layer{k}", c) for k, c in enumerate(layers)]
    total = _sum_kernel(module)
    fn = ir.Function(module, ir.FunctionType(F32, [PTR, PTR, I64]), name)
    x, t, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for k, kernel in enumerate(kernels):
        b.call(kernel, [x if k == 0 else t, t, n])
    b.ret(b.call(total, [t, n]))
    return str(module)


def chain_reference(layers: list[list[float]], x: np.ndarray) -> tuple[np.ndarray, float]:
    t = x.astype(np.float32)
    for coeffs in layers:
        acc = np.full_like(t, coeffs[0])
        for c in coeffs[1:]:
            acc = acc * t + np.float32(c)
        t = np.minimum(np.maximum(acc, np.float32(-1.0)), np.float32(1.0))
    return t, float(t.astype(np.float64).sum())


def layers_for(seed: int, count: int = 8, degree: int = 6) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [list(map(float, rng.uniform(-0.5, 0.5, degree + 1).astype(np.float32))) for _ in range(count)]


def run_chain(library: jit.Library, x: np.ndarray, name: str = "chain") -> tuple[np.ndarray, float]:
    t = np.empty_like(x)
    total = CHAIN(library.address(name))(x.ctypes.data, t.ctypes.data, x.size)
    return t, total


def check_chain(library: jit.Library, layers: list[list[float]], n: int = 1000, name: str = "chain") -> None:
    x = np.linspace(-1.5, 1.5, n, dtype=np.float32)
    got, total = run_chain(library, x, name)
    want, want_total = chain_reference(layers, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert total == pytest.approx(want_total, rel=1e-4, abs=1e-3)


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", "0")


def test_target_is_the_host():
    t = jit.target()
    assert t.triple == llvm.get_process_triple() and t.cpu == llvm.get_host_cpu_name()
    assert t.features == llvm.get_host_cpu_features().flatten() and t.data_layout.startswith("e-")


def test_compiles_a_module_at_o3_with_vectorized_loops():
    layers = layers_for(0)
    text = chain_module(layers)
    assert 200 <= text.count("\n") <= 800, "the test module is meant to be a few hundred lines of IR"
    lib = jit.compile_ir(text, {}, "chain")
    check_chain(lib, layers)
    assert lib.ir == text and not lib.from_cache and 0 < lib.compile_seconds < 10
    assert "x float>" in lib.optimized_ir, "the loops were not vectorized"
    assert "chain:" in lib.asm() and "layer0" not in lib.asm(), "internal helpers should be inlined"
    lib.close()


def test_the_module_name_and_triple_in_the_text_do_not_matter():
    """llvmlite prints `unknown-unknown-unknown` for a module without a triple: the host's replaces it."""
    layers = layers_for(1)
    text = chain_module(layers)
    assert 'target triple = "unknown-unknown-unknown"' in text
    lib = jit.compile_ir(text, {}, "chain")
    check_chain(lib, layers)
    assert f'target triple = "{jit.target().triple}"' in lib.optimized_ir
    lib.close()


def test_one_name_compiled_twice_gives_two_independent_libraries():
    a_layers, b_layers = layers_for(2), layers_for(3)
    a = jit.compile_ir(chain_module(a_layers), {}, "chain")
    b = jit.compile_ir(chain_module(b_layers), {}, "chain")
    assert a.library != b.library and a.address("chain") != b.address("chain")
    a.close()
    check_chain(b, b_layers)
    with pytest.raises(RuntimeError, match="closed"):
        a.address("chain")
    b.close()
    b.close()  # idempotent


def _callout_module(callee: str) -> str:
    """`apply(ptr x, i64 n)`: x[i] = callee(x[i]) in float64, `callee` declared external."""
    module = ir.Module("callout")
    f64 = ir.DoubleType()
    ext = ir.Function(module, ir.FunctionType(f64, [f64]), callee)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64]), "apply")
    x, n = fn.args

    def body(b: ir.IRBuilder, i: ir.Value) -> None:
        p = b.gep(x, [i], inbounds=True, source_etype=f64)
        b.store(b.call(ext, [b.load(p, typ=f64)]), p)

    _loop(fn, n, body).ret_void()
    return str(module)


APPLY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


def test_imported_symbols_and_the_process_symbols_resolve():
    """`symbols` (BLAS addresses in the backend) bind external names; libm's functions resolve too."""
    twice = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(lambda v: 2 * v + 1)
    address = ctypes.cast(twice, ctypes.c_void_p).value
    lib = jit.compile_ir(_callout_module("ember_test_twice"), {"ember_test_twice": address}, "apply")
    x = np.arange(5.0)
    APPLY(lib.address("apply"))(x.ctypes.data, x.size)
    np.testing.assert_array_equal(x, 2 * np.arange(5.0) + 1)
    lib.close()
    lib = jit.compile_ir(_callout_module("cos"), {}, "apply")
    x = np.linspace(0, 3, 7)
    APPLY(lib.address("apply"))(x.ctypes.data, x.size)
    np.testing.assert_allclose(x, np.cos(np.linspace(0, 3, 7)), rtol=1e-15)
    lib.close()


def test_a_missing_symbol_is_a_clear_error():
    with pytest.raises(RuntimeError, match="ember_test_absent.*`symbols`"):
        jit.compile_ir(_callout_module("ember_test_absent"), {}, "apply")


def test_invalid_ir_raises_and_leaves_the_jit_usable():
    with pytest.raises(RuntimeError):
        jit.compile_ir("define void @f() {\n  ret i32 0\n}\n", {}, "f")
    layers = layers_for(4, count=1)
    lib = jit.compile_ir(chain_module(layers), {}, "chain")
    check_chain(lib, layers)
    lib.close()


def test_address_of_other_external_functions_and_unknown_names():
    module = ir.Module("two")
    for name, value in (("one", 1.0), ("two", 2.0)):
        fn = ir.Function(module, ir.FunctionType(F32, []), name)
        ir.IRBuilder(fn.append_basic_block()).ret(ir.Constant(F32, value))
    lib = jit.compile_ir(str(module), {}, "one")
    ret = ctypes.CFUNCTYPE(ctypes.c_float)
    assert ret(lib.address("two"))() == 2.0
    del ret  # the lookup's tracker (which would free the library if dropped) is kept by the library
    assert ctypes.CFUNCTYPE(ctypes.c_float)(lib.address("one"))() == 1.0
    with pytest.raises(KeyError, match="nope"):
        lib.address("nope")
    lib.close()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/statm")
def test_closing_libraries_frees_their_code(tmp_path, monkeypatch):
    """A bounded jit cache evicts by closing: code of closed libraries is freed, so memory stays flat
    (ORC keeps only ~9 KB of bookkeeping per library), while open ones hold their code."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    text = chain_module(layers_for(5, count=60, degree=12))
    jit.compile_ir(text, {}, "chain").close()  # warm: compiled and cached; the loop below links
    code_bytes = next(tmp_path.rglob("*.o")).stat().st_size
    assert code_bytes > 50_000
    for _ in range(20):
        jit.compile_ir(text, {}, "chain").close()
    start, rounds = _rss_bytes(), 100
    for _ in range(rounds):
        lib = jit.compile_ir(text, {}, "chain")
        assert lib.from_cache
        lib.close()
    per_library = (_rss_bytes() - start) / rounds
    assert per_library < 32_000 < code_bytes / 2, f"{per_library:.0f} bytes stayed per closed library"
    start, held = _rss_bytes(), [jit.compile_ir(text, {}, "chain") for _ in range(20)]
    assert (_rss_bytes() - start) / len(held) > code_bytes / 2, "open libraries should hold their code"
    for lib in held:
        lib.close()


def test_concurrent_compiles_from_threads_are_correct():
    """LLVM is not thread-safe: one lock serializes it, and every thread gets its own correct code."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def work(seed: int) -> None:
        try:
            barrier.wait()
            for k in range(3):
                layers = layers_for(100 + 10 * seed + k, count=2)
                lib = jit.compile_ir(chain_module(layers), {}, "chain")
                lib.asm()
                check_chain(lib, layers)
                lib.close()
        except BaseException as e:  # noqa: B036 - reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_compile_seconds_excludes_waiting_for_the_lock():
    """compile_seconds is this compile's work: a thread that waits 0.3 s for LLVM does not report it."""
    layers, results = layers_for(6, count=1), []
    thread = threading.Thread(target=lambda: results.append(jit.compile_ir(chain_module(layers), {}, "chain")))
    with jit.LLVM_LOCK:
        thread.start()
        thread.join(0.3)
        released = time.perf_counter()
    thread.join()
    after_release = time.perf_counter() - released
    assert results[0].compile_seconds <= after_release + 0.05
    results[0].close()
