"""The cases tests/scipy/test_special.py and test_stats.py check, and JAX's answers for them, which
tests/scipy/record_jax.py records from jax.scipy 0.10.2 in tests/scipy/jax_values.json (compiling JAX's
incomplete gamma and beta loops for every case takes longer than the suite's budget for these files)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

import ember
from tests.helpers import array_from_json as decode  # noqa: F401 (C.decode in the tests and recorder)
from tests.helpers import array_to_json as encode  # noqa: F401

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
    "loggamma": (X,), "multigammaln": ([1.2, 2.0, 3.5, 10.0, 50.0, np.inf, np.nan], 3),
    "comb": ([5.0, 5.0, 10.0, 0.0, -1.0, 3.5, 40.0, np.nan], [2.0, 7.0, 0.0, 0.0, 1.0, 1.5, 20.0, 1.0]),
    "boxcox": (POS, X[::-1]), "boxcox1p": (X, X[::-1]),
    "poch": (X[1:] + [-2.5], [2.0, 0.5, 3.0, 0.0, 1.5, -1.0, 2.0, 0.0, 4.0, 1.0, 0.5, 2.0, 3.0, -0.5, 1.0, 2.0,
                              1.0, 1.5]),
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
    ("poch", [(2.5, 1.5), (0.7, 3.0)], (0, 1)),
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


def batched_grads(fn, points: list, argnums: tuple) -> list:
    """[[d fn / d arg i at each point] for i in argnums]: ember.vmap(ember.grad(fn)) over the points, on
    the oracle backend without the optimizer (the rules are the subject, and one trace serves all points)."""
    columns = [np.array(c, np.float64) for c in zip(*points)]
    grads = []
    for i in argnums:
        run = ember.jit(ember.vmap(ember.grad(fn, argnums=i)), backend="numpy", optimize=False)
        grads.append(np.asarray(run(*columns)))
    return grads


@cache
def recorded() -> dict:
    """JAX's answers, as tests/scipy/record_jax.py wrote them."""
    return json.loads(VALUES.read_text())


# --- stats --------------------------------------------------------------------------------------
XS = [-np.inf, -30.0, -5.0, -1.0, -0.0, 0.0, 0.2, 0.5, 1.0, 2.5, 7.0, 40.0, np.inf, np.nan]
K = [-1.0, 0.0, 1.0, 2.0, 3.5, 5.0, 10.0, np.nan]
U = [-0.5, 0.0, 0.01, 0.2, 0.5, 0.8, 0.99, 1.0, 1.5, np.nan]
_CONTINUOUS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")

# (distribution, method, arguments): a list is a grid (an array of the case's dtype), a float a Python scalar
STATS = [
    ("norm", "logpdf", (XS, 0.5, 2.0)), ("norm", "pdf", (XS,)), ("norm", "cdf", (XS, 1.0, 3.0)),
    ("norm", "logcdf", (XS + [-40.0, -12.0, 9.0],)), ("norm", "sf", (XS,)), ("norm", "logsf", (XS, -1.0, 0.5)),
    ("norm", "ppf", (P, 1.0, 2.0)), ("norm", "isf", (P,)),
    ("t", "logpdf", (XS, 3.0)), ("t", "pdf", (XS, 0.7, 1.0, 2.0)),
    ("bernoulli", "logpmf", (K, 0.3)), ("bernoulli", "pmf", (K, 0.0)), ("bernoulli", "cdf", (K, 0.3)),
    ("bernoulli", "ppf", (P, 0.3)),
    ("poisson", "logpmf", (K, 2.5)), ("poisson", "pmf", (K, 0.5, 1.0)), ("poisson", "cdf", (K, 2.5)),
    ("poisson", "entropy", ([0.0, 0.5, 3.0, 9.9, 10.0, 50.0, 99.0, 100.0, 1000.0],)),
    ("gamma", "logpdf", (XS, 2.5)), ("gamma", "pdf", (XS, 0.5, 0.0, 2.0)), ("gamma", "cdf", (XS, 2.5)),
    ("gamma", "logcdf", (XS, 3.0)), ("gamma", "sf", (XS, 2.5, 1.0, 2.0)), ("gamma", "logsf", (XS, 2.5)),
    ("beta", "logpdf", (U, 2.0, 3.0)), ("beta", "pdf", (U, 0.5, 0.5)), ("beta", "cdf", (U, 2.0, 3.0)),
    ("beta", "logcdf", (U, 2.0, 3.0)), ("beta", "sf", (U, 2.0, 3.0)), ("beta", "logsf", (U, 0.5, 4.0, -0.5, 2.0)),
    *[("expon", m, (XS, 0.5, 2.0)) for m in _CONTINUOUS], ("expon", "ppf", (P, 0.5, 2.0)),
    ("laplace", "logpdf", (XS, 0.5, 2.0)), ("laplace", "pdf", (XS,)), ("laplace", "cdf", (XS, 0.5, 2.0)),
    *[("logistic", m, (XS, 0.5, 2.0)) for m in ("logpdf", "pdf", "cdf", "sf")],
    ("logistic", "ppf", (P, 0.5, 2.0)), ("logistic", "isf", (P,)),
    *[("cauchy", m, (XS, 0.5, 2.0)) for m in _CONTINUOUS], ("cauchy", "ppf", (P, 0.5, 2.0)), ("cauchy", "isf", (P,)),
    *[("uniform", m, (XS, -1.0, 3.0)) for m in ("logpdf", "pdf", "cdf")], ("uniform", "ppf", (P, -1.0, 3.0)),
    *[("chi2", m, (XS, 3.0)) for m in _CONTINUOUS], ("chi2", "cdf", (XS, 1.5, 0.5, 2.0)),
]
# dirichlet: x's columns are points (some off the simplex), alpha per category; x with one row fewer too
DIRICHLET_X = [[0.2, 0.5, 0.0, 0.3, 0.6], [0.3, 0.25, 0.5, 0.3, 0.6], [0.5, 0.25, 0.5, 0.4, -0.2]]
DIRICHLET_ALPHA = [1.5, 2.0, 0.7]

# (distribution, method, points, argument numbers): gradients at float64
STATS_GRADS = [
    ("norm", "logcdf", [(-40.0,), (-10.0,), (0.0,), (5.0,), (12.0,)], (0,)),
    ("norm", "logpdf", [(0.3, 0.5, 2.0)], (0, 1, 2)),
    ("t", "logpdf", [(0.3, 3.0, 0.5, 2.0)], (0, 1, 2, 3)),
    ("gamma", "cdf", [(2.0, 2.5), (0.3, 0.5)], (0, 1)),
    ("beta", "cdf", [(0.3, 2.0, 3.0)], (0,)),
    ("chi2", "sf", [(2.0, 3.0)], (0, 1)),
    ("poisson", "logpmf", [(3.0, 2.5)], (1,)),
    ("bernoulli", "logpmf", [(1.0, 0.3), (0.0, 0.3)], (1,)),
    ("cauchy", "logcdf", [(-3.0, 0.5, 2.0)], (0, 1, 2)),
]


def arguments(args: tuple, dtype) -> list:
    """A case's arguments: grids as arrays of `dtype`, scalars as they are."""
    return [np.array(a, dtype) if isinstance(a, list) else a for a in args]

# multivariate_normal: id -> (x, mean, cov); a covariance stack, a scalar covariance and a scalar mean too
MVN_COV = [[4.0, 1.2, -0.5], [1.2, 3.0, 0.4], [-0.5, 0.4, 2.5]]
MVN_X = [[0.3, -1.0, 2.0], [1.5, 0.2, -0.7], [-2.0, 0.0, 0.5], [0.5, -1.0, 2.0]]
MVN_MEAN = [0.5, -1.0, 2.0]
MVN = {
    "matrix": (MVN_X, MVN_MEAN, MVN_COV),
    "one point": (MVN_X[0], MVN_MEAN, MVN_COV),
    "stack": ([[row] for row in MVN_X], MVN_MEAN, [MVN_COV, [[2.0, 0.0, 0.3], [0.0, 1.0, 0.0], [0.3, 0.0, 5.0]]]),
    "scalar cov": (MVN_X, MVN_MEAN, 2.0),
    "scalar mean": ([0.3, -1.0, 2.0], 0.5, 2.0),
    "not symmetric": (MVN_X, MVN_MEAN, [[4.0, 1.6, -0.5], [0.8, 3.0, 0.4], [-0.5, 0.4, 2.5]]),
    "indefinite": (MVN_X, MVN_MEAN, [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
}


def mvn_arguments(cid: str, dtype) -> list:
    """An MVN case's (x, mean, cov): lists as arrays of `dtype`, scalars as they are."""
    return arguments(MVN[cid], dtype)
