"""The primitives that steer differentiation (custom_vjp_call via ember.custom_vjp, stop_gradient):
numpy reference, rule errors, VJPs, batching. Also the registry coverage check: every registered
primitive appears in the reference, rule-error, VJP and batching tests of the test_prims_* files.
"""

import importlib

import numpy as np
import pytest

import ember
from ember.errors import ShapeError, TransformError
from ember.tracer import prims as P
from ember.tracer.primitive import primitives
from tests.helpers import assert_tree_allclose, check_grads, loop_vmap, prim_names

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
THIS_FILE = "test_prims_custom.py"


def total(x, w=None):
    x = x if w is None else P.mul(x, w)
    return P.reduce_sum(x, tuple(range(len(x.shape))))


def make_scaled_sin(scale_ct=1.0):
    """f(x, y) = sin(x) * y with a hand-written VJP (its cotangents multiplied by `scale_ct`)."""

    @ember.custom_vjp
    def f(x, y):
        return P.mul(P.sin(x), y)

    def fwd(x, y):
        return f(x, y), (P.cos(x), P.sin(x), y)

    def bwd(res, ct):
        cos_x, sin_x, y = res
        return P.mul(P.mul(ct, P.mul(cos_x, y)), scale_ct), P.mul(P.mul(ct, sin_x), scale_ct)

    f.defvjp(fwd, bwd)
    return f


# --- custom_vjp_call ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (0, 3), (5,), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_custom_vjp_call_reference(shape, dtype, rng):
    f = make_scaled_sin()
    x, y = rng.normal(size=shape).astype(dtype), rng.normal(size=shape).astype(dtype)
    got = ember.jit(f, optimize=False)(x, y)
    want = np.array([np.float64(a) for a in np.sin(x.astype(np.float64)).ravel()]).reshape(shape) * y
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == F32 else 1e-12, atol=1e-6)
    np.testing.assert_allclose(f(x, y), want, rtol=2e-6 if dtype == F32 else 1e-12, atol=1e-6)  # eager
    assert "custom_vjp_call" in prim_names(f, x, y)


def test_custom_vjp_call_with_pytree_outputs_and_closed_over_array(rng):
    c = rng.normal(size=(3,))

    @ember.custom_vjp
    def f(d):
        return {"s": P.mul(d["a"], c), "t": P.exp(d["b"])}

    def bwd(res, ct):
        return ({"a": P.mul(ct["s"], c), "b": P.mul(ct["t"], P.exp(res[0]))},)

    f.defvjp(lambda d: (f(d), (d["b"],)), bwd)
    d = {"a": rng.normal(size=(3,)), "b": rng.normal(size=(2,))}
    out = ember.jit(f)(d)
    np.testing.assert_allclose(out["s"], d["a"] * c)
    np.testing.assert_allclose(out["t"], np.exp(d["b"]))
    g = ember.grad(lambda d: P.add(total(f(d)["s"]), total(f(d)["t"])))(d)
    np.testing.assert_allclose(g["a"], c)
    np.testing.assert_allclose(g["b"], np.exp(d["b"]))


@pytest.mark.parametrize("shape", [(), (5,), (2, 3)], ids=str)
def test_custom_vjp_call_vjp_matches_finite_differences(shape, rng):
    f = make_scaled_sin()
    x, y, w = rng.normal(size=shape), rng.normal(size=shape), rng.normal(size=shape)
    check_grads(lambda a, b: total(f(a, b), w), (x, y), argnums=(0, 1))
    check_grads(lambda a: total(f(a, y), w), (x,))
    check_grads(lambda b: total(f(P.mul(x, 2.0), b), w), (y,))


def test_custom_vjp_call_uses_the_users_rule(rng):
    f = make_scaled_sin(scale_ct=3.0)
    x, y = rng.normal(size=(4,)), rng.normal(size=(4,))
    gx, gy = ember.grad(lambda a, b: total(f(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, 3 * np.cos(x) * y, rtol=1e-12)
    np.testing.assert_allclose(gy, 3 * np.sin(x), rtol=1e-12)
    # second order goes through the traced bwd subgraph
    h = ember.grad(lambda a: total(ember.grad(lambda b: total(f(b, y)))(a)))(x)
    np.testing.assert_allclose(h, -3 * np.sin(x) * y, rtol=1e-12)


def test_custom_vjp_call_shape_rule_checks_operands():
    f = make_scaled_sin()
    params = next(n.params for n in ember.make_graph(f)(np.zeros(3), np.zeros(3)).nodes
                  if n.prim.name == "custom_vjp_call")

    with pytest.raises(ShapeError) as info:
        ember.jit(lambda a, b: P.custom_vjp_call_p.bind(a, b, **params))(np.zeros(3, F32), np.zeros(3))
    msg = str(info.value)
    assert "custom_vjp" in msg and "f32[3]" in msg and "f64[3]" in msg and THIS_FILE in msg
    with pytest.raises(ShapeError) as info:
        ember.jit(lambda a, b: P.custom_vjp_call_p.bind(a, b, **params))(np.zeros(4), np.zeros(3))
    assert "f64[4]" in str(info.value) and THIS_FILE in str(info.value)


def test_custom_vjp_call_rejects_differentiating_a_closed_over_tracer(rng):
    def outer(x):
        @ember.custom_vjp
        def f(y):
            return P.mul(y, x)

        f.defvjp(lambda y: (f(y), ()), lambda res, ct: (ct,))
        return total(f(P.add(x, 1.0)))

    with pytest.raises(TransformError) as info:
        ember.grad(outer)(rng.normal(size=(3,)))
    assert "closes over" in str(info.value)


CUSTOM_VMAP = [((0, 0), 0), ((1, 0), 1), ((0, None), 0), ((None, -1), 1), ((-1, -1), -1)]


@pytest.mark.parametrize("in_axes,out_axes", CUSTOM_VMAP, ids=str)
def test_custom_vjp_call_batching(in_axes, out_axes, rng):
    f = make_scaled_sin(scale_ct=2.0)

    def shape(ax):
        return (2, 4) if ax is None else {0: (3, 2, 4), 1: (2, 3, 4), -1: (2, 4, 3)}[ax]

    x, y = rng.normal(size=shape(in_axes[0])), rng.normal(size=shape(in_axes[1]))
    got = ember.vmap(f, in_axes, out_axes)(x, y)
    assert_tree_allclose(got, loop_vmap(f, in_axes, (x, y), out_axes), rtol=1e-12, atol=1e-12)
    assert "custom_vjp_call" in prim_names(ember.vmap(f, in_axes, out_axes), x, y)
    # the batched rule is still the user's: grad of the vmapped function and vmap of the grad
    g = ember.grad(lambda a, b: total(ember.vmap(f, in_axes, out_axes)(a, b)), argnums=(0, 1))(x, y)
    xb, yb = np.broadcast_arrays(*(np.moveaxis(v, ax, 0) if ax is not None else v for v, ax in zip((x, y), in_axes)))

    def unbatch(per_example, ax):  # per-example gradients -> the gradient of the batched argument
        return np.moveaxis(per_example, 0, ax) if ax is not None else per_example.sum(0)

    np.testing.assert_allclose(g[0], unbatch(2 * np.cos(xb) * yb, in_axes[0]), rtol=1e-12)
    np.testing.assert_allclose(g[1], unbatch(2 * np.sin(xb), in_axes[1]), rtol=1e-12)
    per_example = ember.grad(lambda a, b: total(f(a, b)), argnums=(0, 1))
    assert_tree_allclose(ember.vmap(per_example, in_axes, out_axes)(x, y),
                         loop_vmap(per_example, in_axes, (x, y), out_axes), rtol=1e-12, atol=1e-12)


def make_sincos():
    """Two outputs (sin x, cos x); the rule scales each output's cotangent differently."""

    @ember.custom_vjp
    def f(x):
        return P.sin(x), P.cos(x)

    def bwd(res, cts):
        (x,) = res
        return (P.sub(P.mul(P.mul(cts[0], P.cos(x)), 2.0), P.mul(P.mul(cts[1], P.sin(x)), 3.0)),)

    f.defvjp(lambda x: (f(x), (x,)), bwd)
    return f


def test_custom_vjp_call_with_two_outputs(rng):
    f = make_sincos()
    x = rng.normal(size=(2, 3))
    s, c = ember.jit(f)(x)
    np.testing.assert_allclose(s, np.sin(x), rtol=1e-12)
    np.testing.assert_allclose(c, np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(ember.grad(lambda a: total(P.add(*f(a))))(x), 2 * np.cos(x) - 3 * np.sin(x),
                               rtol=1e-12)
    # an unused output gets a zero cotangent
    np.testing.assert_allclose(ember.grad(lambda a: total(f(a)[1]))(x), -3 * np.sin(x), rtol=1e-12)
    np.testing.assert_allclose(ember.grad(lambda a: total(f(a)[0]))(x), 2 * np.cos(x), rtol=1e-12)
    for in_axes, out_axes in ((0, 0), (1, 1), (-1, 0)):
        got = ember.vmap(f, in_axes, out_axes)(x)
        assert_tree_allclose(got, loop_vmap(f, in_axes, (x,), out_axes), rtol=1e-12, atol=1e-12)
    g = ember.vmap(ember.grad(lambda a: total(f(a)[1])), 1, 1)(x)
    np.testing.assert_allclose(g, -3 * np.sin(x), rtol=1e-12)


def test_custom_vjp_call_bound_eagerly(rng):
    f = make_scaled_sin()
    x, y = rng.normal(size=(3,)), rng.normal(size=(3,))
    params = next(n.params for n in ember.make_graph(f)(x, y).nodes if n.prim.name == "custom_vjp_call")
    (out,) = P.custom_vjp_call_p.bind(x, y, **params)
    np.testing.assert_allclose(out, np.sin(x) * y, rtol=1e-12)
    assert out.flags.writeable and not np.shares_memory(out, x)


def test_vmap_of_custom_vjp_call_closing_over_the_mapped_value(rng):
    def g(s, y):
        @ember.custom_vjp
        def f(z):
            return P.mul(z, s)

        f.defvjp(lambda z: (f(z), ()), lambda res, ct: (P.mul(P.mul(ct, s), 10.0),))
        return f(y)

    s, y = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    np.testing.assert_allclose(ember.vmap(g)(s, y), s * y, rtol=1e-12)
    np.testing.assert_allclose(ember.vmap(g, (None, 0))(s[0], y), s[0] * y, rtol=1e-12)
    gy = ember.grad(lambda b: total(ember.vmap(g, (0, 0))(s, b)), argnums=0)(y)
    np.testing.assert_allclose(gy, 10 * s, rtol=1e-12)  # the user's rule, with the mapped closure value
    gy = ember.vmap(ember.grad(lambda a, b: total(g(a, b)), argnums=1))(s, y)
    np.testing.assert_allclose(gy, 10 * s, rtol=1e-12)


def test_nested_vmap_of_custom_vjp_call(rng):
    f = make_scaled_sin()
    x, y = rng.normal(size=(2, 3, 4)), rng.normal(size=(4,))
    got = ember.vmap(ember.vmap(f, (0, None)), (1, None))(x, y)
    want = loop_vmap(lambda a, b: loop_vmap(f, (0, None), (a, b)), (1, None), (x, y))
    np.testing.assert_allclose(got, want, rtol=1e-12)


# --- stop_gradient --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (0, 3), (5,), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("dtype", [F32, F64, np.dtype(np.int32), np.dtype(bool)], ids=str)
def test_stop_gradient_reference(shape, dtype, rng):
    x = (rng.normal(size=shape) * 5).astype(dtype)
    got = ember.jit(lambda a: P.stop_gradient(a), optimize=False)(x)
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(got, x)
    eager = P.stop_gradient(x)
    np.testing.assert_array_equal(eager, x)
    assert not np.shares_memory(eager, x) and eager.flags.writeable
    assert "stop_gradient" in prim_names(lambda a: P.stop_gradient(a), x)


def test_stop_gradient_vjp(rng):
    x, w = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    f = lambda a: total(P.mul(P.stop_gradient(P.mul(a, a)), a), w)  # noqa: E731
    (g,) = check_grads(lambda a: total(P.mul(P.stop_gradient(P.mul(x, x)), a), w), (x,))
    np.testing.assert_allclose(ember.grad(f)(x), g, rtol=1e-12)
    np.testing.assert_allclose(g, x * x * w, rtol=1e-12)
    np.testing.assert_array_equal(ember.grad(lambda a: total(P.stop_gradient(a), w))(x), np.zeros_like(x))


@pytest.mark.parametrize("in_axes,out_axes", [(0, 0), (1, 0), (-1, 1), (2, 2)], ids=str)
def test_stop_gradient_batching(in_axes, out_axes, rng):
    x = rng.normal(size=(3, 3, 3))
    for f in (lambda a: P.stop_gradient(a), lambda a: P.stop_gradient(P.mul(a, 2.0))):
        np.testing.assert_array_equal(ember.vmap(f, in_axes, out_axes)(x), loop_vmap(f, in_axes, (x,), out_axes))
        assert "stop_gradient" in prim_names(ember.vmap(f, in_axes, out_axes), x)


# --- the registry is covered ----------------------------------------------------------------------

COVERED = {
    "reference": {"custom_vjp_call", "stop_gradient"},
    "errors": {"custom_vjp_call"},
    "vjp": {"custom_vjp_call", "stop_gradient"},
    "batch": {"custom_vjp_call", "stop_gradient"},
}
# Primitives whose shape rule cannot fail (it returns its operand's aval unchanged).
NO_RULE_ERRORS = {"stop_gradient"}
FAMILY_MODULES = ["elementwise", "layout", "reduce", "dot", "indexing", "custom", "custom_jvp", "fusion", "remat",
                  "control", "bits",
                  "scatter_combine",
                  "conv",
                  "windows",
                  "sort", "linalg"]


def _covered(aspect: str) -> set:
    names = set()
    for family in FAMILY_MODULES:
        module = importlib.import_module(f"tests.tracer.test_prims_{family}")
        names |= module.COVERED[aspect]
    return names


@pytest.mark.parametrize("aspect", ["reference", "errors", "vjp", "batch"])
def test_every_registered_primitive_is_covered(aspect):
    exempt = NO_RULE_ERRORS if aspect == "errors" else set()
    if aspect in ("vjp", "batch"):  # internal primitives are never transformed
        exempt = {name for name, p in primitives.items() if not p.transformable}
    covered = _covered(aspect)
    missing = sorted(set(primitives) - covered - exempt)
    assert not missing, f"primitives without {aspect} tests in tests/tracer/test_prims_*.py: {missing}"
    unknown = sorted(covered - set(primitives))
    assert not unknown, f"tests claim to cover unregistered primitives: {unknown}"
