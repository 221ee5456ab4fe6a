"""`out=` on a compiled call: results written into the caller's arrays, which are returned; arrays
of the wrong type, shape, dtype or layout, or overlapping an input or each other, raise as NumPy's
ufunc `out=` does, naming the output and the user's line."""

import numpy as np
import pytest

import ember
import ember.config
import ember.numpy as jnp
from ember.backends.debug import Checked
from ember.backends.numpy import NumpyExecutable
from ember.backends.outputs import check_out
from ember.passes.memory import plan_memory
from ember.tracer.aval import ShapedArray
from tests.helpers import eam


def _two_outputs():
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    y = np.arange(3, dtype=np.float32)
    f = ember.jit(lambda x, y: (jnp.tanh(x) + y, jnp.sum(x * y, axis=1)))
    return f, f.lower(x, y).compile(), x, y


@pytest.mark.parametrize("check_oracle", [True, False])
def test_results_are_written_into_out_and_returned(monkeypatch, check_oracle):
    monkeypatch.setattr(ember.config, "check_oracle", check_oracle)
    f, c, x, y = _two_outputs()
    want = f(x, y)
    out = (np.full((2, 3), np.nan, np.float32), np.full(2, np.nan, np.float32))
    for _ in range(2):
        got = c(x, y, out=out)
        assert isinstance(got, tuple) and got[0] is out[0] and got[1] is out[1]
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_a_single_output_takes_one_array_and_pytrees_take_their_structure():
    x = np.arange(4.0)
    c = ember.jit(lambda x: x * 2).lower(x).compile()
    o = np.empty(4)
    assert c(x, out=o) is o and np.array_equal(o, x * 2)
    d = ember.jit(lambda x: {"b": x + 1, "a": [x.sum()]}).lower(x).compile()
    out = {"a": [np.empty(())], "b": np.empty(4)}
    got = d(x, out=out)
    assert got["b"] is out["b"] and got["a"][0] is out["a"][0]
    assert float(out["a"][0]) == 6.0 and np.array_equal(out["b"], x + 1)


def test_outputs_that_are_inputs_or_repeated_are_copied_into_out():
    x = np.arange(3.0)
    c = ember.jit(lambda x: (x, x * 2, x * 2)).lower(x).compile()
    out = (np.empty(3), np.empty(3), np.empty(3))
    c(x, out=out)
    np.testing.assert_array_equal(out[0], x)
    np.testing.assert_array_equal(out[2], x * 2)
    np.testing.assert_array_equal(x, np.arange(3.0))


def test_static_and_donated_arguments_with_out():
    f = ember.jit(lambda x, n: jnp.exp(x) * n, static_argnums=1, donate_argnums=0)
    x = np.linspace(0, 1, 5)
    c = f.lower(x, 3).compile()
    o = np.empty(5)
    assert c(x.copy(), out=o) is o
    np.testing.assert_allclose(o, np.exp(x) * 3)


BAD_OUTS = [  # (out for the outputs (f32[2,3], f32[2]), error class, words of the message)
    ((np.empty((2, 3), np.float32), 0.0), TypeError, ["out[1]", "float", "not an ndarray"]),
    ((np.empty((2, 3), np.float32), [0.0, 0.0]), TypeError, ["structured as PyTreeDef((*, [*, *]))"]),
    ((np.empty((2, 3), np.float32), np.empty(2, np.float64)), TypeError, ["out[1]", "dtype float64", "float32"]),
    ((np.empty((2, 3), np.float32), np.empty(2, ">f4")), TypeError, ["out[1]", "dtype >f4"]),
    ((np.empty((3, 2), np.float32), np.empty(2, np.float32)), ValueError, ["out[0]", "shape (3, 2)", "(2, 3)"]),
    ((np.empty((3, 2), np.float32).T, np.empty(2, np.float32)), ValueError, ["out[0]", "not C-contiguous"]),
    ((np.empty((2, 3), np.float32), np.broadcast_to(np.float32(0), (2,))), ValueError, ["out[1]", "read-only"]),
    ((np.empty((2, 3), np.float32), np.frombuffer(bytearray(9), np.float32, 2, offset=1)), ValueError,
     ["out[1]", "not aligned"]),
    ((np.empty((2, 3), np.float32),), ValueError, ["structured as", "one array per output"]),
    (np.empty((2, 3), np.float32), TypeError, ["structured as", "one array per output"]),
    ([np.empty((2, 3), np.float32), np.empty(2, np.float32)], TypeError, ["structured as"]),
]


@pytest.mark.parametrize("out, cls, words", BAD_OUTS)
def test_wrong_out_arrays_raise_naming_the_output_and_the_line(out, cls, words):
    _, c, x, y = _two_outputs()
    with pytest.raises(cls) as e:
        c(x, y, out=out)
    for w in words + ["test_out.py"]:
        assert w in str(e.value)


def test_out_overlapping_an_input_or_another_out_raises():
    _, c, x, y = _two_outputs()
    buf = np.zeros(12, np.float32)
    with pytest.raises(ValueError, match=r"out\[1\] shares memory with input 1"):
        c(x, y, out=(np.empty((2, 3), np.float32), y[:2]))
    with pytest.raises(ValueError, match=r"out\[1\] shares memory with another out array"):
        c(x, y, out=(buf[:6].reshape(2, 3), buf[4:6]))
    ys = buf[6:9]
    ys[:] = y
    with pytest.raises(ValueError, match=r"out\[1\] shares memory with input 1"):
        c(x, ys, out=(np.empty((2, 3), np.float32), buf[5:7]))
    got = c(x, ys, out=(buf[:6].reshape(2, 3), buf[10:12]))  # one buffer, no overlap: fine
    np.testing.assert_array_equal(got[1], np.sum(x * y, axis=1))


def test_a_function_with_an_out_parameter_cannot_be_given_out_by_keyword():
    x = np.ones(2)
    c = ember.jit(lambda x, out: x + out).lower(x, out=x).compile()
    with pytest.raises(TypeError, match="keyword argument 'out'.*by position"):
        c(x, out=x)
    np.testing.assert_array_equal(ember.jit(lambda x, out: x + out).lower(x, x).compile()(x, x), 2.0)


def test_check_out_alone():
    avals = [ShapedArray((2,), np.dtype(np.float64)), ShapedArray((), np.dtype(np.int32))]
    outs = [np.empty(2), np.empty((), np.int32)]
    assert check_out(outs, avals, [np.ones(2)]) == outs
    with pytest.raises(ValueError, match="1 arrays, but the function has 2 outputs"):
        check_out(outs[:1], avals, [])
    with pytest.raises(ValueError, match="res shares memory with input 0"):
        check_out(outs, avals, [outs[0]], names=["res", "n"])
    empty = np.empty(0)
    check_out([empty, outs[1]], [ShapedArray((0,), np.dtype(np.float64)), avals[1]], [empty])  # nothing shared


def test_numpy_executable_writes_into_out():
    graph = ember.make_graph(lambda x: (x + 1, x.sum()))(np.arange(3.0))
    exe = NumpyExecutable(graph, plan_memory(graph))
    out = [np.empty(3), np.empty(())]
    assert exe(np.arange(3.0), out=out) == out
    assert out[0].tolist() == [1.0, 2.0, 3.0] and float(out[1]) == 3.0
    assert [o.tolist() for o in exe(np.arange(3.0))] == [[1.0, 2.0, 3.0], 3.0]


def test_the_oracle_check_sees_an_executable_that_ignores_out():
    graph = ember.make_graph(lambda x: x + 1)(np.arange(3.0))
    exe = NumpyExecutable(graph, plan_memory(graph))
    ignores = Checked(lambda *a, out=None: exe(*a), graph, name="ignores",
                      oracle_plan=lambda: plan_memory(graph, inplace=False))
    ignores(np.arange(3.0))  # without out: correct
    with pytest.raises(AssertionError, match="ignores: given out= arrays, the executable returned other arrays"):
        ignores(np.arange(3.0), out=[np.empty(3)])


def test_out_calls_allocate_no_arrays_on_the_llvm_backend():
    """Seed 001: a gradient into preallocated storage with zero allocations per call. NumPy reports
    its array buffers to tracemalloc; a call with `out=` allocates only the argument tuple."""
    import tracemalloc

    import ember.config

    was = ember.config.read("ember_check_oracle")  # the oracle check copies the inputs on every call
    ember.config.update("ember_check_oracle", False)

    x = np.linspace(0, 1, 10_000)
    c = ember.jit(ember.grad(eam), backend="llvm").lower(x).compile()
    g = np.empty_like(x)
    c(x, out=g)
    c(x)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(100):
            c(x, out=g)
        with_out = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        c(x)
        without = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        ember.config.update("ember_check_oracle", was)
    assert with_out < 4096 and without >= x.nbytes, (with_out, without)  # small Python objects only
    np.testing.assert_allclose(g, ember.jit(ember.grad(eam), backend="numpy")(x), rtol=1e-12)
