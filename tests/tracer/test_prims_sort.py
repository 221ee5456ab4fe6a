"""Sorting and scan primitives (cumsum, cumprod, cummax, cummin, sort): values against live JAX (lax)
and between the numpy reference and the LLVM backend (bit for bit: NaN order, signed zeros, ties,
stability, ints and bools), the kernel description evaluated against the reference, gradients
against jax.grad (ties of cummax/cummin included) and finite differences, JVPs against jax.jvp, the
batching rules against a loop, and the rules' errors.
"""

import functools
import json
from pathlib import Path

import jax
import numpy as np
import pytest

import ember
from ember.backends.kernel import Cumulative, Sort, evaluate, lower_kernel
from ember.errors import ArgumentValueError, AxisError, DTypeError, ShapeError
from ember.tracer import prims as P
from tests.backends.test_kernel import body
from tests.helpers import check_grads, loop_vmap, raises_naming

THIS_FILE = "test_prims_sort.py"
CUMULATIVE = ("cumsum", "cumprod", "cummax", "cummin")
DTYPES = ("float32", "float64", "float16", "int32", "int8", "uint8", "bool")


def _data(rng, shape, dtype) -> np.ndarray:
    """Small integers (ties), and for floats NaNs of both signs, signed zeros and infinities."""
    x = rng.integers(-3, 4, size=shape)
    if np.dtype(dtype).kind != "f":
        return x.astype(dtype)
    x = x.astype(dtype)
    for value, p in ((np.nan, 0.1), (-np.nan, 0.05), (-0.0, 0.1), (np.inf, 0.05), (-np.inf, 0.05)):
        x[rng.random(shape) < p] = value
    return x


def _bits(x) -> np.ndarray:
    """An array's bytes, so -0.0 differs from 0.0 and NaN payloads and signs count."""
    x = np.ascontiguousarray(np.asarray(x))
    return x.view(np.uint8).reshape(x.shape + (-1,)) if x.size else x


def _same_bits(got, want, what) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=str(what))


def _same_values(got, want, what) -> None:
    """Equal bit for bit but for NaNs, which need only be NaNs (the sign and payload of a NaN an
    arithmetic op makes depend on its operands' order, which LLVM may swap)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=str(what))
        got, want = np.where(np.isnan(got), 0, got), np.where(np.isnan(want), 0, want)
    _same_bits(got, want, what)


# --- values -----------------------------------------------------------------------------------------

CUM_LAYOUTS = [((7,), 0), ((3, 4, 5), 1), ((2, 0, 3), 1)]
CUM_CASES = [(d, layout) for d in ("float32", "float64", "float16", "int32", "uint8") for layout in CUM_LAYOUTS]
# the cases JAX computes too (JAX compiles its scans slowly): NaNs, signed zeros and infinities; wrapping
JAX_CUM_CASES = [k for k, (d, layout) in enumerate(CUM_CASES) if d in ("float32", "uint8") and layout[1] == 1]


def _cumulative_data() -> list:
    rng = np.random.default_rng(0)
    xs = []
    for dtype, (shape, _) in CUM_CASES:
        x = _data(rng, shape, dtype)
        if x.dtype.kind == "f":
            x[np.isnan(x) & (rng.random(x.shape) < 0.7)] = 1.5  # some rows without NaN
        xs.append(x)
    return xs


def _all_cumulative(lax, xs, cases) -> list:
    """Every scan of every case, both ways (one function: one compile)."""
    return [getattr(lax, name)(x, layout[1], reverse=rev)
            for x, (_, layout) in zip(xs, cases) for name in CUMULATIVE for rev in (False, True)]


@functools.cache
def _jax_cumulative() -> list:
    """JAX's scans of the JAX_CUM_CASES (once for both backends' runs of the test)."""
    xs = [_cumulative_data()[k] for k in JAX_CUM_CASES]
    with np.errstate(all="ignore"), jax.enable_x64(True):
        out = jax.jit(lambda *xs: _all_cumulative(jax.lax, xs, [CUM_CASES[k] for k in JAX_CUM_CASES]))(*xs)
    return [np.asarray(o) for o in out]


def test_cumulative_matches_jax_and_both_backends():
    """The numpy reference and the LLVM backend agree bit for bit on every case (float16 sums and
    products accumulate in float32), and JAX agrees on the cases it computes."""
    xs = _cumulative_data()
    fn = lambda *xs: _all_cumulative(P, xs, CUM_CASES)  # noqa: E731
    with np.errstate(all="ignore"):
        ours, ref = ember.jit(fn)(*xs), ember.jit(fn, backend="numpy")(*xs)
    for k, (a, b) in enumerate(zip(ours, ref)):
        _same_values(a, b, (CUM_CASES[k // 8], CUMULATIVE[k % 8 // 2], bool(k % 2)))
    theirs = iter(_jax_cumulative())
    for case in JAX_CUM_CASES:
        for k in range(8 * case, 8 * case + 8):
            np.testing.assert_array_equal(ours[k], next(theirs), err_msg=str((CUM_CASES[case], k % 8)))


LOGSUMEXP_TOL = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-13}


def _logsumexp_data() -> list:
    """Floats of both signs and magnitudes with -inf entries (a row of them too), per float dtype."""
    rng = np.random.default_rng(7)
    xs = []
    for dtype in LOGSUMEXP_TOL:
        x = (rng.normal(size=(3, 6)) * 5).astype(dtype)
        x[0, 2], x[1, :] = -np.inf, -np.inf
        xs.append(x)
    return xs


def _all_logsumexp(lax, *xs) -> list:
    return [lax.cumlogsumexp(x, axis, reverse=rev) for x in xs for axis, rev in ((1, False), (0, True))]


@functools.cache
def _jax_logsumexp() -> list:
    with jax.enable_x64(True):
        return [np.asarray(o) for o in jax.jit(lambda *xs: _all_logsumexp(jax.lax, *xs))(*_logsumexp_data())]


def test_cumlogsumexp_matches_jax_and_both_backends():
    """To the last bits of exp and log (the math library's against NumPy's and XLA's)."""
    xs = _logsumexp_data()
    fn = lambda *xs: _all_logsumexp(P, *xs)  # noqa: E731
    with np.errstate(invalid="ignore"):
        ours, ref = ember.jit(fn)(*xs), ember.jit(fn, backend="numpy")(*xs)
    for k, (a, b, j) in enumerate(zip(ours, ref, _jax_logsumexp())):
        tol = LOGSUMEXP_TOL[a.dtype]
        for other in (b, j):
            assert a.dtype == other.dtype and np.array_equal(np.isneginf(a), np.isneginf(other)), k
            np.testing.assert_allclose(a.astype(np.float64), other.astype(np.float64), rtol=tol, atol=tol,
                                       err_msg=str(k))


# (dtype, shape, dimension, num_keys): keys of every dtype, with a float and an int operand alongside
SORT_CASES = [(d, shape, dim, keys) for d in DTYPES for shape, dim, keys in (((3, 9, 2), 1, 1), ((2, 37), 1, 2),
                                                                             ((6, 3), 0, 1))]
SORT_CASES.append(("float32", (2, 0, 3), 1, 2))


def _sort_data() -> list:
    rng = np.random.default_rng(1)
    xs = []
    for dtype, shape, _, _ in SORT_CASES:
        xs += [_data(rng, shape, dtype), _data(rng, shape, "float32"),
               np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)]
    return xs


def _all_sorts(sort, *xs) -> list:
    out = []
    for (x, y, z), (_, _, d, keys) in zip(zip(*[iter(xs)] * 3), SORT_CASES):
        out += sort((x, y, z), d, keys)
    return out


@functools.cache
def _jax_sorts() -> list:
    with jax.enable_x64(True):
        out = jax.jit(lambda *xs: _all_sorts(
            lambda ops, d, k: jax.lax.sort(ops, dimension=d, num_keys=k), *xs))(*_sort_data())
    return [np.asarray(o) for o in out]


def test_sort_matches_jax_and_both_backends():
    """Keys with NaNs of both signs, signed zeros and many ties: the outputs are the operands' own
    elements (bit for bit) in JAX's order, stable, from both backends."""
    xs = _sort_data()
    fn = lambda *xs: _all_sorts(P.sort, *xs)  # noqa: E731
    ours, ref = ember.jit(fn)(*xs), ember.jit(fn, backend="numpy")(*xs)
    for k, (a, b, j) in enumerate(zip(ours, ref, _jax_sorts())):
        what = (SORT_CASES[k // 3], "output", k % 3)
        _same_bits(a, b, what)
        _same_bits(a, j, (*what, "jax"))


def test_kernel_descriptions_evaluate_to_the_reference():
    """A computed operand is stored before the step reads it; a sort writes one output per operand."""
    g = body(lambda x, i: [*P.sort((P.sin(x), i), 0, 1), P.exp(P.cummax(x, 1, True))],
             ((5, 3), "float32"), ((5, 3), "int32"))
    k = lower_kernel(g, "opaque")
    steps = [type(s) for s in k.steps]
    assert Sort in steps and Cumulative in steps
    text = str(k)
    assert "sort" in text and "num_keys=1" in text and "cumulative-max" in text and "reverse" in text
    x = np.random.default_rng(2).normal(size=(5, 3)).astype(np.float32)
    i = np.arange(15, dtype=np.int32).reshape(5, 3)
    want = ember.jit(lambda x, i: [*P.sort((P.sin(x), i), 0, 1), P.exp(P.cummax(x, 1, True))], backend="numpy")(x, i)
    for a, b in zip(evaluate(k, x, i), want):
        _same_bits(a, b, "evaluate")


# --- gradients ---------------------------------------------------------------------------------------

def _weighted(fn, w):
    return lambda x: (fn(x) * w).sum()


def test_cumulative_gradients_match_recorded_jax_at_ties_and_zeros():
    """jax.vjp's cotangents (record_sort_jax.py) at integer-valued float64 points: ties for cummax and
    cummin, zeros for cumprod, lengths 1 to 9 (every shape of JAX's associative scan), both directions,
    along either axis. One pullback computes every case, each of its own argument."""
    cases = json.loads((Path(__file__).parent / "sort_jax_values.json").read_text())["cases"]
    xs = [np.array(c["x"]) for c in cases]

    def scans(*xs):
        return [getattr(P, c["prim"])(x, c["axis"], c["reverse"]) for x, c in zip(xs, cases)]

    def pulled_back(*xs_and_cts):
        _, pullback = ember.vjp(scans, *xs_and_cts[:len(cases)])
        return pullback(list(xs_and_cts[len(cases):]))

    cts = [np.array(c["ct"]) for c in cases]
    for got, c in zip(ember.jit(pulled_back, backend="numpy")(*xs, *cts), cases):
        np.testing.assert_allclose(got, c["grad"], rtol=1e-14, atol=1e-14,  # exp's last bits: cumlogsumexp
                                   err_msg=f"{c['prim']} axis={c['axis']} reverse={c['reverse']} at {c['x']}")


def _sort_point():
    """x with ties and a NaN, y, and two cotangents (float64)."""
    rng = np.random.default_rng(4)
    x = rng.integers(-2, 3, size=(3, 6)).astype(np.float64)
    x[0, 2] = np.nan
    y = rng.normal(size=(3, 6))
    w1, w2 = rng.normal(size=(2, 3, 6))
    return x, y, w1, w2


def _sort_loss(sort, w1, w2):
    return lambda x, y: (sort((x, y))[0] * w1).sum() + (sort((x, y))[1] * w2).sum()


@functools.cache
def _jax_sort_derivatives():
    """JAX's gradient of a sort of two operands, and its JVPs of sort and cummax (once for both
    backends' runs; one jit, as JAX compiles each eager op of its own)."""
    x, y, w1, w2 = _sort_point()

    def reference(x, y):
        return (jax.grad(_sort_loss(lambda ops: jax.lax.sort(ops, dimension=1), w1, w2), (0, 1))(x, y),
                jax.jvp(lambda x: jax.lax.sort(x, dimension=0), (x,), (w1,)),
                jax.jvp(lambda x: jax.lax.cummax(x, 1), (x,), (w1,)))

    with jax.enable_x64(True):
        return jax.tree_util.tree_map(np.asarray, jax.jit(reference)(x, y))


def test_sort_gradient_and_jvp_match_jax():
    x, y, w1, w2 = _sort_point()
    theirs, jvp_theirs, cum_theirs = _jax_sort_derivatives()
    ours = ember.jit(ember.grad(_sort_loss(lambda ops: P.sort(ops, 1), w1, w2), (0, 1)), backend="numpy")(x, y)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=0, atol=0)
    jvp_ours = ember.jit(lambda x, t: ember.jvp(lambda x: P.sort((x,), 0)[0], (x,), (t,)), backend="numpy")(x, w1)
    cum_ours = ember.jit(lambda x, t: ember.jvp(lambda x: P.cummax(x, 1), (x,), (t,)), backend="numpy")(x, w1)
    for a, b in zip(jvp_ours + cum_ours, (*jvp_theirs, *cum_theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 5))
    for fn in (lambda x: P.cumsum(x, 1), lambda x: P.cumprod(x, 0, True), lambda x: P.cummax(x, 1),
               lambda x: P.cummin(x, 0), lambda x: P.sort((x, -x), 1)[1] * P.sort((x,), 0)[0]):
        check_grads(lambda x, fn=fn: (fn(x) * x[::-1]).sum(), (x,), rtol=1e-6, atol=1e-8)


def test_an_integer_sort_operand_gets_no_gradient():
    x = np.array([3.0, 1.0, 2.0])
    g = ember.grad(lambda x: P.sort((x, np.arange(3, dtype=np.int32)), 0)[0][0])(x)
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0])


# --- batching ----------------------------------------------------------------------------------------

def test_batching_matches_a_loop():
    rng = np.random.default_rng(6)
    x, y, y2 = rng.normal(size=(4, 3, 5)), rng.integers(0, 3, size=(3, 5)), rng.integers(0, 3, size=(4, 5, 3))
    cases = [
        (lambda x: [P.cumsum(x, 0), P.cummax(x, 1, True)], (1,), (x,)),
        (lambda x: [P.cumprod(x, 1), P.cummin(x, 0, True)], (2,), (x,)),
        (lambda x, y: list(P.sort((y, x), 0, 2)), (0, None), (x, y.astype(np.int32))),
        (lambda x, y: list(P.sort((x, y), 1, 1)), (2, 1), (x, y2.astype(np.int8))),
    ]
    for fn, in_axes, args in cases:
        got = ember.vmap(fn, in_axes)(*args)
        want = loop_vmap(lambda *a, fn=fn: ember.jit(fn, backend="numpy")(*a), in_axes, args)
        for a, b in zip(got, want):
            _same_bits(a, b, in_axes)


# --- errors ------------------------------------------------------------------------------------------

def test_rule_errors_name_the_users_line():
    x = np.ones((2, 3), np.float32)
    raises_naming(DTypeError, ember.jit(lambda b: P.cumsum(b, 0)), np.ones(3, bool), words=("cumsum", "bool"),
                  location=THIS_FILE)
    raises_naming(AxisError, ember.jit(lambda x: P.cummax(x, 2)), x, words=("cummax", "axis 2"), location=THIS_FILE)
    raises_naming(ShapeError, ember.jit(lambda x, y: P.sort((x, y), 0)), x, np.ones(3), words=("sort", "(2, 3)"),
                  location=THIS_FILE)
    raises_naming(ArgumentValueError, ember.jit(lambda x: P.sort((x,), 0, 2)), x, words=("num_keys",),
                  location=THIS_FILE)
    raises_naming(AxisError, ember.jit(lambda x: P.sort((x,), 2)), x, words=("dimension 2",), location=THIS_FILE)
    raises_naming(DTypeError, ember.jit(lambda i: P.cumlogsumexp(i, 0)), np.ones(3, np.int32),
                  words=("cumlogsumexp", "int32"), location=THIS_FILE)
    with pytest.raises(TypeError):  # JAX's class for both
        ember.jit(lambda b: P.cumprod(b, 0))(np.ones(3, bool))


COVERED = {aspect: {"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort"}
           for aspect in ("reference", "errors", "vjp", "batch")}
