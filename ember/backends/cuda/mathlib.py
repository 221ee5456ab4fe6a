"""The CUDA C renderer of the math library (`ember.backends.math`): every function of `FUNCTIONS` for float32
and float64 as a `static __device__ __forceinline__` C function, rendered from its algorithm (written once,
against the emitter protocol) by `CEmitter`, one `const` local per operation.

The text uses only the names both preludes provide (the bit casts, `__clz`/`__clzll`, <math.h> functions
under C names) and `unsigned __int128` (float64's Payne-Hanek reduction), so it compiles for the GPU
through NVRTC (with `NVRTC_OPTIONS`: no contraction, since the algorithms place their own fmas, and 128-bit
integers) and as host C++ (`-ffp-contract=off`). Integers are held unsigned, so adds and multiplies wrap
as the protocol says (signed overflow is undefined in C); arithmetic shifts and signed comparisons cast to
the signed type of the same width. Constant tables are `__device__ const` arrays at file scope; a rare
piece (`e.rare`: Payne-Hanek for huge sin, cos and tan arguments) is a `__noinline__` function called
under an `if`, so an element takes it only when it needs it.

`math_source` returns definitions, not declarations: a translation unit includes it once, for the union
of its kernels' needs. min and max are `fminf`/`fmaxf` (IEEE minNum, one instruction on the GPU): the sign
of min(-0, +0) is left open, as the protocol allows (NumPy's own varies with the array's length), and
glibc returns NaN for a signaling NaN operand where the GPU and NumPy return the other one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ember.backends.math import FORMATS, FUNCTIONS, Format
from ember.backends.math.emitter import Emitter

# NVRTC options the math source needs: the algorithms place their own fmas (no contraction), and float64's
# Payne-Hanek reduction multiplies in 128 bits
NVRTC_OPTIONS = ("--fmad=false", "--device-int128")

_FLOAT = {"f32": "float", "f64": "double"}
_FN = {"f32": "{}f", "f64": "{}"}                           # <math.h> names: sqrtf / sqrt
_UNSIGNED = {32: "unsigned int", 64: "unsigned long long", 128: "unsigned __int128"}
_SIGNED = {32: "int", 64: "long long", 128: "__int128"}
_TO_BITS = {"f32": ("__float_as_int", "int"), "f64": ("__double_as_longlong", "long long")}
_FROM_BITS = {"f32": ("__int_as_float", "int"), "f64": ("__longlong_as_double", "long long")}
_CLZ = {32: ("__clz", "int"), 64: ("__clzll", "long long")}
_ORDERED = {"<": "{a} < {b}", "<=": "{a} <= {b}", ">": "{a} > {b}", ">=": "{a} >= {b}", "==": "{a} == {b}",
            "!=": "({a} < {b}) || ({a} > {b})"}                 # C's != is true at NaN: unordered
_UNORDERED = {"<": "!({a} >= {b})", "<=": "!({a} > {b})", ">": "!({a} <= {b})", ">=": "!({a} < {b})",
              "==": "!(({a} < {b}) || ({a} > {b}))", "!=": "{a} != {b}"}
# the float operations that are one <math.h> call, keyed by protocol name
_LIBM = {"abs": "fabs", "sqrt": "sqrt", "fma": "fma", "rint": "rint", "floor": "floor", "ceil": "ceil",
         "trunc": "trunc", "copysign": "copysign", "min": "fmin", "max": "fmax"}


def function_name(name: str, fmt: str) -> str:
    """The C name of math function `name` at format `fmt` ("f32" or "f64"): the scalar op table's convention."""
    return f"ember_{name}_{fmt}"


def _rare_name(key: str, fmt: str) -> str:
    return f"ember_math_rare_{key}_{fmt}"


def _table_name(name: str) -> str:
    return "ember_math_table_" + re.sub(r"\W", "_", name)


# ---- values and literals -------------------------------------------------------------------------------

@dataclass(frozen=True)
class CValue:
    """An operand: a local's name or a literal, with its kind ("float", "int", "bool", "table") and width."""
    text: str
    kind: str
    width: int = 0

    def __str__(self) -> str:
        return self.text

    @property
    def ctype(self) -> str:
        """The C type of the value (integers are held unsigned)."""
        if self.kind == "float":
            return _FLOAT[f"f{self.width}"]
        return "bool" if self.kind == "bool" else _UNSIGNED[self.width]


def float_literal(value: float, fmt: str) -> str:
    """An exact C literal of `value` rounded to `fmt` (hex floats; infinities and NaN through bit casts)."""
    v = float(np.float32(value)) if fmt == "f32" else float(value)
    if math.isnan(v) or math.isinf(v):
        bits = {"f32": (0x7FC00000, 0x7F800000), "f64": (0x7FF8000000000000, 0x7FF0000000000000)}[fmt]
        cast, ity = _FROM_BITS[fmt]
        word = bits[0] if math.isnan(v) else bits[1] | (1 << (31 if fmt == "f32" else 63)) * (v < 0)
        return f"{cast}(({ity}){word:#x}{'u' if fmt == 'f32' else 'ull'})"
    text = re.sub(r"\.?0*p", "p", v.hex())                 # 0x1.8000000000000p+1 -> 0x1.8p+1
    text += "f" if fmt == "f32" else ""
    return f"({text})" if text.startswith("-") else text


def int_literal(value: int, width: int) -> str:
    """An exact unsigned C literal of `value` modulo 2**width."""
    v = int(value) % (1 << width)
    if width == 32:
        return f"{v:#x}u"
    if width == 64:
        return f"{v:#x}ull"
    hi, lo = v >> 64, v & ((1 << 64) - 1)
    wide = f"(({_UNSIGNED[128]}){lo:#x}ull)"
    return wide if hi == 0 else f"((({_UNSIGNED[128]}){hi:#x}ull << 64) | {lo:#x}ull)"


# ---- the emitter ---------------------------------------------------------------------------------------

@dataclass
class _Body:
    """One C function's statements under construction and what it refers to, shared by its emitters."""
    lines: list[tuple[str, str]] = field(default_factory=list)            # (the local it defines, C text)
    count: int = 0
    calls: dict[tuple[str, str], None] = field(default_factory=dict)      # (name, fmt), in first-use order
    rares: dict[tuple[str, str], None] = field(default_factory=dict)      # (key, fmt)
    tables: dict[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)

    def fresh(self) -> str:
        self.count += 1
        return f"v{self.count}"


_RARE_PIECES: dict[tuple[str, str], tuple[Callable, float]] = {}    # (key, fmt) -> (fn, limit), as first met


class CEmitter(Emitter):
    """The emitter protocol appending C statements to one function body, bound to format `f`."""

    def __init__(self, f: Format, body: _Body | None = None):
        self.f = f
        self.body = body if body is not None else _Body()

    # helpers
    def let(self, kind: str, width: int, expr: str) -> CValue:
        """A fresh `const` local of the given kind holding `expr`."""
        value = CValue(self.body.fresh(), kind, width)
        self.body.lines.append((value.text, f"const {value.ctype} {value} = {expr};"))
        return value

    def _float(self, expr: str) -> CValue:
        return self.let("float", self.f.width, expr)

    def _libm(self, op: str, *args: CValue) -> CValue:
        return self._float(f"{_FN[self.f.name].format(_LIBM[op])}({', '.join(map(str, args))})")

    def _int(self, like: CValue, expr: str) -> CValue:
        return self.let(like.kind, like.width, expr)

    # constants
    def c(self, value: float) -> CValue:
        return CValue(float_literal(value, self.f.name), "float", self.f.width)

    def i(self, value: int, width: int | None = None) -> CValue:
        width = width or self.f.width
        return CValue(int_literal(value, width), "int", width)

    # floats
    def add(self, a, b):
        return self._float(f"{a} + {b}")

    def sub(self, a, b):
        return self._float(f"{a} - {b}")

    def mul(self, a, b):
        return self._float(f"{a} * {b}")

    def div(self, a, b):
        return self._float(f"{a} / {b}")

    def neg(self, a):
        return self._float(f"-{a}")

    def abs(self, a):
        return self._libm("abs", a)

    def sqrt(self, a):
        return self._libm("sqrt", a)

    def fma(self, a, b, c):
        return self._libm("fma", a, b, c)

    def rint(self, a):
        return self._libm("rint", a)

    def floor(self, a):
        return self._libm("floor", a)

    def ceil(self, a):
        return self._libm("ceil", a)

    def trunc(self, a):
        return self._libm("trunc", a)

    def copysign(self, a, sign):
        return self._libm("copysign", a, sign)

    def min(self, a, b):
        return self._libm("min", a, b)

    def max(self, a, b):
        return self._libm("max", a, b)

    # comparisons, selection, conditions
    def cmp(self, op, a, b):
        return self.let("bool", 1, _ORDERED[op].format(a=a, b=b))

    def ucmp(self, op, a, b):
        return self.let("bool", 1, _UNORDERED[op].format(a=a, b=b))

    def isnan(self, a):
        return self.let("bool", 1, f"{a} != {a}")

    def select(self, cond, a, b):
        return self.let(a.kind, a.width, f"{cond} ? {a} : {b}")

    def and_(self, a, b):
        return self._int(a, f"{a} && {b}" if a.kind == "bool" else f"{a} & {b}")

    def or_(self, a, b):
        return self._int(a, f"{a} || {b}" if a.kind == "bool" else f"{a} | {b}")

    def not_(self, a):
        return self._int(a, f"!{a}" if a.kind == "bool" else f"~{a}")

    def xor(self, a, b):
        return self._int(a, f"{a} != {b}" if a.kind == "bool" else f"{a} ^ {b}")

    # integers, held unsigned: wrapping
    def iadd(self, a, b):
        return self._int(a, f"{a} + {b}")

    def isub(self, a, b):
        return self._int(a, f"{a} - {b}")

    def imul(self, a, b):
        return self._int(a, f"{a} * {b}")

    def ineg(self, a):
        return self._int(a, f"{int_literal(0, a.width)} - {a}")

    def shl(self, a, n):
        return self._int(a, f"{a} << {n}")

    def ashr(self, a, n):
        return self._int(a, f"({a.ctype})(({_SIGNED[a.width]}){a} >> {n})")

    def lshr(self, a, n):
        return self._int(a, f"{a} >> {n}")

    def icmp(self, op, a, b, signed=True):
        if signed and a.kind == "int":
            a, b = (CValue(f"({_SIGNED[v.width]}){v}", "int", v.width) for v in (a, b))
        return self.let("bool", 1, f"{a} {op} {b}")

    def zext(self, a, width):
        return self.let("int", width, f"({_UNSIGNED[width]}){a}")

    def sext(self, a, width):
        return self.let("int", width, f"({_UNSIGNED[width]})({_SIGNED[width]})({_SIGNED[a.width]}){a}")

    def itrunc(self, a, width):
        return a if a.width == width else self.let("int", width, f"({_UNSIGNED[width]}){a}")

    def ctlz(self, a):
        if a.width == 128:          # the high word's count, or 64 and the low word's
            hi, lo = f"(unsigned long long)({a} >> 64)", f"(unsigned long long){a}"
            return self._int(a, f"({a.ctype})({hi} != 0ull ? __clzll((long long){hi}) : 64 + __clzll((long long){lo}))")
        clz, sty = _CLZ[a.width]
        return self._int(a, f"({a.ctype}){clz}(({sty}){a})")

    def fshl(self, a, b, n):
        s = self._int(n, f"{n} & {int_literal(a.width - 1, n.width)}")
        return self._int(a, f"{s} == 0 ? {a} : ({a} << {s}) | ({b} >> ({a.width} - {s}))")

    # conversions
    def to_int(self, a):
        return self.let("int", self.f.width, f"({_UNSIGNED[self.f.width]})({_SIGNED[self.f.width]}){a}")

    def to_float(self, n, signed=True):
        return self._float(f"({_FLOAT[self.f.name]})({_SIGNED[n.width]}){n}" if signed
                           else f"({_FLOAT[self.f.name]}){n}")

    def bits(self, a):
        cast, _ = _TO_BITS[self.f.name]
        return self.let("int", self.f.width, f"({_UNSIGNED[self.f.width]}){cast}({a})")

    def from_bits(self, n):
        cast, ity = _FROM_BITS[self.f.name]
        return self._float(f"{cast}(({ity}){n})")

    def convert(self, a, fmt):
        return a if fmt is self.f else self.let("float", fmt.width, f"({_FLOAT[fmt.name]}){a}")

    # formats, calls, tables, rare pieces
    def at(self, fmt):
        return CEmitter(fmt, self.body)

    def call(self, name: str, *args: CValue, fmt: Format | None = None) -> CValue:
        fmt = fmt or self.f
        self.body.calls[(name, fmt.name)] = None
        return self.let("float", fmt.width, f"{function_name(name, fmt.name)}({', '.join(map(str, args))})")

    def table(self, name: str, width: int, words: Sequence[int]) -> CValue:
        self.body.tables.setdefault(name, (width, tuple(int(w) % (1 << width) for w in words)))
        return CValue(_table_name(name), "table", width)

    def load(self, table, index):
        return self.let("int", table.width, f"{table}[{index}]")

    def rare(self, key: str, fn: Callable, x, limit: float):
        _RARE_PIECES.setdefault((key, self.f.name), (fn, limit))
        self.body.rares[(key, self.f.name)] = None
        out = CValue(self.body.fresh(), "float", self.f.width)
        limit_text = float_literal(limit, self.f.name)
        self.body.lines.append((out.text, f"{out.ctype} {out} = {float_literal(0.0, self.f.name)}; "
                                f"if (!({_FN[self.f.name].format('fabs')}({x}) < {limit_text})) "
                                f"{out} = {_rare_name(key, self.f.name)}({x});"))
        return out


# ---- definitions ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Definition:
    text: str
    deps: tuple[tuple[str, str, str], ...]          # ("fn" | "rare", name, fmt) it calls
    tables: dict[str, tuple[int, tuple[int, ...]]]


_DEFINITIONS: dict[tuple[str, str, str], _Definition] = {}


_LOCAL = re.compile(r"\bv\d+\b")


def _live(lines: Sequence[tuple[str, str]], result: CValue) -> list[str]:
    """The statements the result depends on: algorithms compute pieces some formats never use, and an
    unused local is a warning (an error under -Werror)."""
    live = {result.text}
    kept = []
    for name, text in reversed(lines):
        if name in live:
            live.update(_LOCAL.findall(text))
            kept.append(text)
    return kept[::-1]


def _render(head: str, params: Sequence[CValue], e: CEmitter, result: CValue,
            prologue: Sequence[str] = ()) -> _Definition:
    """The definition `head(params) { statements; return result; }`, its dead statements dropped and its
    unused parameters unnamed (an unused name is a warning)."""
    body = e.body
    statements = [*prologue, *_live(body.lines, result)]
    code = "\n".join([*statements, str(result)])
    named = ", ".join(f"const {p.ctype}" + (f" {p}" if re.search(rf"\b{p}\b", code) else "") for p in params)
    text = "\n".join([f"{head}({named}) {{", *(f"  {s}" for s in statements), f"  return {result};", "}"])
    used = set(re.findall(r"\bember_\w+", "\n".join(statements)))     # what dead statements named is not needed
    deps = tuple(("fn", n, f) for n, f in body.calls if function_name(n, f) in used)
    deps += tuple(("rare", k, f) for k, f in body.rares if _rare_name(k, f) in used)
    tables = {n: t for n, t in body.tables.items() if _table_name(n) in used}
    return _Definition(text, deps, tables)


def _function_definition(name: str, fmt: str) -> _Definition:
    """`name` at `fmt` as a forced-inline device function of its format's register type."""
    arity, algorithm = FUNCTIONS[name]
    f = _format(fmt)
    ty = _FLOAT[fmt]
    params = [CValue(f"a{k}", "float", f.width) for k in range(arity)]
    e = CEmitter(f)
    result = algorithm(e, *params)
    return _render(f"static __device__ __forceinline__ {ty} {function_name(name, fmt)}", params, e, result)


def _rare_definition(key: str, fmt: str) -> _Definition:
    """Rare piece `key` at `fmt`: x - x (NaN) for infinities and NaN, else fn(e, x, |x|); its callers call it
    only where |x| >= limit or x is not finite."""
    fn, _ = _RARE_PIECES[(key, fmt)]
    f = _format(fmt)
    ty = _FLOAT[fmt]
    x, ax = CValue("x", "float", f.width), CValue("ax", "float", f.width)
    e = CEmitter(f)
    result = fn(e, x, ax)
    prologue = (f"const {ty} ax = {_FN[fmt].format('fabs')}(x);",
                f"if (!(ax < {float_literal(math.inf, fmt)})) return x - x;")
    return _render(f"static __device__ __noinline__ {ty} {_rare_name(key, fmt)}", [x], e, result, prologue)


def _format(fmt: str) -> Format:
    for f in FORMATS.values():
        if f.name == fmt:
            return f
    raise ValueError(f"the math library's formats are f32 and f64, not {fmt!r}")


def _definition(node: tuple[str, str, str]) -> _Definition:
    if node not in _DEFINITIONS:
        kind, name, fmt = node
        _DEFINITIONS[node] = (_function_definition if kind == "fn" else _rare_definition)(name, fmt)
    return _DEFINITIONS[node]


def _table_text(name: str, width: int, words: Sequence[int]) -> str:
    suffix = "u" if width == 32 else "ull"
    rows = [", ".join(f"{w:#x}{suffix}" for w in words[k:k + 6]) for k in range(0, len(words), 6)]
    return (f"static __device__ const {_UNSIGNED[width]} {_table_name(name)}[{len(words)}] = {{\n  "
            + ",\n  ".join(rows) + "\n};")


def math_source(needed: Iterable[tuple[str, str]]) -> str:
    """The C definitions of every needed (name, fmt) and of everything they call: tables first, then each
    function once, callees before callers."""
    order: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str, str]] = set()

    def visit(node):
        if node in seen:
            return
        seen.add(node)
        for dep in _definition(node).deps:
            visit(dep)
        order.append(node)

    for name, fmt in sorted(set(needed)):       # one text per set of needs, whatever their order (kernel caches)
        if name not in FUNCTIONS:
            raise ValueError(f"the math library has no function {name!r}")
        visit(("fn", name, _format(fmt).name))
    tables: dict[str, tuple[int, tuple[int, ...]]] = {}
    for node in order:
        for name, table in _definition(node).tables.items():
            tables.setdefault(name, table)
    parts = [_table_text(name, *table) for name, table in tables.items()]
    parts += [_definition(node).text for node in order]
    return "\n\n".join(parts) + "\n" if parts else ""
