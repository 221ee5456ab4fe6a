"""Ember inside Dask workers (a real LocalCluster of worker processes): a jitted function pickles to them,
tasks on a 2-thread worker call it concurrently and get the right answers, each signature compiles once
per worker, and Ember's threads follow the nanny's caps (OMP/OPENBLAS/MKL_NUM_THREADS=1), so a worker
never runs nthreads x cores threads."""

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from tests import dask_tasks  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None,
                                       silence_logs=40)
    with cluster, distributed.Client(cluster) as c:
        yield c


def test_concurrent_tasks_on_a_two_thread_worker(client):
    futures = [client.submit(dask_tasks.run, seed, 50_000, pure=False) for seed in range(8)]
    for seed, got in enumerate(client.gather(futures)):
        np.testing.assert_allclose(got, dask_tasks.run(seed, 50_000), rtol=1e-12, atol=0)
    (state,) = client.run(dask_tasks.worker_state).values()
    assert state["misses"] == 1  # one signature, compiled once though two threads called it at once
    assert state["omp"] == "1" and state["num_threads"] == 1
    assert state["pool_threads"] <= state["num_threads"] - 1  # no native thread beyond the budget


def test_map_blocks_over_a_jitted_function(client):
    """The Dask path a user writes: dask.array.map_blocks of a jitted function (NumPy chunks in and out),
    the function pickled once per worker by name, chunks computed in parallel, the result as one process."""
    da = pytest.importorskip("dask.array")
    x = np.random.default_rng(1).standard_normal(400_000)
    chunks = da.from_array(x, chunks=50_000)
    got = chunks.map_blocks(dask_tasks.energy_grad, dtype=x.dtype).compute()
    want = np.concatenate([dask_tasks.energy_grad(x[k:k + 50_000]) for k in range(0, x.size, 50_000)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
