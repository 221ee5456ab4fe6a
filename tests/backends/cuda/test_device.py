"""The cuda backend as users call it: `jit(f, backend="cuda")` and EMBER_BACKEND=cuda with NumPy or CuPy
arrays in, CuPy arrays out, `out=`, grad and vmap, in-place plans, cuBLAS contractions and concurrent
streams, every result against the numpy backend. Without a device these skip (EMBER_REQUIRE_GPU=1 makes
that a failure); the error a user gets without one is tested here too."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cuda import runtime

gpu = pytest.mark.gpu


def _ref(f, *args, **kw):
    return ember.jit(f, backend="numpy", optimize=False, **kw)(*args)


@pytest.mark.skipif(runtime.device_available(), reason="a device is present: the missing-device error cannot show")
def test_without_a_device_the_error_says_what_is_missing():
    f = ember.jit(lambda x: jnp.sin(x), backend="cuda")
    with pytest.raises(runtime.CudaUnavailableError) as e:
        f(np.ones(3, np.float32))
    msg = str(e.value)
    assert "CUDA" in msg and ("driver" in msg or "device" in msg or "pip install" in msg)


@pytest.fixture
def cp():
    if not runtime.device_available():
        pytest.skip(f"no GPU: {runtime.missing_reason()}")
    return runtime.cupy_module()


def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


@gpu
def test_numpy_in_cupy_out(cp):
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    f = ember.jit(lambda x: jnp.tanh(x) * 2.0 + jnp.exp(-x * x).sum(), backend="cuda")
    got = f(x)
    assert isinstance(got, cp.ndarray)
    np.testing.assert_allclose(got.get(), _ref(lambda x: jnp.tanh(x) * 2.0 + jnp.exp(-x * x).sum(), x), rtol=2e-6)


@gpu
def test_cupy_in_any_layout(cp):
    a = cp.arange(12, dtype=cp.float64).reshape(3, 4).T  # not C-contiguous
    f = ember.jit(lambda x: jnp.sin(x).sum(axis=0), backend="cuda")
    np.testing.assert_allclose(f(a).get(), np.sin(a.get()).sum(axis=0), rtol=1e-13)


@gpu
def test_env_selects_cuda(cp, monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "cuda")
    got = ember.jit(lambda x: x * 3.0)(np.ones(5, np.float32))
    assert isinstance(got, cp.ndarray)


@gpu
def test_out_accepts_cupy(cp):
    f = ember.jit(lambda x: jnp.exp(x), backend="cuda")
    x = cp.ones(64, cp.float32)
    lowered = f.lower(x).compile()
    out = cp.empty(64, cp.float32)
    assert lowered(x, out=out) is out
    np.testing.assert_allclose(out.get(), np.e, rtol=1e-6)


@gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grad_and_per_sample_grads(cp, dtype):
    rng = np.random.default_rng(0)
    params = [rng.standard_normal(s).astype(dtype) * 0.3 for s in ((10, 32), (32,), (32, 10), (10,))]
    x, y = rng.standard_normal((256, 10)).astype(dtype), rng.standard_normal((256, 10)).astype(dtype)
    g = ember.jit(ember.grad(mlp_loss), backend="cuda")(params, x, y)
    want = _ref(ember.grad(mlp_loss), params, x, y)
    tol = 2e-5 if dtype == np.float32 else 1e-11
    for a, b in zip(g, want):
        np.testing.assert_allclose(a.get(), b, rtol=tol, atol=tol)
    per = ember.vmap(ember.grad(mlp_loss), in_axes=(None, 0, 0))
    got = ember.jit(per, backend="cuda")(params, x[:, None], y[:, None])
    for a, b in zip(got, _ref(per, params, x[:, None], y[:, None])):
        np.testing.assert_allclose(a.get(), b, rtol=tol, atol=tol)


@gpu
def test_in_place_activation_and_donation(cp):
    rng = np.random.default_rng(1)
    w, x, b = (rng.standard_normal(s).astype(np.float32) for s in ((256, 128), (128, 64), (256, 1)))
    f = ember.jit(lambda w, x, b: jnp.tanh(w @ x + b), backend="cuda", donate_argnums=(2,))
    got = f(cp.asarray(w), cp.asarray(x), cp.asarray(b))
    np.testing.assert_allclose(got.get(), np.tanh(w @ x + b), rtol=1e-5, atol=1e-5)


@gpu
def test_float16_and_integer_paths(cp):
    x = (np.arange(300, dtype=np.float16) / 100).reshape(3, 100)
    f = lambda x: (jnp.sin(x) * x).sum(axis=1)  # noqa: E731
    np.testing.assert_allclose(ember.jit(f, backend="cuda")(x).get().astype(np.float32),
                               _ref(f, x).astype(np.float32), rtol=2e-3)
    i = np.arange(-50, 50, dtype=np.int32)
    g = lambda i: (i * 7 // 3, jnp.argmax(i % 11))  # noqa: E731
    for a, b in zip(ember.jit(g, backend="cuda")(i), _ref(g, i)):
        np.testing.assert_array_equal(a.get(), b)


@gpu
def test_large_reductions_and_matmul(cp):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1 << 20,)).astype(np.float32)
    f = ember.jit(lambda x: (x.sum(), jnp.max(x), jnp.argmin(x)), backend="cuda")
    s, m, a = f(x)
    assert abs(float(s.get()) - float(x.astype(np.float64).sum())) < 1e-3 * np.sqrt(x.size)
    assert float(m.get()) == x.max() and int(a.get()) == int(np.argmin(x))
    assert float(f(x)[0].get()) == float(s.get())  # deterministic: no float atomics in a sum
    a, b = rng.standard_normal((512, 300)), rng.standard_normal((300, 200))
    got = ember.jit(lambda a, b: a @ b, backend="cuda")(a, b)
    np.testing.assert_allclose(got.get(), a @ b, rtol=1e-12, atol=1e-12)


@gpu
def test_calls_on_two_streams(cp):
    f = ember.jit(lambda x: jnp.tanh(x * 2.0).sum() + x, backend="cuda")
    xs = [cp.full(1 << 16, k, cp.float32) for k in range(4)]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    outs = []
    for k, x in enumerate(xs):
        with streams[k % 2]:
            outs.append(f(x))
    cp.cuda.Device().synchronize()
    for k, o in enumerate(outs):
        want = np.tanh(np.float32(2 * k)) * (1 << 16) + k
        np.testing.assert_allclose(o.get(), want, rtol=1e-5)


def test_which_contractions_go_to_cublas():
    """float32/float64 contractions with enough work per batch element go to cuBLAS; small batched ones
    (the cosine workload's 16x4x64 per batch element) and other dtypes run the contraction kernel."""
    from ember.backends.cuda.executable import CupyDevice
    from ember.backends.cuda.render import Gemm
    from ember.backends.kernel import Buffer, Contraction

    def gemm(lhs, rhs, dn, dtype=np.float32):
        b = [Buffer(n, s, np.dtype(dtype)) for n, s in (("in0", lhs), ("in1", rhs), ("out0", ()))]
        return Gemm(Contraction("in0", "in1", dn, "out0"), *b, fallback=None)

    dev = CupyDevice(module=None)
    matmul = (((1,), (0,)), ((), ()))
    batched = (((2,), (2,)), ((0,), (0,)))
    assert dev.can_gemm(gemm((4096, 4096), (4096, 4096), matmul))
    assert dev.can_gemm(gemm((65536, 10), (10, 32), matmul, np.float64))
    assert not dev.can_gemm(gemm((4096, 16, 64), (4096, 4, 64), batched))
    assert not dev.can_gemm(gemm((4096, 4096), (4096, 4096), matmul, np.float16))
    assert not dev.can_gemm(gemm((8, 8), (8, 8), matmul))
