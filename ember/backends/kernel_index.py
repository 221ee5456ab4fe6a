"""Index expressions of the kernel description: small immutable trees over the loop variables.

Built only through the constructors below, which simplify as they build (x*1, x+0, sums kept in a
canonical linear form, floordiv/mod folded when interval bounds prove them exact, clamps and
comparisons dropped when the bounds decide them), so renderers emit compact code. floordiv and mod
only ever see non-negative operands (callers clamp first), so C's truncating division renders them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

INF = math.inf


@dataclass(frozen=True)
class Ix:
    """`op` is one of var, const, value, add, mul, floordiv, mod, clamp, lt, ge, eq, and; `args` its
    operands (var: (axis, extent); const: (int,); value: (scalar op id, lo, hi): a data-dependent
    index read from the op DAG, as gather's)."""

    op: str
    args: tuple

    def __str__(self) -> str:
        return _FMT[self.op](self.args)


def _paren(s: str) -> str:
    return s if s.isidentifier() or s.lstrip("-").isdigit() or s.startswith("clamp") else f"({s})"


_FMT = {
    "var": lambda a: f"i{a[0]}",
    "const": lambda a: str(int(a[0])) if not isinstance(a[0], bool) else str(a[0]).lower(),
    "value": lambda a: f"%{a[0]}",
    "add": lambda a: " + ".join(str(x) for x in a).replace("+ -", "- "),
    "mul": lambda a: f"{_paren(str(a[0]))}*{a[1]}",
    "floordiv": lambda a: f"{_paren(str(a[0]))} // {a[1]}",
    "mod": lambda a: f"{_paren(str(a[0]))} % {a[1]}",
    "clamp": lambda a: f"clamp({a[0]}, {a[1]}, {a[2]})",
    "lt": lambda a: f"{_paren(str(a[0]))} < {a[1]}",
    "ge": lambda a: f"{_paren(str(a[0]))} >= {a[1]}",
    "eq": lambda a: f"{_paren(str(a[0]))} == {a[1]}",
    "and": lambda a: " && ".join(_paren(str(x)) for x in a),
}


def var(axis: int, extent: int) -> Ix:
    return Ix("var", (axis, extent))


def const(c) -> Ix:
    return Ix("const", (c if isinstance(c, bool) else int(c),))


TRUE, FALSE = const(True), const(False)


def value(op_id: int, lo: float = -INF, hi: float = INF) -> Ix:
    """The integer a scalar op computes, used as an index (lo/hi: what is known of its range)."""
    return Ix("value", (op_id, lo, hi))


def bounds(x: Ix) -> tuple[float, float]:
    """Inclusive interval of the values `x` takes."""
    op, a = x.op, x.args
    if op == "var":
        return 0, a[1] - 1
    if op == "const":
        return int(a[0]), int(a[0])
    if op == "value":
        return a[1], a[2]
    if op == "add":
        bs = [bounds(t) for t in a]
        return sum(b[0] for b in bs), sum(b[1] for b in bs)
    if op == "mul":
        lo, hi = bounds(a[0])
        ends = (lo * a[1], hi * a[1])
        return min(ends), max(ends)
    if op == "floordiv":
        lo, hi = bounds(a[0])
        return lo // a[1], hi // a[1]
    if op == "mod":
        return 0, a[1] - 1
    if op == "clamp":
        lo, hi = bounds(a[0])
        return max(lo, a[1]), min(hi, a[2])
    return 0, 1  # comparisons and `and`


# --- linear form: {atom: coefficient} plus a constant --------------------------------------------

def _linear(x: Ix) -> tuple[dict, int]:
    if x.op == "const" and not isinstance(x.args[0], bool):
        return {}, x.args[0]
    if x.op == "add":
        terms: dict = {}
        k = 0
        for t in x.args:
            tt, tk = _linear(t)
            for atom, c in tt.items():
                terms[atom] = terms.get(atom, 0) + c
            k += tk
        return terms, k
    if x.op == "mul":
        tt, tk = _linear(x.args[0])
        return {atom: c * x.args[1] for atom, c in tt.items()}, tk * x.args[1]
    return {x: 1}, 0


def _from_linear(terms: dict, k: int) -> Ix:
    parts = [atom if c == 1 else Ix("mul", (atom, c)) for atom, c in sorted(terms.items(), key=_order) if c]
    if k or not parts:
        parts.append(const(k))
    return parts[0] if len(parts) == 1 else Ix("add", tuple(parts))


def _order(item) -> tuple:
    atom = item[0]
    return (0, atom.args[0]) if atom.op == "var" else (1, str(atom))


def add(*xs: Ix | int) -> Ix:
    terms: dict = {}
    k = 0
    for x in xs:
        tt, tk = _linear(x if isinstance(x, Ix) else const(x))
        for atom, c in tt.items():
            terms[atom] = terms.get(atom, 0) + c
        k += tk
    return _from_linear(terms, k)


def mul(x: Ix, c: int) -> Ix:
    terms, k = _linear(x)
    return _from_linear({a: v * c for a, v in terms.items()}, k * c)


def _split(x: Ix, g: int):
    """x = g * big + small with small's bounds in [0, g): (big, small), or None when no such split."""
    terms, k = _linear(x)
    big = {a: c // g for a, c in terms.items() if c % g == 0}
    small = {a: c for a, c in terms.items() if c % g}
    small_ix = _from_linear(small, k % g)
    lo, hi = bounds(small_ix)
    big_ix = _from_linear(big, k // g)
    if lo >= 0 and hi < g and bounds(big_ix)[0] >= 0:
        return big_ix, small_ix
    return None


def _divisors(x: Ix, c: int) -> list[int]:
    terms, _ = _linear(x)
    return sorted({g for g in (math.gcd(c, abs(v)) for v in terms.values() if v) if g > 1} | {c}, reverse=True)


def floordiv(x: Ix, c: int) -> Ix:
    """floor(x / c) for x >= 0, c > 0."""
    assert c > 0 and bounds(x)[0] >= 0, "floordiv of a possibly negative index"
    if c == 1:
        return x
    lo, hi = bounds(x)
    if lo // c == hi // c:
        return const(lo // c)
    for g in _divisors(x, c):
        split = _split(x, g)
        if split is not None:
            return split[0] if g == c else floordiv(split[0], c // g)
    return Ix("floordiv", (x, c))


def mod(x: Ix, c: int) -> Ix:
    """x mod c for x >= 0, c > 0."""
    assert c > 0 and bounds(x)[0] >= 0, "mod of a possibly negative index"
    lo, hi = bounds(x)
    if c == 1:
        return const(0)
    if hi < c:
        return x
    for g in _divisors(x, c):
        split = _split(x, g)
        if split is not None:
            return split[1] if g == c else add(mul(mod(split[0], c // g), g), split[1])
    return Ix("mod", (x, c))


def clamp(x: Ix, lo: int, hi: int) -> Ix:
    """x limited to [lo, hi] (hi >= lo)."""
    xlo, xhi = bounds(x)
    if xlo >= lo and xhi <= hi:
        return x
    if xlo >= hi:
        return const(hi)
    if xhi <= lo:
        return const(lo)
    return Ix("clamp", (x, lo, hi))


def lt(x: Ix, c: int) -> Ix:
    lo, hi = bounds(x)
    return TRUE if hi < c else FALSE if lo >= c else Ix("lt", (x, c))


def ge(x: Ix, c: int) -> Ix:
    lo, hi = bounds(x)
    return TRUE if lo >= c else FALSE if hi < c else Ix("ge", (x, c))


def eq(x: Ix, c: int) -> Ix:
    lo, hi = bounds(x)
    if lo == hi == c:
        return TRUE
    return FALSE if c < lo or c > hi else Ix("eq", (x, c))


def and_(*xs: Ix) -> Ix:
    if FALSE in xs:
        return FALSE
    rest = tuple(dict.fromkeys(x for x in xs if x != TRUE))
    return TRUE if not rest else rest[0] if len(rest) == 1 else Ix("and", rest)


# --- NumPy evaluation (the reference evaluator) ----------------------------------------------------

def evaluate(x: Ix, loop_vars, op_values):
    """`x` as an int64 (or bool) NumPy array over the loop space, vectorized."""
    op, a = x.op, x.args
    if op == "var":
        return loop_vars[a[0]]
    if op == "const":
        return np.bool_(a[0]) if isinstance(a[0], bool) else np.int64(a[0])
    if op == "value":
        return np.asarray(op_values[a[0]]).astype(np.int64)
    args = [evaluate(t, loop_vars, op_values) if isinstance(t, Ix) else t for t in a]
    return _EVAL[op](*args)


_EVAL = {
    "add": lambda *xs: sum(xs[1:], xs[0]),
    "mul": lambda x, c: x * c,
    "floordiv": lambda x, c: x // c,
    "mod": lambda x, c: x % c,
    "clamp": lambda x, lo, hi: np.clip(x, lo, hi),
    "lt": lambda x, c: x < c,
    "ge": lambda x, c: x >= c,
    "eq": lambda x, c: x == c,
    "and": lambda *xs: np.logical_and.reduce(np.broadcast_arrays(*xs)),
}
