"""The LLVM renderer of the math library (`ember.backends.math`): exp, expm1, log, log1p, tanh, logistic,
sin, cos, pow, erf, sqrt, rsqrt for float32 and float64 as inline LLVM IR.

`llvm.exp` and friends lower to scalar libm calls that the loop vectorizer leaves alone, so each function
is an `internal alwaysinline` IR function, built on first use in a module from its algorithm (written once,
against the emitter protocol, in ember/backends/math/) by `LLVMEmitter`, with no branches: a loop calling
it inlines and vectorizes. float16 callers compute in float32 and round (the scalar op table does).

The algorithms' rare pieces (`e.rare`: sin and cos's Payne-Hanek reduction from 2**16 (float32) and 2**30
(float64) on) become a separate `noinline` function with vector variants: the loop vectorizer calls one per
vector, and it does the work only when some lane needs it. Constant tables are internal globals.

Max errors (ulp of the result, tested in tests/backends/llvm/test_mathlib.py and test_trig_range.py): all
float32 functions and float64 exp and log <= 1.02 except float32 tanh (1.07) and erf (1.35) (both measured
over all 2**32 inputs), sin/cos (1.46 at any finite input: every binade of both widths is tested) and
rsqrt (1 / sqrt, as the NumPy rule: 1.47); float64 others <= 1.07. Special values, signed zeros and
overflow as NumPy; logistic is 0 where exp(-x) overflows, as the NumPy rule (SciPy's expit) and XLA give.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from llvmlite import ir

from ember.backends.llvm.types import DOUBLE, FLOAT, I32, I64
from ember.backends.math import FORMATS, FUNCTIONS, NAMES, Format
from ember.backends.math.emitter import Emitter

_TYPES = {"f32": (FLOAT, I32), "f64": (DOUBLE, I64)}      # a format's float and integer IR types
# the vector variants of a rare piece's function: the widths the loop vectorizer may call it at
_RARE_WIDTHS = {"f32": (2, 4, 8, 16, 32), "f64": (2, 4, 8, 16)}
_RARE_USERS: set[tuple[str, str]] = set()                 # (name, format) of the functions calling a rare piece


class LLVMEmitter(Emitter):
    """The emitter protocol on an IRBuilder bound to one float format."""

    def __init__(self, b: ir.IRBuilder, f: Format):
        self.b, self.f = b, f
        self.ty, self.ity = _TYPES[f.name]
        self.calls_rare = False

    @property
    def module(self) -> ir.Module:
        return self.b.module

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        return self.b.call(_intrinsic(self.module, name, args[0].type, len(args)), list(args))

    # constants
    def c(self, value: float) -> ir.Constant:
        return ir.Constant(self.ty, float(value))

    def i(self, value: int, width: int | None = None) -> ir.Constant:
        return ir.Constant(ir.IntType(width) if width else self.ity, int(value))

    # floats
    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    def abs(self, a):
        return self.intrinsic("llvm.fabs", a)

    def sqrt(self, a):
        return self.intrinsic("llvm.sqrt", a)

    def fma(self, a, b, c):
        return self.intrinsic("llvm.fma", a, b, c)

    def rint(self, a):
        return self.intrinsic("llvm.rint", a)

    def floor(self, a):
        return self.intrinsic("llvm.floor", a)

    def ceil(self, a):
        return self.intrinsic("llvm.ceil", a)

    def trunc(self, a):
        return self.intrinsic("llvm.trunc", a)

    def copysign(self, a, sign):
        return self.intrinsic("llvm.copysign", a, sign)

    def min(self, a, b):
        return self.intrinsic("llvm.minnum", a, b)

    def max(self, a, b):
        return self.intrinsic("llvm.maxnum", a, b)

    # comparisons, selection, conditions
    def cmp(self, op, a, b):
        return self.b.fcmp_ordered(op, a, b)

    def ucmp(self, op, a, b):
        return self.b.fcmp_unordered(op, a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    def and_(self, a, b):
        return self.b.and_(a, b)

    def or_(self, a, b):
        return self.b.or_(a, b)

    def not_(self, a):
        return self.b.not_(a)

    def xor(self, a, b):
        return self.b.xor(a, b)

    # integers
    def iadd(self, a, b):
        return self.b.add(a, b)

    def isub(self, a, b):
        return self.b.sub(a, b)

    def imul(self, a, b):
        return self.b.mul(a, b)

    def ineg(self, a):
        return self.b.neg(a)

    def shl(self, a, n):
        return self.b.shl(a, n)

    def ashr(self, a, n):
        return self.b.ashr(a, n)

    def lshr(self, a, n):
        return self.b.lshr(a, n)

    def icmp(self, op, a, b, signed=True):
        return (self.b.icmp_signed if signed else self.b.icmp_unsigned)(op, a, b)

    def zext(self, a, width):
        return self.b.zext(a, ir.IntType(width))

    def sext(self, a, width):
        return self.b.sext(a, ir.IntType(width))

    def itrunc(self, a, width):
        return self.b.trunc(a, ir.IntType(width))              # llvmlite returns a itself at its width

    def ctlz(self, a):
        ty = a.type
        fn = _declared(self.module, f"llvm.ctlz.i{ty.width}", ty, [ty, ir.IntType(1)])
        return self.b.call(fn, [a, ir.Constant(ir.IntType(1), 0)])

    def fshl(self, a, b, n):
        ty = a.type
        return self.b.call(_declared(self.module, f"llvm.fshl.i{ty.width}", ty, [ty] * 3), [a, b, n])

    # conversions
    def to_int(self, a):
        """A float holding a small integer (never NaN or huge: fptosi of those is poison) as an int."""
        return self.b.fptosi(a, self.ity)

    def to_float(self, n, signed=True):
        return (self.b.sitofp if signed else self.b.uitofp)(n, self.ty)

    def bits(self, a):
        return self.b.bitcast(a, self.ity)

    def from_bits(self, n):
        return self.b.bitcast(n, self.ty)

    def convert(self, a, fmt):
        ty = _TYPES[fmt.name][0]
        return (self.b.fpext if fmt.width > self.f.width else self.b.fptrunc)(a, ty)

    # formats, calls, tables, rare pieces
    def at(self, fmt):
        return LLVMEmitter(self.b, fmt)

    def call(self, name: str, *args: ir.Value, fmt: Format | None = None) -> ir.Value:
        fmt = fmt or self.f
        fn = _function(self.module, name, fmt)
        self.calls_rare |= (name, fmt.name) in _RARE_USERS
        return self.b.call(fn, list(args))

    def table(self, name: str, width: int, words: Sequence[int]) -> ir.GlobalVariable:
        """An internal constant global `ember.math.<name>`, defined once per module."""
        symbol = f"ember.math.{name}"
        if symbol in self.module.globals:
            return self.module.globals[symbol]
        ty = ir.ArrayType(ir.IntType(width), len(words))
        table = ir.GlobalVariable(self.module, ty, symbol)
        table.initializer = ir.Constant(ty, [int(w) for w in words])
        table.global_constant = True
        table.linkage = "internal"
        return table

    def load(self, table, index):
        ptr = self.b.gep(table, [ir.Constant(I32, 0), index], inbounds=True)
        return self.b.load(ptr, typ=table.value_type.element)

    def rare(self, key: str, fn: Callable, x, limit: float):
        self.calls_rare = True
        return self.b.call(_rare_function(self.module, key, fn, limit, self.f), [x])


def _declared(module: ir.Module, name: str, ret: ir.Type, params: Sequence[ir.Type]) -> ir.Function:
    """Function `name` of `module`, declared on first use (intrinsics)."""
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(ret, list(params)), name)


def _intrinsic(module: ir.Module, name: str, ty: ir.Type, nargs: int) -> ir.Function:
    return _declared(module, f"{name}.{'f32' if ty == FLOAT else 'f64'}", ty, [ty] * nargs)


class _Attrs(ir.values.FunctionAttributes):
    """Function attributes llvmlite does not know (memory(none), string attributes) written as given."""

    def add(self, name):
        set.add(self, name)


def _rare_function(module: ir.Module, key: str, fn: Callable, limit: float, fmt: Format) -> ir.Function:
    """A rare piece as a scalar `noinline`, pure function with vector variants the loop vectorizer calls
    once per vector: each tests whether any lane has |x| >= limit (or is NaN) and only then computes lane
    by lane, so the common case costs a call and a compare per vector."""
    symbol = f"ember_math_{key}_{fmt.name}"
    if symbol in module.globals:
        return module.globals[symbol]
    ty = _TYPES[fmt.name][0]
    # the variants call `lane`, which has no variants: the SLP vectorizer would turn their calls of `fn`
    # back into a call of the variant itself
    lane = ir.Function(module, ir.FunctionType(ty, [ty]), f"{symbol}_lane")
    lane.linkage = "internal"
    lane.attributes = _Attrs(["noinline", "nounwind", "memory(none)", "willreturn"])
    b = ir.IRBuilder(lane.append_basic_block("entry"))
    b.ret(_rare_lane(LLVMEmitter(b, fmt), fn, lane.args[0], limit))
    scalar = ir.Function(module, ir.FunctionType(ty, [ty]), symbol)
    scalar.linkage = "internal"
    b = ir.IRBuilder(scalar.append_basic_block("entry"))
    b.ret(b.call(lane, [scalar.args[0]]))
    variants = []
    for width in _RARE_WIDTHS[fmt.name]:
        vty = ir.VectorType(ty, width)
        vfn = ir.Function(module, ir.FunctionType(vty, [vty]), f"{symbol}_v{width}")
        vfn.linkage = "internal"
        vfn.attributes = _Attrs(["nounwind", "memory(none)", "willreturn"])
        vb = ir.IRBuilder(vfn.append_basic_block("entry"))
        (vx,) = vfn.args
        fabs = _declared(module, f"llvm.fabs.v{width}{fmt.name}", vty, [vty])
        big = vb.fcmp_unordered(">=", vb.call(fabs, [vx]), ir.Constant(vty, [limit] * width))   # NaN too
        mask = vb.bitcast(big, ir.IntType(width))
        work, done = vfn.append_basic_block("work"), vfn.append_basic_block("done")
        vb.cbranch(vb.icmp_unsigned("!=", mask, ir.Constant(ir.IntType(width), 0)), work, done)
        vb.position_at_end(done)
        vb.ret(ir.Constant(vty, [0.0] * width))
        vb.position_at_end(work)
        out = ir.Constant(vty, ir.Undefined)
        for j in range(width):
            k = ir.Constant(I32, j)
            out = vb.insert_element(out, vb.call(lane, [vb.extract_element(vx, k)]), k)
        vb.ret(out)
        variants.append(f"_ZGV_LLVM_N{width}v_{symbol}({symbol}_v{width})")
        _keep(module, vfn)
    scalar.attributes = _Attrs(["noinline", "nounwind", "memory(none)", "willreturn", "speculatable",
                                '"vector-function-abi-variant"="' + ",".join(variants) + '"'])
    return scalar


def _rare_lane(e: LLVMEmitter, fn: Callable, x: ir.Value, limit: float) -> ir.Value:
    """The body of a rare piece for one lane: NaN for infinities and NaN, 0 below limit (by branches), else
    fn(e, x, |x|)."""
    b = e.b
    ax = e.abs(x)
    big = e.cmp(">=", ax, e.c(limit))
    finite = e.cmp("<", ax, e.c(math.inf))
    work, skip, special = (b.append_basic_block(n) for n in ("big", "small", "special"))
    b.cbranch(finite, skip, special)
    b.position_at_end(special)
    b.ret(e.sub(x, x))                                      # NaN for infinities and NaN
    b.position_at_end(skip)
    b.cbranch(big, work, skip := b.append_basic_block("small_finite"))
    b.position_at_end(skip)
    b.ret(e.c(0.0))
    b.position_at_end(work)
    return fn(e, x, ax)


def _keep(module: ir.Module, fn: ir.Function) -> None:
    """List `fn` in @llvm.compiler.used: the vector variants have no caller until the loop vectorizer
    runs, and dead internal functions are deleted before it."""
    ptr = ir.PointerType()
    used = module.globals.get("llvm.compiler.used")
    members = [*used.initializer.constant, fn] if used is not None else [fn]
    if used is None:
        used = ir.GlobalVariable(module, ir.ArrayType(ptr, 1), "llvm.compiler.used")
        used.linkage = "appending"
        used.section = "llvm.metadata"
    used.value_type = ir.ArrayType(ptr, len(members))
    used.initializer = ir.Constant(ir.ArrayType(ptr, len(members)), members)


def _function(module: ir.Module, name: str, fmt: Format) -> ir.Function:
    """`internal alwaysinline` definition of `name` for `fmt` in `module`, built on first use."""
    symbol = f"ember.math.{name}.{fmt.name}"
    if symbol in module.globals:
        return module.globals[symbol]
    arity, body = FUNCTIONS[name]
    ty = _TYPES[fmt.name][0]
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * arity), symbol)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    e = LLVMEmitter(builder, fmt)
    builder.ret(body(e, *fn.args))
    if e.calls_rare:
        _RARE_USERS.add((name, fmt.name))
    return fn


def call_math(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value], dtype) -> ir.Value:
    """Emit `name(*args)` for float32 or float64 `dtype`: a call of an inline, branch-free IR function."""
    dtype = np.dtype(dtype)
    if name not in NAMES:
        raise ValueError(f"mathlib has no function {name!r}; it has {', '.join(NAMES)}")
    if dtype not in FORMATS:
        raise TypeError(f"mathlib computes in float32 or float64, not {dtype}: extend float16 to float32 "
                        "and round the result")
    fmt = FORMATS[dtype]
    ty = _TYPES[fmt.name][0]
    if len(args) != FUNCTIONS[name][0] or any(a.type != ty for a in args):
        raise TypeError(f"{name} takes {FUNCTIONS[name][0]} {dtype} argument(s), got {[str(a.type) for a in args]}")
    fn = _function(builder.module, name, fmt)
    if (name, fmt.name) in _RARE_USERS:
        # the rare piece's call makes the caller spill vectors around it; a frame realigned to 64 keeps a
        # 512-bit spill in one cache line (misaligned, as the randomized stack left it in half the
        # processes, sin's common case ran 1.8x as long as before instead of 1.2x). alignstack(64) alone
        # does not realign; it is printed last, so the define line still ends in ")" (graph.py's regex)
        attrs = builder.function.attributes
        set.add(attrs, '"stackrealign"')                          # a string attribute llvmlite does not know
        attrs.alignstack = max(attrs.alignstack, 64)
    return builder.call(fn, list(args))
