"""Seed 002: per-sample gradients of an MLP 10 -> 32 -> 32 -> 10, batch 256, float32.

The seed wants the gradient of `sum(model(x))` for each sample separately and observes that a Python loop
of single-sample gradients is far slower than the mean-batch gradient, while JAX and PyTorch `vmap` get
per-sample gradients almost at mean-batch cost. The seed's model is Flux's (and PyTorch's) Dense layer,
whose weight is stored (out, in) and applied as `x @ w.T + b`: that layout has its own mean-batch and
per-sample rows beside the `x @ w` ones (a transposed operand must cost no copy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from benchmarks.derived import Derived, ratios
from benchmarks.frameworks import Loop, Ops, RunConfig
from benchmarks.harness import FLOOR, Case, Row, floor

NAME = "per_sample"
TITLE = "per-sample gradients of an MLP (seed 002)"
MEASURE_MEMORY = False
SIZES = (10, 32, 32, 10)
BATCH = 256
ACTIVATIONS = ("identity", "tanh")
MEAN, PER_SAMPLE, LOOP = "mean-batch grad", "per-sample grads (vmap)", "loop of single-sample grads"
TRANSPOSED = "w (out, in): x @ w.T"  # the seed's (Flux's, PyTorch's) weight layout, as a case suffix
DESCRIPTION = f"""\
MLP {' -> '.join(map(str, SIZES))} (x @ w + b, activation between layers: identity or tanh), float32,
batch {BATCH}; the loss of one sample is `sum(model(x))`. *{MEAN}*: gradient of the batch mean;
*{PER_SAMPLE}*: `vmap(grad(loss), in_axes=(None, 0))`, {BATCH} gradients at once (hand-written NumPy:
outer products per sample with einsum); *{LOOP}*: a Python loop calling the jitted single-sample gradient
{BATCH} times (samples pre-split outside the timing; a loop slower than 0.5 s per call is timed on its
first 32 samples and scaled, which its note says). Parameters are one flat tuple (w1, b1, w2, b2, w3, b3).
Cases ending *{TRANSPOSED}* store each w as (out, in) and apply `x @ w.T + b` (the seed's Flux layout;
same values, transposed weights and weight gradients)."""


def init_params(seed: int = 0, sizes: tuple[int, ...] = SIZES) -> tuple[np.ndarray, ...]:
    """(w1, b1, w2, b2, ...) of an MLP of `sizes` (the seed's by default), w: (in, out) scaled by
    1/sqrt(in), b: small random (not zero: checked)."""
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        params.append((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32))
        params.append((0.1 * rng.standard_normal(n_out)).astype(np.float32))
    return tuple(params)


def transposed(params: tuple) -> tuple:
    """The same parameters with each w stored (out, in), as Flux and PyTorch store it."""
    return tuple(np.ascontiguousarray(p.T) if p.ndim == 2 else p for p in params)


def mlp(ops: Ops, params: tuple, x: Any, activation: str, w_t: bool = False) -> Any:
    """Dense layers with the activation between them (not after the last); `w_t`: x @ w.T (w is (out, in))."""
    n_layers = len(params) // 2
    for i in range(n_layers):
        x = (x @ params[2 * i].T if w_t else x @ params[2 * i]) + params[2 * i + 1]
        if activation == "tanh" and i < n_layers - 1:
            x = ops.tanh(x)
    return x


def numpy_grads(params: tuple, xs: np.ndarray, activation: str, per_sample: bool,
                w_t: bool = False) -> tuple[np.ndarray, ...]:
    """Hand-written backward of sum(model(x)) per sample: batched outer products (per_sample) or the mean;
    `w_t`: weights stored (out, in), applied as x @ w.T (their gradients likewise)."""
    n_layers = len(params) // 2
    hs = [xs]
    for i in range(n_layers):
        z = (hs[-1] @ params[2 * i].T if w_t else hs[-1] @ params[2 * i]) + params[2 * i + 1]
        hs.append(np.tanh(z) if activation == "tanh" and i < n_layers - 1 else z)
    g = np.ones_like(hs[-1])
    batch = xs.shape[0]
    grads: list[np.ndarray] = []
    for i in reversed(range(n_layers)):
        if activation == "tanh" and i < n_layers - 1:
            g = g * (1.0 - hs[i + 1] * hs[i + 1])
        if per_sample:
            grads[:0] = [np.einsum("bo,bi->boi" if w_t else "bi,bo->bio", g if w_t else hs[i], hs[i] if w_t else g),
                         g]
        else:
            w_grad = g.T @ hs[i] if w_t else hs[i].T @ g
            grads[:0] = [w_grad / np.float32(batch), g.sum(axis=0) / np.float32(batch)]
        g = g @ params[2 * i] if w_t else g @ params[2 * i].T
    return tuple(grads)


def numpy_single(activation: str) -> Callable:
    """The hand-written gradient of one sample (x of shape (10,)), as the NumPy loop calls it."""
    return lambda params, x: numpy_grads(params, x[None, :], activation, per_sample=False)


def cases(cfg: RunConfig) -> Iterator[Case]:
    """For each activation: mean-batch, vmap per-sample, and a loop of single-sample gradients."""
    params = init_params()
    xs = np.random.default_rng(1).standard_normal((BATCH, SIZES[0])).astype(np.float32)
    base = cfg.baseline
    for act in ACTIVATIONS:
        def loss(fw, act=act):
            return lambda p, x: fw.ops.sum(mlp(fw.ops, p, x, act))

        def mean_loss(fw, act=act):
            return lambda p, x: fw.ops.sum(mlp(fw.ops, p, x, act)) / float(BATCH)

        params_ = {"activation": act, "batch": BATCH}
        yield Case(NAME, f"{MEAN}, {act}",
                   [base.impl(lambda fw, act=act: lambda p, x: numpy_grads(p, x, act, False), (params, xs))]
                   + [fw.impl(lambda fw, ml=mean_loss: fw.grad(ml(fw)), (params, xs)) for fw in cfg.peers_and_ember()],
                   params_)
        yield Case(NAME, f"{PER_SAMPLE}, {act}",
                   [base.impl(lambda fw, act=act: lambda p, x: numpy_grads(p, x, act, True), (params, xs))]
                   + [fw.impl(lambda fw, lo=loss: fw.vmap(fw.grad(lo(fw)), in_axes=(None, 0)), (params, xs))
                      for fw in cfg.peers_and_ember(vmap=True)]
                   + [floor(f"write the output once ({output_bytes(params) / 1e6:.2f} MB)", write_once,
                            (params,))],
                   params_)
        yield Case(NAME, f"{LOOP}, {act}",
                   [base.impl(lambda fw, act=act: numpy_single(act), (params, xs), loop=Loop(1))]
                   + [fw.impl(lambda fw, lo=loss: fw.grad(lo(fw)), (params, xs), loop=Loop(1))
                      for fw in cfg.peers_and_ember()],
                   params_)
        yield from transposed_cases(cfg, params, xs, act)


def transposed_cases(cfg: RunConfig, params: tuple, xs: np.ndarray, act: str) -> Iterator[Case]:
    """Mean-batch and per-sample gradients with the weights stored (out, in) and applied as x @ w.T + b."""
    params_t, base = transposed(params), cfg.baseline

    def loss(fw):
        return lambda p, x: fw.ops.sum(mlp(fw.ops, p, x, act, w_t=True))

    def mean_loss(fw):
        return lambda p, x: fw.ops.sum(mlp(fw.ops, p, x, act, w_t=True)) / float(BATCH)

    params_ = {"activation": act, "batch": BATCH, "weights": "(out, in)"}
    yield Case(NAME, f"{MEAN}, {act}, {TRANSPOSED}",
               [base.impl(lambda fw: lambda p, x: numpy_grads(p, x, act, False, w_t=True), (params_t, xs))]
               + [fw.impl(lambda fw: fw.grad(mean_loss(fw)), (params_t, xs)) for fw in cfg.peers_and_ember()],
               params_)
    yield Case(NAME, f"{PER_SAMPLE}, {act}, {TRANSPOSED}",
               [base.impl(lambda fw: lambda p, x: numpy_grads(p, x, act, True, w_t=True), (params_t, xs))]
               + [fw.impl(lambda fw: fw.vmap(fw.grad(loss(fw)), in_axes=(None, 0)), (params_t, xs))
                  for fw in cfg.peers_and_ember(vmap=True)],
               params_)


def write_once(params: tuple) -> list[np.ndarray]:
    """Allocate and write arrays of the per-sample gradients' shapes: what producing them costs at least."""
    return [np.full((BATCH, *p.shape), 1.0, p.dtype) for p in params]


def output_bytes(params: tuple) -> int:
    return sum(BATCH * p.nbytes for p in params)


def derived(rows: list[Row]) -> list[Derived]:
    """per-sample (vmap) / mean-batch and loop / per-sample, for each activation and implementation;
    each of mean-batch and per-sample in the x @ w.T layout over the x @ w one (a transposed weight
    should cost nothing); per-sample / (mean-batch + 1.5 x writing the output once): the issue's goal is
    at most 1."""
    out = []
    for act in ACTIVATIONS:
        def is_(kind, act=act):
            return lambda row: row.case == f"{kind}, {act}"

        out += ratios(NAME, rows, f"per-sample / mean-batch, {act}", is_(PER_SAMPLE), is_(MEAN))
        out += ratios(NAME, rows, f"loop / per-sample, {act}", is_(LOOP), is_(PER_SAMPLE))
        for kind in (MEAN, PER_SAMPLE):
            def is_t(row, kind=kind, act=act):
                return row.case == f"{kind}, {act}, {TRANSPOSED}"

            out += ratios(NAME, rows, f"{kind}: x @ w.T / x @ w, {act}", is_t, is_(kind))
        write = next((r.median_s for r in rows if is_(PER_SAMPLE)(r) and r.framework == FLOOR and r.median_s), None)
        for ps in (r for r in rows if is_(PER_SAMPLE)(r) and r.framework != FLOOR and r.median_s):
            mean = next((r.median_s for r in rows if is_(MEAN)(r) and r.impl == ps.impl and r.median_s), None)
            if write is not None and mean is not None:
                out.append(Derived(NAME, f"per-sample / (mean-batch + 1.5 x write once), {act}", ps.impl,
                                   ps.median_s / (mean + 1.5 * write)))
    return out
