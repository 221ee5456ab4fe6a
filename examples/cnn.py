"""A LeNet-sized convolutional network (conv-pool-conv-pool-dense-dense) trained for a few steps of plain
SGD on synthetic 28x28x1 images, then the per-sample gradients of one batch with
`vmap(grad(loss), in_axes=(None, 0, 0))`, as JAX code writes it. It runs unchanged under JAX but for
the two import lines.

The images are ten fixed random templates plus noise, labelled by their template, so a few steps
already lower the loss. Layout NHWC with HWIO kernels (Flax's); the convolutions are
`lax.conv_general_dilated`, the pooling `lax.reduce_window`, and the training step, its gradient and the
parameter update, is one compiled function.

    python examples/cnn.py
"""

from __future__ import annotations

import time

import numpy as np

import ember as jax  # was: import jax
import ember.numpy as jnp  # was: import jax.numpy as jnp

LAYOUT = ("NHWC", "HWIO", "NHWC")
CLASSES = 10


def init_params(seed: int = 0, width: tuple[int, int] = (6, 16), hidden: int = 120) -> dict:
    """LeNet's layers: 5x5 convolutions 1 -> width[0] -> width[1], dense 5*5*width[1] -> hidden -> 10;
    weights normal with variance 2 / fan-in (He), biases zero."""
    rng = np.random.default_rng(seed)

    def layer(shape):
        fan_in = int(np.prod(shape[:-1]))
        return {"kernel": (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32),
                "bias": np.zeros(shape[-1], np.float32)}

    return {"conv1": layer((5, 5, 1, width[0])), "conv2": layer((5, 5, width[0], width[1])),
            "dense1": layer((5 * 5 * width[1], hidden)), "dense2": layer((hidden, CLASSES))}


def conv(layer, x, padding):
    """x (batch, h, w, c) convolved with the layer's HWIO kernel, plus its bias."""
    return jax.lax.conv_general_dilated(x, layer["kernel"], (1, 1), padding, dimension_numbers=LAYOUT) + layer["bias"]


def max_pool(x):
    """2x2 max pooling with stride 2 over the spatial axes."""
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def logits(params, images):
    """28x28x1 -> conv 5x5 SAME, relu, pool -> 14x14 -> conv 5x5 VALID, relu, pool -> 5x5 -> dense, relu,
    dense -> 10 logits per image."""
    x = max_pool(jax.nn.relu(conv(params["conv1"], images, "SAME")))
    x = max_pool(jax.nn.relu(conv(params["conv2"], x, "VALID")))
    x = x.reshape(x.shape[0], -1)
    x = jax.nn.relu(x @ params["dense1"]["kernel"] + params["dense1"]["bias"])
    return x @ params["dense2"]["kernel"] + params["dense2"]["bias"]


def loss(params, images, labels):
    """Mean softmax cross-entropy of the batch."""
    log_probs = jax.nn.log_softmax(logits(params, images))
    return -jnp.mean(jnp.take_along_axis(log_probs, labels[:, None], axis=1))


def sample_loss(params, image, label):
    """The loss of one example (image (28, 28, 1), scalar label): a batch of one."""
    return loss(params, image[None], label[None])


@jax.jit
def train_step(params, images, labels, lr):
    """One SGD step: the loss, and the parameters moved against its gradient."""
    value, grads = jax.value_and_grad(loss)(params, images, labels)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), value


per_sample_grads = jax.jit(jax.vmap(jax.grad(sample_loss), in_axes=(None, 0, 0)))


def data(batch: int, seed: int = 1, noise: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """`batch` images (batch, 28, 28, 1): a random template per class plus Gaussian noise, and labels."""
    rng = np.random.default_rng(seed)
    templates = np.random.default_rng(0).standard_normal((CLASSES, 28, 28, 1))
    labels = rng.integers(0, CLASSES, batch)
    images = templates[labels] + noise * rng.standard_normal((batch, 28, 28, 1))
    return images.astype(np.float32), labels.astype(np.int32)


def main(steps: int = 20, batch: int = 32, lr: float = 0.01, width: tuple[int, int] = (6, 16), hidden: int = 120,
         verbose: bool = True) -> dict:
    params = init_params(width=width, hidden=hidden)
    losses = []
    t0 = time.perf_counter()
    for step in range(steps):
        images, labels = data(batch, seed=step)
        params, value = train_step(params, images, labels, np.float32(lr))
        losses.append(float(value))
    train_s = time.perf_counter() - t0
    images, labels = data(batch, seed=steps)
    grads = per_sample_grads(params, images, labels)
    if verbose:
        print(f"{steps} SGD steps of batch {batch} in {train_s:.2f} s (first: trace, differentiate, compile)")
        for k in (0, steps // 2, steps - 1):
            print(f"step {k:3d}: loss {losses[k]:.4f}")
        print("per-sample gradients:", {name: tuple(g["kernel"].shape) for name, g in grads.items()})
    return {"losses": losses, "params": params, "images": images, "labels": labels, "per_sample": grads}


if __name__ == "__main__":
    main()
