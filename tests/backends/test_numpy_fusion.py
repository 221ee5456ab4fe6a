"""The numpy backend runs fusion nodes from their bodies emitted inline in its generated function
(one call per body node under a `# fusion <kind> <line>` comment), compiled once with the graph."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.numpy import NumpyExecutable
from ember.passes.memory import plan_memory
from ember.tracer import prims as P
from ember.tracer.ir import Graph, Node, Params, Var
from ember.tracer.primitive import impl_rules
from ember.tracer.prims.fusion import run_body


def _with_plan(g: Graph) -> tuple:
    """`g` and the memory plan the backend compiles it under."""
    return g, plan_memory(g)


def fused(fn, *args, kind: str) -> Graph:
    """A graph whose one node is a fusion of `fn`'s traced graph (its outputs are the graph's)."""
    body = ember.make_graph(fn)(*args)
    ins = [Var(a) for a in body.in_avals]
    outs = [Var(a) for a in body.out_avals]
    return Graph(ins, [Node(P.fusion_p, ins, Params(body=body, kind=kind), outs, loc="model.py:7")], outs).verify()


def _dense(w, x, b):
    return jnp.tanh(w @ x + b[:, None])


def _eam(x):
    return jnp.sum(jnp.exp(-3.0 * (x + 1.0)))


def _softmax_parts(x):
    m = jnp.max(x, axis=1, keepdims=True)
    e = jnp.exp(x - m)
    return e, jnp.sum(e, axis=1)


def _loop(x, b):
    return jnp.where(x.T > 0, x.T * b, -b) + jnp.arange(3.0, dtype=np.float32)[None, :]


CASES = {
    "loop": (_loop, [(3, 4), (4, 3)]),
    "reduction": (_eam, [(5, 6)]),
    "multi_output": (_softmax_parts, [(4, 6)]),
    "epilogue": (_dense, [(3, 5), (5, 4), (3,)]),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_kind_runs_inline_and_matches_the_body(kind, rng):
    fn, shapes = CASES[kind]
    args = [rng.normal(size=s).astype(np.float32) for s in shapes]
    g = fused(fn, *args, kind=kind)
    exe = NumpyExecutable(g, plan_memory(g))
    body = g.nodes[0].params["body"]
    got = exe(*args)
    want = run_body(body, args)
    assert len(got) == len(want)
    for a, e in zip(got, want):
        np.testing.assert_array_equal(a, e)
        assert a.dtype == e.dtype and a.shape == np.shape(e)
    lines = exe.source.splitlines()
    assert f"    # fusion {kind} model.py:7" in lines
    calls = [line for line in lines if "  # " in line and " = f" in line]
    assert [line.split("  # ")[1].split()[0] for line in calls] == [n.prim.name for n in body.nodes]


def test_dot_epilogue_and_multi_output_reduction_in_one_graph(rng):
    """Two fusions and a plain node between them: the epilogue's output feeds a multi-output fusion
    with a reduction."""
    w, x, b = (rng.normal(size=s) for s in [(3, 5), (5, 4), (3,)])
    epi = fused(_dense, w, x, b, kind="epilogue").nodes[0]
    h = epi.outputs[0]
    s = Var(h.aval)
    scaled = Node(P.mul_p, [h, h], Params(), [s])
    mo_body = ember.make_graph(lambda t: (jnp.exp(t), jnp.sum(jnp.exp(t), axis=0)))(np.zeros((3, 4)))
    mo_outs = [Var(a) for a in mo_body.out_avals]
    mo = Node(P.fusion_p, [s], Params(body=mo_body, kind="multi_output"), mo_outs)
    g = Graph(list(epi.inputs), [epi, scaled, mo], mo_outs).verify()
    e, total = NumpyExecutable(g, plan_memory(g))(w, x, b)
    t = np.tanh(w @ x + b[:, None])
    np.testing.assert_allclose(e, np.exp(t * t), rtol=1e-13)
    np.testing.assert_allclose(total, np.exp(t * t).sum(0), rtol=1e-13)


def test_the_body_is_compiled_once_not_interpreted_per_call(rng, monkeypatch):
    x = rng.normal(size=(5, 6)).astype(np.float32)
    exe = NumpyExecutable(*_with_plan(fused(_eam, x, kind="reduction")))

    def forbidden(*a, **k):
        raise AssertionError("a fusion was interpreted at call time")

    monkeypatch.setitem(impl_rules, P.fusion_p, forbidden)
    monkeypatch.setattr("ember.tracer.prims.fusion.run_body", forbidden)
    np.testing.assert_allclose(exe(x)[0], np.exp(-3.0 * (x + 1.0)).sum(), rtol=1e-5)


def test_outputs_that_are_operands_or_views_of_them_are_copies(rng):
    """A body output that is a body input, a view of one or a literal is the caller's own array."""
    x = rng.normal(size=(2, 3))
    g = fused(lambda x: (x, x.T, x.reshape(6), jnp.exp(x), 2.0), x, kind="multi_output")
    outs = NumpyExecutable(g, plan_memory(g))(x)
    for o in outs:
        assert isinstance(o, np.ndarray) and o.flags.writeable and not np.shares_memory(o, x)
    for a, e in zip(outs, [x, x.T, x.reshape(6), np.exp(x), 2.0]):
        np.testing.assert_array_equal(a, e)


def test_outputs_that_are_views_made_in_the_body_are_writable_copies(rng):
    """A body output broadcast from a body value is a read-only view in numpy: the caller gets a copy."""
    x = rng.normal(size=(2, 3))
    g = fused(lambda x: (jnp.broadcast_to(jnp.sum(x, axis=0), (4, 3)), jnp.sum(x, axis=1).reshape(2, 1)), x,
              kind="reduction")
    b, r = NumpyExecutable(g, plan_memory(g))(x)
    for o in (b, r):
        assert type(o) is ember.Array and np.asarray(o).flags.writeable
    np.asarray(b)[...] = 0.0
    np.testing.assert_array_equal(r, x.sum(1).reshape(2, 1))


def test_body_intermediates_are_released_in_the_body(rng):
    x = rng.normal(size=(5, 6)).astype(np.float32)
    src = NumpyExecutable(*_with_plan(fused(_eam, x, kind="reduction"))).source
    dels = [line for line in src.splitlines() if line.strip().startswith("del ")]
    assert dels and all("b" in line for line in dels)  # body values, never the graph's input a0


def test_nested_fusion_bodies_are_inlined_too(rng):
    x = rng.normal(size=(4,))
    inner = fused(lambda x: jnp.tanh(x) * 2.0, x, kind="loop")
    node = inner.nodes[0]
    outer_in = Var(node.inputs[0].aval)
    outer_out = [Var(v.aval) for v in node.outputs]
    outer = Graph([outer_in], [Node(P.fusion_p, [outer_in], Params(body=inner, kind="loop"), outer_out)],
                  outer_out).verify()
    exe = NumpyExecutable(outer, plan_memory(outer))
    np.testing.assert_allclose(exe(x)[0], np.tanh(x) * 2.0, rtol=1e-15)
    assert exe.source.count("# fusion loop") == 2
