"""Smoke tests: every workload runs at --quick sizes and the reports have the promised structure.

Structure only (rows, columns, files), never timing numbers."""

import contextlib
import gc
import importlib.util
import io
import json

import numpy as np
import pytest

from benchmarks.__main__ import FULL, main, parse_args, workload_settings
from benchmarks.derived import over_floor
from benchmarks.frameworks import Loop, NumpyHand, RunConfig, Unavailable
from benchmarks.harness import FAILED, Case, Impl, MismatchError, Prepared, Settings, check_close, floor, measure_case
from benchmarks.harness import _timed_sample as timed_sample
from benchmarks.report import COLUMNS, MEMORY_COLUMN
from benchmarks.workloads import WORKLOADS, cosine, dense_bias_act, optimizer


def _run(tmp_path, *extra):
    """(exit status, the JSON plus the stdout and the plot files written, the Markdown)."""
    paths = ["--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"), "--plots", str(tmp_path)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["--quick", "--backend", "numpy", "--budget", "0", "--min-reps", "1", *paths, *extra])
    data = json.loads((tmp_path / "r.json").read_text())
    data["stdout"], data["plots"] = out.getvalue(), sorted(p.name for p in tmp_path.glob("*.png"))
    return rc, data, (tmp_path / "r.md").read_text()


def test_every_workload_quick_numpy_backend(tmp_path):
    """One run of everything (the slowest test: the memory table and optimizer rows are checked on it)."""
    rc, data, md = _run(tmp_path, "--no-peers")
    assert rc == 0
    rows = data["rows"]
    assert {r["workload"] for r in rows} == set(WORKLOADS)
    for name in WORKLOADS:
        mine = [r for r in rows if r["workload"] == name]
        measured = {r["framework"] for r in mine if r["median_s"] is not None}
        floors = {"floor"} if name in ("eam", "per_sample", "dense_bias_act") else set()
        assert measured == ({"ember"} if name == "optimizer" else {"numpy", "ember"} | floors), (name, measured)
        assert all(r["status"].startswith("disabled") for r in mine if r["framework"] in ("jax", "torch"))
        assert all((r["vs_baseline"] is not None) == (name != "optimizer") for r in mine if r["median_s"] is not None)
        assert f"## {name}:" in md
    header = "| " + " | ".join(COLUMNS) + " |"
    memory_header = "| " + " | ".join(COLUMNS[:8] + [MEMORY_COLUMN] + COLUMNS[8:]) + " |"
    optimizer_header = "| " + " | ".join(c for c in COLUMNS if c not in optimizer.HIDE_COLUMNS) + " |"
    assert md.count(header) == len(WORKLOADS) - 3 and md.count(memory_header) == 2  # dense, conv_bias_act
    assert md.count(optimizer_header) == 1
    ember_dense = [r for r in rows if r["workload"] == "dense_bias_act" and r["framework"] == "ember"]
    assert all(r["memory_bytes"] > 0 for r in ember_dense)
    assert md.count("**Memory: ember[numpy]'s plan") == 2
    ember_conv = [r for r in rows if r["workload"] == "conv_bias_act" and r["framework"] == "ember"]
    assert len(ember_conv) == 2 and all(r["memory_bytes"] > 0 for r in ember_conv)
    assert "BLAS kernels (the gemm under Ember's im2col convolution): " in md
    assert {d["workload"] for d in data["derived"]} == {"per_sample", "dead_gradient", "optimizer", "eam",
                                                        "dense_bias_act", "blas_threads"}
    goals = [d for d in data["derived"] if "1.5 x write once" in d["what"]]
    assert goals and all(d["value"] > 0 for d in goals)
    assert any(d["workload"] == "eam" and "np.exp" in d["what"] for d in data["derived"])
    assert any(d["workload"] == "dense_bias_act" and "sgemm" in d["what"] for d in data["derived"])
    assert "BLAS kernels:" in md
    assert data["meta"]["versions"]["ember"] and data["meta"]["machine"]
    assert header in data["stdout"]  # the table also goes to stdout
    if importlib.util.find_spec("matplotlib"):
        assert {"eam.png", "dead_gradient.png", "optimizer.png"} <= set(data["plots"])
    check_dense_memory_table_without_peers(data, md)
    check_optimizer_rows_and_scaling_ratios(data, md)


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


def test_floor_rows_are_timed_but_not_checked_and_derived_over():
    fw = NumpyHand()
    x = np.arange(4.0)
    case = Case("t", "c", [fw.impl(lambda f: lambda v: v * 2, (x,)), floor("exp pass", np.exp, (x,))])
    rows = measure_case(case, Settings(budget_s=0, min_reps=1, measure_memory=False))
    assert all(r.median_s is not None and r.status == "ok" for r in rows)
    assert rows[1].impl == "floor: exp pass" and rows[1].framework == "floor" and rows[1].max_abs_err is None
    (d,) = over_floor("t", rows)
    assert d.impl == rows[0].impl and d.value == rows[0].median_s / rows[1].median_s and "floor: exp pass" in d.what


def test_a_note_from_after_the_first_call():
    calls = []
    prepared = Prepared(lambda: calls.append(1), after_first=lambda: "after a call" if calls else "before")
    case = Case("t", "c", [Impl("one", "numpy", lambda: prepared, baseline=True)])
    (row,) = measure_case(case, Settings(budget_s=0, min_reps=1, measure_memory=False))
    assert row.note == "after a call"


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


def _dense_memory_records(data):
    (table,) = data["tables"]["dense_bias_act"]
    assert not table["errors"]
    return table["records"]


def check_dense_memory_table_without_peers(data, md):
    records = _dense_memory_records(data)
    keys = {(r["function"], r["n"], r["bytes"]) for r in records}
    assert keys == {(f, n, b) for f in ("grad w, x, b", "forward") for n in dense_bias_act.QUICK_SIZES
                    for b in ("intermediates", "outputs + intermediates")}
    for r in records:
        assert r["ember_optimized"] > 0 and r["ember_unoptimized"] > 0 and r["jax"] is None
        assert r["optimized_over_unoptimized"] == pytest.approx(r["ember_optimized"] / r["ember_unoptimized"])
    # the timing table's memory column is the plan's outputs + intermediates of the optimized gradient
    mem = {r["params"]["n"]: r["memory_bytes"] for r in data["rows"]
           if r["workload"] == "dense_bias_act" and r["framework"] == "ember"}
    assert mem == {r["n"]: r["ember_optimized"] for r in records
                   if r["function"] == "grad w, x, b" and r["bytes"] == "outputs + intermediates"}
    assert "optimized / optimize=False" in md and "disabled" in md


def test_dense_memory_table_beside_jax(tmp_path):
    jax = pytest.importorskip("jax")
    rc, data, md = _run(tmp_path, "dense_bias_act", "--no-plots", "--peers", "jax")
    assert rc == 0
    for r in _dense_memory_records(data):
        assert r["jax"] is not None
        want = pytest.approx(r["ember_optimized"] / r["jax"]) if r["jax"] else None
        assert r["optimized_over_jax"] == want
    n = dense_bias_act.QUICK_SIZES[-1]
    args = dense_bias_act.inputs(n)
    m = jax.jit(jax.grad(lambda w, x, b: jax.numpy.sum(jax.numpy.tanh(w @ x + b[:, None]) ** 2),
                         argnums=(0, 1, 2))).lower(*args).compile().memory_analysis()
    temp = next(r["jax"] for r in _dense_memory_records(data)
                if (r["function"], r["n"], r["bytes"]) == ("grad w, x, b", n, "intermediates"))
    assert temp == m.temp_size_in_bytes


def test_memory_table_errors_fail_the_run(tmp_path, monkeypatch):
    def broken(*args):
        raise RuntimeError("no plan")

    monkeypatch.setattr(dense_bias_act, "ember_bytes", broken)
    rc, data, md = _run(tmp_path, "dense_bias_act", "--no-plots", "--no-peers")
    (table,) = data["tables"]["dense_bias_act"]
    assert rc == 1 and len(table["errors"]) == 2 * 2 * len(dense_bias_act.QUICK_SIZES)
    assert "RuntimeError: no plan" in table["errors"][0] and "FAILED" in md


def check_optimizer_rows_and_scaling_ratios(data, md):
    rows = [r for r in data["rows"] if r["workload"] == "optimizer"]
    sizes = [b * optimizer.QUICK_SHAPE["R"] * optimizer.QUICK_SHAPE["N"] for b in optimizer.QUICK_BATCHES]
    assert {(r["impl"], r["params"]["updates"]) for r in rows} == {
        (f"ember[numpy] {p}", u) for p in optimizer.PHASES for u in sizes}
    assert all(r["median_s"] > 0 and r["x"] == r["params"]["updates"] for r in rows)
    traced = {r["params"]["updates"]: r["note"] for r in rows if r["impl"].endswith("trace")}
    assert all("nodes traced" in note for note in traced.values())
    assert all("after inline" in r["note"] for r in rows if r["impl"].endswith("optimize"))
    ratios = {d["what"]: d["value"] for d in data["derived"] if d["workload"] == "optimizer"}
    assert set(ratios) == {f"{p}: t({u:,} updates) / t({u // 2:,})" for p in optimizer.PHASES for u in sizes[1:]}
    by = {(r["impl"], r["params"]["updates"]): r["median_s"] for r in rows}
    u = sizes[-1]
    assert ratios[f"optimize: t({u:,} updates) / t({u // 2:,})"] == pytest.approx(
        by["ember[numpy] optimize", u] / by["ember[numpy] optimize", u // 2])
    assert "naive-loop cosine gradient, 32 updates" in md


def test_optimizer_compile_is_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(optimizer, "QUICK_BATCHES", (1,))
    monkeypatch.setattr(cosine, "numpy_grad", lambda a, b, w: (np.zeros_like(a), np.zeros_like(b)))
    rc, data, md = _run(tmp_path, "optimizer", "--no-peers", "--no-plots")
    assert rc == 1
    failed = [r for r in data["rows"] if r["status"].startswith(FAILED)]
    assert failed and all(r["impl"].endswith("compile") and "exceeds" in r["status"] for r in failed)


def test_keep_gc_times_with_the_collector_running():
    seen = []
    timed_sample(lambda: seen.append(gc.isenabled()), 2)
    timed_sample(lambda: seen.append(gc.isenabled()), 2, keep_gc=True)
    assert seen == [False, False, True, True] and gc.isenabled()


def test_uncalibrated_implementations_are_estimated_by_their_first_call():
    calls = []
    case = Case("t", "c", [Impl("warm", "ember", lambda: Prepared(lambda: calls.append(1), calibrate=False))])
    (row,) = measure_case(case, Settings(budget_s=0, min_reps=2, max_reps=2, sample_s=0, measure_memory=False))
    assert row.reps == 2 and row.number == 1 and len(calls) == 1 + 2


def test_workload_settings_apply_to_full_runs_unless_the_command_line_says():
    own = workload_settings(FULL, optimizer, parse_args([]))
    assert own.min_reps == optimizer.SETTINGS["min_reps"] != FULL.min_reps
    assert workload_settings(FULL, optimizer, parse_args(["--min-reps", "7"])).min_reps == FULL.min_reps
    assert workload_settings(FULL, optimizer, parse_args(["--quick"])) == FULL
    assert workload_settings(FULL, cosine, parse_args([])) == FULL
