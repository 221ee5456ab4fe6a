"""The GPU benchmarks without a GPU: the command line's routing, the no-GPU message, every workload's
Ember function against its hand-written twin (run with NumPy as `xp`) through the cuda-host backend
(one g++ build for all of them), the twins against the CPU workloads' tested NumPy baselines, and the
whole run, table and JSON on NumPy arrays with a CPU backend."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import gpu
from benchmarks.__main__ import RESULTS_DIR, gpu_paths, is_gpu_run, main, parse_args
from benchmarks.workloads import cosine, dense_bias_act, eam, per_sample
from ember.backends.cuda import runtime
from ember.backends.cuda.backend import compile_many
from ember.tree import tree_leaves

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALL = gpu.WORKLOADS + gpu.KERNELS
TINY = gpu.Settings(budget_s=0.0, sample_s=0.0, min_reps=1, max_reps=1)


def test_backend_cuda_routes_to_the_gpu_run():
    args = parse_args(["--backend", "cuda", "eam", "bandwidth", "dispatch"])
    assert is_gpu_run(args) and args.workloads == ["eam", "bandwidth", "dispatch"]
    assert not is_gpu_run(parse_args(["--backend", "llvm"])) and not is_gpu_run(parse_args([]))
    assert gpu_paths(args) == (os.path.join(RESULTS_DIR, "gpu.json"), os.path.join(RESULTS_DIR, "gpu.md"))
    assert gpu_paths(parse_args(["--backend", "cuda", "--json", "x.json", "--markdown", "x.md"])) == ("x.json", "x.md")
    for bad in (["--backend", "cuda", "--backend", "llvm"], ["--backend", "cuda", "optimizer"],
                ["--backend", "llvm", "bandwidth"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_without_a_gpu_one_line_names_what_is_missing(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(runtime, "missing_reason", lambda: "no CUDA device was found")
    rc = main(["--backend", "cuda", "--json", str(tmp_path / "g.json"), "--markdown", str(tmp_path / "g.md")])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip().splitlines() == ["python -m benchmarks --backend cuda needs a GPU: no CUDA device "
                                                     "was found"]
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(runtime.device_available(), reason="a GPU is present: the command would run the benchmarks")
def test_the_command_without_a_gpu_exits_2_without_a_traceback():
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--backend", "cuda", "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f"python -m benchmarks --backend cuda needs a GPU: "
                                                 f"{runtime.missing_reason()}"]


@pytest.fixture(scope="module")
def on_cuda_host():
    """Every workload's and kernel's Ember function at its tiny size, lowered as the GPU run lowers it and
    compiled for cuda-host into one module: [(workload, args, executable)]."""
    lowered = []
    for w in ALL:
        args = w.inputs(w.tiny)
        lowered.append((w, args, gpu.ember_function(w, "cuda-host").lower(*args)))
    exes = compile_many([(low.optimized, low.stages[-1].plan) for _, _, low in lowered])
    return [(w, args, exe) for (w, args, _), exe in zip(lowered, exes)]


@pytest.mark.parametrize("index", range(len(ALL)), ids=[w.name for w in ALL])
def test_ember_function_matches_its_hand_written_twin_on_cuda_host(on_cuda_host, index):
    w, args, exe = on_cuda_host[index]
    got = exe(*tree_leaves(args))
    want = w.hand(np, *args)
    assert gpu.mismatch(got, want, np) is None
    assert all(np.dtype(a.dtype) == np.dtype(w.dtype) for a in tree_leaves(want))


def test_hand_written_twins_match_the_tested_numpy_baselines():
    """The xp twins against the CPU workloads' backward passes (checked against finite differences)."""
    checks = {
        "eam": lambda x: eam.numpy_grad(x),
        "dense_bias_act": dense_bias_act.numpy_grad,
        "per_sample": lambda params, xs: per_sample.numpy_grads(params, xs, "tanh", per_sample=True),
        "cosine": cosine.numpy_grad,
    }
    for w in gpu.WORKLOADS:
        args = w.inputs(w.tiny)
        assert gpu.mismatch(w.hand(np, *args), checks[w.group](*args), np) is None, w.name


def test_mismatch_catches_values_dtypes_and_structure():
    x = np.linspace(1.0, 2.0, 5, dtype=np.float32)
    assert gpu.mismatch((x,), (x + 1e-5,), np) is None
    assert "max |diff|" in gpu.mismatch(x + 0.01, x, np)
    assert "float64" in gpu.mismatch(x.astype(np.float64), x, np)
    assert "2 outputs" in gpu.mismatch((x, x), x, np)
    assert gpu.mismatch(None, None, np) is not None   # nothing compared is a failure, never a pass


def test_the_whole_run_on_numpy_arrays_and_a_cpu_backend():
    res = gpu.run_all(gpu.numpy_device("numpy"), gpu.find_jax(False), TINY, list(gpu.GROUPS), tiny=True)
    assert res.failed == []
    assert [r.workload for r in res.rows] == [w.name for w in gpu.WORKLOADS]
    assert all(r.ember_s > 0 and r.hand_s > 0 and r.ember_first_s > 0 and r.jax_s is None for r in res.rows)
    assert [line.what.split(",")[0] for line in res.lines] == ["device-to-device copy", ELEMENTWISE_NAME,
                                                               "sum reduction", "launch overhead per call"]
    elementwise = res.lines[1].values
    assert elementwise["ember_fraction_of_copy"] == pytest.approx(
        elementwise["ember_bytes_per_s"] / res.lines[0].values["bytes_per_s"])
    md = gpu.markdown(res)
    assert "| " + " | ".join(gpu.COLUMNS) + " |" in md and md.count("\n| ") == len(res.rows) + 1
    data = json.loads(json.dumps(gpu.to_json(res)))
    assert len(data["rows"]) == len(res.rows) and data["rows"][0]["ember_over_cupy"] > 0


ELEMENTWISE_NAME = gpu.ELEMENTWISE.name.split(",")[0]


def test_a_failing_implementation_is_an_error_row_and_the_run_goes_on():
    def broken(fw):
        raise RuntimeError("no rule for this")

    wrong = gpu.Workload("wrong", "eam", lambda fw: lambda x: x * 2.0, lambda xp, x: x, gpu.one_vector(),
                         dict(n=8), dict(n=8))
    raising = gpu.Workload("raising", "eam", broken, lambda xp, x: x, gpu.one_vector(), dict(n=8), dict(n=8))
    dev, peer = gpu.numpy_device("numpy"), gpu.find_jax(False)
    rows = [gpu.run_workload(w, dev, peer, TINY, w.tiny) for w in (wrong, raising)]
    assert rows[0].errors["ember"].startswith("result check failed") and rows[0].ember_s is None
    assert rows[1].errors["ember"] == "RuntimeError: no rule for this" and rows[1].hand_s > 0
    res = gpu.Results("cpu", peer.status, {"min_reps": 1, "max_reps": 1}, rows, [])
    assert len(res.failed) == 2 and "no rule for this" in gpu.markdown(res)


def test_jax_is_optional():
    assert gpu.find_jax(False).jax is None
    peer = gpu.find_jax(True)
    assert peer.jax is None or peer.device.platform == "gpu"


def test_every_full_size_program_compiles_to_one_sm90_cubin(monkeypatch):
    """The kernels the GPU run will launch, rendered at its sizes (10**8-element vectors stand in
    unallocated) and compiled by NVRTC in one module, as on the device."""
    from ember.backends.cuda import nvrtc
    from ember.backends.cuda.prelude import DEVICE_PRELUDE
    from ember.backends.cuda.program import build_program, link

    monkeypatch.setattr(gpu, "random_vector", lambda n, dtype, seed: np.empty(n, dtype))
    programs = []
    for w in ALL:
        low = gpu.ember_function(w, "cuda").lower(*w.inputs(w.full))
        programs.append(build_program(low.optimized, low.stages[-1].plan))
    assert programs[0].workspace_bytes >= 8 * 10**8 // 2   # eam float64 at n = 10**8 (not a tiny size)
    assert nvrtc.compile_cubin(DEVICE_PRELUDE + link(programs), "sm_90")
