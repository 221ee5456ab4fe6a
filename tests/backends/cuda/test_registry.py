"""Every primitive has a CUDA rule: an elementwise primitive a C rule in cuda/scalar.py, a layout primitive
the shared index map, a reduction the renderer's tree reduction, a contraction, arg-reduction or scatter a
step rule of the renderer, a control-flow primitive a host runner over device bodies (cuda/control.py). A
primitive added without one fails here; each one-node graph (at float32, float64 and float16 where the
primitive takes floats, and at larger shapes that take the block-wide, chunked and warp reduction paths)
runs as host C++ and matches its numpy rule, each control primitive's example (control_cases.py
ONE_NODE_CONTROL) matches its Python loop, and all of them compile to one sm_90 cubin through NVRTC with
no warning."""

import numpy as np
import pytest

import ember.numpy as jnp
from ember.backends import kernel
from ember.backends.cuda import control, render, scalar
from ember.backends.cuda.backend import compile_many
from ember.backends.debug import ORACLE_RTOL
from ember.backends.kernel import (
    ArgReduce,
    Contraction,
    Convolution,
    Cumulative,
    Factorization,
    Loop,
    Scatter,
    Sort,
    WindowReduce,
)
from ember.backends.llvm import scalar as llvm_scalar
from ember.passes.memory import plan_memory
from ember.tracer import prims as P
from ember.tracer.ir import Graph
from ember.tracer.primitive import Primitive, impl_rules, primitives
from ember.tracer.prims.fusion import run_body
from tests.backends import control_cases
from tests.backends.llvm.test_registry import NOT_COMPILED
from tests.backends.test_kernel import INDEXED, LINALG, ONE_NODE, body, data, positive_definite


def cuda_rule(prim) -> str | None:
    """How the CUDA renderer computes `prim`, or None when it cannot."""
    if prim in control.RUNNERS:
        return f"a host runner over device bodies ({control.RUNNERS[prim].__name__}, cuda/control.py)"
    if prim.name in NOT_COMPILED:
        return NOT_COMPILED[prim.name]
    if prim.kind == "elementwise":
        return "cuda scalar.OPS" if prim in scalar.OPS else None
    if prim in kernel._EMIT:
        return "an index map (kernel._EMIT), rendered by render._render_ix"
    if prim in kernel._COMBINE:
        return "a tree reduction (render._reduction)" if Loop in render._STEP_RULES else None
    if prim in kernel._STEPS:
        step = {P.dot_general_p: Contraction, P.argmax_p: ArgReduce, P.argmin_p: ArgReduce,
                **dict.fromkeys(kernel.SCATTER_MODES, Scatter),
                P.cumsum_p: Cumulative, P.cumprod_p: Cumulative, P.cummax_p: Cumulative, P.cummin_p: Cumulative,
                P.cumlogsumexp_p: Cumulative,
                P.sort_p: Sort,
                P.cholesky_p: Factorization, P.triangular_solve_p: Factorization, P.lu_p: Factorization,
                P.qr_p: Factorization, P.eigh_p: Factorization, P.svd_p: Factorization,
                P.conv_general_dilated_p: Convolution,
                **dict.fromkeys(kernel.WINDOW_FOLDS, WindowReduce),
                }.get(prim)
        return f"a step rule ({step.__name__})" if step in render._STEP_RULES else None
    return None


def gaps() -> list[str]:
    return sorted(name for name, prim in primitives.items() if cuda_rule(prim) is None)


def test_every_primitive_has_a_cuda_rule():
    assert not gaps(), f"primitives without a CUDA rule: {gaps()}"


def test_a_primitive_without_a_rule_is_named():
    p = Primitive("test_cuda_registry_half", kind="elementwise", expensive=False, no_ufunc="a test primitive")
    try:
        assert gaps() == ["test_cuda_registry_half"]
        scalar.OPS[p] = scalar.OPS[P.neg_p]
        assert gaps() == []
    finally:
        del primitives[p.name]
        scalar.OPS.pop(p, None)


def test_every_step_kind_has_a_rule():
    assert set(render._STEP_RULES) == {Loop, Contraction, ArgReduce, Scatter, Cumulative, Sort, Factorization,
                                       Convolution, WindowReduce}


def test_every_control_primitive_has_a_runner_and_an_example():
    names = {p.name for p in P.CONTROL_PRIMS}
    assert {p.name for p in control.RUNNERS} == names
    assert set(control_cases.ONE_NODE_CONTROL) == names


# --- every primitive run as host C++ ----------------------------------------------------------------

def _with_dtype(avals, dtype):
    """`avals` with their float dtypes replaced by `dtype`."""
    return tuple((s, dtype if np.dtype(d).kind == "f" else d) for s, d in avals)


def _cases() -> dict:
    """name -> (graph, args): every ONE_NODE example at float32, float64 and float16, and reductions,
    arg reductions and contractions large enough for every thread mapping."""
    out = {}
    for prim in sorted({p.name for p in impl_rules} - set(NOT_COMPILED) - set(control_cases.ONE_NODE_CONTROL)):
        fn, avals = ONE_NODE[prim]
        for dtype in ("float32", "float64", "float16"):
            if dtype != "float32" and not any(np.dtype(d).kind == "f" for _, d in avals):
                continue
            if dtype == "float16" and prim in LINALG:  # float32 and float64 only
                continue
            av = _with_dtype(avals, dtype)
            out[f"{prim}-{dtype}"] = (fn, av)
    big = {
        "sum-rows-warp": (lambda x: P.reduce_sum(x, (1,)), (((40, 300), "float32"),)),
        "sum-rows-block": (lambda x: P.reduce_sum(x, (1,)), (((3, 5000), "float64"),)),
        "sum-all-chunked": (lambda x: P.reduce_sum(x, (0, 1)), (((64, 1000), "float32"),)),
        "sum-columns-chunked": (lambda x: P.reduce_sum(x, (0,)), (((3000, 7), "float32"),)),
        "sum-all-wide-second-stage": (lambda x: P.reduce_sum(x, (0,)), (((300000,), "float64"),)),
        "max-all-chunked": (lambda x: P.reduce_max(x, (0,)), (((50000,), "float32"),)),
        "min-columns": (lambda x: P.reduce_min(x, (0,)), (((900, 33), "float64"),)),
        "prod-rows": (lambda x: P.reduce_prod(x, (1,)), (((5, 100), "float64"),)),
        "sum-int-chunked": (lambda x: P.reduce_sum(x, (0,)), (((40000,), "int32"),)),
        "sum-half-block": (lambda x: P.reduce_sum(x, (1,)), (((2, 3000), "float16"),)),
        "argmax-block": (lambda x: P.argmax(x, 1, np.int32), (((3, 2000), "float32"),)),
        "argmin-long-column": (lambda x: P.argmin(x, 0, np.int64), (((700, 5), "float64"),)),
        "dot-batched": (lambda a, b: P.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
                        (((3, 4, 5), "float32"), ((3, 5, 6), "float32"))),
        "tanh-vector-broadcast": (lambda x, y: jnp.tanh(x * 2.0 + y), (((64, 301), "float32"), ((301,), "float32"))),
        "tanh-vector-tail": (lambda x: jnp.tanh(x), (((1027,), "float32"),)),
        "mul-vector-f64-tail": (lambda x: x * x + 1.0, (((2051,), "float64"),)),
        "sin-vector-f16-tail": (lambda x: jnp.sin(x) * x, (((3001,), "float16"),)),
        "gt-vector-bool-out": (lambda x: x > 0.5, (((2000, 3), "float32"),)),
        "mul-vector-int8": (lambda x: x * np.int8(3) - x, (((4099,), "int8"),)),
        "convert-vector-f64-to-f32": (lambda x: P.convert_element_type(x, np.float32), (((1030,), "float64"),)),
        # lhs and rhs dilation, negative padding, batch groups, in three layouts; ints exactly
        "conv_general_dilated-dilated-int": (
            lambda x, w: P.conv_general_dilated(x, w, window_strides=(1, 2), padding=((2, -1), (1, 1)),
                                                lhs_dilation=(2, 1), rhs_dilation=(1, 2),
                                                dimension_numbers=((1, 0, 2, 3), (0, 1, 2, 3), (2, 1, 0, 3)),
                                                batch_group_count=2),
            (((3, 4, 5, 6), "int32"), ((4, 3, 2, 2), "int32"))),
        "reduce_window_max-int8": (ONE_NODE["reduce_window_max"][0], (((3, 5), "int8"),)),
        "reduce_window_sum-int32": (ONE_NODE["reduce_window_sum"][0], (((3, 5), "int32"),)),
        "dot-int": (lambda a, b: P.dot_general(a, b, (((1,), (0,)), ((), ()))), (((3, 4), "int32"), ((4, 2), "int32"))),
        # the combining scatters' compare-and-swap loops at 1, 2, 4 and 8 bytes, bools, and NaN
        **{f"{name}-{label}": (ONE_NODE[name][0], (((5, 3), dtype), ((4, 1), "int32"), ((4, 3), dtype)))
           for name in ("scatter_mul", "scatter_min", "scatter_max")
           for label, dtype in {"int8": "int8", "bool": "bool", "uint16": "uint16", "int32": "int32",
                                "int64": "int64", "nan-float32": "float32"}.items()},
        "cholesky-batched": (P.cholesky, (((3, 5, 5), "float64"),)),
        "triangular_solve-right-upper-transposed-unit": (
            lambda a, b: P.triangular_solve(a, b, transpose_a=True, unit_diagonal=True),
            (((2, 4, 4), "float64"), ((2, 3, 4), "float64"))),
        "lu-wide-batched": (lambda x: P.lu(x)[0], (((2, 3, 5), "float32"),)),
        "lu-tall-permutation": (lambda x: P.lu(x)[2], (((5, 3), "float64"),)),
        "qr-full-wide-r": (lambda x: P.qr(x)[1], (((3, 5), "float64"),)),
        "qr-full-tall-q": (lambda x: P.qr(x)[0], (((5, 3), "float32"),)),
        # eigenvectors' and singular vectors' signs are each algorithm's own: compared by magnitude
        "eigh-upper-vectors": (lambda x: P.abs(P.eigh(x, lower=False)[0]), (((2, 4, 4), "float64"),)),
        "svd-tall-u": (lambda x: P.abs(P.svd(x, full_matrices=False)[1]), (((5, 3), "float64"),)),
        "svd-wide-vt": (lambda x: P.abs(P.svd(x, full_matrices=False)[2]), (((3, 5), "float64"),)),
    }
    out.update(big)
    return out


CASES = _cases()


def _args(name, avals):
    prim = name.split("-")[0]
    args = [(np.abs(data(s, d)) + 1).astype(d) if np.dtype(d).kind in "fiu" else data(s, d) for s, d in avals]
    if prim in INDEXED:
        args[1] = np.array([[1], [4], [1], [-2]], np.int32)
    if prim == "cholesky":
        args[0] = positive_definite(args[0])
    if "-nan-" in name:  # a NaN in the operand and one among the updates of the repeated index
        args[0][1, 1], args[2][2, 0] = np.nan, np.nan
    if name.startswith("argmax-block"):
        args[0][1, 1500] = np.nan
        args[0][2, :] = 1.0  # ties: the first index wins
    return args


def _compiled(device: str) -> dict:
    """name -> (executable, (body, args)) for every case, and control primitive name -> its example's
    executable, all from one module for `device`."""
    graphs, argss = [], []
    for name, (fn, avals) in CASES.items():
        g = body(lambda *a, fn=fn: [fn(*a)], *avals)
        graph = Graph(g.inputs, g.nodes, g.outputs)
        graphs.append((graph, plan_memory(graph)))
        argss.append((g, _args(name, avals)))
    for example in control_cases.ONE_NODE_CONTROL.values():
        graph = control_cases.traced(example)
        graphs.append((graph, plan_memory(graph)))
    exes = compile_many(graphs, device=device)
    return {**dict(zip(CASES, zip(exes, argss))), **dict(zip(control_cases.ONE_NODE_CONTROL, exes[len(CASES):]))}


def _control_matches_its_loop(prim: str, exe, to_device=np.asarray, to_host=np.asarray) -> None:
    """Control primitive `prim`'s example run by `exe` matches its Python loop (a few seeds)."""
    example = control_cases.ONE_NODE_CONTROL[prim]
    assert [n.prim.name for n in control_cases.traced(example).nodes if n.prim.name in control_cases.ONE_NODE_CONTROL
            ] == [prim], f"{example} is not an example of {prim}"
    for seed in range(3):
        args = control_cases.args_for(example, seed)
        got = exe(*[to_device(a) for a in args])
        for k, (g, w) in enumerate(zip(got, control_cases.reference(example, args), strict=True)):
            g = to_host(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (prim, k)
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=f"{prim} ({example}) output {k}")


def _matches_its_numpy_rule(name: str, got, g, args) -> None:
    with np.errstate(all="ignore"):
        (want,) = map(np.asarray, run_body(g, args))
    assert got.shape == want.shape and got.dtype == want.dtype, name
    rtol = _tolerance(name, want.dtype)
    if rtol is None:
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=name)


@pytest.fixture(scope="module")
def compiled():
    return _compiled("cuda-host")


MATH = {p.name for p in llvm_scalar.MATH_LIBRARY} | {"pow", "cumlogsumexp"}
# sums in another order than NumPy's (which adds a column of a float32 matrix one row after another):
# the oracle check's tolerance; scatter_add and scatter_mul combine with atomics, in any order (the kernels
# whose float results may vary run to run)
SUMS = {"dot_general", "reduce_sum", "reduce_prod", "sum", "prod", "dot", "scatter_add", "scatter_mul",
        "conv_general_dilated",
        "reduce_window_sum"}


def _tolerance(name: str, dtype) -> float | None:
    """None: bit for bit; else the relative tolerance (math polynomials; sums in another order)."""
    prim, dtype = name.split("-")[0], np.dtype(dtype)
    if dtype.kind != "f":
        return None
    if prim in SUMS or prim in LINALG:  # the factorizations too: LAPACK's order of operations is not ours
        return ORACLE_RTOL[dtype]
    if prim in MATH:
        return {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}[dtype.type]
    return None


@pytest.mark.parametrize("prim", sorted(control_cases.ONE_NODE_CONTROL))
def test_control_primitive_runs_as_host_cpp_and_matches_its_loop(compiled, prim):
    _control_matches_its_loop(prim, compiled[prim])


@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_as_host_cpp_and_matches_numpy(compiled, name):
    exe, (g, args) = compiled[name]
    (got,) = exe(*args)
    _matches_its_numpy_rule(name, got, g, args)


def test_all_compile_to_one_cubin(compiled):
    from ember.backends.cuda import nvrtc
    from ember.backends.cuda.prelude import DEVICE_PRELUDE

    exes = [c[0] if isinstance(c, tuple) else c for c in compiled.values()]
    source = exes[0].source
    assert all(e.source is source for e in exes)
    assert nvrtc.compile_cubin(DEVICE_PRELUDE + source, "sm_90")


@pytest.mark.gpu
def test_every_case_on_the_device():
    """The same one-node graphs on a GPU (CuPy arrays in and out), against their numpy rules."""
    from ember.backends.cuda import runtime

    if not runtime.device_available():
        pytest.skip(f"no GPU: {runtime.missing_reason()}")
    for name, case in _compiled("cuda").items():
        if name in control_cases.ONE_NODE_CONTROL:
            _control_matches_its_loop(name, case, runtime.cupy_module().asarray, runtime.cupy_module().asnumpy)
            continue
        exe, (g, args) = case
        (got,) = exe(*args)
        _matches_its_numpy_rule(name, got.get(), g, args)
