"""custom_vjp: hand-written adjoints (seed 001's `sum2`), nondiff arguments, composition with jit,
vmap and higher-order grad, and the errors for rules that do not fit."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp


def rho(r):
    return jnp.exp(-3.0 * (r + 1.0))


def _make_sum2():
    @ember.custom_vjp
    def sum2(x):
        return jnp.sum(rho(x))

    def sum2_fwd(x):
        return sum2(x), x  # the rule calls the function itself

    def sum2_bwd(x, g):
        return (g * -3.0 * rho(x),)

    sum2.defvjp(sum2_fwd, sum2_bwd)
    return sum2


def _eam(sum_fn):
    def eam(x):
        r = sum_fn(x)
        return r**2 + r**3 + 0.25 * r**4
    return eam


def _eam_grad_by_hand(x):
    rho_i = np.exp(-3.0 * (x + 1.0))
    r = rho_i.sum()
    return (2 * r + 3 * r**2 + r**3) * (-3.0 * rho_i)


@pytest.fixture
def x(rng):
    return rng.random(20)


def test_custom_sum_gradient_matches_plain_autodiff(x):
    sum2 = _make_sum2()
    custom = ember.grad(_eam(sum2))(x)
    plain = ember.grad(_eam(lambda x: jnp.sum(rho(x))))(x)
    np.testing.assert_allclose(custom, plain, rtol=1e-12)
    np.testing.assert_allclose(custom, _eam_grad_by_hand(x), rtol=1e-12)


def test_custom_rule_is_used(x):
    """A deliberately wrong backward rule shows up in the gradient: the rule, not autodiff, ran."""
    @ember.custom_vjp
    def f(x):
        return jnp.sum(jnp.sin(x))

    f.defvjp(lambda x: (f(x), x), lambda x, g: (x * 0.0 + 7.0 * g,))
    np.testing.assert_allclose(ember.grad(f)(x), np.full_like(x, 7.0))
    np.testing.assert_allclose(ember.jit(f)(x), np.sum(np.sin(x)))  # forward uses fun
    np.testing.assert_allclose(f(x), np.sum(np.sin(x)))  # eager call too


def test_forward_value(x):
    sum2 = _make_sum2()
    np.testing.assert_allclose(sum2(x), np.sum(np.exp(-3 * (x + 1))))
    np.testing.assert_allclose(ember.value_and_grad(sum2)(x)[0], np.sum(np.exp(-3 * (x + 1))))


def test_nondiff_argnums_with_a_function_argument(x):
    """Seed 001's sum2(op, arr): `op` is a Python function, static to the rule."""
    def sum2(op, arr):
        return jnp.sum(op(arr))

    sum2 = ember.custom_vjp(sum2, nondiff_argnums=(0,))
    seen_ops = []

    def sum2_fwd(op, arr):
        return sum2(op, arr), arr

    def sum2_bwd(op, arr, g):
        seen_ops.append(op)
        return (g * ember.vmap(ember.grad(op))(arr),)

    sum2.defvjp(sum2_fwd, sum2_bwd)
    g = ember.grad(_eam(lambda a: sum2(rho, a)))(x)
    np.testing.assert_allclose(g, _eam_grad_by_hand(x), rtol=1e-12)
    assert seen_ops and all(op is rho for op in seen_ops)
    g_cos = ember.grad(lambda a: sum2(jnp.cos, a))(x)
    np.testing.assert_allclose(g_cos, -np.sin(x), rtol=1e-12)


def _make_sum_op():
    """sum2(op, arr) with `op` static (nondiff_argnums) and an adjoint built from grad(op)."""
    def sum2(op, arr):
        return jnp.sum(op(arr))

    sum2 = ember.custom_vjp(sum2, nondiff_argnums=(0,))
    sum2.defvjp(lambda op, arr: (sum2(op, arr), arr),
                lambda op, arr, g: (g * ember.vmap(ember.grad(op))(arr),))
    return sum2


def test_nondiff_function_argument_under_jit_vmap_and_hessian(x):
    sum2 = _make_sum_op()
    ref = np.sum(np.exp(-3 * (x + 1)))
    np.testing.assert_allclose(sum2(rho, x), ref)
    np.testing.assert_allclose(ember.jit(lambda a: sum2(rho, a))(x), ref)
    np.testing.assert_allclose(ember.jit(sum2, static_argnums=0)(rho, x), ref)
    xs = np.stack([x, x + 1])
    np.testing.assert_allclose(ember.vmap(lambda a: sum2(rho, a))(xs), np.sum(np.exp(-3 * (xs + 1)), axis=1))
    g = ember.vmap(ember.grad(lambda a: sum2(rho, a)))(xs)
    np.testing.assert_allclose(g, -3 * np.exp(-3 * (xs + 1)), rtol=1e-12)
    H = ember.jacrev(ember.jacrev(lambda a: sum2(rho, a)))(x[:4])
    np.testing.assert_allclose(H, np.diag(9 * np.exp(-3 * (x[:4] + 1))), rtol=1e-12)


def test_custom_vjp_under_jit(x):
    sum2 = _make_sum2()
    f = ember.jit(ember.grad(_eam(sum2)))
    np.testing.assert_allclose(f(x), _eam_grad_by_hand(x), rtol=1e-12)
    names = [n.prim.name for n in f.lower(x).graph.nodes]
    # differentiated: fwd and bwd are inlined; one custom_vjp_call stays for the value, so that a
    # transform differentiating the value again still meets the rule
    assert names.count("custom_vjp_call") == 1
    # ... which costs nothing: once inlined, CSE shares its exp with fwd's and bwd's
    assert [n.prim.name for n in f.lower(x).optimized.all_nodes()].count("exp") == 1


def test_custom_vjp_under_vmap(x):
    sum2 = _make_sum2()
    xs = np.stack([x, 2 * x, x - 1])
    np.testing.assert_allclose(ember.vmap(sum2)(xs), [np.sum(np.exp(-3 * (r + 1))) for r in xs])
    g = ember.vmap(ember.grad(_eam(sum2)))(xs)
    np.testing.assert_allclose(g, np.stack([_eam_grad_by_hand(r) for r in xs]), rtol=1e-12)
    g2 = ember.grad(lambda xs: jnp.sum(ember.vmap(sum2)(xs)))(xs)
    np.testing.assert_allclose(g2, -3 * np.exp(-3 * (xs + 1)), rtol=1e-12)


def test_custom_vjp_hessian(x):
    """grad of grad differentiates the backward rule itself. hessian is jacfwd(jacrev) as in JAX, and
    this fwd rule calls the function itself, so forward mode meets it and raises JAX's TypeError: the
    reverse-over-reverse Hessian is jacrev(jacrev)."""
    sum2 = _make_sum2()
    xs = x[:5]
    hessian = lambda f: ember.jacrev(ember.jacrev(f))  # noqa: E731
    H = hessian(_eam(sum2))(xs)
    H_plain = ember.hessian(_eam(lambda x: jnp.sum(rho(x))))(xs)
    np.testing.assert_allclose(H, H_plain, rtol=1e-10)
    np.testing.assert_allclose(hessian(sum2)(xs), np.diag(9 * np.exp(-3 * (xs + 1))), rtol=1e-12)
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function"):
        ember.hessian(sum2)(xs)


def test_bwd_none_means_zero_cotangent(x):
    @ember.custom_vjp
    def f(a, b):
        return jnp.sum(a * b)

    f.defvjp(lambda a, b: (f(a, b), (a, b)), lambda res, g: (g * res[1], None))
    ga, gb = ember.grad(f, argnums=(0, 1))(x, 2 * x)
    np.testing.assert_allclose(ga, 2 * x)
    np.testing.assert_allclose(gb, np.zeros_like(x))


def test_pytree_arguments_and_cotangents(x):
    @ember.custom_vjp
    def f(p):
        return jnp.sum(p["a"] * p["b"])

    f.defvjp(lambda p: (f(p), p), lambda p, g: ({"a": g * p["b"], "b": g * p["a"]},))
    g = ember.grad(f)({"a": x, "b": x + 1})
    np.testing.assert_allclose(g["a"], x + 1)
    np.testing.assert_allclose(g["b"], x)


# --- errors ---------------------------------------------------------------------------------------

def test_missing_defvjp(x):
    @ember.custom_vjp
    def f(x):
        return jnp.sum(x)

    with pytest.raises(ember.TransformError) as e:
        ember.grad(f)(x)
    assert "no backward rule" in str(e.value) and "f.defvjp(fwd, bwd)" in str(e.value)
    assert "test_custom_vjp.py:" in str(e.value)


def test_bwd_returns_wrong_number_of_cotangents(x):
    @ember.custom_vjp
    def f(a):
        return jnp.sum(a)

    f.defvjp(lambda a: (f(a), a), lambda a, g: (g * a, g * a))
    with pytest.raises(ember.TransformError) as e:
        ember.grad(f)(x)
    msg = str(e.value)
    assert "bwd rule of f" in msg and "one cotangent per" in msg and "(1)" in msg and "length 2" in msg
    assert "test_custom_vjp.py:" in msg


def test_bwd_returns_non_tuple(x):
    @ember.custom_vjp
    def f(a):
        return jnp.sum(a)

    f.defvjp(lambda a: (f(a), a), lambda a, g: g * a)
    with pytest.raises(ember.TransformError, match="must return a tuple"):
        ember.grad(f)(x)


def test_bwd_returns_wrong_shape(x):
    @ember.custom_vjp
    def f(a):
        return jnp.sum(a)

    f.defvjp(lambda a: (f(a), a), lambda a, g: (jnp.ones(3) * g,))
    with pytest.raises(ember.TransformError) as e:
        ember.grad(f)(x)
    msg = str(e.value)
    assert "shape (3,)" in msg and f"shape {x.shape}" in msg and "test_custom_vjp.py:" in msg


def test_fwd_returns_wrong_structure(x):
    @ember.custom_vjp
    def f(a):
        return jnp.sum(a)

    f.defvjp(lambda a: f(a), lambda a, g: (g,))
    with pytest.raises(ember.TransformError, match=r"\(output, residuals\)"):
        ember.grad(f)(x)


def test_closing_over_a_differentiated_value(x):
    def outer(y):
        @ember.custom_vjp
        def inner(a):
            return jnp.sum(a * y)

        inner.defvjp(lambda a: (inner(a), a), lambda a, g: (g * y,))
        return inner(x)

    with pytest.raises(ember.TransformError) as e:
        ember.grad(outer)(x)
    msg = str(e.value)
    assert "closes over a value that is being differentiated" in msg and "argument" in msg
    assert "test_custom_vjp.py:" in msg


def test_closing_over_a_non_differentiated_value_is_fine(x):
    def outer(y, z):
        @ember.custom_vjp
        def inner(a):
            return jnp.sum(a * z)

        inner.defvjp(lambda a: (inner(a), a), lambda a, g: (g * z,))
        return inner(y)

    np.testing.assert_allclose(ember.grad(outer)(x, 3 * x), 3 * x)


# --- the rule survives when the value comes out of an inner transform ---------------------------

def _scaled_sin():
    """sin with a deliberately wrong rule (2 cos): a result that follows the rule cannot come from
    plain autodiff of the primal."""
    @ember.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (f(x), x), lambda x, g: (2.0 * jnp.cos(x) * g,))
    return f


def test_value_and_residual_from_one_computation_under_jit(x):
    """fwd returning its output as the residual: the re-emitted call and fwd compute it once."""
    @ember.custom_vjp
    def f(x):
        return jnp.exp(jnp.sin(x))

    f.defvjp(lambda x: (f(x), (f(x), x)), lambda r, g: (g * r[0] * jnp.cos(r[1]),))
    g = ember.jit(ember.grad(lambda x: jnp.sum(f(x) ** 2)))
    np.testing.assert_allclose(g(x), 2 * np.exp(2 * np.sin(x)) * np.cos(x), rtol=1e-12)
    names = [n.prim.name for n in g.lower(x).optimized.all_nodes()]
    assert names.count("exp") == 1 and names.count("sin") == 1


def _times_one():
    @ember.custom_vjp
    def f(x):
        return x * 1.0

    f.defvjp(lambda x: (f(x), None), lambda _, g: (3 * g,))
    return f


INNER_VALUE = {
    "value_and_grad": lambda f: lambda x: ember.value_and_grad(f)(x)[0],
    "vjp": lambda f: lambda x: ember.vjp(f, x)[0],
    "vjp_has_aux": lambda f: lambda x: ember.vjp(lambda y: (f(y), f(y)), x, has_aux=True)[2],
    "grad_has_aux": lambda f: lambda x: ember.grad(lambda y: (f(y), f(y)), has_aux=True)(x)[1],
    "value_and_grad_has_aux": lambda f: lambda x: ember.value_and_grad(lambda y: (f(y), f(y)),
                                                                       has_aux=True)(x)[0][1],
}


@pytest.mark.parametrize("inner", sorted(INNER_VALUE))
def test_rule_survives_an_inner_transforms_value(inner):
    """Issue 8: grad(lambda x: value_and_grad(f)(x)[0]) must use f's rule (JAX gives 3.0)."""
    value_of = INNER_VALUE[inner]
    np.testing.assert_allclose(ember.grad(value_of(_times_one()))(1.0), 3.0)
    np.testing.assert_allclose(ember.jit(ember.grad(value_of(_times_one())))(1.0), 3.0)
    f = _scaled_sin()
    x = np.array([0.3, 1.1])
    np.testing.assert_allclose(ember.vmap(ember.grad(value_of(f)))(x), 2 * np.cos(x), rtol=1e-12)
    second = ember.grad(lambda y: ember.grad(value_of(f))(y))
    np.testing.assert_allclose(second(np.float64(0.7)), -2 * np.sin(0.7), rtol=1e-12)


# --- keyword arguments are resolved to positions by the signature (as JAX) ----------------------

def _scale():
    @ember.custom_vjp
    def f(x, y=2.0):
        return x * y

    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda r, g: (3.0 * g * r[1], g * r[0]))
    return f


def test_keyword_arguments_resolve_to_positions():
    f = _scale()
    x = np.float64(1.5)
    np.testing.assert_allclose(ember.grad(lambda x: f(y=np.float64(4.0), x=x))(x), 12.0)
    np.testing.assert_allclose(ember.grad(lambda y: f(x, y=y))(np.float64(4.0)), 1.5)
    np.testing.assert_allclose(ember.grad(lambda x: f(x))(x), 6.0)  # the default reaches fwd too
    np.testing.assert_allclose(f(x, y=np.float64(4.0)), 6.0)
    np.testing.assert_allclose(ember.jit(lambda x: f(x=x))(x), 3.0)


def test_keyword_only_argument_raises():
    @ember.custom_vjp
    def h(x, *, k):
        return x * k

    h.defvjp(lambda x, k: (h(x, k=k), None), lambda r, g: (g,))
    with pytest.raises(TypeError, match="keyword argument.*k.*cannot be resolved to positions") as info:
        ember.grad(lambda x: h(x, k=2.0))(1.0)
    assert "test_custom_vjp.py" in str(info.value)
