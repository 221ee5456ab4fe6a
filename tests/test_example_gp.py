"""examples/gaussian_process.py: its negative log marginal likelihood and gradient match SciPy's Cholesky
solve (and finite differences of it), the fit lowers the likelihood, and the file is JAX code: with JAX's
import lines it computes the same values."""

from __future__ import annotations

import importlib.util
import os
import types

import numpy as np
import pytest
import scipy.linalg

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "gaussian_process.py")
IMPORTS = {"import ember as jax  # was: import jax": "import jax",
           "import ember.numpy as jnp  # was: import jax.numpy as jnp": "import jax.numpy as jnp",
           "from ember.scipy.linalg import solve_triangular  # was: from jax.scipy.linalg import solve_triangular":
               "from jax.scipy.linalg import solve_triangular"}


def _ours():
    spec = importlib.util.spec_from_file_location("examples_gaussian_process", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scipy_nlml(log_params, x, y) -> float:
    """The same likelihood with SciPy: cho_factor / cho_solve and the log-determinant from the factor."""
    lengthscale, signal, noise = np.exp(log_params)
    k = signal ** 2 * np.exp(-0.5 * ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1) / lengthscale ** 2)
    k += (noise ** 2 + 1e-8) * np.eye(len(y))
    c = scipy.linalg.cho_factor(k, lower=True)
    alpha = scipy.linalg.cho_solve(c, y)
    return 0.5 * y @ alpha + np.log(np.diag(c[0])).sum() + 0.5 * len(y) * np.log(2 * np.pi)


def test_likelihood_and_gradient_match_scipy_and_the_fit_descends():
    gp = _ours()
    got = gp.main(steps=12, n=20, verbose=False)
    assert got["values"][-1] < got["values"][0] - 5
    x, y = got["x"], got["y"]
    point = np.log(np.array([0.7, 1.3, 0.3]))
    with gp.jax.enable_x64(True):
        value, grad = gp.step(point, x, y)
    np.testing.assert_allclose(value, scipy_nlml(point, x, y), rtol=1e-12)
    eps = 1e-6
    fd = [(scipy_nlml(point + eps * e, x, y) - scipy_nlml(point - eps * e, x, y)) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)


def test_the_example_is_jax_code():
    pytest.importorskip("jax")
    source = open(PATH).read()
    for line, jax_line in IMPORTS.items():
        assert line in source, "the example's import lines are the only difference from JAX code"
        source = source.replace(line, jax_line)
    theirs = types.ModuleType("gaussian_process_jax")
    theirs.__file__ = PATH
    exec(compile(source, PATH, "exec"), theirs.__dict__)
    want = theirs.main(steps=4, n=20, verbose=False)
    got = _ours().main(steps=4, n=20, verbose=False)
    np.testing.assert_allclose(got["values"], want["values"], rtol=1e-10)
