"""Start-up: what `import ember` loads (no SciPy: scipy.special is imported only when a graph that needs
it compiles on the numpy backend), and `Lowered.timings()` accounting for the whole first call of a
process, the process's one-time setup on its own line. Each check runs in a fresh interpreter; none
asserts a duration, only that the parts add up to the measured whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import ember
from ember.backends import one_time, one_time_seconds, one_time_setup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code: str, cache_dir, argv: str | None = None, **env) -> dict:
    """The JSON that `code` prints, run in a new interpreter on this checkout's ember (`argv`: its one
    argument)."""
    environ = {k: v for k, v in os.environ.items() if k != "EMBER_BACKEND"}
    environ.update(PYTHONPATH=ROOT, EMBER_CACHE_DIR=str(cache_dir), **env)
    args = [] if argv is None else [argv]
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                         env=environ, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_ember_loads_no_scipy(tmp_path):
    got = _run("""
        import json, sys
        import ember, ember.nn, ember.scipy.special, ember.numpy
        print(json.dumps({"file": ember.__file__, "scipy": sorted(m for m in sys.modules if m.startswith("scipy"))}))
    """, tmp_path)
    assert got["file"].startswith(ROOT)
    assert got["scipy"] == []


def test_networkx_loads_only_for_to_networkx(tmp_path):
    got = _run("""
        import json, sys
        import numpy as np
        import ember
        low = ember.jit(lambda x: x * 2 + 1).lower(np.ones(4, np.float32))
        low.compile(), low.explain(), low.memory(), low.text()
        before = "networkx" in sys.modules
        whole = low.to_networkx().number_of_nodes() == len(low.optimized.nodes) + 1  # and the input
        print(json.dumps({"before": before, "after": "networkx" in sys.modules, "whole": whole}))
    """, tmp_path)
    assert got == {"before": False, "after": True, "whole": True}


def test_a_first_call_without_erf_or_blas_loads_no_scipy(tmp_path):
    got = _run("""
        import json, sys
        import numpy as np
        import ember
        ember.jit(lambda x: ember.nn.relu(x * 2 + 1))(np.ones(8, np.float32))
        ember.jit(lambda x: x * 2, backend="numpy")(np.ones(8, np.float32))
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(("scipy.special", "scipy.linalg")))))
    """, tmp_path)
    assert got == []


def test_numpy_backend_imports_scipy_special_for_erf_and_matches_it(tmp_path):
    got = _run("""
        import json, sys
        import numpy as np
        import ember
        x = np.linspace(-3, 3, 11)
        before = "scipy.special" in sys.modules
        f = ember.jit(lambda x: (ember.scipy.special.erf(x), ember.nn.sigmoid(x * 2)), backend="numpy")
        low = f.lower(x)
        low.compile()
        erf, sig = f(x)
        import scipy.special
        same = bool(np.array_equal(erf, scipy.special.erf(x)) and np.array_equal(sig, scipy.special.expit(x * 2)))
        print(json.dumps({"before": before, "same": same, "one_time": low.timings().one_time is not None}))
    """, tmp_path)
    assert got == {"before": False, "same": True, "one_time": True}


FIRST_CALLS = """
    import json, time
    import numpy as np
    import ember

    def first_call(f, x):
        start = time.perf_counter()
        f(x)
        wall = time.perf_counter() - start
        (entry,) = f._cache.entries.values()
        t = entry.lowered.timings()
        return {"wall": wall, "total": t.total, "one_time": t.one_time, "text": str(t),
                "parts": [t.trace, t.optimize, t.compile, t.one_time]}

    x = np.ones(8, np.float32)
    print(json.dumps([first_call(ember.jit(lambda x: x * 2 + 1), x), first_call(ember.jit(lambda x: x * 3 - 1), x)]))
"""


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_timings_account_for_the_first_call_of_a_process(tmp_path, cache):
    if cache == "warm":
        _run(FIRST_CALLS, tmp_path)  # fills the disk cache: the next process loads the code
    first, second = _run(FIRST_CALLS, tmp_path, EMBER_BACKEND="llvm")
    # the fields add up to the call: all but the jitted call's own run and bookkeeping (microseconds)
    assert first["total"] <= first["wall"] and first["total"] >= 0.9 * first["wall"], first
    assert first["one_time"] is not None and first["one_time"] > 0
    assert "once per process" in first["text"]
    assert second["one_time"] is None and "once per process" not in second["text"], second
    assert second["total"] <= second["wall"]


def test_one_time_setup_is_counted_once_per_thread_and_region():
    calls = []

    @one_time
    def load():
        calls.append(1)
        with one_time_setup():  # nested: counted in the outer region only
            time.sleep(0.002)
        return "lib"

    before = one_time_seconds()
    assert load() == "lib" and load() == "lib" and calls == [1]
    spent = one_time_seconds() - before
    assert spent >= 0.002
    assert one_time_seconds() - before == spent  # the second call added nothing


def test_timings_of_a_later_function_have_no_one_time_line():
    ember.jit(lambda x: x + 1)(np.ones(2, np.float32))  # the backend is loaded by now
    low = ember.jit(lambda x: x * 5).lower(np.ones(3, np.float32))
    low.compile()
    t = low.timings()
    assert t.one_time is None and "once per process" not in str(t)
    assert t.total == pytest.approx(t.trace + t.optimize + t.compile)


GENERATORS = ("ember.backends.kernel", "ember.backends.math", "ember.backends.llvm.graph", "ember.backends.llvm.loops",
              "ember.backends.llvm.mathlib", "ember.backends.llvm.scalar", "ember.backends.llvm.dot")


def test_a_disk_cache_hit_imports_no_code_generator(tmp_path):
    """A new process whose function is on disk loads its code without importing the code generators
    (entry.py holds what running the code needs); source() imports them on demand."""
    code = """
        import json, sys
        import numpy as np
        import ember
        x = np.linspace(-1, 1, 400_000)
        low = ember.jit(ember.grad(lambda v: ember.numpy.sum(ember.numpy.exp(v) * v))).lower(x)
        low.compile()
        generators = json.loads(sys.argv[1])
        gens = sorted(m for m in sys.modules if m in generators)
        np.asarray(low.compile()(x))
        low.source()
        print(json.dumps({"hit": bool(low.timings().from_cache), "generators": gens,
                          "after_source": sorted(m for m in sys.modules if m in generators)}))
    """
    cold = _run(code, tmp_path, argv=json.dumps(GENERATORS))
    warm = _run(code, tmp_path, argv=json.dumps(GENERATORS))
    assert not cold["hit"] and {"ember.backends.llvm.graph", "ember.backends.llvm.loops"} <= set(cold["generators"])
    assert warm["hit"] and warm["generators"] == [], "a disk-cache hit imported a code generator"
    assert warm["after_source"] == cold["generators"]
