"""The IR: Graph.verify catches broken invariants, graph text is jaxpr-like with the user's lines,
Params hash and compare by value, Literals print as `value:dtype[]`."""

import inspect

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError, GraphError
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph, Literal, Namer, Node, Params, Var
from ember.tracer.trace import trace_flat
from tests.helpers import raises_naming

F32, F64, I32 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)
MM = (((1,), (0,)), ((), ()))


def aval(*shape, dtype=F32):
    return ShapedArray(shape, dtype)


def exp_node(x, out):
    return Node(P.exp_p, [x], Params(), [out])


# --- verify ---------------------------------------------------------------------------------------

def test_verify_accepts_traced_graphs():
    g = trace_flat(lambda a, b: [P.tanh(P.dot_general(a, b, MM)), P.reduce_sum(a, (0,))], [aval(2, 3), aval(3, 4)])
    assert g.verify() is g
    f = ember.custom_vjp(lambda x: P.sin(x))
    f.defvjp(lambda x: (f(x), (x,)), lambda r, ct: (P.mul(ct, P.cos(r[0])),))
    ember.make_graph(ember.grad(lambda x: P.reduce_sum(f(x), (0,))))(np.ones(3)).verify()


def test_verify_catches_a_var_used_before_its_definition():
    x, y, z = Var(aval(3)), Var(aval(3)), Var(aval(3))
    g = Graph([x], [exp_node(y, z), exp_node(x, y)], [z])
    with pytest.raises(GraphError, match="used before definition"):
        g.verify()
    Graph([x], [exp_node(x, y), exp_node(y, z)], [z]).verify()  # the same nodes in order are fine


def test_verify_catches_an_undefined_output():
    x, y = Var(aval(3)), Var(aval(3))
    with pytest.raises(GraphError, match="not defined"):
        Graph([x], [], [y]).verify()


@pytest.mark.parametrize("how", ["two nodes", "node and input", "input twice"])
def test_verify_catches_a_var_defined_twice(how):
    x, y = Var(aval(3)), Var(aval(3))
    if how == "two nodes":
        g = Graph([x], [exp_node(x, y), exp_node(x, y)], [y])
    elif how == "node and input":
        g = Graph([x, y], [exp_node(x, y)], [y])
    else:
        g = Graph([x, x], [], [x])
    with pytest.raises(GraphError, match="defined twice"):
        g.verify()


@pytest.mark.parametrize("out", [aval(4), aval(3, dtype=F64), aval(3, 1)], ids=str)
def test_verify_catches_an_output_aval_that_disagrees_with_the_shape_rule(out):
    x = Var(aval(3))
    g = Graph([x], [exp_node(x, Var(out))], [])
    with pytest.raises(GraphError) as info:
        g.verify()
    msg = str(info.value)
    assert "exp" in msg and out.str_short() in msg and "f32[3]" in msg


def test_verify_ignores_weak_type_differences():
    x = Var(ShapedArray((3,), F32, weak_type=True))
    Graph([x], [exp_node(x, Var(aval(3)))], []).verify()


def test_verify_catches_a_failing_shape_rule():
    x, y = Var(aval(3)), Var(aval(4))
    g = Graph([x, y], [Node(P.add_p, [x, y], Params(), [Var(aval(3))])], [])
    with pytest.raises(GraphError, match="shape rule failed.*add"):
        g.verify()


def test_verify_catches_wrong_output_count():
    x = Var(aval(3))
    with pytest.raises(GraphError, match="2 outputs"):
        Graph([x], [Node(P.exp_p, [x], Params(), [Var(aval(3)), Var(aval(3))])], []).verify()


def test_verify_catches_unhashable_params():
    x = Var(aval(2, 3))
    node = Node(P.reduce_sum_p, [x], Params(axes=np.array([0])), [Var(aval(3))])
    with pytest.raises(GraphError, match="param 'axes' is not hashable"):
        Graph([x], [node], []).verify()
    ok = Node(P.reduce_sum_p, [x], Params(axes=(0,)), [Var(aval(3))])
    Graph([x], [ok], []).verify()


def test_verify_catches_params_that_are_not_a_params_mapping():
    x = Var(aval(2, 3))
    with pytest.raises(GraphError, match="Params"):
        Graph([x], [Node(P.reduce_sum_p, [x], {"axes": (0,)}, [Var(aval(3))])], []).verify()


def test_verify_catches_unregistered_primitives_and_bad_operands():
    class FakeExp:
        name = "exp"
        multiple_results = False

    x = Var(aval(3))
    with pytest.raises(GraphError, match="unregistered primitive"):
        Graph([x], [Node(FakeExp(), [x], Params(), [Var(aval(3))])], []).verify()
    with pytest.raises(GraphError, match="neither Var nor Literal"):
        Graph([x], [Node(P.exp_p, [np.float32(1.0)], Params(), [Var(aval())])], []).verify()
    with pytest.raises(GraphError, match="is not a Var"):
        Graph([Literal(1.0, F32)], [], []).verify()


def test_verify_checks_consts():
    c = Var(aval(3))
    with pytest.raises(GraphError, match="shape"):
        Graph([], [], [c], [c], [np.zeros(4, F32)]).verify()
    with pytest.raises(GraphError, match="dtype float64"):
        Graph([], [], [c], [c], [np.zeros(3, F64)]).verify()
    with pytest.raises(GraphError, match="const values"):
        Graph([], [], [c], [c], []).verify()
    Graph([], [], [c], [c], [np.zeros(3, F32)]).verify()


# --- text -----------------------------------------------------------------------------------------

def test_graph_text_is_jaxpr_like_with_user_lines():
    line = inspect.currentframe().f_lineno + 1
    g = ember.make_graph(lambda a, b: P.dot_general(a, b, MM))(np.zeros((16, 8), F32), np.zeros((8, 4), F32))
    text = str(g)
    lines = text.splitlines()
    assert lines[0] == "{ lambda ; a:f32[16,8] b:f32[8,4] ."
    assert lines[1].startswith("    c:f32[16,4] = dot_general[dimension_numbers=(((1,),(0,)),((),()))] a b  # ")
    assert lines[1].endswith(f"test_ir.py:{line}")
    assert lines[2] == "  in (c) }"
    assert f"test_ir.py:{line}" not in g.text(locs=False)


def test_graph_text_shows_consts_literals_params_and_annotations():
    c = np.ones(3)
    g = ember.make_graph(lambda a: P.reduce_sum(P.add(P.mul(a, 0.5), c), (0,)))(np.zeros(3))
    text = g.text(locs=False)
    assert text.splitlines()[0] == "{ lambda a:f64[3] ; b:f64[3] ."
    assert "c:f64[3] = mul b 0.5:f64[]" in text
    assert "d:f64[3] = add c a" in text
    assert "e:f64[] = reduce_sum[axes=(0,)] d" in text
    annotated = g.text(locs=False, annotations={g.nodes[0]: "backward"})
    assert annotated.splitlines()[1].endswith("# backward") and "backward" not in text


def test_graph_text_nests_subgraphs():
    f = ember.custom_vjp(lambda x: P.sin(x))
    f.defvjp(lambda x: (f(x), (x,)), lambda r, ct: (P.mul(ct, P.cos(r[0])),))
    text = ember.make_graph(f)(np.ones(3)).text(locs=False)
    assert "custom_vjp_call[primal=\n        { lambda ; a:f64[3] ." in text
    assert "            c:f64[3] = cos a" in text


def test_namer_goes_past_z():
    names = Namer()
    got = [names(Var(aval())) for _ in range(30)]
    assert got[:3] == ["a", "b", "c"] and got[25] == "z" and got[26:] == ["ba", "bb", "bc", "bd"]
    v = Var(aval(2, dtype=I32))
    assert names(v) == names(v) == "be" and names.typed(v) == "be:i32[2]"


def test_multiple_output_nodes_print_every_output():
    f = ember.custom_vjp(lambda x: (P.sin(x), P.cos(x)))
    f.defvjp(lambda x: (f(x), ()), lambda r, ct: (ct[0],))
    line = ember.make_graph(f)(np.ones(2)).text(locs=False).splitlines()[1]
    assert line.startswith("    b:f64[2] c:f64[2] = custom_vjp_call[")


# --- Params ---------------------------------------------------------------------------------------

def test_params_hash_and_compare_by_value():
    a = Params(axes=(0, 1), dtype=F32)
    b = Params({"dtype": np.dtype("float32"), "axes": (0, 1)})
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != Params(axes=(0,), dtype=F32) and a != Params(axes=(0, 1), dtype=F64)
    assert a != {"axes": (0, 1), "dtype": F32}
    assert Params() == Params() and hash(Params()) == hash(Params())


def test_params_are_an_immutable_mapping():
    p = Params(axes=(0,))
    assert dict(p) == {"axes": (0,)} and list(p) == ["axes"] and len(p) == 1 and p["axes"] == (0,)
    with pytest.raises(TypeError):
        p["axes"] = (1,)
    q = p.replace(axes=(1,), keepdims=True)
    assert p["axes"] == (0,) and dict(q) == {"axes": (1,), "keepdims": True}


def test_params_with_unhashable_values_fail_to_hash():
    with pytest.raises(TypeError):
        hash(Params(table={"a": 1}))
    assert Params(table={"a": 1}).unhashable() == "table" and Params(axes=(0,)).unhashable() is None


@pytest.mark.parametrize("given,canonical", [
    (np.float32, F32), (np.dtype("float32"), F32), ([2, 3], (2, 3)), ((np.int64(2), 3), (2, 3)),
    (np.float32(0.5), 0.5), (np.bool_(True), True), ([[1, np.int32(2)], (np.float64,)], ((1, 2), (F64,))),
], ids=str)
def test_params_are_canonical_so_equal_params_hash_equally(given, canonical):
    a, b = Params(p=given), Params(p=canonical)
    assert a == b and hash(a) == hash(b)
    assert a["p"] == canonical and type(a["p"]) is type(canonical)


def test_params_canonicalize_nested_numpy_scalars_to_python_scalars():
    p = Params(x=(np.int32(1), [np.float32(2.5)]))
    assert p["x"] == (1, (2.5,)) and type(p["x"][0]) is int and type(p["x"][1][0]) is float


def test_bind_rejects_unhashable_params_naming_the_primitive_and_param():
    x = np.ones((2, 3), np.float32)
    msg = raises_naming(ArgumentError, lambda: P.transpose_p.bind(x, permutation={0: 1}),
                        words=("transpose", "'permutation'", "hashable"), location="test_ir.py")
    assert "dict" in msg
    with pytest.raises(ArgumentError, match="transpose: param 'permutation'"):
        ember.make_graph(lambda a: P.transpose_p.bind(a, permutation={0: 1}))(x)


def test_bind_canonicalizes_params_for_staged_and_eager_calls():
    x = np.ones((2, 3), np.float32)
    g = ember.make_graph(lambda a: P.transpose_p.bind(a, permutation=[np.int64(1), 0]))(x)
    assert g.nodes[0].params == Params(permutation=(1, 0)) and type(g.nodes[0].params["permutation"][0]) is int
    assert P.transpose_p.bind(x, permutation=[1, 0]).shape == (3, 2)


def test_traced_nodes_carry_params_objects():
    g = ember.make_graph(lambda a: P.transpose(a, (1, 0)))(np.zeros((2, 3)))
    assert isinstance(g.nodes[0].params, Params) and g.nodes[0].params == Params(permutation=(1, 0))


# --- Literal --------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,dtype,text", [
    (2.0, F32, "2.0:f32[]"), (0.1, F32, "0.1:f32[]"), (0.1, F64, "0.1:f64[]"), (2, F32, "2.0:f32[]"),
    (1e20, F32, "1e+20:f32[]"), (1e-8, F64, "1e-08:f64[]"), (0.1, np.float16, "0.1:f16[]"),
    (3, I32, "3:i32[]"), (255, np.uint8, "255:u8[]"), (True, bool, "True:bool[]"), (0, bool, "False:bool[]"),
    (float("nan"), F64, "nan:f64[]"), (float("inf"), F32, "inf:f32[]"), (-np.inf, F64, "-inf:f64[]"),
])
def test_literal_printing(value, dtype, text):
    assert repr(Literal(value, dtype)) == text


def test_literal_holds_a_python_value_and_a_numpy_scalar():
    lit = Literal(2, F32, weak_type=True)
    assert lit.value == 2.0 and type(lit.value) is float
    assert lit.val.dtype == F32 and lit.val.shape == ()
    assert lit.aval == ShapedArray((), F32, True)
    assert Literal(np.int64(7), I32).val.dtype == I32


def test_literal_key_is_dtype_and_bits():
    assert Literal(0.0, F32).key != Literal(-0.0, F32).key
    assert Literal(1, F32).key == Literal(1.0, F32).key == Literal(True, F32).key
    assert len({Literal(1, I32).key, Literal(1.0, F32).key, Literal(True, bool).key, Literal(1.0, F64).key}) == 4
    nan_a, nan_b = _nan(0x7FC00001), _nan(0x7FC00002)
    assert Literal(nan_a, F32).key == Literal(nan_a, F32).key != Literal(nan_b, F32).key
    assert Literal(nan_b, F32).val.view(np.uint32) == 0x7FC00002  # the payload is kept


def _nan(bits: int) -> np.float32:
    return np.array(bits, np.uint32).view(np.float32)[()]


# --- subgraphs and fingerprints -------------------------------------------------------------------

def _custom_sin(scale=1.0):
    f = ember.custom_vjp(lambda x: P.sin(x))
    f.defvjp(lambda x: (f(x), (x,)), lambda r, ct: (P.mul(P.mul(ct, P.cos(r[0])), scale),))
    return f


def _custom_node(graph):
    return next(n for n in graph.nodes if n.prim.name == "custom_vjp_call")


def test_node_subgraphs_finds_graphs_in_params_and_tuples():
    g1, g2, g3 = (trace_flat(lambda a: [P.exp(a)], [aval(3)]) for _ in range(3))
    x = Var(aval(3))
    node = Node(P.exp_p, [x], Params(body=g1, more=(g2, 1, (g3,)), n=2), [Var(aval(3))])
    assert node.subgraphs() == [g1, g2, g3]
    assert exp_node(x, Var(aval(3))).subgraphs() == []
    g = ember.make_graph(_custom_sin())(np.ones(3, F32))
    node = _custom_node(g)
    assert node.subgraphs() == [node.params["primal"], node.params["fwd"], node.params["bwd"]]


def test_all_nodes_recurses_into_subgraphs():
    g = ember.make_graph(lambda x: P.reduce_sum(_custom_sin()(x), (0,)))(np.ones(3, F32))
    names = [n.prim.name for n in g.all_nodes()]
    assert "custom_vjp_call" in names and "sin" in names and "cos" in names  # cos only in the bwd subgraph
    assert len(g.all_nodes()) == len(g.nodes) + sum(len(s.all_nodes()) for n in g.nodes for s in n.subgraphs())


def test_verify_checks_subgraphs_recursively():
    g = ember.make_graph(_custom_sin())(np.ones(3, F32))
    node = _custom_node(g)
    bwd = node.params["bwd"]
    broken = bwd.replace(nodes=bwd.nodes[1:])  # a node's operand is now never defined
    with pytest.raises(GraphError):
        broken.verify()
    bad = Node(node.prim, node.inputs, node.params.replace(bwd=broken), node.outputs, node.loc)
    with pytest.raises(GraphError, match="subgraph 2.*used before definition"):
        g.replace(nodes=[bad if n is node else n for n in g.nodes]).verify()
    g.verify()


def _fp(fn, *args):
    return ember.make_graph(fn)(*args).fingerprint()


def test_fingerprint_ignores_var_identity():
    x = np.ones((2, 3), F32)
    f = lambda a: P.tanh(P.add(P.mul(a, 2.0), a))  # noqa: E731
    g1, g2 = ember.make_graph(f)(x), ember.make_graph(f)(x)
    assert g1.inputs[0] is not g2.inputs[0] and g1.fingerprint() == g2.fingerprint()
    assert _fp(_custom_sin(), x) == _fp(_custom_sin(), x)
    assert Params(a=1, b=(2,)) == Params(b=(2,), a=1)
    y = Var(aval(3))
    n1, n2 = (Node(P.reduce_sum_p, [y], p, [Var(aval())]) for p in (Params(axes=(0,), k=1), Params(k=1, axes=(0,))))
    assert Graph([y], [n1], n1.outputs).fingerprint() == Graph([y], [n2], n2.outputs).fingerprint()


@pytest.mark.parametrize("other", [
    lambda a: P.tanh(P.add(P.mul(a, 3.0), a)),      # a literal
    lambda a: P.tanh(P.add(P.mul(a, -0.0), a)),     # literal bits: -0.0 against 0.0 below
    lambda a: P.sin(P.add(P.mul(a, 0.0), a)),       # a primitive
    lambda a: P.tanh(P.add(a, P.mul(a, 0.0))),      # operand order (topology)
    lambda a: P.tanh(P.reduce_sum(P.mul(a, 0.0), (1,))),  # params and avals
], ids=["literal", "negative zero", "prim", "topology", "params"])
def test_fingerprint_sees_structure(other):
    x = np.ones((2, 3), F32)
    base = _fp(lambda a: P.tanh(P.add(P.mul(a, 0.0), a)), x)
    assert _fp(other, x) != base


def test_fingerprint_sees_avals_consts_and_subgraphs():
    f = lambda a: P.exp(a)  # noqa: E731
    assert _fp(f, np.ones(3, F32)) != _fp(f, np.ones(3, F64)) != _fp(f, np.ones(4, F64))
    c1, c2, c3 = np.arange(3.0), np.arange(3.0), np.arange(3.0) + 1
    x = np.ones(3)
    assert _fp(lambda a: P.mul(a, c1), x) == _fp(lambda a: P.mul(a, c2), x)  # by content, not identity
    assert _fp(lambda a: P.mul(a, c1), x) != _fp(lambda a: P.mul(a, c3), x)
    assert _fp(_custom_sin(1.0), x) != _fp(_custom_sin(2.0), x)  # differs only in the bwd subgraph


def test_fingerprint_needs_concrete_consts():
    def outer(a):
        g = trace_flat(lambda b: [P.mul(b, a)], [aval(3)])  # closes over a value of the enclosing trace
        with pytest.raises(GraphError, match="enclosing trace"):
            g.fingerprint()
        return a

    ember.make_graph(outer)(np.ones(3, F32))


# --- the VERIFY switch ----------------------------------------------------------------------------

def _drop_first_node(graph):
    return graph.replace(nodes=graph.nodes[1:])


@pytest.mark.parametrize("transform", ["vmap", "grad"])
def test_transforms_verify_their_output_under_the_switch(transform, monkeypatch):
    import ember.passes.autodiff as autodiff
    import ember.passes.vmap as vmap
    import ember.tracer.ir as ir

    module, x = (vmap, np.ones((2, 3), F32)) if transform == "vmap" else (autodiff, np.ones(3, F32))
    monkeypatch.setattr(module, "dce", _drop_first_node)  # a transform that breaks its graph
    fn = getattr(ember, transform)(lambda a: P.reduce_sum(P.exp(P.sin(a)), (0,)))
    with pytest.raises(GraphError, match="used before definition"):
        ember.make_graph(fn)(x)
    monkeypatch.setattr(ir, "VERIFY", False)  # unchecked, the broken graph comes back
    g = trace_flat(lambda a: [P.reduce_sum(P.exp(P.sin(a)), (0,))], [aval(3)])
    broken = vmap.vmap_graph(g, [0], 2) if transform == "vmap" else autodiff.grad_graph(g, [True])
    with pytest.raises(GraphError, match="used before definition"):
        broken.verify()


def test_traced_graphs_are_verified_under_the_switch(monkeypatch):
    import ember.tracer.ir as ir
    from ember.tracer.trace import Builder

    emit = Builder.emit

    def wrong_dtype(self, prim, atoms, params, out_avals, loc):
        return emit(self, prim, atoms, params, [a.update(dtype=F64) for a in out_avals], loc)

    monkeypatch.setattr(Builder, "emit", wrong_dtype)
    with pytest.raises(GraphError, match="rule gives"):
        ember.jit(lambda a: P.exp(a), optimize=False)(np.ones(3, F32))
    monkeypatch.setattr(ir, "VERIFY", False)
    ember.make_graph(lambda a: P.exp(a))(np.ones(3, F32))
