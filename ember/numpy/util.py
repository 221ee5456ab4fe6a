"""What other packages share of ember.numpy's machinery, public: `elementwise` (apply a primitive with
JAX's promotion and broadcasting, as every ember.numpy function does: ember.scipy.special builds on it)
and `plain_array` (an argument as a plain ndarray, masked arrays rejected: jit's argument checks use it).
They are implemented in the private `_core`, which no other package imports."""

from ember.numpy._core import elementwise, plain_array

__all__ = ["elementwise", "plain_array"]
