"""`ember.tree_util`: JAX's `jax.tree_util` names for Ember's pytrees (ember/tree.py), so JAX code that
writes `jax.tree_util.tree_map(...)` runs as is. (`ember.tree.map`, `ember.tree.leaves`, ... are
`jax.tree`'s short names.) Key paths are not here: Ember's paths are strings, JAX's key objects."""

from ember.tree import (  # noqa: F401
    PyTreeDef,
    register_pytree_node,
    register_pytree_node_class,
    tree_all,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_reduce,
    tree_structure,
    tree_unflatten,
)

__all__ = ["PyTreeDef", "register_pytree_node", "register_pytree_node_class", "tree_all", "tree_flatten",
           "tree_leaves", "tree_map", "tree_reduce", "tree_structure", "tree_unflatten"]
