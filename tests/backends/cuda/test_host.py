"""Host execution of CUDA kernel source (host.h through g++), and the device prelude through NVRTC.

One module holds every kernel here and is compiled once (the `module` fixture); the same source,
behind DEVICE_PRELUDE, also compiles to cubin for sm_90, so what runs on the CPU is what would run on
the GPU. Reductions, shuffles and atomics are executed by real threads and checked exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from ember.backends.cuda import host
from ember.backends.cuda.host import HostCompileError, HostModule, KernelSig
from ember.backends.cuda.prelude import DEVICE_PRELUDE, host_header

FULL = "0xffffffffu"

SOURCE = r"""
// Each block sums one row: a strided walk per thread, a warp tree of shuffles, the warps' partial sums
// through shared memory, then the first warp's tree.
extern "C" __global__ void __launch_bounds__(1024) row_sum(const float* x, float* out, long long cols) {
    __shared__ float partial[32];
    const float* row = x + blockIdx.x * cols;
    unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    float acc = 0.0f;
    for (long long j = tid; j < cols; j += threads)
        acc += row[j];
    for (int offset = 16; offset > 0; offset /= 2)
        acc += __shfl_down_sync(FULL, acc, offset);
    if (tid % 32 == 0)
        partial[tid / 32] = acc;
    __syncthreads();
    if (tid < 32) {
        acc = tid < threads / 32 ? partial[tid] : 0.0f;
        for (int offset = 16; offset > 0; offset /= 2)
            acc += __shfl_down_sync(FULL, acc, offset);
        if (tid == 0)
            out[blockIdx.x] = acc;
    }
}

template <class T>
__device__ void shuffles(const T* x, T* out, int lane_arg, int width) {
    unsigned n = gridDim.x * blockDim.x, t = blockIdx.x * blockDim.x + threadIdx.x;
    T v = x[t];
    out[t] = __shfl_down_sync(FULL, v, lane_arg, width);
    out[n + t] = __shfl_up_sync(FULL, v, lane_arg, width);
    out[2 * n + t] = __shfl_xor_sync(FULL, v, lane_arg, width);
    out[3 * n + t] = __shfl_sync(FULL, v, lane_arg, width);
}

extern "C" __global__ void shuffles_f32(const float* x, float* out, int lane_arg, int width) {
    shuffles(x, out, lane_arg, width);
}
extern "C" __global__ void shuffles_f64(const double* x, double* out, int lane_arg, int width) {
    shuffles(x, out, lane_arg, width);
}
extern "C" __global__ void shuffles_i64(const long long* x, long long* out, int lane_arg, int width) {
    shuffles(x, out, lane_arg, width);
}

// Every thread adds into shared counters; ints must come out exact whatever the interleaving.
extern "C" __global__ void atomics(const int* bins, int* hist, int* i32, unsigned* u32,
                                   unsigned long long* u64, float* f32, double* f64, long long* extremes) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&hist[bins[t]], 1);
    atomicAdd(i32, -1);
    atomicAdd(u32, t);
    atomicAdd(u64, 1ull << 40);
    atomicAdd(f32, 1.0f);
    atomicAdd(f64, 0.25);
    atomicMax(&extremes[0], (long long)t * 1000000007ll % 99991);
    atomicMin(&extremes[1], (long long)t * 1000000007ll % 99991);
    atomicMax((int*)&i32[1], (int)(t * 7u % 1001u));
    atomicMin((unsigned*)&u32[1], t + 5u);
}

// float16 additions through a compare-and-swap loop on the stored bits, as a float16 atomicAdd is built.
extern "C" __global__ void cas_counters(unsigned short* count, ember_half* total) {
    unsigned short old = *count, assumed;
    do {
        assumed = old;
        old = atomicCAS(count, assumed, (unsigned short)(assumed + 1));
    } while (old != assumed);
    old = *total;
    do {
        assumed = old;
        old = atomicCAS(total, assumed, ember_f2h(ember_h2f(assumed) + 0.5f));
    } while (old != assumed);
}

extern "C" __global__ void h2f(const ember_half* h, float* f, long long n) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        f[i] = ember_h2f(h[i]);
}
extern "C" __global__ void f2h(const float* f, ember_half* h, long long n) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        h[i] = ember_f2h(f[i]);
}
extern "C" __global__ void d2h(const double* d, ember_half* h, long long n) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        h[i] = ember_d2h(d[i]);
}
extern "C" __global__ void rh(const float* x, float* y, long long n) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = ember_rh(x[i]);
}

__device__ __forceinline__ unsigned linear(uint3 i, dim3 n) { return i.x + n.x * (i.y + n.y * i.z); }
__host__ __device__ __noinline__ unsigned reversed_lane(unsigned lane) { return 31 - lane; }

// Which block and thread each slot was written by, and a warp's lanes exchanging through shared memory.
extern "C" __global__ void indices(unsigned* __restrict__ ids, unsigned* __restrict__ swapped) {
    __shared__ unsigned lanes[1024];
    unsigned t = linear(threadIdx, blockDim), b = linear(blockIdx, gridDim);
    unsigned slot = b * blockDim.x * blockDim.y * blockDim.z + t;
    ids[slot] = b * 10000 + t;
    lanes[t] = slot;
    __syncwarp();
    swapped[slot] = lanes[t - t % 32 + reversed_lane(t % 32)];
}

// Threads past `active` return at once; the others still meet at __syncthreads, block after block.
extern "C" __global__ void early_exit(int* out, int active) {
    __shared__ int values[1024];
    int t = threadIdx.x;
    if (t >= active)
        return;
    values[t] = t * 100 + blockIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = values[active - 1 - t];
}

extern "C" __global__ void bits(const float* x, const double* d, int* out) {
    unsigned t = threadIdx.x;
    out[4 * t] = __clz(__float_as_int(x[t]));
    out[4 * t + 1] = __clzll(__double_as_longlong(d[t]));
    out[4 * t + 2] = __float_as_uint(__uint_as_float(__float_as_uint(x[t]))) == __float_as_uint(x[t]);
    out[4 * t + 3] = __longlong_as_double(__double_as_longlong(d[t])) == d[t]
                     && __int_as_float(__float_as_int(x[t])) == x[t];
}
""".replace("FULL", FULL)

KERNELS = [
    KernelSig("row_sum", ("const float*", "float*", "long long")),
    *(KernelSig(f"shuffles_{name}", (f"const {c}*", f"{c}*", "int", "int"))
      for name, c in (("f32", "float"), ("f64", "double"), ("i64", "long long"))),
    KernelSig("atomics", ("const int*", "int*", "int*", "unsigned*", "unsigned long long*", "float*", "double*",
                          "long long*")),
    KernelSig("cas_counters", ("unsigned short*", "ember_half*")),
    KernelSig("h2f", ("const ember_half* __restrict__", "float* __restrict__", "long long")),
    KernelSig("f2h", ("const float* __restrict__", "ember_half* __restrict__", "long long")),
    KernelSig("d2h", ("const double* __restrict__", "ember_half* __restrict__", "long long")),
    KernelSig("rh", ("const float*", "float*", "long long")),
    KernelSig("indices", ("unsigned*", "unsigned*")),
    KernelSig("early_exit", ("int*", "int")),
    KernelSig("bits", ("const float*", "const double*", "int*")),
]

rng = np.random.default_rng(25)


@pytest.fixture(scope="module")
def module() -> HostModule:
    return HostModule(SOURCE, KERNELS)


@pytest.mark.parametrize("block", [(32, 1, 1), (64, 1, 1), (96, 1, 1), (256, 1, 1), (1024, 1, 1), (32, 4, 2)])
def test_block_reduction(module, block):
    rows, cols = 5, 3001
    x = rng.integers(-8, 9, size=(rows, cols)).astype(np.float32)  # small integers: every order sums exactly
    out = np.full(rows, np.nan, np.float32)
    module.launch("row_sum", (rows, 1, 1), block, [x, out, np.int64(cols)])
    np.testing.assert_array_equal(out, x.sum(axis=1))


def shuffle_sources(lane_arg: int, width: int, threads: int) -> np.ndarray:
    """For each kind (down, up, xor, indexed) and thread, the thread whose value CUDA's shuffle returns:
    a source outside the caller's segment of `width` lanes (a later segment, for xor) gives its own."""
    t = np.arange(threads)
    lane, warp = t % 32, t - t % 32
    start = lane & ~(width - 1)
    down = np.where(lane - start + lane_arg < width, lane + lane_arg, lane)
    up = np.where(lane - start >= lane_arg, lane - lane_arg, lane)
    xor = np.where((lane ^ lane_arg) < start + width, lane ^ lane_arg, lane)
    indexed = start + (lane_arg & (width - 1))
    return np.stack([down, up, xor, indexed]) + warp


@pytest.mark.parametrize("kind", ["f32", "f64", "i64"])
@pytest.mark.parametrize("lane_arg,width", [(1, 32), (16, 32), (0, 32), (31, 32), (3, 8), (8, 8), (5, 16), (2, 4)])
def test_shuffles(module, kind, lane_arg, width):
    threads, block = 128, (64, 1, 1)
    if kind == "f32":
        x = rng.standard_normal(threads).astype(np.float32)
    elif kind == "f64":
        x = rng.standard_normal(threads) + 1e-12  # not a float: all 8 bytes must move
    else:
        x = rng.integers(-(2**62), 2**62, threads)  # beyond 2**53: not a double either
    out = np.zeros(4 * threads, x.dtype)
    module.launch(f"shuffles_{kind}", (threads // block[0], 1, 1), block, [x, out, np.int32(lane_arg), np.int32(width)])
    np.testing.assert_array_equal(out.reshape(4, threads), x[shuffle_sources(lane_arg, width, threads)])


def test_atomics(module):
    grid, block = 6, 256
    n = grid * block
    t = np.arange(n)
    bins = rng.integers(0, 16, n).astype(np.int32)
    hist = np.zeros(16, np.int32)
    i32 = np.array([5, -1], np.int32)
    u32 = np.array([7, 2**32 - 1], np.uint32)
    u64 = np.array([3], np.uint64)
    f32 = np.zeros(1, np.float32)
    f64 = np.zeros(1, np.float64)
    extremes = np.array([-(2**62), 2**62], np.int64)
    module.launch("atomics", (grid, 1, 1), (block, 1, 1), [bins, hist, i32, u32, u64, f32, f64, extremes])
    np.testing.assert_array_equal(hist, np.bincount(bins, minlength=16))
    assert i32[0] == 5 - n and i32[1] == (t * 7 % 1001).max()
    assert u32[0] == 7 + t.sum() and u32[1] == 5
    assert u64[0] == 3 + n * 2**40
    assert f32[0] == n and f64[0] == n / 4  # exact: every partial sum is representable
    keyed = t * 1000000007 % 99991
    assert extremes.tolist() == [keyed.max(), keyed.min()]


def test_atomic_cas_loop(module):
    count = np.array([10], np.uint16)
    total = np.array([0], np.float16)
    module.launch("cas_counters", (3, 1, 1), (512, 1, 1), [count, total])
    assert count[0] == 10 + 3 * 512
    assert total[0] == 0.5 * 3 * 512  # halves of whole numbers up to 768: every sum exact in float16


def run_elementwise(module, name, x, out_dtype):
    out = np.zeros(x.size, out_dtype)
    module.launch(name, (16, 1, 1), (256, 1, 1), [x, out, np.int64(x.size)])
    return out


def test_h2f_every_half(module):
    halves = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = run_elementwise(module, "h2f", halves, np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), halves.astype(np.float32).view(np.uint32))


def half_boundary_doubles() -> np.ndarray:
    """Doubles at and beside every rounding boundary of float16: each finite half, the midpoint (a tie)
    between each pair of neighbours and one ulp of float and of double either side of it, values around
    the smallest subnormal and past the largest finite half, and NaNs with several payloads."""
    finite = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    beyond = np.append(finite[1:], 65536.0)  # the next half above each, 65536 standing for infinity
    mid = (finite + beyond) / 2  # exact in float32 as well: halves have 11 bits
    f_ulp = np.spacing(mid.astype(np.float32)).astype(np.float64)
    near = [finite, mid, mid - f_ulp, mid + f_ulp, np.nextafter(mid, 0), np.nextafter(mid, np.inf)]
    small = 2.0 ** np.arange(-30, -22)
    special = [0.0, np.inf, 65504.0, 65519.0, 65520.0, 1e10, 1e300, 1e-300, 5e-324, *small,
               *np.nextafter(small, 0), *np.nextafter(small, 1)]
    values = np.concatenate([*near, special])
    values = np.concatenate([values, -values])
    nans = np.array([0x7FF8000000000000, 0x7FF0000000000001, 0xFFF4000000000000, 0x7FF0040000000000,
                     0x7FFFFFFFFFFFFFFF], np.uint64).view(np.float64)
    return np.concatenate([values, nans])


@np.errstate(over="ignore", invalid="ignore")  # the reference casts of values beyond float16 (or float32)
def test_f2h_bit_exact(module):
    doubles = half_boundary_doubles()
    as_float = doubles.astype(np.float32)
    f32_nans = np.array([0x7FC00000, 0x7F800001, 0xFF802000, 0x7FBFFFFF], np.uint32).view(np.float32)
    randoms = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    floats = np.concatenate([as_float, f32_nans, randoms])
    got = run_elementwise(module, "f2h", floats, np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), floats.astype(np.float16).view(np.uint16))


@np.errstate(over="ignore")
def test_d2h_bit_exact_without_double_rounding(module):
    doubles = half_boundary_doubles()
    randoms = rng.integers(0, 2**64, 200_000, dtype=np.uint64).view(np.float64)
    near_halves = rng.uniform(-70000, 70000, 100_000) * 2.0 ** rng.integers(-30, 1, 100_000)
    values = np.concatenate([doubles, randoms, near_halves])
    got = run_elementwise(module, "d2h", values, np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), values.astype(np.float16).view(np.uint16))
    # a double just above a tie whose float rounds onto the tie: rounding twice would go to even
    above_tie = np.nextafter(np.float64(1 + 2**-11), 2)
    assert run_elementwise(module, "d2h", np.array([above_tie]), np.float16)[0] == np.float16(1 + 2**-10)


@np.errstate(over="ignore")
def test_rh_rounds_floats_to_float16(module):
    x = np.concatenate([rng.standard_normal(10_000).astype(np.float32) * 1000, [np.inf, -0.0, 1e-8, 7e4]])
    x = x.astype(np.float32)
    got = run_elementwise(module, "rh", x, np.float32)
    np.testing.assert_array_equal(got, x.astype(np.float16).astype(np.float32))


def test_indices_of_a_3d_launch(module):
    grid, block = (2, 3, 2), (8, 2, 4)
    blocks, threads = np.prod(grid), np.prod(block)
    ids = np.zeros(blocks * threads, np.uint32)
    swapped = np.zeros_like(ids)
    module.launch("indices", grid, block, [ids, swapped])
    b, t = np.divmod(np.arange(blocks * threads), threads)
    np.testing.assert_array_equal(ids, b * 10000 + t)
    slots = np.arange(blocks * threads).reshape(-1, 32)
    np.testing.assert_array_equal(swapped.reshape(-1, 32), slots[:, ::-1])


@pytest.mark.parametrize("active", [1, 100, 255, 256])
def test_returned_threads_hold_no_barrier_back(module, active):
    grid, block = 4, 256
    out = np.full((grid, block), -1, np.int32)
    module.launch("early_exit", (grid, 1, 1), (block, 1, 1), [out, np.int32(active)])
    expected = np.full((grid, block), -1)
    expected[:, :active] = np.arange(active)[::-1] * 100 + np.arange(grid)[:, None]
    np.testing.assert_array_equal(out, expected)


def test_threads_are_kept_between_launches_and_made_again_after_a_fork(module):
    """Launches run on a pool of threads kept between them (a worker ends after a second idle); a child
    made by fork, which has none of them, makes its own, as does a launch wider than any before."""
    import os
    import time
    import warnings

    def reduce_rows(block):
        x = rng.integers(-8, 9, size=(3, 500)).astype(np.float32)
        out = np.full(3, np.nan, np.float32)
        module.launch("row_sum", (3, 1, 1), block, [x, out, np.int64(500)])
        return bool(np.array_equal(out, x.sum(axis=1)))

    assert all(reduce_rows((64, 1, 1)) for _ in range(20))
    with warnings.catch_warnings():  # (Python 3.12 warns of fork in a process with threads: that is the case)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: exit status 0 when its launches (on new threads) give the right sums
        os._exit(0 if reduce_rows((64, 1, 1)) and reduce_rows((128, 1, 1)) else 1)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("a launch in a forked child hung")
        time.sleep(0.02)
    assert os.waitstatus_to_exitcode(status) == 0
    assert reduce_rows((1024, 1, 1)) and reduce_rows((64, 1, 1))


def test_bit_casts_and_clz(module):
    x = np.array([0.0, 1.0, -2.5, 1e-40, np.inf, 3e38, 5e-45, -0.0, *rng.standard_normal(24)], np.float32)
    d = np.array([0.0, 1.0, -2.5, 1e-310, np.inf, 1e300, 5e-324, -0.0, *rng.standard_normal(24)])
    out = np.zeros(4 * 32, np.int32)
    module.launch("bits", (1, 1, 1), (32, 1, 1), [x, d, out])
    out = out.reshape(32, 4)

    def clz(bits, width):
        return np.array([width - int(b).bit_length() for b in bits])

    np.testing.assert_array_equal(out[:, 0], clz(x.view(np.uint32), 32))
    np.testing.assert_array_equal(out[:, 1], clz(d.view(np.uint64), 64))
    assert out[:, 2:].all()


def test_wrong_arguments_raise(module):
    x, out = np.zeros(64, np.float32), np.zeros(1, np.float32)
    with pytest.raises(TypeError, match=r"argument 2 \(long long\) must be a NumPy int64 scalar.*got int"):
        module.launch("row_sum", (1, 1, 1), (32, 1, 1), [x, out, 64])
    with pytest.raises(TypeError, match=r"must be a NumPy int64 scalar.*got np.int32"):
        module.launch("row_sum", (1, 1, 1), (32, 1, 1), [x, out, np.int32(64)])
    with pytest.raises(TypeError, match=r"must be a float32 array, got float64"):
        module.launch("row_sum", (1, 1, 1), (32, 1, 1), [x.astype(np.float64), out, np.int64(64)])
    with pytest.raises(TypeError, match="takes 3 arguments"):
        module.launch("row_sum", (1, 1, 1), (32, 1, 1), [x, out])
    with pytest.raises(ValueError, match="multiple of 32"):
        module.launch("row_sum", (1, 1, 1), (48, 1, 1), [x, out, np.int64(64)])
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        module.launch("nope", (1, 1, 1), (32, 1, 1), [])


def test_second_module_loads_from_disk(module, monkeypatch, tmp_path):
    if host.cache_dir() is None:  # the disk cache is off for this run: turn it on and store a build
        monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
        monkeypatch.setattr(host, "_LOADED", {})
        assert not HostModule(SOURCE, KERNELS).from_cache
    monkeypatch.setattr(host, "_LOADED", {})  # forget the loaded library: only the disk can supply it
    again = HostModule(SOURCE, KERNELS)
    assert again.from_cache
    assert len(list(host.cache_dir().glob("*.so"))) >= 1
    out = np.zeros(1, np.float32)
    again.launch("row_sum", (1, 1, 1), (32, 1, 1), [np.ones(100, np.float32), out, np.int64(100)])
    assert out[0] == 100


def test_compile_error_shows_the_source_lines(monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", "0")
    source = 'extern "C" __global__ void broken(float* x) {\n    x[0] = undefined_name;\n}\n'
    with pytest.raises(HostCompileError) as caught:
        HostModule(source, [KernelSig("broken", ("float*",))])
    assert "undefined_name" in caught.value.output
    assert ">    2 |     x[0] = undefined_name;" in caught.value.excerpt
    assert "    1 | extern" in str(caught.value)


def test_device_prelude_and_kernels_compile_with_nvrtc():
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    source = DEVICE_PRELUDE + SOURCE
    program = nvrtc.createProgram(source, "kernels.cu", [], [])
    try:
        nvrtc.compileProgram(program, ["-arch=sm_90", "-std=c++17"])
        log = nvrtc.getProgramLog(program)
        cubin = nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)
    assert log.strip("\x00 \n") == "", log
    assert len(cubin) > 1000


def test_host_header_is_package_data():
    assert "ember_launch" in host_header()
