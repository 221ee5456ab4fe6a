"""cond, while and scan through ember.lax: values against Python loops, JAX's errors (with the user's
line), gradients against finite differences in float64 and against the unrolled loop, vmap against a
loop over the batch, and their compositions. Runs on both backends (llvm and the numpy oracle)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.errors import ShapeError
from tests.backends.control_cases import PROGRAMS, args_for, reference
from tests.helpers import assert_tree_allclose, assert_vmap_matches_loop, check_grads, prim_names

COVERED = {"reference": {"cond", "while", "scan"}, "errors": {"cond", "while", "scan"},
           "vjp": {"cond", "while", "scan"}, "batch": {"cond", "while", "scan"}}
THIS_FILE = "test_prims_control.py"


# --- values ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_its_python_loop(name):
    f = ember.jit(PROGRAMS[name][0])
    for seed in range(2):
        args = args_for(name, seed)
        got = f(*args)
        got = got if isinstance(got, tuple) else (got,)
        want = reference(name, args)
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == w.dtype and np.shape(g) == w.shape
            np.testing.assert_allclose(g, w, rtol=3e-6, atol=1e-6)


def test_a_loop_is_one_node_whatever_its_trip_count():
    f = lambda x: lax.fori_loop(0, 1000, lambda i, v: jnp.sin(v) + 0.5, x)  # noqa: E731
    assert prim_names(f, np.float32(1.0)) == {"scan"}
    assert len(ember.make_graph(f)(np.float32(1.0)).nodes) == 1


def test_scan_pytrees_xs_none_and_stacked_outputs():
    def step(c, x):
        a, b = c["a"], c["b"]
        return {"a": a + x[0], "b": b * 2.0}, (a, x[1] * b)

    xs = (np.arange(4, dtype=np.float32), np.ones((4, 2), np.float32))
    init = {"a": np.float32(0), "b": np.ones(2, np.float32)}
    (c, (ya, yb)) = ember.jit(lambda c, xs: lax.scan(step, c, xs))(init, xs)
    np.testing.assert_allclose(c["a"], 6.0)
    np.testing.assert_allclose(c["b"], [16, 16])
    np.testing.assert_allclose(ya, [0, 0, 1, 3])
    np.testing.assert_allclose(yb, [[1, 1], [2, 2], [4, 4], [8, 8]])
    c, ys = lax.scan(lambda c, _: (c + 1, c * 10), 0, None, length=3)
    assert int(c) == 3 and list(np.asarray(ys)) == [0, 10, 20]


def test_a_python_scalar_carry_takes_the_bodys_type_eagerly_and_under_jit():
    """Found trying JAX code: init 0.0 (weak float32) with float64 xs promotes, eagerly too."""
    def f(xs):
        return lax.scan(lambda c, x: (c + x["a"], {"s": x["a"] * x["b"]}), 0.0, xs)

    xs = {"a": np.arange(3.0), "b": np.ones(3)}
    for g in (f, ember.jit(f)):
        c, ys = g(xs)
        assert np.asarray(c).dtype == np.float64 and float(c) == 3.0
        np.testing.assert_array_equal(ys["s"], [0.0, 1.0, 2.0])


def test_map_and_select_n():
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(ember.jit(lambda xs: lax.map(lambda x: jnp.sum(x * x), xs))(xs), [1, 13, 41])
    which = np.array([0, 2, 1, 2], np.int32)
    cases = [np.full(4, k, np.float32) for k in (10, 20, 30)]
    np.testing.assert_array_equal(ember.jit(lax.select_n)(which, *cases), [10, 30, 20, 30])
    np.testing.assert_array_equal(lax.select_n(np.array([True, False]), np.zeros(2), np.ones(2)), [1, 0])


def test_closed_over_values_become_operands():
    w = np.float32(3.0)
    big = np.arange(5, dtype=np.float32)

    def f(x):
        return lax.fori_loop(0, 3, lambda i, v: v * w + big, x)

    x = np.ones(5, np.float32)
    np.testing.assert_allclose(ember.jit(f)(x), ((x * 3 + big) * 3 + big) * 3 + big)
    graph = ember.make_graph(f)(x)
    (node,) = [n for n in graph.nodes if n.prim.name == "scan"]
    assert not node.params["body"].consts  # bodies are closed


# --- errors ---------------------------------------------------------------------------------------

def test_a_carry_that_changes_type_names_the_leaf_both_types_and_the_line():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: {"w": c["w"].astype(jnp.float16)}, {"w": x})

    with pytest.raises(TypeError) as info:
        ember.jit(f)(np.ones(2, np.float32))
    msg = str(info.value)
    assert "['w']" in msg and "f32[2]" in msg and "f16[2]" in msg and THIS_FILE in msg


@pytest.mark.parametrize("fn, words", [
    (lambda x: lax.scan(lambda c, y: (c, y), x, np.ones((3, 2)), length=4), ["leading axis sizes", "3, 4"]),
    (lambda x: lax.scan(lambda c, y: c, x, np.ones(3)), ["pair"]),
    (lambda x: lax.scan(lambda c, y: (c, y), x, None), ["length"]),
    (lambda x: lax.while_loop(lambda c: c, lambda c: c, x), ["boolean scalar"]),
    (lambda x: lax.while_loop(lambda c: c > 0, lambda c: (c, c), x), ["structure"]),
    (lambda x: lax.cond(x > 0, lambda: x, lambda: (x, x)), ["same type structure"]),
    (lambda x: lax.cond(x > 0, lambda: x, lambda: x.astype(jnp.int32)), ["identical types", "i32"]),
    (lambda x: lax.cond(np.ones(2) > 0, lambda: x, lambda: x), ["scalar"]),
    (lambda x: lax.switch(1.5, [lambda: x], ), ["scalar integer"]),
    (lambda x: lax.fori_loop(0.0, 3, lambda i, v: v, x), ["integers"]),
    (lambda x: lax.select_n(np.array([True]), x, x, x), ["at most 2"]),
], ids=["scan-lengths", "scan-not-pair", "scan-no-length", "while-not-bool", "while-structure", "cond-structure",
        "cond-types", "cond-pred-shape", "switch-index", "fori-float", "select-n-bool"])
def test_bad_control_flow_raises_jax_exception_classes_with_the_line(fn, words):
    with pytest.raises((TypeError, ValueError)) as info:
        ember.jit(fn)(np.float32(1.0))
    msg = str(info.value)
    for w in words:
        assert w in msg, (w, msg)
    assert THIS_FILE in msg


def test_reverse_mode_of_while_loop_raises_jax_error_with_the_fix():
    f = lambda x, n: lax.fori_loop(0, n, lambda i, v: v * v, x)  # noqa: E731
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop.*scan"):
        ember.grad(f)(1.0, 3)
    # static bounds make it a scan, which differentiates
    np.testing.assert_allclose(ember.grad(lambda x: lax.fori_loop(0, 3, lambda i, v: v * v, x))(np.float64(1.5)),
                               8 * 1.5 ** 7, rtol=1e-6)


def test_shape_rules_check_bodies():
    g = ember.make_graph(lambda c, xs: lax.scan(lambda c, x: (c + x, c), c, xs))(np.float32(0), np.ones(3, np.float32))
    (node,) = g.nodes
    with pytest.raises(ShapeError, match="leading axis"):
        from ember.tracer import prims as P
        P.scan_p.bind(np.float32(0), np.ones(4, np.float32), **dict(node.params))


# --- gradients ------------------------------------------------------------------------------------

def rnn_loss(w, h0, xs):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, jnp.sum(jnp.sin(h))
    h, ys = lax.scan(step, h0, xs)
    return jnp.sum(h * h) + jnp.sum(ys * ys)


def rnn_loss_unrolled(w, h0, xs):
    h, total = h0, 0.0
    for k in range(xs.shape[0]):
        h = jnp.tanh(h @ w + xs[k])
        total = total + jnp.sin(h).sum() ** 2
    return jnp.sum(h * h) + total


def test_grad_of_scan_matches_finite_differences_and_the_unrolled_loop(rng):
    args = (rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3), rng.normal(size=(5, 3)))
    got = check_grads(rnn_loss, args, argnums=(0, 1, 2), rtol=1e-6, atol=1e-9)
    want = ember.grad(rnn_loss_unrolled, argnums=(0, 1, 2))(*args)
    assert_tree_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_a_weights_outer_product_cotangents_are_stacked_and_summed_by_one_contraction(rng):
    """The reverse scan carries no weight-sized accumulator: it stacks each step's factors (h_t, the
    step's cotangent) and one dot_general over the steps sums them after the loop."""
    args = (rng.normal(size=(4, 4)) * 0.5, rng.normal(size=4), rng.normal(size=(6, 4)))
    g = ember.make_graph(ember.grad(rnn_loss))(*args)
    (back,) = [n for n in g.nodes if n.prim.name == "scan" and n.params["reverse"]]
    carried = [v.aval.shape for v in back.outputs[:back.params["num_carry"]]]
    assert (4, 4) not in carried, carried
    users = [n for n in g.nodes if n.prim.name == "dot_general" and any(a in back.outputs for a in n.inputs)]
    assert any(n.params["dimension_numbers"] == (((0,), (0,)), ((), ())) for n in users)
    np.testing.assert_allclose(ember.grad(rnn_loss)(*args), ember.grad(rnn_loss_unrolled)(*args), rtol=1e-10)


def test_grad_of_reverse_scan_with_int_carry_and_unused_outputs(rng):
    def f(x, xs):
        def step(c, v):
            k, s = c
            return (k + 1, s * jnp.cos(v) + x * k), s
        (k, s), ys = lax.scan(step, (0, x), xs, reverse=True)
        return s + 0.5 * jnp.sum(ys)

    check_grads(f, (0.7, rng.normal(size=6)), argnums=(0, 1), rtol=1e-6, atol=1e-9)


def test_grad_of_cond_and_switch_take_the_branch_taken():
    def f(x, k):
        return lax.switch(k, [lambda v: jnp.sin(v) * v, lambda v: v ** 3, lambda v: jnp.exp(-v)], x)

    for k, want in ((0, np.sin(0.3) + 0.3 * np.cos(0.3)), (1, 3 * 0.3 ** 2), (2, -np.exp(-0.3)), (7, -np.exp(-0.3))):
        np.testing.assert_allclose(ember.grad(f)(np.float64(0.3), k), want, rtol=1e-12)
    g = lambda x, y: lax.cond(x > y, lambda a, b: a * b, lambda a, b: a - jnp.tanh(b), x, y)  # noqa: E731
    check_grads(g, (np.float64(0.5), np.float64(0.2)), argnums=(0, 1))
    check_grads(g, (np.float64(-0.5), np.float64(0.2)), argnums=(0, 1))


def test_second_derivatives_of_scan_and_cond(rng):
    def f(x):
        return lax.fori_loop(0, 4, lambda i, v: jnp.sin(v) * v + 0.1, x)

    x = np.float64(0.6)
    h = ember.grad(ember.grad(f))(x)
    d = 1e-5
    g = ember.grad(f)
    np.testing.assert_allclose(h, (g(x + d) - g(x - d)) / (2 * d), rtol=1e-6)
    c = lambda x: lax.cond(x > 0, lambda v: v ** 3, lambda v: jnp.sin(v), x)  # noqa: E731
    np.testing.assert_allclose(ember.grad(ember.grad(c))(np.float64(0.7)), 6 * 0.7, rtol=1e-12)
    np.testing.assert_allclose(ember.grad(ember.grad(c))(np.float64(-0.7)), -np.sin(-0.7), rtol=1e-12)


def test_forward_mode_of_scan_and_cond():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, v: lax.cond(v > 0, jnp.sin, jnp.cos, v) * v, x)

    x = np.float64(0.8)
    _, t = ember.jvp(f, (x,), (np.float64(1.0),))
    np.testing.assert_allclose(t, ember.grad(f)(x), rtol=1e-12)


def test_forward_mode_of_while_loop_carries_tangents():
    def f(x, n):
        return lax.fori_loop(0, n, lambda i, v: jnp.sin(v) * 1.5 + v * 0.1, x)

    x, n = np.array([0.3, -0.8]), np.int32(4)
    _, t = ember.jvp(lambda v: f(v, n), (x,), (np.ones(2),))
    d = 1e-6
    np.testing.assert_allclose(t, (f(x + d, n) - f(x - d, n)) / (2 * d), rtol=1e-6)
    jac = ember.jacfwd(lambda v: f(v, n))(x)
    np.testing.assert_allclose(jac, np.diag(t), atol=1e-12)
    newton = lambda a: lax.while_loop(lambda c: jnp.abs(c * c - a) > 1e-12 * a,  # noqa: E731
                                      lambda c: (c + a / c) * 0.5, a)
    a = np.array([2.0, 9.0])
    _, ta = ember.jvp(ember.vmap(newton), (a,), (np.ones(2),))
    np.testing.assert_allclose(ta, 0.5 / np.sqrt(a), rtol=1e-8)  # d sqrt(a) / da, through the iteration


def test_jacfwd_and_hessian_through_scan_and_cond(rng):
    args = (rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3), rng.normal(size=(4, 3)))
    fwd = ember.jacfwd(rnn_loss, argnums=1)(*args)
    np.testing.assert_allclose(fwd, ember.grad(rnn_loss, argnums=1)(*args), rtol=1e-10)
    h = ember.hessian(rnn_loss, argnums=1)(*args)
    h_rev = ember.jacrev(ember.grad(rnn_loss, argnums=1), argnums=1)(*args)
    np.testing.assert_allclose(h, h_rev, rtol=1e-8, atol=1e-12)
    c = lambda x: lax.cond(jnp.sum(x) > 0, lambda v: jnp.sum(v ** 3), lambda v: jnp.sum(jnp.sin(v)), x)  # noqa: E731
    x = np.array([0.5, 0.2])
    np.testing.assert_allclose(ember.hessian(c)(x), np.diag(6 * x), rtol=1e-12)


# --- batching -------------------------------------------------------------------------------------

def test_vmap_of_scan_over_each_operand(rng):
    w, h0, xs = rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3), rng.normal(size=(4, 5, 3))
    assert_vmap_matches_loop(rnn_loss, (None, None, 0), (w, h0, xs), tol=1e-12)
    assert_vmap_matches_loop(rnn_loss, (0, 0, None), (np.stack([w, w * 0.5]), np.stack([h0, -h0]), xs[0]), tol=1e-12)
    assert_vmap_matches_loop(rnn_loss, (None, 0, 1), (w, np.stack([h0, h0 * 2]), np.moveaxis(xs[:2], 0, 1)), tol=1e-12)


def test_vmap_of_cond_with_batched_and_unbatched_predicates(rng):
    f = lambda p, x: lax.cond(p > 0, lambda v: jnp.sin(v) * 2.0, lambda v: v - 1.0, x)  # noqa: E731
    p, x = np.array([1.0, -1.0, 2.0]), rng.normal(size=(3, 2))
    assert_vmap_matches_loop(f, (0, 0), (p, x), tol=1e-12)
    assert_vmap_matches_loop(f, (None, 0), (-1.0, x), tol=1e-12)
    s = lambda k, x: lax.switch(k, [lambda v: v, lambda v: v * v, lambda v: -v], x)  # noqa: E731
    assert_vmap_matches_loop(s, (0, 0), (np.array([0, 1, 2, 5]), rng.normal(size=4)), tol=1e-12)


def test_vmap_of_while_freezes_finished_lanes(rng):
    def newton_sqrt(a):
        return lax.while_loop(lambda c: jnp.abs(c[0] * c[0] - a) > 1e-10 * a,
                              lambda c: ((c[0] + a / c[0]) * 0.5, c[1] + 1), (a, 0))

    a = np.array([4.0, 2.0, 100.0, 1.0])
    x, n = assert_vmap_matches_loop(newton_sqrt, 0, (a,), tol=1e-12)
    np.testing.assert_allclose(x, np.sqrt(a), rtol=1e-10)
    assert n[3] == 0 and n[2] > n[0]  # lanes ran different trip counts
    # an unbatched predicate: the loop's trip count is shared
    f = lambda x, n: lax.fori_loop(0, n, lambda i, v: v * 1.5, x)  # noqa: E731
    assert_vmap_matches_loop(f, (0, None), (rng.normal(size=3), 4), tol=1e-12)


def test_per_sample_gradients_through_scan(rng):
    w, h0, xs = rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3), rng.normal(size=(4, 5, 3))
    per = ember.vmap(ember.grad(rnn_loss), in_axes=(None, None, 0))(w, h0, xs)
    for i in range(4):
        np.testing.assert_allclose(per[i], ember.grad(rnn_loss)(w, h0, xs[i]), rtol=1e-12, atol=1e-14)


def test_checkpoint_of_a_scan_body_trades_recomputation_for_memory(rng):
    """The residuals the forward scan stacks are what the checkpoint saves (its inputs), not each
    layer's activations; xs slices are read from xs, not stacked again. memory() shows it."""
    w = (rng.standard_normal((32, 32)) / 6).astype(np.float32)
    xs = rng.standard_normal((50, 32)).astype(np.float32)

    def make(step):
        def loss(w0, xs):
            def body(h, x):
                h = step(h, x) * w0
                return h, jnp.sum(h)
            return jnp.sum(lax.scan(body, jnp.ones(32, jnp.float32), xs)[1])
        return ember.grad(loss, argnums=(0, 1))

    def layers(h, x):
        for _ in range(4):
            h = jnp.tanh(h @ w + x)
        return h

    plain, ckpt = make(layers), make(ember.checkpoint(layers))
    peak = [ember.jit(f).lower(np.float32(0.9), xs).memory().peak_bytes for f in (plain, ckpt)]
    assert peak[1] < 0.5 * peak[0], peak
    assert_tree_allclose(ember.jit(ckpt)(np.float32(0.9), xs), plain(np.float32(0.9), xs), rtol=2e-5, atol=1e-5)
