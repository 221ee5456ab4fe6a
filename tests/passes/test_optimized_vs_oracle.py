"""The optimized path against the oracle: random programs (the generator of
tests/test_random_programs.py) give the same values and gradients with the pipeline on as with
`optimize=False` on the numpy backend, in float32 and float64; every stage of the pipeline verifies;
the user's inputs are unchanged after every call unless donated (a donated input may change) and no
output aliases an input or another output. CI runs 20 programs per dtype, derandomized (the `ci`
hypothesis profile). (The suite also runs with ember.config.check_oracle on, so each optimized call
here is compared with the oracle a second time, by the backend's checked wrapper.)"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember

pytest.importorskip("jax")  # the generator's module imports JAX at the top

from tests.test_random_programs import EMBER, _inputs, programs, run  # noqa: E402

TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-11}


def _compare(optimized, oracle, dtype, what):
    for k, (a, e) in enumerate(zip(optimized, oracle)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape and a.dtype == e.dtype, f"{what}[{k}]: {a.dtype}{a.shape} vs {e.dtype}{e.shape}"
        tol = TOL.get(np.dtype(a.dtype), 0) if a.dtype.kind == "f" else 0
        scale = max(1.0, float(np.nanmax(np.abs(e), initial=0.0))) if e.size and e.dtype.kind == "f" else 1.0
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol * scale, equal_nan=True, err_msg=f"{what}[{k}]")


def _no_aliasing(outs, inputs):
    outs = [o for o in outs if isinstance(o, np.ndarray) and o.size]
    for i, o in enumerate(outs):
        assert not any(np.shares_memory(o, x) for x in inputs), f"output {i} aliases an input"
        assert not any(np.shares_memory(o, p) for p in outs[:i]), f"output {i} aliases another output"


def _every_stage_verifies(fn, inputs, what):
    for stage in fn.lower(*inputs).stages:
        try:
            stage.graph.verify()
        except Exception as e:
            raise AssertionError(f"{what}: the graph {stage.name} does not verify: {e}") from e


def _check(prog, seed, dtype, donate=()):
    inputs = _inputs(prog, seed, dtype)
    saved = [x.copy() for x in inputs]
    rng = np.random.default_rng(seed + 1)

    def f(*xs):
        return run(EMBER, prog, xs)

    outs = ember.jit(f)(*inputs)
    weights = [rng.normal(size=np.shape(o)).astype(np.asarray(o).dtype) for o in outs]

    def loss(*xs):
        return sum(ember.numpy.sum(o * w) for o, w in zip(run(EMBER, prog, xs), weights))

    argnums = tuple(range(len(inputs)))
    donate = tuple(i for i in donate if i < len(inputs))
    for opt_fn, oracle_fn, what in [
        (ember.jit(f, donate_argnums=donate), ember.jit(f, optimize=False), "value"),
        (ember.jit(ember.grad(loss, argnums=argnums), donate_argnums=donate),
         ember.jit(ember.grad(loss, argnums=argnums), optimize=False), "grad"),
    ]:
        _every_stage_verifies(opt_fn, inputs, what)
        expected = _as_list(oracle_fn(*inputs))
        args = [x.copy() if i in donate else x for i, x in enumerate(inputs)]  # a donated input may change
        got = _as_list(opt_fn(*args))
        _compare(got, expected, dtype, what)
        _no_aliasing(got, args)
        for i, (x, s) in enumerate(zip(inputs, saved)):
            np.testing.assert_array_equal(x, s, err_msg=f"{what}: input {i} was written")


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


_SETTINGS = settings(max_examples=int(os.environ.get("ORACLE_EXAMPLES", "20")), deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                            HealthCheck.data_too_large])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_optimized_programs_match_the_oracle(dtype):
    @_SETTINGS
    @given(prog=programs(), seed=st.integers(0, 2**16), donate=st.sets(st.integers(0, 3), max_size=2))
    def check(prog, seed, donate):
        with np.errstate(all="ignore"):
            _check(prog, seed, dtype, tuple(sorted(donate)))

    check()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_found_gather_with_scalar_indices_returned_a_view_of_the_input(dtype):
    """Found by this test: a gather whose indices are all scalars ran as NumPy basic indexing, so the
    compiled function returned a view of the user's input (optimized and unoptimized alike)."""
    from tests.test_random_programs import Program

    prog = Program(inputs=((1, 1),), ops=(("at", (0,), ("set", (0, 0), 0.5)),
                                          ("traced", (0, 1), ("get", 0, 1, None, False))))
    _check(prog, 0, dtype)
