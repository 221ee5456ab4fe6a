"""Ember: trace numerical Python into a graph, differentiate and batch it, optimize it and compile it.

    import ember
    import ember.numpy as jnp

    @ember.jit
    def loss(w, x): return jnp.sum(jnp.tanh(x @ w) ** 2)

    ember.grad(loss)(w, x)
"""

from ember import config, nn, numpy, tree  # noqa: F401
from ember.api import (
    Compiled,
    Jitted,
    Lowered,
    custom_vjp,
    dump,
    grad,
    hessian,
    jacobian,
    jacrev,
    jit,
    make_graph,
    stop_gradient,
    value_and_grad,
    vjp,
    vmap,
)
from ember.backends import available_backends, default_backend
from ember.errors import (
    ArgumentError,
    ConcretizationError,
    DTypeError,
    EmberError,
    ShapeError,
    TracerEscapeError,
    TransformError,
)
from ember.tracer import Graph
from ember.tree import register_pytree_node

__version__ = "0.1.0"

__all__ = [
    "jit", "grad", "value_and_grad", "vjp", "vmap", "jacrev", "jacobian", "hessian", "custom_vjp",
    "stop_gradient", "make_graph", "dump", "Jitted", "Lowered", "Compiled", "default_backend",
    "available_backends", "Graph",
    "register_pytree_node", "EmberError", "ShapeError", "DTypeError", "ConcretizationError",
    "TracerEscapeError", "ArgumentError", "TransformError", "numpy", "nn", "tree", "config",
]
