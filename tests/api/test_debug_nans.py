"""ember_debug_nans / ember_debug_infs (JAX's jax_debug_nans): a compiled function that makes a NaN
(inf) raises FloatingPointError naming the node, its primitive, the user's line, and the pass."""

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp


@pytest.fixture
def debug(monkeypatch):
    """Turn an option on for one test (monkeypatch restores it)."""

    def on(name):
        monkeypatch.setattr(ember.config, name.removeprefix("ember_"), ember.config.read(name))
        ember.config.update(name, True)

    return on


def _line(fn, marker: str) -> str:
    """'test_debug_nans.py:N' where N is the line of `fn` holding `marker`."""
    lines, start = inspect.getsourcelines(fn)
    n = next(start + i for i, text in enumerate(lines) if marker in text)
    return f"test_debug_nans.py:{n}"


def log_of(x):
    y = x * 2.0
    return jnp.log(y - 3.0)  # nan here


def sqrt_loss(x):
    return jnp.sum(jnp.sqrt(x) * 0.0)  # backward: 0 * inf


def safe_sqrt_loss(x):
    return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))  # the classic: forward fine, gradient nan


def _raises(fn, *args, words=()) -> str:
    with pytest.raises(FloatingPointError) as info:
        fn(*args)
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def test_forward_nan_names_primitive_and_line(debug):
    debug("ember_debug_nans")
    msg = _raises(ember.jit(log_of), np.array([1.0, 2.0]),
                  words=["invalid value (nan) encountered in log", _line(log_of, "nan here")])
    assert "backward" not in msg


def test_forward_nan_inside_grad_is_named_forward(debug):
    debug("ember_debug_nans")
    _raises(ember.value_and_grad(lambda x: jnp.sum(log_of(x))), np.array([1.0, 2.0]),
            words=["encountered in log", _line(log_of, "nan here"), "forward pass"])


@pytest.mark.parametrize("loss", [sqrt_loss, safe_sqrt_loss])
def test_nan_only_in_backward_is_named_backward(debug, loss):
    x = np.array([0.0, 4.0])
    assert np.isfinite(ember.jit(loss)(x))
    assert np.isnan(ember.grad(loss)(x)).any()  # silent without the option
    debug("ember_debug_nans")
    ember.jit(loss)(x)  # the forward pass alone is clean
    _raises(ember.grad(loss), x, words=["invalid value (nan)", "backward pass", _line(loss, "return")])
    _raises(ember.jit(ember.grad(loss)), x, words=["backward pass", _line(loss, "return")])


def test_inf_in_backward_with_debug_infs(debug):
    def f(x):
        return jnp.sum(jnp.sqrt(x))  # sqrt'(0) = inf

    x = np.array([0.0, 1.0])
    debug("ember_debug_nans")
    assert np.isinf(ember.grad(f)(x)).any()  # an inf is not a nan
    debug("ember_debug_infs")
    _raises(ember.grad(f), x, words=["invalid value (inf)", "backward pass", _line(f, "sqrt'(0)")])


def test_inputs_holding_nans_do_not_trigger(debug):
    debug("ember_debug_nans")
    debug("ember_debug_infs")
    x = np.array([np.nan, 1.0, np.inf])
    out = ember.jit(lambda x: x * 2.0 + 1.0)(x)
    assert np.isnan(out[0]) and np.isinf(out[2])
    assert np.isnan(ember.grad(lambda x: jnp.sum(x * x))(x)[0])


def test_vmap_and_vjp_paths(debug):
    debug("ember_debug_nans")
    xs = np.array([[1.0, 2.0], [0.5, 3.0]])
    _raises(ember.vmap(log_of), xs, words=["encountered in log", _line(log_of, "nan here")])
    _raises(ember.jit(ember.vmap(ember.grad(safe_sqrt_loss))), np.zeros((2, 2)),
            words=["backward pass", _line(safe_sqrt_loss, "return")])
    out, pullback = ember.vjp(safe_sqrt_loss, np.array([0.0, 1.0]))  # the forward is compiled alone
    assert np.isfinite(out)
    _raises(pullback, np.float64(1.0), words=["backward pass", _line(safe_sqrt_loss, "return")])


def test_clean_functions_and_disabled_option_do_not_raise(debug):
    f = ember.jit(log_of)
    assert np.isnan(f(np.array([1.0]))).all()  # off by default
    debug("ember_debug_nans")
    np.testing.assert_allclose(f(np.array([2.0])), np.log(1.0))
    with pytest.raises(FloatingPointError):
        f(np.array([1.0]))  # the same compiled function: the option is read on every call
    ember.config.update("ember_debug_nans", False)
    assert np.isnan(f(np.array([1.0]))).all()


def test_config_options_and_errors():
    assert ember.config.read("ember_debug_nans") is ember.config.debug_nans
    with pytest.raises(AttributeError, match="no config option 'ember_debug_nan'.*ember_debug_infs"):
        ember.config.update("ember_debug_nan", True)
    with pytest.raises(TypeError, match="takes a bool"):
        ember.config.update("ember_debug_nans", "yes")


@pytest.mark.parametrize("env, expected", [("1", "True True"), ("0", "False False")])
def test_environment_variables_set_the_defaults(env, expected):
    code = "import ember; print(ember.config.debug_nans, ember.config.read('ember_debug_infs'))"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True,
                         env={**os.environ, "EMBER_DEBUG_NANS": env, "EMBER_DEBUG_INFS": env})
    assert out.stdout.split() == expected.split()


def test_closed_over_arrays_are_inputs_but_constant_folding_is_seen_through(debug):
    debug("ember_debug_nans")
    data = np.array([np.nan, 1.0])
    out = ember.jit(lambda x: x + data)(np.ones(2))  # the user's own NaN: not raised on
    assert np.isnan(out[0])
    negative = np.array([-1.0, 1.0])

    def folded(x):
        return x + jnp.log(negative)  # small: simplify folds log(negative) into a const holding a nan

    assert "log" not in {n.prim.name for n in ember.jit(folded).lower(np.ones(2)).optimized.nodes}
    _raises(ember.jit(folded), np.ones(2), words=["encountered in log", _line(folded, "folds")])

    def literal(x):
        return x * np.nan  # a nan written in the program

    _raises(ember.jit(literal), np.ones(2), words=["encountered in mul", _line(literal, "written")])


def test_inner_gradient_stays_backward_under_grad_of_grad(debug):
    """In grad(grad(f)) the inner gradient's nodes keep their backward role through the outer
    linearization, so a NaN made there is reported in the backward pass."""

    def inner(x):
        return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))  # inner gradient: nan at 0

    def outer(x):
        return jnp.sum(ember.grad(inner)(x) * 0.0 + x)

    x = np.array([0.0, 4.0])
    debug("ember_debug_nans")
    _raises(ember.grad(outer), x, words=["invalid value (nan)", "backward pass", _line(inner, "inner gradient")])
