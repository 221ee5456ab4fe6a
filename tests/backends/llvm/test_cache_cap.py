"""The disk cache's size cap (ember/backends/llvm/cache.py): least recently used entries are evicted
when a store passes `EMBER_CACHE_MAX_BYTES` (a hit counts as a use), 0 turns the cap off, and
processes storing, evicting and clearing at once never break one another's loads."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.backends.llvm import cache

ROOT = Path(__file__).resolve().parents[3]
PAYLOAD = 1000
ENTRY = cache.HEADER.size + PAYLOAD  # bytes of one entry's file


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_CACHE_MAX_BYTES", raising=False)
    return tmp_path


def key_of(i: int) -> str:
    return f"{i:064x}"


def payload_of(i: int, size: int = PAYLOAD) -> bytes:
    return (i.to_bytes(4, "little") * (size // 4 + 1))[:size]


def stored(root: Path) -> dict[str, int]:
    """{key: file size} of the entries on disk."""
    return {p.name[:64]: p.stat().st_size for p in (root / "llvm").glob("*" + cache.SUFFIX)}


def age(root: Path, i: int, seconds_ago: int) -> None:
    """Set entry `i`'s last use `seconds_ago` into the past (mtime is the last use)."""
    path = root / "llvm" / (key_of(i) + cache.SUFFIX)
    st = path.stat()
    t = st.st_mtime_ns - seconds_ago * 10**9
    os.utime(path, ns=(t, t))


@pytest.mark.parametrize(("text", "value"), [(None, 1 << 30), ("", 1 << 30), ("0", 0), ("4096", 4096),
                                             ("500M", 500 << 20), ("2g", 2 << 30), ("3 KiB", 3072), ("1T", 1 << 40)])
def test_the_cap_comes_from_the_environment(monkeypatch, text, value):
    if text is None:
        monkeypatch.delenv("EMBER_CACHE_MAX_BYTES", raising=False)
    else:
        monkeypatch.setenv("EMBER_CACHE_MAX_BYTES", text)
    assert cache.max_bytes() == value


@pytest.mark.parametrize("text", ["lots", "-5", "1.5G", "12 parsecs"])
def test_a_malformed_cap_is_a_clear_error(root, monkeypatch, text):
    monkeypatch.setenv("EMBER_CACHE_MAX_BYTES", text)
    with pytest.raises(ValueError, match="EMBER_CACHE_MAX_BYTES=.*is not a size.*0 for no cap"):
        cache.store(key_of(1), payload_of(1))


def test_eviction_removes_the_least_recently_used_and_a_hit_counts_as_a_use(root, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_MAX_BYTES", str(5 * ENTRY + 100))
    for i in range(5):
        assert cache.store(key_of(i), payload_of(i))
    for i in range(5):
        age(root, i, 1000 - 100 * i)  # entry 0 is the oldest, 4 the newest
    assert cache.load(key_of(0)) == payload_of(0)  # a hit: 0 becomes the most recently used
    assert len(stored(root)) == 5
    assert cache.store(key_of(5), payload_of(5))  # 6 entries pass the cap: evict down to 90% of it
    assert sorted(stored(root)) == [key_of(i) for i in (0, 3, 4, 5)]
    assert sum(stored(root).values()) <= cache.LOW_WATER * (5 * ENTRY + 100)
    assert cache.load(key_of(1)) is None and cache.load(key_of(3)) == payload_of(3)


def test_a_hit_within_a_minute_of_the_last_use_writes_nothing(root):
    """Touching costs a journaled metadata write; a recent last use is left as it is."""
    assert cache.store(key_of(1), payload_of(1))
    age(root, 1, 30)
    before = stored_mtime(root, 1)
    assert cache.load(key_of(1)) == payload_of(1) and stored_mtime(root, 1) == before
    age(root, 1, 90)
    assert cache.load(key_of(1)) == payload_of(1) and stored_mtime(root, 1) > before


def stored_mtime(root: Path, i: int) -> int:
    return (root / "llvm" / (key_of(i) + cache.SUFFIX)).stat().st_mtime_ns


def test_the_cap_holds_after_many_stores(root, monkeypatch):
    cap = 20_000
    monkeypatch.setenv("EMBER_CACHE_MAX_BYTES", str(cap))
    sizes = [300 + (i * 7919) % 2700 for i in range(300)]
    for i, size in enumerate(sizes):
        assert cache.store(key_of(i), payload_of(i, size))
        on_disk = stored(root)
        assert sum(on_disk.values()) <= cap, f"over the cap after store {i}"
        assert key_of(i) in on_disk, "the newest entry was evicted"
    assert len(stored(root)) < 300 // 2
    found = cache.info()
    assert found.bytes == sum(stored(root).values()) <= cap and found.cap == cap


def test_a_cap_of_0_keeps_everything(root, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_MAX_BYTES", "0")
    for i in range(60):
        assert cache.store(key_of(i), payload_of(i))
    assert len(stored(root)) == 60
    monkeypatch.setenv("EMBER_CACHE_MAX_BYTES", str(10 * ENTRY))  # the same directory under a cap
    assert cache.store(key_of(60), payload_of(60))
    assert len(stored(root)) <= 10


def test_the_estimate_is_corrected_when_entries_are_added_behind_its_back(root, monkeypatch):
    """Entries the state file never counted (an older Ember, a copied directory) are found by the
    scan a new state file, or every RESCAN_EVERY stores, makes."""
    monkeypatch.setenv("EMBER_CACHE_MAX_BYTES", str(10 * ENTRY))
    (root / "llvm").mkdir()
    for i in range(30):  # written without store(): not in the estimate
        (root / "llvm" / (key_of(i) + cache.SUFFIX)).write_bytes(cache.encode(key_of(i), payload_of(i)))
    assert cache.store(key_of(100), payload_of(100))  # no state file yet: this store scans
    assert sum(stored(root).values()) <= 10 * ENTRY and key_of(100) in stored(root)
    for i in range(30, 60):
        (root / "llvm" / (key_of(i) + cache.SUFFIX)).write_bytes(cache.encode(key_of(i), payload_of(i)))
    monkeypatch.setattr(cache, "RESCAN_EVERY", 3)
    for i in range(101, 104):
        assert cache.store(key_of(i), payload_of(i))
    assert sum(stored(root).values()) <= 10 * ENTRY


def test_an_entry_used_after_the_scan_is_not_evicted(root):
    assert cache.store(key_of(1), payload_of(1))
    (entry,) = cache.scan(root / "llvm")[0]
    stale = entry._replace(last_use_ns=entry.last_use_ns - 10**9)  # what a scan saw before a hit touched it
    assert not cache._remove_unused(stale) and key_of(1) in stored(root)
    assert cache._remove_unused(entry) and not stored(root)
    assert cache._remove_unused(entry), "an entry another process removed first is gone, not an error"


def test_one_process_evicts_at_a_time(root, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_MAX_BYTES", str(3 * ENTRY))
    for i in range(3):
        assert cache.store(key_of(i), payload_of(i))
    lock = os.open(root / ".llvm.evict-lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another evictor (a second open file: flock conflicts in one process)
        assert cache.store(key_of(3), payload_of(3))
        assert len(stored(root)) == 4 and cache.evict() is None
    finally:
        os.close(lock)
    assert cache.evict() == sum(stored(root).values()) <= 3 * ENTRY
    with cache._State(root / "llvm") as state:
        assert state.read()[0] == sum(stored(root).values()), "an eviction sets the estimate to what it left"


def test_a_missing_or_removed_entry_is_a_miss(root):
    assert cache.load(key_of(7)) is None
    assert cache.store(key_of(7), payload_of(7))
    path = root / "llvm" / (key_of(7) + cache.SUFFIX)
    with open(path, "rb") as f:  # a load that opened the entry before an eviction removed it
        os.unlink(path)
        assert cache.decode(key_of(7), f.read()) == payload_of(7)
    assert cache.load(key_of(7)) is None


def test_eviction_removes_temporary_files_of_dead_writers_only(root, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_MAX_BYTES", str(100 * ENTRY))
    assert cache.store(key_of(1), payload_of(1))
    old, new = root / "llvm" / ".tmp-old.o", root / "llvm" / ".tmp-new.o"
    old.write_bytes(b"x" * 10)
    new.write_bytes(b"x" * 10)
    t = old.stat().st_mtime_ns - (cache.STALE_TEMP_SECONDS + 60) * 10**9
    os.utime(old, ns=(t, t))
    cache.evict()
    assert not old.exists() and new.exists() and key_of(1) in stored(root)


def test_hits_and_misses_are_recorded(root):
    assert cache.info().hits is None, "nothing recorded yet"
    assert cache.load(key_of(1)) is None
    assert cache.store(key_of(1), payload_of(1))  # a store adds this process's counts to the state file
    for _ in range(3):
        assert cache.load(key_of(1)) == payload_of(1)
    found = cache.info()
    assert (found.hits, found.misses, found.entries, found.bytes) == (3, 1, 1, ENTRY)
    cache._flush_counts()  # what happens at exit
    assert cache._pending == {}
    found = cache.info()
    assert (found.hits, found.misses) == (3, 1)


def test_clear_removes_every_entry_and_the_counts(root):
    for i in range(5):
        assert cache.store(key_of(i), payload_of(i))
    assert cache.load(key_of(0)) is not None
    assert cache.clear() == (5, 5 * ENTRY, 0)
    assert not stored(root) and cache.load(key_of(0)) is None
    found = cache.info()
    assert (found.entries, found.bytes, found.hits, found.misses) == (0, 0, 0, 1)


# A worker of the concurrency test: compiles (or loads) one of a few small functions through the JIT,
# runs it and checks its result, with a cap of about three entries, so every store evicts; one worker
# also clears the whole cache now and then. Bounded by a loop count and a deadline.
WORKER = """
import ctypes, json, random, sys, time
from ember.backends.llvm import cache, jit
role, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
deadline = time.monotonic() + 60
FN = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
hits = runs = 0
for i in range(40):
    if time.monotonic() > deadline:
        break
    if role == "clear" and i % 4 == 3:
        cache.clear()
    k = rng.randrange(8)
    name = f"affine{k}"
    body = "".join(f"  %t{j + 1} = fadd double %t{j}, {float(j)!r}\\n" for j in range(40))
    text = (f'define double @"{name}"(double %x) {{\\n  %t0 = fmul double %x, {k + 1.5!r}\\n' + body
            + "  ret double %t40\\n}\\n")
    lib = jit.compile_ir(text, {}, name)
    got = FN(lib.address(name))(3.0)
    want = 3.0 * (k + 1.5) + sum(float(j) for j in range(40))
    assert got == want, (k, got, want)
    hits += lib.from_cache
    runs += 1
    lib.close()
print(json.dumps({"hits": hits, "runs": runs}))
"""


def test_processes_storing_evicting_and_clearing_at_once_never_break_a_load(root):
    probe = subprocess.run([sys.executable, "-c", WORKER, "probe", "0"], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "EMBER_CACHE_DIR": str(root / "probe"), "EMBER_CACHE_MAX_BYTES": "0"})
    assert probe.returncode == 0, probe.stderr
    sizes = sorted(stored(root / "probe").values())
    cap = 3 * sizes[-1]  # about three of the eight functions fit: stores evict all the time
    env = {**os.environ, "EMBER_CACHE_DIR": str(root), "EMBER_CACHE_MAX_BYTES": str(cap)}
    roles = ["store", "store", "store", "clear"]
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, role, str(seed)], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for seed, role in enumerate(roles, 1)]
    results = []
    for w in workers:
        out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["runs"] > 0 for r in results)
    assert sum(r["hits"] for r in results) > 0, "no load raced anything: the test would prove nothing"
    assert sum(stored(root).values()) <= cap
    assert cache.info().hits is not None, "the workers' counts were recorded at exit"
