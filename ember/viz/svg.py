"""SVG through Graphviz's `dot` program, when it is installed."""

from __future__ import annotations

import shutil
import subprocess

INSTALL_HINT = ("Graphviz's `dot` program is not on the PATH, so SVG cannot be rendered; install it with "
                "`apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS) or "
                "`conda install graphviz`. Text and DOT dumps work without it.")


class GraphvizNotFoundError(RuntimeError):
    """Raised when SVG is requested but `dot` is not installed."""


def dot_available() -> bool:
    return shutil.which("dot") is not None


def render_svg(dot_text: str, timeout: float = 60.0) -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizNotFoundError(INSTALL_HINT)
    proc = subprocess.run([exe, "-Tsvg"], input=dot_text.encode(), capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"dot failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode()
