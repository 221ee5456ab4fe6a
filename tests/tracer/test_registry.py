"""Every primitive has every rule: shape/dtype rule, numpy reference, VJP rule and batching rule.
(The LLVM and CUDA lowerings join this list when those backends land.)"""

import pytest

from ember.tracer.primitive import batch_rules, impl_rules, primitives, shape_rules, vjp_rules

TABLES = {"shape rule": shape_rules, "numpy reference": impl_rules, "VJP rule": vjp_rules,
          "batching rule": batch_rules}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_primitive_has_the_rule(table):
    missing = sorted(name for name, prim in primitives.items() if prim not in TABLES[table])
    assert not missing, f"primitives without a {table}: {missing}"


def test_registry_holds_the_design_set():
    expected = {
        "neg", "exp", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "abs", "sign",
        "floor", "add", "sub", "mul", "div", "pow", "max", "min", "eq", "ne", "lt", "le", "gt", "ge", "select",
        "convert_element_type", "broadcast_in_dim", "reshape", "transpose", "reduce_sum", "reduce_max",
        "reduce_min", "argmax", "dot_general", "slice", "pad", "gather", "scatter_add", "concatenate", "iota",
        "custom_vjp_call",
    }
    assert expected <= set(primitives)
