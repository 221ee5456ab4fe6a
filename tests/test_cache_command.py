"""`python -m ember.cache info|clear` (ember/cache.py): its output and exit statuses, the CUDA backend's
caches beside the llvm one (cubins and host builds, written by the backend's own code, never importing
CuPy), and that the test suite's disk cache is a temporary directory, never the user's."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import ember.cache as ember_cache
from ember.backends.cuda import nvrtc
from ember.backends.cuda.host import HostModule, KernelSig
from ember.backends.llvm import cache

ROOT = Path(__file__).resolve().parent.parent


def command(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ember.cache", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def fill(root: Path, count: int) -> int:
    """Store `count` entries under `root` and load each twice (hits) and a missing one (a miss) in a
    child process, so its counts reach the state file at exit; their bytes."""
    code = ("from ember.backends.llvm import cache\n"
            f"for i in range({count}):\n"
            "    assert cache.store(f'{i:064x}', bytes(100 + i))\n"
            "    assert cache.load(f'{i:064x}') == bytes(100 + i) == cache.load(f'{i:064x}')\n"
            "assert cache.load('ff' * 32) is None\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={**os.environ, "EMBER_CACHE_DIR": str(root)})
    return sum(cache.HEADER.size + 100 + i for i in range(count))


KERNEL = 'extern "C" __global__ void cache_command_ones(float* x) { x[threadIdx.x] = 1.0f; }\n'


@functools.cache
def host_build() -> tuple[str, bytes]:
    """The file name and bytes of a host build made by host.py (once: later ones of this process come from
    its memory cache and write nothing)."""
    with tempfile.TemporaryDirectory() as root, pytest.MonkeyPatch.context() as patch:
        patch.setenv("EMBER_CACHE_DIR", root)
        HostModule(KERNEL, [KernelSig("cache_command_ones", ("float*",))])
        (build,) = entries(Path(root) / "cuda-host")
        return build.name, build.read_bytes()


def fill_cuda(root: Path) -> tuple[int, int]:
    """One cubin stored as nvrtc.py stores it, one host build as host.py makes it, and beside them files that
    are not entries (a stranger, a temporary file being written, one a dead writer left an hour ago);
    (cubin bytes, host build bytes)."""
    old = time.time() - cache.STALE_TEMP_SECONDS - 60
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EMBER_CACHE_DIR", str(root))
        nvrtc._disk_store("ab" * 32, bytes(1000))
    name, data = host_build()
    (root / "cuda-host").mkdir()
    (root / "cuda-host" / name).write_bytes(data)
    for name in ("cuda", "cuda-host"):
        suffix = ".cubin" if name == "cuda" else ".so"
        (root / name / "notes.txt").write_text("not an entry")
        (root / name / f".tmp-writing{suffix}").write_bytes(bytes(10))
        (root / name / f".tmp-dead{suffix}").write_bytes(bytes(10))
        os.utime(root / name / f".tmp-dead{suffix}", (old, old))
    (cubin,) = entries(root / "cuda")
    (build,) = entries(root / "cuda-host")
    return cubin.stat().st_size, build.stat().st_size


def entries(directory: Path) -> list[Path]:
    """The files of a CUDA cache directory named as entries are (a SHA-256 in hex and a suffix)."""
    return [p for p in directory.iterdir() if len(p.stem) == 64 and p.suffix in (".cubin", ".so")]


def cuda_lines(root: Path, cubin: tuple[int, str], build: tuple[int, str]) -> str:
    """info's lines for the CUDA caches holding (entries, bytes as _size writes them) each."""
    host = "host builds of CUDA kernels"
    return (f"cuda:      {cubin[0]} entries, {cubin[1]} in {root / 'cuda'} (NVRTC cubins; no cap)\n"
            f"cuda-host: {build[0]} entries, {build[1]} in {root / 'cuda-host'} ({host}; no cap)\n")


def test_info_of_an_empty_cache(tmp_path):
    out = command("info", EMBER_CACHE_DIR=str(tmp_path), EMBER_CACHE_MAX_BYTES="5M")
    assert out.returncode == 0, out.stderr
    assert f"directory: {tmp_path / 'llvm'}\n" in out.stdout
    assert "entries:   0\n" in out.stdout and "bytes:     0 bytes (0 bytes)" in out.stdout
    assert "cap:       5.0 MiB (5242880 bytes)" in out.stdout and "hit rate:  not recorded" in out.stdout
    assert out.stdout.endswith(cuda_lines(tmp_path, (0, "0 bytes (0 bytes)"), (0, "0 bytes (0 bytes)")))


def test_info_lists_the_cuda_caches_without_importing_cupy(tmp_path):
    cubin, build = fill_cuda(tmp_path)
    code = ("import sys, ember.cache\n"
            "status = ember.cache.main(['info'])\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('cupy', 'cupy_backends')], 'cupy imported'\n"
            "sys.exit(status)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "EMBER_CACHE_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert "entries:   0\n" in out.stdout  # the llvm cache counts none of them
    assert out.stdout.endswith(cuda_lines(tmp_path, (1, f"{ember_cache._size(cubin)} ({cubin} bytes)"),
                                          (1, f"{ember_cache._size(build)} ({build} bytes)")))


def test_clear_removes_the_cuda_entries_and_dead_writers_files(tmp_path):
    size = fill(tmp_path, 2)
    cubin, build = fill_cuda(tmp_path)
    out = command("clear", EMBER_CACHE_DIR=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout == (f"removed 2 entries ({size} bytes) from {tmp_path / 'llvm'}\n"
                          f"removed 1 entries ({ember_cache._size(cubin)}) from {tmp_path / 'cuda'}\n"
                          f"removed 1 entries ({ember_cache._size(build)}) from {tmp_path / 'cuda-host'}\n")
    assert sorted(p.name for p in (tmp_path / "cuda").iterdir()) == [".tmp-writing.cubin", "notes.txt"]
    assert sorted(p.name for p in (tmp_path / "cuda-host").iterdir()) == [".tmp-writing.so", "notes.txt"]
    after = command("info", EMBER_CACHE_DIR=str(tmp_path))
    assert after.stdout.endswith(cuda_lines(tmp_path, (0, "0 bytes (0 bytes)"), (0, "0 bytes (0 bytes)")))


def test_info_counts_entries_bytes_and_the_hit_rate(tmp_path):
    size = fill(tmp_path, 10)
    out = command("info", EMBER_CACHE_DIR=str(tmp_path), EMBER_CACHE_MAX_BYTES="0")
    assert out.returncode == 0, out.stderr
    assert "entries:   10\n" in out.stdout and f"({size} bytes)" in out.stdout
    assert "cap:       none" in out.stdout
    assert "hit rate:  95.2% (20 hits, 1 misses since the last clear)" in out.stdout


def test_clear_removes_every_entry(tmp_path):
    size = fill(tmp_path, 4)
    out = command("clear", EMBER_CACHE_DIR=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout == (f"removed 4 entries ({size} bytes) from {tmp_path / 'llvm'}\n"
                          f"removed 0 entries (0 bytes) from {tmp_path / 'cuda'}\n"
                          f"removed 0 entries (0 bytes) from {tmp_path / 'cuda-host'}\n")
    assert not list((tmp_path / "llvm").iterdir())
    after = command("info", EMBER_CACHE_DIR=str(tmp_path))
    assert "entries:   0\n" in after.stdout and "hit rate:  not recorded" in after.stdout


def test_clear_reports_entries_it_cannot_remove(tmp_path, monkeypatch, capsys):
    fill(tmp_path, 2)
    fill_cuda(tmp_path)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache, "_unlink", lambda path: False)  # e.g. another user's files
    monkeypatch.setattr(ember_cache, "_remove", lambda path: False)
    assert ember_cache.main(["clear"]) == 1
    assert "error: 4 entries could not be removed" in capsys.readouterr().err
    assert len(list((tmp_path / "llvm").iterdir())) == 2
    assert len(entries(tmp_path / "cuda")) == len(entries(tmp_path / "cuda-host")) == 1


def test_the_commands_with_the_cache_off():
    for off in ("", "0"):
        info = command("info", EMBER_CACHE_DIR=off)
        assert info.returncode == 0 and info.stdout == f"the disk cache is off (EMBER_CACHE_DIR={off!r})\n"
        clear = command("clear", EMBER_CACHE_DIR=off)
        assert clear.returncode == 0 and clear.stdout.endswith(": nothing to clear\n")


def test_bad_use_is_an_error_with_status_2(tmp_path):
    missing = command(EMBER_CACHE_DIR=str(tmp_path))
    assert missing.returncode == 2 and "{info,clear}" in missing.stderr
    unknown = command("purge", EMBER_CACHE_DIR=str(tmp_path))
    assert unknown.returncode == 2 and "invalid choice: 'purge'" in unknown.stderr
    bad_cap = command("info", EMBER_CACHE_DIR=str(tmp_path), EMBER_CACHE_MAX_BYTES="big")
    assert bad_cap.returncode == 2 and "error: EMBER_CACHE_MAX_BYTES='big' is not a size" in bad_cap.stderr


def test_the_suite_never_uses_the_users_cache():
    """tests/conftest.py points EMBER_CACHE_DIR at a session temporary directory (unless it was set
    before the run); a subprocess inherits it."""
    directory = cache.cache_dir()
    assert directory is None or not directory.resolve().is_relative_to(cache.user_cache_root().resolve())
    conftest = sys.modules["tests.conftest"]
    if hasattr(conftest, "SUITE_CACHE_DIR"):  # else the user set EMBER_CACHE_DIR for the run
        assert os.environ["EMBER_CACHE_DIR"] == conftest.SUITE_CACHE_DIR
        assert Path(conftest.SUITE_CACHE_DIR).resolve().is_relative_to(Path(tempfile.gettempdir()).resolve())
    child = subprocess.run([sys.executable, "-c", "from ember.backends.llvm import cache; print(cache.cache_dir())"],
                           cwd=ROOT, capture_output=True, text=True, check=True)
    assert child.stdout.strip() == str(directory)
