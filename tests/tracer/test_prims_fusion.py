"""The `fusion` primitive: its shape rule checks operands against the body, its reference runs the body."""

import numpy as np
import pytest

import ember
from ember.errors import ShapeError
from ember.tracer import prims as P
from ember.tracer.ir import Graph, Node, Params, Var
from ember.tracer.primitive import impl_rules, shape_rules

COVERED = {"reference": {"fusion"}, "errors": {"fusion"}, "vjp": set(), "batch": set()}


def _body():
    return ember.make_graph(lambda x, b: (P.tanh(P.add(x, P.broadcast_in_dim(b, (3, 4), (1,)))),
                                          P.reduce_sum(P.exp(x), (1,))))(np.zeros((3, 4), np.float32),
                                                                          np.zeros(4, np.float32))


def test_reference_runs_the_body(rng):
    body = _body()
    x, b = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=4).astype(np.float32)
    t, s = impl_rules[P.fusion_p](x, b, body=body, kind="multi_output")
    np.testing.assert_allclose(t, np.tanh(x + b), rtol=1e-6)
    np.testing.assert_allclose(s, np.exp(x).sum(1), rtol=1e-6)
    avals = shape_rules[P.fusion_p](*body.in_avals, body=body, kind="multi_output")
    assert [a.str_short() for a in avals] == ["f32[3,4]", "f32[3]"]


def test_a_fusion_node_verifies_and_nests():
    body = _body()
    x, b = (Var(a) for a in body.in_avals)
    outs = [Var(a) for a in body.out_avals]
    g = Graph([x, b], [Node(P.fusion_p, [x, b], Params(body=body, kind="loop"), outs)], outs)
    assert g.verify() is g
    assert len(g.all_nodes()) == 1 + len(body.nodes)
    assert "fusion[body=" in g.text()


@pytest.mark.parametrize("case,match", [
    ("kind", "fusion kind 'fused'"), ("count", "takes 2 operands, got 1"), ("aval", "operand 1 is f64"),
])
def test_shape_errors(case, match):
    body = _body()
    avals = list(body.in_avals)
    kind = "fused" if case == "kind" else "loop"
    if case == "count":
        avals = avals[:1]
    if case == "aval":
        avals[1] = avals[1].update(dtype=np.dtype(np.float64))
    with pytest.raises(ShapeError, match=match):
        shape_rules[P.fusion_p](*avals, body=body, kind=kind)
