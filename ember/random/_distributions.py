"""The samplers of jax.random that transform uniform bits without loops: JAX 0.10.2's algorithms, step
for step, so the same key gives JAX's numbers (bit for bit for `bits`, `uniform` and `randint`; to the
rounding of the transcendental functions for the rest).

Each public function checks its arguments (JAX's errors, naming the user's line) and calls a jitted
implementation with the shape and dtype static, as JAX does: an eager call runs one compiled function, and
inside a user's jit, vmap or grad the implementation is traced through.
"""

from __future__ import annotations

import math

import numpy as np

import ember.lax as lax
import ember.numpy as jnp
import ember.tracer.dtypes as dtypes
from ember.api import jit
from ember.errors import ArgumentError, ArgumentValueError, ShapeError, user_location
from ember.random import _prng
from ember.random._checks import (
    broadcast_shapes,
    check_shape,
    dtype_of,
    float_dtype,
    int_dtype,
    shape_arg,
    shape_or_broadcast,
)
from ember.random._keys import Array, ArrayLike, DTypeLike, KeyLike, Shape, check_key


def _params_fit(name: str, shape: tuple[int, ...], **params) -> None:
    """Parameters that must broadcast to the output shape (what JAX's arithmetic enforces), as a TypeError."""
    for pname, value in params.items():
        pshape = tuple(np.shape(value))
        ok = len(pshape) <= len(shape) and all(p in (1, s) for p, s in zip(pshape[::-1], shape[::-1]))
        if not ok:
            raise ShapeError(f"{name}: {pname} of shape {pshape} does not broadcast to the sample shape {shape}",
                             user_location())


def _to_rank(x, ndim: int):
    """`x` with leading unit axes up to rank `ndim` (lax.broadcast_to_rank)."""
    extra = ndim - len(np.shape(x))
    return jnp.reshape(x, (1,) * extra + tuple(np.shape(x))) if extra > 0 else x


# --- bits and uniform --------------------------------------------------------------------------------

def bits(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """Uniform random bits as unsigned integers of `dtype` (default uint32, uint64 in 64-bit mode)."""
    data, _ = check_key("bits", key)
    dt = dtypes.canonicalize(dtypes.uint_ if dtype is None else dtype)
    if dt.kind != "u":
        raise ArgumentValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dt.name}",
                                 user_location())
    return _prng.random_bits(data, dt.itemsize * 8, shape_arg("bits", shape))


def uniform(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None, minval: ArrayLike = 0.0,
            maxval: ArrayLike = 1.0) -> Array:
    """Uniform floats in [minval, maxval): random mantissa bits under the exponent of 1.0, minus 1,
    scaled to the range (JAX's construction, so the same key gives the same floats)."""
    data, _ = check_key("uniform", key)
    shape, dt = shape_arg("uniform", shape), float_dtype("uniform", dtype)
    _params_fit("uniform", shape, minval=minval, maxval=maxval)
    return _uniform(data, minval, maxval, shape, dt)


@jit(static_argnums=(3, 4))
def _uniform(key, minval, maxval, shape, dtype):
    minval = _to_rank(lax.convert_element_type(minval, dtype), len(shape))
    maxval = _to_rank(lax.convert_element_type(maxval, dtype), len(shape))
    nbits, nmant = dtype.itemsize * 8, np.finfo(dtype).nmant
    mantissa = lax.shift_right_logical(_prng.random_bits(key, nbits, shape), nbits - nmant)
    # m * 2**-nmant is exactly bitcast(m | bits(1.0)) - 1, JAX's form: the same floats without a bitcast
    floats = lax.convert_element_type(mantissa, dtype) * dtype.type(2.0**-nmant)
    return jnp.maximum(minval, _fma(floats, maxval - minval, minval))


def _fma(a, b, c):
    """a * b + c rounded once, as XLA's CPU and GPU backends contract it (JAX's uniform values depend on
    it): below float64 the product is exact in float64 (rounding the sum twice differs from one rounding
    in about 2**-29 of cases); float64 rounds the product and the sum."""
    dtype = np.dtype(a.dtype)
    if dtype.itemsize >= 8:
        return a * b + c
    wide = [lax.convert_element_type(v, np.float64) for v in (a, b, c)]
    return lax.convert_element_type(wide[0] * wide[1] + wide[2], dtype)


# --- integers ----------------------------------------------------------------------------------------

def randint(key: KeyLike, shape: Shape, minval: ArrayLike, maxval: ArrayLike,
            dtype: DTypeLike | None = None) -> Array:
    """Uniform integers in [minval, maxval), JAX's way: two draws of the type's width combined modulo the
    span (slightly biased for spans that are not powers of 2, as in JAX); narrow types sample in int32."""
    data, _ = check_key("randint", key)
    shape, dt = shape_arg("randint", shape), int_dtype("randint", dtype)
    check_shape("randint", shape, np.shape(minval), np.shape(maxval))
    info = np.iinfo(dt)
    if info.bits < 32:
        lo32 = jnp.clip(jnp.asarray(minval).astype(np.int32), int(info.min), int(info.max))
        hi32 = jnp.clip(jnp.asarray(maxval).astype(np.int32), int(info.min), int(info.max) + 1)
        return _randint(data, lo32, hi32, shape, np.dtype(np.int32)).astype(dt)
    return _randint(data, minval, maxval, shape, dt)


def _convert_and_clip(val, dtype: np.dtype):
    """Integer `val` as `dtype`, clipped to the range both types hold rather than wrapped."""
    src, dst = np.iinfo(val.dtype), np.iinfo(dtype)
    lo, hi = max(int(src.min), int(dst.min)), min(int(src.max), int(dst.max))
    return jnp.clip(val, val.dtype.type(lo), val.dtype.type(hi)).astype(dtype)


def _rem(x, span):
    """x mod span, with XLA's x mod 0 == x (a span that wrapped to 0 means the type's whole range)."""
    zero = span == 0
    return jnp.where(zero, x, lax.rem(x, jnp.where(zero, span.dtype.type(1), span)))


@jit(static_argnums=(3, 4))
def _randint(key, minval, maxval, shape, dtype):
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    if minval.dtype.kind not in "iu":
        minval = minval.astype(dtypes.int_)
    if maxval.dtype.kind not in "iu":
        maxval = maxval.astype(dtypes.int_)
    top = _convert_and_clip(jnp.asarray(np.iinfo(dtype).max, dtype), maxval.dtype)
    maxval_out_of_range = maxval > top
    maxval_out_of_range = jnp.broadcast_to(maxval_out_of_range, shape)
    minval = jnp.broadcast_to(_convert_and_clip(minval, dtype), shape)
    maxval = jnp.broadcast_to(_convert_and_clip(maxval, dtype), shape)
    nbits = np.iinfo(dtype).bits
    keys = _prng.split(key, (2,))
    higher = _prng.random_bits(keys[0], nbits, shape)
    lower = _prng.random_bits(keys[1], nbits, shape)
    udtype = _prng.UINT_DTYPES[nbits]
    span = lax.convert_element_type(maxval - minval, udtype)
    span = jnp.where(maxval <= minval, udtype.type(1), span)  # an empty range returns minval
    span = jnp.where(maxval_out_of_range & (maxval > minval), span + udtype.type(1), span)
    # (hi * 2**nbits + lo) mod span, with 2**nbits mod span computed as (2**(nbits/2) mod span)**2 mod span
    multiplier = _rem(jnp.full_like(span, 2 ** (nbits // 2)), span)
    multiplier = _rem(multiplier * multiplier, span)
    offset = _rem(_rem(higher, span) * multiplier + _rem(lower, span), span)
    return minval + lax.convert_element_type(offset, dtype)


# --- normal and its relatives ------------------------------------------------------------------------

def normal(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """Standard normal floats: sqrt(2) * erf_inv(u) for u uniform in (-1, 1)."""
    data, _ = check_key("normal", key)
    return _normal(data, shape_arg("normal", shape), float_dtype("normal", dtype))


@jit(static_argnums=(1, 2))
def _normal(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(key, lo, dtype.type(1.0), shape, dtype)
    return dtype.type(np.sqrt(2)) * lax.erf_inv(u)


def truncated_normal(key: KeyLike, lower: ArrayLike, upper: ArrayLike, shape: Shape | None = None,
                     dtype: DTypeLike | None = None) -> Array:
    """Normal floats restricted to (lower, upper): the inverse CDF of a uniform between the bounds' CDFs,
    clamped inside the open interval. Differentiable in the bounds, as JAX's."""
    data, _ = check_key("truncated_normal", key)
    dt = float_dtype("truncated_normal", dtype)
    shape = shape_or_broadcast("truncated_normal", shape, lower, upper)
    return _truncated_normal(data, lower, upper, shape, dt)


@jit(static_argnums=(3, 4))
def _truncated_normal(key, lower, upper, shape, dtype):
    sqrt2 = dtype.type(np.sqrt(2))
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a, b = lax.erf(lower / sqrt2), lax.erf(upper / sqrt2)
    out = sqrt2 * lax.erf_inv(_uniform(key, a, b, shape, dtype))
    lo = lax.nextafter(lax.stop_gradient(lower), jnp.full_like(lower, np.inf))
    hi = lax.nextafter(lax.stop_gradient(upper), jnp.full_like(upper, -np.inf))
    return jnp.clip(out, lo, hi)


_ONE = np.float32(1.0)


def lognormal(key: KeyLike, sigma: ArrayLike = _ONE, shape: Shape | None = None,
              dtype: DTypeLike | None = None) -> Array:
    """exp(sigma * normal)."""
    data, _ = check_key("lognormal", key)
    dt = float_dtype("lognormal", dtype)
    shape = shape_or_broadcast("lognormal", shape, sigma)
    return _lognormal(data, sigma, shape, dt)


@jit(static_argnums=(2, 3))
def _lognormal(key, sigma, shape, dtype):
    return jnp.exp(_normal(key, shape, dtype) * lax.convert_element_type(sigma, dtype))


def maxwell(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """The length of a standard normal 3-vector."""
    data, _ = check_key("maxwell", key)
    return _maxwell(data, shape_arg("maxwell", shape), float_dtype("maxwell", dtype))


@jit(static_argnums=(1, 2))
def _maxwell(key, shape, dtype):
    x = _normal(key, (*shape, 3), dtype)
    return jnp.sqrt(jnp.sum(x * x, axis=-1))


def double_sided_maxwell(key: KeyLike, loc: ArrayLike, scale: ArrayLike, shape: Shape = (),
                         dtype: DTypeLike | None = None) -> Array:
    """A Maxwell magnitude with a random sign, scaled and shifted; the shape is `shape` followed by the
    parameters' broadcast shape, as in JAX."""
    data, _ = check_key("double_sided_maxwell", key)
    dt = float_dtype("double_sided_maxwell", dtype)
    shape = shape_arg("double_sided_maxwell", shape)
    params = _broadcast("double_sided_maxwell", loc, scale)
    return _double_sided_maxwell(data, loc, scale, (shape or params) + params, dt)


@jit(static_argnums=(3, 4))
def _double_sided_maxwell(key, loc, scale, shape, dtype):
    keys = _prng.split(key, (2,))
    sign = _rademacher(keys[1], shape, dtype)
    return sign * _maxwell(keys[0], shape, dtype) * scale + loc


def wald(key: KeyLike, mean: ArrayLike, shape: Shape | None = None,
         dtype: DTypeLike | None = None) -> Array:
    """Inverse Gaussian floats (Michael, Schucany and Haas), as jax.random.wald."""
    data, _ = check_key("wald", key)
    dt = float_dtype("wald", dtype)
    shape = shape_or_broadcast("wald", shape, mean)
    return _wald(data, mean, shape, dt)


@jit(static_argnums=(2, 3))
def _wald(key, mean, shape, dtype):
    keys = _prng.split(key, (2,))
    mean = jnp.broadcast_to(lax.convert_element_type(mean, dtype), shape)
    v = _normal(keys[0], shape, dtype)
    z = _uniform(keys[1], dtype.type(0), dtype.type(1), shape, dtype)
    y = v * v
    y_sq, mean_sq = y * y, mean * mean
    x = mean + mean_sq * y / 2 - mean / 2 * jnp.sqrt(4 * mean * y + mean_sq * y_sq)
    return jnp.where(z <= mean / (mean + x), x, mean_sq / x)


# --- Bernoulli, categorical, Rademacher -----------------------------------------------------------------

def bernoulli(key: KeyLike, p: ArrayLike = 0.5, shape: Shape | None = None, mode: str = "low") -> Array:
    """Booleans, True with probability p: uniform < p ("high": two uniforms, for tiny p)."""
    if mode not in ("high", "low"):
        raise ArgumentValueError(f"got mode={mode!r}, expected 'high' or 'low'", user_location())
    data, _ = check_key("bernoulli", key)
    dt = dtype_of(p)
    if dt.kind != "f":
        raise ArgumentError(f"bernoulli probability `p` must have a floating dtype, got {dt.name}.", user_location())
    shape = shape_or_broadcast("bernoulli", shape, p) if shape is not None else tuple(np.shape(p))
    return _bernoulli(data, p, shape, dt, mode)


@jit(static_argnums=(2, 3, 4))
def _bernoulli(key, p, shape, dtype, mode):
    p = lax.convert_element_type(p, dtype)
    if mode == "high":
        u = _uniform(key, dtype.type(0), dtype.type(1), (2, *shape), dtype)
        return u[1] * dtype.type(2.0 ** -np.finfo(dtype).nmant) < p - u[0]
    return _uniform(key, dtype.type(0), dtype.type(1), shape, dtype) < p


def rademacher(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """-1 or +1 with equal probability (default int dtype)."""
    data, _ = check_key("rademacher", key)
    return _rademacher(data, shape_arg("rademacher", shape), dtypes.canonicalize(dtypes.int_ if dtype is None
                                                                                   else dtype))


@jit(static_argnums=(1, 2))
def _rademacher(key, shape, dtype):
    b = _bernoulli(key, dtypes.float_.type(0.5), shape, dtypes.float_, "low").astype(dtype)
    return (2 * b - 1).astype(dtype)


def categorical(key: KeyLike, logits: ArrayLike, axis: int = -1, shape: Shape | None = None, replace: bool = True,
                mode: str | None = None) -> Array:
    """Indices drawn with probabilities softmax(logits, axis): the Gumbel-max trick (with replacement) or
    the Gumbel top-k trick (without), as JAX."""
    data, _ = check_key("categorical", key)
    logits = jnp.asarray(logits)
    ndim = logits.ndim
    if not -ndim <= axis < ndim:
        raise ArgumentValueError(f"categorical: axis {axis} is out of bounds for logits of rank {ndim}",
                                 user_location())
    batch_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis % ndim)
    if shape is None:
        shape = batch_shape
    else:
        shape = shape_arg("categorical", shape)
        check_shape("categorical", shape, batch_shape)
    mode = _gumbel_mode(mode)
    if not replace:
        k = math.prod(shape[: len(shape) - len(batch_shape)])
        if k > logits.shape[axis]:
            raise ArgumentValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                                     f"categories ({logits.shape[axis]}).", user_location())
    return _categorical(data, logits, shape, batch_shape, axis % ndim, bool(replace), mode)


@jit(static_argnums=(2, 3, 4, 5, 6))
def _categorical(key, logits, shape, batch_shape, axis, replace, mode):
    prefix = shape[: len(shape) - len(batch_shape)]
    dtype = np.dtype(logits.dtype)
    if replace:
        sample_shape = list(shape[len(prefix):])
        sample_shape.insert(axis, logits.shape[axis])
        noise = _gumbel(key, (*prefix, *sample_shape), dtype, mode)
        return jnp.argmax(noise + jnp.reshape(logits, (1,) * len(prefix) + logits.shape), axis=axis + len(prefix))
    scores = jnp.moveaxis(logits + _gumbel(key, logits.shape, dtype, mode), axis, -1)
    top = _top_k_indices(scores, math.prod(prefix))
    return jnp.moveaxis(top, -1, 0).reshape(shape)


def _top_k_indices(scores, k: int):
    """The indices of the k largest scores along the last axis, largest first, lower index first among
    equals (lax.top_k's order): k rounds of argmax, each excluding the indices taken."""
    n = scores.shape[-1]
    ids = jnp.arange(n, dtype=np.int32)
    taken = jnp.zeros(scores.shape, bool)
    picks = []
    for _ in range(k):
        pick = jnp.argmax(jnp.where(taken, -np.inf, scores), axis=-1).astype(np.int32)
        hit = ids == pick[..., None]
        # if only -inf scores remain, argmax may land on a taken index: take the first free one instead
        again = jnp.any(hit & taken, axis=-1)
        pick = jnp.where(again, jnp.argmax(~taken, axis=-1).astype(np.int32), pick)
        taken = taken | (ids == pick[..., None])
        picks.append(pick)
    return jnp.stack(picks, axis=-1)


# --- one uniform through a closed-form inverse CDF ---------------------------------------------------------

def _simple(name: str, shape, dtype):
    return shape_arg(name, shape), float_dtype(name, dtype)


def exponential(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """Exponential floats of rate 1: -log(1 - u)."""
    data, _ = check_key("exponential", key)
    return _exponential(data, *_simple("exponential", shape, dtype))


@jit(static_argnums=(1, 2))
def _exponential(key, shape, dtype):
    u = _uniform(key, dtype.type(0), dtype.type(1), shape, dtype)
    return -jnp.log1p(-u)


def laplace(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """Laplace floats of scale 1: sign(u) * log(1 - |u|) for u uniform in (-1, 1)."""
    data, _ = check_key("laplace", key)
    return _laplace(data, *_simple("laplace", shape, dtype))


@jit(static_argnums=(1, 2))
def _laplace(key, shape, dtype):
    u = _uniform(key, dtype.type(-1.0 + np.finfo(dtype).epsneg), dtype.type(1), shape, dtype)
    return jnp.sign(u) * jnp.log1p(-jnp.abs(u))


def logistic(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """Logistic floats: log(u) - log(1 - u)."""
    data, _ = check_key("logistic", key)
    return _logistic(data, *_simple("logistic", shape, dtype))


@jit(static_argnums=(1, 2))
def _logistic(key, shape, dtype):
    x = _uniform(key, np.finfo(dtype).tiny, dtype.type(1), shape, dtype)
    return jnp.log(x) - jnp.log1p(-x)


def cauchy(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None) -> Array:
    """Cauchy floats: tan(pi * (u - 1/2))."""
    data, _ = check_key("cauchy", key)
    return _cauchy(data, *_simple("cauchy", shape, dtype))


@jit(static_argnums=(1, 2))
def _cauchy(key, shape, dtype):
    u = _uniform(key, np.finfo(dtype).eps, dtype.type(1), shape, dtype)
    return jnp.tan(dtype.type(np.pi) * (u - dtype.type(0.5)))


def _gumbel_mode(mode) -> str:
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ArgumentValueError(f"Must provide valid mode for gumbel got: {mode}", user_location())
    return mode


def gumbel(key: KeyLike, shape: Shape = (), dtype: DTypeLike | None = None, mode: str | None = None) -> Array:
    """Gumbel floats: -log(-log(u)) ("high": u from two draws, finer near 0; "highest", for float32: u from
    64 bits, JAX's fixed-point construction)."""
    data, _ = check_key("gumbel", key)
    shape, dt = _simple("gumbel", shape, dtype)
    return _gumbel(data, shape, dt, _gumbel_mode(mode))


@jit(static_argnums=(1, 2, 3))
def _gumbel(key, shape, dtype, mode):
    info = np.finfo(dtype)
    if mode == "highest" and dtype == np.float32:
        return _gumbel_highest(key, shape)
    if mode in ("high", "highest"):
        u = _uniform(key, dtype.type(0), dtype.type(1), (2, *shape), dtype)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high, high + dtype.type(2.0 ** -info.nmant) * low + info.tiny)
        return -jnp.log(-jnp.log1p(-x))
    return -jnp.log(-jnp.log(_uniform(key, info.tiny, dtype.type(1), shape, dtype)))


def _gumbel_highest(key, shape):
    """float32 Gumbel from 64 random bits: u in (0, 1/2) as a float with every bit of its 64-bit fixed-point
    value that float32 holds (1 - u for the other half), so the tails reach far beyond 2**-24."""
    bits = _prng.random_bits(key, 32, (2, *shape))
    neg = lax.bitwise_not(bits)
    carry = (neg[1] == np.uint32(0xFFFFFFFF)).astype(np.uint32)  # 1 - bits in 64-bit fixed point
    neg = neg + jnp.stack([carry, jnp.ones_like(carry)])
    flip = bits[0] < np.uint32(1 << 31)
    x = _fixed_point_to_float(jnp.where(flip, bits, neg))
    return jnp.where(flip, -jnp.log(-jnp.log1p(-x)), -jnp.log(-jnp.log(x)))


def _fixed_point_to_float(bits):
    """float32 of the 64-bit fixed-point fraction whose words are bits[0] (high) and bits[1] (low), in
    (0, 1): the leading one found with count-leading-zeros, the next 23 bits its mantissa."""
    hi, lo = bits[0], bits[1]
    hiclz, loclz = lax.clz(hi), lax.clz(lo)
    all_low = hiclz == np.uint32(32)
    mantissa = lax.bitwise_or(lax.shift_left(hi, hiclz), jnp.where(all_low, lax.shift_left(lo, loclz),
                                                                   lax.shift_right_logical(lo, 32 - hiclz)))
    mantissa = lax.shift_right_logical(mantissa, np.uint32(8)) & np.uint32((1 << 23) - 1)
    exponent = np.uint32(126) - jnp.where(all_low, 32 + loclz, hiclz)
    exponent = lax.shift_left(exponent, np.uint32(23)) & np.uint32((1 << 30) - (1 << 22))
    return lax.bitcast_convert_type(exponent | mantissa, np.float32)


def pareto(key: KeyLike, b: ArrayLike, shape: Shape | None = None,
           dtype: DTypeLike | None = None) -> Array:
    """Pareto floats of shape b: exp(exponential / b)."""
    data, _ = check_key("pareto", key)
    dt = float_dtype("pareto", dtype)
    shape = shape_or_broadcast("pareto", shape, b)
    return _pareto(data, b, shape, dt)


@jit(static_argnums=(2, 3))
def _pareto(key, b, shape, dtype):
    return jnp.exp(_exponential(key, shape, dtype) / lax.convert_element_type(b, dtype))


def weibull_min(key: KeyLike, scale: ArrayLike, concentration: ArrayLike, shape: Shape = (),
                dtype: DTypeLike | None = None) -> Array:
    """Weibull floats: scale * (-log(1 - u)) ** (1 / concentration)."""
    data, _ = check_key("weibull_min", key)
    shape, dt = _simple("weibull_min", shape, dtype)
    return _weibull_min(data, scale, concentration, shape, dt)


@jit(static_argnums=(3, 4))
def _weibull_min(key, scale, concentration, shape, dtype):
    u = _uniform(key, dtype.type(0), dtype.type(1), shape, dtype)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale


def rayleigh(key: KeyLike, scale: ArrayLike, shape: Shape | None = None,
             dtype: DTypeLike | None = None) -> Array:
    """Rayleigh floats: scale * sqrt(-2 log u)."""
    data, _ = check_key("rayleigh", key)
    dt = float_dtype("rayleigh", dtype)
    shape = shape_or_broadcast("rayleigh", shape, scale)
    return _rayleigh(data, scale, shape, dt)


@jit(static_argnums=(2, 3))
def _rayleigh(key, scale, shape, dtype):
    u = _uniform(key, dtype.type(0), dtype.type(1), shape, dtype)
    scale = jnp.broadcast_to(jnp.asarray(scale).astype(dtype), shape)
    return scale * jnp.sqrt(jnp.log(u) * dtype.type(-2))


def triangular(key: KeyLike, left: ArrayLike, mode: ArrayLike, right: ArrayLike, shape: Shape | None = None,
               dtype: DTypeLike | None = None) -> Array:
    """Triangular floats on [left, right] peaking at mode, by the inverse CDF."""
    data, _ = check_key("triangular", key)
    dt = float_dtype("triangular", dtype)
    shape = shape_or_broadcast("triangular", shape, left, mode, right)
    return _triangular(data, left, mode, right, shape, dt)


@jit(static_argnums=(4, 5))
def _triangular(key, left, mode, right, shape, dtype):
    left, mode, right = (jnp.broadcast_to(lax.convert_element_type(v, dtype), shape) for v in (left, mode, right))
    fc = (mode - left) / (right - left)
    u = _uniform(key, dtype.type(0), dtype.type(1), shape, dtype)
    out1 = left + jnp.sqrt(u * (right - left) * (mode - left))
    out2 = right - jnp.sqrt((1 - u) * (right - left) * (right - mode))
    return jnp.where(u < fc, out1, out2)


def geometric(key: KeyLike, p: ArrayLike, shape: Shape | None = None,
              dtype: DTypeLike | None = None) -> Array:
    """Geometric integers >= 1: floor(log u / log(1 - p)) + 1 (default int dtype)."""
    data, _ = check_key("geometric", key)
    dt = int_dtype("geometric", dtype)
    shape = shape_or_broadcast("geometric", shape, p)
    pdt = dtype_of(p) if dtype_of(p).kind == "f" else dtypes.float_
    return _geometric(data, p, shape, dt, pdt)


@jit(static_argnums=(2, 3, 4))
def _geometric(key, p, shape, dtype, pdtype):
    p = lax.convert_element_type(p, pdtype)
    u = _uniform(key, pdtype.type(0), pdtype.type(1), shape, pdtype)
    log_u = jnp.log(jnp.where(u == 0, pdtype.type(1), u))  # JAX maps u = 0 to 1 to keep its old stream
    return (jnp.floor(log_u / jnp.broadcast_to(jnp.log1p(-p), shape)) + 1).astype(dtype)


def _broadcast(name: str, *params) -> tuple[int, ...]:
    return broadcast_shapes(name, *(np.shape(p) for p in params))
