"""Pytrees: nested tuples, lists, dicts, None, NamedTuples, dataclasses and registered classes.

`tree_flatten(x) -> (leaves, treedef)`; `tree_unflatten(treedef, leaves)` rebuilds. Dict keys are
sorted (as in JAX), so equal dicts give equal treedefs. Dataclass fields marked
``field(metadata={"static": True})`` are part of the treedef rather than leaves (JAX makes a dataclass a
node only through `register_dataclass`; Ember takes every dataclass as one). Key paths
(`tree_flatten_with_path`) are tuples of JAX's key objects (`SequenceKey`, `DictKey`, `GetAttrKey`,
`FlattenedIndexKey`), printed by `keystr`.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, NamedTuple, TypeVar

from ember.errors import missing_attribute as _missing_attribute

__all__ = [
    "PyTreeDef", "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
    "register_pytree_with_keys_class", "register_dataclass", "register_static", "tree_flatten",
    "tree_unflatten", "tree_leaves", "tree_map", "tree_structure", "tree_reduce", "tree_reduce_associative",
    "tree_all", "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path", "tree_transpose",
    "tree_broadcast", "broadcast_prefix", "keystr", "SequenceKey", "DictKey", "GetAttrKey", "FlattenedIndexKey",
    "KeyEntry", "KeyPath", "Partial", "all_leaves", "treedef_is_leaf", "treedef_children", "treedef_tuple",
    "flatten_one_level", "flatten_one_level_with_keys", "is_tree_node", "map", "flatten", "unflatten",
    "leaves", "structure", "reduce", "all", "transpose", "map_with_path", "flatten_with_path",
    "leaves_with_path", "broadcast", "reduce_associative", "static",
]

T = TypeVar("T")


# --- key paths ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """A child of a tuple or list by position; prints as "[0]" (jax.tree_util.SequenceKey)."""
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """A dict's entry by key; prints as "['w']" (jax.tree_util.DictKey)."""
    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """A field of a NamedTuple or dataclass; prints as ".w" (jax.tree_util.GetAttrKey)."""
    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The i-th child of a class registered without keys; prints as "[<flat index 0>]" (as JAX's)."""
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


_KEY_TYPES = (SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey)
KeyEntry = Any  # one of the key classes above, or whatever a register_pytree_with_keys flatten returns
KeyPath = tuple[KeyEntry, ...]


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: "['w'][0].bias", or with `simple` the bare values ("w/0/bias" with
    separator="/"), as jax.tree_util.keystr."""
    return separator.join(_simple_key(k) if simple else str(k) for k in keys)


def _simple_key(key) -> str:
    """The value a key holds ("w" for DictKey('w')); other objects print as themselves."""
    if isinstance(key, _KEY_TYPES):
        return str(getattr(key, key.__match_args__[0]))
    return str(key)


# --- the registry ------------------------------------------------------------------------------------

class _NodeType(NamedTuple):
    flatten: Callable[[Any], tuple[Iterable, Any]]  # obj -> (children, aux)
    unflatten: Callable[[Any, list], Any]  # (aux, children) -> obj
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Any]]  # obj -> ((key, child)..., aux)


_registry: dict[type, _NodeType] = {}


def register_pytree_node(cls: type, flatten_fn: Callable, unflatten_fn: Callable,
                         flatten_with_keys_fn: Callable | None = None) -> None:
    """Make `cls` a pytree node: ``flatten_fn(obj) -> (children, aux)`` and
    ``unflatten_fn(aux, children) -> obj``; `aux` must be hashable and comparable. Without
    `flatten_with_keys_fn` (obj -> ((key, child) pairs, aux)) its children's keys are FlattenedIndexKeys."""
    _registry[cls] = _NodeType(flatten_fn, unflatten_fn, flatten_with_keys_fn or _indexed(flatten_fn))


def _indexed(flatten_fn: Callable) -> Callable:
    """flatten_with_keys for a node registered without keys: child i's key is FlattenedIndexKey(i)."""
    def flatten_with_keys(x):
        children, aux = flatten_fn(x)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux
    return flatten_with_keys


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable, unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """Register `nodetype` by ``flatten_with_keys(obj) -> ((key, child) pairs, aux)``; `flatten_func`,
    when given, must return the same children and aux without keys (it is only faster)."""
    if flatten_func is None:
        def flatten_func(x):
            keyed, aux = flatten_with_keys(x)
            return [c for _, c in keyed], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type) -> type:
    """A class decorator registering `cls` by its own `tree_flatten()` -> (children, aux) method and
    `tree_unflatten(aux, children)` classmethod, as JAX's."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls: type) -> type:
    """A class decorator registering `cls` by its `tree_flatten_with_keys()` method (and `tree_flatten()`
    when it has one) and `tree_unflatten` classmethod, as JAX's."""
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten, flatten)
    return cls


def register_static(cls: type[T]) -> type[T]:
    """Make instances of `cls` (hashable) pytrees with no leaves: the whole object is in the treedef, so
    jit takes it as a static argument. Usable as a decorator."""
    register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _: x)
    return cls


def register_dataclass(nodetype: type[T], data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None, drop_fields: Iterable[str] = ()) -> type[T]:
    """Register `nodetype` by its fields: `data_fields` are children, `meta_fields` go in the treedef
    (static under jit); for a dataclass both default to its init fields, split by
    ``field(metadata={"static": True})``, and `drop_fields` are left out. Usable as a decorator."""
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: data_fields and meta_fields must both be given when either is; "
                            f"got data_fields={data_fields!r}, meta_fields={meta_fields!r}")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError("register_dataclass: data_fields and meta_fields are required when nodetype is not a "
                            f"dataclass; got {nodetype!r}")
        data_fields, meta_fields = _dataclass_fields(nodetype)
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        _check_dataclass_fields(nodetype, data_fields, meta_fields, set(drop_fields))
    if overlap := set(data_fields) & set(meta_fields):
        raise ValueError(f"data_fields and meta_fields must not overlap; both have {sorted(overlap)}")
    _registry[nodetype] = _fields_node(nodetype, data_fields, meta_fields)
    return nodetype


def _check_dataclass_fields(cls: type, data_fields: tuple, meta_fields: tuple, drop: set) -> None:
    """data_fields and meta_fields of a dataclass name every init field but the dropped ones, and only them."""
    init = {f.name for f in dataclasses.fields(cls) if f.init} - drop
    given = {*data_fields, *meta_fields}
    if given != init:
        text = "data_fields and meta_fields must include all dataclass fields with init=True and only them."
        if missing := init - given:
            text += f" Missing fields: {sorted(missing)} (add them to drop_fields to leave them out)."
        if unexpected := given - init:
            text += f" Unexpected fields: {sorted(unexpected)}."
        raise ValueError(text)


def static(**kwargs) -> Any:
    """A dataclasses.field marked static (in the treedef, not a leaf), as jax.tree.static."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)


def _sorted_keys(d: dict) -> list:
    try:
        return sorted(d)
    except TypeError:
        return sorted(d, key=repr)


def _sequence_keys(t) -> tuple[list, None]:
    return [(SequenceKey(i), c) for i, c in enumerate(t)], None


def _dict_flatten(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], tuple(keys)


def _dict_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], tuple(keys)


def _defaultdict_flatten(d):
    children, keys = _dict_flatten(d)
    return children, (d.default_factory, keys)


def _defaultdict_keys(d):
    keyed, keys = _dict_keys(d)
    return keyed, (d.default_factory, keys)


_registry[tuple] = _NodeType(lambda t: (t, None), lambda _, c: tuple(c), _sequence_keys)
_registry[list] = _NodeType(lambda t: (t, None), lambda _, c: list(c), _sequence_keys)
_registry[type(None)] = _NodeType(lambda t: ((), None), lambda _, c: None, lambda t: ((), None))
_registry[dict] = _NodeType(_dict_flatten, lambda keys, c: dict(zip(keys, c)), _dict_keys)
_registry[OrderedDict] = _NodeType(lambda d: (list(d.values()), tuple(d)),
                                   lambda keys, c: OrderedDict(zip(keys, c)),
                                   lambda d: ([(DictKey(k), v) for k, v in d.items()], tuple(d)))
_registry[defaultdict] = _NodeType(_defaultdict_flatten, lambda aux, c: defaultdict(aux[0], zip(aux[1], c)),
                                   _defaultdict_keys)


def _node_type(x) -> _NodeType | None:
    t = type(x)
    nt = _registry.get(t)
    if nt is not None:
        return nt
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        nt = _registry[t] = _namedtuple_node(t)
        return nt
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and not isinstance(x, _KEY_TYPES):
        nt = _registry[t] = _dataclass_node(t)
        return nt
    return None


def _namedtuple_node(cls) -> _NodeType:
    return _NodeType(lambda x: (tuple(x), None), lambda _, c: cls(*c),
                     lambda x: ([(GetAttrKey(f), v) for f, v in zip(cls._fields, x)], None))


def _dataclass_fields(cls) -> tuple[list[str], list[str]]:
    """A dataclass's init fields split into (data, meta): meta are those with metadata static=True."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    return ([f.name for f in fields if not f.metadata.get("static", False)],
            [f.name for f in fields if f.metadata.get("static", False)])


def _dataclass_node(cls) -> _NodeType:
    return _fields_node(cls, *_dataclass_fields(cls))


def _fields_node(cls, data_fields: Iterable[str], meta_fields: Iterable[str]) -> _NodeType:
    """A node whose children are the attributes `data_fields` (keys GetAttrKey) and whose aux is the
    tuple of `meta_fields`; rebuilt as cls(**fields)."""
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)

    def flatten(x):
        return [getattr(x, n) for n in data_fields], tuple(getattr(x, n) for n in meta_fields)

    def flatten_with_keys(x):
        return [(GetAttrKey(n), getattr(x, n)) for n in data_fields], tuple(getattr(x, n) for n in meta_fields)

    def unflatten(aux, children):
        kw = dict(zip(data_fields, children))
        kw.update(zip(meta_fields, aux))
        return cls(**kw)

    return _NodeType(flatten, unflatten, flatten_with_keys)


def is_tree_node(typ: type) -> bool:
    """Whether instances of `typ` are pytree nodes (registered, NamedTuple or dataclass) rather than leaves."""
    if typ in _registry:
        return True
    if issubclass(typ, tuple):
        return hasattr(typ, "_fields")
    return dataclasses.is_dataclass(typ) and not issubclass(typ, _KEY_TYPES)


# --- treedefs ----------------------------------------------------------------------------------------

class _Children(tuple):
    """A treedef's child treedefs: a tuple, also callable as JAX's `PyTreeDef.children()` (a list)."""

    __slots__ = ()

    def __call__(self) -> list[PyTreeDef]:
        return list(self)


class PyTreeDef:
    """The structure of a pytree: a node type, its aux data and child treedefs (leaves are '*')."""

    __slots__ = ("node", "aux", "children", "num_leaves", "num_nodes", "_hash")

    def __init__(self, node, aux, children: Iterable[PyTreeDef]):
        self.node = node  # None for a leaf, else the node's Python type
        self.aux = aux
        self.children = _Children(children)
        self.num_leaves = 1 if node is None else sum(c.num_leaves for c in self.children)
        self.num_nodes = 1 + sum(c.num_nodes for c in self.children)
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

    def unflatten(self, leaves: Iterable) -> Any:
        """The pytree of this structure holding `leaves` (tree_unflatten)."""
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree) -> list:
        """The subtrees of `tree` at this treedef's leaves: `tree` has this structure down to them (a
        ValueError naming the key path where it does not)."""
        return _flatten_up_to(self, tree, "flatten_up_to")

    def node_data(self) -> tuple[type, Any] | None:
        """(node type, aux data) of the root; None for a leaf."""
        return None if self.node is None else (self.node, self.aux)

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """This structure with `inner` in place of each leaf."""
        if self.node is None:
            return inner
        return PyTreeDef(self.node, self.aux, [c.compose(inner) for c in self.children])


def _hashable(aux):
    try:
        hash(aux)
        return aux
    except TypeError:
        return repr(aux)


LEAF = PyTreeDef(None, None, ())


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether `treedef` has one node (a leaf, or an empty node such as None)."""
    return treedef.num_nodes == 1


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The treedefs of the root's children."""
    return list(treedef.children)


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The treedef of a tuple whose children have `treedefs`."""
    return PyTreeDef(tuple, None, treedefs)


# --- flatten and unflatten ---------------------------------------------------------------------------

def _flatten(x, leaves: list, is_leaf) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return LEAF
    nt = _node_type(x)
    if nt is None:
        leaves.append(x)
        return LEAF
    children, aux = nt.flatten(x)
    return PyTreeDef(type(x), aux, [_flatten(c, leaves, is_leaf) for c in children])


def tree_flatten(tree, is_leaf: Callable | None = None) -> tuple[list, PyTreeDef]:
    """The leaves of `tree`, left to right, and its structure."""
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
        return _namedtuple_node(cls)
    return _dataclass_node(cls)


def flatten_one_level(tree) -> tuple[list, Any]:
    """A node's children and aux data (a ValueError for a leaf)."""
    nt = _node_type(tree)
    if nt is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    children, aux = nt.flatten(tree)
    return list(children), aux


def flatten_one_level_with_keys(tree) -> tuple[list[tuple[KeyEntry, Any]], Any]:
    """A node's (key, child) pairs and aux data (a ValueError for a leaf)."""
    nt = _node_type(tree)
    if nt is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    keyed, aux = nt.flatten_with_keys(tree)
    return list(keyed), aux


def all_leaves(iterable: Iterable, is_leaf: Callable | None = None) -> bool:
    """Whether every item of `iterable` is a leaf (None is not: it is an empty node)."""
    items = list(iterable)
    if is_leaf is None:
        return builtins.all(_node_type(x) is None for x in items)
    found = tree_leaves(items, is_leaf)
    return len(found) == len(items) and builtins.all(a is b for a, b in zip(items, found))


def tree_leaves(tree, is_leaf: Callable | None = None) -> list:
    """The leaves of `tree`, left to right."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf: Callable | None = None) -> PyTreeDef:
    """The treedef of `tree`."""
    return tree_flatten(tree, is_leaf)[1]


def _flatten_up_to(td: PyTreeDef, tree, what: str) -> list:
    out: list = []
    _up_to(td, tree, (), out, what)
    return out


def _up_to(td: PyTreeDef, x, path: tuple, out: list, what: str) -> None:
    """Append the subtrees of `x` at `td`'s leaves to `out`; a ValueError where `x` is not `td` there."""
    if td.node is None:
        out.append(x)
        return
    nt = _node_type(x) if type(x) is td.node else None
    if nt is None:
        raise _mismatch(what, path, f"a {td.node.__name__}", _describe(x))
    keyed, aux = nt.flatten_with_keys(x)
    keyed = list(keyed)
    if len(keyed) != len(td.children):
        raise _mismatch(what, path, f"a {td.node.__name__} of {len(td.children)} entries",
                        f"one of {len(keyed)}{_keys_text(aux)}")
    if aux != td.aux:
        raise _mismatch(what, path, _aux_text(td.aux), _aux_text(aux))
    for (k, c), child in zip(keyed, td.children):
        _up_to(child, c, path + (k,), out, what)


def _aux_text(aux) -> str:
    """A node's aux data as a mismatch names it: a dict's keys, else the data itself."""
    keys = _keys_text(aux).strip()
    return keys[1:-1] if keys else f"node data {aux!r}"


def _mismatch(what: str, path: tuple, want: str, got: str) -> ValueError:
    return ValueError(f"{what}: structures differ at {keystr(path) or 'the top level'}: expected {want}, got {got}")


# --- with key paths ----------------------------------------------------------------------------------

def tree_flatten_with_path(tree, is_leaf: Callable | None = None,
                           is_leaf_takes_path: bool = False) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Like tree_flatten, with each leaf's key path: [((DictKey('w'), SequenceKey(0)), leaf), ...].
    With `is_leaf_takes_path`, `is_leaf` is called as is_leaf(path, x)."""
    pairs: list = []
    td = _flatten_with_path(tree, (), pairs, is_leaf, is_leaf_takes_path)
    return pairs, td


def _flatten_with_path(x, path: tuple, out: list, is_leaf, takes_path: bool) -> PyTreeDef:
    if is_leaf is not None and (is_leaf(path, x) if takes_path else is_leaf(x)):
        out.append((path, x))
        return LEAF
    nt = _node_type(x)
    if nt is None:
        out.append((path, x))
        return LEAF
    keyed, aux = nt.flatten_with_keys(x)
    return PyTreeDef(type(x), aux, [_flatten_with_path(c, path + (k,), out, is_leaf, takes_path) for k, c in keyed])


def tree_leaves_with_path(tree, is_leaf: Callable | None = None,
                          is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
    """Each leaf with its key path, left to right."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_flatten_with_keystr(tree, is_leaf: Callable | None = None) -> tuple[list[tuple[str, Any]], PyTreeDef]:
    """tree_flatten_with_path with each path as its keystr ("[0]['w'].bias"): the form Ember's own error
    messages name leaves by."""
    pairs, td = tree_flatten_with_path(tree, is_leaf)
    return [(keystr(p), x) for p, x in pairs], td


# --- maps and reductions -----------------------------------------------------------------------------

def tree_map(f: Callable, tree, *rest, is_leaf: Callable | None = None):
    """Apply `f` leafwise to `tree` and the trees in `rest`, which have `tree`'s structure at least down
    to its leaves (their subtrees there are passed whole, as in JAX)."""
    leaves, td = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(td, r, "tree_map") for r in rest]
    return tree_unflatten(td, [f(*xs) for xs in zip(leaves, *others)])


def tree_map_with_path(f: Callable, tree, *rest, is_leaf: Callable | None = None,
                       is_leaf_takes_path: bool = False):
    """tree_map with each leaf's key path as `f`'s first argument: f(path, x, *rest_x)."""
    pairs, td = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [_flatten_up_to(td, r, "tree_map_with_path") for r in rest]
    return tree_unflatten(td, [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


_NO_INITIALIZER = object()


def tree_reduce(function: Callable, tree, initializer: Any = _NO_INITIALIZER, is_leaf: Callable | None = None):
    """`function` folded over the leaves, left to right (functools.reduce, as JAX's tree_reduce)."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation: Callable, tree, *, identity: Any = _NO_INITIALIZER,
                            is_leaf: Callable | None = None):
    """`operation` over the leaves as a balanced tree of pairs (halves first, as JAX's); `identity` is
    the result for a tree without leaves (a TypeError without it)."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_INITIALIZER:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    return _pairwise(operation, leaves)


def _pairwise(operation: Callable, items: list):
    if len(items) == 1:
        return items[0]
    half = len(items) // 2
    return operation(_pairwise(operation, items[:half]), _pairwise(operation, items[half:]))


def tree_all(tree, *, is_leaf: Callable | None = None) -> bool:
    """Whether every leaf is true (JAX's tree_all)."""
    return builtins.all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose):
    """An outer tree of inner trees turned into an inner tree of outer trees; `inner_treedef` None takes
    the structure of the first inner tree. A TypeError when the tree is not outer composed with inner."""
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    n_inner, n_outer = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != n_inner * n_outer:
        raise TypeError(f"tree_transpose: the tree is {treedef}, not {outer_treedef.compose(inner_treedef)}")
    rows = [flat[i * n_inner:(i + 1) * n_inner] for i in range(n_outer)]
    columns = [tree_unflatten(outer_treedef, col) for col in zip(*rows)]
    return tree_unflatten(inner_treedef, columns)


def tree_broadcast(prefix_tree, full_tree, is_leaf: Callable | None = None):
    """`prefix_tree` with each leaf repeated over the subtree of `full_tree` at its place: the result
    has `full_tree`'s structure (jax.tree.broadcast)."""
    p_leaves, p_td = tree_flatten(prefix_tree, is_leaf)
    subtrees = _flatten_up_to(p_td, full_tree, "tree_broadcast")
    return tree_unflatten(p_td, [tree_map(lambda _, v=v: v, sub, is_leaf=is_leaf)
                                 for v, sub in zip(p_leaves, subtrees)])


def broadcast_prefix(prefix, tree, is_leaf: Callable | None = None, what: str = "prefix", root: str = "") -> list:
    """Expand `prefix` (a tree whose leaves apply to whole subtrees of `tree`; None too) to one entry
    per leaf of `tree`, as vmap's in_axes. Raises ValueError naming the first place where the structures
    disagree (its key path, after `root`, e.g. root="argument 1" gives "argument 1['w']")."""
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
    t_keyed, t_aux = t_nt.flatten_with_keys(tree)
    p_children, t_keyed = list(p_children), list(t_keyed)
    if len(p_children) != len(t_keyed) or (isinstance(tree, dict) and p_aux != t_aux):
        raise ValueError(f"{what} at {path or 'the top level'} has {len(p_children)} entries"
                         f"{_keys_text(p_aux)} but the value there has {len(t_keyed)}{_keys_text(t_aux)}")
    for pc, (key, tc) in zip(p_children, t_keyed):
        _broadcast(pc, tc, path + str(key), out, is_leaf, what)


def _describe(x) -> str:
    """'an array of shape (3,)' for array-likes (traced or not), else 'a <type>'."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"an array of shape {tuple(x.shape)}"
    return f"a {type(x).__name__}"


def _keys_text(aux) -> str:
    return f" (keys {list(aux)})" if isinstance(aux, tuple) and aux and not isinstance(aux[0], int) else ""


# --- Partial -----------------------------------------------------------------------------------------

class Partial(functools.partial):
    """functools.partial as a pytree (jax.tree_util.Partial): the bound arguments are its children and
    the function is in the treedef, so a Partial passes through jit, grad and vmap as an argument."""

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):  # partial would merge func's arguments into ours as leaves
            func = _BoundFunction(func)
        return super().__new__(cls, func, *args, **kwargs)


class _BoundFunction:
    """A functools.partial held whole as a Partial's function (its arguments stay in the treedef)."""

    __slots__ = ("partial",)

    def __init__(self, partial: functools.partial):
        self.partial = partial

    def __call__(self, *args, **kwargs):
        return self.partial(*args, **kwargs)

    @property
    def func(self):
        return self.partial.func

    @property
    def args(self):
        return self.partial.args

    @property
    def keywords(self):
        return self.partial.keywords

    def __eq__(self, other):
        return isinstance(other, _BoundFunction) and self.partial == other.partial

    def __hash__(self):
        return hash(self.partial)

    def __repr__(self):
        return f"_BoundFunction({self.partial!r})"


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, xs: Partial(func, *xs[0], **xs[1]))


# JAX's `jax.tree` names (jax.tree.map is jax.tree_util.tree_map, ...). Assigned last: nothing in this
# module calls the builtins they shadow by their bare names (builtins.all is called by that name).
map, flatten, unflatten, leaves = tree_map, tree_flatten, tree_unflatten, tree_leaves
structure, reduce, all = tree_structure, tree_reduce, tree_all
transpose, map_with_path, broadcast, reduce_associative = (tree_transpose, tree_map_with_path, tree_broadcast,
                                                           tree_reduce_associative)
flatten_with_path, leaves_with_path = tree_flatten_with_path, tree_leaves_with_path


def __getattr__(name: str):
    """Say whether jax.tree has a name Ember lacks, with the closest names Ember has."""
    raise _missing_attribute("ember.tree", name, globals())
