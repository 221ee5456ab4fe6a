"""CUDA C to cubin through NVRTC, with no GPU and no driver needed, cached in memory and on disk.

NVRTC is called directly through `cupy_backends.cuda.libs.nvrtc` (createProgram, compileProgram,
getCUBIN): CuPy's own `RawModule` compile asks the device for its architecture even when one is given,
so it fails where there is no driver. Every warning is an error: a compile whose log holds a warning
fails, as `-Werror=all-warnings` would make it, but that option is no help: NVRTC 13.5 accepts it,
13.0 (the GPU machines' wheel) rejects it as unrecognized, and neither takes nvcc's `--Werror`. A
failed compile raises `CudaCompileError` with NVRTC's log and the numbered source lines it points at.

A cubin is cached by the SHA-256 of (source, arch, options, NVRTC version): in memory for the process,
and on disk as `<EMBER_CACHE_DIR>/cuda/<key>.cubin` (default root: the user cache directory, e.g.
~/.cache/ember; `EMBER_CACHE_DIR=""` or `0` turns the disk cache off), in the llvm cache's entry format
(a header checked on load, so a damaged file is a miss) and written atomically (a temporary file renamed
over the entry). Reading or writing the disk cache never raises: a failure is a miss.

Nothing here imports CuPy until a compile (or `nvrtc_version()`) is asked for.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import tempfile
import threading
from pathlib import Path

from ember.backends.llvm.cache import CacheTrustError, check_trusted, decode, encode, user_cache_root
from ember.errors import EmberError

INSTALL = 'pip install -e ".[cuda]"'
# --fmad=false: no a*b+c contracted into an fma (the math algorithms place their own, NumPy rounds each op, and
# the host build compiles with -ffp-contract=off: both builds then compute the same bits); --device-int128:
# the float64 trig reduction's 128-bit products
OPTIONS = ("-std=c++17", "--fmad=false", "--device-int128")
WARNING = re.compile(r"\bwarning\b", re.IGNORECASE)  # a diagnostic of NVRTC's log that fails the compile
FORMAT = "ember-cubin 1"  # part of every key: bump when what a cubin depends on changes outside the key
SUFFIX = ".cubin"
_OFF = {"", "0"}
CONTEXT_LINES = 2  # source lines shown either side of a line the log points at
MAX_POINTED = 8  # at most this many pointed-at lines are shown (the log itself is always whole)


class CudaUnavailableError(EmberError, RuntimeError):
    """CuPy, NVRTC, the CUDA driver or a device is missing; the message says what to install or find."""


class CudaCompileError(EmberError):
    """NVRTC rejected a kernel source (an error, or a warning: all warnings are errors). `log` is
    NVRTC's log and `source` the source it compiled."""

    def __init__(self, message: str, log: str = "", source: str = ""):
        self.log = log
        self.source = source
        super().__init__(message)


def _nvrtc():
    """CuPy's NVRTC binding, imported on first use; CudaUnavailableError if CuPy is not installed."""
    try:
        nvrtc = importlib.import_module("cupy_backends.cuda.libs.nvrtc")
    except ImportError as e:
        raise CudaUnavailableError(f"the CUDA backend needs CuPy and NVRTC: {INSTALL} (CuPy is cupy-cuda13x, "
                                   f"the NVRTC wheel nvidia-cuda-nvrtc); importing CuPy failed: {e}") from e
    return nvrtc


_version: tuple[int, int] | None = None


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library that compiles; CudaUnavailableError if it cannot be loaded."""
    global _version
    if _version is None:
        nvrtc = _nvrtc()
        try:
            _version = tuple(nvrtc.getVersion())
        except Exception as e:  # the shared library is loaded here: a missing one raises whatever CuPy raises
            raise CudaUnavailableError(f"NVRTC could not be loaded ({type(e).__name__}: {e}): {INSTALL} installs "
                                       "the NVRTC wheel, nvidia-cuda-nvrtc") from e
    return _version


def options(arch: str) -> list[str]:
    """The NVRTC options of a compile for `arch` (e.g. "sm_90")."""
    return [f"-arch={arch}", *OPTIONS]


def cache_key(source: str, arch: str, opts: list[str], version: tuple[int, int], name: str) -> str:
    """The hex SHA-256 naming a cubin: everything that shapes it, each part length-prefixed."""
    h = hashlib.sha256()
    for part in (FORMAT, source, arch, "\0".join(opts), f"nvrtc {version[0]}.{version[1]}", name):
        data = part.encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def cache_dir() -> Path | None:
    """Where cubins live on disk now, or None when `EMBER_CACHE_DIR` turns the cache off."""
    root = os.environ.get("EMBER_CACHE_DIR")
    if root is not None and root.strip() in _OFF:
        return None
    return (Path(root).expanduser() if root is not None else user_cache_root()) / "cuda"


def _disk_load(key: str) -> bytes | None:
    directory = cache_dir()
    if directory is None:
        return None
    check_trusted(directory)
    path = directory / (key + SUFFIX)
    try:
        with open(path, "rb") as f:
            check_trusted(path, os.fstat(f.fileno()))
            return decode(key, f.read())
    except CacheTrustError:
        raise
    except OSError:
        return None


def _disk_store(key: str, cubin: bytes) -> None:
    directory = cache_dir()
    if directory is None:
        return
    tmp = None
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=SUFFIX)
        with os.fdopen(fd, "wb") as f:
            f.write(encode(key, cubin))
        os.replace(tmp, directory / (key + SUFFIX))
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


_memory: dict[str, bytes] = {}
_lock = threading.Lock()
stats = {"compiles": 0, "disk_hits": 0, "memory_hits": 0}  # counts of this process, for tests and reports


def clear_memory_cache() -> None:
    """Forget the cubins compiled in this process (the disk cache stays)."""
    with _lock:
        _memory.clear()


def compile_cubin(source: str, arch: str = "sm_90", name: str = "ember.cu") -> bytes:
    """The cubin of CUDA C `source` for `arch`, every warning an error; from the memory or disk cache
    when this source was compiled before. CudaCompileError with the log if NVRTC rejects it or warns."""
    opts = options(arch)
    key = cache_key(source, arch, opts, nvrtc_version(), name)
    with _lock:
        cubin = _memory.get(key)
        if cubin is not None:
            stats["memory_hits"] += 1
            return cubin
    cubin = _disk_load(key)
    if cubin is not None:
        stats["disk_hits"] += 1
    else:
        cubin = _compile(source, opts, name)
        stats["compiles"] += 1
        _disk_store(key, cubin)
    with _lock:
        _memory[key] = cubin
    return cubin


def _compile(source: str, opts: list[str], name: str) -> bytes:
    """One NVRTC compile; the program is destroyed whatever happens."""
    nvrtc = _nvrtc()
    prog = nvrtc.createProgram(source, name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError as e:
            log = nvrtc.getProgramLog(prog)
            raise CudaCompileError(compile_message(name, opts, str(e), log, source), log, source) from None
        log = nvrtc.getProgramLog(prog)
        if WARNING.search(log):
            status = "a warning, and warnings are errors"
            raise CudaCompileError(compile_message(name, opts, status, log, source), log, source)
        return nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)


def pointed_lines(log: str, name: str) -> list[int]:
    """The source lines NVRTC's log points at (`name(LINE): error ...`), in order, each once."""
    seen = dict.fromkeys(int(m) for m in re.findall(re.escape(name) + r"\((\d+)\)", log))
    return list(seen)


def numbered_excerpt(source: str, lines: list[int]) -> str:
    """The source lines around each of `lines` (1-based), numbered, the pointed-at ones marked `>`."""
    text = source.splitlines()
    shown: list[int] = []
    for line in lines[:MAX_POINTED]:
        for n in range(max(1, line - CONTEXT_LINES), min(len(text), line + CONTEXT_LINES) + 1):
            if n not in shown:
                shown.append(n)
    shown.sort()
    width = len(str(shown[-1])) if shown else 1
    out, previous = [], None
    for n in shown:
        if previous is not None and n != previous + 1:
            out.append("  " + "...")
        out.append(f"{'>' if n in lines else ' '} {n:>{width}} | {text[n - 1]}")
        previous = n
    return "\n".join(out)


def compile_message(name: str, opts: list[str], status: str, log: str, source: str) -> str:
    """CudaCompileError's text: what failed, NVRTC's log, then the source lines it points at."""
    message = f"NVRTC could not compile {name} ({' '.join(opts)}): {status}\n{log.rstrip()}"
    lines = pointed_lines(log, name)
    if lines:
        message += "\n\nsource lines the log points at:\n" + numbered_excerpt(source, lines)
    return message
