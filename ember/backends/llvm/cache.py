"""Object code on disk, keyed by content, so a new process reloads a compiled function without LLVM.

An entry is one file `<EMBER_CACHE_DIR>/llvm/<key>.o` (default root: the user cache directory, e.g.
~/.cache/ember; `EMBER_CACHE_DIR=""` or `0` turns the cache off). The key is a SHA-256 over the IR
text and everything else that shapes the code (target, options, versions), never a module name:
llvmlite names every parsed module `<string>`. Each file starts with a header (magic, format, key,
payload length, payload SHA-256) checked on load, so a truncated, corrupted or foreign file is a miss
(and is rewritten), never loaded. Writes go to a temporary file renamed over the entry (atomic), and
any failure to read or write degrades to no cache without an error.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import tempfile
from pathlib import Path

import llvmlite

MAGIC = b"EMBEROBJ"
FORMAT = 2  # 2: the payload is (meta length, meta, object code)
# magic, format version, key (32-byte digest), payload length, payload SHA-256
HEADER = struct.Struct("<8sI32sQ32s")
SUFFIX = ".o"
_OFF = {"", "0"}


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


def load(key_hex: str) -> bytes | None:
    """The cached object code of `key_hex`, or None (off, absent, unreadable, or failing its checks)."""
    path = entry_path(key_hex)
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return decode(key_hex, data)


def store(key_hex: str, payload: bytes) -> bool:
    """Write an entry atomically (temp file in the same directory, then rename); False if it could not be."""
    path = entry_path(key_hex)
    if path is None:
        return False
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=SUFFIX)
        with os.fdopen(fd, "wb") as f:
            f.write(encode(key_hex, payload))
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False
