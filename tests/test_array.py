"""ember.Array, what ember.numpy and jit return outside a trace: a jax.Array to the user (immutable,
`.at`, JAX promotion in its operators and methods, the same dtypes eagerly as under jit), a NumPy
array underneath (zero-copy for NumPy, Dask and Matplotlib); and the eager fast path that replays a
signature's first call."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.errors import IncompatibleShapesError, ShapeError
from ember.numpy import _eager
from ember.numpy._eager import MISS

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.float16, np.float32, np.float64]


def test_eager_and_jit_results_are_arrays_that_numpy_reads_without_a_copy():
    x = jnp.arange(6.0).reshape(2, 3)
    outs = [x, jnp.sin(x), x + 1, x.sum(), x.T, x[0], jnp.zeros(2), jnp.linspace(0, 1, 3), jnp.split(x, 3, axis=1)[0],
            ember.jit(lambda a: a * 2)(x), ember.jit(lambda a: a * 2, backend="numpy")(x),
            ember.grad(lambda a: jnp.sum(a ** 2))(x), ember.vmap(jnp.sum)(x)]
    for out in outs:
        assert type(out) is ember.Array
        view = np.asarray(out)
        assert type(view) is np.ndarray and np.shares_memory(view, out)
    assert repr(jnp.ones(2)) == "Array([1., 1.], dtype=float32)"


def test_arrays_are_immutable_with_the_fix_in_the_message():
    x = jnp.arange(3.0)
    with pytest.raises(TypeError, match=r"immutable.*x\.at\[idx\]\.set\(y\)"):
        x[0] = 1.0
    for mutate in (lambda: x.fill(0.0), lambda: x.put(0, 1.0), lambda: np.add(x, 1, out=x)):
        with pytest.raises(TypeError, match="immutable"):
            mutate()
    y = x
    y += 1  # rebinds y to a new array, as for a jax.Array
    np.testing.assert_array_equal(x, [0, 1, 2])
    np.testing.assert_array_equal(y, [1, 2, 3])
    np.testing.assert_array_equal(x.sort(), [0, 1, 2])


def test_at_updates_as_jax():
    x = jnp.arange(5.0)
    np.testing.assert_array_equal(x.at[1].set(9.0), [0, 9, 2, 3, 4])
    # set's own fast path (an int key, a float, one axis): a new Array, the operand unchanged; a row of
    # a matrix and an out-of-bounds index take the other paths
    for key, want in ((1, [0, 0.5, 2, 3, 4]), (-1, [0, 1, 2, 3, 0.5])):
        got = x.at[key].set(0.5)
        assert type(got) is ember.Array and got.dtype == np.float32 and not np.shares_memory(got, x)
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x, [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(x.reshape(5, 1).at[2].set(7.0), [[0], [1], [7], [3], [4]])
    np.testing.assert_array_equal(jnp.zeros((2, 3)).at[1].set(2.0), [[0, 0, 0], [2, 2, 2]])
    with pytest.raises(IndexError):
        x.at[5].set(1.0)
    np.testing.assert_array_equal(x.at[np.array([0, 0, 2])].add(1.0), [2, 1, 3, 3, 4])
    np.testing.assert_array_equal(x.at[1:3].multiply(3.0), [0, 3, 6, 3, 4])
    np.testing.assert_array_equal(x.at[1:3].mul(3.0), [0, 3, 6, 3, 4])
    np.testing.assert_array_equal(x.at[:2].max(1.5), [1.5, 1.5, 2, 3, 4])
    np.testing.assert_array_equal(x.at[3:].min(3.5), [0, 1, 2, 3, 3.5])
    np.testing.assert_array_equal(x.at[4].divide(2.0), [0, 1, 2, 3, 2])
    np.testing.assert_array_equal(x.at[2].power(2.0), [0, 1, 4, 3, 4])
    np.testing.assert_allclose(x.at[np.array([1, 4])].apply(jnp.sin), [0, np.sin(1), 2, 3, np.sin(4)], rtol=1e-6)
    assert float(x.at[3].get()) == 3.0
    np.testing.assert_array_equal(x.at[7].set(1.0, mode="clip"), [0, 1, 2, 3, 1])
    assert float(x.at[-9].get(mode="clip")) == 0.0
    with pytest.raises(ValueError, match="mode='wrap'"):
        x.at[0].set(1.0, mode="wrap")
    # mode="fill": JAX's fill values out of bounds (recorded from jax 0.10.2)
    np.testing.assert_array_equal(x.at[np.array([0, 7, -1, -9])].get(mode="fill"), [0, np.nan, 4, np.nan])
    assert float(x.at[7].get(fill_value=-1.0)) == -1.0
    np.testing.assert_array_equal(jnp.arange(6).reshape(3, 2).at[np.array([1, 5])].get(mode="fill"),
                                  [[2, 3], [-(2**31), -(2**31)]])
    np.testing.assert_array_equal(ember.jit(lambda a, i: a.at[i].get(mode="fill", fill_value=0.5))(
        x, np.array([2, 10])), [2, 0.5])
    f = ember.jit(lambda a, i: (a.at[i].add(1.0), a.at[i].mul(2.0, unique_indices=True)))
    added, mul = f(x, np.array([0, 0, 9]))  # traced: repeats accumulate, out of bounds is dropped
    np.testing.assert_array_equal(added, [2, 1, 2, 3, 4])
    # repeated indices, eagerly: each occurrence applies in turn (recorded from jax 0.10.2)
    y, i = jnp.arange(1.0, 6.0), np.array([1, 1, 3])
    np.testing.assert_array_equal(y.at[i].mul(2.0), [1, 8, 3, 8, 5])
    np.testing.assert_array_equal(y.at[i].min(np.array([0.5, 1.5, -1.0])), [1, 0.5, 3, -1, 5])
    np.testing.assert_array_equal(y.at[i].max(7), [1, 7, 3, 7, 5])
    np.testing.assert_array_equal(y.at[i].divide(2.0), [1, 0.5, 3, 2, 5])
    np.testing.assert_array_equal(y.at[i].power(2.0), [1, 16, 3, 16, 5])
    np.testing.assert_array_equal(y.at[i].apply(lambda v: v * 10), [1, 200, 3, 40, 5])
    # under jit, concrete and traced repeats combine as eagerly (the scatter_mul/min/max primitives)
    np.testing.assert_array_equal(ember.jit(lambda a: a.at[np.array([1, 1])].mul(2.0))(x), [0, 4, 2, 3, 4])
    np.testing.assert_array_equal(ember.jit(lambda a, i: a.at[i].max(2.5))(x, np.array([1, 2, 1])), [0, 2.5, 2.5, 3, 4])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_operators_promote_as_under_jit_for_every_pair(dtype):
    """JAX's promotion table, eagerly: each operator's dtype equals jit's (which follows JAX's table,
    tests/test_jax_conventions.py), with Python scalars weak."""
    a = jnp.asarray(np.ones(2, dtype))
    others = [jnp.asarray(np.ones(2, d)) for d in DTYPES] + [2, 2.5, True]

    def pairs(a, *others):
        return [a * o for o in others] + [o + a for o in others]

    eager = pairs(a, *others)
    traced = ember.jit(pairs, static_argnums=(len(DTYPES) + 1, len(DTYPES) + 2, len(DTYPES) + 3), optimize=False)(
        a, *others)
    assert [e.dtype for e in eager] == [t.dtype for t in traced]
    if dtype == np.int8:
        assert (a * 2.5).dtype == np.float32  # NumPy would give float64


def test_array_methods_and_jax_attributes():
    x = jnp.asarray(np.arange(6, dtype=np.int8).reshape(2, 3))
    assert x.sum().dtype == np.int32  # JAX's sum of int8 (NumPy's: int64)
    assert x.mean().dtype == np.float32 and x.astype(np.float16).dtype == np.float16
    assert x.reshape(3, 2).shape == (3, 2) and x.T.shape == (3, 2)
    assert x.block_until_ready() is x and x.device.platform == "cpu" and x.devices() == {x.device}
    assert x[1, 2].item() == 5 and x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert not x.weak_type
    y = pickle.loads(pickle.dumps(x))
    assert type(y) is ember.Array and y.dtype == np.int8
    np.testing.assert_array_equal(y, x)
    assert type(np.sin(x)) is np.ndarray and type(np.mean(x)) is not ember.Array  # NumPy's functions: NumPy's types
    assert type(np.ones(3) + jnp.ones(3)) is ember.Array  # the Array's reflected operator comes first


def test_jax_device_functions():
    tree = ember.device_put({"a": np.ones(2), "b": 3.0})
    assert type(tree["a"]) is ember.Array and tree["b"].dtype == np.float32
    assert type(ember.device_get(tree)["a"]) is np.ndarray and ember.block_until_ready(tree) is tree
    assert ember.devices() == [tree["a"].device] and ember.device_count() == 1
    with pytest.raises(RuntimeError, match="cuda"):
        ember.devices("gpu")


def test_jit_takes_arrays_on_its_hit_path():
    f = ember.jit(lambda a: a + 1.0)
    x = jnp.ones(4)
    f(x)
    f(x)
    f(f(x))
    info = f.cache_info()
    assert (info.misses, info.hits) == (1, 3)
    assert len(f._cache.fast) == 1  # filed for the hit path: later calls skip the pytree work


def test_eager_fast_path_replays_an_earlier_call():
    _eager._clear(None)  # (an earlier test's sin on float32 would have filed its lane)
    x = jnp.asarray(np.linspace(-1, 1, 7, dtype=np.float32))
    fast = jnp.sin.fast
    assert fast((x,), {}) is MISS  # a first call: the full path
    assert type(fast((x,), {})) is ember.Array  # the second records and replays
    assert type(fast((x[:3],), {})) is ember.Array  # another shape: sin's lane serves every shape of a dtype
    assert jnp.mean.fast((x,), {}) is MISS and jnp.mean.fast((x,), {}) is not MISS
    assert jnp.mean.fast((x[:3],), {}) is MISS  # another signature of a function without lanes
    np.testing.assert_array_equal(jnp.sin(np.ones((2, 3), np.float32)), np.sin(np.ones((2, 3), np.float32)))
    for _ in range(3):
        jnp.add(x, x)
    with pytest.raises(ShapeError):  # add's lane cannot broadcast these: the full path raises JAX's error
        jnp.add(x, x[:3])
    for _ in range(3):  # the first call takes the full path, the second records, the third replays
        np.testing.assert_array_equal(jnp.sin(x), np.sin(np.asarray(x)), strict=True)
        np.testing.assert_array_equal(jnp.sum(x, axis=0), np.sum(np.asarray(x)), strict=True)
        assert jnp.add(x, 1).dtype == np.float32 and jnp.add(np.int8(1), 2).dtype == np.int8
    i = np.arange(3, dtype=np.int32)
    assert (jnp.multiply(i, 0.5).dtype, jnp.multiply(i, 0.5)[1]) == (np.float32, 0.5)
    with ember.enable_x64():  # the tables are emptied when the mode switches
        assert jnp.multiply(i, 0.5).dtype == np.float64
    assert jnp.multiply(i, 0.5).dtype == np.float32
    # value-dependent calls and errors take the full path, every time
    np.testing.assert_array_equal(x[x > 0], np.asarray(x)[np.asarray(x) > 0])
    for _ in range(2):
        with pytest.raises(ShapeError):
            jnp.add(np.ones(2), np.ones(3))
    # results never alias a NumPy argument
    a = np.arange(4.0)
    for r in (jnp.reshape(a, (4,)), jnp.asarray(a), jnp.transpose(a)):
        assert not np.shares_memory(r, a)


def test_reductions_and_products_have_lanes_for_every_shape():
    """A whole-array reduction's lane (sum, prod, max, min of one operand) and matmul's (np.dot for
    operands of one or two axes) serve every shape of the dtypes they were filed under; empty operands,
    misaligned shapes and other ranks take the full path and its errors."""
    _eager._clear(None)
    x = jnp.asarray(np.linspace(-1, 1, 12, dtype=np.float32))
    for f, ref in ((jnp.sum, np.sum), (jnp.prod, np.prod), (jnp.max, np.max), (jnp.min, np.min)):
        for _ in range(2):  # the full path, then the record that files the lane
            f(x)
        assert f.fast.lanes and all(r.reduce is not None for r in f.fast.lanes.values())
        for shape in ((12,), (3, 4), (2, 3, 2), ()):
            a = x.reshape(shape) if shape else x[0]
            got = f(a)
            assert type(got) is ember.Array and got.shape == () and got.dtype == np.float32
            np.testing.assert_array_equal(got, ref(np.asarray(a)))
            assert not np.shares_memory(got, x)
    assert jnp.sum(x[:0]) == 0.0 and jnp.prod(x[:0]) == 1.0
    for f in (jnp.max, jnp.min):
        with pytest.raises(IncompatibleShapesError, match="zero-size"):
            f(x[:0])
    a, v = x.reshape(3, 4), x[:4]
    for _ in range(2):
        a @ v
    for lhs, rhs in ((a, v), (v, v), (v, a.T), (a, a.T), (a[:, :1], a[:1])):
        got = lhs @ rhs
        assert type(got) is ember.Array and got.dtype == np.float32
        np.testing.assert_allclose(got, np.asarray(lhs) @ np.asarray(rhs), rtol=1e-6)
    np.testing.assert_allclose(x.reshape(3, 2, 2) @ a[:2], np.asarray(x).reshape(3, 2, 2) @ np.asarray(a)[:2],
                               rtol=1e-6)  # three axes: not np.dot's product, the full path
    for lhs, rhs in ((a, x[:3]), (v, x[:3])):
        with pytest.raises(ShapeError):
            lhs @ rhs
    with pytest.raises(IncompatibleShapesError):  # a 0-d operand, as JAX refuses it
        a @ x[0]
    # jnp.dot and jnp.matmul have the lane too, and file it from a vector product as well
    _eager._clear(None)
    for f, ref in ((jnp.dot, np.dot), (jnp.matmul, np.matmul)):
        for _ in range(2):
            f(v, v)
        assert f.fast.lanes and all(r.product is not None for r in f.fast.lanes.values())
        for lhs, rhs in ((a, v), (v, v), (v, a.T), (a, a.T), (np.asarray(v), v)):
            got = f(lhs, rhs)
            assert type(got) is ember.Array and got.dtype == np.float32 and got.shape == ref(lhs, rhs).shape
            np.testing.assert_allclose(got, ref(np.asarray(lhs), np.asarray(rhs)), rtol=1e-6)
        with pytest.raises(ShapeError):
            f(a, x[:3])
    # an Array's whole-reduction methods take the lane as the functions do
    for name in ("sum", "prod", "max", "min"):
        for shape in ((12,), (3, 4), ()):
            a = x.reshape(shape) if shape else x[0]
            for _ in range(3):
                got = getattr(a, name)()
                assert type(got) is ember.Array and got.dtype == np.float32 and got.shape == ()
                np.testing.assert_array_equal(got, getattr(np, name)(np.asarray(a)))


def test_dask_and_matplotlib_take_arrays():
    da = pytest.importorskip("dask.array")
    x = jnp.arange(8.0)
    d = da.from_array(x, chunks=4).map_blocks(lambda b: np.asarray(b) * 2)
    np.testing.assert_array_equal(d.compute(), np.arange(8.0) * 2)
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    (line,) = ax.plot(x, jnp.sin(x))
    np.testing.assert_allclose(line.get_ydata(), np.sin(np.arange(8.0)), rtol=1e-6)
    plt.close(fig)


def test_byte_swapped_data_is_read_in_this_machines_order():
    """A big-endian array (a file's data) is taken as JAX takes it: its values, in native byte order, by
    asarray, the eager functions (the full path and the replays after it), jit, grad and vmap; a
    byte-swapped dtype names the same dtype."""
    swapped = np.dtype(np.float32).newbyteorder()
    x = np.arange(4, dtype=swapped)
    want_sin = np.sin(np.arange(4, dtype=np.float32))
    results = [jnp.asarray(x), *[jnp.sin(x) for _ in range(3)], x + jnp.ones(4), jnp.reshape(x, (2, 2)),
               ember.jit(lambda v: v * 2)(x), ember.grad(lambda v: (v * v).sum())(x), ember.vmap(jnp.sin)(x),
               jnp.sum(x), jnp.asarray([1, 2]).astype(swapped)]
    for r in results:
        assert type(r) is ember.Array and r.dtype.isnative and r.dtype == np.float32
    for r in results[1:4]:
        np.testing.assert_allclose(r, want_sin, rtol=1e-6)
    np.testing.assert_array_equal(results[5], [[0, 1], [2, 3]])
    assert float(results[9]) == 6.0


def _same(fast, general):
    """The two calls give the same value, dtype, shape and type, or raise the same exception class."""
    got = []
    for call in (fast, general):
        try:
            out = call()
            got.append((type(out), out.dtype, out.shape, np.asarray(out).tolist()))
        except Exception as e:  # noqa: BLE001
            got.append(("raised", type(e)))
    assert repr(got[0]) == repr(got[1]), got


ARRAYS_BY_RANK = [jnp.asarray(np.array(2.5, np.float32)), jnp.arange(5.0), jnp.arange(12).reshape(3, 4),
                  jnp.asarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4) > 5)]
BASIC_KEYS = [0, -1, 2, 5, -6, slice(1, 3), slice(None, None, -1), slice(None, None, 2), slice(10, None),
              slice(-100, 100), slice(3, 1), slice(None, None, -2), slice(0, 3, 0), (), (0,), (0, 1), (-1, -1),
              (slice(1, 3), None), (Ellipsis, 0), (None, Ellipsis, None), (0, 0, 0, 0), (1, slice(None), 0),
              (Ellipsis, Ellipsis), True, np.int64(1), slice(np.int64(1), 3), [0, 1], None, Ellipsis]


@pytest.mark.parametrize("rank", range(4))
def test_basic_indexing_reshape_and_T_take_numpy_and_match_the_general_path(rank):
    """An Array's x[key], x.reshape and x.T run NumPy's own on the data (then a copy); every key, shape
    and error is what ember.numpy's general path gives (which follows JAX), and results never alias."""
    from ember.numpy import _indexing, _methods, _shape

    x = ARRAYS_BY_RANK[rank]
    for key in BASIC_KEYS:
        _same(lambda key=key: x[key], lambda key=key: _indexing.getitem(x, key))
        try:
            out = x[key]
        except Exception:  # noqa: BLE001
            continue
        assert not np.shares_memory(out, x)
    for shape in [(-1,), (x.size,), (1, -1), ((1, x.size),), (7, 3), (), ((),), (-1, -1), (2.0,)]:
        _same(lambda shape=shape: x.reshape(*shape), lambda shape=shape: _methods._reshape(x, *shape))
    _same(lambda: x.reshape(-1, order="F"), lambda: _shape.reshape(x, (-1,), "F"))
    _same(lambda: x.T, lambda: jnp.transpose(x))
    assert x.T.flags.c_contiguous and not np.shares_memory(x.T, x)
    # under a trace the general path runs: a concrete Array is a const of the graph
    f = ember.jit(lambda a: (x[()], x.T, x.reshape(-1), a))
    for got, want in zip(f(1.0)[:3], (x[()], x.T, x.reshape(-1))):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("make", ["zeros", "ones", "empty", "full"])
def test_creation_functions_take_numpy_eagerly_and_match_jit(make):
    """zeros, ones, empty and full with a plain shape run NumPy directly; the values and dtypes are jit's
    (which follows JAX), for every dtype, fill value and shape, and bad shapes raise the same errors."""
    fn = getattr(jnp, make)
    shapes = [3, (2, 3), 0, (), (0, 3), [2, 3], np.int64(2), -1, (2, -1), 2.0, (2, np.int32(2))]
    dtypes = [None, np.float16, np.float64, np.int8, np.uint8, np.int32, bool]
    fills = [2.5, 7, True, 300, -1, 1e40, np.float32(2.0)] if make == "full" else [None]
    for shape in shapes:
        for dtype in dtypes:
            for fill in fills:
                args = (shape,) if fill is None else (shape, fill)
                def values(out):  # (empty's values are zeros, as JAX's: it is compared for dtype and shape)
                    return out * False if make == "empty" else out

                def eager(args=args, dtype=dtype):
                    return values(fn(*args, dtype=dtype))

                def jitted(args=args, dtype=dtype):
                    return values(ember.jit(lambda: fn(*args, dtype=dtype))())

                _same(eager, jitted)


def test_sequence_functions_and_linspace_take_numpy_or_a_replay_and_match_jit():
    """concatenate, stack, hstack and vstack of arrays of one dtype run NumPy's own; mixed dtypes, Python
    scalars, bad shapes and axes take the general path (JAX's promotion and errors); linspace replays an
    earlier call of its signature. Every value, dtype and error class is jit's."""
    a, b = jnp.arange(6.0).reshape(2, 3), jnp.ones((2, 3))
    v, i = jnp.arange(3.0), jnp.arange(3)
    seqs = [[a, b], (a, b), [a], [a, np.asarray(b)], [v, v], [a, v], [v, i], [jnp.asarray(2.0), jnp.asarray(3.0)],
            [a, b.T], [np.asarray(v, np.float64), v], [i, i]]
    for name in ("concatenate", "stack", "hstack", "vstack"):
        fn = getattr(jnp, name)
        axes = [None] if name in ("hstack", "vstack") else [0, 1, -1, 2, None, "kw"]
        for seq in seqs:
            for axis in axes:
                args, kwargs = ((seq,), {}) if axis is None or axis == "kw" else ((seq, axis), {})
                if axis == "kw":
                    kwargs = {"axis": 1}
                if axis is None and name in ("concatenate", "stack"):
                    args = (seq, None) if name == "concatenate" else (seq,)
                k = len(seq)

                def eager(args=args, kwargs=kwargs, fn=fn):
                    return fn(*args, **kwargs)

                def jitted(args=args, kwargs=kwargs, k=k, fn=fn):
                    return ember.jit(lambda *xs: fn(type(args[0])(xs), *args[1:], **kwargs))(*args[0][:k])

                _same(eager, jitted)
                try:
                    out = eager()
                except Exception:  # noqa: BLE001
                    continue
                assert not any(np.shares_memory(out, x) for x in seq)
    for args, kwargs in [((0, 1, 5), {}), ((0.0, 1.0, 4), {"endpoint": False}), ((jnp.zeros(2), jnp.ones(2), 3), {}),
                         ((0, 10, 4), {"dtype": int}), ((2.0, 3.0), {"num": 1}), ((1, 0, 3), {"axis": 0}),
                         ((0, 1, -1), {}), ((jnp.zeros(2), jnp.ones(3), 3), {})]:
        for _ in range(3):  # the full path, the record, the replay
            _same(lambda args=args, kwargs=kwargs: jnp.linspace(*args, **kwargs),
                  lambda args=args, kwargs=kwargs: ember.jit(lambda: jnp.linspace(*args, **kwargs))())


def test_arange_and_lists_take_numpy_and_match_jit():
    """jnp.arange of Python ints runs NumPy's exact integer arange, and a list of Python scalars becomes
    an array without the general walk; values and dtypes are jit's, errors the same class."""
    for args in [(10,), (0,), (-3,), (2, 10, 3), (10, 2, -2), (5, 5), (0, 10, 0), (2**31 - 2, 2**31 + 1),
                 (0, 2**31, 2**30), (True,), (np.int64(4),), (5.0,), (1, 2.5, 0.5), (3, None, None)]:
        for _ in range(2):
            _same(lambda args=args: jnp.arange(*args), lambda args=args: ember.jit(lambda: jnp.arange(*args))())
    for lst in [[1.0, 2.0, 3.0], [1, 2, 3], [True, False], [], [1, 2.5], [True, 2], [[1, 2], [3, 4.5]],
                [1.0, np.float64(2.0)], [[]], (1.0, 2), [2**40]]:
        _same(lambda lst=lst: jnp.array(lst), lambda lst=lst: ember.jit(lambda: jnp.array(lst))())
        _same(lambda lst=lst: jnp.asarray(lst, jnp.float16),
              lambda lst=lst: ember.jit(lambda: jnp.asarray(lst, jnp.float16))())


def test_where_of_three_arrays_takes_numpy_and_matches_jit():
    """where(c, x, y) with a boolean c and x, y of one dtype runs NumPy's where; other dtypes, scalars,
    non-boolean conditions and shapes that do not broadcast take the general path. All as jit gives."""
    x, y = jnp.arange(6.0).reshape(2, 3), jnp.ones((2, 3))
    c = x > 2
    cases = [(c, x, y), (c, x, y[0]), (c[0], x, y), (c, np.asarray(x), y), (c, x, jnp.ones((2, 3), jnp.int32)),
             (c, x, 0.0), (x, x, y), (c.astype(jnp.int32), x, y), (c, x, jnp.ones(4)), (c, c, ~c),
             (np.asarray(c), np.asarray(x), np.asarray(y))]
    for args in cases:
        _same(lambda args=args: jnp.where(*args), lambda args=args: ember.jit(lambda *a: jnp.where(*a))(*args))
        try:
            out = jnp.where(*args)
        except Exception:  # noqa: BLE001 (the case that does not broadcast)
            continue
        assert type(out) is ember.Array and not any(np.shares_memory(out, v) for v in args if isinstance(v, np.ndarray))


def test_astype_takes_numpy_and_matches_jit():
    """An Array's astype runs NumPy's astype (convert_element_type's eager rule): every pair of dtypes,
    NaN, infinities and out-of-range values, as jit converts them; a bad dtype raises as before."""
    values = np.array([0.0, -1.5, 2.5, 3e38, -np.inf, np.inf, 255.0, -129.0, 1e-40], np.float32)
    kinds = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int32, np.bool_, float, int, "float16"]
    for src in (values, values.astype(np.float64), np.arange(-3, 4, dtype=np.int32), np.array([True, False])):
        x = jnp.asarray(src) if src.dtype != np.float64 else src.view(ember.Array)
        for dtype in kinds:
            with np.errstate(invalid="ignore", over="ignore"):
                _same(lambda dtype=dtype, x=x: x.astype(dtype),
                      lambda dtype=dtype, x=x: ember.jit(lambda a: a.astype(dtype))(x))
    assert x.astype(bool) is x
    with pytest.raises(Exception, match="complex128"):
        x.astype(np.complex128)


def test_argmax_and_argmin_take_numpy_and_match_jit():
    """argmax/argmin of one array alone (function or method) run ndarray's own: the first extremum,
    NaN first of all, in Ember's int dtype, as jit gives; empty arrays and axes go the general way."""
    cases = [np.array([1.0, 3.0, 3.0, -1.0]), np.array([1.0, np.nan, 3.0, np.nan]), np.array([-0.0, 0.0]),
             np.arange(6, dtype=np.int8).reshape(2, 3), np.array([True, False]), np.zeros(0, np.float32),
             np.array(2.5, np.float32), np.array([np.inf, -np.inf], np.float16)]
    for a in cases:
        x = a.view(ember.Array)
        for name in ("argmax", "argmin"):
            fn = getattr(jnp, name)
            _same(lambda fn=fn, x=x: fn(x), lambda fn=fn, x=x: ember.jit(fn)(x))
            _same(lambda name=name, x=x: getattr(x, name)(), lambda fn=fn, x=x: ember.jit(fn)(x))
            _same(lambda fn=fn, a=a: fn(a), lambda fn=fn, x=x: ember.jit(fn)(x))
            if a.ndim:
                _same(lambda fn=fn, x=x: fn(x, axis=0), lambda fn=fn, x=x: ember.jit(lambda v: fn(v, axis=0))(x))
