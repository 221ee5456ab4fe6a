"""Issue 22 section 3: errors that name the user's line and the fix (each test failed before the fix)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import ember
import ember.nn
import ember.numpy as jnp

HERE = "test_errors_fix.py"


def next_line() -> str:
    """'test_errors_fix.py:N' for the line after the caller's."""
    return f"{HERE}:{sys._getframe(1).f_lineno + 1}"


# --- every transform checks its function argument -----------------------------------------------

@pytest.mark.parametrize("name", ["jit", "grad", "value_and_grad", "vmap", "jacrev", "jacobian", "hessian",
                                  "make_graph", "vjp"])
def test_transform_of_a_non_callable_raises_at_once(name):
    transform = getattr(ember, name)
    with pytest.raises(TypeError, match=rf"Expected a callable value: {name if name != 'jacobian' else 'jacrev'} "
                                        r"takes a function as its first argument, got int 3") as info:
        if name == "vjp":
            transform(3, 1.0)
        else:
            transform(3)
    assert HERE in str(info.value)


def test_jit_as_decorator_factory_still_works():
    f = ember.jit(static_argnums=1)(lambda x, n: x * n)
    np.testing.assert_array_equal(f(np.ones(2, np.float32), 3), [3.0, 3.0])


# --- concretization advice ------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda n: jnp.zeros(n), lambda n: jnp.ones((2, n)), lambda n: jnp.arange(n)])
def test_traced_shape_says_static_argnums(make):
    with pytest.raises(ember.ConcretizationError, match=r"static_argnums=.*static_argnames="):
        ember.jit(make)(3)


def test_static_shape_advice_works():
    f = ember.jit(lambda n: jnp.zeros(n), static_argnums=0)
    np.testing.assert_array_equal(f(3), np.zeros(3, np.float32))


# --- grad of a tuple ------------------------------------------------------------------------------

def test_grad_of_tuple_with_scalar_first_suggests_has_aux():
    with pytest.raises(ember.TransformError) as info:
        ember.grad(lambda x: (jnp.sum(x), x))(np.ones(3, np.float32))
    msg = str(info.value)
    assert "has_aux=True" in msg and "vjp or jacrev" in msg
    assert msg.index("has_aux=True") < msg.index("vjp or jacrev")


def test_grad_of_tuple_with_array_first_does_not_suggest_has_aux():
    with pytest.raises(ember.TransformError) as info:
        ember.grad(lambda x: (x, jnp.sum(x)))(np.ones(3, np.float32))
    assert "has_aux" not in str(info.value) and "vjp or jacrev" in str(info.value)


def test_grad_has_aux_as_suggested_works():
    g, aux = ember.grad(lambda x: (jnp.sum(x * x), x), has_aux=True)(np.ones(3, np.float32))
    np.testing.assert_allclose(g, 2 * np.ones(3))
    np.testing.assert_allclose(aux, np.ones(3))


# --- missing names in the submodules --------------------------------------------------------------

@pytest.mark.parametrize("module, name, close, fallback", [
    (jnp, "frexp", "ember.numpy.exp", "numpy.frexp"),
    (jnp, "sums", "ember.numpy.sum", None),
    (jnp.linalg, "eig", "ember.numpy.linalg.eigh", None),
    (jnp.linalg, "nrm", "ember.numpy.linalg.norm", None),
    (ember.nn, "gelus", "ember.nn.gelu", None),
])
def test_missing_submodule_name_explains(module, name, close, fallback):
    with pytest.raises(AttributeError) as info:
        getattr(module, name)
    msg = str(info.value)
    assert name in msg
    if close:
        assert close in msg
    if fallback:
        assert f"{module.__name__}.{name} is not implemented in Ember yet" in msg and fallback in msg


def test_missing_dunder_is_a_plain_attribute_error():
    assert not hasattr(jnp, "__wrapped__")
    assert not hasattr(ember.nn, "does_not_exist")


# --- Python ints wrap around as in JAX; what still fails says where --------------------------------

U8 = np.array([0, 1, 2], np.uint8)


@pytest.mark.parametrize("fn, want", [
    (lambda a: jnp.add(a, 300), [44, 45, 46]),           # jax.jit and jax.numpy give [44 45 46]
    (lambda a: jnp.subtract(a, 300), [212, 213, 214]),
    (lambda a: jnp.subtract(a, 1), [255, 0, 1]),
    (lambda a: jnp.multiply(a, 1000), [0, 232, 208]),
    (lambda a: jnp.maximum(a, 300), [44, 44, 44]),
    (lambda a: jnp.where(jnp.greater(a, 0), a, 300), [44, 1, 2]),
    (lambda a: jnp.full(3, 300, jnp.uint8), [44, 44, 44]),
    (lambda a: jnp.equal(a, 300), [False, False, False]),
])
@pytest.mark.parametrize("wrap", [lambda f: f, ember.jit], ids=["eager", "jit"])
def test_python_int_wraps_to_unsigned_as_jax(fn, want, wrap):
    out = wrap(fn)(U8)
    assert out.dtype == (np.bool_ if isinstance(want[0], bool) else np.uint8)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("fn, want", [
    (lambda a: a + 300, [44, 45, 46]),
    (lambda a: 300 - a, [44, 43, 42]),
    (lambda a: a.at[0].set(300), [44, 1, 2]),
    (lambda a: a.at[1].add(300), [0, 45, 2]),
])
@pytest.mark.parametrize("transform", ["jit", "vmap"])
def test_python_int_wraps_in_operators_under_transforms(fn, want, transform):
    out = (ember.jit(fn) if transform == "jit" else ember.vmap(fn))(U8[None] if transform == "vmap" else U8)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(np.ravel(out), want)


def test_python_int_wraps_to_signed_as_jax():
    np.testing.assert_array_equal(ember.jit(lambda a: a + 300)(np.array([0, 1], np.int8)), [44, 45])
    out = ember.jit(lambda a: a + 2**31)(np.array([0, 1], np.int32))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [-2**31, -2**31 + 1])


def test_int_beyond_64_bits_names_op_and_line():
    with pytest.raises(OverflowError, match=r"add: Python integer 1180591620717411303424 does not fit") as info:
        ember.jit(lambda a: a + 2**70)(U8)
    assert HERE in str(info.value)
    with pytest.raises(OverflowError, match="does not fit in 64 bits"):
        ember.jit(lambda a: a + 2**63)(np.array([1], np.int64))  # JAX (x64) raises too


def test_float_scalar_on_int_array_promotes():
    out = ember.jit(lambda a: a * 2.5)(U8)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [0.0, 2.5, 5.0])


def test_foreign_error_in_a_shape_rule_names_primitive_and_line(monkeypatch):
    from ember.tracer import prims as P
    from ember.tracer.primitive import shape_rules

    def broken(*avals, **params):
        raise ZeroDivisionError("boom")

    sin_p = next(p for p in shape_rules if p.name == "sin")
    monkeypatch.setitem(shape_rules, sin_p, broken)
    for wrap in (ember.jit, lambda f: f):
        with pytest.raises(ZeroDivisionError) as info:
            line = next_line()
            wrap(lambda x: P.sin(x))(np.ones(2, np.float32))
        notes = "\n".join(getattr(info.value, "__notes__", ()))
        assert "shape rule of sin" in notes and line in notes


# --- jnp.float32(x) is a cast ---------------------------------------------------------------------

CASTS = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "bool_"]


@pytest.mark.parametrize("name", CASTS)
def test_dtype_constructor_casts_a_traced_value(name):
    cast = getattr(jnp, name)
    x = np.array([0.0, 1.0, 2.5], np.float32)
    want = x.astype(np.dtype(name if name != "bool_" else "bool"))
    for transform in (ember.jit, ember.vmap):
        out = transform(lambda v: cast(v))(x)
        assert out.dtype == want.dtype
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("name", CASTS)
def test_dtype_constructor_on_concrete_value_is_a_0d_array(name):
    out = getattr(jnp, name)(1)
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.dtype(getattr(np, name))


def test_dtype_constructor_cast_keeps_the_gradient():
    g = ember.grad(lambda x: jnp.sum(jnp.float64(x) * 3.0))(np.ones(2, np.float32))
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [3.0, 3.0])


def test_dtype_constructors_still_work_as_dtypes():
    assert np.dtype(jnp.float32) == np.float32 and jnp.float32 == np.float32 and np.float32 == jnp.float32
    assert np.dtype("uint8") == jnp.uint8 and {np.int16: "x"}[jnp.int16] == "x"
    assert isinstance(np.float32(1), jnp.float32) and not isinstance(np.float64(1), jnp.float32)
    assert jnp.zeros(2, jnp.uint8).dtype == np.uint8 and np.ones(2, jnp.int8).dtype == np.int8
    assert ember.jit(lambda x: x.astype(jnp.float16))(np.ones(2)).dtype == np.float16


# --- traceback filtering --------------------------------------------------------------------------

def _misaligned(x):
    return jnp.dot(x, np.ones((4, 5), np.float32))


def _formatted(call) -> str:
    import traceback

    try:
        call()
    except Exception as e:  # noqa: BLE001 - the test formats whatever was raised
        return "".join(traceback.format_exception(e))
    raise AssertionError("no error raised")


def _ember_frames(text: str) -> list[str]:
    import os

    pkg = os.path.dirname(ember.__file__) + os.sep
    return [ln for ln in text.splitlines() if ln.strip().startswith("File ") and pkg in ln]


CALLS = {
    "jit(grad(f))": lambda: ember.jit(ember.grad(lambda x: jnp.sum(_misaligned(x))))(np.ones(3, np.float32)),
    "grad(f)": lambda: ember.grad(lambda x: jnp.sum(_misaligned(x)))(np.ones(3, np.float32)),
    "vmap(f)": lambda: ember.vmap(_misaligned)(np.ones((2, 3), np.float32)),
    "vjp(f)": lambda: ember.vjp(_misaligned, np.ones(3, np.float32)),
    "jit(vmap(f))": lambda: ember.jit(ember.vmap(_misaligned))(np.ones((2, 3), np.float32)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_traceback_hides_ember_frames(name, monkeypatch):
    monkeypatch.delenv("EMBER_TRACEBACK_FILTERING", raising=False)
    text = _formatted(CALLS[name])
    assert "ShapeError: dot: operand shapes" in text
    assert _ember_frames(text) == []
    assert f'{HERE}", line {_misaligned.__code__.co_firstlineno + 1}, in _misaligned' in text
    assert "in <lambda>" in text or name == "vmap(f)" or name == "vjp(f)"
    assert text.count("EMBER_TRACEBACK_FILTERING=off") == 1


def test_traceback_filtering_off_keeps_ember_frames(monkeypatch):
    monkeypatch.setenv("EMBER_TRACEBACK_FILTERING", "off")
    text = _formatted(CALLS["jit(grad(f))"])
    assert len(_ember_frames(text)) >= 5
    assert "EMBER_TRACEBACK_FILTERING" not in text
    assert f'{HERE}", line {_misaligned.__code__.co_firstlineno + 1}, in _misaligned' in text


def test_filtered_error_in_user_code_keeps_every_user_frame(monkeypatch):
    monkeypatch.delenv("EMBER_TRACEBACK_FILTERING", raising=False)

    def inner(x):
        raise KeyError("user bug")

    def outer(x):
        return inner(x) + 1

    text = _formatted(lambda: ember.jit(outer)(np.ones(2)))
    assert "in outer" in text and "in inner" in text and "KeyError: 'user bug'" in text
    assert _ember_frames(text) == []


def test_fallback_to_known_values_still_works_with_filtering():
    def f(x):
        return x * 2 if jnp.sum(x) > 0 else x
    np.testing.assert_array_equal(ember.grad(lambda x: jnp.sum(f(x)))(np.ones(2, np.float32)), [2.0, 2.0])


@pytest.mark.parametrize("transform", [ember.jit, ember.vmap, lambda f: ember.grad(lambda x: jnp.sum(f(x)))])
def test_foreign_error_inside_ember_names_function_and_user_line(transform):
    def f(x):
        return jnp.linalg.norm(x, ord="bogus", axis=(0, 1)) * x
    with pytest.raises(ValueError, match="invalid norm order") as info:
        transform(f)(np.ones((2, 3, 3), np.float32))
    notes = "\n".join(getattr(info.value, "__notes__", ()))
    assert "raised inside ember by norm, called at " in notes
    assert f"{HERE}:{f.__code__.co_firstlineno + 1}" in notes


def test_custom_vjp_and_its_rules_must_be_callable():
    with pytest.raises(TypeError, match=r"Expected a callable value: custom_vjp takes a function"):
        ember.custom_vjp(3)
    f = ember.custom_vjp(lambda x: x)
    with pytest.raises(TypeError, match=r"Expected a callable value: defvjp takes a function as bwd \(its second"):
        f.defvjp(lambda x: (x, None), "bwd")
