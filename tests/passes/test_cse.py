"""CSE merges equal nodes; Literal operands are equal only when their dtype and bits are
(`Literal.key`), so 0.0 and -0.0, or two NaN payloads, never merge (JAX keeps them apart too)."""

import numpy as np
import pytest

import ember
from ember.passes.cse import cse
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph, Literal, Node, Params, Var

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)


def _nan(bits: int) -> np.float32:
    return np.array(bits, np.uint32).view(np.float32)[()]


@pytest.mark.parametrize("optimize", [True, False])
def test_zero_and_negative_zero_stay_apart(optimize):
    f = ember.jit(lambda x: (1 / (x * 0.0), 1 / (x * -0.0)), optimize=optimize)
    with np.errstate(divide="ignore"):
        pos, neg = f(np.ones(()))
    assert pos == np.inf and neg == -np.inf  # JAX: (inf, -inf)


@pytest.mark.parametrize("optimize", [True, False])
def test_literal_outputs_keep_their_sign_and_payload(optimize):
    nan_a, nan_b = _nan(0x7FC00001), _nan(0x7FC00002)
    outs = ember.jit(lambda x: (x, 0.0, -0.0, nan_a, nan_b), optimize=optimize)(np.ones((), F32))
    assert not np.signbit(outs[1]) and np.signbit(outs[2])
    assert outs[3].view(np.uint32) == 0x7FC00001 and outs[4].view(np.uint32) == 0x7FC00002


def test_nan_payloads_are_not_merged():
    nan_a, nan_b = _nan(0x7FC00001), _nan(0x7FC00002)
    a, b = ember.jit(lambda x: (x + nan_a, x + nan_b))(np.zeros((), F32))
    assert a.view(np.uint32) == 0x7FC00001 and b.view(np.uint32) == 0x7FC00002


def _add_graph(*literals):
    x = Var(ShapedArray((3,), F32))
    nodes = [Node(P.add_p, [x, lit], Params(), [Var(x.aval)]) for lit in literals]
    return Graph([x], nodes, [n.outputs[0] for n in nodes])


def test_cse_merges_literals_with_equal_dtype_and_bits():
    g = cse(_add_graph(Literal(1, F32), Literal(1.0, F32), Literal(True, F32)))
    assert len(g.nodes) == 1 and len(set(g.outputs)) == 1
    g.verify()


@pytest.mark.parametrize("values", [(0.0, -0.0), (_nan(0x7FC00001), _nan(0x7FC00002))], ids=["zeros", "nans"])
def test_cse_keeps_literals_with_different_bits(values):
    g = cse(_add_graph(*(Literal(v, F32) for v in values)))
    assert len(g.nodes) == 2
    g.verify()


def test_cse_keeps_literals_of_different_dtypes():
    x = Var(ShapedArray((), F32))
    lits = [Literal(1, I32), Literal(1.0, F32), Literal(True, np.bool_)]
    nodes = [Node(P.convert_element_type_p, [lit], Params(new_dtype=F32), [Var(x.aval)]) for lit in lits]
    g = cse(Graph([x], nodes, [n.outputs[0] for n in nodes]))
    assert [n.inputs[0].aval.dtype for n in g.nodes] == [I32, F32, np.dtype(bool)]
    g.verify()


def test_simplify_compares_literals_by_key_and_treats_both_zeros_as_additive_units():
    """As XLA under jax.jit: x + 0.0, x + -0.0 and x - 0.0 are x (so -0.0 stays -0.0); x * -0.0 is
    not x * 0.0."""
    f = ember.jit(lambda x: (x + 0.0, x + -0.0, x - 0.0, 1 / (x * -0.0), 1 / (x * 0.0)))
    with np.errstate(divide="ignore"):
        outs = f(np.array(-0.0, F32))
    assert all(np.signbit(o) for o in outs[:3])
    assert outs[3] == np.inf and outs[4] == -np.inf
    assert [n.prim.name for n in f.lower(np.array(-0.0, F32)).optimized.all_nodes()].count("mul") == 2
