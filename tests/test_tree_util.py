"""`ember.tree_util` and `ember.tree`'s short names are JAX's `jax.tree_util` and `jax.tree`: the same
results on the same trees, registered classes included."""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np
import pytest

import ember
from ember import tree_util

jax = pytest.importorskip("jax")


class Point(NamedTuple):
    x: float
    y: float


TREES = [{"w": (1, 2.5), "b": [3, None]}, [Point(1.0, 2.0), (4,)], (), {"a": {"b": {"c": 7}}}]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_the_tree_util_names_match_jax(tree):
    assert tree_util.tree_leaves(tree) == jax.tree_util.tree_leaves(tree)
    assert tree_util.tree_map(lambda v: v * 2, tree) == jax.tree_util.tree_map(lambda v: v * 2, tree)
    assert ember.tree.map(operator.add, tree, tree) == jax.tree.map(operator.add, tree, tree)
    assert tree_util.tree_reduce(operator.add, tree, 0) == jax.tree_util.tree_reduce(operator.add, tree, 0)
    assert ember.tree.all(tree) == jax.tree.all(tree)
    leaves, td = ember.tree.flatten(tree)
    assert ember.tree.unflatten(td, leaves) == tree and ember.tree.structure(tree) == td
    assert tree_util.tree_structure(tree).num_leaves == jax.tree_util.tree_structure(tree).num_leaves


def test_is_leaf_reduce_without_initializer_and_all():
    tree = {"a": (1, 2), "b": (3, 4)}
    is_pair = lambda v: isinstance(v, tuple)  # noqa: E731
    assert ember.tree.leaves(tree, is_leaf=is_pair) == jax.tree.leaves(tree, is_leaf=is_pair)
    assert ember.tree.reduce(operator.mul, [2, 3, 4]) == 24
    assert not ember.tree.all({"x": [1, 0]}) and ember.tree.all([])
    with pytest.raises(TypeError):
        ember.tree.reduce(operator.add, [])  # as functools.reduce (and JAX) without an initializer


def test_register_pytree_node_class_and_transforms_see_it():
    @tree_util.register_pytree_node_class
    class Scaled:
        def __init__(self, value, scale):
            self.value, self.scale = value, scale

        def tree_flatten(self):
            return (self.value,), self.scale

        @classmethod
        def tree_unflatten(cls, scale, children):
            return cls(children[0], scale)

    s = Scaled(np.array([1.0, 2.0]), 3.0)
    doubled = tree_util.tree_map(lambda v: v * 2, s)
    assert isinstance(doubled, Scaled) and doubled.scale == 3.0
    np.testing.assert_array_equal(doubled.value, [2.0, 4.0])
    g = ember.grad(lambda p: ember.numpy.sum(p.value ** 2) * p.scale)(s)
    assert isinstance(g, Scaled)
    np.testing.assert_allclose(g.value, [6.0, 12.0])


def test_tree_util_is_no_longer_a_missing_name():
    assert ember.tree_util is tree_util and hasattr(ember, "tree_util")
