"""conv_general_dilated: the numpy reference and the compiled backends against live
jax.lax.conv_general_dilated over a grid of strides, paddings, dilations, feature and batch groups,
layouts and ranks (1-D to 3-D); gradients against jax.grad and finite differences; forward mode;
vmap against a loop over lhs and over rhs; JAX's errors with the user's line; the lax wrappers and
jnp.convolve/correlate. Compiles are few: each test loops over its table inside one jit per family.
"""

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from ember.backends.kernel import Convolution, node_kernel
from ember.errors import ArgumentValueError, DTypeError, IncompatibleShapesError, ShapeError
from ember.tracer import prims as P
from ember.tracer.primitive import impl_rules
from tests.helpers import check_grads, loop_vmap

jax = pytest.importorskip("jax")
jnp = jax.numpy
THIS_FILE = "test_prims_conv.py"

# Layouts by rank: (lhs, rhs, out) specs, the canonical one first.
LAYOUTS = {
    1: [("NCH", "OIH", "NCH"), ("NHC", "HIO", "NHC")],
    2: [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("NHWC", "OIHW", "CNWH")],
    3: [("NCHWD", "OIHWD", "NCHWD"), ("NDHWC", "DHWIO", "NDHWC")],
}


def _case(nd, strides=1, padding="VALID", lhs_dil=1, rhs_dil=1, fgc=1, bgc=1, layout=0, n=2, c=2, o=2,
          size=5, k=2):
    """(lhs shape, rhs shape, keyword arguments) of one convolution, in layout `layout` of rank nd + 2."""
    specs = LAYOUTS[nd][layout]
    canon_l = (n * bgc, c * fgc) + (size,) * nd
    canon_r = (o * fgc * bgc, c) + (k,) * nd
    lhs_shape = _laid_out(canon_l, specs[0], "NC")
    rhs_shape = _laid_out(canon_r, specs[1], "OI")
    spatial = lambda v: (v,) * nd if isinstance(v, int) else v  # noqa: E731
    kw = dict(window_strides=spatial(strides), padding=padding, lhs_dilation=spatial(lhs_dil),
              rhs_dilation=spatial(rhs_dil), dimension_numbers=specs, feature_group_count=fgc,
              batch_group_count=bgc)
    return lhs_shape, rhs_shape, kw


def _laid_out(canonical, spec: str, pair: str) -> tuple:
    """The shape of an operand whose canonical (pair[0], pair[1], spatial in the spec's order) sizes are `canonical`."""
    spatial = [ch for ch in spec if ch not in pair]
    order = list(pair) + sorted(spatial, key="HWD".index)
    return tuple(canonical[order.index(ch)] for ch in spec)


GRID = [
    _case(1), _case(1, strides=2, padding="SAME"), _case(1, padding=((2, -1),), lhs_dil=2, layout=1),
    _case(1, rhs_dil=2, padding="SAME_LOWER", fgc=2), _case(1, bgc=2, strides=2, layout=1),
    _case(2), _case(2, strides=(2, 1), padding="SAME", layout=1), _case(2, padding=((1, 2), (0, -1)), rhs_dil=(2, 1)),
    _case(2, lhs_dil=(1, 2), padding=((1, 1), (2, 0)), layout=2), _case(2, fgc=2, strides=2, layout=1),
    _case(2, fgc=3, c=1, o=1, padding="SAME"),  # depthwise
    _case(2, bgc=2, rhs_dil=2, padding="SAME", layout=2), _case(2, k=1, strides=3),
    _case(2, size=3, k=3, lhs_dil=2, rhs_dil=2, padding=((2, 2), (1, 3))),
    _case(3, size=4), _case(3, strides=(1, 2, 1), padding="SAME", layout=1, fgc=2),
    _case(3, size=3, bgc=2, rhs_dil=(1, 1, 2), padding=((0, 1), (1, 0), (1, 1))),
]


def _jax_conv(lhs, rhs, **kw):
    with jax.enable_x64(lhs.dtype.itemsize == 8):
        return np.asarray(jax.lax.conv_general_dilated(lhs, rhs, **kw))


_JAX: dict = {}  # JAX's results by key: each is computed once for both backends' runs of a test


def jax_once(key, compute):
    """`compute()` (a call of JAX, about 0.2 s each for its compile), remembered under `key`."""
    if key not in _JAX:
        _JAX[key] = compute()
    return _JAX[key]


def grid_inputs(i: int, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """The operands of GRID[i], the same on every call."""
    ls, rs, _ = GRID[i]
    rng = np.random.default_rng(i)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-4, 5, ls).astype(dtype), rng.integers(-4, 5, rs).astype(dtype)
    return rng.normal(size=ls).astype(dtype), rng.normal(size=rs).astype(dtype)


def grid_expected(i: int) -> np.ndarray:
    """JAX's float64 result of GRID[i] on `grid_inputs(i)`."""
    return jax_once(("grid", i), lambda: _jax_conv(*grid_inputs(i), **GRID[i][2]))


def _explicit(lhs_shape, rhs_shape, kw) -> dict:
    """kw with the padding and dimension numbers as the primitive takes them."""
    dn = lax.conv_dimension_numbers(lhs_shape, rhs_shape, kw["dimension_numbers"])
    pad = kw["padding"]
    if isinstance(pad, str):
        window = [(rhs_shape[d] - 1) * r + 1 for d, r in zip(dn.rhs_spec[2:], kw["rhs_dilation"])]
        pad = lax.padtype_to_pads([lhs_shape[d] for d in dn.lhs_spec[2:]], window, kw["window_strides"], pad)
    return {**kw, "padding": tuple(map(tuple, pad)), "dimension_numbers": tuple(dn)}


def test_grid_matches_jax():
    """The numpy reference and the jitted convolution (on this run's backend) against JAX in float64;
    int32 exactly against the reference."""
    conv = impl_rules[P.conv_general_dilated_p]
    for i, (ls, rs, kw) in enumerate(GRID):
        lhs, rhs = grid_inputs(i)
        want = grid_expected(i)
        np.testing.assert_allclose(conv(lhs, rhs, **_explicit(ls, rs, kw)), want, rtol=1e-12, atol=1e-12,
                                   err_msg=str(kw))
        f = ember.jit(lambda a, b, kw=kw: lax.conv_general_dilated(a, b, **kw))
        np.testing.assert_allclose(f(lhs, rhs), want, rtol=1e-12, atol=1e-12, err_msg=str(kw))
        li, ri = grid_inputs(i, np.int32)
        got = f(li, ri)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, conv(li, ri, **_explicit(ls, rs, kw)), err_msg=str(kw))


def test_float32_matches_jax():
    """float32 in, float32 out, within float32 rounding of JAX's (for a few of the grid)."""
    for i in (1, 9, 15):
        lhs, rhs = grid_inputs(i, np.float32)
        kw = GRID[i][2]
        got = ember.jit(lambda a, b, kw=kw: lax.conv_general_dilated(a, b, **kw))(lhs, rhs)
        assert got.dtype == np.float32
        want = jax_once(("f32", i), lambda: _jax_conv(lhs, rhs, **kw))  # noqa: B023
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=str(kw))


GRAD_CASES = [3, 4, 8, 11, 16]  # feature and batch groups, dilations, layouts, 1-D to 3-D


def test_gradients_match_jax(monkeypatch):
    """Both cotangents (JAX's transpose rules) against jax.grad in float64, on the oracle backend."""
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    for i in GRAD_CASES:
        lhs, rhs = grid_inputs(i)
        kw = GRID[i][2]
        w = np.random.default_rng(100 + i).normal(size=grid_expected(i).shape)
        loss = lambda lib, kw=kw, w=w: (lambda a, b: (lib.lax.conv_general_dilated(a, b, **kw) * w).sum())  # noqa: E731
        ours = ember.grad(loss(ember), (0, 1))(lhs, rhs)

        def theirs(loss=loss, lhs=lhs, rhs=rhs):
            with jax.enable_x64(True):
                return [np.asarray(g) for g in jax.grad(loss(jax), (0, 1))(lhs, rhs)]

        theirs = jax_once(("grad", str(kw)), theirs)
        for got, want in zip(ours, theirs):
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10, err_msg=str(kw))


def test_gradients_match_finite_differences(rng):
    """Compiled gradients (float64) against central differences: strided, padded, dilated, grouped."""
    ls, rs, kw = _case(2, strides=2, padding=((1, 0), (0, 1)), rhs_dil=(1, 2), fgc=2, c=1, o=1, size=4)
    lhs, rhs = rng.normal(size=ls), rng.normal(size=rs)
    check_grads(lambda a, b: enp.sum(enp.tanh(lax.conv_general_dilated(a, b, **kw))), (lhs, rhs), argnums=(0, 1))


def test_forward_mode_matches_jax(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    ls, rs, kw = GRID[9]
    rng = np.random.default_rng(9)
    lhs, rhs, tl, tr = (rng.normal(size=s) for s in (ls, rs, ls, rs))
    f = lambda lib: (lambda a, b: lib.lax.conv_general_dilated(a, b, **kw))  # noqa: E731
    out, tangent = ember.jvp(f(ember), (lhs, rhs), (tl, tr))

    def theirs():
        with jax.enable_x64(True):
            return [np.asarray(v) for v in jax.jvp(f(jax), (lhs, rhs), (tl, tr))]

    want_out, want_tangent = jax_once("jvp", theirs)
    np.testing.assert_allclose(out, want_out, rtol=1e-12)
    np.testing.assert_allclose(tangent, want_tangent, rtol=1e-10, atol=1e-12)


VMAP_CASES = [GRID[1], GRID[9], GRID[11], GRID[15]]


def test_vmap_matches_a_loop(rng, monkeypatch):
    """Over lhs, over rhs, over both (JAX's batch rule: the axis folds into the batch or the feature
    groups), for plain, feature- and batch-grouped convolutions, with the vmapped axis inside."""
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    for ls, rs, kw in VMAP_CASES:
        f = lambda a, b, kw=kw: lax.conv_general_dilated(a, b, **kw)  # noqa: E731
        for in_axes in ((0, None), (None, 1), (1, 0), (len(ls), None)):
            args = [rng.normal(size=s[:ax] + (3,) + s[ax:]) if ax is not None else rng.normal(size=s)
                    for s, ax in zip((ls, rs), in_axes)]
            np.testing.assert_allclose(ember.vmap(f, in_axes)(*args), loop_vmap(f, in_axes, args), rtol=1e-12,
                                       atol=1e-12, err_msg=f"{kw} {in_axes}")
    ls, rs, kw = VMAP_CASES[2]  # no examples: zeros of the batched shape
    f = lambda a, b: lax.conv_general_dilated(a, b, **kw)  # noqa: E731
    one = f(np.ones(ls), np.ones(rs)).shape
    assert ember.vmap(f, (0, None))(np.ones((0, *ls)), np.ones(rs)).shape == (0, *one)
    assert ember.vmap(f, (None, 2))(np.ones(ls), np.ones(rs[:2] + (0,) + rs[2:])).shape == (0, *one)


def test_errors_are_jaxs_with_the_users_line():
    """Each mistake raises JAX's message, an error class that is JAX's builtin class, with the user's line."""
    x, w = np.ones((2, 4, 5, 5), np.float32), np.ones((6, 2, 3, 3), np.float32)
    conv = lambda lib, *args, **kw: lib.lax.conv_general_dilated(*args, **kw)  # noqa: E731
    cases = [
        (lambda lib: conv(lib, x, w, (1, 1), "VALID", feature_group_count=3), IncompatibleShapesError,
         "feature_group_count must divide lhs feature dimension size"),
        (lambda lib: conv(lib, x, w, (1, 1), "VALID"), IncompatibleShapesError,
         "must equal the rhs input feature dimension size"),
        (lambda lib: conv(lib, x[:, :2], w, (1, 1), "VALID", batch_group_count=4), IncompatibleShapesError,
         "batch_group_count must divide lhs batch dimension size"),
        (lambda lib: conv(lib, x, w[:5], (1, 1), "VALID", feature_group_count=2), IncompatibleShapesError,
         "multiple of feature_group_count"),
        (lambda lib: conv(lib, x, w, (1,), ((0, 0), (0, 0)), feature_group_count=2), IncompatibleShapesError,
         "window_strides must have the same number of dimensions"),
        (lambda lib: conv(lib, x, w, (1, 1), "VALID", feature_group_count=0), ArgumentValueError,
         "must be a positive integer"),
        (lambda lib: conv(lib, x, w[0], (1, 1), "VALID"), ShapeError, "ndim to be equal"),
        (lambda lib: conv(lib, x, w.astype(np.int32), (1, 1), "VALID", feature_group_count=2), DTypeError,
         "same dtypes"),
        (lambda lib: conv(lib, x, w, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHX")), ShapeError,
         "same set of spatial characters"),
        (lambda lib: conv(lib, x, w, (1, 1), ((-9, 0), (0, 0)), feature_group_count=2), IncompatibleShapesError,
         "Negative padding is larger"),
        (lambda lib: conv(lib, x, w, (1, 1), "SAME", lhs_dilation=(2, 1), feature_group_count=2), ArgumentValueError,
         "String padding is not implemented for transposed convolution"),
        (lambda lib: conv(lib, x, w[:, :, :0], (1, 1), "VALID", feature_group_count=2), IncompatibleShapesError,
         "expects window to have positive value for 0-th window dimension"),
    ]
    for fn, cls, text in cases:
        with pytest.raises(cls, match=text) as e:
            ember.jit(lambda fn=fn: fn(ember), backend="numpy")()
        assert THIS_FILE in str(e.value), str(e.value)
        with pytest.raises(cls.__mro__[2]):  # the builtin class (TypeError, ValueError) JAX raises too
            fn(jax)
    with pytest.raises(RuntimeError, match="Unrecognized padding type"):
        lax.conv(x, w[:, :4], (1, 1), "FULL")


def test_lax_wrappers_match_jax():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 7, 6)).astype(np.float32)
    w = rng.normal(size=(4, 3, 3, 2)).astype(np.float32)
    xh, wh = np.transpose(x, (0, 2, 3, 1)), np.transpose(w, (2, 3, 1, 0))
    pairs = [
        (lambda lib: lib.lax.conv(x, w, (2, 1), "SAME"), {}),
        (lambda lib: lib.lax.conv_with_general_padding(x, w, (1, 2), ((1, 0), (2, 2)), (2, 1), (1, 2)), {}),
        *[(lambda lib, pad=pad, tk=tk: lib.lax.conv_transpose(xh, np.swapaxes(wh, 2, 3) if tk else wh, (2, 1), pad,
                                                               transpose_kernel=tk), {})
          for pad in ("SAME", "VALID", ((1, 2), (0, 1))) for tk in (False, True)],
        (lambda lib: lib.lax.conv_transpose(xh, wh, (2, 2), ((0, 1), (1, 1)), use_consistent_padding=True), {}),
    ]
    for k, (fn, _) in enumerate(pairs):
        ours = ember.jit(lambda fn=fn: fn(ember))()
        np.testing.assert_allclose(ours, jax_once(("wrapper", k), lambda: np.asarray(fn(jax))), rtol=2e-5,  # noqa: B023
                                   atol=2e-5)
    for specs in (None, ("NHWC", "HWIO", "NHWC"), ("NCHW", "IOHW", "NWHC")):
        assert tuple(lax.conv_dimension_numbers(x.shape, w.shape, specs)) == tuple(
            jax.lax.conv_dimension_numbers(x.shape, w.shape, specs))
    for pad in ("SAME", "SAME_LOWER", "VALID"):
        assert lax.padtype_to_pads((7, 6), (3, 4), (2, 3), pad) == jax.lax.padtype_to_pads((7, 6), (3, 4), (2, 3), pad)


def test_numpy_convolve_and_correlate_match_jnp():
    rng = np.random.default_rng(2)
    pairs = [(rng.normal(size=7), rng.normal(size=3)), (rng.normal(size=3), rng.normal(size=6)),
             (np.arange(5), np.arange(1, 3)), (rng.normal(size=4).astype(np.float32), np.ones(4, np.float32))]
    f = ember.jit(lambda a, v, op, mode: getattr(enp, op)(a, v, mode), static_argnums=(2, 3))
    with jax.enable_x64(True):
        for k, (a, v) in enumerate(pairs):
            for op in ("convolve", "correlate"):
                for mode in ("full", "same", "valid"):
                    want = jax_once((op, mode, k), lambda: np.asarray(getattr(jnp, op)(a, v, mode)))  # noqa: B023
                    got = f(a, v, op, mode)
                    assert got.dtype == want.dtype, (op, mode, a.dtype)
                    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"{op} {mode}")
    with pytest.raises(IncompatibleShapesError, match="only support 1-dimensional inputs"):
        enp.convolve(np.ones((2, 2)), np.ones(2))
    with pytest.raises(ArgumentValueError, match="mode must be one of"):
        enp.correlate(np.ones(3), np.ones(2), "wide")


COVERED = {name: {"conv_general_dilated"} for name in ("reference", "errors", "vjp", "batch")}
NUMPY_COVERED = {"convolve", "correlate"}  # the ember.numpy functions tested here (tests/numpy/test_math.py)


def test_bias_and_activation_fuse_in_place_into_the_convolutions_kernel():
    """tanh(conv(x, w) + b) is one kernel: the Convolution step writes the output buffer and the
    epilogue loop runs over it in place (no temp); explain() names it; the gradient of a
    conv-bias-tanh layer keeps at most half the intermediates of the unoptimized plan."""
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(2, 3, 6, 6)).astype(np.float32), rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    b = rng.normal(size=4).astype(np.float32)

    def layer(x, w, b):
        return enp.tanh(lax.conv(x, w, (1, 1), "SAME") + b[None, :, None, None])

    lowered = ember.jit(layer).lower(x, w, b)
    (node,) = lowered.optimized.nodes
    assert node.prim is P.fusion_p
    kernel, _ = node_kernel(node)
    conv_step, epilogue = kernel.steps
    assert isinstance(conv_step, Convolution) and conv_step.out == "out0" and not kernel.temps
    assert [o.param("buffer") for o in epilogue.ops if o.prim == "load"] == ["out0", "in2"]
    assert [s.buffer for s in epilogue.stores] == ["out0"]
    assert "conv_general_dilated, reshape, broadcast_in_dim, add, tanh" in " ".join(str(lowered.explain()).split())
    want = np.tanh(_jax_conv(x.astype(np.float64), w.astype(np.float64), window_strides=(1, 1), padding="SAME")
                   + b[None, :, None, None])
    np.testing.assert_allclose(ember.jit(layer)(x, w, b), want, rtol=1e-5, atol=1e-5)
    grad = ember.grad(lambda w, b, x: enp.sum(layer(x, w, b) ** 2), (0, 1))
    peak = {opt: ember.jit(grad, optimize=opt).lower(w, b, x).memory().peak_bytes for opt in (True, False)}
    assert peak[True] * 2 <= peak[False], peak


def test_an_epilogue_operand_is_not_overwritten_by_the_convolution():
    """A fused convolution writes the result's buffer before its epilogue reads the other operands: an
    intermediate of the result's shape read by the epilogue keeps its own buffer (memory rule
    contraction-first), and the values are the oracle's."""
    rng = np.random.default_rng(3)
    x, w, z = (rng.normal(size=s).astype(np.float32) for s in ((2, 3, 6, 6), (4, 3, 3, 3), (2, 4, 4, 4)))

    def f(x, w, z):
        y = enp.sort(z, axis=-1)  # not fusible: a buffer of the result's shape, dead after the epilogue
        return enp.sort(enp.tanh(lax.conv_general_dilated(x, w, (1, 1), "VALID") + y), axis=-1)

    lowered = ember.jit(f).lower(x, w, z)
    assert "[contraction-first]" in str(lowered.explain())
    want = ember.jit(f, backend="numpy", optimize=False)(x, w, z)
    np.testing.assert_allclose(ember.jit(f)(x, w, z), want, rtol=1e-5, atol=1e-5)
