"""The CuPy glue: what is missing when no kernel can run (CuPy, the driver, a device), the checks on
kernel arguments, the GPU marker's skip (a failure under EMBER_REQUIRE_GPU=1), and one kernel run
through load_module and launch on a device."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from ember.backends.cuda import runtime
from ember.backends.cuda.runtime import CudaUnavailableError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

ADD = """extern "C" __global__ void axpy(float* y, const float* x, float a, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] += a * x[i];
}
"""


@pytest.fixture
def fresh_reason():
    """missing_reason is found once per process: forget it around a test that fakes what is installed."""
    runtime.missing_reason.cache_clear()
    yield
    runtime.missing_reason.cache_clear()


def fake_cupy(driver: int = 13000, count=1):
    """A stand-in for the cupy module with a driver of version `driver` and `count` devices (an
    exception instance: getDeviceCount raises it)."""
    def device_count():
        if isinstance(count, Exception):
            raise count
        return count

    cuda_runtime = SimpleNamespace(driverGetVersion=lambda: driver, getDeviceCount=device_count,
                                   runtimeGetVersion=lambda: 13020)
    return SimpleNamespace(cuda=SimpleNamespace(runtime=cuda_runtime))


def test_missing_cupy_says_what_to_install(monkeypatch, fresh_reason):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    with pytest.raises(CudaUnavailableError, match=r'pip install -e "\.\[cuda\]"') as info:
        runtime.cupy_module()
    assert "cupy-cuda13x" in info.value.message and "nvidia-cuda-nvrtc" in info.value.message
    assert not runtime.device_available()
    with pytest.raises(CudaUnavailableError, match=r"cannot run: the CUDA backend needs CuPy: pip install"):
        runtime.require_device()


@pytest.mark.parametrize("driver, count, expected", [
    (0, 1, "no CUDA driver was found"),
    (13000, 0, "no CUDA device was found"),
    (13000, RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected"), "no CUDA device was found"),
    (12020, RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient"),
     r"the CUDA driver \(version 12020\) cannot run CuPy's CUDA runtime \(version 13020\)"),
])
def test_missing_driver_or_device_is_named(monkeypatch, fresh_reason, driver, count, expected):
    monkeypatch.setattr(runtime, "cupy_module", lambda: fake_cupy(driver, count))
    assert not runtime.device_available()
    with pytest.raises(CudaUnavailableError, match=expected):
        runtime.require_device()
    with pytest.raises(CudaUnavailableError, match=expected):
        runtime.device_arch()


def test_a_driver_and_a_device_are_enough(monkeypatch, fresh_reason):
    monkeypatch.setattr(runtime, "cupy_module", lambda: fake_cupy())
    assert runtime.missing_reason() is None and runtime.device_available()
    runtime.require_device()


def test_device_available_never_raises(monkeypatch, fresh_reason):
    def broken_driver():
        raise OSError("libcuda.so.1: cannot open shared object file")

    cupy = fake_cupy()
    cupy.cuda.runtime.driverGetVersion = broken_driver
    monkeypatch.setattr(runtime, "cupy_module", lambda: cupy)
    assert runtime.device_available() is False
    assert "libcuda.so.1" in runtime.missing_reason()


@pytest.mark.parametrize("arg, words", [
    (3, "Python int (3): pass a NumPy scalar"),
    (2.5, "Python float (2.5)"),
    (True, "Python bool (True)"),
    (np.zeros(3, np.float32), "NumPy array (host memory)"),
    ("x", "a kernel takes CuPy arrays and NumPy scalars"),
])
def test_launch_arguments_refuse_python_scalars_and_host_arrays(arg, words):
    pytest.importorskip("cupy")
    with pytest.raises(TypeError, match=r"kernel argument 1 is a .*" + words.replace("(", r"\(").replace(")", r"\)")):
        runtime.check_args((np.float32(1), arg))


def test_launch_arguments_take_numpy_scalars_of_every_type():
    pytest.importorskip("cupy")
    args = (np.float32(1), np.float64(2), np.int32(3), np.int64(4), np.uint8(5), np.bool_(True), np.float16(1))
    assert runtime.check_args(list(args)) == args


@pytest.mark.parametrize("value, dims", [(4, (4,)), ((2, 3), (2, 3)), (np.int64(7), (7,)), ([1, 2, 3], (1, 2, 3))])
def test_launch_dims(value, dims):
    assert runtime._dims(value, "grid") == dims


@pytest.mark.parametrize("value", [0, (), (1, 2, 3, 4), (2, -1), (2.0,)])
def test_launch_dims_refused(value):
    with pytest.raises(ValueError, match="grid must be 1 to 3 positive ints"):
        runtime._dims(value, "grid")


def test_require_gpu_turns_the_skip_into_a_failure():
    """Run the GPU test below in a child pytest under EMBER_REQUIRE_GPU=1: it passes on a GPU machine,
    and elsewhere fails with the reason (rather than skipping)."""
    env = {**os.environ, "EMBER_REQUIRE_GPU": "1", "PYTHONPATH": ROOT}
    test = "tests/backends/cuda/test_runtime.py::test_a_kernel_runs_on_the_device"
    done = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-q", test],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if runtime.device_available():
        assert done.returncode == 0, done.stdout
    else:
        assert done.returncode == 1, done.stdout
        assert "EMBER_REQUIRE_GPU=1 but this test needs a GPU: " + runtime.missing_reason() in done.stdout


@pytest.mark.gpu
def test_a_kernel_runs_on_the_device():
    cupy = runtime.cupy_module()
    assert runtime.device_arch().startswith("sm_")
    module = runtime.load_module(ADD)
    assert runtime.load_module(ADD) is module  # cached by source hash
    n = 100_003
    x = cupy.arange(n, dtype=cupy.float32)
    y = cupy.ones(n, dtype=cupy.float32)
    runtime.launch(module, "axpy", 64, 256, (y, x, np.float32(2), np.int64(n)))
    cupy.cuda.get_current_stream().synchronize()  # a non-blocking stream does not wait for the default one
    stream = cupy.cuda.Stream(non_blocking=True)
    runtime.launch(module, "axpy", (32,), (128,), (y, x, np.float32(1), np.int64(n)), stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(y), 1 + 3 * np.arange(n, dtype=np.float32))
    with pytest.raises(TypeError, match="Python float"):
        runtime.launch(module, "axpy", 1, 1, (y, x, 2.0, np.int64(n)))
