"""Special functions under `jax.scipy.special`'s names: `erf` and `expit` (the logistic sigmoid).

Each is one primitive, applied with ember.numpy's promotion (integers become the default float)."""

from __future__ import annotations

from ember.numpy.util import elementwise
from ember.tracer import prims as P


def erf(x):
    """The Gauss error function, elementwise (as scipy.special.erf)."""
    return elementwise(P.erf, "erf", x, to_float=True)


def expit(x):
    """1 / (1 + exp(-x)), elementwise and stable for large |x| (as scipy.special.expit)."""
    return elementwise(P.logistic, "expit", x, to_float=True)
