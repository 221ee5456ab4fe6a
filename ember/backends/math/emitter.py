"""The emitter protocol: the operations the math algorithms are written against, once for every renderer.

An algorithm `def name(e, x)` gets an `Emitter` bound to one float format (`e.f`) and opaque operands (IR
values, NumPy arrays, ...) and returns one value, branch-free: every piece is computed and one selected.
Integers are two's complement of the format's width unless an operation names another width (`e.i(v, 128)`,
`zext`, `trunc`); conditions come from comparisons and combine with `and_`, `or_`, `not_`, `xor`.
A renderer implements the abstract primitives; the helpers below them are written here once, so every
renderer emits the same sequence of operations for them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from ember.backends.math.formats import Format

Value = Any     # an operand of the renderer: an IR value, a NumPy array


class Emitter(ABC):
    """Operations on values of one float format `f`, their integers and conditions."""
    f: Format

    # ---- constants
    @abstractmethod
    def c(self, value: float) -> Value:
        """A float constant of format f."""

    @abstractmethod
    def i(self, value: int, width: int | None = None) -> Value:
        """An integer constant of f's width (or `width` bits), two's complement."""

    # ---- float arithmetic (IEEE, rounded to nearest even)
    @abstractmethod
    def add(self, a: Value, b: Value) -> Value:
        """a + b."""

    @abstractmethod
    def sub(self, a: Value, b: Value) -> Value:
        """a - b."""

    @abstractmethod
    def mul(self, a: Value, b: Value) -> Value:
        """a * b."""

    @abstractmethod
    def div(self, a: Value, b: Value) -> Value:
        """a / b."""

    @abstractmethod
    def neg(self, a: Value) -> Value:
        """-a (flips the sign bit, NaN and zeros included)."""

    @abstractmethod
    def abs(self, a: Value) -> Value:
        """|a| (clears the sign bit)."""

    @abstractmethod
    def sqrt(self, a: Value) -> Value:
        """Correctly rounded square root."""

    @abstractmethod
    def fma(self, a: Value, b: Value, c: Value) -> Value:
        """a * b + c rounded once."""

    @abstractmethod
    def rint(self, a: Value) -> Value:
        """a rounded to an integer, ties to even."""

    @abstractmethod
    def floor(self, a: Value) -> Value:
        """The largest integer <= a."""

    @abstractmethod
    def ceil(self, a: Value) -> Value:
        """The smallest integer >= a."""

    @abstractmethod
    def trunc(self, a: Value) -> Value:
        """a rounded toward zero to an integer."""

    @abstractmethod
    def copysign(self, a: Value, sign: Value) -> Value:
        """|a| with the sign bit of `sign`."""

    @abstractmethod
    def min(self, a: Value, b: Value) -> Value:
        """IEEE minNum: the smaller, the other operand where one is NaN."""

    @abstractmethod
    def max(self, a: Value, b: Value) -> Value:
        """IEEE maxNum: the larger, the other operand where one is NaN."""

    # ---- comparisons and selection
    @abstractmethod
    def cmp(self, op: str, a: Value, b: Value) -> Value:
        """Ordered comparison ("<", "<=", ">", ">=", "==", "!="): false when either side is NaN."""

    @abstractmethod
    def ucmp(self, op: str, a: Value, b: Value) -> Value:
        """Unordered comparison: true when either side is NaN."""

    @abstractmethod
    def isnan(self, a: Value) -> Value:
        """Whether a is NaN."""

    @abstractmethod
    def select(self, cond: Value, a: Value, b: Value) -> Value:
        """a where cond, else b (floats, integers or conditions)."""

    @abstractmethod
    def and_(self, a: Value, b: Value) -> Value:
        """Conditions: both; integers: bitwise and."""

    @abstractmethod
    def or_(self, a: Value, b: Value) -> Value:
        """Conditions: either; integers: bitwise or."""

    @abstractmethod
    def not_(self, a: Value) -> Value:
        """Conditions: negation; integers: bitwise complement."""

    @abstractmethod
    def xor(self, a: Value, b: Value) -> Value:
        """Conditions: exactly one; integers: bitwise exclusive or."""

    # ---- integers (two's complement, wrapping; shifts by less than the width)
    @abstractmethod
    def iadd(self, a: Value, b: Value) -> Value:
        """a + b."""

    @abstractmethod
    def isub(self, a: Value, b: Value) -> Value:
        """a - b."""

    @abstractmethod
    def imul(self, a: Value, b: Value) -> Value:
        """a * b (the low bits of the product)."""

    @abstractmethod
    def ineg(self, a: Value) -> Value:
        """-a."""

    @abstractmethod
    def shl(self, a: Value, n: Value) -> Value:
        """a << n."""

    @abstractmethod
    def ashr(self, a: Value, n: Value) -> Value:
        """a >> n, copying the sign bit."""

    @abstractmethod
    def lshr(self, a: Value, n: Value) -> Value:
        """a >> n, shifting in zeros."""

    @abstractmethod
    def icmp(self, op: str, a: Value, b: Value, signed: bool = True) -> Value:
        """Integer (or condition) comparison, signed or unsigned."""

    @abstractmethod
    def zext(self, a: Value, width: int) -> Value:
        """a as an unsigned integer of `width` bits (wider)."""

    @abstractmethod
    def sext(self, a: Value, width: int) -> Value:
        """a as a signed integer of `width` bits (wider)."""

    @abstractmethod
    def itrunc(self, a: Value, width: int) -> Value:
        """The low `width` bits of a (a itself where it has that width)."""

    @abstractmethod
    def ctlz(self, a: Value) -> Value:
        """The number of leading zero bits of a (its width where a is 0), as an integer of a's width."""

    @abstractmethod
    def fshl(self, a: Value, b: Value, n: Value) -> Value:
        """The high half of (a:b) << (n mod width): a funnel shift left."""

    # ---- conversions
    @abstractmethod
    def to_int(self, a: Value) -> Value:
        """A float holding a small integer (never NaN or huge) as an integer of f's width."""

    @abstractmethod
    def to_float(self, n: Value, signed: bool = True) -> Value:
        """An integer (of any width) as the nearest float of format f."""

    @abstractmethod
    def bits(self, a: Value) -> Value:
        """The bits of a float as an integer of f's width."""

    @abstractmethod
    def from_bits(self, n: Value) -> Value:
        """The float of format f with bits n."""

    @abstractmethod
    def convert(self, a: Value, fmt: Format) -> Value:
        """A float of format f as the nearest float of `fmt`."""

    # ---- other formats, other functions, tables, rare pieces
    @abstractmethod
    def at(self, fmt: Format) -> Emitter:
        """An emitter of the same renderer at format `fmt` (values convert with `convert`)."""

    @abstractmethod
    def call(self, name: str, *args: Value, fmt: Format | None = None) -> Value:
        """Function `name` of the registry at format f (or `fmt`) on args."""

    @abstractmethod
    def table(self, name: str, width: int, words: Sequence[int]) -> Value:
        """A constant table of `width`-bit integers, defined once per name."""

    @abstractmethod
    def load(self, table: Value, index: Value) -> Value:
        """table[index] for a 32-bit integer index."""

    @abstractmethod
    def rare(self, key: str, fn: Callable, x: Value, limit: float) -> Value:
        """fn(e, x, |x|) where |x| >= limit, NaN where x is infinite or NaN, 0 elsewhere: a piece most
        inputs never need, computed only for the lanes that do (LLVM: a `noinline` function whose
        vector variants test the lanes first). `key` names it (one per key and format)."""

    # ---- written once on the primitives above
    def poly(self, x: Value, coeffs: Sequence[float]) -> Value:
        """Horner's rule with fma, coefficients lowest power first."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def below(self, a: Value, limit: float) -> Value:
        """min(a, limit), limit where a is NaN: one x86 min instruction (llvm.minnum needs three)."""
        c = self.c(limit)
        return self.select(self.cmp("<", a, c), a, c)

    def above(self, a: Value, limit: float) -> Value:
        """max(a, limit), limit where a is NaN: one x86 max instruction."""
        c = self.c(limit)
        return self.select(self.cmp(">", a, c), a, c)

    def clamp(self, a: Value, lo: float, hi: float) -> Value:
        """a limited to [lo, hi]; NaN becomes lo (callers restore NaN at the end), so no poison follows."""
        return self.min(self.max(a, self.c(lo)), self.c(hi))

    def pow2(self, n: Value) -> Value:
        """2**n for an integer n in the normal exponent range, built from its bits."""
        return self.from_bits(self.shl(self.iadd(n, self.i(self.f.bias)), self.i(self.f.mant)))

    def scale(self, p: Value, n: Value) -> Value:
        """p * 2**n in two steps, so results that overflow, underflow or are subnormal round once."""
        half = self.ashr(n, self.i(1))
        return self.mul(self.mul(p, self.pow2(half)), self.pow2(self.isub(n, half)))
