"""Kernel source run on the CPU: CUDA C compiled as host C++ with host.h, loaded with ctypes.

This is how every CUDA kernel is executed where there is no GPU (and checked against the oracle):
host.h runs each block's threads as real threads, so barriers, shared memory, shuffles and atomics
are executed, not skipped. A `HostModule` compiles many kernels in one g++ call; each kernel gets an
`extern "C"` launcher taking its arguments as cuLaunchKernel does (`args[i]` points at parameter i's
value). Builds are cached in memory and on disk (`<EMBER_CACHE_DIR>/cuda-host/<key>.so`, off with
the rest of the disk cache), keyed by the source, the header, the compiler's version and its flags.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ember.backends.cuda.prelude import HOST_HEADER_NAME, host_header
from ember.backends.llvm import cache

COMPILER = "g++"
# -ffp-contract=off: a*b+c stays two roundings, as the kernel source says. -fvisibility=hidden: only the
# launchers are exported, so the header's globals of two loaded modules never bind to each other.
# -Wall -Werror with nothing silenced: the header compiles clean, and a warning in a kernel is a bug.
FLAGS = ("-std=c++20", "-O0", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden", "-ffp-contract=off",
         "-Wall", "-Werror")
SOURCE_NAME = "kernels.cu"  # the name compiler messages give the kernel source (a #line directive)
CONTEXT_LINES = 3  # source lines shown either side of a line a compiler message names
MAX_EXCERPTS = 5
WARP = 32
MAX_BLOCK = 1024

# a scalar parameter's C type -> the NumPy dtype its argument must have
SCALAR_DTYPES = {
    "bool": np.dtype(bool),
    "signed char": np.dtype(np.int8),
    "unsigned char": np.dtype(np.uint8),
    "short": np.dtype(np.int16),
    "unsigned short": np.dtype(np.uint16),
    "int": np.dtype(np.int32),
    "unsigned": np.dtype(np.uint32),
    "unsigned int": np.dtype(np.uint32),
    "long long": np.dtype(np.int64),
    "unsigned long long": np.dtype(np.uint64),
    "ember_half": np.dtype(np.float16),
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict)\b")


@dataclass(frozen=True)
class KernelSig:
    """A kernel's name and its parameters' C types ("const float*", "long long"), in order."""

    name: str
    params: tuple[str, ...]

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"kernel name {self.name!r} is not a C identifier")
        object.__setattr__(self, "params", tuple(self.params))


class HostCompileError(RuntimeError):
    """g++ rejected a module: the message holds its output and the numbered source lines it names."""

    def __init__(self, output: str, excerpt: str):
        super().__init__(f"host compile of CUDA kernels failed:\n{output}\n{excerpt}".rstrip())
        self.output = output
        self.excerpt = excerpt


def _base_type(c_type: str) -> str:
    """`c_type` without qualifiers, with single spaces ("const float* __restrict__" -> "float*")."""
    return " ".join(_QUALIFIERS.sub(" ", c_type).replace("*", " * ").split()).replace(" *", "*")


def _launcher(sig: KernelSig) -> str:
    """The exported launcher of one kernel: runs the launch of a function that unpacks `args` and calls it."""
    call = ", ".join(f"ember_arg<{param}>(args, {i})" for i, param in enumerate(sig.params))
    return (f"static void ember_call_{sig.name}(void** args) {{ {sig.name}({call}); }}\n"
            f'extern "C" __attribute__((visibility("default"))) void ember_launch_{sig.name}('
            "unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, void** args) {\n"
            f"    ember_launch(dim3(gx, gy, gz), dim3(bx, by, bz), ember_call_{sig.name}, args);\n"
            "}\n")


def translation_unit(source: str, kernels: Sequence[KernelSig]) -> str:
    """The whole C++ file: the host header, the kernel source, the launchers (each under a #line, so a
    compiler message names host.h, kernels.cu or launchers.cpp and a line of that part)."""
    return "\n".join([f'#line 1 "{HOST_HEADER_NAME}"', host_header(), f'#line 1 "{SOURCE_NAME}"', source,
                      '#line 1 "launchers.cpp"', *map(_launcher, kernels)])


@functools.cache
def compiler_version() -> str:
    """The first line of `g++ --version` (part of the cache key); a clear error when there is no g++."""
    if shutil.which(COMPILER) is None:
        raise RuntimeError(f"running CUDA kernels on the CPU needs a C++20 compiler: {COMPILER} was not found "
                           "(apt-get install g++)")
    return subprocess.run([COMPILER, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]


def _key(unit: str) -> str:
    h = hashlib.sha256()
    for part in (unit, compiler_version(), *FLAGS):
        data = part.encode()
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def cache_dir() -> Path | None:
    """Where host builds live on disk (beside the llvm backend's entries), or None when the cache is off."""
    llvm = cache.cache_dir()
    return None if llvm is None else llvm.parent / "cuda-host"


def _excerpt(output: str, source: str) -> str:
    """The numbered lines of `source` around each kernels.cu line the compiler output names."""
    lines = source.splitlines()
    named = sorted({int(n) for n in re.findall(re.escape(SOURCE_NAME) + r":(\d+)", output)})[:MAX_EXCERPTS]
    blocks = []
    for line in named:
        lo, hi = max(1, line - CONTEXT_LINES), min(len(lines), line + CONTEXT_LINES)
        blocks.append("\n".join(f"{'>' if n == line else ' '}{n:5d} | {lines[n - 1]}" for n in range(lo, hi + 1)))
    return "\n...\n".join(blocks)


def _compile(unit: str, source: str, target: Path) -> None:
    """g++ `unit` into the shared library `target`; HostCompileError with its output on failure."""
    with tempfile.TemporaryDirectory(prefix="ember-cuda-host-") as work:
        cpp = Path(work) / "module.cpp"
        cpp.write_text(unit)
        done = subprocess.run([COMPILER, *FLAGS, str(cpp), "-o", str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        raise HostCompileError(done.stdout + done.stderr, _excerpt(done.stdout + done.stderr, source))


def _load_from_disk(path: Path) -> ctypes.CDLL | None:
    """The cached library at `path`, or None (absent, or damaged: a miss, rebuilt over it); a cache that
    other users may write is refused (cache.check_trusted: its code would run in this process)."""
    if not path.exists():
        return None
    cache.check_trusted(path.parent)
    cache.check_trusted(path)
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        return None


def _build(unit: str, source: str, directory: Path | None, key: str) -> ctypes.CDLL:
    """Compile and load; with a cache directory the library is written there under a temporary name and
    renamed into place (atomic), so another process finds a whole file or none."""
    if directory is not None:
        try:
            directory.mkdir(mode=0o755, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".so")
            os.close(fd)
        except OSError:
            directory = None
    if directory is None:
        with tempfile.TemporaryDirectory(prefix="ember-cuda-host-") as work:
            target = Path(work) / "module.so"
            _compile(unit, source, target)
            return ctypes.CDLL(str(target))  # the mapping outlives the file
    try:
        _compile(unit, source, Path(tmp))
        final = directory / f"{key}.so"
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return ctypes.CDLL(str(final))


_LOADED: dict[str, ctypes.CDLL] = {}  # key -> the loaded library, for the life of the process
_LOCK = threading.Lock()


class HostModule:
    """Kernels compiled for the CPU. `compile_seconds`: what getting the library took (a compile, or a
    load); `from_cache`: whether it came from the memory or disk cache."""

    def __init__(self, source: str, kernels: Sequence[KernelSig]):
        start = time.perf_counter()
        self.kernels = {sig.name: sig for sig in kernels}
        unit = translation_unit(source, kernels)
        key = _key(unit)
        with _LOCK:
            library = _LOADED.get(key)
            directory = cache_dir()
            if library is None and directory is not None:
                library = _load_from_disk(directory / f"{key}.so")
            self.from_cache = library is not None
            if library is None:
                library = _build(unit, source, directory, key)
            _LOADED[key] = library
        self._launchers = {name: self._launcher(library, name) for name in self.kernels}
        self.compile_seconds = time.perf_counter() - start

    @staticmethod
    def _launcher(library: ctypes.CDLL, name: str):
        function = getattr(library, f"ember_launch_{name}")
        function.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_void_p]
        function.restype = None
        return function

    def launch(self, name: str, grid: tuple[int, int, int], block: tuple[int, int, int], args: Sequence) -> None:
        """Run kernel `name` over `grid` blocks of `block` threads, on the calling thread (it returns when
        the launch is done). An argument is a NumPy array (its data pointer is passed) or a NumPy scalar
        of the parameter's exact type."""
        sig = self.kernels.get(name)
        if sig is None:
            raise KeyError(f"no kernel {name!r} in this module (it has {', '.join(self.kernels) or 'none'})")
        _check_dims(grid, block)
        if len(args) != len(sig.params):
            raise TypeError(f"kernel {name} takes {len(sig.params)} arguments ({', '.join(sig.params)}), "
                            f"got {len(args)}")
        values = [_argument(name, i, param, arg) for i, (param, arg) in enumerate(zip(sig.params, args))]
        pointers = (ctypes.c_void_p * max(1, len(values)))(*(ctypes.addressof(v) for v in values))
        self._launchers[name](*grid, *block, pointers)


def _check_dims(grid: Sequence[int], block: Sequence[int]) -> None:
    if len(grid) != 3 or len(block) != 3 or min(*grid, *block) < 1:
        raise ValueError(f"grid {tuple(grid)} and block {tuple(block)} must be three positive ints each")
    threads = block[0] * block[1] * block[2]
    if threads % WARP or threads > MAX_BLOCK:
        raise ValueError(f"block {tuple(block)} has {threads} threads: host execution runs blocks of a "
                         f"multiple of {WARP} threads up to {MAX_BLOCK}")


def _argument(kernel: str, i: int, param: str, arg) -> ctypes.c_void_p | ctypes.Array:
    """Parameter `i`'s value as a ctypes object whose address goes in the launch's `args`."""
    base = _base_type(param)
    if base.endswith("*"):
        if not isinstance(arg, np.ndarray):
            raise TypeError(f"kernel {kernel} argument {i} ({param}) must be a NumPy array, got {type(arg).__name__}")
        element = SCALAR_DTYPES.get(base[:-1])
        if element is not None and arg.dtype != element:
            raise TypeError(f"kernel {kernel} argument {i} ({param}) must be a {element} array, got {arg.dtype}")
        return ctypes.c_void_p(arg.ctypes.data)
    dtype = SCALAR_DTYPES.get(base)
    if dtype is None:
        raise TypeError(f"kernel {kernel} parameter {i} has C type {param!r}, which host execution cannot pass")
    if not isinstance(arg, np.generic) or arg.dtype != dtype:
        got = f"np.{arg.dtype}" if isinstance(arg, np.generic) else type(arg).__name__
        raise TypeError(f"kernel {kernel} argument {i} ({param}) must be a NumPy {dtype} scalar "
                        f"(np.{dtype}(...)), got {got}")
    return (ctypes.c_char * dtype.itemsize).from_buffer_copy(arg.tobytes())
