"""EMBER_DUMP_DIR: every signature a jitted function compiles is dumped (all stages, and the generated
code) under `<dir>/<name>_<n>`, one folder per compile, never overwriting another of this process."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember.api.lowered import Lowered


def dump_when_asked(lowered: Lowered, name: str, count: int) -> list[str]:
    """Write `lowered` under `$EMBER_DUMP_DIR/<name>_<count>` when that variable is set (the files
    written; none when it is not)."""
    dump_dir = os.environ.get("EMBER_DUMP_DIR")
    if not dump_dir:
        return []
    return lowered.dump(dump_path(dump_dir, f"{_safe(name)}_{count}"))


_dumped: set[str] = set()


def dump_path(dump_dir: str, base: str) -> str:
    """dump_dir/base, or dump_dir/base_2, _3, ... when this process already dumped there (two
    functions with one name, e.g. two lambdas), so no dump overwrites another."""
    path, k = os.path.join(dump_dir, base), 2
    while path in _dumped:
        path, k = os.path.join(dump_dir, f"{base}_{k}"), k + 1
    _dumped.add(path)
    return path


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)
