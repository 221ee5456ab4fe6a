"""`python -m ember.cache info|clear`: what the disk cache of compiled code holds, and emptying it.

The cache lives in `EMBER_CACHE_DIR` (default: the user cache directory, e.g. ~/.cache/ember; "" or 0:
off) and is capped at `EMBER_CACHE_MAX_BYTES` (default 1 GiB, 0: no cap), least recently used entries
evicted first; ember/backends/llvm/cache.py keeps it. Beside it the CUDA backend keeps its own compiled
code, uncapped: cubins in `<EMBER_CACHE_DIR>/cuda/` (ember/backends/cuda/nvrtc.py) and host builds of its
kernels in `<EMBER_CACHE_DIR>/cuda-host/` (ember/backends/cuda/host.py); `info` lists them and `clear`
empties them too. Nothing here imports CuPy.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ember.backends.cuda import host, nvrtc
from ember.backends.llvm import cache


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def _when(ns: int | None) -> str:
    if ns is None:
        return "-"
    return datetime.datetime.fromtimestamp(ns / 1e9).astimezone().isoformat(timespec="seconds")


class CudaCache(NamedTuple):
    """One of the CUDA backend's cache directories: its name in the output, what it holds, where it is now
    (None: the cache is off) and the suffix of its entries (`<sha256 hex><suffix>`)."""

    name: str
    holds: str
    directory: Callable[[], Path | None]
    suffix: str


CUDA_CACHES = (
    CudaCache("cuda", "NVRTC cubins", nvrtc.cache_dir, nvrtc.SUFFIX),
    CudaCache("cuda-host", "host builds of CUDA kernels", host.cache_dir, ".so"),
)


def cuda_entries(directory: Path, suffix: str) -> tuple[list, list]:
    """(entries, temporary files) of a CUDA cache directory, each (path, bytes, last modified ns); none
    when it does not exist. Files that vanish during the scan are left out."""
    return cache.scan(directory, suffix)


def _remove(path: Path) -> bool:
    """Unlink `path`; True if it is gone (also when another process removed it first)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def clear_cuda(directory: Path, suffix: str) -> tuple[int, int, int]:
    """Remove every entry of a CUDA cache directory, and temporary files of writers that died (an hour
    old); (entries removed, their bytes, entries that could not be removed). A process that loaded an entry
    keeps its copy (a mapping, or bytes in memory); a concurrent compile rewrites its entry whole."""
    entries, temps = cuda_entries(directory, suffix)
    removed = size = failed = 0
    for path, n, _ in entries:
        if _remove(path):
            removed, size = removed + 1, size + n
        else:
            failed += 1
    stale = time.time_ns() - cache.STALE_TEMP_SECONDS * 10**9
    for path, _, mtime in temps:
        if mtime < stale:
            _remove(path)
    return removed, size, failed


def _off() -> str:
    return f"the disk cache is off (EMBER_CACHE_DIR={os.environ.get('EMBER_CACHE_DIR')!r})"


def info() -> int:
    """Print the cache's directory, entries, bytes, cap and hit rate; the exit status."""
    found = cache.info()
    if found is None:
        print(_off())
        return 0
    cap = f"{_size(found.cap)} ({found.cap} bytes)" if found.cap else "none"
    print(f"directory: {found.directory}")
    print(f"entries:   {found.entries}")
    print(f"bytes:     {_size(found.bytes)} ({found.bytes} bytes)")
    print(f"cap:       {cap} (EMBER_CACHE_MAX_BYTES; least recently used evicted down to "
          f"{cache.LOW_WATER:.0%} of it)")
    print(f"last use:  oldest {_when(found.oldest_use_ns)}, newest {_when(found.newest_use_ns)}")
    if found.hits is None or found.hits + found.misses == 0:
        print("hit rate:  not recorded")
    else:
        total = found.hits + found.misses
        print(f"hit rate:  {found.hits / total:.1%} ({found.hits} hits, {found.misses} misses since the last clear)")
    blas = found.directory.parent / "blas"
    print(f"BLAS copy: {_size(found.blas_bytes)} in {blas} (never evicted, not counted against the cap)"
          if found.blas_bytes else "BLAS copy: none")
    for cuda in CUDA_CACHES:
        directory = cuda.directory()
        if directory is None:
            continue
        entries, _ = cuda_entries(directory, cuda.suffix)
        size = sum(n for _, n, _ in entries)
        print(f"{cuda.name + ':':<10} {len(entries)} entries, {_size(size)} ({size} bytes) in {directory} "
              f"({cuda.holds}; no cap)")
    return 0


def clear() -> int:
    """Remove every entry; the exit status (1 if some could not be removed)."""
    directory = cache.cache_dir()
    if directory is None:
        print(_off() + ": nothing to clear")
        return 0
    removed, size, failed = cache.clear(directory)
    print(f"removed {removed} entries ({_size(size)}) from {directory}")
    for cuda in CUDA_CACHES:
        directory = cuda.directory()
        if directory is None:
            continue
        removed, size, not_removed = clear_cuda(directory, cuda.suffix)
        print(f"removed {removed} entries ({_size(size)}) from {directory}")
        failed += not_removed
    if failed:
        print(f"error: {failed} entries could not be removed (permissions?)", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """The command line: `info` or `clear`; the exit status."""
    parser = argparse.ArgumentParser(prog="python -m ember.cache", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="{info,clear}")
    commands.add_parser("info", help="entries, bytes, the cap, the directory and the hit rate (and the CUDA caches')")
    commands.add_parser("clear", help="remove every entry, the CUDA caches' too (safe while other processes use "
                        "them)")
    args = parser.parse_args(argv)
    try:
        return info() if args.command == "info" else clear()
    except ValueError as e:  # a malformed EMBER_CACHE_MAX_BYTES
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
