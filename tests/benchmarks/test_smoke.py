"""Smoke tests: every workload runs at --quick sizes and the reports have the promised structure.

Structure only (rows, columns, files), never timing numbers."""

import importlib.util
import json

import numpy as np
import pytest

from benchmarks.__main__ import main
from benchmarks.frameworks import Loop, NumpyHand, RunConfig, Unavailable
from benchmarks.harness import FAILED, Case, MismatchError, Settings, check_close, measure_case
from benchmarks.report import COLUMNS, MEMORY_COLUMN
from benchmarks.workloads import WORKLOADS


def _run(tmp_path, *extra):
    paths = ["--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"), "--plots", str(tmp_path)]
    rc = main(["--quick", "--backend", "numpy", "--budget", "0", "--min-reps", "1", *paths, *extra])
    return rc, json.loads((tmp_path / "r.json").read_text()), (tmp_path / "r.md").read_text()


def test_every_workload_quick_numpy_backend(tmp_path, capsys):
    rc, data, md = _run(tmp_path, "--no-peers")
    assert rc == 0
    rows = data["rows"]
    assert {r["workload"] for r in rows} == set(WORKLOADS)
    for name in WORKLOADS:
        mine = [r for r in rows if r["workload"] == name]
        measured = {r["framework"] for r in mine if r["median_s"] is not None}
        assert measured == {"numpy", "ember"}, (name, measured)
        assert all(r["status"].startswith("disabled") for r in mine if r["framework"] in ("jax", "torch"))
        assert all(r["vs_baseline"] is not None for r in mine if r["median_s"] is not None)
        assert f"## {name}:" in md
    header = "| " + " | ".join(COLUMNS) + " |"
    memory_header = "| " + " | ".join(COLUMNS[:8] + [MEMORY_COLUMN] + COLUMNS[8:]) + " |"
    assert md.count(header) == len(WORKLOADS) - 1 and md.count(memory_header) == 1
    assert "n/a (memory plan not yet implemented)" in md
    assert {d["workload"] for d in data["derived"]} == {"per_sample", "dead_gradient"}
    assert data["meta"]["versions"]["ember"] and data["meta"]["machine"]
    assert header in capsys.readouterr().out  # the table also goes to stdout
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "eam.png").exists() and (tmp_path / "dead_gradient.png").exists()


@pytest.mark.parametrize("module, impls", [("jax", ("jax.jit",)), ("torch", ("torch eager", "torch.func"))])
def test_peers_when_installed(tmp_path, module, impls):
    pytest.importorskip(module)
    rc, data, md = _run(tmp_path, "dispatch", "eam", "--no-plots", "--peers", module)
    assert rc == 0
    measured = {(r["workload"], r["impl"]) for r in data["rows"] if r["median_s"] is not None}
    for impl in impls:
        assert ("dispatch", impl) in measured and ("eam", impl) in measured
    if module == "jax":
        assert all(r["vs_jax"] is not None for r in data["rows"] if r["median_s"] is not None)


def test_mismatch_fails_loudly_and_absent_peers_are_reported():
    fw = NumpyHand()
    absent = Unavailable(NumpyHand, "jax", "absent: not installed")
    x = np.arange(4.0)
    case = Case("t", "c", [fw.impl(lambda f: lambda v: v * 2, (x,)),
                           fw.impl(lambda f: lambda v: v * 2 + 1e-3, (x,), suffix=" wrong", baseline=False),
                           absent.impl(None, (x,))])
    rows = measure_case(case, Settings(budget_s=0, min_reps=1, measure_memory=False))
    assert rows[0].median_s is not None and rows[0].vs_baseline == 1.0
    assert rows[1].status.startswith(FAILED) and rows[1].median_s is None
    assert rows[2].status == "absent: not installed"


def test_slow_loops_are_timed_on_a_subset():
    fw = NumpyHand()
    xs = np.ones((64, 3))
    case = Case("t", "loop", [fw.impl(lambda f: lambda v: v.sum(), (xs,), loop=Loop(0, subset=8))])
    (row,) = measure_case(case, Settings(budget_s=0, min_reps=1, slow_call_s=0.0, measure_memory=False))
    assert row.median_s is not None and "8 of 64" in row.note


def test_check_close():
    check_close((np.ones(3, np.float32),), [np.ones(3, np.float32)])
    with pytest.raises(MismatchError, match="dtype"):
        check_close(np.ones(3), np.ones(3, np.float32))
    with pytest.raises(MismatchError, match="shape"):
        check_close(np.ones(3), np.ones(4))
    with pytest.raises(MismatchError, match="exceeds"):
        check_close(np.ones(3) * 1.001, np.ones(3))


def test_config_selection():
    cfg = RunConfig(True, [NumpyHand(), Unavailable(NumpyHand, "torch", "disabled")])
    assert cfg.baseline.kind == "numpy" and cfg.peers_and_ember(vmap=True) == []
