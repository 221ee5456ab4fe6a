"""The loop renderer (backends/llvm/loops.py): kernels lowered from fusion bodies, compiled and run,
must equal the kernel description's NumPy reference (`kernel.evaluate`), and their loops must vectorize."""

from __future__ import annotations

import math
import re
import sys
import types

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given, settings
from llvmlite import ir

import ember.numpy as jnp
from ember.backends.kernel import evaluate, lower_kernel
from ember.backends.llvm import columns, loops
from ember.backends.llvm.columns import column_tile
from ember.backends.llvm.types import PTR, value_type
from ember.tracer import prims as P
from tests.backends.llvm.harness import Compiled, new_module
from tests.backends.test_kernel import LAYOUT_CASES, body, data, programs

RNG = np.random.default_rng(1)


# --- a small scalar op table for these tests (the backend uses ember.backends.llvm.scalar) ----------

def _libm(b: ir.IRBuilder, name: str, args, dtype):
    """A float math function through libm (float16 computed in float32)."""
    dt = np.dtype(dtype)
    work = np.dtype(np.float32) if dt == np.float16 else dt
    args = [_convert(b, a, dt, work) for a in args]
    t = value_type(work)
    sym = name + ("f" if work == np.float32 else "")
    fn = b.module.globals.get(sym) or ir.Function(b.module, ir.FunctionType(t, [t] * len(args)), sym)
    return _convert(b, b.call(fn, args), work, dt)


def _intrinsic(b, name, args):
    t = args[0].type
    suffix = {"half": "f16", "float": "f32", "double": "f64"}.get(str(t), str(t))
    full = f"llvm.{name}.{suffix}"
    fn = b.module.globals.get(full) or ir.Function(b.module, ir.FunctionType(t, [t] * len(args)), full)
    return b.call(fn, list(args))


def _convert(b, v, src, dst):
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return v
    t = value_type(dst)
    if dst.kind == "b":
        return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0)) if src.kind == "f" else \
            b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
    if src.kind == "f" and dst.kind == "f":
        return b.fpext(v, t) if dst.itemsize > src.itemsize else b.fptrunc(v, t)
    if src.kind == "f":
        return b.fptosi(v, t) if dst.kind == "i" else b.fptoui(v, t)
    if dst.kind == "f":
        return b.sitofp(v, t) if src.kind == "i" else b.uitofp(v, t)
    if dst.itemsize < src.itemsize:
        return b.trunc(v, t)
    if dst.itemsize == src.itemsize and src.kind != "b":
        return v
    return b.sext(v, t) if src.kind == "i" else b.zext(v, t)


_FLOAT_CMP = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}


def _emit_op(b: ir.IRBuilder, op, args, arg_dtypes):
    name, dt, src = op.prim, op.dtype, np.dtype(arg_dtypes[-1]) if arg_dtypes else None
    isf = src is not None and src.kind == "f"
    if name == "select":
        return b.select(*args)
    if name == "convert_element_type":
        return _convert(b, args[0], src, dt)
    if name in _FLOAT_CMP:
        if isf:
            return b.fcmp_unordered("!=", *args) if name == "ne" else b.fcmp_ordered(_FLOAT_CMP[name], *args)
        return (b.icmp_unsigned if src.kind in "ub" else b.icmp_signed)(_FLOAT_CMP[name], *args)
    if name in ("add", "sub", "mul"):
        return getattr(b, ("f" if isf else "") + name)(*args)
    if name == "div":
        return b.fdiv(*args)
    if name == "neg":
        return b.fneg(args[0])
    if name in ("max", "min"):
        return _intrinsic(b, {"max": "maximum", "min": "minimum"}[name] if isf else
                          ("u" if src.kind == "u" else "s") + name, args)
    if name == "abs":
        return _intrinsic(b, "fabs", args)
    if name in ("exp", "log", "sin", "cos", "tanh", "sqrt", "expm1", "log1p", "pow"):
        return _libm(b, name, args, dt)
    raise NotImplementedError(name)


def _constant(value, dtype):
    return ir.Constant(value_type(dtype), int(value) if np.dtype(dtype).kind in "iub" else float(value))


# emit_op/constant/convert, as ember.backends.llvm.scalar provides them
SCALAR = types.SimpleNamespace(emit_op=_emit_op, constant=_constant, convert=_convert)


# --- compiling and running a kernel --------------------------------------------------------------

def target_module() -> ir.Module:
    m = new_module()
    tm = llvm.Target.from_triple(m.triple).create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten())
    m.data_layout = str(tm.target_data)  # without it the vectorizer has no cost model and stays scalar
    return m


class Native:
    """A kernel's function behind an exported wrapper, compiled; called like `evaluate` (with `out`
    arrays that are inputs only for the (output, input) pairs in `aliased`)."""

    def __init__(self, kernel, aliased=frozenset()):
        self.kernel = kernel
        self.module = target_module()
        self.fn = loops.kernel_function(self.module, kernel, "kernel", scalar=SCALAR, aliased=aliased)
        n = len(self.fn.args)
        run = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR] * n), "run")
        b = ir.IRBuilder(run.append_basic_block())
        b.call(self.fn, run.args)
        b.ret_void()
        self.unoptimized = str(self.module)
        self.compiled = Compiled(self.module)
        self.scratch = _aligned(loops.scratch_bytes(kernel))

    def __call__(self, *arrays, out=None):
        arrays = [np.ascontiguousarray(a) for a in arrays]
        outs = out or [np.empty(b.shape, b.dtype) for b in self.kernel.outputs]
        temps = [np.empty(b.shape, b.dtype) for b in self.kernel.temps]
        self.compiled.call("run", *arrays, *outs, *temps, self.scratch)
        return tuple(outs)


def _aligned(n: int) -> np.ndarray:
    raw = np.empty(n + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + max(n, 1)]


def check(g, *args, kind="reduction", rtol=1e-6, exact=False):
    """Lower `g`, run it natively and with `evaluate`; they must agree. Returns the Native."""
    k = lower_kernel(g, kind)
    native = Native(k)
    got, want = native(*args), evaluate(k, *args)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        if exact or a.dtype.kind in "iub":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=rtol)
    return native


def vector_types(text: str) -> set[str]:
    return set(re.findall(r"<(\d+) x (float|double|half|i\d+)>", text))


# --- every kind of loop the kernel description produces ------------------------------------------

@pytest.mark.parametrize("name", sorted(LAYOUT_CASES))
def test_layout_ops(name):
    fn, shape = LAYOUT_CASES[name]
    check(body(fn, (shape, "float32")), data(shape), rtol=1e-6)


@settings(max_examples=30, deadline=None)
@given(programs())
def test_random_elementwise_and_layout_programs(prog):
    """Chains of exp/tanh/sin magnify the ulp differences of libm and NumPy; a wrong index map or
    loop order gives errors of order one."""
    shape, g = prog
    check(g, data(shape), rtol=1e-3)


SUBSETS = [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("axes", SUBSETS)
@pytest.mark.parametrize("prim", ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "int8"])
def test_reductions_over_every_axis_subset(prim, axes, dtype):
    reducer = getattr(P, prim)
    g = body(lambda x: [reducer(x, axes)], ((3, 5, 4), dtype))
    check(g, data((3, 5, 4), dtype), rtol=1e-5)


@pytest.mark.parametrize("axes", SUBSETS)
def test_bool_max_and_min_reductions(axes):
    g = body(lambda x: [P.reduce_max(x, axes), P.reduce_min(x, axes)], ((3, 5, 4), "bool"))
    check(g, data((3, 5, 4), "bool"))


@pytest.mark.parametrize("shape,axes", [((3000,), (0,)), ((7, 3000), (1,)), ((3000, 3), (0,)), ((5, 600, 3), (0, 2))])
def test_float16_sums_accumulate_in_float32(shape, axes):
    g = body(lambda x: [P.reduce_sum(x, axes)], (shape, "float16"))
    native = check(g, data(shape, "float16"), rtol=2e-3)
    (out,) = native(np.ones(shape, np.float16))
    assert np.all(out == np.prod([shape[a] for a in axes]))  # float16 steps of 1 stop counting at 2048


@pytest.mark.parametrize("shape,axes", [((2, 3000), (1,)), ((3000, 2), (0,)), ((4, 50, 6), (0, 2)), ((7,), (0,))])
@pytest.mark.parametrize("prim", ["reduce_max", "reduce_min"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_max_and_min_reductions_propagate_nan(prim, shape, axes, dtype):
    g = body(lambda x: [getattr(P, prim)(x, axes)], (shape, dtype))
    native = check(g, data(shape, dtype))
    x = data(shape, dtype)
    x.reshape(-1)[x.size // 2] = np.nan
    (got,) = native(x)
    np.testing.assert_array_equal(got, evaluate(lower_kernel(g, "reduction"), x)[0])
    assert np.isnan(got).any()


# column reductions walked in tiles of whole vectors (llvm/columns.py): widths that are no multiple of a
# vector, tails of rows past the last tile, several float64 blocks, outer kept and reduced levels (NaN
# propagation in tiles: the (3000, 2) case above)
COLUMNS = {
    "width_1": (lambda x: [P.reduce_sum(x, (0,))], ((5000, 1), "float32")),
    "width_3_blocks_and_tail": (lambda x: [P.reduce_sum(x, (0,))], ((10007, 3), "float32")),
    "width_17_prod": (lambda x: [P.reduce_prod(x * 0.1 + 1.0, (0,))], ((40, 17), "float64")),
    "width_64_int8_min": (lambda x: [P.reduce_min(x, (0,))], ((130, 64), "int8")),
    "width_100_int32_sum": (lambda x: [P.reduce_sum(x, (0,))], ((70, 100), "int32")),
    "width_5_uint8_sum_wraps": (lambda x: [P.reduce_sum(x * 50, (0,))], ((300, 5), "uint8")),
    "bool_any_all": (lambda x: [P.reduce_max(x, (0,)), P.reduce_min(x, (0,))], ((100, 17), "bool")),
    "float16_sum_and_max": (lambda x: [P.reduce_sum(x, (0,)), P.reduce_max(x, (0,))], ((999, 3), "float16")),
    "kept_outer_level": (lambda x: [P.reduce_sum(x, (1,))], ((9, 40, 3), "float32")),
    "two_reduced_levels": (lambda x: [P.reduce_sum(x, (0, 2))], ((6, 7, 8, 3), "float32")),
    "fused_prologue_and_store": (lambda x: [jnp.tanh(x) * x, P.reduce_sum(jnp.tanh(x) * x, (0,))],
                                 ((257, 17), "float32")),
}


@pytest.fixture
def tiles_always(monkeypatch):
    """Tiles at the tests' small shapes too (loops under columns.TILE_MIN_ELEMENTS walk their rows)."""
    monkeypatch.setattr(columns, "TILE_MIN_ELEMENTS", 0)


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_column_reductions_in_tiles(name, tiles_always):
    fn, (shape, dtype) = COLUMNS[name]
    g = body(fn, (shape, dtype))
    # rtol: the reference adds 10**4 rows one after another in float32
    native = check(g, data(shape, dtype), kind="multi_output" if "store" in name else "reduction", rtol=1e-3)
    if shape[-1] > 1:
        assert "alloca" in native.unoptimized.split("define")[1]  # the tile's accumulators


def test_column_sums_in_tiles_are_as_accurate_as_numpy(tiles_always):
    """Each slot sums blocks of rows into a compensated float64 total: NumPy adds row after row."""
    n = 200_000
    native = Native(lower_kernel(body(lambda x: [P.reduce_sum(x, (0,))], ((n, 3), "float32")), "reduction"))
    for x in (np.full((n, 3), 0.1, np.float32), RNG.random((n, 3), dtype=np.float32)):
        exact = x.astype(np.float64).sum(axis=0)
        (got,) = native(x)
        assert np.all(np.abs(got - exact) <= np.abs(np.sum(x, axis=0) - exact))
        assert np.all(np.abs(got - exact) <= 2 * np.spacing(got))


def test_column_tiles_group_rows_into_whole_vectors(monkeypatch):
    def tile(fn, *avals):
        k = lower_kernel(body(fn, *avals), "reduction")
        buffers = {b.name: b for b in k.inputs + k.outputs + k.temps}
        return column_tile(k.steps[0], loops.loop_schedule(k.steps[0], buffers))

    assert tile(lambda x: [P.reduce_sum(x, (0,))], ((64, 3), "float32")) is None  # a short loop: rows
    monkeypatch.setattr(columns, "TILE_MIN_ELEMENTS", 0)
    groups = {w: tile(lambda x: [P.reduce_sum(x, (0,))], ((64, w), "float32")) for w in (3, 17, 64, 100, 2000)}
    assert {w: t and (t.group, t.size) for w, t in groups.items()} == {
        3: (16, 48), 17: (16, 272), 64: (1, 64), 100: (4, 400), 2000: None}  # 2000: rows walked as they are
    assert tile(lambda x: [P.reduce_sum(x, (0,))], ((64, 3), "float64")).group == 8
    bias = tile(lambda x, b: [P.reduce_sum(x + b, (0,))], ((64, 3), "float32"), ((3,), "float32"))
    assert bias is None  # the bias reads the columns alone: no single stream of rows


def test_gather_out_of_range_indices_clamp():
    g = body(lambda x, i: [jnp.exp(P.gather(x, i)) * 2.0], ((5, 3), "float32"), ((4, 1), "int32"))
    check(g, data((5, 3)), np.array([[0], [-3], [4], [9]], np.int32))
    g = body(lambda x, i: [P.gather(x, i, batch_dims=1) + 1.0], ((2, 5, 3), "float32"), ((2, 4, 2), "int64"))
    check(g, data((2, 5, 3)), np.array([[[0, 1], [7, -1], [4, 2], [2, 9]]] * 2, np.int64))
    g = body(lambda x, i: [P.gather(x, i) * 3], ((6,), "int16"), ((3, 1), "uint8"))
    check(g, data((6,), "int16"), np.array([[0], [250], [5]], np.uint8))


def test_softmax_runs_three_loops_with_temps():
    def softmax(x):
        m = P.reduce_max(x, (1,))
        e = jnp.exp(x - m[:, None])
        return [e / P.reduce_sum(e, (1,))[:, None]]

    native = check(body(softmax, ((6, 1500), "float32")), data((6, 1500)), rtol=1e-6)
    assert len(native.kernel.steps) == 3 and native.kernel.temps


def test_multi_output_loop_stores_and_reduces_in_one_nest():
    g = body(lambda x: [jnp.tanh(x), P.reduce_sum(jnp.tanh(x) ** 2, (0,)), P.reduce_sum(jnp.tanh(x), (1,))],
             ((40, 30), "float32"))
    check(g, data((40, 30)), kind="multi_output", rtol=1e-5)


def test_reduction_of_a_scalar_space_and_of_unit_axes():
    g = body(lambda x: [P.reduce_sum(x, (0, 2)), P.reduce_max(x, (0, 2))], ((1, 4, 1), "float32"))
    check(g, data((1, 4, 1)))
    g = body(lambda x: [P.reduce_sum(x, (0,)) * 2.0], ((1,), "float64"))
    check(g, data((1,), "float64"))


def test_zero_size_spaces_store_nothing_and_reduce_to_the_init():
    g = body(lambda x: [P.reduce_sum(x, (1,)), P.reduce_max(x, (1,)), P.reduce_prod(x, (1,))], ((3, 0), "float32"))
    check(g, np.zeros((3, 0), np.float32))
    g = body(lambda x: [x * 2.0, P.reduce_sum(x, (0,))], ((0, 4), "float32"))
    check(g, np.zeros((0, 4), np.float32), kind="multi_output")


def test_int_sums_wrap_as_the_reference():
    g = body(lambda x: [P.reduce_sum(x, (1,)), P.reduce_prod(x, (0,))], ((3, 50), "int8"))
    check(g, np.full((3, 50), 100, np.int8))
    g = body(lambda x: [P.reduce_sum(x, (0,))], ((5000,), "uint16"))
    check(g, RNG.integers(0, 65535, 5000).astype(np.uint16))


def test_iota_and_converts_of_index_values():
    g = body(lambda x: [x + P.iota(np.int8, (3, 4), 1), P.iota(np.float64, (3, 4), 0) * 0.5], ((3, 4), "int8"))
    check(g, data((3, 4), "int8"))


# --- the nest: collapsed axes, hoisting, in place -------------------------------------------------

def _loop_blocks(text: str) -> int:
    return len(re.findall(r"^loop(\.\d+)?:", text, re.M))


def test_identity_maps_collapse_into_one_loop():
    g = body(lambda x, y: [x * y + 1.0], ((3, 5, 7), "float32"), ((3, 5, 7), "float32"))
    native = check(g, data((3, 5, 7)), data((3, 5, 7)))
    assert _loop_blocks(native.unoptimized) == 1
    g = body(lambda x: [P.transpose(x, (1, 0)) + 1.0], ((6, 5), "float32"))
    assert _loop_blocks(check(g, data((6, 5))).unoptimized) == 2
    g = body(lambda x: [P.reduce_sum(x, (1, 2))], ((4, 5, 6), "float32"))
    assert _loop_blocks(check(g, data((4, 5, 6))).unoptimized) == 2


def test_ops_of_outer_loop_vars_are_hoisted_out_of_the_inner_loop():
    g = body(lambda x, y: [x * jnp.exp(y)[:, None]], ((8, 300), "float32"), ((8,), "float32"))
    native = check(g, data((8, 300)), data((8,)))
    kernel = native.unoptimized.split("define internal")[1].split("\n}")[0]
    blocks = kernel.split("\nloop")
    assert len(blocks) == 3 and "call" in blocks[1] and '%"in1"' in blocks[1]
    assert "call" not in blocks[2] and '%"in1"' not in blocks[2]  # exp(y[i0]) runs once per row


def test_in_place_elementwise_loops_may_share_input_and_output():
    g = body(lambda x, y: [jnp.exp(x) * y + x], ((1000,), "float32"), ((1000,), "float32"))
    k = lower_kernel(g, "loop")
    assert loops.no_alias(k) >= {"in0", "in1", "out0"}
    shared = frozenset({("out0", "in0")})
    assert loops.no_alias(k, shared) & {"in0", "out0"} == set() and "in1" in loops.no_alias(k, shared)
    native = Native(k, shared)
    x, y = data(1000), data(1000)
    want = evaluate(k, x, y)[0]
    native(x, y, out=[x])
    np.testing.assert_allclose(x, want, rtol=1e-6, atol=1e-6)


def test_outputs_that_may_alias_an_input_read_elsewhere_are_not_noalias():
    g = body(lambda x: [P.rev(x, (0,)) + x], ((64,), "float32"))
    assert "out0" not in loops.no_alias(lower_kernel(g, "loop"))
    g = body(lambda x: [x * 2.0, P.reduce_sum(x, (0,))], ((64,), "float32"))
    assert {"out0", "in0"} <= loops.no_alias(lower_kernel(g, "multi_output"))


# --- vectorization and accuracy -------------------------------------------------------------------

VECTORIZED = {
    "elementwise": (lambda x: [x * 2.0 + 1.0], ((4096,), "float32"), "loop"),
    "elementwise_2d": (lambda x: [x * 2.0 + 1.0], ((64, 64), "float32"), "loop"),
    "sum": (lambda x: [P.reduce_sum(x, (0,))], ((4096,), "float32"), "reduction"),
    "row_sum": (lambda x: [P.reduce_sum(x, (1,))], ((16, 4096), "float64"), "reduction"),
    "column_sum": (lambda x: [P.reduce_sum(x, (0,))], ((256, 512), "float32"), "reduction"),
    "max": (lambda x: [P.reduce_max(x, (0,))], ((4096,), "float32"), "reduction"),
    "column_max": (lambda x: [P.reduce_max(x, (0,))], ((256, 512), "float32"), "reduction"),
    "int_sum": (lambda x: [P.reduce_sum(x, (0,))], ((4096,), "int32"), "reduction"),
    "float16_sum": (lambda x: [P.reduce_sum(x, (0,))], ((4096,), "float16"), "reduction"),
}


@pytest.mark.parametrize("name", sorted(VECTORIZED))
def test_loops_vectorize(name):
    fn, (shape, dtype), kind = VECTORIZED[name]
    native = check(body(fn, (shape, dtype)), data(shape, dtype), kind=kind, rtol=1e-3)
    assert vector_types(native.compiled.optimized_ir), native.compiled.optimized_ir


def test_float32_sum_of_ten_million_elements_is_as_accurate_as_numpy():
    n = 10**7
    g = body(lambda x: [P.reduce_sum(x, (0,))], ((n,), "float32"))
    native = Native(lower_kernel(g, "reduction"))
    rng = np.random.default_rng(4)
    for x in (rng.random(n, dtype=np.float32), rng.standard_normal(n).astype(np.float32) + 0.25):
        exact = math.fsum(x.astype(np.float64))
        (got,) = native(x)
        assert abs(float(got) - exact) <= abs(float(np.sum(x)) - exact)
    x = np.full(n, 0.1, np.float32)
    (got,) = native(x)
    assert abs(float(got) - math.fsum(x.astype(np.float64))) <= abs(float(np.sum(x)) - math.fsum(x.astype(np.float64)))


def test_float64_sum_is_close_to_exact():
    n = 10**6
    native = Native(lower_kernel(body(lambda x: [P.reduce_sum(x, (0,))], ((n,), "float64")), "reduction"))
    rng = np.random.default_rng(5)
    for x in (rng.standard_normal(n) * 1e3, rng.random(n), np.full(n, 0.1)):
        (got,) = native(x)
        exact = math.fsum(x)
        assert abs(float(got) - exact) <= abs(float(np.sum(x)) - exact)


def test_outputs_that_are_inputs_or_literals_are_stored():
    from ember.tracer import ShapedArray
    from ember.tracer.ir import Graph, Literal, Var

    x = Var(ShapedArray((3,), np.dtype(np.float32)))
    check(Graph([x], [], [x, Literal(2.5, np.float32), x]), data(3), kind="loop")


# --- steps other than loops go to their modules -----------------------------------------------------

def _naive_contraction(builder, step, buffers, ptrs, scratch):
    """out[i, j] = sum_k lhs[i, k] * rhs[k, j] as three plain loops (a test double of dot.py)."""
    from ember.backends.llvm.types import index, load, store

    (m, kk), (_, n) = buffers[step.lhs].shape, buffers[step.rhs].shape
    dt = buffers[step.out].dtype
    fn = builder.function

    def loop(count, body):
        pre, head = builder.block, fn.append_basic_block()
        builder.branch(head)
        builder.position_at_end(head)
        i = builder.phi(ir.IntType(64))
        i.add_incoming(index(0), pre)
        body(i)
        nxt = builder.add(i, index(1))
        i.add_incoming(nxt, builder.block)
        done = fn.append_basic_block()
        builder.cbranch(builder.icmp_unsigned("<", nxt, index(count)), head, done)
        builder.position_at_end(done)

    def cell(i, j):
        acc = builder.alloca(value_type(dt))
        builder.store(ir.Constant(value_type(dt), 0.0), acc)
        loop(kk, lambda k: builder.store(builder.fadd(builder.load(acc), builder.fmul(
            load(builder, ptrs[step.lhs], builder.add(builder.mul(i, index(kk)), k), dt),
            load(builder, ptrs[step.rhs], builder.add(builder.mul(k, index(n)), j), dt))), acc))
        store(builder, builder.load(acc), ptrs[step.out], builder.add(builder.mul(i, index(n)), j), dt)

    loop(m, lambda i: loop(n, lambda j: cell(i, j)))


def test_contraction_steps_go_to_dot_and_the_epilogue_runs_over_their_output(monkeypatch):
    fake = types.SimpleNamespace(emit_contraction=_naive_contraction,
                                 contraction_scratch_bytes=lambda step, buffers: 100)
    monkeypatch.setitem(sys.modules, "ember.backends.llvm.dot", fake)
    monkeypatch.delattr("ember.backends.llvm.dot", raising=False)

    def dense(w, x, b):
        return [jnp.tanh(P.dot_general(w, x, (((1,), (0,)), ((), ()))) + b[:, None])]

    g = body(dense, ((4, 6), "float32"), ((6, 5), "float32"), ((4,), "float32"))
    native = check(g, data((4, 6)), data((6, 5)), data((4,)), kind="epilogue", rtol=1e-5)
    assert loops.scratch_bytes(native.kernel) == 128  # rounded up to the 64-byte alignment
