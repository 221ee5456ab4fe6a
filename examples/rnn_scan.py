"""An RNN trained with `lax.scan` and `value_and_grad`, as JAX code writes it: it runs unchanged under JAX
but for the three import lines (and NumPy instead of `jax.random` for the initial weights).

The task is the classic one of JAX's RNN tutorials: read a noisy sine wave one sample at a time and
predict the next sample. The loop over time is one `lax.scan`, so it is one node in the graph whatever
the sequence length: it traces and compiles once, in milliseconds, and its gradient is a reverse scan.

    python examples/rnn_scan.py
"""

from __future__ import annotations

import time

import numpy as np

import ember as jax  # was: import jax
import ember.numpy as jnp  # was: import jax.numpy as jnp
from ember import lax  # was: from jax import lax


def init_params(seed: int = 0, n_hidden: int = 32) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "wx": (rng.standard_normal((1, n_hidden)) * 0.5).astype(np.float32),
        "wh": (rng.standard_normal((n_hidden, n_hidden)) / np.sqrt(n_hidden)).astype(np.float32),
        "b": np.zeros(n_hidden, np.float32),
        "wo": (rng.standard_normal((n_hidden, 1)) / np.sqrt(n_hidden)).astype(np.float32),
        "bo": np.zeros(1, np.float32),
    }


def rnn(params, xs):
    """The prediction after each input: h_t = tanh(x_t wx + h_{t-1} wh + b), y_t = h_t wo + bo."""
    def step(h, x):
        h = jnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
        return h, h @ params["wo"] + params["bo"]

    h0 = jnp.zeros(params["wh"].shape[0], dtype=jnp.float32)
    _, ys = lax.scan(step, h0, xs)
    return ys


def loss(params, xs, targets):
    return jnp.mean((rnn(params, xs) - targets) ** 2)


@jax.jit
def update(params, xs, targets, lr):
    value, grads = jax.value_and_grad(loss)(params, xs, targets)
    return {k: params[k] - lr * grads[k] for k in params}, value


def data(length: int = 200, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """A noisy sine wave as (inputs, next-sample targets), each (length, 1) float32."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 8 * np.pi, length + 1)
    wave = (np.sin(t) + 0.05 * rng.standard_normal(t.shape)).astype(np.float32)
    return wave[:-1, None], wave[1:, None]


def main(steps: int = 300, length: int = 200, verbose: bool = True) -> dict:
    params = init_params()
    xs, targets = data(length)
    t0 = time.perf_counter()
    params, first = update(params, xs, targets, 0.05)
    compile_s = time.perf_counter() - t0
    losses = [float(first)]
    for _ in range(steps - 1):
        params, value = update(params, xs, targets, 0.05)
        losses.append(float(value))
    if verbose:
        print(f"sequence length {length}: first call (trace, differentiate, compile, run) {compile_s * 1e3:.0f} ms")
        for k in (0, steps // 4, steps // 2, steps - 1):
            print(f"step {k:4d}: loss {losses[k]:.4f}")
    return {"params": params, "losses": losses, "xs": xs, "targets": targets, "compile_s": compile_s}


if __name__ == "__main__":
    main()
