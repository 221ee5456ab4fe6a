"""Shape manipulation against NumPy: reshape, ravel, transpose, moveaxis, swapaxes, expand_dims,
squeeze, broadcast_to, broadcast_arrays, concatenate, stack, hstack, vstack, atleast_1d/2d, flip,
split, shape/ndim/size; eager, under jit, gradients, vmap and shape errors.

Deliberate difference from NumPy: broadcast_arrays and split return lists (NumPy 2: tuple for
broadcast_arrays), compared element by element here.
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


def _unary(name, spec, *args, ref=None, **kwargs):
    """A case calling name(x, *args, **kwargs) in ember and NumPy."""
    fn, np_fn = getattr(jnp, name), ref or getattr(np, name)
    note = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    return Case(name, lambda x: fn(x, *args, **kwargs), lambda x: np_fn(x, *args, **kwargs), (spec,), note=note)


def _reshape_cases():
    return [
        _unary("reshape", A((2, 3)), (3, 2)),
        _unary("reshape", A((2, 3)), (6,)),
        _unary("reshape", A((2, 3)), 6),
        _unary("reshape", A((2, 3), "i32"), (-1,)),
        _unary("reshape", A((2, 3)), (2, -1)),
        _unary("reshape", A((2, 3, 4), "f64"), (-1, 3, 2)),
        _unary("reshape", A((2, 3)), (1, 2, 1, 3)),
        _unary("reshape", A(()), (1, 1)),
        _unary("reshape", A((1,), "bool"), ()),
        _unary("reshape", A((0, 3)), (3, 0)),
        _unary("reshape", A((0, 3)), (-1,)),
        _unary("reshape", A((4,)), [2, 2]),
        _unary("reshape", A((4,)), (np.int64(2), np.int32(2))),
        _unary("reshape", A((2, 3)), (3, 2), order="C"),
        _unary("ravel", A((2, 3))),
        _unary("ravel", A(())),
        _unary("ravel", A((0, 2), "i32")),
        _unary("ravel", A((2, 1, 3), "f64")),
    ]


def _layout_cases():
    return [
        _unary("transpose", A((2, 3))),
        _unary("transpose", A((2, 3, 4))),
        _unary("transpose", A((2, 3, 4)), (2, 0, 1)),
        _unary("transpose", A((2, 3, 4), "i32"), (-1, 0, 1)),
        _unary("transpose", A((2, 3)), [1, 0]),
        _unary("transpose", A(())),
        _unary("transpose", A((5,))),
        _unary("transpose", A((0, 3))),
        _unary("transpose", A((2, 3)), axes=(0, 1)),
        _unary("moveaxis", A((2, 3, 4)), 0, -1),
        _unary("moveaxis", A((2, 3, 4)), -1, 0),
        _unary("moveaxis", A((2, 3, 4, 5)), (0, 1), (-1, -2)),
        _unary("moveaxis", A((2, 3, 4)), [0, 2], [2, 0]),
        _unary("moveaxis", A((2, 3)), 1, 1),
        _unary("swapaxes", A((2, 3, 4)), 0, 2),
        _unary("swapaxes", A((2, 3, 4), "f64"), -1, 0),
        _unary("swapaxes", A((2, 3)), 1, 1),
        _unary("flip", A((2, 3))),
        _unary("flip", A((2, 3)), 0),
        _unary("flip", A((2, 3, 4), "i32"), -1),
        _unary("flip", A((2, 3, 4)), (0, 2)),
        _unary("flip", A((5,)), axis=0),
        _unary("flip", A(())),
        _unary("flip", A((0, 2))),
    ]


def _dims_cases():
    return [
        _unary("expand_dims", A((2, 3)), 0),
        _unary("expand_dims", A((2, 3)), -1),
        _unary("expand_dims", A((2, 3)), 1),
        _unary("expand_dims", A((2, 3), "i32"), (0, 2)),
        _unary("expand_dims", A((2, 3)), (0, -1)),
        _unary("expand_dims", A(()), 0),
        _unary("expand_dims", A((0,)), (-1, 0)),
        _unary("squeeze", A((1, 3, 1))),
        _unary("squeeze", A((1, 3, 1)), 0),
        _unary("squeeze", A((1, 3, 1)), -1),
        _unary("squeeze", A((1, 3, 1), "f64"), (0, 2)),
        _unary("squeeze", A((1,))),
        _unary("squeeze", A((2, 3))),
        _unary("squeeze", A(())),
        _unary("squeeze", A((1, 0, 1)), axis=2),
        _unary("atleast_1d", A(())),
        _unary("atleast_1d", A((3,))),
        _unary("atleast_1d", A((2, 3), "i32")),
        _unary("atleast_2d", A(())),
        _unary("atleast_2d", A((3,))),
        _unary("atleast_2d", A((2, 3))),
        _unary("atleast_2d", A((2, 3, 4), "bool")),
        _unary("broadcast_to", A((3,)), (2, 3)),
        _unary("broadcast_to", A(()), (2, 2)),
        _unary("broadcast_to", A((2, 1)), (2, 4)),
        _unary("broadcast_to", A((2, 1), "i32"), (3, 2, 5)),
        _unary("broadcast_to", A((1,)), (0,)),
        _unary("broadcast_to", A((3,)), 3),
        _unary("broadcast_to", A((1, 3)), [4, 3]),
        _unary("broadcast_to", A(()), ()),
    ]


def _shape_query_cases():
    def fn(x):
        return jnp.zeros(jnp.shape(x)) + jnp.ndim(x) + jnp.size(x) + jnp.size(x, 0) + x

    def ref(x):
        return np.zeros(np.shape(x), np.float32) + np.ndim(x) + np.size(x) + np.size(x, 0) + x

    cases = [Case("shape", fn, ref, (A((2, 3)),)), Case("ndim", fn, ref, (A((4, 1, 2)),)),
             Case("size", fn, ref, (A((0, 3)),)),
             Case("size", lambda x: jnp.size(x, -1) * x, lambda x: np.size(x, -1) * x, (A((2, 5)),)),
             Case("shape", lambda x: jnp.add(x, len(jnp.shape(x))), lambda x: np.add(x, len(np.shape(x))), (A(()),)),
             Case("ndim", lambda x: jnp.add(x, jnp.ndim(x)), lambda x: np.add(x, np.ndim(x)), (A(()),)),
             Case("size", lambda x: jnp.add(x, jnp.size(x)), lambda x: np.add(x, np.size(x)), (A(()),))]
    return cases


def _join_cases():
    c, s = jnp.concatenate, jnp.stack
    return [
        Case("concatenate", lambda a, b: c([a, b]), lambda a, b: np.concatenate([a, b]), (A((2, 3)), A((4, 3)))),
        Case("concatenate", lambda a, b: c((a, b), axis=1), lambda a, b: np.concatenate((a, b), axis=1),
             (A((2, 3)), A((2, 1)))),
        Case("concatenate", lambda a, b: c([a, b], -1), lambda a, b: np.concatenate([a, b], -1),
             (A((2, 2, 3)), A((2, 2, 1), "f64"))),
        Case("concatenate", lambda a, b: c([a, b], axis=None), lambda a, b: np.concatenate([a, b], axis=None),
             (A((2, 3)), A((4,)))),
        Case("concatenate", lambda a, b, d: c([a, b, d]), lambda a, b, d: np.concatenate([a, b, d]),
             (A((1,)), A((0,)), A((3,)))),
        Case("concatenate", lambda a, b: c([a, b]), lambda a, b: np.concatenate([a, b]),
             (A((2,), "i32"), A((3,), "bool")), note="int and bool"),
        Case("concatenate", lambda a, b: c([a, b]), lambda a, b: np.concatenate([a, b]), (A((2,), "i32"), A((3,))),
             note="int and float"),
        Case("concatenate", lambda a: c([a]), lambda a: np.concatenate([a]), (A((2, 3)),), note="one"),
        Case("stack", lambda a, b: s([a, b]), lambda a, b: np.stack([a, b]), (A((2, 3)), A((2, 3)))),
        Case("stack", lambda a, b: s([a, b], axis=1), lambda a, b: np.stack([a, b], axis=1), (A((2, 3)), A((2, 3)))),
        Case("stack", lambda a, b, d: s((a, b, d), -1), lambda a, b, d: np.stack((a, b, d), -1),
             (A((2,)), A((2,), "f64"), A((2,)))),
        Case("stack", lambda a, b: s([a, b]), lambda a, b: np.stack([a, b]), (A(()), A(())), note="0-d"),
        Case("stack", lambda a: s([a]), lambda a: np.stack([a]), (A((0, 2), "i32"),)),
        Case("hstack", lambda a, b: jnp.hstack([a, b]), lambda a, b: np.hstack([a, b]), (A((2,)), A((3,)))),
        Case("hstack", lambda a, b: jnp.hstack([a, b]), lambda a, b: np.hstack([a, b]), (A((2, 1)), A((2, 3)))),
        Case("hstack", lambda a, b: jnp.hstack((a, b)), lambda a, b: np.hstack((a, b)), (A(()), A(())), note="0-d"),
        Case("vstack", lambda a, b: jnp.vstack([a, b]), lambda a, b: np.vstack([a, b]), (A((3,)), A((3,)))),
        Case("vstack", lambda a, b: jnp.vstack([a, b]), lambda a, b: np.vstack([a, b]), (A((1, 3)), A((2, 3), "f64"))),
        Case("vstack", lambda a, b: jnp.vstack([a, b]), lambda a, b: np.vstack([a, b]), (A(()), A(())), note="0-d"),
        Case("vstack", lambda a, b: jnp.vstack([a, b]), lambda a, b: np.vstack([a, b]), (A((2, 1, 2)), A((1, 1, 2)))),
        Case("broadcast_arrays", jnp.broadcast_arrays, np.broadcast_arrays, (A((2, 3)), A((3,)))),
        Case("broadcast_arrays", jnp.broadcast_arrays, np.broadcast_arrays, (A((2, 1)), A((1, 4), "i32"), A(()))),
        Case("broadcast_arrays", jnp.broadcast_arrays, np.broadcast_arrays, (A((3,)),)),
    ]


def _split_cases():
    return [
        _unary("split", A((6,)), 3),
        _unary("split", A((6, 2)), [1, 4]),
        _unary("split", A((2, 6), "i32"), 2, axis=1),
        _unary("split", A((2, 6)), [2], axis=-1),
        _unary("split", A((6,)), [-2]),
        _unary("split", A((5,)), [3, 1]),
        _unary("split", A((5,)), [2, 9]),
        _unary("split", A((4, 3)), []),
        _unary("split", A((0, 3)), 1),
        _unary("split", A((5,)), np.array([1, 3])),
    ]


CASES = _reshape_cases() + _layout_cases() + _dims_cases() + _shape_query_cases() + _join_cases() + _split_cases()
COVERED = covered(CASES)


test_values_match_numpy, test_grads_match_finite_differences, test_vmap_matches_loop = \
    case_tests(CASES)


def test_shape_queries_are_python_ints_inside_a_trace():
    seen = []

    def f(x):
        seen.append((jnp.shape(x), jnp.ndim(x), jnp.size(x), jnp.size(x, 1)))
        return x

    ember.jit(f)(np.ones((2, 3, 4)))
    assert seen == [((2, 3, 4), 3, 24, 3)]
    assert all(type(v) is int for v in seen[0][1:]) and all(type(d) is int for d in seen[0][0])
    assert jnp.shape([[1, 2, 3]]) == (1, 3) and jnp.ndim(2.0) == 0 and jnp.size([1, 2]) == 2


# --- errors -------------------------------------------------------------------------------------------

def _raises_shape_error(fn, *args, words=()):
    raises_shape_error(fn, *args, words=words, file="test_shape.py")


def test_reshape_to_a_wrong_size():
    x = np.ones((2, 3), np.float32)
    _raises_shape_error(lambda v: jnp.reshape(v, (4,)), x, words=("reshape", "(2, 3)", "(4,)"))
    _raises_shape_error(lambda v: jnp.reshape(v, (4, -1)), x, words=("reshape", "(2, 3)", "(4, -1)"))
    _raises_shape_error(lambda v: jnp.reshape(v, (-1, -1)), x, words=("reshape", "one unknown"))
    _raises_shape_error(lambda v: jnp.reshape(v, (-2, -3)), x, words=("reshape",))


def test_concatenate_of_mismatched_shapes():
    _raises_shape_error(lambda a, b: jnp.concatenate([a, b]), np.ones((2, 3)), np.ones((2, 4)),
                        words=("concatenate", "(2, 3)", "(2, 4)"))
    _raises_shape_error(lambda a, b: jnp.concatenate([a, b], axis=1), np.ones((2, 3)), np.ones(3),
                        words=("concatenate", "(2, 3)", "(3,)"))
    _raises_shape_error(lambda a, b: jnp.concatenate([a, b]), np.ones(()), np.ones(()), words=("concatenate",))
    _raises_shape_error(lambda a, b: jnp.concatenate([a, b], axis=2), np.ones((2, 3)), np.ones((2, 3)),
                        words=("concatenate", "axis 2"))
    with pytest.raises(ValueError, match="concatenate"):
        jnp.concatenate([])


def test_other_shape_errors():
    x = np.ones((2, 3))
    _raises_shape_error(lambda a, b: jnp.stack([a, b]), x, np.ones((3, 2)), words=("stack", "(2, 3)", "(3, 2)"))
    _raises_shape_error(lambda v: jnp.broadcast_to(v, (3, 3)), x, words=("broadcast_to", "(2, 3)", "(3, 3)"))
    _raises_shape_error(lambda v: jnp.broadcast_to(v, (3,)), x, words=("broadcast_to", "(2, 3)", "(3,)"))
    _raises_shape_error(lambda a, b: jnp.broadcast_arrays(a, b), x, np.ones(4), words=("(2, 3)", "(4,)"))
    _raises_shape_error(lambda v: jnp.squeeze(v, 0), x, words=("squeeze", "(2, 3)"))
    _raises_shape_error(lambda v: jnp.split(v, 4, axis=1), x, words=("split", "3", "4"))
    _raises_shape_error(lambda v: jnp.transpose(v, (0,)), x, words=("transpose", "(0,)"))
    _raises_shape_error(lambda v: jnp.transpose(v, (0, 0)), x, words=("transpose", "repeated"))
    _raises_shape_error(lambda v: jnp.expand_dims(v, 3), x, words=("expand_dims", "axis 3"))
    _raises_shape_error(lambda v: jnp.moveaxis(v, (0, 1), 0), x, words=("moveaxis",))
    _raises_shape_error(lambda v: jnp.moveaxis(v, (0, 0), (0, 1)), x, words=("moveaxis", "repeated", "(2, 3)"))
    _raises_shape_error(lambda v: jnp.swapaxes(v, 0, 2), x, words=("swapaxes", "axis 2"))
    _raises_shape_error(lambda v: jnp.flip(v, 2), x, words=("flip", "axis 2"))


def test_reshape_rejects_fortran_order():
    with pytest.raises(NotImplementedError, match="order"):
        jnp.reshape(np.ones(4), (2, 2), order="F")


def test_split_of_a_traced_value_returns_traced_pieces():
    def f(x):
        a, b = jnp.split(x, [1])
        return b - a

    np.testing.assert_allclose(ember.jit(f)(np.array([1.0, 3.0])), [2.0])
