"""ember.nn.initializers against jax.nn.initializers 0.10.2: the arrays JAX creates from fixed keys
(recorded by tests/nn/record_jax.py in tests/nn/jax_values.json; the cases are in tests/nn/cases.py),
so the same key gives the same weights; the statistics each promises (the variance scale / fan of
glorot, he and lecun, their bounds), the fans of convolution kernels with in_axis/out_axis/batch_axis,
orthogonality, shapes and dtypes, jit and vmap over keys, init_mlp with a key, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.random as random
from ember.errors import ArgumentValueError, DTypeError
from ember.nn import initializers as init
from ember.nn.initializers import _compute_fans
from tests.helpers import raises_naming
from tests.nn import cases as C

TOL = {"float32": 2e-6, "float64": 1e-13}


@pytest.fixture(autouse=True)
def numpy_backend(monkeypatch):
    """The numpy backend, the reference: sampling needs nothing compiled (jit has its own test)."""
    monkeypatch.setenv("EMBER_BACKEND", "numpy")


@pytest.mark.parametrize("cid,x64", [(cid, False) for cid in sorted(C.INITIALIZERS)]
                         + [(cid, True) for cid in C.INITIALIZERS_X64])
def test_the_same_key_gives_jax_weights(cid, x64):
    """JAX's numbers from the same key (in 64-bit mode with `x64`, where the default dtype is float64)."""
    make, args = C.make_initializer(init, cid)
    with ember.enable_x64(x64):
        got = np.asarray(make(C.make_key(random, cid), *args))
    want = C.decode(C.recorded()["initializers_x64" if x64 else "initializers"][cid])
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    tol = TOL.get(want.dtype.name, 0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


def test_aliases_and_the_protocol():
    assert init.xavier_uniform is init.glorot_uniform and init.xavier_normal is init.glorot_normal
    assert init.kaiming_uniform is init.he_uniform and init.kaiming_normal is init.he_normal
    assert isinstance(init.glorot_uniform(), init.Initializer) and nn.initializers is init
    with pytest.raises(AttributeError, match=r"no attribute 'glorot' \(nor has jax.nn.initializers\).*glorot_"):
        init.glorot  # noqa: B018


# --- fans and statistics --------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axes,fans", [
    ((3, 4), {}, (3, 4)),                                             # dense: (in, out)
    ((3, 3, 2, 4), {}, (18, 36)),                                     # conv HWIO: window 9 times in, out
    ((4, 2, 3, 3), {"in_axis": 1, "out_axis": 0}, (18, 36)),          # conv OIHW
    ((2, 3, 5), {"batch_axis": 0}, (3, 5)),                           # a batch of dense weights
    ((3, 2, 2), {"in_axis": 0, "out_axis": (1, 2)}, (3, 4)),          # grouped output axes
    ((6,), {"in_axis": 0, "out_axis": 0}, (1, 1)),                    # a vector, axes given: as JAX counts
])
def test_fans(shape, axes, fans):
    assert _compute_fans(shape, **axes) == pytest.approx(fans)


@pytest.mark.parametrize("builder,scale,mode,truncated", [
    (init.glorot_uniform, 1.0, "fan_avg", False), (init.glorot_normal, 1.0, "fan_avg", True),
    (init.he_uniform, 2.0, "fan_in", False), (init.he_normal, 2.0, "fan_in", True),
    (init.lecun_uniform, 1.0, "fan_in", False), (init.lecun_normal, 1.0, "fan_in", True),
])
def test_variance_is_scale_over_the_fan(builder, scale, mode, truncated):
    """A (5, 5, 16, 100) kernel: fan_in 400, fan_out 2500. The sample variance is scale / fan within 3%
    (40000 draws: more than 4 standard errors), and no draw passes the distribution's bound."""
    w = np.asarray(builder()(random.PRNGKey(0), (5, 5, 16, 100)), np.float64)
    fan = {"fan_in": 400, "fan_avg": 1450}[mode]
    assert abs(w.var() / (scale / fan) - 1) < 0.03, w.var() * fan / scale
    assert abs(w.mean()) < 4 * math.sqrt(scale / fan / w.size)
    bound = 2 * math.sqrt(scale / fan) / 0.87962566103423978 if truncated else math.sqrt(3 * scale / fan)
    assert np.abs(w).max() <= bound * (1 + 1e-6)
    assert np.abs(w).max() > 0.9 * bound  # and the samples reach out to it


def test_plain_distributions_keep_their_scale():
    key = random.PRNGKey(3)
    u = np.asarray(init.uniform(5.0)(key, (20000,)))
    assert 0 <= u.min() and u.max() < 5.0 and abs(u.mean() - 2.5) < 0.05
    g = np.asarray(init.normal(2.0)(key, (20000,)))
    assert abs(g.std() - 2.0) < 0.05
    t = np.asarray(init.truncated_normal(2.0, lower=-1.0, upper=0.5)(key, (20000,)))
    assert -2.0 < t.min() and t.max() < 1.0  # the bounds apply before the stddev


# --- orthogonal ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,column_axis", [((8, 8), -1), ((6, 3), -1), ((3, 6), -1), ((3, 3, 4, 8), -1),
                                               ((5, 2, 3), 0)])
def test_orthogonal_rows_or_columns(shape, column_axis):
    q = np.asarray(init.orthogonal(scale=2.0, column_axis=column_axis)(random.PRNGKey(1), shape))
    assert q.shape == shape and q.dtype == np.float32
    m = np.moveaxis(q, column_axis, -1).reshape(-1, shape[column_axis]).astype(np.float64)  # rows x columns
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(len(gram)), atol=2e-6)


def test_delta_orthogonal_is_orthogonal_at_the_centre_only():
    w = np.asarray(init.delta_orthogonal()(random.PRNGKey(2), (3, 5, 4, 6)))
    centre = w[1, 2]
    np.testing.assert_allclose(centre @ centre.T, np.eye(4), atol=2e-6)
    w[1, 2] = 0
    assert not w.any()


# --- shapes, dtypes, jit and vmap ----------------------------------------------------------------

BUILDERS = [init.glorot_uniform(), init.glorot_normal(), init.he_normal(), init.lecun_uniform(), init.normal(),
            init.uniform(), init.truncated_normal(), init.orthogonal(), init.constant(1.5), init.zeros, init.ones]


@pytest.mark.parametrize("dtype", [None, np.float32, np.float64])
def test_shapes_and_dtypes(dtype):
    key = random.PRNGKey(0)
    for make in BUILDERS:
        out = make(key, [4, 3]) if dtype is None else make(key, (4, 3), dtype)
        assert out.shape == (4, 3) and out.dtype == (dtype or np.float32), make
    assert init.zeros(key, 3).shape == (3,) and init.constant(2, dtype=np.int32)(key, (2,)).dtype == np.int32
    assert init.glorot_uniform(dtype=np.float64)(key, (2, 2)).dtype == np.float64  # the builder's default


def test_jit_and_vmap_over_keys(monkeypatch):
    """Under jit (the key traced, the shape static) on the LLVM backend, and vmapped over a batch of keys,
    an initializer gives what it gives eagerly."""
    monkeypatch.setenv("EMBER_BACKEND", "llvm")
    make = init.he_uniform()
    keys = random.split(random.PRNGKey(4), 3)
    eager = np.stack([np.asarray(make(k, (3, 4))) for k in keys])
    np.testing.assert_allclose(ember.jit(make, static_argnums=1)(keys[0], (3, 4)), eager[0], rtol=1e-6)
    np.testing.assert_allclose(ember.vmap(lambda k: make(k, (3, 4)))(keys), eager, rtol=1e-6)
    ortho = init.orthogonal()
    np.testing.assert_allclose(ember.jit(ortho, static_argnums=1)(keys[1], (4, 3)), ortho(keys[1], (4, 3)),
                               atol=1e-6)


def test_init_mlp_with_a_key_draws_jax_stream():
    params = nn.init_mlp([3, 5, 2], key=random.PRNGKey(0))
    keys = random.split(random.PRNGKey(0), 2)
    scaling = init.variance_scaling(1.0, "fan_in", "normal")
    for (w, b), k, shape in zip(params, keys, [(3, 5), (5, 2)]):
        np.testing.assert_array_equal(w, scaling(k, shape))
        assert w.dtype == b.dtype == np.float32 and b.shape == shape[1:] and not np.asarray(b).any()
    assert nn.init_mlp([4], key=random.PRNGKey(0)) == []
    assert nn.init_mlp([2, 2], key=random.PRNGKey(0), dtype=np.float64)[0][0].dtype == np.float64


# --- errors ---------------------------------------------------------------------------------------

def test_errors_name_the_users_line():
    here = "test_nn_initializers.py"
    key = random.PRNGKey(0)
    raises_naming(ArgumentValueError, lambda: init.variance_scaling(1.0, "fan_max", "normal"), words=["'fan_max'"],
                  location=here)
    raises_naming(ArgumentValueError, lambda: init.variance_scaling(1.0, "fan_in", "cauchy"), words=["'cauchy'"],
                  location=here)
    raises_naming(ArgumentValueError, lambda: init.glorot_normal()(key, (5,)), words=["1-dimensional", "in_axis"],
                  location=here)
    raises_naming(ArgumentValueError, lambda: init.glorot_normal(in_axis=3)(key, (5, 2)), words=["in_axis=3"],
                  location=here)
    raises_naming(DTypeError, lambda: init.normal()(key, (2,), np.int32), words=["int32"], location=here)
    raises_naming(ArgumentValueError, lambda: init.orthogonal()(key, (3,)), words=["2D"], location=here)
    raises_naming(ArgumentValueError, lambda: init.delta_orthogonal()(key, (3, 3)), words=["3D, 4D or 5D"],
                  location=here)
    raises_naming(ArgumentValueError, lambda: init.delta_orthogonal()(key, (3, 4, 2)), words=["fan_in"],
                  location=here)
    assert issubclass(ArgumentValueError, ValueError) and issubclass(DTypeError, TypeError)  # JAX's classes
