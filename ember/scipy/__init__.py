"""`ember.scipy`: the SciPy names JAX users reach through `jax.scipy` (`special` and `stats` so far)."""

from ember.errors import missing_attribute as _missing_attribute
from ember.scipy import (
    special,  # noqa: F401
    stats,  # noqa: F401
)


def __getattr__(name: str):
    """Say whether jax.scipy has a name Ember lacks (its submodules other than special and stats) and what to use."""
    raise _missing_attribute("ember.scipy", name, globals())
