"""Tracing: bind stages into the innermost trace or evaluates eagerly, tracers that escape their
trace are caught, nested traces close over outer tracers as consts, eager results are fresh arrays,
and NumPy's operators, ufuncs and functions on tracers dispatch to ember.numpy."""

import inspect

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, TracerEscapeError
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Literal
from ember.tracer.trace import Tracer, eval_graph, is_tracing, trace_flat

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
THIS_FILE = "test_trace.py"


def prim_names(graph) -> list:
    return [n.prim.name for n in graph.nodes]


# --- trace_flat, bind and eval_graph --------------------------------------------------------------

def test_trace_flat_builds_a_graph_with_one_input_per_aval():
    seen = []

    def fn(a, b):
        seen.append((type(a), a.aval, is_tracing()))
        return [P.add(P.exp(a), b), P.reduce_sum(b, (0,))]

    g = trace_flat(fn, [ShapedArray((3,), F32), ShapedArray((3,), F32)])
    assert seen == [(Tracer, ShapedArray((3,), F32), True)] and not is_tracing()
    assert [v.aval for v in g.inputs] == [ShapedArray((3,), F32)] * 2
    assert prim_names(g) == ["exp", "add", "reduce_sum"]
    assert [v.aval.str_short() for v in g.outputs] == ["f32[3]", "f32[]"]
    assert g.nodes[1].inputs == (g.nodes[0].outputs[0], g.inputs[1])


def test_nodes_record_the_users_line():
    line = inspect.currentframe().f_lineno + 1
    g = trace_flat(lambda a: [P.tanh(a)], [ShapedArray((2,), F32)])
    assert g.nodes[0].loc.endswith(f"{THIS_FILE}:{line}")


def test_eval_graph_eagerly_and_inlined():
    g = trace_flat(lambda a, b: [P.mul(P.sin(a), b)], [ShapedArray((3,), F64)] * 2)
    x, y = np.linspace(0, 1, 3), np.linspace(1, 2, 3)
    (eager,) = eval_graph(g, [x, y])
    np.testing.assert_allclose(eager, np.sin(x) * y)
    inlined = trace_flat(lambda a: eval_graph(g, [a, a]), [ShapedArray((3,), F64)])
    assert prim_names(inlined) == ["sin", "mul"]
    assert inlined.nodes[0].loc == g.nodes[0].loc  # the user's line survives inlining
    with pytest.raises(TypeError, match="2 inputs"):
        eval_graph(g, [x])


def test_python_and_numpy_scalars_become_literals():
    g = trace_flat(lambda a: [P.mul(P.add(a, 2.0), np.float32(3.0))], [ShapedArray((3,), F32)])
    lits = [a for n in g.nodes for a in n.inputs if isinstance(a, Literal)]
    assert [repr(a) for a in lits] == ["2.0:f32[]", "3.0:f32[]"]
    assert not g.consts


def test_numpy_arrays_become_consts_snapshotted_at_trace_time():
    c = np.arange(3.0)
    g = trace_flat(lambda a: [P.add(a, c), P.mul(a, c)], [ShapedArray((3,), F64)])
    assert len(g.consts) == 1  # the same array is one const
    c[:] = 100.0
    np.testing.assert_array_equal(g.const_values[0], [0.0, 1.0, 2.0])
    assert not g.const_values[0].flags.writeable


# --- escaping tracers -----------------------------------------------------------------------------

def _leak():
    leaked = []

    def f(a):
        leaked.append(P.exp(a))
        return a

    ember.jit(f)(np.ones(3))
    return leaked[0]


def test_escaped_tracer_used_eagerly_raises():
    t = _leak()
    with pytest.raises(TracerEscapeError) as info:
        P.mul(t, 2.0)
    assert "escaped" in str(info.value) and THIS_FILE in str(info.value)
    with pytest.raises(TracerEscapeError):
        enp.sin(t)
    with pytest.raises(TracerEscapeError):
        t + 1.0  # noqa: B018


def test_escaped_tracer_used_in_a_later_trace_raises():
    t = _leak()
    with pytest.raises(TracerEscapeError) as info:
        ember.jit(lambda a: P.add(a, t))(np.ones(3))
    assert THIS_FILE in str(info.value)


def test_escaped_tracer_returned_from_a_later_trace_raises():
    t = _leak()
    with pytest.raises(TracerEscapeError):
        trace_flat(lambda a: [t], [ShapedArray((3,), F64)])


def test_escaped_tracer_passed_to_a_jitted_function_raises():
    t = _leak()
    with pytest.raises(ember.EmberError):
        ember.jit(lambda a: a)(t)


# --- nested traces --------------------------------------------------------------------------------

def test_closure_over_an_outer_tracer_becomes_a_const_of_the_inner_graph():
    inner_graphs = []

    def outer(x):
        inner = trace_flat(lambda y: [P.mul(y, x), P.add(x, 1.0)], [x.aval])
        inner_graphs.append(inner)
        return eval_graph(inner, [P.exp(x)])

    g = trace_flat(outer, [ShapedArray((3,), F64)])
    inner = inner_graphs[0]
    assert len(inner.consts) == 1 and inner.const_values[0]._var is g.inputs[0]
    assert prim_names(inner) == ["mul", "add"]
    assert inner.nodes[0].inputs == (inner.inputs[0], inner.consts[0])
    assert prim_names(g) == ["exp", "mul", "add"]  # inlined: the const is the outer value again
    x = np.linspace(0.1, 1, 3)
    a, b = eval_graph(g, [x])
    np.testing.assert_allclose(a, np.exp(x) * x)
    np.testing.assert_allclose(b, x + 1.0)


def test_closure_over_an_outer_tracer_through_the_api(rng):
    x = rng.normal(size=(3,))

    def f(a):
        return ember.grad(lambda b: P.reduce_sum(P.mul(P.mul(b, b), a), (0,)))(P.mul(a, 2.0))

    np.testing.assert_allclose(ember.jit(f)(x), 4 * x * x)  # d/db sum(b*b*a) at b = 2a
    g = ember.grad(lambda a: P.reduce_sum(f(a), (0,)))(x)
    np.testing.assert_allclose(g, 8 * x)


# --- eager mode -----------------------------------------------------------------------------------

EAGER_OPS = {
    "exp": lambda x: P.exp(x),
    "reshape same shape": lambda x: P.reshape(x, x.shape),
    "transpose identity": lambda x: P.transpose(x, (0, 1)),
    "transpose": lambda x: P.transpose(x, (1, 0)),
    "broadcast_in_dim identity": lambda x: P.broadcast_in_dim(x, x.shape, (0, 1)),
    "broadcast_in_dim": lambda x: P.broadcast_in_dim(x, (4,) + x.shape, (1, 2)),
    "slice everything": lambda x: P.slice(x, (0, 0), x.shape),
    "slice": lambda x: P.slice(x, (0, 1), x.shape),
    "pad nothing": lambda x: P.pad(x, 0.0, ((0, 0, 0), (0, 0, 0))),
    "rev nothing": lambda x: P.rev(x, ()),
    "rev": lambda x: P.rev(x, (1,)),
    "concatenate one": lambda x: P.concatenate([x], 0),
    "convert to the same dtype": lambda x: P.convert_element_type(x, x.dtype),
    "reduce over no axes": lambda x: P.reduce_max(x, ()),
    "stop_gradient": lambda x: P.stop_gradient(x),
    "select": lambda x: P.select(True, x, x),
    "gather": lambda x: P.gather(x, np.zeros((0,), np.int32)),
    "ember.numpy reshape": lambda x: enp.reshape(x, x.shape),
    "ember.numpy transpose": lambda x: enp.transpose(x, (0, 1)),
    "ember.numpy sum over ()": lambda x: enp.sum(x, axis=()),
    "ember.numpy astype": lambda x: enp.asarray(x).astype(x.dtype),
    "ember.numpy broadcast_to": lambda x: enp.broadcast_to(x, x.shape),
    "ember.numpy squeeze": lambda x: enp.squeeze(x),
    "ember.numpy getitem": lambda x: enp.take(x, np.arange(3), axis=1),
}


@pytest.mark.parametrize("name", sorted(EAGER_OPS))
def test_eager_results_are_fresh_arrays(name):
    x = np.arange(6.0).reshape(2, 3)
    before = x.copy()
    out = EAGER_OPS[name](x)
    assert not is_tracing()
    assert isinstance(out, np.ndarray) and out.flags.writeable
    assert out is not x and not np.shares_memory(out, x), f"{name} aliases its operand"
    np.asarray(out)[...] = -1.0  # through NumPy: the Array itself refuses writes
    np.testing.assert_array_equal(x, before)


def test_eager_evaluation_uses_the_numpy_rules():
    x = np.linspace(0.5, 1.5, 4).astype(F32)
    out = P.logistic(x)
    assert type(out) is ember.Array and out.dtype == F32
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-x.astype(F64))), rtol=1e-6)
    s = P.add(np.float32(1.0), 2.0)
    assert isinstance(s, np.ndarray) and s.shape == () and s.dtype == F32 and s.flags.writeable


# --- NumPy interoperability -----------------------------------------------------------------------

@pytest.mark.parametrize("op,name", [(lambda c, t: c * t, "mul"), (lambda c, t: c + t, "add"),
                                     (lambda c, t: c - t, "sub"), (lambda c, t: c / t, "div"),
                                     (lambda c, t: c < t, "lt"), (lambda c, t: c @ t, "dot_general")])
def test_numpy_array_on_the_left_of_a_tracer(op, name, rng):
    c = rng.uniform(1, 2, (3, 3))
    x = rng.uniform(1, 2, (3, 3))
    got = ember.jit(lambda t: op(c, t))(x)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, op(c, x), rtol=1e-12)
    g = ember.make_graph(lambda t: op(c, t))(x)
    assert name in prim_names(g) and len(g.consts) == 1


@pytest.mark.parametrize("ufunc", [np.sin, np.exp, np.tanh, np.sqrt, np.negative, np.abs], ids=lambda u: u.__name__)
def test_numpy_ufuncs_on_tracers_dispatch_to_ember_numpy(ufunc, rng):
    x = rng.uniform(0.5, 2, (4,))
    g = ember.make_graph(lambda t: ufunc(t))(x)
    assert len(g.nodes) >= 1 and not g.consts
    np.testing.assert_allclose(ember.jit(lambda t: ufunc(t))(x), ufunc(x), rtol=1e-12)
    assert {"sin": "sin", "exp": "exp", "tanh": "tanh", "sqrt": "sqrt", "negative": "neg",
            "absolute": "abs"}[ufunc.__name__] in prim_names(g)


def test_numpy_binary_ufuncs_and_functions_on_tracers(rng):
    x, y = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    got = ember.jit(lambda a, b: (np.maximum(a, b), np.add(a, 1.0), np.sum(a, axis=0), np.where(a > b, a, b)))(x, y)
    want = (np.maximum(x, y), x + 1.0, x.sum(0), np.where(x > y, x, y))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_numpy_conversions_of_tracers_raise_concretization_errors():
    def check(fn):
        with pytest.raises(ConcretizationError) as info:
            ember.jit(fn)(np.ones(3))
        assert THIS_FILE in str(info.value)
        return str(info.value)

    assert "ember.numpy" in check(lambda t: np.asarray(t))
    check(lambda t: np.array(t))
    check(lambda t: float(t[0]))
    check(lambda t: int(t[0]))
    assert "bool" in check(lambda t: 1.0 if t[0] > 0 else 0.0)
    check(lambda t: np.add.reduce(t))
    check(lambda t: np.sin(t, out=np.empty(3)))
    check(lambda t: list(range(t[0])))
