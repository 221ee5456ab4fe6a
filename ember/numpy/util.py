"""What other packages share of ember.numpy's machinery, public: `elementwise` (apply a primitive with
JAX's promotion and broadcasting, as every ember.numpy function does: ember.scipy.special builds on it)
and `plain_array` (an argument as a plain ndarray, masked arrays rejected: jit's argument checks use it);
`register_eager_compiler`, through which `ember/__init__` gives the eager fast path's native tier its
compiler (ember/numpy/_native.py). They are implemented in private modules, which no other package imports."""

from ember.numpy._core import elementwise, plain_array
from ember.numpy._native import register as register_eager_compiler

__all__ = ["elementwise", "plain_array", "register_eager_compiler"]
