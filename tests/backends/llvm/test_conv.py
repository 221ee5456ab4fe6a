"""Convolution steps rendered by ember.backends.llvm.conv, both methods (im2col and the product, the
direct nest) over the convolution grid of tests/tracer/test_prims_conv.py, run natively against
conv_general_dilated's numpy rule: ints exactly, floats within rounding. One module holds every
case, so the whole grid is one compile."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest

import ember
import ember.numpy as enp
from benchmarks.workloads.conv_bias_act import FULL_SIZES, LAYOUT, inputs
from ember import lax
from ember.backends.kernel import Buffer, Convolution
from ember.backends.llvm import conv, dot
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.primitive import impl_rules, shape_rules
from ember.tracer.prims.conv import _swap, _vjp_rhs_padding
from tests.backends.llvm.harness import Compiled, new_module, pointer_function
from tests.tracer.test_prims_conv import GRID, _case, _explicit, grid_inputs

# DIRECT_MAX_PRODUCT and whether im2col_t may be taken, forcing each method where it applies
METHODS = {"im2col": (0, False), "im2col_t": (0, True), "direct": (10 ** 9, True)}
DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.float16))


def _step(i: int, dtype) -> tuple[Convolution, dict]:
    ls, rs, kw = GRID[i]
    params = _explicit(ls, rs, kw)
    out = shape_rules[P.conv_general_dilated_p](ShapedArray(ls, dtype), ShapedArray(rs, dtype), **params)
    buffers = {"in0": Buffer("in0", ls, dtype), "in1": Buffer("in1", rs, dtype),
               "out0": Buffer("out0", out.shape, dtype)}
    return Convolution("in0", "in1", out="out0", **params), buffers


def test_both_methods_match_the_reference_over_the_grid():
    module = new_module()
    scratch = {}
    transposable = conv.transposable
    for name, (limit, t) in METHODS.items():
        with mock.patch.object(conv, "DIRECT_MAX_PRODUCT", limit), mock.patch.object(dot, "BLAS_MIN_STEPS", 64), \
                mock.patch.object(conv, "transposable", transposable if t else lambda step, buffers: False):
            for i in range(len(GRID)):
                for dt in DTYPES:
                    step, buffers = _step(i, dt)
                    fallback = "im2col_t" if t and transposable(step, buffers) else "im2col"
                    able = {"im2col": True, "im2col_t": fallback == "im2col_t",
                            "direct": conv.vectorizable(step, buffers)}[name]
                    assert conv.method(step, buffers) == (name if able else fallback)
                    fn, builder = pointer_function(module, f"{name}_{i}_{dt.name}", 4)
                    conv.emit_convolution(builder, step, buffers, dict(zip(("in0", "in1", "out0"), fn.args)),
                                          fn.args[3])
                    builder.ret_void()
                    scratch[fn.name] = conv.scratch_bytes(step, buffers)
    compiled = Compiled(module, dot.blas_symbols(), opt=0)  # unoptimized: 1 s, not 6 (the suite's jits run -O3)
    for name in METHODS:
        for i in range(len(GRID)):
            for dt in DTYPES:
                step, buffers = _step(i, dt)
                lhs, rhs = grid_inputs(i, np.int32 if dt.kind == "i" else np.float32)
                lhs, rhs = lhs.astype(dt), rhs.astype(dt)
                want = impl_rules[P.conv_general_dilated_p](lhs, rhs, **step.params())
                out = np.full(buffers["out0"].shape, 99, dt)  # the old contents must not matter
                room = scratch[f"{name}_{i}_{dt.name}"]
                raw = np.full(room + 64, 0xAB, np.uint8)
                aligned = raw[-raw.ctypes.data % 64:][:max(room, 1)]
                compiled.call(f"{name}_{i}_{dt.name}", lhs, rhs, out, aligned)
                if dt.kind == "i":
                    np.testing.assert_array_equal(out, want, err_msg=f"{name} {GRID[i][2]}")
                else:
                    tol = 2e-5 if dt == np.float32 else 2e-2
                    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol,
                                               err_msg=f"{name} {dt} {GRID[i][2]}")


def test_the_choice_rule():
    """A small product per group (output features x window sum: depthwise) over rows along a spatial
    axis takes the direct nest, anything else im2col, whose matrix (one image's windows) is workspace
    (scratch) of the kernel."""
    def step(c_in, c_out, groups, layout="NCHW"):
        specs = {"NCHW": ((0, 1, 2, 3),) * 3, "NHWC": ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))}[layout]
        canon_l, canon_r = (2, c_in * groups, 8, 8), (c_out * groups, c_in, 3, 3)
        ls = tuple(canon_l[specs[0].index(a)] for a in range(4))
        rs = tuple(canon_r[specs[1].index(a)] for a in range(4))
        params = dict(window_strides=(1, 1), padding=((1, 1), (1, 1)), lhs_dilation=(1, 1), rhs_dilation=(1, 1),
                      dimension_numbers=specs, feature_group_count=groups, batch_group_count=1)
        out = shape_rules[P.conv_general_dilated_p](ShapedArray(ls, np.float32), ShapedArray(rs, np.float32),
                                                    **params)
        f32 = np.dtype(np.float32)
        bufs = {"x": Buffer("x", ls, f32), "w": Buffer("w", rs, f32), "y": Buffer("y", out.shape, f32)}
        return Convolution("x", "w", out="y", **params), bufs

    assert conv.method(*step(1, 1, 16)) == "direct"  # depthwise 3x3: 1 x 9
    assert conv.method(*step(2, 2, 8)) == "direct"  # 2 x 18
    assert conv.method(*step(1, 1, 16, "NHWC")) == "im2col"  # rows would run along the features
    for c_in, c_out in ((3, 16), (64, 64)):
        s, b = step(c_in, c_out, 1)
        assert conv.method(s, b) == "im2col_t"  # NCHW: features before positions
        assert conv.method(*step(c_in, c_out, 1, "NHWC")) == "im2col"
        assert conv.method(*step(c_in, c_out, 2)) == "im2col"  # groups
        one_image = c_in * 9 * 8 * 8 * 4  # the im2col matrix holds one image of the batch of 2
        assert one_image <= conv.scratch_bytes(s, b) < 2 * one_image + 2 * c_out * 8 * 8 * 4 + 4096


def _run_float32(module, runs: list, rng) -> None:
    """Compile `module` and check each (function, step, lhs shape, rhs shape, out shape, scratch bytes)
    run on random float32 operands against the primitive's reference."""
    compiled = Compiled(module, dot.blas_symbols(), opt=0)
    for name, step, ls, rs, out_shape, room in runs:
        lhs, rhs = rng.normal(size=ls).astype(np.float32), rng.normal(size=rs).astype(np.float32)
        out = np.full(out_shape, np.nan, np.float32)
        raw = np.zeros(room + 64, np.uint8)
        compiled.call(name, lhs, rhs, out, raw[-raw.ctypes.data % 64:][:max(room, 1)])
        want = impl_rules[P.conv_general_dilated_p](lhs, rhs, **step.params())
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5, err_msg=name)


def test_im2col_runs_the_batch_in_chunks():
    """Chunks of images sized by WINDOW_BYTES: a loop of full chunks and a shorter last one (5 = 2 + 2 + 1),
    into the output directly (NHWC) and through the scratch result (NCHW, groups)."""
    rng = np.random.default_rng(0)
    module, runs = new_module(), []
    for k, specs in enumerate((((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)), ((0, 1, 2, 3),) * 3)):
        groups = 1 if k == 0 else 2
        canon_l, canon_r = (5, 2 * groups, 6, 5), (3 * groups, 2, 3, 2)
        ls = tuple(canon_l[specs[0].index(a)] for a in range(4))
        rs = tuple(canon_r[specs[1].index(a)] for a in range(4))
        params = dict(window_strides=(2, 1), padding=((1, 1), (0, 1)), lhs_dilation=(1, 1), rhs_dilation=(1, 1),
                      dimension_numbers=specs, feature_group_count=groups, batch_group_count=1)
        f32 = np.dtype(np.float32)
        out = shape_rules[P.conv_general_dilated_p](ShapedArray(ls, f32), ShapedArray(rs, f32), **params)
        buffers = {"in0": Buffer("in0", ls, f32), "in1": Buffer("in1", rs, f32),
                   "out0": Buffer("out0", out.shape, f32)}
        step = Convolution("in0", "in1", out="out0", **params)
        per_image = math.prod(out.shape[2:]) * groups * 2 * 3 * 2 * 4  # one image's windows
        with mock.patch.object(conv, "WINDOW_BYTES", 2 * per_image), mock.patch.object(conv, "DIRECT_MAX_PRODUCT", 0):
            assert conv.chunk_images(step, buffers) == 2
            fn, builder = pointer_function(module, f"chunks{k}", 4)
            conv.emit_convolution(builder, step, buffers, dict(zip(("in0", "in1", "out0"), fn.args)), fn.args[3])
            builder.ret_void()
            runs.append((fn.name, step, ls, rs, out.shape, conv.scratch_bytes(step, buffers)))
    _run_float32(module, runs, rng)


def test_im2col_runs_large_images_in_bands():
    """An image whose windows exceed WINDOW_BYTES runs in bands of output rows (7 = 3 + 3 + 1 here), each
    image in turn: into the output directly (NHWC), through the scratch result (NCHW, groups), a
    1-D one, and im2col_t's (NCHW and NCH, one group: the band's rows copied into the image)."""
    rng = np.random.default_rng(0)
    module, runs = new_module(), []
    f32 = np.dtype(np.float32)
    for k, (specs, groups, canon_l) in enumerate((
            (((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)), 1, (2, 3, 7, 5)),
            (((0, 1, 2, 3),) * 3, 2, (2, 4, 7, 5)),
            (((0, 2, 1), (2, 1, 0), (0, 2, 1)), 1, (3, 3, 7)),
            (((0, 1, 2, 3),) * 3, 1, (2, 3, 7, 5)),  # im2col_t
            (((0, 1, 2),) * 3, 1, (3, 3, 7)))):
        nd = len(canon_l) - 2
        canon_r = (3 * groups, canon_l[1] // groups) + (3,) * nd
        ls = tuple(canon_l[specs[0].index(a)] for a in range(nd + 2))
        rs = tuple(canon_r[specs[1].index(a)] for a in range(nd + 2))
        params = dict(window_strides=(1,) * nd, padding=((1, 1),) * nd, lhs_dilation=(1,) * nd,
                      rhs_dilation=(1,) * nd, dimension_numbers=specs, feature_group_count=groups, batch_group_count=1)
        out = shape_rules[P.conv_general_dilated_p](ShapedArray(ls, f32), ShapedArray(rs, f32), **params)
        buffers = {"in0": Buffer("in0", ls, f32), "in1": Buffer("in1", rs, f32), "out0": Buffer("out0", out.shape, f32)}
        step = Convolution("in0", "in1", out="out0", **params)
        row = math.prod(canon_l[3:]) * groups * canon_r[1] * 3 ** nd * 4  # one output row's windows (bytes)
        patches = dict(WINDOW_BYTES=3 * row, BAND_MIN_ROWS=1, DIRECT_MAX_PRODUCT=0)
        with mock.patch.multiple(conv, **patches):
            assert (conv.band_rows(step, buffers), conv.chunk_images(step, buffers)) == (3, 1)
            fn, builder = pointer_function(module, f"bands{k}", 4)
            conv.emit_convolution(builder, step, buffers, dict(zip(("in0", "in1", "out0"), fn.args)), fn.args[3])
            builder.ret_void()
            runs.append((fn.name, step, ls, rs, out.shape, conv.scratch_bytes(step, buffers)))
    _run_float32(module, runs, rng)


def _kernel_gradient(case) -> tuple[Convolution, dict]:
    """The convolution the VJP computes a kernel's cotangent with (lhs: the forward input, rhs: the
    output's cotangent, batch and feature roles swapped) for the forward convolution `case`."""
    ls, rs, kw = case
    fwd = _explicit(ls, rs, kw)
    f32 = np.dtype(np.float32)
    ct = shape_rules[P.conv_general_dilated_p](ShapedArray(ls, f32), ShapedArray(rs, f32), **fwd).shape
    lhs_spec, rhs_spec, out_spec = fwd["dimension_numbers"]
    sp = lambda shape, spec: [shape[d] for d in spec[2:]]  # noqa: E731
    pads = _vjp_rhs_padding(sp(ls, lhs_spec), sp(rs, rhs_spec), fwd["window_strides"], sp(ct, out_spec),
                            fwd["padding"], fwd["lhs_dilation"], fwd["rhs_dilation"])
    params = dict(window_strides=fwd["rhs_dilation"], padding=pads, lhs_dilation=fwd["lhs_dilation"],
                  rhs_dilation=fwd["window_strides"], feature_group_count=1, batch_group_count=1,
                  dimension_numbers=(_swap(lhs_spec), _swap(out_spec), _swap(rhs_spec)))
    buffers = {"in0": Buffer("in0", ls, f32), "in1": Buffer("in1", ct, f32), "out0": Buffer("out0", rs, f32)}
    return Convolution("in0", "in1", out="out0", **params), buffers


# forward convolutions whose kernel gradient takes im2col_sum: layouts NCHW, NHWC, 1-D, 3-D; strides,
# dilations, negative and uneven padding
SUM_CASES = [
    _case(2, padding="SAME", n=5, c=3, o=4, size=6, k=3),
    _case(2, layout=1, padding="SAME", n=5, c=3, o=4, size=6, k=3),
    _case(2, layout=1, strides=(2, 1), padding=((1, 2), (0, -1)), n=3, size=7, k=3),
    _case(2, rhs_dil=(2, 1), lhs_dil=(1, 2), padding=((2, 0), (1, 1)), n=3, size=6),
    _case(1, layout=1, strides=2, padding="SAME", n=4, c=3, o=5, size=9, k=3),
    _case(3, layout=1, padding="SAME", n=3, size=4, k=2),
]


def test_im2col_sum_computes_kernel_gradients():
    """The kernel gradient's convolution (a window longer than its output) sums products over chunks
    of its input features (the forward batch, 2 per chunk here: a loop and a shorter last chunk; 1
    where the kernel operand's axis 1 is its output features), in
    float32, float64 and int32 (exact) against the reference; in float32 also over bands of its window
    where the kernel operand's axis 1 is a window axis (NHWC-like: 2 rows per band)."""
    rng = np.random.default_rng(0)
    module, runs = new_module(), []
    dtypes = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32))
    bands = 0
    for k, case in enumerate(SUM_CASES):
        step, f32_buffers = _kernel_gradient(case)
        assert conv.method(step, f32_buffers) == "im2col_sum"
        for dt in dtypes:
            buffers = {n: Buffer(n, b.shape, dt) for n, b in f32_buffers.items()}
            # all input features in one chunk at the default WINDOW_BYTES, but one at a time where the kernel
            # operand's axis 1 is its output features (NCHW-like)
            window_first = 1 in step.dimension_numbers[1][2:]
            features = buffers["in0"].shape[step.dimension_numbers[0][1]]
            assert conv.chunk_features(step, buffers) == (features if window_first else 1)
            chunks = dict(WINDOW_BYTES=2 * _sum_feature_bytes(step, buffers))
            axis = window_first and dt == np.float32
            window = [buffers["in1"].shape[d] for d in step.dimension_numbers[1][2:]]
            rest = math.prod(window) // buffers["in1"].shape[1]  # terms per band row
            banded = dict(WINDOW_BYTES=1, BAND_MIN_ROWS=rest + 1) if axis else None
            for tag, patches in (("chunks", chunks), ("bands", banded)):
                if patches is None:
                    continue
                with mock.patch.multiple(conv, **patches):
                    if tag == "chunks":
                        assert conv.chunk_features(step, buffers) == (2 if window_first else 1)
                    else:
                        assert (conv.chunk_features(step, buffers), conv.sum_band_rows(step, buffers)) == (1, 2)
                        bands += 1
                    fn, builder = pointer_function(module, f"sum{k}_{dt.name}_{tag}", 4)
                    conv.emit_convolution(builder, step, buffers, dict(zip(("in0", "in1", "out0"), fn.args)),
                                          fn.args[3])
                    builder.ret_void()
                    runs.append((fn.name, step, buffers, dt, conv.scratch_bytes(step, buffers)))
    assert bands >= 3
    compiled = Compiled(module, dot.blas_symbols(), opt=0)
    for name, step, buffers, dt, room in runs:
        shapes = [buffers[n].shape for n in ("in0", "in1")]
        if dt.kind == "i":
            lhs, rhs = (rng.integers(-4, 5, s).astype(dt) for s in shapes)
        else:
            lhs, rhs = (rng.normal(size=s).astype(dt) for s in shapes)
        out = np.full(buffers["out0"].shape, 99, dt)  # the old contents must not matter
        raw = np.full(room + 64, 0xAB, np.uint8)
        compiled.call(name, lhs, rhs, out, raw[-raw.ctypes.data % 64:][:max(room, 1)])
        want = impl_rules[P.conv_general_dilated_p](lhs, rhs, **step.params())
        if dt.kind == "i":
            np.testing.assert_array_equal(out, want, err_msg=name)
        else:
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=name)


def _sum_feature_bytes(step: Convolution, buffers: dict) -> int:
    """im2col_sum's col bytes per input feature: the output's positions (less its features) x the window."""
    _, rhs_spec, out_spec = step.dimension_numbers
    out = buffers["out0"].shape
    window = math.prod(buffers["in1"].shape[d] for d in rhs_spec[2:])
    return math.prod(out) // out[out_spec[1]] * window * buffers["in0"].dtype.itemsize


def _seed_loss(lib, lax_):
    """The seed's sum(tanh(conv(x, w) + b)**2) in `lib` (ember.numpy or jax.numpy) and its lax."""
    return lambda x, w, b: lib.sum(lib.tanh(lax_.conv_general_dilated(x, w, (1, 1), "SAME",
                                                                     dimension_numbers=LAYOUT) + b) ** 2)


def test_the_small_layers_gradient_works_in_less_memory_than_xla():
    """The seed's gradient on its small layer (batch 8, 32x32, 3 -> 16, NHWC): the arena a call works in
    (the plan's buffers and the kernels' scratch, im2col's windows chunked and banded to WINDOW_BYTES)
    is at most XLA's temp bytes for it (8 images' windows at once made it 5.2 MB), values as JAX's."""
    jax = pytest.importorskip("jax")
    args = inputs(next(layer for layer in FULL_SIZES if layer.label == "small layer"))
    lowered = ember.jit(ember.grad(_seed_loss(enp, lax), argnums=(0, 1, 2))).lower(*args)
    got = lowered.compile()(*args)
    report = lowered.memory()
    with jax.enable_x64(False):
        xla = jax.jit(jax.grad(_seed_loss(jax.numpy, jax.lax), argnums=(0, 1, 2))).lower(*args).compile()
        temp, want = xla.memory_analysis().temp_size_in_bytes, xla(*args)
    assert report.workspace_bytes < report.arena_bytes <= temp, (report.arena_bytes, temp)
    for g, j in zip(got, want):
        np.testing.assert_allclose(g, j, rtol=1e-4, atol=1e-4 * float(np.abs(j).max()))
