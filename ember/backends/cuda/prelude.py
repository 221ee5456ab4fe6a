"""The text put before every kernel source: the device prelude for NVRTC, the host header for g++.

Both give the kernel source the same names: `ember_half` (IEEE binary16 bits in an unsigned short),
`ember_h2f`, `ember_f2h` and `ember_d2h` (round to nearest even, the double one directly, so never
rounded twice), `ember_rh` (a float rounded to float16 and back: how each float16 op ends), CUDA's
bit casts, `__clz`/`__clzll` and `__popc`/`__popcll`, and <math.h> under its C names. On the device
the bit casts, the bit counts and the math are CUDA built-ins; the conversions are the PTX `cvt`
instructions, since the NVRTC wheel ships no cuda_fp16.h, except for NaNs: `cvt` makes every NaN the
canonical one, and NumPy keeps the sign and payload (a bitcast shows them; an H200 run found it).
On the host they are host.h's (software conversions, bit exact with NumPy).
"""

from __future__ import annotations

from importlib import resources

DEVICE_PRELUDE = r"""
typedef unsigned short ember_half;

__device__ __forceinline__ float ember_h2f(ember_half h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    if ((h & 0x7fffu) > 0x7c00u)  // a NaN keeps its sign and payload (cvt gives the canonical NaN)
        f = __int_as_float(((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13));
    return f;
}

// A NaN's binary16: its sign and its payload's top 10 bits (at least 1), as NumPy's conversion.
__device__ __forceinline__ ember_half ember_nan2h(unsigned int sign, unsigned int top) {
    unsigned int payload = top & 0x3ffu;
    return (ember_half)(sign | 0x7c00u | (payload ? payload : 1u));
}

__device__ __forceinline__ ember_half ember_f2h(float x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    if (x != x) {
        unsigned int bits = __float_as_uint(x);
        h = ember_nan2h((bits >> 16) & 0x8000u, bits >> 13);
    }
    return h;
}

__device__ __forceinline__ ember_half ember_d2h(double x) {
    unsigned short h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(x));
    if (x != x) {
        unsigned long long bits = (unsigned long long)__double_as_longlong(x);
        h = ember_nan2h((unsigned int)(bits >> 48) & 0x8000u, (unsigned int)(bits >> 42));
    }
    return h;
}

__device__ __forceinline__ float ember_rh(float x) { return ember_h2f(ember_f2h(x)); }
"""

HOST_HEADER_NAME = "host.h"


def host_header() -> str:
    """The C++20 header that runs the same kernel source on the CPU (ember/backends/cuda/host.h)."""
    return resources.files(__package__).joinpath(HOST_HEADER_NAME).read_text()
