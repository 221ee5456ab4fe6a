"""The BLAS (and LAPACK, for lapack.py) that generated code calls (SciPy's OpenBLAS), and the threads each
call runs on.

Ember sets the thread count of its own BLAS calls: a product below 2 * PER_THREAD_MNK multiply-adds
runs on one thread, a larger one on up to `ember.config.num_threads` (read at call time). OpenBLAS
keeps one count per library instance: `openblas_set_num_threads_local` in the OpenBLAS SciPy ships
(0.3.30) sets that global count too and returns the previous one, so no setter is per thread. To
leave the count of the user's own SciPy calls alone (and not race with them), Ember loads a private
instance of SciPy's OpenBLAS from a copy of its file: the dynamic linker tells libraries apart by
file, so the copy has its own globals (its references to them bind inside it: protected symbols) and
its own thread pool. Generated code sets that instance's count before each call. The file is found
without importing scipy.linalg (50-200 ms at first use); without it (no wheel-bundled OpenBLAS, or
the copy cannot be written or loaded), the calls go to SciPy's BLAS itself, on OpenBLAS's own thread
rule, and `thread_control()` says so.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import ember.config as config
from ember.backends import one_time
from ember.backends.llvm import cache

# A product of m*n*k multiply-adds gets at most m*n*k // PER_THREAD_MNK threads: below 2**20 one.
# Measured with sgemm of this OpenBLAS on this 2-core machine (AVX-512), 1 vs 2 threads, min of 5
# samples, quiet and beside a busy process pinned to the other core: no gain at 64**3 (262144),
# 80**3 (512000) and 96**3 (884736); from 2**20 on, 2 threads take 0.55-0.8x the time of one
# (256x64x64 0.59x, 128**3 0.75-0.8x, 256**3 0.57x), but beside the busy process 160**3 and 192**3
# took 22 ms instead of 0.09-0.14 ms in some samples (a worker thread descheduled).
PER_THREAD_MNK = 2 ** 19

BLAS_ROUTINES = ("sgemm", "dgemm", "sgemv", "dgemv", "strsm", "dtrsm")
LAPACK_ROUTINES = ("spotrf", "dpotrf", "sgetrf", "dgetrf", "sgeqrf", "dgeqrf", "sorgqr", "dorgqr", "ssyevd", "dsyevd",
                   "sgesdd", "dgesdd")  # lapack.py's; the same library carries them
ROUTINES = BLAS_ROUTINES + LAPACK_ROUTINES
SET_THREADS = "ember_blas_set_threads"  # void(i32): the count for the calls that follow
NUM_THREADS = "ember_blas_num_threads"  # i32: config.num_threads, copied here by config.update
_PREFIX = "ember_blas_"
_LIBRARY_GLOB = "libscipy_openblas*.so"  # scipy.libs in SciPy's Linux wheels (LP64: 32-bit ints)

_cell = ctypes.c_int(config.num_threads)  # what generated code reads: config.num_threads, kept in step


def symbol(routine: str) -> str:
    """The name generated code calls `routine` (sgemm, ...) by."""
    return _PREFIX + routine


def uses_blas(ir_text: str) -> bool:
    return _PREFIX in ir_text


def _follow(n: int) -> None:
    """Copy a new `ember_num_threads` where generated code reads it (config.update calls this)."""
    _cell.value = n


config.watch("ember_num_threads", _follow)


def threads_for(mnk: int) -> int:
    """The threads a product of `mnk` multiply-adds runs on now."""
    return max(1, min(config.num_threads, mnk // PER_THREAD_MNK))


def emit_threads(builder, mnk: int) -> None:
    """Emit, before a BLAS call, setting Ember's instance to the threads a product of `mnk`
    multiply-adds runs on: 1, or min(config.num_threads, mnk // PER_THREAD_MNK) read at call time."""
    from llvmlite import ir

    from ember.backends.llvm.types import I32

    module = builder.module
    setter = module.globals.get(SET_THREADS) or ir.Function(module, ir.FunctionType(ir.VoidType(), [I32]),
                                                            SET_THREADS)
    most = min(mnk // PER_THREAD_MNK, 2 ** 31 - 1)
    if most <= 1:
        builder.call(setter, [ir.Constant(I32, 1)])
        return
    cell = module.globals.get(NUM_THREADS)
    if cell is None:
        cell = ir.GlobalVariable(module, I32, NUM_THREADS)
        cell.linkage = "external"
    n = builder.load(cell, align=4)
    cap = ir.Constant(I32, most)
    builder.call(setter, [builder.select(builder.icmp_signed("<", n, cap), n, cap)])


def symbols() -> dict[str, int]:
    """Symbol name -> address of everything code from `emit_threads` and dot.py calls or reads."""
    return dict(_bound())


def thread_control() -> bool:
    """Whether Ember's BLAS calls run on a private OpenBLAS instance whose thread count it sets."""
    return _private() is not None


def instance() -> ctypes.CDLL | None:
    """Ember's private OpenBLAS instance (for inspection and tests), or None without thread control."""
    return _private()


def scipy_library() -> Path | None:
    """The OpenBLAS file SciPy's wheel ships (the one scipy.linalg.cython_blas links), found without
    importing SciPy; None when there is not exactly one."""
    try:
        spec = importlib.util.find_spec("scipy")  # locates the package without running it
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted((Path(next(iter(spec.submodule_search_locations))).parent / "scipy.libs").glob(_LIBRARY_GLOB))
    return found[0] if len(found) == 1 else None


@one_time
def _bound() -> dict[str, int]:
    lib = _private()
    if lib is not None:
        setter = _address(lib, "scipy_openblas_set_num_threads")
    else:
        setter = _noop_address()
        path = scipy_library()
        lib = _load(path) if path is not None else None
    routines = {symbol(r): _address(lib, f"scipy_{r}_") for r in ROUTINES} if lib is not None else _cython_blas()
    return {**routines, SET_THREADS: setter, NUM_THREADS: ctypes.addressof(_cell)}


@one_time
def _private() -> ctypes.CDLL | None:
    """A private instance of SciPy's OpenBLAS (loaded from a copy of its file), or None."""
    path = scipy_library()
    if path is None:
        return None
    try:
        lib = _load_copy(path)
    except OSError:
        return None
    if lib is None or not hasattr(lib, "scipy_openblas_set_num_threads"):
        return None
    return lib


def _load(path: Path) -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:
        return None
    return lib if all(hasattr(lib, f"scipy_{r}_") for r in ROUTINES) else None


def _load_copy(path: Path) -> ctypes.CDLL | None:
    """Load a copy of `path`: kept in Ember's cache directory (written once per SciPy build), else a
    temporary file removed once loaded (the mapping outlives the name)."""
    directory = cache.cache_dir()
    if directory is not None:
        try:
            return _load(_cached_copy(path, directory.parent / "blas"))
        except OSError:
            pass  # a read-only cache: a temporary copy
    fd, tmp = tempfile.mkstemp(prefix="ember-openblas-", suffix=".so")
    os.close(fd)
    try:
        shutil.copyfile(path, tmp)
        return _load(Path(tmp))
    finally:
        os.unlink(tmp)


def _cached_copy(path: Path, directory: Path) -> Path:
    st = path.stat()
    copy = directory / f"{path.stem}-{st.st_size}-{st.st_mtime_ns}.so"
    if copy.exists() and copy.stat().st_size == st.st_size:
        cache.check_trusted(directory)  # refused (an OSError): the caller loads a private temporary copy
        cache.check_trusted(copy)
        return copy
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".so")
    os.close(fd)
    try:
        shutil.copyfile(path, tmp)
        os.replace(tmp, copy)  # atomic: another process sees the whole file or none
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return copy


def _address(lib: ctypes.CDLL, name: str) -> int:
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def _cython_blas() -> dict[str, int]:
    """The routines' addresses from scipy.linalg.cython_blas and cython_lapack (imports scipy.linalg):
    the fallback."""
    from scipy.linalg import cython_blas, cython_lapack

    api = ctypes.pythonapi
    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", api))
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", api))
    caps = {**cython_blas.__pyx_capi__, **cython_lapack.__pyx_capi__}
    return {symbol(r): get_pointer(caps[r], get_name(caps[r])) for r in ROUTINES}


@functools.cache
def _noop_address() -> int:
    """A native `void(i32)` that does nothing: the thread setter without a private instance."""
    from ember.backends.llvm import jit

    name = "ember_blas_no_threads"
    _noop_library.append(jit.compile_ir(f'define void @"{name}"(i32 %n) {{\n  ret void\n}}\n', {}, name))
    return _noop_library[-1].address(name)


_noop_library: list = []  # keeps the no-op's code loaded
