"""Special functions under `jax.scipy.special`'s names: erf, erfc, erfinv, gammaln, digamma, polygamma,
zeta (Hurwitz) and expit (the logistic sigmoid).

Each is one primitive, applied with ember.numpy's promotion (integers become the default float)."""

from __future__ import annotations

import numpy as np

from ember.errors import missing_attribute as _missing_attribute
from ember.numpy.util import elementwise
from ember.tracer import dtypes
from ember.tracer import prims as P


def erf(x):
    """The Gauss error function, elementwise (as scipy.special.erf)."""
    return elementwise(P.erf, "erf", x, to_float=True)


def erfc(x):
    """1 - erf(x), accurate where it is tiny (as scipy.special.erfc)."""
    return elementwise(P.erfc, "erfc", x, to_float=True)


def erfinv(x):
    """The inverse of erf on [-1, 1]: +-inf at +-1, nan outside (as scipy.special.erfinv)."""
    return elementwise(P.erf_inv, "erfinv", x, to_float=True)


def gammaln(x):
    """log|Gamma(x)|: +inf at 0, -1, -2, ... (as scipy.special.gammaln)."""
    return elementwise(P.lgamma, "gammaln", x, to_float=True)


def digamma(x):
    """The logarithmic derivative of Gamma, psi(x); nan at 0, -1, -2, ... (as jax.scipy.special.digamma)."""
    return elementwise(P.digamma, "digamma", x, to_float=True)



def polygamma(n, x):
    """The n-th derivative of digamma for an integer array n (as scipy.special.polygamma)."""
    dt = np.dtype(n.dtype) if hasattr(n, "dtype") else dtypes.scalar_dtype(n)[0]
    if dt.kind not in "iu":
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype {dt}.")
    return elementwise(P.polygamma, "polygamma", n, x, to_float=True)


def zeta(x, q=None):
    """The Hurwitz zeta function, sum over k >= 0 of (q + k)**-x (the Riemann zeta, q = None, is not
    implemented, as in JAX)."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to compute the "
                                  "Hurwitz Zeta function.")
    return elementwise(P.zeta, "zeta", x, q, to_float=True)


def expit(x):
    """1 / (1 + exp(-x)), elementwise and stable for large |x| (as scipy.special.expit)."""
    return elementwise(P.logistic, "expit", x, to_float=True)


__all__ = ["erf", "erfc", "erfinv", "gammaln", "digamma", "polygamma", "zeta", "expit"]


def __getattr__(name: str):
    """Say whether jax.scipy.special has a name Ember lacks, what to use instead, the closest names, and
    whether scipy.special's function serves outside traced code. SciPy is imported only here, for a
    name that is not a protocol probe (`from ... import` looks up __path__), so importing ember stays free
    of it."""
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import scipy.special

    raise _missing_attribute("ember.scipy.special", name, globals(), ("scipy.special", scipy.special))
