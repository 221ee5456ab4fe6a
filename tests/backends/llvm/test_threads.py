"""The native thread pool: large loops run in chunks on it, and everything Ember's own loops compute is
bitwise identical for 1, 2, 3 and 8 threads (chunks depend on the loop's shape alone, and a reduction's
partial results combine in chunk order). The suite's conftest turns on the oracle check, so every call
here is also compared with the numpy backend."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.nn as nn
import ember.numpy as enp
from ember.backends.kernel import Loop, lower_kernel
from ember.backends.llvm import loops, pool

COUNTS = (1, 2, 3, 8)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture
def threads():
    """Set ember_num_threads for the test, restoring it after."""
    was = ember.config.num_threads
    yield lambda n: ember.config.update("ember_num_threads", n)
    ember.config.update("ember_num_threads", was)


def _under_each_count(threads, f, *args) -> list:
    """f(*args) under every thread count (the same compiled code), as float arrays' bits."""
    results = []
    for n in COUNTS:
        threads(n)
        out = f(*args)
        results.append([np.array(o, copy=True) for o in (out if isinstance(out, (tuple, list)) else [out])])
    return results


def _assert_bitwise_equal(results) -> None:
    first = results[0]
    for k, other in enumerate(results[1:], 1):
        for a, b in zip(first, other):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes(), f"{COUNTS[k]} threads differ from 1 thread"


def _eam(x):
    rho = enp.sum(enp.exp(-3.0 * (x + 1.0)))
    return rho ** 2 + rho ** 3 + rho ** 4 / 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eam_gradient_and_per_sample_gradients_are_identical_for_every_thread_count(threads, dtype):
    x = np.random.default_rng(0).standard_normal(300_000).astype(dtype)
    g = ember.jit(ember.grad(_eam))
    assert "ember_parallel_for" in g.lower(x).source()
    _assert_bitwise_equal(_under_each_count(threads, g, x))
    xs = np.random.default_rng(1).standard_normal((3000, 100)).astype(dtype)
    _assert_bitwise_equal(_under_each_count(threads, ember.jit(ember.vmap(ember.grad(_eam))), xs))


REDUCTIONS = {
    "sum": enp.sum, "max": enp.max, "min": enp.min, "mean": enp.mean, "logsumexp": nn.logsumexp, "var": enp.var,
    "prod": lambda x, axis: enp.prod(1.0 + x.astype(enp.float64) * 1e-6, axis=axis),  # float32 products drift
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions_are_identical_for_every_thread_count(threads, name, axis):
    """Whole-array reductions (partial results per chunk), rows (chunks of kept rows) and columns
    (accumulators in memory)."""
    x = np.random.default_rng(2).standard_normal((600, 500)).astype(np.float32)
    x[5, 7] = np.nan if name in ("max", "min") else x[5, 7]
    f = ember.jit(lambda v: REDUCTIONS[name](v, axis=axis))
    _assert_bitwise_equal(_under_each_count(threads, f, x))


def test_column_tiles_in_chunks_are_identical_for_every_thread_count(threads):
    """Chunks of the kept outer axis, each walking its rows and 12 columns in tiles (llvm/columns.py)."""
    x = np.random.default_rng(6).standard_normal((300, 80, 12)).astype(np.float32)
    x[3, 5, 7] = np.nan
    f = ember.jit(lambda v: (enp.sum(v, axis=1), enp.max(v, axis=1)))
    assert "ember_parallel_for" in f.lower(x).source()
    _assert_bitwise_equal(_under_each_count(threads, f, x))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_and_bool_reductions_in_chunks_are_exact(threads, dtype):
    x = (np.random.default_rng(3).integers(-3, 4, 400_000) > 0 if dtype is np.bool_
         else np.random.default_rng(3).integers(-1000, 1000, 400_000)).astype(dtype)
    f = ember.jit(lambda v: (enp.sum(v), enp.max(v), enp.min(v)))
    results = _under_each_count(threads, f, x)
    _assert_bitwise_equal(results)
    assert results[0][0] == np.sum(x, dtype=results[0][0].dtype) and results[0][1] == x.max()


def test_large_float_sums_stay_accurate_when_split_into_chunks(threads):
    x = np.random.default_rng(4).random(4_000_000, dtype=np.float32)
    f = ember.jit(lambda v: enp.sum(v))
    got = _under_each_count(threads, f, x)
    _assert_bitwise_equal(got)
    exact = np.sum(x.astype(np.float64))
    assert abs(float(got[0][0]) - exact) <= 2 * np.spacing(np.float32(exact))


def test_sums_with_infinities_and_nans_in_chunks(threads):
    x = np.ones(500_000, np.float64)
    f = ember.jit(lambda v: enp.sum(v))
    x[123_456] = np.inf
    assert np.isposinf(f(x))
    x[400_000] = -np.inf
    assert np.isnan(f(x))
    m = ember.jit(lambda v: enp.max(v))
    y = np.zeros(500_000, np.float32)
    y[499_999] = np.nan
    _assert_bitwise_equal(_under_each_count(threads, m, y))
    assert np.isnan(m(y))


# --- random programs, split into many small chunks ----------------------------------------------------

@contextlib.contextmanager
def tiny_chunks():
    """Split every loop of a few elements into chunks of one or two iterations (the thresholds are part
    of the code's cache key, so no code compiled with other thresholds is reused)."""
    was = pool.PARALLEL_MIN_WORK, pool.MIN_CHUNK_WORK
    pool.PARALLEL_MIN_WORK, pool.MIN_CHUNK_WORK = 4, 1
    try:
        yield
    finally:
        pool.PARALLEL_MIN_WORK, pool.MIN_CHUNK_WORK = was


def test_tiny_chunks_split_loops():
    with tiny_chunks():
        f = ember.jit(lambda a, b: enp.sum(enp.exp(a) * b, axis=1))
        assert "ember_parallel_for" in f.lower(np.ones((4, 3)), np.ones((4, 3))).source()


jax = pytest.importorskip("jax")
from tests.test_random_programs import EMBER, programs, run  # noqa: E402


@settings(max_examples=25)
@given(prog=programs(), seed=st.integers(0, 2 ** 16))
def test_random_programs_are_identical_for_every_thread_count(prog, seed):
    rng = np.random.default_rng(seed)
    inputs = [(rng.choice([-1.0, 1.0], s) * rng.uniform(0.3, 1.5, s)).astype(np.float32) for s in prog.inputs]

    def loss(*xs):
        return sum(enp.sum(o * 0.5) for o in run(EMBER, prog, xs))

    value = ember.jit(lambda *xs: run(EMBER, prog, xs))
    grads = ember.jit(ember.grad(loss, argnums=tuple(range(len(inputs)))))
    was = ember.config.num_threads
    try:
        with tiny_chunks(), np.errstate(all="ignore"):
            _assert_bitwise_equal(_under_each_count(_set_threads, value, *inputs))
            _assert_bitwise_equal(_under_each_count(_set_threads, grads, *inputs))
    finally:
        ember.config.update("ember_num_threads", was)


def _set_threads(n: int) -> None:
    ember.config.update("ember_num_threads", n)


# --- the pool itself ----------------------------------------------------------------------------------

def test_splitting_depends_on_the_loop_alone(threads):
    """Large loops are chunked (a whole-array reduction keeps partial results per chunk), small ones are
    not, and the code is the same whatever the thread count."""
    big = _loop_of(lambda a: enp.exp(a) * 2.0, np.ones(1 << 20, np.float32))
    split = loops.loop_schedule(big.steps[0], _buffers(big)).split
    assert split is not None and 1 < split.chunks <= pool.MAX_CHUNKS and not split.partial
    assert split.chunk * split.chunks >= 1 << 20 > split.chunk * (split.chunks - 1)
    small = _loop_of(lambda a: enp.exp(a) * 2.0, np.ones(1000, np.float32))
    assert loops.loop_schedule(small.steps[0], _buffers(small)).split is None
    total = _loop_of(lambda a: enp.sum(enp.exp(a)), np.ones(1 << 20, np.float32))
    assert loops.loop_schedule(total.steps[0], _buffers(total)).split.partial
    x = np.ones(1 << 20, np.float32)
    sources = []
    for n in (1, 8):
        threads(n)
        sources.append(ember.jit(lambda a: enp.sum(enp.exp(a))).lower(x).source())
    assert sources[0] == sources[1] and "ember_parallel_for" in sources[0]


def _loop_of(f, x):
    low = ember.jit(f).lower(x)
    node = next(n for n in low.optimized.nodes if n.prim.name == "fusion")
    kernel = lower_kernel(node.params["body"], node.params["kind"])
    assert isinstance(kernel.steps[0], Loop)
    return kernel


def _buffers(kernel):
    return {b.name: b for b in kernel.inputs + kernel.outputs + kernel.temps}


def test_calls_from_many_python_threads_share_the_pool(threads):
    threads(2)
    x = np.random.default_rng(5).standard_normal(400_000)
    g = ember.jit(ember.grad(_eam))
    want = g(x)
    results, errors = [], []

    def worker():
        try:
            for _ in range(20):
                results.append(g(x))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and len(results) == 80
    assert all(r.tobytes() == want.tobytes() for r in results)


def _child(queue):
    x = np.linspace(-1, 1, 400_000)
    queue.put(ember.jit(ember.grad(_eam))(x).tobytes())


def test_a_forked_child_runs_parallel_code(threads):
    threads(2)
    x = np.linspace(-1, 1, 400_000)
    want = ember.jit(ember.grad(_eam))(x)  # the pool has started its workers in this process
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    got = queue.get(timeout=120)
    child.join(timeout=60)
    assert child.exitcode == 0 and got == want.tobytes()


def test_pool_threads_follow_the_config(threads):
    threads(3)
    assert pool.pool().limit == 3 and len(pool.pool().threads) >= 2
    threads(1)
    assert pool.pool().limit == 1


def test_num_threads_option_is_typed():
    with pytest.raises(ValueError, match=">= 1"):
        ember.config.update("ember_num_threads", 0)
    with pytest.raises(TypeError, match="takes an int"):
        ember.config.update("ember_num_threads", "2")
    with pytest.raises(TypeError, match="takes an int"):
        ember.config.update("ember_num_threads", True)
    with pytest.raises(TypeError, match="takes a bool"):
        ember.config.update("ember_debug_nans", 1.5)


@pytest.mark.parametrize("env, expected", [
    ({"EMBER_NUM_THREADS": "3"}, "3"),
    ({"EMBER_NUM_THREADS": "", "OMP_NUM_THREADS": "1"}, "1"),
    ({"EMBER_NUM_THREADS": "", "OPENBLAS_NUM_THREADS": "1"}, "1"),  # a Dask worker's caps
    ({"EMBER_NUM_THREADS": "", "MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "8"}, "1"),
    ({"EMBER_NUM_THREADS": "2", "OMP_NUM_THREADS": "1"}, "2"),  # Ember's own variable wins
    ({"EMBER_NUM_THREADS": ""}, str(len(os.sched_getaffinity(0)))),
])
def test_num_threads_defaults(env, expected):
    code = "import ember; print(ember.config.num_threads)"
    base = {k: v for k, v in os.environ.items()
            if k not in ("EMBER_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**base, **env})
    assert out.stdout.strip() == expected


def test_a_malformed_num_threads_variable_names_the_fix():
    code = "import ember"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "EMBER_NUM_THREADS": "many"})
    assert out.returncode != 0 and "EMBER_NUM_THREADS='many' is not an integer >= 1" in out.stderr
