"""`python -m benchmarks.scale_out [--samples N] [--chunk N] [--workers 1 2] [--quick]`: Ember on a Dask cluster.

The Fisher example (examples/fisher_on_dask.py: the seed-002 MLP's mean gradient and Fisher diagonal by
`ember.dask.map_reduce`) on LocalClusters of 1 and 2 worker processes (1 thread each), each with a fresh
`EMBER_CACHE_DIR` (cold: every worker compiles) and then, after `client.restart()` (new worker processes),
the same directory again (warm: the workers load the compiled code); the results are checked against one
process first. Then the per-task costs: trivial tasks (the scheduler and a worker's round trip, in tasks/s)
and a map_reduce of tiny chunks (Ember's per-chunk overhead on top), and from them a paper estimate of the
cluster size at which the scheduler, not Ember, limits the throughput, and the chunk size that keeps it away.

The table goes to stdout and to `--markdown` (default benchmarks/results/scale_out.md); progress to stderr.
Exit status 1 when a result differs from the single-process one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from benchmarks import environment
from benchmarks.harness import fmt_time, log

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
sys.path.insert(0, EXAMPLES_DIR)   # the example as the module the workers import (see ship_this_module)

import fisher_on_dask as fisher  # noqa: E402

TRIVIAL_TASKS, TINY_CHUNK, TINY_CHUNKS = 2000, 10, 400
QUICK = dict(samples=8_000, chunk=1_000, trivial=200, tiny_chunks=40)


@dataclass
class Run:
    """One map_reduce of the example on one cluster and cache state."""

    workers: int
    cache: str                  # "cold" or "warm"
    first_call_s: float         # the slowest worker's first call at the chunk's shape (trace, optimize, compile)
    steady_call_s: float        # the same call again on that worker (the chunk's own work)
    wall_s: float               # the map_reduce after those first calls
    samples: int
    error: float                # max relative difference from one process

    @property
    def throughput(self) -> float:
        return self.samples / self.wall_s


def first_call(chunk: int) -> tuple[float, float]:
    """(first, second) seconds of the example's per-sample function on a chunk in this worker: the first
    traces and compiles (or loads the disk cache's entry), the second only computes."""
    params = fisher.nn.init_mlp(fisher.SIZES, seed=0, dtype=fisher.FLOAT)
    x = fisher.inputs_chunk(0, 0, chunk)
    y = fisher.targets_chunk(x, 0, 0)
    start = time.perf_counter()
    fisher.per_sample(params, x, y)
    first = time.perf_counter()
    fisher.per_sample(params, x, y)
    return first - start, time.perf_counter() - first


def measure(client, workers: int, cache: str, params, samples: int, chunk: int, want: tuple) -> Run:
    """The first calls on every worker, then the timed map_reduce, checked against `want`."""
    calls = client.run(first_call, chunk)
    slowest = max(calls.values())
    start = time.perf_counter()
    mean, fisher_diag = fisher.on_cluster(client, params, samples, chunk)
    wall = time.perf_counter() - start
    error = max(fisher.max_relative_difference(mean, want[0]), fisher.max_relative_difference(fisher_diag, want[1]))
    run = Run(workers, cache, slowest[0], slowest[1], wall, samples, error)
    log(f"  {workers} worker(s), {cache} cache: first call {fmt_time(run.first_call_s)}, map_reduce "
        f"{fmt_time(wall)} ({run.throughput:,.0f} samples/s), max relative difference {error:.1e}")
    return run


def cold_and_warm(workers: int, params, samples: int, chunk: int, want: tuple,
                  costs: tuple[int, int] | None = None) -> tuple[list[Run], dict | None]:
    """Runs on a LocalCluster of `workers` processes with a fresh cache directory, then again with new
    worker processes (client.restart) and the same directory; then, given `costs` (trivial tasks, tiny
    chunks), the per-task costs on the same cluster (see task_costs)."""
    directory = tempfile.mkdtemp(prefix="ember-scale-out-")
    try:
        client, cluster = fisher.start_client(None, workers, 1, env={"EMBER_CACHE_DIR": directory})
        with cluster, client:
            client.wait_for_workers(workers, timeout=120)
            runs = [measure(client, workers, "cold", params, samples, chunk, want)]
            client.restart()
            runs.append(measure(client, workers, "warm", params, samples, chunk, want))
            return runs, (task_costs(client, workers, *costs) if costs else None)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def trivial(i: int) -> int:
    return i


def task_costs(client, workers: int, trivial_tasks: int, tiny_chunks: int) -> dict:
    """Trivial tasks' throughput (tasks/s, client to scheduler to workers and back; and the CPU seconds this
    process, where a LocalCluster's scheduler runs beside the client, spent on them) and the wall time per
    task of a map_reduce over `tiny_chunks` chunks of TINY_CHUNK samples (per-sample gradients, a chunk's
    sums, the tree's additions), on `client`'s cluster of `workers` processes."""
    import dask.array as da

    import ember.dask

    client.gather(client.map(trivial, range(-100, 0)))   # connections and imports, untimed
    start, cpu = time.perf_counter(), time.process_time()
    client.gather(client.map(trivial, range(trivial_tasks)))
    trivial_s, trivial_cpu = time.perf_counter() - start, time.process_time() - cpu
    params = fisher.nn.init_mlp(fisher.SIZES, seed=1, dtype=fisher.FLOAT)
    rng = np.random.default_rng(1)
    shape = (tiny_chunks * TINY_CHUNK, fisher.SIZES[0])
    x = da.from_array(rng.standard_normal(shape, dtype=fisher.FLOAT), chunks=(TINY_CHUNK, shape[1]))
    y = da.from_array(rng.standard_normal(shape, dtype=fisher.FLOAT), chunks=(TINY_CHUNK, shape[1]))
    client.run(first_call, TINY_CHUNK)   # compiled at the tiny shape before the timing
    run = ember.dask.map_reduce(fisher.per_sample, params, x, y, reduce=("mean", "mean_sq"), compute=False)
    tasks = len(run.__dask_graph__())
    start = time.perf_counter()
    run.compute()
    tiny_s = time.perf_counter() - start
    return {"trivial_tasks": trivial_tasks, "trivial_s": trivial_s, "trivial_cpu": trivial_cpu, "tiny_tasks": tasks,
            "tiny_s": tiny_s, "tiny_chunks": tiny_chunks, "workers": workers}


def tasks_per_chunk(samples: int, chunk: int) -> float:
    """Tasks the example's graph has per chunk: the inputs', the targets', the chunk's and the tree's share."""
    import ember.dask

    x, y = fisher.synthetic_batch(samples, chunk)
    run = ember.dask.map_reduce(fisher.per_sample, None, x, y, reduce=("mean", "mean_sq"), compute=False)
    return len(run.__dask_graph__()) / len(x.chunks[0])


def estimate(runs: list[Run], costs: dict, chunk: int, per_chunk: float) -> list[str]:
    """The paper estimate, with its arithmetic: at what number of worker threads the scheduler's task rate
    is the limit, and the chunk size that keeps it at most half busy for 100 and 1000 threads. Two
    scheduler rates: trivial tasks/s end to end here (the scheduler sharing 2 cores with the workers: a
    floor), and one task per CPU second the scheduler's process spent per task (a scheduler with a core
    of its own; the client's share of that CPU makes it an underestimate)."""
    one = min((r for r in runs if r.workers == 1 and r.cache == "warm"), key=lambda r: r.wall_s, default=None)
    one = one or min(runs, key=lambda r: r.wall_s / r.workers)
    rate = one.throughput / one.workers                    # samples/s of one worker thread, tasks included
    chunk_s = chunk / rate
    wall_rate = costs["trivial_tasks"] / costs["trivial_s"]
    cpu_rate = costs["trivial_tasks"] / costs["trivial_cpu"]
    lines = [
        f"- one worker thread: {rate:,.0f} samples/s ({one.workers} worker(s), {one.cache} cache), so a chunk of "
        f"{chunk:,} takes {fmt_time(chunk_s)}",
        f"- the graph has {per_chunk:.2f} tasks per chunk (inputs, targets, the chunk's sums, the tree's share)",
        f"- trivial tasks: {costs['trivial_tasks']:,} in {fmt_time(costs['trivial_s'])} = {wall_rate:,.0f} tasks/s "
        f"end to end; the scheduler's (and client's) process spent {fmt_time(costs['trivial_cpu'])} of CPU = "
        f"{fmt_time(costs['trivial_cpu'] / costs['trivial_tasks'])} per task, a rate of {cpu_rate:,.0f} tasks/s "
        "(distributed's rule of thumb: ~1 ms of scheduler time per task)",
        f"- tiny chunks: {costs['tiny_chunks']} chunks of {TINY_CHUNK} samples = {costs['tiny_tasks']} tasks in "
        f"{fmt_time(costs['tiny_s'])} = {fmt_time(costs['tiny_s'] / costs['tiny_tasks'])} per task on "
        f"{costs['workers']} worker(s)",
    ]
    for name, scheduler in (("end to end here", wall_rate), ("scheduler CPU", cpu_rate)):
        threads = scheduler * chunk_s / per_chunk
        lines.append(f"- {name} ({scheduler:,.0f} tasks/s): W threads ask for W x {per_chunk:.2f} / "
                     f"{fmt_time(chunk_s)} tasks/s, so the scheduler limits throughput from "
                     f"W = {scheduler:,.0f} x {chunk_s:.3g} / {per_chunk:.2f} = {threads:,.0f} worker threads "
                     f"at chunk {chunk:,}")
        for w in (100, 1000):
            need = 2 * w * per_chunk * rate / scheduler      # the scheduler at most half busy
            lines.append(f"  - W = {w:,}: at most half busy needs chunk >= 2 x {w:,} x {per_chunk:.2f} x {rate:,.0f} / "
                         f"{scheduler:,.0f} = {need:,.0f} samples")
    return lines


def table(runs: list[Run], chunk: int) -> list[str]:
    """The Markdown table of the runs, with the compile seconds the warm cache saved per cluster."""
    cold = {r.workers: r for r in runs if r.cache == "cold"}
    lines = ["| workers | cache | first call (slowest worker) | of it, compute | compile saved | map_reduce | "
             "samples/s | max rel. difference |", "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        saved = fmt_time(cold[r.workers].first_call_s - r.first_call_s) if r.cache == "warm" else "—"
        lines.append(f"| {r.workers} | {r.cache} | {fmt_time(r.first_call_s)} | {fmt_time(r.steady_call_s)} | {saved} "
                     f"| {fmt_time(r.wall_s)} | {r.throughput:,.0f} | {r.error:.1e} |")
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scale_out", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=fisher.SAMPLES, help="samples (default %(default)s)")
    p.add_argument("--chunk", type=int, default=fisher.CHUNK, help="samples per chunk (default %(default)s)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker process counts (default 1 2)")
    p.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK['samples']:,} samples in chunks of "
                   f"{QUICK['chunk']:,}, fewer per-task samples")
    p.add_argument("--markdown", default=os.path.join(RESULTS_DIR, "scale_out.md"), metavar="PATH")
    args = p.parse_args(argv)
    if args.quick:
        args.samples, args.chunk = QUICK["samples"], QUICK["chunk"]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    trivial_tasks, tiny = (QUICK["trivial"], QUICK["tiny_chunks"]) if args.quick else (TRIVIAL_TASKS, TINY_CHUNKS)
    started, load_start = time.perf_counter(), environment.load_average()
    params = fisher.nn.init_mlp(fisher.SIZES, seed=0, dtype=fisher.FLOAT)
    log(f"one process: {args.samples:,} samples (the reference)")
    t = time.perf_counter()
    want = fisher.in_process(params, args.samples, args.chunk)
    alone_s = time.perf_counter() - t
    runs, costs = [], None
    for workers in sorted(args.workers):
        last = workers == max(args.workers)   # the per-task costs on the largest cluster, after its runs
        more, found = cold_and_warm(workers, params, args.samples, args.chunk, want,
                                    (trivial_tasks, tiny) if last else None)
        runs, costs = runs + more, costs or found
    lines = [f"## scale_out: the Fisher example on Dask ({args.samples:,} samples, chunks of {args.chunk:,})", "",
             f"- {os.cpu_count()}-core {environment.cpu_model()}; 1-minute load average {load_start} at start, "
             f"{environment.load_average()} at end; {fmt_time(time.perf_counter() - started)} in all",
             f"- one process (the check, chunk by chunk): {fmt_time(alone_s)} = "
             f"{args.samples / alone_s:,.0f} samples/s", ""]
    lines += table(runs, args.chunk) + ["", "Per-task costs and the scheduler estimate:", ""]
    lines += estimate(runs, costs, args.chunk, tasks_per_chunk(args.samples, args.chunk))
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(args.markdown)), exist_ok=True)
    with open(args.markdown, "w") as f:
        f.write(text)
    failed = [r for r in runs if not r.error <= fisher.TOLERANCE]
    if failed:
        log(f"FAILED: {len(failed)} run(s) differ from one process by more than {fisher.TOLERANCE:g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
