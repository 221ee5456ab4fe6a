"""The cases tests/scipy/test_special.py and test_stats.py check, and JAX's answers for them, which
tests/scipy/record_jax.py records from jax.scipy 0.10.2 in tests/scipy/jax_values.json (compiling JAX's
incomplete gamma and beta loops for every case takes longer than the suite's budget for these files)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

VALUES = Path(__file__).with_name("jax_values.json")
FLOATS = ("float32", "float64")

X = [-np.inf, -40.0, -12.0, -7.5, -2.0, -0.5, -0.0, 0.0, 1e-8, 0.3, 0.9, 1.0, 3.0, 6.0, 9.5, 30.0, np.inf, np.nan]
P = [-0.1, 0.0, 1e-30, 1e-10, 0.01, 0.135, 0.5, 0.8, 0.9, 0.99, 1 - 1e-10, 1.0, 1.1, np.nan]
POS = [abs(v) for v in X]
UNIT = [min(abs(v), 1.0) * 0.77 for v in X[::-1]]

# special function -> its arguments (a grid each, compared elementwise)
SPECIAL = {
    "ndtr": (X,), "log_ndtr": (X + [-25.0, -15.0, 7.0, 10.0],), "ndtri": (P,), "logit": (P,), "expit": (X,),
    "entr": (X,), "xlogy": (X, POS[::-1]), "xlog1py": (X, X[::-1]), "rel_entr": (X, X[::-1]), "kl_div": (X, X[::-1]),
    "gamma": (X + [-2.5, 4.5],), "gammasgn": (X + [-2.5, -3.5, -3.0],), "factorial": (X,),
    "betaln": (POS, POS[::-1]),
    "beta": ([0.5, 1.0, 2.5, 7.5, 20.0, 0.1, 3.0, 12.0, -2.5, -0.5],
             [0.5, 3.0, 2.5, 9.0, 0.3, 30.0, 1.5, 12.0, 1.5, 3.0]),
    "i0": (X[1:-3] + [-30.0],), "i0e": (X,), "i1": (X[1:-3] + [-30.0],), "i1e": (X,),
    "gammainc": (POS + [0.0, 100.0, 5.0], POS[::-1] + [0.5, 99.0, 0.0]),
    "gammaincc": (POS + [0.0, 100.0, 5.0], POS[::-1] + [0.5, 99.0, 0.0]),
    "betainc": (POS + [0.0, 1.0], POS[::-1] + [2.0, 0.0], UNIT + [0.5, 1.0]),
}

# logsumexp's arguments: id -> keyword arguments over A (B and WHERE by name)
A = [[1.0, 2.0, -np.inf, 0.5], [3.0, -np.inf, -np.inf, 700.0], [-np.inf] * 4]
B = [[1.0, -2.0, 1.0, 0.0], [0.5, 1.0, 2.0, 1.0], [1.0] * 4]
WHERE = [[True, True, False, True], [False, True, True, True], [True] * 4]
LOGSUMEXP = {"all": {}, "axis 1": {"axis": 1}, "axis 0 keepdims": {"axis": 0, "keepdims": True},
             "b": {"axis": 1, "b": "B"}, "b return_sign": {"axis": 1, "b": "B", "return_sign": True},
             "where": {"axis": 1, "where": "WHERE"}, "b keepdims last": {"axis": -1, "b": "B", "keepdims": True}}


def logsumexp_kwargs(kw: dict, dtype) -> dict:
    """A LOGSUMEXP case's keyword arguments with B and WHERE as arrays."""
    named = {"B": np.array(B, dtype), "WHERE": np.array(WHERE)}
    return {k: named[v] if isinstance(v, str) else v for k, v in kw.items()}


# (function name, points, argument numbers): gradients at float64. betainc_x is betainc(2, b, x) in x.
GRADS = [
    ("xlogy", [(0.0, 0.0), (0.0, 2.0), (2.0, 3.0), (1.0, 0.0)], (0, 1)),
    ("xlog1py", [(0.0, -1.0), (0.0, 2.0), (2.0, 3.0)], (0, 1)),
    ("entr", [(0.0,), (0.5,), (3.0,)], (0,)),
    ("log_ndtr", [(-40.0,), (-20.5,), (-15.0,), (-5.0,), (0.0,), (3.0,), (8.5,), (12.0,)], (0,)),
    ("ndtri", [(1e-20,), (0.05,), (0.3,), (0.99,)], (0,)),
    ("i0e", [(0.0,), (1e-20,), (-3.0,), (9.0,)], (0,)),
    ("i1e", [(0.0,), (1e-20,), (0.5,), (-9.0,)], (0,)),
    ("logit", [(0.3,)], (0,)),
    ("betaln", [(20.0, 3.0), (0.5, 2.0)], (0, 1)),
    ("gamma", [(-2.5,), (4.5,)], (0,)),
    ("gammainc", [(2.0, 3.0), (0.5, 0.1), (10.0, 9.0), (3.0, 30.0)], (0, 1)),
    ("gammaincc", [(2.0, 3.0), (0.5, 0.1), (10.0, 9.0)], (0, 1)),
    ("betainc_x", [(0.3, 3.0), (0.9, 0.5)], (0,)),
]
SECOND_LOG_NDTR = [-30.0, 0.5, 10.0]

# integer arguments: what dtype each function gives (x64 off and on)
INT_UNARY = ("gamma", "i0e", "i1", "logit", "entr", "factorial", "gammasgn", "expit", "logsumexp")
INT_BINARY = ("xlogy", "betaln", "gammainc")


def int_arguments(x64: bool) -> dict:
    """id -> an integer or bool argument."""
    return {"int32": np.array([1, 2], np.int32), "int64" if x64 else "bool": np.array([1, 2], np.int64) if x64
            else np.array([True, False]), "python int": 3}


def function(module, name: str):
    """`name` of a jax.scipy.special-like module; betainc_x is betainc(2, b, x) as a function of (x, b)."""
    if name == "betainc_x":
        return lambda x, b: module.betainc(2.0, b, x)
    return getattr(module, name)


def encode(a) -> dict:
    """An array as JSON: dtype, shape and the values (float32 ones exactly, through float64)."""
    a = np.asarray(a)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": a.astype(np.float64).ravel().tolist()}


def decode(d: dict) -> np.ndarray:
    return np.asarray(d["data"], np.float64).astype(d["dtype"]).reshape(d["shape"])


@cache
def recorded() -> dict:
    """JAX's answers, as tests/scipy/record_jax.py wrote them."""
    return json.loads(VALUES.read_text())
