"""Seed 004, first ask: gradient of sum(tanh(conv(x, w) + b)^2) w.r.t. x, w and b: time and peak memory.

As for dense_bias_act, the point is memory: the convolution's output can be overwritten in place by the
activation and then by its cotangent, because tanh's derivative can be written in terms of its output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from benchmarks import environment
from benchmarks.derived import Derived
from benchmarks.frameworks import Ember, Framework, RunConfig
from benchmarks.harness import Case, Row, log
from benchmarks.report import Table
from benchmarks.workloads.dense_bias_act import add_memory_rows

NAME = "conv_bias_act"
TITLE = "conv + bias + tanh gradient, time and memory (seed 004)"
MEASURE_MEMORY = True
SETTINGS = dict(min_reps=3)  # the ResNet layer's gradient takes a good part of a second per call


class Layer(NamedTuple):
    """One convolution: batch, square image side, in and out channels, square kernel side."""

    label: str
    batch: int
    side: int
    c_in: int
    c_out: int
    k: int = 3


FULL_SIZES = (Layer("ResNet layer", 32, 56, 64, 64), Layer("small layer", 8, 32, 3, 16))
QUICK_SIZES = (Layer("ResNet-like layer", 2, 8, 4, 4), Layer("small layer", 2, 6, 3, 5))
LAYOUT = ("NHWC", "HWIO", "NHWC")
DESCRIPTION = """\
`sum(tanh(conv(x, w) + b)**2)`, gradient w.r.t. (x, w, b), float32, stride 1, "SAME" padding, layout
NHWC inputs and HWIO kernels (Flax's; `ember.nn.conv`'s), b one value per output channel. Sizes: a ResNet
layer (batch 32, 56x56, 64 -> 64 channels, 3x3) and a small one (batch 8, 32x32, 3 -> 16, 3x3);
`--quick`: batch 2, 8x8, 4 -> 4 and 6x6, 3 -> 5. Ember and JAX run the same `lax.conv_general_dilated`
code; PyTorch runs `torch.nn.functional.conv2d` on channels-last views of the same NHWC/HWIO arrays
(`permute`, no copy), eager (autograd), `torch.func.grad`, and `torch.compile` of the loss under
autograd where it compiles. The hand-written NumPy baseline is im2col (`sliding_window_view`) and
`tensordot`. Peak memory as in dense_bias_act: Ember's plan against XLA's `memory_analysis()`; the table
after the timings also shows `optimize=False`'s plan, the compiled arena (the plan's buffers and kernel
scratch: im2col's windows) against XLA's temp, and says which OpenBLAS kernel ran (Ember's
convolution calls SciPy's OpenBLAS gemm on im2col windows)."""


def inputs(layer: Layer, dtype: type = np.float32, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x standard normal; w scaled by 1/sqrt(fan in) so tanh is not saturated; b standard normal / 4."""
    rng = np.random.default_rng(seed)
    fan_in = layer.k * layer.k * layer.c_in
    return (rng.standard_normal((layer.batch, layer.side, layer.side, layer.c_in)).astype(dtype),
            (rng.standard_normal((layer.k, layer.k, layer.c_in, layer.c_out)) / np.sqrt(fan_in)).astype(dtype),
            (rng.standard_normal(layer.c_out) / 4).astype(dtype))


def loss_fn(fw: Framework) -> Callable:
    """The seed's scalar in `fw`'s own convolution: lax.conv_general_dilated for Ember and JAX,
    conv2d on channels-last views for PyTorch."""
    if fw.kind == "torch":
        conv2d = fw.torch.nn.functional.conv2d

        def torch_loss(x: Any, w: Any, b: Any) -> Any:
            z = conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), padding="same")
            return fw.ops.sum(fw.ops.tanh(z + b[:, None, None]) ** 2)

        return torch_loss

    def loss(x: Any, w: Any, b: Any) -> Any:
        return fw.ops.sum(fw.ops.tanh(fw.ops.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                                      dimension_numbers=LAYOUT) + b) ** 2)

    return loss


def _windows(padded: np.ndarray, k: int) -> np.ndarray:
    """The k x k windows of an NHWC array as a view (N, H', W', C, k, k): im2col without a copy."""
    return np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(1, 2))


def numpy_grad(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """By hand: z = windows(x) . w, y = tanh(z + b), gz = 2 y (1 - y^2); dw = windows(x)^T . gz,
    db = sums of gz, dx = the "full" convolution of gz with the flipped kernel, in/out swapped."""
    k = w.shape[0]
    pad = ((0, 0), (k // 2, k // 2), (k // 2, k // 2), (0, 0))
    win = _windows(np.pad(x, pad), k)
    y = np.tanh(np.tensordot(win, w.transpose(2, 0, 1, 3), axes=3) + b)
    gz = 2.0 * y * (1.0 - y * y)
    dw = np.tensordot(win, gz, axes=([0, 1, 2], [0, 1, 2])).transpose(1, 2, 0, 3)
    dx = np.tensordot(_windows(np.pad(gz, pad), k), w[::-1, ::-1].transpose(3, 0, 1, 2), axes=3)
    return dx, dw, gz.sum(axis=(0, 1, 2))


def _torch_compiled(fw: Framework) -> Callable:
    """Autograd over `torch.compile` of the loss (inductor compiles the forward and the backward), for
    static shapes: each layer compiles its own (the second shape would otherwise go symbolic)."""
    return fw.grad(fw.torch.compile(loss_fn(fw), dynamic=False), argnums=(0, 1, 2))


def _params(layer: Layer) -> dict:
    return {"batch": layer.batch, "side": layer.side, "c_in": layer.c_in, "c_out": layer.c_out, "k": layer.k}


def _name(layer: Layer) -> str:
    return (f"grad x, w, b: {layer.label} {layer.batch}x{layer.side}x{layer.side}x{layer.c_in} -> {layer.c_out}, "
            f"{layer.k}x{layer.k}")


def cases(cfg: RunConfig) -> Iterator[Case]:
    """One case per layer; torch eager also runs under torch.compile where PyTorch has it."""
    for layer in QUICK_SIZES if cfg.quick else FULL_SIZES:
        args = inputs(layer)
        impls = [cfg.baseline.impl(lambda fw: numpy_grad, args, memory=True)]
        for fw in cfg.peers_and_ember():
            impls.append(fw.impl(lambda fw: fw.grad(loss_fn(fw), argnums=(0, 1, 2)), args, memory=True))
            if fw.kind == "torch" and not fw.transforms_only and hasattr(fw, "torch") and hasattr(fw.torch, "compile"):
                impls.append(fw.impl(_torch_compiled, args, suffix=" + torch.compile"))
        yield Case(NAME, _name(layer), impls, _params(layer), rtol=1e-3)


def derived(rows: list[Row]) -> list[Derived]:
    """None: the goal (faster than jax.jit at both sizes) reads directly off the table's vs-JAX column."""
    return []


MEMORY_COLUMNS = ["function", "layer", "bytes", "{ember} optimized", "{ember} optimize=False",
                  "optimized / optimize=False", "jax.jit", "{ember} optimized / JAX"]


def functions(fw: Framework) -> list[tuple[str, Callable]]:
    """The functions whose memory is compared: the gradient the timings run, and the forward loss."""
    return [("grad x, w, b", fw.grad(loss_fn(fw), argnums=(0, 1, 2))), ("forward", loss_fn(fw))]


def memory_table(cfg: RunConfig, ember: Ember, jax: Framework) -> Table:
    """Ember's memory plan, optimized and not, and its compiled arena beside JAX's memory analysis, per
    function and layer."""
    table = Table(f"Memory: {ember.name}'s plan (`lower(...).memory()`) beside JAX's `memory_analysis()`",
                  [c.format(ember=ember.name) for c in MEMORY_COLUMNS])
    for layer in QUICK_SIZES if cfg.quick else FULL_SIZES:
        where = f"{layer.label} {layer.batch}x{layer.side}x{layer.side}x{layer.c_in}"
        log(f"  memory plans, {where} ...")
        add_memory_rows(table, ember, jax, functions, inputs(layer), where, f"{where} -> {layer.c_out}",
                        _params(layer), arena=True)
    table.note = ("Bytes beyond the inputs, as in dense_bias_act's table: *intermediates* is Ember's "
                  "`memory().peak_bytes` against XLA's `temp_size_in_bytes`; *outputs + intermediates* adds the "
                  "outputs on both sides. The plan is the graph's, before a backend; *arena* is what a compiled "
                  "call works in (`memory().arena_bytes`, on llvm; — on a backend that does not say): the plan's "
                  "buffers and the kernels' scratch, im2col's windows of at most 256 KiB a product (the ResNet "
                  "layer's bands of 5 output rows: 630 KiB), against XLA's temp (its buffer assignment: the Eigen "
                  "convolutions XLA calls pack their operands in memory of their own, not counted there). "
                  "BLAS kernels (the gemm under "
                  f"Ember's im2col convolution): {environment.blas_description()}.")
    return table


def tables(cfg: RunConfig) -> list[Table]:
    """The memory table, on the first Ember backend (the plan does not depend on the backend)."""
    ember = next(fw for fw in cfg.frameworks if isinstance(fw, Ember))
    jax = next(fw for fw in cfg.frameworks if fw.kind == "jax")
    return [memory_table(cfg, ember, jax)]
