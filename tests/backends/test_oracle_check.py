"""ember.config.check_oracle (on in the test suite): every compiled call is compared with the oracle,
the graph before optimization with the naive plan on the numpy backend."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.debug import check_against_oracle
from ember.backends.numpy import NumpyBackend


@pytest.fixture(autouse=True)
def _oracle_on(monkeypatch):
    monkeypatch.setattr(ember.config, "check_oracle", True)  # also when the suite runs with EMBER_CHECK_ORACLE=0
    monkeypatch.setenv("EMBER_BACKEND", "numpy")  # the tests make the numpy backend's executables wrong


def _wrap(monkeypatch, change):
    """Make the numpy backend's executables wrong: `change(args, outs)` edits each call's result."""
    real = NumpyBackend.compile

    def compile(self, graph, plan=None):
        exe = real(self, graph, plan)

        def run(*args):
            return change(args, exe(*args))

        return run

    monkeypatch.setattr(NumpyBackend, "compile", compile)


def _fresh():
    """A new function each time, so no test meets another's executable in jit's cache."""
    def scaled_tanh(x):
        return jnp.tanh(x) * 2.0

    return scaled_tanh


def test_a_wrong_executable_is_caught(monkeypatch, rng):
    def off_by_a_little(args, outs):
        return [outs[0] + 1e-3]

    _wrap(monkeypatch, off_by_a_little)
    x = rng.normal(size=(3, 4))
    with pytest.raises(AssertionError, match=r"scaled_tanh: output 0 of the optimized code differs from the oracle"
                                             r".*max error 0\.001"):
        ember.jit(_fresh())(x)


def test_a_written_input_is_caught_unless_donated(monkeypatch, rng):
    def writes_its_input(args, outs):
        args[0][0] = 99.0
        return outs

    _wrap(monkeypatch, writes_its_input)
    x = rng.normal(size=(3,))
    with pytest.raises(AssertionError, match="scaled_tanh: input 0 was written by the optimized code but is not "
                                             "donated"):
        ember.jit(_fresh())(x.copy())
    out = ember.jit(_fresh(), donate_argnums=0)(x.copy())  # a donated input may change
    np.testing.assert_allclose(out, np.tanh(x) * 2.0, rtol=1e-15)


def test_an_output_aliasing_an_input_is_caught(monkeypatch, rng):
    x = rng.normal(size=(3,))
    _wrap(monkeypatch, lambda args, outs: [np.copyto(args[0], outs[0]) or args[0]])
    with pytest.raises(AssertionError, match="output 0 shares memory with an input"):
        ember.jit(_fresh(), donate_argnums=0)(x.copy())


def test_an_output_aliasing_another_is_caught(monkeypatch, rng):
    x = rng.normal(size=(3,))
    _wrap(monkeypatch, lambda args, outs: [outs[0], np.asarray(outs[0])[::-1]])
    with pytest.raises(AssertionError, match="output 1 shares memory with an earlier output"):
        ember.jit(lambda x: (jnp.exp(x), jnp.exp(x)[::-1]))(x)


def test_the_oracle_itself_is_not_checked_again(monkeypatch, rng):
    """optimize=False on the numpy backend is the oracle: its calls are not doubled."""
    _wrap(monkeypatch, lambda args, outs: [outs[0] + 1.0])
    x = rng.normal(size=(3,))
    np.testing.assert_allclose(ember.jit(_fresh(), optimize=False)(x), np.tanh(x) * 2.0 + 1.0)


def test_the_switch_turns_it_off(monkeypatch, rng):
    _wrap(monkeypatch, lambda args, outs: [outs[0] + 1.0])
    monkeypatch.setattr(ember.config, "check_oracle", False)
    x = rng.normal(size=(3,))
    np.testing.assert_allclose(ember.jit(_fresh())(x), np.tanh(x) * 2.0 + 1.0)


@pytest.mark.parametrize("got,want,match", [
    (np.array([1, 2, 3]), np.array([1, 2, 4]), "1 of 3 elements differ \\(exact comparison\\)"),
    (np.array([True]), np.array([False]), "1 of 1 elements differ"),
    (np.array([1.0, np.nan]), np.array([1.0, 2.0]), "NaN in 1 other places"),
    (np.array([np.inf]), np.array([-np.inf]), "infinities differ"),
    (np.float32([1.0, 2.0]), np.float64([1.0, 2.0]), "float32\\[2\\] instead of float64\\[2\\]"),
    (np.float32([1.0, 1e6]), np.float32([1.0001, 1e6]), None),  # within 2e-5 of the largest magnitude
    (np.float32([1.0, 1.0]), np.float32([1.001, 1.0]), "max error 0.001"),
    (np.float64([1.0, np.nan, -np.inf]), np.float64([1.0 + 1e-13, np.nan, -np.inf]), None),
])
def test_comparison_rules(got, want, match):
    if match is None:
        check_against_oracle("f", [], [], [got], [want])
    else:
        with pytest.raises(AssertionError, match=match):
            check_against_oracle("f", [], [], [got], [want])


@pytest.mark.parametrize("env,expected", [("1", "True"), ("0", "False")])
def test_the_environment_variable_sets_the_default(env, expected):
    code = "import ember; print(ember.config.read('ember_check_oracle'))"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True,
                         env={**os.environ, "EMBER_CHECK_ORACLE": env})
    assert out.stdout.strip() == expected
