"""Special functions under `jax.scipy.special`'s names.

erf, erfc, erfinv, gammaln, digamma, polygamma, zeta and expit are one primitive each, applied with
ember.numpy's promotion (integers become the default float). The rest are compositions written as JAX
0.10.2 writes them (the Cephes series and rational approximations, the asymptotic tails of log_ndtr, the
series and continued fractions of the incomplete gamma and beta functions under `while_loop`), with
JAX's derivative rules (custom_jvp) where JAX gives one, so values, dtypes and gradients are JAX's."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

import ember.numpy as jnp
from ember.api import custom_jvp, stop_gradient
from ember.errors import ArgumentValueError, DTypeError, user_location
from ember.errors import missing_attribute as _missing_attribute
from ember.lax import while_loop
from ember.numpy.util import elementwise
from ember.tracer import dtypes
from ember.tracer import prims as P

Axis = int | Sequence[int] | None


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


# --- promotion ------------------------------------------------------------------------------------

def _dtype_weak(x) -> tuple[np.dtype, bool]:
    """(dtype, weak) of an operand as ember.numpy promotes it: Python scalars weak, arrays strong."""
    if isinstance(x, (bool, int, float)):
        return dtypes.scalar_dtype(x)
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval.dtype, aval.weak_type
    return np.dtype(jnp.asarray(x).dtype), False


def promote_inexact(*args) -> list:
    """The arguments as arrays of one float dtype: JAX's promote_args_inexact (integers and bools take
    the default float, 64-bit integers float64)."""
    target = dtypes.default_float_for(dtypes.result_type(*(_dtype_weak(x) for x in args))[0])
    return [jnp.asarray(x, target) for x in args]


def _float_only(x, name: str):
    """`x` as an array, which must be float32 or float64 (JAX's ndtr family raises TypeError otherwise)."""
    x = jnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise DTypeError(f"{name}: x.dtype={x.dtype} is not supported (float32 or float64 only)", user_location())
    return x


def _finfo(x) -> np.finfo:
    """The float limits of x's dtype (eps, tiny, max: the loops' tolerances and guards)."""
    return np.finfo(x.dtype)


def _quiet(fn):
    """`fn` with NumPy's floating-point warnings off: evaluated eagerly, the branches a `where` discards
    (log(0) in xlogy(0, 0), 32/0 in i0e(0)) would warn where JAX's results are exact and silent."""

    @functools.wraps(fn)
    def quiet(*args, **kwargs):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(*args, **kwargs)

    return quiet


# --- the logistic family --------------------------------------------------------------------------

@custom_jvp
def _logit(x):
    return jnp.log(jnp.divide(x, jnp.subtract(1, x)))


_logit.defjvps(lambda g, out, x: jnp.divide(g, jnp.multiply(x, jnp.subtract(1, x))))


@_quiet
def logit(x):
    """log(x / (1 - x)), the inverse of expit; its derivative 1 / (x (1 - x)) is JAX's rule."""
    (x,) = promote_inexact(x)
    return _logit(x)


# --- log-sum-exp and softmax (ember.nn's are these) -----------------------------------------------

def _masked(x, where, fill):
    """`x` with the elements outside `where` replaced by `fill` (no mask: `x` itself)."""
    return x if where is None else jnp.where(where, x, fill)


def _max(x, axis: Axis, where, keepdims: bool = True):
    """The max of `x` along `axis` over `where` (-inf over no elements), with no gradient through it."""
    return stop_gradient(jnp.max(_masked(x, where, -np.inf), axis=axis, keepdims=keepdims, initial=-np.inf))


@_quiet
def logsumexp(a, axis: Axis = None, b=None, keepdims: bool = False, return_sign: bool = False, where=None):
    """log(sum(b * exp(a))) along `axis` over `where`, without overflow: the max is subtracted first
    (replaced by 0 where it is infinite). With `b`, a negative sum gives nan, or with `return_sign` the
    pair (log|sum|, sign(sum)), as jax.scipy.special.logsumexp (which is jax.nn.logsumexp)."""
    if b is not None:
        a, b = jnp.broadcast_arrays(*promote_inexact(a, b))
        a = jnp.where(jnp.not_equal(b, 0), a, -np.inf)
    else:
        (a,) = promote_inexact(a)
    a = _masked(a, where, -np.inf)
    m = _max(a, axis, None)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    terms = jnp.exp(jnp.subtract(a, m))
    total = jnp.sum(terms if b is None else jnp.multiply(terms, b), axis=axis, keepdims=keepdims)
    sign = jnp.sign(total)
    out = jnp.add(jnp.log(jnp.abs(total)), m if keepdims else jnp.reshape(m, jnp.shape(total)))
    if return_sign:
        return out, sign
    return out if b is None else jnp.where(jnp.less(sign, 0), np.nan, out)


@_quiet
def softmax(x, /, *, axis: Axis = None, where=None):
    """exp(x) / sum(exp(x)) along `axis` (all axes for None, as jax.scipy.special.softmax), shifted by
    the max (no gradient through it); elements outside `where` (ember.nn.softmax's mask, which calls
    this) take no part and give 0. Any +inf makes the result nan, as in JAX."""
    (x,) = promote_inexact(x)
    e = jnp.exp(jnp.subtract(_masked(x, where, -np.inf), _max(x, axis, where)))
    out = jnp.divide(e, jnp.sum(_masked(e, where, 0.0), axis=axis, keepdims=True))
    return _masked(out, where, 0.0)


@_quiet
def log_softmax(x, /, *, axis: Axis = None, where=None):
    """x - logsumexp(x) along `axis` (all axes for None), computed stably; elements outside `where`
    (ember.nn.log_softmax's mask) give -inf."""
    (x,) = promote_inexact(x)
    shifted = jnp.subtract(_masked(x, where, -np.inf), _max(x, axis, where))
    total = jnp.sum(_masked(jnp.exp(shifted), where, 0.0), axis=axis, keepdims=True)
    return _masked(jnp.subtract(shifted, jnp.log(total)), where, -np.inf)


# --- x log y and the entropies --------------------------------------------------------------------

@custom_jvp
def _xlogy(x, y):
    return jnp.where(jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y)), jnp.multiply(x, jnp.log(y)), 0)


@_xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _xlogy(x, y), jnp.add(jnp.multiply(tx, jnp.log(y)), jnp.divide(jnp.multiply(ty, x), y))


@_quiet
def xlogy(x, y):
    """x * log(y), 0 where x = 0 (y = 0 included) unless y is nan; JAX's derivative rule, whose x-part
    is log(y) (-inf at y = 0), so that the gradient is defined where the plain product is not."""
    return _xlogy(*promote_inexact(x, y))


@custom_jvp
def _xlog1py(x, y):
    return jnp.where(jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y)), jnp.multiply(x, jnp.log1p(y)), 0)


@_xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _xlog1py(x, y), jnp.add(jnp.multiply(tx, jnp.log1p(y)), jnp.divide(jnp.multiply(ty, x), jnp.add(1, y)))


@_quiet
def xlog1py(x, y):
    """x * log1p(y), 0 where x = 0 (y = -1 included) unless y is nan, with JAX's derivative rule."""
    return _xlog1py(*promote_inexact(x, y))


@custom_jvp
def _xlogx(x):
    return _xlogy(x, x)


@_xlogx.defjvp
def _xlogx_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _xlogx(x), jnp.multiply(t, jnp.add(jnp.log(x), 1))


@_quiet
def entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf below (as scipy.special.entr); gradient -(log x + 1)."""
    (x,) = promote_inexact(x)
    return jnp.where(jnp.less(x, 0), -np.inf, jnp.negative(_xlogx(x)))


@_quiet
def rel_entr(p, q):
    """p log(p / q) for p, q > 0, 0 for p = 0 <= q, +inf otherwise (as scipy.special.rel_entr)."""
    p, q = promote_inexact(p, q)
    both = jnp.logical_and(jnp.greater(p, 0), jnp.greater(q, 0))
    safe_p, safe_q = jnp.where(both, p, 1), jnp.where(both, q, 1)
    value = jnp.subtract(_xlogx(safe_p), _xlogy(safe_p, safe_q))
    return jnp.where(both, value, jnp.where(jnp.logical_and(jnp.equal(p, 0), jnp.greater_equal(q, 0)), 0, np.inf))


@_quiet
def kl_div(p, q):
    """rel_entr(p, q) - p + q (as scipy.special.kl_div)."""
    p, q = promote_inexact(p, q)
    return jnp.add(jnp.subtract(rel_entr(p, q), p), q)


# --- the normal distribution ----------------------------------------------------------------------

def _polyval(coeffs: Sequence[float], x):
    """sum(c * x**(n-1-i)) by Horner's rule, the coefficients (highest power first) taking x's dtype."""
    out = jnp.zeros_like(x)
    for c in coeffs:
        out = jnp.add(jnp.multiply(out, x), c)
    return out


def _ndtr(x):
    """ndtr of a float array: erf near 0, erfc in the tails, where each keeps its relative accuracy."""
    half_sqrt_2 = 0.5 * math.sqrt(2.0)
    w = jnp.multiply(x, half_sqrt_2)
    z = jnp.abs(w)
    tail = jnp.where(jnp.greater(w, 0), jnp.subtract(2.0, erfc(z)), erfc(z))
    return jnp.multiply(0.5, jnp.where(jnp.less(z, half_sqrt_2), jnp.add(1.0, erf(w)), tail))


def ndtr(x):
    """The standard normal CDF, 0.5 erfc(-x / sqrt 2) (as scipy.special.ndtr; float32/float64 only)."""
    return _ndtr(_float_only(x, "ndtr"))


# Cephes' ndtri: a rational approximation in (p - 1/2)**2 for p > exp(-2), and in 1/sqrt(-2 log p) below,
# with one set of coefficients for p down to exp(-32) and another beyond.
_NDTRI_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0)
_NDTRI_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_NDTRI_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9)


@_quiet
def ndtri(p):
    """The inverse of ndtr: -inf at 0, +inf at 1, nan outside [0, 1] (Cephes' rational approximations,
    as JAX evaluates them; float32/float64 only)."""
    p = _float_only(p, "ndtri")
    complement = jnp.where(jnp.greater(p, -math.expm1(-2.0)), jnp.subtract(1.0, p), p)
    safe = jnp.where(jnp.equal(complement, 0), 0.5, complement)  # p = 0 or 1: an unused value, no nan
    w = jnp.subtract(safe, 0.5)
    ww = jnp.square(w)
    big = jnp.add(w, jnp.multiply(jnp.multiply(w, ww), jnp.divide(_polyval(_NDTRI_P0, ww), _polyval(_NDTRI_Q0, ww))))
    big = jnp.multiply(big, -math.sqrt(2.0 * math.pi))
    z = jnp.sqrt(jnp.multiply(-2.0, jnp.log(safe)))
    inv_z = jnp.divide(1.0, z)
    first = jnp.subtract(z, jnp.divide(jnp.log(z), z))
    far = jnp.subtract(first, jnp.divide(jnp.divide(_polyval(_NDTRI_P2, inv_z), _polyval(_NDTRI_Q2, inv_z)), z))
    near = jnp.subtract(first, jnp.divide(jnp.divide(_polyval(_NDTRI_P1, inv_z), _polyval(_NDTRI_Q1, inv_z)), z))
    x = jnp.where(jnp.greater(safe, math.exp(-2.0)), big, jnp.where(jnp.greater_equal(z, 8.0), far, near))
    x = jnp.where(jnp.greater(p, 1.0 - math.exp(-2.0)), x, jnp.negative(x))
    return jnp.where(jnp.equal(p, 0), -np.inf, jnp.where(jnp.equal(p, 1), np.inf, x))


# Where log_ndtr leaves log(ndtr(x)): below LOWER the asymptotic series of the lower tail, above UPPER
# -ndtr(-x) (log(1 - e) = -e), JAX's bounds per width.
_LOG_NDTR_BOUNDS = {np.dtype(np.float32): (-10.0, 5.0), np.dtype(np.float64): (-20.0, 8.0)}


def _norm_logpdf(x):
    """log of the standard normal density."""
    return jnp.subtract(jnp.multiply(-0.5, jnp.square(x)), 0.5 * math.log(2.0 * math.pi))


def _log_ndtr_series(x, series_order: int):
    """1 + sum_n (-1)**n (2n-1)!! / x**(2n): the asymptotic series of ndtr(x) * (-x) sqrt(2 pi) e^(x^2/2)."""
    if series_order <= 0:
        return jnp.ones_like(x)
    x_2 = jnp.square(x)
    even, odd, x_2n = jnp.zeros_like(x), jnp.zeros_like(x), x_2
    for n in range(1, series_order + 1):
        term = jnp.divide(float(math.prod(range(2 * n - 1, 0, -2))), x_2n)
        if n % 2:
            odd = jnp.add(odd, term)
        else:
            even = jnp.add(even, term)
        x_2n = jnp.multiply(x_2n, x_2)
    return jnp.subtract(jnp.add(1.0, even), odd)


def _log_ndtr_lower(x, series_order: int):
    """log(ndtr(x)) for x << -1 from the asymptotic series."""
    log_scale = jnp.subtract(jnp.subtract(jnp.multiply(-0.5, jnp.square(x)), jnp.log(jnp.negative(x))),
                             0.5 * math.log(2.0 * math.pi))
    return jnp.add(log_scale, jnp.log(_log_ndtr_series(x, series_order)))


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _log_ndtr(x, series_order):
    lower, upper = _LOG_NDTR_BOUNDS[np.dtype(x.dtype)]
    above = jnp.greater(x, upper)
    # max/min keep the branches not taken finite, so their zero cotangents stay zero (not 0 * inf)
    res = _ndtr(jnp.where(above, jnp.negative(x), jnp.maximum(x, lower)))
    tail = _log_ndtr_lower(jnp.minimum(x, lower), series_order)
    return jnp.where(above, jnp.negative(res), jnp.where(jnp.greater(x, lower), jnp.log(res), tail))


@_log_ndtr.defjvp
def _log_ndtr_jvp(series_order, primals, tangents):
    (x,), (t,) = primals, tangents
    out = _log_ndtr(x, series_order)
    return out, jnp.multiply(t, jnp.exp(jnp.subtract(_norm_logpdf(x), out)))


@_quiet
def log_ndtr(x, series_order: int = 3):
    """log(ndtr(x)), accurate in both tails (JAX's three segments, the lower one an asymptotic series
    of `series_order` terms); its derivative is exp(logpdf(x) - log_ndtr(x)), JAX's rule."""
    if not isinstance(series_order, int) or isinstance(series_order, bool):
        raise DTypeError("log_ndtr: series_order must be a Python integer.", user_location())
    if not 0 <= series_order <= 30:
        raise ArgumentValueError(f"log_ndtr: series_order must be in [0, 30], got {series_order}.", user_location())
    return _log_ndtr(_float_only(x, "log_ndtr"), series_order)


# --- gamma and beta -------------------------------------------------------------------------------

@_quiet
def gammasgn(x):
    """The sign of Gamma(x): nan at the poles (0 excepted: +-1 by the sign of the zero) and at -inf."""
    (x,) = promote_inexact(x)
    floor_x = jnp.floor(x)
    negative = jnp.less(x, 0)
    at_pole = jnp.logical_or(jnp.logical_and(negative, jnp.equal(x, floor_x)), jnp.isnan(x))
    odd = jnp.logical_and(negative, jnp.not_equal(jnp.remainder(floor_x, 2), 0))
    minus_zero = jnp.logical_and(jnp.equal(x, 0), jnp.less(jnp.copysign(1.0, x), 0))
    one = jnp.ones_like(x)
    return jnp.where(at_pole, np.nan, jnp.where(jnp.logical_or(odd, minus_zero), jnp.negative(one), one))


@_quiet
def gamma(x):
    """Gamma(x) = gammasgn(x) * exp(gammaln(x)) (as jax.scipy.special.gamma for real x)."""
    (x,) = promote_inexact(x)
    return jnp.multiply(gammasgn(x), jnp.exp(gammaln(x)))


@_quiet
def factorial(n, exact: bool = False):
    """n! = Gamma(n + 1) as a float, 0 for negative n (exact=True is not supported, as in JAX)."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    (n,) = promote_inexact(n)
    return jnp.where(jnp.less(n, 0), 0, jnp.exp(gammaln(jnp.add(n, 1))))


def _algdiv(a, b):
    """log(Gamma(b) / Gamma(a + b)) for b >= 8 and a <= b, by cdflib's series (as JAX's betaln)."""
    c0, c1, c2 = 0.833333333333333e-01, -0.277777777760991e-02, 0.793650666825390e-03
    c3, c4, c5 = -0.595202931351870e-03, 0.837308034031215e-03, -0.165322962780713e-02
    h = jnp.divide(a, b)
    c = x = jnp.divide(h, jnp.add(1, h))
    d = jnp.add(b, jnp.subtract(a, 0.5))
    x2 = jnp.multiply(x, x)
    s3 = jnp.add(1.0, jnp.add(x, x2))
    s5 = jnp.add(1.0, jnp.add(x, jnp.multiply(x2, s3)))
    s7 = jnp.add(1.0, jnp.add(x, jnp.multiply(x2, s5)))
    s9 = jnp.add(1.0, jnp.add(x, jnp.multiply(x2, s7)))
    s11 = jnp.add(1.0, jnp.add(x, jnp.multiply(x2, s9)))
    t = jnp.square(jnp.divide(1.0, b))
    w = jnp.multiply(c5, s11)
    for ck, sk in ((c4, s9), (c3, s7), (c2, s5), (c1, s3)):
        w = jnp.add(jnp.multiply(w, t), jnp.multiply(ck, sk))
    w = jnp.multiply(jnp.add(jnp.multiply(w, t), c0), jnp.divide(c, b))
    u = jnp.multiply(d, jnp.log1p(jnp.divide(a, b)))
    v = jnp.multiply(a, jnp.subtract(jnp.log(b), 1.0))
    return jnp.where(jnp.less_equal(u, v), jnp.subtract(jnp.subtract(w, v), u), jnp.subtract(jnp.subtract(w, u), v))


@_quiet
def betaln(a, b):
    """log|B(a, b)|: gammaln(a) + gammaln(b) - gammaln(a + b) for max(a, b) < 8, cdflib's algdiv beyond
    (accurate where the three gammaln terms would cancel), as JAX computes it."""
    a, b = promote_inexact(a, b)
    a, b = jnp.minimum(a, b), jnp.maximum(a, b)
    small_b = jnp.add(gammaln(a), jnp.subtract(gammaln(b), gammaln(jnp.add(a, b))))
    large_b = jnp.add(gammaln(a), _algdiv(a, b))
    return jnp.where(jnp.less(b, 8), small_b, large_b)


@_quiet
def beta(a, b):
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), signed, as exp(betaln)."""
    a, b = promote_inexact(a, b)
    sign = jnp.multiply(jnp.multiply(gammasgn(a), gammasgn(b)), gammasgn(jnp.add(a, b)))
    return jnp.multiply(sign, jnp.exp(betaln(a, b)))


# --- modified Bessel functions of orders 0 and 1 --------------------------------------------------

# Cephes' Chebyshev coefficients of exp(-x) I0(x) on [0, 8] (A) and exp(-x) sqrt(x) I0(x) on (8, inf) (B),
# and of exp(-x) I1(x) / x and exp(-x) sqrt(x) I1(x) likewise; float32 takes the last terms, as XLA does.
_I0E_A = (-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
          1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
          -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
          9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
          -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
          1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
          -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
          1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
          -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
          1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0E_B = (-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
          3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
          1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
          -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
          7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
          -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
          3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
          2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
          8.04490411014108831608E-1)
_I1E_A = (2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
          -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
          3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
          -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
          9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
          -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
          4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
          -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
          2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
          -1.76416518357834055153E-1, 2.52587186443633654823E-1)
_I1E_B = (7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
          -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
          -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
          4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
          -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
          3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
          -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
          -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
          7.78576235018280120474E-1)
# how many of the trailing terms float32 evaluates: (A, B) for i0e and i1e
_SINGLE_TERMS = {"i0e": (18, 7), "i1e": (17, 7)}


def _chbevl(x, coeffs: Sequence[float]):
    """Clenshaw's recurrence for the Chebyshev series sum(c_k T_k(x/2)) as Cephes' chbevl writes it."""
    b0, b1, b2 = jnp.zeros_like(x), jnp.zeros_like(x), jnp.zeros_like(x)
    for c in coeffs:
        b2, b1 = b1, b0
        b0 = jnp.add(jnp.subtract(jnp.multiply(x, b1), b2), c)
    return jnp.multiply(0.5, jnp.subtract(b0, b2))


def _bessel_series(x, name: str, a: Sequence[float], b: Sequence[float]):
    """The two Chebyshev expansions of an exponentially scaled Bessel function of |x|, split at 8."""
    if x.dtype != np.float64:
        na, nb = _SINGLE_TERMS[name]
        a, b = a[-na:], b[-nb:]
    z = jnp.abs(x)
    small = _chbevl(jnp.subtract(jnp.multiply(0.5, z), 2.0), a)
    large = jnp.divide(_chbevl(jnp.subtract(jnp.divide(32.0, z), 2.0), b), jnp.sqrt(z))
    return z, small, large


@custom_jvp
def _i0e(x):
    z, small, large = _bessel_series(x, "i0e", _I0E_A, _I0E_B)
    return jnp.where(jnp.less_equal(z, 8.0), small, large)


_i0e.defjvps(lambda g, y, x: jnp.multiply(g, jnp.subtract(_i1e(x), jnp.multiply(jnp.sign(x), y))))


@custom_jvp
def _i1e(x):
    z, small, large = _bessel_series(x, "i1e", _I1E_A, _I1E_B)
    return jnp.copysign(jnp.where(jnp.less_equal(z, 8.0), jnp.multiply(small, z), large), x)  # -0 for -0


def _i1e_derivative(g, y, x):
    """i0e(x) - y (sign(x) + 1/x), with 1/2 at |x| <= eps (JAX's rule)."""
    not_tiny = jnp.greater(jnp.abs(x), _finfo(x).eps)
    safe = jnp.where(not_tiny, x, _finfo(x).eps)
    slope = jnp.subtract(_i0e(safe), jnp.multiply(y, jnp.add(jnp.sign(safe), jnp.divide(1.0, safe))))
    return jnp.multiply(g, jnp.where(not_tiny, slope, 0.5))


_i1e.defjvps(_i1e_derivative)


@_quiet
def i0e(x):
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0 (Cephes' series)."""
    (x,) = promote_inexact(x)
    return _i0e(x)


@_quiet
def i1e(x):
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1 (Cephes' series)."""
    (x,) = promote_inexact(x)
    return _i1e(x)


@_quiet
def i0(x):
    """I0(x), the modified Bessel function of order 0: exp(|x|) i0e(x)."""
    (x,) = promote_inexact(x)
    return jnp.multiply(jnp.exp(jnp.abs(x)), _i0e(x))


@_quiet
def i1(x):
    """I1(x), the modified Bessel function of order 1: exp(|x|) i1e(x)."""
    (x,) = promote_inexact(x)
    return jnp.multiply(jnp.exp(jnp.abs(x)), _i1e(x))



# --- gamma-function relatives ---------------------------------------------------------------------

@_quiet
def loggamma(x):
    """The principal branch of log Gamma for real x: gammaln(x) for x > 0, nan elsewhere (as JAX)."""
    (x,) = promote_inexact(x)
    return jnp.where(jnp.greater(x, 0), gammaln(x), np.nan)


def multigammaln(a, d: int):
    """The log of the multivariate gamma function of dimension `d` (a static int):
    d (d - 1) / 4 log(pi) + sum_{j < d} gammaln(a - j/2)."""
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
        raise ArgumentValueError(f"multigammaln: d must be a concrete int, got {type(d).__name__}", user_location())
    a, d_ = promote_inexact(a, d)
    constant = jnp.multiply(jnp.multiply(jnp.multiply(0.25, d_), jnp.subtract(d_, 1)), math.log(math.pi))
    halves = jnp.divide(jnp.arange(int(d), dtype=d_.dtype), 2)
    terms = gammaln(jnp.subtract(jnp.expand_dims(a, -1), jnp.reshape(halves, (1,) * jnp.ndim(a) + (int(d),))))
    return jnp.add(jnp.sum(terms, axis=-1), constant)


@_quiet
def comb(N, k, *, repetition: bool = False):
    """N choose k as a float, exp(gammaln(N+1) - gammaln(k+1) - gammaln(N-k+1)), 0 outside 0 <= k <= N;
    with `repetition`, (N + k - 1) choose k (1 for k = 0)."""
    N, k = promote_inexact(N, k)
    if repetition:
        return jnp.where(jnp.logical_and(jnp.equal(k, 0), jnp.greater_equal(N, 0)), 1.0,
                         comb(jnp.subtract(jnp.add(N, k), 1), k))
    ok = _and(jnp.less_equal(k, N), jnp.greater_equal(N, 0), jnp.greater_equal(k, 0))
    safe_N, safe_k = jnp.where(ok, N, 0.0), jnp.where(ok, k, 0.0)
    log_comb = jnp.subtract(jnp.subtract(gammaln(jnp.add(safe_N, 1)), gammaln(jnp.add(safe_k, 1))),
                            gammaln(jnp.subtract(jnp.add(safe_N, 1), safe_k)))
    return jnp.where(ok, jnp.exp(log_comb), 0.0)


def _and(*masks):
    """The elementwise and of several masks."""
    return functools.reduce(jnp.logical_and, masks)


def _boxcox_of_log(log_x, lmbda):
    """expm1(lmbda log_x) / lmbda, and log_x itself at lmbda = 0."""
    zero = jnp.equal(lmbda, 0)
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, jnp.divide(jnp.expm1(jnp.multiply(safe, log_x)), safe))


@_quiet
def boxcox(x, lmbda):
    """The Box-Cox transform (x**lmbda - 1) / lmbda, log x at lmbda = 0."""
    x, lmbda = promote_inexact(x, lmbda)
    return _boxcox_of_log(jnp.log(x), lmbda)


@_quiet
def boxcox1p(x, lmbda):
    """The Box-Cox transform of 1 + x, accurate for small x."""
    x, lmbda = promote_inexact(x, lmbda)
    return _boxcox_of_log(jnp.log1p(x), lmbda)


@custom_jvp
def _poch(z, m):
    return jnp.where(jnp.equal(m, 0), jnp.ones_like(z), jnp.divide(gamma(jnp.add(z, m)), gamma(z)))


_poch.defjvps(lambda t, out, z, m: jnp.multiply(jnp.multiply(jnp.subtract(digamma(jnp.add(z, m)), digamma(z)),
                                                             _poch(z, m)), t),
              lambda t, out, z, m: jnp.multiply(jnp.multiply(digamma(jnp.add(z, m)), _poch(z, m)), t))


@_quiet
def poch(z, m):
    """The Pochhammer symbol Gamma(z + m) / Gamma(z) (1 at m = 0), with JAX's derivative rules."""
    return _poch(*promote_inexact(z, m))


# --- regularized incomplete gamma (Cephes' igam/igamc, as XLA writes them) ------------------------

def _any(mask):
    """Whether any element still iterates: a loop's condition."""
    return jnp.any(mask)


def _igamma_series(ax, x, a, enabled, derivative: bool):
    """sum_k x**k / ((a+1)...(a+k)) times ax / a, each element summed until its terms fall below eps
    (or, for the derivative in a, until the derivative's terms do)."""
    eps = _finfo(x).eps

    def body(vals):
        on, r, c, ans, dc_da, dans_da = vals
        r = jnp.add(r, 1)
        dc_da = jnp.subtract(jnp.multiply(dc_da, jnp.divide(x, r)), jnp.divide(jnp.multiply(c, x), jnp.multiply(r, r)))
        dans_da = jnp.add(dans_da, dc_da)
        c = jnp.multiply(c, jnp.divide(x, r))
        ans = jnp.add(ans, c)
        more = jnp.abs(jnp.divide(dc_da, dans_da)) if derivative else jnp.divide(c, ans)
        new = (r, c, ans, dc_da, dans_da)
        kept = tuple(jnp.where(on, n, o) for n, o in zip(new, vals[1:]))
        return (jnp.logical_and(on, jnp.greater(more, eps)),) + kept

    one, zero = jnp.ones_like(a), jnp.zeros_like(a)
    _, _, _, ans, _, dans_da = while_loop(lambda v: _any(v[0]), body, (enabled, a, one, one, zero, zero))
    if not derivative:
        return jnp.divide(jnp.multiply(ans, ax), a)
    dlogax_da = jnp.subtract(jnp.log(x), digamma(jnp.add(a, 1)))
    return jnp.divide(jnp.multiply(ax, jnp.add(jnp.multiply(ans, dlogax_da), dans_da)), a)


def _igammac_fraction(ax, x, a, enabled, derivative: bool):
    """Legendre's continued fraction of the upper incomplete gamma function times ax, each element
    iterated (at most 2000 times) until a step changes it by less than eps (or, for the derivative in a,
    until the derivative's step is that small); numerators and denominators are rescaled when large."""
    eps = _finfo(x).eps

    def body(vals):
        (on, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans) = vals
        c = jnp.add(c, 1)
        y = jnp.add(y, 1)
        z = jnp.add(z, 2)
        yc = jnp.multiply(y, c)
        pk = jnp.subtract(jnp.multiply(pkm1, z), jnp.multiply(pkm2, yc))
        qk = jnp.subtract(jnp.multiply(qkm1, z), jnp.multiply(qkm2, yc))
        nonzero = jnp.not_equal(qk, 0)
        r = jnp.divide(pk, qk)
        t = jnp.where(nonzero, jnp.abs(jnp.divide(jnp.subtract(ans, r), r)), 1.0)
        ans = jnp.where(nonzero, r, ans)
        dpk = jnp.add(jnp.subtract(jnp.subtract(jnp.multiply(dpkm1, z), pkm1), jnp.multiply(dpkm2, yc)),
                      jnp.multiply(pkm2, c))
        dqk = jnp.add(jnp.subtract(jnp.subtract(jnp.multiply(dqkm1, z), qkm1), jnp.multiply(dqkm2, yc)),
                      jnp.multiply(qkm2, c))
        dans_new = jnp.where(nonzero, jnp.divide(jnp.subtract(dpk, jnp.multiply(ans, dqk)), qk), dans)
        dstep = jnp.where(nonzero, jnp.abs(jnp.subtract(dans_new, dans)), 1.0)
        rescale = jnp.greater(jnp.abs(pk), 1.0 / eps)
        shrink = [jnp.where(rescale, jnp.multiply(v, eps), v) for v in (pk, qk, pkm1, qkm1, dpk, dqk, dpkm1, dqkm1)]
        pkm1, qkm1, pkm2, qkm2, dpkm1, dqkm1, dpkm2, dqkm2 = shrink
        more = jnp.logical_and(on, jnp.greater(dstep if derivative else t, eps))
        new = (ans, t, y, z)
        kept = tuple(jnp.where(on, n, o) for n, o in zip(new, vals[1:5]))
        rest = (pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans_new)
        return (more,) + kept + (c,) + tuple(jnp.where(on, n, o) for n, o in zip(rest, vals[6:]))

    y = jnp.subtract(1, a)
    z = jnp.add(jnp.add(x, y), 1)
    pkm1, qkm1 = jnp.add(x, 1), jnp.multiply(z, x)
    ans = jnp.divide(pkm1, qkm1)
    zero = jnp.zeros_like(x)
    dqkm1 = jnp.negative(x)
    dans = jnp.divide(jnp.negative(jnp.multiply(ans, dqkm1)), qkm1)
    init = (enabled, ans, jnp.ones_like(x), y, z, jnp.zeros((), x.dtype), pkm1, qkm1, jnp.ones_like(x), x,
            zero, zero, zero, dqkm1, dans)
    vals = while_loop(lambda v: jnp.logical_and(jnp.less(v[5], 2000), _any(v[0])), body, init)
    ans, dans = vals[1], vals[14]
    if not derivative:
        return jnp.multiply(ans, ax)
    dlogax_da = jnp.subtract(jnp.log(x), digamma(a))
    return jnp.multiply(ax, jnp.add(jnp.multiply(ans, dlogax_da), dans))


def _igamma_parts(a, x):
    """What the lower and upper functions share: nan inputs, domain errors, exp(a log x - x - lgamma a)
    and whether it underflows."""
    is_nan = jnp.logical_or(jnp.isnan(a), jnp.isnan(x))
    log_ax = jnp.subtract(jnp.subtract(jnp.multiply(a, jnp.log(x)), x), gammaln(a))
    underflow = jnp.less(log_ax, -math.log(float(_finfo(x).max)))
    return is_nan, jnp.exp(log_ax), underflow


def _igamma(a, x):
    """P(a, x), the regularized lower incomplete gamma function (XLA's igamma)."""
    is_nan, ax, underflow = _igamma_parts(a, x)
    x_inf, x_zero = jnp.equal(x, np.inf), jnp.equal(x, 0)
    domain = _or(jnp.less(x, 0), jnp.less(a, 0), jnp.logical_and(jnp.equal(a, 0), x_zero), is_nan)
    upper = jnp.logical_and(jnp.greater_equal(x, 1), jnp.greater(x, a))
    enabled = jnp.logical_not(_or(x_zero, domain, underflow, x_inf))
    out = jnp.where(upper, jnp.subtract(1, _igammac_fraction(ax, x, a, jnp.logical_and(enabled, upper), False)),
                    _igamma_series(ax, x, a, jnp.logical_and(enabled, jnp.logical_not(upper)), False))
    out = jnp.where(x_zero, 0, jnp.where(x_inf, 1, out))
    return jnp.where(domain, np.nan, out)


def _igammac(a, x):
    """Q(a, x) = 1 - P(a, x), computed directly where it is small (XLA's igammac)."""
    is_nan, ax, underflow = _igamma_parts(a, x)
    x_inf, a_zero = jnp.equal(x, np.inf), jnp.equal(a, 0)
    domain = _or(jnp.less(x, 0), jnp.less(a, 0), jnp.logical_and(a_zero, jnp.equal(x, 0)), is_nan)
    lower = jnp.logical_or(jnp.less(x, 1), jnp.less(x, a))
    enabled = jnp.logical_not(_or(domain, underflow, x_inf, a_zero))
    series = _igamma_series(ax, x, a, jnp.logical_and(enabled, lower), False)
    fraction = _igammac_fraction(ax, x, a, jnp.logical_and(enabled, jnp.logical_not(lower)), False)
    out = jnp.where(lower, jnp.subtract(1, series), fraction)
    out = jnp.where(jnp.logical_or(x_inf, a_zero), 0, out)
    return jnp.where(domain, np.nan, out)


def _igamma_grad_a(a, x):
    """dP(a, x)/da by the same series and fraction, differentiated term by term (XLA's igamma_grad_a)."""
    is_nan, ax, underflow = _igamma_parts(a, x)
    x_zero = jnp.equal(x, 0)
    domain = jnp.logical_or(jnp.less(x, 0), jnp.less_equal(a, 0))
    upper = jnp.logical_and(jnp.greater(x, 1), jnp.greater(x, a))
    enabled = jnp.logical_not(_or(x_zero, domain, underflow, is_nan))
    out = jnp.where(upper, jnp.negative(_igammac_fraction(ax, x, a, jnp.logical_and(enabled, upper), True)),
                    _igamma_series(ax, x, a, jnp.logical_and(enabled, jnp.logical_not(upper)), True))
    out = jnp.where(x_zero, 0, out)
    return jnp.where(jnp.logical_or(domain, is_nan), np.nan, out)


def _or(*masks):
    """The elementwise or of several masks."""
    return functools.reduce(jnp.logical_or, masks)


def _igamma_grad_x(a, x):
    """dP(a, x)/dx = x**(a-1) e**-x / Gamma(a)."""
    return jnp.exp(jnp.subtract(jnp.add(jnp.negative(x), jnp.multiply(jnp.subtract(a, 1), jnp.log(x))), gammaln(a)))


_gammainc = custom_jvp(_igamma)
_gammainc.defjvps(lambda g, out, a, x: jnp.multiply(g, _igamma_grad_a(a, x)),
                  lambda g, out, a, x: jnp.multiply(g, _igamma_grad_x(a, x)))
_gammaincc = custom_jvp(_igammac)
_gammaincc.defjvps(lambda g, out, a, x: jnp.negative(jnp.multiply(g, _igamma_grad_a(a, x))),
                   lambda g, out, a, x: jnp.negative(jnp.multiply(g, _igamma_grad_x(a, x))))


@_quiet
def gammainc(a, x):
    """P(a, x) = (1 / Gamma(a)) int_0^x t**(a-1) e**-t dt, the regularized lower incomplete gamma
    function, with JAX's derivatives in both arguments."""
    return _gammainc(*jnp.broadcast_arrays(*promote_inexact(a, x)))


@_quiet
def gammaincc(a, x):
    """Q(a, x) = 1 - P(a, x), the regularized upper incomplete gamma function (accurate where small)."""
    return _gammaincc(*jnp.broadcast_arrays(*promote_inexact(a, x)))


# --- regularized incomplete beta (the continued fraction of DLMF 8.17.22, as XLA writes it) -----

def _betainc_numerator(i, a, b, x):
    """The i-th partial numerator d_i of DLMF 8.17.22 (1 for i = 1; the even/odd terms after it)."""
    m = jnp.asarray(jnp.floor_divide(jnp.subtract(i, 1), 2), x.dtype)
    two_m = jnp.multiply(2, m)
    first_even = jnp.divide(jnp.multiply(jnp.negative(jnp.add(a, b)), x), jnp.add(a, 1))
    even = jnp.divide(jnp.multiply(jnp.multiply(jnp.negative(jnp.add(a, m)), jnp.add(jnp.add(a, b), m)), x),
                      jnp.multiply(jnp.add(a, two_m), jnp.add(jnp.add(a, two_m), 1)))
    even = jnp.where(jnp.equal(m, 0), first_even, even)
    odd = jnp.divide(jnp.multiply(jnp.multiply(m, jnp.subtract(b, m)), x),
                     jnp.multiply(jnp.subtract(jnp.add(a, two_m), 1), jnp.add(a, two_m)))
    return jnp.where(jnp.equal(i, 1), 1.0, jnp.where(jnp.equal(jnp.remainder(i, 2), 0), even, odd))


def _betainc_fraction(a, b, x):
    """The continued fraction by the modified Lentz method (every partial denominator is 1), iterated
    until no element's step differs from 1 by eps/2, at most 200 (float32) or 600 (float64) times."""
    small = float(_finfo(x).eps) / 2
    limit = 600 if x.dtype == np.float64 else 200

    def body(vals):
        i, _, c, d, h = vals
        num = _betainc_numerator(i, a, b, x)
        c = jnp.add(1, jnp.divide(num, c))
        c = jnp.where(jnp.less(jnp.abs(c), small), small, c)
        d = jnp.add(1, jnp.multiply(num, d))
        d = jnp.divide(1, jnp.where(jnp.less(jnp.abs(d), small), small, d))
        delta = jnp.multiply(c, d)
        unconverged = _any(jnp.greater_equal(jnp.abs(jnp.subtract(delta, 1)), small))
        return jnp.add(i, 1), unconverged, c, d, jnp.multiply(h, delta)

    h = jnp.full(jnp.shape(x), small, x.dtype)
    init = (jnp.asarray(1, np.int32), jnp.asarray(True), h, jnp.zeros_like(x), h)
    return while_loop(lambda v: jnp.logical_and(jnp.less(v[0], limit), v[1]), body, init)[4]


def _betainc(a, b, x):
    """I_x(a, b), the fraction evaluated at x or, where it converges slowly, at 1 - x with a and b
    swapped (DLMF 8.17.4), times x**a (1-x)**b / (a B(a, b)); the edge values as XLA gives them."""
    a_zero = jnp.logical_or(jnp.equal(a, 0), jnp.equal(b, np.inf))
    b_zero = jnp.logical_or(jnp.equal(b, 0), jnp.equal(a, np.inf))
    x_zero, x_one = jnp.equal(x, 0), jnp.equal(x, 1)
    is_nan = _or(jnp.isnan(a), jnp.isnan(b), jnp.isnan(x))
    zero = jnp.logical_or(jnp.logical_and(b_zero, jnp.logical_not(x_one)), jnp.logical_and(a_zero, x_zero))
    one = jnp.logical_or(jnp.logical_and(a_zero, jnp.logical_not(x_zero)), jnp.logical_and(b_zero, x_one))
    nan = _or(jnp.less(a, 0), jnp.less(b, 0), jnp.less(x, 0), jnp.greater(x, 1), jnp.logical_and(a_zero, b_zero),
              is_nan)
    rapid = jnp.less(x, jnp.divide(jnp.add(a, 1), jnp.add(jnp.add(a, b), 2)))
    a, b = jnp.where(rapid, a, b), jnp.where(rapid, b, a)
    x = jnp.where(rapid, x, jnp.subtract(1, x))
    fraction = _betainc_fraction(a, b, x)
    lbeta_small_a = jnp.subtract(gammaln(b), gammaln(jnp.add(a, b)))
    lbeta = jnp.add(gammaln(a), lbeta_small_a)
    log1m_x_b = jnp.multiply(jnp.log1p(jnp.negative(x)), b)
    # a * Gamma(a) = Gamma(a + 1) -> 1 as a -> 0, which keeps the factor finite for tiny a
    factor = jnp.where(jnp.less(a, float(_finfo(x).tiny) * 2), jnp.exp(jnp.subtract(log1m_x_b, lbeta_small_a)),
                       jnp.divide(jnp.exp(jnp.subtract(jnp.add(jnp.multiply(jnp.log(x), a), log1m_x_b), lbeta)), a))
    out = jnp.multiply(fraction, factor)
    out = jnp.where(rapid, out, jnp.subtract(1, out))
    return jnp.where(nan, np.nan, jnp.where(one, 1, jnp.where(zero, 0, out)))


def _betainc_grad_x(g, out, a, b, x):
    """dI_x(a, b)/dx = x**(a-1) (1-x)**(b-1) / B(a, b)."""
    lbeta = jnp.subtract(jnp.add(gammaln(a), gammaln(b)), gammaln(jnp.add(a, b)))
    log_density = jnp.add(jnp.multiply(jnp.subtract(b, 1), jnp.log1p(jnp.negative(x))),
                          jnp.multiply(jnp.subtract(a, 1), jnp.log(x)))
    return jnp.multiply(g, jnp.exp(jnp.subtract(log_density, lbeta)))


_betainc_jvp = custom_jvp(_betainc)
_betainc_jvp.defjvps(None, None, _betainc_grad_x)


@_quiet
def betainc(a, b, x):
    """I_x(a, b) = (1 / B(a, b)) int_0^x t**(a-1) (1-t)**(b-1) dt, the regularized incomplete beta
    function. Differentiable in x (JAX's rule); JAX has no derivative in a or b, and here they are 0."""
    return _betainc_jvp(*jnp.broadcast_arrays(*promote_inexact(a, b, x)))



__all__ = ["erf", "erfc", "erfinv", "gammaln", "digamma", "polygamma", "zeta", "expit", "logit", "logsumexp",
           "softmax", "log_softmax", "xlogy", "xlog1py", "entr", "rel_entr", "kl_div", "ndtr", "ndtri", "log_ndtr",
           "gamma", "gammasgn", "beta", "betaln", "factorial", "loggamma", "multigammaln", "comb", "boxcox",
           "boxcox1p", "poch", "i0", "i0e", "i1", "i1e", "gammainc", "gammaincc",
           "betainc"]


def __getattr__(name: str):
    """Say whether jax.scipy.special has a name Ember lacks, what to use instead, the closest names, and
    whether scipy.special's function serves outside traced code. SciPy is imported only here, for a
    name that is not a protocol probe (`from ... import` looks up __path__), so importing ember stays free
    of it."""
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import scipy.special

    raise _missing_attribute("ember.scipy.special", name, globals(), ("scipy.special", scipy.special))
