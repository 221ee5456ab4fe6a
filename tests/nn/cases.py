"""The inputs and cases that tests/test_nn_functions.py checks against jax.nn, shared with
tests/nn/record_jax.py, which records JAX's answers for them in tests/nn/jax_values.json. Each case is
written against a module `m` (ember.nn or jax.nn) and its numpy `np_` (ember.numpy or jax.numpy)."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import numpy as np

from tests.helpers import array_from_json as decode  # noqa: F401 (C.decode in the tests and recorder)
from tests.helpers import array_to_json as encode  # noqa: F401

VALUES = Path(__file__).with_name("jax_values.json")

# name -> keyword variants; every kink of every function is in KINKS or EXTREMES.
ELEMENTWISE = {
    "identity": [{}], "tanh": [{}], "relu6": [{}], "hard_sigmoid": [{}], "hard_silu": [{}], "hard_swish": [{}],
    "hard_tanh": [{}], "softplus": [{}], "log_sigmoid": [{}], "silu": [{}], "swish": [{}], "mish": [{}],
    "soft_sign": [{}], "squareplus": [{}, {"b": 0.5}], "sparse_plus": [{}], "sparse_sigmoid": [{}],
    "leaky_relu": [{}, {"negative_slope": 0.3}], "elu": [{}, {"alpha": 0.5}], "celu": [{}, {"alpha": 2.0}],
    "selu": [{}], "log1mexp": [{}], "relu": [{}], "sigmoid": [{}], "gelu": [{}, {"approximate": False}],
}
KINKS = [-6.0, -3.0, -1.0, math.log(2.0), 1.0, 3.0, 6.0]
# Zero's neighbours are tiny normal numbers, not the subnormal next floats, which XLA's CPU flushes to 0.
EXTREMES = [-np.inf, -100.0, -40.0, -7.0, -2.0, -0.5, -1e-30, -0.0, 0.0, 1e-30, 0.5, 2.0, 7.0, 40.0, 100.0,
            np.inf, np.nan]
FLOATS = ("float32", "float64")


def grid(dtype) -> np.ndarray:
    """The kinks and one float step either side of each, zero and its neighbours, and values out to the
    infinities and nan."""
    p = np.asarray(KINKS, dtype)
    steps = [np.nextafter(p, np.asarray(s, dtype)) for s in (np.inf, -np.inf)]
    return np.concatenate([p, *steps, np.asarray(EXTREMES, dtype)])


def case_id(name: str, kw: dict) -> str:
    return name + "".join(f"-{k}={v}" for k, v in kw.items())


ELEMENTWISE_IDS = {case_id(name, kw): (name, kw) for name, variants in ELEMENTWISE.items() for kw in variants}

# The softmax family, the reductions with `where`, standardize and glu, on one (3, 4) input with a tie
# for the max, a mask with an empty row, and weights `b` of both signs.
_rng = np.random.default_rng(0)
X = _rng.standard_normal((3, 4))
X[0, 1] = X[0, 2]
MASK = np.array([[True, False, True, True], [False] * 4, [True, True, False, True]])
B = _rng.standard_normal((3, 4))

REDUCTIONS = {
    "softmax": lambda m, x: m.softmax(x),
    "softmax axis 0": lambda m, x: m.softmax(x, axis=0),
    "softmax all axes": lambda m, x: m.softmax(x, axis=None),
    "softmax where": lambda m, x: m.softmax(x, where=MASK),
    "log_softmax where": lambda m, x: m.log_softmax(x, axis=-1, where=MASK),
    "log_softmax axes": lambda m, x: m.log_softmax(x, axis=(0, 1)),
    "logsumexp where": lambda m, x: m.logsumexp(x, axis=1, where=MASK),
    "logsumexp b": lambda m, x: m.logsumexp(x, axis=1, b=B.astype(x.dtype)),
    "logsumexp b sign": lambda m, x: m.logsumexp(x, axis=1, b=B.astype(x.dtype), return_sign=True),
    "logsumexp b where keepdims": lambda m, x: m.logsumexp(x, axis=0, b=B.astype(x.dtype), keepdims=True,
                                                          where=MASK),
    "logmeanexp": lambda m, x: m.logmeanexp(x),
    "logmeanexp where": lambda m, x: m.logmeanexp(x, axis=1, where=MASK, keepdims=True),
    "standardize": lambda m, x: m.standardize(x),
    "standardize stable": lambda m, x: m.standardize(x, axis=0, algorithm="stable"),
    "standardize where": lambda m, x: m.standardize(x, axis=-1, where=MASK),
    "standardize axes epsilon": lambda m, x: m.standardize(x, axis=(0, 1), epsilon=0.1),
    "standardize given statistics": lambda m, x: m.standardize(x, mean=0.5, variance=2.0),
    "glu": lambda m, x: m.glu(x),
    "glu axis 0": lambda m, x: m.glu(x[:2], axis=0),
}
# An infinite input: +inf makes the softmax family nan, -inf drops out, all -inf gives nan or -inf.
INFINITE = np.array([[1.0, np.inf, 0.0], [1.0, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf]])
INFINITE_CASES = ("softmax", "log_softmax", "logsumexp")


def first(out):
    """The output a loss reads: the result itself, or the first of a (value, sign) pair."""
    return out[0] if isinstance(out, tuple) else out


def weighted_loss(fn, m, np_, shape):
    """A scalar loss of first(fn(m, x)) of `shape`: its finite entries weighted by sin(1), sin(2), ...
    (float64 constants, so that the gradient of every entry is different)."""
    weights = np.sin(np.arange(1.0, math.prod(shape) + 1.0)).reshape(shape)

    def loss(x):
        out = first(fn(m, x))
        return np_.sum(weights * np_.where(np_.isfinite(out), out, 0.0))
    return loss


ONE_HOT = {
    "1d": ((np.array([0, 2, -1, 3, 1], np.int32), 3), {}),  # negative and too large: zeros
    "axis0": ((np.array([[0, 2], [5, 1]], np.int32), 4), {"axis": 0}),
    "axis-2-int32": ((np.array([[0, 2], [5, 1]], np.int32), 4), {"axis": -2, "dtype": "int32"}),
    "uint8-bool": ((np.array([0, 1, 7], np.uint8), 3), {"dtype": "bool"}),
    "scalar": ((np.array(2, np.int32), 3), {}),
    "float-indices": ((np.array([0.0, 1.5, 2.0]), 3), {"dtype": "float64"}),  # compared exactly, as in JAX
}

# Result dtypes of integer and bool inputs: these functions, these input dtypes.
PROMOTION_NAMES = [*ELEMENTWISE, "softmax", "log_softmax", "logsumexp", "logmeanexp", "standardize"]
PROMOTION_DTYPES = ("int32", "uint8", "bool", "int64")
PROMOTION_INPUT = [0, 1, 1, 0]
# In 64-bit mode (jax_enable_x64): int32 and bool inputs, and one_hot's default dtype.
PROMOTION_X64_DTYPES = ("int32", "bool")


@cache
def recorded() -> dict:
    """JAX's answers, as tests/nn/record_jax.py wrote them."""
    return json.loads(VALUES.read_text())


# --- initializers ---------------------------------------------------------------------------------
# id -> (builder, its keyword arguments, shape, dtype or None (the default), seed, "raw" or "typed" key):
# init = nn.initializers.<builder>(**kwargs); init(key(seed), shape[, dtype]).
INITIALIZERS = {
    "zeros": ("zeros", None, (2, 3), None, 0, "raw"),
    "ones-f64": ("ones", None, (3,), "float64", 0, "raw"),
    "constant": ("constant", {"value": -7.0}, (2, 3), None, 0, "raw"),
    "constant-int32": ("constant", {"value": 3, "dtype": "int32"}, (2,), None, 0, "raw"),
    "uniform": ("uniform", {"scale": 10.0}, (2, 3), None, 42, "raw"),
    "normal": ("normal", {"stddev": 10.0}, (2, 3), None, 42, "typed"),
    "normal-f64": ("normal", {}, (4,), "float64", 1, "raw"),
    "truncated_normal": ("truncated_normal", {"stddev": 10.0, "lower": -1.0, "upper": 3.0}, (2, 3), None, 42,
                         "raw"),
    "glorot_uniform": ("glorot_uniform", {}, (2, 3), None, 42, "raw"),
    "glorot_normal": ("glorot_normal", {}, (2, 3), None, 42, "raw"),
    "lecun_uniform": ("lecun_uniform", {}, (3, 4), None, 7, "typed"),
    "lecun_normal": ("lecun_normal", {}, (3, 4), None, 7, "raw"),
    "he_uniform-conv": ("he_uniform", {}, (3, 3, 2, 4), None, 5, "raw"),
    "he_normal-conv": ("he_normal", {}, (3, 3, 2, 4), None, 5, "raw"),
    "he_normal-f64": ("he_normal", {}, (4, 3), "float64", 9, "raw"),
    "scaling-fan_out-normal-axes": ("variance_scaling", {"scale": 0.5, "mode": "fan_out", "distribution": "normal",
                                                         "in_axis": 0, "out_axis": (1, 2)}, (3, 2, 2), None, 3, "raw"),
    "scaling-fan_geo_avg-uniform-batch": ("variance_scaling", {"scale": 2.0, "mode": "fan_geo_avg",
                                                               "distribution": "uniform", "batch_axis": 0},
                                          (2, 3, 5), None, 11, "raw"),
    "orthogonal-square": ("orthogonal", {}, (4, 4), None, 0, "raw"),
    "orthogonal-wide": ("orthogonal", {"scale": 2.0}, (3, 5), None, 1, "raw"),
    "orthogonal-tall": ("orthogonal", {}, (6, 3), None, 2, "typed"),
    "orthogonal-conv-column0": ("orthogonal", {"column_axis": 0}, (3, 2, 4), None, 3, "raw"),
    "orthogonal-f64": ("orthogonal", {}, (5, 5), "float64", 4, "raw"),
    "orthogonal-empty": ("orthogonal", {}, (0, 3), None, 0, "raw"),
    "delta_orthogonal-3d": ("delta_orthogonal", {}, (3, 2, 3), None, 5, "raw"),
    "delta_orthogonal-4d": ("delta_orthogonal", {"scale": 0.5}, (3, 2, 3, 3), None, 6, "raw"),
    "delta_orthogonal-5d": ("delta_orthogonal", {}, (3, 1, 2, 2, 2), None, 7, "raw"),
}


def make_initializer(module, cid: str):
    """The initializer of case `cid` built from `module` (ember.nn.initializers or JAX's), and its
    call's arguments after the key: (shape,) or (shape, dtype)."""
    builder, kwargs, shape, dtype, _, _ = INITIALIZERS[cid]
    fn = getattr(module, builder)
    init = fn if kwargs is None else fn(**kwargs)
    return init, (shape,) if dtype is None else (shape, np.dtype(dtype))


def make_key(random, cid: str):
    """Case `cid`'s key from `random` (ember.random or jax.random)."""
    *_, seed, kind = INITIALIZERS[cid]
    return random.PRNGKey(seed) if kind == "raw" else random.key(seed)

# Recorded in 64-bit mode too, where the default dtype is float64.
INITIALIZERS_X64 = ("zeros", "glorot_uniform", "he_normal-conv", "orthogonal-square")
