"""The threads Ember's BLAS calls run on (blas.py): one for small products, up to config.num_threads for
large ones (read at call time), on a private OpenBLAS instance, so the user's SciPy and NumPy BLAS keep
their own thread counts, from several Python threads at once."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.backends.llvm import blas

pytestmark = pytest.mark.skipif(not blas.thread_control(), reason="no private OpenBLAS instance (no SciPy wheel)")

SMALL = (64, 64, 64)  # 262144 multiply-adds: one thread
MIDDLE = (96, 96, 96)  # 884736: still one (below 2 * PER_THREAD_MNK)
LARGE = (256, 256, 256)  # 16.8M: min(config.num_threads, 32)
FORTRAN_GEMM = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 13)


class Probe:
    """Stands in for sgemm: records the thread count of Ember's instance when BLAS is called, then
    runs the real routine."""

    def __init__(self):
        self.base = blas.symbols()
        self.real = FORTRAN_GEMM(self.base[blas.symbol("sgemm")])
        self.get = blas.instance().scipy_openblas_get_num_threads
        self.seen: list[int] = []
        self.callback = FORTRAN_GEMM(self._call)

    def _call(self, *args):
        self.seen.append(self.get())
        self.real(*args)

    def symbols(self) -> dict[str, int]:
        return {**self.base, blas.symbol("sgemm"): ctypes.cast(self.callback, ctypes.c_void_p).value}


@pytest.fixture
def probe(monkeypatch):
    """Executables compiled in the test bind sgemm to a Probe (the disk cache off: symbols are bound
    either way, but a fresh compile also covers the IR)."""
    monkeypatch.setenv("EMBER_CACHE_DIR", "")
    p = Probe()
    monkeypatch.setattr(blas, "symbols", p.symbols)
    old = ember.config.num_threads
    yield p
    ember.config.update("ember_num_threads", old)


def matmul(m: int, n: int, k: int):
    a = np.random.default_rng(0).standard_normal((m, k)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((k, n)).astype(np.float32)
    return ember.jit(lambda x, y: x @ y), a, b


def run(probe: Probe, f, a, b, before: int = 4) -> int:
    """The thread count sgemm saw in one call of f, with Ember's instance at `before` until then."""
    blas.instance().scipy_openblas_set_num_threads(before)
    probe.seen.clear()
    out = f(a, b)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4 * np.abs(a @ b).max())
    assert len(probe.seen) == 1, probe.seen
    return probe.seen[0]


@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_small_products_run_on_one_thread_and_large_ones_on_config_threads(probe, num_threads):
    ember.config.update("ember_num_threads", num_threads)
    for shape in (SMALL, MIDDLE):
        assert run(probe, *matmul(*shape)) == 1
    assert run(probe, *matmul(*LARGE)) == min(num_threads, 256 ** 3 // blas.PER_THREAD_MNK)


def test_the_count_of_large_products_is_read_at_call_time(probe):
    ember.config.update("ember_num_threads", 2)
    f, a, b = matmul(*LARGE)
    assert run(probe, f, a, b) == 2
    ember.config.update("ember_num_threads", 1)
    assert run(probe, f, a, b) == 1
    ember.config.update("ember_num_threads", 3)
    assert run(probe, f, a, b) == 3


def test_the_thread_rule():
    n = ember.config.num_threads
    assert blas.threads_for(2 * blas.PER_THREAD_MNK - 1) == 1
    assert blas.threads_for(2 * blas.PER_THREAD_MNK) == min(n, 2)
    assert blas.threads_for(10 ** 12) == n


def _library(package: str, pattern: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    found = sorted((Path(next(iter(spec.submodule_search_locations))).parent / f"{package}.libs").glob(pattern))
    return found[0] if len(found) == 1 else None


def user_counters() -> dict[str, tuple]:
    """(get, set) of the thread count of the user's own BLAS: SciPy's (the library scipy.linalg
    uses) and NumPy's (a separate OpenBLAS build, 64-bit ints)."""
    from scipy.linalg import blas as scipy_blas  # noqa: F401  the user's SciPy, loaded as a user loads it

    scipy_lib = ctypes.CDLL(str(blas.scipy_library()))  # the instance already loaded: same file
    out = {"scipy": (scipy_lib.scipy_openblas_get_num_threads, scipy_lib.scipy_openblas_set_num_threads)}
    numpy_path = _library("numpy", "libscipy_openblas64_*.so")
    if numpy_path is not None:
        lib = ctypes.CDLL(str(numpy_path))
        out["numpy"] = (lib.scipy_openblas_get_num_threads64_, lib.scipy_openblas_set_num_threads64_)
    return out


def test_the_users_blas_keeps_its_count_while_ember_calls_run_in_several_threads():
    counters = user_counters()
    old = {name: get() for name, (get, _) in counters.items()}
    user = {"scipy": 2, "numpy": 3}
    for name, (_, set_) in counters.items():
        set_(user[name])
    cases = [matmul(*shape) for shape in (SMALL, MIDDLE, LARGE)]
    for f, a, b in cases:
        f(a, b)  # compiled before the threads start
    seen: set[tuple[str, int]] = set()
    errors: list[BaseException] = []
    stop = threading.Event()

    def ember_calls(f, a, b):
        want = a @ b
        atol = 1e-4 * np.abs(want).max()
        try:
            for _ in range(30):
                np.testing.assert_allclose(f(a, b), want, rtol=1e-4, atol=atol)
        except BaseException as e:  # reported in the main thread
            errors.append(e)

    def user_calls():
        from scipy.linalg import blas as scipy_blas

        x = np.random.default_rng(2).standard_normal((200, 200)).astype(np.float32)
        while not stop.is_set():
            for name, (get, _) in counters.items():
                seen.add((name, get()))
            np.testing.assert_allclose(scipy_blas.sgemm(1.0, x, x), x @ x, rtol=1e-4, atol=1e-3)

    try:
        watchers = [threading.Thread(target=user_calls) for _ in range(2)]
        workers = [threading.Thread(target=ember_calls, args=case) for case in cases * 2]
        for t in watchers + workers:
            t.start()
        for t in workers:
            t.join()
        stop.set()
        for t in watchers:
            t.join()
        assert not errors, errors
        assert seen == {(name, user[name]) for name in counters}
        assert {name: get() for name, (get, _) in counters.items()} == {name: user[name] for name in counters}
    finally:
        stop.set()
        for name, (_, set_) in counters.items():
            set_(old[name])


def test_the_library_is_the_one_cython_blas_links_and_ember_runs_a_copy_of_it():
    from scipy.linalg import cython_blas  # noqa: F401  loads SciPy's OpenBLAS

    maps = Path("/proc/self/maps").read_text() if os.path.exists("/proc/self/maps") else ""
    if not maps:
        pytest.skip("no /proc/self/maps")
    mapped = {line.split(None, 5)[5] for line in maps.splitlines() if len(line.split(None, 5)) == 6}
    assert str(blas.scipy_library().resolve()) in mapped  # the file scipy.linalg loaded
    original = blas.scipy_library().resolve()
    copies = [p for p in mapped if Path(p).name.startswith(original.stem) and p != str(original)]
    assert copies, "Ember's instance should be mapped from a file of its own"
    routine = blas.symbols()[blas.symbol("sgemm")]
    assert routine == ctypes.cast(blas.instance().scipy_sgemm_, ctypes.c_void_p).value


def test_binding_blas_does_not_import_scipy_linalg(tmp_path):
    code = ("import sys, numpy as np, ember\n"
            "a = np.ones((64, 64), np.float32)\n"
            "assert (ember.jit(lambda x, y: x @ y)(a, a) == 64).all()\n"
            "from ember.backends.llvm import blas\n"
            "assert blas.thread_control()\n"
            "print(sorted(m for m in sys.modules if m.startswith('scipy.linalg')))\n")
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_a_private_instance_calls_go_to_scipys_blas(monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", "")
    monkeypatch.setattr(blas, "_private", lambda: None)
    blas._bound.cache_clear()
    try:
        assert not blas.thread_control()
        routine = blas.symbols()[blas.symbol("sgemm")]
        scipy_lib = ctypes.CDLL(str(blas.scipy_library()))
        assert routine == ctypes.cast(scipy_lib.scipy_sgemm_, ctypes.c_void_p).value
        f, a, b = matmul(*LARGE)
        np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-4, atol=1e-4 * np.abs(a @ b).max())
    finally:
        blas._bound.cache_clear()
