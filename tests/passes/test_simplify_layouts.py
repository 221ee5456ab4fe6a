"""simplify's contraction layout rules: transposes and broadcasts around a dot_general are absorbed into
its dimension numbers (or operand order) where that keeps the output's layout, and kept where it would
not; each rewritten graph computes what the traced one does (the numpy oracle, optimize=False)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.passes.dce import dce
from ember.passes.simplify import simplify
from ember.tracer import ShapedArray, trace_flat
from ember.tracer import prims as P


def _graph(fn, *shapes, dtype=np.float64):
    return trace_flat(lambda *a: [fn(*a)], [ShapedArray(s, dtype) for s in shapes])


def _simplified(fn, *shapes):
    return dce(simplify(_graph(fn, *shapes).verify())).verify()


def _prims(g):
    return [n.prim.name for n in g.nodes]


def _dn(g):
    return next(n.params["dimension_numbers"] for n in g.nodes if n.prim.name == "dot_general")


def _same_values(fn, *shapes, seed=0):
    """The simplified graph's values equal the traced graph's, both run on the numpy backend."""
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(s) for s in shapes]
    want = ember.jit(fn, backend="numpy", optimize=False)(*args)
    got = ember.jit(fn, backend="numpy")(*args)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_transposed_weight_becomes_the_dot_dimension_numbers():
    g = _simplified(lambda x, w: x @ w.T, (5, 3), (4, 3))
    assert _prims(g) == ["dot_general"]
    assert _dn(g) == (((1,), (1,)), ((), ()))
    assert g.nodes[0].inputs == tuple(g.inputs)
    _same_values(lambda x, w: x @ w.T, (5, 3), (4, 3))


def test_transposed_lhs_becomes_the_dot_dimension_numbers():
    g = _simplified(lambda w, x: w.T @ x, (3, 4), (3, 5))
    assert _prims(g) == ["dot_general"]
    assert _dn(g) == (((0,), (0,)), ((), ()))
    _same_values(lambda w, x: w.T @ x, (3, 4), (3, 5))


def test_transpose_that_reorders_free_axes_stays():
    """Absorbing it would change the order of the output's axes: the transpose stays for fusion."""
    def f(a, b):
        return P.dot_general(P.transpose(a, (1, 0, 2)), b, (((2,), (0,)), ((), ())))

    g = _simplified(f, (3, 4, 5), (5, 2))
    assert _prims(g) == ["transpose", "dot_general"]
    _same_values(f, (3, 4, 5), (5, 2))


def test_batch_axis_moved_to_the_front_is_read_where_it_is():
    def f(a, b):  # batch axis 1 of a moved first, as vmap does
        return P.dot_general(P.transpose(a, (1, 0, 2)), b, (((2,), (1,)), ((0,), (0,))))

    g = _simplified(f, (3, 6, 5), (6, 5, 2))
    assert _prims(g) == ["dot_general"]
    assert _dn(g) == (((2,), (1,)), ((1,), (0,)))
    _same_values(f, (3, 6, 5), (6, 5, 2))


def test_transpose_that_leaves_no_unit_stride_axis_stays():
    """With the batch axis innermost, neither the free nor the contracting axis has unit stride: the
    product could not read the operand in place, so the transpose stays (fusion may fold it away)."""
    def f(a, b):
        return P.dot_general(P.transpose(a, (2, 0, 1)), b, (((2,), (1,)), ((0,), (0,))))

    g = _simplified(f, (4, 5, 6), (6, 5, 2))
    assert _prims(g) == ["transpose", "dot_general"]
    _same_values(f, (4, 5, 6), (6, 5, 2))


def test_transposed_result_swaps_the_operands():
    g = _simplified(lambda a, b: (a @ b).T, (5, 3), (3, 4))
    assert _prims(g) == ["dot_general"]
    assert g.nodes[0].inputs == (g.inputs[1], g.inputs[0])
    assert _dn(g) == (((0,), (1,)), ((), ()))
    _same_values(lambda a, b: (a @ b).T, (5, 3), (3, 4))


def test_transposed_result_reorders_the_batch_pairs():
    def f(a, b):
        d = P.dot_general(a, b, (((3,), (3,)), ((0, 1), (0, 1))))  # (2, 3, 4, 5)
        return P.transpose(d, (1, 0, 2, 3))

    g = _simplified(f, (2, 3, 4, 6), (2, 3, 5, 6))
    assert _prims(g) == ["dot_general"]
    assert _dn(g) == (((3,), (3,)), ((1, 0), (1, 0)))
    _same_values(f, (2, 3, 4, 6), (2, 3, 5, 6))


def test_transposed_result_of_a_shared_dot_stays():
    """The dot has another reader: a second, swapped dot would compute the product twice."""
    def f(a, b):
        d = a @ b
        return jnp.tanh(d.T) @ d

    g = _simplified(f, (5, 3), (3, 4))
    assert _prims(g) == ["dot_general", "transpose", "tanh", "dot_general"]
    _same_values(f, (5, 3), (3, 4))


def test_transpose_read_by_many_products_is_shared():
    def f(x, w):
        y = x
        for _ in range(3):
            y = y @ w.T
        return y

    g = simplify(_graph(f, (2, 4), (4, 4)).verify())
    assert _prims(g).count("transpose") == 3  # kept (cse merges them into one copy)
    g2 = _simplified(lambda x, w: (x @ w.T) @ w.T, (2, 4), (4, 4))
    assert "transpose" not in _prims(g2)


def test_outer_product_becomes_a_multiply_of_broadcasts():
    def f(a, b):  # per-sample outer products, transposed: what vmap(grad) of x @ w.T gives
        d = P.dot_general(a, b, (((), ()), ((0,), (0,))))  # (7, 3, 4)
        return P.transpose(d, (0, 2, 1))

    g = _simplified(f, (7, 3), (7, 4))
    assert "dot_general" not in _prims(g) and "mul" in _prims(g)
    _same_values(f, (7, 3), (7, 4))


@pytest.mark.parametrize("dn", [(((), ()), ((1,), (0,))), (((), ()), ((), ()))])
def test_outer_product_with_batch_axes_out_of_order(dn):
    def f(a, b):
        return P.dot_general(a, b, dn)

    g = _simplified(f, (3, 4), (4, 2))
    assert "dot_general" not in _prims(g)
    _same_values(f, (3, 4), (4, 2))


def test_operand_broadcast_along_free_axes_is_read_narrow():
    def f(v, w):
        return P.broadcast_in_dim(v, (6, 3), (1,)) @ w  # six equal rows

    g = _simplified(f, (3,), (3, 4))
    dot = next(n for n in g.nodes if n.prim.name == "dot_general")
    assert dot.outputs[0].aval.shape == (4,) and dot.inputs[0] is g.inputs[0]
    assert g.nodes[-1].prim.name == "broadcast_in_dim"
    _same_values(f, (3,), (3, 4))


def test_operand_broadcast_along_contracting_axes_stays():
    def f(w):
        return P.full((6, 3), 1.0, np.float64) @ w

    g = _simplified(f, (3, 4))
    dot = next(n for n in g.nodes if n.prim.name == "dot_general")
    assert dot.outputs[0].aval.shape == (4,)  # the six rows dropped; k stays
    assert dot.inputs[0].aval.shape == (3,)
    _same_values(f, (3, 4))
