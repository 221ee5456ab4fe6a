"""ember.nn.conv / conv_bias_act / dense_bias_act (flax.linen's layout) against the same layer written
with ember's lax/jnp calls and with live JAX (jax.lax.conv_general_dilated + bias + act), their
gradients against jax.grad, the fused epilogue of a conv-bias-tanh layer's gradient, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.numpy as enp
from ember import lax
from ember.backends.kernel import Convolution, node_kernel
from ember.errors import ArgumentValueError, ShapeError
from ember.tracer import prims as P

jax = pytest.importorskip("jax")

THIS_FILE = __file__.rsplit("/", 1)[-1]
LAYOUTS = {1: ("NWC", "WIO", "NWC"), 2: ("NHWC", "HWIO", "NHWC"), 3: ("NDHWC", "DHWIO", "NDHWC")}

# (x shape, kernel shape, bias?, act name, conv options): strides, paddings in each of Flax's forms,
# dilations, feature groups, 1-D/2-D/3-D, an input without a batch axis.
CONV_CASES = [
    ((2, 6, 5, 3), (3, 3, 3, 4), True, "tanh", {}),
    ((2, 7, 7, 2), (3, 2, 2, 3), False, "relu", {"strides": 2, "padding": "VALID", "kernel_dilation": 2}),
    ((1, 5, 6, 4), (2, 3, 2, 6), True, None, {"padding": ((1, 0), (2, 1)), "feature_group_count": 2}),
    ((2, 6, 3), (3, 3, 2), True, "sigmoid", {"padding": 1, "input_dilation": 2, "strides": (2,)}),
    ((5, 4, 2), (2, 2, 2, 3), True, "tanh", {"padding": (1, 0)}),
    ((1, 4, 5, 4, 2), (2, 3, 2, 2, 2), True, "relu", {"strides": (1, 2, 1), "padding": "SAME"}),
]
ACTS = {None: (None, None), "tanh": (enp.tanh, "tanh"), "relu": (nn.relu, "relu"),
        "sigmoid": (nn.sigmoid, "sigmoid")}


def _jax_act(name):
    return {None: lambda y: y, "tanh": jax.numpy.tanh, "relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid}[name]


def _lax_options(nd, opts):
    """The case's Flax options as lax.conv_general_dilated's positional (strides, padding, lhs and rhs
    dilation) and feature groups, written out by hand."""
    def per_axis(v):
        return (1,) * nd if v is None else (v,) * nd if isinstance(v, int) else tuple(v)

    pad = opts.get("padding", "SAME")
    if isinstance(pad, int):
        pad = ((pad, pad),) * nd
    elif not isinstance(pad, str):
        pad = tuple((p, p) if isinstance(p, int) else tuple(p) for p in pad)
    return (per_axis(opts.get("strides")), pad, per_axis(opts.get("input_dilation")),
            per_axis(opts.get("kernel_dilation"))), opts.get("feature_group_count", 1)


def _reference(lib, x, k, b, act, nd, opts):
    """The layer composed of `lib`'s lax/jnp calls (ember or jax), batch axis added when x has none."""
    (strides, pad, lhs_d, rhs_d), groups = _lax_options(nd, opts)
    batched = x.ndim == nd + 2
    y = lib.lax.conv_general_dilated(x if batched else x[None], k, strides, pad, lhs_d, rhs_d, LAYOUTS[nd],
                                     feature_group_count=groups)
    y = y if b is None else y + b
    y = y if batched else y[0]
    return y if act is None else act(y)


def _case_arrays(rng, xs, ks, with_bias, dtype=np.float32):
    x = rng.normal(size=xs).astype(dtype)
    k = (rng.normal(size=ks) / np.sqrt(np.prod(ks[:-1]))).astype(dtype)
    return x, k, (rng.normal(size=ks[-1]).astype(dtype) if with_bias else None)


def test_conv_bias_act_matches_lax_composition_and_jax():
    """Every case: conv_bias_act (dict params, or a (kernel,) tuple without bias) equals the same layer
    written with ember's lax calls and with jax's, and conv alone equals it without the activation."""
    rng = np.random.default_rng(0)
    for xs, ks, with_bias, act_name, opts in CONV_CASES:
        x, k, b = _case_arrays(rng, xs, ks, with_bias)
        act, _ = ACTS[act_name]
        nd = len(ks) - 2
        params = {"kernel": k, "bias": b} if with_bias else (k,)
        got = ember.jit(lambda x, p, act=act, opts=opts: nn.conv_bias_act(p, x, act=act, **opts))(x, params)
        mine = ember.jit(lambda x, k, b, act=act, nd=nd, opts=opts: _reference(ember, x, k, b, act, nd, opts))(x, k, b)
        with jax.enable_x64(False):
            jax_act = _jax_act(act_name)
            want = np.asarray(jax.jit(lambda x, k, b, act=jax_act, nd=nd, opts=opts:
                                      _reference(jax, x, k, b, act, nd, opts))(x, k, b))
        assert got.shape == want.shape, (xs, ks, opts)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str((xs, ks, opts)))
        np.testing.assert_allclose(got, mine, rtol=1e-6, atol=1e-6, err_msg=str((xs, ks, opts)))
        if act is None:
            np.testing.assert_allclose(nn.conv(params, x, **opts), got, rtol=1e-6, atol=1e-6)


def test_dense_bias_act_matches_jax():
    """x @ kernel + bias then act, x with leading batch axes; dict and tuple params; no bias."""
    rng = np.random.default_rng(1)
    x, k, b = rng.normal(size=(2, 3, 5)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32), \
        rng.normal(size=4).astype(np.float32)
    with jax.enable_x64(False):
        want = np.asarray(jax.nn.relu(jax.numpy.matmul(x, k) + b))
        want_plain = np.asarray(jax.numpy.matmul(x, k))
    np.testing.assert_allclose(nn.dense_bias_act({"kernel": k, "bias": b}, x, act=nn.relu), want, rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_allclose(nn.dense_bias_act((k, b), x, nn.relu), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(nn.dense_bias_act((k,), x), want_plain, rtol=1e-6, atol=1e-6)


def test_gradients_match_jax():
    """d/d(kernel, bias, x) of sum(layer**2) for a strided, grouped conv with tanh and a dense with
    sigmoid, against jax.grad of the same layers in float64."""
    rng = np.random.default_rng(2)
    opts = {"strides": (2, 1), "padding": ((1, 1), (0, 1)), "feature_group_count": 2}
    x, k, b = _case_arrays(rng, (2, 6, 5, 4), (3, 2, 2, 4), True, np.float64)
    got = ember.grad(lambda k, b, x: enp.sum(nn.conv_bias_act({"kernel": k, "bias": b}, x, enp.tanh, **opts) ** 2),
                     (0, 1, 2))(k, b, x)
    with jax.enable_x64(True):
        want = jax.jit(jax.grad(lambda k, b, x: jax.numpy.sum(_reference(jax, x, k, b, jax.numpy.tanh, 2, opts) ** 2),
                                (0, 1, 2)))(k, b, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-12)
    xd, kd, bd = rng.normal(size=(3, 5)), rng.normal(size=(5, 2)), rng.normal(size=2)
    got = ember.grad(lambda k, b, x: enp.sum(nn.dense_bias_act((k, b), x, nn.sigmoid) ** 2), (0, 1, 2))(kd, bd, xd)
    with jax.enable_x64(True):
        want = jax.grad(lambda k, b, x: jax.numpy.sum(jax.nn.sigmoid(x @ k + b) ** 2), (0, 1, 2))(kd, bd, xd)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-12)


def test_the_gradients_epilogue_is_fused_into_the_convolution():
    """grad of sum(tanh(conv + b)**2): one fused kernel whose Convolution step writes out0 and whose
    epilogue reads it with the bias, applies tanh and its derivative and stores over out0 (no temp);
    explain() names the epilogue; the values are the unoptimized oracle's."""
    rng = np.random.default_rng(3)
    x, k, b = _case_arrays(rng, (2, 6, 6, 3), (3, 3, 3, 4), True)

    def loss(k, b, x):
        return enp.sum(nn.conv_bias_act({"kernel": k, "bias": b}, x, act=enp.tanh) ** 2)

    grad = ember.grad(loss, (0, 1, 2))
    lowered = ember.jit(grad).lower(k, b, x)
    (fused,) = [n for n in lowered.optimized.nodes if n.prim is P.fusion_p]
    kernel, _ = node_kernel(fused)
    conv_step, epilogue = kernel.steps
    assert isinstance(conv_step, Convolution) and conv_step.out == "out0" and not kernel.temps
    assert [o.param("buffer") for o in epilogue.ops if o.prim == "load"] == ["out0", "in2"]
    assert [s.buffer for s in epilogue.stores] == ["out0"]
    assert sum(o.prim == "tanh" for o in epilogue.ops) >= 1
    text = " ".join(str(lowered.explain()).split())
    assert "epilogue:" in text and "conv_general_dilated, broadcast_in_dim, add," in text, text
    want = ember.jit(grad, backend="numpy", optimize=False)(k, b, x)
    for g, w in zip(ember.jit(grad)(k, b, x), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_bad_parameters_name_the_users_line():
    x, k = np.ones((2, 5, 5, 3), np.float32), np.ones((3, 3, 3, 4), np.float32)
    cases = [
        (lambda: nn.conv({"kernel": k, "bias": np.ones(3, np.float32)}, x), ShapeError, "one value per output"),
        (lambda: nn.conv({"weights": k}, x), ArgumentValueError, "need a 'kernel' entry"),
        (lambda: nn.conv(k, x), ArgumentValueError, "params must be"),
        (lambda: nn.conv((k,), x[0, 0]), ShapeError, "need 2 spatial axes"),
        (lambda: nn.conv((k,), x, strides=(1, 1, 1)), ShapeError, "strides"),
        (lambda: nn.conv((k,), x, padding=((1, 1),)), ShapeError, "padding"),
        (lambda: nn.dense_bias_act((k[0, 0].T, None), x), ShapeError, "in features"),
    ]
    for fn, cls, text in cases:
        with pytest.raises(cls, match=text) as e:
            fn()
        assert THIS_FILE in str(e.value), str(e.value)


def test_lax_composition_uses_the_layers_layout():
    """The layer's dimension numbers are Flax's: the NHWC/HWIO strings give the same convolution."""
    rng = np.random.default_rng(4)
    x, k, _ = _case_arrays(rng, (1, 4, 4, 2), (2, 2, 2, 3), False)
    np.testing.assert_allclose(nn.conv((k,), x, padding="VALID"),
                               lax.conv_general_dilated(x, k, (1, 1), "VALID", dimension_numbers=LAYOUTS[2]),
                               rtol=1e-6, atol=1e-6)
