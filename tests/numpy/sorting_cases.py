"""The calls of ember.numpy's sorting functions (and ember.lax's) whose JAX results
sorting_jax_values.json records (record_sorting_jax.py) and tests/numpy/test_sorting.py checks.

Each case is `fn(np_module, lax_module, X, I)`: `X` a float32 matrix with NaNs of both signs, signed
zeros, infinities and ties, `I` small ints with repeats. `traced` cases run under one jit; the others
need concrete values (no size=) and run eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

X = np.array([[1, -1, np.nan, 2, -0.0, 0], [3, 3, -2, 1, 0, -0.0], [2, 1, 1, 2, -3, 5],
              [np.inf, -np.inf, 0, 1, 1, -np.nan]], np.float32)
I = np.array([3, 0, 4, 1, 1, 7, 0, 3, 3], np.int32)  # noqa: E741


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable
    traced: bool = True
    rtol: float = 0.0  # 0: exact


CASES = [
    Case("cumsum", lambda m, lax, x, i: m.cumsum(x, 1)),
    Case("cumsum_flat", lambda m, lax, x, i: m.cumsum(x)),
    Case("cumsum_bool", lambda m, lax, x, i: m.cumsum(x > 0, axis=0)),
    Case("cumsum_int8", lambda m, lax, x, i: m.cumsum(i.astype(np.int8) * 50)),
    Case("cumprod", lambda m, lax, x, i: m.cumprod(x, 0)),
    Case("nancumsum", lambda m, lax, x, i: m.nancumsum(x, 1)),
    Case("nancumprod", lambda m, lax, x, i: m.nancumprod(x, 1, dtype=np.float32)),
    Case("cumulative_sum", lambda m, lax, x, i: m.cumulative_sum(x, axis=1, include_initial=True)),
    Case("cumulative_prod", lambda m, lax, x, i: m.cumulative_prod(i)),
    Case("sort", lambda m, lax, x, i: m.sort(x)),
    Case("sort_desc", lambda m, lax, x, i: m.sort(x, axis=0, descending=True)),
    Case("sort_flat", lambda m, lax, x, i: m.sort(x, axis=None)),
    Case("argsort", lambda m, lax, x, i: m.argsort(x)),
    Case("argsort_desc", lambda m, lax, x, i: m.argsort(x, descending=True)),
    Case("argsort_int", lambda m, lax, x, i: m.argsort(i, descending=True)),
    Case("lexsort", lambda m, lax, x, i: m.lexsort((x[0], x[1], x[2]))),
    Case("partition", lambda m, lax, x, i: m.partition(x, 2)),
    Case("partition_uint", lambda m, lax, x, i: m.partition(i.astype(np.uint8), 3)),
    Case("argpartition", lambda m, lax, x, i: m.argpartition(x, -2, axis=0)),
    Case("searchsorted", lambda m, lax, x, i: m.searchsorted(m.sort(x[0]), x)),
    Case("searchsorted_right", lambda m, lax, x, i: m.searchsorted(m.sort(x[0]), x, side="right")),
    Case("searchsorted_sorter", lambda m, lax, x, i: m.searchsorted(i, m.arange(8), sorter=m.argsort(i))),
    Case("digitize", lambda m, lax, x, i: m.digitize(x, m.array([-1.0, 0.0, 2.0]))),
    Case("digitize_decreasing_right", lambda m, lax, x, i: m.digitize(x, m.array([2.0, 0.0, -1.0]), right=True)),
    Case("quantile", lambda m, lax, x, i: m.quantile(x, 0.3, axis=1)),
    Case("quantile_q", lambda m, lax, x, i: m.quantile(x[1:], m.array([0.1, 0.5, 1.0]), axis=0, keepdims=True)),
    Case("quantile_all", lambda m, lax, x, i: m.quantile(x[1:3], 0.75)),
    Case("quantile_methods", lambda m, lax, x, i: [m.quantile(x[1:], 0.4, axis=1, method=k)
                                                   for k in ("lower", "higher", "midpoint", "nearest")]),
    Case("quantile_axes", lambda m, lax, x, i: m.quantile(x[1:3], 0.6, axis=(0, 1), keepdims=True)),
    Case("quantile_inverted_cdf", lambda m, lax, x, i: [
        m.quantile(x, m.array([0.2, 0.9]), axis=1, method="inverted_cdf", weights=m.abs(x[::-1]) + 0.5),
        m.nanquantile(x, 0.5, axis=0, method="inverted_cdf", weights=m.arange(4.0) - 1.0, keepdims=True),
        m.percentile(i, 40, method="inverted_cdf")]),
    Case("nanquantile", lambda m, lax, x, i: m.nanquantile(x, 0.3, axis=1)),
    Case("percentile", lambda m, lax, x, i: m.percentile(x, 30, axis=1)),
    Case("nanpercentile", lambda m, lax, x, i: m.nanpercentile(x, m.array([10.0, 90.0]), axis=1)),
    Case("median", lambda m, lax, x, i: m.median(x, axis=1)),
    Case("median_int", lambda m, lax, x, i: m.median(i)),
    Case("nanmedian", lambda m, lax, x, i: m.nanmedian(x, axis=0)),
    Case("nonzero_size", lambda m, lax, x, i: m.nonzero(x, size=30)),
    Case("nonzero_fill", lambda m, lax, x, i: m.nonzero(x, size=25, fill_value=-1)),
    Case("flatnonzero", lambda m, lax, x, i: m.flatnonzero(x, size=30, fill_value=7)),
    Case("argwhere", lambda m, lax, x, i: m.argwhere(x > 0, size=12)),
    Case("where_size", lambda m, lax, x, i: m.where(x < 1, size=14, fill_value=(-1, -2))),
    Case("unique_size", lambda m, lax, x, i: m.unique(x, size=10, fill_value=99.0)),
    Case("unique_all_size", lambda m, lax, x, i: m.unique(x, return_index=True, return_inverse=True,
                                                         return_counts=True, size=9)),
    Case("bincount_length", lambda m, lax, x, i: m.bincount(i, length=5)),
    Case("bincount_weights", lambda m, lax, x, i: m.bincount(i, weights=i.astype(np.float32) * 0.5, length=9)),
    Case("lax_cumulative", lambda m, lax, x, i: [lax.cumsum(x, 1, reverse=True), lax.cummax(x, 0),
                                                 lax.cummin(x, 1, reverse=True), lax.cumprod(i)]),
    Case("lax_cumlogsumexp", lambda m, lax, x, i: [lax.cumlogsumexp(x, 1), lax.cumlogsumexp(x, 0, reverse=True)],
         rtol=1e-6),
    Case("lax_sort", lambda m, lax, x, i: [lax.sort(x, dimension=0), *lax.sort((x, x * 2), num_keys=1)]),
    Case("lax_sort_key_val", lambda m, lax, x, i: lax.sort_key_val(x, -x, dimension=1)),
    Case("lax_top_k", lambda m, lax, x, i: [*lax.top_k(x, 3), *lax.top_k(i, 4)]),
    Case("nonzero", lambda m, lax, x, i: m.nonzero(x), traced=False),
    Case("where_condition", lambda m, lax, x, i: m.where(i), traced=False),
    Case("argwhere_concrete", lambda m, lax, x, i: m.argwhere(i > 2), traced=False),
    Case("unique", lambda m, lax, x, i: m.unique(x), traced=False),
    Case("unique_all", lambda m, lax, x, i: m.unique(x, return_index=True, return_inverse=True, return_counts=True),
         traced=False),
    Case("unique_rows", lambda m, lax, x, i: m.unique(m.array([[1, 2], [0, 1], [1, 2]]), axis=0, return_counts=True),
         traced=False),
    Case("bincount", lambda m, lax, x, i: m.bincount(i, minlength=10), traced=False),
    Case("unique_array_api", lambda m, lax, x, i: [m.unique_values(x), *m.unique_counts(i), *m.unique_inverse(i),
                                                   *m.unique_all(x)], traced=False),
    Case("unique_array_api_size", lambda m, lax, x, i: [*m.unique_all(x, size=12, fill_value=-5.0),
                                                        m.unique_counts(i, size=4).counts]),
]


def outputs(case: Case, np_module, lax_module, x=X, i=I) -> list:
    """The case's results as a flat list (of x and i: the arrays, or traced values of them)."""
    out = case.fn(np_module, lax_module, x, i)
    return list(out) if isinstance(out, (tuple, list)) else [out]
