"""`ember.scipy`: the SciPy names JAX users reach through `jax.scipy` (`special`, `linalg` and `stats` so far)."""

from ember.errors import missing_attribute as _missing_attribute
from ember.scipy import linalg, special, stats  # noqa: F401


def __getattr__(name: str):
    """Say whether jax.scipy has a name Ember lacks (its submodules other than special, linalg and stats) and
    what to use."""
    raise _missing_attribute("ember.scipy", name, globals())
