"""The text put before every kernel source: the device prelude for NVRTC, the host header for g++.

Both give the kernel source the same names: `ember_half` (IEEE binary16 bits in an unsigned short),
`ember_h2f`, `ember_f2h` and `ember_d2h` (round to nearest even, the double one directly, so never
rounded twice), `ember_rh` (a float rounded to float16 and back: how each float16 op ends), CUDA's
bit casts, `__clz`/`__clzll` and `__popc`/`__popcll`, and <math.h> under its C names. On the device
the bit casts, the bit counts and the math are CUDA built-ins; the conversions are the PTX `cvt`
instructions, since the NVRTC wheel ships no cuda_fp16.h. On the host they are host.h's (software
conversions, bit exact with NumPy).
"""

from __future__ import annotations

from importlib import resources

DEVICE_PRELUDE = r"""
typedef unsigned short ember_half;

__device__ __forceinline__ float ember_h2f(ember_half h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ ember_half ember_f2h(float x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return h;
}

__device__ __forceinline__ ember_half ember_d2h(double x) {
    unsigned short h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(x));
    return h;
}

__device__ __forceinline__ float ember_rh(float x) { return ember_h2f(ember_f2h(x)); }
"""

HOST_HEADER_NAME = "host.h"


def host_header() -> str:
    """The C++20 header that runs the same kernel source on the CPU (ember/backends/cuda/host.h)."""
    return resources.files(__package__).joinpath(HOST_HEADER_NAME).read_text()
