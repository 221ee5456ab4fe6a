"""examples/cnn.py at a tiny width: SGD on one batch lowers the loss, the per-sample gradients have a
leading batch axis and average to the batch's gradient, and sample 0's is the gradient of its own loss
(both computed by the NumPy backend, unoptimized)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "cnn.py")


def _example():
    spec = importlib.util.spec_from_file_location("examples_cnn", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_lowers_the_loss_and_per_sample_gradients_average_to_the_batch_gradient():
    cnn = _example()
    run = cnn.main(steps=2, batch=6, width=(2, 3), hidden=8, verbose=False)
    params, images, labels = run["params"], run["images"], run["labels"]
    losses = []
    for _ in range(4):  # the same batch: each step must lower its loss
        params, value = cnn.train_step(params, images, labels, np.float32(0.01))
        losses.append(float(value))
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    per_sample = cnn.per_sample_grads(params, images, labels)
    oracle = cnn.jax.jit(lambda p, x, y: (cnn.jax.grad(cnn.loss)(p, x, y),
                                          cnn.jax.grad(cnn.sample_loss)(p, x[0], y[0])),
                         backend="numpy", optimize=False)  # the primitives' NumPy references: cheap to compile
    batch, one = oracle(params, images, labels)
    for name in params:
        for part in ("kernel", "bias"):
            got = np.asarray(per_sample[name][part])
            assert got.shape == (6, *params[name][part].shape)
            np.testing.assert_allclose(got.mean(axis=0), batch[name][part], rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(got[0], one[name][part], rtol=1e-4, atol=1e-6)
