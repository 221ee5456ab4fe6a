"""Ember raises the builtin exception class JAX raises for the same input, so `except TypeError`
written for JAX keeps working. Each row runs against ember, and against JAX too when it is installed."""

from __future__ import annotations

import inspect
import types

import numpy as np
import pytest

import ember


def _escaped(m):
    saved = []
    m.jit(lambda a: saved.append(a) or a)(1.0)
    return saved[0] + 1


def _setitem(a):
    a[0] = 10.0
    return a


# (id, code run with `m` = ember or jax, the builtin class JAX raises)
CASES = [
    ("broadcast in jit", lambda m: m.jit(lambda a, b: a + b)(np.ones((2, 3)), np.ones(4)), ValueError),
    ("broadcast eager", lambda m: m.numpy.add(np.ones((2, 3)), np.ones(4)), ValueError),
    # one rank: jax.numpy leaves the shapes to the primitive's check, a TypeError (the case)
    ("same-rank broadcast in jit", lambda m: m.jit(lambda a, b: a + b)(np.ones(3), np.ones(4)), TypeError),
    ("same-rank broadcast eager", lambda m: m.numpy.multiply(np.ones((2, 3)), np.ones((2, 4))), TypeError),
    ("where broadcast", lambda m: m.numpy.where(np.ones(3) > 0, np.ones(3), np.ones(4)), ValueError),
    ("matmul mismatch", lambda m: m.jit(lambda a, b: a @ b)(np.ones((2, 3)), np.ones((4, 5))), TypeError),
    ("dot mismatch", lambda m: m.numpy.dot(np.ones(3), np.ones(4)), TypeError),
    ("reshape size", lambda m: m.jit(lambda a: a.reshape(5))(np.ones((2, 3))), TypeError),
    ("concatenate shapes", lambda m: m.numpy.concatenate([np.ones((2, 3)), np.ones((2, 4))]), TypeError),
    ("transpose repeated", lambda m: m.numpy.transpose(np.ones((2, 3)), (0, 0)), TypeError),
    ("broadcast_to", lambda m: m.numpy.broadcast_to(np.ones(3), (4,)), ValueError),
    ("stack shapes", lambda m: m.numpy.stack([np.ones(3), np.ones(4)]), ValueError),
    ("split uneven", lambda m: m.numpy.split(np.ones(5), 2), ValueError),
    ("squeeze size 2", lambda m: m.numpy.squeeze(np.ones((2, 3)), 0), ValueError),
    ("einsum sizes", lambda m: m.numpy.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5))), ValueError),
    ("sum axis out of bounds", lambda m: m.jit(lambda a: a.sum(axis=2))(np.ones(3)), ValueError),
    ("take axis out of bounds", lambda m: m.numpy.take(np.ones(3), 0, axis=3), ValueError),
    ("max of empty", lambda m: m.numpy.max(np.ones(0)), ValueError),
    ("at set shape", lambda m: m.jit(lambda a: a.at[0:2].set(np.ones(3)))(np.ones(3)), ValueError),
    ("grad of non-scalar", lambda m: m.grad(lambda a: a * 2)(np.ones(3)), TypeError),
    ("grad of int input", lambda m: m.grad(lambda a: a * 1.0)(1), TypeError),
    ("grad of int output", lambda m: m.grad(lambda a: (a > 0).astype(int))(1.0), TypeError),
    ("grad argnums range", lambda m: m.grad(lambda a: a, argnums=3)(1.0), TypeError),
    ("grad of nextafter", lambda m: m.grad(lambda a: m.numpy.nextafter(a, 2.0))(1.0), NotImplementedError),
    ("traced bool", lambda m: m.jit(lambda a: 1.0 if a > 0 else 2.0)(1.0), TypeError),
    ("traced int", lambda m: m.jit(lambda a: int(a))(1.0), TypeError),
    ("traced item", lambda m: m.jit(lambda a: a.item())(1.0), TypeError),
    ("traced np.asarray", lambda m: m.jit(lambda a: np.asarray(a))(np.ones(2)), TypeError),
    ("len of 0-d", lambda m: m.jit(lambda a: len(a))(1.0), TypeError),
    ("escaped tracer", _escaped, TypeError),
    ("setitem in jit", lambda m: m.jit(_setitem)(np.ones(3)), TypeError),
    ("unhashable static", lambda m: m.jit(lambda a, n: a, static_argnums=1)(1.0, [1]), ValueError),
    ("masked array in jit", lambda m: m.jit(lambda a: a)(np.ma.array([1.0, 2.0], mask=[0, 1])), ValueError),
    ("masked array eager", lambda m: m.numpy.sum(np.ma.array([1.0, 2.0], mask=[0, 1])), ValueError),
    ("sum of a list", lambda m: m.numpy.sum([1, 2, 3]), TypeError),
    ("traced bool mask", lambda m: m.jit(lambda a: a[a > 0])(np.ones(3)), IndexError),
    ("too many indices", lambda m: m.jit(lambda a: a[0, 0])(np.ones(3)), IndexError),
    ("two ellipses", lambda m: m.jit(lambda a: a[..., ...])(np.ones(3)), IndexError),
    ("float index", lambda m: m.jit(lambda a: a[np.array([1.0])])(np.ones(3)), TypeError),
    ("unsupported dtype", lambda m: m.numpy.ones(3, dtype="foo"), TypeError),
    ("vmap sizes", lambda m: m.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4)), ValueError),
    ("vmap in_axes range", lambda m: m.vmap(lambda a: a, in_axes=2)(np.ones(3)), ValueError),
    ("vmap returns str", lambda m: m.vmap(lambda a: "s")(np.ones(3)), TypeError),
    ("jit string argument", lambda m: m.jit(lambda a: a)("abc"), TypeError),
    ("jit returns str", lambda m: m.jit(lambda a: "x")(1.0), TypeError),
    ("jit unknown keyword", lambda m: m.jit(lambda a: a)(b=1.0), TypeError),
    ("vjp cotangent shape", lambda m: m.vjp(lambda a: a * 2.0, np.ones(3))[1](np.ones(4)), ValueError),
    ("vjp cotangent structure", lambda m: m.vjp(lambda a: (a * 2.0, a), np.ones(3))[1](np.ones(3)), ValueError),
]
_IDS = [c[0] for c in CASES]
_BUILTINS = (TypeError, ValueError, IndexError)


def _jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    return types.SimpleNamespace(jit=jax.jit, grad=jax.grad, vmap=jax.vmap, vjp=jax.vjp, numpy=jnp)


@pytest.mark.parametrize("code, cls", [c[1:] for c in CASES], ids=_IDS)
def test_ember_raises_jax_builtin_class(code, cls):
    with pytest.raises(Exception) as e:
        code(ember)
    assert isinstance(e.value, cls)
    assert not any(isinstance(e.value, other) for other in _BUILTINS if not issubclass(cls, other))


@pytest.mark.parametrize("code, cls", [c[1:] for c in CASES], ids=_IDS)
def test_table_matches_jax(code, cls):
    with pytest.raises(Exception) as e:
        code(_jax())
    assert isinstance(e.value, cls)


# --- lists where arrays are expected (jax.numpy rejects them: a hidden conversion on every call) ----

_NOT_ARRAY_FUNCTIONS = {"array", "asarray", "arange", "empty", "eye", "full", "identity", "linspace", "ones",
                        "zeros", "shape", "ndim", "size", "dtype", "ndarray",
                        "tri", "indices",
                        "can_cast", "issubdtype", "promote_types", "result_type"}


def _public_functions():
    import ember.numpy as enp
    from ember.numpy._core import ARRAY_PARAMS

    names = [n for n in enp.__all__ if callable(getattr(enp, n)) and not isinstance(getattr(enp, n), type)]
    return enp, ARRAY_PARAMS, names + ["norm"]


def test_every_public_function_says_which_parameters_are_arrays():
    _, params, names = _public_functions()
    assert sorted(n for n in names if n not in params and n not in _NOT_ARRAY_FUNCTIONS) == []


@pytest.mark.parametrize("name", sorted(_public_functions()[1]))
def test_a_list_operand_is_a_type_error_saying_to_wrap_it(name):
    enp, params, _ = _public_functions()
    fn = getattr(enp.linalg, name) if name in enp.linalg.__all__ else getattr(enp, name)
    a, lst = np.ones((2, 2), np.float32), [[1.0, 2.0], [3.0, 4.0]]
    spec = params[name]
    one = len(inspect.signature(fn).parameters) == 1  # (sin takes one operand: sin(a, lst) is an arity error)
    args = ([a, lst],) if spec == "seq" else (lst,) if spec == (0,) or one else (a, lst)
    with pytest.raises(TypeError, match=r"asarray.*np\.array") as e:
        fn(*args)
    assert isinstance(e.value, ember.EmberError) and "test_exception_classes.py" in str(e.value)
    with pytest.raises(TypeError, match="asarray"):
        ember.jit(lambda x: fn(*[x if y is a else y for y in args]) if spec != "seq" else fn([x, lst]))(a)


def test_a_list_operand_of_a_traced_operator_is_a_type_error():
    for op in (lambda x: x + [1.0, 2.0], lambda x: [1.0, 2.0] * x, lambda x: x == [1.0, 2.0]):
        with pytest.raises(TypeError):
            ember.jit(op)(np.ones(2))
