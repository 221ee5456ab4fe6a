"""Vectorizable math as inline LLVM IR: exp, expm1, log, log1p, tanh, logistic, sin, cos, pow, erf, sqrt,
rsqrt for float32 and float64.

`llvm.exp` and friends lower to scalar libm calls that the loop vectorizer leaves alone, so each function
here is an `internal alwaysinline` IR function built from fma, rint, selects and integer bit tricks, with
no branches: a loop calling it inlines and vectorizes. Algorithms are the classic ones (Cody-Waite range
reduction with an fma, Taylor, Chebyshev or minimax polynomials, fdlibm/musl's log and tanh
decompositions, a double-double log and exp for float64 pow), with rounding errors carried in (hi, lo)
pairs where the budget needs it. Where a function has pieces (float32 tanh and erf, logistic's two
signs), all are computed and one selected, so each piece is short, and they share one division. float32
pow evaluates in float64 and rounds once; float16 callers compute in float32 and round (the scalar op
table does). No intermediate is subnormal unless the result is: x86 charges ~100 cycles per vector
operation on subnormal operands.

sin and cos reduce by Cody-Waite below 2**16 (float32) and 2**30 (float64) and by Payne-Hanek (integer
products with a table of 2/pi) from there on, in a separate `noinline` function with vector variants: the
loop vectorizer calls one per vector, and it does the reduction only when some lane needs it.

Max errors (ulp of the result, tested in tests/backends/llvm/test_mathlib.py and test_trig_range.py): all
float32 functions and float64 exp and log <= 1.02 except float32 tanh (1.07) and erf (1.35) (both measured
over all 2**32 inputs), sin/cos (1.46 at any finite input: every binade of both widths is tested) and
rsqrt (1 / sqrt, as the NumPy rule: 1.47); float64 others <= 1.07. Special values, signed zeros and
overflow as NumPy; logistic is 0 where exp(-x) overflows, as the NumPy rule (SciPy's expit) and XLA give.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ember.backends.llvm.types import DOUBLE, FLOAT, I32, I64


@dataclass(frozen=True)
class _Format:
    """The constants one float format needs: bit layout, clamps, range-reduction splits, series."""
    ty: ir.Type
    ity: ir.IntType
    suffix: str
    mant: int                          # explicit mantissa bits
    bias: int
    exp_range: tuple[float, float]     # exp underflows to 0 below, overflows above
    expm1_range: tuple[float, float]   # expm1 is -1 below
    expm1_big_n: int                   # from 2**n on, expm1 = exp: the -1 is below half an ulp
    exp_overflow: float                # log of the largest finite number: exp overflows above
    ln2: tuple[float, float]           # ln 2 = hi + lo, hi rounded (for fma reductions)
    ln2_short: tuple[float, float]     # hi with trailing zero bits, so k * hi is exact (log)
    pio2: tuple[float, float, float]   # pi/2 in three parts
    sqrt_half_bits: int                # bits of sqrt(1/2): log's mantissa split point
    subnormal_scale: int               # log scales subnormals by 2**this
    exp_terms: int                     # Taylor terms of exp(r) - 1 - r (from r**2 / 2!)
    log_terms: int                     # terms of atanh's series after 2s (2/3 s**2, 2/5 s**4, ...)
    sin_terms: int                     # sin(r) = r + r**3 * P(r**2): terms of P
    cos_terms: int                     # cos(r) = 1 + r**2 * Q(r**2): terms of Q


F32 = _Format(FLOAT, I32, "f32", 23, 127, (-104.0, 89.0), (-18.0, 89.0), 40, 88.72283935546875,
              (float.fromhex("0x1.62e430p-1"), float.fromhex("-0x1.05c610p-29")),
              (0.693138122558593750, 9.058001523953862e-06),
              (float.fromhex("0x1.921fb6p+0"), float.fromhex("-0x1.777a5cp-25"), float.fromhex("-0x1.ee59dap-50")),
              0x3F3504F3, 25, 6, 4, 5, 6)
F64 = _Format(DOUBLE, I64, "f64", 52, 1023, (-746.0, 710.0), (-40.0, 710.0), 60, 709.782712893384,
              (float.fromhex("0x1.62e42fefa39efp-1"), float.fromhex("0x1.abc9e3b39803fp-56")),
              (0.6931471803691238, 1.9082149292705877e-10),
              (float.fromhex("0x1.921fb54442d18p+0"), float.fromhex("0x1.1a62633145c07p-54"),
               float.fromhex("-0x1.f1976b7ed8fbcp-110")),
              0x3FE6A09E667F3BCD, 54, 12, 10, 8, 9)
_FORMATS = {np.dtype(np.float32): F32, np.dtype(np.float64): F64}

_LOG2E = 1.4426950408889634
_TWO_OVER_PI = 0.6366197723675814
_TANH_BIG, _TANH_MID = 0.5493061443340549, 0.25541281188299536   # log(3)/2, log(5/3)/2

# erf, float64: erf(x)/x as a polynomial in x*x on [0, 1]; erf(mid + t) on [1,2], [2,3], [3,4], [4,6].
# Chebyshev fits (mpmath.chebyfit, 40 digits; max error <= 1e-18), lowest power first; the constant
# terms carry a low part so the result rounds once.
_ERF_SMALL = (1.1283791670955126, -0.37612638903183754, 0.1128379167095512, -0.02686617064512984,
              0.0052239776254232985, -0.000854832702193483, 0.00012055332902888736,
              -1.4925647567519332e-05, 1.6462045441468418e-06, -1.6364642158167616e-07,
              1.4792401209404813e-08, -1.216456005728345e-09, 8.709045129053106e-11,
              -4.230945824295338e-12)
_ERF_SMALL_LO = 1.5333301926264894e-17
_ERF_PIECES = (
    (1.5, (0.9661051464753108, 0.11893028922362937, -0.17839543383544404, 0.13875200409423427,
          -0.04459885845886157, -0.014866286152952818, 0.019326171998868175, -0.004743053201224184,
          -0.0023626776214740177, 0.0017098195527248622, -9.291427749394218e-05,
          -0.0002544484104441952, 7.768992174369104e-05, 1.7955436799289365e-05,
          -1.4091845601479276e-05, 5.945663758763461e-07, 1.5306178650310634e-06,
          -3.33097498557903e-07, -1.008753271016733e-07, 4.4105890028319014e-08),
     -3.387229778815171e-17),
    (2.5, (0.999593047982555, 0.0021782842303527095, -0.005445710575881772, 0.008350089549685386,
          -0.008622375078479705, 0.006117348213573979, -0.0027984901570386415,
          0.000542410061321808, 0.0002606701735907387, -0.0002502853861522771,
          7.880133344883084e-05, 5.137002244419589e-06, -1.4080055105420633e-05,
          4.690962247196687e-06, 1.8160060560414687e-07, -6.413619742783505e-07,
          1.784441182673888e-07, 1.843062762339582e-08, -2.2284128877917768e-08,
          3.655479614834168e-09),
     4.692298299244932e-17),
    (3.5, (0.9999992569016276, 5.399426777384783e-06, -1.8897993720846575e-05,
          4.229550975618076e-05, -6.771781083305595e-05, 8.211628223939792e-05,
          -7.774424638936709e-05, 5.819275061897632e-05, -3.4259175451446264e-05,
          1.5330768269504774e-05, -4.641017275609629e-06, 4.4470364859584147e-07,
          4.4377004087098873e-07, -3.016690591364062e-07, 9.233752635258898e-08,
          -5.73537185871582e-09, -8.338685673326946e-09, 4.049972274017224e-09,
          -5.614496006155073e-10, -1.714384872112228e-10),
     4.9647072811815146e-17),
    (5.0, (0.9999999999984626, 1.5670866666209687e-11, -7.83542406487843e-11, 2.559574596337652e-10,
          -6.137786382285755e-10, 1.150764858072596e-09, -1.7542277244092619e-09,
          2.2320920772123733e-09, -2.414465892838849e-09, 2.2485154635189178e-09,
          -1.8183166189389494e-09, 1.2856568267456269e-09, -7.980649117646371e-10,
          4.3156535464223433e-10, -1.9994104992184832e-10, 8.098833495266459e-11,
          -2.991328545885364e-11, 7.90684828608681e-12, -2.913891598383194e-14,
          -4.891502169755016e-13),
     -2.341007166604235e-17),
)


@dataclass
class _Emit:
    """An IRBuilder bound to one float format, with the handful of operations the algorithms use."""
    b: ir.IRBuilder
    f: _Format

    @property
    def module(self) -> ir.Module:
        return self.b.module

    def c(self, value: float) -> ir.Constant:
        return ir.Constant(self.f.ty, float(value))

    def i(self, value: int) -> ir.Constant:
        return ir.Constant(self.f.ity, int(value))

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        return self.b.call(_intrinsic(self.module, name, args[0].type, len(args)), list(args))

    def fma(self, a, b, c):
        return self.intrinsic("llvm.fma", a, b, c)

    def poly(self, x, coeffs: Sequence[float]):
        """Horner's rule with fma, coefficients lowest power first."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

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

    def rint(self, a):
        return self.intrinsic("llvm.rint", a)

    def floor(self, a):
        return self.intrinsic("llvm.floor", a)

    def copysign(self, a, sign):
        return self.intrinsic("llvm.copysign", a, sign)

    def below(self, a, limit: float):
        """min(a, limit), limit where a is NaN: one x86 min instruction (llvm.minnum needs three)."""
        c = self.c(limit)
        return self.select(self.cmp("<", a, c), a, c)

    def above(self, a, limit: float):
        """max(a, limit), limit where a is NaN: one x86 max instruction."""
        c = self.c(limit)
        return self.select(self.cmp(">", a, c), a, c)

    def clamp(self, a, lo: float, hi: float):
        """a limited to [lo, hi]; NaN becomes lo (callers restore NaN at the end), so no poison follows."""
        return self.intrinsic("llvm.minnum", self.intrinsic("llvm.maxnum", a, self.c(lo)), self.c(hi))

    def cmp(self, op: str, a, b):
        """Ordered comparison: false when either side is NaN."""
        return self.b.fcmp_ordered(op, a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    def to_int(self, a):
        """A float holding a small integer (never NaN or huge: fptosi of those is poison) as an int."""
        return self.b.fptosi(a, self.f.ity)

    def to_float(self, n):
        return self.b.sitofp(n, self.f.ty)

    def bits(self, a):
        return self.b.bitcast(a, self.f.ity)

    def from_bits(self, n):
        return self.b.bitcast(n, self.f.ty)

    def pow2(self, n):
        """2**n for an integer n in the normal exponent range, built from its bits."""
        return self.from_bits(self.b.shl(self.b.add(n, self.i(self.f.bias)), self.i(self.f.mant)))

    def scale(self, p, n):
        """p * 2**n in two steps, so results that overflow, underflow or are subnormal round once."""
        half = self.b.ashr(n, self.i(1))
        return self.mul(self.mul(p, self.pow2(half)), self.pow2(self.b.sub(n, half)))

    def call(self, name: str, *args: ir.Value, fmt: _Format | None = None) -> ir.Value:
        return self.b.call(_function(self.module, name, fmt or self.f), list(args))


def _declared(module: ir.Module, name: str, ret: ir.Type, params: Sequence[ir.Type]) -> ir.Function:
    """Function `name` of `module`, declared on first use (intrinsics)."""
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(ret, list(params)), name)


def _intrinsic(module: ir.Module, name: str, ty: ir.Type, nargs: int) -> ir.Function:
    return _declared(module, f"{name}.{'f32' if ty == FLOAT else 'f64'}", ty, [ty] * nargs)


# ---- exp, expm1 ------------------------------------------------------------------------------------

def _reduce_ln2(e: _Emit, x):
    """x = n ln2 + r + r_lo with |r| <= ln2/2 (Cody-Waite with fma): n as a float, r, and r's rounding error."""
    n = e.rint(e.mul(x, e.c(_LOG2E)))
    hi, lo = e.f.ln2
    r1 = e.fma(e.neg(n), e.c(hi), x)                        # exact: x and n hi agree in their top bits
    r = e.fma(e.neg(n), e.c(lo), r1)
    return n, r, e.fma(e.neg(n), e.c(lo), e.sub(r1, r))


def _expm1_poly(e: _Emit, r, r_lo):
    """exp(r + r_lo) - 1 as hi + lo on |r| <= ln2/2: r + r**2 (1/2 + r/6 + ...) (Taylor), with the
    rounding error of the last addition and r_lo kept in lo, so callers can round once."""
    coeffs = [1.0 / math.factorial(k) for k in range(2, 2 + e.f.exp_terms)]
    q = e.mul(e.mul(r, r), e.poly(r, coeffs))
    hi = e.add(r, q)
    return hi, e.fma(r_lo, e.add(e.c(1.0), hi), e.add(e.sub(r, hi), q))   # |q| < |r|: Fast2Sum


def _one_plus(e: _Emit, hi, lo):
    """1 + hi + lo as a pair (|hi| < 1)."""
    s = e.add(e.c(1.0), hi)
    return s, e.add(e.add(e.sub(e.c(1.0), s), hi), lo)


def _exp_unscaled(e: _Emit, x, x_lo=None):
    """exp(x + x_lo) = (hi + lo) 2**k with hi + lo in [0.7, 1.42], for a non-NaN x (x_lo tiny beside x).

    Scaling comes last and once: a scaled lo part would be subnormal for tiny results, and subnormal
    operands cost a microcode assist (~100 cycles) per vector operation on x86."""
    xc = e.clamp(x, *e.f.exp_range)
    n, r, r_lo = _reduce_ln2(e, xc)
    if x_lo is not None:                                     # a clamped x makes x_lo meaningless (maybe NaN)
        r_lo = e.add(r_lo, e.select(e.cmp("==", xc, x), x_lo, e.c(0.0)))
    return (*_one_plus(e, *_expm1_poly(e, r, r_lo)), e.to_int(n))


def _exp_value(e: _Emit, x):
    """exp(x) for a non-NaN x: 2**n (1 + (r + r**2 P(r))), rounded once at the 1 +; float64 adds the
    reduction's rounding error r_lo into the small part, which keeps it within 0.85 ulp (bound: 0.5
    for the last rounding, 0.25 for r + p's, 0.1 for the rest) at half the operations of carrying
    hi + lo pairs (those measured 0.74 ulp, and 1.4x slower: 0.72 against 0.51 ns per element)."""
    n, r, r_lo = _reduce_ln2(e, e.clamp(x, *e.f.exp_range))
    coeffs = [1.0 / math.factorial(k) for k in range(2, 2 + e.f.exp_terms)]
    if e.f is F32:
        return e.scale(e.add(e.c(1.0), e.fma(e.mul(r, r), e.poly(r, coeffs), r)), e.to_int(n))
    p = e.fma(e.mul(r, r), e.poly(r, coeffs), r_lo)
    return e.scale(e.add(e.c(1.0), e.add(r, p)), e.to_int(n))


def _exp(e: _Emit, x):
    return e.select(e.isnan(x), x, _exp_value(e, x))


def _expm1_parts(e: _Emit, x):
    """expm1(x) as hi + lo for a non-NaN x: 2**n (p + 1) - 1 with exp(r) - 1 = p, summed exactly
    (lo is 0 once the -1 no longer matters)."""
    n, r, r_lo = _reduce_ln2(e, e.clamp(x, *e.f.expm1_range))
    (p, p_lo), k = _expm1_poly(e, r, r_lo), e.to_int(n)
    big = e.b.icmp_signed(">=", k, e.i(e.f.expm1_big_n))   # from there on, the -1 is below half an ulp
    t = e.pow2(e.select(big, e.i(0), k))
    s, s_lo = _two_sum(e, e.mul(t, p), e.sub(t, e.c(1.0)))  # 2**n p and 2**n - 1 are exact
    exp_x = e.scale(e.add(*_one_plus(e, p, p_lo)), k)
    return e.select(big, exp_x, s), e.select(big, e.c(0.0), e.fma(t, p_lo, s_lo))


def _expm1(e: _Emit, x):
    hi, lo = _expm1_parts(e, x)
    out = e.select(e.isnan(x), x, e.add(hi, lo))
    return e.select(e.cmp("==", x, e.c(0.0)), x, out)      # keeps -0


# ---- log, log1p --------------------------------------------------------------------------------------

def _split_mantissa(e: _Emit, x):
    """x = 2**k m with m in [sqrt(1/2), sqrt(2)) for a positive normal x: k (as a float) and f = m - 1."""
    f = e.f
    one_bits = f.bias << f.mant
    ix = e.b.add(e.bits(x), e.i(one_bits - f.sqrt_half_bits))
    k = e.b.sub(e.b.ashr(ix, e.i(f.mant)), e.i(f.bias))
    m = e.from_bits(e.b.add(e.b.and_(ix, e.i((1 << f.mant) - 1)), e.i(f.sqrt_half_bits)))
    return e.to_float(k), e.sub(m, e.c(1.0))


def _log1p_of_reduced(e: _Emit, k, f, c):
    """k ln2 + log(1 + f) + c (fdlibm's arrangement: hfsq and s carry the error below half an ulp)."""
    s = e.div(f, e.add(e.c(2.0), f))
    z = e.mul(s, s)
    r = e.mul(z, e.poly(z, [2.0 / (2 * j + 1) for j in range(1, 1 + e.f.log_terms)]))
    hfsq = e.mul(e.c(0.5), e.mul(f, f))
    hi, lo = e.f.ln2_short
    inner = e.add(e.mul(s, e.add(hfsq, r)), e.fma(k, e.c(lo), c))
    return e.fma(k, e.c(hi), e.sub(f, e.sub(hfsq, inner)))


def _log_specials(e: _Emit, x, out):
    """log-like special values: +inf at +inf, -inf at 0, NaN below 0 and at NaN."""
    out = e.select(e.cmp("==", x, e.c(math.inf)), x, out)
    out = e.select(e.cmp("==", x, e.c(0.0)), e.c(-math.inf), out)
    return e.select(e.b.fcmp_unordered("<", x, e.c(0.0)), e.c(math.nan), out)


def _log(e: _Emit, x):
    tiny = e.cmp("<", x, e.c(2.0 ** (1 - e.f.bias)))        # subnormal: scale into the normal range
    xs = e.select(tiny, e.mul(x, e.c(2.0 ** e.f.subnormal_scale)), x)
    k, f = _split_mantissa(e, xs)
    k = e.select(tiny, e.sub(k, e.c(e.f.subnormal_scale)), k)
    return _log_specials(e, x, _log1p_of_reduced(e, k, f, e.c(0.0)))


def _log1p(e: _Emit, x):
    u = e.add(e.c(1.0), x)
    k, f = _split_mantissa(e, u)
    # (1 + x) - u, the rounding error of u, relative to u: log(1 + x) = log(u) + c / u to first order
    c = e.select(e.cmp(">=", k, e.c(2.0)), e.sub(e.c(1.0), e.sub(u, x)), e.sub(x, e.sub(u, e.c(1.0))))
    out = _log_specials(e, u, _log1p_of_reduced(e, k, f, e.div(c, u)))
    out = e.select(e.cmp("==", x, e.c(math.inf)), x, out)
    return e.select(e.cmp("==", x, e.c(0.0)), x, out)      # keeps -0


# ---- tanh, logistic ----------------------------------------------------------------------------------

def _div_dd(e: _Emit, n, n_lo, d, d_lo):
    """(n + n_lo) / (d + d_lo) as hi + lo."""
    q = e.div(n, d)
    rem = e.sub(e.add(e.fma(e.neg(q), d, n), n_lo), e.mul(q, d_lo))
    return q, e.div(rem, d)


# float32 tanh below 0.75: x + x**3 N(x**2) / D(x**2), N/D a relative minimax fit of (tanh(x)/x - 1)/x**2
# (error 2**-28.8; Loeb's linearization with Lawson weights, then coefficients rounded to float32)
_TANH_F32_SPLIT = 0.75
_TANH_F32_N = (-0.3333333432674408, -0.001734705874696374, 5.936012894380838e-05)
_TANH_F32_D = (1.0, 0.40520399808883667)
_TANH_F32_BIG = 9.1          # tanh rounds to 1 from 9.0109 on
# (exp(r) - 1 - r) / r**2 on |r| <= ln2/2, minimax for exp's relative error (2**-28.3; Taylor needs a term more)
_TANH_F32_EXP = (0.4999999403953552, 0.1666651964187622, 0.04166839271783829, 0.008368780836462975,
                 0.0013814467238262296)


def _tanh_f32(e: _Emit, x):
    """float32 tanh in one path with one division: for a = |x| < 0.75, a + a**3 N/D (the quotient is a
    correction below 0.19 a, so its rounding errors shrink); above, 1 - 2 / (exp(2a) + 1) with exp(2a) =
    2**n (1 + p) and 2**n + 1 + 2**n p rounded once (below 0.75 the 1 - would lose tanh's relative
    accuracy). Both numerators and denominators are computed and selected before the one division.
    The plain rational a P(a**2) / Q(a**2) of XLA and Eigen costs 0.6x as much but reached 4.9 ulp with
    our own (5, 4) fit (3.6 even with its polynomials rounded exactly): two rounded polynomials near 1
    put up to 1 ulp each into the quotient. Max error 1.07 ulp, measured over all float32 inputs."""
    a = e.below(e.abs(x), _TANH_F32_BIG)                     # NaN -> 9.1 here, restored at the end
    w = e.above(a, 2.0 ** -16)                               # below, tanh(a) = a; no subnormal intermediates
    u = e.mul(w, w)
    small_num, small_den = e.mul(e.mul(w, u), e.poly(u, _TANH_F32_N)), e.poly(u, _TANH_F32_D)
    z = e.add(w, w)
    n = e.rint(e.mul(z, e.c(_LOG2E)))
    # one reduction step: ln2's float32 rounding (2e-9) times n <= 27 is damped by 2 exp(2a) / (exp(2a) + 1)**2
    r = e.fma(e.neg(n), e.c(math.log(2.0)), z)
    p = e.fma(e.mul(r, r), e.poly(r, _TANH_F32_EXP), r)
    two_n = e.pow2(e.to_int(n))                              # n <= 27: exact
    big_den = e.fma(two_n, p, e.add(two_n, e.c(1.0)))        # exp(2a) + 1
    small = e.cmp("<", a, e.c(_TANH_F32_SPLIT))
    q = e.div(e.select(small, small_num, e.c(-2.0)), e.select(small, small_den, big_den))
    y = e.add(e.select(small, w, e.c(1.0)), q)
    y = e.select(e.cmp("<", a, e.c(2.0 ** -16)), a, y)
    return e.select(e.isnan(x), x, e.copysign(y, x))


def _tanh(e: _Emit, x):
    """musl's tanh, from t = expm1(+-2|x|) in three ranges so no range subtracts nearly equal numbers;
    t, 2 + t and the quotient carry their rounding errors, so the result rounds about once."""
    if e.f is F32:
        return _tanh_f32(e, x)
    a = e.intrinsic("llvm.minnum", e.abs(x), e.c(22.0))     # tanh(22) rounds to 1; no inf, no subnormal
    big, mid = e.cmp(">", a, e.c(_TANH_BIG)), e.cmp(">", a, e.c(_TANH_MID))
    t, t_lo = _expm1_parts(e, e.select(mid, e.add(a, a), e.mul(a, e.c(-2.0))))
    d, d_lo = _two_sum(e, e.c(2.0), t)
    n = e.select(big, e.c(2.0), e.select(mid, t, e.neg(t)))
    n_lo = e.select(big, e.c(0.0), e.select(mid, t_lo, e.neg(t_lo)))
    q, q_lo = _div_dd(e, n, n_lo, d, e.add(d_lo, t_lo))
    one_minus, err = _two_sum(e, e.c(1.0), e.neg(q))
    y = e.select(big, e.add(one_minus, e.sub(err, q_lo)), e.add(q, q_lo))
    y = e.select(e.cmp(">=", a, e.c(22.0)), e.c(1.0), y)
    return e.select(e.isnan(x), x, e.copysign(y, x))


def _logistic(e: _Emit, x):
    """1 / (1 + t) for x >= 0, t / (1 + t) below, t = exp(-|x|) = 2**k (1 + p), with one division: the
    numerator is selected first, the denominator 1 + 2**k + 2**k p is summed exactly, and the quotient is
    corrected by its remainder (1 / (1 + t) is q for x >= 0 and 1 - 2**k q below: no second division).
    The quotient is scaled by 2**k last, in two exact steps, so no intermediate is subnormal and a
    subnormal result rounds once; 2**k in the denominator stops
    at 2**-(mant + 10), where 1 + t rounds to 1 with room to spare."""
    f = e.f
    n, r, r_lo = _reduce_ln2(e, e.above(e.neg(e.abs(x)), f.exp_range[0]))   # NaN -> the clamp; restored below
    p, p_lo = _expm1_poly(e, r, r_lo)                                       # exp(r) - 1 = p + p_lo
    k = e.to_int(n)
    two_k = e.pow2(e.b.select(e.b.icmp_signed("<", k, e.i(-f.mant - 10)), e.i(-f.mant - 10), k))
    s = e.add(e.c(1.0), two_k)
    s_lo = e.sub(two_k, e.sub(s, e.c(1.0)))                                 # 1 + 2**k = s + s_lo exactly
    m = e.mul(two_k, p)
    den = e.add(s, m)                                                       # |m| < s: Fast2Sum
    den_lo = e.add(e.add(e.sub(s, den), m), e.fma(two_k, p_lo, s_lo))
    pos = e.cmp(">=", x, e.c(0.0))
    one_p = e.add(e.c(1.0), p)
    num = e.select(pos, e.c(1.0), one_p)
    num_lo = e.select(pos, e.c(0.0), e.add(e.add(e.sub(e.c(1.0), one_p), p), p_lo))
    q = e.div(num, den)
    rem = e.fma(e.neg(q), den_lo, e.add(e.fma(e.neg(q), den, num), num_lo))
    inv_den = e.select(pos, q, e.fma(e.neg(two_k), q, e.c(1.0)))
    shift = f.mant + 8                                      # k + shift >= -(bias - 5): 2**(k + shift) is normal
    scaled = e.mul(e.fma(rem, inv_den, q), e.pow2(e.b.add(e.b.select(pos, e.i(0), k), e.i(shift))))
    out = e.mul(scaled, e.c(2.0 ** -shift))                   # exact, or one rounding to a subnormal
    # 0 where exp(-x) overflows, as the NumPy rule (SciPy's expit) and XLA give, not the subnormal
    out = e.select(e.cmp("<", x, e.c(-f.exp_overflow)), e.c(0.0), out)
    return e.select(e.isnan(x), x, out)


# ---- sin, cos ----------------------------------------------------------------------------------------

# 2/pi to 1344 bits (hex digits after the point): the Payne-Hanek tables below are cut from it.
_TWO_OVER_PI_HEX = (
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e006492eea09d1921c"
    "fe1deb1cb129a73ee88235f52ebb4484e99c7026b45f7e413991d639835339f49c845f8bbdf9283b1ff897ffde05980f"
    "ef2f118b5a0a6d1f6d367ecf27cb09b74f463f669e5fea2d7527bac7ebe5f17b3d0739f78a5292ea6bfb5fb11f8d5d08"
    "56033046fc7b6babf0cfbc209af4361da9e391615ee61b08")
_TWO_OVER_PI_BITS = int(_TWO_OVER_PI_HEX, 16)       # floor(2/pi * 2**1344)
_TWO_OVER_PI_LEN = 4 * len(_TWO_OVER_PI_HEX)
# float32 (the layout of ARM's optimized-routines sinf): word i = floor(4/pi * 2**(8i + 7)) mod 2**32
_PH_F32 = [(_TWO_OVER_PI_BITS >> (_TWO_OVER_PI_LEN - 8 * i - 8)) % 2 ** 32 for i in range(24)]
# float64: three zero words, then word k = floor(2/pi * 2**(64(k + 1))) mod 2**64
_PH_F64 = [0, 0, 0] + [(_TWO_OVER_PI_BITS >> (_TWO_OVER_PI_LEN - 64 * (k + 1))) % 2 ** 64 for k in range(19)]
# Cody-Waite below, Payne-Hanek from here on: float32's x * 2/pi rounds to within 2**-8 of n, float64
# keeps n below 2**33 (its three-part pi/2 is good to n * 2**-163)
_SINCOS_BIG = {"f32": 2.0 ** 16, "f64": 2.0 ** 30}
_SINCOS_WIDTHS = {"f32": (2, 4, 8, 16, 32), "f64": (2, 4, 8, 16)}


class _Attrs(ir.values.FunctionAttributes):
    """Function attributes llvmlite does not know (memory(none), string attributes) written as given."""

    def add(self, name):
        set.add(self, name)


def _sincos_of_reduced(e: _Emit, r, quadrant, shift: int):
    """sin(r + (quadrant + shift) pi/2) for |r| <= pi/4 (a little more) and an integer quadrant."""
    z = e.mul(r, r)
    sin_series = [(-1) ** j / math.factorial(2 * j + 1) for j in range(1, 1 + e.f.sin_terms)]
    cos_series = [(-1) ** j / math.factorial(2 * j) for j in range(1, 1 + e.f.cos_terms)]
    sin_r = e.fma(e.mul(r, z), e.poly(z, sin_series), r)
    cos_r = e.fma(z, e.poly(z, cos_series), e.c(1.0))
    quadrant = e.b.add(quadrant, e.i(shift))
    odd = e.b.icmp_signed("!=", e.b.and_(quadrant, e.i(1)), e.i(0))
    negative = e.b.icmp_signed("!=", e.b.and_(quadrant, e.i(2)), e.i(0))
    out = e.select(odd, cos_r, sin_r)
    return e.select(negative, e.neg(out), out)


def _table(e: _Emit, name: str, width: int, words: Sequence[int]) -> ir.GlobalVariable:
    if name in e.module.globals:
        return e.module.globals[name]
    ty = ir.ArrayType(ir.IntType(width), len(words))
    table = ir.GlobalVariable(e.module, ty, name)
    table.initializer = ir.Constant(ty, [int(w) for w in words])
    table.global_constant = True
    table.linkage = "internal"
    return table


def _word(e: _Emit, table, index, width: int):
    ptr = e.b.gep(table, [ir.Constant(I32, 0), index], inbounds=True)
    return e.b.load(ptr, typ=ir.IntType(width))


def _payne_hanek_f32(e: _Emit, ax):
    """|x| = n pi/2 + r (float32 |x| >= 2): 24 bits of x times 96 bits of 4/pi in 64-bit integers give
    x 2/pi mod 4 in 2.62 fixed point exactly (ARM optimized-routines' sinf); r in float64 (33 bits good),
    n mod 4 as i32."""
    b, i64 = e.b, I64
    xi = e.bits(ax)
    table = _table(e, "ember.math.two_over_pi.f32", 32, _PH_F32)
    idx = b.and_(b.lshr(xi, e.i(26)), e.i(15))
    shift = b.and_(b.lshr(xi, e.i(23)), e.i(7))
    m = b.shl(b.or_(b.and_(xi, e.i(0xFFFFFF)), e.i(0x800000)), shift)
    a0, a1, a2 = (_word(e, table, b.add(idx, e.i(k)), 32) for k in (0, 4, 8))
    res0 = b.zext(b.mul(m, a0), i64)
    m64 = b.zext(m, i64)
    res1 = b.mul(m64, b.zext(a1, i64))
    res2 = b.mul(m64, b.zext(a2, i64))
    res0 = b.add(b.or_(b.lshr(res2, ir.Constant(i64, 32)), b.shl(res0, ir.Constant(i64, 32))), res1)
    n = b.lshr(b.add(res0, ir.Constant(i64, 1 << 61)), ir.Constant(i64, 62))
    frac = b.sub(res0, b.shl(n, ir.Constant(i64, 62)))
    r = b.fmul(b.sitofp(frac, DOUBLE), ir.Constant(DOUBLE, math.pi / 2 * 2.0 ** -62))
    return b.fptrunc(r, FLOAT), b.trunc(n, I32)


def _payne_hanek_f64(e: _Emit, ax):
    """|x| = n pi/2 + r (float64 |x| >= 2**-30): x's 53-bit mantissa times a 192-bit window of 2/pi (three
    64-bit words, 64 x 64 -> 128-bit products) gives x 2/pi mod 4 in 2.190 fixed point, good to 2**-137
    (the closest float64 to a multiple of pi/2 is 2**-61 from it); r = that fraction times pi/2 in
    double-double, rounded once."""
    b, i64, i128 = e.b, I64, ir.IntType(128)
    c64 = lambda v: ir.Constant(i64, v)          # noqa: E731
    xi = e.bits(ax)
    table = _table(e, "ember.math.two_over_pi.f64", 64, _PH_F64)
    m = b.or_(b.and_(xi, c64((1 << 52) - 1)), c64(1 << 52))
    o = b.add(b.lshr(xi, c64(52)), c64(190 - 1075))           # window: floor(2/pi 2**o) mod 2**192
    q = b.trunc(b.lshr(o, c64(6)), I32)
    s = b.and_(o, c64(63))
    t = [_word(e, table, b.add(q, ir.Constant(I32, k)), 64) for k in range(4)]
    fshl = _declared(e.module, "llvm.fshl.i64", i64, [i64] * 3)
    w0, w1, w2 = (b.call(fshl, [t[k], t[k + 1], s]) for k in range(3))
    m128 = b.zext(m, i128)
    p2 = b.mul(m128, b.zext(w2, i128))
    p1 = b.mul(m128, b.zext(w1, i128))
    mid = b.add(p1, b.lshr(p2, ir.Constant(i128, 64)))
    top = b.add(b.mul(m, w0), b.trunc(b.lshr(mid, ir.Constant(i128, 64)), i64))
    n = b.lshr(b.add(top, c64(1 << 61)), c64(62))
    hi = b.sub(top, b.shl(n, c64(62)))                          # the fraction, signed, times 2**62
    v = b.or_(b.shl(b.sext(hi, i128), ir.Constant(i128, 64)), b.zext(b.trunc(mid, i64), i128))  # times 2**126
    negative = b.icmp_signed("<", v, ir.Constant(i128, 0))
    v = b.select(negative, b.neg(v), v)
    ctlz = _declared(e.module, "llvm.ctlz.i128", i128, [i128, ir.IntType(1)])
    lz = b.call(ctlz, [v, ir.Constant(ir.IntType(1), 0)])
    lz = b.select(b.icmp_unsigned(">", lz, ir.Constant(i128, 126)), ir.Constant(i128, 126), lz)
    v = b.shl(v, lz)                                            # top bit set (v is never 0)
    head = b.trunc(b.lshr(v, ir.Constant(i128, 75)), i64)      # 53 bits: exact as a double
    tail = b.trunc(b.lshr(b.shl(v, ir.Constant(i128, 53)), ir.Constant(i128, 64)), i64)
    scale = e.pow2(b.sub(c64(2 - 53), b.trunc(lz, i64)))        # v's top bit weighs 2**(1 - lz)
    head = e.mul(b.uitofp(head, DOUBLE), scale)
    tail = e.mul(e.mul(b.uitofp(tail, DOUBLE), scale), e.c(2.0 ** -64))
    pio2_hi, pio2_lo = e.f.pio2[0], e.f.pio2[1]
    r = e.fma(head, e.c(pio2_hi), e.fma(head, e.c(pio2_lo), e.mul(tail, e.c(pio2_hi))))
    r = e.select(negative, e.neg(r), r)
    return r, b.trunc(n, i64)


def _sincos_big(e: _Emit, x, shift: int):
    """sin(x + shift pi/2) where |x| is at least _SINCOS_BIG (Payne-Hanek), NaN for non-finite x; 0 below
    (by a branch)."""
    b = e.b
    ax = e.abs(x)
    big = e.cmp(">=", ax, e.c(_SINCOS_BIG[e.f.suffix]))
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
    r, n = (_payne_hanek_f32 if e.f.suffix == "f32" else _payne_hanek_f64)(e, ax)
    negative = e.cmp("<", x, e.c(0.0))
    r = e.select(negative, e.neg(r), r)
    n = e.select(negative, b.neg(n), n)
    return _sincos_of_reduced(e, r, n, shift)


def _big_function(module: ir.Module, shift: int, fmt: _Format) -> ir.Function:
    """The scalar large-argument sin/cos, `noinline` and pure, with vector variants the loop vectorizer
    calls once per vector: each tests whether any lane is large and only then reduces lane by lane, so
    the common case costs a call and a compare per vector."""
    symbol = f"ember_math_{('sin', 'cos')[shift]}_big_{fmt.suffix}"
    if symbol in module.globals:
        return module.globals[symbol]
    # the variants call `lane`, which has no variants: the SLP vectorizer would turn their calls of `fn`
    # back into a call of the variant itself
    lane = ir.Function(module, ir.FunctionType(fmt.ty, [fmt.ty]), f"{symbol}_lane")
    lane.linkage = "internal"
    lane.attributes = _Attrs(["noinline", "nounwind", "memory(none)", "willreturn"])
    b = ir.IRBuilder(lane.append_basic_block("entry"))
    b.ret(_sincos_big(_Emit(b, fmt), lane.args[0], shift))
    fn = ir.Function(module, ir.FunctionType(fmt.ty, [fmt.ty]), symbol)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.call(lane, [fn.args[0]]))
    variants = []
    for width in _SINCOS_WIDTHS[fmt.suffix]:
        vty = ir.VectorType(fmt.ty, width)
        vfn = ir.Function(module, ir.FunctionType(vty, [vty]), f"{symbol}_v{width}")
        vfn.linkage = "internal"
        vfn.attributes = _Attrs(["nounwind", "memory(none)", "willreturn"])
        vb = ir.IRBuilder(vfn.append_basic_block("entry"))
        (vx,) = vfn.args
        fabs = _declared(module, f"llvm.fabs.v{width}{fmt.suffix}", vty, [vty])
        limit = ir.Constant(vty, [_SINCOS_BIG[fmt.suffix]] * width)
        big = vb.fcmp_unordered(">=", vb.call(fabs, [vx]), limit)       # NaN too
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
    fn.attributes = _Attrs(["noinline", "nounwind", "memory(none)", "willreturn", "speculatable",
                            '"vector-function-abi-variant"="' + ",".join(variants) + '"'])
    return fn


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


def _sincos(e: _Emit, x, shift: int):
    """sin(x + shift pi/2): x = n pi/2 + r (three-part Cody-Waite), then sin or cos of r by quadrant, below
    _SINCOS_BIG; from there on (and for infinities and NaN) the result of a separate function, selected.

    Cody-Waite is accurate while x * 2/pi rounds to within 2**-6 of n (n < 2**(mant - 6)); r is clamped so
    the lanes that take the other result stay finite."""
    small = e.cmp("<", e.abs(x), e.c(_SINCOS_BIG[e.f.suffix]))     # false for NaN
    xs = e.select(small, x, e.c(0.0))
    n = e.rint(e.mul(xs, e.c(_TWO_OVER_PI)))
    r = xs
    for part in e.f.pio2:
        r = e.fma(e.neg(n), e.c(part), r)
    r = e.clamp(r, -0.8, 0.8)
    quadrant = e.to_int(e.sub(n, e.mul(e.c(4.0), e.floor(e.mul(n, e.c(0.25))))))
    out = _sincos_of_reduced(e, r, quadrant, shift)
    return e.select(small, out, e.b.call(_big_function(e.module, shift, e.f), [x]))


def _sin(e: _Emit, x):
    return e.select(e.cmp("==", x, e.c(0.0)), x, _sincos(e, x, 0))   # keeps -0


def _cos(e: _Emit, x):
    return _sincos(e, x, 1)


# ---- erf ---------------------------------------------------------------------------------------------

# float32 erf: below 1, x (2/sqrt(pi) + x**2 S(x**2)), S a relative minimax fit (error 2**-31); from 1 to
# 3.92, a polynomial in t = |x| - m (absolute error 2**-31) whose constant erf(m) is a float32 to 4e-14;
# above, 1. Fits as for tanh (Lawson-weighted least squares), coefficients rounded to float32.
_ERF_F32_C0 = (1.128379225730896, -5.8635382771399236e-08)     # 2/sqrt(pi) = hi + lo
_ERF_F32_SMALL = (-0.37612637877464294, 0.11283790320158005, -0.02686593495309353, 0.005222566891461611,
                  -0.0008507701568305492, 0.00011444311530794948, -1.019219598674681e-05)
_ERF_F32_MID = 2.508854389190674
_ERF_F32_BIG = (0.9996119141578674, 0.002083783270791173, -0.005227899178862572, 0.008049558848142624,
                -0.00835504848510027, 0.00596896605566144, -0.002763368422165513, 0.0005619272706098855,
                0.0002389892761129886, -0.0002459429088048637, 8.165415783878416e-05, 5.936211891821586e-06,
                -1.527136737422552e-05, 3.6253911730455e-06, 8.375031370633224e-07, -3.583960506148287e-07)
_ERF_F32_ONE = 3.92          # erf rounds to 1 from 3.9192 on


def _erf_f32(e: _Emit, x):
    """float32 erf from two polynomials and no division (5x faster than float64 erf rounded, which was
    0.50 ulp; this is 1.35 ulp over all float32). t = |x| - m is exact from 1 on (both multiples of
    2**-23, |t| < 2), and the small piece adds its correction to x 2/sqrt(pi) in one fma, computed at
    x 2**40 (so x lo(2/sqrt(pi)) is not subnormal for x >= 2**-126) and scaled back exactly."""
    a = e.abs(x)
    u = e.mul(*[e.above(a, 2.0 ** -16)] * 2)                 # below, x**2 S(x**2) is under 2**-33 of 2/sqrt(pi)
    big_a = e.mul(a, e.c(2.0 ** 40))
    hi, lo = _ERF_F32_C0
    corr = e.fma(e.mul(big_a, u), e.poly(u, _ERF_F32_SMALL), e.mul(big_a, e.c(lo)))
    small = e.mul(e.fma(big_a, e.c(hi), corr), e.c(2.0 ** -40))
    big = e.poly(e.sub(a, e.c(_ERF_F32_MID)), _ERF_F32_BIG)
    y = e.select(e.cmp("<", a, e.c(1.0)), small, big)
    y = e.select(e.cmp(">=", a, e.c(_ERF_F32_ONE)), e.c(1.0), y)
    return e.copysign(y, x)                                  # NaN stays NaN through both pieces


def _erf(e: _Emit, x):
    if e.f is F32:
        return _erf_f32(e, x)
    a = e.abs(x)
    u = e.mul(x, x)
    small = e.fma(x, e.c(_ERF_SMALL[0]), e.mul(x, e.fma(u, e.poly(u, _ERF_SMALL[1:]), e.c(_ERF_SMALL_LO))))
    # pick each piece's coefficients by selects (a small table lookup that vectorizes)
    piece = [e.cmp(">=", a, e.c(mid - 0.5 if mid < 4 else 4.0)) for mid, _, _ in _ERF_PIECES]

    def pick(values: Sequence[float]):
        out = e.c(values[0])
        for cond, v in zip(piece[1:], values[1:]):
            out = e.select(cond, e.c(v), out)
        return out

    mids, coeffs, los = zip(*_ERF_PIECES)
    t = e.sub(a, pick(mids))
    tail = e.c(0.0)
    for j in reversed(range(1, len(coeffs[0]))):
        tail = e.fma(tail, t, pick([c[j] for c in coeffs]))
    large = e.add(pick([c[0] for c in coeffs]), e.fma(t, tail, pick(los)))
    large = e.select(e.cmp(">=", a, e.c(6.0)), e.c(1.0), large)
    return e.select(e.cmp("<", a, e.c(1.0)), small, e.copysign(large, x))


def _in_f64(e: _Emit, name: str, *args):
    """A float32 function evaluated by its float64 version and rounded once (error <= 0.5 ulp + 2**-29)."""
    wide = [e.b.fpext(a, DOUBLE) for a in args]
    return e.b.fptrunc(e.call(name, *wide, fmt=F64), FLOAT)


# ---- pow ---------------------------------------------------------------------------------------------

def _two_sum(e: _Emit, a, b):
    s = e.add(a, b)
    bb = e.sub(s, a)
    return s, e.add(e.sub(a, e.sub(s, bb)), e.sub(b, bb))


def _two_prod(e: _Emit, a, b):
    p = e.mul(a, b)
    return p, e.fma(a, b, e.neg(p))


def _log_dd(e: _Emit, x):
    """log(x) as a double-double (hi, lo) for a positive finite normal-or-subnormal float64 x."""
    tiny = e.cmp("<", x, e.c(2.0 ** -1022))
    xs = e.select(tiny, e.mul(x, e.c(2.0 ** 54)), x)
    k, f = _split_mantissa(e, xs)
    k = e.select(tiny, e.sub(k, e.c(54.0)), k)
    d = e.add(e.c(2.0), f)
    d_lo = e.sub(f, e.sub(d, e.c(2.0)))                    # 2 + f = d + d_lo exactly
    s = e.div(f, d)
    s_lo = e.div(e.sub(e.fma(e.neg(s), d, f), e.mul(s, d_lo)), d)   # s + s_lo = f / (2 + f)
    z, z_lo = _two_prod(e, s, s)
    z_lo = e.fma(e.add(s, s), s_lo, z_lo)
    c3, c3_lo = _two_prod(e, z, s)
    c3_lo = e.add(c3_lo, e.fma(z, s_lo, e.mul(z_lo, s)))
    two_thirds, two_thirds_lo = 2.0 / 3.0, 3.700743415417188e-17
    w, w_lo = _two_prod(e, c3, e.c(two_thirds))
    w_lo = e.add(w_lo, e.fma(c3, e.c(two_thirds_lo), e.mul(c3_lo, e.c(two_thirds))))
    tail = e.mul(e.mul(c3, z), e.poly(z, [2.0 / (2 * j + 1) for j in range(2, 2 + e.f.log_terms)]))
    hi, lo = e.f.ln2_short
    a, a_lo = _two_sum(e, e.mul(k, e.c(hi)), e.add(s, s))
    b, b_lo = _two_sum(e, a, w)
    low = e.add(e.add(e.add(a_lo, b_lo), e.add(e.add(s_lo, s_lo), w_lo)), e.fma(k, e.c(lo), tail))
    out = e.add(b, low)
    return out, e.sub(low, e.sub(out, b))


def _pow_core_f64(e: _Emit, ax, y):
    """|x|**y for finite positive |x| and finite y: a double-double log, then exp, ~1 ulp."""
    lg, lg_lo = _log_dd(e, ax)
    z, z_lo = _two_prod(e, y, lg)
    hi, lo, k = _exp_unscaled(e, z, e.fma(y, lg_lo, z_lo))
    return e.scale(e.add(hi, lo), k)


def _pow(e: _Emit, x, y):
    """np.power for floats: C99 pow's special cases around |x|**y."""
    if e.f is F32:
        return _in_f64(e, "pow_f32_in_f64", x, y)
    return _pow_specials(e, x, y, _pow_core_f64)


def _pow_f32_in_f64(e: _Emit, x, y):
    """float32 pow in float64: exp(y log|x|) with plain float64 log and exp is far below half an f32 ulp."""
    return _pow_specials(e, x, y, lambda e, ax, y: e.call("exp", e.mul(y, e.call("log", ax))))


def _pow_specials(e: _Emit, x, y, core: Callable):
    one, zero, inf = e.c(1.0), e.c(0.0), e.c(math.inf)
    ax, ay = e.abs(x), e.abs(y)
    x_ok = e.b.and_(e.cmp("<", ax, inf), e.cmp(">", ax, zero))
    y_ok = e.cmp("<", ay, inf)
    out = core(e, e.select(x_ok, ax, one), e.select(y_ok, y, zero))
    y_int = e.cmp("==", e.floor(y), y)
    half = e.mul(y, e.c(0.5))
    y_odd = e.b.and_(y_int, e.cmp("!=", e.floor(half), half))
    x_neg = e.cmp("<", x, zero)
    out = e.select(e.b.and_(x_neg, y_odd), e.neg(out), out)
    out = e.select(e.b.and_(x_neg, e.b.and_(y_ok, e.b.not_(y_int))), e.c(math.nan), out)
    # x = +-0 or +-inf: 0 or inf by the sign of y (and of the product), odd integer y keeps x's sign
    y_neg = e.cmp("<", y, zero)
    at_zero = e.select(y_neg, inf, zero)
    edge = e.select(e.cmp("==", ax, zero), at_zero, e.select(y_neg, zero, inf))
    edge = e.select(e.b.and_(x_neg, y_odd), e.neg(edge), e.select(y_odd, e.copysign(edge, x), edge))
    out = e.select(e.b.not_(x_ok), edge, out)
    # y = +-inf: inf when |x| < 1 and y < 0, or |x| > 1 and y > 0; 0 otherwise; 1 at |x| = 1
    grows = e.b.icmp_unsigned("==", e.cmp("<", ax, one), y_neg)
    at_inf = e.select(e.cmp("==", ax, one), one, e.select(grows, inf, zero))
    out = e.select(e.cmp("==", ay, inf), at_inf, out)
    out = e.select(e.b.or_(e.isnan(x), e.isnan(y)), e.c(math.nan), out)
    return e.select(e.b.or_(e.cmp("==", y, zero), e.cmp("==", x, one)), one, out)


# ---- sqrt, rsqrt -------------------------------------------------------------------------------------

def _sqrt(e: _Emit, x):
    return e.intrinsic("llvm.sqrt", x)


def _rsqrt(e: _Emit, x):
    return e.div(e.c(1.0), _sqrt(e, x))


FUNCTIONS: dict[str, tuple[int, Callable]] = {
    "exp": (1, _exp), "expm1": (1, _expm1), "log": (1, _log), "log1p": (1, _log1p), "tanh": (1, _tanh),
    "logistic": (1, _logistic), "sin": (1, _sin), "cos": (1, _cos), "pow": (2, _pow), "erf": (1, _erf),
    "sqrt": (1, _sqrt), "rsqrt": (1, _rsqrt), "pow_f32_in_f64": (2, _pow_f32_in_f64),
}
NAMES = tuple(n for n in FUNCTIONS if n != "pow_f32_in_f64")


def _function(module: ir.Module, name: str, fmt: _Format) -> ir.Function:
    """`internal alwaysinline` definition of `name` for `fmt` in `module`, built on first use."""
    symbol = f"ember.math.{name}.{fmt.suffix}"
    if symbol in module.globals:
        return module.globals[symbol]
    arity, body = FUNCTIONS[name]
    fn = ir.Function(module, ir.FunctionType(fmt.ty, [fmt.ty] * arity), symbol)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    builder.ret(body(_Emit(builder, fmt), *fn.args))
    return fn


def call_math(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value], dtype) -> ir.Value:
    """Emit `name(*args)` for float32 or float64 `dtype`: a call of an inline, branch-free IR function."""
    dtype = np.dtype(dtype)
    if name not in NAMES:
        raise ValueError(f"mathlib has no function {name!r}; it has {', '.join(NAMES)}")
    if dtype not in _FORMATS:
        raise TypeError(f"mathlib computes in float32 or float64, not {dtype}: extend float16 to float32 "
                        "and round the result")
    fmt = _FORMATS[dtype]
    if len(args) != FUNCTIONS[name][0] or any(a.type != fmt.ty for a in args):
        raise TypeError(f"{name} takes {FUNCTIONS[name][0]} {dtype} argument(s), got {[str(a.type) for a in args]}")
    if name in ("sin", "cos"):
        # the large-argument call makes the caller spill vectors around it; a frame realigned to 64 keeps a
        # 512-bit spill in one cache line (misaligned, as the randomized stack left it in half the
        # processes, the common case ran 1.8x as long as before instead of 1.2x). alignstack(64) alone
        # does not realign; it is printed last, so the define line still ends in ")" (graph.py's regex)
        attrs = builder.function.attributes
        set.add(attrs, '"stackrealign"')                          # a string attribute llvmlite does not know
        attrs.alignstack = max(attrs.alignstack, 64)
    return builder.call(_function(builder.module, name, fmt), list(args))

