"""Ember functions over data sets on a Dask cluster: `map_reduce(fn, params, *batch, reduce=...)`.

The pattern per-sample gradients need at scale (empirical Fisher matrices, influence scores, DP-SGD): a
batch sharded along axis 0 as Dask arrays, a function applied to each chunk with the same parameters,
each chunk's results reduced over its samples, the chunks' reductions combined by a tree. The
parameters go to the workers once (scattered and broadcast on a distributed client), not with every
task; the function pickles by name or by value (ember/api/pickling.py: a worker keeps one copy of a
function sent by value, so it traces and compiles it once, from the disk cache when `EMBER_CACHE_DIR`
points at a shared one). A task lost with its worker is
rerun by Dask from the chunk's inputs, so a result never depends on which worker ran what.

    import dask.array as da, ember, ember.dask

    per_sample = ember.jit(ember.vmap(ember.grad(loss), in_axes=(None, 0, 0)))
    x, y = da.from_array(X, chunks=10_000), da.from_array(Y, chunks=10_000)
    mean_grad, fisher_diag = ember.dask.map_reduce(per_sample, params, x, y, reduce=("mean", "mean_sq"))

Dask (`pip install -e ".[dask]"`) is imported when this module is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dask
import numpy as np

from ember.tree import tree_leaves, tree_map

# what a chunk's per-sample results reduce to (summed over the chunk's samples, then across chunks)
REDUCTIONS = ("sum", "mean", "sum_sq", "mean_sq")


def map_reduce(fn: Callable, params, *batch, reduce: str | Sequence[str] = "sum", split_every: int = 8,
               client=None, compute: bool = True):
    """`fn(params, *chunks)` on every chunk of the Dask arrays `batch` (chunked along axis 0 alike),
    each result a pytree of arrays with the chunk's samples on axis 0, reduced over all samples:
    "sum", "mean", "sum_sq" (sum of squares: N times the empirical Fisher diagonal of per-sample
    gradients) or "mean_sq" (the Fisher diagonal); a tuple of them gives a tuple of results from one
    pass. Chunk results combine by a tree of fan-in `split_every`. `client`: the distributed Client to
    scatter `params` to once and compute on (default: the current one, if any; else Dask's local
    scheduler). Returns the results, or a dask.delayed of them with compute=False (params are scattered
    already then)."""
    kinds = (reduce,) if isinstance(reduce, str) else tuple(reduce)
    bad = [k for k in kinds if k not in REDUCTIONS]
    if bad or not kinds:
        raise ValueError(f"map_reduce: reduce must be one of {REDUCTIONS} or a tuple of them, got {reduce!r}")
    if not batch:
        raise ValueError("map_reduce: pass at least one Dask array of samples after params")
    if split_every < 2:
        raise ValueError(f"map_reduce: split_every must be at least 2, got {split_every}")
    if not np.shape(batch[0])[0]:
        raise ValueError("map_reduce: the arrays hold no samples (axis 0 is empty)")
    blocks = _row_blocks(batch)
    client = client if client is not None else _current_client()
    shared = params if client is None else client.scatter([params], broadcast=True, hash=False)[0]
    delayed = dask.delayed(pure=True)
    parts = [delayed(_chunk)(fn, shared, kinds, *row) for row in blocks]
    while len(parts) > 1:
        parts = [delayed(_combine)(*parts[k:k + split_every]) for k in range(0, len(parts), split_every)]
    result = delayed(_finish)(parts[0], kinds, reduce if isinstance(reduce, str) else None)
    if not compute:
        return result
    return result.compute() if client is None else client.compute(result).result()


def _row_blocks(batch) -> list[tuple]:
    """Each chunk along axis 0 as a tuple of one delayed block per array (arrays chunked alike)."""
    import dask.array as da

    arrays = [da.asarray(a) for a in batch]
    rows = arrays[0].chunks[0]
    for k, a in enumerate(arrays):
        if a.chunks[0] != rows:
            raise ValueError(f"map_reduce: array {k} is chunked {a.chunks[0]} along axis 0, array 0 {rows}; "
                             "rechunk them alike (a.rechunk({0: ...}))")
        if any(len(c) > 1 for c in a.chunks[1:]):
            arrays[k] = a.rechunk({d: -1 for d in range(1, a.ndim)})
    delayed = [a.to_delayed().reshape(len(rows), -1)[:, 0] for a in arrays]
    return list(zip(*delayed))


def _current_client():
    """The distributed client in use (the default one), or None (Dask's local schedulers)."""
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


def _chunk(fn: Callable, params, kinds: tuple, *chunks) -> tuple:
    """One chunk's (sample count, per reduction: the pytree summed over its samples, the results' dtypes)."""
    out = fn(params, *chunks)
    leaves = tree_leaves(out)
    count = int(np.shape(leaves[0])[0]) if leaves else 0
    sums = []
    for kind in kinds:
        square = kind.endswith("_sq")
        sums.append(tree_map(lambda a, square=square: _sum(np.asarray(a), square), out))
    return count, tuple(sums), tree_map(lambda a: np.asarray(a).dtype, out)


def _sum(a: np.ndarray, square: bool) -> np.ndarray:
    """The sum over axis 0 (of the squares), accumulated in float64 for float32 data."""
    wide = a.astype(np.float64) if a.dtype.kind == "f" and a.dtype.itemsize < 8 else a
    return (wide * wide if square else wide).sum(axis=0)


def _combine(*parts) -> tuple:
    """Chunks' reductions added, in the order given (the tree's shape fixes the order)."""
    count = sum(p[0] for p in parts)
    sums = tuple(tree_map(lambda *xs: sum(xs[1:], xs[0]), *[p[1][k] for p in parts])
                 for k in range(len(parts[0][1])))
    return count, sums, parts[0][2]


def _as_result(value, dtype: np.dtype) -> np.ndarray:
    """A float reduction in its per-sample dtype (summed in float64); others as NumPy's sum and mean give
    them (a count of bools, a float mean of ints)."""
    value = np.asarray(value)
    return value.astype(dtype) if np.dtype(dtype).kind == "f" else value


def _finish(total: tuple, kinds: tuple, single: str | None):
    """Means divided by the sample count; float results in their per-sample dtype."""
    count, sums, dtypes = total
    results = []
    for kind, value in zip(kinds, sums):
        scale = 1.0 / count if kind.startswith("mean") else 1.0
        results.append(tree_map(lambda s, dt, scale=scale: _as_result(s * scale if scale != 1.0 else s, dt),
                                value, dtypes))
    return results[0] if single is not None else tuple(results)
