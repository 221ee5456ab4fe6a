"""ember.checkpoint (remat): the saving it buys in the memory plan, the recomputation surviving the
optimizer, values and gradients against the plain function and JAX's jax.checkpoint for each policy
(jit, grad, grad of grad, vmap, forward mode, both backends), and the errors JAX gives."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.passes.autodiff import ROLE_RECOMPUTE
from ember.passes.cse import cse
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.trace import new_builder
from tests.helpers import assert_tree_allclose

jax = pytest.importorskip("jax")
jjnp = jax.numpy

POLICIES = ["nothing_saveable", "everything_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable"]


def layer(np_, w, h):
    return np_.tanh(w @ h)


def chain(np_, w, h, wrap=lambda f: f, per_block: int = 1, depth: int = 16):
    """`depth` layers tanh(w @ h), `wrap`ped (checkpointed) in blocks of `per_block` layers."""

    def block(w, h):
        for _ in range(per_block):
            h = layer(np_, w, h)
        return h

    block = wrap(block)
    for _ in range(depth // per_block):
        h = block(w, h)
    return np_.sum(h)


@pytest.fixture(scope="module")
def deep():
    rng = np.random.default_rng(0)
    return (rng.normal(size=(256, 256)) / 16).astype(np.float32), rng.normal(size=(256, 256)).astype(np.float32)


def _lowered(wrap, per_block, w, x, disable_passes=()):
    return ember.jit(ember.grad(lambda a, b: chain(jnp, a, b, wrap, per_block), argnums=(0, 1)),
                     disable_passes=disable_passes).lower(w, x)


def test_checkpoint_lowers_the_peak_of_a_deep_chain(deep):
    """16 layers of tanh(W @ x): without checkpoint every layer keeps its output and tanh's derivative
    (fusion computes it in the forward pass); checkpointed layers keep only their inputs, blocks of 4
    only every fourth. Checkpointing the whole chain recomputes it all at once: no saving."""
    w, x = deep
    plain = _lowered(lambda f: f, 1, w, x).memory().peak_bytes
    per_layer = _lowered(ember.checkpoint, 1, w, x).memory().peak_bytes
    blocks = _lowered(ember.checkpoint, 4, w, x).memory().peak_bytes
    whole = _lowered(ember.checkpoint, 16, w, x).memory().peak_bytes
    activation = x.nbytes
    assert per_layer <= plain - 10 * activation, (plain, per_layer)
    assert blocks <= plain - 8 * activation, (plain, blocks)
    assert whole <= plain
    # Without fusion (whose epilogue sums the 16 gradient terms of W in the last kernel, keeping them all
    # alive) blocks of 4 show the square-root schedule: the peak halves.
    unfused = [_lowered(wrap, k, w, x, ("fusion",)).memory().peak_bytes for wrap, k in ((lambda f: f, 1),
                                                                                        (ember.checkpoint, 4))]
    assert unfused[1] <= unfused[0] / 2, unfused


def test_the_recomputation_survives_optimization_in_the_backward_part(deep):
    w, x = deep
    low = _lowered(ember.checkpoint, 4, w, x)
    recomputed = [n for n in low.optimized.all_nodes() if n.role == ROLE_RECOMPUTE]
    assert sum(n.prim is P.dot_general_p for n in recomputed) == 16  # 4 blocks x 4 layers, none merged by CSE
    assert "recompute" in low.text()
    schedule = low.stages[-1].plan.schedule
    last_forward = max(j for j, n in enumerate(schedule) if n.role == "active")
    first_recompute = min(j for j, n in enumerate(schedule) if n.role == ROLE_RECOMPUTE or any(
        m.role == ROLE_RECOMPUTE for g in n.subgraphs() for m in g.nodes))
    assert first_recompute > last_forward  # scheduled in the backward part, not with the forward


def test_checkpoint_gradients_equal_the_plain_ones_on_both_backends(deep):
    w, x = deep[0][:64, :64].astype(np.float64), deep[1][:64, :4].astype(np.float64)
    f = lambda a, b: chain(jnp, a, b, ember.checkpoint, 4, depth=8)  # noqa: E731
    plain = lambda a, b: chain(jnp, a, b, depth=8)  # noqa: E731
    want = ember.jit(ember.value_and_grad(plain, argnums=(0, 1)), backend="numpy", optimize=False)(w, x)
    for backend in ("numpy", "llvm"):
        got = ember.jit(ember.value_and_grad(f, argnums=(0, 1)), backend=backend)(w, x)
        assert_tree_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_prevent_cse_false_lets_cse_merge_the_recomputation(deep):
    w, x = deep
    wrap = lambda f: ember.checkpoint(f, prevent_cse=False)  # noqa: E731
    low = _lowered(wrap, 1, w, x)
    assert low.memory().peak_bytes == _lowered(lambda f: f, 1, w, x).memory().peak_bytes
    assert not any(n.role == ROLE_RECOMPUTE for n in low.optimized.all_nodes())


def test_cse_never_merges_a_recomputed_node_with_a_forward_one():
    with new_builder() as b:
        x = b.new_input(ShapedArray((3,), np.float32))
        fwd = P.sin(x)
        with b.at(role=ROLE_RECOMPUTE):
            again, twice = P.sin(x), P.sin(x)
        graph = b.build([fwd, again, twice])
    out = cse(graph)
    assert len(out.nodes) == 2  # the two recomputations merge with each other, not with the forward's
    assert out.outputs[1] is out.outputs[2] and out.outputs[0] is not out.outputs[1]


# --- policies, against JAX -------------------------------------------------------------------------

def mixed(np_, w, x, ws):
    """An unbatched dot, a batched one (einsum with a batch axis) and elementwise work between."""
    h = np_.sin(w @ x)
    g = np_.einsum("bij,bj->bi", ws, np_.cos(h).T)
    return np_.sum(np_.tanh(g) * np_.exp(-h.T))


@pytest.fixture(scope="module")
def mixed_args():
    rng = np.random.default_rng(1)
    return rng.normal(size=(4, 5)) / 2, rng.normal(size=(5, 3)), rng.normal(size=(3, 4, 4)) / 2


def _jax_policy(name):
    return getattr(jax.checkpoint_policies, name)


@pytest.mark.parametrize("policy", POLICIES)
def test_policies_match_jax_under_grad_and_grad_of_grad(policy, mixed_args):
    ef = ember.checkpoint(lambda *a: mixed(jnp, *a), policy=getattr(ember.checkpoint_policies, policy))
    jf = jax.checkpoint(lambda *a: mixed(jjnp, *a), policy=_jax_policy(policy))
    with jax.enable_x64(True):
        want = jax.value_and_grad(jf, argnums=(0, 1, 2))(*mixed_args)
        want2 = jax.grad(lambda x: jnp_sum(jax.grad(jf, argnums=1)(mixed_args[0], x, mixed_args[2])))(mixed_args[1])
    got = ember.jit(ember.value_and_grad(ef, argnums=(0, 1, 2)))(*mixed_args)
    assert_tree_allclose(got, (np.asarray(want[0]), tuple(np.asarray(g) for g in want[1])), rtol=1e-10, atol=1e-12)
    got2 = ember.grad(lambda x: jnp.sum(ember.grad(ef, argnums=1)(mixed_args[0], x, mixed_args[2])))(mixed_args[1])
    np.testing.assert_allclose(got2, np.asarray(want2), rtol=1e-10, atol=1e-12)


def jnp_sum(x):
    return jjnp.sum(x)


@pytest.mark.parametrize("policy,recomputed", [
    ("nothing_saveable", {"batched", "unbatched"}), ("everything_saveable", set()),
    ("dots_saveable", set()), ("dots_with_no_batch_dims_saveable", {"batched"})])
def test_policies_choose_which_dots_are_recomputed(policy, recomputed, mixed_args):
    ef = ember.checkpoint(lambda *a: mixed(jnp, *a), policy=getattr(ember.checkpoint_policies, policy))
    graph = ember.make_graph(ember.grad(ef, argnums=(0, 1, 2)))(*mixed_args)
    dots = {("batched" if n.params["dimension_numbers"][1][0] else "unbatched")
            for n in graph.nodes if n.prim is P.dot_general_p and n.role == ROLE_RECOMPUTE}
    assert dots == recomputed


def test_a_custom_policy_gets_jaxs_arguments(mixed_args):
    seen = []

    def policy(prim, *avals, **params):
        seen.append((prim.name, tuple(a.shape for a in avals), set(params)))
        return prim.name == "sin"

    ef = ember.checkpoint(lambda *a: mixed(jnp, *a), policy=policy)
    ember.grad(ef)(*mixed_args)
    dots = [params for name, shapes, params in seen if name == "dot_general" and shapes == ((4, 5), (5, 3))]
    assert dots and "dimension_numbers" in dots[0]
    assert ("sin", ((4, 3),)) in {(name, shapes) for name, shapes, _ in seen}


def test_vmap_and_forward_mode_match_jax(mixed_args):
    w, x, ws = mixed_args
    ef = ember.checkpoint(lambda *a: mixed(jnp, *a))
    jf = jax.checkpoint(lambda *a: mixed(jjnp, *a))
    xs = np.stack([x, 2 * x, -x])
    with jax.enable_x64(True):
        want_v = jax.vmap(jax.grad(jf), (None, 0, None))(w, xs, ws)
        want_vg = jax.grad(lambda a: jjnp.sum(jax.vmap(jf, (None, 0, None))(a, xs, ws)))(w)
        want_j = jax.jvp(lambda a: jf(a, x, ws), (w,), (np.ones_like(w),))
    np.testing.assert_allclose(ember.vmap(ember.grad(ef), (None, 0, None))(w, xs, ws), want_v, rtol=1e-10)
    got_vg = ember.jit(ember.grad(lambda a: jnp.sum(ember.vmap(ef, (None, 0, None))(a, xs, ws))))(w)
    np.testing.assert_allclose(got_vg, want_vg, rtol=1e-10)
    got_j = ember.jvp(lambda a: ef(a, x, ws), (w,), (np.ones_like(w),))
    np.testing.assert_allclose(got_j[0], want_j[0], rtol=1e-12)
    np.testing.assert_allclose(got_j[1], want_j[1], rtol=1e-10)


def named(np_, name, x):
    """sin x named "a", x * x named "b", both needed by the backward pass (as are cos a and exp b)."""
    a, b = name(np_.sin(x), "a"), name(x * x, "b")
    return np_.sum(np_.cos(a) * np_.exp(b))


@pytest.mark.parametrize("policy,args,recomputed", [
    ("save_only_these_names", ("a",), {"mul", "cos", "exp"}),
    ("save_any_names_but_these", ("a",), {"sin", "cos", "exp"}),
    ("save_anything_except_these_names", ("a",), {"sin"})])
def test_name_policies_match_jax_and_choose_what_is_recomputed(policy, args, recomputed, rng):
    from jax.ad_checkpoint import checkpoint_name as jax_name

    x = rng.normal(size=(5,))
    ef = ember.checkpoint(lambda v: named(jnp, ember.ad_checkpoint.checkpoint_name, v),
                          policy=getattr(ember.checkpoint_policies, policy)(*args))
    jf = jax.checkpoint(lambda v: named(jjnp, jax_name, v), policy=getattr(jax.checkpoint_policies, policy)(*args))
    with jax.enable_x64(True):
        want = jax.grad(jf)(x)
    np.testing.assert_allclose(ember.jit(ember.grad(ef))(x), want, rtol=1e-12)
    graph = ember.make_graph(ember.grad(ef))(x)
    assert {n.prim.name for n in graph.nodes if n.role == ROLE_RECOMPUTE} - {"checkpoint_name"} == recomputed


# --- calling conventions ---------------------------------------------------------------------------

def test_pytrees_static_arguments_keywords_and_closures(rng):
    x, y = rng.normal(size=(3,)), rng.normal(size=(3,))

    def f(p, n, scale=1.0):
        return {"out": jnp.sin(p["a"] * p["b"]) ** n * scale}

    ef = ember.checkpoint(f, static_argnums=(1,))
    jf = jax.checkpoint(lambda p, n, scale=1.0: {"out": jjnp.sin(p["a"] * p["b"]) ** n * scale}, static_argnums=(1,))
    loss = lambda g, s: lambda a, b: s.sum(g({"a": a, "b": b}, 3, scale=2.0)["out"])  # noqa: E731
    got = ember.grad(loss(ef, jnp), argnums=(0, 1))(x, y)
    with jax.enable_x64(True):
        want = jax.grad(loss(jf, jjnp), argnums=(0, 1))(x, y)
    assert_tree_allclose(got, tuple(np.asarray(v) for v in want), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ef({"a": x, "b": y}, 3)["out"], np.sin(x * y) ** 3)  # eager: the function

    def outer(a):  # the checkpointed function closes over a traced value: its gradient flows
        return jnp.sum(ember.checkpoint(lambda b: jnp.sin(a * b))(a))

    np.testing.assert_allclose(ember.grad(outer)(x), 2 * x * np.cos(x * x), rtol=1e-12)


def test_nested_checkpoints_and_a_grad_inside(rng):
    x = rng.normal(size=(4,))
    inner = ember.checkpoint(lambda a: jnp.sin(a) * a)
    outer = ember.checkpoint(lambda a: jnp.cos(inner(a)) + ember.grad(lambda b: jnp.sum(jnp.sin(b) ** 2))(a))
    plain = lambda a: jnp.cos(jnp.sin(a) * a) + ember.grad(lambda b: jnp.sum(jnp.sin(b) ** 2))(a)  # noqa: E731
    got = ember.jit(ember.grad(lambda a: jnp.sum(outer(a))))(x)
    np.testing.assert_allclose(got, ember.grad(lambda a: jnp.sum(plain(a)))(x), rtol=1e-12)


def test_undifferentiated_checkpoint_is_its_body_after_inline(rng):
    x = rng.normal(size=(4,))
    f = ember.jit(ember.checkpoint(lambda a: jnp.exp(a) + 1.0))
    low = f.lower(x)
    assert any(n.prim.name == "remat_call" for n in low.graph.nodes)
    assert not any(n.prim.name == "remat_call" for n in low.optimized.all_nodes())
    np.testing.assert_allclose(f(x), np.exp(x) + 1.0, rtol=1e-12)
    assert ember.remat is ember.checkpoint


# --- errors, as JAX gives them ---------------------------------------------------------------------

def test_errors():
    with pytest.raises(TypeError, match="Expected a callable value"):
        ember.checkpoint(3)
    with pytest.raises(TypeError, match="policy must be a callable"):
        ember.checkpoint(jnp.sin, policy="dots_saveable")
    with pytest.raises(TypeError, match="Value returned by a remat policy should be a bool"):
        ember.grad(ember.checkpoint(jnp.sin, policy=lambda *a, **k: "yes"))(1.0)
    with pytest.raises(ValueError, match="`static_argnums` argument to `ember.checkpoint`.*got \\(3,\\)"):
        ember.checkpoint(jnp.sin, static_argnums=(3,))(1.0)
    with pytest.raises(ember.ConcretizationError):
        ember.jit(ember.checkpoint(lambda a: a if a > 0 else -a))(1.0)
