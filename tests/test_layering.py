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
LAYERS = {"tree": 0, "errors": 0, "config": 0, "tracer": 1, "numpy": 2, "lax": 2, "scipy": 2, "passes": 2,
          "backends": 3, "viz": 3, "api": 4, "nn": 5}
TOP = 6  # ember/__init__.py, ember.demo, ember.cache and anything importing `ember` itself
TOP_MODULES = {"ember", "ember.demo", "ember.cache"}  # ember.cache: a command
NAMES = {0: "tree/errors/config", 1: "tracer", 2: "numpy/passes", 3: "backends/viz", 4: "api", 5: "nn",
         6: "ember (top)"}
PUBLIC_FOR_NN = ("ember.numpy", "ember.scipy", "ember.api", "ember.tree", "ember.errors")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, module) for every ember module `path` imports, at any depth of the file."""
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            for alias in node.names:  # `from ember import numpy` imports the module ember.numpy
                sub = f"{base}.{alias.name}"
                is_module = any((root.parent / (sub.replace(".", "/") + ext)).exists() for ext in ("", ".py"))
                found.append((node.lineno, sub if is_module else base))
    return [(line, m) for line, m in found if m == "ember" or m.startswith("ember.")]


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


def test_nn_uses_the_public_api_only():
    bad = [f"line {line}: {m}" for line, m in imported_modules(ROOT / "nn.py")
           if not m.startswith(PUBLIC_FOR_NN) or any(p.startswith("_") for p in m.split("."))]
    assert not bad, f"ember.nn imports beyond the public API ({', '.join(PUBLIC_FOR_NN)}): {bad}"


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
    assert out.flags.writeable and out is not x and not np.shares_memory(out, x)
    out[...] = -1
    assert (x == np.arange(6.0).reshape(2, 3)).all()
