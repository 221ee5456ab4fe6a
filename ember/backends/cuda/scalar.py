"""The scalar op table of the CUDA renderer: one rule per elementwise primitive (the keys of the LLVM
table), rendering a C expression over register values (`types.register_type`: float16 held as float).

A rule is `(args, operand dtype, result dtype, params, need) -> str`; each of `args` is a C variable or
literal and may appear several times. Rules match the primitive's NumPy reference bit for bit as the
LLVM table does: float16 ops compute in float32 and round with `ember_rh`, integer arithmetic wraps
through unsigned types (signed overflow is UB in C), division never divides by zero or INT_MIN by -1,
float -> int conversions give x86's results (the GPU's saturating cvt is never reached out of range),
and math-library primitives call `ember_<name>_<f32|f64>` (from the CUDA math renderer), recording
`(name, format)` in `need`. Nothing assumes fast math: the kernels compile with --fmad=false.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ember.backends.cuda.types import register_type
from ember.backends.llvm.scalar import MATH_LIBRARY
from ember.backends.math import FLOAT16_IN_FLOAT32
from ember.tracer import prims as P
from ember.tracer.primitive import Primitive, primitives

_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_BOOL = np.dtype(bool)

# A rule: (args, operand dtype, result dtype, params, need) -> C expression.
Rule = Callable[[Sequence[str], np.dtype, np.dtype, dict, set], str]


# --- constants ---------------------------------------------------------------------------------------

def constant(value, dtype) -> str:
    """`value` as a C literal of `dtype`'s register type, bits kept: -0.0, infinities and NaN payloads
    through bit casts, other floats exactly (hex floats), INT_MIN without overflowing a literal."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "true" if bool(value) else "false"
    if dtype.kind == "f":
        return _float_constant(np.asarray(value, dtype))
    return _int_constant(int(value), dtype)


def _float_constant(x: np.ndarray) -> str:
    """A float16 value is written as the float32 it is held in (payload bits moved up, not quieted)."""
    double = x.dtype == _F64
    suffix = "" if double else "f"
    if not np.isfinite(x):
        bits = int(x.view(np.uint64)) if double else _register_bits32(x)
        if double:
            return f"__longlong_as_double((long long){bits:#x}ULL)"
        return f"__int_as_float((int){bits:#x}u)"
    v = float(x)
    if v == 0.0:
        return f"(-0.0{suffix})" if np.signbit(x) else f"0.0{suffix}"
    if v.is_integer() and abs(v) < 2.0**53:
        text = f"{int(v)}.0{suffix}"
    else:
        text = v.hex() + suffix
    return f"({text})" if v < 0 else text


def _register_bits32(x: np.ndarray) -> int:
    """The float32 bits holding a float32 or float16 value; a float16 NaN keeps its payload."""
    if x.dtype == _F32:
        return int(x.view(np.uint32))
    h = int(x.view(np.uint16))
    return ((h & 0x8000) << 16) | 0x7F800000 | ((h & 0x3FF) << 13)


def _int_constant(value: int, dtype: np.dtype) -> str:
    bits = 8 * dtype.itemsize
    value &= (1 << bits) - 1
    if dtype.kind == "i" and value >> (bits - 1):
        value -= 1 << bits
    suffix = ("u" if dtype.kind == "u" else "") + ("LL" if bits == 64 else "")
    if value == -(1 << (bits - 1)) and bits >= 32:  # -2147483648 is the negation of a too-wide literal
        text = f"({value + 1}{suffix} - 1)"
    else:
        text = f"({value}{suffix})" if value < 0 else f"{value}{suffix}"
    return f"(({register_type(dtype)}){text})" if bits < 32 else text


# --- helpers -----------------------------------------------------------------------------------------

# a C name, or a number literal (parenthesized if negative) as `constant` writes it
_SIMPLE = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\(?-?(0[xX][0-9a-fA-F.]+[pP][-+]?[0-9]+|[0-9]+(\.[0-9]*)?)[fFuUlL]*\)?")


def _let(expr: str, ctype: str, body: Callable[[str], str]) -> str:
    """`body(v)` with `v` bound to `expr`: substituted when `expr` is a name or literal, else an
    immediately invoked lambda, so a compound expression used several times is evaluated once."""
    if _SIMPLE.fullmatch(expr):
        return body(expr)
    return f"([]({ctype} v) {{ return {body('v')}; }}({expr}))"


def _cast(ctype: str, expr: str) -> str:
    return f"(({ctype})({expr}))"


def _wide(dt: np.dtype) -> str:
    """The unsigned type integer arithmetic of `dt` wraps in (never int: 8- and 16-bit operands would
    promote to int, where a product can overflow)."""
    return "unsigned long long" if dt.itemsize == 8 else "unsigned int"


def _libm(name: str, dt: np.dtype) -> str:
    """The <math.h> name of `name` at `dt`'s register type (fabsf for float16 and float32)."""
    return name if dt == _F64 else name + "f"


def _round16(expr: str, dt: np.dtype) -> str:
    """A float16 result rounded to float16 (an inexact float32 op on float16 values), else `expr`."""
    return f"ember_rh({expr})" if dt == _F16 else expr


def _by_kind(**rules: Rule) -> Rule:
    """A rule choosing its renderer by the operand dtype's kind: f, i (signed), u (unsigned), b."""
    def rule(a, dt, out, params, need):
        fn = rules.get(dt.kind)
        if fn is None:
            raise TypeError(f"the cuda scalar table has no rule for {dt.name} operands here")
        return fn(a, dt, out, params, need)
    return rule


def _infix(op: str, rounds: bool = False) -> Rule:
    """`(x op y)`, rounded to float16 where `rounds` (float arithmetic)."""
    def rule(a, dt, out, params, need):
        text = f"({a[0]} {op} {a[1]})"
        return _round16(text, dt) if rounds else text
    return rule


def _wrapping(op: str) -> Rule:
    """Integer + - * wrapping modulo 2**bits, computed in the unsigned `_wide` type."""
    def rule(a, dt, out, params, need):
        w = _wide(dt)
        return _cast(register_type(dt), f"({w}){a[0]} {op} ({w}){a[1]}")
    return rule


def _bitwise(op: str) -> Rule:
    return lambda a, dt, out, params, need: _cast(register_type(dt), f"{a[0]} {op} {a[1]}")


def _call(name: str) -> Rule:
    """A <math.h> function exact on float16 values (floor, fabs, copysign...): no rounding needed."""
    return lambda a, dt, out, params, need: f"{_libm(name, dt)}({', '.join(a)})"


def _rounded_call(name: str) -> Rule:
    return lambda a, dt, out, params, need: _round16(f"{_libm(name, dt)}({', '.join(a)})", dt)


def _identity(a, dt, out, params, need):
    return a[0]


# --- arithmetic --------------------------------------------------------------------------------------

def _int_div(a, dt, out, params, need):
    """Truncation toward zero, as the reference; x / 0 = 0 and x / -1 = -x (wrapping)."""
    x, y = a
    t = register_type(dt)
    if dt.kind == "u":
        return _cast(t, f"{y} == 0 ? 0 : {x} / {y}")
    w = _wide(dt)
    return _cast(t, f"{y} == 0 ? ({w})0 : {y} == -1 ? ({w})0 - ({w}){x} : ({w})({x} / {y})")


def _int_rem(a, dt, out, params, need):
    """C fmod on ints (the dividend's sign); x % 0 = 0 and x % -1 = 0 as NumPy (a divisor of 1)."""
    x, y = a
    minus1 = f" || {y} == -1" if dt.kind == "i" else ""
    return _cast(register_type(dt), f"{y} == 0{minus1} ? 0 : {x} % {y}")


def _int_pow(a, dt, out, params, need):
    """Square-and-multiply while bits of y remain (wrapping, as NumPy). NumPy raises for a negative
    exponent; here, as in the LLVM table, the result is 1 / x**-y truncated: 1 for x = 1, +-1 for
    x = -1, else 0."""
    t, w = register_type(dt), _wide(dt)
    negative = (f"if (y < 0) return ({t})(x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0); "
                if dt.kind == "i" else "")
    body = (f"[]({t} x, {t} y) -> {t} {{ {negative}{w} acc = 1, base = ({w})x, e = ({w})y; "
            f"while (e) {{ if (e & 1) acc *= base; base *= base; e >>= 1; }} return ({t})acc; }}")
    return f"({body}({a[0]}, {a[1]}))"


def _float_extreme(pred: str) -> Rule:
    """np.maximum / np.minimum: `x` when it wins or is NaN, else `y`, so NaN propagates. Of two equal
    zeros NumPy returns the second operand for float32/64 and the first for float16 (its loops differ)."""
    def rule(a, dt, out, params, need):
        x, y = a
        wins = pred + "=" if dt == _F16 else pred
        return f"(({x} {wins} {y} || {x} != {x}) ? {x} : {y})"
    return rule


def _int_extreme(pred: str) -> Rule:
    return lambda a, dt, out, params, need: _cast(register_type(dt), f"{a[0]} {pred} {a[1]} ? {a[0]} : {a[1]}")


def _int_neg(a, dt, out, params, need):
    w = _wide(dt)
    return _cast(register_type(dt), f"({w})0 - ({w}){a[0]}")


def _int_abs(a, dt, out, params, need):
    """abs(INT_MIN) = INT_MIN (wrapping), as NumPy."""
    (x,), w = a, _wide(dt)
    return _cast(register_type(dt), f"{x} < 0 ? ({w})0 - ({w}){x} : ({w}){x}")


def _float_sign(a, dt, out, params, need):
    """1, -1, +0 for either zero (NumPy), NaN kept."""
    (x,) = a
    zero, one, minus = constant(0.0, dt), constant(1.0, dt), constant(-1.0, dt)
    return f"({x} > {zero} ? {one} : {x} < {zero} ? {minus} : {x} == {zero} ? {zero} : {x})"


def _int_sign(a, dt, out, params, need):
    (x,) = a
    return _cast(register_type(dt), f"({x} > 0) - ({x} < 0)")


def _uint_sign(a, dt, out, params, need):
    return _cast(register_type(dt), f"{a[0]} != 0")


# --- bits ------------------------------------------------------------------------------------------

def _same_width(dt: np.dtype, kind: str) -> str:
    """The C type of the signed ("i") or unsigned ("u") integer as wide as `dt`."""
    return register_type(np.dtype(f"{kind}{dt.itemsize}"))


def _in_range(y: str, dt: np.dtype) -> str:
    """Whether a shift amount lies in [0, bits), read as unsigned (a negative one does not)."""
    return f"(({_same_width(dt, 'u')}){y} < {8 * dt.itemsize})"


def _shift_or_zero(op: str) -> Rule:
    """<< or logical >> on the bits as unsigned (in the `_wide` type: no signed overflow, no sign
    fill), 0 for an amount outside [0, bits) as lax (C leaves such shifts undefined)."""
    def rule(a, dt, out, params, need):
        x, y = a
        u, w = _same_width(dt, "u"), _wide(dt)
        return _cast(register_type(dt), f"{_in_range(y, dt)} ? ({w})({u}){x} {op} ({u}){y} : ({w})0")
    return rule


def _shift_right_arithmetic(a, dt, out, params, need):
    """>> on the bits as signed by at most bits - 1: a larger or negative amount leaves the sign fill."""
    x, y = a
    amount = f"({_in_range(y, dt)} ? ({_same_width(dt, 'u')}){y} : {8 * dt.itemsize - 1})"
    return _cast(register_type(dt), f"({_same_width(dt, 'i')}){x} >> {amount}")


def _population_count(a, dt, out, params, need):
    u = _same_width(dt, "u")
    count = f"__popcll(({u}){a[0]})" if dt.itemsize == 8 else f"__popc((unsigned int)({u}){a[0]})"
    return _cast(register_type(dt), count)


def _clz(a, dt, out, params, need):
    """CUDA counts over 32 or 64 bits: a narrower integer's count is less the bits it is widened by."""
    u = _same_width(dt, "u")
    if dt.itemsize == 8:
        return _cast(register_type(dt), f"__clzll((long long)({u}){a[0]})")
    return _cast(register_type(dt), f"__clz((int)({u}){a[0]}) - {32 - 8 * dt.itemsize}")


# float <- bits and bits <- float, by width (float16 is held as float: its bits convert exactly)
_FROM_BITS = {2: "ember_h2f((ember_half)({}))", 4: "__int_as_float((int)({}))",
              8: "__longlong_as_double((long long)({}))"}
_TO_BITS = {2: "ember_f2h({})", 4: "__float_as_int({})", 8: "__double_as_longlong({})"}


def _bitcast(a, dt, out, params, need):
    """The same bits as `out` (same width): integers convert (modulo 2**bits), floats by CUDA's casts."""
    x = a[0]
    if dt.kind == "f":
        x = _TO_BITS[dt.itemsize].format(x)
    if out.kind == "f":
        return _FROM_BITS[out.itemsize].format(x)
    return _cast(register_type(out), x)


def _rsqrt(a, dt, out, params, need):
    """1 / sqrt(x), two correctly rounded ops as the reference (no approximate rsqrt); float16 rounds
    after each, as NumPy's float16 loops."""
    root = _round16(f"{_libm('sqrt', dt)}({a[0]})", dt)
    return _round16(f"({constant(1.0, dt)} / {root})", dt)


def _is_finite(a, dt, out, params, need):
    return f"({_libm('fabs', dt)}({a[0]}) < {constant(np.inf, dt)})"


def _math(name: str) -> Rule:
    """The math renderer's `ember_<name>_<f32|f64>`; float16 computes in float32 (by the math library's
    FLOAT16_IN_FLOAT32 function where it has one) and rounds once, as NumPy's float16 loops."""
    def rule(a, dt, out, params, need):
        fn = FLOAT16_IN_FLOAT32.get(name, name) if dt == _F16 else name
        fmt = "f64" if dt == _F64 else "f32"
        need.add((fn, fmt))
        return _round16(f"ember_{fn}_{fmt}({', '.join(a)})", dt)
    return rule


def _float_pow(a, dt, out, params, need):
    """x ** n for a literal n of 2, 3, 4 or -1 (written by `constant`) by multiplying, as the LLVM
    table (at most two roundings; float16 multiplies in float32 and rounds once), else the math
    library's pow."""
    x, n = a[0], _pow_literal(a[1], dt)
    if n is None:
        return _math("pow")(a, dt, out, params, need)
    sq = f"({x} * {x})"
    product = {2: sq, 3: f"({sq} * {x})", 4: f"({sq} * {sq})", -1: f"({constant(1.0, dt)} / {x})"}[n]
    return _round16(product, dt)


def _pow_literal(text: str, dt: np.dtype) -> int | None:
    """The exponent n in (2, 3, 4, -1) that `text` is `constant(n, dt)` of, else None."""
    return next((n for n in (2, 3, 4, -1) if text.strip() == constant(float(n), dt)), None)


def _compare(op: str) -> Rule:
    """C's float compares are IEEE's: ordered (NaN compares false) except `!=`; ints compare at their
    own signedness (promotion keeps 8- and 16-bit values; both operands share a type)."""
    return lambda a, dt, out, params, need: f"({a[0]} {op} {a[1]})"


def _convert(a, dt, out, params, need):
    return convert(a[0], dt, out)


def _select(a, dt, out, params, need):
    return f"({a[0]} ? {a[1]} : {a[2]})"


OPS: dict[Primitive, Rule] = {
    P.add_p: _by_kind(f=_infix("+", rounds=True), i=_wrapping("+"), u=_wrapping("+"), b=_infix("||")),
    P.sub_p: _by_kind(f=_infix("-", rounds=True), i=_wrapping("-"), u=_wrapping("-")),
    P.mul_p: _by_kind(f=_infix("*", rounds=True), i=_wrapping("*"), u=_wrapping("*"), b=_infix("&&")),
    P.div_p: _by_kind(f=_infix("/", rounds=True), i=_int_div, u=_int_div),
    P.rem_p: _by_kind(f=_call("fmod"), i=_int_rem, u=_int_rem),  # fmod is exact: no float16 rounding
    P.pow_p: _by_kind(f=_float_pow, i=_int_pow, u=_int_pow),
    P.max_p: _by_kind(f=_float_extreme(">"), i=_int_extreme(">"), u=_int_extreme(">"), b=_infix("||")),
    P.min_p: _by_kind(f=_float_extreme("<"), i=_int_extreme("<"), u=_int_extreme("<"), b=_infix("&&")),
    P.eq_p: _compare("=="), P.ne_p: _compare("!="), P.lt_p: _compare("<"),
    P.le_p: _compare("<="), P.gt_p: _compare(">"), P.ge_p: _compare(">="),
    P.and_p: _by_kind(i=_bitwise("&"), u=_bitwise("&"), b=_infix("&&")),
    P.or_p: _by_kind(i=_bitwise("|"), u=_bitwise("|"), b=_infix("||")),
    P.not_p: _by_kind(i=lambda a, dt, *_: _cast(register_type(dt), f"~{a[0]}"),
                      u=lambda a, dt, *_: _cast(register_type(dt), f"~{a[0]}"),
                      b=lambda a, *_: f"(!{a[0]})"),
    P.xor_p: _by_kind(i=_bitwise("^"), u=_bitwise("^"), b=_infix("!=")),
    P.shift_left_p: _by_kind(i=_shift_or_zero("<<"), u=_shift_or_zero("<<")),
    P.shift_right_logical_p: _by_kind(i=_shift_or_zero(">>"), u=_shift_or_zero(">>")),
    P.shift_right_arithmetic_p: _by_kind(i=_shift_right_arithmetic, u=_shift_right_arithmetic),
    P.population_count_p: _by_kind(i=_population_count, u=_population_count),
    P.clz_p: _by_kind(i=_clz, u=_clz),
    P.neg_p: _by_kind(f=lambda a, *_: f"(-{a[0]})", i=_int_neg, u=_int_neg),
    P.abs_p: _by_kind(f=_call("fabs"), i=_int_abs, u=_identity),
    P.sign_p: _by_kind(f=_float_sign, i=_int_sign, u=_uint_sign),
    P.floor_p: _by_kind(f=_call("floor")),
    P.ceil_p: _by_kind(f=_call("ceil")),
    P.round_p: _by_kind(f=_call("rint")),  # half to even (the default rounding mode), as np.round
    P.sqrt_p: _by_kind(f=_rounded_call("sqrt")),
    P.rsqrt_p: _by_kind(f=_rsqrt),
    P.is_finite_p: _by_kind(f=_is_finite),
    P.convert_element_type_p: _convert,
    P.bitcast_convert_type_p: _bitcast,
    P.stop_gradient_p: _identity,
    P.select_p: _select,
    **{prim: _by_kind(f=_math(prim.name)) for prim in MATH_LIBRARY},  # the math renderer's function
    P.nextafter_p: _by_kind(f=_math("nextafter")),
    P.copysign_p: _by_kind(f=_call("copysign")),
}


# --- conversions -------------------------------------------------------------------------------------

def convert(expr: str, src, dst) -> str:
    """`expr` (a register value of `src`) as `dst`, as NumPy's `astype` on x86: C casts, float64 ->
    float16 in one rounding, and out-of-range float -> int giving x86's results (not the GPU's
    saturation, not C's UB)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return expr
    return _CONVERT[_group(src), _group(dst)](expr, src, dst)


def _group(dtype: np.dtype) -> str:
    return "i" if dtype.kind in "iu" else dtype.kind


def _to_bool(x, src, dst):
    return f"({x} != {constant(0, src)})"  # NaN != 0 is true, -0.0 != 0 false: as NumPy


def _from_bool(x, src, dst):
    if dst.kind == "f":
        return f"({x} ? {constant(1, dst)} : {constant(0, dst)})"
    return _cast(register_type(dst), x)


def _int_to_int(x, src, dst):
    return _cast(register_type(dst), x)  # C++20 (and nvcc) conversions wrap modulo 2**bits


def _int_to_float(x, src, dst):
    """Correctly rounded. To float16 through float32: an int that float32 rounds lies beyond
    float16's range (|x| > 2**24 > 65520), so the double rounding changes nothing."""
    return _round16(_cast(register_type(dst), x), dst)


def _float_to_float(x, src, dst):
    if dst == _F16:
        return f"ember_h2f(ember_d2h({x}))" if src == _F64 else f"ember_rh({x})"
    return x if src == _F16 and dst == _F32 else _cast(register_type(dst), x)


def _x86_fptosi(x: str, src: np.dtype, bits: int) -> str:
    """x86's cvttss2si/cvttsd2si: truncation, and INT_MIN for NaN and out-of-range values (the C cast
    is taken only in range, where it is defined and where the GPU's saturating cvt agrees)."""
    lim = constant(2.0 ** (bits - 1), src)
    ctype = "int" if bits == 32 else "long long"
    int_min = constant(-(1 << (bits - 1)), np.dtype(f"i{bits // 8}"))
    return f"({x} >= {constant(-(2.0 ** (bits - 1)), src)} && {x} < {lim} ? ({ctype}){x} : {int_min})"


def _x86_fptoui64(x: str, src: np.dtype) -> str:
    """The C compiler's float -> uint64 on x86 (what NumPy's casts run): values from 2**63 up are
    converted after subtracting it, then the top bit is set back; NaN takes the signed path."""
    half_range = constant(2.0**63, src)
    high = _x86_fptosi(f"({x} - {half_range})", src, 64)
    return (f"({x} >= {half_range} ? (unsigned long long){high} ^ 0x8000000000000000ull"
            f" : (unsigned long long){_x86_fptosi(x, src, 64)})")


def _float_to_int(x, src, dst):
    """NumPy's float -> int casts on x86 (C casts): int8/16 and uint8/16 truncate a 32-bit conversion,
    uint32 a 64-bit one, int32/64 are the signed conversions and uint64 the unsigned sequence (see
    the LLVM table). float16 is held as float: it converts as float32."""
    src = _F32 if src == _F16 else src
    ctype = register_type(dst)

    def body(v: str) -> str:
        if dst.itemsize < 4:
            return _cast(ctype, _x86_fptosi(v, src, 32))
        if dst.kind == "i":
            return _x86_fptosi(v, src, 8 * dst.itemsize)
        if dst.itemsize == 4:
            return _cast(ctype, _x86_fptosi(v, src, 64))
        return _x86_fptoui64(v, src)
    return _let(x, register_type(src), body)


_CONVERT = {
    ("b", "i"): _from_bool, ("b", "f"): _from_bool,
    ("i", "b"): _to_bool, ("f", "b"): _to_bool,
    ("i", "i"): _int_to_int, ("i", "f"): _int_to_float,
    ("f", "f"): _float_to_float, ("f", "i"): _float_to_int,
}


# --- kernel ops --------------------------------------------------------------------------------------

def emit_op(op, args: Sequence[str], arg_dtypes: Sequence, need: set) -> str:
    """The C expression of kernel op `op` (an elementwise primitive or select) over `args`, the
    operands' register values of dtypes `arg_dtypes` (select's branches give its dtype). Math-library
    functions it calls are added to `need` as (name, "f32" | "f64")."""
    prim = primitives.get(op.prim)
    rule = OPS.get(prim)
    if rule is None:
        raise NotImplementedError(f"the cuda backend has no scalar rule for primitive {op.prim!r}")
    return rule(list(args), np.dtype(arg_dtypes[-1]), np.dtype(op.dtype), dict(op.params), need)
