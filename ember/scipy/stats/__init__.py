"""`ember.scipy.stats`: jax.scipy.stats's distributions, one module each with JAX's methods, written as
JAX 0.10.2 writes them on ember.scipy.special (so values, dtypes and gradients are JAX's)."""

from ember.errors import missing_attribute as _missing_attribute
from ember.scipy.stats import (  # noqa: F401
    bernoulli,
    beta,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    laplace,
    logistic,
    multivariate_normal,
    norm,
    poisson,
    t,
    uniform,
)


def __getattr__(name: str):
    """Say whether jax.scipy.stats has a name Ember lacks, and the closest names it has."""
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    raise _missing_attribute("ember.scipy.stats", name, globals())
