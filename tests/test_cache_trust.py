"""A compile cache several processes share (Dask workers on a node, EMBER_CACHE_DIR pointed at one
directory): processes compiling the same function at once all succeed and a later one loads the entry;
and the trust model: entries are object code this process runs, so a cache directory or entry that
every user may write is refused, with the fix in the message."""

import os
import stat
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.llvm.cache import CacheTrustError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COMPILE = """
import numpy as np, ember, ember.numpy as jnp
low = ember.jit(lambda x: jnp.tanh(x * {c}) .sum()).lower(np.ones(1000, np.float32))
low.compile()
print(low.timings().from_cache, float(low.compile()(np.ones(1000, np.float32))))
"""


def _start(cache: str, c: float):
    env = {**os.environ, "EMBER_CACHE_DIR": cache}
    return subprocess.Popen([sys.executable, "-c", COMPILE.format(c=c)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)


def test_processes_share_one_cache_directory(tmp_path):
    cache = str(tmp_path / "shared")
    racing = [_start(cache, 0.25) for _ in range(3)]  # the same function, compiled at once
    results = [p.communicate(timeout=120) for p in racing]
    assert all(p.returncode == 0 for p in racing), [err for _, err in results]
    values = {out.split()[1] for out, _ in results}
    assert len(values) == 1
    later = _start(cache, 0.25)
    out, err = later.communicate(timeout=120)
    assert later.returncode == 0, err
    assert out.split() == ["True", values.pop()]  # loaded from the entry another process wrote


def _compile_fresh(c: float):
    low = ember.jit(lambda x: jnp.sin(x * c) + c).lower(np.ones(7, np.float32))
    return low.compile()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("EMBER_CACHE_DIR", str(directory))
    _compile_fresh(0.5)  # one entry on disk
    return directory / "llvm"


def test_a_world_writable_directory_is_refused(cache_dir):
    os.chmod(cache_dir, 0o777)
    with pytest.raises(CacheTrustError, match=r"writable by every user.*chmod o-w .*EMBER_CACHE_DIR"):
        _compile_fresh(0.75)
    os.chmod(cache_dir, 0o755)
    _compile_fresh(0.75)


def test_a_world_writable_entry_is_refused(cache_dir):
    entry = next(p for p in cache_dir.iterdir() if p.suffix == ".o")
    os.chmod(entry, stat.S_IMODE(entry.stat().st_mode) | stat.S_IWOTH)
    with pytest.raises(CacheTrustError, match="entry .* is writable by every user"):
        _compile_fresh(0.5)  # the same function: its entry is found, then refused
    os.chmod(entry, 0o644)
    _compile_fresh(0.5)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_an_entry_of_another_user_is_refused(cache_dir):
    entry = next(p for p in cache_dir.iterdir() if p.suffix == ".o")
    os.chown(entry, 65534, 65534)  # nobody
    with pytest.raises(CacheTrustError, match=r"belongs to another user \(uid 65534\)"):
        _compile_fresh(0.5)


def test_cache_directories_are_made_owner_writable_only_under_any_umask(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "fresh"))
    old = os.umask(0)
    try:
        _compile_fresh(0.125)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "fresh" / "llvm").stat().st_mode) == 0o755
    _compile_fresh(0.0625)  # the directory Ember made is trusted on the next compile
