"""The compiled signatures of a jitted function: `Cache` (an LRU of `Entry`s, the hit path's table of
plain-array and scalar keys, the graphs traced inside other traces) and `shared_cache`, which gives every
wrapper over the same function and options the same one."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict, namedtuple

import numpy as np

from ember.tree import PyTreeDef

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "size", "maxsize"])
DEFAULT_CACHE_SIZE = 128
_array = np.array  # a module-level name: 30 ns less than np.array


class Entry:
    """A compiled signature: its executable (checked: see backends/debug.py), the same without the
    checks (`unchecked`, what runs while no debug or oracle option is on), the output structure, and
    the hit path's keys filed for it (several: a 0-d float32 array and an np.float32 scalar reach one)."""

    __slots__ = ("executable", "unchecked", "out_tree", "single", "lowered", "key", "fast_keys", "used", "call")

    def __init__(self, executable, out_tree: PyTreeDef, lowered, key):
        self.out_tree, self.lowered, self.key = out_tree, lowered, key
        self.single = out_tree.node is None  # one array out: no unflattening
        self.fast_keys: list = []
        self.used = 0
        self.use(executable)

    def use(self, executable) -> None:
        """Run `executable` from now on: `unchecked` and `call` (the user's result from the arrays,
        unchecked: the executable's own single-output call where it has one) follow it."""
        self.executable = executable
        self.unchecked = getattr(executable, "unchecked", executable)
        # (looked up on the type: a wrapper's __getattr__ would hand out its executable's, skipping the wrapper)
        one = getattr(type(self.unchecked), "single_output", None) if self.single else None
        self.call = one(self.unchecked) if one is not None else self._outputs

    def _outputs(self, *arrays):
        outs = self.unchecked(*arrays)
        return outs[0] if self.single else self.out_tree.unflatten(outs)


class ScalarHit:
    """The hit path's value for a key with scalar arguments: the entry, and per positional argument the
    dtype to convert a scalar to (None: an ndarray passed as it is)."""

    __slots__ = ("entry", "dtypes", "first")

    def __init__(self, entry: Entry, dtypes: tuple):
        self.entry, self.dtypes = entry, dtypes
        self.first = dtypes[0] if len(dtypes) == 1 else None  # one scalar argument: no loop

    def arrays(self, args: tuple) -> tuple | list:
        """`args` as the executable takes them (OverflowError: a Python int out of its dtype's range)."""
        if self.first is not None:
            return (_array(args[0], self.first),)
        return [x if d is None else _array(x, d) for x, d in zip(args, self.dtypes)]


class Cache:
    """The executables of one function under one set of options, least recently used first, and the
    graphs it was traced to inside other traces. Shared by every wrapper over that function."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.entries: dict = {}
        # (backend, shape, dtype, ..., scalar type, ...) of plain arrays and scalars -> an entry (a ScalarHit
        # where scalars are converted)
        self.fast: dict = {}
        self.graphs: OrderedDict = OrderedDict()  # signature inside a trace -> (graph, out_tree)
        self.misses = self.adds = 0
        # Every use of an entry ticks the clock: a hit, or its add, so hits = clock - adds (one store
        # less on the hit path). entry.used is the clock at its last use: least recently used = smallest.
        self.clock = 0
        self._locks: dict = {}
        self._guard = threading.Lock()

    @property
    def hits(self) -> int:
        return self.clock - self.adds

    def touch(self, entry: Entry) -> None:
        """Count a hit of `entry`."""
        entry.used = self.clock = self.clock + 1

    def add(self, entry: Entry) -> None:
        """Insert `entry`, evicting the least recently used ones (rare: a scan only when compiling, so
        a hit costs no hashing of the key)."""
        self.adds += 1
        entry.used = self.clock = self.clock + 1
        self.entries[entry.key] = entry
        while len(self.entries) > self.maxsize:
            old = min(self.entries.values(), key=lambda e: e.used)
            del self.entries[old.key]
            for k in old.fast_keys:
                self.fast.pop(k, None)

    def lock(self, key) -> threading.Lock:
        """The lock under which signature `key` is traced and compiled once, even from many threads."""
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def add_graph(self, key, graph_and_tree) -> None:
        self.graphs[key] = graph_and_tree
        while len(self.graphs) > self.maxsize:
            self.graphs.popitem(last=False)

    def clear(self) -> None:
        self.entries.clear()
        self.fast.clear()
        self.graphs.clear()
        self.misses = self.adds = self.clock = 0


_shared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def shared_cache(root, key, maxsize: int) -> Cache:
    """The cache for `root` (the user's function, held weakly) under `key` (transforms and options);
    a private one when `root` cannot be weakly referenced or `key` is not hashable."""
    try:
        per_fun = _shared.get(root)
        if per_fun is None:
            per_fun = _shared[root] = {}
        key = (key, maxsize)
        cache = per_fun.get(key)
    except TypeError:
        return Cache(maxsize)
    if cache is None:
        cache = per_fun[key] = Cache(maxsize)
    return cache
