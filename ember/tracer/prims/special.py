"""Special-function primitives, as lax has them: erfc, erf_inv, lgamma, digamma, and the binary
polygamma(m, x) and zeta(s, q) (Hurwitz), with JAX's gradients and its values at poles and edges.

The numpy references are scipy.special's ufuncs, corrected where JAX's values differ from SciPy's
(JAX is the contract): erf_inv(-0) = -0, lgamma(-inf) = inf, digamma(0) = nan (but lgamma of a
subnormal x is -log|x|, where scipy and JAX, which flushes it to zero, give inf); zeta at a pole q in
{0, -1, ...} is inf for an even integer s and nan otherwise, as XLA gives, and nan for s < 1 or an
infinite s or q = inf.
"""

from __future__ import annotations

import math

import numpy as np

from ember.tracer import prims as P
from ember.tracer.prims.binary import _define as _define_binary
from ember.tracer.prims.unary import _SCIPY
from ember.tracer.prims.unary import _define as _define_unary

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0


def _scipy():
    import scipy.special  # here, not at import: importing it costs more than 0.1 s

    return scipy.special


def _erf_inv(x):
    """scipy's erfinv, keeping the sign of zero as JAX does."""
    out = _scipy().erfinv(x).astype(x.dtype, copy=False)
    return np.where(x == 0, x, out)


def _lgamma(x):
    """log|Gamma(x)|: +inf at the poles 0, -1, -2, ... and at both infinities (scipy gives -inf at -inf),
    -log|x| at subnormal x (scipy gives inf there, JAX too: it flushes them to zero)."""
    with np.errstate(divide="ignore"):
        out = _scipy().gammaln(x).astype(x.dtype, copy=False)
        tiny = (x != 0) & (np.abs(x) < np.finfo(x.dtype).tiny)
        out = np.where(tiny, -np.log(np.abs(x)), out)
    return np.where(x == -np.inf, np.asarray(np.inf, x.dtype), out)


def _digamma(x):
    """psi(x): nan at the poles 0, -1, -2, ... and at -inf, as JAX (scipy gives -inf at 0)."""
    out = _scipy().psi(x).astype(x.dtype, copy=False)
    return np.where(x == 0, np.asarray(np.nan, x.dtype), out)


def _zeta(s, q):
    """Hurwitz zeta(s, q) = sum over k >= 0 of (q + k)**-s, with XLA's values off the main domain."""
    with np.errstate(all="ignore"):
        out = _scipy().zeta(s, q)
        pole = (q <= 0) & (np.floor(q) == q)
        s_int = np.floor(s) == s
        s_even = s_int & (np.fmod(s, 2.0) == 0)
        out = np.where(pole, np.where(s_even, np.inf, np.nan), out)
        out = np.where((q < 0) & ~pole & ~s_int, np.nan, out)
        out = np.where(s == 1, np.inf, out)
        out = np.where((s < 1) | np.isinf(s) | (q == np.inf), np.nan, out)
    return np.asarray(out, np.result_type(s, q))


def _polygamma(m, x):
    """The m-th derivative of digamma: digamma for m = 0, (-1)**(m+1) m! zeta(m + 1, x) for an integer
    m >= 1, nan for any other m (as lax.polygamma)."""
    with np.errstate(all="ignore"):
        m_int = (np.floor(m) == m) & (m >= 0)
        order = np.where(m_int, m, 1.0)
        sign = np.where(np.fmod(order, 2.0) == 0, -1.0, 1.0)
        series = sign * _scipy().gamma(order + 1) * _zeta(order + 1, x)
        out = np.where(m == 0, _digamma(x), series)
        out = np.where(m_int, out, np.nan)
    return np.asarray(out, np.result_type(m, x))


def _polygamma_vjp(ct, m, x, out, active):
    if active[0]:
        raise ValueError("polygamma gradient with respect to m is not supported")
    return None, P.mul(ct, polygamma(P.add(m, 1.0), x))


def _zeta_vjp(ct, s, q, out, active):
    """d/dq zeta(s, q) = -s zeta(s + 1, q); lax.zeta has no derivative in s either."""
    if active[0]:
        raise NotImplementedError("Differentiation rule for 'zeta' with respect to s not implemented")
    return None, P.mul(ct, P.neg(P.mul(s, zeta(P.add(s, 1.0), q))))


_JAX_VALUES = "scipy.special's ufunc corrected to JAX's values at poles and edges"

erfc_p, erfc = _define_unary(
    "erfc", "float", lambda ct, x, out: P.mul(P.mul(ct, -_TWO_OVER_SQRT_PI), P.exp(P.neg(P.mul(x, x)))),
    expensive=True, ufunc="erfc", ufunc_dtypes=_SCIPY)
erf_inv_p, erf_inv = _define_unary(
    "erf_inv", "float", lambda ct, x, out: P.mul(P.mul(ct, _SQRT_PI_OVER_TWO), P.exp(P.mul(out, out))),
    expensive=True, impl=_erf_inv, no_ufunc=_JAX_VALUES)
lgamma_p, lgamma = _define_unary("lgamma", "float", lambda ct, x, out: P.mul(ct, digamma(x)), expensive=True,
                                 impl=_lgamma, no_ufunc=_JAX_VALUES)
digamma_p, digamma = _define_unary("digamma", "float", lambda ct, x, out: P.mul(ct, polygamma(1.0, x)),
                                   expensive=True, impl=_digamma, no_ufunc=_JAX_VALUES)
polygamma_p, polygamma = _define_binary("polygamma", "float", _polygamma_vjp, expensive=True, impl=_polygamma,
                                        no_ufunc=_JAX_VALUES)
zeta_p, zeta = _define_binary("zeta", "float", _zeta_vjp, expensive=True, impl=_zeta, no_ufunc=_JAX_VALUES)
