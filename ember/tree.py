"""Pytrees: nested tuples, lists, dicts, None, NamedTuples, dataclasses and registered classes.

`tree_flatten(x) -> (leaves, treedef)`; `tree_unflatten(treedef, leaves)` rebuilds. Dict keys are
sorted (as in JAX), so equal dicts give equal treedefs. Dataclass fields marked
``field(metadata={"static": True})`` are part of the treedef rather than leaves.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

__all__ = [
    "PyTreeDef", "register_pytree_node", "register_pytree_node_class", "tree_flatten", "tree_unflatten",
    "tree_leaves", "tree_map", "tree_structure", "tree_reduce", "tree_all", "tree_flatten_with_path",
    "broadcast_prefix", "map", "flatten", "unflatten", "leaves", "structure", "reduce", "all",
]


class _NodeType(NamedTuple):
    flatten: Callable[[Any], tuple[Iterable, Any]]
    unflatten: Callable[[Any, list], Any]
    keys: Callable[[Any, Any], list[str]]  # (obj aux, n children) -> key path pieces


_registry: dict[type, _NodeType] = {}


def register_pytree_node(cls: type, flatten_fn: Callable, unflatten_fn: Callable) -> None:
    """Make `cls` a pytree node: ``flatten_fn(obj) -> (children, aux)`` and
    ``unflatten_fn(aux, children) -> obj``; `aux` must be hashable and comparable."""
    _registry[cls] = _NodeType(flatten_fn, unflatten_fn, lambda aux, n: [f"[<child {i}>]" for i in range(n)])


def _sorted_keys(d: dict) -> list:
    try:
        return sorted(d)
    except TypeError:
        return sorted(d, key=repr)


_registry[tuple] = _NodeType(lambda t: (t, None), lambda _, c: tuple(c),
                             lambda aux, n: [f"[{i}]" for i in range(n)])
_registry[list] = _NodeType(lambda t: (t, None), lambda _, c: list(c),
                            lambda aux, n: [f"[{i}]" for i in range(n)])
_registry[type(None)] = _NodeType(lambda t: ((), None), lambda _, c: None, lambda aux, n: [])


def _dict_flatten(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], tuple(keys)


_registry[dict] = _NodeType(_dict_flatten, lambda keys, c: dict(zip(keys, c)),
                            lambda keys, n: [f"[{k!r}]" for k in keys])
_registry[OrderedDict] = _NodeType(lambda d: (list(d.values()), tuple(d)),
                                   lambda keys, c: OrderedDict(zip(keys, c)),
                                   lambda keys, n: [f"[{k!r}]" for k in keys])


def _node_type(x) -> _NodeType | None:
    t = type(x)
    nt = _registry.get(t)
    if nt is not None:
        return nt
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        nt = _NodeType(lambda x: (tuple(x), None), lambda _, c, t=t: t(*c),
                       lambda aux, n, t=t: [f".{f}" for f in t._fields])
        _registry[t] = nt
        return nt
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        nt = _dataclass_node(t)
        _registry[t] = nt
        return nt
    return None


def _dataclass_node(cls) -> _NodeType:
    fields = [f for f in dataclasses.fields(cls) if f.init]
    dynamic = [f.name for f in fields if not f.metadata.get("static", False)]
    static = [f.name for f in fields if f.metadata.get("static", False)]

    def flatten(x):
        return [getattr(x, n) for n in dynamic], tuple(getattr(x, n) for n in static)

    def unflatten(aux, children):
        kw = dict(zip(dynamic, children))
        kw.update(zip(static, aux))
        return cls(**kw)

    return _NodeType(flatten, unflatten, lambda aux, n: [f".{name}" for name in dynamic])


class PyTreeDef:
    """The structure of a pytree: a node type, its aux data and child treedefs (leaves are '*')."""

    __slots__ = ("node", "aux", "children", "num_leaves", "_hash")

    def __init__(self, node, aux, children: tuple[PyTreeDef, ...]):
        self.node = node  # None for a leaf, else the node's Python type
        self.aux = aux
        self.children = children
        self.num_leaves = 1 if node is None else sum(c.num_leaves for c in children)
        self._hash = None

    def __eq__(self, other):
        return (isinstance(other, PyTreeDef) and self.node is other.node and self.aux == other.aux
                and self.children == other.children)

    def __hash__(self):
        if self._hash is None:
            self._hash = hash((self.node, _hashable(self.aux), self.children))
        return self._hash

    def __repr__(self):
        return f"PyTreeDef({self._str()})"

    def _str(self) -> str:
        if self.node is None:
            return "*"
        inner = ", ".join(c._str() for c in self.children)
        if self.node is tuple:
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        if self.node is list:
            return f"[{inner}]"
        if self.node is dict:
            return "{" + ", ".join(f"{k!r}: {c._str()}" for k, c in zip(self.aux, self.children)) + "}"
        if self.node is type(None):
            return "None"
        return f"{self.node.__name__}({inner})"


def _hashable(aux):
    try:
        hash(aux)
        return aux
    except TypeError:
        return repr(aux)


LEAF = PyTreeDef(None, None, ())


def _flatten(x, leaves: list, is_leaf) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return LEAF
    nt = _node_type(x)
    if nt is None:
        leaves.append(x)
        return LEAF
    children, aux = nt.flatten(x)
    node = type(x)
    return PyTreeDef(node, aux, tuple(_flatten(c, leaves, is_leaf) for c in children))


def tree_flatten(tree, is_leaf: Callable | None = None) -> tuple[list, PyTreeDef]:
    leaves: list = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable):
    """Rebuild the pytree `treedef` describes from its leaves (exactly treedef.num_leaves of them)."""
    leaves = list(leaves)
    if treedef.node is None and len(leaves) == 1:
        return leaves[0]
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"{treedef} has {treedef.num_leaves} leaves, but {len(leaves)} were given")
    return _unflatten(treedef, iter(leaves))


def _unflatten(td: PyTreeDef, it):
    if td.node is None:
        return next(it)
    nt = _registry.get(td.node) or _node_type_for_class(td.node)
    return nt.unflatten(td.aux, [_unflatten(c, it) for c in td.children])


def _node_type_for_class(cls) -> _NodeType:
    if hasattr(cls, "_fields"):
        return _NodeType(None, lambda _, c: cls(*c), None)
    return _dataclass_node(cls)


def tree_leaves(tree, is_leaf: Callable | None = None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf: Callable | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable, tree, *rest, is_leaf: Callable | None = None):
    """Apply `f` leafwise to `tree` and the trees in `rest`, which must share its structure."""
    leaves, td = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_td = tree_flatten(r, is_leaf)
        if r_td != td:
            raise ValueError(f"tree_map: structures differ: {td} vs {r_td}")
        others.append(r_leaves)
    return tree_unflatten(td, [f(*xs) for xs in zip(leaves, *others)])


_NO_INITIALIZER = object()


def tree_reduce(function: Callable, tree, initializer: Any = _NO_INITIALIZER, is_leaf: Callable | None = None):
    """`function` folded over the leaves, left to right (functools.reduce, as JAX's tree_reduce)."""
    import functools

    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree, *, is_leaf: Callable | None = None) -> bool:
    """Whether every leaf is true (JAX's tree_all)."""
    return builtins.all(tree_leaves(tree, is_leaf))


def register_pytree_node_class(cls: type) -> type:
    """A class decorator registering `cls` by its own `tree_flatten()` -> (children, aux) method and
    `tree_unflatten(aux, children)` classmethod, as JAX's."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def tree_flatten_with_path(tree, is_leaf: Callable | None = None) -> tuple[list[tuple[str, Any]], PyTreeDef]:
    """Like tree_flatten, with each leaf's key path as a string such as "[0]['w'].bias"."""
    leaves, td = tree_flatten(tree, is_leaf)
    paths: list[str] = []
    _paths(tree, "", paths, is_leaf)
    return list(zip(paths, leaves)), td


def _paths(x, prefix: str, out: list, is_leaf):
    if is_leaf is not None and is_leaf(x):
        out.append(prefix)
        return
    nt = _node_type(x)
    if nt is None:
        out.append(prefix)
        return
    children, aux = nt.flatten(x)
    children = list(children)
    for key, c in zip(nt.keys(aux, len(children)), children):
        _paths(c, prefix + key, out, is_leaf)


def broadcast_prefix(prefix, tree, is_leaf: Callable | None = None, what: str = "prefix", root: str = "") -> list:
    """Expand `prefix` (a tree whose leaves apply to whole subtrees of `tree`) to one entry per leaf of
    `tree`. Raises ValueError naming the first place where the structures disagree (its key path,
    after `root`, e.g. root="argument 1" gives "argument 1['w']")."""
    out: list = []
    _broadcast(prefix, tree, root, out, is_leaf, what)
    return out


def _broadcast(prefix, tree, path, out, is_leaf, what):
    p_nt = None if (prefix is None) else _node_type(prefix)
    if p_nt is None:  # a leaf of the prefix (None included) covers the whole subtree
        out.extend([prefix] * len(tree_leaves(tree, is_leaf)))
        return
    t_nt = _node_type(tree)
    if t_nt is None or type(prefix) is not type(tree) and not (
            isinstance(prefix, (list, tuple)) and isinstance(tree, (list, tuple))):
        raise ValueError(f"{what} at {path or 'the top level'} is a {type(prefix).__name__} but the "
                         f"value there is {_describe(tree)}")
    p_children, p_aux = p_nt.flatten(prefix)
    t_children, t_aux = t_nt.flatten(tree)
    p_children, t_children = list(p_children), list(t_children)
    if len(p_children) != len(t_children) or (isinstance(tree, dict) and p_aux != t_aux):
        raise ValueError(f"{what} at {path or 'the top level'} has {len(p_children)} entries"
                         f"{_keys_text(p_aux)} but the value there has {len(t_children)}{_keys_text(t_aux)}")
    keys = t_nt.keys(t_aux, len(t_children))
    for key, pc, tc in zip(keys, p_children, t_children):
        _broadcast(pc, tc, path + key, out, is_leaf, what)


def _describe(x) -> str:
    """'an array of shape (3,)' for array-likes (traced or not), else 'a <type>'."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"an array of shape {tuple(x.shape)}"
    return f"a {type(x).__name__}"


def _keys_text(aux) -> str:
    return f" (keys {list(aux)})" if isinstance(aux, tuple) and aux and not isinstance(aux[0], int) else ""


# JAX's `jax.tree` names (jax.tree.map is jax.tree_util.tree_map, ...). Assigned last: nothing in this
# module calls the builtins they shadow (builtins.all is called by that name).
map, flatten, unflatten, leaves = tree_map, tree_flatten, tree_unflatten, tree_leaves
structure, reduce, all = tree_structure, tree_reduce, tree_all
