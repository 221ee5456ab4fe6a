"""Object code on disk, keyed by content, so a new process reloads a compiled function without LLVM.

An entry is one file `<EMBER_CACHE_DIR>/llvm/<key>.o` (default root: the user cache directory, e.g.
~/.cache/ember; `EMBER_CACHE_DIR=""` or `0` turns the cache off). The key is a SHA-256 over the IR
text and everything else that shapes the code (target, options, versions), never a module name:
llvmlite names every parsed module `<string>`. Each file starts with a header (magic, format, key,
payload length, payload SHA-256) checked on load, so a truncated, corrupted or foreign file is a miss
(and is rewritten), never loaded. Writes go to a temporary file renamed over the entry (atomic), and
any failure to read or write degrades to no cache without an error.

The directory is capped at `EMBER_CACHE_MAX_BYTES` (default 1 GiB, `0`: no cap; the sum of the
entries' file sizes). An entry's mtime is its last use: a store sets it and a hit touches it (an
`fstat`, and a `futimes` on the open file when the last use is over a minute old). A small state
file (`<root>/.llvm.state`: estimated bytes, stores since the last scan, hits, misses) is updated
under an advisory lock at each store, so no store scans the directory; when the estimate passes the
cap (or every `RESCAN_EVERY` stores, to correct drift) one process scans and removes the least
recently used entries down to `LOW_WATER` of the cap. Removal is an unlink, so a concurrent load has
either opened the file and reads all of it, or finds no file: a miss, never a partial entry. Hits
and misses are counted in memory and added to the state file at the next store and at exit. The
BLAS library copy (`<root>/blas`, see blas.py) is not an entry: it is never evicted (a running
process maps it) and does not count against the cap.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import llvmlite

from ember.errors import EmberError

try:
    import fcntl
except ImportError:  # Windows: the state file is updated without a lock (its numbers are estimates anyway)
    fcntl = None  # type: ignore[assignment]

MAGIC = b"EMBEROBJ"
FORMAT = 2  # 2: the payload is (meta length, meta, object code)
# magic, format version, key (32-byte digest), payload length, payload SHA-256
HEADER = struct.Struct("<8sI32sQ32s")
SUFFIX = ".o"
_OFF = {"", "0"}
_ENTRY = re.compile(r"[0-9a-f]{64}" + re.escape(SUFFIX))
TEMP_PREFIX = ".tmp-"

DEFAULT_MAX_BYTES = 1 << 30
LOW_WATER = 0.9  # an eviction removes least recently used entries until the total is this fraction of the cap
RESCAN_EVERY = 10_000  # stores between scans that correct the estimate (entries removed or added by hand)
STALE_TEMP_SECONDS = 3600  # a temporary file this old belongs to a writer that died: an eviction removes it
# beside the entries' directory, not in it: the directory holds entries and temporary files only
STATE = ".state"  # <root>/.llvm.state
EVICT_LOCK = ".evict-lock"  # <root>/.llvm.evict-lock
# the state file: estimated bytes, stores since the last scan, hits, misses
_STATE = struct.Struct("<4Q")
_SIZE = re.compile(r"(\d+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
_TOUCH_FD = os.utime in os.supports_fd
TOUCH_AFTER_NS = 60 * 10**9  # a hit within a minute of the last recorded use leaves it (the order is by minutes)


def user_cache_root() -> Path:
    """The platform's per-user cache directory for Ember (XDG on Linux, LOCALAPPDATA on Windows)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
    elif sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ember"


def cache_dir() -> Path | None:
    """Where the llvm backend's entries live now, or None when `EMBER_CACHE_DIR` turns the cache off."""
    root = os.environ.get("EMBER_CACHE_DIR")
    if root is not None and root.strip() in _OFF:
        return None
    return (Path(root).expanduser() if root is not None else user_cache_root()) / "llvm"


class CacheTrustError(EmberError, PermissionError):
    """A cache directory or entry that other users may write: its object code would run in this process."""


def check_trusted(path: Path, st: os.stat_result | None = None) -> None:
    """Raise CacheTrustError if `path` (a cache directory or entry; `st` its stat when already open) is
    writable by every user or belongs to another user (not root). Entries are object code this process
    executes, so whoever may write them may run code as the user: a cache shared by several processes
    (Dask workers on a node) belongs to one owner, and its directory and files are writable by that owner
    only."""
    try:
        st = st or os.stat(path)
    except OSError:
        return  # absent: nothing is loaded from it
    mode, owner = st.st_mode, st.st_uid
    kind = "directory" if stat.S_ISDIR(mode) else "entry"
    if hasattr(os, "getuid") and owner not in (os.getuid(), 0):
        raise CacheTrustError(
            f"Ember's cache {kind} {path} belongs to another user (uid {owner}), who may change the compiled code "
            "it holds, which runs in this process; Ember will not load it. Point EMBER_CACHE_DIR at a directory "
            "you own (EMBER_CACHE_DIR=0 turns the disk cache off)")
    if mode & stat.S_IWOTH:
        raise CacheTrustError(
            f"Ember's cache {kind} {path} is writable by every user (mode {stat.S_IMODE(mode):o}); its compiled code "
            f"runs in this process, so Ember will not load it. Fix the permissions (chmod o-w {path}"
            f"{' and its files' if kind == 'directory' else ''}), or point EMBER_CACHE_DIR at a directory only you "
            "can write (EMBER_CACHE_DIR=0 turns the disk cache off)")


def _ember_version() -> str:
    # read from the loaded package rather than imported: the top-level `ember` is above this layer
    return getattr(sys.modules.get("ember"), "__version__", "unknown")


def key(*parts: str | bytes | int) -> str:
    """The hex SHA-256 naming an entry: `parts` (IR text, target, options) plus the format and versions."""
    h = hashlib.sha256()
    for part in (f"format {FORMAT}", f"llvmlite {llvmlite.__version__}", f"ember {_ember_version()}", *parts):
        data = part if isinstance(part, bytes) else str(part).encode()
        h.update(len(data).to_bytes(8, "little"))  # length-prefixed: ("ab", "c") is not ("a", "bc")
        h.update(data)
    return h.hexdigest()


def entry_path(key_hex: str) -> Path | None:
    """The file of entry `key_hex`, or None when the cache is off."""
    directory = cache_dir()
    return None if directory is None else directory / (key_hex + SUFFIX)


def encode(key_hex: str, payload: bytes) -> bytes:
    """An entry's file contents: the header, then the payload."""
    return HEADER.pack(MAGIC, FORMAT, bytes.fromhex(key_hex), len(payload), hashlib.sha256(payload).digest()) + payload


def decode(key_hex: str, data: bytes) -> bytes | None:
    """The payload of an entry's file contents if the header checks out for `key_hex`, else None."""
    if len(data) < HEADER.size:
        return None
    magic, fmt, file_key, length, digest = HEADER.unpack_from(data)
    payload = data[HEADER.size:]
    if (magic, fmt, file_key, length) != (MAGIC, FORMAT, bytes.fromhex(key_hex), len(payload)):
        return None
    return payload if hashlib.sha256(payload).digest() == digest else None


def max_bytes() -> int:
    """The cap on the entries' total size, from `EMBER_CACHE_MAX_BYTES` (bytes, or with a unit K, M, G, T
    in powers of 1024; 0: no cap), read at each store so a process may change it."""
    text = os.environ.get("EMBER_CACHE_MAX_BYTES")
    if text is None or not text.strip():
        return DEFAULT_MAX_BYTES
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"EMBER_CACHE_MAX_BYTES={text!r} is not a size: give bytes (1073741824), a number with a "
                         "unit in powers of 1024 (500M, 2G), or 0 for no cap")
    return int(match[1]) * 1024 ** ("kmgt".index(match[2].lower()) + 1 if match[2] else 0)


def load(key_hex: str) -> bytes | None:
    """The cached object code of `key_hex`, or None (off, absent, unreadable, or failing its checks).
    A hit sets the entry's mtime, its last use, which eviction orders by. An entry removed while this
    reads it is still read whole (the open file outlives its name) or not found: a miss."""
    path = entry_path(key_hex)
    if path is None:
        return None
    check_trusted(path.parent)
    payload = None
    try:
        with open(path, "rb", buffering=0) as f:
            check_trusted(path, os.fstat(f.fileno()))
            payload = decode(key_hex, f.readall())
            if payload is not None:
                _touch(f.fileno(), path)
    except CacheTrustError:
        raise
    except OSError:
        pass
    _count(path.parent, payload is not None)
    return payload


def _touch(fd: int, path: Path) -> None:
    """Set the last use of the open entry `fd` to now, unless it is within `TOUCH_AFTER_NS` of now:
    an fstat is cheaper than the journaled metadata write, and eviction needs no finer order."""
    try:
        if time.time_ns() - os.fstat(fd).st_mtime_ns > TOUCH_AFTER_NS:
            os.utime(fd if _TOUCH_FD else path)
    except OSError:
        pass  # another user's entry or a read-only cache: the last use stays the write time


_pending: dict[Path, list[int]] = {}  # directory -> [hits, misses] not yet added to its state file
_flush_registered = False


def _count(directory: Path, hit: bool) -> None:
    global _flush_registered
    counts = _pending.get(directory)
    if counts is None:
        if not _flush_registered:
            import atexit

            atexit.register(_flush_counts)
            _flush_registered = True
        counts = _pending[directory] = [0, 0]
    counts[0 if hit else 1] += 1


def store(key_hex: str, payload: bytes) -> bool:
    """Write an entry atomically (temp file in the same directory, then rename); False if it could not be."""
    path = entry_path(key_hex)
    if path is None:
        return False
    tmp = None
    try:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=SUFFIX)
        data = encode(key_hex, payload)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            _unlink(Path(tmp))
        return False
    _account(path.parent, len(data))
    return True


def _unlink(path: Path) -> bool:
    """Remove `path`; True if it is gone (also when another process removed it first)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _beside(directory: Path, suffix: str) -> Path:
    return directory.parent / f".{directory.name}{suffix}"


class _State:
    """The state file of a cache directory, locked while open (`with _State(d) as s: s.read(); s.write(...)`)."""

    def __init__(self, directory: Path):
        self.path = _beside(directory, STATE)

    def __enter__(self) -> _State:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            except OSError:
                os.close(self.fd)
                raise
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)  # closing releases the lock

    def read(self) -> list[int] | None:
        """[bytes, stores, hits, misses], or None if the file is new (or damaged)."""
        os.lseek(self.fd, 0, os.SEEK_SET)
        data = os.read(self.fd, _STATE.size + 1)
        return list(_STATE.unpack(data)) if len(data) == _STATE.size else None

    def write(self, values: list[int]) -> None:
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.write(self.fd, _STATE.pack(*(max(0, v) for v in values)))
        os.ftruncate(self.fd, _STATE.size)


def _account(directory: Path, added: int) -> None:
    """After a store: add it (and this process's hit counts) to the state file, and evict if the
    estimate says the directory may be over the cap, or a scan is due."""
    cap = max_bytes()
    hits, misses = _pending.pop(directory, (0, 0))
    try:
        with _State(directory) as state:
            values = state.read()
            scan_due = values is None
            size, stores, old_hits, old_misses = values or (0, 0, 0, 0)
            size, stores = size + added, stores + 1
            scan_due = scan_due or stores >= RESCAN_EVERY or 0 < cap < size
            state.write([size, 0 if scan_due else stores, old_hits + hits, old_misses + misses])
    except OSError:
        return
    if scan_due:
        evict(directory, cap, estimate=size)


class Entry(NamedTuple):
    """One file of a cache directory: an entry, or a temporary file a store is writing."""

    path: Path
    size: int
    last_use_ns: int


def scan(directory: Path, suffix: str = SUFFIX) -> tuple[list[Entry], list[Entry]]:
    """(entries, temporary files) of a cache directory whose entries are `<sha256 hex><suffix>` (this
    cache's, or the CUDA caches'); files removed during the scan are left out."""
    named = _ENTRY if suffix == SUFFIX else re.compile(r"[0-9a-f]{64}" + re.escape(suffix))
    entries: list[Entry] = []
    temps: list[Entry] = []
    try:
        files = os.scandir(directory)
    except OSError:
        return entries, temps
    with files:
        for f in files:
            is_temp = f.name.startswith(TEMP_PREFIX) and f.name.endswith(suffix)
            if not (is_temp or named.fullmatch(f.name)):
                continue
            try:
                st = f.stat(follow_symlinks=False)
            except OSError:
                continue
            (temps if is_temp else entries).append(Entry(Path(f.path), st.st_size, st.st_mtime_ns))
    return entries, temps


def evict(directory: Path | None = None, cap: int | None = None, estimate: int | None = None) -> int | None:
    """Scan `directory` (default: the current one) and, if its entries pass `cap` (default: `max_bytes()`),
    remove the least recently used down to `LOW_WATER` of it, and temporary files of dead writers; the
    bytes left, or None when another process is evicting (it will do the work) or the cache is off.
    `estimate` is the state file's size when the scan was decided, to correct it by what the scan found."""
    directory = directory if directory is not None else cache_dir()
    cap = max_bytes() if cap is None else cap
    if directory is None:
        return None
    try:
        lock = os.open(_beside(directory, EVICT_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        if fcntl is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return None
                raise
        entries, temps = scan(directory)
        stale = time.time_ns() - STALE_TEMP_SECONDS * 10**9
        for temp in temps:
            if temp.last_use_ns < stale:
                _unlink(temp.path)
        total = sum(e.size for e in entries)
        if cap and total > cap:
            target = int(cap * LOW_WATER)
            for entry in sorted(entries, key=lambda e: (e.last_use_ns, e.path.name)):
                if total <= target:
                    break
                if _remove_unused(entry):
                    total -= entry.size
        with _State(directory) as state:
            values = state.read() or [total if estimate is None else estimate, 0, 0, 0]
            # what others stored since a store decided on this scan stays counted
            values[0] = total + (max(0, values[0] - estimate) if estimate is not None else 0)
            state.write(values)
        return total
    except OSError:
        return None
    finally:
        os.close(lock)


def _remove_unused(entry: Entry) -> bool:
    """Remove an entry unless a hit touched it since the scan; True if it is gone."""
    try:
        if os.stat(entry.path).st_mtime_ns != entry.last_use_ns:
            return False
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return _unlink(entry.path)


class Info(NamedTuple):
    """What `python -m ember.cache info` reports."""

    directory: Path
    entries: int
    bytes: int
    cap: int
    hits: int | None  # None: not recorded (no state file yet)
    misses: int | None
    oldest_use_ns: int | None
    newest_use_ns: int | None
    blas_bytes: int  # the BLAS library copies beside the entries, not counted against the cap


def info(directory: Path | None = None) -> Info | None:
    """Entries, bytes, the cap and the recorded hits and misses of `directory` (default: the current
    cache), or None when the cache is off."""
    directory = directory if directory is not None else cache_dir()
    if directory is None:
        return None
    entries, _ = scan(directory)
    hits = misses = None
    try:
        if _beside(directory, STATE).exists():
            with _State(directory) as state:
                values = state.read()
            if values is not None:
                hits, misses = values[2], values[3]
    except OSError:
        pass
    pending = _pending.get(directory)
    if pending is not None and any(pending):
        hits, misses = (hits or 0) + pending[0], (misses or 0) + pending[1]
    blas = 0
    try:
        with os.scandir(directory.parent / "blas") as files:
            blas = sum(f.stat().st_size for f in files if f.is_file() and not f.name.startswith("."))
    except OSError:
        pass
    uses = [e.last_use_ns for e in entries]
    return Info(directory, len(entries), sum(e.size for e in entries), max_bytes(), hits, misses,
                min(uses, default=None), max(uses, default=None), blas)


def clear(directory: Path | None = None) -> tuple[int, int, int]:
    """Remove every entry of `directory` (default: the current cache) and reset its counts; (entries
    removed, their bytes, entries that could not be removed). A concurrent load gets the whole entry
    or a miss; the BLAS copy stays (a running process may map it)."""
    directory = directory if directory is not None else cache_dir()
    if directory is None:
        return 0, 0, 0
    removed = size = failed = 0
    try:
        lock = os.open(_beside(directory, EVICT_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return removed, size, failed
    try:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # not beside an eviction: both would subtract what they removed
        entries, temps = scan(directory)
        for entry in entries:
            if _unlink(entry.path):
                removed, size = removed + 1, size + entry.size
            else:
                failed += 1
        stale = time.time_ns() - STALE_TEMP_SECONDS * 10**9
        for temp in temps:
            if temp.last_use_ns < stale:
                _unlink(temp.path)
        _pending.pop(directory, None)
        with _State(directory) as state:
            values = state.read()
            # entries stored meanwhile stay counted
            state.write([values[0] - size if values else 0, 0, 0, 0])
    except OSError:
        pass
    finally:
        os.close(lock)
    return removed, size, failed


def _flush_counts() -> None:
    """At exit: add this process's hits and misses to the state files of directories that still exist."""
    while _pending:
        directory, (hits, misses) = _pending.popitem()
        if not (hits or misses) or not directory.is_dir():
            continue
        try:
            with _State(directory) as state:
                values = state.read() or [0, RESCAN_EVERY, 0, 0]  # no state yet: the next store scans
                values[2] += hits
                values[3] += misses
                state.write(values)
        except OSError:
            pass
