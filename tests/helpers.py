"""Shared checks: gradients against central finite differences (float64), vmap against a loop."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.tracer.ir import Graph
from ember.tree import tree_flatten, tree_map, tree_unflatten


def eam(x):
    """Seed 001's energy: rho**2 + rho**3 + rho**4 / 4 with rho = sum(exp(-3 (x + 1)))."""
    rho = jnp.sum(jnp.exp(-3.0 * (x + 1.0)))
    return rho**2 + rho**3 + 0.25 * rho**4


def numerical_grad(f, args, argnum: int = 0, eps: float = 1e-6):
    """Central finite differences of scalar `f` w.r.t. the array leaves of args[argnum] (float64)."""
    args = list(args)
    leaves, tree = tree_flatten(args[argnum])
    grads = []
    for k, leaf in enumerate(leaves):
        leaf = np.asarray(leaf, dtype=np.float64)
        g = np.zeros_like(leaf)
        for idx in np.ndindex(leaf.shape):
            plus, minus = leaf.copy(), leaf.copy()
            plus[idx] += eps
            minus[idx] -= eps
            lp = list(leaves)
            lm = list(leaves)
            lp[k], lm[k] = plus, minus
            args_p, args_m = list(args), list(args)
            args_p[argnum] = tree_unflatten(tree, lp)
            args_m[argnum] = tree_unflatten(tree, lm)
            g[idx] = (float(f(*args_p)) - float(f(*args_m))) / (2 * eps)
        grads.append(g)
    return tree_unflatten(tree, grads)


def check_grads(f, args, argnums=(0,), rtol: float = 1e-5, atol: float = 1e-7, eps: float = 1e-6):
    """Assert ember.grad(f) matches central finite differences for each argnum (float64 inputs)."""
    argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    analytic = ember.grad(f, argnums=argnums)(*args)
    fwd = ember.jit(f)
    for i, g in zip(argnums, analytic):
        num = numerical_grad(fwd, args, i, eps)
        for a, n in zip(tree_flatten(g)[0], tree_flatten(num)[0]):
            np.testing.assert_allclose(np.asarray(a), n, rtol=rtol, atol=atol,
                                       err_msg=f"gradient w.r.t. argument {i}")
    return analytic


def loop_vmap(f, in_axes, args, out_axes=0):
    """vmap by a Python loop: the reference every vmap test compares against."""
    in_axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    size = next(np.shape(tree_flatten(a)[0][0])[ax] for a, ax in zip(args, in_axes) if ax is not None)
    results = []
    for i in range(size):
        sliced = [a if ax is None else tree_map(lambda leaf, ax=ax, i=i: np.take(leaf, i, axis=ax), a)
                  for a, ax in zip(args, in_axes)]
        results.append(f(*sliced))
    leaves0, tree = tree_flatten(results[0])
    per_leaf = [np.stack([np.asarray(tree_flatten(r)[0][j]) for r in results]) for j in range(len(leaves0))]
    stacked = tree_unflatten(tree, per_leaf)
    if out_axes != 0:
        stacked = tree_map(lambda x: np.moveaxis(x, 0, out_axes), stacked)
    return stacked


def assert_tree_allclose(a, b, rtol=1e-6, atol=1e-6):
    la, ta = tree_flatten(a)
    lb, tb = tree_flatten(b)
    assert ta == tb, f"structures differ: {ta} vs {tb}"
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def assert_leaves_close(a, b, tol: float = 1e-12):
    """The leaves of `a` and `b` (e.g. Ember's result and JAX's) pairwise of one shape and within `tol`."""
    la, lb = tree_flatten(a)[0], tree_flatten(b)[0]
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        assert np.shape(u) == np.shape(v)
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=tol, atol=tol)


def run(fn, *args):
    """`fn` traced and run by the numpy backend without optimization passes."""
    return ember.jit(fn, optimize=False)(*args)


def prim_names(fn, *args) -> set:
    """The primitives in the graph `fn` traces to on these arguments."""
    return {n.prim.name for n in ember.make_graph(fn)(*args).nodes}


all_nodes = Graph.all_nodes  # every node, including those inside subgraphs held in params


def raises_naming(exc, fn, *args, words=(), location: str = "") -> str:
    """Calling fn(*args) raises `exc` whose message names every one of `words` and the user's
    `location` (a file name, or file:line); returns the message."""
    with pytest.raises(exc) as info:
        fn(*args)
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    assert location in msg, f"the user's location {location!r} is missing from {msg!r}"
    return msg


def assert_vmap_matches_loop(f, in_axes, args, out_axes=0, tol: float = 1e-6):
    """ember.vmap(f) equals a Python loop over the batch, values (within `tol`) and dtype."""
    got = ember.vmap(f, in_axes, out_axes)(*args)
    want = loop_vmap(f, in_axes, args, out_axes)
    assert_tree_allclose(got, want, rtol=tol, atol=tol)
    for g, w in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        assert np.asarray(g).dtype == np.asarray(w).dtype
    return got


def vmap_checker(tol: float):
    """assert_vmap_matches_loop with a file's tolerance bound."""
    return functools.partial(assert_vmap_matches_loop, tol=tol)


def near(points, dtype, k: int = 2) -> np.ndarray:
    """`points` in `dtype` and their k neighbours on either side (the math tests' boundaries)."""
    with np.errstate(over="ignore"):
        p = np.asarray(points, dtype)
    out, up, down = [p], p, p
    for _ in range(k):
        up, down = np.nextafter(up, dtype(np.inf)), np.nextafter(down, dtype(-np.inf))
        out += [up, down]
    return np.concatenate(out)


def compiled_cover(configs: list, features) -> list:
    """The batching tests' configurations for the backend a test runs on. The batching rules run before
    any backend, so the numpy oracle backend checks every configuration; a compiling backend (each
    configuration is a compile) checks a subset in which every feature of every configuration
    (`features(config)`: e.g. each argument's batch axis and the output axis, as (position, value)
    pairs) still occurs at least once: each layout the rule produces reaches the compiler."""
    import os

    if os.environ.get("EMBER_BACKEND") == "numpy":
        return list(configs)
    chosen, seen = [], set()
    remaining = [(c, set(features(c))) for c in configs]
    while remaining:
        best = max(remaining, key=lambda cf: len(cf[1] - seen))
        if not best[1] - seen:
            break
        chosen.append(best[0])
        seen |= best[1]
        remaining.remove(best)
    return [c for c in configs if any(c is d for d in chosen)]


def axes_features(axes) -> list:
    """Each argument's batch axis, and for each pair of arguments which of them are batched: the
    features `compiled_cover` keeps for in_axes tuples."""
    import itertools

    axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
    pairs = itertools.combinations(range(len(axes)), 2)
    return list(enumerate(axes)) + [(i, j, axes[i] is None, axes[j] is None) for i, j in pairs]


def array_to_json(a) -> dict:
    """An array as JSON: dtype, shape and the values (float32 ones exactly, through float64), as the
    recorded-JAX-values files hold them."""
    a = np.asarray(a)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": a.astype(np.float64).ravel().tolist()}


def array_from_json(d: dict) -> np.ndarray:
    """The array `array_to_json` wrote."""
    return np.asarray(d["data"], np.float64).astype(d["dtype"]).reshape(d["shape"])
