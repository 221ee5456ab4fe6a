// CUDA emulated on the CPU, so the kernels Ember renders for the GPU also run (and are checked) as
// host C++20 (ember/backends/cuda/host.py prepends this header and compiles with g++).
//
// A launch runs its blocks ONE AFTER ANOTHER on a pool of blockDim.x*y*z real threads created once
// per launch: thread t of the pool is thread t of every block, and a barrier separates one block
// from the next (a thread that returns early drops out of its block's barriers until then). So at
// any moment at most one block of a launch is alive, which is why `__shared__` can be a
// function-local `static` (one copy per kernel, reused block after block), and why launches of one
// module are serialized by a mutex (two at once would share those statics).
// Dynamic shared memory (`extern __shared__`) is not emulated.
//
// Warps are 32 consecutive linear thread ids (x fastest, as on the GPU). Shuffles go through a
// per-warp exchange buffer between two per-warp barriers, so every lane of the warp must take part:
// the mask must be full (block sizes are multiples of 32; anything else aborts with a message).
// Atomics are std::atomic_ref. Math is <math.h> under its C names (glibc's fma is correctly rounded);
// the compiler must not contract a*b+c (host.py passes -ffp-contract=off). It is pasted before the
// kernel source, never #included.

#include <math.h>
#include <pthread.h>

#include <atomic>
#include <barrier>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <semaphore>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
// plain inline: the host build checks arithmetic and synchronization, not speed, and forced inlining of
// the math library tripled its compile time
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static
// __restrict__ is a g++ keyword already

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static dim3 blockDim;
static dim3 gridDim;
static constexpr int warpSize = 32;

[[noreturn]] static inline void ember_host_fail(const char* what) {
    std::fprintf(stderr, "ember host emulation of CUDA: %s\n", what);
    std::fflush(stderr);
    std::abort();
}

// ---- threads of a block: the block barrier, warps and their exchange buffers ----

struct ember_host_warp_t {
    std::optional<std::barrier<>> barrier;
    unsigned long long slot[32];
};

// The barriers of the block running now. A thread that returns from the kernel drops out of them, so
// the threads still running may go on meeting at __syncthreads (as on the GPU, where an exited thread
// no longer holds a barrier back); they are made whole again before the next block starts.
struct ember_host_block_t {
    unsigned threads;
    std::optional<std::barrier<>> barrier;
    std::unique_ptr<ember_host_warp_t[]> warps;

    explicit ember_host_block_t(unsigned threads_) : threads(threads_), warps(new ember_host_warp_t[threads_ / warpSize]) {
        reset();
    }
    void reset() noexcept {
        barrier.emplace(threads);
        for (unsigned w = 0; w < threads / warpSize; ++w)
            warps[w].barrier.emplace(warpSize);
    }
};

static ember_host_block_t* ember_host_block;
static thread_local ember_host_warp_t* ember_host_warp;
static thread_local unsigned ember_host_lane;

static inline void __syncthreads() { ember_host_block->barrier->arrive_and_wait(); }

static inline void ember_host_require_full_mask(unsigned mask) {
    if (mask != 0xffffffffu)
        ember_host_fail("a warp operation with a partial mask (only full warps are emulated)");
}

static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    ember_host_require_full_mask(mask);
    ember_host_warp->barrier->arrive_and_wait();
}

// Every lane publishes its value, then reads lane `src`'s (or keeps its own where `take` is false, as
// CUDA does for a source lane out of range); the second barrier keeps the buffer until all have read.
template <class T>
static inline T ember_host_shfl(unsigned mask, T var, unsigned src, bool take) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move up to 8 bytes");
    ember_host_require_full_mask(mask);
    unsigned long long bits = 0;
    std::memcpy(&bits, &var, sizeof(T));
    ember_host_warp->slot[ember_host_lane] = bits;
    ember_host_warp->barrier->arrive_and_wait();
    T out = var;
    if (take)
        std::memcpy(&out, &ember_host_warp->slot[src], sizeof(T));
    ember_host_warp->barrier->arrive_and_wait();
    return out;
}

static inline unsigned ember_host_segment_start(int width) { return ember_host_lane & ~unsigned(width - 1); }

template <class T>
static inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {
    return ember_host_shfl(mask, var, ember_host_segment_start(width) + (unsigned(srcLane) & unsigned(width - 1)), true);
}

template <class T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    bool take = (ember_host_lane - ember_host_segment_start(width)) + delta < unsigned(width);
    return ember_host_shfl(mask, var, ember_host_lane + delta, take);
}

template <class T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    bool take = ember_host_lane - ember_host_segment_start(width) >= delta;
    return ember_host_shfl(mask, var, ember_host_lane - delta, take);
}

template <class T>
static inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {
    unsigned src = ember_host_lane ^ unsigned(laneMask);
    return ember_host_shfl(mask, var, src, src < ember_host_segment_start(width) + unsigned(width));
}

// ---- atomics (each returns the old value, as CUDA's do) ----

template <class T>
static inline T ember_host_atomic_add(T* address, T val) { return std::atomic_ref<T>(*address).fetch_add(val); }

static inline int atomicAdd(int* a, int v) { return ember_host_atomic_add(a, v); }
static inline unsigned atomicAdd(unsigned* a, unsigned v) { return ember_host_atomic_add(a, v); }
static inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) { return ember_host_atomic_add(a, v); }
static inline float atomicAdd(float* a, float v) { return ember_host_atomic_add(a, v); }
static inline double atomicAdd(double* a, double v) { return ember_host_atomic_add(a, v); }

template <class T>
static inline T ember_host_atomic_cas(T* address, T compare, T val) {
    std::atomic_ref<T>(*address).compare_exchange_strong(compare, val);
    return compare;  // the value found: `compare` itself where the exchange happened
}

static inline int atomicCAS(int* a, int c, int v) { return ember_host_atomic_cas(a, c, v); }
static inline unsigned atomicCAS(unsigned* a, unsigned c, unsigned v) { return ember_host_atomic_cas(a, c, v); }
static inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long c, unsigned long long v) {
    return ember_host_atomic_cas(a, c, v);
}
static inline unsigned short atomicCAS(unsigned short* a, unsigned short c, unsigned short v) {
    return ember_host_atomic_cas(a, c, v);
}

template <class T>
static inline T ember_host_atomic_exch(T* address, T val) { return std::atomic_ref<T>(*address).exchange(val); }

static inline int atomicExch(int* a, int v) { return ember_host_atomic_exch(a, v); }
static inline unsigned atomicExch(unsigned* a, unsigned v) { return ember_host_atomic_exch(a, v); }
static inline unsigned long long atomicExch(unsigned long long* a, unsigned long long v) {
    return ember_host_atomic_exch(a, v);
}
static inline float atomicExch(float* a, float v) { return ember_host_atomic_exch(a, v); }

// Replace the stored value by `val` while `better(val, stored)`; returns the value found first.
template <class T, class Better>
static inline T ember_host_atomic_update(T* address, T val, Better better) {
    std::atomic_ref<T> ref(*address);
    T old = ref.load();
    while (better(val, old) && !ref.compare_exchange_weak(old, val)) {
    }
    return old;
}

template <class T>
static inline T ember_host_atomic_max(T* a, T v) { return ember_host_atomic_update(a, v, [](T x, T y) { return x > y; }); }
template <class T>
static inline T ember_host_atomic_min(T* a, T v) { return ember_host_atomic_update(a, v, [](T x, T y) { return x < y; }); }

static inline int atomicMax(int* a, int v) { return ember_host_atomic_max(a, v); }
static inline unsigned atomicMax(unsigned* a, unsigned v) { return ember_host_atomic_max(a, v); }
static inline long long atomicMax(long long* a, long long v) { return ember_host_atomic_max(a, v); }
static inline unsigned long long atomicMax(unsigned long long* a, unsigned long long v) { return ember_host_atomic_max(a, v); }
static inline int atomicMin(int* a, int v) { return ember_host_atomic_min(a, v); }
static inline unsigned atomicMin(unsigned* a, unsigned v) { return ember_host_atomic_min(a, v); }
static inline long long atomicMin(long long* a, long long v) { return ember_host_atomic_min(a, v); }
static inline unsigned long long atomicMin(unsigned long long* a, unsigned long long v) { return ember_host_atomic_min(a, v); }

// ---- bit casts, leading zeros and set bits ----

static inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
static inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
static inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
static inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
static inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
static inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
static inline int __clz(int x) { return std::countl_zero(unsigned(x)); }
static inline int __clzll(long long x) { return std::countl_zero((unsigned long long)x); }
static inline int __popc(unsigned x) { return std::popcount(x); }
static inline int __popcll(unsigned long long x) { return std::popcount(x); }

// ---- float16: stored as IEEE binary16 bits, converted in software ----

typedef unsigned short ember_half;

static inline float ember_h2f(ember_half h) {
    unsigned sign = unsigned(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0) {  // zero or subnormal: mantissa * 2**-24, exact in float
        float magnitude = float(mantissa) * 0x1p-24f;
        return std::bit_cast<float>(sign | std::bit_cast<unsigned>(magnitude));
    }
    if (exponent == 0x1f)  // inf, or NaN with its payload kept
        return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// `x >> shift` rounded to nearest, ties to even (0 < shift < 64).
static inline unsigned long long ember_host_shift_rne(unsigned long long x, int shift) {
    unsigned long long kept = x >> shift, rest = x & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    return kept + (rest > half || (rest == half && (kept & 1)));
}

// The binary16 nearest (ties to even) to a binary float with `mantissa_bits` stored mantissa bits and
// exponent bias `bias`, given its sign (0 or 0x8000) and its magnitude's bits. A carry out of the
// mantissa steps into the exponent, up to infinity (0x7c00), which is the right result. A NaN keeps
// its payload's top 10 bits (at least 1), as NumPy does.
static inline ember_half ember_host_to_half(unsigned sign, unsigned long long magnitude, int mantissa_bits, int bias,
                                       int exponent_all_ones) {
    int exponent = int(magnitude >> mantissa_bits);
    unsigned long long mantissa = magnitude & ((1ull << mantissa_bits) - 1);
    int drop = mantissa_bits - 10;
    if (exponent == exponent_all_ones) {
        unsigned payload = unsigned(mantissa >> drop);
        return ember_half(sign | 0x7c00u | (mantissa == 0 ? 0u : (payload ? payload : 1u)));
    }
    int half_exponent = exponent - bias + 15;
    if (half_exponent >= 31)
        return ember_half(sign | 0x7c00u);
    if (half_exponent >= 1)
        return ember_half(sign | ((unsigned(half_exponent) << 10) + unsigned(ember_host_shift_rne(mantissa, drop))));
    // subnormal or zero: the value in units of 2**-24, rounded; 0x400 (the smallest normal) is right too
    int shift = drop + 1 - half_exponent;
    if (shift >= 64 || exponent == 0)  // below 2**-25 (and binary subnormals): rounds to zero
        return ember_half(sign);
    return ember_half(sign | unsigned(ember_host_shift_rne(mantissa | (1ull << mantissa_bits), shift)));
}

static inline ember_half ember_f2h(float x) {
    unsigned bits = std::bit_cast<unsigned>(x);
    return ember_host_to_half((bits >> 16) & 0x8000u, bits & 0x7fffffffu, 23, 127, 0xff);
}

static inline ember_half ember_d2h(double x) {
    unsigned long long bits = std::bit_cast<unsigned long long>(x);
    return ember_host_to_half(unsigned(bits >> 48) & 0x8000u, bits & 0x7fffffffffffffffull, 52, 1023, 0x7ff);
}

static inline float ember_rh(float x) { return ember_h2f(ember_f2h(x)); }

// ---- the launch ----

static std::mutex ember_host_launch_mutex;

// The completion of the barrier between blocks: runs while every thread waits there, so no barrier of
// the block is in use.
struct ember_host_next_block_t {
    ember_host_block_t* block;
    void operator()() noexcept { block->reset(); }
};

// The threads that run launches, kept between them: creating a block's threads at every launch cost
// about 14 ms, more than most kernels of the tests take. Worker t runs `job(context, t)` for every
// launch of at least t + 1 threads, woken by its own semaphore (one condition variable for all made
// them queue for its mutex); one idle for a second ends (the next launch that needs it makes it again),
// so the pools of modules no longer used go away. Never destroyed: its threads are detached.
struct ember_host_worker_t {
    std::binary_semaphore go{0};
    bool alive = false;
};

struct ember_host_pool_t {
    std::mutex mutex;  // held to make a worker, wake one, or let one end
    std::vector<std::unique_ptr<ember_host_worker_t>> workers;
    std::atomic<unsigned> remaining{0};
    std::binary_semaphore finished{0};
    void (*job)(void*, unsigned) = nullptr;
    void* context = nullptr;
};

static ember_host_pool_t* ember_host_pool = new ember_host_pool_t;

// A child process made by fork has none of the workers (nor, if another thread held one, a usable
// mutex): it starts over with a new pool and launch mutex (the old ones are left as they are).
static inline void ember_host_after_fork() {
    ember_host_pool = new ember_host_pool_t;
    new (&ember_host_launch_mutex) std::mutex;
}

[[maybe_unused]] static const int ember_host_atfork = pthread_atfork(nullptr, nullptr, ember_host_after_fork);

static inline void ember_host_worker(unsigned t, ember_host_worker_t* worker) {
    ember_host_pool_t& pool = *ember_host_pool;
    ember_host_worker_t& self = *worker;
    for (;;) {
        if (!self.go.try_acquire_for(std::chrono::seconds(1))) {
            std::lock_guard<std::mutex> lock(pool.mutex);
            if (!self.go.try_acquire()) {  // (under the mutex: a launch wakes it or makes a new one, never both)
                self.alive = false;
                return;
            }
        }
        pool.job(pool.context, t);
        if (pool.remaining.fetch_sub(1) == 1)
            pool.finished.release();
    }
}

// `job(context, t)` for t in [0, threads), each on its own thread, all at once; returns when all are done.
static inline void ember_host_run_threads(unsigned threads, void (*job)(void*, unsigned), void* context) {
    ember_host_pool_t& pool = *ember_host_pool;
    pool.job = job;
    pool.context = context;
    pool.remaining = threads;
    {
        std::lock_guard<std::mutex> lock(pool.mutex);
        while (pool.workers.size() < threads)
            pool.workers.push_back(std::make_unique<ember_host_worker_t>());
        for (unsigned t = 0; t < threads; ++t) {
            ember_host_worker_t& worker = *pool.workers[t];
            worker.go.release();
            if (!worker.alive) {
                worker.alive = true;
                std::thread(ember_host_worker, t, &worker).detach();
            }
        }
    }
    pool.finished.acquire();
}

// One launch, as each of its threads sees it.
struct ember_host_launch_t {
    dim3 grid, block;
    void (*kernel)(void**);
    void** args;
    ember_host_block_t* state;
    std::barrier<ember_host_next_block_t>* between_blocks;
};

// Thread t of a launch: the kernel for every block in turn.
static inline void ember_host_thread(void* context, unsigned t) {
    const ember_host_launch_t& launch = *static_cast<const ember_host_launch_t*>(context);
    const dim3 grid = launch.grid, block = launch.block;
    threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
    ember_host_warp = &launch.state->warps[t / warpSize];
    ember_host_lane = t % warpSize;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                blockIdx = {x, y, z};
                launch.kernel(launch.args);
                launch.state->barrier->arrive_and_drop();
                ember_host_warp->barrier->arrive_and_drop();
                launch.between_blocks->arrive_and_wait();  // the block's shared memory is the next one's
            }
}

// Run `kernel(args)` (one kernel's call on its packed arguments) for every thread of every block of a
// launch. Not a template: one copy serves every kernel of a module (instantiating the threads' code per
// kernel tripled g++'s time on a module of many kernels).
static inline void ember_launch(dim3 grid, dim3 block, void (*kernel)(void**), void** args) {
    unsigned threads = block.x * block.y * block.z;
    if (threads == 0 || threads % warpSize != 0 || threads > 1024)
        ember_host_fail("a block's thread count must be a multiple of 32 up to 1024");
    std::lock_guard<std::mutex> lock(ember_host_launch_mutex);
    blockDim = block;
    gridDim = grid;
    ember_host_block_t state(threads);
    ember_host_block = &state;
    std::barrier<ember_host_next_block_t> between_blocks(threads, ember_host_next_block_t{&state});
    ember_host_launch_t launch{grid, block, kernel, args, &state, &between_blocks};
    ember_host_run_threads(threads, ember_host_thread, &launch);
}

// Parameter `i` of a launch: `args[i]` points at its value, as cuLaunchKernel's kernelParams.
template <class T>
static inline T ember_arg(void** args, int i) {
    T value;
    std::memcpy(&value, args[i], sizeof(T));
    return value;
}
