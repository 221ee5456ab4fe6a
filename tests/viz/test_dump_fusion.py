"""Dumps of fused graphs: each fusion a DOT cluster labeled with its kind (its body inside, edges into
its input ports and out of its output ports), in-place writes marked on their edges, and text dumps
printing each fusion's body indented under it, named as the code it replaces."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.passes.memory import plan_memory
from ember.passes.stages import Stage
from ember.tracer import ir
from ember.tracer import prims as P
from ember.viz import graph_to_dot, write_stages
from ember.viz.names import GraphNames
from ember.viz.text import graph_text, stage_text
from tests.viz.fusing import fuse

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def dense(w, x, b):
    y = jnp.tanh(w @ x + b[:, None])
    return jnp.sum(y ** 2)


def _fused_stage(inplace: bool = True) -> Stage:
    """The dense-bias-tanh gradient with an epilogue and a multi-output fusion; the plan writes the
    multi-output kernel's first result into the epilogue's (tanh) buffer."""
    args = np.ones((3, 3), np.float32), np.ones((3, 3), np.float32), np.ones(3, np.float32)
    g = ember.jit(ember.grad(dense, argnums=(0, 1, 2)), disable_passes=("fusion",)).lower(*args).optimized
    fused = fuse(g, [(0, 4, "epilogue"), (5, 9, "multi_output")])
    plan = copy.copy(plan_memory(fused))
    d, i = fused.nodes[0].outputs[0], fused.nodes[1].outputs[0]
    object.__setattr__(plan, "inplace", {i: d} if inplace else {})
    return Stage("after memory", fused, plan=plan)


def _clusters(dot: str) -> dict[str, str]:
    """cluster name -> its text (up to its closing brace at the same indent)."""
    found = {}
    for m in re.finditer(r"^(\s*)subgraph (cluster_\w+) \{", dot, re.M):
        end = dot.index(f"\n{m.group(1)}}}", m.end())
        found[m.group(2)] = dot[m.end():end]
    return found


def test_dot_draws_each_fusion_as_a_cluster_labeled_with_its_kind():
    stage = _fused_stage()
    dot = graph_to_dot(stage.graph, "dense", stage.notes, stage.plan)
    clusters = {k: v for k, v in _clusters(dot).items() if k != "cluster_legend"}
    assert len(clusters) == 2
    epi, multi = clusters.values()
    assert 'label="fusion d: epilogue' in epi and 'label="fusion i j: multi_output' in multi
    for op in ("dot_general", "reshape", "broadcast_in_dim", "add", "tanh"):
        assert f'label="{op}\\n' in epi and f'label="{op}\\n' not in multi
    assert multi.count('label="mul\\n') == 3 and 'label="reduce_sum\\n' in multi
    # the outer values enter through input ports (a b c; d), results leave through output ports
    assert re.findall(r"(n0_in\d) \[shape=invhouse", epi) == ["n0_in0", "n0_in1", "n0_in2"]
    assert "in0 -> n0_in0 " in dot and "in1 -> n0_in1 " in dot and "in2 -> n0_in2 " in dot
    assert re.search(r"n0_\d+ -> n0_out0;", epi) and "n0_out0 [shape=house" in epi
    assert "n0_out0 -> n1_in0 " in dot  # tanh's value, from the epilogue into the multi-output kernel
    assert "n1_out0 -> n3 " in dot and "n1_out1 -> n2 " in dot  # its results, to a matmul and a reshape
    assert re.search(r"n0_\d+ -> n0_\d+ \[label=\"h\"\]", epi)  # body edges carry the body's names


def test_dot_marks_in_place_edges():
    stage = _fused_stage()
    dot = graph_to_dot(stage.graph, "dense", stage.notes, stage.plan)
    marked = [line for line in dot.splitlines() if "(in place)" in line]
    assert marked == ['  n0_out0 -> n1_in0 [style=bold, color="#c62828", fontcolor="#c62828", label="d (in place)"];']
    assert "in place of d" in _clusters(dot)["cluster_2"]  # the result's port says whose buffer it took
    assert "in place: y overwrites x" in _clusters(dot)["cluster_legend"]
    plain = _fused_stage(inplace=False)
    assert "in place" not in graph_to_dot(plain.graph, "dense", plain.notes, plain.plan)


def test_dot_marks_in_place_into_a_plain_node():
    g = ember.make_graph(lambda x: jnp.tanh(jnp.exp(x)))(np.ones(3))
    plan = copy.copy(plan_memory(g))
    object.__setattr__(plan, "inplace", {g.nodes[1].outputs[0]: g.nodes[0].outputs[0]})
    dot = graph_to_dot(g, "g", None, plan)
    assert '  n0 -> n1 [style=bold, color="#c62828", fontcolor="#c62828", label="b (in place)"];' in dot
    assert "in place of b" in dot


@needs_dot
def test_fused_dot_renders_to_svg_with_clusters(tmp_path):
    stage = _fused_stage()
    written = write_stages([stage], str(tmp_path), formats=("svg",))
    svg = open(written[0]).read()
    assert svg.count('class="cluster"') == 3  # two fusions and the legend
    assert "fusion d: epilogue" in svg and "fusion i j: multi_output" in svg
    check = subprocess.run(["dot", "-Tsvg"], input=graph_to_dot(stage.graph).encode(), capture_output=True)
    assert check.returncode == 0 and not check.stderr


def test_text_dump_indents_each_fusion_body_under_it():
    stage = _fused_stage()
    lines = stage_text(stage).splitlines()
    k = next(j for j, line in enumerate(lines) if "fusion[kind=epilogue]" in line)
    assert lines[k].startswith("    d:f32[3,3] = fusion[kind=epilogue] a b c ")
    body = [line.split("#")[0].rstrip() for line in lines[k + 1:k + 6]]
    assert body == ["        e:f32[3,3] = dot_general[dimension_numbers=(((1,),(0,)),((),()))] a b",
                    "        f:f32[3,1] = reshape[new_sizes=(3,1)] c",
                    "        g:f32[3,3] = broadcast_in_dim[shape=(3,3) broadcast_dimensions=(0,1)] f",
                    "        h:f32[3,3] = add e g",
                    "        d:f32[3,3] = tanh h"]  # the body's result has the fusion's result's name
    assert lines[k + 6].startswith("    i:f32[3,3] j:f32[3] = fusion[kind=multi_output] d ")
    assert all(line.startswith("        ") for line in lines[k + 7:k + 12])
    assert lines[k + 12].startswith("    n:f32[3] = reshape")
    assert f"{dense.__code__.co_firstlineno + 2}  active" in lines[k + 7]  # body nodes keep lines and roles
    assert "# memory plan" in "\n".join(lines[k + 12:])


def test_a_body_result_that_is_not_a_body_node_value_is_said():
    g = ember.make_graph(lambda x: (x * 2.0, x))(np.ones(3))
    body = ir.Graph(g.inputs, g.nodes, [g.nodes[0].outputs[0], g.inputs[0]])
    outer_in = ir.Var(g.inputs[0].aval)
    outs = [ir.Var(v.aval) for v in body.outputs]
    fused = ir.Graph([outer_in], [ir.Node(P.fusion_p, [outer_in], ir.Params(body=body, kind="loop"), outs)],
                     outs).verify()
    text = graph_text(fused, locs=False)
    assert text.splitlines()[1:4] == ["    b:f64[3] c:f64[3] = fusion[kind=loop] a",
                                      "        b:f64[3] = mul a 2.0:f64[]",
                                      "        results: c = a"]


def test_text_without_fusions_is_the_ir_text():
    """The dump's renderer adds fusion bodies only: every other graph prints as ir.graph_text does."""
    args = np.ones((3, 3), np.float32), np.ones((3, 3), np.float32), np.ones(3, np.float32)
    low = ember.jit(ember.grad(dense, argnums=(0, 1, 2)), disable_passes=("fusion",)).lower(*args)
    for stage in low.stages:
        for notes in (None, stage.notes or None):
            assert graph_text(stage.graph, True, notes) == ir.graph_text(stage.graph, True, notes)
            names = GraphNames(stage.graph)
            assert graph_text(stage.graph, True, notes, names) == ir.graph_text(stage.graph, True, notes)
