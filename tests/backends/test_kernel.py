"""The shared kernel description (backends/kernel.py): lowered fusion bodies evaluated with NumPy
must equal the body run node by node (`run_body`), bit for bit where the ops are the same NumPy ops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember.numpy as jnp
from ember.backends import kernel_index as ix
from ember.backends.kernel import (
    SCATTER_MODES,
    ArgReduce,
    Contraction,
    KernelError,
    Loop,
    Scatter,
    evaluate,
    lower_kernel,
)
from ember.tracer import ShapedArray, trace_flat
from ember.tracer import prims as P
from ember.tracer.primitive import impl_rules, primitives
from ember.tracer.prims.fusion import run_body

RNG = np.random.default_rng(0)


def body(fn, *avals):
    """The graph of `fn` on (shape, dtype) avals: a fusion body when all its nodes are fusible."""
    return trace_flat(lambda *a: list(fn(*a)), [ShapedArray(s, np.dtype(d)) for s, d in avals])


def data(shape, dtype="float32"):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return RNG.standard_normal(shape).astype(dt)
    if dt.kind == "b":
        return RNG.random(shape) < 0.5
    return RNG.integers(-5, 6, shape).astype(dt)


def check(g, *args, kind="loop", exact=True, rtol=1e-6):
    """Lower `g`, evaluate it, compare with run_body; returns the kernel."""
    k = lower_kernel(g, kind)
    got, want = evaluate(k, *args), run_body(g, args)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        b = np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        if exact:
            np.testing.assert_array_equal(a, b, strict=True)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
    return k


def _ops(k):
    return [o for s in k.steps if isinstance(s, Loop) for o in s.ops]


# --- layout ops as index maps -------------------------------------------------------------------------

LAYOUT_CASES = {
    "broadcast": (lambda x: [P.broadcast_in_dim(x[:, :1], (3, 2, 4), (0, 2)) * 2.0], (3, 4)),
    "transpose": (lambda x: [jnp.exp(P.transpose(x, (2, 0, 1)))], (2, 3, 4)),
    "reshape_split": (lambda x: [jnp.sin(P.reshape(x, (2, 3, 4)))], (6, 4)),
    "reshape_merge": (lambda x: [jnp.sin(P.reshape(x, (6, 4)))], (2, 3, 4)),
    "reshape_odd": (lambda x: [P.reshape(x, (3, 4)) + 1.0], (4, 3)),
    "slice": (lambda x: [P.slice(x, (1, 0), (6, 7), (2, 3)) - 1.0], (7, 8)),
    "rev": (lambda x: [P.rev(x, (0, 2)) * x], (2, 3, 4)),
    "pad_interior": (lambda x: [P.pad(x, -7.5, ((1, 2, 1), (0, 3, 2))) + 1.0], (3, 4)),
    "pad_edges": (lambda x: [P.pad(jnp.exp(x), 0.5, ((2, 0, 0), (0, 1, 0)))], (3, 4)),
    "iota": (lambda x: [x + P.iota(np.float32, (3, 4), 1), P.iota(np.int32, (3, 4), 0)], (3, 4)),
    "concatenate": (lambda x: [P.concatenate([x, jnp.exp(x), x[:, :1]], 1)], (3, 4)),
    "convert": (lambda x: [P.convert_element_type(x * 3.0, np.int32) + 1,
                           P.convert_element_type(x, np.float16)], (3, 4)),
    "select": (lambda x: [jnp.where(x > 0, x, P.rev(x, (1,)))], (3, 4)),
    "scalar_operands": (lambda x: [jnp.maximum(x, 0.25) * jnp.sum(x * 0.0)], (3, 4)),
    "layout_chain": (lambda x: [P.reshape(P.transpose(P.slice(x, (0, 1, 0), (4, 3, 6), (1, 1, 2)), (1, 0, 2)),
                                          (2, 12)) * 3.0], (4, 3, 6)),
}


@pytest.mark.parametrize("name", sorted(LAYOUT_CASES))
def test_layout_ops_become_index_maps(name):
    fn, shape = LAYOUT_CASES[name]
    g = body(fn, (shape, "float32"))
    k = check(g, data(shape), kind="reduction" if name == "scalar_operands" else "loop")
    layout = {"broadcast_in_dim", "reshape", "transpose", "slice", "pad", "rev", "iota", "concatenate"}
    assert not {o.prim for o in _ops(k)} & layout


def test_reshape_index_maps_have_no_div_or_mod_when_axes_split_or_merge_evenly():
    k = lower_kernel(body(lambda x: [jnp.exp(P.reshape(x, (2, 3, 4)))], ((6, 4), "float32")), "loop")
    (load,) = [o for o in _ops(k) if o.prim == "load"]
    assert [str(i) for i in load.param("index")] == ["i0*3 + i1", "i2"]
    k = lower_kernel(body(lambda x: [jnp.exp(P.reshape(x, (6, 4)))], ((2, 3, 4), "float32")), "loop")
    (load,) = [o for o in _ops(k) if o.prim == "load"]
    assert [str(i) for i in load.param("index")] == ["i0 // 3", "i0 % 3", "i1"]


def test_index_simplification():
    i, j = ix.var(0, 5), ix.var(1, 4)
    assert ix.mul(i, 1) == i and ix.add(i, 0) == i and ix.add(ix.mul(i, 0), j) == j
    assert ix.floordiv(i, 1) == i and ix.mod(i, 1) == ix.const(0)
    assert ix.floordiv(i, 5) == ix.const(0) and ix.mod(i, 5) == i
    assert ix.floordiv(ix.add(ix.mul(i, 4), j), 4) == i and ix.mod(ix.add(ix.mul(i, 4), j), 4) == j
    assert ix.clamp(i, 0, 4) == i and ix.clamp(ix.add(i, 10), 0, 3) == ix.const(3)
    assert ix.and_(ix.ge(i, 0), ix.lt(i, 5)) == ix.TRUE and ix.lt(i, 0) == ix.FALSE
    assert str(ix.clamp(ix.add(i, -1), 0, 3)) == "clamp(i0 - 1, 0, 3)"
    lv = np.indices((5, 4), sparse=True)
    e = ix.mod(ix.floordiv(ix.add(ix.mul(i, 3), j), 2), 3)
    np.testing.assert_array_equal(ix.evaluate(e, lv, []), ((lv[0] * 3 + lv[1]) // 2) % 3)


def test_pad_without_padding_on_an_axis_needs_no_predicate_there():
    k = lower_kernel(body(lambda x: [P.pad(x, 0.0, ((0, 0, 0), (1, 0, 0))) + 1.0], ((3, 4), "float32")), "loop")
    (pred,) = [o for o in _ops(k) if o.prim == "index"]
    assert str(pred.param("index")) == "i1 >= 1"


def test_gather_clamps_out_of_range_indices_as_the_prim():
    g = body(lambda x, i: [jnp.exp(P.gather(x, i)) * 2.0], ((5, 3), "float32"), ((4, 1), "int32"))
    idx = np.array([[0], [-3], [4], [9]], np.int32)
    k = check(g, data((5, 3)), idx)
    assert any("clamp(%" in str(i) for o in _ops(k) if o.prim == "load" for i in o.param("index"))
    g = body(lambda x, i: [P.gather(x, i, batch_dims=1) + 1.0], ((2, 5, 3), "float32"), ((2, 4, 2), "int64"))
    check(g, data((2, 5, 3)), np.array([[[0, 1], [7, -1], [4, 2], [2, 9]]] * 2, np.int64))


def test_gather_with_computed_indices_and_operand():
    g = body(lambda x, i: [P.gather(jnp.exp(x), i * 2)], ((6,), "float32"), ((3, 1), "int32"))
    check(g, data((6,)), np.array([[0], [2], [5]], np.int32))


# --- reductions -------------------------------------------------------------------------------------

SUBSETS = [s for r in range(1, 4) for s in itertools.combinations(range(3), r)]


@pytest.mark.parametrize("axes", SUBSETS)
@pytest.mark.parametrize("prim", ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"])
def test_reductions_over_every_axis_subset(prim, axes):
    reducer = getattr(P, prim)
    g = body(lambda x: [reducer(jnp.exp(x * 0.1), axes)], ((2, 3, 4), "float32"))
    k = check(g, data((2, 3, 4)), kind="reduction", exact=prim in ("reduce_max", "reduce_min"))
    (loop,) = k.steps
    assert loop.space == (2, 3, 4) and loop.reduce_axes == axes and loop.reductions[0].out == "out0"


def test_float16_sums_accumulate_in_float32():
    g = body(lambda x: [P.reduce_sum(x, (0,))], ((4096,), "float16"))
    x = np.full(4096, 1.0, np.float16)
    (loop,) = lower_kernel(g, "reduction").steps
    assert loop.reductions[0].acc_dtype == np.float32
    (out,) = evaluate(lower_kernel(g, "reduction"), x)
    assert out == 4096 and out.dtype == np.float16  # float16 steps of 1 stop counting at 2048
    check(g, data(4096, "float16"), kind="reduction", exact=False, rtol=2e-3)


def test_small_int_sums_accumulate_as_the_reference():
    g = body(lambda x: [P.reduce_sum(x, (1,)), P.reduce_max(x, (0,))], ((3, 50), "int8"))
    k = check(g, np.full((3, 50), 100, np.int8), kind="reduction")
    assert k.steps[0].reductions[0].acc_dtype == np.int8


def test_consumers_of_a_reduction_run_in_a_second_loop_over_the_reduced_space():
    def softmax(x):
        m = P.reduce_max(x, (1,))
        e = jnp.exp(x - m[:, None])
        return [e / P.reduce_sum(e, (1,))[:, None]]

    g = body(softmax, ((3, 5), "float32"))
    k = check(g, data((3, 5)), kind="reduction", exact=False)
    spaces = [(s.space, s.reduce_axes) for s in k.steps]
    assert spaces == [((3, 5), (1,)), ((3, 5), (1,)), ((3, 5), ())]
    assert [o.prim for o in k.steps[1].ops].count("exp") == 1


def test_multi_output_loop_writes_a_full_space_value_and_a_reduced_one():
    g = body(lambda x: [jnp.tanh(x), P.reduce_sum(jnp.tanh(x) ** 2, (0,)), P.reduce_sum(jnp.tanh(x), (0,))],
             ((4, 3), "float32"))
    k = check(g, data((4, 3)), kind="multi_output", exact=False)
    (loop,) = k.steps
    assert len(loop.reductions) == 2 and len(loop.stores) == 1
    assert [o.prim for o in loop.ops].count("tanh") == 1


def test_reduction_to_a_scalar_then_elementwise():
    g = body(lambda x: [jnp.exp(x) / P.reduce_sum(jnp.exp(x), (0, 1))], ((3, 4), "float64"))
    k = check(g, data((3, 4), "float64"), kind="reduction", exact=False, rtol=1e-12)
    assert k.temps[0].shape == ()


# --- epilogue -----------------------------------------------------------------------------------------

def test_epilogue_contraction_into_the_output_buffer_then_bias_and_tanh_in_place():
    def dense(w, x, b):
        return [jnp.tanh(P.dot_general(w, x, (((1,), (0,)), ((), ()))) + b[:, None])]

    g = body(dense, ((4, 6), "float32"), ((6, 5), "float32"), ((4,), "float32"))
    k = check(g, data((4, 6)), data((6, 5)), data((4,)), kind="epilogue")
    contraction, loop = k.steps
    assert isinstance(contraction, Contraction) and contraction.out == "out0" and not k.temps
    assert {o.param("buffer") for o in loop.ops if o.prim == "load"} == {"out0", "in2"}
    assert "out0 = dot_general in0 in1" in str(k)


def test_contraction_of_a_computed_operand_stores_it_first():
    g = body(lambda a, b: [P.dot_general(jnp.exp(a), b, (((1,), (0,)), ((), ()))), a * 2.0],
             ((3, 4), "float64"), ((4, 2), "float64"))
    k = check(g, data((3, 4), "float64"), data((4, 2), "float64"), kind="epilogue", exact=False, rtol=1e-12)
    assert isinstance(k.steps[0], Loop) and isinstance(k.steps[1], Contraction)


# --- description as a whole -----------------------------------------------------------------------

def test_shared_subexpressions_are_computed_once_and_printed_one_line_per_op():
    g = body(lambda x, y: [jnp.exp(x + y) * jnp.exp(x + y), x + y], ((3,), "float32"), ((3,), "float32"))
    k = check(g, data(3), data(3))
    (loop,) = k.steps
    assert [o.prim for o in loop.ops] == ["load", "load", "add", "exp", "mul"]
    text = str(k).splitlines()
    assert text[0] == "kernel loop (in0: float32[3], in1: float32[3]) -> (out0: float32[3], out1: float32[3])"
    assert "    %3 = exp %2 : float32" in text and "    out1[i0] = %2" in text


def test_outputs_that_are_inputs_or_literals_are_stored():
    from ember.tracer.ir import Graph, Literal, Var

    x = Var(ShapedArray((3,), np.dtype(np.float32)))
    g = Graph([x], [], [x, Literal(2.5, np.float32), x])
    check(g, data(3))


def test_a_primitive_no_kernel_computes_is_refused():
    import ember

    @ember.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), x), lambda r, g: (g * jnp.cos(r),))
    g = body(lambda x: [f(x)], ((3,), "float32"))
    with pytest.raises(KernelError, match="custom_vjp_call"):
        lower_kernel(g, "loop")


# --- every primitive as a one-node body (how the backend lowers an unfused node) ----------------------

F, I = "float32", "int32"
_BIN = ((3, 4), F), ((3, 4), F)
ONE_NODE = {
    **{name: (getattr(P, name), _BIN) for name in ("add", "sub", "mul", "div", "pow", "rem", "eq", "ne", "lt",
                                                    "le", "gt", "ge", "atan2", "nextafter", "copysign",
                                                    "logaddexp", "logaddexp2", "zeta", "polygamma")},
    "max": (P.maximum, _BIN), "min": (P.minimum, _BIN),
    "and": (P.and_, (((3,), "bool"), ((3,), "bool"))), "or": (P.or_, (((3,), I), ((3,), I))),
    "not": (P.not_, (((3,), "uint8"),)),
    "xor": (P.xor, (((3,), "uint32"), ((3,), "uint32"))),
    "shift_left": (P.shift_left, (((3,), "int8"), ((3,), "int8"))),
    "shift_right_logical": (P.shift_right_logical, (((3,), "int16"), ((3,), "int16"))),
    "shift_right_arithmetic": (P.shift_right_arithmetic, (((3,), "uint32"), ((3,), "uint32"))),
    "population_count": (P.population_count, (((3,), "uint64"),)),
    "clz": (P.clz, (((3,), "int8"),)),
    # to the unsigned integer of the operand's width (the CUDA registry runs it at float16/32/64)
    "bitcast_convert_type": (lambda x: P.bitcast_convert_type(x, f"u{x.dtype.itemsize}"), (((3,), F),)),
    **{name: (getattr(P, name), (((3, 4), F),)) for name in (
        "neg", "exp", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "abs", "sign",
        "floor", "ceil", "round", "erf", "is_finite", "stop_gradient", "tan", "atan", "asin", "acos", "sinh",
        "cosh", "asinh", "acosh", "atanh", "cbrt", "exp2", "log2", "log10", "erfc", "erf_inv", "lgamma",
        "digamma")},
    "convert_element_type": (lambda x: P.convert_element_type(x, np.int16), (((3,), F),)),
    "select": (P.select, (((3,), "bool"), ((3,), F), ((3,), F))),
    "dot_general": (lambda a, b: P.dot_general(a, b, (((1,), (0,)), ((), ()))), (((3, 4), F), ((4, 2), F))),
    "gather": (P.gather, (((5, 3), F), ((4, 1), I))),
    # strided, padded (a crop on one side), base- and window-dilated windows
    **{name: (lambda x, name=name: P.reduce_window(
        primitives[name], x, window_dimensions=(2, 2), window_strides=(1, 2), padding=((1, 0), (2, -1)),
        base_dilation=(2, 1), window_dilation=(1, 2)), (((3, 5), F),))
       for name in ("reduce_window_sum", "reduce_window_max", "reduce_window_min")},
    # NHWC x HWIO, strided, padded, rhs-dilated, two feature groups
    "conv_general_dilated": (lambda x, w: P.conv_general_dilated(
        x, w, window_strides=(2, 1), padding=((1, 0), (0, 1)), lhs_dilation=(1, 1), rhs_dilation=(1, 2),
        dimension_numbers=((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)), feature_group_count=2),
        (((2, 5, 4, 4), F), ((2, 2, 2, 6), F))),
    "scatter_add": (P.scatter_add, (((5, 3), F), ((4, 1), I), ((4, 3), F))),
    "scatter": (P.scatter, (((5, 3), F), ((4, 1), I), ((4, 3), F))),
    "scatter_mul": (P.scatter_mul, (((5, 3), F), ((4, 1), I), ((4, 3), F))),
    "scatter_min": (P.scatter_min, (((5, 3), F), ((4, 1), I), ((4, 3), F))),
    "scatter_max": (P.scatter_max, (((5, 3), F), ((4, 1), I), ((4, 3), F))),
    "broadcast_in_dim": (lambda x: P.broadcast_in_dim(x, (2, 3), (1,)), (((3,), F),)),
    "reshape": (lambda x: P.reshape(x, (4, 3)), (((3, 4), F),)),
    "transpose": (lambda x: P.transpose(x, (1, 0)), (((3, 4), F),)),
    "concatenate": (lambda x, y: P.concatenate([x, y], 0), (((3, 4), F), ((2, 4), F))),
    "pad": (lambda x, v: P.pad(x, v, ((1, 0, 1), (0, 2, 0))), (((3, 4), F), ((), F))),
    "slice": (lambda x: P.slice(x, (1, 0), (3, 4), (1, 2)), (((3, 4), F),)),
    "rev": (lambda x: P.rev(x, (1,)), (((3, 4), F),)),
    "iota": (lambda x: P.iota(np.int32, (3, 4), 1), (((3, 4), F),)),
    **{r.__name__: (lambda x, r=r: r(x, (1,)), (((3, 4), F),)) for r in (
        P.reduce_sum, P.reduce_max, P.reduce_min, P.reduce_prod)},
    "argmax": (lambda x: P.argmax(x, 0, np.int32), (((3, 4), F),)),
    "argmin": (lambda x: P.argmin(x, 1, np.int64), (((3, 4), F),)),
    "cumsum": (lambda x: P.cumsum(x, 1), (((3, 4), F),)),
    "cumprod": (lambda x: P.cumprod(x, 0, True), (((3, 4), F),)),
    "cummax": (lambda x: P.cummax(x, 1, True), (((3, 4), F),)),
    "cummin": (lambda x: P.cummin(x, 0), (((3, 4), F),)),
    "cumlogsumexp": (lambda x: P.cumlogsumexp(x, 1, True), (((3, 4), F),)),
    "sort": (lambda x, y: P.sort((x, y), 1)[1], (((3, 4), F), ((3, 4), I))),
    "cholesky": (P.cholesky, (((2, 3, 3), F),)),
    "triangular_solve": (lambda a, b: P.triangular_solve(a, b, left_side=True, lower=True), (((3, 3), F), ((3, 2), F))),
    "lu": (lambda x: P.lu(x)[0], (((2, 3, 4), F),)),
    "qr": (lambda x: P.qr(x, full_matrices=False)[0], (((4, 3), F),)),
    "eigh": (lambda x: P.eigh(x)[1], (((2, 3, 3), F),)),
    "svd": (lambda x: P.svd(x, full_matrices=False)[0], (((3, 4), F),)),
}
# the ONE_NODE examples whose second operand is an index array (repeated and out-of-range vectors in it)
INDEXED = ("gather", "scatter_add", "scatter", "scatter_mul", "scatter_min", "scatter_max")
# the linear-algebra primitives (float32/float64 only); cholesky's example is given a positive-definite operand
LINALG = {"cholesky", "triangular_solve", "lu", "qr", "eigh", "svd"}


def positive_definite(x: np.ndarray) -> np.ndarray:
    """x x^T + n I for a stack of n x n matrices: what cholesky's examples factor."""
    return (x @ np.swapaxes(x, -1, -2) + x.shape[-1] * np.eye(x.shape[-1])).astype(x.dtype)
# the pipeline inlines the calls and drops the names; fusions never nest; control flow is run by the
# backend around its bodies, never a kernel
NOT_IN_KERNELS = {"fusion", "custom_vjp_call", "custom_jvp_call", "remat_call", "checkpoint_name", "cond", "while",
                  "scan"}


@pytest.mark.parametrize("prim", sorted(p.name for p in impl_rules if p.name not in NOT_IN_KERNELS))
def test_lower_kernel_takes_a_one_node_body_of_every_primitive(prim):
    assert prim in ONE_NODE, f"add an example of {prim} to ONE_NODE"
    fn, avals = ONE_NODE[prim]
    g = body(lambda *a: [fn(*a)], *avals)
    assert [n.prim.name for n in g.nodes] == [prim]
    args = [(np.abs(data(s, d)) + 1).astype(d) if np.dtype(d).kind in "fiu" else data(s, d) for s, d in avals]
    if prim in INDEXED:
        args[1] = np.array([[1], [4], [1], [-2]], np.int32)
    with np.errstate(all="ignore"):
        check(g, *args, exact=prim not in ("dot_general", "conv_general_dilated"))


# --- random elementwise + layout programs ----------------------------------------------------------

def _step(draw, x):
    shape = tuple(x.aval.shape) if hasattr(x, "aval") else x.shape
    kind = draw(st.sampled_from(["unary", "binary", "transpose", "rev", "slice", "pad", "reshape",
                                 "broadcast", "concat", "iota"]))
    nd = len(shape)
    if kind == "unary":
        return draw(st.sampled_from([jnp.exp, jnp.tanh, jnp.sin, lambda v: v * 0.5, jnp.abs]))(x)
    if kind == "binary":
        return draw(st.sampled_from([lambda v: v + P.rev(v, tuple(range(nd))), lambda v: v * v - 1.0,
                                     lambda v: jnp.maximum(v, 0.1)]))(x)
    if kind == "transpose":
        return P.transpose(x, tuple(draw(st.permutations(range(nd)))))
    if kind == "rev":
        return P.rev(x, tuple(a for a in range(nd) if draw(st.booleans())))
    if kind == "slice":
        start = [draw(st.integers(0, max(n - 1, 0))) for n in shape]
        stride = [draw(st.integers(1, 3)) for _ in shape]
        return P.slice(x, start, shape, stride)
    if kind == "pad":
        cfg = [(draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape]
        size = np.prod([lo + hi + n * (i + 1) for (lo, hi, i), n in zip(cfg, shape)])
        return P.pad(x, 0.5, cfg) if size <= 400 else x
    if kind == "reshape":
        return P.reshape(x, draw(st.sampled_from(_factorings(int(np.prod(shape))))))
    if kind == "broadcast":
        return P.broadcast_in_dim(x, (2,) + shape, tuple(range(1, nd + 1))) if nd < 3 else x
    if kind == "concat":
        return P.concatenate([x, jnp.cos(x)], draw(st.integers(0, nd - 1))) if np.prod(shape) <= 100 else x
    return x + P.iota(np.float32, shape, draw(st.integers(0, nd - 1)))


def _factorings(n: int) -> list[tuple]:
    out = [(n,)]
    for a in range(2, n):
        if n % a == 0:
            out.append((a, n // a))
            out += [(a, b, n // a // b) for b in range(2, n // a) if (n // a) % b == 0]
    return out


@st.composite
def programs(draw):
    """A shape and the traced graph of a few random elementwise/layout steps (and maybe a full sum)."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    steps = draw(st.integers(1, 6))

    def fn(x):
        v = x
        for _ in range(steps):
            v = _step(draw, v)
        return [v, P.reduce_sum(v, tuple(range(len(v.aval.shape))))] if draw(st.booleans()) else [v]

    return shape, body(fn, (shape, "float32"))


@settings(max_examples=40)
@given(programs())
def test_random_elementwise_and_layout_programs(prog):
    shape, g = prog
    check(g, data(shape), kind="reduction", exact=len(g.outputs) == 1, rtol=1e-5)


# --- argmax / argmin and scatter steps ------------------------------------------------------------------

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
          "float64"]


def tie_heavy(rng, shape, dtype) -> np.ndarray:
    """Values from a few, so ties are common; floats hold NaN, infs and both zeros, ints their extremes."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind == "f":
        pool = np.array([-1.5, -0.0, 0.0, 2.0, np.nan, np.inf, -np.inf, 7.0], dt)
        picks = rng.integers(0, len(pool) + 8, shape)  # the last 8 are random normals: NaN is not everywhere
        normal = rng.standard_normal(shape)
        return np.where(picks < len(pool), pool[np.minimum(picks, len(pool) - 1)], normal).astype(dt)
    info = np.iinfo(dt)
    pool = np.array([info.min, info.max, 0, 1, 2, info.max - 1], dt)
    return np.asarray(pool[rng.integers(0, len(pool), shape)])


@st.composite
def arg_cases(draw, longest: int = 5):
    """(x, axis, combine, index_dtype): any rank 1-3 (other axes may be empty), any dtype; the reduced
    axis up to `longest` long."""
    rank = draw(st.integers(1, 3))
    axis = draw(st.integers(0, rank - 1))
    shape = tuple(draw(st.integers(1, longest) if a == axis else st.integers(0, 5)) for a in range(rank))
    dtype = draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return (tie_heavy(rng, shape, dtype), axis, draw(st.sampled_from(["argmax", "argmin"])),
            np.dtype(draw(st.sampled_from(["int8", "int32", "int64", "uint16"]))))


def first_extremum(x, axis, combine) -> np.ndarray:
    """The documented rule, element by element: the first NaN, else the first maximum (minimum)."""
    rows = np.moveaxis(x, axis, -1)
    out = np.zeros(rows.shape[:-1], np.int64)
    for i in np.ndindex(out.shape):
        row = rows[i]
        nans = np.flatnonzero(np.isnan(row)) if row.dtype.kind == "f" else []
        best = row.max() if combine == "argmax" else row.min()
        out[i] = nans[0] if len(nans) else np.flatnonzero(row == best)[0]
    return out


def arg_body(x, axis, combine, index_dtype):
    return body(lambda v: [getattr(P, combine)(v, axis, index_dtype)], (x.shape, x.dtype))


@settings(max_examples=60)
@given(arg_cases())
def test_arg_reduce_step_is_the_first_extremum_with_nans_first(case):
    x, axis, combine, index_dtype = case
    k = check(arg_body(*case), x, kind="reduction")
    assert k.steps == (ArgReduce(combine, "in0", axis, index_dtype, "out0"),)
    (got,) = evaluate(k, x)
    np.testing.assert_array_equal(got, first_extremum(x, axis, combine).astype(index_dtype), strict=True)


def test_arg_reduce_index_wraps_into_a_narrow_index_dtype_as_the_reference():
    x = np.zeros(300, np.float32)
    x[200] = 1.0
    (got,) = evaluate(lower_kernel(arg_body(x, 0, "argmax", np.dtype(np.int8)), "reduction"), x)
    assert got == np.int8(-56)


def test_fused_arg_reduce_stores_its_computed_operand_once_beside_a_reduce_max_then_consumers_read_it():
    def fn(x):
        e = jnp.exp(x)
        return [P.convert_element_type(P.argmax(e, 1, np.int32), np.float32) + P.reduce_max(e, (1,)),
                P.argmin(e, 1, np.int32)]

    g = body(fn, ((3, 5), "float32"))
    k = check(g, data((3, 5)), kind="reduction")
    loop, *args, after = k.steps
    arg1, arg2 = sorted(args, key=lambda a: a.combine)
    assert isinstance(loop, Loop) and loop.reduce_axes == (1,) and [o.prim for o in loop.ops].count("exp") == 1
    assert len(loop.stores) == 1 and loop.stores[0].buffer == arg1.operand == arg2.operand
    assert (arg1.combine, arg2.combine, arg2.out) == ("argmax", "argmin", "out1")
    assert isinstance(after, Loop) and not after.reduce_axes
    assert f"  {arg1.out} = argmax t0 axis=1 index_dtype=int32" in str(k).splitlines()


INDEX_DTYPES = ["int8", "int32", "int64", "uint8", "uint32"]


@st.composite
def scatter_cases(draw):
    """(mode, operand, indices, updates, batch_dims): the prims' layout B + I + S, indices B + N + (k,)
    with duplicates and out-of-range vectors (negative ones for signed index dtypes)."""
    nb = draw(st.integers(0, 1))
    lead = tuple(draw(st.integers(1, 3)) for _ in range(nb))
    k = draw(st.integers(0, 2))
    indexed = tuple(draw(st.integers(1, 4)) for _ in range(k))
    rest = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    n = tuple(draw(st.lists(st.integers(0, 4), max_size=2)))
    dtype, idtype = draw(st.sampled_from(DTYPES)), np.dtype(draw(st.sampled_from(INDEX_DTYPES)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    low = 0 if idtype.kind == "u" else -2
    cols = [rng.integers(low, size + 2, lead + n) for size in indexed]
    indices = np.stack(cols, -1).astype(idtype) if cols else np.zeros(lead + n + (0,), idtype)
    operand = tie_heavy(rng, lead + indexed + rest, dtype)
    updates = tie_heavy(rng, lead + n + rest, dtype)
    return draw(st.sampled_from(["add", "replace", "mul", "min", "max"])), operand, indices, updates, nb


def scatter_loop(mode, operand, indices, updates, nb) -> np.ndarray:
    """The documented rule, one update at a time in row-major order (a duplicate combines by the mode's
    ufunc, or the last wins); an index vector out of range drops its update."""
    out = operand.copy()
    sizes = operand.shape[nb:nb + indices.shape[-1]]
    for lead in np.ndindex(indices.shape[:-1]):
        vec = [int(v) for v in indices[lead]]
        if all(0 <= v < n for v, n in zip(vec, sizes)):
            target = out[lead[:nb] + tuple(vec) + (Ellipsis,)]
            if mode == "replace":
                target[...] = updates[lead + (Ellipsis,)]
            else:
                target[...] = SCATTER_UFUNCS[mode](target, updates[lead + (Ellipsis,)])
    return out


SCATTER_UFUNCS = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def scatter_body(mode, operand, indices, updates, nb):
    prim = {m: getattr(P, p.name) for p, m in SCATTER_MODES.items()}[mode]
    return body(lambda x, i, u: [prim(x, i, u, nb)], (operand.shape, operand.dtype), (indices.shape, indices.dtype),
                (updates.shape, updates.dtype))


def summed_at_once(mode, operand, indices, updates, nb) -> bool:
    """A float scatter_add with no index axes at all: the reference adds the updates' sum (NumPy's
    pairwise order), so it equals one-at-a-time adding only up to rounding."""
    return mode == "add" and nb == 0 and indices.shape[-1] == 0 and operand.dtype.kind == "f"


@settings(max_examples=80)
@given(scatter_cases())
def test_scatter_step_adds_or_replaces_in_update_order_and_drops_out_of_range_vectors(case):
    mode, operand, indices, updates, nb = case
    with np.errstate(all="ignore"):
        k = check(scatter_body(*case), operand, indices, updates)
        assert k.steps == (Scatter(mode, "in0", "in1", "in2", nb, "out0"),)
        (got,) = evaluate(k, operand, indices, updates)
        want = scatter_loop(*case)
    if summed_at_once(*case):
        np.testing.assert_allclose(got, want, rtol=1e-2 if operand.dtype == np.float16 else 1e-5)
    else:
        np.testing.assert_array_equal(got, want, strict=True)


def test_scatter_duplicates_add_in_order_or_the_last_wins():
    x = np.zeros(4, np.float32)
    i = np.array([[1], [3], [1], [1], [9], [-1]], np.int32)
    u = np.array([1e8, 2.0, 1.0, -1e8, 5.0, 6.0], np.float32)
    (added,) = evaluate(lower_kernel(scatter_body("add", x, i, u, 0), "loop"), x, i, u)
    np.testing.assert_array_equal(added, [0.0, 0.0, 0.0, 2.0])  # (1e8 + 1) - 1e8: the 1 is rounded away
    (kept,) = evaluate(lower_kernel(scatter_body("replace", x, i, u, 0), "loop"), x, i, u)
    np.testing.assert_array_equal(kept, [0.0, -1e8, 0.0, 2.0])


def test_scatter_written_in_place_into_its_operand():
    """A loop writes exp(x) into out0, then the scatter updates out0 in place (no copy of a temp)."""
    from dataclasses import replace

    g = body(lambda x, i, u: [P.scatter_add(jnp.exp(x), i, u)], ((4,), "float64"), ((2, 1), "int64"), ((2,), "float64"))
    x, i, u = np.arange(4.0), np.array([[2], [2]], np.int64), np.array([1.0, 2.0])
    k = lower_kernel(g, "loop")
    loop, step = k.steps
    (temp,) = k.temps
    assert loop.stores[0].buffer == step.operand == temp.name
    inplace = replace(k, temps=(), steps=(replace(loop, stores=(replace(loop.stores[0], buffer="out0"),)),
                                          replace(step, operand="out0")))
    np.testing.assert_array_equal(evaluate(inplace, x, i, u)[0], evaluate(k, x, i, u)[0], strict=True)
    np.testing.assert_array_equal(evaluate(inplace, x, i, u)[0], np.exp(x) + [0, 0, 3, 0])


def test_scatter_of_computed_operands_stores_them_first_and_prints():
    g = body(lambda x, i, u: [P.scatter_add(jnp.exp(x), i * 2, u * 3.0)], ((5,), "float32"), ((3, 1), "int32"),
             ((3,), "float32"))
    k = check(g, data(5), np.array([[0], [2], [1]], np.int32), data(3), exact=False)
    assert isinstance(k.steps[-1], Scatter) and all(isinstance(s, Loop) for s in k.steps[:-1])
    assert str(k).splitlines()[-1] == f"  out0 = scatter-add {k.steps[-1].operand} at t1 of t2 batch_dims=0"


@pytest.mark.parametrize("mode", ["add", "replace"])
def test_scatter_into_an_empty_operand_with_index_vectors_of_length_0(mode):
    x, i, u = np.zeros((2, 0), np.float32), np.zeros((2, 0), np.int32), np.zeros((2, 2, 0), np.float32)
    (out,) = evaluate(lower_kernel(scatter_body(mode, x, i, u, 0), "loop"), x, i, u)
    assert out.shape == (2, 0)


@pytest.mark.parametrize("name,fn,shapes", [
    ("reshape of empty", lambda x: [jnp.reshape(x, (3, 0)) + 1.0], [(0, 3)]),
    ("sum over an empty axis", lambda x: [jnp.sum(x, axis=0) * 2.0], [(0, 3)]),
    ("concatenate with an empty piece", lambda x, y: [jnp.concatenate([x, y]) * 2.0], [(0, 3), (2, 3)]),
    ("pad of empty", lambda x: [P.pad(x, 2.0, ((1, 1, 0), (0, 0, 0)))], [(0, 3)]),
])
def test_zero_size_values_lower_and_evaluate(name, fn, shapes):
    """Found by the llvm backend: a zero-size value's index maps divided by a zero extent. A value
    without elements is never read, so it lowers to a constant."""
    g = body(fn, *[(s, "float32") for s in shapes])
    check(g, *[data(s) for s in shapes])


def test_every_node_of_an_optimized_graph_with_arg_reductions_and_scatters_lowers():
    """What the backend does: each fusion's body, and each other node as a one-node body, becomes a
    kernel (fusion puts argmax/argmin beside their producers and a reduce_max)."""
    import ember
    from ember.tracer.ir import Graph, Var

    def f(x, i):
        e = jnp.exp(x)
        return (jnp.argmax(e, axis=1) + jnp.argmin(x * 2.0, axis=0).sum(), jnp.max(e, axis=1),
                jnp.zeros(5).at[i].add(x[:, 0]), x.at[i, 1].set(7.0))

    x, i = data((4, 5)), np.array([0, 1, 1, 3])
    g = ember.jit(f).lower(x, i).optimized
    env = {**dict(zip(g.inputs, (x, i))), **dict(zip(g.consts, g.const_values))}
    lowered = set()
    for node in g.nodes:
        if node.prim.name == "fusion":
            b, kind = node.params["body"], node.params["kind"]
            args = [env[a] if isinstance(a, Var) else a.val for a in node.inputs]
        else:
            operands = list(dict.fromkeys(a for a in node.inputs if isinstance(a, Var)))
            b, kind, args = Graph(operands, [node], node.outputs), "loop", [env[a] for a in operands]
        k = check(b, *args, kind=kind)
        lowered |= {type(s).__name__ for s in k.steps}
        env.update(zip(node.outputs, run_body(b, args)))
    assert {"ArgReduce", "Scatter", "Loop"} <= lowered


def test_constants_of_equal_value_but_other_bits_stay_apart():
    """Found by the llvm backend: -0.0 and 0.0 compare equal, so hash-consing merged them and
    divmod(-0.0, x) lost its sign."""
    g = body(lambda x: [(-0.0 - x) * 0.0, P.div(-0.0, x)], ((3,), "float32"))
    k = lower_kernel(g, "loop")
    consts = [o.param("value") for o in k.steps[0].ops if o.prim == "const"]
    assert sorted(map(str, consts)) == ["-0.0", "0.0"]
    got = evaluate(k, np.array([1.0, 2.0, -3.0], np.float32))
    assert np.signbit(got[1]).tolist() == [True, True, False]
