"""Seed 000: pairwise cosine similarity of the columns of two 3-d tensors, then a softmax over N.

a is (B, R, W) and b is (B, N, W) (the seed's Julia (W, R, B) and (W, N, B), column-major);
r[k, i, j] = cos(b[k, i], a[k, j]), softmax over i. Float32.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import Ember, Ops, RunConfig
from benchmarks.harness import Case, Impl, Row

NAME = "cosine"
TITLE = "pairwise cosine similarity + softmax (seed 000)"
MEASURE_MEMORY = False
FULL_SHAPE = dict(B=16, R=4, N=16, W=64)
QUICK_SHAPE = dict(B=2, R=4, N=16, W=64)
DESCRIPTION = """\
`a`: (B, R, W), `b`: (B, N, W), B=16, R=4, N=16, W=64, float32 (`--quick`: B=2). Cases: the forward pass;
the gradient of the seed's `sum(pairwise(a, b))` w.r.t. a and b, which is **mathematically zero** (each
softmax column sums to 1, so the sum is constant; implementations return rounding noise), and the gradient
of `sum(softmax(...) * weights)` with fixed random weights, the non-trivial scalar every result is checked
on. *vectorized* is einsum + broadcasting; *naive loops* is the seed's scalar-style loops over k, j, i
with functional updates `r = r.at[k, i, j].set(cos(b[k, i], a[k, j]))` (B·R·N = 1024 updates), to show
what tracing does with such code: its compile column is the trace + autodiff + optimize + compile time
of that unrolled graph (Ember only: the peers run the vectorized version)."""


# -- the model, once for every framework --------------------------------------------------------------

def cosine_vectorized(ops: Ops, a: Any, b: Any) -> Any:
    """softmax_i(<b_i, a_j> / (|b_i| |a_j|)) per batch k, with einsum and broadcasting."""
    an = ops.sqrt(ops.sum(a * a, axis=-1))
    bn = ops.sqrt(ops.sum(b * b, axis=-1))
    s = ops.einsum("bnw,brw->bnr", b, a) / (bn[:, :, None] * an[:, None, :])
    return ops.softmax(s, axis=1)


def cosine_naive(ops: Ops, a: Any, b: Any) -> Any:
    """The seed's loops: one scalar cosine per (k, j, i), written into r with a functional update."""
    batch, n_a, _ = a.shape
    n_b = b.shape[1]
    r = ops.zeros((batch, n_b, n_a), a)
    for k in range(batch):
        for j in range(n_a):
            aj = a[k, j]
            for i in range(n_b):
                bi = b[k, i]
                r = r.at[k, i, j].set(ops.dot(bi, aj) / (ops.sqrt(ops.sum(bi * bi)) * ops.sqrt(ops.sum(aj * aj))))
    return ops.softmax(r, axis=1)


def loss_fn(model: Callable, ops: Ops, weights: Any) -> Callable:
    """sum(model(a, b)) (weights None: the seed's constant scalar) or sum(model(a, b) * weights)."""
    if weights is None:
        return lambda a, b: ops.sum(model(ops, a, b))
    return lambda a, b: ops.sum(model(ops, a, b) * weights)


# -- hand-written NumPy ---------------------------------------------------------------------------------

def _softmax(s: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def numpy_forward(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Normalize the columns, one batched matmul, softmax over N."""
    ah = a / np.sqrt(np.sum(a * a, axis=-1, keepdims=True))
    bh = b / np.sqrt(np.sum(b * b, axis=-1, keepdims=True))
    return _softmax(bh @ ah.transpose(0, 2, 1), axis=1)


def numpy_grad(a: np.ndarray, b: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """d/d(a, b) of sum(P * weights) (weights None: all ones), P = softmax_N(b^ . a^), by hand.

    gS = P * (gP - sum_N(P * gP)); the normalized vectors get gB^ = gS a^ and gA^ = gS^T b^; through
    u = v / |v| the cotangent is (g_u - u <g_u, u>) / |v|."""
    an = np.sqrt(np.sum(a * a, axis=-1, keepdims=True))
    bn = np.sqrt(np.sum(b * b, axis=-1, keepdims=True))
    ah, bh = a / an, b / bn
    p = _softmax(bh @ ah.transpose(0, 2, 1), axis=1)
    gp = np.ones_like(p) if weights is None else weights
    gs = p * (gp - np.sum(p * gp, axis=1, keepdims=True))
    g_bh = gs @ ah
    g_ah = gs.transpose(0, 2, 1) @ bh
    g_a = (g_ah - ah * np.sum(g_ah * ah, axis=-1, keepdims=True)) / an
    g_b = (g_bh - bh * np.sum(g_bh * bh, axis=-1, keepdims=True)) / bn
    return g_a, g_b


# -- cases --------------------------------------------------------------------------------------------

def inputs(shape: dict, dtype: type = np.float32, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, weights): uniform [0, 1) tensors as in the seed, and fixed standard-normal weights."""
    rng = np.random.default_rng(seed)
    B, R, N, W = shape["B"], shape["R"], shape["N"], shape["W"]
    return (rng.random((B, R, W)).astype(dtype), rng.random((B, N, W)).astype(dtype),
            rng.standard_normal((B, N, R)).astype(dtype))


def cases(cfg: RunConfig) -> Iterator[Case]:
    """forward; grad of the seed's (constant) sum; grad of a weighted sum."""
    shape = QUICK_SHAPE if cfg.quick else FULL_SHAPE
    a, b, weights = inputs(shape)
    ember_fws = [fw for fw in cfg.frameworks if isinstance(fw, Ember)]

    def forward(model: Callable) -> Callable:
        return lambda fw: (lambda x, y: model(fw.ops, x, y))

    def grad(model: Callable, w: np.ndarray | None) -> Callable:
        return lambda fw: fw.grad(loss_fn(model, fw.ops, None if w is None else fw.asarray(w)), argnums=(0, 1))

    def impls(make_vec: Callable, make_naive: Callable, forward_only: bool) -> list[Impl]:
        rows = []
        for fw in cfg.peers_and_ember(forward_only=forward_only):
            rows.append(fw.impl(make_vec, (a, b), suffix=" vectorized" if isinstance(fw, Ember) else ""))
        rows[len(ember_fws):len(ember_fws)] = [fw.impl(make_naive, (a, b), suffix=" naive loops") for fw in ember_fws]
        return rows

    base = cfg.baseline
    yield Case(NAME, "forward", [base.impl(lambda fw: numpy_forward, (a, b))]
               + impls(forward(cosine_vectorized), forward(cosine_naive), True), dict(shape))
    yield Case(NAME, "grad of sum (constant: zero)",
               [base.impl(lambda fw: lambda x, y: numpy_grad(x, y, None), (a, b))]
               + impls(grad(cosine_vectorized, None), grad(cosine_naive, None), False), dict(shape))
    yield Case(NAME, "grad of weighted sum",
               [base.impl(lambda fw: lambda x, y: numpy_grad(x, y, weights), (a, b))]
               + impls(grad(cosine_vectorized, weights), grad(cosine_naive, weights), False), dict(shape))


def derived(rows: list[Row]) -> list[Derived]:
    """Nothing beyond the table: the ratios to NumPy and JAX are the story here."""
    return []

