"""Layout primitives (broadcast_in_dim, reshape, transpose, concatenate, pad, slice, rev, iota):
numpy reference and shape/dtype rule, rule errors, VJPs against finite differences, batching rules
against a Python loop. References are written element by element, independent of NumPy's own
broadcast/pad/flip used by the primitives' numpy rules.
"""

import numpy as np
import pytest

import ember
from ember.errors import DTypeError, ShapeError
from ember.tracer import prims as P
from tests.helpers import check_grads, loop_vmap, prim_names, raises_naming, run, vmap_checker

F32, F64, I32, U8, BOOL = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.uint8, bool))
DTYPES = (F32, F64, I32, BOOL)
THIS_FILE = "test_prims_layout.py"


def sample(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def total(x, w):
    return P.reduce_sum(P.mul(x, w), tuple(range(len(w.shape))))


def check(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


# --- independent references ----------------------------------------------------------------------

def ref_broadcast(x, shape, bd):
    out = np.empty(shape, x.dtype)
    for idx in np.ndindex(*shape):
        out[idx] = x[tuple(0 if x.shape[i] == 1 else idx[d] for i, d in enumerate(bd))]
    return out


def ref_reshape(x, shape):
    flat = [x[idx] for idx in np.ndindex(*x.shape)]
    out = np.empty(shape, x.dtype)
    for k, idx in enumerate(np.ndindex(*shape)):
        out[idx] = flat[k]
    return out


def ref_transpose(x, perm):
    out = np.empty(tuple(x.shape[p] for p in perm), x.dtype)
    for idx in np.ndindex(*out.shape):
        src = [0] * x.ndim
        for j, p in enumerate(perm):
            src[p] = idx[j]
        out[idx] = x[tuple(src)]
    return out


def ref_concatenate(xs, dim):
    shape = list(xs[0].shape)
    shape[dim] = sum(x.shape[dim] for x in xs)
    out = np.empty(shape, xs[0].dtype)
    offset = 0
    for x in xs:
        for idx in np.ndindex(*x.shape):
            dst = list(idx)
            dst[dim] += offset
            out[tuple(dst)] = x[idx]
        offset += x.shape[dim]
    return out


def ref_pad(x, value, config):
    shape = tuple(lo + hi + d + max(d - 1, 0) * i for d, (lo, hi, i) in zip(x.shape, config))
    out = np.full(shape, value, x.dtype)
    for idx in np.ndindex(*x.shape):
        out[tuple(lo + k * (i + 1) for k, (lo, _, i) in zip(idx, config))] = x[idx]
    return out


def ref_slice(x, start, limit, strides):
    shape = tuple(len(range(s, l, st)) for s, l, st in zip(start, limit, strides))
    out = np.empty(shape, x.dtype)
    for idx in np.ndindex(*shape):
        out[idx] = x[tuple(s + k * st for k, s, st in zip(idx, start, strides))]
    return out


def ref_rev(x, dims):
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape):
        out[idx] = x[tuple(x.shape[a] - 1 - k if a in dims else k for a, k in enumerate(idx))]
    return out


def ref_iota(dtype, shape, dim):
    out = np.empty(shape, dtype)
    for idx in np.ndindex(*shape):
        out[idx] = idx[dim]
    return out


# (name, operand shapes, wrapper taking the operands, reference taking numpy operands)
CASES = [
    ("broadcast_in_dim", [()], lambda x: P.broadcast_in_dim(x, (2, 3), ()), lambda x: ref_broadcast(x, (2, 3), ())),
    ("broadcast_in_dim", [(3,)], lambda x: P.broadcast_in_dim(x, (2, 3), (1,)),
     lambda x: ref_broadcast(x, (2, 3), (1,))),
    ("broadcast_in_dim", [(2,)], lambda x: P.broadcast_in_dim(x, (2, 3), (0,)),
     lambda x: ref_broadcast(x, (2, 3), (0,))),
    ("broadcast_in_dim", [(1, 3)], lambda x: P.broadcast_in_dim(x, (2, 4, 3), (1, 2)),
     lambda x: ref_broadcast(x, (2, 4, 3), (1, 2))),
    ("broadcast_in_dim", [(2, 1)], lambda x: P.broadcast_in_dim(x, (2, 5), (0, 1)),
     lambda x: ref_broadcast(x, (2, 5), (0, 1))),
    ("broadcast_in_dim", [()], lambda x: P.broadcast_in_dim(x, (0, 3), ()), lambda x: ref_broadcast(x, (0, 3), ())),
    ("broadcast_in_dim", [(0, 3)], lambda x: P.broadcast_in_dim(x, (2, 0, 3), (1, 2)),
     lambda x: ref_broadcast(x, (2, 0, 3), (1, 2))),
    ("broadcast_in_dim", [(1,)], lambda x: P.broadcast_in_dim(x, (0,), (0,)), lambda x: ref_broadcast(x, (0,), (0,))),
    ("reshape", [(2, 3, 4)], lambda x: P.reshape(x, (6, 4)), lambda x: ref_reshape(x, (6, 4))),
    ("reshape", [(6,)], lambda x: P.reshape(x, (2, 3)), lambda x: ref_reshape(x, (2, 3))),
    ("reshape", [()], lambda x: P.reshape(x, (1, 1)), lambda x: ref_reshape(x, (1, 1))),
    ("reshape", [(1, 1)], lambda x: P.reshape(x, ()), lambda x: ref_reshape(x, ())),
    ("reshape", [(0, 3)], lambda x: P.reshape(x, (3, 0, 2)), lambda x: ref_reshape(x, (3, 0, 2))),
    ("reshape", [(2, 3, 4)], lambda x: P.reshape(x, (4, 3, 2)), lambda x: ref_reshape(x, (4, 3, 2))),
    ("transpose", [(2, 3, 4)], lambda x: P.transpose(x, (2, 0, 1)), lambda x: ref_transpose(x, (2, 0, 1))),
    ("transpose", [(2, 3, 4)], lambda x: P.transpose(x, (0, 2, 1)), lambda x: ref_transpose(x, (0, 2, 1))),
    ("transpose", [(0, 3)], lambda x: P.transpose(x, (1, 0)), lambda x: ref_transpose(x, (1, 0))),
    ("transpose", [(5,)], lambda x: P.transpose_p.bind(x, permutation=(0,)), lambda x: ref_transpose(x, (0,))),
    ("concatenate", [(2, 3), (4, 3)], lambda a, b: P.concatenate([a, b], 0),
     lambda a, b: ref_concatenate([a, b], 0)),
    ("concatenate", [(2, 1), (2, 0), (2, 3)], lambda a, b, c: P.concatenate([a, b, c], 1),
     lambda a, b, c: ref_concatenate([a, b, c], 1)),
    ("concatenate", [(2, 3, 4), (2, 1, 4)], lambda a, b: P.concatenate([a, b], 1),
     lambda a, b: ref_concatenate([a, b], 1)),
    ("concatenate", [(0, 3), (2, 3)], lambda a, b: P.concatenate([a, b], 0),
     lambda a, b: ref_concatenate([a, b], 0)),
    ("concatenate", [(3,), (2,), (1,)], lambda a, b, c: P.concatenate([a, b, c], 0),
     lambda a, b, c: ref_concatenate([a, b, c], 0)),
    ("pad", [(3,), ()], lambda x, v: P.pad(x, v, ((1, 2, 0),)), lambda x, v: ref_pad(x, v, ((1, 2, 0),))),
    ("pad", [(3,), ()], lambda x, v: P.pad(x, v, ((0, 0, 2),)), lambda x, v: ref_pad(x, v, ((0, 0, 2),))),
    ("pad", [(2, 3), ()], lambda x, v: P.pad(x, v, ((1, 0, 1), (0, 2, 3))),
     lambda x, v: ref_pad(x, v, ((1, 0, 1), (0, 2, 3)))),
    ("pad", [(0, 3), ()], lambda x, v: P.pad(x, v, ((1, 1, 2), (0, 0, 0))),
     lambda x, v: ref_pad(x, v, ((1, 1, 2), (0, 0, 0)))),
    ("pad", [(1,), ()], lambda x, v: P.pad(x, v, ((2, 1, 5),)), lambda x, v: ref_pad(x, v, ((2, 1, 5),))),
    ("pad", [(2, 1, 3), ()], lambda x, v: P.pad(x, v, ((0, 1, 0), (1, 1, 1), (2, 0, 1))),
     lambda x, v: ref_pad(x, v, ((0, 1, 0), (1, 1, 1), (2, 0, 1)))),
    ("slice", [(5,)], lambda x: P.slice(x, (1,), (4,)), lambda x: ref_slice(x, (1,), (4,), (1,))),
    ("slice", [(6,)], lambda x: P.slice(x, (0,), (6,), (2,)), lambda x: ref_slice(x, (0,), (6,), (2,))),
    ("slice", [(7,)], lambda x: P.slice(x, (1,), (7,), (3,)), lambda x: ref_slice(x, (1,), (7,), (3,))),
    ("slice", [(2, 3, 4)], lambda x: P.slice(x, (0, 1, 1), (2, 3, 4), (1, 1, 2)),
     lambda x: ref_slice(x, (0, 1, 1), (2, 3, 4), (1, 1, 2))),
    ("slice", [(0, 3)], lambda x: P.slice(x, (0, 1), (0, 3), (1, 1)), lambda x: ref_slice(x, (0, 1), (0, 3), (1, 1))),
    ("slice", [(5,)], lambda x: P.slice(x, (2,), (2,)), lambda x: ref_slice(x, (2,), (2,), (1,))),
    ("slice", [(4, 3)], lambda x: P.slice(x, (0, 0), (4, 3), (5, 5)), lambda x: ref_slice(x, (0, 0), (4, 3), (5, 5))),
    ("rev", [(5,)], lambda x: P.rev(x, (0,)), lambda x: ref_rev(x, (0,))),
    ("rev", [(2, 3, 4)], lambda x: P.rev(x, (2, 0)), lambda x: ref_rev(x, (0, 2))),
    ("rev", [(0, 3)], lambda x: P.rev(x, (1,)), lambda x: ref_rev(x, (1,))),
    ("rev", [(2, 3)], lambda x: P.rev(x, (0, 1)), lambda x: ref_rev(x, (0, 1))),
]
CASE_IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("name,shapes,fn,ref", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layout_reference(name, shapes, fn, ref, dtype, rng):
    args = [sample(rng, s, dtype) for s in shapes]
    want = ref(*args)
    check(run(fn, *args), want)
    eager = fn(*args)
    check(eager, want)
    assert eager.flags.writeable and not any(np.shares_memory(eager, a) for a in args)
    assert name in prim_names(fn, *args)


IOTA_CASES = [(I32, (5,), 0), (F32, (2, 3), 1), (F64, (2, 3, 4), 2), (U8, (2, 0), 0), (I32, (2, 0), 1),
              (np.dtype(np.int64), (3, 2), 0)]


@pytest.mark.parametrize("dtype,shape,dim", IOTA_CASES, ids=str)
def test_iota_reference(dtype, shape, dim):
    want = ref_iota(dtype, shape, dim)
    check(run(lambda: P.iota(dtype, shape, dim)), want)
    check(P.iota(dtype, shape, dim), want)
    g = ember.make_graph(lambda: P.iota(dtype, shape, dim))()
    assert [n.prim.name for n in g.nodes] == ["iota"]


def test_pad_with_a_traced_padding_value():
    x = np.arange(6, dtype=F32).reshape(2, 3)
    got = run(lambda a, v: P.pad(a, v, ((1, 1, 1), (0, 1, 0))), x, np.float32(-7))
    check(got, ref_pad(x, -7, ((1, 1, 1), (0, 1, 0))))


# --- rule errors ----------------------------------------------------------------------------------

def _raises(exc, fn, *args, words=()):
    return raises_naming(exc, ember.jit(fn), *args, words=words, location=THIS_FILE)


Z = np.zeros
ERRORS = [
    ("broadcast_in_dim", ShapeError, lambda x: P.broadcast_in_dim(x, (2, 3), (0, 1)), [(3,)], ("broadcast_in_dim",)),
    ("broadcast_in_dim", ShapeError, lambda x: P.broadcast_in_dim(x, (2, 3), (1, 0)), [(3, 2)],
     ("broadcast_in_dim", "(1, 0)")),
    ("broadcast_in_dim", ShapeError, lambda x: P.broadcast_in_dim(x, (2, 3), (2,)), [(3,)], ("broadcast_in_dim",)),
    ("broadcast_in_dim", ShapeError, lambda x: P.broadcast_in_dim(x, (2, 4), (1,)), [(3,)],
     ("broadcast_in_dim", "(3,)", "(2, 4)")),
    ("broadcast_in_dim", ShapeError, lambda x: P.broadcast_in_dim(x, (-1, 3), (1,)), [(3,)],
     ("broadcast_in_dim", "negative")),
    ("reshape", ShapeError, lambda x: P.reshape(x, (4, 2)), [(2, 3)], ("reshape", "(2, 3)", "(4, 2)")),
    ("reshape", ShapeError, lambda x: P.reshape(x, (-2, -3)), [(6,)], ("reshape", "(-2, -3)")),
    ("transpose", ShapeError, lambda x: P.transpose(x, (0, 0)), [(2, 3)], ("transpose", "(0, 0)")),
    ("transpose", ShapeError, lambda x: P.transpose(x, (1, 0)), [(2, 3, 4)], ("transpose", "(1, 0)", "rank-3")),
    ("concatenate", ShapeError, lambda a, b: P.concatenate([a, b], 0), [(2, 3), (2, 4)],
     ("concatenate", "(2, 3)", "(2, 4)")),
    ("concatenate", ShapeError, lambda a, b: P.concatenate([a, b], 0), [(2, 3), (3,)], ("concatenate", "(3,)")),
    ("concatenate", ShapeError, lambda a, b: P.concatenate([a, b], 2), [(2, 3), (2, 3)], ("concatenate", "axis 2")),
    ("concatenate", ShapeError, lambda a, b: P.concatenate([a, b], 0), [(), ()], ("concatenate",)),
    ("pad", ShapeError, lambda x: P.pad(x, 0.0, ((1, -1, 0),)), [(3,)], ("pad", "(1, -1, 0)")),
    ("pad", ShapeError, lambda x: P.pad(x, 0.0, ((1, 1, 0),)), [(3, 2)], ("pad", "rank-2")),
    ("pad", ShapeError, lambda x, v: P.pad(x, v, ((1, 1, 0),)), [(3,), (1,)], ("pad", "scalar", "(1,)")),
    ("slice", ShapeError, lambda x: P.slice(x, (0,), (6,)), [(5,)], ("slice", "[0:6:1]", "size 5")),
    ("slice", ShapeError, lambda x: P.slice(x, (3,), (2,)), [(5,)], ("slice", "[3:2:1]")),
    ("slice", ShapeError, lambda x: P.slice(x, (0,), (5,), (0,)), [(5,)], ("slice", "[0:5:0]")),
    ("slice", ShapeError, lambda x: P.slice(x, (0,), (2,)), [(5, 2)], ("slice", "2 entries")),
    ("rev", ShapeError, lambda x: P.rev(x, (2,)), [(5, 2)], ("rev", "(2,)", "rank-2")),
    ("rev", ShapeError, lambda x: P.rev(x, (0, 0)), [(5, 2)], ("rev", "(0, 0)")),
    ("iota", ShapeError, lambda: P.iota(I32, (2, 3), 2), [], ("iota", "(2, 3)")),
]


@pytest.mark.parametrize("name,exc,fn,shapes,words", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_layout_rule_errors(name, exc, fn, shapes, words):
    _raises(exc, fn, *[Z(s, F32) for s in shapes], words=words)


def test_layout_dtype_errors():
    _raises(DTypeError, lambda a, b: P.concatenate([a, b], 0), Z(2, F32), Z(2, F64),
            words=("concatenate", "float32", "float64"))
    _raises(DTypeError, lambda x, v: P.pad(x, v, ((1, 1, 0),)), Z(3, F32), np.float64(0),
            words=("pad", "float64", "float32"))
    _raises(DTypeError, lambda: P.iota(BOOL, (3,), 0), words=("iota", "bool"))


# --- VJP rules ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,shapes,fn,ref", CASES, ids=CASE_IDS)
def test_layout_vjp(name, shapes, fn, ref, rng):
    args = [rng.normal(size=s) for s in shapes]
    w = rng.normal(size=ref(*args).shape)
    grads = check_grads(lambda *a: total(fn(*a), w), args, argnums=tuple(range(len(args))))
    assert [g.shape for g in grads] == [np.shape(a) for a in args]


def test_concatenate_vjp_with_an_inactive_operand(rng):
    a, b, c = rng.normal(size=(2, 1)), rng.normal(size=(2, 2)), rng.normal(size=(2, 3))
    w = rng.normal(size=(2, 6))
    ga, gc = check_grads(lambda x, z: total(P.concatenate([x, b, z], 1), w), (a, c), argnums=(0, 1))
    np.testing.assert_array_equal(ga, w[:, :1])
    np.testing.assert_array_equal(gc, w[:, 3:])


def test_pad_vjp_of_value_and_operand(rng):
    x, v = rng.normal(size=(2, 3)), np.float64(0.5)
    config = ((1, 2, 1), (0, 1, 2))
    w = rng.normal(size=ref_pad(x, v, config).shape)
    gx, gv = check_grads(lambda a, b: total(P.pad(a, b, config), w), (x, v), argnums=(0, 1))
    mask = ref_pad(np.ones_like(x), 0.0, config).astype(bool)
    np.testing.assert_allclose(gv, w[~mask].sum())
    np.testing.assert_allclose(gx, w[mask].reshape(x.shape))
    (gv_only,) = check_grads(lambda b: total(P.pad(x, b, config), w), (v,), argnums=(0,))
    np.testing.assert_allclose(gv_only, w[~mask].sum())


def test_slice_vjp_with_strides_places_cotangent(rng):
    x, w = rng.normal(size=(7, 5)), rng.normal(size=(2, 2))
    g = check_grads(lambda a: total(P.slice(a, (1, 0), (7, 4), (3, 2)), w), (x,))[0]
    want = np.zeros_like(x)
    want[1:7:3, 0:4:2] = w
    np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("start,limit,strides", [((1, 0), (3, 2), (1, 1)), ((0, 1), (7, 5), (3, 2)),
                                                 ((0, 0), (7, 5), (1, 1)), ((1, 1), (7, 4), (1, 1))], ids=str)
def test_slice_vjp_added_to_other_cotangents(start, limit, strides, rng):
    """A slice's cotangent summed with the operand's other cotangents (small regions are
    scatter-added, large ones padded): both slices and the elementwise use contribute."""
    x = rng.normal(size=(7, 5))
    out_shape = ref_slice(x, start, limit, strides).shape
    w1, w2, v = rng.normal(size=out_shape), rng.normal(size=(2, 5)), rng.normal(size=(7, 5))

    def loss(a):
        return P.add(P.add(total(P.slice(a, start, limit, strides), w1), total(P.slice(a, (5, 0), (7, 5)), w2)),
                     total(P.tanh(a), v))

    (g,) = check_grads(loss, (x,))
    want = v * (1 - np.tanh(x) ** 2)
    want[start[0]:limit[0]:strides[0], start[1]:limit[1]:strides[1]] += w1
    want[5:7] += w2
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


def test_broadcast_in_dim_vjp_sums_size_one_and_new_axes(rng):
    x, w = rng.normal(size=(1, 3)), rng.normal(size=(2, 4, 3))
    g = check_grads(lambda a: total(P.broadcast_in_dim(a, (2, 4, 3), (1, 2)), w), (x,))[0]
    np.testing.assert_allclose(g, w.sum(axis=(0, 1)).reshape(1, 3))


def test_iota_is_not_differentiated(rng):
    x = rng.normal(size=(2, 3))
    f = lambda a: total(P.mul(a, P.iota(F64, (2, 3), 1)), P.iota(F64, (2, 3), 0))  # noqa: E731
    g = check_grads(f, (x,))[0]
    np.testing.assert_array_equal(g, ref_iota(F64, (2, 3), 1) * ref_iota(F64, (2, 3), 0))
    assert "iota" in prim_names(f, x)


# --- batching rules -------------------------------------------------------------------------------

check_vmap = vmap_checker(tol=0)


def batched(rng, shape, axis, dtype=F32, size=3):
    if axis is None:
        return sample(rng, shape, dtype)
    full = list(shape)
    full.insert(axis % (len(shape) + 1), size)
    return sample(rng, tuple(full), dtype)


def _axes_for(shapes):
    """in_axes choices for a case: all at 0, all at the last axis, and each operand alone at 1."""
    yield tuple(0 for _ in shapes), 0
    yield tuple(-1 for _ in shapes), -1
    for i in range(len(shapes)):
        yield tuple(1 if j == i and len(s) >= 1 else (0 if j == i else None) for j, s in enumerate(shapes)), 1


@pytest.mark.parametrize("name,shapes,fn,ref", CASES, ids=CASE_IDS)
def test_layout_batching(name, shapes, fn, ref, rng):
    for in_axes, out_axes in _axes_for(shapes):
        args = [batched(rng, s, a) for s, a in zip(shapes, in_axes)]
        out_rank = len(ref(*[sample(rng, s, F32) for s in shapes]).shape)
        check_vmap(fn, in_axes, args, out_axes if out_rank >= 1 or out_axes in (0, -1) else 0)
    assert name in prim_names(ember.vmap(fn, in_axes), *args)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (1, 0), (None, None)], ids=str)
def test_pad_batching_with_batched_padding_value(in_axes, rng):
    config = ((1, 0, 1), (0, 2, 1))
    x = batched(rng, (2, 3), in_axes[0])
    v = batched(rng, (), in_axes[1])
    f = lambda a, b: P.pad(a, b, config)  # noqa: E731
    if in_axes == (None, None):
        got = ember.vmap(f, in_axes, axis_size=2)(x, v)
        assert got.shape == (2,) + ref_pad(x, v, config).shape
        np.testing.assert_array_equal(got, np.stack([ref_pad(x, v, config)] * 2))
    else:
        check_vmap(f, in_axes, (x, v), 0)
        check_vmap(f, in_axes, (x, v), 2)


def test_iota_inside_vmap(rng):
    x = rng.normal(size=(4, 3)).astype(F32)
    got = check_vmap(lambda a: P.mul(a, P.iota(F32, (3,), 0)), 0, (x,))
    np.testing.assert_array_equal(got, x * np.arange(3, dtype=F32))
    assert "iota" in prim_names(ember.vmap(lambda a: P.mul(a, P.iota(F32, (3,), 0))), x)


def test_nested_vmap_of_layout_ops(rng):
    x = rng.normal(size=(2, 4, 3, 5)).astype(F32)

    def f(a):  # per-example (4, 5)
        b = P.pad(P.rev(a, (0,)), 1.0, ((1, 0, 1), (0, 0, 0)))
        return P.transpose(P.slice(b, (0, 1), (8, 5), (2, 2)), (1, 0))

    got = ember.vmap(ember.vmap(f, 1), 0, 1)(x)
    want = loop_vmap(lambda y: loop_vmap(f, 1, (y,)), 0, (x,), 1)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_vmap_of_grad_of_layout_ops(rng):
    x = rng.normal(size=(3, 2, 4))
    w = rng.normal(size=(4, 3))

    def loss(a):
        b = P.concatenate([P.rev(a, (1,)), P.slice(a, (0, 1), (2, 4), (1, 2))], 1)
        return total(P.reshape(P.transpose(b, (1, 0)), (4, 3)), w)

    g = ember.grad(loss)
    check_vmap(g, 0, (x,))
    check_vmap(g, 2, (np.moveaxis(x, 0, 2),), 1)


COVERED = {
    "reference": {c[0] for c in CASES} | {"iota"},
    "errors": {e[0] for e in ERRORS} | {"concatenate", "pad", "iota"},
    "vjp": {c[0] for c in CASES} | {"iota"},
    "batch": {c[0] for c in CASES} | {"iota"},
}
