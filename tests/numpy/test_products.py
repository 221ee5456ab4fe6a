"""Products against NumPy: matmul (batch broadcasting, 1-D operands), dot, inner, outer, vdot,
tensordot and einsum (every one- and two-operand form); eager, under jit, gradients, vmap and
shape errors that name the function, the shapes and the user's line.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.numpy.cases import (
    A,
    Case,
    case_tests,
    covered,
    raises_shape_error,
)

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                 ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((1, 2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)),
                 ((3,), (5, 3, 4)), ((5, 2, 3), (3,)), ((0, 3), (3, 2)), ((2, 0), (0, 3)), ((2, 1, 2, 3), (1, 3, 3, 2))]
DOT_SHAPES = [((), (3,)), ((2, 3), ()), ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
              ((2, 2, 3), (3,)), ((2, 2, 3), (4, 3, 2)), ((3,), (2, 3, 4)), ((0,), (0,))]
INNER_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (4, 3)), ((2, 2, 3), (4, 3)), ((), (2, 3)), ((3,), ())]
OUTER_SHAPES = [((3,), (4,)), ((2, 2), (3,)), ((), (3,)), ((0,), (2,))]


def _pairs(name, shapes, ref=None):
    fn, ref = getattr(jnp, name), ref or getattr(np, name)
    cases = [Case(name, fn, ref, (A(s1), A(s2))) for s1, s2 in shapes]
    s1, s2 = shapes[-3] if len(shapes) > 3 else shapes[0]
    cases += [
        Case(name, fn, ref, (A(s1, "f64"), A(s2, "f64"))),
        Case(name, fn, ref, (A(s1, "f32"), A(s2, "f64")), note="mixed"),
        Case(name, fn, ref, (A(s1, "i32"), A(s2, "i32"))),
        Case(name, fn, ref, (A(s1, "i8"), A(s2, "i32")), note="int8 int32"),
        Case(name, fn, ref, (A(s1, "bool"), A(s2, "bool"))),
        Case(name, fn, ref, (A(s1, "i32"), A(s2, "f32")), note="int float"),
    ]
    return cases


def _matmul_cases():
    return _pairs("matmul", MATMUL_SHAPES)


def _tensordot_cases():
    t = jnp.tensordot
    cases = []
    for (s1, s2), axes in ((((2, 3, 4), (3, 4, 5)), 2), (((2, 3), (3, 4)), 1), (((2, 3), (4,)), 0),
                           (((2, 3, 4), (3, 2, 5)), ([1, 0], [0, 1])), (((2, 3), (4, 3)), (1, 1)),
                           (((2, 3, 4), (4, 2)), ([2], [0])), (((2, 3, 4), (4, 3, 2)), ((0, 1, 2), (2, 1, 0))),
                           (((3,), (3,)), 1), (((2, 3, 4), (4, 2)), ([-1], [-2]))):
        cases.append(Case("tensordot", lambda a, b, ax=axes: t(a, b, ax), lambda a, b, ax=axes: np.tensordot(a, b, ax),
                          (A(s1), A(s2)), note=f"axes={axes}"))
    cases.append(Case("tensordot", t, np.tensordot, (A((2, 3, 4), "i32"), A((3, 4, 2), "i32")), note="default axes"))
    cases.append(Case("tensordot", lambda a, b: t(a, b, axes=([1], [0])),
                      lambda a, b: np.tensordot(a, b, axes=([1], [0])), (A((2, 3), "f64"), A((3, 2), "f32")),
                      note="mixed"))
    return cases


# (spec, operand shapes): every one- and two-operand form einsum supports, and chains of three or more.
EINSUM = [
    ("ii->", [(3, 3)]), ("ii->i", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("ij", [(2, 3)]),
    ("ii", [(3, 3)]), ("ji", [(2, 3)]), ("ijk->kij", [(2, 3, 4)]), ("i->", [(4,)]), ("ij->i", [(2, 3)]),
    ("iij->j", [(2, 2, 3)]), ("iji->j", [(2, 3, 2)]), ("...->...", [(2, 3)]), ("i...->...", [(2, 3, 4)]),
    ("...ii->...i", [(2, 3, 3)]), ("->", [()]), ("i", [(0,)]),
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]), ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(3,), (3,)]), ("ij,jk", [(2, 3), (3, 4)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ij,...jk->...ik", [(3, 4), (2, 4, 5)]), ("...ij,...jk", [(2, 3, 4), (2, 4, 3)]),
    ("ii,ij->j", [(3, 3), (3, 4)]), ("ij,jj->i", [(2, 3), (3, 3)]), ("ii,ii->i", [(3, 3), (3, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]), ("ij,ij->", [(2, 3), (2, 3)]), ("ij,kl->ijkl", [(2, 3), (4, 2)]),
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]), ("i,i->i", [(3,), (3,)]), ("...i,...i", [(2, 3), (3,)]),
    ("i...,i...->...", [(3, 2, 4), (3, 1, 4)]), ("ij,j", [(2, 3), (3,)]), (" ij , jk -> ik ", [(2, 3), (3, 4)]),
    ("ij,jk->ki", [(2, 3), (3, 4)]), ("bi,bi->b", [(4, 3), (4, 3)]), ("ab,cd->", [(2, 3), (4, 1)]),
    ("ij,ji->", [(3, 4), (4, 3)]), ("iij,jk->ik", [(2, 2, 3), (3, 4)]), ("i,->i", [(3,), ()]), (",->", [(), ()]),
    ("bj,bij->bi", [(5, 3), (5, 2, 3)]), ("ij,jk->ik", [(0, 3), (3, 2)]), ("ij,jk->ik", [(2, 0), (0, 3)]),
    ("ba,ab->b", [(3, 2), (2, 3)]), ("Ab,bC->AC", [(2, 3), (3, 4)]), ("i...j,j...k->i...k", [(2, 5, 3), (3, 5, 4)]),
    # three or more operands: contracted pairwise in opt_einsum's order
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]), ("ab,bc,cd", [(2, 3), (3, 4), (4, 5)]), ("i,i,i->", [(3,)] * 3),
    ("ij,jk,kl,lm->im", [(2, 3), (3, 4), (4, 2), (2, 3)]), ("bij,bjk,bkl->bil", [(2, 2, 3), (2, 3, 4), (2, 4, 2)]),
    ("ii,ij,j->i", [(3, 3), (3, 4), (4,)]), ("...ij,jk,...k->...i", [(2, 3, 4), (4, 5), (2, 5)]),
    ("a,b,c->abc", [(2,), (3,), (2,)]), ("ij,ij,ij->ij", [(2, 3)] * 3), ("i,j,ij->", [(3,), (4,), (3, 4)]),
    ("...i,...i,...i->...", [(2, 3), (1, 3), (3,)]), ("ij,jk,ki->", [(2, 3), (3, 4), (4, 2)]),
    ("ab,ab,bc,cd->da", [(2, 3), (2, 3), (3, 4), (4, 2)]),
]


def _einsum_cases():
    cases = []
    for spec, shapes in EINSUM:
        cases.append(Case("einsum", lambda *ops, s=spec: jnp.einsum(s, *ops), lambda *ops, s=spec: np.einsum(s, *ops),
                          tuple(A(sh) for sh in shapes), note=spec))
    for spec, shapes in (("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("i,j->ij", [(2,), (3,)]),
                         ("i,ij,j->", [(2,), (2, 3), (3,)])):
        for dts in (("f64",) * 3, ("i32",) * 3, ("f32", "f64", "f32"), ("i32", "f32", "i32"), ("bool",) * 3):
            cases.append(Case("einsum", lambda *ops, s=spec: jnp.einsum(s, *ops),
                              lambda *ops, s=spec: np.einsum(s, *ops),
                              tuple(A(sh, dt) for sh, dt in zip(shapes, dts)), note=spec))
    return cases


CASES = (_matmul_cases() + _pairs("dot", DOT_SHAPES) + _pairs("inner", INNER_SHAPES) + _pairs("outer", OUTER_SHAPES)
         + _pairs("vdot", [((3,), (3,)), ((2, 3), (3, 2)), ((0,), (0,)), ((4,), (2, 2))]) + _tensordot_cases()
         + _einsum_cases())
COVERED = covered(CASES)


test_values_match_numpy, test_grads_match_finite_differences, test_vmap_matches_loop = \
    case_tests(CASES)


def test_matmul_and_einsum_lower_to_one_dot_general():
    for fn, args in ((jnp.matmul, (np.ones((5, 2, 3)), np.ones((5, 3, 4)))),
                     (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (np.ones((5, 2, 3)), np.ones((5, 3, 4)))),
                     (lambda a, b: jnp.einsum("ii,ij->j", a, b), (np.ones((3, 3)), np.ones((3, 4))))):
        prims = [n.prim.name for n in ember.make_graph(fn)(*args).nodes]
        assert prims.count("dot_general") == 1, prims


def test_matmul_with_unbatched_weights_does_not_broadcast_them():
    graph = ember.make_graph(jnp.matmul)(np.ones((8, 2, 3)), np.ones((3, 4)))
    assert "broadcast_in_dim" not in [n.prim.name for n in graph.nodes]


# --- errors -------------------------------------------------------------------------------------------

def _raises_shape_error(fn, *args, words=()):
    raises_shape_error(fn, *args, words=words, file="test_products.py")


def test_matmul_of_mismatched_shapes():
    _raises_shape_error(jnp.matmul, np.ones((2, 3)), np.ones((4, 5)), words=("matmul", "(2, 3)", "(4, 5)"))
    with pytest.raises(ember.errors.SHAPE_ERRORS, match=r"matmul.*\(2, 3\).*\(4, 5\).*test_products.py"):
        ember.jit(lambda a, b: a @ b)(np.ones((2, 3)), np.ones((4, 5)))
    _raises_shape_error(jnp.matmul, np.ones((2, 2, 3)), np.ones((3, 3, 4)), words=("matmul", "(2,)", "(3,)"))
    _raises_shape_error(jnp.matmul, np.ones(3), np.ones(4), words=("matmul",))
    _raises_shape_error(jnp.matmul, np.ones(()), np.ones(3), words=("matmul", "0-d"))


def test_other_products_of_mismatched_shapes():
    _raises_shape_error(jnp.dot, np.ones((2, 3)), np.ones((4, 5)), words=("dot", "(2, 3)", "(4, 5)"))
    _raises_shape_error(jnp.inner, np.ones((2, 3)), np.ones(4), words=("inner", "(2, 3)", "(4,)"))
    _raises_shape_error(jnp.vdot, np.ones(3), np.ones(4), words=("vdot", "(3,)", "(4,)"))
    _raises_shape_error(lambda a, b: jnp.tensordot(a, b, 1), np.ones((2, 3)), np.ones((4, 5)),
                        words=("tensordot", "(2, 3)", "(4, 5)"))
    _raises_shape_error(lambda a, b: jnp.tensordot(a, b, ([0, 1], [0])), np.ones((2, 3)), np.ones((2, 5)),
                        words=("tensordot",))


@pytest.mark.parametrize("spec, shapes, words", [
    ("ij,jk->ik", [(2, 3), (4, 5)], ("einsum", "'j'", "(2, 3)", "(4, 5)")),
    ("ij,jk->il", [(2, 3), (3, 4)], ("einsum", "'l'")),
    ("ijk,jk", [(2, 3), (3, 4)], ("einsum", "'ijk'", "(2, 3)")),
    ("ij->ii", [(2, 2)], ("einsum", "repeats")),
    ("ij,jk", [(2, 3)], ("einsum", "2 operand")),
    ("ii->i", [(2, 3)], ("einsum", "'i'", "(2, 3)")),
    ("i2,jk", [(2, 3), (3, 4)], ("einsum", "'i2'")),
    ("...ij,...jk", [(2, 2, 3), (3, 3, 4)], ("einsum", "(2, 2, 3)", "(3, 3, 4)")),
])
def test_einsum_with_a_bad_spec(spec, shapes, words):
    _raises_shape_error(lambda *ops: jnp.einsum(spec, *ops), *[np.ones(s) for s in shapes], words=words)


def test_einsum_of_three_operands_contracts_pairwise_in_opt_einsum_order():
    import opt_einsum

    shapes = [(8, 2), (2, 8), (8, 3)]  # cheapest: (1, 2) first, then the product with operand 0
    assert opt_einsum.contract_path("ab,bc,cd->ad", *shapes, shapes=True)[0] == [(1, 2), (0, 1)]
    g = ember.make_graph(lambda a, b, c: jnp.einsum("ab,bc,cd->ad", a, b, c))(*[np.ones(s, np.float32) for s in shapes])
    dots = [n for n in g.nodes if n.prim.name == "dot_general"]
    assert len(dots) == 2 and [v.aval.shape for v in dots[0].outputs] == [(2, 3)]
