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
from ember.backends.kernel import Contraction, KernelError, Loop, evaluate, lower_kernel
from ember.tracer import ShapedArray, trace_flat
from ember.tracer import prims as P
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


def test_a_primitive_outside_the_fusible_set_is_refused():
    g = body(lambda x: [P.scatter_add(x, np.array([[1]], np.int32), x[:1])], ((3,), "float32"))
    with pytest.raises(KernelError, match="scatter_add"):
        lower_kernel(g, "loop")


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
