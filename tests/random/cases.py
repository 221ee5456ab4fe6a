"""The calls whose results tests/random/jax_values.json records from JAX (record_jax.py) and the suite
compares with Ember's: each is a Python expression over `random` (jax.random or ember.random), `np`,
`grad`, `vmap`, `jit` and the keys below, evaluated the same way on both sides.

Cases marked x64 are recorded with jax_enable_x64 on; they name every dtype explicitly (Ember keeps
explicit 64-bit dtypes without a mode switch), and their keys do not depend on the mode.
"""

from __future__ import annotations

import numpy as np

KEYS = {
    "K0": "random.PRNGKey(0)",
    "K42": "random.key(42)",
    "KF": "random.fold_in(random.split(random.PRNGKey(7), 3)[2], 11)",
}

# multivariate_normal's parameters: a mean, a covariance, a batch of two, a singular (rank-2) covariance
PARAMS = {
    "MEAN": "np.float32([1., -2., 0.5])",
    "COV": "np.float32([[2., .5, .1], [.5, 1., .2], [.1, .2, .5]])",
    "COVS": "np.float32([[[2., .5, .1], [.5, 1., .2], [.1, .2, .5]], [[1., 0., 0.], [0., 3., -1.], [0., -1., 1.]]])",
    "COV_RANK2": "np.float32([[1., 1., 0.], [1., 1., 0.], [0., 0., 2.]])",
}

_F32 = "np.float32"
DISTRIBUTIONS = [
    # bit for bit
    "random.bits(K0)",
    "random.bits(K0, (5,))",
    "random.bits(K42, (2, 3), np.uint8)",
    "random.bits(KF, (4,), np.uint16)",
    "random.uniform(K0, (7,))",
    "random.uniform(K42, (2, 3))",
    "random.uniform(KF, ())",
    "random.uniform(K0, (5,), np.float16)",
    "random.uniform(K0, (6,), minval=np.float32([-1, 0, 1, 2, 3, 4]), maxval=10.)",
    "random.uniform(K42, (2, 3), minval=-2., maxval=np.float32([[1.], [5.]]))",
    "random.randint(K0, (7,), 0, 10)",
    "random.randint(K42, (2, 4), -5, 100)",
    "random.randint(KF, (6,), np.int32([0, 1, 2, 3, 4, 5]), 50)",
    "random.randint(K0, (5,), 0, 256, np.uint8)",
    "random.randint(K0, (5,), -100, 100, np.int8)",
    "random.randint(K42, (4,), 3, 3)",
    "random.randint(KF, (5,), -2**31, 2**31 - 1)",
    # transforms: to float rounding
    "random.normal(K0, (7,))",
    "random.normal(K42, (2, 3))",
    "random.normal(KF)",
    "random.truncated_normal(K0, -1., 2., (7,))",
    "random.truncated_normal(K42, np.float32([-3., 0., 1.]), np.float32([3., 0.5, 4.]))",
    "random.bernoulli(K0, 0.3, (9,))",
    "random.bernoulli(K42, np.float32([0., 0.2, 0.5, 0.9, 1.]))",
    "random.bernoulli(KF, 0.5, (6,), mode='high')",
    "random.categorical(K0, np.float32([[0., 1., 2.], [3., -1., 0.5]]))",
    "random.categorical(K42, np.float32([[0., 1., 2.], [3., -1., 0.5]]), axis=0)",
    "random.categorical(KF, np.float32([0.1, 2., -1., 0.]), shape=(5,))",
    "random.categorical(K0, np.float32([[0., 1., 2.], [3., -1., 0.5]]), shape=(4, 2))",
    "random.categorical(K42, np.float32([[0., 1., 2., 0.], [3., -1., 0.5, 1.]]), shape=(3, 2), replace=False)",
    "random.permutation(K0, 10)",
    "random.permutation(K42, 2000)[:8]",
    "random.permutation(KF, np.float32([[0., 1., 2.], [3., 4., 5.]]), axis=1)",
    "random.permutation(K0, np.int32([[0, 1, 2], [3, 4, 5]]), 1, independent=True)",
    "random.choice(K0, 5, (3,))",
    "random.choice(K42, np.float32([[0., 1., 2.], [3., 4., 5.]]), (4,), axis=1)",
    "random.choice(KF, 6, (4,), replace=False)",
    "random.choice(K0, np.float32([1., 2., 3., 4., 5.]), (2, 2), replace=False)",
    "random.choice(K42, 4, (6,), p=np.float32([0.1, 0.2, 0.3, 0.4]))",
    "random.choice(KF, 4, (3,), replace=False, p=np.float32([0.1, 0.2, 0.3, 0.4]))",
    "random.multivariate_normal(K0, MEAN, COV)",
    "random.multivariate_normal(K42, MEAN, COV, (4,), method='svd')",
    "random.multivariate_normal(KF, MEAN, COV, (2, 2), method='eigh')",
    "random.multivariate_normal(K0, MEAN, COVS)",
    "random.multivariate_normal(K42, np.zeros((2, 3), np.float32), COV, (5, 2))",
    "random.multivariate_normal(KF, MEAN, COV_RANK2, (3,), method='eigh')",
    "random.multivariate_normal(K0, MEAN, COV_RANK2, (3,), method='svd')",
    "random.exponential(K0, (7,))",
    "random.laplace(K42, (7,))",
    "random.logistic(KF, (7,))",
    "random.gumbel(K0, (7,))",
    "random.gumbel(K42, (5,), mode='high')",
    "random.gumbel(KF, (6,), mode='highest')",
    "random.categorical(K0, np.float32([0.5, 1., -2.]), shape=(4,), mode='highest')",
    "random.cauchy(K0, (6,))",
    "random.rademacher(K42, (8,))",
    "random.rademacher(KF, (4,), np.int32)",
    "random.pareto(K0, np.float32([1., 2.5, 4.]))",
    "random.weibull_min(K42, 2., 1.5, (6,))",
    "random.rayleigh(KF, 1.5, (5,))",
    "random.lognormal(K0, 0.5, (5,))",
    "random.triangular(K42, 0., 1., 3., (6,))",
    "random.geometric(KF, 0.3, (6,))",
    "random.maxwell(K0, (5,))",
    "random.double_sided_maxwell(K42, 1., 2., (4,))",
    "random.wald(KF, 1.5, (5,))",
    # while loops
    "random.gamma(K0, np.float32([0.3, 1., 2.5, 10.]))",
    "random.gamma(KF, np.float32([0.5, 4.]), (3, 2))",
    "random.loggamma(K0, np.float32([0.05, 1., 7.]))",
    "random.beta(K42, 2., np.float32([0.5, 1., 3.]))",
    "random.dirichlet(K0, np.float32([[1., 1.], [0.2, 5.]]), (3, 2))",
    "random.chisquare(K42, np.float32([1., 3., 10.]))",
    "random.t(KF, np.float32([1., 4., 30.]))",
    "random.f(K0, 3., np.float32([2., 6., 20.]))",
    "random.generalized_normal(K42, 1.5, (5,))",
    "random.ball(KF, 3, 2., (2,))",
    "random.poisson(K0, 3., (8,))",
    "random.poisson(K42, np.float32([0., 0.5, 4., 12., 100.]))",
    "random.binomial(K0, 5., 0.3, (6,))",
    "random.binomial(KF, np.float32([3., 50., 200., 40.]), np.float32([0.2, 0.5, 0.9, 0.7]))",
    # keys
    "random.split(K0)",
    "random.split(K42, 3)",
    "random.split(KF, (2, 2))",
    "random.fold_in(K0, 5)",
    "random.fold_in(K42, 2**32 - 1)",
    "random.fold_in(KF, np.uint32(123))",
    "random.PRNGKey(42)",
    "random.PRNGKey(-1)",
    "random.PRNGKey(2**40 + 3)",
    "random.PRNGKey(np.int32(-7))",
    "random.PRNGKey(np.uint32(2**32 - 1))",
    "random.PRNGKey(np.int8(-2))",
    "random.PRNGKey(True)",
    "random.key_data(random.key(-9))",
    "random.key_data(random.wrap_key_data(np.uint32([1, 2])))",
    # transforms of the functions
    "jit(lambda k: random.normal(k, (4,)))(K0)",
    "vmap(lambda k: random.normal(k, (3,)))(random.split(K0, 4))",
    "vmap(lambda k: random.uniform(k, (2,)))(random.split(K42, 3))",
    "vmap(lambda k: random.gamma(k, 2., (2,)))(random.split(KF, 3))",
    "vmap(random.fold_in, in_axes=(None, 0))(K0, np.uint32([1, 2, 3]))",
    "jit(random.PRNGKey)(np.int32(-3))",
    "grad(lambda m, s: (random.normal(K0, (5,)) * s + m).sum(), argnums=(0, 1))(np.float32(1.), np.float32(2.))",
    "grad(lambda lo, hi: random.uniform(K42, (5,), minval=lo, maxval=hi).sum(), argnums=(0, 1))"
    "(np.float32(-1.), np.float32(3.))",
    "grad(lambda lo, hi: random.truncated_normal(KF, lo, hi, (5,)).sum(), argnums=(0, 1))"
    "(np.float32(-1.), np.float32(1.5))",
    "grad(lambda a: random.gamma(K0, a).sum())(np.float32([0.3, 1., 2.5, 10.]))",
    "grad(lambda a, b: random.beta(KF, a, b).sum(), argnums=(0, 1))(np.float32([2., 0.7]), np.float32([0.5, 3.]))",
    "grad(lambda a: random.dirichlet(K0, a)[0])(np.float32([1., 2., 0.5]))",
    "jit(lambda k, m, c: random.multivariate_normal(k, m, c, (2,)))(K42, MEAN, COV)",
    "vmap(lambda k: random.multivariate_normal(k, MEAN, COV, method='eigh'))(random.split(KF, 3))",
    "grad(lambda m, c: (random.multivariate_normal(K0, m, c, (4,)) ** 2).sum(), argnums=(0, 1))(MEAN, COV)",
    "grad(lambda c: random.multivariate_normal(K42, MEAN, c, (3,), method='svd').sum())(COV)",
    "grad(lambda c: random.multivariate_normal(KF, MEAN, c, (3,), method='eigh').sum())(COV)",
]

X64 = [
    "random.bits(K0, (5,), np.uint64)",
    "random.bits(KF, (2, 2), np.uint64)",
    "random.uniform(K0, (7,), np.float64)",
    "random.uniform(K42, (4,), np.float64, minval=np.float64(-3.), maxval=np.float64(5.))",
    "random.normal(K0, (7,), np.float64)",
    "random.randint(K0, (6,), np.int64(0), np.int64(10), np.int64)",
    "random.randint(K42, (5,), np.int64(-2**40), np.int64(2**50), np.int64)",
    "random.randint(KF, (5,), np.uint64(0), np.uint64(2**63), np.uint64)",
    "random.truncated_normal(KF, np.float64(-1.), np.float64(2.), (5,), np.float64)",
    "random.exponential(K0, (5,), np.float64)",
    "random.gumbel(K42, (5,), np.float64)",
    "random.multivariate_normal(K0, np.float64([1., -2., 0.5]), np.float64(COV), (2,), np.float64, 'svd')",
    "random.gamma(K0, np.float64([0.3, 1., 2.5, 10.]), dtype=np.float64)",
    "random.beta(KF, np.float64(2.), np.float64([0.5, 3.]), dtype=np.float64)",
    "random.binomial(K42, np.float64(30.), np.float64([0.1, 0.6]), dtype=np.float64)",
    "random.PRNGKey(np.int64(2**40 + 3))",
    "random.PRNGKey(np.int64(-5))",
    "random.PRNGKey(np.uint64(2**64 - 1))",
    "grad(lambda s: (random.normal(K0, (3,), np.float64) * s).sum())(np.float64(2.))",
    "grad(lambda a: random.gamma(K42, a, dtype=np.float64).sum())(np.float64([0.5, 2., 8.]))",
]

# recorded with x64 on and run under ember.enable_x64(): the defaults (float64, int64, uint64, 64-bit seeds)
X64_DEFAULTS = [
    "random.PRNGKey(2**40 + 3)",
    "random.PRNGKey(-1)",
    "random.key_data(random.key(-2**63))",
    "random.bits(K0, (4,))",
    "random.uniform(K0, (5,))",
    "random.uniform(K42, (4,), minval=-3., maxval=5.)",
    "random.normal(KF, (5,))",
    "random.randint(K0, (6,), 0, 10)",
    "random.randint(K42, (5,), -2**40, 2**50)",
    "random.gamma(K0, np.float64([0.3, 1., 2.5]))",
    "random.bernoulli(K42, 0.3, (6,))",
    "random.categorical(KF, np.float64([0.1, 2., -1., 0.]), shape=(5,))",
    "random.poisson(K0, 3., (6,))",
    "random.split(random.key(2**40 + 3), 2)",
    "random.fold_in(random.PRNGKey(2**33 + 1), 7)",
]

# A small JAX program written as JAX users write it (typed keys, split, initializers, dropout, jit of grad,
# vmap over keys); run with `jax` bound to the jax module and to ember, it must give the same numbers.
PROGRAM = """
def program(jax, jnp):
    key = jax.random.key(0)
    k_w, k_b, k_x, k_drop = jax.random.split(key, 4)
    w = jax.random.normal(k_w, (3, 2)) * 0.1
    b = jax.random.uniform(k_b, (2,), minval=-0.1, maxval=0.1)
    x = jax.random.truncated_normal(k_x, -2.0, 2.0, (8, 3))

    def loss(w, b, x, k):
        h = jnp.tanh(x @ w + b)
        keep = jax.random.bernoulli(k, 0.8, h.shape)
        return jnp.mean(jnp.where(keep, h / 0.8, 0.0) ** 2)

    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(w, b, x, k_drop)
    picks = jax.vmap(lambda k: jax.random.categorical(k, jnp.array([0.0, 1.0, 2.0])))(jax.random.split(k_drop, 5))
    ints = jax.random.randint(jax.random.fold_in(key, 3), (4,), 0, 100)
    return w, b, x, grads[0], grads[1], picks, ints
"""

assert len(set(DISTRIBUTIONS)) == len(DISTRIBUTIONS) and len(set(X64)) == len(X64)


def namespace(random, grad, vmap, jit) -> dict:
    """The names a case is evaluated with, its keys built from `random` itself."""
    ns = {"random": random, "np": np, "grad": grad, "vmap": vmap, "jit": jit}
    for name, expr in {**KEYS, **PARAMS}.items():
        ns[name] = eval(expr, ns)
    return ns
