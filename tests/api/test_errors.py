"""Error messages: each names what went wrong, how to fix it, and the user's line (this file)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp

HERE = "test_errors.py"


def next_line() -> str:
    """'test_errors.py:N' for the line after the caller's: put it right before the failing call."""
    return f"{HERE}:{sys._getframe(1).f_lineno + 1}"


def body_line(fn, offset: int = 1) -> str:
    """'test_errors.py:N' for line `offset` of `fn`'s body (1: the line after the `def`)."""
    return f"{HERE}:{fn.__code__.co_firstlineno + offset}"


# --- shapes and concretization ------------------------------------------------------------------

def test_shape_mismatch_names_op_shapes_and_line():
    def f(a, b):
        return a + b

    with pytest.raises(ember.errors.IncompatibleShapesError) as e:
        ember.jit(f)(np.ones((2, 3)), np.ones((4,)))
    msg = str(e.value)
    assert "add" in msg and "(2, 3)" in msg and "(4,)" in msg
    assert body_line(f) in msg


def test_matmul_shape_mismatch():
    def f(a, b):
        return a @ b

    with pytest.raises(ember.ShapeError) as e:
        ember.jit(f)(np.ones((2, 3)), np.ones((4, 5)))
    msg = str(e.value)
    assert "3" in msg and "4" in msg and body_line(f) in msg


def test_python_if_on_traced_value():
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(ember.ConcretizationError) as e:
        ember.jit(f)(1.0)
    msg = str(e.value)
    assert "bool" in msg and "ember.numpy.where" in msg and "static_argnums" in msg
    assert body_line(f) in msg


@pytest.mark.parametrize("convert, word", [(float, "float"), (int, "int"), (range, "index"), (bool, "bool")])
def test_python_conversions_of_traced_values(convert, word):
    def f(x):
        return convert(x)

    with pytest.raises(ember.ConcretizationError) as e:
        ember.jit(f)(np.array(3))
    msg = str(e.value)
    assert f"Python {word}" in msg and "ember.numpy.where" in msg and "static_argnums" in msg
    assert body_line(f) in msg


def test_numpy_function_on_traced_value_says_use_ember_numpy():
    def f(x):
        return np.asarray(x)

    with pytest.raises(ember.ConcretizationError) as e:
        ember.jit(f)(np.ones(2))
    assert "ember.numpy" in str(e.value) and body_line(f) in str(e.value)


# --- arguments and outputs ------------------------------------------------------------------------

@pytest.mark.parametrize("bad, type_name", [("a string", "str"), (object(), "object")])
def test_unsupported_argument_names_its_path(bad, type_name):
    f = ember.jit(lambda x, d: x)
    with pytest.raises(ember.ArgumentError) as e:
        loc = next_line()
        f(np.ones(1), {"b": [np.ones(1), bad]})
    msg = str(e.value)
    assert "argument 1['b'][1]" in msg and f"type {type_name}" in msg and "static_argnums" in msg
    assert loc in msg


def test_unsupported_argument_path_in_first_argument():
    f = ember.jit(lambda d: d["a"])
    with pytest.raises(ember.ArgumentError) as e:
        loc = next_line()
        f({"a": np.ones(1), "b": (np.ones(1), "oops")})
    assert "argument 0['b'][1]" in str(e.value) and loc in str(e.value)


def test_unsupported_argument_path_counts_static_arguments():
    f = ember.jit(lambda n, x, y: x, static_argnums=0)
    with pytest.raises(ember.ArgumentError) as e:
        f(3, np.ones(1), ["s"])
    assert "argument 2[0]" in str(e.value)


def test_unsupported_keyword_argument():
    f = ember.jit(lambda x, y=None: x)
    with pytest.raises(ember.ArgumentError) as e:
        f(np.ones(1), y={"k": "v"})
    assert "keyword argument 'y'['k']" in str(e.value)


def test_unsupported_argument_to_grad_and_vmap():
    with pytest.raises(ember.ArgumentError, match=r"argument 1\[0\] has type str"):
        ember.grad(lambda x, y: jnp.sum(x))(np.ones(2), ("s",))
    with pytest.raises(ember.ArgumentError, match=r"argument 0\['k'\] has type object"):
        ember.vmap(lambda d: d)({"k": object()})


@pytest.mark.parametrize("bad, type_name", [("text", "str"), (object(), "object")])
def test_non_array_output_names_its_path(bad, type_name):
    def f(x):
        return {"ok": x, "bad": [x, bad]}

    with pytest.raises(ember.ArgumentError) as e:
        ember.jit(f)(np.ones(2))
    msg = str(e.value)
    assert "returned" in msg and f"type {type_name}" in msg and "output ['bad'][1]" in msg
    assert f"{HERE}:" in msg


def test_non_array_top_level_output():
    with pytest.raises(ember.ArgumentError, match=r"type str at output \(top level\)"):
        ember.jit(lambda x: "done")(np.ones(2))


# --- grad -----------------------------------------------------------------------------------------

def test_grad_of_non_scalar_output():
    with pytest.raises(ember.TransformError) as e:
        loc = next_line()
        ember.grad(lambda x: x * 2)(np.ones(3))
    msg = str(e.value)
    assert "scalar" in msg and "f64[3]" in msg and "vjp" in msg and "jacrev" in msg and loc in msg


def test_grad_with_respect_to_integer_argument():
    with pytest.raises(ember.TransformError) as e:
        loc = next_line()
        ember.grad(lambda x, n: jnp.sum(x) * n, argnums=1)(np.ones(3), 2)
    msg = str(e.value)
    assert "floating-point" in msg and "argument 1" in msg and "int32" in msg and loc in msg


def test_grad_with_respect_to_integer_array_leaf():
    with pytest.raises(ember.TransformError, match=r"argument 0\['i'\] .* has dtype int64"):
        ember.grad(lambda d: jnp.sum(d["x"]))({"x": np.ones(2), "i": np.arange(2, dtype=np.int64)})


@pytest.mark.parametrize("argnums", [2, -3, (0, 5)])
def test_argnums_out_of_range(argnums):
    with pytest.raises(ember.TransformError) as e:
        loc = next_line()
        ember.grad(lambda x, y: jnp.sum(x * y), argnums=argnums)(np.ones(2), np.ones(2))
    msg = str(e.value)
    assert "out of range" in msg and "2 positional" in msg and "0..1" in msg and loc in msg


def test_grad_has_aux_without_pair():
    with pytest.raises(ember.TransformError, match=r"pair \(loss, aux\)"):
        ember.grad(lambda x: jnp.sum(x), has_aux=True)(np.ones(2))


def test_grad_of_integer_output():
    with pytest.raises(ember.TransformError, match="floating-point output"):
        ember.grad(lambda x: jnp.sum(x).astype(np.int32))(np.ones(2))


def test_vjp_cotangent_checks():
    _, pullback = ember.vjp(lambda x: {"a": x, "b": jnp.sum(x)}, np.ones(3))
    with pytest.raises(ember.errors.ArgumentValueError, match="structured like its output"):
        pullback({"a": np.ones(3)})
    with pytest.raises(ember.errors.ArgumentValueError, match=r"shape \(4,\), but the output has shape \(3,\)"):
        pullback({"a": np.ones(4), "b": 1.0})


# --- vmap -----------------------------------------------------------------------------------------

def test_vmap_inconsistent_batch_sizes():
    with pytest.raises(ember.errors.BatchingError) as e:
        loc = next_line()
        ember.vmap(lambda a, b: a + b["w"])(np.ones((3, 2)), {"w": np.ones((4, 2))})
    msg = str(e.value)
    assert "inconsistent" in msg and "argument 0 has size 3" in msg and "argument 1['w'] has size 4" in msg
    assert loc in msg


def test_vmap_in_axes_tree_mismatch_says_where():
    with pytest.raises(ember.errors.BatchingError) as e:
        loc = next_line()
        ember.vmap(lambda a, b: a["x"] + b, in_axes=({"y": 0}, 0))({"x": np.ones(3)}, np.ones(3))
    msg = str(e.value)
    assert "argument 0" in msg and "['y']" in msg and "['x']" in msg and "prefix" in msg and loc in msg
    with pytest.raises(ember.errors.BatchingError) as e:
        ember.vmap(lambda a, b: a + b, in_axes=(0, {"k": 0}))(np.ones(3), np.ones(3))
    assert "in_axes at argument 1 is a dict" in str(e.value) and "array of shape (3,)" in str(e.value)


def test_vmap_in_axes_wrong_length():
    with pytest.raises(ember.errors.BatchingError, match="in_axes has 3 entries but .* 2 positional"):
        ember.vmap(lambda a, b: a + b, in_axes=(0, 0, 0))(np.ones(3), np.ones(3))


def test_vmap_in_axes_out_of_range():
    with pytest.raises(ember.errors.BatchingError) as e:
        loc = next_line()
        ember.vmap(lambda a, b: a + b, in_axes=(0, 2))(np.ones((3, 2)), np.ones((3, 2)))
    msg = str(e.value)
    assert "in_axes=2" in msg and "argument 1" in msg and "(3, 2)" in msg and "-2..1" in msg and loc in msg


def test_vmap_out_axes_out_of_range():
    with pytest.raises(ember.errors.BatchingError) as e:
        loc = next_line()
        ember.vmap(lambda a: a * 2, out_axes=3)(np.ones((4, 2)))
    msg = str(e.value)
    assert "out_axes=3" in msg and "-2..1" in msg and loc in msg


def test_vmap_out_axes_none_for_batched_output():
    with pytest.raises(ember.errors.BatchingError) as e:
        loc = next_line()
        ember.vmap(lambda a: a * 2, out_axes=None)(np.ones((4, 2)))
    msg = str(e.value)
    assert "out_axes is None" in msg and loc in msg


def test_vmap_without_mapped_axis_needs_axis_size():
    with pytest.raises(ember.errors.BatchingError) as e:
        loc = next_line()
        ember.vmap(lambda a: a * 2, in_axes=None)(np.ones(3))
    msg = str(e.value)
    assert "axis_size" in msg and "None" in msg and loc in msg


def test_vmap_axis_size_disagrees_with_arguments():
    with pytest.raises(ember.errors.BatchingError, match="axis_size=5 but the mapped arguments have size 3"):
        ember.vmap(lambda a: a, axis_size=5)(np.ones(3))


# --- escaped tracers ------------------------------------------------------------------------------

def test_escaped_tracer_used_in_a_later_trace():
    saved = []

    def leak(x):
        saved.append(x)
        return x * 2

    ember.jit(leak)(np.ones(2))
    with pytest.raises(ember.TracerEscapeError) as e:
        ember.jit(lambda y: y + saved[0])(np.ones(2))
    assert "escaped" in str(e.value) and f"{HERE}:" in str(e.value)


def test_escaped_tracer_used_eagerly():
    saved = []
    ember.jit(lambda x: saved.append(x) or x)(np.ones(2))
    with pytest.raises(ember.TracerEscapeError) as e:
        loc = next_line()
        jnp.sin(saved[0])
    assert loc in str(e.value)


def test_escaped_tracer_passed_as_argument():
    saved = []
    ember.jit(lambda x: saved.append(x) or x)(np.ones(2))
    with pytest.raises(ember.TracerEscapeError, match="escaped"):
        ember.jit(lambda x: x + 1)(saved[0])


def test_errors_are_ember_errors_with_builtin_bases():
    assert issubclass(ember.ShapeError, TypeError) and issubclass(ember.ShapeError, ember.EmberError)
    assert issubclass(ember.ConcretizationError, TypeError)
    assert issubclass(ember.TracerEscapeError, TypeError)
    assert issubclass(ember.ArgumentError, TypeError)
    assert issubclass(ember.TransformError, TypeError)
    assert issubclass(ember.errors.BatchingError, ValueError)
    assert all(issubclass(c, ember.EmberError) for c in ember.errors.SHAPE_ERRORS)


# --- in-place assignment and missing JAX names ----------------------------------------------------

@pytest.mark.parametrize("key, text", [(0, "0"), ((0, slice(1, None)), "0, 1:"), ((Ellipsis, 2), "..., 2"),
                                       (slice(None, None, 2), "::2"), ([1, 2], "[1, 2]")])
def test_item_assignment_under_jit_points_to_at_set(key, text):
    def f(x):
        x[key] = 10.0
        return x

    with pytest.raises(TypeError) as e:
        ember.jit(f)(np.ones((3, 4)))
    msg = str(e.value)
    assert isinstance(e.value, ember.EmberError) and "immutable" in msg
    assert f"x.at[{text}].set(value)" in msg and body_line(f) in msg


@pytest.mark.parametrize("name", ["make_jaxpr", "eval_shape", "pmap", "shard_map"])
def test_missing_jax_names_say_ember_lacks_them(name):
    with pytest.raises(AttributeError, match=f"ember does not implement jax.{name} yet; "):
        getattr(ember, name)


def test_unknown_names_are_plain_attribute_errors():
    with pytest.raises(AttributeError, match="module 'ember' has no attribute 'no_such_thing'"):
        ember.no_such_thing  # noqa: B018
    assert not hasattr(ember, "pmap") and hasattr(ember, "vjp") and hasattr(ember, "jvp")


# --- inputs: NumPy subclasses become plain arrays, masked arrays are rejected -----------------------

MATRIX = np.matrix([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
PLAIN = np.asarray(MATRIX)


def _matrix_uses(x):
    return jnp.sum(x, axis=0), x[0], jnp.ravel(x), x * x


@pytest.mark.parametrize("mode", ["eager", "jit", "vmap"])
def test_numpy_matrix_arguments_behave_as_plain_arrays(mode):
    if mode == "eager":  # (x[0] and x * x are NumPy's own operators here)
        got = jnp.sum(MATRIX, axis=0), jnp.take(MATRIX, 0, axis=0), jnp.ravel(MATRIX), jnp.multiply(MATRIX, MATRIX)
        want = [np.sum(PLAIN, axis=0), PLAIN[0], np.ravel(PLAIN), PLAIN * PLAIN]
    elif mode == "jit":
        got, want = ember.jit(_matrix_uses)(MATRIX), [np.sum(PLAIN, axis=0), PLAIN[0], np.ravel(PLAIN), PLAIN * PLAIN]
    else:
        got, want = [ember.vmap(lambda r: r * 2.0)(MATRIX)], [PLAIN * 2.0]
    for g, w in zip(got, want):
        assert type(g) is ember.Array and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_numpy_matrix_gradients_are_plain_arrays():
    g = ember.grad(lambda x: jnp.sum(x[0] * x[1]))(MATRIX)
    assert type(g) is ember.Array and g.shape == (2, 2)
    np.testing.assert_array_equal(g, [[3.0, 4.0], [1.0, 2.0]])


@pytest.mark.parametrize("call", [lambda m: jnp.sum(m), lambda m: ember.jit(jnp.sum)(m),
                                  lambda m: ember.grad(jnp.sum)(m), lambda m: ember.vmap(jnp.sum)(m)],
                         ids=["eager", "jit", "grad", "vmap"])
def test_masked_arrays_are_rejected(call):
    masked = np.ma.array([[1.0, 2.0]], mask=[[0, 1]])
    with pytest.raises(ValueError, match=r"masked arrays are not supported.*filled") as e:
        call(masked)
    assert isinstance(e.value, ember.EmberError) and HERE in str(e.value)


# --- concretization errors name the argument and suggest what fits the transform ------------------

def _branchy(x, params, scale=1.0):
    if params["w"].sum() * scale > 0:
        return jnp.sum(x)
    return jnp.sum(x) * 2.0


ARGS = (np.ones(3, np.float32), {"w": np.ones(3, np.float32), "b": np.ones(3, np.float32)})


@pytest.mark.parametrize("transform, advice, absent", [
    (ember.jit, "static_argnums", "functools.partial"),
    # grad outside jit evaluates with values known (Python control flow works); inside jit it cannot
    (lambda f: ember.jit(ember.grad(f)), "functools.partial", "static_argnums"),
    (ember.vmap, "per example", "static_argnums"),
])
def test_concretization_error_names_the_argument_and_fits_the_transform(transform, advice, absent):
    with pytest.raises(ember.ConcretizationError) as e:
        transform(_branchy)(*ARGS)
    msg = str(e.value)
    assert "depends on argument `params['w']`" in msg and "`x`" not in msg and "['b']" not in msg
    assert advice in msg and absent not in msg and "ember.numpy.where" in msg
    assert body_line(_branchy) in msg


def test_provenance_follows_every_input_and_static_arguments_keep_names():
    def f(n, a, b, *rest):
        return float(a[0] + jnp.sum(rest[1]) * n)

    with pytest.raises(ember.ConcretizationError) as e:
        ember.jit(f, static_argnums=0)(2, np.ones(2), np.ones(2), np.ones(1), np.ones(1))
    assert "depends on arguments `a`, `rest[1]`" in str(e.value)


def test_conversion_to_numpy_names_the_argument():
    with pytest.raises(ember.ConcretizationError, match=r"depends on argument `y`.*ember\.numpy"):
        ember.jit(lambda x, y: np.asarray(y * 2.0))(np.ones(2), np.ones(2))


def test_a_value_of_no_argument_names_none():
    with pytest.raises(ember.ConcretizationError) as e:
        ember.jit(lambda x: bool(jnp.zeros(()) > 0) and x)(np.ones(2))
    assert "depends on" not in str(e.value)


def test_a_call_missing_an_argument_names_the_public_function():
    """`jnp.cumsum()` says "cumsum() missing ...", as JAX does, not the name of the factory or decorator
    that made the function (`_cumulative.<locals>.fn`)."""
    import inspect

    named = 0
    for module in (jnp, jnp.linalg, ember.nn, ember.random, ember.lax):
        for name in module.__all__:
            fn = getattr(module, name)
            if not callable(fn) or inspect.isclass(fn):
                continue
            try:
                fn()
            except TypeError as e:
                assert "<locals>" not in str(e) and "wrapper" not in str(e), (module.__name__, name, str(e))
                named += str(e).startswith(f"{name}()")
            except Exception:  # noqa: BLE001 (functions that take no argument, or raise their own error)
                pass
    assert named > 100
