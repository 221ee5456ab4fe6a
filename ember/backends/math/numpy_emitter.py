"""The emitter protocol on NumPy arrays, with the IEEE semantics of compiled code: every float operation
rounds once to nearest even in its format, fma included (float32 through float64 with round-to-odd,
float64 by an exact Dekker product and Boldo and Melquiond's round-to-odd sum, exact rational
arithmetic where an intermediate would leave float64's range). Integers are int32/int64 arrays (two's
complement, wrapping) and, for 128 bits, object arrays of Python ints in [0, 2**128); conditions are bool
arrays. So an algorithm runs, and its ulp tests check it, without compiling anything."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from ember.backends.math.emitter import Emitter, Value
from ember.backends.math.formats import F32, Format

_SIGNED = {32: np.dtype(np.int32), 64: np.dtype(np.int64)}
_UNSIGNED = {32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}
_WIDE = 128                                    # the one width held in object arrays
_MASK = (1 << _WIDE) - 1
_ORDERED = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
            "!=": np.not_equal}
_TABLES: dict[str, np.ndarray] = {}


def _width(a) -> int:
    a = np.asarray(a)
    return _WIDE if a.dtype == object else a.dtype.itemsize * 8


def _unsigned(a) -> np.ndarray:
    """a's bits as unsigned integers (object arrays are kept unsigned already)."""
    a = np.asarray(a)
    return a if a.dtype == object else a.view(_UNSIGNED[a.dtype.itemsize * 8])


def _signed(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == object:
        return np.asarray(a - ((a >> (_WIDE - 1)) << _WIDE), dtype=object)
    return a.view(_SIGNED[a.dtype.itemsize * 8])


def _back(u, width: int) -> np.ndarray:
    """Unsigned bits (NumPy or Python ints) as the canonical integer of `width` bits."""
    u = np.asarray(u)
    if width == _WIDE:
        return np.asarray(u & _MASK, dtype=object)
    return u.astype(_UNSIGNED[width]).view(_SIGNED[width])


# ---- fma, correctly rounded --------------------------------------------------------------------------

def _sum_error(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The rounding error of s = a + b (Knuth's TwoSum: exact barring overflow)."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


def _round_to_odd(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """The float64 s + err rounded to odd, for s = RN(s + err): where inexact and s's last bit is even,
    the neighbour toward err (whose last bit is odd)."""
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    nudge = (err != 0) & even & np.isfinite(s)
    return np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def _fma32(a, b, c) -> np.ndarray:
    """float32 fma: the product is exact in float64, the sum rounded to odd there and then to float32."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    s = p + c
    return _round_to_odd(s, _sum_error(p, c, s)).astype(np.float32)


def _product_error(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    """a * b - p exactly for p = RN(a * b) (Veltkamp's split and Dekker's product; no fma)."""
    def split(v):
        t = v * 134217729.0                     # 2**27 + 1
        hi = t - (t - v)
        return hi, v - hi
    ah, al = split(a)
    bh, bl = split(b)
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _fma_exact(a: float, b: float, c: float) -> float:
    """fma of finite nonzero a, b by rational arithmetic, correctly rounded (Python's int division is)."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return 0.0
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _fma64(a, b, c) -> np.ndarray:
    """float64 fma: (uh, ul) = a * b exactly, (th, tl) = c + uh exactly, then RN(th + RO(tl + ul))
    (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums", 2008). Zero products and
    non-finite operands are plain float ops (exact there); operands whose product or error could leave
    float64's range take exact rational arithmetic, element by element."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    uh = a * b
    ul = _product_error(a, b, uh)
    th = c + uh
    tl = _sum_error(c, uh, th)
    s = tl + ul
    out = th + _round_to_odd(s, _sum_error(tl, ul, s))
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    zero_product = (a == 0) | (b == 0)
    out = np.where(finite & ~zero_product & (c == 0), uh, out)
    out = np.where(~finite | zero_product, uh + c, out)
    big, tiny = 2.0 ** 995, 2.0 ** -960
    risky = finite & ~zero_product & ((np.abs(a) > big) | (np.abs(b) > big) | (np.abs(c) > big)
                                      | (np.abs(uh) > big) | (np.abs(uh) < tiny))
    if risky.any():
        out = np.array(out, copy=True)
        out[risky] = [_fma_exact(*map(float, v)) for v in zip(a[risky], b[risky], c[risky])]
    return out


# ---- the emitter --------------------------------------------------------------------------------------

class NumpyEmitter(Emitter):
    """The protocol on NumPy arrays of format `f` (float32 or float64)."""

    def __init__(self, f: Format):
        self.f = f

    def _float(self, v) -> np.ndarray:
        return np.asarray(v, self.f.dtype)

    # constants
    def c(self, value: float) -> Value:
        return np.asarray(float(value), self.f.dtype)

    def i(self, value: int, width: int | None = None) -> Value:
        return _back(np.asarray(int(value) % (1 << (width or self.f.width)), dtype=object), width or self.f.width)

    # floats
    def add(self, a, b):
        return self._float(np.add(a, b))

    def sub(self, a, b):
        return self._float(np.subtract(a, b))

    def mul(self, a, b):
        return self._float(np.multiply(a, b))

    def div(self, a, b):
        return self._float(np.divide(a, b))

    def neg(self, a):
        return self._float(np.negative(a))

    def abs(self, a):
        return self._float(np.abs(a))

    def sqrt(self, a):
        return self._float(np.sqrt(a))

    def fma(self, a, b, c):
        return self._float((_fma32 if self.f is F32 else _fma64)(a, b, c))

    def rint(self, a):
        return self._float(np.rint(a))

    def floor(self, a):
        return self._float(np.floor(a))

    def ceil(self, a):
        return self._float(np.ceil(a))

    def trunc(self, a):
        return self._float(np.trunc(a))

    def copysign(self, a, sign):
        return self._float(np.copysign(a, sign))

    def min(self, a, b):
        return self._float(np.fmin(a, b))

    def max(self, a, b):
        return self._float(np.fmax(a, b))

    # comparisons, selection, conditions
    def cmp(self, op, a, b):
        out = _ORDERED[op](a, b)
        return np.asarray(out & ~np.isnan(a) & ~np.isnan(b) if op == "!=" else out)

    def ucmp(self, op, a, b):
        return np.asarray(_ORDERED[op](a, b) | np.isnan(a) | np.isnan(b))

    def isnan(self, a):
        return np.asarray(np.isnan(a))

    def select(self, cond, a, b):
        out = np.where(cond, a, b)
        return out if np.asarray(a).dtype != object else np.asarray(out, dtype=object)

    def and_(self, a, b):
        return np.asarray(np.asarray(a) & np.asarray(b))

    def or_(self, a, b):
        return np.asarray(np.asarray(a) | np.asarray(b))

    def not_(self, a):
        a = np.asarray(a)
        return np.asarray(a ^ _MASK, dtype=object) if a.dtype == object else np.asarray(~a)

    def xor(self, a, b):
        return np.asarray(np.asarray(a) ^ np.asarray(b))

    # integers
    def iadd(self, a, b):
        return _back(_unsigned(a) + _unsigned(b), _width(a))

    def isub(self, a, b):
        return _back(_unsigned(a) - _unsigned(b), _width(a))

    def imul(self, a, b):
        return _back(_unsigned(a) * _unsigned(b), _width(a))

    def ineg(self, a):
        return _back(-_unsigned(a) if _width(a) == _WIDE else np.negative(_unsigned(a)), _width(a))

    def shl(self, a, n):
        return _back(_unsigned(a) << _unsigned(n), _width(a))

    def ashr(self, a, n):
        return _back(_signed(a) >> _signed(n), _width(a))

    def lshr(self, a, n):
        return _back(_unsigned(a) >> _unsigned(n), _width(a))

    def icmp(self, op, a, b, signed=True):
        if np.asarray(a).dtype == bool:
            return np.asarray(_ORDERED[op](a, b))
        view = _signed if signed else _unsigned
        return np.asarray(_ORDERED[op](view(a), view(b)), dtype=bool)

    def zext(self, a, width):
        u = _unsigned(a)
        return _back(u.astype(object) if width == _WIDE else u, width)

    def sext(self, a, width):
        s = _signed(a)
        return _back(s.astype(object) if width == _WIDE else s.astype(_SIGNED[width]), width)

    def itrunc(self, a, width):
        if _width(a) == width:
            return a
        u = _unsigned(a)
        if u.dtype == object:
            return _back(np.asarray(u & ((1 << width) - 1)).astype(_UNSIGNED[width]), width)
        return _back(u.astype(_UNSIGNED[width]), width)

    def ctlz(self, a):
        width = _width(a)
        count = np.frompyfunc(lambda v: width - int(v).bit_length(), 1, 1)(_unsigned(a).astype(object))
        return _back(np.asarray(count, dtype=object) if width == _WIDE else np.asarray(count, np.uint64), width)

    def fshl(self, a, b, n):
        width = _width(a)
        s = _unsigned(n) % width
        shifted = (_unsigned(a) << s) | (_unsigned(b) >> (width - s) % width)
        return _back(np.where(s == 0, _unsigned(a), shifted), width)

    # conversions
    def to_int(self, a):
        return np.asarray(a).astype(_SIGNED[self.f.width])

    def to_float(self, n, signed=True):
        return np.asarray((_signed(n) if signed else _unsigned(n)).astype(self.f.dtype))

    def bits(self, a):
        return self._float(a).view(_SIGNED[self.f.width])

    def from_bits(self, n):
        return np.asarray(n).view(self.f.dtype)

    def convert(self, a, fmt):
        return np.asarray(a).astype(fmt.dtype)

    # formats, calls, tables, rare pieces
    def at(self, fmt):
        return NumpyEmitter(fmt)

    def call(self, name, *args, fmt=None):
        from ember.backends.math import FUNCTIONS

        return FUNCTIONS[name][1](self.at(fmt) if fmt is not None else self, *args)

    def table(self, name: str, width: int, words: Sequence[int]):
        if name not in _TABLES:
            _TABLES[name] = np.array([int(w) for w in words], _UNSIGNED[width]).view(_SIGNED[width])
        return _TABLES[name]

    def load(self, table, index):
        return table[np.asarray(index)]

    def rare(self, key: str, fn: Callable, x, limit: float):
        x = np.atleast_1d(self._float(x))
        ax = np.abs(x)
        finite = np.isfinite(x)
        out = np.where(finite, self.c(0.0), x - x)
        need = finite & (ax >= limit)
        if need.any():
            out[need] = fn(self, x[need], ax[need])
        return out

