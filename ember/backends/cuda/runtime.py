"""The device side of the CUDA backend through CuPy: is there a device, which architecture, load a
kernel source as a module, launch a kernel with checked arguments. Everything is lazy: CuPy is
imported at the first call that needs it, never by importing this module.

Modules are compiled by `nvrtc.compile_cubin` for the current device's architecture (its disk cache is
the only one on disk) and loaded by `cupy.RawModule(path=...)`, CuPy 14's way to load a cubin, from a
copy in a directory of this process (removed at exit), so no eviction of the disk cache can remove a
file CuPy still has to load (it loads per device, on first use there). Loaded modules are cached in
memory by the source's SHA-256 and the architecture.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import numbers
import shutil
import tempfile
import threading
from pathlib import Path

import numpy as np

from ember.backends.cuda import nvrtc
from ember.backends.cuda.nvrtc import INSTALL, CudaUnavailableError

__all__ = ["CudaUnavailableError", "cupy_module", "device_arch", "device_available", "launch", "load_module",
           "missing_reason", "require_device"]


def cupy_module():
    """The `cupy` module; CudaUnavailableError saying what to install if it cannot be imported."""
    try:
        import cupy
    except ImportError as e:
        raise CudaUnavailableError(f"the CUDA backend needs CuPy: {INSTALL} (it installs cupy-cuda13x and the NVRTC "
                                   f"wheel nvidia-cuda-nvrtc); importing cupy failed: {e}") from e
    return cupy


@functools.cache
def missing_reason() -> str | None:
    """What keeps this process from running kernels on a GPU (CuPy, the driver, a device), or None
    when one is there. Found once per process; never raises."""
    try:
        cupy = cupy_module()
    except CudaUnavailableError as e:
        return e.message
    runtime = cupy.cuda.runtime
    try:
        driver = runtime.driverGetVersion()
    except Exception as e:  # noqa: BLE001 - any failure here means no usable driver
        return f"the CUDA driver could not be queried ({type(e).__name__}: {e})"
    if driver == 0:
        return "no CUDA driver was found (install the NVIDIA driver; CuPy is installed)"
    try:
        count = runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - cudaErrorNoDevice, cudaErrorInsufficientDriver, ...
        if "NoDevice" in str(e):
            return "no CUDA device was found"
        return (f"the CUDA driver (version {driver}) cannot run CuPy's CUDA runtime "
                f"(version {runtime.runtimeGetVersion()}): {e}")
    return None if count > 0 else "no CUDA device was found"


def device_available() -> bool:
    """Whether CuPy imports, a CUDA driver is present and at least one device is found; never raises."""
    return missing_reason() is None


def require_device() -> None:
    """Return if a device can run kernels; else CudaUnavailableError saying what is missing."""
    reason = missing_reason()
    if reason is not None:
        raise CudaUnavailableError(f"the CUDA backend cannot run: {reason}")


def device_arch() -> str:
    """The NVRTC architecture of the current device, e.g. "sm_90" for compute capability 9.0."""
    require_device()
    return f"sm_{cupy_module().cuda.Device().compute_capability}"


_modules: dict[tuple[str, str], object] = {}
_kernels: dict[tuple[object, str], object] = {}
_lock = threading.Lock()
_module_dir: Path | None = None


def _cubin_file(key: str, cubin: bytes) -> str:
    """A file holding `cubin` for the life of the process (a directory of its own, removed at exit)."""
    global _module_dir
    with _lock:
        if _module_dir is None:
            _module_dir = Path(tempfile.mkdtemp(prefix="ember-cuda-modules-"))
            atexit.register(shutil.rmtree, _module_dir, ignore_errors=True)
    path = _module_dir / f"{key}.cubin"
    if not path.exists():
        tmp = path.with_suffix(f".tmp-{threading.get_ident()}")
        tmp.write_bytes(cubin)
        tmp.replace(path)
    return str(path)


def load_module(source: str):
    """`source` compiled for the current device and loaded as a `cupy.RawModule` (cached by the source's
    hash and the architecture; CudaCompileError if NVRTC rejects it)."""
    arch = device_arch()
    key = (hashlib.sha256(source.encode()).hexdigest(), arch)
    module = _modules.get(key)
    if module is None:
        cubin = nvrtc.compile_cubin(source, arch)
        module = cupy_module().RawModule(path=_cubin_file(f"{key[0]}-{arch}", cubin))
        module.module  # noqa: B018 - load it now, so a bad cubin fails here rather than at the first launch
        with _lock:
            module = _modules.setdefault(key, module)
    return module


def check_args(args: tuple | list) -> tuple:
    """`args` as a kernel takes them: CuPy arrays and NumPy scalars (of the kernel's exact types) pass;
    Python numbers are refused (CuPy would pass an int as long long, a float as double), as is anything
    else (a NumPy array is on the host: copy it to the device first)."""
    cupy = cupy_module()
    for i, arg in enumerate(args):
        if isinstance(arg, (cupy.ndarray, np.generic)):
            continue
        if isinstance(arg, (bool, numbers.Number)):
            raise TypeError(f"kernel argument {i} is a Python {type(arg).__name__} ({arg!r}): pass a NumPy scalar of "
                            "the kernel's parameter type (np.int32(...), np.float32(...)); CuPy would pass a Python "
                            "int as long long and a float as double")
        if isinstance(arg, np.ndarray):
            raise TypeError(f"kernel argument {i} is a NumPy array (host memory): copy it to the device with "
                            "cupy.asarray, or pass a 0-d value as a NumPy scalar (arr[()])")
        raise TypeError(f"kernel argument {i} is a {type(arg).__name__}: a kernel takes CuPy arrays and NumPy scalars")
    return tuple(args)


def _dims(value, what: str) -> tuple[int, ...]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
        raise ValueError(f"{what} must be 1 to 3 positive ints, got {value!r}")
    return tuple(int(d) for d in dims)


def launch(module, name: str, grid, block, args, stream=None, shared_mem: int = 0) -> None:
    """Launch kernel `name` of `module` (from load_module) on `stream` (default: CuPy's current stream),
    asynchronously; `grid` and `block` are an int or up to three ints, `args` checked by check_args."""
    args = check_args(args)
    grid, block = _dims(grid, "grid"), _dims(block, "block")
    kernel = _kernels.get((module, name))
    if kernel is None:
        kernel = _kernels.setdefault((module, name), module.get_function(name))
    if stream is None:
        kernel(grid, block, args, shared_mem=shared_mem)
    else:
        with stream:
            kernel(grid, block, args, shared_mem=shared_mem)
