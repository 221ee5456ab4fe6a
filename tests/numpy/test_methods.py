"""Operators, methods and properties of traced values (ember/numpy/_methods.py), compared with the
same expression on NumPy arrays: arithmetic and reflected operators (with Python scalars, NumPy
scalars, NumPy arrays and lists on the left), comparisons, bitwise ops, .T/.shape/..., reductions
with axis/keepdims, astype, reshape (varargs and tuple), transpose, squeeze, ravel, clip, dot, len()
and iteration; plus gradients and vmap of the float ones.

Deliberate differences from NumPy (see test_promotion.py): `i_int32 / 2` and `i_int32 * 2.5` are
float32 (NumPy: float64); `x.astype(float)` is float32.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.numpy.cases import (
    A,
    Case,
    assert_matches,
    check_case_grads,
    check_vmap,
    expected_dtype,
    grad_params,
    vmap_params,
)

X, Y, W = A((2, 3)), A((3,), "f32", "nonzero"), A((3, 4))
P = A((2, 3), "f32", "pos")
I, J = A((2, 3), "i32"), A((3,), "i32", "nonzero")
B, C = A((2, 3), "bool"), A((3,), "bool")
N = np.array([0.5, -1.5, 2.0], np.float32)  # a NumPy operand on the left


def _c(note, fn, *args, dtype=None, grad=True, vmap=True):
    """A case whose expression `fn` means the same on NumPy arrays and on traced values."""
    return Case("method", fn, fn, args, dtype=dtype, grad=grad, vmap=vmap, note=note)


OPERATORS = [
    _c("x + y", lambda x, y: x + y, X, Y), _c("x - y", lambda x, y: x - y, X, Y), _c("x * y", lambda x, y: x * y, X, Y),
    _c("x / y", lambda x, y: x / y, X, Y), _c("x // y", lambda x, y: x // y, X, Y, grad=False),
    _c("x % y", lambda x, y: x % y, X, Y), _c("x ** 2", lambda x: x ** 2, X), _c("p ** y", lambda p, y: p ** y, P, Y),
    _c("x ** 0.5", lambda p: p ** 0.5, P), _c("x @ w", lambda x, w: x @ w, X, W),
    _c("y @ w.T", lambda y, w: y @ w.T, Y, X),
    _c("-x", lambda x: -x, X), _c("+x", lambda x: +x, X), _c("abs(x)", lambda x: abs(x), Y),
    _c("x < y", lambda x, y: x < y, X, Y), _c("x <= y", lambda x, y: x <= y, X, Y),
    _c("x > y", lambda x, y: x > y, X, Y),
    _c("x >= y", lambda x, y: x >= y, X, Y), _c("i == j", lambda x, y: x == y, I, J),
    _c("i != j", lambda x, y: x != y, I, J),
    _c("x == 0.5", lambda x: x == 0.5, X), _c("b & c", lambda b, c: b & c, B, C), _c("b | c", lambda b, c: b | c, B, C),
    _c("~b", lambda b: ~b, B), _c("i & j", lambda i, j: i & j, I, J), _c("i | j", lambda i, j: i | j, I, J),
    _c("~i", lambda i: ~i, I), _c("x > 0 & y", lambda x, c: (x > 0) & c, X, C),
    # integer arithmetic
    _c("i // 3", lambda i: i // 3, I), _c("i % -3", lambda i: i % -3, I), _c("i // j", lambda i, j: i // j, I, J),
    _c("i % j", lambda i, j: i % j, I, J), _c("i ** 2", lambda i: i ** 2, I), _c("-i", lambda i: -i, I),
    _c("abs(i)", lambda i: abs(i), I), _c("i + j", lambda i, j: i + j, I, J), _c("i * x", lambda i, x: i * x, I, X),
    _c("i / 2", lambda i: i / 2, I, dtype=np.float32), _c("i * 2.5", lambda i: i * 2.5, I, dtype=np.float32),
    _c("b + b", lambda b: b + b, B), _c("b * 2", lambda b: b * 2, B, dtype=np.int32),
    # reflected: Python scalars, NumPy scalars, NumPy arrays and lists on the left
    _c("2.0 + x", lambda x: 2.0 + x, X), _c("2 - x", lambda x: 2 - x, X), _c("3 * x", lambda x: 3 * x, X),
    _c("1.0 / y", lambda y: 1.0 / y, Y), _c("7 // y", lambda y: 7 // y, Y, grad=False), _c("5 % y", lambda y: 5 % y, Y),
    _c("2 ** x", lambda x: 2 ** x, X), _c("0.5 < x", lambda x: 0.5 < x, X), _c("n + x", lambda x: N + x, X),
    _c("n - x", lambda x: N - x, X), _c("n * x", lambda x: N * x, X), _c("n / y", lambda y: N / y, Y),
    _c("n // y", lambda y: N // y, Y, grad=False), _c("n % y", lambda y: N % y, Y),
    _c("|n| ** y", lambda y: abs(N) ** y, Y),
    _c("n @ w", lambda w: N @ w, W), _c("n < x", lambda x: N < x, X), _c("n == x", lambda x: N == x, X),
    _c("n >= x", lambda x: N >= x, X),
    _c("np.float32(2) * x", lambda x: np.float32(2.0) * x, X),
    _c("np.float64(2) * x", lambda x: np.float64(2.0) * x, X),
    _c("True & b", lambda b: True & b, B), _c("1 | i", lambda i: 1 | i, I), _c("10 - i", lambda i: 10 - i, I),
    _c("n[:, None] * x.T", lambda x: N[:, None] * x.T, X), _c("2 ** i", lambda j: 2 ** abs(j), J),
]

METHODS = [
    _c(".T", lambda x: x.T, A((2, 3, 4))), _c("y.T", lambda y: y.T, Y),
    _c(".reshape(3, 2)", lambda x: x.reshape(3, 2), X), _c(".reshape((3, 2))", lambda x: x.reshape((3, 2)), X),
    _c(".reshape(-1)", lambda x: x.reshape(-1), X), _c(".reshape(1, -1, 3)", lambda x: x.reshape(1, -1, 3), X),
    _c(".reshape([6], order='C')", lambda x: x.reshape([6], order="C"), X),
    _c(".reshape(())", lambda x: x.reshape(()), A((1,))),
    _c(".sum()", lambda x: x.sum(), X), _c(".sum(0)", lambda x: x.sum(0), X),
    _c(".sum(axis=(0, 1), keepdims=True)", lambda x: x.sum(axis=(0, 1), keepdims=True), X),
    _c("i.sum(axis=1)", lambda i: i.sum(axis=1), I, dtype=np.int32),
    _c(".mean(1)", lambda x: x.mean(1), X),
    _c(".mean(axis=-1, keepdims=True)", lambda x: x.mean(axis=-1, keepdims=True), X),
    _c(".max()", lambda x: x.max(), X), _c(".max(axis=-1, keepdims=True)", lambda x: x.max(axis=-1, keepdims=True), X),
    _c(".min(0)", lambda x: x.min(0), X), _c(".min(axis=(0, 1))", lambda x: x.min(axis=(0, 1)), X),
    _c(".prod()", lambda x: x.prod(), X),
    _c(".prod(axis=1, keepdims=True)", lambda x: x.prod(axis=1, keepdims=True), X),
    _c(".argmax()", lambda x: x.argmax(), X), _c(".argmax(axis=1)", lambda x: x.argmax(axis=1), X),
    _c(".argmax(0, keepdims=True)", lambda x: x.argmax(0, keepdims=True), X),
    _c(".argmin(-1)", lambda x: x.argmin(-1), X),
    _c(".var()", lambda x: x.var(), X), _c(".var(ddof=1)", lambda x: x.var(ddof=1), X),
    _c(".var(axis=0, keepdims=True)", lambda x: x.var(axis=0, keepdims=True), X),
    _c(".std(axis=1)", lambda x: x.std(axis=1), X),
    _c(".std(ddof=1, keepdims=True)", lambda x: x.std(ddof=1, keepdims=True), X),
    _c(".all()", lambda i: i.all(), I), _c(".any(axis=1)", lambda i: i.any(axis=1), I),
    _c(".astype(int32)", lambda x: x.astype(np.int32), X), _c(".astype(float64)", lambda x: x.astype(np.float64), X),
    _c(".astype(float)", lambda i: i.astype(float), I, dtype=np.float32),
    _c(".astype(bool)", lambda x: x.astype(bool), X), _c("b.astype(int8)", lambda b: b.astype(np.int8), B),
    _c(".transpose()", lambda x: x.transpose(), A((2, 3, 4))), _c(".transpose(1, 0)", lambda x: x.transpose(1, 0), X),
    _c(".transpose((2, 0, 1))", lambda x: x.transpose((2, 0, 1)), A((2, 3, 4))),
    _c(".transpose([1, 0])", lambda x: x.transpose([1, 0]), X),
    _c(".squeeze()", lambda x: x.squeeze(), A((1, 3, 1))), _c(".squeeze(0)", lambda x: x.squeeze(0), A((1, 3, 1))),
    _c(".squeeze(axis=(0, 2))", lambda x: x.squeeze(axis=(0, 2)), A((1, 3, 1))),
    _c(".ravel()", lambda x: x.ravel(), A((2, 3, 4))), _c(".flatten()", lambda x: x.flatten(), X),
    _c(".clip(-0.5, 0.5)", lambda x: x.clip(-0.5, 0.5), X), _c(".clip(min=0)", lambda x: x.clip(min=0.0), X),
    _c(".clip(max=y)", lambda x, y: x.clip(max=y), X, Y), _c(".dot(w)", lambda x, w: x.dot(w), X, W),
    _c("y.dot(y)", lambda y: y.dot(y), Y), _c(".swapaxes(0, 2)", lambda x: x.swapaxes(0, 2), A((2, 3, 4))),
    _c(".round(1)", lambda x: x.round(1), X, grad=False), _c(".round()", lambda x: x.round(), X, grad=False),
    _c(".copy()", lambda x: x.copy(), X), _c(".conj()", lambda x: x.conj(), X), _c(".real", lambda x: x.real, X),
    _c("x[1, ::-1]", lambda x: x[1, ::-1], X), _c("x[None, :, [0, 2]]", lambda x: x[None, :, [0, 2]], X),
    _c("len(x) * x", lambda x: len(x) * x, A((4, 2))),
    _c("iteration", lambda x: jnp.stack([row * k for k, row in enumerate(x)]) if not isinstance(x, np.ndarray)
       else np.stack([row * k for k, row in enumerate(x)]), A((3, 2))),
    _c("unpacking", lambda x: (lambda a, b, c: a * b - c)(*x), A((3, 2))),
    _c("shape/ndim/size/dtype", lambda x: x * (x.shape[0] + 10 * x.ndim + 100 * x.size)
       + (x.dtype == np.float32), A((2, 3))),
]
CASES = OPERATORS + METHODS


@pytest.mark.parametrize("case", [pytest.param(c, id=c.note) for c in CASES])
def test_traced_expression_matches_numpy(case):
    args = case.make_args(np.random.default_rng(0))
    with np.errstate(all="ignore"):
        want = case.ref(*args)
        got = ember.jit(case.fn)(*args)
    dtype = case.dtype or expected_dtype(np.asarray(want).dtype, [a.dtype for a in args])
    assert_matches(got, want, dtype, what=case.note)


def _float_only(cases):
    return [c for c in cases if all(a.dtype in ("f32", "f64") for a in c.args) and c.dtype is None]


@pytest.mark.parametrize("case", grad_params(_float_only(CASES)))
def test_gradients(case):
    check_case_grads(case)


# (argmax/argmin are left out: the loop runs NumPy's, which returns int64)
@pytest.mark.parametrize("case, mode", vmap_params([c for c in _float_only(CASES)
                                                    if c.note != "len(x) * x" and ".arg" not in c.note]))
def test_vmap(case, mode):
    check_vmap(case, mode)


def test_properties_are_static_python_values():
    seen = {}

    def f(x):
        seen.update(shape=x.shape, dtype=x.dtype, ndim=x.ndim, size=x.size, len=len(x), T=x.T.shape)
        return x

    ember.jit(f)(np.ones((2, 3, 4), np.float64))
    assert seen == {"shape": (2, 3, 4), "dtype": np.dtype(np.float64), "ndim": 3, "size": 24, "len": 2, "T": (4, 3, 2)}


@pytest.mark.parametrize("expr", [lambda x: bool(x), lambda x: int(x), lambda x: float(x), lambda x: x.item(),
                                  lambda x: x.tolist(), lambda x: range(x), lambda x: np.asarray(x),
                                  lambda x: 1 if x > 0 else 2],
                         ids=["bool", "int", "float", "item", "tolist", "index", "asarray", "if"])
def test_concrete_values_of_tracers_raise_concretization_error(expr):
    with pytest.raises(ember.ConcretizationError) as info:
        ember.jit(expr)(np.float32(1.0))
    assert "test_methods.py" in str(info.value)


def test_tracers_are_unhashable_and_len_of_a_scalar_fails():
    with pytest.raises(TypeError):
        ember.jit(lambda x: hash(x))(np.ones(2))
    with pytest.raises(TypeError):
        ember.jit(lambda x: len(x))(np.float32(1.0))
    with pytest.raises(TypeError):
        ember.jit(lambda x: list(x))(np.float32(1.0))


def test_unsupported_operands_return_not_implemented():
    with pytest.raises(TypeError):
        ember.jit(lambda x: x + "a")(np.ones(2))
    with pytest.raises(TypeError):
        ember.jit(lambda x: x @ object())(np.ones(2))
    assert ember.jit(lambda x: jnp.asarray(x == None))(np.ones(2)).item() is False  # noqa: E711


def test_numpy_functions_on_tracers_dispatch_to_ember():
    x = np.array([[1.0, -2.0], [3.0, 4.0]])
    got = ember.jit(lambda v: np.sum(np.exp(v), axis=0) + np.maximum(v, 0.5)[0] + np.abs(v).T[1])(x)
    np.testing.assert_allclose(got, np.sum(np.exp(x), axis=0) + np.maximum(x, 0.5)[0] + np.abs(x).T[1])
    with pytest.raises(ember.ConcretizationError, match="ember"):
        ember.jit(lambda v: np.add.reduce(v))(x)
