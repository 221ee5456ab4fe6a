"""`Lowered.to_networkx(stage)`: any recorded stage as a networkx.DiGraph whose nodes carry prim, aval
and loc and whose edges are the data flow, named as `lowered.text()` names the values."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.tracer.ir import Var

SCALE = np.arange(2.0, dtype=np.float32)  # closed over: a const of the graph


def _loss(x, w):
    h = jnp.tanh(x @ w) * SCALE
    return jnp.sum(h * h)


@pytest.fixture(scope="module")
def lowered():
    return ember.jit(ember.grad(_loss)).lower(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32))


@pytest.mark.parametrize("stage", ["traced", "after cse", "optimized"])
def test_every_value_and_read_of_a_stage_is_a_node_and_an_edge(lowered, stage):
    graph = lowered.stages[-1].graph if stage == "optimized" else lowered.stage(stage).graph
    g = lowered.to_networkx(stage)
    assert isinstance(g, nx.DiGraph) and nx.is_directed_acyclic_graph(g)
    assert g.number_of_nodes() == len(graph.inputs) + len(graph.consts) + len(graph.nodes)
    by_node = {d["node"]: k for k, d in g.nodes(data=True) if d["node"] is not None}
    maker = {v: by_node[n] for n in graph.nodes for v in n.outputs}
    maker |= dict(zip(graph.inputs, g.graph["inputs"])) | dict(zip(graph.consts, g.graph["consts"]))
    assert [g.nodes[maker[v]]["prim"] for v in graph.consts] == ["const"] * len(graph.consts)
    want = {(maker[a], by_node[n]) for n in graph.nodes for a in n.inputs if isinstance(a, Var) and a in maker}
    assert set(g.edges) == want
    for n, k in by_node.items():
        assert (g.nodes[k]["prim"], g.nodes[k]["aval"], g.nodes[k]["loc"]) == (n.prim.name, n.outputs[0].aval, n.loc)


def test_names_and_attributes_are_those_the_text_prints(lowered):
    g = lowered.to_networkx()
    text = lowered.text()
    assert g.graph["stage"] == lowered.stage_names[-1] and len(g.graph["consts"]) == 1
    assert [g.nodes[k]["prim"] for k in g.graph["inputs"]] == ["input", "input"]
    assert f"{{ lambda {g.graph['consts'][0]}:f32[2] ; {g.graph['inputs'][0]}:f32[3,4]" in text
    for k, d in g.nodes(data=True):
        if d["node"] is not None:
            assert f"{k}:{d['aval'].str_short()} = {d['prim']}" in text
    (out,) = g.graph["outputs"]
    assert g.nodes[out]["output"] and g.nodes[out]["aval"].shape == (3, 4)
    assert all(d["values"] for _, _, d in g.edges(data=True))
    assert any(d["loc"] and d["loc"].endswith(f":{_loss.__code__.co_firstlineno + 1}") for _, d in g.nodes(data=True))


def test_an_unknown_stage_names_the_recorded_ones(lowered):
    with pytest.raises(KeyError, match="after fusion"):
        lowered.to_networkx("after nothing")
