"""reduce_window_sum/max/min: values against live jax.lax.reduce_window over strides, paddings (a crop
too), base and window dilation, float64 and int32, on this run's backend; gradients against
jax.grad at ties (the first tap of a window equal to its max takes the cotangent, as JAX's
select-and-scatter) and against finite differences; forward mode; vmap against a loop; JAX's errors
with the user's line; ember.nn's max_pool and avg_pool against direct NumPy pooling."""

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from ember.errors import ArgumentValueError, ShapeError
from tests.helpers import check_grads, loop_vmap

jax = pytest.importorskip("jax")
THIS_FILE = "test_prims_windows.py"

# (shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
CASES = [
    ((5, 6), (2, 2), (1, 1), "VALID", None, None),
    ((5, 6), (3, 2), (2, 1), "SAME", None, None),
    ((2, 7, 6, 3), (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (0, 2), (0, 0)), None, None),
    ((5, 6), (2, 2), (1, 2), ((1, -1), (2, 0)), (2, 1), (1, 2)),
    ((4,), (3,), (1,), ((2, 2),), (1,), (2,)),
]
FOLDS = {"sum": ("add", 0), "max": ("max", -np.inf), "min": ("min", np.inf)}
_JAX: dict = {}


def _init(fold: str, dtype):
    value = FOLDS[fold][1]
    if np.dtype(dtype).kind == "i" and fold != "sum":
        value = np.iinfo(dtype).min if fold == "max" else np.iinfo(dtype).max
    return np.asarray(value, dtype)[()]


def _fn(lib, fold: str, case, dtype):
    _, window, strides, padding, base, dil = case
    init, comp = _init(fold, dtype), getattr(lib.lax, FOLDS[fold][0])
    return lambda x: lib.lax.reduce_window(x, init, comp, window, strides, padding, base, dil)


def _jax_once(key, compute):
    if key not in _JAX:
        with jax.enable_x64(True):
            _JAX[key] = compute()
    return _JAX[key]


def _ties(i: int, dtype=np.float64) -> np.ndarray:
    return np.random.default_rng(i).integers(-3, 4, CASES[i][0]).astype(dtype)


def test_values_match_jax():
    """float64 (integer values: exact) against JAX; int32 exactly against the numpy reference."""
    for i, case in enumerate(CASES):
        for fold in FOLDS:
            x = _ties(i)
            want = _jax_once(("value", i, fold), lambda x=x, fold=fold, case=case: np.asarray(
                _fn(jax, fold, case, np.float64)(x)))
            got = ember.jit(_fn(ember, fold, case, np.float64))(x)
            assert got.dtype == want.dtype, (fold, case)
            np.testing.assert_array_equal(got, want, err_msg=f"{fold} {case}")
            xi = _ties(i, np.int32)
            got = ember.jit(_fn(ember, fold, case, np.int32))(xi)
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, ember.jit(_fn(ember, fold, case, np.int32), backend="numpy",
                                                         optimize=False)(xi), err_msg=f"{fold} {case}")


def test_gradients_at_ties_match_jax(monkeypatch):
    """Integer-valued operands tie inside windows: the cotangent goes where JAX sends it."""
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    for i, case in list(enumerate(CASES))[1:3]:  # (JAX has no max VJP with window dilation, nor a cropped one)
        x = _ties(i)
        w = np.random.default_rng(10 + i).normal(size=_fn(ember, "sum", case, np.float64)(x).shape)
        for fold in FOLDS:
            loss = lambda lib, fold=fold, case=case, w=w: (  # noqa: E731
                lambda v: (_fn(lib, fold, case, np.float64)(v) * w).sum())
            want = _jax_once(("grad", i, fold), lambda loss=loss, x=x: np.asarray(jax.grad(loss(jax))(x)))
            np.testing.assert_allclose(ember.grad(loss(ember))(x), want, rtol=1e-12, atol=1e-15,
                                       err_msg=f"{fold} {case}")


def test_gradients_match_finite_differences():
    """Compiled, away from ties, through every window feature at once (case 3: crop, both dilations)."""
    x = np.random.default_rng(5).normal(size=CASES[3][0])
    for fold in FOLDS:
        f = _fn(ember, fold, CASES[3], np.float64)
        check_grads(lambda x, f=f: enp.sum(enp.sin(f(x))), (x,))


def test_forward_mode_matches_jax(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    rng = np.random.default_rng(6)
    x, t = rng.normal(size=CASES[2][0]), rng.normal(size=CASES[2][0])
    for fold in FOLDS:
        _, got = ember.jvp(_fn(ember, fold, CASES[2], np.float64), (x,), (t,))
        want = _jax_once(("jvp", fold), lambda: np.asarray(jax.jvp(_fn(jax, fold, CASES[2], np.float64), (x,),  # noqa: B023
                                                                  (t,))[1]))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=fold)


def test_vmap_matches_a_loop(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    rng = np.random.default_rng(7)
    for case in (CASES[1], CASES[3]):
        for fold in FOLDS:
            f = _fn(ember, fold, case, np.float64)
            for axis in (0, len(case[0])):
                x = rng.normal(size=case[0][:axis] + (3,) + case[0][axis:])
                np.testing.assert_array_equal(ember.vmap(f, axis)(x), loop_vmap(f, axis, (x,)), err_msg=fold)


def test_errors_name_the_users_line():
    x = np.ones((4, 5), np.float32)
    cases = [
        (lambda: lax.reduce_window(x, 0.0, lax.add, (2,), (1,)), ShapeError, "wrong number of window_dimensions"),
        (lambda: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1,)), ShapeError, "inconsistent window_strides"),
        (lambda: lax.reduce_window(x, 0.0, lax.add, (2, 0), (1, 1)), ShapeError, "must have every element positive"),
        (lambda: lax.reduce_window(x, 1.0, lax.add, (2, 2), (1, 1)), ArgumentValueError, "takes the monoids"),
        (lambda: lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 1)), ArgumentValueError, "takes the monoids"),
    ]
    for fn, cls, text in cases:
        with pytest.raises(cls, match=text) as e:
            ember.jit(lambda fn=fn: fn(), backend="numpy")()
        assert THIS_FILE in str(e.value), str(e.value)
    with pytest.raises(TypeError):  # JAX's class for the shape errors
        jax.lax.reduce_window(x, 0.0, jax.lax.add, (2,), (1,))


def _numpy_pool(x, window, strides, pads, fold):
    """Pooling over the middle axes of (batch, spatial..., features), window by window."""
    nd = len(window)
    fill = {"max": -np.inf, "sum": 0.0, "count": 0.0}[fold]
    src = np.ones_like(x) if fold == "count" else x
    padded = np.pad(src, [(0, 0), *pads, (0, 0)], constant_values=fill)
    out_sp = [(padded.shape[1 + j] - window[j]) // strides[j] + 1 for j in range(nd)]
    out = np.empty((x.shape[0], *out_sp, x.shape[-1]), x.dtype)
    for pos in np.ndindex(*out_sp):
        region = padded[(slice(None), *(slice(p * s, p * s + k) for p, s, k in zip(pos, strides, window)),
                         slice(None))]
        axes = tuple(range(1, 1 + nd))
        out[(slice(None), *pos, slice(None))] = region.max(axis=axes) if fold == "max" else region.sum(axis=axes)
    return out


def test_nn_pooling_matches_numpy():
    x = np.random.default_rng(8).normal(size=(2, 5, 6, 3))
    pads = [(1, 1), (0, 1)]  # what SAME gives a 3x2 window with strides (2, 2) on 5x6
    np.testing.assert_allclose(ember.jit(lambda x: ember.nn.max_pool(x, (3, 2), (2, 2), "SAME"))(x),
                               _numpy_pool(x, (3, 2), (2, 2), pads, "max"))
    total = _numpy_pool(x, (3, 2), (2, 2), pads, "sum")
    np.testing.assert_allclose(ember.nn.avg_pool(x, (3, 2), (2, 2), "SAME"), total / 6, rtol=1e-12)
    np.testing.assert_allclose(ember.nn.avg_pool(x, (3, 2), (2, 2), "SAME", count_include_pad=False),
                               total / _numpy_pool(x, (3, 2), (2, 2), pads, "count"), rtol=1e-12)
    np.testing.assert_allclose(ember.nn.max_pool(x[0], (2, 2)), _numpy_pool(x[:1], (2, 2), (1, 1), [(0, 0)] * 2,
                                                                            "max")[0])


COVERED = {name: {"reduce_window_sum", "reduce_window_max", "reduce_window_min"}
           for name in ("reference", "errors", "vjp", "batch")}
