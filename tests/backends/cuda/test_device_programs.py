"""The whole-program cases of test_programs.py on a GPU: the same graphs and plans compiled by
`compile_many(..., device="cuda")` (one RawModule), called with CuPy arrays (and NumPy arrays, copied
to the device), checked against the oracle as on the host; called twice, from two threads and on two
streams at once. Marked `gpu`: they skip without a device (EMBER_REQUIRE_GPU=1 makes that a failure).
"""

from __future__ import annotations

import numpy as np
import pytest

from ember.backends.device_arrays import overlap as device_overlap
from ember.backends.device_arrays import to_host
from tests.backends.cuda.test_programs import (
    CALLS,
    TWICE,
    all_cases,
    call_and_check,
    two_threads_match_alone,
    writes_input,
)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def cases():
    return all_cases()


@pytest.fixture(scope="module")
def compiled(cases, cp) -> dict:
    from ember.backends.cuda.backend import compile_many

    exes = compile_many([(c.graph, c.plan) for c in cases.values()], device="cuda")
    return dict(zip(cases, exes))


def _check_on_device(cp, case, exe) -> list:
    """The oracle check on CuPy arrays, and the outputs CuPy arrays sharing memory with no input or
    earlier output."""
    ins, outs = call_and_check(case, exe, cp.asarray)
    assert all(isinstance(o, cp.ndarray) for o in outs), f"{case.name}: outputs are not CuPy arrays"
    for k, o in enumerate(outs):
        assert not any(device_overlap(o, x) for x in ins + outs[:k]), f"{case.name}: output {k} shares memory"
    return outs


def test_programs_match_the_oracle_on_the_device(cp, cases, compiled):
    failures = []
    for name, case in cases.items():
        try:
            _check_on_device(cp, case, compiled[name])
        except Exception as e:  # every case is run; all failures are reported together
            failures.append(f"{name}: {type(e).__name__}: {e}")
    assert not failures, f"{len(failures)} of {len(cases)} programs fail on the device:\n" + "\n".join(failures)


@pytest.mark.parametrize("prefix", ["eam-grad-float64", "inplace-exp-donated-x", "random-"])
def test_numpy_inputs_are_copied_to_the_device(cp, cases, compiled, prefix):
    name = next(n for n in cases if n.startswith(prefix))
    case, exe = cases[name], compiled[name]
    if name.startswith("inplace-"):
        assert writes_input(exe)  # a donated NumPy array: its device copy is written, not the array
    _, outs = call_and_check(case, exe)
    assert all(isinstance(o, cp.ndarray) for o in outs)


@pytest.mark.parametrize("name", TWICE)
def test_called_twice_gives_the_same_results_on_the_device(cp, cases, compiled, name):
    case, exe = cases[name], compiled[name]
    first = [to_host(o) for o in _check_on_device(cp, case, exe)]
    second = [to_host(o) for o in _check_on_device(cp, case, exe)]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def _two_inputs(case):
    rng = np.random.default_rng(5)
    return [case.flat_args, [(a + 0.25 * rng.random(a.shape)).astype(a.dtype) for a in case.flat_args]]


@pytest.mark.parametrize("name", ["eam-grad-float64", "dense-grad-float32"])
def test_two_threads_at_once_on_the_device(cp, cases, compiled, name):
    case, exe = cases[name], compiled[name]
    inputs = [[cp.asarray(a) for a in args] for args in _two_inputs(case)]
    two_threads_match_alone(exe, inputs, to_host)


@pytest.mark.parametrize("name", ["eam-grad-float64", "dense-grad-float32"])
def test_calls_in_flight_on_two_streams(cp, cases, compiled, name):
    """Calls queued on two streams before either is synchronized: each its own workspace."""
    case, exe = cases[name], compiled[name]
    inputs = [[cp.asarray(a) for a in args] for args in _two_inputs(case)]
    alone = [[to_host(o) for o in exe(*args)] for args in inputs]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    results: list = [[], []]
    for _ in range(CALLS):
        for k, s in enumerate(streams):
            with s:
                results[k].append(exe(*inputs[k]))
    for s in streams:
        s.synchronize()
    for k in range(2):
        for outs in results[k]:
            for a, b in zip(outs, alone[k]):
                np.testing.assert_array_equal(to_host(a), b)
