"""A transposed, broadcast or batched operand of a contraction costs no copy: for x @ w.T, w.T @ x, the
per-sample (vmap) product with a shared w and the VJP contractions of each, the optimized graph has no
transpose feeding a dot_general and no contraction plan copies an operand into scratch. Values match
the oracle (every compiled call here is checked against it: conftest) and, for gradients, float64
finite differences."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.kernel import Buffer, Contraction, node_kernel
from ember.backends.llvm import dot


def _contraction_inputs(graph):
    """(dot_general node, the top-level atom each operand reads) for every product, fused or not."""
    found = []
    for node in graph.nodes:
        if node.prim.name == "dot_general":
            found.append((node, node.inputs))
        elif node.prim.name == "fusion":
            body = node.params["body"]
            outer = dict(zip(body.inputs, node.inputs))
            found += [(n, tuple(outer.get(a, a) for a in n.inputs)) for n in body.nodes if n.prim.name == "dot_general"]
    return found


def _copies(graph):
    """Operand copies the contraction plans of the graph's kernels make."""
    out = []
    for node in graph.nodes:
        if node.prim.name not in ("fusion", "dot_general"):
            continue
        kernel, _ = node_kernel(node)
        buffers = {b.name: b for b in kernel.inputs + kernel.outputs + kernel.temps}
        out += [(str(step), dot.contraction_copies(step, buffers)) for step in kernel.steps
                if isinstance(step, Contraction) and dot.contraction_copies(step, buffers)]
    return out


def check_layout_free(fn, *args, loop_copies: bool = False):
    """fn's optimized graph: no transpose read by a product, no plan copying an operand (unless
    `loop_copies`: a few rows with k shorter than a vector, where the model prices the copy lower,
    see the last test); returns it."""
    graph = ember.jit(fn).lower(*args).optimized
    producer = {v: n for n in graph.nodes for v in n.outputs}
    for d, operands in _contraction_inputs(graph):
        for a in operands:
            src = producer.get(a)
            assert src is None or src.prim.name != "transpose", f"a transpose feeds {d}"
    if not loop_copies:
        assert _copies(graph) == []
    return graph


def _rand(rng, *shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


# (rows of x, in, out): BLAS-sized (the seed's per-sample layer), a single sample, a small loop
SIZES = [(256, 10, 32), (1, 10, 32), (1, 32, 64), (4, 32, 32)]


@pytest.mark.parametrize("m,k,n", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_x_times_w_transposed(m, k, n, dtype, rng):
    x, w = _rand(rng, m, k, dtype=dtype), _rand(rng, n, k, dtype=dtype)
    fn = ember.jit(lambda x, w: x @ w.T)
    check_layout_free(lambda x, w: x @ w.T, x, w)
    np.testing.assert_allclose(fn(x, w), x @ w.T, rtol=1e-5 if dtype == np.float32 else 1e-12)


# (in, out, columns of x): BLAS-sized, one column, loop-sized (rows of a vector or more)
W_T_SIZES = [(10, 32, 256), (32, 32, 1), (10, 32, 8), (32, 10, 16)]


@pytest.mark.parametrize("k,n,m", W_T_SIZES)
def test_w_transposed_times_x(k, n, m, rng):
    w, x = _rand(rng, k, n), _rand(rng, k, m)
    check_layout_free(lambda w, x: w.T @ x, w, x)
    np.testing.assert_allclose(ember.jit(lambda w, x: w.T @ x)(w, x), w.T @ x, rtol=1e-12)


@pytest.mark.parametrize("batch", [256, 1])  # a few rows with k < a vector: see the last test
@pytest.mark.parametrize("form", ["x @ w.T", "w @ x"])
def test_vmap_of_a_matrix_vector_product_with_a_shared_w_is_one_product(batch, form, rng):
    """vmap over x only: the batch axis joins x's free axis (one product, no batch loop of gemv)."""
    w, xs = _rand(rng, 32, 10), _rand(rng, batch, 10)
    f = (lambda w, x: x @ w.T) if form == "x @ w.T" else (lambda w, x: w @ x)
    vf = ember.vmap(f, in_axes=(None, 0))
    graph = check_layout_free(vf, w, xs)
    (d, _), = _contraction_inputs(graph)
    assert d.params["dimension_numbers"][1] == ((), ())  # no batch axes: one matrix-matrix product
    np.testing.assert_allclose(ember.jit(vf)(w, xs), xs @ w.T, rtol=1e-12)


def _layer(form):
    if form == "x @ w.T":
        return lambda w, b, x: jnp.tanh(x @ w.T + b)
    return lambda w, b, x: jnp.tanh(w.T @ x.T).T + b


@pytest.mark.parametrize("form", ["x @ w.T", "w.T @ x"])
@pytest.mark.parametrize("batch", [256, 4, 1])
def test_vjp_contractions_read_in_place(form, batch, rng):
    layer = _layer(form)
    w = _rand(rng, 32, 10) if form == "x @ w.T" else _rand(rng, 10, 32)
    b, x = _rand(rng, 32), _rand(rng, batch, 10)

    def loss(w, b, x):
        return jnp.sum(layer(w, b, x) ** 2)

    g = ember.grad(loss, argnums=(0, 1, 2))
    check_layout_free(g, w, b, x, loop_copies=batch == 4)
    _check_finite_differences(loss, ember.jit(g)(w, b, x), (w, b, x))


def _check_finite_differences(loss, grads, args, eps=1e-6):
    f = ember.jit(loss)
    rng = np.random.default_rng(1)
    for i, (a, ga) in enumerate(zip(args, grads)):
        direction = rng.standard_normal(a.shape)
        plus = list(args)
        plus[i] = a + eps * direction
        minus = list(args)
        minus[i] = a - eps * direction
        numeric = (float(f(*plus)) - float(f(*minus))) / (2 * eps)
        np.testing.assert_allclose(float(np.sum(ga * direction)), numeric, rtol=1e-6, atol=1e-8)


def _mlp(params, x, transposed):
    for i in range(0, len(params), 2):
        w, b = params[i], params[i + 1]
        x = (x @ w.T if transposed else x @ w) + b
        if i + 2 < len(params):
            x = jnp.tanh(x)
    return x


def _params(rng, transposed, sizes=(10, 32, 32, 10)):
    out = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        out += [_rand(rng, b, a) if transposed else _rand(rng, a, b), 0.1 * _rand(rng, b)]
    return tuple(out)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("batch", [256, 4, 1])
def test_seed_mlp_per_sample_and_mean_gradients_copy_nothing(transposed, batch, rng):
    """The seed-002 model in both weight layouts: per-sample (vmap of grad) and mean-batch gradients."""
    params, xs = _params(rng, transposed), _rand(rng, batch, 10)

    def loss(p, x):
        return jnp.sum(_mlp(p, x, transposed))

    per_sample = ember.vmap(ember.grad(loss), in_axes=(None, 0))
    check_layout_free(per_sample, params, xs, loop_copies=batch == 4)
    got = ember.jit(per_sample)(params, xs)
    single = ember.jit(ember.grad(loss))
    for i in (0, batch - 1):
        for g_all, g_one in zip(got, single(params, xs[i])):
            np.testing.assert_allclose(g_all[i], g_one, rtol=1e-12, atol=1e-12)

    def mean_loss(p, x):
        return jnp.sum(_mlp(p, x, transposed)) / batch

    check_layout_free(ember.grad(mean_loss), params, xs, loop_copies=batch == 4)
    _check_finite_differences(lambda *p: mean_loss(p, xs), ember.jit(ember.grad(mean_loss))(params, xs), params)


def test_both_layouts_give_the_same_per_sample_gradients(rng):
    params = _params(rng, False)
    params_t = tuple(p.T.copy() if p.ndim == 2 else p for p in params)
    xs = _rand(rng, 16, 10)

    def grads(transposed, p):
        return ember.jit(ember.vmap(ember.grad(lambda p, x: jnp.sum(_mlp(p, x, transposed))), in_axes=(None, 0)))(p, xs)

    for g, gt in zip(grads(False, params), grads(True, params_t)):
        np.testing.assert_allclose(g, np.swapaxes(gt, -1, -2) if g.ndim == 3 else gt, rtol=1e-12, atol=1e-13)


def test_plan_copies_where_the_copy_is_cheaper():
    """The one place a copy stays, by the cost model: a loop-sized x @ w.T with several rows and k
    shorter than a vector (the dots form would sum 512 short vectors across; the copy is 320 elements)."""
    f32 = np.dtype(np.float32)
    buffers = {name: Buffer(name, shape, f32) for name, shape in (("in0", (16, 10)), ("in1", (32, 10)),
                                                                   ("out0", (16, 32)))}
    step = Contraction("in0", "in1", (((1,), (1,)), ((), ())), "out0")
    plan = dot._plan(step, buffers)
    assert dot.contraction_copies(step, buffers) == ("in1",) and plan.method == "loop"
    dots = dot._planned("dots", plan.dtype, plan.batch, plan.m, plan.n, plan.k, *dot._operands(step, buffers))
    assert not dots.scratch and dot._cost(dots) > dot._cost(plan)
