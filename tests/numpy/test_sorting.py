"""ember.numpy's scans and sorts and ember.lax's (sorting_cases.py) against JAX's recorded results
(record_sorting_jax.py): values, dtypes and shapes, signed zeros and NaNs included, the traced cases
under one jit and the data-dependent ones eagerly; gradients against finite differences, vmap against a
loop, and the errors JAX raises.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.errors import ArgumentValueError, AxisError, ConcretizationError
from tests.helpers import check_grads, loop_vmap, raises_naming
from tests.numpy.sorting_cases import CASES, I, X, outputs

THIS_FILE = "test_sorting.py"
# the ember.numpy functions sorting_cases.py calls (test_math.py checks every exported function has cases)
COVERED = {"argpartition", "argsort", "argwhere", "cumprod", "cumsum", "cumulative_prod", "cumulative_sum", "digitize",
           "flatnonzero", "lexsort", "median", "nancumprod", "nancumsum", "nanmedian", "nanpercentile", "nanquantile",
           "nonzero", "partition", "percentile", "quantile", "searchsorted", "sort", "unique", "unique_all",
           "unique_counts", "unique_inverse", "unique_values"}
RECORDED = {c["name"]: c["outputs"] for c in
            json.loads((Path(__file__).parent / "sorting_jax_values.json").read_text())["cases"]}


def _matches(got, want: dict, what: str, rtol: float = 0.0) -> None:
    got = np.asarray(got)
    expected = np.array(want["value"], want["dtype"]).reshape(want["shape"])
    assert (got.dtype.name, list(got.shape)) == (want["dtype"], want["shape"]), (what, got.dtype, got.shape)
    if rtol:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol, err_msg=what)
        return
    np.testing.assert_array_equal(got, expected, err_msg=what)
    if got.dtype.kind == "f":  # -0.0 where JAX has it
        np.testing.assert_array_equal(np.signbit(got) & ~np.isnan(got), np.signbit(expected) & ~np.isnan(expected),
                                      err_msg=f"{what}: signed zeros")


def test_every_case_matches_recorded_jax():
    traced = [c for c in CASES if c.traced]
    got = ember.jit(lambda x, i: [o for c in traced for o in outputs(c, jnp, lax, x, i)])(X, I)
    k = 0
    for case in traced:
        for j, want in enumerate(RECORDED[case.name]):
            _matches(got[k], want, f"{case.name} output {j}", case.rtol)
            k += 1
    for case in (c for c in CASES if not c.traced):
        found = outputs(case, jnp, lax, X, I)
        assert len(found) == len(RECORDED[case.name]), case.name
        for j, (g, want) in enumerate(zip(found, RECORDED[case.name])):
            _matches(g, want, f"{case.name} output {j} (eager)")


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5))
    losses = [
        lambda x: (jnp.sort(x, axis=0) * x).sum(),
        lambda x: (jnp.cumsum(x, axis=1) ** 2).sum() + jnp.cumprod(x, axis=0).sum(),
        lambda x: jnp.quantile(x, jnp.array([0.2, 0.7]), axis=1).sum() + jnp.median(x),
        lambda x: jnp.nanpercentile(x, 40.0) + (lax.top_k(x, 2)[0] ** 2).sum() + jnp.partition(x, 1)[:, 0].sum(),
    ]
    for loss in losses:
        check_grads(loss, (x,), rtol=1e-6, atol=1e-8)


def test_vmap_matches_a_loop():
    rng = np.random.default_rng(1)
    x, bins = rng.normal(size=(4, 6)), np.sort(rng.normal(size=(4, 5)), axis=1)
    fns = [
        (lambda x: [jnp.sort(x), jnp.argsort(x, descending=True), jnp.cumsum(x)], (0,), (x,)),
        (lambda x, b: jnp.searchsorted(b, x), (0, 0), (x, bins)),
        (lambda x, b: jnp.digitize(x, b), (1, None), (x, bins[0])),
        (lambda x: [jnp.median(x), jnp.quantile(x, 0.3), *lax.top_k(x, 2)], (1,), (x,)),
        (lambda x: [*jnp.nonzero(x > 0, size=6, fill_value=-1), jnp.unique(jnp.round(x), size=6, fill_value=0.0)],
         (0,), (x,)),
    ]
    for fn, in_axes, args in fns:
        got = ember.vmap(fn, in_axes)(*args)
        want = loop_vmap(fn, in_axes, args)
        for a, b in zip(got if isinstance(got, list) else [got], want if isinstance(want, list) else [want]):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, err_msg=str(in_axes))


def test_errors_are_jaxs():
    raises_naming(ConcretizationError, ember.jit(lambda x: jnp.nonzero(x)), X, words=("size=",), location=THIS_FILE)
    raises_naming(ConcretizationError, ember.jit(lambda i: jnp.bincount(i)), I, words=("length=",),
                  location=THIS_FILE)
    raises_naming(ArgumentValueError, jnp.searchsorted, X, X, words=("1-dimensional",), location="")
    raises_naming(ArgumentValueError, lambda: jnp.quantile(X, 0.5, method="bad"), words=("method",),
                  location=THIS_FILE)
    raises_naming(ArgumentValueError, lambda: jnp.sort(X, kind="stable"), words=("kind",), location=THIS_FILE)
    raises_naming(NotImplementedError, lambda: jnp.quantile(X, 0.5, weights=X), words=("inverted_cdf",),
                  location=THIS_FILE)
    raises_naming(ArgumentValueError, lambda: jnp.cumulative_sum(X), words=("axis",), location=THIS_FILE)
    raises_naming(ArgumentValueError, lambda: lax.top_k(X, 7), words=("k argument",), location=THIS_FILE)
    raises_naming(AxisError, lambda: lax.cumsum(X, -1), words=("negative",), location=THIS_FILE)
    raises_naming(AxisError, lambda: jnp.sort(X, axis=2), words=("axis 2",), location=THIS_FILE)
    with pytest.raises(TypeError):
        jnp.bincount(X)
    with pytest.raises(ValueError):
        jnp.unique(np.zeros(0), size=3)
