"""ember.nn's activations and helpers against jax.nn 0.10.2, whose answers tests/nn/record_jax.py
recorded in tests/nn/jax_values.json (the cases are in tests/nn/cases.py): values, dtypes and gradients
(jax.grad) on a grid through every kink and its float neighbours (relu, relu6 and log1mexp have their
own JVP rules; the others' gradients at the kinks follow from where/clip/maximum as in JAX), in float32
and float64; the softmax family's `where`, logsumexp's `b` and `return_sign`, standardize, glu and
one_hot; integer and bool inputs promoted as JAX promotes them; a few under jit and vmap on the LLVM
backend; errors naming the user's line; the AttributeError for jax.nn names Ember lacks."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.numpy as jnp
from ember.errors import ArgumentValueError, ConcretizationError
from tests.helpers import raises_naming
from tests.nn import cases as C

TOL = {"float32": 2e-6, "float64": 1e-13}


@pytest.fixture(autouse=True)
def numpy_backend(request, monkeypatch):
    """The comparisons with JAX run on the numpy backend, the reference (a tenth of the time: nothing
    to compile); test_jit_and_vmap_on_the_llvm_backend runs compiled code against it."""
    if "llvm" not in request.node.name:
        monkeypatch.setenv("EMBER_BACKEND", "numpy")


def assert_like(got, want: np.ndarray, tol: float, what: str = "") -> None:
    """Same dtype and shape as JAX's answer, values within `tol` (nan where it has nan)."""
    got = np.asarray(got)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), f"{what}: {got.dtype}{got.shape}, JAX " \
                                                               f"{want.dtype}{want.shape}"
    close = np.isclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    assert close.all(), f"{what}: {got[~close]} where JAX gives {want[~close]} (at {np.argwhere(~close).ravel()})"


def test_the_values_were_recorded_from_jax_0_10_2():
    assert C.recorded()["jax_version"] == "0.10.2"
    assert set(C.recorded()["elementwise"]) == {f"{cid}/{d}" for cid in C.ELEMENTWISE_IDS for d in C.FLOATS}


@pytest.mark.parametrize("dtype", C.FLOATS)
@pytest.mark.parametrize("cid", sorted(C.ELEMENTWISE_IDS))
def test_values_and_gradients_match_jax_through_the_kinks(cid, dtype):
    name, kw = C.ELEMENTWISE_IDS[cid]
    fn = getattr(nn, name)
    rec = C.recorded()["elementwise"][f"{cid}/{dtype}"]
    x = C.decode(rec["x"])
    np.testing.assert_array_equal(x, C.grid(dtype))
    with np.errstate(all="ignore"):
        assert_like(fn(x, **kw), C.decode(rec["values"]), TOL[dtype], f"{cid} values")
        grads = ember.vmap(ember.grad(lambda v: fn(v, **kw)))(x)
    assert_like(grads, C.decode(rec["grads"]), 10 * TOL[dtype], f"{cid} gradients")


@np.errstate(divide="ignore")  # log1mexp's rule at 0: 1 / expm1(0)
def test_the_kink_gradients_are_jax_rules():
    """JAX's gradients at the kinks, written out: relu6's rule is 0 at both ends; selects give the
    branch the comparison picks (hard_tanh 1 at +-1, leaky_relu and elu 1 at 0); clip splits a tie."""
    x = np.array([-6.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0])

    def grads(name):
        return np.asarray(ember.vmap(ember.grad(getattr(nn, name)))(x))

    np.testing.assert_array_equal(grads("relu6"), [0, 0, 0, 0, 1, 1, 0])
    np.testing.assert_array_equal(grads("hard_sigmoid"), np.array([0, 0, 1, 1, 1, 0, 0]) / 6)
    np.testing.assert_array_equal(grads("hard_tanh"), [0, 0, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(grads("leaky_relu")[3], 1.0)
    np.testing.assert_array_equal(grads("elu")[3], 1.0)
    np.testing.assert_array_equal(grads("sparse_sigmoid"), [0, 0, 0.25, 0.5, 0.25, 0, 0])
    np.testing.assert_array_equal(grads("sparse_plus"), [0, 0, 0, 0.5, 1, 1, 1])
    assert np.isinf(grads("log1mexp")[3])  # 1 / expm1(0): JAX's rule, not the nan of the branches


def _check_promotion(section: str, dtype: str, skip=()) -> list[str]:
    """Each function's result for an input of `dtype` against the recorded one, dtype and value (but
    `skip`); the names where JAX raises instead."""
    x = np.array(C.PROMOTION_INPUT, dtype)
    lenient = []
    for name in (n for n in C.PROMOTION_NAMES if n not in skip):
        want = C.recorded()[section][f"{name}/{dtype}"]
        if want is None:
            lenient.append(name)
            continue
        want = C.decode(want)
        with np.errstate(all="ignore"):
            got = getattr(nn, name)(x)
        if dtype == "uint8" and name in ("softmax", "log_softmax"):  # JAX subtracts the max in uint8,
            assert np.asarray(got).dtype == want.dtype, name          # which wraps: its dtype only
            continue
        assert_like(got, want, 1e-6, f"{name}({dtype})")
    return lenient


@pytest.mark.parametrize("dtype", C.PROMOTION_DTYPES)
def test_integer_and_bool_inputs_promote_as_jax(dtype):
    """Each function's result for integer input is JAX's, dtype and value (hard_tanh and identity keep
    integers, uint8 negates with wrap-around before log_sigmoid and log1mexp, int64 gives float64 as
    under JAX's x64). Where JAX raises (its sigmoid, and so silu and glu, reject integers), Ember takes
    the default float, as its sigmoid always has."""
    lenient = _check_promotion("promotion", dtype)
    assert {"sigmoid", "silu", "swish"} <= set(lenient)
    assert nn.silu(np.array([1, 2], dtype)).dtype == np.dtype(np.float64 if dtype == "int64" else np.float32)


@pytest.mark.parametrize("dtype", C.PROMOTION_X64_DTYPES)
def test_integer_inputs_in_64_bit_mode_as_jax(dtype):
    """In 64-bit mode int32 still becomes float32 where JAX promotes it alone (softplus, the softmax
    family), but float64 where a Python float meets it (relu6, elu, leaky_relu); one_hot's default
    dtype is float64."""
    with ember.enable_x64():
        # squareplus(bool): JAX squares a bool to int32 (then + 4 stays int32: float32); ember.numpy's
        # square keeps bool (+ 4 gives int64: float64)
        _check_promotion("promotion_x64", dtype, skip=("squareplus",) if dtype == "bool" else ())
        assert_like(nn.one_hot(np.array([0, 2], np.int32), 3), C.decode(C.recorded()["promotion_x64"]["one_hot"]), 0)


def test_parameters_broadcast_as_arrays():
    x = np.linspace(-2.0, 2.0, 6)
    alpha = np.array([0.5, 1.0, 2.0, 0.5, 1.0, 2.0])
    np.testing.assert_allclose(nn.elu(x, alpha), np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))), rtol=1e-14)
    np.testing.assert_allclose(nn.celu(x, alpha), np.maximum(x, 0) + alpha * np.expm1(np.minimum(x, 0) / alpha),
                               rtol=1e-14)
    np.testing.assert_allclose(nn.leaky_relu(x, alpha), np.where(x >= 0, x, alpha * x), rtol=1e-14)
    np.testing.assert_allclose(nn.squareplus(x, alpha), (x + np.sqrt(x * x + alpha)) / 2, rtol=1e-14)


# --- softmax, logsumexp and the reductions with `where` ---------------------------------------------

@pytest.mark.parametrize("what", sorted(C.REDUCTIONS))
@np.errstate(all="ignore")  # the mask's empty row: 0 / 0 and log(0)
def test_reductions_match_jax(what):
    fn = C.REDUCTIONS[what]
    for dtype in C.FLOATS:
        rec = C.recorded()["reductions"][f"{what}/{dtype}"]
        out = fn(nn, C.X.astype(dtype))
        outs = out if isinstance(out, tuple) else (out,)
        assert len(outs) == len(rec["values"])
        for got, want in zip(outs, rec["values"]):
            assert_like(got, C.decode(want), TOL[dtype], f"{what} ({dtype})")
    want = C.decode(rec["grad"])
    grad = ember.grad(C.weighted_loss(fn, nn, jnp, np.shape(C.first(out))))(C.X)
    assert_like(grad, want, 1e-12, f"{what} gradient")


@pytest.mark.parametrize("name", C.INFINITE_CASES)
def test_infinite_inputs_as_in_jax(name):
    """+inf makes the softmax family nan (as JAX documents), -inf drops out, all -inf gives nan/-inf."""
    want = C.decode(C.recorded()["reductions"][f"{name} infinite/float64"]["values"][0])
    with np.errstate(all="ignore"):
        assert_like(getattr(nn, name)(C.INFINITE, axis=-1), want, 1e-13, name)


# --- one_hot --------------------------------------------------------------------------------------

@pytest.mark.parametrize("cid", sorted(C.ONE_HOT))
def test_one_hot_matches_jax(cid):
    args, kw = C.ONE_HOT[cid]
    assert_like(nn.one_hot(*args, **kw), C.decode(C.recorded()["one_hot"][cid]), 0, f"one_hot {cid}")


def test_errors_name_the_users_line():
    here = "test_nn_functions.py"
    raises_naming(ConcretizationError, ember.jit(lambda n: nn.one_hot(np.arange(3), n)), 3, words=["num_classes"],
                  location=here)
    raises_naming(ArgumentValueError, lambda: nn.one_hot(np.arange(3), 3, axis=2), words=["axis 2"], location=here)
    raises_naming(ArgumentValueError, lambda: nn.glu(np.ones((2, 3))), words=["even", "3"], location=here)
    raises_naming(ArgumentValueError, lambda: nn.standardize(np.ones(3), algorithm="slow"), words=["'slow'"],
                  location=here)
    assert issubclass(ConcretizationError, TypeError) and issubclass(ArgumentValueError, ValueError)  # JAX's


# --- under jit and vmap on the default (LLVM) backend ---------------------------------------------

def test_jit_and_vmap_on_the_llvm_backend():
    """One compiled function of several activations (their own JVP rules included) and its gradient,
    and a vmap of one_hot and of a masked softmax, against the eager results."""
    assert ember.default_backend() == "llvm"
    x = C.grid(np.float32)

    def many(v):
        return nn.relu6(v), nn.log1mexp(v), nn.elu(v), nn.softplus(v), nn.hard_tanh(v), nn.sparse_plus(v)

    def total(v):
        return sum(jnp.sum(jnp.where(jnp.isfinite(o), o, 0.0)) for o in many(v))

    with np.errstate(all="ignore"):
        for got, want in zip(ember.jit(many)(x), many(x)):
            assert_like(got, np.asarray(want), 2e-6, "jit")
        assert_like(ember.jit(ember.grad(total))(x), np.asarray(ember.grad(total)(x)), 2e-6, "jit of grad")
    labels = np.array([[0, 1, 2], [2, 2, 0]], np.int32)
    assert_like(ember.jit(ember.vmap(lambda i: nn.one_hot(i, 3)))(labels), np.asarray(nn.one_hot(labels, 3)), 0)
    masked = ember.jit(ember.vmap(lambda v, w: nn.softmax(v, where=w)))(C.X, C.MASK)
    assert_like(masked, C.decode(C.recorded()["reductions"]["softmax where/float64"]["values"][0]), 1e-13)


# --- the names ------------------------------------------------------------------------------------

def test_every_jax_nn_name_is_here_or_explained():
    """Each public function of jax.nn is in ember.nn, or the AttributeError for it says jax.nn has it
    and what to use (the submodule `initializers` has tests/test_nn_initializers.py)."""
    for name in C.recorded()["names"]:
        if name == "initializers" or hasattr(nn, name):
            continue
        with pytest.raises(AttributeError, match=rf"not implemented in Ember yet \(JAX 0.10.2 has jax.nn.{name}\); "):
            getattr(nn, name)


def test_missing_names_say_whether_jax_nn_has_them():
    with pytest.raises(AttributeError, match=r"no attribute 'relux' \(nor has jax.nn\).*ember.nn.relu\b"):
        nn.relux  # noqa: B018
    with pytest.raises(AttributeError, match="standardize"):
        nn.normalize  # noqa: B018
    assert not hasattr(nn, "__wrapped__")


def test_the_new_functions_are_all_tested():
    from ember.nn import _functions

    public = {n for n, f in vars(_functions).items() if callable(f) and not n.startswith("_")
              and getattr(f, "__module__", "") == _functions.__name__}
    tested = set(C.ELEMENTWISE) | {k.split()[0] for k in C.REDUCTIONS} | {"one_hot"}
    helpers = {"default_float", "as_float", "masked", "count"}
    assert public - helpers <= tested, sorted(public - helpers - tested)
