"""Every sampler against its exact distribution: Kolmogorov-Smirnov against scipy.stats' CDF for the
continuous ones, chi-square against the probabilities for the discrete ones, and the first two moments.
The keys are fixed, so each test is deterministic (derandomized): a p-value threshold of 1e-3 fails only
for a wrong distribution. One call (one compiled function, on the numpy backend) per test; the oracle
check is off here (these tests are about distributions, and test_jax_values.py runs every sampler with it).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import ember
import ember.random as random

N = 10_000


@pytest.fixture(autouse=True)
def numpy_backend_without_oracle(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    checking = ember.config.read("ember_check_oracle")
    ember.config.update("ember_check_oracle", False)
    yield
    ember.config.update("ember_check_oracle", checking)


def _key(name: str):
    return random.fold_in(random.key(2024), sum(map(ord, name)))


CONTINUOUS = {
    "uniform": (lambda k: random.uniform(k, (N,), minval=-1.0, maxval=3.0), stats.uniform(-1, 4)),
    "normal": (lambda k: random.normal(k, (N,)), stats.norm()),
    "normal64": (lambda k: random.normal(k, (N,), np.float64), stats.norm()),
    "truncated_normal": (lambda k: random.truncated_normal(k, -1.0, 2.0, (N,)), stats.truncnorm(-1, 2)),
    "exponential": (lambda k: random.exponential(k, (N,)), stats.expon()),
    "laplace": (lambda k: random.laplace(k, (N,)), stats.laplace()),
    "logistic": (lambda k: random.logistic(k, (N,)), stats.logistic()),
    "gumbel": (lambda k: random.gumbel(k, (N,)), stats.gumbel_r()),
    "gumbel_high": (lambda k: random.gumbel(k, (N,), mode="high"), stats.gumbel_r()),
    "gumbel_highest": (lambda k: random.gumbel(k, (N,), mode="highest"), stats.gumbel_r()),
    "cauchy": (lambda k: random.cauchy(k, (N,)), stats.cauchy()),
    "pareto": (lambda k: random.pareto(k, 3.0, (N,)), stats.pareto(3.0)),
    "weibull_min": (lambda k: random.weibull_min(k, 2.0, 1.5, (N,)), stats.weibull_min(1.5, scale=2.0)),
    "rayleigh": (lambda k: random.rayleigh(k, 1.5, (N,)), stats.rayleigh(scale=1.5)),
    "lognormal": (lambda k: random.lognormal(k, 0.5, (N,)), stats.lognorm(0.5)),
    "triangular": (lambda k: random.triangular(k, 0.0, 1.0, 3.0, (N,)), stats.triang(1 / 3, scale=3.0)),
    "maxwell": (lambda k: random.maxwell(k, (N,)), stats.maxwell()),
    "double_sided_maxwell": (lambda k: np.abs(random.double_sided_maxwell(k, 0.0, 1.0, (N,))), stats.maxwell()),
    "wald": (lambda k: random.wald(k, 1.5, (N,)), stats.invgauss(1.5)),
    "gamma_small": (lambda k: random.gamma(k, 0.3, (N,)), stats.gamma(0.3)),
    "gamma_one": (lambda k: random.gamma(k, 1.0, (N,)), stats.gamma(1.0)),
    "gamma_large": (lambda k: random.gamma(k, 3.5, (N,)), stats.gamma(3.5)),
    "loggamma": (lambda k: random.loggamma(k, 0.05, (N,)), stats.loggamma(0.05)),
    "beta": (lambda k: random.beta(k, 2.0, 0.5, (N,)), stats.beta(2.0, 0.5)),
    "dirichlet": (lambda k: random.dirichlet(k, np.float32([1.0, 2.0, 0.5]), (N,))[:, 0], stats.beta(1.0, 2.5)),
    "chisquare": (lambda k: random.chisquare(k, 3.0, (N,)), stats.chi2(3.0)),
    "t": (lambda k: random.t(k, 4.0, (N,)), stats.t(4.0)),
    "f": (lambda k: random.f(k, 3.0, 6.0, (N,)), stats.f(3.0, 6.0)),
    "generalized_normal": (lambda k: random.generalized_normal(k, 1.5, (N,)), stats.gennorm(1.5)),
    "ball_radius": (lambda k: np.linalg.norm(random.ball(k, 3, 2.0, (N,)), axis=-1) ** 3, stats.uniform()),
}
HEAVY_TAILED = {"cauchy", "pareto", "t", "f"}  # infinite (or near-infinite) variance: no moment check


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_samplers_have_their_distribution(name):
    sample, dist = CONTINUOUS[name]
    x = np.asarray(sample(_key(name)), np.float64)
    assert x.shape == (N,) and np.isfinite(x).all()
    assert stats.kstest(x, dist.cdf).pvalue > 1e-3
    if name not in HEAVY_TAILED:
        mean, var = dist.stats("mv")
        assert abs(x.mean() - mean) < 5 * np.sqrt(var / N)
        assert abs(x.var() / var - 1) < 0.1


def _chi_square_p(counts: np.ndarray, probs: np.ndarray) -> float:
    probs = np.asarray(probs, np.float64)
    return stats.chisquare(counts, probs / probs.sum() * counts.sum()).pvalue


def test_bernoulli_frequency():
    x = np.asarray(random.bernoulli(_key("bernoulli"), 0.3, (N,)))
    assert x.dtype == bool and _chi_square_p(np.bincount(x, minlength=2), np.array([0.7, 0.3])) > 1e-3
    high = np.asarray(random.bernoulli(_key("bernoulli_high"), 1e-3, (N,), mode="high"))
    assert abs(high.mean() - 1e-3) < 5 * np.sqrt(1e-3 / N)


def test_categorical_frequencies_follow_the_softmax():
    logits = np.float32([0.0, 1.0, -1.0, 2.0])
    probs = np.exp(logits) / np.exp(logits).sum()
    x = np.asarray(random.categorical(_key("categorical"), logits, shape=(N,)))
    assert _chi_square_p(np.bincount(x, minlength=4), probs) > 1e-3
    rows = np.asarray(random.categorical(_key("categorical_rows"), np.stack([logits, logits[::-1]]), axis=1,
                                         shape=(N // 2, 2)))
    assert _chi_square_p(np.bincount(rows[:, 1], minlength=4), probs[::-1]) > 1e-3


def test_categorical_without_replacement_draws_distinct_categories():
    logits = np.float32([0.0, 1.0, -1.0, 2.0, 0.5])
    draws = np.asarray(random.categorical(_key("no_replace"), np.tile(logits, (2000, 1)), shape=(3, 2000),
                                          replace=False))
    assert draws.shape == (3, 2000) and all(len(set(draws[:, j])) == 3 for j in range(2000))
    probs = np.exp(logits) / np.exp(logits).sum()
    assert _chi_square_p(np.bincount(draws[0], minlength=5), probs) > 1e-3  # the first draw is categorical


def test_randint_is_uniform():
    x = np.asarray(random.randint(_key("randint"), (N,), -3, 7))
    assert x.min() == -3 and x.max() == 6 and _chi_square_p(np.bincount(x + 3), np.ones(10)) > 1e-3
    u8 = np.asarray(random.randint(_key("randint8"), (N,), 0, 256, np.uint8))
    assert u8.dtype == np.uint8 and _chi_square_p(np.bincount(u8, minlength=256), np.ones(256)) > 1e-3


def test_bits_are_fair_coins():
    x = np.asarray(random.bits(_key("bits"), (N,)))
    ones = np.array([((x >> np.uint32(b)) & np.uint32(1)).sum() for b in range(32)])
    assert (np.abs(ones / N - 0.5) < 5 * 0.5 / np.sqrt(N)).all()


@pytest.mark.parametrize("lam", [3.0, 25.0])
def test_poisson_probabilities(lam):
    x = np.asarray(random.poisson(_key(f"poisson{lam}"), lam, (N,)))
    top = int(stats.poisson(lam).isf(5 / N))  # the tail pooled into one bin of >= 5 expected counts
    counts = np.bincount(np.minimum(x, top), minlength=top + 1)
    probs = stats.poisson(lam).pmf(np.arange(top + 1))
    probs[-1] += stats.poisson(lam).sf(top)
    assert x.dtype == np.int32 and _chi_square_p(counts, probs) > 1e-3


# BTRS evaluates its bound for candidates it then rejects (log of a negative number, as in JAX); the numpy
# backend computes those lanes too and NumPy warns
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")
@pytest.mark.parametrize("n, p", [(6, 0.3), (60, 0.6)])  # inversion (n p <= 10) and BTRS
def test_binomial_probabilities(n, p):
    x = np.asarray(random.binomial(_key(f"binomial{n}"), float(n), p, (N,))).astype(np.int64)
    lo, hi = int(stats.binom(n, p).ppf(5 / N)), int(stats.binom(n, p).isf(5 / N))
    counts = np.bincount(np.clip(x, lo, hi) - lo, minlength=hi - lo + 1)
    probs = stats.binom(n, p).pmf(np.arange(lo, hi + 1))
    probs[0], probs[-1] = stats.binom(n, p).cdf(lo), stats.binom(n, p).sf(hi - 1)
    assert _chi_square_p(counts, probs) > 1e-3


def test_geometric_and_rademacher_moments():
    g = np.asarray(random.geometric(_key("geometric"), 0.3, (N,)))
    assert g.min() >= 1 and abs(g.mean() - 1 / 0.3) < 5 * np.sqrt(0.7 / 0.09 / N)
    r = np.asarray(random.rademacher(_key("rademacher"), (N,)))
    assert set(np.unique(r)) == {-1, 1} and abs(r.mean()) < 5 / np.sqrt(N)
