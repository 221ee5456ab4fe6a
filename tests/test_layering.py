"""The layering DESIGN.md states, checked on the source: `tree`, `errors` -> `tracer` -> `numpy`,
`passes` -> `backends`, `viz` -> `api` -> `nn`. A module imports only from its own layer or below,
at top level or inside a function; `ember/__init__` and `ember.demo` are the top. `nn` is written
against the public API only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "ember"
# config (runtime options, imports nothing of ember) sits with tree and errors at the bottom.
LAYERS = {"tree": 0, "tree_util": 0, "errors": 0, "config": 0, "naming": 0, "tracer": 1, "numpy": 2, "lax": 2,
          "scipy": 4, "passes": 2, "backends": 3, "viz": 3, "api": 4, "ad_checkpoint": 4, "random": 4, "nn": 5}
TOP = 6  # ember/__init__.py, ember.demo, ember.cache and anything importing `ember` itself
TOP_MODULES = {"ember", "ember.demo", "ember.cache", "ember.dask"}  # ember.cache: a command; ember.dask: imports Dask
LAYERS["jax_names"] = 0  # JAX's recorded public names, read by errors.missing_attribute: at the bottom too
NAMES = {0: "tree/errors/config", 1: "tracer", 2: "numpy/passes", 3: "backends/viz", 4: "api", 5: "nn",
         6: "ember (top)"}
PUBLIC_FOR_NN = ("ember.numpy", "ember.scipy", "ember.api", "ember.tree", "ember.errors", "ember.lax",
                 "ember.random")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def imports(path: Path, root: Path = ROOT) -> list[tuple[int, str, str | None]]:
    """(line, module, name) for every ember import of `path`, at any depth of the file: `name` is the
    attribute a `from module import name` takes, None where a module itself is imported."""
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            for alias in node.names:  # `from ember import numpy` imports the module ember.numpy
                sub = f"{base}.{alias.name}"
                is_module = any((root.parent / (sub.replace(".", "/") + ext)).exists() for ext in ("", ".py"))
                found.append((node.lineno, sub, None) if is_module else (node.lineno, base, alias.name))
    return [(line, m, name) for line, m, name in found if m == "ember" or m.startswith("ember.")]


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, module) for every ember module `path` imports, at any depth of the file."""
    return [(line, m) for line, m, _ in imports(path, root)]


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def private_owner(module: str, name: str | None, root: Path = ROOT) -> str | None:
    """The package that what an import takes is private to, None when it is public: a private module
    `a.b._c` (and all under it) belongs to `a.b`; a private name of module `a.b.m` to `a.b` (of a
    package `a.b`'s `__init__`, to `a.b`)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            return ".".join(parts[:i])
    if name is not None and _private(name):
        is_package = (root.parent / module.replace(".", "/") / "__init__.py").exists()
        return module if is_package else module.rpartition(".")[0]
    return None


def private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """The imports of `path` that take a private module or name of another package."""
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    bad = []
    for line, module, name in imports(path, root):
        owner = private_owner(module, name, root)
        if owner is not None and package != owner and not package.startswith(owner + "."):
            bad.append(f"line {line}: {module}{'' if name is None else '.' + name} (private to {owner})")
    return bad


SOURCES = sorted(ROOT.rglob("*.py"))


def test_the_source_tree_is_found():
    assert len(SOURCES) > 30 and module_name(ROOT / "tracer" / "ir.py") == "ember.tracer.ir"
    assert layer("ember.tracer.prims.custom") == 1 and layer("ember") == TOP and layer("ember.demo") == TOP


def test_every_module_has_a_layer():
    """A new top-level module must be placed in LAYERS (and DESIGN.md), not silently become the top."""
    unplaced = sorted({".".join(module_name(p).split(".")[:2]) for p in SOURCES} - TOP_MODULES
                      - {f"ember.{name}" for name in LAYERS})
    assert not unplaced, f"modules with no layer: {unplaced}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: module_name(p))
def test_module_imports_only_its_layer_or_below(path):
    me = layer(module_name(path))
    bad = [f"line {line}: {m} ({NAMES[layer(m)]})" for line, m in imported_modules(path) if layer(m) > me]
    assert not bad, f"{module_name(path)} ({NAMES[me]}) imports a higher layer: {bad}"


@pytest.mark.parametrize("path", sorted((ROOT / "nn").rglob("*.py")), ids=lambda p: module_name(p))
def test_nn_uses_the_public_api_only(path):
    """Every module of the ember.nn package imports the public API, or its own package's modules."""
    bad = [f"line {line}: {m}" for line, m in imported_modules(path) if not m.startswith("ember.nn")
           and (not m.startswith(PUBLIC_FOR_NN) or any(p.startswith("_") for p in m.split(".")))]
    assert not bad, f"{module_name(path)} imports beyond the public API ({', '.join(PUBLIC_FOR_NN)}): {bad}"


def test_the_checker_sees_lazy_relative_and_from_package_imports(tmp_path):
    root = tmp_path / "ember"
    (root / "tracer").mkdir(parents=True)
    (root / "passes").mkdir()
    (root / "passes" / "vmap.py").write_text("")
    (root / "tracer" / "ir.py").write_text("")
    probe = root / "tracer" / "probe.py"
    probe.write_text("import numpy\ndef f():\n    import ember.api.jit\n    from ..passes import vmap\n"
                     "    from . import ir\n    from ember import jit\n")
    assert imported_modules(probe, root) == [(3, "ember.api.jit"), (4, "ember.passes.vmap"), (5, "ember.tracer.ir"),
                                             (6, "ember")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: module_name(p))
def test_module_imports_nothing_private_of_another_package(path):
    """A private module (`_core`, `_util`) or name (`_state`) is its package's own: what another package
    needs is made public in its module."""
    bad = private_imports(path)
    assert not bad, f"{module_name(path)} imports private parts of other packages: {bad}"


def test_the_private_import_checker_sees_modules_names_and_packages(tmp_path):
    root = tmp_path / "ember"
    (root / "numpy").mkdir(parents=True)
    (root / "api").mkdir()
    (root / "numpy" / "__init__.py").write_text("")
    for name in ("_core.py", "util.py", "_shape.py"):
        (root / "numpy" / name).write_text("")
    (root / "api" / "trace.py").write_text("")
    probe = root / "api" / "probe.py"
    probe.write_text("from ember.numpy._core import plain\nfrom ember.numpy import util, _core\n"
                     "from ember.numpy.util import _hidden, shown as _alias\nimport ember.numpy._shape\n"
                     "from ember.numpy import _name\nfrom .trace import _state\nfrom ember.numpy import __version__\n")
    assert private_imports(probe, root) == [
        "line 1: ember.numpy._core.plain (private to ember.numpy)",
        "line 2: ember.numpy._core (private to ember.numpy)",
        "line 3: ember.numpy.util._hidden (private to ember.numpy)",
        "line 4: ember.numpy._shape (private to ember.numpy)",
        "line 5: ember.numpy._name (private to ember.numpy)"]
    inside = root / "numpy" / "util.py"
    inside.write_text("from ember.numpy._core import plain\nfrom ._shape import _helper\n")
    assert private_imports(inside, root) == []


# The packages above the tracer and ember.numpy: no module of them may import, at any depth of the file
# (lazily or for type checking too), a module that imports it back. A module reading its own package
# (a registry in its __init__) is no edge: importing the module has imported its package already.
ACYCLIC = ("ember.passes", "ember.backends", "ember.viz", "ember.api")


def test_no_import_circles_among_passes_backends_viz_and_api():
    graph = {me: {m for _, m in imported_modules(p) if not me.startswith(m + ".")} for p in SOURCES
             if (me := module_name(p)).startswith(ACYCLIC)}
    circles = []

    def walk(m, path):
        for d in sorted(graph.get(m, ())):
            if d in path:
                circles.append(path[path.index(d):] + [d])
            elif d in graph and d not in done:
                walk(d, path + [d])
        done.add(m)

    done: set[str] = set()
    for m in sorted(graph):
        if m not in done:
            walk(m, [m])
    assert not circles, f"import circles: {[' -> '.join(c) for c in circles]}"


def test_recording_refusals_reaches_no_renderer():
    """passes/explain.py records; rendering the report is viz's: nothing the recorder or the stages that
    keep refusals import, at any depth, is viz, the memory report or the api."""
    imported = {module_name(p): {m for _, m in imported_modules(p)} for p in SOURCES}
    reached, todo = set(), ["ember.passes.explain", "ember.passes.stages"]
    while todo:
        m = todo.pop()
        if m not in reached:
            reached.add(m)
            todo += imported.get(m, ())
    assert not sorted(m for m in reached if m.startswith(("ember.viz", "ember.api")) or "memory_report" in m)


# --- the seams that keep the layers apart ---------------------------------------------------------

def test_numpy_registers_its_dispatch_into_the_tracer():
    import numpy as np

    import ember
    import ember.numpy as jnp
    from ember.tracer.trace import numpy_dispatch

    assert numpy_dispatch["numpy"] is jnp and numpy_dispatch["numpy.linalg"] is jnp.linalg
    out = ember.jit(lambda x: (np.exp(x), np.absolute(x), np.linalg.norm(x)))(np.arange(3.0))
    np.testing.assert_allclose(out[0], np.exp(np.arange(3.0)), rtol=1e-6)
    np.testing.assert_allclose(out[2], np.linalg.norm(np.arange(3.0)), rtol=1e-6)


def test_transform_rules_of_prims_are_registered_by_the_transform():
    from ember.passes import vmap
    from ember.tracer import prims as P
    from ember.tracer.primitive import batch_rules

    assert batch_rules[P.custom_vjp_call_p].__module__ == vmap.__name__


def test_lazy_cotangents_share_an_explicit_base():
    from ember.tracer.primitive import LazyCotangent
    from ember.tracer.prims.indexing import ScatterCotangent
    from ember.tracer.prims.layout import SliceCotangent

    assert issubclass(ScatterCotangent, LazyCotangent) and issubclass(SliceCotangent, LazyCotangent)


@pytest.mark.parametrize("fn", ["reshape", "transpose", "broadcast_in_dim", "slice", "rev", "stop_gradient"])
def test_eager_results_own_their_data(fn):
    """Without a trace a primitive runs its numpy reference; a view (or the operand itself) is
    copied, so writing the result never changes the caller's array."""
    import numpy as np

    from ember.tracer import prims as P

    x = np.arange(6.0).reshape(2, 3)
    calls = {"reshape": lambda: P.reshape(x, (3, 2)), "transpose": lambda: P.transpose(x, (1, 0)),
             "broadcast_in_dim": lambda: P.broadcast_in_dim(x, (4, 2, 3), (1, 2)),
             "slice": lambda: P.slice(x, (0, 1), (2, 3)), "rev": lambda: P.rev(x, (0,)),
             "stop_gradient": lambda: P.stop_gradient(x)}
    out = calls[fn]()
    assert out is not x and not np.shares_memory(out, x)
    np.asarray(out)[...] = -1  # through NumPy: the Array itself refuses writes
    assert (x == np.arange(6.0).reshape(2, 3)).all()
