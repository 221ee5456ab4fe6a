"""Control flow in the renderings: DOT draws each cond, while and scan as a cluster with one nested
cluster per body (bodies nest again), Graphviz accepts it, and the text and explain() name body values."""

import shutil
import subprocess

import numpy as np
import pytest

import ember
from ember.viz.dot import graph_to_dot
from ember.viz.names import GraphNames
from tests.backends.control_cases import traced


def test_dot_nests_a_cluster_per_body():
    g = traced("nested-scan-cond")
    dot = graph_to_dot(g)
    for title in ('label="scan"', 'label="body"', 'label="cond"', 'label="branch 0"', 'label="branch 1"'):
        assert title in dot
    assert dot.count("subgraph cluster_") == 7  # scan > body > (scan > body, cond > 2 branches)
    assert "<2 graphs: 1, 0 nodes>" in dot
    if shutil.which("dot"):
        out = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr


def test_every_body_value_has_a_name_and_the_text_shows_bodies():
    g = traced("while")
    names = GraphNames(g)
    for node in g.all_nodes():
        assert names.label(node) is not None
    text = ember.jit(lambda x, n: traced_fn(x, n)).lower(np.ones(3, np.float32), np.int32(2)).text()
    assert "cond_graph=" in text and "body_graph=" in text


def traced_fn(x, n):
    from tests.backends.control_cases import PROGRAMS

    return PROGRAMS["while"][0](x, n)


@pytest.mark.parametrize("name", ["scan-rnn", "switch"])
def test_dumps_of_optimized_control_flow_render(name, tmp_path):
    from tests.backends.control_cases import PROGRAMS, args_for

    fn = PROGRAMS[name][0]
    ember.dump(fn, *args_for(name), path=str(tmp_path))
    assert any(p.suffix == ".dot" for p in tmp_path.rglob("*"))
