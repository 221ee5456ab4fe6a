"""The llvm backend's whole-graph entry and call path: memory classes of the plan, argument checks
and conversions, copies of outputs that are inputs, consts, literals or repeats, threads and the GIL."""

import gc
import sys
import threading
import time

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends import get_backend
from ember.backends.llvm import entry as llvm_entry
from ember.backends.llvm import executable as llvm_executable
from ember.backends.llvm.executable import LLVMExecutable, check_layout
from ember.backends.llvm.graph import GIL_RELEASE_ELEMENTS
from ember.passes.memory import plan_memory
from tests.helpers import eam


def _jit(fun, **kw):
    return ember.jit(fun, backend="llvm", **kw)


def _exe(f, *args) -> LLVMExecutable:
    return f.lower(*args).compile().lowered._executable.executable


def test_layout_of_this_python_and_numpy_is_read_natively():
    check_layout()
    assert get_backend("llvm").name == "llvm"


def test_elementwise_matches_numpy(rng):
    x, y = rng.standard_normal((2, 3, 4)).astype(np.float32)
    f = _jit(lambda a, b: a * b + 1.0)
    np.testing.assert_array_equal(f(x, y), x * y + np.float32(1))


@pytest.mark.parametrize("make", [
    lambda x: x[:, ::2],                      # not contiguous
    lambda x: np.asfortranarray(x),           # Fortran order
    lambda x: x.astype(x.dtype.newbyteorder(">")),  # byte-swapped
    lambda x: np.frombuffer(b"\0" + x.tobytes(), x.dtype, offset=1).reshape(x.shape),  # unaligned
    lambda x: x.view(np.matrix) if x.ndim == 2 else x,  # an ndarray subclass
], ids=["strided", "fortran", "byteswapped", "unaligned", "subclass"])
def test_inputs_the_entry_refuses_are_converted_first(make, rng):
    x = make(rng.standard_normal((3, 8)).astype(np.float32))
    exe = _exe(_jit(lambda a: a * 2.0), np.ascontiguousarray(x, np.float32))
    before = np.array(x, copy=True)
    (out,) = exe(x)
    np.testing.assert_array_equal(out, np.asarray(x, np.float32) * 2)
    np.testing.assert_array_equal(np.asarray(x), before)


def test_wrong_shape_reaching_the_executable_raises():
    exe = _exe(_jit(lambda a: a + 1.0), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="shape"):
        exe(np.ones(4, np.float32))
    with pytest.raises(TypeError, match="takes 1 arrays"):
        exe()


def test_outputs_that_are_inputs_consts_literals_or_repeats_are_fresh_copies():
    c = np.arange(4.0)

    def f(x):
        y = x * 2.0
        return x, y, y, c + 0.0, jnp.float64(3.0) + 0.0

    x = np.ones(4)
    outs = _jit(f)(x)
    np.testing.assert_array_equal(outs[0], x)
    np.testing.assert_array_equal(outs[1], 2 * x)
    np.testing.assert_array_equal(outs[2], 2 * x)
    np.testing.assert_array_equal(outs[3], c)
    assert float(outs[4]) == 3.0
    arrays = [o for o in outs if isinstance(o, np.ndarray)]
    for i, a in enumerate(arrays):
        assert not np.shares_memory(a, x) and not np.shares_memory(a, c)
        assert not any(np.shares_memory(a, b) for b in arrays[:i])


def test_consts_are_runtime_buffers_not_baked_into_the_ir():
    big = np.arange(100_000, dtype=np.float32)
    f = _jit(lambda x: x + big)
    src = f.lower(np.ones(100_000, np.float32)).source()
    assert len(src) < 20_000
    np.testing.assert_array_equal(f(np.ones(100_000, np.float32)), big + 1)


def test_workspace_is_per_thread_so_concurrent_calls_are_correct(rng):
    f = _jit(lambda x: jnp.tanh(x * 3.0) * 2.0 + x)
    xs = [rng.standard_normal(5000).astype(np.float32) for _ in range(8)]
    f(xs[0])
    results = {}

    def work(k):
        for _ in range(20):
            results[k] = f(xs[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, x in enumerate(xs):
        np.testing.assert_allclose(results[k], np.tanh(x * 3) * 2 + x, rtol=2e-6, atol=1e-6)


def test_large_entries_release_the_gil_and_small_ones_do_not():
    small = _exe(_jit(lambda x: x + 1.0), np.ones(4, np.float32))
    n = 4 * GIL_RELEASE_ELEMENTS
    big = _exe(_jit(lambda x: jnp.sin(x) * jnp.cos(x) + jnp.exp(-x)), np.ones(n, np.float32))
    assert not small.releases_gil and big.releases_gil
    # the small entry is a builtin function object (no ctypes), made without a leaked reference, and
    # its calls (a refused input's too) leave no reference behind on None or True
    assert type(small._entry).__name__ == "builtin_function_or_method"
    fn = llvm_executable._builtin(small.library.address(llvm_entry.ENTRY))
    assert sys.getrefcount(fn) == 2
    call, xs = small.single_output(), (np.ones(4, np.float32), np.ones(8, np.float32)[::2])
    gc.collect()
    gc.disable()  # (a collection in the loop would free other objects' references to None)
    try:
        refs = (sys.getrefcount(None), sys.getrefcount(True))
        for x in xs:
            outs = [call(x) for _ in range(200)]
        after = (sys.getrefcount(None), sys.getrefcount(True))
    finally:
        gc.enable()
    assert abs(after[0] - refs[0]) < 20 and abs(after[1] - refs[1]) < 20  # a leak or a missing reference: 400
    np.testing.assert_array_equal(outs, 2.0)
    x = np.linspace(0, 1, n, dtype=np.float32)
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(0)
            time.sleep(0)  # hands the GIL back at once

    # with a long switch interval the main thread, running Python, keeps the GIL: the counter can
    # only run while a call has released it (on a loaded machine it may take several calls)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    t = threading.Thread(target=count)
    try:
        t.start()
        time.sleep(0.01)
        before = len(ticks)
        deadline = time.monotonic() + 10
        while len(ticks) == before and time.monotonic() < deadline:
            big(x)
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        t.join()
    assert len(ticks) > before


def test_donated_input_written_in_place_by_the_plan(rng):
    x = rng.standard_normal(64)
    f = _jit(lambda a: jnp.exp(a * 2.0) + 1.0, donate_argnums=0)
    expected = np.exp(x * 2) + 1
    np.testing.assert_allclose(f(x.copy()), expected, rtol=1e-14)


def test_plan_in_place_reuse_matches_the_oracle(rng):
    def f(x, w):
        h = jnp.tanh(x @ w + 1.0)
        return jnp.sum(h * h, axis=0), jnp.exp(-h)

    x, w = rng.standard_normal((16, 8)), rng.standard_normal((8, 8))
    got = _jit(f)(x, w)
    want = ember.jit(f, backend="numpy", optimize=False)(x, w)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_executable_runs_an_unoptimized_graph_with_the_naive_plan(rng):
    f = _jit(lambda x: jnp.sum(jnp.exp(x) * 2.0), optimize=False)
    x = rng.standard_normal(10)
    graph = f.lower(x).optimized
    exe = LLVMExecutable(graph, plan_memory(graph, inplace=False))
    np.testing.assert_allclose(exe(x)[0], np.sum(np.exp(x) * 2), rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("values", [[np.inf, 1.0], [-np.inf, np.inf], [np.nan, 1.0], [np.inf] * 1000,
                                    [1.0] * 600 + [np.inf] + [-1.0] * 600])
def test_sums_with_infinities_and_nans_are_numpys(values, dtype):
    """Found by logsumexp([inf, 1]): the compensation of an infinite float64 total is inf - inf, which
    made the sum NaN; an infinite or NaN total is now the plain sum's."""
    x = np.array(values, dtype)
    with np.errstate(all="ignore"):
        want = np.sum(x)
    got = _jit(jnp.sum)(x)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("n", [2.0, 3.0, 4.0, -1.0])
def test_small_constant_powers_multiply(n, dtype):
    """`x ** 2`, `x ** 3`, ... multiply (pow's log and exp cost time and ~100 ms of compile); the
    values stay within pow's budget, specials and signed zeros as np.power."""
    x = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-3, 3e3, 7.0, -0.1], dtype)
    f = _jit(lambda v: v ** n)
    with np.errstate(all="ignore"):
        want = np.power(x, dtype(n))
    got = f(x)
    np.testing.assert_allclose(got, want, rtol=2e-3 if dtype == np.float16 else 4e-7 if dtype == np.float32
                               else 1e-15)
    assert np.array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))
    assert "ember.math.pow" not in f.lower(x).source()


def test_non_array_arguments_reaching_the_executable_are_converted():
    """The entry reads an argument's array fields only after checking its type is ndarray: a NumPy or
    Python scalar, or a list, is converted first (never dereferenced as an array)."""
    exe = _exe(_jit(lambda a, b: a * b + 1.0), np.ones((), np.float64), np.ones(3))
    for scalar in (np.float64(2.0), 2.0, [2.0]):
        (out,) = exe(np.asarray(2.0) if isinstance(scalar, list) else scalar, [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(out, [3.0, 5.0, 7.0])


@pytest.mark.parametrize("segment", [1, 2])
def test_a_long_schedule_runs_as_segments_with_called_kernels(segment, monkeypatch, rng):
    """Past SEGMENT_NODES nodes the schedule is split into functions (LLVM's time on one huge function
    grows faster than its size), past INLINE_KERNELS_UP_TO its kernels are called, not inlined;
    values, in-place writes, donation and output copies cross them."""
    import ember.backends.llvm.graph as G

    monkeypatch.setattr(G, "SEGMENT_NODES", segment)
    monkeypatch.setattr(G, "INLINE_KERNELS_UP_TO", segment)
    c = rng.standard_normal(8)

    def f(x, w):
        h = jnp.tanh(x @ w + 1.0)
        s = jnp.sum(h * h, axis=0)
        y = jnp.exp(-h) * c
        return s, y, x, s, jnp.max(y, axis=1) + s[-1]

    x, w = rng.standard_normal((16, 8)), rng.standard_normal((8, 8))
    for donate in ((), (1,)):
        low = _jit(f, donate_argnums=donate).lower(x, w)
        assert len(low.optimized.nodes) > segment
        src = low.source()
        assert "define internal void @\"segment1\"" in src and "noinline" in src
        got = low.compile()(x.copy(), w.copy())
        want = ember.jit(f, backend="numpy", optimize=False)(x, w)
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fun, hosted", [
    (ember.grad(eam), True),                                              # exp values, then scaled in place
    (lambda x: jnp.exp(x)[::-1] * jnp.sum(jnp.exp(x)), False),            # read reversed: not where written
    (lambda x: (jnp.exp(x) * jnp.sum(jnp.exp(x)), jnp.exp(x)[0] + x), False),  # element 0 read in every step
    (lambda x: (jnp.exp(x) * jnp.sum(jnp.exp(x)), jnp.exp(x) + jnp.sum(x)), True),  # two outputs, same index
    (lambda x: (lambda e: (lambda y: (y, jnp.dot(e, y)))(e * jnp.sum(e)))(jnp.exp(x)), False),  # read after
])
def test_a_workspace_value_lives_in_the_output_computed_from_it(fun, hosted, rng):
    """A value that dies where an output is computed from it elementwise is written into that output's
    array, and the output is then computed in place (one hot array instead of two); never when the
    kernel reads it elsewhere than where it writes, or a later node still reads it."""
    import ember.backends.llvm.graph as G

    x = rng.random(1000)
    low = _jit(fun).lower(x)
    got = low.compile()(x)
    exe = low._executable.executable
    want = ember.jit(fun, backend="numpy", optimize=False)(x)
    for g, w in zip(*(o if isinstance(o, tuple) else (o,) for o in (got, want))):
        np.testing.assert_allclose(g, w, rtol=1e-13)
    builder = G._Builder(low.optimized, low.stages[-1].plan)
    where = builder.pointers().loc
    outputs = set(low.optimized.outputs)
    in_outputs = [v for v, (kind, k) in where.items()
                  if kind == "item" and builder.n_in <= k < builder.ws_index and v not in outputs]
    assert bool(in_outputs) == hosted
    if hosted:
        assert exe._ws_bytes < x.nbytes  # the hosted value takes no workspace
