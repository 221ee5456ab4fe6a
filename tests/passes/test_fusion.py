"""The fusion pass: one test per refusal rule (the rule, the producer and consumer, and the user's line),
the kinds of fusion it makes, and values equal to the unfused graph on the numpy backend."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.numpy as jnp
from ember.passes import fusion_rules

RNG = np.random.default_rng(0)


def _x(*shape):
    return RNG.uniform(0.5, 1.5, size=shape).astype(np.float32)


def _line(fn, marker: str) -> int:
    """The line number of the line of `fn`'s source holding `marker`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if marker in text)


def _stage(fn, *args):
    return ember.jit(fn).lower(*args).stage("after fusion")


def _fusions(graph):
    return [n for n in graph.nodes if n.prim.name == "fusion"]


def _same_values(fn, *args):
    got, want = ember.jit(fn)(*args), ember.jit(fn, disable_passes=("fusion",))(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _refusal(fn, args, rule, producer, consumer, marker):
    """The one refusal of `rule` on the edge producer -> consumer, at the line of `fn` holding `marker`."""
    found = [r for r in _stage(fn, *args).refusals if r.rule == rule]
    assert found, f"no {rule!r} refusal in {[(r.rule, r.message) for r in _stage(fn, *args).refusals]}"
    hits = [r for r in found if [n.prim.name for n in r.nodes] == [producer, consumer]]
    assert len(hits) == 1, [(r.rule, [n.prim.name for n in r.nodes]) for r in found]
    r = hits[0]
    assert r.pass_name == "fusion"
    assert r.loc.endswith(f":{_line(fn, marker)}"), (r.loc, _line(fn, marker))
    assert producer in r.message or consumer in r.message
    _same_values(fn, *args)
    return r


def test_not_fusible_scatter():
    def f(x, y):
        z = x.at[1].add(y)  # scatter
        return jnp.exp(z) * 2.0

    r = _refusal(f, (_x(4), _x()), "not-fusible", "scatter_add", "exp", "# scatter")
    assert "scatter_add" in r.message and "not fusible" in r.message


def test_contraction_operand():
    def f(x, w):
        return jnp.tanh(x) @ w  # dot

    r = _refusal(f, (_x(3, 4), _x(4, 2)), "contraction-operand", "tanh", "dot_general", "# dot")
    assert "operands whole" in r.message


def test_indexed_operand():
    def f(x):
        return jnp.exp(x)[np.array([2, 0, 2])] + 1.0  # gather

    _refusal(f, (_x(4),), "indexed-operand", "exp", "gather", "# gather")


def test_expensive_duplicate_eam():
    def f(x):
        e = jnp.exp(-3.0 * x)  # exp
        return e * jnp.sum(e)

    r = _refusal(f, (_x(50),), "expensive-duplicate", "exp", "mul", "# exp")
    assert r.message.startswith("exp at ") and "duplicated into 2 kernels" in r.message


def test_reduce_max_shared_softmax():
    def f(x):
        return nn.softmax(x * 2.0)  # softmax

    r = _refusal(f, (_x(3, 5),), "reduce-max-shared", "mul", "sub", "# softmax")
    assert "reduce_max" in r.message and "computed once" in r.message


def test_materialized_for_a_dot():
    def f(x, w):
        h = x + 1.0  # h
        return h @ w, h.T * 3.0

    r = _refusal(f, (_x(4, 3), _x(3, 2)), "materialized", "add", "transpose", "# h")
    assert "dot_general" in r.message


def test_reread_through_a_broadcast():
    def f(x, y):
        a = x * 2.0  # a
        return a[:, None] + y

    r = _refusal(f, (_x(3), _x(3, 4)), "reread", "mul", "reshape", "# a")
    assert "4 times" in r.message


def test_two_pass():
    def f(x):
        return x - jnp.sum(x)  # centre

    r = _refusal(f, (_x(6),), "two-pass", "reduce_sum", "sub", "# centre")
    assert "second loop" in r.message


def test_space_mismatch_between_reductions():
    def f(x):
        s = jnp.sum(x, axis=0)  # s
        return jnp.sum(s * 2.0)

    _refusal(f, (_x(4, 3),), "space-mismatch", "reduce_sum", "mul", "# s")


def test_dot_epilogue_takes_no_reduction():
    def f(x, w):
        return jnp.sum(x @ w, axis=1)  # dot

    _refusal(f, (_x(3, 4), _x(4, 5)), "dot-epilogue", "dot_general", "reduce_sum", "# dot")


def test_cycle():
    def f(x):
        a = jnp.exp(x)  # a
        y = a.at[0].add(1.0)
        return a * y

    r = _refusal(f, (_x(5),), "cycle", "exp", "mul", "# a")
    assert "cycle through scatter_add" in r.message


@pytest.mark.parametrize("cap, rule, fn, producer, consumer", [
    ("MAX_INPUTS", "too-many-inputs", lambda x, y, z: (x + y) * z, "add", "mul"),
    ("MAX_REDUCTIONS", "too-many-reductions", lambda x, y, z: jnp.sum(x * y) + jnp.max(x * z), "reduce_max", "add"),
    ("MAX_NODES", "too-many-nodes", lambda x, y, z: jnp.exp(x) * y, "exp", "mul"),
])
def test_caps(monkeypatch, cap, rule, fn, producer, consumer):
    monkeypatch.setattr(fusion_rules, cap, {"MAX_INPUTS": 2, "MAX_REDUCTIONS": 1, "MAX_NODES": 1}[cap])
    args = (_x(4), _x(4), _x(4))
    found = [r for r in _stage(fn, *args).refusals if r.rule == rule]
    assert [[n.prim.name for n in r.nodes] for r in found] == [[producer, consumer]]
    assert found[0].loc and "at most" in found[0].message
    _same_values(fn, *args)


def test_kinds():
    cases = {
        "loop": (lambda x, y: jnp.tanh(x * y + 1.0), (_x(4), _x(4))),
        "reduction": (lambda x: jnp.sum(jnp.exp(-3.0 * (x + 1.0))), (_x(8),)),
        "multi_output": (lambda x: (jnp.sin(x), jnp.cos(x)), (_x(4),)),
        "epilogue": (lambda w, x, b: jnp.tanh(w @ x + b[:, None]), (_x(3, 4), _x(4, 2), _x(3))),
    }
    for kind, (fn, args) in cases.items():
        fusions = _fusions(_stage(fn, *args).graph)
        assert [n.params["kind"] for n in fusions] == [kind], (kind, _stage(fn, *args).graph)
        _same_values(fn, *args)


def test_fusion_keeps_locs_and_roles_and_takes_its_roots():
    def f(x):
        return jnp.sum(jnp.exp(x) ** 2)  # loss

    x = _x(5)
    traced = ember.jit(ember.grad(f)).lower(x).stage("after dce").graph
    fused = ember.jit(ember.grad(f)).lower(x).stage("after fusion").graph
    before = {(n.prim.name, n.loc, n.role) for n in traced.nodes}
    for node in _fusions(fused):
        body = node.params["body"].nodes
        assert {(n.prim.name, n.loc, n.role) for n in body} <= before
        assert (node.loc, node.role) == (body[-1].loc, body[-1].role)
    assert any(n.role == "backward" for n in fused.nodes)


def test_deterministic():
    def f(w, x, b):
        return jnp.sum(jnp.tanh(w @ x + b[:, None]) ** 2)

    args = (_x(3, 4), _x(4, 2), _x(3))
    g = ember.grad(f, argnums=(0, 1, 2))
    prints = {ember.jit(g).lower(*args).stage("after fusion").graph.fingerprint() for _ in range(3)}
    assert len(prints) == 1


def test_disabled_by_name():
    lowered = ember.jit(lambda x: jnp.exp(x) + 1.0, disable_passes=("fusion",)).lower(_x(3))
    assert "after fusion" not in lowered.stage_names and not _fusions(lowered.optimized)


def test_found_a_layout_only_fusion_returned_a_view_of_the_input():
    """Found by the optimized-vs-oracle test: slice+reshape fused into one kernel came back from the numpy
    backend as a view of the user's input (it copied only outputs of view primitives, not of fusions)."""
    x = np.arange(3.0, dtype=np.float32)
    f = ember.jit(lambda x: jnp.reshape(x[1:], (1, 2)))
    assert [n.params["kind"] for n in _fusions(f.lower(x).optimized)] == ["loop"]
    out = f(x)
    assert not np.shares_memory(out, x)
    np.testing.assert_array_equal(out, [[1.0, 2.0]])
