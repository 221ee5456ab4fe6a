"""What the fusion pass makes of whole programs: the eam gradient (seed 001) is two loops over x plus
scalar work, softmax computes its exponent once, the dense+bias+tanh gradient has an epilogue fusion,
and on random programs every fused graph is acyclic, every kernel is legal and no expensive op is
computed in more kernels than the unfused graph computes it."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
import ember.nn as nn
import ember.numpy as jnp
from ember.passes import fusion_rules as R
from ember.passes.bodies import recursive
from ember.passes.fusion import fusion
from tests.helpers import eam


def _stages(fn, *args):
    lowered = ember.jit(fn).lower(*args)
    return lowered.stage("after dce").graph, lowered.stage("after fusion").graph


def _fusions(graph):
    return [n for n in graph.nodes if n.prim.name == "fusion"]


def _space(node):
    """The shapes a top-level node iterates over or writes."""
    if node.prim.name == "fusion" and node.params["kind"] == "reduction":
        red = [n for n in node.params["body"].nodes if n.prim.kind == "reduction"]
        return {red[0].inputs[0].aval.shape} | {v.aval.shape for v in node.outputs}
    return {v.aval.shape for v in node.outputs} | {a.aval.shape for a in node.inputs}


def _expensive(nodes) -> Counter:
    return Counter(n.prim.name for n in nodes if R.expensive(n))


def check_fused(before, after):
    """The structural invariants of a fused graph against the graph the pass received."""
    after.verify()  # SSA and topological order: a fusion holding a cycle could not be placed
    fused_nodes = []
    for node in after.nodes:
        if node.prim.name != "fusion":
            fused_nodes.append(node)
            continue
        body = node.params["body"]
        assert len(body.nodes) > 1, "a 1-node fusion"
        assert not any(n.prim.name == "fusion" for n in body.nodes)
        ins = set(body.inputs)
        assert all(a in ins or not hasattr(a, "aval") or any(a in n.outputs for n in body.nodes)
                   for n in body.nodes for a in n.inputs if not hasattr(a, "key"))
        assert R.check_body(body.nodes, body.outputs, len(body.inputs)) is None, body
        assert (node.loc, node.role) == (body.nodes[-1].loc, body.nodes[-1].role)
        fused_nodes += body.nodes
    # an expensive op is never computed in more places than the unfused graph computes it
    have, had = _expensive(fused_nodes), _expensive(before.nodes)
    assert all(have[k] <= had[k] for k in have), (have, had)
    assert {n.loc for n in fused_nodes} <= {n.loc for n in before.nodes}


def test_eam_gradient_is_two_loops_over_x():
    x = np.random.default_rng(1).random(1000)
    before, after = _stages(ember.grad(eam), x)
    over_x = [n for n in after.nodes if x.shape in _space(n)]
    assert len(over_x) <= 2, after
    assert len([n for n in before.nodes if x.shape in _space(n)]) > 2  # fails without the pass
    check_fused(before, after)
    assert [n.params["kind"] for n in over_x] == ["reduction", "loop"]
    np.testing.assert_allclose(ember.jit(ember.grad(eam))(x),
                               ember.jit(ember.grad(eam), optimize=False)(x), rtol=1e-12)


@pytest.mark.parametrize("which", ["forward", "grad"])
def test_softmax_exponent_computed_once(which):
    x = np.random.default_rng(2).standard_normal((4, 7)).astype(np.float32)
    w = np.random.default_rng(3).standard_normal((4, 7)).astype(np.float32)
    fn = (lambda x: nn.softmax(x)) if which == "forward" else ember.grad(lambda x: jnp.sum(nn.softmax(x) * w))
    before, after = _stages(fn, x)
    forward, _ = _stages(lambda x: nn.softmax(x), x)
    exps = [n for node in _fusions(after) for n in node.params["body"].nodes if n.prim.name == "exp"]
    assert len(exps) == sum(n.prim.name == "exp" for n in forward.nodes) == 1
    assert not any(n.prim.name == "exp" for n in after.nodes)
    check_fused(before, after)


def test_dense_bias_tanh_gradient_has_an_epilogue():
    rng = np.random.default_rng(4)
    w, x, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (8, 5), (16,)))
    grad = ember.grad(lambda w, x, b: jnp.sum(jnp.tanh(w @ x + b[:, None]) ** 2), argnums=(0, 1, 2))
    before, after = _stages(grad, w, x, b)
    epilogues = [n for n in _fusions(after) if n.params["kind"] == "epilogue"]
    assert len(epilogues) == 1
    prims = [n.prim.name for n in epilogues[0].params["body"].nodes]
    assert prims.count("dot_general") == 1 and "add" in prims and "tanh" in prims
    check_fused(before, after)
    for got, want in zip(ember.jit(grad)(w, x, b), ember.jit(grad, optimize=False)(w, x, b)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cosine_naive_loop_gradient():
    from benchmarks.frameworks import Ember
    from benchmarks.workloads import cosine

    ops = Ember("numpy").ops
    a, b, w = cosine.inputs(dict(B=1, R=2, N=3, W=8))
    grad = ember.grad(cosine.loss_fn(cosine.cosine_naive, ops, w), argnums=(0, 1))
    before, after = _stages(grad, a, b)
    check_fused(before, after)
    assert len(after.nodes) < len(before.nodes) / 2
    scatters = [n for n in before.nodes if n.prim.name in ("scatter", "scatter_add")]
    assert scatters and all(n in after.nodes for n in scatters)  # not fusible: they stay plain nodes


_SETTINGS = settings(max_examples=int(os.environ.get("FUSION_EXAMPLES", "15")), deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                            HealthCheck.data_too_large])


def test_random_programs_fuse_legally():
    pytest.importorskip("jax")
    from tests.test_random_programs import EMBER, _inputs, programs, run

    @_SETTINGS
    @given(prog=programs(), seed=st.integers(0, 2**16))
    def check(prog, seed):
        inputs = _inputs(prog, seed, np.float32)

        def loss(*xs):
            return sum(jnp.sum(o) for o in run(EMBER, prog, xs))

        for fn in (lambda *xs: run(EMBER, prog, xs), ember.grad(loss, argnums=tuple(range(len(inputs))))):
            before, after = _stages(fn, *inputs)
            check_fused(before, after)
            assert recursive(fusion)(before).fingerprint() == after.fingerprint()  # deterministic (bodies too)

    check()
