"""NVRTC compilation with no GPU: cubins for sm_90, warnings as errors, errors that quote the source
lines the log points at, the memory and disk caches, and the error when CuPy or NVRTC is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ember.backends.cuda import nvrtc
from ember.backends.cuda.nvrtc import CudaCompileError, CudaUnavailableError

pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy is not installed (pip install -e \".[cuda]\")")

GOOD = """// a kernel that compiles cleanly
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""
WARNING = GOOD.replace("    int i =", "    int unused;\n    int i =")  # line 3: declared, never used
ERROR = GOOD.replace("x[i] += 1.0f", "x[i] += undefined_name")  # line 4


@pytest.fixture
def disk_cache(tmp_path, monkeypatch):
    """A fresh disk cache directory and an empty memory cache, so each compile below is counted."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    nvrtc.clear_memory_cache()
    yield tmp_path / "cuda"
    nvrtc.clear_memory_cache()


def test_compiles_to_an_elf_cubin(disk_cache):
    cubin = nvrtc.compile_cubin(GOOD)
    assert cubin[:4] == b"\x7fELF"
    assert nvrtc.nvrtc_version() >= (12, 0)


def test_a_warning_is_an_error_that_quotes_its_line(disk_cache):
    with pytest.raises(CudaCompileError) as info:
        nvrtc.compile_cubin(WARNING)
    e = info.value
    assert "177" in e.log and '"unused"' in e.log  # NVRTC's diagnostic, raised to an error
    assert e.source == WARNING
    assert ">" in e.message and "| " + "    int unused;" in e.message
    assert "a warning, and warnings are errors" in e.message
    assert not list(disk_cache.glob("*.cubin"))  # nothing cached for a failed compile


def test_an_error_names_the_numbered_source_lines(disk_cache):
    with pytest.raises(CudaCompileError, match="undefined_name") as info:
        nvrtc.compile_cubin(ERROR)
    assert nvrtc.pointed_lines(info.value.log, "ember.cu") == [4]
    assert "> 4 |     if (i < n) x[i] += undefined_name;" in info.value.message
    assert "  2 | extern" in info.value.message  # the context around the pointed line


def test_a_bad_arch_is_a_compile_error(disk_cache):
    with pytest.raises(CudaCompileError, match="sm_1"):
        nvrtc.compile_cubin(GOOD, arch="sm_1")


def test_the_disk_cache_serves_a_new_process_without_nvrtc(disk_cache, monkeypatch):
    before = dict(nvrtc.stats)
    cubin = nvrtc.compile_cubin(GOOD, name="cached.cu")
    assert nvrtc.stats["compiles"] == before["compiles"] + 1
    assert len(list(disk_cache.glob("*.cubin"))) == 1
    assert nvrtc.compile_cubin(GOOD, name="cached.cu") is cubin  # the memory cache
    nvrtc.clear_memory_cache()  # as a new process: only the disk has it

    def no_compile(*args):
        raise AssertionError("NVRTC was called although the disk cache holds the cubin")

    monkeypatch.setattr(nvrtc, "_compile", no_compile)
    assert nvrtc.compile_cubin(GOOD, name="cached.cu") == cubin
    assert nvrtc.stats["disk_hits"] == before["disk_hits"] + 1


def test_a_damaged_entry_is_a_miss_and_is_rewritten(disk_cache):
    cubin = nvrtc.compile_cubin(GOOD, name="damaged.cu")
    (entry,) = disk_cache.glob("*.cubin")
    entry.write_bytes(entry.read_bytes()[:-10])
    nvrtc.clear_memory_cache()
    compiles = nvrtc.stats["compiles"]
    assert nvrtc.compile_cubin(GOOD, name="damaged.cu") == cubin
    assert nvrtc.stats["compiles"] == compiles + 1
    assert entry.read_bytes().endswith(cubin)  # rewritten whole


def test_the_key_covers_source_arch_options_and_version():
    base = nvrtc.cache_key("s", "sm_90", nvrtc.options("sm_90"), (13, 0), "a.cu")
    assert base != nvrtc.cache_key("s ", "sm_90", nvrtc.options("sm_90"), (13, 0), "a.cu")
    assert base != nvrtc.cache_key("s", "sm_80", nvrtc.options("sm_90"), (13, 0), "a.cu")
    assert base != nvrtc.cache_key("s", "sm_90", nvrtc.options("sm_80"), (13, 0), "a.cu")
    assert base != nvrtc.cache_key("s", "sm_90", nvrtc.options("sm_90"), (13, 1), "a.cu")


@pytest.mark.parametrize("value", ["0", ""])
def test_ember_cache_dir_off_writes_nothing(value, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", value)
    monkeypatch.chdir(tmp_path)
    assert nvrtc.cache_dir() is None
    nvrtc.clear_memory_cache()
    assert nvrtc.compile_cubin(GOOD, name="off.cu")[:4] == b"\x7fELF"
    assert not list(tmp_path.rglob("*"))
    nvrtc.clear_memory_cache()


def test_missing_cupy_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.nvrtc", None)  # the import raises ImportError
    monkeypatch.setattr(nvrtc, "_version", None)
    with pytest.raises(CudaUnavailableError, match=r'pip install -e "\.\[cuda\]"') as info:
        nvrtc.compile_cubin(GOOD)
    assert "nvidia-cuda-nvrtc" in str(info.value) and isinstance(info.value, RuntimeError)


def test_an_nvrtc_that_cannot_load_says_what_to_install(monkeypatch):
    class Broken:
        @staticmethod
        def getVersion():
            raise RuntimeError("libnvrtc.so.13: cannot open shared object file")

    monkeypatch.setattr(nvrtc, "_nvrtc", lambda: Broken)
    monkeypatch.setattr(nvrtc, "_version", None)
    with pytest.raises(CudaUnavailableError, match="libnvrtc.so.13.*nvidia-cuda-nvrtc"):
        nvrtc.nvrtc_version()


def test_numbered_excerpt_marks_pointed_lines_and_elides_gaps():
    source = "\n".join(f"line {n}" for n in range(1, 21))
    text = nvrtc.numbered_excerpt(source, [3, 15])
    assert text.splitlines() == ["   1 | line 1", "   2 | line 2", ">  3 | line 3", "   4 | line 4", "   5 | line 5",
                                 "  ...", "  13 | line 13", "  14 | line 14", "> 15 | line 15", "  16 | line 16",
                                 "  17 | line 17"]


def test_import_ember_does_not_import_cupy():
    code = ("import ember, sys; import ember.backends.cuda.nvrtc, ember.backends.cuda.runtime; "
            "assert not [m for m in sys.modules if m.startswith(('cupy', 'cupy_backends'))], 'cupy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
