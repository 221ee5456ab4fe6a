"""The README's examples run as written and print what the README shows: every ```python block runs in
a new process (a fresh disk cache, a temporary directory), statement by statement; a statement whose
comment reads `# -> text` must print that text, and an unlabelled ``` block right after a python block
is that block's whole output. Timings and line numbers are masked; nothing else is. A block that imports
CuPy (the GPU section) runs where a GPU is (gpu-marked: EMBER_REQUIRE_GPU=1 turns its skip into a failure)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")

RUNNER = r"""
import ast, contextlib, io, json, sys
path = sys.argv[1]
tree = ast.parse(open(path).read())
scope = {"__name__": "__main__"}
printed = []
for stmt in tree.body:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(ast.Module([stmt], []), path, "exec"), scope)
    printed.append({"first": stmt.lineno, "last": stmt.end_lineno, "out": out.getvalue()})
print(json.dumps(printed))
"""


def _blocks() -> list[tuple[int, str, str | None]]:
    """(line in README, python source, the output block right after it or None) for each python block."""
    lines = open(README).read().splitlines()
    found, k = [], 0
    while k < len(lines):
        if lines[k].strip() == "```python":
            end = lines.index("```", k + 1)
            source = "\n".join(lines[k + 1:end]) + "\n"
            output = None
            if end + 1 < len(lines) and lines[end + 1].strip() == "```":
                close = lines.index("```", end + 2)
                output = "\n".join(lines[end + 2:close]) + "\n"
                end = close
            found.append((k + 1, source, output))
            k = end
        k += 1
    return found


def _masked(text: str) -> str:
    """Timings and source line numbers masked, trailing spaces dropped."""
    text = re.sub(r"\d+(\.\d+)? (ms|µs|us|s)\b", "<time>", text)
    text = re.sub(r"(\w+\.py):\d+(,\d+)*", r"\1:<line>", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _run(source: str, name: str, tmp_path) -> list[dict]:
    path = tmp_path / name
    path.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("EMBER_BACKEND", "EMBER_CHECK_ORACLE")}
    env.update(PYTHONPATH=ROOT, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", RUNNER, str(path)], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=600)
    assert out.returncode == 0, f"README block {name} failed:\n{out.stderr[-3000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


BLOCKS = _blocks()


def test_the_readme_has_examples():
    assert len(BLOCKS) >= 2 and any(output for _, _, output in BLOCKS)
    assert sum(src.count("# -> ") for _, src, _ in BLOCKS) >= 2


@pytest.mark.parametrize("line, source, output", [
    pytest.param(*b, id=f"README.md:{b[0]}", marks=[pytest.mark.gpu] if "import cupy" in b[1] else [])
    for b in BLOCKS])
def test_readme_block_prints_what_the_readme_shows(tmp_path, line, source, output):
    name = "dense.py" if output and "dense.py:" in output else f"readme_{line}.py"
    printed = _run(source, name, tmp_path)
    lines = source.splitlines()
    checked = 0
    for stmt in printed:
        shown = re.search(r"# -> (.*)$", lines[stmt["last"] - 1])
        if shown:
            assert _masked(stmt["out"]) == _masked(shown.group(1)), \
                f"README.md:{line + stmt['last']}: prints {stmt['out'].strip()!r}, the README shows {shown.group(1)!r}"
            checked += 1
    assert checked == source.count("# -> ")
    if output is not None:
        assert _masked("".join(s["out"] for s in printed)) == _masked(output), \
            f"the output block after README.md:{line} differs from what the block prints"
