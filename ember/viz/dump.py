"""Write recorded stages to a directory: NN_<stage>.txt, .dot and .svg (SVG when `dot` exists), and
the code a backend generated for the compiled function (format "code")."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence

from ember.passes.stages import Stage
from ember.viz.dot import graph_to_dot
from ember.viz.svg import INSTALL_HINT, dot_available, render_svg
from ember.viz.text import stage_text

FORMATS = ("txt", "dot", "svg", "code")
DEFAULT_SOURCE_SUFFIX = ".source.txt"  # for an executable that does not say what language its source is


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").lower()


def write_stages(stages: Sequence[Stage], path: str, formats: Sequence[str] | None = None,
                 name: str = "graph") -> list[str]:
    """Write every stage in `formats` (default: txt, dot, and svg when Graphviz is installed; "code" is
    written by `write_code`, not here).

    Asking for "svg" explicitly without Graphviz raises GraphvizNotFoundError; by default it is skipped
    with a warning that says how to install it.
    """
    explicit = formats is not None
    formats = tuple(formats) if explicit else FORMATS
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown dump formats {bad}; choose from {FORMATS}")
    want_svg = "svg" in formats
    if want_svg and not dot_available():
        if explicit:
            render_svg("")  # raises GraphvizNotFoundError with the install hint
        warnings.warn(INSTALL_HINT, stacklevel=3)
        want_svg = False
    os.makedirs(path, exist_ok=True)
    written = []
    index = []
    for i, stage in enumerate(stages):
        base = os.path.join(path, f"{i:02d}_{_slug(stage.name)}")
        index.append(f"{i:02d} {stage.name}: {len(stage.graph.nodes)} nodes")
        if "txt" in formats:
            written.append(_write(base + ".txt", stage_text(stage)))
        if "dot" in formats or want_svg:
            dot = graph_to_dot(stage.graph, f"{name}: {stage.name}", stage.notes, stage.plan)
            if "dot" in formats:
                written.append(_write(base + ".dot", dot))
            if want_svg:
                written.append(_write(base + ".svg", render_svg(dot)))
    written.append(_write(os.path.join(path, "stages.txt"), "\n".join(index) + "\n"))
    return written


def _write(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return path


def wants_code(formats: Sequence[str] | None) -> bool:
    """Whether a dump in `formats` (None: the default ones) includes the generated code."""
    return formats is None or "code" in formats


def write_code(executable, path: str, name: str = "graph") -> list[str]:
    """Write what `executable` exposes of its generated code: `source` as <name><source_suffix>
    (.source.py for the numpy backend, .ll for LLVM IR) and `asm` (assembly) as <name>.s."""
    os.makedirs(path, exist_ok=True)
    base = os.path.join(path, re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "graph")
    written = []
    source = getattr(executable, "source", None)
    if source is not None:
        written.append(_write(base + getattr(executable, "source_suffix", DEFAULT_SOURCE_SUFFIX), source))
    asm = getattr(executable, "asm", None)
    if callable(asm):
        asm = asm()
    if asm is not None:
        written.append(_write(base + ".s", asm))
    return written
