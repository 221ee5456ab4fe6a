"""Every primitive has every rule it needs: a shape/dtype rule and a numpy reference always, a VJP
rule and a batching rule when it is transformable, and a forward rule (a JVP rule, or a VJP rule to
transpose); a kind from the closed set; and every fact
decided (a cost class always, a ufunc or the reason for none when elementwise). Every ember.numpy
function taking arrays checks them (ARRAY_PARAMS). The LLVM lowerings are checked in
tests/backends/llvm/test_registry.py."""

import contextlib

import numpy as np
import pytest

from ember.tracer.primitive import (
    KINDS,
    Primitive,
    batch_rules,
    impl_rules,
    jvp_rules,
    primitives,
    shape_rules,
    ufunc_of,
    vjp_rules,
)

ALWAYS = {"shape rule": shape_rules, "numpy reference": impl_rules}
TRANSFORMS = {"VJP rule": vjp_rules, "batching rule": batch_rules}
TABLES = {**ALWAYS, **TRANSFORMS}


# fact -> whether a primitive has decided it
FACTS = {
    "cost class (expensive=True/False)": lambda p: p.expensive is not None,
    "ufunc (or no_ufunc, the reason for none)": lambda p: (p.kind != "elementwise" or p.ufunc is not None
                                                           or p.no_ufunc is not None),
}


def missing(table: str) -> list[str]:
    """The primitives that need `table`'s rule (or decision, for a fact) and lack it."""
    if table in FACTS:
        return sorted(name for name, prim in primitives.items() if not FACTS[table](prim))
    needs = (lambda p: True) if table in ALWAYS else (lambda p: p.transformable)
    return sorted(name for name, prim in primitives.items() if needs(prim) and prim not in TABLES[table])


def gaps(name: str) -> list[str]:
    """What the primitive `name` lacks, of every rule table and fact."""
    return [table for table in (*TABLES, *FACTS) if name in missing(table)]


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_primitive_has_the_rule(table):
    gaps = missing(table)
    assert not gaps, f"primitives without a {table}: {gaps}"


def missing_forward_rule() -> list[str]:
    """The transformable primitives forward mode cannot differentiate: no JVP rule (ember/passes/forward.py
    registers the explicit ones) and no VJP rule for it to transpose (a while_loop has none)."""
    import ember.passes.forward  # noqa: F401

    return sorted(name for name, p in primitives.items()
                  if p.transformable and p not in jvp_rules and p not in vjp_rules)


def test_every_primitive_has_a_forward_rule():
    gaps = missing_forward_rule()
    assert not gaps, f"primitives with neither a JVP rule nor a VJP rule to transpose: {gaps}"


def test_a_primitive_without_a_vjp_rule_needs_a_jvp_rule():
    with _temporary(Primitive("test_registry_loop", kind="opaque", expensive=False)) as p:
        shape_rules[p] = impl_rules[p] = lambda x: x
        assert missing_forward_rule() == ["test_registry_loop"]
        jvp_rules[p] = lambda primals, tangents: (primals[0], tangents[0])
        assert missing_forward_rule() == []


@pytest.mark.parametrize("fact", sorted(FACTS))
def test_every_primitive_decides_the_fact(fact):
    gaps = missing(fact)
    assert not gaps, f"primitives without a {fact}: {gaps}"


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
        for table in (*TABLES.values(), jvp_rules):
            table.pop(prim, None)


def test_internal_primitives_need_no_transform_rules():
    with _temporary(Primitive("test_registry_internal", kind="opaque", transformable=False, expensive=False)) as p:
        shape_rules[p] = impl_rules[p] = lambda x: x
        assert not p.transformable
        assert all(not missing(t) for t in TABLES)
    with _temporary(Primitive("test_registry_user", kind="opaque", expensive=False)) as p:
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


def test_a_half_added_primitive_is_named_by_its_gaps():
    """An elementwise primitive registered with a shape rule and a numpy reference only: the registry
    names every rule and fact it still lacks, and nothing once they are all given."""
    with _temporary(Primitive("test_registry_half", kind="elementwise")) as p:
        shape_rules[p] = impl_rules[p] = lambda x: x
        assert gaps(p.name) == [*TRANSFORMS, *FACTS]
        vjp_rules[p] = batch_rules[p] = lambda *a, **k: None
        p.expensive, p.no_ufunc = False, "a test primitive"
        assert gaps(p.name) == []
    with _temporary(Primitive("test_registry_layout", kind="layout", expensive=True)) as p:
        shape_rules[p] = impl_rules[p] = vjp_rules[p] = batch_rules[p] = lambda x: x
        assert gaps(p.name) == []  # only an elementwise primitive decides a ufunc


def test_ufunc_facts_are_consistent():
    with pytest.raises(ValueError, match="has a ufunc and a reason"):
        Primitive("test_registry_both", kind="elementwise", ufunc=np.exp, no_ufunc="why")
    with pytest.raises(ValueError, match="ufunc_dtypes without a ufunc"):
        Primitive("test_registry_dtypes", kind="elementwise", ufunc_dtypes=("float32",), no_ufunc="why")
    with pytest.raises(TypeError, match="must be a numpy ufunc"):
        Primitive("test_registry_callable", kind="elementwise", ufunc=np.round)
    assert not any(name.startswith("test_registry_") for name in primitives)


@pytest.mark.parametrize("prim", ["exp", "log", "tanh", "logistic", "sin", "cos", "erf", "sqrt", "pow", "div",
                                  "reduce_sum", "argmax", "dot_general", "gather"])
def test_what_fusion_never_duplicates_is_expensive(prim):
    assert primitives[prim].expensive is True


@pytest.mark.parametrize("prim", ["neg", "add", "mul", "max", "select", "convert_element_type", "reshape",
                                  "broadcast_in_dim", "scatter_add"])
def test_cheap_primitives_are_not_expensive(prim):
    assert primitives[prim].expensive is False


def test_scipy_ufuncs_resolve_to_the_numpy_reference():
    """A ufunc named by a string is scipy.special's; the reference derived from it keeps the dtype."""
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    for prim in primitives.values():
        if isinstance(prim.ufunc, str):
            fn = ufunc_of(prim)
            assert isinstance(fn, np.ufunc)
            np.testing.assert_array_equal(impl_rules[prim](x), fn(x).astype(np.float32))


def test_view_prims_are_the_memory_plans_views():
    """`may_view` and the memory plan's VIEWS (how a view reads its operand) name the same primitives."""
    from ember.passes.memory import VIEWS

    assert {p for p in primitives.values() if p.may_view} == set(VIEWS)


# ember.numpy functions that take no array, or any object (their operands are not checked)
NO_ARRAY_PARAMS = {"arange", "array", "asarray", "empty", "eye", "full", "identity", "linspace", "ndim", "ones",
                   "shape", "size", "zeros",
                   "tri", "indices",
                   "can_cast", "issubdtype", "promote_types", "result_type"}


def _public_functions(module) -> set[str]:
    import inspect

    return {name for name in module.__all__
            if callable(v := getattr(module, name)) and not inspect.isclass(v) and not inspect.ismodule(v)}


def test_every_numpy_function_taking_arrays_checks_them():
    """A function of ember.numpy (or ember.numpy.linalg: their `__all__`) is in ARRAY_PARAMS or NO_ARRAY_PARAMS, and
    ARRAY_PARAMS names only functions that exist."""
    import ember.numpy as jnp
    from ember.numpy._core import ARRAY_PARAMS

    functions = _public_functions(jnp) | _public_functions(jnp.linalg)
    unchecked = sorted(functions - set(ARRAY_PARAMS) - NO_ARRAY_PARAMS)
    assert not unchecked, f"ember.numpy functions in neither ARRAY_PARAMS nor NO_ARRAY_PARAMS: {unchecked}"
    assert not set(ARRAY_PARAMS) - functions, "ARRAY_PARAMS names functions ember.numpy does not have"
    assert not NO_ARRAY_PARAMS - functions
