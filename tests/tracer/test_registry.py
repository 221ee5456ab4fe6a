"""Every primitive has every rule it needs: a shape/dtype rule and a numpy reference always, a VJP
rule and a batching rule when it is transformable; and a kind from the closed set. (The LLVM and
CUDA lowerings join this list when those backends land.)"""

import contextlib

import pytest

from ember.tracer.primitive import KINDS, Primitive, batch_rules, impl_rules, primitives, shape_rules, vjp_rules

ALWAYS = {"shape rule": shape_rules, "numpy reference": impl_rules}
TRANSFORMS = {"VJP rule": vjp_rules, "batching rule": batch_rules}
TABLES = {**ALWAYS, **TRANSFORMS}


def missing(table: str) -> list[str]:
    """The primitives that need `table`'s rule and lack it."""
    needs = (lambda p: True) if table in ALWAYS else (lambda p: p.transformable)
    return sorted(name for name, prim in primitives.items() if needs(prim) and prim not in TABLES[table])


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_primitive_has_the_rule(table):
    gaps = missing(table)
    assert not gaps, f"primitives without a {table}: {gaps}"


def test_every_primitive_has_a_kind_from_the_set():
    bad = {name: prim.kind for name, prim in primitives.items() if prim.kind not in KINDS}
    assert not bad, f"primitives with a kind outside {KINDS}: {bad}"


@pytest.mark.parametrize("name,kind", [
    ("add", "elementwise"), ("exp", "elementwise"), ("select", "elementwise"), ("convert_element_type", "elementwise"),
    ("broadcast_in_dim", "layout"), ("reshape", "layout"), ("iota", "layout"), ("reduce_sum", "reduction"),
    ("argmax", "reduction"), ("dot_general", "contraction"), ("gather", "indexing"), ("scatter_add", "indexing"),
    ("custom_vjp_call", "opaque"),
])
def test_kinds_of_the_design_set(name, kind):
    assert primitives[name].kind == kind


def test_a_primitive_needs_a_known_kind():
    with pytest.raises(ValueError, match="kind 'fused'"):
        Primitive("test_registry_bad_kind", kind="fused")
    assert "test_registry_bad_kind" not in primitives
    with pytest.raises(TypeError):
        Primitive("test_registry_no_kind")  # kind is required
    assert "test_registry_no_kind" not in primitives


@contextlib.contextmanager
def _temporary(prim: Primitive):
    try:
        yield prim
    finally:
        del primitives[prim.name]
        for table in TABLES.values():
            table.pop(prim, None)


def test_internal_primitives_need_no_transform_rules():
    with _temporary(Primitive("test_registry_internal", kind="opaque", transformable=False)) as p:
        shape_rules[p] = impl_rules[p] = lambda x: x
        assert not p.transformable
        assert all(not missing(t) for t in TABLES)
    with _temporary(Primitive("test_registry_user", kind="opaque")) as p:
        shape_rules[p] = impl_rules[p] = lambda x: x
        assert all("test_registry_user" in missing(t) for t in TRANSFORMS)
        assert not any("test_registry_user" in missing(t) for t in ALWAYS)


@pytest.mark.parametrize("transform", ["grad", "vmap"])
def test_transforms_name_an_internal_primitive_they_meet(transform):
    import numpy as np

    import ember
    from ember.errors import TransformError
    from ember.tracer import prims as P

    with _temporary(Primitive("test_registry_fusion", kind="opaque", transformable=False)) as p:
        shape_rules[p] = lambda x: x
        impl_rules[p] = lambda x: x
        fn = getattr(ember, transform)(lambda x: P.reduce_sum(p.bind(P.sin(x)), (0,)))
        with pytest.raises(TransformError, match=f"{transform} cannot transform primitive test_registry_fusion") as e:
            fn(np.ones((2, 3)) if transform == "vmap" else np.ones(3))
        assert "test_registry.py" in str(e.value)  # the user's line that applied the primitive


def test_registry_holds_the_design_set():
    expected = {
        "neg", "exp", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "abs", "sign",
        "floor", "add", "sub", "mul", "div", "pow", "max", "min", "eq", "ne", "lt", "le", "gt", "ge", "select",
        "convert_element_type", "broadcast_in_dim", "reshape", "transpose", "reduce_sum", "reduce_max",
        "reduce_min", "argmax", "dot_general", "slice", "pad", "gather", "scatter_add", "concatenate", "iota",
        "custom_vjp_call",
    }
    assert expected <= set(primitives)
