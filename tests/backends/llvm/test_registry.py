"""Every primitive has an LLVM lowering: an elementwise primitive a scalar op rule, a layout primitive
an index map, a reduction a combine op, a contraction, arg-reduction or scatter a kernel step the
renderer dispatches; a fusion is a kernel of its body; cond, while and scan are native branches and
loops around their bodies' functions (llvm/control.py); custom_vjp_call never reaches a backend (the
pipeline inlines it). A primitive added without one fails here, and each one-node graph compiles
through the whole backend (entry, kernel, call) and matches its numpy rule (control flow: its example
program of tests/backends/control_cases.py against its Python-loop reference)."""

import numpy as np
import pytest

from ember.backends import kernel
from ember.backends.llvm import control, scalar
from ember.backends.llvm.executable import LLVMExecutable
from ember.passes.memory import plan_memory
from ember.tracer import prims as P
from ember.tracer.ir import Graph
from ember.tracer.primitive import Primitive, impl_rules, primitives
from ember.tracer.prims.fusion import run_body
from tests.backends import control_cases
from tests.backends.test_kernel import INDEXED, LINALG, ONE_NODE, body, data, positive_definite

NOT_COMPILED = {"custom_vjp_call": "inlined by the pipeline (passes/inline.py) before any backend",
                "remat_call": "inlined by the pipeline (passes/inline.py) before any backend",
                "checkpoint_name": "replaced by its operand in the pipeline (passes/inline.py) before any backend",
                "custom_jvp_call": "inlined by the pipeline (passes/inline.py) before any backend",
                "fusion": "a kernel of its body (kernel.lower_kernel)"}


def llvm_lowering(prim) -> str | None:
    """How the llvm backend computes `prim`, or None when it cannot."""
    if prim.name in NOT_COMPILED:
        return NOT_COMPILED[prim.name]
    if prim in control._EMIT:
        return "a native loop or branch (llvm/control.py)"
    if prim.kind == "elementwise":
        return "scalar.OPS" if prim in scalar.OPS else None
    if prim in kernel._EMIT:
        return "an index map (kernel._EMIT)"
    if prim in kernel._COMBINE:
        return "a reduction loop (kernel._COMBINE)"
    if prim in kernel._STEPS:
        return "a kernel step (kernel._STEPS)"
    return None


def gaps() -> list[str]:
    """The primitives the llvm backend cannot compute."""
    return sorted(name for name, prim in primitives.items() if llvm_lowering(prim) is None)


def test_every_primitive_has_an_llvm_lowering():
    assert not gaps(), f"primitives without an LLVM lowering: {gaps()}"


def test_table_covers_every_elementwise_primitive():
    """A new elementwise primitive without a scalar rule fails here."""
    elementwise = {p for p in impl_rules if p.kind == "elementwise"}
    missing = sorted(p.name for p in elementwise - set(scalar.OPS))
    assert not missing, f"no llvm scalar rule for {missing}"
    assert set(scalar.OPS) <= elementwise, "a rule for a primitive that is not elementwise"


def test_a_primitive_without_a_lowering_is_named():
    """An elementwise primitive registered without a scalar rule is a gap; given one, it is not."""
    p = Primitive("test_llvm_registry_half", kind="elementwise", expensive=False, no_ufunc="a test primitive")
    try:
        assert gaps() == ["test_llvm_registry_half"]
        scalar.OPS[p] = scalar.OPS[P.neg_p]
        assert gaps() == []
    finally:
        del primitives[p.name]
        scalar.OPS.pop(p, None)


def test_what_calls_mathlib_is_expensive():
    """A primitive whose scalar rule runs a mathlib polynomial is never duplicated by fusion."""
    cheap = sorted(p.name for p in scalar.MATH_LIBRARY if not p.expensive)
    assert not cheap, f"primitives computed by mathlib but not expensive: {cheap}"


def test_the_pipeline_inlines_custom_vjp_call():
    import ember
    import ember.numpy as jnp

    @ember.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))
    low = ember.jit(ember.grad(lambda x: jnp.sum(f(x)))).lower(np.ones(3))
    assert not any(n.prim is P.custom_vjp_call_p for n in low.optimized.all_nodes())


CONTROL = set(control_cases.ONE_NODE_CONTROL)


@pytest.mark.parametrize("prim", sorted(CONTROL))
def test_each_control_primitive_compiles_and_matches_its_reference(prim):
    """The example program of `prim` is one node of it, compiled natively, and matches its Python loop."""
    name = control_cases.ONE_NODE_CONTROL[prim]
    graph = control_cases.traced(name)
    assert [n.prim.name for n in graph.nodes if n.prim.name in CONTROL] == [prim]
    executable = LLVMExecutable(graph, plan_memory(graph))
    for seed in range(3):
        args = control_cases.args_for(name, seed)
        for got, want in zip(executable(*args), control_cases.reference(name, args), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("prim", sorted({p.name for p in impl_rules} - set(NOT_COMPILED) - CONTROL))
def test_each_primitive_compiles_and_matches_its_numpy_rule(prim):
    fn, avals = ONE_NODE[prim]
    g = body(lambda *a: [fn(*a)], *avals)
    args = [(np.abs(data(s, d)) + 1).astype(d) if np.dtype(d).kind in "fiu" else data(s, d) for s, d in avals]
    if prim in INDEXED:
        args[1] = np.array([[1], [4], [1], [-2]], np.int32)
    if prim == "cholesky":
        args[0] = positive_definite(args[0])
    graph = Graph(g.inputs, g.nodes, g.outputs)
    (got,) = LLVMExecutable(graph, plan_memory(graph))(*args)
    with np.errstate(all="ignore"):
        (want,) = map(np.asarray, run_body(g, args))
    assert got.shape == want.shape and got.dtype == want.dtype
    # float math in polynomials, and float sums and products in another association order (vectorized)
    polynomial = primitives[prim] in scalar.MATH_LIBRARY or prim in ("pow", "cumlogsumexp")
    contraction = prim in ("dot_general", "conv_general_dilated", *LINALG)
    sums = ("reduce_sum", "reduce_prod", "reduce_window_sum")
    if contraction or (want.dtype.kind == "f" and (polynomial or prim in sums)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)
