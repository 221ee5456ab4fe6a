"""Where indexing puts the axes of advanced indices, over every placement: each index tuple of up to four
entries from the alphabet `:`, `1:4`, `...`, `None`, an int, a list and a 2-D integer array that NumPy
accepts on a rank-3 (and, eagerly, a rank-4) array, compared with NumPy (shape and values) and JAX
(shape), eagerly, under jit, its gradient (a scatter-add), vmap (a loop) and `.at[].set/add`. NumPy's
rule: the broadcast axes of the advanced indices (ints count as 0-d ones next to an array) stay where
the first one stands only when they are adjacent in the key; a slice, None or Ellipsis between them,
even an Ellipsis that stands for no axis, sends them to the front.

On the numpy backend the eager check runs every key against NumPy (rank 3 and 4); JAX's shapes and the
transforms take the rank-3 keys holding an integer array (`:` standing for `1:4` too): jit all of them
(a third with traced index arrays), grad a third, vmap half, `.at` all (an eighth traced); a sampled
share also gets every eighth key of the issue's corner (EMPTY_ELLIPSIS). The llvm backend runs a fixed
sample. Each transform compiles one function of all its keys, not one function per key, without the
optimizer on the numpy backend.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import ember
from ember.numpy._indexing import getitem

ALPHABET = {":": slice(None), "1:4": slice(1, 4), "...": Ellipsis, "None": None, "1": 1, "[0,2]": [0, 2],
            "2d": np.array([[3], [0], [1], [2]])}
ARRAY_ENTRIES = ("[0,2]", "2d")


def _keys(shape: tuple[int, ...]) -> list[tuple[str, tuple]]:
    """Every key of up to four alphabet entries that NumPy accepts on an array of `shape`, with its name."""
    probe, out = np.zeros(shape), []
    for n in range(5):
        for names in itertools.product(ALPHABET, repeat=n):
            key = tuple(ALPHABET[c] for c in names)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    probe[key]
            except (IndexError, TypeError, ValueError, DeprecationWarning):
                continue
            out.append((" ".join(names) or "()", key))
    return out


SHAPE3, SHAPE4 = (4, 5, 6), (4, 5, 6, 7)
KEYS3, KEYS4 = _keys(SHAPE3), _keys(SHAPE4)
X3 = np.arange(np.prod(SHAPE3), dtype=np.float64).reshape(SHAPE3)
X4 = np.arange(np.prod(SHAPE4), dtype=np.float64).reshape(SHAPE4)
# The keys the issue is about: an Ellipsis that stands for no axis with advanced entries on both sides.
ADVANCED = ("1", "[0,2]", "2d")


def _empty_ellipsis_between_advanced(name: str) -> bool:
    parts = name.split()
    if "..." not in parts or sum(p not in ("...", "None") for p in parts) != len(SHAPE3):
        return False
    i = parts.index("...")
    return any(p in ARRAY_ENTRIES for p in parts) and any(p in ADVANCED for p in parts[:i]) and \
        any(p in ADVANCED for p in parts[i + 1:])


EMPTY_ELLIPSIS = [(n, k) for n, k in KEYS3 if _empty_ellipsis_between_advanced(n)]
# The transforms' keys: those with an integer array, the slice `1:4` left out (eager checks cover slicing).
TRANSFORM_KEYS = [(n, k) for n, k in KEYS3 if any(p in ARRAY_ENTRIES for p in n.split()) and "1:4" not in n.split()]


def _sample(keys: list, every: int) -> list:
    """Every `every`-th key plus every eighth key of EMPTY_ELLIPSIS: the llvm backend's share."""
    picked = {n for n, _ in keys[::every]} | {n for n, _ in EMPTY_ELLIPSIS[::8]}
    return [(n, k) for n, k in keys if n in picked]


def _keys_for(backend: str | None, every: int = 1) -> list:
    """TRANSFORM_KEYS for the numpy backend (every `every`-th with the corner keys when every > 1), a
    sample for llvm."""
    if backend == "llvm":
        return _sample(TRANSFORM_KEYS, 60)
    return TRANSFORM_KEYS if every == 1 else _sample(TRANSFORM_KEYS, every)


def _jit(fun, backend: str | None):
    """ember.jit of `fun`; on the numpy backend, whose functions hold every key, without the optimizer
    (its passes cost seconds on thousands of outputs; the llvm sample runs them)."""
    return ember.jit(fun, optimize=backend == "llvm")


def test_the_alphabet_covers_the_corner():
    """The enumeration holds the issue's key and keys that place advanced axes both ways."""
    names = {n for n, _ in KEYS3}
    assert ": [0,2] ... [0,2]" in names and ": [0,2] ... 2d" in names and ": 1 ... [0,2]" in names
    assert len(EMPTY_ELLIPSIS) >= 20 and len(KEYS3) > 1500 and len(KEYS4) > 2000
    assert X3[:, [0, 2], ..., [0, 2]].shape == (2, 4)


@pytest.mark.parametrize("x, keys", [(X3, KEYS3), (X4, KEYS4)], ids=["rank3", "rank4"])
def test_eager_getitem_matches_numpy_and_jax(x, keys, ember_backend):
    jax = pytest.importorskip("jax", reason="JAX is the reference for the shapes")
    keys = keys if ember_backend != "llvm" else keys[::10]
    for name, key in keys:
        got, want = getitem(x, key), x[key]
        assert got.shape == want.shape, f"x[{name}]: shape {got.shape}, NumPy's {want.shape}"
        np.testing.assert_array_equal(got, want, err_msg=f"x[{name}]")
    if x.ndim == 4:
        return  # JAX's shapes on rank 3 only: NumPy's values above are the reference for both
    # JAX's shapes where the placement rule applies (an integer array in the key; `:` standing for `1:4`)
    keys = TRANSFORM_KEYS if ember_backend != "llvm" else _sample(TRANSFORM_KEYS, 10)
    jax_shapes = jax.eval_shape(lambda v: tuple(v[k] for _, k in keys), jax.ShapeDtypeStruct(x.shape, np.float32))
    for (name, key), j in zip(keys, jax_shapes):
        assert x[key].shape == j.shape, f"x[{name}]: NumPy's shape {x[key].shape}, JAX's {j.shape}"


def test_jax_values_on_the_corner():
    """JAX's values, not only its shapes, on the keys the issue is about."""
    jnp_ = pytest.importorskip("jax.numpy", reason="JAX is the reference")
    xj = jnp_.asarray(X3.astype(np.float32))
    for name, key in EMPTY_ELLIPSIS[:8]:
        np.testing.assert_array_equal(getitem(X3.astype(np.float32), key), np.asarray(xj[key]), err_msg=name)


def _traced_key(key: tuple, arrays: list) -> tuple:
    """`key` with each integer list or array entry taken from `arrays` (traced arguments), in order."""
    it = iter(arrays)
    return tuple(next(it) if isinstance(k, (list, np.ndarray)) else k for k in key)


def _array_entries(key: tuple) -> list:
    return [np.asarray(k, np.int32) for k in key if isinstance(k, (list, np.ndarray))]


def test_jit_getitem(ember_backend):
    """One jitted function of all the keys with constant integer arrays; one of a third of them traced."""
    keys = _keys_for(ember_backend)
    const = _jit(lambda x: tuple(x[k] for _, k in keys), ember_backend)(X3)
    sub = _keys_for(ember_backend, every=3)
    arrays = [_array_entries(k) for _, k in sub]
    traced = _jit(lambda x, arrs: tuple(x[_traced_key(k, a)] for (_, k), a in zip(sub, arrs)),
                  ember_backend)(X3, arrays)
    for how, ks, outs in (("constant", keys, const), ("traced", sub, traced)):
        for (name, key), got in zip(ks, outs):
            want = X3[key]
            assert got.shape == want.shape, f"jit x[{name}] ({how} indices): shape {got.shape}, NumPy's {want.shape}"
            np.testing.assert_array_equal(got, want, err_msg=f"jit x[{name}] ({how} indices)")


def _weights(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def test_grad_is_the_scatter_add(ember_backend):
    """d/dx sum(x[key] * w) is w scatter-added into zeros at the positions x[key] reads."""
    keys = _keys_for(ember_backend, every=3)  # a third of the keys: a gradient graph is 3x a forward
    ws = [_weights(X3[k].shape, i) for i, (_, k) in enumerate(keys)]

    def loss(xs):
        return sum(((x[k] * w).sum() for x, (_, k), w in zip(xs, keys, ws)), 0.0)

    grads = _jit(ember.grad(loss), ember_backend)([X3] * len(keys))
    for (name, key), g, w in zip(keys, grads, ws):
        want = np.zeros(SHAPE3)
        np.add.at(want, key, w)
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12, err_msg=f"grad of x[{name}]")


def test_vmap_matches_a_loop(ember_backend):
    keys = _keys_for(ember_backend, every=2)
    xb = np.stack([X3, -X3 + 0.5])
    outs = _jit(ember.vmap(lambda x: tuple(x[k] for _, k in keys)), ember_backend)(xb)
    for (name, key), got in zip(keys, outs):
        want = np.stack([x[key] for x in xb])
        assert got.shape == want.shape, f"vmap x[{name}]: shape {got.shape}, a loop's {want.shape}"
        np.testing.assert_array_equal(got, want, err_msg=f"vmap x[{name}]")


def _numpy_at(x: np.ndarray, key: tuple, v: np.ndarray, op: str) -> np.ndarray:
    out = x.copy()
    if op == "set":
        out[key] = v
    else:
        np.add.at(out, key, v)
    return out


@pytest.mark.parametrize("op", ["set", "add"])
def test_at_matches_numpy_and_jax(op, ember_backend):
    """x.at[key].set/add with constant and traced integer arrays, against NumPy's assignment (the keys
    select no element twice) and np.add.at, and against JAX's `.at` on the corner keys."""
    keys = _keys_for(ember_backend)
    vs = [_weights(X3[k].shape, i) for i, (_, k) in enumerate(keys)]

    def update(x, k, v):
        return getattr(x.at[k], op)(v)

    const = _jit(lambda x: tuple(update(x, k, v) for (_, k), v in zip(keys, vs)), ember_backend)(X3)
    for (name, key), v, c in zip(keys, vs, const):
        np.testing.assert_allclose(c, _numpy_at(X3, key, v, op), rtol=1e-12, err_msg=f"x.at[{name}].{op}")
    # Traced indices take another path (positions computed in the graph): a sample of the keys.
    picked = {n for n, _ in _sample(keys, 8 if ember_backend != "llvm" else 3)}
    sub = [(i, n, k) for i, (n, k) in enumerate(keys) if n in picked]
    arrays = [_array_entries(k) for _, _, k in sub]
    traced = _jit(lambda x, arrs: tuple(update(x, _traced_key(k, a), vs[i]) for (i, _, k), a in zip(sub, arrs)),
                  ember_backend)(X3, arrays)
    for (i, name, key), t in zip(sub, traced):
        np.testing.assert_allclose(t, _numpy_at(X3, key, vs[i], op), rtol=1e-12,
                                   err_msg=f"x.at[{name}].{op} (traced indices)")
    jax = pytest.importorskip("jax", reason="JAX's .at is the reference")
    corner = EMPTY_ELLIPSIS[:6]
    cvs = [_weights(X3[k].shape, 100 + i).astype(np.float32) for i, (_, k) in enumerate(corner)]
    x32 = X3.astype(np.float32)
    jax_out = jax.jit(lambda x: tuple(update(x, k, v) for (_, k), v in zip(corner, cvs)))(x32)
    ours = ember.jit(lambda x: tuple(update(x, k, v) for (_, k), v in zip(corner, cvs)))(x32)
    for (name, _), o, j in zip(corner, ours, jax_out):
        np.testing.assert_allclose(o, np.asarray(j), rtol=1e-6, err_msg=f"x.at[{name}].{op} vs JAX")


MASK2 = np.zeros((4, 5), bool)
MASK2[0, 1] = MASK2[2, 3] = MASK2[3, 0] = True
MASK1 = np.array([True, False, True, False, False, True])


@pytest.mark.parametrize("key", [(MASK2, ..., [0, 2, 1]), (slice(None), [0, 2], ..., MASK1 & (np.arange(6) < 4)),
                                 (1, ..., MASK1), (MASK2, ..., 1), (MASK2, None, ..., [0, 2, 1])],
                         ids=["mask2-E-list", "S-list-E-mask", "int-E-mask", "mask2-E-int", "mask2-N-E-list"])
def test_boolean_masks_next_to_an_empty_ellipsis(key):
    """A concrete boolean mask becomes integer arrays: they too are separated by an empty Ellipsis."""
    want = X3[key]
    for got, how in ((getitem(X3, key), "eager"), (ember.jit(lambda v: v[key])(X3), "jit")):
        assert got.shape == want.shape, f"{how}: shape {got.shape}, NumPy's {want.shape}"
        np.testing.assert_array_equal(got, want, err_msg=how)
