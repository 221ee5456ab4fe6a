"""Second derivatives of every differentiable primitive: hessian-vector products (grad of grad)
against central differences of the first derivative, in float64, at random points and at special
points where the function is smooth: zeros and repeated zeros (products, integer powers), ±1, large
and tiny magnitudes. Kinks and ties (abs at 0, max/min ties, clip bounds) follow JAX's conventions
instead and are not tested here. The registry is enumerated: a primitive must have cases or be listed
in EXCLUDED with a reason.

Each case differentiates L = sum(w1 * out) + sum(w2 * out * out) / 2 with respect to every float
argument, so a linear primitive is tested through the transposes of its VJP rule and a nonlinear one
through its second derivative too. The direction v is scaled by min(|x|, 1) (1 at zeros), so steps
near 0 are relative; the tolerance allows for the rounding of the gradient that the differences
divide by the step, and for their O(eps**2) truncation error.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.tracer import prims as P
from ember.tracer.primitive import primitives
from tests.helpers import prim_names

F32 = np.dtype(np.float32)


@dataclasses.dataclass
class Case:
    prim: str
    fn: Callable  # float64 arrays -> array; every argument is differentiated
    points: list  # tuples of float64 arrays
    note: str = ""
    eps: float = 1e-5
    rtol: float = 1e-6


def _a(*vals) -> np.ndarray:
    return np.array(vals, np.float64)


def _rand(seed: int, shape, lo=-2.0, hi=2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def _spd(seed: int, n: int) -> np.ndarray:
    """A well-conditioned symmetric positive-definite n x n matrix (a a^T + n I)."""
    a = _rand(seed, (n, n))
    return a @ a.T + n * np.eye(n)


def _unary(prim: str, fn, special, lo=-2.0, hi=2.0, **kw) -> Case:
    """Random points in [lo, hi] and each special value (in a vector with a random one)."""
    pts = [(_rand(1, (5,), lo, hi),), (_rand(2, (2, 3), lo, hi),), (_a(*special),)]
    return Case(prim, fn, pts, **kw)


def _binary(prim: str, fn, special_pairs, x_range=(-2.0, 2.0), y_range=(-2.0, 2.0), **kw) -> Case:
    pts = [(_rand(3, (5,), *x_range), _rand(4, (5,), *y_range)),
           (_rand(5, (2, 3), *x_range), _rand(6, (), *y_range))]
    xs, ys = zip(*special_pairs)
    pts.append((_a(*xs), _a(*ys)))
    return Case(prim, fn, pts, **kw)


_BIG, _TINY = 1e6, 1e-6
_IDX = np.array([[0], [2], [2], [4]])  # gather/scatter indices into axis 0, with a repeat


def _rem_pairs():
    """x / y away from the integers, where rem jumps."""
    return [(0.5, 0.3), (-0.5, 0.3), (7.3, -2.1), (1e6 + 0.35, 1.0), (1e-7, 3e-7), (-2.2, -0.75)]


CASES = [
    _unary("neg", P.neg, [0.0, 1.0, -1.0, _BIG, _TINY]),
    _unary("exp", P.exp, [0.0, 1.0, -1.0, 30.0, -30.0, _TINY]),
    _unary("log", P.log, [1.0, _BIG, _TINY, 0.5], 0.1, 3.0),
    _unary("log1p", P.log1p, [0.0, 1.0, _BIG, _TINY, -0.5], -0.5, 3.0),
    _unary("expm1", P.expm1, [0.0, 1.0, -1.0, 20.0, _TINY, -_TINY]),
    _unary("tanh", P.tanh, [0.0, 1.0, -1.0, 5.0, -5.0, _TINY]),
    _unary("logistic", P.logistic, [0.0, 1.0, -1.0, 10.0, -10.0, _TINY]),
    _unary("sin", P.sin, [0.0, 1.0, -1.0, 1e3, _TINY]),
    _unary("cos", P.cos, [0.0, 1.0, -1.0, 1e3, _TINY]),
    _unary("sqrt", P.sqrt, [1.0, _BIG, _TINY, 0.25], 0.1, 3.0),
    _unary("rsqrt", P.rsqrt, [1.0, _BIG, _TINY, 0.25], 0.1, 3.0),
    _unary("abs", P.abs, [1.0, -1.0, _BIG, -_TINY, 0.5], 0.2, 3.0, note="away from the kink at 0"),
    _unary("sign", P.sign, [0.0, 1.0, -1.0, _BIG, -_TINY]),
    _unary("floor", P.floor, [0.0, 1.0, -1.0, 0.5, _BIG + 0.5]),
    _unary("ceil", P.ceil, [0.0, 1.0, -1.0, 0.5, _BIG + 0.5]),
    _unary("round", P.round, [0.0, 1.0, -1.0, 0.3, _BIG + 0.3]),
    _unary("erf", P.erf, [0.0, 1.0, -1.0, 4.0, -4.0, _TINY]),
    _unary("tan", P.tan, [0.0, 1.0, -1.0, 1e3, _TINY], -1.2, 1.2),
    _unary("atan", P.atan, [0.0, 1.0, -1.0, _BIG, _TINY]),
    _unary("asin", P.asin, [0.0, 0.5, -0.5, 0.99, _TINY], -0.9, 0.9),
    _unary("acos", P.acos, [0.0, 0.5, -0.5, 0.99, _TINY], -0.9, 0.9),
    _unary("sinh", P.sinh, [0.0, 1.0, -1.0, 20.0, _TINY]),
    _unary("cosh", P.cosh, [0.0, 1.0, -1.0, 20.0, _TINY]),
    _unary("asinh", P.asinh, [0.0, 1.0, -1.0, _BIG, _TINY]),
    _unary("acosh", P.acosh, [1.5, 2.0, 1.01, _BIG], 1.1, 3.0),
    _unary("atanh", P.atanh, [0.0, 0.5, -0.5, 0.99, _TINY], -0.9, 0.9),
    _unary("cbrt", P.cbrt, [1.0, -1.0, 8.0, _BIG, -_TINY], 0.2, 3.0),
    _unary("exp2", P.exp2, [0.0, 1.0, -1.0, 30.0, -30.0, _TINY]),
    _unary("log2", P.log2, [1.0, 8.0, _BIG, _TINY, 0.5], 0.1, 3.0),
    _unary("log10", P.log10, [1.0, 1000.0, _BIG, _TINY, 0.5], 0.1, 3.0),
    _unary("erfc", P.erfc, [0.0, 1.0, -1.0, 4.0, -4.0, _TINY]),
    _unary("erf_inv", P.erf_inv, [0.0, 0.5, -0.5, 0.99, _TINY], -0.9, 0.9),
    # one point set each: their second derivatives are polygamma (zeta's Euler-Maclaurin, about 0.4 s to
    # compile per graph)
    Case("lgamma", P.lgamma, [(_a(0.3, 1.0, 2.0, 4.5, 30.0, -2.5, _BIG, _TINY),)]),
    Case("digamma", P.digamma, [(_a(0.3, 1.0, 1.4616321449683622, 4.5, 30.0, -2.5, _BIG),)]),
    _binary("add", P.add, [(0.0, 0.0), (1.0, -1.0), (_BIG, _TINY)]),
    _binary("sub", P.sub, [(0.0, 0.0), (1.0, -1.0), (_BIG, _TINY)]),
    _binary("mul", P.mul, [(0.0, 0.0), (0.0, 2.0), (1.0, -1.0), (_BIG, _TINY), (_TINY, _TINY)]),
    _binary("div", P.div, [(0.0, 1.0), (0.0, -1.0), (1.0, 1.0), (_BIG, _TINY), (_TINY, _BIG)],
            y_range=(0.5, 2.0)),
    _binary("pow", P.pow, [(1.0, 0.0), (1.0, 1.0), (0.5, 3.0), (_BIG, 0.5), (2.0, -2.0)], (0.5, 2.0)),
    Case("pow", lambda x: P.pow(x, np.array([0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0])),
         [(_a(0.0, 0.0, 0.0, 0.0, 1.0, -1.0, -1.0, _BIG),), (_a(*([_TINY] * 8)),)],
         note="integer exponents (a constant), base at zero"),
    *[Case("pow", lambda x, k=k: P.pow(x, k), [(_a(0.0, 0.0, 1.0, -1.0, 1e3, 1e-3),)],
           note=f"x ** {k} (a literal)") for k in (0, 1, 2, 3)],
    _binary("atan2", P.atan2, [(0.0, 1.0), (1.0, -1.0), (-1.0, -1.0), (_BIG, _TINY), (_TINY, _BIG)]),
    _binary("copysign", P.copysign, [(1.0, -1.0), (-2.0, 3.0), (_BIG, -_TINY), (0.5, 2.0)],
            note="away from the kink at x = 0 and the jump at y = 0"),
    _binary("logaddexp", P.logaddexp, [(0.0, 0.0), (1.0, -1.0), (30.0, -30.0), (_TINY, 2.0)]),
    _binary("logaddexp2", P.logaddexp2, [(0.0, 0.0), (1.0, -1.0), (30.0, -30.0), (_TINY, 2.0)]),
    _binary("max", P.maximum, [(0.0, 1.0), (-1.0, 1.0), (_BIG, -_BIG), (_TINY, -_TINY)], note="no ties"),
    _binary("min", P.minimum, [(0.0, 1.0), (-1.0, 1.0), (_BIG, -_BIG), (_TINY, -_TINY)], note="no ties"),
    Case("rem", P.rem, [(_a(0.5, -0.5, 7.3, -2.2), _a(0.3, 0.3, -2.1, -0.75))] +
         [(_a(x), _a(y)) for x, y in _rem_pairs()]),
    Case("select", lambda t, f: P.select(np.array([True, False, True, False]), t, f),
         [(_rand(7, (4,)), _rand(8, (4,))), (_a(0.0, 0.0, 1.0, -1.0), _a(_BIG, _TINY, 0.0, 0.0))]),
    Case("convert_element_type", lambda x: P.sin(P.convert_element_type(P.convert_element_type(x, F32),
                                                                        np.float64)),
         [(_rand(9, (5,)),), (_a(0.0, 1.0, -1.0),)], note="through float32: coarser steps", eps=1e-2,
         rtol=1e-3),
    Case("broadcast_in_dim", lambda x: P.broadcast_in_dim(x, (2, 3), (1,)),
         [(_rand(10, (3,)),), (_a(0.0, 1.0, _BIG),)]),
    Case("reshape", lambda x: P.reshape(x, (3, 2)), [(_rand(11, (2, 3)),)]),
    Case("transpose", lambda x: P.transpose(x, (1, 0)), [(_rand(12, (2, 3)),)]),
    Case("concatenate", lambda x, y: P.concatenate([x, y], 0), [(_rand(13, (2,)), _rand(14, (3,)))]),
    Case("pad", lambda x, v: P.pad(x, v, ((1, 2, 1),)),
         [(_rand(15, (3,)), np.array(0.5)), (_a(0.0, 1.0, -1.0), np.array(0.0))]),
    Case("slice", lambda x: P.slice(x, (1,), (4,)), [(_rand(16, (5,)),)]),
    Case("rev", lambda x: P.rev(x, (0,)), [(_rand(17, (4,)),)]),
    Case("reduce_sum", lambda x: P.reduce_sum(x, (1,)),
         [(_rand(18, (2, 3)),), (np.array([[0.0, 0.0, 1.0], [-1.0, _BIG, _TINY]]),)]),
    Case("reduce_max", lambda x: P.reduce_max(x, (0,)), [(_rand(19, (5,)),), (_a(0.0, 1.0, -1.0),)],
         note="no ties"),
    Case("reduce_min", lambda x: P.reduce_min(x, (0,)), [(_rand(20, (5,)),), (_a(0.0, 1.0, -1.0),)],
         note="no ties"),
    Case("reduce_prod", lambda x: P.reduce_prod(x, (0,)),
         [(_rand(21, (5,)),), (_a(0.0, 2.0, 3.0),), (_a(0.0, 0.0, 3.0),), (_a(0.0, 0.0, 0.0),), (_a(1.0, -1.0, 1.0),),
          (_a(_BIG, _TINY, 2.0, 0.5),), (_a(0.0, 3.0, 0.0, 2.0, 0.0),), (_a(0.0),)]),
    Case("reduce_prod", lambda x: P.reduce_prod(x, (0, 2)),
         [(_rand(22, (2, 3, 2)),), (np.where(_rand(23, (2, 3, 2)) > 0.5, 0.0, _rand(24, (2, 3, 2))),)],
         note="two of three axes, zeros"),
    Case("dot_general", lambda a, b: P.dot_general(a, b, (((1,), (0,)), ((), ()))),
         [(_rand(25, (2, 3)), _rand(26, (3, 4))), (np.zeros((2, 3)), _rand(27, (3, 4)))]),
    Case("dot_general", lambda a, b: P.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
         [(_rand(28, (2, 2, 3)), _rand(29, (2, 3, 2)))], note="batch dims"),
    # bilinear: grad of grad goes through the transpose rules' own transposes (lhs dilation, groups)
    Case("conv_general_dilated", lambda x, w: P.conv_general_dilated(
        x, w, window_strides=(2,), padding=((1, 0),), lhs_dilation=(1,), rhs_dilation=(2,),
        dimension_numbers=((0, 1, 2),) * 3, feature_group_count=2), [(_rand(41, (2, 4, 5)), _rand(42, (4, 2, 2)))]),
    Case("conv_general_dilated", lambda x, w: P.conv_general_dilated(
        x, w, window_strides=(1,), padding=((0, 1),), lhs_dilation=(2,), rhs_dilation=(1,),
        dimension_numbers=((0, 2, 1), (2, 1, 0), (0, 2, 1)), batch_group_count=2),
         [(_rand(43, (4, 3, 2)), _rand(44, (2, 2, 4)))], note="batch groups"),
    # linear (sum), piecewise linear without ties (max, min): second derivatives through the VJPs' pads
    *[Case(name, lambda x, name=name: P.reduce_window(
        primitives[name], x, window_dimensions=(2, 2), window_strides=(2, 1), padding=((1, 0), (0, 1)),
        base_dilation=(1, 2), window_dilation=(1, 1)), [(_rand(45, (3, 4)),)], note="no ties")
      for name in ("reduce_window_sum", "reduce_window_max", "reduce_window_min")],
    Case("gather", lambda x: P.gather(x, _IDX), [(_rand(30, (5, 2)),)]),
    Case("scatter_add", lambda x, u: P.scatter_add(x, _IDX, u), [(_rand(31, (5, 2)), _rand(32, (4, 2)))]),
    Case("scatter", lambda x, u: P.scatter(x, _IDX[:3:2], u), [(_rand(33, (5, 2)), _rand(34, (2, 2)))]),
    # linear in x; its gradient in the updates is JAX's NotImplementedError at a repeated index
    Case("scatter_mul", lambda x: P.scatter_mul(x, _IDX, _rand(35, (4, 2))), [(_rand(36, (5, 2)),)]),
    Case("scatter_min", lambda x, u: P.scatter_min(x, _IDX, u), [(_rand(37, (5, 2)), _rand(38, (4, 2)))]),
    Case("scatter_max", lambda x, u: P.scatter_max(x, _IDX, u), [(_rand(39, (5, 2)), _rand(40, (4, 2)))]),
    Case("stop_gradient", P.stop_gradient, [(_rand(35, (4,)),)], note="zero derivatives"),
    Case("cumsum", lambda x: P.cumsum(x, 1, True), [(_rand(40, (2, 5)),)]),
    Case("cumprod", lambda x: P.cumprod(x, 0), [(_rand(41, (5,)),), (_a(0.0, 2.0, 0.0, 3.0, -1.0),)]),
    Case("cummax", lambda x: P.cummax(x, 0), [(_rand(42, (6,)),)], note="no ties"),
    Case("cummin", lambda x: P.cummin(x, 1, True), [(_rand(43, (2, 5)),)], note="no ties"),
    Case("cumlogsumexp", lambda x: P.cumlogsumexp(x, 0, True), [(_rand(46, (5,)),), (_a(-30.0, 0.0, 1.0, 30.0),)]),
    Case("sort", lambda x, y: P.sort((x, y), 1)[1] * P.sort((x, y), 1)[0], [(_rand(44, (2, 5)), _rand(45, (2, 5)))],
         note="no ties"),
    Case("custom_vjp_call", lambda x: _custom_sin(x), [(_rand(36, (4,)),), (_a(0.0, 1.0, _BIG),)]),
    Case("remat_call", lambda x, y: _remat_sin_mul(x, y), [(_rand(37, (4,)), _rand(38, (4,)))]),
    Case("checkpoint_name", lambda x: P.mul(P.checkpoint_name(P.sin(x), "s"), x), [(_rand(39, (4,)),)]),
    Case("custom_jvp_call", lambda x: _custom_jvp_sin(x), [(_rand(37, (4,)),), (_a(0.0, 1.0, _BIG),)]),
    Case("cholesky", lambda x: P.cholesky(P.mul(P.add(x, P.transpose(x, (1, 0))), 0.5)), [(_spd(40, 3),)],
         note="symmetrized"),
    Case("triangular_solve", lambda a, b: P.triangular_solve(a, b, left_side=True, lower=True),
         [(_spd(41, 3), _rand(42, (3, 2)))]),
    Case("triangular_solve", lambda a, b: P.triangular_solve(a, b, transpose_a=True, unit_diagonal=True),
         [(_spd(43, 3), _rand(44, (2, 3)))], note="right side, upper, transposed, unit diagonal"),
    Case("lu", lambda x: P.lu(x)[0], [(_rand(45, (3, 3)),)]),
    Case("qr", lambda x: P.qr(x, full_matrices=False)[1], [(_rand(46, (4, 3)),)]),
    Case("eigh", lambda x: P.eigh(P.mul(P.add(x, P.transpose(x, (1, 0))), 0.5))[1], [(_spd(47, 3),)],
         note="eigenvalues, symmetrized"),
    Case("svd", lambda x: P.svd(x, full_matrices=False, compute_uv=False)[0], [(_rand(48, (4, 3)),)],
         note="singular values"),
]


@ember.custom_vjp
def _custom_sin(x):
    return enp.sin(x)


_custom_sin.defvjp(lambda x: (enp.sin(x), x), lambda x, g: (g * enp.cos(x),))
_remat_sin_mul = ember.checkpoint(lambda x, y: enp.sin(x * y) * x)


@ember.custom_jvp
def _custom_jvp_sin(x):
    return enp.sin(x)


_custom_jvp_sin.defjvp(lambda primals, tangents: (_custom_jvp_sin(*primals), enp.cos(primals[0]) * tangents[0]))

EXCLUDED = {
    **{name: "boolean result: no derivative" for name in ("eq", "ne", "lt", "le", "gt", "ge", "is_finite")},
    **{name: "integer and bool operands only" for name in ("and", "or", "not", "xor")},
    **{name: "integer operands only" for name in ("shift_left", "shift_right_logical", "shift_right_arithmetic",
                                                  "population_count", "clz")},
    "bitcast_convert_type": "reinterprets bits: no derivative (JAX gives none)",
    "argmax": "integer result: no derivative",
    "argmin": "integer result: no derivative",
    "iota": "no operand",
    "nextafter": "no derivative (JAX has none: grad raises DifferentiationError, a NotImplementedError)",
    "fusion": "internal to the optimizer: grad never meets it",
    "while": "no reverse mode (as JAX): the trip count is unknown to a reverse pass",
    **{name: "holds bodies: second derivatives of programs using it in tests/tracer/test_prims_control.py"
       for name in ("scan", "cond")},
    **{name: "its derivative in x (q) is itself at the next order, compiled in about 0.4 s per graph: digamma's "
             "second derivative here, its gradients against JAX in tests/numpy/test_special_functions.py"
       for name in ("polygamma", "zeta")},
}


def _loss(fn, w1, w2):
    def loss(*args):
        out = fn(*args)
        return P.add(_total(P.mul(out, w1)), P.mul(_total(P.mul(P.mul(out, out), w2)), 0.5))

    return loss


def _total(x):
    return P.reduce_sum(x, tuple(range(len(x.shape)))) if x.shape else x


def _weights(fn, args):
    shape = np.shape(ember.jit(fn)(*args))
    rng = np.random.default_rng(99)
    return rng.uniform(0.5, 1.5, shape), rng.uniform(0.5, 1.5, shape)


def hvp(loss, args, vs):
    """Hessian of `loss` times vs: the gradient of <grad loss, v>."""
    argnums = tuple(range(len(args)))
    grad = ember.grad(loss, argnums=argnums)

    def along_v(*a):
        return sum(enp.sum(g * v) for g, v in zip(grad(*a), vs))

    return ember.grad(along_v, argnums=argnums)(*args)


def fd_hvp(loss, args, vs, eps):
    """Central differences of the gradient along vs, and the rounding noise they carry."""
    grad = ember.jit(ember.grad(loss, argnums=tuple(range(len(args)))))
    plus = grad(*(a + eps * v for a, v in zip(args, vs)))
    minus = grad(*(a - eps * v for a, v in zip(args, vs)))
    noise = [64 * np.finfo(np.float64).eps * (np.abs(p) + np.abs(m)) / (2 * eps) for p, m in zip(plus, minus)]
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)], noise


def _directions(args, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, np.shape(a)) * np.where(a == 0, 1.0, np.minimum(np.abs(a), 1.0)) for a in args]


def _case_id(case: Case) -> str:
    return f"{case.prim}-{case.note}" if case.note else case.prim


@pytest.mark.parametrize("case", [pytest.param(c, id=_case_id(c)) for c in CASES])
def test_second_derivatives_match_finite_differences(case, monkeypatch):
    assert case.prim in prim_names(case.fn, *case.points[0]), f"case for {case.prim} does not use it"
    for k, args in enumerate(case.points):
        if k == 1:  # the rules are the subject: the first point compiles, the others run on the oracle backend
            monkeypatch.setenv("EMBER_BACKEND", "numpy")
        w1, w2 = _weights(case.fn, args)
        loss = _loss(case.fn, w1, w2)
        vs = _directions(args, k)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = hvp(loss, args, vs)
            want, noise = fd_hvp(loss, args, vs, case.eps)
        for i, (g, f, n) in enumerate(zip(got, want, noise)):
            assert np.all(np.isfinite(g)), f"{case.prim} at point {k}, argument {i}: {g}"
            scale = max(np.max(np.abs(f), initial=0.0), np.max(np.abs(g), initial=0.0))
            bad = np.abs(g - f) > case.rtol * scale + n + 100 * case.eps ** 2  # rounding, truncation
            assert not np.any(bad), (f"{case.prim} at point {k}, argument {i}: {args}\n"
                                     f"grad of grad {g[bad]}\nfinite differences {f[bad]} (noise {n[bad]})")


def test_every_differentiable_primitive_has_cases_or_a_reason():
    covered = {c.prim for c in CASES}
    unlisted = sorted(set(primitives) - covered - set(EXCLUDED))
    assert not unlisted, f"primitives with neither second-derivative cases nor a reason in EXCLUDED: {unlisted}"
    assert not covered & set(EXCLUDED), f"both covered and excluded: {sorted(covered & set(EXCLUDED))}"
    assert set(EXCLUDED) <= set(primitives), f"excluded but not registered: {sorted(set(EXCLUDED) - set(primitives))}"


# --- the reproducers ------------------------------------------------------------------------------

def test_hessian_of_prod_at_zeros():
    np.testing.assert_array_equal(ember.hessian(enp.prod)(_a(0.0, 2.0, 3.0)), [[0, 3, 2], [3, 0, 0], [2, 0, 0]])
    np.testing.assert_array_equal(ember.hessian(enp.prod)(_a(0.0, 0.0, 3.0)), [[0, 3, 0], [3, 0, 0], [0, 0, 0]])


def test_prod_gradient_keeps_nans_and_infs_of_other_elements():
    """As JAX: each element's derivative is the product of the others, zeros or not."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for x, want in ((_a(0.0, 0.0, np.nan), [np.nan, np.nan, 0.0]),
                        (_a(0.0, 1.0, np.nan), [np.nan, np.nan, 0.0]),
                        (_a(0.0, 0.0, np.inf), [np.nan, np.nan, 0.0]),
                        (_a(0.0, 2.0, np.inf), [np.inf, np.nan, 0.0]),
                        (_a(0.0, 2.0, 3.0), [6.0, 0.0, 0.0])):
            np.testing.assert_array_equal(ember.grad(enp.prod)(x), want)


@pytest.mark.parametrize("k", [0, 1])
def test_second_derivative_of_constant_and_linear_powers_at_zero(k):
    assert ember.grad(ember.grad(lambda s: s ** k))(0.0) == 0.0
    assert ember.grad(ember.grad(lambda s: s ** float(k)))(np.float64(0.0)) == 0.0
