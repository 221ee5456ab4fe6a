"""`python -m benchmarks [WORKLOAD ...] [--quick] [--backend NAME ...] [--json PATH] [--plots DIR] ...`

Runs the seed workloads on every Ember backend and every installed peer, prints the Markdown table to
stdout (progress goes to stderr) and writes it, a JSON file and PNG plots. Exit status 1 if any
implementation failed its result check or raised (or an entry of a workload's extra table did).

`--backend cuda` runs the GPU benchmarks instead (benchmarks/gpu.py: Ember on CuPy arrays beside CuPy by
hand and JAX on the GPU, bandwidth and launch overhead); without a GPU it says what is missing and exits 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, replace
from types import ModuleType

from benchmarks import environment, frameworks, gpu, peers, report
from benchmarks.harness import Settings, log, run_cases
from benchmarks.workloads import WORKLOADS

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

FULL = Settings(budget_s=3.0, sample_s=0.005, min_reps=5, max_reps=200)
QUICK = Settings(budget_s=0.1, sample_s=0.001, min_reps=3, max_reps=20, calibration_calls=1)  # a smoke run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; see the module docstring and benchmarks/README.md."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                   help=f"any of {', '.join(WORKLOADS)} (default: all); with --backend cuda any of "
                        f"{', '.join(gpu.GROUPS)}")
    p.add_argument("--quick", action="store_true", help="small sizes and a short time budget (a smoke run)")
    p.add_argument("--backend", action="append", metavar="NAME",
                   help="Ember backend to run (repeatable; default: every CPU one in ember.available_backends()); "
                        "cuda: the GPU benchmarks instead (benchmarks/gpu.py)")
    p.add_argument("--peers", default=",".join(peers.PEERS), metavar="LIST",
                   help="comma-separated peers to run if installed (default: %(default)s)")
    p.add_argument("--no-peers", action="store_true", help="run NumPy and Ember only")
    p.add_argument("--json", default=os.path.join(RESULTS_DIR, "results.json"), metavar="PATH")
    p.add_argument("--markdown", default=os.path.join(RESULTS_DIR, "results.md"), metavar="PATH")
    p.add_argument("--plots", default=RESULTS_DIR, metavar="DIR", help="directory for the PNG plots")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--budget", type=float, metavar="SECONDS", help="timing budget per case (overrides the default)")
    p.add_argument("--min-reps", type=int, metavar="N", help="minimum repetitions per implementation")
    p.add_argument("--threads", type=int, metavar="N",
                   help="limit BLAS and PyTorch (OpenMP) to N threads, and XLA's Eigen kernels to one when N=1 "
                        "(re-executes with OMP/OPENBLAS/MKL_NUM_THREADS and XLA_FLAGS set; default: library defaults)")
    args = p.parse_args(argv)
    names = gpu.GROUPS if is_gpu_run(args) else WORKLOADS
    if is_gpu_run(args) and len(set(args.backend)) > 1:
        p.error("--backend cuda runs the GPU benchmarks on their own; run the other backends separately")
    unknown = [w for w in args.workloads if w not in names]
    if unknown:
        p.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    bad_peers = set(filter(None, args.peers.split(","))) - set(peers.PEERS)
    if bad_peers:
        p.error(f"unknown peer(s) {', '.join(sorted(bad_peers))}; choose from {', '.join(peers.PEERS)}")
    return args


GPU_BACKENDS = ("cuda", "cuda-host")  # not in the CPU tables by default: cuda runs apart, cuda-host emulates it


def is_gpu_run(args: argparse.Namespace) -> bool:
    """`--backend cuda`: the GPU benchmarks (benchmarks/gpu.py), not the CPU tables."""
    return "cuda" in (args.backend or ())


def gpu_paths(args: argparse.Namespace) -> tuple[str, str]:
    """The GPU run's JSON and Markdown paths: --json / --markdown if given, else gpu.json / gpu.md in
    the results directory (the CPU tables keep theirs)."""
    default_json, default_md = (os.path.join(RESULTS_DIR, f) for f in ("results.json", "results.md"))
    return (os.path.join(RESULTS_DIR, "gpu.json") if args.json == default_json else args.json,
            os.path.join(RESULTS_DIR, "gpu.md") if args.markdown == default_md else args.markdown)


THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(n: int) -> dict[str, str]:
    """Environment variables that cap NumPy's BLAS and PyTorch's OpenMP pool at n threads (XLA's Eigen at 1).

    They must be set before those libraries load, hence the re-exec in `__main__`."""
    env = {k: str(n) for k in THREAD_ENV}
    if n == 1:  # XLA has no thread-count flag; this one makes its Eigen kernels single-threaded
        env["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_multi_thread_eigen=false".strip()
    env["BENCHMARKS_THREADS"] = str(n)
    return env


def settings_for(args: argparse.Namespace) -> Settings:
    """Full or quick defaults, with the command line's overrides."""
    s = Settings(**asdict(QUICK if args.quick else FULL))
    if args.budget is not None:
        s.budget_s = args.budget
    if args.min_reps is not None:
        s.min_reps = args.min_reps
        s.max_reps = max(s.max_reps, s.min_reps)
    return s


def workload_settings(settings: Settings, mod: ModuleType, args: argparse.Namespace) -> Settings:
    """`settings` with the workload's own `SETTINGS` (full runs only; the command line's options win)."""
    own = {} if args.quick else dict(getattr(mod, "SETTINGS", {}))
    if args.min_reps is not None:
        own.pop("min_reps", None)
    if args.budget is not None:
        own.pop("budget_s", None)
    return replace(settings, **own)


def main(argv: list[str] | None = None) -> int:
    """Run the selected workloads and write the reports; returns the exit status."""
    args = parse_args(argv)
    pinned = pin_threads(args.threads)
    # compile columns are cold: this run's own disk cache (the reload is measured apart, as a note)
    cache_dir = tempfile.mkdtemp(prefix="ember-benchmarks-cache-")
    os.environ["EMBER_CACHE_DIR"] = cache_dir
    try:
        if is_gpu_run(args):
            return gpu.main(args, *gpu_paths(args))
        return _run(args, pinned)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def pin_threads(n: int | None) -> list[int]:
    """With --threads N, bind the process (and every thread it starts) to N CPUs: XLA's CPU runtime
    starts worker threads whatever its flags say, so only this makes every library use N cores."""
    if n is None or not hasattr(os, "sched_setaffinity"):
        return []
    cpus = sorted(os.sched_getaffinity(0))[:n]
    os.sched_setaffinity(0, cpus)
    return cpus


def _run(args: argparse.Namespace, pinned: list[int]) -> int:
    import ember

    backends = args.backend or [b for b in ember.available_backends() if b not in GPU_BACKENDS]
    missing = [b for b in backends if b not in ember.available_backends()]
    if missing:
        log(f"unknown Ember backend(s) {missing}; available: {ember.available_backends()}")
        return 2
    enabled = set() if args.no_peers else set(filter(None, args.peers.split(",")))
    found = peers.detect(enabled)
    for peer in found.values():
        log(f"peer {peer.name}: {peer.version if peer.available else peer.status}")
    if args.threads is not None and found["torch"].available:
        found["torch"].module.set_num_threads(args.threads)
    cfg = frameworks.RunConfig(args.quick, frameworks.build(backends, found))
    settings = settings_for(args)
    meta = environment.collect(found)
    meta["ember_backends"] = backends
    meta["quick"] = args.quick
    meta["threads"] = threads_description(args, found) + (f"; pinned to CPU {pinned}" if pinned else "")
    meta["blas"] = environment.blas_description()

    t0 = time.perf_counter()
    sections, derived = [], []
    for name in args.workloads or list(WORKLOADS):
        mod = WORKLOADS[name]
        section = report.Section(name, mod.TITLE, mod.DESCRIPTION, mod.MEASURE_MEMORY,
                                 hide_columns=getattr(mod, "HIDE_COLUMNS", ()), x_label=getattr(mod, "X_LABEL", "n"))
        section.rows = list(run_cases(mod.cases(cfg), workload_settings(settings, mod, args)))
        if hasattr(mod, "tables"):
            log(f"[{name}] tables")
            section.tables = list(mod.tables(cfg))
        sections.append(section)
        derived += mod.derived(section.rows)
    meta["wall_s"] = round(time.perf_counter() - t0, 1)
    meta["load_end"] = environment.load_average()
    results = report.Results(meta, asdict(settings), sections, derived)

    text = report.markdown(results)
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(args.markdown)), exist_ok=True)
    with open(args.markdown, "w") as f:
        f.write(text)
    report.write_json(results, args.json)
    log(f"wrote {args.markdown} and {args.json} ({meta['wall_s']} s)")
    if not args.no_plots:
        plots = report.write_plots(results, args.plots)
        log(plots if isinstance(plots, str) else f"wrote {', '.join(plots)}")
    for row in results.failed:
        log(f"FAILED: {row.workload} / {row.case} / {row.impl}: {row.status}")
    for error in results.table_errors:
        log(f"FAILED: {error}")
    return 1 if results.failed or results.table_errors else 0


def threads_description(args: argparse.Namespace, found: dict[str, peers.Peer]) -> str:
    """What the thread pools were limited to, for the report."""
    torch = found["torch"]
    torch_n = f"; torch uses {torch.module.get_num_threads()}" if torch.available else ""
    if args.threads is None:
        return f"library defaults{torch_n}"
    applied = os.environ.get("BENCHMARKS_THREADS") == str(args.threads)
    how = "OMP/OPENBLAS/MKL_NUM_THREADS, XLA_FLAGS" if applied else "torch only: run as python -m benchmarks"
    return f"{args.threads} per library ({how}){torch_n}"


if __name__ == "__main__":
    _threads = parse_args(sys.argv[1:]).threads
    if _threads is not None and os.environ.get("BENCHMARKS_THREADS") != str(_threads):
        os.environ.update(thread_env(_threads))   # before NumPy/BLAS, torch and XLA start their pools
        os.execv(sys.executable, [sys.executable, "-m", "benchmarks", *sys.argv[1:]])
    sys.exit(main())
