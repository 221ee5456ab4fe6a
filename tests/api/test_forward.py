"""Forward mode (jvp, linearize, jacfwd, hessian) as JAX defines it, by the JVP transform: values against
JAX's own forward mode and against finite differences, pytrees and has_aux, composed with jit, grad and
vmap in either order, hessian-vector products forward-over-reverse, JAX's errors, and every primitive's
forward rule against its VJP rule (the dot-product test)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.tracer import prims as P
from tests.helpers import assert_leaves_close

jax = pytest.importorskip("jax")
jjnp = jax.numpy

RNG = np.random.default_rng(0)
X = RNG.uniform(0.2, 1.2, 5)
Y = RNG.uniform(0.5, 1.5, 5)


def pair(np_):
    return lambda x, y: (np_.sin(x) * y, np_.sum(np_.tanh(x * y) ** 2))


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def test_jvp_matches_jax():
    t = (RNG.standard_normal(5), RNG.standard_normal(5))
    assert_leaves_close(ember.jvp(pair(jnp), (X, Y), t), jax.jvp(pair(jjnp), (X, Y), t))


def test_jvp_matches_finite_differences():
    f = lambda x: jnp.exp(jnp.sin(x) * 2.0) / (1.0 + x * x)  # noqa: E731
    t, h = RNG.standard_normal(5), 1e-6
    _, jt = ember.jvp(f, (X,), (t,))
    fd = (np.asarray(f(X + h * t)) - np.asarray(f(X - h * t))) / (2 * h)
    np.testing.assert_allclose(jt, fd, rtol=1e-7, atol=1e-8)


def test_jvp_of_pytrees_with_aux_and_int_primals():
    def f(p, n):
        return {"y": p["w"] * jnp.sum(p["b"]) * n}, p["w"].sum()

    def g(p, n):
        return {"y": p["w"] * jjnp.sum(p["b"]) * n}, p["w"].sum()

    p = {"w": X, "b": Y}
    tp = {"w": np.ones(5), "b": np.arange(5.0)}
    n = np.int32(3)
    got = ember.jvp(f, (p, n), (tp, np.int32(0)), has_aux=True)
    want = jax.jvp(g, (p, n), (tp, np.zeros((), jax.dtypes.float0)), has_aux=True)
    assert_leaves_close(got, want)


def test_linearize_reuses_one_forward_pass():
    out, f_jvp = ember.linearize(lambda x: jnp.exp(x) * x, X)
    want_out, want_jvp = jax.linearize(lambda x: jjnp.exp(x) * x, X)
    assert_leaves_close(out, want_out)
    for t in (np.ones(5), RNG.standard_normal(5)):
        assert_leaves_close(f_jvp(t), want_jvp(t))
    tangent_prims = {n.prim.name for n in f_jvp._tangent.graph.nodes}
    assert "exp" not in tangent_prims and "mul" in tangent_prims  # exp(x) is a residual of the forward part


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_jacfwd_matches_jax(argnums):
    assert_leaves_close(ember.jacfwd(pair(jnp), argnums)(X, Y), jax.jacfwd(pair(jjnp), argnums)(X, Y))


def test_jacfwd_of_a_pytree_argument_with_aux():
    f = lambda p: (jnp.tanh(p[0]) * p[1][:, None], jnp.sum(p[0]))  # noqa: E731
    g = lambda p: (jjnp.tanh(p[0]) * p[1][:, None], jjnp.sum(p[0]))  # noqa: E731
    p = (RNG.standard_normal((3, 2)), RNG.standard_normal(3))
    assert_leaves_close(ember.jacfwd(f, has_aux=True)(p), jax.jacfwd(g, has_aux=True)(p))


def test_hessian_forward_over_reverse_and_hvp():
    loss = lambda v: jnp.sum(jnp.sin(v) * v ** 2)  # noqa: E731
    jloss = lambda v: jjnp.sum(jjnp.sin(v) * v ** 2)  # noqa: E731
    assert_leaves_close(ember.jacfwd(ember.jacrev(loss))(X), jax.hessian(jloss)(X))
    v = RNG.standard_normal(5)
    hvp = ember.jit(lambda x, v: ember.jvp(ember.grad(loss), (x,), (v,))[1])
    assert_leaves_close(hvp(X, v), jax.jvp(jax.grad(jloss), (X,), (v,))[1])


def test_forward_mode_composes_with_jit_grad_and_vmap():
    sin_jvp = lambda x: ember.jvp(jnp.sin, (x,), (jnp.ones_like(x),))[1]  # noqa: E731
    assert_leaves_close(ember.jit(sin_jvp)(X), np.cos(X))
    assert_leaves_close(ember.grad(lambda x: jnp.sum(sin_jvp(x)))(X), -np.sin(X))
    assert_leaves_close(ember.vmap(sin_jvp)(np.stack([X, Y])), np.cos(np.stack([X, Y])))
    jac = ember.jit(ember.vmap(ember.jacfwd(lambda v: jnp.tanh(v) * 2.0)))(np.stack([X, Y]))
    assert_leaves_close(jac, jax.vmap(jax.jacfwd(lambda v: jjnp.tanh(v) * 2.0))(np.stack([X, Y])))
    assert_leaves_close(ember.jvp(ember.jit(jnp.exp), (X,), (Y,))[1], np.exp(X) * Y)


def test_jvp_of_a_custom_vjp_function_raises_jax_s_type_error():
    @ember.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function"):
        ember.jvp(f, (X,), (X,))
    with pytest.raises(TypeError, match="custom_vjp"):
        ember.jacfwd(lambda x: f(x) * 2.0)(X)


def test_argument_errors():
    with pytest.raises(ember.ArgumentError, match="must be tuples"):
        ember.jvp(jnp.sin, X, X)
    with pytest.raises(ember.ArgumentError, match="1 primals but 2 tangents"):
        ember.jvp(jnp.sin, (X,), (X, X))
    with pytest.raises(ember.ArgumentError, match="tangent 0 is float32"):
        ember.jvp(jnp.sin, (X,), (X.astype(np.float32),))


def test_transformed_forward_functions_pickle():
    import cloudpickle

    f = ember.jacfwd(lambda v: jnp.sin(v) * 3.0)
    assert_leaves_close(cloudpickle.loads(cloudpickle.dumps(f))(X), f(X))


def test_python_scalar_primals():
    """Python floats as primals take their weak dtype (float32 here, as JAX without x64) through vjp's
    eager forward pass too; it used to hand the float64 array NumPy makes of them to a float32 executable."""
    out, pullback = ember.vjp(jnp.sin, 1.0)
    assert np.asarray(out).dtype == np.float32
    np.testing.assert_allclose(pullback(1.0)[0], np.cos(1.0), rtol=1e-6)
    out, jt = ember.jvp(jnp.sin, (1.0,), (1.0,))
    np.testing.assert_allclose((out, jt), (np.sin(1.0), np.cos(1.0)), rtol=1e-6)
    assert float(ember.jacfwd(lambda x: x ** 3)(2.0)) == 12.0


# --- every primitive's forward rule --------------------------------------------------------------

def _second_derivative_cases():
    from tests.tracer.test_second_derivatives import CASES

    return [c for c in CASES if c.prim != "custom_vjp_call"]


def _case_id(case) -> str:
    return f"{case.prim}-{case.note}" if case.note else case.prim


@pytest.mark.parametrize("case", [pytest.param(c, id=_case_id(c)) for c in _second_derivative_cases()])
def test_every_primitive_s_jvp_is_the_transpose_of_its_vjp(case):
    """The dot-product test, per primitive, at the second-derivative tests' points: <w, J v> from
    forward mode equals <J^T w, v> from reverse mode; and at the first point forward-over-reverse
    hessian-vector products equal reverse-over-reverse ones. On the numpy backend, unoptimized: the
    rules alone are tested."""
    from tests.tracer.test_second_derivatives import _directions, _loss, _weights

    run = lambda f: ember.jit(f, backend="numpy", optimize=False)  # noqa: E731
    jvp = run(lambda args, vs: ember.jvp(case.fn, args, vs)[1])
    pullback = run(lambda args, w: ember.vjp(case.fn, *args)[1](w))
    tol = 1e-12 if case.rtol <= 1e-6 else 1e-6  # looser through float32
    for k, args in enumerate(case.points):
        vs = _directions(args, k)
        w, w2 = _weights(case.fn, args)
        with np.errstate(all="ignore"):
            jt = np.asarray(jvp(args, vs))
            cts = pullback(args, w)
        forward = np.sum(w * jt)
        reverse = sum(np.sum(c * v) for c, v in zip(cts, vs))
        scale = np.sum(np.abs(w * jt)) + sum(np.sum(np.abs(c * v)) for c, v in zip(cts, vs))
        assert abs(forward - reverse) <= tol * scale, (case.prim, k, forward, reverse)
    # Second order at the random point only: at pow's special point (1, 0) the VJP rule selects d/dx to 0
    # where y == 0, so forward-over-reverse loses the mixed term that reverse-over-reverse finds.
    args, vs = case.points[0], _directions(case.points[0], 0)
    grad = ember.grad(_loss(case.fn, *_weights(case.fn, args)), tuple(range(len(args))))
    fwd_rev = run(lambda a, v: ember.jvp(grad, a, v)[1])
    rev_rev = run(lambda a, v: ember.grad(lambda *x: sum(P.reduce_sum(g * d, tuple(range(np.ndim(d))))
                                                         for g, d in zip(grad(*x), v)), tuple(range(len(a))))(*a))
    with np.errstate(all="ignore"):
        for got, want in zip(fwd_rev(args, vs), rev_rev(args, vs)):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.max(np.abs(want), initial=1.0))


def test_hessian_is_forward_over_reverse_with_argnums_and_aux():
    f = lambda x, y: (jnp.sum(jnp.sin(x) * y ** 2), x * 2.0)  # noqa: E731
    g = lambda x, y: (jjnp.sum(jjnp.sin(x) * y ** 2), x * 2.0)  # noqa: E731
    assert_leaves_close(ember.hessian(f, (0, 1), has_aux=True)(X, Y), jax.hessian(g, (0, 1), has_aux=True)(X, Y))


def test_the_default_rule_transposes_a_vjp_that_runs_its_own_forward(monkeypatch):
    """Without its JVP rule, custom_jvp_call's forward mode is its VJP transposed locally: a VJP that runs
    its own forward rule (vjp_fwd_rules: the user's rule linearized) and reads what it saved. Transposed,
    it gives back the user's rule (here 3x the true derivative)."""
    from ember.tracer.primitive import jvp_rules

    @ember.custom_jvp
    def f(x):
        return jnp.sin(x)

    f.defjvp(lambda primals, tangents: (f(*primals), 3.0 * jnp.cos(primals[0]) * tangents[0]))
    monkeypatch.delitem(jvp_rules, P.custom_jvp_call_p)
    t = RNG.standard_normal(5)
    assert_leaves_close(ember.jvp(f, (X,), (t,)), (np.sin(X), 3.0 * np.cos(X) * t))


def test_a_primitive_with_a_jvp_rule_and_no_vjp_rule_has_forward_mode():
    """What a while_loop needs: forward mode from its JVP rule alone (no VJP rule to transpose), while
    reverse mode names the primitive it cannot transform."""
    from ember.tracer.primitive import Primitive, impl_rules, jvp_rules, primitives, shape_rules

    cube = Primitive("test_forward_cube", kind="opaque", expensive=False)
    try:
        shape_rules[cube] = lambda x: x
        impl_rules[cube] = lambda x: x ** 3
        jvp_rules[cube] = lambda primals, tangents: (cube.bind(primals[0]), 3.0 * primals[0] ** 2 * tangents[0])
        f = lambda x: cube.bind(jnp.sin(x))  # noqa: E731
        run = lambda g: ember.jit(g, backend="numpy")  # noqa: E731
        assert_leaves_close(run(lambda x, t: ember.jvp(f, (x,), (t,)))(X, Y),
                            (np.sin(X) ** 3, 3 * np.sin(X) ** 2 * np.cos(X) * Y))
        assert_leaves_close(run(ember.jacfwd(lambda x: jnp.sum(f(x))))(X), 3 * np.sin(X) ** 2 * np.cos(X))
        with pytest.raises(ember.TransformError, match="grad cannot transform primitive test_forward_cube"):
            run(ember.grad(lambda x: jnp.sum(f(x))))(X)
    finally:
        del primitives[cube.name]
        for table in (shape_rules, impl_rules, jvp_rules):
            table.pop(cube, None)
