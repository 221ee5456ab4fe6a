"""erf: float32 from two polynomials and no division, float64 from a polynomial in x**2 below 1 and four
Chebyshev pieces from 1 to 6 whose coefficients are picked by selects (a small table lookup that vectorizes)."""

from __future__ import annotations

from collections.abc import Sequence

from ember.backends.math.emitter import Emitter, Value
from ember.backends.math.formats import F32

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


def erf_f32(e: Emitter, x: Value) -> Value:
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


def erf(e: Emitter, x: Value) -> Value:
    if e.f is F32:
        return erf_f32(e, x)
    a = e.abs(x)
    u = e.mul(x, x)
    small = e.fma(x, e.c(_ERF_SMALL[0]), e.mul(x, e.fma(u, e.poly(u, _ERF_SMALL[1:]), e.c(_ERF_SMALL_LO))))
    # pick each piece's coefficients by selects (a small table lookup that vectorizes)
    piece = [e.cmp(">=", a, e.c(mid - 0.5 if mid < 4 else 4.0)) for mid, _, _ in _ERF_PIECES]

    def pick(values: Sequence[float]) -> Value:
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
