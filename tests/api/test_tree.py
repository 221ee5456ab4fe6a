"""Pytrees (ember.tree) on their own, and the same structures through jit, grad and vmap."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.tree import (
    DictKey,
    FlattenedIndexKey,
    broadcast_prefix,
    keystr,
    register_pytree_node,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
)
from tests.helpers import assert_tree_allclose, numerical_grad


class Layer(NamedTuple):
    w: object
    b: object


@dataclasses.dataclass
class Dense:
    w: object
    b: object
    activation: str = dataclasses.field(default="tanh", metadata={"static": True})


class Pair:
    """A user class registered as a pytree node."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def __eq__(self, other):
        return isinstance(other, Pair) and (self.first, self.second) == (other.first, other.second)


register_pytree_node(Pair, lambda p: ((p.first, p.second), "pair-aux"), lambda aux, ch: Pair(*ch))


STRUCTURES = {
    "leaf": 1,
    "tuple": (1, 2, 3),
    "list": [1, [2, 3]],
    "dict": {"b": 2, "a": 1, "c": 3},
    "none": None,
    "none_inside": (1, None, [None, 2]),
    "empty": ((), [], {}),
    "namedtuple": Layer(1, 2),
    "dataclass": Dense(1, 2, "relu"),
    "ordereddict": OrderedDict([("z", 1), ("a", 2)]),
    "registered": Pair(1, (2, 3)),
    "nested": {"layers": [Layer(4, 5), Layer(6, 7)], "extra": (Dense(1, 2), OrderedDict(k=3)), "n": None},
}


@pytest.mark.parametrize("name", list(STRUCTURES))
def test_flatten_unflatten_roundtrip(name):
    tree = STRUCTURES[name]
    leaves, td = tree_flatten(tree)
    assert leaves == sorted(leaves)  # every structure above numbers its leaves in flatten order
    assert td.num_leaves == len(leaves)
    rebuilt = tree_unflatten(td, leaves)
    assert type(rebuilt) is type(tree)
    assert rebuilt == tree
    assert tree_structure(rebuilt) == td and hash(tree_structure(rebuilt)) == hash(td)


def test_dict_keys_are_sorted():
    leaves, td = tree_flatten({"b": 1, "a": 2, "c": 3})
    assert leaves == [2, 1, 3]
    assert tree_structure({"c": 0, "a": 0, "b": 0}) == td  # insertion order does not matter
    assert list(tree_unflatten(td, [10, 20, 30])) == ["a", "b", "c"]


def test_ordereddict_keeps_insertion_order():
    leaves, td = tree_flatten(OrderedDict([("z", 1), ("a", 2)]))
    assert leaves == [1, 2]
    out = tree_unflatten(td, ["Z", "A"])
    assert isinstance(out, OrderedDict) and list(out.items()) == [("z", "Z"), ("a", "A")]
    assert td != tree_structure({"z": 1, "a": 2})


def test_none_is_an_empty_node_not_a_leaf():
    leaves, td = tree_flatten([None, 1])
    assert leaves == [1]
    assert tree_unflatten(td, [5]) == [None, 5]


def test_dataclass_static_fields_are_in_the_treedef():
    leaves, td = tree_flatten(Dense(1, 2, "relu"))
    assert leaves == [1, 2]
    assert td != tree_structure(Dense(1, 2, "tanh"))
    rebuilt = tree_unflatten(td, [10, 20])
    assert rebuilt == Dense(10, 20, "relu")


def test_tuple_and_list_are_different_structures():
    assert tree_structure((1, 2)) != tree_structure([1, 2])
    assert tree_structure((1, 2)) != tree_structure((1, (2,)))
    assert tree_structure(Layer(1, 2)) != tree_structure((1, 2))


def test_unflatten_wrong_leaf_count():
    td = tree_structure((1, 2))
    with pytest.raises(ValueError, match="2 leaves, but 1"):
        tree_unflatten(td, [1])
    with pytest.raises(ValueError, match="2 leaves, but 3"):
        tree_unflatten(td, [1, 2, 3])


def test_tree_map_several_trees():
    a = {"w": [1, 2], "b": Layer(3, 4)}
    b = {"w": [10, 20], "b": Layer(30, 40)}
    c = {"w": [100, 200], "b": Layer(300, 400)}
    out = tree_map(lambda x, y, z: x + y + z, a, b, c)
    assert out == {"w": [111, 222], "b": Layer(333, 444)}
    assert tree_map(lambda x: x * 2, Pair(1, [2])) == Pair(2, [4])


@pytest.mark.parametrize("other", [[1, 2], (1, 2, 3), {"a": 1}, (1, {"a": 2})])
def test_tree_map_structure_mismatch(other):
    with pytest.raises(ValueError, match="structures differ"):
        tree_map(lambda x, y: x + y, (1, {"b": 2}), other)


def test_tree_map_takes_deeper_trees_whole_at_the_first_trees_leaves():
    """As JAX: the other trees have the first one's structure down to its leaves, not below."""
    assert tree_map(lambda x, y: (x, y), (1, 2), (1, [2, 3])) == ((1, 1), (2, [2, 3]))


def test_tree_flatten_with_path():
    tree = {"params": [Layer(1, 2), (3,)], "d": Dense(4, 5), "o": OrderedDict(k=6), "n": None}
    paths = [keystr(p) for p, _ in tree_flatten_with_path(tree)[0]]
    assert paths == ["['d'].w", "['d'].b", "['o']['k']", "['params'][0].w", "['params'][0].b", "['params'][1][0]"]
    leaves = [x for _, x in tree_flatten_with_path(tree)[0]]
    assert leaves == tree_leaves(tree)


def test_tree_flatten_with_path_registered_node():
    paths = [p for p, _ in tree_flatten_with_path(Pair(1, {"a": 2}))[0]]
    assert paths == [(FlattenedIndexKey(0),), (FlattenedIndexKey(1), DictKey("a"))]  # as JAX keys them


def test_broadcast_prefix():
    tree = ({"a": 1, "b": 2}, [3, 4, 5], 6)
    assert broadcast_prefix((0, None, 1), tree) == [0, 0, None, None, None, 1]
    assert broadcast_prefix(({"a": 1, "b": None}, 0, 2), tree) == [1, None, 0, 0, 0, 2]
    assert broadcast_prefix(7, tree) == [7] * 6
    assert broadcast_prefix(None, tree) == [None] * 6


def test_broadcast_prefix_mismatch_names_the_place():
    with pytest.raises(ValueError, match=r"at \[1\] is a dict"):
        broadcast_prefix((0, {"a": 0}), (1, 2))
    with pytest.raises(ValueError, match=r"at \[0\] has 1 entries.*keys \['z'\]"):
        broadcast_prefix(({"z": 0},), ({"a": 1},))
    with pytest.raises(ValueError, match="the top level has 2 entries"):
        broadcast_prefix((0, 0), (1, 2, 3))


# --- through the transforms ---------------------------------------------------------------------

def _model(params, x, xp=jnp):
    """The model over pytree params, with ember.numpy (xp=jnp) or as its NumPy reference (xp=np)."""
    h = xp.tanh(x @ params["layers"][0].w + params["layers"][0].b)
    out = h @ params["layers"][1].w + params["layers"][1].b
    d = params["head"]
    out = xp.tanh(out * d.w + d.b) if d.activation == "tanh" else out * d.w + d.b
    return xp.sum(out * params["scale"]["s"])


def _params(rng):
    return {
        "layers": [Layer(rng.standard_normal((3, 4)), rng.standard_normal(4)),
                   Layer(rng.standard_normal((4, 2)), rng.standard_normal(2))],
        "head": Dense(rng.standard_normal(2), rng.standard_normal(2), "tanh"),
        "scale": OrderedDict(s=np.float64(0.7)),
        "unused": None,
    }


def test_pytrees_through_jit(rng):
    params, x = _params(rng), rng.standard_normal(3)
    f = ember.jit(_model)
    np.testing.assert_allclose(f(params, x), _reference(params, x), rtol=1e-12)
    f(_params(np.random.default_rng(5)), x)
    assert f.cache_info().misses == 1
    params2 = dict(params, head=dataclasses.replace(params["head"], activation="none"))
    np.testing.assert_allclose(f(params2, x), _reference(params2, x), rtol=1e-12)
    assert f.cache_info().misses == 2  # the static field is part of the signature


def test_pytree_outputs_through_jit():
    f = ember.jit(lambda x: {"pair": Pair(x, [x * 2]), "nt": Layer(x + 1, None), "od": OrderedDict(b=x, a=x)})
    out = f(np.ones(2))
    assert isinstance(out["pair"], Pair) and isinstance(out["nt"], Layer) and out["nt"].b is None
    np.testing.assert_allclose(out["pair"].second[0], [2.0, 2.0])
    assert list(out["od"]) == ["b", "a"]


def _reference(params, x):
    return _model(params, x, xp=np)


def test_pytree_gradients_have_the_arguments_structure(rng):
    params, x = _params(rng), rng.standard_normal(3)
    g = ember.grad(_model)(params, x)
    assert tree_structure(g) == tree_structure(params)
    assert isinstance(g["layers"][0], Layer) and isinstance(g["head"], Dense)
    assert g["head"].activation == "tanh" and g["unused"] is None
    assert isinstance(g["scale"], OrderedDict)
    assert_tree_allclose(g, numerical_grad(_reference, (params, x)), rtol=1e-6, atol=1e-8)


def test_registered_node_gradient():
    def f(p):
        return jnp.sum(p.first * p.second["k"] ** 2)

    p = Pair(np.array([1.0, 2.0]), {"k": np.array([3.0, 4.0])})
    g = ember.grad(f)(p)
    assert isinstance(g, Pair)
    np.testing.assert_allclose(g.first, [9.0, 16.0])
    np.testing.assert_allclose(g.second["k"], [6.0, 16.0])


def test_pytrees_through_vmap(rng):
    batch = {"a": rng.standard_normal((5, 3)), "pair": Pair(rng.standard_normal((3, 5)), 2.0)}
    w = Layer(rng.standard_normal(3), np.float64(0.5))

    def f(d, w):
        return {"s": jnp.sum(d["a"] * d["pair"].first * w.w) * d["pair"].second + w.b, "v": d["a"]}

    out = ember.vmap(f, in_axes=({"a": 0, "pair": Pair(1, None)}, None))(batch, w)
    assert set(out) == {"s", "v"}
    for i in range(5):
        ref = np.sum(batch["a"][i] * batch["pair"].first[:, i] * w.w) * 2.0 + 0.5
        np.testing.assert_allclose(out["s"][i], ref)
    np.testing.assert_allclose(out["v"], batch["a"])
