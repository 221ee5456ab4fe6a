"""`ember.random`: jax.random's API and streams. Threefry-2x32 keys, split and folded as JAX 0.10 does in
its default (partitionable) mode, so a key gives the numbers JAX gives: bit for bit for `bits`, `uniform`
and `randint`, to float rounding for the samplers built on them.

    key = ember.random.key(0)                 # or ember.random.PRNGKey(0), a raw uint32[2] key
    k1, k2 = ember.random.split(key)
    x = ember.random.normal(k1, (3, 4))

Functions take typed keys (`key`) or raw ones (`PRNGKey`) and are pure functions of the key under jit,
vmap (a batch of keys) and grad (reparameterized samples differentiate in their parameters).
"""

from ember.errors import missing_attribute as _missing_attribute
from ember.naming import publish as _publish
from ember.random._counts import binomial, poisson
from ember.random._distributions import (
    bernoulli,
    bits,
    categorical,
    cauchy,
    double_sided_maxwell,
    exponential,
    geometric,
    gumbel,
    laplace,
    logistic,
    lognormal,
    maxwell,
    normal,
    pareto,
    rademacher,
    randint,
    rayleigh,
    triangular,
    truncated_normal,
    uniform,
    wald,
    weibull_min,
)
from ember.random._gamma import (
    ball,
    beta,
    chisquare,
    dirichlet,
    f,
    gamma,
    generalized_normal,
    loggamma,
    t,
)
from ember.random._keys import (
    KeyArray,
    PRNGKey,
    clone,
    fold_in,
    key,
    key_data,
    key_dtype,
    key_impl,
    split,
    wrap_key_data,
)
from ember.random._multivariate import multivariate_normal
from ember.random._permutations import choice, permutation

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone", "split", "fold_in", "KeyArray",
    "bits", "uniform", "randint", "normal", "truncated_normal", "lognormal", "maxwell", "double_sided_maxwell",
    "wald", "bernoulli", "rademacher", "categorical", "exponential", "laplace", "logistic", "cauchy", "gumbel",
    "pareto", "weibull_min", "rayleigh", "triangular", "geometric", "gamma", "loggamma", "beta", "dirichlet",
    "chisquare", "t", "f", "generalized_normal", "ball", "poisson", "binomial",
    "permutation", "choice", "multivariate_normal",
]

_publish(globals(), __name__, __all__)

# jax.random names Ember lacks, and why (the message also says that JAX has them)
_HINTS = {
    "orthogonal": "it is not written yet (JAX takes the Q of a normal matrix's QR, ember.numpy.linalg.qr, "
                  "with the signs of R's diagonal)",
    "multinomial": "it is not written yet (JAX draws it as binomials of the remaining count, "
                   "ember.random.binomial)",
    "random_gamma_p": "Ember's gamma is not a primitive; ember.random.gamma samples and differentiates as JAX's",
}


def __getattr__(name: str):
    """Say that a jax.random name is missing and why, or which names are closest."""
    raise _missing_attribute("ember.random", name, globals(), hints=_HINTS)
