"""Loops as values (issue 26): `lax.scan`, `lax.fori_loop` and `lax.while_loop` compiled once, whatever
their trip count, against `jax.jit` of the same code.

- *rnn scan*: an RNN `h = tanh(h @ W + x @ U + b)` over T steps (hidden 128, input 32, T=1000, float32),
  forward and backward: the gradient of `sum(h_t**2) / 2` over all steps w.r.t. W, U and b.
- *cosine fori_loop*: seed 000's naive loops (one scalar cosine per (k, j, i) written with
  `r.at[k, i, j].set`) as three nested `fori_loop`s, gradient of the weighted sum; the unrolled Python
  loops (what the cosine workload's *naive loops* row compiles: a 17.9k-node graph) beside it.
- *newton while*: `vmap` of a `while_loop` Newton iteration to tolerance (square roots) on 10**5 scalars:
  each lane stops when it converges, finished lanes are frozen.
The first-call column is trace + optimize + compile + one call: what these loops are about.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import Framework, RunConfig
from benchmarks.harness import Case, Row
from benchmarks.workloads import cosine

NAME = "control_flow"
TITLE = "loops as values: scan, fori_loop, while_loop (issue 26)"
MEASURE_MEMORY = False
DESCRIPTION = """\
*rnn scan*: `lax.scan` of `h = tanh(h @ W + x @ U + b)`, hidden 128, input 32, T=1000 (`--quick`: 20),
float32; the gradient of `sum over t of sum(h_t**2) / 2` w.r.t. (W, U, b) (hand-written NumPy:
backpropagation through time). *cosine fori_loop*: seed 000's naive cosine loops (B=16, R=4, N=16, W=64;
`--quick`: B=1, R=2, N=4, W=8) as three nested `fori_loop`s with `r.at[k, i, j].set(...)`, gradient of the weighted sum;
*ember unrolled* is the same loops in Python, traced into one 17.9k-node graph (full run only). *newton while*:
`vmap` of a `while_loop` Newton square root to relative tolerance 1e-6 on 10**5 float32 scalars in
[1e-3, 1e3] (`--quick`: 10**3). Peers: jax.jit of the same code (PyTorch has no traced loops)."""


# --- the RNN --------------------------------------------------------------------------------------

HIDDEN, INPUT = 128, 32
QUICK_COSINE = dict(B=1, R=2, N=4, W=8)  # a smoke run: three nested loops all the same, 8 updates


def rnn_inputs(steps: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32)
    u = (rng.standard_normal((INPUT, HIDDEN)) / np.sqrt(INPUT)).astype(np.float32)
    b = (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)
    xs = rng.standard_normal((steps, INPUT)).astype(np.float32)
    return w, u, b, xs


def rnn_loss(fw: Framework):
    lax, ops = fw.ops.lax, fw.ops

    def loss(w, u, b, xs):
        def step(h, x):
            h = ops.tanh(h @ w + x @ u + b)
            return h, ops.sum(h * h)
        _, sq = lax.scan(step, ops.zeros((HIDDEN,), b), xs)
        return ops.sum(sq) * 0.5

    return loss


def numpy_rnn_grad(w: np.ndarray, u: np.ndarray, b: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Backpropagation through time by hand: the forward states, then the reverse sweep."""
    hs = np.empty((len(xs) + 1, HIDDEN), np.float32)
    hs[0] = 0
    xu = xs @ u
    for t in range(len(xs)):
        hs[t + 1] = np.tanh(hs[t] @ w + xu[t] + b)
    gw, gz_all, dh = np.zeros_like(w), np.empty((len(xs), HIDDEN), np.float32), np.zeros(HIDDEN, np.float32)
    for t in range(len(xs) - 1, -1, -1):
        h = hs[t + 1]
        gz = (dh + h) * (1 - h * h)
        gz_all[t] = gz
        dh = w @ gz
    gw = hs[:-1].T @ gz_all
    return gw, xs.T @ gz_all, gz_all.sum(axis=0)


# --- the cosine loops -------------------------------------------------------------------------------

def cosine_fori(fw: Framework, a: Any, b: Any) -> Any:
    """Seed 000's loops over k, j, i as nested fori_loops, one functional update per (k, i, j)."""
    ops, lax = fw.ops, fw.ops.lax
    batch, n_a, _ = a.shape
    n_b = b.shape[1]

    def over_k(k, r):
        def over_j(j, r):
            aj = a[k, j]

            def over_i(i, r):
                bi = b[k, i]
                return r.at[k, i, j].set(ops.dot(bi, aj) / (ops.sqrt(ops.sum(bi * bi)) * ops.sqrt(ops.sum(aj * aj))))
            return lax.fori_loop(0, n_b, over_i, r)
        return lax.fori_loop(0, n_a, over_j, r)

    r = lax.fori_loop(0, batch, over_k, ops.zeros((batch, n_b, n_a), a))
    return ops.softmax(r, axis=1)


# --- Newton ---------------------------------------------------------------------------------------

def newton_sqrt(fw: Framework):
    lax = fw.ops.lax

    def one(a):
        def cond(c):
            x, _ = c
            return abs(x * x - a) > 1e-6 * a

        def body(c):
            x, n = c
            return (x + a / x) * 0.5, n + 1

        return lax.while_loop(cond, body, (a, 0))[0]

    return fw.vmap(one)


def numpy_newton(a: np.ndarray) -> np.ndarray:
    """The same iteration vectorized by hand: a mask of the lanes still running."""
    x = a.copy()
    run = np.abs(x * x - a) > np.float32(1e-6) * a
    while run.any():
        x = np.where(run, (x + a / x) * np.float32(0.5), x)
        run = np.abs(x * x - a) > np.float32(1e-6) * a
    return x


# --- cases ----------------------------------------------------------------------------------------

def _loopers(cfg: RunConfig) -> list[Framework]:
    """Ember and JAX (an absent JAX gives its status row); PyTorch has no traced loops."""
    return [fw for fw in cfg.peers_and_ember() if fw.kind in ("ember", "jax")]


def cases(cfg: RunConfig) -> Iterator[Case]:
    base = cfg.baseline
    steps = 20 if cfg.quick else 1000
    args = rnn_inputs(steps)
    yield Case(NAME, "rnn scan: grad", [base.impl(lambda fw: numpy_rnn_grad, args)]
               + [fw.impl(lambda fw: fw.grad(rnn_loss(fw), argnums=(0, 1, 2)), args) for fw in _loopers(cfg)],
               {"T": steps, "hidden": HIDDEN, "input": INPUT}, rtol=2e-3, atol=2e-4)

    shape = QUICK_COSINE if cfg.quick else cosine.FULL_SHAPE
    a, b, weights = cosine.inputs(shape)

    def fori_grad(fw):
        w = fw.asarray(weights)
        return fw.grad(lambda x, y: fw.ops.sum(cosine_fori(fw, x, y) * w), argnums=(0, 1))

    impls = [base.impl(lambda fw: lambda x, y: cosine.numpy_grad(x, y, weights), (a, b))]
    impls += [fw.impl(fori_grad, (a, b)) for fw in _loopers(cfg)]
    if not cfg.quick:
        impls += [fw.impl(lambda fw: fw.grad(cosine.loss_fn(cosine.cosine_naive, fw.ops, fw.asarray(weights)),
                                             argnums=(0, 1)), (a, b), suffix=" unrolled")
                  for fw in cfg.frameworks if fw.kind == "ember"]
    yield Case(NAME, "cosine fori_loop: grad of weighted sum", impls, dict(shape), rtol=1e-3, atol=1e-5)

    n = 10**3 if cfg.quick else 10**5
    a_vals = np.exp(np.random.default_rng(2).uniform(np.log(1e-3), np.log(1e3), n)).astype(np.float32)
    yield Case(NAME, "newton while: vmap", [base.impl(lambda fw: numpy_newton, (a_vals,))]
               + [fw.impl(newton_sqrt, (a_vals,)) for fw in _loopers(cfg) if fw.has_vmap],
               {"n": n}, rtol=1e-5, atol=0)


def derived(rows: list[Row]) -> list[Derived]:
    """ember / jax.jit per case, for the run time and for the first call."""
    out = []
    for case in dict.fromkeys(r.case for r in rows):
        jax = next((r for r in rows if r.case == case and r.framework == "jax" and r.median_s), None)
        if jax is None:
            continue
        for r in rows:
            if r.case == case and r.framework == "ember" and r.median_s:
                out.append(Derived(NAME, f"{case}: run time / jax.jit", r.impl, r.median_s / jax.median_s))
                if r.first_call_s and jax.first_call_s:
                    out.append(Derived(NAME, f"{case}: first call / jax.jit's", r.impl,
                                       r.first_call_s / jax.first_call_s))
    return out
