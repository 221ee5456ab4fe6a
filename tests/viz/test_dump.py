"""ember.dump, Lowered.dump and EMBER_DUMP_DIR: one text, DOT and SVG file per stage, the user's
lines, autodiff roles, and what happens without Graphviz."""

from __future__ import annotations

import os
import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.viz import GraphvizNotFoundError

HERE = "test_dump.py"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")

C = np.linspace(0.0, 1.0, 4)


def model(x):
    return jnp.sum(jnp.tanh(x) * jnp.exp(C))


def _stage_files(path) -> dict[str, list[str]]:
    """{'00_traced': ['dot', 'svg', 'txt'], ...}"""
    out: dict[str, list[str]] = {}
    for name in sorted(os.listdir(path)):
        if name == "stages.txt" or not name[:2].isdigit():  # the index, the generated code
            continue
        base, ext = name.rsplit(".", 1)
        out.setdefault(base, []).append(ext)
    return out


def _read(path, name) -> str:
    with open(os.path.join(path, name)) as f:
        return f.read()


def test_dump_writes_every_stage(tmp_path):
    x = np.ones(4)
    written = ember.dump(model, x, path=str(tmp_path))
    lowered = ember.jit(model).lower(x)
    files = _stage_files(tmp_path)
    assert len(files) == len(lowered.stage_names)
    for i, stage in enumerate(lowered.stage_names):
        base = f"{i:02d}_{re.sub(r'[^a-z0-9]+', '_', stage.lower()).strip('_')}"
        want = ["dot", "svg", "txt"] if shutil.which("dot") else ["dot", "txt"]
        assert sorted(files[base]) == want, base
    index = _read(tmp_path, "stages.txt").splitlines()
    assert [line.split(":")[0] for line in index] == [f"{i:02d} {s}" for i, s in enumerate(lowered.stage_names)]
    assert all(os.path.exists(p) for p in written)
    assert os.path.join(str(tmp_path), "stages.txt") in written
    assert os.path.join(str(tmp_path), "model.ll") in written  # the llvm backend's code and assembly
    assert os.path.join(str(tmp_path), "model.s") in written


def test_dump_text_shows_ops_types_and_user_lines(tmp_path):
    x = np.ones(4, np.float32)
    ember.dump(model, x, path=str(tmp_path))
    text = _read(tmp_path, "00_traced.txt")
    assert text.startswith("# stage: traced")
    assert "tanh" in text and "exp" in text and "reduce_sum" in text
    assert "b:f32[4]" in text and "a:f64[4]" in text and "f64[] = reduce_sum" in text  # f32 * f64 const -> f64
    line = model.__code__.co_firstlineno + 1
    assert f"{HERE}:{line}" in text


@needs_dot
def test_svg_is_valid_xml_with_op_names(tmp_path):
    ember.dump(model, np.ones(4), path=str(tmp_path))
    svg = _read(tmp_path, "00_traced.svg")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    for op in ("tanh", "exp", "reduce_sum"):
        assert op in texts
    assert HERE in texts


def test_dot_is_parseable_shape(tmp_path):
    ember.dump(model, np.ones(4), path=str(tmp_path), formats=["dot"])
    dot = _read(tmp_path, "00_traced.dot")
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    assert "tanh" in dot and f"{HERE}:" in dot
    assert not any(n.endswith((".svg", ".txt")) for n in os.listdir(tmp_path) if n != "stages.txt")


def test_dump_of_selected_stages(tmp_path):
    ember.dump(model, np.ones(4), path=str(tmp_path), stages=["traced"], formats=["txt"])
    assert sorted(os.listdir(tmp_path)) == ["00_traced.txt", "stages.txt"]


def test_lowered_dump(tmp_path):
    low = ember.jit(model).lower(np.ones(4))
    written = low.dump(str(tmp_path), formats=["txt"])
    assert len(written) == len(low.stage_names) + 1


def test_dump_of_grad_has_autodiff_stages_and_roles(tmp_path):
    ember.dump(ember.grad(model), np.ones(4), path=str(tmp_path))
    index = _read(tmp_path, "stages.txt")
    assert "before autodiff" in index and "after autodiff" in index
    names = os.listdir(tmp_path)
    after = next(n for n in names if n.endswith("_after_autodiff.dot"))
    dot = _read(tmp_path, after)
    assert "legend" in dot
    for role in ("active", "inactive", "backward"):
        assert f"[{role}]" in dot  # a node labelled with the role
        assert f'label="{role}"' in dot  # and the legend entry
    # exp(C) depends only on the closed-over constant: inactive, and grey
    exp_line = next(line for line in dot.splitlines() if 'label="exp' in line)
    assert "[inactive]" in exp_line and "#eeeeee" in exp_line
    tanh_line = next(line for line in dot.splitlines() if 'label="tanh' in line)
    assert "[active]" in tanh_line
    text = _read(tmp_path, after.replace(".dot", ".txt"))
    assert re.search(r"exp .*# .*inactive", text) and "backward" in text


def test_dot_and_text_use_the_same_names(tmp_path):
    """Consts are named before inputs in both renderings, so a name means the same value in each."""
    ember.dump(model, np.ones(4), path=str(tmp_path), formats=["txt", "dot"])
    text, dot = _read(tmp_path, "00_traced.txt"), _read(tmp_path, "00_traced.dot")
    const_name = re.search(r"lambda (\w+):f64\[4\] ;", text).group(1)
    input_name = re.search(r"; (\w+):f64\[4\] \.", text).group(1)
    assert re.search(rf'const0 \[.*label="{const_name}:f64\[4\]', dot)
    assert re.search(rf'in0 \[.*label="{input_name}:f64\[4\]', dot)


def test_dump_of_vmap_has_vmap_stages(tmp_path):
    ember.dump(ember.vmap(model), np.ones((3, 4)), path=str(tmp_path), formats=["txt"])
    index = _read(tmp_path, "stages.txt")
    assert "before vmap" in index and "after vmap" in index
    after = next(n for n in os.listdir(tmp_path) if n.endswith("_after_vmap.txt"))
    assert "f64[3,4]" in _read(tmp_path, after)


def test_ember_dump_dir_writes_every_new_compilation(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_DIR", str(tmp_path))

    def scaled(x):
        return x * 3.0

    f = ember.jit(scaled)
    f(np.ones(2))
    f(np.ones(2))  # cached: nothing new
    f(np.ones(5))  # a new signature: a second dump
    dirs = sorted(os.listdir(tmp_path))
    assert dirs == ["scaled_1", "scaled_2"]
    for d in dirs:
        files = os.listdir(tmp_path / d)
        assert "stages.txt" in files and "00_traced.txt" in files and "00_traced.dot" in files
    assert "f64[5]" in _read(tmp_path / "scaled_2", "00_traced.txt")
    ember.grad(lambda x: jnp.sum(x**2))(np.ones(2))  # transforms compile through jit too
    assert any(d.startswith("grad") for d in os.listdir(tmp_path))


def test_ember_dump_dir_keeps_functions_with_the_same_name_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_DIR", str(tmp_path))
    ember.jit(lambda x: x + 1)(np.ones(2))
    ember.jit(lambda x: x * 7)(np.ones(2))
    dirs = sorted(os.listdir(tmp_path))
    assert len(dirs) == 2 and all(d.startswith("_lambda__1") for d in dirs)
    texts = [_read(tmp_path / d, "00_traced.txt") for d in dirs]
    assert any("add" in t for t in texts) and any("mul" in t for t in texts)


def test_no_dump_without_env(tmp_path, monkeypatch):
    monkeypatch.delenv("EMBER_DUMP_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    ember.jit(lambda x: x + 1)(np.ones(2))
    assert os.listdir(tmp_path) == []


def _without_dot(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert shutil.which("dot") is None


def test_svg_without_graphviz_raises(tmp_path, monkeypatch):
    _without_dot(monkeypatch, tmp_path)
    with pytest.raises(GraphvizNotFoundError) as e:
        ember.dump(model, np.ones(4), path=str(tmp_path / "out"), formats=["svg"])
    assert "apt-get install graphviz" in str(e.value)


def test_default_formats_without_graphviz_warn_and_write_text_and_dot(tmp_path, monkeypatch):
    _without_dot(monkeypatch, tmp_path)
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match="apt-get install graphviz"):
        written = ember.dump(model, np.ones(4), path=str(out))
    exts = {os.path.splitext(p)[1] for p in written}
    assert exts == {".txt", ".dot", ".ll", ".s"}  # .ll, .s: the llvm backend's code and assembly
    assert not any(n.endswith(".svg") for n in os.listdir(out))


def test_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="unknown dump formats"):
        ember.dump(model, np.ones(4), path=str(tmp_path), formats=["png"])
