"""`ember.tree_util` and `ember.tree`'s short names are JAX's `jax.tree_util` and `jax.tree`: the same
results on the same trees, registered classes included."""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections import OrderedDict, defaultdict
from typing import NamedTuple

import numpy as np
import pytest

import ember
from ember import tree_util

try:
    import jax
except ImportError:  # the comparisons with JAX skip; Ember's own behaviour is still tested
    jax = None
needs_jax = pytest.mark.skipif(jax is None, reason="compares with JAX")


class Point(NamedTuple):
    x: float
    y: float


TREES = [{"w": (1, 2.5), "b": [3, None]}, [Point(1.0, 2.0), (4,)], (), {"a": {"b": {"c": 7}}}]


@needs_jax
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


@needs_jax
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


# --- key paths ----------------------------------------------------------------------------------------

class Pair:
    """A class registered with both libraries, without keys."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def __eq__(self, other):
        return isinstance(other, Pair) and (self.first, self.second) == (other.first, other.second)


class Named:
    """A class registered with keys: its children are named by GetAttrKey."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __eq__(self, other):
        return isinstance(other, Named) and (self.a, self.b) == (other.a, other.b)


def _pair_flatten(p):
    return (p.first, p.second), "aux"


def _named_keys(lib):
    return lambda n: (((lib.GetAttrKey("a"), n.a), (lib.GetAttrKey("b"), n.b)), None)


tree_util.register_pytree_node(Pair, _pair_flatten, lambda _, c: Pair(*c))
tree_util.register_pytree_with_keys(Named, _named_keys(tree_util), lambda _, c: Named(*c))
if jax is not None:
    jax.tree_util.register_pytree_node(Pair, _pair_flatten, lambda _, c: Pair(*c))
    jax.tree_util.register_pytree_with_keys(Named, _named_keys(jax.tree_util), lambda _, c: Named(*c))

PATH_TREES = TREES + [
    OrderedDict([("z", 1), ("a", [2])]), defaultdict(list, {"b": 1, "a": (2, 3)}), [Pair(1, {"k": 2}), None],
    {"n": Named([1, 2], Point(3, 4))}, Point(x=(1,), y={"q": 2}),
]


@needs_jax
@pytest.mark.parametrize("tree", PATH_TREES, ids=range(len(PATH_TREES)))
def test_key_paths_match_jax(tree):
    mine, td = tree_util.tree_flatten_with_path(tree)
    theirs, _ = jax.tree_util.tree_flatten_with_path(tree)
    assert [repr(p) for p, _ in mine] == [repr(p) for p, _ in theirs]
    assert [tree_util.keystr(p) for p, _ in mine] == [jax.tree_util.keystr(p) for p, _ in theirs]
    assert [x for _, x in mine] == [x for _, x in theirs] == tree_util.tree_leaves(tree)
    assert td == tree_util.tree_structure(tree) and td.num_nodes == jax.tree_util.tree_structure(tree).num_nodes
    assert tree_util.tree_leaves_with_path(tree) == mine and ember.tree.leaves_with_path(tree) == mine
    assert td.unflatten(x for _, x in mine) == tree


@needs_jax
def test_key_objects_print_compare_and_freeze_as_jax():
    made = [("SequenceKey", 2), ("DictKey", "w"), ("DictKey", 1), ("GetAttrKey", "b"), ("FlattenedIndexKey", 0)]
    pairs = [(getattr(tree_util, cls)(v), getattr(jax.tree_util, cls)(v)) for cls, v in made]
    for mine, theirs in pairs:
        assert (repr(mine), str(mine)) == (repr(theirs), str(theirs))
        assert mine == type(mine)(*[getattr(mine, f) for f in type(mine).__match_args__]) and hash(mine) == hash(
            type(mine)(*[getattr(mine, f) for f in type(mine).__match_args__]))
        with pytest.raises(AttributeError):
            mine.key = 3
    assert tree_util.SequenceKey(0) != tree_util.FlattenedIndexKey(0)
    path = tuple(m for m, _ in pairs)
    for kw in ({}, {"simple": True}, {"simple": True, "separator": "/"}, {"separator": "."}):
        assert tree_util.keystr(path, **kw) == jax.tree_util.keystr(tuple(t for _, t in pairs), **kw)
    assert tree_util.tree_leaves([tree_util.DictKey("a")]) == [tree_util.DictKey("a")]  # keys are leaves


@needs_jax
def test_map_with_path_and_is_leaf_taking_the_path_match_jax():
    tree = {"w": [1, 2], "b": (3, {"c": 4})}
    for lib, util in ((ember.tree, tree_util), (jax.tree, jax.tree_util)):
        out = lib.map_with_path(lambda p, x, y, util=util: (util.keystr(p), x + y), tree, tree)
        assert out == {"w": [("['w'][0]", 2), ("['w'][1]", 4)], "b": (("['b'][0]", 6), {"c": ("['b'][1]['c']", 8)})}
    stop_at_b = lambda p, x: len(p) == 1 and str(p[0]) == "['b']"  # noqa: E731
    mine = tree_util.tree_leaves_with_path(tree, stop_at_b, is_leaf_takes_path=True)
    theirs = jax.tree_util.tree_leaves_with_path(tree, stop_at_b, is_leaf_takes_path=True)
    assert [(repr(p), x) for p, x in mine] == [(repr(p), x) for p, x in theirs]
    with pytest.raises(ValueError, match=r"tree_map_with_path: structures differ at \['w'\]"):
        tree_util.tree_map_with_path(lambda p, x, y: x, tree, {"w": (1, 2), "b": (3, {"c": 4})})


def test_ember_error_messages_still_name_leaves_by_their_keystr():
    with pytest.raises(ember.ArgumentError, match=r"argument 0\['w'\]\[1\] has type str"):
        ember.jit(lambda params: params["w"][0])({"w": [np.ones(2), "text"]})


# --- transpose, broadcast, treedefs ---------------------------------------------------------------

@needs_jax
def test_transpose_matches_jax():
    outer, inner = tree_util.tree_structure([0, 0]), tree_util.tree_structure((0, {"a": 0}))
    tree = [(1, {"a": 2}), (3, {"a": 4})]
    want = jax.tree_util.tree_transpose(jax.tree.structure([0, 0]), jax.tree.structure((0, {"a": 0})), tree)
    assert tree_util.tree_transpose(outer, inner, tree) == want == ([1, 3], {"a": [2, 4]})
    assert ember.tree.transpose(outer, None, tree) == want
    with pytest.raises(TypeError, match="tree_transpose"):
        tree_util.tree_transpose(outer, tree_util.tree_structure((0, 0, 0)), tree)


@needs_jax
@pytest.mark.parametrize("prefix, full", [(1, {"a": [1, 2]}), ([1, {"a": 2}], [(3, 4), {"a": [5, 6]}]),
                                          ((1, None), (2, None))])
def test_broadcast_matches_jax(prefix, full):
    assert ember.tree.broadcast(prefix, full) == jax.tree.broadcast(prefix, full)


@pytest.mark.parametrize("prefix, full", [(None, [1, 2]), ((1, 2), [3, 4]), ({"a": 1}, {"b": 1})])
def test_broadcast_rejects_what_jax_rejects(prefix, full):
    with pytest.raises(ValueError, match="tree_broadcast: structures differ"):
        tree_util.tree_broadcast(prefix, full)


@needs_jax
def test_treedef_methods_and_helpers_match_jax():
    tree = {"a": (1, 2), "b": [3], "c": None}
    td, jtd = tree_util.tree_structure(tree), jax.tree.structure(tree)
    assert (td.num_leaves, td.num_nodes) == (jtd.num_leaves, jtd.num_nodes) == (3, 7)
    assert [repr(c) for c in td.children()] == [repr(c) for c in jtd.children()]
    assert tree_util.treedef_children(td) == td.children() and td.node_data() == (dict, ("a", "b", "c"))
    deeper = {"a": ((1, 2), 5), "b": [[3]], "c": None}
    assert td.flatten_up_to(deeper) == jtd.flatten_up_to(deeper) == [(1, 2), 5, [3]]
    for bad in ({"a": (1, 2), "b": (3,), "c": None}, {"a": (1, 2, 3), "b": [3], "c": None}, {"a": (1, 2)}, 5):
        with pytest.raises(ValueError, match="structures differ"):
            td.flatten_up_to(bad)
        with pytest.raises(ValueError):
            jtd.flatten_up_to(bad)
    for x in (1, None, (), [1], {"a": None}):
        s, js = tree_util.tree_structure(x), jax.tree.structure(x)
        assert tree_util.treedef_is_leaf(s) == jax.tree_util.treedef_is_leaf(js)
    for items in ([1, 2.0, "s"], [1, None], [1, (2,)], []):
        assert tree_util.all_leaves(items) == jax.tree_util.all_leaves(items)
    assert tree_util.all_leaves([(1, 2)], is_leaf=lambda x: isinstance(x, tuple))
    assert tree_util.treedef_tuple([td, tree_util.tree_structure(1)]) == tree_util.tree_structure((tree, 1))
    assert tree_util.flatten_one_level({"b": 1, "a": (2,)}) == ([(2,), 1], ("a", "b"))
    with pytest.raises(ValueError, match="can't tree-flatten"):
        tree_util.flatten_one_level(3)
    assert tree_util.is_tree_node(Point) and tree_util.is_tree_node(dict) and not tree_util.is_tree_node(int)


@needs_jax
def test_reduce_associative_matches_jax():
    leaves = [[1], [2], [3], [4], [5]]
    assert ember.tree.reduce_associative(operator.add, leaves, is_leaf=lambda x: isinstance(x, list)) == \
        jax.tree.reduce_associative(operator.add, leaves, is_leaf=lambda x: isinstance(x, list))
    assert ember.tree.reduce_associative(operator.add, [], identity=0) == 0
    with pytest.raises(TypeError, match="identity"):
        ember.tree.reduce_associative(operator.add, [])


@needs_jax
def test_ember_tree_has_every_jax_tree_name():
    public = {n for n in dir(jax.tree) if not n.startswith("_")}
    assert public <= set(dir(ember.tree))


# --- register_dataclass, register_static, Partial -----------------------------------------------------

@dataclasses.dataclass
class Params:
    w: object
    b: object
    act: str = ember.tree.static(default="tanh")


@dataclasses.dataclass
class Explicit:
    x: object
    y: object
    op: str
    cache: object = None


@needs_jax
def test_register_dataclass_matches_jax():
    for lib in (tree_util, jax.tree_util):
        lib.register_dataclass(Params)
        lib.register_dataclass(Explicit, data_fields=["x", "y"], meta_fields=["op"], drop_fields=["cache"])
    for tree in (Params(1, [2, 3], "relu"), Explicit(1, (2, 3), "add")):
        assert tree_util.tree_leaves(tree) == jax.tree_util.tree_leaves(tree)
        mine, theirs = tree_util.tree_leaves_with_path(tree), jax.tree_util.tree_leaves_with_path(tree)
        assert [repr(p) for p, _ in mine] == [repr(p) for p, _ in theirs]
        assert tree_util.tree_map(lambda v: v * 10, tree) == jax.tree_util.tree_map(lambda v: v * 10, tree)
    assert tree_util.tree_structure(Params(1, 2, "relu")) != tree_util.tree_structure(Params(1, 2, "tanh"))


@dataclasses.dataclass
class Unregistrable:
    x: object
    y: object


@needs_jax
@pytest.mark.parametrize("kwargs", [dict(data_fields=["x"]), dict(data_fields=["x"], meta_fields=[]),
                                    dict(data_fields=["x", "z"], meta_fields=["y"]),
                                    dict(data_fields=["x", "y"], meta_fields=["y"])])
def test_register_dataclass_errors_are_jax_classes(kwargs):
    with pytest.raises(Exception) as theirs:
        jax.tree_util.register_dataclass(Unregistrable, **kwargs)
    with pytest.raises(theirs.type):
        tree_util.register_dataclass(Unregistrable, **kwargs)


def test_register_dataclass_as_a_decorator_and_a_plain_class():
    @tree_util.register_dataclass
    @dataclasses.dataclass
    class Box:
        v: object

    class Plain:
        def __init__(self, a, n):
            self.a, self.n = a, n

    assert tree_util.register_dataclass(Plain, data_fields=["a"], meta_fields=["n"]) is Plain
    out = tree_util.tree_map(lambda v: v + 1, [Box(1), Plain(2, "n")])
    assert out[0] == Box(2) and (out[1].a, out[1].n) == (3, "n")
    with pytest.raises(TypeError, match="required when nodetype is not a dataclass"):
        tree_util.register_dataclass(type("Other", (), {}))


def test_register_static_objects_are_treedef_not_leaves_through_jit():
    @tree_util.register_static
    class Mode:
        def __init__(self, name):
            self.name = name

        def __eq__(self, other):
            return isinstance(other, Mode) and self.name == other.name

        def __hash__(self):
            return hash(self.name)

    assert tree_util.tree_leaves([Mode("a"), 1]) == [1]
    f = ember.jit(lambda mode, x: x * 2 if mode.name == "double" else x)
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(f(Mode("double"), x), 2 * x)
    np.testing.assert_array_equal(f(Mode("same"), x), x)


@needs_jax
def test_partial_flattens_as_jax():
    def f(a, b, c=0):
        return a + b + c

    mine, theirs = tree_util.Partial(f, 1, c=3), jax.tree_util.Partial(f, 1, c=3)
    assert tree_util.tree_leaves(mine) == jax.tree_util.tree_leaves(theirs) == [1, 3]
    assert [repr(p) for p, _ in tree_util.tree_leaves_with_path(mine)] == \
        [repr(p) for p, _ in jax.tree_util.tree_leaves_with_path(theirs)]
    assert mine(2) == theirs(2) == 6
    nested, jnested = tree_util.Partial(functools.partial(f, 1), 2), jax.tree_util.Partial(functools.partial(f, 1), 2)
    assert tree_util.tree_leaves(nested) == jax.tree_util.tree_leaves(jnested) == [2]  # the inner 1 is not a leaf
    assert nested(c=4) == 7 and nested.func.args == (1,)


def test_partial_passes_through_jit_grad_and_vmap():
    call = ember.jit(lambda fn, x: fn(x))
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(call(tree_util.Partial(ember.numpy.add, np.float32(2.0)), x), 3 * x)
    np.testing.assert_array_equal(call(tree_util.Partial(ember.numpy.add, np.float32(5.0)), x), 6 * x)
    g = ember.grad(lambda fn, x: ember.numpy.sum(fn(x)))(tree_util.Partial(ember.numpy.multiply, np.float32(3.0)), x)
    assert isinstance(g, tree_util.Partial) and g.args[0] == 3.0  # d/da sum(a * x) = sum(x)
    out = ember.vmap(call, in_axes=(None, 0))(tree_util.Partial(ember.numpy.add, np.float32(1.0)), np.ones((2, 3)))
    np.testing.assert_array_equal(out, np.full((2, 3), 2.0))
