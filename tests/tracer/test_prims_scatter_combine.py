"""The combining scatters scatter_mul, scatter_min and scatter_max: their numpy reference against an explicit
loop and against jax.lax (repeated indices combining in order, out-of-range vectors dropped, NaN
propagating, bool, int and float), each backend against the reference, rule errors, gradients against
jax.grad at ties and against finite differences, forward mode, and batching against a loop. The CUDA
source runs as host C++ in tests/backends/cuda/test_registry.py (every dtype's compare-and-swap loop, and
NaN), in the one module that test builds for every primitive.
"""

import functools
import warnings

import numpy as np
import pytest

import ember
from ember.errors import DTypeError, ShapeError
from ember.tracer import prims as P
from tests.helpers import check_grads, loop_vmap, prim_names, raises_naming

jax = pytest.importorskip("jax")
jlax = pytest.importorskip("jax.lax")

THIS_FILE = "test_prims_scatter_combine.py"
NAMES = ("scatter_mul", "scatter_min", "scatter_max")
PRIMS = {name: getattr(P, name) for name in NAMES}
UFUNCS = {"scatter_mul": np.multiply, "scatter_min": np.minimum, "scatter_max": np.maximum}


def ref_combine(name, op, indices, updates, nb):
    """The scatter by a loop over the index vectors in row-major order, the out-of-range ones skipped."""
    out = op.copy()
    k = indices.shape[-1]
    with np.errstate(all="ignore"):
        for bn in np.ndindex(*indices.shape[:-1]):
            vec = tuple(int(v) for v in indices[bn])
            if all(0 <= v < n for v, n in zip(vec, op.shape[nb:nb + k])):
                at = bn[:nb] + vec
                out[at] = UFUNCS[name](out[at], updates[bn])
    return out


def _jax_scatter_fn(name, op, indices, updates, nb):
    """jax.lax's scatter of the same name in Ember's index layout (out-of-range vectors dropped)."""
    k, n = indices.shape[-1], indices.ndim - 1 - nb
    dnums = jlax.ScatterDimensionNumbers(
        update_window_dims=tuple(range(nb + n, updates.ndim)), inserted_window_dims=tuple(range(nb, nb + k)),
        scatter_dims_to_operand_dims=tuple(range(nb, nb + k)), operand_batching_dims=tuple(range(nb)),
        scatter_indices_batching_dims=tuple(range(nb)))
    return getattr(jlax, name)(op, indices, updates, dnums, mode=jlax.GatherScatterMode.FILL_OR_DROP)


def three(nb):
    """All three scatters of one operand, indices and updates: one compile per dtype family."""
    return lambda x, i, u: tuple(PRIMS[name](x, i, u, nb) for name in NAMES)


# --- references and backends ----------------------------------------------------------------------

IDX = np.array([[1], [4], [1], [-2], [9], [1], [0]], np.int32)  # repeats, a negative and a too-large one


def _values(dtype, rng):
    """An operand (5, 2) and updates (7, 2) of `dtype`: ints that overflow when multiplied, floats with
    a NaN in the operand and one among the updates of a repeated index."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random((5, 2)) < 0.5, rng.random((7, 2)) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -9, 60, (5, 2)).astype(dtype), \
            rng.integers(0 if dtype.kind == "u" else -9, 60, (7, 2)).astype(dtype)
    op, upd = rng.normal(size=(5, 2)).astype(dtype), rng.normal(size=(7, 2)).astype(dtype)
    op[3, 1], upd[2, 0] = np.nan, np.nan
    return op, upd


DTYPES = ("float32", "float64", "float16", "int8", "int32", "uint16", "int64", "bool")


def _dtype_cases() -> dict:
    """dtype -> (operand, updates), the same in every test of this process."""
    rng = np.random.default_rng(27)
    return {dtype: _values(dtype, rng) for dtype in DTYPES}


CASES = _dtype_cases()


@functools.cache
def jax_results() -> dict:
    """(name, dtype) -> jax.lax's scatter of CASES[dtype], all in one jax.jit (JAX compiles each call)."""
    def every(cases):
        return {(name, dtype): _jax_scatter_fn(name, op, IDX, upd, 0) for dtype, (op, upd) in cases.items()
                for name in NAMES if not (dtype == "bool" and name == "scatter_mul")}

    with jax.enable_x64(True):
        return {key: np.asarray(v) for key, v in jax.jit(every)(CASES).items()}


def test_reference_backend_and_jax_agree_on_repeats_drops_nan_and_every_dtype():
    got = ember.jit(lambda cases: {dtype: three(0)(op, IDX, upd) for dtype, (op, upd) in cases.items()})(CASES)
    for dtype, (op, upd) in CASES.items():
        for name, g in zip(NAMES, got[dtype]):
            want = ref_combine(name, op, IDX, upd, 0)
            assert g.dtype == op.dtype, (dtype, name)
            np.testing.assert_array_equal(g, want, err_msg=f"{name} {dtype}")
            if (name, dtype) in jax_results():  # jax.lax multiplies no bools; ours is NumPy's (and)
                np.testing.assert_array_equal(jax_results()[name, dtype], want, err_msg=f"jax {name} {dtype}")
    assert np.isnan(ref_combine("scatter_max", np.zeros(2), np.array([[0], [0]]), np.array([np.nan, 1.0]), 0)[0])


LAYOUTS = [  # (operand shape, indices, batch_dims): vectors of length 2 and 0, a batch axis
    ((3, 4, 2), np.array([[0, 1], [2, 3], [0, 1], [2, 9], [-1, 0]]), 0),
    ((4, 2), np.zeros((3, 0), np.int64), 0),
    ((2, 5), np.array([[[4], [4], [0]], [[1], [7], [1]]]), 1),
]


def test_index_layouts_match_the_loop_and_jax(rng):
    for shape, idx, nb in LAYOUTS:
        upd_shape = idx.shape[:-1] + shape[nb + idx.shape[-1]:]
        op, upd = rng.normal(size=shape), rng.normal(size=upd_shape)
        got = ember.jit(three(nb))(op, idx, upd)
        with jax.enable_x64(True):
            theirs = jax.jit(lambda o, i, u, nb=nb: [_jax_scatter_fn(n, o, i, u, nb) for n in NAMES])(op, idx, upd)
        for name, g, t in zip(NAMES, got, theirs):
            want = ref_combine(name, op, idx, upd, nb)
            np.testing.assert_allclose(g, want, rtol=1e-15, err_msg=f"{name} {shape} {idx.shape}")
            np.testing.assert_allclose(np.asarray(t), want, rtol=1e-15, err_msg=f"jax {name} {shape} {idx.shape}")


# --- rule errors ----------------------------------------------------------------------------------

Z = np.zeros
ERRORS = [
    (ShapeError, (Z((5, 3)), Z((2, 1), np.int32), Z((2, 4))), ("(2, 4)", "(2, 3)", "(5, 3)")),
    (DTypeError, (Z(5), Z((2, 1), np.int32), Z(2, np.float32)), ("float32", "float64")),
    (DTypeError, (Z(5), Z((2, 1)), Z(2)), ("integers",)),
    (ShapeError, (Z(5), Z((2, 2), np.int32), Z(2)), ("length 2",)),
]


def test_rule_errors_name_the_primitive_and_the_users_line():
    for name in NAMES:
        for exc, args, words in ERRORS:
            raises_naming(exc, ember.jit(lambda a, i, u, name=name: PRIMS[name](a, i, u)), *args,
                          words=(name,) + words, location=THIS_FILE)


# --- gradients ------------------------------------------------------------------------------------

TIE_IDX = np.array([[0], [0], [2], [2], [2], [3], [7]])


def _jax_grads(method, x, u, w, argnums):
    """jax.grad of sum(w * x.at[TIE_IDX].method(u)) in 64 bits."""
    return _jax_grads_cached(method, tuple(x), tuple(u), tuple(w), argnums)


@functools.cache
def _jax_grads_cached(method, x, u, w, argnums):
    x, u, w = map(np.array, (x, u, w))

    def loss(x, u):
        return (getattr(jax.numpy.asarray(x).at[TIE_IDX[:, 0]], method)(u, mode="drop") * w).sum()

    with jax.enable_x64(True):
        return [np.asarray(g) for g in jax.jit(jax.grad(loss, argnums))(x, u)]


def test_min_and_max_gradients_split_ties_as_jax():
    """Ties between the operand and updates, among updates, and a NaN: jax.grad's numbers."""
    x = np.array([1.0, 5.0, 2.0, 4.0, 3.0])
    w = np.array([1.0, 10.0, 100.0, 1000.0, 1e4])
    for name, u in (("scatter_min", np.array([1.0, 1.0, 2.0, 0.5, 0.5, np.nan, 0.0])),
                    ("scatter_max", np.array([1.0, 0.5, 2.0, 2.0, 7.0, 4.0, 9.0]))):
        got = ember.grad(lambda x, u, name=name: P.reduce_sum(P.mul(PRIMS[name](x, TIE_IDX, u), w), (0,)),
                         (0, 1))(x, u)
        for g, want in zip(got, _jax_grads(name[-3:], x, u, w, (0, 1))):
            # JAX takes n - 1 shares away from ct where Ember gives ct / n: rounding apart (1e-14 of 100)
            np.testing.assert_allclose(g, want, rtol=1e-14, atol=1e-12 * np.max(w), err_msg=name)
    got = ember.grad(lambda x, u: P.reduce_sum(P.mul(P.scatter_min(x, TIE_IDX, u), w), (0,)))(
        x, np.array([1.0, 1.0, 2.0, 0.5, 0.5, 4.0, 0.0]))
    np.testing.assert_allclose(got, [1 / 3, 10, 0, 500, 1e4])  # three-way tie at 0; two-way at 3


def test_mul_gradient_in_the_operand_as_jax_and_in_the_updates_raises_as_jax():
    x, u = np.array([1.0, 5.0, 2.0, 4.0, 3.0]), np.array([2.0, -3.0, 0.5, 0.0, 4.0, 2.0, 7.0])
    w = np.array([1.0, 10.0, 100.0, 1000.0, 1e4])
    got = ember.grad(lambda x: P.reduce_sum(P.mul(P.scatter_mul(x, TIE_IDX, u), w), (0,)))(x)
    np.testing.assert_allclose(got, _jax_grads("multiply", x, u, w, (0,))[0], rtol=1e-15)
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        ember.grad(lambda u: P.reduce_sum(P.scatter_mul(x, TIE_IDX, u), (0,)))(u)
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        _jax_grads("multiply", x, u, w, (1,))


def test_gradients_match_finite_differences_and_forward_mode(rng):
    """Random points (no ties) with a batch axis and repeated index vectors of length 2; forward mode
    (the VJP rules transposed) against the same derivative."""
    op, idx = rng.normal(size=(2, 3, 4)), np.array([[[0, 1], [2, 3], [0, 1]], [[1, 1], [1, 1], [5, 0]]])
    upd, w = rng.normal(size=(2, 3)), rng.normal(size=(2, 3, 4))
    for name in NAMES:
        def loss(a, u, name=name):
            return P.reduce_sum(P.mul(PRIMS[name](a, idx, u, 1), w), (0, 1, 2))
        argnums = (0,) if name == "scatter_mul" else (0, 1)
        grads = check_grads(loss, (op, upd), argnums=argnums, rtol=1e-6, atol=1e-9)
        t_op, t_upd = rng.normal(size=op.shape), rng.normal(size=upd.shape) if name != "scatter_mul" else None
        tangents = (t_op, t_upd if t_upd is not None else np.zeros_like(upd))
        f = (lambda a: loss(a, upd)) if name == "scatter_mul" else loss
        primal_args = (op,) if name == "scatter_mul" else (op, upd)
        _, jvp = ember.jvp(f, primal_args, tangents[:len(primal_args)])
        want = sum(float(np.sum(g * t)) for g, t in zip(grads, tangents))
        np.testing.assert_allclose(jvp, want, rtol=1e-12, err_msg=name)


# --- batching -------------------------------------------------------------------------------------

AXES = [(0, 0, 0), (0, None, None), (None, 0, None), (None, None, 1), (1, 0, None)]


def test_vmap_matches_a_loop(rng):
    f = three(0)
    for axes in AXES:
        op = rng.normal(size=(5, 2)) if axes[0] is None else np.moveaxis(rng.normal(size=(3, 5, 2)), 0, axes[0])
        idx = rng.integers(-1, 6, (4, 1)) if axes[1] is None else rng.integers(-1, 6, (3, 4, 1))
        upd = rng.normal(size=(4, 2)) if axes[2] is None else np.moveaxis(rng.normal(size=(3, 4, 2)), 0, axes[2])
        for name, got, want in zip(NAMES, ember.vmap(f, axes)(op, idx, upd), loop_vmap(f, axes, (op, idx, upd))):
            np.testing.assert_allclose(got, want, rtol=1e-15, err_msg=f"{name} {axes}")
    assert set(NAMES) <= prim_names(ember.vmap(f, axes), op, idx, upd)


# --- x.at[...] on them -----------------------------------------------------------------------------

def at_methods(a, i, u):
    """Every combining .at method at indices `i` (repeats, negatives, out of bounds under jit) of `a`
    (5,), and max at rows `i` of a (5, 5) array built from it."""
    rows = a[:, None] + a[None, :]
    return {"multiply": a.at[i].multiply(u), "min": a.at[i].min(u), "max": a.at[i].max(u),
            "divide": a.at[i].divide(u), "power": a.at[i].power(2), "apply": a.at[i].apply(lambda v: v * 2 + 1),
            "multiply-clip": a.at[i].multiply(3.5, mode="clip"), "max-rows": rows.at[i, 1:].max(u[:, None])}


AT_INDICES = np.array([1, 1, 3, -1, 1, 0])  # a repeat three times, a negative index (wraps)
AT_VALUES = {"float32": np.array([2.0, 3.0, np.nan, 0.5, -1.0, 4.0], np.float32),
             "int32": np.array([2, 3, -4, 1, -1, 5], np.int32)}


@functools.cache
def jax_at_results(dtype: str, out_of_bounds: bool) -> dict:
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # JAX's deprecation of int32.at[i].multiply(3.5)
        i = np.where(np.arange(6) == 4, 9, AT_INDICES) if out_of_bounds else AT_INDICES
        a = np.arange(1, 6, dtype=dtype)
        return {k: np.asarray(v) for k, v in jax.jit(at_methods)(a, i, AT_VALUES[dtype]).items()}


def test_at_methods_under_jit_combine_repeats_as_eagerly_and_as_jax():
    """Traced indices (a repeat, a wrapped negative, one out of bounds, dropped) under jit, and the
    same concrete ones eagerly and under jit (the eager path and the unrolled apply): JAX's values and
    dtypes (an integer array divided gives floats; multiply by 3.5 rounds back to int, as JAX)."""
    for dtype, u in AT_VALUES.items():
        a = np.arange(1, 6, dtype=dtype)
        traced = ember.jit(at_methods)(a, np.where(np.arange(6) == 4, 9, AT_INDICES), u)
        for k, want in jax_at_results(dtype, True).items():
            assert traced[k].dtype == want.dtype, (dtype, k)
            np.testing.assert_array_equal(traced[k], want, err_msg=f"{dtype} {k} traced")
        eager = at_methods(ember.numpy.asarray(a), AT_INDICES, u)
        concrete = ember.jit(lambda a, u: at_methods(a, AT_INDICES, u))(a, u)
        for k, want in jax_at_results(dtype, False).items():
            assert eager[k].dtype == concrete[k].dtype == want.dtype, (dtype, k)
            np.testing.assert_array_equal(eager[k], want, err_msg=f"{dtype} {k} eager")
            np.testing.assert_array_equal(concrete[k], want, err_msg=f"{dtype} {k} concrete indices under jit")


AT_X, AT_U, AT_I = np.array([1.0, 5.0, 2.0, 4.0]), np.array([1.0, 1.0, 0.5, 6.0, 4.0]), np.array([0, 0, 2, 1, 3])


def at_loss(x, u, i):
    """min and max with ties (x[0] with two updates, x[3] with one) and multiply by a constant, at
    repeated indices."""
    return (x.at[i].min(u) * 2.0 + x.at[i].max(u) * 3.0).sum() + x.at[i].multiply(3.0).sum()


@functools.cache
def jax_at_gradients() -> list:
    with jax.enable_x64(True):
        return [np.asarray(g) for g in jax.jit(jax.grad(at_loss, (0, 1)))(AT_X, AT_U, AT_I)]


def test_at_gradients_as_jax():
    """Gradients through .at[...].min/max/multiply with repeated traced indices: JAX's numbers at ties;
    multiply's in its values raises as JAX's unless unique_indices=True."""
    for g, w in zip(ember.grad(at_loss, (0, 1))(AT_X, AT_U, AT_I), jax_at_gradients()):
        np.testing.assert_allclose(g, w, rtol=1e-15)
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        ember.grad(lambda x, u, i: x.at[i].multiply(u).sum(), 1)(AT_X, AT_U, AT_I)
    g = ember.grad(lambda x, u, i: x.at[i].multiply(u, unique_indices=True).sum(), 1)(AT_X, AT_U[:3], AT_I[2:])
    np.testing.assert_array_equal(g, AT_X[AT_I[2:]])


COVERED = {aspect: set(NAMES) for aspect in ("reference", "errors", "vjp", "batch")}
