"""The numpy backend follows the plan's in-place decisions: a ufunc with `out=` the operand, or the
result copied into it, and never a buffer the plan does not name. Plans here are built by hand."""

import numpy as np
import pytest

import ember
import ember.backends.numpy as numpy_backend
import ember.numpy as jnp
from ember.backends.numpy import INPLACE_UFUNCS, NumpyExecutable, inplace_ufunc
from ember.passes.memory import plan_memory
from ember.tracer import ShapedArray
from ember.tracer import prims as P
from ember.tracer.ir import Node, Params, Var
from ember.tracer.primitive import impl_rules, shape_rules, ufunc_of
from tests.backends.test_numpy_fusion import fused


def with_inplace(graph, donate=(), **by_prim):
    """The naive plan of `graph` plus in-place entries: prim name -> operand index (the first node of
    that prim writes its output into that operand)."""
    plan = plan_memory(graph, donate)
    inplace = {}
    for name, k in by_prim.items():
        node = next(n for n in graph.nodes if n.prim.name == name)
        inplace[node.outputs[0]] = node.inputs[k]
    object.__setattr__(plan, "inplace", inplace)  # the Plan field may not exist yet; the backend reads getattr
    return plan


def _graph(fn, *args):
    return ember.make_graph(fn)(*args)


@pytest.mark.parametrize("name,fn,dtype,operand", [
    ("exp", jnp.exp, np.float32, 0),
    ("add", lambda x: P.add(1.5, x), np.float64, 1),
    ("div", lambda x: P.div(x, 3.0), np.float32, 0),
    ("div", lambda x: P.div(x, 3), np.int32, 0),  # C division: not a ufunc, copied
    ("select", lambda x: P.select(P.gt(x, 0.0), x, 0.5), np.float64, 1),  # not a ufunc
    ("round", P.round, np.float64, 0),  # not a ufunc
])
def test_a_node_writes_into_the_donated_input(name, fn, dtype, operand, rng):
    x = (rng.normal(size=(4, 3)) * 10).astype(dtype)
    g = _graph(fn, x)
    exe = NumpyExecutable(g, with_inplace(g, donate=(0,), **{name: operand}))
    want = NumpyExecutable(g, plan_memory(g))(x.copy())[0]
    (got,) = exe(x)
    assert np.shares_memory(got, x), "the result must be the donated input's buffer"
    np.testing.assert_array_equal(got, want)
    assert ("_inplace(" in exe.source) == (inplace_ufunc(g.nodes[-1]) is not None)


def test_the_dense_chain_writes_bias_and_activation_into_the_matmul_output(rng, monkeypatch):
    writes, inplace = [], numpy_backend._inplace

    def spy(ufunc, out, *args):
        writes.append((ufunc.__name__, out))
        return inplace(ufunc, out, *args)

    monkeypatch.setattr(numpy_backend, "_inplace", spy)
    w, x, b = rng.normal(size=(3, 5)), rng.normal(size=(5, 4)), rng.normal(size=3)
    g = _graph(lambda w, x, b: jnp.sum(jnp.tanh(w @ x + b[:, None])), w, x, b)
    exe = NumpyExecutable(g, with_inplace(g, add=0, tanh=0))
    np.testing.assert_allclose(exe(w, x, b)[0], np.tanh(w @ x + b[:, None]).sum(), rtol=1e-14)
    assert [n for n, _ in writes] == ["add", "tanh"]
    assert writes[0][1] is writes[1][1] and writes[0][1].shape == (3, 4)


def test_a_fusion_writes_with_out_when_no_later_body_node_reads_the_operand(rng):
    x = rng.normal(size=(4, 3))
    g = fused(lambda x: jnp.tanh(x) * 2.0, x, kind="loop")
    plan = plan_memory(g, (0,))
    object.__setattr__(plan, "inplace", {g.outputs[0]: g.inputs[0]})
    exe = NumpyExecutable(g, plan)
    want = np.tanh(x) * 2.0
    (got,) = exe(x)
    assert np.shares_memory(got, x)
    np.testing.assert_array_equal(got, want)
    body_lines = exe.source.split("# fusion loop")[1].splitlines()
    assert any("_inplace(" in line and "# mul" in line for line in body_lines)
    assert "_copy_into(" not in exe.source


def test_a_fusion_whose_later_body_node_reads_the_operand_copies_after_the_body(rng):
    """exp(x) is output 0, written into x; mul reads x after it, so exp may not write x with out=."""
    x = rng.normal(size=(4, 3))
    g = fused(lambda x: (jnp.exp(x), jnp.exp(x) * x), x, kind="multi_output")
    plan = plan_memory(g, (0,))
    object.__setattr__(plan, "inplace", {g.outputs[0]: g.inputs[0]})
    exe = NumpyExecutable(g, plan)
    e, ex = np.exp(x), np.exp(x) * x
    got = exe(x)
    assert np.shares_memory(got[0], x)
    np.testing.assert_array_equal(got[0], e)
    np.testing.assert_array_equal(got[1], ex)
    assert "_inplace(" not in exe.source
    assert "    v0_0 = _copy_into(a0, v0b0)" in exe.source.splitlines()


def test_a_wrong_plan_gives_wrong_values(rng):
    """The backend is a faithful test of the plan: overwriting a value that is read later corrupts it."""
    x = rng.normal(size=(5,))
    g = _graph(lambda x: (lambda t: jnp.exp(t) + t)(x + 1.0), x)
    exe = NumpyExecutable(g, with_inplace(g, exp=0))  # t dies at add, not at exp
    assert not np.allclose(exe(x)[0], np.exp(x + 1.0) + x + 1.0)


def test_views_of_a_buffer_written_in_place_keep_their_values(rng):
    """A reshape is a view in numpy but its own buffer in the plan: writing its source in place must
    not change it."""
    x = rng.normal(size=(2, 3))
    g = _graph(lambda x: (lambda v, y: y.reshape(6) + v)(x.reshape(6), jnp.exp(x)), x)
    exe = NumpyExecutable(g, with_inplace(g, donate=(0,), exp=0))
    want = (np.exp(x) + x).reshape(6)
    np.testing.assert_array_equal(exe(x.copy())[0], want)


def test_zero_d_values_are_written_where_they_are_arrays(rng):
    """0-d intermediates are NumPy scalars (no buffer): the node computes a fresh value there."""
    g = _graph(lambda x: jnp.exp(x * 2.0) + 1.0, np.float64(0.5))
    exe = NumpyExecutable(g, with_inplace(g, donate=(0,), mul=0, exp=0))
    x = np.array(0.5)
    np.testing.assert_allclose(exe(x)[0], np.exp(1.0) + 1.0, rtol=1e-15)


@pytest.mark.parametrize("case,match", [
    ("user-input", "writes the result of exp at .*test_numpy_inplace.py:\\d+ into a user input that is not "
                   "donated, which is read-only"),
    ("not-operand", "into a value that is not its operand"),
    ("dtype", "writes the result of convert_element_type at .*, f64\\[3\\], into an operand of type f32\\[3\\]"),
])
def test_plans_breaking_the_contract_are_refused(case, match):
    x = np.ones(3, np.float32)
    g = _graph(lambda x: jnp.exp(x).astype(np.float64) + 1.0, x)
    plan = plan_memory(g, donate=() if case == "user-input" else (0,))
    exp, conv, add = g.nodes
    inplace = {"user-input": {exp.outputs[0]: g.inputs[0]}, "not-operand": {add.outputs[0]: g.inputs[0]},
               "dtype": {conv.outputs[0]: exp.outputs[0]}}[case]
    object.__setattr__(plan, "inplace", inplace)
    with pytest.raises(ValueError, match=match):
        NumpyExecutable(g, plan)


_SAMPLES = {np.dtype(t): v for t, v in [
    (np.float16, [-2.5, -1.0, -0.0, 0.0, 0.3, 1.0, 2.0, np.inf, -np.inf, np.nan]),
    (np.float32, [-2.5, -1.0, -0.0, 0.0, 0.3, 1.0, 2.0, 1e30, np.inf, -np.inf, np.nan]),
    (np.float64, [-2.5, -1.0, -0.0, 0.0, 0.3, 1.0, 2.0, 1e300, np.inf, -np.inf, np.nan]),
    (np.int32, [-7, -1, 0, 1, 2, 3, 9, 2**31 - 1]), (np.uint8, [0, 1, 2, 3, 7, 255]), (np.bool_, [False, True]),
]}


@pytest.mark.parametrize("prim", sorted(INPLACE_UFUNCS, key=lambda p: p.name), ids=lambda p: p.name)
def test_each_inplace_ufunc_is_exactly_the_prims_numpy_rule(prim):
    """Bit for bit, for every dtype the prim takes: the ufunc with out= must not change a result."""
    checked = 0
    for dtype, values in _SAMPLES.items():
        aval = ShapedArray((len(values),), dtype)
        arity = ufunc_of(prim).nin  # the ufunc computes the prim, so takes its operands
        try:
            out_aval = shape_rules[prim](*[aval] * arity)
        except Exception:  # the prim does not take this dtype
            continue
        ins = [Var(aval) for _ in range(arity)]
        node = Node(prim, ins, Params(), [Var(out_aval)])
        ufunc = inplace_ufunc(node)
        if ufunc is None:
            continue
        x = np.array(values, dtype)
        args = [x, np.roll(x, 1)][:arity]
        if prim is P.pow_p and dtype.kind in "iu":
            args[1] = np.abs(args[1]) % 3
        with np.errstate(all="ignore"):
            want = impl_rules[prim](*args)
            buf = np.array(args[0]) if out_aval.dtype == dtype else np.empty(len(values), out_aval.dtype)
            got = ufunc(*args, out=buf)
        assert got is buf and got.dtype == want.dtype
        assert got.tobytes() == np.asarray(want).tobytes(), f"{prim.name} on {dtype}"
        checked += 1
    assert checked, f"no dtype exercised {prim.name}"
