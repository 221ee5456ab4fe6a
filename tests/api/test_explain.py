"""`Lowered.explain()`: the refusals of every stage grouped by pass (nodes named as in `lowered.text()`,
the user's line, the message, the [rule]), what was fused and written in place, and what it says when
nothing was refused or no optimization ran."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.passes import pipeline
from ember.passes.explain import Refusal, collecting, refuse
from ember.passes.memory import plan_memory
from ember.passes.stages import Stage
from ember.tracer.ir import Graph
from ember.viz.explain import Explanation, compact_lines, count_prims
from tests.viz.fusing import fuse

HERE = ember.make_graph(lambda x: x + 1.0)(1.0).nodes[0].loc.rpartition(":")[0]  # this file, as locs name it


def dense(w, x, b):
    y = jnp.tanh(w @ x + b[:, None])
    return jnp.sum(y ** 2)


def _line(fn, k: int) -> str:
    """The user's line `k` lines below `def fn`."""
    return f"{HERE}:{fn.__code__.co_firstlineno + k}"


def _dense_args(n=3):
    return np.ones((n, n), np.float32), np.ones((n, n), np.float32), np.ones(n, np.float32)


def _lowered(**kw):
    return ember.jit(ember.grad(dense, argnums=(0, 1, 2)), **kw).lower(*_dense_args())


def _with_inplace(plan, inplace: dict):
    """`plan` with an `inplace` mapping (the memory helper's field), whatever this build's Plan has."""
    plan = copy.copy(plan)
    object.__setattr__(plan, "inplace", inplace)
    return plan


def _hand_made():
    """Stages of the dense gradient with two hand-made fusions and refusals of two passes."""
    low = _lowered(disable_passes=("fusion", "inplace"))
    g = low.optimized  # dot, reshape, broadcast, add, tanh | mul, mul, sub, mul, reduce_sum | reshape, dot, dot
    assert [n.prim.name for n in g.nodes][4:6] == ["tanh", "mul"]
    fused = fuse(g, [(0, 4, "epilogue"), (5, 9, "multi_output")])
    d = fused.nodes[0].outputs[0]  # tanh's value, the epilogue's result
    i = fused.nodes[1].outputs[0]  # dy * (1 - y*y), read by both matmuls
    plan = _with_inplace(plan_memory(fused), {i: d})
    with collecting() as by_fusion:
        refuse("fusion", "contraction-operand", "dot_general reads its operands whole", (g.nodes[8], g.nodes[11]))
        refuse("fusion", "not-fusible", "reshape feeds only a graph output", (g.nodes[9], g.nodes[10]))
    with collecting() as by_memory:
        refuse("inplace", "user-input", "input 0 is a user argument and not donated", (fused.nodes[0],))
    stages = [low.stage("traced"), low.stage("after dce"), Stage("after fusion", fused, refusals=by_fusion),
              Stage("after memory", fused, plan=plan, refusals=by_memory)]
    return Explanation.of(stages, "dense"), g, fused


def test_hand_made_refusals_grouped_by_pass_with_names_lines_and_rules():
    ex, g, fused = _hand_made()
    assert [r.rule for r in ex] == ["contraction-operand", "not-fusible", "user-input"]
    assert [r.rule for r in ex.by_pass("fusion")] == ["contraction-operand", "not-fusible"]
    assert ex.by_rule("user-input")[0].nodes == (fused.nodes[0],)
    assert ex.by_rule("cycle") == []
    text = str(ex)
    lines = text.splitlines()
    heads = [k for k, line in enumerate(lines) if not line.startswith(" ")]
    assert [lines[k].split(":")[0] for k in heads] == ["explain dense", "fused", "in place", "not fused",
                                                       "not in place"]
    body = {lines[k].split(":")[0]: lines[k + 1:k2] for k, k2 in zip(heads, heads[1:] + [len(lines)])}
    # names as lowered.text() of the optimized (fused) graph prints them: i is the multi-output fusion's
    # first result (the mul), o the matmul reading it; the rule ends each line in brackets.
    assert body["not fused"][0].split() == ["mul", "i", "->", "dot_general", "o", _line(dense, 1), "dot_general",
                                            "reads", "its", "operands", "whole", "[contraction-operand]"]
    assert body["not fused"][1].split()[:5] == ["reduce_sum", "j", "->", "reshape", "n"]
    assert body["not fused"][1].endswith("reshape feeds only a graph output [not-fusible]")
    assert body["not in place"][0].split() == ["fusion", "d", _line(dense, 1), "input", "0", "is", "a", "user",
                                               "argument", "and", "not", "donated", "[user-input]"]
    assert lines[heads[3]] == "not fused: 2 edges, each with its line, the reason and [rule]"
    assert "(as in" not in text  # every node named here is in the optimized graph


def test_names_match_the_text_dump():
    ex, g, fused = _hand_made()
    from ember.viz.text import stage_text

    dump = stage_text(ex.stages[-1])
    assert "    i:f32[3,3] j:f32[3] = fusion[kind=multi_output] d" in dump
    assert "    o:f32[3,3] = dot_general" in dump and "    n:f32[3] = reshape" in dump


def test_done_section_lists_fusions_and_in_place_writes():
    ex, _, _ = _hand_made()
    lines = str(ex).splitlines()
    k = lines.index("fused: 2 kernels from 10 nodes (lowered.text() prints each body under it)")
    assert lines[k + 1].split() == ["d", "=", "epilogue:", _line(dense, 1), "dot_general,", "reshape,",
                                    "broadcast_in_dim,", "add,", "tanh"]
    assert lines[k + 2].split() == ["i", "j", "=", "multi_output:",
                                    f"{HERE}:{dense.__code__.co_firstlineno + 1},{dense.__code__.co_firstlineno + 2}",
                                    "3", "mul,", "sub,", "reduce_sum"]
    assert lines[k + 3] == ("in place: 1 value written into the buffer of an input that dies there "
                            "(36 bytes not allocated)")
    assert lines[k + 4].split() == ["fusion", "i", "writes", "into", "d's", "buffer", _line(dense, 1)]


def test_a_node_rebuilt_into_a_fusion_body_is_named_by_its_copy():
    ex, g, fused = _hand_made()
    inner_mul = g.nodes[5]  # y*y, rebuilt inside the multi-output kernel: not a node of the optimized graph
    assert all(inner_mul is not n for n in fused.all_nodes())
    ex = Explanation(ex.refusals + [Refusal("fusion", "r", "m", (g.nodes[4], inner_mul))], ex.stages, "dense")
    line = str(ex).splitlines()[-3]  # the new fusion refusal is listed last under "not fused"
    assert line.split()[:5] == ["tanh", "d", "->", "mul", "k"] and line.endswith("m [r]")
    from ember.viz.text import stage_text

    assert "        k:f32[3,3] = mul d d" in stage_text(ex.stages[-1])


def dead(x):
    unused = jnp.exp(x)  # noqa: F841
    return jnp.sum(x)


def test_a_node_the_optimizer_removed_is_named_in_the_stage_that_has_it():
    low = ember.jit(dead).lower(np.ones(3, np.float32))
    exp = next(n for n in low.graph.nodes if n.prim.name == "exp")
    assert all(n.prim.name != "exp" for n in low.optimized.nodes)
    ex = Explanation([Refusal("fusion", "r", "m", (exp,))], low.stages, "dead")
    assert str(ex).splitlines()[-2].split() == ["exp", "b", "(as", "in", "'after", "hoist')", _line(dead, 1),
                                                "m", "[r]"]


def probe(graph: Graph) -> Graph:
    """A pass that refuses to fuse every exp into each of its consumers (and changes nothing)."""
    for node in graph.nodes:
        if node.prim.name == "exp":
            users = [n for n in graph.nodes if node.outputs[0] in n.inputs]
            for user in users:
                refuse("fusion", "expensive-duplicate", f"exp would be duplicated into {len(users)} consumers",
                       (node, user))
    return graph


def softplusish(x):
    e = jnp.exp(x)
    return jnp.sum(e * x + e)


def test_refusals_recorded_by_a_pass_reach_explain(monkeypatch):
    monkeypatch.setattr(pipeline, "PASSES", pipeline.PASSES + [("probe", probe)])
    low = ember.jit(softplusish, disable_passes=("fusion", "inplace")).lower(np.ones(4, np.float32))
    ex = low.explain()
    assert [r.rule for r in ex] == ["expensive-duplicate"] * 2
    assert all(r.loc == _line(softplusish, 1) for r in ex)
    text, dump = str(ex), low.text()
    rows = [line.split() for line in text.splitlines() if line.endswith("[expensive-duplicate]")]
    assert len(rows) == 2
    for row in rows:
        assert row[0] == "exp" and row[2] == "->" and row[5] == _line(softplusish, 1)
        assert f"{row[1]}:f32[4] = exp" in dump and f"{row[4]}:f32[4] = {row[3]}" in dump
    assert {row[3] for row in rows} == {"mul", "add"}
    assert "exp would be duplicated into 2 consumers [expensive-duplicate]" in text


def test_no_refusals_says_so():
    low = ember.jit(lambda x: jnp.sum(x)).lower(np.ones(4, np.float32))
    ex = low.explain()
    assert len(ex) == 0 and ex.refusals == []
    lines = str(ex).splitlines()
    assert lines[0].startswith("explain <lambda>: passes run: simplify, cse, hoist, dce")
    fusion_ran = "after fusion" in low.stage_names
    assert ("not fused: nothing refused" if fusion_ran else "not fused: fusion did not run") in lines
    inplace_ran = getattr(low.stages[-1].plan, "inplace", None) is not None
    assert ("not in place: nothing refused" if inplace_ran else "not in place: inplace did not run") in lines


def test_optimize_false_says_no_optimization_ran():
    ex = _lowered(optimize=False).explain()
    assert len(ex) == 0
    assert str(ex) == ("explain dense: no optimization ran (optimize=False): every node runs on its own and every "
                       "value has its own buffer, freed after its last use. Lower without optimize=False to fuse "
                       "kernels and write in place.\n")


def test_disabled_passes_are_named():
    ex = _lowered(disable_passes=("fusion", "cse")).explain()
    lines = str(ex).splitlines()
    assert lines[0].startswith("explain dense: passes run: simplify, hoist, dce")
    assert "disabled: fusion, cse" in lines[0] and lines[0].endswith("Names are those of lowered.text().")
    assert "not fused: fusion is disabled" in lines


def test_helpers():
    assert compact_lines(["/a/m.py:10", "/a/m.py:9", None, "/b/o.py:3", "/a/m.py:10", "weird"]) == \
        "/a/m.py:9,10 /b/o.py:3 weird"
    g = ember.make_graph(lambda x: jnp.tanh(x * x * x + x))(np.ones(2))
    assert count_prims(g.nodes) == "2 mul, add, tanh"


@pytest.mark.parametrize("what", ["rule", "pass"])
def test_lookups_on_an_explanation_without_stages(what):
    r = Refusal("fusion", "cycle", "would create a cycle through add n17", ())
    ex = Explanation([r])
    assert (ex.by_rule("cycle") if what == "rule" else ex.by_pass("fusion")) == [r]
    assert str(ex).splitlines() == ["explain function", "not fused: 1 edge, each with its line, the reason and [rule]",
                                    "  -  (no line)  would create a cycle through add n17 [cycle]"]


def test_repr_is_the_report_and_the_headline_names_the_passes_run():
    ex, _, _ = _hand_made()
    assert repr(ex) == str(ex)
    head = str(ex).splitlines()[0]
    assert head == "explain dense: passes run: dce, fusion, inplace. Names are those of lowered.text()."


def test_in_place_into_a_donated_input_says_so():
    g = ember.make_graph(lambda x: jnp.exp(x) * 2.0)(np.ones(3, np.float32))
    plan = _with_inplace(plan_memory(g, donate=(0,)), {g.nodes[0].outputs[0]: g.inputs[0]})
    ex = Explanation.of([Stage("after fusion", g), Stage("after memory", g, plan=plan)], "f")
    rows = [line for line in str(ex).splitlines() if "writes into" in line]
    assert [r.split()[:7] for r in rows] == [["exp", "b", "writes", "into", "a's", "buffer", "(a"]]
    assert "(a donated input)" in rows[0] and "12 bytes not allocated" in str(ex)
