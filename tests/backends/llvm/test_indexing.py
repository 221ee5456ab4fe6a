"""The LLVM rendering of ArgReduce and Scatter steps (backends/llvm/indexing.py) computes what the
kernel description's NumPy reference (`kernel.evaluate`) computes: bit for bit, NaN and ties included."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings

from ember.backends.kernel import Buffer, Contraction, Kernel, Scatter, evaluate, lower_kernel
from ember.backends.llvm.indexing import emit_step, step_scratch_bytes
from tests.backends.llvm.harness import Compiled, new_module, pointer_function
from tests.backends.test_kernel import arg_body, arg_cases, scatter_body, scatter_cases, summed_at_once


@functools.lru_cache(maxsize=256)
def render(step, buffers: tuple[Buffer, ...]) -> Compiled:
    """`void f(ptr <buffers>..., ptr scratch)` running `step` alone, compiled at O3."""
    module = new_module()
    fn, builder = pointer_function(module, "f", len(buffers) + 1)
    emit_step(builder, step, {b.name: b for b in buffers}, dict(zip((b.name for b in buffers), fn.args)),
              fn.args[-1])
    builder.ret_void()
    return Compiled(module)


def scratch_for(step, buffers) -> np.ndarray:
    n = step_scratch_bytes(step, {b.name: b for b in buffers})
    assert n % 64 == 0
    raw = np.zeros(n + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + n]


def run(kernel: Kernel, *arrays) -> tuple[np.ndarray, ...]:
    """The kernel's one step as native code on `arrays`."""
    (step,) = kernel.steps
    buffers = kernel.inputs + kernel.outputs
    outs = [np.full(b.shape, 99, b.dtype) for b in kernel.outputs]  # garbage the step must overwrite
    render(step, buffers).call("f", *(np.ascontiguousarray(a) for a in arrays), *outs, scratch_for(step, buffers))
    return tuple(outs)


def same(got, want) -> None:
    np.testing.assert_array_equal(got, want, strict=True)
    if want.dtype.kind == "f":  # signed zeros too
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# --- argmax / argmin -------------------------------------------------------------------------------------

@settings(max_examples=60)
@given(arg_cases())
def test_arg_reduce_matches_evaluate(case):
    x = case[0]
    k = lower_kernel(arg_body(*case), "reduction")
    (got,), (want,) = run(k, x), evaluate(k, x)
    same(got, want)


@settings(max_examples=40)
@given(arg_cases(longest=80))
def test_arg_reduce_of_long_rows_searched_in_vector_lanes_matches_evaluate(case):
    x = case[0]
    k = lower_kernel(arg_body(*case), "reduction")
    (got,), (want,) = run(k, x), evaluate(k, x)
    same(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool"])
@pytest.mark.parametrize("combine", ["argmax", "argmin"])
def test_arg_reduce_lanes_merge_ties_and_nans_to_the_smallest_index(dtype, combine):
    """Rows of 40: 2 blocks of 16 lanes and a tail of 8. The winner sits in a later lane than an equal
    value of a later block, or in the tail."""
    rows = np.zeros((5, 40))
    rows[0, [20, 3]] = 5.0  # lane 4 block 1, lane 3 block 0: index 3 wins
    rows[1, [17, 34]] = 5.0  # lane 1 block 1 and the tail: 17
    rows[2, 39] = 5.0  # the tail only
    rows[3, [30, 18, 36]] = np.nan  # NaNs: 18
    rows[4, [5, 21]] = -5.0
    rows = rows if dtype.startswith("float") else np.nan_to_num(rows, nan=9.0)
    x = (rows if combine == "argmax" else -rows).astype(dtype)
    k = lower_kernel(arg_body(x, 1, combine, np.dtype(np.int32)), "reduction")
    (got,), (want,) = run(k, x), evaluate(k, x)
    same(got, want)
    if dtype.startswith("float"):
        assert list(got[:4]) == [3, 17, 39, 18]


ROWS = {
    "float": (np.array([[1.0, np.nan, 3.0, np.nan], [-0.0, 0.0, -1.0, -1.0], [2.0, 2.0, np.inf, np.inf]]),
              {"argmax": [1, 0, 2], "argmin": [1, 2, 0]}),
    "int8": (np.array([[-128, 127, 127, -128], [5, 5, 5, 5], [0, -1, 0, 1]], np.int8),
             {"argmax": [1, 0, 3], "argmin": [0, 0, 1]}),
    "uint64": (np.array([[2**64 - 1, 0, 2**63, 2**64 - 1], [1, 1, 0, 0], [0, 2**63, 2**63 + 1, 5]], np.uint64),
               {"argmax": [0, 0, 2], "argmin": [1, 2, 0]}),
    "bool": (np.array([[False, True, True, False], [False, False, False, False], [True, True, False, False]]),
             {"argmax": [1, 0, 0], "argmin": [0, 0, 2]}),
}


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "uint64", "bool"])
@pytest.mark.parametrize("combine", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1])
def test_arg_reduce_first_nan_then_first_of_ties(dtype, combine, axis):
    x, wants = ROWS["float" if dtype.startswith("float") else dtype]
    x = x.astype(dtype)
    x = x if axis == 1 else np.ascontiguousarray(x.T)
    (got,) = run(lower_kernel(arg_body(x, axis, combine, np.dtype(np.int32)), "reduction"), x)
    np.testing.assert_array_equal(got, np.array(wants[combine], np.int32))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_arg_reduce_of_a_long_axis_wraps_into_int8_as_the_reference(axis):
    shape = [2, 3, 4]
    shape[axis] = 300
    x = np.random.default_rng(axis).standard_normal(shape).astype(np.float32)
    k = lower_kernel(arg_body(x, axis, "argmin", np.dtype(np.int8)), "reduction")
    (got,), (want,) = run(k, x), evaluate(k, x)
    same(got, want)
    assert (np.argmin(x, axis) > 127).any()  # some indices wrapped


def test_arg_reduce_over_a_leading_axis_vectorizes_its_inner_loop():
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    k = lower_kernel(arg_body(x, 0, "argmax", np.dtype(np.int32)), "reduction")
    (step,) = k.steps
    assert step_scratch_bytes(step, {b.name: b for b in k.inputs}) == 256 * 12
    assert "x float>" in render(step, k.inputs + k.outputs).optimized_ir
    same(run(k, x)[0], evaluate(k, x)[0])


# --- scatter ---------------------------------------------------------------------------------------------

@settings(max_examples=80)
@given(scatter_cases())
def test_scatter_matches_evaluate(case):
    _, operand, indices, updates, _ = case
    k = lower_kernel(scatter_body(*case), "loop")
    (got,) = run(k, operand, indices, updates)
    with np.errstate(all="ignore"):
        (want,) = evaluate(k, operand, indices, updates)
    if summed_at_once(*case):
        np.testing.assert_allclose(got, want, rtol=1e-2 if operand.dtype == np.float16 else 1e-5)
    else:
        same(got, want)


def test_scatter_duplicates_add_in_update_order_or_the_last_wins():
    x = np.zeros(4, np.float32)
    i = np.array([[1], [3], [1], [1], [9], [-1]], np.int32)
    u = np.array([1e8, 2.0, 1.0, -1e8, 5.0, 6.0], np.float32)
    (added,) = run(lower_kernel(scatter_body("add", x, i, u, 0), "loop"), x, i, u)
    same(added, np.array([0.0, 0.0, 0.0, 2.0], np.float32))  # (1e8 + 1) - 1e8, in that order
    (kept,) = run(lower_kernel(scatter_body("replace", x, i, u, 0), "loop"), x, i, u)
    same(kept, np.array([0.0, -1e8, 0.0, 2.0], np.float32))


@pytest.mark.parametrize("mode", ["add", "replace"])
def test_scatter_in_place_into_its_operand(mode):
    """out is operand's buffer (no copy), or another name for the same memory (the copy is a memmove)."""
    rng = np.random.default_rng(2)
    x, i, u = rng.standard_normal((6, 5)), np.array([[4], [0], [4], [7]], np.int64), rng.standard_normal((4, 5))
    k = lower_kernel(scatter_body(mode, x, i, u, 0), "loop")
    (want,) = evaluate(k, x, i, u)
    step = Scatter(mode, "out0", "in1", "in2", 0, "out0")
    buffers = k.inputs + k.outputs
    out = x.copy()
    render(step, buffers).call("f", np.zeros_like(x), i, u, out, scratch_for(step, buffers))
    same(out, want)
    shared = x.copy()
    render(k.steps[0], buffers).call("f", shared, i, u, shared, scratch_for(k.steps[0], buffers))
    same(shared, want)


def test_scatter_add_of_rows_vectorizes_its_inner_loop():
    x = np.zeros((50, 128), np.float32)
    i = np.random.default_rng(3).integers(-5, 55, (200, 1)).astype(np.int32)
    u = np.random.default_rng(4).standard_normal((200, 128)).astype(np.float32)
    k = lower_kernel(scatter_body("add", x, i, u, 0), "loop")
    assert "x float>" in render(k.steps[0], k.inputs + k.outputs).optimized_ir
    same(run(k, x, i, u)[0], evaluate(k, x, i, u)[0])


def test_emit_step_refuses_other_steps():
    with pytest.raises(TypeError, match="ArgReduce and Scatter"):
        emit_step(None, Contraction("in0", "in1", (((1,), (0,)), ((), ())), "out0"), {}, {}, None)
