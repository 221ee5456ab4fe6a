"""Start-up: `import ember` and the first call of a small jitted function, each in a new process, with the
disk cache cold (a fresh `EMBER_CACHE_DIR`) and warm (filled by an earlier process), beside `import jax`
and a first `jax.jit` call.

Every sample is a new Python process. Its whole wall time (interpreter start, imports, the call) is the
row's timing, so the harness times, rotates and summarizes it like any row; the process also measures
its own steps (the import, the first call, and Ember's `Lowered.timings()` of it), which the notes and
the table below the timings give as medians over the same processes.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from benchmarks.derived import Derived
from benchmarks.frameworks import Ember, Framework, RunConfig
from benchmarks.harness import Case, Impl, Prepared, Row, fmt_time
from benchmarks.report import Table
from ember import __file__ as _EMBER_INIT

NAME = "startup"
TITLE = "start-up: import and the first call of a jitted function, each in a new process"
MEASURE_MEMORY = False
DESCRIPTION = """\
Each sample is a new Python process (the timings are whole processes: interpreter start, imports, the
call). *import*: `import numpy` (the baseline), then `import ember` resp. `import jax`. *first call*:
those imports, then the first call of `jit(lambda x: x * 2 + 1)` on a float32 array of 8 (the baseline
computes `x * 2 + 1` with NumPy): *cold* with an empty Ember disk cache (a new `EMBER_CACHE_DIR` per
process), *warm* with the cache an earlier process filled (JAX keeps no disk cache by default: its two
cases are the same). *compile/trace* is the first call inside the first measured process (for *import*:
that process less the median, noise). The processes run with Python bytecode cached
(`PYTHONPYCACHEPREFIX`, a warm-up process first), as an installed package has it. Each process also times
its own steps; the notes and the table after the timings give their medians: the import alone, the first
call alone (wall), and for Ember the sum of `Lowered.timings()` (trace + optimize + compile + one-time
setup) over that wall."""

IMPORT, COLD, WARM = "import", "first call, cold disk cache", "first call, warm disk cache"

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
t1 = time.perf_counter()
kind, backend, call = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if kind == "ember":
    import ember
elif kind == "jax":
    import jax
t2 = time.perf_counter()
result = {"numpy": t1 - t0, "import": t2 - t1}
if call:
    x = np.ones(8, np.float32)
    if kind == "numpy":
        start = time.perf_counter()
        out = x * 2 + 1
    elif kind == "ember":
        f = ember.jit(lambda x: x * 2 + 1)  # EMBER_BACKEND names the backend: jit(backend=...) would load it here
        start = time.perf_counter()
        out = f(x)
    else:
        f = jax.jit(lambda x: x * 2 + 1)
        start = time.perf_counter()
        out = jax.block_until_ready(f(x))
    result["call"] = time.perf_counter() - start
    result["out"] = np.asarray(out).tolist()
    if kind == "ember":
        (entry,) = f._cache.entries.values()
        t = entry.lowered.timings()
        result["timings"] = {"trace": t.trace, "optimize": t.optimize, "compile": t.compile,
                             "one_time": t.one_time, "from_cache": t.from_cache}
print(json.dumps(result))
"""

# (case, implementation) -> what each of its processes measured, filled while the cases run; tables() reads it
_SAMPLES: dict[tuple[str, str], list[dict]] = {}


@functools.cache
def _child_env() -> dict[str, str]:
    """The environment of the measured processes: this checkout's ember first on the path, bytecode
    cached in a directory of this run (removed at exit), JAX on the CPU."""
    root = str(Path(_EMBER_INIT).resolve().parent.parent)
    pycache = tempfile.mkdtemp(prefix="ember-startup-pycache-")
    atexit.register(shutil.rmtree, pycache, True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    path = env.get("PYTHONPATH")
    env.update(PYTHONPATH=root + (os.pathsep + path if path else ""), PYTHONPYCACHEPREFIX=pycache,
               JAX_PLATFORMS="cpu")
    return env


def _process(kind: str, backend: str, call: bool, cache_dir: str | None) -> dict:
    """Run one measured process; what it measured."""
    env = dict(_child_env())
    if cache_dir is not None:
        env["EMBER_CACHE_DIR"] = cache_dir
    if backend:
        env["EMBER_BACKEND"] = backend
    done = subprocess.run([sys.executable, "-c", CHILD, kind, backend, "1" if call else "0"], env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the {kind} process failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _runner(case: str, impl: str, kind: str, backend: str = "", cache: str | None = None) -> Callable[[], Prepared]:
    """prepare() of a row whose every call is one process; `cache`: "cold" (a new cache directory per
    process), "warm" (one directory, filled first) or None (the import case: no call)."""
    def prepare() -> Prepared:
        samples = _SAMPLES.setdefault((case, impl), [])
        scratch = tempfile.mkdtemp(prefix="ember-startup-cache-")
        if cache == "warm":
            _process(kind, backend, True, scratch)  # fills the disk cache (and the bytecode cache)
        else:
            _process(kind, backend, cache is not None, os.path.join(scratch, "warm-up"))  # the bytecode cache

        def run() -> np.ndarray | None:
            where = tempfile.mkdtemp(dir=scratch) if cache == "cold" else scratch
            got = _process(kind, backend, cache is not None, where)
            if cache == "cold":
                shutil.rmtree(where, ignore_errors=True)
            samples.append(got)
            if cache is not None and prepared.compile_s is None:
                prepared.compile_s = got["call"]  # the compile/trace column: the first process's first call
            return None if cache is None else np.asarray(got["out"], np.float32)

        def note() -> str:
            return _note(samples, kind, cache is not None)

        prepared = Prepared(run, after_first=note)
        return prepared

    return prepare


def _note(samples: list[dict], kind: str, call: bool) -> str:
    """The steps the first process measured itself (the table gives the medians over all)."""
    if not samples:
        return ""
    s = samples[-1]
    text = f"in the process: import {fmt_time(s['numpy' if kind == 'numpy' else 'import'])}"
    if call:
        text += f", first call {fmt_time(s['call'])}"
        if kind == "ember":
            text += f" (timings() sum {_timings_sum(s) / s['call']:.0%} of it)"
    return text


def _timings_sum(sample: dict) -> float:
    return sum(v for k, v in sample["timings"].items() if k != "from_cache" and v is not None)


def _impls(cfg: RunConfig, case: str, cache: str | None) -> list[Impl]:
    """The rows of one case: the NumPy baseline, Ember (once for the import, else per backend), JAX."""
    baseline = Impl("import numpy" if cache is None else "numpy x * 2 + 1", "numpy",
                    _runner(case, "numpy", "numpy", cache=cache), baseline=True)
    embers = [fw for fw in cfg.frameworks if isinstance(fw, Ember)]
    if cache is None:
        rows = [Impl("import ember", "ember", _runner(case, "ember", "ember"))] if embers else []
    else:
        rows = [Impl(f"{fw.name} jit", "ember", _runner(case, fw.name, "ember", fw.backend, cache)) for fw in embers]
    jax: Framework | None = next((fw for fw in cfg.frameworks if fw.kind == "jax"), None)
    if jax is not None:
        name = "import jax" if cache is None else "jax.jit"
        status = getattr(jax, "status", None)
        rows.append(Impl(name, "jax", status=status) if status else
                    Impl(name, "jax", _runner(case, name, "jax", cache=cache)))
    return [baseline, *rows]


def cases(cfg: RunConfig) -> Iterator[Case]:
    """import; first call cold; first call warm."""
    _SAMPLES.clear()
    yield Case(NAME, IMPORT, _impls(cfg, IMPORT, None))
    yield Case(NAME, COLD, _impls(cfg, COLD, "cold"))
    yield Case(NAME, WARM, _impls(cfg, WARM, "warm"))


def tables(cfg: RunConfig) -> list[Table]:
    """The steps as each process measured them, medians over the processes of the timing rows."""
    table = Table("Start-up steps measured inside each process (median over the processes above)",
                  ["case", "implementation", "processes", "import numpy", "import", "first call",
                   "Ember timings(): trace / optimize / compile / one-time", "sum / first call"],
                  note="*import* is `import ember` (resp. `import jax`) after NumPy; *first call* is the wall time "
                       "of the first `f(x)`; the sum of Ember's `Lowered.timings()` accounts for it when near "
                       "100% (the rest: running the call itself).")
    for (case, impl), samples in _SAMPLES.items():
        if not samples:
            continue
        med = functools.partial(_median, samples)
        call = "call" in samples[0]
        imported = "—" if impl == "numpy" else fmt_time(med("import"))  # NumPy's import has its own column
        cells = [case, impl, str(len(samples)), fmt_time(med("numpy")), imported,
                 fmt_time(med("call")) if call else "—", "—", "—"]
        record = {"case": case, "impl": impl, "processes": len(samples), "numpy_s": med("numpy"),
                  "import_s": med("import"), "first_call_s": med("call") if call else None}
        if call and "timings" in samples[0]:
            parts = {k: statistics.median(s["timings"][k] or 0.0 for s in samples)
                     for k in ("trace", "optimize", "compile", "one_time")}
            cells[6] = " / ".join(fmt_time(v) for v in parts.values())
            ratio = statistics.median(_timings_sum(s) / s["call"] for s in samples)
            cells[7] = f"{ratio:.0%}"
            record.update({f"{k}_s": v for k, v in parts.items()}, timings_over_call=ratio)
        table.rows.append(cells)
        table.records.append(record)
    return [table]


def _median(samples: list[dict], key: str) -> float | None:
    return statistics.median(s[key] for s in samples) if key in samples[0] else None


def derived(rows: list[Row]) -> list[Derived]:
    """Nothing beyond the tables."""
    return []
