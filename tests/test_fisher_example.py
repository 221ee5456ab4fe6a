"""examples/fisher_on_dask.py on a real LocalCluster of worker processes agrees with one process; a worker
process killed mid-run loses no result (Dask reruns its tasks on the other worker); the scale_out
benchmark runs at a small size."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from tests import dask_tasks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHUNK_SECONDS = 0.05   # each chunk's task sleeps this long, so the kill below lands while tasks remain


def test_the_example_agrees_with_one_process_on_two_worker_processes():
    script = os.path.join(ROOT, "examples", "fisher_on_dask.py")
    done = subprocess.run([sys.executable, script, "--small", "--workers", "2"], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "20,000 samples in 10 chunks of 2,000 on LocalCluster of 2 worker processes" in done.stdout
    assert "check passed" in done.stdout


def slow_per_sample_grads(params, x, y):
    """dask_tasks.per_sample_grads after a short sleep: the run lasts long enough to kill a worker in it."""
    time.sleep(CHUNK_SECONDS)
    return dask_tasks.per_sample_grads(params, x, y)


def wait_for_results_on_a_worker(client, future, timeout: float = 60.0) -> str:
    """The address of the worker holding the most finished chunk results, once one holds some while
    the run goes on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = {w: sum(k.startswith(("_chunk", "_combine")) for k in map(str, keys))
                for w, keys in client.has_what().items()}
        worker = max(held, key=held.get)
        if held[worker] >= 2:
            return worker
        assert not future.done(), "the run finished before any worker held a result: make its chunks slower"
        time.sleep(0.02)
    raise AssertionError(f"no worker held a chunk result within {timeout} s")


def chunk_tasks_started_again(dask_scheduler) -> int:
    """How many times the scheduler sent a chunk's task to a worker beyond its first (a rerun)."""
    from collections import Counter

    started = Counter(str(t.key) for t in dask_scheduler.transition_log
                      if t.finish == "processing" and str(t.key).startswith("_chunk"))
    return sum(n - 1 for n in started.values())


def test_a_worker_process_killed_mid_run_loses_no_result():
    import dask.array as da

    import ember.dask
    from ember.tree import tree_leaves

    params = dask_tasks.mlp_params()
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((4800, 10)), rng.standard_normal((4800, 10))
    xs, ys = da.from_array(x, chunks=(80, 10)), da.from_array(y, chunks=(80, 10))   # 60 chunks
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=50)
    with cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2, timeout=60)
        pids = client.run(os.getpid)
        run = ember.dask.map_reduce(slow_per_sample_grads, params, xs, ys, reduce=("mean", "mean_sq"),
                                    compute=False)
        future = client.compute(run)
        victim = wait_for_results_on_a_worker(client, future)
        assert not future.done()
        os.kill(pids[victim], signal.SIGKILL)
        mean, fisher = future.result(timeout=120)
        assert client.run_on_scheduler(chunk_tasks_started_again) >= 1   # the lost work was redone
        assert victim not in client.has_what() or client.run(os.getpid).get(victim) != pids[victim]
    g = dask_tasks.per_sample_grads(params, x, y)
    for got_m, got_f, leaf in zip(tree_leaves(mean), tree_leaves(fisher), tree_leaves(g)):
        np.testing.assert_allclose(got_m, leaf.mean(axis=0), rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(got_f, (leaf * leaf).mean(axis=0), rtol=1e-10, atol=1e-13)


def test_the_scale_out_benchmark_runs_at_a_small_size(tmp_path):
    from benchmarks import scale_out

    markdown = tmp_path / "scale_out.md"
    assert scale_out.main(["--quick", "--workers", "1", "--markdown", str(markdown)]) == 0
    text = markdown.read_text()
    assert "| 1 | cold |" in text and "| 1 | warm |" in text
    assert "tasks/s" in text and "worker threads at chunk 1,000" in text and "scheduler CPU" in text
