"""ember.jit: call forms, static arguments, the signature cache, output ownership, constants,
Lowered/Compiled, make_graph and backend selection."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.passes.pipeline import stage_names
from ember.tracer.ir import Graph
from tests.helpers import all_nodes


def _prims(graph: Graph) -> list[str]:
    return [n.prim.name for n in all_nodes(graph)]


# --- call forms ---------------------------------------------------------------------------------

def test_decorator_form():
    @ember.jit
    def f(x, y):
        return jnp.sin(x) * y

    x, y = np.linspace(0, 1, 5), np.arange(5.0)
    np.testing.assert_allclose(f(x, y), np.sin(x) * y)
    assert isinstance(f, ember.Jitted)
    assert f.__name__ == "f"


def test_call_form():
    f = ember.jit(lambda x: jnp.exp(x) + 1.0)
    x = np.linspace(-1, 1, 7)
    np.testing.assert_allclose(f(x), np.exp(x) + 1.0)


def test_decorator_with_static_argnums():
    @ember.jit(static_argnums=1)
    def power(x, n):
        out = x
        for _ in range(n - 1):  # a Python loop over a static value
            out = out * x
        return out

    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(power(x, 3), x**3)
    np.testing.assert_allclose(power(x, 4), x**4)
    assert power.cache_info().misses == 2


def test_static_argnames():
    @ember.jit(static_argnames="activation")
    def layer(x, activation="tanh"):
        return jnp.tanh(x) if activation == "tanh" else jnp.maximum(x, 0.0)

    x = np.array([-1.0, 0.5])
    np.testing.assert_allclose(layer(x, activation="tanh"), np.tanh(x))
    np.testing.assert_allclose(layer(x, activation="relu"), np.maximum(x, 0))
    np.testing.assert_allclose(layer(x), np.tanh(x))
    assert layer.cache_info().misses == 3


def test_static_argnums_given_by_keyword():
    f = ember.jit(lambda x, n: x * n, static_argnums=1)
    x = np.ones(2)
    np.testing.assert_allclose(f(x, n=3), 3 * x)
    np.testing.assert_allclose(f(x, 3), 3 * x)


def test_keyword_arguments():
    @ember.jit
    def f(x, scale, *, shift):
        return x * scale + shift

    x = np.arange(3.0)
    np.testing.assert_allclose(f(x, 2.0, shift=np.ones(3)), x * 2 + 1)
    np.testing.assert_allclose(f(x, scale=3.0, shift=np.zeros(3)), x * 3)


# --- the cache ----------------------------------------------------------------------------------

def test_no_retrace_on_same_signature():
    traces = []

    @ember.jit
    def f(x):
        traces.append(1)
        return x * 2

    for i in range(4):
        f(np.full(3, float(i)))
    assert len(traces) == 1
    info = f.cache_info()
    assert (info.misses, info.hits, info.size) == (1, 3, 1)


@pytest.mark.parametrize("first, second", [
    (np.ones(3), np.ones(4)),                                   # new shape
    (np.ones(3), np.ones((3, 1))),                              # new rank
    (np.ones(3), np.ones(3, np.float32)),                       # new dtype
    (np.ones(3, np.int32), np.ones(3, np.float32)),             # int -> float
    (1.0, np.array(1.0, np.float32)),                           # weak python float vs strong f32
    (1.0, np.float32(1.0)),                                     # weak vs NumPy scalar
    (2, 2.0),                                                   # python int vs float
])
def test_retrace_on_new_signature(first, second):
    f = ember.jit(lambda x: x + 1)
    f(first)
    f(first)
    assert f.cache_info().misses == 1
    f(second)
    assert f.cache_info().misses == 2
    f(second)
    f(first)
    assert f.cache_info()[:3] == (3, 2, 2)


def test_weak_type_changes_result_dtype():
    f = ember.jit(lambda x, y: x * y)
    x = np.ones(3, np.float32)
    assert f(x, 2.0).dtype == np.float32          # python scalar: weak, keeps x's dtype
    assert f(x, np.float64(2.0)).dtype == np.float64
    assert f.cache_info().misses == 2


def test_retrace_on_new_static_value():
    f = ember.jit(lambda x, k: x * k, static_argnums=(1,))
    x = np.ones(2)
    f(x, 2)
    f(x, 2)
    f(x, 5)
    np.testing.assert_allclose(f(x, 5), 5 * x)
    assert f.cache_info()[:3] == (2, 2, 2)


def test_retrace_on_new_pytree_structure():
    f = ember.jit(lambda t: sum(jnp.sum(v) for v in ember.tree.tree_leaves(t)))
    a = np.ones(2)
    f((a, a))
    f((a, a))
    assert f.cache_info().misses == 1
    f([a, a])          # list instead of tuple
    f({"x": a, "y": a})
    f({"x": a, "z": a})  # other keys
    f((a, a, a))
    assert f.cache_info().misses == 5


def test_clear_cache():
    f = ember.jit(lambda x: x + 1)
    f(np.ones(2))
    f.clear_cache()
    assert f.cache_info()[:3] == (0, 0, 0)
    f(np.ones(2))
    assert f.cache_info().misses == 1


def test_unhashable_static_argument_is_a_clear_error():
    f = ember.jit(lambda x, cfg: x * len(cfg), static_argnums=1)
    with pytest.raises(ember.errors.ArgumentValueError) as e:
        f(np.ones(2), [1, 2])
    msg = str(e.value)
    assert "unhashable" in msg and "list" in msg and "hashable" in msg
    assert "test_jit.py:" in msg


# --- nesting --------------------------------------------------------------------------------------

def test_jit_inside_jit_is_inlined():
    inner = ember.jit(lambda x: jnp.sin(x) * 2)

    @ember.jit
    def outer(x):
        return inner(x) + inner(x * 3)

    x = np.linspace(0, 1, 4)
    np.testing.assert_allclose(outer(x), np.sin(x) * 2 + np.sin(3 * x) * 2)
    assert inner.cache_info().misses == 0  # never compiled on its own
    prims = _prims(outer.lower(x).graph)
    assert prims.count("sin") == 2  # the inner body, twice, in the outer graph
    assert not any("call" in p or "jit" in p for p in prims)


# --- outputs ----------------------------------------------------------------------------------

def test_outputs_are_ember_arrays_which_are_numpy_arrays():
    f = ember.jit(lambda x: (x + 1, jnp.sum(x), {"k": x * 2}))
    a, s, d = f(np.ones(3))
    for out in (a, s, d["k"]):
        assert type(out) is ember.Array
        assert isinstance(out, np.ndarray) and type(np.asarray(out)) is np.ndarray
    assert s.shape == ()


@pytest.mark.parametrize("fn", [
    lambda x: x,
    lambda x: x.reshape(3, 2),
    lambda x: x.T,
    lambda x: jnp.transpose(x),
    lambda x: x[0],
    lambda x: x[:, 1:],
    lambda x: x + 0.0,
    lambda x: x * 1.0,
], ids=["identity", "reshape", "T", "transpose", "index", "slice", "plus0", "times1"])
@pytest.mark.parametrize("optimize", [True, False])
def test_outputs_never_alias_inputs(fn, optimize):
    x = np.arange(6.0).reshape(2, 3)
    before = x.copy()
    out = ember.jit(fn, optimize=optimize)(x)
    assert not np.shares_memory(out, x)
    assert out.flags.writeable
    np.asarray(out)[...] = -1.0  # through NumPy: the Array itself refuses writes
    np.testing.assert_array_equal(x, before)


def test_outputs_do_not_alias_each_other():
    f = ember.jit(lambda x: (lambda y: (y, y, x, x))(x * 2))
    y1, y2, x1, x2 = f(np.ones(3))
    for a, b in [(y1, y2), (x1, x2)]:
        assert not np.shares_memory(a, b)
    np.asarray(y1)[0] = 100.0
    assert y2[0] == 2.0


def test_returned_constant_is_a_copy():
    c = np.arange(3.0)
    f = ember.jit(lambda x: (c, x))
    out, _ = f(np.ones(1))
    np.asarray(out)[0] = 42.0
    assert c[0] == 0.0
    np.testing.assert_array_equal(f(np.ones(1))[0], [0.0, 1.0, 2.0])


# --- closed-over arrays ---------------------------------------------------------------------------

def test_closed_over_arrays_are_snapshotted_at_trace_time():
    """Documented behaviour (see ember.jit): a closed-over NumPy array is a graph constant whose value
    is copied when the function is traced. Mutating it later does not change the compiled function;
    a new trace (here: a new shape) sees the new value."""
    w = np.array([1.0, 2.0, 3.0])
    f = ember.jit(lambda x: x * w)
    np.testing.assert_allclose(f(np.ones(3)), [1, 2, 3])
    w[:] = 10.0
    np.testing.assert_allclose(f(np.ones(3)), [1, 2, 3])  # cached trace: old values
    np.testing.assert_allclose(f(np.ones((2, 3))), np.full((2, 3), 10.0))  # retrace: new values
    assert "snapshot" in ember.jit.__doc__ or "copied" in ember.jit.__doc__


# --- optimize=False -------------------------------------------------------------------------------

def test_optimize_false_same_results_and_traced_graph():
    def f(x, y):
        a = x * 1.0 + 0.0
        return jnp.sum(jnp.tanh(a) * y) + jnp.sum(jnp.tanh(a) * y)

    x, y = np.linspace(-1, 1, 6), np.linspace(0, 2, 6)
    fast, slow = ember.jit(f), ember.jit(f, optimize=False)
    np.testing.assert_allclose(fast(x, y), slow(x, y), rtol=1e-12)
    low = slow.lower(x, y)
    assert low.stage_names == ["traced", "after inline", "after memory"]  # lowering always runs
    assert low.optimized is low.graph
    assert len(fast.lower(x, y).optimized.nodes) < len(low.graph.nodes)


# --- lower / compile / make_graph -----------------------------------------------------------------

def test_lower_exposes_graphs_text_and_stages():
    f = ember.jit(lambda x, y: jnp.tanh(x @ y) * 1.0)
    x, y = np.ones((2, 3)), np.ones((3, 4))
    low = f.lower(x, y)
    assert isinstance(low.graph, Graph) and isinstance(low.optimized, Graph)
    assert low.stage_names[0] == "traced"
    assert low.stage_names[1:] == stage_names()
    assert {"after simplify", "after cse", "after dce"} <= set(low.stage_names)
    assert "mul" in _prims(low.graph) and "mul" not in _prims(low.optimized)  # x * 1.0 simplified
    assert [v.aval.shape for v in low.graph.inputs] == [(2, 3), (3, 4)]
    text = low.text("traced")
    assert "dot_general" in text and "tanh" in text and "f64[2,4]" in text
    assert "test_jit.py:" in text
    assert low.text() == low.text(low.stage_names[-1])
    with pytest.raises(KeyError, match="no stage"):
        low.text("no such stage")
    assert f.cache_info().misses == 0  # lowering does not fill the call cache


def test_compile_runs_and_checks_argument_shapes():
    f = ember.jit(lambda x, y: x * y + 1)
    x = np.arange(3.0)
    compiled = f.lower(x, x).compile()
    np.testing.assert_allclose(compiled(x, 2 * x), x * 2 * x + 1)
    with pytest.raises(ember.ArgumentError) as e:
        compiled(np.ones(4), np.ones(4))
    assert "f64[3]" in str(e.value) and "f64[4]" in str(e.value)
    with pytest.raises(ember.ArgumentError):
        compiled(x.astype(np.float32), x.astype(np.float32))
    with pytest.raises(ember.ArgumentError):
        compiled((x,), x)


def test_compile_with_static_arguments():
    f = ember.jit(lambda x, n: x**n, static_argnums=1)
    compiled = f.lower(np.ones(2), 3).compile()
    np.testing.assert_allclose(compiled(np.array([2.0, 3.0])), [8.0, 27.0])  # static n fixed at lowering


def test_make_graph_returns_the_traced_graph():
    def f(x):
        return jnp.sum(jnp.exp(x))

    g = ember.make_graph(f)(np.ones((2, 2), np.float32))
    assert isinstance(g, ember.Graph)
    assert _prims(g) == ["exp", "reduce_sum"]
    assert g.inputs[0].aval.shape == (2, 2) and g.inputs[0].aval.dtype == np.float32
    assert g.outputs[0].aval.shape == ()
    g.verify()


def test_make_graph_of_jitted_and_with_static_argnums():
    f = ember.jit(lambda x, n: x * n, static_argnums=1)
    g = ember.make_graph(f)(np.ones(2), 4)
    assert len(g.inputs) == 1
    g2 = ember.make_graph(lambda x, n: x * n, static_argnums=(1,))(np.ones(2), 4)
    assert len(g2.inputs) == 1 and _prims(g2) == ["mul"]


# --- backends -------------------------------------------------------------------------------------

def test_default_backend_is_llvm(monkeypatch):
    monkeypatch.delenv("EMBER_BACKEND", raising=False)
    assert ember.default_backend() == "llvm"
    assert {"numpy", "llvm"} <= set(ember.available_backends())
    np.testing.assert_allclose(ember.jit(lambda x: x + 1)(np.ones(2)), [2.0, 2.0])


def test_ember_backend_env_numpy(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "numpy")
    assert ember.default_backend() == "numpy"
    np.testing.assert_allclose(ember.jit(lambda x: x + 1)(np.ones(2)), [2.0, 2.0])


def test_unknown_ember_backend_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "no-such-backend")
    with pytest.raises(ValueError) as e:
        ember.default_backend()
    assert "no-such-backend" in str(e.value) and "numpy" in str(e.value)
    with pytest.raises(ValueError, match="no-such-backend"):
        ember.jit(lambda x: x + 1)(np.ones(2))


def test_unknown_backend_argument_fails_early():
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        ember.jit(lambda x: x, backend="tpu")


def test_lowered_source_shows_the_generated_code():
    f = ember.jit(lambda x: jnp.tanh(x) * 2.0, disable_passes=("fusion",), backend="numpy")
    src = f.lower(np.ones(3, np.float32)).source()
    assert src.startswith("def run(a0):")
    assert "# tanh" in src and "# mul" in src and "test_jit.py" in src


def test_lowered_source_and_asm_of_the_llvm_backend():
    low = ember.jit(lambda x: jnp.tanh(x) * 2.0).lower(np.ones(3, np.float32))
    assert low.backend == "llvm"
    src, asm = low.source(), low.asm()
    assert 'define i32 @"ember_entry"(ptr %"args")' in src and "internal void" in src
    assert "ember_entry" in asm and ("vmul" in asm or "mul" in asm)


def test_lowered_asm_raises_naming_a_backend_without_assembly():
    low = ember.jit(lambda x: x * 2.0, backend="numpy").lower(np.ones(3))
    with pytest.raises(NotImplementedError, match="numpy backend generates no assembly.*source()"):
        low.asm()


class _NativeLike:
    """A numpy executable dressed as a native backend's: LLVM-like source, its suffix, and assembly."""

    source_suffix = ".ll"

    def __init__(self, exe):
        self.exe = exe
        self.source = "; ModuleID = 'fake'\n" + exe.source
        self.asm = "\tvaddps %zmm0, %zmm1, %zmm2\n"

    def __call__(self, *args, out=None):
        return self.exe(*args, out=out)


@pytest.fixture
def native_like(monkeypatch):
    import ember.backends as backends

    class Backend:
        name = "native-like"

        def compile(self, graph, plan=None):
            return _NativeLike(backends.get_backend("numpy").compile(graph, plan))

    monkeypatch.setitem(backends._loaders, "native-like", Backend)
    monkeypatch.setitem(backends._loaded, "native-like", Backend())
    return "native-like"


def test_lowered_asm_and_source_come_from_the_executable(native_like):
    low = ember.jit(lambda x: x * 2.0, backend=native_like).lower(np.ones(3))
    assert low.asm() == "\tvaddps %zmm0, %zmm1, %zmm2\n" and low.source().startswith("; ModuleID")


def test_dump_writes_the_generated_code(tmp_path, native_like):
    def scale(x):
        return x * 2.0

    x = np.ones(3)
    low = ember.jit(scale, backend="numpy").lower(x)
    written = low.dump(str(tmp_path / "np"))
    assert str(tmp_path / "np" / "scale.source.py") in written
    assert (tmp_path / "np" / "scale.source.py").read_text() == low.source()
    native = ember.jit(scale, backend=native_like).lower(x)
    native.dump(str(tmp_path / "native"))
    assert (tmp_path / "native" / "scale.ll").read_text() == native.source()
    assert (tmp_path / "native" / "scale.s").read_text() == native.asm()
    text_only = ember.jit(scale, backend=native_like).lower(x)
    text_only.dump(str(tmp_path / "txt"), formats=["txt"])  # no code: nothing compiled
    assert text_only._executable is None and not list((tmp_path / "txt").glob("scale*"))
    real = ember.jit(scale, backend="llvm").lower(x)
    real.dump(str(tmp_path / "llvm"))
    assert (tmp_path / "llvm" / "scale.ll").read_text() == real.source()
    assert "ember_entry" in (tmp_path / "llvm" / "scale.s").read_text()


def test_ember_dump_dir_writes_the_generated_code(tmp_path, monkeypatch, native_like):
    monkeypatch.setenv("EMBER_DUMP_DIR", str(tmp_path))

    def cube(x):
        return x * x * x

    ember.jit(cube, backend="numpy")(np.ones(2))
    ember.jit(cube, backend=native_like)(np.ones(2))
    assert sorted(p.name for p in tmp_path.glob("*/cube*")) == ["cube.ll", "cube.s", "cube.source.py"]


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_timings_report_trace_optimize_and_compile_apart(backend):
    low = ember.jit(ember.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2)), backend=backend).lower(np.ones(8))
    before = low.timings()
    assert before.trace > 0 and before.optimize > 0 and before.compile is None and "not yet" in str(before)
    low.compile()
    after = low.timings()
    assert (after.trace, after.optimize) == (before.trace, before.optimize) and after.compile > 0
    if backend == "llvm":
        assert 0 < after.native <= after.compile and after.from_cache in (True, False)
        assert ("disk cache load" if after.from_cache else "LLVM") in str(after)
    else:
        assert after.native is None and after.from_cache is None
    assert str(after).startswith("trace ") and "compile " in str(after)
