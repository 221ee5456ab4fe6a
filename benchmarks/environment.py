"""Where and with what a table was measured: date, machine, CPU model, versions."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from importlib import metadata

from benchmarks.peers import Peer


def cpu_model() -> str:
    """The CPU's model name as `lscpu` reports it (or /proc/cpuinfo, or platform.processor())."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def collect(peers: dict[str, Peer]) -> dict:
    """A JSON-able description of this run's environment."""
    import numpy

    import ember

    versions = {"python": platform.python_version(), "numpy": numpy.__version__, "ember": ember.__version__}
    for name, peer in peers.items():
        versions[name] = peer.version if peer.available else (peer.status or "").split(":")[0]
    if peers["jax"].available:
        versions["jaxlib"] = _version("jaxlib")
    return {
        "date": datetime.date.today().isoformat(),
        "time": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()}-core {platform.machine()}, {cpu_model()}",
        "os": f"{platform.system()} {platform.release()}",
        "versions": versions,
        "command": " ".join(["python -m benchmarks"] + sys.argv[1:]),
        "load_start": load_average(),
    }


def load_average() -> float | None:
    """The 1-minute load average (other processes on the machine perturb the timings)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def blas_description() -> str:
    """The OpenBLAS builds loaded (SciPy's, which the llvm backend calls, and NumPy's) and the kernel
    each chose: `OPENBLAS_CORETYPE` can force one (this machine's environment sets Haswell, AVX2,
    where OpenBLAS would pick SkylakeX, AVX-512: sgemm runs about 2x slower)."""
    import ctypes

    import scipy.linalg  # noqa: F401 (loads SciPy's OpenBLAS)

    found = []
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({line.split()[-1] for line in f if "openblas" in line and line.rstrip().endswith(".so")})
    except OSError:
        return "unknown"
    for path in libs:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_corename", "scipy_openblas_get_corename64_", "openblas_get_corename"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                found.append(f"{os.path.basename(path)}: {fn().decode()}")
                break
    forced = os.environ.get("OPENBLAS_CORETYPE")
    return ", ".join(found) + (f" (OPENBLAS_CORETYPE={forced})" if forced else "") if found else "unknown"
