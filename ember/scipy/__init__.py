"""`ember.scipy`: the SciPy names JAX users reach through `jax.scipy` (only `special` so far)."""

from ember.scipy import special  # noqa: F401
