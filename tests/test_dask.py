"""Ember inside Dask workers (a real LocalCluster of 2 worker processes): a jitted function pickles to them,
tasks on 2-thread workers call it concurrently and get the right answers, each signature compiles once
per worker, and Ember's threads follow the nanny's caps (OMP/OPENBLAS/MKL_NUM_THREADS=1), so a worker
never runs nthreads x cores threads."""

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from tests import dask_tasks  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0",
                                       silence_logs=40)
    with cluster, distributed.Client(cluster) as c:
        yield c


def test_concurrent_tasks_on_a_two_thread_worker(client):
    futures = [client.submit(dask_tasks.run, seed, 50_000, pure=False) for seed in range(8)]
    for seed, got in enumerate(client.gather(futures)):
        np.testing.assert_allclose(got, dask_tasks.run(seed, 50_000), rtol=1e-12, atol=0)
    states = list(client.run(dask_tasks.worker_state).values())
    assert len(states) == 2 and sum(s["misses"] for s in states) >= 1
    for state in states:
        assert state["misses"] <= 1  # one signature, compiled at most once though two threads call it at once
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


def test_map_reduce_gives_the_mean_gradient_and_fisher_diagonal(client):
    """ember.dask.map_reduce: per-sample gradients of the seed-002 MLP over a sharded batch, reduced to
    the mean gradient and the empirical Fisher diagonal in one pass, as one process computes them."""
    import dask.array as da

    import ember.dask
    from ember.tree import tree_leaves

    params = dask_tasks.mlp_params()
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((3000, 10)), rng.standard_normal((3000, 10))
    xs, ys = da.from_array(x, chunks=(400, 10)), da.from_array(y, chunks=(400, 10))
    mean, fisher = ember.dask.map_reduce(dask_tasks.per_sample_grads, params, xs, ys, reduce=("mean", "mean_sq"),
                                         split_every=3)
    g = dask_tasks.per_sample_grads(params, x, y)
    for got_m, got_f, leaf in zip(tree_leaves(mean), tree_leaves(fisher), tree_leaves(g)):
        np.testing.assert_allclose(got_m, leaf.mean(axis=0), rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(got_f, (leaf * leaf).mean(axis=0), rtol=1e-10, atol=1e-13)
    total = ember.dask.map_reduce(dask_tasks.per_sample_grads, params, xs, ys, reduce="sum")
    np.testing.assert_allclose(tree_leaves(total)[0], tree_leaves(g)[0].sum(axis=0), rtol=1e-10)


def test_map_reduce_refuses_what_it_cannot_do():
    import dask.array as da

    import ember.dask

    x = da.ones((10, 2), chunks=(5, 2))
    with pytest.raises(ValueError, match="reduce must be one of"):
        ember.dask.map_reduce(lambda p, x: x, None, x, reduce="max")
    with pytest.raises(ValueError, match="rechunk them alike"):
        ember.dask.map_reduce(lambda p, x, y: x, None, x, da.ones((10, 2), chunks=(4, 2)))


def test_map_reduce_called_again_and_with_dict_params(client):
    """Each call scatters its own params (not by content hash: a second call with the same params must not
    lose them while the first call's futures are released; dict params are not task keys)."""
    import dask.array as da

    import ember.dask

    x = da.from_array(np.arange(12.0).reshape(6, 2), chunks=(2, 2))

    def scaled(params, chunk):
        return chunk * params["scale"]

    for scale in (1.0, 1.0, 1.0, 2.0, 3.0):
        got = ember.dask.map_reduce(scaled, {"scale": scale}, x, reduce="sum")
        np.testing.assert_allclose(got, np.arange(12.0).reshape(6, 2).sum(axis=0) * scale)


def test_map_reduce_on_a_client_that_is_not_the_default():
    import dask.array as da

    import ember.dask

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                                  silence_logs=40) as cluster, \
            distributed.Client(cluster, set_as_default=False) as other:
        x = da.from_array(np.ones((8, 3)), chunks=(3, 3))
        got = ember.dask.map_reduce(lambda p, c: c * p, 2.0, x, reduce="mean", client=other)
    np.testing.assert_allclose(got, np.full(3, 2.0))


def test_map_reduce_keeps_numpy_result_types_for_non_floats(client):
    import dask.array as da

    import ember.dask

    x = da.from_array(np.arange(10, dtype=np.int32), chunks=4)
    count, mean = ember.dask.map_reduce(lambda p, c: (c % 2 == 0), None, x, reduce=("sum", "mean"))
    assert count == 5 and mean == 0.5
    with pytest.raises(ValueError, match="no samples"):
        ember.dask.map_reduce(lambda p, c: c, None, da.ones((0, 2), chunks=(1, 2)))


def test_a_closure_is_traced_once_per_worker(client):
    """A function sent by value arrives with every task, but a worker keeps one copy of it: one jit cache,
    one trace for all the tasks."""
    import dask.array as da

    import ember
    import ember.dask
    import ember.numpy as jnp

    shift = 0.5

    def loss(w, x):
        return jnp.sum(dask_tasks.count_trace(jnp.tanh(x @ w + shift)) ** 2)

    per_sample = ember.jit(ember.vmap(ember.grad(loss), in_axes=(None, 0)))
    x = da.from_array(np.random.default_rng(3).standard_normal((64, 4)), chunks=(8, 4))
    before = client.run(dask_tasks.traces)
    ember.dask.map_reduce(per_sample, np.ones((4, 2)), x, reduce="mean")
    after = client.run(dask_tasks.traces)
    assert all(after[w] - before[w] <= 1 for w in after)  # 8 tasks over two workers: one trace each at most
    assert sum(after.values()) > sum(before.values())
