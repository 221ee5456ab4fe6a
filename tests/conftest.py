"""Test configuration: every numpy-backend node is checked against its aval, every graph that
tracing, a transform (grad, vmap) or a pass produces is verified, so a wrong shape rule or a broken
transform or pass fails loudly wherever it happens, and every compiled call is checked against the
oracle (ember.config.check_oracle), so every function the suite runs is a differential test of the
optimizer."""

import atexit
import os
import shutil
import tempfile

# The suite never writes to the user's disk cache: a temporary one for the session (set before ember is
# imported; cache.py reads the variable at each call, and subprocesses and xdist workers inherit it),
# removed by the process that made it. An EMBER_CACHE_DIR the user set (e.g. a cache kept warm between
# runs, or 0) is kept.
if "EMBER_CACHE_DIR" not in os.environ:
    SUITE_CACHE_DIR = os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-test-cache-")
    atexit.register(shutil.rmtree, SUITE_CACHE_DIR, ignore_errors=True)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

import ember.backends.numpy as numpy_backend  # noqa: E402
import ember.config  # noqa: E402
import ember.tracer.ir as ir  # noqa: E402

numpy_backend.CHECK = True
ir.VERIFY = True
if "EMBER_CHECK_ORACLE" not in os.environ:  # EMBER_CHECK_ORACLE=0 runs the suite without it (to time it)
    ember.config.update("ember_check_oracle", True)

# Hypothesis: no per-example deadline (first calls trace and compile); under CI (CI=true) the examples
# are derandomized, so a run is reproducible and cannot fail by chance. Each test states max_examples.
settings.register_profile("ember", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, database=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "ember")


# The suites that compare with NumPy run on both backends: the default (llvm) and the numpy oracle backend.
BOTH_BACKENDS = ("tests/tracer/test_prims_", "tests/numpy/", "tests/test_nn.py", "tests/passes/test_autodiff.py",
                 "tests/passes/test_vmap.py", "tests/passes/test_optimized_vs_oracle.py",
                 "tests/test_random_programs.py", "tests/api/test_vmap_api.py", "tests/api/test_grad_api.py",
                 "tests/benchmarks/test_numpy_baselines.py", "tests/test_examples.py", "tests/test_found_bugs.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_generate_tests(metafunc):
    path = os.path.relpath(str(metafunc.definition.path), ROOT)
    if "ember_backend" in metafunc.fixturenames and path.startswith(BOTH_BACKENDS):
        metafunc.parametrize("ember_backend", ["llvm", "numpy"], indirect=True)


@pytest.fixture(autouse=True)
def ember_backend(request, monkeypatch):
    """The backend a test of a BOTH_BACKENDS suite runs on (EMBER_BACKEND); None elsewhere."""
    name = getattr(request, "param", None)
    if name is not None:
        monkeypatch.setenv("EMBER_BACKEND", name)
    return name


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI (CI=true) nothing may be skipped but a test that needs a GPU: a missing peer (JAX,
    PyTorch, Graphviz) fails the run, so the optional paths are tested, not skipped."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and item.get_closest_marker("gpu") is None and not hasattr(
            report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where only GPU tests may skip: {reason}"


def pytest_runtest_setup(item):
    """A test marked `gpu` skips, with the reason, where no CUDA device can run it; under
    EMBER_REQUIRE_GPU=1 (scripts/gpu-check, a GPU machine) that skip is a failure instead."""
    if item.get_closest_marker("gpu") is None:
        return
    from ember.backends.cuda import runtime

    reason = runtime.missing_reason()
    if reason is None:
        return
    if os.environ.get("EMBER_REQUIRE_GPU", "").strip() == "1":
        pytest.fail(f"EMBER_REQUIRE_GPU=1 but this test needs a GPU: {reason}", pytrace=False)
    pytest.skip(f"needs a GPU: {reason}")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
