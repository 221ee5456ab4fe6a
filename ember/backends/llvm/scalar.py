"""The scalar op table of the LLVM renderer: one rule per elementwise primitive (keyed by the
`Primitive`; a kernel `Op` names it), at every dtype.

`emit_op(builder, op, args, arg_dtypes)` emits one kernel `Op` on register values (`types.value_type`
form: a bool is i1). Rules match the primitive's NumPy reference bit for bit on ints, bools and the
correctly rounded float ops (+ - * / sqrt, rounding, compares, conversions): integer division never
divides by zero or INT_MIN by -1 (UB in LLVM), float max/min propagate NaN with NumPy's signed zeros,
and float -> int conversions give what NumPy gives on x86 instead of LLVM's poison. Transcendentals
call `mathlib.call_math` (float16 through float32). No fast-math flags: results must match NumPy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from llvmlite import ir

from ember.backends.llvm.entry import libm_symbols
from ember.backends.llvm.types import DOUBLE, FLOAT, HALF, I1, I32, value_type
from ember.tracer import prims as P
from ember.tracer.primitive import Primitive, primitives

_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_BOOL = np.dtype(bool)

# A rule: (builder, args, operand dtype, result dtype) -> result.
Rule = Callable[[ir.IRBuilder, Sequence[ir.Value], np.dtype, np.dtype], ir.Value]


# --- constants and conversions ---------------------------------------------------------------------

def constant(value, dtype) -> ir.Constant:
    """`value` as an IR constant of `dtype` in register form (bits kept: -0.0, NaN payloads)."""
    dtype = np.dtype(dtype)
    ty = value_type(dtype)
    if dtype.kind == "f":
        x = np.asarray(value, dtype)
        if np.isnan(x):  # through its bits: a NaN's payload would not survive a Python float
            return ir.Constant(ir.IntType(8 * dtype.itemsize), int(x.view(f"u{dtype.itemsize}"))).bitcast(ty)
        return ir.Constant(ty, float(x))
    if dtype.kind == "b":
        return ir.Constant(I1, int(bool(value)))
    return ir.Constant(ty, _wrap(int(value), 8 * dtype.itemsize))


def _wrap(value: int, bits: int) -> int:
    """`value` modulo 2**bits, as the signed integer of those bits (how LLVM IR writes it)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def convert(builder: ir.IRBuilder, value: ir.Value, from_dtype, to_dtype) -> ir.Value:
    """`value` of `from_dtype` as `to_dtype`, as NumPy's `astype` on x86 (C casts; out-of-range
    float -> int gives x86's results, never LLVM poison)."""
    src, dst = np.dtype(from_dtype), np.dtype(to_dtype)
    if src == dst:
        return value
    return _CONVERT[_group(src), _group(dst)](builder, value, src, dst)


def _group(dtype: np.dtype) -> str:
    return "i" if dtype.kind in "iu" else dtype.kind


def _to_bool(b, x, src, dst):
    if src.kind == "f":  # NaN is true, -0.0 false
        return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
    return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))


def _from_bool(b, x, src, dst):
    if dst.kind == "f":
        return b.select(x, constant(1, dst), constant(0, dst))
    return b.zext(x, value_type(dst))


def _int_to_int(b, x, src, dst):
    ty = value_type(dst)
    if ty.width < x.type.width:
        return b.trunc(x, ty)
    if ty.width > x.type.width:
        return b.sext(x, ty) if src.kind == "i" else b.zext(x, ty)
    return x


def _int_to_float(b, x, src, dst):
    """Correctly rounded. To float16 through float32: an int that float32 rounds lies beyond
    float16's range (|x| > 2**24 > 65520), so the double rounding changes nothing."""
    ty = FLOAT if dst == _F16 else value_type(dst)
    f = b.sitofp(x, ty) if src.kind == "i" else b.uitofp(x, ty)
    return b.fptrunc(f, HALF) if dst == _F16 else f


def _float_to_float(b, x, src, dst):
    ty = value_type(dst)
    if dst.itemsize > src.itemsize:
        return b.fpext(x, ty)
    if src == _F64 and dst == _F16:
        return _double_to_half(b, x)
    return b.fptrunc(x, ty)


def _double_to_half(b, x):
    """float64 -> float16 correctly rounded without the `__truncdfhf2` libcall (absent from the
    process): round to float32 by round-to-odd, then to float16, which is exact double rounding."""
    f = b.fptrunc(x, FLOAT)
    back = b.fpext(f, DOUBLE)
    bits = b.bitcast(f, I32)
    fabs = _intrinsic(b, "llvm.fabs", [back])
    above = b.fcmp_ordered(">", fabs, _intrinsic(b, "llvm.fabs", [x]))  # rounded away from zero
    bits = b.select(above, b.sub(bits, ir.Constant(I32, 1)), bits)
    inexact = b.fcmp_ordered("!=", back, x)
    bits = b.select(inexact, b.or_(bits, ir.Constant(I32, 1)), bits)
    return b.fptrunc(b.bitcast(bits, FLOAT), HALF)


def _x86_fptosi(b, x, bits: int):
    """x86's cvttss2si/cvttsd2si: truncation, and INT_MIN for NaN and out-of-range values."""
    ty = ir.IntType(bits)
    lim = float(2 ** (bits - 1))
    inside = b.and_(b.fcmp_ordered(">=", x, ir.Constant(x.type, -lim)),
                    b.fcmp_ordered("<", x, ir.Constant(x.type, lim)))
    # fptosi is poison outside the range; select never picks it there
    return b.select(inside, b.fptosi(x, ty), ir.Constant(ty, -(1 << (bits - 1))))


def _x86_fptoui(b, x, bits: int):
    """The C compiler's float -> unsigned on x86 (what NumPy's casts run): values from 2**(bits-1) up
    are converted after subtracting it, then the top bit is set back; NaN takes the signed path."""
    half_range = float(2 ** (bits - 1))
    big = b.fcmp_ordered(">=", x, ir.Constant(x.type, half_range))
    high = b.xor(_x86_fptosi(b, b.fsub(x, ir.Constant(x.type, half_range)), bits),
                 ir.Constant(ir.IntType(bits), -(1 << (bits - 1))))
    return b.select(big, high, _x86_fptosi(b, x, bits))


def _float_to_int(b, x, src, dst):
    """NumPy's float -> int casts on x86 (C casts): int8/16 and uint8/16 truncate a 32-bit conversion,
    uint32 a 64-bit one, int32/64 are the signed conversions and uint64 the unsigned sequence. (For
    uint32 of values outside [-2**31, 2**32) NumPy's SIMD loop body differs from its scalar tail and
    from its 1-element result; this is the scalar result, the same at every position.)"""
    if src == _F16:
        x = b.fpext(x, FLOAT)
    ty = value_type(dst)
    if dst.itemsize < 4:
        return b.trunc(_x86_fptosi(b, x, 32), ty)
    if dst.kind == "i":
        return _x86_fptosi(b, x, ty.width)
    if dst.itemsize == 4:
        return b.trunc(_x86_fptosi(b, x, 64), ty)
    return _x86_fptoui(b, x, 64)


_CONVERT = {
    ("b", "i"): _from_bool, ("b", "f"): _from_bool,
    ("i", "b"): _to_bool, ("f", "b"): _to_bool,
    ("i", "i"): _int_to_int, ("i", "f"): _int_to_float,
    ("f", "f"): _float_to_float, ("f", "i"): _float_to_int,
}


# --- helpers ---------------------------------------------------------------------------------------

def _intrinsic(b: ir.IRBuilder, name: str, args: Sequence[ir.Value], extra: Sequence[ir.Value] = ()) -> ir.Value:
    """Call the overloaded intrinsic `name` on `args` (all of one type) plus constant `extra` args."""
    ty = args[0].type
    fnty = ir.FunctionType(ty, [a.type for a in args] + [e.type for e in extra])
    return b.call(b.module.declare_intrinsic(name, [ty], fnty), [*args, *extra])


def _by_kind(**rules: Rule) -> Rule:
    """A rule choosing its emitter by the operand dtype's kind: f, i (signed), u (unsigned), b."""
    def rule(b, args, dt, out):
        fn = rules.get(dt.kind)
        if fn is None:
            raise TypeError(f"the llvm scalar table has no rule for {dt.name} operands here")
        return fn(b, args, dt, out)
    return rule


def _method(name: str, *first) -> Rule:
    """An emitter calling `IRBuilder.<name>(*first, *args)`."""
    return lambda b, a, dt, out: getattr(b, name)(*first, *a)


def _call(name: str, *extra) -> Rule:
    return lambda b, a, dt, out: _intrinsic(b, name, a, extra)


# --- arithmetic ------------------------------------------------------------------------------------

def _safe_divisor(b, x, y, dt):
    """(divisor that is never 0 nor -1 when signed, y == 0, y == -1): LLVM's sdiv/udiv/srem are UB at
    a zero divisor and at INT_MIN / -1, while NumPy gives 0 there (and INT_MIN / -1 wraps)."""
    zero = b.icmp_unsigned("==", y, ir.Constant(y.type, 0))
    minus1 = b.icmp_signed("==", y, ir.Constant(y.type, -1)) if dt.kind == "i" else ir.Constant(I1, 0)
    return b.select(b.or_(zero, minus1), ir.Constant(y.type, 1), y), zero, minus1


def _int_div(b, args, dt, out):
    """Truncation toward zero, as the reference; x / 0 = 0 and x / -1 = -x (wrapping)."""
    x, y = args
    safe, zero, minus1 = _safe_divisor(b, x, y, dt)
    q = b.sdiv(x, safe) if dt.kind == "i" else b.udiv(x, safe)
    if dt.kind == "i":
        q = b.select(minus1, b.neg(x), q)
    return b.select(zero, ir.Constant(x.type, 0), q)


def _int_rem(b, args, dt, out):
    """C fmod on ints (the dividend's sign); x % 0 = 0 and x % -1 = 0 as NumPy (a divisor of 1)."""
    x, y = args
    safe, _, _ = _safe_divisor(b, x, y, dt)
    return b.srem(x, safe) if dt.kind == "i" else b.urem(x, safe)


def _int_pow(b, args, dt, out):
    return b.call(_int_pow_function(b.module, args[0].type, dt.kind == "i"), list(args))


def _int_pow_function(module: ir.Module, ty: ir.IntType, signed: bool) -> ir.Function:
    """`internal iN @ember.ipow.<s|u>.iN(x, y)`, defined once per module: square-and-multiply while
    bits of y remain (wrapping, as NumPy). NumPy raises for a negative exponent; here the result is
    1 / x**-y truncated: 1 for x = 1, +-1 for x = -1, else 0."""
    name = f"ember.ipow.{'s' if signed else 'u'}.i{ty.width}"
    if name in module.globals:
        return module.globals[name]
    fn = ir.Function(module, ir.FunctionType(ty, [ty, ty]), name)
    fn.linkage = "internal"
    x, y = fn.args
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
    b.cbranch(b.icmp_unsigned("==", y, zero), done, loop)
    b.position_at_end(loop)
    acc, base, e = (b.phi(ty) for _ in range(3))
    for phi, init in ((acc, one), (base, x), (e, y)):
        phi.add_incoming(init, entry)
    acc2 = b.select(b.trunc(e, I1), b.mul(acc, base), acc)
    e2 = b.lshr(e, one)
    for phi, nxt in ((acc, acc2), (base, b.mul(base, base)), (e, e2)):
        phi.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("!=", e2, zero), loop, done)
    b.position_at_end(done)
    result = b.phi(ty)
    result.add_incoming(one, entry)
    result.add_incoming(acc2, loop)
    if signed:
        odd = b.trunc(y, I1)
        inverse = b.select(b.icmp_signed("==", x, one), one, b.select(
            b.icmp_signed("==", x, ir.Constant(ty, -1)), b.select(odd, ir.Constant(ty, -1), one), zero))
        result = b.select(b.icmp_signed("<", y, zero), inverse, result)
    b.ret(result)
    return fn


def _float_extreme(pred: str) -> Rule:
    """np.maximum / np.minimum: `x` when it wins or is NaN, else `y`, so NaN propagates. Of two equal
    zeros NumPy returns the second operand for float32/64 and the first for float16 (its loops differ)."""
    def rule(b, args, dt, out):
        x, y = args
        wins = b.fcmp_ordered(pred + "=" if dt == _F16 else pred, x, y)
        return b.select(b.or_(wins, b.fcmp_unordered("uno", x, x)), x, y)
    return rule


def _int_abs(b, args, dt, out):
    return _intrinsic(b, "llvm.abs", args, [ir.Constant(I1, 0)])  # abs(INT_MIN) = INT_MIN, not poison


def _float_sign(b, args, dt, out):
    """1, -1, +0 for either zero (NumPy), NaN kept."""
    (x,) = args
    zero = ir.Constant(x.type, 0.0)
    return b.select(b.fcmp_ordered(">", x, zero), ir.Constant(x.type, 1.0),
                    b.select(b.fcmp_ordered("<", x, zero), ir.Constant(x.type, -1.0),
                             b.select(b.fcmp_ordered("==", x, zero), zero, x)))


def _int_sign(b, args, dt, out):
    (x,) = args
    zero = ir.Constant(x.type, 0)
    positive = b.zext(b.icmp_signed(">", x, zero), x.type)
    return b.sub(positive, b.zext(b.icmp_signed("<", x, zero), x.type))


def _uint_sign(b, args, dt, out):
    (x,) = args
    return b.zext(b.icmp_unsigned("!=", x, ir.Constant(x.type, 0)), x.type)


def _rsqrt(b, args, dt, out):
    """1 / sqrt(x), two correctly rounded ops as the reference (no approximate rsqrt)."""
    return b.fdiv(ir.Constant(args[0].type, 1.0), _intrinsic(b, "llvm.sqrt", args))


def _is_finite(b, args, dt, out):
    fabs = _intrinsic(b, "llvm.fabs", args)
    return b.fcmp_ordered("<", fabs, ir.Constant(args[0].type, float("inf")))


def _float_pow(b, args, dt, out):
    """x ** n for a constant n of 2, 3, 4 or -1 by multiplying (at most two roundings, within pow's
    budget; float16 multiplies in float32 and rounds once), else mathlib's pow: `x ** 2` and `x ** 3`
    of every gradient need no log and exp, which also cost about 100 ms of compile time per module."""
    n = getattr(args[1], "constant", None) if isinstance(args[1], ir.Constant) else None
    if n not in (2.0, 3.0, 4.0, -1.0):
        return _math("pow")(b, args, dt, out)
    x = b.fpext(args[0], FLOAT) if dt == _F16 else args[0]
    if n == -1.0:
        y = b.fdiv(ir.Constant(x.type, 1.0), x)
    else:
        sq = b.fmul(x, x)
        y = {2.0: sq, 3.0: b.fmul(sq, x) if n == 3.0 else None, 4.0: b.fmul(sq, sq)}[n]
    return b.fptrunc(y, HALF) if dt == _F16 else y


def _math(name: str) -> Rule:
    """A mathlib function; float16 computes in float32 (by the math library's FLOAT16_IN_FLOAT32 function
    where it has one) and rounds once, as NumPy's float16 loops."""
    def rule(b, args, dt, out):
        from ember.backends.llvm.mathlib import call_math
        from ember.backends.math import FLOAT16_IN_FLOAT32

        if dt == _F16:
            wide = [b.fpext(a, FLOAT) for a in args]
            return b.fptrunc(call_math(b, FLOAT16_IN_FLOAT32.get(name, name), wide, _F32), HALF)
        return call_math(b, name, list(args), dt)
    return rule


def _compare(pred: str, float_pred: str | None = None) -> Rule:
    """Ordered float compares (NaN compares false) except `!=` (NaN != NaN); unsigned for uint and bool."""
    return _by_kind(f=lambda b, a, dt, out: (b.fcmp_unordered if float_pred else b.fcmp_ordered)(pred, *a),
                    i=_method("icmp_signed", pred), u=_method("icmp_unsigned", pred),
                    b=_method("icmp_unsigned", pred))


def _shift_in_range(b, amount) -> ir.Value:
    """Whether a shift amount lies in [0, bits), read as unsigned (a negative one does not)."""
    return b.icmp_unsigned("<", amount, ir.Constant(amount.type, amount.type.width))


def _shift_or_zero(name: str) -> Rule:
    """shl / lshr, 0 for an amount outside [0, bits) as lax: LLVM's shift gives poison there, which
    the select never picks."""
    def rule(b, args, dt, out):
        x, y = args
        return b.select(_shift_in_range(b, y), getattr(b, name)(x, y), ir.Constant(x.type, 0))
    return rule


def _shift_right_arithmetic(b, args, dt, out):
    """ashr by at most bits - 1: a larger amount (or a negative one) leaves the sign fill, as lax."""
    x, y = args
    top = ir.Constant(y.type, y.type.width - 1)
    return b.ashr(x, b.select(_shift_in_range(b, y), y, top))


def _bitcast(b, args, dt, out):
    return b.bitcast(args[0], value_type(out))


def _identity(b, args, dt, out):
    return args[0]


def _neg_int(b, args, dt, out):
    return b.neg(args[0])


def _convert(b, args, dt, out):
    return convert(b, args[0], dt, out)


def _select(b, args, dt, out):
    return b.select(*args)


# the primitives computed by the math library's algorithm of their name (atan2, logaddexp, logaddexp2, zeta and
# polygamma take two operands: _math's rule takes any arity)
MATH_LIBRARY = (P.exp_p, P.expm1_p, P.log_p, P.log1p_p, P.tanh_p, P.logistic_p, P.sin_p, P.cos_p, P.erf_p,
                P.tan_p, P.atan_p, P.asin_p, P.acos_p, P.atan2_p, P.sinh_p, P.cosh_p, P.asinh_p, P.acosh_p,
                P.atanh_p, P.cbrt_p, P.exp2_p, P.log2_p, P.log10_p, P.logaddexp_p, P.logaddexp2_p,
                P.erfc_p, P.erf_inv_p, P.lgamma_p, P.digamma_p, P.zeta_p, P.polygamma_p)

OPS: dict[Primitive, Rule] = {
    P.add_p: _by_kind(f=_method("fadd"), i=_method("add"), u=_method("add"), b=_method("or_")),
    P.sub_p: _by_kind(f=_method("fsub"), i=_method("sub"), u=_method("sub")),
    P.mul_p: _by_kind(f=_method("fmul"), i=_method("mul"), u=_method("mul"), b=_method("and_")),
    P.div_p: _by_kind(f=_method("fdiv"), i=_int_div, u=_int_div),
    P.rem_p: _by_kind(f=_method("frem"), i=_int_rem, u=_int_rem),
    P.pow_p: _by_kind(f=_float_pow, i=_int_pow, u=_int_pow),
    P.max_p: _by_kind(f=_float_extreme(">"), i=_call("llvm.smax"), u=_call("llvm.umax"), b=_method("or_")),
    P.min_p: _by_kind(f=_float_extreme("<"), i=_call("llvm.smin"), u=_call("llvm.umin"), b=_method("and_")),
    P.eq_p: _compare("=="), P.ne_p: _compare("!=", float_pred="une"), P.lt_p: _compare("<"),
    P.le_p: _compare("<="), P.gt_p: _compare(">"), P.ge_p: _compare(">="),
    P.and_p: _by_kind(i=_method("and_"), u=_method("and_"), b=_method("and_")),
    P.or_p: _by_kind(i=_method("or_"), u=_method("or_"), b=_method("or_")),
    P.not_p: _by_kind(i=_method("not_"), u=_method("not_"), b=_method("not_")),
    P.xor_p: _by_kind(i=_method("xor"), u=_method("xor"), b=_method("xor")),
    P.shift_left_p: _by_kind(i=_shift_or_zero("shl"), u=_shift_or_zero("shl")),
    P.shift_right_logical_p: _by_kind(i=_shift_or_zero("lshr"), u=_shift_or_zero("lshr")),
    P.shift_right_arithmetic_p: _by_kind(i=_shift_right_arithmetic, u=_shift_right_arithmetic),
    P.population_count_p: _by_kind(i=_call("llvm.ctpop"), u=_call("llvm.ctpop")),
    P.clz_p: _by_kind(i=_call("llvm.ctlz", ir.Constant(I1, 0)), u=_call("llvm.ctlz", ir.Constant(I1, 0))),
    P.neg_p: _by_kind(f=_method("fneg"), i=_neg_int, u=_neg_int),
    P.abs_p: _by_kind(f=_call("llvm.fabs"), i=_int_abs, u=_identity),
    P.sign_p: _by_kind(f=_float_sign, i=_int_sign, u=_uint_sign),
    P.floor_p: _by_kind(f=_call("llvm.floor")),
    P.ceil_p: _by_kind(f=_call("llvm.ceil")),
    P.round_p: _by_kind(f=_call("llvm.roundeven")),  # half to even, as np.round
    P.sqrt_p: _by_kind(f=_call("llvm.sqrt")),
    P.rsqrt_p: _by_kind(f=_rsqrt),
    P.is_finite_p: _by_kind(f=_is_finite),
    P.convert_element_type_p: _convert,
    P.bitcast_convert_type_p: _bitcast,
    P.stop_gradient_p: _identity,
    P.select_p: _select,
    **{prim: _by_kind(f=_math(prim.name)) for prim in MATH_LIBRARY},  # mathlib's algorithm of the same name
    P.nextafter_p: _by_kind(f=_math("nextafter")),     # exact bit steps, not a polynomial: not expensive
    P.copysign_p: _by_kind(f=_call("llvm.copysign")),
}


def runtime_symbols() -> dict[str, int]:
    """The C functions code from this table may call (float rem is `frem`, which LLVM lowers to
    fmod/fmodf), name -> address (kept in entry.py, which a disk-cache hit needs without this module)."""
    return dict(libm_symbols())


# Primitives whose result dtype is not their operands' (the operand dtype must be given).
_OWN_OPERAND_DTYPE = frozenset({P.eq_p, P.ne_p, P.lt_p, P.le_p, P.gt_p, P.ge_p, P.is_finite_p,
                                P.convert_element_type_p, P.bitcast_convert_type_p})


def emit_op(builder: ir.IRBuilder, op, args: Sequence[ir.Value], arg_dtypes: Sequence | None = None) -> ir.Value:
    """The IR value of kernel op `op` (an elementwise primitive or select) applied to `args`.
    `arg_dtypes` (the operands' dtypes) is needed where the IR type cannot tell: compares and
    converts of integers (signed or unsigned)."""
    prim = primitives.get(op.prim)
    rule = OPS.get(prim)
    if rule is None:
        raise NotImplementedError(f"the llvm backend has no scalar rule for primitive {op.prim!r}")
    return rule(builder, args, _operand_dtype(op, prim, args, arg_dtypes), np.dtype(op.dtype))


def _operand_dtype(op, prim, args, arg_dtypes) -> np.dtype:
    """The dtype the rule computes in: select's branch dtype, else the (common) operand dtype."""
    if arg_dtypes is not None:
        return np.dtype(arg_dtypes[-1])
    if prim not in _OWN_OPERAND_DTYPE:
        return np.dtype(op.dtype)
    ty = args[-1].type
    if ty == I1:
        return _BOOL
    if isinstance(ty, (ir.HalfType, ir.FloatType, ir.DoubleType)):
        return {HALF: _F16, FLOAT: _F32, DOUBLE: _F64}[ty]
    raise TypeError(f"emit_op({op.prim}) on {ty} operands needs arg_dtypes: an integer operand "
                    "may be signed or unsigned")
