"""argnums in every transform that takes it: results follow the order argnums gives (any
permutation, negative positions from the end, pytree arguments); duplicates and out-of-range
positions raise a TypeError naming the problem."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.helpers import assert_tree_allclose

A, B, C = np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([0.5, -1.5])
ARGS = (A, B, C)
POWERS = (1, 2, 3)  # f = sum(a * b**2 * c**3): each argument's derivative differs


def f3(a, b, c):
    return jnp.sum(a * b**2 * c**3)


def f2(a, b):
    return jnp.sum(a * b**2)


def _term(args, i, order=0):
    """d^order/d(args[i])^order of args[i] ** POWERS[i], elementwise."""
    p, x = POWERS[i], args[i]
    coef = 1.0
    for k in range(order):
        coef *= p - k
    return coef * x ** (p - order) if p >= order else np.zeros_like(x)


def grad_ref(args, i):
    out = _term(args, i, 1)
    for k in range(len(args)):
        if k != i:
            out = out * _term(args, k)
    return out


def hess_ref(args, i, j):
    """d2 f / d args[i] d args[j] for the separable, elementwise f: a diagonal matrix."""
    d = np.ones_like(args[0])
    for k in range(len(args)):
        d = d * _term(args, k, (k == i) + (k == j))
    return np.diag(d)


PERMS = [p for n in (2, 3) for p in itertools.permutations(range(n))]


def _f(n):
    return f2 if n == 2 else f3


@pytest.mark.parametrize("perm", PERMS, ids=str)
@pytest.mark.parametrize("kind", ["tuple", "list"])
def test_grad_follows_argnums_order(perm, kind):
    args = ARGS[:len(perm)]
    argnums = tuple(perm) if kind == "tuple" else list(perm)
    got = ember.grad(_f(len(perm)), argnums=argnums)(*args)
    assert isinstance(got, tuple) and len(got) == len(perm)
    assert_tree_allclose(got, tuple(grad_ref(args, i) for i in perm))


@pytest.mark.parametrize("perm", PERMS, ids=str)
def test_jit_grad_and_value_and_grad_follow_argnums_order(perm):
    args = ARGS[:len(perm)]
    f = _f(len(perm))
    want = tuple(grad_ref(args, i) for i in perm)
    assert_tree_allclose(ember.jit(ember.grad(f, argnums=perm))(*args), want)
    value, got = ember.value_and_grad(f, argnums=perm)(*args)
    assert_tree_allclose(got, want)
    np.testing.assert_allclose(value, np.sum(np.prod([_term(args, k) for k in range(len(args))], axis=0)))


@pytest.mark.parametrize("perm", PERMS, ids=str)
def test_vmap_grad_follows_argnums_order(perm):
    args = ARGS[:len(perm)]
    batched = tuple(np.stack([x, 2 * x]) for x in args)
    got = ember.vmap(ember.grad(_f(len(perm)), argnums=perm))(*batched)
    for row in range(2):
        rows = tuple(x[row] for x in batched)
        assert_tree_allclose(tuple(g[row] for g in got), tuple(grad_ref(rows, i) for i in perm))


@pytest.mark.parametrize("perm", PERMS, ids=str)
@pytest.mark.parametrize("transform", ["jacrev", "jacobian"])
def test_jacrev_follows_argnums_order(perm, transform):
    args = ARGS[:len(perm)]
    got = getattr(ember, transform)(_f(len(perm)), argnums=perm)(*args)
    assert_tree_allclose(got, tuple(grad_ref(args, i) for i in perm))


@pytest.mark.parametrize("perm", PERMS, ids=str)
def test_hessian_blocks_follow_argnums_order(perm):
    args = ARGS[:len(perm)]
    H = ember.hessian(_f(len(perm)), argnums=perm)(*args)
    want = tuple(tuple(hess_ref(args, i, j) for j in perm) for i in perm)
    assert_tree_allclose(H, want)


def test_pytree_arguments_in_argnums_order():
    def f(p, q):
        return jnp.sum(p["w"] * q[0]) + jnp.sum(q[1] ** 2 * p["b"])

    p = {"w": np.array([1.0, 2.0]), "b": np.array(3.0)}
    q = (np.array([5.0, 7.0]), np.array([0.5, 1.5]))
    gq, gp = ember.grad(f, argnums=(1, 0))(p, q)
    assert_tree_allclose(gq, (p["w"], 2 * q[1] * p["b"]))
    assert_tree_allclose(gp, {"w": q[0], "b": np.sum(q[1] ** 2)})
    gq2, gp2 = ember.jacrev(f, argnums=(1, 0))(p, q)
    assert_tree_allclose((gq2, gp2), (gq, gp))


def test_negative_argnums_count_from_the_end():
    assert_tree_allclose(ember.grad(f3, argnums=-1)(*ARGS), grad_ref(ARGS, 2))
    assert_tree_allclose(ember.grad(f3, argnums=(-1, 0))(*ARGS), (grad_ref(ARGS, 2), grad_ref(ARGS, 0)))
    assert_tree_allclose(ember.hessian(f2, argnums=(-1, -2))(A, B),
                         ((hess_ref((A, B), 1, 1), hess_ref((A, B), 1, 0)),
                          (hess_ref((A, B), 0, 1), hess_ref((A, B), 0, 0))))


TRANSFORMS = [ember.grad, ember.value_and_grad, ember.jacrev, ember.hessian]


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("argnums", [(0, 0), (1, -2), [2, 0, 2]])
def test_duplicate_argnums_raise_type_error(transform, argnums):
    with pytest.raises(TypeError, match=r"names argument \d twice") as info:
        transform(f3, argnums=argnums)(*ARGS)
    assert "test_argnums.py" in str(info.value)
    assert isinstance(info.value, ember.TransformError)


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("argnums", [3, -4, (0, 5)])
def test_out_of_range_argnums_raise_type_error(transform, argnums):
    with pytest.raises(TypeError, match=r"out of range.*valid argnums are 0\.\.2 \(or -3\.\.-1") as info:
        transform(f3, argnums=argnums)(*ARGS)
    assert "test_argnums.py" in str(info.value)
