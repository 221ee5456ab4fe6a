"""custom_jvp, JAX's canonical examples against JAX: a numerically stable rule (log1pexp: grad at 100 is
1.0, not nan), a rule that differs from the true derivative (so it must be the one used), defjvps,
nondiff_argnums; under jit, grad, grad of grad, vmap, jvp, jacfwd and hessian; the primitive's life in
the graph (inlined before any backend) and the errors."""

import functools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.helpers import assert_leaves_close

jax = pytest.importorskip("jax")
jjnp = jax.numpy

X = np.array([-1.5, 0.3, 2.0, 10.0])
# exp(100) overflows in float32: the point of log1pexp's rule
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(autouse=True)
def numpy_backend(monkeypatch):
    """The rules are what is tested: run on the numpy backend (no LLVM compile per transform)."""
    monkeypatch.setenv("EMBER_BACKEND", "numpy")


def log1pexp_of(custom_jvp, np_):
    """JAX's example: log(1 + exp(x)), whose plain derivative is nan at large x (inf / inf)."""
    @custom_jvp
    def log1pexp(x):
        return np_.log(1.0 + np_.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        return log1pexp(x), (1.0 - 1.0 / (1.0 + np_.exp(x))) * x_dot

    return log1pexp


def scaled_of(custom_jvp, np_):
    """sin(x) * y with a rule that is not its derivative: 3x the x part, so only the rule gives this."""
    @custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (x_dot, y_dot) = primals, tangents
        return f(x, y), 3.0 * np_.cos(x) * x_dot * y + np_.sin(x) * y_dot

    return f


def test_log1pexp_is_stable_where_plain_autodiff_is_nan():
    log1pexp = log1pexp_of(ember.custom_jvp, jnp)
    x = np.float32(100.0)
    assert ember.grad(log1pexp)(x) == 1.0
    assert np.isnan(ember.grad(lambda x: jnp.log(1.0 + jnp.exp(x)))(x))
    assert ember.jit(ember.grad(log1pexp))(x) == 1.0
    np.testing.assert_allclose(ember.vmap(ember.jit(ember.grad(log1pexp)))(np.array([0.0, 2.0, 10.0, 100.0],
                                                                                    np.float32)),
                               jax.vmap(jax.grad(log1pexp_of(jax.custom_jvp, jjnp)))(np.array([0.0, 2.0, 10.0, 100.0],
                                                                                            np.float32)),
                               rtol=1e-6)
    assert ember.jvp(log1pexp, (x,), (np.float32(2.0),))[1] == 2.0
    assert ember.jacfwd(log1pexp)(x) == 1.0


@pytest.mark.parametrize("transform", ["jvp", "jit_jvp", "grad", "jit_grad", "grad_of_grad", "vmap_grad", "jacfwd",
                                       "jacrev", "hessian", "grad_of_vmap", "jvp_of_grad", "jacfwd_of_jacfwd"])
def test_the_rule_is_used_under_every_transform(x64, transform):
    ours, theirs = scaled_of(ember.custom_jvp, jnp), scaled_of(jax.custom_jvp, jjnp)
    y = np.cos(X) + 2.0
    total = lambda f, np_: lambda x, y: np_.sum(f(x, y) ** 2)  # noqa: E731
    run = {
        "jvp": lambda e, f, np_: e.jvp(f, (X, y), (np.ones(4), np.ones(4) * 0.5)),
        "jit_jvp": lambda e, f, np_: e.jit(lambda x, y: e.jvp(f, (x, y), (np.ones(4), np.zeros(4))))(X, y),
        "grad": lambda e, f, np_: e.grad(total(f, np_), (0, 1))(X, y),
        "jit_grad": lambda e, f, np_: e.jit(e.grad(total(f, np_)))(X, y),
        "grad_of_grad": lambda e, f, np_: e.grad(lambda x: np_.sum(e.grad(total(f, np_))(x, y)))(X),
        "vmap_grad": lambda e, f, np_: e.vmap(e.grad(lambda x, y: f(x, y)))(X, y),
        "jacfwd": lambda e, f, np_: e.jacfwd(f, (0, 1))(X, y),
        "jacrev": lambda e, f, np_: e.jacrev(f, (0, 1))(X, y),
        "hessian": lambda e, f, np_: e.hessian(total(f, np_))(X, y),
        "grad_of_vmap": lambda e, f, np_: e.grad(lambda x: np_.sum(e.vmap(f)(x, y) ** 3))(X),
        "jvp_of_grad": lambda e, f, np_: e.jvp(e.grad(total(f, np_)), (X, y), (np.ones(4), np.ones(4))),
        "jacfwd_of_jacfwd": lambda e, f, np_: e.jacfwd(e.jacfwd(lambda x: f(x, y)))(X),
    }[transform]
    assert_leaves_close(run(ember, ours, jnp), run(jax, theirs, jjnp))


def test_the_rule_differs_from_plain_autodiff(x64):
    f = scaled_of(ember.custom_jvp, jnp)
    got = ember.grad(lambda x: jnp.sum(f(x, 1.0)))(X)
    np.testing.assert_allclose(got, 3.0 * np.cos(X), rtol=1e-12)


def test_defjvps_and_nondiff_argnums_match_jax(x64):
    def with_defjvps(custom_jvp, np_):
        @custom_jvp
        def f(x, y):
            return np_.sin(x) * y

        f.defjvps(lambda x_dot, out, x, y: np_.cos(x) * x_dot * y * 2.0, None)
        return f

    def app_of(custom_jvp):
        @functools.partial(custom_jvp, nondiff_argnums=(0,))
        def app(f, x):
            return f(x)

        app.defjvp(lambda f, primals, tangents: (app(f, *primals), 2.0 * tangents[0]))
        return app

    def results(e, np_, custom_jvp):
        f, app = with_defjvps(custom_jvp, np_), app_of(custom_jvp)
        return (e.jvp(f, (X, np.cos(X)), (np.ones(4), np.ones(4))),
                e.grad(lambda x: np_.sum(app(np_.tanh, x) * x))(X), e.jacfwd(lambda x: app(np_.sin, x))(X))

    assert_leaves_close(results(ember, jnp, ember.custom_jvp), results(jax, jjnp, jax.custom_jvp))


def test_int_arguments_and_pytrees():
    @ember.custom_jvp
    def f(p, n):
        return {"y": p["a"] * n, "n": n}

    @f.defjvp
    def f_jvp(primals, tangents):
        (p, n), (tp, _) = primals, tangents
        return f(p, n), {"y": tp["a"] * n * 10.0, "n": n}

    p = {"a": np.array([1.0, 2.0], np.float32)}
    _, t = ember.jvp(f, (p, np.int32(3)), ({"a": np.ones(2, np.float32)}, np.int32(0)))
    np.testing.assert_array_equal(t["y"], [30.0, 30.0])
    assert ember.grad(lambda a: jnp.sum(f({"a": a}, np.int32(2))["y"]))(p["a"]).tolist() == [20.0, 20.0]


def test_the_call_is_one_node_and_no_backend_sees_it():
    log1pexp = log1pexp_of(ember.custom_jvp, jnp)
    f = ember.jit(lambda x: log1pexp(x) * 2.0)
    low = f.lower(np.ones(3, np.float32))
    assert [n.prim.name for n in low.graph.nodes].count("custom_jvp_call") == 1
    assert not any(n.prim.name == "custom_jvp_call" for n in low.optimized.all_nodes())
    np.testing.assert_allclose(f(np.ones(3, np.float32)), 2 * np.log1p(np.e), rtol=1e-6)
    # differentiated: the rule is inlined, and the call inside it stays one, so that differentiating the
    # value again meets the rule again
    g = ember.jit(ember.value_and_grad(lambda x: jnp.sum(log1pexp(x))))
    low = g.lower(np.ones(3, np.float32))
    assert [n.prim.name for n in low.graph.nodes].count("custom_jvp_call") == 1
    assert not any(n.prim.name == "custom_jvp_call" for n in low.optimized.all_nodes())
    np.testing.assert_allclose(log1pexp(np.float32(1.0)), np.log1p(np.e), rtol=1e-6)  # eager: the function


def test_errors():
    @ember.custom_jvp
    def f(x):
        return jnp.sin(x)

    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function f"):
        f(1.0)
    f.defjvp(lambda primals, tangents: (f(*primals), (tangents[0], tangents[0])))
    with pytest.raises(TypeError, match="Custom JVP rule of f must produce primal and tangent outputs"):
        ember.grad(f)(1.0)
    f.defjvp(lambda primals, tangents: (f(*primals), jnp.ones(3)))
    with pytest.raises(TypeError, match="corresponding shapes"):
        ember.jvp(f, (1.0,), (1.0,))

    def closes_over(w):
        @ember.custom_jvp
        def g(x):
            return x * w

        g.defjvp(lambda primals, tangents: (g(*primals), tangents[0] * w))
        return g(2.0)

    with pytest.raises(ember.TransformError, match="closes over a value that is being differentiated"):
        ember.grad(closes_over)(1.0)


def test_pickles():
    import cloudpickle

    f = log1pexp_of(ember.custom_jvp, jnp)
    g = cloudpickle.loads(cloudpickle.dumps(f))
    assert ember.grad(g)(np.float32(100.0)) == 1.0
