"""Per-sample gradients and the empirical Fisher matrix of a small MLP (seed 002).

The question: given a model m and a batch xs, compute the gradient of sum(m(x)) with respect to the
parameters for *every* sample x separately, as fast as the one gradient of the whole batch, and then
use them, e.g. for the empirical Fisher approximation F = sum_i g_i g_i^T.

With ember this is `jit(vmap(grad(loss), in_axes=(None, 0)))`: grad differentiates the per-sample
loss, vmap batches the resulting graph over the samples (the per-sample weight gradients become one
batched matrix product, not a loop), and jit compiles the whole thing once.

    python examples/per_sample_gradients.py
"""

from __future__ import annotations

import time

import numpy as np

import ember
import ember.nn as nn
import ember.numpy as jnp

SIZES = [10, 32, 32, 10]  # Chain(Dense(10, 32), Dense(32, 32), Dense(32, 10))
BATCH = 256
ACTIVATIONS = {"identity": None, "tanh": jnp.tanh}  # Flux's Dense defaults to identity


def make_loss(activation):
    """The per-sample loss of the seed: sum(model(x)) for one sample x of shape (10,)."""

    def loss(params, x):
        return jnp.sum(nn.mlp(params, x, activation))

    return loss


def flatten_per_sample(grads):
    """[(dW (B, n_in, n_out), db (B, n_out)), ...] -> G of shape (B, P): each row one sample's
    gradient, flattened layer by layer (weights, then bias)."""
    batch = grads[0][0].shape[0]
    pieces = []
    for dw, db in grads:
        pieces += [jnp.reshape(dw, (batch, -1)), jnp.reshape(db, (batch, -1))]
    return jnp.concatenate(pieces, axis=1)


def make_fisher(loss):
    """Per-sample gradients and the empirical Fisher F = G^T G = sum_i g_i g_i^T, in one compiled graph."""
    per_sample = ember.vmap(ember.grad(loss), in_axes=(None, 0))

    @ember.jit
    def fisher(params, xs):
        grads = per_sample(params, xs)
        G = flatten_per_sample(grads)
        return grads, G.T @ G

    return fisher


def check_against_loop(loss, params, xs, per_sample) -> float:
    """The largest difference between the batched gradients and single-sample grads, on a few samples."""
    single = ember.jit(ember.grad(loss))
    worst = 0.0
    for i in sorted({0, 1, 2, len(xs) - 1}):
        for (dw, db), (dw_i, db_i) in zip(per_sample, single(params, xs[i])):
            worst = max(worst, float(np.max(np.abs(dw[i] - dw_i))), float(np.max(np.abs(db[i] - db_i))))
    return worst


def _time(fn, repeat: int = 5) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def run(name: str, activation, params, xs, verbose: bool = True) -> dict:
    loss = make_loss(activation)
    fisher = make_fisher(loss)
    per_sample, F = fisher(params, xs)
    err = check_against_loop(loss, params, xs, per_sample)
    if err > 1e-4:
        raise SystemExit(f"{name}: per-sample gradients differ from a loop of grads by {err:.2e}")
    if verbose:
        shapes = ", ".join(f"{dw.shape}/{db.shape}" for dw, db in per_sample)
        batched = ember.jit(ember.vmap(ember.grad(loss), in_axes=(None, 0)))
        single = ember.jit(ember.grad(loss))
        t_batched = _time(lambda: batched(params, xs))
        t_loop = _time(lambda: [single(params, x) for x in xs], repeat=1)
        print(f"[{name}] per-sample gradients: {shapes}")
        print(f"[{name}] max |vmap(grad) - loop of grad| on a few samples: {err:.1e}")
        print(f"[{name}] time: vmap(grad) {t_batched * 1e3:.2f} ms, loop of {len(xs)} grads {t_loop * 1e3:.1f} ms")
        print(f"[{name}] empirical Fisher: shape {F.shape}, trace {float(np.trace(F)):.6g}")
    return {"loss": loss, "per_sample": per_sample, "fisher": F, "max_loop_error": err}


def main(batch: int = BATCH, seed: int = 0, verbose: bool = True) -> dict:
    """Run both variants of the seed; returns {name: results} with the inputs used."""
    params = nn.init_mlp(SIZES, seed=seed)  # float32, as the seed's Flux model
    xs = np.random.default_rng(seed).standard_normal((batch, SIZES[0])).astype(np.float32)
    results = {}
    for name, activation in ACTIVATIONS.items():
        results[name] = run(name, activation, params, xs, verbose)
        results[name].update(params=params, xs=xs)
    return results


if __name__ == "__main__":
    main()
